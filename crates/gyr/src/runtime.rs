//! The runtime: configuration, start-up, the registry of thread rings, flush and shutdown.
//!
//! One runtime runs per process at a time. [`Builder::start`] starts its local monitors and
//! returns a [`Runtime`] guard; dropping the guard drains every ring, closes the sinks (writing
//! the trace's end block) and stops the monitors. [`init`] and [`Builder::install`] start the
//! process's runtime instead, which no dropped guard can stop by accident.
//!
//! # Ending without losing the trace
//!
//! However the process ends in the ordinary way, what its sensors recorded reaches the sinks
//! and the steering server's files are removed: a shutdown by [`Runtime::shutdown`] or
//! [`shutdown`], a return from `main`, `std::process::exit` (an `atexit` hook), a panic (the
//! panic hook flushes), and SIGINT, SIGTERM or SIGHUP while their disposition is the default
//! (a `gyr-signals` thread shuts down, then the signal is raised again with its default action,
//! so the exit status still says how the process ended). Only what cannot be caught (SIGKILL,
//! an abort) loses the unfinished chunk, at most [`DEFAULT_FLUSH_INTERVAL`] of events.

use crate::batch::Stats;
use crate::clock::clock;
use crate::config::Config;
use crate::monitor;
use crate::primitives::lock;
use crate::sink::{FileSink, Sink, SinkSet};
#[cfg(feature = "server")]
use crate::state::Stop;
use crate::state::{EPOCH, RUNTIME, Shared, UNRECORDED, current};
use gyr_core::{TraceEnd, TraceHeader};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use crate::config::{
    DEFAULT_FLUSH_INTERVAL, DEFAULT_MAX_LAG, DEFAULT_MAX_MONITORS, DEFAULT_MONITORS,
    DEFAULT_POLL_INTERVAL, DEFAULT_RING_CAPACITY, DEFAULT_SAMPLE_INTERVAL, Policy,
};

/// Why a runtime could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another runtime is running in this process.
    #[error(
        "a gyr runtime is already running in this process: drop its `Runtime` guard before starting another"
    )]
    AlreadyRunning,
    /// The trace file could not be created.
    #[error("cannot create the trace file {path}: {source}")]
    TraceFile {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// An environment variable holds a value gyr cannot use.
    #[error("environment variable {var}={value:?} is not valid: {expected}")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A setting is out of range.
    #[error("{0}")]
    BadConfig(String),
    /// A monitor thread could not be started.
    #[error("cannot start a local monitor thread: {0}")]
    Spawn(std::io::Error),
    /// The rules file (`Builder::rules`, `GYR_RULES`) did not load: its file, line and column.
    #[cfg(feature = "rules")]
    #[error("the rules file was refused: {0}")]
    Rules(gyr_rules::RulesError),
}

