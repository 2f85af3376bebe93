//! The trace format's guarantees: any events of any schema round-trip; a file cut anywhere reads
//! back every complete chunk without a panic; files of every released format version stay
//! readable.

use gyr_core::record::push_record;
use gyr_core::schema::ScalarType;
use gyr_core::trace::{Damage, Item, TraceReader, TraceWriter};
use gyr_core::value::{decode, encode};
use gyr_core::{Field, FieldType, Schema, TraceEnd, TraceHeader, Value};
use proptest::prelude::*;
use std::io::Cursor;

fn scalar() -> impl Strategy<Value = ScalarType> {
    proptest::sample::select(ScalarType::ALL.to_vec())
}

fn field_type() -> impl Strategy<Value = FieldType> {
    prop_oneof![
        scalar().prop_map(FieldType::Scalar),
        Just(FieldType::Str),
        Just(FieldType::Bytes),
        (scalar(), 1u32..6).prop_map(|(s, n)| FieldType::Array(s, n)),
    ]
}

fn scalar_value(s: ScalarType) -> BoxedStrategy<Value> {
    match s {
        ScalarType::I8 => any::<i8>().prop_map(|v| Value::Int(v as i64)).boxed(),
        ScalarType::I16 => any::<i16>().prop_map(|v| Value::Int(v as i64)).boxed(),
        ScalarType::I32 => any::<i32>().prop_map(|v| Value::Int(v as i64)).boxed(),
        ScalarType::I64 => any::<i64>().prop_map(Value::Int).boxed(),
        ScalarType::U8 => any::<u8>().prop_map(|v| Value::UInt(v as u64)).boxed(),
        ScalarType::U16 => any::<u16>().prop_map(|v| Value::UInt(v as u64)).boxed(),
        ScalarType::U32 => any::<u32>().prop_map(|v| Value::UInt(v as u64)).boxed(),
        ScalarType::U64 => any::<u64>().prop_map(Value::UInt).boxed(),
        // NaN never equals itself; every other float must come back bit for bit.
        ScalarType::F32 => any::<f32>()
            .prop_filter("not NaN", |v| !v.is_nan())
            .prop_map(|v| Value::Float(v as f64))
            .boxed(),
        ScalarType::F64 => any::<f64>()
            .prop_filter("not NaN", |v| !v.is_nan())
            .prop_map(Value::Float)
            .boxed(),
        ScalarType::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        other => panic!("scalar type {other:?} has no strategy yet: add one"),
    }
}

fn value(ty: FieldType) -> BoxedStrategy<Value> {
    match ty {
        FieldType::Str => ".{0,12}".prop_map(Value::Str).boxed(),
        FieldType::Bytes => proptest::collection::vec(any::<u8>(), 0..20)
            .prop_map(Value::Bytes)
            .boxed(),
        FieldType::Array(s, n) => proptest::collection::vec(scalar_value(s), n as usize)
            .prop_map(Value::Array)
            .boxed(),
        FieldType::Scalar(s) => scalar_value(s),
        other => panic!("field type {other:?} has no strategy yet: add one"),
    }
}

/// Schemas with ids 2.., and events: (schema index, thread, values).
/// An event to write: (schema index, thread, field values).
type Event = (usize, u64, Vec<Value>);
/// A record read back: (type name, thread, seq, field values).
type ReadBack = (String, u64, u64, Vec<Value>);

fn schemas_and_events() -> impl Strategy<Value = (Vec<Schema>, Vec<Event>)> {
    proptest::collection::vec(proptest::collection::vec(field_type(), 0..5), 1..4)
        .prop_map(|shapes| {
            shapes
                .into_iter()
                .enumerate()
                .map(|(i, tys)| {
                    let fields = tys
                        .into_iter()
                        .enumerate()
                        .map(|(j, t)| Field::new(format!("f{j}"), t))
                        .collect();
                    Schema::new(i as u32 + 2, format!("type_{i}"), fields).unwrap()
                })
                .collect::<Vec<_>>()
        })
        .prop_flat_map(|schemas| {
            let n = schemas.len();
            let events = proptest::collection::vec(
                (0..n, 1u64..4).prop_flat_map({
                    let schemas = schemas.clone();
                    move |(i, thread)| {
                        let vals: Vec<BoxedStrategy<Value>> =
                            schemas[i].fields.iter().map(|f| value(f.ty)).collect();
                        (Just(i), Just(thread), vals)
                    }
                }),
                0..60,
            );
            (Just(schemas), events)
        })
}

