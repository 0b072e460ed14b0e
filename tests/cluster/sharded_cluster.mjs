// Three moeedb nodes over one PostgreSQL database and one etcd: a collection
// of 6 shards x 2 replicas, placed on them through etcd, answers 200 queries
// in every mode (hybrid and lexical included, filters included) with the
// same ids and scores (1e-6) as a collection of one shard, which every node
// holds whole, over the same documents. Exact indexes; the same collection
// with HNSW indexes reports its recall@10 against the exact answer. Then
// `moeedb cluster status` and draining a node, with the web console's
// cluster page checked against GET /cluster.
//
//   node tests/cluster/sharded_cluster.mjs --pg URI --etcd HOST:PORT [--bin build/moeedb]
//        [--model models/moeedb-tiny] [--docs 600] [--queries 200]
// ctest runs it with its throwaway PostgreSQL and etcd (tests/CMakeLists.txt).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { arg } from '../soak/soak_util.mjs';
import { readClusterConsole } from './cluster_console.mjs';
import { ROOT, call, etcdList as etcdListAt, freshDatabase, sentences, sleep, startNodes, stopNodes } from './cluster_nodes.mjs';

const PG = arg('pg', process.env.MOEEDB_TEST_PG_DIR ? fs.readFileSync(`${process.env.MOEEDB_TEST_PG_DIR}/uri`, 'utf8').trim() : '');
const ETCD = arg('etcd', process.env.MOEEDB_TEST_ETCD_DIR ? fs.readFileSync(`${process.env.MOEEDB_TEST_ETCD_DIR}/endpoint`, 'utf8').trim() : '');
const BIN = path.resolve(arg('bin', path.join(ROOT, 'build/moeedb')));
const MODEL = path.resolve(arg('model', path.join(ROOT, 'models/moeedb-tiny')));
const DOCS = Number(arg('docs', 600));
const QUERIES = Number(arg('queries', 200));
const etcdList = (prefix) => etcdListAt(ETCD, prefix);

