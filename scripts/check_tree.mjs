// Checks of the tree itself, run by scripts/test.sh; exit 1 listing each
// finding with its file and line.
//
// 1. Each default and limit listed in docs/layout.md ("Defaults and limits")
// is written once: the literal, in the context that makes it that option,
// appears in no non-test source file but the one holding it.
//
// 2. Layers point down (docs/layout.md): no include runs up a layer.
//
// 3. Every repository path cited in the code's comments and the docs exists:
// a path starting with one of the repository's top folders (engine/...,
// docs/..., ...) must name a file or folder of the checkout (a module name
// without its extension counts: index/exact_scan), and a bare Markdown file
// name must be one somewhere in it. Code is read in its comments only;
// Markdown whole.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

const root = join(dirname(new URL(import.meta.url).pathname), '..');
const tracked = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n').filter(Boolean);
const scanned = tracked.filter((f) => /\.(h|hpp|c|cpp|cc|md|sh|mjs|js|cmake|txt)$/.test(f) &&
  !f.startsWith('tests/data/') && !f.includes('node_modules/') && !f.startsWith('models/') &&
  existsSync(join(root, f)));
const markdown = new Set(tracked.filter((f) => f.endsWith('.md')).map((f) => basename(f)));

const top = ['base', 'engine', 'index', 'storage', 'database', 'cluster', 'plugin', 'eval', 'bench', 'tests', 'models', 'docs',
  'scripts', 'examples', 'include', '.ci'];
const pathRe = new RegExp(String.raw`(?<![\w./~$-])((?:${top.map((t) => t.replace('.', '\\.')).join('|')})/[\w.\-/]*[\w/])`, 'g');
const mdRe = /(?<![\w./-])([\w-]+\.md)\b/g;

// Words that look like paths but are prose ("12 docs/s"), and files that
// commands write (named in their usage lines).
const prose = new Set(['docs/s']);
const written = new Set(['tables.md', 'prune.md']);
const modules = ['', '.h', '.cpp', '.c', '.sh', '.mjs', '.js'];

function exists(file, cited) {
  for (const base of [root, join(root, dirname(file)), join(root, 'tests/data')])
    for (const ext of modules) if (existsSync(join(base, cited + ext))) return true;
  return false;
}

// The part of a line that is prose: all of a Markdown line, a code line's comment.
function commentOf(file, line, state) {
  if (file.endsWith('.md')) return line;
  if (/\.(sh|cmake|txt)$/.test(file)) {
    const at = line.search(/(^|\s)#(?![!a-z]*include)/);
    return at < 0 ? '' : line.slice(at);
  }
  let text = '';
  if (state.block) {
    const end = line.indexOf('*/');
    if (end < 0) return line;
    state.block = false;
    text = line.slice(0, end);
    line = line.slice(end + 2);
  }
  const slash = line.indexOf('//');
  const open = line.indexOf('/*');
  if (open >= 0 && (slash < 0 || open < slash)) {
    const end = line.indexOf('*/', open + 2);
    if (end < 0) state.block = true;
    return text + line.slice(open, end < 0 ? undefined : end);
  }
  return slash >= 0 && !/["'`]/.test(line.slice(0, slash).replace(/"[^"]*"|'[^']*'|`[^`]*`/g, '')) ? text + line.slice(slash) : text;
}

const problems = [];
for (const file of scanned) {
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  const state = { block: false };
  lines.forEach((raw, i) => {
    const line = commentOf(file, raw, state);
    if (!line) return;
    for (const m of line.matchAll(pathRe)) {
      const cited = m[1].replace(/\/+$/, '');
      const after = line.slice(m.index + m[0].length);
      if (/^[*<{]/.test(after) || /[*<{]|\/[A-Z]+$/.test(cited)) continue;  // a pattern (NAME, *.cpp), not a path
      if (prose.has(cited) || exists(file, cited)) continue;
      problems.push(`${file}:${i + 1}: ${cited}`);
    }
    for (const m of line.matchAll(mdRe)) {
      if (!markdown.has(m[1]) && !written.has(m[1])) problems.push(`${file}:${i + 1}: ${m[1]} (no such Markdown file in the repository)`);
    }
  });
}
// Defaults and limits: the literal as that option writes it, and its home.
const literals = [
  { what: 'most hits per search (kMaxSearchK)', re: /\b10000\b(?!\.)/, home: 'database/spec/search_spec.h' },
  { what: 'rrf k range (kMaxRrfK)', re: /rrf[^\n]*\b100000\b/i, home: 'index/fusion.h' },
  { what: 'hybrid lexical weight (kDefaultBeta)', re: /\bbeta\b[^\n]*[=(,]\s*16(\.0)?\b/, home: 'database/spec/search_spec.h' },
  { what: 'rrf k default (kDefaultRrfK)', re: /rrf[_-]?k\b[^\n]*[=(,]\s*60\b/, home: 'index/fusion.h' },
  { what: 'default prompt', re: /"prompteol"/, home: 'engine/model/model_defaults.h', also: ['engine/model/prompt.cpp'] },
  { what: 'default poolings', re: /(hs|rw)_pooling[^\n]*"last"/, home: 'engine/model/model_defaults.h' },
  { what: 'default routing', re: /routing[^\n]*=\s*"learned"/, home: 'database/spec/embedding_spec.h' },
  { what: 'padded tokens per forward pass', re: /batch_tokens[^\n]*=\s*4096\b/, home: 'engine/embed/embedder.h' },
];
const code = tracked.filter((f) => /\.(h|cpp|c)$/.test(f) && !f.startsWith('tests/') && existsSync(join(root, f)));
for (const file of code) {
  readFileSync(join(root, file), 'utf8').split('\n').forEach((line, i) => {
    for (const l of literals)
      if (file !== l.home && !(l.also || []).includes(file) && l.re.test(line))
        problems.push(`${file}:${i + 1}: ${l.what} is written here too (its home: ${l.home})`);
  });
}

// Layers: a file under `from` may not include anything under `up`.
const layers = [
  { from: ['base/'], up: ['engine/', 'index/', 'storage/', 'database/', 'cluster/', 'plugin/', 'eval/'] },
  { from: ['engine/', 'index/', 'storage/'], up: ['database/', 'cluster/', 'plugin/', 'eval/'] },
  { from: ['index/', 'storage/'], up: ['engine/'] },
  { from: ['database/'], up: ['cluster/', 'plugin/', 'eval/'] },
  { from: ['cluster/'], up: ['plugin/', 'eval/'] },
  { from: ['engine/io/', 'engine/kernels/'], up: ['engine/model/', 'engine/embed/', 'engine/train/', 'engine/analysis/'] },
  { from: ['engine/model/'], up: ['engine/embed/', 'engine/train/', 'engine/analysis/'] },
];
for (const file of code) {
  readFileSync(join(root, file), 'utf8').split('\n').forEach((line, i) => {
    const inc = line.match(/^#include "([^"]+)"/);
    if (!inc) return;
    for (const l of layers)
      if (l.from.some((f) => file.startsWith(f)) && l.up.some((u) => inc[1].startsWith(u)))
        problems.push(`${file}:${i + 1}: includes ${inc[1]}, a layer above it`);
  });
}

if (problems.length) {
  console.error(`check_tree: ${problems.length} finding(s):\n  ` + problems.join('\n  '));
  process.exit(1);
}
console.log(`check_tree: every cited path exists (${scanned.length} files), each default and limit is written once and layers point down (${code.length} files)`);
