// A node's replicas at DOCS documents (bench/node_recovery.sh starts the
// PostgreSQL and etcd it runs over):
//  1. two nodes create collection `big` (the default model: 1024 + 32
//     dimensions; 2 shards x 2 replicas, so each node holds every shard) and
//     stop; `store_write --into big` fills it through the store;
//  2. build: both nodes start with empty index folders; the time until each
//     claims both its replicas ready, caught up to the log's head;
//  3. once each replica's snapshot is on disk, TAIL more documents are
//     written (the nodes follow them), then node n1 is killed (SIGKILL) and
//     started again at once: the time from the kill until n1 claims both
//     replicas ready at the log's head again, with the times to /health and
//     to its first claim, and whether it rebuilt (it should load its
//     snapshots and replay only the tail).
//  4. with --rounds R, step 3 again R times (n1 first stopped cleanly and
//     started again, so its snapshots are at the log's head; another tail,
//     another kill);
//     with --baseline BIN2, the restarts alternate between BIN and BIN2
//     (BIN first in odd rounds, BIN2 in even ones: a pair a round), so the
//     two binaries' kill -9 to ready times come from the same snapshots,
//     machine and page cache, and the ratio of their medians is printed.
// Prints one JSON object.
//   node bench/node_recovery.mjs --pg URI --etcd HOST:PORT --dir DIR --bin BIN --fill STORE_WRITE
//        [--docs 1000000] [--tail 20000] [--model models/moeedb-tiny] [--rounds 1] [--baseline BIN2]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { arg } from '../tests/soak/soak_util.mjs';
import { ROOT, call, freshDatabase, sleep, startNode, startNodes, stopNodes, waitHealthy } from '../tests/cluster/cluster_nodes.mjs';

const PG = arg('pg', ''), ETCD = arg('etcd', ''), DIR = arg('dir', '');
const BIN = path.resolve(arg('bin', path.join(ROOT, 'build/moeedb')));
const FILL = path.resolve(arg('fill', path.join(ROOT, 'build/bench/store_write')));
const MODEL = path.resolve(arg('model', path.join(ROOT, 'models/moeedb-tiny')));
const DOCS = Number(arg('docs', 1000000)), TAIL = Number(arg('tail', 20000));
const ROUNDS = Number(arg('rounds', 1));
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`--rounds must be a whole number from 1, not ${arg('rounds', 1)}`);
const BASELINE = arg('baseline', '') ? path.resolve(arg('baseline', '')) : '';

