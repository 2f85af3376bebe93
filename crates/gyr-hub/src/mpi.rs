//! The live MPI views of a job: time in MPI per rank and per call, the communication matrix,
//! and late senders and late receivers as they happen, computed from the message events
//! (`gyr::msg`) and the MPI interposer's events of every program that announced itself as a
//! rank (`gyr.msg.rank`).
//!
//! # Where the events come from
//!
//! Each rank is a program of its own, with its own lock in the hub. While a batch is taken in,
//! the program decodes its MPI events ([`event`]) into a short list; the hub then hands them,
//! under this analysis's one lock, to [`Mpi::take`] (lock order: a program, then this). A
//! program's events count only after its `gyr.msg.rank`: that is what puts it in a job.
//!
//! # Time base
//!
//! Events carry their program's clock; the analysis puts every rank on wall-clock time through
//! the program's anchor (the wall-clock time of its timestamp 0, as the hub keeps it for trace
//! files), so that a send on one rank can be compared with a receive on another. Clocks that
//! are not synchronised (other hosts, or an anchor taken from a program's start time when the
//! hub attached rather than was pushed to) blur the wait times by their offset; a receive that
//! seems to complete before its send began is counted as a clock violation, not as a wait.
//! `gyr trace clock` corrects the recordings afterwards from the same message pairs.
//!
//! # Matching and the late-message patterns
//!
//! The n-th send from A to B on a communicator with a tag is received by B's n-th receive
//! from A with the same communicator and tag (MPI's non-overtaking rule). Whichever side
//! arrives first waits in its channel's queue. For a matched pair:
//! - **late sender**: the receive's call (`MPI_Recv`, or the `MPI_Wait*` that completed an
//!   `MPI_Irecv`) began before the send began; the receiver waited `send start − receive call
//!   start`;
//! - **late receiver**: a synchronous send (`MPI_Ssend`), or a blocking send of at least
//!   [`RENDEZVOUS_BYTES`] (rendezvous protocol), began before the receive was posted
//!   (`MPI_Recv`'s start, or `MPI_Irecv`'s); the sender waited `receive posted − send start`.
//!
//! # Bounds
//!
//! At most [`MAX_JOBS`] jobs, [`MAX_RANKS`] ranks per job, [`MAX_PAIRS`] rank pairs per job in
//! the matrix and the late-message tables, [`MAX_CHANNELS`] channels with unmatched messages
//! per job, each holding at most [`MAX_PENDING`], [`MAX_CALLS`] call names per rank,
//! [`MAX_REQUESTS`] open receive requests and [`MAX_THREADS`] threads in a call per rank, and
//! the [`RECENT`] latest late messages. What is dropped to stay within them is counted.
//!
//! # Per-rank timelines
//!
//! Each job also keeps its ranks' timelines ([`crate::rank_timeline`]): the calls as they end
//! and the messages as they are matched here, drawn as Falcon's life-time view with a row per
//! rank ([`Mpi::tile_of`], `/api/mpi/timeline`).

use crate::protocol::{MpiCallTime, MpiCell, MpiLate, MpiLatePair, MpiRankView, MpiView, RankTile};
use crate::rank_timeline::{JobSpan, RankSpan, RankTimeline};
use gyr_core::{Schema, Value};
use indexmap::IndexMap;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Jobs kept; past it the job quiet the longest is forgotten.
pub(crate) const MAX_JOBS: usize = 16;
/// Ranks kept per job (each costs a few KiB besides its calls).
pub(crate) const MAX_RANKS: usize = 4096;
/// Rank pairs kept per job in the communication matrix, and in each late-message table.
pub(crate) const MAX_PAIRS: usize = 1 << 16;
/// Channels (sender, receiver, communicator, tag) with unmatched messages kept per job.
pub(crate) const MAX_CHANNELS: usize = 1 << 16;
/// Unmatched messages kept per channel; past it the oldest is dropped (and the channel's
/// later matches may pair the wrong messages: counted in `dropped`).
pub(crate) const MAX_PENDING: usize = 1024;
/// Call names kept per rank; further calls are summed under `other`.
pub(crate) const MAX_CALLS: usize = 64;
/// Receive requests posted and not yet completed kept per rank.
pub(crate) const MAX_REQUESTS: usize = 1 << 14;
/// Threads per rank whose open MPI call is kept.
pub(crate) const MAX_THREADS: usize = 256;
/// Late messages kept in the list of the latest.
pub(crate) const RECENT: usize = 100;
/// Bytes from which a blocking standard send is taken to use the rendezvous protocol (Open
/// MPI's TCP eager limit): lower, and an eager send's wait for nobody is counted; higher, and
/// a rendezvous send's wait is missed.
pub(crate) const RENDEZVOUS_BYTES: u64 = 64 * 1024;
/// Late-message pairs each table of a view lists, the longest waits first.
const VIEW_PAIRS: usize = 200;

/// Which MPI event an event type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Rank,
    Send,
    Recv,
    Begin,
    End,
    Request,
    Complete,
    Collective,
}

/// The kind of the event type `name`, if the MPI views read it.
pub(crate) fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        "gyr.msg.rank" => Kind::Rank,
        "gyr.msg.send" => Kind::Send,
        "gyr.msg.recv" => Kind::Recv,
        "gyr.mpi.begin" => Kind::Begin,
        "gyr.mpi.end" => Kind::End,
        "gyr.mpi.request" => Kind::Request,
        "gyr.mpi.complete" => Kind::Complete,
        "gyr.mpi.collective" => Kind::Collective,
        _ => return None,
    })
}

