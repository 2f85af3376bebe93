//! Thread life-times (Falcon's thread life-time view): what each thread was doing when —
//! running, waiting for which mutex, condition, join or barrier, blocked on a full ring,
//! exited — and the causal arrows between threads, built from the ordered stream; and
//! level-of-detail tiles, so that a view of thousands of threads and hundreds of millions of
//! events receives no more than it can draw.
//!
//! # Model
//!
//! A thread's life is a list of [`Segment`]s, each running until the next one starts. The
//! first begins at the thread's first event; `gyr.thread.exit` starts the last (`Exited`).
//! Waits begin at `gyr.mutex.request`, `gyr.rwlock.request`, `gyr.cond.wait`,
//! `gyr.thread.join_begin` and `gyr.barrier.arrive`, and end at the matching acquisition,
//! wake-up, join or departure. A record whose header shows more ring-full waiting than the
//! thread's previous record adds a `Blocked` segment of that length just before it.
//!
//! Arrows go from a release to the acquisition it let pass (when the acquirer had waited),
//! from a signal to the wake-up it caused, from a fork to the child's begin and from an exit
//! to the join that returned.
//!
//! # Rows and tiles
//!
//! Threads that named a role (`gyr.thread.role`) share one row per role and index, so that
//! short-lived threads of one role do not flood the view. [`Timeline::tile`] answers "rows
//! `r0..r1` between `t0` and `t1`, `width` pixels wide" with at most one run per pixel and
//! row: within a pixel, the state that took most of its time wins. Each thread keeps a
//! summary tree over its segments (fan-out [`FANOUT`]), so a tile costs about
//! `width × log(segments)` per row, whatever the number of events.
//!
//! # Bounds
//!
//! A stream may name any number of threads and objects, and a program may run for days, so
//! every table grows only so far, and what is forgotten is counted ([`Forgotten`]):
//! - segments ([`Timeline::limit_segments`]): past the limit the oldest half of the busiest
//!   thread's are forgotten, with the arrows into them;
//! - threads ([`Timeline::limit_threads`]): past the limit the lives of the threads that ended
//!   longest ago are forgotten, once a sixteenth of the limit has ended; until then the events
//!   of further threads are not drawn. Names and roles are kept for at most twice as many
//!   threads, and no label is longer than [`MAX_LABEL`] bytes;
//! - objects ([`Timeline::limit_objects`]): the last release of each lock, signal of each
//!   condition, fork of each child not yet begun and exit of each thread, from which arrows
//!   are drawn. Past the limit the half changed longest ago is forgotten: a wait that ends
//!   after its cause was forgotten has no arrow.

use crate::sync_events::{SyncDecoder, ViewEvent, WaitOn};
use gyr_core::TypeId;
use std::collections::HashMap;

/// Hash maps with a fast hasher: the view looks up a thread and an object per event.
type Map<K, V> = foldhash::HashMap<K, V>;

/// What a thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum State {
    /// Running (or doing anything but waiting on a recorded object).
    Running = 0,
    /// Waiting for a mutex.
    WaitMutex = 1,
    /// Waiting for a read lock.
    WaitRead = 2,
    /// Waiting for a write lock.
    WaitWrite = 3,
    /// Waiting on a condition variable.
    WaitCond = 4,
    /// Waiting for another thread to end.
    WaitJoin = 5,
    /// Waiting at a barrier.
    WaitBarrier = 6,
    /// Blocked by gyr: its ring was full (Block policy).
    Blocked = 7,
    /// Ended.
    Exited = 8,
}

/// How many states there are.
pub const STATES: usize = 9;

impl State {
    /// The state's name in tiles and views.
    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::WaitMutex => "wait mutex",
            State::WaitRead => "wait read lock",
            State::WaitWrite => "wait write lock",
            State::WaitCond => "wait condition",
            State::WaitJoin => "wait join",
            State::WaitBarrier => "wait barrier",
            State::Blocked => "blocked on a full ring",
            State::Exited => "exited",
        }
    }

    fn from_wait(on: WaitOn) -> State {
        match on {
            WaitOn::Mutex => State::WaitMutex,
            WaitOn::Read => State::WaitRead,
            WaitOn::Write => State::WaitWrite,
            WaitOn::Cond => State::WaitCond,
            WaitOn::Join => State::WaitJoin,
            WaitOn::Barrier => State::WaitBarrier,
        }
    }
}

/// Lives kept at most, unless told otherwise ([`Timeline::limit_threads`]).
pub const DEFAULT_MAX_THREADS: usize = crate::order::DEFAULT_MAX_THREADS;
/// Objects kept at most, unless told otherwise ([`Timeline::limit_objects`]).
pub const DEFAULT_MAX_OBJECTS: usize = crate::order::DEFAULT_MAX_OBJECTS;
/// The longest thread name or role kept, in bytes (longer ones are cut at a character).
pub const MAX_LABEL: usize = 256;

/// What a timeline forgot to stay within its bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Segments of long lives ([`Timeline::limit_segments`]).
    pub segments: u64,
    /// Lives of threads that had ended ([`Timeline::limit_threads`]).
    pub threads: u64,
    /// Events of threads past the limit, not drawn.
    pub events: u64,
    /// Releases, signals, forks and exits, whose arrows are then not drawn
    /// ([`Timeline::limit_objects`]).
    pub objects: u64,
}

/// How much per-thread and per-object state a timeline keeps now (see [`Timeline::sizes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimelineSizes {
    /// Threads with a life.
    pub threads: usize,
    /// Threads named.
    pub names: usize,
    /// Threads with a role.
    pub roles: usize,
    /// Locks, conditions, forks and exits remembered.
    pub objects: usize,
    /// Segments kept.
    pub segments: usize,
    /// Arrows kept.
    pub arrows: usize,
}

