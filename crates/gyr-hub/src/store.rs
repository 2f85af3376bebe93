//! Storage: everything the hub receives, written to trace files in gyr's own format (one file
//! per program, `<program>-<pid>-<start>.gyr`), which `gyr trace`, `gyr hub --replay` and any
//! reader of the format open like a program's own trace.
//!
//! Writing happens on a thread of its own behind a bounded queue, so a slow disk never slows
//! the hub's analyses: a batch that finds the queue full is dropped from the file and counted,
//! the count is written in the file's end block (and per thread as `gyr.lost` records, as a
//! program's own trace does), and the hub shows it. A file is always
//! readable on its own: the first batch queued for a program, and the first after any drop,
//! carries the program's whole description (schemas and threads), and the file is closed only
//! once the program is gone and its last stream has delivered its last batch.

use crate::program::Process;
use gyr_core::record::Records;
use gyr_core::{Schema, TraceEnd, TraceHeader, TraceWriter};
use gyr_proto::v1;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes of records queued for the writer thread, by default: about a second of a program
/// emitting 1 M events/s. Bounded in bytes, not batches, because a batch may hold one record
/// or a megabyte of them: the hub's memory must not depend on how programs batch.
pub const DEFAULT_RECORD_QUEUE_BYTES: usize = 64 << 20;

/// What a batch weighs in the writer's queue: its records (and a little for the rest).
fn batch_bytes(b: &v1::EventBatch) -> usize {
    64 + b.blocks.iter().map(|k| 32 + k.records.len()).sum::<usize>()
}

/// Output buffer of each file: trace chunks are about 1 MiB, written in few large writes.
const FILE_BUFFER: usize = 1 << 20;

/// A program: its pid and start time.
type Key = (u32, u64);

/// A program's schemas and threads, as its stream gave them so far (the schemas as the hub
/// read them once on the way in).
struct Description {
    schemas: Vec<Schema>,
    threads: Vec<v1::ThreadInfo>,
}

enum Msg {
    Batch {
        key: Key,
        header: Arc<TraceHeader>,
        /// The whole description, when the writer may lack some of it.
        description: Option<Description>,
        /// The event types this batch described for the first time, as the hub read them.
        schemas: Vec<Schema>,
        batch: Arc<v1::EventBatch>,
        /// Events of this program missing from the file before this batch.
        lost: u64,
        /// The dropped ones, by thread, for `gyr.lost` records.
        ranges: Vec<Lost>,
    },
    /// The program is gone and its streams ended: its file is closed.
    Ended {
        key: Key,
        header: Arc<TraceHeader>,
        description: Option<Description>,
        lost: u64,
        ranges: Vec<Lost>,
    },
}

/// Events of a thread dropped from the file: sequence numbers `from..=to`, the last at `ts`.
#[derive(Debug)]
struct Lost {
    thread: u64,
    count: u64,
    from: u64,
    to: u64,
    ts: u64,
}

/// What the hub side knows of a program's file.
#[derive(Debug)]
struct Program {
    header: Arc<TraceHeader>,
    /// Events missing from the file and not yet told to the writer: dropped here, or lost on
    /// the way to the hub in a batch dropped here.
    lost: u64,
    ranges: Vec<Lost>,
    /// Whether the writer has been given the description since the last drop.
    described: bool,
}

/// The writer thread's handle.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    tx: Option<Sender<Msg>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Bytes of records queued and not yet written, and how many may be.
    queued: Arc<AtomicUsize>,
    capacity: usize,
    programs: Mutex<HashMap<Key, Program>>,
    /// Events received but not written (dropped from the queue, or their file failed).
    pub(crate) dropped: Arc<AtomicU64>,
    pub(crate) written: Arc<AtomicU64>,
}