/// One event the MPI views read, decoded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Event {
    /// This program is rank `rank` of `size` in `job`.
    Rank { job: String, rank: u32, size: u32 },
    /// A message to `peer` begins to leave.
    Send {
        peer: u32,
        tag: i32,
        bytes: u64,
        comm: u64,
    },
    /// A message from `peer` arrived.
    Recv {
        peer: u32,
        tag: i32,
        bytes: u64,
        comm: u64,
    },
    /// An MPI call begins.
    Begin { call: String },
    /// An MPI call returned.
    End { call: String },
    /// A request was posted.
    Request { request: u64, recv: bool },
    /// A request completed.
    Complete { request: u64 },
    /// This rank took part in a collective.
    Collective { sent: u64, received: u64 },
}

/// Decodes an event of kind `k` from its values; `None` when they are not what the contract
/// says (a program defining its own type under one of these names).
pub(crate) fn event(k: Kind, schema: &Schema, values: &[Value]) -> Option<Event> {
    let get = |name: &str| schema.field_index(name).and_then(|i| values.get(i));
    let uint = |name: &str| match get(name)? {
        Value::UInt(v) => Some(*v),
        Value::Int(v) => u64::try_from(*v).ok(),
        _ => None,
    };
    let int = |name: &str| match get(name)? {
        Value::Int(v) => i32::try_from(*v).ok(),
        Value::UInt(v) => i32::try_from(*v).ok(),
        _ => None,
    };
    let text = |name: &str| match get(name)? {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    };
    let peer = || u32::try_from(uint("peer")?).ok();
    Some(match k {
        Kind::Rank => Event::Rank {
            job: text("job")?,
            rank: u32::try_from(uint("rank")?).ok()?,
            size: u32::try_from(uint("size")?).ok()?,
        },
        Kind::Send => Event::Send {
            peer: peer()?,
            tag: int("tag")?,
            bytes: uint("bytes")?,
            comm: uint("comm")?,
        },
        Kind::Recv => Event::Recv {
            peer: peer()?,
            tag: int("tag")?,
            bytes: uint("bytes")?,
            comm: uint("comm")?,
        },
        Kind::Begin => Event::Begin {
            call: text("call")?,
        },
        Kind::End => Event::End {
            call: text("call")?,
        },
        Kind::Request => Event::Request {
            request: uint("request")?,
            recv: matches!(get("recv")?, Value::Bool(true)),
        },
        Kind::Complete => {
            if matches!(get("cancelled"), Some(Value::Bool(true))) {
                return None;
            }
            Event::Complete {
                request: uint("request")?,
            }
        }
        Kind::Collective => Event::Collective {
            sent: uint("sent")?,
            received: uint("received")?,
        },
    })
}

/// Whether `call` (as the C or Fortran binding spells it) is a blocking synchronous send.
fn synchronous(call: &str) -> bool {
    let c = call.to_ascii_lowercase();
    let c = c.trim_end_matches('_');
    c == "mpi_ssend"
}

/// Whether `call` is a blocking standard send.
fn blocking_send(call: &str) -> bool {
    let c = call.to_ascii_lowercase();
    c.trim_end_matches('_') == "mpi_send"
}

/// A send waiting for its receive.
#[derive(Debug, Clone, Copy)]
struct SendRec {
    /// When the message began to leave (wall-clock ns).
    start: i64,
    /// When the send's call began.
    call_begin: i64,
    /// Whether the sender waits for the receiver (synchronous or rendezvous).
    waits: bool,
    bytes: u64,
}

/// A receive waiting for its send.
#[derive(Debug, Clone, Copy)]
struct RecvRec {
    /// When the receive's call (the one it completed in) began.
    call_begin: i64,
    /// When the receive was posted.
    posted: i64,
    /// When it completed.
    end: i64,
    call: &'static str,
}

/// Unmatched messages of one channel: at most one side is non-empty.
#[derive(Debug, Default)]
struct Pending {
    sends: VecDeque<SendRec>,
    recvs: VecDeque<RecvRec>,
}

/// (sender, receiver, communicator, tag).
type Channel = (u32, u32, u64, i32);

/// Count and total wait of one kind of late message between two ranks.
#[derive(Debug, Default, Clone, Copy)]
struct Waits {
    count: u64,
    ns: i64,
}

/// A thread's MPI call in progress, and what its last completed receive request said.
#[derive(Debug, Default)]
struct ThreadCall {
    open: Option<(String, i64)>,
    /// The posting time of the receive request that completed last in the open call.
    completed_recv_posted: Option<i64>,
}

/// Time in one call.
#[derive(Debug, Default, Clone, Copy)]
struct CallTime {
    count: u64,
    ns: i64,
}

/// One rank of a job.
#[derive(Debug)]
struct Rank {
    pid: u32,
    /// Wall-clock ns of its first and latest event.
    first: i64,
    last: i64,
    /// Whether its `MPI_Finalize` returned: its row of the timeline ends there.
    finalized: bool,
    /// Whether its process is gone (with its last batch taken in): its row ends at `last`.
    gone: bool,
    in_mpi: i64,
    calls: IndexMap<String, CallTime>,
    threads: HashMap<u64, ThreadCall>,
    /// Receive requests posted and not yet completed: request → when posted.
    recv_requests: HashMap<u64, i64>,
    sent_bytes: u64,
    sent_messages: u64,
    received_bytes: u64,
    received_messages: u64,
    collective_bytes: u64,
}

impl Rank {
    fn new(pid: u32, t: i64) -> Self {
        Rank {
            pid,
            first: t,
            last: t,
            finalized: false,
            gone: false,
            in_mpi: 0,
            calls: IndexMap::new(),
            threads: HashMap::new(),
            recv_requests: HashMap::new(),
            sent_bytes: 0,
            sent_messages: 0,
            received_bytes: 0,
            received_messages: 0,
            collective_bytes: 0,
        }
    }

