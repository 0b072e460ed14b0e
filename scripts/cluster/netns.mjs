// Separate hosts on one machine for the fault soak: a network namespace per
// host (`ip netns`), each wired by a veth pair to a router namespace (the
// hub) that forwards between them; nothing is connected to the machine's own
// network. Host k gets 10.213.k.2/24 (its side of the pair; the hub's side is
// 10.213.k.1, its default route): addresses exist only inside these
// namespaces. A partition between two hosts is a pair of policy rules in the
// hub that drop what one sends the other (`ip rule ... blackhole`): packets
// vanish in flight, as on a cut link, and neither host's own stack sees an
// error. destroy() deletes every namespace this created (their interfaces go
// with them).
//
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2; no kernel module
// beyond veth.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

const SUBNET = '10.213';
// iproute2's ip, also where a user's PATH (kept through sudo) has no sbin folder.
const IP = ['/usr/sbin/ip', '/sbin/ip'].find((f) => fs.existsSync(f)) || 'ip';

function ip(args) {
  return execFileSync(IP, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

function sleepSync(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export class Network {
  // `prefix`: the namespaces' names begin with it (unique per run);
  // `hosts`: the hosts' names, in order (at most 250).
  constructor(prefix, hosts = []) {
    this.prefix = prefix;
    this.hosts = hosts;
    this.cuts = new Set();  // "a|b" with a < b
  }

  // Whether this process may create namespaces: root, iproute2, and a
  // namespace actually made and deleted ('' when it can; else why not).
  static available() {
    if (!process.getuid || process.getuid() !== 0) return 'needs root';
    const probe = `mdbprobe${process.pid}`;
    try {
      ip(['netns', 'add', probe]);
      ip(['netns', 'del', probe]);
      return '';
    } catch (e) {
      return `ip netns does not work here: ${e.stderr ? e.stderr.toString().trim() : e.message}`;
    }
  }

  // Destroys the networks earlier runs left behind (their process, named in
  // the prefix mdb<pid>, is gone: killed before it could clean up).
  static sweepAbandoned() {
    let names = [];
    try {
      names = ip(['netns', 'list']).split('\n').map((l) => l.split(' ')[0]).filter(Boolean);
    } catch {
      return;
    }
    const prefixes = new Set();
    for (const n of names) {
      const m = /^(mdb(\d+))-/.exec(n);
      if (m && !pidAlive(Number(m[2]))) prefixes.add(m[1]);
    }
    for (const prefix of prefixes) {
      const hosts = names.filter((n) => n.startsWith(`${prefix}-`) && n !== `${prefix}-hub`).map((n) => n.slice(prefix.length + 1));
      new Network(prefix, hosts).destroy();
    }
  }

  static fromJson(j) {
    const n = new Network(j.prefix, j.hosts);
    for (const c of j.cuts || []) n.cuts.add(c);
    return n;
  }

  toJson() {
    return { prefix: this.prefix, hosts: this.hosts, cuts: [...this.cuts] };
  }

  ns(host) {
    if (host === 'hub') return `${this.prefix}-hub`;
    if (!this.hosts.includes(host)) throw new Error(`no host ${host} in the network`);
    return `${this.prefix}-${host}`;
  }

  addr(host) {
    const k = this.hosts.indexOf(host);
    if (k < 0) throw new Error(`no host ${host} in the network`);
    return `${SUBNET}.${k + 1}.2`;
  }

  // The hub and every host, wired. Throws (after destroying what it made) on failure.
  create() {
    try {
      const hub = this.ns('hub');
      ip(['netns', 'add', hub]);
      ip(['-n', hub, 'link', 'set', 'lo', 'up']);
      // The hub forwards between the hosts (this namespace's own setting).
      execFileSync(IP, ['netns', 'exec', hub, 'sh', '-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward'], { stdio: 'ignore' });
      this.hosts.forEach((h, i) => {
        const k = i + 1, ns = this.ns(h);
        ip(['netns', 'add', ns]);
        ip(['-n', hub, 'link', 'add', `v${k}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
        ip(['-n', hub, 'addr', 'add', `${SUBNET}.${k}.1/24`, 'dev', `v${k}`]);
        ip(['-n', hub, 'link', 'set', `v${k}`, 'up']);
        ip(['-n', ns, 'addr', 'add', `${SUBNET}.${k}.2/24`, 'dev', 'eth0']);
        ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
        ip(['-n', ns, 'link', 'set', 'lo', 'up']);
        ip(['-n', ns, 'route', 'add', 'default', 'via', `${SUBNET}.${k}.1`]);
      });
    } catch (e) {
      this.destroy();
      throw new Error(`creating the network: ${e.stderr ? e.stderr.toString() : e.message}`);
    }
    return this;
  }

  // [file, args] that run `cmd args` inside `host`'s namespace.
  exec(host, cmd, args) {
    return [IP, ['netns', 'exec', this.ns(host), cmd, ...args]];
  }

  // Drops all traffic between every host of `as` and every host of `bs`
  // (each direction recorded as its rule goes in).
  cut(as, bs) {
    for (const a of [].concat(as)) for (const b of [].concat(bs)) {
      if (a === b) continue;
      for (const [x, y] of [[a, b], [b, a]]) {
        const key = `${x}>${y}`;
        if (this.cuts.has(key)) continue;
        ip(['-n', this.ns('hub'), 'rule', 'add', 'from', this.addr(x), 'to', this.addr(y), 'blackhole']);
        this.cuts.add(key);
      }
    }
  }

  // Heals every cut; throws if a drop rule is left in the hub.
  heal() {
    for (const key of [...this.cuts]) {
      const [x, y] = key.split('>');
      try {
        ip(['-n', this.ns('hub'), 'rule', 'del', 'from', this.addr(x), 'to', this.addr(y), 'blackhole']);
      } catch {}
      this.cuts.delete(key);
    }
    const left = ip(['-n', this.ns('hub'), 'rule', 'show']).split('\n').filter((l) => l.includes('blackhole'));
    if (left.length) throw new Error(`healing left drop rules in the hub: ${left.join('; ')}`);
  }

  // The pids of processes inside any host of this network.
  pids() {
    const out = [];
    for (const h of this.hosts) {
      try {
        out.push(...ip(['netns', 'pids', this.ns(h)]).split('\n').filter(Boolean).map(Number));
      } catch {}
    }
    return out;
  }

  // Kills whatever still runs inside (again, while something forks meanwhile),
  // then deletes every namespace (idempotent).
  destroy() {
    for (let round = 0; round < 20; round++) {
      const pids = this.pids();
      if (!pids.length) break;
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
      sleepSync(100);
    }
    for (const ns of [...this.hosts.map((h) => `${this.prefix}-${h}`), `${this.prefix}-hub`]) {
      try {
        ip(['netns', 'del', ns]);
      } catch {}
    }
  }
}
