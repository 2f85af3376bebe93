#![doc = include_str!("../README.md")]
//!
//! This crate provides:
//! - [`v1`]: the messages, the `gyr_client::GyrClient` and `gyr_server::GyrServer`;
//! - [`PROTOCOL_VERSION`];
//! - [`stream`]: the event stream's schemas and threads, converted to and from gyr-core's;
//! - [`listen`]: accepting TCP connections within limits (how many, how long unauthenticated);
//! - [`batch_queue`]: queues of event batches bounded in batches and in bytes;
//! - conversions between wire values and `gyr_core::Value` ([`Incoming`] for values that may
//!   arrive as text typed by a user).
//!
//! Rules for changing it: field numbers are never reused, enums only grow, every message and
//! field has a comment.
#![warn(missing_debug_implementations, rust_2018_idioms)]

pub mod batch_queue;
mod convert;
pub mod listen;
pub mod short_errors;
pub mod stream;
pub use convert::Incoming;
/// The shared byte buffer record blocks travel in.
pub use prost::bytes::Bytes;

/// The request header that names the program a call is about, on a hub (which serves many).
pub const PROCESS_HEADER: &str = "x-gyr-process";

/// The protocol version this crate speaks; bumped on incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;

/// Checks the protocol version a peer announced (0: not said, taken as this one). `server`
/// and `peer` name the two sides in the refusal ("this hub", "the program").
pub fn check_version(version: u32, server: &str, peer: &str) -> Result<(), tonic::Status> {
    if version == 0 || version == PROTOCOL_VERSION {
        Ok(())
    } else {
        Err(tonic::Status::failed_precondition(format!(
            "{server} speaks gyr protocol {PROTOCOL_VERSION}, {peer} {version}: use a matching gyr"
        )))
    }
}

/// The `gyr.v1` package.
#[allow(
    missing_docs,
    clippy::all,
    unreachable_pub,
    missing_debug_implementations
)]
pub mod v1 {
    tonic::include_proto!("gyr.v1");
}