impl Store {
    /// Starts writing into `dir` (created if missing), with at most `capacity` bytes of
    /// records queued.
    pub(crate) fn start(dir: &Path, capacity: usize) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        let probe = dir.join(".gyr-hub-write-test");
        File::create(&probe)?;
        let _ = std::fs::remove_file(&probe);
        let (tx, rx) = channel();
        let written = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicUsize::new(0));
        let counts = Counts {
            written: written.clone(),
            dropped: dropped.clone(),
            queued: queued.clone(),
        };
        let d = dir.to_owned();
        let thread = std::thread::Builder::new()
            .name("gyr-hub-store".into())
            .spawn(move || writer(&d, rx, &counts))?;
        Ok(Store {
            dir: dir.to_owned(),
            tx: Some(tx),
            thread: Some(thread),
            queued,
            capacity,
            programs: Default::default(),
            dropped,
            written,
        })
    }

    /// Where the files go.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn programs(&self) -> MutexGuard<'_, HashMap<Key, Program>> {
        self.programs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a batch just taken in from `p` (after `p` learnt its schemas and threads),
    /// with the schemas it described for the first time; never waits.
    pub(crate) fn batch(&self, p: &Process, schemas: Vec<Schema>, batch: Arc<v1::EventBatch>) {
        let Some(tx) = &self.tx else { return };
        let key = (p.pid, p.started_unix_ns);
        let mut programs = self.programs();
        let prog = programs.entry(key).or_insert_with(|| Program {
            header: Arc::new(header(p)),
            lost: 0,
            ranges: Vec::new(),
            described: false,
        });
        // Only this function adds to `queued`, under the lock: the check cannot be overtaken.
        let size = batch_bytes(&batch);
        let sent = self.queued.load(Ordering::Acquire) < self.capacity && {
            self.queued.fetch_add(size, Ordering::AcqRel);
            let msg = Msg::Batch {
                key,
                header: prog.header.clone(),
                description: (!prog.described).then(|| description(p)),
                schemas,
                batch: batch.clone(),
                lost: prog.lost,
                ranges: std::mem::take(&mut prog.ranges),
            };
            match tx.send(msg) {
                Ok(()) => true,
                Err(e) => {
                    self.queued.fetch_sub(size, Ordering::AcqRel);
                    if let Msg::Batch { ranges, .. } = e.0 {
                        prog.ranges = ranges;
                    }
                    false
                }
            }
        };
        if sent {
            prog.lost = 0;
            prog.described = true;
        } else {
            let mut n = 0;
            for b in &batch.blocks {
                let Some(sc) = scan(&b.records).filter(|sc| sc.n > 0) else {
                    continue;
                };
                n += sc.n;
                match prog.ranges.iter_mut().find(|r| r.thread == b.thread) {
                    // The thread's sequence numbers follow on: one range.
                    Some(r) if sc.first_seq == r.to + 1 => {
                        r.count += sc.n;
                        r.to = sc.last_seq;
                        r.ts = sc.end;
                    }
                    _ => prog.ranges.push(Lost {
                        thread: b.thread,
                        count: sc.n,
                        from: sc.first_seq,
                        to: sc.last_seq,
                        ts: sc.end,
                    }),
                }
            }
            prog.lost += n + batch.lost;
            // The dropped batch may have brought schemas or threads the writer has not seen.
            prog.described = false;
            self.dropped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Program `p` is gone and its streams delivered their last batch: its file is closed,
    /// with every loss not yet told to the writer.
    pub(crate) fn ended(&self, p: &Process) {
        let mut programs = self.programs();
        if let Some(mut prog) = programs.remove(&(p.pid, p.started_unix_ns)) {
            self.end(&mut prog, (p.pid, p.started_unix_ns), Some(p));
        }
    }

    fn end(&self, prog: &mut Program, key: Key, p: Option<&Process>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Ended {
                key,
                header: prog.header.clone(),
                description: p.filter(|_| !prog.described).map(description),
                lost: prog.lost,
                ranges: std::mem::take(&mut prog.ranges),
            });
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Programs still running when the hub stops: their files are closed with their losses.
        let open: Vec<(Key, Program)> = self.programs().drain().collect();
        for (key, mut prog) in open {
            self.end(&mut prog, key, None);
        }
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The trace header the hub writes for `p`.
fn header(p: &Process) -> TraceHeader {
    TraceHeader {
        pid: p.pid,
        host: p.host.clone(),
        command_line: p.command_line.clone(),
        start_unix_ns: p.clock_zero_unix_ns,
        clock_source: "ns".into(),
        ticks_per_second: 1e9,
        sensor_cost_ns: 0.0,
        policy: "unknown (recorded by a hub)".into(),
        gyr_version: env!("CARGO_PKG_VERSION").into(),
    }
}

fn description(p: &Process) -> Description {
    Description {
        schemas: p.schemas.clone(),
        threads: p.wire_threads.values().cloned().collect(),
    }
}

/// A block's records: how many, the latest timestamp, the first and last sequence numbers.
#[derive(Default)]
struct Scan {
    n: u64,
    end: u64,
    first_seq: u64,
    last_seq: u64,
}

/// Reads a block's record headers; `None` if the block is malformed (it is then neither
/// written nor counted, as the hub does not take it in either).
fn scan(records: &[u8]) -> Option<Scan> {
    let mut sc = Scan::default();
    for r in Records::new(0, records) {
        let h = r.ok()?.header;
        sc.end = sc.end.max(h.timestamp);
        if sc.n == 0 {
            sc.first_seq = h.seq;
        }
        sc.last_seq = h.seq;
        sc.n += 1;
    }
    Some(sc)
}

/// Counters shared with the hub.
struct Counts {
    written: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    queued: Arc<AtomicUsize>,
}

struct Open {
    writer: TraceWriter<BufWriter<File>>,
    path: PathBuf,
    schemas: HashSet<u32>,
    threads: HashSet<u64>,
    /// The program's `gyr.lost` type, once the file holds it.
    lost_type: Option<u32>,
    records: u64,
    lost: u64,
    end_ns: u64,
}

fn file_name(h: &TraceHeader, n: u32) -> String {
    let prog = h
        .command_line
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    let prog: String = prog
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let start = h.start_unix_ns / 1_000_000_000;
    match n {
        0 => format!("{prog}-{}-{start}.gyr", h.pid),
        n => format!("{prog}-{}-{start}-{n}.gyr", h.pid),
    }
}

/// Opens a new file for a program, never over an existing one (a program that comes back
/// after its file was closed gets a file of its own).
fn create(dir: &Path, header: &TraceHeader) -> std::io::Result<Open> {
    let mut n = 0;
    let (file, path) = loop {
        let path = dir.join(file_name(header, n));
        match File::options().write(true).create_new(true).open(&path) {
            Ok(f) => break (f, path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", path.display()),
                ));
            }
        }
    };
    let writer = TraceWriter::new(BufWriter::with_capacity(FILE_BUFFER, file), header)?;
    Ok(Open {
        writer,
        path,
        schemas: HashSet::new(),
        threads: HashSet::new(),
        lost_type: None,
        records: 0,
        lost: 0,
        end_ns: 0,
    })
}

