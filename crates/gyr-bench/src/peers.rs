//! The peers, capturing the same event as their users set them up:
//! - `tracing`: `info!` with the eight fields, into a global `registry()` installed with
//!   `set_global_default`, with a layer that stamps each event and records its fields into the
//!   floor's per-thread rings (so that the peer pays for storage as the floor does);
//! - Tracy: a zone (`span!`) per event, with a server connected that reads the stream (here a
//!   thread of the same process that does Tracy's handshake and discards what follows);
//! - puffin: a scope carrying 64 bytes of data, with the profiler on.

use crate::floor;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// A `tracing` layer that stamps each event and records its fields: the least a `tracing`
/// user who keeps events has to do.
pub(crate) struct CaptureLayer {
    clock: quanta::Clock,
}

struct Fields {
    values: [u64; 8],
    n: usize,
}

impl Fields {
    #[inline(always)]
    fn put(&mut self, v: u64) {
        if self.n < 8 {
            self.values[self.n] = v;
            self.n += 1;
        }
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, _field: &Field, value: u64) {
        self.put(value)
    }
    fn record_f64(&mut self, _field: &Field, value: f64) {
        self.put(value.to_bits())
    }
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut f = Fields {
            values: [0; 8],
            n: 0,
        };
        event.record(&mut f);
        floor::record(floor::Layout::Physical, &self.clock, &f.values);
    }
}

/// Installs the capturing layer in a global registry, as a program does once at start-up.
pub(crate) fn install_tracing(clock: quanta::Clock) -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(CaptureLayer { clock });
    tracing::subscriber::set_global_default(subscriber)?;
    Ok(())
}

/// One `tracing` event with the benchmark's eight fields (4 `u64`, 4 `f64`).
#[inline(always)]
pub(crate) fn tracing_fields(a: [u64; 4], e: [f64; 4]) {
    tracing::info!(
        a = a[0],
        b = a[1],
        c = a[2],
        d = a[3],
        e = e[0],
        f = e[1],
        g = e[2],
        h = e[3]
    );
}

/// The 64 bytes a puffin scope carries as its data string.
pub(crate) const PUFFIN_DATA: &str =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// One puffin scope (a begin and an end record) carrying 64 bytes of data.
#[inline(always)]
pub(crate) fn puffin_scope() {
    puffin::profile_scope!("bench_event", PUFFIN_DATA);
}

/// The Tracy peer, built with the `tracy` feature (on by default).
#[cfg(feature = "tracy")]
pub(crate) mod tracy {
    use anyhow::Context as _;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// The protocol of the Tracy client this crate links (tracy-client-sys 0.29: Tracy 0.13).
    const PROTOCOL_VERSION: u32 = 82;
    /// `HandshakeWelcome` in Tracy's `TracyProtocol.hpp`.
    const WELCOME: u8 = 1;
    /// The packed `WelcomeMessage` that follows the handshake status.
    const WELCOME_LEN: usize = 8 * 8 + 1 + 1 + 12 + 4 + 64 + 1024;

    /// Starts the Tracy client (listening on `TRACY_PORT`, which the parent picks) and connects
    /// a server to it that reads and discards the stream; returns once the client has welcomed
    /// the server, with the server's end of the connection. Shut that down before the process
    /// exits: Tracy's client waits at exit for its server to hang up.
    pub(crate) fn start_with_server(
        port: u16,
    ) -> anyhow::Result<(tracy_client::Client, TcpStream)> {
        let client = tracy_client::Client::start();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sock = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("connecting to the Tracy client on 127.0.0.1:{port}")
                    });
                }
            }
        };
        sock.write_all(b"TracyPrf")?;
        sock.write_all(&PROTOCOL_VERSION.to_le_bytes())?;
        let mut status = [0u8; 1];
        sock.read_exact(&mut status)?;
        anyhow::ensure!(
            status[0] == WELCOME,
            "the Tracy client refused the handshake (status {}): its protocol is not {PROTOCOL_VERSION}",
            status[0]
        );
        let mut welcome = vec![0u8; WELCOME_LEN];
        sock.read_exact(&mut welcome)?;
        let hang_up = sock.try_clone()?;
        std::thread::Builder::new()
            .name("tracy-server".into())
            .spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                while matches!(sock.read(&mut buf), Ok(n) if n > 0) {}
            })?;
        Ok((client, hang_up))
    }

    /// One Tracy zone (begin and end), as `span!` records it.
    #[inline(always)]
    pub(crate) fn zone() {
        let _z = tracy_client::span!("bench_event");
    }
}
