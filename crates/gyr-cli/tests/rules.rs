//! `gyr rules test` and `gyr rules check` as a user runs them: a recorded residual that
//! converges then diverges replayed through a rules file, firings and exit codes checked, and
//! a broken rules file reported at its line and column.

use gyr_core::record::push_record;
use gyr_core::value::encode;
use gyr_core::{Field, FieldType, Schema, ThreadInfo, TraceEnd, TraceHeader, TraceWriter, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn gyr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(args)
        .output()
        .expect("run gyr")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A solver's residual, one event per iteration (1 ms apart): down 10x every 10 iterations
/// to 1e-6 at iteration 60, then up 10x every 2.
fn solver_trace(dir: &Path) -> PathBuf {
    let path = dir.join("solver.gyr");
    let header = TraceHeader {
        pid: 4242,
        command_line: vec!["/opt/bin/solver".into(), "--relax".into(), "0.8".into()],
        ..TraceHeader::default()
    };
    let schema = Schema::new(
        1,
        "solver.residual",
        vec![
            Field::new("iter", FieldType::U64),
            Field::new("rho", FieldType::F64),
        ],
    )
    .unwrap();
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    w.schema(&schema).unwrap();
    w.thread(&ThreadInfo {
        id: 1,
        name: "main".into(),
        os_tid: 4242,
    })
    .unwrap();
    let mut rec = Vec::new();
    for i in 0..=80u64 {
        let rho = if i <= 60 {
            10f64.powf(-(i as f64) / 10.0)
        } else {
            1e-6 * 10f64.powf((i - 60) as f64 / 2.0)
        };
        let payload = encode(&schema, &[Value::UInt(i), Value::Float(rho)]).unwrap();
        push_record(&mut rec, 1, i * 1_000_000, i, 0, &payload);
    }
    w.records(1, &rec).unwrap();
    std::fs::write(&path, w.finish(&TraceEnd::default()).unwrap()).unwrap();
    path
}

const RULES: &str = r#"
[[rule]]
name = "converged"
on = "solver.residual"
when = 'dropped("rho", 4, 100)'
then = 'alert("info", `converged at iteration ${iter}`);'

[[rule]]
name = "diverging"
on = "solver.residual"
salience = 10
when = 'rose("rho", 2, 20)'
then = '''
alert("error", `residual rose 100x within 20 iterations at ${iter}`);
assert("diverged", #{ iter: iter });
'''

[[rule]]
name = "restart-smaller"
when = 'has("diverged")'
then = '''
set_input("solver.in", "relax", 0.4);
restart("--relax 0.4");
'''
"#;

#[test]
fn rules_test_replays_a_trace_and_shows_what_fired_when() {
    let dir = tempfile::tempdir().unwrap();
    let trace = solver_trace(dir.path());
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, RULES).unwrap();
    let (r, t) = (rules.to_str().unwrap(), trace.to_str().unwrap());

    let o = gyr(&["rules", "test", r, t]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let firings: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("s  solver[4242]"))
        .collect();
    assert_eq!(firings.len(), 3, "{out}");
    assert!(
        firings[0].contains("converged: dropped(\"rho\", 4, 100)"),
        "{out}"
    );
    assert!(firings[0].contains("converged at iteration 40"), "{out}");
    assert!(firings[0].trim_start().starts_with("0.040000s"), "{out}");
    assert!(
        firings[1].contains("diverging: rose(\"rho\", 2, 20)"),
        "{out}"
    );
    assert!(firings[1].contains("at 64"), "{out}");
    assert!(firings[2].contains("restart-smaller"), "{out}");
    assert!(
        firings[2].contains("set_input solver.in: relax = 0.4; restart \"--relax 0.4\""),
        "{out}"
    );
    assert!(
        out.contains("81 events from 1 trace(s), 3 firings"),
        "{out}"
    );

    let o = gyr(&["rules", "test", r, t, "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[1]["rule"], "diverging");
    assert_eq!(lines[1]["t_ns"], 64_000_000);
    assert_eq!(lines[1]["actions"][0]["severity"], "error");
    assert_eq!(lines[1]["actions"][1]["action"], "assert");
    assert_eq!(lines[2]["actions"][1]["args"], "--relax 0.4");
    let summary = &lines[3]["summary"];
    assert_eq!(summary["events"], 81);
    assert_eq!(summary["rules"][0]["fired"], 1);
    assert_eq!(summary["rules"][1]["errors"], 0);
}

#[test]
fn a_broken_rules_file_is_reported_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let trace = solver_trace(dir.path());
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nname = \"x\"\non = \"solver.residual\"\nwhen = 'rho > 1 &&'\nthen = ''\n",
    )
    .unwrap();
    let o = gyr(&[
        "rules",
        "test",
        rules.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    let want = format!("{}:4:", rules.display());
    assert!(err.contains(&want) && err.contains("rule `x`"), "{err}");

    let o = gyr(&["rules", "check", rules.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));

    std::fs::write(&rules, RULES).unwrap();
    let o = gyr(&["rules", "check", rules.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("on solver.residual"), "{out}");
    assert!(out.contains("3 rules, valid"), "{out}");

    // Not a trace; a missing rules file.
    let o = gyr(&[
        "rules",
        "test",
        rules.to_str().unwrap(),
        rules.to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not a gyr trace") || err.contains("trace"),
        "{err}"
    );
    let o = gyr(&["rules", "check", "/nonexistent/rules.toml"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("check the path"), "{err}");
}
