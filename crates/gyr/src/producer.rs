//! The application-thread side of the capture path: each thread's buffer and the write path.
//!
//! # The sensor hot path
//!
//! Check switch (done by the caller), stamp, reserve a slot in this thread's ring, write header
//! and payload, commit. Nothing here allocates, locks or makes a system call, unless the ring is
//! full under the Block policy, where the thread waits and the wait is added to its perturbation.
//!
//! A thread gets its buffer on its first event while a runtime runs, and gives it back when it
//! exits: the ring is marked closed, and its monitor drains it and forgets it.

use crate::clock::{Clock, clock};
use crate::config::Policy;
use crate::registry::Limits;
use crate::ring::{Reservation, Reserve, Ring};
use crate::state::{self, RingEntry, Shared};
use gyr_core::record::{RECORD_ALIGN, RECORD_HEADER_LEN, RecordHeader};
use std::cell::{Cell, RefCell, RefMut};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// One thread's attachment to the running runtime.
pub(crate) struct ThreadBuffer {
    epoch: u64,
    entry: Arc<RingEntry>,
    shared: Arc<Shared>,
    producer: crate::ring::Producer,
    clock: &'static Clock,
    seq: u64,
    /// The time stamp of the thread's last record: a stamp read earlier and handed to
    /// [`record_at`] is raised to it, so that a thread's records never go back in time.
    last: u64,
    perturbation: u64,
    policy: Policy,
    /// Per-thread counters for every-Nth rate limits, by the address of the limits.
    nth: HashMap<usize, u64>,
}

impl Drop for ThreadBuffer {
    fn drop(&mut self) {
        self.entry.ring.close();
        // In the child of a fork no monitor runs, and the lock waking one takes may be held
        // for good by a thread the child does not have.
        if !state::FORKED.load(Ordering::Relaxed) {
            self.shared.wake_monitor(self.entry.monitor());
        }
    }
}

/// A thread's attachment cell; its end closes the fast path to it first (see [`local`]).
struct Local(RefCell<Option<ThreadBuffer>>);

impl Drop for Local {
    fn drop(&mut self) {
        fast::close();
    }
}

thread_local! {
    static LOCAL: Local = const { Local(RefCell::new(None)) };
    /// The id this thread's parent reserved for it, with the runtime's epoch.
    static RESERVED: Cell<Option<ReservedThread>> = const { Cell::new(None) };
    /// The name the program gave this thread before its first record ([`name_thread`]).
    static NAME: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The longest name [`name_thread`] keeps, in bytes.
pub(crate) const MAX_THREAD_NAME: usize = 256;

/// Names the calling thread for the next runtime it attaches to (its first record there
/// carries the name); returns whether that is still to come in the running runtime.
pub(crate) fn name_thread(name: &str) -> bool {
    // Every chunk of a trace repeats its threads' descriptions: a name is cut at a bound.
    let mut end = name.len().min(MAX_THREAD_NAME);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let name = &name[..end];
    if NAME
        .try_with(|n| *n.borrow_mut() = Some(name.to_owned()))
        .is_err()
    {
        return false;
    }
    fast::set_named();
    let running = state::current().map(|s| s.epoch);
    LOCAL
        .try_with(|l| {
            l.0.try_borrow()
                .is_ok_and(|b| b.as_ref().is_none_or(|b| Some(b.epoch) != running))
        })
        .unwrap_or(false)
}

/// Whether the program named the calling thread ([`name_thread`]); one load from the static
/// TLS block, cheap enough to ask before every event.
#[inline(always)]
pub(crate) fn thread_named() -> bool {
    fast::named()
}

/// A thread id reserved for a thread about to be created (see [`reserve_thread`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReservedThread {
    pub(crate) epoch: u64,
    pub(crate) id: u64,
}