/// `text` cut to at most [`MAX_LABEL`] bytes, at a character boundary.
fn label(text: &str) -> String {
    let mut end = text.len().min(MAX_LABEL);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A stretch of a thread's life, lasting until the next segment starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// ns since the process's timestamp 0.
    pub start: u64,
    /// The object waited for (mutex, condition, barrier id, joined thread); 0 when none.
    pub object: u64,
    /// What the thread does.
    pub state: State,
}

/// A causal arrow between two threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrow {
    /// Thread and time of the cause.
    pub from: (u64, u64),
    /// Thread and time of the effect.
    pub to: (u64, u64),
    /// What links them.
    pub kind: ArrowKind,
    /// The mutex, condition or thread concerned.
    pub object: u64,
}

/// What an arrow stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrowKind {
    /// A release let a waiting acquisition pass.
    Lock,
    /// A signal or broadcast woke a waiter.
    Signal,
    /// A fork began a thread.
    Fork,
    /// An exit let a join return.
    Join,
}

/// Segments per summary node.
pub const FANOUT: usize = 32;

/// A summary of consecutive segments (or nodes): where it starts and ends and how long each
/// state lasted in it.
#[derive(Debug, Clone, Copy)]
struct Node {
    start: u64,
    end: u64,
    time: [u64; STATES],
}

/// One thread's life.
#[derive(Debug)]
struct Life {
    thread: u64,
    segments: Vec<Segment>,
    /// `levels[0]` summarises `FANOUT` segments per node, `levels[k]` `FANOUT` nodes of
    /// `levels[k - 1]`; complete nodes only (the tail is summarised at query time).
    levels: Vec<Vec<Node>>,
    /// Arrows into this thread, in the order of their effects (its own time order).
    arrows_in: Vec<Arrow>,
    /// ns blocked on a full ring by the previous record.
    blocked: u64,
    last: u64,
}

impl Life {
    fn new(thread: u64) -> Self {
        Life {
            thread,
            segments: Vec::new(),
            levels: Vec::new(),
            arrows_in: Vec::new(),
            blocked: 0,
            last: 0,
        }
    }

    fn state(&self) -> Option<State> {
        self.segments.last().map(|s| s.state)
    }

    fn exited(&self) -> bool {
        self.state() == Some(State::Exited)
    }

    /// Starts a segment at `at` (not before the previous one).
    fn enter(&mut self, at: u64, state: State, object: u64) {
        let at = at.max(self.segments.last().map_or(0, |s| s.start));
        if let Some(last) = self.segments.last()
            && last.state == state
            && last.object == object
        {
            return;
        }
        self.segments.push(Segment {
            start: at,
            object,
            state,
        });
        self.summarise();
    }

    /// Forgets the oldest half of the segments (rebuilding the summaries) and the arrows into
    /// them; returns how many segments.
    fn forget_oldest_half(&mut self) -> usize {
        let n = self.segments.len() / 2;
        self.segments.drain(..n);
        let first = self.segments.first().map_or(0, |s| s.start);
        let gone = self.arrows_in.partition_point(|a| a.to.1 < first);
        self.arrows_in.drain(..gone);
        self.levels.clear();
        let all = std::mem::take(&mut self.segments);
        for s in all {
            self.segments.push(s);
            self.summarise();
        }
        n
    }

    /// Adds summary nodes for segments that completed a group of `FANOUT` (the newest segment
    /// is still open, so a group is summarised once the segment after it has started).
    fn summarise(&mut self) {
        let closed = self.segments.len() - 1;
        if !closed.is_multiple_of(FANOUT) || closed == 0 {
            return;
        }
        let group = &self.segments[closed - FANOUT..=closed];
        let mut node = Node {
            start: group[0].start,
            end: group[FANOUT].start,
            time: [0; STATES],
        };
        for w in group.windows(2) {
            node.time[w[0].state as usize] += w[1].start - w[0].start;
        }
        let mut level = 0;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            self.levels[level].push(node);
            let n = self.levels[level].len();
            if !n.is_multiple_of(FANOUT) {
                break;
            }
            let children = &self.levels[level][n - FANOUT..];
            let mut parent = Node {
                start: children[0].start,
                end: children[FANOUT - 1].end,
                time: [0; STATES],
            };
            for c in children {
                for (p, t) in parent.time.iter_mut().zip(c.time) {
                    *p += t;
                }
            }
            node = parent;
            level += 1;
        }
    }

    /// Adds this life's time per state, between `t0` and `t1`, to the pixel columns of
    /// `cols` (each `ns_per_px` wide); the life lasts until `now` unless it exited.
    fn draw(&self, t0: u64, t1: u64, ns_per_px: f64, now: u64, cols: &mut Columns) {
        let Some(first) = self.segments.first() else {
            return;
        };
        if first.start >= t1 {
            return;
        }
        let end = if self.state() == Some(State::Exited) {
            self.segments.last().map_or(now, |s| s.start)
        } else {
            now.max(self.last)
        };
        let px = |t: u64| ((t.saturating_sub(t0)) as f64 / ns_per_px) as usize;
        // Walk segments, jumping over whole summarised groups that fall within one pixel.
        let mut i = self
            .segments
            .partition_point(|s| s.start <= t0)
            .saturating_sub(1);
        while i < self.segments.len() {
            let s = self.segments[i];
            if s.start >= t1 {
                break;
            }
            // A group starting here that fits in one pixel: take its summary.
            if i.is_multiple_of(FANOUT)
                && let Some((node, covered)) = self.widest_node_in_pixel(i, t0, px)
            {
                let col = px(node.start.max(t0));
                cols.add_summary(col, &node.time);
                i += covered;
                continue;
            }
            let seg_end = self.segments.get(i + 1).map_or(end, |n| n.start).min(t1);
            let a = s.start.max(t0);
            if seg_end > a {
                cols.add_span(a, seg_end, t0, ns_per_px, s.state, s.object);
            }
            i += 1;
        }
    }

    /// The largest complete summary node starting at segment `i` whose time span falls within
    /// a single pixel, with the number of segments it covers.
    fn widest_node_in_pixel(
        &self,
        i: usize,
        t0: u64,
        px: impl Fn(u64) -> usize,
    ) -> Option<(Node, usize)> {
        let mut best = None;
        let mut span = FANOUT;
        for level in &self.levels {
            if !i.is_multiple_of(span) {
                break;
            }
            let Some(node) = level.get(i / span) else {
                break;
            };
            if node.start < t0 || px(node.start) != px(node.end) {
                break;
            }
            best = Some((*node, span));
            span *= FANOUT;
        }
        best
    }
}

