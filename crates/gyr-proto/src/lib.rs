#![doc = include_str!("../README.md")]
//!
//! This crate provides:
//! - [`v1`]: the messages, the `gyr_client::GyrClient` and `gyr_server::GyrServer`;
//! - [`PROTOCOL_VERSION`];
//! - [`stream`]: the event stream's schemas and threads, converted to and from gyr-core's;
//! - [`listen`]: accepting TCP connections within limits (how many, how long unauthenticated);
//! - [`batch_queue`]: queues of event batches bounded in batches and in bytes;
//! - [`FILE_DESCRIPTOR_SET`]: the `.proto` files compiled, for reflection and tools;
//! - `standard` (feature `standard-services`): gRPC server reflection and `grpc.health.v1`,
//!   which every gyr server adds beside `gyr.v1.Gyr`;
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
#[cfg(feature = "standard-services")]
pub mod standard;
pub mod stream;
pub use convert::Incoming;
/// The shared byte buffer record blocks travel in.
pub use prost::bytes::Bytes;

/// The request header that names the program a call is about, on a hub (which serves many).
pub const PROCESS_HEADER: &str = "x-gyr-process";

/// The `.proto` files of `gyr.v1` compiled into an encoded `google.protobuf.FileDescriptorSet`
/// (imports and comments included): what server reflection serves, and what
/// `gyr api descriptor-set` writes for tools that take a descriptor file.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/gyr_v1.binpb"));

/// The full name of the one gyr service, as reflection and health name it.
pub const SERVICE_NAME: &str = "gyr.v1.Gyr";

/// The protocol version this crate speaks; bumped on incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;

/// Checks the protocol version a peer announced. `server` and `peer` name the two sides in
/// the refusal ("this hub", "the program"). An unset version (0) is refused: a client written
/// against the `.proto` files must say which protocol it speaks.
pub fn check_version(version: u32, server: &str, peer: &str) -> Result<(), tonic::Status> {
    if version == PROTOCOL_VERSION {
        Ok(())
    } else if version == 0 {
        Err(tonic::Status::failed_precondition(format!(
            "{peer} sent no protocol_version: set protocol_version = {PROTOCOL_VERSION} \
             (gyr.v1) in its request"
        )))
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

/// OpenTelemetry's OTLP messages and the collector's trace and logs services (feature `otlp`),
/// generated from the `.proto` files vendored in `proto/opentelemetry` (Apache-2.0), for
/// `gyr trace export --format otlp`.
#[cfg(feature = "otlp")]
#[allow(
    missing_docs,
    clippy::all,
    unreachable_pub,
    missing_debug_implementations,
    rustdoc::all
)]
pub mod otlp {
    //! Modules follow the packages (`opentelemetry.proto.trace.v1` is `otlp::trace::v1`), as
    //! the generated code's paths between packages expect.
    pub mod common {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.common.v1");
        }
    }
    pub mod resource {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.resource.v1");
        }
    }
    pub mod trace {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.trace.v1");
        }
    }
    pub mod logs {
        pub mod v1 {
            tonic::include_proto!("opentelemetry.proto.logs.v1");
        }
    }
    pub mod collector {
        pub mod trace {
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.trace.v1");
            }
        }
        pub mod logs {
            pub mod v1 {
                tonic::include_proto!("opentelemetry.proto.collector.logs.v1");
            }
        }
    }
}
