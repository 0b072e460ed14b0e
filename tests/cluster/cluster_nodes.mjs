// What the cluster tests share: moeedb nodes over one PostgreSQL database
// and one etcd on this machine, HTTP calls to them, etcd's keys read back,
// and the STS-B sample's sentences as documents and queries.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../soak/soak_util.mjs';

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One HTTP call to a node on this machine: { status, json (null if not JSON), text }.
export async function call(port, method, route, body, timeoutMs = 60000) {
  const r = await fetch(`http://127.0.0.1:${port}${route}`, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

// The etcd keys under a prefix, decoded (the v3 JSON gateway at `etcd`, host:port).
export async function etcdList(etcd, prefix) {
  const b64 = (s) => Buffer.from(s).toString('base64');
  const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
  const r = await fetch(`http://${etcd}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: b64(prefix), range_end: b64(end) }) });
  const j = await r.json();
  return (j.kvs || []).map((kv) => ({ key: Buffer.from(kv.key, 'base64').toString(), value: Buffer.from(kv.value || '', 'base64').toString() }));
}

// The STS-B sample (tests/data): its first column's distinct sentences as
// documents, its second column as queries.
export function sentences() {
  const lines = fs.readFileSync(path.join(ROOT, 'tests/data/stsb-sample.csv'), 'utf8').split('\n');
  const docs = [], queries = [], seen = new Set();
  for (const line of lines) {
    const cols = line.split(',');
    if (cols.length < 3) continue;
    if (!seen.has(cols[0])) { seen.add(cols[0]); docs.push(cols[0]); }
    queries.push(cols[1]);
  }
  return { docs, queries };
}

// A fresh database on the PostgreSQL server at `pg` (its URI names the
// postgres database): { uri, drop() }.
export function freshDatabase(pg, name) {
  execFileSync('psql', [pg, '-v', 'ON_ERROR_STOP=1', '-qc', `CREATE DATABASE ${name}`], { stdio: 'pipe' });
  return {
    uri: pg.replace(/\/postgres(\?|$)/, `/${name}$1`),
    drop() {
      try { execFileSync('psql', [pg, '-qc', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`], { stdio: 'pipe' }); } catch { /* best effort */ }
    },
  };
}

// Starts node n`i` of cluster `cluster` over store `uri`, its folder and log
// under `dir` (the log appended to): { port, child }.
export async function startNode({ bin, model, uri, etcd, cluster, dir, extra = [] }, i, port) {
  port ??= await freePort();
  const log = fs.openSync(path.join(dir, `node${i}.log`), 'a');
  const child = spawn(bin, ['serve', '--db', uri, '--index-dir', path.join(dir, `node${i}`), '--port', String(port),
    '--model', model, '--threads', '1', '--workers', '1', '--etcd', etcd, '--cluster', cluster, '--node-id', `n${i}`, ...extra],
  { stdio: ['ignore', log, log] });
  return { port, child };
}

// Waits until node `n` (n`i`, its log under `dir`) answers /health; `fail`
// is called when it exits or does not start within `timeoutMs`.
export async function waitHealthy(n, i, dir, fail, timeoutMs = 120000) {
  for (const t0 = Date.now(); ;) {
    if (n.child.exitCode !== null) fail(`node ${i} exited: ${fs.readFileSync(path.join(dir, `node${i}.log`), 'utf8').slice(-3000)}`);
    try { if ((await call(n.port, 'GET', '/health', undefined, 1000)).status === 200) return; } catch { /* starting */ }
    if (Date.now() - t0 > timeoutMs) fail(`node ${i} did not start`);
    await sleep(100);
  }
}

// Starts `count` nodes n0..n{count-1} (startNode) and waits until each
// answers /health. `fail(message)` is called (and throws) when one exits or
// does not start.
export async function startNodes({ bin, model, uri, etcd, cluster, dir, count, fail, extra = [] }) {
  const nodes = [];
  for (let i = 0; i < count; i++) nodes.push(await startNode({ bin, model, uri, etcd, cluster, dir, extra }, i));
  for (const [i, n] of nodes.entries()) await waitHealthy(n, i, dir, fail);
  return nodes;
}

// Stops the nodes: SIGTERM, then SIGKILL for any still running 1.5 s later.
export async function stopNodes(nodes) {
  for (const n of nodes) n.child.kill('SIGTERM');
  await sleep(1500);
  for (const n of nodes) if (n.child.exitCode === null) n.child.kill('SIGKILL');
}