/// Reserves gyr's id for a thread about to be created, so that the fork event can name the
/// child; `None` when no runtime runs.
pub(crate) fn reserve_thread() -> Option<ReservedThread> {
    let shared = state::current()?;
    Some(ReservedThread {
        epoch: shared.epoch,
        id: shared.reserve_thread(),
    })
}

/// Makes the calling (new) thread take the id its parent reserved, if it has not attached yet.
pub(crate) fn adopt_thread(reserved: ReservedThread) {
    let _ = RESERVED.try_with(|r| r.set(Some(reserved)));
}

/// gyr's id for the calling thread in the running runtime, attaching it if needed.
pub(crate) fn current_thread_id() -> Option<u64> {
    buffer().map(|b| b.entry.info.id)
}

/// Remembers the calling thread's role and index, so that a consumer attaching after its
/// `gyr.thread.role` record learns them with the thread's description. Not a sensor: it
/// allocates and takes the thread's own lock, which only a consumer attaching contends.
pub(crate) fn set_role(role: &str, index: u64) {
    with_buffer(|b| {
        *crate::primitives::lock(&b.entry.role) = Some((role.to_owned(), index));
    });
}

/// Records one event of type `id` with a payload of `len` bytes written by `encode`.
#[inline(always)]
pub(crate) fn record(id: u32, len: usize, encode: impl FnOnce(&mut [u8])) {
    if let Some(mut b) = buffer() {
        b.write(id, len, encode)
    }
}

/// As [`record`], stamped `at` (raw ticks of the same clock, read by the caller) rather than
/// with a clock reading of its own, or with the thread's last record's stamp if that is later.
#[inline(always)]
pub(crate) fn record_at(id: u32, at: u64, len: usize, encode: impl FnOnce(&mut [u8])) {
    if let Some(mut b) = buffer() {
        let at = at.max(b.last);
        b.write_stamped(at, id, len, encode)
    }
}

/// Two [`record_at`]s of one stamp, `first` then `second` (each a type id, a payload length
/// and its encoder), with the thread's buffer found once.
#[inline(always)]
pub(crate) fn record_pair_at(
    at: u64,
    first: (u32, usize, impl FnOnce(&mut [u8])),
    second: (u32, usize, impl FnOnce(&mut [u8])),
) {
    if let Some(mut b) = buffer() {
        let at = at.max(b.last);
        b.write_stamped(at, first.0, first.1, first.2);
        b.write_stamped(at, second.0, second.1, second.2);
    }
}

