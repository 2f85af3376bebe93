//! Threads: `pthread_create` (fork, and the child's begin in a start routine of ours),
//! `pthread_join` and its `_np` variants, `pthread_detach`, `pthread_exit`, and each thread's
//! exit however it ends.
//!
//! # A thread's life
//!
//! The parent reserves the child's id and records the fork (`gyr::thread::fork`) before the
//! thread exists; the thread starts in [`start`], which records its begin under that id, then
//! runs the program's start routine. Its exit is recorded by a thread-local guard whose
//! destructor runs however the thread ends (return, `pthread_exit`, cancellation). The guard
//! is registered after gyr's own thread buffer, so it runs while the buffer is still there.
//! A thread ended by `pthread_exit` without a guard (the main thread) records its exit in
//! `pthread_exit`.
//!
//! # The last thread
//!
//! The C library ends the process with `exit(0)` when its last thread ends, which never happens
//! while gyr's threads run: a program whose `main` leaves through `pthread_exit` would hang.
//! So when `main` does, a thread of gyr's (the reaper) starts watching the process's threads,
//! and calls `exit(0)` once only gyr's are left (see [`start_reaper`]).
//!
//! # gyr's own threads
//!
//! A thread is gyr's when its start routine lies in this library (std's thread start is here:
//! the monitors, the server, tokio's threads) or its creator is gyr's. It starts marked as
//! such ([`gate::GYR`]), and nothing it does is recorded.
//!
//! # Joins
//!
//! A join names the joined thread by gyr's id, which the thread table maps from the
//! `pthread_t` from the moment `pthread_create` returns until the join or the detach. A thread
//! the table does not know (created before the runtime started, or detached) is joined without
//! events.

use crate::gate::{self, ARMED, BUSY, EXITED, GYR};
use crate::real;
use crate::table::THREADS;
use libc::{c_int, c_void, pthread_attr_t, pthread_t, timespec};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

type StartRoutine = extern "C-unwind" fn(*mut c_void) -> *mut c_void;

unsafe extern "C" {
    /// Not interposed (the libc crate lacks it for glibc).
    fn pthread_attr_getdetachstate(attr: *const pthread_attr_t, state: *mut c_int) -> c_int;
}

/// What the new thread needs: the program's start routine and argument, and what the parent
/// decided about it.
struct Start {
    routine: StartRoutine,
    arg: *mut c_void,
    /// One of gyr's threads.
    gyr: bool,
    /// The id the parent reserved, when it recorded the fork.
    child: Option<gyr::thread::Child>,
}

/// Records the thread's exit when its thread-local storage is torn down.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if let Some(e) = gate::enter() {
            gate::quiet(gyr::thread::exit);
            e.leave();
        }
        gate::set(gate::state() | EXITED);
    }
}

thread_local! {
    static EXIT_GUARD: ExitGuard = const { ExitGuard };
}

/// Whether gyr's threads run in this process (set once the runtime started; cleared at exit
/// and in the child of a fork, which has none).
pub(crate) static GYR_THREADS: AtomicBool = AtomicBool::new(false);

/// The kernel's ids of gyr's running threads (0: a free slot), for the reaper.
static GYR_TIDS: [AtomicI32; GYR_TID_SLOTS] = [const { AtomicI32::new(0) }; GYR_TID_SLOTS];

/// gyr's threads followed at once, at most: monitors, the server, tokio's blocking pool.
const GYR_TID_SLOTS: usize = 1024;

/// Frees a gyr thread's slot in [`GYR_TIDS`] when the thread ends.
struct GyrTid(Cell<usize>);

impl Drop for GyrTid {
    fn drop(&mut self) {
        if let Some(slot) = GYR_TIDS.get(self.0.get()) {
            slot.store(0, Ordering::Release);
        }
    }
}

thread_local! {
    static GYR_TID: GyrTid = const { GyrTid(Cell::new(usize::MAX)) };
}

/// Notes the calling thread, one of gyr's, until it ends.
fn note_gyr_thread() {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    if let Some(i) = GYR_TIDS.iter().position(|s| {
        s.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }) {
        GYR_TID.with(|g| g.0.set(i));
    }
}

/// The main thread left through `pthread_exit`: the C library ends the process with `exit(0)`
/// once its last thread has ended, which never happens while gyr's threads run. A thread of
/// gyr's, the reaper, does it instead: it looks at the process's threads every
/// [`REAP_INTERVAL`], and calls `exit(0)` once only gyr's (and the main thread, which the
/// kernel keeps until the process ends) are left. It counts every thread the kernel lists,
/// so threads created inside the C library (C11's `thrd_create`, timers) keep the process
/// alive as they would have.
fn start_reaper() {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::SeqCst) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("gyr-reaper".into())
        .spawn(reap);
    if let Err(e) = spawned {
        gyr::diag!(
            "gyr: cannot start the thread that ends the process after main's pthread_exit ({e}): \
             the process will not end by itself"
        );
    }
}

