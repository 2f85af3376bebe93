//! The example as a user runs it: `GYR_TRACE=t.gyr tracing-app`, a program that knows only
//! `tracing`, writes a trace whose events have their typed fields and whose spans pair into
//! slices in gyr's exports.

use gyr_core::Value;
use gyr_core::trace::{Item, TraceReader};
use gyr_core::value::decode;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// (type, thread, field values by name) of every record in the trace at `path`.
type Event = (String, u64, BTreeMap<String, Value>);

fn events(path: &Path) -> Vec<Event> {
    let mut r = TraceReader::open(path).expect("the trace opens");
    let mut out = Vec::new();
    r.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            let values = decode(s, record.payload).expect("payloads match their schema");
            let fields = s
                .fields
                .iter()
                .map(|f| f.name.clone())
                .zip(values)
                .collect();
            out.push((s.name.clone(), record.thread, fields));
        }
    });
    out
}

#[test]
fn a_program_using_only_tracing_writes_a_gyr_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.gyr");
    let o = Command::new(env!("CARGO_BIN_EXE_tracing-app"))
        .args(["--steps", "12", "--domains", "3", "--points", "300"])
        .args(["--pause-ms", "0"])
        .current_dir(dir.path())
        .env("GYR_TRACE", &trace)
        .env("GYR_SOCKET_DIR", dir.path())
        .env_remove("GYR_HUB")
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("12 sweeps") && out.contains(", 0 lost"),
        "{out}"
    );
    // The program's own log lines still appear (fmt layer, INFO and above).
    assert!(err.contains("sweep done"), "{err}");
    assert!(!err.contains("domain_change"), "{err}");

    let ev = events(&trace);
    let of = |name: &str| -> Vec<&Event> { ev.iter().filter(|e| e.0 == name).collect() };
    let residual = of("gyr_example_tracing.residual.info");
    assert_eq!(residual.len(), 12);
    for (k, (_, _, f)) in residual.iter().enumerate() {
        assert_eq!(f["step"], Value::UInt(k as u64 + 1));
        assert_eq!(f["message"], Value::Str("sweep done".into()));
        assert!(
            matches!(f["residual"], Value::Float(r) if r > 0.0 && r < 1.0),
            "{f:?}"
        );
        assert!(matches!(f["flux"], Value::Float(_)), "{f:?}");
    }
    // DEBUG events reach gyr although the fmt layer filters them out.
    assert_eq!(of("gyr_example_tracing.domain_change.debug").len(), 36);
    let sweeps = of("gyr_example_tracing.sweep.info");
    assert_eq!(sweeps.len(), 12);
    assert_eq!(sweeps[0].2["step"], Value::UInt(1));
    // Each `relax` span is entered on a worker: its begin, fields and end are there.
    let relax = of("gyr_example_tracing.relax.info");
    assert_eq!(relax.len(), 36);
    let main = sweeps[0].1;
    assert!(relax.iter().all(|e| e.1 != main));

    // Begin and end pair up on every thread, innermost first.
    let mut open: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut closed = 0;
    for (ty, thread, f) in &ev {
        let Some(Value::Str(name)) = f.get("name") else {
            continue;
        };
        match ty.as_str() {
            "gyr.span.begin" => open.entry(*thread).or_default().push(name.clone()),
            "gyr.span.end" => {
                let top = open.get_mut(thread).and_then(Vec::pop);
                assert_eq!(top.as_ref(), Some(name), "thread {thread}");
                closed += 1;
            }
            _ => {}
        }
    }
    assert_eq!(closed, 12 + 36);
    assert!(open.values().all(Vec::is_empty), "{open:?}");

    // gyr's own exports read them as slices: a begin and an end per span.
    let mut json = Vec::new();
    gyr_trace::export(
        TraceReader::open(&trace).unwrap(),
        gyr_trace::Format::Chrome,
        &mut json,
        gyr_trace::Options::default(),
    )
    .unwrap();
    let json = String::from_utf8(json).unwrap();
    let begins = json.matches(r#""ph":"B""#).count();
    let ends = json.matches(r#""ph":"E""#).count();
    assert_eq!((begins, ends), (12 + 36, 12 + 36), "slices: {json}");
    assert!(json.matches(r#""name":"relax""#).count() >= 36);
}
