//! The physical floor of capture: read the timestamp and copy the payload into the next
//! cache-aligned slot of this thread's single-producer ring, found through a `thread_local!`,
//! while a consumer thread drains every ring concurrently and sleeps 20 µs when it finds nothing.
//!
//! No gyr code runs here: no switch, no sequence number, no record header, no epoch check. A
//! second variant ([`Layout::Header`]) also writes the 32-byte header gyr writes before each
//! payload (length and type, timestamp, sequence number, perturbation), so that the header's
//! share of the cost is visible beside the floor.
//!
//! The `tracing` peer records its events into the same rings ([`push`]), so that peer and floor
//! pay for storage alike.

use std::cell::{RefCell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Words per slot: two cache lines, room for a 32-byte header and a 64-byte payload.
pub(crate) const SLOT_WORDS: usize = 16;

/// Slots per ring: by default 256 K slots of 128 bytes, 32 MiB, as gyr's rings in the same
/// benchmark ([`set_ring_bytes`] changes it before the first ring is made).
static RING_SLOTS: AtomicUsize = AtomicUsize::new(1 << 18);

/// Sizes the rings made from now on to `bytes`.
pub(crate) fn set_ring_bytes(bytes: usize) {
    RING_SLOTS.store((bytes / (SLOT_WORDS * 8)).max(16), Ordering::Relaxed);
}

/// One slot, aligned to a cache line so that no slot straddles one more line than it must.
#[repr(C, align(64))]
struct Slot(UnsafeCell<[u64; SLOT_WORDS]>);

#[repr(align(128))]
struct Padded(AtomicUsize);

/// One thread's ring: the producer owns the slots in `[tail, head + len)`, the consumer those in
/// `[head, tail)`; each publishes with a release store and reads the other's counter with acquire.
pub(crate) struct SlotRing {
    slots: Box<[Slot]>,
    mask: usize,
    tail: Padded,
    head: Padded,
}

// SAFETY: a slot is only written by the ring's one producer while it lies in `[tail, head +
// len)` and only read by the consumer while it lies in `[head, tail)`; the release/acquire pairs
// on `tail` and `head` order those accesses (the standard SPSC protocol). The `stress` test
// below checks every slot arrives whole.
unsafe impl Sync for SlotRing {}

impl SlotRing {
    fn new(slots: usize) -> Self {
        let slots = slots.next_power_of_two();
        SlotRing {
            slots: (0..slots)
                .map(|_| Slot(UnsafeCell::new([0; SLOT_WORDS])))
                .collect(),
            mask: slots - 1,
            tail: Padded(AtomicUsize::new(0)),
            head: Padded(AtomicUsize::new(0)),
        }
    }

    fn is_empty(&self) -> bool {
        self.tail.0.load(Ordering::Acquire) == self.head.0.load(Ordering::Acquire)
    }

    /// Consumes what is published, reading each slot's first word (a consumer that never
    /// touched the events would flatter the floor); returns the slots consumed.
    fn drain(&self, sum: &mut u64) -> usize {
        let tail = self.tail.0.load(Ordering::Acquire);
        let head = self.head.0.load(Ordering::Relaxed);
        for i in head..tail {
            // SAFETY: `i` is in `[head, tail)`, which the producer published and does not write.
            let first = unsafe { (*self.slots[i & self.mask].0.get())[0] };
            *sum = sum.wrapping_add(first);
        }
        self.head.0.store(tail, Ordering::Release);
        tail - head
    }
}

/// The producer's side of one ring, kept in a thread-local.
struct Producer {
    ring: Arc<SlotRing>,
    tail: usize,
    cached_head: usize,
}

impl Producer {
    /// Writes the next slot with `fill` and publishes it; waits (yielding) while the ring is full.
    #[inline(always)]
    fn push(&mut self, fill: impl FnOnce(&mut [u64; SLOT_WORDS])) {
        let len = self.ring.mask + 1;
        if self.tail - self.cached_head >= len {
            self.wait_for_room(len);
        }
        // SAFETY: `slots.len()` is `mask + 1`, so the masked index is in bounds.
        let slot = unsafe { self.ring.slots.get_unchecked(self.tail & self.ring.mask) };
        // SAFETY: the slot at `tail` is in `[tail, head + len)` (checked just above), which only
        // this producer accesses until the release store of `tail` below publishes it.
        fill(unsafe { &mut *slot.0.get() });
        self.tail += 1;
        self.ring.tail.0.store(self.tail, Ordering::Release);
    }

    #[cold]
    #[inline(never)]
    fn wait_for_room(&mut self, len: usize) {
        loop {
            self.cached_head = self.ring.head.0.load(Ordering::Acquire);
            if self.tail - self.cached_head < len {
                return;
            }
            std::thread::yield_now();
        }
    }
}

/// Every ring made in this process, for the consumer.
static RINGS: Mutex<Vec<Arc<SlotRing>>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: RefCell<Option<Producer>> = const { RefCell::new(None) };
}