/// How often the reaper looks at the process's threads.
const REAP_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

fn reap() {
    // SAFETY: getpid and gettid have no preconditions.
    let (main, me) = unsafe { (libc::getpid(), libc::gettid()) };
    loop {
        std::thread::sleep(REAP_INTERVAL);
        if !GYR_THREADS.load(Ordering::Acquire) {
            return;
        }
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        let program_runs = tasks
            .flatten()
            .filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok())
            .any(|tid| {
                tid != main
                    && tid != me
                    && !GYR_TIDS.iter().any(|s| s.load(Ordering::Acquire) == tid)
            });
        if !program_runs {
            // SAFETY: what the C library itself calls once the last thread has ended; it runs
            // the exit hooks (gyr's closes the trace) and does not return.
            unsafe { libc::exit(0) }
        }
    }
}

/// In the child of a fork: none of gyr's threads run there.
pub(crate) fn forked() {
    GYR_THREADS.store(false, Ordering::SeqCst);
}

/// The base address of the object (this library, the program, another library) holding
/// `addr`, or 0.
fn object_base(addr: *const c_void) -> usize {
    // SAFETY: a zeroed Dl_info is a valid out-parameter; dladdr only reads the loader's tables.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr, &mut info) != 0 {
            info.dli_fbase as usize
        } else {
            0
        }
    }
}

/// Whether `routine` lies in this library (a thread of gyr's).
fn is_ours(routine: StartRoutine) -> bool {
    static OURS: AtomicUsize = AtomicUsize::new(0);
    let mut base = OURS.load(Ordering::Relaxed);
    if base == 0 {
        base = object_base(is_ours as *const c_void);
        OURS.store(base, Ordering::Relaxed);
    }
    base != 0 && object_base(routine as *const c_void) == base
}

/// Finds the base of this library now, so that the first `pthread_create` does not.
pub(crate) fn init() {
    is_ours(start);
}

/// Whether `attr` asks for a detached thread.
fn detached(attr: *const pthread_attr_t) -> bool {
    if attr.is_null() {
        return false;
    }
    let mut state: c_int = 0;
    // SAFETY: `attr` is the program's initialised attribute, as pthread_create requires; the
    // call only reads it.
    let r = unsafe { pthread_attr_getdetachstate(attr, &mut state) };
    r == 0 && state == libc::PTHREAD_CREATE_DETACHED
}

fn self_key() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// `pthread_create`: records the fork, and starts the thread in [`start`].
///
/// # Safety
///
/// As `pthread_create`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_create(
    thread: *mut pthread_t,
    attr: *const pthread_attr_t,
    routine: Option<StartRoutine>,
    arg: *mut c_void,
) -> c_int {
    let Some(routine) = routine else {
        return libc::EINVAL;
    };
    // SAFETY: __errno_location has no preconditions; it returns the calling thread's errno,
    // kept for the program across what gyr does here (see `gate::Entered::real`).
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let mut errno_value = unsafe { *errno };
    let before = gate::state();
    let ours = before & GYR != 0 || is_ours(routine);
    let record = !ours && gate::active() && before & (BUSY | EXITED) == 0;
    gate::set(before | BUSY);
    let mut child = None;
    if record {
        gate::quiet(|| child = Some(gyr::thread::fork()));
    }
    let boxed = Box::into_raw(Box::new(Start {
        routine,
        arg,
        gyr: ours,
        child,
    }));
    // SAFETY: the program's arguments, passed on; `start` takes the box back in the thread.
    // The errno pointer is the calling thread's.
    let r = unsafe {
        *errno = errno_value;
        let r = real::create(thread, attr, start, boxed.cast());
        errno_value = *errno;
        r
    };
    if r != 0 {
        // SAFETY: no thread was created, so the box is still ours alone.
        drop(unsafe { Box::from_raw(boxed) });
    } else if let Some(c) = child
        && c.id() != 0
    {
        if detached(attr) {
            gate::quiet(|| gyr::thread::detach(c.id()));
        } else {
            // SAFETY: pthread_create succeeded, so it wrote the new thread's handle.
            let t = unsafe { *thread } as usize;
            if let Some(slot) = THREADS.find_or_insert(t) {
                slot.aux.store(c.id(), Ordering::Relaxed);
            }
        }
    }
    gate::set(before);
    // SAFETY: the calling thread's errno.
    unsafe { *errno = errno_value };
    r
}