    fn thread(&mut self, thread: u64) -> Option<&mut ThreadCall> {
        if !self.threads.contains_key(&thread) && self.threads.len() >= MAX_THREADS {
            // A thread with no call open is the cheapest to forget.
            let idle = self
                .threads
                .iter()
                .find(|(_, c)| c.open.is_none())
                .map(|(k, _)| *k)?;
            self.threads.remove(&idle);
        }
        Some(self.threads.entry(thread).or_default())
    }

    fn add_call(&mut self, call: &str, ns: i64) {
        let key = if self.calls.contains_key(call) || self.calls.len() < MAX_CALLS - 1 {
            call
        } else {
            "other"
        };
        let c = self.calls.entry(key.to_owned()).or_default();
        c.count += 1;
        c.ns += ns;
        self.in_mpi += ns;
    }
}

/// One late message, as the list of the latest shows it.
#[derive(Debug, Clone)]
struct Instance {
    late_sender: bool,
    sender: u32,
    receiver: u32,
    tag: i32,
    comm: u64,
    bytes: u64,
    wait: i64,
    at: i64,
    call: &'static str,
}

/// One job's analysis.
#[derive(Debug, Default)]
struct Job {
    size: u32,
    ranks: BTreeMap<u32, Rank>,
    matrix: HashMap<(u32, u32), (u64, u64)>,
    channels: HashMap<Channel, Pending>,
    late_senders: HashMap<(u32, u32), Waits>,
    late_receivers: HashMap<(u32, u32), Waits>,
    recent: VecDeque<Instance>,
    matched: u64,
    /// Unmatched messages dropped past [`MAX_PENDING`] or [`MAX_CHANNELS`].
    dropped: u64,
    /// Pairs past [`MAX_PAIRS`] left out of the matrix or the tables.
    pairs_dropped: u64,
    /// Matched pairs whose receive completed before the send began (clocks apart).
    clock_violations: u64,
    /// Events of ranks past [`MAX_RANKS`], and calls or requests past their bounds.
    ignored: u64,
    last: i64,
    /// The ranks' timelines.
    timeline: RankTimeline,
}

/// Adds to the counts of pair `k` in `m`, unless that would pass [`MAX_PAIRS`].
fn bump<'a, V: Default>(
    m: &'a mut HashMap<(u32, u32), V>,
    k: (u32, u32),
    dropped: &mut u64,
) -> Option<&'a mut V> {
    if !m.contains_key(&k) && m.len() >= MAX_PAIRS {
        *dropped += 1;
        return None;
    }
    Some(m.entry(k).or_default())
}

impl Job {
    fn take(&mut self, rank: u32, thread: u64, t: i64, e: Event) {
        self.last = self.last.max(t);
        let Some(r) = self.ranks.get_mut(&rank) else {
            return;
        };
        r.last = r.last.max(t);
        match e {
            Event::Rank { .. } => {}
            Event::Begin { call } => {
                // Known before it ends: a call still open is drawn under its name.
                self.timeline.intern(&call);
                if let Some(c) = r.thread(thread) {
                    c.open = Some((call, t));
                    c.completed_recv_posted = None;
                }
            }
            Event::End { call } => {
                let open = r.threads.get_mut(&thread).and_then(|c| {
                    c.completed_recv_posted = None;
                    c.open.take()
                });
                if let Some((name, begin)) = open
                    && name == call
                {
                    r.add_call(&name, t.saturating_sub(begin).max(0));
                    self.timeline.segment(rank, begin, t, &name);
                    r.finalized |= name
                        .trim_end_matches('_')
                        .eq_ignore_ascii_case("mpi_finalize");
                }
            }
            Event::Request { request, recv } => {
                if recv {
                    if r.recv_requests.len() >= MAX_REQUESTS
                        && !r.recv_requests.contains_key(&request)
                    {
                        self.ignored += 1;
                    } else {
                        r.recv_requests.insert(request, t);
                    }
                }
            }
            Event::Complete { request } => {
                if let Some(posted) = r.recv_requests.remove(&request)
                    && let Some(c) = r.thread(thread)
                {
                    c.completed_recv_posted = Some(posted);
                }
            }
            Event::Collective { sent, received } => {
                r.collective_bytes += sent + received;
            }
            Event::Send {
                peer,
                tag,
                bytes,
                comm,
            } => {
                r.sent_bytes += bytes;
                r.sent_messages += 1;
                let (call, call_begin) = match r.threads.get(&thread).and_then(|c| c.open.as_ref())
                {
                    Some((call, begin)) => (call.as_str(), *begin),
                    None => ("", t),
                };
                let waits = synchronous(call) || (blocking_send(call) && bytes >= RENDEZVOUS_BYTES);
                if let Some(cell) = bump(&mut self.matrix, (rank, peer), &mut self.pairs_dropped) {
                    cell.0 += bytes;
                    cell.1 += 1;
                }
                let s = SendRec {
                    start: t,
                    call_begin,
                    waits,
                    bytes,
                };
                let ch = (rank, peer, comm, tag);
                match self.channels.get_mut(&ch).and_then(|p| p.recvs.pop_front()) {
                    Some(rv) => {
                        self.forget_if_empty(ch);
                        self.matched(ch, s, rv);
                    }
                    None => self.queue(ch, |p| push_bounded(&mut p.sends, s)),
                }
            }
            Event::Recv {
                peer,
                tag,
                bytes,
                comm,
            } => {
                r.received_bytes += bytes;
                r.received_messages += 1;
                let c = r.threads.get(&thread);
                let (call, call_begin) = match c.and_then(|c| c.open.as_ref()) {
                    Some((call, begin)) => (call.as_str(), *begin),
                    None => ("", t),
                };
                let posted = c
                    .and_then(|c| c.completed_recv_posted)
                    .unwrap_or(call_begin);
                let rv = RecvRec {
                    call_begin,
                    posted,
                    end: t,
                    call: call_name(call),
                };
                let ch = (peer, rank, comm, tag);
                match self.channels.get_mut(&ch).and_then(|p| p.sends.pop_front()) {
                    Some(s) => {
                        self.forget_if_empty(ch);
                        self.matched(ch, s, rv);
                    }
                    None => self.queue(ch, |p| push_bounded(&mut p.recvs, rv)),
                }
            }
        }
    }