fn close(o: Open) {
    let end = TraceEnd {
        end_ns: o.end_ns,
        records: o.records,
        lost: o.lost,
        filtered: 0,
    };
    if let Err(e) = o.writer.finish(&end) {
        eprintln!("gyr hub: cannot finish {}: {e}", o.path.display());
    }
}

fn writer(dir: &Path, rx: Receiver<Msg>, counts: &Counts) {
    let mut open: HashMap<Key, Open> = HashMap::new();
    // Programs whose file could not be written, until they end.
    let mut failed: HashSet<Key> = HashSet::new();
    // Whether program `key` has a file open, opening it if need be.
    let file = |open: &mut HashMap<Key, Open>,
                failed: &mut HashSet<Key>,
                key: Key,
                header: &TraceHeader| {
        if failed.contains(&key) {
            return false;
        }
        if let std::collections::hash_map::Entry::Vacant(v) = open.entry(key) {
            match create(dir, header) {
                Ok(o) => {
                    v.insert(o);
                }
                Err(e) => {
                    eprintln!(
                        "gyr hub: cannot write into {}: {e}; program {} is not recorded",
                        dir.display(),
                        key.0
                    );
                    failed.insert(key);
                    return false;
                }
            }
        }
        true
    };
    for msg in rx {
        match msg {
            Msg::Ended {
                key,
                header,
                description,
                lost,
                ranges,
            } => {
                // A program all of whose batches were dropped still gets a file saying so.
                if (lost > 0 || open.contains_key(&key))
                    && file(&mut open, &mut failed, key, &header)
                {
                    let mut o = open.remove(&key).expect("opened above");
                    o.lost += lost;
                    match describe(&mut o, description.as_ref())
                        .and_then(|()| write_lost(&mut o, &ranges))
                    {
                        Ok(()) => close(o),
                        Err(e) => eprintln!("gyr hub: cannot finish {}: {e}", o.path.display()),
                    }
                }
                failed.remove(&key);
            }
            Msg::Batch {
                key,
                header,
                description,
                schemas,
                batch,
                lost,
                ranges,
            } => {
                counts
                    .queued
                    .fetch_sub(batch_bytes(&batch), Ordering::AcqRel);
                if !file(&mut open, &mut failed, key, &header) {
                    counts.dropped.fetch_add(
                        batch
                            .blocks
                            .iter()
                            .filter_map(|b| scan(&b.records))
                            .map(|sc| sc.n)
                            .sum(),
                        Ordering::Relaxed,
                    );
                    continue;
                }
                let o = open.get_mut(&key).expect("opened above");
                o.lost += lost + batch.lost;
                let r = describe(o, description.as_ref())
                    .and_then(|()| write_lost(o, &ranges))
                    .and_then(|()| write_batch(o, &schemas, &batch, &counts.written));
                if let Err(e) = r {
                    eprintln!(
                        "gyr hub: cannot write {}: {e}; recording of program {} stops",
                        o.path.display(),
                        key.0
                    );
                    failed.insert(key);
                    open.remove(&key);
                }
            }
        }
    }
    for (_, o) in open.drain() {
        close(o);
    }
}

