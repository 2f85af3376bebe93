//! `gyr watchdog` end to end: a shell script printing residual lines is run, watched and
//! recorded (typed events, the exit event with its status or signal and last lines, the
//! program's exit status as the watch-dog's); restarted with a changed argument, its control
//! and input files changed, through `gyr call` on the `watched` object; and a file followed
//! for a program the watch-dog did not start, where process control is refused.

use gyr_core::Value;
use gyr_core::trace::{Item, TraceReader};
use gyr_core::value::decode;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const SPEC: &str = r#"
[watchdog]
name = "test"
control_file = "ctl.txt"
input_files = ["input.dat"]
stop_grace_ms = 5000

[[event]]
name = "solver.residual"
pattern = '^iter\s+(?P<iter>\d+)\s+res\s+(?P<res>\S+)$'
fields = [{ name = "iter", type = "u32" }, { name = "res", type = "f64", design = 1e-6 }]

[[event]]
name = "solver.relax"
pattern = '^relax (?P<relax>\S+)$'
fields = [{ name = "relax", type = "f64" }]
"#;

type Event = (String, BTreeMap<String, Value>);

fn events(path: &Path) -> Vec<Event> {
    let mut r = TraceReader::open(path).expect("the trace opens");
    let mut out = Vec::new();
    r.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
            && let Ok(values) = decode(s, record.payload)
        {
            let fields = s
                .fields
                .iter()
                .map(|f| f.name.clone())
                .zip(values)
                .collect();
            out.push((s.name.clone(), fields));
        }
    });
    out
}

fn of<'a>(ev: &'a [Event], name: &str) -> Vec<&'a BTreeMap<String, Value>> {
    ev.iter()
        .filter(|(n, _)| n == name)
        .map(|(_, f)| f)
        .collect()
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spec.toml"), SPEC).unwrap();
    std::fs::create_dir(dir.path().join("sock")).unwrap();
    dir
}

fn gyr(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyr"));
    c.current_dir(dir)
        .env("GYR_SOCKET_DIR", dir.join("sock"))
        .env_remove("GYR_HUB")
        .env_remove("GYR_TRACE");
    c
}

