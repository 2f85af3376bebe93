//! The high-fidelity component code: quasi-1-D Euler flow through a compressor passage,
//! marched to steady state with MacCormack's explicit scheme (Anderson, *Computational Fluid
//! Dynamics*, ch. 7), on 52 points.
//!
//! The rotor's speed sets the passage's inlet total pressure, the cycle's operating line its exit
//! static pressure; the solver gives the mass flow and the total-pressure recovery, one point
//! of the component's performance map. Like the codes the NPSS work watched, it knows nothing
//! of its monitor: it prints residuals, writes tables, reads a control file, and diverges when
//! its relaxation factor (the Courant number) is too large — above 1 for this scheme.
//!
//! Output, in `--dir` (default `.`):
//! - standard output: one line every 10 iterations,
//!   `ITER    120  RES(RHO)= 1.2345D-04  RES(RHOU)= ...  RES(E)= ...  MDOT= 0.5789`;
//! - `residuals.dat`: the same as a table, columns named in its header line;
//! - `pressure.dat`: `PRESSURE DISTRIBUTION  ITER n`, then the 52 static pressures five to a
//!   line, every 500 iterations and at the end;
//! - `result.dat`: `key = value` lines once it stops.
//!
//! Exit status: 0 converged, 1 bad input, 2 diverged, 3 not converged within `max_iter`.

use crate::input::{ControlFile, Settings, fortran, scientific};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Grid points: the pressure distribution is this long.
pub const POINTS: usize = 52;
const GAMMA: f64 = 1.4;
const LENGTH: f64 = 3.0;

/// What one run was asked for.
#[derive(Debug, Clone)]
pub struct Case {
    /// Corrected speed, as a fraction of the design speed.
    pub speed: f64,
    /// Exit static pressure over ambient.
    pub back_pressure: f64,
    /// The Courant number: the scheme diverges above 1.
    pub relax: f64,
    /// Iterations at most.
    pub max_iter: u64,
    /// Converged when every residual is below this.
    pub tolerance: f64,
}

/// What a run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Mass flow through the passage (inlet and exit agree once converged).
    pub mass_flow: f64,
    /// Exit total pressure over inlet total pressure.
    pub recovery: f64,
    /// Iterations run.
    pub iterations: u64,
    /// Whether every residual fell below the tolerance.
    pub converged: bool,
}

fn area(x: f64) -> f64 {
    1.0 + 0.2 * (x - 1.5) * (x - 1.5)
}

/// The flow solution: the three conserved variables at every point.
struct Flow {
    u: [[f64; POINTS]; 3],
    area: [f64; POINTS],
    dx: f64,
    p0: f64,
    back_pressure: f64,
}

impl Flow {
    fn new(case: &Case) -> Flow {
        let dx = LENGTH / (POINTS - 1) as f64;
        let p0 = 1.0 + 0.8 * case.speed * case.speed;
        let mut f = Flow {
            u: [[0.0; POINTS]; 3],
            area: [0.0; POINTS],
            dx,
            p0,
            back_pressure: case.back_pressure,
        };
        for i in 0..POINTS {
            let x = i as f64 * dx;
            let a = area(x);
            let frac = x / LENGTH;
            let rho = p0 * (1.0 - 0.1 * frac);
            let t = 1.0 - 0.05 * frac;
            let v = 0.2 + 0.1 * frac;
            f.area[i] = a;
            f.set(i, rho, v, t);
        }
        f
    }

    fn set(&mut self, i: usize, rho: f64, v: f64, t: f64) {
        let a = self.area[i];
        self.u[0][i] = rho * a;
        self.u[1][i] = rho * a * v;
        self.u[2][i] = rho * a * (t / (GAMMA - 1.0) + GAMMA / 2.0 * v * v);
    }

    /// Density, velocity, temperature at `i`.
    fn primitive(u: &[[f64; POINTS]; 3], area: &[f64; POINTS], i: usize) -> (f64, f64, f64) {
        let rho = u[0][i] / area[i];
        let v = u[1][i] / u[0][i];
        let t = (GAMMA - 1.0) * (u[2][i] / u[0][i] - GAMMA / 2.0 * v * v);
        (rho, v, t)
    }

    fn pressure(&self, i: usize) -> f64 {
        let (rho, _, t) = Self::primitive(&self.u, &self.area, i);
        rho * t
    }

