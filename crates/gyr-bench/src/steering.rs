//! `gyr-bench steering`: the cost of steering.
//!
//! Measured here, all in one run:
//! - in process: the closed loop Falcon measured at 610 µs (sensor → event/action repository →
//!   attribute changed, as the program sees it), probe reads and writes through the steering
//!   API, and actuation through a synch point the program reaches at least every 10 µs;
//! - over the embedded server's Unix socket, as a client sees it: a bare echo (the transport's
//!   floor), probe writes and reads, writes of 1, 10 and 100 attributes in one request (Progress
//!   and Falcon measured 643 / 2930 / 15418 µs), and actuation;
//! - examples/nbody run in a child process with gyr fully active (sensors on, server running,
//!   this process watching every event) against gyr switched off, in pairs of runs side by
//!   side: the overhead is the median of the pairs' overheads, printed with their spread.

use crate::figures::{percentile, r3};
use gyr::gyr_core::Value;
use gyr::gyr_core::record::Records;
use gyr::steer::{self, Actuator, AttrType, Who};
use gyr::{Builder, Sensor};
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Sensor)]
#[sensor(name = "bench.demand")]
struct Demand {
    level: f64,
}

#[derive(gyr::Steerable)]
struct Plant {
    #[steer(min = 0.0, max = 1e12)]
    setpoint: f64,
    count: u64,
}

pub(crate) fn run(json: bool, quick: bool) -> anyhow::Result<()> {
    let n = if quick { 2_000 } else { 20_000 };
    let who = Who::new("bench");
    let rt = Builder::new().start()?;
    println!("gyr-bench steering: {n} operations per figure, in process");

    // Closed loop: emit, the rule sets the parameter, the program sees the new value.
    let supply = steer::param("bench_supply", 0.0f64).register()?;
    let rule = steer::repository::on_event(
        "bench-follow",
        "bench.demand",
        |_| true,
        |e, who| {
            steer::set(
                "bench_supply",
                Value::Float(e.f64("level").unwrap_or(0.0)),
                who,
            )
            .map(drop)
        },
    )?;
    let mut loop_us = Vec::with_capacity(n);
    for i in 1..=n {
        let level = i as f64;
        let t = Instant::now();
        Demand { level }.emit();
        while supply.get() != level {
            std::hint::spin_loop();
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(5),
                "the rule did not act within 5 s"
            );
        }
        loop_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    rule.remove();
    let closed_p50 = percentile(&mut loop_us, 0.5);
    let closed_p99 = percentile(&mut loop_us, 0.99);
    println!(
        "  closed loop (sensor -> rule -> attribute)      p50 {closed_p50:8.2} us   p99 {closed_p99:8.2} us   (Falcon: 610 us)"
    );

    // Probes through the API.
    let plant = steer::register(
        "bench_plant",
        Plant {
            setpoint: 0.0,
            count: 0,
        },
    )?;
    let mut write_us = Vec::with_capacity(n);
    let mut read_us = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        steer::set("bench_plant.setpoint", Value::Float(i as f64), &who)?;
        write_us.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        std::hint::black_box(steer::get("bench_plant.setpoint")?);
        read_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let write_p50 = percentile(&mut write_us, 0.5);
    let read_p50 = percentile(&mut read_us, 0.5);
    println!(
        "  probe write / read                             p50 {write_p50:8.2} / {read_p50:.2} us (Progress: 643 us)"
    );

    // Actuation: the program reaches a synch point at least every 10 us.
    plant.add_actuator(
        Actuator::new("bump", |p: &mut Plant, args| {
            p.count += args.get::<u64>(0)?;
            Ok(Value::UInt(p.count))
        })
        .param("by", AttrType::UInt),
    )?;
    let program_stop = Arc::new(AtomicBool::new(false));
    let s2 = program_stop.clone();
    let program = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            steer::sync_point("bench");
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(5) {
                std::hint::spin_loop();
            }
        }
    });
    let mut act_us = Vec::with_capacity(n / 4);
    for _ in 0..n / 4 {
        let t = Instant::now();
        steer::actuate("bench_plant.bump", &[Value::UInt(1)], &who)?
            .wait(Duration::from_secs(5))?;
        act_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let act_p50 = percentile(&mut act_us, 0.5);
    println!(
        "  actuate (synch point every <= 10 us)           p50 {act_p50:8.2} us (Progress: 627 us)"
    );
    let socket = rt
        .socket()
        .ok_or_else(|| anyhow::anyhow!("the steering server is not running"))?
        .to_owned();
    let wire = transport(&socket, n)?;
    program_stop.store(true, Ordering::Relaxed);
    let _ = program.join();
    plant.unregister();
    supply.unregister();
    let summary = rt.shutdown();
    let nbody = nbody_overhead(quick)?;
    if json {
        let probe_write_vs_echo = wire.write_p50 / wire.echo_p50;
        println!(
            "{}",
            json!({
                "bench": "steering",
                "operations": n,
                "echo_p50_us": r3(wire.echo_p50),
                "probe_write_p50_us": r3(wire.write_p50),
                "probe_write_p99_us": r3(wire.write_p99),
                "probe_read_p50_us": r3(wire.read_p50),
                "probe_write_batch_us": {
                    "1": r3(wire.batch[0]), "10": r3(wire.batch[1]), "100": r3(wire.batch[2]),
                },
                "actuate_p50_us": r3(wire.actuate_p50),
                "closed_loop_p50_us": r3(closed_p50),
                "closed_loop_p99_us": r3(closed_p99),
                "inproc_probe_write_p50_us": r3(write_p50),
                "inproc_probe_read_p50_us": r3(read_p50),
                "inproc_actuate_p50_us": r3(act_p50),
                "nbody_overhead_pct": r3(nbody.overhead_pct),
                "nbody_overhead_pct_runs": nbody.runs_pct,
                "nbody_overhead_pct_spread": nbody.spread_pct.map(r3),
                "nbody_overhead_pct_iqr": nbody.iqr_pct.map(r3),
                "nbody_steps_per_s_off": r3(nbody.off_steps_per_s),
                "nbody_steps_per_s_on": r3(nbody.on_steps_per_s),
                "nbody_events_watched": nbody.watched,
                "lost": summary.lost,
                "ratio_probe_write_vs_echo": r3(probe_write_vs_echo),
                "ratio_vs_progress": {
                    "probe_write": r3(wire.write_p50 / 643.0),
                    "batch_10": r3(wire.batch[1] / 2930.0),
                    "batch_100": r3(wire.batch[2] / 15418.0),
                    "closed_loop_vs_falcon": r3(closed_p50 / 610.0),
                },
                "targets": {
                    "probe_write_p50_us<=2x_echo": probe_write_vs_echo <= 2.0,
                    "closed_loop_p50_us<=5": closed_p50 <= 5.0,
                    "nbody_overhead_pct<=1": nbody.overhead_pct <= 1.0,
                },
            })
        );
    }
    Ok(())
}

