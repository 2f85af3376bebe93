//! Barriers: `pthread_barrier_init` (which remembers the parties), `_wait` and `_destroy`.
//!
//! # The events, as `gyr::sync::Barrier` records them
//!
//! Arrivals are counted with one atomic add on the barrier's slot: arrival `a` belongs to
//! generation `a / parties`, since no thread of the next generation can arrive before every
//! thread of this one has. `gyr.barrier.arrive` is recorded before the real wait,
//! `gyr.barrier.depart` (with the parties) after it. Every arrival is counted, recorded or not
//! (before the runtime started, say), so that generations stay right.

use crate::gate;
use crate::mutex::id_of;
use crate::real;
use crate::table::OBJECTS;
use gyr::sync::events::{BarrierArrive, BarrierDepart};
use libc::{c_int, c_uint, c_void, pthread_barrier_t};
use std::sync::atomic::Ordering;

/// `pthread_barrier_init`: a new object, whose parties its waits need.
///
/// # Safety
///
/// As `pthread_barrier_init`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_barrier_init(
    b: *mut pthread_barrier_t,
    attr: *const c_void,
    count: c_uint,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let r = unsafe { real::barrier_init(b, attr, count) };
    if r == 0 {
        OBJECTS.remove(b as usize);
        if let Some(s) = OBJECTS.find_or_insert(b as usize) {
            s.aux.store(u64::from(count), Ordering::Relaxed);
        }
    }
    r
}

/// `pthread_barrier_wait`.
///
/// # Safety
///
/// As `pthread_barrier_wait`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
    let slot = OBJECTS.find(b as usize);
    let (generation, parties) = match slot {
        Some(s) => {
            let arrival = s.count.fetch_add(1, Ordering::Relaxed);
            let parties = s.aux.load(Ordering::Relaxed).max(1);
            (arrival / parties, parties.min(u64::from(u32::MAX)) as u32)
        }
        None => (0, 0),
    };
    if let Some(e) = gate::enter() {
        gate::quiet(|| {
            if slot.is_none() {
                OBJECTS.overflowed();
            }
            gyr::emit(&BarrierArrive {
                barrier: id_of(slot),
                generation,
            })
        });
        e.leave();
    }
    // SAFETY: the program's barrier, passed on.
    let r = unsafe { real::barrier_wait(b) };
    if let Some(e) = gate::enter() {
        gate::quiet(|| {
            gyr::emit(&BarrierDepart {
                barrier: id_of(slot),
                generation,
                parties,
            })
        });
        e.leave();
    }
    r
}

/// `pthread_barrier_destroy`: frees the barrier's slot.
///
/// # Safety
///
/// As `pthread_barrier_destroy`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_barrier_destroy(b: *mut pthread_barrier_t) -> c_int {
    // SAFETY: the program's barrier, passed on.
    let r = unsafe { real::barrier_destroy(b) };
    if r == 0 {
        OBJECTS.remove(b as usize);
    }
    r
}