/// Per-pixel accumulation of time per state.
#[derive(Debug)]
struct Columns {
    time: Vec<[f64; STATES]>,
    /// Per column, the object of the longest wait and its length.
    object: Vec<(u64, f64)>,
}

impl Columns {
    fn new(width: usize) -> Self {
        Columns {
            time: vec![[0.0; STATES]; width],
            object: vec![(0, 0.0); width],
        }
    }

    fn add_summary(&mut self, col: usize, time: &[u64; STATES]) {
        if let Some(c) = self.time.get_mut(col) {
            for (a, t) in c.iter_mut().zip(time) {
                *a += *t as f64;
            }
        }
    }

    fn add_span(&mut self, a: u64, b: u64, t0: u64, ns_per_px: f64, state: State, object: u64) {
        let width = self.time.len();
        let x0 = (a - t0) as f64 / ns_per_px;
        let x1 = ((b - t0) as f64 / ns_per_px).min(width as f64);
        let mut x = x0;
        while x < x1 {
            let col = x as usize;
            if col >= width {
                break;
            }
            let next = ((col + 1) as f64).min(x1);
            let ns = (next - x) * ns_per_px;
            self.time[col][state as usize] += ns;
            if object != 0 && ns > self.object[col].1 {
                self.object[col] = (object, ns);
            }
            x = next;
        }
    }

    /// Runs of columns with the same dominant state and object.
    fn runs(&self) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for (x, t) in self.time.iter().enumerate() {
            let total: f64 = t.iter().sum();
            if total <= 0.0 {
                continue;
            }
            let (s, _) =
                t.iter().enumerate().fold(
                    (0, -1.0),
                    |best, (s, &v)| if v > best.1 { (s, v) } else { best },
                );
            let state = STATES_IN_ORDER[s];
            let object = if state == State::Running || state == State::Exited {
                0
            } else {
                self.object[x].0
            };
            if let Some(last) = runs.last_mut()
                && last.x1 == x as u32
                && last.state == state
                && last.object == object
            {
                last.x1 += 1;
                continue;
            }
            runs.push(Run {
                x0: x as u32,
                x1: x as u32 + 1,
                state,
                object,
            });
        }
        runs
    }
}

const STATES_IN_ORDER: [State; STATES] = [
    State::Running,
    State::WaitMutex,
    State::WaitRead,
    State::WaitWrite,
    State::WaitCond,
    State::WaitJoin,
    State::WaitBarrier,
    State::Blocked,
    State::Exited,
];

/// Pixels `x0..x1` of a row, in one state (the dominant one when several share a pixel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// First pixel.
    pub x0: u32,
    /// One past the last pixel.
    pub x1: u32,
    /// The state drawn.
    pub state: State,
    /// The object waited for, when one wait dominates the run; 0 otherwise.
    pub object: u64,
}

/// A row of the view: one thread, or the threads of one role and index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row's label: the role and index, or the thread's name.
    pub label: String,
    /// The threads drawn in it.
    pub threads: Vec<u64>,
}

/// What a view receives for one viewport: runs per row, and the arrows within it.
#[derive(Debug, Clone, PartialEq)]
pub struct Tile {
    /// The first row of `rows`.
    pub first_row: usize,
    /// Rows in the whole view (for the scroll bar).
    pub total_rows: usize,
    /// Per requested row: its label and its runs.
    pub rows: Vec<(Row, Vec<Run>)>,
    /// Arrows between the requested rows whose effects fall in the requested times, when there
    /// are at most the requested maximum; otherwise none, and `arrows_omitted` says how many
    /// there were (counting, past four times the maximum, arrows from rows not shown too).
    pub arrows: Vec<Arrow>,
    /// Arrows in the viewport left out because there were too many to draw.
    pub arrows_omitted: usize,
}

