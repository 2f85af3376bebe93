// gyr's web UI: one WebSocket to the hub, a snapshot on connect, an update every tick.
// The hub decimates; this page only draws. Every change goes to the program through the hub,
// and comes back through the program's state, so every open page shows it.
// @ts-check: `tsc -p web` checks this file against the page protocol's types
// (`protocol.d.ts`, generated from crates/gyr-hub/src/protocol.rs).
'use strict';

/** @typedef {import('./protocol').ToPage} ToPage */
/** @typedef {import('./protocol').PageRequest} PageRequest */
/** @typedef {import('./protocol').Reply} Reply */
/** @typedef {import('./protocol').ProcessSummary} ProcessSummary */

const MAX_POINTS = 1500;          // points per chart: the last 30 s at the hub's 50 per second
/** An element of the page by id: inputs, selects and canvases alike, so typed loosely. */
const $ = (/** @type {string} */ id) => /** @type {any} */ (document.getElementById(id));
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k.nodeType ? k : String(k));
  return e;
};
const fmt = (x) => {
  if (typeof x !== 'number' || !isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e7)) return x.toExponential(3);
  return Number(x.toPrecision(5)).toString();
};

// Text and attributes are written only when they change: most ticks change nothing on screen.
const setText = (e, s) => { if (e.textContent !== s) e.textContent = s; };
const setClass = (e, s) => { if (e.getAttribute('class') !== s) e.setAttribute('class', s); };

/** The page's state: what the hub sent, and what the user chose. */
const S = {
  /** @type {Map<number, ProcessSummary>} */
  processes: new Map(),
  series: new Map(),
  /** @type {Record<string, import('./protocol').Stats>} */
  stats: {},
  /** @type {Record<string, Record<string, Record<string, number>>>} */
  groups: {},
  /** @type {import('./protocol').LogLine[]} */
  log: [],
  /** @type {import('./protocol').Alert[]} */
  alerts: [],
  /** @type {import('./protocol').ReplayState | null} */
  replay: null,
  /** @type {import('./protocol').HubState | null} */
  hub: null,
  selected: null, charts: [], pending: new Map(), nextId: 1, ws: null, lags: [], maxLag: 0,
  /** Where the page's time goes (`gyr-bench web` reads it): ms per drawn frame, and what came. */
  perf: { frames: [], pending: 0, messages: 0, bytes: 0, summaryBytes: 0 },
  /** Bumped with every set of program summaries: what depends on them only is drawn then. */
  summaryGen: 0,
  objectsKey: '', sensorsKey: '', chartsFor: null, gauges: [], gaugeConf: {},
};

// ---- connection -------------------------------------------------------------------------
// A hub beyond loopback asks for a token: the page asks the user once and keeps it.
async function start() {
  const given = new URLSearchParams(location.search).get('token');
  const token = given || localStorage.getItem('gyr.token') || '';
  let a;
  try {
    a = await (await fetch(`/api/access?token=${encodeURIComponent(token)}`)).json();
  } catch (e) {
    $('conn').textContent = 'hub unreachable: retrying';
    setTimeout(start, 1000);
    return;
  }
  if (!a.ok) {
    $('conn').textContent = 'token needed';
    $('none').hidden = true;
    $('token-form').hidden = false;
    $('token-error').textContent = token ? 'That token is not valid for this hub.' : '';
    $('token-input').focus();
    return;
  }
  $('token-form').hidden = true;
  if (token) localStorage.setItem('gyr.token', token);
  S.token = token;
  document.body.classList.toggle('watch-only', !a.steer);
  $('mode').hidden = a.steer;
  $('mode').textContent = 'watch only';
  $('mode').title = 'this page has the read token: it can watch, not steer';
  connect();
}

$('token-form').onsubmit = (ev) => {
  ev.preventDefault();
  localStorage.setItem('gyr.token', $('token-input').value.trim());
  start();
};

// How far behind the hub the page is, drawing included: shown when it matters, kept for tests.
function keepingUp(lag) {
  S.lags.push(lag);
  if (S.lags.length > 100) S.lags.shift();
  S.maxLag = Math.max(...S.lags);
  const c = $('conn');
  if (lag > 1000) { c.textContent = `behind by ${(lag / 1000).toFixed(1)} s`; c.className = 'conn late'; }
  else if (c.className !== 'conn up') { c.textContent = 'live'; c.className = 'conn up'; }
  c.title = `updates arrive and are drawn ${Math.round(lag)} ms after the hub sends them`;
}

