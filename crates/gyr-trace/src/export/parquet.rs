//! Parquet tables (feature `parquet`): one file per event type, through the Arrow writer,
//! snappy-compressed (see [`super::table`] for the columns, [`super::arrow`] for how rows become
//! Arrow batches).
//!
//! Columns keep gyr's types: `i8` .. `u64` as Parquet integers of that width and signedness,
//! `f32`, `f64`, `bool`, strings as UTF-8 `BYTE_ARRAY`, bytes as `BYTE_ARRAY`, and the wall-clock
//! time as `TIMESTAMP(NANOS, UTC)`. Memory stays bounded whatever the trace's size: rows are
//! handed to the writer in batches of [`BATCH_ROWS`], and each file's row group is closed at
//! [`ROW_GROUP_ROWS`] rows or [`ROW_GROUP_BYTES`] bytes, whichever comes first, so that each
//! table holds at most about one row group in memory.

use super::arrow::{Builder, schema_of};
use super::table::{Cell, Column, TableSink};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io;
use std::path::PathBuf;

/// Rows gathered before they are handed to the Parquet writer.
pub const BATCH_ROWS: usize = 8192;
/// The most rows of a row group.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// The most bytes (encoded) of a row group held in memory before it is written.
pub const ROW_GROUP_BYTES: usize = 16 << 20;

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
        let schema = schema_of(&columns);
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
