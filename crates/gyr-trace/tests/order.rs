//! The ordering filter on random causally valid histories of threads, mutexes and condition
//! variables, delivered in random interleavings that keep each thread's order.

use gyr_trace::{Event, OrderFilter, SyncEvent};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

/// A small deterministic generator, so that one proptest seed drives a whole history.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const MUTEXES: u64 = 3;
const CONDS: u64 = 2;

/// A history in a causally valid global order, made by simulating a program: thread 1 forks
/// others, threads lock and unlock mutexes, signal and wait on conditions, exit and are joined.
fn history(seed: u64, steps: usize, max_threads: u64) -> Vec<(u64, SyncEvent)> {
    let mut rng = Rng(seed | 1);
    let mut out = vec![(1, SyncEvent::ThreadBegin { parent: None })];
    let mut alive = vec![1u64];
    let mut unborn: Vec<(u64, u64)> = Vec::new(); // (child, parent)
    let mut exited: Vec<u64> = Vec::new();
    let mut next_thread = 2;
    let mut holder: HashMap<u64, u64> = HashMap::new(); // mutex -> thread
    let mut acquisitions: HashMap<u64, u64> = HashMap::new();
    let mut signals: HashMap<u64, u64> = HashMap::new();
    for _ in 0..steps {
        let t = alive[rng.below(alive.len() as u64) as usize];
        let held: Option<u64> = holder.iter().find(|(_, h)| **h == t).map(|(m, _)| *m);
        match rng.below(10) {
            0 if next_thread <= max_threads => {
                out.push((t, SyncEvent::Fork { child: next_thread }));
                unborn.push((next_thread, t));
                next_thread += 1;
            }
            1 if !unborn.is_empty() => {
                let (child, parent) = unborn.remove(rng.below(unborn.len() as u64) as usize);
                out.push((
                    child,
                    SyncEvent::ThreadBegin {
                        parent: Some(parent),
                    },
                ));
                alive.push(child);
            }
            2 | 3 => match held {
                Some(m) => {
                    holder.remove(&m);
                    out.push((
                        t,
                        SyncEvent::MutexRelease {
                            mutex: m,
                            n: acquisitions[&m],
                        },
                    ));
                }
                None => {
                    let m = rng.below(MUTEXES);
                    if let std::collections::hash_map::Entry::Vacant(e) = holder.entry(m) {
                        e.insert(t);
                        let n = acquisitions.entry(m).or_default();
                        *n += 1;
                        out.push((t, SyncEvent::MutexAcquire { mutex: m, n: *n }));
                    }
                }
            },
            4 => {
                let c = rng.below(CONDS);
                let n = signals.entry(c).or_default();
                *n += 1;
                out.push((t, SyncEvent::CondSignal { cond: c, n: *n }));
            }
            5 => {
                let c = rng.below(CONDS);
                let after = signals.get(&c).copied().unwrap_or(0);
                out.push((t, SyncEvent::CondWake { cond: c, after }));
            }
            6 if t != 1 && held.is_none() => {
                out.push((t, SyncEvent::Exit));
                alive.retain(|&a| a != t);
                exited.push(t);
            }
            7 if !exited.is_empty() => {
                let j = exited.remove(rng.below(exited.len() as u64) as usize);
                out.push((t, SyncEvent::JoinEnd { joined: j }));
            }
            _ => out.push((t, SyncEvent::Other)),
        }
    }
    out
}

/// Each thread's events in order, delivered in bursts of random length from random threads:
/// the misordering per-thread rings and several monitors produce.
fn deliver(history: &[(u64, SyncEvent)], seed: u64) -> Vec<Event<(u64, usize)>> {
    let mut per_thread: HashMap<u64, Vec<Event<(u64, usize)>>> = HashMap::new();
    for &(thread, kind) in history {
        let q = per_thread.entry(thread).or_default();
        let data = (thread, q.len());
        q.push(Event { thread, kind, data });
    }
    let mut queues: Vec<std::collections::VecDeque<_>> =
        per_thread.into_values().map(Into::into).collect();
    let mut rng = Rng(seed.wrapping_mul(31) | 1);
    let mut out = Vec::new();
    while !queues.is_empty() {
        let i = rng.below(queues.len() as u64) as usize;
        for _ in 0..1 + rng.below(20) {
            match queues[i].pop_front() {
                Some(e) => out.push(e),
                None => break,
            }
        }
        if queues[i].is_empty() {
            queues.swap_remove(i);
        }
    }
    out
}

