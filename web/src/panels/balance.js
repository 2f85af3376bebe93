// The Load balance panel: a value per domain, worker or rank as bars, and how uneven they are.
// @ts-check
import { $, el, fillSelect, rebuild } from '../dom.js';
import { S } from '../state.js';
import { num } from '../format.js';
import { redraw } from '../frame.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */

/** Group names listed first: how parallel programs split their work. */
const GROUP_NAMES = ['domain', 'worker', 'rank', 'thread', 'node', 'process'];

/** @type {import('../frame.js').Panel} */
export const balance = { on: ['groups'], draw };

/**
 * The grouped fields of program `pid` with two groups or more, `pid/type/group/field`:
 * domains, workers and ranks first, time spent before other values.
 * @param {number} pid
 */
function groupedFields(pid) {
  const opts = [];
  for (const [key, groups] of Object.entries(S.groups)) {
    if (!key.startsWith(`${pid}/`) || Object.keys(groups).length < 2) continue;
    const fields = new Set();
    for (const g of Object.values(groups)) for (const f of Object.keys(g)) fields.add(f);
    for (const f of fields) opts.push(`${key}/${f}`);
  }
  const rank = (/** @type {string} */ o) => {
    const [, , g, f] = o.split('/');
    return (GROUP_NAMES.includes(g) ? 0 : 2) + (f === 'seconds' || f === 'ms' ? 0 : 1);
  };
  opts.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  // gyr's own events (an MPI rank's calls and messages) come after the program's and are never
  // shown unasked: a balance of MPI return codes by call name was all an MPI rank showed here.
  const ours = (/** @type {string} */ o) => o.split('/')[1].startsWith('gyr.');
  const own = opts.filter((o) => !ours(o)), gyrs = opts.filter(ours);
  return own.length ? [...own, ...gyrs] : gyrs.length ? ['', ...gyrs] : [];
}

/** @param {ProcessSummary} p */
function draw(p) {
  const pick = $('group-pick');
  const fields = groupedFields(p.pid);
  fillSelect(pick, fields, (o) => {
    if (!o) return 'gyr\'s own events…';
    const [, ty, g, f] = o.split('/');
    return `${ty}.${f} by ${g}`;
  });
  const bars = $('bars');
  if (!pick.value) {
    const why = fields.length
      ? 'No per-domain or per-worker events of this program\'s own yet; gyr\'s own are in the list above (an MPI job\'s time per rank is in the MPI panel).'
      : 'No per-domain or per-worker events yet.';
    rebuild(bars, `none:${why}`, () => [el('p', { class: 'muted' }, why)]);
    return;
  }
  const [pid, ty, g, f] = pick.value.split('/');
  const groups = S.groups[`${pid}/${ty}/${g}`] || {};
  const rows = Object.entries(groups).filter(([, v]) => f in v).sort((a, b) => Number(a[0]) - Number(b[0]));
  const vals = rows.map(([, v]) => v[f]);
  // A balance (max ÷ mean, bars over 1.2 × the mean in red) means something for amounts like
  // time or work, which are never negative; other values get plain bars of their magnitude.
  const amounts = vals.every((v) => v >= 0);
  const max = Math.max(...vals.map(Math.abs), 1e-12);
  const mean = vals.reduce((a, b) => a + b, 0) / (vals.length || 1);
  bars.className = 'bars';
  rebuild(bars, `${pick.value}:${JSON.stringify(rows)}`, () => [...rows.map(([k, v]) => el('div', { class: 'row' },
    el('span', { class: 'label' }, `${g} ${k}`),
    el('div', { class: 'track' }, el('div', { class: `fill${amounts && v[f] > 1.2 * mean ? ' hot' : ''}`, style: `width:${(100 * Math.abs(v[f]) / max).toFixed(1)}%` })),
    el('span', { class: 'val' }, num(v[f])))),
  el('div', { class: 'stats' }, !amounts
    ? 'bars show each value\'s magnitude (some are below zero: no balance ratio)'
    : mean > 0 ? `max ÷ mean ${num(max / mean, 3)}: red bars are over 1.2 × the mean` : 'all zero')]);
}

$('group-pick').onchange = () => redraw('groups');
