// Alerts pop up as they arrive, whichever program is shown: a rule's warning must not wait for
// someone to open the right program. Clicking one shows its program; each goes after a while.
// @ts-check
import { $, el } from '../dom.js';
import { S, select } from '../state.js';
import { redraw } from '../frame.js';

/** @typedef {import('../protocol').Alert} Alert */

/** How long an alert stays up, in ms; how many stay up at once. */
const SHOWN_MS = 12000;
const MAX_SHOWN = 4;

/** Alerts already popped up (or there before the page opened). */
const seen = new WeakSet();
let primed = false;

/** @type {import('../frame.js').Panel} */
export const toasts = { on: ['log'], always: true, draw };

function draw() {
  const fresh = S.alerts.filter((a) => !seen.has(a));
  for (const a of fresh) seen.add(a);
  // What the hub had when the page opened is in the Alerts panel; only new alerts pop up.
  if (!primed) { primed = true; return; }
  const box = $('toasts');
  for (const a of fresh.slice(-MAX_SHOWN)) {
    const severity = a.fields.severity || 'info';
    const t = el('div', {
      class: `toast ${severity}`, role: 'alert', title: 'show this program',
      onclick: () => { select(a.pid); t.remove(); redraw('view'); },
    },
    el('div', { class: 'toast-head' }, `${severity.toUpperCase()} · pid ${a.pid}${a.fields.rule ? ` · ${a.fields.rule}` : ''}`),
    el('div', {}, a.fields.message || Object.entries(a.fields).map(([k, v]) => `${k}: ${v}`).join(', ')));
    box.append(t);
    setTimeout(() => t.remove(), SHOWN_MS);
  }
  while (box.children.length > MAX_SHOWN) box.firstChild.remove();
}
