//! The Fortran collectives, recorded as their C forms are ([`crate::coll`], whose sizes they
//! share).

use super::{F, c_buf, comm, datatype, end, v};
use crate::coll::{
    Sizes, allgather_sizes, allgatherv_sizes, alltoall_sizes, alltoallv_sizes, bcast_sizes,
    gather_sizes, gatherv_sizes, reduce_scatter_block_sizes, reduce_scatter_sizes, reduce_sizes,
    scatter_sizes, scatterv_sizes,
};
use crate::ffi::{self, Comm};
use crate::gate::Call;
use crate::track::{self, bytes};
use libc::c_void;

/// Records a Fortran collective `name` on `comm` around `real`.
fn collective(
    name: &'static str,
    comm: Comm,
    ierr: F,
    sizes: impl FnOnce() -> Sizes,
    real: impl FnOnce(),
) {
    let Some(mut call) = Call::begin(name) else {
        return real();
    };
    call.record(|| {
        let (root, sent, received) = sizes();
        track::collective(name, comm, root, sent, received);
    });
    call.real(real);
    end(call, ierr)
}

/// `mpi_barrier_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_barrier_(comm: F, ierr: F) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's arguments, passed on.
    collective(
        "mpi_barrier_",
        c,
        ierr,
        || (None, 0, 0),
        || unsafe { ffi::f_barrier(comm, ierr) },
    )
}

/// `mpi_bcast_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_bcast_(buf: *mut c_void, count: F, dt: F, root: F, comm: F, ierr: F) {
    // SAFETY: the program's handles and integers.
    let (c, t, n, r) = unsafe { (self::comm(comm), datatype(dt), v(count), v(root)) };
    let sizes = || bcast_sizes(n, t, r, c);
    // SAFETY: the program's arguments, passed on.
    collective("mpi_bcast_", c, ierr, sizes, || unsafe {
        ffi::f_bcast(buf, count, dt, root, comm, ierr)
    })
}

/// `mpi_reduce_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_reduce_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: F,
    dt: F,
    op: F,
    root: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's handles and integers.
    let (c, t, n, r) = unsafe { (self::comm(comm), datatype(dt), v(count), v(root)) };
    let sizes = || reduce_sizes(n, t, r, c);
    collective("mpi_reduce_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_reduce(sendbuf, recvbuf, count, dt, op, root, comm, ierr) }
    })
}

macro_rules! f_all_reduce {
    ($($name:ident = $real:ident;)*) => {$(
        /// The Fortran reduction of this name: every rank contributes and receives `count`
        /// elements.
        ///
        /// # Safety
        ///
        /// As the Fortran binding.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            sendbuf: *const c_void, recvbuf: *mut c_void, count: F, dt: F, op: F, comm: F,
            ierr: F,
        ) {
            // SAFETY: the program's handles and integers.
            let (c, t, n) = unsafe { (self::comm(comm), datatype(dt), v(count)) };
            let sizes = || (None, bytes(n, t), bytes(n, t));
            collective(stringify!($name), c, ierr, sizes, || {
                // SAFETY: the program's arguments, passed on.
                unsafe { ffi::$real(sendbuf, recvbuf, count, dt, op, comm, ierr) }
            })
        }
    )*};
}

f_all_reduce! {
    mpi_allreduce_ = f_allreduce;
    mpi_scan_ = f_scan;
    mpi_exscan_ = f_exscan;
}

/// `mpi_alltoall_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_alltoall_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        alltoall_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            v(recvcount),
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_alltoall_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_alltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr,
            )
        }
    })
}

/// `mpi_gather_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_gather_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    root: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        gather_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            v(recvcount),
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_gather_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_gather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr,
            )
        }
    })
}

/// `mpi_scatter_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_scatter_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    root: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        scatter_sizes(
            v(sendcount),
            datatype(sendtype),
            c_buf(recvbuf).cast_mut(),
            v(recvcount),
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_scatter_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_scatter(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, ierr,
            )
        }
    })
}

/// `mpi_allgather_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_allgather_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        allgather_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            v(recvcount),
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_allgather_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_allgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, ierr,
            )
        }
    })
}

/// `mpi_gatherv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_gatherv_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcounts: F,
    displs: F,
    recvtype: F,
    root: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        gatherv_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            recvcounts,
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_gatherv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_gatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                ierr,
            )
        }
    })
}

/// `mpi_scatterv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_scatterv_(
    sendbuf: *const c_void,
    sendcounts: F,
    displs: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    root: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        scatterv_sizes(
            sendcounts,
            datatype(sendtype),
            c_buf(recvbuf),
            v(recvcount),
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_scatterv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_scatterv(
                sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                ierr,
            )
        }
    })
}

/// `mpi_allgatherv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_allgatherv_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcounts: F,
    displs: F,
    recvtype: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        allgatherv_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            recvcounts,
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_allgatherv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_allgatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, ierr,
            )
        }
    })
}

/// `mpi_alltoallv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_alltoallv_(
    sendbuf: *const c_void,
    sendcounts: F,
    sdispls: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcounts: F,
    rdispls: F,
    recvtype: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        alltoallv_sizes(
            c_buf(sendbuf),
            sendcounts,
            datatype(sendtype),
            recvcounts,
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_alltoallv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_alltoallv(
                sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                comm, ierr,
            )
        }
    })
}

/// `mpi_reduce_scatter_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_reduce_scatter_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: F,
    dt: F,
    op: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe { reduce_scatter_sizes(recvcounts, datatype(dt), c) };
    collective("mpi_reduce_scatter_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_reduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, ierr) }
    })
}

