//! Perturbation correction: each thread's timeline with the time monitoring took removed.
//!
//! # What monitoring costs a thread
//!
//! Every record carries Falcon's perturbation field: the time its thread has spent so far
//! waiting for room in a full ring (measured). Every sensor call also costs a fixed amount,
//! measured once at start-up and stored in the trace header (`sensor_cost_ns`). A sensor
//! reads the clock first, then writes, waiting for room if it must: a record's own wait and
//! cost come *after* its timestamp. So by the timestamp of record `seq`, monitoring has taken
//! its thread the previous record's perturbation plus `(seq − 1) × sensor_cost_ns`.
//!
//! # Removing it (Malony, Reed and Wijshoff's event-based perturbation analysis)
//!
//! Subtracting each thread's cost from its timestamps alone is wrong for a parallel program:
//! a thread that waited for a lock held by a slowed-down thread waited partly *because of*
//! monitoring, and a thread that was slowed down may now come "before" the release it waited
//! for. The [`Corrector`] therefore takes the events in causal order (out of the
//! [ordering filter](crate::order)) and keeps, per thread, the corrected time of its last
//! event:
//!
//! - an event with no cause from another thread moves with its thread: the time since the
//!   thread's previous event, less the monitoring cost in between;
//! - the end of a wait (an acquisition after a request, a wake-up after a wait, a join's end,
//!   a barrier's departure) happens when its cause does in the corrected run (the release,
//!   the signal, the exit, the last arrival), plus the hand-off time the trace shows between
//!   the two; never before the wait began;
//! - an event with a cause it did not wait for (an uncontended acquisition) never comes before
//!   its cause; a thread's first event after its fork comes the trace's creation latency after
//!   the corrected fork.
//!
//! Timed-out waits and causes the trace does not hold (lost, or switched off) fall back to the
//! first rule. The corrected records carry a perturbation of 0: it has been taken out.
//!
//! # Bounds
//!
//! The corrector remembers, per thread, its last event, and per lock, condition, barrier and
//! thread the last few causes; each table holds at most [`MAX_ENTRIES`] entries, past which it
//! is emptied and the events that needed it fall back to the first rule (counted in
//! [`CorrectionStats::forgotten`]).

use crate::sync_events::{SyncDecoder, ViewEvent};
use gyr_core::record::RecordHeader;
use gyr_core::schema::Schema;

type Map<K, V> = foldhash::HashMap<K, V>;

/// Entries a table of the corrector holds before it is emptied.
pub const MAX_ENTRIES: usize = 1 << 20;

/// How many recent releases (signals) per lock (condition) are kept: a read acquisition or a
/// wake-up may come out of the filter after a few later releases (signals) it did not wait for.
const RECENT: usize = 8;

/// A cause: its raw and corrected time.
#[derive(Debug, Clone, Copy, Default)]
struct At {
    raw: u64,
    corrected: u64,
}

/// The last [`RECENT`] numbered causes of one object (releases of a lock, signals of a
/// condition), by number.
#[derive(Debug, Clone, Copy, Default)]
struct Recent {
    slots: [(u64, At); RECENT],
}

impl Recent {
    fn put(&mut self, n: u64, at: At) {
        self.slots[(n % RECENT as u64) as usize] = (n, at);
    }

    fn get(&self, n: u64) -> Option<At> {
        let (k, at) = self.slots[(n % RECENT as u64) as usize];
        (k == n && n != 0).then_some(at)
    }
}

/// A thread's last event.
#[derive(Debug, Clone, Copy)]
struct Clock {
    raw: u64,
    corrected: u64,
    /// Monitoring's cumulative cost to the thread by that event's timestamp, ns.
    overhead: u64,
    /// The event's perturbation field: blocked time up to the next event's timestamp.
    blocked: u64,
    /// Whether the thread was waiting (for a lock, condition, join or barrier) after it.
    waiting: bool,
}

/// What a correction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CorrectionStats {
    /// Events corrected.
    pub events: u64,
    /// Ends of waits placed after their cause in the corrected run.
    pub waits_moved: u64,
    /// Monitoring time removed, summed over the threads' last events, ns.
    pub removed_ns: u64,
    /// Times a table was emptied because it was full.
    pub forgotten: u64,
}

