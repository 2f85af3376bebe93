//! The sensor of Python programs against a plain Python function call, measured in the same
//! run (part of `gyr-bench ffi`): inside one Python process with the `gyr` package installed
//! (crates/gyr-python), N emits of a two-field sensor (`step: u64, x: f64`) under a running
//! runtime (no server, no trace: the monitors drain and discard) against N calls of a Python
//! function taking the same arguments and doing nothing, in alternating rounds, each the best of
//! its rounds. The ratio is what the package's fast path is judged by: at most 3 times a call.
//!
//! The Python is `GYR_PYTHON`, else the workspace's `target/pyenv/bin/python`, else `python3`;
//! when none of them imports `gyr`, the figures are null and `python_missing` says why.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The ratio of a sensor's emit to a plain call that the package aims at.
const TARGET_RATIO: f64 = 3.0;

/// The measuring script: prints one JSON object.
const SCRIPT: &str = r#"
import json, sys, time
import gyr
n, rounds = int(sys.argv[1]), int(sys.argv[2])
gyr.init(serve=False)
s = gyr.Sensor("bench.python", step="u64", x="f64")
emit = s.emit
def f(step, x):
    pass
def time_emit():
    t = time.perf_counter_ns()
    for i in range(n):
        emit(i, 0.5)
    return (time.perf_counter_ns() - t) / n
def time_call():
    t = time.perf_counter_ns()
    for i in range(n):
        f(i, 0.5)
    return (time.perf_counter_ns() - t) / n
emits, calls = [], []
for _ in range(rounds):
    emits.append(time_emit())
    calls.append(time_call())
summary = gyr.shutdown()
print(json.dumps({"emit": emits, "call": calls, "records": summary["records"], "lost": summary["lost"]}))
"#;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python for which `check` (a line of Python) runs: `GYR_PYTHON`, else the workspace's
/// `target/pyenv/bin/python`, else `python3`; or why none does.
pub(crate) fn python_running(check: &str) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = match std::env::var_os("GYR_PYTHON") {
        Some(p) => vec![p.into()],
        None => vec![
            root().join("target/pyenv/bin/python"),
            PathBuf::from("python3"),
        ],
    };
    let mut why = Vec::new();
    for p in candidates {
        match Command::new(&p).args(["-c", check]).output() {
            Ok(o) if o.status.success() => return Ok(p),
            Ok(o) => why.push(format!(
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim()
            )),
            Err(e) => why.push(format!("{}: {e}", p.display())),
        }
    }
    Err(why.join("; "))
}

/// A Python that imports `gyr`, or why there is none.
fn python() -> Result<PathBuf, String> {
    python_running("import gyr; gyr.Sensor").map_err(|why| {
        format!(
            "no Python with the gyr package ({why}); install it with `python -m pip install ./crates/gyr-python`"
        )
    })
}

fn best(v: &[Value]) -> Option<f64> {
    v.iter().filter_map(Value::as_f64).reduce(f64::min)
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Measures, and returns the JSON fields: `python_sensor_ns`, `python_call_ns`,
/// `python_sensor_vs_call` and its target, or nulls and `python_missing`.
pub(crate) fn measure(quick: bool) -> serde_json::Map<String, Value> {
    let (n, rounds) = if quick { (50_000, 3) } else { (1_000_000, 7) };
    let missing = |why: String| {
        println!("  python: not measured: {why}");
        let mut m = serde_json::Map::new();
        m.insert("python_sensor_ns".into(), Value::Null);
        m.insert("python_call_ns".into(), Value::Null);
        m.insert("python_sensor_vs_call".into(), Value::Null);
        m.insert("python_missing".into(), json!(why));
        m
    };
    let py = match python() {
        Ok(p) => p,
        Err(why) => return missing(why),
    };
    let out = Command::new(&py)
        .args(["-c", SCRIPT, &n.to_string(), &rounds.to_string()])
        .env_remove("GYR_TRACE")
        .env_remove("GYR_HUB")
        .env_remove("GYR_LISTEN")
        .env_remove("GYR_RULES")
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return missing(format!(
                "the Python run failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Err(e) => return missing(format!("cannot run {}: {e}", py.display())),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed: Value = match text.lines().last().map(serde_json::from_str) {
        Some(Ok(v)) => v,
        _ => return missing(format!("the Python run printed no figures: {text}")),
    };
    let emits = parsed["emit"].as_array().cloned().unwrap_or_default();
    let calls = parsed["call"].as_array().cloned().unwrap_or_default();
    let (Some(emit), Some(call)) = (best(&emits), best(&calls)) else {
        return missing("the Python run printed no figures".into());
    };
    let ratio = r3(emit / call);
    println!(
        "  python: sensor emit {emit:.1} ns, plain function call {call:.1} ns ({ratio:.2}x, target at most {TARGET_RATIO}x)"
    );
    let mut m = serde_json::Map::new();
    m.insert("python_sensor_ns".into(), json!(r3(emit)));
    m.insert("python_call_ns".into(), json!(r3(call)));
    m.insert("python_sensor_vs_call".into(), json!(ratio));
    m.insert("python_sensor_vs_call_target".into(), json!(TARGET_RATIO));
    m.insert(
        "python_sensor_runs".into(),
        json!(
            emits
                .iter()
                .filter_map(Value::as_f64)
                .map(r3)
                .collect::<Vec<_>>()
        ),
    );
    m.insert(
        "python_call_runs".into(),
        json!(
            calls
                .iter()
                .filter_map(Value::as_f64)
                .map(r3)
                .collect::<Vec<_>>()
        ),
    );
    m.insert("python_events_recorded".into(), parsed["records"].clone());
    m.insert("python_events_lost".into(), parsed["lost"].clone());
    m
}
