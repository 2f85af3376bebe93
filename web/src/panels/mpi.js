// The MPI panel: for the job the selected program is a rank of, time in MPI per rank (split
// per call), the communication matrix as a heat map, and late senders and late receivers as
// they happen. The hub matches the messages and sums the times (`/api/mpi`); the page asks
// for the view about once a second while a rank is selected, and hides the panel otherwise.
// @ts-check
import { $, el, rebuild, setText } from '../dom.js';
import { tokenQuery } from '../conn.js';
import { bytes, count, num } from '../format.js';
import { redraw } from '../frame.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/** @typedef {import('../protocol').MpiView} MpiView */
/** @typedef {import('../protocol').MpiCell} MpiCell */

/** Calls shown by name in the bars (the rest of MPI is summed as "other MPI"). */
const TOP_CALLS = 6;
/** Colours of the named calls, then of the rest of MPI and of the time outside it. */
const CALL_COLOURS = ['#2f6fde', '#e05a4f', '#f0a35e', '#9b6bd6', '#1f8a4c', '#e0c341'];
const OTHER_MPI = '#8c96a5';
const OUTSIDE = '#dfe6ee';
/** Ranks the heat map draws a cell for at most (a bigger job shows its first ranks). */
const MAX_MATRIX_RANKS = 256;
/** Pairs listed per late-message table, and latest late messages listed. */
const TABLE_ROWS = 8;
const LATEST_ROWS = 12;
/** How often the view is asked for, ms. */
const EVERY_MS = 1000;

const V = { pid: -1, asked: 0, busy: false, metric: 'bytes' };
/** @type {MpiView | null} */
let view = null;
/** The matrix as drawn, for the hover: ranks across, and cells by `from,to`. */
let drawnMatrix = { n: 0, cell: 0, cells: /** @type {Map<string, MpiCell>} */ (new Map()) };