fn write_trace(
    schemas: &[Schema],
    events: &[(usize, u64, Vec<Value>)],
    chunk_target: usize,
) -> Vec<u8> {
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::for_this_process()).unwrap();
    w.set_chunk_target(chunk_target);
    for s in schemas {
        w.schema(s).unwrap();
    }
    for (seq, (i, thread, values)) in events.iter().enumerate() {
        let mut rec = Vec::new();
        let payload = encode(&schemas[*i], values).unwrap();
        push_record(
            &mut rec,
            schemas[*i].id,
            seq as u64 * 10,
            seq as u64 + 1,
            0,
            &payload,
        );
        w.records(*thread, &rec).unwrap();
    }
    w.finish(&TraceEnd {
        records: events.len() as u64,
        ..TraceEnd::default()
    })
    .unwrap()
}

fn read_all(bytes: Vec<u8>) -> (Vec<ReadBack>, gyr_core::trace::ReadSummary) {
    let mut r = TraceReader::new(Cursor::new(bytes)).unwrap();
    let mut out = Vec::new();
    r.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            out.push((
                s.name.clone(),
                record.thread,
                record.header.seq,
                decode(s, record.payload).unwrap(),
            ));
        }
    });
    (out, r.summary().clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_events_round_trip(( schemas, events) in schemas_and_events(), chunk_target in prop_oneof![Just(1usize), Just(256), Just(1 << 20)]) {
        let bytes = write_trace(&schemas, &events, chunk_target);
        let (got, summary) = read_all(bytes);
        prop_assert!(summary.clean_end);
        prop_assert!(summary.damage.is_empty());
        prop_assert_eq!(got.len(), events.len());
        for (k, ((name, thread, seq, values), (i, t, v))) in got.iter().zip(&events).enumerate() {
            prop_assert_eq!(name, &schemas[*i].name);
            prop_assert_eq!(thread, t);
            prop_assert_eq!(*seq, k as u64 + 1);
            prop_assert_eq!(values, v);
        }
    }
}

