//! CSV and Parquet tables read back: one table per event type, every record present, every
//! column of its type with its values, strings that need quoting intact, two inputs sharing a
//! table and a name taken by two shapes.

use gyr_core::record::push_record;
use gyr_core::schema::ScalarType;
use gyr_core::trace::{TraceEnd, TraceHeader, TraceReader, TraceWriter};
use gyr_core::value::encode;
use gyr_core::{Field, FieldType, Schema, ThreadInfo, Value};
use gyr_trace::export::{self, Format, Input, Options};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::Path;

fn every_type() -> Schema {
    let s = |n: &str, t| Field::new(n, FieldType::Scalar(t));
    Schema::new(
        2,
        "probe",
        vec![
            s("a_i8", ScalarType::I8),
            s("a_i16", ScalarType::I16),
            s("a_i32", ScalarType::I32),
            s("a_i64", ScalarType::I64),
            s("a_u8", ScalarType::U8),
            s("a_u16", ScalarType::U16),
            s("a_u32", ScalarType::U32),
            s("a_u64", ScalarType::U64),
            s("a_f32", ScalarType::F32),
            s("a_f64", ScalarType::F64),
            s("a_bool", ScalarType::Bool),
            Field::new("text", FieldType::Str),
            Field::new("raw", FieldType::Bytes),
            Field::new("v", FieldType::Array(ScalarType::I32, 2)),
            s("pid", ScalarType::U8),
        ],
    )
    .unwrap()
}

fn steer(id: u32) -> Schema {
    Schema::new(
        id,
        "gyr.steer",
        vec![
            Field::new("client", FieldType::Str),
            Field::new("what", FieldType::Str),
            Field::new("ok", FieldType::Scalar(ScalarType::Bool)),
        ],
    )
    .unwrap()
}

/// `probe` with another shape.
fn probe_other(id: u32) -> Schema {
    Schema::new(
        id,
        "probe",
        vec![Field::new("x", FieldType::Scalar(ScalarType::F64))],
    )
    .unwrap()
}

const TRICKY: [&str; 5] = ["plain", "a,b", "say \"hi\"", "two\nlines\r\nand more", ""];

fn probe_values(i: i64) -> Vec<Value> {
    vec![
        Value::Int(-i),
        Value::Int(-300 * i),
        Value::Int(-70_000 * i),
        Value::Int(i64::MIN + i),
        Value::UInt(200 + i as u64),
        Value::UInt(60_000 + i as u64),
        Value::UInt(4_000_000_000 + i as u64),
        Value::UInt(u64::MAX - i as u64),
        Value::Float(0.5 * i as f64),
        Value::Float(0.1 + i as f64),
        Value::Bool(i % 2 == 0),
        Value::Str(TRICKY[i as usize % TRICKY.len()].to_owned()),
        Value::Bytes(vec![0, 0xab, i as u8]),
        Value::Array(vec![Value::Int(i), Value::Int(-i)]),
        Value::UInt(7),
    ]
}

/// Input 0: `probe` (every type) × 20 on two threads, `gyr.steer` × 5 with tricky strings.
/// Input 1 (no wall-clock anchor): `gyr.steer` × 3 (same shape, other id), `probe` of another
/// shape × 4.
fn traces() -> [Vec<u8>; 2] {
    let mut header = TraceHeader {
        pid: 11,
        start_unix_ns: 1_700_000_000_000_000_000,
        ..TraceHeader::default()
    };
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    w.schema(&every_type()).unwrap();
    w.schema(&steer(3)).unwrap();
    w.thread(&ThreadInfo {
        id: 1,
        name: "main, \"first\"".into(),
        os_tid: 1,
    })
    .unwrap();
    w.thread(&ThreadInfo {
        id: 2,
        name: "wörker".into(),
        os_tid: 2,
    })
    .unwrap();
    for t in [1u64, 2] {
        let mut block = Vec::new();
        for i in 0..10i64 {
            let k = (t as i64 - 1) * 10 + i;
            let p = encode(&every_type(), &probe_values(k)).unwrap();
            push_record(&mut block, 2, 1000 + k as u64, i as u64 + 1, 5, &p);
        }
        if t == 1 {
            for (i, s) in TRICKY.iter().enumerate() {
                let p = encode(
                    &steer(3),
                    &[
                        Value::Str(format!("client {i}")),
                        Value::Str((*s).to_owned()),
                        Value::Bool(i == 0),
                    ],
                )
                .unwrap();
                push_record(&mut block, 3, 5000 + i as u64, 100 + i as u64, 0, &p);
            }
        }
        w.records(t, &block).unwrap();
    }
    let a = w.finish(&TraceEnd::default()).unwrap();

    header.pid = 12;
    header.start_unix_ns = 0;
    let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
    w.schema(&steer(9)).unwrap();
    w.schema(&probe_other(4)).unwrap();
    let mut block = Vec::new();
    for i in 0..3u64 {
        let p = encode(
            &steer(9),
            &[
                Value::Str("second".into()),
                Value::Str("x,y".into()),
                Value::Bool(false),
            ],
        )
        .unwrap();
        push_record(&mut block, 9, 10 + i, i + 1, 0, &p);
    }
    for i in 0..4u64 {
        let p = encode(&probe_other(4), &[Value::Float(i as f64 * 1.5)]).unwrap();
        push_record(&mut block, 4, 20 + i, 4 + i, 0, &p);
    }
    // Thread 7 is never described: its name stays empty.
    w.records(7, &block).unwrap();
    let b = w.finish(&TraceEnd::default()).unwrap();
    [a, b]
}

