//! Read-write locks: `pthread_rwlock_rdlock`, `_wrlock`, their `try`, `timed` and `clock`
//! variants, `_unlock`, and `_init` and `_destroy`.
//!
//! # The events, as `gyr::sync::RwLock` records them
//!
//! Writes are numbered like a mutex's acquisitions (counted by the writer while it holds the
//! lock); a read carries the number of writes released before it, read while it holds the
//! lock (no write can be under way then). A lock tries first and records `gyr.rwlock.request`
//! only when it must wait; a try or timed lock that gives up records `gyr.rwlock.busy`. An
//! unlock by the recorded writer releases the write; any other unlock releases a read, with
//! the writes counted so far (unchanged since the read began).

use crate::gate::{self, Entered};
use crate::mutex::id_of;
use crate::real;
use crate::table::{OBJECTS, Slot};
use gyr::sync::events::{RwLockAcquire, RwLockBusy, RwLockRelease, RwLockRequest};
use libc::{c_int, c_void, clockid_t, pthread_rwlock_t, timespec};
use std::sync::atomic::Ordering;

/// The slot of the lock at `l`, taking one if needed (`None`, counted, when the table is full).
#[inline]
fn slot_of(l: *mut pthread_rwlock_t) -> Option<&'static Slot> {
    OBJECTS.find_or_insert(l as usize)
}

/// Records the acquisition by the calling thread `me`, which now holds the lock.
#[inline]
fn acquired(slot: Option<&Slot>, write: bool, me: u64) {
    gate::quiet(|| {
        let n = match slot {
            Some(s) if write => {
                let n = s.count.load(Ordering::Relaxed) + 1;
                s.count.store(n, Ordering::Relaxed);
                s.owner.store(me, Ordering::Relaxed);
                n
            }
            Some(s) => s.count.load(Ordering::Relaxed),
            None => 0,
        };
        gyr::emit(&RwLockAcquire {
            lock: id_of(slot),
            write,
            n,
        })
    })
}

/// The locks: `try_lock` first; if taken, the request recorded and `wait` called (`None`: a
/// try lock, which gives up instead).
#[inline]
fn lock_with(
    mut e: Entered,
    l: *mut pthread_rwlock_t,
    write: bool,
    try_lock: impl FnOnce() -> c_int,
    wait: Option<&dyn Fn() -> c_int>,
) -> c_int {
    let slot = slot_of(l);
    let me = e.me();
    if write
        && let Some(s) = slot
        && s.owner.load(Ordering::Relaxed) == me
    {
        // This thread writes already: the C library refuses (or deadlocks) as it would have.
        let r = match wait {
            Some(w) => e.real(w),
            None => e.real(try_lock),
        };
        e.leave();
        return r;
    }
    let mut r = e.real(try_lock);
    if r == libc::EBUSY
        && let Some(wait) = wait
    {
        gate::quiet(|| {
            gyr::emit(&RwLockRequest {
                lock: id_of(slot),
                write,
            })
        });
        r = e.real(wait);
    }
    if r == 0 {
        acquired(slot, write, me);
    } else if r == libc::EBUSY || r == libc::ETIMEDOUT {
        gate::quiet(|| {
            gyr::emit(&RwLockBusy {
                lock: id_of(slot),
                write,
            })
        });
    }
    e.leave();
    r
}