/** @type {import('../frame.js').Panel} */
export const mpi = { on: ['summaries', 'view'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  if (!p) return;
  if (V.pid !== p.pid) {
    V.pid = p.pid;
    view = null;
    V.asked = 0;
    $('mpi-panel').hidden = true;
  }
  if (performance.now() - V.asked >= EVERY_MS) fetchView();
}

async function fetchView() {
  if (V.busy) return;
  V.busy = true;
  V.asked = performance.now();
  const pid = V.pid;
  try {
    const r = await fetch(`/api/mpi?pid=${pid}${tokenQuery()}`);
    if (pid !== V.pid) return;
    if (!r.ok) {
      view = null;
      $('mpi-panel').hidden = true;
      return;
    }
    const first = !view;
    view = /** @type {MpiView} */ (await r.json());
    $('mpi-panel').hidden = false;
    paint(view);
    // The life-time view offers the job's ranks as soon as the program is known to be one.
    if (first) redraw('summaries');
  } catch {
    // The hub is away: the connection's banner says so; the next summary asks again.
  } finally {
    V.busy = false;
  }
}

/** A duration in seconds, to three significant digits: `12.3 ms`, `1.25 s`. */
const secs = (/** @type {number} */ s) => (s < 1e-3 ? `${num(s * 1e6, 3)} µs` : s < 1 ? `${num(s * 1e3, 3)} ms` : `${num(s, 3)} s`);

/** @param {MpiView} v */
function paint(v) {
  const ranks = v.ranks.length;
  setText($('mpi-job'), `job ${v.job} · ${ranks} of ${v.size} ranks seen · ${count(v.matched)} messages matched`);
  timeBars(v);
  matrix(v);
  lateLists(v);
  const notes = [`${count(v.unmatched)} sends or receives waiting for their other side`];
  if (v.clock_violations) notes.push(`${count(v.clock_violations)} receives seemingly before their send: the ranks' clocks disagree, so wait times are blurred (gyr trace clock corrects recordings)`);
  if (v.dropped || v.pairs_dropped || v.ignored) notes.push(`${count(v.dropped + v.pairs_dropped + v.ignored)} messages, pairs or events left out to stay within the hub's bounds`);
  setText($('mpi-notes'), notes.join(' · '));
}

/**
 * Time per rank as one stacked bar each: the job's top calls by time, the rest of MPI, and the
 * time outside MPI; bars are scaled to the longest-running rank.
 * @param {MpiView} v
 */
function timeBars(v) {
  /** @type {Map<string, number>} */
  const total = new Map();
  for (const r of v.ranks) for (const c of r.calls) total.set(c.call, (total.get(c.call) || 0) + c.seconds);
  const top = [...total.entries()].filter(([c]) => c !== 'other').sort((a, b) => b[1] - a[1]).slice(0, TOP_CALLS).map(([c]) => c);
  const longest = Math.max(1e-12, ...v.ranks.map((r) => Math.max(r.elapsed_s, r.in_mpi_s)));
  const key = JSON.stringify([top, v.ranks.map((r) => [r.rank, r.elapsed_s.toFixed(3), r.in_mpi_s.toFixed(3), r.calls.length])]);
  rebuild($('mpi-time'), key, () => v.ranks.map((r) => {
    const parts = top.map((c, i) => {
      const t = r.calls.find((x) => x.call === c);
      return { label: c, s: t ? t.seconds : 0, n: t ? t.count : 0, colour: CALL_COLOURS[i] };
    });
    const named = parts.reduce((a, x) => a + x.s, 0);
    parts.push({ label: 'other MPI calls', s: Math.max(0, r.in_mpi_s - named), n: 0, colour: OTHER_MPI });
    parts.push({ label: 'outside MPI', s: r.outside_s, n: 0, colour: OUTSIDE });
    const share = r.elapsed_s > 0 ? Math.min(100, (100 * r.in_mpi_s) / r.elapsed_s) : 0;
    return el('div', { class: 'row', 'data-testid': 'mpi-rank' },
      el('span', { class: 'label' }, `rank ${r.rank}`),
      el('div', { class: 'track mpi-track' }, ...parts.filter((x) => x.s > 0).map((x) => el('div', {
        class: 'mpi-seg',
        style: `width:${((100 * x.s) / longest).toFixed(2)}%;background:${x.colour}`,
        title: `rank ${r.rank}: ${x.label} ${secs(x.s)}${x.n ? ` in ${count(x.n)} calls` : ''}`,
      }))),
      el('span', { class: 'val mpi-val' }, `${share.toFixed(0)}% in MPI`),
      el('span', { class: 'val mpi-val muted' }, `${secs(r.in_mpi_s)} of ${secs(r.elapsed_s)}`));
  }));
  const legend = [...top.map((c, i) => [c, CALL_COLOURS[i]]), ['other MPI calls', OTHER_MPI], ['outside MPI', OUTSIDE]];
  rebuild($('mpi-legend'), JSON.stringify(top), () => legend.map(([c, colour]) => el('span', { class: 'mpi-key' },
    el('i', { style: `background:${colour}` }), c)));
}

/** A heat colour for `x` in 0..1: pale yellow to dark red. */
function heat(/** @type {number} */ x) {
  const stops = [[255, 247, 214], [253, 174, 97], [215, 48, 39], [120, 0, 30]];
  const f = Math.max(0, Math.min(1, x)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(f));
  const t = f - i;
  const c = stops[i].map((a, k) => Math.round(a + (stops[i + 1][k] - a) * t));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

/**
 * The communication matrix: a row per sending rank, a column per receiving rank, the colour
 * the bytes (or messages) sent, on a square-root scale so that small flows still show.
 * @param {MpiView} v
 */
function matrix(v) {
  const canvas = /** @type {HTMLCanvasElement} */ ($('mpi-matrix'));
  const maxRank = Math.max(v.size, ...v.ranks.map((r) => r.rank + 1), ...v.matrix.map((c) => Math.max(c.from, c.to) + 1));
  const n = Math.max(1, Math.min(MAX_MATRIX_RANKS, maxRank));
  const metric = V.metric === 'messages' ? 'messages' : 'bytes';
  const max = Math.max(1, ...v.matrix.map((c) => c[metric]));
  const label = 34;
  const size = 280;
  const cell = Math.max(1, Math.floor(size / n));
  const side = label + cell * n;
  const dpr = devicePixelRatio || 1;
  canvas.width = side * dpr;
  canvas.height = side * dpr;
  canvas.style.width = `${side}px`;
  canvas.style.height = `${side}px`;
  const g = canvas.getContext('2d');
  if (!g) return;
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, side, side);
  g.fillStyle = '#f3f5f8';
  g.fillRect(label, label, cell * n, cell * n);
  /** @type {Map<string, MpiCell>} */
  const cells = new Map();
  for (const c of v.matrix) {
    if (c.from >= n || c.to >= n) continue;
    cells.set(`${c.from},${c.to}`, c);
    g.fillStyle = heat(Math.sqrt(c[metric] / max));
    g.fillRect(label + c.to * cell, label + c.from * cell, cell, cell);
  }
  // Rank numbers along both axes, as many as fit.
  g.fillStyle = '#6b7585';
  g.font = '11px system-ui, sans-serif';
  const every = Math.max(1, Math.ceil(16 / cell));
  g.textAlign = 'center';
  g.textBaseline = 'bottom';
  for (let i = 0; i < n; i += every) g.fillText(String(i), label + (i + 0.5) * cell, label - 3);
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (let i = 0; i < n; i += every) g.fillText(String(i), label - 4, label + (i + 0.5) * cell);
  if (cell >= 6) {
    g.strokeStyle = '#fff';
    g.lineWidth = 1;
    for (let i = 0; i <= n; i++) {
      g.beginPath(); g.moveTo(label + i * cell, label); g.lineTo(label + i * cell, label + n * cell); g.stroke();
      g.beginPath(); g.moveTo(label, label + i * cell); g.lineTo(label + n * cell, label + i * cell); g.stroke();
    }
  }
  drawnMatrix = { n, cell, cells };
  setText($('mpi-scale-min'), '0');
  setText($('mpi-scale-max'), metric === 'bytes' ? bytes(max) : `${count(max)} messages`);
  setText($('mpi-matrix-note'), maxRank > n ? `the first ${n} of ${maxRank} ranks` : '');
}

/** Names the pair under the pointer. @param {MouseEvent} e */
function hover(e) {
  const canvas = /** @type {HTMLCanvasElement} */ ($('mpi-matrix'));
  const box = canvas.getBoundingClientRect();
  const { n, cell, cells } = drawnMatrix;
  const to = Math.floor((e.clientX - box.left - 34) / cell);
  const from = Math.floor((e.clientY - box.top - 34) / cell);
  const out = $('mpi-hover');
  if (!view || from < 0 || to < 0 || from >= n || to >= n) {
    setText(out, 'Hover over a cell: sender (row) → receiver (column).');
    return;
  }
  const c = cells.get(`${from},${to}`);
  setText(out, c
    ? `rank ${from} → rank ${to}: ${bytes(c.bytes)} in ${count(c.messages)} messages (${bytes(c.bytes / Math.max(1, c.messages))} each on average)`
    : `rank ${from} → rank ${to}: nothing sent`);
}

/** @param {MpiView} v */
function lateLists(v) {
  /**
   * @param {import('../protocol').MpiLatePair[]} pairs
   * @param {string} who
   */
  const table = (pairs, who) => (pairs.length === 0
    ? el('p', { class: 'muted' }, 'none so far')
    : el('table', { class: 'mpi-table' },
      el('tr', {}, el('th', {}, 'sender → receiver'), el('th', {}, 'count'), el('th', {}, `${who} waited`), el('th', {}, 'per message')),
      ...pairs.slice(0, TABLE_ROWS).map((p) => el('tr', {},
        el('td', {}, `${p.sender} → ${p.receiver}`),
        el('td', { class: 'num' }, count(p.count)),
        el('td', { class: 'num' }, secs(p.wait_s)),
        el('td', { class: 'num' }, secs(p.wait_s / Math.max(1, p.count)))))));
  rebuild($('mpi-late-senders'), JSON.stringify(v.late_senders.slice(0, TABLE_ROWS)), () => [table(v.late_senders, 'receiver')]);
  rebuild($('mpi-late-receivers'), JSON.stringify(v.late_receivers.slice(0, TABLE_ROWS)), () => [table(v.late_receivers, 'sender')]);
  const latest = v.recent.slice(0, LATEST_ROWS);
  rebuild($('mpi-latest'), JSON.stringify(latest), () => (latest.length === 0
    ? [el('p', { class: 'muted' }, 'No late messages yet.')]
    : latest.map((l) => el('div', { class: `mpi-late ${l.kind === 'late sender' ? 'ls' : 'lr'}`, 'data-testid': 'mpi-late' },
      el('span', { class: 'mpi-at' }, `${l.at_s.toFixed(3)} s`),
      el('span', { class: 'mpi-kind' }, l.kind),
      el('span', {}, `${l.sender} → ${l.receiver}`),
      el('b', {}, secs(l.wait_s)),
      el('span', { class: 'muted' }, l.kind === 'late sender'
        ? `receiver waited in ${l.call} · tag ${l.tag} · ${bytes(l.bytes)}`
        : `sender waited for the receive to be posted · tag ${l.tag} · ${bytes(l.bytes)}`)))));
}

$('mpi-metric').onchange = () => {
  V.metric = $('mpi-metric').value;
  if (view) matrix(view);
};
$('mpi-matrix').addEventListener('mousemove', hover);
$('mpi-matrix').addEventListener('mouseleave', () => setText($('mpi-hover'), 'Hover over a cell: sender (row) → receiver (column).'));

/**
 * The MPI view of the job program `pid` is a rank of, once the hub has said it is one (the
 * life-time view offers the job's ranks then); `null` otherwise.
 * @param {number} pid
 * @returns {MpiView | null}
 */
export function rankJob(pid) {
  return view && V.pid === pid ? view : null;
}

// For the browser tests.
/** @type {any} */ (window).MPI = { view: () => view, refresh: fetchView };