/// The life-time view's data: every thread's life and the arrows, fed with the ordered stream.
#[derive(Debug)]
pub struct Timeline {
    decoder: SyncDecoder,
    role_type: Option<TypeId>,
    lives: Vec<Life>,
    by_thread: Map<u64, usize>,
    names: Map<u64, String>,
    /// Per thread, its role and index.
    roles: Map<u64, (String, u64)>,
    /// The rows, computed again only after a thread or a role was added.
    rows: std::cell::RefCell<Option<Vec<Row>>>,
    /// Per lock, the last release (thread, time, n).
    released: Map<u64, (u64, u64, u64)>,
    /// Per condition, the last signal (thread, time, n).
    signalled: Map<u64, (u64, u64, u64)>,
    /// Per child, the fork (thread, time).
    forks: Map<u64, (u64, u64)>,
    /// Per thread, its exit time.
    exits: Map<u64, u64>,
    /// The latest time seen.
    now: u64,
    events: u64,
    /// Segments kept, and the most to keep.
    segments: usize,
    max_segments: Option<usize>,
    /// Segments forgotten to stay within `max_segments`.
    forgotten: u64,
    max_threads: usize,
    max_objects: usize,
    /// Lives whose thread has exited: those forgotten first.
    exited: usize,
    threads_forgotten: u64,
    /// Events of threads past `max_threads`, not drawn.
    not_drawn: u64,
    objects_forgotten: u64,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            decoder: SyncDecoder::default(),
            role_type: None,
            lives: Vec::new(),
            by_thread: Map::default(),
            names: Map::default(),
            roles: Map::default(),
            rows: Default::default(),
            released: Map::default(),
            signalled: Map::default(),
            forks: Map::default(),
            exits: Map::default(),
            now: 0,
            events: 0,
            segments: 0,
            max_segments: None,
            forgotten: 0,
            max_threads: DEFAULT_MAX_THREADS,
            max_objects: DEFAULT_MAX_OBJECTS,
            exited: 0,
            threads_forgotten: 0,
            not_drawn: 0,
            objects_forgotten: 0,
        }
    }
}

impl Timeline {
    /// An empty timeline, keeping at most [`DEFAULT_MAX_THREADS`] lives and
    /// [`DEFAULT_MAX_OBJECTS`] objects.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the lives of at most `max` threads (at least 16; see the module doc).
    pub fn limit_threads(&mut self, max: usize) {
        self.max_threads = max.max(16);
    }

    /// Remembers at most `max` releases, signals, forks and exits (at least 16; see the
    /// module doc).
    pub fn limit_objects(&mut self, max: usize) {
        self.max_objects = max.max(16);
    }

    /// What was forgotten so far to stay within the bounds.
    pub fn forgotten_all(&self) -> Forgotten {
        Forgotten {
            segments: self.forgotten,
            threads: self.threads_forgotten,
            events: self.not_drawn,
            objects: self.objects_forgotten,
        }
    }

    /// The per-thread and per-object state kept now.
    pub fn sizes(&self) -> TimelineSizes {
        TimelineSizes {
            threads: self.lives.len(),
            names: self.names.len(),
            roles: self.roles.len(),
            objects: self.objects(),
            segments: self.segments,
            arrows: self.lives.iter().map(|l| l.arrows_in.len()).sum(),
        }
    }

    /// The limit on lives.
    pub fn max_threads(&self) -> usize {
        self.max_threads
    }

    /// Learns a schema of the stream.
    pub fn add_schema(&mut self, schema: &gyr_core::Schema) {
        self.decoder.add_schema(schema);
        if schema.name == "gyr.thread.role"
            && schema.fields.len() >= 2
            && schema.fields[0].ty == gyr_core::FieldType::Str
            && schema.fields[1].ty == gyr_core::FieldType::U64
        {
            self.role_type = Some(schema.id);
        }
    }

    /// Whether records of `type_id` matter to the view (thread events and roles): the others
    /// need not be kept or ordered for it.
    pub fn wants(&self, type_id: TypeId) -> bool {
        self.decoder.is_sync(type_id) || self.role_type == Some(type_id)
    }

    /// What a record means to the ordering filter.
    pub fn classify(&self, type_id: TypeId, payload: &[u8]) -> crate::SyncEvent {
        self.decoder.classify(type_id, payload)
    }

    /// Keeps at most `max` segments: past that, the oldest half of the busiest thread's are
    /// forgotten (views then start later for that thread).
    pub fn limit_segments(&mut self, max: usize) {
        self.max_segments = Some(max.max(2 * FANOUT));
    }

