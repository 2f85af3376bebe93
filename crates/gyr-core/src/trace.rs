//! The trace file: chunked, self-describing and crash-safe.
//!
//! # Overview
//!
//! One process writes one file. The file is a short preamble followed by chunks; each chunk
//! carries its length and a CRC-32 of its payload, so a file cut off by a crash or `kill -9`
//! reads back every complete chunk, and a damaged chunk is detected and skipped rather than
//! misread. Schemas travel in the stream, before the first record of their type, so a reader
//! needs nothing but the file. Merging the files of several processes happens when reading.
//!
//! This crate writes format 2, whose records take a few bytes beyond their payload, and reads
//! formats 1 and 2: the two differ only in how a records block encodes its records.
//!
//! # Preamble (16 bytes)
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0 | 8 | magic `GYRTRACE` |
//! | 8 | 4 | format version, `u32` LE: [`FORMAT_VERSION`] (2) when this crate writes it; readers take every version from [`FIRST_FORMAT_VERSION`] (1) |
//! | 12 | 4 | zero |
//!
//! # Chunk
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0 | 4 | magic `GYRC` |
//! | 4 | 4 | payload length in bytes, `u32` LE, a multiple of 8 |
//! | 8 | 4 | CRC-32 (IEEE) of the payload, `u32` LE |
//! | 12 | 4 | chunk index, from 0, `u32` LE |
//! | 16 | len | payload: blocks |
//!
//! # Block
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0 | 1 | kind: 1 header, 2 schema, 3 thread, 4 records, 5 end |
//! | 1 | 3 | zero |
//! | 4 | 4 | body length, `u32` LE |
//! | 8 | len | body, then zeros to a multiple of 8 |
//!
//! Bodies of kinds 1, 2, 3 and 5 are [`postcard`] encodings of [`TraceHeader`], [`Schema`],
//! [`ThreadInfo`] and [`TraceEnd`]; the two versions encode them alike. A records body is the
//! thread id (`u64` LE) followed by that thread's records, timestamps in ns:
//!
//! - format 1: laid out as [`crate::record`] describes (a 32-byte header, each record padded
//!   to 8 bytes), so a 64-byte event takes 96 bytes;
//! - format 2: encoded compactly, as the next section describes.
//!
//! Chunk 0 holds exactly one header block. Every later chunk starts with the schema and thread
//! blocks written so far, so each chunk decodes on its own: a damaged chunk costs only its own
//! records, and a reader can start at any chunk. A file closed cleanly ends with an end block;
//! its absence means the writer did not finish (it was killed, or is still running).
//!
//! # Records, format 2
//!
//! Rings and the wire keep the fixed layout, which a sensor writes with plain stores; the file
//! stores each record's header as the few bytes that differ from the record before it in its
//! block. The first record of a block follows an imagined record with timestamp 0, sequence
//! number 0 and perturbation 0, so each block decodes on its own. Numbers are unsigned LEB128
//! varints (seven bits a byte, least significant first, the high bit set on every byte but
//! the last; at most 10 bytes).
//!
//! | field | encoding | content |
//! |---|---|---|
//! | tag | varint | `type_id << 3 \| flags` |
//! | time | varint | distance of the timestamp from the previous record's: added, or subtracted with flag 4 |
//! | seq | varint, with flag 1 | the sequence number; without the flag it is the previous one plus 1 (modulo 2^64) |
//! | perturbation | varint, with flag 2 | the perturbation; without the flag it is the previous one |
//! | length | varint | payload length in bytes |
//! | payload | length bytes | the fields, as [`crate::value`] describes, unpadded |
//!
//! Records follow each other without padding, and the body ends with its last record. A
//! steady stream of events (consecutive sequence numbers, no waits, timestamps under 128 ns
//! apart, type ids under 16, payloads under 128 bytes) costs 3 bytes a record beyond the
//! payload: a 64-byte event takes 67 bytes, plus its share of the block and chunk headers.
//! For example, two 64-byte events of type 2 at 1000 and 1030 ns, numbered 1 and 2:
//!
//! ```text
//! 10 e8 07 40 <64 bytes>   type 2, no flags; 1000 ns after 0; seq 0 + 1; 64 bytes
//! 10 1e 40 <64 bytes>      type 2, no flags; 30 ns later; seq 1 + 1; 64 bytes
//! ```
//!
//! # Example
//!
//! ```
//! use gyr_core::{Field, FieldType, Schema, TraceHeader, TraceReader, TraceWriter, TraceEnd};
//! use gyr_core::trace::Item;
//! let schema = Schema::new(2, "work_load", vec![Field::new("load", FieldType::F64)]).unwrap();
//! let mut w = TraceWriter::new(Vec::new(), &TraceHeader::for_this_process()).unwrap();
//! w.schema(&schema).unwrap();
//! let mut records = Vec::new();
//! gyr_core::record::push_record(&mut records, 2, 1_000, 1, 0, &0.5f64.to_le_bytes());
//! w.records(1, &records).unwrap();
//! let file = w.finish(&TraceEnd::default()).unwrap();
//!
//! let mut r = TraceReader::new(std::io::Cursor::new(file)).unwrap();
//! let mut n = 0;
//! r.for_each_item(|item| if let Item::Record { schema, .. } = item {
//!     assert_eq!(schema.unwrap().name, "work_load");
//!     n += 1;
//! });
//! assert_eq!(n, 1);
//! assert!(r.summary().clean_end);
//! ```

use crate::chunk_scan::{Input, Scanner, plausible_header};
use crate::compact::{self, CompactRecords};
use crate::record::{RecordHeader, RecordRef, Records, stride};
use crate::schema::{Schema, TypeId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Seek, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::mpsc;

/// The file's first eight bytes.
pub const FILE_MAGIC: [u8; 8] = *b"GYRTRACE";
/// Each chunk's first four bytes.
pub const CHUNK_MAGIC: [u8; 4] = *b"GYRC";
/// The version this crate writes.
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this crate reads; it reads every version up to [`FORMAT_VERSION`].
pub const FIRST_FORMAT_VERSION: u32 = 1;
/// Bytes of the preamble.
pub const PREAMBLE_LEN: usize = 16;
/// Bytes of a chunk header.
pub const CHUNK_HEADER_LEN: usize = 16;
/// The largest chunk payload a reader accepts; a larger length means a damaged header.
pub const MAX_CHUNK_PAYLOAD: usize = 1 << 30;
/// Chunk payload size at which [`TraceWriter`] closes a chunk by itself: large enough that the
/// header and checksum cost nothing, small enough that a crash loses little.
pub const DEFAULT_CHUNK_TARGET: usize = 1 << 20;
/// Bytes of a records block's body at which [`TraceWriter::records`] starts another block:
/// a whole ring given at once still makes chunks a reader accepts.
const MAX_RECORDS_BODY: usize = 1 << 26;

const KIND_HEADER: u8 = 1;
const KIND_SCHEMA: u8 = 2;
const KIND_THREAD: u8 = 3;
const KIND_RECORDS: u8 = 4;
const KIND_END: u8 = 5;

/// What a trace says about the process that wrote it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// The command line, program first.
    pub command_line: Vec<String>,
    /// Wall-clock time of timestamp 0, in ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// The clock timestamps were read from (`tsc`, `monotonic`).
    pub clock_source: String,
    /// Clock ticks per second, as calibrated at start-up.
    pub ticks_per_second: f64,
    /// Measured fixed cost of one enabled sensor call, in ns (see [`crate::record`]).
    pub sensor_cost_ns: f64,
    /// The ring-full policy in force: `block` or `drop`.
    pub policy: String,
    /// The gyr version that wrote the file.
    pub gyr_version: String,
}

