//! Spans: scoped sensors that record when a piece of code begins and ends, so that a duration
//! is a pair of events in the trace rather than a field computed by hand.
//!
//! ```
//! fn solve() {
//!     let _span = gyr::span!("solve");
//!     // ... work ...
//! } // `gyr.span.end` is recorded here, also when unwinding
//! ```
//!
//! `#[gyr::instrument]` on a function does the same with the function's name. Spans nest: a
//! view pairs each end with the latest open begin of the same name on the thread. Both events
//! are ordinary sensors (`gyr.span.begin`, `gyr.span.end`); switched off, a span costs two
//! loads and two branches.

use crate::emit;
use crate::sync::events::{SpanBegin, SpanEnd};

/// An open span; records its end when dropped. Made by [`span!`](crate::span!).
#[derive(Debug)]
#[must_use = "a span ends when this guard is dropped: bind it with `let _span = ...`"]
pub struct Span {
    name: &'static str,
}

impl Span {
    /// Records the beginning of the span `name`.
    #[inline]
    pub fn enter(name: &'static str) -> Span {
        emit!(SpanBegin { name });
        Span { name }
    }

    /// The span's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl Drop for Span {
    #[inline]
    fn drop(&mut self) {
        emit!(SpanEnd { name: self.name });
    }
}

/// Opens a span named by a string literal until the end of the enclosing scope:
/// `let _span = gyr::span!("solve");`.
#[macro_export]
macro_rules! span {
    ($name:literal) => {
        $crate::span::Span::enter($name)
    };
}
