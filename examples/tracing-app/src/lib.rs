#![doc = include_str!("../README.md")]
//!
//! The solver ([`run`]) uses `tracing`'s macros only: it would log the same way under any
//! subscriber. What gyr makes of it is decided in [`app`], in the subscriber set-up alone.

pub mod app;

use std::sync::{Arc, mpsc};
use std::time::Duration;
use tracing::{debug, info, info_span, warn};

/// What to solve.
#[derive(Debug, Clone)]
pub struct Config {
    /// Grid points of the rod.
    pub points: usize,
    /// Domains, each relaxed by a thread of its own.
    pub domains: usize,
    /// Sweeps to run.
    pub steps: u64,
    /// Pause after each sweep, so that a run can be watched.
    pub step_pause: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            points: 4096,
            domains: 4,
            steps: 300,
            step_pause: Duration::from_millis(10),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Sweeps done.
    pub steps: u64,
    /// The last sweep's largest change.
    pub residual: f64,
}

/// Relaxes a rod held at 1 on the left and 0 on the right towards its steady state, each
/// domain on a worker thread of its own, and says what happens through `tracing` only.
pub fn run(cfg: &Config) -> Outcome {
    let domains = cfg.domains.max(1);
    let n = cfg.points.max(domains * 2) + 2;
    let mut u = vec![0.0f64; n];
    u[0] = 1.0;
    let chunk = (n - 2).div_ceil(domains);
    info!(points = n as u64, domains = domains as u64, "solver starts");
    let (done_tx, done_rx) = mpsc::channel::<(usize, Vec<f64>, f64)>();
    let mut work = Vec::new();
    let mut workers = Vec::new();
    for d in 0..domains {
        let (tx, rx) = mpsc::channel::<(Arc<Vec<f64>>, tracing::Span)>();
        let done = done_tx.clone();
        work.push(tx);
        workers.push(std::thread::spawn(move || {
            // Each sweep's span was made on the main thread: the worker's `relax` span is its
            // child, entered here.
            for (u, sweep) in rx {
                let _relax = info_span!(parent: &sweep, "relax", domain = d as u64).entered();
                let first = 1 + d * chunk;
                let last = (first + chunk).min(u.len() - 1);
                let mut out = vec![0.0; last - first];
                let change = relax(&u, &mut out, first);
                if done.send((first, out, change)).is_err() {
                    break;
                }
            }
        }));
    }
    drop(done_tx);
    let mut residual = f64::INFINITY;
    let mut step = 0;
    while step < cfg.steps {
        step += 1;
        let sweep = info_span!("sweep", step);
        let _entered = sweep.enter();
        let shared = Arc::new(std::mem::take(&mut u));
        for tx in &work {
            let _ = tx.send((shared.clone(), sweep.clone()));
        }
        let mut next = (*shared).clone();
        let mut changes = vec![f64::NAN; domains];
        for _ in 0..domains {
            let Ok((first, out, change)) = done_rx.recv() else {
                break;
            };
            next[first..first + out.len()].copy_from_slice(&out);
            changes[(first - 1) / chunk] = change;
        }
        u = next;
        residual = changes.iter().cloned().fold(0.0, f64::max);
        for (d, c) in changes.iter().enumerate() {
            debug!(name: "domain_change", domain = d as u64, change = *c);
        }
        let flux = u[0] - u[1];
        info!(name: "residual", step, residual, flux, "sweep done");
        if changes.iter().any(|c| !c.is_finite()) {
            warn!(name: "diverged", step, "a domain failed; stopping");
            break;
        }
        drop(_entered);
        if !cfg.step_pause.is_zero() {
            std::thread::sleep(cfg.step_pause);
        }
    }
    drop(work);
    for w in workers {
        let _ = w.join();
    }
    info!(
        steps = step,
        residual,
        converged = residual < 1e-6,
        "solver ends"
    );
    Outcome {
        steps: step,
        residual,
    }
}

/// One Jacobi sweep of the points `first..first + out.len()` of `u` into `out`; returns the
/// largest change.
fn relax(u: &[f64], out: &mut [f64], first: usize) -> f64 {
    let mut change = 0.0f64;
    for (k, o) in out.iter_mut().enumerate() {
        let i = first + k;
        let v = 0.5 * (u[i - 1] + u[i + 1]);
        change = change.max((v - u[i]).abs());
        *o = v;
    }
    change
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solver_moves_heat_into_the_rod() {
        let out = run(&Config {
            points: 64,
            domains: 3,
            steps: 50,
            step_pause: Duration::ZERO,
        });
        assert_eq!(out.steps, 50);
        assert!(out.residual > 0.0 && out.residual < 0.5, "{out:?}");
    }
}
