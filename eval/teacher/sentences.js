// Writes the distinct training sentences the embedding trainer may distil
// towards the teacher, one per line, most useful first: STS-B train,
// Banking77 train, NLI triplets, then positive pairs (a seeded sample of each
// source), then (with --openstax N) N passages of one to three sentences from
// the OpenStax textbooks, so the student also sees expository, scientific
// English; with --corpus, the N most frequent words of the modern-English
// corpora (single words teach the student word meanings cheaply), then the
// sentences of those corpora (OpenStax, MASC, US speeches, War and Peace;
// 4 to 40 words, shuffled with a fixed seed), then every remaining sentence
// of the positive pairs; with --paragraphs N, N paragraph openings of
// OpenStax and MASC (25 to 90 words: passages as retrieval indexes them).
// Never a dev or test split: STS-B dev and
// test sentences are never among the --corpus additions. Later options only
// append, so vectors embedded for a shorter list stay valid for the longer one.
//
//   node eval/teacher/sentences.js DATA_DIR OUT.txt [--pairs-per-source N] [--openstax N] [--corpus [--words N]] [--paragraphs N]
"use strict";
const fs = require("fs");
const { positional, intOption } = require("./args");
const path = require("path");
const { parseCsv } = require("./csv");

function clean(s) { return s.replace(/\s+/g, " ").trim(); }

// mulberry32: a small seeded generator, so the sample is the same everywhere.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function main() {
  const [data, out] = positional("node sentences.js DATA_DIR OUT.txt [--pairs-per-source N] [--openstax N] [--corpus [--words N]] [--paragraphs N]", 2);
  const perSource = intOption("pairs-per-source", 2000);
  const seen = new Set(), list = [];
  // Long passages (QED) are left out: the student reads at most 128 tokens.
  const addUpTo = (s, max) => { s = clean(s); if (s.length && s.length <= max && !seen.has(s)) { seen.add(s); list.push(s); } };
  const add = (s) => addUpTo(s, 400), addLong = (s) => addUpTo(s, 1000);
  for (const r of parseCsv(fs.readFileSync(path.join(data, "eval/stsb/stsb-en-train.csv"), "utf8")))
    if (r.length >= 3) { add(r[0]); add(r[1]); }
  parseCsv(fs.readFileSync(path.join(data, "eval/banking77/train.csv"), "utf8")).slice(1).forEach((r) => add(r[0]));
  const tsv = (f) => fs.readFileSync(path.join(data, f), "utf8").split("\n").slice(1).filter((l) => l.length).map((l) => l.split("\t"));
  for (const r of tsv("pairs/nli_triplets.tsv")) { add(r[0]); add(r[1]); add(r[2]); }
  const bySource = new Map();
  for (const r of tsv("pairs/positive_pairs.tsv")) {
    if (!bySource.has(r[2])) bySource.set(r[2], []);
    bySource.get(r[2]).push(r);
  }
  const rand = rng(1234);
  for (const [, rows] of [...bySource.entries()].sort()) {
    for (let i = rows.length - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [rows[i], rows[j]] = [rows[j], rows[i]]; }
    for (const r of rows.slice(0, perSource)) { add(r[0]); add(r[1]); }
  }
  const openstax = intOption("openstax", 0);
  if (openstax > 0) {
    const dir = path.join(data, "corpus/openstax");
    const passages = [];
    for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".txt") && f !== "SOURCES.txt").sort()) {
      for (const para of fs.readFileSync(path.join(dir, f), "utf8").split("\n")) {
        // Sentence ends: a full stop, ? or ! followed by a space and a capital.
        const sents = clean(para).split(/(?<=[.?!])\s+(?=[A-Z])/).filter((x) => x.length >= 30);
        for (let i = 0; i < sents.length; ) {
          const take = 1 + Math.floor(rand() * 3);
          const p = sents.slice(i, i + take).join(" ");
          if (p.length <= 400) passages.push(p);
          i += take;
        }
      }
    }
    for (let i = passages.length - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [passages[i], passages[j]] = [passages[j], passages[i]]; }
    for (const p of passages.slice(0, openstax)) add(p);
  }
  if (process.argv.includes("--corpus")) {
    // STS-B dev and test sentences stay unseen here: marked as seen, they are never added.
    for (const split of ["dev", "test"])
      for (const r of parseCsv(fs.readFileSync(path.join(data, `eval/stsb/stsb-en-${split}.csv`), "utf8")))
        if (r.length >= 3) { seen.add(clean(r[0])); seen.add(clean(r[1])); }
    const files = [...fs.readdirSync(path.join(data, "corpus/openstax")).filter((f) => f.endsWith(".txt") && f !== "SOURCES.txt").sort()
      .map((f) => path.join(data, "corpus/openstax", f)),
      ...["nltk/masc_detagged.txt", "nltk/state_union.txt", "nltk/inaugural.txt", "war-and-peace.txt"].map((f) => path.join(data, "corpus", f))];
    const sentences = [], freq = new Map();
    for (const f of files) {
      // Paragraphs are lines (OpenStax, MASC) or blank-line separated (the rest).
      const paras = fs.readFileSync(f, "utf8").split(/\n\s*\n|\n(?=\S)/);
      for (const para of paras) {
        for (const sent of clean(para).split(/(?<=[.?!])\s+(?=[A-Z"'])/)) {
          const words = sent.split(" ");
          if (words.length >= 4 && words.length <= 40 && /^[A-Z"']/.test(sent) && /[.?!"']$/.test(sent)) sentences.push(sent);
          for (const w of sent.toLowerCase().match(/[a-z]+(?:'[a-z]+)?/g) || []) freq.set(w, (freq.get(w) || 0) + 1);
        }
      }
    }
    const nwords = intOption("words", 20000);
    const words = [...freq.entries()].filter(([w, c]) => c >= 3 && w.length >= 2).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    for (const [w] of words.slice(0, nwords)) add(w);
    for (let i = sentences.length - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [sentences[i], sentences[j]] = [sentences[j], sentences[i]]; }
    for (const x of sentences) add(x);
    for (const [, rows] of [...bySource.entries()].sort()) for (const r of rows) { add(r[0]); add(r[1]); }
  }
  const paragraphs = intOption("paragraphs", 0);
  if (paragraphs > 0) {
    // Passages as retrieval indexes them: the opening of each OpenStax and
    // MASC paragraph, whole sentences up to 90 words (what the student reads
    // within 128 tokens, so both models see the same text), at least 25 words.
    const files = [...fs.readdirSync(path.join(data, "corpus/openstax")).filter((f) => f.endsWith(".txt") && f !== "SOURCES.txt").sort()
      .map((f) => path.join(data, "corpus/openstax", f)), path.join(data, "corpus/nltk/masc_detagged.txt")];
    const passages = [];
    for (const f of files)
      for (const para of fs.readFileSync(f, "utf8").split("\n")) {
        let text = "", n = 0;
        for (const sent of clean(para).split(/(?<=[.?!])\s+(?=[A-Z"'])/)) {
          const w = sent.split(" ").length;
          if (n + w > 90) break;
          text += (n ? " " : "") + sent;
          n += w;
        }
        if (n >= 25) passages.push(text);
      }
    for (let i = passages.length - 1; i > 0; i--) { const j = Math.floor(rand() * (i + 1)); [passages[i], passages[j]] = [passages[j], passages[i]]; }
    for (const x of passages.slice(0, paragraphs)) addLong(x);
  }
  fs.writeFileSync(out, list.join("\n") + "\n");
  console.error(`${list.length} sentences`);
}

main();
