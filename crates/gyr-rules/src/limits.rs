//! The one rhai engine configuration of gyr: steering scripts and expert-system rules are
//! built by [`limited_engine`], so that a value, a variable count or a nesting depth allowed
//! in one is allowed in the other, and both refuse modules.
//!
//! A script or a rule is the user's, but it must not take its host down: a string doubled in
//! a loop would ask for gigabytes, and endless recursion would overflow the stack. The engine
//! bounds the size of every value ([`DEFAULT_MAX_STRING_SIZE`], [`DEFAULT_MAX_ARRAY_SIZE`],
//! [`DEFAULT_MAX_MAP_SIZE`], counting everything nested in it), how many variables live at
//! once, how deep calls and expressions nest, and allows no modules. What each user bounds on
//! top differs by how it runs: a script may watch a program for hours, so it bounds work
//! between two calls to the program; a rule runs once per event, so it bounds the operations
//! of each evaluation.

use rhai::Engine;

/// Longest string, in bytes (all strings within one array or map count together).
pub const DEFAULT_MAX_STRING_SIZE: usize = 1 << 20;
/// Most elements in one array or bytes in one blob, nested ones included.
pub const DEFAULT_MAX_ARRAY_SIZE: usize = 65_536;
/// Most properties in one object map, nested ones included.
pub const DEFAULT_MAX_MAP_SIZE: usize = 4_096;
/// Most variables alive at once (every value is bounded by the limits above, so this bounds
/// the memory of one evaluation: a few hundred megabytes at worst).
pub const DEFAULT_MAX_VARIABLES: usize = 256;
/// Deepest nesting of calls to a script's own functions.
pub const DEFAULT_MAX_CALL_LEVELS: usize = 64;
/// Deepest nesting of expressions at the top level and within functions.
pub const DEFAULT_MAX_EXPR_DEPTHS: (usize, usize) = (64, 32);
/// Modules a script or rule may import: none, since each is one file.
pub const DEFAULT_MAX_MODULES: usize = 0;

/// A rhai engine with the standard packages and gyr's bounds on values, variables, nesting
/// and modules; the caller registers its functions and its bound on work.
pub(crate) fn limited_engine() -> Engine {
    let mut e = Engine::new();
    e.set_max_string_size(DEFAULT_MAX_STRING_SIZE)
        .set_max_array_size(DEFAULT_MAX_ARRAY_SIZE)
        .set_max_map_size(DEFAULT_MAX_MAP_SIZE)
        .set_max_variables(DEFAULT_MAX_VARIABLES)
        .set_max_call_levels(DEFAULT_MAX_CALL_LEVELS)
        .set_max_expr_depths(DEFAULT_MAX_EXPR_DEPTHS.0, DEFAULT_MAX_EXPR_DEPTHS.1)
        .set_max_modules(DEFAULT_MAX_MODULES);
    e
}
