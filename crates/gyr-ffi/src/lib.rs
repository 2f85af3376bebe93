#![doc = include_str!("../README.md")]
//!
//! This crate provides, as exported C symbols (declared in `include/gyr.h`):
//! - the runtime: `gyr_init`, `gyr_shutdown`, `gyr_flush`, and errors as status codes with
//!   `gyr_last_error` (this module);
//! - sensors: spec files, typed emits, sensor control, sampling and aggregating sensors
//!   ([`sensor`]);
//! - steering: objects with attributes bound to program variables, actuators, functions and
//!   synch points ([`steer`]);
//! - messages between processes for clock correction ([`msg`]);
//! - threads' names and roles in gyr's views ([`thread`]);
//!
//! and, for `gyr gen`, the generator of typed sensor code for C, C++ and Fortran ([`codegen`]).
//!
//! # Errors
//!
//! Every call that can fail returns a status: `GYR_OK` (0) or one of the `GYR_E_*` codes, and
//! leaves a message saying what was wrong and what to do, which `gyr_last_error` returns on the
//! same thread. A null pointer, text that is not UTF-8 or a payload that does not fit its event
//! type is refused that way; nothing gyr does aborts the program (a panic inside gyr is caught
//! at the boundary and becomes `GYR_E_INTERNAL`).

pub mod codegen;
pub mod msg;
pub mod sensor;
pub mod steer;
pub mod thread;

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

/// Success.
pub const GYR_OK: i32 = 0;
/// A pointer argument was null.
pub const GYR_E_NULL: i32 = 1;
/// A text argument was not UTF-8.
pub const GYR_E_UTF8: i32 = 2;
/// An argument was refused (a bad name, range, payload or spec): see `gyr_last_error`.
pub const GYR_E_INVALID: i32 = 3;
/// No sensor, object or function of that name.
pub const GYR_E_NOT_FOUND: i32 = 4;
/// The name is taken already.
pub const GYR_E_EXISTS: i32 = 5;
/// The runtime could not be started, or is not running.
pub const GYR_E_RUNTIME: i32 = 6;
/// A fault inside gyr, caught before it reached the program.
pub const GYR_E_INTERNAL: i32 = 7;

/// An error as the ABI reports it: its status code and message.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = text);
}

/// Runs `f` at the boundary: its error becomes a status and the thread's message, and a panic
/// is caught (and reported) instead of unwinding into C.
pub(crate) fn status(what: &str, f: impl FnOnce() -> Result<(), Error>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => GYR_OK,
        Ok(Err(e)) => {
            set_last_error(&format!("{what}: {}", e.message));
            e.code
        }
        Err(_) => {
            set_last_error(&format!(
                "{what}: gyr failed inside (a bug of gyr's, please report it); the program \
                 goes on"
            ));
            GYR_E_INTERNAL
        }
    }
}

/// As [`status`], for calls that return a handle: null on failure.
pub(crate) fn handle<T>(what: &str, f: impl FnOnce() -> Result<*mut T, Error>) -> *mut T {
    let mut out = std::ptr::null_mut();
    status(what, || {
        out = f()?;
        Ok(())
    });
    out
}

/// Reads a C string argument: refuses null and text that is not UTF-8, naming the argument.
///
/// # Safety
///
/// `p` is null or points to a NUL-terminated string that stays valid for `'a`.
pub(crate) unsafe fn text<'a>(p: *const c_char, arg: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::new(
            GYR_E_NULL,
            format!("`{arg}` is a null pointer: pass a NUL-terminated string"),
        ));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string valid for 'a.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|e| {
        Error::new(
            GYR_E_UTF8,
            format!(
                "`{arg}` is not UTF-8 text (byte {} is not): pass UTF-8",
                e.valid_up_to()
            ),
        )
    })
}

/// As [`text`], where null means "none".
///
/// # Safety
///
/// As [`text`].
pub(crate) unsafe fn opt_text<'a>(p: *const c_char, arg: &str) -> Result<Option<&'a str>, Error> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: as the caller promised.
        unsafe { text(p, arg) }.map(|t| Some(t).filter(|t| !t.is_empty()))
    }
}

/// The runtime `gyr_init` started, which `gyr_shutdown` ends.
static RUNTIME: Mutex<Option<gyr::Runtime>> = Mutex::new(None);

/// Starts gyr's runtime as a Rust program's `gyr::init` does, configured by the `GYR_*`
/// environment variables (trace file, server, hub, policy). Calling it again while it runs does
/// nothing. A program that cannot be monitored gets `GYR_E_RUNTIME` and runs on unmonitored.
#[unsafe(no_mangle)]
pub extern "C" fn gyr_init() -> i32 {
    status("gyr_init", || {
        let mut rt = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
        if rt.is_some() {
            return Ok(());
        }
        let runtime = without_sigpipe(gyr::init)
            .map_err(|e| Error::new(GYR_E_RUNTIME, format!("the program runs unmonitored: {e}")))?;
        // SAFETY: `at_exit` is an `extern "C" fn()` that cannot unwind and lives as long as
        // the process; registered after gyr's own hook, it runs before it.
        unsafe { libc::atexit(at_exit) };
        *rt = Some(runtime);
        Ok(())
    })
}

