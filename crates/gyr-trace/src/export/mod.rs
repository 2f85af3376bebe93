//! Exports of gyr traces to the formats other tools read: Perfetto's protobuf and Chrome's
//! JSON (timeline viewers), and Pablo's SDDF, ASCII or binary (the seeds' analysis tools).
//!
//! # Streaming
//!
//! An export reads each input once, record by record, and writes as it goes through a
//! buffered writer: memory grows with the threads, event types, locks and counters of a trace
//! (small tables), never with its events, so a trace of billions of events exports in the
//! memory of a small one. With [`Options::ordered`] the records first pass through Falcon's
//! [ordering filter](crate::order), which holds back at most [`Options::max_held`] events and
//! keeps the state of at most its default numbers of threads and objects, as the hub's does
//! (what it forgets to stay within them is in [`FileReport::order`]). The exports' own tables
//! (a track per thread and lock, a counter per field) are not bounded: they grow with what the
//! file holds, which its user chose and `gyr trace info` shows, and never with its events.
//!
//! # Several inputs
//!
//! Each input file is one process: [`export_files`] writes them all into one output, each as a
//! process of its own, in the order given. Timestamps in a gyr trace count ns from its
//! process's timestamp 0, which its header anchors to wall-clock time (`start_unix_ns`); the
//! exports place every file on that clock and count from the earliest input's timestamp 0, so
//! that processes line up and times stay small enough for Chrome's doubles (a file without an
//! anchor starts at 0). Wall clocks of different nodes disagree; [`export_inputs_on_clock`]
//! puts every file on the clock a [`ClockCorrection`] gives instead (the reference process's,
//! estimated from messages by [`crate::clock`]).
//!
//! # What becomes what
//!
//! The timeline formats (Perfetto, Chrome) share one mapping, in [`timeline`]: spans become
//! slices, waits for locks, conditions, joins and barriers become slices named after what was
//! waited for, lock holds become slices on a track of their own per thread and lock, causal
//! links (release to next acquisition, signal to wake-up, fork to the child's start, exit to the
//! join, the last arrival at a barrier to each departure) become flows, numeric fields of the
//! program's own event types become counters, and everything else an instant with its fields.
//! SDDF keeps every record as a data record of its type's descriptor, in file order.
//! The table formats (CSV, Parquet: [`table`]) write a directory with one table per event type
//! and typed columns, for data-frame tools; they go through [`export_tables`].
//! OpenTelemetry's OTLP ([`otlp`]) makes spans of span pairs and log records of the events
//! selected, written as OTLP/JSON lines or handed to a sender.

#[cfg(feature = "arrow")]
pub mod arrow;
pub mod chrome;
pub mod csv;
pub mod otlp;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod perfetto;
pub mod sddf;
pub mod table;
pub(crate) mod timeline;

use crate::clock::ClockCorrection;
use crate::order::{Event, OrderFilter, OrderStats, Stall};
use crate::perturbation::{CorrectionStats, Corrector};
use crate::sync_events::SyncDecoder;
use gyr_core::ThreadInfo;
use gyr_core::record::RecordHeader;
use gyr_core::schema::Schema;
use gyr_core::trace::{Item, OpenError, ReadSummary, TraceEnd, TraceHeader, TraceReader};
use std::fmt;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The formats an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Perfetto's protobuf trace (`Trace { repeated TracePacket packet = 1 }`), for
    /// ui.perfetto.dev and the trace processor.
    Perfetto,
    /// Chrome's JSON trace event format (`{"traceEvents": [...]}`), for `chrome://tracing`,
    /// Perfetto and speedscope alike.
    Chrome,
    /// Pablo's self-describing data format, as text (`SDDFA`).
    SddfAscii,
    /// Pablo's self-describing data format, binary (`SDDFB`).
    SddfBinary,
    /// A directory of CSV files, one table per event type ([`table`]).
    Csv,
    /// A directory of Parquet files, one table per event type ([`table`]); needs the feature
    /// `parquet` (see [`PARQUET_BUILT`]).
    Parquet,
    /// OpenTelemetry's OTLP/JSON, one export request per line ([`otlp`]), for a collector's
    /// `otlpjsonfile` receiver.
    OtlpJson,
    /// OpenTelemetry's OTLP sent to a collector over gRPC: converted by [`otlp`], sent by
    /// the caller ([`otlp::export_otlp`]).
    Otlp,
}