function fail(message) {
  console.error(`sharded_cluster: FAILED: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

async function main() {
  if (!PG || !ETCD) fail('needs --pg URI and --etcd HOST:PORT (or ctest\'s MOEEDB_TEST_PG_DIR and MOEEDB_TEST_ETCD_DIR)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-sharded-'));
  const db = freshDatabase(PG, `sharded_${process.pid}`);
  const uri = db.uri;
  const cluster = `test${process.pid}`;
  let nodes = [];
  try {
    nodes = await startNodes({ bin: BIN, model: MODEL, uri, etcd: ETCD, cluster, dir, count: 3, fail });
    const [a] = nodes;
    const create = async (name, body) => {
      const r = await call(a.port, 'PUT', `/collections/${name}`, body);
      if (r.status !== 201) fail(`PUT ${name}: ${r.status} ${r.text}`);
    };
    await create('one', {});
    await create('six', { shards: 6, replicas: 2 });
    await create('six_hnsw', { shards: 6, replicas: 2, index: { hs: 'hnsw', rw: 'hnsw' } });
    const { docs: texts, queries } = sentences();
    const docs = texts.slice(0, DOCS).map((text, i) => ({ id: `doc-${i}`, text, metadata: { group: i % 5, year: 1990 + (i % 30) } }));
    // The same batches in the same order: the same embeddings in each collection.
    for (let at = 0; at < docs.length; at += 100) {
      for (const name of ['one', 'six', 'six_hnsw']) {
        const r = await call(a.port, 'POST', `/collections/${name}/documents`, { documents: docs.slice(at, at + 100) }, 300000);
        if (r.status !== 200) fail(`upsert ${name}: ${r.status} ${r.text}`);
      }
    }
    // Placement settles: every shard claimed ready by two nodes, each node holding 4.
    const prefix = `/moeedb/${cluster}/replicas/six/`;
    for (let t = 0; ; t++) {
      const claims = await etcdList(prefix);
      const perShard = new Map(), perNode = new Map();
      for (const c of claims) {
        const [, shard, node] = c.key.slice(prefix.length).split('/');  // <shards>/<shard>/<node>
        perShard.set(shard, (perShard.get(shard) || 0) + 1);
        perNode.set(node, (perNode.get(node) || 0) + 1);
      }
      if (perShard.size === 6 && [...perShard.values()].every((n) => n === 2) && [...perNode.values()].every((n) => n === 4)) break;
      if (t > 300) fail(`placement did not settle: ${JSON.stringify(claims.map((c) => c.key))}`);
      await sleep(200);
    }
    const placement = JSON.parse((await etcdList(`/moeedb/${cluster}/placement/six`))[0].value);
    console.log(`placement of six: ${JSON.stringify(placement.assigned)}`);

    const modes = [
      { mode: 'fused' }, { mode: 'hs' }, { mode: 'rw' }, { mode: 'lexical' }, { mode: 'hybrid' },
      { mode: 'hybrid', fusion: 'weighted', norm: 'minmax' }, { mode: 'hybrid', fusion: 'weighted', norm: 'zscore' },
    ];
    let compared = 0, searches = 0;
    const recall = { hits: 0, of: 0 };
    for (let qi = 0; qi < QUERIES; qi++) {
      const filter = qi % 2 ? { group: { $in: [1, 3] }, year: { $gte: 1995 } } : undefined;
      for (const m of modes) {
        const body = { query: queries[qi % queries.length], k: 10, exact: true, ...m, ...(filter ? { filter } : {}) };
        const node = nodes[qi % 3];  // any node coordinates
        // One after the other: a query embedded alone each time (texts batched
        // together come out of the model a rounding apart).
        const one = await call(a.port, 'POST', '/collections/one/search', body);
        const six = await call(node.port, 'POST', '/collections/six/search', body);
        if (one.status !== 200 || six.status !== 200) fail(`query ${qi} ${JSON.stringify(m)}: ${one.status} ${six.status} ${six.text}`);
        ++searches;
        const h1 = one.json.hits, h6 = six.json.hits;
        if (h1.length !== h6.length) fail(`query ${qi} ${JSON.stringify(m)}: ${h1.length} hits against ${h6.length}`);
        for (let i = 0; i < h1.length; i++) {
          if (h1[i].id !== h6[i].id) fail(`query ${qi} ${JSON.stringify(m)} rank ${i}: ${h1[i].id} against ${h6[i].id}`);
          for (const f of ['score', 'score_hs', 'score_rw', 'score_lex'])
            if (Math.abs((h1[i][f] ?? 0) - (h6[i][f] ?? 0)) > 1e-6) fail(`query ${qi} ${JSON.stringify(m)} rank ${i}: ${f} ${h1[i][f]} against ${h6[i][f]}: ` +
              `${JSON.stringify({ ...h1[i], text: undefined })} against ${JSON.stringify({ ...h6[i], text: undefined })}`);
          ++compared;
        }
        if (m.mode === 'fused') {  // HNSW shards against the exact answer
          const ann = await call(node.port, 'POST', '/collections/six_hnsw/search', { ...body, exact: false });
          if (ann.status !== 200) fail(`hnsw query ${qi}: ${ann.status} ${ann.text}`);
          const exact = new Set(h1.map((h) => h.id));
          recall.hits += ann.json.hits.filter((h) => exact.has(h.id)).length;
          recall.of += exact.size;
        }
      }
    }
    // cluster status: 3 nodes, every shard of six on 2 replicas with no lag.
    const status = () => JSON.parse(execFileSync(BIN, ['cluster', 'status', '--etcd', ETCD, '--cluster', cluster, '--db', uri]));
    const st = status();
    const six = st.collections.find((c) => c.name === 'six');
    if (st.nodes.length !== 3 || !six || six.shard_list.length !== 6 ||
        six.shard_list.some((sh) => sh.replicas.length !== 2 || sh.replicas.some((r) => r.lag !== 0)))
      fail(`cluster status: ${JSON.stringify(st)}`);
    // Draining n2: its replicas move to n0 and n1 (it serves until they are ready); answers unchanged.
    execFileSync(BIN, ['cluster', 'drain', 'n2', '--etcd', ETCD, '--cluster', cluster]);
    for (let t = 0; ; t++) {
      const c = status().collections.find((x) => x.name === 'six');
      if (c.shard_list.every((sh) => sh.replicas.length === 2 && sh.replicas.every((r) => r.node !== 'n2') &&
                                      sh.leaving.length === 0)) break;
      if (t > 300) fail(`n2 did not drain: ${JSON.stringify(c)}`);
      await sleep(200);
    }
    for (let qi = 0; qi < 20; qi++) {
      const body = { query: queries[qi], k: 10, exact: true, mode: ['fused', 'lexical', 'hybrid'][qi % 3] };
      const one = await call(a.port, 'POST', '/collections/one/search', body);
      const six2 = await call(nodes[2].port, 'POST', '/collections/six/search', body);
      if (six2.status !== 200 || JSON.stringify(one.json.hits.map((h) => h.id)) !== JSON.stringify(six2.json.hits.map((h) => h.id)))
        fail(`after draining n2, query ${qi}: ${six2.status} ${six2.text.slice(0, 300)}`);
    }
    const drained = (await call(nodes[2].port, 'GET', '/collections/six')).json.node.replicas.length;
    if (drained !== 0) fail(`n2 still holds ${drained} replicas after draining`);
    // The web console's cluster page on n0 shows what GET /cluster answers: n2 draining, each shard's replicas.
    const shown = await readClusterConsole(ROOT, `http://127.0.0.1:${a.port}`);
    const api = (await call(a.port, 'GET', '/cluster')).json;
    const want = {
      nodes: api.nodes.map((n) => ({ id: n.id, state: n.draining ? 'draining' : 'serving' })),
      collections: Object.fromEntries(api.collections.map((c) => [c.name, c.shard_list.map((s) => ({
        shard: s.shard, assigned: s.assigned, ready: s.replicas.map((r) => r.node) }))])),
    };
    if (api.node !== 'n0' || JSON.stringify(shown) !== JSON.stringify(want) ||
        !shown.nodes.some((n) => n.id === 'n2' && n.state === 'draining') || shown.collections.six.length !== 6)
      fail(`the console's cluster page ${JSON.stringify(shown)} is not GET /cluster's ${JSON.stringify(want)}`);
    execFileSync(BIN, ['cluster', 'drain', 'n2', '--undo', '--etcd', ETCD, '--cluster', cluster]);
    console.log('sharded_cluster: cluster status lists 3 nodes, 6 shards x 2 ready replicas, lag 0; ' +
      'n2 drained: its replicas moved to n0 and n1, answers unchanged (20 queries through n2); ' +
      "the console's cluster page shows it as GET /cluster does");
    // Each node's indexes hold its four shards, about two thirds of the documents.
    for (const [i, n] of nodes.entries()) {
      const info = await call(n.port, 'GET', '/collections/six');
      console.log(`node ${i}: ${JSON.stringify(info.json.node)}`);
    }
    console.log(`sharded_cluster: ${searches} searches (${QUERIES} queries x ${modes.length} modes, half filtered) ` +
      `on 3 nodes, 6 shards x 2 replicas: ${compared} hits identical to one shard's (ids, scores within 1e-6)`);
    console.log(`sharded_cluster: HNSW shards, fused mode: recall@10 against the exact answer ${(recall.hits / recall.of).toFixed(4)} ` +
      `(${recall.hits}/${recall.of})`);
  } finally {
    await stopNodes(nodes);
    db.drop();
    if (!process.exitCode) fs.rmSync(dir, { recursive: true, force: true });
    else console.error(`sharded_cluster: logs in ${dir}`);
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error(e);
  process.exitCode = 1;
});
