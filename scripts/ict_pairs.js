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
const path = require('path');
const { readPairArgs, seededRandom, paragraphsOf, writePairs } = require('./text_pairs');

const { out, maxPairs, seed, files } = readPairArgs(process.argv.slice(2), 'node scripts/ict_pairs.js OUT.tsv MAX_PAIRS SEED FILE...');
const random = seededRandom(seed);
const words = (s) => s.split(' ').length;

function pairsOf(file) {
  const found = [];
  for (const para of paragraphsOf(file)) {
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
writePairs(out, rows, maxPairs, files.length);