/// As [`record`], after the rate limits in `limits` admit the event; returns whether they did.
pub(crate) fn record_limited(
    limits: &Limits,
    id: u32,
    len: usize,
    encode: impl FnOnce(&mut [u8]),
) -> bool {
    let mut admitted = false;
    with_buffer(|b| {
        let nth = limits.every_nth.load(Ordering::Relaxed);
        if nth > 1 {
            let key = limits as *const Limits as usize;
            let c = b.nth.entry(key).or_insert(0);
            let admit = c.is_multiple_of(nth);
            *c += 1;
            if !admit {
                limits.skipped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        if !limits.admit_at(b.clock.now_ns()) {
            limits.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        admitted = true;
        b.write(id, len, encode)
    });
    admitted
}

/// Runs `f` on this thread's buffer (attaching one first if needed).
fn with_buffer(f: impl FnOnce(&mut ThreadBuffer)) {
    if let Some(mut b) = buffer() {
        f(&mut b)
    }
}

/// This thread's buffer, attached to the running runtime; `None` (and the event counted as
/// unrecorded) when there is none or the thread is inside gyr already.
///
/// A function returning a guard rather than one taking a closure, so that the sensor's whole
/// write is inlined at its call site: the record's length is then a constant and its bounds
/// checks fold away (measured with callgrind: about 100 instructions per event fewer).
#[inline(always)]
fn buffer<'a>() -> Option<RefMut<'a, ThreadBuffer>> {
    let Some(cell) = local() else {
        // The thread is exiting and its buffer is gone.
        state::count_unrecorded();
        return None;
    };
    let Ok(mut slot) = cell.try_borrow_mut() else {
        // A sensor fired while this thread was inside gyr (from a `Drop` or a sampling
        // closure): count it rather than recurse.
        state::count_unrecorded();
        return None;
    };
    let epoch = state::EPOCH.load(Ordering::Relaxed);
    if !matches!(&*slot, Some(b) if b.epoch == epoch) {
        attach(&mut slot, epoch)?;
    }
    RefMut::filter_map(slot, Option::as_mut).ok()
}

/// This thread's attachment cell, while the thread's `LOCAL` lives.
///
/// `LOCAL` has a destructor, so every access of the `thread_local!` checks its state, and in a
/// shared library (the interposers) finds it through `__tls_get_addr`, a call into the loader:
/// about 2.5 ns per event measured, where the whole sensor costs 17. So the cell's address is
/// also kept in the static TLS block ([`fast`]), read with one `%fs`-relative load.
#[inline(always)]
fn local<'a>() -> Option<&'a RefCell<Option<ThreadBuffer>>> {
    let p = fast::get();
    if !p.is_null() {
        // SAFETY: `fast` holds the address of this thread's `LOCAL` only from `local_slow`'s
        // store, made while it was alive, until `Local::drop` closes it, before the cell is
        // dropped; a thread's `LOCAL` is destroyed only when it exits, which cannot happen
        // while the caller (a sensor call on this thread, which drops its guard before it
        // returns) runs.
        return Some(unsafe { &*p });
    }
    local_slow()
}

#[cold]
#[inline(never)]
fn local_slow<'a>() -> Option<&'a RefCell<Option<ThreadBuffer>>> {
    if fast::closed() {
        return None;
    }
    let p = LOCAL
        .try_with(|l| &l.0 as *const RefCell<Option<ThreadBuffer>>)
        .ok()?;
    fast::set(p);
    // SAFETY: `try_with` returned, so this thread's `LOCAL` is alive, as above.
    Some(unsafe { &*p })
}

/// The fast path to the thread's attachment cell: its address, and whether the thread's
/// `LOCAL` was destroyed, in the static TLS block (initial-exec model; an executable's
/// linker makes it local-exec). Zero in every new thread: not known yet, not closed. A library
/// holding gyr that is loaded with `dlopen` (a Python extension, a plug-in) takes these 16
/// bytes from the room glibc keeps in the static TLS block for such libraries.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod fast {
    use super::ThreadBuffer;
    use std::cell::{Cell, RefCell};

    type Target = RefCell<Option<ThreadBuffer>>;

    #[repr(C)]
    struct Slot {
        cell: Cell<*const Target>,
        closed: Cell<bool>,
        /// The program named this thread ([`super::name_thread`]).
        named: Cell<bool>,
    }

    // 16 zero bytes in `.tbss`, one copy per thread, hidden (shared by this crate's codegen units,
    // exported by no library).
    std::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl gyr_producer_fast_slot",
        ".hidden gyr_producer_fast_slot",
        ".type gyr_producer_fast_slot,@object",
        ".size gyr_producer_fast_slot,16",
        "gyr_producer_fast_slot:",
        ".zero 16",
        ".popsection",
    );

    const _: () = assert!(size_of::<Slot>() <= 16 && align_of::<Slot>() <= 8);

    /// The calling thread's slot.
    #[inline(always)]
    fn slot() -> &'static Slot {
        let p: *const Slot;
        // SAFETY: reads the slot's offset from the thread pointer (a GOT entry the loader
        // fills) and adds the thread pointer (`%fs:0` holds its own address on x86-64
        // Linux): this thread's copy of the 16 bytes above. Writes no memory (the addition
        // changes the flags).
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr [rip + gyr_producer_fast_slot@GOTTPOFF]",
                "add {p}, qword ptr fs:[0]",
                p = out(reg) p,
                options(nostack, readonly, pure),
            );
        }
        // SAFETY: the copy is this thread's, 8-byte aligned, zeroed at the thread's start (a
        // valid `Slot`: null, not closed, not named) and lives as long as the thread; `Slot` is not
        // `Sync` and the reference never leaves this module, so only this thread uses it.
        unsafe { &*p }
    }

    #[inline(always)]
    pub(super) fn get() -> *const Target {
        slot().cell.get()
    }

    pub(super) fn set(p: *const Target) {
        slot().cell.set(p)
    }

    pub(super) fn close() {
        let s = slot();
        s.cell.set(std::ptr::null());
        s.closed.set(true);
    }

    pub(super) fn closed() -> bool {
        slot().closed.get()
    }

    #[inline(always)]
    pub(super) fn named() -> bool {
        slot().named.get()
    }

    pub(super) fn set_named() {
        slot().named.set(true)
    }
}