/// Writes one slot of this thread's ring with `fill` (the ring is made on first use).
#[inline(always)]
pub(crate) fn push(fill: impl FnOnce(&mut [u64; SLOT_WORDS])) {
    // A tiny closure, so that `with` is inlined and the copy sees constant offsets (as gyr's
    // sensor does).
    let l = LOCAL.with(|l| l as *const RefCell<Option<Producer>>);
    // SAFETY: `with` returned, so this thread's `LOCAL` is alive, and it is destroyed only when
    // the thread exits, which cannot happen during this call.
    let mut l = unsafe { &*l }.borrow_mut();
    let p = match l.as_mut() {
        Some(p) => p,
        None => attach(&mut l),
    };
    p.push(fill)
}

#[cold]
#[inline(never)]
fn attach(slot: &mut Option<Producer>) -> &mut Producer {
    let ring = Arc::new(SlotRing::new(RING_SLOTS.load(Ordering::Relaxed)));
    RINGS.lock().unwrap().push(ring.clone());
    slot.insert(Producer {
        ring,
        tail: 0,
        cached_head: 0,
    })
}

/// What the floor writes per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The timestamp and the payload.
    Physical,
    /// gyr's 32-byte record header (length and type, timestamp, sequence, perturbation), then
    /// the payload.
    Header,
}

thread_local! {
    static SEQ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Records one event of eight payload words.
#[inline(always)]
pub(crate) fn record(layout: Layout, clock: &quanta::Clock, payload: &[u64; 8]) {
    let ts = stamp(clock);
    match layout {
        Layout::Physical => push(|s| {
            s[0] = ts;
            s[1..9].copy_from_slice(payload);
        }),
        Layout::Header => {
            let seq = SEQ.with(|c| {
                let s = c.get() + 1;
                c.set(s);
                s
            });
            push(|s| {
                s[0] = (32 + 64) | (7 << 32);
                s[1] = ts;
                s[2] = seq;
                s[3] = 0;
                s[4..12].copy_from_slice(payload);
            })
        }
    }
}

/// Reads the time-stamp counter, inlined (quanta's `raw` dispatches over its clock sources).
#[inline(always)]
pub(crate) fn stamp(clock: &quanta::Clock) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let _ = clock;
        // SAFETY: `rdtsc` exists on every x86_64 CPU and only reads the time-stamp counter.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    clock.raw()
}

/// Whether every ring is empty (between timed runs).
pub(crate) fn drained() -> bool {
    RINGS.lock().unwrap().iter().all(|r| r.is_empty())
}

/// The consumer thread: drains every ring, sleeping 20 µs after a pass that found nothing.
pub(crate) struct Consumer {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Consumer {
    pub(crate) fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut sum = 0u64;
            let mut rings: Vec<Arc<SlotRing>> = Vec::new();
            while !s.load(Ordering::Relaxed) {
                {
                    let all = RINGS.lock().unwrap();
                    if all.len() != rings.len() {
                        rings = all.clone();
                    }
                }
                let n: usize = rings.iter().map(|r| r.drain(&mut sum)).sum();
                if n == 0 {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
            sum
        });
        Consumer {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = std::hint::black_box(h.join());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two producers through small rings that wrap many times: every slot arrives whole and in
    /// order (the `unsafe` above stands on this).
    #[test]
    fn stress_every_slot_arrives_whole() {
        let rings: Vec<Arc<SlotRing>> = (0..2).map(|_| Arc::new(SlotRing::new(16))).collect();
        const N: u64 = 200_000;
        let producers: Vec<_> = rings
            .iter()
            .map(|r| {
                let mut p = Producer {
                    ring: r.clone(),
                    tail: 0,
                    cached_head: 0,
                };
                std::thread::spawn(move || {
                    for i in 0..N {
                        p.push(|s| s.fill(i));
                    }
                })
            })
            .collect();
        let mut next = [0u64; 2];
        while next.iter().any(|&n| n < N) {
            for (k, r) in rings.iter().enumerate() {
                let tail = r.tail.0.load(Ordering::Acquire);
                let head = r.head.0.load(Ordering::Relaxed);
                for i in head..tail {
                    // SAFETY: as in `drain`: `[head, tail)` is published and the consumer's.
                    let s = unsafe { *r.slots[i & r.mask].0.get() };
                    assert!(s.iter().all(|&w| w == next[k]), "slot {i} torn: {s:?}");
                    next[k] += 1;
                }
                r.head.0.store(tail, Ordering::Release);
            }
            std::thread::yield_now();
        }
        for p in producers {
            p.join().unwrap();
        }
    }
}
