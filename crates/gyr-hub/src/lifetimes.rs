//! The thread life-time view of one program: its thread events (`gyr::sync`, `gyr::thread`,
//! the pthread interposer) put back in causal order by `gyr-trace`'s ordering filter, then
//! kept as a `Timeline` from which pages fetch level-of-detail tiles (`/api/timeline`).
//!
//! Only thread events and roles are kept and ordered here; other records never enter. The
//! filter holds at most [`MAX_HELD`] events, and the timeline at most [`MAX_SEGMENTS`]
//! segments (past that it forgets the oldest half of its busiest thread's), so a program
//! running for days cannot exhaust the hub.

use crate::protocol::{TimelineArrow, TimelineRow, TimelineTile};
use gyr_core::{RecordHeader, Schema};
use gyr_trace::{ArrowKind, Event, OrderFilter, Timeline};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Thread events the ordering filter may hold per program.
pub(crate) const MAX_HELD: usize = 1 << 20;
/// Segments the timeline keeps per program (about 24 bytes each).
pub(crate) const MAX_SEGMENTS: usize = 16 << 20;

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
        let mut timeline = Timeline::new();
        timeline.limit_segments(MAX_SEGMENTS);
        Lifetimes {
            filter: OrderFilter::new(MAX_HELD),
            timeline,
            marks: VecDeque::new(),
        }
    }
}

impl Lifetimes {
    pub(crate) fn add_schema(&mut self, schema: &Schema) {
        self.timeline.add_schema(schema);
    }

    pub(crate) fn name_thread(&mut self, thread: u64, name: &str) {
        self.timeline.name_thread(thread, name);
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
            forgotten: self.timeline.forgotten(),
        }
    }
}
