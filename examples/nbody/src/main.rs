//! The steerable N-body example: `cargo run --release -p gyr-example-nbody`, then
//! `gyr ps`, `gyr ls PID`, `gyr set PID nbody.dt 0.0005`, `gyr call PID nbody.add_body ...`,
//! `gyr pause PID`, `gyr watch PID energy`.

use std::sync::atomic::Ordering;
use std::time::Duration;

fn main() {
    let mut bodies = 512usize;
    let mut workers = 2usize;
    let mut steps = 0u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => v,
                None => {
                    eprintln!("nbody: {name} needs a whole number");
                    std::process::exit(2);
                }
            }
        };
        match a.as_str() {
            "--bodies" => bodies = value("--bodies") as usize,
            "--workers" => workers = value("--workers") as usize,
            "--steps" => steps = value("--steps"),
            _ => {
                eprintln!(
                    "usage: nbody [--bodies N] [--workers N] [--steps N (0: run until stopped)]"
                );
                std::process::exit(2);
            }
        }
    }
    let rt = match gyr::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nbody: cannot start gyr: {e}");
            std::process::exit(1);
        }
    };
    let sim = match gyr_example_nbody::register(bodies) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nbody: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "nbody: pid {}, {bodies} bodies, {workers} workers; steer it with `gyr ls {}`",
        std::process::id(),
        std::process::id()
    );
    let stop = gyr_example_nbody::stop_flag();
    let s2 = stop.clone();
    let sim2 = sim.clone();
    let reporter = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(2));
            let s = sim2.read();
            println!(
                "step {:>8}  bodies {:>5}  dt {:.2e}  energy {:.6}",
                s.step, s.bodies, s.dt, s.energy
            );
        }
    });
    gyr_example_nbody::run(&sim, workers, steps, &stop);
    stop.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    let summary = rt.shutdown();
    println!(
        "nbody: done; {} events recorded, {} lost",
        summary.records, summary.lost
    );
}
