//! The real pthread functions: the definitions behind ours, found with `dlsym(RTLD_NEXT, ..)`
//! (`dlvsym` where glibc keeps two versions of a symbol), once, and called through a cached
//! pointer.
//!
//! # Why versions matter
//!
//! glibc exports `pthread_cond_*` twice: the implementation of today under `GLIBC_2.3.2`, and an
//! old one kept for binaries of before 2002 under the base version. A plain `dlsym` may return
//! the old one, whose condition variables are a different structure: a program waiting through
//! one and signalling through the other would hang. Programs link against the default version,
//! so ours must call that one too.
//!
//! # When they are resolved
//!
//! [`resolve_all`] runs first in the constructor, before the runtime starts any thread: a
//! thread of gyr's calling a function of ours must find its pointer ready rather than call
//! `dlsym`, which may wait for the dynamic loader's lock while a constructor runs. A function
//! called before the constructor (by another library's constructor) resolves its own pointer
//! on first use. A symbol that cannot be found makes its function return `ENOSYS` (the clock
//! variants are missing from glibc before 2.30).

use libc::{
    c_int, c_void, clockid_t, pthread_attr_t, pthread_barrier_t, pthread_cond_t, pthread_mutex_t,
    pthread_rwlock_t, pthread_t, timespec,
};
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// One real function: its name, the version to ask for first, and the pointer once found.
#[derive(Debug)]
pub(crate) struct Real {
    name: &'static CStr,
    version: Option<&'static CStr>,
    ptr: AtomicPtr<c_void>,
}

