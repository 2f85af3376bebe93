//! One capture measurement, in a child process of its own (`gyr-bench capture-child`): one peer,
//! one event shape, one or two producers, several timed runs. The peers' state is global
//! (`tracing`'s default subscriber, Tracy's client, gyr's runtime), so each gets a clean process.
//!
//! Every peer's consumer drains concurrently while the producers are timed: gyr's own local
//! monitors, the floor's consumer thread, Tracy's worker and server. A run emits far more than a
//! ring holds, so the draining competes with the producers as it does in a program. Between runs
//! (untimed) the consumers catch up.

use crate::floor;
use crate::peers;
use gyr::{Builder, Policy, Sensor, Sink};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Who captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Peer {
    /// Timestamp and payload into cache-aligned SPSC slots.
    Floor,
    /// The floor plus gyr's 32-byte record header.
    FloorHeader,
    /// A gyr sensor, the runtime's monitors draining into a sink that discards.
    Gyr,
    /// `tracing::info!` into a global registry with a capturing layer.
    Tracing,
    /// A Tracy zone, a server reading the stream.
    Tracy,
    /// A puffin scope with 64 bytes of data, the profiler on.
    Puffin,
}

/// What an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Shape {
    /// Eight separate fields, 4 `u64` and 4 `f64` (64 bytes).
    Fields,
    /// One `[u64; 8]` (64 bytes).
    Array,
    /// One `[u64; 4]` (32 bytes).
    Array32,
    /// One `[u64; 16]` (128 bytes).
    Array128,
}

/// The measurement a child makes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Spec {
    #[arg(long, value_enum)]
    pub(crate) peer: Peer,
    #[arg(long, value_enum, default_value = "fields")]
    pub(crate) shape: Shape,
    /// Producer threads (1 or 2).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// Events per thread per run.
    #[arg(long)]
    pub(crate) events: u64,
    /// Timed runs (after one untimed warm-up run, unless `--no-warmup`).
    #[arg(long, default_value_t = 5)]
    pub(crate) runs: usize,
    #[arg(long)]
    pub(crate) no_warmup: bool,
    /// gyr's ring capacity in bytes.
    #[arg(long, default_value_t = 32 << 20)]
    pub(crate) ring: usize,
    /// The port the Tracy client listens on.
    #[arg(long, default_value_t = 0)]
    pub(crate) tracy_port: u16,
}

#[derive(Sensor)]
#[sensor(name = "bench.fields")]
struct BenchFields {
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: f64,
    f: f64,
    g: f64,
    h: f64,
}

#[derive(Sensor)]
#[sensor(name = "bench.p64")]
struct P64 {
    a: [u64; 8],
}

#[derive(Sensor)]
#[sensor(name = "bench.p32")]
struct P32 {
    a: [u64; 4],
}

#[derive(Sensor)]
#[sensor(name = "bench.p128")]
struct P128 {
    a: [u64; 16],
}

/// A sink that discards: the monitors drain and deliver, nothing is stored.
#[derive(Debug)]
pub(crate) struct NullSink;
impl Sink for NullSink {}

/// The event's values for index `i`: four integers and four floats, opaque to the optimiser.
#[inline(always)]
fn values(i: u64) -> ([u64; 4], [f64; 4]) {
    let i = black_box(i);
    // Through `i64`: one instruction, where `u64` to `f64` takes a dozen without AVX-512.
    let x = i as i64 as f64;
    ([i; 4], [x; 4])
}

#[inline(always)]
fn words(i: u64) -> [u64; 8] {
    let (a, e) = values(i);
    [
        a[0],
        a[1],
        a[2],
        a[3],
        e[0].to_bits(),
        e[1].to_bits(),
        e[2].to_bits(),
        e[3].to_bits(),
    ]
}

