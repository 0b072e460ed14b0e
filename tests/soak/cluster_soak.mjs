// Cluster fault soak: scripts/cluster/cluster.mjs's cluster (3 etcd, 3
// PostgreSQL under Patroni in strict synchronous mode, N moeedb nodes) while
// writers upsert (a third of them with wait: false) and delete through random
// nodes and searchers query every live node; meanwhile, one at a time:
//   - pg: the PostgreSQL primary's machine is lost for good (kill -9 of its
//     Patroni and every postgres process together); writes go on once a
//     standby is promoted and the other one streams from it; later a new
//     machine with an empty disk takes its place;
//   - standby: the synchronous standby's machine is lost for good (the other
//     standby becomes synchronous), later replaced the same way;
//   - patroni: the primary's Patroni alone dies (kill -9), its postgres runs
//     on and stays writable: the nodes must stop using it (they find the
//     primary through Patroni's REST APIs), a standby is promoted once the
//     leader key expires; Patroni is started again and rejoins as a standby;
//   - node / stop: a moeedb node is killed with kill -9 or SIGSTOPped;
//   - restore: a point-in-time restore of the whole PostgreSQL cluster under
//     the running nodes (a base backup taken, writes go on, a target time
//     noted, writes go on, then the cluster restored to the target:
//     scripts/cluster/cluster.mjs's restore()); every id's restored state
//     must be one current at the target (the last write acknowledged before
//     it, or one in flight then), the oracle then starts again from what the
//     store holds, and every node must notice its log went back and rebuild;
//   - with --netns (every member on a host of its own: network namespaces
//     the soak creates, scripts/cluster/netns.mjs, and deletes at the end),
//     --partitions N cuts, in turn, for --partition-ms: a node from
//     PostgreSQL only, a node from etcd only, the PostgreSQL primary from its
//     standbys, one etcd member from the other two (a minority), stops an
//     etcd member (kill -9, started again with its data when the time is
//     up), cuts the PostgreSQL primary from etcd (the nodes still reach it:
//     its Patroni must demote it, a standby is promoted), and a node from the
//     other nodes (it still reaches PostgreSQL and etcd).
// The next fault waits until both standbys stream again. The oracle is the
// writers' own record:
//   - each writer owns its ids and has one request in flight, so every id's
//     state is the last acknowledged operation's, or, after an answer that
//     was lost (node killed, 503 outcome_unknown), one of the unresolved
//     ones': resolved by reading the id back, counted;
//   - a 503 unavailable_error wrote nothing (it must not be stored);
//   - read-your-writes: right after an acknowledged upsert, a lexical search
//     for its unique word on the same node finds it;
//   - settled documents are found: every so often a document whose last
//     write was acknowledged over 3 s before (beyond the 2 s staleness bound)
//     and not written since is searched by its unique word on a random node,
//     and an answer without it is a violation;
//   - no search returns a document deleted (acknowledged) before it was sent,
//     an id twice, or an id never written; reads are monotonic per client (a
//     searcher never gets an older version of a document than it saw before);
//   - searches sent to live nodes: at least 99 % answered;
//   - after the faults: the store holds exactly the oracle's documents (no
//     loss, no duplicates), and every node's indexes converge to it (applied
//     sequence = the change log's head, document counts equal, each document
//     found by its unique word on every node, no deleted one), every replica
//     of a shard holding the same ids (GET /collections/{name}/shards) in
//     its dense and lexical index alike.
// The collection is sharded (--shards, --replicas; placed on the nodes
// through etcd): a node's loss is also a kill -9 kept down, or a SIGSTOP (a
// node that stops answering without dying), until its replicas are rebuilt
// on the survivors (measured: loss to every shard ready on --replicas live
// nodes again); read-your-writes goes through the write's seq (min_seq) to
// whichever replica answers; mid-soak a new node joins and takes its share;
// at the end every node gives the same answers to the same queries.
// Failover times are measured (loss to a new primary; loss to writes taken
// again). The test command runs a short version; the recorded long one:
//
//   node tests/soak/cluster_soak.mjs [--pg-kills 20] [--standby-losses 5] [--patroni-kills 5]
//        [--node-kills 20] [--node-stops 10] [--restores 2] [--netns 1 --partitions 10 --partition-ms 8000] [--writers 4]
//        [--nodes 3] [--shards 3] [--replicas 2] [--add-node 1] [--gap-ms 3000] [--seed 1] [--bin B] [--model M]
//
// Prints one JSON line of figures and exits 1 on any violation.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Cluster, alive } from '../../scripts/cluster/cluster.mjs';
import { Network } from '../../scripts/cluster/netns.mjs';
import { arg, seededRandom, WORDS } from './soak_util.mjs';

const pgKills = Number(arg('pg-kills', 20));
const standbyLosses = Number(arg('standby-losses', 0));
const patroniKills = Number(arg('patroni-kills', 0));
const nodeKills = Number(arg('node-kills', 20));
const nodeStops = Number(arg('node-stops', 10));
const restores = Number(arg('restores', 0));
const shards = Number(arg('shards', 3));
const replicas = Number(arg('replicas', 2));
const addNode = Number(arg('add-node', 1)) > 0;
const nWriters = Number(arg('writers', 4));
let nNodes = Number(arg('nodes', 3));
const gapMs = Number(arg('gap-ms', 3000));
const partitions = Number(arg('partitions', 0));
const partitionMs = Number(arg('partition-ms', 8000));
const PARTITION_KINDS = ['cut-node-pg', 'cut-node-etcd', 'cut-primary', 'cut-etcd', 'etcd-down', 'cut-primary-etcd',
  'cut-node-peers'];

