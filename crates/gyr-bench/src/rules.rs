//! `gyr-bench rules`: the expert system and the watch-dog, as a user runs them.
//!
//! Measured here, all in one run:
//! - **events/s through 50 rules** (46 event rules over 10 event types, 4 or 5 per type, every
//!   one reading windows; 4 fact rules, chaining): `gyr_rules::Engine::event` alone on one
//!   thread, over events of 4 programs, each event meeting the 4 or 5 rules of its type. The
//!   rules file ([`RULES`]) is written as a user writes one: three of its rules read facts in
//!   their condition, which the engine leaves to rhai. Against two references on the same
//!   events: the **floor**, plain Rust doing the same window arithmetic, episodes and facts
//!   by hand (no rhai, no messages formatted), and the **interpreter**, the same rules with
//!   every condition evaluated by rhai (`RuleSet::interpreted`: the engine's native fast
//!   path turned off). In rounds, each run of the engine beside a run of each reference:
//!   figures are medians over the rounds, ratios the medians of each round's own ratio.
//! - **watch-dog lines/s**: a writer thread appends ADPAC-like residual lines (Fortran
//!   exponents, a warning every 100 lines) to a file in 64 KiB pieces while `FileTail` and
//!   `LineParser` read and parse them; then end to end, each line's event also emitted through
//!   the watch-dog's dynamic sensors (`Publisher`) into a trace file, as `gyr watchdog` does.
//!   The floor: the whole file read again with `BufRead::read_line` into one reused `String`.
//! - **alert latency**: a hub (`Hub::start`) running a rules file with one rule, `rho > 1.0`
//!   with `repeat = true`, raising an alert; a watch-dog in a child process following a file
//!   and publishing to the hub (this benchmark's `rules-watchdog`, which calls
//!   `gyr_watchdog::run` with the options `gyr watchdog --spec S --hub ADDR --files FILE
//!   --quiet` gives it); the benchmark appends one residual line at a time (its iteration the
//!   marker) and times from before the `write` to when a gRPC client polling `ListAlerts`
//!   every millisecond sees that iteration's alert. The hub has no stream of alerts, so a
//!   poll it is. Each line is written 20 to 30 ms after the previous alert was seen (so that
//!   none queues, and the writes fall at every phase of the watch-dog's poll). Once with the
//!   spec's default `poll_ms` (50 ms, what a user gets; the target is judged on it) and once
//!   with `poll_ms = 5`.

use crate::figures::{percentile, r3};
use gyr_core::{Field, FieldType, Schema, Value};
use gyr_rules::{Engine, EventRef, RuleSet};
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The rules file: 46 event rules over 10 types, 4 fact rules.
pub(crate) const RULES: &str = r#"
# The solver
[[rule]]
name = "diverging"
on = "solver.residual"
salience = 10
when = 'rose("rho", 2, 20)'
then = '''
alert("error", `residual rose 100x within 20 iterations (now ${rho})`);
assert("diverged", #{ iter: iter });
'''

[[rule]]
name = "converged"
on = "solver.residual"
when = 'dropped("rho", 4, 1000)'
then = 'alert("info", `converged after ${iter} iterations`);'

[[rule]]
name = "stalled"
on = "solver.residual"
when = 'stalled("rho", 1, 200) && rho > 1e-6'
then = 'alert("warning", `no progress in 200 iterations at ${rho}`);'

[[rule]]
name = "oscillating"
on = "solver.residual"
when = 'oscillates("rho", 20) && slope("rho", 20) > -1e-9'
then = 'alert("warning", "the residual oscillates without converging");'

[[rule]]
name = "energy-lags"
on = "solver.residual"
when = 'dropped("rho", 2, 100) && !dropped("rhoe", 1, 100)'
then = 'alert("info", `energy residual lags at iteration ${iter}`);'

[[rule]]
name = "cfl-high"
on = "solver.cfl"
when = 'mean("cfl", 10) > 2.0'
then = '''
alert("warning", `CFL ${cfl} at iteration ${iter}`);
assert("cfl_high");
'''

[[rule]]
name = "cfl-back"
on = "solver.cfl"
when = 'mean("cfl", 10) < 1.5 && has("cfl_high")'
then = 'retract("cfl_high"); alert("info", "CFL back below 1.5");'

[[rule]]
name = "dt-shrinking"
on = "solver.cfl"
when = 'slope("dt", 50) < 0.0 && dropped("dt", 2, 200)'
then = 'alert("warning", `time step fell 100x to ${dt}`);'

[[rule]]
name = "cfl-range"
on = "solver.cfl"
when = 'outside(cfl, 0.0, 5.0) || rose("cfl", 1, 20)'
then = 'alert("error", `CFL ${cfl} out of range`);'

[[rule]]
name = "cfl-oscillates"
on = "solver.cfl"
when = 'oscillates("cfl", 16)'
then = 'alert("info", "CFL oscillates");'

# The fan
[[rule]]
name = "mass-balance"
on = "fan.mass"
when = 'rel_diff(mean("mass_in", 20), mean("mass_out", 20)) > 0.02'
then = 'alert("error", `mass in ${mass_in} vs out ${mass_out}: not conserved`);'

[[rule]]
name = "mass-drop"
on = "fan.mass"
when = 'dropped("mass_in", 1, 100)'
then = 'alert("warning", `mass flow fell tenfold to ${mass_in}`);'

[[rule]]
name = "surge"
on = "fan.mass"
when = 'oscillates("mass_in", 12) && max("mass_in", 12) - min("mass_in", 12) > 5.0'
then = 'alert("error", "fan surge: mass flow oscillates");'

[[rule]]
name = "mass-decline"
on = "fan.mass"
when = 'slope("mass_out", 100) < -0.05'
then = 'alert("warning", "mass flow declining");'

[[rule]]
name = "mass-range"
on = "fan.mass"
when = 'outside(mass_out, 0.0, 500.0) || outside(mean("mass_in", 5), 0.0, 500.0)'
then = 'alert("error", `mass flow ${mass_out} out of range`);'

[[rule]]
name = "no-rise"
on = "fan.pressure"
when = 'mean("ratio", 10) < 1.0'
then = 'alert("error", "no pressure rise through the fan");'

[[rule]]
name = "pressure-surge"
on = "fan.pressure"
when = 'oscillates("p_out", 10) && rel_diff(max("p_out", 10), min("p_out", 10)) > 0.05'
then = 'alert("error", "fan surge: outlet pressure oscillates");'

[[rule]]
name = "pressure-drift"
on = "fan.pressure"
when = 'slope("p_out", 200) > 50.0'
then = 'alert("info", `outlet pressure drifting up, now ${p_out}`);'

[[rule]]
name = "pressure-range"
on = "fan.pressure"
when = 'outside(p_out, 5e4, 5e5) || rose("p_out", 1, 50)'
then = 'alert("error", `outlet pressure ${p_out} out of range`);'

[[rule]]
name = "ratio-stuck"
on = "fan.pressure"
when = 'stalled("ratio", 0.001, 100) && ratio < 1.2'
then = 'alert("warning", `pressure ratio stuck at ${ratio}`);'

# The combustor and the turbine
[[rule]]
name = "overheat"
on = "combustor.temp"
salience = 5
when = 'mean("t_out", 20) > 1900.0'
then = '''
alert("error", `combustor outlet at ${t_out} K`);
assert("overheat");
'''

