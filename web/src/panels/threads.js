// The Threads panel: a program's threads (the busiest, when it has many) and its event types.
// @ts-check
import { $, el } from '../dom.js';
import { S } from '../state.js';
import { count, rate } from '../format.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/** @typedef {import('../protocol').ThreadSummary} ThreadSummary */

/** Threads listed in the panel; a program of a thousand threads is summed up below them. */
const PANEL_THREADS = 30;

/** @param {ThreadSummary} t */
export const threadName = (t) => t.name || `thread ${t.id}`;

/**
 * The `n` threads with the highest rate, busiest first.
 * @param {ThreadSummary[]} threads
 * @param {number} n
 */
export function busiest(threads, n) {
  return threads.length <= n ? threads : [...threads].sort((a, b) => b.rate - a.rate).slice(0, n);
}

/** @type {import('../frame.js').Panel} */
export const threads = { on: ['summaries'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  const box = $('threads');
  // Drawn when new summaries came (every few updates), not every frame.
  const gen = `${p.pid}:${S.summaryGen}`;
  if (box.dataset.gen === gen) return;
  box.dataset.gen = gen;
  box.replaceChildren(threadTable(p), el('div', { style: 'height:8px' }), typeTable(p));
}

/** @param {ProcessSummary} p */
function threadTable(p) {
  const t = el('table');
  const shown = busiest(p.threads, PANEL_THREADS);
  t.append(el('tr', {}, el('th', {}, shown.length < p.threads.length ? `busiest ${shown.length} of ${p.threads.length} threads` : 'thread'),
    el('th', {}, 'events'), el('th', {}, 'per second')));
  for (const th of shown) {
    t.append(el('tr', {}, el('td', {}, th.name || `#${th.id}`), el('td', { class: 'num' }, count(th.count)),
      el('td', { class: 'num' }, rate(th.rate))));
  }
  if (shown.length < p.threads.length) {
    const rates = p.threads.map((x) => x.rate).sort((a, b) => a - b);
    const total = rates.reduce((a, r) => a + r, 0);
    const median = rates[Math.floor(rates.length / 2)];
    t.append(el('tr', { class: 'muted' }, el('td', {}, `all ${p.threads.length} threads`),
      el('td', { class: 'num' }, count(p.threads.reduce((a, x) => a + x.count, 0))),
      el('td', { class: 'num' }, `${rate(total)} (per thread ${rate(rates[0])} · ${rate(median)} · ${rate(rates[rates.length - 1])})`)));
  }
  return t;
}

/** @param {ProcessSummary} p */
function typeTable(p) {
  const t = el('table');
  t.append(el('tr', {}, el('th', {}, 'event type'), el('th', {}, 'events'), el('th', {}, 'per second')));
  for (const [name, ty] of Object.entries(p.types)) {
    t.append(el('tr', {}, el('td', {}, name), el('td', { class: 'num' }, count(ty.count)), el('td', { class: 'num' }, rate(ty.rate))));
  }
  return t;
}
