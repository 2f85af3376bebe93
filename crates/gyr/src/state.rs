//! The running runtime's state, shared by the runtime guard, the monitors and every thread
//! buffer: its configuration, its rings and monitors, its sinks and counters, and the one
//! runtime of the process.
//!
//! This module sits below everything that reads the state (the producer on application
//! threads, the monitors, the runtime's start and end), so that none of them names another to
//! reach it.

use crate::batch::Stats;
use crate::config::Config;
use crate::primitives::lock;
use crate::ring::Ring;
use crate::sink::SinkSet;
use gyr_core::{ThreadInfo, TraceHeader};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// Bumped at every start and shutdown: a thread buffer from another epoch is stale.
pub(crate) static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The process's running runtime, if any.
pub(crate) static RUNTIME: Mutex<Option<Arc<Shared>>> = Mutex::new(None);
/// Events emitted while a runtime ran that could not reach a ring (re-entrant or exiting thread).
pub(crate) static UNRECORDED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn count_unrecorded() {
    if RUNTIME.try_lock().map(|r| r.is_some()).unwrap_or(true) {
        UNRECORDED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Set in the child of a `fork()` by [`forget_after_fork`]: the runtime is the parent's.
pub(crate) static FORKED: AtomicBool = AtomicBool::new(false);

pub(crate) fn current() -> Option<Arc<Shared>> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// In the child of a `fork()`: no runtime is current any more, and a ring that fills drops
/// instead of waiting (no monitor drains it in the child). Takes no lock that a thread the
/// child does not have may hold.
pub(crate) fn forget_after_fork() {
    FORKED.store(true, Ordering::SeqCst);
    if let Ok(runtime) = RUNTIME.try_lock()
        && let Some(shared) = &*runtime
    {
        shared.failed.store(true, Ordering::SeqCst);
    }
}

/// A service the runtime stops at its end, once the last events have reached the sinks (the
/// steering server). Named here by what the runtime does with it, so that the state need not
/// know the server.
pub(crate) trait Stop: Send + std::fmt::Debug {
    /// Stops the service; returns when it has.
    fn stop(&mut self);
}

/// Every thread's ring: shared with the server's fan-out, which reads the threads' roles.
pub(crate) type Rings = Arc<Mutex<Vec<Arc<RingEntry>>>>;

/// State shared by the runtime guard, the monitors and every thread buffer.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) epoch: u64,
    pub(crate) config: Config,
    pub(crate) header: TraceHeader,
    pub(crate) rings: Rings,
    pub(crate) monitors: Mutex<Vec<Arc<MonitorSlot>>>,
    pub(crate) sinks: Mutex<SinkSet>,
    pub(crate) stopping: AtomicBool,
    /// A monitor failed: Block degrades to Drop so the program is never blocked for good.
    pub(crate) failed: AtomicBool,
    pub(crate) next_thread: AtomicU64,
    pub(crate) flush_requested: AtomicU64,
    pub(crate) flush_done: (Mutex<u64>, Condvar),
    pub(crate) stats: Stats,
    /// Set by the one shutdown that ends this runtime, whoever asks first.
    pub(crate) ended: AtomicBool,
    /// The steering server, stopped after the last events reached its streams.
    pub(crate) server: Mutex<Option<Box<dyn Stop>>>,
    pub(crate) last_spawn: Mutex<Instant>,
}

/// One thread's ring, as the monitors see it.
#[derive(Debug)]
pub(crate) struct RingEntry {
    pub(crate) ring: Ring,
    pub(crate) info: ThreadInfo,
    /// Index of the monitor that drains this ring.
    pub(crate) monitor: AtomicUsize,
    pub(crate) consumer: Mutex<Consumer>,
    /// Ticks the producer has spent blocked on this ring.
    pub(crate) blocked_ticks: AtomicU64,
    /// The role and index the thread named last (`gyr::thread::set_role`), for consumers that
    /// attach after its `gyr.thread.role` record went by.
    pub(crate) role: Mutex<Option<(String, u64)>>,
}

impl RingEntry {
    pub(crate) fn monitor(&self) -> usize {
        self.monitor.load(Ordering::Relaxed)
    }
}

/// The consumer side of one ring; owned by whichever monitor drains the ring.
#[derive(Debug, Default)]
pub(crate) struct Consumer {
    pub(crate) head: usize,
    /// Every sequence number up to this one has been delivered or reported lost.
    pub(crate) accounted: u64,
    pub(crate) announced: bool,
    pub(crate) blocked_seen: u64,
}

/// A running monitor, as the runtime sees it.
#[derive(Debug)]
pub(crate) struct MonitorSlot {
    pub(crate) thread: Thread,
    pub(crate) join: Mutex<Option<JoinHandle<()>>>,
    /// Bytes drained per second, smoothed: the monitor's load.
    pub(crate) load: AtomicU64,
    /// The last flush request this monitor has completed a pass for.
    pub(crate) flushed: AtomicU64,
}

/// The name of a thread Rust's std knows no name for: the threads of C, Fortran and Python
/// programs, and the first thread of a program whose `main` is not Rust's. The process's first
/// thread is `main`; a thread the program named (`pthread_setname_np`, Python 3.14's
/// threading) keeps that name; one still carrying the process's own name, which threads
/// inherit, is `thread-<id>`, so that unnamed threads stay apart.
fn foreign_thread_name(id: u64, os_tid: u64) -> String {
    if os_tid != 0 && os_tid == u64::from(std::process::id()) {
        return "main".to_owned();
    }
    let comm = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim_end_matches('\n').to_owned())
    };
    match (comm("/proc/thread-self/comm"), comm("/proc/self/comm")) {
        (Some(own), process) if !own.is_empty() && Some(&own) != process.as_ref() => own,
        _ => format!("thread-{id}"),
    }
}

