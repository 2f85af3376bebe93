// The connection to the hub: token prompt, reconnecting WebSocket, requests and replies.
// The badge in the corner says whether the page keeps up.
// @ts-check
import { $ } from './dom.js';
import { S } from './state.js';
import { duration } from './format.js';

/** @typedef {import('./protocol').ToPage} ToPage */
/** @typedef {import('./protocol').PageRequest} PageRequest */
/** @typedef {import('./protocol').Reply} Reply */
/** @typedef {import('./protocol').AccessInfo} AccessInfo */

/** The open socket, if any. @type {WebSocket | null} */
let ws = null;
/** The token the page was opened with, if the hub asks for one. */
let token = '';
/** Requests sent and not yet answered, by id. @type {Map<number, (r: Reply) => void>} */
const pending = new Map();
let nextId = 1;
/** When the hub sent the oldest update not yet drawn (ms since the epoch), or 0. */
let sentMs = 0;

/** The query parameter that carries the page's token to the hub's `/api/` calls. */
export const tokenQuery = () => (token ? `&token=${encodeURIComponent(token)}` : '');

/**
 * Asks the hub what the page may do, asking the user for a token if it needs one (a hub
 * beyond loopback does), then connects; every message received goes to `receive`.
 * @param {(m: Exclude<ToPage, { t: 'reply' }>) => void} receive
 */
export function start(receive) {
  $('token-form').onsubmit = (/** @type {Event} */ ev) => {
    ev.preventDefault();
    localStorage.setItem('gyr.token', $('token-input').value.trim());
    open(receive);
  };
  open(receive);
}

/** @param {(m: Exclude<ToPage, { t: 'reply' }>) => void} receive */
async function open(receive) {
  const given = new URLSearchParams(location.search).get('token');
  const t = given || localStorage.getItem('gyr.token') || '';
  /** @type {AccessInfo} */
  let a;
  try {
    a = await (await fetch(`/api/access?token=${encodeURIComponent(t)}`)).json();
  } catch (e) {
    $('conn').textContent = 'hub unreachable: retrying';
    setTimeout(() => open(receive), 1000);
    return;
  }
  if (!a.ok) {
    $('conn').textContent = 'token needed';
    $('none').hidden = true;
    $('token-form').hidden = false;
    $('token-error').textContent = t ? 'That token is not valid for this hub.' : '';
    $('token-input').focus();
    return;
  }
  $('token-form').hidden = true;
  if (t) localStorage.setItem('gyr.token', t);
  token = t;
  document.body.classList.toggle('watch-only', !a.steer);
  $('mode').hidden = a.steer;
  $('mode').textContent = 'watch only';
  $('mode').title = 'this page has the read token: it can watch, not steer';
  connect(receive);
}

/** @param {(m: Exclude<ToPage, { t: 'reply' }>) => void} receive */
function connect(receive) {
  const q = token ? `?token=${encodeURIComponent(token)}` : '';
  const socket = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws${q}`);
  ws = socket;
  socket.onopen = () => { $('conn').textContent = 'live'; $('conn').className = 'conn up'; };
  socket.onclose = () => {
    $('conn').textContent = 'hub unreachable: retrying'; $('conn').className = 'conn down';
    for (const [, p] of pending) p({ id: null, ok: false, error: 'the hub went away' });
    pending.clear();
    setTimeout(() => connect(receive), 1000);
  };
  socket.onmessage = (ev) => {
    const t0 = performance.now();
    /** @type {ToPage} */
    const m = JSON.parse(ev.data);
    if (m.t === 'reply') {
      const p = pending.get(Number(m.id));
      if (p) { pending.delete(Number(m.id)); p(m); }
    } else {
      // The oldest update not yet drawn: how far behind the page is, drawing included.
      if (m.t === 'update' && !sentMs) sentMs = m.sent_ms;
      receive(m);
    }
    // What came, and the time it took to take in: the next frame counts it.
    S.perf.pending += performance.now() - t0;
    S.perf.messages += 1;
    S.perf.bytes += ev.data.length;
    if (m.t === 'update' && m.processes) S.perf.summaryBytes += ev.data.length;
  };
}

/**
 * Sends one request for the selected program; resolves with the hub's reply.
 * @param {PageRequest} cmd
 * @returns {Promise<Reply>}
 */
export function send(cmd) {
  return new Promise((resolve) => {
    if (!ws || ws.readyState !== 1) return resolve({ id: null, ok: false, error: 'not connected to the hub' });
    const id = nextId++;
    pending.set(id, resolve);
    ws.send(JSON.stringify({ ...cmd, id, pid: S.selected }));
  });
}

/** Called when a frame was drawn: the updates received until then are on screen. */
export function drawn() {
  if (sentMs) { keepingUp(Date.now() - sentMs); sentMs = 0; }
}

/**
 * How far behind the hub the page is, drawing included: shown when it matters, kept for tests.
 * @param {number} lag ms from the hub sending an update to the page having drawn it
 */
function keepingUp(lag) {
  S.lags.push(lag);
  if (S.lags.length > 100) S.lags.shift();
  S.maxLag = Math.max(...S.lags);
  const c = $('conn');
  if (lag > 1000) { c.textContent = `behind by ${(lag / 1000).toFixed(1)} s`; c.className = 'conn late'; }
  else if (c.className !== 'conn up') { c.textContent = 'live'; c.className = 'conn up'; }
  c.title = `updates arrive and are drawn ${duration(lag)} after the hub sends them`;
}
