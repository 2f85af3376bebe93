//! `gyr run --threads` as a user runs it: a C program (compiled here with `cc`) runs with the
//! interposer, its exit status comes back, its trace is written and summarised, and while it
//! runs it is listed by `gyr ps` and watched with `gyr watch`; mistakes a user can make get a
//! message saying what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Threads taking a lock; `exit N` exits with N, `loop FILE` locks until FILE exists.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n;
static const char *stop;
static void *work(void *arg) {
    for (int i = 0; i < 1000 || (stop && access(stop, F_OK) != 0); i++) {
        pthread_mutex_lock(&m);
        n++;
        pthread_mutex_unlock(&m);
        if (stop) usleep(1000);
    }
    return arg;
}
int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "loop")) stop = argv[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    return argc == 3 && !strcmp(argv[1], "exit") ? atoi(argv[2]) : 0;
}
"#;

fn compile(dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = dir.join(if extra.is_empty() {
        "prog"
    } else {
        "prog-static"
    });
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(extra)
        .output()
        .expect("cc runs (install gcc)");
    out.status.success().then_some(bin)
}

fn gyr(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyr"));
    c.env("GYR_SOCKET_DIR", dir.join("sockets"))
        .env_remove("GYR_TRACE")
        .env_remove("GYR_INTERPOSE_LIB");
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn runs_the_program_forwards_its_status_and_writes_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile(dir.path(), &[]).unwrap();
    let trace = dir.path().join("run.gyr");
    let o = gyr(dir.path())
        .args(["run", "--threads", "--trace"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .args(["exit", "3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exited with status 3"), "{err}");
    assert!(
        err.contains(&format!("trace in {}", trace.display())),
        "{err}"
    );

    let o = gyr(dir.path())
        .args(["trace", "stats", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["closed_cleanly"], true);
    let count = |name: &str| {
        v["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map_or(0, |t| t["count"].as_u64().unwrap())
    };
    assert_eq!(count("gyr.mutex.acquire"), 2000);
    assert_eq!(count("gyr.thread.fork"), 2);
    assert_eq!(count("gyr.thread.join_end"), 2);

    // Without --trace: the status still comes back, and the summary says there is no file.
    let o = gyr(dir.path())
        .args(["run", "--threads", "--"])
        .arg(&prog)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("no trace file"), "{}", text(&o));
}

#[test]
fn a_running_program_is_listed_watched_and_ended_by_a_forwarded_signal() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile(dir.path(), &[]).unwrap();
    let trace = dir.path().join("run.gyr");
    let never = dir.path().join("never");
    let mut run = gyr(dir.path())
        .args(["run", "--threads", "--trace"])
        .arg(&trace)
        .arg("--")
        .arg(&prog)
        .arg("loop")
        .arg(&never)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `gyr ps` lists the program (not gyr itself) once its server is up.
    let deadline = Instant::now() + Duration::from_secs(60);
    let pid = loop {
        let o = gyr(dir.path()).arg("ps").output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        if let Some(line) = out.lines().find(|l| l.contains("prog loop")) {
            break line.split_whitespace().next().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "never listed: {out}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let o = gyr(dir.path())
        .args(["watch", &pid, "gyr.mutex.acquire", "--limit", "3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("gyr.mutex.acquire"))
            .count(),
        3,
        "{}",
        text(&o)
    );
    // SIGTERM to gyr reaches the program, which closes its trace and dies of it.
    // SAFETY: signals our own child, still running (not yet waited for).
    unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGTERM) };
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    let o = gyr(dir.path())
        .args(["trace", "stats", "--json"])
        .arg(&trace)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["closed_cleanly"], true, "{}", text(&o));
}

#[test]
fn mistakes_get_a_message_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let prog = compile(dir.path(), &[]).unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = gyr(dir.path());
        c.arg("run").args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let p = prog.to_str().unwrap();

    let o = run(&["--", p], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--threads"), "{}", text(&o));

    let o = run(&["--threads", "--", "no-such-program-anywhere"], &[]);
    assert_eq!(o.status.code(), Some(127));
    assert!(text(&o).contains("not found in PATH"), "{}", text(&o));

    let o = run(
        &["--threads", "--", p],
        &[("GYR_INTERPOSE_LIB", "/nowhere/lib.so")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("GYR_INTERPOSE_LIB"), "{}", text(&o));

    // A statically linked program (where the C library's static archive is installed).
    if let Some(stat) = compile(dir.path(), &["-static"]) {
        let o = run(&["--threads", "--", stat.to_str().unwrap()], &[]);
        assert_eq!(o.status.code(), Some(2));
        assert!(text(&o).contains("statically linked"), "{}", text(&o));
    }
}
