//! `gyr-bench web`: the web page under load, in the browser users have. A hub is fed by a
//! synthetic program with 1000 threads and 200 numeric series (20 event types of 10 fields,
//! one event per thread every 20 ms: 50 000 events/s), and the real page, in headless
//! Chromium driven by `web/tests/bench.mjs` (playwright-core), watches it with a chart and a
//! gauge open. The page itself accounts for its time: for every frame it draws, the time spent
//! parsing and folding in the updates since the last frame plus drawing it.
//!
//! Prints `frame_ms_p50` and `frame_ms_p99` (target: p99 ≤ 16 ms, one frame at 60 Hz),
//! `frames`, `updates_per_s` and `update_bytes_per_s` (what the hub sends one page).
//! Needs Node.js and `npm ci` in `web/` (playwright-core), and Chromium (`CHROMIUM`, or
//! `/usr/bin/chromium`).

use crate::figures::{percentile, r3};
use gyr_core::record::push_record;
use gyr_core::{Field, FieldType, Schema, Value};
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Threads of the synthetic program.
const THREADS: u64 = 1000;
/// Event types; each has [`FIELDS`] numeric fields, so `TYPES × FIELDS` series.
const TYPES: u32 = 20;
/// Numeric fields per type.
const FIELDS: usize = 10;
/// Every thread emits one event per tick.
const TICK: Duration = Duration::from_millis(20);

/// Type `k` (1-based): `sim.tKK` with fields `f0..f9`; the first type's first field is the
/// worker (a small integer: the hub groups by it, and the page draws load-balance bars).
fn schemas() -> Vec<Schema> {
    (1..=TYPES)
        .map(|k| {
            let fields = (0..FIELDS)
                .map(|f| {
                    if k == 1 && f == 0 {
                        Field::new("worker", FieldType::U32)
                    } else {
                        Field::new(format!("f{f}"), FieldType::F64)
                    }
                })
                .collect();
            Schema::new(k, format!("sim.t{k:02}"), fields).expect("a valid schema")
        })
        .collect()
}

/// Publishes the synthetic program to the hub's gRPC API at `addr` until `stop` is set.
async fn feed(addr: String, stop: Arc<AtomicBool>) -> anyhow::Result<u64> {
    let schemas = schemas();
    let mut client = GyrClient::new(gyr_client::connect::tcp(&addr).await?)
        .max_encoding_message_size(64 << 20)
        .max_decoding_message_size(64 << 20);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let call = tokio::spawn(async move {
        client
            .publish(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
    });
    let pid = 4_100_000;
    let started = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
    tx.send(v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Hello(v1::PublishHello {
            pid,
            command_line: vec!["synthetic".into(), format!("--threads={THREADS}")],
            started_unix_ns: started,
            clock_zero_unix_ns: started,
            host: "bench".into(),
            protocol_version: gyr_proto::PROTOCOL_VERSION,
            ..Default::default()
        })),
    })
    .await?;
    let start = Instant::now();
    let mut sent = 0u64;
    let mut first = true;
    let mut tick = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let t_ns = start.elapsed().as_nanos() as u64;
        let t = t_ns as f64 / 1e9;
        let blocks = (0..THREADS)
            .map(|i| {
                let s = &schemas[(i % u64::from(TYPES)) as usize];
                let values: Vec<Value> = s
                    .fields
                    .iter()
                    .enumerate()
                    .map(|(f, field)| match field.ty {
                        FieldType::U32 => Value::UInt(i % 16),
                        _ => Value::Float(
                            (t * (0.5 + f as f64 * 0.1) + i as f64 * 0.01).sin() * (1.0 + f as f64),
                        ),
                    })
                    .collect();
                let payload = gyr_core::value::encode(s, &values).expect("values fit the schema");
                let mut records = Vec::with_capacity(64 + payload.len());
                push_record(&mut records, s.id, t_ns, tick, 0, &payload);
                v1::RecordBlock {
                    thread: i + 1,
                    records: records.into(),
                }
            })
            .collect();
        let b = v1::EventBatch {
            schemas: if first {
                schemas.iter().map(gyr_proto::stream::wire_schema).collect()
            } else {
                Vec::new()
            },
            threads: if first {
                (0..THREADS)
                    .map(|i| v1::ThreadInfo {
                        id: i + 1,
                        name: format!("worker-{i}"),
                        os_tid: i + 1,
                        ..Default::default()
                    })
                    .collect()
            } else {
                Vec::new()
            },
            blocks,
            lost: 0,
            pid: 0,
        };
        first = false;
        let msg = v1::PublishMessage {
            kind: Some(v1::publish_message::Kind::Batch(b)),
        };
        if tx.send(msg).await.is_err() {
            break;
        }
        sent += THREADS;
        tick += 1;
        tokio::time::sleep_until((start + TICK * tick as u32).into()).await;
    }
    drop(tx);
    call.await??;
    Ok(sent)
}

