//! Per-rank timelines of an MPI job: Falcon's life-time view with a row per rank instead of
//! per thread, each coloured by whether the rank was computing or inside an MPI call (and of
//! which kind), with every matched message drawn as an arrow from its send's start on the
//! sender's row to its receive's completion on the receiver's (`/api/mpi/timeline`).
//!
//! # Where it comes from
//!
//! The job's MPI analysis ([`crate::mpi`]) feeds it as it takes its events in: a segment when a
//! thread's `gyr.mpi.end` closes the `gyr.mpi.begin` it opened, a message when a receive is
//! matched with its send. Times are the analysis's: wall-clock nanoseconds through each
//! program's anchor, so that the rows of ranks on other clocks line up (as well as their
//! clocks agree). A rank that has not finalized is drawn up to the job's latest event, as a
//! thread of the life-time view runs to the live end: computing since its last call, or in
//! the call still open (a rank blocked in `MPI_Recv` shows as receiving, not as silent). A rank
//! whose process is gone without finalizing (killed, crashed) ends at its last event, and its
//! label says so.
//!
//! # Storage and level of detail
//!
//! Segments and messages are kept in arrival order, which is nearly time order (each rank's
//! stream is ordered, and a match waits at most for the later side's batch). Every
//! [`BLOCK`] segments of a rank are summarised (their time span and time per state), and every
//! [`CHUNK`] messages of a job by their time span, so that a tile skips whole blocks outside
//! its window and adds a block that falls within one pixel at once: zoomed out over a long run
//! it looks at the summaries, not at the million segments. Nothing is assumed about the order
//! of what arrives: a stream whose times go backwards only widens the summaries it falls in.
//!
//! # Bounds
//!
//! At most [`MAX_SEGMENTS`] segments and [`MAX_MESSAGES`] messages per job: past them the
//! oldest half is forgotten (segments ending before the job's median end, so that every row
//! starts at the same time; the messages that arrived first), counted, and the tile says from
//! when the view is complete. At most [`MAX_CALL_NAMES`] call names of [`MAX_NAME`] bytes per
//! job; calls past them are drawn as "other MPI call", counted. The ranks and their open calls
//! are the analysis's, bounded there.

use crate::protocol::{RankArrow, RankTile, TimelineRow};
use std::collections::{HashMap, VecDeque};

/// Segments kept per job (24 bytes each and 2.5 for their summaries: at most 28 MB).
pub(crate) const MAX_SEGMENTS: usize = 1 << 20;
/// Matched messages kept per job (40 bytes each: 10 MB).
pub(crate) const MAX_MESSAGES: usize = 1 << 18;
/// Call names kept per job (Open MPI has some 400 functions; the interposer records about 70).
pub(crate) const MAX_CALL_NAMES: usize = 256;
/// Bytes of a call name kept: the longest MPI function name has 33.
pub(crate) const MAX_NAME: usize = 64;
/// Segments per summary block.
const BLOCK: usize = 64;
/// Messages per chunk.
const CHUNK: usize = 1024;

/// What a rank is doing: the states of a rank tile's runs, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    /// Outside MPI.
    Computing = 0,
    /// In a send (`MPI_Send`, `MPI_Isend`, `MPI_Ssend`, ...).
    Send = 1,
    /// In a receive or a probe (`MPI_Recv`, `MPI_Sendrecv`, `MPI_Probe`, ...).
    Receive = 2,
    /// Waiting for or testing requests (`MPI_Wait*`, `MPI_Test*`).
    WaitTest = 3,
    /// In a collective (`MPI_Barrier`, `MPI_Allreduce`, ...).
    Collective = 4,
    /// In any other MPI call (`MPI_Init`, `MPI_Comm_split`, ...).
    Other = 5,
}

/// States a run can have.
pub(crate) const STATES: usize = 6;

