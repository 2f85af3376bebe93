// The selected program's head: its name, run state, pause/resume/step, and its counters.
// @ts-check
import { $, el, rebuild, setClass, setText } from '../dom.js';
import { S, eventRate } from '../state.js';
import { count, rate } from '../format.js';
import { send } from '../conn.js';

/** @typedef {import('../protocol').ProcessSummary} ProcessSummary */

/** @type {import('../frame.js').Panel} */
export const program = { on: ['summaries', 'hub'], draw };

/** @param {ProcessSummary} p */
function draw(p) {
  // The program's own name for itself: a watch-dog's, the program it watches; else its first
  // steering object, else its binary.
  const watched = p.objects?.objects?.find((o) => o.name === 'watched')?.attributes.find((a) => a.name === 'command');
  const name = watched ? `watch-dog: ${watchedName(watched.value)}`
    : p.objects?.objects?.[0]?.name || p.command.split(' ')[0].split('/').pop();
  setText($('title'), `${name} · pid ${p.pid}`);
  const st = $('state');
  setText(st, p.source === 'replay' ? 'replay' : p.alive ? (p.state || 'running') : 'exited');
  setClass(st, `badge${p.paused ? ' paused' : ''}${p.alive ? '' : ' gone'}`);
  st.setAttribute('data-testid', 'state');
  $('pause').disabled = !p.alive || p.paused;
  $('resume').disabled = !p.alive || !p.paused;
  $('step').disabled = !p.alive || !p.paused;
  const perSecond = rate(eventRate(p));
  const rec = S.hub && S.hub.recording;
  const types = Object.keys(p.types).length;
  rebuild($('counters'), JSON.stringify([perSecond, p.received, p.missed + p.lost, types, p.threads.length, rec]), () => [
    el('span', {}, el('b', {}, perSecond), ' events/s'),
    el('span', {}, el('b', {}, count(p.received)), ' received by the hub'),
    el('span', {}, el('b', {}, count(p.missed + p.lost)), ' lost'),
    el('span', {}, el('b', {}, types), ' event types'),
    el('span', {}, el('b', {}, p.threads.length), ' threads'),
    rec
      ? el('span', { title: `recording into ${rec.dir}` }, el('b', {}, 'recording'),
        ` ${count(rec.written)} events${rec.dropped ? `, ${count(rec.dropped)} dropped` : ''}`)
      : null].filter(Boolean));
}

$('pause').onclick = () => send({ op: 'control', action: 'pause' });
$('resume').onclick = () => send({ op: 'control', action: 'resume' });
$('step').onclick = () => send({ op: 'control', action: 'step', steps: 1 });

/**
 * A watched program's short name: its binary's file name and the words after it up to the
 * first option (`adpac case.input`, `gyr npss-program compressor`).
 * @param {string} command the `watched.command` attribute, a quoted string
 */
function watchedName(command) {
  const words = command.replace(/^"|"$/g, '').split(/\s+/).filter((w) => w);
  if (!words.length) return 'a program';
  const rest = [];
  for (const w of words.slice(1, 3)) { if (w.startsWith('-')) break; rest.push(w); }
  return [words[0].split('/').pop(), ...rest].join(' ');
}