impl TraceHeader {
    /// A header describing the calling process, with clock fields left at zero.
    pub fn for_this_process() -> Self {
        let start_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        TraceHeader {
            pid: std::process::id(),
            host: host_name(),
            command_line: std::env::args().collect(),
            start_unix_ns,
            gyr_version: env!("CARGO_PKG_VERSION").to_owned(),
            ..TraceHeader::default()
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// A thread that emitted records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// gyr's id for the thread, the one records blocks carry.
    pub id: u64,
    /// The thread's name, if it had one.
    pub name: String,
    /// The operating system's thread id.
    pub os_tid: u64,
}

/// Totals written when a trace is closed cleanly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEnd {
    /// Timestamp of the close, ns since process start.
    pub end_ns: u64,
    /// Records written to this trace.
    pub records: u64,
    /// Events dropped because a ring was full (also reported by `gyr.lost` records).
    pub lost: u64,
    /// Events skipped on purpose by rate limits.
    pub filtered: u64,
}

/// Writes a trace file: see the [module documentation](self) for the format.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    chunk: Vec<u8>,
    next_index: u32,
    chunk_target: usize,
    bytes_written: u64,
    /// Schema and thread blocks written so far, repeated at the start of every chunk.
    known: Vec<u8>,
    /// Records in the pending chunk.
    pending: u64,
    /// [`MAX_RECORDS_BODY`], smaller in tests.
    max_records_body: usize,
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace on `out`: writes the preamble and the header chunk.
    pub fn new(out: W, header: &TraceHeader) -> io::Result<Self> {
        let mut w = TraceWriter {
            out,
            chunk: Vec::with_capacity(DEFAULT_CHUNK_TARGET + 4096),
            next_index: 0,
            chunk_target: DEFAULT_CHUNK_TARGET,
            bytes_written: 0,
            known: Vec::new(),
            pending: 0,
            max_records_body: MAX_RECORDS_BODY,
        };
        let mut preamble = [0u8; PREAMBLE_LEN];
        preamble[..8].copy_from_slice(&FILE_MAGIC);
        preamble[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        w.out.write_all(&preamble)?;
        w.bytes_written = PREAMBLE_LEN as u64;
        w.block(
            KIND_HEADER,
            &postcard::to_stdvec(header).map_err(io::Error::other)?,
        );
        w.flush()?;
        Ok(w)
    }

    /// Sets the payload size at which a chunk is closed by itself.
    pub fn set_chunk_target(&mut self, bytes: usize) {
        self.chunk_target = bytes.clamp(1, MAX_CHUNK_PAYLOAD / 2);
    }

    /// Bytes written to the output so far (pending chunk excluded).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Records given but not yet written out: they are in the pending chunk, which the next
    /// [`TraceWriter::flush`] (or a full chunk) writes.
    pub fn pending_records(&self) -> u64 {
        self.pending
    }

    fn block(&mut self, kind: u8, body: &[u8]) {
        let at = self.open_block(kind);
        self.chunk.extend_from_slice(body);
        self.close_block(at);
    }

    /// Starts a block in the pending chunk, after the blocks every chunk repeats; returns
    /// where its header is, for [`TraceWriter::close_block`].
    fn open_block(&mut self, kind: u8) -> usize {
        if self.chunk.is_empty() && self.next_index > 0 {
            self.chunk.extend_from_slice(&self.known);
        }
        let at = self.chunk.len();
        self.chunk.extend_from_slice(&[kind, 0, 0, 0, 0, 0, 0, 0]);
        at
    }

    /// Ends the block whose header is at `at`: sets its length and pads it.
    fn close_block(&mut self, at: usize) {
        let len = self.chunk.len() - at - 8;
        self.chunk[at + 4..at + 8].copy_from_slice(&(len as u32).to_le_bytes());
        self.chunk.resize(at + 8 + stride(len), 0);
    }

    fn maybe_flush_chunk(&mut self) -> io::Result<()> {
        if self.chunk.len() >= self.chunk_target {
            self.write_chunk()
        } else {
            Ok(())
        }
    }

    /// Records a schema; call before writing the first record of its type.
    pub fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        self.described_block(
            KIND_SCHEMA,
            &postcard::to_stdvec(schema).map_err(io::Error::other)?,
        )
    }

    /// Writes a schema or thread block and remembers it for the start of later chunks.
    fn described_block(&mut self, kind: u8, body: &[u8]) -> io::Result<()> {
        let at = self.open_block(kind);
        self.chunk.extend_from_slice(body);
        self.close_block(at);
        self.known.extend_from_slice(&self.chunk[at..]);
        self.maybe_flush_chunk()
    }

    /// Records a thread's name and operating-system id.
    pub fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        self.described_block(
            KIND_THREAD,
            &postcard::to_stdvec(info).map_err(io::Error::other)?,
        )
    }

    /// Appends records of `thread`, laid out as [`crate::record`] describes (timestamps in ns),
    /// encoded as format 2's records (see the [module documentation](self)); records taking
    /// more than 64 MiB in the file are stored as several blocks.
    ///
    /// Records whose layout is broken are refused (`InvalidInput`) and nothing of the call is
    /// written.
    pub fn records(&mut self, thread: u64, records: &[u8]) -> io::Result<()> {
        let refuse = |e: compact::BadRecord| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record at byte {} of a records block cannot be written: {}",
                    e.offset, e.what
                ),
            )
        };
        // A call that may span several blocks, and so several chunks, is checked whole
        // first: a chunk written out cannot be taken back. Compact records are at most 5/4 of
        // their fixed size, so a smaller call makes one block.
        if records.len() + records.len() / 4 + 16 >= self.max_records_body {
            Records::validate(records).map_err(|e| {
                refuse(compact::BadRecord {
                    offset: e.offset,
                    what: "its length field is impossible",
                })
            })?;
        }
        let mut rest = records;
        while !rest.is_empty() {
            let rollback = self.chunk.len();
            let at = self.open_block(KIND_RECORDS);
            self.chunk.extend_from_slice(&thread.to_le_bytes());
            let limit = at + 8 + self.max_records_body;
            let done = match compact::encode(rest, &mut self.chunk, limit) {
                Ok(done) => done,
                Err(mut e) => {
                    self.chunk.truncate(rollback);
                    e.offset += records.len() - rest.len();
                    return Err(refuse(e));
                }
            };
            self.close_block(at);
            self.pending += done.records;
            rest = &rest[done.used..];
            self.maybe_flush_chunk()?;
        }
        Ok(())
    }

    fn write_chunk(&mut self) -> io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let mut header = [0u8; CHUNK_HEADER_LEN];
        header[..4].copy_from_slice(&CHUNK_MAGIC);
        header[4..8].copy_from_slice(&(self.chunk.len() as u32).to_le_bytes());
        header[8..12].copy_from_slice(&crc32fast::hash(&self.chunk).to_le_bytes());
        header[12..16].copy_from_slice(&self.next_index.to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(&self.chunk)?;
        self.bytes_written += (CHUNK_HEADER_LEN + self.chunk.len()) as u64;
        self.next_index += 1;
        self.chunk.clear();
        self.pending = 0;
        Ok(())
    }

    /// Closes the pending chunk (if any) and flushes the output, so that everything given so far
    /// survives a crash of this process.
    pub fn flush(&mut self) -> io::Result<()> {
        self.write_chunk()?;
        self.out.flush()
    }

    /// Writes the end block, flushes, and returns the output.
    pub fn finish(mut self, end: &TraceEnd) -> io::Result<W> {
        self.block(
            KIND_END,
            &postcard::to_stdvec(end).map_err(io::Error::other)?,
        );
        self.flush()?;
        Ok(self.out)
    }
}