/// Configures and starts the runtime.
///
/// ```
/// let mem = gyr::MemorySink::new();
/// let rt = gyr::Builder::new().policy(gyr::Policy::Block).sink(mem.clone()).start().unwrap();
/// # drop(rt);
/// ```
#[derive(Debug)]
pub struct Builder {
    config: Config,
    #[cfg(feature = "server")]
    server: crate::server::ServerConfig,
    sinks: Vec<Box<dyn Sink>>,
    trace_path: Option<PathBuf>,
    #[cfg(feature = "rules")]
    rules: Option<PathBuf>,
    env_error: Option<Error>,
    enabled: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let m = match s[i..].to_ascii_lowercase().as_str() {
                "k" | "kb" | "kib" => 1 << 10,
                "m" | "mb" | "mib" => 1 << 20,
                "g" | "gb" | "gib" => 1 << 30,
                _ => return None,
            };
            (&s[..i], m)
        }
        None => (s, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

impl Builder {
    /// The defaults: Block policy, 1 MiB rings, one local monitor growing to four, no sinks.
    pub fn new() -> Self {
        Builder {
            config: Config {
                policy: Policy::Block,
                ring_capacity: DEFAULT_RING_CAPACITY,
                monitors: DEFAULT_MONITORS,
                max_monitors: DEFAULT_MAX_MONITORS,
                poll_interval: DEFAULT_POLL_INTERVAL,
                max_lag: DEFAULT_MAX_LAG,
                flush_interval: DEFAULT_FLUSH_INTERVAL,
                signals: true,
            },
            #[cfg(feature = "server")]
            server: crate::server::ServerConfig {
                enabled: true,
                ..Default::default()
            },
            sinks: Vec::new(),
            trace_path: None,
            #[cfg(feature = "rules")]
            rules: None,
            env_error: None,
            enabled: true,
        }
    }

    /// Reads settings from the environment; a bad value makes [`Builder::start`] fail.
    ///
    /// | variable | meaning | default |
    /// |---|---|---|
    /// | `GYR_TRACE` | write a trace file at this path | none |
    /// | `GYR_POLICY` | `block` or `drop` when a ring is full | `block` |
    /// | `GYR_RING_CAPACITY` | bytes per thread ring (`4M`, `256k`) | `1M` |
    /// | `GYR_MONITORS` | local monitors at start | 1 |
    /// | `GYR_MAX_MONITORS` | most local monitors | 4 |
    /// | `GYR_POLL_INTERVAL_US` | monitor sleep when idle, µs | 1000 |
    /// | `GYR_DISABLE` | `1`: start with every sensor off | unset |
    /// | `GYR_SIGNALS` | `0`: leave SIGINT, SIGTERM and SIGHUP alone (no flush before dying) | `1` |
    /// | `GYR_SERVE` | `0`: do not serve the steering API (with `GYR_HUB`: publish only, unsteerable) | `1` |
    /// | `GYR_LISTEN` | also serve on this TCP address (token required) | none |
    /// | `GYR_TOKEN` / `GYR_READ_TOKEN` | the TCP steer token (generated if unset) / a watch-only token; 16 characters at least, or the server does not listen on TCP | none |
    /// | `GYR_HUB` | push the event stream to the hub at this `host:port` | none |
    /// | `GYR_HUB_TOKEN` | the hub's token, when it listens beyond this machine | none |
    /// | `GYR_SOCKET_DIR` | where programs announce themselves | `$XDG_RUNTIME_DIR/gyr` or `/tmp/gyr-<uid>` |
    /// | `GYR_RULES` | run this rules file in the program's steering thread, reloaded when it changes (feature `rules`; see [`Builder::rules`]) | none |
    pub fn with_default_env(mut self) -> Self {
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let mut bad = |var: &'static str, value: String, expected: &'static str| {
            self.env_error.get_or_insert(Error::BadEnv {
                var,
                value,
                expected,
            });
        };
        if let Some(v) = var("GYR_POLICY") {
            match v.to_ascii_lowercase().as_str() {
                "block" => self.config.policy = Policy::Block,
                "drop" => self.config.policy = Policy::Drop,
                _ => bad("GYR_POLICY", v, "use `block` or `drop`"),
            }
        }
        if let Some(v) = var("GYR_RING_CAPACITY") {
            match parse_size(&v) {
                Some(n) if n >= 4096 => self.config.ring_capacity = n,
                _ => bad(
                    "GYR_RING_CAPACITY",
                    v,
                    "give a size of at least 4096 bytes, such as `256k` or `4M`",
                ),
            }
        }
        for (name, slot) in [("GYR_MONITORS", 0), ("GYR_MAX_MONITORS", 1)] {
            if let Some(v) = var(name) {
                match v.parse::<usize>() {
                    Ok(n) if (1..=64).contains(&n) => {
                        if slot == 0 {
                            self.config.monitors = n
                        } else {
                            self.config.max_monitors = n
                        }
                    }
                    _ => bad(name, v, "give a number of monitors from 1 to 64"),
                }
            }
        }
        if let Some(v) = var("GYR_POLL_INTERVAL_US") {
            match v.parse::<u64>() {
                Ok(n) if (10..=1_000_000).contains(&n) => {
                    self.config.poll_interval = Duration::from_micros(n)
                }
                _ => bad(
                    "GYR_POLL_INTERVAL_US",
                    v,
                    "give microseconds from 10 to 1000000",
                ),
            }
        }
        if let Some(v) = var("GYR_DISABLE") {
            self.enabled = !matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = var("GYR_SIGNALS") {
            match v.as_str() {
                "0" | "false" | "no" => self.config.signals = false,
                "1" | "true" | "yes" => self.config.signals = true,
                _ => bad("GYR_SIGNALS", v, "use 1 or 0"),
            }
        }
        if let Some(v) = var("GYR_TRACE") {
            self.trace_path = Some(v.into());
        }
        if let Some(v) = var("GYR_RULES") {
            #[cfg(feature = "rules")]
            {
                self.rules = Some(v.into());
            }
            #[cfg(not(feature = "rules"))]
            bad(
                "GYR_RULES",
                v,
                "this program was built without gyr's `rules` feature: run the rules in a hub (`gyr hub --rules FILE`) instead",
            );
        }
        // A program built without the server must not look served or published when asked to
        // be: say which variable asked and what to do.
        #[cfg(not(feature = "server"))]
        for name in ["GYR_LISTEN", "GYR_HUB"] {
            if let Some(v) = var(name) {
                bad(
                    name,
                    v,
                    "this program was built without gyr's `server` feature: it writes trace files only (GYR_TRACE); build it with gyr's default features to serve the steering API or publish to a hub",
                );
            }
        }
        #[cfg(feature = "server")]
        {
            if let Some(v) = var("GYR_SERVE") {
                match v.as_str() {
                    "0" | "false" | "no" => self.server.enabled = false,
                    "1" | "true" | "yes" => self.server.enabled = true,
                    _ => bad(
                        "GYR_SERVE",
                        v,
                        "use 1 to serve the steering API or 0 not to",
                    ),
                }
            }
            if let Some(v) = var("GYR_LISTEN") {
                match v.parse::<std::net::SocketAddr>() {
                    Ok(a) => self.server.tcp = Some(a),
                    Err(_) => bad(
                        "GYR_LISTEN",
                        v,
                        "give an address and port such as 127.0.0.1:7171",
                    ),
                }
            }
            // Kept even when empty: an empty token is refused when the server starts (it then
            // does not listen on TCP), not taken as unset.
            if let Ok(v) = std::env::var("GYR_TOKEN") {
                self.server.steer_token = Some(v);
            }
            if let Ok(v) = std::env::var("GYR_READ_TOKEN") {
                self.server.read_token = Some(v);
            }
            if let Some(v) = var("GYR_HUB") {
                if v.contains(':') && !v.contains('/') {
                    self.server.hub = Some(v);
                } else {
                    bad(
                        "GYR_HUB",
                        v,
                        "give the hub's gRPC address as host:port, such as 127.0.0.1:7071",
                    );
                }
            }
            if let Some(v) = var("GYR_HUB_TOKEN") {
                self.server.hub_token = Some(v);
            }
        }
        self
    }

    /// Whether to serve the steering API (on by default; see [`crate::server`]). Off with a
    /// [`hub`](Self::hub), the program publishes to the hub and opens nothing: watched, not steered.
    #[cfg(feature = "server")]
    pub fn serve(mut self, on: bool) -> Self {
        self.server.enabled = on;
        self
    }

    /// Also serve the steering API on TCP at `addr` (port 0: any free port), with a steer
    /// token (generated when `None`) and an optional read-only token. A token shorter than
    /// [`gyr_client::token::MIN_TOKEN_LEN`] is refused when the runtime starts: the server then
    /// says so on stderr and does not listen on TCP.
    #[cfg(feature = "server")]
    pub fn listen_tcp(
        mut self,
        addr: std::net::SocketAddr,
        steer_token: Option<String>,
        read_token: Option<String>,
    ) -> Self {
        self.server.tcp = Some(addr);
        self.server.steer_token = steer_token;
        self.server.read_token = read_token;
        self
    }

    /// How many TCP connections the steering server serves at once, and how long a connection
    /// may go without a call carrying a valid token before it is closed (defaults:
    /// [`gyr_proto::listen::DEFAULT_MAX_CONNECTIONS`], [`gyr_proto::listen::DEFAULT_AUTH_TIMEOUT`]).
    #[cfg(feature = "server")]
    pub fn tcp_limits(mut self, max_connections: usize, auth_timeout: Duration) -> Self {
        self.server.limits = gyr_proto::listen::Limits {
            max_connections,
            auth_timeout,
        };
        self
    }

    /// Push the event stream to the hub at `addr` (`host:port`: the hub's gRPC address), with
    /// its token if it listens beyond this machine. The hub can then also steer the program
    /// through its server.
    #[cfg(feature = "server")]
    pub fn hub(mut self, addr: impl Into<String>, token: Option<String>) -> Self {
        self.server.hub = Some(addr.into());
        self.server.hub_token = token;
        self
    }

    /// What a sensor does when its thread's ring is full.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.config.policy = policy;
        self
    }

    /// Bytes per thread ring (rounded up to a power of two).
    pub fn ring_capacity(mut self, bytes: usize) -> Self {
        self.config.ring_capacity = bytes;
        self
    }

    /// Local monitors started at once.
    pub fn monitors(mut self, n: usize) -> Self {
        self.config.monitors = n;
        self
    }

    /// The most local monitors the runtime may run as load grows.
    pub fn max_monitors(mut self, n: usize) -> Self {
        self.config.max_monitors = n;
        self
    }

    /// How long an idle monitor sleeps between looks at its rings (the bound on delivery delay;
    /// one with a core to spare sleeps less while its threads record fast).
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.config.poll_interval = d;
        self
    }

    /// The lag beyond which another monitor is started.
    pub fn max_lag(mut self, d: Duration) -> Self {
        self.config.max_lag = d;
        self
    }

    /// Runs the rules file at `path` in the program's steering thread
    /// ([`crate::steer::repository::load_rules`]): it is checked when the runtime starts (an
    /// error, with its line and column, makes [`Builder::start`] fail), then read again
    /// whenever it changes.
    #[cfg(feature = "rules")]
    pub fn rules(mut self, path: impl Into<PathBuf>) -> Self {
        self.rules = Some(path.into());
        self
    }

    /// Writes a trace file at `path`.
    pub fn trace_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.trace_path = Some(path.into());
        self
    }

    /// Adds an output for the monitors' events.
    pub fn sink(mut self, sink: impl Sink) -> Self {
        self.sinks.push(Box::new(sink));
        self
    }

    /// Whether SIGINT, SIGTERM and SIGHUP, when the program leaves them at their default
    /// action, first shut the runtime down (on by default): the trace gets its last events and
    /// the steering server's files are removed, then the signal ends the process as before.
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.config.signals = on;
        self
    }

    /// Starts with every sensor switched off (turn them on with [`crate::control`]).
    pub fn disabled(mut self) -> Self {
        self.enabled = false;
        self
    }

    /// Starts the process's runtime, which runs until [`Runtime::shutdown`], [`shutdown`] or
    /// the end of the process: dropping the returned guard does not stop it, so
    /// `let _ = gyr::Builder::new().install();` monitors the whole run.
    pub fn install(self) -> Result<Runtime, Error> {
        let mut rt = self.start()?;
        rt.scoped = false;
        Ok(rt)
    }

    /// Starts a runtime for as long as the returned guard lives: calibrates the clock, opens
    /// sinks, starts the local monitors.
    pub fn start(mut self) -> Result<Runtime, Error> {
        if let Some(e) = self.env_error.take() {
            return Err(e);
        }
        let c = &self.config;
        if c.monitors == 0 || c.max_monitors < c.monitors {
            return Err(Error::BadConfig(format!(
                "monitors = {} and max_monitors = {}: start at least one monitor, and allow at least as many as start",
                c.monitors, c.max_monitors
            )));
        }
        if c.ring_capacity < 4096 {
            return Err(Error::BadConfig(format!(
                "ring capacity {} is below the minimum of 4096 bytes",
                c.ring_capacity
            )));
        }
        // Checked before anything starts: a refused file leaves nothing running.
        #[cfg(feature = "rules")]
        if let Some(path) = &self.rules {
            gyr_rules::RuleSet::load(path).map_err(Error::Rules)?;
        }
        let mut current = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_some() {
            return Err(Error::AlreadyRunning);
        }
        let clk = clock();
        let mut header = TraceHeader::for_this_process();
        header.start_unix_ns = clk.start_unix_ns;
        header.clock_source = clk.source().to_owned();
        header.ticks_per_second = clk.ticks_per_second();
        header.sensor_cost_ns = crate::producer::measure_sensor_cost();
        header.policy = match c.policy {
            Policy::Block => "block",
            Policy::Drop => "drop",
        }
        .to_owned();
        if let Some(path) = &self.trace_path {
            let sink = FileSink::create(path, &header).map_err(|source| Error::TraceFile {
                path: path.display().to_string(),
                source,
            })?;
            self.sinks.insert(0, Box::new(sink));
        }
        let rings = crate::state::Rings::default();
        #[cfg(feature = "server")]
        let fanout = (self.server.enabled || self.server.hub.is_some()).then(|| {
            let f = crate::server::Fanout::new(rings.clone());
            self.sinks
                .push(Box::new(crate::server::FanoutSink(f.clone())));
            f
        });
        let epoch = EPOCH.fetch_add(1, Ordering::SeqCst) + 1;
        let shared = Arc::new(Shared {
            epoch,
            config: self.config.clone(),
            header,
            rings,
            monitors: Mutex::new(Vec::new()),
            sinks: Mutex::new(SinkSet::new(self.sinks)),
            stopping: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            next_thread: AtomicU64::new(1),
            flush_requested: AtomicU64::new(0),
            flush_done: (Mutex::new(0), Condvar::new()),
            stats: Stats::default(),
            ended: AtomicBool::new(false),
            server: Mutex::new(None),
            last_spawn: Mutex::new(
                Instant::now()
                    .checked_sub(Duration::from_secs(1))
                    .unwrap_or_else(Instant::now),
            ),
        });
        for _ in 0..self.config.monitors {
            monitor::spawn(&shared).map_err(Error::Spawn)?;
        }
        #[cfg(feature = "server")]
        let mut server = match fanout {
            Some(fanout) => {
                let s2 = shared.clone();
                // Clients see every loss as one count: events that never reached the sinks,
                // and records a failed sink (such as a trace file on a full disk) lost.
                let counters = Box::new(move || {
                    let s = summary_of(&s2);
                    (s.records, s.lost + s.sink_lost)
                });
                let started = match (&self.server.hub, self.server.enabled) {
                    (Some(hub), false) => crate::server::start_publishing(
                        &self.server,
                        hub.clone(),
                        shared.header.pid,
                        shared.header.command_line.clone(),
                        shared.header.start_unix_ns,
                        fanout,
                    ),
                    _ => crate::server::start(
                        &self.server,
                        shared.header.pid,
                        shared.header.command_line.clone(),
                        shared.header.start_unix_ns,
                        counters,
                        fanout,
                    ),
                };
                match started {
                    Ok(h) => Some(h),
                    // gyr's failure never stops the program: it runs on, monitored, unsteered.
                    Err(e) => {
                        crate::diag!(
                            "gyr: the steering server is off, the program runs on without it: {e}"
                        );
                        None
                    }
                }
            }
            None => None,
        };
        #[cfg(feature = "server")]
        let (socket, tcp) = {
            let socket = server.as_ref().and_then(|s| s.socket.clone());
            let tcp = server
                .as_mut()
                .and_then(|s| Some((s.tcp?, s.steer_token.clone()?)));
            *lock(&shared.server) = server.map(|s| Box::new(s) as Box<dyn Stop>);
            (socket, tcp)
        };
        *current = Some(shared.clone());
        drop(current);
        crate::control::set_enabled(&crate::control::Target::Global, self.enabled);
        crate::control::set_running(true);
        install_panic_hook();
        #[cfg(feature = "rules")]
        if let Some(path) = &self.rules {
            // Checked above; a version written since that does not load is said, and the
            // program runs on without those rules until the file is fixed.
            if let Err(e) = crate::steer::repository::load_rules(path) {
                crate::diag!(
                    "gyr: the rules file was refused, the program runs on without it: {e}"
                );
            }
        }
        crate::exit::install(
            self.config.signals,
            crate::exit::Hooks {
                end_by,
                flush: || flush(),
            },
        );
        Ok(Runtime {
            shared: Some(shared),
            scoped: true,
            #[cfg(feature = "server")]
            socket,
            #[cfg(feature = "server")]
            tcp,
        })
    }
}

