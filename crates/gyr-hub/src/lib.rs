//! gyr's central monitor (Falcon's): it attaches to the user's running programs, analyses their
//! event streams live (rates, per-thread and per-domain load, windowed statistics, decimated
//! series), and serves the web UI, through which people watch and steer every program at once.
//!
//! Data flow: [`input`] attaches to each program's embedded server (events, steering log,
//! state) → [`model`] keeps and analyses it → a ticker turns changes into one update a tick →
//! [`web`] pushes updates to every page and forwards what pages ask to the programs.
#![warn(missing_debug_implementations, rust_2018_idioms)]

mod input;
mod model;
mod web;

pub use model::{BUCKET_S, HISTORY_POINTS, STATS_WINDOW_S};

use gyr_proto::v1::gyr_client::GyrClient;
use model::Model;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// How often pages get an update.
pub const TICK: Duration = Duration::from_millis(250);

/// Why the hub could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// The web address is not on this machine and no token guards it.
    #[error(
        "the hub would listen on {0}, which other machines can reach; listen on 127.0.0.1 (the default), or wait for token support on other addresses"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source} (is another hub running? try --listen 127.0.0.1:0)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the hub's runtime: {0}")]
    Runtime(std::io::Error),
}

/// How the hub runs.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Where the web UI listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Where programs announce themselves (default: gyr's per-user directory).
    pub socket_dir: PathBuf,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            socket_dir: gyr::server::discovery::socket_dir(),
        }
    }
}

/// State shared by the hub's tasks.
#[derive(Debug)]
pub(crate) struct Shared {
    model: Mutex<Model>,
    /// Updates for the pages, as JSON text.
    updates: tokio::sync::broadcast::Sender<Arc<String>>,
    /// A client per attached program, for what pages ask.
    clients: Mutex<HashMap<u32, GyrClient<Channel>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running hub; dropping it stops it.
#[derive(Debug)]
pub struct Hub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Hub {
    /// Starts the hub on its own threads: discovery, analyses, the web server.
    pub fn start(config: HubConfig) -> Result<Hub, HubError> {
        if !config.listen.ip().is_loopback() {
            return Err(HubError::NotLoopback(config.listen));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gyr-hub")
            .enable_all()
            .build()
            .map_err(HubError::Runtime)?;
        let listener =
            std::net::TcpListener::bind(config.listen).map_err(|source| HubError::Bind {
                addr: config.listen,
                source,
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| HubError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| HubError::Bind {
            addr: config.listen,
            source,
        })?;
        let (updates, _) = tokio::sync::broadcast::channel(64);
        let shared = Arc::new(Shared {
            model: Mutex::new(Model::default()),
            updates,
            clients: Mutex::new(HashMap::new()),
        });
        runtime.spawn(input::discover(shared.clone(), config.socket_dir.clone()));
        runtime.spawn(ticker(shared.clone()));
        let app = web::router(shared.clone());
        runtime.spawn(async move {
            let Ok(l) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            if let Err(e) = axum::serve(l, app).await {
                eprintln!("gyr hub: the web server stopped: {e}");
            }
        });
        Ok(Hub {
            addr,
            shared,
            runtime: Some(runtime),
        })
    }

    /// The web UI's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The programs attached now: (pid, alive, events received).
    pub fn programs(&self) -> Vec<(u32, bool, u64)> {
        self.shared
            .lock()
            .processes
            .values()
            .map(|p| (p.pid, p.alive, p.received))
            .collect()
    }

    /// Everything the hub knows, as the JSON a page gets when it connects.
    pub fn snapshot(&self) -> serde_json::Value {
        self.shared.lock().snapshot(Instant::now())
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_millis(500));
        }
    }
}

/// Turns the model's changes into one update per tick for every page.
async fn ticker(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        let update = shared.lock().update(Instant::now());
        // Nobody listening is fine: the next page gets a snapshot.
        let _ = shared.updates.send(Arc::new(update.to_string()));
    }
}