/// The kind of MPI call `call` is, whether the C (`MPI_Send`) or the Fortran (`mpi_send_`)
/// binding recorded it.
pub(crate) fn classify(call: &str) -> State {
    let c = call.to_ascii_lowercase();
    let c = c.trim_end_matches('_');
    let c = c
        .strip_prefix("pmpi_")
        .or_else(|| c.strip_prefix("mpi_"))
        .unwrap_or(c);
    // Nonblocking and persistent variants are named as their blocking call with a prefix.
    let base = c.strip_prefix('i').filter(|b| {
        [
            "send", "ssend", "bsend", "rsend", "recv", "mrecv", "probe", "mprobe",
        ]
        .iter()
        .chain(COLLECTIVES.iter())
        .any(|k| b == k)
    });
    let b = base.unwrap_or(c);
    let b = b.strip_suffix("_init").unwrap_or(b);
    if b.starts_with("sendrecv") || ["recv", "mrecv", "probe", "mprobe"].contains(&b) {
        State::Receive
    } else if ["send", "ssend", "bsend", "rsend"].contains(&b) {
        State::Send
    } else if b.starts_with("wait") || b.starts_with("test") {
        State::WaitTest
    } else if COLLECTIVES.contains(&b) || b.starts_with("neighbor_") {
        State::Collective
    } else {
        State::Other
    }
}

/// The collectives, without their `MPI_` or nonblocking `MPI_I` prefix.
const COLLECTIVES: [&str; 17] = [
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "exscan",
];

/// A stretch of time one of a rank's threads spent in one MPI call (wall-clock ns).
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: i64,
    end: i64,
    call: u16,
    state: State,
}

/// A summary of [`BLOCK`] consecutive segments of a rank.
#[derive(Debug, Clone, Copy)]
struct Block {
    /// The earliest start and latest end among them.
    start: i64,
    end: i64,
    /// Time per state, ns (saturating: a crafted stream may claim centuries).
    time: [i64; STATES],
    /// Per state, the call of the longest of them in it, and its length.
    call: [(u16, i64); STATES],
}

impl Block {
    fn of(segments: &[Segment]) -> Block {
        let mut b = Block {
            start: i64::MAX,
            end: i64::MIN,
            time: [0; STATES],
            call: [(0, -1); STATES],
        };
        for s in segments {
            b.start = b.start.min(s.start);
            b.end = b.end.max(s.end);
            let ns = s.end.saturating_sub(s.start);
            let t = &mut b.time[s.state as usize];
            *t = t.saturating_add(ns);
            let c = &mut b.call[s.state as usize];
            if ns > c.1 {
                *c = (s.call, ns);
            }
        }
        b
    }
}

/// One rank's row: its segments in arrival order, and a summary of every full block of them.
#[derive(Debug, Default)]
struct Row {
    segments: Vec<Segment>,
    blocks: Vec<Block>,
}

impl Row {
    fn push(&mut self, s: Segment) {
        self.segments.push(s);
        if self.segments.len().is_multiple_of(BLOCK) {
            let n = self.segments.len();
            self.blocks.push(Block::of(&self.segments[n - BLOCK..]));
        }
    }

    /// Forgets the segments that ended by `cut`; returns how many.
    fn forget_until(&mut self, cut: i64) -> usize {
        let before = self.segments.len();
        self.segments.retain(|s| s.end > cut);
        self.blocks = self.segments.chunks_exact(BLOCK).map(Block::of).collect();
        before - self.segments.len()
    }

    /// Adds the row's segments overlapping `[t0, t1)` to `cols`.
    fn draw(&self, t0: i64, t1: i64, cols: &mut Columns) {
        for (k, chunk) in self.segments.chunks(BLOCK).enumerate() {
            if let Some(b) = self.blocks.get(k) {
                if b.start >= t1 || b.end <= t0 {
                    continue;
                }
                // A whole block within one pixel: its summary says all that pixel can show.
                if b.start >= t0 && b.end <= t1 {
                    let x = cols.px(b.start);
                    if x == cols.px(b.end.saturating_sub(1).max(b.start)) {
                        cols.add_block(x, b);
                        continue;
                    }
                }
            }
            for s in chunk {
                cols.add_span(s.start.max(t0), s.end.min(t1), s.state, s.call);
            }
        }
    }
}

/// A matched message (wall-clock ns).
#[derive(Debug, Clone, Copy)]
struct Message {
    send: i64,
    recv: i64,
    sender: u32,
    receiver: u32,
    bytes: u64,
    tag: i32,
}

/// Up to [`CHUNK`] messages in arrival order, and the span of their send and receive times.
#[derive(Debug)]
struct Chunk {
    lo: i64,
    hi: i64,
    messages: Vec<Message>,
}

