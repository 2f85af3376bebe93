// gyr's web UI: one WebSocket to the hub, a snapshot on connect, an update every tick.
// The hub decimates; this page only draws. Every change goes to the program through the hub,
// and comes back through the program's state, so every open page shows it.
'use strict';

const MAX_POINTS = 1500;          // points per chart: the last 30 s at the hub's 50 per second
const $ = (id) => document.getElementById(id);
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

const S = {
  processes: new Map(), series: new Map(), stats: {}, groups: {}, log: [], alerts: [],
  selected: null, charts: [], pending: new Map(), nextId: 1, ws: null,
  objectsKey: '', sensorsKey: '', chartsFor: null,
};

// ---- connection -------------------------------------------------------------------------
function connect() {
  const ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`);
  S.ws = ws;
  ws.onopen = () => { $('conn').textContent = 'live'; $('conn').className = 'conn up'; };
  ws.onclose = () => {
    $('conn').textContent = 'hub unreachable: retrying'; $('conn').className = 'conn down';
    for (const [, p] of S.pending) p({ ok: false, error: 'the hub went away' });
    S.pending.clear();
    setTimeout(connect, 1000);
  };
  ws.onmessage = (ev) => handle(JSON.parse(ev.data));
}

function send(cmd) {
  return new Promise((resolve) => {
    if (!S.ws || S.ws.readyState !== 1) return resolve({ ok: false, error: 'not connected to the hub' });
    const id = S.nextId++;
    S.pending.set(id, resolve);
    S.ws.send(JSON.stringify({ ...cmd, id, pid: S.selected }));
  });
}

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
  S.stats = m.stats; S.groups = m.groups;
  for (const [id, pts] of Object.entries(m.points)) {
    let s = S.series.get(id);
    if (!s) { s = { x: [], y: [] }; S.series.set(id, s); }
    for (const [t, v] of pts) { s.x.push(t); s.y.push(v); }
    if (s.x.length > MAX_POINTS) { s.x.splice(0, s.x.length - MAX_POINTS); s.y.splice(0, s.y.length - MAX_POINTS); }
  }
  S.processes = new Map(m.processes.map((p) => [p.pid, p]));
  if (S.selected === null || !S.processes.has(S.selected)) {
    const live = m.processes.find((p) => p.alive) || m.processes[0];
    S.selected = live ? live.pid : null;
  }
  render();
}

// ---- rendering --------------------------------------------------------------------------
function render() {
  renderPrograms();
  const p = S.processes.get(S.selected);
  $('none').hidden = !!p;
  $('program').hidden = !p;
  if (!p) return;
  renderHeader(p);
  renderCharts(p);
  renderBars(p);
  renderObjects(p);
  renderSensors(p);
  renderThreads(p);
  renderLog(p);
}

function renderPrograms() {
  const nav = $('programs');
  nav.replaceChildren(el('h2', { style: 'padding:0 14px 6px' }, 'Programs'));
  for (const p of S.processes.values()) {
    const rate = Object.values(p.types).reduce((a, t) => a + t.rate, 0);
    const item = el('div', {
      class: `prog${p.pid === S.selected ? ' sel' : ''}${p.alive ? '' : ' gone'}`,
      'data-pid': p.pid,
      onclick: () => { S.selected = p.pid; S.objectsKey = ''; S.sensorsKey = ''; render(); },
    },
    el('div', {}, el('span', { class: 'pid' }, `pid ${p.pid}`), ' ',
      el('span', { class: 'muted' }, p.alive ? `${fmt(rate)} ev/s` : 'exited')),
    el('div', { class: 'cmd' }, p.command));
    if (p.pid === S.selected && p.threads.length) {
      item.append(el('div', { class: 'threads' },
        ...p.threads.map((t) => el('div', {}, `${t.name || 'thread ' + t.id}: ${fmt(t.rate)}/s`))));
    }
    nav.append(item);
  }
}

function renderHeader(p) {
  // The program's own name for itself: its first steering object, else its binary.
  const name = p.objects?.objects?.[0]?.name || p.command.split(' ')[0].split('/').pop();
  $('title').textContent = `${name} · pid ${p.pid}`;
  const st = $('state');
  st.textContent = p.alive ? (p.state || 'running') : 'exited';
  st.className = `badge${p.paused ? ' paused' : ''}${p.alive ? '' : ' gone'}`;
  st.setAttribute('data-testid', 'state');
  $('pause').disabled = !p.alive || p.paused;
  $('resume').disabled = !p.alive || !p.paused;
  $('step').disabled = !p.alive || !p.paused;
  const rate = Object.values(p.types).reduce((a, t) => a + t.rate, 0);
  $('counters').replaceChildren(
    el('span', {}, el('b', {}, fmt(rate)), ' events/s'),
    el('span', {}, el('b', {}, p.received.toLocaleString()), ' received by the hub'),
    el('span', {}, el('b', {}, (p.missed + p.lost).toLocaleString()), ' lost'),
    el('span', {}, el('b', {}, Object.keys(p.types).length), ' event types'),
    el('span', {}, el('b', {}, p.threads.length), ' threads'));
}

// Series of the selected program: `pid/type/field`.
function seriesOf(pid) {
  return [...S.series.keys()].filter((id) => id.startsWith(`${pid}/`)).sort();
}

const GROUP_NAMES = ['domain', 'worker', 'rank', 'thread', 'node', 'process'];
const PREFERRED = ['step_time/ms', 'energy/total', 'residual/value', 'thermo/temperature', 'worker_load/seconds'];

function renderCharts(p) {
  const ids = seriesOf(p.pid);
  const pick = $('series-pick');
  const have = [...pick.options].map((o) => o.value).join('|');
  if (have !== ids.join('|')) {
    pick.replaceChildren(...ids.map((id) => el('option', { value: id }, id.split('/').slice(1).join('.'))));
  }
  if (S.chartsFor !== p.pid) {
    for (const c of S.charts) c.plot.destroy();
    S.charts = []; $('charts').replaceChildren(); S.chartsFor = p.pid;
  }
  if (S.charts.length === 0 && ids.length) {
    const defaults = PREFERRED.map((s) => `${p.pid}/${s}`).filter((id) => ids.includes(id));
    for (const id of (defaults.length ? defaults : ids.slice(0, 1)).slice(0, 2)) addChart(id);
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

function makePlot(c) {
  const width = Math.max(320, (c.area.clientWidth || c.box.clientWidth || 440) - 4);
  const opts = {
    width, height: 170, legend: { show: false }, cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false }, y: c.log ? { distr: 3 } : {} },
    axes: [{ label: 'program time (s)', size: 34, labelSize: 14 }, { size: 64, values: (u, vals) => vals.map((v) => Number(v.toPrecision(3)).toString()) }],
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
  if (!pick.value) { bars.replaceChildren(el('p', { class: 'muted' }, 'No per-domain or per-worker events yet.')); return; }
  const [pid, ty, g, f] = pick.value.split('/');
  const groups = S.groups[`${pid}/${ty}/${g}`] || {};
  const rows = Object.entries(groups).filter(([, v]) => f in v).sort((a, b) => Number(a[0]) - Number(b[0]));
  const vals = rows.map(([, v]) => v[f]);
  const max = Math.max(...vals, 1e-12);
  const mean = vals.reduce((a, b) => a + b, 0) / (vals.length || 1);
  bars.className = 'bars';
  bars.replaceChildren(...rows.map(([k, v]) => el('div', { class: 'row' },
    el('span', { class: 'label' }, `${g} ${k}`),
    el('div', { class: 'track' }, el('div', { class: `fill${v[f] > 1.2 * mean ? ' hot' : ''}`, style: `width:${(100 * v[f] / max).toFixed(1)}%` })),
    el('span', { class: 'val' }, fmt(v[f])))),
  el('div', { class: 'stats' }, `max ÷ mean ${fmt(max / (mean || 1))}: red bars are over 1.2 × the mean`));
}

function range(a) {
  if (a.min === null && a.max === null) return '';
  return `${a.min ?? ''}..${a.max ?? ''}`;
}

function renderObjects(p) {
  const box = $('objects');
  const o = p.objects;
  const key = o ? JSON.stringify(o.objects.map((x) => [x.name, x.attributes.map((a) => a.path), x.actuators.map((a) => a.name)])) + JSON.stringify(o.functions.map((f) => f.name)) : '';
  if (key !== S.objectsKey) {
    S.objectsKey = key;
    box.replaceChildren();
    if (!o || (!o.objects.length && !o.functions.length)) { box.append(el('p', { class: 'muted' }, 'No steering objects.')); return; }
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
    const node = box.querySelector(`[data-path="${CSS.escape(a.path)}"]`);
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
  const key = list.map((s) => `${s.type}/${s.instance}/${s.enabled}/${s.active}/${s.rate}`).join('|');
  if (key === S.sensorsKey) return;
  S.sensorsKey = key;
  if (!list.length) { box.replaceChildren(el('p', { class: 'muted' }, 'No sensors.')); return; }
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

function renderThreads(p) {
  const t = el('table');
  t.append(el('tr', {}, el('th', {}, 'thread'), el('th', {}, 'events'), el('th', {}, 'per second')));
  for (const th of p.threads) t.append(el('tr', {}, el('td', {}, th.name || `#${th.id}`), el('td', { class: 'num' }, th.count.toLocaleString()), el('td', { class: 'num' }, fmt(th.rate))));
  const types = el('table');
  types.append(el('tr', {}, el('th', {}, 'event type'), el('th', {}, 'events'), el('th', {}, 'per second')));
  for (const [name, ty] of Object.entries(p.types)) types.append(el('tr', {}, el('td', {}, name), el('td', { class: 'num' }, ty.count.toLocaleString()), el('td', { class: 'num' }, fmt(ty.rate))));
  $('threads').replaceChildren(t, el('div', { style: 'height:8px' }), types);
}