/// Emits events `base..base + n` with `emit`; returns ns per event. Never inlined: instruction
/// counts are taken inside it (see `callgrind`).
#[inline(never)]
fn timed_loop(base: u64, n: u64, mut emit: impl FnMut(u64)) -> f64 {
    let t = Instant::now();
    for i in base..base + n {
        emit(i);
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Times one run of `n` events from `base` through the peer and shape of `spec`, on this
/// thread; ns per event. The choice of peer is made once, outside the loop.
fn run_once(spec: &Spec, clock: &quanta::Clock, base: u64) -> f64 {
    let n = spec.events;
    match (spec.peer, spec.shape) {
        (Peer::Floor, _) => timed_loop(base, n, |i| {
            floor::record(floor::Layout::Physical, clock, &words(i))
        }),
        (Peer::FloorHeader, _) => timed_loop(base, n, |i| {
            floor::record(floor::Layout::Header, clock, &words(i))
        }),
        (Peer::Gyr, Shape::Fields) => timed_loop(base, n, |i| {
            let (a, e) = values(i);
            gyr::emit!(BenchFields {
                a: a[0],
                b: a[1],
                c: a[2],
                d: a[3],
                e: e[0],
                f: e[1],
                g: e[2],
                h: e[3],
            })
        }),
        (Peer::Gyr, Shape::Array) => timed_loop(base, n, |i| gyr::emit!(P64 { a: words(i) })),
        (Peer::Gyr, Shape::Array32) => timed_loop(base, n, |i| {
            let w = words(i);
            gyr::emit!(P32 {
                a: [w[0], w[1], w[2], w[3]]
            })
        }),
        (Peer::Gyr, Shape::Array128) => timed_loop(base, n, |i| {
            let w = words(i);
            let mut a = [0u64; 16];
            a[..8].copy_from_slice(&w);
            a[8..].copy_from_slice(&w);
            gyr::emit!(P128 { a })
        }),
        (Peer::Tracing, _) => timed_loop(base, n, |i| {
            let (a, e) = values(i);
            peers::tracing_fields(a, e)
        }),
        #[cfg(feature = "tracy")]
        (Peer::Tracy, _) => timed_loop(base, n, |i| {
            black_box(i);
            peers::tracy::zone()
        }),
        #[cfg(not(feature = "tracy"))]
        (Peer::Tracy, _) => unreachable!("refused in `Running::start`"),
        (Peer::Puffin, _) => timed_loop(base, n, |i| {
            black_box(i);
            peers::puffin_scope()
        }),
    }
}

/// What the peer keeps alive while it is measured, and how to let its consumer catch up.
enum Running {
    Gyr(gyr::Runtime),
    Floor(#[allow(dead_code)] floor::Consumer),
    #[cfg(feature = "tracy")]
    Tracy(
        #[allow(dead_code)] tracy_client::Client,
        std::net::TcpStream,
    ),
    Puffin,
}

impl Running {
    fn start(spec: &Spec, clock: &quanta::Clock) -> anyhow::Result<Self> {
        floor::set_ring_bytes(spec.ring);
        Ok(match spec.peer {
            Peer::Gyr => Running::Gyr(
                Builder::new()
                    .policy(Policy::Block)
                    .ring_capacity(spec.ring)
                    .sink(NullSink)
                    .start()?,
            ),
            Peer::Floor | Peer::FloorHeader => Running::Floor(floor::Consumer::start()),
            Peer::Tracing => {
                peers::install_tracing(clock.clone())?;
                Running::Floor(floor::Consumer::start())
            }
            #[cfg(feature = "tracy")]
            Peer::Tracy => {
                let (client, server) = peers::tracy::start_with_server(spec.tracy_port)?;
                Running::Tracy(client, server)
            }
            #[cfg(not(feature = "tracy"))]
            Peer::Tracy => anyhow::bail!(
                "this gyr-bench was built without the `tracy` feature; build it with default features"
            ),
            Peer::Puffin => {
                puffin::set_scopes_on(true);
                Running::Puffin
            }
        })
    }

    /// Untimed, between runs: lets the consumer empty what the last run left.
    fn settle(&self) {
        match self {
            Running::Gyr(rt) => {
                rt.flush();
            }
            Running::Floor(_) => {
                while !floor::drained() {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            #[cfg(feature = "tracy")]
            Running::Tracy(..) => std::thread::sleep(Duration::from_millis(300)),
            Running::Puffin => puffin::GlobalProfiler::lock().new_frame(),
        }
    }

    /// Events the peer lost (only gyr can say).
    fn finish(self) -> u64 {
        match self {
            Running::Gyr(rt) => rt.shutdown().lost,
            #[cfg(feature = "tracy")]
            Running::Tracy(_, server) => {
                let _ = server.shutdown(std::net::Shutdown::Both);
                0
            }
            _ => 0,
        }
    }
}

/// Runs the measurement `spec` and prints its result as one JSON line:
/// `{"ns": [ns per event of each run], "lost": n}`.
pub(crate) fn child(spec: Spec) -> anyhow::Result<()> {
    anyhow::ensure!(
        spec.threads == 1 || spec.threads == 2,
        "--threads must be 1 or 2, not {}",
        spec.threads
    );
    let clock = quanta::Clock::new();
    let running = Running::start(&spec, &clock)?;
    let warmup = usize::from(!spec.no_warmup);
    let mut ns = Vec::with_capacity(spec.runs);
    if spec.threads == 1 {
        // On the main thread: instruction counts are read from thread 1.
        for r in 0..warmup + spec.runs {
            running.settle();
            let base = r as u64 * spec.events;
            let v = run_once(&spec, &clock, base);
            if r >= warmup {
                ns.push(v);
            }
        }
    } else {
        let start = Arc::new(Barrier::new(3));
        let end = Arc::new(Barrier::new(3));
        let (tx, rx) = std::sync::mpsc::channel::<(usize, f64)>();
        let total = warmup + spec.runs;
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (start, end, tx, clock, spec) = (
                    start.clone(),
                    end.clone(),
                    tx.clone(),
                    clock.clone(),
                    spec.clone(),
                );
                std::thread::spawn(move || {
                    for r in 0..total {
                        start.wait();
                        let base = r as u64 * spec.events;
                        let v = run_once(&spec, &clock, base);
                        let _ = tx.send((r, v));
                        end.wait();
                    }
                })
            })
            .collect();
        drop(tx);
        for _ in 0..total {
            running.settle();
            start.wait();
            end.wait();
        }
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a producer thread panicked"))?;
        }
        let mut by_run = vec![Vec::new(); total];
        for (r, v) in rx {
            by_run[r].push(v);
        }
        ns.extend(
            by_run[warmup..]
                .iter()
                .map(|v| v.iter().sum::<f64>() / v.len() as f64),
        );
    }
    let lost = running.finish();
    println!("{}", serde_json::json!({ "ns": ns, "lost": lost }));
    Ok(())
}