/// What a runtime recorded, returned by [`Runtime::shutdown`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Records delivered to the sinks.
    pub records: u64,
    /// Events lost: dropped on full rings (reported by `gyr.lost`), plus any that could not
    /// reach a ring.
    pub lost: u64,
    /// Events skipped on purpose by rate limits.
    pub filtered: u64,
    /// Failures of sinks (each also printed once).
    pub sink_errors: u64,
    /// Records a failed sink lost (not yet stored when it failed, or given after it was
    /// disabled), counted once however many sinks failed; the other sinks got them.
    pub sink_lost: u64,
    /// Threads that emitted events.
    pub threads: u64,
}

/// The running runtime. The guard of [`Builder::start`] shuts it down when dropped; the guard of
/// [`init`] and [`Builder::install`] does not, and the runtime runs until [`Runtime::shutdown`],
/// [`shutdown`] or the end of the process.
#[must_use = "keep the Runtime while the program runs, or call shutdown() on it at the end to get its summary"]
#[derive(Debug)]
pub struct Runtime {
    shared: Option<Arc<Shared>>,
    /// Whether dropping the guard shuts the runtime down.
    scoped: bool,
    #[cfg(feature = "server")]
    socket: Option<PathBuf>,
    #[cfg(feature = "server")]
    tcp: Option<(std::net::SocketAddr, String)>,
}

