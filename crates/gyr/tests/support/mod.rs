//! Helpers shared by the runtime's integration tests.

use std::sync::{Mutex, MutexGuard};

/// One runtime runs per process: tests that start one take this lock first.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
