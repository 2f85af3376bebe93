//! The Fortran bindings (`mpif.h` and `use mpi`, as gfortran names them: lower case with one
//! trailing underscore): Open MPI's `libmpi_mpifh` converts the handles and calls `PMPI_*`
//! directly, past our C functions, so the Fortran symbols are interposed too.
//!
//! Each calls the real `pmpi_*_` and records what the C function of the same name records,
//! under the Fortran name (`mpi_send_`). Handles are converted with `PMPI_Comm_f2c`,
//! `PMPI_Type_f2c` and `PMPI_Request_f2c`, statuses (`MPI_STATUS_SIZE` = 6 integers) with
//! `PMPI_Status_f2c`; Fortran's `MPI_STATUS(ES)_IGNORE` is replaced by a status of ours, and its
//! `MPI_IN_PLACE` recognised by address. The return code recorded is `ierr`.
//!
//! Covered: `mpi_init_`, `mpi_init_thread_`, `mpi_finalize_`, `mpi_send_`, `mpi_ssend_`,
//! `mpi_recv_`, `mpi_isend_`, `mpi_irecv_`, `mpi_wait_`, `mpi_waitall_`, `mpi_sendrecv_`,
//! `mpi_barrier_`, `mpi_bcast_`, `mpi_reduce_`, `mpi_allreduce_`, `mpi_alltoall_`,
//! `mpi_comm_split_`, `mpi_comm_dup_`, `mpi_comm_free_`. Other Fortran calls run unrecorded.

use crate::ffi::{self, Comm, Datatype, F_STATUS_SIZE, Fint, Request, Status};
use crate::gate::Call;
use crate::track::{self, Posted, bytes};
use libc::c_void;

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

macro_rules! f_send {
    ($($name:ident = $real:ident;)*) => {$(
        /// The Fortran blocking send of this name: `gyr.msg.send` before it.
        ///
        /// # Safety
        ///
        /// As the Fortran binding.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            buf: *const c_void, count: F, dt: F, dest: F, tag: F, comm: F, ierr: F,
        ) {
            // SAFETY: the program's arguments, passed on.
            let real = || unsafe { ffi::$real(buf, count, dt, dest, tag, comm, ierr) };
            let Some(mut call) = Call::begin(stringify!($name)) else { return real() };
            // SAFETY: the program's handles and integers.
            call.record(|| unsafe {
                track::sent(self::comm(comm), v(dest), v(tag), v(count), datatype(dt))
            });
            call.real(real);
            end(call, ierr)
        }
    )*};
}

f_send! {
    mpi_send_ = f_send;
    mpi_ssend_ = f_ssend;
}

/// Our status when the program passed Fortran's `MPI_STATUS_IGNORE`.
fn f_status_or(st: F, ours: &mut [Fint; F_STATUS_SIZE]) -> F {
    if st.is_null() || st as *mut c_void == ffi::F_STATUS_IGNORE.get() {
        ours.as_mut_ptr()
    } else {
        st
    }
}

/// `mpi_recv_`: `gyr.msg.recv` once it returns.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_recv_(
    buf: *mut c_void,
    count: F,
    dt: F,
    source: F,
    tag: F,
    comm: F,
    status: F,
    ierr: F,
) {
    let Some(mut call) = Call::begin("mpi_recv_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_recv(buf, count, dt, source, tag, comm, status, ierr) };
    };
    let mut ours = [0; F_STATUS_SIZE];
    let st = f_status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    call.real(|| unsafe { ffi::f_recv(buf, count, dt, source, tag, comm, st, ierr) });
    // SAFETY: the ierr the call wrote, and the program's communicator.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(|| track::received(unsafe { self::comm(comm) }, &c_status(st)));
    }
    end(call, ierr)
}

/// `mpi_sendrecv_`: its send before, its receive after.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_sendrecv_(
    sendbuf: *const c_void,
    sendcount: F,
    sendtype: F,
    dest: F,
    sendtag: F,
    recvbuf: *mut c_void,
    recvcount: F,
    recvtype: F,
    source: F,
    recvtag: F,
    comm: F,
    status: F,
    ierr: F,
) {
    let mut ours = [0; F_STATUS_SIZE];
    let st = f_status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let real = |st| unsafe {
        ffi::f_sendrecv(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
            recvtag, comm, st, ierr,
        )
    };
    let Some(mut call) = Call::begin("mpi_sendrecv_") else {
        return real(status);
    };
    // SAFETY: the program's handles and integers.
    call.record(|| unsafe {
        track::sent(
            self::comm(comm),
            v(dest),
            v(sendtag),
            v(sendcount),
            datatype(sendtype),
        )
    });
    call.real(|| real(st));
    // SAFETY: the ierr the call wrote, and the program's communicator.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(|| track::received(unsafe { self::comm(comm) }, &c_status(st)));
    }
    end(call, ierr)
}

