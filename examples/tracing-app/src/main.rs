//! The tracing example: `GYR_TRACE=t.gyr cargo run --release -p gyr-example-tracing` writes a
//! trace; with `GYR_HUB=127.0.0.1:7071` it shows in the hub. The only gyr code is here: the
//! runtime started from the environment and one more layer in the subscriber.

use std::time::Duration;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const USAGE: &str = "usage: tracing-app [--steps N] [--domains N] [--points N] [--pause-ms MS]";

fn main() {
    let mut cfg = gyr_example_tracing::Config::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => v,
                None => {
                    eprintln!("tracing-app: {name} needs a whole number\n{USAGE}");
                    std::process::exit(2);
                }
            }
        };
        match a.as_str() {
            "--steps" => cfg.steps = value("--steps"),
            "--domains" => cfg.domains = value("--domains").clamp(1, 64) as usize,
            "--points" => cfg.points = value("--points").clamp(2, 1 << 26) as usize,
            "--pause-ms" => cfg.step_pause = Duration::from_millis(value("--pause-ms")),
            _ => {
                eprintln!("tracing-app: unknown argument `{a}`\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    // Monitoring is optional: without a runtime the layer records nothing, cheaply.
    let rt = match gyr::init() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("tracing-app: monitoring is off: {e}");
            None
        }
    };
    // The program's usual subscriber (log lines of INFO and above on stderr), plus gyr's
    // layer, which sees every level: the fmt layer's filter is its own.
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(LevelFilter::INFO),
        )
        .with(gyr_tracing::GyrLayer::new())
        .init();
    let out = gyr_example_tracing::run(&cfg);
    println!("{} sweeps, residual {:.3e}", out.steps, out.residual);
    if let Some(rt) = rt {
        let s = rt.shutdown();
        println!("gyr: {} records, {} lost", s.records, s.lost);
    }
}