/// Cut a file at every byte offset within its last chunks: every complete chunk comes back, the
/// cut is reported as a cut-off tail (not corruption), and nothing panics.
#[test]
fn truncation_at_every_offset_recovers_every_complete_chunk() {
    let schema = Schema::new(
        2,
        "x",
        vec![
            Field::new("v", FieldType::U64),
            Field::new("s", FieldType::Str),
        ],
    )
    .unwrap();
    let events: Vec<(usize, u64, Vec<Value>)> = (0..40)
        .map(|i| {
            (
                0,
                1 + i % 3,
                vec![Value::UInt(i), Value::Str("x".repeat(i as usize % 7))],
            )
        })
        .collect();
    // One event per chunk, so complete chunks map to events one to one.
    let full = write_trace(std::slice::from_ref(&schema), &events, 1);
    // Chunk boundaries: walk the headers.
    let mut ends = Vec::new();
    let mut at = 16usize;
    while at < full.len() {
        let len = u32::from_le_bytes(full[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 16 + len;
        ends.push(at);
    }
    assert_eq!(*ends.last().unwrap(), full.len());
    // The header chunk, the schema chunk, 40 record chunks, the end chunk.
    assert_eq!(ends.len(), 43);
    let last_chunks_start = ends[ends.len() - 6];
    for cut in last_chunks_start..full.len() {
        let (got, summary) = read_all(full[..cut].to_vec());
        let complete = ends.iter().filter(|&&e| e <= cut).count();
        let expected_records = complete.saturating_sub(2).min(40);
        assert_eq!(got.len(), expected_records, "cut at {cut}");
        assert!(!summary.is_corrupt(), "cut at {cut}: {:?}", summary.damage);
        if ends.contains(&cut) {
            assert!(summary.damage.is_empty(), "cut at chunk boundary {cut}");
        } else {
            assert!(
                matches!(summary.damage.as_slice(), [Damage::Truncated { .. }]),
                "cut at {cut}: {:?}",
                summary.damage
            );
        }
    }
    // A cut inside the header chunk makes the file unreadable, with a clear error.
    for cut in [0, 5, 8, 16, 20, ends[0] - 1] {
        assert!(
            TraceReader::new(Cursor::new(full[..cut].to_vec())).is_err(),
            "cut at {cut}"
        );
    }
}

/// Flipping any single byte after the header never panics, and never yields a wrong record:
/// what is read is a subset of what was written.
#[test]
fn corruption_anywhere_is_detected_not_misread() {
    let schema = Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap();
    let events: Vec<(usize, u64, Vec<Value>)> =
        (0..20).map(|i| (0, 1, vec![Value::UInt(i)])).collect();
    let full = write_trace(std::slice::from_ref(&schema), &events, 64);
    let header_end = 16 + 16 + u32::from_le_bytes(full[20..24].try_into().unwrap()) as usize;
    for at in header_end..full.len() {
        let mut bytes = full.clone();
        bytes[at] ^= 0x5a;
        let (got, _) = read_all(bytes);
        for (_, _, seq, values) in &got {
            assert_eq!(values, &vec![Value::UInt(seq - 1)], "flip at {at}");
        }
    }
}

/// The golden file of format version 1 is read forever: regenerate it only with a new version.
#[test]
fn golden_v1_file_reads_back() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.gyr");
    let expected = golden_v1();
    if std::env::var_os("GYR_BLESS").is_some() {
        std::fs::write(path, &expected).unwrap();
    }
    let bytes = std::fs::read(path).expect("tests/data/v1.gyr is committed");
    assert!(
        bytes == expected,
        "the writer's output for version 1 changed: bump FORMAT_VERSION and add a new golden file"
    );
    let mut r = TraceReader::new(Cursor::new(bytes)).unwrap();
    assert_eq!(r.header().host, "golden-host");
    assert_eq!(r.header().pid, 4242);
    let mut got = Vec::new();
    r.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            got.push(format!(
                "{} t{} #{} @{} {:?}",
                s.name,
                record.thread,
                record.header.seq,
                record.header.timestamp,
                decode(s, record.payload).unwrap()
            ));
        }
    });
    assert_eq!(
        got,
        vec![
            "work_load t1 #1 @1000 [UInt(3), Float(0.75)]",
            "gyr.lost t2 #1 @2000 [UInt(1), UInt(5), UInt(2), UInt(6)]",
            "note t1 #7 @3000 [Str(\"héllo\"), Bytes([1, 2]), Array([Int(-1), Int(2)])]",
        ]
    );
    assert!(r.summary().clean_end);
}

