//! The layer's open spans, by span id: each span's metadata and encoded fields in a fixed
//! table of slots, so that a span costs neither a registry extension (a box allocated at
//! creation and freed at close, and a hash-map insert and clear) nor a registry lookup when it
//! is entered.
//!
//! A span takes the slot its id hashes to, when it is free, from its creation to its close;
//! each slot has a lock of its own, so a span entered, recorded or closed on any thread finds
//! the same slot. The lock, the `spin` crate's spin lock, is held while an entry is read,
//! written or copied into the ring, never around the program's code. A span whose slot is
//! taken by another open span keeps its fields in the registry's extensions as before. The
//! registry never gives two open spans one id, and a span leaves its slot when it closes, so
//! an entry always belongs to the open span of its id.

use crate::capture::SpanFields;
use spin::mutex::{SpinMutex, SpinMutexGuard};
use spin::relax::Yield;
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

/// A slot's lock: held only for a few loads and stores (never around the program's code),
/// so a spin lock, whose release is one store where a `Mutex`'s is a second atomic swap (it
/// must learn whether a thread sleeps on it). A thread finding it held yields its time slice,
/// so a holder that lost its core gets it back.
type SlotLock = SpinMutex<Option<Entry>, Yield>;

/// A slot on a cache line of its own, so that spans of different threads do not share one.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Slot(SlotLock);

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
    fn slot(&self, id: u64) -> SpinMutexGuard<'_, Option<Entry>> {
        // Fibonacci hashing: the registry's ids of spans made one after the other differ in
        // their low bits (slab index) or high bits (generation) only.
        let at = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize;
        self.slots[at].0.lock()
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
