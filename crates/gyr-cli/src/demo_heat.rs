//! `gyr demo heat`: the heat-diffusion example, monitored live in the terminal.
//!
//! The solver runs on its domain threads; gyr's local monitor drains their sensors into the
//! trace file and into a callback sink that keeps the live summary this command prints.

use crate::Failure;
use anyhow::Context;
use clap::Args;
use gyr::gyr_core::value::decode;
use gyr::gyr_core::{Schema, Value};
use gyr::{Batch, Builder, CallbackSink};
use gyr_example_heat::{Config, Progress};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Arguments of `gyr demo heat`.
#[derive(Debug, Args)]
pub(crate) struct HeatArgs {
    /// Cells per side of the plate.
    #[arg(long, default_value_t = 512)]
    size: usize,
    /// Domains (threads) the plate is split into.
    #[arg(long, default_value_t = 4)]
    domains: usize,
    /// Most solver steps.
    #[arg(long, default_value_t = 20_000)]
    steps: u64,
    /// Where to write the trace.
    #[arg(long, default_value = "gyr-demo.gyr")]
    trace: PathBuf,
    /// Trace every row sweep (by default one in 4, set through sensor control, keeps the
    /// trace near 300 MB).
    #[arg(long)]
    all_rows: bool,
}

#[derive(Default)]
struct Live {
    schemas: HashMap<u32, Schema>,
    records: u64,
    lost: u64,
    /// Compute seconds per domain since the last display.
    work: Vec<f64>,
    /// Halo-wait seconds per domain since the last display.
    wait: Vec<f64>,
}

impl Live {
    fn absorb(&mut self, batch: &Batch) {
        for s in batch.schemas() {
            self.schemas.insert(s.id, s.clone());
        }
        for r in batch.records() {
            self.records += 1;
            let Some(s) = self.schemas.get(&r.header.type_id) else {
                continue;
            };
            let field = |v: &[Value], i: usize| v.get(i).and_then(Value::as_f64).unwrap_or(0.0);
            match s.name.as_str() {
                "work_load" | "halo_wait" => {
                    let Ok(v) = decode(s, r.payload) else {
                        continue;
                    };
                    let d = field(&v, 0) as usize;
                    let secs = field(&v, if s.name == "work_load" { 3 } else { 2 });
                    let slot = if s.name == "work_load" {
                        &mut self.work
                    } else {
                        &mut self.wait
                    };
                    if slot.len() <= d {
                        slot.resize(d + 1, 0.0);
                    }
                    slot[d] += secs;
                }
                "gyr.lost" => {
                    if let Ok(v) = decode(s, r.payload) {
                        self.lost += field(&v, 1) as u64;
                    }
                }
                _ => {}
            }
        }
    }
}

fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(filled), "·".repeat(width - filled))
}

