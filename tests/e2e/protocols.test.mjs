// moeedb serve as a TEI endpoint (@huggingface/inference), an Ollama server
// (the `ollama` npm client) and a Weaviate text2vec-transformers inference
// container (its documented HTTP shapes; Weaviate's module has no npm
// client). Vectors are checked against `moeedb embed` for the same texts,
// the fused one rebuilt here from the model's calibration file.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { InferenceClient } from '@huggingface/inference';
import { Ollama } from 'ollama';
import { execFileSync } from 'node:child_process';
import { assertClose, bin, cliEmbed, initTinyModel, root, startServer, stopServer } from './moeedb.mjs';

const apiKey = 'proto-key';
const texts = [
  'A man is playing a flute.',
  'The stock market fell sharply on Tuesday.',
  'Two dogs are running through the snow.',
];
let server;
let base;
let work;
let model;
let reference; // [{hs, rw, tokens}] from moeedb embed
let stats; // the calibration file

function standardize(x, s) {
  const z = x.map((v, j) => (v - s.mean[j]) * s.inv_std[j]);
  const n = Math.sqrt(z.reduce((a, v) => a + v * v, 0));
  return n > 0 ? z.map((v) => v / n) : z;
}
const fused = (r) => [...standardize(r.hs, stats.hs), ...standardize(r.rw, stats.rw)];
const unit = (v) => { const n = Math.sqrt(v.reduce((a, x) => a + x * x, 0)); return v.map((x) => x / n); };
const cos = (a, b) => { let ab = 0, aa = 0, bb = 0; a.forEach((x, i) => { ab += x * b[i]; aa += x * x; bb += b[i] * b[i]; }); return ab / Math.sqrt(aa * bb); };

async function post(p, body, key = apiKey) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const res = await fetch(base + p, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
async function get(p, key = apiKey) {
  const res = await fetch(base + p, { headers: key ? { Authorization: `Bearer ${key}` } : {} });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-proto-'));
  model = initTinyModel(path.join(work, 'model'));
  execFileSync(bin, ['model', 'calibrate', '--model', model], { stdio: ['ignore', 'ignore', 'inherit'] });
  stats = JSON.parse(readFileSync(path.join(model, 'standardization.json'), 'utf8'));
  reference = cliEmbed(model, texts);
  ({ server, base } = await startServer(['--db', path.join(work, 'db'), '--model', model, '--served-model-name', 'tiny',
    '--api-key', apiKey]));
});

after(async () => {
  await stopServer(server);
  rmSync(work, { recursive: true, force: true });
});

test('TEI: @huggingface/inference featureExtraction against moeedb as the endpoint', async () => {
  const hf = new InferenceClient(apiKey).endpoint(base);
  const vectors = await hf.featureExtraction({ inputs: texts });
  assert.equal(vectors.length, texts.length);
  vectors.forEach((v, i) => assertClose(v, unit(fused(reference[i])), `normalized fused ${i}`));
  const raw = await hf.featureExtraction({ inputs: texts[1], normalize: false });
  assertClose(raw[0], fused(reference[1]), 'fused, not normalized');
  // A refused key reaches the client as an error.
  await assert.rejects(new InferenceClient('wrong').endpoint(base).featureExtraction({ inputs: 'x' }));
});

test('TEI: /embed fields, /rerank, /embed_sparse, /tokenize, /decode, /info and its error shape', async () => {
  const info = await get('/info');
  assert.equal(info.status, 200);
  assert.equal(info.body.model_id, 'tiny');
  assert.equal(info.body.max_client_batch_size, 32);
  assert.ok(info.body.model_type.embedding);
  const e = await post('/embed', { inputs: texts, normalize: false, truncate: false, truncation_direction: 'Right',
    prompt_name: null, dimensions: info.body.dim_fused });
  assert.equal(e.status, 200);
  e.body.forEach((v, i) => assertClose(v, fused(reference[i]), `/embed ${i}`));

  // rerank: cos_HS + alpha * cos_RW with the model's default alpha, best first.
  const alpha = info.body.default_alpha;
  const r = await post('/rerank', { query: texts[2], texts: [texts[0], texts[1], texts[2]], return_text: true });
  assert.equal(r.status, 200);
  const want = [0, 1, 2].map((i) => ({ index: i, score: cos(reference[2].hs, reference[i].hs) + alpha * cos(reference[2].rw, reference[i].rw) }))
    .sort((a, b) => b.score - a.score);
  assert.deepEqual(r.body.map((x) => x.index), want.map((x) => x.index));
  r.body.forEach((x, i) => assert.ok(Math.abs(x.score - want[i].score) < 1e-4, `rerank score ${x.score} vs ${want[i].score}`));
  assert.equal(r.body[0].text, texts[r.body[0].index]);

  // embed_sparse: per MoE layer the top-k experts' softmax probabilities of RW.
  const config = JSON.parse(readFileSync(path.join(root, 'tests/data/configs/olmoe-tiny.json'), 'utf8'));
  const E = config.num_experts; const k = config.num_experts_per_tok;
  const s = await post('/embed_sparse', { inputs: texts[0] });
  assert.equal(s.status, 200);
  const rw = reference[0].rw;
  const wantSparse = [];
  for (let b = 0; b < rw.length; b += E) {
    const layer = rw.slice(b, b + E);
    const mx = Math.max(...layer);
    const p = layer.map((x) => Math.exp(x - mx));
    const sum = p.reduce((a, x) => a + x, 0);
    const top = [...p.keys()].sort((x, y) => p[y] - p[x] || x - y).slice(0, k).sort((x, y) => x - y);
    for (const t of top) wantSparse.push({ index: b + t, value: p[t] / sum });
  }
  assert.deepEqual(s.body[0].map((x) => x.index), wantSparse.map((x) => x.index));
  s.body[0].forEach((x, i) => assert.ok(Math.abs(x.value - wantSparse[i].value) < 1e-5));

  // embed_all: every token's final-normed state; the last one is the HS `moeedb embed` gives.
  const all = await post('/embed_all', { inputs: texts });
  assert.equal(all.status, 200);
  all.body.forEach((tokens, i) => {
    assert.equal(tokens.length, reference[i].tokens);
    assertClose(tokens[tokens.length - 1], reference[i].hs, `/embed_all last token ${i}`);
  });

  // tokenize: the ids `moeedb tokenize` gives, and offsets that spell the text out.
  const t = await post('/tokenize', { inputs: texts[0], add_special_tokens: false });
  assert.equal(t.status, 200);
  for (const tok of t.body[0]) if (tok.start !== null) assert.equal(texts[0].slice(tok.start, tok.stop), tok.text);
  assert.equal(t.body[0].map((x) => x.text).join(''), texts[0]);
  const d = await post('/decode', { ids: t.body[0].map((x) => x.id) });
  assert.equal(d.status, 200);
  assert.equal(d.body, texts[0]);

  // Errors: TEI's {"error", "error_type"}.
  for (const [body, status, type] of [
    [{ inputs: 3 }, 422, 'validation'],
    [{ inputs: texts, truncation_direction: 'Up' }, 422, 'validation'],
    [{ inputs: texts, dimensions: 7 }, 422, 'validation'],
    [{ inputs: texts, prompt_name: 'nope' }, 422, 'validation'],
    [{ inputs: Array(33).fill('x') }, 413, 'validation'],
    [{ inputs: [] }, 400, 'empty'],
    ['{bad', 422, 'validation'],
  ]) {
    const res = await post('/embed', body);
    assert.equal(res.status, status, JSON.stringify(body));
    assert.equal(typeof res.body.error, 'string');
    assert.equal(res.body.error_type, type);
  }
  const unauth = await post('/', { inputs: 'x' }, 'wrong');
  assert.equal(unauth.status, 401);
  assert.equal(typeof unauth.body.error, 'string');
  assert.equal((await post('/rerank', { query: 'q', texts: 'not a list' })).status, 422);
  assert.equal((await post('/decode', { ids: [-1] })).status, 422);
});

