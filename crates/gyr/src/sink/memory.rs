//! [`MemorySink`]: every record kept in memory, for tests and in-process analysis.

use super::Sink;
use crate::batch::Batch;
use crate::primitives::lock;
use gyr_core::record::RecordRef;
use gyr_core::value::decode;
use gyr_core::{Schema, ThreadInfo, TraceEnd, Value};
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

/// One record, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    /// The emitting thread's gyr id.
    pub thread: u64,
    /// The event type.
    pub type_id: u32,
    /// ns since timestamp 0.
    pub timestamp: u64,
    /// Per-thread sequence number.
    pub seq: u64,
    /// ns the thread had spent waiting on gyr when it emitted this.
    pub perturbation: u64,
    /// The encoded fields.
    pub payload: Vec<u8>,
}

impl From<RecordRef<'_>> for OwnedRecord {
    fn from(r: RecordRef<'_>) -> Self {
        OwnedRecord {
            thread: r.thread,
            type_id: r.header.type_id,
            timestamp: r.header.timestamp,
            seq: r.header.seq,
            perturbation: r.header.perturbation,
            payload: r.payload.to_vec(),
        }
    }
}

#[derive(Debug, Default)]
struct MemoryInner {
    schemas: HashMap<u32, Schema>,
    threads: HashMap<u64, ThreadInfo>,
    records: Vec<OwnedRecord>,
    end: Option<TraceEnd>,
}

/// Keeps everything in memory. Clones share the same store.
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    inner: Arc<Mutex<MemoryInner>>,
}

impl MemorySink {
    /// An empty store.
    pub fn new() -> Self {
        MemorySink::default()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        lock(&self.inner)
    }

    /// Every record received, in delivery order.
    pub fn records(&self) -> Vec<OwnedRecord> {
        self.inner().records.clone()
    }

    /// The number of records received.
    pub fn len(&self) -> usize {
        self.inner().records.len()
    }

    /// Whether no record was received.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The schema of type `id`.
    pub fn schema(&self, id: u32) -> Option<Schema> {
        self.inner().schemas.get(&id).cloned()
    }

    /// Threads seen.
    pub fn threads(&self) -> Vec<ThreadInfo> {
        self.inner().threads.values().cloned().collect()
    }

    /// Records of the type named `name`, with their decoded fields.
    pub fn events(&self, name: &str) -> Vec<(OwnedRecord, Vec<Value>)> {
        let inner = self.inner();
        let Some(schema) = inner.schemas.values().find(|s| s.name == name) else {
            return Vec::new();
        };
        inner
            .records
            .iter()
            .filter(|r| r.type_id == schema.id)
            .filter_map(|r| Some((r.clone(), decode(schema, &r.payload).ok()?)))
            .collect()
    }

    /// The totals of the closed runtime, once it has shut down.
    pub fn end(&self) -> Option<TraceEnd> {
        self.inner().end.clone()
    }
}

impl Sink for MemorySink {
    fn name(&self) -> &str {
        "memory"
    }
    fn batch(&mut self, batch: &Batch) -> io::Result<()> {
        let mut inner = self.inner();
        for s in batch.schemas() {
            inner.schemas.insert(s.id, s.clone());
        }
        for t in batch.threads() {
            inner.threads.insert(t.id, t.clone());
        }
        inner.records.extend(batch.records().map(OwnedRecord::from));
        Ok(())
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        self.inner().end = Some(end.clone());
        Ok(())
    }
}