impl Format {
    /// The names the command line takes.
    pub const NAMES: [&'static str; 8] = [
        "perfetto",
        "chrome",
        "sddf-ascii",
        "sddf-binary",
        "csv",
        "parquet",
        "otlp-json",
        "otlp",
    ];

    /// The name of the format, as the command line takes it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Perfetto => "perfetto",
            Format::Chrome => "chrome",
            Format::SddfAscii => "sddf-ascii",
            Format::SddfBinary => "sddf-binary",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
            Format::OtlpJson => "otlp-json",
            Format::Otlp => "otlp",
        }
    }

    /// Whether the format writes a directory of tables ([`export_tables`]) rather than a file.
    pub fn is_tables(self) -> bool {
        matches!(self, Format::Csv | Format::Parquet)
    }

    /// Refuses a format this build cannot write, saying how to build it in.
    pub fn check_built(self) -> Result<(), String> {
        if self == Format::Parquet && !PARQUET_BUILT {
            return Err(NO_PARQUET.to_owned());
        }
        Ok(())
    }
}

/// Whether this build writes Parquet (the feature `parquet` of gyr-trace, which gyr-cli
/// forwards).
pub const PARQUET_BUILT: bool = cfg!(feature = "parquet");

const NO_PARQUET: &str = "this gyr was built without Parquet output (it adds the Arrow and Parquet crates to the build): build it with `cargo build --release -p gyr-cli --features parquet`, or export --format csv";

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "perfetto" => Ok(Format::Perfetto),
            "chrome" | "json" => Ok(Format::Chrome),
            "sddf-ascii" | "sddfa" => Ok(Format::SddfAscii),
            "sddf-binary" | "sddfb" => Ok(Format::SddfBinary),
            "csv" => Ok(Format::Csv),
            "parquet" => Ok(Format::Parquet),
            "otlp-json" => Ok(Format::OtlpJson),
            "otlp" => Ok(Format::Otlp),
            _ => Err(format!(
                "unknown format `{s}`: use one of {}",
                Format::NAMES.join(", ")
            )),
        }
    }
}

/// Events the ordering filter holds back at most by default: about 100 MB of typical events.
pub const DEFAULT_MAX_HELD: usize = 1 << 20;

/// How to export.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Run the records through the ordering filter first, so that every event comes after its
    /// causes (a child's start after its fork, an acquisition after the release it waited for).
    pub ordered: bool,
    /// The most events the ordering filter holds back; past that it releases the oldest
    /// without its cause and reports a stall.
    pub max_held: usize,
    /// Remove from each thread's timeline the time monitoring took (see
    /// [`crate::perturbation`]); implies `ordered`, since the correction follows causes.
    pub correct: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ordered: false,
            max_held: DEFAULT_MAX_HELD,
            correct: false,
        }
    }
}

/// How far an export is, for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// The input being read (from 0) and how many there are.
    pub file: usize,
    /// Inputs in all.
    pub files: usize,
    /// Bytes of this input read so far, and its size (0 when unknown).
    pub bytes_read: u64,
    /// The size of this input.
    pub bytes_total: u64,
    /// Records read from every input so far.
    pub records: u64,
    /// Time since the export started.
    pub elapsed: Duration,
}

/// The most stalls of the ordering filter an export keeps to report (all are counted).
pub const KEPT_STALLS: usize = 16;

/// What an export did with one input.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The input's name (its path).
    pub name: String,
    /// What reading it found: chunks, clean end, damage.
    pub summary: ReadSummary,
    /// The ordering filter's counters, when the export was ordered.
    pub order: Option<OrderStats>,
    /// The first stalls of the ordering filter (events released without their cause).
    pub stalls: Vec<Stall>,
    /// What the perturbation correction did, when the export was corrected.
    pub correction: Option<CorrectionStats>,
}

/// What an export did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Records read, all inputs together.
    pub records: u64,
    /// Events written: packets (Perfetto), trace events (Chrome) or data records (SDDF),
    /// descriptions of processes, threads and tracks included.
    pub events: u64,
    /// Per input.
    pub files: Vec<FileReport>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// An input could not be opened as a trace.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Writing the output failed.
    #[error("writing the export failed: {0}")]
    Write(#[from] io::Error),
}

/// One input of an export.
#[derive(Debug)]
pub struct Input<R> {
    name: String,
    reader: TraceReader<R>,
    rank: Option<u32>,
    bytes_total: u64,
    bytes_read: Option<Arc<AtomicU64>>,
}

