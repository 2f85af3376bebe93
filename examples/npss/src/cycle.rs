//! The 1-D engine cycle model: a single-spool turbojet (inlet, compressor, combustor, turbine,
//! nozzle) run through a throttle schedule, in nondimensional units (ambient temperature and
//! pressure 1, specific heat 1).
//!
//! At each time step it matches the compressor to the turbine — the compressor's back pressure
//! is iterated until the mass flow its map passes (plus fuel) is what the choked turbine
//! swallows — then integrates the shaft speed from the work imbalance. The compressor map is
//! the high-fidelity code's, built by an ensemble (`--map FILE`), or a rough preliminary one.
//!
//! Output:
//! - standard output: each matching iteration, ` ITER   3  RES(FLOW)= 1.2345D-04`, then one
//!   ` TIME=   1.250  N= 0.9512 ...` line per step;
//! - `cycle.out` in `--dir`: the same per step as a table whose header line names the columns
//!   (`time speed mass_in fuel mass_out pressure_ratio t4 thrust`).
//!
//! The control file (`--control`, default `control.txt`) takes `throttle T4` (hold the turbine
//! inlet temperature at T4 instead of the schedule) and `stop`.

use crate::input::{ControlFile, Settings, fortran};
use crate::map::{self, Map};
use std::io::Write;
use std::time::Duration;

const KAPPA: f64 = 0.4 / 1.4;
const COMPRESSOR_EFFICIENCY: f64 = 0.85;
const TURBINE_EFFICIENCY: f64 = 0.9;
const TURBINE_PRESSURE_RATIO: f64 = 1.35;
/// The turbine's flow capacity: mass flow × √T4 / back pressure.
const TURBINE_CAPACITY: f64 = 1.35;
/// Fuel heating value over specific heat × ambient temperature.
const HEATING_VALUE: f64 = 148.0;
const INERTIA: f64 = 2.0;

/// The engine's state at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct State {
    /// Seconds of simulated time.
    pub time: f64,
    /// Shaft speed, as a fraction of design speed.
    pub speed: f64,
    /// Mass flow into the compressor.
    pub mass_in: f64,
    /// Fuel flow.
    pub fuel: f64,
    /// Mass flow through the turbine and nozzle.
    pub mass_out: f64,
    /// Compressor total-pressure ratio.
    pub pressure_ratio: f64,
    /// Turbine inlet temperature.
    pub t4: f64,
    /// Net thrust.
    pub thrust: f64,
}

/// The throttle schedule: turbine inlet temperature against time.
pub fn schedule(t: f64) -> f64 {
    match t {
        t if t < 5.0 => 3.6,
        t if t < 10.0 => 3.6 + 0.16 * (t - 5.0),
        t if t < 20.0 => 4.4,
        t if t < 24.0 => 4.4 - 0.15 * (t - 20.0),
        _ => 3.8,
    }
}

/// The compressor matched to the turbine at `speed` and `t4`: (back pressure, iterations,
/// final residual), each iteration's residual handed to `each`.
pub fn match_flow(
    map: &Map,
    speed: f64,
    t4: f64,
    mut each: impl FnMut(u32, f64),
) -> (f64, u32, f64) {
    let t3 = compressor_exit_temperature(speed);
    let fuel_fraction = ((t4 - t3) / HEATING_VALUE).max(0.0);
    let residual = |bp: f64| {
        let (m, _) = map.at(speed, bp);
        m * (1.0 + fuel_fraction) - TURBINE_CAPACITY * bp / t4.sqrt()
    };
    // Bisection on the back pressure: the map's flow falls with it, the turbine's rises.
    let (mut lo, mut hi) = map.pressure_range();
    let (mut bp, mut r) = (0.5 * (lo + hi), f64::INFINITY);
    let mut n = 0;
    while n < 60 {
        n += 1;
        bp = 0.5 * (lo + hi);
        r = residual(bp);
        each(n, r.abs());
        if r.abs() < 1e-7 {
            break;
        }
        if r > 0.0 {
            lo = bp;
        } else {
            hi = bp;
        }
    }
    (bp, n, r.abs())
}

fn compressor_exit_temperature(speed: f64) -> f64 {
    1.0 + ((1.0 + 0.8 * speed * speed).powf(KAPPA) - 1.0) / COMPRESSOR_EFFICIENCY
}

/// One time step of `dt` from `speed` at turbine inlet temperature `t4`.
pub fn step(map: &Map, time: f64, speed: f64, t4: f64, dt: f64, bp: f64) -> State {
    let (mass_in, recovery) = map.at(speed, bp);
    let t3 = compressor_exit_temperature(speed);
    let fuel = mass_in * ((t4 - t3) / HEATING_VALUE).max(0.0);
    let mass_out = TURBINE_CAPACITY * bp / t4.sqrt();
    let work_compressor = mass_in * (t3 - 1.0);
    let turbine_drop = TURBINE_EFFICIENCY * (1.0 - TURBINE_PRESSURE_RATIO.powf(-KAPPA));
    let work_turbine = mass_out * t4 * turbine_drop;
    let pressure_ratio = (1.0 + 0.8 * speed * speed) * recovery;
    let p5 = 0.95 * pressure_ratio / TURBINE_PRESSURE_RATIO;
    let t5 = t4 * (1.0 - turbine_drop);
    let jet = (2.0 * t5 * (1.0 - p5.max(1.0).powf(-KAPPA))).sqrt();
    let speed_next = speed + dt * (work_turbine - work_compressor) / (INERTIA * speed.max(0.1));
    State {
        time: time + dt,
        speed: speed_next.clamp(0.2, 1.4),
        mass_in,
        fuel,
        mass_out,
        pressure_ratio,
        t4,
        thrust: mass_out * jet,
    }
}

