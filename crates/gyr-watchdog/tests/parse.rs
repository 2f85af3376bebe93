//! The parsers on the outputs solvers really write: a residual line per iteration with
//! Fortran exponents, a table with a header that changes mid-file, a 52-number block spread
//! over lines, a warning pattern, and unmatched lines counted.

use gyr_core::Value;
use gyr_watchdog::{LineParser, Spec};
use std::sync::Arc;

fn parser(text: &str, source: &str, instance: &str) -> (Arc<Spec>, LineParser) {
    let spec = Arc::new(Spec::parse(text).unwrap());
    let src = spec.source(source).unwrap();
    let p = LineParser::new(spec.clone(), src, instance);
    (spec, p)
}

fn feed(p: &mut LineParser, text: &str) -> Vec<(usize, Vec<Value>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        p.line(line, &mut |e, v| out.push((e, v.to_vec())));
    }
    out
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn residual_lines_with_fortran_exponents() {
    let (_, mut p) = parser(
        r#"
[[event]]
name = "adpac.residual"
pattern = '^\s*(?P<iter>\d+)\s+(?P<rms>\S+)\s+(?P<max>\S+)\s+(?P<i>\d+)\s*$'
fields = [
  { name = "iter", type = "u32" }, { name = "rms", type = "f64" },
  { name = "max", type = "f64" }, { name = "i", type = "i32" },
]
"#,
        "stdout",
        "r1",
    );
    let got = feed(
        &mut p,
        "  ADPAC ITERATION HISTORY\n     1  0.1234D-02  0.5678D+00   17\n     2  0.9876E-03  4.5-105   18\n     3  ********  1.0   19\n",
    );
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].1[0], Value::UInt(1));
    assert_eq!(f(&got[0].1[1]), 0.1234e-2);
    assert_eq!(f(&got[0].1[2]), 0.5678);
    assert_eq!(got[0].1[3], Value::Int(17));
    assert_eq!(got[0].1[4], Value::Str("r1".into()));
    assert_eq!(f(&got[1].1[2]), 4.5e-105);
    assert!(f(&got[2].1[1]).is_nan(), "Fortran's overflow stars are NaN");
    assert_eq!(p.stats().unmatched, 1);
    assert_eq!(p.stats().lines, 4);
}

#[test]
fn a_value_that_does_not_fit_leaves_the_line_unmatched() {
    let (_, mut p) = parser(
        r#"
[[event]]
name = "n"
pattern = '^n=(?P<n>\S+)'
fields = [{ name = "n", type = "u8" }]
"#,
        "stdout",
        "",
    );
    assert_eq!(feed(&mut p, "n=300\nn=-1\nn=x\nn=7\n").len(), 1);
    assert_eq!(p.stats().unmatched, 3);
}

const TABLE: &str = r#"
[source.history]
file = "history.dat"

[[event]]
name = "tess.history"
source = "history"
table = { header = '^#\s*Iter' }
fields = [
  { name = "iter", type = "u32", column = "Iter" },
  { name = "rho", type = "f64" },
  { name = "e", type = "f64" },
]
"#;

#[test]
fn a_table_with_a_header_that_changes() {
    let (_, mut p) = parser(TABLE, "history", "");
    let got = feed(
        &mut p,
        "1 2 3\n# Iter  rho  u  v  e\n 1  1.0D-01  0.2  0.3  0.4\n 2  9.0E-02  N/A  0.3  0.5\n# Iter  e  rho\n 3  0.7  0.08\ngarbage line\n",
    );
    // The row before any header is no event; the new header re-maps the columns.
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].1[0], Value::UInt(1));
    assert_eq!((f(&got[0].1[1]), f(&got[0].1[2])), (0.1, 0.4));
    assert_eq!((f(&got[1].1[1]), f(&got[1].1[2])), (0.09, 0.5));
    assert_eq!(got[2].1[0], Value::UInt(3));
    assert_eq!((f(&got[2].1[1]), f(&got[2].1[2])), (0.08, 0.7));
    assert_eq!(p.stats().unmatched, 2);
    // A file read again from its start forgets the header.
    p.reset();
    assert!(feed(&mut p, " 4 0.1 0.2\n").is_empty());
}

