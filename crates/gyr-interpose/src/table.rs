//! The side tables: what gyr knows of each pthread object (its id and sequence numbers) and of
//! each thread (its id), found by address.
//!
//! # Why a table of fixed size
//!
//! A C program's `pthread_mutex_t` has no room for gyr's id and counters, so they live beside
//! it, keyed by the object's address. The table is looked up on every lock and unlock, on
//! threads that may hold other locks or be inside `malloc`: it takes no lock, never allocates
//! (it is a zeroed static, so the pages of slots never used cost nothing) and looks at a
//! bounded number of slots.
//!
//! # Open addressing
//!
//! An address hashes to a home slot; its entry is in the first of [`MAX_PROBES`] slots from
//! there whose key is the address. A new address takes the first free slot on its way (never
//! used, or freed), claimed with a compare-and-swap, so two threads inserting the same address
//! at once agree on one slot. `_destroy` (and `_init`, for an object made again in place) frees
//! the slot after clearing it, so an address used again later gets a fresh id and fresh counts.
//! A freed slot is taken again by whichever address comes first.
//!
//! In one rare race two slots can end up holding one address (a slot on its way freed by
//! another object's destroy while two threads insert the same new object at once). Each half
//! still counts its acquisitions under the lock and its signals atomically, so the ordering
//! filter still sees consistent sequences, only two objects where there is one.
//!
//! # When the table is full
//!
//! An object that finds no slot is recorded without ordering: object id 0 and sequence number
//! 0, which the ordering filter lets pass without waiting. Each such event is counted
//! ([`Table::overflows`]) and the count is reported at exit.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slots looked at for one address, at most.
pub(crate) const MAX_PROBES: usize = 64;

/// A key of a slot never used.
const EMPTY: usize = 0;
/// A key of a slot freed (a tombstone: lookups go on past it).
const FREED: usize = 1;

/// What gyr knows of one object. A slot has a cache line of its own, so that two locks used by
/// different threads do not share one.
#[derive(Debug)]
#[repr(align(64))]
pub(crate) struct Slot {
    key: AtomicUsize,
    id: AtomicU64,
    /// Acquisitions (mutexes), writes (rwlocks), signals and broadcasts (conditions), arrivals
    /// (barriers).
    pub(crate) count: AtomicU64,
    /// The thread holding a mutex or a write lock (its `pthread_self`), 0 when no recorded
    /// holder.
    pub(crate) owner: AtomicU64,
    /// A mutex's holds beyond the first by its owner (recursive mutexes); a barrier's parties;
    /// a thread's id in the thread table.
    pub(crate) aux: AtomicU64,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            key: AtomicUsize::new(EMPTY),
            id: AtomicU64::new(0),
            count: AtomicU64::new(0),
            owner: AtomicU64::new(0),
            aux: AtomicU64::new(0),
        }
    }

    /// gyr's id of the object, assigned on first use.
    #[inline]
    pub(crate) fn id(&self) -> u64 {
        match self.id.load(Ordering::Relaxed) {
            0 => self.assign(),
            id => id,
        }
    }

    #[cold]
    fn assign(&self) -> u64 {
        let id = gyr::sync::events::new_object_id();
        match self
            .id
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => id,
            Err(other) => other,
        }
    }
}

/// A table of `N` slots (a power of two).
#[derive(Debug)]
pub(crate) struct Table<const N: usize> {
    slots: [Slot; N],
    overflows: AtomicU64,
}

impl<const N: usize> Table<N> {
    /// An empty table (all zeros, so a static one lives in `.bss`).
    pub(crate) const fn new() -> Self {
        assert!(N.is_power_of_two() && N >= MAX_PROBES);
        Table {
            slots: [const { Slot::new() }; N],
            overflows: AtomicU64::new(0),
        }
    }

