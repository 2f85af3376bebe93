//! `gyr-bench sensors`: the cost of capture, measured against the floor and the peers in one run.
//!
//! Every figure is a median over timed rounds of many events, after a warm-up round. Between
//! rounds (untimed) the consumers drain, so every round measures capture, not back-pressure.

use crate::floor::{FloorConsumer, FloorProducer, FloorRing};
use crate::peers;
use gyr::control::{Target, set_enabled};
use gyr::{Builder, Policy, Sensor, Sink};
use serde_json::json;
use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

#[derive(Sensor)]
#[sensor(name = "bench.p32")]
struct P32 {
    a: [u64; 4],
}

#[derive(Sensor)]
#[sensor(name = "bench.p64")]
struct P64 {
    a: [u64; 8],
}

#[derive(Sensor)]
#[sensor(name = "bench.p128")]
struct P128 {
    a: [u64; 16],
}

/// A sink that discards: measures capture and draining, not storage.
#[derive(Debug)]
struct NullSink;
impl Sink for NullSink {}

struct Plan {
    events: u64,
    rounds: usize,
    throughput_events: u64,
    overhead_steps: u64,
    overhead_reps: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `rounds` rounds (plus one warm-up) of `round`, calling `settle` untimed before each.
fn per_event(plan: &Plan, mut settle: impl FnMut(), mut round: impl FnMut(u64)) -> f64 {
    let mut times = Vec::with_capacity(plan.rounds);
    for r in 0..=plan.rounds {
        settle();
        let t = Instant::now();
        round(r as u64 * plan.events);
        let ns = t.elapsed().as_nanos() as f64 / plan.events as f64;
        if r > 0 {
            times.push(ns);
        }
    }
    median(times)
}

fn floor_1t(plan: &Plan, clock: &quanta::Clock) -> f64 {
    let ring = FloorRing::new(1 << 20);
    let _consumer = FloorConsumer::start(vec![ring.clone()]);
    let mut p = FloorProducer::new(ring.clone(), clock.clone());
    per_event(
        plan,
        || wait_until(|| ring.is_empty()),
        |base| {
            for i in base..base + plan.events {
                p.record(&black_box([i; 8]));
            }
        },
    )
}

fn wait_until(mut done: impl FnMut() -> bool) {
    while !done() {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Two producer threads emitting at once; returns the mean ns/event of the two, median over rounds.
fn two_threads<P: Send + 'static>(
    plan: &Plan,
    make: impl Fn() -> P + Send + Sync + 'static,
    emit: fn(&mut P, u64),
    mut settle: impl FnMut(),
) -> f64 {
    let start = Arc::new(Barrier::new(3));
    let end = Arc::new(Barrier::new(3));
    let times = Arc::new(Mutex::new(Vec::<(usize, f64)>::new()));
    let make = Arc::new(make);
    let (events, rounds) = (plan.events, plan.rounds);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (start, end, times, make) =
                (start.clone(), end.clone(), times.clone(), make.clone());
            std::thread::spawn(move || {
                let mut p = make();
                for r in 0..=rounds {
                    start.wait();
                    let t = Instant::now();
                    let base = r as u64 * events;
                    for i in base..base + events {
                        emit(&mut p, i);
                    }
                    let ns = t.elapsed().as_nanos() as f64 / events as f64;
                    times.lock().unwrap().push((r, ns));
                    end.wait();
                }
            })
        })
        .collect();
    for _ in 0..=rounds {
        settle();
        start.wait();
        end.wait();
    }
    for h in handles {
        h.join().unwrap();
    }
    let times = times.lock().unwrap();
    let per_round: Vec<f64> = (1..=rounds)
        .map(|r| {
            let v: Vec<f64> = times
                .iter()
                .filter(|(k, _)| *k == r)
                .map(|(_, ns)| *ns)
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        })
        .collect();
    median(per_round)
}

/// The parts of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    Floor,
    Enabled,
    Disabled,
    TwoThreads,
    Tracing,
    Puffin,
    Throughput,
    Overhead,
}

/// A fixed compute kernel: `k` dependent multiply-adds.
#[inline(never)]
fn kernel(x: f64, k: u32) -> f64 {
    let mut v = x;
    for _ in 0..k {
        v = v * 0.999_999_9 + 1e-9;
    }
    v
}

