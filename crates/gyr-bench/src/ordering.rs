//! `gyr-bench ordering`: Falcon's on-line ordering filter on a synthetic lock-heavy stream of
//! 64 threads, delivered the way per-thread rings and monitors deliver it (each monitor pass
//! takes every thread's new events, thread by thread, in an order of its own).
//!
//! Figures: `events_per_s` through the filter (best of the runs; the median is printed too),
//! against `floor_events_per_s`, the same stream handed on unordered in the same runs,
//! Falcon's `hold_back_ratio`, `peak_held`; and the life-time view's tiles over 2000 threads and
//! 100 M thread events (`timeline_tile_ms_p99`: the hub's share of a frame, drawing 40 rows
//! 1400 pixels wide at zoom levels from the whole run to a millisecond); and the pthread
//! interposer on an uncontended lock/unlock loop in C (`crates/gyr-interpose/bench/lockloop.c`)
//! with and without `libgyr_interpose.so`, against the sensor's own cost for the same two
//! events measured in this process (`sensor_ns_per_event`, which the target's ratio uses; also
//! `sensor_beside_lock_ns_per_event`, the sensor recording a lock's events around a mutex, as
//! `gyr::sync::Mutex` does).

use crate::contention::{Contention, Rng};
use crate::figures::{percentile, r3};
use gyr_trace::{Event, OrderFilter, SyncEvent};
use serde_json::json;
use std::time::Instant;

/// The parts of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    /// The ordering filter on the lock-heavy stream.
    Filter,
    /// The life-time view's tiles over 2000 threads.
    Timeline,
    /// Exports to Perfetto and Chrome JSON.
    Exports,
    /// The pthread interposer against the sensor.
    Interposer,
}

/// Threads of the synthetic program, mutexes they share, and events between monitor passes.
const THREADS: u64 = 64;
const MUTEXES: u64 = 16;
const PASS_EVENTS: usize = 4096;

/// Where a synthetic thread is in its loop: lock, two events of work, unlock.
#[derive(Clone, Copy)]
enum Step {
    Begin,
    Lock,
    Work(u8, u64, u64),
    Unlock(u64, u64),
    Done,
}

/// A causally valid history of about `events` events (thread 0 forks the others, they lock and
/// unlock shared mutexes, thread 0 joins them), as each thread's events with their place in
/// the history.
fn history(events: usize, rng: &mut Rng) -> Vec<Vec<(usize, SyncEvent)>> {
    let mut per_thread: Vec<Vec<(usize, SyncEvent)>> = vec![Vec::new(); THREADS as usize + 1];
    let mut at = 0usize;
    let mut push = |per_thread: &mut Vec<Vec<(usize, SyncEvent)>>, t: u64, e: SyncEvent| {
        per_thread[t as usize].push((at, e));
        at += 1;
    };
    push(&mut per_thread, 0, SyncEvent::ThreadBegin { parent: None });
    for child in 1..=THREADS {
        push(&mut per_thread, 0, SyncEvent::Fork { child });
    }
    let mut steps = vec![Step::Begin; THREADS as usize + 1];
    let mut holder = vec![0u64; MUTEXES as usize];
    let mut count = vec![0u64; MUTEXES as usize];
    let per_child = events / THREADS as usize;
    let mut done = 0;
    while done < THREADS {
        let t = 1 + rng.below(THREADS);
        let i = t as usize;
        let made = per_thread[i].len();
        let (event, next) = match steps[i] {
            Step::Begin => (SyncEvent::ThreadBegin { parent: Some(0) }, Step::Lock),
            Step::Lock if made >= per_child => (SyncEvent::Exit, Step::Done),
            Step::Lock => {
                let m = rng.below(MUTEXES);
                if holder[m as usize] != 0 {
                    continue;
                }
                holder[m as usize] = t;
                count[m as usize] += 1;
                let n = count[m as usize];
                (SyncEvent::MutexAcquire { mutex: m, n }, Step::Work(0, m, n))
            }
            Step::Work(k, m, n) => (
                SyncEvent::Other,
                if k == 1 {
                    Step::Unlock(m, n)
                } else {
                    Step::Work(k + 1, m, n)
                },
            ),
            Step::Unlock(m, n) => {
                holder[m as usize] = 0;
                (SyncEvent::MutexRelease { mutex: m, n }, Step::Lock)
            }
            Step::Done => continue,
        };
        if matches!(next, Step::Done) {
            done += 1;
        }
        steps[i] = next;
        push(&mut per_thread, t, event);
    }
    for joined in 1..=THREADS {
        push(&mut per_thread, 0, SyncEvent::JoinEnd { joined });
    }
    per_thread
}

