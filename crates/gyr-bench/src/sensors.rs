//! `gyr-bench sensors`: the cost of capture as users pay it, against the physical floor and
//! the peers in one run.
//!
//! Each capture figure comes from a child process of its own ([`crate::capture`]): one peer,
//! one event shape, one or two producers, at least five timed runs of many events per thread,
//! each peer's consumer draining concurrently. The JSON holds every run's value beside the
//! median. Instructions per event come from callgrind (see [`crate::callgrind`]). The disabled
//! cost, the monitor's throughput and the overhead on a compute kernel run in this process,
//! which starts no peer.

use crate::callgrind;
use crate::capture::{NullSink, Peer, Shape, Spec};
use crate::figures::r3;
use crate::floor;
use gyr::control::{Target, set_enabled};
use gyr::{Builder, Policy, Sensor};
use serde_json::{Value, json};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[derive(Sensor)]
#[sensor(name = "bench.p64")]
struct P64 {
    a: [u64; 8],
}

struct Plan {
    /// Events per thread per timed run of a capture child.
    events: u64,
    /// Timed runs per capture child.
    runs: usize,
    /// Events per loop for the disabled cost and the timestamp.
    small_events: u64,
    small_rounds: usize,
    throughput_events: u64,
    overhead_steps: u64,
    overhead_reps: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `rounds` rounds (plus one warm-up) of `round`; median ns per event.
fn per_event(events: u64, rounds: usize, mut round: impl FnMut(u64)) -> f64 {
    let mut times = Vec::with_capacity(rounds);
    for r in 0..=rounds {
        let t = Instant::now();
        round(r as u64 * events);
        let ns = t.elapsed().as_nanos() as f64 / events as f64;
        if r > 0 {
            times.push(ns);
        }
    }
    median(times)
}

/// The parts of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    /// Timestamp, the physical floor and the floor with gyr's header, one and two producers.
    Floor,
    /// gyr's sensor: 64 bytes as fields and as an array, 32 and 128 bytes, one producer.
    Enabled,
    /// A disabled sensor.
    Disabled,
    /// gyr with two producers.
    TwoThreads,
    /// `tracing`, one and two producers.
    Tracing,
    /// Tracy, one and two producers.
    Tracy,
    /// puffin, one producer.
    Puffin,
    /// Instructions per event from callgrind.
    Instructions,
    /// The monitor into a trace file and into a sink that discards.
    Throughput,
    /// The overhead on a compute kernel.
    Overhead,
}

