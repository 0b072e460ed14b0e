// What the training-pair generators (ict_pairs.js, keyword_pairs.js) share:
// their command line, a seeded generator, the paragraphs they read and how
// they write the TSV.
'use strict';
const fs = require('fs');

// OUT MAX_PAIRS SEED FILE... from args; prints `usage` and exits 2 when they
// are missing or MAX_PAIRS is not a positive integer.
function readPairArgs(args, usage) {
  const [out, maxPairsArg, seedArg, ...files] = args;
  if (!out || !maxPairsArg || !seedArg || files.length === 0) {
    process.stderr.write(`usage: ${usage}\n`);
    process.exit(2);
  }
  const maxPairs = Number(maxPairsArg);
  if (!Number.isInteger(maxPairs) || maxPairs < 1) {
    process.stderr.write('MAX_PAIRS must be a positive integer\n');
    process.exit(2);
  }
  return { out, maxPairs, seed: Number(seedArg), files };
}

// mulberry32: a small seeded generator, so the output does not depend on Node's Math.random.
function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const clean = (s) => s.replace(/[\t\r\n]+/g, ' ').replace(/\s+/g, ' ').trim();

// The paragraphs of a plain-text file: its lines, whitespace collapsed, of
// 300-2000 characters.
function paragraphsOf(file) {
  return fs.readFileSync(file, 'utf8').split('\n').map(clean).filter((p) => p.length >= 300 && p.length <= 2000);
}

// Writes the header row and at most maxPairs pair rows to out.
function writePairs(out, rows, maxPairs, files) {
  fs.writeFileSync(out, rows.slice(0, maxPairs + 1).join('\n') + '\n');
  process.stderr.write(`${rows.length - 1} pairs from ${files} files -> ${out}\n`);
}

module.exports = { readPairArgs, seededRandom, paragraphsOf, writePairs };