/// The timed part: every event through a filter that may hold a million (callgrind counts this
/// function alone: `--toggle-collect=*filter_all*`). The input's memory is given back after the
/// timing, by the caller: freeing it is not the filter's work.
#[inline(never)]
fn filter_all(input: &mut Vec<Event<u64>>) -> (OrderFilter<u64>, usize) {
    let mut filter = OrderFilter::new(1 << 20);
    let mut released = 0usize;
    for e in input.drain(..) {
        filter.push(e, &mut |e| {
            released += 1;
            std::hint::black_box(&e);
        });
    }
    filter.finish(&mut |_| released += 1);
    (filter, released)
}

/// The floor, timed as [`filter_all`] is: every event handed on as it comes, in no order (what
/// reading the input and handing each event to the caller cost without the filter).
#[inline(never)]
fn floor_all(input: &mut Vec<Event<u64>>) -> usize {
    let mut released = 0usize;
    let mut out = |e: Event<u64>| {
        released += 1;
        std::hint::black_box(&e);
    };
    for e in input.drain(..) {
        out(std::hint::black_box(e));
    }
    released
}

/// The history as monitors deliver it: every `PASS_EVENTS` events of the history, a pass takes
/// each thread's new events, visiting the threads in a shuffled order.
fn delivered(per_thread: &[Vec<(usize, SyncEvent)>], rng: &mut Rng) -> Vec<Event<u64>> {
    let total: usize = per_thread.iter().map(Vec::len).sum();
    let mut next = vec![0usize; per_thread.len()];
    let mut order: Vec<usize> = (0..per_thread.len()).collect();
    let mut out = Vec::with_capacity(total);
    let mut pass_end = 0;
    while out.len() < total {
        pass_end += PASS_EVENTS;
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for &t in &order {
            let events = &per_thread[t];
            while next[t] < events.len() && events[next[t]].0 < pass_end {
                let (at, kind) = events[next[t]];
                out.push(Event {
                    thread: t as u64,
                    kind,
                    data: at as u64,
                });
                next[t] += 1;
            }
        }
    }
    out
}

/// The life-time view's data for `threads` threads taking turns on 64 mutexes
/// ([`Contention`]), `events` thread events in all; then the time of `tiles` random viewports.
/// Returns (build seconds, tile ms per viewport).
fn timeline_tiles(threads: u64, events: u64, tiles: usize, rng: &mut Rng) -> (f64, Vec<f64>) {
    let mut t = gyr_trace::Timeline::new();
    for s in crate::contention::schemas() {
        t.add_schema(&s);
    }
    let mut program = Contention::new(threads, rng.next());
    let start = Instant::now();
    let rounds = program.rounds(events);
    for r in 0..rounds {
        program.round(r, |thread, ts, type_id, payload| {
            t.push(thread, ts, 0, type_id, payload)
        });
    }
    let build = start.elapsed().as_secs_f64();
    let end = rounds * crate::contention::ROUND_NS;
    let mut ms = Vec::with_capacity(tiles);
    for _ in 0..tiles {
        // Zoom levels spread evenly in log scale, from the whole run to 1 ms.
        let span = (end as f64 * (1e6 / end as f64).powf(rng.below(1000) as f64 / 999.0)) as u64;
        let t0 = rng.below(end.saturating_sub(span).max(1));
        let row0 = rng.below(threads - 40) as usize;
        let s = Instant::now();
        let tile = t.tile(row0..row0 + 40, t0, t0 + span.max(1), 1400, 500);
        std::hint::black_box(&tile);
        ms.push(s.elapsed().as_secs_f64() * 1e3);
    }
    (build, ms)
}