/// Time per state and the longest call of each, per pixel column of one row.
struct Columns {
    t0: i64,
    ns_per_px: f64,
    width: usize,
    /// Ns per MPI state (index 0, computing, is worked out from `cover`).
    time: Vec<[f64; STATES]>,
    /// Ns of the rank's life (from its announcement to its latest event) in the column.
    cover: Vec<f64>,
    /// Per state, the call with the most time in the column, and that time: a run names a
    /// call of its own state.
    call: Vec<[(u16, f64); STATES]>,
}

impl Columns {
    fn new(t0: i64, ns_per_px: f64, width: usize) -> Self {
        Columns {
            t0,
            ns_per_px,
            width,
            time: vec![[0.0; STATES]; width],
            cover: vec![0.0; width],
            call: vec![[(0, 0.0); STATES]; width],
        }
    }

    fn clear(&mut self) {
        self.time.fill([0.0; STATES]);
        self.cover.fill(0.0);
        self.call.fill([(0, 0.0); STATES]);
    }

    /// The column of time `t` (at least `t0`), possibly past the last.
    fn px(&self, t: i64) -> usize {
        (t.saturating_sub(self.t0) as f64 / self.ns_per_px) as usize
    }

    /// Calls `f(column, ns)` for each column `[a, b)` crosses.
    fn spread(&self, a: i64, b: i64, mut f: impl FnMut(usize, f64)) {
        if b <= a {
            return;
        }
        let width = self.width;
        let x1 = (b.saturating_sub(self.t0) as f64 / self.ns_per_px).min(width as f64);
        let mut x = a.saturating_sub(self.t0) as f64 / self.ns_per_px;
        while x < x1 {
            let col = x as usize;
            if col >= width {
                break;
            }
            let next = ((col + 1) as f64).min(x1);
            f(col, (next - x) * self.ns_per_px);
            x = next;
        }
    }

    fn add_cover(&mut self, a: i64, b: i64) {
        let mut cover = std::mem::take(&mut self.cover);
        self.spread(a, b, |c, ns| cover[c] += ns);
        self.cover = cover;
    }

    fn add_span(&mut self, a: i64, b: i64, state: State, call: u16) {
        let (mut time, mut calls) = (
            std::mem::take(&mut self.time),
            std::mem::take(&mut self.call),
        );
        self.spread(a, b, |c, ns| {
            time[c][state as usize] += ns;
            let best = &mut calls[c][state as usize];
            if ns > best.1 {
                *best = (call, ns);
            }
        });
        (self.time, self.call) = (time, calls);
    }

    fn add_block(&mut self, col: usize, b: &Block) {
        let Some(t) = self.time.get_mut(col) else {
            return;
        };
        for (a, ns) in t.iter_mut().zip(b.time) {
            *a += ns as f64;
        }
        for (best, &(call, ns)) in self.call[col].iter_mut().zip(&b.call) {
            if ns as f64 > best.1 {
                *best = (call, ns as f64);
            }
        }
    }

    /// Runs of columns with the same dominant state and call: `(x0, x1, state, 1 + call)`,
    /// call 0 when computing.
    fn runs(&self) -> Vec<(u32, u32, u8, u64)> {
        let mut runs: Vec<(u32, u32, u8, u64)> = Vec::new();
        for (x, t) in self.time.iter().enumerate() {
            let mpi: f64 = t[1..].iter().sum();
            let computing = (self.cover[x] - mpi).max(0.0);
            if computing + mpi <= 0.0 {
                continue;
            }
            let (mut state, mut most) = (State::Computing as usize, computing);
            for (s, &ns) in t.iter().enumerate().skip(1) {
                if ns > most {
                    (state, most) = (s, ns);
                }
            }
            let object = if state == State::Computing as usize {
                0
            } else {
                1 + u64::from(self.call[x][state].0)
            };
            let x = x as u32;
            match runs.last_mut() {
                Some(r) if r.1 == x && r.2 == state as u8 && r.3 == object => r.1 += 1,
                _ => runs.push((x, x + 1, state as u8, object)),
            }
        }
        runs
    }
}

/// What the analysis knows of a rank when a tile is drawn.
#[derive(Debug)]
pub(crate) struct RankSpan<'a> {
    pub(crate) rank: u32,
    /// Its announcement and latest event (wall-clock ns).
    pub(crate) first: i64,
    pub(crate) last: i64,
    /// Whether its `MPI_Finalize` returned (else it is taken to run on to the live end).
    pub(crate) finalized: bool,
    /// Whether its process is gone (with everything it sent taken in): it runs no further.
    pub(crate) gone: bool,
    /// Its threads' calls in progress: when each began, and the call.
    pub(crate) open: Vec<(i64, &'a str)>,
}