    fn forget_if_empty(&mut self, ch: Channel) {
        if self
            .channels
            .get(&ch)
            .is_some_and(|p| p.sends.is_empty() && p.recvs.is_empty())
        {
            self.channels.remove(&ch);
        }
    }

    /// Queues an unmatched message on `ch`, within the bounds.
    fn queue(&mut self, ch: Channel, push: impl FnOnce(&mut Pending) -> bool) {
        if !self.channels.contains_key(&ch) && self.channels.len() >= MAX_CHANNELS {
            self.dropped += 1;
            return;
        }
        if push(self.channels.entry(ch).or_default()) {
            self.dropped += 1;
        }
    }

    fn matched(&mut self, (src, dst, comm, tag): Channel, s: SendRec, r: RecvRec) {
        self.matched += 1;
        self.timeline
            .message(src, dst, s.start, r.end, s.bytes, tag);
        let late = |late_sender: bool, wait: i64, at: i64, call: &'static str, this: &mut Job| {
            let table = if late_sender {
                &mut this.late_senders
            } else {
                &mut this.late_receivers
            };
            if let Some(w) = bump(table, (src, dst), &mut this.pairs_dropped) {
                w.count += 1;
                w.ns += wait;
            }
            if this.recent.len() >= RECENT {
                this.recent.pop_front();
            }
            this.recent.push_back(Instance {
                late_sender,
                sender: src,
                receiver: dst,
                tag,
                comm,
                bytes: s.bytes,
                wait,
                at,
                call,
            });
        };
        if s.start > r.end {
            self.clock_violations += 1;
        } else if s.start > r.call_begin {
            late(true, s.start - r.call_begin, s.start, r.call, self);
        }
        if s.waits && r.posted > s.call_begin {
            late(false, r.posted - s.call_begin, r.posted, "send", self);
        }
    }
}

/// Pushes `x`, dropping the oldest past [`MAX_PENDING`]; returns whether one was dropped.
fn push_bounded<T>(q: &mut VecDeque<T>, x: T) -> bool {
    let full = q.len() >= MAX_PENDING;
    if full {
        q.pop_front();
    }
    q.push_back(x);
    full
}

/// The names receive calls are shown under; others show as `MPI call`.
fn call_name(call: &str) -> &'static str {
    const KNOWN: [&str; 10] = [
        "MPI_Recv",
        "MPI_Wait",
        "MPI_Waitall",
        "MPI_Waitany",
        "MPI_Waitsome",
        "MPI_Sendrecv",
        "MPI_Sendrecv_replace",
        "MPI_Test",
        "MPI_Testall",
        "MPI_Mrecv",
    ];
    let c = call.trim_end_matches('_');
    KNOWN
        .iter()
        .find(|k| k.eq_ignore_ascii_case(c))
        .copied()
        .unwrap_or(if call.is_empty() {
            "receive"
        } else {
            "MPI call"
        })
}

/// Every job's MPI analysis.
#[derive(Debug, Default)]
pub(crate) struct Mpi {
    jobs: IndexMap<String, Job>,
    /// Which job and rank each program is.
    ranks: HashMap<u32, (String, u32)>,
    /// Jobs forgotten to stay within [`MAX_JOBS`].
    pub(crate) jobs_forgotten: u64,
}

impl Mpi {
    /// Takes in one event of program `pid` on `thread` at `ts` ns of its clock, whose
    /// timestamp 0 is `clock_zero_unix_ns` on the wall clock.
    pub(crate) fn take(
        &mut self,
        pid: u32,
        clock_zero_unix_ns: u64,
        thread: u64,
        ts: u64,
        e: Event,
    ) {
        let t = (clock_zero_unix_ns as i64).saturating_add(ts as i64);
        if let Event::Rank { job, rank, size } = &e {
            self.announce(pid, job, *rank, *size, t);
            return;
        }
        let Some((job, rank)) = self.ranks.get(&pid) else {
            return;
        };
        let rank = *rank;
        if let Some(j) = self.jobs.get_mut(job.as_str()) {
            j.take(rank, thread, t, e);
        }
    }

    fn announce(&mut self, pid: u32, job: &str, rank: u32, size: u32, t: i64) {
        if !self.jobs.contains_key(job) && self.jobs.len() >= MAX_JOBS {
            let quiet = self
                .jobs
                .iter()
                .min_by_key(|(_, j)| j.last)
                .map(|(k, _)| k.clone())
                .expect("at least one job");
            self.jobs.shift_remove(&quiet);
            self.ranks.retain(|_, (j, _)| *j != quiet);
            self.jobs_forgotten += 1;
        }
        let j = self.jobs.entry(job.to_owned()).or_default();
        j.size = j.size.max(size);
        j.last = j.last.max(t);
        if !j.ranks.contains_key(&rank) && j.ranks.len() >= MAX_RANKS {
            j.ignored += 1;
            return;
        }
        // A rank announced again (the job run again under its name) starts afresh.
        if let Some(old) = j.ranks.insert(rank, Rank::new(pid, t))
            && old.pid != pid
        {
            self.ranks.remove(&old.pid);
            j.timeline.forget_rank(rank);
        }
        self.ranks.insert(pid, (job.to_owned(), rank));
    }

