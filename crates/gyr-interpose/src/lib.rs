#![doc = include_str!("../README.md")]
//!
//! This crate provides, as exported C symbols of `libgyr_interpose.so`:
//! - thread creation and ends: `pthread_create`, `pthread_join`, `pthread_tryjoin_np`,
//!   `pthread_timedjoin_np`, `pthread_detach`, `pthread_exit` (`threads`);
//! - `pthread_mutex_*`: lock, trylock, timedlock, clocklock, unlock, init, destroy (`mutex`);
//! - `pthread_cond_*`: wait, timedwait, clockwait, signal, broadcast, init, destroy (`cond`);
//! - `pthread_rwlock_*`: the read and write locks and their try, timed and clock variants,
//!   unlock, init, destroy (`rwlock`);
//! - `pthread_barrier_*`: init, wait, destroy (`barrier`);
//!
//! each recording the events of `gyr::sync::events` as `gyr::thread` and `gyr::sync` record
//! them for Rust programs, with objects identified through a fixed-size side table (`table`),
//! and the runtime started by a constructor (below).
//!
//! # The runtime
//!
//! A constructor (in `.init_array`, so it runs before the program's own constructors and
//! `main`) starts the process's runtime as `gyr::init` would (`Builder::with_default_env`:
//! every `GYR_*` variable works), with one difference: a full ring drops events (counted, as
//! `gyr.lost`) instead of waiting, unless `GYR_POLICY=block` says otherwise, since this
//! library cannot know which locks the program holds while it waits (an allocator's, say, that
//! a monitor needs). A program that cannot be monitored (a bad `GYR_*` value, an unwritable
//! trace file) runs on unrecorded, after one line on standard error.
//!
//! `GYR_TRACE` may hold `%p`, replaced by the process id. A program started by this one
//! inherits `LD_PRELOAD` and is monitored too: it writes `FILE.<pid>` (the constructor sets
//! `GYR_TRACE` to `FILE.%p` for its children), never over this program's file. The child of a
//! `fork()` that does not `exec` records nothing: it has none of the runtime's threads, and its
//! exit leaves the parent's trace and server files alone (`gyr::after_fork_in_child`, from a
//! `pthread_atfork` handler).
//!
//! At exit, recording stops (a hook that runs before gyr's own, which then flushes every event
//! recorded so far into the trace and ends the runtime), and if the side table was ever full,
//! one line says how many times an object went without ordering.

// The constructor and exit hooks are left out of the unit tests (which would otherwise start a
// runtime in the test harness), and what only they use with them.
#![cfg_attr(test, allow(dead_code))]

pub mod barrier;
pub mod cond;
mod gate;
pub mod mutex;
mod real;
pub mod rwlock;
mod table;
pub mod threads;

#[cfg(not(test))]
use std::sync::atomic::Ordering;

/// The constructor's entry in `.init_array`: the dynamic loader runs it once this library and
/// the C library are loaded, before the program's constructors.
#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

#[cfg(not(test))]
extern "C" fn init() {
    // SAFETY: __errno_location has no preconditions; `main` finds errno as it would have.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let errno_value = unsafe { *errno };
    gate::set(gate::BUSY);
    gate::quiet(start);
    gate::set(0);
    // SAFETY: as above.
    unsafe { *errno = errno_value };
}

/// Starts the runtime (see the crate doc); the calling thread is marked busy meanwhile, so
/// that the pthread calls gyr makes while starting go straight to the C library.
#[cfg(not(test))]
fn start() {
    real::resolve_all();
    threads::init();
    let mut builder = gyr::Builder::new()
        .policy(gyr::Policy::Drop)
        .with_default_env();
    if let Some(trace) = std::env::var("GYR_TRACE").ok().filter(|t| !t.is_empty()) {
        let pid = std::process::id().to_string();
        builder = builder.trace_file(trace.replace("%p", &pid));
        let for_children = if trace.contains("%p") {
            trace
        } else {
            format!("{trace}.%p")
        };
        // SAFETY: the constructor runs before `main` and before the runtime starts its
        // threads, so no thread of this program or of gyr reads the environment now (a library
        // that started threads in its own constructor is the exception this cannot rule out).
        unsafe { std::env::set_var("GYR_TRACE", for_children) };
    }
    match builder.install() {
        Ok(runtime) => {
            if runtime.header().is_some_and(|h| h.policy == "block") {
                gate::GUARD_CANCEL.store(true, Ordering::SeqCst);
            }
            // SAFETY: `at_exit` and `in_child` are `extern "C" fn()` that never unwind (every
            // panic inside is caught) and stay valid for the whole process. Ours is registered
            // after gyr's, so it runs before it.
            unsafe {
                libc::atexit(at_exit);
                libc::pthread_atfork(None, None, Some(in_child));
            }
            threads::GYR_THREADS.store(true, Ordering::SeqCst);
            gate::ACTIVE.store(true, Ordering::SeqCst);
            // The main thread's buffer now, not later inside the program's `malloc`.
            gyr::thread::current_id();
        }
        Err(e) => gyr::diag!("gyr: this program runs unmonitored: {e}"),
    }
}

/// At exit, before gyr's own hook ends the runtime: stop recording, so that every event
/// recorded is complete when the trace is closed, and report a full table.
#[cfg(not(test))]
extern "C" fn at_exit() {
    gate::ACTIVE.store(false, Ordering::SeqCst);
    // The process is ending already: a thread ending now must not end it again.
    threads::GYR_THREADS.store(false, Ordering::SeqCst);
    gate::quiet(|| {
        let n = table::OBJECTS.overflows();
        if n > 0 {
            gyr::diag!(
                "gyr: {n} times a pthread object found no room in gyr-interpose's table of {} \
                 objects: those events carry no order",
                table::OBJECT_SLOTS
            );
        }
        let n = table::THREADS.overflows();
        if n > 0 {
            gyr::diag!(
                "gyr: {n} threads found no room in gyr-interpose's table of {} joinable \
                 threads (never joined nor detached?): their joins were not recorded",
                table::THREAD_SLOTS
            );
        }
    });
}

/// In the child of a `fork()`: record nothing, and leave the parent's runtime alone.
#[cfg(not(test))]
extern "C" fn in_child() {
    gate::ACTIVE.store(false, Ordering::SeqCst);
    threads::forked();
    gyr::after_fork_in_child();
}
