//! The soak: a gyr program at 1 M events/s pushing through the hub to a gRPC subscriber and a
//! recording, for minutes, watching what must not grow: lost events (none under Block), the
//! resident memory of the program and the hub, and their open descriptors.
//!
//! Three processes, so that each one's memory is its own: the hub (`gyr-bench soak-hub`, with
//! `--record`), the program (`gyr-bench soak-program`, Block policy, `hub(...)`), and this one,
//! which subscribes to the hub before the program starts and counts every event it gets. At the
//! end the recording is read back and counted too.

use crate::figures::r3;
use gyr::Sensor;
use gyr_core::record::Records;
use gyr_core::trace::{Item, TraceReader};
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The program's event rate.
const RATE: f64 = 1_000_000.0;
/// The soak event type.
const TYPE: &str = "bench.soak";
/// Memory growth allowed over the run, per process.
const MAX_RSS_GROWTH_MB: f64 = 5.0;

#[derive(Sensor)]
#[sensor(name = "bench.soak")]
struct Soak {
    n: u64,
    value: f64,
}

/// A child process, killed if still running when dropped.
struct Kid(Child);
impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Resident memory in MB and open descriptors of a process.
fn usage(pid: u32) -> (f64, usize) {
    let rss_kb = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0);
    (rss_kb / 1024.0, fds)
}

/// The last line a child printed, as JSON.
fn last_json(out: impl Read) -> anyhow::Result<serde_json::Value> {
    let mut last = String::new();
    for line in BufReader::new(out).lines().map_while(Result::ok) {
        last = line;
    }
    serde_json::from_str(&last).map_err(|e| anyhow::anyhow!("a child's report `{last}`: {e}"))
}

/// `gyr-bench soak`.
pub(crate) fn run(json: bool, seconds: u64) -> anyhow::Result<()> {
    anyhow::ensure!(seconds >= 10, "a soak runs for at least 10 seconds");
    let dir = tempfile::tempdir()?;
    let record = dir.path().join("recording");
    let sockets = dir.path().join("sockets");
    let exe = std::env::current_exe()?;

    let mut hub = Kid(Command::new(&exe)
        .args(["soak-hub", "--record"])
        .arg(&record)
        .env("GYR_SOCKET_DIR", &sockets)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?);
    let mut hub_out = BufReader::new(hub.0.stdout.take().expect("piped"));
    let mut first = String::new();
    hub_out.read_line(&mut first)?;
    let grpc: String = serde_json::from_str::<serde_json::Value>(&first)?["grpc"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("the soak hub did not say where it listens: {first}"))?
        .to_owned();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let subscriber = rt.spawn(subscribe(grpc.clone()));
    // The subscription is in place before the program starts.
    std::thread::sleep(Duration::from_millis(300));

    let mut program = Kid(Command::new(&exe)
        .args(["soak-program", "--hub", &grpc, "--seconds"])
        .arg(seconds.to_string())
        .env("GYR_SOCKET_DIR", &sockets)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?);
    let (hub_pid, program_pid) = (hub.0.id(), program.0.id());

    // Start-up (connection, first allocations, the hub's series filling their windows) is not
    // growth: the baseline is taken once the run is in its steady state.
    let warmup = Duration::from_secs((seconds / 6).clamp(5, 30));
    let started = Instant::now();
    std::thread::sleep(warmup);
    let (p_rss0, p_fds0) = usage(program_pid);
    let (h_rss0, h_fds0) = usage(hub_pid);
    let (mut p_end, mut h_end) = ((p_rss0, p_fds0), (h_rss0, h_fds0));
    // The last reading before the program stops emitting.
    let until = started + Duration::from_secs(seconds);
    while Instant::now() + Duration::from_secs(2) < until {
        std::thread::sleep(Duration::from_secs(1));
        p_end = usage(program_pid);
        h_end = usage(hub_pid);
    }
    let program_report = last_json(program.0.stdout.take().expect("piped"))?;
    program.0.wait()?;
    // Everything sent has reached the hub and the subscriber once the program has exited and
    // its stream ended; the hub then closes its recording.
    std::thread::sleep(Duration::from_millis(500));
    drop(hub.0.stdin.take());
    let hub_report = last_json(hub_out)?;
    hub.0.wait()?;
    let (received, reported_lost) = rt.block_on(subscriber)??;
    let recorded = count_recorded(&record)?;

    let emitted = program_report["emitted"].as_u64().unwrap_or(0);
    let program_lost = program_report["lost"].as_u64().unwrap_or(0);
    // What the subscriber or the recording misses, whoever counted it on the way.
    let lost = program_lost + emitted.saturating_sub(received.min(recorded));
    let fds_growth =
        (p_end.1 as i64 - p_fds0 as i64).max(0) + (h_end.1 as i64 - h_fds0 as i64).max(0);
    let p_growth = p_end.0 - p_rss0;
    let h_growth = h_end.0 - h_rss0;
    let rate = emitted as f64 / seconds as f64;
    if !json {
        println!(
            "soak: {seconds} s at {:.2} M events/s: {emitted} emitted, {received} to the subscriber, {recorded} recorded, {lost} lost",
            rate / 1e6
        );
        println!(
            "program: RSS {p_rss0:.1} -> {:.1} MB, fds {p_fds0} -> {}; hub: RSS {h_rss0:.1} -> {:.1} MB, fds {h_fds0} -> {}",
            p_end.0, p_end.1, h_end.0, h_end.1
        );
    }
    let out = json!({
        "bench": "soak",
        "seconds": seconds,
        "warmup_s": warmup.as_secs(),
        "events": emitted,
        "events_per_s": rate.round(),
        "received": received,
        "recorded": recorded,
        "hub_received": hub_report["received"],
        "lost": lost,
        "lost_reported": reported_lost,
        "program": {
            "rss_start_mb": r3(p_rss0),
            "rss_end_mb": r3(p_end.0),
            "rss_growth_mb": r3(p_growth),
            "fds_start": p_fds0,
            "fds_end": p_end.1,
        },
        "hub": {
            "rss_start_mb": r3(h_rss0),
            "rss_end_mb": r3(h_end.0),
            "rss_growth_mb": r3(h_growth),
            "fds_start": h_fds0,
            "fds_end": h_end.1,
        },
        "fds_growth": fds_growth,
        "targets": {
            "lost==0": lost == 0,
            "rss_growth_mb<=5": p_growth <= MAX_RSS_GROWTH_MB && h_growth <= MAX_RSS_GROWTH_MB,
            "fds_growth==0": fds_growth == 0,
            "events_per_s>=0.95M": rate >= 0.95 * RATE,
        },
    });
    println!("{out}");
    Ok(())
}

