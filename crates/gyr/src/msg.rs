//! Messages between processes, as events: what clock correction and the communication views
//! read.
//!
//! Programs that communicate by their own means (sockets, shared files, a job queue) call
//! [`send`] just before a message leaves and [`recv`] just after one has arrived; the MPI
//! interposer records every MPI message with the same events. [`init`] says who this process
//! is in its job. From matched send/receive pairs `gyr-trace` estimates each process's clock
//! offset and drift (PIMSY's clock synchronisation: a message cannot arrive before it left), and
//! the views draw messages as arrows between processes.
//!
//! | event | fields | when |
//! |---|---|---|
//! | `gyr.msg.rank` | `job`, `rank`, `size` | once, when the process knows its place in the job |
//! | `gyr.msg.send` | `peer`, `tag`, `bytes`, `comm` | when the send begins |
//! | `gyr.msg.recv` | `peer`, `tag`, `bytes`, `comm` | when the receive has completed |
//!
//! `peer` is the other process's rank in the job (MPI: its rank in `MPI_COMM_WORLD`, whatever
//! communicator carried the message), `tag` the program's tag (MPI: the actual tag, also for
//! wildcard receives), `comm` a communicator id that is the same in every process that shares
//! the communicator (0: the job as a whole). Matching follows MPI's non-overtaking rule: the
//! n-th send from A to B with a given `comm` and `tag` is received by B's n-th receive from A
//! with the same `comm` and `tag`.

use crate::emit;
use crate::sync::events::builtin_event;

builtin_event! {
    /// This process is rank `rank` of `size` in job `job`.
    MsgRank<'a> = "gyr.msg.rank" { job: &'a str, rank: u32, size: u32 }
    /// A message of `bytes` bytes to rank `peer` begins to leave.
    MsgSend = "gyr.msg.send" { peer: u32, tag: i32, bytes: u64, comm: u64 }
    /// A message of `bytes` bytes from rank `peer` has arrived.
    MsgRecv = "gyr.msg.recv" { peer: u32, tag: i32, bytes: u64, comm: u64 }
}

/// Says that this process is rank `rank` of `size` in job `job` (a name every process of the
/// job shares: a batch job's id, say). Call it once, before the first message.
pub fn init(job: &str, rank: u32, size: u32) {
    crate::emit(&MsgRank { job, rank, size });
}

/// Records that a message of `bytes` bytes to rank `peer` with tag `tag` begins to leave; call
/// it just before the program sends.
#[inline]
pub fn send(peer: u32, tag: i32, bytes: u64) {
    send_on(0, peer, tag, bytes);
}

/// [`send`] on communicator `comm` (an id every process of the communicator uses for it).
#[inline]
pub fn send_on(comm: u64, peer: u32, tag: i32, bytes: u64) {
    emit!(MsgSend {
        peer,
        tag,
        bytes,
        comm
    });
}

/// [`send_on`], stamped `at`: the time stamp of an event recorded just before it (an MPI send's
/// call begin), read once for both (see [`emit_at`](crate::emit_at)). A send stamped a little
/// early still cannot arrive before it left, which clock correction relies on.
#[inline]
pub fn send_on_at(comm: u64, peer: u32, tag: i32, bytes: u64, at: crate::Stamp) {
    crate::emit_at(
        &MsgSend {
            peer,
            tag,
            bytes,
            comm,
        },
        at,
    );
}

/// Records that a message of `bytes` bytes from rank `peer` with tag `tag` has arrived; call it
/// just after the program's receive returned.
#[inline]
pub fn recv(peer: u32, tag: i32, bytes: u64) {
    recv_on(0, peer, tag, bytes);
}

/// [`recv`] on communicator `comm`.
#[inline]
pub fn recv_on(comm: u64, peer: u32, tag: i32, bytes: u64) {
    emit!(MsgRecv {
        peer,
        tag,
        bytes,
        comm
    });
}

/// [`recv_on`], stamped `at`: the time stamp of an event recorded just after it (an MPI
/// receive's call end), read once for both (see [`emit_at`](crate::emit_at)); a receive stamped
/// a little late still arrived after it left.
#[inline]
pub fn recv_on_at(comm: u64, peer: u32, tag: i32, bytes: u64, at: crate::Stamp) {
    crate::emit_at(
        &MsgRecv {
            peer,
            tag,
            bytes,
            comm,
        },
        at,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sensor;

    #[test]
    fn the_message_events_keep_their_contract() {
        let names = |f: Vec<gyr_core::Field>| f.into_iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(MsgSend::NAME, "gyr.msg.send");
        assert_eq!(MsgRecv::NAME, "gyr.msg.recv");
        assert_eq!(MsgRank::NAME, "gyr.msg.rank");
        assert_eq!(names(MsgSend::fields()), ["peer", "tag", "bytes", "comm"]);
        assert_eq!(names(MsgRecv::fields()), ["peer", "tag", "bytes", "comm"]);
        assert_eq!(names(MsgRank::fields()), ["job", "rank", "size"]);
    }
}
