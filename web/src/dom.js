// Small element helpers: find, make, and write only what changed.
// @ts-check

/** An element of the page by id: inputs, selects and canvases alike, so typed loosely. */
export const $ = (/** @type {string} */ id) => /** @type {any} */ (document.getElementById(id));

/**
 * A new element: `class`, `on…` listeners and other attributes, then its children (nodes, or
 * anything else as text; `null` and `undefined` are left out).
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...any} kids
 * @returns {any}
 */
export function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k.nodeType ? k : String(k));
  return e;
}

/**
 * A new SVG element with its attributes.
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @returns {any}
 */
export function svg(tag, attrs = {}) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// Text and attributes are written only when they change: most ticks change nothing on screen.
/** @param {Element} e @param {string} s */
export const setText = (e, s) => { if (e.textContent !== s) e.textContent = s; };
/** @param {Element} e @param {string} s */
export const setClass = (e, s) => { if (e.getAttribute('class') !== s) e.setAttribute('class', s); };

/**
 * Rebuilds `box`'s children only when `key` changed since the last time: most ticks change
 * nothing on screen, and a node rebuilt under the pointer loses the user's click.
 * @param {HTMLElement} box
 * @param {string} key
 * @param {() => Node[]} build
 */
export function rebuild(box, key, build) {
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  box.replaceChildren(...build());
}

/**
 * Fills a `<select>` with `values` (shown as `label` makes them), only when they changed,
 * keeping the user's choice when it is still there.
 * @param {HTMLSelectElement} pick
 * @param {string[]} values
 * @param {(v: string) => string} label
 */
export function fillSelect(pick, values, label) {
  const have = [...pick.options].map((o) => o.value).join('|');
  if (have === values.join('|')) return;
  const keep = pick.value;
  pick.replaceChildren(...values.map((v) => el('option', { value: v }, label(v))));
  if (values.includes(keep)) pick.value = keep;
}
