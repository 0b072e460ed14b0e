// moeedb serve with the real, unmodified npm clients: the official `openai`
// client (which asks for base64 by default) and LangChain's OpenAIEmbeddings.
// The vectors they receive must equal `moeedb embed` for the same texts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { OpenAIEmbeddings } from '@langchain/openai';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const bin = process.env.MOEEDB_BIN ?? path.join(root, 'build/moeedb');
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

function cliEmbed(lines) {
  const out = execFileSync(bin, ['embed', '--model', model, '--threads', '1'], { input: lines.join('\n') + '\n' });
  return out.toString().trim().split('\n').map((l) => JSON.parse(l));
}

function assertClose(actual, expected, what) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let maxDiff = 0;
  for (let i = 0; i < expected.length; i++) maxDiff = Math.max(maxDiff, Math.abs(actual[i] - expected[i]));
  assert.ok(maxDiff < 1e-5, `${what}: max abs diff ${maxDiff}`);
  assert.ok(expected.some((x) => x !== 0), `${what}: reference is not all zeros`);
}

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-e2e-'));
  model = path.join(work, 'model');
  execFileSync(bin, ['model', 'init', '--config', path.join(root, 'tests/data/configs/olmoe-tiny.json'),
    '--tokenizer', path.join(root, 'tests/data/tokenizers/olmoe/tokenizer.json'), '--seed', '5', '--out', model]);
  reference = cliEmbed(texts);
  server = spawn(bin, ['serve', '--db', path.join(work, 'db'), '--model', model, '--port', '0',
    '--served-model-name', 'tiny', '--api-key', apiKey, '--threads', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  baseURL = await new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('server did not start')), 120000);
    server.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(`${m[1]}/v1`); }
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.on('exit', r));
    server.kill('SIGTERM');
    await exited;
  }
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
