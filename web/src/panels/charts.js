// The Charts panel: strip charts of the selected program's series, with their statistics.
// @ts-check
import { $, el, fillSelect, setText } from '../dom.js';
import { S, seriesOf } from '../state.js';
import { count, num } from '../format.js';
import { redraw } from '../frame.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/** @typedef {import('../state.js').Series} Series */
/** @typedef {{ id: string, log: boolean, box: HTMLElement, area: HTMLElement, stats: HTMLElement, plot: any }} Chart */

/** Charted first when a program is shown: the examples' headline series. */
const PREFERRED = ['step_time/ms', 'energy/total', 'residual/value', 'thermo/temperature', 'worker_load/seconds'];

/** The charts shown, and the program they are for. @type {Chart[]} */
let shown = [];
/** @type {number | null} */
let chartsFor = null;
/** Whether the charts shown were chosen by the page (not the user), and from declared fields. */
let chosenByPage = false, fromDeclared = false;

/**
 * The fields a program declares design points for (a watch-dog's spec: its `design` object),
 * charted first; on a log scale when the design point lies three decades or more below the
 * range's top (a residual converging towards 1e-6).
 * @param {ProcessSummary} p @param {string[]} ids
 * @returns {{ id: string, log: boolean }[]}
 */
function declaredCharts(p, ids) {
  const design = p.objects?.objects.find((o) => o.name === 'design');
  const out = [];
  for (const a of design?.attributes || []) {
    const dot = a.name.lastIndexOf('.');
    const id = `${p.pid}/${a.name.slice(0, dot)}/${a.name.slice(dot + 1)}`;
    if (dot <= 0 || !ids.includes(id)) continue;
    const d = Number(a.value);
    out.push({ id, log: d > 0 && a.max !== null && a.max / d >= 1e3 });
  }
  return out;
}

/** @type {import('../frame.js').Panel} */
export const charts = { on: ['points', 'stats'], draw };

/**
 * A series picker lists `type.field`.
 * @param {HTMLSelectElement} pick
 * @param {string[]} ids
 */
export const fillSeriesPick = (pick, ids) => fillSelect(pick, ids, (id) => id.split('/').slice(1).join('.'));

/** @param {ProcessSummary} p */
function draw(p) {
  const ids = seriesOf(p.pid);
  fillSeriesPick($('series-pick'), ids);
  const declared = declaredCharts(p, ids);
  // Declared fields may become known after the page chose other charts: they take over once.
  const redo = chosenByPage && !fromDeclared && declared.length > 0;
  if (chartsFor !== p.pid || redo) {
    for (const c of shown) c.plot.destroy();
    shown = []; $('charts').replaceChildren(); chartsFor = p.pid;
  }
  if (shown.length === 0 && ids.length) {
    chosenByPage = true;
    fromDeclared = declared.length > 0;
    if (fromDeclared) {
      for (const d of declared.slice(0, 2)) addChart(d.id, d.log);
    } else {
      const defaults = PREFERRED.map((s) => `${p.pid}/${s}`).filter((id) => ids.includes(id));
      // Else the program's own series that have data. gyr's own events (gyr.lost, an MPI
      // rank's calls and messages) are never charted unasked: two empty charts of gyr.lost
      // were all an MPI job's page showed here. The hint below says where to look instead.
      const own = ids.filter((id) => !id.split('/')[1].startsWith('gyr.') && S.series.get(id).x.length);
      for (const id of (defaults.length ? defaults : own).slice(0, 2)) addChart(id);
    }
  }
  $('charts-empty').hidden = shown.length > 0;
  for (const c of shown) {
    const s = S.series.get(c.id);
    if (s && S.moved.has(c.id)) c.plot.setData(c.log ? positive(s) : [s.x, s.y]);
    const st = S.stats[c.id];
    setText(c.stats, st
      ? `last ${num(s ? s.y[s.y.length - 1] : NaN)} · mean ${num(st.mean)} · min ${num(st.min)} · max ${num(st.max)} · p50 ${num(st.p50)} · p99 ${num(st.p99)}  (last 10 s, ${count(st.n)} events)`
      : '');
  }
}

/** @param {Series} s */
function positive(s) {
  return [s.x, s.y.map((v) => (v > 0 ? v : null))];
}

/** @param {string} id @param {boolean} [log] on a log scale */
function addChart(id, log = false) {
  if (shown.some((c) => c.id === id)) return;
  const box = el('div', { class: 'chart', 'data-series': id });
  const logBox = el('input', { type: 'checkbox' });
  logBox.checked = log;
  const head = el('div', { class: 'chart-head' },
    el('span', { class: 'name' }, id.split('/').slice(1).join('.')),
    el('label', {}, logBox, ' log scale'),
    el('button', { onclick: () => removeChart(id), title: 'remove' }, '×'));
  const area = el('div');
  const stats = el('div', { class: 'stats' });
  box.append(head, area, stats);
  $('charts').append(box);
  /** @type {Chart} */
  const c = { id, log, box, area, stats, plot: null };
  c.plot = makePlot(c);
  logBox.addEventListener('change', () => { c.log = logBox.checked; c.plot.destroy(); c.plot = makePlot(c); redraw('points'); });
  shown.push(c);
}

/** @param {string} id */
function removeChart(id) {
  chosenByPage = false;
  const i = shown.findIndex((c) => c.id === id);
  if (i < 0) return;
  shown[i].plot.destroy(); shown[i].box.remove(); shown.splice(i, 1);
}

/**
 * Axis labels with as many decimals as the tick spacing needs: a series varying in its fourth
 * digit gets four, not five equal labels.
 * @param {any} _u @param {number[]} vals @param {number} _axis @param {number} _space @param {number} incr
 */
function tickLabels(_u, vals, _axis, _space, incr) {
  const decimals = incr > 0 ? Math.min(12, Math.max(0, Math.ceil(-Math.log10(incr) - 1e-9))) : 3;
  return vals.map((v) => {
    // A log scale's ticks between labelled decades come as null.
    if (v === null || v === undefined) return '';
    const a = Math.abs(v);
    if (v === 0) return '0';
    if (a >= 1e6 || decimals > 5) return Number(v.toPrecision(4)).toExponential();
    return v.toFixed(decimals);
  });
}

/** @param {Chart} c */
function makePlot(c) {
  const width = Math.max(320, (c.area.clientWidth || c.box.clientWidth || 440) - 4);
  const opts = {
    width, height: 170, legend: { show: false }, cursor: { drag: { x: false, y: false } },
    scales: { x: { time: false }, y: c.log ? { distr: 3 } : {} },
    axes: [{ label: 'program time (s)', size: 34, labelSize: 14 }, { size: 70, values: tickLabels }],
    series: [{}, { stroke: '#2f6fde', width: 1.5, points: { show: false } }],
  };
  const s = S.series.get(c.id) || { x: [], y: [], live: false };
  return new uPlot(opts, c.log ? positive(s) : [s.x, s.y], c.area);
}

$('add-chart').onclick = () => { const v = $('series-pick').value; if (v) { chosenByPage = false; addChart(v); redraw('points'); } };
