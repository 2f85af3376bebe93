//! `gyr-bench ffi`: what an event costs on the ways into gyr from code not written for gyr's
//! own sensors, against gyr's typed sensor and against each foreign API's own capture, in one
//! process run.
//!
//! Each figure is a [`Case`]: a function that times `n` events under a gyr runtime of its own
//! (whose sink discards), so that every case runs with the same monitor thread beside it. The
//! cases run in turn, round after round, and each figure is the best of its rounds: noise on a
//! shared machine only ever adds time, and alternating spreads it over all cases alike. More
//! ways in are more entries in [`cases`] and more ratios in [`RATIOS`]; C and Fortran programs
//! run as processes of their own, so their figures come from [`crate::ffi_native`], after the
//! cases, beside a Rust sensor of the same 24-byte shape (`rust_sensor_ns`). The Python
//! package's trace reader is timed by [`crate::python_read`] (`python_read_events_per_s`).
//!
//! The `tracing` cases all emit from the same call sites ([`event`], [`span`]) under a scoped
//! dispatcher:
//! - `tracing_layer`: a `Registry` with `gyr_tracing::GyrLayer`;
//! - `tracing_capture`: a `Registry` with `tracing_subscriber`'s fmt layer writing through
//!   `tracing_appender`'s non-blocking writer to a file, as its users keep their events;
//! - `tracing_dispatch`: a `Registry` with a layer that does nothing: `tracing`'s own floor;
//! - `tracing_layer_off`: the gyr layer with the event's gyr type switched off.

use crate::figures::r3;
use crate::ordering::{best, discarding_runtime, sensor_ns};
use gyr::control::{Target, set_enabled};
use serde_json::{Map, Value, json};
use std::io::Write as _;
use std::time::Instant;
use tracing::Dispatch;
use tracing_subscriber::layer::{Layer, SubscriberExt};

/// The parts of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    /// The `tracing` cases and gyr's typed sensor beside them.
    Tracing,
    /// C and Fortran sensors against a Rust sensor of the same shape.
    Native,
    /// The Python package's trace reader.
    Read,
    /// Python sensors against a plain Python call.
    Python,
}

/// One figure: its JSON name, what it measures, and how.
pub(crate) struct Case {
    /// The figure's name in the JSON line (ns per event).
    pub(crate) name: &'static str,
    /// One line for the text output.
    pub(crate) what: &'static str,
    /// Times `n` events in this process, under a runtime of its own; ns per event.
    pub(crate) run: fn(&Setup, u64) -> anyhow::Result<f64>,
}

/// What the cases share, made once: the subscribers and the capture's file.
pub(crate) struct Setup {
    layer: Dispatch,
    capture: Dispatch,
    dispatch: Dispatch,
    /// The capture's log file, emptied between rounds so that the disk holds one round.
    log: std::fs::File,
    /// Lines the non-blocking writer dropped (its queue was full).
    dropped: tracing_appender::non_blocking::ErrorCounter,
    /// Flushes and stops the writer's thread when dropped.
    guard: Option<tracing_appender::non_blocking::WorkerGuard>,
    _dir: tempfile::TempDir,
}

/// The ratios printed, each `(name, numerator, denominator)`.
pub(crate) const RATIOS: &[(&str, &str, &str)] = &[
    (
        "ratio_layer_vs_capture",
        "tracing_layer_ns",
        "tracing_capture_ns",
    ),
    (
        "ratio_layer_vs_dispatch",
        "tracing_layer_ns",
        "tracing_dispatch_ns",
    ),
    (
        "ratio_layer_vs_rust_sensor",
        "tracing_layer_ns",
        "rust_thread_sensor_ns",
    ),
    (
        "ratio_layer_span_vs_capture_span",
        "tracing_layer_span_ns",
        "tracing_capture_span_ns",
    ),
    (
        "ratio_layer_span_vs_dispatch_span",
        "tracing_layer_span_ns",
        "tracing_dispatch_span_ns",
    ),
];

/// A layer that does nothing: the cost of `tracing`'s dispatch and `Registry` alone.
struct NoopLayer;

impl<S: tracing::Subscriber> Layer<S> for NoopLayer {}

/// The event every `tracing` case emits: three fields, one of them the message.
#[inline(never)]
fn event(i: u64) {
    tracing::info!(name: "bench_event", step = i, residual = i as f64 * 1e-3, "converging");
}

/// The gyr type name of [`event`].
const EVENT_TYPE: &str = "gyr_bench.ffi.bench_event.info";

/// The span every `tracing` span case opens: made with one field, entered, exited and closed,
/// as a loop body in `let _s = info_span!(..).entered();` does.
#[inline(never)]
fn span(i: u64) {
    let _s = tracing::info_span!("bench_span", step = i).entered();
}

fn timed(d: &Dispatch, n: u64, f: fn(u64)) -> anyhow::Result<f64> {
    let rt = discarding_runtime()?;
    let ns = tracing::dispatcher::with_default(d, || {
        // Warm: the first event of a call site registers its schemas.
        for i in 0..100 {
            f(i);
        }
        let start = Instant::now();
        for i in 0..n {
            f(std::hint::black_box(i));
        }
        start.elapsed().as_secs_f64() * 1e9 / n as f64
    });
    rt.shutdown();
    Ok(ns)
}

