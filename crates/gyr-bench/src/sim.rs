//! `gyr-bench sim`: trace-driven prediction (gyr-sim) and the MPI interposer.
//!
//! - `sim_events_per_s`: the replay's speed on a synthetic run (64 ranks, halo exchange on a
//!   ring with an allreduce every 10 steps), best of 3;
//! - `interposer_ns_per_call`: a 0-byte `MPI_Send`/`MPI_Recv` ping-pong on two ranks with
//!   `libgyr_mpi.so` preloaded, against `uninstrumented_ns_per_call` without it in the same
//!   run (round trip / 4: four calls on its critical path; runs with and without alternate,
//!   and the best of each counts, the least disturbed on a shared machine), and the sensor's
//!   own cost for the same three events a call records (`gyr.mpi.begin`, its message,
//!   `gyr.mpi.end`), emitted here as the interposer emits them, with a sink that discards, one
//!   loop between each round of runs and the best counting
//!   (`ratio_interposer_vs_sensor`, the target's: the interposer with its trace file against
//!   it; `ratio_no_trace_vs_sensor`: the interposer's runs without a file). Beside them, what
//!   the file costs the sensor: the same events into a trace file, as processor time with the
//!   monitor's encoding and writing (`sensor_ns_per_call_traced`,
//!   `ratio_interposer_vs_sensor_traced`; processor time against the interposer's wall-clock
//!   time, so a guide to where the added cost goes, not the target's figure). Where the runs
//!   disagree so much that the library seems to cost nothing or less (two ranks spinning on a
//!   machine busy with other work), the ratio is left out and the JSON says why, rather than a
//!   target met by noise; `interposer_events_lost`, the most events a run with the library dropped
//!   on full rings (from the ranks' traces): a run that drops is cheaper than one that records
//!   every call, so the target counts as met only with none lost;
//! - prediction errors: each example of examples/mpi traced on shared memory, predicted on a
//!   model calibrated here, and compared with the example run again on the same network
//!   (`same_network`) and on loopback TCP (`across_networks`), three jobs of each and their
//!   medians compared: whole-run error per example, median and worst. Needs Open MPI (`mpicc`, `mpirun`); without it the errors are missing
//!   and the JSON says why.
//!
//! `--only replay|interposer|validation` (repeatable) runs only those parts: the interposer's
//! figure takes about a minute, the validation many, and a quiet minute is easier to find.

