//! Mutexes: `pthread_mutex_lock`, `_trylock`, `_timedlock`, `_clocklock`, `_unlock`, and
//! `_init` and `_destroy`, which give an address a fresh identity.
//!
//! # The events, as `gyr::sync::Mutex` records them
//!
//! A lock tries first: `gyr.mutex.request` only when the mutex is taken (the lock must wait).
//! Once held, the acquisition is counted in the object's slot while holding the mutex (so the
//! numbers of one mutex's acquisitions are 1, 2, 3, ... in the order they happened) and
//! recorded as `gyr.mutex.acquire`; `gyr.mutex.release` carries the same number, recorded
//! before the real unlock. A try or timed lock that gives up records `gyr.mutex.busy`.
//!
//! The slot also remembers the recorded holder: a thread locking a mutex it holds (a recursive
//! mutex, or an error-checking one) is passed straight to the C library, and only the
//! outermost hold is recorded; an unlock by a thread that is not the recorded holder (it took
//! the lock before recording started) records nothing. So the releases and acquisitions of a
//! mutex always alternate in the trace. Return values and `errno` are the C library's.

use crate::gate::{self, Entered};
use crate::real;
use crate::table::{OBJECTS, Slot};
use gyr::sync::events::{MutexAcquire, MutexBusy, MutexRelease, MutexRequest};
use libc::{c_int, c_void, clockid_t, pthread_mutex_t, timespec};
use std::sync::atomic::Ordering;

/// gyr's id of the object in `slot`, 0 without one (the table was full).
#[inline]
pub(crate) fn id_of(slot: Option<&Slot>) -> u64 {
    slot.map_or(0, Slot::id)
}

/// Records the acquisition of the mutex in `slot` by the calling thread `me`
/// ([`gate::Entered::me`]), which now holds it.
#[inline]
pub(crate) fn acquired(slot: Option<&Slot>, me: u64) {
    gate::quiet(|| match slot {
        Some(s) => {
            let n = s.count.load(Ordering::Relaxed) + 1;
            s.count.store(n, Ordering::Relaxed);
            s.owner.store(me, Ordering::Relaxed);
            s.aux.store(0, Ordering::Relaxed);
            gyr::emit(&MutexAcquire { mutex: s.id(), n });
        }
        None => gyr::emit(&MutexAcquire { mutex: 0, n: 0 }),
    })
}

/// Records the release of the mutex in `slot` by the calling thread `me`, if it is its
/// recorded holder, before the real unlock; returns whether it did (false also for an inner
/// hold of a recursive mutex, which stays held).
#[inline]
pub(crate) fn releasing(slot: Option<&Slot>, me: u64) -> bool {
    let mut done = false;
    gate::quiet(|| match slot {
        Some(s) if s.owner.load(Ordering::Relaxed) == me => {
            let depth = s.aux.load(Ordering::Relaxed);
            if depth > 0 {
                s.aux.store(depth - 1, Ordering::Relaxed);
                return;
            }
            let n = s.count.load(Ordering::Relaxed);
            gyr::emit(&MutexRelease { mutex: s.id(), n });
            s.owner.store(0, Ordering::Relaxed);
            done = true;
        }
        Some(_) => {}
        None => {
            OBJECTS.overflowed();
            gyr::emit(&MutexRelease { mutex: 0, n: 0 });
            done = true;
        }
    });
    done
}

/// The slot of the mutex at `m`, taking one if needed (`None`, counted, when the table is full).
#[inline]
fn slot_of(m: *mut pthread_mutex_t) -> Option<&'static Slot> {
    OBJECTS.find_or_insert(m as usize)
}

/// Whether the lock call returned with the mutex held (a robust mutex whose holder died is
/// held too).
#[inline]
fn holds(r: c_int) -> bool {
    r == 0 || r == libc::EOWNERDEAD
}