/// The history as monitor passes deliver it: every `pass` events of the history, each thread's
/// new events in one burst, the threads in a shuffled order. Bursts are long, so a thread's
/// queue is released in long runs.
fn deliver_in_passes(
    history: &[(u64, SyncEvent)],
    pass: usize,
    seed: u64,
) -> Vec<Event<(u64, usize)>> {
    /// A thread's events, each with its place in the history.
    type Placed = Vec<(usize, Event<(u64, usize)>)>;
    let mut per_thread: HashMap<u64, Placed> = HashMap::new();
    for (at, &(thread, kind)) in history.iter().enumerate() {
        let q = per_thread.entry(thread).or_default();
        let data = (thread, q.len());
        q.push((at, Event { thread, kind, data }));
    }
    let mut threads: Vec<Placed> = per_thread.into_values().collect();
    threads.sort_by_key(|q| q[0].1.thread);
    let mut rng = Rng(seed.wrapping_mul(17) | 1);
    let mut next = vec![0usize; threads.len()];
    let mut out = Vec::with_capacity(history.len());
    let mut end = 0;
    while out.len() < history.len() {
        end += pass;
        for i in (1..threads.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            threads.swap(i, j);
            next.swap(i, j);
        }
        for (q, n) in threads.iter().zip(next.iter_mut()) {
            while *n < q.len() && q[*n].0 < end {
                out.push(q[*n].1.clone());
                *n += 1;
            }
        }
    }
    out
}

