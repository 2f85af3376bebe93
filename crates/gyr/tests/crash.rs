//! What survives when the monitored program dies: a panic flushes every ring to the trace file
//! even when the process then aborts without running any destructor.

use gyr::Sensor;
use gyr::gyr_core::trace::{Item, TraceReader};
use std::process::Command;

#[derive(Sensor)]
struct Before {
    n: u32,
}

const CHILD: &str = "GYR_CRASH_TEST_CHILD";

/// Runs in a child process: records, panics on a thread, then aborts. Nothing shuts gyr down;
/// only the panic hook can get the events onto the file.
fn child(path: &str) -> ! {
    let rt = gyr::Builder::new().trace_file(path).start().unwrap();
    std::mem::forget(rt);
    for n in 0..1000 {
        Before { n }.emit();
    }
    let _ = std::thread::spawn(|| panic!("simulated crash")).join();
    std::process::abort();
}

#[test]
fn a_panic_flushes_the_trace_before_the_process_dies() {
    if let Ok(path) = std::env::var(CHILD) {
        child(&path);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.gyr");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panic_flushes_the_trace_before_the_process_dies",
            "--nocapture",
        ])
        .env(CHILD, &path)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child aborts");
    let mut reader = TraceReader::open(&path).unwrap();
    let mut ns = Vec::new();
    reader.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
            && s.name == "before"
        {
            ns.push(u32::from_le_bytes(record.payload.try_into().unwrap()));
        }
    });
    assert_eq!(ns, (0..1000).collect::<Vec<_>>());
    assert!(!reader.summary().clean_end, "the trace was never closed");
    assert!(!reader.summary().is_corrupt());
}
