//! Local monitors: the threads that drain the per-thread rings into the sinks.
//!
//! # What a local monitor does
//!
//! Falcon ran one or more local monitoring threads beside the application, each draining the
//! event buffers of a group of application threads. gyr's monitors do the same, in passes:
//! drain each assigned ring in one go, convert timestamps to ns, turn sequence gaps into
//! `gyr.lost` events, read due sampling sensors, and hand the batch to the sinks.
//!
//! A monitor never spins: after a pass that found little, it parks for the poll interval (the
//! bound on delivery delay). A producer wakes it early when its ring passes half full, or when
//! it is blocked on a full one.
//!
//! While the monitor has a core of its own (fewer of its threads record than the process may
//! use cores, and the machine's runnable threads, itself aside, leave a core idle: see
//! [`Spare`]), a monitor parks for less than the poll interval: about as long as they take to
//! write [`DRAIN_TARGET`] bytes (never less than [`MIN_PARK`]). A pass then copies a little at
//! a time instead of megabytes at once every poll interval, which disturbs the recording
//! threads less: with a 4 MiB ring and one thread recording a lock and an unlock every 50 ns,
//! the pair cost 3-5 ns less (x86-64 virtual machine, two cores). When busy threads fill the
//! cores (this program's, or other processes' such as the other ranks of an MPI job on the
//! node), each wake-up would take a core from one of them, so the monitor parks as before; an
//! idle program's monitor still wakes once per poll interval.
//!
//! # Scaling
//!
//! Each monitor measures its lag (the age of the oldest event it drained). When the lag stays
//! above the limit for several passes, or producers block, another monitor is started (up to the
//! maximum), takes half of the busiest monitor's rings, and new threads go to the least-loaded
//! monitor.

use crate::batch::Batch;
use crate::clock::clock;
use crate::primitives::lock;
use crate::state::{MonitorSlot, RingEntry, Shared, os_tid};
use gyr_core::ThreadInfo;
use gyr_core::record::{RECORD_HEADER_LEN, push_record, stride};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The piece of a drained run copied and converted at a time: small enough to stay in the
/// monitor core's L2 cache between the copy and the conversion.
const CONVERT_PIECE: usize = 64 << 10;

/// What a pass should find, about, while threads record fast (see the module doc).
const DRAIN_TARGET: usize = 192 << 10;

/// The shortest park between passes.
const MIN_PARK: Duration = Duration::from_micros(50);

/// How long to park after a pass that found `bytes` written in `since` (the time since the
/// pass before it ended): as long as [`DRAIN_TARGET`] takes at that rate, between [`MIN_PARK`]
/// and `poll`.
fn park_for(bytes: usize, since: Duration, poll: Duration) -> Duration {
    if bytes == 0 {
        return poll;
    }
    let per_target = since.mul_f64(DRAIN_TARGET as f64 / bytes as f64);
    per_target.clamp(MIN_PARK.min(poll), poll)
}

/// Whether the machine has a core to spare for the monitor: the count of runnable threads in
/// `/proc/loadavg` (the calling thread included) against the online cores, looked at most once
/// per [`Spare::EVERY`]. Without `/proc`, never.
struct Spare {
    cores: usize,
    checked: Option<Instant>,
    spare: bool,
}

impl Spare {
    const EVERY: Duration = Duration::from_millis(50);

    fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        Spare {
            cores: usize::try_from(online).unwrap_or(1).max(1),
            checked: None,
            spare: false,
        }
    }

    fn now(&mut self, now: Instant) -> bool {
        if self.checked.is_none_or(|t| now - t >= Self::EVERY) {
            self.checked = Some(now);
            self.spare = std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| runnable(&l))
                .is_some_and(|running| running.saturating_sub(1) < self.cores);
        }
        self.spare
    }
}