macro_rules! f_post {
    ($($name:ident = $real:ident, recv: $recv:literal;)*) => {$(
        /// The Fortran nonblocking call of this name: the request remembered (a send's
        /// `gyr.msg.send` before it).
        ///
        /// # Safety
        ///
        /// As the Fortran binding.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            buf: *mut c_void, count: F, dt: F, peer: F, tag: F, comm: F, req: F, ierr: F,
        ) {
            // SAFETY: the program's arguments, passed on.
            let real = || unsafe { ffi::$real(buf, count, dt, peer, tag, comm, req, ierr) };
            let Some(mut call) = Call::begin(stringify!($name)) else { return real() };
            // SAFETY: the program's handles and integers.
            let (c, t, p, g, n) = unsafe { (self::comm(comm), datatype(dt), v(peer), v(tag), v(count)) };
            if !$recv {
                call.record(|| track::sent(c, p, g, n, t));
            }
            call.real(real);
            // SAFETY: the ierr and request the call wrote.
            if unsafe { *ierr } == ffi::SUCCESS {
                let posted = Posted {
                    call: stringify!($name), recv: $recv, persistent: false, comm: c, peer: p,
                    tag: g, count: n, datatype: t,
                };
                // SAFETY: as above.
                call.record(|| track::posted(posted, request(unsafe { *req })));
            }
            end(call, ierr)
        }
    )*};
}

f_post! {
    mpi_isend_ = f_isend, recv: false;
    mpi_irecv_ = f_irecv, recv: true;
}

/// `mpi_wait_`: the request's completion (and a receive's message).
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_wait_(req: F, status: F, ierr: F) {
    let Some(mut call) = Call::begin("mpi_wait_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_wait(req, status, ierr) };
    };
    // SAFETY: the program's request, read before the call nulls it.
    let before = request(unsafe { *req });
    let mut ours = [0; F_STATUS_SIZE];
    let st = f_status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    call.real(|| unsafe { ffi::f_wait(req, st, ierr) });
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS && track::live(before) {
        call.record(|| track::completed(before, &c_status(st)));
    }
    end(call, ierr)
}

/// `mpi_waitall_`: every request's completion.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_waitall_(count: F, reqs: F, statuses: F, ierr: F) {
    let Some(mut call) = Call::begin("mpi_waitall_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_waitall(count, reqs, statuses, ierr) };
    };
    // SAFETY: the program's count.
    let n = unsafe { *count }.max(0) as usize;
    let before: Vec<Request> = (0..n)
        // SAFETY: the program passes `count` requests, read before the call nulls them.
        .map(|i| request(unsafe { *reqs.add(i) }))
        .collect();
    let mut ours: Vec<Fint> = Vec::new();
    let st = if statuses.is_null() || statuses as *mut c_void == ffi::F_STATUSES_IGNORE.get() {
        ours.resize(n * F_STATUS_SIZE, 0);
        ours.as_mut_ptr()
    } else {
        statuses
    };
    // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
    call.real(|| unsafe { ffi::f_waitall(count, reqs, st, ierr) });
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(|| {
            for (i, &r) in before.iter().enumerate() {
                if track::live(r) {
                    // SAFETY: the i-th of `count` statuses the call filled.
                    track::completed(r, &c_status(unsafe { st.add(i * F_STATUS_SIZE) }));
                }
            }
        });
    }
    end(call, ierr)
}

/// Records a Fortran collective `name` on `comm` around `real`.
fn collective(
    name: &'static str,
    comm: Comm,
    ierr: F,
    sizes: impl FnOnce() -> (Option<Fint>, u64, u64),
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

/// Whether this rank is `root` of `comm`.
fn is_root(comm: Comm, root: Fint) -> bool {
    root == ffi::ROOT || track::size_and_rank(comm).1 == root
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
    let sizes = || {
        let b = bytes(n, t);
        if is_root(c, r) {
            (Some(r), b, 0)
        } else {
            (Some(r), 0, b)
        }
    };
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
    let sizes = || {
        let b = bytes(n, t);
        (Some(r), b, if is_root(c, r) { b } else { 0 })
    };
    collective("mpi_reduce_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_reduce(sendbuf, recvbuf, count, dt, op, root, comm, ierr) }
    })
}

/// `mpi_allreduce_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_allreduce_(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: F,
    dt: F,
    op: F,
    comm: F,
    ierr: F,
) {
    // SAFETY: the program's handles and integers.
    let (c, t, n) = unsafe { (self::comm(comm), datatype(dt), v(count)) };
    let sizes = || {
        let b = bytes(n, t);
        (None, b, b)
    };
    collective("mpi_allreduce_", c, ierr, sizes, || {
        // SAFETY: the program's arguments, passed on.
        unsafe { ffi::f_allreduce(sendbuf, recvbuf, count, dt, op, comm, ierr) }
    })
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
    let sizes = || {
        let n = track::size_and_rank(c).0 as u64;
        // SAFETY: the program's handles and integers.
        let received = unsafe { bytes(v(recvcount), datatype(recvtype)) } * n;
        let sent = if std::ptr::eq(sendbuf, ffi::F_IN_PLACE.get()) {
            received
        } else {
            // SAFETY: as above.
            let each = unsafe { bytes(v(sendcount), datatype(sendtype)) };
            each * n
        };
        (None, sent, received)
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