/// Why a trace could not be opened at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The file could not be opened or read.
    // The reason is part of the message, not a `source`: printing the error's chain would
    // show it twice.
    #[error("cannot read {path}: {error}")]
    Io {
        /// The path given.
        path: String,
        /// The operating system's error.
        error: io::Error,
    },
    /// The file does not start with gyr's magic bytes.
    #[error(
        "{path} is not a gyr trace (it does not start with `GYRTRACE`); gyr reads the files written by its trace-file sink"
    )]
    NotATrace {
        /// The path given.
        path: String,
    },
    /// The file is a trace of a format version this reader does not know.
    #[error(
        "{path} is a gyr trace of format version {version}; this gyr reads versions {FIRST_FORMAT_VERSION} to {FORMAT_VERSION}: use a gyr that reads version {version}"
    )]
    UnsupportedVersion {
        /// The path given.
        path: String,
        /// The version found.
        version: u32,
    },
    /// The header chunk is missing or damaged, so nothing can be decoded.
    #[error("{path}: the header chunk is {what}; without it the trace cannot be read")]
    BadHeader {
        /// The path given.
        path: String,
        /// What is wrong with it.
        what: String,
    },
}

/// Something wrong found while reading past the header; reading goes on where it can.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Damage {
    /// The file ends inside a chunk: the writer was stopped before finishing it.
    Truncated {
        /// The unfinished chunk's index (the one after the last complete chunk).
        chunk: u32,
        /// Where it starts in the file.
        offset: u64,
        /// How many bytes of it are present.
        present: u64,
    },
    /// A chunk's payload does not match its checksum.
    BadChecksum {
        /// The chunk's index.
        chunk: u32,
        /// Where it starts in the file.
        offset: u64,
    },
    /// Bytes that should start a chunk do not; the reader skipped to the next valid chunk.
    Skipped {
        /// Where the bad bytes start.
        offset: u64,
        /// How many bytes were skipped.
        len: u64,
    },
    /// A chunk with a valid checksum holds a block that cannot be decoded.
    BadBlock {
        /// The chunk's index.
        chunk: u32,
        /// Where the chunk starts in the file.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// Another trace starts here: the file holds more than one (they were concatenated). Its
    /// chunks are read on as part of this one.
    SecondTrace {
        /// Where its preamble starts.
        offset: u64,
    },
    /// Records whose type has no schema in the file (their schema was in a lost chunk).
    UnknownType {
        /// The type id.
        type_id: TypeId,
        /// How many such records.
        records: u64,
    },
}

impl Damage {
    /// Whether this is the expected end of a file whose writer was killed or is still writing,
    /// as opposed to corruption.
    pub fn is_cut_off(&self) -> bool {
        matches!(self, Damage::Truncated { .. })
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Truncated {
                chunk,
                offset,
                present,
            } => write!(
                f,
                "the file ends inside chunk {chunk} (at byte {offset}, {present} bytes present): \
                 the writer did not finish it (killed, crashed, or still running)"
            ),
            Damage::BadChecksum { chunk, offset } => {
                write!(
                    f,
                    "chunk {chunk} at byte {offset} is corrupt (checksum mismatch); its records were skipped"
                )
            }
            Damage::Skipped { offset, len } => {
                write!(
                    f,
                    "{len} unreadable bytes at byte {offset} were skipped (no valid chunk starts there)"
                )
            }
            Damage::BadBlock {
                chunk,
                offset,
                what,
            } => {
                write!(
                    f,
                    "chunk {chunk} at byte {offset} holds a malformed block ({what}); the rest of the chunk was skipped"
                )
            }
            Damage::SecondTrace { offset } => write!(
                f,
                "a second trace starts at byte {offset}: this file holds more than one trace \
                 (concatenated?); its records are read as well, but keep one trace per file"
            ),
            Damage::UnknownType { type_id, records } => {
                write!(
                    f,
                    "{records} records of type id {type_id} have no schema in the file and were skipped"
                )
            }
        }
    }
}

/// What reading a trace found, beyond its records.
#[derive(Clone, Debug, Default)]
pub struct ReadSummary {
    /// Complete, valid chunks read.
    pub chunks: u64,
    /// Records read (decodable or not).
    pub records: u64,
    /// Whether the file ended with an end block.
    pub clean_end: bool,
    /// Everything wrong that was found, in file order.
    pub damage: Vec<Damage>,
}

impl ReadSummary {
    /// Whether anything other than a cut-off tail was found.
    pub fn is_corrupt(&self) -> bool {
        self.damage.iter().any(|d| !d.is_cut_off())
    }
}

