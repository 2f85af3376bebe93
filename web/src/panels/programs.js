// The list of programs the hub watches, with the selected one's busiest threads.
// @ts-check
import { $, el, rebuild, setClass, setText } from '../dom.js';
import { S, eventRate, select } from '../state.js';
import { rate } from '../format.js';
import { redraw } from '../frame.js';
import { busiest, threadName } from './threads.js';

/** Threads listed under the selected program; the Threads panel lists more. */
const NAV_THREADS = 6;

const SOURCES = {
  attached: 'the hub found this program and attached to its server',
  pushed: 'this program pushes its events to the hub (GYR_HUB)',
  replay: 'a recorded trace, replayed',
};

/** @type {import('../frame.js').Panel} */
export const programs = { on: ['summaries'], always: true, draw };

// The list is rebuilt only when programs come or go; rates are written in place, so an entry
// stays put under the pointer while the program runs.
function draw() {
  const nav = $('programs');
  const key = [...S.processes.values()].map((p) => `${p.pid}:${p.source}:${p.command}`).join('|');
  rebuild(nav, key, () => [el('h2', { style: 'padding:0 14px 6px' }, 'Programs'),
    ...[...S.processes.values()].map((p) => el('div', {
      class: 'prog', 'data-pid': p.pid,
      onclick: () => { select(p.pid); redraw('view'); },
    },
    el('div', {}, el('span', { class: 'pid' }, `pid ${p.pid}`), ' ', el('span', { class: 'muted rate' }),
      ' ', el('span', { class: 'src', title: SOURCES[p.source] || '' }, p.source)),
    el('div', { class: 'cmd' }, p.command),
    el('div', { class: 'threads' })))]);
  for (const item of /** @type {NodeListOf<HTMLElement>} */ (nav.querySelectorAll('.prog'))) {
    const p = S.processes.get(Number(item.dataset.pid));
    if (!p) continue;
    const selected = p.pid === S.selected;
    setClass(item, `prog${selected ? ' sel' : ''}${p.alive ? '' : ' gone'}`);
    setText(item.querySelector('.rate'), p.source === 'replay' ? 'recording' : p.alive ? `${rate(eventRate(p))} ev/s` : 'exited');
    const threads = /** @type {HTMLElement} */ (item.querySelector('.threads'));
    threads.hidden = !selected || !p.threads.length;
    const gen = selected ? `${S.summaryGen}` : '';
    if (threads.dataset.gen === gen) continue;
    threads.dataset.gen = gen;
    // The busiest few threads; a program of a thousand threads lists them in the Threads panel.
    const shown = selected ? busiest(p.threads, NAV_THREADS) : [];
    const more = selected ? p.threads.length - shown.length : 0;
    const lines = shown.map((t) => `${threadName(t)}: ${rate(t.rate)}/s`);
    rebuild(threads, lines.join('\n') + more,
      () => [...lines.map((l) => el('div', {}, l)),
        ...(more > 0 ? [el('div', { class: 'muted' }, `+ ${more} more threads`)] : [])]);
  }
}