/// The kernel recording into the floor ring instead of a gyr sensor.
fn run_kernel_floor(steps: u64, k: u32, p: &mut FloorProducer) -> Duration {
    let t = Instant::now();
    let mut x = 1.0;
    for i in 0..steps {
        x = kernel(x, k);
        p.record(&[i, x.to_bits(), i, i, i, i, i, i]);
    }
    black_box(x);
    t.elapsed()
}

/// The kernel size `k` at which one step (kernel and a disabled sensor) takes about 1 µs, so
/// that the kernel emits about 1M events per second.
fn calibrate_kernel() -> u32 {
    let rt = Builder::new().sink(NullSink).start().expect("start gyr");
    P64 { a: [0; 8] }.emit();
    set_enabled(&Target::Type("bench.p64".into()), false);
    let mut k = 100u32;
    for _ in 0..6 {
        let d = run_kernel(50_000, k);
        let per_step = d.as_secs_f64() / 50_000.0;
        k = ((k as f64) * 1e-6 / per_step).clamp(1.0, 1e6) as u32;
    }
    set_enabled(&Target::Type("bench.p64".into()), true);
    drop(rt);
    k
}

struct Overhead {
    pct: f64,
    floor_pct: f64,
    events_per_s: f64,
    lost: u64,
}

/// The kernel with sensors on against sensors off (and against the floor), alternating, medians.
fn overhead(
    plan: &Plan,
    clock: &quanta::Clock,
    k: u32,
    trace: Option<&std::path::Path>,
) -> anyhow::Result<Overhead> {
    let b = Builder::new().policy(Policy::Block);
    let rt = match trace {
        Some(p) => b.trace_file(p),
        None => b.sink(NullSink),
    }
    .start()?;
    let ring = FloorRing::new(1 << 16);
    let consumer = FloorConsumer::start(vec![ring.clone()]);
    let mut floor = FloorProducer::new(ring, clock.clone());
    let (mut off, mut on, mut fl) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..plan.overhead_reps {
        set_enabled(&Target::Type("bench.p64".into()), false);
        off.push(run_kernel(plan.overhead_steps, k).as_secs_f64());
        set_enabled(&Target::Type("bench.p64".into()), true);
        on.push(run_kernel(plan.overhead_steps, k).as_secs_f64());
        set_enabled(&Target::Type("bench.p64".into()), false);
        fl.push(run_kernel_floor(plan.overhead_steps, k, &mut floor).as_secs_f64());
        rt.flush();
    }
    set_enabled(&Target::Type("bench.p64".into()), true);
    drop(consumer);
    let lost = rt.shutdown().lost;
    // Ratios of runs made side by side cancel the machine's drift better than ratios of medians.
    let pct = |v: &[f64]| {
        median(
            v.iter()
                .zip(&off)
                .map(|(x, o)| (x / o - 1.0) * 100.0)
                .collect(),
        )
    };
    Ok(Overhead {
        pct: pct(&on),
        floor_pct: pct(&fl),
        events_per_s: plan.overhead_steps as f64 / median(off.clone()),
        lost,
    })
}

fn run_kernel(steps: u64, k: u32) -> Duration {
    let t = Instant::now();
    let mut x = 1.0;
    for i in 0..steps {
        x = kernel(x, k);
        P64 {
            a: [i, x.to_bits(), i, i, i, i, i, i],
        }
        .emit();
    }
    black_box(x);
    t.elapsed()
}

fn r2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn ratio(a: f64, b: f64) -> f64 {
    (a / b * 1000.0).round() / 1000.0
}

/// The disabled sensor's marginal cost: a loop emitting on a disabled sensor, minus the same
/// loop without the sensor. Both loops build the event from an opaque value, as a program would.
///
/// Returns the cost through `gyr::emit!` and through `.emit()`.
fn disabled_cost(plan: &Plan) -> (f64, f64) {
    let rt = Builder::new().sink(NullSink).start().expect("start gyr");
    // Register the type and switch it off.
    P64 { a: [0; 8] }.emit();
    set_enabled(&Target::Type("bench.p64".into()), false);
    let n = plan.events * 100;
    let big = Plan {
        events: n,
        ..plan_copy(plan)
    };
    let with = per_event(&big, || {}, |b| disabled_loop(b, n));
    let without = per_event(&big, || {}, |b| empty_loop(b, n));
    let method = per_event(&big, || {}, |b| disabled_method_loop(b, n));
    set_enabled(&Target::Type("bench.p64".into()), true);
    drop(rt);
    ((with - without).max(0.0), (method - without).max(0.0))
}