/// Without the static TLS block, every access takes the `thread_local!` path.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod fast {
    use super::ThreadBuffer;
    use std::cell::{Cell, RefCell};

    thread_local! {
        static NAMED: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn named() -> bool {
        NAMED.try_with(Cell::get).unwrap_or(true)
    }
    pub(super) fn set_named() {
        let _ = NAMED.try_with(|n| n.set(true));
    }

    #[inline(always)]
    pub(super) fn get() -> *const RefCell<Option<ThreadBuffer>> {
        std::ptr::null()
    }
    pub(super) fn set(_: *const RefCell<Option<ThreadBuffer>>) {}
    pub(super) fn close() {}
    pub(super) fn closed() -> bool {
        false
    }
}

#[cold]
#[inline(never)]
fn attach(slot: &mut Option<ThreadBuffer>, epoch: u64) -> Option<&mut ThreadBuffer> {
    // Drop an old attachment first: it closes the old runtime's ring.
    *slot = None;
    let shared = state::current()?;
    if shared.epoch != epoch {
        return None;
    }
    let reserved = RESERVED
        .try_with(Cell::take)
        .ok()
        .flatten()
        .filter(|r| r.epoch == epoch)
        .map(|r| r.id);
    let name = NAME.try_with(|n| n.borrow_mut().take()).ok().flatten();
    let entry = shared.register_thread(reserved, name);
    let policy = shared.config.policy;
    let producer = entry.ring.producer();
    *slot = Some(ThreadBuffer {
        epoch,
        entry,
        shared,
        producer,
        clock: clock(),
        seq: 0,
        last: 0,
        perturbation: 0,
        policy,
        nth: HashMap::new(),
    });
    slot.as_mut()
}

impl ThreadBuffer {
    #[inline(always)]
    fn write(&mut self, type_id: u32, payload_len: usize, encode: impl FnOnce(&mut [u8])) {
        let timestamp = self.clock.raw();
        self.write_stamped(timestamp, type_id, payload_len, encode)
    }

    /// [`ThreadBuffer::write`] with the time stamp given, no earlier than `self.last`.
    #[inline(always)]
    fn write_stamped(
        &mut self,
        timestamp: u64,
        type_id: u32,
        payload_len: usize,
        encode: impl FnOnce(&mut [u8]),
    ) {
        self.last = timestamp;
        self.seq += 1;
        let len = RECORD_HEADER_LEN + payload_len;
        let r = match self.entry.ring.try_reserve(&mut self.producer, len) {
            Reserve::Ok(r) => r,
            Reserve::Wake(r) => {
                // Before the record is written: a wake is a hint, and the monitor finds this
                // record on its next pass if not this one.
                self.shared.wake_monitor(self.entry.monitor());
                r
            }
            Reserve::Full => match self.full(len) {
                Some(r) => r,
                None => return,
            },
            Reserve::TooBig => {
                self.too_big(len);
                return;
            }
        };
        let header = RecordHeader {
            len: len as u32,
            type_id,
            timestamp,
            seq: self.seq,
            perturbation: self.perturbation,
        };
        let ring = &self.entry.ring;
        ring.write(r, len, |slot| {
            if !len.is_multiple_of(RECORD_ALIGN) {
                // Zero the padding (the payload overwrites the rest of the last word).
                let n = slot.len();
                slot[n - RECORD_ALIGN..].fill(0);
            }
            header.write(slot);
            encode(&mut slot[RECORD_HEADER_LEN..len]);
        });
        ring.commit(&mut self.producer, r);
    }