/// Figures over the embedded server's Unix socket.
struct Wire {
    echo_p50: f64,
    write_p50: f64,
    write_p99: f64,
    read_p50: f64,
    /// Writes of 1, 10 and 100 attributes in one request, p50.
    batch: [f64; 3],
    actuate_p50: f64,
}

/// Microseconds each of `n` runs of `op` took.
async fn timed<F, Fut>(n: usize, mut op: F) -> anyhow::Result<Vec<f64>>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        op(i).await?;
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(v)
}

fn float(x: f64) -> v1::Value {
    v1::Value {
        kind: Some(v1::value::Kind::Float(x)),
    }
}

/// Echo, probes, batches and actuation as a client on the same machine sees them. The
/// program's thread (started by the caller) reaches a synch point at least every 10 µs.
fn transport(socket: &std::path::Path, n: usize) -> anyhow::Result<Wire> {
    // Parameters to write in batches: one request may touch many objects.
    let params: Vec<_> = (0..100)
        .map(|i| steer::param(&format!("bench_p{i}"), 0.0f64).register())
        .collect::<Result<_, _>>()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let wire = rt.block_on(async {
        let channel = gyr_client::connect::unix(socket).await?;
        let mut c = GyrClient::new(channel);
        // Warm the connection.
        for _ in 0..100 {
            c.ping(v1::PingRequest::default()).await?;
        }
        let mut echo = timed(n, |_| {
            let mut c = c.clone();
            async move {
                c.ping(v1::PingRequest {
                    payload: vec![0; 8],
                })
                .await?;
                Ok(())
            }
        })
        .await?;
        let mut write = timed(n, |i| {
            let mut c = c.clone();
            async move {
                c.set(v1::SetRequest {
                    writes: vec![v1::PathValue {
                        path: "bench_plant.setpoint".into(),
                        value: Some(float(i as f64)),
                    }],
                })
                .await?;
                Ok(())
            }
        })
        .await?;
        let mut read = timed(n, |_| {
            let mut c = c.clone();
            async move {
                c.get(v1::GetRequest {
                    paths: vec!["bench_plant.setpoint".into()],
                })
                .await?;
                Ok(())
            }
        })
        .await?;
        let mut batch = [0.0; 3];
        for (slot, size) in [1usize, 10, 100].into_iter().enumerate() {
            let mut v = timed(n / 4, |i| {
                let mut c = c.clone();
                async move {
                    let writes = (0..size)
                        .map(|k| v1::PathValue {
                            path: format!("bench_p{k}"),
                            value: Some(float((i + k) as f64)),
                        })
                        .collect();
                    c.set(v1::SetRequest { writes }).await?;
                    Ok(())
                }
            })
            .await?;
            batch[slot] = percentile(&mut v, 0.5);
        }
        let mut act = timed(n / 4, |_| {
            let mut c = c.clone();
            async move {
                c.call(v1::CallRequest {
                    target: "bench_plant.bump".into(),
                    args: vec![v1::Value {
                        kind: Some(v1::value::Kind::Uint(1)),
                    }],
                    timeout_ms: 5000,
                })
                .await?;
                Ok(())
            }
        })
        .await?;
        anyhow::Ok(Wire {
            echo_p50: percentile(&mut echo, 0.5),
            write_p50: percentile(&mut write, 0.5),
            write_p99: percentile(&mut write, 0.99),
            read_p50: percentile(&mut read, 0.5),
            batch,
            actuate_p50: percentile(&mut act, 0.5),
        })
    })?;
    for p in params {
        p.unregister();
    }
    println!("  over the Unix socket (gRPC), as a client sees it:");
    println!(
        "    echo (the transport's floor)                 p50 {:8.2} us",
        wire.echo_p50
    );
    println!(
        "    probe write                                  p50 {:8.2} us   p99 {:8.2} us   (Progress: 643 us)",
        wire.write_p50, wire.write_p99
    );
    println!(
        "    probe read                                   p50 {:8.2} us",
        wire.read_p50
    );
    println!(
        "    write 1 / 10 / 100 attributes in one request p50 {:.1} / {:.1} / {:.1} us   (Progress: 643 / 2930 / 15418 us)",
        wire.batch[0], wire.batch[1], wire.batch[2]
    );
    println!(
        "    actuate (synch point every <= 10 us)         p50 {:8.2} us   (Progress: 627 us)",
        wire.actuate_p50
    );
    Ok(wire)
}

