//! Accepting TCP connections for a server (a program's embedded server, the hub's gRPC API and
//! web UI) without letting anyone who can reach the port hold it: at most
//! [`Limits::max_connections`] connections at once (the ones past it are closed at once, and
//! counted), and a connection that has not made an accepted request within
//! [`Limits::auth_timeout`] is closed (it reads end of file, so the server drops it).
//!
//! A server marks a connection accepted through its [`Authenticated`], which tonic hands to
//! every request of the connection as an extension (it is the connection's
//! [`tonic::transport::server::Connected::ConnectInfo`]).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many TCP connections a listener serves at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// How long a connection may take to make an accepted request, by default.
pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// What a listener allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; the ones past it are closed at once.
    pub max_connections: usize,
    /// How long a connection may take to make an accepted request before it is closed.
    pub auth_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            auth_timeout: DEFAULT_AUTH_TIMEOUT,
        }
    }
}

/// What a listener refused, shared with whoever wants to report it.
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    refused: AtomicU64,
    timed_out: AtomicU64,
}

impl ConnectionCounts {
    /// Connections closed at once because the listener was full.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections closed because they made no accepted request in time.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }
}

/// A connection's mark: set once it has made a request the server accepts.
#[derive(Debug, Clone, Default)]
pub struct Authenticated(Arc<AtomicBool>);

