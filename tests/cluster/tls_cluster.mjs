// Two moeedb nodes and an etcd that speak only TLS, with the test-only
// certificates of tests/data/tls (made by its make.sh): etcd checks client
// certificates (--client-cert-auth), the nodes serve https and ask each
// other's shards over it. A collection of 2 shards x 1 replica is placed one
// shard per node, so a search on either node needs the other's shard: every
// document is found from both. `moeedb cluster status` reads etcd with the
// TLS flags and fails without them; plain HTTP and a client trusting another
// CA get no answer; a node trusting another CA cannot join.
//
//   node tests/cluster/tls_cluster.mjs --pg URI [--bin build/moeedb] [--model models/moeedb-tiny]
// ctest runs it with its throwaway PostgreSQL (tests/CMakeLists.txt).
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { arg, freePort } from '../soak/soak_util.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const PG = arg('pg', process.env.MOEEDB_TEST_PG_DIR ? fs.readFileSync(`${process.env.MOEEDB_TEST_PG_DIR}/uri`, 'utf8').trim() : '');
const BIN = path.resolve(arg('bin', path.join(ROOT, 'build/moeedb')));
const MODEL = path.resolve(arg('model', path.join(ROOT, 'models/moeedb-tiny')));
const TLS = path.join(ROOT, 'tests/data/tls');
const CA = path.join(TLS, 'ca.pem'), CERT = path.join(TLS, 'node.pem'), KEY = path.join(TLS, 'node-key.pem');
const OTHER_CA = path.join(TLS, 'other-ca.pem');
const DOCS = 40;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function fail(message) {
  console.error(`tls_cluster: FAILED: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

// One HTTPS request to 127.0.0.1:port, trusting `ca`; rejects on a TLS or socket error.
function call(port, method, route, body, { ca = CA, cert, key, timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request({
      host: '127.0.0.1', port, method, path: route, ca: fs.readFileSync(ca),
      cert: cert && fs.readFileSync(cert), key: key && fs.readFileSync(key), timeout: timeoutMs,
      headers: { 'content-type': 'application/json', ...(data ? { 'content-length': Buffer.byteLength(data) } : {}) },
    }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, json, text });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

async function refused(what, promise) {
  try {
    const r = await promise;
    fail(`${what} was answered: ${r.status}`);
  } catch (e) {
    if (e.message.startsWith(`${what} was answered`)) throw e;
    console.log(`${what}: refused (${e.code || e.message})`);
  }
}

function plainHttp(port) {
  return fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(10000) });
}

function sentences() {
  const lines = fs.readFileSync(path.join(ROOT, 'tests/data/stsb-sample.csv'), 'utf8').split('\n');
  const out = [], seen = new Set();
  for (const line of lines) {
    const text = line.split(',')[0];
    if (text && !seen.has(text) && text !== 'sentence1') { seen.add(text); out.push(text); }
    if (out.length === DOCS) break;
  }
  return out;
}

async function main() {
  if (!PG) fail('needs --pg URI (or ctest\'s MOEEDB_TEST_PG_DIR)');
  for (const f of [CA, CERT, KEY, OTHER_CA]) if (!fs.existsSync(f)) fail(`no ${f} (tests/data/tls/make.sh makes it)`);
  // The key files' mode is not kept by git; etcd and OpenSSL read them either way.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'moeedb-tls-'));
  const dbName = `tls_${process.pid}`;
  execFileSync('psql', [PG, '-v', 'ON_ERROR_STOP=1', '-qc', `CREATE DATABASE ${dbName}`], { stdio: 'pipe' });
  const uri = PG.replace(/\/postgres(\?|$)/, `/${dbName}$1`);
  const cluster = `tls${process.pid}`;
  const children = [];
  try {
    // etcd on TLS only, checking its clients' certificates.
    const etcdPort = await freePort(), peerPort = await freePort();
    const etcdUrl = `https://127.0.0.1:${etcdPort}`;
    const etcdLog = fs.openSync(path.join(dir, 'etcd.log'), 'w');
    const etcd = spawn('etcd', ['--name', 'tls', '--data-dir', path.join(dir, 'etcd'),
      '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', `http://127.0.0.1:${peerPort}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
      '--initial-cluster', `tls=http://127.0.0.1:${peerPort}`,
      '--cert-file', CERT, '--key-file', KEY, '--client-cert-auth', '--trusted-ca-file', CA],
    { stdio: ['ignore', etcdLog, etcdLog] });
    children.push(etcd);
    const endpoint = `127.0.0.1:${etcdPort}`;
    for (let t = 0; ; t++) {
      if (etcd.exitCode !== null) fail(`etcd exited: ${fs.readFileSync(path.join(dir, 'etcd.log'), 'utf8')}`);
      try {
        if ((await call(etcdPort, 'POST', '/v3/kv/range', { key: 'AA==' }, { cert: CERT, key: KEY, timeoutMs: 1000 })).status === 200) break;
      } catch { /* starting */ }
      if (t > 100) fail('etcd did not start');
      await sleep(200);
    }
    // etcd refuses a client without a certificate.
    await refused('etcd asked without a client certificate', call(etcdPort, 'POST', '/v3/kv/range', { key: 'AA==' }, { timeoutMs: 5000 }));

    const tlsFlags = ['--tls-cert', CERT, '--tls-key', KEY, '--tls-ca', CA];
    const startNode = async (i, extra = tlsFlags) => {
      const port = await freePort();
      const log = path.join(dir, `node${i}.log`);
      const child = spawn(BIN, ['serve', '--db', uri, '--index-dir', path.join(dir, `node${i}`), '--port', String(port),
        '--model', MODEL, '--threads', '1', '--workers', '1', '--etcd', endpoint, '--cluster', cluster, '--node-id', `n${i}`,
        ...extra], { stdio: ['ignore', fs.openSync(log, 'w'), fs.openSync(log, 'a')] });
      children.push(child);
      return { port, child, log };
    };
    const nodes = [await startNode(0), await startNode(1)];
    for (const [i, n] of nodes.entries()) {
      for (let t = 0; ; t++) {
        if (n.child.exitCode !== null) fail(`node ${i} exited: ${fs.readFileSync(n.log, 'utf8')}`);
        try { if ((await call(n.port, 'GET', '/health', undefined, { timeoutMs: 1000 })).status === 200) break; } catch { /* starting */ }
        if (t > 600) fail(`node ${i} did not start`);
        await sleep(200);
      }
    }
    const [a, b] = nodes;
    const put = await call(a.port, 'PUT', '/collections/t', { shards: 2, replicas: 1 });
    if (put.status !== 201) fail(`PUT t: ${put.status} ${put.text}`);
    const texts = sentences();
    const docs = texts.map((text, i) => ({ id: `doc-${i}`, text }));
    const up = await call(a.port, 'POST', '/collections/t/documents', { documents: docs }, { timeoutMs: 300000 });
    if (up.status !== 200) fail(`upsert: ${up.status} ${up.text}`);

    // The placement settles, read through the CLI over TLS: one ready replica of each shard, on different nodes.
    const status = (flags) => spawnSync(BIN, ['cluster', 'status', '--etcd', endpoint, '--cluster', cluster, ...flags], { encoding: 'utf8' });
    for (let t = 0; ; t++) {
      const s = status(tlsFlags);
      if (s.status !== 0) fail(`cluster status over TLS: ${s.stderr}`);
      const coll = JSON.parse(s.stdout).collections.find((c) => c.name === 't');
      const holders = coll ? coll.shard_list.map((sh) => sh.replicas.filter((r) => r.state === 'ready').map((r) => r.node)) : [];
      if (holders.length === 2 && holders.every((h) => h.length === 1) && holders[0][0] !== holders[1][0]) {
        console.log(`placement: shard 0 on ${holders[0][0]}, shard 1 on ${holders[1][0]}`);
        break;
      }
      if (t > 300) fail(`placement did not settle: ${s.stdout}`);
      await sleep(200);
    }
    const noTls = status([]);
    if (noTls.status === 0) fail('cluster status read a TLS etcd without the TLS flags');
    console.log(`cluster status without --tls-ca: exit ${noTls.status} (${noTls.stderr.trim().split('\n')[0].slice(0, 120)})`);

    // Every document from either node: half the shards are the other node's, asked over https.
    for (const n of nodes) {
      const r = await call(n.port, 'POST', '/collections/t/search', { query: texts[3], k: DOCS, exact: true });
      if (r.status !== 200) fail(`search on ${n.port}: ${r.status} ${r.text}`);
      const ids = new Set(r.json.hits.map((h) => h.id));
      if (ids.size !== DOCS || r.json.partial) fail(`search on ${n.port} found ${ids.size} of ${DOCS}: ${r.text.slice(0, 300)}`);
      if (r.json.hits[0].id !== 'doc-3') fail(`search on ${n.port}: top hit ${r.json.hits[0].id}, not doc-3`);
      for (const h of r.json.hits) if (h.text !== texts[Number(h.id.slice(4))]) fail(`hit ${h.id} has another text: ${h.text}`);
    }
    console.log(`both nodes found all ${DOCS} documents, each over the other's shard`);

    await refused('plain HTTP to a TLS node', plainHttp(b.port));
    await refused('a client trusting another CA', call(b.port, 'GET', '/health', undefined, { ca: OTHER_CA, timeoutMs: 5000 }));

    // A node that trusts another CA cannot reach etcd: it says so and exits.
    const stranger = await startNode(2, ['--tls-cert', CERT, '--tls-key', KEY, '--tls-ca', OTHER_CA]);
    for (let t = 0; stranger.child.exitCode === null; t++) {
      if (t > 300) fail('a node trusting another CA did not give up');
      await sleep(200);
    }
    const said = fs.readFileSync(stranger.log, 'utf8');
    if (stranger.child.exitCode === 0 || !/etcd/.test(said)) fail(`a node trusting another CA: exit ${stranger.child.exitCode}: ${said}`);
    console.log(`a node trusting another CA: exit ${stranger.child.exitCode} (${said.trim().split('\n').pop().slice(0, 160)})`);
    console.log('tls_cluster: ok');
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await sleep(1000);
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    try { execFileSync('psql', [PG, '-qc', `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`], { stdio: 'pipe' }); } catch { /* best effort */ }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  if (!process.exitCode) {
    console.error(`tls_cluster: FAILED: ${e.stack || e}`);
    process.exitCode = 1;
  }
});
