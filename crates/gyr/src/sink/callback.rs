//! [`CallbackSink`]: a closure called on a monitor thread with each item of the stream.

use super::Sink;
use gyr_core::{Schema, ThreadInfo, TraceEnd};
use std::io;

/// One item of a stream, borrowed, as a [`CallbackSink`] sees it.
#[derive(Debug, Clone, Copy)]
pub enum StreamItem<'a> {
    /// A new event type.
    Schema(&'a Schema),
    /// A thread's description.
    Thread(&'a ThreadInfo),
    /// Records of one thread.
    Records {
        /// The thread's gyr id.
        thread: u64,
        /// The records ([`gyr_core::record::Records`] iterates them).
        bytes: &'a [u8],
    },
    /// The runtime shut down.
    End(&'a TraceEnd),
}

/// Calls a closure with every item; the closure runs on a monitor thread, so keep it short.
pub struct CallbackSink<F> {
    f: F,
}

impl<F> std::fmt::Debug for CallbackSink<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallbackSink")
    }
}

impl<F: FnMut(StreamItem<'_>) + Send + 'static> CallbackSink<F> {
    /// A sink calling `f`.
    pub fn new(f: F) -> Self {
        CallbackSink { f }
    }
}

impl<F: FnMut(StreamItem<'_>) + Send + 'static> Sink for CallbackSink<F> {
    fn name(&self) -> &str {
        "callback"
    }
    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        (self.f)(StreamItem::Schema(schema));
        Ok(())
    }
    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        (self.f)(StreamItem::Thread(info));
        Ok(())
    }
    fn records(&mut self, thread: u64, bytes: &[u8]) -> io::Result<()> {
        (self.f)(StreamItem::Records { thread, bytes });
        Ok(())
    }
    fn close(&mut self, end: &TraceEnd) -> io::Result<()> {
        (self.f)(StreamItem::End(end));
        Ok(())
    }
}
