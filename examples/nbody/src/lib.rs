#![doc = include_str!("../README.md")]
//!
//! A steerable gravitational N-body simulation, as in the Progress paper: a straightforward
//! O(N²) force computation split over worker threads, with the time step and softening
//! steerable, `add_body` / `delete_body` actuators, and sensors for the energy and each
//! worker's work.
//!
//! Steering objects: `nbody` (attributes `dt`, `softening`, `max_rate`, and read-only `bodies`,
//! `step`, `energy`; actuators `add_body(x, y, z, vx, vy, vz, mass)` and `delete_body(index)`).
//! Synch point: `step`, once per time step, where actuators run and pauses stall the program.

use gyr::Sensor;
use gyr::gyr_core::{ShortFloat, Value};
use gyr::steer::{self, Actuator, AttrType, Steered};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

/// Most bodies `add_body` accepts.
pub const MAX_BODIES: usize = 4096;
/// Largest mass `add_body` accepts (the central body has 100). With positions, velocities and
/// masses within these bounds, kinetic and potential energy stay finite for [`MAX_BODIES`].
pub const MAX_MASS: f64 = 1e6;
/// Largest distance from the origin, per coordinate, for a new body.
pub const MAX_POSITION: f64 = 1e6;
/// Largest speed, per component, for a new body.
pub const MAX_SPEED: f64 = 1e6;

/// One body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Body {
    /// Position.
    pub pos: [f64; 3],
    /// Velocity.
    pub vel: [f64; 3],
    /// Mass.
    pub mass: f64,
}

/// The simulation's steerable state.
#[derive(gyr::Steerable, Debug)]
pub struct NBody {
    /// Integration time step.
    #[steer(
        unit = "s",
        min = 1e-6,
        max = 0.1,
        description = "integration time step"
    )]
    pub dt: f64,
    /// Plummer softening length.
    #[steer(min = 0.0, max = 1.0, description = "softening length")]
    pub softening: f64,
    /// Most steps a second, 0 for no limit. A program sharing the machine with others (the
    /// demo's nbody beside md) is held to a bounded share of it this way, by sleeping, not
    /// by its scheduling priority alone, which does not keep it off the cores others need.
    #[steer(
        unit = "steps/s",
        min = 0.0,
        max = 1e6,
        description = "most steps a second (0: as fast as it can)"
    )]
    pub max_rate: f64,
    /// Bodies now.
    #[steer(read_only, description = "bodies in the simulation")]
    pub bodies: u64,
    /// Steps done.
    #[steer(read_only)]
    pub step: u64,
    /// Total energy after the last step.
    #[steer(read_only, description = "kinetic plus potential energy")]
    pub energy: f64,
    /// The bodies themselves (not an attribute: changed through the actuators).
    #[steer(skip)]
    pub state: Vec<Body>,
}

/// The system's energy after a step.
#[derive(Sensor, Debug, Clone)]
pub struct Energy {
    /// The step.
    pub step: u64,
    /// Kinetic energy.
    pub kinetic: f64,
    /// Potential energy.
    pub potential: f64,
    /// Their sum.
    pub total: f64,
    /// Bodies.
    pub bodies: u32,
}

/// One worker's share of a step.
#[derive(Sensor, Debug, Clone)]
pub struct WorkerLoad {
    /// The worker.
    pub worker: u32,
    /// The step.
    pub step: u64,
    /// Bodies it computed forces for.
    pub bodies: u32,
    /// Seconds it took.
    pub seconds: f64,
}

/// A deterministic ring of `n` bodies around a heavy centre (no random source needed).
pub fn initial_bodies(n: usize) -> Vec<Body> {
    let mut v = vec![Body {
        pos: [0.0; 3],
        vel: [0.0; 3],
        mass: 100.0,
    }];
    for i in 1..n.max(2) {
        let a = i as f64 * 2.399_963; // the golden angle spreads bodies evenly
        let r = 1.0 + (i as f64 / n as f64) * 4.0;
        let speed = (100.0 / r).sqrt();
        v.push(Body {
            pos: [r * a.cos(), r * a.sin(), 0.05 * (i as f64).sin()],
            vel: [-speed * a.sin(), speed * a.cos(), 0.0],
            mass: 0.01,
        });
    }
    v
}

