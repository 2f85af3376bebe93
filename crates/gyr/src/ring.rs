//! The per-thread ring: a single-producer, single-consumer queue of variable-length records.
//!
//! # Why one ring per thread
//!
//! Falcon gave each thread its own event buffer so that sensors never contend: the thread that
//! emits is the only writer, a local monitor is the only reader, and the two meet on two
//! counters. A shared queue looks as fast with one thread and falls apart with two.
//!
//! # Protocol
//!
//! `head` and `tail` count bytes since the ring was made and only grow; a position in the buffer
//! is the count modulo the capacity (a power of two). The producer owns `[tail, head + capacity)`,
//! writes a record there, then publishes it with a release store of `tail`. The consumer owns
//! `[head, tail)`, reads, then returns the space with a release store of `head`. Each side reads
//! the other's counter with acquire, so a record's bytes are visible before its counter is.
//!
//! A record never straddles the end of the buffer: when it does not fit before the end, the
//! producer writes a [`WRAP`] marker in the record's length slot and starts the record at 0. It
//! also notes where it wrapped (per lap, in `wraps`), so that the consumer copies whole runs
//! without walking the records: a walk is a chain of dependent loads from memory the producer's
//! core just wrote, and it cost the monitor more than the copy.
//!
//! # Loss and back-pressure
//!
//! When the ring is full the producer either waits (Block; the wait is added to its
//! perturbation) or drops the event (Drop). A dropped event still consumes a sequence number and
//! is announced through [`Ring::note_dropped`]: the consumer turns gaps in the sequence into
//! `gyr.lost` events, so nothing is lost silently.

use crate::primitives::{AtomicBool, AtomicU64, AtomicUsize, ByteBuf, Ordering};
use gyr_core::record::stride;

/// The length value that marks "skip to the start of the buffer".
pub(crate) const WRAP: u32 = u32::MAX;

/// Pads a hot counter to its own cache line so producer and consumer do not false-share.
#[repr(align(128))]
#[derive(Debug)]
struct Padded<T>(T);

/// The shared part of a ring.
#[derive(Debug)]
pub(crate) struct Ring {
    buf: ByteBuf,
    mask: usize,
    tail: Padded<AtomicUsize>,
    head: Padded<AtomicUsize>,
    /// Where the producer wrote a [`WRAP`] marker, as a count, for the last two laps (indexed by
    /// the lap's parity); `usize::MAX` when none yet. The consumer's head is never more than one
    /// lap behind the producer, so the entry for its lap is never overwritten before it is used.
    wraps: [AtomicUsize; 2],
    /// The highest sequence number the producer dropped (0: none yet).
    last_dropped: AtomicU64,
    /// Set by the producer when its thread exits: drain, then forget the ring.
    closed: AtomicBool,
    /// Set by the producer when it asked the monitor to come early; cleared by the monitor.
    wake_requested: AtomicBool,
}

/// The producer's private view of its ring.
#[derive(Debug)]
pub(crate) struct Producer {
    tail: usize,
    /// The tail position past which the producer must look at `head` again: where the ring
    /// is full by its last look, where it passes half full and the consumer should be woken,
    /// the end of the buffer, or [`Ring::max_record`] past the last look (so that a record too
    /// big for the ring never passes the fast path), whichever comes first.
    limit: usize,
    /// [`Ring::max_record`], kept beside the tail.
    max_record: usize,
}

/// Where a reserved record goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reservation {
    /// Buffer offset of the record.
    pub(crate) pos: usize,
    /// Bytes the tail advances by, wrap padding included.
    advance: usize,
}

/// The outcome of [`Ring::try_reserve`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reserve {
    Ok(Reservation),
    /// As `Ok`, and the ring just passed half full: wake the consumer early.
    Wake(Reservation),
    /// No room now.
    Full,
    /// The record can never fit in this ring.
    TooBig,
}

