#![doc = include_str!("../README.md")]
//!
//! - [`model`]: the LogGOPS parameters and the network of nodes;
//! - [`program`]: what one rank does, as the replay sees it;
//! - [`collective`]: collectives expanded into the messages of their algorithms;
//! - [`engine`]: the discrete-event replay, one logical process per rank.

pub mod collective;
pub mod engine;
pub mod model;
pub mod program;

pub use collective::{Collective, CollectiveError, Part};
pub use engine::{CallSpan, Prediction, RankPrediction, SimError, Unfinished, simulate};
pub use model::{LogGops, Network};
pub use program::{Channel, Op, RankProgram, ReqId};
