//! [`FileSink`]: the local monitors' batches into the crash-safe trace file.

use super::Sink;
use crate::batch::Batch;
use gyr_core::{TraceEnd, TraceHeader, TraceWriter};
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
        self.writer.as_mut().ok_or_else(closed)
    }
}

fn closed() -> io::Error {
    io::Error::other("the trace file is already closed")
}

impl Sink for FileSink {
    fn name(&self) -> &str {
        &self.path
    }
    fn batch(&mut self, batch: &Batch) -> io::Result<()> {
        let w = self.writer.as_mut().ok_or_else(closed)?;
        for s in batch.schemas() {
            w.schema(s)?;
        }
        for t in batch.threads() {
            w.thread(t)?;
        }
        for (thread, records) in batch.blocks() {
            w.records(thread, records)?;
        }
        // A failed call leaves the count of the batches before: this batch is counted as lost
        // by the caller.
        self.unsaved = w.pending_records();
        Ok(())
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
