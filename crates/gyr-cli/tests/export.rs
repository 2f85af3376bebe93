//! `gyr trace info`, `export` and `import` as a user runs them, on a trace of real thread
//! events (`gyr::thread`, `gyr::sync`, spans and a program's own event type) recorded here.
//!
//! The Perfetto output is decoded with Perfetto's own published descriptors
//! (`tests/python/perfetto_check.py`, PyPI `perfetto` and `protobuf`) from the Python in
//! `GYR_PYTHON`, or the environment `scripts/test` makes in `target/pyenv`, or `python3`.
//! The CSV and Parquet tables are loaded with pandas, polars and pyarrow
//! (`tests/python/tables_check.py`) from the same Python; Parquet only when gyr-cli is built
//! with the feature `parquet` (`scripts/test` runs this file once more with it).
//! Without them those tests are skipped with a message, except in CI (`CI=true`), where they fail.

use gyr::gyr_core::record::push_record;
use gyr::gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
use gyr::gyr_core::{Field, FieldType, Schema, ThreadInfo};
use serde_json::Value as Json;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn gyr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(args)
        .output()
        .expect("gyr runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "gyr failed ({:?}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A program's own event type.
#[derive(gyr::Sensor)]
struct Step {
    worker: u32,
    load: f64,
}

/// Three workers named in Unicode take a mutex in turn (and wait for it), pass a barrier, and
/// wait on a condition the first one signals; every one works inside a span.
fn workload() {
    let counter = Arc::new(gyr::sync::Mutex::new(0u64));
    let barrier = Arc::new(gyr::sync::Barrier::new(3));
    let ready = Arc::new((gyr::sync::Mutex::new(false), gyr::sync::Condvar::new()));
    let workers: Vec<_> = (0..3u32)
        .map(|i| {
            let (counter, barrier, ready) = (counter.clone(), barrier.clone(), ready.clone());
            gyr::thread::Builder::new()
                .name(format!("wörker-{i} ☃"))
                .spawn(move || {
                    let _work = gyr::span!("work");
                    for k in 0..200 {
                        let mut c = counter.lock().unwrap();
                        *c += 1;
                        gyr::emit!(Step {
                            worker: i,
                            load: f64::from(k) * 0.5
                        });
                        drop(c);
                        if k % 50 == 0 {
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    }
                    barrier.wait();
                    let (flag, cond) = &*ready;
                    if i == 0 {
                        *flag.lock().unwrap() = true;
                        cond.notify_all();
                    } else {
                        let g = cond.wait_while(flag.lock().unwrap(), |f| !*f).unwrap();
                        drop(g);
                    }
                })
                .unwrap()
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(*counter.lock().unwrap(), 600);
}

/// The directory of this test's files.
fn dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gyr-cli-export");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The recorded trace (made once for every test of this file).
fn recorded() -> &'static Path {
    static TRACE: OnceLock<PathBuf> = OnceLock::new();
    TRACE.get_or_init(|| {
        let path = dir().join(format!("threads-{}.gyr", std::process::id()));
        let rt = gyr::Builder::new()
            .trace_file(&path)
            .serve(false)
            .handle_signals(false)
            .start()
            .expect("start gyr");
        workload();
        rt.shutdown();
        path
    })
}

/// A second process: one thread named in Unicode and one event.
fn small_trace() -> PathBuf {
    let path = dir().join(format!("small-{}.gyr", std::process::id()));
    let header = TraceHeader {
        pid: 77,
        command_line: vec!["/usr/bin/klein".into()],
        start_unix_ns: 1,
        ..TraceHeader::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    w.schema(&Schema::new(1, "tick", vec![Field::new("n", FieldType::U32)]).unwrap())
        .unwrap();
    w.thread(&ThreadInfo {
        id: 1,
        name: "größe→😀".into(),
        os_tid: 4711,
    })
    .unwrap();
    let mut r = Vec::new();
    push_record(&mut r, 1, 10, 1, 0, &5u32.to_le_bytes());
    w.records(1, &r).unwrap();
    std::fs::write(&path, w.finish(&TraceEnd::default()).unwrap()).unwrap();
    path
}

/// A Python with Perfetto's descriptors, or why there is none.
fn python() -> Result<PathBuf, String> {
    python_importing("from perfetto.protos.perfetto.trace import perfetto_trace_pb2")
}

/// A Python (`GYR_PYTHON`, else `target/pyenv`, else `python3`) in which `imports` runs, or why
/// there is none.
fn python_importing(imports: &str) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates: Vec<PathBuf> = match std::env::var_os("GYR_PYTHON") {
        Some(p) => vec![p.into()],
        None => vec![
            root.join("target/pyenv/bin/python"),
            PathBuf::from("python3"),
        ],
    };
    let mut why = Vec::new();
    for p in candidates {
        match Command::new(&p).args(["-c", imports]).output() {
            Ok(o) if o.status.success() => return Ok(p),
            Ok(o) => why.push(format!(
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => why.push(format!("{}: {e}", p.display())),
        }
    }
    Err(why.join("; "))
}

fn check_perfetto(python: &Path, trace: &Path, expect: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/perfetto_check.py");
    let o = Command::new(python)
        .arg(script)
        .arg(trace)
        .args(expect)
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && out.trim_end().ends_with("ok"),
        "the Perfetto check failed:\n{out}\n{err}"
    );
    out.into_owned()
}

#[test]
fn perfetto_export_decodes_with_perfettos_own_descriptors() {
    let python = match python() {
        Ok(p) => p,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "no Python with Perfetto's descriptors ({why}); scripts/test installs them into target/pyenv"
        ),
        Err(why) => {
            eprintln!(
                "skipped: no Python with the `perfetto` and `protobuf` packages ({why}); run scripts/test, or `pip install perfetto protobuf`"
            );
            return;
        }
    };
    let trace = recorded();
    let small = small_trace();
    let out = dir().join(format!("threads-{}.pftrace", std::process::id()));
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "perfetto",
        trace.to_str().unwrap(),
        small.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("records of 2 file(s)"), "{err}");
    let summary = check_perfetto(
        &python,
        &out,
        &[
            "--processes",
            "2",
            "--thread",
            "wörker-1 ☃",
            "--thread",
            "größe→😀",
            "--slice",
            "work",
            "--slice",
            "hold mutex 1",
            "--slice",
            "barrier 2",
            "--counter",
            "step.load",
            "--counter",
            "step.worker",
            "--counter",
            "tick.n",
            "--instant",
            "fork 2",
            "--instant",
            "thread exit",
            "--flows",
            "600",
        ],
    );
    eprintln!("{summary}");

    // The same, through the ordering filter.
    let ordered = dir().join(format!("threads-ordered-{}.pftrace", std::process::id()));
    let o = gyr(&[
        "trace",
        "export",
        "-f",
        "perfetto",
        "--ordered",
        trace.to_str().unwrap(),
        "-o",
        ordered.to_str().unwrap(),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("hold-back ratio"), "{err}");
    check_perfetto(&python, &ordered, &["--processes", "1", "--flows", "600"]);

    // Edge cases: an empty trace, and the recording cut off inside a chunk.
    let empty = dir().join(format!("empty-{}.gyr", std::process::id()));
    std::fs::write(
        &empty,
        TraceWriter::new(Vec::new(), &TraceHeader::default())
            .unwrap()
            .finish(&TraceEnd::default())
            .unwrap(),
    )
    .unwrap();
    let bytes = std::fs::read(trace).unwrap();
    let cut = dir().join(format!("cut-{}.gyr", std::process::id()));
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    for (input, processes) in [(&empty, "1"), (&cut, "1")] {
        let out = input.with_extension("pftrace");
        let o = gyr(&[
            "trace",
            "export",
            "-f",
            "perfetto",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        ok(&o);
        check_perfetto(&python, &out, &["--processes", processes]);
    }
}

#[test]
fn chrome_export_is_structurally_sound() {
    let trace = recorded();
    let small = small_trace();
    let out = dir().join(format!("threads-{}.json", std::process::id()));
    ok(&gyr(&[
        "trace",
        "export",
        "--format",
        "chrome",
        trace.to_str().unwrap(),
        small.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]));
    let doc: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("valid JSON");
    let events = doc["traceEvents"].as_array().unwrap();
    let mut depth: HashMap<(u64, u64), i64> = HashMap::new();
    let mut thread_names = HashSet::new();
    let mut process_names = HashSet::new();
    let (mut starts, mut ends) = (HashSet::new(), Vec::new());
    for e in events {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap_or(0));
        match e["ph"].as_str().unwrap() {
            "B" => *depth.entry(key).or_default() += 1,
            "E" => {
                let d = depth.entry(key).or_default();
                *d -= 1;
                assert!(*d >= 0, "an E without its B on {key:?}");
            }
            "M" if e["name"] == "thread_name" => {
                thread_names.insert(e["args"]["name"].as_str().unwrap().to_owned());
            }
            "M" if e["name"] == "process_name" => {
                process_names.insert(e["args"]["name"].as_str().unwrap().to_owned());
            }
            _ => {}
        }
        if let Some(id) = e.get("bind_id") {
            if e.get("flow_out").is_some() {
                starts.insert(id.clone());
            } else {
                ends.push(id.clone());
            }
        }
    }
    assert!(depth.values().all(|&d| d == 0), "{depth:?}");
    for name in ["wörker-0 ☃", "wörker-2 ☃", "größe→😀"] {
        assert!(
            thread_names.contains(name),
            "{name} not in {thread_names:?}"
        );
    }
    assert!(process_names.contains("klein"), "{process_names:?}");
    assert!(ends.len() >= 600, "{} flow ends", ends.len());
    assert!(ends.iter().all(|f| starts.contains(f)));
}

#[test]
fn info_describes_the_recording() {
    let trace = recorded();
    let o = gyr(&["trace", "info", trace.to_str().unwrap(), "--json"]);
    let info: Json = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(info["closed_cleanly"], true);
    assert_eq!(info["cut_off"], false);
    assert_eq!(info["header"]["pid"], std::process::id());
    let schemas = info["schemas"].as_array().unwrap();
    let step = schemas.iter().find(|s| s["name"] == "step").unwrap();
    assert_eq!(step["records"]["records"], 600);
    assert_eq!(
        step["fields"][1],
        serde_json::json!({"name": "load", "type": "f64"})
    );
    let threads = info["threads"].as_array().unwrap();
    assert!(threads.iter().any(|t| t["name"] == "wörker-1 ☃"));

    let text = ok(&gyr(&["trace", "info", trace.to_str().unwrap()]));
    assert!(text.contains("state     closed cleanly"), "{text}");
    assert!(text.contains("worker: u32, load: f64"), "{text}");

    // Cut off: info says so, and how much could not be read.
    let bytes = std::fs::read(trace).unwrap();
    let cut = dir().join(format!("info-cut-{}.gyr", std::process::id()));
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let text = ok(&gyr(&["trace", "info", cut.to_str().unwrap()]));
    assert!(text.contains("CUT OFF"), "{text}");
}

#[test]
fn sddf_and_picl_import_from_the_command_line() {
    let trace = recorded();
    let sddf = dir().join(format!("threads-{}.sddf", std::process::id()));
    let back = dir().join(format!("threads-back-{}.gyr", std::process::id()));
    ok(&gyr(&[
        "trace",
        "export",
        "-f",
        "sddf-binary",
        trace.to_str().unwrap(),
        "-o",
        sddf.to_str().unwrap(),
    ]));
    let o = gyr(&[
        "trace",
        "import",
        "-f",
        "sddf-binary",
        sddf.to_str().unwrap(),
        "-o",
        back.to_str().unwrap(),
    ]);
    ok(&o);
    let a: Json = serde_json::from_str(&ok(&gyr(&[
        "trace",
        "info",
        trace.to_str().unwrap(),
        "--json",
    ])))
    .unwrap();
    let b: Json = serde_json::from_str(&ok(&gyr(&[
        "trace",
        "info",
        back.to_str().unwrap(),
        "--json",
    ])))
    .unwrap();
    for key in ["header", "schemas", "threads", "records", "end"] {
        assert_eq!(a[key], b[key], "{key} differs after the round trip");
    }

    // Bad input: the line and what was expected; no file left behind.
    let bad = dir().join(format!("bad-{}.trf", std::process::id()));
    std::fs::write(&bad, "4 12 345678 0 1 99 1024\n4 12 345679 0 1 99\n").unwrap();
    let out = dir().join(format!("bad-{}.gyr", std::process::id()));
    let o = gyr(&[
        "trace",
        "import",
        "-f",
        "picl",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("line 2") && err.contains("expected 3 (to type length)"),
        "{err}"
    );
    assert!(!out.exists());
}

/// `gyr trace dump --json` of the recording, with `extra` arguments: one JSON value per line.
fn dump_json(extra: &[&str]) -> Vec<Json> {
    let trace = recorded().to_str().unwrap();
    let mut args = vec!["trace", "dump", "--json", trace];
    args.extend_from_slice(extra);
    ok(&gyr(&args))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Checks that every acquisition of a mutex comes after the release before it; returns the
/// records' `(thread, seq)` → `t_ns`.
fn check_mutex_order(records: &[Json]) -> HashMap<(u64, u64), u64> {
    let mut released: HashMap<(u64, u64), u64> = HashMap::new();
    let mut times = HashMap::new();
    let mut last: HashMap<u64, u64> = HashMap::new();
    for r in records {
        let (thread, seq, t) = (
            r["thread"].as_u64().unwrap(),
            r["seq"].as_u64().unwrap(),
            r["t_ns"].as_u64().unwrap(),
        );
        times.insert((thread, seq), t);
        let before = last.insert(thread, t).unwrap_or(0);
        assert!(t >= before, "thread {thread} went back in time: {r}");
        let f = &r["fields"];
        match r["type"].as_str().unwrap() {
            "gyr.mutex.release" => {
                released.insert((f["mutex"].as_u64().unwrap(), f["n"].as_u64().unwrap()), t);
            }
            "gyr.mutex.acquire" => {
                let (m, n) = (f["mutex"].as_u64().unwrap(), f["n"].as_u64().unwrap());
                if n > 1 {
                    let r0 = released
                        .get(&(m, n - 1))
                        .unwrap_or_else(|| panic!("acquisition {n} of {m} before its release"));
                    assert!(
                        t >= *r0,
                        "acquisition {n} of {m} at {t} before release at {r0}"
                    );
                }
            }
            _ => {}
        }
    }
    times
}

#[test]
fn ordered_and_corrected_dumps_stats_and_exports() {
    let raw = dump_json(&[]);
    let ordered = dump_json(&["--ordered"]);
    assert_eq!(raw.len(), ordered.len(), "every record exactly once");
    check_mutex_order(&ordered);

    let corrected = dump_json(&["--correct"]);
    assert_eq!(raw.len(), corrected.len());
    let times = check_mutex_order(&corrected);
    for r in &raw {
        let key = (r["thread"].as_u64().unwrap(), r["seq"].as_u64().unwrap());
        let t = times[&key];
        assert!(
            t <= r["t_ns"].as_u64().unwrap(),
            "corrected later than raw: {r}"
        );
    }
    assert!(corrected.iter().all(|r| r["perturbation_ns"] == 0));

    let trace = recorded().to_str().unwrap();
    let stats: Json =
        serde_json::from_str(&ok(&gyr(&["trace", "stats", "--correct", "--json", trace]))).unwrap();
    let (d, c) = (
        stats["duration_ns"].as_u64().unwrap(),
        stats["corrected_duration_ns"].as_u64().unwrap(),
    );
    assert!(c > 0 && c <= d, "corrected {c} against {d}");
    assert!(
        stats["threads"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["corrected_last_ns"].as_u64() <= t["last_ns"].as_u64())
    );
    let text = ok(&gyr(&["trace", "stats", "--correct", trace]));
    assert!(text.contains("with monitoring's time removed"), "{text}");

    let out = dir().join(format!("corrected-{}.json", std::process::id()));
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "chrome",
        "--correct",
        trace,
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("of monitoring removed"), "{err}");
    let json: Json = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(!json["traceEvents"].as_array().unwrap().is_empty());
}

/// A Python with pandas, polars and pyarrow, or why there is none.
fn python_with_frames() -> Result<PathBuf, String> {
    python_importing("import pandas, polars, pyarrow")
}

/// Exports the recorded trace as `format` tables into a new directory and checks them with
/// pandas and polars (and pyarrow) against `gyr trace info --json`.
fn check_tables(python: &Path, format: &str) {
    let trace = recorded();
    let out = dir().join(format!("tables-{format}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        format,
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("table step: "), "{err}");
    // The step table holds every one of the 600 events of the program's own type.
    assert!(out.join(format!("step.{format}")).exists(), "{err}");
    let info = dir().join(format!("tables-{format}-{}.json", std::process::id()));
    std::fs::write(
        &info,
        ok(&gyr(&["trace", "info", "--json", trace.to_str().unwrap()])),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/tables_check.py");
    let o = Command::new(python)
        .arg(script)
        .arg(&out)
        .arg(format)
        .arg(&info)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(
        o.status.success() && stdout.trim_end().ends_with("ok"),
        "the {format} tables do not load as they should:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("step: 600 rows"), "{stdout}");
    // A second export into the same directory is refused: its tables would mix with these.
    let again = gyr(&[
        "trace",
        "export",
        "--format",
        format,
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
fn tables_load_in_pandas_and_polars_with_their_types() {
    let python = match python_with_frames() {
        Ok(p) => p,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "no Python with pandas, polars and pyarrow ({why}); scripts/test installs them into target/pyenv"
        ),
        Err(why) => {
            eprintln!(
                "skipped: no Python with pandas, polars and pyarrow ({why}); run scripts/test, or `pip install pandas polars pyarrow`"
            );
            return;
        }
    };
    check_tables(&python, "csv");
    if cfg!(feature = "parquet") {
        check_tables(&python, "parquet");
    }
}

#[test]
fn parquet_needs_its_feature_or_works() {
    let out = dir().join(format!("tables-feature-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "parquet",
        recorded().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    if cfg!(feature = "parquet") {
        ok(&o);
        assert!(out.join("step.parquet").exists());
    } else {
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--features parquet"), "{err}");
        assert!(
            !out.exists(),
            "nothing is created when the format cannot be written"
        );
    }
}

/// A mock OpenTelemetry collector: the OTLP/gRPC trace and logs services on 127.0.0.1,
/// keeping what arrives (with its `authorization` header) and answering trace requests as its
/// `Behaviour` says.
mod collector {
    use gyr_proto::otlp::collector::logs::v1::logs_service_server::{
        LogsService, LogsServiceServer,
    };
    use gyr_proto::otlp::collector::logs::v1::{
        ExportLogsServiceRequest, ExportLogsServiceResponse,
    };
    use gyr_proto::otlp::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };
    use gyr_proto::otlp::collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use std::sync::{Arc, Mutex};
    use tonic::{Request, Response, Status};

    #[derive(Default, Debug)]
    pub(crate) struct Received {
        pub(crate) traces: Vec<ExportTraceServiceRequest>,
        pub(crate) logs: Vec<ExportLogsServiceRequest>,
        pub(crate) authorization: Vec<Option<String>>,
    }

    /// How the mock answers trace requests.
    #[derive(Clone, Copy, Debug, Default)]
    pub(crate) struct Behaviour {
        /// Spans of every request rejected as a partial success.
        pub(crate) reject: i64,
        /// Requests answered `UNAVAILABLE` first.
        pub(crate) unavailable: u32,
        /// Every request refused as `UNAUTHENTICATED`.
        pub(crate) unauthenticated: bool,
    }

    #[derive(Clone)]
    struct Mock {
        received: Arc<Mutex<Received>>,
        behaviour: Behaviour,
        calls: Arc<std::sync::atomic::AtomicU32>,
    }

    fn auth<T>(r: &Request<T>) -> Option<String> {
        r.metadata()
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned())
    }

    #[tonic::async_trait]
    impl TraceService for Mock {
        async fn export(
            &self,
            r: Request<ExportTraceServiceRequest>,
        ) -> Result<Response<ExportTraceServiceResponse>, Status> {
            let b = self.behaviour;
            let call = self
                .calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if b.unauthenticated {
                return Err(Status::unauthenticated("no such tenant token"));
            }
            if call < b.unavailable {
                return Err(Status::unavailable("warming up"));
            }
            let mut got = self.received.lock().unwrap();
            got.authorization.push(auth(&r));
            got.traces.push(r.into_inner());
            Ok(Response::new(ExportTraceServiceResponse {
                partial_success: (b.reject > 0).then(|| ExportTracePartialSuccess {
                    rejected_spans: b.reject,
                    error_message: "spans too old for this tenant".into(),
                }),
            }))
        }
    }

    #[tonic::async_trait]
    impl LogsService for Mock {
        async fn export(
            &self,
            r: Request<ExportLogsServiceRequest>,
        ) -> Result<Response<ExportLogsServiceResponse>, Status> {
            let mut got = self.received.lock().unwrap();
            got.authorization.push(auth(&r));
            got.logs.push(r.into_inner());
            Ok(Response::new(ExportLogsServiceResponse::default()))
        }
    }

    /// A running collector; stops when dropped.
    pub(crate) struct Collector {
        pub(crate) endpoint: String,
        pub(crate) received: Arc<Mutex<Received>>,
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Drop for Collector {
        fn drop(&mut self) {
            let _ = self.stop.take().unwrap().send(());
            self.thread.take().unwrap().join().unwrap();
        }
    }

    pub(crate) fn start(behaviour: Behaviour) -> Collector {
        start_with(behaviour, None)
    }

    /// A collector serving TLS with this certificate and key (PEM) for `localhost`.
    #[cfg(feature = "tls")]
    pub(crate) fn start_tls(cert: &[u8], key: &[u8]) -> Collector {
        let identity = tonic::transport::Identity::from_pem(cert, key);
        let mut c = start_with(Behaviour::default(), Some(identity));
        c.endpoint = c.endpoint.replace("http://127.0.0.1", "https://localhost");
        c
    }

    #[cfg(feature = "tls")]
    type Tls = Option<tonic::transport::Identity>;
    #[cfg(not(feature = "tls"))]
    type Tls = Option<std::convert::Infallible>;

    fn start_with(behaviour: Behaviour, tls: Tls) -> Collector {
        let received = Arc::new(Mutex::new(Received::default()));
        let mock = Mock {
            received: received.clone(),
            behaviour,
            calls: Arc::default(),
        };
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let mut server = tonic::transport::Server::builder();
                #[cfg(feature = "tls")]
                if let Some(identity) = tls {
                    server = server
                        .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
                        .unwrap();
                }
                #[cfg(not(feature = "tls"))]
                let _ = tls;
                server
                    .add_service(TraceServiceServer::new(mock.clone()))
                    .add_service(LogsServiceServer::new(mock))
                    .serve_with_incoming_shutdown(
                        tokio_stream::wrappers::TcpListenerStream::new(listener),
                        async {
                            let _ = stopped.await;
                        },
                    )
                    .await
                    .unwrap();
            });
        });
        let addr = addr_rx.recv().unwrap();
        Collector {
            endpoint: format!("http://{addr}"),
            received,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

/// The value of the attribute `key` in OTLP/JSON's `attributes`.
fn json_attr<'a>(attrs: &'a Json, key: &str) -> &'a Json {
    &attrs
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .unwrap_or_else(|| panic!("no attribute {key} in {attrs}"))["value"]
}

#[test]
fn otlp_json_lines_hold_the_spans_and_selected_events() {
    let out = dir().join(format!("otlp-{}.jsonl", std::process::id()));
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp-json",
        recorded().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--events",
        "st?p",
        "--batch",
        "100",
    ]);
    ok(&o);
    let text = std::fs::read_to_string(&out).unwrap();
    let (mut spans, mut logs) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let v: Json = serde_json::from_str(line).unwrap();
        if let Some(r) = v.get("resourceSpans") {
            let batch = r[0]["scopeSpans"][0]["spans"].as_array().unwrap();
            assert!(batch.len() <= 100);
            let res = &r[0]["resource"]["attributes"];
            assert!(json_attr(res, "process.pid")["intValue"].is_string());
            spans.extend(batch.iter().cloned());
        } else {
            let batch = v["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
                .as_array()
                .unwrap();
            assert!(batch.len() <= 100, "bounded batches");
            logs.extend(batch.iter().cloned());
        }
    }
    // One `work` span per worker, each on its own thread.
    assert_eq!(spans.len(), 3, "{text}");
    let mut workers = HashSet::new();
    for s in &spans {
        assert_eq!(s["name"], "work");
        assert!(s.get("parentSpanId").is_none());
        let start: u64 = s["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
        let end: u64 = s["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
        // Wall-clock times: after 2020, in order.
        assert!(start > 1_577_836_800_000_000_000 && start <= end, "{s}");
        let name = json_attr(&s["attributes"], "thread.name")["stringValue"]
            .as_str()
            .unwrap();
        assert!(name.starts_with("wörker-"), "{name}");
        workers.insert(s["spanId"].as_str().unwrap().to_owned());
        assert_eq!(s["traceId"], spans[0]["traceId"]);
    }
    assert_eq!(workers.len(), 3, "distinct span ids");
    // Every step happened inside its worker's span, with its fields typed.
    assert_eq!(logs.len(), 600);
    // The options of the other exports apply: corrected, the same spans come out.
    let corrected = dir().join(format!("otlp-corrected-{}.jsonl", std::process::id()));
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp-json",
        "--correct",
        recorded().to_str().unwrap(),
        "-o",
        corrected.to_str().unwrap(),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("gyr: corrected") && err.contains("3 spans"),
        "{err}"
    );
    for l in &logs {
        assert_eq!(l["eventName"], "step");
        assert!(workers.contains(l["spanId"].as_str().unwrap()), "{l}");
        assert!(json_attr(&l["attributes"], "worker")["intValue"].is_string());
        assert!(json_attr(&l["attributes"], "load")["doubleValue"].is_number());
    }
}

#[test]
fn otlp_is_sent_to_a_collector_in_bounded_batches() {
    let c = collector::start(collector::Behaviour::default());
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp",
        "--endpoint",
        &c.endpoint,
        recorded().to_str().unwrap(),
        "--events",
        "step,gyr.barrier.*",
        "--batch",
        "64",
        "--header",
        "authorization=Bearer s3cret",
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("3 spans"), "{err}");
    let got = c.received.lock().unwrap();
    assert!(
        got.authorization
            .iter()
            .all(|a| a.as_deref() == Some("Bearer s3cret"))
    );
    let spans: Vec<_> = got
        .traces
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .collect();
    assert_eq!(spans.len(), 3);
    assert!(spans.iter().all(|s| s.name == "work"
        && s.span_id.len() == 8
        && s.trace_id.len() == 16
        && s.parent_span_id.is_empty()
        && s.start_time_unix_nano <= s.end_time_unix_nano));
    let records: Vec<_> = got
        .logs
        .iter()
        .flat_map(|r| {
            let n = r.resource_logs[0].scope_logs[0].log_records.len();
            assert!(n <= 64, "bounded batches");
            &r.resource_logs[0].scope_logs[0].log_records
        })
        .collect();
    let steps = records.iter().filter(|l| l.event_name == "step").count();
    assert_eq!(steps, 600);
    assert!(
        records
            .iter()
            .any(|l| l.event_name.starts_with("gyr.barrier.")),
        "the second glob selects the barrier's events"
    );
    // Typed: the worker an int, the load a double.
    use gyr_proto::otlp::common::v1::any_value::Value as V;
    let step = records.iter().find(|l| l.event_name == "step").unwrap();
    let value = |k: &str| {
        step.attributes
            .iter()
            .find(|a| a.key == k)
            .and_then(|a| a.value.clone())
            .and_then(|v| v.value)
    };
    assert!(matches!(value("worker"), Some(V::IntValue(_))));
    assert!(matches!(value("load"), Some(V::DoubleValue(_))));
    let span_ids: HashSet<_> = spans.iter().map(|s| s.span_id.clone()).collect();
    assert!(span_ids.contains(&step.span_id));
}

/// A CA and a certificate it signed for `localhost` and 127.0.0.1, made with openssl in `dir`:
/// (the CA's PEM path, the certificate's PEM, its key's PEM).
#[cfg(feature = "tls")]
fn test_ca(dir: &Path) -> (PathBuf, Vec<u8>, Vec<u8>) {
    let openssl = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl (the TLS test makes its certificates with it)");
        assert!(o.status.success(), "openssl {args:?}: {o:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=gyr test CA",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "key.pem",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    (
        dir.join("ca.pem"),
        std::fs::read(dir.join("cert.pem")).unwrap(),
        std::fs::read(dir.join("key.pem")).unwrap(),
    )
}

#[cfg(feature = "tls")]
#[test]
fn otlp_is_sent_over_tls_with_headers_to_a_collector_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = test_ca(dir.path());
    let c = collector::start_tls(&cert, &key);
    let export = |extra: &[&str]| {
        let mut args = vec![
            "trace",
            "export",
            "--format",
            "otlp",
            "--endpoint",
            &c.endpoint,
            "--timeout",
            "5s",
        ];
        args.extend_from_slice(extra);
        args.push(recorded().to_str().unwrap());
        gyr(&args)
    };
    // The collector's certificate chains to no CA the system trusts: refused, and said.
    let o = export(&[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot reach") && err.contains(&c.endpoint) && err.contains("--ca-cert"),
        "{err}"
    );
    assert!(c.received.lock().unwrap().traces.is_empty());
    // With its CA, the spans arrive, and the header travels encrypted.
    let ca = ca.to_str().unwrap();
    ok(&export(&[
        "--ca-cert",
        ca,
        "--header",
        "authorization=Bearer s3cret",
    ]));
    let got = c.received.lock().unwrap();
    assert_eq!(got.traces.len(), 1);
    assert!(
        got.authorization
            .iter()
            .all(|a| a.as_deref() == Some("Bearer s3cret"))
    );
}

#[test]
fn otlp_reports_rejections_and_unreachable_collectors() {
    // A partial success is reported, and fails the command.
    let c = collector::start(collector::Behaviour {
        reject: 2,
        ..Default::default()
    });
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp",
        "--endpoint",
        &c.endpoint,
        recorded().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rejected 2 spans"), "{err}");
    assert!(err.contains("spans too old for this tenant"), "{err}");
    drop(c);
    // A collector unavailable for a moment gets the batch again.
    let c = collector::start(collector::Behaviour {
        unavailable: 1,
        ..Default::default()
    });
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp",
        "--endpoint",
        &c.endpoint,
        recorded().to_str().unwrap(),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unavailable 1 times"), "{err}");
    assert_eq!(c.received.lock().unwrap().traces.len(), 1);
    drop(c);
    // A refusal ends the export with the collector's status and what to check.
    let c = collector::start(collector::Behaviour {
        unauthenticated: true,
        ..Default::default()
    });
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp",
        "--endpoint",
        &c.endpoint,
        recorded().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refused spans")
            && err.contains("no such tenant token")
            && err.contains("--header"),
        "{err}"
    );
    drop(c);
    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = gyr(&[
        "trace",
        "export",
        "--format",
        "otlp",
        "--endpoint",
        &format!("http://127.0.0.1:{port}"),
        "--timeout",
        "2s",
        recorded().to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot reach the OpenTelemetry collector"),
        "{err}"
    );
    // Arguments that do not go together are refused before anything runs.
    let trace = recorded().to_str().unwrap();
    for (args, says) in [
        (vec!["--format", "otlp", trace], "--endpoint"),
        (
            vec![
                "--format",
                "otlp",
                trace,
                "--endpoint",
                "http://127.0.0.1:1",
                "-o",
                "x",
            ],
            "writes no file",
        ),
        (
            vec!["--format", "chrome", trace, "-o", "x", "--events", "*"],
            "--events",
        ),
        (
            vec!["--format", "otlp-json", trace, "-o", "x", "--batch", "0"],
            "--batch",
        ),
        (
            vec!["--format", "otlp-json", trace, "-o", "x", "--events", ","],
            "names no events",
        ),
    ] {
        let mut all = vec!["trace", "export"];
        all.extend(args);
        let o = gyr(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{all:?}: {err}");
    }
}