    fn mass_flow(&self, i: usize) -> f64 {
        self.u[1][i]
    }

    fn total_pressure(&self, i: usize) -> f64 {
        let (rho, v, t) = Self::primitive(&self.u, &self.area, i);
        let m2 = v * v / t;
        rho * t * (1.0 + (GAMMA - 1.0) / 2.0 * m2).powf(GAMMA / (GAMMA - 1.0))
    }

    fn flux(u: &[[f64; POINTS]; 3], i: usize) -> [f64; 3] {
        let (u1, u2, u3) = (u[0][i], u[1][i], u[2][i]);
        [
            u2,
            u2 * u2 / u1 + (GAMMA - 1.0) / GAMMA * (u3 - GAMMA / 2.0 * u2 * u2 / u1),
            GAMMA * u2 * u3 / u1 - GAMMA * (GAMMA - 1.0) / 2.0 * u2 * u2 * u2 / (u1 * u1),
        ]
    }

    /// One MacCormack step at Courant number `relax`; returns the RMS of dU/dt per variable.
    fn step(&mut self, relax: f64) -> [f64; 3] {
        let dt = (1..POINTS - 1)
            .map(|i| {
                let (_, v, t) = Self::primitive(&self.u, &self.area, i);
                relax * self.dx / (t.abs().sqrt() + v.abs())
            })
            .fold(f64::INFINITY, f64::min);
        let old = self.u;
        let source = |u: &[[f64; POINTS]; 3], area: &[f64; POINTS], i: usize, da: f64| {
            let (rho, _, t) = Self::primitive(u, area, i);
            rho * t * da / GAMMA
        };
        let visc = |u: &[[f64; POINTS]; 3], area: &[f64; POINTS], k: usize, i: usize| {
            let p = |j| {
                let (rho, _, t) = Self::primitive(u, area, j);
                rho * t
            };
            let (pm, pc, pp) = (p(i - 1), p(i), p(i + 1));
            0.2 * (pp - 2.0 * pc + pm).abs() / (pp + 2.0 * pc + pm)
                * (u[k][i + 1] - 2.0 * u[k][i] + u[k][i - 1])
        };
        // Predictor: forward differences.
        let mut pred = old;
        let mut dudt = [[0.0; POINTS]; 3];
        for i in 1..POINTS - 1 {
            let (f0, f1) = (Self::flux(&old, i), Self::flux(&old, i + 1));
            let da = (self.area[i + 1] - self.area[i]) / self.dx;
            for k in 0..3 {
                let mut d = -(f1[k] - f0[k]) / self.dx;
                if k == 1 {
                    d += source(&old, &self.area, i, da);
                }
                dudt[k][i] = d;
                pred[k][i] = old[k][i] + d * dt + visc(&old, &self.area, k, i);
            }
        }
        // Corrector: rearward differences on the predicted values.
        let mut res = [0.0f64; 3];
        for i in 1..POINTS - 1 {
            let (f0, f1) = (Self::flux(&pred, i - 1), Self::flux(&pred, i));
            let da = (self.area[i] - self.area[i - 1]) / self.dx;
            for k in 0..3 {
                let mut d = -(f1[k] - f0[k]) / self.dx;
                if k == 1 {
                    d += source(&pred, &self.area, i, da);
                }
                let avg = 0.5 * (dudt[k][i] + d);
                self.u[k][i] = old[k][i] + avg * dt + visc(&pred, &self.area, k, i);
                let change = (self.u[k][i] - old[k][i]) / dt;
                res[k] += change * change;
            }
        }
        self.boundaries();
        res.map(|r| (r / (POINTS - 2) as f64).sqrt())
    }

    /// Subsonic inflow from the total conditions (velocity extrapolated); exit at the back
    /// pressure (density and velocity extrapolated).
    fn boundaries(&mut self) {
        let (_, v1, _) = Self::primitive(&self.u, &self.area, 1);
        let (_, v2, _) = Self::primitive(&self.u, &self.area, 2);
        let v = (2.0 * v1 - v2).max(0.0);
        let t = (1.0 - (GAMMA - 1.0) / 2.0 * v * v).max(0.05);
        let rho = self.p0 * t.powf(1.0 / (GAMMA - 1.0));
        self.set(0, rho, v, t);
        let n = POINTS - 1;
        let (r1, v1, _) = Self::primitive(&self.u, &self.area, n - 1);
        let (r2, v2, _) = Self::primitive(&self.u, &self.area, n - 2);
        let rho = (2.0 * r1 - r2).max(1e-6);
        let v = 2.0 * v1 - v2;
        self.set(n, rho, v, self.back_pressure / rho);
    }
}

