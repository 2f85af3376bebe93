//! The map: every grid point with its results, the points of members left out filled from
//! their neighbours, written as a table whose header names the columns (the format
//! `examples/npss/src/map.rs` reads: `# speed back_pressure mass_flow recovery`, then one
//! point per line).
//!
//! A missing point is filled, in this order of preference, from points members computed
//! (never from other filled points):
//! 1. by linear interpolation between its nearest computed neighbours on both sides along one
//!    axis, the last axis tried first (along a speed line, then across speed lines);
//! 2. else by the nearest computed point on its line along the last axis (the value at the
//!    end of the line, as `map.rs` clamps when it reads a map).
//!
//! A point none of these reach (its whole line along the last axis left out, and no
//! neighbours on both sides along another axis) cannot be filled: the map is not built.

use super::grid::{Grid, number_text};

/// How a missing point was filled.
#[derive(Debug, Clone, PartialEq)]
pub enum Fill {
    /// Between two computed members along an axis.
    Interpolated {
        /// The axis.
        axis: usize,
        /// The members on either side.
        from: [usize; 2],
    },
    /// Copied from the nearest computed member on its line along an axis.
    Nearest {
        /// The axis.
        axis: usize,
        /// The member.
        from: usize,
    },
}

/// A point filled for a member left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Filled {
    /// The member.
    pub member: usize,
    /// How.
    pub how: Fill,
}

impl Filled {
    /// `interpolated along back_pressure between ... and ...`.
    pub fn describe(&self, grid: &Grid) -> String {
        match &self.how {
            Fill::Interpolated { axis, from } => format!(
                "interpolated along {} between {} and {}",
                grid.axes[*axis].name,
                grid.name(from[0]),
                grid.name(from[1])
            ),
            Fill::Nearest { axis, from } => format!(
                "copied from the nearest point along {}, {}",
                grid.axes[*axis].name,
                grid.name(*from)
            ),
        }
    }
}

