// Crash soak: `moeedb serve` on one database is SIGKILLed at random moments
// while several clients upsert (wait: true), delete and search, then started
// again and checked against the clients' own record of what the server
// acknowledged (the oracle):
//   - every acknowledged upsert is present with its text and with vectors that
//     equal the model's embedding of that text (1e-5 of the largest entry),
//     none zero or NaN, found by its own text in the HS and RW indexes (cosine
//     1) and by its unique word in the lexical index, with no older version;
//   - every acknowledged delete is absent from the store and from every index;
//   - no phantom ids (never written), no id listed or returned twice;
//   - an operation in flight at the kill may have happened or not, nothing else.
// Each client owns its ids and has at most one request in flight, so an id has
// at most one unacknowledged operation. Not part of the default test run:
//
//   node tests/soak/crash_soak.mjs [--cycles 50] [--clients 4] [--model DIR] [--db DIR] [--seed 1]
//
// Prints one JSON line of figures and exits 1 on any violation.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bin } from '../e2e/moeedb.mjs';
import { arg, seededRandom, WORDS as COMMON_WORDS } from './soak_util.mjs';

const cycles = Number(arg('cycles', 50));
const nClients = Number(arg('clients', 4));
const model = arg('model', null);
const dbDir = arg('db', fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-crash-soak-')));
const rand = seededRandom(Number(arg('seed', 1)));
const pick = (a) => a[Math.floor(rand() * a.length)];

const WORDS = [...COMMON_WORDS,
  ...'island rocket silver meadow lantern puzzle orchard canyon falcon glacier cotton marble'.split(' ')];
const VERBS = 'crosses repairs paints finds carries watches builds follows opens describes'.split(' ');
const textOf = (id, version) =>
  `The ${pick(WORDS)} ${pick(VERBS)} the ${pick(WORDS)} near the ${pick(WORDS)} q${id}v${version}z.`;
const nonce = (id, version) => `q${id}v${version}z`;

const violations = [];
const fail = (what) => { violations.push(what); console.error('VIOLATION', what); };

// ---- the server ----
let server = null, base = null;
function start() {
  const args = ['serve', '--db', dbDir, '--port', '0', '--threads', '2', '--workers', '1'];
  if (model) args.push('--model', model);
  server = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  server.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('server did not start: ' + err)), 120000);
    server.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); base = m[1]; resolve(); }
    });
    server.once('exit', (code, sig) => { clearTimeout(timer); reject(new Error(`server exited (${code ?? sig}): ${err}`)); });
  });
}
function kill9() {
  return new Promise((resolve) => {
    if (server.exitCode !== null || server.signalCode !== null) return resolve();
    server.removeAllListeners('exit');
    server.once('exit', resolve);
    server.kill('SIGKILL');
  });
}
async function call(method, route, body) {
  const r = await fetch(base + route, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}
async function ok(method, route, body) {
  const r = await call(method, route, body);
  if (r.status >= 300) throw new Error(`${method} ${route}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

// ---- the oracle: per id, the acknowledged state and the one pending op ----
// state: {text, version} or null (absent); pending: {state} (upsert or delete)
const ids = new Map();  // id -> {acked, pending, touched}
const counts = { upserts_acked: 0, deletes_acked: 0, searches: 0, in_flight_at_kill: 0, resolved_applied: 0,
  checked_vectors: 0, checked_index: 0, checked_absent: 0 };

async function client(k, stopAt) {
  let next = 0;
  const mine = [];
  for (const [id, e] of ids) if (Math.floor(Number(id) / 1e6) === k && e.acked) mine.push(id);
  for (const [id] of ids) if (Math.floor(Number(id) / 1e6) === k) next = Math.max(next, Number(id) % 1e6 + 1);
  while (Date.now() < stopAt) {
    const r = rand();
    try {
      if (r < 0.6 || mine.length === 0) {
        const batch = [];
        const n = 1 + Math.floor(rand() * 4);
        for (let i = 0; i < n; i++) {
          const reuse = mine.length > 0 && rand() < 0.3;
          const id = reuse ? pick(mine) : String(k * 1e6 + next++);
          if (batch.some((d) => d.id === id)) continue;
          const e = ids.get(id) ?? { acked: null, pending: null, touched: true, version: 0 };
          ids.set(id, e);
          e.version += 1;
          const state = { text: textOf(id, e.version), version: e.version };
          e.pending = { state };
          e.lastText = state.text;
          e.touched = true;
          batch.push({ id, text: state.text, metadata: { client: k, version: e.version } });
        }
        await ok('POST', '/collections/soak/documents', { documents: batch, wait: true });
        for (const d of batch) {
          const e = ids.get(d.id);
          e.acked = e.pending.state;
          e.pending = null;
          if (!mine.includes(d.id)) mine.push(d.id);
          counts.upserts_acked++;
        }
      } else if (r < 0.8) {
        const id = pick(mine);
        const e = ids.get(id);
        e.pending = { state: null };
        e.touched = true;
        const res = await call('DELETE', `/collections/soak/documents/${id}`);
        if (res.status !== 200) throw new Error(`delete ${id}: ${res.status}`);
        e.acked = null;
        e.pending = null;
        mine.splice(mine.indexOf(id), 1);
        counts.deletes_acked++;
      } else {
        const res = await ok('POST', '/collections/soak/search', { query: `the ${pick(WORDS)} ${pick(WORDS)}`, k: 10 });
        const seen = new Set(res.hits.map((h) => h.id));
        if (seen.size !== res.hits.length) fail(`search returned an id twice: ${JSON.stringify(res.hits.map((h) => h.id))}`);
        counts.searches++;
      }
    } catch (e) {
      return;  // the server is gone: what was in flight stays pending
    }
  }
}

// The model's vectors of a text, as /v1/embeddings gives them.
let modelId = null;
async function embed(texts) {
  const hs = await ok('POST', '/v1/embeddings', { model: `${modelId}:hs`, input: texts });
  const rw = await ok('POST', '/v1/embeddings', { model: `${modelId}:rw`, input: texts });
  return texts.map((_, i) => ({ hs: hs.data[i].embedding, rw: rw.data[i].embedding }));
}
function close(a, b) {
  if (!a || a.length !== b.length) return false;
  const scale = Math.max(...b.map(Math.abs));
  return scale > 0 && a.every((x, i) => Number.isFinite(x) && Math.abs(x - b[i]) <= 1e-5 * scale);
}
const bad = (v) => !v || v.some((x) => !Number.isFinite(x)) || v.every((x) => x === 0);

async function listAll() {
  const out = new Map();
  let after = null;
  for (;;) {
    const page = await ok('GET', `/collections/soak/documents?limit=1000${after ? `&after=${after}` : ''}`);
    for (const d of page.documents) {
      if (out.has(d.id)) fail(`listing returned ${d.id} twice`);
      out.set(d.id, d);
    }
    if (!page.next_after) return { docs: out, total: page.total };
    after = page.next_after;
  }
}

// Resolves every pending op from the store, then checks the sample's vectors and indexes.
async function verify(full) {
  const { docs, total } = await listAll();
  if (total !== docs.size) fail(`listing total ${total} but ${docs.size} documents`);
  const info = await ok('GET', '/collections/soak');
  if (info.documents !== docs.size) fail(`collection count ${info.documents} but ${docs.size} listed`);
  for (const id of docs.keys()) if (!ids.has(id)) fail(`phantom document ${id}`);
  for (const [id, e] of ids) {
    const d = docs.get(id);
    const seen = d ? d.text : null;
    const want = e.acked ? e.acked.text : null;
    const maybe = e.pending ? (e.pending.state ? e.pending.state.text : null) : undefined;
    if (seen === want) {
      // the acknowledged state (a pending op did not happen)
    } else if (maybe !== undefined && seen === maybe) {
      e.acked = e.pending.state;
      counts.resolved_applied++;
    } else {
      fail(`${id}: stored ${JSON.stringify(seen)}, acknowledged ${JSON.stringify(want)}` +
        (maybe !== undefined ? ` or in flight ${JSON.stringify(maybe)}` : ''));
      e.acked = seen === null ? null : { text: seen, version: d.metadata.version };
    }
    if (e.pending) counts.in_flight_at_kill++;
    e.pending = null;
  }
  // The sample: everything touched since the last check, and 30 others (all when full).
  const all = [...ids.keys()];
  const sample = all.filter((id) => full || ids.get(id).touched);
  for (let i = 0; i < 30 && !full && all.length; i++) sample.push(pick(all));
  const live = [...new Set(sample)].filter((id) => ids.get(id).acked);
  const gone = [...new Set(sample)].filter((id) => !ids.get(id).acked);
  for (let i = 0; i < live.length; i += 64) {
    const chunk = live.slice(i, i + 64);
    const want = await embed(chunk.map((id) => ids.get(id).acked.text));
    const got = await ok('POST', '/qdrant/collections/soak/points', { ids: chunk.map(Number), with_vector: true });
    const byId = new Map(got.result.map((p) => [String(p.id), p.vector]));
    chunk.forEach((id, j) => {
      const v = byId.get(id);
      if (!v) return fail(`${id}: no stored vectors`);
      if (bad(v.hs) || bad(v.rw)) fail(`${id}: zero or NaN vector`);
      if (!close(v.hs, want[j].hs) || !close(v.rw, want[j].rw)) fail(`${id}: stored vectors differ from the model's`);
      counts.checked_vectors++;
    });
  }
  for (const id of live) {
    const { text, version } = ids.get(id).acked;
    for (const mode of ['hs', 'rw']) {
      const res = await ok('POST', '/collections/soak/search', { query: text, k: 10, mode });
      const hit = res.hits.find((h) => h.id === id);
      const score = (h) => (mode === 'hs' ? h.score_hs : h.score_rw);
      const tied = res.hits.length === 10 && score(res.hits[9]) > 0.9999;  // more exact matches than k
      if ((!hit || score(hit) < 0.9999) && !tied) fail(`${id}: not found by its own text in the ${mode} index`);
    }
    const lex = await ok('POST', '/collections/soak/search', { query: nonce(id, version), k: 10, mode: 'lexical' });
    if (lex.hits.length !== 1 || lex.hits[0].id !== id) fail(`${id}: lexical search for its word gave ${JSON.stringify(lex.hits.map((h) => h.id))}`);
    for (let old = 1; old < version; old++) {
      const stale = await ok('POST', '/collections/soak/search', { query: nonce(id, old), k: 10, mode: 'lexical' });
      if (stale.hits.length) fail(`${id}: stale lexical hit for version ${old}`);
    }
    counts.checked_index++;
  }
  for (const id of gone) {
    const r = await call('GET', `/collections/soak/documents/${id}`);
    if (r.status !== 404) fail(`${id}: deleted but GET gives ${r.status}`);
    const e = ids.get(id);
    for (let v = 1; v <= e.version; v++) {
      const lex = await ok('POST', '/collections/soak/search', { query: nonce(id, v), k: 10, mode: 'lexical' });
      if (lex.hits.length) fail(`${id}: deleted but found by the lexical index`);
    }
    const dense = await ok('POST', '/collections/soak/search', { query: e.lastText, k: 10, mode: 'hs' });
    if (dense.hits.some((h) => h.id === id)) fail(`${id}: deleted but found by the HS index`);
    counts.checked_absent++;
  }
  for (const e of ids.values()) e.touched = false;
}

const t0 = Date.now();
await start();
modelId = (await ok('GET', '/v1/models')).data.map((m) => m.id).find((m) => !m.includes(':'));
if ((await call('GET', '/collections/soak')).status === 404) await ok('PUT', '/collections/soak', {});
for (let c = 0; c < cycles; c++) {
  const runFor = 500 + rand() * 2500;
  const stopAt = Date.now() + runFor + 10000;
  const clients = [];
  for (let k = 1; k <= nClients; k++) clients.push(client(k, stopAt));
  await new Promise((r) => setTimeout(r, runFor));
  await kill9();
  await Promise.all(clients);
  await start();
  await verify(c === cycles - 1);
  if ((c + 1) % 10 === 0) console.error(`cycle ${c + 1}/${cycles}: ${ids.size} ids, ${violations.length} violations`);
}
await kill9();
const live = [...ids.values()].filter((e) => e.acked).length;
console.log(JSON.stringify({ cycles, clients: nClients, ids: ids.size, live, ...counts,
  violations: violations.length, seconds: Math.round((Date.now() - t0) / 1000), db: dbDir }));
process.exit(violations.length ? 1 : 0);
