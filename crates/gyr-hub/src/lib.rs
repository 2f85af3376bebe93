#![doc = include_str!("../README.md")]
//!
//! Data flow: `input` takes programs in (attached through their embedded servers, or
//! pushing to the hub's gRPC API) → `program` keeps each program's state under its own lock
//! and takes in its batches, feeding `analysis` (series, statistics, rates, groups) → output
//! ports: `output` streams to gRPC clients of the hub, `store` writes trace files, a ticker
//! turns the changes into one update a tick (`view`) and `web` pushes it to every page. What pages
//! and gRPC clients ask (`web`, `service`) is forwarded to the programs.
#![warn(missing_debug_implementations, rust_2018_idioms)]

mod analysis;
mod heap;
mod input;
mod lifetimes;
mod metrics;
mod mpi;
mod output;
mod program;
pub mod protocol;
mod rank_timeline;
mod replay;
mod rules;
mod service;
mod store;
mod view;
mod web;

pub use analysis::{BUCKET_S, HISTORY_POINTS, STATS_WINDOW_S};
pub use metrics::{MAX_LABEL_BYTES, MAX_SERIES};
pub use replay::ReplayError;
pub use store::DEFAULT_RECORD_QUEUE_BYTES;
#[doc(hidden)]
pub use web::{PageCommand, PageMessage, SteerAction, parse_page_command};

use gyr_client::access::{Access, Server};
use gyr_proto::listen::{ConnectionCounts, GuardedListener};
use gyr_proto::v1;
use input::ProgramClient;
use program::{Programs, Source};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often pages get an update (the points of every series that moved).
pub const TICK: Duration = Duration::from_millis(40);
/// Every how many ticks the programs' summaries (state, objects, sensors, rates) go too.
const SUMMARY_EVERY: u32 = 6;

/// Why the hub could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// An address other machines can reach, and no token to guard it.
    #[error(
        "the hub would listen on {0}, which other machines can reach, without a token: give --token TOKEN (and --read-token for watch-only access), or listen on 127.0.0.1"
    )]
    NoToken(SocketAddr),
    /// A token too short to guard anything.
    #[error(transparent)]
    BadToken(#[from] gyr_client::token::TokenError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source} (is another hub running? try --listen 127.0.0.1:0)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The directory for trace files cannot be written.
    #[error("cannot record into {dir}: {source}")]
    Record {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file given to replay cannot be read.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The async runtime could not start.
    #[error("cannot start the hub's runtime: {0}")]
    Runtime(std::io::Error),
    /// The rules file is not valid (its file, line and column say where).
    #[error("the rules file was refused: {0}")]
    Rules(#[from] gyr_rules::RulesError),
}

/// How the hub runs.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Where the web UI listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Where the gRPC API listens (programs publish here; clients steer through it); `None`:
    /// not served.
    pub grpc: Option<SocketAddr>,
    /// Where programs announce themselves (default: gyr's per-user directory).
    pub socket_dir: PathBuf,
    /// Whether to attach to the programs announced there.
    pub discover: bool,
    /// The steer token: required when an address is not loopback; at least
    /// [`gyr_client::token::MIN_TOKEN_LEN`] characters.
    pub token: Option<String>,
    /// A token that may watch but not steer; as long as the steer token must be.
    pub read_token: Option<String>,
    /// Write everything received to trace files in this directory.
    pub record: Option<PathBuf>,
    /// Bytes of records queued for the recording's writer at most
    /// ([`DEFAULT_RECORD_QUEUE_BYTES`]); beyond that, batches are dropped from the files and
    /// counted as lost there.
    pub record_queue_bytes: usize,
    /// Replay these trace files instead of watching running programs.
    pub replay: Vec<PathBuf>,
    /// Replay them in causal order with the time monitoring took removed from each thread
    /// (`gyr trace view --correct`; see `gyr_trace::perturbation`).
    pub replay_corrected: bool,
    /// A rules file (TOML with rhai expressions, `gyr_rules`) run over every program's
    /// events; read again when it changes.
    pub rules: Option<PathBuf>,
    /// More names the web UI may be reached by (`NAME` or `NAME:PORT`), beyond its own
    /// address (and `localhost` on loopback): a tunnel's or a proxy's. Requests naming another
    /// host (`Host`), or coming from a page of another site (`Origin`), are refused.
    pub allow_hosts: Vec<String>,
    /// How many connections each TCP listener serves at once, and how long one may go
    /// without an accepted request.
    pub limits: gyr_proto::listen::Limits,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            grpc: Some(SocketAddr::from(([127, 0, 0, 1], 7071))),
            socket_dir: gyr_client::discovery::socket_dir(),
            discover: true,
            token: None,
            read_token: None,
            record: None,
            record_queue_bytes: DEFAULT_RECORD_QUEUE_BYTES,
            replay: Vec::new(),
            replay_corrected: false,
            rules: None,
            allow_hosts: Vec::new(),
            limits: gyr_proto::listen::Limits::default(),
        }
    }
}