pub(crate) fn run(json_out: bool, quick: bool) -> anyhow::Result<()> {
    let seconds: u64 = if quick { 8 } else { 30 };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/tests/bench.mjs");
    let web = script
        .parent()
        .and_then(Path::parent)
        .expect("web/")
        .to_owned();
    if !web.join("node_modules/playwright-core").exists() {
        anyhow::bail!(
            "the web benchmark drives Chromium with playwright-core: run `npm ci` in {} first",
            web.display()
        );
    }
    let dir = std::env::temp_dir().join(format!("gyr-bench-web-{}", std::process::id()));
    let hub = gyr_hub::Hub::start(gyr_hub::HubConfig {
        listen: "127.0.0.1:0".parse()?,
        grpc: Some("127.0.0.1:0".parse()?),
        socket_dir: dir,
        discover: false,
        ..Default::default()
    })?;
    let grpc = hub
        .grpc_addr()
        .ok_or_else(|| anyhow::anyhow!("the hub serves no gRPC"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let feeding = stop.clone();
    let feeder = std::thread::spawn(move || -> anyhow::Result<u64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(feed(grpc.to_string(), feeding))
    });
    let url = format!("http://{}/", hub.addr());
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(&url)
        .arg(seconds.to_string())
        .current_dir(&web)
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run node (the web benchmark needs Node.js): {e}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "the page benchmark failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("");
    let page: serde_json::Value = serde_json::from_str(last)
        .map_err(|e| anyhow::anyhow!("the page benchmark printed `{last}`: {e}"))?;
    stop.store(true, Ordering::Relaxed);
    let sent = feeder
        .join()
        .map_err(|_| anyhow::anyhow!("the feeder panicked"))??;
    let (received, lost) = hub.totals();
    drop(hub);

    let mut frames: Vec<f64> = page["frames_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default();
    let secs = page["seconds"].as_f64().unwrap_or(seconds as f64);
    let p50 = percentile(&mut frames, 0.5);
    let p99 = percentile(&mut frames, 0.99);
    let bytes_per_s = page["bytes"].as_f64().unwrap_or(0.0) / secs;
    let updates_per_s = page["messages"].as_f64().unwrap_or(0.0) / secs;
    if !json_out {
        println!("web page, 1000 threads, 200 series, {seconds} s measured in Chromium:");
        println!(
            "  per frame: p50 {p50:.2} ms, p99 {p99:.2} ms over {} frames",
            frames.len()
        );
        println!("  {updates_per_s:.1} updates/s, {bytes_per_s:.0} bytes/s from the hub");
    }
    let result = json!({
        "bench": "web",
        "threads": THREADS,
        "series": u64::from(TYPES) * FIELDS as u64,
        "events_per_s": THREADS as f64 / TICK.as_secs_f64(),
        "seconds": r3(secs),
        "frames": frames.len(),
        "frame_ms_p50": r3(p50),
        "frame_ms_p99": r3(p99),
        "frame_ms_max": r3(frames.last().copied().unwrap_or(f64::NAN)),
        // The share of one 60 Hz frame (16 ms) the page's slowest updates take.
        "frame_budget_p99": r3(p99 / 16.0),
        "updates_per_s": r3(updates_per_s),
        "update_bytes_per_s": bytes_per_s.round(),
        "summary_bytes_per_s": (page["summary_bytes"].as_f64().unwrap_or(0.0) / secs).round(),
        "series_shown": page["series"],
        "events_sent": sent,
        "hub_received": received,
        "hub_lost": lost,
        "targets": {
            "frame_ms_p99<=16": p99 <= 16.0,
        },
    });
    println!("{result}");
    Ok(())
}
