//! The thread life-time view of one program: its thread events (`gyr::sync`, `gyr::thread`,
//! the pthread interposer) put back in causal order by `gyr-trace`'s ordering filter, then
//! kept as a `Timeline` from which pages fetch level-of-detail tiles (`/api/timeline`).
//!
//! Only thread events and roles are kept and ordered here; other records never enter. The
//! filter holds at most [`MAX_HELD`] events, and the timeline at most [`MAX_SEGMENTS`]
//! segments (past that it forgets the oldest half of its busiest thread's), so a program
//! running for days cannot exhaust the hub. Both keep state for at most [`MAX_THREADS`]
//! threads and [`MAX_OBJECTS`] objects, so neither can a stream naming millions of them (any
//! local user or token holder can publish one). What is forgotten to stay within the bounds is
//! counted and shown with each tile.

use crate::protocol::{TimelineArrow, TimelineRow, TimelineTile};
use gyr_core::{RecordHeader, Schema};
use gyr_trace::{ArrowKind, Event, OrderFilter, Timeline};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Thread events the ordering filter may hold per program.
pub(crate) const MAX_HELD: usize = 1 << 20;
/// Segments the timeline keeps per program (about 24 bytes each).
pub(crate) const MAX_SEGMENTS: usize = 16 << 20;
/// Threads per program whose state the filter and the timeline keep: a life costs the
/// timeline about 200 bytes besides its segments, and its row a label, so 65 536 cost some
/// 20 MB; far more threads than a view can show rows for (roles group short-lived ones), and
/// more than Linux lets most users run at once (`ulimit -u` defaults to a few tens of
/// thousands). Past it, ended threads are forgotten first.
pub(crate) const MAX_THREADS: usize = 1 << 16;
/// Objects (mutexes, conditions, rwlocks, barrier generations, forks and exits) per program
/// whose state each of the filter and the timeline keeps: about 64 bytes each, so at most
/// some 130 MB together, less than the segments may take, while a program with a million
/// live locks is still ordered and drawn exactly.
pub(crate) const MAX_OBJECTS: usize = 1 << 20;

/// A thread event waiting in the filter.
#[derive(Debug)]
struct Held {
    ts: u64,
    blocked: u64,
    type_id: u32,
    payload: Box<[u8]>,
}

/// How long an event may wait for its cause before it is released without it.
const MAX_HOLD: Duration = Duration::from_secs(1);

/// One program's life-time view.
#[derive(Debug)]
pub(crate) struct Lifetimes {
    filter: OrderFilter<Held>,
    timeline: Timeline,
    /// The filter's arrival count now and then, oldest first: events that arrived before a
    /// mark older than [`MAX_HOLD`] have waited long enough.
    marks: VecDeque<(Instant, u64)>,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self::bounded(MAX_THREADS, MAX_OBJECTS)
    }
}

impl Lifetimes {
    /// A view keeping state for at most `threads` threads and `objects` objects.
    fn bounded(threads: usize, objects: usize) -> Self {
        let mut timeline = Timeline::new();
        timeline.limit_segments(MAX_SEGMENTS);
        timeline.limit_threads(threads);
        timeline.limit_objects(objects);
        let mut filter = OrderFilter::new(MAX_HELD);
        filter.limit_threads(threads);
        filter.limit_objects(objects);
        Lifetimes {
            filter,
            timeline,
            marks: VecDeque::new(),
        }
    }

    pub(crate) fn add_schema(&mut self, schema: &Schema) {
        self.timeline.add_schema(schema);
    }

    pub(crate) fn name_thread(&mut self, thread: u64, name: &str) {
        self.timeline.name_thread(thread, name);
    }

    /// A thread's role, as the program's stream describes the thread (for a hub that attached
    /// after its `gyr.thread.role` record).
    pub(crate) fn set_role(&mut self, thread: u64, role: &str, index: u64) {
        self.timeline.set_role(thread, role, index);
    }

    /// Takes in one record of the program's stream, if it is a thread event.
    pub(crate) fn record(&mut self, thread: u64, h: &RecordHeader, payload: &[u8]) {
        if !self.timeline.wants(h.type_id) {
            return;
        }
        let kind = self.timeline.classify(h.type_id, payload);
        let event = Event {
            thread,
            kind,
            data: Held {
                ts: h.timestamp,
                blocked: h.perturbation,
                type_id: h.type_id,
                payload: payload.into(),
            },
        };
        let timeline = &mut self.timeline;
        self.filter.push(event, &mut |e| {
            let d = e.data;
            timeline.push(e.thread, d.ts, d.blocked, d.type_id, &d.payload);
        });
        if self.filter.stats().events.is_multiple_of(256) {
            self.release_stalled(Instant::now());
        }
    }

