//! The trace format's guarantees: any events of any schema round-trip; a file cut anywhere reads
//! back every complete chunk without a panic; files of every released format version stay
//! readable.

use gyr_core::record::{RecordHeader, Records, push_record};
use gyr_core::schema::ScalarType;
use gyr_core::trace::{
    CHUNK_MAGIC, Damage, FORMAT_VERSION, Item, ReadSummary, TraceReader, TraceWriter,
};
use gyr_core::value::{decode, encode};
use gyr_core::{Field, FieldType, Schema, TraceEnd, TraceHeader, Value};
use proptest::prelude::*;
use std::io::{self, Cursor, Read, Seek, SeekFrom};
use std::ops::ControlFlow;

/// Runs a reader's read-ahead job on a thread, as gyr-trace does.
fn spawn(job: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    std::thread::Builder::new().spawn(job).map(drop)
}

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

/// How a test walks a trace.
#[derive(Clone, Copy, Debug)]
enum Walk {
    /// Chunks found on the walking thread.
    Here,
    /// Chunks found on a read-ahead thread.
    Ahead,
    /// On a read-ahead thread, pulled a chunk at a time.
    AheadByChunk,
}

/// Everything a walk of `input` gives, as text: each item, the format version as it changes,
/// the summary (damage in order) and the bytes examined.
fn transcript<R: Read + Seek + Send + 'static>(input: R, walk: Walk) -> String {
    let r = match TraceReader::new(input) {
        Ok(r) => r,
        Err(e) => return format!("error: {e}"),
    };
    let mut r = match walk {
        Walk::Here => r,
        Walk::Ahead | Walk::AheadByChunk => r.read_ahead(spawn),
    };
    let mut out = vec![format!("{:?} v{}", r.header(), r.format_version())];
    match walk {
        Walk::Here | Walk::Ahead => r.for_each_item(|item| out.push(format!("{item:?}"))),
        Walk::AheadByChunk => {
            let mut items = Vec::new();
            while r.for_each_item_of_next_chunk(|item| items.push(format!("{item:?}"))) {
                items.push(format!("chunk read, version {}", r.format_version()));
            }
            out.extend(items);
        }
    }
    if !matches!(walk, Walk::AheadByChunk) {
        out.push(format!("version {}", r.format_version()));
    }
    out.push(format!("{:?} {}", r.summary(), r.bytes_examined()));
    out.join("\n")
}

/// Checks that a walk with read-ahead gives what a walk without gives, item by item, damage
/// by damage.
fn same_with_read_ahead(bytes: &[u8]) {
    let here = transcript(Cursor::new(bytes.to_vec()), Walk::Here);
    let ahead = transcript(Cursor::new(bytes.to_vec()), Walk::Ahead);
    assert_eq!(here, ahead, "read-ahead differs");
    // Pulled a chunk at a time, the items and the summary are the same.
    let by_chunk = transcript(Cursor::new(bytes.to_vec()), Walk::AheadByChunk);
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("chunk read, ") && !l.starts_with("version "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(&here),
        strip(&by_chunk),
        "read-ahead a chunk at a time differs"
    );
}

fn read_all(bytes: Vec<u8>) -> (Vec<ReadBack>, gyr_core::trace::ReadSummary) {
    same_with_read_ahead(&bytes);
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

/// What a golden file holds, one line per record: `type thread #seq @timestamp [~perturbation]
/// values`.
fn golden_lines(bytes: Vec<u8>, version: u32) -> (Vec<String>, ReadSummary) {
    same_with_read_ahead(&bytes);
    let mut r = TraceReader::new(Cursor::new(bytes)).unwrap();
    assert_eq!(r.format_version(), version);
    assert_eq!(r.header().host, "golden-host");
    assert_eq!(r.header().pid, 4242);
    let mut got = Vec::new();
    r.for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            let h = record.header;
            let perturbation = match h.perturbation {
                0 => String::new(),
                p => format!(" ~{p}"),
            };
            got.push(format!(
                "{} t{} #{} @{}{perturbation} {:?}",
                s.name,
                record.thread,
                h.seq,
                h.timestamp,
                decode(s, record.payload).unwrap()
            ));
        }
    });
    (got, r.summary().clone())
}

