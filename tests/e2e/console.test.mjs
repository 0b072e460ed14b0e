// The web console in a real browser: Debian's Chromium, driven headless by
// playwright-core, against `moeedb serve` with the embedded default model
// and an API key. Everything the console shows is checked against the
// collections API's own answer to the same request.
// Screenshots go to build/e2e-artifacts/ (or $MOEEDB_ARTIFACTS).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { root, startServer, stopServer } from './moeedb.mjs';

const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const artifacts = process.env.MOEEDB_ARTIFACTS ?? path.join(root, 'build/e2e-artifacts');
const apiKey = 'console-key';
const secretText = 'The vault code is kept in the blue folder.';
const docs = [
  ['d01', 'A dog runs through the snow.', 'animals'],
  ['d02', 'Two puppies are playing with a ball in the yard.', 'animals'],
  ['d03', 'A cat sleeps on a warm windowsill.', 'animals'],
  ['d04', 'The horse jumped over the fence at the show.', 'animals'],
  ['d05', 'The stock market fell sharply on Tuesday.', 'money'],
  ['d06', 'The central bank raised interest rates again.', 'money'],
  ['d07', 'Investors sold shares after the earnings report.', 'money'],
  ['d08', 'A man plays the guitar on stage.', 'music'],
  ['d09', 'The orchestra performed a symphony by Beethoven.', 'music'],
  ['d10', 'A girl is practising the violin in her room.', 'music'],
  ['d11', 'Heavy rain flooded the streets of the city.', 'weather'],
  ['d12', 'Snow fell all night and covered the mountains.', 'weather'],
];
const query = 'a dog playing in the snow';
let server;
let base;
let work;
let browser;
let page;
const pageErrors = [];

async function call(method, p, body, key = apiKey) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const res = await fetch(base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: (res.headers.get('content-type') || '').startsWith('application/json') ? JSON.parse(text) : text };
}

// The hits the console shows: ids, scores, parts and the bar segments' geometry.
async function shownHits() {
  return page.$$eval('#hits > li', (lis) => lis.map((li) => ({
    id: li.dataset.id,
    score: Number(li.dataset.score),
    score_hs: Number(li.dataset.scoreHs),
    score_rw: Number(li.dataset.scoreRw),
    parts: JSON.parse(li.dataset.parts),
    text: li.querySelector('.hit-text').textContent,
    segs: [...li.querySelectorAll('.seg')].map((s) => ({
      signal: s.dataset.signal, left: parseFloat(s.style.left), width: parseFloat(s.style.width) })),
  })));
}

// Waits until the console shows the answer to the request its controls describe.
async function settled(expect) {
  await page.waitForFunction((want) => {
    const hits = document.getElementById('hits');
    if (hits.getAttribute('aria-busy') !== 'false' || !hits.dataset.request) return false;
    const got = JSON.parse(hits.dataset.request);
    return Object.entries(want).every(([k, v]) => JSON.stringify(got[k]) === JSON.stringify(v));
  }, expect, { timeout: 20000 });
  return JSON.parse(await page.getAttribute('#hits', 'data-request'));
}

