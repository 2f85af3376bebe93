//! Parquet tables (feature `parquet`): one file per event type, through the Arrow writer,
//! snappy-compressed (see [`super::table`] for the columns, [`super::arrow`] for how records become
//! Arrow batches).
//!
//! Columns keep gyr's types: `i8` .. `u64` as Parquet integers of that width and signedness,
//! `f32`, `f64`, `bool`, strings as UTF-8 `BYTE_ARRAY`, bytes as `BYTE_ARRAY`, and the wall-clock
//! time as `TIMESTAMP(NANOS, UTC)`. Memory stays bounded whatever the trace's size: rows are
//! handed to the writer in batches of [`BATCH_ROWS`], and each file's row group is closed at
//! [`ROW_GROUP_ROWS`] rows or [`ROW_GROUP_BYTES`] bytes, whichever comes first, so that each
//! table holds at most about one row group in memory.

use super::arrow::Columns;
use super::table::{Column, Fixed, TableSink};
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
    columns: Columns,
    writer: ArrowWriter<File>,
}

impl std::fmt::Debug for ParquetTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetTable")
            .field("schema", self.columns.schema())
            .field("rows", &self.columns.rows())
            .finish_non_exhaustive()
    }
}

fn parquet_error(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(format!("Parquet: {e}"))
}

impl ParquetTable {
    /// Hands the gathered rows to the writer, which closes a row group when it is full.
    fn write_batch(&mut self) -> io::Result<()> {
        match self.columns.batch()? {
            Some(batch) => self.writer.write(&batch).map_err(parquet_error),
            None => Ok(()),
        }
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
    fn create(
        &mut self,
        file: &str,
        schema: &gyr_core::schema::Schema,
        columns: Vec<Column>,
    ) -> io::Result<usize> {
        let path = self.dir.join(format!("{file}.parquet"));
        let f = File::create(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        let columns = Columns::new(schema, &columns);
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            .set_created_by(format!("gyr {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = ArrowWriter::try_new(f, columns.schema().clone(), Some(props))
            .map_err(parquet_error)?;
        self.tables.push(ParquetTable { columns, writer });
        Ok(self.tables.len() - 1)
    }

    fn record(
        &mut self,
        table: usize,
        _schema: &gyr_core::schema::Schema,
        fixed: &Fixed<'_>,
        payload: &[u8],
    ) -> io::Result<bool> {
        let Some(t) = self.tables.get_mut(table) else {
            return Err(io::Error::other(format!("no table {table}")));
        };
        if !t.columns.push(fixed, payload) {
            return Ok(false);
        }
        if t.columns.rows() >= BATCH_ROWS || t.columns.full() {
            t.write_batch()?;
        }
        Ok(true)
    }

    fn finish(&mut self) -> io::Result<()> {
        for mut t in self.tables.drain(..) {
            t.write_batch()?;
            t.writer.close().map_err(parquet_error)?;
        }
        Ok(())
    }
}
