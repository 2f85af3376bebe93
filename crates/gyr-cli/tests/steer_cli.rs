//! The steering commands end to end against a running N-body program, as a user types them:
//! find it, read and change it, have bad requests refused with the reason, actuate, pause and
//! step it, watch its events, control its sensors, read the steering log; and over TCP, a
//! read-only token cannot steer. Then the same through `gyr script` and `gyr attach`, and the
//! API itself with malformed requests and clients that stall or vanish mid-stream.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "GYR_TEST_NBODY_CHILD";

const STEPS: &str = "GYR_TEST_NBODY_STEPS";

/// The program under steering: runs in a child process until killed, or for `$STEPS` steps.
fn child_program() -> ! {
    let rt = gyr::init().expect("start gyr");
    if let Some(message) = std::env::var_os(ALERT) {
        // A program raising its own alert, as a `gyr.alert` event.
        use gyr::gyr_core::{Field, FieldType, Value};
        let alert = gyr::DynamicSensor::register(
            "gyr.alert",
            vec![
                Field::new("severity", FieldType::Str),
                Field::new("message", FieldType::Str),
            ],
        )
        .expect("register gyr.alert");
        alert
            .emit(&[
                Value::Str("warning".into()),
                Value::Str(message.to_string_lossy().into_owned()),
            ])
            .expect("emit the alert");
    }
    let sim = gyr_example_nbody::register(64).expect("register nbody");
    let stop = gyr_example_nbody::stop_flag();
    let steps = std::env::var(STEPS)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    gyr_example_nbody::run(&sim, 2, steps, &stop);
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

/// Waits until `gyr status PID` shows `state`.
fn wait_status(dir: &Path, pid: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok(dir, &["status", pid]).contains(state) {
        assert!(
            Instant::now() < deadline,
            "program {pid} never showed {state:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
    wait_status(d, pid, "paused at step");
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
            ("GYR_TOKEN", "steer-secret-0123456789"),
            ("GYR_READ_TOKEN", "read-secret-0123456789"),
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
        ok(
            d,
            &["get", addr, "nbody.dt", "--token", "read-secret-0123456789"]
        )
        .trim(),
        "0.001"
    );
    refused(
        d,
        &[
            "set",
            addr,
            "nbody.dt",
            "0.002",
            "--token",
            "read-secret-0123456789",
        ],
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
            &[
                "set",
                addr,
                "nbody.dt",
                "0.002",
                "--token",
                "steer-secret-0123456789"
            ]
        )
        .trim(),
        "nbody.dt: 0.001 -> 0.002"
    );
}

#[test]
fn scripts_steer_nbody_and_stop_at_the_failing_line() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start("scripts_steer_nbody_and_stop_at_the_failing_line", &[]);
    let (d, pid) = (p.dir.path(), p.child.id().to_string());
    let pid = pid.as_str();
    let script = d.join("plan.rhai");
    std::fs::write(
        &script,
        r#"
pause();
let st = wait_paused(10000);
print(`paused: ${st.paused}`);
set("nbody.dt", 0.002);
set(#{"nbody.softening": 0.05, "nbody.dt": 0.003});
let n = actuate("nbody.add_body", 3.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.001);
print(`bodies: ${n}`);
let target = get("nbody.step") + 25;
run_until("nbody.step >= " + target);
wait_paused(10000);
print(`stopped at target: ${get("nbody.step") == target}`);
let all = get("nbody");
print(`dt: ${all["nbody.dt"]}`);
resume();
let e = next_event("energy", 10000);
print(`energy has bodies: ${e.bodies}`);
set("nbody.dt", 7.0);
print("not reached");
"#,
    )
    .unwrap();
    let o = gyr(d, &["script", pid, script.to_str().unwrap()]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    for line in [
        "paused: true",
        "bodies: 65",
        "stopped at target: true",
        "dt: 0.003",
        "energy has bodies: 65",
    ] {
        assert!(out.contains(line), "expected {line:?} in {out}");
    }
    assert!(!out.contains("not reached"), "{out}");
    assert!(
        err.contains("plan.rhai:18:1:") && err.contains("out of range"),
        "the error names the line and the reason: {err}"
    );
    // The refused write left the value as it was.
    assert_eq!(ok(d, &["get", pid, "nbody.dt"]).trim(), "0.003");

    // A syntax error is reported before anything runs.
    std::fs::write(&script, "pause();\nlet x = ;\n").unwrap();
    refused(
        d,
        &["script", pid, script.to_str().unwrap()],
        "plan.rhai:2:9",
    );
    assert!(ok(d, &["status", pid]).contains("running"));
    refused(
        d,
        &["script", pid, d.join("missing.rhai").to_str().unwrap()],
        "cannot read the script",
    );

    // run-until from the command line, and conditions it cannot understand. Paused first, so
    // that the target is still ahead when the condition arrives, however busy the machine.
    ok(d, &["pause", pid]);
    wait_status(d, pid, "paused");
    let target = ok(d, &["get", pid, "nbody.step"])
        .trim()
        .parse::<u64>()
        .unwrap()
        + 40;
    let cond = format!("nbody.step >= {target} or nbody.bodies > 1000");
    assert!(ok(d, &["run-until", pid, &cond]).contains("running until"));
    wait_status(d, pid, "paused");
    assert_eq!(
        ok(d, &["get", pid, "nbody.step"]).trim(),
        target.to_string()
    );
    refused(d, &["run-until", pid, "nbody.step >"], "bad condition");
    refused(
        d,
        &["run-until", pid, "nbody.warp > 1"],
        "no attribute `warp`",
    );
    refused(d, &["run-until", pid, "nbody.step > fast"], "nbody.step");
    ok(d, &["resume", pid]);
}

#[test]
fn scripts_that_run_away_stop_at_a_limit_with_their_line() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start("scripts_that_run_away_stop_at_a_limit_with_their_line", &[]);
    let (d, pid) = (p.dir.path(), p.child.id().to_string());
    let script = d.join("away.rhai");
    for (source, place, limit) in [
        (
            "let s = \"x\";\nloop {\n    s += s;\n}\n",
            "away.rhai:3:",
            "limit of 1048576 bytes of strings",
        ),
        (
            "fn down(n) {\n    down(n + 1)\n}\nprint(get(\"nbody.step\"));\ndown(0);\n",
            // A limit passes through the script's functions to the line that called them.
            "away.rhai:5:1:",
            "limit of 64 nested function calls",
        ),
    ] {
        std::fs::write(&script, source).unwrap();
        let o = gyr(d, &["script", &pid, script.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{source}: {err}");
        assert!(
            err.contains(place) && err.contains(limit),
            "{source}: expected {place:?} and {limit:?} in {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("memory allocation"),
            "{err}"
        );
    }
    // The program is untouched.
    assert!(ok(d, &["status", &pid]).contains("running"));
}

#[test]
fn requests_that_cannot_work_are_refused_with_readable_reasons() {
    use gyr_proto::v1;
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start(
        "requests_that_cannot_work_are_refused_with_readable_reasons",
        &[],
    );
    let (d, pid) = (p.dir.path(), p.child.id().to_string());
    let pid = pid.as_str();
    // Losses are always reported: switching them off would be a lie.
    refused(
        d,
        &["sensors", pid, "--type", "gyr.lost", "off"],
        "losses are always reported",
    );
    refused(
        d,
        &["sensors", pid, "--type", "gyr.lost", "every", "10"],
        "losses are always reported",
    );
    refused(
        d,
        &["sensors", pid, "--instance", "nope", "off"],
        "no sensor instance named `nope`",
    );
    refused(
        d,
        &["sensors", pid, "--type", "energy", "every", "0"],
        "every N needs N ≥ 1; use `all` or `on`",
    );
    refused(d, &["step", pid, "0"], "1 or more");
    // What the program says back is shown, never sent to the terminal as a control sequence.
    let o = gyr(d, &["get", pid, "nbody.\u{1b}[2J\u{202e}dt"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("`\\u{1b}[2J\\u{202e}dt`"), "{err:?}");
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{202e}'),
        "{err:?}"
    );
    // Numbers far out of range read as numbers, not 309 digits.
    let o = gyr(d, &["set", pid, "nbody.dt", "1e308"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("1e308 is above the maximum 0.1 s"), "{err}");
    assert!(err.len() < 300, "{err}");
    // A uint is never -1.
    refused(
        d,
        &["run-until", pid, "nbody.step == -1"],
        "`nbody.step` is a uint",
    );
    // Bodies must be physical.
    fn add<'a>(pid: &'a str, args: [&'a str; 7]) -> Vec<&'a str> {
        let mut a = vec!["call", pid, "nbody.add_body"];
        a.extend(args);
        a
    }
    refused(
        d,
        &add(pid, ["6", "0", "0", "0", "4", "0", "1e308"]),
        "mass must be at most 1000000, got 1e308",
    );
    refused(
        d,
        &add(pid, ["1e300", "0", "0", "0", "4", "0", "1"]),
        "x must be a finite number from -1000000 to 1000000",
    );
    refused(
        d,
        &add(pid, ["0", "0", "0", "0", "-1e20", "0", "1"]),
        "vy must be a finite number",
    );
    // A refusal echoing 20 KB arrives cut short, not as a broken connection.
    let long = format!("nbody.{}", "x".repeat(20_000));
    let o = gyr(d, &["set", pid, &long, "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has no attribute `xxx") && err.contains("more bytes)") && err.len() < 5000,
        "{}",
        &err[..err.len().min(500)]
    );
    // Every client gets the same refusals from the server itself.
    let (rt, mut c) = raw_client(d, p.child.id());
    invalid(
        rt.block_on(c.control(v1::ControlRequest {
            action: v1::control_request::Action::Step as i32,
            steps: 0,
            ..Default::default()
        })),
        "1 or more",
    );
    invalid(
        rt.block_on(c.sensor_control(v1::SensorControlRequest {
            scope: v1::sensor_control_request::Scope::Type as i32,
            name: "energy".into(),
            every_nth: Some(0),
            ..Default::default()
        })),
        "every N needs N >= 1",
    );
    invalid(
        rt.block_on(c.sensor_control(v1::SensorControlRequest {
            scope: v1::sensor_control_request::Scope::Type as i32,
            name: "gyr.lost".into(),
            enabled: Some(false),
            ..Default::default()
        })),
        "losses are always reported",
    );
    let s = rt
        .block_on(c.get(v1::GetRequest {
            paths: vec![format!("nbody.{}", "é".repeat(10_000))],
        }))
        .expect_err("no such attribute");
    assert_eq!(s.code(), tonic::Code::NotFound, "{s:?}");
    assert!(
        s.message().ends_with("more bytes)") && s.message().len() < 5000,
        "{}",
        &s.message()[..200]
    );
    assert!(ok(d, &["status", pid]).contains("running"));
}

#[test]
fn watch_and_trace_dump_print_events_in_one_json_shape() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let traces = tempfile::tempdir().unwrap();
    let trace = traces.path().join("nbody.gyr");
    let mut p = start(
        "watch_and_trace_dump_print_events_in_one_json_shape",
        &[(STEPS, "400"), ("GYR_TRACE", trace.to_str().unwrap())],
    );
    let pid = p.child.id().to_string();
    let watched = gyr(
        p.dir.path(),
        &["watch", &pid, "energy", "--json", "--limit", "1"],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while p.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the program did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let dumped = ok(
        p.dir.path(),
        &[
            "trace",
            "dump",
            trace.to_str().unwrap(),
            "--type",
            "energy",
            "--json",
            "--limit",
            "1",
        ],
    );
    // The watch may have missed the run's end; its shape is what matters.
    let line =
        |s: &str| -> serde_json::Value { serde_json::from_str(s.lines().next().unwrap()).unwrap() };
    let w = line(&String::from_utf8_lossy(&watched.stdout));
    let t = line(&dumped);
    let kind = |v: &serde_json::Value| match v {
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Bool(_) => "bool",
        _ => "other",
    };
    for key in ["t_ns", "thread", "type", "fields"] {
        assert!(
            w.get(key).is_some() && t.get(key).is_some(),
            "{key}: {w} / {t}"
        );
    }
    let (wf, tf) = (
        w["fields"].as_object().unwrap(),
        t["fields"].as_object().unwrap(),
    );
    assert_eq!(
        wf.keys().collect::<Vec<_>>(),
        tf.keys().collect::<Vec<_>>(),
        "{w} / {t}"
    );
    for (name, v) in wf {
        assert_eq!(kind(v), kind(&tf[name]), "field {name}: {w} / {t}");
    }
    assert_eq!(kind(&wf["total"]), "number", "{w}");
}

#[test]
fn attach_lists_steers_and_shows_changes_live() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start("attach_lists_steers_and_shows_changes_live", &[]);
    let (d, pid) = (p.dir.path(), p.child.id().to_string());
    let mut attach = Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(["attach", &pid])
        .env("GYR_SOCKET_DIR", d)
        .env("XDG_STATE_HOME", d)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let out = attach.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut s = seen.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        })
    };
    let wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !seen.lock().unwrap().contains(what) {
            assert!(
                Instant::now() < deadline,
                "attach never printed {what:?}; it printed:\n{}",
                seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut input = attach.stdin.take().unwrap();
    let mut send = |line: &str| {
        input.write_all(format!("{line}\n").as_bytes()).unwrap();
        input.flush().unwrap();
    };
    // The object list on arrival.
    wait_for("nbody.add_body(");
    send("set nbody.dt 0.004");
    wait_for("nbody.dt: 0.001 -> 0.004");
    // A change by another client shows up live.
    ok(d, &["set", &pid, "nbody.softening", "0.07"]);
    wait_for("[steer]");
    wait_for("nbody.softening");
    send("set nbody.dt -1");
    wait_for("error: `nbody.dt` out of range");
    send("warp 9");
    wait_for("unknown command `warp`");
    send("call nbody.add_body 2 0 0 0 0.5 0 0.001");
    wait_for("nbody.add_body -> 65");
    send("watch energy");
    wait_for("[event]");
    wait_for("energy {");
    send("unwatch");
    send("pause");
    wait_for("paused");
    send("get nbody");
    wait_for("nbody.bodies = 65");
    send("resume");
    send("quit");
    let status = attach.wait().unwrap();
    reader.join().unwrap();
    assert!(status.success(), "{}", seen.lock().unwrap());
    // Leaving changed nothing: the program runs on.
    assert!(ok(d, &["status", &pid]).contains("running"));
}

/// Asserts that the server refused a request as invalid, saying `what`.
fn invalid<T: std::fmt::Debug>(r: Result<tonic::Response<T>, tonic::Status>, what: &str) {
    let s = r.expect_err("should be refused");
    assert_eq!(s.code(), tonic::Code::InvalidArgument, "{s:?}");
    assert!(s.message().contains(what), "expected {what:?} in {s:?}");
}

/// A raw client of the program's API, for requests the CLI would never send.
fn raw_client(
    dir: &Path,
    pid: u32,
) -> (
    tokio::runtime::Runtime,
    gyr_proto::v1::gyr_client::GyrClient<tonic::transport::Channel>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let channel = rt
        .block_on(gyr_client::connect::unix(dir.join(format!("{pid}.sock"))))
        .unwrap();
    (rt, gyr_proto::v1::gyr_client::GyrClient::new(channel))
}

#[test]
fn malformed_requests_are_refused_with_reasons() {
    use gyr_proto::v1;
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start("malformed_requests_are_refused_with_reasons", &[]);
    let (rt, mut c) = raw_client(p.dir.path(), p.child.id());
    invalid(
        rt.block_on(c.get(v1::GetRequest { paths: vec![] })),
        "at least one attribute",
    );
    invalid(
        rt.block_on(c.set(v1::SetRequest { writes: vec![] })),
        "at least one attribute",
    );
    invalid(
        rt.block_on(c.set(v1::SetRequest {
            writes: vec![v1::PathValue {
                path: "nbody.dt".into(),
                value: None,
            }],
        })),
        "no value for `nbody.dt`",
    );
    invalid(
        rt.block_on(c.set(v1::SetRequest {
            writes: vec![v1::PathValue {
                path: "nbody.dt".into(),
                value: Some(v1::Value { kind: None }),
            }],
        })),
        "empty",
    );
    invalid(
        rt.block_on(c.set(v1::SetRequest {
            writes: vec![v1::PathValue {
                path: "nbody.dt".into(),
                value: Some(v1::Value::text("[1, 2]")),
            }],
        })),
        "nbody.dt",
    );
    invalid(
        rt.block_on(c.control(v1::ControlRequest {
            action: 99,
            ..Default::default()
        })),
        "pause, resume, step or run-until",
    );
    invalid(
        rt.block_on(c.control(v1::ControlRequest {
            action: v1::control_request::Action::RunUntil as i32,
            ..Default::default()
        })),
        "empty",
    );
    invalid(
        rt.block_on(c.call(v1::CallRequest {
            target: "nbody.add_body".into(),
            args: vec![v1::Value::text("north")],
            timeout_ms: 1000,
        })),
        "argument 1",
    );
    invalid(
        rt.block_on(c.call(v1::CallRequest {
            target: String::new(),
            ..Default::default()
        })),
        "not a steering path",
    );
    // A stream of garbage instead of HTTP/2 costs the program nothing.
    {
        use std::io::Write;
        let mut raw = std::os::unix::net::UnixStream::connect(
            p.dir.path().join(format!("{}.sock", p.child.id())),
        )
        .unwrap();
        let _ = raw.write_all(b"GET / HTTP/1.0\r\n\r\nnot grpc at all\x00\xff");
    }
    let st = rt
        .block_on(c.status(v1::StatusRequest {}))
        .unwrap()
        .into_inner();
    assert_eq!(st.pid, p.child.id());
}

#[test]
fn clients_that_stall_or_vanish_mid_stream_cost_the_program_nothing() {
    use gyr_proto::v1;
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let p = start(
        "clients_that_stall_or_vanish_mid_stream_cost_the_program_nothing",
        &[],
    );
    let (rt, mut c) = raw_client(p.dir.path(), p.child.id());
    let step = |c: &mut v1::gyr_client::GyrClient<_>| -> u64 {
        let r = rt
            .block_on(c.get(v1::GetRequest {
                paths: vec!["nbody.step".into()],
            }))
            .unwrap()
            .into_inner();
        r.values[0]
            .value
            .as_ref()
            .unwrap()
            .to_string()
            .parse()
            .unwrap()
    };
    // A client that vanishes after its first batch.
    {
        let (rt2, mut c2) = raw_client(p.dir.path(), p.child.id());
        let mut s = rt2
            .block_on(c2.subscribe(v1::SubscribeRequest::default()))
            .unwrap()
            .into_inner();
        assert!(rt2.block_on(s.message()).unwrap().is_some());
    }
    // A client that stops reading.
    let mut stalled = rt
        .block_on(c.subscribe(v1::SubscribeRequest::default()))
        .unwrap()
        .into_inner();
    let before = step(&mut c);
    let records_before = rt
        .block_on(c.status(v1::StatusRequest {}))
        .unwrap()
        .into_inner()
        .records;
    // The program keeps stepping and recording while the client reads nothing.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = rt
            .block_on(c.status(v1::StatusRequest {}))
            .unwrap()
            .into_inner();
        if st.records > records_before + 50_000 {
            break;
        }
        assert!(Instant::now() < deadline, "the program stopped recording");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(step(&mut c) > before + 1000, "the program slowed down");
    // The stalled client, reading again, is told how much it missed.
    let mut lost = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while lost == 0 {
        assert!(
            Instant::now() < deadline,
            "no loss count reached the client"
        );
        lost += rt
            .block_on(stalled.message())
            .unwrap()
            .expect("stream open")
            .lost;
    }
    // A fresh client still gets events.
    let mut fresh = rt
        .block_on(c.subscribe(v1::SubscribeRequest {
            types: vec!["energy".into()],
            threads: vec![],
            decoded: false,
        }))
        .unwrap()
        .into_inner();
    let b = rt.block_on(fresh.message()).unwrap().expect("a batch");
    assert!(b.schemas.iter().any(|s| s.name == "energy"));
}

#[test]
fn a_watched_program_exits_cleanly_and_the_watch_ends() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let mut p = start(
        "a_watched_program_exits_cleanly_and_the_watch_ends",
        &[(STEPS, "3000")],
    );
    let pid = p.child.id().to_string();
    let watch = Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(["watch", &pid, "energy"])
        .env("GYR_SOCKET_DIR", p.dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the program did not exit while watched"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let o = watch.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "watch should end cleanly: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("step: 3000"),
        "the last energy event was shown"
    );
}

/// A `gyr hub` process, killed when dropped.
struct HubProcess(Child);
impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `gyr hub` (gRPC on a free port, no discovery); returns it and its gRPC address.
fn start_hub(dir: &Path) -> (HubProcess, String) {
    use std::io::BufRead;
    let mut hub = HubProcess(
        Command::new(env!("CARGO_BIN_EXE_gyr"))
            .args([
                "hub",
                "--listen",
                "127.0.0.1:0",
                "--grpc",
                "127.0.0.1:0",
                "--no-discover",
            ])
            .env("GYR_SOCKET_DIR", dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(hub.0.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the hub printed its addresses")
            .unwrap();
        if let Some(rest) = line.trim().strip_prefix("gRPC API at ") {
            break rest.split(':').take(2).collect::<Vec<_>>().join(":");
        }
    };
    (hub, addr)
}

/// Waits until the hub at `addr` lists `pid` as pushing to it.
fn wait_pushed(dir: &Path, addr: &str, pid: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = ok(dir, &["ps", "--hub", addr]);
        if out
            .lines()
            .any(|l| l.trim_start().starts_with(pid) && l.contains("pushed"))
        {
            return;
        }
        assert!(Instant::now() < deadline, "the hub never listed it: {out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn steering_a_pushing_program_through_a_hub() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let (_hub, addr) = start_hub(dir.path());
    let p = start(
        "steering_a_pushing_program_through_a_hub",
        &[("GYR_HUB", &addr)],
    );
    let pid = p.child.id().to_string();
    let d = dir.path();
    wait_pushed(d, &addr, &pid);
    let target = format!("{pid}@{addr}");
    // The hub attaches back to the program's server for steering; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gyr(d, &["get", &target, "nbody.dt"]).status.success() {
        assert!(Instant::now() < deadline, "cannot steer through the hub");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ok(d, &["set", &target, "nbody.dt", "0.002"]).contains("0.001 -> 0.002"));
    assert_eq!(ok(d, &["get", &target, "nbody.dt"]).trim(), "0.002");
    refused(d, &["set", &target, "nbody.dt", "5"], "out of range");
    refused(
        d,
        &["get", &format!("1@{addr}"), "nbody.dt"],
        "no program 1",
    );
    refused(d, &["get", &format!("x@{addr}"), "nbody.dt"], "pid");
    // One live program: the hub's own address names it.
    assert_eq!(ok(d, &["get", &addr, "nbody.dt"]).trim(), "0.002");
    assert!(ok(d, &["log", &target]).contains("via hub"));
}

/// Set in a child program: it emits one `gyr.alert` event with this message.
const ALERT: &str = "GYR_TEST_ALERT";

#[test]
fn the_hub_lists_a_programs_alerts() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_hub, addr) = start_hub(d);
    assert!(ok(d, &["alerts", "--hub", &addr]).contains("has no alerts"));
    let p = start(
        "the_hub_lists_a_programs_alerts",
        &[("GYR_HUB", &addr), (ALERT, "energy drifts")],
    );
    let pid = p.child.id().to_string();
    wait_pushed(d, &addr, &pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let out = ok(d, &["alerts", "--hub", &addr]);
        if out.contains("energy drifts") {
            break out;
        }
        assert!(Instant::now() < deadline, "the alert never showed: {out}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let line = listed
        .lines()
        .find(|l| l.contains("energy drifts"))
        .unwrap();
    assert!(line.contains(&pid) && line.contains("warning"), "{listed}");
    let json = ok(d, &["alerts", "--hub", &addr, "--json", "--pid", &pid]);
    let v: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(v["message"], "energy drifts");
    assert_eq!(v["severity"], "warning");
    assert_eq!(v["pid"].as_u64().unwrap().to_string(), pid);
    assert!(ok(d, &["alerts", "--hub", &addr, "--pid", "1"]).contains("has no alerts"));
}

#[test]
fn a_watch_through_a_hub_ends_when_the_program_does() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_hub, addr) = start_hub(d);
    let mut p = start(
        "a_watch_through_a_hub_ends_when_the_program_does",
        &[("GYR_HUB", &addr)],
    );
    let pid = p.child.id().to_string();
    wait_pushed(d, &addr, &pid);
    let target = format!("{pid}@{addr}");
    let mut watch = Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(["watch", &target, "energy"])
        .env("GYR_SOCKET_DIR", d)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(d.join("watch.err")).unwrap())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let wait_for = |what: &dyn Fn(&str) -> bool, seen: &mut Vec<String>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !seen.iter().any(|l| what(l)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) => seen.push(l),
                Err(_) => panic!(
                    "the watch never showed the event: {seen:?}\nit said: {}\nthe hub: {}",
                    std::fs::read_to_string(d.join("watch.err")).unwrap_or_default(),
                    String::from_utf8_lossy(&gyr(d, &["ps", "--hub", &addr]).stdout),
                ),
            }
        }
    };
    wait_for(&|l| l.contains("step:"), &mut seen);
    // Paused, the program's last event is known: the energy of the last tenth step.
    ok(d, &["pause", &target]);
    wait_status(d, &target, "paused");
    let step: u64 = ok(d, &["get", &target, "nbody.step"])
        .trim()
        .parse()
        .unwrap();
    let last = format!("step: {}", step / 10 * 10);
    wait_for(&|l| l.contains(&last), &mut seen);
    p.child.kill().unwrap();
    p.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = watch.kill();
            panic!("the watch through the hub did not end after the program did");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(d.join("watch.err")).unwrap();
    assert!(status.success(), "the watch should end cleanly: {err}");
}

