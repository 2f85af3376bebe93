//! Exports and imports over traces made with `TraceWriter`: SDDF round trips (ASCII and
//! binary, exact), Chrome JSON read back with serde_json and checked for structure, Perfetto's
//! framing, the ordered export, PICL fixtures, and the edge cases (an empty trace, one event,
//! Unicode names, a file cut off inside a chunk).

use gyr_core::record::push_record;
use gyr_core::trace::{Item, TraceEnd, TraceHeader, TraceReader, TraceWriter};
use gyr_core::{Field, FieldType, Schema, ThreadInfo, lost_schema};
use gyr_trace::export::{self, Format, Options};
use gyr_trace::{ImportFormat, info};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Cursor;

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn string(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

/// The thread events' schemas, as `gyr::sync` describes them.
fn sync_schemas() -> Vec<Schema> {
    let f = |n: &str, t| Field::new(n, t);
    let u = FieldType::U64;
    vec![
        Schema::new(10, "gyr.thread.fork", vec![f("child", u)]).unwrap(),
        Schema::new(11, "gyr.thread.begin", vec![f("parent", u)]).unwrap(),
        Schema::new(12, "gyr.thread.exit", vec![]).unwrap(),
        Schema::new(13, "gyr.thread.join_begin", vec![f("joined", u)]).unwrap(),
        Schema::new(14, "gyr.thread.join_end", vec![f("joined", u)]).unwrap(),
        Schema::new(15, "gyr.mutex.request", vec![f("mutex", u), f("addr", u)]).unwrap(),
        Schema::new(16, "gyr.mutex.acquire", vec![f("mutex", u), f("n", u)]).unwrap(),
        Schema::new(17, "gyr.mutex.release", vec![f("mutex", u), f("n", u)]).unwrap(),
        Schema::new(18, "gyr.cond.wait", vec![f("cond", u), f("mutex", u)]).unwrap(),
        Schema::new(
            19,
            "gyr.cond.wake",
            vec![f("cond", u), f("after", u), f("timed_out", FieldType::Bool)],
        )
        .unwrap(),
        Schema::new(20, "gyr.cond.signal", vec![f("cond", u), f("n", u)]).unwrap(),
        Schema::new(
            21,
            "gyr.barrier.arrive",
            vec![f("barrier", u), f("generation", u)],
        )
        .unwrap(),
        Schema::new(
            22,
            "gyr.barrier.depart",
            vec![
                f("barrier", u),
                f("generation", u),
                f("parties", FieldType::U32),
            ],
        )
        .unwrap(),
        Schema::new(23, "gyr.span.begin", vec![f("name", FieldType::Str)]).unwrap(),
        Schema::new(24, "gyr.span.end", vec![f("name", FieldType::Str)]).unwrap(),
    ]
}

/// A program's own event type with every kind of field.
fn user_schema() -> Schema {
    Schema::new(
        2,
        "work_load",
        vec![
            Field::new("domain", FieldType::U32),
            Field::new("seconds", FieldType::F64),
            Field::new("delta", FieldType::I16),
            Field::new("big", FieldType::U64),
            Field::new("ok", FieldType::Bool),
            Field::new("label", FieldType::Str),
            Field::new("raw", FieldType::Bytes),
            Field::new("v", FieldType::Array(gyr_core::schema::ScalarType::F32, 3)),
            Field::new("small", FieldType::F32),
        ],
    )
    .unwrap()
}

fn user_payload(i: u64, label: &str) -> Vec<u8> {
    let mut p = (i as u32).to_le_bytes().to_vec();
    p.extend((i as f64 * 0.25).to_le_bytes());
    p.extend((-(i as i16)).to_le_bytes());
    p.extend((u64::MAX - i).to_le_bytes());
    p.push((i % 2) as u8);
    p.extend(string(label));
    p.extend((3u32).to_le_bytes());
    p.extend([0u8, 0xff, b'"']);
    for k in 0..3 {
        p.extend((k as f32 + 0.5).to_le_bytes());
    }
    p.extend(1.5f32.to_le_bytes());
    p
}

/// A trace of two threads: the main thread forks a worker named in Unicode, both take a
/// mutex (the worker waits), a condition is signalled, both pass a barrier, spans nest, one
/// event is lost, and the user's type carries every field kind.
fn sample_trace() -> Vec<u8> {
    let header = TraceHeader {
        pid: 4242,
        host: "node-1".into(),
        command_line: vec!["/bin/sim".into(), "--fast".into()],
        start_unix_ns: 1_700_000_000_000_000_000,
        clock_source: "tsc".into(),
        ticks_per_second: 2.5e9,
        sensor_cost_ns: 7.5,
        policy: "block".into(),
        gyr_version: "0.1.0".into(),
    };
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    for s in sync_schemas() {
        w.schema(&s).unwrap();
    }
    w.schema(&user_schema()).unwrap();
    w.schema(&lost_schema(1)).unwrap();
    w.thread(&ThreadInfo {
        id: 1,
        name: "main".into(),
        os_tid: 100,
    })
    .unwrap();
    w.thread(&ThreadInfo {
        id: 2,
        name: "wörker→☃ \"q\"".into(),
        os_tid: 101,
    })
    .unwrap();
    let (m, c, b) = (7u64, 3u64, 5u64);
    let mut t1 = Vec::new();
    let mut s1 = 0;
    let mut r1 = |out: &mut Vec<u8>, ty: u32, ts: u64, p: &[u8]| {
        s1 += 1;
        push_record(out, ty, ts, s1, 0, p);
    };
    r1(&mut t1, 23, 1_000, &string("main loop"));
    r1(&mut t1, 10, 1_100, &u64s(&[2]));
    r1(&mut t1, 16, 1_200, &u64s(&[m, 1]));
    r1(&mut t1, 2, 1_250, &user_payload(1, "first"));
    r1(&mut t1, 17, 1_400, &u64s(&[m, 1]));
    r1(&mut t1, 20, 1_500, &u64s(&[c, 1]));
    r1(&mut t1, 21, 1_600, &u64s(&[b, 0]));
    let mut depart = u64s(&[b, 0]);
    depart.extend(2u32.to_le_bytes());
    r1(&mut t1, 22, 2_100, &depart);
    r1(&mut t1, 13, 2_200, &u64s(&[2]));
    r1(&mut t1, 14, 2_600, &u64s(&[2]));
    r1(&mut t1, 1, 2_700, &u64s(&[1, 1, 9, 9]));
    r1(&mut t1, 24, 2_800, &string("main loop"));
    let mut t2 = Vec::new();
    let mut s2 = 0;
    let mut r2 = |out: &mut Vec<u8>, ty: u32, ts: u64, p: &[u8]| {
        s2 += 1;
        push_record(out, ty, ts, s2, 30, p);
    };
    r2(&mut t2, 11, 1_150, &u64s(&[1]));
    r2(&mut t2, 15, 1_300, &u64s(&[m, 0xdead]));
    r2(&mut t2, 16, 1_450, &u64s(&[m, 2]));
    r2(&mut t2, 18, 1_460, &u64s(&[c, m]));
    let mut wake = u64s(&[c, 1]);
    wake.push(0);
    r2(&mut t2, 19, 1_550, &wake);
    r2(&mut t2, 2, 1_700, &user_payload(2, "zweite ☃"));
    r2(&mut t2, 21, 2_000, &u64s(&[b, 0]));
    r2(&mut t2, 22, 2_050, &depart);
    r2(&mut t2, 17, 2_060, &u64s(&[m, 2]));
    r2(&mut t2, 12, 2_500, &[]);
    w.records(1, &t1).unwrap();
    w.records(2, &t2).unwrap();
    w.finish(&TraceEnd {
        end_ns: 3_000,
        records: 22,
        lost: 1,
        filtered: 4,
    })
    .unwrap()
}

/// A record: (type name, ts, seq, perturbation, payload).
type Rec = (String, u64, u64, u64, Vec<u8>);

/// Every item of a trace, in a comparable form.
#[derive(Debug, Default, PartialEq)]
struct Content {
    header: TraceHeader,
    schemas: BTreeMap<u32, Schema>,
    threads: BTreeMap<u64, ThreadInfo>,
    /// Per thread: (type name, ts, seq, perturbation, payload).
    records: BTreeMap<u64, Vec<Rec>>,
    end: Option<TraceEnd>,
}

fn content(bytes: &[u8]) -> Content {
    let mut r = TraceReader::new(Cursor::new(bytes.to_vec())).unwrap();
    let mut c = Content::default();
    r.for_each_item(|item| match item {
        Item::Schema(s) => {
            c.schemas.insert(s.id, s.clone());
        }
        Item::Thread(t) => {
            c.threads.insert(t.id, t.clone());
        }
        Item::Record { schema, record } => {
            let h = record.header;
            c.records.entry(record.thread).or_default().push((
                schema.map(|s| s.name.clone()).unwrap_or_default(),
                h.timestamp,
                h.seq,
                h.perturbation,
                record.payload.to_vec(),
            ));
        }
        Item::End(e) => c.end = Some(e.clone()),
    });
    c.header = r.header().clone();
    c
}

fn export_bytes(trace: &[u8], format: Format, options: Options) -> (Vec<u8>, export::Report) {
    let reader = TraceReader::new(Cursor::new(trace.to_vec())).unwrap();
    let mut out = Vec::new();
    let report = export::export(reader, format, &mut out, options).unwrap();
    (out, report)
}

fn round_trip(format: Format, import: ImportFormat) {
    let trace = sample_trace();
    let (sddf, report) = export_bytes(&trace, format, Options::default());
    assert_eq!(report.records, 22);
    let (back, imported) = gyr_trace::import(import, &sddf[..], Vec::new(), "t").unwrap();
    assert_eq!(imported.records, 22);
    let (a, b) = (content(&trace), content(&back));
    assert_eq!(a.header, b.header);
    assert_eq!(a.schemas, b.schemas);
    assert_eq!(a.threads, b.threads);
    assert_eq!(a.records, b.records);
    assert_eq!(a.end, b.end);
}

#[test]
fn sddf_ascii_round_trips_exactly() {
    round_trip(Format::SddfAscii, ImportFormat::SddfAscii);
    let (text, _) = export_bytes(&sample_trace(), Format::SddfAscii, Options::default());
    let text = String::from_utf8(text).unwrap();
    assert!(text.starts_with("SDDFA\n/*\n"), "{text}");
    assert!(text.contains("\"work_load\" {\n"), "{text}");
    assert!(text.contains("\tlong\t\"time stamp ns\";"), "{text}");
    assert!(
        text.contains("\t// \"gyr type\" \"[f32; 3]\"\n\tfloat\t\"v\"[];"),
        "{text}"
    );
    // A u64 above i64::MAX is written with its 64 bits as a long.
    assert!(text.contains(", -2, 1, [6] { \"first\" }"), "{text}");
}

#[test]
fn sddf_binary_round_trips_exactly() {
    round_trip(Format::SddfBinary, ImportFormat::SddfBinary);
    let (bin, _) = export_bytes(&sample_trace(), Format::SddfBinary, Options::default());
    assert_eq!(&bin[..5], b"SDDFB");
    assert_eq!(&bin[5..19], &[19, 1, 0, 0, 0, 0, 0, 1, 2, 4, 8, 4, 8, 16]);
}

#[test]
fn sddf_of_two_processes_imports_into_one_trace() {
    let trace = sample_trace();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.gyr"), dir.path().join("b.gyr"));
    std::fs::write(&a, &trace).unwrap();
    std::fs::write(&b, &trace).unwrap();
    let mut out = Vec::new();
    let report = export::export_files(
        &[a, b],
        Format::SddfAscii,
        &mut out,
        Options::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(report.records, 44);
    let (back, imported) =
        gyr_trace::import(ImportFormat::SddfAscii, &out[..], Vec::new(), "t").unwrap();
    assert_eq!(imported.records, 44);
    let c = content(&back);
    // One descriptor per shape; the second process's threads renumbered.
    assert_eq!(c.schemas.len(), content(&trace).schemas.len());
    assert_eq!(c.threads.len(), 4);
    assert_eq!(c.end.unwrap().lost, 2);
}

/// Parses Chrome JSON and checks its structure; returns the events.
fn check_chrome(json: &[u8]) -> Vec<Json> {
    let doc: Json = serde_json::from_slice(json).expect("valid JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents").clone();
    let mut depth: HashMap<(u64, u64), i64> = HashMap::new();
    let mut async_depth: HashMap<String, i64> = HashMap::new();
    let mut flows_out = HashSet::new();
    let mut flows_in = Vec::new();
    for e in &events {
        let ph = e["ph"].as_str().unwrap();
        assert!(e["pid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].is_number(), "{e}");
        }
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap_or(0));
        match ph {
            "B" => *depth.entry(key).or_default() += 1,
            "E" => {
                let d = depth.entry(key).or_default();
                *d -= 1;
                assert!(*d >= 0, "an E without its B: {e}");
            }
            "b" => *async_depth.entry(e["id"].to_string()).or_default() += 1,
            "e" => {
                let d = async_depth.entry(e["id"].to_string()).or_default();
                *d -= 1;
                assert!(*d >= 0, "an e without its b: {e}");
            }
            "X" => assert!(e["dur"].is_number()),
            "C" => assert!(e["args"]["value"].is_number(), "{e}"),
            "i" | "M" => {}
            other => panic!("unexpected phase {other}: {e}"),
        }
        if let Some(id) = e.get("bind_id") {
            if e.get("flow_out").is_some() {
                flows_out.insert(id.as_str().unwrap().to_owned());
            } else {
                assert_eq!(e["flow_in"], true, "{e}");
                flows_in.push(id.as_str().unwrap().to_owned());
            }
        }
    }
    assert!(depth.values().all(|&d| d == 0), "unbalanced B/E: {depth:?}");
    assert!(async_depth.values().all(|&d| d == 0), "unbalanced b/e");
    for f in &flows_in {
        assert!(flows_out.contains(f), "flow {f} ends but never starts");
    }
    events
}

fn names(events: &[Json], ph: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["ph"] == ph)
        .map(|e| e["name"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn chrome_json_is_well_formed_and_balanced() {
    let (json, report) = export_bytes(&sample_trace(), Format::Chrome, Options::default());
    let events = check_chrome(&json);
    assert_eq!(report.events as usize, events.len());
    let meta: Vec<&Json> = events.iter().filter(|e| e["ph"] == "M").collect();
    assert!(
        meta.iter()
            .any(|e| e["name"] == "process_name" && e["args"]["name"] == "sim")
    );
    assert!(meta.iter().any(|e| e["name"] == "thread_name"
        && e["args"]["name"] == "wörker→☃ \"q\""
        && e["tid"] == 101));
    let b = names(&events, "B");
    for want in [
        "main loop",
        "wait mutex 7",
        "cond wait 3",
        "barrier 5",
        "join 2",
    ] {
        assert!(b.iter().any(|n| n == want), "no slice {want}: {b:?}");
    }
    let holds = names(&events, "b");
    assert_eq!(holds, vec!["hold mutex 7", "hold mutex 7"]);
    let c = names(&events, "C");
    assert!(c.iter().any(|n| n == "work_load.seconds"));
    assert!(
        !c.iter()
            .any(|n| n == "work_load.ok" || n == "work_load.label")
    );
    let instants = names(&events, "i");
    assert!(
        instants.iter().any(|n| n == "lost 1 events"),
        "{instants:?}"
    );
    assert!(instants.iter().any(|n| n == "work_load"));
    // The instant of the user's type carries its non-counter fields, Unicode intact.
    let wl = events
        .iter()
        .find(|e| e["ph"] == "i" && e["name"] == "work_load" && e["tid"] == 101)
        .unwrap();
    assert_eq!(wl["args"]["label"], "zweite ☃");
    assert_eq!(wl["args"]["big"], serde_json::json!(u64::MAX - 2));
    assert_eq!(wl["args"]["v"], serde_json::json!([0.5, 1.5, 2.5]));
    // Flows: release 1 -> acquire 2, signal -> wake, fork -> begin, exit -> join, barrier.
    let bound = events.iter().filter(|e| e.get("bind_id").is_some()).count();
    assert!(bound >= 10, "{bound} flow ends");
    // Time: µs since the process's 0, with ns as decimals.
    let first = events.iter().find(|e| e["name"] == "main loop").unwrap();
    assert_eq!(first["ts"].as_f64().unwrap(), 1.0);
    let wake = events.iter().find(|e| e["name"] == "woken cond 3").unwrap();
    assert_eq!(wake["ts"].as_f64().unwrap(), 1.55);
}

/// Walks a Perfetto trace's outer message: the packets' bodies.
fn perfetto_packets(bytes: &[u8]) -> Vec<&[u8]> {
    let mut packets = Vec::new();
    let mut at = 0;
    let varint = |at: &mut usize| {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = bytes[*at];
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    };
    while at < bytes.len() {
        assert_eq!(bytes[at], 0x0a, "field 1, length-delimited, at {at}");
        at += 1;
        let len = varint(&mut at) as usize;
        packets.push(&bytes[at..at + len]);
        at += len;
    }
    packets
}

/// Checks that `msg` is a well-formed protobuf message, walking into the fields `nested`
/// names as messages (by field number); returns its fields' numbers.
fn walk_message(msg: &[u8], nested: &[u64]) -> Vec<u64> {
    let mut at = 0;
    let mut fields = Vec::new();
    let varint = |at: &mut usize| {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = msg[*at];
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return v;
            }
        }
        panic!("a varint longer than 10 bytes");
    };
    while at < msg.len() {
        let key = varint(&mut at);
        let (field, wire) = (key >> 3, key & 7);
        assert!(field > 0, "field 0 in {msg:02x?}");
        fields.push(field);
        match wire {
            0 => {
                varint(&mut at);
            }
            1 => at += 8,
            2 => {
                let len = varint(&mut at) as usize;
                assert!(at + len <= msg.len(), "a length past the message's end");
                if nested.contains(&field) {
                    walk_message(&msg[at..at + len], nested);
                }
                at += len;
            }
            5 => at += 4,
            w => panic!("wire type {w} in {msg:02x?}"),
        }
        assert!(
            at <= msg.len(),
            "a field past the message's end: {msg:02x?}"
        );
    }
    fields
}

#[test]
fn perfetto_output_is_framed_packet_by_packet() {
    let (pb, report) = export_bytes(&sample_trace(), Format::Perfetto, Options::default());
    let packets = perfetto_packets(&pb);
    assert_eq!(packets.len() as u64, report.events);
    // Every packet, its track event or descriptor (and their process, thread, counter and
    // annotation messages) decode as protobuf.
    for p in &packets {
        let fields = walk_message(p, &[11, 60, 3, 4, 8]);
        assert!(fields.contains(&10), "trusted_packet_sequence_id");
    }
    // Process, 2 threads, 8 counter tracks (numeric scalars of work_load), 2 hold tracks.
    let descriptors = packets
        .iter()
        .filter(|p| p.windows(2).any(|w| w == [0xe2, 0x03]))
        .count();
    assert!(descriptors >= 1 + 2 + 5 + 2, "{descriptors}");
}

#[test]
fn empty_and_one_event_traces_export() {
    let empty = TraceWriter::new(Vec::new(), &TraceHeader::default())
        .unwrap()
        .finish(&TraceEnd::default())
        .unwrap();
    let mut one = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    let s = Schema::new(1, "tick", vec![Field::new("n", FieldType::U8)]).unwrap();
    one.schema(&s).unwrap();
    let mut r = Vec::new();
    push_record(&mut r, 1, 5, 1, 0, &[7]);
    one.records(1, &r).unwrap();
    let one = one.finish(&TraceEnd::default()).unwrap();
    for (trace, records) in [(empty, 0), (one, 1)] {
        for format in [
            Format::Perfetto,
            Format::Chrome,
            Format::SddfAscii,
            Format::SddfBinary,
            Format::OtlpJson,
        ] {
            let (out, report) = export_bytes(&trace, format, Options::default());
            assert_eq!(report.records, records, "{format}");
            match format {
                Format::Chrome => {
                    let events = check_chrome(&out);
                    assert_eq!(names(&events, "C").len() as u64, records);
                }
                Format::Perfetto => {
                    assert!(!perfetto_packets(&out).is_empty());
                }
                Format::SddfAscii => {
                    let (_, r) =
                        gyr_trace::import(ImportFormat::SddfAscii, &out[..], Vec::new(), "t")
                            .unwrap();
                    assert_eq!(r.records, records);
                }
                Format::SddfBinary => {
                    let (_, r) =
                        gyr_trace::import(ImportFormat::SddfBinary, &out[..], Vec::new(), "t")
                            .unwrap();
                    assert_eq!(r.records, records);
                }
                Format::OtlpJson => {
                    // No spans, and events only when selected: nothing to send.
                    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
                }
                Format::Csv | Format::Parquet => unreachable!("tables are tests/tables.rs's"),
                Format::Otlp => unreachable!("sent, not written"),
            }
        }
    }
}

#[test]
fn a_cut_off_file_exports_what_is_readable_and_says_what_was_lost() {
    let s = Schema::new(1, "tick", vec![Field::new("n", FieldType::U64)]).unwrap();
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    w.set_chunk_target(256);
    w.schema(&s).unwrap();
    let span = Schema::new(
        2,
        "gyr.span.begin",
        vec![Field::new("name", FieldType::Str)],
    )
    .unwrap();
    w.schema(&span).unwrap();
    let mut r = Vec::new();
    push_record(&mut r, 2, 1, 1, 0, &string("open forever"));
    w.records(1, &r).unwrap();
    for i in 0..100u64 {
        let mut r = Vec::new();
        push_record(&mut r, 1, 10 + i, 2 + i, 0, &i.to_le_bytes());
        w.records(1, &r).unwrap();
    }
    let full = w.finish(&TraceEnd::default()).unwrap();
    let cut = &full[..full.len() - 100];
    let (json, report) = export_bytes(cut, Format::Chrome, Options::default());
    let events = check_chrome(&json);
    assert!(
        report.records > 50 && report.records < 101,
        "{}",
        report.records
    );
    let summary = &report.files[0].summary;
    assert!(!summary.clean_end);
    assert!(summary.damage.iter().any(|d| d.is_cut_off()));
    // The span never ended in the file: it is closed at the thread's last time.
    assert_eq!(names(&events, "B"), vec!["open forever"]);
    assert_eq!(names(&events, "E").len(), 1);
    let info = info::read(TraceReader::new(Cursor::new(cut.to_vec())).unwrap(), None);
    assert!(info.cut_off() && !info.clean_end());
    assert!(info.unreadable_bytes() > 0);
    assert_eq!(info.unreadable_chunks(), 1);
}

#[test]
fn the_ordered_export_puts_causes_first() {
    // The worker's records come first in the file: its begin before the fork, its
    // acquisition before the release it waited for.
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    for s in sync_schemas() {
        w.schema(&s).unwrap();
    }
    let mut t2 = Vec::new();
    push_record(&mut t2, 11, 200, 1, 0, &u64s(&[1]));
    push_record(&mut t2, 16, 300, 2, 0, &u64s(&[7, 2]));
    push_record(&mut t2, 17, 400, 3, 0, &u64s(&[7, 2]));
    let mut t1 = Vec::new();
    push_record(&mut t1, 10, 100, 1, 0, &u64s(&[2]));
    push_record(&mut t1, 16, 150, 2, 0, &u64s(&[7, 1]));
    push_record(&mut t1, 17, 250, 3, 0, &u64s(&[7, 1]));
    w.records(2, &t2).unwrap();
    w.records(1, &t1).unwrap();
    let trace = w.finish(&TraceEnd::default()).unwrap();
    let order = |options| {
        let (sddf, report) = export_bytes(&trace, Format::SddfAscii, options);
        let text = String::from_utf8(sddf).unwrap();
        // (type, thread): the thread is a record's third value.
        let kinds: Vec<(String, String)> = text
            .lines()
            .filter(|l| l.starts_with("\"gyr.thread.") || l.starts_with("\"gyr.mutex."))
            .filter(|l| l.ends_with(";;"))
            .map(|l| {
                let name = l.split('"').nth(1).unwrap().to_owned();
                let values = l.split('{').nth(1).unwrap();
                (name, values.split(',').nth(2).unwrap().trim().to_owned())
            })
            .collect();
        (kinds, report)
    };
    let (plain, _) = order(Options::default());
    assert_eq!(plain[0].0, "gyr.thread.begin");
    let (ordered, report) = order(Options {
        ordered: true,
        max_held: 16,
        ..Options::default()
    });
    let expected = [
        ("gyr.thread.fork", "1"),
        ("gyr.thread.begin", "2"),
        ("gyr.mutex.acquire", "1"),
        ("gyr.mutex.release", "1"),
        ("gyr.mutex.acquire", "2"),
        ("gyr.mutex.release", "2"),
    ];
    let ordered: Vec<(&str, &str)> = ordered
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(ordered, expected);
    let stats = report.files[0].order.unwrap();
    assert_eq!((stats.events, stats.released, stats.forced), (6, 6, 0));
    assert!(stats.holds > 0);
}

#[test]
fn picl_fixtures_import() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let old = std::fs::read(data.join("old.trf")).unwrap();
    let (trace, report) =
        gyr_trace::import(ImportFormat::Picl, &old[..], Vec::new(), "old.trf").unwrap();
    let c = content(&trace);
    assert_eq!(report.records, 12);
    assert_eq!(c.threads.len(), 2);
    assert_eq!(c.threads[&1].name, "node 0");
    let send = c.schemas.values().find(|s| s.name == "picl.send").unwrap();
    let names: Vec<&str> = send.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["to", "type", "length"]);
    let first_send = c.records[&1].iter().find(|r| r.0 == "picl.send").unwrap();
    assert_eq!(first_send.1, 12_345_678_000);
    assert_eq!(first_send.4, u64s(&[1, 99, 1024]));
    assert!(
        c.schemas
            .values()
            .any(|s| s.name == "picl.trace_mark_array")
    );

    let new = std::fs::read(data.join("new.trf")).unwrap();
    let (trace, report) =
        gyr_trace::import(ImportFormat::Picl, &new[..], Vec::new(), "new.trf").unwrap();
    let c = content(&trace);
    assert_eq!(report.records, 12);
    let begin = c
        .schemas
        .values()
        .find(|s| s.name == "picl.send.begin")
        .unwrap();
    assert_eq!(begin.fields[0].name, "bytes");
    assert!(c.schemas.values().any(|s| s.name == "picl.recv.end"));
    assert!(c.schemas.values().any(|s| s.name == "picl.open.begin"));
    assert_eq!(c.threads.len(), 2);
    // A PICL import exports like any trace.
    let (json, _) = export_bytes(&trace, Format::Chrome, Options::default());
    check_chrome(&json);
}