/// Every thread created through [`pthread_create`] starts here.
extern "C-unwind" fn start(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the box pthread_create made for this thread, and only this thread takes it.
    let s = *unsafe { Box::from_raw(p.cast::<Start>()) };
    if s.gyr {
        gate::set(GYR);
        note_gyr_thread();
    } else {
        gate::set(BUSY);
        // SAFETY: __errno_location has no preconditions; the program's start routine finds
        // errno as the C library left it.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: as above.
        let errno_value = unsafe { *errno };
        // Attaching makes system calls, some of them cancellation points.
        gate::quiet_uncancelled(|| {
            if let Some(child) = s.child {
                child.begin();
                if let Some(slot) = THREADS.find_or_insert(self_key()) {
                    slot.aux.store(child.id(), Ordering::Relaxed);
                }
            }
            // gyr's thread buffer first (attached now, not later inside the program's
            // `malloc`), then the exit guard, whose destructor then runs before the buffer's.
            gyr::thread::current_id();
            EXIT_GUARD.with(|_| ());
        });
        gate::set(ARMED);
        // SAFETY: the calling thread's errno.
        unsafe { *errno = errno_value };
    }
    // No catch_unwind here: cancellation and pthread_exit unwind through this frame.
    (s.routine)(s.arg)
}

/// gyr's id of the joinable thread `t`, when the table knows it.
fn thread_id(t: pthread_t) -> Option<u64> {
    let id = THREADS.find(t as usize)?.aux.load(Ordering::Relaxed);
    (id != 0).then_some(id)
}

/// `pthread_join`: records the wait and its end.
///
/// # Safety
///
/// As `pthread_join`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn pthread_join(t: pthread_t, ret: *mut *mut c_void) -> c_int {
    joined(
        t,
        |t| {
            // SAFETY: the program's arguments, passed on.
            unsafe { real::join(t, ret) }
        },
        true,
    )
}

/// `pthread_tryjoin_np`: records the join if the thread had ended.
///
/// # Safety
///
/// As `pthread_tryjoin_np`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_tryjoin_np(t: pthread_t, ret: *mut *mut c_void) -> c_int {
    joined(
        t,
        |t| {
            // SAFETY: the program's arguments, passed on.
            unsafe { real::tryjoin_np(t, ret) }
        },
        false,
    )
}

/// `pthread_timedjoin_np`: records the wait, and its end if the thread ended in time.
///
/// # Safety
///
/// As `pthread_timedjoin_np`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn pthread_timedjoin_np(
    t: pthread_t,
    ret: *mut *mut c_void,
    at: *const timespec,
) -> c_int {
    joined(
        t,
        |t| {
            // SAFETY: the program's arguments, passed on.
            unsafe { real::timedjoin_np(t, ret, at) }
        },
        true,
    )
}

/// The joins: `waits` says whether the begin is recorded before the call (a join that may
/// wait) or only with the end (a try).
#[inline]
fn joined(t: pthread_t, join: impl FnOnce(pthread_t) -> c_int, waits: bool) -> c_int {
    let Some(e) = gate::enter() else {
        let r = join(t);
        if r == 0 {
            THREADS.remove(t as usize);
        }
        return r;
    };
    let id = thread_id(t);
    if waits && let Some(id) = id {
        gate::quiet(|| gyr::thread::join_begin(id));
    }
    // Not busy while blocked: a cancelled join leaves the thread's state as it was.
    e.leave();
    let r = join(t);
    if r == 0 {
        THREADS.remove(t as usize);
        if let Some(id) = id
            && let Some(e) = gate::enter()
        {
            gate::quiet(|| {
                if !waits {
                    gyr::thread::join_begin(id);
                }
                gyr::thread::join_end(id);
            });
            e.leave();
        }
    }
    r
}

/// `pthread_detach`: records that nobody will join the thread.
///
/// # Safety
///
/// As `pthread_detach`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn pthread_detach(t: pthread_t) -> c_int {
    let id = thread_id(t);
    // SAFETY: the program's argument, passed on.
    let r = unsafe { real::detach(t) };
    if r == 0 {
        THREADS.remove(t as usize);
        if let Some(e) = gate::enter() {
            gate::quiet(|| {
                let id = match id {
                    Some(id) => id,
                    None if t as usize == self_key() => gyr::thread::current_id(),
                    None => 0,
                };
                if id != 0 {
                    gyr::thread::detach(id);
                }
            });
            e.leave();
        }
    }
    r
}

/// `pthread_exit`: records the exit now if no guard will (see the module doc).
///
/// # Safety
///
/// As `pthread_exit`.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C-unwind" fn pthread_exit(value: *mut c_void) -> ! {
    let state = gate::state();
    if state & (ARMED | GYR) == 0 {
        // The main thread (or one this library did not start): no guard records its end.
        if let Some(e) = gate::enter() {
            gate::quiet(gyr::thread::exit);
            e.leave();
        }
        gate::set(gate::state() | EXITED);
        // SAFETY: getpid and gettid have no preconditions.
        if unsafe { libc::gettid() == libc::getpid() } && GYR_THREADS.load(Ordering::Acquire) {
            let before = gate::state();
            gate::set(before | BUSY);
            gate::quiet(start_reaper);
            gate::set(before);
        }
    }
    // SAFETY: the program's argument, passed on; pthread_exit does not return.
    unsafe { real::exit(value) };
    // Only if the C library had no pthread_exit at all.
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}
