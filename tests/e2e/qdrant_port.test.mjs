// `moeedb serve --qdrant-port`: the Qdrant REST API at the root of its own
// port, as Qdrant serves it on 6333, for clients built the way RAG
// frameworks build them: `new QdrantClient({ url, apiKey })`, no prefix
// (the client keeps only scheme, host and port of the URL).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { QdrantClient } from '@qdrant/js-client-rest';
import { cliEmbed, initTinyModel, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'port-key';
let server;
let base;
let qdrant;
let work;
let model;

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-qport-'));
  model = initTinyModel(path.join(work, 'model'));
  ({ server, base, qdrant } = await startServer(['--db', path.join(work, 'db'), '--model', model,
    '--served-model-name', 'tiny', '--api-key', apiKey, '--qdrant-port', '0']));
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

test('the Qdrant API answers at the root of --qdrant-port for a client given only url and apiKey', async () => {
  assert.ok(qdrant, 'the server printed its Qdrant listener');
  assert.notEqual(qdrant, base);
  const client = new QdrantClient({ url: qdrant, apiKey, checkCompatibility: false });
  assert.equal((await client.versionInfo()).version, '1.18.0');
  const ref = cliEmbed(model, ['x'])[0];
  await client.createCollection('notes', { vectors: { hs: { size: ref.hs.length, distance: 'Cosine' },
    rw: { size: ref.rw.length, distance: 'Cosine' } } });
  assert.deepEqual((await client.getCollections()).collections.map((c) => c.name), ['notes']);
  assert.equal((await client.collectionExists('notes')).exists, true);
  await client.upsert('notes', { wait: true, points: [
    { id: 1, vector: { text: 'A dog runs through the snow.', model: 'tiny' }, payload: { topic: 'animals' } },
    { id: 2, vector: { text: 'The central bank raised interest rates.', model: 'tiny' }, payload: { topic: 'money' } }] });
  const hits = await client.query('notes', { query: { text: 'a dog in the snow', model: 'tiny' }, limit: 2, with_payload: true });
  assert.equal(hits.points[0].id, 1);
  assert.equal(hits.points[0].payload.topic, 'animals');
  // The same collection under /qdrant on the main port, and moeedb's own API there.
  const prefixed = new QdrantClient({ url: base, prefix: '/qdrant', apiKey, checkCompatibility: false });
  assert.equal((await prefixed.getCollection('notes')).points_count, 2);
  const own = await fetch(`${base}/collections`, { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.deepEqual((await own.json()).collections, [{ name: 'notes', documents: 2 }]);
});

test('probes answer without the key; everything else needs it, in Qdrant\'s error shape', async () => {
  for (const probe of ['healthz', 'livez', 'readyz']) {
    const r = await fetch(`${qdrant}/${probe}`);
    assert.equal(r.status, 200);
    assert.equal(await r.text(), `${probe} check passed`);
  }
  const root = await fetch(`${qdrant}/`, { headers: { 'api-key': apiKey } });
  assert.equal(root.status, 200);
  assert.match((await root.json()).title, /qdrant/);
  const denied = await fetch(`${qdrant}/collections`, { headers: { 'api-key': 'wrong' } });
  assert.equal(denied.status, 401);
  assert.ok((await denied.json()).status.error);
  const wrong = new QdrantClient({ url: qdrant, apiKey: 'nope', checkCompatibility: false });
  await assert.rejects(wrong.getCollections(), (e) => e.status === 401);
});
