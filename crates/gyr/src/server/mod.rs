//! The embedded steering server: every instrumented program serves the `gyr.v1.Gyr` API.
//!
//! It listens on a Unix socket in the user's private announcement directory by default (see
//! [`gyr_client::discovery`]), and on TCP when asked (`GYR_LISTEN=127.0.0.1:7171`), where every call needs a
//! token: the steer token may change the program, the read token may only watch. The TCP
//! listener serves [`gyr_proto::listen::DEFAULT_MAX_CONNECTIONS`] connections at once and
//! closes a connection that makes no call with a valid token within
//! [`gyr_proto::listen::DEFAULT_AUTH_TIMEOUT`]. It runs on
//! its own thread with a single-threaded async runtime, so it never takes a core from the
//! program while idle, and it never touches the program's threads: probes lock the steered
//! object briefly, actuators wait for the program's synch points.
//!
//! Beside `gyr.v1.Gyr`, each listener serves gRPC server reflection and `grpc.health.v1`
//! ([`gyr_proto::standard`], with the permissions [`gyr_client::access`] gives them), so generic
//! tools need no `.proto` files; health turns `NOT_SERVING` as the server begins to stop.

mod authority;
mod publish;
mod service;
mod stream;

pub use stream::{DEFAULT_SUBSCRIBER_QUEUE, DEFAULT_SUBSCRIBER_QUEUE_BYTES};
pub(crate) use stream::{Fanout, FanoutSink};

use gyr_client::access::{Access, Server};
use gyr_client::discovery::{self, Announcement};
use service::{GyrService, ServiceContext};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// How long clients still connected at shutdown may take to finish.
const GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// How the server listens.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerConfig {
    pub(crate) enabled: bool,
    pub(crate) tcp: Option<SocketAddr>,
    pub(crate) steer_token: Option<String>,
    pub(crate) read_token: Option<String>,
    /// A hub to push the event stream to (`host:port`), and its token.
    pub(crate) hub: Option<String>,
    pub(crate) hub_token: Option<String>,
    /// How many TCP connections at once, and how long one may go without an accepted call.
    pub(crate) limits: gyr_proto::listen::Limits,
}

/// The running server; stopping it removes its socket and announcement.
#[derive(Debug)]
pub(crate) struct ServerHandle {
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
    files: Vec<PathBuf>,
    /// None when the program only publishes (`GYR_SERVE=0` with `GYR_HUB`).
    pub(crate) socket: Option<PathBuf>,
    pub(crate) tcp: Option<SocketAddr>,
    pub(crate) steer_token: Option<String>,
}

/// A token nobody can guess: 128 bits from the kernel's random source.
fn new_token() -> io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Refuses tokens that could be guessed (`GYR_TOKEN`, `GYR_READ_TOKEN`).
fn check_tokens(cfg: &ServerConfig) -> Result<(), gyr_client::token::TokenError> {
    if let Some(t) = &cfg.steer_token {
        gyr_client::token::check("the steer token (GYR_TOKEN)", t)?;
    }
    if let Some(t) = &cfg.read_token {
        gyr_client::token::check("the read token (GYR_READ_TOKEN)", t)?;
    }
    Ok(())
}

/// Publishes the event stream to the hub without serving (`GYR_SERVE=0` with `GYR_HUB`): no
/// socket, no announcement, no port. The hub shows the program and its events but cannot steer
/// it, which is what a program on a node that must open nothing wants.
pub(crate) fn start_publishing(
    cfg: &ServerConfig,
    hub: String,
    pid: u32,
    command_line: Vec<String>,
    started_unix_ns: u64,
    fanout: Fanout,
) -> io::Result<ServerHandle> {
    let publisher = publish::Publisher {
        hub,
        token: cfg.hub_token.clone(),
        hello: gyr_proto::v1::PublishHello {
            pid,
            command_line,
            started_unix_ns,
            clock_zero_unix_ns: started_unix_ns,
            host: gyr_core::TraceHeader::for_this_process().host,
            // Empty: nothing to steer through; the hub then ends the program's entry when
            // the stream ends.
            steer_address: String::new(),
            steer_token: String::new(),
            protocol_version: gyr_proto::PROTOCOL_VERSION,
        },
    };
    let first = publish::subscribe_at_start(&fanout);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let thread = std::thread::Builder::new()
        .name("gyr-publish".into())
        .spawn(move || {
            block_sigpipe();
            // As on the server thread: tonic's own logging must not reach the program's subscriber.
            let _quiet = tracing::dispatcher::set_default(&tracing::Dispatch::none());
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    crate::diag!("gyr: publishing to the hub cannot start: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let mut stopping = rx.clone();
                let publishing = tokio::spawn(publish::run(publisher, fanout, first, rx));
                let _ = stopping.wait_for(|s| *s).await;
                // The hub gets the stream's last batches, within the grace servers get.
                let _ = tokio::time::timeout(GRACE, publishing).await;
            });
        })?;
    Ok(ServerHandle {
        shutdown: Some(tx),
        thread: Some(thread),
        files: Vec::new(),
        socket: None,
        tcp: None,
        steer_token: None,
    })
}

