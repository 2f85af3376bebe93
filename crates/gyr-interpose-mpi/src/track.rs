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
//! # Bounds
//!
//! At most [`MAX_COMMS`] communicators and [`MAX_REQUESTS`] pending requests are remembered. A
//! request that finds no room is not followed to its completion (its receive is not recorded);
//! a communicator that finds none is looked up again at each use. Both are counted and reported
//! at exit.

use crate::events::{MpiCollective, MpiComm, MpiCommFree, MpiComplete, MpiRequest};
use crate::ffi::{self, Comm, Datatype, Request, Status};
use libc::c_int;
use std::cell::RefCell;
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

thread_local! {
    /// The calling thread's last lookup: the handle, the epoch when it was looked up, and what
    /// it found.
    static LAST_COMM: RefCell<Option<(usize, u64, Arc<CommInfo>)>> = const { RefCell::new(None) };
}

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
    let key = comm as usize;
    let mut f = Some(f);
    let hit = LAST_COMM.try_with(|last| {
        let last = last.try_borrow().ok()?;
        match last.as_ref() {
            Some((k, e, info)) if *k == key && *e == epoch => f.take().map(|f| f(info)),
            _ => None,
        }
    });
    if let Ok(Some(r)) = hit {
        return Some(r);
    }
    let info = comm_at(comm, epoch)?;
    f.take().map(|f| f(&info))
}

/// What is known of `comm` (looked up through its groups when first seen); `None` for
/// `MPI_COMM_NULL`.
pub(crate) fn comm(comm: Comm) -> Option<Arc<CommInfo>> {
    let epoch = COMMS_EPOCH.load(Ordering::Acquire);
    let key = comm as usize;
    let hit = LAST_COMM.try_with(|last| {
        let last = last.try_borrow().ok()?;
        match last.as_ref() {
            Some((k, e, info)) if *k == key && *e == epoch => Some(info.clone()),
            _ => None,
        }
    });
    if let Ok(Some(info)) = hit {
        return Some(info);
    }
    comm_at(comm, epoch)
}

/// [`comm`] from the table, kept as the thread's last lookup with `epoch` (read before the
/// table, so that a change meanwhile makes the entry stale rather than wrong).
fn comm_at(comm: Comm, epoch: u64) -> Option<Arc<CommInfo>> {
    let info = comm_in_table(comm)?;
    let _ = LAST_COMM.try_with(|last| {
        if let Ok(mut last) = last.try_borrow_mut() {
            *last = Some((comm as usize, epoch, info.clone()));
        }
    });
    Some(info)
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

/// A message to `dest` on `comm` begins: `gyr.msg.send` (nothing for `MPI_PROC_NULL`).
pub(crate) fn sent(comm: Comm, dest: c_int, tag: c_int, count: c_int, datatype: Datatype) {
    if dest == ffi::PROC_NULL {
        return;
    }
    let Some((id, peer)) = with_comm(comm, |info| (info.id, info.world(dest))) else {
        return;
    };
    if peer >= 0 {
        gyr::msg::send_on(id, peer as u32, tag, bytes(count, datatype));
    }
}

/// A receive on `info` completed with `status`: `gyr.msg.recv` with the actual source and tag
/// (nothing for `MPI_PROC_NULL`).
fn received_on(info: &CommInfo, status: &Status) {
    let peer = info.world(status.source);
    if peer >= 0 {
        gyr::msg::recv_on(info.id, peer as u32, status.tag, status.bytes());
    }
}

/// A blocking receive on `comm` completed with `status`.
pub(crate) fn received(comm: Comm, status: &Status) {
    with_comm(comm, |info| received_on(info, status));
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
/// `gyr.mpi.complete`, and a receive's `gyr.msg.recv`.
pub(crate) fn completed(request: Request, status: &Status) {
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
    gyr::emit(&MpiComplete {
        request: id,
        cancelled: cancelled != 0,
    });
    if recv && cancelled == 0 {
        received_on(&comm, status);
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
