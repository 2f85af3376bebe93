// The replay bar: play, pause, speed and position of the recordings the hub replays.
// @ts-check
import { $, setText } from '../dom.js';
import { S } from '../state.js';
import { clock } from '../format.js';
import { send } from '../conn.js';

/** Whether the user is dragging the position: the hub's position waits until it is let go. */
let scrubbing = false;

/** @type {import('../frame.js').Panel} */
export const replay = { on: ['replay'], always: true, draw };

function draw() {
  const r = S.replay;
  $('replay-bar').hidden = !r;
  if (!r) return;
  setText($('replay-play'), r.paused ? 'Play' : 'Pause');
  const pos = $('replay-pos');
  pos.max = r.duration_s;
  if (!scrubbing) pos.value = r.position_s;
  setText($('replay-time'), `${clock(scrubbing ? Number(pos.value) : r.position_s)} / ${clock(r.duration_s)}`);
  const speed = $('replay-speed');
  if (document.activeElement !== speed) speed.value = String(r.speed);
  const names = r.files.map((f) => f.path.split('/').pop()).join(', ');
  // Corrected (`gyr trace view --correct`): the times shown are not the raw ones.
  setText($('replay-files'), r.corrected ? `${names} · corrected: monitoring time removed` : names);
}

$('replay-play').onclick = () => send({ op: 'replay', action: S.replay && S.replay.paused ? 'play' : 'pause' });
$('replay-speed').onchange = (/** @type {any} */ ev) => send({ op: 'replay', action: 'speed', value: Number(ev.target.value) });
$('replay-pos').oninput = () => { scrubbing = true; draw(); };
$('replay-pos').onchange = async (/** @type {any} */ ev) => {
  await send({ op: 'replay', action: 'seek', value: Number(ev.target.value) });
  scrubbing = false;
};
