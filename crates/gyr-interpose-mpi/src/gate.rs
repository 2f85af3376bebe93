//! Whether a call is recorded: the process-wide switch, and whether the thread is inside an
//! MPI call of ours already.
//!
//! # Never recurse
//!
//! A call is recorded only when the runtime runs ([`ACTIVE`]: set once the constructor started
//! it in an MPI rank; cleared at exit, before gyr's own exit hook ends the runtime, and in the
//! child of a `fork()`) and the thread is not inside a call of ours already ([`Call`] marks it
//! busy from its start to its end, the real call included): an MPI library whose `MPI_Sendrecv`
//! called `MPI_Send`, or a Fortran binding that called the C `MPI_*` function rather than
//! `PMPI_*`, is recorded once, as the call the program made.
//!
//! The state is a plain thread-local flag without a destructor: reading it never allocates.

use crate::events::{MpiBegin, MpiEnd};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether calls are recorded at all (see the module doc).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// One MPI call being recorded: `gyr.mpi.begin` was emitted, the thread is busy and its `errno`
/// is kept for the program until [`Call::end`].
///
/// Not a guard with `Drop`: the wrappers' frames stay plain.
#[derive(Debug)]
#[must_use = "end() records the call's end and restores the thread's state"]
pub(crate) struct Call {
    name: &'static str,
    busy: &'static Cell<bool>,
    /// The thread's `errno`, and the value the program should see: as the call found it, then
    /// as the real call left it. What gyr does in between is not the program's.
    errno: *mut libc::c_int,
    errno_value: libc::c_int,
}

impl Call {
    /// Starts recording the call `name`, if it should be recorded.
    #[inline]
    pub(crate) fn begin(name: &'static str) -> Option<Call> {
        if !ACTIVE.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: the cell lives as long as the thread, and `Call` never leaves the wrapper
        // that made it (it is neither `Send` nor stored), so the reference is used on this
        // thread while the thread runs.
        let busy: &'static Cell<bool> = BUSY.with(|c| unsafe { &*(c as *const Cell<bool>) });
        if busy.get() {
            return None;
        }
        busy.set(true);
        // SAFETY: __errno_location has no preconditions; it returns the calling thread's errno.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: as above.
        let errno_value = unsafe { *errno };
        quiet(|| gyr::emit(&MpiBegin { call: name }));
        Some(Call {
            name,
            busy,
            errno,
            errno_value,
        })
    }

    /// Records what `f` does (builds and emits events), so that no panic reaches the program.
    #[inline]
    pub(crate) fn record(&self, f: impl FnOnce()) {
        quiet(f)
    }

    /// Makes `f`, the real call, see and leave `errno` as the program's own call would.
    #[inline]
    pub(crate) fn real<R>(&mut self, f: impl FnOnce() -> R) -> R {
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        let r = f();
        // SAFETY: as above.
        self.errno_value = unsafe { *self.errno };
        r
    }

    /// Records the call's end with its return code (a Fortran call's `ierr`), restores `errno`
    /// and the thread's state, and returns `ret`.
    #[inline]
    pub(crate) fn end(self, ret: libc::c_int) -> libc::c_int {
        let name = self.name;
        quiet(|| gyr::emit(&MpiEnd { call: name, ret }));
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        self.busy.set(false);
        ret
    }
}

/// Runs `f`, a call into gyr, so that no panic crosses into C: gyr does not panic on these
/// paths, and if it ever did the event would be lost, not the program.
#[inline(always)]
pub(crate) fn quiet(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_inside_a_call_is_not_recorded_again() {
        ACTIVE.store(true, Ordering::SeqCst);
        let outer = Call::begin("MPI_Sendrecv").expect("a plain thread is recorded");
        assert!(Call::begin("MPI_Send").is_none(), "a nested call is not");
        assert_eq!(outer.end(3), 3);
        let again = Call::begin("MPI_Send").expect("recorded again after the end");
        let _ = again.end(0);
        ACTIVE.store(false, Ordering::SeqCst);
    }
}
