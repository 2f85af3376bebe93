//! The compressor's performance map: mass flow and total-pressure recovery over a grid of
//! speeds and back pressures, as the ensemble of high-fidelity runs builds it and the cycle
//! model reads it (NPSS's zooming: the 1-D model's component replaced by the detailed code's
//! results).
//!
//! File format, one point per line, columns named in the header:
//! ```text
//! # speed back_pressure mass_flow recovery
//! 0.6 1.2 0.561069 0.999790
//! ```
//! Points need not fill the grid: a missing one (a run that failed) is filled from its speed
//! line's neighbours when the map is read.

use std::path::Path;

/// One computed point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Corrected speed.
    pub speed: f64,
    /// Exit static pressure.
    pub back_pressure: f64,
    /// Mass flow.
    pub mass_flow: f64,
    /// Total-pressure recovery.
    pub recovery: f64,
}

/// A map over a grid, interpolated bilinearly.
#[derive(Debug, Clone)]
pub struct Map {
    speeds: Vec<f64>,
    pressures: Vec<f64>,
    /// `[speed][pressure]` → (mass flow, recovery).
    values: Vec<Vec<(f64, f64)>>,
}

impl Map {
    /// The map through `points`; `None` when some speed line has fewer than two points.
    pub fn from_points(points: &[Point]) -> Result<Map, String> {
        let mut speeds: Vec<f64> = points.iter().map(|p| p.speed).collect();
        let mut pressures: Vec<f64> = points.iter().map(|p| p.back_pressure).collect();
        for v in [&mut speeds, &mut pressures] {
            v.sort_by(f64::total_cmp);
            v.dedup();
        }
        if speeds.len() < 2 || pressures.len() < 2 {
            return Err("a map needs at least two speeds and two back pressures".into());
        }
        let mut values = Vec::with_capacity(speeds.len());
        for &s in &speeds {
            let line: Vec<(f64, f64, f64)> = points
                .iter()
                .filter(|p| p.speed == s)
                .map(|p| (p.back_pressure, p.mass_flow, p.recovery))
                .collect();
            if line.len() < 2 {
                return Err(format!(
                    "speed line {s} has {} point(s): at least two are needed",
                    line.len()
                ));
            }
            let row = pressures
                .iter()
                .map(|&bp| interpolate_line(&line, bp))
                .collect();
            values.push(row);
        }
        Ok(Map {
            speeds,
            pressures,
            values,
        })
    }

    /// Reads a map file.
    pub fn read(path: &Path) -> Result<Map, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the map {}: {e}", path.display()))?;
        let mut points = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let v: Vec<f64> = line
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| format!("{}:{}: expected four numbers", path.display(), n + 1))?;
            let [speed, back_pressure, mass_flow, recovery] = v[..] else {
                return Err(format!(
                    "{}:{}: expected four numbers",
                    path.display(),
                    n + 1
                ));
            };
            points.push(Point {
                speed,
                back_pressure,
                mass_flow,
                recovery,
            });
        }
        Map::from_points(&points).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes `points` as a map file.
    pub fn write(path: &Path, points: &[Point]) -> std::io::Result<()> {
        let mut text = String::from("# speed back_pressure mass_flow recovery\n");
        for p in points {
            text.push_str(&format!(
                "{} {} {:.8} {:.8}\n",
                p.speed, p.back_pressure, p.mass_flow, p.recovery
            ));
        }
        std::fs::write(path, text)
    }

    /// Mass flow and recovery at (`speed`, `back_pressure`), clamped to the map's edges.
    pub fn at(&self, speed: f64, back_pressure: f64) -> (f64, f64) {
        let (i, fs) = bracket(&self.speeds, speed);
        let (j, fp) = bracket(&self.pressures, back_pressure);
        let v = |a: usize, b: usize| self.values[a][b];
        let lerp =
            |x: (f64, f64), y: (f64, f64), f: f64| (x.0 + (y.0 - x.0) * f, x.1 + (y.1 - x.1) * f);
        lerp(
            lerp(v(i, j), v(i, j + 1), fp),
            lerp(v(i + 1, j), v(i + 1, j + 1), fp),
            fs,
        )
    }

    /// The back pressures the map spans.
    pub fn pressure_range(&self) -> (f64, f64) {
        (self.pressures[0], self.pressures[self.pressures.len() - 1])
    }
}

/// The interval of sorted `xs` holding `x` (clamped) and the fraction into it.
fn bracket(xs: &[f64], x: f64) -> (usize, f64) {
    let x = x.clamp(xs[0], xs[xs.len() - 1]);
    let i = xs
        .windows(2)
        .position(|w| x <= w[1])
        .unwrap_or(xs.len() - 2);
    let f = (x - xs[i]) / (xs[i + 1] - xs[i]);
    (i, f)
}

/// Linear interpolation along one speed line (sorted or not), clamped at its ends.
fn interpolate_line(line: &[(f64, f64, f64)], bp: f64) -> (f64, f64) {
    let mut l = line.to_vec();
    l.sort_by(|a, b| a.0.total_cmp(&b.0));
    let xs: Vec<f64> = l.iter().map(|p| p.0).collect();
    let (i, f) = bracket(&xs, bp);
    (
        l[i].1 + (l[i + 1].1 - l[i].1) * f,
        l[i].2 + (l[i + 1].2 - l[i].2) * f,
    )
}

/// The map the cycle uses before any high-fidelity run: a rough analytic estimate of the
/// speed lines (choked flow proportional to speed, falling off towards surge).
pub fn preliminary() -> Map {
    let mut points = Vec::new();
    for s in [0.5f64, 0.7, 0.9, 1.1, 1.3] {
        for bp in [1.0f64, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2] {
            let p0 = 1.0 + 0.8 * s * s;
            let r = (bp / p0).min(1.0);
            let choke = 1.04 * s;
            let mass_flow = if r < 0.85 {
                choke
            } else {
                choke * (1.0 - ((r - 0.85) / 0.15).powi(2)).max(0.02).sqrt()
            };
            points.push(Point {
                speed: s,
                back_pressure: bp,
                mass_flow,
                recovery: 0.95,
            });
        }
    }
    Map::from_points(&points).expect("the preliminary map's grid is complete")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_bilinearly_and_fills_a_missing_point() {
        let mut points = Vec::new();
        for s in [0.5, 1.0] {
            for bp in [1.0, 2.0] {
                points.push(Point {
                    speed: s,
                    back_pressure: bp,
                    mass_flow: s * 2.0 + bp,
                    recovery: 1.0,
                });
            }
        }
        // A third back pressure computed on one speed line only.
        points.push(Point {
            speed: 1.0,
            back_pressure: 3.0,
            mass_flow: 5.0,
            recovery: 1.0,
        });
        let m = Map::from_points(&points).unwrap();
        assert!((m.at(0.75, 1.5).0 - 3.0).abs() < 1e-12);
        // Clamped outside.
        assert!((m.at(2.0, 1.0).0 - 3.0).abs() < 1e-12);
        // The missing point (0.5, 3.0) is the speed line's end value.
        assert!((m.at(0.5, 3.0).0 - 3.0).abs() < 1e-12);
        let dir = std::env::temp_dir().join(format!("npss-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Map::write(&dir.join("m"), &points).unwrap();
        let back = Map::read(&dir.join("m")).unwrap();
        assert!((back.at(0.75, 1.5).0 - 3.0).abs() < 1e-9);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
