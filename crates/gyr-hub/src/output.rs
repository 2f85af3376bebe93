//! Output ports for gRPC clients of the hub: live event streams and the steering log of every
//! program the hub watches, joined at any time by a new analysis or display (Falcon's
//! attachable outputs). A subscriber names one program or takes them all; each batch carries
//! its program's pid, and a subscriber gets a program's schemas and threads before its first
//! records, and its first batch of each program carries that program's clock anchor. Queues
//! are bounded: a slow subscriber loses batches, counted in its next batch,
//! and never slows the hub or another subscriber.

use crate::program::Process;
use gyr_core::record::{Records, push_record};
use gyr_proto::batch_queue::{BatchReceiver, BatchSender, Refused, batch_queue};
use gyr_proto::v1;
use std::collections::HashSet;
use std::sync::Mutex;

/// Batches queued per subscriber before its batches are dropped and counted.
const QUEUE: usize = 1024;
/// Bytes of records queued per subscriber at most: what a stalled client costs the hub.
const QUEUE_BYTES: usize = 32 << 20;

struct Subscriber {
    tx: BatchSender,
    pid: Option<u32>,
    types: Option<HashSet<String>>,
    threads: Option<HashSet<u64>>,
    /// (pid, started) of programs whose schemas and threads it has.
    introduced: HashSet<(u32, u64)>,
    lost: u64,
    /// It asked for records decoded into typed values rather than blocks.
    decoded: bool,
}

/// Every gRPC subscriber of the hub.
pub(crate) struct Outputs {
    subscribers: Mutex<Vec<Subscriber>>,
    /// New steering-log entries, with their pid.
    pub(crate) log: tokio::sync::broadcast::Sender<v1::LogEntry>,
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outputs")
    }
}

impl Default for Outputs {
    fn default() -> Self {
        Outputs {
            subscribers: Mutex::new(Vec::new()),
            log: tokio::sync::broadcast::channel(1024).0,
        }
    }
}

