//! Tables as Arrow record batches (feature `arrow`): the one conversion of [`super::table`]'s
//! rows into typed Arrow columns, shared by the Parquet export ([`super::parquet`]) and by
//! readers that keep the tables in memory ([`super::arrow_tables`], the Python package's
//! `gyr.read_trace`).
//!
//! Columns keep gyr's types: `i8` .. `u64` as Arrow integers of that width and signedness,
//! `f32`, `f64`, `bool`, strings as `Utf8`, bytes as `Binary`, and the wall-clock time as
//! `Timestamp(Nanosecond, "UTC")`. Every column is nullable (a wall-clock time or a thread name
//! may be unknown).

use super::table::{Cell, Column, ColumnType, TableSink};
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int8Builder, Int16Builder,
    Int32Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder,
    UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use gyr_core::schema::ScalarType;
use std::io;
use std::sync::Arc;

/// Rows of one record batch of an in-memory table: large enough that per-batch costs vanish,
/// small enough that a batch stays in the caches while it is built.
pub const MEMORY_BATCH_ROWS: usize = 1 << 16;

/// One column being gathered.
#[derive(Debug)]
pub(crate) enum Builder {
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Bool(BooleanBuilder),
    Str(StringBuilder),
    Bytes(BinaryBuilder),
    Wall(TimestampNanosecondBuilder),
}

impl Builder {
    pub(crate) fn new(ty: ColumnType) -> Self {
        match ty {
            ColumnType::Scalar(s) => match s {
                ScalarType::I8 => Builder::I8(Int8Builder::new()),
                ScalarType::I16 => Builder::I16(Int16Builder::new()),
                ScalarType::I32 => Builder::I32(Int32Builder::new()),
                ScalarType::I64 => Builder::I64(Int64Builder::new()),
                ScalarType::U8 => Builder::U8(UInt8Builder::new()),
                ScalarType::U16 => Builder::U16(UInt16Builder::new()),
                ScalarType::U32 => Builder::U32(UInt32Builder::new()),
                ScalarType::U64 => Builder::U64(UInt64Builder::new()),
                ScalarType::F32 => Builder::F32(Float32Builder::new()),
                ScalarType::F64 => Builder::F64(Float64Builder::new()),
                ScalarType::Bool => Builder::Bool(BooleanBuilder::new()),
                // A type of a later gyr: its cells are null.
                _ => Builder::Bytes(BinaryBuilder::new()),
            },
            ColumnType::Str => Builder::Str(StringBuilder::new()),
            ColumnType::Bytes => Builder::Bytes(BinaryBuilder::new()),
            ColumnType::WallTime => {
                Builder::Wall(TimestampNanosecondBuilder::new().with_timezone("UTC"))
            }
        }
    }

    /// Appends `c`; the table writer gives each column cells of its own type (or null).
    pub(crate) fn push(&mut self, c: &Cell<'_>) {
        let int = |c: &Cell<'_>| match *c {
            Cell::Int(v) => Some(v),
            Cell::UInt(v) => Some(v as i64),
            _ => None,
        };
        let uint = |c: &Cell<'_>| match *c {
            Cell::UInt(v) => Some(v),
            Cell::Int(v) => Some(v as u64),
            _ => None,
        };
        match self {
            Builder::I8(b) => b.append_option(int(c).map(|v| v as i8)),
            Builder::I16(b) => b.append_option(int(c).map(|v| v as i16)),
            Builder::I32(b) => b.append_option(int(c).map(|v| v as i32)),
            Builder::I64(b) => b.append_option(int(c)),
            Builder::U8(b) => b.append_option(uint(c).map(|v| v as u8)),
            Builder::U16(b) => b.append_option(uint(c).map(|v| v as u16)),
            Builder::U32(b) => b.append_option(uint(c).map(|v| v as u32)),
            Builder::U64(b) => b.append_option(uint(c)),
            Builder::F32(b) => b.append_option(match *c {
                Cell::Float(v) => Some(v as f32),
                _ => None,
            }),
            Builder::F64(b) => b.append_option(match *c {
                Cell::Float(v) => Some(v),
                _ => None,
            }),
            Builder::Bool(b) => b.append_option(match *c {
                Cell::Bool(v) => Some(v),
                _ => None,
            }),
            Builder::Str(b) => b.append_option(match *c {
                Cell::Str(v) => Some(v),
                _ => None,
            }),
            Builder::Bytes(b) => b.append_option(match *c {
                Cell::Bytes(v) => Some(v),
                _ => None,
            }),
            Builder::Wall(b) => b.append_option(uint(c).map(|v| v as i64)),
        }
    }

    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::I8(b) => Arc::new(b.finish()),
            Builder::I16(b) => Arc::new(b.finish()),
            Builder::I32(b) => Arc::new(b.finish()),
            Builder::I64(b) => Arc::new(b.finish()),
            Builder::U8(b) => Arc::new(b.finish()),
            Builder::U16(b) => Arc::new(b.finish()),
            Builder::U32(b) => Arc::new(b.finish()),
            Builder::U64(b) => Arc::new(b.finish()),
            Builder::F32(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::Bytes(b) => Arc::new(b.finish()),
            Builder::Wall(b) => Arc::new(b.finish()),
        }
    }
}

