#![doc = include_str!("../README.md")]
//!
//! Modules, and the features they need:
//! - [`action`] (always): the one text of a steering action, as every log prints it;
//! - [`token`] (always): what makes a token acceptable, and comparing one in constant time;
//! - [`access`] (feature `access`): the checks both servers make of every call (bearer and
//!   read tokens, the protocol version) and the refusals clients see;
//! - [`discovery`] (feature `discovery`): the per-user announcement directory, verified before
//!   anything in it is trusted, and the announcement format;
//! - [`connect`], [`session`], [`events`], [`command`] (feature `connect`, on by default):
//!   channels over a Unix socket or TCP, [`Target`], [`Client`], the blocking [`Session`], the
//!   decoder of the live event stream, and the one command grammar of steering clients.
//!
//! A program built without its server links only the first two (through `gyr`).
#![warn(missing_debug_implementations, rust_2018_idioms, missing_docs)]

#[cfg(feature = "access")]
pub mod access;
pub mod action;
#[cfg(feature = "connect")]
pub mod command;
#[cfg(feature = "connect")]
pub mod connect;
#[cfg(feature = "discovery")]
pub mod discovery;
#[cfg(feature = "connect")]
pub mod events;
#[cfg(feature = "connect")]
pub mod session;
pub mod token;

pub use action::describe;
#[cfg(feature = "connect")]
pub use session::{Client, ClientError, Session, Target};

/// The request header a client names itself with, for the steering log ("who").
pub const CLIENT_HEADER: &str = "x-gyr-client";
