//! Clock correction from message pairs: each process's offset and drift against a reference
//! process, estimated post hoc from the messages the processes exchanged, so that no receive
//! comes before its send (PIMSY's clock synchronisation).
//!
//! # What is read
//!
//! Each trace file is one process. Its rank is the one its `gyr.msg.rank {job, rank, size}`
//! event gives, or else its place among the files; `gyr.msg.send {peer, tag, bytes, comm}` is
//! stamped when a send begins and `gyr.msg.recv {peer, tag, bytes, comm}` when a receive has
//! completed (the contract of `gyr::msg`, which the MPI interposer shares). The n-th send from
//! A to B with a given `comm` and `tag` is received by B's n-th receive from A with the same
//! `comm` and `tag` (MPI's non-overtaking rule), so a message is matched by counting, whatever
//! the clocks say.
//!
//! # The model
//!
//! Every process's clock runs at a constant rate against the reference's: placed on the
//! reference's clock by the wall-clock start of its file, a time `t` of process p is, on the
//! reference's clock,
//!
//! ```text
//! t_ref = t + offset_p + drift_p · t
//! ```
//!
//! (t0 = 0 is the reference's timestamp 0; `drift` is the skew, reported in ppm).
//!
//! # Minimum delay and convex hulls (Duda; Hofmann and Hilbrich)
//!
//! For two processes i and j, let y(x) = α + β·x be what must be added to a time x of j to
//! place it on i's clock. A message i → j sent at s (i's clock) and received at r (j's clock)
//! cannot arrive before it left: y(r) ≥ s − r. A message j → i sent at s (j's) and received at
//! r (i's): y(s) ≤ r − s. So the line y lies above every point (r, s − r) of one direction and
//! below every point (s, r − s) of the other: above the upper convex hull of the first set and
//! below the lower convex hull of the second. Only the hulls' points matter, so a pair keeps
//! its two hulls and nothing else ([`Hull`]): memory grows with the hulls, not the messages.
//!
//! Among the feasible lines the estimate takes the one with the largest margin: the slope β
//! that maximises the vertical gap between the two hulls (a concave function of β, searched by
//! golden sections within ±[`DEFAULT_MAX_DRIFT`]) and α in the middle of the gap there, so
//! that the fastest messages of both directions are left the same delay. When the region is
//! empty (no line separates the hulls: the clocks jumped, or did not run at constant rates),
//! or the slope is not determined (the optimum lies on the bound) and an offset alone
//! violates nothing, the estimate is an offset alone, in the middle of the gap at β = 0. With messages one way only, it is the offset that
//! leaves the fastest message the minimum latency.
//!
//! # From pairs to processes
//!
//! Pairs are composed along a spanning tree grown from the reference, preferring pairs with
//! the most messages in their weaker direction (Prim's algorithm, maximum weight). A process
//! the tree does not reach (it exchanged no message with the others) is reported and left
//! where its wall-clock start places it.
//!
//! # Passes and bounds
//!
//! [`estimate_files`] reads each file's first records for its rank, then every file twice
//! through the [k-way merge](crate::merge), filtered to the message events: once to match
//! messages and build the hulls, once to count the receives that still come before their sends
//! on the corrected clocks (and those that come less than the minimum latency after). Reading
//! in time order keeps the queues of unmatched messages short; each queue is per (source,
//! destination, `comm`, `tag`), and all together hold at most [`DEFAULT_MAX_UNMATCHED`]
//! messages, past which the oldest are dropped and counted (their partners, when they come,
//! are counted unmatched too; the counting stays aligned).

use crate::merge::Merge;
use gyr_core::Value;
use gyr_core::schema::Schema;
use gyr_core::trace::{Item, OpenError, TraceReader};
use gyr_core::value::decode;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::io::{BufReader, Read, Seek};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The event that says which rank a process is.
pub const RANK_EVENT: &str = "gyr.msg.rank";
/// The event stamped when a send begins.
pub const SEND_EVENT: &str = "gyr.msg.send";
/// The event stamped when a receive has completed.
pub const RECV_EVENT: &str = "gyr.msg.recv";

/// Unmatched messages all queues hold together at most: 16 MB of times, enough for a million
/// messages in flight, past which the oldest are dropped and counted.
pub const DEFAULT_MAX_UNMATCHED: usize = 1 << 20;

/// The largest drift (as a fraction: 1e-3 is 1000 ppm) the estimate considers: ten times what
/// a quartz oscillator is specified to, so that a real drift never hits the bound, while a
/// slope the messages do not determine does.
pub const DEFAULT_MAX_DRIFT: f64 = 1e-3;

/// Points a hull buffers before it folds them into its hull.
const HULL_BUFFER: usize = 1024;

/// How to estimate.
#[derive(Debug, Clone)]
pub struct ClockOptions {
    /// The rank whose clock the others are put on (`None`: rank 0, or the first file's rank).
    pub reference: Option<u32>,
    /// The least time a message takes, in ns: a receive less than this after its send counts
    /// as a violation, and one-way estimates leave the fastest message this delay.
    pub min_latency_ns: u64,
    /// See [`DEFAULT_MAX_UNMATCHED`].
    pub max_unmatched: usize,
    /// See [`DEFAULT_MAX_DRIFT`].
    pub max_drift: f64,
}

impl Default for ClockOptions {
    fn default() -> Self {
        ClockOptions {
            reference: None,
            min_latency_ns: 0,
            max_unmatched: DEFAULT_MAX_UNMATCHED,
            max_drift: DEFAULT_MAX_DRIFT,
        }
    }
}