/// The sensor's own cost of one thread event (`gyr.mutex.acquire`'s payload), ns, in this
/// process with a runtime whose sink discards: best of `runs` loops of `n` events, each under a
/// runtime of its own (where the scheduler puts the runtime's monitor thread beside this one
/// lasts the runtime's life, and one placement made every loop of a run 2-4x slower), since
/// noise on a shared machine only ever adds time.
pub(crate) fn sensor_ns(n: u64, runs: usize) -> anyhow::Result<f64> {
    let mut per = Vec::new();
    for _ in 0..runs {
        let rt = discarding_runtime()?;
        let start = Instant::now();
        for i in 0..n {
            gyr::emit!(gyr::sync::events::MutexAcquire { mutex: 7, n: i });
        }
        per.push(start.elapsed().as_secs_f64() * 1e9 / n as f64);
        rt.shutdown();
    }
    Ok(best(&per))
}

/// A runtime for the sensor's own figures: no server, no signal handlers, a sink that discards.
pub(crate) fn discarding_runtime() -> anyhow::Result<gyr::Runtime> {
    Ok(gyr::Builder::new()
        .serve(false)
        .handle_signals(false)
        .sink(gyr::CallbackSink::new(|_: &gyr::Batch| {}))
        .start()?)
}

/// The least of `values` (NaN for none).
pub(crate) fn best(values: &[f64]) -> f64 {
    values.iter().copied().reduce(f64::min).unwrap_or(f64::NAN)
}

/// The sensor's cost per event where a lock's events are recorded: a loop that locks a mutex,
/// records its acquisition and release, and unlocks, against the same loop unrecorded: what
/// `gyr::sync::Mutex` pays per event, the sensor's work overlapping the lock's. ns per event,
/// from the best of `runs` loops of `n` pairs each way, each run under a runtime of its own.
pub(crate) fn sensor_beside_lock_ns(n: u64, runs: usize) -> anyhow::Result<f64> {
    let lock = std::sync::Mutex::new(0u64);
    let (mut alone, mut recorded) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let rt = discarding_runtime()?;
        let start = Instant::now();
        for _ in 0..n {
            *lock.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        }
        alone.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        for i in 0..n {
            let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
            gyr::emit!(gyr::sync::events::MutexAcquire { mutex: 7, n: i });
            *g += 1;
            gyr::emit!(gyr::sync::events::MutexRelease { mutex: 7, n: i });
            drop(g);
        }
        recorded.push(start.elapsed().as_secs_f64());
        rt.shutdown();
    }
    std::hint::black_box(&lock);
    Ok((best(&recorded) - best(&alone)) * 1e9 / n as f64 / 2.0)
}

/// Where `libgyr_interpose.so` is: `GYR_INTERPOSE_LIB`, or built beside this benchmark (it
/// depends on gyr-interpose so that building it builds the library).
pub(crate) fn interpose_lib() -> Option<std::path::PathBuf> {
    preload_lib("GYR_INTERPOSE_LIB", "libgyr_interpose.so")
}

/// A preloaded library: the variable `var` names it, or it is built beside this benchmark.
pub(crate) fn preload_lib(var: &str, file: &str) -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(file), dir.join("deps").join(file)]
        .into_iter()
        .filter(|p| p.exists())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// The events a trace's end block says were lost (dropped on full rings).
pub(crate) fn trace_lost(path: &std::path::Path) -> anyhow::Result<u64> {
    let file = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut reader = gyr_core::TraceReader::new(std::io::BufReader::new(file))?;
    let mut lost = None;
    reader.for_each_item(|item| {
        if let gyr_core::trace::Item::End(e) = item {
            lost = Some(e.lost);
        }
    });
    lost.ok_or_else(|| anyhow::anyhow!("{}: no end block", path.display()))
}

