// Markdown tables from the JSON lines scripts/eval.sh writes (one object per
// run, with its "label"): STS-B Spearman, Cranfield nDCG@10 / MRR@10 /
// Recall@100 and Banking77 kNN accuracy, one row per label, in file order.
//
//   node eval/tables.js build/eval-results/results.jsonl
"use strict";
const fs = require("fs");

const f = (x) => (x === undefined || x === null ? "" : x.toFixed(1));
const runs = fs.readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const name = (r) => r.label.replace(/-(sts|retrieval|classify)(-tune|-test)?$/, "$2");
// A table's title line and header: "| a | b |" and its "|---|---|" rule.
const head = (title, columns) => {
  console.log(title);
  console.log(`| ${columns.join(" | ")} |`);
  console.log(`|${columns.map(() => "---|").join("")}`);
};

const sts = runs.filter((r) => r.task === "sts");
head("**STS-B test** (Spearman ×100, 1379 pairs; α dev: chosen on STS-B dev; α model: the model's default)\n",
     ["run", "HS", "RW", "concat", "sum α=1", "sum α dev", "sum α label-free", "sum α model"]);
for (const r of sts) {
  const s = r.spearman;
  const baseline = s.tfidf !== undefined ? s.tfidf : s.teacher;
  if (r.setup && r.setup.vectors) {  // an outside model's vectors (the anchor): HS alone
    console.log(`| ${name(r)} | ${f(s.hs)} | | | | | | |`);
    continue;
  }
  if (baseline !== undefined) {  // one cosine score: TF-IDF or the teacher
    console.log(`| ${name(r)} | ${f(baseline)} (cosine) | | | | | | |`);
    continue;
  }
  console.log(`| ${name(r)} | ${f(s.hs)} | ${f(s.rw)} | ${f(s.concat)} | ${f(s.sum_alpha1)} | ${f(s.sum_alpha_dev)} (α ${r.alpha_dev.toFixed(2)}) | ` +
              `${f(s.sum_alpha_labelfree)} (α ${r.alpha_labelfree.toFixed(2)}) | ${f(s.sum_alpha_model)} (α ${r.alpha_model.toFixed(2)}) |`);
}
const ret = runs.filter((r) => r.task === "retrieval");
head("\n**Cranfield** (225 queries, 1400 abstracts; nDCG@10 / MRR@10 / Recall@100, ×100; fused at the model's α)\n",
     ["run", "hs", "rw", "fused"]);
const m3 = (m) => (m ? `${f(m["ndcg@10"])} / ${f(m["mrr@10"])} / ${f(m["recall@100"])}` : "");
for (const r of ret) {
  const m = r.metrics;
  if (m.tfidf) console.log(`| ${name(r)} | ${m3(m.tfidf)} | | |`);
  else if (r.setup && r.setup.vectors) console.log(`| ${name(r)} | ${m3(m.hs)} | | |`);
  else console.log(`| ${name(r)} | ${m3(m.hs)} | ${m3(m.rw)} | ${m3(m.fused)} (α ${r.alpha.toFixed(2)}) |`);
}
const cls = runs.filter((r) => r.task === "classify");
head("\n**Banking77** (kNN accuracy %, k = 10; 3080 test texts against 10003 training texts)\n",
     ["run", "hs", "rw", "fused"]);
for (const r of cls) {
  const a = r.accuracy;
  if (a.tfidf !== undefined) console.log(`| ${name(r)} | ${f(a.tfidf)} | | |`);
  else if (r.setup && r.setup.vectors) console.log(`| ${name(r)} | ${f(a.hs)} | | |`);
  else console.log(`| ${name(r)} | ${f(a.hs)} | ${f(a.rw)} | ${f(a.fused)} (α ${r.alpha.toFixed(2)}) |`);
}
// Hybrid search on Cranfield: every signal alone, each pair and all three,
// for both fusions (runs whose collection had the lexical index), and the
// tuning grid where one was run.
for (const r of ret.filter((x) => x.metrics.lexical)) {
  const m = r.metrics;
  console.log(`\n**Cranfield hybrid, ${name(r)}** (${r.queries} queries: ${r.query_set || "all"}; ` +
              `β ${r.beta}, α ${r.alpha.toFixed(2)}, weighted = ${r.norm || "minmax"}; nDCG@10 / MRR@10 / Recall@100)\n`);
  console.log("| signals | one signal, or the dense sum | weighted | rrf |");
  console.log("|---|---|---|---|");
  console.log(`| hs | ${m3(m.hs)} | | |`);
  console.log(`| rw | ${m3(m.rw)} | | |`);
  console.log(`| lexical (BM25) | ${m3(m.lexical)} | | |`);
  for (const s of ["hs+rw", "hs+lex", "rw+lex", "hs+rw+lex"])
    console.log(`| ${s} | ${s === "hs+rw" ? m3(m.fused) + " (cos sum)" : ""} | ${m3(m["weighted:" + s])} | ${m3(m["rrf:" + s])} |`);
  const beta = (k) => parseFloat(k.split("beta=")[1]);
  const tune = Object.keys(m).filter((k) => k.startsWith("tune:"))
                   .sort((a, b) => a.split(":")[1].localeCompare(b.split(":")[1]) || beta(a) - beta(b));
  if (tune.length) {
    console.log(`\n**Hybrid tuning grid, ${name(r)}** (all three signals; nDCG@10 / MRR@10 / Recall@100)\n`);
    console.log("| setting | result |");
    console.log("|---|---|");
    for (const k of tune) console.log(`| ${k.slice(5)} | ${m3(m[k])} |`);
  }
}
