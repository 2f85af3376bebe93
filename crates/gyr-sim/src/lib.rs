#![doc = include_str!("../README.md")]
//!
//! - [`model`]: the LogGOPS parameters and the network of nodes;
//! - [`calibrate`]: the parameters fitted to ping-pong and streaming measurements;
//! - [`program`]: what one rank does, as the replay sees it;
//! - [`collective`]: collectives expanded into the messages of their algorithms;
//! - [`engine`]: the discrete-event replay, one logical process per rank;
//! - [`trace`]: traced MPI runs (`gyr run --mpi`) turned into rank programs;
//! - [`output`]: predicted timelines written as gyr traces;
//! - [`mpi`]: Open MPI jobs run for calibration and validation.

pub mod calibrate;
pub mod collective;
pub mod engine;
pub mod model;
pub mod mpi;
pub mod output;
pub mod program;
pub mod trace;

pub use collective::{Collective, CollectiveError, Part};
pub use engine::{CallSpan, Prediction, RankPrediction, SimError, Unfinished, simulate};
pub use model::{LogGops, Network, SizePoint};
pub use program::{Channel, Op, RankProgram, ReqId};
pub use trace::{LoadError, Loaded, Measured, RankTrace, load};
