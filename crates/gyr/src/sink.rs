//! Sinks: where local monitors put what they drain.
//!
//! A sink implements [`Sink`], whose hooks all default to doing nothing, so a sink overrides only
//! what it needs (as a `tracing` `Layer` does). The monitors guarantee the order: a schema
//! before the first record of its type, a thread's description before its first records.
//!
//! gyr provides:
//! - [`FileSink`]: the crash-safe trace file ([`gyr_core::trace`]);
//! - [`MemorySink`]: everything in memory, for tests and in-process analysis;
//! - [`ChannelSink`]: a bounded channel to another thread, which never blocks the monitor and
//!   counts what it drops (for network clients and steering);
//! - [`CallbackSink`]: a closure called with each item.

use crate::monitor::Batch;
use crate::runtime::Stats;
use gyr_core::record::{RecordRef, Records};
use gyr_core::value::decode;
use gyr_core::{Schema, ThreadInfo, TraceEnd, TraceHeader, TraceWriter, Value};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// An output of the local monitors. Every hook defaults to doing nothing.
///
/// An error returned by a hook disables the sink for the rest of the run (the error is printed
/// once and counted); it never reaches the application.
pub trait Sink: Send + 'static {
    /// A short name for messages.
    fn name(&self) -> &str {
        "sink"
    }
    /// A new event type; comes before any record of it.
    fn schema(&mut self, _schema: &Schema) -> io::Result<()> {
        Ok(())
    }
    /// A thread's description; comes before any record of it.
    fn thread(&mut self, _info: &ThreadInfo) -> io::Result<()> {
        Ok(())
    }
    /// Records of `thread`, laid out as [`gyr_core::record`] describes, timestamps in ns.
    fn records(&mut self, _thread: u64, _records: &[u8]) -> io::Result<()> {
        Ok(())
    }
    /// Make everything received so far durable (called periodically and on flush).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// The runtime is shutting down; `end` holds its totals.
    fn close(&mut self, _end: &TraceEnd) -> io::Result<()> {
        Ok(())
    }
    /// Records taken (their `records` call returned Ok) but not yet stored: what is lost if
    /// this sink fails now. A sink that stores at once has none.
    fn unsaved(&self) -> u64 {
        0
    }
}

impl std::fmt::Debug for dyn Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sink({})", self.name())
    }
}

struct Slot {
    sink: Box<dyn Sink>,
    failed: bool,
}

/// The runtime's sinks, fed in order by the monitors.
pub(crate) struct SinkSet {
    slots: Vec<Slot>,
    schemas_sent: usize,
}

impl std::fmt::Debug for SinkSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.slots.iter().map(|s| s.sink.name()))
            .finish()
    }
}

impl SinkSet {
    pub(crate) fn new(sinks: Vec<Box<dyn Sink>>) -> Self {
        SinkSet {
            slots: sinks
                .into_iter()
                .map(|sink| Slot {
                    sink,
                    failed: false,
                })
                .collect(),
            schemas_sent: 0,
        }
    }

    /// Calls `f` on every working sink. A sink that fails is disabled, and the records it
    /// had not stored yet are counted as lost; returns whether one failed.
    fn each(&mut self, stats: &Stats, mut f: impl FnMut(&mut dyn Sink) -> io::Result<()>) -> bool {
        let mut failed = false;
        for slot in self.slots.iter_mut().filter(|s| !s.failed) {
            // A sink is user code running on a monitor thread: a panic in it disables that sink,
            // like an error, and never takes the monitor (or the program) down.
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(slot.sink.as_mut())))
                    .unwrap_or_else(|_| Err(io::Error::other("it panicked")));
            if let Err(e) = result {
                slot.failed = true;
                failed = true;
                stats.sink_errors.fetch_add(1, Ordering::Relaxed);
                let unsaved =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slot.sink.unsaved()))
                        .unwrap_or(0);
                stats.sink_lost.fetch_add(unsaved, Ordering::Relaxed);
                eprintln!(
                    "gyr: sink `{}` failed: {e}; it receives no more events",
                    slot.sink.name()
                );
            }
        }
        failed
    }

    pub(crate) fn deliver(&mut self, batch: &Batch, stats: &Stats) {
        let known = crate::registry::schema_count();
        if known > self.schemas_sent {
            let new = crate::registry::schemas_from(self.schemas_sent);
            self.schemas_sent += new.len();
            for s in &new {
                self.each(stats, |sink| sink.schema(s));
            }
        }
        for t in &batch.threads {
            self.each(stats, |sink| sink.thread(t));
        }
        for (thread, range) in &batch.blocks {
            let bytes = &batch.bytes[range.clone()];
            let disabled = self.slots.iter().any(|s| s.failed);
            // A block a sink did not take (disabled, or failing on it) is lost for that sink:
            // counted once, however many sinks missed it.
            if self.each(stats, |sink| sink.records(*thread, bytes)) || disabled {
                let n = Records::new(*thread, bytes).count() as u64;
                stats.sink_lost.fetch_add(n, Ordering::Relaxed);
            }
        }
        stats.records.fetch_add(batch.records, Ordering::Relaxed);
    }

    pub(crate) fn flush(&mut self, stats: &Stats) {
        self.each(stats, |sink| sink.flush());
    }

    pub(crate) fn close(&mut self, end: &TraceEnd) {
        for slot in self.slots.iter_mut().filter(|s| !s.failed) {
            if let Err(e) = slot.sink.close(end) {
                eprintln!("gyr: sink `{}` failed while closing: {e}", slot.sink.name());
            }
        }
    }
}

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
        crate::runtime::lock(&self.inner)
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
    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        self.inner().schemas.insert(schema.id, schema.clone());
        Ok(())
    }
    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        self.inner().threads.insert(info.id, info.clone());
        Ok(())
    }
    fn records(&mut self, thread: u64, records: &[u8]) -> io::Result<()> {
        let mut inner = self.inner();
        inner.records.extend(
            Records::new(thread, records)
                .filter_map(Result::ok)
                .map(OwnedRecord::from),
        );
        Ok(())
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        self.inner().end = Some(end.clone());
        Ok(())
    }
}