#[test]
fn info_reads_the_sample() {
    let trace = sample_trace();
    let info = info::read(TraceReader::new(Cursor::new(trace)).unwrap(), None);
    assert!(info.clean_end());
    assert_eq!(info.span.records, 22);
    assert_eq!(
        info.threads[&2].info.as_ref().unwrap().name,
        "wörker→☃ \"q\""
    );
    assert_eq!(info.threads[&1].lost, 1);
    assert_eq!(info.end.unwrap().filtered, 4);
    assert_eq!(info.schemas[&2].span.records, 2);
}

/// The export rate on a few million events (`cargo test --release -p gyr-trace --test export
/// -- --ignored --nocapture`): a figure to look at, never asserted.
#[test]
#[ignore]
fn export_rate() {
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    for s in sync_schemas() {
        w.schema(&s).unwrap();
    }
    let load = Schema::new(2, "load", vec![Field::new("value", FieldType::F64)]).unwrap();
    w.schema(&load).unwrap();
    let n: u64 = std::env::var("GYR_EXPORT_RATE_N")
        .map(|n| n.parse().unwrap())
        .unwrap_or(4_000_000);
    let threads = 4u64;
    let mut block = Vec::new();
    let mut written = 0;
    for chunk in 0..n / 1000 {
        let t = chunk % threads + 1;
        block.clear();
        for i in 0..1000u64 {
            let ts = chunk * 10_000 + i * 10;
            let seq = chunk * 1000 + i + 1;
            match i % 20 {
                0 => push_record(&mut block, 23, ts, seq, 0, &string("step")),
                10 => push_record(&mut block, 24, ts, seq, 0, &string("step")),
                5 => push_record(&mut block, 16, ts, seq, 0, &u64s(&[1, seq])),
                6 => push_record(&mut block, 17, ts, seq, 0, &u64s(&[1, seq])),
                _ => push_record(&mut block, 2, ts, seq, 0, &(i as f64).to_le_bytes()),
            }
            written += 1;
        }
        w.records(t, &block).unwrap();
    }
    let trace = w.finish(&TraceEnd::default()).unwrap();
    eprintln!("{written} records, {} bytes", trace.len());
    let started = std::time::Instant::now();
    let mut reader = TraceReader::new(Cursor::new(&trace[..])).unwrap();
    let mut count = 0u64;
    reader.for_each_item(|i| count += matches!(i, Item::Record { .. }) as u64);
    eprintln!(
        "{:>12}: {:.1} M records/s",
        "read only",
        count as f64 / started.elapsed().as_secs_f64() / 1e6
    );
    // GYR_EXPORT_RATE=perfetto measures one format (for a profiler), `read` none.
    let only = std::env::var("GYR_EXPORT_RATE").ok();
    let read_only = only.as_deref() == Some("read");
    let only: Option<Format> = only.filter(|_| !read_only).map(|f| f.parse().unwrap());
    for format in [
        Format::Perfetto,
        Format::Chrome,
        Format::SddfBinary,
        Format::SddfAscii,
    ] {
        if read_only || only.is_some_and(|o| o != format) {
            continue;
        }
        let reader = TraceReader::new(Cursor::new(&trace[..])).unwrap();
        let started = std::time::Instant::now();
        let cpu = thread_cpu_ns();
        let mut out = CountingSink(0);
        let report = export::export(reader, format, &mut out, Options::default()).unwrap();
        let s = started.elapsed().as_secs_f64();
        let cpu_s = (thread_cpu_ns() - cpu) as f64 / 1e9;
        eprintln!(
            "{format:>12}: {:.1} M records/s ({:.1} M per CPU second), {:.1} M events written/s, {:.0} MB/s out ({} bytes)",
            report.records as f64 / s / 1e6,
            report.records as f64 / cpu_s / 1e6,
            report.events as f64 / s / 1e6,
            out.0 as f64 / s / 1e6,
            out.0
        );
    }
    if read_only || only.is_some() {
        return;
    }
    let reader = TraceReader::new(Cursor::new(&trace[..])).unwrap();
    let started = std::time::Instant::now();
    let report = export::export(
        reader,
        Format::Perfetto,
        std::io::sink(),
        Options {
            ordered: true,
            ..Options::default()
        },
    )
    .unwrap();
    eprintln!(
        "perfetto ordered: {:.1} M records/s",
        report.records as f64 / started.elapsed().as_secs_f64() / 1e6
    );
}

