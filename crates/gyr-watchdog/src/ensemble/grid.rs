//! The ensemble's grid and members: axes from `--grid NAME=V1,V2,...` or `NAME=LO:HI:COUNT`,
//! one member per grid point (the last axis varying fastest), each named by its values
//! (`speed=0.8,back_pressure=1.4`), its command made from the template by replacing
//! placeholders, then changed by the overrides that select it; and what a member gives
//! (`--result`, `--from`).

use crate::spec::Spec;
use std::collections::HashMap;

/// Most members an ensemble may have.
pub const MAX_MEMBERS: usize = 10_000;
/// Most axes a grid may have.
pub const MAX_AXES: usize = 16;
/// Most results a member may give.
pub const MAX_RESULTS: usize = 64;
/// Placeholders every command may use besides the axes' names.
pub const BUILT_IN: [&str; 4] = ["dir", "member", "instance", "cwd"];

/// One value of an axis: as written (or computed) and as a number.
#[derive(Debug, Clone, PartialEq)]
pub struct GridValue {
    /// The text placed in commands and names.
    pub text: String,
    /// The number.
    pub value: f64,
}

/// One axis of the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Its name: the placeholder `{name}` and the map's column.
    pub name: String,
    /// Its values, in the order given.
    pub values: Vec<GridValue>,
}

/// A number as text: 12 significant digits, the shortest form that reads back the same
/// (`0.1 + 0.2` is `0.3`).
pub fn number_text(x: f64) -> String {
    let rounded: f64 = format!("{x:.11e}").parse().unwrap_or(x);
    if rounded == 0.0 {
        return "0".into();
    }
    format!("{rounded}")
}

/// A number as programs write them: Fortran's `D` exponent read too.
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    t.parse::<f64>()
        .ok()
        .or_else(|| t.replace(['D', 'd'], "e").parse().ok())
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

/// Reads one `--grid`: `NAME=V1,V2,...` (a list) or `NAME=LO:HI:COUNT` (COUNT values evenly
/// spaced from LO to HI, both included).
///
/// ```
/// use gyr_watchdog::ensemble::grid::parse_axis;
/// let a = parse_axis("back_pressure=1.2:1.8:4").unwrap();
/// let v: Vec<&str> = a.values.iter().map(|v| v.text.as_str()).collect();
/// assert_eq!(v, ["1.2", "1.4", "1.6", "1.8"]);
/// assert_eq!(parse_axis("speed=0.6,1.0").unwrap().values.len(), 2);
/// ```
pub fn parse_axis(s: &str) -> Result<Axis, String> {
    let usage = "give --grid NAME=V1,V2,... or --grid NAME=LO:HI:COUNT, e.g. --grid speed=0.6,0.8,1.0 or --grid back_pressure=1.2:1.8:4";
    let Some((name, rest)) = s.split_once('=') else {
        return Err(format!("--grid {s}: no `=`; {usage}"));
    };
    let name = name.trim();
    if !valid_name(name) {
        return Err(format!(
            "--grid {s}: `{name}` is not a name for an axis: use letters, digits and `_`, starting with a letter (it is the placeholder {{{name}}} in the command)"
        ));
    }
    if BUILT_IN.contains(&name) {
        return Err(format!(
            "--grid {s}: `{name}` is a placeholder of its own ({{{name}}}): name the axis otherwise"
        ));
    }
    let rest = rest.trim();
    let values: Vec<GridValue> = if rest.contains(':') {
        let parts: Vec<&str> = rest.split(':').map(str::trim).collect();
        let [lo, hi, count] = parts[..] else {
            return Err(format!("--grid {s}: a range is LO:HI:COUNT; {usage}"));
        };
        let (Some(lo), Some(hi)) = (parse_number(lo), parse_number(hi)) else {
            return Err(format!(
                "--grid {s}: `{lo}` and `{hi}` must be numbers; {usage}"
            ));
        };
        let count: usize = count.parse().map_err(|_| {
            format!("--grid {s}: the count `{count}` must be a whole number, 2 or more")
        })?;
        if !(lo.is_finite() && hi.is_finite()) || lo == hi {
            return Err(format!(
                "--grid {s}: LO and HI must be finite and differ; for one value give --grid {name}={}",
                number_text(lo)
            ));
        }
        if !(2..=MAX_MEMBERS).contains(&count) {
            return Err(format!(
                "--grid {s}: the count must be 2 to {MAX_MEMBERS} (for one value give --grid {name}=VALUE)"
            ));
        }
        (0..count)
            .map(|i| {
                let v = lo + (hi - lo) * i as f64 / (count - 1) as f64;
                let text = number_text(v);
                GridValue {
                    value: text.parse().unwrap_or(v),
                    text,
                }
            })
            .collect()
    } else {
        rest.split(',')
            .map(|v| {
                let v = v.trim();
                match parse_number(v) {
                    Some(x) if x.is_finite() && !v.is_empty() => Ok(GridValue {
                        text: v.to_owned(),
                        value: x,
                    }),
                    _ => Err(format!(
                        "--grid {s}: `{v}` is not a number; grid values are numbers (the map interpolates between them)"
                    )),
                }
            })
            .collect::<Result<_, _>>()?
    };
    if values.len() > MAX_MEMBERS {
        return Err(format!(
            "--grid {s}: {} values, more than the {MAX_MEMBERS} members an ensemble may have",
            values.len()
        ));
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].iter().any(|w| w.value == v.value) {
            return Err(format!(
                "--grid {s}: {} is given twice: each value once",
                v.text
            ));
        }
    }
    Ok(Axis {
        name: name.to_owned(),
        values,
    })
}