    /// Releases events held longer than [`MAX_HOLD`]: their causes came before the hub joined
    /// the stream, or were lost. Called as records arrive and when a page asks for a tile.
    pub(crate) fn release_stalled(&mut self, now: Instant) {
        let arrivals = self.filter.stats().events;
        if self
            .marks
            .back()
            .is_none_or(|(at, _)| now.duration_since(*at) >= MAX_HOLD / 4)
        {
            self.marks.push_back((now, arrivals));
        }
        let mut before = None;
        while let Some(&(at, n)) = self.marks.front() {
            if now.duration_since(at) < MAX_HOLD {
                break;
            }
            before = Some(n);
            self.marks.pop_front();
        }
        if let Some(n) = before {
            let timeline = &mut self.timeline;
            self.filter.release_held_before(n, &mut |e| {
                let d = e.data;
                timeline.push(e.thread, d.ts, d.blocked, d.type_id, &d.payload);
            });
        }
    }

    /// The latest time seen, seconds.
    pub(crate) fn now_s(&self) -> f64 {
        self.timeline.now() as f64 / 1e9
    }

    /// The viewport `rows` × `[t0_s, t1_s)` seconds, `width` pixels wide.
    pub(crate) fn tile(
        &self,
        pid: u32,
        rows: std::ops::Range<usize>,
        t0_s: f64,
        t1_s: f64,
        width: usize,
        max_arrows: usize,
    ) -> TimelineTile {
        let ns = |s: f64| (s.max(0.0) * 1e9) as u64;
        let s = |ns: u64| ns as f64 / 1e9;
        let tile = self
            .timeline
            .tile(rows, ns(t0_s), ns(t1_s), width, max_arrows);
        let stats = self.filter.stats();
        let forgotten = self.timeline.forgotten_all();
        TimelineTile {
            pid,
            start_s: s(self.timeline.start()),
            now_s: s(self.timeline.now()),
            t0_s,
            t1_s,
            width: width as u32,
            first_row: tile.first_row as u32,
            total_rows: tile.total_rows as u32,
            rows: tile
                .rows
                .into_iter()
                .map(|(row, runs)| TimelineRow {
                    label: row.label,
                    threads: row.threads,
                    runs: runs
                        .into_iter()
                        .map(|r| (r.x0, r.x1, r.state as u8, r.object))
                        .collect(),
                })
                .collect(),
            arrows: tile
                .arrows
                .into_iter()
                .map(|a| TimelineArrow {
                    from_thread: a.from.0,
                    from_s: s(a.from.1),
                    to_thread: a.to.0,
                    to_s: s(a.to.1),
                    kind: match a.kind {
                        ArrowKind::Lock => "lock",
                        ArrowKind::Signal => "signal",
                        ArrowKind::Fork => "fork",
                        ArrowKind::Join => "join",
                    }
                    .to_owned(),
                    object: a.object,
                })
                .collect(),
            arrows_omitted: tile.arrows_omitted as u32,
            events: self.timeline.events(),
            held: stats.held as u64,
            hold_back_ratio: stats.hold_back_ratio(),
            forced: stats.forced,
            segments_forgotten: forgotten.segments,
            threads_forgotten: forgotten.threads,
            events_not_drawn: forgotten.events,
            thread_limit: self.timeline.max_threads() as u32,
            objects_forgotten: forgotten.objects + stats.objects_forgotten,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::{Field, FieldType, Schema};

    /// A crafted stream naming a new thread and a new mutex in every record: the view keeps
    /// within its bounds and the tile says what it forgot or left out.
    #[test]
    fn a_crafted_stream_stays_bounded_and_the_tile_says_so() {
        let mut l = Lifetimes::bounded(1000, 10_000);
        let fields = vec![
            Field::new("mutex", FieldType::U64),
            Field::new("n", FieldType::U64),
        ];
        l.add_schema(&Schema::new(1, "gyr.mutex.release", fields).unwrap());
        let n = 200_000u64;
        for i in 1..=n {
            let mut payload = i.to_le_bytes().to_vec();
            payload.extend(1u64.to_le_bytes());
            let h = RecordHeader {
                len: 0,
                type_id: 1,
                timestamp: i,
                seq: 0,
                perturbation: 0,
            };
            l.name_thread(i, "a thread");
            l.record(i, &h, &payload);
        }
        let f = l.filter.sizes();
        assert!(f.threads <= 1000 && f.objects <= 10_000, "{f:?}");
        let t = l.timeline.sizes();
        assert!(
            t.threads <= 1000 && t.names <= 2000 && t.objects <= 10_000,
            "{t:?}"
        );
        let tile = l.tile(1, 0..5, 0.0, 1.0, 100, 10);
        assert_eq!(tile.events_not_drawn, n - 1000);
        assert_eq!(tile.thread_limit, 1000);
        assert!(
            tile.objects_forgotten >= n - 10_000,
            "{}",
            tile.objects_forgotten
        );
        assert_eq!(tile.total_rows, 1000);
        // The hub's own bounds are the documented ones.
        let d = Lifetimes::default();
        assert_eq!(d.timeline.max_threads(), MAX_THREADS);
    }
}