impl<R: Read + Seek> Input<R> {
    /// An input read from `reader`, named `name` in reports (no progress in bytes).
    pub fn new(name: impl Into<String>, reader: TraceReader<R>) -> Self {
        Input {
            name: name.into(),
            reader,
            rank: None,
            bytes_total: 0,
            bytes_read: None,
        }
    }
}

/// A file being read, counting its bytes for the progress line (on the reader's read-ahead
/// thread, hence atomic).
#[derive(Debug)]
pub struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// The reader of an input file.
pub type FileReader = BufReader<Counting<std::fs::File>>;

/// Runs a trace reader's read-ahead job on a thread of its own (gyr-core starts none).
fn spawn_read_ahead(job: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("gyr-read-ahead".into())
        .spawn(job)
        .map(drop)
}

/// Opens the trace file at `path` as an input, its chunks found on a read-ahead thread once
/// its walk begins ([`TraceReader::read_ahead`]).
pub fn open_input(path: &Path) -> Result<Input<FileReader>, OpenError> {
    let shown = path.display().to_string();
    let io_error = |error| OpenError::Io {
        path: shown.clone(),
        error,
    };
    let file = std::fs::File::open(path).map_err(io_error)?;
    let bytes_total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let read = Arc::new(AtomicU64::new(0));
    let counting = Counting {
        inner: file,
        read: read.clone(),
    };
    let reader = TraceReader::new(BufReader::with_capacity(1 << 20, counting)).map_err(|e| {
        // The reader names its input `<input>`; the user gave a path.
        match e {
            OpenError::Io { error, .. } => OpenError::Io {
                path: shown.clone(),
                error,
            },
            OpenError::NotATrace { .. } => OpenError::NotATrace {
                path: shown.clone(),
            },
            OpenError::UnsupportedVersion { version, .. } => OpenError::UnsupportedVersion {
                path: shown.clone(),
                version,
            },
            OpenError::BadHeader { what, .. } => OpenError::BadHeader {
                path: shown.clone(),
                what,
            },
            other => other,
        }
    })?;
    Ok(Input {
        name: shown,
        // Chunks are found on a second thread while this one decodes them.
        reader: reader.read_ahead(spawn_read_ahead),
        rank: rank_of(path),
        bytes_total,
        bytes_read: Some(read),
    })
}

/// The rank `path`'s `gyr.msg.rank` event gives, if the file has one among its first records
/// (a rank says it once MPI is initialised; the search stops early, so a long trace of anything
/// else costs a bounded read).
fn rank_of(path: &Path) -> Option<u32> {
    let mut reader = TraceReader::open(path).ok()?;
    let mut seen = 0u32;
    let mut rank = None;
    reader.try_for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            seen += 1;
            if s.name == crate::clock::RANK_EVENT
                && let Ok(values) = gyr_core::value::decode(s, record.payload)
                && let Some(i) = s.field_index("rank")
                && let Some(gyr_core::Value::UInt(r)) = values.get(i)
            {
                rank = u32::try_from(*r).ok();
                return ControlFlow::Break(());
            }
        }
        if seen >= 100_000 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    rank
}