[[rule]]
name = "flameout"
on = "combustor.temp"
when = 'dropped("t_out", 0.3, 20)'
then = 'alert("critical", `flameout? outlet temperature fell to ${t_out} K`);'

[[rule]]
name = "temp-climb"
on = "combustor.temp"
when = 'slope("t_out", 50) > 2.0 && t_out > 1700.0'
then = 'alert("warning", "outlet temperature climbing");'

[[rule]]
name = "fuel-oscillates"
on = "combustor.temp"
when = 'oscillates("fuel", 20)'
then = 'alert("warning", "fuel flow oscillates");'

[[rule]]
name = "temp-range"
on = "combustor.temp"
when = 'outside(t_in, 200.0, 1000.0) || rel_diff(t_out, mean("t_out", 100)) > 0.2'
then = 'alert("error", `combustor temperatures out of range: ${t_in} K in, ${t_out} K out`);'

[[rule]]
name = "overspeed"
on = "turbine.speed"
when = 'max("rpm", 10) > 12000.0'
then = '''
alert("error", `overspeed: ${rpm} rpm`);
assert("overspeed");
'''

[[rule]]
name = "speed-hunting"
on = "turbine.speed"
when = 'oscillates("rpm", 30) && rel_diff(max("rpm", 30), min("rpm", 30)) > 0.01'
then = 'alert("warning", "shaft speed hunting");'

[[rule]]
name = "torque-loss"
on = "turbine.speed"
when = 'dropped("torque", 1, 50)'
then = 'alert("error", `torque fell tenfold to ${torque}`);'

[[rule]]
name = "hung-start"
on = "turbine.speed"
when = 'stalled("rpm", 0.1, 100) && rpm < 3000.0'
then = 'alert("warning", `hung start at ${rpm} rpm`);'

[[rule]]
name = "hot-spool-up"
on = "turbine.speed"
when = 'has("overheat") && slope("rpm", 20) > 0.0'
then = 'alert("warning", "spooling up while the combustor is hot");'

[[rule]]
name = "thrust-loss"
on = "nozzle.thrust"
when = 'dropped("thrust", 0.5, 100)'
then = 'alert("error", `thrust fell to ${thrust}`);'

[[rule]]
name = "thrust-noisy"
on = "nozzle.thrust"
when = 'oscillates("thrust", 20)'
then = 'alert("info", "thrust oscillates");'

[[rule]]
name = "thrust-off-mean"
on = "nozzle.thrust"
when = 'rel_diff(thrust, mean("thrust", 200)) > 0.1'
then = 'alert("warning", `thrust ${thrust} off its mean by 10%`);'

[[rule]]
name = "area-range"
on = "nozzle.thrust"
when = 'outside(mean("area", 5), 0.1, 2.0)'
then = 'alert("error", `nozzle area ${area} out of range`);'

# The parallel program and its machine
[[rule]]
name = "imbalance"
on = "mpi.wait"
per = "rank"
when = 'mean("wait_s", 20) > 0.5 * mean("work_s", 20)'
then = '''
alert("warning", `rank ${rank} waits half as long as it works`);
assert("imbalanced", #{ rank: rank });
'''

[[rule]]
name = "balanced-again"
on = "mpi.wait"
per = "rank"
when = 'mean("wait_s", 20) < 0.1 * mean("work_s", 20) && has("imbalanced", #{ rank: rank })'
then = 'retract("imbalanced", #{ rank: rank });'

[[rule]]
name = "wait-growing"
on = "mpi.wait"
per = "rank"
when = 'slope("wait_s", 50) > 0.001'
then = 'alert("info", `rank ${rank}: waits growing`);'

[[rule]]
name = "wait-spike"
on = "mpi.wait"
per = "rank"
when = 'rose("wait_s", 1, 20)'
then = 'alert("info", `rank ${rank}: wait rose tenfold to ${wait_s} s`);'

[[rule]]
name = "io-slow"
on = "io.write"
when = 'mean("seconds", 10) > 1.0'
then = 'alert("warning", `writes take ${seconds} s`);'

[[rule]]
name = "io-degrading"
on = "io.write"
when = 'dropped("bytes", 1, 50) || slope("seconds", 20) > 0.1'
then = 'alert("warning", "output degrading");'

[[rule]]
name = "io-range"
on = "io.write"
when = 'outside(bytes, 0.0, 1e10) || rose("seconds", 1, 30)'
then = 'alert("error", `a write of ${bytes} bytes took ${seconds} s`);'

[[rule]]
name = "io-jitter"
on = "io.write"
when = 'oscillates("seconds", 10)'
then = 'alert("info", "write times jitter");'

[[rule]]
name = "leak"
on = "mem.usage"
when = 'slope("rss_mb", 500) > 0.05 && rss_mb > 1000.0'
then = '''
alert("warning", `memory grows: ${rss_mb} MB`);
assert("leaking");
'''

[[rule]]
name = "heap-jump"
on = "mem.usage"
when = 'rose("heap_mb", 0.3, 20)'
then = 'alert("info", `heap jumped to ${heap_mb} MB`);'

[[rule]]
name = "heap-share"
on = "mem.usage"
when = 'mean("heap_mb", 100) > 0.9 * rss_mb'
then = 'alert("info", "the heap is most of the memory");'

[[rule]]
name = "mem-range"
on = "mem.usage"
when = 'outside(rss_mb, 0.0, 64000.0) || rel_diff(rss_mb, max("rss_mb", 100)) > 0.5'
then = 'alert("warning", `memory fell to ${rss_mb} MB`);'

# Facts
[[rule]]
name = "restart-smaller"
when = 'has("diverged") && facts("restarted").len() < 3'
then = '''
let n = facts("restarted").len() + 1;
alert("warning", `diverged: restart ${n}`);
retract("diverged");
assert("restarted", #{ n: n });
'''

[[rule]]
name = "give-up"
when = 'has("diverged") && facts("restarted").len() >= 3'
then = '''
alert("critical", "diverged after three restarts");
retract("diverged");
retract("restarted");
'''

[[rule]]
name = "hot-and-fast"
when = 'has("overheat") && has("overspeed")'
then = '''
alert("critical", "overheat at overspeed: derating");
retract("overheat");
retract("overspeed");
assert("derated");
'''

[[rule]]
name = "derated"
when = 'has("derated")'
then = 'alert("info", "running derated"); retract("derated");'
"#;

/// The rules whose condition reads facts (`has`), which the engine evaluates with rhai.
const FACT_CONDITIONS: [&str; 3] = ["cfl-back", "hot-spool-up", "balanced-again"];

/// [`RULES`] without the rules named.
fn rules_without(names: &[&str]) -> String {
    RULES
        .split("\n[[rule]]\n")
        .filter(|block| {
            !names
                .iter()
                .any(|n| block.contains(&format!("name = \"{n}\"\n")))
        })
        .collect::<Vec<_>>()
        .join("\n[[rule]]\n")
}

