//! The Fortran point-to-point calls and requests.

use super::{F, c_status, comm, datatype, end, request, v};
use crate::ffi::{self, F_STATUS_SIZE, Fint, Request};
use crate::gate::Call;
use crate::track::{self, Posted};
use libc::c_void;

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
            call.record_at(|at| unsafe {
                track::sent(self::comm(comm), v(dest), v(tag), v(count), datatype(dt), at)
            });
            call.real(real);
            end(call, ierr)
        }
    )*};
}

f_send! {
    mpi_send_ = f_send;
    mpi_ssend_ = f_ssend;
    mpi_bsend_ = f_bsend;
    mpi_rsend_ = f_rsend;
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
        call.record_at(|at| track::received(unsafe { self::comm(comm) }, &c_status(st), at));
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
    call.record_at(|at| unsafe {
        track::sent(
            self::comm(comm),
            v(dest),
            v(sendtag),
            v(sendcount),
            datatype(sendtype),
            at,
        )
    });
    call.real(|| real(st));
    // SAFETY: the ierr the call wrote, and the program's communicator.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record_at(|at| track::received(unsafe { self::comm(comm) }, &c_status(st), at));
    }
    end(call, ierr)
}

macro_rules! f_post {
    ($($name:ident = $real:ident, recv: $recv:literal, persistent: $persistent:literal;)*) => {$(
        /// The Fortran nonblocking or persistent call of this name: the request remembered (a
        /// nonblocking send's `gyr.msg.send` before it).
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
            if !$recv && !$persistent {
                call.record_at(|at| track::sent(c, p, g, n, t, at));
            }
            call.real(real);
            // SAFETY: the ierr and request the call wrote.
            if unsafe { *ierr } == ffi::SUCCESS {
                let posted = Posted {
                    call: stringify!($name), recv: $recv, persistent: $persistent, comm: c, peer: p,
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
    mpi_isend_ = f_isend, recv: false, persistent: false;
    mpi_issend_ = f_issend, recv: false, persistent: false;
    mpi_ibsend_ = f_ibsend, recv: false, persistent: false;
    mpi_irsend_ = f_irsend, recv: false, persistent: false;
    mpi_irecv_ = f_irecv, recv: true, persistent: false;
    mpi_send_init_ = f_send_init, recv: false, persistent: true;
    mpi_ssend_init_ = f_ssend_init, recv: false, persistent: true;
    mpi_bsend_init_ = f_bsend_init, recv: false, persistent: true;
    mpi_rsend_init_ = f_rsend_init, recv: false, persistent: true;
    mpi_recv_init_ = f_recv_init, recv: true, persistent: true;
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
        call.record_at(|at| track::completed(before, &c_status(st), at));
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
    // SAFETY: the program passes `count` requests.
    let before = unsafe { handles(n, reqs) };
    let mut ours = Vec::new();
    let st = f_statuses_or(n, statuses, &mut ours);
    // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
    call.real(|| unsafe { ffi::f_waitall(count, reqs, st, ierr) });
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        // SAFETY: `count` statuses, filled.
        call.record_at(|at| unsafe { completed_at(&before, st, 0..n, at) });
    }
    end(call, ierr)
}

/// The C handles of the `n` Fortran requests at `reqs`, read before a call nulls them.
///
/// # Safety
///
/// `reqs` holds `n` integers (or is null with `n` 0).
unsafe fn handles(n: usize, reqs: F) -> Vec<Request> {
    if reqs.is_null() {
        return Vec::new();
    }
    (0..n)
        // SAFETY: the caller's promise.
        .map(|i| request(unsafe { *reqs.add(i) }))
        .collect()
}

/// Our statuses for `n` requests when the program passed Fortran's `MPI_STATUSES_IGNORE`.
fn f_statuses_or(n: usize, statuses: F, ours: &mut Vec<Fint>) -> F {
    if statuses.is_null() || statuses as *mut c_void == ffi::F_STATUSES_IGNORE.get() {
        ours.resize(n.max(1) * F_STATUS_SIZE, 0);
        ours.as_mut_ptr()
    } else {
        statuses
    }
}

/// Records the completion of `before[i]` with the i-th Fortran status at `st`, for every `i`
/// in `which`, stamped `at`.
///
/// # Safety
///
/// `st` holds a status for every index in `which`.
unsafe fn completed_at(
    before: &[Request],
    st: F,
    which: impl Iterator<Item = usize>,
    at: gyr::Stamp,
) {
    for i in which {
        if let Some(&r) = before.get(i)
            && track::live(r)
        {
            // SAFETY: the caller's promise.
            track::completed(r, &c_status(unsafe { st.add(i * F_STATUS_SIZE) }), at);
        }
    }
}

/// Records the completion of `before[i]` with the single Fortran status at `st`, stamped `at`.
fn completed_one(before: &[Request], i: usize, st: F, at: gyr::Stamp) {
    if let Some(&r) = before.get(i)
        && track::live(r)
    {
        track::completed(r, &c_status(st), at);
    }
}

/// The request at index `index` (from 1, as Fortran counts) of a call that returned it, if any.
fn f_index(index: Fint) -> Option<usize> {
    (index != ffi::UNDEFINED && index >= 1).then(|| index as usize - 1)
}

/// `mpi_sendrecv_replace_`: its send before, its receive after.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_sendrecv_replace_(
    buf: *mut c_void,
    count: F,
    dt: F,
    dest: F,
    sendtag: F,
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
        ffi::f_sendrecv_replace(
            buf, count, dt, dest, sendtag, source, recvtag, comm, st, ierr,
        )
    };
    let Some(mut call) = Call::begin("mpi_sendrecv_replace_") else {
        return real(status);
    };
    // SAFETY: the program's handles and integers.
    call.record_at(|at| unsafe {
        track::sent(
            self::comm(comm),
            v(dest),
            v(sendtag),
            v(count),
            datatype(dt),
            at,
        )
    });
    call.real(|| real(st));
    // SAFETY: the ierr the call wrote, and the program's communicator.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record_at(|at| track::received(unsafe { self::comm(comm) }, &c_status(st), at));
    }
    end(call, ierr)
}

