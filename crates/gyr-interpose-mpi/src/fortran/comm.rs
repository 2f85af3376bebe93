//! The Fortran communicator calls: a new communicator's members, as the C forms record them.

use super::{F, comm, end};
use crate::ffi;
use crate::gate::Call;
use crate::track;

/// Records `name`, a Fortran call creating the communicator at `out` from `parent`.
fn creating(name: &'static str, parent: F, out: F, ierr: F, real: impl FnOnce()) {
    let Some(mut call) = Call::begin(name) else {
        return real();
    };
    call.real(real);
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        // SAFETY: the program's communicator and the one the call wrote.
        call.record(|| unsafe { track::created(name, self::comm(parent), self::comm(out)) });
    }
    end(call, ierr)
}

/// `mpi_comm_split_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_comm_split_(comm: F, color: F, key: F, newcomm: F, ierr: F) {
    creating("mpi_comm_split_", comm, newcomm, ierr, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_comm_split(comm, color, key, newcomm, ierr) }
    })
}

/// `mpi_comm_dup_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_comm_dup_(comm: F, newcomm: F, ierr: F) {
    creating("mpi_comm_dup_", comm, newcomm, ierr, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_comm_dup(comm, newcomm, ierr) }
    })
}

/// `mpi_comm_free_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_comm_free_(comm: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_comm_free(comm, ierr) };
    let Some(mut call) = Call::begin("mpi_comm_free_") else {
        return real();
    };
    // SAFETY: the program's communicator, read before the call frees it.
    let before = unsafe { self::comm(comm) };
    call.real(real);
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(|| track::freeing(before));
    }
    end(call, ierr)
}

/// `mpi_comm_split_type_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_comm_split_type_(
    comm: F,
    split_type: F,
    key: F,
    info: F,
    newcomm: F,
    ierr: F,
) {
    creating("mpi_comm_split_type_", comm, newcomm, ierr, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_comm_split_type(comm, split_type, key, info, newcomm, ierr) }
    })
}

/// `mpi_comm_create_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_comm_create_(comm: F, group: F, newcomm: F, ierr: F) {
    creating("mpi_comm_create_", comm, newcomm, ierr, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_comm_create(comm, group, newcomm, ierr) }
    })
}

/// `mpi_cart_create_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_cart_create_(
    comm: F,
    ndims: F,
    dims: F,
    periods: F,
    reorder: F,
    newcomm: F,
    ierr: F,
) {
    creating("mpi_cart_create_", comm, newcomm, ierr, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_cart_create(comm, ndims, dims, periods, reorder, newcomm, ierr) }
    })
}

/// `mpi_comm_dup_with_info_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_comm_dup_with_info_(comm: F, info: F, newcomm: F, ierr: F) {
    creating("mpi_comm_dup_with_info_", comm, newcomm, ierr, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_comm_dup_with_info(comm, info, newcomm, ierr) }
    })
}