    /// Segments forgotten so far to stay within [`Timeline::limit_segments`].
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Names a thread (from the trace's thread blocks).
    pub fn name_thread(&mut self, thread: u64, name: &str) {
        if !self.names.contains_key(&thread) && self.names.len() >= 2 * self.max_threads {
            // Names of threads that never showed (or were forgotten) go first.
            let lives = &self.by_thread;
            self.names.retain(|t, _| lives.contains_key(t));
        }
        self.names.insert(thread, label(name));
        self.rows.replace(None);
    }

    /// Gives a thread its role and index, as a `gyr.thread.role` record does (for a view that
    /// joined after the record: a program's stream describes its threads with their roles).
    pub fn set_role(&mut self, thread: u64, role: &str, index: u64) {
        if !self.roles.contains_key(&thread) && self.roles.len() >= 2 * self.max_threads {
            let lives = &self.by_thread;
            self.roles.retain(|t, _| lives.contains_key(t));
        }
        self.roles.insert(thread, (label(role), index));
        self.rows.replace(None);
    }

    /// Takes in one record of the ordered stream: `ts` in ns, `blocked` the record header's
    /// cumulative ring-full wait of its thread.
    pub fn push(&mut self, thread: u64, ts: u64, blocked: u64, type_id: TypeId, payload: &[u8]) {
        let i = match self.by_thread.get(&thread) {
            Some(&i) => i,
            None => {
                if self.lives.len() >= self.max_threads && !self.forget_ended() {
                    self.not_drawn += 1;
                    return;
                }
                self.rows.replace(None);
                self.lives.push(Life::new(thread));
                self.by_thread.insert(thread, self.lives.len() - 1);
                self.lives.len() - 1
            }
        };
        self.events += 1;
        self.now = self.now.max(ts);
        let before = self.lives[i].segments.len();
        let was_exited = self.lives[i].exited();
        self.apply(i, thread, ts, blocked, type_id, payload);
        self.segments = self.segments + self.lives[i].segments.len() - before;
        match (was_exited, self.lives[i].exited()) {
            (false, true) => self.exited += 1,
            (true, false) => self.exited -= 1,
            _ => {}
        }
        if self.objects() > self.max_objects {
            self.forget_oldest_objects();
        }
        if let Some(max) = self.max_segments
            && self.segments > max
            && let Some(busiest) = self.lives.iter_mut().max_by_key(|l| l.segments.len())
        {
            let n = busiest.forget_oldest_half();
            self.segments -= n;
            self.forgotten += n as u64;
        }
    }

    /// Releases, signals, forks and exits remembered.
    fn objects(&self) -> usize {
        self.released.len() + self.signalled.len() + self.forks.len() + self.exits.len()
    }

    /// Forgets the half (at least) of the objects changed longest ago, by their times.
    fn forget_oldest_objects(&mut self) {
        let mut times: Vec<u64> = Vec::with_capacity(self.objects());
        times.extend(self.released.values().map(|v| v.1));
        times.extend(self.signalled.values().map(|v| v.1));
        times.extend(self.forks.values().map(|v| v.1));
        times.extend(self.exits.values().copied());
        let mid = times.len() / 2;
        let (_, &mut cut, _) = times.select_nth_unstable(mid);
        let before = self.objects();
        self.released.retain(|_, v| v.1 > cut);
        self.signalled.retain(|_, v| v.1 > cut);
        self.forks.retain(|_, v| v.1 > cut);
        self.exits.retain(|_, at| *at > cut);
        self.objects_forgotten += (before - self.objects()) as u64;
    }

    /// Makes room for a life by forgetting those of the threads that ended longest ago, half
    /// of the ended ones, once a sixteenth of the limit have ended (so that the linear pass
    /// is paid once per many threads); returns whether there is room.
    fn forget_ended(&mut self) -> bool {
        let batch = (self.max_threads / 16).max(1);
        if self.exited < batch {
            return false;
        }
        let mut ends: Vec<u64> = self
            .lives
            .iter()
            .filter(|l| l.exited())
            .map(|l| l.segments.last().map_or(0, |s| s.start))
            .collect();
        if ends.is_empty() {
            self.exited = 0;
            return false;
        }
        let k = (ends.len() / 2).max(batch).min(ends.len()) - 1;
        let (_, &mut cut, _) = ends.select_nth_unstable(k);
        let mut segments = 0;
        let mut gone = 0;
        let (names, roles) = (&mut self.names, &mut self.roles);
        self.lives.retain(|l| {
            let forget = l.exited() && l.segments.last().is_some_and(|s| s.start <= cut);
            if forget {
                segments += l.segments.len();
                gone += 1;
                names.remove(&l.thread);
                roles.remove(&l.thread);
            }
            !forget
        });
        self.by_thread = self
            .lives
            .iter()
            .enumerate()
            .map(|(i, l)| (l.thread, i))
            .collect();
        self.segments -= segments;
        self.exited -= gone;
        self.threads_forgotten += gone as u64;
        self.rows.replace(None);
        self.lives.len() < self.max_threads
    }

    fn apply(
        &mut self,
        i: usize,
        thread: u64,
        ts: u64,
        blocked: u64,
        type_id: TypeId,
        payload: &[u8],
    ) {
        let life = &mut self.lives[i];
        if life.segments.is_empty() {
            life.enter(ts, State::Running, 0);
            life.blocked = blocked;
        }
        life.last = life.last.max(ts);
        let waited = blocked.saturating_sub(life.blocked);
        life.blocked = life.blocked.max(blocked);
        self.apply_event(i, thread, ts, type_id, payload);
        if waited > 0 {
            // The record waited for room in its ring after its timestamp: a sensor reads the
            // clock first. The thread then goes on in the state the event put it in.
            let life = &mut self.lives[i];
            let resume = life.state().unwrap_or(State::Running);
            let object = life.segments.last().map_or(0, |s| s.object);
            life.enter(ts, State::Blocked, 0);
            // Saturating: a crafted stream may claim any wait.
            let resumed = ts.saturating_add(waited);
            life.enter(resumed, resume, object);
            life.last = life.last.max(resumed);
        }
    }

    /// What the thread event of a record does to its thread's life.
    fn apply_event(&mut self, i: usize, thread: u64, ts: u64, type_id: TypeId, payload: &[u8]) {
        let life = &mut self.lives[i];
        if Some(type_id) == self.role_type {
            if let Some((role, index)) = role_of(payload) {
                self.roles.insert(thread, (label(&role), index));
                self.rows.replace(None);
            }
            return;
        }
        let Some(view) = self.decoder.view(type_id, payload) else {
            return;
        };
        let waited = life.state().is_some_and(|s| s != State::Running);
        match view {
            ViewEvent::Begin { .. } => {
                life.enter(ts, State::Running, 0);
                if let Some((from, at)) = self.forks.remove(&thread) {
                    life.arrows_in.push(Arrow {
                        from: (from, at),
                        to: (thread, ts),
                        kind: ArrowKind::Fork,
                        object: thread,
                    });
                }
                // A begin whose fork was not seen (cut off, or switched off) has no arrow.
            }
            ViewEvent::Fork { child } => {
                self.forks.insert(child, (thread, ts));
            }
            ViewEvent::Exit => {
                life.enter(ts, State::Exited, 0);
                self.exits.insert(thread, ts);
            }
            ViewEvent::Wait { on, object } => life.enter(ts, State::from_wait(on), object),
            ViewEvent::Arrive { barrier, .. } => life.enter(ts, State::WaitBarrier, barrier),
            ViewEvent::Depart { .. } => life.enter(ts, State::Running, 0),
            ViewEvent::Acquire { lock, n } => {
                life.enter(ts, State::Running, 0);
                if waited
                    && let Some(&(from, at, r)) = self.released.get(&lock)
                    && r + 1 == n
                    && from != thread
                {
                    life.arrows_in.push(Arrow {
                        from: (from, at),
                        to: (thread, ts),
                        kind: ArrowKind::Lock,
                        object: lock,
                    });
                }
            }
            ViewEvent::AcquireShared { lock, after } => {
                life.enter(ts, State::Running, 0);
                if waited
                    && let Some(&(from, at, r)) = self.released.get(&lock)
                    && r == after
                    && from != thread
                {
                    life.arrows_in.push(Arrow {
                        from: (from, at),
                        to: (thread, ts),
                        kind: ArrowKind::Lock,
                        object: lock,
                    });
                }
            }
            ViewEvent::Release { lock, n } => {
                self.released.insert(lock, (thread, ts, n));
            }
            ViewEvent::Signal { cond, n } => {
                self.signalled.insert(cond, (thread, ts, n));
            }
            ViewEvent::Wake { cond, after } => {
                // The mutex is re-acquired next; until then the thread runs.
                life.enter(ts, State::Running, 0);
                if after > 0
                    && let Some(&(from, at, n)) = self.signalled.get(&cond)
                    && n == after
                    && from != thread
                {
                    life.arrows_in.push(Arrow {
                        from: (from, at),
                        to: (thread, ts),
                        kind: ArrowKind::Signal,
                        object: cond,
                    });
                }
            }
            ViewEvent::Joined { joined } => {
                life.enter(ts, State::Running, 0);
                if let Some(&at) = self.exits.get(&joined) {
                    life.arrows_in.push(Arrow {
                        from: (joined, at),
                        to: (thread, ts),
                        kind: ArrowKind::Join,
                        object: joined,
                    });
                }
            }
        }
    }

    /// Events taken in.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The latest time seen, ns.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The earliest time seen, ns.
    pub fn start(&self) -> u64 {
        self.lives
            .iter()
            .filter_map(|l| l.segments.first().map(|s| s.start))
            .min()
            .unwrap_or(0)
    }

    /// The view's rows: threads of one role and index together, in order of first
    /// appearance; other threads one per row.
    pub fn rows(&self) -> Vec<Row> {
        self.with_rows(|rows| rows.to_vec())
    }

    fn with_rows<R>(&self, f: impl FnOnce(&[Row]) -> R) -> R {
        if self.rows.borrow().is_none() {
            let rows = self.make_rows();
            self.rows.replace(Some(rows));
        }
        f(self.rows.borrow().as_deref().expect("made above"))
    }

    fn make_rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = Vec::new();
        let mut by_role: HashMap<(&str, u64), usize> = HashMap::new();
        for life in &self.lives {
            let t = life.thread;
            match self.roles.get(&t) {
                Some((role, index)) => match by_role.get(&(role.as_str(), *index)) {
                    Some(&r) => rows[r].threads.push(t),
                    None => {
                        by_role.insert((role.as_str(), *index), rows.len());
                        rows.push(Row {
                            label: format!("{role} {index}"),
                            threads: vec![t],
                        });
                    }
                },
                None => rows.push(Row {
                    label: self
                        .names
                        .get(&t)
                        .cloned()
                        .unwrap_or_else(|| format!("thread {t}")),
                    threads: vec![t],
                }),
            }
        }
        rows
    }