/// One item of a stream, borrowed, as a [`CallbackSink`] sees it.
#[derive(Debug, Clone, Copy)]
pub enum StreamItem<'a> {
    /// A new event type.
    Schema(&'a Schema),
    /// A thread's description.
    Thread(&'a ThreadInfo),
    /// Records of one thread.
    Records {
        /// The thread's gyr id.
        thread: u64,
        /// The records ([`gyr_core::record::Records`] iterates them).
        bytes: &'a [u8],
    },
    /// The runtime shut down.
    End(&'a TraceEnd),
}

/// Calls a closure with every item; the closure runs on a monitor thread, so keep it short.
pub struct CallbackSink<F> {
    f: F,
}

impl<F> std::fmt::Debug for CallbackSink<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallbackSink")
    }
}

impl<F: FnMut(StreamItem<'_>) + Send + 'static> CallbackSink<F> {
    /// A sink calling `f`.
    pub fn new(f: F) -> Self {
        CallbackSink { f }
    }
}

impl<F: FnMut(StreamItem<'_>) + Send + 'static> Sink for CallbackSink<F> {
    fn name(&self) -> &str {
        "callback"
    }
    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        (self.f)(StreamItem::Schema(schema));
        Ok(())
    }
    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        (self.f)(StreamItem::Thread(info));
        Ok(())
    }
    fn records(&mut self, thread: u64, bytes: &[u8]) -> io::Result<()> {
        (self.f)(StreamItem::Records { thread, bytes });
        Ok(())
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        (self.f)(StreamItem::End(end));
        Ok(())
    }
}

/// One item of a stream, owned, as a [`ChannelSink`]'s receiver gets it.
#[derive(Debug, Clone)]
pub enum StreamMessage {
    /// A new event type.
    Schema(Schema),
    /// A thread's description.
    Thread(ThreadInfo),
    /// Records of one thread.
    Records {
        /// The thread's gyr id.
        thread: u64,
        /// The records ([`gyr_core::record::Records`] iterates them).
        bytes: Vec<u8>,
    },
    /// Records were dropped because the receiver fell behind.
    Lost {
        /// How many.
        records: u64,
    },
    /// The runtime shut down.
    End(TraceEnd),
}

/// Sends the stream over a bounded channel. It never waits for the receiver: when the channel
/// is full, records are dropped and counted, and a [`StreamMessage::Lost`] says how many once
/// there is room. Schemas and thread descriptions are never dropped.
#[derive(Debug)]
pub struct ChannelSink {
    tx: SyncSender<StreamMessage>,
    backlog: VecDeque<StreamMessage>,
    lost: u64,
}

impl ChannelSink {
    /// A sink and the receiver of its messages; `capacity` is in messages (one per batch).
    pub fn new(capacity: usize) -> (Self, Receiver<StreamMessage>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity.max(1));
        (
            ChannelSink {
                tx,
                backlog: VecDeque::new(),
                lost: 0,
            },
            rx,
        )
    }

    /// Sends what waits; returns false if the channel is still full.
    fn drain_backlog(&mut self) -> bool {
        if self.lost > 0 {
            self.backlog.push_back(StreamMessage::Lost {
                records: std::mem::take(&mut self.lost),
            });
        }
        while let Some(m) = self.backlog.pop_front() {
            match self.tx.try_send(m) {
                Ok(()) => {}
                Err(TrySendError::Full(m)) => {
                    if let StreamMessage::Lost { records } = m {
                        self.lost += records;
                    } else {
                        self.backlog.push_front(m);
                    }
                    return false;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.backlog.clear();
                    return false;
                }
            }
        }
        true
    }
}

impl Sink for ChannelSink {
    fn name(&self) -> &str {
        "channel"
    }
    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        self.backlog
            .push_back(StreamMessage::Schema(schema.clone()));
        self.drain_backlog();
        Ok(())
    }
    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        self.backlog.push_back(StreamMessage::Thread(info.clone()));
        self.drain_backlog();
        Ok(())
    }
    fn records(&mut self, thread: u64, bytes: &[u8]) -> io::Result<()> {
        let n = Records::new(thread, bytes).count() as u64;
        if !self.drain_backlog() {
            self.lost += n;
            return Ok(());
        }
        match self.tx.try_send(StreamMessage::Records {
            thread,
            bytes: bytes.to_vec(),
        }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.lost += n,
            Err(TrySendError::Disconnected(_)) => {}
        }
        Ok(())
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        self.drain_backlog();
        let _ = self.tx.try_send(StreamMessage::End(end.clone()));
        Ok(())
    }
}
