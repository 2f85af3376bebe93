//! Collectives: `gyr.mpi.collective` with the communicator, the root as a world rank, and the
//! bytes this rank contributes and receives, recorded before the real call.
//!
//! Arguments the standard says are ignored on this rank (a non-root's receive type in
//! `MPI_Gather`, a root's send type with `MPI_IN_PLACE`) are never looked at: a program may pass
//! anything there.

#![allow(non_snake_case)]

use crate::ffi::{self, Comm, Datatype, Op, Request};
use crate::gate::Call;
use crate::track::{self, bytes, bytes_of_counts};
use libc::{c_int, c_void};

/// Records `call` as a collective on `comm` around `real`.
#[inline]
fn collective(
    name: &'static str,
    comm: Comm,
    sizes: impl FnOnce() -> Sizes,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let Some(mut call) = Call::begin(name) else {
        return real();
    };
    call.record(|| {
        let (root, sent, received) = sizes();
        track::collective(name, comm, root, sent, received);
    });
    let rc = call.real(real);
    call.end(rc)
}

/// Whether this rank is the root `root` of `comm` (`MPI_ROOT` on an intercommunicator).
pub(crate) fn is_root(comm: Comm, root: c_int) -> bool {
    root == ffi::ROOT || track::size_and_rank(comm).1 == root
}

/// The local group's size of `comm`.
pub(crate) fn size(comm: Comm) -> u64 {
    track::size_and_rank(comm).0 as u64
}

/// What a collective records: (root, bytes this rank sends, bytes it receives).
pub(crate) type Sizes = (Option<c_int>, u64, u64);

/// A broadcast's: the root sends the buffer, the others receive it.
pub(crate) fn bcast_sizes(count: c_int, datatype: Datatype, root: c_int, comm: Comm) -> Sizes {
    let n = bytes(count, datatype);
    if is_root(comm, root) {
        (Some(root), n, 0)
    } else {
        (Some(root), 0, n)
    }
}

/// A reduction to a root's: everyone contributes `count`, the root receives the result.
pub(crate) fn reduce_sizes(count: c_int, datatype: Datatype, root: c_int, comm: Comm) -> Sizes {
    let n = bytes(count, datatype);
    (Some(root), n, if is_root(comm, root) { n } else { 0 })
}