impl Runtime {
    /// Makes every event emitted so far reach the sinks and the sinks flush to their storage.
    /// Returns false if the monitors did not finish within five seconds.
    pub fn flush(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.flush(Duration::from_secs(5)))
    }

    /// The trace header this runtime writes: process, clock calibration, measured sensor cost.
    pub fn header(&self) -> Option<&TraceHeader> {
        self.shared.as_ref().map(|s| &s.header)
    }

    /// The Unix socket the steering server listens on, if it runs.
    #[cfg(feature = "server")]
    pub fn socket(&self) -> Option<&std::path::Path> {
        self.socket.as_deref()
    }

    /// The TCP address and steer token of the steering server, if it listens on TCP.
    #[cfg(feature = "server")]
    pub fn tcp(&self) -> Option<(std::net::SocketAddr, &str)> {
        self.tcp.as_ref().map(|(a, t)| (*a, t.as_str()))
    }

    /// The number of local monitors running now.
    pub fn monitor_count(&self) -> usize {
        self.shared
            .as_ref()
            .map(|s| lock(&s.monitors).len())
            .unwrap_or(0)
    }

    /// Counters so far: records delivered and events lost.
    pub fn summary(&self) -> Summary {
        self.shared
            .as_ref()
            .map(|s| summary_of(s))
            .unwrap_or_default()
    }

    /// Shuts down: drains every ring, writes the end of the trace, stops the monitors and the
    /// steering server.
    pub fn shutdown(mut self) -> Summary {
        match self.shared.take() {
            Some(shared) => end(&shared, None),
            None => Summary::default(),
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take()
            && self.scoped
        {
            end(&shared, None);
        }
    }
}