/// The whole job's part of a tile's request.
#[derive(Debug)]
pub(crate) struct JobSpan<'a> {
    pub(crate) job: &'a str,
    pub(crate) size: u32,
    /// Where the tile's seconds count from, and the job's latest event (wall-clock ns).
    pub(crate) origin: i64,
    pub(crate) now: i64,
    /// Ranks in the whole job.
    pub(crate) total_rows: usize,
    /// The index of the first of `ranks` among them.
    pub(crate) first_row: usize,
    /// The rows asked for, in rank order.
    pub(crate) ranks: Vec<RankSpan<'a>>,
}

/// One job's rank timelines.
#[derive(Debug)]
pub(crate) struct RankTimeline {
    rows: HashMap<u32, Row>,
    /// Segments kept, over every row.
    segments: usize,
    chunks: VecDeque<Chunk>,
    messages: usize,
    /// Call names and kinds; index 0 is every call past the bound.
    calls: Vec<(String, State)>,
    call_ids: HashMap<String, u16>,
    /// Before this (wall-clock ns) segments were forgotten.
    complete_from: i64,
    segments_forgotten: u64,
    messages_forgotten: u64,
    /// Segments drawn as "other MPI call" because the names were past the bound.
    calls_past_limit: u64,
    /// Segments that ended before they began (a crafted stream, or a clock set back).
    backwards: u64,
    max_segments: usize,
    max_messages: usize,
    max_calls: usize,
}

impl Default for RankTimeline {
    fn default() -> Self {
        Self::bounded(MAX_SEGMENTS, MAX_MESSAGES, MAX_CALL_NAMES)
    }
}

impl RankTimeline {
    /// A timeline keeping at most `segments` segments, `messages` messages and `calls` call
    /// names.
    pub(crate) fn bounded(segments: usize, messages: usize, calls: usize) -> Self {
        RankTimeline {
            rows: HashMap::new(),
            segments: 0,
            chunks: VecDeque::new(),
            messages: 0,
            calls: vec![("other MPI call".to_owned(), State::Other)],
            call_ids: HashMap::new(),
            complete_from: i64::MIN,
            segments_forgotten: 0,
            messages_forgotten: 0,
            calls_past_limit: 0,
            backwards: 0,
            max_segments: segments.max(2),
            max_messages: messages.max(2),
            max_calls: calls.clamp(1, u16::MAX as usize),
        }
    }

    /// The id of call `name`, kept if there is room; `None` past the bound.
    pub(crate) fn intern(&mut self, name: &str) -> Option<u16> {
        let name = truncate(name, MAX_NAME);
        if let Some(&id) = self.call_ids.get(name) {
            return Some(id);
        }
        if self.calls.len() >= self.max_calls {
            return None;
        }
        let id = self.calls.len() as u16;
        self.calls.push((name.to_owned(), classify(name)));
        self.call_ids.insert(name.to_owned(), id);
        Some(id)
    }

    /// The id and kind of call `name` if it is known (or of "other MPI call" if not).
    fn lookup(&self, name: &str) -> (u16, State) {
        let id = self
            .call_ids
            .get(truncate(name, MAX_NAME))
            .copied()
            .unwrap_or(0);
        (id, self.calls[id as usize].1)
    }

    /// Rank `rank` spent `[start, end)` in call `call`.
    pub(crate) fn segment(&mut self, rank: u32, start: i64, end: i64, call: &str) {
        if end < start {
            self.backwards += 1;
            return;
        }
        let id = self.intern(call).unwrap_or_else(|| {
            self.calls_past_limit += 1;
            0
        });
        let state = self.calls[id as usize].1;
        self.rows.entry(rank).or_default().push(Segment {
            start,
            end,
            call: id,
            state,
        });
        self.segments += 1;
        if self.segments > self.max_segments {
            self.forget_oldest_segments();
        }
    }

    /// Forgets the segments that ended before the job's median end: the oldest half, with
    /// every row cut at the same time.
    fn forget_oldest_segments(&mut self) {
        let mut ends: Vec<i64> = self
            .rows
            .values()
            .flat_map(|r| r.segments.iter().map(|s| s.end))
            .collect();
        let mid = ends.len() / 2;
        let (_, &mut cut, _) = ends.select_nth_unstable(mid);
        drop(ends);
        let mut gone = 0;
        for row in self.rows.values_mut() {
            gone += row.forget_until(cut);
        }
        self.rows.retain(|_, r| !r.segments.is_empty());
        self.segments -= gone;
        self.segments_forgotten += gone as u64;
        self.complete_from = self.complete_from.max(cut);
    }