    /// The slots an address may be in, in the order they are looked at.
    #[inline]
    fn probe(&self, key: usize) -> impl Iterator<Item = &Slot> {
        // Fibonacci hashing of the address without its alignment bits.
        let h = ((key as u64) >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let home = (h >> (64 - N.trailing_zeros())) as usize;
        (0..MAX_PROBES).map(move |i| &self.slots[(home + i) & (N - 1)])
    }

    /// The slot of `key`, if it has one.
    #[inline]
    pub(crate) fn find(&self, key: usize) -> Option<&Slot> {
        for slot in self.probe(key) {
            match slot.key.load(Ordering::Acquire) {
                k if k == key => return Some(slot),
                EMPTY => return None,
                _ => {}
            }
        }
        None
    }

    /// The slot of `key`, taking one if it has none; `None` (counted) when none is free.
    #[inline]
    pub(crate) fn find_or_insert(&self, key: usize) -> Option<&Slot> {
        debug_assert!(key > FREED);
        if let Some(slot) = self.find(key) {
            return Some(slot);
        }
        self.insert(key)
    }

    #[cold]
    #[inline(never)]
    fn insert(&self, key: usize) -> Option<&Slot> {
        for slot in self.probe(key) {
            let mut k = slot.key.load(Ordering::Acquire);
            loop {
                if k == key {
                    return Some(slot);
                }
                if k != EMPTY && k != FREED {
                    break;
                }
                match slot
                    .key
                    .compare_exchange(k, key, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Some(slot),
                    Err(now) => k = now,
                }
            }
        }
        self.overflows.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Frees the slot of `key`, if it has one: cleared first, so whoever takes it next starts
    /// from nothing.
    pub(crate) fn remove(&self, key: usize) {
        if let Some(slot) = self.find(key) {
            slot.id.store(0, Ordering::Relaxed);
            slot.count.store(0, Ordering::Relaxed);
            slot.owner.store(0, Ordering::Relaxed);
            slot.aux.store(0, Ordering::Relaxed);
            let _ = slot
                .key
                .compare_exchange(key, FREED, Ordering::Release, Ordering::Relaxed);
        }
    }

    /// Counts one event recorded without ordering because the table was full.
    pub(crate) fn overflowed(&self) {
        self.overflows.fetch_add(1, Ordering::Relaxed);
    }

    /// Events recorded without ordering because the table was full, so far.
    pub(crate) fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }
}

/// Objects (mutexes, conditions, rwlocks, barriers) followed at once, at most: 64 Ki slots of
/// 64 bytes, 4 MiB of address space of which only the pages of used slots are ever touched.
pub(crate) const OBJECT_SLOTS: usize = 1 << 16;

/// Joinable threads followed at once, at most (for the id a join names).
pub(crate) const THREAD_SLOTS: usize = 1 << 12;

/// Every object's slot.
pub(crate) static OBJECTS: Table<OBJECT_SLOTS> = Table::new();

/// Every joinable thread's id, by `pthread_t`, in `aux`.
pub(crate) static THREADS: Table<THREAD_SLOTS> = Table::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_keeps_its_slot_and_a_destroyed_one_gets_a_fresh_id() {
        let t: Box<Table<64>> = Box::new(Table::new());
        let a = t.find_or_insert(0x1000).unwrap();
        let id = a.id();
        a.count.store(5, Ordering::Relaxed);
        let again = t.find_or_insert(0x1000).unwrap();
        assert!(std::ptr::eq(a, again));
        assert_eq!(again.id(), id);
        t.remove(0x1000);
        assert!(t.find(0x1000).is_none());
        let fresh = t.find_or_insert(0x1000).unwrap();
        assert_ne!(fresh.id(), id);
        assert_eq!(fresh.count.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_full_table_refuses_and_counts_and_a_freed_slot_is_taken_again() {
        let t: Box<Table<64>> = Box::new(Table::new());
        for i in 0..64 {
            assert!(t.find_or_insert(0x10_000 + i * 64).is_some(), "slot {i}");
        }
        assert!(t.find_or_insert(0x99_000).is_none());
        assert_eq!(t.overflows(), 1);
        // Every earlier address is still found, past the full chain.
        for i in 0..64 {
            assert!(t.find(0x10_000 + i * 64).is_some());
        }
        t.remove(0x10_000 + 7 * 64);
        assert!(t.find_or_insert(0x99_000).is_some());
        assert!(
            t.find(0x10_000 + 8 * 64).is_some(),
            "found past the freed slot"
        );
    }

    #[test]
    fn threads_inserting_one_address_agree_on_its_slot() {
        let t: &'static Table<1024> = Box::leak(Box::new(Table::new()));
        for round in 0..200usize {
            let key = 0x4000 + round * 64;
            let ids: Vec<u64> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4)
                    .map(|_| s.spawn(move || t.find_or_insert(key).unwrap().id()))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(ids.iter().all(|&i| i == ids[0]), "{ids:?}");
        }
    }
}