use crate::figures::{median, r3};
use crate::ordering::{best, discarding_runtime, preload_lib, sensor_ns, trace_lost};
use gyr::Sensor;
use gyr_sim::{Channel, LogGops, Network, RankProgram, mpi};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The parts of the benchmark, for `--only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    /// The replay's speed on the synthetic run.
    Replay,
    /// The MPI interposer against the sensor.
    Interposer,
    /// Predictions of examples/mpi against measured runs.
    Validation,
}

/// A synthetic run: `ranks` on a ring, `steps` of two exchanges and 10 µs of computing, an
/// allreduce every 10 steps.
fn synthetic(ranks: u32, steps: u32) -> Vec<RankProgram> {
    let members: Vec<u32> = (0..ranks).collect();
    (0..ranks)
        .map(|r| {
            let mut p = RankProgram::new(r);
            let ch = Channel::User { comm: 0, tag: 1 };
            let (left, right) = ((r + ranks - 1) % ranks, (r + 1) % ranks);
            for s in 0..steps {
                p.compute(10_000);
                p.sendrecv(right, 8192, left, ch);
                p.sendrecv(left, 8192, right, ch);
                if s % 10 == 9 {
                    let part = gyr_sim::Part {
                        kind: gyr_sim::Collective::Allreduce,
                        comm: 0,
                        members: &members,
                        root: 0,
                        seq: u64::from(s / 10),
                        sent: 8,
                        received: 8,
                    };
                    gyr_sim::collective::expand(&mut p, &part).expect("a member");
                }
            }
            p
        })
        .collect()
}

/// The replay's events per second, best of 3.
fn replay_rate(quick: bool) -> (f64, u64) {
    let programs = synthetic(64, if quick { 200 } else { 2000 });
    let network = Network::single(LogGops::SHARED_MEMORY);
    let mut best = 0.0f64;
    let mut events = 0;
    for _ in 0..3 {
        let p = programs.clone();
        let start = Instant::now();
        let prediction = gyr_sim::simulate(p, &network).expect("a valid program");
        let rate = prediction.events as f64 / start.elapsed().as_secs_f64();
        events = prediction.events;
        best = best.max(rate);
    }
    (best, events)
}

/// `gyr.mpi.begin` as the interposer defines it (crates/gyr-interpose-mpi/src/events.rs; not
/// linked here, since it exports the MPI functions).
#[derive(Sensor)]
#[sensor(name = "gyr.mpi.begin")]
struct MpiBegin {
    call: &'static str,
}

/// `gyr.mpi.end`, likewise.
#[derive(Sensor)]
#[sensor(name = "gyr.mpi.end")]
struct MpiEnd {
    call: &'static str,
    ret: i32,
}

/// What the interposer records for the `i`-th `MPI_Send`: its begin, `gyr.msg.send`, its end.
#[inline(always)]
fn record_send(i: u64) {
    gyr::emit(&MpiBegin { call: "MPI_Send" });
    gyr::msg::send_on(0, 1, (i & 0xff) as i32, 0);
    gyr::emit(&MpiEnd {
        call: "MPI_Send",
        ret: 0,
    });
}

/// The sensor's own cost of what one `MPI_Send` records (its begin, `gyr.msg.send`, its end),
/// ns, in this process with a runtime whose sink discards: one loop of `n` calls under a
/// runtime of its own (see [`sensor_ns`]). [`interposer`] runs one between its rounds and keeps
/// the best, as it keeps the best of the interposer's runs.
fn call_sensor_ns(n: u64) -> anyhow::Result<f64> {
    let rt = discarding_runtime()?;
    let start = Instant::now();
    for i in 0..n {
        record_send(i);
    }
    let per = start.elapsed().as_secs_f64() * 1e9 / n as f64;
    rt.shutdown();
    Ok(per)
}

/// Calls per burst of [`call_sensor_traced_ns`]: about 400 KiB of a rank's 4 MiB ring, written
/// in half a millisecond and drained in less than the millisecond's sleep that follows.
const BURST: u64 = 4096;

/// The sensor's own cost of what one `MPI_Send` records, as [`call_sensor_ns`], but into a
/// trace file as a rank writes it (`RING_CAPACITY` in crates/gyr-interpose-mpi/src/lib.rs), and
/// counted as the processor time the recording takes, the emitting thread's and the monitor's
/// that encodes and writes the file, until the runtime has shut down with the file complete.
/// When every core runs a rank, a rank's monitor works on the ranks' cores, so this is at most
/// what the file can take from them; here the monitor has a core of its own, so wall-clock
/// time would not show it. The loop emits in bursts of [`BURST`] calls (a tenth of the ring)
/// and sleeps between them, which takes no processor time, so that the monitor keeps up: the
/// emitter alone outruns it, and a thread waiting for room in a full ring first spins and
/// yields, which would count the wait as the sensor's cost. ns per call, best of `runs` loops of `n` calls, and the most events a
/// loop lost (none unless the ring filled all the same: it blocks rather than drops).
fn call_sensor_traced_ns(n: u64, runs: usize) -> anyhow::Result<(f64, u64)> {
    use nix::time::{ClockId, clock_gettime};
    let cpu_ns = || -> anyhow::Result<f64> {
        let t = clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID)?;
        Ok(t.tv_sec() as f64 * 1e9 + t.tv_nsec() as f64)
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("sensor.gyr");
    let mut per = Vec::new();
    let mut lost = 0;
    for _ in 0..runs {
        let rt = gyr::Builder::new()
            .serve(false)
            .handle_signals(false)
            .policy(gyr::Policy::Block)
            .ring_capacity(4 << 20)
            .trace_file(&path)
            .start()?;
        let start = cpu_ns()?;
        for i in 0..n {
            record_send(i);
            if i % BURST == BURST - 1 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        rt.shutdown();
        per.push((cpu_ns()? - start) / n as f64);
        lost = lost.max(trace_lost(&path)?);
    }
    Ok((best(&per), lost))
}

/// The examples measured: (name, source, compiler, arguments).
fn examples(quick: bool) -> Vec<(&'static str, &'static str, &'static str, Vec<&'static str>)> {
    let all = vec![
        ("halo", "halo.c", "mpicc", vec!["200", "8192", "200000"]),
        ("halo_f", "halo.f90", "mpif90", vec!["200", "1024"]),
        (
            "alltoall",
            "alltoall.c",
            "mpicc",
            vec!["50", "16384", "500000"],
        ),
        (
            "master_worker",
            "master_worker.c",
            "mpicc",
            vec!["200", "100000"],
        ),
        (
            "pipeline",
            "pipeline.c",
            "mpicc",
            vec!["100", "65536", "300000"],
        ),
        (
            "overlap",
            "overlap.c",
            "mpicc",
            vec!["200", "32768", "300000"],
        ),
    ];
    if quick {
        all.into_iter()
            .filter(|e| e.0 == "halo" || e.0 == "overlap")
            .map(|(n, s, c, _)| (n, s, c, vec!["20"]))
            .collect()
    } else {
        all
    }
}

/// The whole run's time a set of traces measured, and what `network` predicts from `traced`.
fn predict(traced: &[PathBuf], network: &Network) -> anyhow::Result<(u64, u64)> {
    let loaded = gyr_sim::load(traced)?;
    let measured = loaded
        .ranks
        .iter()
        .map(|r| r.measured.span_ns)
        .max()
        .unwrap_or(0);
    let programs = loaded.ranks.iter().map(|r| r.program.clone()).collect();
    let p = gyr_sim::simulate(programs, network)?;
    anyhow::ensure!(
        p.unfinished.is_empty(),
        "the replay could not finish: {:?}",
        p.unfinished
    );
    Ok((measured, p.makespan_ns))
}

fn measured(traces: &[PathBuf]) -> anyhow::Result<u64> {
    Ok(gyr_sim::load(traces)?
        .ranks
        .iter()
        .map(|r| r.measured.span_ns)
        .max()
        .unwrap_or(0))
}

/// A calibrated path's LogGOPS line, with how many sizes it measured (not the sizes).
fn line(path: &LogGops) -> serde_json::Value {
    let mut line = path.clone();
    let sizes = std::mem::take(&mut line.measured).len();
    let mut v = json!(line);
    v["measured_sizes"] = json!(sizes);
    v
}

fn pct(predicted: u64, actual: u64) -> f64 {
    (predicted as f64 - actual as f64) / actual.max(1) as f64 * 100.0
}

/// An example's whole-run error: (name, same network %, shared memory to TCP %).
type ExampleError = (String, f64, f64);

/// Jobs of each kind per example (traced on shared memory, run again there, run on TCP): an
/// example runs for tens of milliseconds, and one job of a kind can differ from the next by
/// 10 % or more on a shared machine, the same network's runs as much as the other's.
const JOBS: usize = 3;

/// Per example its errors, the median prediction of [`JOBS`] traced jobs against the median of
/// as many measured, with the models (shared memory, TCP).
fn errors(quick: bool, np: u32) -> anyhow::Result<(Vec<ExampleError>, LogGops, LogGops)> {
    let lib = preload_lib("GYR_MPI_LIB", "libgyr_mpi.so").ok_or_else(|| {
        anyhow::anyhow!("libgyr_mpi.so not found: cargo build --release -p gyr-bench builds it, or set GYR_MPI_LIB")
    })?;
    let reps = if quick { 3 } else { 15 };
    let jobs = if quick { 1 } else { JOBS };
    let measure = |btl| {
        mpi::measure(&mpi::Measure {
            btl,
            max_bytes: if quick { 65536 } else { 4 << 20 },
            reps,
            mpirun: "mpirun",
            mpicc: "mpicc",
        })
        .map(|m| m.0)
        .map_err(|e| anyhow::anyhow!("{e}"))
    };
    let shm = measure("vader")?;
    let tcp = measure("tcp")?;
    let dir = tempfile::tempdir()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mpi");
    let mut out = Vec::new();
    for (name, source, compiler, args) in examples(quick) {
        let bin = match mpi::compile(compiler, &src.join(source), dir.path(), name) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("  {name}: skipped ({e})");
                continue;
            }
        };
        let mut program = vec![bin.into_os_string()];
        program.extend(args.iter().map(std::ffi::OsString::from));
        let run = |btl: &str, tag: &str| {
            mpi::traced_run(
                "mpirun",
                &lib,
                np,
                btl,
                dir.path(),
                &format!("{name}-{tag}"),
                &program,
            )
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))
        };
        // Jobs alternate (traced, again, on TCP, then round again) so that a slow spell of the
        // machine falls on all three kinds rather than on one.
        let (mut same_pred, mut tcp_pred, mut again, mut on_tcp) = (vec![], vec![], vec![], vec![]);
        for job in 0..jobs {
            let traced = run("vader", &format!("a{job}"))?;
            same_pred.push(predict(&traced, &Network::single(shm.clone()))?.1 as f64);
            tcp_pred.push(predict(&traced, &Network::single(tcp.clone()))?.1 as f64);
            again.push(measured(&run("vader", &format!("b{job}"))?)? as f64);
            on_tcp.push(measured(&run("tcp", &format!("c{job}"))?)? as f64);
        }
        let m = |v: &mut Vec<f64>| median(v) as u64;
        let same = pct(m(&mut same_pred), m(&mut again));
        let across = pct(m(&mut tcp_pred), m(&mut on_tcp));
        eprintln!("  {name:<14} same network {same:+6.1} %   shared memory -> TCP {across:+6.1} %");
        out.push((name.to_owned(), same, across));
    }
    Ok((out, shm, tcp))
}

/// Events the ranks' traces in `dir` (`pp.0.gyr`, `pp.1.gyr`) say were lost: a run that
/// dropped events ran cheaper than one that recorded them all, so its time is not the
/// interposer's cost.
fn lost_in(dir: &Path) -> anyhow::Result<u64> {
    (0..2).try_fold(0, |sum, rank| {
        Ok(sum + trace_lost(&dir.join(format!("pp.{rank}.gyr")))?)
    })
}

/// The interposer's figures, ns per call (a round trip / 4).
struct Interposer {
    /// With the library and each rank's trace file, and without the library: best of the runs.
    bests: (f64, f64),
    /// The same, medians.
    medians: (f64, f64),
    /// With the library and no trace file (its monitors drain the rings into no sink): best.
    no_trace: f64,
    /// The most events a run with the library lost.
    lost: u64,
    /// The sensor's own cost of a call's three events ([`call_sensor_ns`]), measured once
    /// between each round of runs: best.
    sensor_per_call: f64,
}

/// The interposer's figures (see [`Interposer`]) from alternating runs, with the sensor's own
/// cost measured between them. Measured only after the runs, the sensor's figure once came out
/// three times its usual (the monitor draining its ring shared a core with whatever the jobs
/// left behind), and the ratio under the target with it: spread over the same minute as the
/// runs, its best is taken from the same spells as theirs.
fn interposer(quick: bool) -> anyhow::Result<Interposer> {
    let lib = preload_lib("GYR_MPI_LIB", "libgyr_mpi.so")
        .ok_or_else(|| anyhow::anyhow!("libgyr_mpi.so not found"))?;
    let dir = tempfile::tempdir()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gyr-interpose-mpi/bench/pingpong0.c");
    let bin =
        mpi::compile("mpicc", &src, dir.path(), "pingpong0").map_err(|e| anyhow::anyhow!("{e}"))?;
    let n = if quick { 20_000 } else { 200_000 };
    let runs = if quick { 3 } else { 7 };
    // `trace`: write each rank's trace file (with the library only).
    let once = |preload: bool, trace: bool| -> anyhow::Result<f64> {
        let mut cmd = mpi::mpirun("mpirun");
        cmd.args(["-np", "2"]).args(mpi::btl_args("vader"));
        cmd.env_remove("GYR_TRACE");
        if preload {
            cmd.args(["-x", "LD_PRELOAD"]).env("LD_PRELOAD", &lib);
            if trace {
                cmd.args(["-x", "GYR_TRACE"])
                    .env("GYR_TRACE", dir.path().join("pp.%r.gyr"));
            }
        } else {
            cmd.env_remove("LD_PRELOAD");
        }
        let out = cmd.arg(&bin).arg(n.to_string()).output()?;
        anyhow::ensure!(
            out.status.success(),
            "pingpong0 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(line.trim())?;
        Ok(v["ns_per_round_trip"].as_f64().unwrap_or(f64::NAN) / 4.0)
    };
    let sensor_calls = if quick { 1_000_000 } else { 5_000_000 };
    let (mut with, mut without, mut no_trace, mut lost) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut sensor = Vec::new();
    for _ in 0..runs {
        without.push(once(false, false)?);
        with.push(once(true, true)?);
        lost = lost.max(lost_in(dir.path())?);
        no_trace.push(once(true, false)?);
        sensor.push(call_sensor_ns(sensor_calls)?);
    }
    Ok(Interposer {
        bests: (best(&with), best(&without)),
        medians: (median(&mut with), median(&mut without)),
        no_trace: best(&no_trace),
        lost,
        sensor_per_call: best(&sensor),
    })
}

pub(crate) fn run(json_out: bool, quick: bool, only: &[Part]) -> anyhow::Result<()> {
    let want = |p: Part| only.is_empty() || only.contains(&p);
    println!("gyr-sim's replay, the MPI interposer, and predictions against measured runs");
    let mut v = json!({ "bench": "sim" });
    let mut rate = None;
    if want(Part::Replay) {
        let (r, events) = replay_rate(quick);
        println!(
            "  replay: {:.2} M events/s ({events} events, 64 ranks; best of 3)",
            r / 1e6
        );
        v["sim_events_per_s"] = json!(r.round());
        v["sim_events"] = json!(events);
        v["sim_events_target"] = json!(5e6);
        rate = Some(r);
    }
    if want(Part::Interposer) {
        match interposer(quick) {
            Ok(Interposer {
                bests: (with, without),
                medians: (with_median, without_median),
                no_trace,
                lost,
                sensor_per_call: per_call,
            }) => {
                let n = if quick { 1_000_000 } else { 5_000_000 };
                let sensor = sensor_ns(n, 3)?;
                let (per_call_traced, sensor_lost) = call_sensor_traced_ns(n, 5)?;
                let added = with - without;
                // A call records three events: its begin, its message, its end.
                let ratio = added / per_call;
                let r2 = |x: f64| (x * 100.0).round() / 100.0;
                println!(
                    "  interposer: {with:.0} ns per call with libgyr_mpi.so, {without:.0} without (best of the runs; medians {with_median:.0} and {without_median:.0}): {added:.0} ns added; the sensor's own cost of a call's three events {per_call:.1} ns"
                );
                println!(
                    "  interposer: {no_trace:.0} ns per call with the library and no trace file: {:.0} ns of the added cost is the trace file's",
                    with - no_trace
                );
                println!(
                    "  sensor: the same three events {per_call_traced:.1} ns of processor time into a trace file, the monitor's encoding and writing counted, as a rank pays them ({sensor_lost} lost)"
                );
                v["interposer_ns_per_call"] = json!(r2(with));
                v["uninstrumented_ns_per_call"] = json!(r2(without));
                v["interposer_ns_per_call_median"] = json!(r2(with_median));
                v["uninstrumented_ns_per_call_median"] = json!(r2(without_median));
                v["interposer_ns_added_per_call"] = json!(r2(added));
                // Where the added time goes: the part a trace file costs (the monitors' encoding
                // and writing, which on a machine whose every core runs a rank is taken from
                // the ranks) and the rest (the wrappers, the sensors, the monitors' drain).
                v["interposer_ns_added_per_call_no_trace"] = json!(r2(no_trace - without));
                if no_trace > without {
                    v["ratio_no_trace_vs_sensor"] = json!(r3((no_trace - without) / per_call));
                }
                v["sensor_ns_per_event"] = json!(r3(sensor));
                v["sensor_ns_per_call"] = json!(r3(per_call));
                v["sensor_ns_per_call_traced"] = json!(r3(per_call_traced));
                v["sensor_events_lost"] = json!(sensor_lost);
                if added > 0.0 {
                    v["ratio_interposer_vs_sensor_traced"] = json!(r3(added / per_call_traced));
                }
                v["events_per_call"] = json!(3);
                v["interposer_events_lost"] = json!(lost);
                if lost > 0 {
                    println!(
                        "  interposer: a run lost {lost} events (full rings): its time is not the cost of recording every call, so the target is not met"
                    );
                }
                if added > 0.0 {
                    println!(
                        "  interposer: ratio {ratio:.2} to the sensor's own cost (target <= 2); {:.2} to the sensor's processor time with a trace file",
                        added / per_call_traced
                    );
                    v["ratio_interposer_vs_sensor"] = json!(r3(ratio));
                } else {
                    let why = "the runs without the library were slower than those with it: the \
                           machine is too busy to measure the interposer; run again when it is \
                           quiet";
                    println!("  interposer: no ratio: {why}");
                    v["interposer_unmeasurable"] = json!(why);
                }
            }
            Err(e) => {
                println!("  interposer: not measured ({e})");
                v["interposer_missing"] = json!(e.to_string());
            }
        }
    }
    let np = 2;
    if want(Part::Validation) {
        match errors(quick, np) {
            Ok((per, shm, tcp)) => {
                let mut same: Vec<f64> = per.iter().map(|e| e.1.abs()).collect();
                let mut across: Vec<f64> = per.iter().map(|e| e.2.abs()).collect();
                let mut all: Vec<f64> = same.iter().chain(&across).copied().collect();
                let worst = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
                let r1 = |x: f64| (x * 10.0).round() / 10.0;
                v["ranks"] = json!(np);
                v["error_pct"] = per
                    .iter()
                    .map(|(n, s, a)| {
                        (
                            n.clone(),
                            json!({"same_network": r1(*s), "across_networks": r1(*a)}),
                        )
                    })
                    .collect::<serde_json::Map<_, _>>()
                    .into();
                v["error_median_pct"] = json!(r1(median(&mut all)));
                v["error_worst_pct"] = json!(r1(worst(&all)));
                v["same_network_median_pct"] = json!(r1(median(&mut same)));
                v["same_network_worst_pct"] = json!(r1(worst(&same)));
                v["across_networks_median_pct"] = json!(r1(median(&mut across)));
                v["across_networks_worst_pct"] = json!(r1(worst(&across)));
                v["model_shm"] = line(&shm);
                v["model_tcp"] = line(&tcp);
            }
            Err(e) => {
                println!("  predictions: not measured ({e})");
                v["errors_missing"] = json!(e.to_string());
            }
        }
    }
    let target = |k: &str, ok: fn(f64) -> bool| v.get(k).and_then(|x| x.as_f64()).map(ok);
    v["targets"] = json!({
        "sim_events_per_s>=5M": rate.map(|r| r >= 5e6),
        "error_median_pct<=5": target("error_median_pct", |x| x <= 5.0),
        "error_worst_pct<=10": target("error_worst_pct", |x| x <= 10.0),
        "interposer<=2x_sensor": target("ratio_interposer_vs_sensor", |x| x <= 2.0)
            .map(|met| met && v["interposer_events_lost"].as_u64() == Some(0)),
    });
    if json_out {
        println!("{v}");
    }
    Ok(())
}
