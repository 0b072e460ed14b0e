// moeedb console, the cluster page: the nodes, and each sharded collection's
// shards with the nodes placed on them and the replicas ready there, as
// GET /cluster answers (etcd's view, read by the node serving the console).
// Loaded before console.js, which calls this with its helpers.
'use strict';
window.moeedbClusterPage = ({ api, el, $, reportError }) => {
  let timer = 0;
  const bytes = (n) => (n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(2)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB`
    : `${(n / 1024).toFixed(1)} KiB`);

  // Whether this node is part of a cluster (GET /cluster answers 404 otherwise).
  async function available() {
    try {
      await api('GET', '/cluster');
      return true;
    } catch (e) {
      if (e.status === 404) return false;
      throw e;
    }
  }

  function render(st) {
    const claims = new Map(); // node -> ready replicas it holds
    for (const c of st.collections)
      for (const s of c.shard_list)
        for (const r of s.replicas) claims.set(r.node, (claims.get(r.node) || 0) + 1);
    $('cluster-summary').replaceChildren(...[
      ['Cluster', st.cluster], ['This node', st.node], ['Live nodes', String(st.nodes.length)],
      ['Sharded collections', String(st.collections.length)],
    ].map(([label, value]) => el('div', {}, el('dt', { text: label }), el('dd', { text: value }))));
    $('cluster-nodes').querySelector('tbody').replaceChildren(...st.nodes.map((n) => el('tr',
      { 'data-node': n.id, 'data-state': n.draining ? 'draining' : 'serving' },
      el('th', { scope: 'row', class: 'mono', text: n.id + (n.id === st.node ? ' (this node)' : '') }),
      el('td', { class: 'mono', text: n.address }),
      el('td', { class: 'num', text: n.ttl_s === null ? '–' : `${n.ttl_s} s` }),
      el('td', { text: n.draining ? 'draining' : 'serving' }),
      el('td', { class: 'num', text: String(claims.get(n.id) || 0) }))));
    const want = (c) => Math.min(c.replicas, st.nodes.length);
    $('cluster-collections').replaceChildren(...st.collections.map((c) => el('section', { 'data-collection': c.name },
      el('h3', { text: `${c.name}: ${c.shards} shards × ${c.replicas} replicas` +
        (c.last_op === undefined ? '' : `, change log at ${c.last_op}`) }),
      el('div', { class: 'scroll' }, el('table', {},
        el('caption', { class: 'sr-only', text: `Shards of ${c.name}` }),
        el('thead', {}, el('tr', {}, ...['Shard', 'Placed on', 'Leaving', 'Ready replicas', 'State']
          .map((h) => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, ...c.shard_list.map((s) => {
          const ready = s.replicas.map((r) => r.node);
          const short = ready.length < want(c);
          return el('tr', { 'data-shard': String(s.shard), 'data-assigned': s.assigned.join(','), 'data-ready': ready.join(',') },
            el('th', { scope: 'row', class: 'num', text: String(s.shard) }),
            el('td', { class: 'mono', text: s.assigned.join(', ') || '–' }),
            el('td', { class: 'mono', text: s.leaving.join(', ') || '–' }),
            el('td', {}, ...s.replicas.map((r) => el('div', { class: 'mono', 'data-node': r.node, text:
              `${r.node}: seq ${r.applied_seq}` + (r.lag === undefined ? '' : `, lag ${r.lag}`) +
              `, ${r.documents} docs, ${bytes(r.index_bytes)}` }))),
            el('td', { class: short ? 'error' : '', text: ready.length === 0 ? 'no replica' : short ? 'short of replicas' : 'ok' }));
        })))))));
  }

  async function poll() { render(await api('GET', '/cluster')); }
  function start() {
    const tick = () => poll().catch((e) => reportError(null, e));
    tick();
    timer = setInterval(tick, 2000);
  }
  function stop() { clearInterval(timer); timer = 0; }
  function clear() {
    stop();
    $('cluster-summary').replaceChildren();
    $('cluster-nodes').querySelector('tbody').replaceChildren();
    $('cluster-collections').replaceChildren();
  }
  return { available, start, stop, clear };
};