// --netns: this process makes the network, runs the soak again inside it
// (on a host of its own, since nothing outside reaches the hosts), and
// deletes the network afterwards, whatever happened.
if (Number(arg('netns', 0)) > 0 && !process.env.MOEEDB_SOAK_NETWORK) {
  const why = Network.available();
  if (why) {
    console.error(`cluster soak: --netns ${why}`);
    process.exit(1);
  }
  Network.sweepAbandoned();  // what a run killed before its cleanup left
  const hosts = ['client', 'etcd0', 'etcd1', 'etcd2', 'pg0', 'pg1', 'pg2',
    ...Array.from({ length: nNodes + 2 }, (_, i) => `node${i}`)];
  const network = new Network(`mdb${process.pid}`, hosts);
  // The cluster's folder (its data, and state.json with the passwords) is
  // this process's to remove, whatever ends the inner run.
  const soakDir = arg('dir') || fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-cluster-soak-'));
  const cleanup = () => {
    network.destroy();  // kills everything inside, the inner run included
    fs.rmSync(soakDir, { recursive: true, force: true });
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => {
    cleanup();
    process.exit(1);
  });
  network.create();
  const args = process.argv.slice(1);
  if (!arg('dir')) args.push('--dir', soakDir);
  const [file, argv] = network.exec('client', process.execPath, args);
  const child = spawn(file, argv, { stdio: 'inherit',
    env: { ...process.env, MOEEDB_SOAK_NETWORK: JSON.stringify(network.toJson()) } });
  const code = await new Promise((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  cleanup();
  process.exit(code);
}
const net = process.env.MOEEDB_SOAK_NETWORK ? Network.fromJson(JSON.parse(process.env.MOEEDB_SOAK_NETWORK)) : null;
if (partitions > 0 && !net) {
  console.error('cluster soak: --partitions needs --netns 1 (hosts of their own)');
  process.exit(1);
}
const rand = seededRandom(Number(arg('seed', 1)));
const pick = (a) => a[Math.floor(rand() * a.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const COLL = 'soak';

const nonce = (id, v) => `q${id.replace(/[^a-z0-9]/g, '')}v${v}z`;
const textOf = (id, v) => `The ${pick(WORDS)} near the ${pick(WORDS)} and the ${pick(WORDS)} ${nonce(id, v)}.`;
// The version a text names (-1: none), and whether the text is one written under `id` (its nonce names both).
const versionOf = (text) => {
  const m = /v(\d+)z/.exec(text || '');
  return m ? Number(m[1]) : -1;
};
const writtenUnder = (id, text) => versionOf(text) >= 0 && (text || '').includes(nonce(id, versionOf(text)));

const violations = [];
const violate = (msg) => {
  if (violations.length < 50) console.error(`VIOLATION: ${msg}`);
  violations.push(msg);
};

async function call(url, method, body, timeoutMs = 60000) {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await fetch(url, { method, body: body && JSON.stringify(body), signal: ctl.signal,
      headers: body ? { 'content-type': 'application/json' } : {} });
    const text = await res.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: res.status, json, text };
  } catch (e) {
    return { status: 0, error: String(e), refused: !!(e.cause && e.cause.code === 'ECONNREFUSED') };
  } finally {
    clearTimeout(t);
  }
}

const dir = arg('dir') || fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-cluster-soak-'));
fs.rmSync(dir, { recursive: true, force: true });
const cluster = new Cluster(dir, { net });
const t0 = Date.now();
// --bin: another build (a copy keeps the soak independent of rebuilds); the
// model is then named, since a copied binary has no embedded default beside it.
const model = arg('model', arg('bin') ? path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../models/moeedb-tiny') : '');
try {
  await cluster.up({ nodes: nNodes, bin: arg('bin') && path.resolve(arg('bin')), model: model && path.resolve(model) });
} catch (e) {
  console.error(`cluster soak: starting the cluster: ${e.stack || e}`);
  if (cluster.state) await cluster.down().catch(() => {});
  process.exit(1);
}
const upSeconds = (Date.now() - t0) / 1000;
const live = new Set([...Array(nNodes).keys()]);  // nodes searchers may use
// Nodes cut off by a partition: still searched, every answer checked, but an
// error from one is counted apart (not held against the 99 %).
const cut = new Set();
const url = (i) => cluster.nodeUrl(i);

// The oracle: id -> { acked: {v, text} | 'deleted' | undefined, pending: [states of unresolved ops] }.
const oracle = new Map();
const stats = { upserts_acked: 0, deletes_acked: 0, unavailable: 0, refused: 0, unknown: 0, unknown_applied: 0,
  unknown_not_applied: 0, other_errors: 0, ryw_checked: 0, searches: 0, searches_ok: 0, search_hits: 0,
  searches_cut_off: 0, searches_cut_off_ok: 0, searches_restoring: 0, searches_restoring_ok: 0, settled_checked: 0,
  leaderless_waits: 0, leaderless_max_s: 0, unsynced_waits: 0, unsynced_max_s: 0 };
const failovers = [];  // per PostgreSQL fault: its kind, seconds to a new primary and to writes taken again
const writeLog = [];   // { sent, acked } of every acknowledged write (ms since the epoch)
const faultWindows = [];  // { kind, from, to }: searches answered during each fault
const rebuilds = [];  // seconds from a node's loss to every shard ready on `replicas` live nodes
let joined = null;    // the added node: seconds until it held its share
let running = true;
// A restore rewinds the truth: writers pause around it (paused; busy counts
// those with a request in flight), and searches sent while it runs (epoch
// changed or restoring) are checked for well-formed hits only.
let paused = false, busy = 0, restoring = false, epoch = 0;
let restoreWindow = false;  // from a restore's start until every node rebuilt: searches not held to the 99 %
const restoreFigures = [];  // per restore: seconds to restore, to every node rebuilt, ids rewound

const sameState = (a, b) => (a === 'deleted' || b === 'deleted' || !a || !b ? a === b : a.v === b.v);

// Reads an id back from any node until one answers: its stored state.
async function readBack(id) {
  for (;;) {
    const r = await call(`${url(pick([...Array(nNodes).keys()]))}/collections/${COLL}/documents/${encodeURIComponent(id)}`, 'GET');
    if (r.status === 404) return 'deleted';
    if (r.status === 200 && r.json) {
      return { v: versionOf(r.json.text), text: r.json.text };
    }
    await sleep(300);
  }
}

async function writer(w) {
  const ids = [];
  let version = 0;
  while (running) {
    if (paused) {
      await sleep(50);
      continue;
    }
    ++busy;
    await writeOnce();
    --busy;
  }
  async function writeOnce() {
    const node = Math.floor(rand() * nNodes);
    const del = ids.length > 3 && rand() < 0.25;
    const id = del ? pick(ids) : rand() < 0.5 && ids.length ? pick(ids) : `w${w}-${ids.length}`;
    if (!oracle.has(id)) {
      oracle.set(id, { acked: undefined, pending: [], history: [], acks: [], ops: [] });
      ids.push(id);
    }
    const o = oracle.get(id);
    const v = ++version;
    const target = del ? 'deleted' : { v, text: textOf(id, v) };
    o.inflight = target;  // a search may see it before the answer comes
    // wait: false is acknowledged before the node's own indexes have it;
    // the write itself is as durable (synced) as with wait: true.
    const wait = rand() >= 1 / 3;
    const sent = Date.now();
    const r = del
      ? await call(`${url(node)}/collections/${COLL}/documents/${encodeURIComponent(id)}`, 'DELETE')
      : await call(`${url(node)}/collections/${COLL}/documents`, 'POST', { documents: [{ id, text: target.text }], wait });
    const type = r.json && r.json.error && r.json.error.type;
    o.inflight = null;
    const op = { sent, state: target, outcome: 'unknown', done: null };
    o.ops.push(op);
    o.history.push(`${Date.now() - t0}ms ${del ? 'delete' : `upsert v${v}`} via node ${node}: ${r.status} ${type || r.error || ''}`);
    if (r.status === 200 || (del && r.status === 404)) {
      // A delete of an id already gone (404) commits nothing: not a write taken.
      if (r.status === 200) writeLog.push({ sent, acked: Date.now() });
      op.outcome = 'acked', op.done = Date.now();
      o.acked = target;
      o.pending = [];
      o.acks.push({ t: Date.now(), state: target });
      if (del) stats.deletes_acked++;
      else {
        stats.upserts_acked++;
        // Read-your-writes: the answering node's indexes include the write.
        const seq = r.json && r.json.seq;
        const s = await call(`${url(node)}/collections/${COLL}/search`, 'POST', { query: nonce(id, v), mode: 'lexical', k: 3, min_seq: seq });
        if (s.status === 200) {
          stats.ryw_checked++;
          if (!s.json.hits.some((h) => h.id === id)) {
            const info = await call(`${url(node)}/collections/${COLL}`, 'GET');
            await sleep(1000);
            const later = await call(`${url(node)}/collections/${COLL}/search`, 'POST', { query: nonce(id, v), mode: 'lexical', k: 3, min_seq: seq });
            violate(`read-your-writes: ${id} v${v} not found on node ${node} right after its upsert (${r.text}); ` +
                    `the node then: ${info.text && info.text.replace(/"spec".*/, '')}; found 1 s later: ` +
                    `${later.status === 200 && later.json.hits.some((h) => h.id === id)}; hits: ${s.text.slice(0, 300)}`);
          }
        }
      }
    } else if ((r.status === 503 && type === 'unavailable_error') || r.refused) {
      stats[r.refused ? 'refused' : 'unavailable']++;  // nothing written (a refused connection: nothing sent)
      op.outcome = 'unavailable';
      if (o.pending.length === 0) {
        // Checked at once: an Unavailable write must not be stored.
        const got = await readBack(id);
        if (!sameState(got, o.acked) && !(o.acked === undefined && got === 'deleted'))
          violate(`${id}: answered ${r.refused ? 'refused' : 'unavailable'} but its write is stored (${JSON.stringify(got)})`);
      }
      await sleep(200);
    } else {
      // The answer was lost (node killed, outcome unknown) or an error: resolve by reading back.
      if (!(r.status === 503 && type === 'outcome_unknown_error') && r.status !== 0) {
        stats.other_errors++;
        if (r.status !== 503) violate(`${id}: unexpected answer ${r.status} ${r.text && r.text.slice(0, 200)}; its history: ${o.history.join('; ')}`);
      }
      stats.unknown++;
      o.pending.push(target);
      await sleep(300);
      const got = await readBack(id);
      const applied = sameState(got, target);
      stats[applied ? 'unknown_applied' : 'unknown_not_applied']++;
      if (applied) {
        op.outcome = 'acked', op.done = Date.now();
        o.acked = target;
        o.pending = [];
        o.acks.push({ t: Date.now(), state: target });
      }
      if (!applied && !(sameState(got, o.acked) || (o.acked === undefined && got === 'deleted') ||
                        o.pending.some((p) => sameState(p, got))))
        violate(`${id}: stored ${JSON.stringify(got)} is neither the acknowledged state nor one in flight`);
    }
  }
}

const searchLog = [];  // { t, ok } of every search sent to a live node
async function searcher() {
  let newestSeen = new Map();  // id -> the newest version this client saw: reads are monotonic
  let seenEpoch = epoch;
  while (running) {
    if (seenEpoch !== epoch) newestSeen = new Map(), seenEpoch = epoch;  // a restore rewound the truth
    const nodes = [...live, ...cut];
    if (!nodes.length) {
      await sleep(50);
      continue;
    }
    const node = pick(nodes);
    // Deleted before the search was sent and not written since: must not come back.
    const deletedBefore = new Set([...oracle].filter(([, o]) => o.acked === 'deleted' && !o.pending.length && !o.inflight)
      .map(([id]) => id));
    const mode = pick(['fused', 'lexical', 'hybrid']);
    const sentAt = Date.now() - t0, sentClock = Date.now();
    const wasCut = cut.has(node);
    const sentEpoch = epoch, sentRestoring = restoring;
    const r = await call(`${url(node)}/collections/${COLL}/search`, 'POST', { query: `${pick(WORDS)} ${pick(WORDS)}`, mode, k: 10 }, 20000);
    if (wasCut) {
      stats.searches_cut_off++;
      if (r.status !== 200) continue;
      stats.searches_cut_off_ok++;
    } else if (restoreWindow) {
      stats.searches_restoring++;
      if (r.status === 200) stats.searches_restoring_ok++;
    } else {
      stats.searches++;
      searchLog.push({ t: sentClock, ok: r.status === 200 });
    }
    if (r.status !== 200) {
      if (live.has(node)) console.error(`search on live node ${node} at ${Date.now() - t0}ms: ${r.status} ${r.error || (r.text || '').slice(0, 600)}`);
      continue;
    }
    if (!wasCut && !restoreWindow) stats.searches_ok++;
    const seen = new Set();
    // Sent while a restore rewound the truth: the hits must be well formed
    // (ids written, each text the one written under its id), no more.
    const acrossRestore = sentRestoring || restoring || sentEpoch !== epoch;
    for (const h of r.json.hits) {
      stats.search_hits++;
      if (seen.has(h.id)) violate(`search returned ${h.id} twice`);
      seen.add(h.id);
      const o = oracle.get(h.id);
      if (!o) violate(`search returned ${h.id}, never written`);
      else if (acrossRestore) {
        if (!writtenUnder(h.id, h.text))
          violate(`search (${mode}, node ${node}, during a restore) returned ${h.id} with a text not written under it: ${h.text}`);
      } else if (!(deletedBefore.has(h.id) && o.acked === 'deleted' && !o.pending.length && !o.inflight &&
                 !o.acks.some((a) => a.t > sentClock))) {
        // Its version: one current at some moment between sending and the
        // answer (acknowledged then), or one still unresolved.
        const v = versionOf(h.text);
        let current = -1;
        const allowed = new Set([...o.pending, o.inflight].filter((p) => p && p !== 'deleted').map((p) => p.v));
        for (const a of o.acks) {
          if (a.t <= sentClock) current = a.state === 'deleted' ? -1 : a.state.v;
          else if (a.state !== 'deleted') allowed.add(a.state.v);
        }
        allowed.add(current);
        if (!writtenUnder(h.id, h.text))
          violate(`search (${mode}, node ${node}) returned ${h.id} with a text not written under it: ${h.text}`);
        if (!allowed.has(v)) violate(`search (${mode}, node ${node}) returned ${h.id} as v${v}, current: ${[...allowed]}; its history: ${o.history.join('; ')}`);
        if (v < (newestSeen.get(h.id) ?? -1))
          violate(`search (${mode}, node ${node}) returned ${h.id} as v${v} after this client saw v${newestSeen.get(h.id)}`);
        newestSeen.set(h.id, Math.max(v, newestSeen.get(h.id) ?? -1));
      } else
        violate(`search (${mode}, node ${node}, sent ${sentAt}ms, answered ${Date.now() - t0}ms) returned ${h.id} ` +
                `(${h.text}), deleted before it was sent; its history: ${o.history.join('; ')}`);
    }
    await sleep(20);
  }
}

// Settled documents are in every answer of their word: one whose last write
// was acknowledged more than SETTLED_MS before the search (the 2 s
// staleness bound and a margin) and not written since, searched on a live
// node (cut-off nodes and searches during a restore aside).
const SETTLED_MS = 3000;
async function settledChecker() {
  while (running) {
    await sleep(150);
    const nodes = [...live];
    if (!nodes.length || restoreWindow) continue;
    const now = Date.now();
    const settled = [...oracle].filter(([, o]) => o.acked && o.acked !== 'deleted' && !o.pending.length && !o.inflight &&
      o.acks.length && o.acks[o.acks.length - 1].t < now - SETTLED_MS);
    if (!settled.length) continue;
    const [id, o] = pick(settled);
    const v = o.acked.v, acks = o.acks.length, sentEpoch = epoch, node = pick(nodes);
    const r = await call(`${url(node)}/collections/${COLL}/search`, 'POST', { query: nonce(id, v), mode: 'lexical', k: 3 }, 20000);
    // Written again meanwhile, or the truth rewound, or the node cut off since: no verdict.
    if (r.status !== 200 || o.inflight || o.pending.length || o.acks.length !== acks || epoch !== sentEpoch ||
        restoreWindow || !live.has(node)) continue;
    stats.settled_checked++;
    if (!r.json.hits.some((h) => h.id === id))
      violate(`node ${node}: settled ${id} v${v} (acknowledged ${now - o.acks[acks - 1].t} ms before) not found by its word: ` +
              `${r.text.slice(0, 300)}; its history: ${o.history.join('; ')}`);
  }
}

// The first write sent after `t` that was acknowledged: seconds from the fault at t0.
async function writesAgainAfter(t, t0 = t) {
  for (;;) {
    const after = writeLog.filter((w) => w.sent > t);
    if (after.length) return (Math.min(...after.map((w) => w.acked)) - t0) / 1000;
    if (Date.now() - t > 180000) throw new Error('no write acknowledged within 180 s of a PostgreSQL fault');
    await sleep(100);
  }
}

// The primary's index, waiting for one if Patroni has none now. Each fault
// starts from a cluster with a primary; a leaderless spell the previous fault
// left after its own checks passed is counted (an availability figure: the
// oracle still checks every answer given meanwhile), not a failure.
async function primaryBeforeFault() {
  const t = Date.now();
  const p = (await cluster.roles()).indexOf('primary');
  if (p >= 0) return p;
  const q = await cluster.waitPrimary(120000);
  const s = (Date.now() - t) / 1000;
  console.error(`${Date.now() - t0}ms: no PostgreSQL primary before the next fault; one after ${s} s`);
  stats.leaderless_waits++;
  stats.leaderless_max_s = Math.max(stats.leaderless_max_s, s);
  return q;
}

// Waits until Patroni names a synchronous standby. Losing the primary's
// machine while it names none (the primary re-promoted itself a moment ago,
// after a cut from etcd, and strict synchronous mode has no standby yet) is
// two faults at once: Patroni then promotes no standby, rightly, since it
// cannot know what only the old primary held (a CI run of 2026-12-06 met it:
// the loss came 2 s after the previous fault healed). A PostgreSQL fault
// starts from one fault's worth of redundancy; the wait is counted, as a
// leaderless spell is.
async function syncedBeforeFault() {
  const t = Date.now();
  if (await cluster.syncStandby() >= 0) return;
  do {
    if (Date.now() - t > 120000) throw new Error('no synchronous standby within 120 s before a PostgreSQL fault');
    await sleep(200);
  } while (await cluster.syncStandby() < 0);
  const s = (Date.now() - t) / 1000;
  console.error(`${Date.now() - t0}ms: no synchronous standby before the next fault; one after ${s} s`);
  stats.unsynced_waits++;
  stats.unsynced_max_s = Math.max(stats.unsynced_max_s, s);
}

// A PostgreSQL fault (kind: pg, standby, patroni), until the cluster has a
// primary and two streaming standbys again.
async function pgFault(kind) {
  await primaryBeforeFault();
  await syncedBeforeFault();
  const p = await primaryBeforeFault();
  const victim = kind === 'standby' ? await cluster.syncStandby() : p;
  if (victim < 0) throw new Error(`no synchronous standby before a fault: ${roles}`);
  const t = Date.now();
  const what = { pg: `the PostgreSQL primary's machine (${victim}) lost for good`,
    standby: `the synchronous standby's machine (${victim}) lost for good`,
    patroni: `the PostgreSQL primary's Patroni (${victim}) killed, its postgres left running` }[kind];
  console.error(`${t - t0}ms: ${what}`);
  if (kind === 'patroni') cluster.killPatroni(victim);
  else cluster.killPostgresMachine(victim);
  let promoted = null, promotedAt = t;
  if (kind !== 'standby') {
    for (;;) {
      const r = await cluster.roles();
      const q = r.indexOf('primary');
      if (q >= 0 && q !== victim) break;
      if (Date.now() - t > 120000) throw new Error('no failover within 120 s');
      await sleep(100);
    }
    promotedAt = Date.now();
    promoted = (promotedAt - t) / 1000;
  }
  // Writes taken by the new primary (a write sent to the old one in the
  // moments before the nodes fenced it off may still commit there: its
  // standby streams until the promotion).
  const writable = await writesAgainAfter(promotedAt, t);
  if (kind === 'patroni') {
    // Patroni back: it finds its postgres running, not the leader: demotes
    // and rewinds it to a standby of the new primary.
    cluster.startPatroni(victim);
  } else {
    await sleep(2000);  // the replacement machine a moment later
    while (cluster.postmasterPid(victim)) await sleep(100);
    cluster.replaceMachine(victim);
  }
  await cluster.waitSyncStandby(180000);
  await cluster.waitStandbys(2, 240000);
  failovers.push({ kind, promoted_s: promoted, writable_s: writable, no_ack_s: noAckSeconds(t) });
  faultWindows.push({ kind, from: t, to: Date.now() });
}

// The longest time without an acknowledged write, from the last one before
// the fault at t to now (the writers keep sending throughout).
function noAckSeconds(t) {
  const acks = writeLog.map((w) => w.acked).sort((a, b) => a - b);
  let prev = Math.max(t - 60000, ...acks.filter((x) => x <= t)), gap = 0;
  for (const a of acks.filter((x) => x > t)) {
    gap = Math.max(gap, a - prev);
    prev = a;
  }
  return gap / 1000;
}

// A network fault on separate hosts (--netns) for partitionMs, then healed,
// until the cluster has a primary and two streaming standbys again.
async function partition(kind) {
  const t = Date.now();
  const pgHosts = ['pg0', 'pg1', 'pg2'], etcdHosts = ['etcd0', 'etcd1', 'etcd2'];
  let what, node = -1, etcd = -1;
  if (kind === 'cut-node-pg' || kind === 'cut-node-etcd') {
    node = Math.floor(rand() * nNodes);
    live.delete(node);
    cut.add(node);  // searched still: what it answers is checked
    net.cut(`node${node}`, kind === 'cut-node-pg' ? pgHosts : etcdHosts);
    what = `node ${node} cut from ${kind === 'cut-node-pg' ? 'PostgreSQL' : 'etcd'}`;
  } else if (kind === 'cut-primary') {
    const p = await primaryBeforeFault();
    net.cut(`pg${p}`, pgHosts.filter((h) => h !== `pg${p}`));
    what = `the PostgreSQL primary (pg${p}) cut from its standbys`;
  } else if (kind === 'cut-primary-etcd') {
    const p = await primaryBeforeFault();
    net.cut(`pg${p}`, etcdHosts);
    what = `the PostgreSQL primary (pg${p}) cut from etcd (the nodes still reach it)`;
  } else if (kind === 'cut-node-peers') {
    node = Math.floor(rand() * nNodes);
    live.delete(node);
    cut.add(node);
    net.cut(`node${node}`, [...Array(nNodes).keys()].filter((j) => j !== node).map((j) => `node${j}`));
    what = `node ${node} cut from the other nodes`;
  } else if (kind === 'cut-etcd') {
    etcd = Math.floor(rand() * 3);
    net.cut(`etcd${etcd}`, etcdHosts.filter((h) => h !== `etcd${etcd}`));
    what = `etcd member ${etcd} cut from the other two`;
  } else {
    etcd = Math.floor(rand() * 3);
    cluster.killEtcd(etcd);
    what = `etcd member ${etcd} killed (kill -9)`;
  }
  console.error(`${t - t0}ms: ${what} for ${partitionMs} ms`);
  await sleep(partitionMs);
  if (kind === 'etcd-down') cluster.startEtcd(etcd);
  else net.heal();
  console.error(`${Date.now() - t0}ms: healed`);
  const writable = await writesAgainAfter(t);
  await cluster.waitSyncStandby(180000);
  await cluster.waitStandbys(2, 240000);
  if (node >= 0) {
    await cluster.waitNode(node);
    cut.delete(node);
    live.add(node);
  }
  failovers.push({ kind, promoted_s: null, writable_s: writable, no_ack_s: noAckSeconds(t) });
  faultWindows.push({ kind, from: t, to: Date.now() });
}

// Every shard claimed ready by `replicas` live nodes (excluding `lost`): the time it took.
async function waitRebuilt(lost, t) {
  const want = Math.min(replicas, nNodes - 1);
  for (;;) {
    const claims = await cluster.claims(COLL, shards).catch(() => ({}));
    let ok = true;
    for (let k = 0; k < shards; k++) ok &&= (claims[k] || []).filter((n) => n !== `node${lost}`).length >= want;
    if (ok && !Object.values(claims).some((ns) => ns.includes(`node${lost}`))) return (Date.now() - t) / 1000;
    if (Date.now() - t > 120000) {
      violate(`the replicas of node ${lost} were not rebuilt within 120 s: ${JSON.stringify(claims)}`);
      return (Date.now() - t) / 1000;
    }
    await sleep(100);
  }
}

// The states an id may hold after a restore to `target` (ms since the
// epoch): the last one acknowledged before it (absent if none), or that of
// any write sent before it and not acknowledged before it.
function allowedAt(o, target) {
  let last = 'deleted';
  let allowed = [];
  for (const op of o.ops) {
    // An acknowledged write supersedes the unresolved ones before it (one
    // writer per id, one request at a time).
    if (op.outcome === 'acked' && op.done <= target) last = op.state, allowed = [];
    else if (op.sent <= target && op.outcome !== 'unavailable') allowed.push(op.state);
  }
  return [last, ...allowed];
}

// A point-in-time restore of PostgreSQL under the running nodes.
async function restoreFault(n) {
  const t = Date.now();
  console.error(`${t - t0}ms: a base backup for restore ${n}`);
  const backup = await cluster.backup(`restore${n}`);
  await sleep(gapMs);
  const target = Date.now();
  await sleep(gapMs);
  // Writers pause (their requests in flight answered) so none straddles the restore.
  paused = true;
  while (busy > 0) await sleep(20);
  restoring = true, restoreWindow = true;
  const before = [];  // each node's replicas' rewinds so far
  for (let i = 0; i < nNodes; i++) {
    const info = await call(`${url(i)}/collections/${COLL}`, 'GET');
    before[i] = info.status === 200 && info.json.node ? info.json.node.replicas.reduce((a, r) => a + (r.log_rewinds || 0), 0) : 0;
  }
  const started = Date.now();
  console.error(`${started - t0}ms: PostgreSQL restored to ${target - t0}ms (${started - target} ms back)`);
  await cluster.restore(backup, new Date(target));
  const restored = (Date.now() - started) / 1000;
  // The truth now: each id as the store holds it, one of the states current at the target.
  let rewound = 0;
  for (const [id, o] of oracle) {
    const got = await readBack(id);
    const allowed = allowedAt(o, target);
    if (!allowed.some((a) => sameState(a, got)))
      violate(`${id} after the restore to ${target - t0}ms: stored ${JSON.stringify(got)}, expected one of ${JSON.stringify(allowed)}; ` +
              `its history: ${o.history.join('; ')}`);
    if (!sameState(got, o.acked ?? 'deleted')) rewound++;
    o.history.push(`${Date.now() - t0}ms restored to ${target - t0}ms: ${got === 'deleted' ? 'absent' : `v${got.v}`}`);
    o.acked = got === 'deleted' ? 'deleted' : got;
    o.pending = [];
    o.acks = [{ t: Date.now(), state: o.acked }];
    o.ops = [{ sent: 0, state: o.acked, outcome: 'acked', done: Date.now() }];
  }
  ++epoch;
  restoring = false;
  paused = false;
  // Every node notices its log went back and rebuilds: each one's replicas
  // rewound once more and caught up with the restored log.
  let all = true;
  for (let i = 0; i < nNodes; i++) {
    if (!live.has(i)) continue;
    for (;;) {
      const info = await call(`${url(i)}/collections/${COLL}`, 'GET');
      const reps = info.status === 200 && info.json.node ? info.json.node.replicas : [];
      const rewinds = reps.reduce((a, r) => a + (r.log_rewinds || 0), 0);
      if (reps.length && rewinds > before[i] && reps.every((r) => !r.building && r.applied_seq === info.json.last_op)) break;
      if (Date.now() - started > 180000) {
        violate(`node ${i} did not rebuild after the restore: ${info.text && info.text.replace(/"spec".*?"node"/, '"node"')}`);
        all = false;
        break;
      }
      await sleep(200);
    }
  }
  restoreWindow = false;
  restoreFigures.push({ restored_s: restored, rebuilt_s: (Date.now() - started) / 1000, back_ms: started - target,
    ids_rewound: rewound, all_rebuilt: all });
  faultWindows.push({ kind: 'restore', from: t, to: Date.now() });
}

async function killNode(stop) {
  const i = Math.floor(rand() * nNodes);
  live.delete(i);
  await sleep(300);  // searchers stop sending to it; writers do not
  const t = Date.now();
  console.error(`${t - t0}ms: ${stop ? 'SIGSTOP' : 'kill -9'} node ${i}`);
  if (stop) {
    // Stops answering without dying; kept stopped until its replicas live elsewhere.
    cluster.killNode(i, 'SIGSTOP');
    if (shards > 1 || replicas > 1) rebuilds.push({ how: 'SIGSTOP', s: await waitRebuilt(i, t) });
    else await sleep(1000);
    cluster.killNode(i, 'SIGCONT');
  } else {
    cluster.killNode(i);
    while (alive(cluster.state.nodes[i].pid)) await sleep(20);
    if (shards > 1 || replicas > 1) rebuilds.push({ how: 'kill -9', s: await waitRebuilt(i, t) });
    else await sleep(500 + Math.floor(rand() * 1500));
    cluster.startNode(i);
  }
  await cluster.waitNode(i);
  live.add(i);
}

// A node joins under load: the time until it holds a ready replica.
async function joinNode() {
  const t = Date.now();
  console.error(`${t - t0}ms: a node joins`);
  const i = await cluster.addNode();
  nNodes = cluster.state.nodes.length;
  live.add(i);
  for (;;) {
    const claims = await cluster.claims(COLL, shards).catch(() => ({}));
    if (Object.values(claims).some((ns) => ns.includes(`node${i}`))) break;
    if (Date.now() - t > 120000) {
      violate(`the added node ${i} took no replica within 120 s`);
      break;
    }
    await sleep(100);
  }
  joined = { node: i, s: (Date.now() - t) / 1000 };
}

// Convergence: every node's indexes equal the store.
async function checkConvergence(expected) {
  const deadline = Date.now() + 60000;
  const perShard = {};  // shard -> the document counts its replicas hold
  for (let i = 0; i < nNodes; i++) {
    for (;;) {
      const info = await call(`${url(i)}/collections/${COLL}`, 'GET');
      // Sharded: a node holds some shards; each of its replicas holds its shard's documents.
      const held = info.status === 200 && info.json.node ? info.json.node.replicas : [];
      const ok = info.status === 200 && info.json.node && info.json.node.applied_seq === info.json.last_op &&
        info.json.documents === expected &&
        (shards > 1 || replicas > 1 ? held.every((r) => r.applied_seq === info.json.last_op)
          : info.json.node.indexed === info.json.documents);
      if (ok) for (const r of held) (perShard[r.shard] ||= new Set()).add(r.documents);
      if (ok) break;
      if (Date.now() > deadline) {
        violate(`node ${i} did not converge: ${info.text}`);
        break;
      }
      await sleep(200);
    }
  }
  if (shards > 1 || replicas > 1) {
    // Every replica of a shard holds the same documents; the shards together hold them all.
    let total = 0;
    for (let k = 0; k < shards; k++) {
      const counts = [...(perShard[k] || [])];
      if (counts.length !== 1) violate(`shard ${k}'s replicas hold ${JSON.stringify(counts)} documents`);
      total += counts[0] || 0;
    }
    if (total !== expected) violate(`the shards hold ${total} documents, the store ${expected}`);
  }
}

// Every replica of a shard holds the same documents, by id (the store's
// internal ids, the same on every node), in its dense and its lexical index
// alike; the shards are disjoint and together hold `expected` documents.
async function checkReplicaIds(expected) {
  const byShard = {};  // shard -> [{ node, ids }]
  for (let i = 0; i < nNodes; i++) {
    const r = await call(`${url(i)}/collections/${COLL}/shards`, 'GET');
    if (r.status !== 200) {
      violate(`node ${i}: GET /collections/${COLL}/shards: ${r.status} ${(r.text || '').slice(0, 200)}`);
      continue;
    }
    for (const rep of r.json.replicas) {
      if (JSON.stringify(rep.ids) !== JSON.stringify(rep.lexical_ids))
        violate(`node ${i} shard ${rep.shard}: dense and lexical indexes hold different ids (${rep.ids.length} against ${rep.lexical_ids.length})`);
      (byShard[rep.shard] ||= []).push({ node: i, ids: rep.ids });
    }
  }
  const all = new Set();
  for (let k = 0; k < shards; k++) {
    const reps = byShard[k] || [];
    if (!reps.length) violate(`shard ${k}: no replica on any node`);
    for (const r of reps.slice(1))
      if (JSON.stringify(r.ids) !== JSON.stringify(reps[0].ids)) {
        const a = new Set(reps[0].ids), b = new Set(r.ids);
        violate(`shard ${k}: node ${r.node}'s replica differs from node ${reps[0].node}'s: ` +
                `${[...b].filter((x) => !a.has(x)).length} more, ${[...a].filter((x) => !b.has(x)).length} fewer`);
      }
    for (const id of reps.length ? reps[0].ids : []) {
      if (all.has(id)) violate(`internal id ${id} is in two shards`);
      all.add(id);
    }
  }
  if (all.size !== expected) violate(`the shards' replicas hold ${all.size} ids, the store ${expected} documents`);
}

// The same queries on every node (each coordinating, asking replicas of its
// choice): the same answers.
async function checkSameAnswers() {
  for (let q = 0; q < 20; q++) {
    const body = { query: `${WORDS[q % WORDS.length]} ${WORDS[(q * 7 + 3) % WORDS.length]}`, mode: ['fused', 'lexical', 'hybrid'][q % 3], k: 10, exact: true };
    const answers = [];
    for (let i = 0; i < nNodes; i++) answers.push(await call(`${url(i)}/collections/${COLL}/search`, 'POST', body));
    for (let i = 1; i < nNodes; i++) {
      const a = answers[0], b = answers[i];
      if (a.status !== 200 || b.status !== 200) {
        violate(`same answers: ${a.status} ${b.status} ${(b.text || '').slice(0, 200)}`);
        continue;
      }
      const same = a.json.hits.length === b.json.hits.length &&
        a.json.hits.every((h, j) => h.id === b.json.hits[j].id && Math.abs(h.score - b.json.hits[j].score) <= 1e-6);
      if (!same) violate(`node ${i} answers ${JSON.stringify(body)} unlike node 0: ${JSON.stringify(b.json.hits.map((h) => h.id))} ` +
                         `against ${JSON.stringify(a.json.hits.map((h) => h.id))}`);
    }
  }
}

let exitCode = 0;
try {
  const c = await call(`${url(0)}/collections/${COLL}`, 'PUT', shards > 1 || replicas > 1 ? { shards, replicas } : {});
  if (c.status !== 201) throw new Error(`creating the collection: ${c.status} ${c.text}`);
  const tasks = [];
  for (let w = 0; w < nWriters; w++) tasks.push(writer(w));
  for (let s = 0; s < nNodes; s++) tasks.push(searcher());
  tasks.push(settledChecker());
  const events = [...Array(pgKills).fill('pg'), ...Array(standbyLosses).fill('standby'),
    ...Array(patroniKills).fill('patroni'), ...Array(nodeKills).fill('node'), ...Array(nodeStops).fill('stop'),
    ...Array(restores).fill('restore'),
    ...Array.from({ length: partitions }, (_, i) => PARTITION_KINDS[i % PARTITION_KINDS.length])];
  for (let i = events.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [events[i], events[j]] = [events[j], events[i]];
  }
  if (addNode) events.splice(Math.floor(events.length / 2), 0, 'join');
  await sleep(gapMs);
  for (const e of events) {
    if (e === 'pg' || e === 'standby' || e === 'patroni') await pgFault(e);
    else if (e === 'restore') await restoreFault(restoreFigures.length + 1);
    else if (PARTITION_KINDS.includes(e)) await partition(e);
    else if (e === 'join') {
      await joinNode();
      tasks.push(searcher());
    } else await killNode(e === 'stop');
    await sleep(gapMs);
  }
  running = false;
  await Promise.all(tasks);

  // Final state: every id as the oracle says (resolving what is still open).
  let expected = 0;
  for (const [id, o] of oracle) {
    const got = await readBack(id);
    const allowed = [o.acked ?? 'deleted', ...o.pending];
    if (!allowed.some((a) => sameState(a, got))) violate(`${id}: stored ${JSON.stringify(got)}, expected one of ${JSON.stringify(allowed)}`);
    if (got !== 'deleted') expected++;
    o.final = got;
  }
  // No duplicates or phantoms in the store's listing.
  const listed = new Set();
  for (let after = ''; ;) {
    const page = await call(`${url(0)}/collections/${COLL}/documents?limit=1000${after ? `&after=${encodeURIComponent(after)}` : ''}`, 'GET');
    if (page.status !== 200) throw new Error(`listing: ${page.status}`);
    for (const d of page.json.documents) {
      if (listed.has(d.id)) violate(`listed twice: ${d.id}`);
      if (!oracle.has(d.id)) violate(`listed, never written: ${d.id}`);
      listed.add(d.id);
    }
    if (!page.json.next_after) break;
    after = page.json.next_after;
  }
  if (listed.size !== expected) violate(`the store lists ${listed.size} documents, the oracle ${expected}`);
  await checkConvergence(expected);
  if (shards > 1 || replicas > 1) await checkReplicaIds(expected);
  // Each document found by its unique word on every node; deleted ones not.
  for (let i = 0; i < nNodes; i++) {
    for (const [id, o] of oracle) {
      const v = o.final === 'deleted' ? (o.acked && o.acked !== 'deleted' ? o.acked.v : null) : o.final.v;
      if (v === null) continue;
      const s = await call(`${url(i)}/collections/${COLL}/search`, 'POST', { query: nonce(id, v), mode: 'lexical', k: 3 });
      const found = s.status === 200 && s.json.hits.some((h) => h.id === id);
      if (o.final !== 'deleted' && !found) violate(`node ${i}: ${id} v${v} not found by its word`);
      if (o.final === 'deleted' && found) violate(`node ${i}: deleted ${id} still found`);
    }
  }
  await checkSameAnswers();
  const rate = stats.searches ? stats.searches_ok / stats.searches : 0;
  if (rate < 0.99) violate(`searches answered: ${(rate * 100).toFixed(2)} % < 99 %`);
  if (stats.upserts_acked === 0) violate('no upsert was acknowledged');
  const q = (a, p) => (a.length ? a[Math.round(p * (a.length - 1))] : null);
  const perKind = {};
  for (const kind of ['pg', 'standby', 'patroni', ...PARTITION_KINDS]) {
    const f = failovers.filter((x) => x.kind === kind);
    if (!f.length) continue;
    const sorted = (k) => f.map((x) => x[k]).filter((x) => x !== null).sort((a, b) => a - b);
    const during = searchLog.filter((x) => faultWindows.some((w) => w.kind === kind && x.t >= w.from && x.t <= w.to));
    perKind[kind] = { n: f.length, promoted_s: { p50: q(sorted('promoted_s'), 0.5), max: q(sorted('promoted_s'), 1) },
      writable_s: { p50: q(sorted('writable_s'), 0.5), max: q(sorted('writable_s'), 1) },
      no_acked_write_s: { p50: q(sorted('no_ack_s'), 0.5), max: q(sorted('no_ack_s'), 1) },
      searches_during: during.length, answered_during: during.filter((x) => x.ok).length };
  }
  console.log(JSON.stringify({
    pg_kills: pgKills, standby_losses: standbyLosses, patroni_kills: patroniKills, node_kills: nodeKills, node_stops: nodeStops,
    restores,
    netns: !!net, partitions, partition_ms: partitionMs, writers: nWriters, nodes: nNodes, shards, replicas,
    up_s: upSeconds,
    seconds: (Date.now() - t0) / 1000, ids: oracle.size, stored: expected, ...stats,
    search_success: Number(rate.toFixed(5)),
    faults: perKind,
    rebuild_s: { p50: q(rebuilds.map((r) => r.s).sort((a, b) => a - b), 0.5), max: q(rebuilds.map((r) => r.s).sort((a, b) => a - b), 1),
      n: rebuilds.length },
    join_s: joined && joined.s,
    restores: restoreFigures,
    violations: violations.length,
  }));
  if (violations.length) exitCode = 1;
} catch (e) {
  console.error(`cluster soak: ${e.stack || e}`);
  console.error(cluster.patroniLogTails());
  exitCode = 1;
} finally {
  running = false;
  await cluster.down().catch((e) => console.error(`down: ${e}`));
}
process.exit(exitCode);