/// State shared by the hub's tasks.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) programs: Programs,
    /// Updates for the pages, as JSON text.
    updates: tokio::sync::broadcast::Sender<Arc<String>>,
    /// A client per program the hub can steer, for what pages and gRPC clients ask.
    clients: Mutex<HashMap<u32, ProgramClient>>,
    /// gRPC subscribers.
    pub(crate) outputs: output::Outputs,
    /// Trace files, when recording.
    pub(crate) store: Option<store::Store>,
    /// The replay, when replaying.
    pub(crate) replay: Option<replay::Replay>,
    /// Who may watch and steer, on the web and gRPC sides alike.
    pub(crate) access: Access,
    /// The names the web UI may be reached by.
    pub(crate) hosts: web::AllowedHosts,
    /// The expert system, when a rules file was given.
    pub(crate) rules: Option<rules::Rules>,
    /// The MPI views of every job (lock order: a program, then this).
    pub(crate) mpi: Mutex<mpi::Mpi>,
}

impl Shared {
    /// The hub's own state for the pages: what it records, and what that dropped.
    pub(crate) fn hub_state(&self) -> protocol::HubState {
        use std::sync::atomic::Ordering::Relaxed;
        protocol::HubState {
            recording: self.store.as_ref().map(|s| protocol::Recording {
                dir: s.dir().display().to_string(),
                written: s.written.load(Relaxed),
                dropped: s.dropped.load(Relaxed),
            }),
        }
    }

    /// Tells `p` which event types the rules watch, before its events are taken in.
    pub(crate) fn watch_for_rules(&self, p: &mut program::Process) {
        if let Some(r) = &self.rules {
            let w = r.watch();
            if p.rules_watch.as_ref().is_none_or(|o| !Arc::ptr_eq(o, &w)) {
                p.rules_watch = Some(w);
            }
        }
    }

    /// Hands the events `p` took in for the rules to the rules thread (with `all`, even a
    /// few; otherwise once there are enough to be worth a message).
    pub(crate) fn feed_rules(&self, p: &mut program::Process, all: bool) {
        let Some(r) = &self.rules else { return };
        if p.rules_out.is_empty() || (!all && p.rules_out.len() < 256) {
            return;
        }
        let schemas = p.schemas[p.rules_schemas.min(p.schemas.len())..].to_vec();
        p.rules_schemas = p.schemas.len();
        r.feed(rules::Input {
            pid: p.pid,
            program: p.name().into(),
            schemas,
            events: std::mem::take(&mut p.rules_out),
        });
    }

    /// Hands the MPI events `p` took in to the MPI views.
    pub(crate) fn feed_mpi(&self, p: &mut program::Process) {
        if p.mpi_out.is_empty() {
            return;
        }
        let mut m = self.mpi.lock().unwrap_or_else(|e| e.into_inner());
        for (thread, ts, e) in p.mpi_out.drain(..) {
            m.take(p.pid, p.clock_zero_unix_ns, thread, ts, e);
        }
    }

    /// Program `pid` is gone, its last batch taken in: a rank's timeline ends.
    pub(crate) fn mpi_gone(&self, pid: u32) {
        self.mpi.lock().unwrap_or_else(|e| e.into_inner()).gone(pid);
    }

    /// The MPI view of the job program `pid` is a rank of.
    pub(crate) fn mpi_view(&self, pid: u32) -> Option<protocol::MpiView> {
        self.mpi
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .view_of(pid)
    }

    pub(crate) fn clients(&self) -> MutexGuard<'_, HashMap<u32, ProgramClient>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes in a batch of program `pid` (the one that started at `started`) arriving by
    /// `source`: analyses, then every output port. Returns the events taken in, or `None`
    /// when that program no longer takes events this way (it now pushes, or was replaced).
    pub(crate) fn ingest(
        &self,
        pid: u32,
        started: u64,
        source: Source,
        batch: v1::EventBatch,
    ) -> Option<u64> {
        self.programs.with(pid, |p| {
            if p.started_unix_ns != started || p.source != source {
                return None;
            }
            let known = p.schemas.len();
            self.watch_for_rules(p);
            let n = p.ingest_batch(&batch);
            self.feed_rules(p, true);
            self.feed_mpi(p);
            self.outputs.forward(p, &batch);
            if let Some(s) = &self.store {
                s.batch(p, p.schemas[known..].to_vec(), Arc::new(batch));
            }
            Some(n)
        })?
    }
}

