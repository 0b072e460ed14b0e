// Resharding online: three moeedb nodes over one PostgreSQL database and one
// etcd split a collection of 3 shards x 2 replicas into 6 (`moeedb cluster
// reshard`), then into 2 (PUT /collections/{name}/shards), while a writer
// upserts, replaces and deletes documents and a searcher asks every node
// all the time. Checked: every write acknowledged, every search answered
// complete (200, k hits: a missing shard answers 503) before, during and
// after each switch; at the end the collection answers 60 queries in four
// modes through every node exactly as a collection of one shard given the
// same writes (ids, scores within 1e-6); its documents are exactly what the
// writer's acknowledged writes left (ids and metadata); every shard of the
// final split is held by 2 nodes with the same ids, and the old splits'
// replicas are gone.
//
//   node tests/cluster/reshard_cluster.mjs --pg URI --etcd HOST:PORT [--bin build/moeedb]
//        [--model models/moeedb-tiny]
// ctest runs it with its throwaway PostgreSQL and etcd (tests/CMakeLists.txt).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { arg } from '../soak/soak_util.mjs';
import { ROOT, call, freshDatabase, sentences, sleep, startNodes, stopNodes } from './cluster_nodes.mjs';

const PG = arg('pg', process.env.MOEEDB_TEST_PG_DIR ? fs.readFileSync(`${process.env.MOEEDB_TEST_PG_DIR}/uri`, 'utf8').trim() : '');
const ETCD = arg('etcd', process.env.MOEEDB_TEST_ETCD_DIR ? fs.readFileSync(`${process.env.MOEEDB_TEST_ETCD_DIR}/endpoint`, 'utf8').trim() : '');
const BIN = path.resolve(arg('bin', path.join(ROOT, 'build/moeedb')));
const MODEL = path.resolve(arg('model', path.join(ROOT, 'models/moeedb-tiny')));
const COLL = 'resharded';
const run = promisify(execFile);

