//! Live event streams for clients: a sink that fans each monitor batch out to subscribers.
//!
//! A subscriber gets the schemas and threads it needs before the records that use them, and
//! only the types and threads it asked for. Its queue is bounded; when it is full the batch is
//! dropped for that subscriber and counted, and the count travels in its next batch: a slow
//! client never slows the monitors, so it never slows the program.
//!
//! A subscriber's first batch carries a clock anchor (the trace clock and the wall clock read
//! at one instant), and a new one follows every [`ANCHOR_PERIOD`] and after a dropped batch,
//! so a client can put wall-clock times on records however long it stays.
//!
//! The process's `gyr.msg.rank` record (who it is in its job, said once at start-up: an MPI
//! rank's `MPI_Init`) is kept and comes first to every later subscriber, so that a hub attaching
//! to a running rank still knows its job and rank.

use crate::batch::Batch;
use crate::sink::Sink;
use gyr_core::record::Records;
use gyr_core::{Schema, ThreadInfo, TraceEnd};
use gyr_proto::batch_queue::{BatchReceiver, BatchSender, Refused, batch_queue};
use gyr_proto::stream::{wire_schema, wire_thread, wire_thread_with_role};
use gyr_proto::v1;
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

/// Batches queued per subscriber before its batches are dropped and counted.
pub const DEFAULT_SUBSCRIBER_QUEUE: usize = 256;
/// Bytes of records queued per subscriber at most (a batch may be a whole ring): what a
/// stalled client can cost the program's memory.
pub const DEFAULT_SUBSCRIBER_QUEUE_BYTES: usize = 16 << 20;

/// How often a subscriber's stream carries a fresh clock anchor.
pub(crate) const ANCHOR_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);

/// The trace clock and the wall clock, read one after the other.
pub(crate) fn anchor_now() -> v1::ClockAnchor {
    let trace_ns = crate::clock::clock().now_ns();
    let unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    v1::ClockAnchor { trace_ns, unix_ns }
}

struct Subscriber {
    tx: BatchSender,
    /// When it was last sent an anchor (`None`: its next batch carries one).
    anchored: Option<std::time::Instant>,
    /// It asked for records decoded into typed values rather than blocks.
    decoded: bool,
    types: Option<HashSet<String>>,
    type_ids: HashSet<u32>,
    threads: Option<HashSet<u64>>,
    pending_schemas: Vec<v1::Schema>,
    pending_threads: Vec<v1::ThreadInfo>,
    /// Records it gets before the next batch's: the process's `gyr.msg.rank`, which went by
    /// before it came.
    pending_blocks: Vec<v1::RecordBlock>,
    lost: u64,
    /// The push to a hub: it stays subscribed while its connection is down, so what it could
    /// not send meanwhile is counted, and the count reaches the hub when it is back.
    publisher: bool,
}

impl Subscriber {
    /// A subscriber's queue; its schemas and threads come first.
    fn new(
        st: &State,
        roles: &Roles,
        types: Vec<String>,
        threads: Vec<u64>,
        publisher: bool,
        decoded: bool,
    ) -> (Self, BatchReceiver) {
        let (tx, rx) = batch_queue(DEFAULT_SUBSCRIBER_QUEUE, DEFAULT_SUBSCRIBER_QUEUE_BYTES);
        let types = (!types.is_empty()).then(|| types.into_iter().collect::<HashSet<_>>());
        let type_ids: HashSet<u32> = st
            .schemas
            .iter()
            .filter(|s| types.as_ref().is_none_or(|t| t.contains(&s.name)))
            .map(|s| s.id)
            .collect();
        let threads = (!threads.is_empty()).then(|| threads.into_iter().collect::<HashSet<_>>());
        let pending_blocks = st
            .rank
            .iter()
            .filter(|(id, b)| {
                type_ids.contains(id) && threads.as_ref().is_none_or(|t| t.contains(&b.thread))
            })
            .map(|(_, b)| b.clone())
            .collect();
        let sub = Subscriber {
            tx,
            anchored: None,
            decoded,
            type_ids,
            threads,
            pending_blocks,
            pending_schemas: st.schemas.iter().map(wire_schema).collect(),
            pending_threads: st
                .threads
                .iter()
                .map(|t| {
                    let role = roles.get(&t.id).map(|(r, i)| (r.as_str(), *i));
                    wire_thread_with_role(t, role)
                })
                .collect(),
            types,
            lost: 0,
            publisher,
        };
        (sub, rx)
    }
}