/// One thing found in a trace, in file order.
#[derive(Debug)]
pub enum Item<'a> {
    /// A schema, now known to the reader.
    Schema(&'a Schema),
    /// A thread's description.
    Thread(&'a ThreadInfo),
    /// A record, with its schema if the file holds one.
    Record {
        /// The record's schema (`None` only in damaged files).
        schema: Option<&'a Schema>,
        /// The record.
        record: RecordRef<'a>,
    },
    /// The end block of a cleanly closed file.
    End(&'a TraceEnd),
}

/// Chunks a read-ahead thread keeps ready for the walk: with the one each side holds, this
/// bounds its memory to a few chunks.
const READ_AHEAD_CHUNKS: usize = 4;

/// Reads a trace file, recovering every complete, valid chunk.
///
/// Finding chunks (reading, scanning, checksums) and walking them (parsing blocks, decoding
/// records) are two halves: with [`TraceReader::read_ahead`] the first, and the decoding of
/// records, run on a thread the caller provides, a few chunks ahead of the rest.
#[derive(Debug)]
pub struct TraceReader<R> {
    source: Source<R>,
    /// Where the walk stands in the file: the end of the last chunk found.
    offset: u64,
    /// The format version of the trace being read: a second trace in the file may have
    /// another.
    version: u32,
    /// Bytes read from the input by the time the last chunk was found.
    examined: u64,
    header: TraceHeader,
    schemas: HashMap<TypeId, Schema>,
    threads: HashMap<u64, ThreadInfo>,
    summary: ReadSummary,
    unknown: HashMap<TypeId, u64>,
    done: bool,
}

/// Where a reader's chunks come from.
#[derive(Debug)]
// One per reader, never in bulk: boxing the common case would only add an indirection.
#[allow(clippy::large_enum_variant)]
enum Source<R> {
    /// Found on the walking thread, as it needs them.
    Here(ChunkSource<R>),
    /// To be found on a read-ahead thread, started with the spawner given once the walk
    /// begins (so that inputs opened together do not all read at once).
    Primed(Box<ChunkSource<R>>, StartFn<R>, Spawn),
    /// Found on a read-ahead thread.
    Ahead(ReadAhead),
}

/// Starts a read-ahead thread, or gives the source back when no thread can be started.
type StartFn<R> = fn(Box<ChunkSource<R>>, Spawn) -> Result<ReadAhead, Box<ChunkSource<R>>>;

/// Runs a job on a thread of the caller's: gyr-core starts no thread of its own, so a reader
/// that reads ahead ([`TraceReader::read_ahead`]) is given the means to. An error means the job
/// will not run (the reader then finds its chunks itself).
pub type Spawn = fn(Box<dyn FnOnce() + Send>) -> io::Result<()>;

/// The finding half of a reader: reads and checks chunks in file order, noting the damage
/// between them.
#[derive(Debug)]
struct ChunkSource<R> {
    input: Input<R>,
    /// Where the next chunk should start.
    offset: u64,
    /// The format version of the chunks found: a second trace in the file may have another.
    version: u32,
    done: bool,
    scanner: Scanner,
    /// Damage found since the last chunk.
    damage: Vec<Damage>,
}

/// What the finding half found next, with the damage it found on the way, in file order.
#[derive(Debug)]
struct Scanned {
    damage: Vec<Damage>,
    /// The format version of the chunk's records.
    version: u32,
    /// Bytes read from the input so far.
    examined: u64,
    /// Where the finding stood (the end of the chunk, or where reading failed).
    offset: u64,
    next: Next,
}

#[derive(Debug)]
enum Next {
    Chunk(RawChunk),
    End,
    Failed(io::Error),
}

/// A read-ahead thread and the bounded channel over which it hands its chunks over, in order.
/// Dropping it stops the thread.
#[derive(Debug)]
struct ReadAhead {
    chunks: mpsc::Receiver<Scanned>,
    /// Payloads (and their decoded records) the walk is done with, back to the thread.
    spare: mpsc::SyncSender<(Vec<u8>, Option<Decoded>)>,
    /// Closed when the job ends, after a panic's message if it panicked: the reader's join.
    ended: Option<mpsc::Receiver<String>>,
}

impl ReadAhead {
    /// Has `spawn` run a job finding `source`'s chunks.
    fn start<R: Read + Seek + Send + 'static>(
        source: Box<ChunkSource<R>>,
        spawn: Spawn,
    ) -> Result<ReadAhead, Box<ChunkSource<R>>> {
        let (hand, take) = mpsc::sync_channel::<Box<ChunkSource<R>>>(1);
        let (tx, chunks) = mpsc::sync_channel(READ_AHEAD_CHUNKS);
        let (spare, back) = mpsc::sync_channel::<(Vec<u8>, Option<Decoded>)>(READ_AHEAD_CHUNKS);
        let (stopped, ended) = mpsc::sync_channel::<String>(1);
        let job = Box::new(move || {
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let Ok(mut source) = take.recv() else { return };
                let mut pool: Vec<Decoded> = Vec::new();
                loop {
                    while let Ok((buf, decoded)) = back.try_recv() {
                        source.scanner.recycle(buf);
                        if let Some(d) = decoded
                            && pool.len() < SPARE_DECODED
                        {
                            pool.push(d);
                        }
                    }
                    let mut found = source.next();
                    // The walking thread then only hands the records on.
                    if let Next::Chunk(chunk) = &mut found.next {
                        let mut decoded = pool.pop().unwrap_or_default();
                        decoded.decode(&chunk.payload, found.version);
                        chunk.decoded = Some(decoded);
                    }
                    let last = !matches!(found.next, Next::Chunk(_));
                    // The reader was dropped, or this was the end: stop.
                    if tx.send(found).is_err() || last {
                        return;
                    }
                }
            }));
            // `tx` is gone by now, so the walk sees the end of the chunks before the reason.
            if let Err(panic) = run {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                let _ = stopped.send(why);
            }
        });
        if spawn(job).is_err() {
            return Err(source);
        }
        // The job is waiting for it (a job that died already is found out by the walk).
        let _ = hand.send(source);
        Ok(ReadAhead {
            chunks,
            spare,
            ended: Some(ended),
        })
    }

    /// The next thing found; a thread that stopped without saying it ended (it panicked) is a
    /// read error at `offset`.
    fn next(&mut self, offset: u64, version: u32, examined: u64) -> Scanned {
        match self.chunks.recv() {
            Ok(found) => found,
            Err(mpsc::RecvError) => {
                let why = self
                    .ended
                    .take()
                    .and_then(|ended| ended.recv().ok())
                    .unwrap_or_else(|| "no reason given".into());
                Scanned {
                    damage: Vec::new(),
                    version,
                    examined,
                    offset,
                    next: Next::Failed(io::Error::other(format!(
                        "the read-ahead thread stopped ({why})"
                    ))),
                }
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // Closing the channel wakes a thread waiting to hand a chunk over; it then returns.
        let (_, closed) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.chunks, closed));
        // Then wait for the job to end, as a join would.
        if let Some(ended) = self.ended.take() {
            let _ = ended.recv();
        }
    }
}

impl TraceReader<io::BufReader<std::fs::File>> {
    /// Opens the trace at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|error| OpenError::Io {
            path: shown.clone(),
            error,
        })?;
        TraceReader::new(io::BufReader::with_capacity(1 << 20, file))
            .map_err(|e| e.with_path(&shown))
    }
}

impl OpenError {
    fn with_path(self, p: &str) -> Self {
        let path = p.to_owned();
        match self {
            OpenError::Io { error, .. } => OpenError::Io { path, error },
            OpenError::NotATrace { .. } => OpenError::NotATrace { path },
            OpenError::UnsupportedVersion { version, .. } => {
                OpenError::UnsupportedVersion { path, version }
            }
            OpenError::BadHeader { what, .. } => OpenError::BadHeader { path, what },
        }
    }
}

