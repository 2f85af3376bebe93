#![doc = include_str!("../README.md")]
//!
//! This crate provides, as exported C symbols of `libgyr_mpi.so`:
//! - `MPI_Init`, `MPI_Init_thread` (any thread level) and `MPI_Finalize` (below);
//! - point-to-point calls and requests ([`p2p`]): `MPI_Send`, `Ssend`, `Bsend`, `Rsend`, `Recv`,
//!   `Sendrecv`, `Sendrecv_replace`, `Isend`, `Issend`, `Ibsend`, `Irsend`, `Irecv`,
//!   `Send_init`, `Ssend_init`, `Bsend_init`, `Rsend_init`, `Recv_init`, `Start`, `Startall`,
//!   `Request_free`, `Cancel`, `Probe`, `Iprobe`, `Wait`, `Waitall`, `Waitany`, `Waitsome`,
//!   `Test`, `Testall`, `Testany`, `Testsome`;
//! - collectives ([`coll`]): `MPI_Barrier`, `Bcast`, `Reduce`, `Allreduce`, `Gather(v)`,
//!   `Scatter(v)`, `Allgather(v)`, `Alltoall(v)`, `Reduce_scatter(_block)`, `Scan`, `Exscan`,
//!   and their nonblocking forms, `MPI_Ibarrier` to `MPI_Iexscan` (recorded when they start;
//!   the wait is a call of its own);
//! - communicators ([`comm`]): `MPI_Comm_split`, `Comm_split_type`, `Comm_dup`,
//!   `Comm_dup_with_info`, `Comm_create`, `Cart_create`, `Comm_free`;
//! - the Fortran bindings (`mpif.h`, `use mpi`) of all of the above ([`fortran`]: `mpi_send_`
//!   and friends), since Open MPI's Fortran library calls `PMPI_*` directly;
//!
//! each calling the MPI library's `PMPI_*` function ([`ffi`] says how it is found and why
//! nothing is linked against libmpi) and recording the events below.
//!
//! # The events
//!
//! | event | fields | when |
//! |---|---|---|
//! | `gyr.mpi.begin` | `call` | an MPI call begins |
//! | `gyr.mpi.end` | `call`, `ret` | it returned `ret` |
//! | `gyr.msg.rank` | `job`, `rank`, `size` | after `MPI_Init(_thread)`: the world rank and size |
//! | `gyr.msg.send` | `peer`, `tag`, `bytes`, `comm` | a message begins to leave (before the send; a persistent send's `MPI_Start`) |
//! | `gyr.msg.recv` | `peer`, `tag`, `bytes`, `comm` | a message has arrived (after the receive, or the `Wait*`/`Test*` that completed it) |
//! | `gyr.mpi.request` | `request`, `call`, `recv`, `peer`, `tag`, `bytes`, `comm` | a nonblocking call posted a request, or `MPI_Start(all)` started a persistent one |
//! | `gyr.mpi.complete` | `request`, `cancelled` | a `Wait*`/`Test*` completed it |
//! | `gyr.mpi.collective` | `call`, `comm`, `root`, `sent`, `received` | this rank enters a collective |
//! | `gyr.mpi.comm` | `call`, `comm`, `parent`, `size`, `members` | a communicator this rank belongs to was created |
//! | `gyr.mpi.comm_free` | `comm` | it was freed |
//!
//! Every event between a call's `begin` and `end` belongs to that call, so time in MPI per call
//! and per rank is the sum of the `begin`–`end` gaps. A call reads the clock twice: a send's
//! `gyr.msg.send` has its call's `begin` time, and a receive's `gyr.msg.recv`, a
//! `gyr.mpi.complete` and the call's `end` have the time the real call returned (the
//! call's wrapper in `gate.rs` says why). `peer` and `root` are world ranks whatever
//! the communicator (`gyr.mpi.request`: -1 any source, -2 `MPI_PROC_NULL`); a message to or from
//! `MPI_PROC_NULL` records no `gyr.msg.*` event. `comm` is 0 for `MPI_COMM_WORLD`, 1 for
//! `MPI_COMM_SELF`, and the same id in every member for a derived one (see [`track`]). `bytes`
//! is count × `PMPI_Type_size` for a send, and the bytes the status says arrived for a receive;
//! `tag` is the actual tag. So every `gyr.msg.send` matches exactly one `gyr.msg.recv` under
//! `gyr::msg`'s rule (source, destination, communicator, tag, n-th), unless a receive was
//! cancelled, its request freed before completing, or its rank died first.
//!
//! # The runtime
//!
//! A constructor (in `.init_array`, before the program's `main`) starts gyr's runtime only in a
//! process that is an MPI rank: `OMPI_COMM_WORLD_RANK`, `PMIX_RANK` or `PMI_RANK` is set. So
//! `mpirun` and its daemons, which inherit `LD_PRELOAD` too, record nothing, and neither do the
//! programs a rank starts (the constructor marks its own process in `GYR_MPI_PID`). It starts as
//! `gyr::init` would (`Builder::with_default_env`: every `GYR_*` variable works, `GYR_HUB`
//! included, so each rank is a program the hub sees live), except that a full ring drops events
//! (counted, as `gyr.lost`) unless `GYR_POLICY=block` says otherwise, and that a thread's ring
//! holds 4 MiB, not 1, unless `GYR_RING_CAPACITY` says otherwise ([`RING_CAPACITY`] says why).
//!
//! `GYR_TRACE` names each rank's file: `%r` is replaced by the world rank, `%j` by the job
//! (`GYR_MPI_JOB`, which `gyr run --mpi` sets; else Open MPI's job id from
//! `OMPI_MCA_ess_base_jobid`, else `PMIX_NAMESPACE`; else `mpi`), `%p` by the process id. A
//! pattern without `%r` gets `.<rank>` appended, so that ranks never share a file.
//!
//! After `MPI_Init`, the rank's `gyr.msg.rank` is recorded and flushed to the trace; so are the
//! events at `MPI_Finalize`. At exit recording stops, and gyr's own hook flushes the rest; a rank
//! ended by SIGTERM (as `mpirun` ends the others when one aborts) flushes from gyr's signal
//! handler. A rank killed outright leaves a trace that reads up to its last flushed chunk, and
//! never damages another rank's. The child of a `fork()` that does not `exec` records nothing.
//!
//! # What it cannot see
//!
//! Statically linked programs (`LD_PRELOAD` cannot reach them); the `mpi_f08` Fortran module's
//! bindings (`mpi_send_f08_` and friends, not interposed), and Fortran calls beyond those of
//! [`fortran`] (recorded only if Open MPI's Fortran library routed them through `MPI_*`, which it
//! does not); MPI libraries with another ABI than Open MPI's (MPICH and its derivatives define
//! handles as integers); neighbourhood collectives, one-sided communication and I/O (not
//! recorded yet); a rank started without a
//! launcher (a singleton `./app`) sets none of the rank variables and runs unrecorded.