/// Exports the trace files at `paths` to `out` in `format`; `progress` is called about once a
/// second while the export runs.
pub fn export_files<W: Write>(
    paths: &[PathBuf],
    format: Format,
    out: W,
    options: Options,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, ExportError> {
    let inputs = paths
        .iter()
        .map(|p| open_input(p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(export_inputs(inputs, format, out, options, progress)?)
}

/// Exports one trace to `out` and returns what was done, for benchmarks: the rate is
/// `report.records` (or `report.events`) over the time this takes. The output is buffered
/// here; give it an unbuffered writer (a `File`, `io::sink()`).
pub fn export<R: Read + Seek, W: Write>(
    reader: TraceReader<R>,
    format: Format,
    out: W,
    options: Options,
) -> io::Result<Report> {
    export_inputs(
        vec![Input::new("<input>", reader)],
        format,
        out,
        options,
        &mut |_| {},
    )
}

/// Exports `inputs` (one process each) to `out` in `format`.
pub fn export_inputs<R: Read + Seek, W: Write>(
    inputs: Vec<Input<R>>,
    format: Format,
    out: W,
    options: Options,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Report> {
    export_inputs_on_clock(inputs, format, out, options, None, progress)
}

/// [`export_inputs`] with every input's timestamps put on one clock by `clock` (one entry per
/// input, in order: the estimate of [`crate::clock`]), counted from the earliest input's
/// timestamp 0 on that clock, instead of placed by their wall-clock starts.
pub fn export_inputs_on_clock<R: Read + Seek, W: Write>(
    inputs: Vec<Input<R>>,
    format: Format,
    out: W,
    options: Options,
    clock: Option<&ClockCorrection>,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Report> {
    let out = io::BufWriter::with_capacity(1 << 20, out);
    match format {
        Format::Perfetto => run(
            inputs,
            &mut timeline::Mapper::new(perfetto::PerfettoWriter::new(out)),
            options,
            clock,
            progress,
        ),
        Format::Chrome => run(
            inputs,
            &mut timeline::Mapper::new(chrome::ChromeWriter::new(out)),
            options,
            clock,
            progress,
        ),
        Format::SddfAscii => run(
            inputs,
            &mut sddf::SddfWriter::new(out, sddf::Encoding::Ascii),
            options,
            clock,
            progress,
        ),
        Format::SddfBinary => run(
            inputs,
            &mut sddf::SddfWriter::new(out, sddf::Encoding::Binary),
            options,
            clock,
            progress,
        ),
        Format::OtlpJson => {
            let mut c =
                otlp::OtlpConverter::new(otlp::JsonLines::new(out), otlp::OtlpOptions::default());
            run(inputs, &mut c, options, clock, progress)
        }
        Format::Otlp => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "otlp sends to a collector, not to a file: use otlp::export_otlp with a sink",
        )),
        Format::Csv | Format::Parquet => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{format} writes a directory of tables, not one file: use export_tables"),
        )),
    }
}

/// Exports `inputs` (one process each) as tables of `format` (CSV or Parquet), one file per
/// event type in the directory `dir`, which must exist; `clock` as in
/// [`export_inputs_on_clock`]. Returns what was read and the tables written.
pub fn export_tables<R: Read + Seek>(
    inputs: Vec<Input<R>>,
    format: Format,
    dir: &Path,
    options: Options,
    clock: Option<&ClockCorrection>,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<(Report, table::TableStats)> {
    match format {
        Format::Csv => {
            let mut w = table::TableWriter::new(csv::CsvSink::new(dir.to_owned()), dir, "csv");
            let report = run(inputs, &mut w, options, clock, progress)?;
            Ok((report, w.stats().clone()))
        }
        #[cfg(feature = "parquet")]
        Format::Parquet => {
            let mut w =
                table::TableWriter::new(parquet::ParquetSink::new(dir.to_owned()), dir, "parquet");
            let report = run(inputs, &mut w, options, clock, progress)?;
            Ok((report, w.stats().clone()))
        }
        #[cfg(not(feature = "parquet"))]
        Format::Parquet => Err(io::Error::new(io::ErrorKind::Unsupported, NO_PARQUET)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{format} writes one file, not a directory of tables: use export_inputs"),
        )),
    }
}

/// The most threads [`arrow_tables`] builds columns on by default: past a few, the walk that
/// feeds them is the bound.
#[cfg(feature = "arrow")]
pub const MAX_BUILDERS: usize = 8;

/// Threads to build a read's columns on: the cores available, at most [`MAX_BUILDERS`].
#[cfg(feature = "arrow")]
pub fn default_builders() -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_BUILDERS)
}