/// The Arrow type of a column of type `ty`.
pub(crate) fn data_type(ty: ColumnType) -> DataType {
    match ty {
        ColumnType::Scalar(s) => match s {
            ScalarType::I8 => DataType::Int8,
            ScalarType::I16 => DataType::Int16,
            ScalarType::I32 => DataType::Int32,
            ScalarType::I64 => DataType::Int64,
            ScalarType::U8 => DataType::UInt8,
            ScalarType::U16 => DataType::UInt16,
            ScalarType::U32 => DataType::UInt32,
            ScalarType::U64 => DataType::UInt64,
            ScalarType::F32 => DataType::Float32,
            ScalarType::F64 => DataType::Float64,
            ScalarType::Bool => DataType::Boolean,
            _ => DataType::Binary,
        },
        ColumnType::Str => DataType::Utf8,
        ColumnType::Bytes => DataType::Binary,
        ColumnType::WallTime => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
    }
}

/// The Arrow schema of a table of `columns`.
pub(crate) fn schema_of(columns: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(&c.name, data_type(c.ty), true))
            .collect::<Vec<_>>(),
    ))
}

/// One event type's table, in memory.
#[derive(Debug, Clone)]
pub struct ArrowTable {
    /// The event type's name (`name#2` for a second shape under one name, as in the exports).
    pub name: String,
    /// Its columns (see [`super::table`]).
    pub schema: SchemaRef,
    /// Its rows, in the order they were read, in batches of at most [`MEMORY_BATCH_ROWS`].
    pub batches: Vec<RecordBatch>,
}

impl ArrowTable {
    /// Rows in all.
    pub fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// One table being gathered.
#[derive(Debug)]
struct Gathering {
    table: ArrowTable,
    builders: Vec<Builder>,
    rows: usize,
}

impl Gathering {
    fn close_batch(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.table.schema.clone(), arrays)
            .map_err(|e| io::Error::other(format!("Arrow: {e}")))?;
        self.rows = 0;
        self.table.batches.push(batch);
        Ok(())
    }
}

/// Keeps every table in memory as Arrow record batches.
#[derive(Debug, Default)]
pub(crate) struct ArrowSink {
    tables: Vec<Gathering>,
}

impl ArrowSink {
    /// The tables, in order of creation; call after [`TableSink::finish`].
    pub(crate) fn into_tables(self) -> Vec<ArrowTable> {
        self.tables.into_iter().map(|g| g.table).collect()
    }

    /// Names the tables after their event types (the table writer knows them; the sink is told
    /// only file stems).
    pub(crate) fn name_tables(&mut self, names: impl IntoIterator<Item = String>) {
        for (g, n) in self.tables.iter_mut().zip(names) {
            g.table.name = n;
        }
    }
}

impl TableSink for ArrowSink {
    fn create(&mut self, file: &str, columns: Vec<Column>) -> io::Result<usize> {
        self.tables.push(Gathering {
            table: ArrowTable {
                name: file.to_owned(),
                schema: schema_of(&columns),
                batches: Vec::new(),
            },
            builders: columns.iter().map(|c| Builder::new(c.ty)).collect(),
            rows: 0,
        });
        Ok(self.tables.len() - 1)
    }

