//! gyr's benchmarks: each measures gyr against the physical floor and against peers in the same
//! run, and prints one JSON object with ratios as the last line of stdout.
//!
//! `cargo run --release -p gyr-bench -- sensors --json` (also `steering`, `hub`)

mod figures;
mod floor;
mod hub;
mod peers;
mod sensors;
mod steering;

use clap::{Parser, Subcommand};

/// gyr's benchmarks against peers and the physical floor.
#[derive(Debug, Parser)]
#[command(name = "gyr-bench", version, about)]
struct Args {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// The capture path: sensor cost, disabled cost, peers, two threads, monitor throughput,
    /// overhead on a compute kernel.
    Sensors {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// Shorter runs (for smoke tests); figures are noisier.
        #[arg(long)]
        quick: bool,
        /// Run only these parts (repeatable): floor, enabled, disabled, two-threads, tracing,
        /// puffin, throughput, overhead. The JSON then holds only their figures.
        #[arg(long, value_name = "PART")]
        only: Vec<sensors::Part>,
    },
    /// Steering: the closed loop sensor → rule → attribute, probes and actuation in process and
    /// over the embedded server, and the overhead on examples/nbody.
    Steering {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// Fewer operations (for smoke tests).
        #[arg(long)]
        quick: bool,
    },
    /// The hub: events/s from 8 simulated processes against the transport floor; latency from
    /// a sensor to a gRPC subscriber of the hub and to a WebSocket page.
    Hub {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// Shorter runs (for smoke tests).
        #[arg(long)]
        quick: bool,
    },
    /// Simulated processes publishing to a hub (started by `hub`).
    #[command(hide = true)]
    HubFeeder {
        #[arg(long)]
        addr: String,
        #[arg(long)]
        processes: usize,
        #[arg(long)]
        seconds: u64,
        /// Events/s per process (default: as fast as the hub takes them).
        #[arg(long)]
        rate: Option<f64>,
    },
    /// A gyr program stamping probe events, pushing to a hub (started by `hub`).
    #[command(hide = true)]
    HubProbe {
        #[arg(long)]
        hub: String,
        #[arg(long)]
        seconds: u64,
    },
    /// The child process of the nbody overhead figure (started by `steering`).
    #[command(hide = true)]
    NbodyChild {
        #[arg(long, default_value_t = 512)]
        bodies: usize,
        #[arg(long, default_value_t = 2)]
        workers: usize,
        #[arg(long)]
        steps: u64,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match args.bench {
        Bench::Sensors { json, quick, only } => sensors::run(json, quick, &only),
        Bench::Steering { json, quick } => steering::run(json, quick),
        Bench::Hub { json, quick } => hub::run(json, quick),
        Bench::HubFeeder {
            addr,
            processes,
            seconds,
            rate,
        } => hub::feeder(addr, processes, seconds, rate),
        Bench::HubProbe { hub, seconds } => hub::probe(hub, seconds),
        Bench::NbodyChild {
            bodies,
            workers,
            steps,
        } => steering::nbody_child(bodies, workers, steps),
    }
}
