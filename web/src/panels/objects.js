// The Steering objects panel: attributes edited in place, actuators and functions run.
// @ts-check
import { $, el } from '../dom.js';
import { editable, tidy, value } from '../format.js';
import { send } from '../conn.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */
/** @typedef {import('../protocol').AttributeView} AttributeView */
/** @typedef {import('../protocol').OperationView} OperationView */

/** The objects the panel was built for: rebuilt when they change, values written in place. */
let built = '';

/** @type {import('../frame.js').Panel} */
export const objects = { on: ['summaries'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  const box = $('objects');
  const o = p.objects;
  const key = `${p.pid}/${p.source}:` + (o ? JSON.stringify([o.objects.map((x) => [x.name, x.attributes.map((a) => a.path), x.actuators.map((a) => a.name)]), o.functions.map((f) => f.name)]) : 'none');
  if (key !== built) {
    built = key;
    box.replaceChildren();
    if (!o || (!o.objects.length && !o.functions.length)) {
      box.append(el('p', { class: 'muted' }, p.source === 'replay'
        ? 'A recording being replayed: it can be watched, not steered.'
        : 'No steering objects.'));
      return;
    }
    for (const obj of o.objects) {
      box.append(el('div', { class: 'obj-name' }, obj.name, obj.description ? el('span', { class: 'muted' }, ` — ${obj.description}`) : null));
      const t = el('table');
      t.append(el('tr', {}, el('th', {}, 'attribute'), el('th', {}, 'value'), el('th', {}, 'unit, range')));
      for (const a of obj.attributes) {
        t.append(el('tr', {}, el('td', { title: a.description }, a.name), attributeCell(a),
          el('td', { class: 'muted' }, [a.unit, range(a), a.read_only ? 'read-only' : ''].filter(Boolean).join(', '))));
      }
      box.append(t);
      for (const act of obj.actuators) box.append(operation(act));
    }
    for (const f of o.functions) box.append(operation(f));
  }
  if (!o) return;
  // The values, written where they changed; not into a box the user is typing in.
  for (const obj of o.objects) for (const a of obj.attributes) {
    const node = /** @type {HTMLInputElement} */ (box.querySelector(`[data-path="${CSS.escape(a.path)}"]`));
    if (!node) continue;
    if (node.type === 'checkbox') node.checked = a.value === 'true';
    else if (node.tagName === 'INPUT') {
      const v = editable(a.value);
      if (document.activeElement !== node && !node.classList.contains('err') && node.value !== v) node.value = v;
    } else {
      const v = value(a.value);
      if (node.textContent !== v) { node.textContent = v; node.title = a.value; }
    }
  }
}

/** @param {AttributeView} a */
function range(a) {
  if (a.min === null && a.max === null) return '';
  return `${a.min ?? ''}..${a.max ?? ''}`;
}

/**
 * An attribute's value: shown when read-only, a checkbox for a flag, else a box to type in.
 * @param {AttributeView} a
 */
function attributeCell(a) {
  const cell = el('td');
  if (a.read_only) {
    cell.append(el('span', { class: 'ro num', 'data-path': a.path, title: a.value }, value(a.value)));
  } else if (a.type === 'bool') {
    const box = el('input', { type: 'checkbox', 'data-path': a.path, 'aria-label': a.path });
    box.checked = a.value === 'true';
    const msg = el('span', { class: 'err-msg', 'data-msg': a.path });
    box.addEventListener('change', async () => {
      const r = await send({ op: 'set', path: a.path, value: String(box.checked) });
      msg.className = r.ok ? 'ok-msg' : 'err-msg';
      msg.textContent = r.ok ? ' ✓' : ` ${r.error}`;
      if (!r.ok) box.checked = !box.checked;
    });
    cell.append(box, msg);
  } else {
    const input = el('input', { class: 'attr-input', 'data-path': a.path, value: editable(a.value), title: a.description || a.path });
    const msg = el('div', { class: 'err-msg', 'data-msg': a.path });
    input.addEventListener('keydown', (/** @type {KeyboardEvent} */ ev) => {
      if (ev.key === 'Enter') setAttribute(a.path, input, msg);
      if (ev.key === 'Escape') input.blur();
    });
    cell.append(input, msg);
  }
  return cell;
}

/**
 * Sets an attribute to what was typed; says how it went beside it.
 * @param {string} path
 * @param {HTMLInputElement} input
 * @param {HTMLElement} msg
 */
async function setAttribute(path, input, msg) {
  const r = await send({ op: 'set', path, value: input.value });
  if (r.ok) {
    input.classList.remove('err'); msg.className = 'ok-msg'; msg.textContent = `✓ ${tidy(r.result.split(': ').pop())}`;
    setTimeout(() => { if (msg.className === 'ok-msg') msg.textContent = ''; }, 3000);
    input.blur();
  } else {
    input.classList.add('err'); msg.className = 'err-msg'; msg.textContent = r.error;
  }
}

/**
 * An actuator or function: its button, a box per parameter, and its result.
 * @param {OperationView} op
 */
function operation(op) {
  const inputs = op.params.map((p) => el('input', { placeholder: p.name, title: `${p.name}: ${p.type}`, 'aria-label': `${op.target} ${p.name}` }));
  const out = el('span', { class: 'muted' });
  const run = async () => {
    out.className = 'muted'; out.textContent = '…';
    const r = await send({ op: 'call', target: op.target, args: inputs.map((i) => i.value) });
    out.className = r.ok ? 'ok-msg' : 'err-msg';
    out.textContent = r.ok ? `→ ${tidy(r.result)}` : r.error;
  };
  return el('div', { class: 'act', title: op.description },
    el('button', { onclick: run, 'data-op': op.target }, `${op.target}`), ...inputs, out);
}