pub(crate) fn start(
    cfg: &ServerConfig,
    pid: u32,
    command_line: Vec<String>,
    started_unix_ns: u64,
    counters: Box<dyn Fn() -> (u64, u64) + Send + Sync>,
    fanout: Fanout,
) -> io::Result<ServerHandle> {
    let dir = discovery::socket_dir();
    discovery::prepare_dir(&dir)?;
    let socket = dir.join(format!("{pid}.sock"));
    // A socket of a dead program that had this pid; the directory is verified to be ours.
    let _ = std::fs::remove_file(&socket);
    let unix = std::os::unix::net::UnixListener::bind(&socket)?;
    unix.set_nonblocking(true)?;
    // A token that could be guessed opens nothing: the program runs on, over its socket.
    let listen = match (cfg.tcp, check_tokens(cfg)) {
        (Some(addr), Err(e)) => {
            crate::diag!("gyr: not listening on TCP {addr}: {e}");
            None
        }
        (addr, _) => addr,
    };
    let (tcp, steer_token) = match listen {
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)?;
            l.set_nonblocking(true)?;
            let token = match &cfg.steer_token {
                Some(t) => t.clone(),
                None => new_token()?,
            };
            (Some((l.local_addr()?, l)), Some(token))
        }
        None => (None, None),
    };
    let announcement = Announcement {
        pid,
        command_line: command_line.clone(),
        socket: socket.clone(),
        tcp: tcp.as_ref().map(|(a, _)| a.to_string()),
        started_unix_ns,
        gyr_version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let announced = discovery::announce(&dir, &announcement)?;
    let mut files = vec![socket.clone(), announced];
    if let Some(token) = &steer_token {
        // Only the program's user can read this file, from the moment it exists.
        let path = dir.join(format!("{pid}.token"));
        let _ = std::fs::remove_file(&path);
        discovery::write_private(&path, token.as_bytes())?;
        files.push(path);
    }
    let publisher = cfg.hub.clone().map(|hub| publish::Publisher {
        hub,
        token: cfg.hub_token.clone(),
        hello: gyr_proto::v1::PublishHello {
            pid,
            command_line: command_line.clone(),
            started_unix_ns,
            clock_zero_unix_ns: started_unix_ns,
            host: gyr_core::TraceHeader::for_this_process().host,
            steer_address: match &tcp {
                Some((a, _)) => a.to_string(),
                None => socket.display().to_string(),
            },
            steer_token: steer_token.clone().unwrap_or_default(),
            protocol_version: gyr_proto::PROTOCOL_VERSION,
        },
    });
    let publish_fanout = fanout.clone();
    let first = publisher
        .is_some()
        .then(|| publish::subscribe_at_start(&fanout));
    let ctx = Arc::new(ServiceContext {
        pid,
        command_line,
        started_unix_ns,
        counters,
        fanout,
    });
    let local = GyrService {
        ctx: ctx.clone(),
        access: Access::open(Server::Program),
    };
    let remote = steer_token.clone().map(|steer| GyrService {
        ctx,
        access: Access::tokens(Server::Program, steer, cfg.read_token.clone()),
    });
    let (tx, rx) = tokio::sync::watch::channel(false);
    let tcp_addr = tcp.as_ref().map(|(a, _)| *a);
    let limits = cfg.limits;
    let thread = std::thread::Builder::new()
        .name("gyr-server".into())
        .spawn(move || {
            block_sigpipe();
            // tonic and h2 log through `tracing`. Their events describe gyr's own traffic: they
            // must not reach a subscriber the program installed, where a layer recording into
            // gyr (gyr-tracing) would feed every batch sent back into the stream as new events.
            let _quiet = tracing::dispatcher::set_default(&tracing::Dispatch::none());
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    crate::diag!("gyr: the steering server cannot start: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let publishing = publisher.zip(first).map(|(p, first)| {
                    tokio::spawn(publish::run(p, publish_fanout, first, rx.clone()))
                });
                let mut stopping = rx.clone();
                let shutdown = async move {
                    let _ = stopping.wait_for(|s| *s).await;
                };
                // Clients still following a stream get GRACE to finish, then are cut off: the
                // program's exit never waits on a client.
                let mut stopping = rx;
                let deadline = async move {
                    let _ = stopping.wait_for(|s| *s).await;
                    tokio::time::sleep(GRACE).await;
                };
                let unix = match tokio::net::UnixListener::from_std(unix) {
                    Ok(l) => l,
                    Err(e) => {
                        crate::diag!("gyr: the steering server cannot listen: {e}");
                        return;
                    }
                };
                let health = gyr_proto::standard::Health::new().await;
                let stopped = health.clone();
                let shutdown = async move {
                    shutdown.await;
                    stopped.set(false).await;
                };
                let local_server = router(local, &health).serve_with_incoming_shutdown(
                    tokio_stream::StreamExt::map(
                        tokio_stream::wrappers::UnixListenerStream::new(unix),
                        |c| c.map(authority::AnyAuthority::new),
                    ),
                    shutdown,
                );
                let servers = async move {
                    match (tcp, remote) {
                        (Some((_, l)), Some(remote)) => {
                            let Ok(l) = tokio::net::TcpListener::from_std(l) else {
                                return;
                            };
                            // Anyone who can reach the port can connect: at most `limits`
                            // connections at once, closed unless a call with a token comes.
                            let incoming =
                                gyr_proto::listen::GuardedListener::new(l, limits).into_stream();
                            let remote_server =
                                router(remote, &health).serve_with_incoming(incoming);
                            tokio::select! {
                                r = local_server => report(r),
                                r = remote_server => report(r),
                            }
                        }
                        _ => report(local_server.await),
                    }
                };
                tokio::select! {
                    () = servers => {}
                    () = deadline => {}
                }
                // The hub gets the stream's last batches, within the same grace.
                if let Some(p) = publishing {
                    let _ = tokio::time::timeout(GRACE, p).await;
                }
            });
        })?;
    Ok(ServerHandle {
        shutdown: Some(tx),
        thread: Some(thread),
        files,
        socket: Some(socket),
        tcp: tcp_addr,
        steer_token,
    })
}