/// examples/nbody with gyr on and watched, against gyr off.
struct NBodyOverhead {
    /// The median of the pairs' overheads.
    overhead_pct: f64,
    /// Each pair's overhead, in the order run.
    runs_pct: Vec<f64>,
    /// The smallest and largest of `runs_pct`.
    spread_pct: [f64; 2],
    /// The first and third quartiles of `runs_pct`.
    iqr_pct: [f64; 2],
    off_steps_per_s: f64,
    on_steps_per_s: f64,
    watched: u64,
}

/// The child side: runs examples/nbody for `steps` steps once told to go on stdin (so that the
/// watcher is connected first), then prints the seconds the steps took.
pub(crate) fn nbody_child(bodies: usize, workers: usize, steps: u64) -> anyhow::Result<()> {
    let rt = gyr::init()?;
    let sim = gyr_example_nbody::register(bodies)?;
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    gyr_example_nbody::run(&sim, workers, steps, &stop);
    let secs = t.elapsed().as_secs_f64();
    let summary = rt.shutdown();
    println!(
        "seconds={secs} records={} lost={}",
        summary.records, summary.lost
    );
    Ok(())
}

/// Runs one child; with `on`, watches every event it emits from this process.
fn nbody_once(on: bool, steps: u64, dir: &std::path::Path) -> anyhow::Result<(f64, u64)> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["nbody-child", "--steps", &steps.to_string()])
        .env("GYR_SOCKET_DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if !on {
        cmd.env("GYR_DISABLE", "1").env("GYR_SERVE", "0");
    }
    let mut child = cmd.spawn()?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line)?;
    anyhow::ensure!(
        line.trim() == "ready",
        "the nbody child said `{}`",
        line.trim()
    );
    let watcher = if on {
        let socket = dir.join(format!("{}.sock", child.id()));
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || -> anyhow::Result<u64> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let mut c = GyrClient::new(gyr_client::connect::unix(socket).await?);
                let mut stream = c
                    .subscribe(v1::SubscribeRequest::default())
                    .await?
                    .into_inner();
                let _ = tx.send(());
                let mut events = 0u64;
                while let Ok(Some(b)) = stream.message().await {
                    events += b
                        .blocks
                        .iter()
                        .map(|x| Records::new(x.thread, &x.records).count() as u64)
                        .sum::<u64>();
                }
                anyhow::Ok(events)
            })
        });
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow::anyhow!("could not watch the nbody child"))?;
        Some(t)
    } else {
        None
    };
    child.stdin.take().expect("piped").write_all(b"go\n")?;
    line.clear();
    out.read_line(&mut line)?;
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "the nbody child failed: {status}");
    let secs: f64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("seconds="))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("the nbody child said `{}`", line.trim()))?;
    let watched = match watcher {
        Some(t) => t
            .join()
            .map_err(|_| anyhow::anyhow!("the watcher panicked"))??,
        None => 0,
    };
    Ok((secs, watched))
}

