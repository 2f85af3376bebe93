#![doc = include_str!("../README.md")]
//!
//! # How it fits together
//!
//! - [`spec`]: the TOML spec (its format is documented there and in `docs/watchdog.md`):
//!   [`Spec::parse`], [`Spec::load`], the event types ([`spec::EventDef`]), the sources, and the
//!   design points ([`Spec::design_points`]).
//! - [`parse`]: [`LineParser`], one per stream of lines: lines in, `(event index, values)` out.
//! - [`tail`]: lines out of bytes ([`tail::Lines`]) and out of files that grow, rotate, shrink
//!   and appear ([`tail::FileTail`], [`tail::FileSet`]); [`glob`] finds them.
//! - [`supervise`]: the program as a child process (pipes, stop, restart with changed
//!   arguments, signals, its control and input files).
//! - [`publish`]: the dynamic sensors, the watch-dog's own events and the `design` object.
//! - [`run`](mod@run): the loop and the `watched` steering object; [`run()`] is what
//!   `gyr watchdog` calls.
//! - [`ensemble`]: many members of a program over a grid of parameters, supervised together,
//!   watched by one rules engine, retried once, their results made into a cached map (NPSS's
//!   zooming); what `gyr ensemble` calls.
//!
//! ```
//! use std::sync::Arc;
//! let spec = gyr_watchdog::Spec::parse(r#"
//! [[event]]
//! name = "adpac.residual"
//! pattern = '^\s*(?P<iter>\d+)\s+(?P<rms>\S+)'
//! fields = [{ name = "iter", type = "u32" }, { name = "rms", type = "f64", design = 1e-6 }]
//! "#).unwrap();
//! assert_eq!(spec.design_points()[0].design, Some(1e-6));
//! let mut parser = gyr_watchdog::LineParser::new(Arc::new(spec), 0, "");
//! let mut n = 0;
//! parser.line("   12  0.1234D-03", &mut |_, values| { n += 1; assert_eq!(values.len(), 4); });
//! assert_eq!(n, 1);
//! ```
#![warn(missing_docs)]

pub mod ensemble;
pub mod glob;
pub mod parse;
pub mod publish;
pub mod run;
pub mod spec;
pub mod supervise;
pub mod tail;

pub use parse::{LineParser, ParseStats};
pub use run::{Error, Options, Outcome, run};
pub use spec::{DesignPoint, Spec};