    fn row(&mut self, table: usize, cells: &[Cell<'_>]) -> io::Result<()> {
        let g = &mut self.tables[table];
        for (b, c) in g.builders.iter_mut().zip(cells) {
            b.push(c);
        }
        g.rows += 1;
        if g.rows >= MEMORY_BATCH_ROWS {
            g.close_batch()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        for g in &mut self.tables {
            g.close_batch()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Input, Options, arrow_tables};
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampNanosecondType, UInt32Type, UInt64Type};
    use arrow_schema::{DataType, TimeUnit};
    use gyr_core::record::push_record;
    use gyr_core::trace::{TraceEnd, TraceHeader, TraceReader, TraceWriter};
    use gyr_core::{Field, FieldType, Schema, ThreadInfo};
    use std::io::Cursor;

    /// A trace of `n` records of `step {i: u64, d: i64, ok: bool, s: string}` and one of
    /// `other {x: u32}`, on thread 1 named `worker`.
    fn trace(n: u64) -> Vec<u8> {
        let header = TraceHeader {
            pid: 9,
            start_unix_ns: 1_000_000_000,
            ..TraceHeader::default()
        };
        let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
        let step = Schema::new(
            1,
            "step",
            vec![
                Field::new("i", FieldType::U64),
                Field::new("d", FieldType::I64),
                Field::new("ok", FieldType::Bool),
                Field::new("s", FieldType::Str),
            ],
        )
        .unwrap();
        let other = Schema::new(2, "other", vec![Field::new("x", FieldType::U32)]).unwrap();
        w.schema(&step).unwrap();
        w.schema(&other).unwrap();
        w.thread(&ThreadInfo {
            id: 1,
            name: "worker".into(),
            os_tid: 5,
        })
        .unwrap();
        let mut r = Vec::new();
        for i in 0..n {
            let mut p = i.to_le_bytes().to_vec();
            p.extend((-(i as i64)).to_le_bytes());
            p.push(u8::from(i.is_multiple_of(2)));
            let s = format!("#{i}");
            p.extend((s.len() as u32).to_le_bytes());
            p.extend(s.as_bytes());
            push_record(&mut r, 1, 10 * i, i, 0, &p);
        }
        push_record(&mut r, 2, 10 * n, n, 0, &7u32.to_le_bytes());
        w.records(1, &r).unwrap();
        w.finish(&TraceEnd::default()).unwrap()
    }

    fn read(bytes: Vec<u8>, only: Option<&[String]>) -> Vec<super::ArrowTable> {
        let input = Input::new("t", TraceReader::new(Cursor::new(bytes)).unwrap());
        let (_, stats, tables) =
            arrow_tables(vec![input], only, Options::default(), None, &mut |_| {}).unwrap();
        assert_eq!(stats.skipped, 0);
        tables
    }

    #[test]
    fn typed_columns_in_batches() {
        let n = super::MEMORY_BATCH_ROWS as u64 + 10;
        let tables = read(trace(n), None);
        assert_eq!(
            tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["step", "other"]
        );
        let step = &tables[0];
        assert_eq!(step.rows() as u64, n);
        assert_eq!(step.batches.len(), 2, "a batch closes at MEMORY_BATCH_ROWS");
        let ty = |name: &str| {
            step.schema
                .field_with_name(name)
                .unwrap()
                .data_type()
                .clone()
        };
        assert_eq!(ty("time_ns"), DataType::UInt64);
        assert_eq!(
            ty("wall_time"),
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        );
        assert_eq!(ty("i"), DataType::UInt64);
        assert_eq!(ty("d"), DataType::Int64);
        assert_eq!(ty("ok"), DataType::Boolean);
        assert_eq!(ty("s"), DataType::Utf8);
        let last = step.batches.last().unwrap();
        let col = |name: &str| last.column(step.schema.index_of(name).unwrap()).clone();
        let k = n - 1;
        let row = last.num_rows() - 1;
        assert_eq!(col("i").as_primitive::<UInt64Type>().value(row), k);
        assert_eq!(col("d").as_primitive::<Int64Type>().value(row), -(k as i64));
        assert_eq!(col("ok").as_boolean().value(row), k.is_multiple_of(2));
        assert_eq!(col("s").as_string::<i32>().value(row), format!("#{k}"));
        assert_eq!(col("thread_name").as_string::<i32>().value(row), "worker");
        assert_eq!(col("pid").as_primitive::<UInt32Type>().value(row), 9);
        assert_eq!(
            col("wall_time")
                .as_primitive::<TimestampNanosecondType>()
                .value(row),
            1_000_000_000 + 10 * k as i64
        );
        assert_eq!(tables[1].rows(), 1);
    }

    #[test]
    fn only_the_types_asked_for() {
        let tables = read(trace(3), Some(&["other".to_string()]));
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].name, "other");
        assert_eq!(tables[0].rows(), 1);
    }
}