/// Writes the schemas and threads the file does not hold yet.
fn describe(o: &mut Open, d: Option<&Description>) -> std::io::Result<()> {
    let Some(d) = d else { return Ok(()) };
    write_description(o, &d.schemas, &d.threads)
}

fn write_description(
    o: &mut Open,
    schemas: &[Schema],
    threads: &[v1::ThreadInfo],
) -> std::io::Result<()> {
    for s in schemas {
        if o.schemas.insert(s.id) {
            if *s == gyr_core::lost_schema(s.id) {
                o.lost_type = Some(s.id);
            }
            o.writer.schema(s)?;
        }
    }
    for t in threads {
        if o.threads.insert(t.id) {
            o.writer.thread(&gyr_proto::stream::thread(t))?;
        }
    }
    Ok(())
}

fn write_batch(
    o: &mut Open,
    schemas: &[Schema],
    b: &v1::EventBatch,
    written: &AtomicU64,
) -> std::io::Result<()> {
    write_description(o, schemas, &b.threads)?;
    for block in &b.blocks {
        let Some(sc) = scan(&block.records) else {
            continue;
        };
        o.writer.records(block.thread, &block.records)?;
        o.end_ns = o.end_ns.max(sc.end);
        o.records += sc.n;
        written.fetch_add(sc.n, Ordering::Relaxed);
    }
    Ok(())
}

/// Reports dropped events as the program's own monitors do, a `gyr.lost` record each range,
/// in the block of the thread that lost them (its sequence number the last one lost), when
/// the file holds the program's `gyr.lost` schema.
fn write_lost(o: &mut Open, ranges: &[Lost]) -> std::io::Result<()> {
    let Some(id) = o.lost_type else {
        return Ok(());
    };
    let mut buf = Vec::with_capacity(64);
    // A thread the file does not describe cannot hold records.
    for r in ranges.iter().filter(|r| o.threads.contains(&r.thread)) {
        let mut payload = [0u8; 32];
        for (i, v) in [r.thread, r.count, r.from, r.to].into_iter().enumerate() {
            payload[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        buf.clear();
        gyr_core::record::push_record(&mut buf, id, r.ts, r.to, 0, &payload);
        o.writer.records(r.thread, &buf)?;
        o.records += 1;
        o.end_ns = o.end_ns.max(r.ts);
    }
    Ok(())
}