// The console's hits equal the API's answer to the same request, and each
// bar segment is |part| / span of the list's scale, stacked from the zero line.
async function assertMatchesApi(collection, request) {
  const api = await call('POST', `/collections/${collection}/search`, request);
  assert.equal(api.status, 200);
  const shown = await shownHits();
  assert.deepEqual(shown.map((h) => h.id), api.body.hits.map((h) => h.id), 'ranking');
  let maxPos = 0;
  let maxNeg = 0;
  for (const h of api.body.hits) {
    const v = Object.values(h.parts);
    maxPos = Math.max(maxPos, v.filter((p) => p > 0).reduce((a, b) => a + b, 0));
    maxNeg = Math.max(maxNeg, -v.filter((p) => p < 0).reduce((a, b) => a + b, 0));
  }
  const span = maxPos + maxNeg || 1;
  api.body.hits.forEach((h, i) => {
    const s = shown[i];
    assert.equal(s.score, h.score, `${h.id}: score`);
    assert.equal(s.score_hs, h.score_hs, `${h.id}: score_hs`);
    assert.equal(s.score_rw, h.score_rw, `${h.id}: score_rw`);
    assert.deepEqual(s.parts, h.parts, `${h.id}: parts`);
    assert.equal(s.text, h.text);
    const sum = Object.values(h.parts).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - h.score) <= 1e-5 * Math.max(1, Math.abs(h.score)), `${h.id}: parts sum to the score`);
    for (const seg of s.segs) {
      const want = (Math.abs(h.parts[seg.signal]) / span) * 100;
      assert.ok(Math.abs(seg.width - want) < 1e-3, `${h.id} ${seg.signal}: width ${seg.width}% vs ${want}%`);
    }
  });
  return { api: api.body.hits, shown };
}

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'moeedb-console-'));
  mkdirSync(artifacts, { recursive: true });
  ({ server, base } = await startServer(['--db', path.join(work, 'db'), '--api-key', apiKey]));
  // Data that must stay hidden until the key is given.
  assert.equal((await call('PUT', '/collections/private-notes', {})).status, 201);
  assert.equal((await call('POST', '/collections/private-notes/documents', { documents: [{ id: 'secret', text: secretText }] })).status, 200);
  browser = await chromium.launch({ executablePath: browserPath, headless: true,
    args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [] });
  page = await browser.newPage({ viewport: { width: 1100, height: 1400 } });
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  if (browser) await browser.close();
  await stopServer(server);
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the console is served without the key, and without it shows a prompt and no data', async () => {
  const html = await call('GET', '/console', undefined, null);
  assert.equal(html.status, 200);
  assert.match(html.body, /<title>moeedb console<\/title>/);
  assert.equal((await call('GET', '/console/nope.js', undefined, null)).status, 404);
  await page.goto(base + '/console');
  await page.waitForSelector('#page-auth:not([hidden])');
  assert.equal(await page.isVisible('#nav'), false);
  const text = await page.innerText('body');
  assert.match(text, /API key needed/);
  assert.ok(!text.includes('private-notes') && !text.includes(secretText), 'no data before the key');
  // A wrong key: a clear message, still no data.
  await page.fill('#api-key', 'wrong');
  await page.press('#api-key', 'Enter');
  await page.waitForFunction(() => document.getElementById('auth-error').textContent.includes('refused'));
  assert.ok(!(await page.innerText('body')).includes('private-notes'));
  assert.equal(await page.isVisible('#page-collections'), false);
});

