//! Storage: everything the hub receives, written to trace files in gyr's own format (one file
//! per program, `<program>-<pid>-<start>.gyr`), which `gyr trace`, `gyr hub --replay` and any
//! reader of the format open like a program's own trace.
//!
//! Writing happens on a thread of its own behind a bounded queue, so a slow disk never slows
//! the hub's analyses: a batch that finds the queue full is dropped from the file and counted,
//! the count is written in the file's end block, and the hub shows it.

use crate::model::Process;
use gyr_core::{TraceEnd, TraceHeader, TraceWriter};
use gyr_proto::v1;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Batches queued for the writer thread.
const QUEUE: usize = 4096;

type Key = (u32, u64);

enum Msg {
    Batch {
        key: Key,
        header: Box<TraceHeader>,
        batch: Arc<v1::EventBatch>,
        /// Events of this program dropped from the file before this batch.
        dropped: u64,
    },
    Ended(Key),
}

/// The writer thread's handle.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    tx: Option<SyncSender<Msg>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Per program: events dropped and not yet reported to the writer; and in total.
    pending_drops: std::sync::Mutex<HashMap<Key, u64>>,
    pub(crate) dropped: Arc<AtomicU64>,
    pub(crate) written: Arc<AtomicU64>,
}

impl Store {
    /// Starts writing into `dir` (created if missing).
    pub(crate) fn start(dir: &Path) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        let probe = dir.join(".gyr-hub-write-test");
        File::create(&probe)?;
        let _ = std::fs::remove_file(&probe);
        let (tx, rx) = sync_channel(QUEUE);
        let written = Arc::new(AtomicU64::new(0));
        let w = written.clone();
        let d = dir.to_owned();
        let thread = std::thread::Builder::new()
            .name("gyr-hub-store".into())
            .spawn(move || writer(&d, rx, &w))?;
        Ok(Store {
            dir: dir.to_owned(),
            tx: Some(tx),
            thread: Some(thread),
            pending_drops: Default::default(),
            dropped: Arc::new(AtomicU64::new(0)),
            written,
        })
    }

    /// Where the files go.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Queues a batch just taken in from `p`; never waits.
    pub(crate) fn batch(&self, p: &Process, batch: Arc<v1::EventBatch>) {
        let Some(tx) = &self.tx else { return };
        let key = (p.pid, p.started_unix_ns);
        let mut drops = self.pending_drops.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = drops.get(&key).copied().unwrap_or(0);
        // After a drop, the next batch carries the program's whole description again.
        let batch = if dropped > 0 {
            let mut b = (*batch).clone();
            b.schemas = p.wire_schemas.clone();
            b.threads = p.wire_threads.clone();
            Arc::new(b)
        } else {
            batch
        };
        let msg = Msg::Batch {
            key,
            header: Box::new(TraceHeader {
                pid: p.pid,
                host: p.host.clone(),
                command_line: p.command_line.clone(),
                start_unix_ns: p.clock_zero_unix_ns,
                clock_source: "ns".into(),
                ticks_per_second: 1e9,
                sensor_cost_ns: 0.0,
                policy: "unknown (recorded by a hub)".into(),
                gyr_version: env!("CARGO_PKG_VERSION").into(),
            }),
            batch: batch.clone(),
            dropped,
        };
        match tx.try_send(msg) {
            Ok(()) => {
                drops.remove(&key);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let n: u64 = batch
                    .blocks
                    .iter()
                    .map(|b| gyr_core::record::Records::new(b.thread, &b.records).count() as u64)
                    .sum();
                *drops.entry(key).or_default() += n;
                self.dropped.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// The program ended: its file is closed.
    pub(crate) fn ended(&self, pid: u32, started_unix_ns: u64) {
        if let Some(tx) = &self.tx {
            // Blocking here is fine: it happens once per program, off the event path.
            let _ = tx.send(Msg::Ended((pid, started_unix_ns)));
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Open {
    writer: TraceWriter<BufWriter<File>>,
    path: PathBuf,
    schemas: HashSet<u32>,
    threads: HashSet<u64>,
    records: u64,
    lost: u64,
    end_ns: u64,
}

fn file_name(h: &TraceHeader) -> String {
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
    format!("{prog}-{}-{}.gyr", h.pid, h.start_unix_ns / 1_000_000_000)
}

fn writer(dir: &Path, rx: Receiver<Msg>, written: &AtomicU64) {
    let mut open: HashMap<Key, Open> = HashMap::new();
    let mut failed: HashSet<Key> = HashSet::new();
    let close = |o: Open| {
        let end = TraceEnd {
            end_ns: o.end_ns,
            records: o.records,
            lost: o.lost,
            filtered: 0,
        };
        if let Err(e) = o.writer.finish(&end) {
            eprintln!("gyr hub: cannot finish {}: {e}", o.path.display());
        }
    };
    for msg in rx {
        match msg {
            Msg::Ended(key) => {
                if let Some(o) = open.remove(&key) {
                    close(o);
                }
            }
            Msg::Batch {
                key,
                header,
                batch,
                dropped,
            } => {
                if failed.contains(&key) {
                    continue;
                }
                let o = match open.entry(key) {
                    std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let path = dir.join(file_name(&header));
                        match File::create(&path)
                            .and_then(|f| TraceWriter::new(BufWriter::new(f), &header))
                        {
                            Ok(writer) => v.insert(Open {
                                writer,
                                path,
                                schemas: HashSet::new(),
                                threads: HashSet::new(),
                                records: 0,
                                lost: 0,
                                end_ns: 0,
                            }),
                            Err(e) => {
                                eprintln!(
                                    "gyr hub: cannot write {}: {e}; program {} is not recorded",
                                    path.display(),
                                    key.0
                                );
                                failed.insert(key);
                                continue;
                            }
                        }
                    }
                };
                o.lost += dropped + batch.lost;
                if let Err(e) = write_batch(o, &batch, written) {
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

fn write_batch(o: &mut Open, b: &v1::EventBatch, written: &AtomicU64) -> std::io::Result<()> {
    for s in &b.schemas {
        if o.schemas.insert(s.id)
            && let Some(s) = gyr_proto::events::schema(s)
        {
            o.writer.schema(&s)?;
        }
    }
    for t in &b.threads {
        if o.threads.insert(t.id) {
            o.writer.thread(&gyr_proto::events::thread(t))?;
        }
    }
    for block in &b.blocks {
        if gyr_core::record::Records::validate(&block.records).is_err() {
            continue;
        }
        let mut n = 0;
        for r in gyr_core::record::Records::new(block.thread, &block.records).flatten() {
            o.end_ns = o.end_ns.max(r.header.timestamp);
            n += 1;
        }
        o.writer.records(block.thread, &block.records)?;
        o.records += n;
        written.fetch_add(n, Ordering::Relaxed);
    }
    Ok(())
}