function connect() {
  const q = S.token ? `?token=${encodeURIComponent(S.token)}` : '';
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws${q}`);
  S.ws = ws;
  ws.onopen = () => { $('conn').textContent = 'live'; $('conn').className = 'conn up'; };
  ws.onclose = () => {
    $('conn').textContent = 'hub unreachable: retrying'; $('conn').className = 'conn down';
    for (const [, p] of S.pending) p({ ok: false, error: 'the hub went away' });
    S.pending.clear();
    setTimeout(connect, 1000);
  };
  ws.onmessage = (ev) => {
    const t0 = performance.now();
    const m = JSON.parse(ev.data);
    // The oldest update not yet drawn: how far behind the page is, drawing included.
    if (m.t === 'update' && !S.sentMs) S.sentMs = m.sent_ms;
    handle(m);
    S.perf.pending += performance.now() - t0;
    S.perf.messages += 1;
    S.perf.bytes += ev.data.length;
    if (m.t === 'update' && m.processes) S.perf.summaryBytes += ev.data.length;
  };
}

/**
 * Sends one request for the selected program; resolves with the hub's reply.
 * @param {PageRequest} cmd
 * @returns {Promise<Reply>}
 */
function send(cmd) {
  return new Promise((resolve) => {
    if (!S.ws || S.ws.readyState !== 1) return resolve({ id: null, ok: false, error: 'not connected to the hub' });
    const id = S.nextId++;
    S.pending.set(id, resolve);
    S.ws.send(JSON.stringify({ ...cmd, id, pid: S.selected }));
  });
}

function seriesFor(id) {
  let s = S.series.get(id);
  if (!s) { s = { x: [], y: [], live: false }; S.series.set(id, s); }
  return s;
}

function dropLive(s) {
  if (s.live) { s.x.pop(); s.y.pop(); s.live = false; }
}

/** @param {ToPage} m */
function handle(m) {
  if (m.t === 'reply') {
    const p = S.pending.get(m.id);
    if (p) { S.pending.delete(m.id); p(m); }
    return;
  }
  if (m.t === 'snapshot') {
    S.series.clear();
    S.log = m.log; S.alerts = m.alerts;
  } else {
    S.log.push(...m.log); S.alerts.push(...m.alerts);
    if (S.log.length > 1000) S.log.splice(0, S.log.length - 1000);
  }
  // Statistics come for the series that moved; groups, programs and the hub's state with
  // every few updates (they change slower than the eye follows).
  if (m.t === 'snapshot') S.stats = m.stats || {};
  else if (m.stats) Object.assign(S.stats, m.stats);
  if (m.groups) S.groups = m.groups;
  if (m.replay) S.replay = m.replay;
  if (m.hub) S.hub = m.hub;
  for (const [id, pts] of Object.entries(m.points)) {
    const s = seriesFor(id);
    dropLive(s);
    // A point is taken once: a snapshot's history and the next update may both hold it.
    for (const [t, v] of pts) if (!s.x.length || t > s.x[s.x.length - 1]) { s.x.push(t); s.y.push(v); }
    if (s.x.length > MAX_POINTS) { s.x.splice(0, s.x.length - MAX_POINTS); s.y.splice(0, s.y.length - MAX_POINTS); }
  }
  // The bucket still filling is drawn at once, as the last point, and replaced when it closes.
  for (const [id, [t, v]] of Object.entries(m.live || {})) {
    const s = seriesFor(id);
    dropLive(s);
    if (!s.x.length || t > s.x[s.x.length - 1]) { s.x.push(t); s.y.push(v); s.live = true; }
  }
  if (m.processes) {
    // An update leaves out the thread names the page was already told: keep them.
    if (m.t === 'update') {
      for (const p of m.processes) {
        const before = S.processes.get(p.pid);
        const names = new Map(before ? before.threads.map((t) => [t.id, t.name]) : []);
        for (const t of p.threads) if (t.name === undefined) t.name = names.get(t.id) ?? '';
      }
    }
    S.processes = new Map(m.processes.map((p) => [p.pid, p]));
    S.summaryGen += 1;
    if (S.selected === null || !S.processes.has(S.selected)) {
      const live = m.processes.find((p) => p.alive) || m.processes[0];
      S.selected = live ? live.pid : null;
    }
  }
  scheduleRender();
}

// ---- rendering --------------------------------------------------------------------------
// Updates arrive 25 times a second; the page draws at most once a frame, whatever came since
// the last. A page that falls behind (a slow machine, a hidden tab) draws less, not later.
function scheduleRender() {
  if (S.renderQueued) return;
  S.renderQueued = true;
  requestAnimationFrame(() => {
    S.renderQueued = false;
    const t0 = performance.now();
    render();
    // What this frame cost: the updates folded in since the last one, and the drawing.
    const frame = S.perf.pending + performance.now() - t0;
    S.perf.pending = 0;
    S.perf.frames.push(frame);
    if (S.perf.frames.length > 20000) S.perf.frames.splice(0, 10000);
    if (S.sentMs) { keepingUp(Date.now() - S.sentMs); S.sentMs = 0; }
  });
}

// Rebuilds `box`'s children only when `key` changed since the last time: most ticks change
// nothing on screen, and a node rebuilt under the pointer loses the user's click.
function rebuild(box, key, build) {
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...build());
}

function render() {
  renderReplay();
  renderPrograms();
  const p = S.processes.get(S.selected);
  $('none').hidden = !!p;
  $('program').hidden = !p;
  if (!p) return;
  renderHeader(p);
  renderCharts(p);
  renderGauges(p);
  renderBars(p);
  renderObjects(p);
  renderSensors(p);
  renderThreads(p);
  renderLog(p);
}

const SOURCES = {
  attached: 'the hub found this program and attached to its server',
  pushed: 'this program pushes its events to the hub (GYR_HUB)',
  replay: 'a recorded trace, replayed',
};

// The list of programs is rebuilt only when programs come or go; rates are written in place,
// so an entry stays put under the pointer while the program runs.
function renderPrograms() {
  const nav = $('programs');
  const key = [...S.processes.values()].map((p) => `${p.pid}:${p.source}:${p.command}`).join('|');
  rebuild(nav, key, () => [el('h2', { style: 'padding:0 14px 6px' }, 'Programs'),
    ...[...S.processes.values()].map((p) => el('div', {
      class: 'prog', 'data-pid': p.pid,
      onclick: () => { S.selected = p.pid; S.objectsKey = ''; S.sensorsKey = ''; render(); },
    },
    el('div', {}, el('span', { class: 'pid' }, `pid ${p.pid}`), ' ', el('span', { class: 'muted rate' }),
      ' ', el('span', { class: 'src', title: SOURCES[p.source] || '' }, p.source)),
    el('div', { class: 'cmd' }, p.command),
    el('div', { class: 'threads' })))]);
  for (const item of /** @type {NodeListOf<HTMLElement>} */ (nav.querySelectorAll('.prog'))) {
    const p = S.processes.get(Number(item.dataset.pid));
    if (!p) continue;
    const rate = Object.values(p.types).reduce((a, t) => a + t.rate, 0);
    setClass(item, `prog${p.pid === S.selected ? ' sel' : ''}${p.alive ? '' : ' gone'}`);
    setText(item.querySelector('.rate'), p.source === 'replay' ? 'recording' : p.alive ? `${fmt(rate)} ev/s` : 'exited');
    const threads = /** @type {HTMLElement} */ (item.querySelector('.threads'));
    const selected = p.pid === S.selected;
    threads.hidden = !selected || !p.threads.length;
    // The busiest few threads; a program of a thousand threads lists them in the Threads panel.
    const gen = selected ? `${S.summaryGen}` : '';
    if (threads.dataset.gen === gen) continue;
    threads.dataset.gen = gen;
    const shown = selected ? busiest(p.threads, NAV_THREADS) : [];
    const more = selected ? p.threads.length - shown.length : 0;
    rebuild(threads, shown.map((t) => `${threadName(t)}: ${fmt(t.rate)}/s`).join('\n') + more,
      () => [...shown.map((t) => el('div', {}, `${threadName(t)}: ${fmt(t.rate)}/s`)),
        ...(more > 0 ? [el('div', { class: 'muted' }, `+ ${more} more threads`)] : [])]);
  }
}

function renderHeader(p) {
  // The program's own name for itself: its first steering object, else its binary.
  const name = p.objects?.objects?.[0]?.name || p.command.split(' ')[0].split('/').pop();
  setText($('title'), `${name} · pid ${p.pid}`);
  const st = $('state');
  setText(st, p.source === 'replay' ? 'replay' : p.alive ? (p.state || 'running') : 'exited');
  setClass(st, `badge${p.paused ? ' paused' : ''}${p.alive ? '' : ' gone'}`);
  st.setAttribute('data-testid', 'state');
  $('pause').disabled = !p.alive || p.paused;
  $('resume').disabled = !p.alive || !p.paused;
  $('step').disabled = !p.alive || !p.paused;
  const rate = Object.values(p.types).reduce((a, t) => a + t.rate, 0);
  const rec = S.hub && S.hub.recording;
  rebuild($('counters'), JSON.stringify([rate, p.received, p.missed + p.lost, Object.keys(p.types).length, p.threads.length, rec]), () => [
    el('span', {}, el('b', {}, fmt(rate)), ' events/s'),
    el('span', {}, el('b', {}, p.received.toLocaleString()), ' received by the hub'),
    el('span', {}, el('b', {}, (p.missed + p.lost).toLocaleString()), ' lost'),
    el('span', {}, el('b', {}, Object.keys(p.types).length), ' event types'),
    el('span', {}, el('b', {}, p.threads.length), ' threads'),
    S.hub && S.hub.recording
      ? el('span', { title: `recording into ${S.hub.recording.dir}` }, el('b', {}, 'recording'),
        ` ${S.hub.recording.written.toLocaleString()} events${S.hub.recording.dropped ? `, ${S.hub.recording.dropped.toLocaleString()} dropped` : ''}`)
      : null].filter(Boolean));
}

// Series of the selected program: `pid/type/field`.
function seriesOf(pid) {
  return [...S.series.keys()].filter((id) => id.startsWith(`${pid}/`)).sort();
}

const GROUP_NAMES = ['domain', 'worker', 'rank', 'thread', 'node', 'process'];
const PREFERRED = ['step_time/ms', 'energy/total', 'residual/value', 'thermo/temperature', 'worker_load/seconds'];

// A series picker lists `type.field`; rebuilt only when the series change, keeping the choice.
function fillPick(pick, ids) {
  const have = [...pick.options].map((o) => o.value).join('|');
  if (have === ids.join('|')) return;
  const keep = pick.value;
  pick.replaceChildren(...ids.map((id) => el('option', { value: id }, id.split('/').slice(1).join('.'))));
  if (ids.includes(keep)) pick.value = keep;
}

function renderCharts(p) {
  const ids = seriesOf(p.pid);
  fillPick($('series-pick'), ids);
  if (S.chartsFor !== p.pid) {
    for (const c of S.charts) c.plot.destroy();
    S.charts = []; $('charts').replaceChildren(); S.chartsFor = p.pid;
  }
  if (S.charts.length === 0 && ids.length) {
    const defaults = PREFERRED.map((s) => `${p.pid}/${s}`).filter((id) => ids.includes(id));
    // Else the program's own series that have data: gyr's bookkeeping (gyr.lost…) comes last.
    const own = ids.filter((id) => !id.split('/')[1].startsWith('gyr.') && S.series.get(id).x.length);
    for (const id of (defaults.length ? defaults : own.length ? own : ids).slice(0, 2)) addChart(id);
  }
  for (const c of S.charts) {
    const s = S.series.get(c.id);
    if (s) c.plot.setData(c.log ? positive(s) : [s.x, s.y]);
    const st = S.stats[c.id];
    c.stats.textContent = st
      ? `last ${fmt(s ? s.y[s.y.length - 1] : NaN)} · mean ${fmt(st.mean)} · min ${fmt(st.min)} · max ${fmt(st.max)} · p50 ${fmt(st.p50)} · p99 ${fmt(st.p99)}  (last 10 s, ${st.n} events)`
      : '';
  }
}

function positive(s) {
  return [s.x, s.y.map((v) => (v > 0 ? v : null))];
}

function addChart(id) {
  if (S.charts.some((c) => c.id === id)) return;
  const box = el('div', { class: 'chart', 'data-series': id });
  const logBox = el('input', { type: 'checkbox' });
  const head = el('div', { class: 'chart-head' },
    el('span', { class: 'name' }, id.split('/').slice(1).join('.')),
    el('label', {}, logBox, ' log scale'),
    el('button', { onclick: () => removeChart(id), title: 'remove' }, '×'));
  const area = el('div');
  const stats = el('div', { class: 'stats' });
  box.append(head, area, stats);
  $('charts').append(box);
  const c = { id, log: false, box, area, stats, plot: null };
  c.plot = makePlot(c);
  logBox.addEventListener('change', () => { c.log = logBox.checked; c.plot.destroy(); c.plot = makePlot(c); render(); });
  S.charts.push(c);
}

// Axis labels with as many decimals as the tick spacing needs: a series varying in its
// fourth digit gets four, not five equal labels.
function tickLabels(u, vals, _axis, _space, incr) {
  const decimals = incr > 0 ? Math.min(12, Math.max(0, Math.ceil(-Math.log10(incr) - 1e-9))) : 3;
  return vals.map((v) => {
    const a = Math.abs(v);
    if (v === 0) return '0';
    if (a >= 1e6 || decimals > 5) return Number(v.toPrecision(4)).toExponential();
    return v.toFixed(decimals);
  });
}

function makePlot(c) {
  const width = Math.max(320, (c.area.clientWidth || c.box.clientWidth || 440) - 4);
  const opts = {
    width, height: 170, legend: { show: false }, cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false }, y: c.log ? { distr: 3 } : {} },
    axes: [{ label: 'program time (s)', size: 34, labelSize: 14 }, { size: 70, values: tickLabels }],
    series: [{}, { stroke: '#2f6fde', width: 1.5, points: { show: false } }],
  };
  const s = S.series.get(c.id) || { x: [], y: [] };
  return new uPlot(opts, c.log ? positive(s) : [s.x, s.y], c.area);
}

function removeChart(id) {
  const i = S.charts.findIndex((c) => c.id === id);
  if (i < 0) return;
  S.charts[i].plot.destroy(); S.charts[i].box.remove(); S.charts.splice(i, 1);
}

// ---- gauges -----------------------------------------------------------------------------
// A gauge is saved by `type/field`, not by series, so that it and its design point outlive
// the program (a restart has a new pid); the selected program shows the gauges it has series for.
const GAUGES_KEY = 'gyr.gauges';  // localStorage: { "type/field": { design, range: [lo, hi] | null } }
const NS = 'http://www.w3.org/2000/svg';
const W = 280, CX = 140, CY = 128, R = 96;  // the dial: a half circle in a W × 150 view box
const MAX_TICKS = 6;
const svg = (tag, attrs = {}) => {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
};
// Fraction f of the scale (0: left end, 1: right end) to a point on a circle of radius r.
const polar = (f, r) => [CX - r * Math.cos(Math.PI * f), CY - r * Math.sin(Math.PI * f)];
const arcPath = (f0, f1, r) => {
  const [x0, y0] = polar(f0, r), [x1, y1] = polar(f1, r);
  return `M${x0.toFixed(2)} ${y0.toFixed(2)}A${r} ${r} 0 0 1 ${x1.toFixed(2)} ${y1.toFixed(2)}`;
};
const clamp = (x, a, b) => Math.min(b, Math.max(a, x));

function loadGauges() {
  let v;
  try { v = JSON.parse(localStorage.getItem(GAUGES_KEY)); } catch { return {}; }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return {};
  // Whatever was saved by hand or by an older page: keep only what makes sense.
  const out = {};
  for (const [k, c] of Object.entries(v)) {
    const r = c?.range;
    out[k] = {
      design: Number.isFinite(c?.design) ? c.design : null,
      range: Array.isArray(r) && Number.isFinite(r[0]) && Number.isFinite(r[1]) && r[0] < r[1] ? [r[0], r[1]] : null,
    };
  }
  return out;
}

function saveGauges() {
  try { localStorage.setItem(GAUGES_KEY, JSON.stringify(S.gaugeConf)); } catch { /* storage off: this page only */ }
}

function renderGauges(p) {
  const ids = seriesOf(p.pid);
  fillPick($('gauge-pick'), ids);
  const want = Object.keys(S.gaugeConf).map((k) => `${p.pid}/${k}`).filter((id) => ids.includes(id));
  // DOM is rebuilt only when the set of gauges changes; every tick just moves needles.
  if (want.join('|') !== S.gauges.map((g) => g.id).join('|')) {
    const old = new Map(S.gauges.map((g) => [g.id, g]));
    S.gauges = want.map((id) => old.get(id) || makeGauge(id));
    $('gauges').replaceChildren(...S.gauges.map((g) => g.box));
  }
  $('gauges-empty').hidden = S.gauges.length > 0;
  for (const g of S.gauges) updateGauge(g);
}

function addGauge(id) {
  const key = id.split('/').slice(1).join('/');
  if (!S.gaugeConf[key]) { S.gaugeConf[key] = { design: null, range: null }; saveGauges(); }
}

function removeGauge(g) {
  delete S.gaugeConf[g.key]; saveGauges();
  S.gauges = S.gauges.filter((x) => x !== g); g.box.remove();
  $('gauges-empty').hidden = S.gauges.length > 0;
}

function makeGauge(id) {
  const key = id.split('/').slice(1).join('/');
  const field = key.split('/').pop();
  const g = { id, key, scaleKey: '', markKey: '', labelWidth: 0 };
  const dial = svg('svg', { class: 'dial', viewBox: `0 0 ${W} 150`, role: 'img', 'aria-label': `${key} gauge` });
  g.band = svg('path', { class: 'g-band' });
  g.ticks = [];
  const ticks = svg('g');
  for (let i = 0; i < MAX_TICKS; i++) {
    const line = svg('line', { class: 'g-tick', x1: CX, y1: CY - R - 8, x2: CX, y2: CY - R + 8 });
    const text = svg('text', { class: 'g-tick-label' });
    ticks.append(line, text); g.ticks.push({ line, text });
  }
  // The mark is drawn at the top and turned into place; its label is placed apart so it stays level.
  g.mark = svg('g', { class: 'g-mark', 'data-testid': 'gauge-design-mark' });
  g.mark.append(svg('line', { x1: CX, y1: CY - R - 9, x2: CX, y2: CY - R + 9 }),
    svg('path', { d: `M${CX - 5} ${CY - R - 17}h10l-5 7z` }));
  g.markLabel = svg('text', { class: 'g-mark-label', 'data-testid': 'gauge-design-label' });
  g.leader = svg('line', { class: 'g-leader' });
  g.needle = svg('g', { class: 'g-needle', 'data-testid': 'gauge-needle' });
  g.needle.append(svg('line', { x1: CX, y1: CY, x2: CX - R + 16, y2: CY }), svg('circle', { cx: CX, cy: CY, r: 6 }));
  dial.append(svg('path', { class: 'g-track', d: arcPath(0, 1, R) }), g.band, ticks, g.mark, g.leader, g.markLabel, g.needle);

  g.value = el('span', { class: 'g-num', 'data-testid': 'gauge-value' }, '–');
  g.dev = el('div', { class: 'g-dev', 'data-testid': 'gauge-deviation' });
  g.msg = el('span', { class: 'err-msg', 'data-testid': 'gauge-error' });
  const conf = S.gaugeConf[key];
  const design = el('input', { class: 'g-in', 'data-testid': 'gauge-design', placeholder: 'none', 'aria-label': `${key} design point`, value: conf.design ?? '' });
  const range = el('input', { class: 'g-in', 'data-testid': 'gauge-range', placeholder: 'auto', title: 'min..max, or empty for the last 10 s', 'aria-label': `${key} scale range`, value: conf.range ? conf.range.join('..') : '' });
  design.addEventListener('keydown', (ev) => gaugeInput(ev, g, design, 'design'));
  range.addEventListener('keydown', (ev) => gaugeInput(ev, g, range, 'range'));
  g.box = el('div', { class: 'gauge', 'data-testid': 'gauge', 'data-key': key, 'data-series': id },
    el('div', { class: 'chart-head' },
      el('span', { class: 'name' }, key.split('/').join('.')),
      el('button', { onclick: () => removeGauge(g), title: 'remove', 'data-testid': 'gauge-remove' }, '×')),
    dial,
    el('div', { class: 'g-read' }, g.value, ' ', el('span', { class: 'g-field' }, field)),
    g.dev,
    el('div', { class: 'g-foot' },
      el('label', {}, 'design ', design), el('label', {}, 'range ', range), g.msg));
  return g;
}

const NUM = '\\s*([-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:e[-+]?\\d+)?)\\s*';
const RANGE_RE = new RegExp(`^${NUM}(?:\\.\\.|,)${NUM}$`, 'i');

// Enter applies, Escape goes back to the saved value; a bad entry stays in the box, marked.
function gaugeInput(ev, g, input, what) {
  const conf = S.gaugeConf[g.key];
  if (!conf) return;
  const shown = () => (what === 'design' ? String(conf.design ?? '') : conf.range ? conf.range.join('..') : '');
  if (ev.key === 'Escape') { input.value = shown(); input.classList.remove('err'); g.msg.textContent = ''; input.blur(); return; }
  if (ev.key !== 'Enter') return;
  const text = input.value.trim();
  let error = '';
  if (what === 'design') {
    const v = Number(text);
    if (text === '') conf.design = null;
    else if (Number.isFinite(v)) conf.design = v;
    else error = `design point: “${text}” is not a number`;
  } else {
    const m = RANGE_RE.exec(text);
    if (text === '') conf.range = null;
    else if (!m) error = 'range: min..max, e.g. 0..10';
    else if (!(Number(m[1]) < Number(m[2]))) error = 'range: min must be below max';
    else conf.range = [Number(m[1]), Number(m[2])];
  }
  input.classList.toggle('err', !!error);
  g.msg.textContent = error;
  if (error) return;
  saveGauges();
  input.value = shown();
  input.blur();
  g.scaleKey = ''; g.markKey = '';
  updateGauge(g);
}

function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(raw)), m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

// Ticks at round numbers: at most `n` intervals, fewer when the labels are long, so they fit.
function gaugeScale(lo, hi, fixed) {
  if (!(hi > lo) || !Number.isFinite(hi - lo)) return null;
  const round = (x) => Number(x.toPrecision(12));
  for (const n of [5, 3, 2]) {
    let step = niceStep((hi - lo) / n), a, b;
    for (;;) {
      a = Math.floor(lo / step); b = Math.ceil(hi / step);
      if (b - a <= n) break;
      step = niceStep(step * 1.01);
    }
    const lo2 = fixed ? lo : round(a * step), hi2 = fixed ? hi : round(b * step);
    const mant = round(step / 10 ** Math.floor(Math.log10(step)));
    const dec = Math.max(0, -Math.floor(Math.log10(step)) + (mant === 2.5 ? 1 : 0));
    // Enough digits that neighbouring ticks differ, even on a very narrow scale.
    const digits = clamp(Math.floor(Math.log10(Math.max(Math.abs(lo), Math.abs(hi)))) + dec + 1, 1, 15);
    const label = (x) => (Math.abs(x) >= 1e6 || dec > 6 ? Number(x.toPrecision(digits)).toString() : x.toFixed(dec));
    const ticks = [];
    for (let k = Math.ceil(lo2 / step - 1e-9); k * step <= hi2 + step * 1e-9; k++) ticks.push(round(k * step));
    const labels = ticks.map(label);
    if (n === 2 || Math.max(...labels.map((l) => l.length)) <= (n === 5 ? 6 : 8)) {
      return { lo: lo2, hi: hi2, ticks, labels };
    }
  }
}

// The scale: the user's range, else the last 10 s widened a little, always with the design point.
function scaleFor(g, v) {
  const conf = S.gaugeConf[g.key];
  if (conf.range) return gaugeScale(conf.range[0], conf.range[1], true);
  const st = S.stats[g.id];
  let lo = Math.min(v, st ? st.min : v), hi = Math.max(v, st ? st.max : v);
  if (conf.design !== null) { lo = Math.min(lo, conf.design); hi = Math.max(hi, conf.design); }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return null;
  const size = Math.max(Math.abs(lo), Math.abs(hi));
  // A flat series still gets a dial: a few percent of its size either side.
  const pad = hi - lo > size * 1e-9 ? (hi - lo) * 0.1 : (size ? size * 0.05 : 1);
  return gaugeScale(lo - pad, hi + pad, false);
}

// Within ±10% of the design point is fine, up to ±25% a warning, beyond that bad. A design
// point of 0 has no percentage: the distance is judged against the dial's span instead.
function deviation(v, d, span) {
  const rel = d !== 0 ? (v - d) / Math.abs(d) : (v - d) / span;
  const cls = Math.abs(rel) <= 0.1 ? 'good' : Math.abs(rel) <= 0.25 ? 'warn' : 'bad';
  const pct = Math.abs(rel * 100);
  if (d !== 0 && pct < 0.05) return { text: 'on design', cls };
  const size = d !== 0 ? `${pct < 10 ? pct.toFixed(1) : pct.toFixed(0)}%` : fmt(Math.abs(v - d));
  return { text: `${v > d ? '+' : '-'}${size} ${v > d ? 'over' : 'under'} design`, cls };
}

function updateGauge(g) {
  const s = S.series.get(g.id);
  const v = s && s.y.length ? s.y[s.y.length - 1] : NaN;
  const conf = S.gaugeConf[g.key];
  const sc = Number.isFinite(v) ? scaleFor(g, v) : null;
  if (!sc) {
    for (const e of [g.needle, g.mark, g.markLabel, g.leader, g.band]) e.style.display = 'none';
    g.scaleKey = g.markKey = '';
    setText(g.value, '–'); setText(g.dev, 'no data yet'); setClass(g.value, 'g-num'); setClass(g.dev, 'g-dev');
    return;
  }
  const frac = (x) => (x - sc.lo) / (sc.hi - sc.lo);
  const scaleKey = `${sc.lo}|${sc.hi}|${sc.labels.join(',')}`;
  if (scaleKey !== g.scaleKey) {
    g.scaleKey = scaleKey;
    g.ticks.forEach((t, i) => {
      const on = i < sc.ticks.length;
      t.line.style.display = t.text.style.display = on ? '' : 'none';
      if (!on) return;
      const f = frac(sc.ticks[i]);
      t.line.setAttribute('transform', `rotate(${(180 * f - 90).toFixed(2)} ${CX} ${CY})`);
      // Labels inside the arc, leaning towards the centre at the sides.
      const [x, y] = polar(f, R - 22), c = -Math.cos(Math.PI * f);
      t.text.setAttribute('x', x.toFixed(1)); t.text.setAttribute('y', y.toFixed(1));
      t.text.setAttribute('text-anchor', c < -0.4 ? 'start' : c > 0.4 ? 'end' : 'middle');
      t.text.textContent = sc.labels[i];
    });
  }
  const d = conf.design;
  const markKey = `${scaleKey}|${d}`;
  if (markKey !== g.markKey) {
    g.markKey = markKey;
    const show = d !== null && frac(d) >= 0 && frac(d) <= 1;
    g.mark.style.display = g.markLabel.style.display = g.band.style.display = show ? '' : 'none';
    if (!show) g.leader.style.display = 'none';
    if (show) {
      const f = frac(d);
      g.mark.setAttribute('transform', `rotate(${(180 * f - 90).toFixed(2)} ${CX} ${CY})`);
      const tol = d !== 0 ? 0.1 * Math.abs(d) : 0.1 * (sc.hi - sc.lo);
      g.band.setAttribute('d', arcPath(clamp(frac(d - tol), 0, 1), clamp(frac(d + tol), 0, 1), R));
      placeMarkLabel(g, f, `design ${fmt(d)}`);
    }
  }
  const f = clamp(frac(v), -0.02, 1.02);  // off the scale: the needle rests just past its end
  g.needle.style.display = '';
  g.needle.setAttribute('transform', `rotate(${(180 * f).toFixed(2)} ${CX} ${CY})`);
  g.needle.setAttribute('data-value', String(v));
  setText(g.value, fmt(v));
  const dv = d === null ? { text: 'no design point', cls: '' } : deviation(v, d, sc.hi - sc.lo);
  setClass(g.value, `g-num ${dv.cls}`.trim()); setClass(g.dev, `g-dev ${dv.cls}`.trim());
  setText(g.dev, dv.text);
}

// The design label sits level, outside the arc by its mark. Near the ends of the dial a long
// label would leave the view box: it is pushed in, then up clear of the arc, with a leader line.
function placeMarkLabel(g, f, text) {
  const t = g.markLabel;
  if (t.textContent !== text) { t.textContent = text; g.labelWidth = 0; }
  if (!g.labelWidth) g.labelWidth = (t.isConnected && t.getComputedTextLength()) || 0;
  const w = g.labelWidth || 7 * text.length, h = 8;
  const [x0, y0] = polar(f, R + 22);
  let x = x0, y = y0;
  const c = -Math.cos(Math.PI * f);
  const anchor = c < -0.4 ? 'end' : c > 0.4 ? 'start' : 'middle';
  if (anchor === 'end' && x - w < 2) x = 2 + w;
  if (anchor === 'start' && x + w > W - 2) x = W - 2 - w;
  if (anchor === 'middle') x = clamp(x, 2 + w / 2, W - 2 - w / 2);
  if (anchor !== 'middle') {
    const dx = Math.abs(CX - x), clear = R + 16;
    if (dx < clear) y = Math.min(y, CY - Math.sqrt(clear * clear - dx * dx) - h);
  }
  y = Math.max(y, h);
  t.setAttribute('x', x.toFixed(1)); t.setAttribute('y', y.toFixed(1));
  t.setAttribute('text-anchor', anchor);
  const moved = Math.hypot(x - x0, y - y0) > 6;
  g.leader.style.display = moved ? '' : 'none';
  if (moved) {
    // Up from the mark to the label's underside, outside the arc.
    const [tx, ty] = polar(f, R + 18);
    const left = anchor === 'end' ? x - w : anchor === 'start' ? x : x - w / 2;
    g.leader.setAttribute('x1', tx.toFixed(1)); g.leader.setAttribute('y1', ty.toFixed(1));
    g.leader.setAttribute('x2', clamp(tx, left + 2, left + w - 2).toFixed(1)); g.leader.setAttribute('y2', (y + h - 1).toFixed(1));
  }
}

function renderBars(p) {
  const pick = $('group-pick');
  const opts = [];
  for (const [key, groups] of Object.entries(S.groups)) {
    if (!key.startsWith(`${p.pid}/`)) continue;
    const fields = new Set();
    if (Object.keys(groups).length < 2) continue;
    for (const g of Object.values(groups)) for (const f of Object.keys(g)) fields.add(f);
    for (const f of fields) opts.push(`${key}/${f}`);
  }
  // Domains, workers and ranks first; time spent before other values.
  const rank = (o) => {
    const [, , g, f] = o.split('/');
    return (GROUP_NAMES.includes(g) ? 0 : 2) + (f === 'seconds' || f === 'ms' ? 0 : 1);
  };
  opts.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const have = [...pick.options].map((o) => o.value).join('|');
  if (have !== opts.join('|')) {
    const keep = pick.value;
    pick.replaceChildren(...opts.map((o) => {
      const [, ty, g, f] = o.split('/');
      return el('option', { value: o }, `${ty}.${f} by ${g}`);
    }));
    if (opts.includes(keep)) pick.value = keep;
  }
  const bars = $('bars');
  if (!pick.value) { rebuild(bars, 'none', () => [el('p', { class: 'muted' }, 'No per-domain or per-worker events yet.')]); return; }
  const [pid, ty, g, f] = pick.value.split('/');
  const groups = S.groups[`${pid}/${ty}/${g}`] || {};
  const rows = Object.entries(groups).filter(([, v]) => f in v).sort((a, b) => Number(a[0]) - Number(b[0]));
  const vals = rows.map(([, v]) => v[f]);
  // A balance (max ÷ mean, bars over 1.2 × the mean in red) means something for amounts like
  // time or work, which are never negative; other values get plain bars of their magnitude.
  const amounts = vals.every((v) => v >= 0);
  const max = Math.max(...vals.map(Math.abs), 1e-12);
  const mean = vals.reduce((a, b) => a + b, 0) / (vals.length || 1);
  bars.className = 'bars';
  rebuild(bars, `${pick.value}:${JSON.stringify(rows)}`, () => [...rows.map(([k, v]) => el('div', { class: 'row' },
    el('span', { class: 'label' }, `${g} ${k}`),
    el('div', { class: 'track' }, el('div', { class: `fill${amounts && v[f] > 1.2 * mean ? ' hot' : ''}`, style: `width:${(100 * Math.abs(v[f]) / max).toFixed(1)}%` })),
    el('span', { class: 'val' }, fmt(v[f])))),
  el('div', { class: 'stats' }, amounts
    ? `max ÷ mean ${fmt(max / (mean || 1))}: red bars are over 1.2 × the mean`
    : 'bars show each value\'s magnitude (some are below zero: no balance ratio)')]);
}


function range(a) {
  if (a.min === null && a.max === null) return '';
  return `${a.min ?? ''}..${a.max ?? ''}`;
}

function renderObjects(p) {
  const box = $('objects');
  const o = p.objects;
  const key = o ? JSON.stringify(o.objects.map((x) => [x.name, x.attributes.map((a) => a.path), x.actuators.map((a) => a.name)])) + JSON.stringify(o.functions.map((f) => f.name)) : `none/${p.pid}/${p.source}`;
  if (key !== S.objectsKey) {
    S.objectsKey = key;
    box.replaceChildren();
    if (!o || (!o.objects.length && !o.functions.length)) {
      box.append(el('p', { class: 'muted' }, p.source === 'replay'
        ? 'A recording being replayed: it can be watched, not steered.'
        : 'No steering objects.'));
      return;
    }
    for (const obj of o.objects) {
      box.append(el('div', { class: 'obj-name' }, obj.name, obj.description ? el('span', { class: 'muted' }, ` — ${obj.description}`) : null));
      const t = el('table');
      t.append(el('tr', {}, el('th', {}, 'attribute'), el('th', {}, 'value'), el('th', {}, 'unit, range')));
      for (const a of obj.attributes) {
        const cell = el('td');
        if (a.read_only) {
          cell.append(el('span', { class: 'ro num', 'data-path': a.path }, a.value));
        } else if (a.type === 'bool') {
          const box = el('input', { type: 'checkbox', 'data-path': a.path, 'aria-label': a.path });
          box.checked = a.value === 'true';
          const msg = el('span', { class: 'err-msg', 'data-msg': a.path });
          box.addEventListener('change', async () => {
            const r = await send({ op: 'set', path: a.path, value: String(box.checked) });
            msg.className = r.ok ? 'ok-msg' : 'err-msg';
            msg.textContent = r.ok ? ' ✓' : ` ${r.error}`;
            if (!r.ok) box.checked = !box.checked;
          });
          cell.append(box, msg);
        } else {
          const input = el('input', { class: 'attr-input', 'data-path': a.path, value: a.value, title: a.description || a.path });
          const msg = el('div', { class: 'err-msg', 'data-msg': a.path });
          input.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') setAttr(a.path, input, msg); if (ev.key === 'Escape') input.blur(); });
          cell.append(input, msg);
        }
        t.append(el('tr', {}, el('td', { title: a.description }, a.name), cell,
          el('td', { class: 'muted' }, [a.unit, range(a), a.read_only ? 'read-only' : ''].filter(Boolean).join(', '))));
      }
      box.append(t);
      for (const act of obj.actuators) box.append(operation(act, 'actuator'));
    }
    for (const f of o.functions) box.append(operation(f, 'function'));
  }
  if (!o) return;
  for (const obj of o.objects) for (const a of obj.attributes) {
    const node = /** @type {HTMLInputElement} */ (box.querySelector(`[data-path="${CSS.escape(a.path)}"]`));
    if (!node) continue;
    if (node.type === 'checkbox') node.checked = a.value === 'true';
    else if (node.tagName === 'INPUT') { if (document.activeElement !== node && !node.classList.contains('err')) node.value = a.value; }
    else node.textContent = a.value;
  }
}

function operation(op, kind) {
  const inputs = op.params.map((p) => el('input', { placeholder: p.name, title: `${p.name}: ${p.type}`, 'aria-label': `${op.target} ${p.name}` }));
  const out = el('span', { class: 'muted' });
  const run = async () => {
    out.className = 'muted'; out.textContent = '…';
    const r = await send({ op: 'call', target: op.target, args: inputs.map((i) => i.value) });
    out.className = r.ok ? 'ok-msg' : 'err-msg';
    out.textContent = r.ok ? `→ ${r.result}` : r.error;
  };
  return el('div', { class: 'act', title: op.description },
    el('button', { onclick: run, 'data-op': op.target }, `${op.target}`), ...inputs, out);
}

async function setAttr(path, input, msg) {
  const r = await send({ op: 'set', path, value: input.value });
  if (r.ok) {
    input.classList.remove('err'); msg.className = 'ok-msg'; msg.textContent = `✓ ${r.result.split(': ').pop()}`;
    setTimeout(() => { if (msg.className === 'ok-msg') msg.textContent = ''; }, 3000);
    input.blur();
  } else {
    input.classList.add('err'); msg.className = 'err-msg'; msg.textContent = r.error;
  }
}

function renderSensors(p) {
  const box = $('sensors');
  const list = p.sensors || [];
  const key = `${p.pid}:` + list.map((s) => `${s.type}/${s.instance}/${s.enabled}/${s.active}/${s.rate}`).join('|');
  if (key === S.sensorsKey) return;
  S.sensorsKey = key;
  if (!list.length) {
    box.replaceChildren(el('p', { class: 'muted' }, p.source === 'replay'
      ? 'A recording: its sensors cannot be switched.'
      : 'No sensors.'));
    return;
  }
  const t = el('table');
  t.append(el('tr', {}, el('th', {}, 'type'), el('th', {}, 'state'), el('th', {}, 'rate'), el('th', {}, '')));
  const seen = new Set();
  for (const s of list) {
    if (seen.has(s.type)) continue; seen.add(s.type);
    const rate = el('input', { placeholder: 'every 10 · rate 100', style: 'width:110px' });
    const out = el('div', { class: 'err-msg' });
    const act = async (setting) => {
      const r = await send({ op: 'sensor', type: s.type, setting });
      out.textContent = r.ok ? '' : r.error;
    };
    rate.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') act(rate.value.trim()); });
    t.append(el('tr', {}, el('td', {}, s.type, el('div', { class: 'muted' }, s.kind)),
      el('td', {}, s.active ? 'on' : (s.enabled ? 'idle' : 'off')), el('td', {}, s.rate),
      el('td', {}, el('button', { onclick: () => act(s.enabled ? 'off' : 'on') }, s.enabled ? 'Off' : 'On'), ' ', rate, out)));
  }
  box.replaceChildren(t);
}

// Threads listed by name; a program's thousand threads are summed up, the busiest listed.
const NAV_THREADS = 6;
const PANEL_THREADS = 30;
const threadName = (t) => t.name || `thread ${t.id}`;
/** The `n` threads with the highest rate, busiest first. */
function busiest(threads, n) {
  return threads.length <= n ? threads : [...threads].sort((a, b) => b.rate - a.rate).slice(0, n);
}

function renderThreads(p) {
  const box = $('threads');
  // Drawn when new summaries came (every few updates), not every frame.
  const gen = `${p.pid}:${S.summaryGen}`;
  if (box.dataset.gen === gen) return;
  box.dataset.gen = gen;
  box.replaceChildren(...threadTables(p));
}

function threadTables(p) {
  const t = el('table');
  const shown = busiest(p.threads, PANEL_THREADS);
  t.append(el('tr', {}, el('th', {}, shown.length < p.threads.length ? `busiest ${shown.length} of ${p.threads.length} threads` : 'thread'),
    el('th', {}, 'events'), el('th', {}, 'per second')));
  for (const th of shown) t.append(el('tr', {}, el('td', {}, th.name || `#${th.id}`), el('td', { class: 'num' }, th.count.toLocaleString()), el('td', { class: 'num' }, fmt(th.rate))));
  if (shown.length < p.threads.length) {
    const rates = p.threads.map((x) => x.rate).sort((a, b) => a - b);
    const total = rates.reduce((a, r) => a + r, 0);
    const median = rates[Math.floor(rates.length / 2)];
    t.append(el('tr', { class: 'muted' }, el('td', {}, `all ${p.threads.length} threads`),
      el('td', { class: 'num' }, p.threads.reduce((a, x) => a + x.count, 0).toLocaleString()),
      el('td', { class: 'num' }, `${fmt(total)} (per thread ${fmt(rates[0])} · ${fmt(median)} · ${fmt(rates[rates.length - 1])})`)));
  }
  const types = el('table');
  types.append(el('tr', {}, el('th', {}, 'event type'), el('th', {}, 'events'), el('th', {}, 'per second')));
  for (const [name, ty] of Object.entries(p.types)) types.append(el('tr', {}, el('td', {}, name), el('td', { class: 'num' }, ty.count.toLocaleString()), el('td', { class: 'num' }, fmt(ty.rate))));
  return [t, el('div', { style: 'height:8px' }), types];
}

