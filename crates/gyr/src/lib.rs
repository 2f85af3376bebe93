#![doc = include_str!("../README.md")]
//!
//! ```
//! use gyr::Sensor;
//!
//! #[derive(Sensor)]
//! struct WorkLoad { domain: u32, load: f64 }
//!
//! let mem = gyr::MemorySink::new();
//! let rt = gyr::Builder::new().sink(mem.clone()).start().unwrap();
//! WorkLoad { domain: 3, load: 0.75 }.emit();
//! rt.shutdown();
//! assert_eq!(mem.events("work_load").len(), 1);
//! ```
//!
//! This crate provides:
//! - [`Sensor`] and `#[derive(Sensor)]`: tracing sensors ([`sensor`]);
//! - [`sample()`] and [`sample_cell`]: sampling sensors ([`sample`](mod@sample));
//! - [`extended`]: extended sensors that filter or aggregate before emitting;
//! - [`SensorInstance`]: one individually controlled call site;
//! - [`control`]: switching sensors on and off and limiting their rate at run time;
//! - [`Builder`], [`Runtime`], [`init`]: the runtime and its local monitors;
//! - [`Sink`], [`FileSink`], [`MemorySink`], [`ChannelSink`], [`CallbackSink`]: outputs;
//! - [`DynamicSensor`], [`load_spec`]: event types defined at run time or in a spec file;
//! - [`steer`]: steering objects, parameters, probes, actuators, synch points, functions and the
//!   steering log;
//! - [`thread`] and [`sync`]: `std::thread` and `std::sync` wrappers that record Falcon's thread
//!   events (fork, join, locks, conditions, barriers); [`span!`]: scoped sensors.
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

mod batch;
mod clock;
mod config;
pub mod control;
mod diag;
mod dynamic;
mod exit;
pub mod extended;
mod monitor;
pub mod msg;
mod primitives;
mod producer;
mod registry;
mod ring;
mod runtime;
pub mod sample;
pub mod sensor;
#[cfg(feature = "server")]
pub mod server;
mod sink;
pub mod span;
mod state;
pub mod steer;
pub mod sync;
pub mod thread;

pub use batch::Batch;
pub use clock::{Stamp, now_ns};
pub use dynamic::{DynamicSensor, LoadSpecError, load_spec};
pub use exit::DEFAULT_EXIT_DEADLINE;
pub use registry::{LOST_TYPE_ID, RegisterError, SensorType, schema_by_name, schemas};
pub use runtime::{
    Builder, DEFAULT_FLUSH_INTERVAL, DEFAULT_MAX_LAG, DEFAULT_MAX_MONITORS, DEFAULT_MONITORS,
    DEFAULT_POLL_INTERVAL, DEFAULT_RING_CAPACITY, DEFAULT_SAMPLE_INTERVAL, Error, Policy, Runtime,
    Summary, after_fork_in_child, flush, init, shutdown,
};
pub use sample::{SampleCell, SamplingSensor, sample, sample_cell};
pub use sensor::{Sensor, SensorField, SensorInstance, emit, emit_at, emit_pair_at};
pub use sink::{CallbackSink, ChannelSink, FileSink, MemorySink, OwnedRecord, Sink};

pub use gyr_core;

/// `#[derive(Steerable)]`: makes a struct's fields steering attributes. Field attributes:
/// `#[steer(unit = "s", min = 0.0, max = 1.0, read_only, description = "...",
/// validate = path::to::fn, nested, skip)]`.
#[cfg(feature = "derive")]
pub use gyr_macros::Steerable;

/// `#[derive(Sensor)]`: makes a struct an event type. Field types: integers, floats, `bool`,
/// `String`/`&str`, `Vec<u8>`/`&[u8]`, and arrays of numbers. `#[sensor(name = "...")]` on
/// the struct renames the event type (default: the struct's name in snake case).
#[cfg(feature = "derive")]
pub use gyr_macros::Sensor;

/// `#[gyr::instrument]`: makes a function a span (see [`span`](mod@span)); `name = "..."`
/// renames it.
#[cfg(feature = "derive")]
pub use gyr_macros::instrument;

#[doc(hidden)]
pub mod __private {
    pub use crate::diag::diag;
    pub use crate::registry::{STATE_OFF, SensorType};
    pub use crate::sensor::emit_in_state;
    pub use gyr_core::{Field, FieldType};
}

/// The README's examples, compiled and run as doc tests so they cannot drift.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