/// The runnable threads of a `/proc/loadavg` line (`0.87 1.33 1.49 2/77 13895`: 2).
fn runnable(loadavg: &str) -> Option<usize> {
    loadavg
        .split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// The size from which a pass hands its batch to the sinks before draining on.
const DELIVER_BYTES: usize = 256 << 10;

/// Hands `batch` to the sinks, then clears it but for `bytes[delivered..]`.
fn deliver(shared: &Shared, batch: &mut Batch, delivered: usize) {
    lock(&shared.sinks).deliver(batch, &shared.stats);
    batch.clear_keeping(delivered);
}

/// The conversion of one ring's drained records, piece by piece: raw ticks to ns, and sequence
/// gaps noted for `gyr.lost` records.
struct Walk {
    /// Where the next record starts in the batch.
    at: usize,
    /// The end of the last record whose bytes are all in the batch.
    complete: usize,
    /// The last sequence number seen or reported lost.
    accounted: u64,
    /// Sequence ranges missing (dropped on a full ring).
    gaps: Vec<(u64, u64)>,
    /// Records complete since the last delivery.
    records: u64,
    /// The first record's time, for the monitor's lag.
    first_ns: Option<u64>,
}

impl Walk {
    /// Converts every record whose header is in `bytes[self.at..]`; a record's payload may
    /// follow in the next piece (only the header is rewritten), and it counts when complete.
    #[inline]
    fn convert(&mut self, bytes: &mut [u8], clk: &crate::clock::Clock) {
        loop {
            if self.complete < self.at {
                if self.at > bytes.len() {
                    return;
                }
                self.complete = self.at;
                self.records += 1;
            }
            // Only the fields the conversion reads are read, and only those it changes written
            // (the layout of `gyr_core::record::RecordHeader`).
            let Some(h) = bytes
                .get_mut(self.at..)
                .and_then(|b| b.first_chunk_mut::<RECORD_HEADER_LEN>())
            else {
                return;
            };
            let field = |h: &[u8; RECORD_HEADER_LEN], at: usize| {
                u64::from_le_bytes(h[at..at + 8].try_into().unwrap())
            };
            let len = u32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
            // Only gyr's producers write rings; a length this short would loop here forever.
            // The panic is caught in `run`, which turns full rings to dropping.
            assert!(len >= RECORD_HEADER_LEN, "a corrupt record in a ring");
            let seq = field(h, 16);
            if seq > self.accounted + 1 {
                self.gaps.push((self.accounted + 1, seq - 1));
            }
            self.accounted = seq;
            let timestamp = clk.to_ns(field(h, 8));
            h[8..16].copy_from_slice(&timestamp.to_le_bytes());
            let perturbation = field(h, 24);
            if perturbation != 0 {
                h[24..32].copy_from_slice(&clk.ticks_to_ns(perturbation).to_le_bytes());
            }
            self.first_ns.get_or_insert(timestamp);
            self.at += stride(len);
        }
    }
}

/// Starts one more local monitor.
pub(crate) fn spawn(shared: &Arc<Shared>) -> std::io::Result<usize> {
    spawn_locked(shared, &mut lock(&shared.monitors))
}

/// [`spawn`], with the list of monitors already locked by the caller.
fn spawn_locked(
    shared: &Arc<Shared>,
    monitors: &mut Vec<Arc<MonitorSlot>>,
) -> std::io::Result<usize> {
    let index = monitors.len();
    let id = shared.next_thread.fetch_add(1, Ordering::Relaxed);
    let s = shared.clone();
    let handle = std::thread::Builder::new()
        .name(format!("gyr-monitor-{index}"))
        .spawn(move || Monitor::new(s, index, id).run())?;
    monitors.push(Arc::new(MonitorSlot {
        thread: handle.thread().clone(),
        join: std::sync::Mutex::new(Some(handle)),
        load: AtomicU64::new(0),
        flushed: AtomicU64::new(0),
    }));
    Ok(index)
}

struct Monitor {
    shared: Arc<Shared>,
    index: usize,
    info: ThreadInfo,
    batch: Batch,
    own: Vec<u8>,
    own_seq: u64,
    announced_self: bool,
    mine: Vec<Arc<RingEntry>>,
    last_flush: Instant,
    flushed: u64,
    lagging_passes: u32,
    load_window: (Instant, u64),
}

struct Pass {
    bytes: usize,
    /// Rings that held records.
    recording: usize,
    busy: bool,
    lag_ns: u64,
    blocked: bool,
}

impl Monitor {
    fn new(shared: Arc<Shared>, index: usize, id: u64) -> Self {
        let info = ThreadInfo {
            id,
            name: format!("gyr-monitor-{index}"),
            os_tid: os_tid(),
        };
        Monitor {
            shared,
            index,
            info,
            batch: Batch::default(),
            own: Vec::new(),
            own_seq: 0,
            announced_self: false,
            mine: Vec::new(),
            last_flush: Instant::now(),
            flushed: 0,
            lagging_passes: 0,
            load_window: (Instant::now(), 0),
        }
    }

    fn run(mut self) {
        let mut last_pass = Instant::now();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut spare = Spare::new();
        loop {
            let stopping = self.shared.stopping.load(Ordering::SeqCst);
            let flush_target = self.shared.flush_requested.load(Ordering::SeqCst);
            let pass = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.pass()))
            {
                Ok(pass) => pass,
                Err(_) => {
                    // A bug in gyr must not block the program: from now on, full rings drop
                    // (and count) instead of waiting for a monitor that may never drain them.
                    if !self.shared.failed.swap(true, Ordering::SeqCst) {
                        crate::diag!(
                            "gyr: local monitor {} failed; full rings now drop and count events instead of blocking",
                            self.index
                        );
                    }
                    std::thread::sleep(self.shared.config.poll_interval);
                    continue;
                }
            };
            if stopping {
                // Final drain: until a pass finds nothing (producers may still be finishing).
                let mut quiet = 0;
                while quiet < 2 {
                    if self.pass().bytes == 0 {
                        quiet += 1;
                        std::thread::sleep(Duration::from_micros(200));
                    } else {
                        quiet = 0;
                    }
                }
                self.flush_sinks();
                self.complete_flush(u64::MAX);
                return;
            }
            if flush_target > self.flushed
                || self.last_flush.elapsed() >= self.shared.config.flush_interval
            {
                self.flush_sinks();
            }
            if flush_target > self.flushed {
                self.complete_flush(flush_target);
            }
            self.scale(&pass);
            if !pass.busy {
                let now = Instant::now();
                let poll = self.shared.config.poll_interval;
                let park = if pass.bytes > 0 && pass.recording < cores && spare.now(now) {
                    park_for(pass.bytes, now - last_pass, poll)
                } else {
                    poll
                };
                last_pass = now;
                std::thread::park_timeout(park);
            } else {
                last_pass = Instant::now();
                std::thread::yield_now();
            }
        }
    }

    fn flush_sinks(&mut self) {
        lock(&self.shared.sinks).flush(&self.shared.stats);
        self.last_flush = Instant::now();
    }

    fn complete_flush(&mut self, target: u64) {
        self.flushed = target;
        let monitors = lock(&self.shared.monitors);
        monitors[self.index].flushed.store(target, Ordering::SeqCst);
        let all = monitors
            .iter()
            .map(|m| m.flushed.load(Ordering::SeqCst))
            .min()
            .unwrap_or(0);
        drop(monitors);
        let (m, cv) = &self.shared.flush_done;
        let mut done = lock(m);
        if all > *done {
            *done = all;
            cv.notify_all();
        }
    }

    /// One pass over this monitor's rings.
    fn pass(&mut self) -> Pass {
        let clk = clock();
        self.mine.clear();
        self.mine.extend(
            lock(&self.shared.rings)
                .iter()
                .filter(|e| e.monitor() == self.index)
                .cloned(),
        );
        let mut pass = Pass {
            bytes: 0,
            recording: 0,
            busy: false,
            lag_ns: 0,
            blocked: false,
        };
        let now_ns = clk.now_ns();
        let mut finished = Vec::new();
        let mut drained_capacity = 0usize;
        let mine = std::mem::take(&mut self.mine);
        for e in &mine {
            let closed = e.ring.is_closed();
            let cap = e.ring.capacity();
            if e.ring.used() > cap / 4 || e.ring.take_wake_request() {
                pass.busy = true;
            }
            let Ok(mut c) = e.consumer.try_lock() else {
                continue;
            };
            if !c.announced {
                self.batch.threads.push(e.info.clone());
                c.announced = true;
            }
            let blocked = e.blocked_ticks.load(Ordering::Relaxed);
            if blocked != c.blocked_seen {
                c.blocked_seen = blocked;
                pass.blocked = true;
            }
            // Load the drop mark before draining: see `Ring::last_dropped`.
            let dropped = e.ring.last_dropped();
            let mut start = self.batch.bytes.len();
            let mut walk = Walk {
                at: start,
                complete: start,
                accounted: c.accounted,
                gaps: Vec::new(),
                records: 0,
                first_ns: None,
            };
            let (batch, shared, id) = (&mut self.batch, &self.shared, e.info.id);
            let n = e.ring.drain(&mut c.head, |run| {
                // Copy in pieces and convert each while it is still in cache, and hand the sinks
                // bounded batches: a run may be megabytes, and a second pass over it, or a batch
                // that size, would go to memory and back.
                for piece in run.chunks(CONVERT_PIECE) {
                    batch.bytes.extend_from_slice(piece);
                    walk.convert(&mut batch.bytes, clk);
                    if batch.bytes.len() >= DELIVER_BYTES && walk.complete > start {
                        batch.blocks.push((id, start..walk.complete));
                        batch.records += std::mem::take(&mut walk.records);
                        deliver(shared, batch, walk.complete);
                        walk.at -= walk.complete;
                        (start, walk.complete) = (0, 0);
                    }
                }
            });
            pass.bytes += n;
            if n > 0 {
                drained_capacity += cap;
                pass.recording += 1;
            }
            debug_assert_eq!(
                walk.at,
                self.batch.bytes.len(),
                "the ring holds whole records"
            );
            c.accounted = walk.accounted;
            self.batch.records += walk.records;
            if let Some(first) = walk.first_ns {
                pass.lag_ns = pass.lag_ns.max(now_ns.saturating_sub(first));
            }
            for (from, to) in walk.gaps {
                self.lost(e.info.id, from, to, now_ns);
            }
            if dropped > c.accounted {
                self.lost(e.info.id, c.accounted + 1, dropped, now_ns);
                c.accounted = dropped;
            }
            if self.batch.bytes.len() > start {
                self.batch
                    .blocks
                    .push((e.info.id, start..self.batch.bytes.len()));
            }
            if closed && e.ring.used() == 0 {
                finished.push(e.info.id);
            }
        }
        self.mine = mine;
        if self.index == 0 {
            let before = self.own.len();
            crate::sample::run_due(now_ns, &mut self.own, &mut self.own_seq);
            self.batch.records +=
                gyr_core::record::Records::new(0, &self.own[before..]).count() as u64;
        }
        if !self.own.is_empty() {
            if !self.announced_self {
                self.batch.threads.push(self.info.clone());
                self.announced_self = true;
            }
            let start = self.batch.bytes.len();
            self.batch.bytes.extend_from_slice(&self.own);
            self.batch
                .blocks
                .push((self.info.id, start..self.batch.bytes.len()));
            self.own.clear();
        }
        if !self.batch.blocks.is_empty() || !self.batch.threads.is_empty() {
            let all = self.batch.bytes.len();
            deliver(&self.shared, &mut self.batch, all);
        }
        self.shared
            .stats
            .bytes
            .fetch_add(pass.bytes as u64, Ordering::Relaxed);
        if !finished.is_empty() {
            lock(&self.shared.rings).retain(|e| !finished.contains(&e.info.id));
        }
        self.update_load(pass.bytes);
        // A pass that found its rings a quarter full or more means producers are writing faster
        // than one pass per poll interval drains: look again at once rather than sleep (this is
        // not spinning: every such pass does real work). Below that, sleeping leaves the cores to
        // the program.
        if pass.bytes * 4 >= drained_capacity && drained_capacity > 0 {
            pass.busy = true;
        }
        pass
    }

    /// Reports `from..=to` of `thread` as lost, as a `gyr.lost` record of this monitor.
    fn lost(&mut self, thread: u64, from: u64, to: u64, now_ns: u64) {
        let count = to - from + 1;
        self.shared.stats.lost.fetch_add(count, Ordering::Relaxed);
        let mut payload = [0u8; 32];
        for (i, v) in [thread, count, from, to].into_iter().enumerate() {
            payload[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        self.own_seq += 1;
        push_record(
            &mut self.own,
            crate::registry::LOST_TYPE_ID,
            now_ns,
            self.own_seq,
            0,
            &payload,
        );
        self.batch.records += 1;
    }

    fn update_load(&mut self, bytes: usize) {
        self.load_window.1 += bytes as u64;
        let elapsed = self.load_window.0.elapsed();
        if elapsed >= Duration::from_millis(100) {
            let rate = (self.load_window.1 as f64 / elapsed.as_secs_f64()) as u64;
            let slot = &lock(&self.shared.monitors)[self.index];
            let old = slot.load.load(Ordering::Relaxed);
            slot.load.store((old + rate) / 2, Ordering::Relaxed);
            self.load_window = (Instant::now(), 0);
        }
    }

    /// Starts another monitor when this one keeps falling behind (Falcon's monitor-monitor).
    fn scale(&mut self, pass: &Pass) {
        let lagging = pass.lag_ns > self.shared.config.max_lag.as_nanos() as u64 || pass.blocked;
        self.lagging_passes = if lagging { self.lagging_passes + 1 } else { 0 };
        // A monitor with one ring has nothing to hand over: another would only compete for
        // the cores with the program.
        if self.lagging_passes < 3 || self.mine.len() < 2 {
            return;
        }
        let count = lock(&self.shared.monitors).len();
        if count >= self.shared.config.max_monitors {
            return;
        }
        {
            let mut last = lock(&self.shared.last_spawn);
            if last.elapsed() < Duration::from_millis(250) {
                return;
            }
            *last = Instant::now();
        }
        self.lagging_passes = 0;
        // Spawned and handed its rings under the monitors' lock, under which the runtime's end
        // sets `stopping`: otherwise a monitor spawned as the runtime ends could finish its
        // final drain before the rings reached it, and the ring's last records, which no
        // monitor then drains, would be lost without a count.
        let mut monitors = lock(&self.shared.monitors);
        if self.shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(new) = spawn_locked(&self.shared, &mut monitors) else {
            return;
        };
        // Hand every other ring of this monitor to the new one.
        let rings = lock(&self.shared.rings);
        for e in rings
            .iter()
            .filter(|e| e.monitor() == self.index)
            .skip(1)
            .step_by(2)
        {
            e.monitor.store(new, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_parks_as_long_as_its_threads_take_to_fill_the_drain_target() {
        let poll = Duration::from_millis(1);
        // Nothing found: the poll interval.
        assert_eq!(park_for(0, Duration::from_millis(1), poll), poll);
        // The target in 1 ms found twice over: park half as long as the last wait.
        assert_eq!(
            park_for(2 * DRAIN_TARGET, Duration::from_micros(800), poll),
            Duration::from_micros(400)
        );
        // Slowly filling rings: never longer than the poll interval.
        assert_eq!(park_for(100, Duration::from_millis(1), poll), poll);
        // Very fast ones: never shorter than the floor.
        assert_eq!(park_for(64 << 20, Duration::from_millis(1), poll), MIN_PARK);
        // A poll interval below the floor is kept.
        let short = Duration::from_micros(10);
        assert_eq!(park_for(64 << 20, Duration::from_millis(1), short), short);
    }

    #[test]
    fn the_runnable_threads_come_from_loadavgs_fourth_field() {
        assert_eq!(runnable("0.87 1.33 1.49 2/77 13895\n"), Some(2));
        assert_eq!(runnable("0.00 0.00 0.00 13/1024 1"), Some(13));
        assert_eq!(runnable("0.87 1.33 1.49"), None);
        assert_eq!(runnable("a b c x/77 1"), None);
        // This machine's own, where there is one.
        if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
            assert!(runnable(&l).is_some_and(|n| n >= 1), "{l}");
        }
    }
}