/// The records of `golden_v1`, which `golden_v2` writes first.
const GOLDEN_V1_LINES: [&str; 3] = [
    "work_load t1 #1 @1000 [UInt(3), Float(0.75)]",
    "gyr.lost t2 #1 @2000 [UInt(1), UInt(5), UInt(2), UInt(6)]",
    "note t1 #7 @3000 [Str(\"héllo\"), Bytes([1, 2]), Array([Int(-1), Int(2)])]",
];

/// The golden file of format version 1 is read forever. The writer no longer writes version
/// 1, so the file is never regenerated: its checksum pins it.
#[test]
fn golden_v1_file_reads_back() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.gyr");
    let bytes = std::fs::read(path).expect("tests/data/v1.gyr is committed");
    assert_eq!(
        (bytes.len(), crc32fast::hash(&bytes)),
        (496, 0x6545_4c5a),
        "tests/data/v1.gyr changed: a file of a released version is never rewritten"
    );
    let (got, summary) = golden_lines(bytes, 1);
    assert_eq!(got, GOLDEN_V1_LINES);
    assert!(summary.clean_end);
    assert!(summary.damage.is_empty(), "{:?}", summary.damage);
}

/// The golden file of format version 2 is read forever: regenerate it (`GYR_BLESS=1`) only
/// with a new version.
#[test]
fn golden_v2_file_reads_back() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v2.gyr");
    let expected = golden_v2();
    if std::env::var_os("GYR_BLESS").is_some() && FORMAT_VERSION == 2 {
        std::fs::write(path, &expected).unwrap();
    }
    let bytes = std::fs::read(path).expect("tests/data/v2.gyr is committed");
    assert!(
        bytes == expected,
        "the writer's output for version 2 changed: bump FORMAT_VERSION and add a new golden file"
    );
    let (got, summary) = golden_lines(bytes, 2);
    let mut expected = GOLDEN_V1_LINES.to_vec();
    expected.extend([
        "work_load t1 #8 @5000 [UInt(4), Float(1.5)]",
        "work_load t1 #9 @5040 [UInt(5), Float(-2.0)]",
        "tick t1 #12 @5030 ~250 []",
        "tick t1 #13 @5030 ~250 []",
        "work_load t1 #2 @6000 ~7 [UInt(6), Float(0.0)]",
    ]);
    assert_eq!(got, expected);
    assert!(summary.clean_end);
    assert!(summary.damage.is_empty(), "{:?}", summary.damage);
}

/// The golden files' header, schemas and first three records, written by today's writer.
fn golden_writer() -> (TraceWriter<Vec<u8>>, Schema) {
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
    (w, work)
}