/// `lockloop`'s CPU ns per lock/unlock pair, best of `runs`, with `preload` or without.
fn lockloop(
    bin: &std::path::Path,
    preload: Option<&std::path::Path>,
    n: u64,
    runs: usize,
) -> anyhow::Result<f64> {
    let mut per = Vec::new();
    for _ in 0..runs {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg(n.to_string())
            .env_remove("LD_PRELOAD")
            .env("GYR_SERVE", "0");
        if let Some(lib) = preload {
            cmd.env("LD_PRELOAD", lib);
        }
        let out = cmd.output()?;
        anyhow::ensure!(
            out.status.success(),
            "lockloop failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let j: serde_json::Value = serde_json::from_str(line.trim())?;
        per.push(j["cpu_ns_per_pair"].as_f64().unwrap_or(f64::NAN));
    }
    Ok(best(&per))
}

/// The interposer's figures: (with, without, sensor ns per event, sensor beside a lock ns per
/// event), or why they are missing.
fn interposer(quick: bool) -> anyhow::Result<(f64, f64, f64, f64)> {
    let lib = interpose_lib().ok_or_else(|| {
        anyhow::anyhow!("libgyr_interpose.so not found: build it (cargo build --release -p gyr-bench builds it) or set GYR_INTERPOSE_LIB")
    })?;
    let dir = tempfile::tempdir()?;
    let bin = dir.path().join("lockloop");
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../gyr-interpose/bench/lockloop.c");
    let cc = std::process::Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run cc ({e}): install a C compiler (Debian: gcc)"))?;
    anyhow::ensure!(cc.success(), "cc could not build {}", src.display());
    let (n, runs) = if quick {
        (1_000_000, 3)
    } else {
        (10_000_000, 7)
    };
    // Alternately, so that a busy spell of the machine falls on both sides.
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        without.push(lockloop(&bin, None, n, 1)?);
        with.push(lockloop(&bin, Some(&lib), n, 1)?);
    }
    let (without, with) = (best(&without), best(&with));
    let sensor = sensor_ns(n, runs)?;
    let beside = sensor_beside_lock_ns(n, runs)?;
    Ok((with, without, sensor, beside))
}

/// A sensor event of the program's own, as the exports' counters carry it.
#[derive(gyr::Sensor)]
struct Work {
    step: u64,
    load: f64,
}

