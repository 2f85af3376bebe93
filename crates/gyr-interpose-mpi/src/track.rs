//! What the wrappers remember between calls: communicators (their ids and members' world
//! ranks) and requests (what a pending `Isend`/`Irecv` or persistent request is), in bounded
//! side tables, and the helpers that turn a call's arguments into events.
//!
//! # Communicator ids
//!
//! `MPI_COMM_WORLD` is 0, `MPI_COMM_SELF` 1. A communicator created by a call that is collective
//! over its parent (`MPI_Comm_split`, `_split_type`, `_dup`, `_dup_with_info`, `_create`,
//! `MPI_Cart_create`) gets a hash of the parent's id, how many communicators this rank had
//! created from that parent before, and the lowest world rank among its members: every member
//! makes the same calls on the parent in the same order, so every member computes the same id,
//! and the communicators one split makes (one per colour) differ by their lowest member. A
//! communicator first seen in a call (one made by a call not interposed, such as
//! `MPI_Intercomm_create`) gets a hash of its members' world ranks instead: the same in every
//! member, but shared by two such communicators over the same ranks.
//!
//! # The calling thread's last communicator
//!
//! Every message and collective needs its communicator's id and world ranks. The table is
//! behind a lock, so each thread keeps the last communicator it looked up, with the table's
//! epoch at the time: the epoch moves whenever the table changes (a communicator remembered or
//! forgotten, after which MPI may hand the same handle out again), and a thread's entry counts
//! only while the epoch is the same. A program sending on one communicator takes no lock.
//!
//! The entry is read on every message, so on x86-64 Linux it lives in the static TLS block
//! (see [`last`]), as the gate's block does: one `%fs`-relative access rather than the
//! `__tls_get_addr` call a `thread_local!` costs in a shared library. It holds a reference
//! count of its communicator, given back by a `thread_local!` guard when the thread exits.
//!
//! # Bounds
//!
//! At most [`MAX_COMMS`] communicators and [`MAX_REQUESTS`] pending requests are remembered. A
//! request that finds no room is not followed to its completion (its receive is not recorded);
//! a communicator that finds none is looked up again at each use. Both are counted and reported
//! at exit.

use crate::events::{MpiCollective, MpiComm, MpiCommFree, MpiComplete, MpiRequest};
use crate::ffi::{self, Comm, Datatype, Request, Status};
use gyr::msg::MsgRecv;
use libc::c_int;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Communicators remembered at most: more than a program keeps at once, in practice.
pub const MAX_COMMS: usize = 4096;
/// Pending requests remembered at most.
pub const MAX_REQUESTS: usize = 1 << 16;

/// Times a communicator found no room in the table.
pub(crate) static COMM_OVERFLOWS: AtomicU64 = AtomicU64::new(0);
/// Times a request found no room in the table.
pub(crate) static REQUEST_OVERFLOWS: AtomicU64 = AtomicU64::new(0);

/// This process's rank in `MPI_COMM_WORLD`, once MPI is initialised.
pub(crate) static WORLD_RANK: AtomicU32 = AtomicU32::new(0);

/// The job's name, set by the constructor.
pub(crate) static JOB: OnceLock<String> = OnceLock::new();

/// What is known of a communicator.
#[derive(Debug)]
pub(crate) struct CommInfo {
    /// Its id (see the module doc).
    pub(crate) id: u64,
    /// The world ranks of the ranks a message on it names (the remote group's, for an
    /// intercommunicator); `u32::MAX` for a process outside `MPI_COMM_WORLD`.
    peers: Vec<u32>,
    /// The world ranks of its local group.
    local: Vec<u32>,
    /// Communicators this rank has created from it so far.
    created: AtomicU64,
}

impl CommInfo {
    /// The world rank of `rank` (a rank in this communicator, as messages name peers): -1 for
    /// `MPI_ANY_SOURCE`, -2 for `MPI_PROC_NULL`, -3 for anything else that is not a rank.
    pub(crate) fn world(&self, rank: c_int) -> i32 {
        match rank {
            ffi::ANY_SOURCE => -1,
            ffi::PROC_NULL => -2,
            r if r >= 0 => self.peers.get(r as usize).map_or(-3, |&w| w as i32),
            _ => -3,
        }
    }

