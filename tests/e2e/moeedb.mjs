// What every end-to-end test does with moeedb itself: write the tiny
// random-weight test model, embed with the CLI, start `moeedb serve` on a
// free port and stop it.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const bin = process.env.MOEEDB_BIN ?? path.join(root, 'build/moeedb');

// The OLMoE-shaped test model with random weights (seed 5) in `dir`.
export function initTinyModel(dir) {
  execFileSync(bin, ['model', 'init', '--config', path.join(root, 'tests/data/configs/olmoe-tiny.json'),
    '--tokenizer', path.join(root, 'tests/data/tokenizers/olmoe/tokenizer.json'), '--seed', '5', '--out', dir]);
  return dir;
}

// `moeedb embed` of the texts: [{hs, rw, tokens}].
export function cliEmbed(model, texts) {
  const out = execFileSync(bin, ['embed', '--model', model, '--threads', '1'], { input: texts.join('\n') + '\n' });
  return out.toString().trim().split('\n').map((l) => JSON.parse(l));
}

// With MOEEDB_E2E_PG set (a PostgreSQL server's URI ending in '/', e.g.
// postgresql://postgres@127.0.0.1:5433/), every server's `--db FOLDER` becomes
// a PostgreSQL database of its own (named after the folder, so a restart on
// the same folder finds its data) with FOLDER as the node's --index-dir: the
// whole suite runs over the PostgreSQL store.
function storeArgs(args) {
  const pg = process.env.MOEEDB_E2E_PG;
  const at = args.indexOf('--db');
  if (!pg || at < 0) return args;
  const folder = args[at + 1];
  const name = 'e2e_' + createHash('sha1').update(folder).digest('hex').slice(0, 16);
  const exists = execFileSync('psql', [pg + 'postgres', '-Atc', `SELECT 1 FROM pg_database WHERE datname = '${name}'`]).toString().trim();
  if (exists !== '1') execFileSync('psql', [pg + 'postgres', '-qc', `CREATE DATABASE ${name}`]);
  const out = [...args];
  out.splice(at, 2, '--db', pg + name, '--index-dir', folder);
  return out;
}

// Starts `moeedb serve --port 0 ARGS...`; resolves to {server, base} once it listens.
export function startServer(args) {
  const server = spawn(bin, ['serve', '--port', '0', '--threads', '1', ...storeArgs(args)], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('server did not start')), 120000);
    server.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/\S+)/);
      // With --qdrant-port, the Qdrant listener's line comes first.
      const q = buf.match(/qdrant REST API on (http:\/\/\S+)/);
      const c = buf.match(/chroma API on (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve({ server, base: m[1], qdrant: q ? q[1] : undefined, chroma: c ? c[1] : undefined }); }
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
}

// moeedb's own HTTP API at `base` with a Bearer key: POST with a body, else
// GET (or `method`); resolves to {status, body (parsed JSON)}.
export async function callApi(base, apiKey, p, body, method) {
  const r = await fetch(`${base}${p}`, { method: method ?? (body ? 'POST' : 'GET'),
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: await r.json() };
}

// SIGTERM, then waits: the server snapshots its indexes on the way out.
export async function stopServer(server) {
  if (!server || server.exitCode !== null) return;
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  await exited;
}

// Equal vectors: the largest difference within 1e-6 of the reference's largest entry.
export function assertClose(actual, expected, what) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  const scale = Math.max(...expected.map(Math.abs));
  let maxDiff = 0;
  for (let i = 0; i < expected.length; i++) maxDiff = Math.max(maxDiff, Math.abs(actual[i] - expected[i]));
  assert.ok(scale > 0, `${what}: reference is not all zeros`);
  assert.ok(maxDiff / scale < 1e-6, `${what}: max relative diff ${maxDiff / scale}`);
}
