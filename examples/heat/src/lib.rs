#![doc = include_str!("../README.md")]
//!
//! A parallel 2-D heat-diffusion solver instrumented with gyr: the program behind `gyr demo`.
//!
//! The plate is split into horizontal strips ("domains"), one thread each, which exchange halo
//! rows with their neighbours over channels every step (as MPI ranks would) and agree on the
//! residual (the largest change of any cell) through a shared maximum. The top edge is held hot;
//! heat diffuses down until the residual falls below the tolerance.
//!
//! Sensors, in Falcon's three kinds:
//! - tracing: `work_load` (per domain per step: cells, compute time), `residual` (per step),
//!   `halo_wait` (time a domain waited for its neighbours), `row_sweep` (per row: the finest
//!   grain, for performance studies);
//! - sampling: `heat.step` (a cell the solver stores into), `heat.domains_done`;
//! - extended: `heat.step_time` (one aggregate every 50 steps), `hot_front` (emitted only when
//!   the depth the heat has reached moves by more than one row).

use gyr::Sensor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// The work of one domain in one step (Falcon's `work_load` sensor).
#[derive(Sensor, Debug, Clone)]
pub struct WorkLoad {
    /// The domain (strip) index.
    pub domain: u32,
    /// The step.
    pub step: u64,
    /// Cells updated.
    pub cells: u64,
    /// Seconds spent computing (halo wait excluded).
    pub seconds: f64,
}

/// The residual after a step: the largest change of any cell.
#[derive(Sensor, Debug, Clone)]
pub struct Residual {
    /// The step.
    pub step: u64,
    /// max |new - old| over the plate.
    pub residual: f64,
}

/// Time a domain waited for its neighbours' halo rows.
#[derive(Sensor, Debug, Clone)]
pub struct HaloWait {
    /// The domain.
    pub domain: u32,
    /// The step.
    pub step: u64,
    /// Seconds waited.
    pub seconds: f64,
}

/// One row updated: the finest-grained sensor.
#[derive(Sensor, Debug, Clone)]
pub struct RowSweep {
    /// The domain.
    pub domain: u32,
    /// The global row index.
    pub row: u32,
    /// The step.
    pub step: u64,
    /// The largest change in the row.
    pub max_delta: f64,
    /// The mean temperature of the row.
    pub mean: f64,
}

/// How deep the heat has reached: the first row whose mean is below 1 degree.
#[derive(Sensor, Debug, Clone)]
pub struct HotFront {
    /// The step.
    pub step: u64,
    /// The row.
    pub row: u32,
}

/// The solver's parameters.
#[derive(Debug, Clone)]
pub struct Config {
    /// Cells per side.
    pub size: usize,
    /// Domains (threads).
    pub domains: usize,
    /// Most steps to run.
    pub steps: u64,
    /// Stop when the residual falls below this.
    pub tolerance: f64,
    /// Temperature of the top edge.
    pub hot: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            size: 384,
            domains: 4,
            steps: 4000,
            tolerance: 1e-4,
            hot: 100.0,
        }
    }
}

/// What the solver reports when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Steps run.
    pub steps: u64,
    /// The last residual.
    pub residual: f64,
    /// The mean temperature of the plate.
    pub mean_temperature: f64,
}

/// Shared progress the caller can watch while the solver runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Steps completed.
    pub step: AtomicU64,
    /// The last residual (f64 bits).
    pub residual_bits: AtomicU64,
    /// Set to stop the solver early.
    pub stop: AtomicBool,
}

impl Progress {
    /// The last residual.
    pub fn residual(&self) -> f64 {
        f64::from_bits(self.residual_bits.load(Ordering::Relaxed))
    }
}

/// A channel pair to one neighbour: halo rows out, halo rows in.
type Link = (Sender<Vec<f64>>, Receiver<Vec<f64>>);

struct Links {
    up: Option<Link>,
    down: Option<Link>,
}