/// The time this thread has run on a CPU, in ns (Linux's schedstat; 0 elsewhere): rates per
/// CPU second do not depend on what else the machine runs.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A writer that only counts.
struct CountingSink(u64);

impl std::io::Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A rank's trace: `gyr.msg.rank`, then MPI calls with their messages, written to `dir`.
fn rank_trace(
    dir: &std::path::Path,
    rank: u64,
    events: &[(u64, u32, Vec<u8>)],
) -> std::path::PathBuf {
    let f = |n: &str, t| Field::new(n, t);
    let msg = || {
        vec![
            f("peer", FieldType::U32),
            f("tag", FieldType::I32),
            f("bytes", FieldType::U64),
            f("comm", FieldType::U64),
        ]
    };
    let schemas = [
        Schema::new(
            1,
            "gyr.msg.rank",
            vec![
                f("job", FieldType::Str),
                f("rank", FieldType::U32),
                f("size", FieldType::U32),
            ],
        )
        .unwrap(),
        Schema::new(2, "gyr.mpi.begin", vec![f("call", FieldType::Str)]).unwrap(),
        Schema::new(
            3,
            "gyr.mpi.end",
            vec![f("call", FieldType::Str), f("ret", FieldType::I32)],
        )
        .unwrap(),
        Schema::new(4, "gyr.msg.send", msg()).unwrap(),
        Schema::new(5, "gyr.msg.recv", msg()).unwrap(),
    ];
    let mut header = TraceHeader::for_this_process();
    header.pid = 100 + rank as u32;
    header.command_line = vec!["./halo".into()];
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    for s in &schemas {
        w.schema(s).unwrap();
    }
    w.thread(&ThreadInfo {
        id: 1,
        name: "main".into(),
        os_tid: 1,
    })
    .unwrap();
    let mut buf = Vec::new();
    let mut rank_payload = string("job");
    rank_payload.extend((rank as u32).to_le_bytes());
    rank_payload.extend(2u32.to_le_bytes());
    push_record(&mut buf, 1, 10, 1, 0, &rank_payload);
    for (i, (ts, ty, p)) in events.iter().enumerate() {
        push_record(&mut buf, *ty, *ts, i as u64 + 2, 0, p);
    }
    w.records(1, &buf).unwrap();
    let bytes = w
        .finish(&TraceEnd {
            end_ns: 1000,
            records: events.len() as u64 + 1,
            lost: 0,
            filtered: 0,
        })
        .unwrap();
    let path = dir.join(format!("halo.{rank}.gyr"));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn message(peer: u32, tag: i32, bytes: u64) -> Vec<u8> {
    let mut v = peer.to_le_bytes().to_vec();
    v.extend(tag.to_le_bytes());
    v.extend(bytes.to_le_bytes());
    v.extend(0u64.to_le_bytes());
    v
}

fn call(name: &str, end: bool) -> Vec<u8> {
    let mut v = string(name);
    if end {
        v.extend(0i32.to_le_bytes());
    }
    v
}

#[test]
fn ranks_and_their_messages_are_drawn_across_files() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 sends twice to rank 1 (tag 5); rank 1 receives both.
    let r0 = rank_trace(
        dir.path(),
        0,
        &[
            (100, 2, call("MPI_Send", false)),
            (110, 4, message(1, 5, 64)),
            (120, 3, call("MPI_Send", true)),
            (200, 2, call("MPI_Send", false)),
            (210, 4, message(1, 5, 64)),
            (220, 3, call("MPI_Send", true)),
        ],
    );
    let r1 = rank_trace(
        dir.path(),
        1,
        &[
            (90, 2, call("MPI_Recv", false)),
            (150, 5, message(0, 5, 64)),
            (151, 3, call("MPI_Recv", true)),
            (160, 2, call("MPI_Recv", false)),
            (250, 5, message(0, 5, 64)),
            (251, 3, call("MPI_Recv", true)),
        ],
    );
    let mut out = Vec::new();
    export::export_files(
        &[r1, r0],
        Format::Chrome,
        &mut out,
        Options::default(),
        &mut |_| {},
    )
    .unwrap();
    let events = check_chrome(&out);
    let processes: Vec<String> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(processes, ["rank 1 · halo", "rank 0 · halo"]);
    let slices = names(&events, "B");
    assert_eq!(slices.iter().filter(|n| *n == "MPI_Send").count(), 2);
    assert_eq!(slices.iter().filter(|n| *n == "MPI_Recv").count(), 2);
    let flows_in: Vec<&Json> = events.iter().filter(|e| e["flow_in"] == true).collect();
    assert_eq!(flows_in.len(), 2, "one arrow per message");
    // With an arrow, an instant is a zero-length slice in Chrome JSON.
    assert!(names(&events, "X").contains(&"send 64 B to rank 1".to_owned()));
}
