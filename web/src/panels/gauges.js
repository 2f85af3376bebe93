// The Gauges panel: a dial per chosen series, with the user's design point and the deviation.
// Gauges are kept in the browser by `type/field`, with their design points and ranges.
// @ts-check
import { $, el, setClass, setText, svg } from '../dom.js';
import { S, seriesOf } from '../state.js';
import { num } from '../format.js';
import { redraw } from '../frame.js';
import { clamp, deviation, scale } from './dial.js';
import { fillSeriesPick } from './charts.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/**
 * A gauge's settings: its design point, and its scale's range (`null`: the last 10 s).
 * @typedef {{ design: number | null, range: [number, number] | null }} GaugeConf
 */
/**
 * A gauge on the page: its series, its `type/field`, its dial's parts, and what they show.
 * @typedef {Record<string, any> & { id: string, key: string, box: HTMLElement }} Gauge
 */

// A gauge is saved by `type/field`, not by series, so that it and its design point outlive
// the program (a restart has a new pid); the selected program shows the gauges it has series for.
const GAUGES_KEY = 'gyr.gauges';  // localStorage: { "type/field": { design, range: [lo, hi] | null } }
const W = 280, CX = 140, CY = 128, R = 96;  // the dial: a half circle in a W × 150 view box
const MAX_TICKS = 6;

/** Every gauge's settings, by `type/field`. @type {Record<string, GaugeConf>} */
const conf = loadGauges();
/**
 * Design points the selected program declares (a watch-dog's spec, as its `design` object:
 * one attribute `EVENT.FIELD` per field, its value the design point, its range the scale): they
 * make gauges by themselves; what the user sets takes their place. @type {Map<string, GaugeConf>}
 */
let declared = new Map();
/** Declared gauges the user removed, on this page. */
const dismissed = new Set();

/** A gauge's settings: the user's, else the program's declared ones. @param {string} key */
const confOf = (key) => conf[key] || declared.get(key);

/**
 * The design points `p` declares, by `type/field`.
 * @param {ProcessSummary} p @returns {Map<string, GaugeConf>}
 */
function declaredBy(p) {
  const out = new Map();
  const design = p.objects?.objects.find((o) => o.name === 'design');
  for (const a of design?.attributes || []) {
    const dot = a.name.lastIndexOf('.');
    if (dot <= 0) continue;
    const v = Number(a.value);
    // A design point three decades or more below the range's top (a residual's target) reads
    // on a log-scale chart (charts.js), not on a linear dial.
    if (v > 0 && a.max !== null && a.max / v >= 1e3) continue;
    const range = a.min !== null && a.max !== null && a.min < a.max ? /** @type {[number, number]} */ ([a.min, a.max]) : null;
    out.set(`${a.name.slice(0, dot)}/${a.name.slice(dot + 1)}`, { design: Number.isFinite(v) ? v : null, range });
  }
  return out;
}
/** The gauges shown, for the selected program. @type {Gauge[]} */
let shown = [];

/**
 * Fraction f of the scale (0: left end, 1: right end) to a point on a circle of radius r.
 * @param {number} f @param {number} r
 * @returns {[number, number]}
 */
const polar = (f, r) => [CX - r * Math.cos(Math.PI * f), CY - r * Math.sin(Math.PI * f)];
/** @param {number} f0 @param {number} f1 @param {number} r */
const arcPath = (f0, f1, r) => {
  const [x0, y0] = polar(f0, r), [x1, y1] = polar(f1, r);
  return `M${x0.toFixed(2)} ${y0.toFixed(2)}A${r} ${r} 0 0 1 ${x1.toFixed(2)} ${y1.toFixed(2)}`;
};

/** @returns {Record<string, GaugeConf>} */
function loadGauges() {
  let v;
  try { v = JSON.parse(localStorage.getItem(GAUGES_KEY)); } catch { return {}; }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return {};
  // Whatever was saved by hand or by an older page: keep only what makes sense.
  /** @type {Record<string, GaugeConf>} */
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
  try { localStorage.setItem(GAUGES_KEY, JSON.stringify(conf)); } catch { /* storage off: this page only */ }
}

