// rocefab web: draws the fabric from /api/view and applies the frames /api/events pushes.
// Plain ES module, no build step. Times are emulated (wall clock ÷ D), as every rocefab report.

const SVG = 'http://www.w3.org/2000/svg';
/** How long a PFC or ECN marker stays lit after the interval it was seen in, ms. */
const HOLD_MS = 1500;
/** How far back the charts go, ms of wall clock. */
const HISTORY_MS = 60000;
const RAIL_COLOURS = ['#1f77b4', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];
const QP_COLOURS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

const st = {
  view: null,
  dirs: new Map(), // link id -> [ab line, ba line]
  hits: new Map(), // link id -> hit line
  nodes: new Map(), // name -> <g>
  ports: new Map(), // node:port -> { circle, ecn }
  pfcUntil: new Map(),
  ecnUntil: new Map(),
  frame: null,
  selected: null, // { kind: 'node'|'link'|'port', id }
  watched: null, // { port, tc, pinned }
  watchedSince: 0,
  qHist: new Map(), // node:port/tc -> [[t_ns, depth]]
  rHist: new Map(), // host/qpn -> { label, pts: [[t_ns, bps]] }
  times: [],
};

// ---------------------------------------------------------------------------------------------
// Formatting

export function fmtTime(ns) {
  if (ns >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
  if (ns >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
  if (ns >= 1e3) return (ns / 1e3).toFixed(2) + ' µs';
  return Math.round(ns) + ' ns';
}

export function fmtRate(bps) {
  if (bps == null) return '–';
  if (bps >= 1e9) return (bps / 1e9).toFixed(2) + ' Gbit/s';
  if (bps >= 1e6) return (bps / 1e6).toFixed(1) + ' Mbit/s';
  if (bps >= 1e3) return (bps / 1e3).toFixed(1) + ' kbit/s';
  return Math.round(bps) + ' bit/s';
}

export function fmtBytes(b) {
  if (b >= 1e6) return (b / 1e6).toFixed(2) + ' MB';
  if (b >= 1e3) return (b / 1e3).toFixed(1) + ' kB';
  return b + ' B';
}

/** The stroke of a busy direction: green at 0 through yellow to orange at the congestion level. */
export function busyColour(util) {
  const u = Math.max(0, Math.min(1, util / 0.85));
  return `hsl(${Math.round(130 - 95 * u)}, ${Math.round(65 + 30 * u)}%, ${Math.round(42 + 8 * u)}%)`;
}

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function html(tag, text, parent, cls) {
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  if (cls) e.className = cls;
  if (parent) parent.appendChild(e);
  return e;
}

// ---------------------------------------------------------------------------------------------
// The topology

function drawView(v) {
  const svg = document.getElementById('topo');
  svg.setAttribute('viewBox', `0 0 ${v.width} ${v.height}`);
  svg.replaceChildren();
  const gl = el('g', { class: 'links' }, svg);
  const gn = el('g', { class: 'nodes' }, svg);
  const gp = el('g', { class: 'ports' }, svg);
  for (const l of v.links) {
    const dx = l.bx - l.ax;
    const dy = l.by - l.ay;
    const len = Math.hypot(dx, dy) || 1;
    const ox = (-dy / len) * 2.2;
    const oy = (dx / len) * 2.2;
    const mk = (sign, from, to) => el('line', {
      class: 'dir', x1: l.ax + sign * ox, y1: l.ay + sign * oy, x2: l.bx + sign * ox, y2: l.by + sign * oy,
      'data-link': l.id, 'data-from': from, 'data-to': to, 'data-state': 'unknown',
    }, gl);
    const ab = mk(1, l.a, l.b);
    const ba = mk(-1, l.b, l.a);
    el('title', {}, ab).textContent = `${l.a} → ${l.b}`;
    el('title', {}, ba).textContent = `${l.b} → ${l.a}`;
    st.dirs.set(l.id, [ab, ba]);
    const hit = el('line', { class: 'hit', x1: l.ax, y1: l.ay, x2: l.bx, y2: l.by, 'data-link': l.id }, gl);
    hit.addEventListener('click', () => select({ kind: 'link', id: l.id }));
    st.hits.set(l.id, hit);
  }
  for (const n of v.nodes) {
    const g = el('g', { class: 'node', 'data-node': n.name, 'data-kind': n.kind, 'data-state': 'up' }, gn);
    el('rect', { x: n.x, y: n.y, width: n.w, height: n.h, rx: n.kind === 'host' ? 3 : 6 }, g);
    el('text', { x: n.x + n.w / 2, y: n.y + n.h / 2 + (n.kind === 'host' ? 5 : 0) }, g).textContent = n.name;
    el('title', {}, g).textContent = `${n.name} (${n.kind})`;
    g.addEventListener('click', () => select({ kind: 'node', id: n.name }));
    st.nodes.set(n.name, g);
    for (const p of n.ports) {
      const id = `${n.name}:${p.name}`;
      const c = el('circle', { class: 'port', cx: p.x, cy: p.y, r: 3.6, 'data-port': id, 'data-pfc': 'off' }, gp);
      if (p.rail) c.style.stroke = RAIL_COLOURS[(p.rail - 1) % RAIL_COLOURS.length];
      el('title', {}, c).textContent = `${id} → ${p.peer}`;
      const e = el('circle', { class: 'ecn', cx: p.x + 4.5, cy: p.y - 4.5, r: 2.2, 'data-ecn': 'off' }, gp);
      c.addEventListener('click', (ev) => { ev.stopPropagation(); select({ kind: 'port', id }); });
      st.ports.set(id, { circle: c, ecn: e, peer: p.peer });
    }
  }
}

function applyLinks(f) {
  for (const l of f.links) {
    const lines = st.dirs.get(l.id);
    if (!lines) continue;
    [l.ab, l.ba].forEach((d, i) => {
      const line = lines[i];
      line.setAttribute('data-state', d.state);
      line.style.stroke = d.state === 'busy' ? busyColour(d.util) : '';
      const what = d.util == null ? d.state : `${(100 * d.util).toFixed(1)} % (${fmtRate(d.bps)})${d.queue_high ? ', queue above its congestion depth' : ''}`;
      line.firstChild.textContent = `${line.getAttribute('data-from')} → ${line.getAttribute('data-to')}: ${what}`;
    });
  }
}

function applyPorts(f, now) {
  for (const [id, p] of st.ports) {
    const live = f.ports[id];
    if (live && live.pfc) st.pfcUntil.set(id, now + HOLD_MS);
    if (live && live.ecn > 0) st.ecnUntil.set(id, now + HOLD_MS);
    const pfc = (st.pfcUntil.get(id) || 0) > now;
    const ecn = (st.ecnUntil.get(id) || 0) > now;
    p.circle.setAttribute('data-pfc', pfc ? 'on' : 'off');
    p.ecn.setAttribute('data-ecn', ecn ? 'on' : 'off');
    if (live) {
      const bits = [];
      if (live.paused) bits.push(`paused priorities ${prioList(live.paused)}`);
      if (live.pfc_tx) bits.push(`${live.pfc_tx} PFC sent`);
      if (live.pfc_rx) bits.push(`${live.pfc_rx} PFC received`);
      if (live.ecn) bits.push(`${live.ecn} ECN marked`);
      p.circle.firstChild.textContent = `${id} → ${p.peer}${bits.length ? ': ' + bits.join(', ') : ''}`;
    }
  }
}

function prioList(mask) {
  const out = [];
  for (let i = 0; i < 8; i++) if (mask & (1 << i)) out.push(i);
  return out.join(',');
}

function applyNodes(f) {
  for (const [name, s] of Object.entries(f.switches)) {
    const g = st.nodes.get(name);
    if (!g) continue;
    g.setAttribute('data-state', s.state);
    g.querySelector('title').textContent = `${name}: ${s.state}${s.error ? ' (' + s.error + ')' : ''}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Queue depth

function thresholdsOf(port) {
  const s = st.frame && st.frame.switches[port.split(':')[0]];
  return s && s.thresholds;
}

function recordQueues(f, now) {
  for (const [id, p] of Object.entries(f.ports)) {
    if (!p.depth) continue;
    p.depth.forEach((d, tc) => {
      const key = `${id}/${tc}`;
      if (d > 0 && !st.qHist.has(key)) st.qHist.set(key, []);
    });
  }
  for (const [key, pts] of st.qHist) {
    const [id, tc] = key.split('/');
    const p = f.ports[id];
    pts.push([f.t_ns, p && p.depth ? p.depth[Number(tc)] : 0, now]);
    while (pts.length && pts[0][2] < now - HISTORY_MS) pts.shift();
  }
}

function chooseWatched(f, now) {
  if (st.watched && st.watched.pinned) return;
  let best = null;
  for (const [id, p] of Object.entries(f.ports)) {
    if (!p.depth) continue;
    p.depth.forEach((d, tc) => { if (d > 0 && (!best || d > best.d)) best = { port: id, tc, d }; });
  }
  // The deepest queue now, kept at least 3 s so the chart does not flicker.
  if (best && (!st.watched || now - st.watchedSince > 3000)) {
    if (!st.watched || st.watched.port !== best.port || st.watched.tc !== best.tc) {
      st.watched = { port: best.port, tc: best.tc, pinned: false };
      st.watchedSince = now;
    }
  }
}

function drawQueueChart() {
  const svg = document.getElementById('qchart');
  svg.replaceChildren();
  const name = document.getElementById('qname');
  if (!st.watched) {
    name.textContent = '(no queue has held a byte yet)';
    return;
  }
  const { port, tc } = st.watched;
  name.textContent = `${port} queue ${tc}${st.watched.pinned ? '' : ' (deepest)'}`;
  const pts = st.qHist.get(`${port}/${tc}`) || [];
  const W = 400;
  const H = 150;
  const t = thresholdsOf(port);
  const lines = [];
  if (t) {
    if (t.wred_queues & (1 << tc)) {
      lines.push(['wred', 'WRED min', t.wred_min_bytes], ['wred', 'WRED max', t.wred_max_bytes]);
    }
    if (t.lossless_priorities & (1 << tc)) {
      lines.push(['xoff', 'xOFF', t.xoff_bytes], ['xon', 'xON', t.xon_bytes]);
    }
  }
  const peak = pts.reduce((m, p) => Math.max(m, p[1]), 0);
  const smallest = lines.reduce((m, l) => Math.min(m, l[2]), Infinity);
  let ymax = Math.max(peak * 1.15, smallest === Infinity ? 1 : smallest * 1.3, 1);
  // Thresholds far above what the queue holds would flatten it: draw those within 4 × the peak.
  for (const l of lines) if (l[2] <= Math.max(ymax, peak * 4)) ymax = Math.max(ymax, l[2] * 1.08);
  const t0 = pts.length ? pts[0][0] : 0;
  const t1 = pts.length ? pts[pts.length - 1][0] : 1;
  const x = (tt) => (t1 > t0 ? ((tt - t0) / (t1 - t0)) * (W - 50) : 0) + 45;
  const y = (v) => H - 14 - (v / ymax) * (H - 24);
  const off = [];
  let lastLabel = null;
  for (const [cls, label, v] of lines) {
    if (v > ymax) { off.push(`${label} ${fmtBytes(v)}`); continue; }
    el('line', { class: `threshold ${cls}`, x1: 45, x2: W - 5, y1: y(v), y2: y(v) }, svg);
    // Labels of lines close together side by side rather than on top of each other.
    const lx = lastLabel && Math.abs(lastLabel.y - y(v)) < 10 ? lastLabel.x - 90 : W - 6;
    el('text', { class: 'chart-label', x: lx, y: y(v) - 2, 'text-anchor': 'end' }, svg).textContent = `${label} ${fmtBytes(v)}`;
    lastLabel = { x: lx, y: y(v) };
  }
  el('text', { class: 'chart-label', x: 2, y: 10 }, svg).textContent = fmtBytes(Math.round(ymax));
  el('text', { class: 'chart-label', x: 2, y: H - 14 }, svg).textContent = '0';
  if (pts.length) {
    el('text', { class: 'chart-label', x: 45, y: H - 2 }, svg).textContent = fmtTime(t0);
    el('text', { class: 'chart-label', x: W - 5, y: H - 2, 'text-anchor': 'end' }, svg).textContent = `${fmtTime(t1)} emulated`;
  }
  if (off.length) el('text', { class: 'chart-label', x: 48, y: 10 }, svg).textContent = `above: ${off.join(', ')}`;
  if (pts.length > 1) {
    el('polyline', { class: 'series', points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ') }, svg);
  }
}

function drawQueueList(f) {
  const list = document.getElementById('qlist');
  const rows = [];
  for (const [id, p] of Object.entries(f.ports)) {
    if (!p.depth) continue;
    p.depth.forEach((d, tc) => { if (d > 0) rows.push({ id, tc, d }); });
  }
  rows.sort((a, b) => b.d - a.d);
  const max = rows.length ? rows[0].d : 1;
  list.replaceChildren();
  for (const r of rows.slice(0, 6)) {
    const row = html('div', null, list, 'bar');
    html('span', `${r.id} q${r.tc}`, row, 'name');
    const track = html('span', null, row, 'track');
    html('span', null, track, 'fill').style.width = `${(100 * r.d) / max}%`;
    html('span', fmtBytes(r.d), row, 'val');
    row.addEventListener('click', () => { st.watched = { port: r.id, tc: r.tc, pinned: true }; drawQueueChart(); });
  }
  if (!rows.length) html('div', 'every queue is empty', list, 'muted');
}

// ---------------------------------------------------------------------------------------------
// DCQCN rates of a running job

function drawQps(f, now) {
  const senders = f.qps.filter((q) => q.sender);
  document.getElementById('jobname').textContent = f.qps.length
    ? `(${[...new Set(f.qps.map((q) => q.job))].join(', ')}, ${senders.length} sending QPs)`
    : '(no job running)';
  for (const q of senders) {
    const key = `${q.host}/${q.qpn}`;
    if (!st.rHist.has(key)) st.rHist.set(key, { label: `${q.host} ${q.label || q.qpn}`, pts: [] });
  }
  const live = new Set(senders.map((q) => `${q.host}/${q.qpn}`));
  for (const [key, h] of st.rHist) {
    const q = senders.find((s) => `${s.host}/${s.qpn}` === key);
    h.pts.push([f.t_ns, q ? q.rate_bps : null, now]);
    while (h.pts.length && h.pts[0][2] < now - HISTORY_MS) h.pts.shift();
    if (!live.has(key) && h.pts.every((p) => p[1] == null)) st.rHist.delete(key);
  }
  const svg = document.getElementById('rchart');
  svg.replaceChildren();
  const W = 400;
  const H = 120;
  let ymax = 1;
  let t0 = Infinity;
  let t1 = -Infinity;
  for (const h of st.rHist.values()) {
    for (const [t, v] of h.pts) {
      if (v != null) ymax = Math.max(ymax, v);
      t0 = Math.min(t0, t);
      t1 = Math.max(t1, t);
    }
  }
  const x = (t) => (t1 > t0 ? ((t - t0) / (t1 - t0)) * (W - 50) : 0) + 45;
  const y = (v) => H - 14 - (v / ymax) * (H - 24);
  el('text', { class: 'chart-label', x: 2, y: 10 }, svg).textContent = fmtRate(ymax);
  el('text', { class: 'chart-label', x: 2, y: H - 14 }, svg).textContent = '0';
  let i = 0;
  for (const h of st.rHist.values()) {
    const colour = QP_COLOURS[i++ % QP_COLOURS.length];
    const pts = h.pts.filter((p) => p[1] != null).map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
    if (pts.length > 1) el('polyline', { class: 'series', points: pts.join(' '), stroke: colour }, svg);
  }
  const table = document.getElementById('qptable');
  table.replaceChildren();
  if (!senders.length) return;
  const head = html('tr', null, table);
  for (const h of ['QP', 'rate', 'α', 'CNPs rx', 'acked']) html('th', h, head);
  senders.slice(0, 16).forEach((q, k) => {
    const tr = html('tr', null, table);
    const name = html('td', `${q.host} ${q.label || q.qpn}`, tr);
    name.style.color = QP_COLOURS[k % QP_COLOURS.length];
    html('td', fmtRate(q.rate_bps), tr);
    html('td', q.alpha.toFixed(3), tr);
    html('td', String(q.cnps_received), tr);
    html('td', fmtBytes(q.acked_bytes), tr);
  });
  if (senders.length > 16) html('td', `… and ${senders.length - 16} more`, html('tr', null, table));
}

// ---------------------------------------------------------------------------------------------
// Event log

function addLog(entries) {
  const ol = document.getElementById('events');
  for (const e of entries) {
    const li = document.createElement('li');
    li.setAttribute('data-kind', e.kind);
    html('span', fmtTime(e.t_ns), li, 't');
    html('span', e.kind, li, 'k');
    html('span', e.text, li);
    ol.prepend(li);
  }
  while (ol.children.length > 500) ol.lastChild.remove();
}

// ---------------------------------------------------------------------------------------------
// Details of what was clicked

function select(sel) {
  document.querySelectorAll('.selected').forEach((e) => e.classList.remove('selected'));
  st.selected = sel;
  if (sel.kind === 'node') st.nodes.get(sel.id)?.classList.add('selected');
  if (sel.kind === 'link') st.hits.get(sel.id)?.classList.add('selected');
  if (sel.kind === 'port') {
    st.ports.get(sel.id)?.circle.classList.add('selected');
    const depth = st.frame && st.frame.ports[sel.id] && st.frame.ports[sel.id].depth;
    let tc = 3;
    if (depth) depth.forEach((d, i) => { if (d > depth[tc]) tc = i; });
    st.watched = { port: sel.id, tc, pinned: true };
    drawQueueChart();
  }
  showDetails().catch((e) => showError(e));
}

function showError(e) {
  const body = document.getElementById('detail-body');
  body.replaceChildren();
  html('div', String(e), body, 'muted');
}

async function getJson(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return r.json();
}

const COUNTERS = [
  ['tx frames', (p) => p.tx_packets.reduce((a, b) => a + b, 0)],
  ['tx bytes', (p) => p.tx_bytes.reduce((a, b) => a + b, 0)],
  ['rx frames', (p) => p.rx_packets],
  ['rx bytes', (p) => p.rx_bytes],
  ['PFC sent', (p) => p.pfc_tx_frames.reduce((a, b) => a + b, 0)],
  ['PFC received', (p) => p.pfc_rx_frames.reduce((a, b) => a + b, 0)],
  ['pause onsets', (p) => p.pause_onsets.reduce((a, b) => a + b, 0)],
  ['paused now', (p) => prioList(p.paused.reduce((m, b, i) => (b ? m | (1 << i) : m), 0)) || '–'],
  ['paused (emulated)', (p) => fmtTime(p.paused_ns.reduce((a, b) => a + b, 0))],
  ['ECN marked', (p) => p.ecn_marked + p.ecn_marked_dequeue],
  ['WRED dropped', (p) => p.wred_dropped + p.wred_dropped_dequeue],
  ['admission dropped', (p) => (p.admission_dropped || []).reduce((a, b) => a + b, 0)],
  ['trimmed (of those)', (p) => (p.trimmed || []).reduce((a, b) => a + b, 0)],
  ['queue depth', (p) => p.depth_cell_bytes.map((d, i) => (d ? `q${i} ${fmtBytes(d)}` : '')).filter(Boolean).join(' ') || '0'],
  ['peak depth', (p) => p.peak_depth_cell_bytes.map((d, i) => (d ? `q${i} ${fmtBytes(d)}` : '')).filter(Boolean).join(' ') || '0'],
];

function portBlock(body, d) {
  html('h3', `${d.id}`, body);
  if (d.counters) {
    const t = html('table', null, body);
    for (const [name, f] of COUNTERS) {
      const tr = html('tr', null, t);
      html('td', name, tr);
      html('td', String(f(d.counters)), tr);
    }
  } else {
    html('div', 'no counters (a host NIC, or its switch does not answer)', body, 'muted');
  }
  html('div', 'LLDP / DCBX', body, 'muted');
  html('pre', d.lldp_text || 'no neighbour table', body);
  const b = html('button', 'Capture 2 s → pcapng', body);
  b.addEventListener('click', () => capture(d.id, b));
}

async function capture(id, button) {
  const label = button.textContent;
  button.disabled = true;
  button.textContent = 'capturing…';
  try {
    const r = await fetch(`/api/capture?port=${encodeURIComponent(id)}&seconds=2`);
    if (!r.ok) throw new Error(await r.text());
    const blob = await r.blob();
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = `${st.view.fabric}-${id.replace(':', '-')}.pcapng`;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    button.textContent = `${label} (${fmtBytes(blob.size)} saved)`;
  } catch (e) {
    button.textContent = `capture failed: ${e.message}`;
  } finally {
    button.disabled = false;
  }
}

async function showDetails() {
  const sel = st.selected;
  const body = document.getElementById('detail-body');
  if (!sel) return;
  if (sel.kind === 'node') {
    const d = await getJson(`/api/node?name=${encodeURIComponent(sel.id)}`);
    body.replaceChildren();
    const s = st.frame && st.frame.switches[d.name];
    html('h3', `${d.name} (${d.kind}${s ? ', ' + s.state : ''})`, body);
    if (d.sample) {
      const t = html('table', null, body);
      const head = html('tr', null, t);
      for (const h of ['port', 'peer', 'tx frames', 'rx frames', 'PFC tx/rx', 'ECN', 'drops/trims', 'q depth']) html('th', h, head);
      for (const p of d.sample.ports) {
        const tr = html('tr', null, t);
        html('td', p.name, tr);
        html('td', p.peer, tr);
        html('td', String(p.tx_packets.reduce((a, b) => a + b, 0)), tr);
        html('td', String(p.rx_packets), tr);
        html('td', `${p.pfc_tx_frames.reduce((a, b) => a + b, 0)}/${p.pfc_rx_frames.reduce((a, b) => a + b, 0)}`, tr);
        html('td', String(p.ecn_marked + p.ecn_marked_dequeue), tr);
        const sum = (a) => (a || []).reduce((x, y) => x + y, 0);
        html('td', `${sum(p.admission_dropped)}/${sum(p.trimmed)}`, tr);
        html('td', fmtBytes(p.depth_cell_bytes.reduce((a, b) => a + b, 0)), tr);
      }
    }
    if (d.host) html('div', `job ${d.host.job}: ${d.host.qps.length} QPs`, body);
    html('div', 'LLDP / DCBX', body, 'muted');
    html('pre', d.lldp_text || 'no neighbour table', body);
  } else if (sel.kind === 'link') {
    const l = st.view.links.find((x) => x.id === sel.id);
    const live = st.frame && st.frame.links.find((x) => x.id === sel.id);
    body.replaceChildren();
    html('h3', `${l.a} ↔ ${l.b} (${l.class}, ${fmtRate(l.line_rate_bps)})`, body);
    if (live) {
      for (const [name, d] of [[`${l.a} → ${l.b}`, live.ab], [`${l.b} → ${l.a}`, live.ba]]) {
        html('div', `${name}: ${d.state}${d.util != null ? `, ${(100 * d.util).toFixed(1)} % = ${fmtRate(d.bps)}` : ''}`, body);
      }
    }
    for (const end of [l.a, l.b]) portBlock(body, await getJson(`/api/port?id=${encodeURIComponent(end)}`));
  } else {
    const d = await getJson(`/api/port?id=${encodeURIComponent(sel.id)}`);
    body.replaceChildren();
    portBlock(body, d);
  }
}

// ---------------------------------------------------------------------------------------------
// The stream

function applyFrame(f) {
  const now = performance.now();
  st.frame = f;
  document.getElementById('clock').textContent = `t = ${fmtTime(f.t_ns)} emulated (D = ${st.view.time_dilation})`;
  const banner = document.getElementById('banner');
  banner.hidden = f.fabric_up;
  banner.textContent = f.fabric_up ? '' : `fabric ${st.view.fabric} is down`;
  applyNodes(f);
  applyLinks(f);
  applyPorts(f, now);
  recordQueues(f, now);
  chooseWatched(f, now);
  drawQueueChart();
  drawQueueList(f);
  drawQps(f, now);
  if (f.log.length) addLog(f.log);
}

function connect() {
  const conn = document.getElementById('conn');
  const es = new EventSource('/api/events');
  es.addEventListener('hello', (e) => {
    const h = JSON.parse(e.data);
    document.getElementById('events').replaceChildren();
    addLog(h.log);
    conn.dataset.state = 'live';
    conn.textContent = 'live';
  });
  es.addEventListener('frame', (e) => applyFrame(JSON.parse(e.data)));
  es.onerror = () => {
    conn.dataset.state = 'reconnecting';
    conn.textContent = 'reconnecting…';
  };
}

async function main() {
  st.view = await getJson('/api/view');
  document.getElementById('fabric').textContent = st.view.fabric;
  document.title = `rocefab web: ${st.view.fabric}`;
  drawView(st.view);
  connect();
}

main().catch((e) => console.error('rocefab web:', e));
