#!/usr/bin/env node
// Keyword-query pairs from plain-text paragraphs: a handful of a paragraph's
// rarer words, in the order they appear, is the query; the paragraph is its
// positive passage. Sentence pairs teach meaning; these teach an embedder to
// keep the identity of content words through its layers, which keyword-led
// retrieval (Cranfield's queries share their key terms with the relevant
// abstracts) rewards and random bidirectional layers get for free.
//
//   node scripts/keyword_pairs.js [--hard-negatives] OUT.tsv MAX_PAIRS SEED FILE...
//
// Paragraphs are lines of 300-2000 characters (read by text_pairs.js, as for
// ict_pairs.js). Words are lower-cased runs of letters of 3 or more; a word is a
// candidate when it occurs in at most 2 % of all paragraphs (the common ones
// carry no topic). A query is 3-8 distinct candidates of its paragraph,
// drawn without replacement with weight idf = ln(N / df). Pairs are spread
// evenly over the files with a seeded generator: the same arguments give the
// same file. Output: a TSV `text1 text2 source` (train embed --pairs).
// With --hard-negatives each pair also has a negative: the other paragraph of
// the same file whose words cover the query best (summed idf of the query
// words it holds, ties to the first), as BM25 negatives are drawn for
// retrieval training; the columns are then `anchor entailment contradiction
// source`. In-batch negatives come from other books and differ in topic;
// these differ in a word or two, which is what a one-domain collection asks.
'use strict';
const path = require('path');
const { readPairArgs, seededRandom, paragraphsOf, writePairs } = require('./text_pairs');

const argv = process.argv.slice(2);
const hardNegatives = argv[0] === '--hard-negatives';
const { out, maxPairs, seed, files } = readPairArgs(hardNegatives ? argv.slice(1) : argv,
  'node scripts/keyword_pairs.js [--hard-negatives] OUT.tsv MAX_PAIRS SEED FILE...');
const random = seededRandom(seed);
const wordsOf = (s) => s.toLowerCase().match(/[a-z]{3,}/g) || [];

const paragraphs = files.map(paragraphsOf);
const df = new Map();
let total = 0;
for (const list of paragraphs)
  for (const p of list) {
    ++total;
    for (const w of new Set(wordsOf(p))) df.set(w, (df.get(w) || 0) + 1);
  }

function queryOf(p) {
  const order = [...new Set(wordsOf(p))].filter((w) => df.get(w) <= 0.02 * total);
  const k = 3 + Math.floor(random() * 6);
  if (order.length < k) return null;
  const weight = order.map((w) => Math.log(total / df.get(w)));
  const picked = new Set();
  while (picked.size < k) {
    let r = random() * weight.reduce((a, b) => a + b, 0);
    let i = 0;
    while (i < order.length - 1 && (r -= weight[i]) > 0) ++i;
    picked.add(i);
    weight[i] = 0;
  }
  return [...picked].sort((a, b) => a - b).map((i) => order[i]).join(' ');
}

// The paragraph of `list` other than `self` whose words cover `query` best.
function hardNegative(list, postings, self, query) {
  const score = new Map();
  for (const w of query.split(' '))
    for (const i of postings.get(w) || [])
      if (i !== self) score.set(i, (score.get(i) || 0) + Math.log(total / df.get(w)));
  let best = -1, bestScore = -1;
  for (const [i, v] of score) if (v > bestScore || (v === bestScore && i < best)) (best = i), (bestScore = v);
  return best >= 0 ? best : (self + 1) % list.length;
}

const perFile = Math.ceil(maxPairs / files.length);
const rows = [hardNegatives ? 'anchor\tentailment\tcontradiction\tsource' : 'text1\ttext2\tsource'];
files.forEach((file, f) => {
  const all = paragraphs[f];
  // A seeded partial shuffle picks up to perFile paragraphs that have a query.
  const picked = [];
  for (let i = 0; i < all.length && picked.length < perFile; ++i) {
    const j = i + Math.floor(random() * (all.length - i));
    [all[i], all[j]] = [all[j], all[i]];
    const q = queryOf(all[i]);
    if (q !== null) picked.push([q, i]);
  }
  const postings = new Map();  // word -> paragraphs of this file that hold it
  if (hardNegatives)
    all.forEach((p, i) => {
      for (const w of new Set(wordsOf(p))) (postings.get(w) || postings.set(w, []).get(w)).push(i);
    });
  for (const [q, i] of picked) {
    const neg = hardNegatives ? `\t${all[hardNegative(all, postings, i, q)]}` : '';
    rows.push(`${q}\t${all[i]}${neg}\tkeywords-${path.basename(file, '.txt')}`);
  }
});
writePairs(out, rows, maxPairs, files.length);
