// Numbers as the page shows them: significant digits, counts, program times and durations.
// @ts-check

/**
 * A measured number to `digits` significant digits (5 unless said), trailing zeros dropped:
 * `15.133860899999998` is `15.134`. Digits left of the point are never dropped (`123457`),
 * and numbers below 0.0001 or from 10¹⁵ are written with an exponent (`1.2346e-7`).
 * @param {unknown} x
 * @param {number} [digits]
 */
export function num(x, digits = 5) {
  if (typeof x !== 'number' || !Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a === 0) return '0';
  if (a < 1e-4 || a >= 1e15) return Number(x.toPrecision(digits)).toExponential();
  if (a >= 10 ** digits) return Math.round(x).toString();
  return Number(x.toPrecision(digits)).toString();
}

/**
 * A rate, per second: three significant digits are what the eye compares (`7184`, `0.783`).
 * @param {number} x
 */
export const rate = (x) => num(x, 3);

/**
 * A count of things, in full with the reader's digit grouping: `1,234,567`.
 * @param {number} n
 */
export const count = (n) => n.toLocaleString();

/**
 * A time in the program's clock, in seconds to the millisecond: `12.345s`.
 * @param {number} t
 */
export const programTime = (t) => `${t.toFixed(3)}s`;

/**
 * A position in a recording: `m:ss.s`.
 * @param {number} s seconds
 */
export const clock = (s) => `${Math.floor(s / 60)}:${(s % 60).toFixed(1).padStart(4, '0')}`;

/**
 * A duration given in milliseconds: `850 ms`, `1.2 s`.
 * @param {number} ms
 */
export const duration = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`);

/**
 * An amount of memory or data: `512 B`, `1.5 KB`, `23 MB`.
 * @param {number} n bytes
 */
export function bytes(n) {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
  return `${i === 0 ? n : num(n, 3)} ${units[i]}`;
}

const DECIMAL = /^[-+]?(?:\d+\.\d*|\.\d+)(?:e[-+]?\d+)?$|^[-+]?\d+e[-+]?\d+$/i;

/**
 * A program's value, as the program wrote it (numbers, booleans and text alike), to show:
 * a decimal number to `digits` significant digits (6 unless said), and so the long decimals
 * within a list or a text; integers as they are, so that no count loses a digit.
 * @param {string} text
 * @param {number} [digits]
 */
export function value(text, digits = 6) {
  if (!DECIMAL.test(text.trim())) return tidy(text, digits);
  const x = Number(text);
  return Number.isFinite(x) ? num(x, digits) : text;
}

/**
 * A program's value to edit: decimal numbers (alone or in a list) without the last digits'
 * rounding noise (`0.30000000000000004` is `0.3`), yet precise enough to be set back unchanged
 * in effect.
 * @param {string} text
 */
export function editable(text) {
  if (!DECIMAL.test(text.trim())) return tidy(text, 12);
  const x = Number(text);
  return Number.isFinite(x) ? String(Number(x.toPrecision(12))) : text;
}

const LONG_DECIMAL = /[-+]?\d*\.\d{7,}(?:e[-+]?\d+)?/gi;

/**
 * A message from a program or the hub (`nbody.dt: 0.001 -> 0.0005`) with its long decimal
 * numbers cut to `digits` significant digits (6 unless said).
 * @param {string} text
 * @param {number} [digits]
 */
export const tidy = (text, digits = 6) => text.replace(LONG_DECIMAL, (m) => value(m, digits));
