//! Condition variables: `pthread_cond_wait`, `_timedwait`, `_clockwait`, `_signal`,
//! `_broadcast`, and `_init` and `_destroy`.
//!
//! # The events, as `gyr::sync::Condvar` records them
//!
//! A wait is first a release of the mutex (`gyr.mutex.release` with its acquisition's number)
//! and `gyr.cond.wait`; when the real wait returns, `gyr.cond.wake` with `after`, the number of
//! signals and broadcasts counted on the condition by then (0 when it timed out), and a new
//! acquisition of the mutex. A signal or broadcast is numbered with one atomic add on the
//! condition's slot and recorded before the real call, so the signal that woke a waiter is
//! numbered at most `after`. A recursive mutex keeps its inner holds across the wait, as the C
//! library does.

use crate::gate;
use crate::mutex::{acquired, id_of, releasing};
use crate::real;
use crate::table::{OBJECTS, Slot};
use gyr::sync::events::{CondBroadcast, CondSignal, CondWait, CondWake};
use libc::{c_int, c_void, clockid_t, pthread_cond_t, pthread_mutex_t, timespec};
use std::sync::atomic::Ordering;

/// The slot of the object at `addr`, taking one if needed (`None`, counted, when the table is full).
#[inline]
fn slot_of(addr: usize) -> Option<&'static Slot> {
    OBJECTS.find_or_insert(addr)
}

/// The waits: release and wait recorded, `wait` called, wake-up and acquisition recorded.
#[inline]
fn wait_with(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    wait: impl FnOnce() -> c_int,
) -> c_int {
    let Some(e) = gate::enter() else {
        return wait();
    };
    let cond = slot_of(c as usize);
    let mutex = slot_of(m as usize);
    let me = e.me();
    let depth = mutex.map_or(0, |s| s.aux.swap(0, Ordering::Relaxed));
    let released = releasing(mutex, me);
    gate::quiet(|| {
        gyr::emit(&CondWait {
            cond: id_of(cond),
            mutex: id_of(mutex),
        })
    });
    // Not busy while blocked: a cancelled wait leaves the thread's state as it was.
    e.leave();
    let r = wait();
    if let Some(e) = gate::enter() {
        let timed_out = r == libc::ETIMEDOUT;
        gate::quiet(|| {
            let after = match cond {
                Some(s) if !timed_out => s.count.load(Ordering::Relaxed),
                _ => 0,
            };
            gyr::emit(&CondWake {
                cond: id_of(cond),
                after,
                timed_out,
            })
        });
        if released {
            acquired(mutex, me);
            if let Some(s) = mutex {
                s.aux.store(depth, Ordering::Relaxed);
            }
        }
        e.leave();
    }
    r
}

/// `pthread_cond_wait`.
///
/// # Safety
///
/// As `pthread_cond_wait`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn pthread_cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    wait_with(c, m, || unsafe { real::cond_wait(c, m) })
}

/// `pthread_cond_timedwait`.
///
/// # Safety
///
/// As `pthread_cond_timedwait`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn pthread_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    at: *const timespec,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    wait_with(c, m, || unsafe { real::cond_timedwait(c, m, at) })
}

/// `pthread_cond_clockwait` (what C++'s `std::condition_variable` waits with).
///
/// # Safety
///
/// As `pthread_cond_clockwait`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    clock: clockid_t,
    at: *const timespec,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    wait_with(c, m, || unsafe { real::cond_clockwait(c, m, clock, at) })
}

/// `pthread_cond_signal`.
///
/// # Safety
///
/// As `pthread_cond_signal`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    if let Some(e) = gate::enter() {
        let slot = slot_of(c as usize);
        gate::quiet(|| {
            let n = slot.map_or(0, |s| s.count.fetch_add(1, Ordering::Relaxed) + 1);
            gyr::emit(&CondSignal {
                cond: id_of(slot),
                n,
            })
        });
        e.leave();
    }
    // SAFETY: the program's condition, passed on.
    unsafe { real::cond_signal(c) }
}

/// `pthread_cond_broadcast`.
///
/// # Safety
///
/// As `pthread_cond_broadcast`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    if let Some(e) = gate::enter() {
        let slot = slot_of(c as usize);
        gate::quiet(|| {
            let n = slot.map_or(0, |s| s.count.fetch_add(1, Ordering::Relaxed) + 1);
            gyr::emit(&CondBroadcast {
                cond: id_of(slot),
                n,
            })
        });
        e.leave();
    }
    // SAFETY: the program's condition, passed on.
    unsafe { real::cond_broadcast(c) }
}

/// `pthread_cond_init`: a condition made (again) at this address is a new object.
///
/// # Safety
///
/// As `pthread_cond_init`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_cond_init(c: *mut pthread_cond_t, attr: *const c_void) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let r = unsafe { real::cond_init(c, attr) };
    if r == 0 {
        OBJECTS.remove(c as usize);
    }
    r
}

/// `pthread_cond_destroy`: frees the condition's slot.
///
/// # Safety
///
/// As `pthread_cond_destroy`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_cond_destroy(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: the program's condition, passed on.
    let r = unsafe { real::cond_destroy(c) };
    if r == 0 {
        OBJECTS.remove(c as usize);
    }
    r
}
