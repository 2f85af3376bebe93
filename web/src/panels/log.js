// The steering log (who changed what, and what was refused) and the alerts of rules.
// @ts-check
import { $, el, rebuild } from '../dom.js';
import { S } from '../state.js';
import { programTime, tidy, value } from '../format.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */

/** @type {import('../frame.js').Panel} */
export const log = { on: ['log'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  const mine = S.log.filter((e) => e.pid === p.pid).slice(-200);
  const box = $('log');
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  const last = mine[mine.length - 1];
  rebuild(box, `${p.pid}:${mine.length}:${last ? `${last.t}/${last.action}` : ''}`, () => (mine.length
    ? mine.map((e) => el('div', { class: e.error ? 'refused' : '' },
      `${programTime(e.t)}  ${e.who}  ${tidy(e.action)}${e.error ? '  REFUSED: ' + tidy(e.error) : ''}`))
    : [el('p', { class: 'muted' }, 'Nothing steered yet.')]));
  if (atBottom) box.scrollTop = box.scrollHeight;
  const alerts = S.alerts.filter((a) => a.pid === p.pid).slice(-100);
  if (alerts.length) {
    const lastAlert = alerts[alerts.length - 1];
    rebuild($('alerts'), `${p.pid}:${alerts.length}:${lastAlert.t}`, () => alerts.map((a) => {
      // An alert of a rule reads as severity, message and rule; other fields follow.
      const { severity, message, rule, ...rest } = a.fields;
      const more = Object.entries(rest).filter(([, v]) => v !== '').map(([k, v]) => `${k}: ${value(v)}`).join(', ');
      const text = [severity ? severity.toUpperCase() : '', message || '', rule ? `(rule ${rule})` : '', more]
        .filter((x) => x).join('  ');
      return el('div', { class: `alert ${severity || ''}` }, `${programTime(a.t)}  ${text}`);
    }));
  }
}
