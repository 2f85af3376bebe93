//! The `gyr` binary end to end: what a user types, what they read, and the exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

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

/// A small demo trace, written once per test.
fn demo_trace(dir: &Path) -> PathBuf {
    let path = dir.join("demo.gyr");
    let o = gyr(&[
        "demo",
        "heat",
        "--size",
        "32",
        "--domains",
        "2",
        "--steps",
        "40",
        "--trace",
        path.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "demo failed: {out}{err}");
    assert!(out.contains("done: 40 steps"), "{out}");
    assert!(out.contains("0 lost"), "{out}");
    path
}

#[test]
fn stats_summarises_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = demo_trace(dir.path());
    let o = gyr(&["trace", "stats", path.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for needle in [
        "closed cleanly",
        "work_load",
        "residual",
        "row_sweep",
        "domain-0",
        "domain-1",
        "perturbation",
        "lost 0",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    let o = gyr(&["trace", "stats", "--json", path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["closed_cleanly"], true);
    assert_eq!(v["lost"], 0);
    let residual = v["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "residual")
        .unwrap();
    assert_eq!(residual["count"], 40);
}

#[test]
fn dump_filters_by_type_thread_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = demo_trace(dir.path());
    let p = path.to_str().unwrap();
    let o = gyr(&["trace", "dump", p, "--type", "residual", "--json"]);
    assert!(o.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 40);
    assert!(lines.iter().all(|l| l["type"] == "residual"));
    assert_eq!(lines[0]["fields"]["step"], 1);
    assert_eq!(lines[0]["fields"]["residual"], 25.0);
    let t0 = lines[10]["t_ns"].as_u64().unwrap();
    let t1 = lines[19]["t_ns"].as_u64().unwrap();
    let thread = lines[0]["thread"].as_u64().unwrap();
    let o = gyr(&[
        "trace",
        "dump",
        p,
        "--type",
        "residual",
        "--from",
        &format!("{t0}ns"),
        "--to",
        &format!("{t1}ns"),
        "--thread",
        &thread.to_string(),
    ]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 10, "{out}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("residual { step: 11, residual:"),
        "{out}"
    );
    let o = gyr(&["trace", "dump", p, "--type", "no_such_type"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("no event type named no_such_type") && err.contains("work_load"),
        "{err}"
    );
    let o = gyr(&["trace", "dump", p, "--from", "later"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn missing_foreign_and_corrupt_files_are_explained() {
    let dir = tempfile::tempdir().unwrap();
    let o = gyr(&[
        "trace",
        "stats",
        dir.path().join("nope.gyr").to_str().unwrap(),
    ]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("cannot read") && err.contains("nope.gyr"),
        "{err}"
    );

    let foreign = dir.path().join("foreign.gyr");
    std::fs::write(&foreign, "this is a CSV file,1,2,3\n").unwrap();
    let o = gyr(&["trace", "dump", foreign.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("is not a gyr trace"), "{err}");

    let path = demo_trace(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    let corrupt = dir.path().join("corrupt.gyr");
    std::fs::write(&corrupt, &bytes).unwrap();
    let o = gyr(&["trace", "stats", corrupt.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is corrupt (checksum mismatch)") && err.contains("records in"),
        "{err}"
    );
    assert!(
        out.contains("heat.step"),
        "what could be read is still shown:\n{out}"
    );

    // A cut-off file (writer killed) is not an error: every complete chunk is read.
    let cut = dir.path().join("cut.gyr");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let good = std::fs::read(&path).unwrap();
    std::fs::write(&cut, &good[..good.len() - 100]).unwrap();
    let o = gyr(&["trace", "stats", cut.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("NOT closed") && err.contains("the file ends inside chunk"),
        "{out}{err}"
    );
}

#[test]
fn a_writer_killed_mid_run_leaves_a_readable_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.gyr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args([
            "demo",
            "heat",
            "--size",
            "256",
            "--steps",
            "1000000",
            "--trace",
            path.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until some chunks are on disk, then SIGKILL.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) < 2 << 20
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let o = gyr(&["trace", "stats", "--json", path.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["closed_cleanly"], false);
    assert!(v["records"].as_u64().unwrap() > 1000, "{out}");
    let o = gyr(&[
        "trace",
        "dump",
        path.to_str().unwrap(),
        "--type",
        "residual",
        "--limit",
        "5",
    ]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8(o.stdout).unwrap().lines().count(), 5);
}

#[test]
fn spec_files_are_checked_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("sensors.toml");
    std::fs::write(
        &good,
        "[[sensor]]\nname = \"work_load\"\ndescription = \"load per domain\"\nfields = [{ name = \"domain\", type = \"u32\" }, { name = \"load\", type = \"f64\" }]\n",
    )
    .unwrap();
    let o = gyr(&["spec", good.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("tracing   work_load { domain: u32, load: f64 }  (12 bytes)"),
        "{out}"
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[sensor]]\nname = \"a\"\nfields = [{ name = \"x\", type = \"double\" }]\n",
    )
    .unwrap();
    let o = gyr(&["spec", bad.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("bad.toml:3:11: sensor `a`, field 1 (`x`): unknown type `double`"),
        "{err}"
    );
}

#[test]
fn bad_demo_arguments_are_refused() {
    let o = gyr(&["demo", "heat", "--size", "8"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("--size 8"), "{err}");
    // One domain has nothing to balance; the check comes before anything starts.
    let o = gyr(&["demo", "--headless", "--domains", "1"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("--domains 1: give 2 to 64"), "{err}");
}

#[test]
fn the_hub_refuses_a_token_that_could_be_guessed() {
    let run = |args: &[&str], env: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gyr"));
        c.args(["hub", "--listen", "0.0.0.0:0", "--grpc", "127.0.0.1:0"])
            .args(args)
            .env_remove("GYR_HUB_TOKEN")
            .env_remove("GYR_HUB_READ_TOKEN")
            .stdin(Stdio::null());
        if let Some(t) = env {
            c.env("GYR_HUB_TOKEN", t);
        }
        c.output().expect("run gyr")
    };
    for (args, env) in [
        (&["--token", ""][..], None),
        (&["--token", "secret"][..], None),
        (&[][..], Some("")),
        (
            &["--token", "0123456789abcdef", "--read-token", "watch"][..],
            None,
        ),
    ] {
        let o = run(args, env);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?} {env:?}: {out}{err}");
        assert!(
            err.contains("--token") || err.contains("--read-token"),
            "{args:?} {env:?}: {err}"
        );
        assert!(!out.contains("open http://"), "it does not start: {out}");
    }
    let o = run(&["--token", "short"], None);
    assert!(
        text(&o).1.contains("openssl rand -hex 16"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn the_headless_demo_measures_md_before_and_after_balancing() {
    let o = gyr(&[
        "demo",
        "--headless",
        "--duration",
        "4",
        "--particles",
        "2000",
        "--json",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "headless demo failed: {out}{err}");
    let last = out.lines().last().unwrap_or_default();
    let j: serde_json::Value = serde_json::from_str(last).expect("JSON as the last line");
    assert!(j["steps"].as_u64().unwrap() > 100, "{j}");
    assert!(j["step_ms_before"].as_f64().unwrap() > 0.0, "{j}");
    assert!(j["step_ms_after"].as_f64().unwrap() > 0.0, "{j}");
    // The policy balanced the work; the step times it should bring are not asserted.
    let (before, after) = (
        j["imbalance_before"].as_f64().unwrap(),
        j["imbalance_after"].as_f64().unwrap(),
    );
    assert!(before > 2.0, "most particles start in domain 0: {j}");
    assert!(after < 1.5 && after < before / 2.0, "balanced: {j}");
    assert!(
        j["events_received"].as_u64().unwrap() > 0,
        "the hub saw the program: {j}"
    );
    assert_eq!(j["lost"], 0, "{j}");
    let o = gyr(&["demo", "--headless", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2));
}

/// What goes wrong with a trace file is said once, and says what it is: a directory, a
/// concatenation of two traces.
#[test]
fn trace_file_mistakes_are_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let o = gyr(&["trace", "stats", dir.path().to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(err.matches("Is a directory").count(), 1, "{err}");
    assert!(err.contains(dir.path().to_str().unwrap()), "{err}");

    let path = demo_trace(dir.path());
    let one = std::fs::read(&path).unwrap();
    let two = dir.path().join("two.gyr");
    std::fs::write(&two, [one.clone(), one.clone()].concat()).unwrap();
    let o = gyr(&["trace", "stats", two.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert!(
        err.contains(&format!(
            "a second trace starts at byte {}: this file holds more than one trace (concatenated?)",
            one.len()
        )),
        "{err}"
    );
    assert!(!err.contains("unreadable bytes"), "{err}");
}

/// A file that is not a spec and has no end is refused at the size limit, as bad input.
#[test]
fn spec_without_end_is_refused_at_the_limit() {
    if !Path::new("/dev/zero").exists() {
        return;
    }
    let o = gyr(&["spec", "/dev/zero"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "/dev/zero: the spec is larger than {} bytes (1 MiB)",
            gyr_core::spec::MAX_SPEC_BYTES
        )),
        "{err}"
    );
}

/// A trace whose strings carry terminal controls (a screen clear, a right-to-left override):
/// human output shows them as text, JSON carries them exactly.
#[test]
fn terminal_controls_in_a_trace_are_shown_not_obeyed() {
    use gyr_core::record::push_record;
    use gyr_core::value::encode;
    use gyr_core::{Field, FieldType, Schema, ThreadInfo, TraceEnd, TraceHeader, TraceWriter};
    let hostile = "evil\x1b[2J\u{202e}txt.exe";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.gyr");
    let header = TraceHeader {
        command_line: vec!["prog".into(), hostile.into()],
        host: hostile.into(),
        ..TraceHeader::default()
    };
    let schema = Schema::new(2, "note", vec![Field::new("text", FieldType::Str)]).unwrap();
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    w.schema(&schema).unwrap();
    w.thread(&ThreadInfo {
        id: 1,
        name: hostile.into(),
        os_tid: 9,
    })
    .unwrap();
    let mut rec = Vec::new();
    let payload = encode(&schema, &[gyr_core::Value::Str(hostile.into())]).unwrap();
    push_record(&mut rec, 2, 1000, 1, 0, &payload);
    w.records(1, &rec).unwrap();
    std::fs::write(&path, w.finish(&TraceEnd::default()).unwrap()).unwrap();
    let file = path.to_str().unwrap();

    for args in [["trace", "stats", file], ["trace", "dump", file]] {
        let o = gyr(&args);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        assert!(
            !out.contains('\x1b') && !out.contains('\u{202e}'),
            "{args:?} printed a terminal control:\n{out:?}"
        );
        assert!(
            out.contains("evil\\u{1b}[2J\\u{202e}txt.exe"),
            "{args:?}:\n{out}"
        );
    }

    let o = gyr(&["trace", "stats", file, "--json"]);
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["process"]["command_line"][1], hostile);
    assert_eq!(stats["process"]["host"], hostile);
    assert_eq!(stats["threads"][0]["name"], hostile);
    let o = gyr(&["trace", "dump", file, "--json"]);
    let line: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(line["fields"]["text"], hostile);
}

#[test]
fn the_descriptor_set_is_written_for_tools() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gyr.binpb");
    let o = gyr(&["api", "descriptor-set", "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        gyr_proto::FILE_DESCRIPTOR_SET
    );
    // To standard output when it is not a terminal (here, a pipe).
    let o = gyr(&["api", "descriptor-set", "-o", "-"]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(o.stdout, gyr_proto::FILE_DESCRIPTOR_SET);
    let missing = dir.path().join("no/such/dir/gyr.binpb");
    let o = gyr(&["api", "descriptor-set", "-o", missing.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("cannot write the descriptor set to"), "{err}");
}