/// Version 2: the records of version 1's golden file, then a block whose records use every
/// part of the compact encoding (implicit and explicit sequence numbers, a perturbation that
/// changes, a clock going backwards, empty payloads), then a chunk of its own.
fn golden_v2() -> Vec<u8> {
    let (mut w, work) = golden_writer();
    let tick = Schema::new(4, "tick", vec![]).unwrap();
    w.schema(&tick).unwrap();
    let mut rec = Vec::new();
    let load = |d: u64, l: f64| encode(&work, &[Value::UInt(d), Value::Float(l)]).unwrap();
    push_record(&mut rec, 2, 5000, 8, 0, &load(4, 1.5));
    push_record(&mut rec, 2, 5040, 9, 0, &load(5, -2.0));
    push_record(&mut rec, 4, 5030, 12, 250, &[]);
    push_record(&mut rec, 4, 5030, 13, 250, &[]);
    w.records(1, &rec).unwrap();
    w.flush().unwrap();
    rec.clear();
    push_record(&mut rec, 2, 6000, 2, 7, &load(6, 0.0));
    w.records(1, &rec).unwrap();
    w.finish(&TraceEnd {
        end_ns: 7000,
        records: 8,
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
    // A chunk each block, so that the end block of `a` has a chunk of its own.
    let a = write_trace(std::slice::from_ref(&schema), &a_events, 1);
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

/// Every record of a trace, schema or not: (thread, header, payload).
type RawRecord = (u64, RecordHeader, Vec<u8>);

fn read_records(bytes: Vec<u8>) -> (Vec<RawRecord>, ReadSummary) {
    same_with_read_ahead(&bytes);
    let mut r = TraceReader::new(Cursor::new(bytes)).unwrap();
    let mut out = Vec::new();
    r.for_each_item(|item| {
        if let Item::Record { record, .. } = item {
            out.push((record.thread, record.header, record.payload.to_vec()));
        }
    });
    (out, r.summary().clone())
}

/// How a record's timestamp follows the previous one's.
#[derive(Clone, Debug)]
enum TimeStep {
    Later(u64),
    Earlier(u64),
    At(u64),
}

/// How a record's sequence number follows the previous one's.
#[derive(Clone, Debug)]
enum SeqStep {
    Next,
    Gap(u64),
    At(u64),
}

/// A record to write, relative to the one before it in the test's stream.
type RecordStep = (u32, TimeStep, SeqStep, Option<u64>, Vec<u8>);

fn record_step() -> impl Strategy<Value = RecordStep> {
    let type_id = prop_oneof![4 => 1u32..40, 1 => any::<u32>()];
    let time = prop_oneof![
        4 => (0u64..300).prop_map(TimeStep::Later),
        1 => (0u64..5000).prop_map(TimeStep::Earlier),
        1 => any::<u64>().prop_map(TimeStep::At),
    ];
    let seq = prop_oneof![
        4 => Just(SeqStep::Next),
        1 => (0u64..10).prop_map(SeqStep::Gap),
        1 => any::<u64>().prop_map(SeqStep::At),
    ];
    let perturbation = prop_oneof![3 => Just(None), 1 => any::<u64>().prop_map(Some)];
    let payload = prop_oneof![
        2 => Just(Vec::new()),
        4 => proptest::collection::vec(any::<u8>(), 1..130),
        1 => proptest::collection::vec(any::<u8>(), 1000..20_000),
    ];
    (type_id, time, seq, perturbation, payload)
}

/// Blocks of records in the fixed layout, as a local monitor hands them to the writer.
fn fixed_blocks(blocks: &[(u64, Vec<RecordStep>)]) -> Vec<(u64, Vec<u8>)> {
    let (mut t, mut seq, mut p) = (0u64, 0u64, 0u64);
    blocks
        .iter()
        .map(|(thread, steps)| {
            let mut fixed = Vec::new();
            for (type_id, time, s, perturbation, payload) in steps {
                t = match *time {
                    TimeStep::Later(d) => t.saturating_add(d),
                    TimeStep::Earlier(d) => t.saturating_sub(d),
                    TimeStep::At(at) => at,
                };
                seq = match *s {
                    SeqStep::Next => seq.wrapping_add(1),
                    SeqStep::Gap(g) => seq.wrapping_add(g),
                    SeqStep::At(at) => at,
                };
                p = perturbation.unwrap_or(p);
                push_record(&mut fixed, *type_id, t, seq, p, payload);
            }
            (*thread, fixed)
        })
        .collect()
}

fn blocks() -> impl Strategy<Value = Vec<(u64, Vec<RecordStep>)>> {
    proptest::collection::vec(
        (
            prop_oneof![1u64..4, any::<u64>()],
            proptest::collection::vec(record_step(), 0..40),
        ),
        0..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// Whatever the records hold (gaps in sequence numbers, changing perturbation, clocks going
    /// backwards, empty and large payloads, extreme values), the reader gives back exactly the
    /// records the writer was given, header and payload.
    #[test]
    fn any_records_round_trip_exactly(
        blocks in blocks(),
        chunk_target in prop_oneof![Just(1usize), Just(256), Just(1 << 20)],
    ) {
        let fixed = fixed_blocks(&blocks);
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
        w.set_chunk_target(chunk_target);
        let mut expected = Vec::new();
        for (thread, records) in &fixed {
            w.records(*thread, records).unwrap();
            for r in Records::new(*thread, records) {
                let r = r.unwrap();
                expected.push((r.thread, r.header, r.payload.to_vec()));
            }
        }
        let (got, summary) = read_records(w.finish(&TraceEnd::default()).unwrap());
        prop_assert!(summary.clean_end);
        // No schema was written: only their absence may be reported.
        let only_unknown_types = summary
            .damage
            .iter()
            .all(|d| matches!(d, Damage::UnknownType { .. }));
        prop_assert!(only_unknown_types, "{:?}", summary.damage);
        prop_assert_eq!(got, expected);
    }
}

/// A valid file whose second chunk's payload is `payload` (padded, with a correct checksum),
/// in format `version`: what the reader makes of crafted blocks.
fn file_with_chunk(payload: &[u8], version: u32) -> Vec<u8> {
    let mut file = TraceWriter::new(Vec::new(), &TraceHeader::default())
        .unwrap()
        .finish(&TraceEnd::default())
        .unwrap();
    file[8..12].copy_from_slice(&version.to_le_bytes());
    file.truncate(chunk_spans(&file)[0].1 + 16);
    let mut payload = payload.to_vec();
    payload.resize(payload.len().next_multiple_of(8), 0);
    file.extend_from_slice(&CHUNK_MAGIC);
    file.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    file.extend_from_slice(&1u32.to_le_bytes());
    file.extend_from_slice(&payload);
    file
}

/// A records block of `thread` whose body after the thread id is `records`.
fn records_block(thread: u64, records: &[u8]) -> Vec<u8> {
    let len = 8 + records.len();
    let mut block = vec![4, 0, 0, 0];
    block.extend_from_slice(&(len as u32).to_le_bytes());
    block.extend_from_slice(&thread.to_le_bytes());
    block.extend_from_slice(records);
    block.resize(8 + len.next_multiple_of(8), 0);
    block
}

/// Crafted format-2 records: the records before the bad one are read, the bad one and the
/// rest of its chunk are reported as a malformed block, saying what is wrong.
#[test]
fn crafted_compact_records_are_reported_not_misread() {
    // One good record (type 2 at 1000 ns, 1 payload byte), then the crafted bytes.
    let good: &[u8] = &[0x10, 0xe8, 0x07, 0x01, 0xaa];
    let cases: &[(&[u8], &str)] = &[
        (&[0x10], "it is cut short"),
        (&[0x10, 0x01], "it is cut short"),
        (&[0x11, 0x01, 0x00], "it is cut short"),
        (
            &[0x10, 0x01, 0x09, 1, 2, 3],
            "its payload runs past the end",
        ),
        (
            &[0x10, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f],
            "its payload runs past the end",
        ),
        (
            &[
                0x10, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f,
            ],
            "does not fit in 64 bits",
        ),
        (
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00, 0x00],
            "its type id is out of range",
        ),
        (&[0x14, 0xe9, 0x07, 0x00], "its timestamp is out of range"),
        (
            &[
                0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00,
            ],
            "its timestamp is out of range",
        ),
    ];
    for (bad, says) in cases {
        let body = [good, bad].concat();
        let (got, summary) = read_records(file_with_chunk(&records_block(3, &body), 2));
        assert_eq!(got.len(), 1, "{bad:?}");
        assert_eq!(
            got[0],
            (
                3,
                RecordHeader {
                    len: 33,
                    type_id: 2,
                    timestamp: 1000,
                    seq: 1,
                    perturbation: 0
                },
                vec![0xaa]
            )
        );
        let shown: Vec<String> = summary.damage.iter().map(|d| d.to_string()).collect();
        assert!(
            matches!(summary.damage.first(), Some(Damage::BadBlock { .. })),
            "{bad:?}: {shown:?}"
        );
        assert!(
            shown[0].contains("the record at byte 13 of a records block does not decode")
                && shown[0].contains(says),
            "{bad:?}: {shown:?}"
        );
    }
}

/// A block whose length cuts its last record short, and blocks too short to hold a thread
/// id: reported, and the chunk's other blocks before them are read.
#[test]
fn cut_compact_blocks_are_reported() {
    let mut fixed = Vec::new();
    push_record(&mut fixed, 2, 100, 1, 0, &[1; 64]);
    push_record(&mut fixed, 2, 130, 2, 0, &[2; 64]);
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    w.records(5, &fixed).unwrap();
    let file = w.finish(&TraceEnd::default()).unwrap();
    let (at, _) = chunk_spans(&file)[1];
    let block = &file[at + 16..];
    let body_len = u32::from_le_bytes(block[4..8].try_into().unwrap()) as usize;
    assert_eq!(
        body_len,
        8 + 2 * (3 + 64),
        "two steady records of 3 + 64 bytes"
    );
    for cut in 0..body_len {
        let mut crafted = records_block(5, &block[16..8 + body_len]);
        crafted.truncate(8 + cut);
        crafted[4..8].copy_from_slice(&(cut as u32).to_le_bytes());
        crafted.resize(8 + cut.next_multiple_of(8), 0);
        let (got, summary) = read_records(file_with_chunk(&crafted, 2));
        let whole = match cut {
            ..8 => 0,
            8..75 => 0,
            75..142 => 1,
            _ => 2,
        };
        assert_eq!(got.len(), whole, "cut at {cut}");
        let expect_damage = cut < 8 || (cut > 8 && cut != 75);
        assert_eq!(
            summary
                .damage
                .iter()
                .any(|d| matches!(d, Damage::BadBlock { .. })),
            expect_damage,
            "cut at {cut}: {:?}",
            summary.damage
        );
    }
}

/// Any single byte of a format-2 records block changed, in a chunk whose checksum is made to
/// match: the reader never panics, and what it reads ends at the first record that does not
/// decode.
#[test]
fn any_byte_of_a_compact_block_changed_never_panics() {
    let mut fixed = Vec::new();
    for i in 0..12u64 {
        let payload = vec![i as u8; (i as usize * 7) % 20];
        push_record(
            &mut fixed,
            2 + (i % 3) as u32,
            100 + i * i * 40,
            1 + i + i / 5,
            i / 4,
            &payload,
        );
    }
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    w.records(5, &fixed).unwrap();
    let file = w.finish(&TraceEnd::default()).unwrap();
    let (at, len) = chunk_spans(&file)[1];
    let payload = &file[at + 16..at + len];
    let (clean, _) = read_records(file_with_chunk(payload, 2));
    assert_eq!(clean.len(), 12);
    for i in 8..payload.len() {
        for v in [0x00, 0x01, 0x07, 0x7f, 0x80, 0xff, payload[i] ^ 0x5a] {
            let mut bytes = payload.to_vec();
            bytes[i] = v;
            let (got, _) = read_records(file_with_chunk(&bytes, 2));
            assert!(got.len() <= 200, "byte {i} = {v:#x}: {} records", got.len());
        }
    }
}

/// A records block of the fixed layout read as format 2, or the reverse, is damage, not a
/// panic: the version in the preamble decides.
#[test]
fn the_preamble_version_decides_the_records_encoding() {
    let mut fixed = Vec::new();
    push_record(&mut fixed, 2, 100, 1, 0, &[1; 8]);
    let (got, summary) = read_records(file_with_chunk(&records_block(1, &fixed), 1));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1.timestamp, 100);
    assert!(
        summary
            .damage
            .iter()
            .all(|d| matches!(d, Damage::UnknownType { .. }))
    );
    let (got, _) = read_records(file_with_chunk(&records_block(1, &fixed), 2));
    assert!(got.iter().all(|(_, h, _)| h.timestamp != 100));
    let compact = [0x10, 0x64, 0x01, 0xaa];
    let (got, summary) = read_records(file_with_chunk(&records_block(1, &compact), 1));
    assert!(got.is_empty());
    assert!(summary.is_corrupt());
}

/// A file of format 1 and one of format 2 concatenated, either way round: each trace's
/// records are read in its own encoding.
#[test]
fn traces_of_both_versions_in_one_file_are_both_read() {
    let v1 = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.gyr")).unwrap();
    let v2 = golden_v2();
    let (only_v2, _) = golden_lines(v2.clone(), 2);
    for (first, second, version) in [(&v1, &v2, 1), (&v2, &v1, 2)] {
        let (got, summary) = golden_lines([first.clone(), second.clone()].concat(), version);
        assert_eq!(got.len(), 3 + only_v2.len());
        assert_eq!(
            summary.damage,
            vec![Damage::SecondTrace {
                offset: first.len() as u64
            }]
        );
        let only_v1: Vec<String> = GOLDEN_V1_LINES.iter().map(|s| s.to_string()).collect();
        let expected = if version == 1 {
            [only_v1, only_v2.clone()].concat()
        } else {
            [only_v2.clone(), only_v1].concat()
        };
        assert_eq!(got, expected);
    }
}

/// Records whose fixed layout is broken are refused whole: nothing of the call reaches the
/// file, which reads back cleanly.
#[test]
fn the_writer_refuses_a_broken_block_whole() {
    let mut fixed = Vec::new();
    push_record(&mut fixed, 2, 100, 1, 0, &[1; 8]);
    push_record(&mut fixed, 2, 110, 2, 0, &[2; 8]);
    let good = fixed.clone();
    fixed[40..44].copy_from_slice(&7u32.to_le_bytes());
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
    w.set_chunk_target(1 << 20);
    w.records(1, &good).unwrap();
    let err = w.records(1, &fixed).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .contains("record at byte 40 of a records block cannot be written"),
        "{err}"
    );
    assert_eq!(w.pending_records(), 2);
    let err = w.records(1, &good[..50]).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let (got, summary) = read_records(w.finish(&TraceEnd::default()).unwrap());
    assert_eq!(got.len(), 2);
    assert!(
        summary
            .damage
            .iter()
            .all(|d| matches!(d, Damage::UnknownType { .. }))
    );
}

/// The target of format 2: a thread's stream of 64-byte events, given in blocks as a local
/// monitor drains a ring, takes at most 1.15 × 64 bytes an event in the file.
#[test]
fn a_64_byte_event_takes_under_74_bytes_on_disk() {
    let schema = Schema::new(
        2,
        "x",
        vec![Field::new("v", FieldType::Array(ScalarType::U64, 8))],
    )
    .unwrap();
    let mut w = TraceWriter::new(Vec::new(), &TraceHeader::for_this_process()).unwrap();
    w.schema(&schema).unwrap();
    let events = 200_000u64;
    let mut fixed = Vec::new();
    for i in 0..events {
        // About 23 ns apart, with a pause now and then.
        let t = i * 23 + (i / 1000) * 5_000;
        push_record(&mut fixed, 2, t, i + 1, 0, &[i as u8; 64]);
        if fixed.len() >= 96 * 4096 {
            w.records(1, &fixed).unwrap();
            fixed.clear();
        }
    }
    w.records(1, &fixed).unwrap();
    let file = w.finish(&TraceEnd::default()).unwrap();
    let per_event = file.len() as f64 / events as f64;
    assert!(per_event <= 1.15 * 64.0, "{per_event:.2} bytes an event");
    let (got, summary) = read_records(file);
    assert_eq!(got.len() as u64, events);
    assert!(summary.damage.is_empty());
}

/// A trace of a few chunks, for damaging: two schemas, three threads, records of both.
fn damageable_trace() -> Vec<u8> {
    let schemas = [
        Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap(),
        Schema::new(
            3,
            "y",
            vec![
                Field::new("s", FieldType::Str),
                Field::new("f", FieldType::F64),
            ],
        )
        .unwrap(),
    ];
    let events: Vec<(usize, u64, Vec<Value>)> = (0..60u64)
        .map(|i| match i % 3 {
            0 => (
                1,
                1 + i % 3,
                vec![Value::Str("s".repeat(i as usize % 9)), Value::Float(0.5)],
            ),
            _ => (0, 1 + i % 3, vec![Value::UInt(i)]),
        })
        .collect();
    write_trace(&schemas, &events, 96)
}

/// Something done to a file.
#[derive(Clone, Debug)]
enum Harm {
    /// XOR a byte.
    Flip(usize, u8),
    /// Cut the file there.
    Cut(usize),
    /// Zero a range.
    Zero(usize, usize),
    /// Copy a range of the file to another place (chunks repeated, misplaced).
    Splice(usize, usize, usize),
    /// Append a whole trace again.
    Append,
}

fn harm() -> impl Strategy<Value = Harm> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(a, x)| Harm::Flip(a, x)),
        1 => any::<usize>().prop_map(Harm::Cut),
        1 => (any::<usize>(), 0usize..200).prop_map(|(a, n)| Harm::Zero(a, n)),
        1 => (any::<usize>(), 0usize..300, any::<usize>()).prop_map(|(a, n, b)| Harm::Splice(a, n, b)),
        1 => Just(Harm::Append),
    ]
}