test('with the key: collections, and creating one from the console', async () => {
  await page.fill('#api-key', apiKey);
  await page.press('#api-key', 'Enter');
  await page.waitForSelector('#collections-table tr[data-name="private-notes"]');
  const info = await call('GET', '/info');
  assert.ok((await page.textContent('#server-info')).includes(info.body.model_id));
  // A node outside a cluster: GET /cluster is 404 and the console offers no cluster page.
  const cluster = await call('GET', '/cluster');
  assert.equal(cluster.status, 404);
  assert.match(cluster.body.error.message, /not part of a cluster/);
  assert.equal(await page.isVisible('#nav-cluster'), false);
  const row = await page.innerText('#collections-table tr[data-name="private-notes"]');
  assert.match(row, /\b1\b/); // its one document
  await page.fill('#create-name', 'field-notes');
  await page.selectOption('#create-language', 'english');
  await page.click('#create-form button[type=submit]');
  await page.waitForSelector('#collections-table tr[data-name="field-notes"]');
  const spec = await call('GET', '/collections/field-notes');
  assert.equal(spec.status, 200);
  assert.equal(spec.body.spec.lexical.enabled, true);
  assert.equal(spec.body.spec.lexical.language, 'english');
  assert.equal(spec.body.spec.index.hs.kind, 'flat');
  await page.screenshot({ path: path.join(artifacts, 'console-collections.png') });
  // A bad name gets the API's message.
  await page.fill('#create-name', 'a/b');
  await page.click('#create-form button[type=submit]');
  await page.waitForFunction(() => document.getElementById('create-error').textContent.length > 0);
  assert.match(await page.textContent('#create-error'), /path separators \('\/'/);
});

test('documents ingested through the API: paged, got by id, deleted', async () => {
  const up = await call('POST', '/collections/field-notes/documents',
    { documents: docs.map(([id, text, topic]) => ({ id, text, metadata: { topic } })) });
  assert.equal(up.status, 200);
  assert.equal(up.body.upserted, docs.length);
  await page.goto(base + '/console#documents/field-notes');
  await page.selectOption('#documents-limit', '10');
  await page.waitForFunction(() => document.querySelectorAll('#documents-table tbody tr').length === 10);
  const first = await page.$$eval('#documents-table tbody tr', (rows) => rows.map((r) => r.dataset.id));
  const apiFirst = await call('GET', '/collections/field-notes/documents?limit=10');
  assert.deepEqual(first, apiFirst.body.documents.map((d) => d.id));
  assert.equal(await page.isDisabled('#documents-next'), false);
  await page.click('#documents-next');
  await page.waitForFunction(() => document.querySelectorAll('#documents-table tbody tr').length === 2);
  const second = await page.$$eval('#documents-table tbody tr', (rows) => rows.map((r) => r.dataset.id));
  const apiSecond = await call('GET', `/collections/field-notes/documents?limit=10&after=${apiFirst.body.next_after}`);
  assert.deepEqual(second, apiSecond.body.documents.map((d) => d.id));
  assert.equal(apiSecond.body.next_after, null);
  assert.equal(await page.isDisabled('#documents-next'), true);
  assert.match(await page.textContent('#documents-summary'), /11–12 of 12/);
  await page.screenshot({ path: path.join(artifacts, 'console-documents.png') });

  await page.fill('#get-id', 'd05');
  await page.press('#get-id', 'Enter');
  await page.waitForSelector('#get-json');
  const got = JSON.parse(await page.textContent('#get-json'));
  assert.deepEqual(got, (await call('GET', '/collections/field-notes/documents/d05')).body);

  // Delete d12 (on this page) after the confirmation.
  page.once('dialog', (d) => { assert.match(d.message(), /Delete document "d12"/); d.accept(); });
  await page.click('#documents-table tr[data-id="d12"] button');
  await page.waitForFunction(() => !document.querySelector('#documents-table tr[data-id="d12"]'));
  assert.equal((await call('GET', '/collections/field-notes/documents/d12')).status, 404);
  // Dismissing the confirmation deletes nothing.
  page.once('dialog', (d) => d.dismiss());
  await page.click('#documents-table tr[data-id="d11"] button');
  assert.equal((await call('GET', '/collections/field-notes/documents/d11')).status, 200);
});

test('search: the hits and bars equal the API answer, and follow the alpha slider', async () => {
  // Keyboard: from the page top, Tab reaches the Search link; Enter opens it.
  await page.goto(base + '/console#collections');
  await page.waitForSelector('#collections-table tr[data-name="field-notes"]');
  let onSearch = false;
  for (let i = 0; i < 10 && !onSearch; i++) {
    await page.keyboard.press('Tab');
    onSearch = await page.evaluate(() => document.activeElement && document.activeElement.textContent === 'Search');
  }
  assert.ok(onSearch, 'Tab reaches the Search link');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#page-search:not([hidden])');
  await page.selectOption('#search-collection', 'field-notes');
  await page.waitForFunction(() => location.hash === '#search/field-notes');

  // The rankings at the two ends differ, so the slider must move the list.
  const low = await call('POST', '/collections/field-notes/search', { query, k: 5, mode: 'fused', alpha: 0.1 });
  const high = await call('POST', '/collections/field-notes/search', { query, k: 5, mode: 'fused', alpha: 1 });
  assert.notDeepEqual(low.body.hits.map((h) => h.id), high.body.hits.map((h) => h.id), 'alpha changes this ranking');

  await page.fill('#search-k', '5');
  await page.fill('#alpha', '0.1');
  await page.fill('#search-query', query);
  await page.press('#search-query', 'Enter');
  const r1 = await settled({ query, k: 5, mode: 'fused', alpha: 0.1 });
  const a = await assertMatchesApi('field-notes', r1);
  assert.deepEqual(a.shown.map((h) => h.id), low.body.hits.map((h) => h.id));

  // Move the slider with the keyboard: 20 steps of 0.01 re-run the query as it moves.
  await page.focus('#alpha');
  for (let i = 0; i < 20; i++) await page.keyboard.press('ArrowRight');
  assert.equal(await page.textContent('#alpha-value'), '0.30');
  const r2 = await settled({ alpha: 0.3 });
  await assertMatchesApi('field-notes', r2);

  await page.fill('#alpha', '1');
  const r3 = await settled({ alpha: 1 });
  const c = await assertMatchesApi('field-notes', r3);
  assert.deepEqual(c.shown.map((h) => h.id), high.body.hits.map((h) => h.id));
  // The RW segments grew with alpha (the same hit, ten times the weight).
  const rwWidth = (hits, id) => hits.find((h) => h.id === id).segs.find((s) => s.signal === 'rw').width;
  const top = c.shown[0].id;
  if (a.shown.some((h) => h.id === top)) assert.ok(rwWidth(c.shown, top) > rwWidth(a.shown, top));
  await page.screenshot({ path: path.join(artifacts, 'console-search.png'), fullPage: true });
});

test('search: filter validation, hybrid fusion weights, and the alpha sweep', async () => {
  await page.fill('#search-filter', '{"topic": ');
  await page.waitForFunction(() => document.getElementById('filter-error').textContent.includes('not valid JSON'));
  assert.equal(await page.getAttribute('#search-filter', 'aria-invalid'), 'true');
  await page.fill('#search-filter', '{"topic": "animals"}');
  const rf = await settled({ filter: { topic: 'animals' } });
  const f = await assertMatchesApi('field-notes', rf);
  assert.ok(f.api.length > 0 && f.api.every((h) => h.metadata.topic === 'animals'));
  await page.fill('#search-filter', '');
  await settled({ filter: undefined });

  await page.selectOption('#search-mode', 'hybrid');
  assert.equal(await page.isVisible('#beta'), true);
  const rh = await settled({ mode: 'hybrid', fusion: 'rrf' });
  await assertMatchesApi('field-notes', rh);
  await page.fill('#beta', '2');
  const rb = await settled({ mode: 'hybrid', beta: 2 });
  await assertMatchesApi('field-notes', rb);
  await page.selectOption('#fusion', 'weighted');
  const rw = await settled({ fusion: 'weighted', norm: 'minmax' });
  const w = await assertMatchesApi('field-notes', rw);
  assert.ok(w.shown.some((h) => h.segs.some((s) => s.signal === 'lex' && s.width > 0)), 'lexical parts are drawn');

  await page.selectOption('#search-mode', 'fused');
  await page.fill('#alpha', '0.5');
  const rs = await settled({ mode: 'fused', alpha: 0.5 });
  await page.click('#sweep-button');
  await page.waitForSelector('#sweep:not([hidden])');
  const sweep = JSON.parse(await page.getAttribute('#sweep-plot', 'data-sweep'));
  assert.equal(sweep.alphas.length, 11);
  assert.equal(await page.$$eval('#sweep-plot polyline', (p) => p.length), rs.k);
  for (const i of [0, 10]) {
    const api = await call('POST', '/collections/field-notes/search', { ...rs, alpha: sweep.alphas[i] });
    const order = api.body.hits.map((h) => h.id);
    for (const [id, ranks] of Object.entries(sweep.ranks))
      assert.equal(ranks[i], order.includes(id) ? order.indexOf(id) + 1 : null, `${id} at alpha ${sweep.alphas[i]}`);
  }

  await page.setViewportSize({ width: 900, height: 1400 });
  await page.locator('#page-search').screenshot({ path: path.join(artifacts, 'console-search-sweep.png') });

  // A narrow window: no sideways scrolling.
  await page.setViewportSize({ width: 390, height: 900 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `page is ${overflow}px wider than a 390px window`);
  await page.screenshot({ path: path.join(artifacts, 'console-search-narrow.png'), fullPage: true });
  await page.setViewportSize({ width: 1100, height: 1400 });
});

test('metrics page, and dropping a collection', async () => {
  await page.goto(base + '/console#metrics');
  await page.waitForFunction(() => { const e = document.getElementById('m-texts-rate'); return e && e.textContent !== '…'; },
    null, { timeout: 10000 });
  const metrics = (await call('GET', '/metrics')).body;
  const texts = Number(metrics.match(/^moeedb_texts_embedded_total (\S+)$/m)[1]);
  assert.equal(Number(await page.textContent('#m-texts')), texts);
  assert.ok(texts >= docs.length);
  const searches = await page.textContent('#metrics-routes tr[data-route="/collections/{name}/search"] td');
  assert.ok(Number(searches) >= 5);
  await page.screenshot({ path: path.join(artifacts, 'console-metrics.png') });

  await page.goto(base + '/console#collections');
  await page.waitForSelector('#collections-table tr[data-name="field-notes"]');
  page.once('dialog', (d) => { assert.match(d.message(), /Drop collection "field-notes" and its 11 documents/); d.accept(); });
  await page.click('#collections-table tr[data-name="field-notes"] button.danger');
  await page.waitForFunction(() => !document.querySelector('#collections-table tr[data-name="field-notes"]'));
  assert.equal((await call('GET', '/collections/field-notes')).status, 404);
  assert.equal((await call('GET', '/collections/private-notes')).status, 200);

  // Forgetting the key hides everything again.
  await page.click('#forget-key');
  await page.waitForSelector('#page-auth:not([hidden])');
  assert.ok(!(await page.innerText('body')).includes('private-notes'));
  assert.deepEqual(pageErrors, [], 'no script errors on the page');
});
