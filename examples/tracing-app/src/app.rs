//! The program around the solver: arguments, the gyr runtime started from the environment
//! (`GYR_TRACE`, `GYR_HUB`, ...) and the subscriber with one more layer, gyr's. This is the
//! only code of the example that names gyr.

use std::time::Duration;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const USAGE: &str = "usage: tracing-app [--steps N] [--domains N] [--points N] [--pause-ms MS]";

/// Runs the example with `args` (without the program name); returns its exit status.
pub fn main(args: &[String]) -> i32 {
    let mut cfg = crate::Config::default();
    let mut args = args.iter();
    while let Some(a) = args.next() {
        if !["--steps", "--domains", "--points", "--pause-ms"].contains(&a.as_str()) {
            eprintln!("tracing-app: unknown argument `{a}`\n{USAGE}");
            return 2;
        }
        let Some(value) = args.next().and_then(|v| v.parse::<u64>().ok()) else {
            eprintln!("tracing-app: {a} needs a whole number\n{USAGE}");
            return 2;
        };
        match a.as_str() {
            "--steps" => cfg.steps = value,
            "--domains" => cfg.domains = value.clamp(1, 64) as usize,
            "--points" => cfg.points = value.clamp(2, 1 << 26) as usize,
            _ => cfg.step_pause = Duration::from_millis(value),
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
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(LevelFilter::INFO),
        )
        .with(gyr_tracing::GyrLayer::new());
    if let Err(e) = subscriber.try_init() {
        eprintln!("tracing-app: cannot install the subscriber: {e}");
        return 1;
    }
    let out = crate::run(&cfg);
    println!("{} sweeps, residual {:.3e}", out.steps, out.residual);
    if let Some(rt) = rt {
        let s = rt.shutdown();
        println!("gyr: {} records, {} lost", s.records, s.lost);
    }
    0
}
