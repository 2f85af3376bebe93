//! Open MPI 4.1's C ABI as this library sees it, and the real functions: the `PMPI_*` (and
//! Fortran `pmpi_*_`) definitions behind ours, found with `dlsym(RTLD_NEXT, ..)` on first use.
//!
//! # Why no link-time dependency on libmpi
//!
//! The declarations here are written by hand and checked against Debian's `libopenmpi-dev`
//! (`/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h`, Open MPI 4.1), so that the library
//! builds in the workspace's default build on a machine without MPI. Nothing is linked against
//! libmpi either: the program brought libmpi in already, and `dlsym(RTLD_NEXT, "PMPI_Send")`
//! finds its profiling entry point, the one a PMPI tool must call (our `MPI_Send` comes first in
//! the lookup order, being preloaded, so the program's calls reach it). A symbol that cannot be
//! found makes its function return `MPI_ERR_INTERN`.
//!
//! # Checked against mpi.h
//!
//! - handles (`MPI_Comm`, `MPI_Datatype`, `MPI_Request`, `MPI_Op`, `MPI_Group`, `MPI_Info`) are
//!   pointers to opaque structures;
//! - `MPI_Status` is `{ int MPI_SOURCE, MPI_TAG, MPI_ERROR, _cancelled; size_t _ucount }`;
//! - `MPI_COMM_WORLD` is `&ompi_mpi_comm_world`, `MPI_COMM_SELF` `&ompi_mpi_comm_self`,
//!   `MPI_COMM_NULL` `&ompi_mpi_comm_null`, `MPI_REQUEST_NULL` `&ompi_request_null`, `MPI_BYTE`
//!   `&ompi_mpi_byte` (found with `dlsym(RTLD_DEFAULT, ..)` once MPI is initialised);
//! - `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` are null, `MPI_IN_PLACE` is `(void *) 1`;
//! - `MPI_ANY_SOURCE` = -1, `MPI_PROC_NULL` = -2, `MPI_ROOT` = -4, `MPI_ANY_TAG` = -1,
//!   `MPI_UNDEFINED` = -32766, `MPI_SUCCESS` = 0, `MPI_ERR_INTERN` = 17;
//! - `MPI_Fint` is `int`; a Fortran status is `MPI_STATUS_SIZE` = 6 of them (`mpif-config.h`);
//!   Fortran's `MPI_STATUS(ES)_IGNORE` and `MPI_IN_PLACE` are the addresses of the common blocks
//!   `mpi_fortran_status_ignore_`, `mpi_fortran_statuses_ignore_`, `mpi_fortran_in_place_`.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_void};
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// `MPI_Comm`.
pub type Comm = *mut c_void;
/// `MPI_Datatype`.
pub type Datatype = *mut c_void;
/// `MPI_Request`.
pub type Request = *mut c_void;
/// `MPI_Op`.
pub type Op = *mut c_void;
/// `MPI_Group`.
pub type Group = *mut c_void;
/// `MPI_Info`.
pub type Info = *mut c_void;
/// `MPI_Fint`: a Fortran `INTEGER`.
pub type Fint = c_int;

/// `MPI_Status` of Open MPI 4.1.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Status {
    /// The actual source (rank in the communicator).
    pub source: c_int,
    /// The actual tag.
    pub tag: c_int,
    /// The error, set by the multiple-completion calls only.
    pub error: c_int,
    cancelled: c_int,
    ucount: usize,
}

const _: () = assert!(std::mem::size_of::<Status>() == 24);

impl Status {
    /// The bytes a completed receive got: Open MPI keeps them in the status itself, so this
    /// costs no `MPI_Get_count` call (whose `MPI_BYTE` answer it is, except that it is never
    /// `MPI_UNDEFINED` past 2 GiB).
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.ucount as u64
    }
}

/// `MPI_STATUS_SIZE` of Open MPI 4.1's Fortran bindings.
pub const F_STATUS_SIZE: usize = 6;

