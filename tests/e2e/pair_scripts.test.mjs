// The training-pair generators (scripts/ict_pairs.js, scripts/keyword_pairs.js)
// on a generated two-book corpus: the same arguments give the same bytes,
// and each pair is what the script's header promises, checked here by hand.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let work;
let books;

// Paragraphs of six sentences: common words everywhere, and per paragraph
// a few of 1500 invented rare words, so keyword queries have something to draw.
function makeBook(seed, paragraphs) {
  let a = seed;
  const next = () => ((a = (a * 1103515245 + 12345) % 2147483648) / 2147483648);
  const common = ['the', 'and', 'of', 'water', 'flows', 'into', 'river', 'while', 'people', 'watch'];
  const letter = (i) => String.fromCharCode(97 + (i % 26));
  const rare = Array.from({ length: 1500 }, (_, i) => `zq${letter(i)}${letter(Math.floor(i / 26))}${letter(Math.floor(i / 676))}`);
  const lines = [];
  for (let p = 0; p < paragraphs; ++p) {
    const sentences = [];
    for (let s = 0; s < 6; ++s) {
      const words = [];
      for (let w = 0; w < 12; ++w) words.push(next() < 0.25 ? rare[Math.floor(next() * 1500)] : common[Math.floor(next() * common.length)]);
      sentences.push(words[0][0].toUpperCase() + words[0].slice(1) + ' ' + words.slice(1).join(' ') + '.');
    }
    lines.push(sentences.join(' '));
  }
  return lines.join('\n') + '\n';
}

const run = (script, args) => execFileSync('node', [path.join(root, 'scripts', script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
const rows = (file) => readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => l.split('\t'));

before(() => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-pairs-'));
  books = [1, 2].map((seed) => {
    const file = path.join(work, `book${seed}.txt`);
    writeFileSync(file, makeBook(seed * 7919, 120));
    return file;
  });
});
after(() => rmSync(work, { recursive: true, force: true }));

test('ict_pairs: a sentence of a paragraph against the rest of it, reproducibly', () => {
  const out = path.join(work, 'ict.tsv');
  run('ict_pairs.js', [out, '50', '3', ...books]);
  const first = readFileSync(out);
  run('ict_pairs.js', [out, '50', '3', ...books]);
  assert.deepEqual(readFileSync(out), first);
  const [header, ...pairs] = rows(out);
  assert.deepEqual(header, ['text1', 'text2', 'source']);
  assert.equal(pairs.length, 50);
  const paragraphs = books.flatMap((b) => readFileSync(b, 'utf8').split('\n'));
  for (const [query, rest, source] of pairs) {
    assert.match(source, /^ict-book[12]$/);
    assert.ok(!rest.includes(query), 'the query sentence is taken out of its passage');
    const para = paragraphs.find((p) => p.includes(query));
    assert.ok(para, 'the query is a sentence of a paragraph');
    assert.equal(para.replace(query, '').replace(/\s+/g, ' ').trim(), rest);
  }
});

test('keyword_pairs: rare words of a paragraph in its order, and hard negatives from the same book', () => {
  const plain = path.join(work, 'kw.tsv'), hard = path.join(work, 'kwhn.tsv');
  run('keyword_pairs.js', [plain, '60', '5', ...books]);
  run('keyword_pairs.js', ['--hard-negatives', hard, '60', '5', ...books]);
  const again = path.join(work, 'kw2.tsv');
  run('keyword_pairs.js', [again, '60', '5', ...books]);
  assert.deepEqual(readFileSync(again), readFileSync(plain));

  const texts = books.map((b) => readFileSync(b, 'utf8').trimEnd().split('\n'));
  const all = texts.flat();
  const df = new Map();
  for (const p of all) for (const w of new Set(p.toLowerCase().match(/[a-z]{3,}/g))) df.set(w, (df.get(w) || 0) + 1);
  const idf = (w) => Math.log(all.length / df.get(w));

  const [h1, ...pairs] = rows(plain);
  assert.deepEqual(h1, ['text1', 'text2', 'source']);
  assert.equal(pairs.length, 60);
  for (const [query, passage] of pairs) {
    const words = query.split(' ');
    assert.ok(words.length >= 3 && words.length <= 8, query);
    assert.equal(new Set(words).size, words.length, 'distinct words');
    const lower = passage.toLowerCase();
    let last = -1;
    for (const w of words) {
      assert.ok(df.get(w) <= 0.02 * all.length, `${w} is not a common word`);
      const at = lower.search(new RegExp(`(?<![a-z])${w}(?![a-z])`));
      assert.ok(at > last, `${w} appears, after the query's previous word`);
      last = at;
    }
  }

  const [h2, ...triplets] = rows(hard);
  assert.deepEqual(h2, ['anchor', 'entailment', 'contradiction', 'source']);
  assert.deepEqual(triplets.map((t) => [t[0], t[1]]), pairs.map((p) => [p[0], p[1]]), 'the same pairs, one more column');
  let overlapping = 0;
  for (const [query, positive, negative, source] of triplets) {
    const book = texts[source.endsWith('book1') ? 0 : 1];
    assert.ok(book.includes(negative) && negative !== positive, 'the negative is another paragraph of the same book');
    const cover = (p) => {
      const have = new Set(p.toLowerCase().match(/[a-z]{3,}/g));
      return query.split(' ').reduce((s, w) => s + (have.has(w) ? idf(w) : 0), 0);
    };
    const best = Math.max(...book.filter((p) => p !== positive).map(cover));
    assert.ok(Math.abs(cover(negative) - best) < 1e-9, `the negative covers the query best (${cover(negative)} vs ${best})`);
    overlapping += best > 0 ? 1 : 0;
  }
  assert.ok(overlapping >= triplets.length / 2, `${overlapping} negatives share a query word`);
});