/// Reads chunk 0, right after the preamble; the inner error says what is wrong with it.
fn read_header_chunk<R: Read + Seek>(input: &mut Input<R>) -> io::Result<Result<RawChunk, String>> {
    let at = PREAMBLE_LEN as u64;
    let file_len = input.len;
    let mut h = [0u8; CHUNK_HEADER_LEN];
    if input.read_at(at, &mut h)? < CHUNK_HEADER_LEN {
        return Ok(Err(
            "incomplete (the writer stopped while writing it)".into()
        ));
    }
    if h[..4] != CHUNK_MAGIC {
        return Ok(Err("missing (no chunk starts after the preamble)".into()));
    }
    let len = u64::from(u32::from_le_bytes(h[4..8].try_into().unwrap()));
    if len as usize > MAX_CHUNK_PAYLOAD || !len.is_multiple_of(8) {
        return Ok(Err(format!(
            "damaged: its length field says {len} bytes, which no chunk has (a multiple of 8, \
             at most {MAX_CHUNK_PAYLOAD}); the file has {file_len} bytes"
        )));
    }
    let Some((len, crc, index)) = plausible_header(&h, at, file_len) else {
        let present = file_len.saturating_sub(at + CHUNK_HEADER_LEN as u64);
        return Ok(Err(format!(
            "incomplete: its length field says {len} bytes but only {present} follow in the \
             {file_len}-byte file (the writer stopped while writing it, or the length is damaged)"
        )));
    };
    if index != 0 {
        return Ok(Err("missing (the first chunk is not chunk 0)".into()));
    }
    let mut payload = vec![0u8; len as usize];
    if input.read_at(at + CHUNK_HEADER_LEN as u64, &mut payload)? < payload.len() {
        return Ok(Err(
            "incomplete (the writer stopped while writing it)".into()
        ));
    }
    if crc32fast::hash(&payload) != crc {
        return Ok(Err(format!(
            "corrupt: its {len} bytes do not match their checksum (the file has {file_len} bytes)"
        )));
    }
    Ok(Ok(RawChunk {
        index,
        offset: at,
        payload,
        decoded: None,
    }))
}

#[derive(Debug)]
struct RawChunk {
    index: u32,
    offset: u64,
    payload: Vec<u8>,
    /// Its records, decoded by a read-ahead thread; `None` when the walk decodes them.
    decoded: Option<Decoded>,
}

/// A record decoded ahead of the walk: its header and where its payload lies in the chunk.
#[derive(Debug, Clone, Copy)]
struct DecodedRecord {
    header: RecordHeader,
    /// The payload's first byte, counted from the chunk payload's start (below 1 GiB).
    at: u32,
    len: u32,
}

/// A chunk's records blocks, decoded on the read-ahead thread so that the walking thread only
/// hands them on: decoding is about half of a walk's own work.
#[derive(Debug, Default)]
struct Decoded {
    /// Every records block's records, in order.
    records: Vec<DecodedRecord>,
    /// Per records block, in chunk order: where its records end in `records`, and what is
    /// wrong with the rest of the block, if anything.
    blocks: Vec<(usize, Option<String>)>,
}

/// The most records-buffers a read-ahead thread keeps for reuse.
const SPARE_DECODED: usize = READ_AHEAD_CHUNKS + 2;

impl Decoded {
    /// Decodes the records blocks of `payload` (records of format `version`) as the walk
    /// would, reusing this one's room.
    fn decode(&mut self, payload: &[u8], version: u32) {
        self.records.clear();
        self.blocks.clear();
        for block in parse_blocks(payload) {
            let Ok((kind, body)) = block else { break };
            if kind != KIND_RECORDS {
                continue;
            }
            let mut error = None;
            if let Some(records) = block_records(version, body) {
                for rec in records {
                    match rec {
                        Ok(r) => self.records.push(DecodedRecord {
                            header: r.header,
                            // In the chunk: below MAX_CHUNK_PAYLOAD, so both fit.
                            at: (r.payload.as_ptr() as usize - payload.as_ptr() as usize) as u32,
                            len: r.payload.len() as u32,
                        }),
                        Err(what) => {
                            error = Some(what);
                            break;
                        }
                    }
                }
            }
            self.blocks.push((self.records.len(), error));
        }
    }
}

/// The records of a records block `body` of format `version`; `None` when it is too short to
/// name its thread or of a version this gyr cannot read (the walk says which).
fn block_records(version: u32, body: &[u8]) -> Option<BlockRecords<'_>> {
    let thread = u64::from_le_bytes(body.get(..8)?.try_into().ok()?);
    match version {
        1 => Some(BlockRecords::Fixed(Records::new(thread, &body[8..]))),
        2 => Some(BlockRecords::Compact(CompactRecords::new(
            thread,
            &body[8..],
        ))),
        _ => None,
    }
}

enum ChunkRead {
    Chunk(RawChunk),
    End,
}

impl<R: Read + Seek> TraceReader<R> {
    /// Starts reading a trace from `r`: checks the preamble and reads the header chunk.
    pub fn new(r: R) -> Result<Self, OpenError> {
        let io_err = |error| OpenError::Io {
            path: String::from("<input>"),
            error,
        };
        let mut input = Input::new(r).map_err(io_err)?;
        let mut pre = [0u8; PREAMBLE_LEN];
        let n = input.read_at(0, &mut pre).map_err(io_err)?;
        if n < 8 || pre[..8] != FILE_MAGIC {
            return Err(OpenError::NotATrace {
                path: String::from("<input>"),
            });
        }
        if n < PREAMBLE_LEN {
            return Err(OpenError::BadHeader {
                path: String::from("<input>"),
                what: "missing".into(),
            });
        }
        let version = u32::from_le_bytes(pre[8..12].try_into().unwrap());
        if !(FIRST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(OpenError::UnsupportedVersion {
                path: String::from("<input>"),
                version,
            });
        }
        let bad = |what: String| OpenError::BadHeader {
            path: String::from("<input>"),
            what,
        };
        let chunk = read_header_chunk(&mut input)
            .map_err(io_err)?
            .map_err(bad)?;
        let body = match parse_blocks(&chunk.payload).next() {
            Some(Ok((KIND_HEADER, body))) => body,
            _ => return Err(bad("malformed (no header block)".into())),
        };
        let header = postcard::from_bytes(body)
            .map_err(|_| bad("malformed (header does not decode)".into()))?;
        let offset = chunk.offset + (CHUNK_HEADER_LEN + chunk.payload.len()) as u64;
        let examined = input.examined;
        Ok(TraceReader {
            source: Source::Here(ChunkSource {
                input,
                offset,
                version,
                done: false,
                scanner: Scanner::default(),
                damage: Vec::new(),
            }),
            offset,
            version,
            examined,
            header,
            schemas: HashMap::new(),
            threads: HashMap::new(),
            summary: ReadSummary {
                chunks: 1,
                ..ReadSummary::default()
            },
            unknown: HashMap::new(),
            done: false,
        })
    }

    /// The header of the process that wrote the trace.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The trace's format version (that of a second trace in the file once the reader has
    /// reached it).
    pub fn format_version(&self) -> u32 {
        self.version
    }

    /// Schemas seen so far, by id.
    pub fn schemas(&self) -> &HashMap<TypeId, Schema> {
        &self.schemas
    }

    /// Threads seen so far, by gyr thread id.
    pub fn threads(&self) -> &HashMap<u64, ThreadInfo> {
        &self.threads
    }

    /// What was found so far: counts and damage.
    pub fn summary(&self) -> &ReadSummary {
        &self.summary
    }

    /// Bytes read from the input so far: the measure of the reader's work. Each byte is
    /// checksummed once however the file is damaged, so this stays within a small multiple of
    /// the file's size.
    pub fn bytes_examined(&self) -> u64 {
        match &self.source {
            Source::Here(s) => s.input.examined,
            Source::Primed(s, ..) => s.input.examined,
            Source::Ahead(_) => self.examined,
        }
    }

