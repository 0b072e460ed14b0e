// The expert-pruning table from bench/prune_eval.sh's results.jsonl:
// keep fraction x rule -> quality (STS-B test Spearman x100, Cranfield
// nDCG@10, Banking77 kNN accuracy; HS, RW and the fused score with the
// model's alpha) and cost (weights, peak RSS, tokens/s), against the
// unpruned model.
//   node bench/prune_table.mjs results.jsonl > prune.md
import { readFileSync } from 'node:fs';

const rows = readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const f1 = (x) => (typeof x === 'number' ? x.toFixed(1) : '–');
const base = rows.find((r) => r.label === 'unpruned');
const out = [];
out.push('| model | STS-B HS | RW | fused | Cranfield HS | fused | Banking77 HS | fused | weights MB | vs full | peak RSS MB | tokens/s |');
out.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const s = r.sts.spearman, m = r.retrieval.metrics, a = r.classify.accuracy;
  out.push(`| ${r.label} | ${f1(s.hs)} | ${f1(s.rw)} | ${f1(s.sum_alpha_model)} | ${f1(m.hs['ndcg@10'])} | ${f1(m.fused['ndcg@10'])} | ` +
    `${f1(a.hs)} | ${f1(a.fused ?? a.sum)} | ${(r.weights_bytes / 1e6).toFixed(1)} | ${(r.weights_bytes / base.weights_bytes).toFixed(3)} | ` +
    `${(r.peak_rss_kb / 1024).toFixed(0)} | ${r.tokens_per_s.toFixed(0)} |`);
}
console.log(out.join('\n'));
