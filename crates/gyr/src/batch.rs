//! What a local monitor hands to the sinks: a pass's records in [`Batch`]es, and the
//! [`Stats`] their delivery updates.
//!
//! Both sit below the monitors, the sinks and the runtime's state, so that each of those can
//! name them without naming the others. A batch is the one shape of the event stream inside a
//! program: monitor → every sink → (the server's fan-out) one `EventBatch` on the wire.

use gyr_core::record::Records;
use gyr_core::{Schema, ThreadInfo};
use std::ops::Range;
use std::sync::atomic::AtomicU64;

/// What one local monitor pass drained (a busy pass's in several, of about 256 KiB each), as
/// every sink gets it: the event types and threads described for the first time (before any
/// record of theirs), then the records, one block per thread, laid out as
/// [`gyr_core::record`] describes with timestamps in ns.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    pub(crate) schemas: Vec<Schema>,
    pub(crate) threads: Vec<ThreadInfo>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) blocks: Vec<(u64, Range<usize>)>,
    pub(crate) records: u64,
    pub(crate) lost: u64,
}

impl Batch {
    /// Event types described for the first time.
    pub fn schemas(&self) -> &[Schema] {
        &self.schemas
    }

    /// Threads described for the first time.
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// The records, as (thread's gyr id, its records) blocks; [`Records`] iterates a block.
    pub fn blocks(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.blocks
            .iter()
            .map(|(thread, range)| (*thread, &self.bytes[range.clone()]))
    }

    /// Every record of every block, in order.
    pub fn records(&self) -> impl Iterator<Item = gyr_core::record::RecordRef<'_>> {
        self.blocks()
            .flat_map(|(thread, bytes)| Records::new(thread, bytes).filter_map(Result::ok))
    }

    /// How many records the blocks hold.
    pub fn len(&self) -> u64 {
        self.records
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Records dropped before this batch on the way to whoever receives it (a
    /// [`ChannelSink`](crate::ChannelSink)'s receiver that fell behind); the monitors report
    /// their own losses as `gyr.lost` records instead.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Clears the batch but for `bytes[delivered..]`, which moves to the front (the start of a
    /// record whose end has not been drained yet).
    pub(crate) fn clear_keeping(&mut self, delivered: usize) {
        self.schemas.clear();
        self.bytes.drain(..delivered);
        self.blocks.clear();
        self.threads.clear();
        self.records = 0;
        self.lost = 0;
    }
}

/// Counters the monitors keep.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) records: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) sink_errors: AtomicU64,
    /// Records a failed sink lost: not yet stored when it failed, or given after.
    pub(crate) sink_lost: AtomicU64,
}