    /// The segments of `thread` (for tests and exports).
    pub fn segments(&self, thread: u64) -> &[Segment] {
        self.by_thread
            .get(&thread)
            .map_or(&[], |&i| &self.lives[i].segments)
    }

    /// The arrows so far, by the time of their effects.
    pub fn arrows(&self) -> Vec<Arrow> {
        let mut all: Vec<Arrow> = self
            .lives
            .iter()
            .flat_map(|l| l.arrows_in.iter().copied())
            .collect();
        all.sort_by_key(|a| a.to.1);
        all
    }

    /// The viewport `rows` × `[t0, t1)` drawn `width` pixels wide (at most 8192), with at most
    /// `max_arrows` arrows.
    pub fn tile(
        &self,
        rows: std::ops::Range<usize>,
        t0: u64,
        t1: u64,
        width: usize,
        max_arrows: usize,
    ) -> Tile {
        let (total, first, visible) = self.with_rows(|all| {
            let first = rows.start.min(all.len());
            let last = rows.end.clamp(first, all.len());
            (all.len(), first, all[first..last].to_vec())
        });
        let width = width.clamp(1, 8192);
        let t1 = t1.max(t0 + 1);
        let ns_per_px = (t1 - t0) as f64 / width as f64;
        let mut out = Vec::with_capacity(visible.len());
        let mut lives = Vec::new();
        for row in visible {
            let mut cols = Columns::new(width);
            for t in &row.threads {
                if let Some(&i) = self.by_thread.get(t) {
                    self.lives[i].draw(t0, t1, ns_per_px, self.now, &mut cols);
                    lives.push(&self.lives[i]);
                }
            }
            out.push((row, cols.runs()));
        }
        // Arrows into the visible threads whose effects fall in the viewport: found by binary
        // search in each thread's own (time-ordered) list, so a tile never walks the history.
        let ranges: Vec<&[Arrow]> = lives
            .iter()
            .map(|l| {
                let a = l.arrows_in.partition_point(|a| a.to.1 < t0);
                let b = l.arrows_in.partition_point(|a| a.to.1 < t1);
                &l.arrows_in[a..b]
            })
            .collect();
        let at_most: usize = ranges.iter().map(|r| r.len()).sum();
        let (arrows, arrows_omitted) = if at_most > max_arrows.saturating_mul(4) {
            // Too many to draw whatever their sources: say how many, without looking at them.
            (Vec::new(), at_most)
        } else {
            let visible: std::collections::HashSet<u64> = lives.iter().map(|l| l.thread).collect();
            let arrows: Vec<Arrow> = ranges
                .iter()
                .flat_map(|r| r.iter())
                .filter(|a| visible.contains(&a.from.0))
                .copied()
                .collect();
            if arrows.len() <= max_arrows {
                (arrows, 0)
            } else {
                (Vec::new(), arrows.len())
            }
        };
        Tile {
            first_row: first,
            total_rows: total,
            rows: out,
            arrows,
            arrows_omitted,
        }
    }
}