    /// The next chunk found, with the damage before it.
    fn next_found(&mut self) -> Scanned {
        if self.done {
            return Scanned {
                damage: Vec::new(),
                version: self.version,
                examined: self.examined,
                offset: self.offset,
                next: Next::End,
            };
        }
        if matches!(self.source, Source::Primed(..)) {
            let (_, closed) = mpsc::sync_channel(0);
            let (spare, _) = mpsc::sync_channel(0);
            let placeholder = Source::Ahead(ReadAhead {
                chunks: closed,
                spare,
                ended: None,
            });
            self.source = match std::mem::replace(&mut self.source, placeholder) {
                Source::Primed(source, start, spawn) => match start(source, spawn) {
                    Ok(ahead) => Source::Ahead(ahead),
                    Err(source) => Source::Here(*source),
                },
                other => other,
            };
        }
        match &mut self.source {
            Source::Here(s) => s.next(),
            Source::Primed(s, ..) => s.next(),
            Source::Ahead(a) => a.next(self.offset, self.version, self.examined),
        }
    }
}

impl<R: Read + Seek + Send + 'static> TraceReader<R> {
    /// Finds chunks (reading, scanning, checksums) and decodes their records on a thread
    /// `spawn` provides, a few chunks ahead of the walk, which parses their other blocks and
    /// calls back as without: on two cores a trace is read faster. Items, summary and damage are the same, in the same order. The job starts
    /// when the walk begins, holds at most a few chunks, and ends when the walk reaches the end
    /// or the reader is dropped (the drop waits for it); a read error or a panic in it is
    /// reported as the read error of a walk without it. When `spawn` fails, the walk finds its
    /// chunks itself.
    pub fn read_ahead(mut self, spawn: Spawn) -> Self {
        self.source = match self.source {
            Source::Here(source) => Source::Primed(Box::new(source), ReadAhead::start::<R>, spawn),
            other => other,
        };
        self
    }
}

impl<R: Read + Seek> ChunkSource<R> {
    /// The next valid chunk, the end, or a read error, with the damage found before it.
    fn next(&mut self) -> Scanned {
        let next = match self.next_chunk() {
            Ok(ChunkRead::Chunk(c)) => Next::Chunk(c),
            Ok(ChunkRead::End) => Next::End,
            Err(e) => {
                self.done = true;
                Next::Failed(e)
            }
        };
        Scanned {
            damage: std::mem::take(&mut self.damage),
            version: self.version,
            examined: self.input.examined,
            offset: self.offset,
            next,
        }
    }

    /// Says what is wrong at `at`, where no valid chunk starts; the next valid chunk is at
    /// `next` (or none follows).
    fn damage_at(&mut self, at: u64, next: Option<u64>) -> io::Result<()> {
        let len = self.input.len;
        // A preamble right before the next chunk: another trace was appended to this one.
        let mut second = None;
        if let Some(next) = next.filter(|&n| n >= at + PREAMBLE_LEN as u64) {
            let mut pre = [0u8; PREAMBLE_LEN];
            let start = next - PREAMBLE_LEN as u64;
            if self.input.read_at(start, &mut pre)? == PREAMBLE_LEN && pre[..8] == FILE_MAGIC {
                second = Some(start);
                // Its records are in its own version's encoding.
                self.version = u32::from_le_bytes(pre[8..12].try_into().unwrap());
            }
        }
        let stop = second.or(next).unwrap_or(len);
        if stop > at {
            let mut h = [0u8; CHUNK_HEADER_LEN];
            let n = self.input.read_at(at, &mut h)?;
            let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
            let damage = if n < CHUNK_HEADER_LEN {
                Damage::Truncated {
                    chunk: 0,
                    offset: at,
                    present: n as u64,
                }
            } else if h[..4] != CHUNK_MAGIC
                || word(4) as usize > MAX_CHUNK_PAYLOAD
                || !word(4).is_multiple_of(8)
            {
                Damage::Skipped {
                    offset: at,
                    len: stop - at,
                }
            } else if at + (CHUNK_HEADER_LEN as u64) + u64::from(word(4)) > stop
                && (next.is_none() || second.is_some())
            {
                // The trace ends inside this chunk: the file's end, or where the next trace
                // starts.
                Damage::Truncated {
                    chunk: word(12),
                    offset: at,
                    present: stop - at,
                }
            } else {
                // A chunk whose end lies beyond a later valid chunk was damaged in place, not
                // cut off.
                Damage::BadChecksum {
                    chunk: word(12),
                    offset: at,
                }
            };
            self.damage.push(damage);
        }
        if let Some(offset) = second {
            self.damage.push(Damage::SecondTrace { offset });
        }
        Ok(())
    }

    fn next_chunk(&mut self) -> io::Result<ChunkRead> {
        loop {
            if self.done || self.offset >= self.input.len {
                return Ok(ChunkRead::End);
            }
            let at = self.offset;
            match self.scanner.first_valid(&mut self.input, at)? {
                Some((found, payload)) if found.offset == at => {
                    let payload = match payload {
                        Some(p) => p,
                        None => {
                            let mut p = vec![0u8; found.len as usize];
                            let got = self.input.read_at(at + CHUNK_HEADER_LEN as u64, &mut p)?;
                            if got < p.len() {
                                return Err(io::Error::new(
                                    io::ErrorKind::UnexpectedEof,
                                    "the file shrank while it was read",
                                ));
                            }
                            p
                        }
                    };
                    self.offset = at + (CHUNK_HEADER_LEN + payload.len()) as u64;
                    return Ok(ChunkRead::Chunk(RawChunk {
                        index: found.index,
                        offset: at,
                        payload,
                        decoded: None,
                    }));
                }
                Some((found, _)) => {
                    self.damage_at(at, Some(found.offset))?;
                    self.offset = found.offset;
                }
                None => {
                    self.damage_at(at, None)?;
                    self.done = true;
                }
            }
        }
    }
}

