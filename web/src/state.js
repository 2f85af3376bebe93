// The model of what the hub said, updates merged into it, and what changed since the last frame.
// @ts-check

/** @typedef {import('./protocol').ToPage} ToPage */
/** @typedef {import('./protocol').ProcessSummary} ProcessSummary */
/** @typedef {{ x: number[], y: number[], live: boolean }} Series */
/**
 * What a part of the page draws from: it is drawn again only when one of these changed.
 * `points`: series' points; `stats`: their statistics; `summaries`: programs (their threads,
 * types, objects, sensors); `groups`: per-domain values; `log`: steering log and alerts;
 * `replay`, `hub`: their states; `view`: the user's choices (program, charts, gauges).
 * @typedef {'points' | 'stats' | 'summaries' | 'groups' | 'log' | 'replay' | 'hub' | 'view'} Topic
 */

/** Points kept per series: the last 30 s at the hub's 50 per second. */
export const MAX_POINTS = 1500;
/** Steering log lines kept. */
const MAX_LOG = 1000;

/** The page's state: what the hub sent, and what the user chose. */
export const S = {
  /** @type {Map<number, ProcessSummary>} */
  processes: new Map(),
  /** Every series by id, `pid/type/field`. @type {Map<string, Series>} */
  series: new Map(),
  /** @type {Record<string, import('./protocol').Stats>} */
  stats: {},
  /** @type {Record<string, Record<string, Record<string, number>>>} */
  groups: {},
  /** @type {import('./protocol').LogLine[]} */
  log: [],
  /** @type {import('./protocol').Alert[]} */
  alerts: [],
  /** @type {import('./protocol').ReplayState | null} */
  replay: null,
  /** @type {import('./protocol').HubState | null} */
  hub: null,
  /** The program shown. @type {number | null} */
  selected: null,
  /** How far behind the hub the page was at its last frames (ms), and the worst of them. */
  lags: /** @type {number[]} */ ([]),
  maxLag: 0,
  /** Where the page's time goes (`gyr-bench web` reads it): ms per drawn frame, and what came. */
  perf: { frames: /** @type {number[]} */ ([]), pending: 0, messages: 0, bytes: 0, summaryBytes: 0 },
  /** Bumped with every set of program summaries: what depends on them only is drawn then. */
  summaryGen: 0,
  /** The series that got points since the page last drew. @type {Set<string>} */
  moved: /** @type {Set<string>} */ (new Set()),
  /** What changed since the page last drew. @type {Set<Topic>} */
  changed: /** @type {Set<Topic>} */ (new Set(['view'])),
};

/** @param {string} id */
function seriesFor(id) {
  let s = S.series.get(id);
  if (!s) { s = { x: [], y: [], live: false }; S.series.set(id, s); }
  return s;
}

/** @param {Series} s */
function dropLive(s) {
  if (s.live) { s.x.pop(); s.y.pop(); s.live = false; }
}

/**
 * Folds a snapshot or an update into the model.
 * @param {Exclude<ToPage, { t: 'reply' }>} m
 */
export function merge(m) {
  const changed = S.changed;
  if (m.t === 'snapshot') {
    S.series.clear();
    S.log = m.log; S.alerts = m.alerts;
    S.stats = m.stats || {};
    for (const t of /** @type {Topic[]} */ (['points', 'stats', 'log'])) changed.add(t);
  } else {
    // A line is taken once: a snapshot and the next update may both hold it (a program's log
    // lines are numbered; an alert is known by its program, time and fields).
    const log = m.log.filter((e) => !S.log.some((o) => o.pid === e.pid && o.seq === e.seq));
    const alerts = m.alerts.filter((a) => !S.alerts.some((o) => o.pid === a.pid && o.t === a.t
      && JSON.stringify(o.fields) === JSON.stringify(a.fields)));
    if (log.length || alerts.length) changed.add('log');
    S.log.push(...log); S.alerts.push(...alerts);
    if (S.log.length > MAX_LOG) S.log.splice(0, S.log.length - MAX_LOG);
    if (S.alerts.length > MAX_LOG) S.alerts.splice(0, S.alerts.length - MAX_LOG);
    // Statistics come for the series that moved; groups, programs and the hub's state with
    // every few updates (they change slower than the eye follows).
    if (m.stats) { Object.assign(S.stats, m.stats); changed.add('stats'); }
  }
  if (m.groups) { S.groups = m.groups; changed.add('groups'); }
  if (m.replay) { S.replay = m.replay; changed.add('replay'); }
  if (m.hub) { S.hub = m.hub; changed.add('hub'); }
  for (const [id, pts] of Object.entries(m.points)) {
    const s = seriesFor(id);
    dropLive(s);
    // A point is taken once: a snapshot's history and the next update may both hold it.
    for (const [t, v] of pts) if (!s.x.length || t > s.x[s.x.length - 1]) { s.x.push(t); s.y.push(v); }
    if (s.x.length > MAX_POINTS) { s.x.splice(0, s.x.length - MAX_POINTS); s.y.splice(0, s.y.length - MAX_POINTS); }
    S.moved.add(id);
    changed.add('points');
  }
  // The bucket still filling is drawn at once, as the last point, and replaced when it closes.
  for (const [id, [t, v]] of Object.entries(m.live || {})) {
    const s = seriesFor(id);
    dropLive(s);
    if (!s.x.length || t > s.x[s.x.length - 1]) { s.x.push(t); s.y.push(v); s.live = true; }
    S.moved.add(id);
    changed.add('points');
  }
  if (m.processes) {
    // An update leaves out the thread names the page was already told: keep them.
    if (m.t === 'update') {
      for (const p of m.processes) {
        const before = S.processes.get(p.pid);
        const names = new Map(before ? before.threads.map((t) => [t.id, t.name]) : []);
        for (const t of p.threads) if (t.name === undefined) t.name = names.get(t.id) ?? '';
      }
    }
    S.processes = new Map(m.processes.map((p) => [p.pid, p]));
    S.summaryGen += 1;
    changed.add('summaries');
    if (S.selected === null || !S.processes.has(S.selected)) {
      const live = m.processes.find((p) => p.alive) || m.processes[0];
      select(live ? live.pid : null);
    }
  }
}

/**
 * Shows another program.
 * @param {number | null} pid
 */
export function select(pid) {
  if (S.selected !== pid) S.changed.add('view');
  S.selected = pid;
}

/**
 * The series of program `pid`, sorted: `pid/type/field`.
 * @param {number} pid
 */
export function seriesOf(pid) {
  return [...S.series.keys()].filter((id) => id.startsWith(`${pid}/`)).sort();
}

/**
 * A program's events per second, all types together.
 * @param {ProcessSummary} p
 */
export const eventRate = (p) => Object.values(p.types).reduce((a, t) => a + t.rate, 0);