/// Checks, independently of the filter, that `out` is causally consistent.
fn check_causal(out: &[(u64, SyncEvent)]) -> Result<(), String> {
    let mut forked = HashSet::new();
    let mut exited = HashSet::new();
    let mut released: HashMap<u64, u64> = HashMap::new();
    let mut signalled: HashMap<u64, u64> = HashMap::new();
    let mut holding: HashMap<u64, u64> = HashMap::new(); // mutex -> thread
    for (i, &(t, kind)) in out.iter().enumerate() {
        let ok = match kind {
            SyncEvent::ThreadBegin { parent: Some(_) } => forked.contains(&t),
            SyncEvent::JoinEnd { joined } => exited.contains(&joined),
            SyncEvent::MutexAcquire { mutex, n } => {
                let free = !holding.contains_key(&mutex);
                holding.insert(mutex, t);
                free && released.get(&mutex).copied().unwrap_or(0) == n - 1
            }
            SyncEvent::MutexRelease { mutex, n } => {
                released.insert(mutex, n);
                holding.remove(&mutex) == Some(t)
            }
            SyncEvent::CondSignal { cond, n } => {
                let s = signalled.entry(cond).or_default();
                let ok = *s == n - 1;
                *s = n;
                ok
            }
            SyncEvent::CondWake { cond, after } => {
                signalled.get(&cond).copied().unwrap_or(0) >= after
            }
            _ => true,
        };
        match kind {
            SyncEvent::Fork { child } => {
                forked.insert(child);
            }
            SyncEvent::Exit => {
                exited.insert(t);
            }
            _ => {}
        }
        if !ok {
            return Err(format!("event {i} ({t}, {kind:?}) came before its cause"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every event comes out exactly once, each thread's in order, and the whole causally
    /// consistent; nothing is forced when the bound is not reached.
    #[test]
    fn random_interleavings_come_out_causally_consistent(
        seed in any::<u64>(),
        steps in 1usize..600,
        threads in 1u64..12,
    ) {
        let h = history(seed, steps, threads);
        check_causal(&h).map_err(|e| TestCaseError::fail(format!("the generator: {e}")))?;
        let input = deliver(&h, seed);
        let mut filter = OrderFilter::new(usize::MAX);
        let mut out = Vec::new();
        for e in input {
            filter.push(e, &mut |e| out.push(e));
        }
        let stats = filter.stats();
        prop_assert_eq!(stats.held, 0, "a valid history leaves nothing held");
        prop_assert_eq!(stats.forced, 0);
        prop_assert_eq!(out.len(), h.len());
        let mut next: HashMap<u64, usize> = HashMap::new();
        for e in &out {
            let n = next.entry(e.data.0).or_default();
            prop_assert_eq!(e.data.1, *n, "thread {}'s events in order", e.data.0);
            *n += 1;
        }
        let kinds: Vec<(u64, SyncEvent)> = out.iter().map(|e| (e.thread, e.kind)).collect();
        check_causal(&kinds).map_err(TestCaseError::fail)?;
        prop_assert!(stats.peak_held <= h.len());
    }

    /// With a small bound, memory stays within it whatever arrives, and every event still
    /// comes out exactly once.
    #[test]
    fn a_small_bound_holds_and_loses_nothing(
        seed in any::<u64>(),
        steps in 1usize..600,
        bound in 1usize..32,
    ) {
        let h = history(seed, steps, 8);
        let mut input = deliver(&h, seed);
        // Lose a few causes, as a dropped ring would.
        let mut rng = Rng(seed ^ 0x5555);
        input.retain(|_| rng.below(50) != 0);
        let n = input.len();
        let mut filter = OrderFilter::new(bound);
        let mut out = 0usize;
        for e in input {
            filter.push(e, &mut |_| out += 1);
            prop_assert!(filter.stats().held <= bound);
        }
        filter.finish(&mut |_| out += 1);
        prop_assert_eq!(out, n);
        prop_assert!(filter.stats().peak_held <= bound + 1);
        prop_assert_eq!(filter.stats().held, 0);
    }

    /// With every bound small (events held, threads, objects), whatever arrives: memory stays
    /// within the bounds, the end of the stream terminates, and every event comes out once.
    #[test]
    fn small_bounds_on_everything_lose_nothing_and_end(
        seed in any::<u64>(),
        steps in 1usize..600,
        bound in 1usize..64,
    ) {
        let h = history(seed, steps, 12);
        let mut input = deliver(&h, seed);
        let mut rng = Rng(seed ^ 0xaaaa);
        input.retain(|_| rng.below(20) != 0);
        let n = input.len();
        let mut filter = OrderFilter::new(bound);
        filter.limit_threads(4);
        filter.limit_objects(16);
        let mut out = 0usize;
        for e in input {
            filter.push(e, &mut |_| out += 1);
            prop_assert!(filter.stats().held <= bound);
            prop_assert!(filter.sizes().threads <= 4);
        }
        filter.finish(&mut |_| out += 1);
        prop_assert_eq!(out, n);
        prop_assert_eq!(filter.stats().held, 0);
    }

    /// Whole bursts per thread and pass, as the benchmark delivers them: long runs of a
    /// thread's queue pass at once, and the output is as for any interleaving.
    #[test]
    fn monitor_passes_come_out_causally_consistent(
        seed in any::<u64>(),
        steps in 1usize..2000,
        threads in 1u64..16,
        pass in 1usize..200,
    ) {
        let h = history(seed, steps, threads);
        let input = deliver_in_passes(&h, pass, seed);
        prop_assert_eq!(input.len(), h.len());
        let mut filter = OrderFilter::new(usize::MAX);
        let mut out = Vec::new();
        for e in input {
            filter.push(e, &mut |e| out.push(e));
        }
        let stats = filter.stats();
        prop_assert_eq!((stats.held, stats.forced), (0, 0));
        prop_assert_eq!(out.len(), h.len());
        let mut next: HashMap<u64, usize> = HashMap::new();
        for e in &out {
            let n = next.entry(e.data.0).or_default();
            prop_assert_eq!(e.data.1, *n, "thread {}'s events in order", e.data.0);
            *n += 1;
        }
        let kinds: Vec<(u64, SyncEvent)> = out.iter().map(|e| (e.thread, e.kind)).collect();
        check_causal(&kinds).map_err(TestCaseError::fail)?;
    }
}