/// Corrects the timestamps of a causally ordered stream; see the [module](self).
#[derive(Debug)]
pub struct Corrector {
    sensor_cost_ns: f64,
    decoder: SyncDecoder,
    threads: Map<u64, Clock>,
    /// Per lock (mutex, or rwlock written): recent releases by acquisition number.
    releases: Map<u64, Recent>,
    /// Per condition: recent signals and broadcasts by number.
    signals: Map<u64, Recent>,
    /// Per child thread: its fork.
    forks: Map<u64, At>,
    /// Per thread: its exit.
    exits: Map<u64, At>,
    /// Per barrier: the latest arrival of its two latest generations.
    arrivals: Map<u64, [(u64, At); 2]>,
    stats: CorrectionStats,
}

impl Corrector {
    /// A corrector for a trace whose sensor calls cost `sensor_cost_ns` each (its header's).
    pub fn new(sensor_cost_ns: f64) -> Self {
        Corrector {
            sensor_cost_ns: if sensor_cost_ns.is_finite() && sensor_cost_ns > 0.0 {
                sensor_cost_ns
            } else {
                0.0
            },
            decoder: SyncDecoder::new(),
            threads: Map::default(),
            releases: Map::default(),
            signals: Map::default(),
            forks: Map::default(),
            exits: Map::default(),
            arrivals: Map::default(),
            stats: CorrectionStats::default(),
        }
    }

    /// Learns a schema of the stream (the thread event types carry the causes).
    pub fn add_schema(&mut self, schema: &Schema) {
        self.decoder.add_schema(schema);
    }

    /// What the correction did so far.
    pub fn stats(&self) -> CorrectionStats {
        let mut s = self.stats;
        s.removed_ns = self
            .threads
            .values()
            .map(|c| c.raw.saturating_sub(c.corrected))
            .sum();
        s
    }

    /// Monitoring's cumulative cost to a thread by the timestamp of record `h`, ns, given the
    /// blocked time its previous record reported.
    fn overhead(&self, h: &RecordHeader, blocked_before: u64) -> u64 {
        blocked_before.saturating_add((h.seq.saturating_sub(1) as f64 * self.sensor_cost_ns) as u64)
    }

    /// Takes the next record of a causally ordered stream and rewrites its header: the
    /// corrected timestamp, and a perturbation of 0.
    pub fn correct(&mut self, thread: u64, h: &mut RecordHeader, payload: &[u8]) {
        self.stats.events += 1;
        let raw = h.timestamp;
        let view = self.decoder.view(h.type_id, payload);
        let last = self.threads.get(&thread).copied();
        // A thread's first record waited after its timestamp, if at all; a first record seen
        // late (the stream was joined while the program ran) carries the waits before it.
        let first = if h.seq <= 1 { 0 } else { h.perturbation };
        let overhead = self.overhead(h, last.map_or(first, |c| c.blocked));
        // The first rule: the thread's own time since its last event, less monitoring's.
        let local = match last {
            Some(c) => {
                // Saturating throughout: a crafted trace may hold any times.
                c.corrected.saturating_add(
                    raw.saturating_sub(c.raw)
                        .saturating_sub(overhead.saturating_sub(c.overhead)),
                )
            }
            None => raw.saturating_sub(overhead),
        };
        let cause = view.and_then(|v| self.cause(thread, v));
        let waiting = last.is_some_and(|c| c.waiting);
        let corrected = match (cause, last) {
            // The end of a wait: when the cause happened, plus the hand-off.
            (Some(x), Some(c)) if waiting => {
                self.stats.waits_moved += 1;
                let handoff = raw.saturating_sub(x.raw).min(raw.saturating_sub(c.raw));
                c.corrected.max(x.corrected.saturating_add(handoff))
            }
            // Not waited for: never before the cause.
            (Some(x), Some(_)) => local.max(x.corrected),
            // A thread's first event after its fork: the creation latency after it.
            (Some(x), None) => x.corrected.saturating_add(raw.saturating_sub(x.raw)),
            (None, _) => local,
        };
        let corrected = last.map_or(corrected, |c| corrected.max(c.corrected));
        let at = At { raw, corrected };
        if let Some(v) = view {
            self.remember(thread, v, at);
        }
        let waiting = match view {
            Some(ViewEvent::Wait { .. } | ViewEvent::Arrive { .. }) => true,
            Some(_) => false,
            // Other events in between (a span, the program's own) do not end a wait.
            None => waiting,
        };
        bounded_insert(
            &mut self.threads,
            thread,
            Clock {
                raw,
                corrected,
                overhead,
                blocked: h.perturbation,
                waiting,
            },
            &mut self.stats.forgotten,
        );
        h.timestamp = corrected;
        h.perturbation = 0;
    }

