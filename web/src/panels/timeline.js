// The life-time view (Falcon's), of one of two things:
// - the threads of the selected program: a row per thread or role, coloured by what it was
//   doing when (running, waiting for which mutex, lock, condition, join or barrier, blocked on
//   a full ring, exited), with the causal arrows between threads (`/api/timeline`);
// - the ranks of the MPI job the selected program belongs to: a row per rank, coloured by
//   whether it computed or was inside an MPI call (send, receive, wait/test, collective,
//   other), with every message as an arrow from its send to its receive
//   (`/api/mpi/timeline`).
// The hub draws each viewport at the canvas's width, so the page never receives more than it
// can draw, and only the visible rows are asked for.
// @ts-check
import { $, el, setText } from '../dom.js';
import { tokenQuery } from '../conn.js';
import { bytes } from '../format.js';
import { rankJob } from './mpi.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/** @typedef {import('../protocol').TimelineTile} TimelineTile */
/** @typedef {import('../protocol').RankTile} RankTile */
/** @typedef {import('../protocol').TimelineRow} TimelineRow */

/** Thread state colours and names, by the state number the hub sends. */
const STATES = [
  ['running', '#7fbf7f'], ['wait mutex', '#e05a4f'], ['wait read lock', '#f0a35e'],
  ['wait write lock', '#d9822b'], ['wait condition', '#5b8def'], ['wait join', '#9b6bd6'],
  ['wait barrier', '#e0c341'], ['blocked on a full ring', '#333'], ['exited', '#e8e8e8'],
];
const ARROWS = { lock: '#c0392b', signal: '#2f6fde', fork: '#1f8a4c', join: '#7d3c98' };
/**
 * Rank state colours and names, by the state number of a rank tile: computing as a thread's
 * running, the waits of MPI in colours apart from each other.
 */
const RANK_STATES = [
  ['computing', '#7fbf7f'], ['send', '#f0a35e'], ['receive', '#e05a4f'],
  ['wait / test', '#9b6bd6'], ['collective', '#e0c341'], ['other MPI', '#8c96a5'],
];
/** Messages: dark, apart from the thread arrows' colours and visible on every state. */
const MESSAGE = '#10243e';
const ROW_H = 18;
/** Rank rows are taller: arrows between neighbouring ranks need room to be seen. */
const RANK_ROW_H = 30;
const LABEL_W = 150;

/**
 * The viewport: program, what its rows are (`threads` or `ranks`), time range (s), first row,
 * following the live end or not, and how long a span it follows (`null`: the whole run so
 * far). `prefer` is the user's choice, kept across programs: ranks are shown when the program
 * is a rank.
 */
const V = {
  pid: -1, mode: 'threads', prefer: 'threads', key: '', job: '',
  t0: 0, t1: 1, row0: 0, follow: true, span: /** @type {number | null} */ (null), busy: false, again: false,
};
/** @type {TimelineTile | RankTile | null} */
let tile = null;
/** What the last paint drew, for the browser tests: rows, runs and arrows. */
const drawn = { mode: '', rows: 0, runs: 0, arrows: 0 };

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

const rowH = () => (V.mode === 'ranks' ? RANK_ROW_H : ROW_H);
/** @returns {t is RankTile} */
const isRanks = (/** @type {TimelineTile | RankTile | null} */ t) => !!t && 'job' in t;

/** @param {ProcessSummary} p */
function draw(p) {
  if (!p) return;
  wire();
  const job = rankJob(p.pid);
  const mode = job && V.prefer === 'ranks' ? 'ranks' : 'threads';
  // Another rank of the job shown keeps the viewport: the rows are the same.
  const key = mode === 'ranks' ? `job ${job.job}` : `pid ${p.pid}`;
  V.pid = p.pid;
  if (job) V.job = job.job;
  if (V.key !== key) {
    // A program's threads first show the whole run; a job's ranks its last second, where the
    // messages can still be told apart.
    Object.assign(V, { key, mode, t0: 0, t1: 1, row0: 0, follow: true, span: mode === 'ranks' ? 1 : null });
    tile = null;
    modeChanged();
  }
  $('tl-mode').hidden = !job;
  if (job) setText($('tl-ranks'), `Ranks of job ${job.job}`);
  if (V.follow || !tile) fetchTile();
}