/// A gather's (the receive arguments count at the root only).
pub(crate) fn gather_sizes(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> Sizes {
    if is_root(comm, root) {
        let each = bytes(recvcount, recvtype);
        let sent = if sendbuf == ffi::IN_PLACE {
            each
        } else {
            bytes(sendcount, sendtype)
        };
        (Some(root), sent, each * size(comm))
    } else {
        (Some(root), bytes(sendcount, sendtype), 0)
    }
}

/// A scatter's (the send arguments count at the root only).
pub(crate) fn scatter_sizes(
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> Sizes {
    if is_root(comm, root) {
        let each = bytes(sendcount, sendtype);
        let received = if std::ptr::eq(recvbuf as *const c_void, ffi::IN_PLACE) {
            0
        } else {
            bytes(recvcount, recvtype)
        };
        (Some(root), each * size(comm), received)
    } else {
        (Some(root), 0, bytes(recvcount, recvtype))
    }
}

/// An allgather's.
pub(crate) fn allgather_sizes(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvcount: c_int,
    recvtype: Datatype,
    comm: Comm,
) -> Sizes {
    let each = bytes(recvcount, recvtype);
    let sent = if sendbuf == ffi::IN_PLACE {
        each
    } else {
        bytes(sendcount, sendtype)
    };
    (None, sent, each * size(comm))
}

/// An all-to-all's.
pub(crate) fn alltoall_sizes(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvcount: c_int,
    recvtype: Datatype,
    comm: Comm,
) -> Sizes {
    let n = size(comm);
    let received = bytes(recvcount, recvtype) * n;
    let sent = if sendbuf == ffi::IN_PLACE {
        received
    } else {
        bytes(sendcount, sendtype) * n
    };
    (None, sent, received)
}

/// A reduce-scatter's: everyone contributes the whole vector and receives its own block.
///
/// # Safety
///
/// `recvcounts` holds one count per rank of `comm`'s group.
pub(crate) unsafe fn reduce_scatter_sizes(
    recvcounts: *const c_int,
    datatype: Datatype,
    comm: Comm,
) -> Sizes {
    let (n, rank) = track::size_and_rank(comm);
    // SAFETY: the caller's promise.
    let sent = unsafe { bytes_of_counts(n, recvcounts, datatype) };
    let mine = if rank >= 0 && (rank as usize) < n && !recvcounts.is_null() {
        // SAFETY: as above.
        bytes(unsafe { *recvcounts.add(rank as usize) }, datatype)
    } else {
        0
    };
    (None, sent, mine)
}

/// A reduce-scatter with equal blocks.
pub(crate) fn reduce_scatter_block_sizes(
    recvcount: c_int,
    datatype: Datatype,
    comm: Comm,
) -> Sizes {
    let n = bytes(recvcount, datatype);
    (None, n * size(comm), n)
}

/// A gather with counts per rank (the receive arguments count at the root only).
///
/// # Safety
///
/// At the root, `recvcounts` holds one count per rank of `comm`'s group.
pub(crate) unsafe fn gatherv_sizes(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvcounts: *const c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> Sizes {
    if is_root(comm, root) {
        let (n, rank) = track::size_and_rank(comm);
        // SAFETY: the caller's promise.
        let received = unsafe { bytes_of_counts(n, recvcounts, recvtype) };
        let sent = if sendbuf == ffi::IN_PLACE && rank >= 0 && (rank as usize) < n {
            // SAFETY: as above.
            unsafe { bytes_of_counts(1, recvcounts.add(rank as usize), recvtype) }
        } else {
            bytes(sendcount, sendtype)
        };
        (Some(root), sent, received)
    } else {
        (Some(root), bytes(sendcount, sendtype), 0)
    }
}

/// A scatter with counts per rank (the send arguments count at the root only).
///
/// # Safety
///
/// At the root, `sendcounts` holds one count per rank of `comm`'s group.
pub(crate) unsafe fn scatterv_sizes(
    sendcounts: *const c_int,
    sendtype: Datatype,
    recvbuf: *const c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> Sizes {
    if is_root(comm, root) {
        let n = track::size_and_rank(comm).0;
        // SAFETY: the caller's promise.
        let sent = unsafe { bytes_of_counts(n, sendcounts, sendtype) };
        let received = if recvbuf == ffi::IN_PLACE {
            0
        } else {
            bytes(recvcount, recvtype)
        };
        (Some(root), sent, received)
    } else {
        (Some(root), 0, bytes(recvcount, recvtype))
    }
}

/// An allgather with counts per rank.
///
/// # Safety
///
/// `recvcounts` holds one count per rank of `comm`'s group.
pub(crate) unsafe fn allgatherv_sizes(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvcounts: *const c_int,
    recvtype: Datatype,
    comm: Comm,
) -> Sizes {
    let (n, rank) = track::size_and_rank(comm);
    // SAFETY: the caller's promise.
    let received = unsafe { bytes_of_counts(n, recvcounts, recvtype) };
    let sent = if sendbuf == ffi::IN_PLACE && rank >= 0 && (rank as usize) < n {
        // SAFETY: as above.
        unsafe { bytes_of_counts(1, recvcounts.add(rank as usize), recvtype) }
    } else {
        bytes(sendcount, sendtype)
    };
    (None, sent, received)
}

/// An all-to-all with counts per rank.
///
/// # Safety
///
/// The count arrays hold one count per rank of `comm`'s group (`sendcounts` unless `sendbuf`
/// is `MPI_IN_PLACE`).
pub(crate) unsafe fn alltoallv_sizes(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sendtype: Datatype,
    recvcounts: *const c_int,
    recvtype: Datatype,
    comm: Comm,
) -> Sizes {
    let n = track::size_and_rank(comm).0;
    // SAFETY: the caller's promise.
    let received = unsafe { bytes_of_counts(n, recvcounts, recvtype) };
    let sent = if sendbuf == ffi::IN_PLACE {
        received
    } else {
        // SAFETY: as above.
        unsafe { bytes_of_counts(n, sendcounts, sendtype) }
    };
    (None, sent, received)
}

/// `MPI_Barrier`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Barrier(comm: Comm) -> c_int {
    // SAFETY: the program's arguments, passed on.
    collective(
        "MPI_Barrier",
        comm,
        || (None, 0, 0),
        || unsafe { ffi::barrier(comm) },
    )
}

/// `MPI_Bcast`: the root sends the buffer, the others receive it.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Bcast(
    buf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    root: c_int,
    comm: Comm,
) -> c_int {
    let sizes = || bcast_sizes(count, datatype, root, comm);
    // SAFETY: the program's arguments, passed on.
    collective("MPI_Bcast", comm, sizes, || unsafe {
        ffi::bcast(buf, count, datatype, root, comm)
    })
}

/// `MPI_Reduce`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    op: Op,
    root: c_int,
    comm: Comm,
) -> c_int {
    let sizes = || reduce_sizes(count, datatype, root, comm);
    collective("MPI_Reduce", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::reduce(sendbuf, recvbuf, count, datatype, op, root, comm) }
    })
}