    /// Program `pid` is gone and everything it sent was taken in: if it was a rank, its row
    /// of the timeline ends at its last event (a rank killed in a call no longer shows as in
    /// it).
    pub(crate) fn gone(&mut self, pid: u32) {
        let Some((job, rank)) = self.ranks.get(&pid) else {
            return;
        };
        if let Some(r) = self
            .jobs
            .get_mut(job.as_str())
            .and_then(|j| j.ranks.get_mut(rank))
            .filter(|r| r.pid == pid)
        {
            r.gone = true;
        }
    }

    /// The job program `pid` is a rank of, as a page shows it.
    pub(crate) fn view_of(&self, pid: u32) -> Option<MpiView> {
        let (job, _) = self.ranks.get(&pid)?;
        Some(self.view(job))
    }

    /// The per-rank timelines of the job program `pid` is a rank of: rows `rows` (ranks in rank
    /// order), `[t0_s, t1_s)` seconds from the job's origin (`t1_s` `None`: up to its latest
    /// event; `t0_s` given `t1_s`), `width` pixels wide, at most `max_arrows` messages.
    pub(crate) fn tile_of(
        &self,
        pid: u32,
        rows: std::ops::Range<usize>,
        t0_s: impl FnOnce(f64) -> f64,
        t1_s: Option<f64>,
        width: usize,
        max_arrows: usize,
    ) -> Option<RankTile> {
        let (job, _) = self.ranks.get(&pid)?;
        let j = self.jobs.get(job)?;
        let origin = j.ranks.values().map(|r| r.first).min().unwrap_or(0);
        let first = rows.start.min(j.ranks.len());
        let ranks = j
            .ranks
            .iter()
            .skip(first)
            .take(rows.end.saturating_sub(first))
            .map(|(&rank, r)| RankSpan {
                rank,
                first: r.first,
                last: r.last,
                finalized: r.finalized,
                gone: r.gone,
                open: r
                    .threads
                    .values()
                    .filter_map(|c| c.open.as_ref().map(|(call, begin)| (*begin, call.as_str())))
                    .collect(),
            })
            .collect();
        let t1_s = t1_s.unwrap_or(j.last.saturating_sub(origin) as f64 / 1e9);
        let t0_s = t0_s(t1_s);
        let span = JobSpan {
            job,
            size: j.size,
            origin,
            now: j.last,
            total_rows: j.ranks.len(),
            first_row: first,
            ranks,
        };
        Some(j.timeline.tile(span, t0_s, t1_s, width, max_arrows))
    }

    /// Job `name`'s view (empty if unknown).
    pub(crate) fn view(&self, name: &str) -> MpiView {
        let Some(j) = self.jobs.get(name) else {
            return MpiView {
                job: name.to_owned(),
                ..MpiView::default()
            };
        };
        let origin = j.ranks.values().map(|r| r.first).min().unwrap_or(0);
        let s = |ns: i64| ns as f64 / 1e9;
        let ranks = j
            .ranks
            .iter()
            .map(|(&rank, r)| {
                let mut calls: Vec<MpiCallTime> = r
                    .calls
                    .iter()
                    .map(|(name, c)| MpiCallTime {
                        call: name.clone(),
                        count: c.count,
                        seconds: s(c.ns),
                    })
                    .collect();
                calls.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
                let elapsed = r.last - r.first;
                MpiRankView {
                    rank,
                    pid: r.pid,
                    elapsed_s: s(elapsed),
                    in_mpi_s: s(r.in_mpi),
                    outside_s: s((elapsed - r.in_mpi).max(0)),
                    calls,
                    sent_bytes: r.sent_bytes,
                    sent_messages: r.sent_messages,
                    received_bytes: r.received_bytes,
                    received_messages: r.received_messages,
                    collective_bytes: r.collective_bytes,
                }
            })
            .collect();
        let mut matrix: Vec<MpiCell> = j
            .matrix
            .iter()
            .map(|(&(from, to), &(bytes, messages))| MpiCell {
                from,
                to,
                bytes,
                messages,
            })
            .collect();
        matrix.sort_by_key(|c| (c.from, c.to));
        let pairs = |m: &HashMap<(u32, u32), Waits>| {
            let mut v: Vec<MpiLatePair> = m
                .iter()
                .map(|(&(sender, receiver), w)| MpiLatePair {
                    sender,
                    receiver,
                    count: w.count,
                    wait_s: s(w.ns),
                })
                .collect();
            v.sort_by(|a, b| b.wait_s.total_cmp(&a.wait_s));
            v.truncate(VIEW_PAIRS);
            v
        };
        let recent = j
            .recent
            .iter()
            .rev()
            .map(|i| MpiLate {
                kind: if i.late_sender {
                    "late sender"
                } else {
                    "late receiver"
                }
                .to_owned(),
                sender: i.sender,
                receiver: i.receiver,
                tag: i.tag,
                comm: i.comm,
                bytes: i.bytes,
                wait_s: s(i.wait),
                at_s: s(i.at - origin),
                call: i.call.to_owned(),
            })
            .collect();
        MpiView {
            job: name.to_owned(),
            size: j.size,
            ranks,
            matrix,
            late_senders: pairs(&j.late_senders),
            late_receivers: pairs(&j.late_receivers),
            recent,
            matched: j.matched,
            unmatched: j
                .channels
                .values()
                .map(|p| (p.sends.len() + p.recvs.len()) as u64)
                .sum(),
            dropped: j.dropped,
            pairs_dropped: j.pairs_dropped,
            clock_violations: j.clock_violations,
            ignored: j.ignored,
            now_s: s(j.last - origin),
        }
    }