fn role_of(payload: &[u8]) -> Option<(String, u64)> {
    let len = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let role = std::str::from_utf8(payload.get(4..4 + len)?)
        .ok()?
        .to_owned();
    let index = u64::from_le_bytes(payload.get(4 + len..12 + len)?.try_into().ok()?);
    Some((role, index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::{Field, FieldType as F, Schema};

    /// A timeline that knows the thread event types, with ids from 1 in this order.
    fn timeline() -> Timeline {
        let mut t = Timeline::new();
        let schemas: &[(&str, &[(&str, F)])] = &[
            ("gyr.mutex.request", &[("mutex", F::U64), ("addr", F::U64)]),
            ("gyr.mutex.acquire", &[("mutex", F::U64), ("n", F::U64)]),
            ("gyr.mutex.release", &[("mutex", F::U64), ("n", F::U64)]),
            ("gyr.thread.role", &[("role", F::Str), ("index", F::U64)]),
            ("gyr.thread.exit", &[]),
        ];
        for (i, (name, fields)) in schemas.iter().enumerate() {
            let fields = fields.iter().map(|(n, ty)| Field::new(*n, *ty)).collect();
            t.add_schema(&Schema::new(i as u32 + 1, *name, fields).unwrap());
        }
        t
    }

    fn two(a: u64, b: u64) -> Vec<u8> {
        let mut p = a.to_le_bytes().to_vec();
        p.extend(b.to_le_bytes());
        p
    }

    const REQUEST: u32 = 1;
    const ACQUIRE: u32 = 2;
    const RELEASE: u32 = 3;
    const ROLE: u32 = 4;
    const EXIT: u32 = 5;

    #[test]
    fn a_contended_lock_is_a_wait_and_an_arrow() {
        let mut t = timeline();
        t.push(1, 0, 0, ACQUIRE, &two(5, 1));
        t.push(2, 5, 0, 99, &[]);
        t.push(2, 10, 0, REQUEST, &two(5, 0));
        t.push(1, 20, 0, RELEASE, &two(5, 1));
        t.push(2, 25, 0, ACQUIRE, &two(5, 2));
        t.push(2, 40, 0, EXIT, &[]);
        let states: Vec<_> = t
            .segments(2)
            .iter()
            .map(|s| (s.start, s.state, s.object))
            .collect();
        assert_eq!(
            states,
            vec![
                (5, State::Running, 0),
                (10, State::WaitMutex, 5),
                (25, State::Running, 0),
                (40, State::Exited, 0)
            ]
        );
        assert_eq!(
            t.arrows(),
            &[Arrow {
                from: (1, 20),
                to: (2, 25),
                kind: ArrowKind::Lock,
                object: 5
            }]
        );
        let tile = t.tile(0..10, 0, 50, 50, 100);
        assert_eq!(tile.total_rows, 2);
        let runs = &tile.rows[1].1;
        assert!(
            runs.contains(&Run {
                x0: 10,
                x1: 25,
                state: State::WaitMutex,
                object: 5
            }),
            "{runs:?}"
        );
        assert_eq!(tile.arrows.len(), 1);
        let none = t.tile(0..10, 0, 50, 50, 0);
        assert_eq!((none.arrows.len(), none.arrows_omitted), (0, 1));
    }

    #[test]
    fn threads_of_one_role_share_a_row() {
        let mut t = timeline();
        let mut role = 6u32.to_le_bytes().to_vec();
        role.extend(b"worker");
        role.extend(3u64.to_le_bytes());
        for thread in 10..30 {
            let at = thread * 100;
            t.push(thread, at, 0, ROLE, &role);
            t.push(thread, at + 50, 0, EXIT, &[]);
        }
        let rows = t.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].label, "worker 3");
        assert_eq!(rows[0].threads.len(), 20);
    }

    #[test]
    fn segments_stay_within_their_limit() {
        let mut t = timeline();
        t.limit_segments(1000);
        for n in 1..=10_000u64 {
            t.push(1, n * 10, 0, REQUEST, &two(9, 0));
            t.push(1, n * 10 + 5, 0, ACQUIRE, &two(9, n));
        }
        let kept = t.segments(1).len();
        assert!(kept <= 1000, "{kept}");
        // The first event also opened a (zero-length) running segment.
        assert_eq!(kept as u64 + t.forgotten(), 20_001);
        assert_eq!(t.segments(1).last().unwrap().start, 100_005);
        // The summaries were rebuilt: a far-out tile still draws the whole kept range.
        let tile = t.tile(0..1, 0, 100_010, 100, 0);
        assert!(!tile.rows[0].1.is_empty());
    }

    #[test]
    fn a_full_ring_shows_as_blocked() {
        let mut t = timeline();
        t.push(1, 0, 0, 99, &[]);
        // The second record waited 30 ns for room after its timestamp.
        t.push(1, 100, 30, 99, &[]);
        t.push(1, 200, 30, 99, &[]);
        let states: Vec<_> = t.segments(1).iter().map(|s| (s.start, s.state)).collect();
        assert_eq!(
            states,
            vec![
                (0, State::Running),
                (100, State::Blocked),
                (130, State::Running)
            ]
        );
    }

    /// The summary tree gives the same picture as drawing every segment.
    #[test]
    fn tiles_from_summaries_match_drawing_every_segment() {
        let mut t = timeline();
        let mut at = 0u64;
        for n in 1..=50_000u64 {
            // Phases of 1500 lock cycles, alternately mostly running and mostly waiting, so
            // that the dominant state changes along the row.
            let waiting = (n / 1500) % 2 == 0;
            at += if waiting { 1 } else { 20 } + n % 3;
            t.push(1, at, 0, REQUEST, &two(9, 0));
            at += if waiting { 20 } else { 1 } + n % 3;
            t.push(1, at, 0, ACQUIRE, &two(9, n));
            t.push(1, at + 1, 0, RELEASE, &two(9, n));
        }
        let life = &t.lives[0];
        assert!(life.levels.len() >= 2, "the tree has several levels");
        for (t0, t1, width) in [(0, at, 800), (at / 3, at / 2, 1000), (1000, 1400, 400)] {
            let fast = t.tile(0..1, t0, t1, width, 0).rows[0].1.clone();
            let ns_per_px = (t1 - t0) as f64 / width as f64;
            let mut cols = Columns::new(width);
            for (i, s) in life.segments.iter().enumerate() {
                let end = life
                    .segments
                    .get(i + 1)
                    .map_or(t.now(), |n| n.start)
                    .min(t1);
                let a = s.start.max(t0);
                if end > a && s.start < t1 {
                    cols.add_span(a, end, t0, ns_per_px, s.state, s.object);
                }
            }
            let slow = cols.runs();
            let state_at =
                |runs: &[Run], x: u32| runs.iter().find(|r| r.x0 <= x && x < r.x1).map(|r| r.state);
            let differ = (0..width as u32)
                .filter(|&x| state_at(&fast, x) != state_at(&slow, x))
                .count();
            // Floating-point ties may flip a pixel or two, no more.
            assert!(differ <= width / 100, "{differ} of {width} pixels differ");
        }
    }

    /// A crafted stream: two million threads that never end, each with a role and a lock.
    /// The first ones are drawn, the rest counted; names and roles stay bounded.
    #[test]
    fn millions_of_threads_stay_within_the_bound() {
        let mut t = timeline();
        t.limit_threads(1000);
        let mut role = 6u32.to_le_bytes().to_vec();
        role.extend(b"worker");
        role.extend(7u64.to_le_bytes());
        let long = "x".repeat(1000);
        for thread in 1..=2_000_000u64 {
            t.name_thread(thread, &long);
            t.push(thread, thread, 0, ROLE, &role);
            t.push(thread, thread + 1, 0, REQUEST, &two(thread, 0));
        }
        let sizes = t.sizes();
        assert_eq!(sizes.threads, 1000, "{sizes:?}");
        assert!(sizes.names <= 2000 && sizes.roles <= 1000, "{sizes:?}");
        let f = t.forgotten_all();
        assert_eq!(f.events, 2 * (2_000_000 - 1000));
        assert_eq!(f.threads, 0, "none ended");
        assert!(t.rows()[0].label.len() <= MAX_LABEL);
        // The tile still answers, for the rows kept.
        assert_eq!(t.tile(0..10, 0, 10, 10, 0).total_rows, 1);
    }

    /// Threads that end make room for new ones: the lives of those that ended longest ago are
    /// forgotten and counted, and every thread is drawn.
    #[test]
    fn ended_threads_make_room() {
        let mut t = timeline();
        t.limit_threads(1000);
        for thread in 1..=200_000u64 {
            t.push(thread, thread * 10, 0, REQUEST, &two(1, 0));
            t.push(thread, thread * 10 + 5, 0, EXIT, &[]);
        }
        let sizes = t.sizes();
        assert!(sizes.threads <= 1000, "{sizes:?}");
        let f = t.forgotten_all();
        assert_eq!(f.events, 0);
        assert_eq!(f.threads as usize + sizes.threads, 200_000);
        // The most recent thread is kept.
        assert!(!t.segments(200_000).is_empty());
        assert!(t.segments(1).is_empty());
    }

    /// Two million locks, conditions and forks: the arrows' sources are remembered within the
    /// bound, the rest forgotten and counted.
    #[test]
    fn millions_of_objects_stay_within_the_bound() {
        let mut t = timeline();
        t.limit_objects(10_000);
        for o in 1..=2_000_000u64 {
            t.push(1, o, 0, RELEASE, &two(o, 1));
            assert!(t.sizes().objects <= 10_000);
        }
        assert!(t.forgotten_all().objects >= 2_000_000 - 10_000);
        // A recent release still draws its arrow.
        t.push(2, 2_000_001, 0, REQUEST, &two(2_000_000, 0));
        t.push(2, 2_000_002, 0, ACQUIRE, &two(2_000_000, 2));
        assert_eq!(t.arrows().len(), 1);
    }

    /// Arrows are forgotten with the segments they end in.
    #[test]
    fn arrows_stay_within_the_segment_limit() {
        let mut t = timeline();
        t.limit_segments(1000);
        for n in 1..=10_000u64 {
            t.push(1, n * 10, 0, ACQUIRE, &two(9, 2 * n - 1));
            t.push(1, n * 10 + 1, 0, RELEASE, &two(9, 2 * n - 1));
            t.push(2, n * 10 + 2, 0, REQUEST, &two(9, 0));
            t.push(2, n * 10 + 3, 0, ACQUIRE, &two(9, 2 * n));
            t.push(2, n * 10 + 4, 0, RELEASE, &two(9, 2 * n));
        }
        let sizes = t.sizes();
        assert!(sizes.segments <= 1000, "{sizes:?}");
        assert!(sizes.arrows <= 1000, "{sizes:?}");
    }
}
