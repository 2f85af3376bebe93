//! gyr's own messages when the program's standard error cannot be written (a full disk, the
//! usual case on a long run whose logs and trace share a file system): the message is lost,
//! nothing else is. Each test runs the program as a child process (this test binary, re-run
//! with an environment variable naming the case) with its standard error on `/dev/full`.

use gyr::Sensor;
use std::io;
use std::process::{Command, Stdio};

#[derive(Sensor)]
#[sensor(name = "step")]
struct Step {
    n: u64,
}

const CASE: &str = "GYR_STDERR_TEST_CASE";

/// A sink that refuses every batch, so that the monitor reports it.
struct Refusing;

impl gyr::Sink for Refusing {
    fn name(&self) -> &str {
        "refusing"
    }
    fn batch(&mut self, _: &gyr::Batch) -> io::Result<()> {
        Err(io::Error::other("no space left"))
    }
}

/// The child: a failing sink beside a working one. Exits 0 when the working sink received
/// every event, those after the failure's message too.
fn child() -> ! {
    let kept = gyr::MemorySink::new();
    let rt = gyr::Builder::new()
        .serve(false)
        .handle_signals(false)
        .sink(Refusing)
        .sink(kept.clone())
        .start()
        .unwrap();
    Step { n: 0 }.emit();
    rt.flush();
    for n in 1..1000 {
        Step { n }.emit();
    }
    rt.flush();
    let got = kept.events("step").len();
    drop(rt);
    std::process::exit(if got == 1000 { 0 } else { 3 });
}

#[test]
fn a_full_standard_error_costs_the_message_only() {
    if std::env::var_os(CASE).is_some() {
        child();
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_full_standard_error_costs_the_message_only",
            "--nocapture",
        ])
        .env(CASE, "1")
        .stdout(Stdio::null())
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "the child lost events or panicked (101) when its standard error was full"
    );
}
