// LangChain.js's Qdrant vector store, unmodified, against `moeedb serve`
// with the embedded default model: OpenAIEmbeddings pointed at moeedb's /v1
// computes the vectors (moeedb's fused vector), QdrantVectorStore built from
// url and apiKey alone stores them (one unnamed Cosine vector of the fused
// size) with the text under "content". Its answers must equal the same
// texts ingested as text through moeedb's own collections API: the same
// ids, scores within 1e-5. MMR is checked against a reference in this file;
// kill -9 loses no acknowledged point; bad input is a Qdrant-shaped 400.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { OpenAIEmbeddings } from '@langchain/openai';
import { QdrantVectorStore } from '@langchain/qdrant';
import { QdrantClient } from '@qdrant/js-client-rest';
import { callApi, root, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'lc-key';
const model = path.join(root, 'models/moeedb-tiny');
const texts = [
  ['A man is playing a flute.', 'music'],
  ['A woman is playing the violin on stage.', 'music'],
  ['Two dogs are running through the snow.', 'animals'],
  ['A cat sleeps on a warm windowsill.', 'animals'],
  ['The stock market fell sharply on Tuesday.', 'money'],
  ['The central bank raised interest rates again.', 'money'],
  ['A dog catches a frisbee in the park.', 'animals'],
  ['An orchestra performs a symphony tonight.', 'music'],
];
const query = 'a puppy playing outside in winter';
let server, base, qdrantUrl, work, db, embeddings;

const api = (p, body, method) => callApi(base, apiKey, p, body, method);

async function start() {
  ({ server, base, qdrant: qdrantUrl } = await startServer(['--db', db, '--model', model, '--served-model-name', 'moeedb',
    '--api-key', apiKey, '--qdrant-port', '0']));
  embeddings = new OpenAIEmbeddings({ model: 'moeedb', apiKey, configuration: { baseURL: `${base}/v1` } });
}

const store = (collectionName) => new QdrantVectorStore(embeddings, { url: qdrantUrl, apiKey, collectionName });

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-lc-'));
  db = path.join(work, 'db');
  await start();
  // The reference: the same texts as text, through moeedb's own API.
  assert.equal((await api('/collections/ref', {}, 'PUT')).status, 201);
  const r = await api('/collections/ref/documents', { documents: texts.map(([text, topic], i) => ({ id: `d${i}`, text,
    metadata: { topic } })) });
  assert.equal(r.status, 200, JSON.stringify(r.body));
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

// moeedb's own search of the reference collection: [{text, score}], each
// score as a Qdrant client of a Cosine collection sees it: the fused score
// cos_HS + alpha * cos_RW over 1 + |alpha|.
async function reference(q, k, extra = {}, collection = 'ref') {
  const r = await api(`/collections/${collection}/search`, { query: q, k, ...extra });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const alpha = extra.alpha ?? (await api(`/collections/${collection}`)).body.spec.alpha;
  return r.body.hits.map((h) => ({ ...h, score: h.score / (1 + Math.abs(alpha)) }));
}

function assertSameHits(got, want, what) {
  assert.deepEqual(got.map(([d]) => d.pageContent), want.map((h) => h.text), `${what}: the same documents in order`);
  got.forEach(([, score], i) => assert.ok(Math.abs(score - want[i].score) < 1e-5,
    `${what}: hit ${i} score ${score} vs ${want[i].score}`));
}

test('fromTexts creates a fused-vector collection; similaritySearchWithScore equals moeedb search by text', async () => {
  const lc = await QdrantVectorStore.fromTexts(texts.map(([t]) => t), texts.map(([, topic]) => ({ topic })), embeddings,
    { url: qdrantUrl, apiKey, collectionName: 'lc' });
  const info = await api('/collections/lc');
  assert.equal(info.body.documents, texts.length);
  assert.equal(info.body.spec.info.vectors.kind, 'fused');
  const fused = info.body.spec.dim_hs + info.body.spec.dim_rw;
  const q = new QdrantClient({ url: qdrantUrl, apiKey, checkCompatibility: false });
  assert.deepEqual((await q.getCollection('lc')).config.params.vectors, { size: fused, distance: 'Cosine' });
  for (const k of [1, 3, texts.length]) {
    assertSameHits(await lc.similaritySearchWithScore(query, k), await reference(query, k), `k=${k}`);
  }
  const top = await lc.similaritySearch('interest rates and markets', 2);
  assert.deepEqual(top.map((d) => d.metadata.topic), ['money', 'money']);
  // Another alpha through Qdrant's params, equal to moeedb's own alpha.
  const qv = await embeddings.embedQuery(query);
  const alt = await q.query('lc', { query: qv, limit: 4, params: { alpha: 0.25 }, with_payload: true });
  const want = await reference(query, 4, { alpha: 0.25 });
  assert.deepEqual(alt.points.map((p) => p.payload.content), want.map((h) => h.text));
  alt.points.forEach((p, i) => assert.ok(Math.abs(p.score - want[i].score) < 1e-5, `alpha 0.25 hit ${i}`));
});

test('documents with their own ids: the same ids and scores as moeedb over the same ids', async () => {
  const uuid = (i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
  const docs = texts.map(([pageContent, topic], i) => ({ pageContent, metadata: { topic }, id: uuid(i) }));
  const lc = await QdrantVectorStore.fromDocuments(docs, embeddings, { url: qdrantUrl, apiKey, collectionName: 'lc-ids' });
  assert.equal((await api('/collections/ref-ids', {}, 'PUT')).status, 201);
  assert.equal((await api('/collections/ref-ids/documents', { documents: docs.map((d) => ({ id: d.id, text: d.pageContent })) })).status, 200);
  const got = await lc.similaritySearchWithScore(query, 5);
  const want = await reference(query, 5, {}, 'ref-ids');
  assert.deepEqual(got.map(([d]) => d.id), want.map((h) => h.id));
  got.forEach(([, score], i) => assert.ok(Math.abs(score - want[i].score) < 1e-5, `hit ${i}`));
});

test('filters on metadata (nested keys), text match, retriever', async () => {
  const lc = store('lc');
  const animals = { must: [{ key: 'metadata.topic', match: { value: 'animals' } }] };
  assertSameHits(await lc.similaritySearchWithScore(query, 3, animals),
    await reference(query, 3, { filter: { topic: 'animals' } }), 'filter');
  const notMusic = { must_not: [{ key: 'metadata.topic', match: { any: ['music'] } }] };
  for (const d of await lc.similaritySearch(query, 5, notMusic)) assert.notEqual(d.metadata.topic, 'music');
  const dogs = await lc.similaritySearch(query, 8, { must: [{ key: 'content', match: { text: 'dog' } }] });
  assert.deepEqual(dogs.map((d) => d.pageContent).sort(), texts.map(([t]) => t).filter((t) => t.includes('dog')).sort());
  // has_id: the documents' own ids, here the two best hits of a plain search.
  const q = new QdrantClient({ url: qdrantUrl, apiKey, checkCompatibility: false });
  const qv = await embeddings.embedQuery(query);
  const all = (await q.query('lc', { query: qv, limit: 8 })).points.map((p) => p.id);
  const some = [all[5], all[2]];
  const hasId = (await q.query('lc', { query: qv, limit: 8, filter: { must: [{ has_id: some }] } })).points.map((p) => p.id);
  assert.deepEqual(hasId, [all[2], all[5]]);
  assert.equal((await q.count('lc', { filter: { must_not: [{ has_id: some }] } })).count, texts.length - 2);
  const retrieved = await lc.asRetriever({ k: 2 }).invoke(query);
  assert.deepEqual(retrieved.map((d) => d.pageContent), (await reference(query, 2)).map((h) => h.text));
});

// Maximal marginal relevance as Qdrant defines it, over the fused vectors:
// sim = cos_HS + alpha * cos_RW of the standardized halves.
function referenceMmr(qv, points, dimHs, alpha, k, fetchK, diversity) {
  const sim = (a, b) => {
    let hs = 0, rw = 0;
    for (let i = 0; i < a.length; i++) (i < dimHs ? (hs += a[i] * b[i]) : (rw += a[i] * b[i]));
    const norm = (v, lo, hi) => Math.sqrt(v.slice(lo, hi).reduce((s, x) => s + x * x, 0));
    return hs / (norm(a, 0, dimHs) * norm(b, 0, dimHs)) + alpha * rw / (norm(a, dimHs, a.length) * norm(b, dimHs, b.length));
  };
  const pool = points.map((p) => ({ p, rel: sim(qv, p.vector) })).sort((x, y) => y.rel - x.rel).slice(0, fetchK);
  const picked = [];
  while (picked.length < Math.min(k, pool.length)) {
    let best = -1, bestScore = -Infinity;
    pool.forEach((c, i) => {
      if (picked.includes(i)) return;
      const penalty = picked.length ? Math.max(...picked.map((j) => sim(c.p.vector, pool[j].p.vector))) : 0;
      const s = (1 - diversity) * c.rel - diversity * penalty;
      if (s > bestScore) { best = i; bestScore = s; }
    });
    picked.push(best);
  }
  return picked.map((i) => pool[i].p.payload.content);
}

test('maxMarginalRelevanceSearch equals a reference MMR', async () => {
  const lc = store('lc');
  const q = new QdrantClient({ url: qdrantUrl, apiKey, checkCompatibility: false });
  const spec = (await api('/collections/lc')).body.spec;
  const all = (await q.scroll('lc', { limit: 100, with_vector: true, with_payload: true })).points;
  assert.equal(all.length, texts.length);
  const qv = await embeddings.embedQuery(query);
  for (const [k, fetchK, lambda] of [[3, 6, 0.5], [4, 8, 0.9], [3, 8, 0]]) {
    const got = await lc.maxMarginalRelevanceSearch(query, { k, fetchK, lambda });
    const want = referenceMmr(qv, all, spec.dim_hs, spec.alpha, k, fetchK, lambda);
    assert.deepEqual(got.map((d) => d.pageContent), want, `k=${k} fetchK=${fetchK} lambda=${lambda}`);
  }
  // Diversity changes the answer here (else the test above proves little).
  const plain = (await lc.similaritySearch(query, 3)).map((d) => d.pageContent);
  const diverse = (await lc.maxMarginalRelevanceSearch(query, { k: 3, fetchK: 8, lambda: 0.9 })).map((d) => d.pageContent);
  assert.notDeepEqual(diverse, plain);
});

test('the older search API, batches, payload selection, is_empty, payload indexes', async () => {
  const q = new QdrantClient({ url: qdrantUrl, apiKey, checkCompatibility: false });
  const qv = await embeddings.embedQuery(query);
  const want = await reference(query, 3);
  const s = await q.search('lc', { vector: qv, limit: 3, with_payload: { include: ['content'] } });
  assert.deepEqual(s.map((p) => p.payload), want.map((h) => ({ content: h.text })));
  s.forEach((p, i) => assert.ok(Math.abs(p.score - want[i].score) < 1e-5));
  const [b1, b2] = await q.searchBatch('lc', { searches: [{ vector: qv, limit: 2 }, { vector: qv, limit: 1,
    filter: { must: [{ key: 'metadata.topic', match: { value: 'money' } }] } }] });
  assert.equal(b1.length, 2);
  assert.equal(b2.length, 1);
  const qb = await q.queryBatch('lc', { searches: [{ query: qv, limit: 2 }, { query: qv, limit: 3, with_payload: { exclude: ['content'] } }] });
  assert.deepEqual(qb[0].points.map((p) => p.id), b1.map((p) => p.id));
  assert.ok(qb[1].points.every((p) => p.payload.metadata && p.payload.content === undefined));
  assert.equal((await q.count('lc', { filter: { must: [{ is_empty: { key: 'metadata.missing' } }] } })).count, texts.length);
  assert.equal((await q.count('lc', { filter: { must_not: [{ is_empty: { key: 'metadata.topic' } }] } })).count, texts.length);
  assert.equal((await q.createPayloadIndex('lc', { field_name: 'metadata.topic', field_schema: 'keyword', wait: true })).status, 'completed');
});

test('hybrid and lexical search on the client-vector collection read the payload text', async () => {
  const lex = await api('/collections/lc/search', { query: 'flute', mode: 'lexical', k: 3 });
  assert.equal(lex.status, 200, JSON.stringify(lex.body));
  assert.equal(lex.body.hits[0].text, texts[0][0]);
  const hybrid = await api('/collections/lc/search', { query: 'flute music', mode: 'hybrid', k: 3 });
  const want = (await api('/collections/ref/search', { query: 'flute music', k: 3, mode: 'hybrid' })).body.hits;
  assert.deepEqual(hybrid.body.hits.map((h) => h.text), want.map((h) => h.text));
  hybrid.body.hits.forEach((h, i) => assert.ok(Math.abs(h.score - want[i].score) < 1e-5, `hybrid hit ${i}`));
});

test('addDocuments with ids, delete by ids and by filter; kill -9 keeps every acknowledged point', async () => {
  let lc = store('lc');
  const ids = ['8c1f7a52-3c6e-4f0e-9a57-1d2b3c4d5e6f', '0b9e2d7c-6a4f-4e1b-8c3d-2f1e0d9c8b7a'];
  await lc.addDocuments([{ pageContent: 'A horse gallops across the field.', metadata: { topic: 'animals' } },
    { pageContent: 'Bond yields rose after the announcement.', metadata: { topic: 'money' } }], { ids });
  const q = () => new QdrantClient({ url: qdrantUrl, apiKey, checkCompatibility: false });
  assert.equal((await q().count('lc')).count, texts.length + 2);
  await lc.delete({ ids: [ids[0]] });
  assert.deepEqual((await q().retrieve('lc', { ids })).map((p) => p.id), [ids[1]]);
  await lc.delete({ filter: { must: [{ key: 'metadata.topic', match: { value: 'money' } }] } });
  const left = (await q().scroll('lc', { limit: 100, with_payload: true })).points;
  assert.equal(left.length, texts.length - 2);
  assert.ok(left.every((p) => p.payload.metadata.topic !== 'money'));
  const before = await lc.similaritySearchWithScore(query, 4);
  // Acknowledged (wait=true) writes survive kill -9.
  server.kill('SIGKILL');
  await new Promise((r) => server.once('exit', r));
  await start();
  lc = store('lc');
  const after = (await q().scroll('lc', { limit: 100, with_payload: true, with_vector: true })).points;
  assert.deepEqual(after.map((p) => p.id).sort(), left.map((p) => p.id).sort());
  assert.deepEqual(after.map((p) => p.payload), after.map((p) => left.find((l) => l.id === p.id).payload));
  const again = await lc.similaritySearchWithScore(query, 4);
  assert.deepEqual(again.map(([d]) => d.pageContent), before.map(([d]) => d.pageContent));
  again.forEach(([, s], i) => assert.ok(Math.abs(s - before[i][1]) < 1e-6));
});

test('plain vector collections: Cosine, Dot and Euclid against brute force; bad input is a 400 and stores nothing', async () => {
  const q = new QdrantClient({ url: qdrantUrl, apiKey, checkCompatibility: false });
  const rnd = (() => { let s = 7; return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1; })();
  const vecs = Array.from({ length: 40 }, () => Array.from({ length: 5 }, rnd));
  const qv = Array.from({ length: 5 }, rnd);
  const dot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  const metric = {
    Cosine: (a, b) => dot(a, b) / Math.sqrt(dot(a, a) * dot(b, b)),
    Dot: dot,
    Euclid: (a, b) => Math.sqrt(a.reduce((s, x, i) => s + (x - b[i]) ** 2, 0)),
  };
  for (const distance of ['Cosine', 'Dot', 'Euclid']) {
    const name = `plain-${distance}`;
    await q.createCollection(name, { vectors: { size: 5, distance } });
    await q.upsert(name, { wait: true, points: vecs.map((v, i) => ({ id: i, vector: v, payload: { i } })) });
    const got = (await q.query(name, { query: qv, limit: 5 })).points;
    const order = vecs.map((v, i) => ({ i, s: metric[distance](qv, v) }))
      .sort((x, y) => (distance === 'Euclid' ? x.s - y.s : y.s - x.s)).slice(0, 5);
    assert.deepEqual(got.map((p) => p.id), order.map((o) => o.i), distance);
    got.forEach((p, j) => assert.ok(Math.abs(p.score - order[j].s) < 1e-4, `${distance} score ${p.score} vs ${order[j].s}`));
    // Re-ranking prefetched candidates by a vector reports that vector's scores (distances for Euclid).
    const re = (await q.query(name, { prefetch: [{ query: qv, limit: 10 }], query: qv, limit: 5 })).points;
    assert.deepEqual(re.map((p) => p.id), order.map((o) => o.i), `${distance} re-ranked`);
    re.forEach((p, j) => assert.ok(Math.abs(p.score - order[j].s) < 1e-4, `${distance} re-ranked score ${p.score} vs ${order[j].s}`));
    // Cosine vectors come back at unit length, as Qdrant stores them.
    const back = await q.retrieve(name, { ids: [3], with_vector: true });
    const length = distance === 'Cosine' ? Math.hypot(...vecs[3]) : 1;
    back[0].vector.forEach((x, j) => assert.ok(Math.abs(x - vecs[3][j] / length) < 1e-6));
  }
  // The same through moeedb's own collections API: vector_size and distance, documents with a
  // vector (text optional), search by vector; wrong sizes are 400s that store nothing.
  assert.equal((await api('/collections/own-dot', { vector_size: 5, distance: 'Dot' }, 'PUT')).status, 201);
  const up = await api('/collections/own-dot/documents', { documents: vecs.map((v, i) => ({ id: `v${i}`, vector: v,
    ...(i === 0 ? { text: 'the first vector' } : {}) })) });
  assert.equal(up.status, 200, JSON.stringify(up.body));
  const own = await api('/collections/own-dot/search', { vector: qv, k: 5 });
  const dots = vecs.map((v, i) => ({ id: `v${i}`, s: metric.Dot(qv, v) })).sort((x, y) => y.s - x.s).slice(0, 5);
  assert.deepEqual(own.body.hits.map((h) => h.id), dots.map((d) => d.id));
  own.body.hits.forEach((h, i) => assert.ok(Math.abs(h.score - dots[i].s) < 1e-4));
  for (const bad of [{ documents: [{ id: 'x', vector: [1, 2] }] }, { documents: [{ id: 'x', vector: [1, 2, 3, 4, null] }] },
    { documents: [{ id: 'x', vector: { hs: qv, rw: [1] } }] }, { documents: [{ id: 'x', text: 'no model here' }] }]) {
    const r = await api('/collections/own-dot/documents', bad);
    assert.equal(r.status, 400, JSON.stringify(bad));
    assert.equal(typeof r.body.error.message, 'string');
  }
  assert.equal((await api('/collections/own-dot/search', { vector: [1, 2], k: 3 })).status, 400);
  assert.equal((await api('/collections/own-dot/search', { query: 'text', k: 3 })).status, 400);
  assert.equal((await api('/collections/own-dot')).body.documents, vecs.length);
  const count = async (name) => (await q.count(name)).count;
  const n = await count('lc');
  const fused = (await q.getCollection('lc')).config.params.vectors.size;
  const good = (await embeddings.embedDocuments(['x']))[0];
  for (const [what, call] of [
    ['wrong size', () => q.upsert('lc', { wait: true, points: [{ id: 900, vector: good.slice(1), payload: { content: 'x' } }] })],
    ['NaN', () => q.upsert('lc', { wait: true, points: [{ id: 900, vector: good.map((x, i) => (i ? x : NaN)) }] })],
    ['one bad point of two', () => q.upsert('lc', { wait: true, points: [{ id: 901, vector: good }, { id: 902, vector: [1, 2] }] })],
    ['unknown distance', () => q.createCollection('bad', { vectors: { size: 4, distance: 'Hamming' } })],
    ['bad filter', () => q.query('lc', { query: good, filter: { must: [{ key: 'a', match: { regex: 'x' } }] } })],
    ['query of the wrong size', () => q.query('lc', { query: [1, 2, 3] })],
    ['a Document in a plain collection', () => q.upsert('plain-Dot', { wait: true, points: [{ id: 7, vector: { text: 'x', model: 'moeedb' } }] })],
  ]) {
    await assert.rejects(call(), (e) => e.status === 400 && typeof e.data.status.error === 'string', what);
  }
  assert.equal(await count('lc'), n);
  assert.equal(await count('plain-Dot'), vecs.length);
  assert.equal(fused, good.length);
});