#[test]
fn a_csv_table_with_a_column_missing() {
    let (_, mut p) = parser(
        &TABLE.replace(
            "table = { header = '^#\\s*Iter' }",
            "table = { header = '^Iter,', separator = \",\" }",
        ),
        "history",
        "",
    );
    let got = feed(&mut p, "Iter, rho\n5, 0.25\n");
    assert_eq!(got.len(), 1);
    assert_eq!(f(&got[0].1[1]), 0.25);
    assert!(f(&got[0].1[2]).is_nan(), "a field no column names is NaN");
}

const BLOCK: &str = r#"
[[event]]
name = "adpac.pressure"
block = { start = 'PRESSURE DISTRIBUTION AT ITERATION\s+(?P<iter>\d+)', field = "p" }
fields = [{ name = "iter", type = "u32" }, { name = "p", type = "[f64; 52]" }]

[[event]]
name = "adpac.residual"
pattern = '^\s*(?P<iter>\d+)\s+(?P<rms>\S+)$'
fields = [{ name = "iter", type = "u32" }, { name = "rms", type = "f64" }]
"#;

fn block_text(iter: u32, n: usize) -> String {
    let mut s = format!(" PRESSURE DISTRIBUTION AT ITERATION {iter}\n");
    for row in (0..n).collect::<Vec<_>>().chunks(5) {
        let cells: Vec<String> = row
            .iter()
            .map(|k| format!("{:.4}D+00", *k as f64 / 100.0))
            .collect();
        s.push_str(&format!("  {}\n", cells.join("  ")));
    }
    s
}

#[test]
fn a_52_number_block_over_11_lines() {
    let (_, mut p) = parser(BLOCK, "stdout", "");
    let text = format!("{}   12  1.0E-3\n", block_text(40, 52));
    assert_eq!(text.lines().count(), 1 + 11 + 1);
    let got = feed(&mut p, &text);
    assert_eq!(got.len(), 2, "the block, then the residual after it");
    assert_eq!(got[0].0, 0);
    assert_eq!(got[0].1[0], Value::UInt(40));
    let Value::Array(p52) = &got[0].1[1] else {
        panic!("an array")
    };
    assert_eq!(p52.len(), 52);
    assert_eq!(f(&p52[0]), 0.0);
    assert_eq!(f(&p52[51]), 0.51);
    assert_eq!(got[1].0, 1);
    assert_eq!(p.stats().unmatched, 0);
}

#[test]
fn a_block_cut_short_gives_no_event() {
    let (_, mut p) = parser(BLOCK, "stdout", "");
    let text = format!("{}NOT A NUMBER\n{}", block_text(1, 20), block_text(2, 52));
    let got = feed(&mut p, &text);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1[0], Value::UInt(2));
    assert_eq!(p.stats().broken_blocks, 1);
    assert_eq!(p.stats().unmatched, 1);
}

#[test]
fn warnings_and_unmatched_lines() {
    let (spec, mut p) = parser(
        r#"
[[event]]
name = "solver.warning"
severity = "warning"
source = ["stdout", "stderr"]
pattern = '(?i)^\s*\*+\s*warning:?\s*(?P<message>.*)$'
fields = [{ name = "message", type = "string" }]
"#,
        "stderr",
        "",
    );
    let got = feed(
        &mut p,
        " *** WARNING: negative density at cell 12\nok\n**warning cfl\n",
    );
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0].1[0],
        Value::Str("negative density at cell 12".into())
    );
    assert_eq!(got[1].1[0], Value::Str("cfl".into()));
    assert_eq!(spec.events[0].severity.unwrap().name(), "warning");
    assert_eq!(p.stats().unmatched, 1);
}

#[test]
fn the_first_event_in_spec_order_takes_a_line() {
    let (_, mut p) = parser(
        r#"
[[event]]
name = "a"
pattern = '^x (?P<v>\d+)'
fields = [{ name = "v", type = "u32" }]

[[event]]
name = "b"
pattern = '^x (?P<v>\d+) (?P<w>\d+)'
fields = [{ name = "v", type = "u32" }, { name = "w", type = "u32" }]
"#,
        "stdout",
        "",
    );
    let got = feed(&mut p, "x 1 2\n");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 0);
}
