// Turns `moeedb embed` output (one JSON line per text) into a teacher file for
// `moeedb train embed --teacher`: the first DIM values of each "hs" (a trained
// pooler's attention-pooled part, before its lexical channel), L2-normalised,
// as little-endian float32 rows. A model's own vectors as its teacher keep its
// HS where a later stage trains something else (the router logits).
//
//   moeedb embed --model DIR < texts.txt | node eval/teacher/self_vectors.js DIM OUT.f32
"use strict";
const fs = require("fs");
const readline = require("readline");

const dim = Number(process.argv[2]);
const out = process.argv[3];
if (!Number.isInteger(dim) || dim <= 0 || !out) {
  console.error("usage: node eval/teacher/self_vectors.js DIM OUT.f32 < embed.jsonl");
  process.exit(2);
}
const fd = fs.openSync(out, "w");
let rows = 0;
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  const hs = JSON.parse(line).hs;
  if (!Array.isArray(hs) || hs.length < dim) {
    console.error(`line ${rows + 1}: hs has ${hs && hs.length} values, fewer than ${dim}`);
    process.exit(1);
  }
  let norm = 0;
  for (let i = 0; i < dim; ++i) norm += hs[i] * hs[i];
  norm = Math.sqrt(norm) || 1;
  const row = new Float32Array(dim);
  for (let i = 0; i < dim; ++i) row[i] = hs[i] / norm;
  fs.writeSync(fd, Buffer.from(row.buffer));
  ++rows;
});
rl.on("close", () => {
  fs.closeSync(fd);
  console.error(`${rows} vectors of ${dim} values written to ${out}`);
});
