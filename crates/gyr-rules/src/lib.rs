#![doc = include_str!("../README.md")]
#![warn(missing_debug_implementations, rust_2018_idioms)]

pub mod limits;
pub mod rules;
#[cfg(feature = "script")]
mod script;

pub use rules::{
    Action, Engine, EventRef, Fact, Firing, LastFiring, RuleInfo, RuleSet, RuleState, RulesError,
    Severity,
};
#[cfg(feature = "script")]
pub use script::{
    DEFAULT_MAX_MEMORY, DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS, FUNCTIONS, ScriptError, run_source,
    to_dynamic, to_wire,
};
