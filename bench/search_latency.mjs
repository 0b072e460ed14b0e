// A search's latency as a client sees it: a short query embedded by the
// server's model and searched in a collection (POST /collections/{name}/search,
// fused mode, k 10), one query at a time and from CONCURRENT clients at once
// (each on its own keep-alive connection, one request in flight). Creates
// the collection from DOCS_FILE (a text a line, ingested 100 a request),
// picks from QUERIES_FILE the lines of exactly QUERY_TOKENS tokens (the
// server's /tokenize, no special tokens), warms up, then prints one JSON
// line: the queries' tokens as the model saw them (prompt included: the
// /v1/embeddings usage), and per concurrency p50/p99 ms and queries/s.
//   node bench/search_latency.mjs URL DOCS_FILE QUERIES_FILE [QUERY_TOKENS=12] [QUERIES=100] [CONCURRENT=16]
import { readFileSync } from 'node:fs';

const [url, docsFile, queriesFile, tokensArg = '12', queriesArg = '100', concurrentArg = '16'] = process.argv.slice(2);
if (!url || !docsFile || !queriesFile) {
  console.error('usage: node bench/search_latency.mjs URL DOCS_FILE QUERIES_FILE [QUERY_TOKENS] [QUERIES] [CONCURRENT]');
  process.exit(2);
}
const queryTokens = Number(tokensArg), wanted = Number(queriesArg), concurrent = Number(concurrentArg);
const call = async (path, body, method = 'POST') => {
  const r = await fetch(url + path, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(j)}`);
  return j;
};
const lines = (f) => readFileSync(f, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);

const docs = lines(docsFile);
await call('/collections/latency', { index: { hs: 'flat', rw: 'flat' } }, 'PUT');
for (let i = 0; i < docs.length; i += 100)
  await call('/collections/latency/documents', { documents: docs.slice(i, i + 100).map((text, j) => ({ id: `d${i + j}`, text })) });

const queries = [];
for (const text of lines(queriesFile)) {
  const [tokens] = await call('/tokenize', { inputs: text, add_special_tokens: false });
  if (tokens.length === queryTokens && !queries.includes(text)) queries.push(text);
  if (queries.length === wanted) break;
}
if (queries.length < wanted) throw new Error(`only ${queries.length} queries of ${queryTokens} tokens`);
const usage = await call('/v1/embeddings', { input: queries[0], model: 'bench' });
const modelTokens = usage.usage.prompt_tokens;

const search = (q) => call('/collections/latency/search', { query: q, k: 10 });
const percentile = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
async function measure(clients) {
  const ms = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    for (let i; (i = next++) < queries.length * Math.max(1, clients / 4);) {
      const t = performance.now();
      const r = await search(queries[i % queries.length]);
      if (r.hits.length !== 10) throw new Error(`${r.hits.length} hits`);
      ms.push(performance.now() - t);
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  ms.sort((a, b) => a - b);
  return { clients, queries: ms.length, p50_ms: percentile(ms, 50), p99_ms: percentile(ms, 99), qps: ms.length / seconds };
}
for (const q of queries.slice(0, 20)) await search(q);  // warm-up
const one = await measure(1);
const many = await measure(concurrent);
console.log(JSON.stringify({ documents: docs.length, query_tokens: queryTokens, model_tokens: modelTokens, one, many }));