function renderLog(p) {
  const mine = S.log.filter((e) => e.pid === p.pid).slice(-200);
  const box = $('log');
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  box.replaceChildren(...(mine.length ? mine.map((e) => el('div', { class: e.error ? 'refused' : '' },
    `${e.t.toFixed(3)}s  ${e.who}  ${e.action}${e.error ? '  REFUSED: ' + e.error : ''}`)) : [el('p', { class: 'muted' }, 'Nothing steered yet.')]));
  if (atBottom) box.scrollTop = box.scrollHeight;
  const alerts = S.alerts.filter((a) => a.pid === p.pid).slice(-100);
  if (alerts.length) {
    $('alerts').replaceChildren(...alerts.map((a) => el('div', { class: 'refused' },
      `${a.t.toFixed(3)}s  ${Object.entries(a.fields).map(([k, v]) => `${k}: ${v}`).join(', ')}`)));
  }
}

// ---- controls ---------------------------------------------------------------------------
$('pause').onclick = () => send({ op: 'control', action: 'pause' });
$('resume').onclick = () => send({ op: 'control', action: 'resume' });
$('step').onclick = () => send({ op: 'control', action: 'step', steps: 1 });
$('add-chart').onclick = () => { const v = $('series-pick').value; if (v) { addChart(v); render(); } };
$('group-pick').onchange = () => render();

