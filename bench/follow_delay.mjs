// How long a document written through one node takes to be found by a
// search on another, both serving one PostgreSQL database (bench/follow_delay.sh
// starts them). Writes one document a request to node A at RATE writes/s
// (client vectors of 64 dims, acknowledged: synced), and after each
// acknowledgement searches node B with that document's vector every 5 ms
// until it is the top hit. Prints the delays' p50, p99 and max (ms) from the
// acknowledgement to the first search that finds it.
//   node bench/follow_delay.mjs URL_A URL_B [WRITES=200] [RATE=20]
const [a, b, writesArg = '200', rateArg = '20'] = process.argv.slice(2);
if (!a || !b) {
  console.error('usage: node bench/follow_delay.mjs URL_A URL_B [WRITES] [RATE]');
  process.exit(2);
}
const writes = Number(writesArg), rate = Number(rateArg), dims = 64;
const post = async (url, body, method = 'POST') => {
  const r = await fetch(url, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) throw new Error(`${method} ${url}: ${r.status} ${JSON.stringify(j)}`);
  return j;
};
let seed = 1;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;

await post(`${a}/collections/delay`, { vector_size: dims, distance: 'Cosine', lexical: false, index: { hs: 'flat' } }, 'PUT');
await post(`${a}/collections/delay/documents`, { documents: [{ id: 'warm', vector: Array.from({ length: dims }, random) }] });
await post(`${b}/collections/delay/search`, { vector: Array.from({ length: dims }, random), k: 1 });  // B opens it

const delays = [];
const waits = [];
const start = Date.now();
for (let i = 0; i < writes; ++i) {
  const due = start + (i * 1000) / rate;
  if (Date.now() < due) await new Promise((r) => setTimeout(r, due - Date.now()));
  const vector = Array.from({ length: dims }, random);
  await post(`${a}/collections/delay/documents`, { documents: [{ id: `d${i}`, vector }] });
  const acked = performance.now();
  waits.push((async () => {
    for (;;) {
      const hits = (await post(`${b}/collections/delay/search`, { vector, k: 1, exact: true })).hits;
      if (hits.length && hits[0].id === `d${i}`) return delays.push(performance.now() - acked);
      await new Promise((r) => setTimeout(r, 5));
    }
  })());
}
await Promise.all(waits);
delays.sort((x, y) => x - y);
const at = (q) => delays[Math.min(delays.length - 1, Math.floor(q * delays.length))];
console.log(JSON.stringify({ writes, rate_per_s: rate, found: delays.length, p50_ms: +at(0.5).toFixed(1),
  p99_ms: +at(0.99).toFixed(1), max_ms: +delays[delays.length - 1].toFixed(1),
  achieved_rate_per_s: +((writes * 1000) / (Date.now() - start)).toFixed(1) }));