    /// The ring is full: wait (Block) or drop and count (Drop).
    #[cold]
    #[inline(never)]
    fn full(&mut self, len: usize) -> Option<Reservation> {
        if self.policy == Policy::Drop || self.shared.failed.load(Ordering::Relaxed) {
            self.entry.ring.note_dropped(self.seq);
            return None;
        }
        let start = self.clock.raw();
        self.shared.wake_monitor(self.entry.monitor());
        let mut spins = 0u32;
        loop {
            if let Reserve::Ok(r) | Reserve::Wake(r) =
                self.entry.ring.try_reserve(&mut self.producer, len)
            {
                let waited = self.clock.raw().saturating_sub(start);
                self.perturbation += waited;
                self.entry
                    .blocked_ticks
                    .fetch_add(waited, Ordering::Relaxed);
                return Some(r);
            }
            if state::EPOCH.load(Ordering::Relaxed) != self.epoch
                || self.shared.failed.load(Ordering::Relaxed)
            {
                // The runtime shut down while we waited: nobody will drain this ring again.
                self.entry.ring.note_dropped(self.seq);
                return None;
            }
            // Wait politely: spin briefly, then yield the core (the monitor may need it), then
            // sleep; never spin for long on a machine with few cores.
            spins += 1;
            if spins < 32 {
                std::hint::spin_loop();
            } else if spins < 256 {
                std::thread::yield_now();
            } else {
                if spins.is_multiple_of(64) {
                    self.shared.wake_monitor(self.entry.monitor());
                }
                std::thread::sleep(Duration::from_micros(10));
            }
        }
    }

    #[cold]
    fn too_big(&mut self, len: usize) {
        self.entry.ring.note_dropped(self.seq);
        static ONCE: std::sync::Once = std::sync::Once::new();
        let cap = self.entry.ring.capacity();
        ONCE.call_once(|| {
            crate::diag!(
                "gyr: an event of {len} bytes does not fit this thread's {cap}-byte ring (at most a quarter of it); \
                 it is counted as lost. Raise the ring capacity (GYR_RING_CAPACITY) to record such events"
            )
        });
    }
}

/// Measures the fixed cost of one enabled sensor call on a private ring, in ns.
pub(crate) fn measure_sensor_cost() -> f64 {
    let ring = Ring::new(1 << 16);
    let mut p = ring.producer();
    let c = clock();
    let mut head = 0usize;
    let payload = [7u8; 16];
    let rounds = 20_000u64;
    let t0 = std::time::Instant::now();
    for seq in 0..rounds {
        let ts = c.raw();
        let len = RECORD_HEADER_LEN + payload.len();
        if let Reserve::Ok(r) | Reserve::Wake(r) = ring.try_reserve(&mut p, len) {
            ring.write(r, len, |slot| {
                RecordHeader {
                    len: len as u32,
                    type_id: 1,
                    timestamp: ts,
                    seq,
                    perturbation: 0,
                }
                .write(slot);
                slot[RECORD_HEADER_LEN..len].copy_from_slice(&payload);
            });
            ring.commit(&mut p, r);
        } else {
            ring.drain(&mut head, |_| {});
        }
    }
    t0.elapsed().as_nanos() as f64 / rounds as f64
}