/// Why a clock estimate could not be made; each says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClockError {
    /// A file could not be opened as a trace.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Fewer than two files were given.
    #[error(
        "clock correction needs the trace files of at least two processes (one file per rank); \
         {0} given"
    )]
    TooFewFiles(usize),
    /// No file holds a message event.
    #[error(
        "none of the files holds gyr.msg.send or gyr.msg.recv events: record messages with \
         gyr::msg::send and gyr::msg::recv, or trace an MPI program with `gyr run --mpi`"
    )]
    NoMessages,
    /// Two files say they belong to different jobs.
    #[error("{a} is of job `{job_a}` but {b} of job `{job_b}`: give the files of one job's ranks")]
    DifferentJobs {
        /// One file.
        a: String,
        /// Its job.
        job_a: String,
        /// Another file.
        b: String,
        /// Its job.
        job_b: String,
    },
    /// Two files are the same rank.
    #[error("{a} and {b} are both rank {rank}: give each rank's file once")]
    DuplicateRank {
        /// The rank.
        rank: u32,
        /// One file.
        a: String,
        /// The other.
        b: String,
    },
    /// The reference rank asked for has no file.
    #[error("no file is rank {0}: choose a reference among the ranks given ({1})")]
    NoReference(u32, String),
    /// Message events were found, but no send matched a receive.
    #[error(
        "no send matches a receive among these files ({0} message events): give the files of \
         the processes that exchanged them"
    )]
    NothingMatched(u64),
}

/// A linear clock map of one process: `t ↦ t + shift + offset + drift · (t + shift)`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinearClock {
    /// What places the file on the common clock by wall-clock start (ns): its start less the
    /// reference's.
    pub shift_ns: i64,
    /// The estimated offset beyond that placement, in ns.
    pub offset_ns: f64,
    /// The estimated drift (skew), as a fraction (1e-6 is 1 ppm).
    pub drift: f64,
}

impl LinearClock {
    /// A time `t` of the process (ns from its timestamp 0) on the common clock; saturating.
    pub fn map(&self, t: u64) -> i64 {
        let placed = i64::try_from(t)
            .unwrap_or(i64::MAX)
            .saturating_add(self.shift_ns);
        if self.offset_ns == 0.0 && self.drift == 0.0 {
            return placed;
        }
        let v = placed as f64 + self.offset_ns + self.drift * placed as f64;
        if v.is_nan() {
            placed
        } else {
            // `as` saturates at the ends of i64.
            v.round() as i64
        }
    }
}

/// The clock of every file of a merge or an export.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClockCorrection {
    clocks: Vec<LinearClock>,
}

impl ClockCorrection {
    /// The files placed by the wall-clock start their headers give (`start_unix_ns`), relative
    /// to the earliest (a file without one starts at 0): what exports do without `--sync`.
    pub fn placement(starts_unix_ns: &[u64]) -> Self {
        let base = starts_unix_ns
            .iter()
            .copied()
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(0);
        ClockCorrection {
            clocks: starts_unix_ns
                .iter()
                .map(|&s| LinearClock {
                    shift_ns: signed_diff(s, base).max(0),
                    ..LinearClock::default()
                })
                .collect(),
        }
    }

    /// A correction of the given clocks, one per file.
    pub fn new(clocks: Vec<LinearClock>) -> Self {
        ClockCorrection { clocks }
    }

    /// The clock of file `file` (the identity for a file it does not know).
    pub fn clock(&self, file: usize) -> LinearClock {
        self.clocks.get(file).copied().unwrap_or_default()
    }

    /// A time `t` of file `file` on the common clock.
    pub fn map(&self, file: usize, t: u64) -> i64 {
        self.clock(file).map(t)
    }

    /// What to add to every mapped time so that none is negative: the common clock then
    /// starts at the earliest file's timestamp 0.
    pub fn base_shift(&self) -> i64 {
        self.clocks
            .iter()
            .map(|c| c.map(0))
            .min()
            .map_or(0, |m| m.saturating_neg().max(0))
    }
}

/// `a − b` as a signed number of ns, saturating.
fn signed_diff(a: u64, b: u64) -> i64 {
    let d = i128::from(a) - i128::from(b);
    d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

// ---------------------------------------------------------------------------------------------
// Hulls and the pair estimate.

/// One side of a pair's constraints: the points a line must stay above (`upper` hull) or
/// below (lower hull), of which only the hull is kept.
#[derive(Debug, Clone)]
pub struct Hull {
    upper: bool,
    hull: Vec<(i64, i64)>,
    pending: Vec<(i64, i64)>,
    count: u64,
}

impl Hull {
    /// The points a line must stay above (their upper hull is kept).
    pub fn upper() -> Self {
        Hull {
            upper: true,
            hull: Vec::new(),
            pending: Vec::new(),
            count: 0,
        }
    }

    /// The points a line must stay below (their lower hull is kept).
    pub fn lower() -> Self {
        Hull {
            upper: false,
            ..Hull::upper()
        }
    }

    /// Adds a point.
    pub fn add(&mut self, x: i64, y: i64) {
        self.count += 1;
        self.pending.push((x, y));
        if self.pending.len() >= HULL_BUFFER + self.hull.len() {
            self.fold();
        }
    }

    /// Points added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Points kept (hull and buffer): what the hull costs in memory.
    pub fn kept(&self) -> usize {
        self.hull.len() + self.pending.len()
    }

    /// Folds the buffered points into the hull (Andrew's monotone chain).
    fn fold(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut all = std::mem::take(&mut self.hull);
        all.append(&mut self.pending);
        all.sort_unstable();
        all.dedup();
        let mut h: Vec<(i64, i64)> = Vec::with_capacity(all.len().min(64));
        for p in all {
            while h.len() >= 2 {
                let c = cross(h[h.len() - 2], h[h.len() - 1], p);
                // Upper hull: keep right turns only; lower: left turns only.
                if (self.upper && c >= 0) || (!self.upper && c <= 0) {
                    h.pop();
                } else {
                    break;
                }
            }
            h.push(p);
        }
        self.hull = h;
    }

    /// The hull's points (after folding what was buffered).
    pub fn points(&mut self) -> &[(i64, i64)] {
        self.fold();
        &self.hull
    }
}

fn cross(o: (i64, i64), a: (i64, i64), b: (i64, i64)) -> i128 {
    let (ox, oy) = (i128::from(o.0), i128::from(o.1));
    (i128::from(a.0) - ox) * (i128::from(b.1) - oy)
        - (i128::from(a.1) - oy) * (i128::from(b.0) - ox)
}

/// How a pair's line was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Messages both ways, and a line separates their hulls: offset and drift, in the middle
    /// of the feasible band.
    ConvexHull,
    /// Messages both ways, but no line separates them, or their slope is not determined: an
    /// offset in the middle of the gap (which is negative when even that violates some).
    OffsetOnly,
    /// Messages one way only: the offset that leaves the fastest the minimum latency.
    OneWay,
}

