// A gauge's arithmetic: round-numbered scales, and how far a value is from its design point.
// @ts-check
import { num } from '../format.js';

/** @param {number} x @param {number} a @param {number} b */
export const clamp = (x, a, b) => Math.min(b, Math.max(a, x));

/** The round step (1, 2, 2.5 or 5 times a power of ten) at or above `raw`. @param {number} raw */
function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(raw)), m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
}

/**
 * Ticks at round numbers from `lo` to `hi` (widened to round ends unless `fixed`): at most 5
 * intervals, fewer when the labels are long, so that they fit.
 * @param {number} lo @param {number} hi @param {boolean} fixed
 * @returns {{ lo: number, hi: number, ticks: number[], labels: string[] } | null}
 */
export function scale(lo, hi, fixed) {
  if (!(hi > lo) || !Number.isFinite(hi - lo)) return null;
  const round = (/** @type {number} */ x) => Number(x.toPrecision(12));
  for (const n of [5, 3, 2]) {
    let step = niceStep((hi - lo) / n), a, b;
    for (;;) {
      a = Math.floor(lo / step); b = Math.ceil(hi / step);
      if (b - a <= n) break;
      step = niceStep(step * 1.01);
    }
    const lo2 = fixed ? lo : round(a * step), hi2 = fixed ? hi : round(b * step);
    const mant = round(step / 10 ** Math.floor(Math.log10(step)));
    const dec = Math.max(0, -Math.floor(Math.log10(step)) + (mant === 2.5 ? 1 : 0));
    // Enough digits that neighbouring ticks differ, even on a very narrow scale.
    const digits = clamp(Math.floor(Math.log10(Math.max(Math.abs(lo), Math.abs(hi)))) + dec + 1, 1, 15);
    const label = (/** @type {number} */ x) => (Math.abs(x) >= 1e6 || dec > 6 ? Number(x.toPrecision(digits)).toString() : x.toFixed(dec));
    const ticks = [];
    for (let k = Math.ceil(lo2 / step - 1e-9); k * step <= hi2 + step * 1e-9; k++) ticks.push(round(k * step));
    const labels = ticks.map(label);
    if (n === 2 || Math.max(...labels.map((l) => l.length)) <= (n === 5 ? 6 : 8)) {
      return { lo: lo2, hi: hi2, ticks, labels };
    }
  }
  return null;
}

/**
 * How far `v` is from the design point `d`: within ±10% is fine (`good`), up to ±25% a
 * warning (`warn`), beyond that `bad`. A design point of 0 has no percentage: the distance is
 * judged against the dial's `span` instead.
 * @param {number} v @param {number} d @param {number} span
 */
export function deviation(v, d, span) {
  const rel = d !== 0 ? (v - d) / Math.abs(d) : (v - d) / span;
  const cls = Math.abs(rel) <= 0.1 ? 'good' : Math.abs(rel) <= 0.25 ? 'warn' : 'bad';
  const pct = Math.abs(rel * 100);
  if (d !== 0 && pct < 0.05) return { text: 'on design', cls };
  const size = d !== 0 ? `${pct < 10 ? pct.toFixed(1) : pct.toFixed(0)}%` : num(Math.abs(v - d));
  return { text: `${v > d ? '+' : '-'}${size} ${v > d ? 'over' : 'under'} design`, cls };
}