    /// The cause of `v` on `thread`, if the trace holds it.
    fn cause(&self, thread: u64, v: ViewEvent) -> Option<At> {
        match v {
            ViewEvent::Begin { .. } => self.forks.get(&thread).copied(),
            ViewEvent::Acquire { lock, n } => self.releases.get(&lock)?.get(n.checked_sub(1)?),
            ViewEvent::AcquireShared { lock, after } => self.releases.get(&lock)?.get(after),
            ViewEvent::Wake { cond, after } => self.signals.get(&cond)?.get(after),
            ViewEvent::Joined { joined } => self.exits.get(&joined).copied(),
            ViewEvent::Depart {
                barrier,
                generation,
            } => self
                .arrivals
                .get(&barrier)?
                .iter()
                .find(|(g, _)| *g == generation)
                .map(|(_, at)| *at),
            _ => None,
        }
    }

    /// Keeps `v` as the cause of what may wait for it.
    fn remember(&mut self, thread: u64, v: ViewEvent, at: At) {
        let lost = &mut self.stats.forgotten;
        match v {
            ViewEvent::Release { lock, n } => {
                let mut r = self.releases.get(&lock).copied().unwrap_or_default();
                r.put(n, at);
                bounded_insert(&mut self.releases, lock, r, lost);
            }
            ViewEvent::Signal { cond, n } => {
                let mut r = self.signals.get(&cond).copied().unwrap_or_default();
                r.put(n, at);
                bounded_insert(&mut self.signals, cond, r, lost);
            }
            ViewEvent::Fork { child } => bounded_insert(&mut self.forks, child, at, lost),
            ViewEvent::Exit => bounded_insert(&mut self.exits, thread, at, lost),
            ViewEvent::Arrive {
                barrier,
                generation,
            } => {
                let mut gens = self.arrivals.get(&barrier).copied().unwrap_or_default();
                let at = match gens.iter_mut().find(|(g, _)| *g == generation) {
                    Some(slot) => {
                        // The latest arrival releases the barrier.
                        if at.corrected >= slot.1.corrected {
                            slot.1 = at;
                        }
                        gens
                    }
                    None => {
                        // Replace the older generation.
                        let older = if gens[0].0 <= gens[1].0 { 0 } else { 1 };
                        gens[older] = (generation, at);
                        gens
                    }
                };
                bounded_insert(&mut self.arrivals, barrier, at, lost);
            }
            ViewEvent::Joined { joined } => {
                // A thread is joined once: its exit is needed no more.
                self.exits.remove(&joined);
            }
            ViewEvent::Begin { .. } => {
                self.forks.remove(&thread);
            }
            _ => {}
        }
    }
}