/// A running hub; dropping it stops it.
#[derive(Debug)]
pub struct Hub {
    addr: SocketAddr,
    grpc: Option<SocketAddr>,
    shared: Arc<Shared>,
    /// What the TCP listeners refused.
    connections: Vec<Arc<ConnectionCounts>>,
    /// What `grpc.health.v1` reports: `NOT_SERVING` once the hub stops.
    health: gyr_proto::standard::Health,
    runtime: Option<tokio::runtime::Runtime>,
}

fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, HubError> {
    let e = |source| HubError::Bind { addr, source };
    let l = std::net::TcpListener::bind(addr).map_err(e)?;
    l.set_nonblocking(true).map_err(e)?;
    Ok(l)
}

impl Hub {
    /// Starts the hub on its own threads: discovery, analyses, the web server, the gRPC API.
    pub fn start(config: HubConfig) -> Result<Hub, HubError> {
        heap::bound_growth();
        if let Some(t) = &config.token {
            gyr_client::token::check("the steer token (--token, GYR_HUB_TOKEN)", t)?;
        }
        if let Some(t) = &config.read_token {
            gyr_client::token::check("the read token (--read-token, GYR_HUB_READ_TOKEN)", t)?;
        }
        for addr in std::iter::once(config.listen).chain(config.grpc) {
            if !addr.ip().is_loopback() && config.token.is_none() {
                return Err(HubError::NoToken(addr));
            }
        }
        let store = match &config.record {
            Some(dir) => Some(store::Store::start(dir, config.record_queue_bytes).map_err(
                |source| HubError::Record {
                    dir: dir.clone(),
                    source,
                },
            )?),
            None => None,
        };
        let replay = if config.replay.is_empty() {
            None
        } else {
            Some(replay::Replay::open(
                &config.replay,
                config.replay_corrected,
            )?)
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gyr-hub")
            .enable_all()
            .build()
            .map_err(HubError::Runtime)?;
        let listener = bind(config.listen)?;
        let addr = listener.local_addr().map_err(|source| HubError::Bind {
            addr: config.listen,
            source,
        })?;
        let grpc_listener = config.grpc.map(bind).transpose()?;
        let grpc = grpc_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()
            .map_err(|source| HubError::Bind {
                addr: config.listen,
                source,
            })?;
        let rules = match &config.rules {
            Some(path) => Some(rules::Rules::load(path)?),
            None => None,
        };
        let (updates, _) = tokio::sync::broadcast::channel(256);
        let shared = Arc::new(Shared {
            programs: Programs::default(),
            updates,
            clients: Mutex::new(HashMap::new()),
            outputs: output::Outputs::default(),
            store,
            replay,
            access: match config.token.clone() {
                Some(steer) => Access::tokens(Server::Hub, steer, config.read_token.clone()),
                None => Access::open(Server::Hub),
            },
            hosts: web::AllowedHosts::new(addr, &config.allow_hosts),
            rules,
            mpi: Mutex::new(mpi::Mpi::default()),
        });
        rules::Rules::start(&shared, runtime.handle().clone()).map_err(HubError::Runtime)?;
        if shared.replay.is_some() {
            replay::Replay::start(&shared).map_err(HubError::Runtime)?;
        } else if config.discover {
            runtime.spawn(input::discover(shared.clone(), config.socket_dir.clone()));
        }
        runtime.spawn(ticker(shared.clone()));
        let app = web::router(shared.clone());
        let limits = config.limits;
        let guard = |l: std::net::TcpListener| {
            // Entering the runtime: the listener registers with its reactor.
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(l)
                .map(|l| GuardedListener::new(l, limits))
                .map_err(|source| HubError::Bind { addr, source })
        };
        let web_listener = guard(listener)?;
        let grpc_listener = grpc_listener.map(guard).transpose()?;
        let mut connections = vec![web_listener.counts()];
        connections.extend(grpc_listener.as_ref().map(|l| l.counts()));
        runtime.spawn(async move {
            let l = web::Listener(web_listener);
            let app = app.into_make_service_with_connect_info::<web::Connection>();
            if let Err(e) = axum::serve(l, app).await {
                eprintln!("gyr hub: the web server stopped: {e}");
            }
        });
        let health = runtime.block_on(gyr_proto::standard::Health::new());
        if let Some(l) = grpc_listener {
            let svc = service::HubService::new(shared.clone());
            // Reflection and health beside the API, under the same tokens (see
            // `gyr_client::access`); reflection is left out, and said, should it not load.
            let reflection = gyr_proto::standard::reflection(shared.access.watch_gate())
                .inspect_err(|e| eprintln!("gyr hub: serving no gRPC reflection: {e}"))
                .ok();
            let (v1, v1alpha) = reflection.unzip();
            let health = health.service(shared.access.health_gate());
            runtime.spawn(async move {
                let r = tonic::transport::Server::builder()
                    .add_service(service::server(svc))
                    .add_optional_service(v1)
                    .add_optional_service(v1alpha)
                    .add_service(health)
                    .serve_with_incoming(l.into_stream())
                    .await;
                if let Err(e) = r {
                    eprintln!("gyr hub: the gRPC server stopped: {e}");
                }
            });
        }
        Ok(Hub {
            addr,
            grpc,
            shared,
            connections,
            health,
            runtime: Some(runtime),
        })
    }

    /// The web UI's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The gRPC API's address, if served.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc
    }

