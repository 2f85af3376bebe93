//! `gyr-bench ffi`'s Python reader figures: a trace of a few million events read into pyarrow
//! tables by the installed Python package (`gyr.read_trace`), timed inside Python around the
//! call, best of a few reads; beside it, in the same run, the floor: the same file decoded by
//! gyr's Rust reader alone (`gyr_trace::info`, which counts records without building tables).
//!
//! The Python is `GYR_PYTHON`, or the environment `scripts/test` makes in `target/pyenv`, or
//! `python3`, with the package `gyr` and pyarrow installed; without them the figures say so
//! instead of failing.

use crate::figures::r3;
use gyr_core::record::push_record;
use gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
use gyr_core::{Field, FieldType, Schema, ThreadInfo};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The figure the reader is held to.
pub(crate) const TARGET_EVENTS_PER_S: f64 = 10e6;

/// Threads of the generated trace, each named.
const THREADS: u64 = 4;

/// What the user is told when no Python can import the package.
const NOT_INSTALLED: &str = "not installed: run `target/pyenv/bin/python -m pip install './crates/gyr-python[all]'` (or set GYR_PYTHON to a Python that has gyr and pyarrow)";

/// Times the read in the child Python: prints `{"best_s": .., "rows": ..}`.
const SCRIPT: &str = r#"
import json, sys, time
import gyr
path, reps = sys.argv[1], int(sys.argv[2])
best, rows = float("inf"), 0
for _ in range(reps):
    t0 = time.perf_counter()
    trace = gyr.read_trace(path)
    dt = time.perf_counter() - t0
    rows = sum(t.num_rows for t in trace.values())
    del trace
    best = min(best, dt)
print(json.dumps({"best_s": best, "rows": rows, "pyarrow": __import__("pyarrow").__version__}))
"#;

/// Writes a trace of `events` events at `path`: a solver's step event (u32, u64, two f64) on
/// four named threads, and one event in eight a note (i64, bool, a short string).
fn write_trace(path: &Path, events: u64) -> anyhow::Result<()> {
    let header = TraceHeader {
        start_unix_ns: 1_800_000_000_000_000_000,
        ..TraceHeader::for_this_process()
    };
    let step = Schema::new(
        1,
        "step",
        vec![
            Field::new("domain", FieldType::U32),
            Field::new("step", FieldType::U64),
            Field::new("load", FieldType::F64),
            Field::new("residual", FieldType::F64),
        ],
    )?;
    let note = Schema::new(
        2,
        "note",
        vec![
            Field::new("rank", FieldType::I64),
            Field::new("converged", FieldType::Bool),
            Field::new("text", FieldType::Str),
        ],
    )?;
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut w = TraceWriter::new(file, &header)?;
    w.schema(&step)?;
    w.schema(&note)?;
    for t in 1..=THREADS {
        w.thread(&ThreadInfo {
            id: t,
            name: format!("domain-{}", t - 1),
            os_tid: 1000 + t,
        })?;
    }
    let per_thread = events / THREADS;
    let block = 4096u64;
    let mut records = Vec::with_capacity(block as usize * 48);
    let mut payload = Vec::with_capacity(64);
    let mut start = 0;
    while start < per_thread {
        let end = (start + block).min(per_thread);
        for t in 1..=THREADS {
            records.clear();
            for i in start..end {
                payload.clear();
                let ts = i * 1000 + t * 7;
                if i % 8 == 7 {
                    payload.extend_from_slice(&(-(i as i64)).to_le_bytes());
                    payload.push(u8::from(i % 16 == 15));
                    let text = format!("step {i}");
                    payload.extend_from_slice(&(text.len() as u32).to_le_bytes());
                    payload.extend_from_slice(text.as_bytes());
                    push_record(&mut records, 2, ts, i, 0, &payload);
                } else {
                    payload.extend_from_slice(&((t - 1) as u32).to_le_bytes());
                    payload.extend_from_slice(&i.to_le_bytes());
                    payload.extend_from_slice(&(1.0 + (i % 10) as f64 * 0.1).to_le_bytes());
                    payload.extend_from_slice(&(1.0 / (i + 1) as f64).to_le_bytes());
                    push_record(&mut records, 1, ts, i, 0, &payload);
                }
            }
            w.records(t, &records)?;
        }
        start = end;
    }
    w.finish(&TraceEnd {
        end_ns: per_thread * 1000 + 100,
        records: per_thread * THREADS,
        ..TraceEnd::default()
    })?;
    Ok(())
}