/// Runs the solver; blocks until it converges, runs out of steps, or `progress.stop` is set.
pub fn run(config: &Config, progress: &Arc<Progress>) -> Outcome {
    let n = config.size.max(8);
    let domains = config.domains.clamp(1, n / 2);
    // Channels between neighbours: a pair per direction.
    let mut links: Vec<Links> = (0..domains)
        .map(|_| Links {
            up: None,
            down: None,
        })
        .collect();
    for d in 0..domains.saturating_sub(1) {
        let (to_lower, from_upper) = channel();
        let (to_upper, from_lower) = channel();
        links[d].down = Some((to_lower, from_lower));
        links[d + 1].up = Some((to_upper, from_upper));
    }
    let barrier = Arc::new(Barrier::new(domains));
    let residuals = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let steps_sensor = gyr::sample_cell::<u64>("heat.step", 0).ok();
    let done_count = Arc::new(AtomicU64::new(0));
    let dc = done_count.clone();
    let _ = gyr::sample("heat.domains_done", move || dc.load(Ordering::Relaxed));
    let outcome = Arc::new(std::sync::Mutex::new(None));
    std::thread::scope(|scope| {
        for (d, link) in links.into_iter().enumerate() {
            let rows_start = d * n / domains;
            let rows_end = (d + 1) * n / domains;
            let (barrier, residuals, progress, outcome, steps_sensor, done_count) = (
                barrier.clone(),
                residuals.clone(),
                progress.clone(),
                outcome.clone(),
                steps_sensor.clone(),
                done_count.clone(),
            );
            let config = config.clone();
            std::thread::Builder::new()
                .name(format!("domain-{d}"))
                .spawn_scoped(scope, move || {
                    let mut domain = Domain::new(d, rows_start, rows_end, n, config.hot);
                    let mut step_time = gyr::extended::Aggregate::new("heat.step_time", 50).ok();
                    let mut front = gyr::extended::Threshold::new(1.0);
                    let mut step = 0u64;
                    loop {
                        let t0 = Instant::now();
                        domain.exchange(&link, step);
                        let t1 = Instant::now();
                        let local = domain.sweep(step);
                        let t2 = Instant::now();
                        WorkLoad {
                            domain: d as u32,
                            step,
                            cells: ((rows_end - rows_start) * n) as u64,
                            seconds: (t2 - t1).as_secs_f64(),
                        }
                        .emit();
                        HaloWait {
                            domain: d as u32,
                            step,
                            seconds: (t1 - t0).as_secs_f64(),
                        }
                        .emit();
                        if let Some(a) = step_time.as_mut() {
                            a.observe((t2 - t0).as_secs_f64());
                        }
                        // Reduce the residual: alternate slots so a slot is reset before reuse.
                        let slot = &residuals[(step % 2) as usize];
                        slot.fetch_max(local.to_bits(), Ordering::Relaxed);
                        barrier.wait();
                        let residual = f64::from_bits(slot.load(Ordering::Relaxed));
                        residuals[((step + 1) % 2) as usize].store(0, Ordering::Relaxed);
                        step += 1;
                        if d == 0 {
                            Residual { step, residual }.emit();
                            progress.step.store(step, Ordering::Relaxed);
                            progress
                                .residual_bits
                                .store(residual.to_bits(), Ordering::Relaxed);
                            if let Some(s) = &steps_sensor {
                                s.set(step);
                            }
                        }
                        let depth = domain.hot_front();
                        if let Some(row) = depth {
                            front.observe(row as f64, || HotFront {
                                step,
                                row: row as u32,
                            });
                        }
                        let stop = residual < config.tolerance
                            || step >= config.steps
                            || progress.stop.load(Ordering::Relaxed);
                        barrier.wait();
                        if stop {
                            if let Some(a) = step_time.as_mut() {
                                a.flush();
                            }
                            done_count.fetch_add(1, Ordering::Relaxed);
                            if d == 0 {
                                *outcome.lock().unwrap() = Some(Outcome {
                                    steps: step,
                                    residual,
                                    mean_temperature: 0.0,
                                });
                            }
                            // Every domain adds its share of the mean once domain 0 has set it up.
                            barrier.wait();
                            domain.finish_mean(&outcome);
                            break;
                        }
                    }
                })
                .expect("spawn a domain thread");
        }
    });
    outcome
        .lock()
        .unwrap()
        .clone()
        .expect("domain 0 reports the outcome")
}

/// One strip of the plate, with a ghost row above and below.
struct Domain {
    index: usize,
    first_row: usize,
    rows: usize,
    n: usize,
    hot: f64,
    cur: Vec<f64>,
    next: Vec<f64>,
}

