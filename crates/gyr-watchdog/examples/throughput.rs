//! Lines per second: the parser alone over residual lines, then end to end from a file that
//! grows while it is read (a writer thread appending, the watch-dog's `FileTail`, parser and
//! dynamic sensors, gyr writing a trace file). `cargo run --release -p gyr-watchdog --example
//! throughput [LINES]`; prints one JSON object.

use gyr_watchdog::publish::Publisher;
use gyr_watchdog::tail::{FileTail, Item};
use gyr_watchdog::{LineParser, Spec};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SPEC: &str = r#"
[source.log]
file = "residuals.log"

[[event]]
name = "solver.residual"
source = ["stdout", "log"]
pattern = '^\s*(?P<iter>\d+)\s+(?P<rho>\S+)\s+(?P<u>\S+)\s+(?P<v>\S+)\s+(?P<e>\S+)\s*$'
fields = [
  { name = "iter", type = "u32" }, { name = "rho", type = "f64" }, { name = "u", type = "f64" },
  { name = "v", type = "f64" }, { name = "e", type = "f64" },
]

[[event]]
name = "solver.warning"
source = ["stdout", "log"]
pattern = 'WARNING:\s*(?P<message>.*)'
fields = [{ name = "message", type = "string" }]
"#;

fn line(i: u64) -> String {
    if i % 100 == 99 {
        format!(" *** WARNING: cfl above 2 at iteration {i}\n")
    } else {
        format!(
            "{:>8}  {:.6}D-03  {:.6}D-04  {:.6}D-04  {:.6}D-05\n",
            i,
            1.0 + (i % 7) as f64 * 0.1,
            2.0 + (i % 5) as f64 * 0.1,
            3.0 + (i % 3) as f64 * 0.1,
            4.0
        )
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let spec = Arc::new(Spec::parse(SPEC).unwrap());
    let text: String = (0..n).map(line).collect();

    // The parser alone.
    let mut p = LineParser::new(spec.clone(), 0, "run1");
    let mut events = 0u64;
    let t = Instant::now();
    for l in text.lines() {
        p.line(l, &mut |_, _| events += 1);
    }
    let parse_s = t.elapsed().as_secs_f64();
    assert_eq!(events, n);

    // End to end from a growing file, into a trace.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("residuals.log");
    let rt = gyr::Builder::new()
        .policy(gyr::Policy::Drop)
        .serve(false)
        .trace_file(dir.path().join("t.gyr"))
        .start()
        .unwrap();
    let publisher = Publisher::new(spec.clone(), false);
    let mut parser = LineParser::new(spec.clone(), 2, "run1");
    let mut tail = FileTail::new(path.clone(), 2, "run1".into(), false);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let done = done.clone();
        let path = path.clone();
        let bytes = text.into_bytes();
        std::thread::spawn(move || {
            let mut f = std::fs::File::create(&path).unwrap();
            // 64 KiB appends: a solver's buffered output, as fast as the disk takes it.
            for chunk in bytes.chunks(64 << 10) {
                f.write_all(chunk).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut buf = Vec::new();
    let t = Instant::now();
    loop {
        let finished = done.load(Ordering::SeqCst);
        let read = tail.poll(&mut buf, &mut |i| {
            if let Item::Line(l) = i {
                publisher.line(&mut parser, "log", l)
            }
        });
        if finished && read == 0 {
            break;
        }
        if read == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let e2e_s = t.elapsed().as_secs_f64();
    writer.join().unwrap();
    let summary = rt.shutdown();
    let lines = publisher.counters.lines.load(Ordering::Relaxed);
    assert_eq!(lines, n);
    println!(
        "{{\"lines\": {n}, \"parser_lines_per_s\": {:.0}, \"end_to_end_lines_per_s\": {:.0}, \"events_recorded\": {}, \"events_lost\": {}}}",
        n as f64 / parse_s,
        n as f64 / e2e_s,
        summary.records,
        summary.lost
    );
}