    /// The world rank of a collective's `root`: this rank for `MPI_ROOT` (an intercommunicator's
    /// root group), -1 for none.
    fn root(&self, root: c_int) -> i32 {
        match root {
            ffi::ROOT => WORLD_RANK.load(Ordering::Relaxed) as i32,
            r if r >= 0 => self.peers.get(r as usize).map_or(-1, |&w| w as i32),
            _ => -1,
        }
    }

    /// The size of its local group.
    pub(crate) fn size(&self) -> usize {
        self.local.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static COMMS: Mutex<Option<HashMap<usize, Arc<CommInfo>>>> = Mutex::new(None);

/// Moves whenever [`COMMS`] changes (see the module doc).
static COMMS_EPOCH: AtomicU64 = AtomicU64::new(0);

/// A 64-bit mix of `parts` (splitmix64 over each): the same in every process, never 0 or 1.
fn mix(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x6779_722e_6d70_6921;
    for &p in parts {
        h ^= p;
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    if h < 2 { h + 2 } else { h }
}

/// The world ranks of `group`'s members, in rank order.
fn world_ranks(group: ffi::Group) -> Vec<u32> {
    let mut n: c_int = 0;
    // SAFETY: a valid group handle and an out-parameter.
    if unsafe { ffi::group_size(group, &mut n) } != ffi::SUCCESS || n <= 0 {
        return Vec::new();
    }
    let mut world: ffi::Group = std::ptr::null_mut();
    // SAFETY: MPI_COMM_WORLD (valid once MPI is initialised) and an out-parameter.
    if unsafe { ffi::comm_group(ffi::COMM_WORLD.get(), &mut world) } != ffi::SUCCESS {
        return Vec::new();
    }
    let ranks: Vec<c_int> = (0..n).collect();
    let mut out = vec![ffi::UNDEFINED; n as usize];
    // SAFETY: `ranks` and `out` hold `n` ints each; both groups are valid.
    unsafe { ffi::group_translate_ranks(group, n, ranks.as_ptr(), world, out.as_mut_ptr()) };
    // SAFETY: the group made above, freed once.
    unsafe { ffi::group_free(&mut world) };
    out.into_iter()
        .map(|r| if r >= 0 { r as u32 } else { u32::MAX })
        .collect()
}

/// The members of `comm`: (peers, local group) in world ranks.
fn members(comm: Comm) -> (Vec<u32>, Vec<u32>) {
    let mut group: ffi::Group = std::ptr::null_mut();
    // SAFETY: the program's communicator and an out-parameter.
    if unsafe { ffi::comm_group(comm, &mut group) } != ffi::SUCCESS {
        return (Vec::new(), Vec::new());
    }
    let local = world_ranks(group);
    // SAFETY: the group made above, freed once.
    unsafe { ffi::group_free(&mut group) };
    let mut inter: c_int = 0;
    // SAFETY: as above.
    unsafe { ffi::comm_test_inter(comm, &mut inter) };
    if inter == 0 {
        return (local.clone(), local);
    }
    let mut remote: ffi::Group = std::ptr::null_mut();
    // SAFETY: as above.
    if unsafe { ffi::comm_remote_group(comm, &mut remote) } != ffi::SUCCESS {
        return (Vec::new(), local);
    }
    let peers = world_ranks(remote);
    // SAFETY: the group made above, freed once.
    unsafe { ffi::group_free(&mut remote) };
    (peers, local)
}

/// Remembers `comm` as `info`, if there is room.
fn remember(comm: Comm, info: Arc<CommInfo>) {
    let mut t = lock(&COMMS);
    let t = t.get_or_insert_with(HashMap::new);
    if t.len() >= MAX_COMMS && !t.contains_key(&(comm as usize)) {
        COMM_OVERFLOWS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    t.insert(comm as usize, info);
    COMMS_EPOCH.fetch_add(1, Ordering::Release);
}

/// `f` on what is known of `comm` (see [`comm`]), from the thread's last lookup when it still
/// holds: no lock, no reference count touched.
fn with_comm<R>(comm: Comm, f: impl FnOnce(&CommInfo) -> R) -> Option<R> {
    let epoch = COMMS_EPOCH.load(Ordering::Acquire);
    let last = last::entry();
    if let Some(info) = last.borrow(comm as usize, epoch) {
        let r = f(info);
        last.give_back();
        return Some(r);
    }
    let info = comm_at(comm, epoch)?;
    Some(f(&info))
}

/// What is known of `comm` (looked up through its groups when first seen); `None` for
/// `MPI_COMM_NULL`.
pub(crate) fn comm(comm: Comm) -> Option<Arc<CommInfo>> {
    let epoch = COMMS_EPOCH.load(Ordering::Acquire);
    let last = last::entry();
    if let Some(info) = last.borrow(comm as usize, epoch) {
        // SAFETY: `info` came from `Arc::into_raw` and the entry keeps its count while
        // borrowed (see `last::Entry`): one more count for the caller.
        let info = unsafe {
            Arc::increment_strong_count(info);
            Arc::from_raw(info as *const CommInfo)
        };
        last.give_back();
        return Some(info);
    }
    comm_at(comm, epoch)
}

/// [`comm`] from the table, kept as the thread's last lookup with `epoch` (read before the
/// table, so that a change meanwhile makes the entry stale rather than wrong).
fn comm_at(comm: Comm, epoch: u64) -> Option<Arc<CommInfo>> {
    let info = comm_in_table(comm)?;
    last::entry().keep(comm as usize, epoch, &info);
    Some(info)
}

/// The calling thread's last communicator looked up (see the module doc): the handle, the
/// table's epoch then, and a counted reference to what was found.
mod last {
    use super::CommInfo;
    use std::cell::Cell;
    use std::sync::Arc;

    /// One thread's entry; all zeros (nothing kept, open) is its initial value.
    #[repr(C)]
    pub(super) struct Entry {
        key: Cell<usize>,
        epoch: Cell<u64>,
        /// From `Arc::into_raw`, holding one count; null for none.
        info: Cell<*const CommInfo>,
        /// 1 while a caller reads `info` (nothing may replace it then), 2 once the thread's
        /// guard was dropped (the thread is exiting: nothing is kept any more).
        state: Cell<usize>,
    }

    const BORROWED: usize = 1;
    const CLOSED: usize = 2;

    impl Entry {
        /// The kept communicator, if it is `key`'s at `epoch`, borrowed until
        /// [`Entry::give_back`].
        #[inline]
        pub(super) fn borrow(&self, key: usize, epoch: u64) -> Option<&CommInfo> {
            let p = self.info.get();
            if p.is_null() || self.key.get() != key || self.epoch.get() != epoch {
                return None;
            }
            if self.state.get() != 0 {
                return None;
            }
            self.state.set(BORROWED);
            // SAFETY: `p` came from `Arc::into_raw` and the entry holds its count until it is
            // replaced or cleared, which neither `keep` nor `close` does while borrowed; the
            // reference lives until `give_back`, which the callers call before returning.
            Some(unsafe { &*p })
        }

        /// Ends a borrow.
        #[inline]
        pub(super) fn give_back(&self) {
            self.state.set(0);
        }

        /// Keeps `info` as `key`'s at `epoch`, unless the entry is borrowed or closed.
        pub(super) fn keep(&self, key: usize, epoch: u64, info: &Arc<CommInfo>) {
            if self.state.get() != 0 || !guard::registered() {
                return;
            }
            let old = self.info.replace(Arc::into_raw(info.clone()));
            self.key.set(key);
            self.epoch.set(epoch);
            release(old);
        }

        /// Gives the kept count back and keeps nothing more: the thread is exiting.
        fn close(&self) {
            self.state.set(CLOSED);
            self.key.set(0);
            release(self.info.replace(std::ptr::null()));
        }
    }

    /// Gives back the count `p` holds (none for null).
    fn release(p: *const CommInfo) {
        if !p.is_null() {
            // SAFETY: `p` came from `Arc::into_raw` and its count was the entry's, which no
            // longer holds it.
            drop(unsafe { Arc::from_raw(p) });
        }
    }

    /// Gives the entry's count back when the thread exits.
    mod guard {
        struct Guard;

        impl Drop for Guard {
            fn drop(&mut self) {
                super::entry().close();
            }
        }

        thread_local! {
            static GUARD: Guard = const { Guard };
        }

        /// Whether the thread's guard is alive (made on first use), so that what the entry
        /// keeps is given back at the thread's exit.
        pub(super) fn registered() -> bool {
            GUARD.try_with(|_| ()).is_ok()
        }
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    mod tls {
        use super::Entry;

        // The entry's storage: 32 zero bytes in `.tbss` (every thread starts with a zeroed
        // copy), hidden (global to this library's objects, exported by none).
        std::arch::global_asm!(
            ".pushsection .tbss,\"awT\",@nobits",
            ".p2align 3",
            ".globl gyr_mpi_last_comm",
            ".hidden gyr_mpi_last_comm",
            ".type gyr_mpi_last_comm,@object",
            ".size gyr_mpi_last_comm,32",
            "gyr_mpi_last_comm:",
            ".zero 32",
            ".popsection",
        );

        const _: () = assert!(size_of::<Entry>() <= 32 && align_of::<Entry>() <= 8);

        /// The calling thread's entry.
        #[inline(always)]
        pub(in super::super) fn entry() -> &'static Entry {
            let p: *const Entry;
            // SAFETY: reads the entry's offset from the thread pointer (a GOT entry the loader
            // fills, initial-exec model) and adds the thread pointer (`%fs:0` holds its own
            // address on x86-64 Linux): this thread's copy of the 32 bytes above. No memory is
            // written; the addition changes the flags.
            unsafe {
                std::arch::asm!(
                    "mov {p}, qword ptr [rip + gyr_mpi_last_comm@GOTTPOFF]",
                    "add {p}, qword ptr fs:[0]",
                    p = out(reg) p,
                    options(nostack, readonly, pure),
                );
            }
            // SAFETY: the copy is this thread's, 8-byte aligned, zero-initialised (a valid
            // `Entry`: nothing kept, open) and lives as long as the thread; `Entry` is made of
            // `Cell`s and not `Sync`, and the reference never leaves this thread.
            unsafe { &*p }
        }
    }

    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    mod tls {
        use super::Entry;
        use std::cell::Cell;

        thread_local! {
            static ENTRY: Entry = const {
                Entry {
                    key: Cell::new(0),
                    epoch: Cell::new(0),
                    info: Cell::new(std::ptr::null()),
                    state: Cell::new(0),
                }
            };
        }

        /// The calling thread's entry.
        #[inline(always)]
        pub(in super::super) fn entry() -> &'static Entry {
            // SAFETY: the entry has no destructor and lives as long as the thread; the
            // reference never leaves this thread (see the x86-64 version).
            ENTRY.with(|e| unsafe { &*(e as *const Entry) })
        }
    }

    pub(super) use tls::entry;

    #[cfg(test)]
    pub(super) fn kept() -> Option<(usize, u64, *const CommInfo)> {
        let e = entry();
        let p = e.info.get();
        (!p.is_null()).then(|| (e.key.get(), e.epoch.get(), p))
    }
}

fn comm_in_table(comm: Comm) -> Option<Arc<CommInfo>> {
    if comm.is_null() || comm == ffi::COMM_NULL.get() {
        return None;
    }
    if let Some(info) = lock(&COMMS).as_ref().and_then(|t| t.get(&(comm as usize))) {
        return Some(info.clone());
    }
    let (peers, local) = members(comm);
    let mut parts = vec![u64::MAX];
    parts.extend(local.iter().map(|&r| u64::from(r)));
    let info = Arc::new(CommInfo {
        id: mix(&parts),
        peers,
        local,
        created: AtomicU64::new(0),
    });
    remember(comm, info.clone());
    Some(info)
}

/// MPI is initialised: remembers `MPI_COMM_WORLD` and `MPI_COMM_SELF`, and records the rank.
pub(crate) fn initialised() {
    let world = ffi::COMM_WORLD.get();
    let (mut rank, mut size) = (0, 0);
    // SAFETY: MPI_COMM_WORLD, valid after MPI_Init, and out-parameters.
    unsafe {
        ffi::comm_rank(world, &mut rank);
        ffi::comm_size(world, &mut size);
    }
    let rank = rank.max(0) as u32;
    WORLD_RANK.store(rank, Ordering::Relaxed);
    let all: Vec<u32> = (0..size.max(0) as u32).collect();
    let info = |id, peers: Vec<u32>| {
        Arc::new(CommInfo {
            id,
            peers: peers.clone(),
            local: peers,
            created: AtomicU64::new(0),
        })
    };
    remember(world, info(0, all));
    remember(ffi::COMM_SELF.get(), info(1, vec![rank]));
    let job = JOB.get().map_or("mpi", String::as_str);
    gyr::msg::init(job, rank, size.max(0) as u32);
}

/// Bytes of `count` elements of `datatype`.
pub(crate) fn bytes(count: c_int, datatype: Datatype) -> u64 {
    if count <= 0 {
        return 0;
    }
    let mut size: c_int = 0;
    // SAFETY: the program's datatype (valid for the call it came with) and an out-parameter.
    if unsafe { ffi::type_size(datatype, &mut size) } != ffi::SUCCESS {
        return 0;
    }
    count as u64 * size.max(0) as u64
}

/// Bytes of the sum of `n` counts at `counts`, of `datatype`.
///
/// # Safety
///
/// `counts` points at `n` ints (or is null).
pub(crate) unsafe fn bytes_of_counts(n: usize, counts: *const c_int, datatype: Datatype) -> u64 {
    if counts.is_null() || n == 0 {
        return 0;
    }
    // SAFETY: the caller's promise.
    let counts = unsafe { std::slice::from_raw_parts(counts, n) };
    let total: i64 = counts.iter().map(|&c| i64::from(c.max(0))).sum();
    bytes(1, datatype) * total as u64
}

/// A message to `dest` on `comm` begins: `gyr.msg.send` stamped `at` (nothing for
/// `MPI_PROC_NULL`).
pub(crate) fn sent(
    comm: Comm,
    dest: c_int,
    tag: c_int,
    count: c_int,
    datatype: Datatype,
    at: gyr::Stamp,
) {
    if dest == ffi::PROC_NULL {
        return;
    }
    let Some((id, peer)) = with_comm(comm, |info| (info.id, info.world(dest))) else {
        return;
    };
    if peer >= 0 {
        gyr::msg::send_on_at(id, peer as u32, tag, bytes(count, datatype), at);
    }
}

/// A receive on `info` completed with `status`: `gyr.msg.recv` with the actual source and tag,
/// stamped `at` (nothing for `MPI_PROC_NULL`).
fn received_on(info: &CommInfo, status: &Status, at: gyr::Stamp) {
    let peer = info.world(status.source);
    if peer >= 0 {
        gyr::msg::recv_on_at(info.id, peer as u32, status.tag, status.bytes(), at);
    }
}

/// The `gyr.msg.recv` of a blocking receive on `comm` completed with `status`, for the caller
/// to record; `None` for `MPI_PROC_NULL`.
pub(crate) fn recv_event(comm: Comm, status: &Status) -> Option<MsgRecv> {
    with_comm(comm, |info| {
        let peer = info.world(status.source);
        (peer >= 0).then(|| MsgRecv {
            peer: peer as u32,
            tag: status.tag,
            bytes: status.bytes(),
            comm: info.id,
        })
    })
    .flatten()
}

/// A blocking receive on `comm` completed with `status`, stamped `at`.
pub(crate) fn received(comm: Comm, status: &Status, at: gyr::Stamp) {
    with_comm(comm, |info| received_on(info, status, at));
}

/// A collective on `comm`: `gyr.mpi.collective`.
pub(crate) fn collective(
    call: &'static str,
    comm: Comm,
    root: Option<c_int>,
    sent: u64,
    received: u64,
) {
    with_comm(comm, |info| {
        gyr::emit(&MpiCollective {
            call,
            comm: info.id,
            root: root.map_or(-1, |r| info.root(r)),
            sent,
            received,
        })
    });
}

/// The size of `comm`'s local group, and this rank's rank in it.
pub(crate) fn size_and_rank(comm: Comm) -> (usize, c_int) {
    let size = with_comm(comm, CommInfo::size).unwrap_or(0);
    let mut rank: c_int = -1;
    // SAFETY: the program's communicator and an out-parameter.
    unsafe { ffi::comm_rank(comm, &mut rank) };
    (size, rank)
}

/// `new` was created from `parent` by `call` (collective over `parent`): counts the creation,
/// remembers `new` (unless `MPI_COMM_NULL`: this rank is not a member) and records it.
pub(crate) fn created(call: &'static str, parent: Comm, new: Comm) {
    let Some(parent) = self::comm(parent) else {
        return;
    };
    let n = parent.created.fetch_add(1, Ordering::Relaxed);
    if new.is_null() || new == ffi::COMM_NULL.get() {
        return;
    }
    let (peers, local) = members(new);
    let lowest = local.iter().copied().min().unwrap_or(u32::MAX);
    let info = Arc::new(CommInfo {
        id: mix(&[parent.id, n, u64::from(lowest)]),
        peers,
        local,
        created: AtomicU64::new(0),
    });
    const SHOWN: usize = 4096;
    let mut list = info
        .local
        .iter()
        .take(SHOWN)
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(",");
    if info.local.len() > SHOWN {
        list.push_str(",...");
    }
    gyr::emit(&MpiComm {
        call,
        comm: info.id,
        parent: parent.id,
        size: info.local.len() as u32,
        members: &list,
    });
    remember(new, info);
}

/// `comm` is about to be freed: forgets it and records its end.
pub(crate) fn freeing(comm: Comm) {
    let info = lock(&COMMS)
        .as_mut()
        .and_then(|t| t.remove(&(comm as usize)));
    COMMS_EPOCH.fetch_add(1, Ordering::Release);
    if let Some(info) = info {
        gyr::emit(&MpiCommFree { comm: info.id });
    }
}

/// A request remembered until it completes (or, persistent, until it is freed).
#[derive(Debug)]
struct Req {
    id: u64,
    recv: bool,
    persistent: bool,
    /// A persistent request between its start and its completion.
    active: bool,
    comm: Arc<CommInfo>,
    /// The peer as posted (a rank in `comm`).
    peer: c_int,
    tag: c_int,
    bytes: u64,
}

static REQUESTS: Mutex<Option<HashMap<usize, Req>>> = Mutex::new(None);
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

/// What a posting call says of its request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Posted {
    pub(crate) call: &'static str,
    pub(crate) recv: bool,
    pub(crate) persistent: bool,
    pub(crate) comm: Comm,
    pub(crate) peer: c_int,
    pub(crate) tag: c_int,
    pub(crate) count: c_int,
    pub(crate) datatype: Datatype,
}

/// A nonblocking call or a persistent request's init made `request`: remembers it, and for a
/// nonblocking call records `gyr.mpi.request` (a send's `gyr.msg.send` is recorded before the
/// call, by [`sent`]).
pub(crate) fn posted(p: Posted, request: Request) {
    let Some(info) = self::comm(p.comm) else {
        return;
    };
    let req = Req {
        id: NEXT_REQUEST.fetch_add(1, Ordering::Relaxed),
        recv: p.recv,
        persistent: p.persistent,
        active: false,
        comm: info,
        peer: p.peer,
        tag: p.tag,
        bytes: bytes(p.count, p.datatype),
    };
    if !p.persistent {
        emit_request(p.call, &req);
    }
    let mut t = lock(&REQUESTS);
    let t = t.get_or_insert_with(HashMap::new);
    if t.len() >= MAX_REQUESTS && !t.contains_key(&(request as usize)) {
        REQUEST_OVERFLOWS.fetch_add(1, Ordering::Relaxed);
        return;
    }
    t.insert(request as usize, req);
}

fn emit_request(call: &'static str, r: &Req) {
    gyr::emit(&MpiRequest {
        request: r.id,
        call,
        recv: r.recv,
        peer: r.comm.world(r.peer),
        tag: r.tag,
        bytes: r.bytes,
        comm: r.comm.id,
    });
}

/// Persistent `request` was started by `call`: `gyr.mpi.request`, and a send's `gyr.msg.send`.
pub(crate) fn started(call: &'static str, request: Request) {
    let mut t = lock(&REQUESTS);
    let Some(r) = t.as_mut().and_then(|t| t.get_mut(&(request as usize))) else {
        return;
    };
    r.active = true;
    emit_request(call, r);
    if !r.recv && r.peer != ffi::PROC_NULL {
        let peer = r.comm.world(r.peer);
        if peer >= 0 {
            gyr::msg::send_on(r.comm.id, peer as u32, r.tag, r.bytes);
        }
    }
}

/// `request` (its handle before the completing call) completed with `status`:
/// `gyr.mpi.complete`, and a receive's `gyr.msg.recv`, both stamped `at`.
pub(crate) fn completed(request: Request, status: &Status, at: gyr::Stamp) {
    let key = request as usize;
    let mut t = lock(&REQUESTS);
    let Some(t) = t.as_mut() else { return };
    let (id, recv, comm) = match t.get_mut(&key) {
        None => return,
        Some(r) if r.persistent => {
            if !r.active {
                // An inactive persistent request completes at once, with nothing to record.
                return;
            }
            r.active = false;
            (r.id, r.recv, r.comm.clone())
        }
        Some(_) => {
            let r = t.remove(&key).expect("found above");
            (r.id, r.recv, r.comm)
        }
    };
    let mut cancelled: c_int = 0;
    // SAFETY: a status the MPI library filled, and an out-parameter.
    unsafe { ffi::test_cancelled(status, &mut cancelled) };
    gyr::emit_at(
        &MpiComplete {
            request: id,
            cancelled: cancelled != 0,
        },
        at,
    );
    if recv && cancelled == 0 {
        received_on(&comm, status, at);
    }
}

/// `request` is freed (`MPI_Request_free`): forgets it.
pub(crate) fn freed(request: Request) {
    if let Some(t) = lock(&REQUESTS).as_mut() {
        t.remove(&(request as usize));
    }
}

/// Whether `request` is one to follow (not `MPI_REQUEST_NULL`).
pub(crate) fn live(request: Request) -> bool {
    !request.is_null() && request != ffi::REQUEST_NULL.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that change the communicator table, whose epoch each one's
    /// expectations follow.
    static TABLE: Mutex<()> = Mutex::new(());

    fn info(id: u64) -> Arc<CommInfo> {
        Arc::new(CommInfo {
            id,
            peers: vec![5, 6],
            local: vec![5, 6],
            created: AtomicU64::new(0),
        })
    }

    #[test]
    fn a_thread_never_keeps_a_freed_handle_s_communicator() {
        let _table = lock(&TABLE);
        // Handles MPI never makes (not real memory: only compared).
        let (a, b) = (0x7100 as Comm, 0x7200 as Comm);
        remember(a, info(10));
        remember(b, info(20));
        assert_eq!(with_comm(a, |i| i.id), Some(10));
        assert_eq!(
            with_comm(a, |i| i.world(1)),
            Some(6),
            "the thread's last, again"
        );
        assert_eq!(with_comm(b, |i| i.id), Some(20));
        // `a` is freed and MPI hands the same handle out for a new communicator.
        assert_eq!(with_comm(a, |i| i.id), Some(10));
        freeing(a);
        // Freed: looked up afresh (here, without an MPI library, as a communicator of no
        // members), not the thread's last.
        assert_ne!(with_comm(a, |i| i.id), Some(10));
        freeing(a);
        remember(a, info(30));
        assert_eq!(with_comm(a, |i| i.id), Some(30));
        assert_eq!(comm(a).map(|i| i.id), Some(30));
        // Another thread sees the same.
        let handle = a as usize;
        let seen = std::thread::spawn(move || with_comm(handle as Comm, |i| i.id))
            .join()
            .unwrap();
        assert_eq!(seen, Some(30));
        freeing(a);
        freeing(b);
    }

    /// The entry's `unsafe` (a counted reference kept in the static TLS block): the count it
    /// holds is given back when it is replaced and when its thread exits, a borrowed entry is
    /// never replaced, and every thread starts with an empty entry of its own.
    #[test]
    fn the_last_communicator_s_count_is_given_back() {
        let _table = lock(&TABLE);
        let (a, b) = (0x7300 as Comm, 0x7400 as Comm);
        let (ia, ib) = (info(40), info(50));
        remember(a, ia.clone());
        remember(b, ib.clone());
        // The table's count and ours.
        assert_eq!((Arc::strong_count(&ia), Arc::strong_count(&ib)), (2, 2));
        let (ha, hb) = (a as usize, b as usize);
        let seen = std::thread::spawn(move || {
            assert!(last::kept().is_none(), "a new thread keeps nothing");
            let (a, b) = (ha as Comm, hb as Comm);
            assert_eq!(with_comm(a, |i| i.id), Some(40));
            assert_eq!(last::kept().map(|(k, _, _)| k), Some(ha));
            // Looked up while the entry is borrowed: found, and the entry left as it is.
            let nested = with_comm(a, |_| with_comm(b, |i| i.id));
            assert_eq!(nested, Some(Some(50)));
            assert_eq!(last::kept().map(|(k, _, _)| k), Some(ha));
            let counts = comm(a).map(|i| Arc::strong_count(&i));
            // Replaced: `a`'s count given back, `b`'s kept.
            assert_eq!(with_comm(b, |i| i.id), Some(50));
            counts
        })
        .join()
        .unwrap();
        // The table, ours, the thread's entry and the `Arc` `comm` returned.
        assert_eq!(seen, Some(4));
        // The thread has exited: both counts given back.
        assert_eq!((Arc::strong_count(&ia), Arc::strong_count(&ib)), (2, 2));
        // Forgotten from the table: the entry's count is the last besides ours, and a
        // lookup after the epoch moved does not take the old one.
        assert_eq!(with_comm(a, |i| i.id), Some(40));
        assert_eq!(Arc::strong_count(&ia), 3);
        freeing(a);
        assert_eq!(Arc::strong_count(&ia), 2);
        assert_ne!(with_comm(a, |i| i.id), Some(40));
        assert_eq!(Arc::strong_count(&ia), 1, "replaced: given back");
        freeing(a);
        freeing(b);
    }

    #[test]
    fn ids_are_stable_and_never_the_predefined_ones() {
        assert_eq!(mix(&[0, 0, 3]), mix(&[0, 0, 3]));
        assert_ne!(mix(&[0, 0, 3]), mix(&[0, 0, 2]));
        assert_ne!(mix(&[0, 1, 0]), mix(&[0, 0, 0]));
        for i in 0..1000 {
            assert!(mix(&[i]) > 1);
        }
    }

    #[test]
    fn peers_map_to_world_ranks() {
        let c = CommInfo {
            id: 7,
            peers: vec![1, 3],
            local: vec![1, 3],
            created: AtomicU64::new(0),
        };
        assert_eq!(c.world(1), 3);
        assert_eq!(c.world(ffi::ANY_SOURCE), -1);
        assert_eq!(c.world(ffi::PROC_NULL), -2);
        assert_eq!(c.world(2), -3);
        assert_eq!(c.root(0), 1);
    }
}
