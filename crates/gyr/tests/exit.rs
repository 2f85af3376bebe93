//! Ordinary ways a program ends, and what gyr keeps of them: `std::process::exit` with the
//! guard alive, a guard dropped by accident (`let _ = gyr::init()`), SIGTERM and SIGINT, and
//! children forked without exec (`gyr::after_fork_in_child`). Each
//! test runs the program as a child process (this test binary, re-run with an environment
//! variable naming the case) and reads the trace it left.

use gyr::Sensor;
use gyr::gyr_core::trace::{Item, TraceReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Sensor)]
struct Step {
    n: u64,
}

const CASE: &str = "GYR_EXIT_TEST_CASE";
const EVENTS: u64 = 1000;

/// The child program, one per case. Never returns.
fn child(case: &str) -> ! {
    match case {
        "exit-with-guard" => {
            let rt = gyr::init().unwrap();
            for n in 0..EVENTS {
                Step { n }.emit();
            }
            // Ends the process without running any destructor: the guard is never dropped.
            let _keep = &rt;
            std::process::exit(0);
        }
        "guard-dropped" => {
            let _ = gyr::init();
            for n in 0..EVENTS {
                Step { n }.emit();
            }
            std::process::exit(0);
        }
        "signal" => {
            let _rt = gyr::init().unwrap();
            let mut n = 0;
            loop {
                Step { n }.emit();
                n += 1;
                if n % 1000 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
        "own-handler" => {
            // The program takes SIGINT itself before starting gyr: gyr must leave it alone.
            static SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            extern "C" fn handler(_: libc::c_int) {
                SEEN.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            // SAFETY: a valid handler that only stores to an atomic.
            unsafe {
                libc::signal(
                    libc::SIGINT,
                    handler as extern "C" fn(libc::c_int) as libc::sighandler_t,
                )
            };
            let rt = gyr::init().unwrap();
            let mut n = 0;
            while !SEEN.load(std::sync::atomic::Ordering::SeqCst) {
                Step { n }.emit();
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            rt.shutdown();
            std::process::exit(7);
        }
        "fork" => {
            let rt = gyr::init().unwrap();
            for n in 0..EVENTS / 2 {
                Step { n }.emit();
            }
            // Two children that run on without exec: one exits, one is ended by SIGTERM.
            for how in ["exit", "signal"] {
                // SAFETY: the child only emits (into its own copy of the rings), then exits or
                // raises a signal.
                let pid = unsafe { libc::fork() };
                assert!(pid >= 0);
                if pid == 0 {
                    gyr::after_fork_in_child();
                    for n in 0..EVENTS {
                        Step { n: EVENTS + n }.emit();
                    }
                    if how == "exit" {
                        std::process::exit(5);
                    }
                    // SAFETY: raising a signal in this process, whose action is the default.
                    unsafe { libc::raise(libc::SIGTERM) };
                    std::process::exit(6);
                }
                let mut status = 0;
                // SAFETY: waits for the child just forked, into a local.
                assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
                match how {
                    "exit" => assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 5),
                    _ => assert!(
                        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGTERM
                    ),
                }
            }
            for n in EVENTS / 2..EVENTS {
                Step { n }.emit();
            }
            let _keep = &rt;
            std::process::exit(0);
        }
        other => panic!("unknown case {other}"),
    }
}

fn run(case: &str, test: &str, dir: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", test, "--nocapture"])
        .env(CASE, case)
        .env("GYR_TRACE", dir.join("run.gyr"))
        .env("GYR_SOCKET_DIR", dir.join("sockets"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// The `n` of every `step` record, and whether the trace was closed.
fn steps(path: &Path) -> (Vec<u64>, bool) {
    let mut reader = TraceReader::open(path).unwrap();
    let mut ns = Vec::new();
    reader.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
            && s.name == "step"
        {
            ns.push(u64::from_le_bytes(record.payload.try_into().unwrap()));
        }
    });
    assert!(!reader.summary().is_corrupt(), "{:?}", reader.summary());
    (ns, reader.summary().clean_end)
}

fn files_left(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("sockets"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs a child `case` that emits [`EVENTS`] events and exits 0: every event is in its closed
/// trace, and its files are gone.
fn exits_with_every_event(case: &str, test: &str) {
    let dir = tempfile::tempdir().unwrap();
    let o = run(case, test, dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (ns, closed) = steps(&dir.path().join("run.gyr"));
    assert_eq!(ns, (0..EVENTS).collect::<Vec<_>>());
    assert!(closed, "the trace was not closed at exit");
    assert_eq!(files_left(dir.path()), Vec::<String>::new());
}

#[test]
fn process_exit_keeps_every_event() {
    if let Ok(case) = std::env::var(CASE) {
        child(&case);
    }
    exits_with_every_event("exit-with-guard", "process_exit_keeps_every_event");
}

#[test]
fn a_dropped_init_guard_keeps_monitoring() {
    if let Ok(case) = std::env::var(CASE) {
        child(&case);
    }
    exits_with_every_event("guard-dropped", "a_dropped_init_guard_keeps_monitoring");
}

/// Starts the "signal" child, waits for it to announce itself, sends `sig`.
fn signalled(sig: libc::c_int, test: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = run("signal", test, dir.path()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !files_left(dir.path()).iter().any(|f| f.ends_with(".json")) {
        assert!(
            Instant::now() < deadline,
            "the child never announced itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: sends a signal to our own child, which is still running (not yet waited for).
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(sig),
        "the process must still end by the signal: {status:?}"
    );
    let (ns, closed) = steps(&dir.path().join("run.gyr"));
    assert!(closed, "the trace was not closed on the signal");
    assert!(!ns.is_empty());
    // Every event up to the last one recorded is there: none lost on the way out.
    assert_eq!(ns, (0..ns.len() as u64).collect::<Vec<_>>());
    assert_eq!(files_left(dir.path()), Vec::<String>::new());
}

#[test]
fn sigterm_closes_the_trace_and_removes_the_files() {
    if let Ok(case) = std::env::var(CASE) {
        child(&case);
    }
    signalled(
        libc::SIGTERM,
        "sigterm_closes_the_trace_and_removes_the_files",
    );
}

#[test]
fn sigint_closes_the_trace_and_removes_the_files() {
    if let Ok(case) = std::env::var(CASE) {
        child(&case);
    }
    signalled(
        libc::SIGINT,
        "sigint_closes_the_trace_and_removes_the_files",
    );
}

#[test]
fn a_programs_own_signal_handler_is_left_alone() {
    if let Ok(case) = std::env::var(CASE) {
        child(&case);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = run(
        "own-handler",
        "a_programs_own_signal_handler_is_left_alone",
        dir.path(),
    )
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !files_left(dir.path()).iter().any(|f| f.ends_with(".json")) {
        assert!(
            Instant::now() < deadline,
            "the child never announced itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: sends a signal to our own child, which is still running.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(7),
        "the program's handler decides: {status:?}"
    );
    let (_, closed) = steps(&dir.path().join("run.gyr"));
    assert!(closed);
}

#[test]
fn a_forked_child_leaves_the_parents_trace_and_signals_alone() {
    if let Ok(case) = std::env::var(CASE) {
        child(&case);
    }
    // The children's exit and SIGTERM neither write into the parent's trace nor wake its
    // signal thread (which would end the parent by the signal).
    exits_with_every_event(
        "fork",
        "a_forked_child_leaves_the_parents_trace_and_signals_alone",
    );
}