/// Shuts the running runtime down, if any (see [`Runtime::shutdown`]); returns its summary.
pub fn shutdown() -> Summary {
    match current() {
        Some(shared) => end(&shared, None),
        None => Summary::default(),
    }
}

/// Ends the runtime once: drains every ring, writes the end of the trace, stops the monitors,
/// then the steering server (removing its socket and announcement). With a deadline (at exit,
/// on a signal) nothing waits past it: a monitor that does not finish in time, or a sink held
/// by the very thread that is exiting, is left as it is.
fn end(shared: &Arc<Shared>, deadline: Option<Instant>) -> Summary {
    if shared.ended.swap(true, Ordering::SeqCst) {
        return summary_of(shared);
    }
    crate::control::set_running(false);
    let monitors: Vec<_> = {
        // Under the monitors' lock, so that a monitor spawned meanwhile has its rings before
        // it sees `stopping` (see `Monitor::scale`), and none is spawned after this list.
        let monitors = lock(&shared.monitors);
        shared.stopping.store(true, Ordering::SeqCst);
        monitors.clone()
    };
    shared.wake_all();
    let me = std::thread::current().id();
    for m in monitors {
        let Some(h) = lock(&m.join).take() else {
            continue;
        };
        if h.thread().id() == me {
            continue;
        }
        match deadline {
            None => {
                let _ = h.join();
            }
            Some(d) => {
                while !h.is_finished() && Instant::now() < d {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if h.is_finished() {
                    let _ = h.join();
                }
            }
        }
    }
    let summary = summary_of(shared);
    let end = TraceEnd {
        end_ns: clock().now_ns(),
        records: summary.records,
        lost: summary.lost,
        filtered: summary.filtered,
    };
    match deadline {
        None => lock(&shared.sinks).close(&end),
        Some(d) => {
            if let Some(mut sinks) = lock_before(&shared.sinks, d) {
                sinks.close(&end);
            }
        }
    }
    let server = match deadline {
        None => lock(&shared.server).take(),
        Some(d) => lock_before(&shared.server, d).and_then(|mut s| s.take()),
    };
    if let Some(mut server) = server {
        server.stop();
    }
    let mut current = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, shared)) {
        *current = None;
        EPOCH.fetch_add(1, Ordering::SeqCst);
        UNRECORDED.store(0, Ordering::Relaxed);
    }
    summary
}

