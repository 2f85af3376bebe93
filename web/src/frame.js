// Drawing at most once a frame, each panel only when what it shows changed.
// The frame's time is accounted in `S.perf` (`gyr-bench web` reads it).
// @ts-check
import { $ } from './dom.js';
import { S } from './state.js';
import { drawn } from './conn.js';

/** @typedef {import('./state.js').Topic} Topic */
/** @typedef {import('./protocol').ProcessSummary} ProcessSummary */
/**
 * A part of the page: drawn when one of the topics it shows (`on`) changed; for the selected
 * program only, unless it is `always` drawn (the list of programs, the replay bar).
 * @typedef {{ on: Topic[], always?: boolean, draw: (p: ProcessSummary | undefined) => void }} Panel
 */

/** @type {Panel[]} */
const panels = [];
let queued = false;

/**
 * Adds parts of the page, drawn in this order.
 * @param {...Panel} ps
 */
export function addPanels(...ps) {
  panels.push(...ps);
}

/**
 * Asks for a frame, in which what changed (and `topics`, if given) is drawn.
 * @param {...Topic} topics
 */
export function redraw(...topics) {
  for (const t of topics) S.changed.add(t);
  if (queued) return;
  queued = true;
  // Updates arrive 25 times a second; the page draws at most once a frame, whatever came since
  // the last. A page that falls behind (a slow machine, a hidden tab) draws less, not later.
  requestAnimationFrame(() => {
    queued = false;
    const t0 = performance.now();
    draw();
    // What this frame cost: the updates folded in since the last one, and the drawing.
    const frame = S.perf.pending + performance.now() - t0;
    S.perf.pending = 0;
    S.perf.frames.push(frame);
    if (S.perf.frames.length > 20000) S.perf.frames.splice(0, 10000);
    drawn();
  });
}

function draw() {
  const changed = S.changed;
  S.changed = new Set();
  const all = changed.has('view');
  const p = S.processes.get(S.selected);
  $('none').hidden = !!p;
  $('program').hidden = !p;
  for (const panel of panels) {
    if (!p && !panel.always) continue;
    if (all || panel.on.some((t) => changed.has(t))) panel.draw(p);
  }
  S.moved.clear();
}