/// `mpi_reduce_scatter_block_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_reduce_scatter_block_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: F,
    dt: F,
    op: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe { reduce_scatter_block_sizes(v(recvcount), datatype(dt), c) };
    collective("mpi_reduce_scatter_block_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_reduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, ierr) }
    })
}

// Nonblocking collectives: recorded as their blocking forms are, when they start; the
// `mpi_wait*_`/`mpi_test*_` that completes one is a call of its own.

/// `mpi_ibarrier_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ibarrier_(comm: F, req: F, ierr: F) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    let sizes = || (None, 0, 0);
    collective("mpi_ibarrier_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_ibarrier(comm, req, ierr) }
    })
}

/// `mpi_ibcast_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ibcast_(
    buf: *mut c_void,
    count: F,
    dt: F,
    root: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe { bcast_sizes(v(count), datatype(dt), v(root), c) };
    collective("mpi_ibcast_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_ibcast(buf, count, dt, root, comm, req, ierr) }
    })
}

/// `mpi_ireduce_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ireduce_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: F,
    dt: F,
    op: F,
    root: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe { reduce_sizes(v(count), datatype(dt), v(root), c) };
    collective("mpi_ireduce_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_ireduce(sendbuf, recvbuf, count, dt, op, root, comm, req, ierr) }
    })
}

/// `mpi_iallreduce_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iallreduce_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: F,
    dt: F,
    op: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        (
            None,
            bytes(v(count), datatype(dt)),
            bytes(v(count), datatype(dt)),
        )
    };
    collective("mpi_iallreduce_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_iallreduce(sendbuf, recvbuf, count, dt, op, comm, req, ierr) }
    })
}

/// `mpi_igather_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_igather_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    root: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        gather_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            v(recvcount),
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_igather_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_igather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr,
            )
        }
    })
}

/// `mpi_iscatter_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iscatter_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    root: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        scatter_sizes(
            v(sendcount),
            datatype(sendtype),
            c_buf(recvbuf).cast_mut(),
            v(recvcount),
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_iscatter_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_iscatter(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, req, ierr,
            )
        }
    })
}

/// `mpi_iallgather_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iallgather_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        allgather_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            v(recvcount),
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_iallgather_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_iallgather(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req, ierr,
            )
        }
    })
}

/// `mpi_ialltoall_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ialltoall_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        alltoall_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            v(recvcount),
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_ialltoall_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_ialltoall(
                sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, req, ierr,
            )
        }
    })
}

/// `mpi_igatherv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_igatherv_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcounts: F,
    displs: F,
    recvtype: F,
    root: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        gatherv_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            recvcounts,
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_igatherv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_igatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                req, ierr,
            )
        }
    })
}

/// `mpi_iscatterv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iscatterv_(
    sendbuf: *const c_void,
    sendcounts: F,
    displs: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    root: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        scatterv_sizes(
            sendcounts,
            datatype(sendtype),
            c_buf(recvbuf),
            v(recvcount),
            datatype(recvtype),
            v(root),
            c,
        )
    };
    collective("mpi_iscatterv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_iscatterv(
                sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                req, ierr,
            )
        }
    })
}

/// `mpi_iallgatherv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iallgatherv_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcounts: F,
    displs: F,
    recvtype: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        allgatherv_sizes(
            c_buf(sendbuf),
            v(sendcount),
            datatype(sendtype),
            recvcounts,
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_iallgatherv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_iallgatherv(
                sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, req,
                ierr,
            )
        }
    })
}

/// `mpi_ialltoallv_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ialltoallv_(
    sendbuf: *const c_void,
    sendcounts: F,
    sdispls: F,
    sendtype: F,
    recvbuf: *mut c_void,
    recvcounts: F,
    rdispls: F,
    recvtype: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        alltoallv_sizes(
            c_buf(sendbuf),
            sendcounts,
            datatype(sendtype),
            recvcounts,
            datatype(recvtype),
            c,
        )
    };
    collective("mpi_ialltoallv_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_ialltoallv(
                sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                comm, req, ierr,
            )
        }
    })
}

/// `mpi_ireduce_scatter_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ireduce_scatter_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: F,
    dt: F,
    op: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe { reduce_scatter_sizes(recvcounts, datatype(dt), c) };
    collective("mpi_ireduce_scatter_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_ireduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, req, ierr) }
    })
}

/// `mpi_ireduce_scatter_block_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_ireduce_scatter_block_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: F,
    dt: F,
    op: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe { reduce_scatter_block_sizes(v(recvcount), datatype(dt), c) };
    collective("mpi_ireduce_scatter_block_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe {
            ffi::f_ireduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, req, ierr)
        }
    })
}

/// `mpi_iscan_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iscan_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: F,
    dt: F,
    op: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        (
            None,
            bytes(v(count), datatype(dt)),
            bytes(v(count), datatype(dt)),
        )
    };
    collective("mpi_iscan_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_iscan(sendbuf, recvbuf, count, dt, op, comm, req, ierr) }
    })
}

/// `mpi_iexscan_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iexscan_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: F,
    dt: F,
    op: F,
    comm: F,
    req: F,
    ierr: F,
) {
    // SAFETY: the program's communicator.
    let c = unsafe { self::comm(comm) };
    // SAFETY: the program's handles, integers and count arrays (one count per rank where the
    // standard says so; the C form's sizes read no more than it does).
    let sizes = || unsafe {
        (
            None,
            bytes(v(count), datatype(dt)),
            bytes(v(count), datatype(dt)),
        )
    };
    collective("mpi_iexscan_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_iexscan(sendbuf, recvbuf, count, dt, op, comm, req, ierr) }
    })
}
