//! A program that knows only `tracing` (examples/tracing-app, whose subscriber set-up adds
//! `gyr_tracing::GyrLayer`) pushes to `gyr hub` with `GYR_HUB`: it shows in `gyr ps --hub`
//! while it runs, and its events arrive in the hub's recording.
//!
//! This test has its own `main` (`harness = false` in Cargo.toml): run as
//! `tracing_hub tracing-app ARGS...`, it is the example program (the example's binaries are
//! not built for gyr-cli's tests).

use gyr_core::trace::{Item, TraceReader};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `gyr hub --record DIR`; returns it and its gRPC address.
fn start_hub(dir: &Path, record: &Path) -> (Killed, String) {
    let mut hub = Killed(
        Command::new(env!("CARGO_BIN_EXE_gyr"))
            .args([
                "hub",
                "--listen",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
                "--no-discover",
                "--record",
            ])
            .arg(record)
            .env("GYR_SOCKET_DIR", dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(hub.0.stdout.take().unwrap()).lines();
    loop {
        let line = lines
            .next()
            .expect("the hub printed its addresses")
            .unwrap();
        if let Some(rest) = line.trim().strip_prefix("gRPC API at ") {
            let grpc = rest.split(':').take(2).collect::<Vec<_>>().join(":");
            // Keep draining its output so that it never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return (hub, grpc);
        }
    }
}

/// Counts of the records per type name in the trace at `path`, and whether it is closed.
fn counts(path: &Path) -> (std::collections::BTreeMap<String, u64>, bool) {
    let mut out = std::collections::BTreeMap::new();
    let Ok(mut r) = TraceReader::open(path) else {
        return (out, false);
    };
    let mut closed = false;
    r.for_each_item(|item| match item {
        Item::Record {
            schema: Some(s), ..
        } => *out.entry(s.name.clone()).or_insert(0) += 1,
        Item::End(_) => closed = true,
        _ => {}
    });
    (out, closed)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("tracing-app") {
        std::process::exit(gyr_example_tracing::app::main(&args[2..]));
    }
    let filters: Vec<&str> = args[1..]
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let name = "a_program_using_only_tracing_appears_in_the_hub";
    if !filters.is_empty() && !filters.iter().any(|f| name.contains(f)) {
        return;
    }
    eprintln!("test {name} ...");
    a_program_using_only_tracing_appears_in_the_hub();
    eprintln!("test {name} ... ok");
}

fn a_program_using_only_tracing_appears_in_the_hub() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("runs");
    let (_hub, grpc) = start_hub(dir.path(), &record);

    // The example's program, configured as a user would: GYR_HUB in its environment.
    let mut program = Killed(
        Command::new(std::env::current_exe().unwrap())
            .args(["tracing-app", "--steps", "60", "--domains", "2"])
            .args(["--points", "256", "--pause-ms", "20"])
            .env("GYR_HUB", &grpc)
            .env("GYR_SOCKET_DIR", dir.path())
            .env_remove("GYR_TRACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // While it runs, the hub lists it.
    let pid = program.0.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let o = Command::new(env!("CARGO_BIN_EXE_gyr"))
            .args(["ps", "--hub", &grpc])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        if out.lines().any(|l| l.split_whitespace().any(|w| w == pid)) || Instant::now() > deadline
        {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().any(|w| w == pid)),
        "pid {pid} not in `gyr ps --hub`: {listed}"
    );
    let status = program.0.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut program.0.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "{out}");
    assert!(
        out.contains("60 sweeps") && out.contains(", 0 lost"),
        "{out}"
    );

    // Its events arrive in the hub's recording, which is closed once the stream has ended.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (types, closed) = loop {
        let files: Vec<PathBuf> = std::fs::read_dir(&record)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        let got = files.first().map(|f| counts(f)).unwrap_or_default();
        if got.1 || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(closed, "the recording was not closed: {types:?}");
    assert_eq!(
        types.get("gyr_example_tracing.residual.info"),
        Some(&60),
        "{types:?}"
    );
    assert_eq!(
        types.get("gyr_example_tracing.relax.info"),
        Some(&120),
        "{types:?}"
    );
    assert_eq!(types.get("gyr.span.begin"), Some(&180), "{types:?}");
    assert_eq!(types.get("gyr.span.end"), Some(&180), "{types:?}");
}
