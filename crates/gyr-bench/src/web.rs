//! `gyr-bench web`: the web page under load, in the browser users have, driven by
//! `web/tests/bench.mjs` in headless Chromium (playwright-core). The page itself accounts for
//! its time; the benchmark reads the page's accounting. Two parts, each with a hub of its own:
//!
//! - **Charts.** A hub is fed by a synthetic program with 1000 threads and 200 numeric series
//!   (20 event types of 10 fields, one event per thread every 20 ms: 50 000 events/s), and the
//!   page watches it with a chart and a gauge open. For every frame it draws: the time spent
//!   parsing and folding in the updates since the last frame plus drawing it. Prints
//!   `frame_ms_p50` and `frame_ms_p99` (target: p99 ≤ 16 ms, one frame at 60 Hz), `frames`,
//!   `updates_per_s` and `update_bytes_per_s` (what the hub sends one page).
//! - **Life-time view.** A program of 2000 threads taking turns on 64 mutexes
//!   (`crate::contention`) publishes 100 M thread events (`--quick`: 2 M) to the hub over gRPC
//!   in batches of 8 rounds (each thread's block holding its events of those rounds, as a
//!   monitor pass delivers them), through the hub's real path: ordering filter, then timeline;
//!   the benchmark waits until the hub has taken every event in. Then the page shows the
//!   program's life-time view while a scripted user shows the whole run, zooms in and out with
//!   the wheel, pans with drags and scrolls rows. For every tile the page draws: the time from
//!   its bytes in hand to drawn on the canvas (parse and draw), `timeline_frame_ms_p50` and
//!   `timeline_frame_ms_p99` (target: p99 ≤ 16 ms), with `timeline_parse_ms_p99` and
//!   `timeline_draw_ms_p99` apart; the round trip from the request to drawn
//!   (`timeline_tile_trip_ms_p50`, `_p99`: the hub's tile, the transfer and the page) and the
//!   bytes per tile. The hub keeps at most 16 M segments per program and forgets the oldest
//!   half of the busiest thread's past that: `timeline_segments_forgotten` and
//!   `timeline_shown_from_s` say how much of the run the view still shows, `timeline_feed_s`
//!   how long the hub took to take the events in.
//!
//! The page's times are JavaScript's: the canvas rasterises its drawing later, off this
//! account. Needs Node.js and `npm ci` in `web/` (playwright-core), and Chromium (`CHROMIUM`,
//! or `/usr/bin/chromium`).

use crate::contention::Contention;
use crate::figures::{percentile, r3};
use gyr_core::record::push_record;
use gyr_core::{Field, FieldType, Schema, Value};
use gyr_proto::v1;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    let pid = 4_100_000;
    let (tx, call) = crate::hub::publish_stream(
        &addr,
        pid,
        vec!["synthetic".into(), format!("--threads={THREADS}")],
    )
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
            anchor: None,
            events: Vec::new(),
            undecodable: 0,
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

/// Threads of the life-time view's program.
const TL_THREADS: u64 = 2000;
/// Rounds of [`Contention`] per published batch: each thread's block holds its events of these
/// rounds, as a monitor pass delivers them (8 rounds of 2000 threads: 48 000 events, 2.3 MB,
/// under the hub's 4 MB message limit).
const TL_ROUNDS_PER_BATCH: u64 = 8;
/// The life-time view's program.
const TL_PID: u32 = 4_200_000;

/// What feeding the life-time view's program took.
#[derive(Debug)]
struct Fed {
    events: u64,
    batches: u64,
    bytes: u64,
}

