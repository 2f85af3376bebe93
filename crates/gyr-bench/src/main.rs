#![doc = include_str!("../README.md")]
//!
//! `cargo run --release -p gyr-bench -- sensors --json` (also `steering`, `hub`, `rules`, `soak`)

mod callgrind;
mod capture;
mod contention;
mod ffi;
mod ffi_native;
mod ffi_python;
mod figures;
mod floor;
mod hub;
mod ordering;
mod peers;
mod python_read;
mod rules;
mod sensors;
mod sim;
mod soak;
mod steering;
mod web;

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
        /// tracy, puffin, instructions, throughput, overhead. The JSON then holds only their
        /// figures.
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
    /// Ways into gyr from code not written for its sensors: `tracing` through gyr-tracing's
    /// layer against tracing's own file capture, tracing's dispatch alone and gyr's typed
    /// sensor; events and spans.
    Ffi {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// Fewer, shorter rounds (for smoke tests); figures are noisier.
        #[arg(long)]
        quick: bool,
        /// Run only these parts (repeatable): tracing (the `tracing` cases and gyr's typed
        /// sensor), native (C and Fortran sensors), read (the Python trace reader), python
        /// (Python sensors). The JSON then holds only their figures.
        #[arg(long, value_name = "PART")]
        only: Vec<ffi::Part>,
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
    /// The expert system and the watch-dog: events/s through 50 rules against plain Rust and
    /// against rhai alone; lines/s the watch-dog parses from a growing file against
    /// `read_line`; latency from a line written to the alert a hub's gRPC client sees.
    Rules {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// Shorter runs, 20 latency samples (for smoke tests).
        #[arg(long)]
        quick: bool,
    },
    /// The watch-dog of the alert latency (started by `rules`): what `gyr watchdog --spec SPEC
    /// --hub HUB --files FILE --quiet` runs.
    #[command(hide = true)]
    RulesWatchdog {
        #[arg(long)]
        spec: std::path::PathBuf,
        #[arg(long)]
        hub: String,
        #[arg(long)]
        file: String,
    },
    /// The web page under load: a hub fed by a program with 1000 threads and 200 series,
    /// watched by the real page in headless Chromium; time per frame and bytes per second.
    /// Then the life-time view of 2000 threads and 100 M thread events under a scripted user
    /// zooming and panning: time per tile drawn, round trip and bytes per tile.
    Web {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// A shorter run (for smoke tests).
        #[arg(long)]
        quick: bool,
    },
    /// Falcon's on-line ordering filter on a synthetic 64-thread lock-heavy stream; the
    /// life-time view's tiles, the exports and the pthread interposer.
    Ordering {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// A shorter run (for smoke tests).
        #[arg(long)]
        quick: bool,
        /// Run only these parts (repeatable): filter, timeline, exports, interposer. The JSON
        /// then holds only their figures.
        #[arg(long, value_name = "PART")]
        only: Vec<ordering::Part>,
    },
    /// Trace-driven prediction: the replay's speed, the MPI interposer's cost per call, and
    /// predictions of examples/mpi against measured runs (same network, and shared memory to
    /// TCP).
    Sim {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// A shorter run (for smoke tests).
        #[arg(long)]
        quick: bool,
        /// Run only these parts (repeatable): replay, interposer, validation. The JSON then
        /// holds only their figures.
        #[arg(long, value_name = "PART")]
        only: Vec<sim::Part>,
    },
    /// A soak: a program at 1 M events/s through the hub to a subscriber and a recording,
    /// watching losses, memory and descriptors of the program and the hub.
    Soak {
        /// End with one JSON object on the last line of stdout.
        #[arg(long)]
        json: bool,
        /// How long to run, in minutes.
        #[arg(long, default_value_t = 5)]
        minutes: u64,
        /// How long to run, in seconds (overrides --minutes; for smoke runs).
        #[arg(long)]
        seconds: Option<u64>,
    },
    /// The hub of the soak (started by `soak`).
    #[command(hide = true)]
    SoakHub {
        #[arg(long)]
        record: std::path::PathBuf,
    },
    /// The program of the soak (started by `soak`).
    #[command(hide = true)]
    SoakProgram {
        #[arg(long)]
        hub: String,
        #[arg(long)]
        seconds: u64,
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
    /// One capture measurement in a process of its own (started by `sensors`).
    #[command(hide = true)]
    CaptureChild(capture::Spec),
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
        Bench::CaptureChild(spec) => capture::child(spec),
        Bench::Steering { json, quick } => steering::run(json, quick),
        Bench::Ffi { json, quick, only } => ffi::run(json, quick, &only),
        Bench::Hub { json, quick } => hub::run(json, quick),
        Bench::Web { json, quick } => web::run(json, quick),
        Bench::Rules { json, quick } => rules::run(json, quick),
        Bench::RulesWatchdog { spec, hub, file } => rules::watchdog_child(spec, hub, file),
        Bench::Ordering { json, quick, only } => ordering::run(json, quick, &only),
        Bench::Sim { json, quick, only } => sim::run(json, quick, &only),
        Bench::HubFeeder {
            addr,
            processes,
            seconds,
            rate,
        } => hub::feeder(addr, processes, seconds, rate),
        Bench::HubProbe { hub, seconds } => hub::probe(hub, seconds),
        Bench::Soak {
            json,
            minutes,
            seconds,
        } => soak::run(json, seconds.unwrap_or(minutes * 60)),
        Bench::SoakHub { record } => soak::hub(record),
        Bench::SoakProgram { hub, seconds } => soak::program(hub, seconds),
        Bench::NbodyChild {
            bodies,
            workers,
            steps,
        } => steering::nbody_child(bodies, workers, steps),
    }
}
