//! Point-to-point calls and requests: the blocking sends and receives, `MPI_Sendrecv(_replace)`,
//! the nonblocking and persistent posts, `MPI_Start(all)`, `MPI_Request_free`, `MPI_Cancel`,
//! `MPI_(I)probe` and the `Wait*`/`Test*` families.
//!
//! # Where each message is recorded
//!
//! A send's `gyr.msg.send` is recorded before the real call (a persistent send's at its
//! `MPI_Start`); a receive's `gyr.msg.recv` after the call that completed it (a blocking
//! receive, or the `Wait*`/`Test*` that completed its request), from the status: the actual
//! source and tag, also for `MPI_ANY_SOURCE` and `MPI_ANY_TAG`, and the bytes that arrived. A
//! program that passes `MPI_STATUS(ES)_IGNORE` gets it passed on as our own status instead,
//! which only we read. The requests' handles are read before the completing call (it sets a
//! completed request to `MPI_REQUEST_NULL`).

#![allow(non_snake_case)]

use crate::ffi::{self, Comm, Datatype, Request, Status};
use crate::gate::Call;
use crate::track::{self, Posted};
use libc::{c_int, c_void};

/// The status to pass on: the program's, or ours when it passed `MPI_STATUS_IGNORE`.
fn status_or(status: *mut Status, ours: &mut Status) -> *mut Status {
    if status.is_null() { ours } else { status }
}

macro_rules! blocking_send {
    ($($name:ident = $real:ident;)*) => {$(
        /// The blocking send of this name: `gyr.msg.send` before it.
        ///
        /// # Safety
        ///
        /// As the MPI function.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            buf: *const c_void, count: c_int, datatype: Datatype, dest: c_int, tag: c_int,
            comm: Comm,
        ) -> c_int {
            // SAFETY: the program's arguments, passed on.
            let real = || unsafe { ffi::$real(buf, count, datatype, dest, tag, comm) };
            let sent = |at| track::sent(comm, dest, tag, count, datatype, at);
            let Some(mut call) = Call::begin_then(stringify!($name), sent) else { return real() };
            let rc = call.real(real);
            call.end(rc)
        }
    )*};
}

blocking_send! {
    MPI_Send = send;
    MPI_Ssend = ssend;
    MPI_Bsend = bsend;
    MPI_Rsend = rsend;
}

/// `MPI_Recv`: `gyr.msg.recv` once it returns.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    source: c_int,
    tag: c_int,
    comm: Comm,
    status: *mut Status,
) -> c_int {
    let Some(mut call) = Call::begin("MPI_Recv") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::recv(buf, count, datatype, source, tag, comm, status) };
    };
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let rc = call.real(|| unsafe { ffi::recv(buf, count, datatype, source, tag, comm, st) });
    call.end_with(rc, || {
        // SAFETY: the status the call filled (the program's or ours), read only after a
        // successful call.
        (rc == ffi::SUCCESS)
            .then(|| track::recv_event(comm, unsafe { &*st }))
            .flatten()
    })
}

/// `MPI_Sendrecv`: its send before, its receive after.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Datatype,
    source: c_int,
    recvtag: c_int,
    comm: Comm,
    status: *mut Status,
) -> c_int {
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let real = |st| unsafe {
        ffi::sendrecv(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
            recvtag, comm, st,
        )
    };
    let Some(mut call) = Call::begin("MPI_Sendrecv") else {
        return real(status);
    };
    call.record_at(|at| track::sent(comm, dest, sendtag, sendcount, sendtype, at));
    let rc = call.real(|| real(st));
    if rc == ffi::SUCCESS {
        // SAFETY: the status the call filled.
        call.record_at(|at| track::received(comm, unsafe { &*st }, at));
    }
    call.end(rc)
}

