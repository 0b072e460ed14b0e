#!/usr/bin/env node
// Inverse-cloze pairs (Lee et al., 2019, "Latent Retrieval for Weakly
// Supervised Open Domain Question Answering") from plain-text paragraphs: one
// sentence of a paragraph is the query, the rest of the paragraph its
// positive passage. They teach a sentence-trained embedder to match a short
// text with the longer passage it belongs to, as retrieval asks.
//
//   node scripts/ict_pairs.js OUT.tsv MAX_PAIRS SEED FILE...
//
// Paragraphs are lines of 300-2000 characters with at least three sentences;
// the query is a sentence of 6-40 words. Pairs are spread evenly over the
// files, drawn with a seeded generator: the same arguments give the same file.
// Output: a TSV with the header `text1 text2 source` (train embed --pairs).
'use strict';
const fs = require('fs');
const path = require('path');

const [out, maxPairsArg, seedArg, ...files] = process.argv.slice(2);
if (!out || !maxPairsArg || !seedArg || files.length === 0) {
  process.stderr.write('usage: node scripts/ict_pairs.js OUT.tsv MAX_PAIRS SEED FILE...\n');
  process.exit(2);
}
const maxPairs = Number(maxPairsArg);
if (!Number.isInteger(maxPairs) || maxPairs < 1) {
  process.stderr.write('MAX_PAIRS must be a positive integer\n');
  process.exit(2);
}

// mulberry32: a small seeded generator, so the output does not depend on Node's Math.random.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = rng(Number(seedArg));
const clean = (s) => s.replace(/[\t\r\n]+/g, ' ').replace(/\s+/g, ' ').trim();
const words = (s) => s.split(' ').length;

function pairsOf(file) {
  const found = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const para = clean(line);
    if (para.length < 300 || para.length > 2000) continue;
    // A sentence ends at . ! or ? followed by a space and a capital or a quote.
    const sentences = para.split(/(?<=[.!?])\s+(?=[A-Z"“])/);
    if (sentences.length < 3) continue;
    const candidates = sentences.map((s, i) => i).filter((i) => words(sentences[i]) >= 6 && words(sentences[i]) <= 40);
    if (candidates.length === 0) continue;
    const q = candidates[Math.floor(random() * candidates.length)];
    const rest = sentences.filter((_, i) => i !== q).join(' ');
    found.push([sentences[q], rest]);
  }
  return found;
}

const perFile = Math.ceil(maxPairs / files.length);
const rows = ['text1\ttext2\tsource'];
for (const file of files) {
  const all = pairsOf(file);
  // A seeded partial shuffle picks perFile of them.
  for (let i = 0; i < Math.min(perFile, all.length); ++i) {
    const j = i + Math.floor(random() * (all.length - i));
    [all[i], all[j]] = [all[j], all[i]];
    rows.push(`${all[i][0]}\t${all[i][1]}\tict-${path.basename(file, '.txt')}`);
  }
}
fs.writeFileSync(out, rows.slice(0, maxPairs + 1).join('\n') + '\n');
process.stderr.write(`${rows.length - 1} pairs from ${files.length} files -> ${out}\n`);