fn energy(bodies: &[Body], soft: f64) -> (f64, f64) {
    let kinetic: f64 = bodies
        .iter()
        .map(|b| 0.5 * b.mass * b.vel.iter().map(|v| v * v).sum::<f64>())
        .sum();
    let mut potential = 0.0;
    for i in 0..bodies.len() {
        for j in i + 1..bodies.len() {
            let d: f64 = (0..3)
                .map(|k| (bodies[i].pos[k] - bodies[j].pos[k]).powi(2))
                .sum();
            potential -= bodies[i].mass * bodies[j].mass / (d + soft * soft).sqrt();
        }
    }
    (kinetic, potential)
}

/// Registers the `nbody` steering object with its actuators.
pub fn register(n: usize) -> Result<Steered<NBody>, steer::SteerError> {
    let state = initial_bodies(n);
    let sim = steer::register_described(
        "nbody",
        Some("gravitational N-body simulation"),
        NBody {
            dt: 0.001,
            softening: 0.05,
            max_rate: 0.0,
            bodies: state.len() as u64,
            step: 0,
            energy: 0.0,
            state,
        },
    )?;
    sim.add_actuator(
        Actuator::new("add_body", |s: &mut NBody, a| {
            let f = |i| a.get::<f64>(i);
            s.state.push(Body {
                pos: [f(0)?, f(1)?, f(2)?],
                vel: [f(3)?, f(4)?, f(5)?],
                mass: f(6)?,
            });
            s.bodies = s.state.len() as u64;
            Ok(Value::UInt(s.bodies))
        })
        .param("x", AttrType::Float)
        .param("y", AttrType::Float)
        .param("z", AttrType::Float)
        .param("vx", AttrType::Float)
        .param("vy", AttrType::Float)
        .param("vz", AttrType::Float)
        .param("mass", AttrType::Float)
        .description("adds a body; returns the new count")
        .pre(|s, a| {
            if s.state.len() >= MAX_BODIES {
                return Err(format!("the simulation holds at most {MAX_BODIES} bodies"));
            }
            let names = ["x", "y", "z", "vx", "vy", "vz"];
            for (i, name) in names.iter().enumerate() {
                let (v, bound) = (
                    a.get::<f64>(i)?,
                    if i < 3 { MAX_POSITION } else { MAX_SPEED },
                );
                if !v.is_finite() || v.abs() > bound {
                    return Err(format!(
                        "{name} must be a finite number from {} to {}, got {}",
                        ShortFloat(-bound),
                        ShortFloat(bound),
                        ShortFloat(v)
                    ));
                }
            }
            match a.get::<f64>(6)? {
                m if m > 0.0 && m <= MAX_MASS => Ok(()),
                m if m > 0.0 => Err(format!(
                    "mass must be at most {}, got {}",
                    ShortFloat(MAX_MASS),
                    ShortFloat(m)
                )),
                m => Err(format!("mass must be positive, got {}", ShortFloat(m))),
            }
        })
        .post(|s| {
            let b = s
                .state
                .last()
                .map(|b| b.pos.iter().chain(&b.vel).all(|x| x.is_finite()))
                .unwrap_or(true);
            if b {
                Ok(())
            } else {
                Err("the new body has a non-finite position or velocity".into())
            }
        }),
    )?;
    sim.add_actuator(
        Actuator::new("delete_body", |s: &mut NBody, a| {
            let i = a.get::<u64>(0)? as usize;
            s.state.remove(i);
            s.bodies = s.state.len() as u64;
            Ok(Value::UInt(s.bodies))
        })
        .param("index", AttrType::UInt)
        .description("removes a body; returns the new count")
        .pre(|s, a| {
            let i = a.get::<u64>(0)? as usize;
            if s.state.len() <= 2 {
                Err("at least two bodies must remain".into())
            } else if i >= s.state.len() {
                Err(format!(
                    "there is no body {i}: bodies are numbered 0 to {}",
                    s.state.len() - 1
                ))
            } else {
                Ok(())
            }
        }),
    )?;
    Ok(sim)
}