/// `MPI_Sendrecv_replace`: its send before, its receive after.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Comm,
    status: *mut Status,
) -> c_int {
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let real = |st| unsafe {
        ffi::sendrecv_replace(
            buf, count, datatype, dest, sendtag, source, recvtag, comm, st,
        )
    };
    let Some(mut call) = Call::begin("MPI_Sendrecv_replace") else {
        return real(status);
    };
    call.record_at(|at| track::sent(comm, dest, sendtag, count, datatype, at));
    let rc = call.real(|| real(st));
    if rc == ffi::SUCCESS {
        // SAFETY: the status the call filled.
        call.record_at(|at| track::received(comm, unsafe { &*st }, at));
    }
    call.end(rc)
}

macro_rules! post {
    ($($name:ident = $real:ident, recv: $recv:literal, persistent: $persistent:literal;)*) => {$(
        /// The nonblocking or persistent call of this name: the request remembered (and for a
        /// nonblocking send, `gyr.msg.send` before it).
        ///
        /// # Safety
        ///
        /// As the MPI function.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            buf: *mut c_void, count: c_int, datatype: Datatype, peer: c_int, tag: c_int,
            comm: Comm, request: *mut Request,
        ) -> c_int {
            // SAFETY: the program's arguments, passed on.
            let real = || unsafe { ffi::$real(buf, count, datatype, peer, tag, comm, request) };
            let Some(mut call) = Call::begin(stringify!($name)) else { return real() };
            if !$recv && !$persistent {
                call.record_at(|at| track::sent(comm, peer, tag, count, datatype, at));
            }
            let rc = call.real(real);
            if rc == ffi::SUCCESS {
                let p = Posted {
                    call: stringify!($name), recv: $recv, persistent: $persistent, comm, peer,
                    tag, count, datatype,
                };
                // SAFETY: the request the call wrote.
                call.record(|| track::posted(p, unsafe { *request }));
            }
            call.end(rc)
        }
    )*};
}

post! {
    MPI_Isend = isend, recv: false, persistent: false;
    MPI_Issend = issend, recv: false, persistent: false;
    MPI_Ibsend = ibsend, recv: false, persistent: false;
    MPI_Irsend = irsend, recv: false, persistent: false;
    MPI_Irecv = irecv, recv: true, persistent: false;
    MPI_Send_init = send_init, recv: false, persistent: true;
    MPI_Ssend_init = ssend_init, recv: false, persistent: true;
    MPI_Bsend_init = bsend_init, recv: false, persistent: true;
    MPI_Rsend_init = rsend_init, recv: false, persistent: true;
    MPI_Recv_init = recv_init, recv: true, persistent: true;
}

/// `MPI_Start`: the persistent request's `gyr.mpi.request` (and a send's `gyr.msg.send`).
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Start(request: *mut Request) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::start(request) };
    let Some(mut call) = Call::begin("MPI_Start") else {
        return real();
    };
    // SAFETY: the program's request (MPI_Start does not change the handle).
    call.record(|| track::started("MPI_Start", unsafe { *request }));
    let rc = call.real(real);
    call.end(rc)
}

/// `MPI_Startall`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Startall(count: c_int, requests: *mut Request) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::startall(count, requests) };
    let Some(mut call) = Call::begin("MPI_Startall") else {
        return real();
    };
    call.record(|| {
        for r in handles(count, requests) {
            track::started("MPI_Startall", r);
        }
    });
    let rc = call.real(real);
    call.end(rc)
}

/// `MPI_Request_free`: the request is forgotten.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Request_free(request: *mut Request) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::request_free(request) };
    let Some(mut call) = Call::begin("MPI_Request_free") else {
        return real();
    };
    // SAFETY: the program's request, read before the call nulls it.
    let before = unsafe { *request };
    let rc = call.real(real);
    if rc == ffi::SUCCESS {
        call.record(|| track::freed(before));
    }
    call.end(rc)
}

/// `MPI_Cancel`: a call; the request's completion says whether it was cancelled.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Cancel(request: *mut Request) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::cancel(request) };
    let Some(mut call) = Call::begin("MPI_Cancel") else {
        return real();
    };
    let rc = call.real(real);
    call.end(rc)
}

/// `MPI_Probe`: a call only (the message is recorded by the receive that takes it).
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: Comm,
    status: *mut Status,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::probe(source, tag, comm, status) };
    let Some(mut call) = Call::begin("MPI_Probe") else {
        return real();
    };
    let rc = call.real(real);
    call.end(rc)
}