/// Runs one capture measurement in a child process; its per-run ns.
fn capture(spec: &Spec) -> anyhow::Result<Vec<f64>> {
    let out = output_within(child_command(spec, None)?, Duration::from_secs(600))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "the {:?} measurement failed ({}): {}",
        spec.peer,
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let line = stdout
        .lines()
        .last()
        .ok_or_else(|| anyhow::anyhow!("the {:?} measurement printed nothing", spec.peer))?;
    let v: Value = serde_json::from_str(line)?;
    let lost = v["lost"].as_u64().unwrap_or(0);
    anyhow::ensure!(
        lost == 0,
        "the {:?} measurement lost {lost} events under Block",
        spec.peer
    );
    let ns: Vec<f64> = v["ns"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    anyhow::ensure!(
        !ns.is_empty(),
        "the {:?} measurement gave no runs",
        spec.peer
    );
    Ok(ns)
}

/// Runs `cmd` to the end and collects its output; kills it after `limit` (a peer that hangs
/// must not hang the benchmark).
pub(crate) fn output_within(
    mut cmd: std::process::Command,
    limit: Duration,
) -> anyhow::Result<std::process::Output> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "a measurement ran longer than {} s and was stopped",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// How `v` is spelled on the command line.
fn value_name(v: &impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

/// The command that runs `spec` in a child (under `wrapper`, such as valgrind, if given).
pub(crate) fn child_command(
    spec: &Spec,
    wrapper: Option<&[String]>,
) -> anyhow::Result<std::process::Command> {
    let exe = std::env::current_exe()?;
    let mut cmd = match wrapper {
        Some(w) => {
            let mut c = std::process::Command::new(&w[0]);
            c.args(&w[1..]).arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    cmd.arg("capture-child")
        .args(["--peer", &value_name(&spec.peer)])
        .args(["--shape", &value_name(&spec.shape)])
        .args(["--threads", &spec.threads.to_string()])
        .args(["--events", &spec.events.to_string()])
        .args(["--runs", &spec.runs.to_string()])
        .args(["--ring", &spec.ring.to_string()]);
    if spec.no_warmup {
        cmd.arg("--no-warmup");
    }
    if spec.peer == Peer::Tracy {
        // Each Tracy client listens on a port of its own, on the loopback interface only.
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        cmd.env("TRACY_PORT", port.to_string())
            .args(["--tracy-port", &port.to_string()]);
    }
    Ok(cmd)
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

/// The kernel recording into the floor's ring instead of a gyr sensor.
fn run_kernel_floor(steps: u64, k: u32, clock: &quanta::Clock) -> Duration {
    let t = Instant::now();
    let mut x = 1.0;
    for i in 0..steps {
        x = kernel(x, k);
        floor::record(
            floor::Layout::Physical,
            clock,
            &[i, x.to_bits(), i, i, i, i, i, i],
        );
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
    /// Sensors on against off: each pair's percentage, and their median.
    pcts: Vec<f64>,
    pct: f64,
    floor_pct: f64,
    events_per_s: f64,
    lost: u64,
}

/// The kernel with sensors on against sensors off (and the floor against off), in pairs made
/// side by side whose order alternates, so that the machine's drift cancels within each pair.
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
    let consumer = floor::Consumer::start();
    let switch = |on: bool| set_enabled(&Target::Type("bench.p64".into()), on);
    let (mut off, mut on, mut fl) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..plan.overhead_reps {
        let steps = plan.overhead_steps;
        if rep % 2 == 0 {
            switch(false);
            off.push(run_kernel(steps, k).as_secs_f64());
            switch(true);
            on.push(run_kernel(steps, k).as_secs_f64());
        } else {
            switch(true);
            on.push(run_kernel(steps, k).as_secs_f64());
            switch(false);
            off.push(run_kernel(steps, k).as_secs_f64());
        }
        switch(false);
        fl.push(run_kernel_floor(steps, k, clock).as_secs_f64());
        rt.flush();
    }
    switch(true);
    drop(consumer);
    let lost = rt.shutdown().lost;
    let pair = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .zip(&off)
            .map(|(x, o)| r2((x / o - 1.0) * 100.0))
            .collect()
    };
    let pcts = pair(&on);
    Ok(Overhead {
        pct: median(pcts.clone()),
        pcts,
        floor_pct: median(pair(&fl)),
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
    let (n, rounds) = (plan.small_events * 100, plan.small_rounds);
    let with = per_event(n, rounds, |b| disabled_loop(b, n));
    let without = per_event(n, rounds, |b| empty_loop(b, n));
    let method = per_event(n, rounds, |b| disabled_method_loop(b, n));
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

/// One capture figure: a child's runs, their median, and the name they go by in the JSON.
struct Figure {
    key: &'static str,
    runs: Vec<f64>,
}

impl Figure {
    fn median(&self) -> f64 {
        median(self.runs.clone())
    }
}

pub(crate) fn run(json: bool, quick: bool, only: &[Part]) -> anyhow::Result<()> {
    let plan = if quick {
        Plan {
            events: 500_000,
            runs: 5,
            small_events: 20_000,
            small_rounds: 5,
            throughput_events: 1_000_000,
            overhead_steps: 200_000,
            overhead_reps: 5,
        }
    } else {
        Plan {
            events: 10_000_000,
            runs: 5,
            small_events: 100_000,
            small_rounds: 31,
            throughput_events: 10_000_000,
            overhead_steps: 1_000_000,
            overhead_reps: 9,
        }
    };
    let want = |p: Part| only.is_empty() || only.contains(&p);
    let mut out = serde_json::Map::new();
    out.insert("bench".into(), json!("sensors"));
    out.insert("events_per_run".into(), json!(plan.events));
    out.insert("runs".into(), json!(plan.runs));
    println!(
        "gyr-bench sensors: each figure the median of {} runs of {} events per producer, in a \
         process of its own, consumers draining concurrently; 64-byte events (4 u64 + 4 f64 \
         fields) unless said",
        plan.runs, plan.events
    );
    let line = |what: &str, v: String| println!("  {what:<52} {v}");

    let spec = |peer: Peer, shape: Shape, threads: usize| Spec {
        peer,
        shape,
        threads,
        events: plan.events,
        runs: plan.runs,
        no_warmup: false,
        ring: 32 << 20,
        tracy_port: 0,
    };
    let mut figures: Vec<Figure> = Vec::new();
    let mut measure = |key: &'static str, spec: Spec| -> anyhow::Result<f64> {
        let runs = capture(&spec)?;
        let f = Figure { key, runs };
        let m = f.median();
        figures.push(f);
        Ok(m)
    };
    let ns = |v: f64| format!("{v:8.2} ns");

    if want(Part::Floor) {
        let clock = quanta::Clock::new();
        let stamp = per_event(plan.small_events, plan.small_rounds, |b| {
            for i in b..b + plan.small_events {
                black_box(i);
                black_box(clock.raw());
            }
        });
        line("reading the timestamp counter alone", ns(stamp));
        out.insert("timestamp_ns".into(), json!(r2(stamp)));
        let f1 = measure("floor_ns", spec(Peer::Floor, Shape::Fields, 1))?;
        let h1 = measure("floor_header_ns", spec(Peer::FloorHeader, Shape::Fields, 1))?;
        let f2 = measure("floor_2t_ns", spec(Peer::Floor, Shape::Fields, 2))?;
        let h2 = measure(
            "floor_header_2t_ns",
            spec(Peer::FloorHeader, Shape::Fields, 2),
        )?;
        line("floor: stamp + payload into cache-aligned slots", ns(f1));
        line("  the same with gyr's 32-byte header", ns(h1));
        line(
            "  two producers: floor / with header",
            format!("{f2:8.2} / {h2:.2} ns"),
        );
    }
    if want(Part::Enabled) {
        let e64 = measure("enabled_64_ns", spec(Peer::Gyr, Shape::Fields, 1))?;
        let a64 = measure("enabled_array_ns", spec(Peer::Gyr, Shape::Array, 1))?;
        let e32 = measure("enabled_32_ns", spec(Peer::Gyr, Shape::Array32, 1))?;
        let e128 = measure("enabled_128_ns", spec(Peer::Gyr, Shape::Array128, 1))?;
        line(
            "gyr sensor, 8 fields / one [u64; 8]",
            format!("{e64:8.2} / {a64:.2} ns"),
        );
        line(
            "gyr sensor, 32 / 128 bytes (arrays)",
            format!("{e32:8.2} / {e128:.2} ns"),
        );
        out.insert(
            "enabled_ns".into(),
            json!({ "32": r2(e32), "64": r2(e64), "64_array": r2(a64), "128": r2(e128) }),
        );
    }
    if want(Part::Disabled) {
        let (macro_ns, method_ns) = disabled_cost(&plan);
        line(
            "gyr sensor, disabled: emit! / .emit()",
            format!("{macro_ns:8.3} / {method_ns:.3} ns"),
        );
        out.insert("disabled_ns".into(), json!(r3(macro_ns)));
        out.insert("disabled_method_ns".into(), json!(r3(method_ns)));
    }
    if want(Part::TwoThreads) {
        let g2 = measure("enabled_2t_ns", spec(Peer::Gyr, Shape::Fields, 2))?;
        let a2 = measure("enabled_2t_array_ns", spec(Peer::Gyr, Shape::Array, 2))?;
        line(
            "gyr, two producers: 8 fields / one array",
            format!("{g2:8.2} / {a2:.2} ns"),
        );
    }
    if want(Part::Tracing) {
        let t1 = measure("tracing_ns", spec(Peer::Tracing, Shape::Fields, 1))?;
        let t2 = measure("tracing_2t_ns", spec(Peer::Tracing, Shape::Fields, 2))?;
        line(
            "tracing: info! into a global registry + layer, 1 / 2",
            format!("{t1:8.2} / {t2:.2} ns"),
        );
    }
    if want(Part::Tracy) {
        if cfg!(feature = "tracy") {
            let t1 = measure("tracy_ns", spec(Peer::Tracy, Shape::Fields, 1))?;
            let t2 = measure("tracy_2t_ns", spec(Peer::Tracy, Shape::Fields, 2))?;
            line(
                "Tracy: a zone, a server reading, 1 / 2 producers",
                format!("{t1:8.2} / {t2:.2} ns"),
            );
        } else {
            line("Tracy", "not built (the `tracy` feature is off)".into());
        }
    }
    if want(Part::Puffin) {
        let p = measure("puffin_ns", spec(Peer::Puffin, Shape::Fields, 1))?;
        line("puffin: scope with 64 bytes of data, profiler on", ns(p));
    }
    let mut runs_json = serde_json::Map::new();
    for f in &figures {
        if !f.key.starts_with("enabled_") || f.key.contains("2t") {
            out.insert(f.key.into(), json!(r2(f.median())));
        }
        runs_json.insert(
            f.key.into(),
            json!(f.runs.iter().map(|v| r2(*v)).collect::<Vec<_>>()),
        );
    }
    if want(Part::Instructions) {
        let counts = callgrind::instructions_per_event(quick)?;
        match &counts {
            Some(c) => line(
                "instructions per event (callgrind): gyr / floor / tracing",
                format!(
                    "{:8} / {} / {}",
                    fmt_count(c.get("gyr")),
                    fmt_count(c.get("floor")),
                    fmt_count(c.get("tracing"))
                ),
            ),
            None => line(
                "instructions per event",
                "not measured: valgrind is not installed (apt-get install valgrind)".into(),
            ),
        }
        if let Some(c) = counts {
            out.insert("instructions_per_event".into(), Value::Object(c));
        }
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
        let per_event = bytes as f64 / plan.throughput_events as f64;
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
        line(
            "  trace file bytes per 64-byte event",
            format!("{per_event:8.2} ({:.3}x the payload)", per_event / 64.0),
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
        out.insert("trace_bytes_per_event".into(), json!(r2(per_event)));
        out.insert(
            "trace_bytes_vs_payload".into(),
            json!(ratio(per_event, 64.0)),
        );
    }
    if want(Part::Overhead) {
        let clock = quanta::Clock::new();
        let k = calibrate_kernel();
        let dir = tempfile::tempdir()?;
        let file = overhead(&plan, &clock, k, Some(&dir.path().join("overhead.gyr")))?;
        let null = overhead(&plan, &clock, k, None)?;
        let spread = |v: &[f64]| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            [lo, hi]
        };
        let [lo, hi] = spread(&file.pcts);
        line(
            "overhead on a compute kernel, into a trace file",
            format!(
                "{:8.2} % (pairs {lo:.2} .. {hi:.2}) at {:.2} M events/s, {} lost",
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
        out.insert("overhead_pct_spread".into(), json!(spread(&file.pcts)));
        runs_json.insert("overhead_pct".into(), json!(file.pcts));
        out.insert("overhead_null_sink_pct".into(), json!(r2(null.pct)));
        out.insert(
            "overhead_null_sink_pct_spread".into(),
            json!(spread(&null.pcts)),
        );
        runs_json.insert("overhead_null_sink_pct".into(), json!(null.pcts));
        out.insert("overhead_floor_pct".into(), json!(r2(file.floor_pct)));
        out.insert(
            "overhead_kernel_events_per_s".into(),
            json!(file.events_per_s.round()),
        );
    }
    let fig = |k: &str| figures.iter().find(|f| f.key == k).map(Figure::median);
    let mut ratios = Vec::new();
    for (key, a, b) in [
        ("ratio_vs_floor", "enabled_64_ns", "floor_ns"),
        ("ratio_vs_floor_header", "enabled_64_ns", "floor_header_ns"),
        ("ratio_array_vs_floor", "enabled_array_ns", "floor_ns"),
        ("ratio_vs_tracing", "enabled_64_ns", "tracing_ns"),
        ("ratio_vs_tracy", "enabled_64_ns", "tracy_ns"),
        ("ratio_vs_puffin", "enabled_64_ns", "puffin_ns"),
        ("ratio_2t_vs_floor", "enabled_2t_ns", "floor_2t_ns"),
        ("ratio_2t_vs_tracing", "enabled_2t_ns", "tracing_2t_ns"),
        ("ratio_2t_vs_tracy", "enabled_2t_ns", "tracy_2t_ns"),
    ] {
        if let (Some(a), Some(b)) = (fig(a), fig(b)) {
            out.insert(key.into(), json!(ratio(a, b)));
            ratios.push(format!("{key} {:.2}", a / b));
        }
    }
    if !ratios.is_empty() {
        println!("  {}", ratios.join(", "));
    }
    out.insert("run_values".into(), Value::Object(runs_json));
    let get = |k: &str| out.get(k).and_then(Value::as_f64);
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
        "faster_than_tracing_2t",
        get("ratio_2t_vs_tracing").map(|v| v < 1.0),
    );
    target("faster_than_tracy", get("ratio_vs_tracy").map(|v| v < 1.0));
    target(
        "faster_than_tracy_2t",
        get("ratio_2t_vs_tracy").map(|v| v < 1.0),
    );
    target(
        "instructions_per_event<=60",
        out.get("instructions_per_event")
            .and_then(|c| c["gyr"].as_f64())
            .map(|v| v <= 60.0),
    );
    target(
        "trace_bytes_vs_payload<=1.15",
        get("trace_bytes_vs_payload").map(|v| v <= 1.15),
    );
    target(
        "monitor_events_per_s>=20M",
        get("monitor_events_per_s").map(|v| v >= 20e6),
    );
    target("overhead_pct<=1", get("overhead_pct").map(|v| v <= 1.0));
    out.insert("targets".into(), Value::Object(targets));
    if json {
        println!("{}", Value::Object(out));
    }
    Ok(())
}

fn fmt_count(v: Option<&Value>) -> String {
    v.and_then(Value::as_f64)
        .map(|v| format!("{v:.0}"))
        .unwrap_or_else(|| "-".into())
}
