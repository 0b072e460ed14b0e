// A moeedb cluster on one machine, on loopback: three etcd members, three
// PostgreSQL 15 servers under Patroni (a primary and two standbys, one of
// them synchronous at a time, strict synchronous mode, pg_rewind), N moeedb
// nodes over them. The CLI is
// scripts/cluster.sh (which installs the packages); the fault soak imports
// the Cluster class to kill and restart each part.
//
//   node scripts/cluster/cluster.mjs up [--nodes N] [--dir D] [--bin B] [--model M]
//   node scripts/cluster/cluster.mjs status [--json] [--dir D]
//   node scripts/cluster/cluster.mjs down [--dir D]
//
// Every process it starts is recorded in D/state.json; `down` stops exactly
// those and removes D. Given a Network (scripts/cluster/netns.mjs), each
// member runs on a host of its own (etcd0-2, pg0-2, node0-...), reached at that
// host's address; the caller then runs inside the network (a host of its own,
// as the fault soak does), since nothing outside reaches it. moeedb nodes connect as the role moeedb (a password,
// scram-sha-256; owner of the database moeedb, nothing more) and find the
// primary through Patroni's REST APIs (the DSN's patroni=), never through a
// postgres alone: a postgres whose Patroni died is fenced off
// (docs/cluster.md, "Finding the primary").
import { spawn, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PG_BIN = '/usr/lib/postgresql/15/bin';
export const DEFAULT_DIR = path.join(os.tmpdir(), 'moeedb-cluster');

// Timeouts for 2-core machines (docs/cluster.md): the leader key lives ttl
// seconds, so a primary's loss is noticed within ttl; Patroni's loop runs
// every loop_wait; retry_timeout bounds a DCS or PostgreSQL call (ttl must
// exceed loop_wait + 2 * retry_timeout). etcd's heartbeat and election
// timeouts are 2.5 times its defaults: a busy 2-core machine delays heartbeats.
// A moeedb node that stops renewing its etcd lease drops out after node_lease
// seconds (etcd raises a lease to 1.5 election timeouts at least).
export const TIMEOUTS = { ttl: 8, loop_wait: 1, retry_timeout: 3, etcd_heartbeat_ms: 250, etcd_election_ms: 2500,
  node_lease: 4, node_left_delay: 5 };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const isRoot = () => process.getuid && process.getuid() === 0;

function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

// A base port with `count` free ports above it, below Linux's ephemeral
// range (32768+), where outgoing connections would take ports meanwhile.
async function freeBase(count) {
  for (let tries = 0; tries < 50; tries++) {
    const base = 10000 + Math.floor(Math.random() * 20000);
    let ok = true;
    for (let p = base; p < base + count && ok; p++) ok = await portFree(p);
    if (ok) return base;
  }
  throw new Error('no free block of loopback ports');
}

async function getJson(url, timeoutMs = 2000) {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await fetch(url, { signal: ctl.signal });
    const text = await res.text();
    try {
      return { status: res.status, body: JSON.parse(text) };
    } catch {
      return { status: res.status, body: text };
    }
  } catch {
    return null;
  } finally {
    clearTimeout(t);
  }
}

async function until(what, fn, timeoutMs) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

export function alive(pid) {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    // A zombie (exited, not yet reaped) counts as dead.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function kill(pid, sig) {
  try {
    process.kill(pid, sig);
  } catch {}
}

// Children of `pid` (from /proc).
function childrenOf(pid) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch {}
  }
  return out;
}

// Starts a detached process logging to `log`; as root, `user` runs it
// (setpriv execs it, so the pid is the program's own) in the log's folder,
// not in ours, which that user may not be able to enter (a checkout under a
// private folder).
function start(cmd, args, log, { user, env, cwd: dir } = {}) {
  const fd = fs.openSync(log, 'a');
  let file = cmd, argv = args, cwd = dir;
  if (user && isRoot()) {
    file = 'setpriv';
    argv = ['--reuid', user, '--regid', user, '--init-groups', '--', cmd, ...args];
    cwd = path.dirname(log);
  }
  const child = spawn(file, argv, { detached: true, cwd, stdio: ['ignore', fd, fd], env: { ...process.env, ...env } });
  child.unref();
  fs.closeSync(fd);
  return child.pid;
}