/// Runs `f` with SIGPIPE blocked on the calling thread. A C program keeps SIGPIPE's default
/// action, which ends the process, and gyr writes to sockets (the steering server's clients,
/// a hub) that a peer may close at any time: Rust programs ignore SIGPIPE from the start, C
/// programs must not die of it either. Threads started inside `f` (the monitors, the server)
/// inherit the mask for good; on the calling thread, a SIGPIPE raised by gyr's own writes inside
/// `f` is taken off (`sigtimedwait`) before the program's mask is put back, so the program's own
/// writes keep their default.
fn without_sigpipe<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigemptyset and sigaddset fill a set on this stack; pthread_sigmask changes the
    // calling thread's mask only, and the previous mask is put back below.
    let (set, old) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        (set, old)
    };
    let out = f();
    // SAFETY: `set` and `old` are the sets above; a zero timeout makes sigtimedwait only take
    // a SIGPIPE already pending, never wait; the mask saved above is restored on this thread.
    unsafe {
        if libc::sigismember(&old, libc::SIGPIPE) != 1 {
            let zero = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            while libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) == libc::SIGPIPE {}
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    out
}

/// At exit, before gyr's own hook ends the runtime on the exiting thread: that thread blocks
/// SIGPIPE for the little life it has left, as `without_sigpipe` does for the other calls.
extern "C" fn at_exit() {
    // SAFETY: fills a set on this stack and blocks it on the calling thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Ends the runtime: every event recorded so far reaches the trace file and the sinks, and the
/// steering server stops. Without it the runtime ends when the process exits normally.
#[unsafe(no_mangle)]
pub extern "C" fn gyr_shutdown() -> i32 {
    status("gyr_shutdown", || {
        let rt = RUNTIME.lock().unwrap_or_else(|e| e.into_inner()).take();
        without_sigpipe(|| match rt {
            Some(rt) => {
                rt.shutdown();
            }
            None => {
                gyr::shutdown();
            }
        });
        Ok(())
    })
}

/// Waits (at most 5 s) until every event recorded so far has reached the sinks.
#[unsafe(no_mangle)]
pub extern "C" fn gyr_flush() -> i32 {
    status("gyr_flush", || {
        if without_sigpipe(gyr::flush) {
            Ok(())
        } else {
            Err(Error::new(
                GYR_E_RUNTIME,
                "no runtime is running, or it did not drain in 5 s: call gyr_init first",
            ))
        }
    })
}

/// The message of this thread's last failed call (empty if none failed): what was wrong and
/// what to do. The text stays valid until the next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn gyr_last_error() -> *const c_char {
    static EMPTY: &CStr = c"";
    LAST_ERROR
        .try_with(|e| e.borrow().as_ptr())
        .unwrap_or(EMPTY.as_ptr())
}

/// Serialises the unit tests that start a runtime: a process has one at a time.
#[cfg(test)]
pub(crate) static RUNTIME_TEST: Mutex<()> = Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: gyr_last_error returns a NUL-terminated string valid until the next failure.
        unsafe { CStr::from_ptr(gyr_last_error()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn threads_started_without_sigpipe_inherit_the_mask_and_the_caller_keeps_its_own() {
        let blocked = || {
            // SAFETY: reads the calling thread's mask into a local set.
            unsafe {
                let mut cur: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut cur);
                libc::sigismember(&cur, libc::SIGPIPE) == 1
            }
        };
        assert!(!blocked());
        let inside = without_sigpipe(|| std::thread::spawn(blocked).join().unwrap());
        assert!(inside, "a thread started inside has SIGPIPE blocked");
        assert!(!blocked(), "the caller's mask is put back");
        // A SIGPIPE raised inside (as a write to a closed socket raises it) is taken off before
        // the mask is restored: a handler counting deliveries never runs.
        static DELIVERED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        extern "C" fn count(_: libc::c_int) {
            DELIVERED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        // SAFETY: installs a handler that only touches an atomic, and puts the old one back.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = count as extern "C" fn(libc::c_int) as libc::sighandler_t;
            let mut prev: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGPIPE, &act, &mut prev);
            without_sigpipe(|| {
                libc::pthread_kill(libc::pthread_self(), libc::SIGPIPE);
            });
            assert_eq!(DELIVERED.load(std::sync::atomic::Ordering::SeqCst), 0);
            // The check itself: the same signal outside is delivered.
            libc::pthread_kill(libc::pthread_self(), libc::SIGPIPE);
            assert_eq!(DELIVERED.load(std::sync::atomic::Ordering::SeqCst), 1);
            libc::sigaction(libc::SIGPIPE, &prev, std::ptr::null_mut());
        }
        assert!(!blocked());
    }

    #[test]
    fn text_arguments_are_checked() {
        // SAFETY: null, and valid NUL-terminated strings.
        unsafe {
            let e = text(std::ptr::null(), "name").unwrap_err();
            assert_eq!(e.code, GYR_E_NULL);
            assert!(e.message.contains("`name` is a null pointer"));
            let bad = c"ab\xffcd";
            let e = text(bad.as_ptr(), "name").unwrap_err();
            assert_eq!(e.code, GYR_E_UTF8);
            assert!(e.message.contains("byte 2"), "{}", e.message);
            assert_eq!(text(c"ok".as_ptr(), "name").unwrap(), "ok");
            assert_eq!(opt_text(std::ptr::null(), "unit").unwrap(), None);
        }
    }

    #[test]
    fn failures_leave_a_message_and_panics_stop_at_the_boundary() {
        let code = status("gyr_test", || Err(Error::new(GYR_E_INVALID, "bad thing")));
        assert_eq!(code, GYR_E_INVALID);
        assert_eq!(last(), "gyr_test: bad thing");
        let code = status("gyr_test", || panic!("boom"));
        assert_eq!(code, GYR_E_INTERNAL);
        assert!(last().contains("gyr failed inside"));
        let p: *mut u8 = handle("gyr_test", || Err(Error::new(GYR_E_NOT_FOUND, "none")));
        assert!(p.is_null());
    }
}