/// Takes `m` unless another thread holds it past `deadline`.
fn lock_before<T>(m: &Mutex<T>, deadline: Instant) -> Option<MutexGuard<'_, T>> {
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// The running runtime, unless the lock on it is held past `deadline` (at exit, the thread
/// holding it may be the one exiting).
fn current_before(deadline: Instant) -> Option<Arc<Shared>> {
    lock_before(&RUNTIME, deadline)?.clone()
}

/// Ends whatever runtime is running, waiting for nothing past `deadline` (at exit, on a
/// signal: see [`crate::exit`]).
fn end_by(deadline: Instant) {
    if let Some(shared) = current_before(deadline) {
        end(&shared, Some(deadline));
    }
}

#[cfg(feature = "server")]
impl Stop for crate::server::ServerHandle {
    fn stop(&mut self) {
        crate::server::ServerHandle::stop(self)
    }
}

fn summary_of(s: &Shared) -> Summary {
    let filtered = crate::control::sensors().iter().map(|s| s.skipped).sum();
    Summary {
        records: s.stats.records.load(Ordering::Relaxed),
        lost: s.stats.lost.load(Ordering::Relaxed) + UNRECORDED.load(Ordering::Relaxed),
        filtered,
        sink_errors: s.stats.sink_errors.load(Ordering::Relaxed),
        sink_lost: s.stats.sink_lost.load(Ordering::Relaxed),
        threads: s.next_thread.load(Ordering::Relaxed) - 1,
    }
}

