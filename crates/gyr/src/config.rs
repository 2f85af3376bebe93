//! The runtime's settings: every tunable as a documented `DEFAULT_*` with its trade-off, the
//! full-ring [`Policy`], and the configuration a [`Builder`](crate::Builder) hands the running
//! runtime. The `GYR_*` environment variables that set them are read in `runtime.rs`
//! ([`Builder::with_default_env`](crate::Builder::with_default_env)).

use std::time::Duration;

/// Ring capacity per thread, in bytes: about 10,000 events of 64 bytes, enough to ride out a
/// monitor pause of a millisecond at 10 M events/s; more costs memory per thread.
pub const DEFAULT_RING_CAPACITY: usize = 1 << 20;
/// How long a local monitor sleeps when its rings are quiet: the bound on delivery delay for a
/// trickle of events; shorter costs CPU on an idle program.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1);
/// Local monitors started with the runtime.
pub const DEFAULT_MONITORS: usize = 1;
/// The most local monitors the runtime starts as load grows.
pub const DEFAULT_MAX_MONITORS: usize = 4;
/// A monitor whose oldest undrained event is older than this, pass after pass, is falling
/// behind, and another monitor is started.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(20);
/// How often sinks are flushed, so that a crash loses at most this much of the trace.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// How often sampling sensors are read, unless set per sensor.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// What a sensor does when its thread's ring is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// The thread waits for room; the wait is added to its perturbation. Nothing is lost.
    #[default]
    Block,
    /// The event is dropped and counted; a `gyr.lost` event reports it.
    Drop,
}

/// The runtime's configuration; see [`Builder`](crate::Builder) for each setting.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) policy: Policy,
    pub(crate) ring_capacity: usize,
    pub(crate) monitors: usize,
    pub(crate) max_monitors: usize,
    pub(crate) poll_interval: Duration,
    pub(crate) max_lag: Duration,
    pub(crate) flush_interval: Duration,
    /// Whether SIGINT, SIGTERM and SIGHUP left at their default shut the runtime down first.
    pub(crate) signals: bool,
}