/// `mpi_start_`: the persistent request's `gyr.mpi.request` (and a send's `gyr.msg.send`).
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_start_(req: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_start(req, ierr) };
    let Some(mut call) = Call::begin("mpi_start_") else {
        return real();
    };
    // SAFETY: the program's request (starting does not change the handle).
    call.record(|| track::started("mpi_start_", request(unsafe { *req })));
    call.real(real);
    end(call, ierr)
}

/// `mpi_startall_`.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_startall_(count: F, reqs: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_startall(count, reqs, ierr) };
    let Some(mut call) = Call::begin("mpi_startall_") else {
        return real();
    };
    call.record(|| {
        // SAFETY: the program passes `count` requests.
        for r in unsafe { handles(v(count).max(0) as usize, reqs) } {
            track::started("mpi_startall_", r);
        }
    });
    call.real(real);
    end(call, ierr)
}

/// `mpi_request_free_`: the request is forgotten.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_request_free_(req: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_request_free(req, ierr) };
    let Some(mut call) = Call::begin("mpi_request_free_") else {
        return real();
    };
    // SAFETY: the program's request, read before the call nulls it.
    let before = request(unsafe { *req });
    call.real(real);
    // SAFETY: the ierr the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS {
        call.record(|| track::freed(before));
    }
    end(call, ierr)
}

/// `mpi_cancel_`: a call; the request's completion says whether it was cancelled.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_cancel_(req: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_cancel(req, ierr) };
    let Some(mut call) = Call::begin("mpi_cancel_") else {
        return real();
    };
    call.real(real);
    end(call, ierr)
}

/// `mpi_probe_`: a call only (the message is recorded by the receive that takes it).
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_probe_(source: F, tag: F, comm: F, status: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_probe(source, tag, comm, status, ierr) };
    let Some(mut call) = Call::begin("mpi_probe_") else {
        return real();
    };
    call.real(real);
    end(call, ierr)
}

/// `mpi_iprobe_`: a call only.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_iprobe_(source: F, tag: F, comm: F, flag: F, status: F, ierr: F) {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::f_iprobe(source, tag, comm, flag, status, ierr) };
    let Some(mut call) = Call::begin("mpi_iprobe_") else {
        return real();
    };
    call.real(real);
    end(call, ierr)
}

/// `mpi_test_`: as `mpi_wait_` when the flag (a `LOGICAL`) says the request completed.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_test_(req: F, flag: F, status: F, ierr: F) {
    let Some(mut call) = Call::begin("mpi_test_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_test(req, flag, status, ierr) };
    };
    // SAFETY: the program's request, read before the call nulls it.
    let before = request(unsafe { *req });
    let mut ours = [0; F_STATUS_SIZE];
    let st = f_status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    call.real(|| unsafe { ffi::f_test(req, flag, st, ierr) });
    // SAFETY: the ierr and flag the call wrote.
    if unsafe { *ierr == ffi::SUCCESS && *flag != 0 } && track::live(before) {
        call.record_at(|at| track::completed(before, &c_status(st), at));
    }
    end(call, ierr)
}