/// The threads' roles, by thread.
type Roles = HashMap<u64, (String, u64)>;

#[derive(Default)]
struct State {
    schemas: Vec<Schema>,
    threads: Vec<ThreadInfo>,
    subscribers: Vec<Subscriber>,
    /// The type id of `gyr.msg.rank`, from when its schema is known until its record is kept.
    rank_type: Option<u32>,
    /// The process's first `gyr.msg.rank` record, with its type id, for later subscribers.
    rank: Option<(u32, v1::RecordBlock)>,
}

/// Appends a copy of record `r` to the records block `out`.
fn push_copy(out: &mut Vec<u8>, r: &gyr_core::record::RecordRef<'_>) {
    gyr_core::record::push_record(
        out,
        r.header.type_id,
        r.header.timestamp,
        r.header.seq,
        r.header.perturbation,
        r.payload,
    );
}

/// The first record of type `type_id` in `batch`, as a block of its own.
fn first_of_type(batch: &Batch, type_id: u32) -> Option<v1::RecordBlock> {
    batch.blocks().find_map(|(thread, records)| {
        let r = Records::new(thread, records)
            .flatten()
            .find(|r| r.header.type_id == type_id)?;
        let mut out = Vec::new();
        push_copy(&mut out, &r);
        Some(v1::RecordBlock {
            thread,
            records: out.into(),
        })
    })
}

/// The fan-out, shared by the runtime's sink and the server.
#[derive(Default, Clone)]
pub(crate) struct Fanout {
    state: Arc<Mutex<State>>,
    /// The runtime's rings, whose entries hold the threads' roles.
    rings: crate::state::Rings,
}

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fanout")
    }
}

