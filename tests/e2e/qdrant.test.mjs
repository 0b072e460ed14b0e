// moeedb serve as a Qdrant server for the real @qdrant/js-client-rest
// (1.18.0, the last to declare Node 18/20), mounted under /qdrant. Points are
// embedded by moeedb from Documents; what the client gets back is checked
// against `moeedb embed` and against moeedb's own collections API on the
// same server, and RRF against a reference computed here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { QdrantClient } from '@qdrant/js-client-rest';
import { assertClose, cliEmbed, initTinyModel, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'qdrant-key';
const uuid = '3F2504E0-4F89-41D3-9A0C-0305E82C3301';
const docs = [
  ['A dog runs through the snow.', 'animals'],
  ['Two puppies are playing with a ball.', 'animals'],
  ['A cat sleeps on a warm windowsill.', 'animals'],
  ['The horse jumped over the fence.', 'animals'],
  ['The stock market fell sharply on Tuesday.', 'money'],
  ['The central bank raised interest rates.', 'money'],
  ['Investors sold shares after the report.', 'money'],
  ['A man plays the guitar on stage.', 'music'],
  ['The orchestra performed a symphony.', 'music'],
  ['A girl is practising the violin.', 'music'],
];
const query = 'a dog playing in the snow';
let server;
let base;
let work;
let model;
let client;
let reference;

async function api(p, body) {
  const res = await fetch(base + p, { method: body === undefined ? 'GET' : 'POST',
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}
const doc = (text) => ({ text, model: 'tiny' });
const idOf = (i) => (i === docs.length - 1 ? uuid.toLowerCase() : i);

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-qdrant-'));
  model = initTinyModel(path.join(work, 'model'));
  reference = cliEmbed(model, docs.map((d) => d[0]));
  ({ server, base } = await startServer(['--db', path.join(work, 'db'), '--model', model, '--served-model-name', 'tiny',
    '--api-key', apiKey]));
  client = new QdrantClient({ url: base, prefix: '/qdrant', apiKey, checkCompatibility: false });
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

test('collections: version, create with named vectors hs and rw, exists, get, list', async () => {
  assert.equal((await client.versionInfo()).version, '1.18.0');
  const dims = { hs: reference[0].hs.length, rw: reference[0].rw.length };
  assert.equal(await client.createCollection('notes', { vectors: {
    hs: { size: dims.hs, distance: 'Cosine' }, rw: { size: dims.rw, distance: 'Cosine' } } }), true);
  assert.deepEqual(await client.collectionExists('notes'), { exists: true });
  assert.deepEqual(await client.collectionExists('nope'), { exists: false });
  const info = await client.getCollection('notes');
  assert.equal(info.points_count, 0);
  assert.deepEqual(info.config.params.vectors.hs, { size: dims.hs, distance: 'Cosine' });
  assert.ok((await client.getCollections()).collections.some((c) => c.name === 'notes'));
  // moeedb's own API sees the same collection.
  assert.equal((await api('/collections/notes')).status, 200);
  // Another model's dimension, an unnamed vector of no size or an unknown
  // distance, an existing name: Qdrant-shaped 4xx.
  for (const [name, vectors, status] of [
    ['bad1', { hs: { size: 7, distance: 'Cosine' } }, 400],
    ['bad2', { size: 0, distance: 'Cosine' }, 400],
    ['bad4', { size: 8, distance: 'Manhattan' }, 400],
    ['bad5', { size: 8 }, 400],
    ['bad3', { hs: { size: dims.hs, distance: 'Dot' } }, 400],
    ['notes', { hs: { size: dims.hs, distance: 'Cosine' } }, 409],
  ]) {
    await assert.rejects(client.createCollection(name, { vectors }), (e) => e.status === status && typeof e.data.status.error === 'string');
  }
  assert.deepEqual(await client.collectionExists('bad1'), { exists: false });
});

test('points: upsert Documents, retrieve the vectors moeedb embed gives, uuid and integer ids', async () => {
  const points = docs.map(([text, topic], i) => ({ id: i === docs.length - 1 ? uuid : i,
    vector: i % 2 ? { hs: doc(text), rw: doc(text) } : doc(text), payload: { topic, n: i } }));
  const r = await client.upsert('notes', { wait: true, points });
  assert.equal(r.status, 'completed');
  assert.equal((await client.getCollection('notes')).points_count, docs.length);
  const got = await client.retrieve('notes', { ids: [0, 3, uuid], with_vector: true });
  assert.deepEqual(got.map((p) => p.id), [0, 3, uuid.toLowerCase()]);
  for (const p of got) {
    const i = p.id === uuid.toLowerCase() ? docs.length - 1 : p.id;
    assert.deepEqual(p.payload, { topic: docs[i][1], n: i });
    assertClose(p.vector.hs, reference[i].hs, `hs of ${p.id}`);
    assertClose(p.vector.rw, reference[i].rw, `rw of ${p.id}`);
  }
  // The same documents through moeedb's API: ids as decimal strings, UUIDs lower-case.
  assert.equal((await api('/collections/notes/documents/3')).body.text, docs[3][0]);
  assert.equal((await api(`/collections/notes/documents/${uuid.toLowerCase()}`)).body.metadata.n, docs.length - 1);
  // Raw vectors, another model, bad ids, unknown fields: 400 with Qdrant's error shape.
  for (const bad of [
    { id: 100, vector: Array(reference[0].hs.length).fill(0.1) },
    { id: 100, vector: { text: 'x', model: 'bge-small' } },
    { id: -1, vector: doc('x') },
    { id: 'not-a-uuid', vector: doc('x') },
    { id: 100, vector: { hs: doc('one'), rw: doc('another') } },
    { id: 100, vector: doc('x'), colour: 'red' },
  ]) {
    await assert.rejects(client.upsert('notes', { wait: true, points: [bad] }),
      (e) => e.status === 400 && typeof e.data.status.error === 'string', JSON.stringify(bad));
  }
  const many = Array.from({ length: 1001 }, (_, i) => ({ id: 1000 + i, vector: doc('x') }));
  await assert.rejects(client.upsert('notes', { wait: true, points: many }), (e) => e.status === 400 && /too many points/.test(e.data.status.error));
  assert.equal((await client.getCollection('notes')).points_count, docs.length);
});

test('query: formula cos_HS + alpha * cos_RW equals moeedb fused search; rrf equals a reference RRF', async () => {
  const alpha = 0.35;
  const n = docs.length;
  const prefetch = [{ query: doc(query), using: 'hs', limit: n }, { query: doc(query), using: 'rw', limit: n }];
  const formula = await client.query('notes', { prefetch, limit: 5, with_payload: true,
    query: { formula: { sum: ['$score[0]', { mult: [alpha, '$score[1]'] }] } } });
  const fused = await api('/collections/notes/search', { query, k: 5, alpha, mode: 'fused', exact: true });
  assert.deepEqual(formula.points.map((p) => String(p.id)), fused.body.hits.map((h) => h.id));
  formula.points.forEach((p, i) => assert.ok(Math.abs(p.score - fused.body.hits[i].score) < 1e-5, `${p.score} vs ${fused.body.hits[i].score}`));
  assert.ok(formula.points.every((p) => p.payload && p.payload.topic));

  // using: one signal alone equals moeedb's hs mode.
  const hsOnly = await client.query('notes', { query: doc(query), using: 'hs', limit: 4 });
  const apiHs = await api('/collections/notes/search', { query, k: 4, mode: 'hs', exact: true });
  assert.deepEqual(hsOnly.points.map((p) => String(p.id)), apiHs.body.hits.map((h) => h.id));
  assert.equal(hsOnly.points[0].payload, null); // the query API's with_payload defaults to false

  // RRF over the two prefetch lists (limit 6), Qdrant's 1 / (position + k), k = 2 and k = 60.
  const L = 6;
  const hs = (await api('/collections/notes/search', { query, k: L, mode: 'hs', exact: true })).body.hits.map((h) => h.id);
  const rw = (await api('/collections/notes/search', { query, k: L, mode: 'rw', exact: true })).body.hits.map((h) => h.id);
  for (const [q, k] of [[{ fusion: 'rrf' }, 2], [{ rrf: { k: 60 } }, 60]]) {
    const want = new Map();
    for (const list of [hs, rw]) list.forEach((id, pos) => want.set(id, (want.get(id) ?? 0) + 1 / (pos + k)));
    const res = await client.query('notes', { prefetch: prefetch.map((p) => ({ ...p, limit: L })), query: q, limit: 20 });
    assert.equal(res.points.length, want.size);
    for (const p of res.points) assert.ok(Math.abs(p.score - want.get(String(p.id))) < 1e-9, `rrf k=${k} ${p.id}`);
    for (let i = 1; i < res.points.length; i++) assert.ok(res.points[i - 1].score >= res.points[i].score);
  }
  // dbsf returns every prefetched point, best first.
  const dbsf = await client.query('notes', { prefetch, query: { fusion: 'dbsf' }, limit: n });
  assert.equal(dbsf.points.length, n);
});

test('filters (must, should, must_not), scroll, count, delete', async () => {
  const filter = { must: [{ key: 'topic', match: { value: 'animals' } }], must_not: [{ key: 'n', range: { gte: 3 } }] };
  const res = await client.query('notes', { query: doc(query), using: 'hs', filter, limit: 10, with_payload: true });
  assert.deepEqual(res.points.map((p) => p.id).sort(), [0, 1, 2]);
  const same = await api('/collections/notes/search', { query, k: 10, mode: 'hs', exact: true,
    filter: { topic: 'animals', n: { $lt: 3 } } });
  assert.deepEqual(res.points.map((p) => String(p.id)), same.body.hits.map((h) => h.id));
  const should = await client.query('notes', { query: doc(query), using: 'rw', limit: 10, with_payload: true,
    filter: { should: [{ key: 'topic', match: { value: 'music' } }, { key: 'topic', match: { any: ['money'] } }] } });
  assert.equal(should.points.length, 6);
  assert.ok(should.points.every((p) => p.payload.topic === 'music' || p.payload.topic === 'money'));
  assert.deepEqual(await client.count('notes', { filter: { must: [{ key: 'topic', match: { value: 'music' } }] } }), { count: 3 });
  assert.deepEqual(await client.count('notes'), { count: docs.length });

  // Scroll: pages of 4 follow next_page_offset and visit every point once.
  const seen = [];
  let offset;
  for (let page = 0; page < 10; page++) {
    const r = await client.scroll('notes', { limit: 4, offset });
    seen.push(...r.points.map((p) => p.id));
    if (r.next_page_offset === null || r.next_page_offset === undefined) break;
    offset = r.next_page_offset;
  }
  assert.deepEqual([...seen].map(String).sort(), docs.map((_, i) => String(idOf(i))).sort());
  assert.equal(new Set(seen.map(String)).size, docs.length);

  await client.delete('notes', { wait: true, points: [0] });
  assert.deepEqual(await client.retrieve('notes', { ids: [0] }), []);
  await client.delete('notes', { wait: true, filter: { must: [{ key: 'topic', match: { value: 'money' } }] } });
  assert.deepEqual(await client.count('notes'), { count: docs.length - 4 });
  assert.equal((await api('/collections/notes')).body.documents, docs.length - 4);

  // Malformed queries: 400 with Qdrant's shape; a wrong key is refused.
  for (const bad of [
    { query: doc(query), using: 'sparse' },
    { query: [0.1, 0.2] },
    { prefetch: [{ query: doc(query), using: 'hs' }], query: { fusion: 'max' } },
    { prefetch: [{ query: doc(query), using: 'hs' }], query: { formula: { sum: ['$score[]'] } } },  // no index: not a score
    { query: doc(query), filter: { must: [{ key: 'a[x].b', match: { value: 1 } }] } },
    { query: doc(query), filter: { must: [{ has_id: ['not-an-id'] }] } },
  ]) {
    await assert.rejects(client.query('notes', bad), (e) => e.status === 400 && typeof e.data.status.error === 'string', JSON.stringify(bad));
  }
  // Unknown fields (the client only sends the ones it knows; raw HTTP here).
  const raw = await fetch(`${base}/qdrant/collections/notes/points/query`, { method: 'POST',
    headers: { 'api-key': apiKey, 'Content-Type': 'application/json' }, body: JSON.stringify({ query: doc(query), colour: 'red' }) });
  assert.equal(raw.status, 400);
  assert.match((await raw.json()).status.error, /unknown field 'colour'/);
  const wrong = new QdrantClient({ url: base, prefix: '/qdrant', apiKey: 'nope', checkCompatibility: false });
  await assert.rejects(wrong.getCollections(), (e) => e.status === 401);
  assert.equal(await client.deleteCollection('notes'), true);
  assert.deepEqual(await client.collectionExists('notes'), { exists: false });
});
