//! Whether a call is recorded: the process-wide switch, and each thread's state (one of gyr's
//! own threads, inside gyr already, or past its exit).
//!
//! # Never recurse
//!
//! Every pthread call of the program passes through this library, and so do gyr's own: its
//! monitors, its server and tokio's threads are created with `pthread_create`, std joins and
//! detaches them, and an allocator may take a pthread mutex inside `malloc`, which gyr calls.
//! A call is recorded only when all of these hold:
//! - the runtime runs ([`ACTIVE`]: set once the constructor started it; cleared at exit, before
//!   gyr's own exit hook ends the runtime, and in the child of a `fork()`);
//! - the thread is not one of gyr's ([`GYR`]: set in a thread whose start routine lies in this
//!   library, since std's thread start is in it, or whose creator had it set);
//! - the thread is not inside gyr already ([`BUSY`]: set while a wrapper calls into gyr, so a
//!   pthread call made on the way, for instance by an allocator, goes straight to the C
//!   library);
//! - the thread has not recorded its exit ([`EXITED`]: the destructors that run after it may
//!   still lock, and gyr's buffer for the thread is gone).
//!
//! The state is a plain thread-local byte without a destructor: reading it never allocates and
//! works at any point of a thread's life, its destructors included.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether calls are recorded at all (see the module doc).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The thread is one of gyr's: nothing it does is recorded.
pub(crate) const GYR: u8 = 1;
/// The thread is inside gyr: calls it makes on the way are not recorded.
pub(crate) const BUSY: u8 = 2;
/// The thread has recorded its exit: what its destructors do is not.
pub(crate) const EXITED: u8 = 4;
/// The thread's exit will be recorded by its exit guard (see `threads.rs`).
pub(crate) const ARMED: u8 = 8;

/// The states in which a call is not recorded.
const QUIET: u8 = GYR | BUSY | EXITED;

thread_local! {
    static STATE: Cell<u8> = const { Cell::new(0) };
}

/// The calling thread's state.
#[inline]
pub(crate) fn state() -> u8 {
    STATE.with(Cell::get)
}

/// Sets the calling thread's state.
#[inline]
pub(crate) fn set(state: u8) {
    STATE.with(|s| s.set(state))
}

/// Whether the process records at all.
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// A call being recorded: the thread's state before it, restored by [`Entered::leave`].
///
/// Not a guard with `Drop`: the wrappers' frames must stay plain, with nothing to run, for a
/// thread's cancellation or `pthread_exit` to unwind through them.
#[derive(Debug, Clone, Copy)]
#[must_use = "leave() restores the thread's state"]
pub(crate) struct Entered {
    /// The thread's state cell, found once per call (a thread-local access from a shared
    /// library is a call into the dynamic loader).
    cell: &'static Cell<u8>,
    before: u8,
    /// The thread's `errno`, and the value the program should see: as the call found it, then
    /// as the last real call left it. What gyr does in between is not the program's.
    errno: *mut libc::c_int,
    errno_value: libc::c_int,
}

impl Entered {
    /// Ends the call: the thread may be recorded again, and `errno` is what the program's
    /// calls made it.
    #[inline]
    pub(crate) fn leave(self) {
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        self.cell.set(self.before)
    }

    /// Makes `f`, a call of the C library's function, see and leave `errno` as if it were
    /// the program's own call.
    #[inline]
    pub(crate) fn real<R>(&mut self, f: impl FnOnce() -> R) -> R {
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        let r = f();
        // SAFETY: as above.
        self.errno_value = unsafe { *self.errno };
        r
    }

    /// The calling thread, as an object's recorded holder names it: the address of its state
    /// cell, unique among live threads (and cheaper than `pthread_self`, a call into the C
    /// library).
    #[inline]
    pub(crate) fn me(&self) -> u64 {
        self.cell as *const Cell<u8> as u64
    }
}

/// Starts recording a call, if it should be recorded: the thread is marked busy, and its
/// `errno` kept for the program, until [`Entered::leave`].
#[inline]
pub(crate) fn enter() -> Option<Entered> {
    if !active() {
        return None;
    }
    // SAFETY: the cell lives as long as the thread, and `Entered` never leaves the call that
    // made it (it is neither `Send` nor stored), so the reference is used on this thread while
    // the thread runs.
    let cell: &'static Cell<u8> = STATE.with(|c| unsafe { &*(c as *const Cell<u8>) });
    let before = cell.get();
    if before & QUIET != 0 {
        return None;
    }
    cell.set(before | BUSY);
    // SAFETY: __errno_location has no preconditions; it returns the calling thread's errno.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let errno_value = unsafe { *errno };
    Some(Entered {
        cell,
        before,
        errno,
        errno_value,
    })
}

/// Whether calls into gyr must hold off the thread's cancellation (see [`quiet`]): set when
/// the runtime's policy is Block, whose wait for room in a full ring sleeps.
pub(crate) static GUARD_CANCEL: AtomicBool = AtomicBool::new(false);

/// Runs `f`, a call into gyr, so that no panic crosses into C: gyr does not panic on these
/// paths, and if it ever did the event would be lost, not the program.
///
/// # Cancellation
///
/// A thread cancelled (`pthread_cancel`) unwinds from its next cancellation point, and
/// `catch_unwind` would stop that unwind, which the C library answers by aborting the process.
/// So no cancellation point may be reached inside `f`. The usual path of an event makes no
/// system call; what may (a thread's attachment, a wait for room in a full ring under the
/// Block policy) runs with the thread's cancellation held off ([`quiet_uncancelled`]), at the
/// cost of two calls into the C library, paid only there.
#[inline(always)]
pub(crate) fn quiet(f: impl FnOnce()) {
    if GUARD_CANCEL.load(Ordering::Relaxed) {
        return quiet_uncancelled(f);
    }
    let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
}

unsafe extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

/// `PTHREAD_CANCEL_DISABLE` of glibc's `pthread.h`.
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

/// [`quiet`], with the thread's cancellation held off while `f` runs (a cancellation
/// requested meanwhile acts at the thread's next cancellation point after it).
#[cold]
#[inline(never)]
pub(crate) fn quiet_uncancelled(f: impl FnOnce()) {
    let mut old: libc::c_int = 0;
    // SAFETY: sets the calling thread's cancel state, writing the old one into a local.
    let held = unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) } == 0;
    let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
    if held {
        // SAFETY: restores the state read above.
        unsafe { pthread_setcancelstate(old, &mut old) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_inside_gyr_is_not_recorded_again() {
        ACTIVE.store(true, Ordering::SeqCst);
        let outer = enter().expect("a plain thread is recorded");
        assert!(enter().is_none(), "a nested call is not");
        outer.leave();
        assert_eq!(state(), 0);
        set(GYR);
        assert!(enter().is_none(), "gyr's threads are not");
        set(ARMED);
        let e = enter().expect("an armed thread is recorded");
        assert_eq!(state(), ARMED | BUSY);
        e.leave();
        assert_eq!(state(), ARMED);
        set(0);
    }
}
