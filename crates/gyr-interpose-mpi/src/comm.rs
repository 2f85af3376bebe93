//! Communicators: the creating calls that are collective over their parent (`MPI_Comm_split`,
//! `_split_type`, `_dup`, `_dup_with_info`, `_create`, `MPI_Cart_create`) record `gyr.mpi.comm`
//! with the new communicator's id and members (see `track` for how ids agree between ranks);
//! `MPI_Comm_free` records `gyr.mpi.comm_free`.

#![allow(non_snake_case)]

use crate::ffi::{self, Comm, Group, Info};
use crate::gate::Call;
use crate::track;
use libc::c_int;

/// Records `name`, a call creating `*out` from `parent`, around `real`.
#[inline]
fn creating(
    name: &'static str,
    parent: Comm,
    out: *mut Comm,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let Some(mut call) = Call::begin(name) else {
        return real();
    };
    let rc = call.real(real);
    if rc == ffi::SUCCESS {
        // SAFETY: the communicator the call wrote.
        call.record(|| track::created(name, parent, unsafe { *out }));
    }
    call.end(rc)
}

/// `MPI_Comm_split`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut Comm,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    creating("MPI_Comm_split", comm, newcomm, || unsafe {
        ffi::comm_split(comm, color, key, newcomm)
    })
}

/// `MPI_Comm_split_type`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Comm_split_type(
    comm: Comm,
    split_type: c_int,
    key: c_int,
    info: Info,
    newcomm: *mut Comm,
) -> c_int {
    creating("MPI_Comm_split_type", comm, newcomm, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::comm_split_type(comm, split_type, key, info, newcomm) }
    })
}

/// `MPI_Comm_dup`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Comm_dup(comm: Comm, newcomm: *mut Comm) -> c_int {
    // SAFETY: the program's arguments, passed on.
    creating("MPI_Comm_dup", comm, newcomm, || unsafe {
        ffi::comm_dup(comm, newcomm)
    })
}

/// `MPI_Comm_dup_with_info`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Comm_dup_with_info(
    comm: Comm,
    info: Info,
    newcomm: *mut Comm,
) -> c_int {
    creating("MPI_Comm_dup_with_info", comm, newcomm, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::comm_dup_with_info(comm, info, newcomm) }
    })
}

/// `MPI_Comm_create`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Comm_create(comm: Comm, group: Group, newcomm: *mut Comm) -> c_int {
    // SAFETY: the program's arguments, passed on.
    creating("MPI_Comm_create", comm, newcomm, || unsafe {
        ffi::comm_create(comm, group, newcomm)
    })
}

/// `MPI_Cart_create`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Cart_create(
    comm: Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    reorder: c_int,
    newcomm: *mut Comm,
) -> c_int {
    creating("MPI_Cart_create", comm, newcomm, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::cart_create(comm, ndims, dims, periods, reorder, newcomm) }
    })
}

/// `MPI_Comm_free`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut Comm) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::comm_free(comm) };
    let Some(mut call) = Call::begin("MPI_Comm_free") else {
        return real();
    };
    // SAFETY: the program's communicator, read before the call nulls it.
    let before = unsafe { *comm };
    let rc = call.real(real);
    if rc == ffi::SUCCESS {
        call.record(|| track::freeing(before));
    }
    call.end(rc)
}