fn export_to(format: Format, dir: &Path) -> export::table::TableStats {
    let inputs = traces()
        .into_iter()
        .enumerate()
        .map(|(i, t)| Input::new(format!("t{i}"), TraceReader::new(Cursor::new(t)).unwrap()))
        .collect();
    let (report, stats) =
        export::export_tables(inputs, format, dir, Options::default(), None, &mut |_| {}).unwrap();
    assert_eq!(report.records, 20 + 5 + 3 + 4);
    assert_eq!(stats.rows, report.records);
    assert_eq!(stats.skipped, 0);
    let names: Vec<_> = stats.tables.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["probe", "gyr.steer", "probe#2"]);
    stats
}

/// RFC 4180, as a strict reader sees it.
fn parse_csv(text: &str) -> Vec<Vec<Option<String>>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut chars = text.chars().peekable();
    let mut field = String::new();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' => {
                assert!(field.is_empty(), "a quote inside an unquoted field");
                quoted = true;
                was_quoted = true;
            }
            ',' | '\n' => {
                let f = std::mem::take(&mut field);
                row.push((was_quoted || !f.is_empty()).then_some(f));
                was_quoted = false;
                if c == '\n' {
                    rows.push(std::mem::take(&mut row));
                }
            }
            '\r' => panic!("a bare carriage return outside quotes"),
            c => field.push(c),
        }
    }
    assert!(
        !quoted && row.is_empty() && field.is_empty(),
        "the file ends inside a row"
    );
    rows
}

fn csv_table(path: &Path) -> (Vec<String>, Vec<BTreeMap<String, Option<String>>>) {
    let rows = parse_csv(&std::fs::read_to_string(path).unwrap());
    let head: Vec<String> = rows[0].iter().map(|c| c.clone().unwrap()).collect();
    let body = rows[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.len(), head.len(), "every row has every column");
            head.iter().cloned().zip(r.iter().cloned()).collect()
        })
        .collect();
    (head, body)
}

