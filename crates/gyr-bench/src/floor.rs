//! The physical floor of capture: read the timestamp and copy a 64-byte payload into a
//! preallocated per-thread single-producer single-consumer ring, written by hand with nothing
//! else (no switch, no sequence number, no header, no thread-local lookup).
//!
//! Slots are words stored with relaxed atomics, which compile to plain moves on x86 and need no
//! `unsafe`; the tail is published with one release store, as in any SPSC ring.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Words per slot: the timestamp and eight payload words.
const SLOT_WORDS: usize = 9;

#[derive(Debug)]
#[repr(align(128))]
struct Padded(AtomicUsize);

/// One thread's ring.
#[derive(Debug)]
pub(crate) struct FloorRing {
    words: Box<[AtomicU64]>,
    mask: usize,
    tail: Padded,
    head: Padded,
}

impl FloorRing {
    pub(crate) fn new(slots: usize) -> Arc<Self> {
        let slots = slots.next_power_of_two();
        Arc::new(FloorRing {
            words: (0..slots * SLOT_WORDS).map(|_| AtomicU64::new(0)).collect(),
            mask: slots - 1,
            tail: Padded(AtomicUsize::new(0)),
            head: Padded(AtomicUsize::new(0)),
        })
    }

    /// Drains everything published into `out`, as any consumer that keeps the events must;
    /// returns the slots consumed.
    pub(crate) fn drain(&self, out: &mut Vec<u64>) -> usize {
        let tail = self.tail.0.load(Ordering::Acquire);
        let head = self.head.0.load(Ordering::Relaxed);
        out.clear();
        for i in head..tail {
            let base = (i & self.mask) * SLOT_WORDS;
            out.extend(
                self.words[base..base + SLOT_WORDS]
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed)),
            );
        }
        std::hint::black_box(&out);
        self.head.0.store(tail, Ordering::Release);
        tail - head
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tail.0.load(Ordering::Acquire) == self.head.0.load(Ordering::Acquire)
    }
}

/// The producer's side of one ring.
#[derive(Debug)]
pub(crate) struct FloorProducer {
    ring: Arc<FloorRing>,
    tail: usize,
    cached_head: usize,
    clock: quanta::Clock,
}

impl FloorProducer {
    pub(crate) fn new(ring: Arc<FloorRing>, clock: quanta::Clock) -> Self {
        FloorProducer {
            ring,
            tail: 0,
            cached_head: 0,
            clock,
        }
    }

    /// Stamps and copies one 64-byte payload.
    #[inline(always)]
    pub(crate) fn record(&mut self, payload: &[u64; 8]) {
        let ts = self.clock.raw();
        let cap = self.ring.mask + 1;
        while self.tail - self.cached_head >= cap {
            self.cached_head = self.ring.head.0.load(Ordering::Acquire);
            if self.tail - self.cached_head >= cap {
                std::thread::yield_now();
            }
        }
        let base = (self.tail & self.ring.mask) * SLOT_WORDS;
        let slot = &self.ring.words[base..base + SLOT_WORDS];
        slot[0].store(ts, Ordering::Relaxed);
        for (w, v) in slot[1..].iter().zip(payload) {
            w.store(*v, Ordering::Relaxed);
        }
        self.tail += 1;
        self.ring.tail.0.store(self.tail, Ordering::Release);
    }
}

/// A consumer thread draining rings with short sleeps, like a local monitor: it copies every
/// event out (a consumer that keeps nothing would flatter the floor).
#[derive(Debug)]
pub(crate) struct FloorConsumer {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl FloorConsumer {
    pub(crate) fn start(rings: Vec<Arc<FloorRing>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut out = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let n: usize = rings.iter().map(|r| r.drain(&mut out)).sum();
                if n < 1024 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        FloorConsumer {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for FloorConsumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_ring_delivers_every_slot() {
        let ring = FloorRing::new(64);
        let mut p = FloorProducer::new(ring.clone(), quanta::Clock::new());
        let consumer = FloorConsumer::start(vec![ring.clone()]);
        for i in 0..10_000u64 {
            p.record(&[i; 8]);
        }
        while !ring.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(consumer);
        assert_eq!(ring.tail.0.load(Ordering::Relaxed), 10_000);
    }
}