#[test]
fn records_a_failing_trace_file_lost_are_counted_in_status() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("nbody.gyr");
    // The trace file may grow to 64 KiB, as on a disk that fills up: writing past that fails
    // (EFBIG; the signal that would kill the program is ignored, as a full disk sends none).
    let mut child = Command::new("sh")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 64; exec \"$0\" \"$@\"",
            std::env::current_exe().unwrap().to_str().unwrap(),
            "--exact",
            "records_a_failing_trace_file_lost_are_counted_in_status",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("GYR_SOCKET_DIR", dir.path())
        .env("GYR_TRACE", &trace)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Program {
        child: {
            // `exec` keeps the pid: the program announces itself under the shell's.
            let pid = child.id();
            let deadline = Instant::now() + Duration::from_secs(30);
            while !dir.path().join(format!("{pid}.json")).exists() {
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "the program exited at start"
                );
                assert!(
                    Instant::now() < deadline,
                    "the program did not announce itself"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            child
        },
        dir,
    };
    let pid = p.child.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = ok(p.dir.path(), &["status", &pid]);
        let lost: u64 = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("events"))
            .and_then(|l| l.split(", ").nth(1))
            .and_then(|l| l.trim().strip_suffix(" lost"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no loss count in {out}"));
        if lost > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the trace file cannot grow, yet status says nothing was lost: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(std::fs::metadata(&trace).unwrap().len() <= 64 * 1024);
}

/// A program started with `GYR_RULES` runs the file in its own steering thread: `gyr rules
/// list PID` shows its rules and their state, the same through a hub (`PID@HUB`), and the
/// alert a rule raised reaches the hub's alerts with the rule's name.
#[test]
fn a_program_runs_its_own_rules_file_and_lists_it() {
    if std::env::var_os(CHILD).is_some() {
        child_program();
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rules = d.join("rules.toml");
    std::fs::write(
        &rules,
        r#"[[rule]]
name = "energy-seen"
on = "energy"
when = "step >= 0"
then = 'alert("info", `energy seen at step ${step}`);'

[[rule]]
name = "never"
on = "energy"
when = "step < 0"
then = 'alert("error", "a negative step");'
"#,
    )
    .unwrap();
    let (_hub, addr) = start_hub(d);
    let p = start(
        "a_program_runs_its_own_rules_file_and_lists_it",
        &[("GYR_RULES", rules.to_str().unwrap()), ("GYR_HUB", &addr)],
    );
    let pid = p.child.id().to_string();
    // The program announces itself in a directory of its own.
    let pd = p.dir.path();
    let deadline = Instant::now() + Duration::from_secs(60);
    let listed = loop {
        let out = ok(pd, &["rules", "list", &pid]);
        let fired = out
            .lines()
            .find(|l| l.starts_with("energy-seen"))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned));
        if fired.as_deref() == Some("1") {
            break out;
        }
        assert!(Instant::now() < deadline, "the rule never fired: {out}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        listed.contains(&format!("rules from {}", rules.display())),
        "{listed}"
    );
    let never = listed.lines().find(|l| l.starts_with("never")).unwrap();
    assert_eq!(never.split_whitespace().nth(2), Some("0"), "{listed}");
    let seen = listed
        .lines()
        .find(|l| l.starts_with("energy-seen"))
        .unwrap();
    assert!(seen.contains(&pid), "the last firing's pid: {listed}");
    let json = ok(pd, &["rules", "list", &pid, "--json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["origin"], rules.display().to_string());
    assert_eq!(v["load_error"], "");
    assert_eq!(v["rules"][0]["name"], "energy-seen");
    assert_eq!(v["rules"][0]["when"], "step >= 0");
    assert_eq!(v["rules"][0]["fired"], 1);
    // Through the hub, the program's own rules; the hub itself runs none.
    wait_pushed(d, &addr, &pid);
    let target = format!("{pid}@{addr}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = gyr(d, &["rules", "list", &target]);
        let out = String::from_utf8_lossy(&o.stdout);
        if o.status.success() && out.contains("energy-seen") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "cannot list the rules through the hub: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ok(d, &["rules", "list", "--hub", &addr]).contains("runs no rules"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = ok(d, &["alerts", "--hub", &addr, "--pid", &pid]);
        if let Some(line) = out.lines().find(|l| l.contains("energy seen at step")) {
            assert!(
                line.contains("energy-seen") && line.contains("info"),
                "{out}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the rule's alert never showed: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    refused(d, &["rules", "list"], "required");
}