test('Ollama: the ollama client embed() and embeddings()', async () => {
  const ollama = new Ollama({ host: base, headers: { Authorization: `Bearer ${apiKey}` } });
  const res = await ollama.embed({ model: 'tiny:hs', input: texts });
  assert.equal(res.embeddings.length, texts.length);
  res.embeddings.forEach((v, i) => assertClose(v, unit(reference[i].hs), `ollama hs ${i}`));
  assert.equal(res.prompt_eval_count, reference.reduce((a, r) => a + r.tokens, 0));
  const f = await ollama.embed({ model: 'tiny', input: texts[2] });
  assertClose(f.embeddings[0], unit(fused(reference[2])), 'ollama fused');
  const legacy = await ollama.embeddings({ model: 'tiny:rw', prompt: texts[1] });
  assertClose(legacy.embedding, reference[1].rw, 'ollama legacy rw');
  await assert.rejects(ollama.embed({ model: 'llama3', input: 'x' }), (e) => e.status_code === 404 && /not found/.test(e.error));
  await assert.rejects(ollama.embed({ model: 'tiny', input: '' }), (e) => e.status_code === 400);
  const wrong = new Ollama({ host: base, headers: { Authorization: 'Bearer nope' } });
  await assert.rejects(wrong.embed({ model: 'tiny', input: 'x' }), (e) => e.status_code === 401);
  const tags = await ollama.list();
  assert.ok(tags.models.some((m) => m.name === 'tiny:hs'));
  // The error shape over HTTP.
  const bad = await post('/api/embed', { model: 'tiny', input: [1, 2] });
  assert.equal(bad.status, 400);
  assert.deepEqual(Object.keys(bad.body), ['error']);
  const oversized = await post('/api/embed', { model: 'tiny', input: Array(2049).fill('x') });
  assert.equal(oversized.status, 400);
  assert.match(oversized.body.error, /too many inputs/);
});

test('Weaviate text2vec-transformers protocol: ready, meta, vectors single and batch', async () => {
  const ready = await fetch(base + '/.well-known/ready', { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(ready.status, 204);
  const meta = await get('/meta');
  assert.equal(meta.status, 200);
  assert.equal(meta.body.model.dim, reference[0].hs.length + reference[0].rw.length);
  const one = await post('/vectors', { text: texts[0], config: { pooling_strategy: 'masked_mean', task_type: 'passage' } });
  assert.equal(one.status, 200);
  assert.equal(one.body.text, texts[0]);
  assert.equal(one.body.dim, meta.body.model.dim);
  assertClose(one.body.vector, fused(reference[0]), 'weaviate single');
  const many = await post('/vectors/', { texts, config: { task_type: 'query' } });
  assert.equal(many.status, 200);
  many.body.vectors.forEach((v, i) => assertClose(v, fused(reference[i]), `weaviate batch ${i}`));
  for (const body of [{}, { text: 3 }, { texts: 'x' }, { text: 'a', texts: ['b'] }, { text: ' ' }, { text: 'a', config: { dimensions: 3 } }]) {
    const res = await post('/vectors', body);
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(typeof res.body.error, 'string');
  }
  assert.equal((await post('/vectors', { text: 'a' }, null)).status, 401);
  const oversized = await post('/vectors', { texts: Array(2049).fill('x') });
  assert.equal(oversized.status, 413);
  assert.equal(typeof oversized.body.error, 'string');
  // The server is still up after every refusal.
  assert.equal((await get('/meta')).status, 200);
});
