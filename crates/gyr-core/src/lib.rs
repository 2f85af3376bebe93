#![doc = include_str!("../README.md")]
//!
//! This crate provides:
//! - [`schema`]: [`Schema`], [`Field`] and [`FieldType`], the self-describing event types;
//! - [`value`]: [`Value`], a decoded field, and the payload encoding;
//! - [`record`]: the fixed record layout of per-thread rings, batches and the wire;
//! - [`trace`]: the chunked, crash-safe trace file, which stores records compactly:
//!   [`TraceWriter`] and [`TraceReader`];
//! - [`spec`]: the TOML sensor specification format.
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

mod chunk_scan;
mod compact;
pub mod record;
pub mod schema;
pub mod spec;
pub mod trace;
pub mod value;

pub use record::{RECORD_HEADER_LEN, RecordHeader, RecordRef};
pub use schema::{Field, FieldType, Schema, SchemaError, TypeId};
pub use trace::{ThreadInfo, TraceEnd, TraceHeader, TraceReader, TraceWriter};
pub use value::{ShortFloat, Value};

/// The name of the built-in event type that reports lost events.
pub const LOST_EVENT_NAME: &str = "gyr.lost";

/// The schema of `gyr.lost`: `count` events of `thread`, with per-thread sequence numbers
/// `from..=to`, were dropped because the thread's ring was full (Drop policy).
pub fn lost_schema(id: TypeId) -> Schema {
    Schema::new(
        id,
        LOST_EVENT_NAME,
        vec![
            Field::new("thread", FieldType::U64),
            Field::new("count", FieldType::U64),
            Field::new("from", FieldType::U64),
            Field::new("to", FieldType::U64),
        ],
    )
    .expect("the built-in gyr.lost schema is valid")
}