/// The event types, their fields (numeric), and the largest window any rule of theirs reads.
/// An event type: its name, its fields, the largest window its rules read.
type TypeDef = (&'static str, &'static [(&'static str, FieldType)], usize);

const TYPES: [TypeDef; 10] = [
    (
        "solver.residual",
        &[
            ("iter", FieldType::U32),
            ("rho", FieldType::F64),
            ("rhou", FieldType::F64),
            ("rhoe", FieldType::F64),
        ],
        1000,
    ),
    (
        "solver.cfl",
        &[
            ("iter", FieldType::U32),
            ("cfl", FieldType::F64),
            ("dt", FieldType::F64),
        ],
        200,
    ),
    (
        "fan.mass",
        &[("mass_in", FieldType::F64), ("mass_out", FieldType::F64)],
        100,
    ),
    (
        "fan.pressure",
        &[
            ("p_in", FieldType::F64),
            ("p_out", FieldType::F64),
            ("ratio", FieldType::F64),
        ],
        200,
    ),
    (
        "combustor.temp",
        &[
            ("t_in", FieldType::F64),
            ("t_out", FieldType::F64),
            ("fuel", FieldType::F64),
        ],
        100,
    ),
    (
        "turbine.speed",
        &[("rpm", FieldType::F64), ("torque", FieldType::F64)],
        100,
    ),
    (
        "nozzle.thrust",
        &[("thrust", FieldType::F64), ("area", FieldType::F64)],
        200,
    ),
    (
        "mpi.wait",
        &[
            ("rank", FieldType::U32),
            ("wait_s", FieldType::F64),
            ("work_s", FieldType::F64),
        ],
        50,
    ),
    (
        "io.write",
        &[("bytes", FieldType::U64), ("seconds", FieldType::F64)],
        50,
    ),
    (
        "mem.usage",
        &[("rss_mb", FieldType::F64), ("heap_mb", FieldType::F64)],
        500,
    ),
];

/// The programs the events come from.
const PROGRAMS: [(u32, &str); 4] = [
    (4101, "npss-a"),
    (4102, "npss-b"),
    (4103, "npss-c"),
    (4104, "npss-d"),
];
/// Ranks of `mpi.wait` (its `per` groups) per program.
const RANKS: usize = 8;
/// Iterations of one simulated run: the data's pattern repeats with this period.
const PERIOD: u64 = 2500;
/// Iterations per program in the pool of events (two periods, so that it wraps seamlessly).
const POOL_ITERATIONS: u64 = 2 * PERIOD;

/// Smooth noise in [-1, 1]: few sign changes of its differences over a window, as a physical
/// signal has.
fn smooth(it: u64, seed: f64) -> f64 {
    let x = it as f64;
    0.6 * (0.05 * x + seed).sin() + 0.4 * (0.13 * x + 2.0 * seed).sin()
}

/// +1 or -1, alternating: an oscillation.
fn alt(it: u64) -> f64 {
    if it.is_multiple_of(2) { 1.0 } else { -1.0 }
}

/// The values of event type `ty` of program `p` at iteration `it`: mostly quiet, with an
/// episode of trouble now and then, at other times in each program.
fn values(ty: usize, p: usize, it: u64) -> Vec<Value> {
    let s = p as f64 * 1.7;
    let ph = (it + p as u64 * 311) % PERIOD;
    let f = Value::Float;
    let n = |k: f64| smooth(it, s + k);
    match ty {
        0 => {
            // Converges five orders of magnitude per run; diverges briefly mid-run; a stretch
            // of oscillation.
            let mut rho = 10f64.powf(-5.0 * ph as f64 / PERIOD as f64) * (1.0 + 0.02 * n(0.0));
            if (1200..1230).contains(&ph) {
                rho *= 10f64.powf((ph - 1200) as f64 / 10.0);
            }
            if (1800..1840).contains(&ph) {
                rho *= 1.0 + 0.3 * alt(it);
            }
            vec![
                Value::UInt(it),
                f(rho),
                f(rho * 0.9 * (1.0 + 0.01 * n(1.0))),
                f(rho * 1.1),
            ]
        }
        1 => {
            let cfl = if (500..560).contains(&ph) {
                2.5 + 0.1 * n(2.0)
            } else {
                1.2 + 0.1 * n(2.0)
            };
            let dt = if (2000..2200).contains(&ph) {
                1e-3 * 10f64.powf(-((ph - 2000) as f64) / 80.0)
            } else {
                1e-3 * (1.0 + 0.05 * n(3.0))
            };
            vec![Value::UInt(it), f(cfl), f(dt)]
        }
        2 => {
            let mut m = 100.0 + 2.0 * n(4.0);
            if (700..730).contains(&ph) {
                m += 6.0 * alt(it);
            }
            let out = if (1500..1520).contains(&ph) {
                m * 0.9
            } else {
                m * (1.0 + 0.001 * n(5.0))
            };
            vec![f(m), f(out)]
        }
        3 => {
            let p_in = 1.0e5 * (1.0 + 0.01 * n(6.0));
            let ratio = if (300..420).contains(&ph) {
                0.95
            } else {
                1.6 + 0.05 * n(7.0)
            };
            let mut p_out = p_in * ratio;
            if (900..920).contains(&ph) {
                p_out *= 1.0 + 0.05 * alt(it);
            }
            vec![f(p_in), f(p_out), f(ratio)]
        }
        4 => {
            let t_out = if (1000..1100).contains(&ph) {
                1950.0 + 10.0 * n(8.0)
            } else if (2300..2310).contains(&ph) {
                700.0
            } else {
                1600.0 + 20.0 * n(8.0)
            };
            let mut fuel = 2.0 + 0.05 * n(9.0);
            if (1600..1640).contains(&ph) {
                fuel += 0.2 * alt(it);
            }
            vec![f(600.0 + 10.0 * n(10.0)), f(t_out), f(fuel)]
        }
        5 => {
            let rpm = if (1050..1080).contains(&ph) {
                12500.0
            } else {
                9000.0 + 200.0 * n(11.0)
            };
            let torque = if (2400..2420).contains(&ph) {
                50.0
            } else {
                1000.0 + 30.0 * n(12.0)
            };
            vec![f(rpm), f(torque)]
        }
        6 => {
            let mut thrust = 5.0e4 * (1.0 + 0.02 * n(13.0));
            if (1300..1330).contains(&ph) {
                thrust *= 0.8;
            }
            vec![f(thrust), f(0.8 + 0.01 * n(14.0))]
        }
        7 => {
            let rank = it % RANKS as u64;
            let wait = if rank == 3 && (1700..1900).contains(&ph) {
                0.8
            } else {
                0.05 * (1.0 + 0.5 * n(15.0 + rank as f64))
            };
            vec![Value::UInt(rank), f(wait), f(1.0)]
        }
        8 => {
            let secs = if (100..130).contains(&ph) {
                2.0
            } else {
                0.2 * (1.0 + 0.3 * n(16.0))
            };
            vec![Value::UInt(1 << 26), f(secs)]
        }
        _ => {
            let rss = 800.0 + 0.2 * ph as f64 + 5.0 * n(17.0);
            let heap = if (1400..1420).contains(&ph) {
                rss * 0.95
            } else {
                rss * 0.5
            };
            vec![f(rss), f(heap)]
        }
    }
}

fn schemas() -> Vec<Schema> {
    TYPES
        .iter()
        .enumerate()
        .map(|(i, (name, fields, _))| {
            Schema::new(
                i as u32 + 1,
                *name,
                fields.iter().map(|(n, t)| Field::new(*n, *t)).collect(),
            )
            .expect("a valid schema")
        })
        .collect()
}

/// One event of the pool: its type, its program, its values.
struct Ev {
    ty: usize,
    p: usize,
    values: Vec<Value>,
}

/// Events of every type, round robin, of every program in turn; `POOL_ITERATIONS` iterations
/// of each program. Runs go around it as often as they need.
fn pool() -> Vec<Ev> {
    let mut v = Vec::with_capacity((POOL_ITERATIONS as usize) * PROGRAMS.len() * TYPES.len());
    for it in 0..POOL_ITERATIONS {
        for p in 0..PROGRAMS.len() {
            for ty in 0..TYPES.len() {
                v.push(Ev {
                    ty,
                    p,
                    values: values(ty, p, it),
                });
            }
        }
    }
    v
}

/// Events fed before a run is timed: 1000 iterations of each program, which fills every
/// window (the largest holds 1000 values), so that every run measures full windows.
const WARM: usize = 1000 * PROGRAMS.len() * TYPES.len();

/// Events through the engine after [`WARM`] untimed ones: (events/s, firings of the timed
/// events).
fn engine_run(set: RuleSet, events: &[Ev], n: usize, schemas: &[Schema]) -> (f64, u64) {
    let mut e = Engine::new(set);
    let mut fired = 0u64;
    let mut t = Instant::now();
    for k in 0..WARM + n {
        if k == WARM {
            fired = 0;
            t = Instant::now();
        }
        let ev = &events[k % events.len()];
        let (pid, program) = PROGRAMS[ev.p];
        fired += e
            .event(&EventRef {
                pid,
                program,
                t_ns: k as u64 * 1000,
                schema: &schemas[ev.ty],
                values: &ev.values,
            })
            .len() as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    let errors: u64 = e.rules().iter().map(|r| r.errors).sum();
    if errors > 0 {
        for r in e.rules().iter().filter(|r| r.errors > 0) {
            eprintln!(
                "gyr-bench rules: rule {} failed {} times: {}",
                r.name,
                r.errors,
                r.last_error.as_deref().unwrap_or("")
            );
        }
    }
    (n as f64 / secs, fired)
}

// ---- The floor: the same rules by hand in plain Rust. ----

/// The last values of one field, as the engine keeps them.
struct Ring {
    buf: Vec<f64>,
    head: usize,
    len: usize,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring {
            buf: vec![0.0; cap],
            head: 0,
            len: 0,
        }
    }
    fn push(&mut self, x: f64) {
        self.buf[self.head] = x;
        self.head = (self.head + 1) % self.buf.len();
        self.len = (self.len + 1).min(self.buf.len());
    }
    fn last(&self, k: usize) -> (&[f64], &[f64]) {
        let m = k.min(self.len);
        let cap = self.buf.len();
        let start = (self.head + cap - m) % cap;
        if start + m <= cap {
            (&self.buf[start..start + m], &[])
        } else {
            (&self.buf[start..], &self.buf[..(start + m) - cap])
        }
    }
    fn iter(&self, k: usize) -> impl Iterator<Item = f64> + '_ {
        let (a, b) = self.last(k);
        a.iter().chain(b).copied()
    }
    fn cur(&self) -> f64 {
        let cap = self.buf.len();
        self.buf[(self.head + cap - 1) % cap]
    }
    fn dropped(&self, n: f64, k: usize) -> bool {
        let cur = self.cur().abs();
        let (mut hi, mut nan) = (0.0f64, cur.is_nan());
        for x in self.iter(k) {
            nan |= x.is_nan();
            hi = hi.max(x.abs());
        }
        let orders = if hi == 0.0 { 0.0 } else { (hi / cur).log10() };
        !nan && orders >= n
    }
    fn rose(&self, n: f64, k: usize) -> bool {
        let cur = self.cur().abs();
        let (mut lo, mut nan) = (f64::INFINITY, cur.is_nan());
        for x in self.iter(k) {
            let m = x.abs();
            nan |= m.is_nan();
            if m > 0.0 {
                lo = lo.min(m);
            }
        }
        let orders = if lo.is_infinite() || cur == 0.0 {
            0.0
        } else {
            (cur / lo).log10()
        };
        !nan && orders >= n
    }
    fn stalled(&self, pct: f64, k: usize) -> bool {
        let (mut lo, mut hi, mut sum, mut nan, mut m) =
            (f64::INFINITY, f64::NEG_INFINITY, 0.0, false, 0usize);
        for x in self.iter(k) {
            nan |= x.is_nan();
            lo = lo.min(x);
            hi = hi.max(x);
            sum += x.abs();
            m += 1;
        }
        let mean = sum / m.max(1) as f64;
        let change = if m == 0 || mean == 0.0 {
            0.0
        } else {
            100.0 * (hi - lo) / mean
        };
        m >= k && !nan && change < pct
    }
    fn oscillates(&self, k: usize) -> bool {
        if self.len < k {
            return false;
        }
        let (mut prev, mut sign, mut changes) = (f64::NAN, 0i8, 0usize);
        for x in self.iter(k) {
            let d = x - prev;
            prev = x;
            let s = if d > 0.0 {
                1
            } else if d < 0.0 {
                -1
            } else {
                continue;
            };
            if sign != 0 && s != sign {
                changes += 1;
            }
            sign = s;
        }
        changes >= k / 2
    }
    fn slope(&self, k: usize) -> f64 {
        let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (i, y) in self.iter(k).enumerate() {
            let x = i as f64;
            n += 1.0;
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
        }
        let d = n * sxx - sx * sx;
        if n < 2.0 || d == 0.0 {
            0.0
        } else {
            (n * sxy - sx * sy) / d
        }
    }
    fn mean(&self, k: usize) -> f64 {
        let (mut s, mut m) = (0.0, 0usize);
        for x in self.iter(k) {
            s += x;
            m += 1;
        }
        s / m as f64
    }
    fn min(&self, k: usize) -> f64 {
        self.iter(k).fold(f64::INFINITY, f64::min)
    }
    fn max(&self, k: usize) -> f64 {
        self.iter(k).fold(f64::NEG_INFINITY, f64::max)
    }
}

fn outside(x: f64, lo: f64, hi: f64) -> bool {
    !(lo..=hi).contains(&x)
}

fn rel_diff(a: f64, b: f64) -> f64 {
    let m = a.abs().max(b.abs());
    if m == 0.0 { 0.0 } else { (a - b).abs() / m }
}

/// One program's working memory, by hand.
#[derive(Default)]
struct Facts {
    diverged: usize,
    restarted: usize,
    cfl_high: bool,
    overheat: bool,
    overspeed: bool,
    derated: bool,
    leaking: bool,
    imbalanced: [bool; RANKS],
    changed: bool,
}

/// One group's windows and episodes.
struct Group {
    rings: Vec<Ring>,
    active: [bool; 5],
}

/// The floor's state: windows per program, type and rank, facts per program.
struct Floor {
    groups: Vec<Group>,
    facts: Vec<Facts>,
    /// The current event's values as numbers.
    v: Vec<f64>,
    fired: u64,
}

impl Floor {
    fn new() -> Floor {
        let mut groups = Vec::new();
        for _ in 0..PROGRAMS.len() {
            for (_, fields, cap) in TYPES {
                for _ in 0..RANKS {
                    groups.push(Group {
                        rings: fields.iter().map(|_| Ring::new(cap)).collect(),
                        active: [false; 5],
                    });
                }
            }
        }
        Floor {
            groups,
            facts: (0..PROGRAMS.len()).map(|_| Facts::default()).collect(),
            v: Vec::with_capacity(8),
            fired: 0,
        }
    }

    fn event(&mut self, ev: &Ev) {
        self.v.clear();
        self.v
            .extend(ev.values.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)));
        let v = &self.v;
        let rank = if ev.ty == 7 { v[0] as usize % RANKS } else { 0 };
        let gi = (ev.p * TYPES.len() + ev.ty) * RANKS + rank;
        let Group { rings, active } = &mut self.groups[gi];
        for (r, x) in rings.iter_mut().zip(v) {
            r.push(*x);
        }
        let w = &*rings;
        let f = &mut self.facts[ev.p];
        let fired = &mut self.fired;
        // Each rule in agenda order: its condition, then its facts if it fires.
        let mut fire = |i: usize, cond: bool, f: &mut Facts, then: &dyn Fn(&mut Facts)| {
            let was = active[i];
            active[i] = cond;
            if cond && !was {
                *fired += 1;
                then(f);
            }
        };
        let none = &|_: &mut Facts| {};
        match ev.ty {
            0 => {
                fire(0, w[1].rose(2.0, 20), f, &|f| {
                    f.diverged += 1;
                    f.changed = true;
                });
                fire(1, w[1].dropped(4.0, 1000), f, none);
                fire(2, w[1].stalled(1.0, 200) && v[1] > 1e-6, f, none);
                fire(3, w[1].oscillates(20) && w[1].slope(20) > -1e-9, f, none);
                fire(
                    4,
                    w[1].dropped(2.0, 100) && !w[3].dropped(1.0, 100),
                    f,
                    none,
                );
            }
            1 => {
                fire(0, w[1].mean(10) > 2.0, f, &|f| {
                    f.changed |= !f.cfl_high;
                    f.cfl_high = true;
                });
                let c = w[1].mean(10) < 1.5 && f.cfl_high;
                fire(1, c, f, &|f| {
                    f.cfl_high = false;
                    f.changed = true;
                });
                fire(2, w[2].slope(50) < 0.0 && w[2].dropped(2.0, 200), f, none);
                fire(3, outside(v[1], 0.0, 5.0) || w[1].rose(1.0, 20), f, none);
                fire(4, w[1].oscillates(16), f, none);
            }
            2 => {
                fire(0, rel_diff(w[0].mean(20), w[1].mean(20)) > 0.02, f, none);
                fire(1, w[0].dropped(1.0, 100), f, none);
                fire(
                    2,
                    w[0].oscillates(12) && w[0].max(12) - w[0].min(12) > 5.0,
                    f,
                    none,
                );
                fire(3, w[1].slope(100) < -0.05, f, none);
                fire(
                    4,
                    outside(v[1], 0.0, 500.0) || outside(w[0].mean(5), 0.0, 500.0),
                    f,
                    none,
                );
            }
            3 => {
                fire(0, w[2].mean(10) < 1.0, f, none);
                fire(
                    1,
                    w[1].oscillates(10) && rel_diff(w[1].max(10), w[1].min(10)) > 0.05,
                    f,
                    none,
                );
                fire(2, w[1].slope(200) > 50.0, f, none);
                fire(3, outside(v[1], 5e4, 5e5) || w[1].rose(1.0, 50), f, none);
                fire(4, w[2].stalled(0.001, 100) && v[2] < 1.2, f, none);
            }
            4 => {
                fire(0, w[1].mean(20) > 1900.0, f, &|f| {
                    f.changed |= !f.overheat;
                    f.overheat = true;
                });
                fire(1, w[1].dropped(0.3, 20), f, none);
                fire(2, w[1].slope(50) > 2.0 && v[1] > 1700.0, f, none);
                fire(3, w[2].oscillates(20), f, none);
                fire(
                    4,
                    outside(v[0], 200.0, 1000.0) || rel_diff(v[1], w[1].mean(100)) > 0.2,
                    f,
                    none,
                );
            }
            5 => {
                fire(0, w[0].max(10) > 12000.0, f, &|f| {
                    f.changed |= !f.overspeed;
                    f.overspeed = true;
                });
                fire(
                    1,
                    w[0].oscillates(30) && rel_diff(w[0].max(30), w[0].min(30)) > 0.01,
                    f,
                    none,
                );
                fire(2, w[1].dropped(1.0, 50), f, none);
                fire(3, w[0].stalled(0.1, 100) && v[0] < 3000.0, f, none);
                let c = f.overheat && w[0].slope(20) > 0.0;
                fire(4, c, f, none);
            }
            6 => {
                fire(0, w[0].dropped(0.5, 100), f, none);
                fire(1, w[0].oscillates(20), f, none);
                fire(2, rel_diff(v[0], w[0].mean(200)) > 0.1, f, none);
                fire(3, outside(w[1].mean(5), 0.1, 2.0), f, none);
            }
            7 => {
                fire(0, w[1].mean(20) > 0.5 * w[2].mean(20), f, &|f| {
                    f.changed |= !f.imbalanced[rank];
                    f.imbalanced[rank] = true;
                });
                let c = w[1].mean(20) < 0.1 * w[2].mean(20) && f.imbalanced[rank];
                fire(1, c, f, &|f| {
                    f.imbalanced[rank] = false;
                    f.changed = true;
                });
                fire(2, w[1].slope(50) > 0.001, f, none);
                fire(3, w[1].rose(1.0, 20), f, none);
            }
            8 => {
                fire(0, w[1].mean(10) > 1.0, f, none);
                fire(1, w[0].dropped(1.0, 50) || w[1].slope(20) > 0.1, f, none);
                fire(2, outside(v[0], 0.0, 1e10) || w[1].rose(1.0, 30), f, none);
                fire(3, w[1].oscillates(10), f, none);
            }
            _ => {
                fire(0, w[0].slope(500) > 0.05 && v[0] > 1000.0, f, &|f| {
                    f.changed |= !f.leaking;
                    f.leaking = true;
                });
                fire(1, w[1].rose(0.3, 20), f, none);
                fire(2, w[1].mean(100) > 0.9 * v[0], f, none);
                fire(
                    3,
                    outside(v[0], 0.0, 64000.0) || rel_diff(v[0], w[0].max(100)) > 0.5,
                    f,
                    none,
                );
            }
        }
        // The fact rules, while memory changed: the first that holds fires (each retracts
        // what made it hold, so no activation comes twice).
        while f.changed {
            f.changed = false;
            if f.diverged > 0 && f.restarted < 3 {
                f.diverged = 0;
                f.restarted += 1;
            } else if f.diverged > 0 {
                f.diverged = 0;
                f.restarted = 0;
            } else if f.overheat && f.overspeed {
                f.overheat = false;
                f.overspeed = false;
                f.derated = true;
            } else if f.derated {
                f.derated = false;
            } else {
                break;
            }
            f.changed = true;
            self.fired += 1;
        }
    }
}