/// Counts the soak events the hub streams to a subscriber of every program, and the losses it
/// reports, until the stream ends.
async fn subscribe(grpc: String) -> anyhow::Result<(u64, u64)> {
    let mut c = GyrClient::new(gyr_client::connect::tcp(&grpc).await?);
    let mut stream = c
        .subscribe(v1::SubscribeRequest {
            types: vec![TYPE.into()],
            threads: vec![],
            decoded: false,
        })
        .await?
        .into_inner();
    let (mut n, mut lost) = (0u64, 0u64);
    let mut soak_ids = std::collections::HashSet::new();
    while let Ok(Some(b)) = stream.message().await {
        lost += b.lost;
        for s in &b.schemas {
            if s.name == TYPE {
                soak_ids.insert((b.pid, s.id));
            }
        }
        for block in &b.blocks {
            for r in Records::new(block.thread, &block.records).flatten() {
                if soak_ids.contains(&(b.pid, r.header.type_id)) {
                    n += 1;
                }
            }
        }
    }
    Ok((n, lost))
}

/// The soak events in the hub's recording.
fn count_recorded(dir: &Path) -> anyhow::Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let mut reader = TraceReader::open(e?.path())?;
        reader.for_each_item(|item| {
            if let Item::Record {
                schema: Some(s), ..
            } = item
                && s.name == TYPE
            {
                n += 1;
            }
        });
    }
    Ok(n)
}

/// `gyr-bench soak-hub`: the hub, recording into `record`, until its standard input closes;
/// prints where it listens, then its totals.
pub(crate) fn hub(record: std::path::PathBuf) -> anyhow::Result<()> {
    let h = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse()?,
        grpc: Some("127.0.0.1:0".parse()?),
        socket_dir: std::env::temp_dir().join(format!("gyr-soak-{}", std::process::id())),
        discover: false,
        record: Some(record),
        ..Default::default()
    })?;
    let grpc = h
        .grpc_addr()
        .ok_or_else(|| anyhow::anyhow!("the hub serves no gRPC"))?;
    println!("{}", json!({ "grpc": grpc.to_string() }));
    std::io::stdout().flush()?;
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    let (received, lost) = h.totals();
    drop(h);
    println!("{}", json!({ "received": received, "lost": lost }));
    Ok(())
}

/// `gyr-bench soak-program`: emits [`RATE`] events/s for `seconds` under the Block policy,
/// pushing to the hub at `hub`; prints what it emitted and lost.
pub(crate) fn program(hub: String, seconds: u64) -> anyhow::Result<()> {
    let rt = gyr::Builder::new()
        .policy(gyr::Policy::Block)
        .hub(hub.clone(), None)
        .start()?;
    wait_until_listed(&hub)?;
    let start = Instant::now();
    let until = start + Duration::from_secs(seconds);
    let mut n = 0u64;
    loop {
        for _ in 0..1000 {
            gyr::emit!(Soak {
                n,
                value: n as f64 * 0.5
            });
            n += 1;
        }
        let now = Instant::now();
        if now >= until {
            break;
        }
        let due = start + Duration::from_secs_f64(n as f64 / RATE);
        if due > now {
            std::thread::sleep(due - now);
        }
    }
    let summary = rt.shutdown();
    println!("{}", json!({ "emitted": n, "lost": summary.lost }));
    Ok(())
}

/// Waits until the hub lists this process: events emitted before the push connects would not
/// be the hub's to see.
fn wait_until_listed(hub: &str) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let me = std::process::id();
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut c = GyrClient::new(gyr_client::connect::tcp(hub).await?);
        loop {
            let listed = c
                .list_processes(v1::ListProcessesRequest {})
                .await?
                .into_inner()
                .processes
                .iter()
                .any(|p| p.pid == me);
            if listed {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the hub at {hub} never listed this program"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}
