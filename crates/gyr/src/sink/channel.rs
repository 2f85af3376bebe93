//! [`ChannelSink`]: the stream over a bounded channel to another thread, never waiting for it.

use super::Sink;
use gyr_core::record::Records;
use gyr_core::{Schema, ThreadInfo, TraceEnd};
use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

/// One item of a stream, owned, as a [`ChannelSink`]'s receiver gets it.
#[derive(Debug, Clone)]
pub enum StreamMessage {
    /// A new event type.
    Schema(Schema),
    /// A thread's description.
    Thread(ThreadInfo),
    /// Records of one thread.
    Records {
        /// The thread's gyr id.
        thread: u64,
        /// The records ([`gyr_core::record::Records`] iterates them).
        bytes: Vec<u8>,
    },
    /// Records were dropped because the receiver fell behind.
    Lost {
        /// How many.
        records: u64,
    },
    /// The runtime shut down.
    End(TraceEnd),
}

/// Sends the stream over a bounded channel. It never waits for the receiver: when the channel
/// is full, records are dropped and counted, and a [`StreamMessage::Lost`] says how many once
/// there is room. Schemas and thread descriptions are never dropped.
#[derive(Debug)]
pub struct ChannelSink {
    tx: SyncSender<StreamMessage>,
    backlog: VecDeque<StreamMessage>,
    lost: u64,
}

impl ChannelSink {
    /// A sink and the receiver of its messages; `capacity` is in messages (one per batch).
    pub fn new(capacity: usize) -> (Self, Receiver<StreamMessage>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity.max(1));
        (
            ChannelSink {
                tx,
                backlog: VecDeque::new(),
                lost: 0,
            },
            rx,
        )
    }

    /// Sends what waits; returns false if the channel is still full.
    fn drain_backlog(&mut self) -> bool {
        if self.lost > 0 {
            self.backlog.push_back(StreamMessage::Lost {
                records: std::mem::take(&mut self.lost),
            });
        }
        while let Some(m) = self.backlog.pop_front() {
            match self.tx.try_send(m) {
                Ok(()) => {}
                Err(TrySendError::Full(m)) => {
                    if let StreamMessage::Lost { records } = m {
                        self.lost += records;
                    } else {
                        self.backlog.push_front(m);
                    }
                    return false;
                }
                Err(TrySendError::Disconnected(_)) => {
                    self.backlog.clear();
                    return false;
                }
            }
        }
        true
    }
}

impl Sink for ChannelSink {
    fn name(&self) -> &str {
        "channel"
    }
    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        self.backlog
            .push_back(StreamMessage::Schema(schema.clone()));
        self.drain_backlog();
        Ok(())
    }
    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        self.backlog.push_back(StreamMessage::Thread(info.clone()));
        self.drain_backlog();
        Ok(())
    }
    fn records(&mut self, thread: u64, bytes: &[u8]) -> io::Result<()> {
        let n = Records::new(thread, bytes).count() as u64;
        if !self.drain_backlog() {
            self.lost += n;
            return Ok(());
        }
        match self.tx.try_send(StreamMessage::Records {
            thread,
            bytes: bytes.to_vec(),
        }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.lost += n,
            Err(TrySendError::Disconnected(_)) => {}
        }
        Ok(())
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        self.drain_backlog();
        let _ = self.tx.try_send(StreamMessage::End(end.clone()));
        Ok(())
    }
}
