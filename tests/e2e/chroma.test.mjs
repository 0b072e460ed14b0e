// Chroma's API with the real, unmodified `chromadb` 3.x client against
// `moeedb serve` with the embedded default model (--chroma-port, the client
// given host, port and x-chroma-token). Embeddings come from moeedb's /v1;
// query results must equal moeedb's own search by text over the same texts
// (ids in order, distances from the scores as docs/server.md maps them).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { ChromaClient } from 'chromadb';
import { callApi, root, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'chroma-key';
const model = path.join(root, 'models/moeedb-tiny');
const texts = [
  ['A man is playing a flute.', 'music', 1],
  ['Two dogs are running through the snow.', 'animals', 2],
  ['The stock market fell sharply on Tuesday.', 'money', 3],
  ['A dog catches a frisbee in the park.', 'animals', 4],
  ['An orchestra performs a symphony tonight.', 'music', 5],
  ['The central bank raised interest rates again.', 'money', 6],
];
const query = 'a puppy playing outside in winter';
let server, base, chromaUrl, work, openai, client, alpha;

const api = (p, body, method) => callApi(base, apiKey, p, body, method);
const embed = async (input) => (await openai.embeddings.create({ model: 'moeedb', input, encoding_format: 'float' })).data.map((d) => d.embedding);

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-chroma-'));
  ({ server, base, chroma: chromaUrl } = await startServer(['--db', path.join(work, 'db'), '--model', model,
    '--served-model-name', 'moeedb', '--api-key', apiKey, '--chroma-port', '0']));
  openai = new OpenAI({ baseURL: `${base}/v1`, apiKey });
  const u = new URL(chromaUrl);
  client = new ChromaClient({ host: u.hostname, port: Number(u.port), ssl: false, headers: { 'x-chroma-token': apiKey } });
  assert.equal((await api('/collections/ref', {}, 'PUT')).status, 201);
  assert.equal((await api('/collections/ref/documents', { documents: texts.map(([text, topic, n], i) => ({ id: `id${i}`, text,
    metadata: { topic, n } })) })).status, 200);
  alpha = (await api('/collections/ref')).body.spec.alpha;
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

test('heartbeat, version, collections: create, get_or_create, get, list, count, delete', async () => {
  assert.ok((await client.heartbeat()) > 0);
  // The same API under /api/v2 on the main port, beside Ollama's /api, with a Bearer key.
  const main = await fetch(`${base}/api/v2/heartbeat`, { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(main.status, 200);
  assert.ok((await main.json())['nanosecond heartbeat'] > 0);
  assert.equal((await fetch(`${base}/api/tags`, { headers: { Authorization: `Bearer ${apiKey}` } })).status, 200);
  assert.equal(typeof (await client.version()), 'string');
  const notes = await client.createCollection({ name: 'notes', embeddingFunction: null });
  assert.match(notes.id, /^[0-9a-f-]{36}$/);
  await assert.rejects(client.createCollection({ name: 'notes', embeddingFunction: null }), (e) => e.name === 'ChromaUniqueError');
  const again = await client.getOrCreateCollection({ name: 'notes', embeddingFunction: null });
  assert.equal(again.id, notes.id);
  assert.equal((await client.getCollection({ name: 'notes' })).id, notes.id);
  await client.createCollection({ name: 'scratch', embeddingFunction: null, metadata: { 'hnsw:space': 'cosine' } });
  const names = (await client.listCollections()).map((c) => c.name);
  assert.ok(names.includes('notes') && names.includes('scratch') && names.includes('ref'));
  assert.equal(await client.countCollections(), names.length);
  await client.deleteCollection({ name: 'scratch' });
  await assert.rejects(client.getCollection({ name: 'scratch' }), (e) => e.name === 'ChromaNotFoundError');
  await assert.rejects(client.createCollection({ name: 'x', embeddingFunction: null }), (e) => e.name === 'ChromaClientError');
  const wrong = new ChromaClient({ host: new URL(chromaUrl).hostname, port: Number(new URL(chromaUrl).port), headers: { 'x-chroma-token': 'nope' } });
  await assert.rejects(wrong.listCollections(), (e) => e.name === 'ChromaAuthError' || e.name === 'ChromaUnauthorizedError');
});

test('add with moeedb embeddings; query with where and where_document equals moeedb search', async () => {
  const notes = await client.getCollection({ name: 'notes' });
  const vectors = await embed(texts.map(([t]) => t));
  await notes.add({ ids: texts.map((_, i) => `id${i}`), embeddings: vectors, documents: texts.map(([t]) => t),
    metadatas: texts.map(([, topic, n]) => ({ topic, n })) });
  assert.equal(await notes.count(), texts.length);
  // add never overwrites an existing id.
  await notes.add({ ids: ['id0'], embeddings: [vectors[1]], documents: ['replaced?'] });
  assert.equal((await notes.get({ ids: ['id0'] })).documents[0], texts[0][0]);
  const [qv] = await embed([query]);
  const check = async (args, filter) => {
    const got = await notes.query({ queryEmbeddings: [qv], ...args });
    const want = (await api('/collections/ref/search', { query, k: texts.length, ...(filter ? { filter } : {}) })).body.hits
      .filter((h) => !args.whereDocument || h.text.includes(args.whereDocument.$contains)).slice(0, args.nResults);
    assert.deepEqual(got.ids[0], want.map((h) => h.id), JSON.stringify(args));
    // Chroma's default space is l2: at alpha 1 the squared distance of the fused vectors.
    got.distances[0].forEach((d, i) => assert.ok(Math.abs(d - (2 * (1 + alpha) - 2 * want[i].score)) < 1e-4, `distance ${i}`));
    assert.deepEqual(got.documents[0], want.map((h) => h.text));
    return got;
  };
  await check({ nResults: 3 });
  const animals = await check({ nResults: 2, where: { topic: 'animals' } }, { topic: 'animals' });
  assert.deepEqual(animals.metadatas[0].map((m) => m.topic), ['animals', 'animals']);
  await check({ nResults: 5, where: { $and: [{ n: { $gte: 2 } }, { topic: { $in: ['animals', 'money'] } }] } },
    { $and: [{ n: { $gte: 2 } }, { topic: { $in: ['animals', 'money'] } }] });
  await check({ nResults: 5, where: { topic: { $nin: ['music'] } } }, { topic: { $nin: ['music'] } });
  await check({ nResults: 4, whereDocument: { $contains: 'dog' } });
  const re = await notes.query({ queryEmbeddings: [qv], nResults: 6, whereDocument: { $regex: '^The (stock|central)' } });
  assert.deepEqual(re.ids[0].sort(), ['id2', 'id5']);
  const or = await notes.query({ queryEmbeddings: [qv], nResults: 6, where: { $or: [{ n: { $lt: 2 } }, { n: { $gt: 5 } }] } });
  assert.deepEqual(or.ids[0].sort(), ['id0', 'id5']);
});

test('get, update, upsert, delete, count; lexical search reads the documents', async () => {
  const notes = await client.getCollection({ name: 'notes' });
  const got = await notes.get({ ids: ['id1', 'id3'], include: ['documents', 'metadatas', 'embeddings'] });
  assert.deepEqual(got.ids, ['id1', 'id3']);
  assert.deepEqual(got.metadatas.map((m) => m.topic), ['animals', 'animals']);
  const [v1] = await embed([texts[1][0]]);
  got.embeddings[0].forEach((x, i) => assert.ok(Math.abs(x - v1[i]) < 1e-5));
  const page = await notes.get({ where: { topic: 'money' }, limit: 1, offset: 1 });
  assert.equal(page.ids.length, 1);
  // update: metadata merged key by key (the client drops null values), the document and its embedding replaced.
  const [vu] = await embed(['A horse gallops across the field.']);
  await notes.update({ ids: ['id3', 'missing'], embeddings: [vu, vu], documents: ['A horse gallops across the field.', 'x'],
    metadatas: [{ topic: 'horses', extra: true }, { topic: 'x' }] });
  const u = await notes.get({ ids: ['id3'] });
  assert.deepEqual(u.metadatas[0], { topic: 'horses', n: 4, extra: true });
  assert.equal(u.documents[0], 'A horse gallops across the field.');
  assert.equal(await notes.count(), texts.length);
  const lex = await api('/collections/notes/search', { query: 'horse', mode: 'lexical', k: 1 });
  assert.equal(lex.body.hits[0].id, 'id3');
  // upsert: a new id and an existing one.
  const [vn] = await embed(['Bond yields rose after the announcement.']);
  await notes.upsert({ ids: ['id9', 'id0'], embeddings: [vn, vn], documents: ['Bond yields rose after the announcement.', 'flute'],
    metadatas: [{ topic: 'money' }, { topic: 'music' }] });
  assert.equal(await notes.count(), texts.length + 1);
  assert.equal((await notes.get({ ids: ['id0'] })).documents[0], 'flute');
  assert.deepEqual((await notes.delete({ ids: ['id9'] })).deleted, 1);
  assert.deepEqual((await notes.delete({ where: { topic: 'money' } })).deleted, 2);
  await notes.delete({ whereDocument: { $contains: 'orchestra' } });
  assert.equal(await notes.count(), texts.length - 3);
  assert.deepEqual((await notes.get()).ids.sort(), ['id0', 'id1', 'id3']);
});

test('another tenant and database: the same names kept apart', async () => {
  const u = new URL(chromaUrl);
  const acme = new ChromaClient({ host: u.hostname, port: Number(u.port), tenant: 'acme', database: 'prod',
    headers: { 'x-chroma-token': apiKey } });
  const notes = await acme.createCollection({ name: 'notes', embeddingFunction: null });
  assert.equal(notes.tenant, 'acme');
  assert.equal(notes.database, 'prod');
  const defaultNotes = await client.getCollection({ name: 'notes' });
  assert.notEqual(notes.id, defaultNotes.id);
  const before = await defaultNotes.count();
  const vectors = await embed(['A kite over the beach.', 'A tax form on the desk.']);
  await notes.add({ ids: ['k', 't'], embeddings: vectors, documents: ['A kite over the beach.', 'A tax form on the desk.'] });
  assert.equal(await notes.count(), 2);
  assert.equal(await defaultNotes.count(), before);
  assert.deepEqual((await acme.listCollections()).map((c) => c.name), ['notes']);
  assert.equal(await acme.countCollections(), 1);
  assert.ok(!(await client.listCollections()).some((c) => c.name.includes(':')));
  // moeedb's own API sees it under TENANT:DATABASE:NAME.
  assert.equal((await api('/collections/acme:prod:notes')).body.documents, 2);
  await acme.deleteCollection({ name: 'notes' });
  assert.equal(await defaultNotes.count(), before);
});

test('spaces: cosine and ip on fused vectors, a plain l2 collection against brute force; bad input stores nothing', async () => {
  const [qv] = await embed([query]);
  const want = (await api('/collections/ref/search', { query, k: 3 })).body.hits;
  const vectors = await embed(texts.map(([t]) => t));
  for (const [space, distance] of [['cosine', (s) => 1 - s / (1 + alpha)], ['ip', (s) => 1 - s]]) {
    const c = await client.createCollection({ name: `sp-${space}`, embeddingFunction: null, configuration: { hnsw: { space } } });
    await c.add({ ids: texts.map((_, i) => `id${i}`), embeddings: vectors, documents: texts.map(([t]) => t) });
    const r = await c.query({ queryEmbeddings: [qv], nResults: 3 });
    assert.deepEqual(r.ids[0], want.map((h) => h.id), space);
    r.distances[0].forEach((d, i) => assert.ok(Math.abs(d - distance(want[i].score)) < 1e-4, `${space} ${i}`));
  }
  const plain = await client.createCollection({ name: 'plain3', embeddingFunction: null });
  const pts = [[0, 0, 1], [1, 0, 0], [0.5, 0.5, 0.1], [2, 2, 2], [-1, 0, 0]];
  await plain.add({ ids: pts.map((_, i) => `p${i}`), embeddings: pts });
  const q = [0.9, 0.1, 0];
  const r = await plain.query({ queryEmbeddings: [q], nResults: 3, include: ['distances', 'embeddings'] });
  const brute = pts.map((p, i) => ({ id: `p${i}`, d: p.reduce((s, x, j) => s + (x - q[j]) ** 2, 0) })).sort((a, b) => a.d - b.d);
  assert.deepEqual(r.ids[0], brute.slice(0, 3).map((b) => b.id));
  r.distances[0].forEach((d, i) => assert.ok(Math.abs(d - brute[i].d) < 1e-5));
  assert.deepEqual(r.embeddings[0][0], pts[1]);
  const notes = await client.getCollection({ name: 'notes' });
  const n = await notes.count();
  for (const [what, call] of [
    ['wrong size', () => notes.add({ ids: ['bad'], embeddings: [[1, 2, 3]] })],
    ['wrong size in a plain collection', () => plain.add({ ids: ['bad'], embeddings: [[1, 2]] })],
    ['bad regex', () => notes.get({ whereDocument: { $regex: '(' } })],
  ]) {
    await assert.rejects(call(), (e) => e.name === 'ChromaClientError', what);
  }
  // What the client validates itself, sent raw: NaN (as null), a batch over
  // max_batch_size, an unknown where operator; Chroma's error shape.
  const raw = async (route, body) => fetch(`${chromaUrl}/api/v2/tenants/default_tenant/databases/default_database/collections/${notes.id}/${route}`,
    { method: 'POST', headers: { 'x-chroma-token': apiKey, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  for (const [route, body] of [['add', { ids: ['nan'], embeddings: [qv.map((x, i) => (i ? x : NaN))] }],
    ['add', { ids: Array.from({ length: 1001 }, (_, i) => `b${i}`), embeddings: Array.from({ length: 1001 }, () => qv.slice(0, 4)) }],
    ['query', { query_embeddings: [qv], where: { topic: { $near: 1 } } }]]) {
    const res = await raw(route, body);
    assert.equal(res.status, 400);
    const j = await res.json();
    assert.equal(typeof j.error, 'string');
    assert.equal(typeof j.message, 'string');
  }
  assert.equal(await notes.count(), n);
  assert.equal(await plain.count(), pts.length);
});
