//! [`CallbackSink`]: a closure called on a monitor thread with each batch of the stream.

use super::Sink;
use crate::batch::Batch;
use std::io;

/// Calls a closure with every batch; the closure runs on a monitor thread, so keep it short.
pub struct CallbackSink<F> {
    f: F,
}

impl<F> std::fmt::Debug for CallbackSink<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallbackSink")
    }
}

impl<F: FnMut(&Batch) + Send + 'static> CallbackSink<F> {
    /// A sink calling `f`.
    pub fn new(f: F) -> Self {
        CallbackSink { f }
    }
}

impl<F: FnMut(&Batch) + Send + 'static> Sink for CallbackSink<F> {
    fn name(&self) -> &str {
        "callback"
    }
    fn batch(&mut self, batch: &Batch) -> io::Result<()> {
        (self.f)(batch);
        Ok(())
    }
}