/// The locks that may wait: try first, record the request if taken, then `wait`.
#[inline]
fn lock_with(
    mut e: Entered,
    m: *mut pthread_mutex_t,
    wait: impl FnOnce() -> c_int,
    busy_on: c_int,
) -> c_int {
    let slot = slot_of(m);
    let me = e.me();
    if let Some(s) = slot
        && s.owner.load(Ordering::Relaxed) == me
    {
        // Held already by this thread: a recursive mutex counts one more hold, an
        // error-checking one refuses, a normal one deadlocks as it would have.
        let r = e.real(wait);
        if r == 0 {
            s.aux.fetch_add(1, Ordering::Relaxed);
        }
        e.leave();
        return r;
    }
    // SAFETY: the program's mutex, passed on.
    let mut r = e.real(|| unsafe { real::mutex_trylock(m) });
    if r == libc::EBUSY {
        gate::quiet(|| {
            gyr::emit(&MutexRequest {
                mutex: id_of(slot),
                addr: m as u64,
            })
        });
        r = e.real(wait);
    }
    if holds(r) {
        acquired(slot, me);
    } else if r == busy_on {
        gate::quiet(|| gyr::emit(&MutexBusy { mutex: id_of(slot) }));
    }
    e.leave();
    r
}

/// `pthread_mutex_lock`.
///
/// # Safety
///
/// As `pthread_mutex_lock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    let Some(e) = gate::enter() else {
        // SAFETY: the program's mutex, passed on.
        return unsafe { real::mutex_lock(m) };
    };
    // SAFETY: as above.
    lock_with(e, m, || unsafe { real::mutex_lock(m) }, 0)
}

/// `pthread_mutex_timedlock`.
///
/// # Safety
///
/// As `pthread_mutex_timedlock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut pthread_mutex_t,
    at: *const timespec,
) -> c_int {
    let Some(e) = gate::enter() else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { real::mutex_timedlock(m, at) };
    };
    // SAFETY: as above.
    lock_with(
        e,
        m,
        || unsafe { real::mutex_timedlock(m, at) },
        libc::ETIMEDOUT,
    )
}

/// `pthread_mutex_clocklock`.
///
/// # Safety
///
/// As `pthread_mutex_clocklock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_clocklock(
    m: *mut pthread_mutex_t,
    clock: clockid_t,
    at: *const timespec,
) -> c_int {
    let Some(e) = gate::enter() else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { real::mutex_clocklock(m, clock, at) };
    };
    // SAFETY: as above.
    lock_with(
        e,
        m,
        || unsafe { real::mutex_clocklock(m, clock, at) },
        libc::ETIMEDOUT,
    )
}

/// `pthread_mutex_trylock`.
///
/// # Safety
///
/// As `pthread_mutex_trylock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    let Some(mut e) = gate::enter() else {
        // SAFETY: the program's mutex, passed on.
        return unsafe { real::mutex_trylock(m) };
    };
    let slot = slot_of(m);
    // SAFETY: as above.
    let r = e.real(|| unsafe { real::mutex_trylock(m) });
    if holds(r) {
        match slot {
            Some(s) if s.owner.load(Ordering::Relaxed) == e.me() => {
                s.aux.fetch_add(1, Ordering::Relaxed);
            }
            _ => acquired(slot, e.me()),
        }
    } else if r == libc::EBUSY {
        gate::quiet(|| gyr::emit(&MutexBusy { mutex: id_of(slot) }));
    }
    e.leave();
    r
}

/// `pthread_mutex_unlock`: the release is recorded before the mutex is free.
///
/// # Safety
///
/// As `pthread_mutex_unlock`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    let Some(mut e) = gate::enter() else {
        // SAFETY: the program's mutex, passed on.
        return unsafe { real::mutex_unlock(m) };
    };
    let slot = OBJECTS.find(m as usize);
    if slot.is_some() || OBJECTS.overflows() > 0 {
        releasing(slot, e.me());
    }
    // SAFETY: as above.
    let r = e.real(|| unsafe { real::mutex_unlock(m) });
    e.leave();
    r
}

/// `pthread_mutex_init`: a mutex made (again) at this address is a new object.
///
/// # Safety
///
/// As `pthread_mutex_init`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_init(m: *mut pthread_mutex_t, attr: *const c_void) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let r = unsafe { real::mutex_init(m, attr) };
    if r == 0 {
        OBJECTS.remove(m as usize);
    }
    r
}

/// `pthread_mutex_destroy`: frees the mutex's slot.
///
/// # Safety
///
/// As `pthread_mutex_destroy`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the program's mutex, passed on.
    let r = unsafe { real::mutex_destroy(m) };
    if r == 0 {
        OBJECTS.remove(m as usize);
    }
    r
}