/// Publishes the life-time view's program ([`Contention`]: `threads` threads, about `events`
/// thread events) to the hub's gRPC API at `addr` as fast as the hub takes it, reports what it
/// sent on `done`, then keeps the stream open (the program stays alive) until `stop` is set.
async fn feed_threads(
    addr: String,
    threads: u64,
    events: u64,
    done: std::sync::mpsc::Sender<Fed>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let schemas = crate::contention::schemas();
    let mut program = Contention::new(threads, 0x6779_7221);
    let (tx, call) = crate::hub::publish_stream(
        &addr,
        TL_PID,
        vec!["synthetic-locks".into(), format!("--threads={threads}")],
    )
    .await?;
    let rounds = program.rounds(events);
    let mut fed = Fed {
        events: 0,
        batches: 0,
        bytes: 0,
    };
    let per_block = (TL_ROUNDS_PER_BATCH * crate::contention::EVENTS_PER_ROUND) as usize * 48;
    let mut seq = vec![0u64; threads as usize + 1];
    let mut r = 0;
    while r < rounds {
        let mut records: Vec<Vec<u8>> = (0..threads)
            .map(|_| Vec::with_capacity(per_block))
            .collect();
        let end = (r + TL_ROUNDS_PER_BATCH).min(rounds);
        for round in r..end {
            program.round(round, |thread, ts, type_id, payload| {
                let i = thread as usize;
                seq[i] += 1;
                push_record(&mut records[i - 1], type_id, ts, seq[i], 0, payload);
            });
        }
        fed.events += (end - r) * threads * crate::contention::EVENTS_PER_ROUND;
        let first = r == 0;
        r = end;
        let blocks: Vec<v1::RecordBlock> = records
            .into_iter()
            .enumerate()
            .map(|(i, records)| v1::RecordBlock {
                thread: i as u64 + 1,
                records: records.into(),
            })
            .collect();
        fed.bytes += blocks.iter().map(|b| b.records.len() as u64).sum::<u64>();
        let b = v1::EventBatch {
            schemas: if first {
                schemas.iter().map(gyr_proto::stream::wire_schema).collect()
            } else {
                Vec::new()
            },
            threads: if first {
                (1..=threads)
                    .map(|i| v1::ThreadInfo {
                        id: i,
                        name: format!("locker-{i}"),
                        os_tid: i,
                        ..Default::default()
                    })
                    .collect()
            } else {
                Vec::new()
            },
            blocks,
            lost: 0,
            pid: 0,
            anchor: None,
            events: Vec::new(),
            undecodable: 0,
        };
        let msg = v1::PublishMessage {
            kind: Some(v1::publish_message::Kind::Batch(b)),
        };
        if tx.send(msg).await.is_err() {
            break;
        }
        fed.batches += 1;
    }
    let _ = done.send(fed);
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(tx);
    call.await??;
    Ok(())
}

/// Runs the page's driver `script` (in `web`) with `args`; returns the JSON object it prints
/// last.
fn drive(web: &Path, script: &Path, args: &[String]) -> anyhow::Result<serde_json::Value> {
    let out = std::process::Command::new("node")
        .arg(script)
        .args(args)
        .current_dir(web)
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
    serde_json::from_str(last)
        .map_err(|e| anyhow::anyhow!("the page benchmark printed `{last}`: {e}"))
}

/// The numbers in `page[key]`.
fn numbers(page: &serde_json::Value, key: &str) -> Vec<f64> {
    page[key]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default()
}