/// Events through the floor after [`WARM`] untimed ones: (events/s, firings of the timed
/// events).
fn floor_run(events: &[Ev], n: usize) -> (f64, u64) {
    let mut fl = Floor::new();
    for ev in events.iter().cycle().take(WARM) {
        fl.event(ev);
    }
    fl.fired = 0;
    let t = Instant::now();
    for k in WARM..WARM + n {
        fl.event(std::hint::black_box(&events[k % events.len()]));
    }
    let secs = t.elapsed().as_secs_f64();
    (n as f64 / secs, fl.fired)
}

struct EngineFigures {
    events_per_s: f64,
    runs: Vec<f64>,
    events: usize,
    firings: u64,
    floor_events_per_s: f64,
    floor_firings: u64,
    interpreted_events_per_s: f64,
    all_native_events_per_s: f64,
    floor_runs: Vec<f64>,
    ratio_runs: Vec<f64>,
    ratio_vs_native: f64,
    ratio_vs_interpreted: f64,
    interpreted_events: usize,
    interpreted_firings: u64,
    rules: usize,
    event_rules: usize,
    fact_rules: usize,
    native_rules: usize,
}

fn engine_figures(quick: bool) -> anyhow::Result<EngineFigures> {
    let (n, runs, n_interp, runs_interp) = if quick {
        (200_000, 3, 40_000, 1)
    } else {
        (1_000_000, 5, 100_000, 3)
    };
    let set = RuleSet::parse(RULES, "bench-rules.toml")?;
    let info = set.info();
    let event_rules = info.iter().filter(|r| r.on.is_some()).count();
    let native_rules = info.iter().filter(|r| r.native).count();
    let schemas = schemas();
    let events = pool();
    let per_event = event_rules as f64 / TYPES.len() as f64;
    println!(
        "gyr-bench rules: {} rules ({event_rules} on events, {native_rules} of them native; {} fact rules), {} event types, {} programs, {per_event:.1} rules per event",
        info.len(),
        info.len() - event_rules,
        TYPES.len(),
        PROGRAMS.len()
    );
    drop(set);
    // In rounds, each run of the engine beside a run of each reference: a shared machine's
    // speed drifts between runs seconds apart by more than the references differ, while one
    // round's runs see nearly the same machine. The ratios are the medians of the rounds' own.
    let native_only = rules_without(&FACT_CONDITIONS);
    let (mut rates, mut floor, mut all_native, mut interp) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut vs_floor, mut vs_interp) = (Vec::new(), Vec::new());
    let (mut firings, mut floor_firings, mut interpreted_firings) = (0, 0, 0);
    for round in 0..runs {
        let (fl, ff) = floor_run(&events, n);
        let (r, f) = engine_run(
            RuleSet::parse(RULES, "bench-rules.toml")?,
            &events,
            n,
            &schemas,
        );
        let set = RuleSet::parse(&native_only, "bench-rules.toml")?;
        anyhow::ensure!(
            set.len() == info.len() - FACT_CONDITIONS.len(),
            "the rules reading facts were not taken out"
        );
        all_native.push(engine_run(set, &events, n, &schemas).0);
        if round < runs_interp {
            let (ri, fi) = engine_run(
                RuleSet::parse(RULES, "bench-rules.toml")?.interpreted(),
                &events,
                n_interp,
                &schemas,
            );
            interp.push(ri);
            vs_interp.push(r / ri);
            interpreted_firings = fi;
        }
        vs_floor.push(r / fl);
        rates.push(r);
        floor.push(fl);
        (firings, floor_firings) = (f, ff);
    }
    let runs_values: Vec<f64> = rates.iter().map(|r| r.round()).collect();
    let floor_values: Vec<f64> = floor.iter().map(|r| r.round()).collect();
    let ratio_runs: Vec<f64> = vs_floor.iter().map(|r| r3(*r)).collect();
    let events_per_s = percentile(&mut rates, 0.5);
    let floor_events_per_s = percentile(&mut floor, 0.5);
    let interpreted_events_per_s = percentile(&mut interp, 0.5);
    let all_native_events_per_s = percentile(&mut all_native, 0.5);
    let ratio_vs_native = percentile(&mut vs_floor, 0.5);
    let ratio_vs_interpreted = percentile(&mut vs_interp, 0.5);
    println!(
        "  engine (windows, facts, agenda; one thread)   {:8.3} M events/s  (median of {runs} rounds of {n}; {firings} firings)",
        events_per_s / 1e6
    );
    println!(
        "  floor: the same rules by hand in plain Rust   {:8.3} M events/s  ({floor_firings} firings); engine / floor {ratio_vs_native:.3} (median of the rounds' ratios, {:.3} to {:.3})",
        floor_events_per_s / 1e6,
        vs_floor[0],
        vs_floor[vs_floor.len() - 1]
    );
    println!(
        "  the same without the {} rules reading facts    {:8.3} M events/s  (every condition native)",
        FACT_CONDITIONS.len(),
        all_native_events_per_s / 1e6
    );
    println!(
        "  every condition by rhai (native path off)     {:8.3} M events/s  ({n_interp} events in {runs_interp} of the rounds; {interpreted_firings} firings)",
        interpreted_events_per_s / 1e6
    );
    Ok(EngineFigures {
        events_per_s,
        runs: runs_values,
        events: n,
        firings,
        floor_events_per_s,
        floor_firings,
        interpreted_events_per_s,
        all_native_events_per_s,
        floor_runs: floor_values,
        ratio_runs,
        ratio_vs_native,
        ratio_vs_interpreted,
        interpreted_events: n_interp,
        interpreted_firings,
        rules: info.len(),
        event_rules,
        fact_rules: info.len() - event_rules,
        native_rules,
    })
}