macro_rules! all_reduce {
    ($($name:ident = $real:ident;)*) => {$(
        /// The reduction of this name: every rank contributes and receives `count` elements.
        ///
        /// # Safety
        ///
        /// As the MPI function.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype,
            op: Op, comm: Comm,
        ) -> c_int {
            let sizes = || (None, bytes(count, datatype), bytes(count, datatype));
            collective(stringify!($name), comm, sizes, || {
                // SAFETY: the program's arguments, passed on.
                unsafe { ffi::$real(sendbuf, recvbuf, count, datatype, op, comm) }
            })
        }
    )*};
}

all_reduce! {
    MPI_Allreduce = allreduce;
    MPI_Scan = scan;
    MPI_Exscan = exscan;
}

/// `MPI_Reduce_scatter`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: Datatype,
    op: Op,
    comm: Comm,
) -> c_int {
    // SAFETY: `recvcounts` holds one count per rank of the group.
    let sizes = || unsafe { reduce_scatter_sizes(recvcounts, datatype, comm) };
    collective("MPI_Reduce_scatter", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm) }
    })
}

/// `MPI_Reduce_scatter_block`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: Datatype,
    op: Op,
    comm: Comm,
) -> c_int {
    let sizes = || reduce_scatter_block_sizes(recvcount, datatype, comm);
    collective("MPI_Reduce_scatter_block", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm) }
    })
}

/// `MPI_Gather`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> c_int {
    let sizes = || {
        gather_sizes(
            sendbuf, sendcount, sendtype, recvcount, recvtype, root, comm,
        )
    };
    collective("MPI_Gather", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::gather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
            )
        }
    })
}

/// `MPI_Gatherv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> c_int {
    // SAFETY: at the root, `recvcounts` holds one count per rank.
    let sizes = || unsafe {
        gatherv_sizes(
            sendbuf, sendcount, sendtype, recvcounts, recvtype, root, comm,
        )
    };
    collective("MPI_Gatherv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::gatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
            )
        }
    })
}

/// `MPI_Scatter`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> c_int {
    let sizes = || {
        scatter_sizes(
            sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
        )
    };
    collective("MPI_Scatter", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::scatter(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
            )
        }
    })
}

/// `MPI_Scatterv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
) -> c_int {
    // SAFETY: at the root, `sendcounts` holds one count per rank.
    let sizes = || unsafe {
        scatterv_sizes(
            sendcounts, sendtype, recvbuf, recvcount, recvtype, root, comm,
        )
    };
    collective("MPI_Scatterv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::scatterv(
                sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
            )
        }
    })
}

/// `MPI_Allgather`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    comm: Comm,
) -> c_int {
    let sizes = || allgather_sizes(sendbuf, sendcount, sendtype, recvcount, recvtype, comm);
    collective("MPI_Allgather", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::allgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
            )
        }
    })
}

/// `MPI_Allgatherv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Datatype,
    comm: Comm,
) -> c_int {
    // SAFETY: `recvcounts` holds one count per rank.
    let sizes =
        || unsafe { allgatherv_sizes(sendbuf, sendcount, sendtype, recvcounts, recvtype, comm) };
    collective("MPI_Allgatherv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::allgatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
            )
        }
    })
}

/// `MPI_Alltoall`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    comm: Comm,
) -> c_int {
    let sizes = || alltoall_sizes(sendbuf, sendcount, sendtype, recvcount, recvtype, comm);
    collective("MPI_Alltoall", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::alltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
            )
        }
    })
}

/// `MPI_Alltoallv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: Datatype,
    comm: Comm,
) -> c_int {
    // SAFETY: the count arrays hold one count per rank.
    let sizes =
        || unsafe { alltoallv_sizes(sendbuf, sendcounts, sendtype, recvcounts, recvtype, comm) };
    collective("MPI_Alltoallv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::alltoallv(
                sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                comm,
            )
        }
    })
}

// Nonblocking collectives (MPI-3): recorded as their blocking forms are, when they start; the
// `MPI_Wait*`/`MPI_Test*` that completes one is recorded as a call of its own.

/// `MPI_Ibarrier`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ibarrier(comm: Comm, request: *mut Request) -> c_int {
    collective(
        "MPI_Ibarrier",
        comm,
        || (None, 0, 0),
        // SAFETY: the program's arguments, passed on.
        || unsafe { ffi::ibarrier(comm, request) },
    )
}