/// The grid: every combination of its axes' values is a member.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// The axes, the first varying slowest.
    pub axes: Vec<Axis>,
}

impl Grid {
    /// A grid of `axes`: at least one, names distinct, at most [`MAX_MEMBERS`] points.
    pub fn new(axes: Vec<Axis>) -> Result<Grid, String> {
        if axes.is_empty() {
            return Err(
                "no grid: give at least one --grid NAME=V1,V2,... (e.g. --grid speed=0.6,0.8,1.0)"
                    .into(),
            );
        }
        if axes.len() > MAX_AXES {
            return Err(format!(
                "{} axes: at most {MAX_AXES} --grid options",
                axes.len()
            ));
        }
        for (i, a) in axes.iter().enumerate() {
            if axes[..i].iter().any(|b| b.name == a.name) {
                return Err(format!(
                    "--grid {} is given twice: give each axis once, with all its values",
                    a.name
                ));
            }
        }
        let mut n: usize = 1;
        for a in &axes {
            n = n.saturating_mul(a.values.len());
        }
        if n > MAX_MEMBERS {
            return Err(format!(
                "the grid has {} members ({}), more than the {MAX_MEMBERS} an ensemble may run: use fewer values",
                if n == usize::MAX {
                    "too many".to_owned()
                } else {
                    n.to_string()
                },
                axes.iter()
                    .map(|a| format!("{} {}", a.values.len(), a.name))
                    .collect::<Vec<_>>()
                    .join(" × ")
            ));
        }
        Ok(Grid { axes })
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Whether it has none (never, once built).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Member `m`'s index on each axis.
    pub fn coords(&self, m: usize) -> Vec<usize> {
        let mut out = vec![0; self.axes.len()];
        let mut rest = m;
        for (k, a) in self.axes.iter().enumerate().rev() {
            out[k] = rest % a.values.len();
            rest /= a.values.len();
        }
        out
    }

    /// The member at these indices.
    pub fn member(&self, coords: &[usize]) -> usize {
        self.axes
            .iter()
            .zip(coords)
            .fold(0, |acc, (a, &c)| acc * a.values.len() + c)
    }

    /// Member `m`'s name: `speed=0.8,back_pressure=1.4`.
    pub fn name(&self, m: usize) -> String {
        self.axes
            .iter()
            .zip(self.coords(m))
            .map(|(a, c)| format!("{}={}", a.name, a.values[c].text))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Replaces each `{name}` in `word` by `lookup(name)`; `{{` and `}}` are `{` and `}`.
///
/// ```
/// use gyr_watchdog::ensemble::grid::substitute;
/// let look = |n: &str| (n == "speed").then(|| "0.8".to_string());
/// assert_eq!(substitute("--speed={speed}", &look).unwrap(), "--speed=0.8");
/// assert_eq!(substitute("{{x}}", &look).unwrap(), "{x}");
/// assert!(substitute("{sped}", &look).is_err());
/// ```
pub fn substitute(word: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(after) = tail.strip_prefix('}') {
            out.push('}');
            rest = after;
        } else {
            let Some(end) = tail.find('}') else {
                return Err(format!(
                    "`{word}`: a `{{` is not closed (write `{{{{` for a brace itself)"
                ));
            };
            let name = &tail[1..end];
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("`{word}`: no placeholder `{{{name}}}`")),
            }
            rest = &tail[end + 1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The placeholders a word uses.
pub fn placeholders(word: &str) -> Vec<String> {
    let found = std::cell::RefCell::new(Vec::new());
    let _ = substitute(word, &|n: &str| {
        found.borrow_mut().push(n.to_owned());
        Some(String::new())
    });
    found.into_inner()
}

/// A change of the command for the members it selects: `--override 'speed=0.8: --relax 0.4'`.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// As given.
    pub text: String,
    /// (axis, value index) pairs a member must all have.
    pub selector: Vec<(usize, usize)>,
    /// The changes, as `watched.restart` takes them (`--opt value`, `key=value`), with
    /// placeholders.
    pub args: String,
}

impl Override {
    /// Reads `SELECTOR: ARGS`, SELECTOR being `axis=value` pairs separated by commas (a
    /// member's name, or part of it).
    pub fn parse(s: &str, grid: &Grid) -> Result<Override, String> {
        let usage = "give --override 'AXIS=VALUE,...: ARGS', e.g. --override 'speed=0.8,back_pressure=1.4: --relax 0.4'";
        let Some((sel, args)) = s.split_once(':') else {
            return Err(format!("--override {s}: no `:`; {usage}"));
        };
        let mut selector = Vec::new();
        for part in sel.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((name, value)) = part.split_once('=') else {
                return Err(format!(
                    "--override {s}: `{part}` is not AXIS=VALUE; {usage}"
                ));
            };
            let (name, value) = (name.trim(), value.trim());
            let Some(k) = grid.axes.iter().position(|a| a.name == name) else {
                return Err(format!(
                    "--override {s}: the grid has no axis `{name}` (its axes: {})",
                    grid.axes
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            let axis = &grid.axes[k];
            let x = parse_number(value);
            let Some(v) = axis
                .values
                .iter()
                .position(|g| g.text == value || x.is_some_and(|x| same(x, g.value)))
            else {
                return Err(format!(
                    "--override {s}: {name}={value} is not on the grid ({name}: {})",
                    axis.values
                        .iter()
                        .map(|g| g.text.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            };
            selector.push((k, v));
        }
        if selector.is_empty() {
            return Err(format!(
                "--override {s}: say which members: {usage} (to change every member, change the command)"
            ));
        }
        Ok(Override {
            text: s.to_owned(),
            selector,
            args: args.trim().to_owned(),
        })
    }

    /// Whether member `coords` is selected.
    pub fn selects(&self, coords: &[usize]) -> bool {
        self.selector.iter().all(|&(k, v)| coords[k] == v)
    }
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Where one result of a member comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultSource {
    /// The value of `key` in the member's `--from` file (`key = value` lines).
    Key(String),
    /// The last value of a field of the spec's events, in the member's last run.
    Field {
        /// The event type (index into the spec's events).
        event: usize,
        /// The field (index into its fields).
        field: usize,
    },
}

/// What every member gives: named numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    /// The names, as given: the map's columns.
    pub names: Vec<String>,
    /// Where each comes from.
    pub sources: Vec<ResultSource>,
    /// The file of `key = value` lines, in the member's directory.
    pub from: Option<String>,
}

impl Results {
    /// `names` (from `--result`, comma-separated lists allowed) resolved: `EVENT.FIELD` of the
    /// spec, else a key of the `from` file.
    pub fn new(names: &[String], from: Option<&str>, spec: &Spec) -> Result<Results, String> {
        let names: Vec<String> = names
            .iter()
            .flat_map(|n| n.split(','))
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Err("say what each member gives: --result NAME,... (keys of --from FILE's `key = value` lines, or EVENT.FIELD of the spec's events)".into());
        }
        if names.len() > MAX_RESULTS {
            return Err(format!("{} results: at most {MAX_RESULTS}", names.len()));
        }
        if let Some(f) = from
            && (f.is_empty()
                || std::path::Path::new(f).is_absolute()
                || f.split('/').any(|c| c == ".."))
        {
            return Err(format!(
                "--from {f}: give a file's path inside the member's directory (relative, without `..`)"
            ));
        }
        let mut sources = Vec::with_capacity(names.len());
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(format!("--result {n} is given twice"));
            }
            if !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            {
                return Err(format!(
                    "--result {n}: a result's name is letters, digits, `_`, `-` and `.`"
                ));
            }
            let field = spec.events.iter().enumerate().find_map(|(e, def)| {
                let f = n.strip_prefix(def.name.as_str())?.strip_prefix('.')?;
                let k = def.fields.iter().position(|x| x.name == f)?;
                Some((e, k))
            });
            match field {
                Some((event, field)) => {
                    let f = &spec.events[event].fields[field];
                    if !f.ty.is_numeric() {
                        return Err(format!(
                            "--result {n}: the field is a {}, not a number",
                            f.ty
                        ));
                    }
                    sources.push(ResultSource::Field { event, field });
                }
                None if from.is_some() => sources.push(ResultSource::Key(n.clone())),
                None => {
                    return Err(format!(
                        "--result {n}: no event of the spec has this field, and no --from FILE is given to read it from: give --from FILE (e.g. --from result.dat, whose `{n} = value` line the member writes) or EVENT.FIELD (the spec's events: {})",
                        spec.events
                            .iter()
                            .map(|e| e.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        Ok(Results {
            names,
            sources,
            from: from.map(str::to_owned),
        })
    }
}

/// The `key = value` (or `key: value`) lines of a result file, keys as written; `#` and `!`
/// start comments; the last line of a key wins.
pub fn key_values(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let line = line.split(['#', '!']).next().unwrap_or("").trim();
        let Some((k, v)) = line.split_once(['=', ':']) else {
            continue;
        };
        let k = k.trim();
        if !k.is_empty() {
            out.insert(k.to_owned(), v.trim().to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        let a = parse_axis("speed=0.6, 0.8,1.0,1.2").unwrap();
        assert_eq!(a.name, "speed");
        assert_eq!(
            a.values.iter().map(|v| v.value).collect::<Vec<_>>(),
            [0.6, 0.8, 1.0, 1.2]
        );
        let r = parse_axis("bp=1.2:1.8:4").unwrap();
        assert_eq!(
            r.values.iter().map(|v| v.text.as_str()).collect::<Vec<_>>(),
            ["1.2", "1.4", "1.6", "1.8"]
        );
        assert_eq!(r.values[1].value, 1.4);
        let d = parse_axis("x=1:0:3").unwrap();
        assert_eq!(
            d.values.iter().map(|v| v.text.as_str()).collect::<Vec<_>>(),
            ["1", "0.5", "0"]
        );
        assert_eq!(parse_axis("x=1D-3").unwrap().values[0].value, 1e-3);
        for bad in [
            "speed",
            "=1,2",
            "1x=1",
            "dir=1",
            "s=a,b",
            "s=1,,2",
            "s=1,1",
            "s=1:2",
            "s=1:1:3",
            "s=1:2:1",
            "s=1:2:x",
            "s=1:2:100000",
            "s=inf",
        ] {
            assert!(parse_axis(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn numbers_print_short() {
        assert_eq!(number_text(0.1 + 0.2), "0.3");
        assert_eq!(number_text(1.2 + 0.6 / 3.0), "1.4");
        assert_eq!(number_text(-0.0), "0");
        assert_eq!(number_text(1e-7), "0.0000001");
    }

    fn grid() -> Grid {
        Grid::new(vec![
            parse_axis("speed=0.6,1.0").unwrap(),
            parse_axis("bp=1.2:1.8:3").unwrap(),
        ])
        .unwrap()
    }

    #[test]
    fn members_are_named_and_indexed() {
        let g = grid();
        assert_eq!(g.len(), 6);
        assert_eq!(g.coords(4), [1, 1]);
        assert_eq!(g.member(&[1, 1]), 4);
        for m in 0..6 {
            assert_eq!(g.member(&g.coords(m)), m);
        }
        assert_eq!(g.name(0), "speed=0.6,bp=1.2");
        assert_eq!(g.name(5), "speed=1.0,bp=1.8");
        assert!(
            Grid::new(vec![
                parse_axis("a=1:2:200").unwrap(),
                parse_axis("b=1:2:200").unwrap()
            ])
            .unwrap_err()
            .contains("40000")
        );
        assert!(Grid::new(vec![]).is_err());
        assert!(Grid::new(vec![parse_axis("a=1").unwrap(), parse_axis("a=2").unwrap()]).is_err());
    }

    #[test]
    fn substitutes_placeholders() {
        let look = |n: &str| match n {
            "speed" => Some("0.8".to_string()),
            "dir" => Some("/tmp/m-1".to_string()),
            _ => None,
        };
        assert_eq!(
            substitute("--out={dir}/s{speed}.dat", &look).unwrap(),
            "--out=/tmp/m-1/s0.8.dat"
        );
        assert_eq!(substitute("{{speed}} }", &look).unwrap(), "{speed} }");
        assert!(
            substitute("{speed", &look)
                .unwrap_err()
                .contains("not closed")
        );
        assert!(
            substitute("{fault}", &look)
                .unwrap_err()
                .contains("{fault}")
        );
        assert_eq!(placeholders("{a}-{b}{{c}}"), ["a", "b"]);
    }

    #[test]
    fn overrides_select_members() {
        let g = grid();
        let o = Override::parse("speed=1, bp=1.5 : --fault hang", &g).unwrap();
        assert_eq!(o.args, "--fault hang");
        assert!(o.selects(&[1, 1]));
        assert!(!o.selects(&[0, 1]));
        let line = Override::parse("speed=0.6: --relax 0.4", &g).unwrap();
        assert!(line.selects(&[0, 0]) && line.selects(&[0, 2]) && !line.selects(&[1, 0]));
        assert!(
            Override::parse("speed=0.7: x", &g)
                .unwrap_err()
                .contains("0.6, 1.0")
        );
        assert!(Override::parse("sped=0.6: x", &g).is_err());
        assert!(Override::parse("--relax 0.4", &g).is_err());
        assert!(Override::parse(": --relax 0.4", &g).is_err());
    }

    #[test]
    fn reads_result_files() {
        let kv = key_values("speed = 1.0\nmass_flow = 0.5D+00 ! flow\n# c\nrecovery: 0.99\nbad\n");
        assert_eq!(kv["mass_flow"], "0.5D+00");
        assert_eq!(parse_number(&kv["mass_flow"]), Some(0.5));
        assert_eq!(kv["recovery"], "0.99");
        assert!(!kv.contains_key("bad"));
    }

    #[test]
    fn resolves_results() {
        let spec = Spec::parse(
            r#"
[[event]]
name = "c.residual"
pattern = '^(?P<iter>\d+) (?P<mdot>\S+) (?P<note>\S+)$'
fields = [{ name = "iter", type = "u32" }, { name = "mdot", type = "f64" }, { name = "note", type = "string" }]
"#,
        )
        .unwrap();
        let r = Results::new(
            &["mass_flow,recovery".into(), "c.residual.mdot".into()],
            Some("result.dat"),
            &spec,
        )
        .unwrap();
        assert_eq!(r.names, ["mass_flow", "recovery", "c.residual.mdot"]);
        assert_eq!(r.sources[0], ResultSource::Key("mass_flow".into()));
        assert_eq!(r.sources[2], ResultSource::Field { event: 0, field: 1 });
        assert!(Results::new(&["mass_flow".into()], None, &spec).is_err());
        assert!(Results::new(&["c.residual.note".into()], None, &spec).is_err());
        assert!(Results::new(&["a".into()], Some("../x"), &spec).is_err());
        assert!(Results::new(&[], Some("r"), &spec).is_err());
    }
}