/// Reads `inputs` (one process each) into one Arrow table per event type, in memory, with the
/// columns of [`table`]; `only`, when given, names the event types to keep (the others are
/// read past and neither kept nor counted); `clock` as in [`export_inputs_on_clock`].
///
/// With `threads` above 1 the columns are built on that many threads of their own while this
/// one walks the inputs ([`arrow::ArrowTable`]s hold the same rows in the same order, in
/// batches cut elsewhere); with 1, or when they cannot be started, on this thread.
#[cfg(feature = "arrow")]
pub fn arrow_tables<R: Read + Seek>(
    inputs: Vec<Input<R>>,
    only: Option<&[String]>,
    options: Options,
    clock: Option<&ClockCorrection>,
    threads: usize,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<(Report, table::TableStats, Vec<arrow::ArrowTable>)> {
    std::thread::scope(|scope| {
        let builders = (threads > 1)
            .then(|| arrow::ArrowBuilders::start(scope, threads).ok())
            .flatten();
        match builders {
            Some(sink) => tables_into(sink, inputs, only, options, clock, progress),
            None => tables_into(
                arrow::ArrowSink::default(),
                inputs,
                only,
                options,
                clock,
                progress,
            ),
        }
    })
}

/// [`arrow_tables`] through `sink`.
#[cfg(feature = "arrow")]
pub(crate) fn tables_into<R: Read + Seek, S: arrow::MemoryTables>(
    sink: S,
    inputs: Vec<Input<R>>,
    only: Option<&[String]>,
    options: Options,
    clock: Option<&ClockCorrection>,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<(Report, table::TableStats, Vec<arrow::ArrowTable>)> {
    let mut w = table::TableWriter::new(sink, Path::new(""), "arrow");
    if let Some(only) = only {
        w.keep_only(only);
    }
    let report = run(inputs, &mut w, options, clock, progress)?;
    let stats = w.stats().clone();
    let names = stats.tables.iter().map(|(name, _)| name.clone()).collect();
    Ok((report, stats, w.into_sink().into_tables(names)))
}

/// One input as the consumers see it begin.
#[derive(Debug)]
pub(crate) struct FileStart<'a> {
    /// Its place among the inputs, from 0.
    pub(crate) index: usize,
    /// Its header.
    pub(crate) header: &'a TraceHeader,
    /// Its format version.
    pub(crate) format_version: u32,
    /// What to add to its timestamps to place them on the export's clock.
    pub(crate) offset_ns: u64,
    /// The wall-clock time (ns since the Unix epoch) of the export's clock's 0: the earliest
    /// input's start.
    pub(crate) base_unix_ns: u64,
    /// Its rank in a message-passing job (`gyr.msg.rank`), if it said so early.
    pub(crate) rank: Option<u32>,
    /// Whether its timestamps were put on another process's clock (`--sync`): then they are no
    /// longer its own wall clock's.
    pub(crate) on_clock: bool,
}

/// What an export format does with the items of its inputs, in order.
pub(crate) trait Consumer {
    /// An input begins.
    fn begin_file(&mut self, file: &FileStart<'_>) -> io::Result<()>;
    /// A schema of the current input (before its records).
    fn schema(&mut self, schema: &Schema) -> io::Result<()>;
    /// A thread's description.
    fn thread(&mut self, thread: &ThreadInfo) -> io::Result<()>;
    /// A record of `thread`.
    fn record(&mut self, thread: u64, header: &RecordHeader, payload: &[u8]) -> io::Result<()>;
    /// The end block of a cleanly closed input.
    fn end(&mut self, end: &TraceEnd) -> io::Result<()>;
    /// The current input is done.
    fn end_file(&mut self) -> io::Result<()>;
    /// Every input is done: write what remains and flush.
    fn finish(&mut self) -> io::Result<()>;
    /// Events written so far.
    fn events(&self) -> u64;
}

/// A record held by the ordering filter.
#[derive(Debug)]
struct Held {
    header: RecordHeader,
    payload: Box<[u8]>,
}

/// Reads every input through `consumer`.
fn run<R: Read + Seek, C: Consumer>(
    inputs: Vec<Input<R>>,
    consumer: &mut C,
    options: Options,
    clock: Option<&ClockCorrection>,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<Report> {
    let shift = clock.map_or(0, |c| c.base_shift());
    let started = Instant::now();
    let base = inputs
        .iter()
        .map(|i| i.reader.header().start_unix_ns)
        .filter(|&t| t > 0)
        .min()
        .unwrap_or(0);
    let files = inputs.len();
    let mut report = Report::default();
    let mut last_progress = Instant::now();
    for (index, mut input) in inputs.into_iter().enumerate() {
        let header = input.reader.header().clone();
        // On a clock given, the records carry their times on it and the file no offset.
        let offset_ns = match clock {
            Some(_) => 0,
            None => header.start_unix_ns.saturating_sub(base),
        };
        let retime = |mut h: RecordHeader| {
            if let Some(c) = clock {
                h.timestamp = c.map(index, h.timestamp).saturating_add(shift).max(0) as u64;
            }
            h
        };
        consumer.begin_file(&FileStart {
            index,
            header: &header,
            format_version: input.reader.format_version(),
            offset_ns,
            base_unix_ns: base,
            rank: input.rank,
            on_clock: clock.is_some(),
        })?;
        let mut error: Option<io::Error> = None;
        let mut corrector = options
            .correct
            .then(|| Corrector::new(header.sensor_cost_ns));
        let mut order = (options.ordered || options.correct).then(|| {
            (
                OrderFilter::<Held>::new(options.max_held),
                SyncDecoder::new(),
            )
        });
        let mut stalls = Vec::new();
        let mut tick = 0u32;
        let bytes_total = input.bytes_total;
        let bytes_read = input.bytes_read.clone();
        let name = input.name.clone();
        let records = &mut report.records;
        input.reader.try_for_each_item(|item| {
            let result = match item {
                Item::Schema(s) => {
                    if let Some((_, decoder)) = order.as_mut() {
                        decoder.add_schema(s);
                    }
                    if let Some(c) = corrector.as_mut() {
                        c.add_schema(s);
                    }
                    consumer.schema(s)
                }
                Item::Thread(t) => consumer.thread(t),
                Item::Record { record, .. } => {
                    *records += 1;
                    tick += 1;
                    if tick >= 1 << 16 {
                        tick = 0;
                        if last_progress.elapsed() >= Duration::from_secs(1) {
                            last_progress = Instant::now();
                            progress(&Progress {
                                file: index,
                                files,
                                bytes_read: bytes_read
                                    .as_ref()
                                    .map_or(0, |b| b.load(Ordering::Relaxed)),
                                bytes_total,
                                records: *records,
                                elapsed: started.elapsed(),
                            });
                        }
                    }
                    let header = retime(record.header);
                    match order.as_mut() {
                        None => consumer.record(record.thread, &header, record.payload),
                        Some((filter, decoder)) => {
                            let event = Event {
                                thread: record.thread,
                                kind: decoder.classify(header.type_id, record.payload),
                                data: Held {
                                    header,
                                    payload: record.payload.into(),
                                },
                            };
                            let mut result = Ok(());
                            filter.push(event, &mut |e| {
                                if result.is_ok() {
                                    result = deliver(consumer, corrector.as_mut(), e);
                                }
                            });
                            keep_stalls(&mut stalls, filter.take_stalls());
                            result
                        }
                    }
                }
                Item::End(e) => {
                    // Whatever is still held comes before the end.
                    let mut result = Ok(());
                    if let Some((filter, _)) = order.as_mut() {
                        filter.finish(&mut |e| {
                            if result.is_ok() {
                                result = deliver(consumer, corrector.as_mut(), e);
                            }
                        });
                        keep_stalls(&mut stalls, filter.take_stalls());
                    }
                    result.and_then(|()| consumer.end(e))
                }
            };
            match result {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    error = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(e) = error {
            return Err(e);
        }
        let mut order_stats = None;
        if let Some((mut filter, _)) = order {
            let mut result = Ok(());
            filter.finish(&mut |e| {
                if result.is_ok() {
                    result = deliver(consumer, corrector.as_mut(), e);
                }
            });
            result?;
            keep_stalls(&mut stalls, filter.take_stalls());
            order_stats = Some(filter.stats());
        }
        consumer.end_file()?;
        report.files.push(FileReport {
            name,
            summary: input.reader.summary().clone(),
            order: order_stats,
            stalls,
            correction: corrector.map(|c| c.stats()),
        });
        progress(&Progress {
            file: index,
            files,
            bytes_read: input
                .bytes_read
                .as_ref()
                .map_or(0, |b| b.load(Ordering::Relaxed)),
            bytes_total,
            records: report.records,
            elapsed: started.elapsed(),
        });
    }
    consumer.finish()?;
    report.events = consumer.events();
    Ok(report)
}

/// Writes an event the ordering filter released, corrected if asked.
fn deliver<C: Consumer>(
    consumer: &mut C,
    corrector: Option<&mut Corrector>,
    e: Event<Held>,
) -> io::Result<()> {
    let mut header = e.data.header;
    if let Some(c) = corrector {
        c.correct(e.thread, &mut header, &e.data.payload);
    }
    consumer.record(e.thread, &header, &e.data.payload)
}

fn keep_stalls(kept: &mut Vec<Stall>, new: Vec<Stall>) {
    for s in new {
        if kept.len() < KEPT_STALLS {
            kept.push(s);
        }
    }
}

/// Appends `v` in decimal to `out`, without going through `fmt`.
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends `v` in decimal to `out`.
#[inline]
pub(crate) fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_name() {
        for n in Format::NAMES {
            assert_eq!(n.parse::<Format>().unwrap().name(), n);
        }
        assert!("svg".parse::<Format>().unwrap_err().contains("perfetto"));
    }

    #[test]
    fn decimal() {
        let mut v = Vec::new();
        push_u64(&mut v, 0);
        v.push(b' ');
        push_i64(&mut v, -1234567890123);
        v.push(b' ');
        push_u64(&mut v, u64::MAX);
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "0 -1234567890123 18446744073709551615"
        );
    }
}