impl Outputs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new subscriber to one program (`None`: all) and to `types` and `threads` (empty:
    /// all).
    pub(crate) fn subscribe(
        &self,
        pid: Option<u32>,
        types: Vec<String>,
        threads: Vec<u64>,
        decoded: bool,
    ) -> BatchReceiver {
        let (tx, rx) = batch_queue(QUEUE, QUEUE_BYTES);
        self.lock().push(Subscriber {
            tx,
            pid,
            types: (!types.is_empty()).then(|| types.into_iter().collect()),
            threads: (!threads.is_empty()).then(|| threads.into_iter().collect()),
            introduced: HashSet::new(),
            lost: 0,
            decoded,
        });
        rx
    }

    /// Program `pid` has ended and its last batch has been forwarded: the streams of the
    /// subscribers to it alone end, after what is queued for them.
    pub(crate) fn ended(&self, pid: u32) {
        self.lock().retain(|sub| sub.pid != Some(pid));
    }

    /// Sends `batch`, just taken in from program `p`, to every subscriber that wants it.
    pub(crate) fn forward(&self, p: &Process, batch: &v1::EventBatch) {
        let mut subs = self.lock();
        if subs.is_empty() {
            return;
        }
        let key = (p.pid, p.started_unix_ns);
        subs.retain_mut(|sub| {
            if sub.pid.is_some_and(|pid| pid != p.pid) {
                return true;
            }
            let wanted: Option<HashSet<u32>> = sub.types.as_ref().map(|names| {
                p.wire_schemas
                    .iter()
                    .filter(|s| names.contains(&s.name))
                    .map(|s| s.id)
                    .collect()
            });
            let mut n = 0u64;
            let blocks: Vec<v1::RecordBlock> = batch
                .blocks
                .iter()
                .filter(|b| sub.threads.as_ref().is_none_or(|t| t.contains(&b.thread)))
                .filter_map(|b| match &wanted {
                    None => {
                        n += Records::new(b.thread, &b.records).count() as u64;
                        Some(b.clone())
                    }
                    Some(ids) => {
                        let mut out = Vec::new();
                        for r in Records::new(b.thread, &b.records).flatten() {
                            if ids.contains(&r.header.type_id) {
                                let h = r.header;
                                push_record(
                                    &mut out,
                                    h.type_id,
                                    h.timestamp,
                                    h.seq,
                                    h.perturbation,
                                    r.payload,
                                );
                                n += 1;
                            }
                        }
                        (!out.is_empty()).then(|| v1::RecordBlock {
                            thread: b.thread,
                            records: out.into(),
                        })
                    }
                })
                .collect();
            let intro = !sub.introduced.contains(&key);
            // A batch that describes new types or threads goes out even with no record the
            // subscriber wants: their records come in later batches that do not repeat it.
            let describes = !batch.schemas.is_empty() || !batch.threads.is_empty();
            if blocks.is_empty() && !intro && !describes && batch.lost == 0 {
                return true;
            }
            let (schemas, threads) = if intro {
                (
                    p.wire_schemas.clone(),
                    p.wire_threads.values().cloned().collect(),
                )
            } else {
                (batch.schemas.clone(), batch.threads.clone())
            };
            // The program's fresh anchor passes on; a subscriber new to the program gets the
            // latest the hub has.
            let anchor = batch.anchor.or(intro.then(|| p.clock_anchor()));
            let (blocks, events, undecodable) = if sub.decoded {
                let (events, bad) = gyr_proto::stream::decode_blocks(&blocks, |id| {
                    p.schemas.iter().rev().find(|s| s.id == id)
                });
                (Vec::new(), events, bad)
            } else {
                (blocks, Vec::new(), 0)
            };
            let out = v1::EventBatch {
                schemas,
                threads,
                blocks,
                lost: std::mem::take(&mut sub.lost) + batch.lost,
                pid: p.pid,
                anchor,
                events,
                undecodable,
            };
            match sub.tx.try_send(out) {
                Ok(()) => {
                    sub.introduced.insert(key);
                    true
                }
                Err(Refused::Full(b)) => {
                    sub.lost += b.lost + n;
                    // What described the stream is sent again with the next batch that fits.
                    sub.introduced.remove(&key);
                    true
                }
                Err(Refused::Closed(_)) => false,
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Source, tests::batch};
    use gyr_core::{Field, FieldType, Schema, Value};

    #[test]
    fn a_type_described_in_a_batch_without_its_records_still_reaches_its_subscriber() {
        let step = Schema::new(1, "step", vec![Field::new("n", FieldType::U64)]).unwrap();
        let energy = Schema::new(2, "energy", vec![Field::new("e", FieldType::F64)]).unwrap();
        let outputs = Outputs::default();
        let mut p = Process::new(7, vec![], 0, Source::Pushed);
        // Subscribed before the program registered `energy`.
        let mut rx = outputs.subscribe(Some(7), vec!["energy".into()], vec![], false);
        let first = batch(&step, &[(1, vec![Value::UInt(1)])], 1);
        p.ingest_batch(&first);
        outputs.forward(&p, &first);
        // `energy` is described in a batch holding only `step` records ...
        let mut second = batch(&step, &[(2, vec![Value::UInt(2)])], 2);
        second.schemas.push(gyr_proto::stream::wire_schema(&energy));
        second.threads.clear();
        p.ingest_batch(&second);
        outputs.forward(&p, &second);
        // ... and its first record comes in a batch that does not describe it again.
        let mut third = batch(&energy, &[(3, vec![Value::Float(1.5)])], 3);
        third.schemas.clear();
        third.threads.clear();
        p.ingest_batch(&third);
        outputs.forward(&p, &third);
        let mut decoder = gyr_client::events::EventDecoder::default();
        let mut events = Vec::new();
        let mut unreadable = 0;
        while let Some(Ok(b)) = rx.try_recv() {
            let b = decoder.batch(b);
            unreadable += b.unreadable;
            events.extend(b.events);
        }
        assert_eq!(unreadable, 0);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].type_name, "energy");
    }
}

#[cfg(test)]
mod anchor_tests {
    use super::*;
    use crate::program::{Source, tests::batch};
    use gyr_core::{Field, FieldType, Schema, Value};

    #[test]
    fn each_program_s_first_batch_carries_its_anchor_and_fresh_ones_pass_on() {
        let step = Schema::new(1, "step", vec![Field::new("n", FieldType::U64)]).unwrap();
        let outputs = Outputs::default();
        let mut p = Process::new(7, vec![], 1_000, Source::Pushed);
        let mut rx = outputs.subscribe(None, vec![], vec![], false);
        // Before the program's stream anchored anything, its timestamp 0 is the anchor.
        let first = batch(&step, &[(1, vec![Value::UInt(1)])], 1);
        p.ingest_batch(&first);
        outputs.forward(&p, &first);
        let got = rx.try_recv().unwrap().unwrap();
        assert_eq!(
            got.anchor,
            Some(v1::ClockAnchor {
                trace_ns: 0,
                unix_ns: 1_000
            })
        );
        // No anchor while nothing changed.
        let second = batch(&step, &[(2, vec![Value::UInt(2)])], 2);
        p.ingest_batch(&second);
        outputs.forward(&p, &second);
        assert_eq!(rx.try_recv().unwrap().unwrap().anchor, None);
        // The program's own anchor is handed on, and a later subscriber starts from it.
        let fresh = v1::ClockAnchor {
            trace_ns: 50,
            unix_ns: 9_000,
        };
        let mut third = batch(&step, &[(3, vec![Value::UInt(3)])], 3);
        third.anchor = Some(fresh);
        p.ingest_batch(&third);
        outputs.forward(&p, &third);
        assert_eq!(rx.try_recv().unwrap().unwrap().anchor, Some(fresh));
        let mut late = outputs.subscribe(Some(7), vec![], vec![], false);
        let fourth = batch(&step, &[(4, vec![Value::UInt(4)])], 4);
        p.ingest_batch(&fourth);
        outputs.forward(&p, &fourth);
        assert_eq!(late.try_recv().unwrap().unwrap().anchor, Some(fresh));
        assert_eq!(rx.try_recv().unwrap().unwrap().anchor, None);
    }

    #[test]
    fn a_subscriber_may_take_each_program_s_records_decoded() {
        let step = Schema::new(1, "step", vec![Field::new("n", FieldType::U64)]).unwrap();
        let outputs = Outputs::default();
        let mut p = Process::new(7, vec![], 1_000, Source::Pushed);
        let mut rx = outputs.subscribe(None, vec![], vec![], true);
        let b = batch(
            &step,
            &[(1, vec![Value::UInt(5)]), (2, vec![Value::UInt(6)])],
            1,
        );
        p.ingest_batch(&b);
        outputs.forward(&p, &b);
        let got = rx.try_recv().unwrap().unwrap();
        assert!(got.blocks.is_empty());
        assert_eq!((got.pid, got.undecodable), (7, 0));
        let values: Vec<_> = got
            .events
            .iter()
            .map(|e| (e.r#type.as_str(), e.seq, e.fields[0].value.clone()))
            .collect();
        assert_eq!(
            values,
            [
                ("step", 1, Some(Value::UInt(5).into())),
                ("step", 2, Some(Value::UInt(6).into()))
            ]
        );
    }
}