/// `MPI_Ibcast`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ibcast(
    buf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    root: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || bcast_sizes(count, datatype, root, comm);
    collective("MPI_Ibcast", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::ibcast(buf, count, datatype, root, comm, request) }
    })
}

/// `MPI_Ireduce`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    op: Op,
    root: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || reduce_sizes(count, datatype, root, comm);
    collective("MPI_Ireduce", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request) }
    })
}

/// `MPI_Iallreduce`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    op: Op,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || (None, bytes(count, datatype), bytes(count, datatype));
    collective("MPI_Iallreduce", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request) }
    })
}

/// `MPI_Igather`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Igather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || {
        gather_sizes(
            sendbuf, sendcount, sendtype, recvcount, recvtype, root, comm,
        )
    };
    collective("MPI_Igather", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::igather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
            )
        }
    })
}

/// `MPI_Iscatter`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Iscatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || {
        scatter_sizes(
            sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
        )
    };
    collective("MPI_Iscatter", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::iscatter(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request,
            )
        }
    })
}

/// `MPI_Iallgather`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Iallgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || allgather_sizes(sendbuf, sendcount, sendtype, recvcount, recvtype, comm);
    collective("MPI_Iallgather", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::iallgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
            )
        }
    })
}

/// `MPI_Ialltoall`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ialltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || alltoall_sizes(sendbuf, sendcount, sendtype, recvcount, recvtype, comm);
    collective("MPI_Ialltoall", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::ialltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
            )
        }
    })
}

/// `MPI_Igatherv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Igatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    // SAFETY: at the root, `recvcounts` holds one count per rank.
    let sizes = || unsafe {
        gatherv_sizes(
            sendbuf, sendcount, sendtype, recvcounts, recvtype, root, comm,
        )
    };
    collective("MPI_Igatherv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::igatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                request,
            )
        }
    })
}

/// `MPI_Iscatterv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Iscatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    root: c_int,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    // SAFETY: at the root, `sendcounts` holds one count per rank.
    let sizes = || unsafe {
        scatterv_sizes(
            sendcounts, sendtype, recvbuf, recvcount, recvtype, root, comm,
        )
    };
    collective("MPI_Iscatterv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::iscatterv(
                sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                request,
            )
        }
    })
}

/// `MPI_Iallgatherv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Iallgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Datatype,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    // SAFETY: `recvcounts` holds one count per rank.
    let sizes =
        || unsafe { allgatherv_sizes(sendbuf, sendcount, sendtype, recvcounts, recvtype, comm) };
    collective("MPI_Iallgatherv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::iallgatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request,
            )
        }
    })
}

/// `MPI_Ialltoallv`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ialltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: Datatype,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    // SAFETY: the count arrays hold one count per rank.
    let sizes =
        || unsafe { alltoallv_sizes(sendbuf, sendcounts, sendtype, recvcounts, recvtype, comm) };
    collective("MPI_Ialltoallv", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::ialltoallv(
                sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                comm, request,
            )
        }
    })
}

/// `MPI_Ireduce_scatter`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ireduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: Datatype,
    op: Op,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    // SAFETY: `recvcounts` holds one count per rank of the group.
    let sizes = || unsafe { reduce_scatter_sizes(recvcounts, datatype, comm) };
    collective("MPI_Ireduce_scatter", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request) }
    })
}

/// `MPI_Ireduce_scatter_block`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: Datatype,
    op: Op,
    comm: Comm,
    request: *mut Request,
) -> c_int {
    let sizes = || reduce_scatter_block_sizes(recvcount, datatype, comm);
    collective("MPI_Ireduce_scatter_block", comm, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request)
        }
    })
}

macro_rules! i_scan {
    ($($name:ident = $real:ident;)*) => {$(
        /// The nonblocking scan of this name: every rank contributes and receives `count`
        /// elements.
        ///
        /// # Safety
        ///
        /// As the MPI function.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Datatype,
            op: Op, comm: Comm, request: *mut Request,
        ) -> c_int {
            let sizes = || (None, bytes(count, datatype), bytes(count, datatype));
            collective(stringify!($name), comm, sizes, || {
                // SAFETY: the program's arguments, passed on.
                unsafe { ffi::$real(sendbuf, recvbuf, count, datatype, op, comm, request) }
            })
        }
    )*};
}

i_scan! {
    MPI_Iscan = iscan;
    MPI_Iexscan = iexscan;
}
