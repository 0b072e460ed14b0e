// Renders bench/quantized_search.sh's JSON (build/bench-quantized/*.json)
// as the Markdown tables of docs/perf.md ("Codes in RAM"):
//   node bench/quantized_table.mjs build/bench-quantized/default-100000.json [...]
import { readFileSync } from "node:fs";

const f = (x, d = 0) => Number(x).toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
for (const file of process.argv.slice(2)) {
  const r = JSON.parse(readFileSync(file, "utf8"));
  console.log(`${r.source}: ${f(r.docs)} documents (${r.dim_hs} + ${r.dim_rw}), ${r.queries} queries ` +
              `(${r.query_source ?? "the rows after the documents"}), alpha ${r.alpha}, ` +
              `k 10, nprobe ${r.nprobe}; Hamming: ${r.hamming}; CPU flags: ${r.cpu_flags}\n`);
  // Older runs have no cold-cache timings: their columns are left out.
  const cold = r.moeedb.some((m) => m.cold_rows && m.cold_rows.prefetch);
  const coldHead = cold ? " cold rows p50 / p99 ms | cold, one fault at a time |" : "";
  console.log("| index / codes | oversample | recall@10 | max score error | heap B/doc | RssAnon B/doc | row file B/doc | p50 ms | p99 ms | QPS (2 clients) | x exact QPS |" + coldHead);
  console.log("|---|---|---|---|---|---|---|---|---|---|---|" + (cold ? "---|---|" : ""));
  const e = r.exact;
  console.log(`| exact (flat, f32 rows in the heap) | – | 1.000 | 0 | ${f(e.heap_bytes_per_doc)} | – | – | ${f(e.p50_ms, 2)} | ${f(e.p99_ms, 2)} | ${f(e.qps)} | 1.0 |` + (cold ? " – | – |" : ""));
  const pair = (t) => (t ? `${f(t.p50_ms, 2)} / ${f(t.p99_ms, 2)}` : "–");
  for (const m of r.moeedb)
    console.log(`| ${m.index} | ${m.oversample} | ${f(m.recall_at_10, 3)} | ${m.max_score_error.toExponential(1)} | ${f(m.heap_bytes_per_doc)} | ` +
                `${f(m.rss_anon_bytes_per_doc)} | ${f(m.row_file_bytes_per_doc)} | ${f(m.p50_ms, 2)} | ${f(m.p99_ms, 2)} | ${f(m.qps)} | ${f(m.qps_vs_exact, 1)} |` +
                (cold ? ` ${pair(m.cold_rows?.prefetch)} | ${pair(m.cold_rows?.no_prefetch)} |` : ""));
  console.log("\n| Faiss, on [hs; alpha rw], no re-scoring | recall@10 | B/doc (serialized) | build s | p50 ms | p99 ms | QPS (2 clients) |");
  console.log("|---|---|---|---|---|---|---|");
  for (const x of r.faiss)
    console.log(`| ${x.index} | ${f(x.recall_at_10, 3)} | ${f(x.bytes_per_doc)} | ${f(x.build_s, 1)} | ${f(x.p50_ms, 2)} | ${f(x.p99_ms, 2)} | ${f(x.qps)} |`);
  console.log("");
}
