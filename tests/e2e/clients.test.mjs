// moeedb serve with the real, unmodified npm clients: the official `openai`
// client (which asks for base64 by default) and LangChain's OpenAIEmbeddings.
// The vectors they receive must equal `moeedb embed` for the same texts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { OpenAIEmbeddings } from '@langchain/openai';
import { cliEmbed, initTinyModel, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'e2e-key';
const texts = [
  'A man is playing a flute.',
  'The stock market fell sharply on Tuesday.',
  'Two dogs are running through the snow.',
];
let server;
let baseURL;
let work;
let model;
let reference;

function assertClose(actual, expected, what) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let maxDiff = 0;
  for (let i = 0; i < expected.length; i++) maxDiff = Math.max(maxDiff, Math.abs(actual[i] - expected[i]));
  assert.ok(maxDiff < 1e-5, `${what}: max abs diff ${maxDiff}`);
  assert.ok(expected.some((x) => x !== 0), `${what}: reference is not all zeros`);
}

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-e2e-'));
  model = initTinyModel(path.join(work, 'model'));
  reference = cliEmbed(model, texts);
  let base;
  ({ server, base } = await startServer(['--db', path.join(work, 'db'), '--model', model, '--served-model-name', 'tiny',
    '--api-key', apiKey]));
  baseURL = `${base}/v1`;
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

test('openai embeddings.create with the default encoding (base64)', async () => {
  const client = new OpenAI({ baseURL, apiKey });
  const res = await client.embeddings.create({ model: 'tiny:hs', input: texts });
  assert.equal(res.data.length, texts.length);
  res.data.forEach((d, i) => {
    assert.equal(d.index, i);
    assertClose(d.embedding, reference[i].hs, `hs ${i}`);
  });
  assert.equal(res.usage.prompt_tokens, reference.reduce((s, r) => s + r.tokens, 0));
});

test('openai embeddings.create with encoding_format float', async () => {
  const client = new OpenAI({ baseURL, apiKey });
  const res = await client.embeddings.create({ model: 'tiny:rw', input: texts[1], encoding_format: 'float' });
  assertClose(res.data[0].embedding, reference[1].rw, 'rw');
});

test('openai client sees errors as errors (401, 404)', async () => {
  const wrong = new OpenAI({ baseURL, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(wrong.embeddings.create({ model: 'tiny', input: 'x' }), (e) => e.status === 401);
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  await assert.rejects(client.embeddings.create({ model: 'gpt-4', input: 'x' }), (e) => e.status === 404);
  await assert.rejects(client.embeddings.create({ model: 'tiny', input: '' }), (e) => e.status === 400);
});

test('@langchain/openai OpenAIEmbeddings embedDocuments and embedQuery', async () => {
  const embeddings = new OpenAIEmbeddings({ model: 'tiny:hs', apiKey, configuration: { baseURL } });
  const docs = await embeddings.embedDocuments(texts);
  assert.equal(docs.length, texts.length);
  docs.forEach((v, i) => assertClose(v, reference[i].hs, `langchain doc ${i}`));
  const q = await embeddings.embedQuery(texts[2]);
  assertClose(q, reference[2].hs, 'langchain query');
});
