//! Messages between processes, for clock correction: the C form of `gyr::msg`.
//!
//! A program that communicates by its own means calls `gyr_msg_send` just before a message
//! leaves and `gyr_msg_recv` just after one arrived, after saying once who it is in its job
//! (`gyr_msg_init`); `gyr trace clock` and `--sync` then place every process on one clock.

use crate::{status, text};
use std::ffi::c_char;

/// Says that this process is rank `rank` of `size` in job `job` (a name every process of the
/// job shares). Call it once, before the first message.
///
/// # Safety
///
/// `job` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_msg_init(job: *const c_char, rank: u32, size: u32) -> i32 {
    status("gyr_msg_init", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let job = unsafe { text(job, "job") }?;
        gyr::msg::init(job, rank, size);
        Ok(())
    })
}

/// Records that a message of `bytes` bytes to rank `peer` with tag `tag` on communicator
/// `comm` (0: the whole job) begins to leave.
#[unsafe(no_mangle)]
pub extern "C" fn gyr_msg_send(peer: u32, tag: i32, bytes: u64, comm: u64) {
    gyr::msg::send_on(comm, peer, tag, bytes);
}

/// Records that a message of `bytes` bytes from rank `peer` with tag `tag` on communicator
/// `comm` has arrived.
#[unsafe(no_mangle)]
pub extern "C" fn gyr_msg_recv(peer: u32, tag: i32, bytes: u64, comm: u64) {
    gyr::msg::recv_on(comm, peer, tag, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_recorded_as_gyr_msg_events() {
        let _one = crate::RUNTIME_TEST
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mem = gyr::MemorySink::new();
        let rt = gyr::Builder::new()
            .sink(mem.clone())
            .serve(false)
            .start()
            .unwrap();
        // SAFETY: a NUL-terminated string, and null.
        unsafe {
            assert_eq!(gyr_msg_init(c"job7".as_ptr(), 1, 2), crate::GYR_OK);
            assert_eq!(gyr_msg_init(std::ptr::null(), 1, 2), crate::GYR_E_NULL);
        }
        gyr_msg_send(0, 5, 64, 0);
        gyr_msg_recv(0, 6, 32, 0);
        rt.shutdown();
        assert_eq!(mem.events("gyr.msg.rank").len(), 1);
        assert_eq!(mem.events("gyr.msg.send").len(), 1);
        assert_eq!(mem.events("gyr.msg.recv").len(), 1);
    }
}
