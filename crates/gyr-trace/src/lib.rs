#![doc = include_str!("../README.md")]
#![warn(missing_debug_implementations, rust_2018_idioms)]

pub mod order;
pub mod sync_events;

pub use order::{Event, Need, OrderFilter, OrderStats, Stall, SyncEvent};
pub use sync_events::SyncDecoder;