/** The head, legend and help for the rows shown now. */
function modeChanged() {
  const ranks = V.mode === 'ranks';
  setText($('tl-title'), ranks ? 'Rank life-times' : 'Thread life-times');
  $('tl-threads').setAttribute('aria-pressed', String(!ranks));
  $('tl-ranks').setAttribute('aria-pressed', String(ranks));
  const states = ranks ? RANK_STATES : STATES;
  const keys = states.map(([name, c]) => el('span', {}, el('i', { style: `background:${c}` }), name));
  if (ranks) keys.push(el('span', {}, el('b', { class: 'tl-arrow', style: `color:${MESSAGE}` }, '→'), 'message (send → receive)'));
  $('tl-legend').replaceChildren(...keys);
  $('tl-info').textContent = '';
  paint();
}

/** Asks the hub for the viewport; one request at a time, the latest wish wins. */
async function fetchTile() {
  if (V.busy) {
    V.again = true;
    return;
  }
  V.busy = true;
  const key = V.key;
  try {
    const canvas = $('tl-canvas');
    // Before the first rows the canvas is hidden: its panel gives the width, and as many rows
    // are asked for as it shows at most.
    const across = canvas.clientWidth || $('lifetimes-panel').clientWidth - 26;
    const width = Math.max(50, Math.round((across - LABEL_W) * (devicePixelRatio || 1)));
    const rows = Math.max(V.mode === 'ranks' ? 20 : 24, Math.floor(canvas.clientHeight / rowH()));
    let q = `pid=${V.pid}&r0=${V.row0}&r1=${V.row0 + rows}&w=${width}&arrows=400`;
    // Following, the view keeps its span up to the live end, the hub's latest time when it
    // answers (or everything, when the span is the whole run).
    const follow = V.span === null ? '&t0=0' : `&span=${Math.max(V.span, 0.001)}`;
    q += V.follow ? follow : `&t0=${V.t0}&t1=${V.t1}`;
    const api = V.mode === 'ranks' ? '/api/mpi/timeline' : '/api/timeline';
    const asked = performance.now();
    const r = await fetch(`${api}?${q}${tokenQuery()}`);
    // A tile for what was shown before the user switched is no use.
    if (r.ok && key === V.key) {
      const text = await r.text();
      const got = performance.now();
      tile = /** @type {TimelineTile | RankTile} */ (JSON.parse(text));
      const parsed = performance.now();
      if (V.follow) {
        V.t1 = tile.now_s;
        V.t0 = tile.t0_s;
      }
      paint();
      const drawnAt = performance.now();
      account(drawnAt - got, parsed - got, drawnAt - parsed, drawnAt - asked, text.length);
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

/**
 * x of a time on the canvas, in CSS pixels, in the tile drawn: its span, not the viewport's,
 * which a wheel or a drag may have moved since the tile was asked for.
 * @param {number} t @param {HTMLElement} canvas @param {TimelineTile | RankTile} drawn
 */
function xOf(t, canvas, drawn) {
  const [t0, t1] = [drawn.t0_s, drawn.t1_s];
  return LABEL_W + ((t - t0) / Math.max(1e-12, t1 - t0)) * (canvas.clientWidth - LABEL_W);
}

/**
 * The tile as the canvas draws it: rows, their states' colours, and the arrows as
 * `[from row key, from s, to row key, to s, colour]` (a row's keys are its threads, or its
 * rank).
 */
function model() {
  if (isRanks(tile)) {
    return {
      states: RANK_STATES,
      arrows: tile.arrows.map((a) => [a.sender, a.send_s, a.receiver, a.recv_s, MESSAGE]),
      label: (/** @type {TimelineRow} */ row) => row.label,
    };
  }
  return {
    states: STATES,
    arrows: (tile ? tile.arrows : []).map((a) => [a.from_thread, a.from_s, a.to_thread, a.to_s, ARROWS[a.kind] || '#555']),
    label: (/** @type {TimelineRow} */ row) => (row.threads.length > 1 ? `${row.label} (${row.threads.length} threads)` : row.label),
  };
}

function paint() {
  const canvas = $('tl-canvas');
  const dpr = devicePixelRatio || 1;
  const h0 = rowH();
  // As tall as the rows need, up to 24 thread rows or 20 ranks (more scroll), and a line for
  // the time range.
  const most = V.mode === 'ranks' ? 20 : 24;
  const want = `${Math.min(most, Math.max(3, tile ? tile.total_rows : 3)) * h0 + 22}px`;
  if (canvas.style.height !== want) canvas.style.height = want;
  const ranks = V.mode === 'ranks';
  const some = !!(tile && tile.total_rows > 0);
  $('tl-empty').hidden = some || ranks;
  $('tl-empty-ranks').hidden = some || !ranks;
  // Shown before it is measured: a canvas still hidden measures 0 wide, and the first rows
  // would be drawn on nothing until the next tile.
  $('tl-box').hidden = !some;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr)) canvas.width = Math.round(w * dpr);
  if (canvas.height !== Math.round(h * dpr)) canvas.height = Math.round(h * dpr);
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  Object.assign(drawn, { mode: V.mode, rows: 0, runs: 0, arrows: 0 });
  if (!tile || !some) return;
  const m = model();
  g.font = '12px system-ui, sans-serif';
  g.textBaseline = 'middle';
  const scale = (w - LABEL_W) / tile.width; // hub pixels are device pixels
  /** @type {Map<number, number>} thread or rank → y of its row's middle */
  const rowY = new Map();
  // The runs of each state as one path, filled once: setting the colour for each run (thousands
  // in a tile zoomed out) took most of the drawing time (`gyr-bench web`).
  const paths = m.states.map(() => new Path2D());
  const other = new Path2D();
  const pad = ranks ? 5 : 3;
  tile.rows.forEach((row, i) => {
    const y = i * h0;
    for (const t of row.threads) rowY.set(t, y + h0 / 2);
    g.fillStyle = i % 2 ? '#fafbfc' : '#fff';
    g.fillRect(0, y, w, h0);
    g.fillStyle = '#1d2430';
    const label = m.label(row);
    g.fillText(label.length > 22 ? label.slice(0, 21) + '…' : label, 4, y + h0 / 2);
    for (const [x0, x1, s] of row.runs) {
      (paths[s] || other).rect(LABEL_W + x0 * scale, y + pad, Math.max(1, (x1 - x0) * scale), h0 - 2 * pad);
    }
    drawn.runs += row.runs.length;
  });
  drawn.rows = tile.rows.length;
  paths.forEach((path, s) => {
    g.fillStyle = m.states[s][1];
    g.fill(path);
  });
  g.fillStyle = '#999';
  g.fill(other);
  // The part of the run the hub forgot to stay bounded, shaded.
  if (tile.start_s > tile.t0_s && isRanks(tile) && tile.segments_forgotten) {
    g.fillStyle = 'rgba(29,36,48,0.08)';
    g.fillRect(LABEL_W, 0, Math.min(w, xOf(tile.start_s, canvas, tile)) - LABEL_W, tile.rows.length * h0);
  }
  // Arrows from before the window start at its left edge, not over the labels.
  g.save();
  g.beginPath();
  g.rect(LABEL_W, 0, w - LABEL_W, tile.rows.length * h0);
  g.clip();
  g.lineWidth = ranks ? 1.4 : 1.2;
  for (const [from, fromS, to, toS, colour] of m.arrows) {
    const y0 = rowY.get(from);
    const y1 = rowY.get(to);
    if (y0 === undefined || y1 === undefined) continue;
    const x0 = xOf(fromS, canvas, tile);
    const x1 = xOf(toS, canvas, tile);
    g.strokeStyle = colour;
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
    if (ranks) {
      // The send's start, a dot on the sender's row.
      g.beginPath();
      g.arc(x0, y0, 2, 0, 2 * Math.PI);
      g.fill();
    }
    drawn.arrows++;
  }
  g.restore();
  g.fillStyle = '#6b7585';
  // Rows counted from 1: for ranks, which are counted from 0, the count says rows.
  const rows = `rows ${tile.first_row + 1}–${tile.first_row + tile.rows.length} of ${tile.total_rows}`;
  g.fillText(`${fmt(tile.t0_s)} – ${fmt(tile.t1_s)} · ${rows}${ranks ? ' ranks' : ''}`
    + (tile.arrows_omitted ? ` · ${tile.arrows_omitted} ${ranks ? 'messages' : 'arrows'}: zoom in` : '')
    + status(tile), LABEL_W + 4, h - 8);
  $('tl-follow').disabled = V.follow;
}

/**
 * What the status line says after the range: the counts of the tile's kind, and what the hub
 * forgot or left out to keep the view within its bounds.
 * @param {TimelineTile | RankTile} t
 */
function status(t) {
  if (isRanks(t)) {
    const gone = [];
    if (t.segments_forgotten) gone.push(`${t.segments_forgotten} calls before ${fmt(t.start_s)}`);
    if (t.messages_forgotten) gone.push(`${t.messages_forgotten} old messages`);
    let text = ` · job ${t.job}: ${t.segments} MPI calls, ${t.messages} messages`;
    // Arrows pointing back in time: the ranks' clocks disagree (the MPI panel counts them).
    const back = t.arrows.filter((a) => a.recv_s < a.send_s).length;
    if (back) text += ` · ${back} shown received before sent: the ranks' clocks disagree`;
    if (gone.length) text += ` · to stay bounded the hub forgot ${gone.join(', ')}`;
    if (t.calls_past_limit) text += ` · ${t.calls_past_limit} calls past the hub's bound on names drawn as other MPI`;
    if (t.backwards) text += ` · ${t.backwards} calls ending before they began left out`;
    return text;
  }
  return ` · ${t.events} thread events, hold-back ratio ${t.hold_back_ratio.toFixed(2)}`
    + (t.forced ? `, ${t.forced} released without their cause` : '') + bounded(t);
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

/** Shows the threads of the program, or the ranks of its job. @param {'threads' | 'ranks'} mode */
function choose(mode) {
  V.prefer = mode;
  draw(/** @type {any} */ ({ pid: V.pid }));
}

let wired = false;
/** Zoom, pan, scroll, click and the buttons; once. */
function wire() {
  if (wired) return;
  wired = true;
  modeChanged();
  $('tl-threads').onclick = () => choose('threads');
  $('tl-ranks').onclick = () => choose('ranks');
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
    V.row0 = Math.max(0, Math.min(tile.total_rows - 1, drag.row0 - Math.round((e.clientY - drag.y) / rowH())));
    fetchTile();
  });
  $('tl-follow').onclick = () => { Object.assign(V, { follow: true, span: V.t1 - V.t0 }); fetchTile(); };
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
  const i = Math.floor((e.clientY - rect.top) / rowH());
  const row = tile.rows[i];
  if (!row || x < LABEL_W) return;
  const px = ((x - LABEL_W) * tile.width) / (canvas.clientWidth - LABEL_W);
  const run = row.runs.find(([x0, x1]) => x0 <= px && px < x1);
  if (!run) {
    $('tl-info').textContent = `${row.label}: nothing recorded here`;
    return;
  }
  // The tile's own span, not the viewport's: the view may have moved since the tile was asked
  // for, and the run under the pointer is the tile's.
  const [t0, t1] = [tile.t0_s, tile.t1_s];
  const t = (p) => t0 + (p / tile.width) * (t1 - t0);
  const slack = (t1 - t0) / tile.width * 2;
  if (isRanks(tile)) {
    $('tl-info').textContent = rankDetails(tile, row, run, t, slack);
    return;
  }
  const [x0, x1, s, object] = run;
  let text = `${row.label} (thread ${row.threads.join(', ')}): ${STATES[s][0]}`;
  if (object) text += ` ${object}`;
  text += `, ${fmt(t(x0))} – ${fmt(t(x1))}`;
  // The arrow that ended the wait names its cause: the holder that released the mutex, the
  // thread that signalled, the thread joined.
  const end = t(x1);
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

/**
 * A rank's run, said: its state and call, and the message that ended a receive or wait (from
 * whom, when sent) or that a send began.
 * @param {RankTile} rt
 * @param {TimelineRow} row
 * @param {[number, number, number, number]} run
 * @param {(px: number) => number} t seconds at a tile pixel
 * @param {number} slack seconds two pixels span
 */
function rankDetails(rt, row, run, t, slack) {
  const [x0, x1, s, call] = run;
  const rank = row.threads[0];
  let text = `${row.label}: ${RANK_STATES[s] ? RANK_STATES[s][0] : 'other MPI'}`;
  if (call) text += ` (${rt.calls[call - 1] || 'MPI call'})`;
  text += `, ${fmt(t(x0))} – ${fmt(t(x1))}`;
  const [start, end] = [t(x0), t(x1)];
  const got = rt.arrows.find((a) => a.receiver === rank && Math.abs(a.recv_s - end) <= slack);
  const sent = rt.arrows.find((a) => a.sender === rank && a.send_s >= start - slack && a.send_s <= end + slack);
  if (s !== 0 && got) {
    const late = got.send_s - start;
    text += ` · ended by a message from rank ${got.sender} (${bytes(got.bytes)}, tag ${got.tag}) sent at ${fmt(got.send_s)}`;
    if (late > slack) text += `: the sender was ${fmt(late)} late`;
  } else if (sent) {
    text += ` · sends rank ${sent.receiver} ${bytes(sent.bytes)} (tag ${sent.tag}), received at ${fmt(sent.recv_s)}`;
  } else if (s !== 0 && rt.arrows_omitted) {
    text += ' · zoom in to see its messages';
  }
  return text;
}

// The viewport, the last tile, what was drawn and what tiles cost, for the browser tests and
// `gyr-bench web`, which read them from the page.
/** @type {any} */ (window).TL = { V, tile: () => tile, refresh: fetchTile, perf, drawn, choose };
