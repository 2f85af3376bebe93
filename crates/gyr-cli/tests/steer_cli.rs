//! The steering commands end to end against a running N-body program, as a user types them:
//! find it, read and change it, have bad requests refused with the reason, actuate, pause and
//! step it, watch its events, control its sensors, read the steering log; and over TCP, a
//! read-only token cannot steer.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "GYR_TEST_NBODY_CHILD";

/// The program under steering: runs in a child process until killed.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    let sim = gyr_example_nbody::register(64).expect("register nbody");
    let stop = gyr_example_nbody::stop_flag();
    gyr_example_nbody::run(&sim, 2, 0, &stop);
    drop(rt);
    std::process::exit(0);
}

struct Program {
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(test: &str, env: &[(&str, &str)]) -> Program {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture"])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    let p = Program { child, dir };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !p.dir.path().join(format!("{}.json", p.child.id())).exists() {
        assert!(
            Instant::now() < deadline,
            "the program did not announce itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    p
}

fn gyr(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(args)
        .env("GYR_SOCKET_DIR", dir)
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = gyr(dir, args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "gyr {args:?} failed: {err}{out}");
    out
}

fn refused(dir: &Path, args: &[&str], reason: &str) {
    let o = gyr(dir, args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "gyr {args:?} should be refused: {err}"
    );
    assert!(
        err.contains(reason),
        "gyr {args:?}: expected {reason:?} in {err:?}"
    );
}

#[test]
fn steering_nbody_from_the_cli() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start("steering_nbody_from_the_cli", &[]);
    let (d, pid) = (p.dir.path(), p.child.id().to_string());
    let pid = pid.as_str();
    assert!(ok(d, &["ps"]).contains(pid));
    let ls = ok(d, &["ls", pid]);
    assert!(
        ls.contains("nbody.dt")
            && ls.contains("integration time step")
            && ls.contains("nbody.add_body(x: float"),
        "{ls}"
    );
    assert_eq!(ok(d, &["get", pid, "nbody.dt"]).trim(), "0.001");
    assert_eq!(
        ok(d, &["set", pid, "nbody.dt", "0.0005"]).trim(),
        "nbody.dt: 0.001 -> 0.0005"
    );
    assert_eq!(ok(d, &["get", pid, "nbody.dt"]).trim(), "0.0005");
    refused(
        d,
        &["set", pid, "nbody.dt", "5"],
        "5 is above the maximum 0.1 s; the value is unchanged",
    );
    refused(
        d,
        &["set", pid, "nbody.dt", "fast"],
        "`fast` is not a finite number",
    );
    refused(d, &["set", pid, "nbody.bodies", "3"], "is read-only");
    refused(
        d,
        &["set", pid, "nbody.nope", "1"],
        "has no attribute `nope`",
    );
    refused(d, &["set", pid, "nbody.dt"], "in pairs");
    assert_eq!(ok(d, &["get", pid, "nbody.dt"]).trim(), "0.0005");
    assert_eq!(
        ok(
            d,
            &[
                "call",
                pid,
                "nbody.add_body",
                "6",
                "0",
                "0",
                "0",
                "4",
                "0",
                "0.5"
            ]
        )
        .trim(),
        "65"
    );
    refused(
        d,
        &[
            "call",
            pid,
            "nbody.add_body",
            "6",
            "0",
            "0",
            "0",
            "4",
            "0",
            "-1",
        ],
        "mass must be positive, got -1",
    );
    refused(
        d,
        &["call", pid, "nbody.delete_body", "1000"],
        "there is no body 1000",
    );
    refused(
        d,
        &["call", pid, "nbody.explode"],
        "available: add_body, delete_body",
    );
    // Pause, step, resume.
    assert!(
        ok(d, &["pause", pid]).contains("pausing") || ok(d, &["status", pid]).contains("paused")
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok(d, &["status", pid]).contains("paused at step") {
        assert!(Instant::now() < deadline, "the program did not pause");
        std::thread::sleep(Duration::from_millis(20));
    }
    let step = |d| {
        ok(d, &["get", pid, "nbody.step"])
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let at = step(d);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(step(d), at, "a paused program does not advance");
    ok(d, &["step", pid, "3"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while step(d) != at + 3 {
        assert!(Instant::now() < deadline, "three steps were not taken");
        std::thread::sleep(Duration::from_millis(10));
    }
    ok(d, &["resume", pid]);
    // Live events; the client leaves after two and the program goes on.
    let watch = ok(d, &["watch", pid, "energy", "--json", "--limit", "2"]);
    let lines: Vec<serde_json::Value> = watch
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|l| l["type"] == "energy"), "{watch}");
    // Sensor control.
    assert!(
        ok(d, &["sensors", pid, "--type", "energy", "off"])
            .lines()
            .any(|l| l.starts_with("energy") && l.contains("off"))
    );
    refused(
        d,
        &["sensors", pid, "--type", "no_such_type", "off"],
        "no sensor type named `no_such_type`",
    );
    ok(d, &["sensors", pid, "--type", "energy", "on"]);
    // The steering log.
    let log = ok(d, &["log", pid]);
    for needle in [
        "set nbody.dt: 0.001 -> 0.0005",
        "refused nbody.dt = 5",
        "actuate nbody.add_body",
        "step 3",
        "sensors type `energy`: off",
    ] {
        assert!(log.contains(needle), "missing {needle:?} in\n{log}");
    }
    refused(
        d,
        &["get", "999999999", "nbody.dt"],
        "no gyr program with pid 999999999",
    );
}

#[test]
fn a_read_only_token_cannot_steer_over_tcp() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start(
        "a_read_only_token_cannot_steer_over_tcp",
        &[
            ("GYR_LISTEN", "127.0.0.1:0"),
            ("GYR_TOKEN", "steer-secret"),
            ("GYR_READ_TOKEN", "read-secret"),
        ],
    );
    let d = p.dir.path();
    let ps = ok(d, &["ps"]);
    let addr = ps
        .split("[tcp ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("ps shows the TCP address")
        .to_owned();
    let addr = addr.as_str();
    assert_eq!(
        ok(d, &["get", addr, "nbody.dt", "--token", "read-secret"]).trim(),
        "0.001"
    );
    refused(
        d,
        &["set", addr, "nbody.dt", "0.002", "--token", "read-secret"],
        "may watch but not steer",
    );
    refused(d, &["get", addr, "nbody.dt"], "needs a token");
    refused(
        d,
        &["get", addr, "nbody.dt", "--token", "guess"],
        "not valid",
    );
    assert_eq!(
        ok(
            d,
            &["set", addr, "nbody.dt", "0.002", "--token", "steer-secret"]
        )
        .trim(),
        "nbody.dt: 0.001 -> 0.002"
    );
}