macro_rules! rwlock_fn {
    ($(#[$m:meta])* $name:ident($($arg:ident : $ty:ty),*) => $write:expr, $try:ident, $wait:ident($($warg:ident),*)) => {
        $(#[$m])*
        ///
        /// # Safety
        ///
        /// As the C library's function of this name.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(l: *mut pthread_rwlock_t $(, $arg: $ty)*) -> c_int {
            let Some(e) = gate::enter() else {
                // SAFETY: the program's arguments, passed on.
                return unsafe { real::$wait(l $(, $warg)*) };
            };
            // SAFETY: as above.
            let wait = || unsafe { real::$wait(l $(, $warg)*) };
            // SAFETY: as above.
            lock_with(e, l, $write, || unsafe { real::$try(l) }, Some(&wait))
        }
    };
}

rwlock_fn!(
    /// `pthread_rwlock_rdlock`.
    pthread_rwlock_rdlock() => false, rwlock_tryrdlock, rwlock_rdlock()
);
rwlock_fn!(
    /// `pthread_rwlock_wrlock`.
    pthread_rwlock_wrlock() => true, rwlock_trywrlock, rwlock_wrlock()
);
rwlock_fn!(
    /// `pthread_rwlock_timedrdlock`.
    pthread_rwlock_timedrdlock(at: *const timespec) => false, rwlock_tryrdlock,
        rwlock_timedrdlock(at)
);
rwlock_fn!(
    /// `pthread_rwlock_timedwrlock`.
    pthread_rwlock_timedwrlock(at: *const timespec) => true, rwlock_trywrlock,
        rwlock_timedwrlock(at)
);
rwlock_fn!(
    /// `pthread_rwlock_clockrdlock`.
    pthread_rwlock_clockrdlock(clock: clockid_t, at: *const timespec) => false,
        rwlock_tryrdlock, rwlock_clockrdlock(clock, at)
);
rwlock_fn!(
    /// `pthread_rwlock_clockwrlock`.
    pthread_rwlock_clockwrlock(clock: clockid_t, at: *const timespec) => true,
        rwlock_trywrlock, rwlock_clockwrlock(clock, at)
);

/// `pthread_rwlock_tryrdlock`.
///
/// # Safety
///
/// As `pthread_rwlock_tryrdlock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_rwlock_tryrdlock(l: *mut pthread_rwlock_t) -> c_int {
    let Some(e) = gate::enter() else {
        // SAFETY: the program's lock, passed on.
        return unsafe { real::rwlock_tryrdlock(l) };
    };
    // SAFETY: as above.
    lock_with(e, l, false, || unsafe { real::rwlock_tryrdlock(l) }, None)
}

/// `pthread_rwlock_trywrlock`.
///
/// # Safety
///
/// As `pthread_rwlock_trywrlock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_rwlock_trywrlock(l: *mut pthread_rwlock_t) -> c_int {
    let Some(e) = gate::enter() else {
        // SAFETY: the program's lock, passed on.
        return unsafe { real::rwlock_trywrlock(l) };
    };
    // SAFETY: as above.
    lock_with(e, l, true, || unsafe { real::rwlock_trywrlock(l) }, None)
}

/// `pthread_rwlock_unlock`: the release is recorded before the lock is free.
///
/// # Safety
///
/// As `pthread_rwlock_unlock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int {
    let Some(mut e) = gate::enter() else {
        // SAFETY: the program's lock, passed on.
        return unsafe { real::rwlock_unlock(l) };
    };
    let slot = OBJECTS.find(l as usize);
    if slot.is_some() || OBJECTS.overflows() > 0 {
        gate::quiet(|| {
            let (write, n) = match slot {
                Some(s) if s.owner.load(Ordering::Relaxed) == e.me() => {
                    s.owner.store(0, Ordering::Relaxed);
                    (true, s.count.load(Ordering::Relaxed))
                }
                Some(s) => (false, s.count.load(Ordering::Relaxed)),
                None => {
                    OBJECTS.overflowed();
                    (false, 0)
                }
            };
            gyr::emit(&RwLockRelease {
                lock: id_of(slot),
                write,
                n,
            })
        });
    }
    // SAFETY: as above.
    let r = e.real(|| unsafe { real::rwlock_unlock(l) });
    e.leave();
    r
}

/// `pthread_rwlock_init`: a lock made (again) at this address is a new object.
///
/// # Safety
///
/// As `pthread_rwlock_init`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_rwlock_init(
    l: *mut pthread_rwlock_t,
    attr: *const c_void,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let r = unsafe { real::rwlock_init(l, attr) };
    if r == 0 {
        OBJECTS.remove(l as usize);
    }
    r
}

/// `pthread_rwlock_destroy`: frees the lock's slot.
///
/// # Safety
///
/// As `pthread_rwlock_destroy`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_rwlock_destroy(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the program's lock, passed on.
    let r = unsafe { real::rwlock_destroy(l) };
    if r == 0 {
        OBJECTS.remove(l as usize);
    }
    r
}