/// Starts the process's runtime configured from the environment
/// ([`Builder::with_default_env`]); it runs until [`Runtime::shutdown`], [`shutdown`] or the
/// end of the process, whatever becomes of the returned guard (see [`Builder::install`]).
pub fn init() -> Result<Runtime, Error> {
    Builder::new().with_default_env().install()
}

/// Lets go of the parent's runtime in the child of a `fork()`; call it first thing in the child
/// (a `pthread_atfork` child handler, as `gyr-interpose` does), when the child runs on without
/// `exec`.
///
/// The child has none of the parent's threads: no monitor drains its rings, no server answers.
/// Afterwards the child records nothing (no runtime is current: [`flush`], [`shutdown`] and a
/// new thread's first event find none, and an attached thread's full ring drops instead of
/// waiting), its exit leaves the parent's trace file and server files alone, and SIGINT,
/// SIGTERM and SIGHUP end it as they would have without gyr. It takes no lock that a thread
/// the child lacks may hold, and is async-signal-safe. A new runtime cannot be started in the
/// child.
pub fn after_fork_in_child() {
    crate::state::forget_after_fork();
    crate::exit::forget_in_child();
}

/// Flushes the running runtime, if any (see [`Runtime::flush`]).
pub fn flush() -> bool {
    current().is_some_and(|s| s.flush(Duration::from_secs(5)))
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            // Get what the program recorded up to the panic onto storage: if the panic ends the
            // process, the trace still shows its last moments. Never wait long, never deadlock.
            if let Ok(guard) = RUNTIME.try_lock()
                && !crate::state::FORKED.load(Ordering::Relaxed)
                && let Some(shared) = guard.clone()
            {
                drop(guard);
                if !std::thread::current()
                    .name()
                    .is_some_and(|n| n.starts_with("gyr-monitor"))
                {
                    shared.flush(Duration::from_secs(1));
                }
            }
        }));
    });
}