/** @type {import('../frame.js').Panel} */
export const gauges = { on: ['points', 'stats'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  const ids = seriesOf(p.pid);
  fillSeriesPick($('gauge-pick'), ids);
  declared = declaredBy(p);
  const keys = [...Object.keys(conf), ...[...declared.keys()].filter((k) => !conf[k] && !dismissed.has(k))];
  const want = keys.map((k) => `${p.pid}/${k}`).filter((id) => ids.includes(id));
  // DOM is rebuilt only when the set of gauges changes; every tick just moves needles, and
  // only those whose series moved or whose scale (the last 10 s) may have.
  const rebuilt = want.join('|') !== shown.map((g) => g.id).join('|');
  if (rebuilt) {
    const old = new Map(shown.map((g) => [g.id, g]));
    shown = want.map((id) => old.get(id) || makeGauge(id));
    $('gauges').replaceChildren(...shown.map((g) => g.box));
  }
  $('gauges-empty').hidden = shown.length > 0;
  for (const g of shown) if (rebuilt || S.moved.has(g.id) || g.stats !== S.stats[g.id]) updateGauge(g);
}

/** @param {string} id */
function addGauge(id) {
  const key = id.split('/').slice(1).join('/');
  dismissed.delete(key);
  if (!conf[key]) { conf[key] = { design: null, range: null }; saveGauges(); }
}

/** @param {Gauge} g */
function removeGauge(g) {
  delete conf[g.key]; saveGauges();
  dismissed.add(g.key);
  shown = shown.filter((x) => x !== g); g.box.remove();
  $('gauges-empty').hidden = shown.length > 0;
}

/** @param {string} id @returns {Gauge} */
function makeGauge(id) {
  const key = id.split('/').slice(1).join('/');
  const field = key.split('/').pop();
  /** @type {Gauge} */
  const g = { id, key, box: null, scaleKey: '', markKey: '', labelWidth: 0 };
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
  const c = confOf(key);
  const design = el('input', { class: 'g-in', 'data-testid': 'gauge-design', placeholder: 'none', 'aria-label': `${key} design point`, value: c.design ?? '' });
  const range = el('input', { class: 'g-in', 'data-testid': 'gauge-range', placeholder: 'auto', title: 'min..max, or empty for the last 10 s', 'aria-label': `${key} scale range`, value: c.range ? c.range.join('..') : '' });
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

/**
 * Enter applies, Escape goes back to the saved value; a bad entry stays in the box, marked.
 * @param {KeyboardEvent} ev @param {Gauge} g @param {HTMLInputElement} input @param {'design' | 'range'} what
 */
function gaugeInput(ev, g, input, what) {
  // Editing a declared gauge makes it the user's.
  if (!conf[g.key] && declared.has(g.key)) conf[g.key] = { ...declared.get(g.key) };
  const c = conf[g.key];
  if (!c) return;
  const saved = () => (what === 'design' ? String(c.design ?? '') : c.range ? c.range.join('..') : '');
  if (ev.key === 'Escape') { input.value = saved(); input.classList.remove('err'); g.msg.textContent = ''; input.blur(); return; }
  if (ev.key !== 'Enter') return;
  const text = input.value.trim();
  let error = '';
  if (what === 'design') {
    const v = Number(text);
    if (text === '') c.design = null;
    else if (Number.isFinite(v)) c.design = v;
    else error = `design point: “${text}” is not a number`;
  } else {
    const m = RANGE_RE.exec(text);
    if (text === '') c.range = null;
    else if (!m) error = 'range: min..max, e.g. 0..10';
    else if (!(Number(m[1]) < Number(m[2]))) error = 'range: min must be below max';
    else c.range = [Number(m[1]), Number(m[2])];
  }
  input.classList.toggle('err', !!error);
  g.msg.textContent = error;
  if (error) return;
  saveGauges();
  input.value = saved();
  input.blur();
  g.scaleKey = ''; g.markKey = '';
  updateGauge(g);
}

/**
 * The scale: the user's range, else the last 10 s widened a little, always with the design point.
 * @param {Gauge} g @param {number} v
 */
function scaleFor(g, v) {
  const c = confOf(g.key);
  if (c.range) return scale(c.range[0], c.range[1], true);
  const st = S.stats[g.id];
  let lo = Math.min(v, st ? st.min : v), hi = Math.max(v, st ? st.max : v);
  if (c.design !== null) { lo = Math.min(lo, c.design); hi = Math.max(hi, c.design); }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return null;
  const size = Math.max(Math.abs(lo), Math.abs(hi));
  // A flat series still gets a dial: a few percent of its size either side.
  const pad = hi - lo > size * 1e-9 ? (hi - lo) * 0.1 : (size ? size * 0.05 : 1);
  return scale(lo - pad, hi + pad, false);
}

/** Moves a gauge's needle to its series' last value; redraws its scale if that changed. @param {Gauge} g */
function updateGauge(g) {
  const s = S.series.get(g.id);
  const v = s && s.y.length ? s.y[s.y.length - 1] : NaN;
  g.stats = S.stats[g.id];
  const sc = Number.isFinite(v) ? scaleFor(g, v) : null;
  if (!sc) {
    for (const e of [g.needle, g.mark, g.markLabel, g.leader, g.band]) e.style.display = 'none';
    g.scaleKey = g.markKey = '';
    setText(g.value, '–'); setText(g.dev, 'no data yet'); setClass(g.value, 'g-num'); setClass(g.dev, 'g-dev');
    return;
  }
  const frac = (/** @type {number} */ x) => (x - sc.lo) / (sc.hi - sc.lo);
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
  const d = confOf(g.key)?.design ?? null;
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
      placeMarkLabel(g, f, `design ${num(d)}`);
    }
  }
  const f = clamp(frac(v), -0.02, 1.02);  // off the scale: the needle rests just past its end
  g.needle.style.display = '';
  g.needle.setAttribute('transform', `rotate(${(180 * f).toFixed(2)} ${CX} ${CY})`);
  g.needle.setAttribute('data-value', String(v));
  setText(g.value, num(v));
  const dv = d === null ? { text: 'no design point', cls: '' } : deviation(v, d, sc.hi - sc.lo);
  setClass(g.value, `g-num ${dv.cls}`.trim()); setClass(g.dev, `g-dev ${dv.cls}`.trim());
  setText(g.dev, dv.text);
}

/**
 * The design label sits level, outside the arc by its mark. Near the ends of the dial a long
 * label would leave the view box: it is pushed in, then up clear of the arc, with a leader line.
 * @param {Gauge} g @param {number} f @param {string} text
 */
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

$('add-gauge').onclick = () => { const v = $('gauge-pick').value; if (v) { addGauge(v); redraw('view'); } };
