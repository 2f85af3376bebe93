//! The steerable molecular dynamics example: `cargo run --release -p gyr-example-md`, then
//! `gyr ls PID`, `gyr set PID md.auto_balance true` (the in-process policy balances the
//! domains), `gyr call PID md.balance`, `gyr set PID md.boundaries [40,60,80]`,
//! `gyr watch PID step_time`. `--headless` runs the demo without steering from outside: half
//! the steps imbalanced, half with `auto_balance` on, and prints the mean step times.

use std::io::BufRead;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: gyr-example-md [--particles N] [--domains D] [--steps N (0: run until Enter is pressed)] [--headless]";

fn main() {
    let mut particles = gyr_example_md::DEFAULT_PARTICLES;
    let mut domains = gyr_example_md::DEFAULT_DOMAINS;
    let mut steps = 0u64;
    let mut headless = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => v,
                None => {
                    eprintln!("md: {name} needs a whole number\n{USAGE}");
                    std::process::exit(2);
                }
            }
        };
        match a.as_str() {
            "--particles" => particles = value("--particles") as usize,
            "--domains" => domains = value("--domains") as usize,
            "--steps" => steps = value("--steps"),
            "--headless" => headless = true,
            _ => {
                eprintln!("{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let config = gyr_example_md::Config::new(particles, domains);
    if headless {
        run_headless(&config, if steps == 0 { 400 } else { steps });
        return;
    }
    let sim = match gyr_example_md::register(&config) {
        Ok(s) => s,
        Err(gyr_example_md::RegisterError::Config(m)) => {
            eprintln!("md: {m}\n{USAGE}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("md: {e}");
            std::process::exit(1);
        }
    };
    let rt = match gyr::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("md: cannot start gyr: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = gyr_example_md::install_policy() {
        eprintln!("md: cannot install the balancing policy: {e}");
        std::process::exit(1);
    }
    let pid = std::process::id();
    println!(
        "md: pid {pid}, {particles} particles in a {:.0} x {:.0} box, {domains} domains",
        config.width, config.height
    );
    println!(
        "md: steer it with `gyr ls {pid}`, `gyr set {pid} md.auto_balance true`, `gyr call {pid} md.balance`"
    );
    if steps == 0 {
        println!("md: press Enter to stop");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Enter stops the run; end of input (say, stdin from /dev/null) does not.
    let s2 = stop.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        if let Ok(n) = std::io::stdin().lock().read_line(&mut line)
            && n > 0
        {
            s2.store(true, Ordering::Relaxed);
        }
    });
    let (s3, sim2) = (stop.clone(), sim.clone());
    let reporter = std::thread::spawn(move || {
        let mut next = Instant::now() + Duration::from_secs(2);
        while !s3.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            if Instant::now() < next {
                continue;
            }
            next += Duration::from_secs(2);
            let s = sim2.read();
            let b: Vec<String> = s.boundaries.iter().map(|b| format!("{b:.1}")).collect();
            println!(
                "step {:>7}  step_ms {:>7.2}  imbalance {:.2}  boundaries [{}]{}",
                s.step,
                s.step_ms,
                s.imbalance,
                b.join(", "),
                if s.auto_balance { "  (auto)" } else { "" }
            );
        }
    });
    gyr_example_md::run(&sim, steps, &stop);
    stop.store(true, Ordering::Relaxed);
    let _ = reporter.join();
    let (step, step_ms) = {
        let s = sim.read();
        (s.step, s.step_ms)
    };
    let summary = rt.shutdown();
    println!(
        "md: done after {step} steps (last step_ms {step_ms:.2}); {} events recorded, {} lost",
        summary.records, summary.lost
    );
}

/// `--headless`: the demo's measurement, printed.
fn run_headless(config: &gyr_example_md::Config, steps: u64) {
    let before = steps / 2;
    println!(
        "md: {} particles, {} domains: {before} steps imbalanced, then auto_balance on for {}",
        config.particles,
        config.domains,
        steps - before
    );
    match gyr_example_md::run_headless(config, before, steps - before) {
        Ok(r) => println!(
            "md: step_ms {:.2} imbalanced (imbalance {:.2}), {:.2} balanced from step {} (imbalance {:.2}): {:.0}% less",
            r.step_ms_before,
            r.imbalance_before,
            r.step_ms_after,
            r.balanced_at,
            r.imbalance_after,
            100.0 * (1.0 - r.step_ms_after / r.step_ms_before)
        ),
        Err(gyr_example_md::HeadlessError::Register(gyr_example_md::RegisterError::Config(m))) => {
            eprintln!("md: {m}\n{USAGE}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("md: {e}");
            std::process::exit(1);
        }
    }
}
