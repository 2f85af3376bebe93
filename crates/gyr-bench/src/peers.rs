//! The peers, capturing the same event: `tracing` with a layer that records the event's fields
//! into memory (as a user capturing events would), and a `puffin` scope with the profiler on.

use std::cell::RefCell;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

thread_local! {
    /// Where the capturing layer stores events: timestamp and the eight fields.
    static CAPTURED: RefCell<Vec<[u64; 9]>> = RefCell::new(Vec::with_capacity(1 << 20));
}

/// A `tracing` layer that stamps each event and records its `u64` fields in a thread-local
/// buffer: the least a tracing user who captures events has to do.
#[derive(Debug)]
pub(crate) struct CaptureLayer {
    clock: quanta::Clock,
}

impl CaptureLayer {
    pub(crate) fn new(clock: quanta::Clock) -> Self {
        CaptureLayer { clock }
    }
}

struct Fields {
    values: [u64; 9],
    n: usize,
}

impl Visit for Fields {
    fn record_u64(&mut self, _field: &Field, value: u64) {
        if self.n < 8 {
            self.values[1 + self.n] = value;
            self.n += 1;
        }
    }
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields {
            values: [0; 9],
            n: 0,
        };
        f.values[0] = self.clock.raw();
        event.record(&mut f);
        CAPTURED.with(|c| c.borrow_mut().push(f.values));
    }
}

/// Empties this thread's captured events (between timed rounds).
pub(crate) fn clear_captured() -> usize {
    CAPTURED.with(|c| {
        let mut c = c.borrow_mut();
        let n = c.len();
        c.clear();
        n
    })
}

/// One `tracing` event with eight `u64` fields (64 bytes of payload).
#[inline(always)]
pub(crate) fn tracing_event(p: &[u64; 8]) {
    tracing::info!(
        a = p[0],
        b = p[1],
        c = p[2],
        d = p[3],
        e = p[4],
        f = p[5],
        g = p[6],
        h = p[7]
    );
}

/// The 64 bytes a puffin scope carries as its data string.
pub(crate) const PUFFIN_DATA: &str =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// One puffin scope (a begin and an end record) carrying 64 bytes of data.
#[inline(always)]
pub(crate) fn puffin_scope() {
    puffin::profile_scope!("bench_event", PUFFIN_DATA);
}
