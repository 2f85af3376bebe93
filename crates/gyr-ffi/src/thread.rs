//! Naming threads in gyr's views: the C form of `gyr::thread::set_name` and `set_role`, for
//! threads gyr has no name for (a C program's pthreads, an OpenMP team, a Fortran program's).
//!
//! A thread gyr cannot name shows as its id; a name makes its row readable, and a role groups
//! threads that do one job: OpenMP's team members named `("omp", omp_get_thread_num())` are
//! one row per index across parallel regions, however often the runtime makes new threads.

use crate::{Error, GYR_E_INVALID, GYR_E_RUNTIME, status, text};
use std::ffi::c_char;

/// The longest role gyr takes: a role travels in an event and with the thread's description.
const MAX_ROLE: usize = 256;

/// Names the calling thread in gyr's views (cut at 256 bytes). Call it before the thread's
/// first event: a thread that has recorded keeps the name it had, and the call says so
/// (`GYR_E_INVALID`). May be called before `gyr_init`.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_thread_set_name(name: *const c_char) -> i32 {
    status("gyr_thread_set_name", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        if name.trim().is_empty() {
            return Err(Error::new(
                GYR_E_INVALID,
                "the name is empty: give the thread a name a reader recognises",
            ));
        }
        if !gyr::thread::set_name(name) {
            return Err(Error::new(
                GYR_E_INVALID,
                "this thread has recorded events already and keeps its name: name a thread \
                 first thing in its body",
            ));
        }
        Ok(())
    })
}

/// Names the calling thread's role and index (a pool's worker 3, OpenMP's thread
/// `omp_get_thread_num()`), so that short-lived threads of one role group into one row per
/// index in every view. Call it once per thread, after `gyr_init`, not per event.
///
/// # Safety
///
/// `role` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_thread_set_role(role: *const c_char, index: u64) -> i32 {
    status("gyr_thread_set_role", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let role = unsafe { text(role, "role") }?;
        if role.trim().is_empty() || role.len() > MAX_ROLE {
            return Err(Error::new(
                GYR_E_INVALID,
                format!(
                    "the role has {} bytes: give a short name of what the thread does (1 to \
                     {MAX_ROLE} bytes, such as \"worker\")",
                    role.len()
                ),
            ));
        }
        gyr::thread::set_role(role, index);
        if gyr::thread::current_id() == 0 {
            return Err(Error::new(
                GYR_E_RUNTIME,
                "no gyr runtime runs: call gyr_init first",
            ));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GYR_E_NULL;

    #[test]
    fn names_and_roles_reach_the_trace_and_bad_ones_are_refused() {
        let _one = crate::RUNTIME_TEST
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // SAFETY: NUL-terminated strings and null, on a thread of the test's own.
        let (before_init, set_before_events, empty, null) = std::thread::spawn(|| unsafe {
            (
                gyr_thread_set_role(c"worker".as_ptr(), 1),
                gyr_thread_set_name(c"solver".as_ptr()),
                gyr_thread_set_name(c" ".as_ptr()),
                gyr_thread_set_name(std::ptr::null()),
            )
        })
        .join()
        .unwrap();
        assert_eq!(before_init, GYR_E_RUNTIME);
        assert_eq!(set_before_events, crate::GYR_OK);
        assert_eq!(empty, GYR_E_INVALID);
        assert_eq!(null, GYR_E_NULL);

        let mem = gyr::MemorySink::new();
        let rt = gyr::Builder::new()
            .sink(mem.clone())
            .serve(false)
            .start()
            .unwrap();
        let long = std::ffi::CString::new("r".repeat(MAX_ROLE + 1)).unwrap();
        // SAFETY: NUL-terminated strings, on a thread of the test's own.
        let (named, role, too_long, late) = std::thread::spawn(move || unsafe {
            let named = gyr_thread_set_name(c"halo exchange".as_ptr());
            let role = gyr_thread_set_role(c"omp".as_ptr(), 3);
            let too_long = gyr_thread_set_role(long.as_ptr(), 0);
            // It has recorded (its role): too late for a name.
            let late = gyr_thread_set_name(c"other".as_ptr());
            (named, role, too_long, late)
        })
        .join()
        .unwrap();
        rt.shutdown();
        assert_eq!(named, crate::GYR_OK);
        assert_eq!(role, crate::GYR_OK);
        assert_eq!(too_long, GYR_E_INVALID);
        assert_eq!(late, GYR_E_INVALID);
        let roles = mem.events("gyr.thread.role");
        assert_eq!(roles.len(), 1, "{roles:?}");
        assert_eq!(
            roles[0].1,
            [
                gyr::gyr_core::Value::Str("omp".into()),
                gyr::gyr_core::Value::UInt(3)
            ]
        );
        let thread = roles[0].0.thread;
        let names: Vec<_> = mem
            .threads()
            .into_iter()
            .filter(|t| t.id == thread)
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["halo exchange"]);
    }
}