/// Runs the solver as the `npss-compressor` program does: `args` without the program's name.
/// Returns the exit status.
pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("npss-compressor: {e}");
            1
        }
    }
}

fn run(args: &[String]) -> Result<i32, String> {
    let s = Settings::from_args(args)?;
    let case = Case {
        speed: s.f64("speed", 1.0)?,
        back_pressure: s.f64("back_pressure", 1.4)?,
        relax: s.f64("relax", 0.8)?,
        max_iter: s.u64("max_iter", 20_000)?,
        tolerance: s.f64("tolerance", 1e-6)?,
    };
    if !(0.2..=1.3).contains(&case.speed) {
        return Err(format!("speed {} is outside 0.2 .. 1.3", case.speed));
    }
    if !(case.relax > 0.0 && case.relax <= 2.0) {
        return Err(format!("relax {} must be in (0, 2]", case.relax));
    }
    let dir = s.path("dir", ".");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let delay = Duration::from_micros((s.f64("delay_ms", 0.0)? * 1000.0) as u64);
    let fault = s.text("fault").map(str::to_owned);
    let mut control = ControlFile::new(s.path("control", "control.txt"));
    let mut out = Output::create(&dir)?;
    let stdout = std::io::stdout();
    println!(
        " NPSS-COMPRESSOR  quasi-1-D Euler, {POINTS} points\n SPEED = {:.4}  BACK PRESSURE = {:.4}  RELAX = {:.3}",
        case.speed, case.back_pressure, case.relax
    );
    let mut flow = Flow::new(&case);
    let mut relax = case.relax;
    let mut iter = 0;
    let code = loop {
        iter += 1;
        let res = flow.step(relax);
        let diverged = res.iter().any(|r| !r.is_finite() || *r > 1e6);
        let converged = res.iter().all(|r| *r < case.tolerance);
        if iter % 10 == 0 || converged || diverged {
            let mut line = stdout.lock();
            let _ = writeln!(
                line,
                " ITER {iter:6}  RES(RHO)= {}  RES(RHOU)= {}  RES(E)= {}  MDOT= {:.6}",
                fortran(res[0]),
                fortran(res[1]),
                fortran(res[2]),
                flow.mass_flow(POINTS / 2)
            );
            let _ = line.flush();
            out.residuals(iter, &res, &flow)?;
        }
        if iter % 500 == 0 {
            out.pressure(iter, &flow)?;
        }
        if diverged {
            eprintln!(" *** FLOATING POINT OVERFLOW AT ITER {iter}: SOLUTION DIVERGED ***");
            eprintln!(" *** TRY A SMALLER RELAXATION FACTOR (RELAX = {relax:.3}) ***");
            break 2;
        }
        if converged {
            println!(" CONVERGED AFTER {iter} ITERATIONS");
            break 0;
        }
        if iter >= case.max_iter {
            println!(" NOT CONVERGED AFTER {iter} ITERATIONS");
            break 3;
        }
        if iter % 10 == 0 {
            for line in control.poll() {
                let mut words = line.split_whitespace();
                match (words.next(), words.next().map(str::parse::<f64>)) {
                    (Some("stop"), _) => {
                        println!(" STOP REQUESTED AT ITER {iter}");
                        out.finish(&case, &flow, iter, false)?;
                        return Ok(3);
                    }
                    (Some("relax"), Some(Ok(r))) if r > 0.0 && r <= 2.0 => {
                        println!(" RELAX CHANGED FROM {relax:.3} TO {r:.3} AT ITER {iter}");
                        relax = r;
                    }
                    _ => eprintln!(" WARNING: CONTROL LINE NOT UNDERSTOOD: {line}"),
                }
            }
        }
        if iter == 50 {
            match fault.as_deref() {
                Some("hang") => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
                Some("crash") => {
                    eprintln!(" SEGMENTATION FAULT (simulated)");
                    std::process::abort();
                }
                _ => {}
            }
        }
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
    };
    out.pressure(iter, &flow)?;
    out.finish(&case, &flow, iter, code == 0)?;
    Ok(code)
}