function renderLog(p) {
  const mine = S.log.filter((e) => e.pid === p.pid).slice(-200);
  const box = $('log');
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  const last = mine[mine.length - 1];
  rebuild(box, `${p.pid}:${mine.length}:${last ? `${last.t}/${last.action}` : ''}`, () => (mine.length
    ? mine.map((e) => el('div', { class: e.error ? 'refused' : '' },
      `${e.t.toFixed(3)}s  ${e.who}  ${e.action}${e.error ? '  REFUSED: ' + e.error : ''}`))
    : [el('p', { class: 'muted' }, 'Nothing steered yet.')]));
  if (atBottom) box.scrollTop = box.scrollHeight;
  const alerts = S.alerts.filter((a) => a.pid === p.pid).slice(-100);
  if (alerts.length) {
    const lastAlert = alerts[alerts.length - 1];
    rebuild($('alerts'), `${p.pid}:${alerts.length}:${lastAlert.t}`, () => alerts.map((a) => el('div', { class: 'refused' },
      `${a.t.toFixed(3)}s  ${Object.entries(a.fields).map(([k, v]) => `${k}: ${v}`).join(', ')}`)));
  }
}

// ---- controls ---------------------------------------------------------------------------
$('pause').onclick = () => send({ op: 'control', action: 'pause' });
$('resume').onclick = () => send({ op: 'control', action: 'resume' });
$('step').onclick = () => send({ op: 'control', action: 'step', steps: 1 });
$('add-chart').onclick = () => { const v = $('series-pick').value; if (v) { addChart(v); render(); } };
$('add-gauge').onclick = () => { const v = $('gauge-pick').value; if (v) { addGauge(v); render(); } };
$('group-pick').onchange = () => render();

