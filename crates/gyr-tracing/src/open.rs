//! The layer's open spans, by span id: each span's metadata and encoded fields in a fixed
//! table of slots, so that a span costs neither a registry extension (a box allocated at
//! creation and freed at close, and a hash-map insert and clear) nor a registry lookup when it
//! is entered.
//!
//! A span takes the slot its id hashes to, when it is free, from its creation to its close;
//! each slot has a lock of its own, so a span entered, recorded or closed on any thread finds
//! the same slot. The lock, a [`SpinLock`], is held while an entry is read, written or copied
//! into the ring, never around the program's code. A span whose slot is taken by another open
//! span keeps its fields in the registry's extensions as before. The registry never gives two open spans one id, and a span
//! leaves its slot when it closes, so an entry always belongs to the open span of its id.

use crate::capture::SpanFields;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_core::Metadata;

/// Slots of one layer's table: spans open at once beyond about this many (or hashing to a
/// taken slot) use the registry's extensions. 128 bytes each.
pub(crate) const SLOTS: usize = 256;

/// One open span: its id, its call site, and its fields if it has any recorded.
#[derive(Debug)]
pub(crate) struct Entry {
    id: u64,
    pub(crate) meta: &'static Metadata<'static>,
    pub(crate) fields: Option<SpanFields>,
}

/// A slot on a cache line of its own, so that spans of different threads do not share one.
type Slot = SpinLock<Option<Entry>>;

/// A lock held only for a few loads and stores (never around the program's code): taking it
/// is one atomic swap and releasing it one store, where a `Mutex` pays a second atomic swap to
/// release. A thread finding it held spins, and yields after a while.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct SpinLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached only through a `Held`, and `lock` hands out one `Held` at a time
// (the swap that takes `held` is `Acquire`, the store that releases it `Release`), so the
// value moves between threads as behind a `Mutex`, which needs `T: Send` alone.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// A taken [`SpinLock`], released when dropped.
pub(crate) struct Held<'a, T>(&'a SpinLock<T>);

impl<T> SpinLock<T> {
    #[inline]
    pub(crate) fn lock(&self) -> Held<'_, T> {
        let mut spins = 0_u32;
        while self.held.swap(true, Ordering::Acquire) {
            while self.held.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        Held(self)
    }
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this `Held` is the only one of its lock (see `SpinLock`'s `Sync`).
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this `Held` is the only one of its lock, and borrowed mutably.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}

/// The open spans of one layer.
#[derive(Debug)]
pub(crate) struct Open {
    slots: Box<[Slot]>,
}

impl Default for Open {
    fn default() -> Self {
        Open {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        }
    }
}

impl Open {
    fn slot(&self, id: u64) -> Held<'_, Option<Entry>> {
        // Fibonacci hashing: the registry's ids of spans made one after the other differ in
        // their low bits (slab index) or high bits (generation) only.
        let at = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize;
        self.slots[at].lock()
    }

    /// Keeps a new span's metadata and fields; `Err` gives the fields back when its slot is
    /// taken by another open span.
    pub(crate) fn insert(
        &self,
        id: u64,
        meta: &'static Metadata<'static>,
        fields: Option<SpanFields>,
    ) -> Result<(), Option<SpanFields>> {
        let mut slot = self.slot(id);
        match &*slot {
            Some(_) => Err(fields),
            None => {
                *slot = Some(Entry { id, meta, fields });
                Ok(())
            }
        }
    }

    /// Runs `f` on span `id`'s entry, under its slot's lock; `None` when the span has none.
    #[inline]
    pub(crate) fn with<R>(&self, id: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut slot = self.slot(id);
        match &mut *slot {
            Some(e) if e.id == id => Some(f(e)),
            _ => None,
        }
    }

    /// Removes span `id`'s entry, if it has one (the span closed).
    pub(crate) fn remove(&self, id: u64) -> Option<Entry> {
        let mut slot = self.slot(id);
        match &*slot {
            Some(e) if e.id == id => slot.take(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_core::callsite::{Callsite, Identifier};
    use tracing_core::field::FieldSet;
    use tracing_core::{Kind, Level};

    struct Cs;
    impl Callsite for Cs {
        fn set_interest(&self, _: tracing_core::Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            &META
        }
    }
    static CS: Cs = Cs;
    static META: Metadata<'static> = Metadata::new(
        "t",
        "t",
        Level::INFO,
        None,
        None,
        None,
        FieldSet::new(&[], Identifier(&CS)),
        Kind::SPAN,
    );

    #[test]
    fn the_spin_lock_lets_one_thread_in_at_a_time() {
        // Unlocked read-modify-writes from four threads lose increments.
        let lock = SpinLock::<(u64, u64)>::default();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100_000 {
                        let mut held = lock.lock();
                        let (a, b) = *held;
                        *held = (a + 1, b + 2);
                    }
                });
            }
        });
        assert_eq!(*lock.lock(), (400_000, 800_000));
    }

    #[test]
    fn an_entry_lives_from_insert_to_remove_and_only_for_its_id() {
        let open = Open::default();
        assert!(open.insert(7, &META, None).is_ok());
        assert_eq!(open.with(7, |e| e.id), Some(7));
        // Every other id misses, also those hashing to the same slot.
        let mut same_slot = 0;
        for other in (8..100_000).filter(|&o| open.with(o, |_| ()).is_none()) {
            if open.insert(other, &META, None).is_err() {
                same_slot += 1;
                assert!(open.with(other, |_| ()).is_none());
                assert!(open.remove(other).is_none());
            } else {
                assert!(open.remove(other).is_some());
            }
        }
        assert!(same_slot > 0, "some ids share 7's slot");
        assert!(open.remove(7).is_some());
        assert!(open.with(7, |_| ()).is_none());
        assert!(open.remove(7).is_none());
    }
}