    /// Connections the TCP listeners closed: because they were full, and because a connection
    /// made no accepted request in time (see [`HubConfig::limits`]).
    pub fn connections_closed(&self) -> (u64, u64) {
        self.connections
            .iter()
            .fold((0, 0), |(r, t), c| (r + c.refused(), t + c.timed_out()))
    }

    /// Carries out a replay command as a page's replay bar does: `play`, `pause`, `speed`
    /// (value: factor) or `seek` (value: seconds from the start; past the end seeks to the end).
    pub fn replay_command(&self, action: &str, value: Option<f64>) -> Result<String, String> {
        match &self.shared.replay {
            Some(r) => r.command(action, value),
            None => Err("this hub replays no trace files".to_owned()),
        }
    }

    /// How long the replayed traces last, in seconds (corrected when the replay is), if
    /// replaying.
    pub fn replay_duration(&self) -> Option<f64> {
        self.shared.replay.as_ref().map(|r| r.duration_s())
    }

    /// Where trace files are written, if recording.
    pub fn record_dir(&self) -> Option<&std::path::Path> {
        self.shared.store.as_ref().map(|s| s.dir())
    }

    /// The programs known now: (pid, alive, events received).
    pub fn programs(&self) -> Vec<(u32, bool, u64)> {
        let mut v = Vec::new();
        self.shared
            .programs
            .each(|p| v.push((p.pid, p.alive, p.received)));
        v
    }

    /// Events received from every program, and events lost on the way to the hub (streams
    /// that fell behind, records the hub could not read, batches storage had to drop).
    pub fn totals(&self) -> (u64, u64) {
        let (mut received, mut lost) = (0, 0);
        self.shared.programs.each(|p| {
            received += p.received;
            lost += p.missed + p.unreadable;
        });
        if let Some(s) = &self.shared.store {
            lost += s.dropped.load(std::sync::atomic::Ordering::Relaxed);
        }
        (received, lost)
    }

    /// The MPI view of the job program `pid` is a rank of, as `/api/mpi` serves it.
    pub fn mpi_view(&self, pid: u32) -> Option<serde_json::Value> {
        let v = self.shared.mpi_view(pid)?;
        Some(serde_json::to_value(v).expect("page messages always serialize"))
    }

    /// Everything the hub knows, as the JSON a page gets when it connects.
    pub fn snapshot(&self) -> serde_json::Value {
        let snap =
            protocol::ToPage::Snapshot(view::snapshot(&self.shared.programs, Instant::now()));
        serde_json::to_value(snap).expect("page messages always serialize")
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Some(r) = &self.shared.replay {
            r.stop();
        }
        if let Some(rt) = self.runtime.take() {
            rt.block_on(self.health.set(false));
            rt.shutdown_timeout(Duration::from_millis(500));
        }
    }
}

fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}

/// Turns the model's changes into one update per tick for every page.
async fn ticker(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut n = 0u32;
    loop {
        tick.tick().await;
        n = n.wrapping_add(1);
        if shared.updates.receiver_count() == 0 {
            continue;
        }
        let mut update = view::update(
            &shared.programs,
            Instant::now(),
            n.is_multiple_of(SUMMARY_EVERY),
        );
        update.replay = shared.replay.as_ref().map(|r| r.state());
        if update.processes.is_some() {
            update.hub = Some(shared.hub_state());
        }
        // When it left the hub: the page measures how far behind it is.
        update.sent_ms = unix_ms();
        let text = serde_json::to_string(&protocol::ToPage::Update(update))
            .expect("page messages always serialize");
        // Nobody listening is fine: the next page gets a snapshot.
        let _ = shared.updates.send(Arc::new(text));
    }
}
