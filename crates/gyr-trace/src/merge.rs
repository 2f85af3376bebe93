//! The streaming k-way merge: the records of many trace files (one process each) as one stream
//! in time order, on one clock, without reading any file whole.
//!
//! # How the files are ordered
//!
//! A trace file holds chunks of blocks, one block per thread and monitor pass: each thread's
//! records are in time order, but one thread's block may hold records older than the block of
//! another thread that came before it in the file (a monitor drains the rings one after the
//! other). So the merge orders in two steps, as PIMSY's trace servers do:
//!
//! - per file, a reorder buffer takes the file a chunk at a time
//!   ([`TraceReader::for_each_item_of_next_chunk`]) and releases its oldest record once the
//!   file has been read [`DEFAULT_REORDER_WINDOW_NS`] beyond it, or once the buffer holds
//!   [`DEFAULT_HELD_BYTES`] (then a record read later that is older than one released is
//!   passed on out of order and counted in [`MergeStats::late`]);
//! - across files, a [`BinaryHeap`] keyed by each file's oldest releasable record picks the
//!   next record of the merged stream.
//!
//! Memory is therefore bounded by the files times (one chunk plus the reorder buffer), never
//! by the trace's length. Ties are broken by file, then by the order the file gave the
//! records, so the same files always merge the same way.
//!
//! # Clocks
//!
//! Each file's timestamps count ns from its process's timestamp 0. A [`ClockCorrection`]
//! maps them onto one clock: by default ([`ClockCorrection::placement`]) the one the exports
//! use, every file placed by the wall-clock time its header gives for its timestamp 0; with
//! the estimate of [`crate::clock`], the reference process's clock, so that no receive comes
//! before its send. The map is increasing, so each file's order survives it.

use crate::clock::ClockCorrection;
use gyr_core::ThreadInfo;
use gyr_core::record::RecordHeader;
use gyr_core::schema::{Schema, TypeId};
use gyr_core::trace::{Item, ReadSummary, TraceHeader, TraceReader};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::{Read, Seek};

/// How far (ns of the file's own clock) a file is read beyond a record before that record is
/// released: far more than a monitor's pass takes, so that the threads of a file come out in
/// order, and small enough that a busy file's buffer seldom reaches its byte limit.
pub const DEFAULT_REORDER_WINDOW_NS: u64 = 100_000_000;

/// Bytes of records a file's reorder buffer holds at most (besides the chunk being read):
/// the merge's memory is about this times the files.
pub const DEFAULT_HELD_BYTES: usize = 4 << 20;

/// Bytes a held record costs beyond its payload (its header, place in the heap, allocation).
const HELD_OVERHEAD: usize = 64;

/// A record of the merged stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedRecord {
    /// The file (process) it comes from: its place among the inputs, from 0.
    pub file: usize,
    /// The thread that emitted it (the file's thread id).
    pub thread: u64,
    /// Its time on the merged clock, in ns (negative before the clock's 0).
    pub time: i64,
    /// Its header as the file has it (the timestamp on the file's own clock).
    pub header: RecordHeader,
    /// Its payload.
    pub payload: Box<[u8]>,
}

/// What the merge did, per file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeStats {
    /// Records passed on.
    pub records: u64,
    /// Records skipped because their type was not asked for.
    pub skipped: u64,
    /// Records that came out after a later record of the same file, because the reorder
    /// buffer was full when they were read (0 unless a file's threads were drained far apart).
    pub late: u64,
}

/// A record held in a file's reorder buffer, ordered by time then by arrival.
#[derive(Debug)]
struct Held {
    time: i64,
    arrival: u64,
    record: MergedRecord,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.arrival) == (other.time, other.arrival)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.time, self.arrival).cmp(&(other.time, other.arrival))
    }
}

/// One input of the merge: its reader and reorder buffer.
#[derive(Debug)]
struct FileStream<R> {
    index: usize,
    reader: TraceReader<R>,
    held: BinaryHeap<Reverse<Held>>,
    held_bytes: usize,
    arrivals: u64,
    /// The latest record time read from the file, on the merged clock.
    newest: i64,
    /// The time of the last record released.
    released: i64,
    done: bool,
    /// Type ids to keep (by the names asked for), when the merge is filtered.
    keep: Option<HashSet<TypeId>>,
    stats: MergeStats,
}

impl<R: Read + Seek> FileStream<R> {
    /// Reads chunks until the oldest held record may be released (or the file is done).
    fn fill(&mut self, clock: &ClockCorrection, names: Option<&[String]>, limits: &Limits) {
        loop {
            if self.done || self.held_bytes >= limits.held_bytes {
                return;
            }
            if let Some(Reverse(oldest)) = self.held.peek()
                && self.newest.saturating_sub(oldest.time) >= limits.window_ns
            {
                return;
            }
            let index = self.index;
            let held = &mut self.held;
            let held_bytes = &mut self.held_bytes;
            let arrivals = &mut self.arrivals;
            let newest = &mut self.newest;
            let released = self.released;
            let keep = &mut self.keep;
            let stats = &mut self.stats;
            let more = self.reader.for_each_item_of_next_chunk(|item| match item {
                Item::Schema(s) => {
                    if let (Some(keep), Some(names)) = (keep.as_mut(), names) {
                        if names.contains(&s.name) {
                            keep.insert(s.id);
                        } else {
                            keep.remove(&s.id);
                        }
                    }
                }
                Item::Record { record, .. } => {
                    if keep
                        .as_ref()
                        .is_some_and(|k| !k.contains(&record.header.type_id))
                    {
                        stats.skipped += 1;
                        return;
                    }
                    let time = clock.map(index, record.header.timestamp);
                    *newest = (*newest).max(time);
                    if time < released {
                        stats.late += 1;
                    }
                    *arrivals += 1;
                    *held_bytes += record.payload.len() + HELD_OVERHEAD;
                    held.push(Reverse(Held {
                        time,
                        arrival: *arrivals,
                        record: MergedRecord {
                            file: index,
                            thread: record.thread,
                            time,
                            header: record.header,
                            payload: record.payload.into(),
                        },
                    }));
                }
                _ => {}
            });
            if !more {
                self.done = true;
            }
        }
    }