impl Ring {
    /// A ring of `capacity` bytes, rounded up to a power of two (at least 256).
    pub(crate) fn new(capacity: usize) -> Self {
        let cap = capacity.max(256).next_power_of_two();
        Ring {
            buf: ByteBuf::new(cap),
            mask: cap - 1,
            tail: Padded(AtomicUsize::new(0)),
            head: Padded(AtomicUsize::new(0)),
            wraps: [AtomicUsize::new(usize::MAX), AtomicUsize::new(usize::MAX)],
            last_dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            wake_requested: AtomicBool::new(false),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// The largest record (header and payload) this ring accepts: a quarter of it, so that one
    /// record never monopolises the ring.
    pub(crate) fn max_record(&self) -> usize {
        self.capacity() / 4
    }

    pub(crate) fn producer(&self) -> Producer {
        Producer {
            tail: 0,
            limit: self.max_record(),
            max_record: self.max_record(),
        }
    }

    /// Bytes written and not yet consumed, as the consumer sees it.
    pub(crate) fn used(&self) -> usize {
        self.tail
            .0
            .load(Ordering::Acquire)
            .wrapping_sub(self.head.0.load(Ordering::Acquire))
    }

    /// Reserves room for a record of `len` bytes (header and payload).
    ///
    /// The fast path is one comparison: `limit` is kept where the producer must look again (the
    /// ring full by its last look, half full, the end of the buffer, where a record may have to
    /// wrap, or a quarter ring on), so that a record below it needs no other check.
    #[inline(always)]
    pub(crate) fn try_reserve(&self, p: &mut Producer, len: usize) -> Reserve {
        let need = stride(len);
        if p.tail + need <= p.limit {
            return Reserve::Ok(Reservation {
                pos: p.tail & self.mask,
                advance: need,
            });
        }
        self.reserve_slow(p, need)
    }

    /// Looks at `head` again, wraps at the end of the buffer, asks for an early drain when the
    /// ring passes half full, and sets the next `limit`.
    #[cold]
    #[inline(never)]
    fn reserve_slow(&self, p: &mut Producer, need: usize) -> Reserve {
        if need > p.max_record {
            return Reserve::TooBig;
        }
        let cap = self.capacity();
        let pos = p.tail & self.mask;
        let to_end = cap - pos;
        let advance = if need <= to_end { need } else { to_end + need };
        let head = self.head.0.load(Ordering::Acquire);
        let used = p.tail - head;
        if used + advance > cap {
            // Full: look again on the next try.
            p.limit = p.tail;
            return Reserve::Full;
        }
        let mut wake = false;
        let look_again = if used + advance > cap / 2 {
            // Half full: ask for an early drain (once), and look again only when full.
            wake = !self.wake_requested.swap(true, Ordering::Relaxed);
            head + cap
        } else {
            head + cap / 2
        };
        // Where this record starts, as a count, and where the buffer ends after it.
        let start = p.tail + (advance - need);
        let buffer_end = (start | self.mask) + 1;
        p.limit = look_again.min(buffer_end).min(start + need + p.max_record);
        let ok = if wake { Reserve::Wake } else { Reserve::Ok };
        if advance != need {
            // SAFETY: `pos..pos + 4` lies in the producer's region (checked above: the whole
            // `advance` is free), and 4 <= to_end because positions are multiples of 8.
            unsafe {
                self.buf
                    .with_mut(pos, 4, |b| b.copy_from_slice(&WRAP.to_le_bytes()))
            };
            // Published by `commit`'s release store of the tail, like the marker itself.
            self.wraps[(p.tail / cap) & 1].store(p.tail, Ordering::Relaxed);
            return ok(Reservation { pos: 0, advance });
        }
        ok(Reservation { pos, advance })
    }

    /// Writes the reserved record with `f`, which gets exactly `stride(len)` bytes.
    #[inline(always)]
    pub(crate) fn write<R>(&self, r: Reservation, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        // SAFETY: `try_reserve` checked that `r.pos .. r.pos + stride(len)` is free and in
        // bounds; only this producer writes there until `commit` publishes it.
        unsafe { self.buf.with_mut(r.pos, stride(len), f) }
    }

    /// Publishes the record written at `r`.
    #[inline(always)]
    pub(crate) fn commit(&self, p: &mut Producer, r: Reservation) {
        p.tail += r.advance;
        self.tail.0.store(p.tail, Ordering::Release);
    }

    /// Announces that the event with sequence number `seq` was dropped.
    pub(crate) fn note_dropped(&self, seq: u64) {
        self.last_dropped.store(seq, Ordering::Release);
    }

    /// The highest dropped sequence number so far. Load it *before* draining: every record
    /// with a lower sequence number is then either in the ring or was dropped.
    pub(crate) fn last_dropped(&self) -> u64 {
        self.last_dropped.load(Ordering::Acquire)
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the producer asked for an early drain; clears the request.
    pub(crate) fn take_wake_request(&self) -> bool {
        self.wake_requested.swap(false, Ordering::Relaxed)
    }

    /// Consumes everything published so far, calling `f` with runs of whole records that are
    /// contiguous in the buffer. `head` is the consumer's private copy of the head counter.
    /// Returns the bytes consumed.
    pub(crate) fn drain(&self, head: &mut usize, mut f: impl FnMut(&[u8])) -> usize {
        let tail = self.tail.0.load(Ordering::Acquire);
        let start = *head;
        let cap = self.capacity();
        while *head != tail {
            let lap = *head / cap;
            let lap_end = (lap + 1) * cap;
            // The wrap marker of this lap, if the producer has published one: the acquire load
            // of `tail` above makes the relaxed store before its release visible here.
            let wrap = self.wraps[lap & 1].load(Ordering::Relaxed);
            let wrapped = wrap != usize::MAX && wrap / cap == lap && wrap < tail;
            let end = if wrapped { wrap } else { tail.min(lap_end) };
            if end > *head {
                // SAFETY: `head..end` lies in one lap, so it is contiguous in the buffer, and it
                // holds whole published records in the consumer's region `[head, tail)`.
                unsafe { self.buf.with(*head & self.mask, end - *head, &mut f) };
            }
            *head = if wrapped { lap_end } else { end };
        }
        self.head.0.store(*head, Ordering::Release);
        *head - start
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use gyr_core::record::{RecordHeader, Records};
    use std::sync::Arc;

    fn put(ring: &Ring, p: &mut Producer, seq: u64, payload: &[u8]) -> bool {
        let len = 32 + payload.len();
        match ring.try_reserve(p, len) {
            Reserve::Ok(r) | Reserve::Wake(r) => {
                ring.write(r, len, |slot| {
                    RecordHeader {
                        len: len as u32,
                        type_id: 1,
                        timestamp: 0,
                        seq,
                        perturbation: 0,
                    }
                    .write(slot);
                    slot[32..len].copy_from_slice(payload);
                });
                ring.commit(p, r);
                true
            }
            _ => false,
        }
    }

    #[test]
    fn wraps_and_fills() {
        let ring = Ring::new(256);
        let mut p = ring.producer();
        let mut head = 0;
        let mut seen = Vec::new();
        for round in 0..50u64 {
            let n = (round % 3) as usize * 8 + 1;
            assert!(put(&ring, &mut p, round, &vec![round as u8; n]));
            if round % 2 == 1 {
                ring.drain(&mut head, |run| {
                    for r in Records::new(0, run) {
                        let r = r.unwrap();
                        assert!(r.payload.iter().all(|&b| b == r.header.seq as u8));
                        seen.push(r.header.seq);
                    }
                });
            }
        }
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
        // A full ring refuses, and a record bigger than a quarter never fits.
        let mut k = 0;
        while put(&ring, &mut p, k, &[0; 24]) {
            k += 1;
        }
        assert!(k >= 3);
        assert!(matches!(ring.try_reserve(&mut p, 65), Reserve::TooBig));
    }

    #[test]
    fn stress_two_threads() {
        let ring = Arc::new(Ring::new(1024));
        let r2 = ring.clone();
        const N: u64 = 200_000;
        let consumer = std::thread::spawn(move || {
            let mut head = 0;
            let mut next = 0u64;
            while next < N {
                r2.drain(&mut head, |run| {
                    for r in Records::new(0, run) {
                        let r = r.unwrap();
                        assert_eq!(r.header.seq, next);
                        assert_eq!(r.payload.len(), (next % 40) as usize);
                        assert!(r.payload.iter().all(|&b| b == next as u8));
                        next += 1;
                    }
                });
                std::thread::yield_now();
            }
        });
        let mut p = ring.producer();
        for seq in 0..N {
            let payload = vec![seq as u8; (seq % 40) as usize];
            while !put(&ring, &mut p, seq, &payload) {
                std::thread::yield_now();
            }
        }
        consumer.join().unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use gyr_core::record::{RecordHeader, Records};
    use loom::sync::Arc;

    /// One producer writes records of varying size through a ring small enough to wrap; the
    /// consumer must see every record whole, in order, and loom must find no unordered access.
    /// (Wrapping twice, to reuse both `wraps` entries, takes loom minutes: `stress_two_threads`
    /// wraps thousands of times with real threads instead.)
    #[test]
    fn spsc_ring_is_ordered_and_race_free() {
        // A preemption bound keeps the search finite with spinning producer and consumer; the
        // loom docs find bounds of 2-3 catch nearly all real ordering bugs.
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(2);
        model.check(|| {
            let ring = Arc::new(Ring::new(256));
            let r2 = ring.clone();
            let producer = loom::thread::spawn(move || {
                let mut p = r2.producer();
                for seq in 0..5u64 {
                    let len = 32 + 24 + (seq as usize % 2) * 8;
                    loop {
                        match r2.try_reserve(&mut p, len) {
                            Reserve::Ok(r) | Reserve::Wake(r) => {
                                r2.write(r, len, |slot| {
                                    RecordHeader {
                                        len: len as u32,
                                        type_id: 1,
                                        timestamp: 0,
                                        seq,
                                        perturbation: 0,
                                    }
                                    .write(slot);
                                    slot[32..len].fill(seq as u8);
                                });
                                r2.commit(&mut p, r);
                                break;
                            }
                            _ => loom::thread::yield_now(),
                        }
                    }
                }
            });
            let mut head = 0;
            let mut next = 0u64;
            while next < 5 {
                ring.drain(&mut head, |run| {
                    for r in Records::new(0, run) {
                        let r = r.unwrap();
                        assert_eq!(r.header.seq, next);
                        assert!(r.payload.iter().all(|&b| b == next as u8));
                        next += 1;
                    }
                });
                loom::thread::yield_now();
            }
            producer.join().unwrap();
        });
    }
}
