// The page's entry: wires the connection, the state, the frame and the panels together.
//
// gyr's web UI: one WebSocket to the hub, a snapshot on connect, an update every tick.
// The hub decimates; this page only draws. Every change goes to the program through the hub,
// and comes back through the program's state, so every open page shows it.
// This module wires the others: conn.js (the hub), state.js (what it said), frame.js
// (drawing), and one module per panel under panels/.
// @ts-check: `tsc -p web` checks the page against the page protocol's types
// (`protocol.d.ts`, generated from crates/gyr-hub/src/protocol.rs).
import { start } from './conn.js';
import { S, merge } from './state.js';
import { addPanels, redraw } from './frame.js';
import { replay } from './panels/replay.js';
import { programs } from './panels/programs.js';
import { program } from './panels/program.js';
import { charts } from './panels/charts.js';
import { gauges } from './panels/gauges.js';
import { balance } from './panels/balance.js';
import { objects } from './panels/objects.js';
import { sensors } from './panels/sensors.js';
import { threads } from './panels/threads.js';
import { timeline } from './panels/timeline.js';
import { mpi } from './panels/mpi.js';
import { log } from './panels/log.js';
import { toasts } from './panels/toasts.js';
import './panels/cli.js';

addPanels(replay, programs, program, timeline, mpi, charts, gauges, balance, objects, sensors, threads, log, toasts);

// The state, for the browser tests and `gyr-bench web`, which read it from the page.
/** @type {any} */ (window).S = S;

start((m) => { merge(m); redraw(); });