// ---- The watch-dog's parser on a growing file. ----

/// The watch-dog's spec for ADPAC's residual lines and warnings.
const WATCH_SPEC: &str = r#"
[source.log]
file = "residuals.log"

[[event]]
name = "solver.residual"
source = ["stdout", "log"]
pattern = '^\s*(?P<iter>\d+)\s+(?P<rho>\S+)\s+(?P<u>\S+)\s+(?P<v>\S+)\s+(?P<e>\S+)\s*$'
fields = [
  { name = "iter", type = "u32" }, { name = "rho", type = "f64" }, { name = "u", type = "f64" },
  { name = "v", type = "f64" }, { name = "e", type = "f64" },
]

[[event]]
name = "solver.warning"
source = ["stdout", "log"]
pattern = 'WARNING:\s*(?P<message>.*)'
fields = [{ name = "message", type = "string" }]
"#;

/// An ADPAC-like line: iteration and four residuals with Fortran's `D` exponents; every 100th
/// a warning.
fn adpac_line(i: u64) -> String {
    if i % 100 == 99 {
        format!(" *** WARNING: cfl above 2 at iteration {i}\n")
    } else {
        let e = 2 + (i / 1000) % 6;
        format!(
            "{:>8}  {:.4}D-{:02}  {:.4}D-{:02}  {:.4}D-{:02}  {:.4}D-{:02}\n",
            i,
            0.1 + (i % 89) as f64 * 0.01,
            e,
            0.2 + (i % 53) as f64 * 0.01,
            e + 1,
            0.3 + (i % 31) as f64 * 0.01,
            e + 1,
            0.4 + (i % 17) as f64 * 0.01,
            e + 2
        )
    }
}