// The constructor and exit hooks are left out of the unit tests (which would otherwise start a
// runtime in the test harness), and what only they use with them.
#![cfg_attr(test, allow(dead_code))]

pub mod coll;
pub mod comm;
pub mod events;
pub mod ffi;
pub mod fortran;
mod gate;
pub mod p2p;
pub mod track;

use libc::{c_char, c_int};
#[cfg(not(test))]
use std::sync::atomic::Ordering;

/// The constructor's entry in `.init_array`: the dynamic loader runs it once this library and
/// the C library are loaded, before the program's constructors.
#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

#[cfg(not(test))]
extern "C" fn init() {
    // SAFETY: __errno_location has no preconditions; `main` finds errno as it would have.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let errno_value = unsafe { *errno };
    gate::quiet(start);
    // SAFETY: as above.
    unsafe { *errno = errno_value };
}

/// This process's world rank, from the variables launchers set; `None` outside an MPI job.
fn rank_from_env() -> Option<String> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
}

/// The job's name (see the crate doc), safe in a file name.
fn job_from_env() -> String {
    let job = ["GYR_MPI_JOB", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "mpi".to_owned());
    job.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The trace file of this rank from the pattern `GYR_TRACE` (see the crate doc).
fn trace_path(pattern: &str, job: &str, rank: &str, pid: u32) -> String {
    let mut path = pattern.replace("%j", job).replace("%p", &pid.to_string());
    if path.contains("%r") {
        path = path.replace("%r", rank);
    } else {
        path = format!("{path}.{rank}");
    }
    path
}

/// Bytes per thread ring in a rank. Ranks busy-poll on every core, so a local monitor may wait
/// a few scheduler slices for a core: a 0-byte ping-pong writes about 150 MB/s per rank, which
/// fills 1 MiB in 7 ms. With 1 MiB, such runs on a busy 2-core machine lost a fifth of their
/// events and ran slower; with 4 MiB (28 ms) they lost none.
pub const RING_CAPACITY: usize = 4 << 20;

/// A rank's runtime, before its trace file: `gyr::init`'s, but dropping on a full ring, with
/// [`RING_CAPACITY`] (see the crate doc).
fn builder() -> gyr::Builder {
    gyr::Builder::new()
        .policy(gyr::Policy::Drop)
        .ring_capacity(RING_CAPACITY)
        .with_default_env()
}

/// Starts the runtime in an MPI rank (see the crate doc).
#[cfg(not(test))]
fn start() {
    let Some(rank) = rank_from_env() else { return };
    let me = std::process::id();
    if std::env::var("GYR_MPI_PID").is_ok_and(|p| p != me.to_string()) {
        // A program a rank started: it shares the rank's variables, not its trace.
        return;
    }
    let job = job_from_env();
    let _ = track::JOB.set(job.clone());
    let mut builder = builder();
    if let Some(pattern) = std::env::var("GYR_TRACE").ok().filter(|t| !t.is_empty()) {
        builder = builder.trace_file(trace_path(&pattern, &job, &rank, me));
    }
    // SAFETY: the constructor runs before `main` and before the runtime starts its threads, so
    // no thread of this program or of gyr reads the environment now.
    unsafe { std::env::set_var("GYR_MPI_PID", me.to_string()) };
    match builder.install() {
        Ok(_) => {
            // SAFETY: `at_exit` and `in_child` are `extern "C" fn()` that never unwind and stay
            // valid for the whole process. Ours is registered after gyr's, so it runs before it.
            unsafe {
                libc::atexit(at_exit);
                libc::pthread_atfork(None, None, Some(in_child));
            }
            gate::ACTIVE.store(true, Ordering::SeqCst);
        }
        Err(e) => gyr::diag!("gyr: MPI rank {rank} runs unmonitored: {e}"),
    }
}

/// At exit, before gyr's own hook ends the runtime: stop recording, and report full tables.
#[cfg(not(test))]
extern "C" fn at_exit() {
    gate::ACTIVE.store(false, Ordering::SeqCst);
    gate::quiet(|| {
        let n = track::REQUEST_OVERFLOWS.load(Ordering::Relaxed);
        if n > 0 {
            gyr::diag!(
                "gyr: {n} MPI requests found no room in gyr-interpose-mpi's table of {} pending \
                 requests: their completions (and receives) were not recorded",
                track::MAX_REQUESTS
            );
        }
        let n = track::COMM_OVERFLOWS.load(Ordering::Relaxed);
        if n > 0 {
            gyr::diag!(
                "gyr: {n} times an MPI communicator found no room in gyr-interpose-mpi's table \
                 of {}: it was looked up again at each use, under an id its creation did not give",
                track::MAX_COMMS
            );
        }
    });
}

/// In the child of a `fork()`: record nothing, and leave the parent's runtime alone.
#[cfg(not(test))]
extern "C" fn in_child() {
    gate::ACTIVE.store(false, Ordering::SeqCst);
    gyr::after_fork_in_child();
}

/// MPI is initialised (by C or Fortran): the tables learn the predefined communicators, the
/// rank is recorded, and flushed so that even a rank killed soon after says who it was.
pub(crate) fn initialised() {
    track::initialised();
    gyr::flush();
}

/// `MPI_Init`: then `gyr.msg.rank`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::init(argc, argv) };
    let Some(mut call) = gate::Call::begin("MPI_Init") else {
        return real();
    };
    let rc = call.real(real);
    if rc == ffi::SUCCESS {
        call.record(initialised);
    }
    call.end(rc)
}