function fail(message) {
  console.error(`reshard_cluster: FAILED: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

async function main() {
  if (!PG || !ETCD) fail('needs --pg URI and --etcd HOST:PORT (or ctest\'s MOEEDB_TEST_PG_DIR and MOEEDB_TEST_ETCD_DIR)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-reshard-'));
  const db = freshDatabase(PG, `reshard_${process.pid}`);
  const cluster = `reshard${process.pid}`;
  let nodes = [];
  try {
    nodes = await startNodes({ bin: BIN, model: MODEL, uri: db.uri, etcd: ETCD, cluster, dir, count: 3, fail });
    const [a] = nodes;
    const status = async () => JSON.parse((await run(BIN, ['cluster', 'status', '--etcd', ETCD, '--cluster', cluster, '--db', db.uri])).stdout);
    const placed = async () => (await status()).collections.find((c) => c.name === COLL);
    for (const [name, body] of [['one', {}], [COLL, { shards: 3, replicas: 2 }]]) {
      const r = await call(a.port, 'PUT', `/collections/${name}`, body);
      if (r.status !== 201) fail(`PUT ${name}: ${r.status} ${r.text}`);
    }
    const { docs: texts, queries } = sentences();
    // The writer's oracle: each id's metadata as the last acknowledged write left it (null: deleted).
    const acked = new Map();
    const write = async (route, body) => {
      for (const name of [COLL, 'one']) {
        const r = await call(a.port, 'POST', `/collections/${name}/${route}`, body, 300000);
        if (r.status !== 200) fail(`${route} of ${name}: ${r.status} ${r.text}`);
      }
    };
    const upsert = async (docs) => {
      await write('documents', { documents: docs });
      for (const d of docs) acked.set(d.id, d.metadata);
    };
    const initial = texts.slice(0, 300).map((text, i) => ({ id: `doc-${i}`, text, metadata: { group: i % 5, round: 0 } }));
    for (let at = 0; at < initial.length; at += 100) await upsert(initial.slice(at, at + 100));
    for (let t = 0; ; t++) {
      const c = await placed();
      if (c && c.shards === 3 && c.shard_list.every((sh) => sh.replicas.filter((r) => r.state === 'ready').length === 2)) break;
      if (t > 300) fail(`the placement of 3 shards x 2 did not settle: ${JSON.stringify(c)}`);
      await sleep(200);
    }

    // The writer: new documents, a replacement and (every other batch) a
    // delete a batch, to both collections alike, one batch at a time.
    let writing = true, batches = 0;
    const writer = (async () => {
      for (let next = 300; writing && next + 4 < texts.length; next += 4) {
        const docs = texts.slice(next, next + 4).map((text, i) => ({ id: `doc-${next + i}`, text, metadata: { group: (next + i) % 5, round: 1 } }));
        const old = (next * 7) % 300;
        docs.push({ id: `doc-${old}`, text: texts[old], metadata: { group: 9, rewritten: next } });
        await upsert(docs);
        if (batches % 2 === 1) {
          const gone = `doc-${(next * 13) % 300}`;
          await write('documents/delete', { ids: [gone] });
          acked.set(gone, null);
        }
        ++batches;
      }
    })();
    // The searcher: every node in turn, four modes; each answer complete.
    let searching = true;
    const searches = { total: 0, during: 0 };
    let resharding = false, short = 0;
    const modes = ['fused', 'hybrid', 'lexical', 'rw'];
    const searcher = (async () => {
      for (let i = 0; searching; i++) {
        const node = nodes[i % 3];
        const body = { query: queries[i % queries.length], k: 10, mode: modes[i % modes.length] };
        const r = await call(node.port, 'POST', `/collections/${COLL}/search`, body);
        // A shard no replica answered fails the search (503); a hit a
        // concurrent replacement or delete removed after the shards
        // answered is left out, so a complete answer holds 10 hits less those.
        if (r.status !== 200 || r.json.hits.length < 7 || r.json.missing_shards)
          fail(`search ${i} through n${i % 3} (${body.mode}) ${resharding ? 'during a reshard' : ''}: ${r.status} ` +
            `${r.json?.hits?.length} hits ${r.text.slice(0, 300)}`);
        short += 10 - r.json.hits.length;
        ++searches.total;
        if (resharding) ++searches.during;
      }
    })();
    const failed = Promise.race([writer, searcher]).then(() => { if (writing && searching) fail('the writer ran out of texts'); });
    failed.catch(() => {});

    // 3 -> 6 by the CLI, waiting for the switch.
    await sleep(2000);
    resharding = true;
    const t6 = Date.now();
    const cli = await run(BIN, ['cluster', 'reshard', COLL, '--shards', '6', '--etcd', ETCD, '--cluster', cluster, '--wait', '180']);
    const to6 = (Date.now() - t6) / 1000;
    resharding = false;
    if (!cli.stdout.includes('is split into 6 shards')) fail(`cluster reshard: ${cli.stdout} ${cli.stderr}`);
    const six = await placed();
    if (six.shards !== 6 || six.resharding_to || six.shard_list.length !== 6) fail(`after 3 -> 6: ${JSON.stringify(six)}`);
    console.log(`reshard_cluster: 3 -> 6 switched in ${to6.toFixed(1)} s (moeedb cluster reshard --wait), ${batches} write batches so far`);

    // 6 -> 2 by the collections API through another node; the switch waits for the 3-shard split to retire.
    await sleep(1000);
    resharding = true;
    const t2 = Date.now();
    const put = await call(nodes[1].port, 'PUT', `/collections/${COLL}/shards`, { shards: 2 });
    if (put.status !== 202 || put.json.resharding_to !== 2) fail(`PUT shards 2: ${put.status} ${put.text}`);
    const bad = await call(nodes[1].port, 'PUT', `/collections/${COLL}/shards`, { shards: 5 });
    if (bad.status !== 409) fail(`a second reshard to another count while one is under way: ${bad.status} ${bad.text}`);
    for (let t = 0; ; t++) {
      const c = await placed();
      if (c.shards === 2 && !c.resharding_to) break;
      if (t > 900) fail(`6 -> 2 did not switch: ${JSON.stringify(c)}`);
      await sleep(200);
    }
    const to2 = (Date.now() - t2) / 1000;
    resharding = false;
    console.log(`reshard_cluster: 6 -> 2 switched in ${to2.toFixed(1)} s (PUT /collections/${COLL}/shards), ${batches} write batches so far`);
    await sleep(2000);
    writing = false;
    await writer;
    searching = false;
    await searcher;

    // The retired splits' replicas go from every node.
    for (let t = 0; ; t++) {
      const c = await placed();
      const held = await Promise.all(nodes.map((n) => call(n.port, 'GET', `/collections/${COLL}`)));
      const splits = held.flatMap((h) => h.json.node.replicas.map((r) => r.of));
      if (!c.retiring && splits.every((of) => of === 2) && splits.length === 4) break;
      if (t > 300) fail(`the old splits did not retire: ${JSON.stringify(c)} ${JSON.stringify(held.map((h) => h.json.node.replicas))}`);
      await sleep(200);
    }

    // Nothing lost: the stored documents are the oracle's.
    const stored = new Map();
    for (let after = ''; ;) {
      const r = await call(nodes[2].port, 'GET', `/collections/${COLL}/documents?limit=1000${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      if (r.status !== 200) fail(`listing: ${r.status} ${r.text}`);
      for (const d of r.json.documents) stored.set(d.id, d.metadata);
      if (!r.json.next_after) break;
      after = r.json.next_after;
    }
    const want = [...acked].filter(([, m]) => m !== null);
    if (stored.size !== want.length) fail(`${stored.size} documents stored, ${want.length} acknowledged and not deleted`);
    for (const [id, m] of want)
      if (JSON.stringify(stored.get(id)) !== JSON.stringify(m)) fail(`${id}: stored ${JSON.stringify(stored.get(id))}, acknowledged ${JSON.stringify(m)}`);
    // Each shard of the final split: 2 nodes hold it with the same ids; together they hold every stored document once.
    const byShard = new Map();
    for (const n of nodes) {
      const r = await call(n.port, 'GET', `/collections/${COLL}/shards`);
      for (const rep of r.json.replicas ?? r.json) (byShard.get(rep.shard) ?? byShard.set(rep.shard, []).get(rep.shard)).push(rep);
    }
    let indexed = 0;
    for (const [k, reps] of byShard) {
      if (reps.length !== 2 || reps.some((r) => r.of !== 2)) fail(`shard ${k}: ${reps.length} replicas ${JSON.stringify(reps.map((r) => r.of))}`);
      if (JSON.stringify(reps[0].ids) !== JSON.stringify(reps[1].ids)) fail(`shard ${k}: its two replicas differ`);
      indexed += reps[0].ids.length;
    }
    if (byShard.size !== 2 || indexed !== want.length) fail(`${byShard.size} shards holding ${indexed} documents, ${want.length} stored`);

    // The same answers as one shard given the same writes, through every node.
    let compared = 0;
    for (let qi = 0; qi < 60; qi++) {
      for (const mode of ['fused', 'hs', 'lexical', 'hybrid']) {
        const body = { query: queries[qi % queries.length], k: 10, exact: true, mode, consistency: 'head' };
        const one = await call(a.port, 'POST', '/collections/one/search', body);
        const two = await call(nodes[qi % 3].port, 'POST', `/collections/${COLL}/search`, body);
        if (one.status !== 200 || two.status !== 200) fail(`query ${qi} ${mode}: ${one.status} ${two.status} ${two.text}`);
        const h1 = one.json.hits, h2 = two.json.hits;
        if (h1.length !== h2.length) fail(`query ${qi} ${mode}: ${h1.length} hits against ${h2.length}`);
        for (let i = 0; i < h1.length; i++) {
          if (h1[i].id !== h2[i].id) fail(`query ${qi} ${mode} rank ${i}: ${h1[i].id} against ${h2[i].id}`);
          for (const f of ['score', 'score_hs', 'score_rw', 'score_lex'])
            if (Math.abs((h1[i][f] ?? 0) - (h2[i][f] ?? 0)) > 1e-6) fail(`query ${qi} ${mode} rank ${i}: ${f} ${h1[i][f]} against ${h2[i][f]}`);
          ++compared;
        }
      }
    }
    console.log(`reshard_cluster: ${batches} write batches acknowledged (${want.length} documents left, as stored); ` +
      `${searches.total} searches complete (${searches.during} while a reshard was under way; ${short} hits left out ` +
      'in all, removed by a concurrent write after the shards answered); ' +
      `after 3 -> 6 -> 2: ${compared} hits identical to one shard's through 3 nodes; each of 2 shards on 2 nodes, the old splits gone`);
  } finally {
    await stopNodes(nodes);
    db.drop();
    if (!process.exitCode) fs.rmSync(dir, { recursive: true, force: true });
    else console.error(`reshard_cluster: logs in ${dir}`);
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error(e);
  process.exitCode = 1;
});