    fn pop(&mut self) -> Option<MergedRecord> {
        let Reverse(h) = self.held.pop()?;
        self.held_bytes = self
            .held_bytes
            .saturating_sub(h.record.payload.len() + HELD_OVERHEAD);
        self.released = self.released.max(h.time);
        self.stats.records += 1;
        Some(h.record)
    }
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    window_ns: i64,
    held_bytes: usize,
}

/// The records of several trace files, one process each, as one stream in time order on one
/// clock (see the [module](self) for how).
#[derive(Debug)]
pub struct Merge<R> {
    files: Vec<FileStream<R>>,
    clock: ClockCorrection,
    names: Option<Vec<String>>,
    limits: Limits,
    /// Each file's oldest releasable record: (time, file).
    heads: BinaryHeap<Reverse<(i64, usize)>>,
    started: bool,
}

impl<R: Read + Seek> Merge<R> {
    /// Merges `readers` (one process each, in the order the clock correction numbers them)
    /// on the clock `clock` gives.
    pub fn new(readers: Vec<TraceReader<R>>, clock: ClockCorrection) -> Self {
        let files = readers
            .into_iter()
            .enumerate()
            .map(|(index, reader)| FileStream {
                index,
                reader,
                held: BinaryHeap::new(),
                held_bytes: 0,
                arrivals: 0,
                newest: i64::MIN,
                released: i64::MIN,
                done: false,
                keep: None,
                stats: MergeStats::default(),
            })
            .collect();
        Merge {
            files,
            clock,
            names: None,
            limits: Limits {
                window_ns: DEFAULT_REORDER_WINDOW_NS as i64,
                held_bytes: DEFAULT_HELD_BYTES,
            },
            heads: BinaryHeap::new(),
            started: false,
        }
    }

    /// Passes on only the records of the event types named (the others are skipped as they
    /// are read, and never held). Call it before the first record.
    pub fn only_types(mut self, names: &[&str]) -> Self {
        self.names = Some(names.iter().map(|n| (*n).to_owned()).collect());
        for f in &mut self.files {
            f.keep = Some(HashSet::new());
        }
        self
    }

    /// Sets the reorder window (ns) and the bytes a file's reorder buffer holds at most
    /// (see [`DEFAULT_REORDER_WINDOW_NS`], [`DEFAULT_HELD_BYTES`]).
    pub fn with_limits(mut self, window_ns: u64, held_bytes: usize) -> Self {
        self.limits = Limits {
            window_ns: i64::try_from(window_ns).unwrap_or(i64::MAX),
            held_bytes: held_bytes.max(1),
        };
        self
    }

    /// The clock the merge puts records on.
    pub fn clock(&self) -> &ClockCorrection {
        &self.clock
    }

    /// How many files are merged.
    pub fn files(&self) -> usize {
        self.files.len()
    }

    /// File `file`'s header.
    pub fn header(&self, file: usize) -> &TraceHeader {
        self.files[file].reader.header()
    }

    /// The schemas file `file` has described so far (every record passed on has its own).
    pub fn schemas(&self, file: usize) -> &HashMap<TypeId, Schema> {
        self.files[file].reader.schemas()
    }

    /// The schema of a record passed on.
    pub fn schema_of(&self, record: &MergedRecord) -> Option<&Schema> {
        self.schemas(record.file).get(&record.header.type_id)
    }

    /// The threads file `file` has described so far.
    pub fn threads(&self, file: usize) -> &HashMap<u64, ThreadInfo> {
        self.files[file].reader.threads()
    }

    /// What reading file `file` found so far (complete once the merge is done).
    pub fn summary(&self, file: usize) -> &ReadSummary {
        self.files[file].reader.summary()
    }

    /// What the merge did with file `file` so far.
    pub fn stats(&self, file: usize) -> &MergeStats {
        &self.files[file].stats
    }

    /// Records held in reorder buffers now, all files together (for tests of the bound).
    pub fn held(&self) -> usize {
        self.files.iter().map(|f| f.held.len()).sum()
    }

    fn refill(&mut self, file: usize) {
        let f = &mut self.files[file];
        f.fill(&self.clock, self.names.as_deref(), &self.limits);
        if let Some(Reverse(h)) = f.held.peek() {
            self.heads.push(Reverse((h.time, file)));
        }
    }
}

impl<R: Read + Seek> Iterator for Merge<R> {
    type Item = MergedRecord;

    fn next(&mut self) -> Option<MergedRecord> {
        if !self.started {
            self.started = true;
            for file in 0..self.files.len() {
                self.refill(file);
            }
        }
        let Reverse((_, file)) = self.heads.pop()?;
        let record = self.files[file].pop();
        self.refill(file);
        record
    }
}