pub(crate) fn os_tid() -> u64 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

impl Shared {
    /// Gives the calling thread a ring, assigned to the least-loaded monitor (Falcon).
    /// `id` is the one reserved for the thread when it was forked ([`Shared::reserve_thread`]),
    /// if it was; `name` the one the program gave it ([`crate::thread::set_name`]), if any,
    /// which goes before std's.
    pub(crate) fn register_thread(&self, id: Option<u64>, name: Option<String>) -> Arc<RingEntry> {
        let id = id.unwrap_or_else(|| self.reserve_thread());
        let thread = std::thread::current();
        let os_tid = os_tid();
        let name = name
            .or_else(|| thread.name().map(str::to_owned))
            .unwrap_or_else(|| foreign_thread_name(id, os_tid));
        let monitor = self.least_loaded();
        let entry = Arc::new(RingEntry {
            ring: Ring::new(self.config.ring_capacity),
            info: ThreadInfo { id, name, os_tid },
            monitor: AtomicUsize::new(monitor),
            consumer: Mutex::new(Consumer::default()),
            blocked_ticks: AtomicU64::new(0),
            role: Mutex::new(None),
        });
        lock(&self.rings).push(entry.clone());
        entry
    }

    /// A thread id for a thread about to be created, so that its parent's fork event can name
    /// it before the child has run.
    pub(crate) fn reserve_thread(&self) -> u64 {
        self.next_thread.fetch_add(1, Ordering::Relaxed)
    }

    /// The monitor a new thread should go to: least load, then fewest rings.
    pub(crate) fn least_loaded(&self) -> usize {
        let monitors = lock(&self.monitors);
        let rings = lock(&self.rings);
        (0..monitors.len())
            .min_by_key(|&i| {
                let n = rings.iter().filter(|e| e.monitor() == i).count();
                (monitors[i].load.load(Ordering::Relaxed), n)
            })
            .unwrap_or(0)
    }

    pub(crate) fn wake_monitor(&self, index: usize) {
        if let Some(m) = lock(&self.monitors).get(index) {
            m.thread.unpark();
        }
    }

    pub(crate) fn wake_all(&self) {
        for m in lock(&self.monitors).iter() {
            m.thread.unpark();
        }
    }

    /// Asks every monitor for a full pass and waits (at most `timeout`) until each has made one
    /// and the sinks are flushed. Returns whether that happened in time.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        let target = self.flush_requested.fetch_add(1, Ordering::SeqCst) + 1;
        self.wake_all();
        let deadline = Instant::now() + timeout;
        let (m, cv) = &self.flush_done;
        let mut done = lock(m);
        while *done < target {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            done = cv
                .wait_timeout(done, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        true
    }
}
