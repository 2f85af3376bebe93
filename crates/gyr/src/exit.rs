//! Ending the process without losing the trace: an `atexit` hook, and SIGINT, SIGTERM and
//! SIGHUP handled by a thread that shuts the runtime down before the signal takes its course.
//!
//! # Why these two
//!
//! `std::process::exit` runs no destructor, so a [`Runtime`](crate::Runtime) guard alive at that
//! moment never drains its rings; C's `exit` still runs `atexit` hooks, and Rust's returns from
//! `main` end in it too. A signal whose action is the default kills the process at once; gyr
//! takes it only when the program left it at the default, on a thread of its own (no work in
//! a signal handler), restores the default before shutting down so that a second Ctrl-C kills
//! at once, and then raises the signal again, so the exit status and the parent's view are
//! what they would have been without gyr.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

/// How long an exit or a signal waits for the monitors and sinks to finish: long enough to
/// drain full rings into a file, short enough that a wedged sink cannot hold the exit up.
pub const DEFAULT_EXIT_DEADLINE: Duration = Duration::from_secs(2);

/// The signals shut down on, when their action is the default.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// What the exit hook and the signal thread do to the runtime, given by the runtime when it
/// starts (this module knows nothing else of it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hooks {
    /// Ends whatever runtime is running, waiting for nothing past the deadline.
    pub(crate) end_by: fn(Instant),
    /// Flushes the running runtime, if any.
    pub(crate) flush: fn() -> bool,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Registers the exit hook, and the signal thread if `signals`; each once per process.
pub(crate) fn install(signals: bool, hooks: Hooks) {
    let _ = HOOKS.set(hooks);
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` with no arguments, as atexit requires; it
        // never unwinds (every panic inside is caught) and stays valid for the whole process.
        if unsafe { libc::atexit(at_exit) } != 0 {
            crate::diag!(
                "gyr: cannot register the exit hook: call gyr::shutdown() before std::process::exit"
            );
        }
    });
    if signals {
        static SIGNALS_ONCE: Once = Once::new();
        SIGNALS_ONCE.call_once(install_signals);
    }
}

extern "C" fn at_exit() {
    if FORGOTTEN.load(Ordering::SeqCst) {
        return;
    }
    // A panic must not cross into C.
    let _ = std::panic::catch_unwind(end_now);
}

/// Set in the child of a `fork()` by [`forget_in_child`].
static FORGOTTEN: AtomicBool = AtomicBool::new(false);

/// In the child of a `fork()`: the exit hook does nothing (the trace and the server's files are
/// the parent's), and SIGINT, SIGTERM and SIGHUP get their default action back where gyr's
/// handler is installed, since it would wake the parent's `gyr-signals` thread through the pipe
/// they share. Async-signal-safe: atomics and `sigaction` only.
pub(crate) fn forget_in_child() {
    FORGOTTEN.store(true, Ordering::SeqCst);
    let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in SIGNALS {
        if current_handler(sig) == Some(ours) {
            // SAFETY: SIG_DFL is a valid action for these signals; the child then ends on them
            // as it would have without gyr.
            unsafe { libc::signal(sig, libc::SIG_DFL) };
        }
    }
    // A handler already running writes to no descriptor at all.
    WAKE.store(-1, Ordering::SeqCst);
}

/// Shuts down whatever runtime is running, within [`DEFAULT_EXIT_DEADLINE`].
fn end_now() {
    let deadline = Instant::now() + DEFAULT_EXIT_DEADLINE;
    if let Some(hooks) = HOOKS.get() {
        (hooks.end_by)(deadline);
    }
}

/// The write end of the pipe the signal handler wakes the `gyr-signals` thread through.
static WAKE: AtomicI32 = AtomicI32::new(-1);

/// The handler: one byte naming the signal into the pipe, nothing else (async-signal-safe).
extern "C" fn on_signal(sig: libc::c_int) {
    let byte = sig as u8;
    // SAFETY: errno is saved and restored around write, which is async-signal-safe; the
    // buffer is one byte on this stack; a full or closed pipe only makes write fail.
    unsafe {
        let errno = *libc::__errno_location();
        libc::write(WAKE.load(Ordering::Relaxed), (&raw const byte).cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// The handler now installed for `sig`, as an address.
fn current_handler(sig: libc::c_int) -> Option<libc::sighandler_t> {
    // SAFETY: a zeroed sigaction is a valid out-parameter; with a null new action, sigaction
    // only reads the current one into `old` and changes nothing.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
    }
}

fn install_signals() {
    let taken: Vec<libc::c_int> = SIGNALS
        .into_iter()
        .filter(|s| current_handler(*s) == Some(libc::SIG_DFL))
        .collect();
    if taken.is_empty() {
        return;
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        crate::diag!(
            "gyr: cannot watch for signals ({}): a signal may lose the last events",
            std::io::Error::last_os_error()
        );
        return;
    }
    WAKE.store(fds[1], Ordering::Relaxed);
    let read_end = fds[0];
    for &sig in &taken {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        // SAFETY: the action is a valid handler that only writes to a pipe; SA_RESTART keeps
        // the program's interrupted system calls going as before.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
    let spawned = std::thread::Builder::new()
        .name("gyr-signals".into())
        .spawn(move || follow_signals(read_end, &taken));
    if let Err(e) = spawned {
        crate::diag!(
            "gyr: cannot start the signal thread ({e}): a signal may lose the last events"
        );
    }
}

/// Waits for signals. A signal still handled by gyr alone ends the runtime, then the process
/// as the default action would; one the program has since taken over (a handler installed
/// after gyr's, which chained to it) is the program's to act on: gyr only flushes.
fn follow_signals(read_end: libc::c_int, taken: &[libc::c_int]) {
    let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    loop {
        let mut byte = 0u8;
        // SAFETY: reads at most one byte into `byte`, from the pipe this thread alone reads.
        let n = unsafe { libc::read(read_end, (&raw mut byte).cast(), 1) };
        if n != 1 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let sig = libc::c_int::from(byte);
        if current_handler(sig) != Some(ours) {
            if let Some(hooks) = HOOKS.get() {
                (hooks.flush)();
            }
            continue;
        }
        for &s in taken {
            // SAFETY: SIG_DFL is a valid action for these signals; a second signal now ends
            // the process at once, even while the shutdown below is under way.
            unsafe { libc::signal(s, libc::SIG_DFL) };
        }
        let _ = std::panic::catch_unwind(end_now);
        // SAFETY: the action is the default again, so raising ends the process as the signal
        // would have without gyr.
        unsafe { libc::raise(sig) };
        return;
    }
}