/// A Python that imports gyr and pyarrow, or why there is none.
fn python() -> Result<PathBuf, String> {
    crate::ffi_python::python_running("import gyr, pyarrow; gyr.read_trace")
}

/// The figures, as JSON fields of `gyr-bench ffi`; printed as they are measured.
pub(crate) fn measure(quick: bool) -> anyhow::Result<Map<String, Value>> {
    let (events, reps) = if quick {
        (2_000_000u64, 3)
    } else {
        (4_000_000u64, 5)
    };
    let mut out = Map::new();
    out.insert(
        "python_read_target_events_per_s".into(),
        json!(TARGET_EVENTS_PER_S),
    );
    let python = match python() {
        Ok(p) => p,
        Err(why) => {
            println!("  python reader: {NOT_INSTALLED} ({why})");
            out.insert("python".into(), json!(format!("{NOT_INSTALLED} ({why})")));
            return Ok(out);
        }
    };
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("read.gyr");
    write_trace(&path, events)?;
    let bytes = std::fs::metadata(&path)?.len();

    // The floor: the file decoded by the Rust reader alone, best of the same number of passes.
    let mut floor_s = f64::INFINITY;
    let mut decoded = 0;
    for _ in 0..reps {
        let t0 = Instant::now();
        let info = gyr_trace::info::read_file(&path)?;
        floor_s = floor_s.min(t0.elapsed().as_secs_f64());
        decoded = info.span.records;
    }

    let o = Command::new(&python)
        .args(["-c", SCRIPT])
        .arg(&path)
        .arg(reps.to_string())
        .output()?;
    if !o.status.success() {
        anyhow::bail!(
            "the Python reader failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let r: Value = serde_json::from_slice(
        o.stdout
            .split(|&b| b == b'\n')
            .rfind(|l| !l.is_empty())
            .unwrap_or_default(),
    )?;
    let best_s = r["best_s"].as_f64().unwrap_or(f64::NAN);
    let rows = r["rows"].as_u64().unwrap_or(0);
    anyhow::ensure!(
        rows == events && decoded == events,
        "the Python reader read {rows} rows and the decoder {decoded} records of {events}"
    );
    let per_s = rows as f64 / best_s;
    let floor_per_s = decoded as f64 / floor_s;
    println!(
        "  python reader: {rows} events ({:.0} MB) into pyarrow tables in {:.3} s, {:.1} M events/s (target {:.0} M/s); Rust decoding alone {:.1} M events/s ({:.2}x)",
        bytes as f64 / 1e6,
        best_s,
        per_s / 1e6,
        TARGET_EVENTS_PER_S / 1e6,
        floor_per_s / 1e6,
        floor_per_s / per_s
    );
    out.insert("python_read_events".into(), json!(rows));
    out.insert("python_read_trace_bytes".into(), json!(bytes));
    out.insert("python_read_s".into(), json!(r3(best_s)));
    out.insert("python_read_events_per_s".into(), json!(per_s.round()));
    out.insert(
        "python_read_meets_target".into(),
        json!(per_s >= TARGET_EVENTS_PER_S),
    );
    out.insert(
        "trace_decode_events_per_s".into(),
        json!(floor_per_s.round()),
    );
    out.insert(
        "ratio_decode_vs_python_read".into(),
        json!(r3(floor_per_s / per_s)),
    );
    out.insert("python_read_pyarrow".into(), r["pyarrow"].clone());
    Ok(out)
}
