//! What a local monitor hands to the sinks: one pass's records in a [`Batch`], and the
//! [`Stats`] their delivery updates.
//!
//! Both sit below the monitors, the sinks and the runtime's state, so that each of those can
//! name them without naming the others.

use gyr_core::ThreadInfo;
use std::ops::Range;
use std::sync::atomic::AtomicU64;

/// Records drained in one pass, grouped in per-thread blocks.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) bytes: Vec<u8>,
    pub(crate) blocks: Vec<(u64, Range<usize>)>,
    pub(crate) threads: Vec<ThreadInfo>,
    pub(crate) records: u64,
}

impl Batch {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.blocks.clear();
        self.threads.clear();
        self.records = 0;
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