pub(crate) fn run(args: HeatArgs) -> Result<ExitCode, Failure> {
    if args.size < 16 || args.domains == 0 || args.domains > args.size / 4 {
        return Err(Failure::input(anyhow::anyhow!(
            "--size {} with --domains {}: give a plate of at least 16 cells and at most one domain per 4 rows",
            args.size,
            args.domains
        )));
    }
    let live = Arc::new(Mutex::new(Live::default()));
    let l2 = live.clone();
    let sink =
        CallbackSink::new(move |b: &Batch| l2.lock().unwrap_or_else(|e| e.into_inner()).absorb(b));
    let rt = Builder::new()
        .with_default_env()
        .trace_file(&args.trace)
        .sink(sink)
        .start()
        .map_err(|e| Failure::input(anyhow::Error::from(e).context("cannot start gyr")))?;
    if !args.all_rows {
        gyr::control::set_rate(
            &gyr::control::Target::Type("row_sweep".into()),
            gyr::control::Rate::EveryNth(4),
        )
        .map_err(|e| Failure::from(anyhow::Error::from(e)))?;
    }
    let config = Config {
        size: args.size,
        domains: args.domains,
        steps: args.steps,
        ..Config::default()
    };
    let progress = Arc::new(Progress::default());
    let p2 = progress.clone();
    let c2 = config.clone();
    let solver = std::thread::Builder::new()
        .name("solver".into())
        .spawn(move || gyr_example_heat::run(&c2, &p2))
        .context("starting the solver")?;
    let tty = std::io::stdout().is_terminal();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "gyr demo: heat diffusion on a {0}x{0} plate, {1} domain threads, up to {2} steps -> {3}",
        args.size,
        args.domains,
        args.steps,
        args.trace.display()
    )?;
    writeln!(
        out,
        "(stop early with Ctrl-C: the trace stays readable up to the last 100 ms)"
    )?;
    let start = Instant::now();
    let mut last = (Instant::now(), 0u64);
    let mut drawn = 0usize;
    let mut last_load: (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    let interval = if tty {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    };
    loop {
        let finished = solver.is_finished();
        std::thread::sleep(if finished { Duration::ZERO } else { interval });
        let (records, lost, mut work, mut wait) = {
            let mut l = live.lock().unwrap_or_else(|e| e.into_inner());
            (
                l.records,
                l.lost,
                std::mem::take(&mut l.work),
                std::mem::take(&mut l.wait),
            )
        };
        let now = Instant::now();
        // The last frame shows the average over the run; the others, the rate since the last frame.
        let rate = if finished {
            records as f64 / start.elapsed().as_secs_f64().max(1e-9)
        } else {
            (records - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-9)
        };
        last = (now, records);
        let mut lines = vec![
            format!(
                "t {:>6.1} s   step {:>7} of {}   residual {:>9.3e}",
                start.elapsed().as_secs_f64(),
                progress.step.load(Ordering::Relaxed),
                args.steps,
                progress.residual(),
            ),
            format!(
                "events {:>7.2} M/s{}   recorded {:>10}   lost {}",
                rate / 1e6,
                if finished { " on average" } else { "" },
                records,
                lost,
            ),
        ];
        // The last frame may come after the domains' last events: show the frame before's load.
        if work.is_empty() {
            (work, wait) = last_load.clone();
        }
        last_load = (work.clone(), wait.clone());
        // Load balance: each domain's compute time against the busiest domain's.
        let busiest = work.iter().copied().fold(0.0, f64::max);
        for (d, w) in work.iter().enumerate() {
            let h = wait.get(d).copied().unwrap_or(0.0);
            lines.push(format!(
                "  domain-{d:<2} compute {} {:>7.1} ms  halo wait {:>6.1} ms",
                bar(w / busiest.max(1e-12), 30),
                w * 1e3,
                h * 1e3
            ));
        }
        if tty && drawn > 0 {
            write!(out, "\x1b[{drawn}A")?;
        }
        for line in &lines {
            if tty {
                writeln!(out, "\x1b[2K{line}")?;
            } else {
                writeln!(out, "{line}")?;
            }
        }
        // Clear what is left of a taller previous frame.
        if tty {
            for _ in lines.len()..drawn {
                writeln!(out, "\x1b[2K")?;
            }
        }
        drawn = lines.len().max(drawn);
        out.flush()?;
        if finished {
            break;
        }
    }
    let outcome = solver
        .join()
        .map_err(|_| anyhow::anyhow!("the solver panicked"))?;
    let summary = rt.shutdown();
    writeln!(
        out,
        "done: {} steps, residual {:.3e}, mean temperature {:.3}",
        outcome.steps, outcome.residual, outcome.mean_temperature
    )?;
    writeln!(
        out,
        "gyr: {} records, {} lost, {} skipped by rate limits; trace in {}",
        summary.records,
        summary.lost,
        summary.filtered,
        args.trace.display()
    )?;
    writeln!(
        out,
        "next: gyr trace stats {0}   |   gyr trace dump {0} --type residual --limit 20",
        args.trace.display()
    )?;
    Ok(ExitCode::SUCCESS)
}