    /// The jobs known, by name.
    #[cfg(test)]
    fn jobs(&self) -> Vec<String> {
        self.jobs.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A job of `n` ranks, pids 100 + rank, all on one clock.
    fn job(n: u32) -> Mpi {
        let mut m = Mpi::default();
        for r in 0..n {
            m.take(
                100 + r,
                0,
                1,
                0,
                Event::Rank {
                    job: "j".into(),
                    rank: r,
                    size: n,
                },
            );
        }
        m
    }

    fn begin(m: &mut Mpi, rank: u32, t: u64, call: &str) {
        m.take(100 + rank, 0, 1, t, Event::Begin { call: call.into() });
    }
    fn end(m: &mut Mpi, rank: u32, t: u64, call: &str) {
        m.take(100 + rank, 0, 1, t, Event::End { call: call.into() });
    }
    fn send(m: &mut Mpi, rank: u32, t: u64, peer: u32, tag: i32, bytes: u64) {
        m.take(
            100 + rank,
            0,
            1,
            t,
            Event::Send {
                peer,
                tag,
                bytes,
                comm: 0,
            },
        );
    }
    fn recv(m: &mut Mpi, rank: u32, t: u64, peer: u32, tag: i32, bytes: u64) {
        m.take(
            100 + rank,
            0,
            1,
            t,
            Event::Recv {
                peer,
                tag,
                bytes,
                comm: 0,
            },
        );
    }

    /// A blocking `call` on `rank` from `t0` to `t1` ms, its message event at `at` ms.
    fn blocking_send(m: &mut Mpi, call: &str, rank: u32, t0: u64, t1: u64, peer: u32, bytes: u64) {
        begin(m, rank, t0 * MS, call);
        send(m, rank, t0 * MS, peer, 0, bytes);
        end(m, rank, t1 * MS, call);
    }
    fn blocking_recv(m: &mut Mpi, rank: u32, t0: u64, t1: u64, peer: u32, bytes: u64) {
        begin(m, rank, t0 * MS, "MPI_Recv");
        recv(m, rank, t1 * MS, peer, 0, bytes);
        end(m, rank, t1 * MS, "MPI_Recv");
    }

    #[test]
    fn a_receive_posted_before_its_send_is_a_late_sender() {
        let mut m = job(2);
        // Rank 1 waits in MPI_Recv from 10 ms; rank 0 sends at 25 ms.
        blocking_recv(&mut m, 1, 10, 26, 0, 8);
        blocking_send(&mut m, "MPI_Send", 0, 25, 26, 1, 8);
        let v = m.view("j");
        assert_eq!(v.matched, 1);
        assert_eq!(v.unmatched, 0);
        assert_eq!(v.late_senders.len(), 1);
        let p = &v.late_senders[0];
        assert_eq!((p.sender, p.receiver, p.count), (0, 1, 1));
        assert!((p.wait_s - 0.015).abs() < 1e-9, "{}", p.wait_s);
        assert!(
            v.late_receivers.is_empty(),
            "an eager send waits for nobody"
        );
        assert_eq!(v.recent[0].kind, "late sender");
        assert_eq!(v.recent[0].call, "MPI_Recv");
    }

    #[test]
    fn a_synchronous_send_before_the_receive_is_posted_is_a_late_receiver() {
        let mut m = job(2);
        blocking_send(&mut m, "MPI_Ssend", 0, 5, 40, 1, 8);
        blocking_recv(&mut m, 1, 30, 40, 0, 8);
        let v = m.view("j");
        assert!(v.late_senders.is_empty());
        assert_eq!(v.late_receivers.len(), 1);
        assert!((v.late_receivers[0].wait_s - 0.025).abs() < 1e-9);
        // A large standard send is rendezvous; a small one is not.
        let mut m = job(2);
        blocking_send(&mut m, "MPI_Send", 0, 5, 40, 1, RENDEZVOUS_BYTES);
        blocking_recv(&mut m, 1, 30, 40, 0, RENDEZVOUS_BYTES);
        blocking_send(&mut m, "MPI_Send", 0, 50, 51, 1, 8);
        blocking_recv(&mut m, 1, 60, 61, 0, 8);
        let v = m.view("j");
        assert_eq!(v.late_receivers[0].count, 1);
        assert_eq!(v.matched, 2);
    }

    #[test]
    fn an_irecv_is_posted_when_its_request_is_and_waited_for_in_its_wait() {
        let mut m = job(2);
        begin(&mut m, 1, 0, "MPI_Irecv");
        m.take(
            101,
            0,
            1,
            MS,
            Event::Request {
                request: 7,
                recv: true,
            },
        );
        end(&mut m, 1, MS, "MPI_Irecv");
        // The synchronous send begins at 2 ms, after the receive was posted: no late receiver.
        blocking_send(&mut m, "MPI_Ssend", 0, 2, 3, 1, 8);
        // The wait begins at 1.5 ms and returns at 3: the sender was late by 0.5 ms.
        begin(&mut m, 1, 3 * MS / 2, "MPI_Wait");
        m.take(101, 0, 1, 3 * MS, Event::Complete { request: 7 });
        recv(&mut m, 1, 3 * MS, 0, 0, 8);
        end(&mut m, 1, 3 * MS, "MPI_Wait");
        let v = m.view("j");
        assert!(v.late_receivers.is_empty());
        assert_eq!(v.late_senders.len(), 1);
        assert!((v.late_senders[0].wait_s - 0.0005).abs() < 1e-9);
        assert_eq!(v.recent[0].call, "MPI_Wait");
    }

    #[test]
    fn messages_match_in_order_per_channel_and_never_across_tags() {
        let mut m = job(2);
        // Two sends with tag 1, one with tag 2; the receives come in tag order 2, 1, 1.
        send(&mut m, 0, 10 * MS, 1, 1, 100);
        send(&mut m, 0, 20 * MS, 1, 1, 200);
        send(&mut m, 0, 30 * MS, 1, 2, 300);
        recv(&mut m, 1, 31 * MS, 0, 2, 300);
        assert_eq!(m.view("j").unmatched, 2);
        recv(&mut m, 1, 32 * MS, 0, 1, 100);
        recv(&mut m, 1, 33 * MS, 0, 1, 200);
        let v = m.view("j");
        assert_eq!((v.matched, v.unmatched, v.clock_violations), (3, 0, 0));
        // A receive seen before its send (another program's batch came first) waits for it.
        recv(&mut m, 1, 50 * MS, 0, 3, 1);
        assert_eq!(m.view("j").unmatched, 1);
        send(&mut m, 0, 49 * MS, 1, 3, 1);
        assert_eq!(m.view("j").matched, 4);
        // A send after its receive completed: the clocks disagree, and it is not a wait.
        recv(&mut m, 1, 60 * MS, 0, 4, 1);
        send(&mut m, 0, 70 * MS, 1, 4, 1);
        let v = m.view("j");
        assert_eq!(v.clock_violations, 1);
        assert!(v.late_senders.is_empty());
    }

    #[test]
    fn the_matrix_counts_bytes_and_messages_per_pair() {
        let mut m = job(4);
        for r in 0..4 {
            for k in 0..3 {
                send(&mut m, r, k * MS, (r + 1) % 4, 0, 10 * (r as u64 + 1));
            }
        }
        let v = m.view("j");
        assert_eq!(v.matrix.len(), 4);
        let c = v.matrix.iter().find(|c| c.from == 2).unwrap();
        assert_eq!((c.to, c.bytes, c.messages), (3, 90, 3));
        assert_eq!(v.ranks[2].sent_bytes, 90);
        assert_eq!(v.unmatched, 12);
    }

    #[test]
    fn time_in_mpi_is_summed_per_call_and_the_rest_is_outside() {
        let mut m = job(1);
        begin(&mut m, 0, 10 * MS, "MPI_Barrier");
        end(&mut m, 0, 30 * MS, "MPI_Barrier");
        begin(&mut m, 0, 40 * MS, "MPI_Allreduce");
        end(&mut m, 0, 45 * MS, "MPI_Allreduce");
        begin(&mut m, 0, 50 * MS, "MPI_Barrier");
        end(&mut m, 0, 60 * MS, "MPI_Barrier");
        // An end without its begin (the hub joined mid-call) counts nothing.
        end(&mut m, 0, 100 * MS, "MPI_Send");
        let v = m.view("j");
        let r = &v.ranks[0];
        assert_eq!(r.calls[0].call, "MPI_Barrier");
        assert_eq!(r.calls[0].count, 2);
        assert!((r.calls[0].seconds - 0.030).abs() < 1e-9);
        assert!((r.in_mpi_s - 0.035).abs() < 1e-9);
        assert!((r.elapsed_s - 0.100).abs() < 1e-9);
        assert!((r.outside_s - 0.065).abs() < 1e-9);
    }

    #[test]
    fn ranks_on_other_clocks_are_put_on_the_wall_clock() {
        let mut m = Mpi::default();
        // Rank 1's clock started 1 s after rank 0's.
        for (pid, zero, rank) in [(100, 0, 0), (101, 1_000_000_000, 1)] {
            let e = Event::Rank {
                job: "j".into(),
                rank,
                size: 2,
            };
            m.take(pid, zero, 1, 0, e);
        }
        m.take(
            101,
            1_000_000_000,
            1,
            0,
            Event::Begin {
                call: "MPI_Recv".into(),
            },
        );
        // Rank 0 sends at 1.010 s of its clock: 10 ms after rank 1 began to wait.
        let send = Event::Send {
            peer: 1,
            tag: 0,
            bytes: 1,
            comm: 0,
        };
        m.take(100, 0, 1, 1_010_000_000, send);
        let recv = Event::Recv {
            peer: 0,
            tag: 0,
            bytes: 1,
            comm: 0,
        };
        m.take(101, 1_000_000_000, 1, 11_000_000, recv);
        let v = m.view("j");
        assert!((v.late_senders[0].wait_s - 0.010).abs() < 1e-9);
    }

    #[test]
    fn everything_kept_is_bounded() {
        let mut m = job(2);
        // Unmatched sends on one channel: the oldest go.
        for i in 0..(MAX_PENDING as u64 + 10) {
            send(&mut m, 0, i, 1, 0, 1);
        }
        let v = m.view("j");
        assert_eq!((v.unmatched, v.dropped), (MAX_PENDING as u64, 10));
        // Call names past the bound are summed under `other`.
        for i in 0..(MAX_CALLS + 10) {
            let call = format!("MPI_Call{i}");
            begin(&mut m, 1, i as u64 * 10, &call);
            end(&mut m, 1, i as u64 * 10 + 5, &call);
        }
        let calls = &m.view("j").ranks[1].calls;
        assert_eq!(calls.len(), MAX_CALLS);
        assert_eq!(calls.iter().find(|c| c.call == "other").unwrap().count, 11);
        // Jobs past the bound: the quietest is forgotten, and its programs with it.
        for k in 0..MAX_JOBS as u32 {
            let e = Event::Rank {
                job: format!("job{k}"),
                rank: 0,
                size: 1,
            };
            m.take(1000 + k, 0, 1, 1_000_000 + k as u64, e);
        }
        assert_eq!(m.jobs().len(), MAX_JOBS);
        assert!(!m.jobs().contains(&"j".to_owned()));
        assert_eq!(m.jobs_forgotten, 1);
        assert!(m.view_of(100).is_none());
        // Recent late messages are bounded.
        let mut m = job(2);
        for i in 0..(RECENT as u64 + 5) {
            blocking_recv(&mut m, 1, 100 * i, 100 * i + 50, 0, 1);
            blocking_send(&mut m, "MPI_Send", 0, 100 * i + 20, 100 * i + 21, 1, 1);
        }
        let v = m.view("j");
        assert_eq!(v.recent.len(), RECENT);
        assert_eq!(v.late_senders[0].count, RECENT as u64 + 5);
    }

    /// The analysis feeds the job's rank timelines: a row per rank, the calls where they were,
    /// each matched message as an arrow, on the job's time base.
    #[test]
    fn the_job_feeds_its_rank_timelines() {
        let mut m = job(3);
        // Rank 1 waits in MPI_Recv from 10 ms; rank 0 sends at 25 ms; rank 2 is in a barrier
        // still open at the end.
        blocking_recv(&mut m, 1, 10, 26, 0, 8);
        blocking_send(&mut m, "MPI_Send", 0, 25, 26, 1, 8);
        begin(&mut m, 2, 50 * MS, "MPI_Barrier");
        // Rank 1 finalizes (through the Fortran binding) at 40 ms: its row ends there.
        begin(&mut m, 1, 35 * MS, "mpi_finalize_");
        end(&mut m, 1, 40 * MS, "mpi_finalize_");
        end(&mut m, 0, 100 * MS, "MPI_Finalize");
        let t = m.tile_of(101, 0..10, |_| 0.0, None, 100, 10).unwrap();
        let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["rank 0", "rank 1", "rank 2"]);
        assert!((t.now_s - 0.1).abs() < 1e-9);
        let state = |row: usize, x: u32| {
            let r = t.rows[row].runs.iter().find(|r| r.0 <= x && x < r.1)?;
            Some((r.2, t.calls[(r.3 as usize).max(1) - 1].as_str()))
        };
        assert_eq!(state(1, 15), Some((2, "MPI_Recv")));
        assert_eq!(state(0, 25).map(|s| s.0), Some(1));
        assert_eq!(state(2, 90), Some((4, "MPI_Barrier")));
        assert_eq!(state(1, 37), Some((5, "mpi_finalize_")));
        assert_eq!(state(1, 60), None);
        assert_eq!(state(0, 60).map(|s| s.0), Some(0));
        assert_eq!(t.arrows.len(), 1);
        let a = &t.arrows[0];
        assert_eq!((a.sender, a.receiver), (0, 1));
        assert!((a.send_s - 0.025).abs() < 1e-9 && (a.recv_s - 0.026).abs() < 1e-9);
        // Following the live end: the start is given the end, the latest event.
        let t = m
            .tile_of(101, 0..10, |t1| t1 - 0.04, None, 100, 10)
            .unwrap();
        assert!((t.t0_s - 0.06).abs() < 1e-9 && (t.t1_s - 0.1).abs() < 1e-9);
        // Rank 2's process goes away in its barrier: its row ends at its last event, and the
        // others' do not; a program that is no rank changes nothing.
        m.gone(102);
        m.gone(7);
        let t = m.tile_of(101, 0..10, |_| 0.0, Some(0.1), 100, 10).unwrap();
        assert_eq!(t.rows[2].label, "rank 2 (gone, no Finalize)");
        let runs_to = |row: usize| t.rows[row].runs.last().map(|r| r.1);
        assert_eq!(runs_to(2), Some(50));
        assert_eq!(runs_to(0), Some(100));
        assert_eq!(t.rows[1].label, "rank 1");
        // Rows past the job are none; a program that is no rank has no tile.
        assert!(
            m.tile_of(100, 5..9, |_| 0.0, None, 100, 10)
                .unwrap()
                .rows
                .is_empty()
        );
        assert!(m.tile_of(7, 0..1, |_| 0.0, None, 100, 10).is_none());
        // A rank run again by another program starts its row afresh.
        m.take(
            200,
            0,
            1,
            200 * MS,
            Event::Rank {
                job: "j".into(),
                rank: 1,
                size: 3,
            },
        );
        let t = m.tile_of(200, 1..2, |_| 0.0, Some(0.03), 30, 10).unwrap();
        assert!(
            t.rows[0].runs.iter().all(|r| r.2 != 2),
            "{:?}",
            t.rows[0].runs
        );
    }

    #[test]
    fn events_before_the_rank_is_announced_are_not_counted() {
        let mut m = Mpi::default();
        m.take(
            5,
            0,
            1,
            0,
            Event::Begin {
                call: "MPI_Init".into(),
            },
        );
        assert!(m.view_of(5).is_none());
        let schema = Schema::new(
            1,
            "gyr.msg.send",
            vec![
                gyr_core::Field::new("peer", gyr_core::FieldType::U32),
                gyr_core::Field::new("tag", gyr_core::FieldType::I32),
                gyr_core::Field::new("bytes", gyr_core::FieldType::U64),
                gyr_core::Field::new("comm", gyr_core::FieldType::U64),
            ],
        )
        .unwrap();
        let e = event(
            Kind::Send,
            &schema,
            &[
                Value::UInt(3),
                Value::Int(-1),
                Value::UInt(8),
                Value::UInt(0),
            ],
        );
        assert_eq!(
            e,
            Some(Event::Send {
                peer: 3,
                tag: -1,
                bytes: 8,
                comm: 0
            })
        );
        assert_eq!(kind("gyr.mpi.begin"), Some(Kind::Begin));
        assert_eq!(kind("gyr.mpi.comm"), None);
    }
}
