//! Sinks: where local monitors put what they drain; one file per sink gyr provides.
//!
//! A sink implements [`Sink`], whose hooks all default to doing nothing, so a sink overrides only
//! what it needs (as a `tracing` `Layer` does). It gets one [`Batch`] per monitor pass (or per 256 KiB of a busy pass), which
//! describes every event type and thread before the first record of theirs.
//!
//! gyr provides:
//! - [`FileSink`]: the crash-safe trace file ([`gyr_core::trace`]);
//! - [`MemorySink`]: everything in memory, for tests and in-process analysis;
//! - [`ChannelSink`]: a bounded channel to another thread, which never blocks the monitor and
//!   counts what it drops (for network clients and steering);
//! - [`CallbackSink`]: a closure called with each batch.

use crate::batch::{Batch, Stats};
use gyr_core::TraceEnd;
use std::io;
use std::sync::atomic::Ordering;

mod callback;
mod channel;
mod file;
mod memory;

pub use callback::CallbackSink;
pub use channel::ChannelSink;
pub use file::FileSink;
pub use memory::{MemorySink, OwnedRecord};

/// An output of the local monitors. Every hook defaults to doing nothing.
///
/// An error returned by a hook disables the sink for the rest of the run (the error is printed
/// once and counted); it never reaches the application.
pub trait Sink: Send + 'static {
    /// A short name for messages.
    fn name(&self) -> &str {
        "sink"
    }
    /// One monitor pass (or 256 KiB of one): new event types and threads, then records in per-thread blocks.
    fn batch(&mut self, _batch: &Batch) -> io::Result<()> {
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
    /// Records taken (their `batch` call returned Ok) but not yet stored: what is lost if
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
                crate::diag!(
                    "gyr: sink `{}` failed: {e}; it receives no more events",
                    slot.sink.name()
                );
            }
        }
        failed
    }

    /// Hands a batch to every working sink, with the event types registered since
    /// the last one. A batch a sink did not take (disabled, or failing on it) is lost for that
    /// sink: counted once, however many sinks missed it.
    pub(crate) fn deliver(&mut self, batch: &mut Batch, stats: &Stats) {
        let known = crate::registry::schema_count();
        if known > self.schemas_sent {
            let new = crate::registry::schemas_from(self.schemas_sent);
            self.schemas_sent += new.len();
            batch.schemas.extend(new);
        }
        let disabled = self.slots.iter().any(|s| s.failed);
        if self.each(stats, |sink| sink.batch(batch)) || disabled {
            stats.sink_lost.fetch_add(batch.records, Ordering::Relaxed);
        }
        stats.records.fetch_add(batch.records, Ordering::Relaxed);
    }

    pub(crate) fn flush(&mut self, stats: &Stats) {
        self.each(stats, |sink| sink.flush());
    }

    pub(crate) fn close(&mut self, end: &TraceEnd) {
        for slot in self.slots.iter_mut().filter(|s| !s.failed) {
            if let Err(e) = slot.sink.close(end) {
                crate::diag!("gyr: sink `{}` failed while closing: {e}", slot.sink.name());
            }
        }
    }
}
