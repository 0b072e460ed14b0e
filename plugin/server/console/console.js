// moeedb console: plain JavaScript over the server's own HTTP API (the
// collections API, /info, /metrics, /cluster). Everything it shows comes from those
// answers; data is written with textContent only, never as HTML.
'use strict';
(() => {
  const $ = (id) => document.getElementById(id);
  const KEY_STORE = 'moeedb-api-key';
  const PAGES = ['auth', 'collections', 'documents', 'search', 'metrics', 'cluster'];
  const SVG = 'http://www.w3.org/2000/svg';
  let apiKey = sessionStorage.getItem(KEY_STORE) || '';
  let collections = []; // [{name, documents, spec}]
  let authorized = false;

  class AuthError extends Error {}

  // One API call: JSON in, JSON (or text) out; a 401 shows the key prompt.
  async function api(method, path, body) {
    const headers = {};
    if (apiKey) headers.Authorization = 'Bearer ' + apiKey;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let data = text;
    if ((res.headers.get('content-type') || '').startsWith('application/json')) {
      try { data = JSON.parse(text); } catch { data = text; }
    }
    if (res.status === 401) {
      showAuth(apiKey ? 'The server refused this API key.' : '');
      throw new AuthError('API key needed');
    }
    if (!res.ok) {
      const err = new Error((data && data.error && data.error.message) || `HTTP ${res.status}`);
      err.status = res.status;
      throw err;
    }
    return data;
  }

  const enc = encodeURIComponent;
  const fmt = (x, d = 4) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '–');
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  }
  function setStatus(msg) { $('status').textContent = msg; }
  function reportError(where, e) {
    if (e instanceof AuthError) return;
    const box = where ? $(where) : null;
    if (box) box.textContent = e.message;
    else setStatus('Error: ' + e.message);
  }
  const cluster = window.moeedbClusterPage({ api, el, $, reportError }); // cluster.js

  // ---- pages and authentication -------------------------------------------

  function showPage(name) {
    for (const p of PAGES) $('page-' + p).hidden = p !== name;
    for (const a of document.querySelectorAll('nav a')) {
      if (a.dataset.page === name) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  // Without a valid key nothing of the database stays on the page.
  function showAuth(message) {
    authorized = false;
    stopMetrics();
    cluster.clear();
    for (const id of ['collections-table', 'documents-table', 'metrics-routes'])
      $(id).querySelector('tbody').replaceChildren();
    for (const id of ['hits', 'metrics-summary', 'get-result', 'sweep-plot', 'documents-collection', 'search-collection'])
      $(id).replaceChildren();
    $('sweep').hidden = true;
    $('server-info').textContent = '';
    $('documents-summary').textContent = '';
    collections = [];
    $('nav').hidden = true;
    $('forget-key').hidden = !apiKey;
    $('auth-error').textContent = message;
    setStatus('');
    showPage('auth');
  }

  async function boot() {
    try {
      const info = await api('GET', '/info');
      authorized = true;
      $('nav').hidden = false;
      $('forget-key').hidden = !apiKey;
      $('server-info').textContent = `model ${info.model_id} (${info.model_family}) · routing ${info.routing} · ` +
        `prompt ${info.prompt || 'none'} · HS ${info.dim_hs} / RW ${info.dim_rw} dims`;
      $('nav-cluster').hidden = !(await cluster.available());
      await route();
    } catch (e) {
      reportError(null, e);
    }
  }

  $('auth-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    apiKey = $('api-key').value.trim();
    sessionStorage.setItem(KEY_STORE, apiKey);
    $('api-key').value = '';
    $('auth-error').textContent = '';
    boot();
  });
  $('forget-key').addEventListener('click', () => {
    apiKey = '';
    sessionStorage.removeItem(KEY_STORE);
    boot();
  });

  function hashRoute() {
    const [page, ...rest] = location.hash.replace(/^#/, '').split('/');
    return { page: PAGES.includes(page) && page !== 'auth' ? page : 'collections', arg: rest.length ? decodeURIComponent(rest.join('/')) : '' };
  }

  async function route() {
    if (!authorized) return;
    const { page, arg } = hashRoute();
    stopMetrics();
    cluster.stop();
    setStatus('');
    showPage(page);
    try {
      await loadCollections(); // the database may have changed behind the page
      if (page === 'collections') renderCollections();
      if (page === 'documents') await openDocuments(arg);
      if (page === 'search') openSearch(arg);
      if (page === 'metrics') startMetrics();
      if (page === 'cluster') cluster.start();
    } catch (e) {
      reportError(null, e);
    }
  }
  window.addEventListener('hashchange', async () => {
    await route();
    $('main').focus();
  });

  // ---- collections --------------------------------------------------------

  async function loadCollections() {
    const list = await api('GET', '/collections');
    collections = await Promise.all(list.collections.map(async (c) => {
      const d = await api('GET', '/collections/' + enc(c.name));
      return { name: c.name, documents: d.documents, spec: d.spec || {} };
    }));
    collections.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const id of ['documents-collection', 'search-collection']) {
      const sel = $(id);
      const keep = sel.value;
      sel.replaceChildren(...collections.map((c) => el('option', { value: c.name, text: c.name })));
      if (collections.some((c) => c.name === keep)) sel.value = keep;
    }
  }

  function setupText(spec) {
    const info = spec.info || {};
    const model = (info.model_dir || '').split('/').filter(Boolean).pop() || 'unknown model';
    return `${model} (${info.model_type || '?'}), routing ${info.routing || '?'}, prompt ${info.prompt || 'none'}, ` +
      `HS ${info.hs_pooling || '?'}, RW ${info.rw_pooling || '?'}`;
  }
  function indexText(spec) {
    const ix = spec.index || {};
    const half = (h) => (h ? h.kind + (h.sq8 ? ' sq8' : '') : '?');
    const lex = spec.lexical && spec.lexical.enabled ? `BM25 ${spec.lexical.language} (k1 ${spec.lexical.k1}, b ${spec.lexical.b})` : 'no lexical';
    return `HS ${half(ix.hs)}, RW ${half(ix.rw)}, ${lex}`;
  }

  function renderCollections() {
    const body = $('collections-table').querySelector('tbody');
    body.replaceChildren(...collections.map((c) => el('tr', { 'data-name': c.name },
      el('th', { scope: 'row', class: 'mono', text: c.name }),
      el('td', { class: 'num', text: String(c.documents) }),
      el('td', { text: setupText(c.spec) }),
      el('td', { class: 'num', text: `${c.spec.dim_hs} / ${c.spec.dim_rw}` }),
      el('td', { text: indexText(c.spec) }),
      el('td', { class: 'num', text: fmt(c.spec.alpha, 3) }),
      el('td', {},
        el('a', { href: '#documents/' + enc(c.name), text: 'Documents' }), ' ',
        el('a', { href: '#search/' + enc(c.name), text: 'Search' }), ' ',
        el('button', { type: 'button', class: 'danger', 'aria-label': `Drop collection ${c.name}`, text: 'Drop',
          onclick: () => dropCollection(c) })))));
    $('collections-empty').hidden = collections.length > 0;
  }

  async function dropCollection(c) {
    if (!confirm(`Drop collection "${c.name}" and its ${c.documents} documents? This cannot be undone.`)) return;
    try {
      await api('DELETE', '/collections/' + enc(c.name));
      setStatus(`Dropped collection ${c.name}.`);
      await loadCollections();
      renderCollections();
    } catch (e) {
      reportError(null, e);
    }
  }

  $('create-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('create-error').textContent = '';
    const name = $('create-name').value.trim();
    const body = { index: { hs: $('create-hs').value, rw: $('create-rw').value } };
    body.lexical = $('create-lexical').checked ? { language: $('create-language').value } : false;
    const alpha = $('create-alpha').value.trim();
    if (alpha !== '') body.alpha = Number(alpha);
    try {
      await api('PUT', '/collections/' + enc(name), body);
      setStatus(`Created collection ${name}.`);
      $('create-name').value = '';
      await loadCollections();
      renderCollections();
    } catch (e) {
      reportError('create-error', e);
    }
  });

  // ---- documents ----------------------------------------------------------

  const docs = { name: '', cursors: [''], page: 0 };

  async function openDocuments(name) {
    if (name && collections.some((c) => c.name === name)) $('documents-collection').value = name;
    const chosen = $('documents-collection').value;
    if (chosen !== docs.name) Object.assign(docs, { name: chosen, cursors: [''], page: 0 });
    await loadDocuments();
  }

  // Loads of the documents page may overlap (the page opens, then its limit
  // or page changes): only the latest one's answer is shown.
  let documentsLoad = 0;
  async function loadDocuments() {
    const load = ++documentsLoad;
    const tbody = $('documents-table').querySelector('tbody');
    if (!docs.name) {
      tbody.replaceChildren();
      $('documents-summary').textContent = 'No collection to show.';
      return;
    }
    const limit = Number($('documents-limit').value);
    const after = docs.cursors[docs.page];
    const data = await api('GET', `/collections/${enc(docs.name)}/documents?limit=${limit}` + (after ? '&after=' + enc(after) : ''));
    if (load !== documentsLoad) return;  // a later load supersedes this answer
    tbody.replaceChildren(...data.documents.map((d) => el('tr', { 'data-id': d.id },
      el('th', { scope: 'row', class: 'mono', text: d.id }),
      el('td', {}, el('div', { class: 'text', text: d.text.length > 400 ? d.text.slice(0, 400) + '…' : d.text })),
      el('td', { class: 'mono', text: JSON.stringify(d.metadata) }),
      el('td', {}, el('button', { type: 'button', class: 'danger', 'aria-label': `Delete document ${d.id}`, text: 'Delete',
        onclick: () => deleteDocument(d.id) })))));
    const first = docs.page * limit;
    $('documents-summary').textContent = data.documents.length
      ? `${docs.name}: documents ${first + 1}–${first + data.documents.length} of ${data.total}`
      : `${docs.name}: no documents on this page (${data.total} in all)`;
    docs.cursors.length = docs.page + 1;
    if (data.next_after !== null) docs.cursors.push(data.next_after);
    $('documents-next').disabled = data.next_after === null;
    $('documents-prev').disabled = docs.page === 0;
  }

  async function deleteDocument(id) {
    if (!confirm(`Delete document "${id}" from ${docs.name}?`)) return;
    try {
      await api('DELETE', `/collections/${enc(docs.name)}/documents/${enc(id)}`);
      setStatus(`Deleted document ${id}.`);
      await loadDocuments();
      await loadCollections();
    } catch (e) {
      reportError(null, e);
    }
  }

  $('documents-collection').addEventListener('change', () => { location.hash = '#documents/' + enc($('documents-collection').value); });
  $('documents-limit').addEventListener('change', () => { docs.cursors = ['']; docs.page = 0; loadDocuments().catch((e) => reportError(null, e)); });
  $('documents-next').addEventListener('click', () => { docs.page++; loadDocuments().catch((e) => reportError(null, e)); });
  $('documents-prev').addEventListener('click', () => { docs.page = Math.max(0, docs.page - 1); loadDocuments().catch((e) => reportError(null, e)); });
  $('get-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const out = $('get-result');
    try {
      const d = await api('GET', `/collections/${enc(docs.name)}/documents/${enc($('get-id').value)}`);
      out.replaceChildren(el('pre', { id: 'get-json', text: JSON.stringify(d, null, 2) }));
    } catch (e) {
      if (e instanceof AuthError) return;
      out.replaceChildren(el('p', { class: 'error', text: e.message }));
    }
  });

  // ---- search -------------------------------------------------------------

  const search = { seq: 0, timer: 0, collection: '' };
  const SLIDERS = [['alpha', 2], ['beta', 2], ['w-hs', 2]];

  function openSearch(name) {
    if (name && collections.some((c) => c.name === name)) $('search-collection').value = name;
    const chosen = $('search-collection').value;
    if (chosen !== search.collection) {
      search.collection = chosen;
      const c = collections.find((x) => x.name === chosen);
      if (c && typeof c.spec.alpha === 'number') {
        $('alpha').max = String(Math.max(1, Math.ceil(c.spec.alpha)));
        $('alpha').value = String(Math.max(0, c.spec.alpha));
      }
      $('hits').replaceChildren();
      $('sweep').hidden = true;
    }
    updateControls();
  }

  function updateControls() {
    const mode = $('search-mode').value;
    const hybrid = mode === 'hybrid';
    for (const e of document.querySelectorAll('.hybrid-only')) e.classList.toggle('hide', !hybrid);
    if (hybrid && $('fusion').value !== 'weighted') for (const e of document.querySelectorAll('.weighted-only')) e.classList.add('hide');
    const usesAlpha = mode === 'fused' || mode === 'hybrid';
    $('alpha').disabled = !usesAlpha;
    $('sweep-button').disabled = !usesAlpha;
    for (const [id, digits] of SLIDERS) $(id + '-value').textContent = Number($(id).value).toFixed(digits);
  }

  // The request the controls describe, or null (with a message) when the filter is not valid JSON.
  function searchRequest() {
    const body = { query: $('search-query').value, k: Number($('search-k').value) || 10, mode: $('search-mode').value };
    if (body.mode === 'fused' || body.mode === 'hybrid') body.alpha = Number($('alpha').value);
    if (body.mode === 'hybrid') {
      body.fusion = $('fusion').value;
      body.beta = Number($('beta').value);
      body.w_hs = Number($('w-hs').value);
      if (body.fusion === 'weighted') body.norm = $('norm').value;
    }
    const f = $('search-filter');
    const text = f.value.trim();
    f.removeAttribute('aria-invalid');
    $('filter-error').textContent = '';
    if (text) {
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch (e) {
        f.setAttribute('aria-invalid', 'true');
        $('filter-error').textContent = 'The filter is not valid JSON: ' + e.message;
        return null;
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        f.setAttribute('aria-invalid', 'true');
        $('filter-error').textContent = 'The filter must be a JSON object, e.g. {"lang": "en"}';
        return null;
      }
      body.filter = parsed;
    }
    return body;
  }

  async function runSearch() {
    clearTimeout(search.timer);
    const name = $('search-collection').value;
    if (!name || !$('search-query').value.trim()) return;
    const body = searchRequest();
    if (!body) return;
    const mine = ++search.seq;
    $('hits').setAttribute('aria-busy', 'true');
    $('search-error').textContent = '';
    try {
      const data = await api('POST', `/collections/${enc(name)}/search`, body);
      if (mine !== search.seq) return; // a newer query is on its way
      renderHits(data.hits, body);
      $('hits').dataset.request = JSON.stringify(body);
      setStatus(`${data.hits.length} hits in ${fmt(data.took_ms, 1)} ms`);
    } catch (e) {
      if (mine === search.seq) reportError('search-error', e);
    } finally {
      if (mine === search.seq) $('hits').setAttribute('aria-busy', 'false');
    }
  }
  function scheduleSearch() {
    clearTimeout(search.timer);
    search.timer = setTimeout(runSearch, 120);
  }

  const SIGNALS = [['hs', 'HS'], ['rw', 'RW'], ['lex', 'lexical']];

  // Each hit's bar: its parts stacked from a zero line, positive to the
  // right, negative (hatched) to the left, on one scale for the whole list.
  function renderHits(hits, body) {
    let maxPos = 0;
    let maxNeg = 0;
    for (const h of hits) {
      let pos = 0;
      let neg = 0;
      for (const [s] of SIGNALS) {
        const p = h.parts[s] || 0;
        if (p > 0) pos += p; else neg -= p;
      }
      maxPos = Math.max(maxPos, pos);
      maxNeg = Math.max(maxNeg, neg);
    }
    const span = maxPos + maxNeg || 1;
    const zero = (maxNeg / span) * 100;
    $('hits').replaceChildren(...hits.map((h) => {
      const bar = el('div', { class: 'bar', role: 'img', 'aria-label': partsText(h) });
      let right = 0;
      let left = 0;
      for (const [s, label] of SIGNALS) {
        if (!(s in h.parts)) continue;
        const p = h.parts[s];
        const w = (Math.abs(p) / span) * 100;
        const start = p >= 0 ? zero + (right / span) * 100 : zero - ((left + Math.abs(p)) / span) * 100;
        if (p >= 0) right += p; else left -= p;
        bar.append(el('span', { class: `seg ${s}${p < 0 ? ' neg' : ''}`, 'data-signal': s, 'data-part': String(p),
          title: `${label} ${fmt(p)}`, style: `left:${start}%;width:${w}%` }));
      }
      bar.append(el('span', { class: 'zero', style: `left:${zero}%` }));
      return el('li', { 'data-id': h.id, 'data-score': String(h.score), 'data-score-hs': String(h.score_hs),
        'data-score-rw': String(h.score_rw), 'data-score-lex': String(h.score_lex ?? ''), 'data-parts': JSON.stringify(h.parts) },
        el('div', { class: 'hit-head' },
          el('span', { class: 'hit-id mono', text: h.id }),
          el('span', { class: 'hit-score', text: 'score ' + fmt(h.score) }),
          el('span', { class: 'hit-parts', text: scoreText(h, body) })),
        bar,
        el('p', { class: 'hit-text', text: h.text }),
        el('p', { class: 'hit-meta mono', text: JSON.stringify(h.metadata) }));
    }));
  }
  function partsText(h) {
    return SIGNALS.filter(([s]) => s in h.parts).map(([s, label]) => `${label} ${fmt(h.parts[s])}`).join(', ');
  }
  function scoreText(h, body) {
    const lex = h.score_lex === undefined ? '' : `, BM25 ${fmt(h.score_lex, 3)}`;
    if (body.mode === 'fused') return `= HS ${fmt(h.score_hs)} + ${fmt(body.alpha, 2)} × RW ${fmt(h.score_rw)}${lex}`;
    if (body.mode === 'hybrid') return `= ${partsText(h)} (${body.fusion}; cosines HS ${fmt(h.score_hs, 3)}, RW ${fmt(h.score_rw, 3)}${lex})`;
    return `HS ${fmt(h.score_hs)}, RW ${fmt(h.score_rw)}${lex}`;
  }

  // How the current top k moves with alpha: one search per alpha value.
  async function runSweep() {
    const name = $('search-collection').value;
    const base = searchRequest();
    if (!name || !base || !base.query.trim()) return;
    const current = [...$('hits').children].map((li) => li.dataset.id);
    if (!current.length) { await runSearch(); return runSweep(); }
    const max = Number($('alpha').max);
    const alphas = Array.from({ length: 11 }, (_, i) => Math.round((max * i / 10) * 1000) / 1000);
    const ranks = Object.fromEntries(current.map((id) => [id, []]));
    $('sweep-button').disabled = true;
    try {
      for (const a of alphas) {
        const data = await api('POST', `/collections/${enc(name)}/search`, { ...base, alpha: a });
        const order = data.hits.map((h) => h.id);
        for (const id of current) ranks[id].push(order.includes(id) ? order.indexOf(id) + 1 : null);
      }
    } catch (e) {
      reportError('search-error', e);
      return;
    } finally {
      $('sweep-button').disabled = false;
    }
    drawSweep(alphas, ranks, base.k, Number($('alpha').value));
  }

  function drawSweep(alphas, ranks, k, at) {
    const ids = Object.keys(ranks);
    const W = 560; const L = 40; const R = 150; const T = 14; const step = 20;
    const H = T + (k + 1) * step + 24;
    const x = (a) => L + ((W - L - R) * a) / (alphas[alphas.length - 1] || 1);
    const y = (r) => T + ((r === null ? k + 1 : r) - 1) * step + step / 2;
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
    svg.setAttribute('width', String(W));
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'Rank of each current hit against alpha');
    const add = (tag, attrs, text) => {
      const e = document.createElementNS(SVG, tag);
      for (const [k2, v] of Object.entries(attrs)) e.setAttribute(k2, String(v));
      if (text !== undefined) e.textContent = text;
      svg.append(e);
      return e;
    };
    for (let r = 1; r <= k; r++) add('text', { x: L - 6, y: y(r) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#57606a' }, String(r));
    add('text', { x: L - 6, y: y(null) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#57606a' }, 'out');
    add('line', { x1: L, x2: W - R, y1: y(k) + step / 2, y2: y(k) + step / 2, stroke: '#d0d7de' });
    for (const a of alphas) add('text', { x: x(a), y: H - 6, 'text-anchor': 'middle', 'font-size': 10, fill: '#57606a' }, String(a));
    add('line', { x1: x(at), x2: x(at), y1: T, y2: H - 20, stroke: '#1b1f24', 'stroke-dasharray': '3 3' });
    const palette = ['#2f6fdb', '#e07b00', '#1a8f4a', '#b3261e', '#7b3fb8', '#00838f', '#8d6e00', '#c2185b', '#455a64', '#6d4c41'];
    ids.forEach((id, i) => {
      const color = palette[i % palette.length];
      const pts = alphas.map((a, j) => `${x(a)},${y(ranks[id][j])}`).join(' ');
      add('polyline', { points: pts, fill: 'none', stroke: color, 'stroke-width': 2, 'data-id': id });
      const last = ranks[id][ranks[id].length - 1];
      add('text', { x: W - R + 6, y: y(last) + 4 + (last === null ? (i % 4) * 10 - 15 : 0), 'font-size': 11, fill: color },
        id.length > 22 ? id.slice(0, 21) + '…' : id);
    });
    $('sweep-plot').replaceChildren(svg);
    $('sweep-plot').dataset.sweep = JSON.stringify({ alphas, ranks });
    $('sweep').hidden = false;
  }

  $('search-form').addEventListener('submit', (ev) => { ev.preventDefault(); runSearch(); });
  $('search-collection').addEventListener('change', () => { location.hash = '#search/' + enc($('search-collection').value); });
  for (const [id] of SLIDERS) $(id).addEventListener('input', () => { updateControls(); scheduleSearch(); });
  for (const id of ['search-mode', 'fusion', 'norm', 'search-k']) $(id).addEventListener('change', () => { updateControls(); scheduleSearch(); });
  $('search-filter').addEventListener('input', () => { if (searchRequest()) scheduleSearch(); });
  $('sweep-button').addEventListener('click', () => { runSweep(); });

  // ---- metrics ------------------------------------------------------------

  const metrics = { timer: 0, last: null };

  function parseMetrics(text) {
    const out = [];
    for (const line of text.split('\n')) {
      const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/);
      if (!m) continue;
      const labels = {};
      for (const l of (m[2] || '').matchAll(/(\w+)="([^"]*)"/g)) labels[l[1]] = l[2];
      out.push({ name: m[1], labels, value: Number(m[3]) });
    }
    return out;
  }
  const one = (samples, name) => (samples.find((s) => s.name === name) || { value: 0 }).value;

  function quantile(buckets, q) {
    const total = buckets.find((b) => b.le === Infinity);
    if (!total || total.count === 0) return null;
    for (const b of buckets) if (b.count >= q * total.count) return b.le;
    return Infinity;
  }
  const ms = (s) => (s === null ? '–' : s === Infinity ? '> 10 s' : s < 1 ? `≤ ${Math.round(s * 1000)} ms` : `≤ ${s} s`);

  async function pollMetrics() {
    const text = await api('GET', '/metrics');
    const s = parseMetrics(text);
    const now = performance.now() / 1000;
    const texts = one(s, 'moeedb_texts_embedded_total');
    const tokens = one(s, 'moeedb_tokens_embedded_total');
    const busy = one(s, 'moeedb_model_busy_seconds_total');
    const prev = metrics.last;
    const rate = (v, p) => (prev ? (v - p) / Math.max(1e-9, now - prev.t) : null);
    const items = [
      ['m-texts', 'Texts embedded', String(texts)],
      ['m-texts-rate', 'Texts / s', prev ? fmt(rate(texts, prev.texts), 1) : '…'],
      ['m-tokens-rate', 'Tokens / s', prev ? fmt(rate(tokens, prev.tokens), 0) : '…'],
      ['m-busy', 'Model busy', prev ? fmt(100 * rate(busy, prev.busy), 0) + ' %' : '…'],
      ['m-queue', 'Queue depth', String(one(s, 'moeedb_queue_depth'))],
      ['m-stored', 'Documents stored', String(one(s, 'moeedb_documents_stored_total'))],
      ['m-batch', 'Mean texts per forward', fmt(one(s, 'moeedb_batch_size_texts_sum') / (one(s, 'moeedb_batch_size_texts_count') || 1), 1)],
    ];
    metrics.last = { t: now, texts, tokens, busy };
    $('metrics-summary').replaceChildren(...items.map(([id, label, value]) =>
      el('div', {}, el('dt', { text: label }), el('dd', { id, text: value }))));
    const routes = new Map();
    const get = (r) => routes.get(r) || routes.set(r, { n: 0, e4: 0, e5: 0, sum: 0, count: 0, buckets: [] }).get(r);
    for (const x of s) {
      const r = x.labels.route;
      if (!r) continue;
      if (x.name === 'moeedb_requests_total') {
        const st = Number(x.labels.status);
        get(r).n += x.value;
        if (st >= 400 && st < 500) get(r).e4 += x.value;
        if (st >= 500) get(r).e5 += x.value;
      } else if (x.name === 'moeedb_request_duration_seconds_sum') get(r).sum = x.value;
      else if (x.name === 'moeedb_request_duration_seconds_count') get(r).count = x.value;
      else if (x.name === 'moeedb_request_duration_seconds_bucket')
        get(r).buckets.push({ le: x.labels.le === '+Inf' ? Infinity : Number(x.labels.le), count: x.value });
    }
    $('metrics-routes').querySelector('tbody').replaceChildren(...[...routes.entries()].sort().map(([r, v]) => el('tr', { 'data-route': r },
      el('th', { scope: 'row', class: 'mono', text: r }),
      el('td', { class: 'num', text: String(v.n) }),
      el('td', { class: 'num', text: `${v.e4} / ${v.e5}` }),
      el('td', { class: 'num', text: v.count ? fmt((1000 * v.sum) / v.count, 1) + ' ms' : '–' }),
      el('td', { class: 'num', text: ms(quantile(v.buckets, 0.5)) }),
      el('td', { class: 'num', text: ms(quantile(v.buckets, 0.99)) }))));
  }
  function startMetrics() {
    metrics.last = null;
    const tick = () => pollMetrics().catch((e) => reportError(null, e));
    tick();
    metrics.timer = setInterval(tick, 2000);
  }
  function stopMetrics() { clearInterval(metrics.timer); metrics.timer = 0; }

  updateControls();
  boot();
})();
