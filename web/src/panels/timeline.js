// The thread life-time view (Falcon's): a row per thread or role, coloured by what it was
// doing when (running, waiting for which mutex, lock, condition, join or barrier, blocked on a
// full ring, exited), with the causal arrows between threads. The hub draws each viewport at
// the canvas's width (`/api/timeline`), so the page never receives more than it can draw, and
// only the visible rows are asked for.
// @ts-check
import { $, el } from '../dom.js';
import { tokenQuery } from '../conn.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/** @typedef {import('../protocol').TimelineTile} TimelineTile */

/** State colours and names, by the state number the hub sends. */
const STATES = [
  ['running', '#7fbf7f'], ['wait mutex', '#e05a4f'], ['wait read lock', '#f0a35e'],
  ['wait write lock', '#d9822b'], ['wait condition', '#5b8def'], ['wait join', '#9b6bd6'],
  ['wait barrier', '#e0c341'], ['blocked on a full ring', '#333'], ['exited', '#e8e8e8'],
];
const ARROWS = { lock: '#c0392b', signal: '#2f6fde', fork: '#1f8a4c', join: '#7d3c98' };
const ROW_H = 18;
const LABEL_W = 150;

/** The viewport: program, time range (s), first row, following the live end or not. */
const V = { pid: -1, t0: 0, t1: 1, row0: 0, follow: true, busy: false, again: false };
/** @type {TimelineTile | null} */
let tile = null;

/**
 * What each tile drawn cost the page (`gyr-bench web` reads it): ms from its bytes in hand to
 * drawn on the canvas (`frames`: parsing, `parse`, and drawing, `draw`), ms from the request to
 * drawn (`trips`), and its bytes; the latest 10 000 tiles.
 */
const perf = {
  frames: /** @type {number[]} */ ([]),
  parse: /** @type {number[]} */ ([]),
  draw: /** @type {number[]} */ ([]),
  trips: /** @type {number[]} */ ([]),
  bytes: /** @type {number[]} */ ([]),
};

