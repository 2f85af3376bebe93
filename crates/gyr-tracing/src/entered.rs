//! The spans this thread is in, as the layer entered them: so that a span's exit names it
//! without looking the span up in the registry again (a sharded-slab lookup and two atomic
//! reference-count updates).
//!
//! A thread holds at most [`DEPTH`] entries; a span entered deeper, or exited without an entry
//! here (on another thread, by a hand-written subscriber call), is looked up as before. An
//! entry cannot outlive its span's id: the registry keeps a span open while it is on a
//! thread's stack of entered spans, which an exit on this thread pops together with ours.

use std::cell::Cell;

/// Spans one thread keeps entries for, at most (32 bytes each, in thread-local storage).
pub(crate) const DEPTH: usize = 32;

/// One entered span: the layer that entered it (its shared state's address), its id, its name.
#[derive(Debug, Clone, Copy)]
struct Entry {
    layer: usize,
    span: u64,
    name: &'static str,
}

const EMPTY: Entry = Entry {
    layer: 0,
    span: 0,
    name: "",
};

struct Stack {
    len: Cell<usize>,
    entries: [Cell<Entry>; DEPTH],
}

thread_local! {
    // Constant-initialized and without a destructor: an access is an offset from the thread
    // pointer, with no first-use check.
    static STACK: Stack = const {
        Stack {
            len: Cell::new(0),
            entries: [const { Cell::new(EMPTY) }; DEPTH],
        }
    };
}

/// Notes that `layer` entered `span`, named `name`, on this thread.
#[inline]
pub(crate) fn push(layer: usize, span: u64, name: &'static str) {
    let _ = STACK.try_with(|s| {
        let n = s.len.get();
        if let Some(slot) = s.entries.get(n) {
            slot.set(Entry { layer, span, name });
            s.len.set(n + 1);
        }
    });
}

/// The name of `span` as `layer` entered it on this thread, the latest entry first, which it
/// removes; `None` when there is none.
#[inline]
pub(crate) fn pop(layer: usize, span: u64) -> Option<&'static str> {
    STACK
        .try_with(|s| {
            let n = s.len.get();
            let at = (0..n).rev().find(|&i| {
                let e = s.entries[i].get();
                e.layer == layer && e.span == span
            })?;
            let name = s.entries[at].get().name;
            // Exits are almost always in reverse order of entry: then nothing moves.
            for i in at..n - 1 {
                s.entries[i].set(s.entries[i + 1].get());
            }
            s.len.set(n - 1);
            Some(name)
        })
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_find_their_entries_in_any_order() {
        push(1, 10, "outer");
        push(1, 11, "inner");
        push(2, 11, "other layer");
        assert_eq!(pop(1, 10), Some("outer"));
        assert_eq!(pop(1, 10), None);
        assert_eq!(pop(1, 11), Some("inner"));
        assert_eq!(pop(2, 11), Some("other layer"));
        assert_eq!(pop(2, 11), None);
    }

    #[test]
    fn entries_beyond_the_depth_are_not_kept() {
        for i in 0..DEPTH as u64 + 3 {
            push(7, i, "deep");
        }
        // The three deepest were not noted: their exits find nothing and look the span up.
        for i in (DEPTH as u64..DEPTH as u64 + 3).rev() {
            assert_eq!(pop(7, i), None);
        }
        for i in (0..DEPTH as u64).rev() {
            assert_eq!(pop(7, i), Some("deep"));
        }
        assert_eq!(pop(7, 0), None);
    }

    #[test]
    fn a_re_entered_span_pops_its_latest_entry() {
        push(3, 5, "a");
        push(3, 6, "b");
        push(3, 5, "a");
        assert_eq!(pop(3, 5), Some("a"));
        assert_eq!(pop(3, 6), Some("b"));
        assert_eq!(pop(3, 5), Some("a"));
        assert_eq!(pop(3, 5), None);
    }
}
