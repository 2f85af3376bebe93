//! Parquet tables (feature `parquet`): one file per event type, through the Arrow writer,
//! snappy-compressed (see [`super::table`] for the columns).
//!
//! Columns keep gyr's types: `i8` .. `u64` as Parquet integers of that width and signedness,
//! `f32`, `f64`, `bool`, strings as UTF-8 `BYTE_ARRAY`, bytes as `BYTE_ARRAY`, and the wall-clock
//! time as `TIMESTAMP(NANOS, UTC)`. Memory stays bounded whatever the trace's size: rows are
//! handed to the writer in batches of [`BATCH_ROWS`], and each file's row group is closed at
//! [`ROW_GROUP_ROWS`] rows or [`ROW_GROUP_BYTES`] bytes, whichever comes first, so that each
//! table holds at most about one row group in memory.

use super::table::{Cell, Column, ColumnType, TableSink};
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int8Builder, Int16Builder,
    Int32Builder, Int64Builder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder,
    UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use gyr_core::schema::ScalarType;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Rows gathered before they are handed to the Parquet writer.
pub const BATCH_ROWS: usize = 8192;
/// The most rows of a row group.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// The most bytes (encoded) of a row group held in memory before it is written.
pub const ROW_GROUP_BYTES: usize = 16 << 20;

/// One column being gathered.
#[derive(Debug)]
enum Builder {
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
    fn new(ty: ColumnType) -> Self {
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
    fn push(&mut self, c: &Cell<'_>) {
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

    fn finish(&mut self) -> ArrayRef {
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

fn data_type(ty: ColumnType) -> DataType {
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

/// One Parquet file being written.
struct ParquetTable {
    schema: SchemaRef,
    builders: Vec<Builder>,
    rows: usize,
    writer: ArrowWriter<File>,
}

impl std::fmt::Debug for ParquetTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetTable")
            .field("schema", &self.schema)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

fn parquet_error(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(format!("Parquet: {e}"))
}

impl ParquetTable {
    /// Hands the gathered rows to the writer, which closes a row group when it is full.
    fn write_batch(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let arrays = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| io::Error::other(format!("Arrow: {e}")))?;
        self.rows = 0;
        self.writer.write(&batch).map_err(parquet_error)
    }
}

/// Writes each table as a Parquet file in one directory.
#[derive(Debug)]
pub(crate) struct ParquetSink {
    dir: PathBuf,
    tables: Vec<ParquetTable>,
}

impl ParquetSink {
    /// Tables written into `dir`, which exists.
    pub(crate) fn new(dir: PathBuf) -> Self {
        ParquetSink {
            dir,
            tables: Vec::new(),
        }
    }
}

impl TableSink for ParquetSink {
    fn create(&mut self, file: &str, columns: Vec<Column>) -> io::Result<usize> {
        let path = self.dir.join(format!("{file}.parquet"));
        let f = File::create(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        let schema: SchemaRef = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| Field::new(&c.name, data_type(c.ty), true))
                .collect::<Vec<_>>(),
        ));
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            .set_created_by(format!("gyr {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = ArrowWriter::try_new(f, schema.clone(), Some(props)).map_err(parquet_error)?;
        self.tables.push(ParquetTable {
            schema,
            builders: columns.iter().map(|c| Builder::new(c.ty)).collect(),
            rows: 0,
            writer,
        });
        Ok(self.tables.len() - 1)
    }

    fn row(&mut self, table: usize, cells: &[Cell<'_>]) -> io::Result<()> {
        let t = &mut self.tables[table];
        for (b, c) in t.builders.iter_mut().zip(cells) {
            b.push(c);
        }
        t.rows += 1;
        if t.rows >= BATCH_ROWS {
            t.write_batch()?;
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        for mut t in self.tables.drain(..) {
            t.write_batch()?;
            t.writer.close().map_err(parquet_error)?;
        }
        Ok(())
    }
}
