//! `gyr trace clock` and `--sync` on `gyr trace dump` and `gyr trace export`, as a user runs
//! them, over three ranks' files whose clocks are off by known offsets (written here with
//! `TraceWriter`, the messages as `gyr::msg` records them).

use gyr::gyr_core::record::push_record;
use gyr::gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
use gyr::gyr_core::value::encode;
use gyr::gyr_core::{Field, FieldType, Schema, ThreadInfo, Value};
use serde_json::Value as Json;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn gyr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyr"))
        .args(args)
        .output()
        .expect("gyr runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "gyr failed ({:?}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The clock offsets of ranks 0, 1 and 2 (local = true + offset).
const OFFSETS: [i64; 3] = [0, 30_000_000, -20_000_000];

/// Writes rank files into `dir`: ring messages both ways, 10 to 22 µs each; with `messages`
/// false, only a program's own events.
fn write_ranks(dir: &Path, messages: bool) -> Vec<PathBuf> {
    let f = |n: &str, t| Field::new(n, t);
    let msg = |id, name| {
        Schema::new(
            id,
            name,
            vec![
                f("peer", FieldType::U32),
                f("tag", FieldType::I32),
                f("bytes", FieldType::U64),
                f("comm", FieldType::U64),
            ],
        )
        .unwrap()
    };
    let rank = Schema::new(
        2,
        "gyr.msg.rank",
        vec![
            f("job", FieldType::Str),
            f("rank", FieldType::U32),
            f("size", FieldType::U32),
        ],
    )
    .unwrap();
    let (send, recv) = (msg(3, "gyr.msg.send"), msg(4, "gyr.msg.recv"));
    let work = Schema::new(5, "work", vec![f("step", FieldType::U64)]).unwrap();
    // (true time, type, payload) per rank.
    let mut events: Vec<Vec<(i64, &Schema, Vec<u8>)>> = vec![Vec::new(); 3];
    let m = |peer: u32| {
        vec![
            Value::UInt(u64::from(peer)),
            Value::Int(7),
            Value::UInt(8),
            Value::UInt(0),
        ]
    };
    for r in 0..3u32 {
        let v = [
            Value::Str("ring".into()),
            Value::UInt(r.into()),
            Value::UInt(3),
        ];
        events[r as usize].push((50_000_000, &rank, encode(&rank, &v).unwrap()));
        for k in 0..20u64 {
            let t = 60_000_000 + k as i64 * 1_000_000 + i64::from(r);
            events[r as usize].push((t, &work, encode(&work, &[Value::UInt(k)]).unwrap()));
        }
    }
    if messages {
        for k in 0..300i64 {
            let src = (k % 3) as u32;
            let dst = if k % 2 == 0 {
                (src + 1) % 3
            } else {
                (src + 2) % 3
            };
            let t = 60_000_000 + k * 50_000;
            let delay = 10_000 + (k * 7919) % 12_000;
            events[src as usize].push((t, &send, encode(&send, &m(dst)).unwrap()));
            events[dst as usize].push((t + delay, &recv, encode(&recv, &m(src)).unwrap()));
        }
    }
    (0..3)
        .map(|r| {
            let mut header = TraceHeader::for_this_process();
            header.start_unix_ns = 1_700_000_000_000_000_000;
            let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
            for s in [&rank, &send, &recv, &work] {
                w.schema(s).unwrap();
            }
            w.thread(&ThreadInfo {
                id: 1,
                name: "main".into(),
                os_tid: 1,
            })
            .unwrap();
            let mut ev = std::mem::take(&mut events[r]);
            ev.sort_by_key(|e| e.0);
            let mut block = Vec::new();
            for (i, (t, s, p)) in ev.iter().enumerate() {
                let local = (t + OFFSETS[r]) as u64;
                push_record(&mut block, s.id, local, i as u64 + 1, 0, p);
            }
            w.records(1, &block).unwrap();
            let path = dir.join(format!("ring.{r}.gyr"));
            std::fs::write(&path, w.finish(&TraceEnd::default()).unwrap()).unwrap();
            path
        })
        .collect()
}

fn strs(paths: &[PathBuf]) -> Vec<&str> {
    paths.iter().map(|p| p.to_str().unwrap()).collect()
}

#[test]
fn clock_estimates_the_offsets_and_sync_merges_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_ranks(dir.path(), true);
    let files = strs(&paths);

    let mut args = vec!["trace", "clock", "--json"];
    args.extend(&files);
    let report: Json = serde_json::from_str(&ok(&gyr(&args))).unwrap();
    assert_eq!(report["job"], "ring");
    assert_eq!(report["matched"], 300);
    assert!(
        report["before"]["reversed"].as_u64().unwrap() > 0,
        "{report}"
    );
    assert_eq!(report["after"]["reversed"], 0, "{report}");
    for (r, p) in report["processes"].as_array().unwrap().iter().enumerate() {
        let offset = p["offset_ns"].as_f64().unwrap();
        // Within the minimum delay (10 µs) of the truth.
        assert!(
            (offset + OFFSETS[r] as f64).abs() < 10_000.0,
            "rank {r}: {offset}"
        );
    }
    let text = ok(&gyr(&[&["trace", "clock"], &files[..]].concat()));
    assert!(text.contains("reference rank 0"), "{text}");
    assert!(text.contains("convex hull"), "{text}");

    // The merged dump: every record once, in time order, every receive after its send.
    let mut args = vec!["trace", "dump", "--sync", "--json"];
    args.extend(&files);
    let out = gyr(&args);
    let lines: Vec<Json> = ok(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 after"));
    assert_eq!(lines.len(), 3 * 21 + 600);
    let times: Vec<u64> = lines.iter().map(|l| l["t_ns"].as_u64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let mut in_flight: HashMap<(u64, u64), VecDeque<u64>> = HashMap::new();
    for l in &lines {
        let rank = l["rank"].as_u64().unwrap();
        let peer = l["fields"]["peer"].as_u64();
        match l["type"].as_str().unwrap() {
            "gyr.msg.send" => in_flight
                .entry((rank, peer.unwrap()))
                .or_default()
                .push_back(l["t_ns"].as_u64().unwrap()),
            "gyr.msg.recv" => {
                let sent = in_flight
                    .get_mut(&(peer.unwrap(), rank))
                    .and_then(|q| q.pop_front());
                assert!(sent.is_some(), "a receive before its send: {l}");
            }
            _ => {}
        }
    }
    // Without --sync the same files merge by wall-clock start, and the clocks show.
    let mut args = vec!["trace", "dump", "--json", "--type", "gyr.msg.recv"];
    args.extend(&files);
    assert_eq!(ok(&gyr(&args)).lines().count(), 300);

    // A synced export.
    let out_path = dir.path().join("ring.json");
    let mut args = vec![
        "trace",
        "export",
        "--sync",
        "-f",
        "chrome",
        "-o",
        out_path.to_str().unwrap(),
    ];
    args.extend(&files);
    ok(&gyr(&args));
    let chrome: Json = serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();
    assert!(!chrome["traceEvents"].as_array().unwrap().is_empty());
}

#[test]
fn mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_ranks(dir.path(), true);
    let o = gyr(&["trace", "clock", paths[0].to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("at least two processes"), "{err}");

    let quiet = tempfile::tempdir().unwrap();
    let paths = write_ranks(quiet.path(), false);
    let o = gyr(&[&["trace", "clock"], &strs(&paths)[..]].concat());
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("gyr::msg::send"), "{err}");

    let o = gyr(&[
        "trace",
        "dump",
        "--reference",
        "1",
        paths[0].to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("add --sync"));
}
