// LlamaIndex.TS's Qdrant vector store, unmodified, against `moeedb serve`
// with the embedded default model: OpenAIEmbedding pointed at moeedb's /v1,
// QdrantVectorStore given url and apiKey alone (moeedb's --qdrant-port).
// An index built from documents retrieves what moeedb's own search by text
// retrieves over the same texts (same texts in order, scores within 1e-5);
// the text LlamaIndex keeps inside "_node_content" feeds the lexical index;
// deleting a document removes its nodes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Document, MetadataMode, Settings, VectorStoreIndex, storageContextFromDefaults } from 'llamaindex';
import { OpenAIEmbedding } from '@llamaindex/openai';
import { QdrantVectorStore } from '@llamaindex/qdrant';
import { callApi, root, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'li-key';
const model = path.join(root, 'models/moeedb-tiny');
const texts = [
  ['A man is playing a flute.', 'music'],
  ['Two dogs are running through the snow.', 'animals'],
  ['The stock market fell sharply on Tuesday.', 'money'],
  ['A cat sleeps on a warm windowsill.', 'animals'],
  ['An orchestra performs a symphony tonight.', 'music'],
  ['The central bank raised interest rates again.', 'money'],
];
const query = 'a puppy playing outside in winter';
let server, base, qdrantUrl, work;

const api = (p, body, method) => callApi(base, apiKey, p, body, method);

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-li-'));
  ({ server, base, qdrant: qdrantUrl } = await startServer(['--db', path.join(work, 'db'), '--model', model,
    '--served-model-name', 'moeedb', '--api-key', apiKey, '--qdrant-port', '0']));
  Settings.embedModel = new OpenAIEmbedding({ model: 'moeedb', apiKey, baseURL: `${base}/v1` });
  assert.equal((await api('/collections/ref', {}, 'PUT')).status, 201);
  assert.equal((await api('/collections/ref/documents', { documents: texts.map(([text, topic], i) => ({ id: `d${i}`, text,
    metadata: { topic } })) })).status, 200);
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

test('VectorStoreIndex.fromDocuments over QdrantVectorStore retrieves as moeedb searches', async () => {
  const vectorStore = new QdrantVectorStore({ url: qdrantUrl, apiKey, collectionName: 'li' });
  // The topic is metadata, not part of the embedded text (LlamaIndex embeds metadata by default).
  const documents = texts.map(([text, topic], i) => new Document({ text, id_: `doc-${i}`, metadata: { topic },
    excludedEmbedMetadataKeys: ['topic'] }));
  const index = await VectorStoreIndex.fromDocuments(documents, {
    storageContext: await storageContextFromDefaults({ vectorStore }) });
  const info = await api('/collections/li');
  assert.equal(info.body.documents, texts.length);
  assert.equal(info.body.spec.info.vectors.kind, 'fused');
  for (const k of [1, 3, texts.length]) {
    const nodes = await index.asRetriever({ similarityTopK: k }).retrieve({ query });
    // Qdrant's score of a fused collection: cos_HS + alpha * cos_RW over 1 + |alpha|.
    const alpha = (await api('/collections/ref')).body.spec.alpha;
    const want = (await api('/collections/ref/search', { query, k })).body.hits
      .map((h) => ({ ...h, score: h.score / (1 + Math.abs(alpha)) }));
    assert.deepEqual(nodes.map((n) => n.node.getContent(MetadataMode.NONE)), want.map((h) => h.text), `k=${k}`);
    nodes.forEach((n, i) => assert.ok(Math.abs(n.score - want[i].score) < 1e-5, `k=${k} hit ${i}: ${n.score} vs ${want[i].score}`));
    assert.equal(nodes[0].node.metadata.topic, texts.find(([t]) => t === want[0].text)[1]);
  }
  // The text inside _node_content reaches the lexical index.
  const lex = await api('/collections/li/search', { query: 'orchestra', mode: 'lexical', k: 2 });
  assert.equal(lex.status, 200, JSON.stringify(lex.body));
  assert.equal(lex.body.hits[0].text, texts[4][0]);
  // Deleting a document deletes its nodes (a filter on doc_id).
  await vectorStore.delete('doc-1');
  const after = await index.asRetriever({ similarityTopK: texts.length }).retrieve({ query });
  assert.equal(after.length, texts.length - 1);
  assert.ok(after.every((n) => n.node.getContent(MetadataMode.NONE) !== texts[1][0]));
  assert.equal((await api('/collections/li')).body.documents, texts.length - 1);
});