impl Authenticated {
    /// The connection made an accepted request: it is no longer timed out.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether it has.
    pub fn is_marked(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A TCP listener enforcing [`Limits`]: [`GuardedListener::accept`] gives connections within
/// them, [`GuardedListener::into_stream`] a stream of them for tonic.
#[derive(Debug)]
pub struct GuardedListener {
    listener: TcpListener,
    permits: Arc<Semaphore>,
    limits: Limits,
    counts: Arc<ConnectionCounts>,
}

impl GuardedListener {
    /// Guards `listener` with `limits`.
    pub fn new(listener: TcpListener, limits: Limits) -> Self {
        GuardedListener {
            listener,
            permits: Arc::new(Semaphore::new(limits.max_connections)),
            limits,
            counts: Arc::default(),
        }
    }

    /// What this listener refused so far.
    pub fn counts(&self) -> Arc<ConnectionCounts> {
        self.counts.clone()
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next connection within the limit; connections past it are closed and counted.
    pub fn poll_accept(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(GuardedStream, SocketAddr)>> {
        loop {
            let (io, addr) = match self.listener.poll_accept(cx) {
                Poll::Ready(Ok(c)) => c,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    let _ = io.set_nodelay(true);
                    return Poll::Ready(Ok((
                        GuardedStream {
                            io,
                            _permit: permit,
                            authenticated: Authenticated::default(),
                            client: ClientName::default(),
                            deadline: Some(Box::pin(tokio::time::sleep(self.limits.auth_timeout))),
                            expired: false,
                            counts: self.counts.clone(),
                        },
                        addr,
                    )));
                }
                // Full: closed at once (dropping it), so that it holds nothing.
                Err(_) => {
                    self.counts.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// [`GuardedListener::poll_accept`] as a future.
    pub async fn accept(&self) -> io::Result<(GuardedStream, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// The connections as a stream, for `tonic`'s `serve_with_incoming`.
    pub fn into_stream(self) -> Incoming {
        Incoming(self)
    }
}

/// The connections of a [`GuardedListener`], as a stream.
#[derive(Debug)]
pub struct Incoming(GuardedListener);

impl tokio_stream::Stream for Incoming {
    type Item = io::Result<GuardedStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_accept(cx).map(|r| Some(r.map(|(io, _)| io)))
    }
}

/// One accepted connection: holds its place under the limit until dropped, and reads end of
/// file once its time to make an accepted request has run out.
#[derive(Debug)]
pub struct GuardedStream {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
    authenticated: Authenticated,
    client: ClientName,
    /// Until the connection is marked.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: bool,
    counts: Arc<ConnectionCounts>,
}

impl GuardedStream {
    /// The mark the server sets when the connection makes an accepted request.
    pub fn authenticated(&self) -> Authenticated {
        self.authenticated.clone()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.peer_addr()
    }

    /// Whether the connection ran out of time (polling the deadline registers the wake-up).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.expired {
            return true;
        }
        if self.authenticated.is_marked() {
            self.deadline = None;
        }
        if let Some(d) = &mut self.deadline
            && d.as_mut().poll(cx).is_ready()
        {
            self.deadline = None;
            self.expired = true;
            self.counts.timed_out.fetch_add(1, Ordering::Relaxed);
        }
        self.expired
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the connection made no accepted request in time",
    )
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.expired(cx) {
            // End of file: the server closes the connection.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.expired(cx) {
            return Poll::Ready(Err(timed_out()));
        }
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.expired(cx) {
            return Poll::Ready(Err(timed_out()));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// What tonic hands each request of a connection: its peer, its mark and its client's name.
#[derive(Debug, Clone, Default)]
pub struct ConnectionInfo {
    /// The peer's address.
    pub remote: Option<SocketAddr>,
    /// Set it when a request is accepted.
    pub authenticated: Authenticated,
    /// The name the client gave itself at its handshake.
    pub client: ClientName,
}

/// The name a client gave itself in `HandshakeRequest.client`, kept with its connection so
/// that the steering log names it on every later call of that connection.
#[derive(Debug, Clone, Default)]
pub struct ClientName(Arc<std::sync::Mutex<Option<String>>>);

impl ClientName {
    /// The longest name kept, in bytes; a longer one is cut on a character boundary.
    pub const MAX_LEN: usize = 64;

    /// Keeps `name`, without control characters and cut to [`Self::MAX_LEN`]; an empty name
    /// leaves the one kept before.
    pub fn set(&self, name: &str) {
        let mut kept = String::new();
        for c in name.chars().filter(|c| !c.is_control()) {
            if kept.len() + c.len_utf8() > Self::MAX_LEN {
                break;
            }
            kept.push(c);
        }
        let kept = kept.trim();
        if kept.is_empty() {
            return;
        }
        if let Ok(mut n) = self.0.lock() {
            *n = Some(kept.to_owned());
        }
    }

    /// The name kept, if the client gave one.
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok()?.clone()
    }
}

impl tonic::transport::server::Connected for GuardedStream {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo {
            remote: self.io.peer_addr().ok(),
            authenticated: self.authenticated.clone(),
            client: self.client.clone(),
        }
    }
}

/// Marks the connection a request came on as authenticated (no-op off a guarded listener).
pub fn mark<T>(req: &tonic::Request<T>) {
    if let Some(i) = req.extensions().get::<ConnectionInfo>() {
        i.authenticated.mark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Reads until end of file (or a reset), with a generous bound.
    async fn closed(s: &mut TcpStream) -> bool {
        let mut b = [0u8; 64];
        matches!(
            tokio::time::timeout(Duration::from_secs(60), s.read(&mut b)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[test]
    fn connections_past_the_limit_are_closed_and_counted() {
        rt().block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let g = GuardedListener::new(
                l,
                Limits {
                    max_connections: 2,
                    auth_timeout: Duration::from_secs(600),
                },
            );
            let mut clients = Vec::new();
            for _ in 0..2 {
                clients.push(TcpStream::connect(addr).await.unwrap());
            }
            let kept = [g.accept().await.unwrap().0, g.accept().await.unwrap().0];
            // Full: the next one is closed as soon as it is accepted.
            let mut extra = TcpStream::connect(addr).await.unwrap();
            tokio::select! {
                _ = g.accept() => panic!("a connection past the limit was served"),
                c = closed(&mut extra) => assert!(c, "the connection past the limit stays open"),
            }
            assert_eq!(g.counts().refused(), 1);
            // A place is free again: the next connection is served.
            drop(kept);
            let mut next = TcpStream::connect(addr).await.unwrap();
            let (mut s, _) = g.accept().await.unwrap();
            s.write_all(b"hi").await.unwrap();
            let mut b = [0u8; 2];
            next.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"hi");
        });
    }

    #[test]
    fn a_connection_not_marked_in_time_is_closed_and_a_marked_one_stays() {
        rt().block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let g = GuardedListener::new(
                l,
                Limits {
                    max_connections: 8,
                    auth_timeout: Duration::from_millis(200),
                },
            );
            let mut idle = TcpStream::connect(addr).await.unwrap();
            let mut good = TcpStream::connect(addr).await.unwrap();
            let (mut idle_server, _) = g.accept().await.unwrap();
            let (mut good_server, _) = g.accept().await.unwrap();
            good_server.authenticated().mark();
            // The server side reads end of file once the time is up, and drops the connection.
            let mut b = [0u8; 8];
            assert_eq!(idle_server.read(&mut b).await.unwrap(), 0);
            drop(idle_server);
            assert!(closed(&mut idle).await);
            assert_eq!(g.counts().timed_out(), 1);
            // The marked one still carries data both ways, after the same time.
            good.write_all(b"ping").await.unwrap();
            good_server.read_exact(&mut b[..4]).await.unwrap();
            good_server.write_all(b"pong").await.unwrap();
            good.read_exact(&mut b[..4]).await.unwrap();
            assert_eq!(&b[..4], b"pong");
            assert_eq!(g.counts().timed_out(), 1);
        });
    }
}