/// Runs one case in process, without output: what tests and the map's interpolation check use.
pub fn solve(case: &Case) -> Outcome {
    let mut flow = Flow::new(case);
    let mut iterations = 0;
    let mut converged = false;
    while iterations < case.max_iter {
        iterations += 1;
        let res = flow.step(case.relax);
        if res.iter().any(|r| !r.is_finite() || *r > 1e6) {
            break;
        }
        if res.iter().all(|r| *r < case.tolerance) {
            converged = true;
            break;
        }
    }
    Outcome {
        mass_flow: flow.mass_flow(POINTS / 2),
        recovery: flow.total_pressure(POINTS - 1) / flow.total_pressure(0),
        iterations,
        converged,
    }
}

struct Output {
    dir: std::path::PathBuf,
    residuals: std::fs::File,
}

impl Output {
    fn create(dir: &Path) -> Result<Output, String> {
        let path = dir.join("residuals.dat");
        let mut residuals = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        writeln!(residuals, "# iter rho rhou energy mdot_in mdot_out")
            .map_err(|e| e.to_string())?;
        Ok(Output {
            dir: dir.to_owned(),
            residuals,
        })
    }

    fn residuals(&mut self, iter: u64, res: &[f64; 3], flow: &Flow) -> Result<(), String> {
        writeln!(
            self.residuals,
            "{iter} {:.6e} {:.6e} {:.6e} {:.6} {:.6}",
            res[0],
            res[1],
            res[2],
            flow.mass_flow(0),
            flow.mass_flow(POINTS - 1)
        )
        .map_err(|e| e.to_string())
    }

    /// Rewrites `pressure.dat` whole, as such codes do (the watch-dog sees a truncation).
    fn pressure(&self, iter: u64, flow: &Flow) -> Result<(), String> {
        let mut text = format!(" PRESSURE DISTRIBUTION  ITER {iter}\n");
        for i in 0..POINTS {
            let _ = write!(text, " {:>12}", scientific(flow.pressure(i), 5, 'E'));
            if i % 5 == 4 || i == POINTS - 1 {
                text.push('\n');
            }
        }
        std::fs::write(self.dir.join("pressure.dat"), text).map_err(|e| e.to_string())
    }

    fn finish(&self, case: &Case, flow: &Flow, iter: u64, converged: bool) -> Result<(), String> {
        let text = format!(
            "speed = {}\nback_pressure = {}\nrelax = {}\nmass_flow = {:.8}\nrecovery = {:.8}\niterations = {iter}\nconverged = {converged}\n",
            case.speed,
            case.back_pressure,
            case.relax,
            flow.mass_flow(POINTS / 2),
            flow.total_pressure(POINTS - 1) / flow.total_pressure(0),
        );
        std::fs::write(self.dir.join("result.dat"), text).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(relax: f64, back_pressure: f64) -> Case {
        Case {
            speed: 1.0,
            back_pressure,
            relax,
            max_iter: 40_000,
            tolerance: 1e-6,
        }
    }

    #[test]
    fn converges_below_courant_one_and_conserves_mass() {
        let o = solve(&case(0.8, 1.4));
        assert!(o.converged, "{o:?}");
        let mut f = Flow::new(&case(0.8, 1.4));
        for _ in 0..o.iterations {
            f.step(0.8);
        }
        // The shock in the diverging part costs the scheme about 1 % of the mass flow between
        // inlet and exit: what a mass-balance rule allows for.
        let (m_in, m_out) = (f.mass_flow(0), f.mass_flow(POINTS - 1));
        assert!((m_in - m_out).abs() / m_in < 0.02, "{m_in} vs {m_out}");
        assert!(o.recovery > 0.9 && o.recovery <= 1.0 + 1e-6, "{o:?}");
    }

    #[test]
    fn diverges_above_courant_one() {
        let o = solve(&case(1.3, 1.4));
        assert!(!o.converged, "{o:?}");
        assert!(
            o.iterations < 40_000,
            "it blew up rather than ran out: {o:?}"
        );
    }

    #[test]
    fn less_back_pressure_passes_more_flow() {
        let high = solve(&case(0.8, 1.75));
        let low = solve(&case(0.8, 1.6));
        assert!(high.converged && low.converged);
        assert!(low.mass_flow > high.mass_flow, "{low:?} {high:?}");
    }
}
