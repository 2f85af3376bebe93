// The Sensors panel: each sensor type's state and rate, switched on or off, or thinned.
// @ts-check
import { $, el } from '../dom.js';
import { tidy } from '../format.js';
import { send } from '../conn.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */

/** The sensors the table was built for. */
let built = '';

/** @type {import('../frame.js').Panel} */
export const sensors = { on: ['summaries'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  const box = $('sensors');
  const list = p.sensors || [];
  const key = `${p.pid}/${p.source}:` + list.map((s) => `${s.type}/${s.instance}/${s.enabled}/${s.active}/${s.rate}`).join('|');
  if (key === built) return;
  built = key;
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
    const act = async (/** @type {string} */ setting) => {
      const r = await send({ op: 'sensor', type: s.type, setting });
      out.textContent = r.ok ? '' : r.error;
    };
    rate.addEventListener('keydown', (/** @type {KeyboardEvent} */ ev) => { if (ev.key === 'Enter') act(rate.value.trim()); });
    t.append(el('tr', {}, el('td', {}, s.type, el('div', { class: 'muted' }, s.kind)),
      el('td', {}, s.active ? 'on' : (s.enabled ? 'idle' : 'off')), el('td', {}, tidy(s.rate)),
      el('td', {}, el('button', { onclick: () => act(s.enabled ? 'off' : 'on') }, s.enabled ? 'Off' : 'On'), ' ', rate, out)));
  }
  box.replaceChildren(t);
}
