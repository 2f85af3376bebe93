// The command line: `gyr attach`'s steering commands for the selected program.
// They are sent as text and parsed by the hub with the grammar every gyr client shares.
// @ts-check
import { $ } from '../dom.js';
import { tidy } from '../format.js';
import { send } from '../conn.js';

$('cli').onsubmit = async (/** @type {Event} */ ev) => {
  ev.preventDefault();
  const input = $('cli-input');
  const line = input.value.trim();
  const out = $('cli-out');
  if (!line) return;
  const r = await send({ op: 'line', line });
  out.className = `cli-out ${r.ok ? 'ok' : 'err'}`;
  out.textContent = r.ok ? tidy(r.result || 'done') : r.error;
  if (r.ok) input.value = '';
};