/** @type {import('../frame.js').Panel} */
export const timeline = { on: ['summaries', 'view'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  if (!p) return;
  if (V.pid !== p.pid) {
    Object.assign(V, { pid: p.pid, t0: 0, t1: 1, row0: 0, follow: true });
    tile = null;
    wire();
  }
  if (V.follow || !tile) fetchTile();
}

/** Asks the hub for the viewport; one request at a time, the latest wish wins. */
async function fetchTile() {
  if (V.busy) {
    V.again = true;
    return;
  }
  V.busy = true;
  try {
    const canvas = $('tl-canvas');
    const width = Math.max(50, Math.round((canvas.clientWidth - LABEL_W) * (devicePixelRatio || 1)));
    const rows = Math.max(1, Math.floor(canvas.clientHeight / ROW_H));
    const span = V.t1 - V.t0;
    let q = `pid=${V.pid}&r0=${V.row0}&r1=${V.row0 + rows}&w=${width}&arrows=400`;
    q += V.follow ? `&t0=${Math.max(0, (tile ? tile.now_s : 0) - Math.max(span, 0.001))}` : `&t0=${V.t0}&t1=${V.t1}`;
    const asked = performance.now();
    const r = await fetch(`/api/timeline?${q}${tokenQuery()}`);
    if (r.ok) {
      const text = await r.text();
      const got = performance.now();
      tile = /** @type {TimelineTile} */ (JSON.parse(text));
      const parsed = performance.now();
      if (V.follow) {
        V.t1 = tile.now_s;
        V.t0 = tile.t0_s;
      }
      paint();
      const drawn = performance.now();
      account(drawn - got, parsed - got, drawn - parsed, drawn - asked, text.length);
    }
  } catch (_) {
    // The hub is away: the connection's banner says so; the next summary asks again.
  } finally {
    V.busy = false;
    if (V.again) {
      V.again = false;
      fetchTile();
    }
  }
}

/** Notes what one tile cost (see `perf`). @param {number[]} ms the five figures */
function account(...ms) {
  const lists = [perf.frames, perf.parse, perf.draw, perf.trips, perf.bytes];
  lists.forEach((l, i) => l.push(ms[i]));
  if (perf.frames.length > 20000) for (const l of lists) l.splice(0, 10000);
}

/** x of a time on the canvas, in CSS pixels. */
function xOf(t, canvas) {
  return LABEL_W + ((t - V.t0) / Math.max(1e-12, V.t1 - V.t0)) * (canvas.clientWidth - LABEL_W);
}

function paint() {
  const canvas = $('tl-canvas');
  const dpr = devicePixelRatio || 1;
  // As tall as the rows need, up to 24 rows (more scroll), and a line for the time range.
  const want = `${Math.min(24, Math.max(3, tile ? tile.total_rows : 3)) * ROW_H + 22}px`;
  if (canvas.style.height !== want) canvas.style.height = want;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr)) canvas.width = Math.round(w * dpr);
  if (canvas.height !== Math.round(h * dpr)) canvas.height = Math.round(h * dpr);
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  $('tl-empty').hidden = !!(tile && tile.total_rows > 0);
  $('tl-box').hidden = !(tile && tile.total_rows > 0);
  if (!tile || tile.total_rows === 0) return;
  g.font = '12px system-ui, sans-serif';
  g.textBaseline = 'middle';
  const scale = (w - LABEL_W) / tile.width; // hub pixels are device pixels
  /** @type {Map<number, number>} thread → y of its row's middle */
  const rowY = new Map();
  // The runs of each state as one path, filled once: setting the colour for each run (thousands
  // in a tile zoomed out) took most of the drawing time (`gyr-bench web`).
  const paths = STATES.map(() => new Path2D());
  const other = new Path2D();
  tile.rows.forEach((row, i) => {
    const y = i * ROW_H;
    for (const t of row.threads) rowY.set(t, y + ROW_H / 2);
    g.fillStyle = i % 2 ? '#fafbfc' : '#fff';
    g.fillRect(0, y, w, ROW_H);
    g.fillStyle = '#1d2430';
    const label = row.threads.length > 1 ? `${row.label} (${row.threads.length} threads)` : row.label;
    g.fillText(label.length > 22 ? label.slice(0, 21) + '…' : label, 4, y + ROW_H / 2);
    for (const [x0, x1, s] of row.runs) {
      (paths[s] || other).rect(LABEL_W + x0 * scale, y + 3, Math.max(1, (x1 - x0) * scale), ROW_H - 6);
    }
  });
  paths.forEach((path, s) => {
    g.fillStyle = STATES[s][1];
    g.fill(path);
  });
  g.fillStyle = '#999';
  g.fill(other);
  g.lineWidth = 1.2;
  for (const a of tile.arrows) {
    const y0 = rowY.get(a.from_thread);
    const y1 = rowY.get(a.to_thread);
    if (y0 === undefined || y1 === undefined) continue;
    const x0 = xOf(a.from_s, canvas);
    const x1 = xOf(a.to_s, canvas);
    g.strokeStyle = ARROWS[a.kind] || '#555';
    g.beginPath();
    g.moveTo(x0, y0);
    g.lineTo(x1, y1);
    g.stroke();
    const ang = Math.atan2(y1 - y0, x1 - x0);
    g.beginPath();
    g.moveTo(x1, y1);
    g.lineTo(x1 - 6 * Math.cos(ang - 0.4), y1 - 6 * Math.sin(ang - 0.4));
    g.lineTo(x1 - 6 * Math.cos(ang + 0.4), y1 - 6 * Math.sin(ang + 0.4));
    g.closePath();
    g.fillStyle = g.strokeStyle;
    g.fill();
  }
  g.fillStyle = '#6b7585';
  g.fillText(`${fmt(V.t0)} – ${fmt(V.t1)} · rows ${tile.first_row + 1}–${tile.first_row + tile.rows.length} of ${tile.total_rows}`
    + (tile.arrows_omitted ? ` · ${tile.arrows_omitted} arrows: zoom in` : '')
    + ` · ${tile.events} thread events, hold-back ratio ${tile.hold_back_ratio.toFixed(2)}`
    + (tile.forced ? `, ${tile.forced} released without their cause` : '') + bounded(tile), LABEL_W + 4, h - 8);
  $('tl-follow').disabled = V.follow;
}

/**
 * What the hub forgot or left out to keep a program's view within its bounds, as a short
 * notice (empty when nothing was).
 * @param {TimelineTile} t
 */
function bounded(t) {
  const gone = [];
  if (t.threads_forgotten) gone.push(`${t.threads_forgotten} ended threads`);
  if (t.segments_forgotten) gone.push(`${t.segments_forgotten} old segments`);
  if (t.objects_forgotten) gone.push(`the state of ${t.objects_forgotten} locks and threads`);
  let text = gone.length ? ` · to stay bounded the hub forgot ${gone.join(', ')}` : '';
  if (t.events_not_drawn) text += ` · ${t.events_not_drawn} events of threads past the first ${t.thread_limit} not drawn`;
  return text;
}

/** Seconds, as a short label. @param {number} s */
const fmt = (s) => (Math.abs(s) < 1 ? `${(s * 1e3).toFixed(3)} ms` : `${s.toFixed(4)} s`);