/// A disabled sensor through `gyr::emit!`, which checks the switch before building the event.
#[inline(never)]
fn disabled_loop(b: u64, n: u64) {
    for i in b..b + n {
        let i = black_box(i);
        gyr::emit!(P64 { a: [i; 8] });
    }
}

/// A disabled sensor through `.emit()`: the event is built first, then the switch checked.
#[inline(never)]
fn disabled_method_loop(b: u64, n: u64) {
    for i in b..b + n {
        let i = black_box(i);
        P64 { a: [i; 8] }.emit();
    }
}

#[inline(never)]
fn empty_loop(b: u64, n: u64) {
    for i in b..b + n {
        black_box(i);
    }
}

/// Events per second of one producer through one monitor into `sink` (a trace file when
/// `path` is given), and the events lost.
fn throughput(plan: &Plan, path: Option<&std::path::Path>) -> anyhow::Result<(f64, u64)> {
    let mut b = Builder::new().policy(Policy::Block).max_monitors(1);
    b = match path {
        Some(p) => b.trace_file(p),
        None => b.sink(NullSink),
    };
    let rt = b.start()?;
    let t = Instant::now();
    for i in 0..plan.throughput_events {
        P64 {
            a: black_box([i; 8]),
        }
        .emit();
    }
    let summary = rt.shutdown();
    Ok((
        plan.throughput_events as f64 / t.elapsed().as_secs_f64(),
        summary.lost,
    ))
}

/// The storage floor: the same bytes the trace file holds, written with plain 1 MiB writes to a
/// new file, in events per second.
fn file_floor(plan: &Plan, bytes: u64, path: &std::path::Path) -> anyhow::Result<f64> {
    use std::io::Write;
    let chunk = vec![0x5au8; 1 << 20];
    let t = Instant::now();
    let mut f = std::fs::File::create(path)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    drop(f);
    Ok(plan.throughput_events as f64 / t.elapsed().as_secs_f64())
}