    /// Rank `rank` was announced again by another program (the job ran again under its name):
    /// its row starts afresh.
    pub(crate) fn forget_rank(&mut self, rank: u32) {
        if let Some(r) = self.rows.remove(&rank) {
            self.segments -= r.segments.len();
        }
    }

    /// A message from `sender`, sent from `send`, arrived at `receiver` at `recv`.
    pub(crate) fn message(
        &mut self,
        sender: u32,
        receiver: u32,
        send: i64,
        recv: i64,
        bytes: u64,
        tag: i32,
    ) {
        let m = Message {
            send,
            recv,
            sender,
            receiver,
            bytes,
            tag,
        };
        let (lo, hi) = (send.min(recv), send.max(recv));
        match self.chunks.back_mut() {
            Some(c) if c.messages.len() < CHUNK => {
                c.lo = c.lo.min(lo);
                c.hi = c.hi.max(hi);
                c.messages.push(m);
            }
            _ => self.chunks.push_back(Chunk {
                lo,
                hi,
                messages: vec![m],
            }),
        }
        self.messages += 1;
        if self.messages > self.max_messages {
            // The oldest half, in whole chunks (the last chunk is never the first).
            while self.messages > self.max_messages / 2 && self.chunks.len() > 1 {
                let c = self.chunks.pop_front().expect("more than one chunk");
                self.messages -= c.messages.len();
                self.messages_forgotten += c.messages.len() as u64;
            }
        }
    }

    /// The viewport `[t0_s, t1_s)` seconds from the job's `origin`, `width` pixels wide, of the
    /// ranks in `job.ranks`, with at most `max_arrows` messages.
    pub(crate) fn tile(
        &self,
        job: JobSpan<'_>,
        t0_s: f64,
        t1_s: f64,
        width: usize,
        max_arrows: usize,
    ) -> RankTile {
        let width = width.clamp(1, 8192);
        // Saturating: a page (or anyone with a token) may ask for any range, NaN included.
        let at = |s: f64| job.origin.saturating_add((s * 1e9) as i64);
        let t0 = at(t0_s);
        let t1 = at(t1_s).max(t0.saturating_add(1));
        let span = t1.saturating_sub(t0).max(1);
        let mut cols = Columns::new(t0, span as f64 / width as f64, width);
        let secs = |ns: i64| ns.saturating_sub(job.origin) as f64 / 1e9;
        let rows = job
            .ranks
            .iter()
            .map(|r| {
                cols.clear();
                // The rank's life (computing unless a segment says otherwise), as far as the
                // view is complete, and until it finalized; a rank that has not runs on to the
                // job's latest event, as a thread of the life-time view does, and so does a
                // call still open, unless its process is gone.
                let end = if (r.finalized && r.open.is_empty()) || r.gone {
                    r.last
                } else {
                    r.last.max(job.now)
                };
                let from = r.first.max(self.complete_from).max(t0);
                cols.add_cover(from, end.min(t1));
                if let Some(row) = self.rows.get(&r.rank) {
                    row.draw(t0, t1, &mut cols);
                }
                for &(begin, call) in &r.open {
                    let (id, state) = self.lookup(call);
                    cols.add_span(begin.max(t0), end.min(t1), state, id);
                }
                let label = if r.gone && !r.finalized {
                    format!("rank {} (gone, no Finalize)", r.rank)
                } else {
                    format!("rank {}", r.rank)
                };
                TimelineRow {
                    label,
                    threads: vec![u64::from(r.rank)],
                    runs: cols.runs(),
                }
            })
            .collect();
        let (arrows, arrows_omitted) = self.arrows(&job.ranks, t0, t1, max_arrows, secs);
        RankTile {
            job: job.job.to_owned(),
            size: job.size,
            start_s: secs(job.origin.max(self.complete_from)),
            now_s: secs(job.now),
            t0_s: secs(t0),
            t1_s: secs(t1),
            width: width as u32,
            first_row: job.first_row as u32,
            total_rows: job.total_rows as u32,
            rows,
            calls: self.calls.iter().map(|(n, _)| n.clone()).collect(),
            arrows,
            arrows_omitted,
            segments: self.segments as u64,
            messages: self.messages as u64,
            segments_forgotten: self.segments_forgotten,
            messages_forgotten: self.messages_forgotten,
            calls_past_limit: self.calls_past_limit,
            backwards: self.backwards,
        }
    }

