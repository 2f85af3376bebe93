//! The queue between a live event stream's producer (a program's fan-out, the hub's output
//! ports) and one client: bounded in batches and in bytes. A batch may hold one record or
//! megabytes of them, so a bound in batches alone would let a slow client's queue hold
//! gigabytes; the byte bound keeps what a stalled client costs known in advance.

use crate::v1;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// What a live stream carries: batches, or the error that ends it.
pub type Item = Result<v1::EventBatch, tonic::Status>;

/// Why a batch was not queued; the batch comes back to be counted.
#[derive(Debug)]
pub enum Refused {
    /// The queue holds as many batches or bytes as it may.
    Full(Box<v1::EventBatch>),
    /// The client is gone.
    Closed(Box<v1::EventBatch>),
}

/// What a batch weighs in a queue: its records (decoded ones at twice their encoded size, for
/// the strings and vectors they are made of), and a little for the rest.
pub fn weight(b: &v1::EventBatch) -> usize {
    64 + b.blocks.iter().map(|k| 32 + k.records.len()).sum::<usize>()
        + b.events
            .iter()
            .map(|e| 64 + 2 * prost::Message::encoded_len(e))
            .sum::<usize>()
        + b.schemas.len() * 128
        + b.threads.len() * 64
}

/// The producer's end.
#[derive(Debug)]
pub struct BatchSender {
    tx: mpsc::Sender<Item>,
    queued: Arc<AtomicUsize>,
    max_bytes: usize,
}

/// The client's end: a stream of [`Item`]s.
#[derive(Debug)]
pub struct BatchReceiver {
    rx: mpsc::Receiver<Item>,
    queued: Arc<AtomicUsize>,
}

/// A queue of at most `max_batches` batches and `max_bytes` bytes (by [`weight`]). A batch
/// heavier than `max_bytes` still goes into an empty queue, so that no batch is too big ever
/// to be sent.
pub fn batch_queue(max_batches: usize, max_bytes: usize) -> (BatchSender, BatchReceiver) {
    let (tx, rx) = mpsc::channel(max_batches.max(1));
    let queued = Arc::new(AtomicUsize::new(0));
    (
        BatchSender {
            tx,
            queued: queued.clone(),
            max_bytes,
        },
        BatchReceiver { rx, queued },
    )
}

impl BatchSender {
    /// Queues `batch` if there is room; never waits.
    pub fn try_send(&self, batch: v1::EventBatch) -> Result<(), Refused> {
        if self.tx.is_closed() {
            return Err(Refused::Closed(Box::new(batch)));
        }
        let w = weight(&batch);
        // Only the one producer adds, so the room seen here cannot be taken meanwhile.
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && queued + w > self.max_bytes {
            return Err(Refused::Full(Box::new(batch)));
        }
        self.queued.fetch_add(w, Ordering::AcqRel);
        self.tx.try_send(Ok(batch)).map_err(|e| {
            self.queued.fetch_sub(w, Ordering::AcqRel);
            match e {
                mpsc::error::TrySendError::Full(Ok(b)) => Refused::Full(Box::new(b)),
                mpsc::error::TrySendError::Closed(Ok(b)) => Refused::Closed(Box::new(b)),
                // Only `Ok` items are sent above.
                mpsc::error::TrySendError::Full(Err(_))
                | mpsc::error::TrySendError::Closed(Err(_)) => Refused::Closed(Box::default()),
            }
        })
    }

    /// Whether the client is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Bytes queued now (by [`weight`]).
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }
}

impl BatchReceiver {
    fn taken(&self, item: &Item) {
        if let Ok(b) = item {
            self.queued.fetch_sub(weight(b), Ordering::AcqRel);
        }
    }

    /// The next item, if one is queued now.
    pub fn try_recv(&mut self) -> Option<Item> {
        let item = self.rx.try_recv().ok()?;
        self.taken(&item);
        Some(item)
    }

    /// Refuses further batches; those queued can still be taken.
    pub fn close(&mut self) {
        self.rx.close();
    }
}

impl tokio_stream::Stream for BatchReceiver {
    type Item = Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(item)) = &polled {
            self.taken(item);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(bytes: usize) -> v1::EventBatch {
        v1::EventBatch {
            blocks: vec![v1::RecordBlock {
                thread: 1,
                records: vec![0u8; bytes].into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_and_frees_what_the_client_takes() {
        let (tx, mut rx) = batch_queue(1000, 10_000);
        let w = weight(&batch(4000));
        tx.try_send(batch(4000)).unwrap();
        tx.try_send(batch(4000)).unwrap();
        assert!(matches!(tx.try_send(batch(4000)), Err(Refused::Full(_))));
        assert_eq!(tx.queued_bytes(), 2 * w);
        assert!(rx.try_recv().is_some());
        assert_eq!(tx.queued_bytes(), w);
        tx.try_send(batch(4000)).unwrap();
        rx.close();
        assert!(matches!(tx.try_send(batch(1)), Err(Refused::Closed(_))));
        assert!(rx.try_recv().is_some() && rx.try_recv().is_some());
        assert_eq!(tx.queued_bytes(), 0);
    }

    #[test]
    fn a_batch_heavier_than_the_bound_goes_into_an_empty_queue() {
        let (tx, mut rx) = batch_queue(10, 100);
        tx.try_send(batch(1 << 20)).unwrap();
        assert!(matches!(tx.try_send(batch(1)), Err(Refused::Full(_))));
        rx.try_recv().unwrap().unwrap();
        tx.try_send(batch(1)).unwrap();
    }

    #[test]
    fn the_queue_is_bounded_in_batches_too() {
        let (tx, _rx) = batch_queue(2, usize::MAX);
        tx.try_send(batch(1)).unwrap();
        tx.try_send(batch(1)).unwrap();
        assert!(matches!(tx.try_send(batch(1)), Err(Refused::Full(_))));
        assert_eq!(tx.queued_bytes(), 2 * weight(&batch(1)));
    }
}