fn apply(file: &mut Vec<u8>, harm: &Harm, original: &[u8]) {
    let len = file.len().max(1);
    match *harm {
        Harm::Flip(at, x) => {
            let at = at % len;
            if let Some(b) = file.get_mut(at) {
                *b ^= x;
            }
        }
        Harm::Cut(at) => file.truncate(at % len),
        Harm::Zero(at, n) => {
            let at = at % len;
            let end = (at + n).min(file.len());
            file[at.min(end)..end].fill(0);
        }
        Harm::Splice(from, n, to) => {
            let from = from % len;
            let piece: Vec<u8> = file[from.min(file.len())..(from + n).min(file.len())].to_vec();
            let to = (to % len).min(file.len());
            file.splice(to..to, piece);
        }
        Harm::Append => file.extend_from_slice(original),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// However a file is damaged, a walk with read-ahead gives the items, damage, counts and
    /// versions of a walk without, in the same order.
    #[test]
    fn read_ahead_reads_any_damaged_file_as_the_walk_does(
        harms in proptest::collection::vec(harm(), 1..5),
        v1_first in any::<bool>(),
    ) {
        let original = damageable_trace();
        let mut file = if v1_first {
            // A trace of format 1 first, so that versions change along the file.
            let v1 = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.gyr")).unwrap();
            [v1, original.clone()].concat()
        } else {
            original.clone()
        };
        for h in &harms {
            apply(&mut file, h, &original);
        }
        same_with_read_ahead(&file);
    }
}

/// A file whose reads fail (or panic) once `ok` bytes have been read.
struct Failing {
    inner: Cursor<Vec<u8>>,
    ok: u64,
    panic: bool,
}

impl Read for Failing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.inner.position() >= self.ok {
            if self.panic {
                panic!("the disk caught fire");
            }
            return Err(io::Error::other("the disk caught fire"));
        }
        let room = (self.ok - self.inner.position()) as usize;
        let n = buf.len().min(room);
        self.inner.read(&mut buf[..n])
    }
}