/// The overhead as the median over pairs of runs made side by side, one with gyr on and one
/// with it off, each pair giving its own ratio: a shared machine's speed drifts by more than
/// the overhead between runs seconds apart, which a ratio of the two sides' medians (the
/// earlier method) turned into swings of several percent, while a pair's two runs see
/// nearly the same machine. The order within a pair alternates (on-off, off-on, ...), so
/// that going first or second biases no side.
fn nbody_overhead(quick: bool) -> anyhow::Result<NBodyOverhead> {
    let (steps, pairs) = if quick { (100, 3) } else { (1000, 11) };
    let dir = tempfile::tempdir()?;
    let (mut off, mut on, mut runs_pct, mut watched) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for i in 0..pairs {
        let run_on = |watched: &mut u64| -> anyhow::Result<f64> {
            let (s, w) = nbody_once(true, steps, dir.path())?;
            *watched = w;
            Ok(s)
        };
        let (s_on, s_off) = if i % 2 == 0 {
            let s_on = run_on(&mut watched)?;
            (s_on, nbody_once(false, steps, dir.path())?.0)
        } else {
            let s_off = nbody_once(false, steps, dir.path())?.0;
            (run_on(&mut watched)?, s_off)
        };
        runs_pct.push(r3((s_on / s_off - 1.0) * 100.0));
        on.push(s_on);
        off.push(s_off);
    }
    let mut sorted = runs_pct.clone();
    let overhead_pct = percentile(&mut sorted, 0.5);
    let r = NBodyOverhead {
        overhead_pct,
        spread_pct: [sorted[0], sorted[sorted.len() - 1]],
        iqr_pct: [percentile(&mut sorted, 0.25), percentile(&mut sorted, 0.75)],
        runs_pct,
        off_steps_per_s: steps as f64 / percentile(&mut off, 0.5),
        on_steps_per_s: steps as f64 / percentile(&mut on, 0.5),
        watched,
    };
    println!(
        "  examples/nbody, {pairs} pairs of {steps} steps: gyr off {:.0} steps/s, on and watched {:.0} steps/s ({} events): overhead {:.2} % (median of pairs; {:.2} to {:.2} %, quartiles {:.2} to {:.2} %)",
        r.off_steps_per_s,
        r.on_steps_per_s,
        r.watched,
        r.overhead_pct,
        r.spread_pct[0],
        r.spread_pct[1],
        r.iqr_pct[0],
        r.iqr_pct[1]
    );
    Ok(r)
}