/// `MPI_Iprobe`: a call only.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: Comm,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::iprobe(source, tag, comm, flag, status) };
    let Some(mut call) = Call::begin("MPI_Iprobe") else {
        return real();
    };
    let rc = call.real(real);
    call.end(rc)
}

/// The `count` request handles at `requests`, copied (before the call that may null them).
fn handles(count: c_int, requests: *const Request) -> Vec<Request> {
    if requests.is_null() || count <= 0 {
        return Vec::new();
    }
    // SAFETY: the program passes `count` requests at `requests`.
    unsafe { std::slice::from_raw_parts(requests, count as usize) }.to_vec()
}

/// The statuses to pass on for `count` requests: the program's, or ours.
fn statuses_or(count: c_int, statuses: *mut Status, ours: &mut Vec<Status>) -> *mut Status {
    if statuses.is_null() {
        ours.resize(count.max(0) as usize, Status::default());
        ours.as_mut_ptr()
    } else {
        statuses
    }
}

/// Records the completion of `before[i]` with status `st[i]` for every `i` in `which`, stamped
/// `at`.
///
/// # Safety
///
/// `st` holds a status for every index in `which`.
unsafe fn completed_at(
    before: &[Request],
    st: *const Status,
    which: impl Iterator<Item = usize>,
    at: gyr::Stamp,
) {
    for i in which {
        if let Some(&r) = before.get(i)
            && track::live(r)
        {
            // SAFETY: the caller's promise.
            track::completed(r, unsafe { &*st.add(i) }, at);
        }
    }
}

/// `MPI_Wait`: the request's completion (and a receive's message).
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Wait(request: *mut Request, status: *mut Status) -> c_int {
    let Some(mut call) = Call::begin("MPI_Wait") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::wait(request, status) };
    };
    // SAFETY: the program's request, read before the call nulls it.
    let before = unsafe { *request };
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let rc = call.real(|| unsafe { ffi::wait(request, st) });
    if rc == ffi::SUCCESS && track::live(before) {
        // SAFETY: the status the call filled.
        call.record_at(|at| track::completed(before, unsafe { &*st }, at));
    }
    call.end(rc)
}

/// `MPI_Test`: as `MPI_Wait` when the flag says the request completed.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Test(
    request: *mut Request,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    let Some(mut call) = Call::begin("MPI_Test") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::test(request, flag, status) };
    };
    // SAFETY: the program's request, read before the call nulls it.
    let before = unsafe { *request };
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let rc = call.real(|| unsafe { ffi::test(request, flag, st) });
    // SAFETY: the flag the call wrote.
    if rc == ffi::SUCCESS && unsafe { *flag } != 0 && track::live(before) {
        // SAFETY: the status the call filled.
        call.record_at(|at| track::completed(before, unsafe { &*st }, at));
    }
    call.end(rc)
}

/// `MPI_Waitall`: every request's completion.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut Request,
    statuses: *mut Status,
) -> c_int {
    let Some(mut call) = Call::begin("MPI_Waitall") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::waitall(count, requests, statuses) };
    };
    let before = handles(count, requests);
    let mut ours = Vec::new();
    let st = statuses_or(count, statuses, &mut ours);
    // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
    let rc = call.real(|| unsafe { ffi::waitall(count, requests, st) });
    if rc == ffi::SUCCESS {
        // SAFETY: `count` statuses, filled.
        call.record_at(|at| unsafe { completed_at(&before, st, 0..before.len(), at) });
    }
    call.end(rc)
}

/// `MPI_Testall`: every request's completion, when the flag says all completed.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    requests: *mut Request,
    flag: *mut c_int,
    statuses: *mut Status,
) -> c_int {
    let Some(mut call) = Call::begin("MPI_Testall") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::testall(count, requests, flag, statuses) };
    };
    let before = handles(count, requests);
    let mut ours = Vec::new();
    let st = statuses_or(count, statuses, &mut ours);
    // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
    let rc = call.real(|| unsafe { ffi::testall(count, requests, flag, st) });
    // SAFETY: the flag the call wrote.
    if rc == ffi::SUCCESS && unsafe { *flag } != 0 {
        // SAFETY: `count` statuses, filled.
        call.record_at(|at| unsafe { completed_at(&before, st, 0..before.len(), at) });
    }
    call.end(rc)
}