fn watchdog(dir: &Path, script: &str) -> Output {
    gyr(dir)
        .args([
            "watchdog",
            "--spec",
            "spec.toml",
            "--trace",
            "t.gyr",
            "--quiet",
            "--",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap()
}

#[test]
fn a_failing_program_is_recorded_with_its_status_and_last_lines() {
    let dir = setup();
    let d = dir.path();
    let o = watchdog(
        d,
        "echo 'iter 1 res 1.0D-01'; echo 'iter 2 res 5.0E-02'; echo 'some banner'; echo 'diverging' >&2; printf 'iter 3 res 2.5D-02'; exit 3",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "the program's status: {err}");
    assert!(err.contains("exited with status 3"), "{err}");
    let ev = events(&d.join("t.gyr"));
    let res = of(&ev, "solver.residual");
    assert_eq!(
        res.len(),
        3,
        "the partial last line is given at the end: {ev:?}"
    );
    let mut iters: Vec<_> = res.iter().map(|f| f["iter"].clone()).collect();
    iters.sort_by_key(|v| v.as_f64().unwrap() as u64);
    assert_eq!(iters, [Value::UInt(1), Value::UInt(2), Value::UInt(3)]);
    assert!(res.iter().any(|f| f["res"] == Value::Float(0.025)));
    let exit = of(&ev, "watchdog.exit");
    assert_eq!(exit.len(), 1);
    assert_eq!(exit[0]["status"], Value::Int(3));
    assert_eq!(exit[0]["signal"], Value::Int(0));
    assert_eq!(exit[0]["crashed"], Value::Bool(false));
    let Value::Str(last) = &exit[0]["last_lines"] else {
        panic!("last lines")
    };
    assert!(
        last.contains("diverging") && last.contains("iter 3 res 2.5D-02"),
        "{last}"
    );
    let un = of(&ev, "watchdog.unmatched");
    assert!(!un.is_empty(), "unmatched lines are reported");
    assert_eq!(un.last().unwrap()["count"], Value::UInt(2));
    assert_eq!(of(&ev, "watchdog.start").len(), 1);
}

#[test]
fn a_crash_is_told_from_an_exit() {
    let dir = setup();
    let d = dir.path();
    let o = watchdog(d, "echo 'iter 1 res 0.5'; kill -SEGV $$");
    assert_eq!(
        o.status.code(),
        Some(128 + 11),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ev = events(&d.join("t.gyr"));
    let exit = of(&ev, "watchdog.exit");
    assert_eq!(exit.len(), 1);
    assert_eq!(exit[0]["crashed"], Value::Bool(true));
    assert_eq!(exit[0]["signal"], Value::Int(11));
    assert_eq!(exit[0]["status"], Value::Int(-1));
    assert_eq!(exit[0]["reason"], Value::Str("crashed".into()));
    assert_eq!(of(&ev, "solver.residual").len(), 1);
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_announced(d: &Path, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.join("sock").join(format!("{pid}.json")).exists() {
        assert!(
            Instant::now() < deadline,
            "the watch-dog did not announce itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn call(d: &Path, args: &[&str]) -> Output {
    gyr(d).args(args).output().unwrap()
}

fn ok(d: &Path, args: &[&str]) -> String {
    let o = call(d, args);
    assert!(
        o.status.success(),
        "gyr {args:?}: {}{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_program_is_restarted_with_a_changed_argument_through_the_watched_object() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("input.dat"), "nstep = 100\nrelax = 0.5   ! factor\n").unwrap();
    // Prints its relaxation factor; with 0.4 it ends, else it runs until stopped.
    let script =
        r#"echo "relax $2"; if [ "$2" = 0.4 ]; then exit 0; fi; while :; do sleep 0.05; done"#;
    let child = gyr(d)
        .args([
            "watchdog",
            "--spec",
            "spec.toml",
            "--trace",
            "t.gyr",
            "--quiet",
            "--",
            "sh",
            "-c",
            script,
            "prog",
            "--relax",
            "0.5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut w = Running(child);
    let pid = w.0.id().to_string();
    wait_announced(d, w.0.id());
    wait_for("the program to run", || {
        ok(d, &["get", &pid, "watched.state"]).contains("running")
    });
    let ls = ok(d, &["ls", &pid]);
    assert!(
        ls.contains("restart") && ls.contains("set_input") && ls.contains("design"),
        "{ls}"
    );

    ok(d, &["call", &pid, "watched.control", "checkpoint now"]);
    assert_eq!(
        std::fs::read_to_string(d.join("ctl.txt")).unwrap(),
        "checkpoint now\n"
    );
    ok(
        d,
        &[
            "call",
            &pid,
            "watched.set_input",
            "input.dat",
            "relax",
            "0.3",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(d.join("input.dat")).unwrap(),
        "nstep = 100\nrelax = 0.3   ! factor\n"
    );
    let o = call(
        d,
        &[
            "call",
            &pid,
            "watched.set_input",
            "/etc/passwd",
            "root",
            "x",
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not one of the spec's input_files"));
    let o = call(d, &["call", &pid, "watched.signal", "SIGNOPE"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown signal"));

    ok(
        d,
        &[
            "call",
            "--timeout-ms",
            "20000",
            &pid,
            "watched.restart",
            "--",
            "--relax 0.4",
        ],
    );
    let status = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = w.0.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "the watch-dog did not end with the program"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut err = String::new();
    std::io::Read::read_to_string(w.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    let ev = events(&d.join("t.gyr"));
    let starts = of(&ev, "watchdog.start");
    assert_eq!(starts.len(), 2, "{ev:?}");
    let Value::Str(cmd) = &starts[1]["command"] else {
        panic!("command")
    };
    assert!(cmd.ends_with("prog --relax 0.4"), "{cmd}");
    let mut relax: Vec<f64> = of(&ev, "solver.relax")
        .iter()
        .map(|f| f["relax"].as_f64().unwrap())
        .collect();
    relax.sort_by(f64::total_cmp);
    assert_eq!(relax, [0.4, 0.5]);
    let reasons: Vec<_> = of(&ev, "watchdog.exit")
        .iter()
        .map(|f| f["reason"].clone())
        .collect();
    assert_eq!(
        reasons,
        [Value::Str("restarted".into()), Value::Str("exited".into())]
    );
}

#[test]
fn files_of_a_running_program_are_followed_without_process_control() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("run.log"), "iter 1 res 0.5\nnoise\niter 2 res 0.25").unwrap();
    let child = gyr(d)
        .args([
            "watchdog",
            "--spec",
            "spec.toml",
            "--trace",
            "t.gyr",
            "--files",
            "run.log",
            "--until-idle",
            "8",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut w = Running(child);
    let pid = w.0.id().to_string();
    wait_announced(d, w.0.id());
    let o = call(d, &["call", &pid, "watched.restart", ""]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("follows files only"), "{err}");
    assert!(ok(d, &["get", &pid, "watched.state"]).contains("files"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = w.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "--until-idle did not end the watch"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    let ev = events(&d.join("t.gyr"));
    assert_eq!(of(&ev, "solver.residual").len(), 2, "{ev:?}");
    assert_eq!(
        of(&ev, "watchdog.file")[0]["what"],
        Value::Str("opened".into())
    );
    assert!(of(&ev, "watchdog.exit").is_empty());
}

#[test]
fn check_prints_the_event_types_and_what_a_sample_gives() {
    let dir = setup();
    let d = dir.path();
    let out = ok(d, &["watchdog", "--check", "spec.toml"]);
    assert!(
        out.contains("solver.residual { iter: u32, res: f64, instance: string, run: u32 }"),
        "{out}"
    );
    assert!(out.contains("design solver.residual.res"), "{out}");
    std::fs::write(d.join("sample.txt"), "iter 4 res 1.5D-3\nhello\n").unwrap();
    let out = ok(
        d,
        &[
            "watchdog",
            "--check",
            "spec.toml",
            "--sample",
            "sample.txt",
            "--show-unmatched",
        ],
    );
    assert!(out.contains("solver.residual iter=4 res=0.0015"), "{out}");
    assert!(out.contains("unmatched: hello"), "{out}");
    std::fs::write(d.join("bad.toml"), "[[event]]\nname = \"x\"\npattern = '(?P<y>'\nfields = [{ name = \"y\", type = \"f64\" }]\n").unwrap();
    let o = call(d, &["watchdog", "--check", "bad.toml"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml:3:"), "{err}");
}
