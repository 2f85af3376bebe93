#![doc = include_str!("../README.md")]
#![warn(missing_debug_implementations, rust_2018_idioms)]

mod script;

pub use script::{
    DEFAULT_MAX_MEMORY, DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS, FUNCTIONS, ScriptError, run_source,
    to_dynamic, to_wire,
};