fn golden_v1() -> Vec<u8> {
    let header = TraceHeader {
        pid: 4242,
        host: "golden-host".into(),
        command_line: vec!["golden".into()],
        start_unix_ns: 1_700_000_000_000_000_000,
        clock_source: "tsc".into(),
        ticks_per_second: 2.2e9,
        sensor_cost_ns: 10.0,
        policy: "block".into(),
        gyr_version: "0.1.0".into(),
    };
    let work = Schema::new(
        2,
        "work_load",
        vec![
            Field::new("domain", FieldType::U32),
            Field::new("load", FieldType::F64),
        ],
    )
    .unwrap();
    let note = Schema::new(
        3,
        "note",
        vec![
            Field::new("text", FieldType::Str),
            Field::new("raw", FieldType::Bytes),
            Field::new("pair", FieldType::Array(ScalarType::I16, 2)),
        ],
    )
    .unwrap();
    let lost = gyr_core::lost_schema(1);
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    for s in [&lost, &work, &note] {
        w.schema(s).unwrap();
    }
    w.thread(&gyr_core::ThreadInfo {
        id: 1,
        name: "main".into(),
        os_tid: 7,
    })
    .unwrap();
    let mut rec = Vec::new();
    push_record(
        &mut rec,
        2,
        1000,
        1,
        0,
        &encode(&work, &[Value::UInt(3), Value::Float(0.75)]).unwrap(),
    );
    w.records(1, &rec).unwrap();
    rec.clear();
    let lost_payload = encode(
        &lost,
        &[
            Value::UInt(1),
            Value::UInt(5),
            Value::UInt(2),
            Value::UInt(6),
        ],
    )
    .unwrap();
    push_record(&mut rec, 1, 2000, 1, 0, &lost_payload);
    w.records(2, &rec).unwrap();
    rec.clear();
    let note_payload = encode(
        &note,
        &[
            Value::Str("héllo".into()),
            Value::Bytes(vec![1, 2]),
            Value::Array(vec![Value::Int(-1), Value::Int(2)]),
        ],
    )
    .unwrap();
    push_record(&mut rec, 3, 3000, 7, 0, &note_payload);
    w.records(1, &rec).unwrap();
    w.finish(&TraceEnd {
        end_ns: 4000,
        records: 3,
        lost: 5,
        filtered: 0,
    })
    .unwrap()
}

/// The chunks of a trace file: `(offset, total length)` of each, header included.
fn chunk_spans(file: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = 16usize;
    while at < file.len() {
        let len = 16 + u32::from_le_bytes(file[at + 4..at + 8].try_into().unwrap()) as usize;
        spans.push((at, len));
        at += len;
    }
    spans
}

/// A chunk header claiming the rest of the file, whose checksum is wrong.
fn fake_header(at: usize, file_len: usize) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..4].copy_from_slice(b"GYRC");
    h[4..8].copy_from_slice(&((file_len - at - 16) as u32).to_le_bytes());
    h[8..12].copy_from_slice(&0xdead_beefu32.to_le_bytes());
    h[12..16].copy_from_slice(&7u32.to_le_bytes());
    h
}

/// A header every 16 bytes, each claiming the rest of the file: checking each by hashing its
/// payload would cost the square of the file's size. The reader's work stays linear.
#[test]
fn crafted_headers_to_the_end_cost_linear_work() {
    let mut file = TraceWriter::new(Vec::new(), &TraceHeader::for_this_process())
        .unwrap()
        .finish(&TraceEnd::default())
        .unwrap();
    let start = chunk_spans(&file)[0].1 + 16;
    file.truncate(start);
    let total = 4 << 20;
    file.resize(total, 0);
    for at in (start..total - 16).step_by(16) {
        file[at..at + 16].copy_from_slice(&fake_header(at, total));
    }
    let mut r = TraceReader::new(Cursor::new(file)).unwrap();
    let mut records = 0;
    r.for_each_item(|_| records += 1);
    assert_eq!(records, 0);
    assert!(r.summary().is_corrupt());
    let examined = r.bytes_examined();
    assert!(
        examined <= 3 * total as u64,
        "{examined} bytes examined for a {total}-byte file"
    );
}

/// Crafted headers claiming the rest of the file between real chunks: every real chunk is
/// still read, each fake one is reported, and the work stays linear.
#[test]
fn crafted_headers_between_real_chunks_cost_linear_work() {
    let schema = Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap();
    let events: Vec<(usize, u64, Vec<Value>)> =
        (0..2000).map(|i| (0, 1, vec![Value::UInt(i)])).collect();
    let real = write_trace(std::slice::from_ref(&schema), &events, 1);
    let spans = chunk_spans(&real);
    let mut file = real[..16].to_vec();
    let mut fakes = Vec::new();
    for (k, &(at, len)) in spans.iter().enumerate() {
        if k >= 2 {
            fakes.push(file.len());
            file.extend_from_slice(&[0; 16]);
        }
        file.extend_from_slice(&real[at..at + len]);
    }
    let total = file.len();
    for &at in &fakes {
        file[at..at + 16].copy_from_slice(&fake_header(at, total));
    }
    let (got, summary) = read_all(file.clone());
    assert_eq!(got.len(), events.len());
    assert_eq!(summary.damage.len(), fakes.len());
    assert!(
        summary
            .damage
            .iter()
            .all(|d| matches!(d, Damage::BadChecksum { .. }))
    );
    let mut r = TraceReader::new(Cursor::new(file)).unwrap();
    r.for_each_item(|_| {});
    let examined = r.bytes_examined();
    assert!(
        examined <= 4 * total as u64,
        "{examined} bytes examined for a {total}-byte file"
    );
}