/// Runs the simulation with `workers` threads until `steps` steps are done (0: until `stop`),
/// at most `max_rate` steps a second when that is set: worker 0 sleeps after the synch point
/// until the next step is due, and the others wait for it at the barrier without spinning.
pub fn run(sim: &Steered<NBody>, workers: usize, steps: u64, stop: &AtomicBool) {
    let workers = workers.max(1);
    let barrier = Barrier::new(workers);
    let accel: Mutex<Vec<[f64; 3]>> = Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for w in 0..workers {
            let (barrier, accel, done) = (&barrier, &accel, &done);
            std::thread::Builder::new()
                .name(format!("nbody-{w}"))
                .spawn_scoped(scope, move || {
                    let mut local: Vec<[f64; 3]> = Vec::new();
                    // When the next step may start under `max_rate` (worker 0's alone).
                    let mut due = Instant::now();
                    loop {
                        // Phase 1: every worker computes accelerations for its slice.
                        let t0 = Instant::now();
                        let (step, range) = {
                            let s = sim.read();
                            let n = s.state.len();
                            let range = (w * n / workers)..((w + 1) * n / workers);
                            local.clear();
                            let eps2 = s.softening * s.softening;
                            for i in range.clone() {
                                let mut a = [0.0; 3];
                                let bi = s.state[i];
                                for bj in &s.state {
                                    let d = [
                                        bj.pos[0] - bi.pos[0],
                                        bj.pos[1] - bi.pos[1],
                                        bj.pos[2] - bi.pos[2],
                                    ];
                                    let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2;
                                    if r2 > 0.0 {
                                        let inv = bj.mass / (r2 * r2.sqrt());
                                        for k in 0..3 {
                                            a[k] += d[k] * inv;
                                        }
                                    }
                                }
                                local.push(a);
                            }
                            (s.step, range)
                        };
                        WorkerLoad {
                            worker: w as u32,
                            step,
                            bodies: range.len() as u32,
                            seconds: t0.elapsed().as_secs_f64(),
                        }
                        .emit();
                        {
                            let mut all = accel.lock().unwrap_or_else(|e| e.into_inner());
                            if all.len() < range.end {
                                all.resize(range.end, [0.0; 3]);
                            }
                            all[range].copy_from_slice(&local);
                        }
                        barrier.wait();
                        // Phase 2: worker 0 integrates, senses and reaches the synch point.
                        if w == 0 {
                            let max_rate = {
                                let mut s = sim.write();
                                let dt = s.dt;
                                let all = accel.lock().unwrap_or_else(|e| e.into_inner());
                                for (b, a) in s.state.iter_mut().zip(all.iter()) {
                                    for ((v, p), a) in b.vel.iter_mut().zip(b.pos.iter_mut()).zip(a)
                                    {
                                        *v += a * dt;
                                        *p += *v * dt;
                                    }
                                }
                                s.step += 1;
                                if s.step.is_multiple_of(10) {
                                    let (k, p) = energy(&s.state, s.softening);
                                    s.energy = k + p;
                                    Energy {
                                        step: s.step,
                                        kinetic: k,
                                        potential: p,
                                        total: k + p,
                                        bodies: s.state.len() as u32,
                                    }
                                    .emit();
                                }
                                let finished =
                                    (steps > 0 && s.step >= steps) || stop.load(Ordering::Relaxed);
                                done.store(finished, Ordering::Relaxed);
                                s.max_rate
                            };
                            // Actuators (add/delete body) run here; a pause stalls here.
                            steer::sync_point("step");
                            if max_rate > 0.0 {
                                due = pace(due, max_rate);
                            }
                        }
                        barrier.wait();
                        if done.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                })
                .expect("spawn an nbody worker");
        }
    });
}

/// Sleeps until `due` plus one step at `rate` steps a second and returns that time. A step
/// that ran late moves the schedule instead of being made up for by a burst of steps.
fn pace(due: Instant, rate: f64) -> Instant {
    let next = due + std::time::Duration::from_secs_f64(1.0 / rate);
    let now = Instant::now();
    if next > now {
        std::thread::sleep(next - now);
        next
    } else {
        now
    }
}

/// Convenience for tests and benchmarks: a fresh stop flag.
pub fn stop_flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nbody` is registered once at a time: the tests take turns.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn energy_is_roughly_conserved_and_actuators_work() {
        let _g = serial();
        let sim = register(64).unwrap();
        let stop = AtomicBool::new(false);
        run(&sim, 2, 100, &stop);
        let e0 = sim.read().energy;
        run(&sim, 2, 200, &stop);
        let e1 = sim.read().energy;
        assert!(
            (e1 - e0).abs() < 0.05 * e0.abs(),
            "energy drifted: {e0} -> {e1}"
        );
        assert_eq!(sim.read().step, 200);
        sim.unregister();
    }

    /// Only a lower bound, which sleeping guarantees on any machine: never a timing.
    #[test]
    fn max_rate_spaces_the_steps() {
        let _g = serial();
        let sim = register(16).unwrap();
        steer::set(
            "nbody.max_rate",
            Value::Float(200.0),
            &steer::Who::new("test"),
        )
        .unwrap();
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        run(&sim, 2, 20, &stop);
        assert!(t.elapsed() >= std::time::Duration::from_millis(95));
        assert_eq!(sim.read().step, 20);
        sim.unregister();
    }
}