/// `mpi_testall_`: every request's completion, when the flag says all completed.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_testall_(count: F, reqs: F, flag: F, statuses: F, ierr: F) {
    let Some(mut call) = Call::begin("mpi_testall_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_testall(count, reqs, flag, statuses, ierr) };
    };
    // SAFETY: the program's count and its `count` requests.
    let n = unsafe { v(count) }.max(0) as usize;
    // SAFETY: as above.
    let before = unsafe { handles(n, reqs) };
    let mut ours = Vec::new();
    let st = f_statuses_or(n, statuses, &mut ours);
    // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
    call.real(|| unsafe { ffi::f_testall(count, reqs, flag, st, ierr) });
    // SAFETY: the ierr and flag the call wrote.
    if unsafe { *ierr == ffi::SUCCESS && *flag != 0 } {
        // SAFETY: `count` statuses, filled.
        call.record_at(|at| unsafe { completed_at(&before, st, 0..n, at) });
    }
    end(call, ierr)
}

/// `mpi_waitany_`: the completion of the request at the index it returns.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_waitany_(count: F, reqs: F, index: F, status: F, ierr: F) {
    let Some(mut call) = Call::begin("mpi_waitany_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_waitany(count, reqs, index, status, ierr) };
    };
    // SAFETY: the program's count and its `count` requests.
    let before = unsafe { handles(v(count).max(0) as usize, reqs) };
    let mut ours = [0; F_STATUS_SIZE];
    let st = f_status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    call.real(|| unsafe { ffi::f_waitany(count, reqs, index, st, ierr) });
    // SAFETY: the ierr and index the call wrote.
    if unsafe { *ierr } == ffi::SUCCESS
        && let Some(i) = f_index(unsafe { *index })
    {
        call.record_at(|at| completed_one(&before, i, st, at));
    }
    end(call, ierr)
}

/// `mpi_testany_`: as `mpi_waitany_` when the flag says one completed.
///
/// # Safety
///
/// As the Fortran binding.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn mpi_testany_(count: F, reqs: F, index: F, flag: F, status: F, ierr: F) {
    let Some(mut call) = Call::begin("mpi_testany_") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::f_testany(count, reqs, index, flag, status, ierr) };
    };
    // SAFETY: the program's count and its `count` requests.
    let before = unsafe { handles(v(count).max(0) as usize, reqs) };
    let mut ours = [0; F_STATUS_SIZE];
    let st = f_status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    call.real(|| unsafe { ffi::f_testany(count, reqs, index, flag, st, ierr) });
    // SAFETY: the ierr, flag and index the call wrote.
    if unsafe { *ierr == ffi::SUCCESS && *flag != 0 }
        && let Some(i) = f_index(unsafe { *index })
    {
        call.record_at(|at| completed_one(&before, i, st, at));
    }
    end(call, ierr)
}

macro_rules! f_some {
    ($($name:ident = $real:ident;)*) => {$(
        /// The Fortran call of this name: the completion of each request at the indices it
        /// returns (from 1).
        ///
        /// # Safety
        ///
        /// As the Fortran binding.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            count: F, reqs: F, outcount: F, indices: F, statuses: F, ierr: F,
        ) {
            let Some(mut call) = Call::begin(stringify!($name)) else {
                // SAFETY: the program's arguments, passed on.
                return unsafe { ffi::$real(count, reqs, outcount, indices, statuses, ierr) };
            };
            // SAFETY: the program's count and its `count` requests.
            let n = unsafe { v(count) }.max(0) as usize;
            // SAFETY: as above.
            let before = unsafe { handles(n, reqs) };
            let mut ours = Vec::new();
            let st = f_statuses_or(n, statuses, &mut ours);
            // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
            call.real(|| unsafe { ffi::$real(count, reqs, outcount, indices, st, ierr) });
            // SAFETY: the ierr and count the call wrote.
            let (rc, done) = unsafe { (*ierr, *outcount) };
            if rc == ffi::SUCCESS && done != ffi::UNDEFINED && done > 0 {
                call.record_at(|at| {
                    for k in 0..(done as usize).min(n) {
                        // SAFETY: the call wrote `done` indices, and the status of the k-th
                        // completed request as the k-th status.
                        let i = unsafe { *indices.add(k) };
                        if let Some(i) = f_index(i) {
                            // SAFETY: as above.
                            completed_one(&before, i, unsafe { st.add(k * F_STATUS_SIZE) }, at);
                        }
                    }
                });
            }
            end(call, ierr)
        }
    )*};
}

f_some! {
    mpi_waitsome_ = f_waitsome;
    mpi_testsome_ = f_testsome;
}