export class Cluster {
  // `net`: a Network whose hosts are named etcd0-2, pg0-2 and node0-...;
  // null: everything on loopback.
  constructor(dir = DEFAULT_DIR, { net = null } = {}) {
    this.dir = path.resolve(dir);
    this.statePath = path.join(this.dir, 'state.json');
    this.net = net;
  }

  // The address of a member by its name (etcd0, pg1, node2).
  host(name) {
    return this.net ? this.net.addr(name) : '127.0.0.1';
  }

  restUrl(p) {
    return `http://${this.host(p.name)}:${p.rest}`;
  }

  // Starts `cmd` on host `name` (on loopback: here).
  startOn(name, cmd, args, log, opts) {
    if (!this.net) return start(cmd, args, log, opts);
    if (opts && opts.user && isRoot()) {
      // setpriv inside the namespace: ip netns exec and setpriv both exec, so the pid stays the program's.
      const [file, argv] = this.net.exec(name, 'setpriv',
        ['--reuid', opts.user, '--regid', opts.user, '--init-groups', '--', cmd, ...args]);
      return start(file, argv, log, { env: opts.env, cwd: path.dirname(log) });
    }
    const [file, argv] = this.net.exec(name, cmd, args);
    return start(file, argv, log, opts);
  }

  load() {
    this.state = JSON.parse(fs.readFileSync(this.statePath, 'utf8'));
    return this;
  }

  save() {
    // Mode 600: it holds the superuser's password.
    fs.writeFileSync(this.statePath + '.tmp', JSON.stringify(this.state, null, 2), { mode: 0o600 });
    fs.renameSync(this.statePath + '.tmp', this.statePath);
  }

  // What the nodes connect with: every server, the password in a passfile,
  // the primary as Patroni names it.
  get dsn() {
    const hosts = this.state.postgres.map((p) => `${this.host(p.name)}:${p.port}`).join(',');
    const rest = this.state.postgres.map((p) => `${this.host(p.name)}:${p.rest}`).join(',');
    // TCP keepalives: a machine lost without a reset (power, a cut link) is
    // noticed in seconds, not at the kernel's two hours.
    return `postgresql://moeedb@${hosts}/moeedb?target_session_attrs=read-write&connect_timeout=2` +
           '&keepalives_idle=5&keepalives_interval=2&keepalives_count=3' +
           `&passfile=${encodeURIComponent(path.join(this.dir, 'moeedb.pgpass'))}&patroni=${rest}`;
  }

