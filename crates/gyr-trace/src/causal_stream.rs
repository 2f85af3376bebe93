//! A trace's records put in causal order, and corrected for perturbation if asked, for
//! readers that take records one at a time (the hub's replay, `gyr trace dump --ordered`):
//! the [ordering filter](crate::order) and the [corrector](crate::perturbation) joined.

use crate::order::{Event, OrderFilter, OrderStats, Stall};
use crate::perturbation::{CorrectionStats, Corrector};
use crate::sync_events::SyncDecoder;
use gyr_core::record::RecordHeader;
use gyr_core::schema::Schema;

/// A record the stream released: after its causes, its header corrected if asked.
#[derive(Debug)]
pub struct Released {
    /// Its thread.
    pub thread: u64,
    /// Its header (timestamp and perturbation corrected when the stream corrects).
    pub header: RecordHeader,
    /// Its payload.
    pub payload: Box<[u8]>,
}

/// Records in, records in causal order (and corrected) out.
#[derive(Debug)]
pub struct CausalStream {
    filter: OrderFilter<(RecordHeader, Box<[u8]>)>,
    decoder: SyncDecoder,
    corrector: Option<Corrector>,
}

impl CausalStream {
    /// A stream holding back at most `max_held` events; `correct` gives the trace's sensor
    /// cost (its header's `sensor_cost_ns`) to remove monitoring's time too.
    pub fn new(max_held: usize, correct: Option<f64>) -> Self {
        CausalStream {
            filter: OrderFilter::new(max_held),
            decoder: SyncDecoder::new(),
            corrector: correct.map(Corrector::new),
        }
    }

    /// Learns a schema of the trace.
    pub fn add_schema(&mut self, schema: &Schema) {
        self.decoder.add_schema(schema);
        if let Some(c) = self.corrector.as_mut() {
            c.add_schema(schema);
        }
    }

    /// Takes the next record of the trace; appends to `out` what it releases.
    pub fn push(
        &mut self,
        thread: u64,
        header: RecordHeader,
        payload: &[u8],
        out: &mut Vec<Released>,
    ) {
        let event = Event {
            thread,
            kind: self.decoder.classify(header.type_id, payload),
            data: (header, payload.into()),
        };
        let corrector = &mut self.corrector;
        self.filter
            .push(event, &mut |e| release(corrector.as_mut(), e, out));
    }

    /// The trace ended: appends to `out` what is still held (released without its causes).
    pub fn finish(&mut self, out: &mut Vec<Released>) {
        let corrector = &mut self.corrector;
        self.filter
            .finish(&mut |e| release(corrector.as_mut(), e, out));
    }

    /// The ordering filter's counters.
    pub fn order_stats(&self) -> OrderStats {
        self.filter.stats()
    }

    /// The events released without their cause since the last call.
    pub fn take_stalls(&mut self) -> Vec<Stall> {
        self.filter.take_stalls()
    }

    /// What the correction did, if the stream corrects.
    pub fn correction(&self) -> Option<CorrectionStats> {
        self.corrector.as_ref().map(Corrector::stats)
    }
}

fn release(
    corrector: Option<&mut Corrector>,
    e: Event<(RecordHeader, Box<[u8]>)>,
    out: &mut Vec<Released>,
) {
    let (mut header, payload) = e.data;
    if let Some(c) = corrector {
        c.correct(e.thread, &mut header, &payload);
    }
    out.push(Released {
        thread: e.thread,
        header,
        payload,
    });
}
