//! The Fortran bindings (`mpif.h` and `use mpi`, as gfortran names them: lower case with one
//! trailing underscore): Open MPI's `libmpi_mpifh` converts the handles and calls `PMPI_*`
//! directly, past our C functions, so the Fortran symbols are interposed too.
//!
//! Each calls the real `pmpi_*_` and records what the C function of the same name records,
//! under the Fortran name (`mpi_send_`). Handles are converted with `PMPI_Comm_f2c`,
//! `PMPI_Type_f2c` and `PMPI_Request_f2c`, statuses (`MPI_STATUS_SIZE` = 6 integers) with
//! `PMPI_Status_f2c`; Fortran's `MPI_STATUS(ES)_IGNORE` is replaced by statuses of ours, and its
//! `MPI_IN_PLACE` recognised by address. Indices Fortran returns (`mpi_waitany_`,
//! `mpi_waitsome_`) count from 1. The return code recorded is `ierr`.
//!
//! Covered: `mpi_init_`, `mpi_init_thread_`, `mpi_finalize_`; point-to-point ([`p2p`]):
//! `mpi_send_`, `ssend_`, `bsend_`, `rsend_`, `recv_`, `sendrecv_`, `sendrecv_replace_`,
//! `isend_`, `issend_`, `ibsend_`, `irsend_`, `irecv_`, `send_init_`, `ssend_init_`,
//! `bsend_init_`, `rsend_init_`, `recv_init_`, `start_`, `startall_`, `request_free_`,
//! `cancel_`, `probe_`, `iprobe_`, `wait_`, `waitall_`, `waitany_`, `waitsome_`, `test_`,
//! `testall_`, `testany_`, `testsome_`; collectives ([`coll`]): `mpi_barrier_`, `bcast_`,
//! `reduce_`, `allreduce_`, `scan_`, `exscan_`, `gather(v)_`, `scatter(v)_`, `allgather(v)_`,
//! `alltoall(v)_`, `reduce_scatter(_block)_`, and their nonblocking forms (`ibarrier_` to
//! `iexscan_`);
//! communicators ([`comm`]): `mpi_comm_split_`, `comm_split_type_`, `comm_dup_`,
//! `comm_dup_with_info_`, `comm_create_`, `cart_create_`, `comm_free_`. Other Fortran calls run unrecorded.

use crate::ffi::{self, Comm, Datatype, Fint, Request, Status};
use crate::gate::Call;
use libc::c_void;

pub mod coll;
pub mod comm;
pub mod p2p;

type F = *mut Fint;

/// The C handle of the Fortran communicator at `c`.
///
/// # Safety
///
/// `c` points at a Fortran communicator handle.
unsafe fn comm(c: F) -> Comm {
    // SAFETY: the caller's promise; PMPI_Comm_f2c takes any integer.
    unsafe { ffi::comm_f2c(*c) }
}

/// The C handle of the Fortran datatype at `t`.
///
/// # Safety
///
/// `t` points at a Fortran datatype handle.
unsafe fn datatype(t: F) -> Datatype {
    // SAFETY: the caller's promise; PMPI_Type_f2c takes any integer.
    unsafe { ffi::type_f2c(*t) }
}

/// The C handle of the Fortran request `r`.
fn request(r: Fint) -> Request {
    // SAFETY: PMPI_Request_f2c takes any integer.
    unsafe { ffi::request_f2c(r) }
}

/// The C status of the Fortran status at `f`.
fn c_status(f: *const Fint) -> Status {
    let mut s = Status::default();
    // SAFETY: `f` holds MPI_STATUS_SIZE integers the MPI library filled.
    unsafe { ffi::status_f2c(f, &mut s) };
    s
}

/// The value of the Fortran integer at `p`.
///
/// # Safety
///
/// `p` points at an integer.
unsafe fn v(p: F) -> Fint {
    // SAFETY: the caller's promise.
    unsafe { *p }
}

/// Ends `call` with the Fortran `ierr`.
fn end(call: Call, ierr: F) {
    // SAFETY: the ierr the real call wrote.
    let _ = call.end(unsafe { *ierr });
}

/// `mpi_init_`: then `gyr.msg.rank`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_init_(ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_init(ierr) };
    let Some(mut call) = Call::begin("mpi_init_") else {
        return real();
    };
    call.real(real);
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(crate::initialised);
    }
    end(call, ierr)
}

/// `mpi_init_thread_`: then `gyr.msg.rank`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_init_thread_(required: F, provided: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_init_thread(required, provided, ierr) };
    let Some(mut call) = Call::begin("mpi_init_thread_") else {
        return real();
    };
    call.real(real);
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(crate::initialised);
    }
    end(call, ierr)
}

/// `mpi_finalize_`: then a flush.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_finalize_(ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_finalize(ierr) };
    let Some(mut call) = Call::begin("mpi_finalize_") else {
        return real();
    };
    call.real(real);
    end(call, ierr);
    crate::gate::quiet(|| {
        gyr::flush();
    });
}

/// The C meaning of the Fortran buffer `buf`: `MPI_IN_PLACE` if it is Fortran's.
fn c_buf(buf: *const c_void) -> *const c_void {
    if std::ptr::eq(buf, ffi::F_IN_PLACE.get()) {
        ffi::IN_PLACE
    } else {
        buf
    }
}