impl Real {
    const fn new(name: &'static CStr, version: Option<&'static CStr>) -> Self {
        Real {
            name,
            version,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The function's address, or null when the C library lacks it.
    #[inline]
    fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if p.is_null() { self.resolve() } else { p }
    }

    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut c_void {
        let mut p = std::ptr::null_mut();
        if let Some(version) = self.version {
            // SAFETY: both strings are NUL-terminated and static; RTLD_NEXT asks for the next
            // definition after this library, which dlvsym looks up without side effects on
            // ours.
            p = unsafe { libc::dlvsym(libc::RTLD_NEXT, self.name.as_ptr(), version.as_ptr()) };
        }
        if p.is_null() {
            // SAFETY: as above.
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        }
        self.ptr.store(p, Ordering::Release);
        p
    }
}

/// Declares the real functions: a `Real` per symbol in `sym`, and a function calling it.
macro_rules! real {
    ($(
        $name:ident = $sym:literal $(@ $ver:literal)? ($($arg:ident : $ty:ty),*) -> $ret:ty,
            else $missing:expr;
    )*) => {
        #[allow(non_upper_case_globals)]
        mod sym {
            use super::Real;
            $(pub(crate) static $name: Real = Real::new($sym, real!(@ver $($ver)?));)*
        }

        $(
            /// The C library's function of this name.
            ///
            /// # Safety
            ///
            /// As the C library's function: the arguments must be what it expects.
            #[inline]
            #[allow(clippy::unused_unit)] // pthread_exit returns `()`
            pub(crate) unsafe fn $name($($arg: $ty),*) -> $ret {
                let p = sym::$name.get();
                if p.is_null() {
                    return $missing;
                }
                // SAFETY: `p` is the address the dynamic loader gave for this symbol, whose C
                // signature is the one written here ("C-unwind": cancellation and
                // `pthread_exit` unwind through it).
                let f: unsafe extern "C-unwind" fn($($ty),*) -> $ret =
                    unsafe { std::mem::transmute::<*mut c_void, _>(p) };
                // SAFETY: the caller passes what the C function expects.
                unsafe { f($($arg),*) }
            }
        )*

        /// Resolves every real function now (see the module doc).
        pub(crate) fn resolve_all() {
            $(sym::$name.get();)*
        }
    };
    (@ver) => { None };
    (@ver $v:literal) => { Some($v) };
}

/// Returned by a function the C library lacks.
const MISSING: c_int = libc::ENOSYS;

type StartRoutine = extern "C-unwind" fn(*mut c_void) -> *mut c_void;

real! {
    create = c"pthread_create"(
        t: *mut pthread_t, a: *const pthread_attr_t, f: StartRoutine, arg: *mut c_void
    ) -> c_int, else MISSING;
    join = c"pthread_join"(t: pthread_t, r: *mut *mut c_void) -> c_int, else MISSING;
    tryjoin_np = c"pthread_tryjoin_np"(t: pthread_t, r: *mut *mut c_void) -> c_int, else MISSING;
    timedjoin_np = c"pthread_timedjoin_np"(
        t: pthread_t, r: *mut *mut c_void, at: *const timespec
    ) -> c_int, else MISSING;
    detach = c"pthread_detach"(t: pthread_t) -> c_int, else MISSING;
    // Missing, it returns: its caller aborts.
    exit = c"pthread_exit"(r: *mut c_void) -> (), else ();

    mutex_init = c"pthread_mutex_init"(m: *mut pthread_mutex_t, a: *const c_void) -> c_int,
        else MISSING;
    mutex_lock = c"pthread_mutex_lock"(m: *mut pthread_mutex_t) -> c_int, else MISSING;
    mutex_trylock = c"pthread_mutex_trylock"(m: *mut pthread_mutex_t) -> c_int, else MISSING;
    mutex_timedlock = c"pthread_mutex_timedlock"(
        m: *mut pthread_mutex_t, at: *const timespec
    ) -> c_int, else MISSING;
    mutex_clocklock = c"pthread_mutex_clocklock"(
        m: *mut pthread_mutex_t, c: clockid_t, at: *const timespec
    ) -> c_int, else MISSING;
    mutex_unlock = c"pthread_mutex_unlock"(m: *mut pthread_mutex_t) -> c_int, else MISSING;
    mutex_destroy = c"pthread_mutex_destroy"(m: *mut pthread_mutex_t) -> c_int, else MISSING;

    cond_init = c"pthread_cond_init" @ c"GLIBC_2.3.2"(
        c: *mut pthread_cond_t, a: *const c_void
    ) -> c_int, else MISSING;
    cond_wait = c"pthread_cond_wait" @ c"GLIBC_2.3.2"(
        c: *mut pthread_cond_t, m: *mut pthread_mutex_t
    ) -> c_int, else MISSING;
    cond_timedwait = c"pthread_cond_timedwait" @ c"GLIBC_2.3.2"(
        c: *mut pthread_cond_t, m: *mut pthread_mutex_t, at: *const timespec
    ) -> c_int, else MISSING;
    cond_clockwait = c"pthread_cond_clockwait"(
        c: *mut pthread_cond_t, m: *mut pthread_mutex_t, k: clockid_t, at: *const timespec
    ) -> c_int, else MISSING;
    cond_signal = c"pthread_cond_signal" @ c"GLIBC_2.3.2"(c: *mut pthread_cond_t) -> c_int,
        else MISSING;
    cond_broadcast = c"pthread_cond_broadcast" @ c"GLIBC_2.3.2"(c: *mut pthread_cond_t) -> c_int,
        else MISSING;
    cond_destroy = c"pthread_cond_destroy" @ c"GLIBC_2.3.2"(c: *mut pthread_cond_t) -> c_int,
        else MISSING;

    rwlock_init = c"pthread_rwlock_init"(l: *mut pthread_rwlock_t, a: *const c_void) -> c_int,
        else MISSING;
    rwlock_rdlock = c"pthread_rwlock_rdlock"(l: *mut pthread_rwlock_t) -> c_int, else MISSING;
    rwlock_tryrdlock = c"pthread_rwlock_tryrdlock"(l: *mut pthread_rwlock_t) -> c_int,
        else MISSING;
    rwlock_timedrdlock = c"pthread_rwlock_timedrdlock"(
        l: *mut pthread_rwlock_t, at: *const timespec
    ) -> c_int, else MISSING;
    rwlock_clockrdlock = c"pthread_rwlock_clockrdlock"(
        l: *mut pthread_rwlock_t, c: clockid_t, at: *const timespec
    ) -> c_int, else MISSING;
    rwlock_wrlock = c"pthread_rwlock_wrlock"(l: *mut pthread_rwlock_t) -> c_int, else MISSING;
    rwlock_trywrlock = c"pthread_rwlock_trywrlock"(l: *mut pthread_rwlock_t) -> c_int,
        else MISSING;
    rwlock_timedwrlock = c"pthread_rwlock_timedwrlock"(
        l: *mut pthread_rwlock_t, at: *const timespec
    ) -> c_int, else MISSING;
    rwlock_clockwrlock = c"pthread_rwlock_clockwrlock"(
        l: *mut pthread_rwlock_t, c: clockid_t, at: *const timespec
    ) -> c_int, else MISSING;
    rwlock_unlock = c"pthread_rwlock_unlock"(l: *mut pthread_rwlock_t) -> c_int, else MISSING;
    rwlock_destroy = c"pthread_rwlock_destroy"(l: *mut pthread_rwlock_t) -> c_int, else MISSING;

    barrier_init = c"pthread_barrier_init"(
        b: *mut pthread_barrier_t, a: *const c_void, n: libc::c_uint
    ) -> c_int, else MISSING;
    barrier_wait = c"pthread_barrier_wait"(b: *mut pthread_barrier_t) -> c_int, else MISSING;
    barrier_destroy = c"pthread_barrier_destroy"(b: *mut pthread_barrier_t) -> c_int,
        else MISSING;
}
