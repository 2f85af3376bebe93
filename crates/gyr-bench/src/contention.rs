//! A synthetic program's thread events, for the benchmarks of the life-time view: threads
//! taking turns on 64 mutexes, as `gyr::sync::Mutex` records them (`gyr.mutex.request`,
//! `acquire`, `release`), and the small deterministic generator behind every synthetic stream.
//!
//! `gyr-bench ordering` pushes these events straight into a `gyr_trace::Timeline`;
//! `gyr-bench web` publishes them to a hub, whose ordering filter and timeline take them in.

use gyr::Sensor;
use gyr::sync::events::{MutexAcquire, MutexRelease, MutexRequest};
use gyr_core::Schema;

/// A small, fast, deterministic generator (SplitMix64): the stream is the same in every run.
#[derive(Debug)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Mutexes the threads take turns on.
const MUTEXES: u64 = 64;
/// Program time of one round, ns: every thread requests, acquires and releases a mutex.
pub(crate) const ROUND_NS: u64 = 10_000;
/// The type ids of `gyr.mutex.request`, `acquire` and `release` in the stream.
pub(crate) const REQUEST: u32 = 1;
pub(crate) const ACQUIRE: u32 = 2;
pub(crate) const RELEASE: u32 = 3;
/// Thread events per thread per round.
pub(crate) const EVENTS_PER_ROUND: u64 = 3;

/// The schemas of the three event types, as `gyr::sync` registers them.
pub(crate) fn schemas() -> Vec<Schema> {
    [
        (REQUEST, MutexRequest::NAME, MutexRequest::fields()),
        (ACQUIRE, MutexAcquire::NAME, MutexAcquire::fields()),
        (RELEASE, MutexRelease::NAME, MutexRelease::fields()),
    ]
    .into_iter()
    .map(|(id, name, fields)| Schema::new(id, name, fields).expect("a valid schema"))
    .collect()
}

/// Threads `1..=threads` taking turns on the mutexes: in round `r`, thread `t` requests mutex
/// `(t + r) % 64` at `r × ROUND_NS + t` ns, acquires it 1–4 µs later and releases it 6–9 µs
/// after the request. Every acquisition and release of round `r` carries `n = r + 1`, so an
/// acquisition needs a release of the round before: a stream delivered round by round is
/// already in causal order (nothing waits in an ordering filter), and each mutex's first
/// acquisition of a round draws an arrow from the last release of the round before.
#[derive(Debug)]
pub(crate) struct Contention {
    threads: u64,
    rng: Rng,
}

impl Contention {
    pub(crate) fn new(threads: u64, seed: u64) -> Self {
        Contention {
            threads,
            rng: Rng(seed),
        }
    }

    /// Rounds that make about `events` events.
    pub(crate) fn rounds(&self, events: u64) -> u64 {
        events / self.threads / EVENTS_PER_ROUND
    }

    /// Round `r`'s events, thread by thread, as `emit(thread, ts_ns, type_id, payload)`.
    pub(crate) fn round(&mut self, r: u64, mut emit: impl FnMut(u64, u64, u32, &[u8])) {
        let mut request = [0u8; 16];
        let mut acquire = [0u8; 16];
        let mut release = [0u8; 16];
        for th in 0..self.threads {
            let base = r * ROUND_NS + th;
            let mutex = (th + r) % MUTEXES;
            MutexRequest { mutex, addr: mutex }.encode(&mut request);
            MutexAcquire { mutex, n: r + 1 }.encode(&mut acquire);
            MutexRelease { mutex, n: r + 1 }.encode(&mut release);
            emit(th + 1, base, REQUEST, &request);
            emit(
                th + 1,
                base + 1000 + self.rng.below(3000),
                ACQUIRE,
                &acquire,
            );
            emit(
                th + 1,
                base + 6000 + self.rng.below(3000),
                RELEASE,
                &release,
            );
        }
    }
}