/// The life-time view under a scripted user: a hub of its own takes in [`TL_THREADS`] threads'
/// thread events through `Publish`, then the page shows them while `bench.mjs --timeline`
/// zooms, pans and scrolls for `seconds`. Returns the figures for the JSON line.
fn timeline(
    web: &Path,
    script: &Path,
    events: u64,
    seconds: u64,
    json_out: bool,
) -> anyhow::Result<serde_json::Map<String, serde_json::Value>> {
    let (hub, grpc) = bench_hub("tl")?;
    let stop = Arc::new(AtomicBool::new(false));
    let feeding = stop.clone();
    let (done, fed) = std::sync::mpsc::channel();
    let start = Instant::now();
    let feeder = std::thread::spawn(move || -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(feed_threads(
            grpc.to_string(),
            TL_THREADS,
            events,
            done,
            feeding,
        ))
    });
    let stop_feeder = |feeder: std::thread::JoinHandle<anyhow::Result<()>>| {
        stop.store(true, Ordering::Relaxed);
        feeder
            .join()
            .map_err(|_| anyhow::anyhow!("the feeder panicked"))?
    };
    let Ok(fed) = fed.recv() else {
        stop_feeder(feeder)?;
        anyhow::bail!("the feeder stopped before it sent every event");
    };
    let sent_s = start.elapsed().as_secs_f64();
    // Wait until the hub has taken every event in (or stops making progress).
    let (mut taken, mut last, mut moved) = (0, 0, Instant::now());
    while taken < fed.events {
        std::thread::sleep(Duration::from_millis(20));
        taken = hub.totals().0;
        if taken != last {
            (last, moved) = (taken, Instant::now());
        } else if moved.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    let taken_s = start.elapsed().as_secs_f64();
    if !json_out {
        println!(
            "life-time view: {} threads, {} thread events published in {} batches ({:.0} MB) in {sent_s:.1} s, taken in by the hub in {taken_s:.1} s ({:.2} M events/s)",
            TL_THREADS,
            fed.events,
            fed.batches,
            fed.bytes as f64 / 1e6,
            taken as f64 / taken_s / 1e6
        );
    }
    let url = format!("http://{}/", hub.addr());
    let page = drive(
        web,
        script,
        &[
            url,
            seconds.to_string(),
            "--timeline".into(),
            TL_PID.to_string(),
            TL_THREADS.to_string(),
        ],
    );
    let (received, lost) = hub.totals();
    stop_feeder(feeder)?;
    drop(hub);
    let page = page?;

    let secs = page["seconds"].as_f64().unwrap_or(seconds as f64);
    let mut frames = numbers(&page, "frames_ms");
    let mut trips = numbers(&page, "trips_ms");
    let mut parse = numbers(&page, "parse_ms");
    let mut paint = numbers(&page, "draw_ms");
    let mut bytes = numbers(&page, "bytes");
    let tiles = frames.len();
    let mean_bytes = bytes.iter().sum::<f64>() / tiles.max(1) as f64;
    let p50 = percentile(&mut frames, 0.5);
    let p99 = percentile(&mut frames, 0.99);
    let trip50 = percentile(&mut trips, 0.5);
    let trip99 = percentile(&mut trips, 0.99);
    let parse99 = percentile(&mut parse, 0.99);
    let paint99 = percentile(&mut paint, 0.99);
    let bytes_max = percentile(&mut bytes, 1.0);
    let tile = &page["tile"];
    if !json_out {
        println!(
            "  {tiles} tiles drawn in {secs:.1} s of zooming, panning and scrolling: per frame (received, parsed, drawn) p50 {p50:.2} ms, p99 {p99:.2} ms (parse p99 {parse99:.2}, draw p99 {paint99:.2}); request to drawn p50 {trip50:.1} ms, p99 {trip99:.1} ms; {:.0} KB per tile (max {:.0} KB)",
            mean_bytes / 1e3,
            bytes_max / 1e3
        );
        println!(
            "  the view holds {} events ({} segments forgotten to stay within the hub's bound, {} released without their cause)",
            tile["events"], tile["segments_forgotten"], tile["forced"]
        );
    }
    let mut out = serde_json::Map::new();
    for (k, v) in [
        ("timeline_threads", json!(TL_THREADS)),
        ("timeline_events_fed", json!(fed.events)),
        ("timeline_batches", json!(fed.batches)),
        ("timeline_feed_s", json!(r3(taken_s))),
        (
            "timeline_feed_events_per_s",
            json!((taken as f64 / taken_s).round()),
        ),
        ("timeline_hub_received", json!(received)),
        ("timeline_hub_lost", json!(lost)),
        ("timeline_events", tile["events"].clone()),
        (
            "timeline_segments_forgotten",
            tile["segments_forgotten"].clone(),
        ),
        ("timeline_forced", tile["forced"].clone()),
        ("timeline_hold_back_ratio", tile["hold_back_ratio"].clone()),
        ("timeline_shown_from_s", tile["start_s"].clone()),
        ("timeline_now_s", tile["now_s"].clone()),
        ("timeline_seconds", json!(r3(secs))),
        ("timeline_user_actions", page["actions"].clone()),
        ("timeline_frames", json!(tiles)),
        ("timeline_frame_ms_p50", json!(r3(p50))),
        ("timeline_frame_ms_p99", json!(r3(p99))),
        ("timeline_parse_ms_p99", json!(r3(parse99))),
        ("timeline_draw_ms_p99", json!(r3(paint99))),
        ("timeline_tile_trip_ms_p50", json!(r3(trip50))),
        ("timeline_tile_trip_ms_p99", json!(r3(trip99))),
        ("timeline_tile_bytes_mean", json!(mean_bytes.round())),
        ("timeline_tile_bytes_max", json!(bytes_max)),
    ] {
        out.insert(k.into(), v);
    }
    Ok(out)
}

/// A hub on loopback for one part of the benchmark, serving gRPC for the synthetic program and
/// HTTP for the page, discovering nothing; and its gRPC address.
fn bench_hub(part: &str) -> anyhow::Result<(gyr_hub::Hub, std::net::SocketAddr)> {
    let dir = std::env::temp_dir().join(format!("gyr-bench-web-{part}-{}", std::process::id()));
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
    Ok((hub, grpc))
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
    let (hub, grpc) = bench_hub("charts")?;
    let stop = Arc::new(AtomicBool::new(false));
    let feeding = stop.clone();
    let feeder = std::thread::spawn(move || -> anyhow::Result<u64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(feed(grpc.to_string(), feeding))
    });
    let url = format!("http://{}/", hub.addr());
    let page = drive(&web, &script, &[url, seconds.to_string()])?;
    stop.store(true, Ordering::Relaxed);
    let sent = feeder
        .join()
        .map_err(|_| anyhow::anyhow!("the feeder panicked"))??;
    let (received, lost) = hub.totals();
    drop(hub);

    let mut frames = numbers(&page, "frames_ms");
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
    let tl_events = if quick { 2_000_000 } else { 100_000_000 };
    let tl = timeline(&web, &script, tl_events, seconds, json_out)?;
    let tl_p99 = tl["timeline_frame_ms_p99"].as_f64().unwrap_or(f64::NAN);
    let mut result = json!({
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
            "timeline_frame_ms_p99<=16": tl_p99 <= 16.0,
        },
    });
    if let Some(o) = result.as_object_mut() {
        o.extend(tl);
    }
    println!("{result}");
    Ok(())
}