    /// The messages between the ranks shown whose send or receive falls in `[t0, t1)`, unless
    /// there are more than `max`: then none, and how many.
    fn arrows(
        &self,
        ranks: &[RankSpan<'_>],
        t0: i64,
        t1: i64,
        max: usize,
        secs: impl Fn(i64) -> f64,
    ) -> (Vec<RankArrow>, u32) {
        let (Some(first), Some(last)) = (ranks.first(), ranks.last()) else {
            return (Vec::new(), 0);
        };
        // The rows are consecutive ranks in rank order: every rank between them is shown.
        let shown = first.rank..=last.rank;
        let inside = |t: i64| t0 <= t && t < t1;
        let mut out = Vec::new();
        let mut n = 0usize;
        for c in &self.chunks {
            if c.hi < t0 || c.lo >= t1 {
                continue;
            }
            for m in &c.messages {
                if !(inside(m.send) || inside(m.recv))
                    || !shown.contains(&m.sender)
                    || !shown.contains(&m.receiver)
                {
                    continue;
                }
                n += 1;
                if n <= max {
                    out.push(RankArrow {
                        sender: m.sender,
                        send_s: secs(m.send),
                        receiver: m.receiver,
                        recv_s: secs(m.recv),
                        bytes: m.bytes,
                        tag: m.tag,
                    });
                }
            }
        }
        if n > max {
            (Vec::new(), u32::try_from(n).unwrap_or(u32::MAX))
        } else {
            (out, 0)
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn span(ranks: &[u32], now: i64) -> JobSpan<'static> {
        JobSpan {
            job: "j",
            size: ranks.len() as u32,
            origin: 0,
            now,
            total_rows: ranks.len(),
            first_row: 0,
            ranks: ranks
                .iter()
                .map(|&rank| RankSpan {
                    rank,
                    first: 0,
                    last: now,
                    finalized: false,
                    gone: false,
                    open: Vec::new(),
                })
                .collect(),
        }
    }

    /// The state drawn at pixel `x` of row `row`.
    fn state_at(t: &RankTile, row: usize, x: u32) -> Option<u8> {
        t.rows[row]
            .runs
            .iter()
            .find(|r| r.0 <= x && x < r.1)
            .map(|r| r.2)
    }

    #[test]
    fn calls_are_sorted_into_kinds_whatever_the_binding() {
        for (call, state) in [
            ("MPI_Send", State::Send),
            ("MPI_Isend", State::Send),
            ("mpi_ssend_", State::Send),
            ("MPI_Send_init", State::Send),
            ("MPI_Recv", State::Receive),
            ("MPI_Irecv", State::Receive),
            ("MPI_Sendrecv_replace", State::Receive),
            ("MPI_Iprobe", State::Receive),
            ("MPI_Waitall", State::WaitTest),
            ("mpi_test_", State::WaitTest),
            ("MPI_Allreduce", State::Collective),
            ("MPI_Ibarrier", State::Collective),
            ("MPI_Reduce_scatter_block", State::Collective),
            ("MPI_Init", State::Other),
            ("MPI_Comm_split", State::Other),
            ("MPI_Info_set", State::Other),
            ("", State::Other),
        ] {
            assert_eq!(classify(call), state, "{call}");
        }
    }

    /// A rank computes, sends, receives and waits: each shows where it was, in its kind, the
    /// rest of its life as computing, and the message as an arrow from send to receive.
    #[test]
    fn segments_and_messages_are_drawn_where_they_were() {
        let mut tl = RankTimeline::default();
        // 0..100 ms at 100 px: one pixel per ms.
        tl.segment(0, 10 * MS, 20 * MS, "MPI_Send");
        tl.segment(1, 5 * MS, 30 * MS, "MPI_Recv");
        tl.segment(1, 60 * MS, 70 * MS, "MPI_Barrier");
        tl.message(0, 1, 10 * MS, 30 * MS, 8, 3);
        let t = tl.tile(span(&[0, 1], 100 * MS), 0.0, 0.1, 100, 10);
        assert_eq!((t.total_rows, t.rows.len()), (2, 2));
        assert_eq!(t.rows[1].label, "rank 1");
        assert_eq!(state_at(&t, 0, 2), Some(State::Computing as u8));
        assert_eq!(state_at(&t, 0, 15), Some(State::Send as u8));
        assert_eq!(state_at(&t, 1, 15), Some(State::Receive as u8));
        assert_eq!(state_at(&t, 1, 65), Some(State::Collective as u8));
        assert_eq!(state_at(&t, 1, 80), Some(State::Computing as u8));
        // The run names its call.
        let run = t.rows[1]
            .runs
            .iter()
            .find(|r| r.0 <= 65 && 65 < r.1)
            .unwrap();
        assert_eq!(t.calls[run.3 as usize - 1], "MPI_Barrier");
        assert_eq!(t.arrows.len(), 1);
        let a = &t.arrows[0];
        assert_eq!((a.sender, a.receiver, a.bytes, a.tag), (0, 1, 8, 3));
        assert!((a.send_s - 0.010).abs() < 1e-9 && (a.recv_s - 0.030).abs() < 1e-9);
        // A window after both ends shows no arrow; one holding only the receive shows it.
        let later = tl.tile(span(&[0, 1], 100 * MS), 0.05, 0.1, 100, 10);
        assert!(later.arrows.is_empty());
        let recv_only = tl.tile(span(&[0, 1], 100 * MS), 0.025, 0.1, 100, 10);
        assert_eq!(recv_only.arrows.len(), 1);
        // A message to a rank not shown is not drawn.
        let alone = tl.tile(span(&[0], 100 * MS), 0.0, 0.1, 100, 10);
        assert!(alone.arrows.is_empty());
    }

    /// Zoomed out over many short calls, a pixel shows what dominated it, from the summaries.
    #[test]
    fn a_zoomed_out_view_shows_the_dominant_state_per_pixel() {
        let mut tl = RankTimeline::default();
        // 10 000 cycles of 100 µs: 70 in MPI_Wait, 30 computing.
        for k in 0..10_000i64 {
            let t = k * 100_000;
            tl.segment(0, t, t + 70_000, "MPI_Wait");
        }
        let now = 10_000 * 100_000;
        let t = tl.tile(span(&[0], now), 0.0, 1.0, 10, 10);
        assert_eq!(t.rows[0].runs, vec![(0, 10, State::WaitTest as u8, 1 + 1)]);
        // Zoomed in on one cycle, the computing shows.
        let t = tl.tile(span(&[0], now), 0.5, 0.5001, 10, 10);
        assert_eq!(state_at(&t, 0, 1), Some(State::WaitTest as u8));
        assert_eq!(state_at(&t, 0, 8), Some(State::Computing as u8));
    }

    /// A pixel shown in one state names a call of that state, even when a longer call of
    /// another state shares it.
    #[test]
    fn a_run_names_a_call_of_its_own_state() {
        let mut tl = RankTimeline::default();
        // Per 10 ms pixel: three 2 ms MPI_Sendrecv (6 ms receiving), then a 3 ms
        // MPI_Allreduce, the longest single call.
        for p in 0..10i64 {
            let t = p * 10 * MS;
            for k in 0..3 {
                tl.segment(0, t + k * 2 * MS, t + (k + 1) * 2 * MS, "MPI_Sendrecv");
            }
            tl.segment(0, t + 6 * MS, t + 9 * MS, "MPI_Allreduce");
        }
        let t = tl.tile(span(&[0], 100 * MS), 0.0, 0.1, 10, 10);
        assert_eq!(t.rows[0].runs.len(), 1, "{:?}", t.rows[0].runs);
        let r = t.rows[0].runs[0];
        assert_eq!((r.0, r.1, r.2), (0, 10, State::Receive as u8));
        assert_eq!(t.calls[r.3 as usize - 1], "MPI_Sendrecv");
    }

    /// A call still open is drawn to the job's latest event, and so is a rank computing since
    /// its last call; a rank that finalized ends there.
    #[test]
    fn a_rank_runs_to_the_live_end_until_it_finalizes() {
        let mut tl = RankTimeline::default();
        tl.intern("MPI_Recv");
        let mut job = span(&[0, 1, 2], 100 * MS);
        for r in &mut job.ranks {
            r.last = 40 * MS;
        }
        job.ranks[0].open = vec![(40 * MS, "MPI_Recv")];
        job.ranks[2].finalized = true;
        let t = tl.tile(job, 0.0, 0.1, 100, 10);
        assert_eq!(state_at(&t, 0, 20), Some(State::Computing as u8));
        assert_eq!(state_at(&t, 0, 99), Some(State::Receive as u8));
        assert_eq!(state_at(&t, 1, 99), Some(State::Computing as u8));
        assert_eq!(state_at(&t, 2, 39), Some(State::Computing as u8));
        assert_eq!(state_at(&t, 2, 41), None);
    }

    /// A rank whose process went away without finalizing (killed in `MPI_Recv`, say) ends at
    /// its last event, in the call it was in, and says so; the others run on.
    #[test]
    fn a_rank_gone_without_finalizing_ends_at_its_last_event() {
        let mut tl = RankTimeline::default();
        tl.intern("MPI_Recv");
        let mut job = span(&[0, 1], 100 * MS);
        for r in &mut job.ranks {
            r.last = 40 * MS;
            r.open = vec![(30 * MS, "MPI_Recv")];
        }
        job.ranks[1].gone = true;
        let t = tl.tile(job, 0.0, 0.1, 100, 10);
        assert_eq!(state_at(&t, 0, 99), Some(State::Receive as u8));
        assert_eq!(state_at(&t, 1, 35), Some(State::Receive as u8));
        assert_eq!(state_at(&t, 1, 41), None);
        assert_eq!(t.rows[0].label, "rank 0");
        assert_eq!(t.rows[1].label, "rank 1 (gone, no Finalize)");
    }

    #[test]
    fn everything_kept_is_bounded_and_counted() {
        let mut tl = RankTimeline::bounded(1000, 5000, 8);
        for k in 0..3000i64 {
            tl.segment(
                (k % 4) as u32,
                k * MS,
                k * MS + 1,
                &format!("MPI_Call{}", k % 20),
            );
        }
        assert!(tl.segments <= 1000, "{}", tl.segments);
        let t = tl.tile(span(&[0, 1, 2, 3], 3000 * MS), 0.0, 3.0, 100, 10);
        assert_eq!(t.segments + t.segments_forgotten, 3000);
        assert!(t.start_s > 0.0, "the view says from when it is complete");
        assert_eq!(t.calls.len(), 8);
        assert!(t.calls_past_limit > 0);
        // Messages: the oldest half goes in whole chunks.
        for k in 0..(3 * CHUNK as i64 * 2) {
            tl.message(0, 1, k, k + 1, 1, 0);
        }
        assert!(tl.messages <= 5000);
        assert_eq!(
            tl.messages as u64 + tl.messages_forgotten,
            3 * CHUNK as u64 * 2
        );
        // More arrows in the window than asked: none, counted.
        let t = tl.tile(span(&[0, 1], 3000 * MS), 0.0, 3.0, 100, 10);
        assert!(t.arrows.is_empty());
        assert_eq!(t.arrows_omitted as usize, tl.messages);
        // Long names are cut.
        let long = format!("MPI_{}", "é".repeat(100));
        let mut tl = RankTimeline::default();
        tl.segment(0, 0, 1, &long);
        assert!(tl.calls[1].0.len() <= MAX_NAME);
    }

    /// Times going backwards, at the ends of the clock, and requests for any range draw
    /// without panicking.
    #[test]
    fn a_crafted_stream_or_request_does_not_panic() {
        let mut tl = RankTimeline::bounded(100, 100, 4);
        for (a, b) in [
            (i64::MIN, i64::MAX),
            (i64::MAX, i64::MIN),
            (i64::MAX - 1, i64::MAX),
            (5, 3),
            (0, 0),
        ] {
            tl.segment(u32::MAX, a, b, "MPI_Send");
            tl.message(u32::MAX, 0, a, b, u64::MAX, i32::MIN);
        }
        assert_eq!(tl.backwards, 2);
        for (t0, t1) in [
            (0.0, 1.0),
            (f64::NAN, f64::INFINITY),
            (-1e300, 1e300),
            (5.0, 1.0),
        ] {
            let mut job = span(&[0, u32::MAX], i64::MAX);
            job.origin = i64::MIN;
            job.ranks[1].open = vec![(i64::MIN, "MPI_Unknown")];
            let t = tl.tile(job, t0, t1, usize::MAX, 10);
            assert_eq!(t.rows.len(), 2);
            assert!(t.width <= 8192);
        }
    }
}
