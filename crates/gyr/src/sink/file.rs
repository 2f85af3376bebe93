//! [`FileSink`]: the local monitors' batches into the crash-safe trace file.

use super::Sink;
use gyr_core::record::Records;
use gyr_core::{Schema, ThreadInfo, TraceEnd, TraceHeader, TraceWriter};
use std::fs::File;
use std::io;
use std::path::Path;

/// Writes the crash-safe trace file ([`gyr_core::trace`]).
#[derive(Debug)]
pub struct FileSink {
    writer: Option<TraceWriter<File>>,
    path: String,
    /// Records in the chunk not yet written out.
    unsaved: u64,
}

impl FileSink {
    /// Creates (or truncates) the trace file at `path` and writes its header.
    pub fn create(path: impl AsRef<Path>, header: &TraceHeader) -> io::Result<Self> {
        let path = path.as_ref();
        let file = File::create(path)?;
        Ok(FileSink {
            writer: Some(TraceWriter::new(file, header)?),
            path: path.display().to_string(),
            unsaved: 0,
        })
    }

    fn writer(&mut self) -> io::Result<&mut TraceWriter<File>> {
        self.writer
            .as_mut()
            .ok_or_else(|| io::Error::other("the trace file is already closed"))
    }

    /// Runs `f` on the writer; `records` more records are unsaved until a chunk is written.
    fn write(
        &mut self,
        records: u64,
        f: impl FnOnce(&mut TraceWriter<File>) -> io::Result<()>,
    ) -> io::Result<()> {
        let w = self.writer()?;
        let before = w.bytes_written();
        f(w)?;
        // A chunk written out holds everything given so far.
        if w.bytes_written() != before {
            self.unsaved = 0;
        } else {
            self.unsaved += records;
        }
        Ok(())
    }
}

impl Sink for FileSink {
    fn name(&self) -> &str {
        &self.path
    }
    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        self.write(0, |w| w.schema(schema))
    }
    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        self.write(0, |w| w.thread(info))
    }
    fn records(&mut self, thread: u64, records: &[u8]) -> io::Result<()> {
        let n = Records::new(thread, records).count() as u64;
        self.write(n, |w| w.records(thread, records))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer()?.flush()?;
        self.unsaved = 0;
        Ok(())
    }
    fn unsaved(&self) -> u64 {
        self.unsaved
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        match self.writer.take() {
            Some(w) => w.finish(end).map(drop),
            None => Ok(()),
        }
    }
}