/// Records `per_thread` events on each of 4 threads (4 in 5 `work`, the rest thread events of
/// a shared gyr::sync::Mutex) into a trace file, then times exporting it as Perfetto and as
/// Chrome JSON into nothing; returns records/s for each (best of `runs`) and the records.
fn exports(per_thread: u64, runs: usize) -> anyhow::Result<(f64, f64, u64)> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("export.gyr");
    let rt = gyr::Builder::new()
        .serve(false)
        .handle_signals(false)
        .ring_capacity(8 << 20)
        .trace_file(&path)
        .start()?;
    let lock = std::sync::Arc::new(gyr::sync::Mutex::new(0u64));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let lock = lock.clone();
            gyr::thread::spawn(move || {
                for step in 0..per_thread / 6 {
                    for k in 0..4 {
                        gyr::emit!(Work {
                            step,
                            load: (step + k) as f64 * 0.5
                        });
                    }
                    *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    rt.shutdown();
    let mut rates = [0.0f64; 2];
    let mut records = 0;
    for _ in 0..runs {
        for (i, format) in [gyr_trace::Format::Perfetto, gyr_trace::Format::Chrome]
            .into_iter()
            .enumerate()
        {
            let reader =
                gyr_core::TraceReader::new(std::io::BufReader::new(std::fs::File::open(&path)?))?;
            let start = Instant::now();
            let report = gyr_trace::export(
                reader,
                format,
                std::io::sink(),
                gyr_trace::Options::default(),
            )?;
            let rate = report.records as f64 / start.elapsed().as_secs_f64();
            rates[i] = rates[i].max(rate);
            records = report.records;
        }
    }
    Ok((rates[0], rates[1], records))
}

pub(crate) fn run(json: bool, quick: bool, only: &[Part]) -> anyhow::Result<()> {
    let want = |p: Part| only.is_empty() || only.contains(&p);
    // Each part's figures, in the JSON in the order they have always had there.
    let mut filter = serde_json::Map::new();
    let mut timeline = serde_json::Map::new();
    let mut out = serde_json::Map::new();
    out.insert("bench".into(), json!("ordering"));
    if want(Part::Filter) {
        filter_figures(quick, &mut Rng(0x6779_7221), &mut filter)?;
    }
    if want(Part::Timeline) {
        // A generator of its own, so that the part alone sees the same program and viewports.
        timeline_figures(quick, &mut Rng(0x6779_7222), &mut timeline);
    }
    if want(Part::Exports) {
        let (perfetto, chrome, exported) = exports(if quick { 300_000 } else { 1_500_000 }, 3)?;
        println!(
            "exports of a {exported}-record trace: Perfetto {:.1} M records/s (target >= 10 M), Chrome JSON {:.1} M/s",
            perfetto / 1e6,
            chrome / 1e6
        );
        out.insert(
            "export_perfetto_events_per_s".into(),
            json!(perfetto.round()),
        );
        out.insert("export_chrome_events_per_s".into(), json!(chrome.round()));
        out.insert("export_events_target".into(), json!(10e6));
    }
    if want(Part::Interposer) {
        interposer_figures(quick, &mut out);
    }
    out.extend(timeline);
    out.extend(filter);
    if json {
        println!("{}", serde_json::Value::Object(out));
    }
    Ok(())
}

/// The ordering filter's figures: events/s (best and median of the runs), hold-back ratio,
/// events held at most.
fn filter_figures(
    quick: bool,
    rng: &mut Rng,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let events = if quick { 1_000_000 } else { 10_000_000 };
    let runs = if quick { 3 } else { 5 };
    let per_thread = history(events, rng);
    let stream = delivered(&per_thread, rng);
    let n = stream.len();
    println!(
        "ordering filter: {n} events of {} threads on {MUTEXES} mutexes, a monitor pass every {PASS_EVENTS} events",
        THREADS + 1
    );
    let (mut rates, mut floors) = (Vec::new(), Vec::new());
    let mut stats = None;
    for run in 0..runs {
        let mut input = stream.clone();
        let mut last_at = vec![None::<u64>; THREADS as usize + 1];
        let start = Instant::now();
        let (filter, released) = filter_all(&mut input);
        let secs = start.elapsed().as_secs_f64();
        drop(input);
        anyhow::ensure!(
            released == n,
            "the filter released {released} of {n} events"
        );
        let s = filter.stats();
        anyhow::ensure!(s.forced == 0, "the filter forced {} releases", s.forced);
        if run == 0 {
            // Check the order once, outside the timing: per thread, history order.
            let mut filter = OrderFilter::new(1 << 20);
            let mut bad = 0;
            for e in stream.clone() {
                filter.push(e, &mut |e| {
                    let t = e.thread as usize;
                    if last_at[t].is_some_and(|p| p > e.data) {
                        bad += 1;
                    }
                    last_at[t] = Some(e.data);
                });
            }
            anyhow::ensure!(bad == 0, "{bad} events out of their thread's order");
        }
        let rate = n as f64 / secs;
        // The floor on the same stream, right after, so that both see the same machine.
        let mut input = stream.clone();
        let start = Instant::now();
        let passed = floor_all(&mut input);
        let floor_secs = start.elapsed().as_secs_f64();
        drop(input);
        anyhow::ensure!(passed == n, "the floor passed {passed} of {n} events");
        println!(
            "  run {}: {:.1} M events/s (floor {:.1} M)",
            run + 1,
            rate / 1e6,
            n as f64 / floor_secs / 1e6
        );
        rates.push(rate);
        floors.push(n as f64 / floor_secs);
        stats = Some(s);
    }
    let s = stats.expect("at least one run");
    let best = rates.iter().cloned().fold(0.0, f64::max);
    let median = percentile(&mut rates.clone(), 0.5);
    let floor = floors.iter().cloned().fold(0.0, f64::max);
    println!(
        "events_per_s {:.1} M (median {:.1} M; target >= 30 M; the floor, events handed on unordered, {:.1} M: {:.2} of it), hold-back ratio {:.3}, peak held {}",
        best / 1e6,
        median / 1e6,
        floor / 1e6,
        best / floor,
        s.hold_back_ratio(),
        s.peak_held
    );
    out.insert("events".into(), json!(n));
    out.insert("threads".into(), json!(THREADS + 1));
    out.insert("events_per_s".into(), json!(best.round()));
    out.insert("events_per_s_median".into(), json!(median.round()));
    out.insert("floor_events_per_s".into(), json!(floor.round()));
    out.insert("ratio_vs_floor".into(), json!(r3(best / floor)));
    out.insert("events_per_s_target".into(), json!(30e6));
    out.insert("hold_back_ratio".into(), json!(r3(s.hold_back_ratio())));
    out.insert("peak_held".into(), json!(s.peak_held));
    Ok(())
}

/// The life-time view's figures: how fast it was built, and its tiles' p50 and p99.
fn timeline_figures(
    quick: bool,
    rng: &mut Rng,
    out: &mut serde_json::Map<String, serde_json::Value>,
) {
    let (threads, timeline_events) = if quick {
        (2000, 6_000_000)
    } else {
        (2000, 100_000_000)
    };
    println!("life-time view: {threads} threads, {timeline_events} thread events");
    let (build_s, mut tile_ms) = timeline_tiles(threads, timeline_events, 300, rng);
    let tile_p50 = percentile(&mut tile_ms, 0.5);
    let tile_p99 = percentile(&mut tile_ms, 0.99);
    println!(
        "  built in {build_s:.1} s ({:.1} M events/s); a viewport of 40 rows x 1400 px: p50 {tile_p50:.2} ms, p99 {tile_p99:.2} ms (the hub's share of a 16 ms frame)",
        timeline_events as f64 / build_s / 1e6
    );
    out.insert("timeline_threads".into(), json!(threads));
    out.insert("timeline_events".into(), json!(timeline_events));
    out.insert(
        "timeline_events_per_s".into(),
        json!((timeline_events as f64 / build_s).round()),
    );
    out.insert("timeline_tile_ms_p50".into(), json!(r3(tile_p50)));
    out.insert("timeline_tile_ms_p99".into(), json!(r3(tile_p99)));
}

/// The interposer's figures, `NaN` (null in the JSON) when it could not be measured.
fn interposer_figures(quick: bool, out: &mut serde_json::Map<String, serde_json::Value>) {
    let inter = interposer(quick);
    match &inter {
        Ok((with, without, sensor, beside)) => println!(
            "pthread interposer: a lock/unlock pair {with:.1} ns recorded, {without:.1} ns alone; it adds {:.1} ns per event against the sensor's own {sensor:.1} ns ({:.2}x; target <= 2x); the sensor beside a lock in this process: {beside:.1} ns per event",
            (with - without) / 2.0,
            (with - without) / 2.0 / sensor
        ),
        Err(e) => println!("pthread interposer: not measured: {e}"),
    }
    let (with, without, sensor, beside) = inter
        .as_ref()
        .map_or((f64::NAN, f64::NAN, f64::NAN, f64::NAN), |v| *v);
    out.insert("interposer_ns_per_lock".into(), json!(r3(with)));
    out.insert("uninstrumented_ns_per_lock".into(), json!(r3(without)));
    out.insert("sensor_ns_per_event".into(), json!(r3(sensor)));
    out.insert("sensor_beside_lock_ns_per_event".into(), json!(r3(beside)));
    out.insert(
        "interposer_ns_per_event_added".into(),
        json!(r3((with - without) / 2.0)),
    );
    out.insert(
        "ratio_interposer_vs_sensor".into(),
        json!(r3((with - without) / 2.0 / sensor)),
    );
    out.insert("ratio_target".into(), json!(2.0));
}