impl Fanout {
    /// The fan-out of the runtime whose threads' rings are `rings`.
    pub(crate) fn new(rings: crate::state::Rings) -> Self {
        Fanout {
            state: Default::default(),
            rings,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The roles the running threads named. Read under the fan-out's lock (taken before the
    /// rings' and a role's, never after), so that a role named after this read has its record
    /// in a batch the new subscriber gets. A role is stored before its record is emitted.
    fn roles(&self) -> Roles {
        let rings: Vec<_> = crate::primitives::lock(&self.rings).clone();
        rings
            .iter()
            .filter_map(|e| Some((e.info.id, crate::primitives::lock(&e.role).clone()?)))
            .collect()
    }

    /// A new subscriber to `types` (empty: all) of `threads` (empty: all).
    pub(crate) fn subscribe(
        &self,
        types: Vec<String>,
        threads: Vec<u64>,
        decoded: bool,
    ) -> BatchReceiver {
        let mut st = self.lock();
        let roles = self.roles();
        let (sub, rx) = Subscriber::new(&st, &roles, types, threads, false, decoded);
        st.subscribers.push(sub);
        rx
    }

    /// The push to a hub, (re)connected: a queue of every event, starting with every schema
    /// and thread (a new hub knows none), and the count of records emitted since the last
    /// connection went down that it never got. The subscription outlives the connection.
    pub(crate) fn subscribe_publisher(&self) -> (BatchReceiver, u64) {
        let mut st = self.lock();
        let roles = self.roles();
        let (mut sub, rx) = Subscriber::new(&st, &roles, Vec::new(), Vec::new(), true, false);
        match st.subscribers.iter_mut().find(|s| s.publisher) {
            Some(old) => {
                sub.lost = 0;
                let missed = std::mem::take(&mut old.lost);
                *old = sub;
                (rx, missed)
            }
            None => {
                st.subscribers.push(sub);
                (rx, 0)
            }
        }
    }

    /// Records the push had queued but never sent (its connection went down): counted with
    /// the rest of what it missed.
    pub(crate) fn publisher_missed(&self, records: u64) {
        if let Some(p) = self.lock().subscribers.iter_mut().find(|s| s.publisher) {
            p.lost += records;
        }
    }
}

/// The runtime's side of the fan-out.
#[derive(Debug)]
pub(crate) struct FanoutSink(pub(crate) Fanout);

impl Sink for FanoutSink {
    fn name(&self) -> &str {
        "event streams"
    }

    /// One monitor batch becomes one `EventBatch` per subscriber: the types and threads it has
    /// not been told of, then the blocks of the threads and types it asked for.
    fn batch(&mut self, batch: &Batch) -> io::Result<()> {
        let mut st = self.0.lock();
        for schema in batch.schemas() {
            if schema.name == <crate::msg::MsgRank<'_> as crate::Sensor>::NAME && st.rank.is_none()
            {
                st.rank_type = Some(schema.id);
            }
            st.schemas.push(schema.clone());
            let w = wire_schema(schema);
            for sub in &mut st.subscribers {
                if sub.types.as_ref().is_none_or(|t| t.contains(&schema.name)) {
                    sub.type_ids.insert(schema.id);
                }
                sub.pending_schemas.push(w.clone());
            }
        }
        for info in batch.threads() {
            st.threads.push(info.clone());
            let w = wire_thread(info);
            for sub in &mut st.subscribers {
                sub.pending_threads.push(w.clone());
            }
        }
        // Only the batches from its schema to its record are searched.
        if let Some(id) = st.rank_type
            && let Some(block) = first_of_type(batch, id)
        {
            st.rank = Some((id, block));
            st.rank_type = None;
        }
        if st.subscribers.is_empty() || batch.is_empty() {
            return Ok(());
        }
        // One copy of each block, shared by every subscriber that takes all types.
        let mut whole: Option<Vec<(v1::RecordBlock, u64)>> = None;
        let mut whole = || {
            whole
                .get_or_insert_with(|| {
                    batch
                        .blocks()
                        .map(|(thread, records)| {
                            let block = v1::RecordBlock {
                                thread,
                                records: gyr_proto::Bytes::copy_from_slice(records),
                            };
                            (block, Records::new(thread, records).count() as u64)
                        })
                        .collect()
                })
                .clone()
        };
        // One reading of the clocks for every subscriber due an anchor.
        let mut anchor: Option<(v1::ClockAnchor, std::time::Instant)> = None;
        let st = &mut *st;
        let schemas = &st.schemas;
        st.subscribers.retain_mut(|sub| {
            let wanted = |thread: u64| sub.threads.as_ref().is_none_or(|t| t.contains(&thread));
            let (mut blocks, mut n) = if sub.types.is_none() {
                let blocks: Vec<_> = whole()
                    .into_iter()
                    .filter(|(b, _)| wanted(b.thread))
                    .collect();
                let n = blocks.iter().map(|(_, n)| n).sum();
                (blocks.into_iter().map(|(b, _)| b).collect(), n)
            } else {
                let mut n = 0;
                let blocks = batch
                    .blocks()
                    .filter(|(thread, _)| wanted(*thread))
                    .filter_map(|(thread, records)| {
                        let mut out = Vec::new();
                        for r in Records::new(thread, records).flatten() {
                            if sub.type_ids.contains(&r.header.type_id) {
                                push_copy(&mut out, &r);
                                n += 1;
                            }
                        }
                        (!out.is_empty()).then(|| v1::RecordBlock {
                            thread,
                            records: out.into(),
                        })
                    })
                    .collect::<Vec<_>>();
                (blocks, n)
            };
            if !sub.pending_blocks.is_empty() {
                n += sub.pending_blocks.len() as u64;
                blocks.splice(0..0, std::mem::take(&mut sub.pending_blocks));
            }
            if n == 0 {
                return true;
            }
            if sub.publisher && sub.tx.is_closed() {
                // The hub is away: count what it misses, for when it is back.
                sub.lost += n;
                return true;
            }
            let (blocks, events, undecodable) = if sub.decoded {
                let (events, bad) = gyr_proto::stream::decode_blocks(&blocks, |id| {
                    schemas.iter().rev().find(|s| s.id == id)
                });
                (Vec::new(), events, bad)
            } else {
                (blocks, Vec::new(), 0)
            };
            let due = sub.anchored.is_none_or(|at| at.elapsed() >= ANCHOR_PERIOD);
            let anchor = due
                .then(|| *anchor.get_or_insert_with(|| (anchor_now(), std::time::Instant::now())));
            let out = v1::EventBatch {
                schemas: std::mem::take(&mut sub.pending_schemas),
                threads: std::mem::take(&mut sub.pending_threads),
                blocks,
                lost: std::mem::take(&mut sub.lost),
                pid: 0,
                anchor: anchor.map(|(a, _)| a),
                events,
                undecodable,
            };
            match sub.tx.try_send(out) {
                Ok(()) => {
                    if let Some((_, at)) = anchor {
                        sub.anchored = Some(at);
                    }
                    true
                }
                Err(Refused::Full(b)) => {
                    // The anchor went with the batch: the next one carries another.
                    sub.anchored = None;
                    // Keep what describes the stream; count the records.
                    sub.pending_schemas = b.schemas;
                    sub.pending_threads = b.threads;
                    sub.lost += b.lost + n;
                    true
                }
                Err(Refused::Closed(b)) if sub.publisher => {
                    sub.lost += b.lost + n;
                    true
                }
                Err(Refused::Closed(_)) => false,
            }
        });
        Ok(())
    }

    /// The program is shutting down: every stream ends (after a last batch with the count of
    /// events a slow client missed), so that clients see a clean end, not a broken connection.
    fn close(&mut self, _end: &TraceEnd) -> io::Result<()> {
        let mut st = self.0.lock();
        for sub in st.subscribers.drain(..) {
            if sub.lost > 0 {
                let _ = sub.tx.try_send(v1::EventBatch {
                    lost: sub.lost,
                    ..Default::default()
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of one record of type 1 on thread 1, at `ts` ns.
    fn batch(ts: u64) -> Batch {
        let mut bytes = Vec::new();
        gyr_core::record::push_record(&mut bytes, 1, ts, 0, 0, &[]);
        Batch {
            blocks: vec![(1, 0..bytes.len())],
            bytes,
            records: 1,
            ..Batch::default()
        }
    }

    #[test]
    fn the_first_batch_anchors_the_trace_clock_to_the_wall_clock() {
        let fanout = Fanout::default();
        let mut sink = FanoutSink(fanout.clone());
        let before = anchor_now();
        let mut rx = fanout.subscribe(Vec::new(), Vec::new(), false);
        sink.batch(&batch(5)).unwrap();
        sink.batch(&batch(6)).unwrap();
        let after = anchor_now();
        let first = rx.try_recv().unwrap().unwrap();
        let a = first.anchor.expect("the first batch carries an anchor");
        // Read between `before` and `after` on both clocks.
        assert!(before.trace_ns <= a.trace_ns && a.trace_ns <= after.trace_ns);
        assert!(before.unix_ns <= a.unix_ns && a.unix_ns <= after.unix_ns);
        let second = rx.try_recv().unwrap().unwrap();
        assert_eq!(second.anchor, None, "an anchor holds until the next one");
        // A later subscriber gets its own.
        let mut late = fanout.subscribe(Vec::new(), Vec::new(), false);
        sink.batch(&batch(7)).unwrap();
        assert!(late.try_recv().unwrap().unwrap().anchor.is_some());
        assert_eq!(rx.try_recv().unwrap().unwrap().anchor, None);
    }

    #[test]
    fn a_dropped_batch_is_followed_by_a_fresh_anchor() {
        let fanout = Fanout::default();
        let mut sink = FanoutSink(fanout.clone());
        let mut rx = fanout.subscribe(Vec::new(), Vec::new(), false);
        // Fill the queue, so that the batches past it are dropped and counted.
        for i in 0..=DEFAULT_SUBSCRIBER_QUEUE as u64 {
            sink.batch(&batch(i)).unwrap();
        }
        let mut anchors = 0;
        while let Some(b) = rx.try_recv() {
            anchors += usize::from(b.unwrap().anchor.is_some());
        }
        assert_eq!(anchors, 1);
        sink.batch(&batch(1000)).unwrap();
        let next = rx.try_recv().unwrap().unwrap();
        assert_eq!(next.lost, 1);
        assert!(
            next.anchor.is_some(),
            "after a drop the stream is anchored again"
        );
    }

    #[test]
    fn a_subscriber_that_comes_after_the_rank_record_gets_it_first() {
        use crate::Sensor;
        use gyr_core::Value;
        let rank = Schema::new(3, "gyr.msg.rank", crate::msg::MsgRank::fields()).unwrap();
        let fanout = Fanout::default();
        let mut sink = FanoutSink(fanout.clone());
        let mut b = Batch {
            schemas: vec![rank.clone()],
            ..Batch::default()
        };
        let payload = gyr_core::value::encode(
            &rank,
            &[Value::Str("job-7".into()), Value::UInt(2), Value::UInt(4)],
        )
        .unwrap();
        gyr_core::record::push_record(&mut b.bytes, 1, 4, 0, 0, &[]);
        gyr_core::record::push_record(&mut b.bytes, 3, 5, 1, 0, &payload);
        b.blocks = vec![(9, 0..b.bytes.len())];
        b.records = 2;
        sink.batch(&b).unwrap();
        sink.batch(&batch(6)).unwrap();
        // Long after: a hub attaches, and another asks for other types only.
        let mut late = fanout.subscribe(Vec::new(), Vec::new(), true);
        let mut other = fanout.subscribe(vec!["step".into()], Vec::new(), false);
        sink.batch(&batch(7)).unwrap();
        let first = late.try_recv().unwrap().unwrap();
        let e = &first.events[0];
        assert_eq!(
            (e.thread, e.r#type.as_str(), e.timestamp, e.seq),
            (9, "gyr.msg.rank", 5, 1)
        );
        assert_eq!(e.fields[1].value, Some(Value::UInt(2).into()));
        assert!(other.try_recv().is_none(), "not a type it asked for");
        // Once only.
        sink.batch(&batch(8)).unwrap();
        let next = late.try_recv().unwrap().unwrap();
        assert!(next.events.iter().all(|e| e.r#type != "gyr.msg.rank"));
    }

    #[test]
    fn a_subscriber_may_take_its_records_decoded() {
        use gyr_core::{Field, FieldType, Value};
        let step = Schema::new(1, "step", vec![Field::new("n", FieldType::U64)]).unwrap();
        let fanout = Fanout::default();
        let mut sink = FanoutSink(fanout.clone());
        let mut plain = fanout.subscribe(Vec::new(), Vec::new(), false);
        let mut decoded = fanout.subscribe(Vec::new(), Vec::new(), true);
        let mut b = Batch {
            schemas: vec![step.clone()],
            ..Batch::default()
        };
        let payload = gyr_core::value::encode(&step, &[Value::UInt(42)]).unwrap();
        gyr_core::record::push_record(&mut b.bytes, 1, 9, 3, 0, &payload);
        // A record of a type never described is counted, not sent.
        gyr_core::record::push_record(&mut b.bytes, 7, 10, 4, 0, &[]);
        b.blocks = vec![(5, 0..b.bytes.len())];
        b.records = 2;
        sink.batch(&b).unwrap();
        let p = plain.try_recv().unwrap().unwrap();
        assert_eq!((p.blocks.len(), p.events.len()), (1, 0));
        let d = decoded.try_recv().unwrap().unwrap();
        assert!(d.blocks.is_empty());
        assert_eq!(d.undecodable, 1);
        assert_eq!(d.schemas.len(), 1, "the schemas still come");
        let e = &d.events[0];
        assert_eq!(
            (e.thread, e.r#type.as_str(), e.timestamp, e.seq),
            (5, "step", 9, 3)
        );
        assert_eq!(e.fields[0].name, "n");
        assert_eq!(e.fields[0].value, Some(Value::UInt(42).into()));
    }
}