/// Inserts into a table of at most [`MAX_ENTRIES`], emptying it first when full.
fn bounded_insert<K: std::hash::Hash + Eq, V>(
    map: &mut Map<K, V>,
    k: K,
    v: V,
    forgotten: &mut u64,
) {
    if map.len() >= MAX_ENTRIES && !map.contains_key(&k) {
        map.clear();
        *forgotten += 1;
    }
    map.insert(k, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::schema::{Field, FieldType as F};

    fn schemas() -> Vec<Schema> {
        let s = |id, name: &str, fields: &[(&str, F)]| {
            Schema::new(
                id,
                name,
                fields.iter().map(|(n, t)| Field::new(*n, *t)).collect(),
            )
            .unwrap()
        };
        vec![
            s(1, "gyr.mutex.request", &[("mutex", F::U64)]),
            s(2, "gyr.mutex.acquire", &[("mutex", F::U64), ("n", F::U64)]),
            s(3, "gyr.mutex.release", &[("mutex", F::U64), ("n", F::U64)]),
            s(4, "gyr.thread.fork", &[("child", F::U64)]),
            s(5, "gyr.thread.begin", &[("parent", F::U64)]),
            s(9, "work", &[("x", F::U64)]),
        ]
    }

    fn corrector(cost: f64) -> Corrector {
        let mut c = Corrector::new(cost);
        for s in schemas() {
            c.add_schema(&s);
        }
        c
    }

    fn two(a: u64, b: u64) -> Vec<u8> {
        let mut p = a.to_le_bytes().to_vec();
        p.extend(b.to_le_bytes());
        p
    }

    /// Corrects one record; returns the corrected time.
    fn at(
        c: &mut Corrector,
        thread: u64,
        ty: u32,
        ts: u64,
        seq: u64,
        blocked: u64,
        p: &[u8],
    ) -> u64 {
        let mut h = RecordHeader {
            len: 0,
            type_id: ty,
            timestamp: ts,
            seq,
            perturbation: blocked,
        };
        c.correct(thread, &mut h, p);
        assert_eq!(h.perturbation, 0);
        h.timestamp
    }

    #[test]
    fn a_thread_alone_loses_its_blocked_time_and_sensor_cost() {
        let mut c = corrector(10.0);
        let p = 0u64.to_le_bytes();
        assert_eq!(at(&mut c, 1, 9, 1_000, 1, 0, &p), 1_000);
        // The second record waited 300 ns for room after its timestamp (its cumulative
        // perturbation says so); the first sensor call cost 10 ns.
        assert_eq!(at(&mut c, 1, 9, 2_000, 2, 300, &p), 1_990);
        // 1000 ns later, of which 300 blocked and 10 the second sensor call.
        assert_eq!(at(&mut c, 1, 9, 3_000, 3, 300, &p), 1_990 + 690);
        assert_eq!(c.stats().removed_ns, 320);
    }

    #[test]
    fn a_waiter_follows_the_corrected_release_it_waited_for() {
        let mut c = corrector(0.0);
        // Thread 1 holds the mutex; its acquisition's record waits 5000 ns for room in its
        // ring, and it releases at 10 000.
        assert_eq!(at(&mut c, 1, 2, 1_000, 1, 5_000, &two(7, 1)), 1_000);
        assert_eq!(at(&mut c, 1, 3, 10_000, 2, 5_000, &two(7, 1)), 5_000);
        // Thread 2 asked at 2000 and got the mutex 100 ns after the raw release.
        assert_eq!(at(&mut c, 2, 1, 2_000, 1, 0, &7u64.to_le_bytes()), 2_000);
        assert_eq!(at(&mut c, 2, 2, 10_100, 2, 0, &two(7, 2)), 5_100);
        // Its next event keeps its own pace from there.
        assert_eq!(at(&mut c, 2, 9, 11_100, 3, 0, &0u64.to_le_bytes()), 6_100);
        assert_eq!(c.stats().waits_moved, 1);
    }

    #[test]
    fn an_uncontended_acquisition_never_precedes_its_release() {
        let mut c = corrector(0.0);
        at(&mut c, 1, 2, 1_000, 1, 0, &two(7, 1));
        at(&mut c, 1, 3, 3_000, 2, 0, &two(7, 1));
        // Thread 2 was slowed by 2500 ns of blocking before it took the free mutex at 3 100.
        at(&mut c, 2, 9, 100, 1, 2_500, &0u64.to_le_bytes());
        assert_eq!(at(&mut c, 2, 2, 3_100, 2, 2_500, &two(7, 2)), 3_000);
    }

    #[test]
    fn a_child_starts_its_creation_latency_after_the_corrected_fork() {
        let mut c = corrector(0.0);
        at(&mut c, 1, 9, 1_000, 1, 3_000, &0u64.to_le_bytes());
        assert_eq!(
            at(&mut c, 1, 4, 5_000, 2, 3_000, &2u64.to_le_bytes()),
            2_000
        );
        assert_eq!(at(&mut c, 2, 5, 5_400, 1, 0, &1u64.to_le_bytes()), 2_400);
    }

    #[test]
    fn time_never_runs_backwards_in_a_thread() {
        let mut c = corrector(1_000.0);
        let p = 0u64.to_le_bytes();
        let mut last = 0;
        for i in 1..100 {
            let t = at(&mut c, 1, 9, i * 10, i, 0, &p);
            assert!(t >= last);
            last = t;
        }
    }

    /// A random run of threads sharing one mutex, in causal order: (thread, type, raw time,
    /// seq, blocked so far, payload).
    fn run(seed: u64, steps: usize) -> Vec<(u64, u32, u64, u64, u64, Vec<u8>)> {
        let mut rng = seed | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n.max(1)
        };
        let threads = 1 + next(4);
        let mut seq = vec![0u64; threads as usize + 1];
        let mut blocked = vec![0u64; threads as usize + 1];
        // Per thread: 0 idle, 1 waiting, 2 holding.
        let mut state = vec![0u8; threads as usize + 1];
        let (mut holder, mut acquired, mut waiters) = (0u64, 0u64, Vec::new());
        let mut now = 1_000;
        let mut out = Vec::new();
        for _ in 0..steps {
            let t = 1 + next(threads);
            now += 1 + next(100);
            if next(8) == 0 {
                blocked[t as usize] += next(50);
            }
            let (ty, p) = match state[t as usize] {
                0 if holder == 0 && waiters.is_empty() => {
                    holder = t;
                    acquired += 1;
                    state[t as usize] = 2;
                    (2, two(7, acquired))
                }
                0 if next(2) == 0 => {
                    waiters.push(t);
                    state[t as usize] = 1;
                    (1, 7u64.to_le_bytes().to_vec())
                }
                0 => (9, 0u64.to_le_bytes().to_vec()),
                1 if holder == 0 && waiters.first() == Some(&t) => {
                    waiters.remove(0);
                    holder = t;
                    acquired += 1;
                    state[t as usize] = 2;
                    (2, two(7, acquired))
                }
                1 => continue,
                _ => {
                    holder = 0;
                    state[t as usize] = 0;
                    (3, two(7, acquired))
                }
            };
            seq[t as usize] += 1;
            out.push((t, ty, now, seq[t as usize], blocked[t as usize], p));
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn corrected_runs_keep_causes_first_and_time_forward(seed: u64, cost in 0u32..40) {
            let mut c = corrector(f64::from(cost));
            let mut last: Map<u64, u64> = Map::default();
            let mut released: Map<u64, u64> = Map::default();
            for (t, ty, ts, seq, blocked, p) in run(seed, 400) {
                let at = at(&mut c, t, ty, ts, seq, blocked, &p);
                proptest::prop_assert!(at <= ts, "corrected {at} after raw {ts}");
                let before = last.insert(t, at).unwrap_or(0);
                proptest::prop_assert!(at >= before, "thread {t} went back from {before} to {at}");
                let n = u64::from_le_bytes(p[8..16.min(p.len())].try_into().unwrap_or([0; 8]));
                match ty {
                    2 => {
                        if let Some(&r) = released.get(&(n - 1)) {
                            proptest::prop_assert!(at >= r, "acquisition {n} at {at} before release at {r}");
                        }
                    }
                    3 => {
                        released.insert(n, at);
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn a_thread_without_causes_loses_exactly_its_monitoring_time() {
        let mut c = corrector(7.0);
        let p = 0u64.to_le_bytes();
        let mut blocked = 0;
        for seq in 1..=1000u64 {
            // Waits up to this record's timestamp, and its own, after it.
            let before = blocked;
            blocked += seq % 13;
            let raw = seq * 1_000;
            let at = at(&mut c, 4, 9, raw, seq, blocked, &p);
            assert_eq!(raw - at, before + (seq - 1) * 7);
        }
    }

    #[test]
    fn crafted_times_never_overflow() {
        let mut c = corrector(1e30);
        for (t, ty, ts, seq, blocked, p) in [
            (1, 2, u64::MAX, 1, 0, two(7, 1)),
            (1, 3, u64::MAX, u64::MAX, u64::MAX, two(7, 1)),
            (2, 1, 0, 1, 0, 7u64.to_le_bytes().to_vec()),
            (2, 2, u64::MAX - 1, 2, 0, two(7, 2)),
            (3, 5, u64::MAX, 1, u64::MAX, 1u64.to_le_bytes().to_vec()),
        ] {
            at(&mut c, t, ty, ts, seq, blocked, &p);
        }
    }
}