/// The figures, in the order each round runs them.
pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "rust_thread_sensor_ns",
            what: "gyr's typed sensor (16 bytes), as `sensors` and `ordering` measure it",
            run: |_, n| sensor_ns(n, 1),
        },
        Case {
            name: "tracing_layer_ns",
            what: "tracing info! (3 fields) through a Registry with GyrLayer",
            run: |s, n| timed(&s.layer, n, event),
        },
        Case {
            name: "tracing_capture_ns",
            what: "the same through the fmt layer and tracing-appender's non-blocking file",
            run: |s, n| {
                s.log.set_len(0)?;
                timed(&s.capture, n, event)
            },
        },
        Case {
            name: "tracing_dispatch_ns",
            what: "the same through a Registry with a layer that does nothing",
            run: |s, n| timed(&s.dispatch, n, event),
        },
        Case {
            name: "tracing_layer_off_ns",
            what: "the same through GyrLayer, its gyr type switched off",
            run: |s, n| {
                let target = Target::Type(EVENT_TYPE.into());
                set_enabled(&target, false);
                let ns = timed(&s.layer, n, event);
                set_enabled(&target, true);
                ns
            },
        },
        Case {
            name: "tracing_layer_span_ns",
            what: "info_span! (1 field) made, entered, exited, closed, with GyrLayer",
            run: |s, n| timed(&s.layer, n, span),
        },
        Case {
            name: "tracing_capture_span_ns",
            what: "the same span with the fmt layer and the non-blocking file",
            run: |s, n| {
                s.log.set_len(0)?;
                timed(&s.capture, n, span)
            },
        },
        Case {
            name: "tracing_dispatch_span_ns",
            what: "the same span with a layer that does nothing",
            run: |s, n| timed(&s.dispatch, n, span),
        },
    ]
}

impl Setup {
    fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("capture.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let (writer, guard) = tracing_appender::non_blocking(log.try_clone()?);
        let dropped = writer.error_counter();
        let capture = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(writer),
        );
        Ok(Setup {
            layer: Dispatch::new(tracing_subscriber::registry().with(gyr_tracing::GyrLayer::new())),
            capture: Dispatch::new(capture),
            dispatch: Dispatch::new(tracing_subscriber::registry().with(NoopLayer)),
            log,
            dropped,
            guard: Some(guard),
            _dir: dir,
        })
    }
}

/// Runs every case `rounds` times in turn; each case's runs, in round order.
fn rounds(setup: &Setup, cases: &[Case], rounds: usize, n: u64) -> anyhow::Result<Vec<Vec<f64>>> {
    let mut runs = vec![Vec::with_capacity(rounds); cases.len()];
    for _ in 0..rounds {
        for (c, out) in cases.iter().zip(&mut runs) {
            out.push((c.run)(setup, n)?);
        }
    }
    Ok(runs)
}

pub(crate) fn run(json: bool, quick: bool, only: &[Part]) -> anyhow::Result<()> {
    let want = |p: Part| only.is_empty() || only.contains(&p);
    let (n, rounds_n) = if quick { (20_000, 3) } else { (200_000, 9) };
    let mut out = Map::new();
    if want(Part::Tracing) {
        tracing_cases(&mut out, n, rounds_n)?;
    }
    if want(Part::Native) {
        let native = crate::ffi_native::measure(quick)?;
        println!(
            "  sensor, 24-byte event: Rust {:.1} ns, C {:.1} ns ({:.2}x), Fortran {:.1} ns ({:.2}x)",
            native.rust_sensor_ns,
            native.c_sensor_ns,
            native.c_sensor_ns / native.rust_sensor_ns,
            native.fortran_sensor_ns,
            native.fortran_sensor_ns / native.rust_sensor_ns
        );
        if let Value::Object(m) = native.json() {
            out.extend(m);
        }
    }
    if want(Part::Read) {
        out.extend(crate::python_read::measure(quick)?);
    }
    if want(Part::Python) {
        out.extend(crate::ffi_python::measure(quick));
    }
    std::io::stdout().flush()?;
    if json {
        println!("{}", Value::Object(out));
    }
    Ok(())
}

/// The `tracing` cases, alternating round after round, into `out`.
fn tracing_cases(out: &mut Map<String, Value>, n: u64, rounds_n: usize) -> anyhow::Result<()> {
    let mut setup = Setup::new()?;
    let cases = cases();
    let runs = rounds(&setup, &cases, rounds_n, n)?;
    // Flush the capture's queue and stop its thread before counting what it dropped.
    drop(setup.guard.take());
    let dropped = setup.dropped.dropped_lines();

    println!("ffi: best of {rounds_n} alternating rounds of {n} events, ns per event");
    for (c, r) in cases.iter().zip(&runs) {
        let b = best(r);
        println!("  {:<26} {:>8.1}  {}", c.name, b, c.what);
        out.insert(c.name.into(), json!(r3(b)));
        out.insert(
            format!("{}_runs", c.name.trim_end_matches("_ns")),
            json!(r.iter().map(|v| r3(*v)).collect::<Vec<_>>()),
        );
    }
    for (name, a, b) in RATIOS {
        if let (Some(a), Some(b)) = (
            out.get(*a).and_then(Value::as_f64),
            out.get(*b).and_then(Value::as_f64),
        ) {
            let r = r3(a / b);
            println!("  {name:<34} {r}");
            out.insert((*name).into(), json!(r));
        }
    }
    println!("  capture lines dropped by the non-blocking writer: {dropped}");
    out.insert("tracing_capture_dropped_lines".into(), json!(dropped));
    for (name, ratio) in [
        ("layer_at_most_capture", "ratio_layer_vs_capture"),
        (
            "layer_span_at_most_capture_span",
            "ratio_layer_span_vs_capture_span",
        ),
    ] {
        let met = out.get(ratio).and_then(Value::as_f64).map(|r| r <= 1.0);
        out.insert(name.into(), json!(met));
    }
    out.insert("events_per_run".into(), json!(n));
    out.insert("rounds".into(), json!(rounds_n));
    Ok(())
}