impl Method {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Method::ConvexHull => "convex hull",
            Method::OffsetOnly => "offset only",
            Method::OneWay => "one way",
        }
    }
}

/// A line y = α + β·x between two clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairLine {
    /// α, in ns.
    pub offset_ns: f64,
    /// β.
    pub drift: f64,
    /// How it was found.
    pub method: Method,
    /// The vertical gap between the hulls at the line's slope, in ns (negative: violated).
    pub margin_ns: f64,
    /// The slopes (drifts) that leave no message violated, least and greatest: how well the
    /// messages determine the drift (`None` unless the method is [`Method::ConvexHull`]).
    pub drift_range: Option<(f64, f64)>,
}

/// The line to stay above the points of `above` (upper hull) and below those of `below`
/// (lower hull), by minimum delay; `None` when both are empty.
pub fn estimate_line(
    above: &[(i64, i64)],
    below: &[(i64, i64)],
    min_latency_ns: u64,
    max_drift: f64,
) -> Option<PairLine> {
    let lat = min_latency_ns as f64;
    // x relative to a point near the middle, for conditioning.
    let xs = above.iter().chain(below).map(|p| p.0);
    let (min_x, max_x) = xs.fold((i64::MAX, i64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    if min_x > max_x {
        return None;
    }
    let x0 = (min_x as f64 + max_x as f64) / 2.0;
    let lo = |beta: f64| {
        above
            .iter()
            .map(|&(x, y)| y as f64 - beta * (x as f64 - x0))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let hi = |beta: f64| {
        below
            .iter()
            .map(|&(x, y)| y as f64 - beta * (x as f64 - x0))
            .fold(f64::INFINITY, f64::min)
    };
    let at_x0 = |alpha: f64, beta: f64| PairLine {
        offset_ns: alpha - beta * x0,
        drift: beta,
        method: Method::ConvexHull,
        margin_ns: 0.0,
        drift_range: None,
    };
    if below.is_empty() {
        return Some(PairLine {
            method: Method::OneWay,
            ..at_x0(lo(0.0) + lat, 0.0)
        });
    }
    if above.is_empty() {
        return Some(PairLine {
            method: Method::OneWay,
            ..at_x0(hi(0.0) - lat, 0.0)
        });
    }
    let margin = |beta: f64| hi(beta) - lo(beta);
    // Golden-section search of the concave margin over [−max, max].
    let max_drift = if max_drift.is_finite() && max_drift > 0.0 {
        max_drift.min(0.5)
    } else {
        DEFAULT_MAX_DRIFT
    };
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (-max_drift, max_drift);
    let mut c = b - g * (b - a);
    let mut d = a + g * (b - a);
    let (mut mc, mut md) = (margin(c), margin(d));
    for _ in 0..120 {
        if mc >= md {
            b = d;
            d = c;
            md = mc;
            c = b - g * (b - a);
            mc = margin(c);
        } else {
            a = c;
            c = d;
            mc = md;
            d = a + g * (b - a);
            md = margin(d);
        }
    }
    let beta = (a + b) / 2.0;
    let best = margin(beta);
    let on_bound = beta.abs() > 0.99 * max_drift;
    if best >= 2.0 * lat && !on_bound {
        let alpha = (lo(beta) + hi(beta)) / 2.0;
        // The margin is concave: the feasible slopes are an interval around beta, whose ends
        // bisection finds.
        let feasible = |b: f64| margin(b) >= 2.0 * lat;
        let end = |mut inside: f64, mut outside: f64| {
            if feasible(outside) {
                return outside;
            }
            for _ in 0..80 {
                let mid = (inside + outside) / 2.0;
                if feasible(mid) {
                    inside = mid;
                } else {
                    outside = mid;
                }
            }
            inside
        };
        Some(PairLine {
            margin_ns: best,
            drift_range: Some((end(beta, -max_drift), end(beta, max_drift))),
            ..at_x0(alpha, beta)
        })
    } else if margin(0.0) < 2.0 * lat && best >= 2.0 * lat {
        // Feasible only with a slope the messages do not pin down (it lies on the bound):
        // the max-margin line still violates nothing.
        let alpha = (lo(beta) + hi(beta)) / 2.0;
        Some(PairLine {
            margin_ns: best,
            ..at_x0(alpha, beta)
        })
    } else {
        let alpha = (lo(0.0) + hi(0.0)) / 2.0;
        Some(PairLine {
            method: Method::OffsetOnly,
            margin_ns: margin(0.0),
            ..at_x0(alpha, 0.0)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Matching.

/// A message event of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    Send { peer: u32, tag: i64, comm: u64 },
    Recv { peer: u32, tag: i64, comm: u64 },
}

fn field<'a>(schema: &Schema, values: &'a [Value], name: &str) -> Option<&'a Value> {
    schema
        .fields
        .iter()
        .position(|f| f.name == name)
        .and_then(|i| values.get(i))
}

fn as_u64(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::UInt(u) => Some(*u),
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

fn as_i64(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::UInt(u) => i64::try_from(*u).ok(),
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn decode_msg(schema: &Schema, payload: &[u8]) -> Option<Msg> {
    let values = decode(schema, payload).ok()?;
    let peer = u32::try_from(as_u64(field(schema, &values, "peer"))?).ok()?;
    let tag = as_i64(field(schema, &values, "tag")).unwrap_or(0);
    let comm = as_u64(field(schema, &values, "comm")).unwrap_or(0);
    match schema.name.as_str() {
        SEND_EVENT => Some(Msg::Send { peer, tag, comm }),
        RECV_EVENT => Some(Msg::Recv { peer, tag, comm }),
        _ => None,
    }
}

/// The unmatched messages of one (source, destination, comm, tag): the times of whichever
/// side is ahead, oldest first.
#[derive(Debug, Default)]
struct Queue {
    sends: u64,
    recvs: u64,
    /// Index (in its side's count) of the first pending time.
    first: u64,
    pending: VecDeque<i64>,
}

/// A matched message: send and receive times on the clock being checked.
#[derive(Debug, Clone, Copy)]
struct Matched {
    src: usize,
    dst: usize,
    comm: u64,
    tag: i64,
    send: i64,
    recv: i64,
}

type Key = (usize, usize, u64, i64);

#[derive(Debug, Default)]
struct Matcher {
    queues: HashMap<Key, Queue>,
    pending: usize,
    max_pending: usize,
    /// Pending entries in the order they came (queue, side, index), for dropping the oldest
    /// over the limit; entries matched since are skipped when met.
    order: VecDeque<(Key, bool, u64)>,
    dropped: u64,
    matched: u64,
}

impl Queue {
    /// Whether entry `n` of side `is_send` is still pending, at the front.
    fn is_front(&self, is_send: bool, n: u64) -> bool {
        !self.pending.is_empty() && (self.sends > self.recvs) == is_send && self.first == n
    }
}

impl Matcher {
    /// A send (`is_send`) or receive of the message `key` (src, dst, comm, tag) at `time`;
    /// returns the match it completes.
    fn push(&mut self, key: Key, is_send: bool, time: i64) -> Option<Matched> {
        let q = self.queues.entry(key).or_default();
        let (n, theirs) = if is_send {
            (q.sends, q.recvs)
        } else {
            (q.recvs, q.sends)
        };
        if is_send {
            q.sends += 1;
        } else {
            q.recvs += 1;
        }
        if n < theirs {
            // The other side is ahead: our partner is its n-th, the front if still held.
            if n < q.first {
                return None; // dropped over the limit
            }
            let other = q.pending.pop_front()?;
            q.first += 1;
            self.pending -= 1;
            self.matched += 1;
            let (send, recv) = if is_send {
                (time, other)
            } else {
                (other, time)
            };
            return Some(Matched {
                src: key.0,
                dst: key.1,
                comm: key.2,
                tag: key.3,
                send,
                recv,
            });
        }
        if q.pending.is_empty() {
            q.first = n;
        }
        q.pending.push_back(time);
        self.pending += 1;
        self.order.push_back((key, is_send, n));
        while self.pending > self.max_pending {
            let Some((k, side, n)) = self.order.pop_front() else {
                break;
            };
            if let Some(q) = self.queues.get_mut(&k)
                && q.is_front(side, n)
            {
                q.pending.pop_front();
                q.first += 1;
                self.pending -= 1;
                self.dropped += 1;
            }
        }
        if self.order.len() > 2 * self.pending + 1024 {
            // Drop the entries of messages matched since, keeping the FIFO bounded.
            let queues = &self.queues;
            self.order.retain(|(k, side, n)| {
                queues.get(k).is_some_and(|q| {
                    (q.sends > q.recvs) == *side
                        && *n >= q.first
                        && *n < q.first + q.pending.len() as u64
                })
            });
        }
        None
    }

    /// (unmatched sends, unmatched receives) left at the end, dropped ones included.
    fn unmatched(&self) -> (u64, u64) {
        let mut s = 0;
        let mut r = 0;
        for q in self.queues.values() {
            if q.sends > q.recvs {
                s += q.sends - q.recvs;
            } else {
                r += q.recvs - q.sends;
            }
        }
        (s, r)
    }
}

// ---------------------------------------------------------------------------------------------
// The report.

/// A message that arrived too early on the clocks checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Violation {
    /// The sender's rank.
    pub from: u32,
    /// The receiver's rank.
    pub to: u32,
    /// The communicator id.
    pub comm: u64,
    /// The tag.
    pub tag: i64,
    /// The send's time, in ns on the clock checked.
    pub send_ns: i64,
    /// The receive's time.
    pub recv_ns: i64,
}

impl Violation {
    /// Receive less send, in ns (negative: the receive came first).
    pub fn delay_ns(&self) -> i64 {
        self.recv_ns.saturating_sub(self.send_ns)
    }
}

/// Messages whose receive came before their send, or less than the minimum latency after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations {
    /// Matched messages checked.
    pub checked: u64,
    /// Receives before their sends.
    pub reversed: u64,
    /// Receives less than the minimum latency after their sends (the reversed included).
    pub under_latency: u64,
    /// The worst (the smallest delay).
    pub worst: Option<Violation>,
    /// The smallest delay of all messages checked, in ns.
    pub min_delay_ns: Option<i64>,
}

impl Violations {
    fn check(&mut self, m: &Matched, ranks: &[u32], min_latency: i64) {
        self.checked += 1;
        let delay = m.recv.saturating_sub(m.send);
        self.min_delay_ns = Some(self.min_delay_ns.map_or(delay, |d| d.min(delay)));
        if delay < 0 {
            self.reversed += 1;
        }
        if delay < min_latency {
            self.under_latency += 1;
            if self.worst.is_none_or(|w| delay < w.delay_ns()) {
                self.worst = Some(Violation {
                    from: ranks[m.src],
                    to: ranks[m.dst],
                    comm: m.comm,
                    tag: m.tag,
                    send_ns: m.send,
                    recv_ns: m.recv,
                });
            }
        }
    }
}

/// Where a process's estimate came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EstimatedFrom {
    /// The process (index among the files) it was estimated against, already corrected.
    pub peer: usize,
    /// Messages from that process to this one.
    pub received: u64,
    /// Messages from this process to that one.
    pub sent: u64,
    /// The pair's line.
    pub line: PairLine,
}

/// One process's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessClock {
    /// The file's path as given.
    pub file: String,
    /// Its rank.
    pub rank: u32,
    /// Whether the rank came from a `gyr.msg.rank` event (else from the file's place).
    pub rank_from_event: bool,
    /// Its clock on the reference's.
    pub clock: LinearClock,
    /// The pair it was estimated from (`None` for the reference and for a process that
    /// exchanged no message with the others: left uncorrected).
    pub from: Option<EstimatedFrom>,
    /// Its matched messages, sent and received.
    pub messages: u64,
}

impl ProcessClock {
    /// The drift in ppm.
    pub fn drift_ppm(&self) -> f64 {
        self.clock.drift * 1e6
    }
}

/// What [`estimate_files`] found.
#[derive(Debug, Clone)]
pub struct ClockReport {
    /// The job the files say they belong to, if they say.
    pub job: Option<String>,
    /// The reference process (index among the files).
    pub reference: usize,
    /// Per file, in the order given.
    pub processes: Vec<ProcessClock>,
    /// Messages matched.
    pub matched: u64,
    /// Sends no receive matched, and receives no send matched (a rank killed mid-run, a
    /// file missing, or dropped over [`ClockOptions::max_unmatched`]).
    pub unmatched_sends: u64,
    /// See `unmatched_sends`.
    pub unmatched_recvs: u64,
    /// Of those, dropped because too many were waiting at once.
    pub dropped: u64,
    /// Message events whose peer rank has no file.
    pub unknown_peers: u64,
    /// Message events that did not decode (a damaged or foreign payload).
    pub undecoded: u64,
    /// The minimum latency the violations were counted against, in ns.
    pub min_latency_ns: u64,
    /// Violations on the clocks placed by wall-clock start.
    pub before: Violations,
    /// Violations on the corrected clocks.
    pub after: Violations,
}

impl ClockReport {
    /// The correction to hand to a [`Merge`] or an export.
    pub fn correction(&self) -> ClockCorrection {
        ClockCorrection::new(self.processes.iter().map(|p| p.clock).collect())
    }
}

/// A file's identity in its job.
#[derive(Debug, Clone)]
struct Identity {
    rank: Option<u32>,
    job: Option<String>,
}

/// Reads `reader` up to its rank event or its first message event.
fn identify<R: Read + Seek>(reader: &mut TraceReader<R>) -> Identity {
    let mut id = Identity {
        rank: None,
        job: None,
    };
    reader.try_for_each_item(|item| {
        if let Item::Record {
            schema: Some(s),
            record,
        } = item
        {
            match s.name.as_str() {
                RANK_EVENT => {
                    if let Ok(values) = decode(s, record.payload) {
                        id.rank = as_u64(field(s, &values, "rank")).and_then(|r| r.try_into().ok());
                        if let Some(Value::Str(job)) = field(s, &values, "job") {
                            id.job = Some(job.clone());
                        }
                    }
                    if id.rank.is_some() {
                        return ControlFlow::Break(());
                    }
                }
                // A file that says its rank says it before its first message.
                SEND_EVENT | RECV_EVENT => return ControlFlow::Break(()),
                _ => {}
            }
        }
        ControlFlow::Continue(())
    });
    id
}

fn open(path: &Path) -> Result<TraceReader<BufReader<std::fs::File>>, OpenError> {
    TraceReader::open(path)
}

/// Estimates the clocks of the processes whose trace files are `paths` (one process each),
/// and counts the violations before and after (see the [module](self)).
pub fn estimate_files(
    paths: &[PathBuf],
    options: &ClockOptions,
) -> Result<ClockReport, ClockError> {
    estimate_with(
        paths.len(),
        &|i| open(&paths[i]),
        &|i| paths[i].display().to_string(),
        options,
    )
}

/// Makes the offsets satisfy every pair's messages, not only the spanning tree's.
///
/// The tree estimates each process from one neighbour; composed along the tree, two processes
/// that were not estimated from each other can still disagree with their own messages. With the
/// drifts fixed, each message gives a difference constraint between two offsets (the receiver's
/// corrected receive at least `min_latency` after the sender's corrected send), and the
/// strongest constraint of a pair and direction lies on a vertex of the hull already kept for
/// it. Bellman–Ford's relaxation moves a receiver's offset later just enough (or, for a message
/// to the reference, its sender's earlier), round after round (at most one per process), and
/// the reference is put back where it was should it have moved. When the
/// constraints have no solution with these drifts (a cycle of them), what remains is reported as
/// violations after.
fn repair_offsets(
    clocks: &mut [LinearClock],
    pairs: &mut BTreeMap<(usize, usize), (Hull, Hull)>,
    estimated: &[bool],
    reference: usize,
    min_latency: i64,
) {
    let latency = min_latency as f64;
    // (from, to, c): offset[to] − offset[from] ≥ c.
    let mut constraints: Vec<(usize, usize, f64)> = Vec::new();
    for (&(i, j), (above, below)) in pairs.iter_mut() {
        if !estimated[i] || !estimated[j] {
            continue;
        }
        let (bi, bj) = (clocks[i].drift, clocks[j].drift);
        // i → j: points (R on j's clock, y = S − R); need a_j − a_i ≥ L + y(1+b_i) + R(b_i − b_j).
        let need = above
            .points()
            .iter()
            .map(|&(r, y)| latency + y as f64 * (1.0 + bi) + r as f64 * (bi - bj))
            .fold(f64::NEG_INFINITY, f64::max);
        if need.is_finite() {
            constraints.push((i, j, need));
        }
        // j → i: points (S on j's clock, y = R − S); need a_i − a_j ≥ L − min(y(1+b_i) + S(b_i − b_j)).
        let slack = below
            .points()
            .iter()
            .map(|&(s, y)| y as f64 * (1.0 + bi) + s as f64 * (bi - bj))
            .fold(f64::INFINITY, f64::min);
        if slack.is_finite() {
            constraints.push((j, i, latency - slack));
        }
    }
    let anchor = clocks[reference].offset_ns;
    for _ in 0..=clocks.len() {
        let mut moved = false;
        for &(from, to, c) in &constraints {
            let gap = clocks[to].offset_ns - clocks[from].offset_ns;
            if gap < c {
                // The reference stays: a message into it moves its sender earlier instead.
                if to == reference {
                    clocks[from].offset_ns -= c - gap;
                } else {
                    clocks[to].offset_ns += c - gap;
                }
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    let shift = clocks[reference].offset_ns - anchor;
    if shift != 0.0 {
        for (c, &e) in clocks.iter_mut().zip(estimated) {
            if e {
                c.offset_ns -= shift;
            }
        }
    }
}

/// [`estimate_files`] over any readers: `open(i)` opens file `i` afresh (it is read three
/// times), `name(i)` names it in reports.
pub fn estimate_with<R: Read + Seek>(
    files: usize,
    open: &dyn Fn(usize) -> Result<TraceReader<R>, OpenError>,
    name: &dyn Fn(usize) -> String,
    options: &ClockOptions,
) -> Result<ClockReport, ClockError> {
    if files < 2 {
        return Err(ClockError::TooFewFiles(files));
    }
    // Pass 0: who is who.
    let mut ids = Vec::with_capacity(files);
    let mut starts = Vec::with_capacity(files);
    for i in 0..files {
        let mut r = open(i)?;
        starts.push(r.header().start_unix_ns);
        ids.push(identify(&mut r));
    }
    let mut job: Option<(usize, String)> = None;
    for (i, id) in ids.iter().enumerate() {
        if let Some(j) = &id.job {
            match &job {
                Some((k, other)) if other != j => {
                    return Err(ClockError::DifferentJobs {
                        a: name(*k),
                        job_a: other.clone(),
                        b: name(i),
                        job_b: j.clone(),
                    });
                }
                None => job = Some((i, j.clone())),
                _ => {}
            }
        }
    }
    let ranks: Vec<u32> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| id.rank.unwrap_or(i as u32))
        .collect();
    let mut by_rank: HashMap<u32, usize> = HashMap::new();
    for (i, &r) in ranks.iter().enumerate() {
        if let Some(&k) = by_rank.get(&r) {
            return Err(ClockError::DuplicateRank {
                rank: r,
                a: name(k),
                b: name(i),
            });
        }
        by_rank.insert(r, i);
    }
    let reference = match options.reference {
        Some(r) => *by_rank.get(&r).ok_or_else(|| {
            let mut all: Vec<u32> = ranks.clone();
            all.sort_unstable();
            let all: Vec<String> = all.iter().map(|r| r.to_string()).collect();
            ClockError::NoReference(r, all.join(", "))
        })?,
        None => by_rank.get(&0).copied().unwrap_or(0),
    };
    // Placement relative to the reference's start.
    let base = starts[reference];
    let placed = ClockCorrection::new(
        starts
            .iter()
            .map(|&s| LinearClock {
                shift_ns: if s > 0 && base > 0 {
                    signed_diff(s, base)
                } else {
                    0
                },
                ..LinearClock::default()
            })
            .collect(),
    );
    let min_latency = i64::try_from(options.min_latency_ns).unwrap_or(i64::MAX);

    // Pass 1: match, build the hulls, count the violations before.
    // Per pair (i < j), with x on j's clock and y = i − j: i → j gives points to stay above,
    // j → i points to stay below.
    let mut pairs: BTreeMap<(usize, usize), (Hull, Hull)> = BTreeMap::new();
    let mut before = Violations::default();
    let mut per_process = vec![0u64; files];
    let pass = |clock: &ClockCorrection,
                on_match: &mut dyn FnMut(&Matched)|
     -> Result<(Matcher, u64, u64, u64), ClockError> {
        let readers = (0..files).map(open).collect::<Result<Vec<_>, _>>()?;
        let mut merge = Merge::new(readers, clock.clone()).only_types(&[SEND_EVENT, RECV_EVENT]);
        let mut matcher = Matcher {
            max_pending: options.max_unmatched.max(1),
            ..Matcher::default()
        };
        let (mut events, mut unknown, mut undecoded) = (0u64, 0u64, 0u64);
        while let Some(rec) = merge.next() {
            events += 1;
            let Some(msg) = merge
                .schema_of(&rec)
                .and_then(|s| decode_msg(s, &rec.payload))
            else {
                undecoded += 1;
                continue;
            };
            let (peer, is_send, tag, comm) = match msg {
                Msg::Send { peer, tag, comm } => (peer, true, tag, comm),
                Msg::Recv { peer, tag, comm } => (peer, false, tag, comm),
            };
            let Some(&other) = by_rank.get(&peer) else {
                unknown += 1;
                continue;
            };
            let key = if is_send {
                (rec.file, other, comm, tag)
            } else {
                (other, rec.file, comm, tag)
            };
            if let Some(m) = matcher.push(key, is_send, rec.time) {
                on_match(&m);
            }
        }
        Ok((matcher, events, unknown, undecoded))
    };
    let (matcher, events, unknown_peers, undecoded) = pass(&placed, &mut |m| {
        before.check(m, &ranks, min_latency);
        per_process[m.src] += 1;
        per_process[m.dst] += 1;
        if m.src == m.dst {
            return;
        }
        let (i, j) = (m.src.min(m.dst), m.src.max(m.dst));
        let (above, below) = pairs
            .entry((i, j))
            .or_insert_with(|| (Hull::upper(), Hull::lower()));
        if m.src == i {
            // i → j: y(r) ≥ s − r, r on j's clock.
            above.add(m.recv, m.send.saturating_sub(m.recv));
        } else {
            // j → i: y(s) ≤ r − s, s on j's clock.
            below.add(m.send, m.recv.saturating_sub(m.send));
        }
    })?;
    if events == 0 {
        return Err(ClockError::NoMessages);
    }
    if matcher.matched == 0 {
        return Err(ClockError::NothingMatched(events));
    }
    let (unmatched_sends, unmatched_recvs) = matcher.unmatched();

    // The spanning tree: Prim's, maximum weight (weaker direction, then all messages).
    let mut adjacent: Vec<Vec<(usize, (u64, u64))>> = vec![Vec::new(); files];
    for (&(i, j), h) in &pairs {
        let w = (h.0.count().min(h.1.count()), h.0.count() + h.1.count());
        adjacent[i].push((j, w));
        adjacent[j].push((i, w));
    }
    let mut clocks = vec![LinearClock::default(); files];
    let mut from: Vec<Option<EstimatedFrom>> = vec![None; files];
    let mut done = vec![false; files];
    done[reference] = true;
    clocks[reference] = placed.clock(reference);
    let mut frontier = BinaryHeap::new();
    let push_edges = |frontier: &mut BinaryHeap<_>, p: usize, done: &[bool]| {
        for &(q, w) in &adjacent[p] {
            if !done[q] {
                frontier.push((w, Reverse(q), Reverse(p)));
            }
        }
    };
    push_edges(&mut frontier, reference, &done);
    while let Some((_, Reverse(child), Reverse(parent))) = frontier.pop() {
        if done[child] {
            continue;
        }
        done[child] = true;
        let (i, j) = (parent.min(child), parent.max(child));
        let Some(hulls) = pairs.get_mut(&(i, j)) else {
            continue;
        };
        let (sent_ij, sent_ji) = (hulls.0.count(), hulls.1.count());
        let above = hulls.0.points().to_vec();
        let below = hulls.1.points().to_vec();
        let Some(line) = estimate_line(&above, &below, options.min_latency_ns, options.max_drift)
        else {
            continue;
        };
        // The line gives i's placed time from j's: t_i = t_j + α + β t_j.
        let (alpha, beta) = if parent == i {
            (line.offset_ns, line.drift)
        } else {
            // Inverted: t_j = t_i + α' + β' t_i.
            (
                -line.offset_ns / (1.0 + line.drift),
                -line.drift / (1.0 + line.drift),
            )
        };
        // The child's placed time x goes to the parent's placed time x + α + βx, which the
        // parent's clock puts on the reference's. Both are placed by their shifts: work in
        // placed times.
        // Parent: ref = P + a_p + b_p P, with P its placed time.
        let (a_p, b_p) = (clocks[parent].offset_ns, clocks[parent].drift);
        clocks[child] = LinearClock {
            shift_ns: placed.clock(child).shift_ns,
            offset_ns: a_p + alpha * (1.0 + b_p),
            drift: b_p + beta + beta * b_p,
        };
        let (received, sent) = if parent == i {
            (sent_ij, sent_ji)
        } else {
            (sent_ji, sent_ij)
        };
        from[child] = Some(EstimatedFrom {
            peer: parent,
            received,
            sent,
            line,
        });
        push_edges(&mut frontier, child, &done);
    }
    for (i, c) in clocks.iter_mut().enumerate() {
        if !done[i] {
            *c = placed.clock(i);
        }
    }
    repair_offsets(&mut clocks, &mut pairs, &done, reference, min_latency);
    let corrected = ClockCorrection::new(clocks.clone());

    // Pass 2: the violations after.
    let mut after = Violations::default();
    pass(&corrected, &mut |m| after.check(m, &ranks, min_latency))?;

    Ok(ClockReport {
        job: job.map(|(_, j)| j),
        reference,
        processes: (0..files)
            .map(|i| ProcessClock {
                file: name(i),
                rank: ranks[i],
                rank_from_event: ids[i].rank.is_some(),
                clock: clocks[i],
                from: from[i],
                messages: per_process[i],
            })
            .collect(),
        matched: matcher.matched,
        unmatched_sends,
        unmatched_recvs,
        dropped: matcher.dropped,
        unknown_peers,
        undecoded,
        min_latency_ns: options.min_latency_ns,
        before,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hull_keeps_only_its_points() {
        let mut h = Hull::upper();
        for x in 0..5000i64 {
            // A parabola opening downwards: every point is on the upper hull...
            h.add(x, -(x - 2500) * (x - 2500) / 1000);
            // ...and these below it never are.
            h.add(x, -10_000_000);
        }
        assert_eq!(h.count(), 10_000);
        assert!(h.kept() < 5000 + HULL_BUFFER + 2);
        let mut l = Hull::lower();
        for x in 0..10_000i64 {
            l.add(x, 7 + x / 3);
        }
        assert!(l.points().len() <= 2 * 3334, "{}", l.points().len());
    }

    #[test]
    fn the_line_lies_between_two_bands() {
        // Truth: y = 1000 + 2e-5 x; delays 10..60 ns each way.
        let truth = |x: i64| 1000.0 + 2e-5 * x as f64;
        let mut above = Hull::upper();
        let mut below = Hull::lower();
        for k in 0..200i64 {
            let x = k * 1_000_000;
            let d = 10 + (k * 7919) % 50;
            above.add(x, (truth(x) - d as f64).round() as i64);
            let d = 10 + (k * 104_729) % 50;
            below.add(x + 500, (truth(x + 500) + d as f64).round() as i64);
        }
        let line = estimate_line(above.points(), below.points(), 0, DEFAULT_MAX_DRIFT).unwrap();
        assert_eq!(line.method, Method::ConvexHull);
        for x in [0i64, 100_000_000, 199_000_000] {
            let y = line.offset_ns + line.drift * x as f64;
            assert!((y - truth(x)).abs() <= 11.0, "at {x}: {y} vs {}", truth(x));
        }
        assert!((line.drift - 2e-5).abs() < 1e-7, "{}", line.drift);
        let (a, b) = line.drift_range.unwrap();
        assert!(a <= 2e-5 && 2e-5 <= b && b - a < 1e-6, "{a}..{b}");
    }

    #[test]
    fn one_message_each_way_gives_an_offset() {
        let line = estimate_line(&[(0, -100)], &[(10, 300)], 0, DEFAULT_MAX_DRIFT).unwrap();
        assert_eq!(line.method, Method::OffsetOnly);
        assert_eq!(line.drift, 0.0);
        assert!((line.offset_ns - 100.0).abs() < 1e-6);
        let one_way = estimate_line(&[(0, -100), (5, -50)], &[], 20, DEFAULT_MAX_DRIFT).unwrap();
        assert_eq!(one_way.method, Method::OneWay);
        assert!((one_way.offset_ns - -30.0).abs() < 1e-6);
    }

    #[test]
    fn one_message_each_way_far_apart_under_drift_keeps_its_order() {
        // 200 ppm over 10 s: 2 ms, more than both delays.
        let y = |x: i64| 2e-4 * x as f64;
        let a = (10_000_000_000, (y(10_000_000_000) - 10.0) as i64);
        let b = (0, (y(0) + 10.0) as i64);
        let line = estimate_line(&[a], &[b], 0, DEFAULT_MAX_DRIFT).unwrap();
        assert!(
            line.offset_ns + line.drift * a.0 as f64 >= a.1 as f64 - 1e-3,
            "{line:?}"
        );
        assert!(
            line.offset_ns + line.drift * b.0 as f64 <= b.1 as f64 + 1e-3,
            "{line:?}"
        );
    }

    #[test]
    fn crossing_hulls_fall_back_to_an_offset() {
        let line =
            estimate_line(&[(0, 100), (1000, 100)], &[(500, 0)], 0, DEFAULT_MAX_DRIFT).unwrap();
        assert_eq!(line.method, Method::OffsetOnly);
        assert!(line.margin_ns < 0.0);
    }

    #[test]
    fn clocks_saturate() {
        let c = LinearClock {
            shift_ns: i64::MAX,
            offset_ns: 1e30,
            drift: 0.5,
        };
        assert_eq!(c.map(u64::MAX), i64::MAX);
        let c = LinearClock {
            shift_ns: i64::MIN,
            offset_ns: -1e30,
            drift: 0.0,
        };
        assert_eq!(c.map(0), i64::MIN);
        assert_eq!(ClockCorrection::default().map(3, 5), 5);
    }

    /// Offsets at `a`, no drift, for three processes.
    fn offsets(a: [f64; 3]) -> Vec<LinearClock> {
        a.iter()
            .map(|&o| LinearClock {
                offset_ns: o,
                ..LinearClock::default()
            })
            .collect()
    }

    #[test]
    fn repair_moves_a_receiver_that_the_tree_left_too_early() {
        // 0 → 2: sent at 1000 on 0's clock, received at 1010 on 2's. The tree put 2 at −50,
        // which would receive it at 960, before its send: 2 must move to −10 at least.
        let mut pairs = BTreeMap::new();
        let (mut above, below) = (Hull::upper(), Hull::lower());
        above.add(1010, 1000 - 1010);
        pairs.insert((0, 2), (above, below));
        let mut clocks = offsets([0.0, 7.0, -50.0]);
        repair_offsets(&mut clocks, &mut pairs, &[true; 3], 0, 0);
        assert_eq!(clocks[0].offset_ns, 0.0, "the reference stays");
        assert_eq!(
            clocks[1].offset_ns, 7.0,
            "a process without the violation stays"
        );
        assert_eq!(clocks[2].offset_ns, -10.0);
    }

    #[test]
    fn repair_keeps_the_reference_where_it_was() {
        // 2 → 0: sent at 500 on 2's clock, received at 505 on 0's. With 2 at +20, the receive
        // (505) comes before the send (520): the reference stays, the sender moves earlier.
        let mut pairs = BTreeMap::new();
        let (above, mut below) = (Hull::upper(), Hull::lower());
        below.add(500, 505 - 500);
        pairs.insert((0, 2), (above, below));
        let mut clocks = offsets([0.0, 3.0, 20.0]);
        repair_offsets(&mut clocks, &mut pairs, &[true; 3], 0, 1);
        assert_eq!(clocks[0].offset_ns, 0.0);
        // 505 ≥ 500 + a₂ + 1: a₂ ≤ 4.
        assert_eq!(clocks[2].offset_ns, 4.0);
        assert_eq!(
            clocks[1].offset_ns, 3.0,
            "a process without the violation stays"
        );
    }
}