/// A clean file is read once: the scan for chunks and the decoding share their reads.
#[test]
fn a_clean_file_is_read_once() {
    let schema = Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap();
    let events: Vec<(usize, u64, Vec<Value>)> =
        (0..500).map(|i| (0, 1, vec![Value::UInt(i)])).collect();
    let file = write_trace(std::slice::from_ref(&schema), &events, 256);
    let total = file.len() as u64;
    let mut r = TraceReader::new(Cursor::new(file)).unwrap();
    r.for_each_item(|_| {});
    assert!(r.summary().damage.is_empty());
    assert!(r.bytes_examined() <= total + 64, "{}", r.bytes_examined());
}

/// Two traces in one file (`cat a.gyr b.gyr`): said in so many words, and both are read.
#[test]
fn a_second_trace_in_the_file_is_named() {
    let schema = Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap();
    let a_events: Vec<(usize, u64, Vec<Value>)> =
        (0..5).map(|i| (0, 1, vec![Value::UInt(i)])).collect();
    let b_events: Vec<(usize, u64, Vec<Value>)> =
        (0..7).map(|i| (0, 2, vec![Value::UInt(i)])).collect();
    let a = write_trace(std::slice::from_ref(&schema), &a_events, 64);
    let b = write_trace(std::slice::from_ref(&schema), &b_events, 64);
    let (got, summary) = read_all([a.clone(), b.clone()].concat());
    assert_eq!(got.len(), 12);
    assert_eq!(
        summary.damage,
        vec![Damage::SecondTrace {
            offset: a.len() as u64
        }]
    );
    let shown = summary.damage[0].to_string();
    assert!(
        shown.starts_with(&format!(
            "a second trace starts at byte {}: this file holds more than one trace (concatenated?)",
            a.len()
        )),
        "{shown}"
    );
    // The first trace cut off (chunks start on 8-byte boundaries), then a second one: a cut-off
    // tail, then the second trace.
    let cut = a.len() - 8;
    let (got, summary) = read_all([a[..cut].to_vec(), b].concat());
    assert_eq!(
        got.len(),
        5 + 7,
        "only the end chunk of the first trace is cut"
    );
    assert!(
        matches!(
            summary.damage.as_slice(),
            [Damage::Truncated { .. }, Damage::SecondTrace { offset }] if *offset == cut as u64
        ),
        "{:?}",
        summary.damage
    );
}

/// A bad length in the header chunk is named as such, with the length and the file's size.
#[test]
fn a_bad_length_in_chunk_0_is_named() {
    let file = TraceWriter::new(Vec::new(), &TraceHeader::for_this_process())
        .unwrap()
        .finish(&TraceEnd::default())
        .unwrap();
    let size = file.len();
    for (len, says) in [
        (13u32, "its length field says 13 bytes, which no chunk has"),
        (
            1 << 31,
            "its length field says 2147483648 bytes, which no chunk has",
        ),
        (1 << 20, "its length field says 1048576 bytes but only"),
    ] {
        let mut bad = file.clone();
        bad[20..24].copy_from_slice(&len.to_le_bytes());
        let err = TraceReader::new(Cursor::new(bad)).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
        assert!(
            err.contains(&format!("{size}-byte file"))
                || err.contains(&format!("the file has {size} bytes")),
            "{err}"
        );
        assert!(!err.contains("checksum"), "{err}");
    }
}