/// `MPI_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `MPI_ERR_INTERN`, returned by a function whose real one is missing.
pub const ERR_INTERN: c_int = 17;
/// `MPI_ANY_SOURCE`.
pub const ANY_SOURCE: c_int = -1;
/// `MPI_PROC_NULL`.
pub const PROC_NULL: c_int = -2;
/// `MPI_ROOT`.
pub const ROOT: c_int = -4;
/// `MPI_UNDEFINED`.
pub const UNDEFINED: c_int = -32766;
/// `MPI_IN_PLACE`: the address 1, a sentinel never dereferenced.
#[allow(clippy::manual_dangling_ptr)]
pub const IN_PLACE: *const c_void = 1 as *const c_void;

/// A symbol of the MPI library's own, such as `ompi_mpi_comm_world`: its address, found in the
/// global scope on first use (null when missing).
#[derive(Debug)]
pub struct Global {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Global {
    const fn new(name: &'static CStr) -> Self {
        Global {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The symbol's address.
    #[inline]
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        // SAFETY: a NUL-terminated static name; RTLD_DEFAULT looks it up in the global scope
        // (the program first, then its libraries), where the MPI library's code finds it too.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

/// `MPI_COMM_WORLD`.
pub static COMM_WORLD: Global = Global::new(c"ompi_mpi_comm_world");
/// `MPI_COMM_SELF`.
pub static COMM_SELF: Global = Global::new(c"ompi_mpi_comm_self");
/// `MPI_COMM_NULL`.
pub static COMM_NULL: Global = Global::new(c"ompi_mpi_comm_null");
/// `MPI_REQUEST_NULL`.
pub static REQUEST_NULL: Global = Global::new(c"ompi_request_null");
/// `MPI_BYTE`.
pub static BYTE: Global = Global::new(c"ompi_mpi_byte");
/// Fortran's `MPI_STATUS_IGNORE`.
pub static F_STATUS_IGNORE: Global = Global::new(c"mpi_fortran_status_ignore_");
/// Fortran's `MPI_STATUSES_IGNORE`.
pub static F_STATUSES_IGNORE: Global = Global::new(c"mpi_fortran_statuses_ignore_");
/// Fortran's `MPI_IN_PLACE`.
pub static F_IN_PLACE: Global = Global::new(c"mpi_fortran_in_place_");

/// One real function: its name and its address once found.
#[derive(Debug)]
pub(crate) struct Real {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Real {
    const fn new(name: &'static CStr) -> Self {
        Real {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The function's address, or null when the MPI library lacks it.
    #[inline]
    pub(crate) fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if p.is_null() { self.resolve() } else { p }
    }

    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut c_void {
        // SAFETY: a NUL-terminated static name; RTLD_NEXT asks for the next definition after
        // this library (the MPI library's), which dlsym looks up without side effects.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

/// Declares the real functions: a `Real` per symbol, and a function calling it.
macro_rules! real {
    ($(
        $name:ident = $sym:literal ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty, else $missing:expr;
    )*) => {
        #[allow(non_upper_case_globals)]
        mod sym {
            use super::Real;
            $(pub(crate) static $name: Real = Real::new($sym);)*
        }

        $(
            /// The MPI library's function of this name.
            ///
            /// # Safety
            ///
            /// As the MPI function: the arguments must be what it expects.
            #[inline]
            #[allow(clippy::too_many_arguments, clippy::unused_unit)]
            pub(crate) unsafe fn $name($($arg: $ty),*) -> $ret {
                let p = sym::$name.get();
                if p.is_null() {
                    return $missing;
                }
                // SAFETY: `p` is the address the dynamic loader gave for this symbol, whose C
                // signature is the one written here, checked against mpi.h.
                let f: unsafe extern "C" fn($($ty),*) -> $ret =
                    unsafe { std::mem::transmute::<*mut c_void, _>(p) };
                // SAFETY: the caller passes what the MPI function expects.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

/// Returned by a function the MPI library lacks.
const MISSING: c_int = ERR_INTERN;
type Buf = *const c_void;
type MutBuf = *mut c_void;
type Ints = *const c_int;
type F = *mut Fint;

real! {
    init = c"PMPI_Init"(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int, else MISSING;
    init_thread = c"PMPI_Init_thread"(
        argc: *mut c_int, argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int
    ) -> c_int, else MISSING;
    finalize = c"PMPI_Finalize"() -> c_int, else MISSING;

    comm_rank = c"PMPI_Comm_rank"(c: Comm, r: *mut c_int) -> c_int, else MISSING;
    comm_size = c"PMPI_Comm_size"(c: Comm, r: *mut c_int) -> c_int, else MISSING;
    comm_group = c"PMPI_Comm_group"(c: Comm, g: *mut Group) -> c_int, else MISSING;
    comm_remote_group = c"PMPI_Comm_remote_group"(c: Comm, g: *mut Group) -> c_int,
        else MISSING;
    comm_test_inter = c"PMPI_Comm_test_inter"(c: Comm, flag: *mut c_int) -> c_int, else MISSING;
    group_size = c"PMPI_Group_size"(g: Group, n: *mut c_int) -> c_int, else MISSING;
    group_translate_ranks = c"PMPI_Group_translate_ranks"(
        g1: Group, n: c_int, r1: Ints, g2: Group, r2: *mut c_int
    ) -> c_int, else MISSING;
    group_free = c"PMPI_Group_free"(g: *mut Group) -> c_int, else MISSING;
    type_size = c"PMPI_Type_size"(t: Datatype, n: *mut c_int) -> c_int, else MISSING;
    test_cancelled = c"PMPI_Test_cancelled"(s: *const Status, flag: *mut c_int) -> c_int,
        else MISSING;
    status_f2c = c"PMPI_Status_f2c"(f: *const Fint, s: *mut Status) -> c_int, else MISSING;
    comm_f2c = c"PMPI_Comm_f2c"(c: Fint) -> Comm, else std::ptr::null_mut();
    type_f2c = c"PMPI_Type_f2c"(t: Fint) -> Datatype, else std::ptr::null_mut();
    request_f2c = c"PMPI_Request_f2c"(r: Fint) -> Request, else std::ptr::null_mut();

    send = c"PMPI_Send"(b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm) -> c_int,
        else MISSING;
    ssend = c"PMPI_Ssend"(b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm) -> c_int,
        else MISSING;
    bsend = c"PMPI_Bsend"(b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm) -> c_int,
        else MISSING;
    rsend = c"PMPI_Rsend"(b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm) -> c_int,
        else MISSING;
    recv = c"PMPI_Recv"(
        b: MutBuf, n: c_int, t: Datatype, s: c_int, g: c_int, c: Comm, st: *mut Status
    ) -> c_int, else MISSING;
    sendrecv = c"PMPI_Sendrecv"(
        sb: Buf, sn: c_int, st: Datatype, d: c_int, sg: c_int,
        rb: MutBuf, rn: c_int, rt: Datatype, s: c_int, rg: c_int, c: Comm, status: *mut Status
    ) -> c_int, else MISSING;
    sendrecv_replace = c"PMPI_Sendrecv_replace"(
        b: MutBuf, n: c_int, t: Datatype, d: c_int, sg: c_int, s: c_int, rg: c_int, c: Comm,
        status: *mut Status
    ) -> c_int, else MISSING;
    isend = c"PMPI_Isend"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    issend = c"PMPI_Issend"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    ibsend = c"PMPI_Ibsend"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    irsend = c"PMPI_Irsend"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    irecv = c"PMPI_Irecv"(
        b: MutBuf, n: c_int, t: Datatype, s: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    send_init = c"PMPI_Send_init"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    ssend_init = c"PMPI_Ssend_init"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    bsend_init = c"PMPI_Bsend_init"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    rsend_init = c"PMPI_Rsend_init"(
        b: Buf, n: c_int, t: Datatype, d: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    recv_init = c"PMPI_Recv_init"(
        b: MutBuf, n: c_int, t: Datatype, s: c_int, g: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    start = c"PMPI_Start"(r: *mut Request) -> c_int, else MISSING;
    startall = c"PMPI_Startall"(n: c_int, r: *mut Request) -> c_int, else MISSING;
    request_free = c"PMPI_Request_free"(r: *mut Request) -> c_int, else MISSING;
    cancel = c"PMPI_Cancel"(r: *mut Request) -> c_int, else MISSING;
    probe = c"PMPI_Probe"(s: c_int, g: c_int, c: Comm, st: *mut Status) -> c_int, else MISSING;
    iprobe = c"PMPI_Iprobe"(
        s: c_int, g: c_int, c: Comm, flag: *mut c_int, st: *mut Status
    ) -> c_int, else MISSING;
    wait = c"PMPI_Wait"(r: *mut Request, st: *mut Status) -> c_int, else MISSING;
    waitall = c"PMPI_Waitall"(n: c_int, r: *mut Request, st: *mut Status) -> c_int,
        else MISSING;
    waitany = c"PMPI_Waitany"(n: c_int, r: *mut Request, i: *mut c_int, st: *mut Status)
        -> c_int, else MISSING;
    waitsome = c"PMPI_Waitsome"(
        n: c_int, r: *mut Request, out: *mut c_int, i: *mut c_int, st: *mut Status
    ) -> c_int, else MISSING;
    test = c"PMPI_Test"(r: *mut Request, flag: *mut c_int, st: *mut Status) -> c_int,
        else MISSING;
    testall = c"PMPI_Testall"(n: c_int, r: *mut Request, flag: *mut c_int, st: *mut Status)
        -> c_int, else MISSING;
    testany = c"PMPI_Testany"(
        n: c_int, r: *mut Request, i: *mut c_int, flag: *mut c_int, st: *mut Status
    ) -> c_int, else MISSING;
    testsome = c"PMPI_Testsome"(
        n: c_int, r: *mut Request, out: *mut c_int, i: *mut c_int, st: *mut Status
    ) -> c_int, else MISSING;

    barrier = c"PMPI_Barrier"(c: Comm) -> c_int, else MISSING;
    bcast = c"PMPI_Bcast"(b: MutBuf, n: c_int, t: Datatype, root: c_int, c: Comm) -> c_int,
        else MISSING;
    reduce = c"PMPI_Reduce"(
        sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, root: c_int, c: Comm
    ) -> c_int, else MISSING;
    allreduce = c"PMPI_Allreduce"(sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, c: Comm)
        -> c_int, else MISSING;
    gather = c"PMPI_Gather"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, root: c_int,
        c: Comm
    ) -> c_int, else MISSING;
    gatherv = c"PMPI_Gatherv"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: Ints, rd: Ints, rt: Datatype,
        root: c_int, c: Comm
    ) -> c_int, else MISSING;
    scatter = c"PMPI_Scatter"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, root: c_int,
        c: Comm
    ) -> c_int, else MISSING;
    scatterv = c"PMPI_Scatterv"(
        sb: Buf, sn: Ints, sd: Ints, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype,
        root: c_int, c: Comm
    ) -> c_int, else MISSING;
    allgather = c"PMPI_Allgather"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, c: Comm
    ) -> c_int, else MISSING;
    allgatherv = c"PMPI_Allgatherv"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: Ints, rd: Ints, rt: Datatype, c: Comm
    ) -> c_int, else MISSING;
    alltoall = c"PMPI_Alltoall"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, c: Comm
    ) -> c_int, else MISSING;
    alltoallv = c"PMPI_Alltoallv"(
        sb: Buf, sn: Ints, sd: Ints, st: Datatype, rb: MutBuf, rn: Ints, rd: Ints,
        rt: Datatype, c: Comm
    ) -> c_int, else MISSING;
    reduce_scatter = c"PMPI_Reduce_scatter"(
        sb: Buf, rb: MutBuf, rn: Ints, t: Datatype, op: Op, c: Comm
    ) -> c_int, else MISSING;
    reduce_scatter_block = c"PMPI_Reduce_scatter_block"(
        sb: Buf, rb: MutBuf, rn: c_int, t: Datatype, op: Op, c: Comm
    ) -> c_int, else MISSING;
    ibarrier = c"PMPI_Ibarrier"(c: Comm, r: *mut Request) -> c_int, else MISSING;
    ibcast = c"PMPI_Ibcast"(
        b: MutBuf, n: c_int, t: Datatype, root: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    ireduce = c"PMPI_Ireduce"(
        sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, root: c_int, c: Comm,
        r: *mut Request
    ) -> c_int, else MISSING;
    iallreduce = c"PMPI_Iallreduce"(
        sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    igather = c"PMPI_Igather"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, root: c_int,
        c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    iscatter = c"PMPI_Iscatter"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, root: c_int,
        c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    iallgather = c"PMPI_Iallgather"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, c: Comm,
        r: *mut Request
    ) -> c_int, else MISSING;
    ialltoall = c"PMPI_Ialltoall"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype, c: Comm,
        r: *mut Request
    ) -> c_int, else MISSING;
    igatherv = c"PMPI_Igatherv"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: Ints, rd: Ints, rt: Datatype,
        root: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    iscatterv = c"PMPI_Iscatterv"(
        sb: Buf, sn: Ints, sd: Ints, st: Datatype, rb: MutBuf, rn: c_int, rt: Datatype,
        root: c_int, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    iallgatherv = c"PMPI_Iallgatherv"(
        sb: Buf, sn: c_int, st: Datatype, rb: MutBuf, rn: Ints, rd: Ints, rt: Datatype, c: Comm,
        r: *mut Request
    ) -> c_int, else MISSING;
    ialltoallv = c"PMPI_Ialltoallv"(
        sb: Buf, sn: Ints, sd: Ints, st: Datatype, rb: MutBuf, rn: Ints, rd: Ints,
        rt: Datatype, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    ireduce_scatter = c"PMPI_Ireduce_scatter"(
        sb: Buf, rb: MutBuf, rn: Ints, t: Datatype, op: Op, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    ireduce_scatter_block = c"PMPI_Ireduce_scatter_block"(
        sb: Buf, rb: MutBuf, rn: c_int, t: Datatype, op: Op, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    iscan = c"PMPI_Iscan"(
        sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    iexscan = c"PMPI_Iexscan"(
        sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, c: Comm, r: *mut Request
    ) -> c_int, else MISSING;
    scan = c"PMPI_Scan"(sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, c: Comm) -> c_int,
        else MISSING;
    exscan = c"PMPI_Exscan"(sb: Buf, rb: MutBuf, n: c_int, t: Datatype, op: Op, c: Comm)
        -> c_int, else MISSING;

    comm_split = c"PMPI_Comm_split"(c: Comm, color: c_int, key: c_int, out: *mut Comm)
        -> c_int, else MISSING;
    comm_split_type = c"PMPI_Comm_split_type"(
        c: Comm, kind: c_int, key: c_int, info: Info, out: *mut Comm
    ) -> c_int, else MISSING;
    comm_dup = c"PMPI_Comm_dup"(c: Comm, out: *mut Comm) -> c_int, else MISSING;
    comm_dup_with_info = c"PMPI_Comm_dup_with_info"(c: Comm, info: Info, out: *mut Comm)
        -> c_int, else MISSING;
    comm_create = c"PMPI_Comm_create"(c: Comm, g: Group, out: *mut Comm) -> c_int,
        else MISSING;
    cart_create = c"PMPI_Cart_create"(
        c: Comm, ndims: c_int, dims: Ints, periods: Ints, reorder: c_int, out: *mut Comm
    ) -> c_int, else MISSING;
    comm_free = c"PMPI_Comm_free"(c: *mut Comm) -> c_int, else MISSING;

    f_init = c"pmpi_init_"(ierr: F) -> (), else ();
    f_init_thread = c"pmpi_init_thread_"(required: F, provided: F, ierr: F) -> (), else ();
    f_finalize = c"pmpi_finalize_"(ierr: F) -> (), else ();
    f_send = c"pmpi_send_"(b: Buf, n: F, t: F, d: F, g: F, c: F, ierr: F) -> (), else ();
    f_ssend = c"pmpi_ssend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, ierr: F) -> (), else ();
    f_recv = c"pmpi_recv_"(b: MutBuf, n: F, t: F, s: F, g: F, c: F, st: F, ierr: F) -> (),
        else ();
    f_isend = c"pmpi_isend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F) -> (),
        else ();
    f_irecv = c"pmpi_irecv_"(b: MutBuf, n: F, t: F, s: F, g: F, c: F, r: F, ierr: F) -> (),
        else ();
    f_wait = c"pmpi_wait_"(r: F, st: F, ierr: F) -> (), else ();
    f_waitall = c"pmpi_waitall_"(n: F, r: F, st: F, ierr: F) -> (), else ();
    f_sendrecv = c"pmpi_sendrecv_"(
        sb: Buf, sn: F, st: F, d: F, sg: F, rb: MutBuf, rn: F, rt: F, s: F, rg: F, c: F,
        status: F, ierr: F
    ) -> (), else ();
    f_barrier = c"pmpi_barrier_"(c: F, ierr: F) -> (), else ();
    f_bcast = c"pmpi_bcast_"(b: MutBuf, n: F, t: F, root: F, c: F, ierr: F) -> (), else ();
    f_reduce = c"pmpi_reduce_"(
        sb: Buf, rb: MutBuf, n: F, t: F, op: F, root: F, c: F, ierr: F
    ) -> (), else ();
    f_allreduce = c"pmpi_allreduce_"(sb: Buf, rb: MutBuf, n: F, t: F, op: F, c: F, ierr: F)
        -> (), else ();
    f_alltoall = c"pmpi_alltoall_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, c: F, ierr: F
    ) -> (), else ();
    f_comm_split = c"pmpi_comm_split_"(c: F, color: F, key: F, out: F, ierr: F) -> (), else ();
    f_comm_dup = c"pmpi_comm_dup_"(c: F, out: F, ierr: F) -> (), else ();
    f_comm_free = c"pmpi_comm_free_"(c: F, ierr: F) -> (), else ();
    f_bsend = c"pmpi_bsend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, ierr: F) -> (), else ();
    f_rsend = c"pmpi_rsend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, ierr: F) -> (), else ();
    f_issend = c"pmpi_issend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F) -> (),
        else ();
    f_ibsend = c"pmpi_ibsend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F) -> (),
        else ();
    f_irsend = c"pmpi_irsend_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F) -> (),
        else ();
    f_send_init = c"pmpi_send_init_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F)
        -> (), else ();
    f_ssend_init = c"pmpi_ssend_init_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F)
        -> (), else ();
    f_bsend_init = c"pmpi_bsend_init_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F)
        -> (), else ();
    f_rsend_init = c"pmpi_rsend_init_"(b: Buf, n: F, t: F, d: F, g: F, c: F, r: F, ierr: F)
        -> (), else ();
    f_recv_init = c"pmpi_recv_init_"(
        b: MutBuf, n: F, t: F, s: F, g: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_start = c"pmpi_start_"(r: F, ierr: F) -> (), else ();
    f_startall = c"pmpi_startall_"(n: F, r: F, ierr: F) -> (), else ();
    f_request_free = c"pmpi_request_free_"(r: F, ierr: F) -> (), else ();
    f_cancel = c"pmpi_cancel_"(r: F, ierr: F) -> (), else ();
    f_probe = c"pmpi_probe_"(s: F, g: F, c: F, st: F, ierr: F) -> (), else ();
    f_iprobe = c"pmpi_iprobe_"(s: F, g: F, c: F, flag: F, st: F, ierr: F) -> (), else ();
    f_sendrecv_replace = c"pmpi_sendrecv_replace_"(
        b: MutBuf, n: F, t: F, d: F, sg: F, s: F, rg: F, c: F, st: F, ierr: F
    ) -> (), else ();
    f_test = c"pmpi_test_"(r: F, flag: F, st: F, ierr: F) -> (), else ();
    f_testall = c"pmpi_testall_"(n: F, r: F, flag: F, st: F, ierr: F) -> (), else ();
    f_waitany = c"pmpi_waitany_"(n: F, r: F, i: F, st: F, ierr: F) -> (), else ();
    f_testany = c"pmpi_testany_"(n: F, r: F, i: F, flag: F, st: F, ierr: F) -> (), else ();
    f_waitsome = c"pmpi_waitsome_"(n: F, r: F, out: F, i: F, st: F, ierr: F) -> (), else ();
    f_testsome = c"pmpi_testsome_"(n: F, r: F, out: F, i: F, st: F, ierr: F) -> (), else ();
    f_scan = c"pmpi_scan_"(sb: Buf, rb: MutBuf, n: F, t: F, op: F, c: F, ierr: F) -> (),
        else ();
    f_exscan = c"pmpi_exscan_"(sb: Buf, rb: MutBuf, n: F, t: F, op: F, c: F, ierr: F) -> (),
        else ();
    f_gather = c"pmpi_gather_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, root: F, c: F, ierr: F
    ) -> (), else ();
    f_gatherv = c"pmpi_gatherv_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rd: F, rt: F, root: F, c: F, ierr: F
    ) -> (), else ();
    f_scatter = c"pmpi_scatter_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, root: F, c: F, ierr: F
    ) -> (), else ();
    f_scatterv = c"pmpi_scatterv_"(
        sb: Buf, sn: F, sd: F, st: F, rb: MutBuf, rn: F, rt: F, root: F, c: F, ierr: F
    ) -> (), else ();
    f_allgather = c"pmpi_allgather_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, c: F, ierr: F
    ) -> (), else ();
    f_allgatherv = c"pmpi_allgatherv_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rd: F, rt: F, c: F, ierr: F
    ) -> (), else ();
    f_alltoallv = c"pmpi_alltoallv_"(
        sb: Buf, sn: F, sd: F, st: F, rb: MutBuf, rn: F, rd: F, rt: F, c: F, ierr: F
    ) -> (), else ();
    f_reduce_scatter = c"pmpi_reduce_scatter_"(
        sb: Buf, rb: MutBuf, rn: F, t: F, op: F, c: F, ierr: F
    ) -> (), else ();
    f_reduce_scatter_block = c"pmpi_reduce_scatter_block_"(
        sb: Buf, rb: MutBuf, rn: F, t: F, op: F, c: F, ierr: F
    ) -> (), else ();
    f_ibarrier = c"pmpi_ibarrier_"(c: F, r: F, ierr: F) -> (), else ();
    f_ibcast = c"pmpi_ibcast_"(b: MutBuf, n: F, t: F, root: F, c: F, r: F, ierr: F) -> (),
        else ();
    f_ireduce = c"pmpi_ireduce_"(
        sb: Buf, rb: MutBuf, n: F, t: F, op: F, root: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_iallreduce = c"pmpi_iallreduce_"(
        sb: Buf, rb: MutBuf, n: F, t: F, op: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_igather = c"pmpi_igather_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, root: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_iscatter = c"pmpi_iscatter_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, root: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_iallgather = c"pmpi_iallgather_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_ialltoall = c"pmpi_ialltoall_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rt: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_igatherv = c"pmpi_igatherv_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rd: F, rt: F, root: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_iscatterv = c"pmpi_iscatterv_"(
        sb: Buf, sn: F, sd: F, st: F, rb: MutBuf, rn: F, rt: F, root: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_iallgatherv = c"pmpi_iallgatherv_"(
        sb: Buf, sn: F, st: F, rb: MutBuf, rn: F, rd: F, rt: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_ialltoallv = c"pmpi_ialltoallv_"(
        sb: Buf, sn: F, sd: F, st: F, rb: MutBuf, rn: F, rd: F, rt: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_ireduce_scatter = c"pmpi_ireduce_scatter_"(
        sb: Buf, rb: MutBuf, rn: F, t: F, op: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_ireduce_scatter_block = c"pmpi_ireduce_scatter_block_"(
        sb: Buf, rb: MutBuf, rn: F, t: F, op: F, c: F, r: F, ierr: F
    ) -> (), else ();
    f_iscan = c"pmpi_iscan_"(sb: Buf, rb: MutBuf, n: F, t: F, op: F, c: F, r: F, ierr: F)
        -> (), else ();
    f_iexscan = c"pmpi_iexscan_"(sb: Buf, rb: MutBuf, n: F, t: F, op: F, c: F, r: F, ierr: F)
        -> (), else ();
    f_comm_split_type = c"pmpi_comm_split_type_"(
        c: F, kind: F, key: F, info: F, out: F, ierr: F
    ) -> (), else ();
    f_comm_dup_with_info = c"pmpi_comm_dup_with_info_"(c: F, info: F, out: F, ierr: F) -> (),
        else ();
    f_comm_create = c"pmpi_comm_create_"(c: F, g: F, out: F, ierr: F) -> (), else ();
    f_cart_create = c"pmpi_cart_create_"(
        c: F, ndims: F, dims: F, periods: F, reorder: F, out: F, ierr: F
    ) -> (), else ();
}