/// `MPI_Waitany`: the completion of the request at the index it returns.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut Request,
    index: *mut c_int,
    status: *mut Status,
) -> c_int {
    let Some(mut call) = Call::begin("MPI_Waitany") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::waitany(count, requests, index, status) };
    };
    let before = handles(count, requests);
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let rc = call.real(|| unsafe { ffi::waitany(count, requests, index, st) });
    // SAFETY: the index the call wrote.
    let i = unsafe { *index };
    if rc == ffi::SUCCESS && i != ffi::UNDEFINED && i >= 0 {
        call.record_at(|at| track_one(&before, i as usize, st, at));
    }
    call.end(rc)
}

/// `MPI_Testany`: as `MPI_Waitany` when the flag says one completed.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
pub unsafe extern "C" fn MPI_Testany(
    count: c_int,
    requests: *mut Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut Status,
) -> c_int {
    let Some(mut call) = Call::begin("MPI_Testany") else {
        // SAFETY: the program's arguments, passed on.
        return unsafe { ffi::testany(count, requests, index, flag, status) };
    };
    let before = handles(count, requests);
    let mut ours = Status::default();
    let st = status_or(status, &mut ours);
    // SAFETY: the program's arguments, with a status the MPI library may write.
    let rc = call.real(|| unsafe { ffi::testany(count, requests, index, flag, st) });
    // SAFETY: the index and flag the call wrote.
    let (i, done) = unsafe { (*index, *flag != 0) };
    if rc == ffi::SUCCESS && done && i != ffi::UNDEFINED && i >= 0 {
        // SAFETY: the status the call filled.
        call.record_at(|at| track_one(&before, i as usize, st, at));
    }
    call.end(rc)
}

/// Records the completion of `before[i]` with the single status `st`, stamped `at`.
fn track_one(before: &[Request], i: usize, st: *const Status, at: gyr::Stamp) {
    if let Some(&r) = before.get(i)
        && track::live(r)
    {
        // SAFETY: a status the completing call filled.
        track::completed(r, unsafe { &*st }, at);
    }
}

macro_rules! some {
    ($($name:ident = $real:ident;)*) => {$(
        /// The call of this name: the completion of each request at the indices it returns.
        ///
        /// # Safety
        ///
        /// As the MPI function.
        #[cfg_attr(not(test), unsafe(no_mangle))]
        pub unsafe extern "C" fn $name(
            count: c_int, requests: *mut Request, outcount: *mut c_int, indices: *mut c_int,
            statuses: *mut Status,
        ) -> c_int {
            let Some(mut call) = Call::begin(stringify!($name)) else {
                // SAFETY: the program's arguments, passed on.
                return unsafe { ffi::$real(count, requests, outcount, indices, statuses) };
            };
            let before = handles(count, requests);
            let mut ours = Vec::new();
            let st = statuses_or(count, statuses, &mut ours);
            // SAFETY: the program's arguments, with `count` statuses the MPI library may write.
            let rc = call.real(|| unsafe { ffi::$real(count, requests, outcount, indices, st) });
            // SAFETY: the count the call wrote.
            let n = unsafe { *outcount };
            if rc == ffi::SUCCESS && n != ffi::UNDEFINED && n > 0 {
                call.record_at(|at| {
                    // SAFETY: the call wrote `n` indices, and the status of the k-th completed
                    // request at `st[k]`.
                    let idx = unsafe { std::slice::from_raw_parts(indices, n as usize) };
                    for (k, &i) in idx.iter().enumerate() {
                        // SAFETY: as above.
                        track_one(&before, i.max(0) as usize, unsafe { st.add(k) }, at);
                    }
                });
            }
            call.end(rc)
        }
    )*};
}

some! {
    MPI_Waitsome = waitsome;
    MPI_Testsome = testsome;
}