  // psql as the superuser on server i (its password from the state); the
  // statement on stdin, so no password shows in a process list.
  psql(i, sql, db = 'postgres') {
    return execFileSync(`${PG_BIN}/psql`, ['-h', this.host(this.state.postgres[i].name), '-p', String(this.state.postgres[i].port), '-U', 'postgres',
      '-d', db, '-v', 'ON_ERROR_STOP=1', '-qAt'], { input: sql, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env,
      PGPASSWORD: this.state.secrets.superuser } }).toString();
  }

  async up({ nodes = 3, bin = path.join(ROOT, 'build/moeedb'), model = '' } = {}) {
    if (fs.existsSync(this.statePath)) throw new Error(`a cluster is already up in ${this.dir} (down first)`);
    if (!fs.existsSync(bin)) throw new Error(`no moeedb binary at ${bin} (bash scripts/setup.sh builds it)`);
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o755 });
    fs.chmodSync(this.dir, 0o755);
    // A port taken between choosing it and binding it (another program):
    // etcd exits; the members start again on other ports.
    for (let attempt = 1; ; attempt++) {
      const base = await freeBase(60);
      this.state = {
        dir: this.dir, bin, model,
        etcd: [0, 1, 2].map((i) => ({ name: `etcd${i}`, client: base + i, peer: base + 10 + i, pid: 0 })),
        postgres: [0, 1, 2].map((i) => ({ name: `pg${i}`, port: base + 20 + i, rest: base + 30 + i, patroni_pid: 0 })),
        secrets: Object.fromEntries(['superuser', 'replicator', 'moeedb'].map((k) => [k, crypto.randomBytes(18).toString('hex')])),
        nodes: Array.from({ length: nodes }, (_, i) => ({ port: base + 40 + i, pid: 0 })),
      };
      this.save();
      for (let i = 0; i < 3; i++) this.startEtcd(i);
      const healthy = await until('every etcd member', async () => {
        if (this.state.etcd.some((e) => !alive(e.pid))) return 'died';
        const h = await Promise.all(this.state.etcd.map((e) => getJson(`http://${this.host(e.name)}:${e.client}/health`)));
        return h.every((r) => r && r.body && r.body.health === 'true') && 'ok';
      }, 60000);
      if (healthy === 'ok') break;
      for (const e of this.state.etcd) kill(e.pid, 'SIGKILL');
      for (const e of this.state.etcd) fs.rmSync(path.join(this.dir, e.name), { recursive: true, force: true });
      if (attempt === 3) throw new Error(`etcd did not start (see ${this.dir}/etcd*.log)`);
    }
    for (let i = 0; i < this.state.postgres.length; i++) this.writePatroniConfig(i);
    this.startPatroni(0);
    await until('the first PostgreSQL primary', async () => (await this.roles())[0] === 'primary', 120000);
    for (let i = 1; i < this.state.postgres.length; i++) this.startPatroni(i);
    await this.waitSyncStandby(180000);
    await this.waitStandbys(this.state.postgres.length - 1, 180000);
    // The nodes' role: a password, its own database, monitoring, nothing more.
    this.psql(0, `CREATE ROLE moeedb LOGIN PASSWORD '${this.state.secrets.moeedb}'`);
    this.psql(0, 'CREATE DATABASE moeedb OWNER moeedb');
    this.psql(0, 'REVOKE ALL ON DATABASE moeedb FROM PUBLIC');
    // pg_monitor: reads pg_stat_replication (is a synchronous standby streaming?).
    this.psql(0, 'GRANT pg_monitor TO moeedb');
    const pgpass = path.join(this.dir, 'moeedb.pgpass');
    fs.writeFileSync(pgpass, `${this.net ? '*' : '127.0.0.1'}:*:moeedb:moeedb:${this.state.secrets.moeedb}\n`, { mode: 0o600 });
    for (let i = 0; i < nodes; i++) this.startNode(i);
    for (let i = 0; i < nodes; i++) {
      try {
        await this.waitNode(i);
      } catch (e) {
        // Its port taken meanwhile: once more on another.
        if (alive(this.state.nodes[i].pid)) throw e;
        this.state.nodes[i].port = await freeBase(1);
        this.startNode(i);
        await this.waitNode(i);
      }
    }
    return this;
  }

  startEtcd(i) {
    const e = this.state.etcd[i];
    const peers = this.state.etcd.map((m) => `${m.name}=http://${this.host(m.name)}:${m.peer}`).join(',');
    const h = this.host(e.name);
    e.pid = this.startOn(e.name, 'etcd', [
      '--name', e.name, '--data-dir', path.join(this.dir, e.name),
      '--listen-client-urls', `http://${h}:${e.client}`, '--advertise-client-urls', `http://${h}:${e.client}`,
      '--listen-peer-urls', `http://${h}:${e.peer}`, '--initial-advertise-peer-urls', `http://${h}:${e.peer}`,
      '--initial-cluster', peers, '--initial-cluster-state', 'new', '--initial-cluster-token', `moeedb-${path.basename(this.dir)}`,
      '--heartbeat-interval', String(TIMEOUTS.etcd_heartbeat_ms), '--election-timeout', String(TIMEOUTS.etcd_election_ms),
    ], path.join(this.dir, `${e.name}.log`));
    this.save();
  }

  get archiveDir() {
    return path.join(this.dir, 'wal_archive');
  }

  get archiveCommand() {
    const a = this.archiveDir;
    return `test ! -f ${a}/%f && cp %p ${a}/%f.$$ && mv ${a}/%f.$$ ${a}/%f || cmp -s %p ${a}/%f`;
  }

  writePatroniConfig(i) {
    if (!fs.existsSync(this.archiveDir)) {
      fs.mkdirSync(this.archiveDir, { mode: 0o700 });
      if (isRoot()) execFileSync('chown', ['postgres:postgres', this.archiveDir]);
    }
    const p = this.state.postgres[i];
    const home = path.join(this.dir, p.name);
    fs.mkdirSync(home, { recursive: true, mode: 0o700 });
    if (isRoot()) execFileSync('chown', ['postgres:postgres', home]);
    const etcdHosts = this.state.etcd.map((e) => `${this.host(e.name)}:${e.client}`).join(',');
    const h = this.host(p.name);
    // Who may connect: the hosts' network (netns.mjs) or loopback.
    const peers = this.net ? '10.213.0.0/16' : '127.0.0.1/32';
    // Passwords (scram-sha-256) over TCP; the role moeedb reaches its own
    // database only. Patroni, as the OS user postgres, by the socket (peer).
    const yaml = `scope: moeedb-${path.basename(this.dir)}
name: ${p.name}
restapi:
  listen: ${h}:${p.rest}
  connect_address: ${h}:${p.rest}
etcd3:
  hosts: ${etcdHosts}
watchdog:
  mode: off
bootstrap:
  dcs:
    ttl: ${TIMEOUTS.ttl}
    loop_wait: ${TIMEOUTS.loop_wait}
    retry_timeout: ${TIMEOUTS.retry_timeout}
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: true
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        synchronous_commit: remote_apply
        wal_log_hints: 'on'
        max_connections: 200
        password_encryption: scram-sha-256
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        # Every finished WAL segment copied to D/wal_archive: with a base
        # backup, what a point-in-time restore replays (restore()). By the
        # standbys too (always: a segment a killed primary finished but never
        # archived is not lost), each copy under a temporary name then moved
        # (a copy cut short is never taken for the segment), a file already
        # there with the same bytes counted as archived.
        archive_mode: always
        archive_command: '${this.archiveCommand}'
        archive_timeout: 60
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
postgresql:
  listen: ${h}:${p.port}
  connect_address: ${h}:${p.port}
  data_dir: ${home}/data
  bin_dir: ${PG_BIN}
  pgpass: ${home}/pgpass
  # A new standby's base backup starts at once (an immediate checkpoint),
  # not after a spread one (minutes: checkpoint_completion_target x timeout).
  basebackup:
    - checkpoint: fast
  authentication:
    superuser: {username: postgres, password: ${this.state.secrets.superuser}}
    replication: {username: replicator, password: ${this.state.secrets.replicator}}
    rewind: {username: postgres, password: ${this.state.secrets.superuser}}
  parameters:
    unix_socket_directories: '${home}'
  pg_hba:
    - local all postgres peer
    - host replication replicator ${peers} scram-sha-256
    - host moeedb moeedb ${peers} scram-sha-256
    - host all postgres ${peers} scram-sha-256
`;
    fs.writeFileSync(path.join(home, 'patroni.yml'), yaml);
    if (isRoot()) execFileSync('chown', ['postgres:postgres', path.join(home, 'patroni.yml')]);
  }

  startPatroni(i) {
    const p = this.state.postgres[i];
    const home = path.join(this.dir, p.name);
    const log = path.join(this.dir, `${p.name}.log`);
    fs.closeSync(fs.openSync(log, 'a'));
    if (isRoot()) execFileSync('chown', ['postgres:postgres', log]);
    p.patroni_pid = this.startOn(p.name, 'patroni', [path.join(home, 'patroni.yml')], log, { user: 'postgres', env: { HOME: home } });
    this.save();
  }

  postmasterPid(i) {
    try {
      const pid = Number(fs.readFileSync(path.join(this.dir, this.state.postgres[i].name, 'data/postmaster.pid'), 'utf8').split('\n')[0]);
      return alive(pid) ? pid : 0;
    } catch {
      return 0;
    }
  }

  // Each server's role as its Patroni reports it: primary, standby or down.
  async roles() {
    return Promise.all(this.state.postgres.map(async (p) => {
      const r = await getJson(`${this.restUrl(p)}/patroni`, 1500);
      if (!r || typeof r.body !== 'object' || r.body.state !== 'running') return 'down';
      return r.body.role === 'master' || r.body.role === 'primary' ? 'primary' : 'standby';
    }));
  }

  // The index of the synchronous standby, as Patroni's /cluster says; -1 if none.
  async syncStandby() {
    for (const p of this.state.postgres) {
      const r = await getJson(`${this.restUrl(p)}/cluster`, 1500);
      if (!r || !r.body || !Array.isArray(r.body.members)) continue;
      const sync = r.body.members.find((m) => m.role === 'sync_standby');
      return sync ? this.state.postgres.findIndex((x) => x.name === sync.name) : -1;
    }
    return -1;
  }

  // Resolves when `n` standbys stream from the primary.
  async waitStandbys(n, timeoutMs) {
    return until(`${n} streaming standbys`, async () => {
      for (const p of this.state.postgres) {
        const r = await getJson(`${this.restUrl(p)}/cluster`, 1500);
        if (!r || !r.body || !Array.isArray(r.body.members)) continue;
        const streaming = r.body.members.filter((m) => m.role !== 'leader' && (m.state === 'streaming' || m.state === 'running'));
        if (streaming.length >= n) return true;
      }
      return false;
    }, timeoutMs);
  }

  // Resolves to the index of the server Patroni reports primary, once one does.
  async waitPrimary(timeoutMs) {
    const found = await until('a PostgreSQL primary', async () => {
      const p = (await this.roles()).indexOf('primary');
      return p >= 0 ? p + 1 : 0;
    }, timeoutMs);
    return found - 1;
  }

  // The last `lines` lines of each PostgreSQL server's Patroni log (what a
  // failed run prints, the cluster's folder being removed after it).
  patroniLogTails(lines = 40) {
    return (this.state?.postgres || []).map((p) => {
      let text = '';
      try {
        text = fs.readFileSync(path.join(this.dir, `${p.name}.log`), 'utf8');
      } catch {}
      return `--- ${p.name}.log (last ${lines} lines)\n${text.split('\n').slice(-lines - 1).join('\n')}`;
    }).join('\n');
  }

  // Resolves when one server is primary and another its streaming
  // synchronous standby (writes can commit).
  async waitSyncStandby(timeoutMs) {
    return until('a synchronous standby', async () => {
      for (const p of this.state.postgres) {
        const r = await getJson(`${this.restUrl(p)}/cluster`, 1500);
        if (!r || !r.body || !Array.isArray(r.body.members)) continue;
        const sync = r.body.members.find((m) => m.role === 'sync_standby');
        if (sync && (sync.state === 'streaming' || sync.state === 'running')) return true;
      }
      return false;
    }, timeoutMs);
  }

  startNode(i) {
    const n = this.state.nodes[i];
    // Every node joins the cluster in etcd: sharded collections are placed on them.
    const etcd = this.state.etcd.map((e) => `${this.host(e.name)}:${e.client}`).join(',');
    const args = ['serve', '--db', this.dsn, '--index-dir', path.join(this.dir, `node${i}`), '--port', String(n.port),
      '--host', this.host(`node${i}`),
      '--threads', '1', '--workers', '1', '--etcd', etcd, '--node-id', `node${i}`, '--lease-ttl', String(TIMEOUTS.node_lease),
      '--node-left-delay', String(TIMEOUTS.node_left_delay)];
    if (this.state.model) args.push('--model', this.state.model);
    // More flags for every node, e.g. MOEEDB_NODE_ARGS="--max-staleness-ms 2000" (docs/cluster.md).
    if (process.env.MOEEDB_NODE_ARGS) args.push(...process.env.MOEEDB_NODE_ARGS.split(' ').filter(Boolean));
    n.pid = this.startOn(`node${i}`, this.state.bin, args, path.join(this.dir, `node${i}.log`));
    this.save();
  }

  async waitNode(i, timeoutMs = 120000) {
    const n = this.state.nodes[i];
    await until(`moeedb node ${i}`, async () => {
      if (!alive(n.pid)) throw new Error(`moeedb node ${i} exited: see ${path.join(this.dir, `node${i}.log`)}`);
      const h = await getJson(`${this.nodeUrl(i)}/health`);
      return h && h.status === 200;
    }, timeoutMs);
  }

  nodeUrl(i) {
    return `http://${this.host(`node${i}`)}:${this.state.nodes[i].port}`;
  }

  // kill -9 of a moeedb node (or another signal: SIGSTOP, SIGCONT).
  killNode(i, sig = 'SIGKILL') {
    kill(this.state.nodes[i].pid, sig);
  }

  // A new moeedb node joining the cluster; its index.
  async addNode() {
    this.state.nodes.push({ port: await freeBase(1), pid: 0 });
    const i = this.state.nodes.length - 1;
    this.startNode(i);
    await this.waitNode(i);
    return i;
  }

  // The replicas the nodes claim in etcd for a sharded collection split into
  // `split` shards: shard -> node ids (docs/cluster.md, "Shards").
  async claims(collection, split) {
    const prefix = `/moeedb/moeedb/replicas/${collection}/`;
    const b64 = (x) => Buffer.from(x).toString('base64');
    const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    for (const e of this.state.etcd) {
      try {
        const r = await fetch(`http://${this.host(e.name)}:${e.client}/v3/kv/range`, { method: 'POST',
          body: JSON.stringify({ key: b64(prefix), range_end: b64(end) }), signal: AbortSignal.timeout(2000) });
        const j = await r.json();
        const out = {};
        for (const kv of j.kvs || []) {
          const [shards, shard, node] = Buffer.from(kv.key, 'base64').toString().slice(prefix.length).split('/');
          if (Number(shards) === split) (out[shard] ||= []).push(node);
        }
        return out;
      } catch {}
    }
    throw new Error('no etcd member answered');
  }

  // The loss of a PostgreSQL machine: its Patroni, its postmaster and every
  // postgres process under it, kill -9 at once.
  killPostgresMachine(i) {
    const post = this.postmasterPid(i);
    const victims = [this.state.postgres[i].patroni_pid, post, ...(post ? childrenOf(post) : [])];
    for (const pid of victims) if (pid) kill(pid, 'SIGKILL');
    return victims.filter(Boolean);
  }

  // kill -9 of an etcd member (startEtcd(i) starts it again with its data).
  killEtcd(i) {
    kill(this.state.etcd[i].pid, 'SIGKILL');
  }

  // A Patroni crash alone: kill -9 of Patroni, its postgres left running (and
  // writable, if it was the primary: fenced by the nodes' patroni=).
  killPatroni(i) {
    kill(this.state.postgres[i].patroni_pid, 'SIGKILL');
  }

  // A lost machine replaced: a new one under the same name and address, with
  // an empty disk; Patroni makes it a standby from the primary's base backup.
  replaceMachine(i) {
    if (alive(this.state.postgres[i].patroni_pid) || this.postmasterPid(i)) throw new Error(`pg${i} is still running`);
    fs.rmSync(path.join(this.dir, this.state.postgres[i].name, 'data'), { recursive: true, force: true });
    this.startPatroni(i);
  }

  // A base backup of the primary (pg_basebackup as the replication role, its
  // WAL included, an immediate checkpoint) in D/backups/<name>: what restore()
  // starts from. Returns its folder.
  async backup(name) {
    const p = (await this.roles()).indexOf('primary');
    if (p < 0) throw new Error('no primary to back up');
    const dest = path.join(this.dir, 'backups', name);
    fs.mkdirSync(path.dirname(dest), { recursive: true, mode: 0o700 });
    const pg = this.state.postgres[p];
    execFileSync(`${PG_BIN}/pg_basebackup`, ['-h', this.host(pg.name), '-p', String(pg.port), '-U', 'replicator',
      '-D', dest, '-X', 'stream', '-c', 'fast', '-w'], { stdio: 'pipe', env: { ...process.env, PGPASSWORD: this.state.secrets.replicator } });
    if (isRoot()) execFileSync('chown', ['-R', 'postgres:postgres', path.dirname(dest)]);
    return dest;
  }

  // Runs a PostgreSQL program as the OS user postgres (when root; else as this user).
  asPostgres(program, args, opts = {}) {
    const [file, argv] = isRoot() ? ['setpriv', ['--reuid', 'postgres', '--regid', 'postgres', '--init-groups', '--',
      `${PG_BIN}/${program}`, ...args]] : [`${PG_BIN}/${program}`, args];
    return execFileSync(file, argv, { stdio: 'pipe', ...opts }).toString();
  }

  // A point-in-time restore of the whole PostgreSQL cluster under running
  // nodes, as an operator does it: the current WAL archived, every member
  // stopped, Patroni's keys removed from etcd, the base backup `backupDir`
  // replayed from the WAL archive on pg0 by PostgreSQL alone (its socket
  // only, no Patroni) up to `target` (a Date) and promoted there (a new
  // timeline), then handed to Patroni, which takes it as the cluster; pg1 and
  // pg2 start empty and clone it. Resolves once a synchronous standby and
  // both standbys stream. Writes committed after `target` are gone: the
  // nodes must notice their log went back and rebuild.
  async restore(backupDir, target) {
    const roles = await this.roles();
    const p = roles.indexOf('primary');
    if (p >= 0) {
      // The segment holding `target` archived before anything stops.
      const segment = this.psql(p, 'SELECT pg_walfile_name(pg_switch_wal())').trim();
      await until(`WAL segment ${segment} archived`, async () => {
        const last = this.psql(p, 'SELECT coalesce(last_archived_wal, \'\') FROM pg_stat_archiver').trim();
        return last >= segment;
      }, 60000);
    }
    for (let i = 0; i < this.state.postgres.length; i++) this.killPostgresMachine(i);
    await until('every PostgreSQL member stopped', async () => this.state.postgres.every((_, i) => !this.postmasterPid(i) &&
      !alive(this.state.postgres[i].patroni_pid)), 60000);
    // Patroni's keys (scope moeedb-<dir>, namespace /service): the cluster starts anew from the restored data.
    const prefix = `/service/moeedb-${path.basename(this.dir)}/`;
    const b64 = (x) => Buffer.from(x).toString('base64');
    const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
    await until('Patroni\'s keys deleted from etcd', async () => {
      for (const e of this.state.etcd) {
        try {
          const r = await fetch(`http://${this.host(e.name)}:${e.client}/v3/kv/deleterange`, { method: 'POST',
            body: JSON.stringify({ key: b64(prefix), range_end: b64(end) }), signal: AbortSignal.timeout(2000) });
          if (r.ok) return true;
        } catch {}
      }
      return false;
    }, 30000);
    const home = (i) => path.join(this.dir, this.state.postgres[i].name);
    for (let i = 0; i < this.state.postgres.length; i++) fs.rmSync(path.join(home(i), 'data'), { recursive: true, force: true });
    // A killed postmaster's socket and its lock stay behind (and, unreaped
    // in a container, its pid looks alive to the new one's check).
    for (const f of fs.readdirSync(home(0))) if (f.startsWith('.s.PGSQL.')) fs.rmSync(path.join(home(0), f), { force: true });
    const data = path.join(home(0), 'data');
    fs.cpSync(backupDir, data, { recursive: true });
    fs.chmodSync(data, 0o700);
    fs.writeFileSync(path.join(data, 'recovery.signal'), '');
    // The backup's postgresql.conf is what Patroni wrote for the member it
    // came from (its paths, a standby's recovery settings): PostgreSQL's own
    // defaults serve the recovery, and Patroni writes its file again on start.
    fs.writeFileSync(path.join(data, 'postgresql.conf'), "include_if_exists 'postgresql.base.conf'\n");
    if (isRoot()) execFileSync('chown', ['-R', 'postgres:postgres', data]);
    // Recovery settings on the command line, not in the data folder: the
    // standbys cloned from it must not stop at the target too.
    const stamp = target.toISOString().replace('T', ' ').replace('Z', '+00');
    const opts = [`-c listen_addresses=''`, `-c unix_socket_directories='${home(0)}'`, `-c port=${this.state.postgres[0].port}`,
      `-c restore_command='cp ${this.archiveDir}/%f %p'`, `-c recovery_target_time='${stamp}'`,
      // Archiving on: the new timeline's history file and the old one's last
      // (partial) segment reach the archive, for any later restore.
      '-c recovery_target_action=promote', '-c archive_mode=on', `-c "archive_command=${this.archiveCommand.replace(/\$/g, '\\$')}"`,
      `-c synchronous_standby_names=''`,
      // No connections until promoted: so no parameter must match the old primary's (max_connections...).
      '-c hot_standby=off'].join(' ');
    const log = path.join(this.dir, 'restore.log');
    fs.closeSync(fs.openSync(log, 'a'));
    if (isRoot()) execFileSync('chown', ['postgres:postgres', log]);
    try {
      this.asPostgres('pg_ctl', ['-D', data, '-l', log, '-o', opts, '-w', '-t', '300', 'start']);
    } catch (e) {
      throw new Error(`the restore's recovery did not start: ${fs.readFileSync(log, 'utf8').slice(-3000)}`);
    }
    await until('the restored server promoted at its target', async () => {
      try {
        return this.asPostgres('psql', ['-h', home(0), '-p', String(this.state.postgres[0].port), '-U', 'postgres', '-d', 'postgres',
          '-qAtc', 'SELECT pg_is_in_recovery()']).trim() === 'f';
      } catch {
        return false;
      }
    }, 300000);
    this.asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '120', 'stop']);
    this.startPatroni(0);
    await until('the restored primary', async () => (await this.roles())[0] === 'primary', 120000);
    for (let i = 1; i < this.state.postgres.length; i++) this.startPatroni(i);
    await this.waitSyncStandby(180000);
    await this.waitStandbys(this.state.postgres.length - 1, 240000);
  }

  async status() {
    const roles = await this.roles();
    return {
      nodes: this.state.nodes.map((n, i) => ({ url: this.nodeUrl(i), pid: alive(n.pid) ? n.pid : 0 })),
      postgres: this.state.postgres.map((p, i) => ({
        role: roles[i], pid: this.postmasterPid(i), port: p.port,
        patroni_pid: alive(p.patroni_pid) ? p.patroni_pid : 0, patroni_url: this.restUrl(p),
      })),
      etcd: this.state.etcd.map((e) => ({ url: `http://${this.host(e.name)}:${e.client}`, pid: alive(e.pid) ? e.pid : 0 })),
      dsn: this.dsn,
    };
  }

  async down() {
    const stop = async (pids, timeoutMs) => {
      for (const pid of pids) if (pid) kill(pid, 'SIGTERM');
      const end = Date.now() + timeoutMs;
      while (pids.some(alive) && Date.now() < end) await sleep(100);
      for (const pid of pids) if (alive(pid)) kill(pid, 'SIGKILL');
    };
    await stop(this.state.nodes.map((n) => n.pid), 30000);
    const posts = this.state.postgres.map((_, i) => this.postmasterPid(i));
    await stop(this.state.postgres.map((p) => p.patroni_pid), 30000);  // Patroni stops its PostgreSQL
    await stop(posts.filter(alive), 30000);
    await stop(this.state.etcd.map((e) => e.pid), 15000);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

function parseArgs(argv) {
  const o = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') o.json = true;
    else if (a.startsWith('--')) o[a.slice(2)] = argv[++i];
    else o._.push(a);
  }
  return o;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const cmd = o._[0];
  const c = new Cluster(o.dir || DEFAULT_DIR);
  if (cmd === 'up') {
    const nodes = Number(o.nodes || 3);
    if (!Number.isInteger(nodes) || nodes < 1 || nodes > 16) throw new Error('--nodes must be 1..16');
    try {
      await c.up({ nodes, bin: o.bin && path.resolve(o.bin), model: o.model ? path.resolve(o.model) : '' });
    } catch (e) {
      if (c.state) await c.down().catch(() => {});  // what this `up` started
      throw e;
    }
    const s = await c.status();
    console.log(`cluster up in ${c.dir}`);
    for (const n of s.nodes) console.log(`  moeedb node  ${n.url}  pid ${n.pid}`);
    for (const p of s.postgres) console.log(`  PostgreSQL   127.0.0.1:${p.port}  ${p.role}  Patroni ${p.patroni_url}`);
    console.log(`  dsn          ${s.dsn}`);
  } else if (cmd === 'status') {
    if (!fs.existsSync(c.statePath)) throw new Error(`no cluster in ${c.dir}`);
    const s = await c.load().status();
    if (o.json) console.log(JSON.stringify(s));
    else {
      for (const n of s.nodes) console.log(`node     ${n.url}  ${n.pid ? `pid ${n.pid}` : 'down'}`);
      for (const p of s.postgres) console.log(`postgres 127.0.0.1:${p.port}  ${p.role}  pid ${p.pid}  patroni ${p.patroni_pid}`);
      for (const e of s.etcd) console.log(`etcd     ${e.url}  ${e.pid ? `pid ${e.pid}` : 'down'}`);
      console.log(`dsn      ${s.dsn}`);
    }
  } else if (cmd === 'down') {
    if (!fs.existsSync(c.statePath)) return console.log(`no cluster in ${c.dir}`);
    await c.load().down();
    console.log(`cluster in ${c.dir} stopped and removed`);
  } else {
    throw new Error('usage: cluster.sh up|down|status [--nodes N] [--dir D] [--json]');
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`cluster: ${e.message}`);
    process.exit(1);
  });
}