let wired = false;
/** Zoom, pan, scroll, click and the buttons; once. */
function wire() {
  $('tl-legend').replaceChildren(...STATES.map(([name, c]) => el('span', {}, el('i', { style: `background:${c}` }), name)));
  if (wired) return;
  wired = true;
  const canvas = $('tl-canvas');
  canvas.addEventListener('wheel', (/** @type {WheelEvent} */ e) => {
    e.preventDefault();
    if (!tile) return;
    if (e.shiftKey) {
      V.row0 = Math.max(0, Math.min(tile.total_rows - 1, V.row0 + Math.sign(e.deltaY || e.deltaX) * 3));
    } else {
      const f = Math.exp(e.deltaY * 0.002);
      const at = V.t0 + ((e.offsetX - LABEL_W) / (canvas.clientWidth - LABEL_W)) * (V.t1 - V.t0);
      V.t0 = Math.max(0, at - (at - V.t0) * f);
      V.t1 = Math.max(V.t0 + 1e-9, at + (V.t1 - at) * f);
      V.follow = false;
    }
    fetchTile();
  }, { passive: false });
  /** @type {{ x: number, y: number, t0: number, t1: number, row0: number } | null} */
  let drag = null;
  canvas.addEventListener('mousedown', (/** @type {MouseEvent} */ e) => {
    drag = { x: e.clientX, y: e.clientY, t0: V.t0, t1: V.t1, row0: V.row0 };
  });
  window.addEventListener('mouseup', (/** @type {MouseEvent} */ e) => {
    if (drag && Math.abs(e.clientX - drag.x) < 3 && Math.abs(e.clientY - drag.y) < 3) details(e);
    drag = null;
  });
  window.addEventListener('mousemove', (/** @type {MouseEvent} */ e) => {
    if (!drag || !tile) return;
    const dt = ((e.clientX - drag.x) / (canvas.clientWidth - LABEL_W)) * (drag.t1 - drag.t0);
    if (Math.abs(e.clientX - drag.x) >= 3) {
      V.t0 = Math.max(0, drag.t0 - dt);
      V.t1 = V.t0 + (drag.t1 - drag.t0);
      V.follow = false;
    }
    V.row0 = Math.max(0, Math.min(tile.total_rows - 1, drag.row0 - Math.round((e.clientY - drag.y) / ROW_H)));
    fetchTile();
  });
  $('tl-follow').onclick = () => { V.follow = true; fetchTile(); };
  $('tl-fit').onclick = () => {
    if (!tile) return;
    Object.assign(V, { t0: tile.start_s, t1: tile.now_s, follow: false });
    fetchTile();
  };
}

/** What the click landed on: the row, the state, and for a wait, whom it waited for. */
function details(/** @type {MouseEvent} */ e) {
  const canvas = $('tl-canvas');
  if (!tile) return;
  const rect = canvas.getBoundingClientRect();
  const x = e.clientX - rect.left;
  const i = Math.floor((e.clientY - rect.top) / ROW_H);
  const row = tile.rows[i];
  if (!row || x < LABEL_W) return;
  const px = ((x - LABEL_W) * tile.width) / (canvas.clientWidth - LABEL_W);
  const run = row.runs.find(([x0, x1]) => x0 <= px && px < x1);
  if (!run) {
    $('tl-info').textContent = `${row.label}: nothing recorded here`;
    return;
  }
  const [x0, x1, s, object] = run;
  const t = (p) => V.t0 + (p / tile.width) * (V.t1 - V.t0);
  let text = `${row.label} (thread ${row.threads.join(', ')}): ${STATES[s][0]}`;
  if (object) text += ` ${object}`;
  text += `, ${fmt(t(x0))} – ${fmt(t(x1))}`;
  // The arrow that ended the wait names its cause: the holder that released the mutex, the
  // thread that signalled, the thread joined.
  const end = t(x1);
  const slack = (V.t1 - V.t0) / tile.width * 2;
  const cause = tile.arrows.find((a) => row.threads.includes(a.to_thread) && Math.abs(a.to_s - end) <= slack
    && (!object || a.object === object));
  if (cause) {
    const who = { lock: 'released by', signal: 'signalled by', fork: 'forked by', join: 'ended:' }[cause.kind] || 'after';
    text += ` · ${who} thread ${cause.from_thread} at ${fmt(cause.from_s)}`;
  } else if (s >= 1 && s <= 6 && tile.arrows_omitted) {
    text += ' · zoom in to see whom it waited for';
  }
  $('tl-info').textContent = text;
}

// The viewport, the last tile and what tiles cost, for the browser tests and `gyr-bench web`,
// which read them from the page.
/** @type {any} */ (window).TL = { V, tile: () => tile, refresh: fetchTile, perf };