/// The computed members along axis `k` through `coords`, as (axis value, member), sorted.
fn line(grid: &Grid, coords: &[usize], k: usize, have: &[bool]) -> Vec<(f64, usize)> {
    let mut c = coords.to_vec();
    let mut out: Vec<(f64, usize)> = (0..grid.axes[k].values.len())
        .filter_map(|v| {
            c[k] = v;
            let m = grid.member(&c);
            have[m].then_some((grid.axes[k].values[v].value, m))
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// Every point's results: `values[m]` is member `m`'s (`None`: left out), each as long as the
/// results. Returns the full grid's values and the points filled; an error says which points
/// could not be filled and why.
pub fn fill(
    grid: &Grid,
    values: &[Option<Vec<f64>>],
) -> Result<(Vec<Vec<f64>>, Vec<Filled>), String> {
    let have: Vec<bool> = values.iter().map(Option::is_some).collect();
    let width = values.iter().flatten().map(Vec::len).next().unwrap_or(0);
    if !have.iter().any(|h| *h) {
        return Err("no member gave a result: there is nothing to build a map from".into());
    }
    let last = grid.axes.len() - 1;
    let mut out = Vec::with_capacity(values.len());
    let mut filled = Vec::new();
    let mut unfillable: Vec<usize> = Vec::new();
    for (m, v) in values.iter().enumerate() {
        if let Some(v) = v {
            out.push(v.clone());
            continue;
        }
        let coords = grid.coords(m);
        let mut done = None;
        for k in (0..=last).rev() {
            let x = grid.axes[k].values[coords[k]].value;
            let l = line(grid, &coords, k, &have);
            let below = l.iter().rev().find(|(y, _)| *y < x);
            let above = l.iter().find(|(y, _)| *y > x);
            if let (Some(&(x0, a)), Some(&(x1, b))) = (below, above) {
                let f = (x - x0) / (x1 - x0);
                let (va, vb) = (values[a].as_deref(), values[b].as_deref());
                if let (Some(va), Some(vb)) = (va, vb) {
                    let v = va.iter().zip(vb).map(|(p, q)| p + (q - p) * f).collect();
                    done = Some((
                        v,
                        Fill::Interpolated {
                            axis: k,
                            from: [a, b],
                        },
                    ));
                    break;
                }
            }
        }
        if done.is_none() {
            let x = grid.axes[last].values[coords[last]].value;
            let l = line(grid, &coords, last, &have);
            if let Some(&(_, n)) = l
                .iter()
                .min_by(|p, q| (p.0 - x).abs().total_cmp(&(q.0 - x).abs()))
                && let Some(v) = &values[n]
            {
                done = Some((
                    v.clone(),
                    Fill::Nearest {
                        axis: last,
                        from: n,
                    },
                ));
            }
        }
        match done {
            Some((v, how)) => {
                out.push(v);
                filled.push(Filled { member: m, how });
            }
            None => {
                unfillable.push(m);
                out.push(vec![f64::NAN; width]);
            }
        }
    }
    if !unfillable.is_empty() {
        let axis = &grid.axes[last];
        // The lines (along the last axis) wholly left out.
        let mut lines: Vec<String> = Vec::new();
        for &m in &unfillable {
            let coords = grid.coords(m);
            let name = grid
                .axes
                .iter()
                .zip(&coords)
                .take(last)
                .map(|(a, &c)| format!("{}={}", a.name, a.values[c].text))
                .collect::<Vec<_>>()
                .join(",");
            if !lines.contains(&name) {
                lines.push(name);
            }
        }
        let what = if last == 0 {
            "every member was left out".to_owned()
        } else {
            format!(
                "every member of the line{} {} (along {}, {} .. {}) was left out, and {} no computed neighbours on both sides along another axis",
                if lines.len() == 1 { "" } else { "s" },
                lines.join("; "),
                axis.name,
                axis.values.first().map(|v| v.text.as_str()).unwrap_or(""),
                axis.values.last().map(|v| v.text.as_str()).unwrap_or(""),
                if lines.len() == 1 {
                    "it has"
                } else {
                    "they have"
                },
            )
        };
        return Err(format!(
            "the map cannot be built: {what}; see why the members failed above, then fix the command or the grid (or drop {} from --grid)",
            if last == 0 {
                "the failing values".to_owned()
            } else {
                lines.join(" and ")
            }
        ));
    }
    Ok((out, filled))
}

/// The map file: a header naming the columns, comment lines for the filled points, then one
/// line per point (grid values as given, results in full precision).
pub fn map_text(
    grid: &Grid,
    results: &[String],
    values: &[Vec<f64>],
    filled: &[Filled],
    key: &str,
) -> String {
    let mut s = String::from("#");
    for a in &grid.axes {
        s.push(' ');
        s.push_str(&a.name);
    }
    for r in results {
        s.push(' ');
        s.push_str(r);
    }
    s.push('\n');
    s.push_str(&format!("# made by gyr ensemble (cache key {key})\n"));
    for f in filled {
        s.push_str(&format!(
            "# filled: {}, {}\n",
            grid.name(f.member),
            f.describe(grid)
        ));
    }
    for (m, v) in values.iter().enumerate() {
        let coords = grid.coords(m);
        let mut cols: Vec<String> = grid
            .axes
            .iter()
            .zip(&coords)
            .map(|(a, &c)| a.values[c].text.clone())
            .collect();
        cols.extend(v.iter().map(|x| {
            if x.is_finite() {
                format!("{x}")
            } else {
                number_text(*x)
            }
        }));
        s.push_str(&cols.join(" "));
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ensemble::grid::parse_axis;

    fn grid(a: &str, b: &str) -> Grid {
        Grid::new(vec![parse_axis(a).unwrap(), parse_axis(b).unwrap()]).unwrap()
    }

    /// A plane: every interpolation of it is exact.
    fn plane(g: &Grid, m: usize) -> Vec<f64> {
        let c = g.coords(m);
        let (s, b) = (g.axes[0].values[c[0]].value, g.axes[1].values[c[1]].value);
        vec![2.0 * s + b, s - b]
    }

    #[test]
    fn fills_between_neighbours_along_the_line() {
        let g = grid("s=0.6,1.0", "b=1.2:1.8:4");
        let mut v: Vec<Option<Vec<f64>>> = (0..g.len()).map(|m| Some(plane(&g, m))).collect();
        v[1] = None; // s=0.6, b=1.4: between 1.2 and 1.6 on its line
        v[6] = None; // s=1.0, b=1.6
        let (out, filled) = fill(&g, &v).unwrap();
        for (m, row) in out.iter().enumerate() {
            for (x, y) in row.iter().zip(plane(&g, m)) {
                assert!((x - y).abs() < 1e-12, "member {m}: {x} vs {y}");
            }
        }
        assert_eq!(
            filled,
            [
                Filled {
                    member: 1,
                    how: Fill::Interpolated {
                        axis: 1,
                        from: [0, 2]
                    }
                },
                Filled {
                    member: 6,
                    how: Fill::Interpolated {
                        axis: 1,
                        from: [5, 7]
                    }
                },
            ]
        );
        assert!(
            filled[0]
                .describe(&g)
                .contains("along b between s=0.6,b=1.2 and s=0.6,b=1.6")
        );
    }

    #[test]
    fn fills_an_end_across_lines_else_from_the_nearest() {
        let g = grid("s=0.6,0.8,1.0", "b=1.2,1.5,1.8");
        let mut v: Vec<Option<Vec<f64>>> = (0..g.len()).map(|m| Some(plane(&g, m))).collect();
        // s=0.8, b=1.8: the end of its line, but between s=0.6 and s=1.0.
        v[5] = None;
        let (out, filled) = fill(&g, &v).unwrap();
        assert_eq!(
            filled[0].how,
            Fill::Interpolated {
                axis: 0,
                from: [2, 8]
            }
        );
        assert!((out[5][0] - plane(&g, 5)[0]).abs() < 1e-12);
        // s=0.6, b=1.8 too: an end, at the edge of the speeds: the nearest on its line; and
        // then s=0.8, b=1.8 has no computed neighbour below along s either.
        v[2] = None;
        let (out, filled) = fill(&g, &v).unwrap();
        assert_eq!(filled[0].how, Fill::Nearest { axis: 1, from: 1 });
        assert_eq!(out[2], plane(&g, 1));
        assert_eq!(filled[1].how, Fill::Nearest { axis: 1, from: 4 });
    }

    #[test]
    fn refuses_a_whole_line_left_out() {
        let g = grid("s=0.6,1.0", "b=1.2,1.5,1.8");
        let mut v: Vec<Option<Vec<f64>>> = (0..g.len()).map(|m| Some(plane(&g, m))).collect();
        v[..3].fill(None);
        let e = fill(&g, &v).unwrap_err();
        assert!(e.contains("line s=0.6"), "{e}");
        assert!(e.contains("drop s=0.6"), "{e}");
        // An inner line is interpolated across.
        let g = grid("s=0.6,0.8,1.0", "b=1.2,1.5,1.8");
        let mut v: Vec<Option<Vec<f64>>> = (0..g.len()).map(|m| Some(plane(&g, m))).collect();
        v[3..6].fill(None);
        let (out, filled) = fill(&g, &v).unwrap();
        assert_eq!(filled.len(), 3);
        assert!((out[4][1] - plane(&g, 4)[1]).abs() < 1e-12);
        assert!(fill(&g, &vec![None; 9]).is_err());
    }

    #[test]
    fn writes_the_map_format() {
        let g = grid("speed=0.6,1.0", "back_pressure=1.2,1.8");
        let v: Vec<Vec<f64>> = (0..4).map(|m| plane(&g, m)).collect();
        let f = [Filled {
            member: 1,
            how: Fill::Nearest { axis: 1, from: 0 },
        }];
        let text = map_text(&g, &["mass_flow".into(), "recovery".into()], &v, &f, "abc");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# speed back_pressure mass_flow recovery");
        assert!(lines[2].starts_with("# filled: speed=0.6,back_pressure=1.8, copied"));
        assert_eq!(lines[3], "0.6 1.2 2.4 -0.6");
        assert_eq!(lines.len(), 7);
    }
}
