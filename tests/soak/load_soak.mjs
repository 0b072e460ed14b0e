// Load soak: CLIENTS concurrent keep-alive clients for SECONDS against one
// `moeedb serve`, each looping over a mix of OpenAI embeddings (1-8 inputs),
// upserts (1-4 documents, wait: true, replacing ids of a pre-filled set so the
// collection's size stays put) and searches (fused and hybrid). Reports the
// answers by status, p50/p99/max latency per route and the server's RSS every
// second; passes when every answer is 200 or a documented 429/503 (queue or
// connection cap) and the RSS of the last 30 s stays within 10 % of its
// minimum there. Not part of the default test run:
//
//   node tests/soak/load_soak.mjs [--clients 64] [--seconds 60] [--docs 1000] [--model DIR] [--threads 2]
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bin } from '../e2e/moeedb.mjs';
import { arg, seededRandom, WORDS } from './soak_util.mjs';

const nClients = Number(arg('clients', 64));
const seconds = Number(arg('seconds', 60));
const nDocs = Number(arg('docs', 1000));
const model = arg('model', null);
const threads = arg('threads', '2');
const dbDir = fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-load-soak-'));

const rand = seededRandom(7);
const pick = (a) => a[Math.floor(rand() * a.length)];
const sentence = () => `A ${pick(WORDS)} and a ${pick(WORDS)} by the ${pick(WORDS)} in ${pick(WORDS)} light.`;

const args = ['serve', '--db', dbDir, '--port', '0', '--threads', threads];
if (model) args.push('--model', model);
const server = spawn(bin, args, { stdio: ['ignore', 'pipe', 'inherit'] });
const base = await new Promise((resolve, reject) => {
  let buf = '';
  server.stdout.on('data', (d) => {
    buf += d;
    const m = buf.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  server.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
});
async function call(route, body, method = 'POST') {
  const t = performance.now();
  const r = await fetch(base + route, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await r.arrayBuffer();
  return { status: r.status, ms: performance.now() - t };
}
const modelId = (await (await fetch(base + '/v1/models')).json()).data[0].id;
await call('/collections/load', {}, 'PUT');
for (let i = 0; i < nDocs; i += 32) {
  const documents = [];
  for (let j = i; j < Math.min(nDocs, i + 32); j++) documents.push({ id: `d${j}`, text: sentence(), metadata: { n: j } });
  const r = await call('/collections/load/documents', { documents, wait: true });
  if (r.status !== 200) throw new Error(`pre-fill: ${r.status}`);
}

const rssKb = () => Number(fs.readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);
const rss = [];
const sampler = setInterval(() => rss.push(rssKb()), 1000);
const stats = new Map();  // route -> {latencies, status counts}
const record = (route, r) => {
  const s = stats.get(route) ?? { ms: [], status: {} };
  stats.set(route, s);
  s.ms.push(r.ms);
  s.status[r.status] = (s.status[r.status] ?? 0) + 1;
};
const stopAt = Date.now() + seconds * 1000;
let transportErrors = 0;
async function client() {
  while (Date.now() < stopAt) {
    const r = rand();
    try {
      if (r < 0.4) {
        const input = Array.from({ length: 1 + Math.floor(rand() * 8) }, sentence);
        record('/v1/embeddings', await call('/v1/embeddings', { model: modelId, input }));
      } else if (r < 0.6) {
        const documents = Array.from({ length: 1 + Math.floor(rand() * 4) },
          () => ({ id: `d${Math.floor(rand() * nDocs)}`, text: sentence(), metadata: { n: Math.floor(rand() * 100) } }));
        const unique = [...new Map(documents.map((d) => [d.id, d])).values()];
        record('upsert', await call('/collections/load/documents', { documents: unique, wait: true }));
      } else if (r < 0.8) {
        record('search fused', await call('/collections/load/search', { query: sentence(), k: 10 }));
      } else {
        record('search hybrid', await call('/collections/load/search', { query: sentence(), k: 10, mode: 'hybrid' }));
      }
    } catch (e) {
      transportErrors++;
    }
  }
}
const t0 = performance.now();
await Promise.all(Array.from({ length: nClients }, client));
const wall = (performance.now() - t0) / 1000;
clearInterval(sampler);
server.kill('SIGTERM');

const q = (a, p) => a[Math.min(a.length - 1, Math.floor(p * a.length))];
const routes = {};
let errors = transportErrors;
for (const [route, s] of stats) {
  s.ms.sort((a, b) => a - b);
  routes[route] = { requests: s.ms.length, per_s: +(s.ms.length / wall).toFixed(1), status: s.status,
    p50_ms: +q(s.ms, 0.5).toFixed(1), p99_ms: +q(s.ms, 0.99).toFixed(1), max_ms: +s.ms[s.ms.length - 1].toFixed(1) };
  for (const [code, n] of Object.entries(s.status)) if (!['200', '429', '503'].includes(code)) errors += n;
}
const last = rss.slice(-30);
const rssGrowth = Math.max(...last) / Math.min(...last) - 1;
const result = { clients: nClients, seconds, docs: nDocs, routes, transport_errors: transportErrors, errors,
  rss_mb_first: +(rss[0] / 1024).toFixed(1), rss_mb_last: +(rss[rss.length - 1] / 1024).toFixed(1),
  rss_mb_max: +(Math.max(...rss) / 1024).toFixed(1), rss_last30s_spread: +rssGrowth.toFixed(4),
  rss_mb_each_5s: rss.filter((_, i) => i % 5 === 0).map((k) => +(k / 1024).toFixed(1)) };
console.log(JSON.stringify(result, null, 1));
process.exit(errors === 0 && rssGrowth <= 0.10 ? 0 : 1);