function fail(message) {
  console.error(`node_recovery: FAILED: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

// The collection's placement as node `n` reports it (GET /cluster, with lag).
async function placedOn(n) {
  const r = await call(n.port, 'GET', '/cluster', undefined, 10000);
  return r.status === 200 ? r.json.collections.find((c) => c.name === 'big') : undefined;
}

// Until node `node` claims every shard ready at lag 0 (asked of `via`); the seconds since `t0`.
async function waitReady(via, node, t0, timeoutS) {
  for (;;) {
    const c = await placedOn(via).catch(() => undefined);
    if (c && c.shard_list.every((sh) => sh.replicas.some((r) => r.node === node && r.state === 'ready' && r.lag === 0)))
      return (Date.now() - t0) / 1000;
    if (Date.now() - t0 > timeoutS * 1000) fail(`${node} not ready after ${timeoutS} s: ${JSON.stringify(c)}`);
    await sleep(100);
  }
}

function rssMb(pid) {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024;
  } catch { return null; }
}

async function main() {
  if (!PG || !ETCD || !DIR) fail('needs --pg URI --etcd HOST:PORT --dir DIR (bench/node_recovery.sh passes them)');
  const db = freshDatabase(PG, 'recovery');
  const opts = { bin: BIN, model: MODEL, uri: db.uri, etcd: ETCD, cluster: 'recovery', dir: DIR, fail };
  let nodes = [];
  try {
    nodes = await startNodes({ ...opts, count: 2 });
    const created = await call(nodes[0].port, 'PUT', '/collections/big', { shards: 2, replicas: 2 });
    if (created.status !== 201) fail(`PUT big: ${created.status} ${created.text}`);
    await stopNodes(nodes);
    const fill = JSON.parse(execFileSync(FILL, ['--store', db.uri, '--into', 'big', '--docs', String(DOCS),
      '--writers', '4', '--batch', '256'], { encoding: 'utf8', maxBuffer: 1 << 20 }));
    console.error(`filled ${DOCS} documents in ${fill.seconds.toFixed(1)} s (${Math.round(fill.docs_per_s)}/s)`);

    // 2. The build from PostgreSQL: index folders removed, both nodes start.
    for (let i = 0; i < 2; i++) fs.rmSync(path.join(DIR, `node${i}`), { recursive: true, force: true });
    const tBuild = Date.now();
    nodes = await startNodes({ ...opts, count: 2 });
    const build = [];
    for (let i = 0; i < 2; i++) build.push(await waitReady(nodes[0], `n${i}`, tBuild, 3600));
    const rssAfterBuild = nodes.map((n) => rssMb(n.child.pid));
    console.error(`built: ${JSON.stringify(build)} s`);

    // 3. Snapshots on disk (a replica built from the store is saved at once), then the tail.
    const snapDir = path.join(DIR, 'node1', 'indexes');
    for (const t0 = Date.now(); ;) {
      const names = fs.existsSync(snapDir) ? fs.readdirSync(snapDir) : [];
      const saved = names.filter((n) => /big\.shard-\d-of-2$/.test(n) && fs.readdirSync(path.join(snapDir, n)).length > 0);
      if (saved.length === 2) break;
      if (Date.now() - t0 > 600000) fail(`no snapshots of n1's replicas: ${names}`);
      await sleep(500);
    }
    // One recovery: TAIL more documents (the nodes follow them), then n1
    // killed and started again at once with `bin` on the same port and folder.
    let written = DOCS, tailFill;
    // n1 stopped with SIGTERM (it snapshots its replicas at the log's head as
    // it shuts down) and started again: each later round replays its own
    // tail only, as the first does (periodic snapshots come every 20,000
    // entries or 300 s, so without this the tails would add up).
    const restartClean = async () => {
      nodes[1].child.kill('SIGTERM');
      for (const t0 = Date.now(); nodes[1].child.exitCode === null && nodes[1].child.signalCode === null;) {
        if (Date.now() - t0 > 600000) fail('n1 did not shut down within 600 s');
        await sleep(100);
      }
      nodes[1] = await startNode(opts, 1, nodes[1].port);
      await waitHealthy(nodes[1], 1, DIR, fail);
      await waitReady(nodes[0], 'n1', Date.now(), 1200);
    };
    const recover = async (bin) => {
      if (written > DOCS) await restartClean();
      tailFill = JSON.parse(execFileSync(FILL, ['--store', db.uri, '--into', 'big', '--docs', String(TAIL),
        '--first', String(written), '--writers', '4', '--batch', '256'], { encoding: 'utf8' }));
      written += TAIL;
      await waitReady(nodes[0], 'n1', Date.now(), 600);
      const before = (await call(nodes[1].port, 'GET', '/collections/big')).json.node;
      const openedLines = () => fs.readFileSync(path.join(DIR, 'node1.log'), 'utf8').split('\n').filter((l) => l.includes(' opened in '));
      const openedBefore = openedLines().length;
      const tKill = Date.now();
      nodes[1].child.kill('SIGKILL');
      while (nodes[1].child.exitCode === null && nodes[1].child.signalCode === null) await sleep(5);
      nodes[1] = await startNode({ ...opts, bin }, 1, nodes[1].port);
      await waitHealthy(nodes[1], 1, DIR, fail);
      const healthS = (Date.now() - tKill) / 1000;
      let firstClaimS = null;
      for (;;) {
        const c = await placedOn(nodes[0]).catch(() => undefined);
        if (c && c.shard_list.some((sh) => sh.replicas.some((r) => r.node === 'n1'))) { firstClaimS = (Date.now() - tKill) / 1000; break; }
        if (Date.now() - tKill > 600000) fail('n1 claimed nothing after its restart');
        await sleep(50);
      }
      const readyS = await waitReady(nodes[0], 'n1', tKill, 1200);
      const after = (await call(nodes[1].port, 'GET', '/collections/big')).json.node;
      // The restarted node's account of each replica's opening (ShardReplica::Open logs one taking 1 s or more).
      const opened = openedLines().slice(openedBefore);
      const r = { bin: bin === BIN ? 'bin' : 'baseline', healthS, firstClaimS, readyS, before, after, opened };
      console.error(`recovery (${r.bin}): ready ${readyS.toFixed(1)} s; ${opened.join(' | ')}`);
      return r;
    };
    const rounds = [];
    for (let i = 0; i < ROUNDS; i++) {
      const order = BASELINE ? (i % 2 === 0 ? [BIN, BASELINE] : [BASELINE, BIN]) : [BIN];
      for (const bin of order) rounds.push(await recover(bin));
    }
    const { healthS, firstClaimS, readyS, before, after, opened } = rounds.find((r) => r.bin === 'bin');
    const placement = await placedOn(nodes[0]);
    const median = (xs) => { const v = [...xs].sort((a, b) => a - b); return v.length % 2 ? v[v.length >> 1] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2; };
    const readyOf = (which) => rounds.filter((r) => r.bin === which).map((r) => r.readyS);
    const out = {
      docs: DOCS, dims: '1024+32', shards: 2, replicas: 2,
      fill_docs_per_s: Math.round(fill.docs_per_s),
      build_s: { n0: build[0], n1: build[1] },
      rss_mb_after_build: rssAfterBuild,
      tail_docs: TAIL, tail_docs_per_s: Math.round(tailFill.docs_per_s),
      kill9_to_health_s: healthS, kill9_to_first_claim_s: firstClaimS, kill9_to_ready_s: readyS,
      n1_documents_before: before.indexed, n1_documents_after: after.indexed,
      n1_opened_from_snapshot: after.opened_from_snapshot, n1_replayed_entries: after.replayed_entries,
      n1_index_rebuilds: after.index_rebuilds,
      n1_still_assigned: placement.shard_list.every((sh) => sh.assigned.includes('n1')),
      n1_open_log: opened,
      rounds: rounds.map((r) => ({ bin: r.bin, kill9_to_ready_s: r.readyS, open_log: r.opened })),
      kill9_to_ready_median_s: median(readyOf('bin')),
      ...(BASELINE ? { baseline_kill9_to_ready_median_s: median(readyOf('baseline')),
        ready_speedup_over_baseline: median(readyOf('baseline')) / median(readyOf('bin')) } : {}),
    };
    console.log(JSON.stringify(out));
  } finally {
    await stopNodes(nodes);
    db.drop();
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error(e);
  process.exitCode = 1;
});