impl Seek for Failing {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// A read error in the middle of a file is the same damage with read-ahead as without; a panic
/// on the read-ahead thread becomes damage of the same kind, not a hang or a panic in the walk.
#[test]
fn read_errors_and_panics_on_the_read_ahead_thread_are_damage() {
    let file = damageable_trace();
    let ok = file.len() as u64 / 2;
    let failing = |panic| Failing {
        inner: Cursor::new(file.clone()),
        ok,
        panic,
    };
    let here = transcript(failing(false), Walk::Here);
    assert!(here.contains("read error: the disk caught fire"), "{here}");
    assert_eq!(transcript(failing(false), Walk::Ahead), here);

    let mut r = TraceReader::new(failing(true)).unwrap().read_ahead(spawn);
    let mut records = 0;
    r.for_each_item(|item| records += u64::from(matches!(item, Item::Record { .. })));
    assert!(records > 0);
    match r.summary().damage.as_slice() {
        [Damage::BadBlock { what, .. }] => assert!(
            what.contains("the read-ahead thread stopped (the disk caught fire)"),
            "{what}"
        ),
        other => panic!("{other:?}"),
    }
    // Nothing more after the end.
    assert!(!r.for_each_item_of_next_chunk(|_| panic!("nothing after the end")));
}

/// A walk stopped early and its reader dropped: the read-ahead thread, waiting to hand over a
/// chunk, stops (the drop waits for it, so a thread left waiting would hang this test).
#[test]
fn dropping_a_read_ahead_reader_early_stops_its_thread() {
    let schema = Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap();
    let events: Vec<(usize, u64, Vec<Value>)> =
        (0..400).map(|i| (0, 1, vec![Value::UInt(i)])).collect();
    // Many more chunks than the thread keeps ready.
    let file = write_trace(std::slice::from_ref(&schema), &events, 1);
    let mut r = TraceReader::new(Cursor::new(file))
        .unwrap()
        .read_ahead(spawn);
    let mut seen = 0;
    r.try_for_each_item(|item| {
        if matches!(item, Item::Record { .. }) {
            seen += 1;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    assert_eq!(seen, 1);
    drop(r);
    // A reader never walked has no thread to stop.
    let file = write_trace(std::slice::from_ref(&schema), &events, 1);
    drop(
        TraceReader::new(Cursor::new(file))
            .unwrap()
            .read_ahead(spawn),
    );
}