// The command line: `gyr attach`'s steering commands for the selected program, sent as text
// and parsed by the hub with the grammar every gyr client shares.
$('cli').onsubmit = async (ev) => {
  ev.preventDefault();
  const input = $('cli-input');
  const line = input.value.trim();
  const out = $('cli-out');
  if (!line) return;
  const r = await send({ op: 'line', line });
  out.className = `cli-out ${r.ok ? 'ok' : 'err'}`;
  out.textContent = r.ok ? (r.result || 'done') : r.error;
  if (r.ok) input.value = '';
};

// ---- replay -----------------------------------------------------------------------------
const clock = (s) => `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, '0')}`;
function renderReplay() {
  const r = S.replay;
  $('replay-bar').hidden = !r;
  if (!r) return;
  $('replay-play').textContent = r.paused ? 'Play' : 'Pause';
  const pos = $('replay-pos');
  pos.max = r.duration_s;
  if (!S.scrubbing) pos.value = r.position_s;
  $('replay-time').textContent = `${clock(S.scrubbing ? Number(pos.value) : r.position_s)} / ${clock(r.duration_s)}`;
  const speed = $('replay-speed');
  if (document.activeElement !== speed) speed.value = String(r.speed);
  $('replay-files').textContent = r.files.map((f) => f.path.split('/').pop()).join(', ');
}
$('replay-play').onclick = () => send({ op: 'replay', action: S.replay && S.replay.paused ? 'play' : 'pause' });
$('replay-speed').onchange = (/** @type {any} */ ev) => send({ op: 'replay', action: 'speed', value: Number(ev.target.value) });
$('replay-pos').oninput = () => { S.scrubbing = true; renderReplay(); };
$('replay-pos').onchange = async (/** @type {any} */ ev) => {
  await send({ op: 'replay', action: 'seek', value: Number(ev.target.value) });
  S.scrubbing = false;
};

S.gaugeConf = loadGauges();
start();
