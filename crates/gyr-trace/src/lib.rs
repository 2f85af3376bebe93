#![doc = include_str!("../README.md")]
#![warn(missing_debug_implementations, rust_2018_idioms)]

pub mod order;
pub mod sync_events;
pub mod timeline;

pub use order::{Event, Need, OrderFilter, OrderStats, Stall, SyncEvent};
pub use sync_events::{SyncDecoder, ViewEvent, WaitOn};
pub use timeline::{Arrow, ArrowKind, Run, Segment, State, Tile, Timeline};