/// One listener's services: `gyr.v1.Gyr`, reflection (left out, and said once, should the
/// descriptor set not load) and health, each behind the listener's access rules.
fn router(
    svc: GyrService,
    health: &gyr_proto::standard::Health,
) -> tonic::transport::server::Router {
    let reflection = match gyr_proto::standard::reflection(svc.access.watch_gate()) {
        Ok(r) => Some(r),
        Err(e) => {
            crate::diag!("gyr: the steering server serves no reflection: {e}");
            None
        }
    };
    let (v1, v1alpha) = reflection.unzip();
    let health = health.service(svc.access.health_gate());
    tonic::transport::Server::builder()
        .add_service(service::server(svc))
        .add_optional_service(v1)
        .add_optional_service(v1alpha)
        .add_service(health)
}

fn report(r: Result<(), tonic::transport::Error>) {
    if let Err(e) = r {
        crate::diag!("gyr: the steering server stopped: {e}");
    }
}

impl ServerHandle {
    pub(crate) fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Blocks SIGPIPE on the calling thread, one of gyr's that write to sockets a peer may close at
/// any moment (a client ending its stream mid-batch, a hub going away). A C, C++ or Fortran
/// program keeps SIGPIPE's default action, which ends the process, so such a write would kill
/// the program gyr watches; blocked, the write fails with EPIPE instead, and the signal, which
/// is this thread's own, stays pending on a thread that never unblocks it. Threads these
/// threads start inherit the mask. (Rust programs ignore SIGPIPE from the start.)
fn block_sigpipe() {
    #[cfg(unix)]
    // SAFETY: sigemptyset and sigaddset fill a set on this stack; pthread_sigmask changes the
    // calling thread's mask only (one of gyr's own threads, at its start).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}