/// Reads `path` while a writer thread appends `text` to it in 64 KiB pieces; `line` gets every
/// line. Seconds from the writer's start to the last line read.
fn tail_growing(path: &Path, text: &Arc<Vec<u8>>, mut line: impl FnMut(&str)) -> f64 {
    use gyr_watchdog::tail::{FileTail, Item};
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::File::create(path).expect("a temporary file");
    let mut tail = FileTail::new(path.to_owned(), 0, String::new(), false);
    let done = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let writer = {
        let (done, text) = (done.clone(), text.clone());
        std::thread::spawn(move || {
            // A solver's buffered output, as fast as the file system takes it.
            for chunk in text.chunks(64 << 10) {
                f.write_all(chunk).expect("writing the file");
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut buf = Vec::new();
    loop {
        let finished = done.load(Ordering::SeqCst);
        let read = tail.poll(&mut buf, &mut |i| {
            if let Item::Line(l) = i {
                line(l)
            }
        });
        if finished && read == 0 {
            break;
        }
        if read == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let _ = writer.join();
    secs
}

struct WatchFigures {
    lines: u64,
    parse_lines_per_s: f64,
    e2e_lines_per_s: f64,
    floor_lines_per_s: f64,
    events_recorded: u64,
    events_lost: u64,
}

fn watch_figures(quick: bool) -> anyhow::Result<WatchFigures> {
    use gyr_watchdog::publish::Publisher;
    use gyr_watchdog::{LineParser, Spec};
    let (n, runs) = if quick {
        (200_000u64, 3)
    } else {
        (2_000_000u64, 3)
    };
    let spec = Arc::new(Spec::parse(WATCH_SPEC)?);
    let log = spec
        .sources
        .iter()
        .position(|s| s.name == "log")
        .ok_or_else(|| anyhow::anyhow!("the spec has no source `log`"))?;
    let text: Arc<Vec<u8>> = Arc::new((0..n).map(adpac_line).collect::<String>().into_bytes());
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("residuals.log");

    // FileTail and LineParser.
    let mut parse = Vec::new();
    for _ in 0..runs {
        let mut p = LineParser::new(spec.clone(), log, "");
        let mut events = 0u64;
        let secs = tail_growing(&path, &text, |l| {
            p.line(l, &mut |_, _| events += 1);
        });
        anyhow::ensure!(events == n, "{events} events of {n} lines");
        parse.push(n as f64 / secs);
    }
    let parse_lines_per_s = percentile(&mut parse, 0.5);

    // The floor: the same file, whole, read line by line.
    let mut floor = Vec::new();
    for _ in 0..runs {
        let mut r = std::io::BufReader::with_capacity(
            gyr_watchdog::tail::READ_CHUNK,
            std::fs::File::open(&path)?,
        );
        let mut s = String::new();
        let mut lines = 0u64;
        let t = Instant::now();
        loop {
            s.clear();
            if r.read_line(&mut s)? == 0 {
                break;
            }
            lines += 1;
            std::hint::black_box(&s);
        }
        floor.push(lines as f64 / t.elapsed().as_secs_f64());
        anyhow::ensure!(lines == n, "read {lines} of {n} lines");
    }
    let floor_lines_per_s = percentile(&mut floor, 0.5);

    // End to end: the events emitted through the watch-dog's sensors into a trace file, with
    // the runtime the watch-dog runs (the Drop policy, no server).
    let rt = gyr::Builder::new()
        .policy(gyr::Policy::Drop)
        .serve(false)
        .trace_file(dir.path().join("watch.gyr"))
        .start()?;
    let publisher = Publisher::new(spec.clone(), false);
    let mut e2e = Vec::new();
    for _ in 0..runs {
        let mut p = LineParser::new(spec.clone(), log, "");
        let before = publisher.counters.lines.load(Ordering::Relaxed);
        let secs = tail_growing(&path, &text, |l| publisher.line(&mut p, "log", l));
        let lines = publisher.counters.lines.load(Ordering::Relaxed) - before;
        anyhow::ensure!(lines == n, "published {lines} of {n} lines");
        e2e.push(n as f64 / secs);
    }
    let summary = rt.shutdown();
    let e2e_lines_per_s = percentile(&mut e2e, 0.5);
    println!(
        "  watch-dog, {n} ADPAC lines appended in 64 KiB pieces while read (median of {runs}):"
    );
    println!(
        "    FileTail + LineParser                       {:8.3} M lines/s",
        parse_lines_per_s / 1e6
    );
    println!(
        "    + dynamic sensors into a trace file         {:8.3} M lines/s  ({} events recorded, {} lost)",
        e2e_lines_per_s / 1e6,
        summary.records,
        summary.lost
    );
    println!(
        "    floor: BufRead::read_line, the whole file   {:8.3} M lines/s",
        floor_lines_per_s / 1e6
    );
    Ok(WatchFigures {
        lines: n,
        parse_lines_per_s,
        e2e_lines_per_s,
        floor_lines_per_s,
        events_recorded: summary.records,
        events_lost: summary.lost,
    })
}

// ---- From a line written to the alert a hub's client sees. ----

/// The hub's rules: one rule raising an alert for every line over 1.
const ALERT_RULES: &str = r#"
[[rule]]
name = "rho-high"
on = "solver.residual"
repeat = true
when = 'rho > 1.0'
then = 'alert("warning", `rho ${rho} above 1 at iteration ${iter}`);'
"#;

/// The watch-dog's spec for the latency: residual lines of a file followed with `--files`
/// (read as stdout is); `poll` replaces the default `poll_ms`.
fn latency_spec(poll_ms: Option<u64>) -> String {
    let mut s = String::from("[watchdog]\nname = \"bench\"\n");
    if let Some(ms) = poll_ms {
        s.push_str(&format!("poll_ms = {ms}\n"));
    }
    s.push_str(
        r#"
[[event]]
name = "solver.residual"
pattern = '^\s*(?P<iter>\d+)\s+(?P<rho>\S+)\s+(?P<u>\S+)\s+(?P<v>\S+)\s+(?P<e>\S+)\s*$'
fields = [
  { name = "iter", type = "u32" }, { name = "rho", type = "f64" }, { name = "u", type = "f64" },
  { name = "v", type = "f64" }, { name = "e", type = "f64" },
]
"#,
    );
    s
}

/// A child process, ended when dropped.
struct Kid(Child);
impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `gyr-bench rules-watchdog`: what `gyr watchdog --spec SPEC --hub HUB --files FILE --quiet`
/// runs: `gyr_watchdog::run` following `FILE`, publishing to the hub; until killed.
pub(crate) fn watchdog_child(spec: PathBuf, hub: String, file: String) -> anyhow::Result<()> {
    let spec = gyr_watchdog::Spec::load(&spec)?;
    let opts = gyr_watchdog::Options {
        command: Vec::new(),
        files: vec![file],
        dir: std::env::current_dir()?,
        trace: None,
        hub: Some(hub),
        instance: String::new(),
        only: None,
        quiet: true,
        show_unmatched: false,
        until_idle: None,
        linger: Duration::from_secs(3),
    };
    gyr_watchdog::run(spec, opts)?;
    Ok(())
}

struct Latency {
    poll_ms: u64,
    ms: Vec<f64>,
    missed: usize,
}

/// Marker lines one at a time; milliseconds from each write to its alert in a client.
fn alert_latency(samples: usize, poll_ms: Option<u64>) -> anyhow::Result<Latency> {
    let dir = tempfile::tempdir()?;
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, ALERT_RULES)?;
    let spec = dir.path().join("bench.toml");
    std::fs::write(&spec, latency_spec(poll_ms))?;
    let log = dir.path().join("solver.log");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse()?,
        grpc: Some("127.0.0.1:0".parse()?),
        socket_dir: dir.path().join("sockets"),
        discover: false,
        rules: Some(rules),
        ..Default::default()
    })?;
    let addr = hub.grpc_addr().expect("served").to_string();
    let watchdog = Kid(Command::new(std::env::current_exe()?)
        .args(["rules-watchdog", "--spec"])
        .arg(&spec)
        .args(["--hub", &addr, "--file"])
        .arg(&log)
        .current_dir(dir.path())
        .env("GYR_SOCKET_DIR", dir.path().join("sockets"))
        .env_remove("GYR_TRACE")
        .env_remove("GYR_HUB")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?);
    let mut client = gyr_client::Session::connect(&addr, None, "gyr-bench")?;
    let mut write = |iter: u64| -> std::io::Result<Instant> {
        let line = format!("{iter:>8}  0.2000D+01  0.1000D-02  0.1000D-02  0.1000D-02\n");
        let t = Instant::now();
        file.write_all(line.as_bytes())?;
        Ok(t)
    };
    // Waits for iteration `iter`'s alert; the time it was seen.
    let mut seen = |iter: u64, within: Duration| -> anyhow::Result<Option<Instant>> {
        let suffix = format!("at iteration {iter}");
        let until = Instant::now() + within;
        while Instant::now() < until {
            let alerts = client.alerts(0, 4)?;
            if alerts.iter().any(|a| a.message.ends_with(&suffix)) {
                return Ok(Some(Instant::now()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(None)
    };
    // Warm-up: the watch-dog finds the file, connects, the rules learn the event type.
    let mut iter = 1u64;
    let ready = Instant::now() + Duration::from_secs(30);
    loop {
        write(iter)?;
        let found = seen(iter, Duration::from_secs(2))?;
        iter += 1;
        if found.is_some() {
            break;
        }
        anyhow::ensure!(
            Instant::now() < ready,
            "no alert from the hub within 30 s of starting the watch-dog"
        );
    }
    let mut ms = Vec::with_capacity(samples);
    let mut missed = 0;
    let mut jitter = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..samples {
        // 20 to 30 ms after the last alert: no queue, and every phase of the watch-dog's poll.
        jitter ^= jitter << 13;
        jitter ^= jitter >> 7;
        jitter ^= jitter << 17;
        std::thread::sleep(Duration::from_micros(20_000 + jitter % 10_000));
        let t = write(iter)?;
        match seen(iter, Duration::from_secs(5))? {
            Some(at) => ms.push((at - t).as_secs_f64() * 1e3),
            None => missed += 1,
        }
        iter += 1;
    }
    // The watch-dog first: it would complain of the hub gone.
    drop(watchdog);
    drop(client);
    drop(hub);
    Ok(Latency {
        poll_ms: poll_ms.unwrap_or(50),
        ms,
        missed,
    })
}

pub(crate) fn run(json: bool, quick: bool) -> anyhow::Result<()> {
    let e = engine_figures(quick)?;
    let w = watch_figures(quick)?;
    let samples = if quick { 20 } else { 100 };
    let mut lat = alert_latency(samples, None)?;
    let mut fast = alert_latency(samples, Some(5))?;
    let (p50, p99) = (percentile(&mut lat.ms, 0.5), percentile(&mut lat.ms, 0.99));
    let (f50, f99) = (
        percentile(&mut fast.ms, 0.5),
        percentile(&mut fast.ms, 0.99),
    );
    println!(
        "  alert latency, line written -> watch-dog -> hub -> rule -> alert seen by a gRPC client (ListAlerts every 1 ms):"
    );
    println!(
        "    poll_ms = {} (the default)                 p50 {p50:7.2} ms   p99 {p99:7.2} ms  ({} samples, {} missed)",
        lat.poll_ms,
        lat.ms.len(),
        lat.missed
    );
    println!(
        "    poll_ms = {}                                p50 {f50:7.2} ms   p99 {f99:7.2} ms  ({} samples, {} missed)",
        fast.poll_ms,
        fast.ms.len(),
        fast.missed
    );
    let targets = json!({
        "events_per_s>=1M": e.events_per_s >= 1e6,
        "watch_lines_per_s>=500k": w.parse_lines_per_s >= 5e5,
        "alert_latency_ms<=50": p50 <= 50.0,
    });
    let ratios = json!({
        "ratio_vs_native": r3(e.ratio_vs_native),
        "ratio_vs_native_runs": e.ratio_runs,
        "ratio_vs_interpreted": r3(e.ratio_vs_interpreted),
        "all_native_vs_native": r3(e.all_native_events_per_s / e.floor_events_per_s),
        "watch_ratio_vs_read_line": r3(w.parse_lines_per_s / w.floor_lines_per_s),
        "watch_e2e_ratio_vs_read_line": r3(w.e2e_lines_per_s / w.floor_lines_per_s),
    });
    if json {
        println!(
            "{}",
            json!({
                "bench": "rules",
                "events_per_s": e.events_per_s.round(),
                "events_per_s_runs": e.runs,
                "rules": e.rules,
                "event_rules": e.event_rules,
                "fact_rules": e.fact_rules,
                "native_rules": e.native_rules,
                "event_types": TYPES.len(),
                "programs": PROGRAMS.len(),
                "rules_per_event": r3(e.event_rules as f64 / TYPES.len() as f64),
                "events": e.events,
                "firings": e.firings,
                "floor_events_per_s": e.floor_events_per_s.round(),
                "floor_events_per_s_runs": e.floor_runs,
                "floor_firings": e.floor_firings,
                "interpreted_events_per_s": e.interpreted_events_per_s.round(),
                "interpreted_events": e.interpreted_events,
                "all_native_events_per_s": e.all_native_events_per_s.round(),
                "interpreted_firings": e.interpreted_firings,
                "watch_lines": w.lines,
                "watch_lines_per_s": w.parse_lines_per_s.round(),
                "watch_e2e_lines_per_s": w.e2e_lines_per_s.round(),
                "watch_floor_lines_per_s": w.floor_lines_per_s.round(),
                "watch_events_recorded": w.events_recorded,
                "watch_events_lost": w.events_lost,
                "alert_latency_ms_p50": r3(p50),
                "alert_latency_ms_p99": r3(p99),
                "alert_poll_ms": lat.poll_ms,
                "alert_samples": lat.ms.len(),
                "alert_missed": lat.missed,
                "alert_latency_poll5_ms_p50": r3(f50),
                "alert_latency_poll5_ms_p99": r3(f99),
                "alert_poll5_samples": fast.ms.len(),
                "alert_poll5_missed": fast.missed,
                "targets": targets,
                "ratios": ratios,
            })
        );
    }
    Ok(())
}