impl Domain {
    fn new(index: usize, start: usize, end: usize, n: usize, hot: f64) -> Self {
        let rows = end - start;
        let mut cur = vec![0.0; (rows + 2) * n];
        if start == 0 {
            // The ghost row above the first domain is the hot edge.
            cur[..n].fill(hot);
        }
        let next = cur.clone();
        Domain {
            index,
            first_row: start,
            rows,
            n,
            hot,
            cur,
            next,
        }
    }

    fn row(&self, r: usize) -> &[f64] {
        &self.cur[r * self.n..(r + 1) * self.n]
    }

    /// Sends boundary rows to neighbours and receives their halos into the ghost rows.
    fn exchange(&mut self, link: &Links, _step: u64) {
        if let Some((tx, _)) = &link.up {
            let _ = tx.send(self.row(1).to_vec());
        }
        if let Some((tx, _)) = &link.down {
            let _ = tx.send(self.row(self.rows).to_vec());
        }
        if let Some((_, rx)) = &link.up
            && let Ok(row) = rx.recv()
        {
            self.cur[..self.n].copy_from_slice(&row);
        }
        if let Some((_, rx)) = &link.down
            && let Ok(row) = rx.recv()
        {
            let at = (self.rows + 1) * self.n;
            self.cur[at..at + self.n].copy_from_slice(&row);
        }
    }

    /// One Jacobi step over the strip's own rows; returns the largest change.
    fn sweep(&mut self, step: u64) -> f64 {
        let n = self.n;
        let mut residual: f64 = 0.0;
        for r in 1..=self.rows {
            let mut row_max: f64 = 0.0;
            let mut row_sum = 0.0;
            let (up, mid, down) = (
                &self.cur[(r - 1) * n..r * n],
                &self.cur[r * n..(r + 1) * n],
                &self.cur[(r + 1) * n..(r + 2) * n],
            );
            let out = &mut self.next[r * n..(r + 1) * n];
            out[0] = 0.0;
            out[n - 1] = 0.0;
            for c in 1..n - 1 {
                let v = 0.25 * (up[c] + down[c] + mid[c - 1] + mid[c + 1]);
                row_max = row_max.max((v - mid[c]).abs());
                row_sum += v;
                out[c] = v;
            }
            residual = residual.max(row_max);
            // The finest-grained sensor: `emit!` checks its switch before building the event.
            gyr::emit!(RowSweep {
                domain: self.index as u32,
                row: (self.first_row + r - 1) as u32,
                step,
                max_delta: row_max,
                mean: row_sum / n as f64,
            });
        }
        // The last domain's lower ghost row is the cold bottom edge: it stays 0.
        std::mem::swap(&mut self.cur, &mut self.next);
        // Ghost rows are refreshed by the next exchange; keep the hot edge in place.
        if self.first_row == 0 {
            self.cur[..n].fill(self.hot);
        }
        residual
    }

    /// The first global row of this strip whose mean is below 1 degree, if any.
    fn hot_front(&self) -> Option<usize> {
        (1..=self.rows)
            .find(|&r| self.row(r).iter().sum::<f64>() / (self.n as f64) < 1.0)
            .map(|r| self.first_row + r - 1)
    }

    fn sum(&self) -> f64 {
        (1..=self.rows)
            .map(|r| self.row(r).iter().sum::<f64>())
            .sum()
    }

    fn finish_mean(&self, outcome: &std::sync::Mutex<Option<Outcome>>) {
        let mut o = outcome.lock().unwrap();
        if let Some(o) = o.as_mut() {
            o.mean_temperature += self.sum() / (self.n * self.n) as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_flows_down_and_the_residual_falls() {
        let progress = Arc::new(Progress::default());
        let out = run(
            &Config {
                size: 32,
                domains: 3,
                steps: 200,
                ..Config::default()
            },
            &progress,
        );
        assert_eq!(out.steps, 200);
        assert!(
            out.mean_temperature > 1.0 && out.mean_temperature < 100.0,
            "{out:?}"
        );
        assert!(out.residual < 1.0, "{out:?}");
        // The same plate on one domain gives the same answer: the halo exchange is exact.
        let one = run(
            &Config {
                size: 32,
                domains: 1,
                steps: 200,
                ..Config::default()
            },
            &progress,
        );
        assert!(
            (one.mean_temperature - out.mean_temperature).abs() < 1e-9,
            "{one:?} vs {out:?}"
        );
    }
}