#[test]
fn csv_tables_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let stats = export_to(Format::Csv, dir.path());
    let files: Vec<_> = stats
        .tables
        .iter()
        .map(|(_, p)| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(files, ["probe.csv", "gyr.steer.csv", "probe_2.csv"]);

    let (head, rows) = csv_table(&dir.path().join("probe.csv"));
    assert_eq!(
        head[..7],
        [
            "time_ns",
            "wall_time",
            "pid",
            "thread",
            "thread_name",
            "seq",
            "perturbation_ns"
        ]
    );
    assert_eq!(head[7..].last().unwrap(), "pid_field");
    assert!(head.contains(&"v_0".to_owned()) && head.contains(&"v_1".to_owned()));
    assert_eq!(rows.len(), 20);
    let get = |r: &BTreeMap<String, Option<String>>, k: &str| r[k].clone();
    for r in &rows {
        let ts: u64 = get(r, "time_ns").unwrap().parse().unwrap();
        let k = (ts - 1000) as i64;
        let v = probe_values(k);
        let t = if k < 10 { "1" } else { "2" };
        assert_eq!(get(r, "thread").as_deref(), Some(t));
        assert_eq!(
            get(r, "thread_name").as_deref(),
            Some(if k < 10 { "main, \"first\"" } else { "wörker" })
        );
        assert_eq!(get(r, "pid").as_deref(), Some("11"));
        assert_eq!(get(r, "perturbation_ns").as_deref(), Some("5"));
        let wall = get(r, "wall_time").unwrap();
        assert!(wall.starts_with("2023-11-14T22:13:20.000001"), "{wall}");
        let text = |v: &Value| match v {
            Value::Int(x) => x.to_string(),
            Value::UInt(x) => x.to_string(),
            Value::Float(x) if x.fract() == 0.0 => format!("{x}.0"),
            Value::Float(x) => x.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Str(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        for (i, name) in [
            "a_i8", "a_i16", "a_i32", "a_i64", "a_u8", "a_u16", "a_u32", "a_u64", "a_f32", "a_f64",
            "a_bool", "text",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(get(r, name).unwrap(), text(&v[i]), "{name} of row {k}");
        }
        assert_eq!(get(r, "raw").unwrap(), format!("00ab{:02x}", k as u8));
        assert_eq!(get(r, "v_1").unwrap(), (-k).to_string());
        assert_eq!(get(r, "pid_field").as_deref(), Some("7"));
    }

    let (_, steer) = csv_table(&dir.path().join("gyr.steer.csv"));
    assert_eq!(steer.len(), 5 + 3);
    let whats: Vec<_> = steer.iter().map(|r| r["what"].clone().unwrap()).collect();
    assert_eq!(&whats[..5], TRICKY);
    assert_eq!(&whats[5..], ["x,y"; 3]);
    // The second input has no anchor and never described its thread.
    assert_eq!(steer[5]["wall_time"], None);
    assert_eq!(steer[5]["thread_name"], None);
    assert_eq!(steer[5]["pid"].as_deref(), Some("12"));

    let (head, other) = csv_table(&dir.path().join("probe_2.csv"));
    assert_eq!(head.last().unwrap(), "x");
    assert_eq!(
        other
            .iter()
            .map(|r| r["x"].clone().unwrap())
            .collect::<Vec<_>>(),
        ["0.0", "1.5", "3.0", "4.5"]
    );
}

#[test]
fn a_directory_format_refuses_a_writer() {
    let input = Input::new(
        "t",
        TraceReader::new(Cursor::new(traces()[0].clone())).unwrap(),
    );
    let e = export::export_inputs(
        vec![input],
        Format::Csv,
        Vec::new(),
        Options::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("directory"), "{e}");
}

#[cfg(not(feature = "parquet"))]
#[test]
fn parquet_without_the_feature_says_how_to_build_it() {
    let e = Format::Parquet.check_built().unwrap_err();
    assert!(e.contains("--features parquet"), "{e}");
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_tables_read_back() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    use arrow_schema::{DataType, TimeUnit};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let dir = tempfile::tempdir().unwrap();
    export_to(Format::Parquet, dir.path());
    let read = |name: &str| {
        let f = std::fs::File::open(dir.path().join(name)).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
        arrow_select_concat(&batches)
    };
    let probe = read("probe.parquet");
    assert_eq!(probe.num_rows(), 20);
    let ty = |n: &str| {
        probe
            .schema()
            .field_with_name(n)
            .unwrap()
            .data_type()
            .clone()
    };
    for (n, t) in [
        ("time_ns", DataType::UInt64),
        (
            "wall_time",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
        ),
        ("pid", DataType::UInt32),
        ("thread_name", DataType::Utf8),
        ("a_i8", DataType::Int8),
        ("a_i16", DataType::Int16),
        ("a_i32", DataType::Int32),
        ("a_i64", DataType::Int64),
        ("a_u8", DataType::UInt8),
        ("a_u16", DataType::UInt16),
        ("a_u32", DataType::UInt32),
        ("a_u64", DataType::UInt64),
        ("a_f32", DataType::Float32),
        ("a_f64", DataType::Float64),
        ("a_bool", DataType::Boolean),
        ("text", DataType::Utf8),
        ("raw", DataType::Binary),
        ("v_0", DataType::Int32),
        ("pid_field", DataType::UInt8),
    ] {
        assert_eq!(ty(n), t, "column {n}");
    }
    let col = |n: &str| probe.column_by_name(n).unwrap().clone();
    let times = col("time_ns");
    let times = times.as_primitive::<UInt64Type>();
    for row in 0..20 {
        let k = (times.value(row) - 1000) as i64;
        let v = probe_values(k);
        assert_eq!(
            col("a_i64").as_primitive::<Int64Type>().value(row),
            i64::MIN + k
        );
        assert_eq!(
            col("a_u64").as_primitive::<UInt64Type>().value(row),
            u64::MAX - k as u64
        );
        assert_eq!(col("a_i8").as_primitive::<Int8Type>().value(row), -k as i8);
        assert_eq!(
            col("a_f64").as_primitive::<Float64Type>().value(row),
            0.1 + k as f64
        );
        assert_eq!(col("a_bool").as_boolean().value(row), k % 2 == 0);
        assert_eq!(
            Value::Str(col("text").as_string::<i32>().value(row).to_owned()),
            v[11]
        );
        assert_eq!(col("raw").as_binary::<i32>().value(row), [0, 0xab, k as u8]);
        assert_eq!(
            col("wall_time")
                .as_primitive::<TimestampNanosecondType>()
                .value(row),
            1_700_000_000_000_000_000 + 1000 + k
        );
    }
    let steer = read("gyr.steer.parquet");
    assert_eq!(steer.num_rows(), 8);
    let what = steer.column_by_name("what").unwrap();
    let what = what.as_string::<i32>();
    for (i, t) in TRICKY.iter().enumerate() {
        assert_eq!(what.value(i), *t);
    }
    let wall = steer.column_by_name("wall_time").unwrap();
    assert!(wall.is_valid(0) && wall.is_null(5));
    assert_eq!(read("probe_2.parquet").num_rows(), 4);
}

/// The batches of one file as one (a small file is one batch).
#[cfg(feature = "parquet")]
fn arrow_select_concat(batches: &[arrow_array::RecordBatch]) -> arrow_array::RecordBatch {
    assert_eq!(batches.len(), 1, "a small table reads back as one batch");
    batches[0].clone()
}