/// `MPI_Init_thread`, at any thread level: then `gyr.msg.rank`.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    // SAFETY: the program's arguments, passed on.
    let real = || unsafe { ffi::init_thread(argc, argv, required, provided) };
    let Some(mut call) = gate::Call::begin("MPI_Init_thread") else {
        return real();
    };
    let rc = call.real(real);
    if rc == ffi::SUCCESS {
        call.record(initialised);
    }
    call.end(rc)
}

/// `MPI_Finalize`: then a flush of everything recorded.
///
/// # Safety
///
/// As the MPI function.
#[cfg_attr(not(test), unsafe(no_mangle))]
#[allow(non_snake_case)]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    // SAFETY: no arguments; the program's call, passed on.
    let real = || unsafe { ffi::finalize() };
    let Some(mut call) = gate::Call::begin("MPI_Finalize") else {
        return real();
    };
    let rc = call.real(real);
    let rc = call.end(rc);
    gate::quiet(|| {
        gyr::flush();
    });
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_gets_its_own_file() {
        assert_eq!(trace_path("t-%j.%r.gyr", "42", "3", 9), "t-42.3.gyr");
        assert_eq!(trace_path("t.gyr", "42", "3", 9), "t.gyr.3");
        assert_eq!(trace_path("t.%p.%r", "j", "0", 9), "t.9.0");
    }

    #[test]
    fn a_rank_drops_on_a_full_ring_of_its_own_size() {
        // The builder's settings are private to gyr: its `Debug` shows them.
        let b = format!("{:?}", builder());
        assert!(b.contains("policy: Drop"), "{b}");
        assert!(
            b.contains(&format!("ring_capacity: {RING_CAPACITY},")),
            "{b}"
        );
    }
}