impl<R: Read + Seek> TraceReader<R> {
    /// Calls `f` with every schema, thread, record and end block, in file order, skipping
    /// damaged chunks (see [`TraceReader::summary`] for what was skipped).
    ///
    /// An I/O error while reading ends the walk and is recorded as damage.
    pub fn for_each_item(&mut self, mut f: impl FnMut(Item<'_>)) {
        self.try_for_each_item(|item| {
            f(item);
            ControlFlow::Continue(())
        });
    }

    /// [`TraceReader::for_each_item`], stopping early when `f` says so.
    pub fn try_for_each_item(&mut self, mut f: impl FnMut(Item<'_>) -> ControlFlow<()>) {
        loop {
            match self.walk_next_chunk(&mut f) {
                Some(ControlFlow::Continue(())) => {}
                Some(ControlFlow::Break(())) => return,
                None => break,
            }
        }
        self.report_unknown();
    }

    /// Calls `f` with the items of the next valid chunk only, so that a reader can pull a
    /// trace a chunk at a time (a merge of many files holds one chunk of each); returns
    /// `false`, having called `f` with nothing, once the trace is read to its end. Items
    /// come as [`TraceReader::for_each_item`] gives them, and the summary is the same when
    /// the walk is done.
    pub fn for_each_item_of_next_chunk(&mut self, mut f: impl FnMut(Item<'_>)) -> bool {
        let more = self
            .walk_next_chunk(&mut |item| {
                f(item);
                ControlFlow::Continue(())
            })
            .is_some();
        if !more {
            self.report_unknown();
        }
        more
    }

    /// Records of types the trace never described, as damage (once, at the end).
    fn report_unknown(&mut self) {
        let mut unknown: Vec<_> = self.unknown.drain().collect();
        unknown.sort();
        for (type_id, records) in unknown {
            self.summary
                .damage
                .push(Damage::UnknownType { type_id, records });
        }
    }

    /// Walks the next valid chunk; `None` when there is none left.
    fn walk_next_chunk(
        &mut self,
        f: &mut impl FnMut(Item<'_>) -> ControlFlow<()>,
    ) -> Option<ControlFlow<()>> {
        let found = self.next_found();
        self.summary.damage.extend(found.damage);
        self.version = found.version;
        self.examined = found.examined;
        self.offset = found.offset;
        let chunk = match found.next {
            Next::Chunk(c) => c,
            Next::End => {
                self.done = true;
                return None;
            }
            Next::Failed(e) => {
                self.summary.damage.push(Damage::BadBlock {
                    chunk: 0,
                    offset: found.offset,
                    what: format!("read error: {e}"),
                });
                self.done = true;
                return None;
            }
        };
        self.summary.chunks += 1;
        let walked = self.walk_chunk(&chunk, f);
        self.recycle(chunk.payload, chunk.decoded);
        Some(walked)
    }

    /// Hands a chunk's payload back to be filled again.
    fn recycle(&mut self, payload: Vec<u8>, decoded: Option<Decoded>) {
        match &mut self.source {
            Source::Here(s) => s.scanner.recycle(payload),
            Source::Primed(s, ..) => s.scanner.recycle(payload),
            // A full channel means the thread has spares enough.
            Source::Ahead(a) => {
                let _ = a.spare.try_send((payload, decoded));
            }
        }
    }

    /// Calls `f` with the items of `chunk`.
    fn walk_chunk(
        &mut self,
        chunk: &RawChunk,
        f: &mut impl FnMut(Item<'_>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        // Records blocks walked so far, and where the next one's decoded records start.
        let mut records_blocks = 0usize;
        let mut decoded_from = 0usize;
        for block in parse_blocks(&chunk.payload) {
            let bad = |what: String| Damage::BadBlock {
                chunk: chunk.index,
                offset: chunk.offset,
                what,
            };
            let (kind, body) = match block {
                Ok(b) => b,
                Err(what) => {
                    self.summary.damage.push(bad(what));
                    break;
                }
            };
            match kind {
                KIND_SCHEMA => match postcard::from_bytes::<Schema>(body) {
                    Ok(s) if s.validate().is_ok() => {
                        // Chunks repeat the schemas: report each one once.
                        if self.schemas.get(&s.id) != Some(&s) {
                            let id = s.id;
                            self.schemas.insert(id, s);
                            if f(Item::Schema(&self.schemas[&id])).is_break() {
                                return ControlFlow::Break(());
                            }
                        }
                    }
                    _ => self
                        .summary
                        .damage
                        .push(bad("a schema does not decode".into())),
                },
                KIND_THREAD => match postcard::from_bytes::<ThreadInfo>(body) {
                    Ok(t) => {
                        if self.threads.get(&t.id) != Some(&t) {
                            let id = t.id;
                            self.threads.insert(id, t);
                            if f(Item::Thread(&self.threads[&id])).is_break() {
                                return ControlFlow::Break(());
                            }
                        }
                    }
                    Err(_) => self
                        .summary
                        .damage
                        .push(bad("a thread block does not decode".into())),
                },
                KIND_RECORDS => {
                    // The records decoded ahead for this block, if they were.
                    let ahead = chunk.decoded.as_ref().and_then(|d| {
                        let (end, error) = d.blocks.get(records_blocks)?;
                        let from = std::mem::replace(&mut decoded_from, *end);
                        Some(WalkRecords::Decoded {
                            records: d.records.get(from..*end)?.iter(),
                            payload: &chunk.payload,
                            error: error.as_deref(),
                        })
                    });
                    records_blocks += 1;
                    let Some(thread) = body.get(..8) else {
                        self.summary
                            .damage
                            .push(bad("a records block is too short".into()));
                        continue;
                    };
                    let thread = u64::from_le_bytes(thread.try_into().unwrap());
                    let records = match (ahead, block_records(self.version, body)) {
                        (_, None) => {
                            let v = self.version;
                            self.summary.damage.push(bad(format!(
                                "its records are of format version {v}, which this gyr \
                                     cannot read"
                            )));
                            continue;
                        }
                        (Some(ahead), Some(_)) => ahead,
                        (None, Some(live)) => WalkRecords::Live(live),
                    };
                    // A block's records are mostly of a few types: the last few look-ups
                    // are kept (schemas do not change inside a block).
                    let mut recent: [Option<(TypeId, Option<&Schema>)>; 4] = [None; 4];
                    for rec in records.with_thread(thread) {
                        let record = match rec {
                            Ok(record) => record,
                            Err(what) => {
                                self.summary.damage.push(bad(what));
                                break;
                            }
                        };
                        self.summary.records += 1;
                        let type_id = record.header.type_id;
                        let schema = match recent.iter().flatten().find(|(t, _)| *t == type_id) {
                            Some(&(_, s)) => s,
                            None => {
                                let s = self.schemas.get(&type_id);
                                recent.rotate_right(1);
                                recent[0] = Some((type_id, s));
                                s
                            }
                        };
                        if schema.is_none() {
                            *self.unknown.entry(record.header.type_id).or_default() += 1;
                        }
                        if f(Item::Record { schema, record }).is_break() {
                            return ControlFlow::Break(());
                        }
                    }
                }
                KIND_END => match postcard::from_bytes::<TraceEnd>(body) {
                    Ok(end) => {
                        self.summary.clean_end = true;
                        if f(Item::End(&end)).is_break() {
                            return ControlFlow::Break(());
                        }
                    }
                    Err(_) => self
                        .summary
                        .damage
                        .push(bad("the end block does not decode".into())),
                },
                KIND_HEADER => {}
                other => self
                    .summary
                    .damage
                    .push(bad(format!("unknown block kind {other}"))),
            }
        }
        ControlFlow::Continue(())
    }
}

/// The records of one block as the walk takes them: decoded there, or ahead of it.
enum WalkRecords<'a> {
    Live(BlockRecords<'a>),
    Decoded {
        records: std::slice::Iter<'a, DecodedRecord>,
        payload: &'a [u8],
        /// What is wrong with the rest of the block, given after its records.
        error: Option<&'a str>,
    },
}

impl<'a> WalkRecords<'a> {
    /// Its records, as `thread`'s.
    fn with_thread(
        self,
        thread: u64,
    ) -> impl Iterator<Item = Result<RecordRef<'a>, String>> + use<'a> {
        let mut this = self;
        std::iter::from_fn(move || match &mut this {
            WalkRecords::Live(r) => r.next(),
            WalkRecords::Decoded {
                records,
                payload,
                error,
            } => match records.next() {
                Some(d) => Some(Ok(RecordRef {
                    thread,
                    header: d.header,
                    payload: payload
                        .get(d.at as usize..d.at as usize + d.len as usize)
                        .unwrap_or_default(),
                })),
                None => error.take().map(|e| Err(e.to_owned())),
            },
        })
    }
}

/// The records of one block, in the encoding of the trace's format version.
enum BlockRecords<'a> {
    /// Format 1: the fixed layout of rings.
    Fixed(Records<'a>),
    /// Format 2.
    Compact(CompactRecords<'a>),
}

impl<'a> Iterator for BlockRecords<'a> {
    /// A record, or what is wrong with the rest of the block.
    type Item = Result<RecordRef<'a>, String>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            BlockRecords::Fixed(r) => Some(
                r.next()?
                    .map_err(|_| "a record has an impossible length".to_owned()),
            ),
            BlockRecords::Compact(r) => Some(r.next()?.map_err(|e| {
                format!(
                    "the record at byte {} of a records block does not decode: {}",
                    e.offset + 8,
                    e.what
                )
            })),
        }
    }
}

/// Splits a chunk payload into `(kind, body)` blocks.
fn parse_blocks(payload: &[u8]) -> impl Iterator<Item = Result<(u8, &[u8]), String>> {
    let mut rest = payload;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() < 8 {
            rest = &[];
            return Some(Err("a block header is cut short".into()));
        }
        let kind = rest[0];
        let len = u32::from_le_bytes(rest[4..8].try_into().unwrap()) as usize;
        if 8 + stride(len) > rest.len() {
            rest = &[];
            return Some(Err(format!(
                "a block claims {len} bytes but the chunk has fewer"
            )));
        }
        let body = &rest[8..8 + len];
        rest = &rest[8 + stride(len)..];
        Some(Ok((kind, body)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::push_record;
    use crate::schema::{Field, FieldType};
    use std::io::Cursor;

    #[test]
    fn a_trace_read_a_chunk_at_a_time_gives_what_a_walk_gives() {
        let (file, n) = sample_trace(5);
        let mut whole = Vec::new();
        let mut r = TraceReader::new(Cursor::new(file.clone())).unwrap();
        r.for_each_item(|i| whole.push(format!("{i:?}")));
        let mut pulled = Vec::new();
        let mut r2 = TraceReader::new(Cursor::new(file)).unwrap();
        let mut calls = 0;
        while r2.for_each_item_of_next_chunk(|i| pulled.push(format!("{i:?}"))) {
            calls += 1;
        }
        assert_eq!(pulled, whole);
        assert!(calls >= 5, "{calls}");
        assert_eq!(format!("{:?}", r2.summary()), format!("{:?}", r.summary()));
        assert_eq!(r2.summary().records, n);
        assert!(!r2.for_each_item_of_next_chunk(|_| panic!("nothing after the end")));
    }

    fn sample_trace(chunks: usize) -> (Vec<u8>, u64) {
        let schema = Schema::new(2, "x", vec![Field::new("v", FieldType::U64)]).unwrap();
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::for_this_process()).unwrap();
        w.set_chunk_target(1);
        w.schema(&schema).unwrap();
        let mut n = 0;
        for c in 0..chunks {
            let mut recs = Vec::new();
            push_record(
                &mut recs,
                2,
                c as u64,
                c as u64 + 1,
                0,
                &(c as u64).to_le_bytes(),
            );
            w.records(1, &recs).unwrap();
            n += 1;
        }
        (
            w.finish(&TraceEnd {
                records: n,
                ..TraceEnd::default()
            })
            .unwrap(),
            n,
        )
    }

    fn count(bytes: Vec<u8>) -> (u64, ReadSummary) {
        let mut r = TraceReader::new(Cursor::new(bytes)).unwrap();
        let mut n = 0;
        r.for_each_item(|i| {
            if let Item::Record {
                schema: Some(_), ..
            } = i
            {
                n += 1
            }
        });
        (n, r.summary().clone())
    }

    #[test]
    fn reads_back_clean_file() {
        let (bytes, n) = sample_trace(10);
        let (got, summary) = count(bytes);
        assert_eq!(got, n);
        assert!(summary.clean_end);
        assert!(summary.damage.is_empty());
    }

    #[test]
    fn skips_a_corrupt_chunk_and_reads_on() {
        let (mut bytes, n) = sample_trace(10);
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        let (got, summary) = count(bytes);
        assert_eq!(got, n - 1);
        assert!(summary.is_corrupt());
        assert!(summary.clean_end);
    }

    /// A call larger than a block may be is split into blocks, each in a chunk of its own when
    /// the chunks are small, and checked whole before any of it is written.
    #[test]
    fn a_large_call_is_split_into_blocks() {
        let mut recs = Vec::new();
        for i in 0..100u64 {
            push_record(&mut recs, 2, i * 10, i + 1, i / 10, &[i as u8; 40]);
        }
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
        w.max_records_body = 500;
        w.set_chunk_target(1);
        let before = w.bytes_written();
        let mut bad = recs.clone();
        let last = recs.len() - stride(72);
        bad[last..last + 4].copy_from_slice(&3u32.to_le_bytes());
        let err = w.records(7, &bad).unwrap_err();
        assert!(
            err.to_string().contains(&format!("at byte {last}")),
            "{err}"
        );
        assert_eq!(
            w.bytes_written(),
            before,
            "nothing of a refused call is written"
        );
        w.records(7, &recs).unwrap();
        let file = w.finish(&TraceEnd::default()).unwrap();
        let mut r = TraceReader::new(Cursor::new(file)).unwrap();
        let mut got = Vec::new();
        r.for_each_item(|i| {
            if let Item::Record { record, .. } = i {
                got.push((record.thread, record.header, record.payload.to_vec()));
            }
        });
        let expected: Vec<_> = Records::new(7, &recs)
            .map(|r| {
                let r = r.unwrap();
                (r.thread, r.header, r.payload.to_vec())
            })
            .collect();
        assert_eq!(got, expected);
        // A record takes 43 or 44 bytes, so a block ends at its 12th (the thread id and 11
        // records stay under 500 bytes): 9 blocks, between the header chunk and the end's.
        assert_eq!(r.summary().chunks, 1 + 9 + 1);
    }

    #[test]
    fn rejects_foreign_and_empty_input() {
        assert!(matches!(
            TraceReader::new(Cursor::new(b"hello world, not a trace".to_vec())),
            Err(OpenError::NotATrace { .. })
        ));
        assert!(matches!(
            TraceReader::new(Cursor::new(Vec::new())),
            Err(OpenError::NotATrace { .. })
        ));
        let (bytes, _) = sample_trace(1);
        assert!(matches!(
            TraceReader::new(Cursor::new(bytes[..30].to_vec())),
            Err(OpenError::BadHeader { .. })
        ));
        let mut future = bytes.clone();
        future[8] = 9;
        assert!(matches!(
            TraceReader::new(Cursor::new(future)),
            Err(OpenError::UnsupportedVersion { version: 9, .. })
        ));
    }
}