pub(crate) fn run(json: bool, quick: bool, only: &[Part]) -> anyhow::Result<()> {
    let plan = if quick {
        Plan {
            events: 20_000,
            rounds: 5,
            throughput_events: 1_000_000,
            overhead_steps: 200_000,
            overhead_reps: 3,
        }
    } else {
        Plan {
            events: 100_000,
            rounds: 31,
            throughput_events: 10_000_000,
            overhead_steps: 1_000_000,
            overhead_reps: 7,
        }
    };
    let want = |p: Part| only.is_empty() || only.contains(&p);
    let clock = quanta::Clock::new();
    let mut out = serde_json::Map::new();
    out.insert("bench".into(), json!("sensors"));
    out.insert("events_per_round".into(), json!(plan.events));
    out.insert("rounds".into(), json!(plan.rounds));
    println!(
        "gyr-bench sensors: medians of {} rounds of {} events; 64-byte events unless said",
        plan.rounds, plan.events
    );
    let line = |what: &str, v: String| println!("  {what:<48} {v}");

    if want(Part::Floor) {
        let stamp = per_event(
            &plan,
            || {},
            |b| {
                for i in b..b + plan.events {
                    black_box(i);
                    black_box(clock.raw());
                }
            },
        );
        line(
            "reading the timestamp counter alone",
            format!("{stamp:8.2} ns"),
        );
        out.insert("timestamp_ns".into(), json!(r2(stamp)));
        let floor = floor_1t(&plan, &clock);
        line(
            "floor: stamp + copy into an SPSC ring",
            format!("{floor:8.2} ns"),
        );
        out.insert("floor_ns".into(), json!(r2(floor)));
    }
    if want(Part::Enabled) {
        // One producer thread, a sink that discards; rings large enough for a whole round.
        let rt = Builder::new()
            .policy(Policy::Block)
            .ring_capacity(64 << 20)
            .sink(NullSink)
            .start()?;
        let settle = || {
            rt.flush();
        };
        let e32 = per_event(&plan, settle, |b| {
            for i in b..b + plan.events {
                P32 {
                    a: black_box([i; 4]),
                }
                .emit();
            }
        });
        let e64 = per_event(&plan, settle, |b| {
            for i in b..b + plan.events {
                P64 {
                    a: black_box([i; 8]),
                }
                .emit();
            }
        });
        let e128 = per_event(&plan, settle, |b| {
            for i in b..b + plan.events {
                P128 {
                    a: black_box([i; 16]),
                }
                .emit();
            }
        });
        let lost = rt.shutdown().lost;
        anyhow::ensure!(lost == 0, "gyr lost {lost} events under Block");
        line(
            "gyr sensor, 32 / 64 / 128 bytes",
            format!("{e32:8.2} / {e64:.2} / {e128:.2} ns"),
        );
        out.insert(
            "enabled_ns".into(),
            json!({ "32": r2(e32), "64": r2(e64), "128": r2(e128) }),
        );
    }
    if want(Part::Disabled) {
        let (macro_ns, method_ns) = disabled_cost(&plan);
        line(
            "gyr sensor, disabled: emit! / .emit()",
            format!("{macro_ns:8.3} / {method_ns:.3} ns"),
        );
        out.insert(
            "disabled_ns".into(),
            json!((macro_ns * 1000.0).round() / 1000.0),
        );
        out.insert(
            "disabled_method_ns".into(),
            json!((method_ns * 1000.0).round() / 1000.0),
        );
    }
    if want(Part::TwoThreads) {
        let rt = Builder::new()
            .policy(Policy::Block)
            .ring_capacity(64 << 20)
            .sink(NullSink)
            .start()?;
        let gyr_2t = two_threads(
            &plan,
            || (),
            |_, i| {
                P64 {
                    a: black_box([i; 8]),
                }
                .emit()
            },
            || {
                rt.flush();
            },
        );
        drop(rt);
        let rings = [FloorRing::new(1 << 20), FloorRing::new(1 << 20)];
        let consumer = FloorConsumer::start(rings.to_vec());
        let next = Arc::new(Mutex::new(rings.to_vec()));
        let c2 = clock.clone();
        let floor_2t = two_threads(
            &plan,
            move || FloorProducer::new(next.lock().unwrap().pop().unwrap(), c2.clone()),
            |p, i| p.record(&black_box([i; 8])),
            || wait_until(|| rings.iter().all(|r| r.is_empty())),
        );
        drop(consumer);
        line(
            "two threads at once: gyr / floor",
            format!("{gyr_2t:8.2} / {floor_2t:.2} ns"),
        );
        out.insert("floor_2t_ns".into(), json!(r2(floor_2t)));
        out.insert("enabled_2t_ns".into(), json!(r2(gyr_2t)));
        out.insert("ratio_2t_vs_floor".into(), json!(ratio(gyr_2t, floor_2t)));
    }
    if want(Part::Tracing) {
        let subscriber = tracing_subscriber::layer::SubscriberExt::with(
            tracing_subscriber::registry(),
            peers::CaptureLayer::new(clock.clone()),
        );
        let ns = tracing::subscriber::with_default(subscriber, || {
            per_event(
                &plan,
                || {
                    peers::clear_captured();
                },
                |b| {
                    for i in b..b + plan.events {
                        peers::tracing_event(&black_box([i; 8]));
                    }
                },
            )
        });
        line("tracing: event captured by a layer", format!("{ns:8.2} ns"));
        out.insert("tracing_ns".into(), json!(r2(ns)));
    }
    if want(Part::Puffin) {
        // A new frame between rounds hands the recorded scopes to the global profiler.
        puffin::set_scopes_on(true);
        let ns = per_event(
            &plan,
            || puffin::GlobalProfiler::lock().new_frame(),
            |b| {
                for i in b..b + plan.events {
                    black_box(i);
                    peers::puffin_scope();
                }
            },
        );
        puffin::set_scopes_on(false);
        puffin::GlobalProfiler::lock().new_frame();
        line(
            "puffin: scope with 64 bytes of data, profiler on",
            format!("{ns:8.2} ns"),
        );
        out.insert("puffin_ns".into(), json!(r2(ns)));
    }
    if want(Part::Throughput) {
        // Storage and gyr alternate, each writing a new file, and each keeps its best of two:
        // the page cache is faster for whichever runs right after a file was freed.
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("throughput.gyr");
        let floor_path = dir.path().join("floor.bin");
        let (mut file_eps, mut floor_eps, mut lost, mut bytes) = (0f64, 0f64, 0, 0);
        for _ in 0..2 {
            let (eps, l) = throughput(&plan, Some(&path))?;
            bytes = std::fs::metadata(&path)?.len();
            std::fs::remove_file(&path)?;
            file_eps = file_eps.max(eps);
            lost += l;
            floor_eps = floor_eps.max(file_floor(&plan, bytes, &floor_path)?);
            std::fs::remove_file(&floor_path)?;
        }
        let (null_eps, null_lost) = throughput(&plan, None)?;
        line(
            "monitor throughput into the trace file",
            format!(
                "{:8.2} M events/s, {lost} lost ({:.0} MB)",
                file_eps / 1e6,
                bytes as f64 / 1e6
            ),
        );
        line(
            "  same bytes with plain writes (storage floor)",
            format!("{:8.2} M events/s", floor_eps / 1e6),
        );
        line(
            "  into a sink that discards",
            format!("{:8.2} M events/s, {null_lost} lost", null_eps / 1e6),
        );
        out.insert("monitor_events_per_s".into(), json!(file_eps.round()));
        out.insert("lost".into(), json!(lost + null_lost));
        out.insert("file_floor_events_per_s".into(), json!(floor_eps.round()));
        out.insert(
            "ratio_monitor_vs_file_floor".into(),
            json!(ratio(file_eps, floor_eps)),
        );
        out.insert(
            "monitor_null_sink_events_per_s".into(),
            json!(null_eps.round()),
        );
        out.insert(
            "trace_bytes_per_event".into(),
            json!(r2(bytes as f64 / plan.throughput_events as f64)),
        );
    }
    if want(Part::Overhead) {
        let k = calibrate_kernel();
        let dir = tempfile::tempdir()?;
        let file = overhead(&plan, &clock, k, Some(&dir.path().join("overhead.gyr")))?;
        let null = overhead(&plan, &clock, k, None)?;
        line(
            "overhead on a compute kernel, into a trace file",
            format!(
                "{:8.2} % at {:.2} M events/s, {} lost",
                file.pct,
                file.events_per_s / 1e6,
                file.lost
            ),
        );
        line(
            "  the same, into a sink that discards",
            format!("{:8.2} %", null.pct),
        );
        line(
            "  the floor's overhead on the same kernel",
            format!("{:8.2} %", file.floor_pct),
        );
        out.insert("overhead_pct".into(), json!(r2(file.pct)));
        out.insert("overhead_null_sink_pct".into(), json!(r2(null.pct)));
        out.insert("overhead_floor_pct".into(), json!(r2(file.floor_pct)));
        out.insert(
            "overhead_kernel_events_per_s".into(),
            json!(file.events_per_s.round()),
        );
    }
    let num =
        |m: &serde_json::Map<String, serde_json::Value>, k: &str| m.get(k).and_then(|v| v.as_f64());
    let e64 = out.get("enabled_ns").and_then(|v| v["64"].as_f64());
    for (key, peer) in [
        ("ratio_vs_floor", "floor_ns"),
        ("ratio_vs_tracing", "tracing_ns"),
        ("ratio_vs_puffin", "puffin_ns"),
    ] {
        if let (Some(e), Some(p)) = (e64, num(&out, peer)) {
            out.insert(key.into(), json!(ratio(e, p)));
        }
    }
    let get = |k: &str| num(&out, k);
    let mut targets = serde_json::Map::new();
    let mut target = |name: &str, v: Option<bool>| {
        if let Some(v) = v {
            targets.insert(name.into(), json!(v));
        }
    };
    target("disabled_ns<=0.5", get("disabled_ns").map(|v| v <= 0.5));
    target(
        "ratio_vs_floor<=1.5",
        get("ratio_vs_floor").map(|v| v <= 1.5),
    );
    target(
        "ratio_2t_vs_floor<=1.5",
        get("ratio_2t_vs_floor").map(|v| v <= 1.5),
    );
    target(
        "faster_than_tracing",
        get("ratio_vs_tracing").map(|v| v < 1.0),
    );
    target(
        "faster_than_puffin",
        get("ratio_vs_puffin").map(|v| v < 1.0),
    );
    target(
        "monitor_events_per_s>=20M",
        get("monitor_events_per_s").map(|v| v >= 20e6),
    );
    target("overhead_pct<=1", get("overhead_pct").map(|v| v <= 1.0));
    if let (Some(e), Some(f), Some(t), Some(p)) =
        (e64, get("floor_ns"), get("tracing_ns"), get("puffin_ns"))
    {
        println!(
            "  64-byte event: gyr {e:.2} ns = {:.2}x floor, {:.2}x tracing, {:.2}x puffin",
            e / f,
            e / t,
            e / p
        );
    }
    out.insert("targets".into(), serde_json::Value::Object(targets));
    if json {
        println!("{}", serde_json::Value::Object(out));
    }
    Ok(())
}

fn plan_copy(p: &Plan) -> Plan {
    Plan {
        events: p.events,
        rounds: p.rounds,
        throughput_events: p.throughput_events,
        overhead_steps: p.overhead_steps,
        overhead_reps: p.overhead_reps,
    }
}
