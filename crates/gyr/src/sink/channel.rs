//! [`ChannelSink`]: the stream's batches over a bounded channel to another thread, never
//! waiting for it.

use super::Sink;
use crate::batch::Batch;
use gyr_core::TraceEnd;
use std::io;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

/// Sends every batch over a bounded channel. It never waits for the receiver: when the channel
/// is full, the batch's records are dropped and counted, and the next batch that goes through
/// says how many ([`Batch::lost`]); event types and thread descriptions are never dropped (they
/// come with the next batch). The channel closes when the runtime has shut down.
#[derive(Debug)]
pub struct ChannelSink {
    tx: Option<SyncSender<Batch>>,
    /// What a dropped batch described, and the records dropped since the last batch sent.
    pending: Batch,
}

impl ChannelSink {
    /// A sink and the receiver of its batches; `capacity` is in batches (one per monitor pass, of at most about 256 KiB).
    pub fn new(capacity: usize) -> (Self, Receiver<Batch>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity.max(1));
        (
            ChannelSink {
                tx: Some(tx),
                pending: Batch::default(),
            },
            rx,
        )
    }

    fn send(&mut self, mut b: Batch) {
        let Some(tx) = &self.tx else { return };
        if !self.pending.schemas.is_empty() || !self.pending.threads.is_empty() {
            let mut schemas = std::mem::take(&mut self.pending.schemas);
            schemas.append(&mut b.schemas);
            b.schemas = schemas;
            let mut threads = std::mem::take(&mut self.pending.threads);
            threads.append(&mut b.threads);
            b.threads = threads;
        }
        b.lost += std::mem::take(&mut self.pending.lost);
        match tx.try_send(b) {
            Ok(()) => {}
            Err(TrySendError::Full(b)) => {
                self.pending.lost = b.lost + b.records;
                self.pending.schemas = b.schemas;
                self.pending.threads = b.threads;
            }
            Err(TrySendError::Disconnected(_)) => self.tx = None,
        }
    }
}

impl Sink for ChannelSink {
    fn name(&self) -> &str {
        "channel"
    }
    fn batch(&mut self, batch: &Batch) -> io::Result<()> {
        self.send(batch.clone());
        Ok(())
    }
    /// What is still owed to the receiver goes in a last batch; then the channel closes.
    fn close(&mut self, _end: &TraceEnd) -> io::Result<()> {
        let p = &self.pending;
        if p.lost > 0 || !p.schemas.is_empty() || !p.threads.is_empty() {
            self.send(Batch::default());
        }
        self.tx = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::{Field, FieldType, Schema, ThreadInfo};

    /// A batch describing type `id` and thread `id`, with `n` records of it.
    fn batch(id: u32, n: u64) -> Batch {
        let mut b = Batch {
            schemas: vec![
                Schema::new(id, format!("t{id}"), vec![Field::new("v", FieldType::U8)]).unwrap(),
            ],
            threads: vec![ThreadInfo {
                id: u64::from(id),
                name: format!("th{id}"),
                os_tid: 0,
            }],
            ..Batch::default()
        };
        for seq in 1..=n {
            gyr_core::record::push_record(&mut b.bytes, id, seq, seq, 0, &[1]);
        }
        b.blocks.push((u64::from(id), 0..b.bytes.len()));
        b.records = n;
        b
    }

    #[test]
    fn a_full_channel_drops_records_counted_and_keeps_what_describes_them() {
        let (mut sink, rx) = ChannelSink::new(1);
        sink.batch(&batch(1, 2)).unwrap();
        sink.batch(&batch(2, 3)).unwrap();
        sink.batch(&batch(3, 4)).unwrap();
        let first = rx.try_recv().unwrap();
        assert_eq!((first.len(), first.lost()), (2, 0));
        assert!(rx.try_recv().is_err(), "two batches were dropped");
        sink.batch(&batch(4, 1)).unwrap();
        let next = rx.try_recv().unwrap();
        assert_eq!(next.lost(), 7, "the dropped batches' records are counted");
        let names: Vec<_> = next.schemas().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["t2", "t3", "t4"]);
        assert_eq!(next.threads().len(), 3);
        assert_eq!(next.records().count(), 1);
    }

    #[test]
    fn what_is_owed_at_the_end_goes_in_a_last_batch_then_the_channel_closes() {
        let (mut sink, rx) = ChannelSink::new(1);
        sink.batch(&batch(1, 1)).unwrap();
        sink.batch(&batch(2, 5)).unwrap();
        assert_eq!(rx.try_recv().unwrap().len(), 1);
        sink.close(&TraceEnd::default()).unwrap();
        let last = rx.try_recv().unwrap();
        assert_eq!((last.len(), last.lost(), last.schemas().len()), (0, 5, 1));
        drop(sink);
        assert!(rx.recv().is_err(), "the channel is closed");
    }
}