// The command line: the CLI's steering commands, for the selected program.
function words(line) {
  const out = []; const re = /"([^"]*)"|(\S+)/g; let m;
  while ((m = re.exec(line))) out.push(m[1] ?? m[2]);
  return out;
}
$('cli').onsubmit = async (ev) => {
  ev.preventDefault();
  const input = $('cli-input');
  const w = words(input.value.trim());
  const out = $('cli-out');
  if (!w.length) return;
  let cmd;
  switch (w[0]) {
    case 'set': cmd = w.length === 3 ? { op: 'set', path: w[1], value: w[2] } : null; break;
    case 'call': cmd = w.length >= 2 ? { op: 'call', target: w[1], args: w.slice(2) } : null; break;
    case 'pause': case 'resume': cmd = { op: 'control', action: w[0] }; break;
    case 'step': cmd = { op: 'control', action: 'step', steps: Number(w[1] || 1) }; break;
    case 'until': cmd = { op: 'control', action: 'run-until', until: w.slice(1).join(' ') }; break;
    case 'sensors': cmd = w.length >= 3 ? { op: 'sensor', type: w[1] === '*' ? '' : w[1], setting: w.slice(2).join(' ') } : null; break;
    default: cmd = null;
  }
  if (!cmd) {
    out.className = 'cli-out err';
    out.textContent = 'commands: set PATH VALUE · call TARGET ARGS… · pause · resume · step [N] · until CONDITION · sensors TYPE on|off|every N|rate R';
    return;
  }
  const r = await send(cmd);
  out.className = `cli-out ${r.ok ? 'ok' : 'err'}`;
  out.textContent = r.ok ? (r.result || 'done') : r.error;
  if (r.ok) input.value = '';
};

connect();