/// Runs the model as the `npss-cycle` program does: `args` without the program's name.
/// Returns the exit status (0 done, 1 bad input).
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("npss-cycle: {e}");
            1
        }
    }
}

fn run(args: &[String]) -> Result<i32, String> {
    let s = Settings::from_args(args)?;
    let map = match s.text("map") {
        Some(path) => Map::read(std::path::Path::new(path))?,
        None => {
            eprintln!(" WARNING: NO COMPONENT MAP GIVEN (--map): USING THE PRELIMINARY MAP");
            map::preliminary()
        }
    };
    let dt = s.f64("dt", 0.05)?;
    let t_end = s.f64("t_end", 30.0)?;
    if !(dt > 0.0 && t_end > 0.0) {
        return Err("dt and t_end must be positive".into());
    }
    let delay = Duration::from_micros((s.f64("delay_ms", 0.0)? * 1000.0) as u64);
    let dir = s.path("dir", ".");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join("cycle.out");
    let mut table = std::fs::File::create(&path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut control = ControlFile::new(s.path("control", "control.txt"));
    writeln!(
        table,
        "# time speed mass_in fuel mass_out pressure_ratio t4 thrust"
    )
    .map_err(|e| e.to_string())?;
    println!(" NPSS-CYCLE  single-spool turbojet  DT = {dt}  T_END = {t_end}");
    let stdout = std::io::stdout();
    let mut speed = s.f64("speed", 0.9)?;
    let mut time = 0.0;
    let mut held: Option<f64> = None;
    while time < t_end - 1e-9 {
        for line in control.poll() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next().map(str::parse::<f64>)) {
                (Some("stop"), _) => {
                    println!(" STOP REQUESTED AT TIME {time:.3}");
                    return Ok(0);
                }
                (Some("throttle"), Some(Ok(t4))) if (2.0..=6.0).contains(&t4) => {
                    println!(" THROTTLE HELD AT T4 = {t4:.3}");
                    held = Some(t4);
                }
                _ => eprintln!(" WARNING: CONTROL LINE NOT UNDERSTOOD: {line}"),
            }
        }
        let t4 = held.unwrap_or_else(|| schedule(time));
        let (bp, iterations, residual) = {
            let mut out = stdout.lock();
            match_flow(&map, speed, t4, |n, r| {
                if n % 8 == 0 || r < 1e-7 {
                    let _ = writeln!(out, " ITER {n:3}  RES(FLOW)= {}", fortran(r));
                }
            })
        };
        if residual >= 1e-7 {
            eprintln!(
                " WARNING: FLOW MATCH NOT CONVERGED AT TIME {time:.3} AFTER {iterations} ITERATIONS (RESIDUAL {})",
                fortran(residual)
            );
        }
        let st = step(&map, time, speed, t4, dt, bp);
        {
            let mut out = stdout.lock();
            let _ = writeln!(
                out,
                " TIME= {:8.3}  N= {:.4}  W= {:.4}  PR= {:.4}  T4= {:.3}  FN= {:.4}",
                st.time, st.speed, st.mass_in, st.pressure_ratio, st.t4, st.thrust
            );
            let _ = out.flush();
        }
        writeln!(
            table,
            "{:.3} {:.6} {:.6} {:.6} {:.6} {:.6} {:.4} {:.6}",
            st.time, speed, st.mass_in, st.fuel, st.mass_out, st.pressure_ratio, st.t4, st.thrust
        )
        .and_then(|_| table.flush())
        .map_err(|e| e.to_string())?;
        speed = st.speed;
        time = st.time;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    }
    println!(" END OF RUN AT TIME {time:.3}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_match_balances_mass_and_the_shaft_settles() {
        let map = map::preliminary();
        let mut speed = 0.9;
        let mut last = None;
        for i in 0..2000 {
            let (bp, _, r) = match_flow(&map, speed, 4.0, |_, _| {});
            assert!(r < 1e-7, "step {i}: residual {r}");
            let st = step(&map, i as f64 * 0.05, speed, 4.0, 0.05, bp);
            let balance = (st.mass_in + st.fuel - st.mass_out).abs() / st.mass_out;
            assert!(balance < 1e-5, "step {i}: {st:?}");
            speed = st.speed;
            last = Some(st);
        }
        let st = last.unwrap();
        let (bp, _, _) = match_flow(&map, speed, 4.0, |_, _| {});
        let next = step(&map, st.time, speed, 4.0, 0.05, bp);
        assert!(
            (next.speed - speed).abs() < 1e-4,
            "the shaft settles: {st:?} -> {next:?}"
        );
    }
}
