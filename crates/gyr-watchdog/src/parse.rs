//! Lines to events: a [`LineParser`] per stream of lines (a pipe, one file), built from a
//! [`Spec`], keeps what spans lines (a table's columns, a block being read) and hands each
//! event to a callback as `(event index, values)`, the values in the event's field order with
//! `instance` last.
//!
//! Nothing is allocated per line once the buffers have grown: values are written in place,
//! regular expressions run with reused capture slots.
//!
//! ```
//! use gyr_watchdog::{Spec, parse::LineParser};
//! let spec = std::sync::Arc::new(Spec::parse(r#"
//! [[event]]
//! name = "solver.residual"
//! pattern = '^iter\s+(?P<iter>\d+)\s+res\s+(?P<res>\S+)'
//! fields = [{ name = "iter", type = "u32" }, { name = "res", type = "f64" }]
//! "#).unwrap());
//! let mut p = LineParser::new(spec, 0, "run1");
//! let mut got = Vec::new();
//! p.line("iter 7 res 1.5D-03", &mut |event, values| got.push((event, values.to_vec())));
//! assert_eq!(got[0].1[1], gyr_core::Value::Float(1.5e-3));
//! assert!(!p.line("something else", &mut |_, _| {}));
//! assert_eq!(p.stats().unmatched, 1);
//! ```

use crate::spec::{Rule, Separator, Spec};
use gyr_core::schema::ScalarType;
use gyr_core::{FieldType, Value};
use regex::CaptureLocations;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// What a parser did, since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Lines given.
    pub lines: u64,
    /// Lines no event took.
    pub unmatched: u64,
    /// Events produced.
    pub events: u64,
    /// Blocks that ended before their numbers were all read (no event).
    pub broken_blocks: u64,
}

/// Parses a float as programs write them: Rust's syntax, Fortran's `D` and `Q` exponents
/// (`1.5D-03`), an exponent without its letter (`1.234-105`), and a field of stars (Fortran's
/// overflow) as NaN.
pub fn parse_f64(s: &str) -> Option<f64> {
    let s = s.trim();
    let b = s.as_bytes();
    // Fortran's exponent letters never parse: go straight to the rewriting below.
    if !b.iter().any(|c| matches!(c, b'D' | b'd' | b'Q' | b'q'))
        && let Ok(x) = s.parse::<f64>()
    {
        return Some(x);
    }
    if b.is_empty() || b.len() > 64 {
        return None;
    }
    if b.iter().all(|&c| c == b'*') {
        return Some(f64::NAN);
    }
    let mut buf = [0u8; 72];
    let mut n = 0;
    let mut exp = false;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'D' | b'd' | b'Q' | b'q' if !exp => {
                buf[n] = b'E';
                n += 1;
                exp = true;
            }
            b'E' | b'e' => {
                buf[n] = c;
                n += 1;
                exp = true;
            }
            b'+' | b'-' if i > 0 && !exp && (b[i - 1].is_ascii_digit() || b[i - 1] == b'.') => {
                buf[n] = b'E';
                buf[n + 1] = c;
                n += 2;
                exp = true;
            }
            _ => {
                buf[n] = c;
                n += 1;
            }
        }
    }
    std::str::from_utf8(&buf[..n]).ok()?.parse().ok()
}

fn parse_i64(s: &str) -> Option<i64> {
    let s = s.trim();
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

fn int_fits(s: ScalarType, x: i64) -> bool {
    match s {
        ScalarType::I8 => i8::try_from(x).is_ok(),
        ScalarType::I16 => i16::try_from(x).is_ok(),
        ScalarType::I32 => i32::try_from(x).is_ok(),
        _ => true,
    }
}

fn uint_fits(s: ScalarType, x: u64) -> bool {
    match s {
        ScalarType::U8 => x <= u8::MAX as u64,
        ScalarType::U16 => x <= u16::MAX as u64,
        ScalarType::U32 => x <= u32::MAX as u64,
        _ => true,
    }
}

/// Writes `text` as a value of type `s` into `v`; false if it is not one.
fn set_scalar(v: &mut Value, s: ScalarType, text: &str) -> bool {
    match s {
        ScalarType::F32 | ScalarType::F64 => match parse_f64(text) {
            Some(x) => {
                *v = Value::Float(x);
                true
            }
            None => false,
        },
        ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64 => {
            match parse_i64(text) {
                Some(x) if int_fits(s, x) => {
                    *v = Value::Int(x);
                    true
                }
                _ => false,
            }
        }
        ScalarType::U8 | ScalarType::U16 | ScalarType::U32 | ScalarType::U64 => {
            match parse_u64(text) {
                Some(x) if uint_fits(s, x) => {
                    *v = Value::UInt(x);
                    true
                }
                _ => false,
            }
        }
        ScalarType::Bool => {
            let t = text.trim().trim_matches('.').to_ascii_lowercase();
            let b = match t.as_str() {
                "true" | "t" | "yes" | "y" | "1" | "on" => true,
                "false" | "f" | "no" | "n" | "0" | "off" => false,
                _ => return false,
            };
            *v = Value::Bool(b);
            true
        }
        _ => false,
    }
}

/// Writes `text` into `v` as a field of type `ty`.
fn set_field(v: &mut Value, ty: FieldType, text: &str) -> bool {
    match ty {
        FieldType::Str => {
            match v {
                Value::Str(s) => {
                    s.clear();
                    s.push_str(text);
                }
                other => *other = Value::Str(text.to_owned()),
            }
            true
        }
        FieldType::Scalar(s) => set_scalar(v, s, text),
        _ => false,
    }
}

fn zero(ty: FieldType) -> Value {
    match ty {
        FieldType::Str => Value::Str(String::new()),
        FieldType::Bytes => Value::Bytes(Vec::new()),
        FieldType::Array(s, n) => Value::Array(vec![zero(FieldType::Scalar(s)); n as usize]),
        FieldType::Scalar(s) => match s {
            ScalarType::F32 | ScalarType::F64 => Value::Float(0.0),
            ScalarType::Bool => Value::Bool(false),
            ScalarType::U8 | ScalarType::U16 | ScalarType::U32 | ScalarType::U64 => Value::UInt(0),
            _ => Value::Int(0),
        },
        _ => Value::Bool(false),
    }
}

/// A table's columns as the last header named them.
#[derive(Debug, Default)]
struct TableMap {
    /// For each column of the rows, the field it fills.
    columns: Vec<Option<usize>>,
}

/// A block being read.
#[derive(Debug)]
struct OpenBlock {
    /// Position of its event in this parser's rules.
    rule: usize,
    filled: usize,
}

/// One stream's parser: give it the stream's lines in order.
#[derive(Debug)]
pub struct LineParser {
    spec: Arc<Spec>,
    /// The events of this source, in spec order.
    rules: Vec<usize>,
    /// Per rule: the values of its next event (its fields, then `instance` and `run`).
    values: Vec<Vec<Value>>,
    /// Per rule: capture slots for its pattern or block start.
    locs: Vec<Option<CaptureLocations>>,
    /// Per rule: a table's columns, once a header was seen.
    tables: Vec<Option<TableMap>>,
    block: Option<OpenBlock>,
    stats: ParseStats,
    instance: String,
    /// The program's run (1 for its first start, counted by the supervisor; 0 when the
    /// watch-dog did not start it), which every event carries.
    run: Arc<AtomicU32>,
}

impl LineParser {
    /// A parser for the lines of source `source` (an index into [`Spec::sources`]), whose
    /// events carry `instance`.
    pub fn new(spec: Arc<Spec>, source: usize, instance: &str) -> LineParser {
        let rules: Vec<usize> = (0..spec.events.len())
            .filter(|&i| spec.events[i].sources.contains(&source))
            .collect();
        let values = rules
            .iter()
            .map(|&i| {
                spec.events[i]
                    .fields
                    .iter()
                    .map(|f| zero(f.ty))
                    .chain([Value::Str(instance.to_owned()), Value::UInt(0)])
                    .collect()
            })
            .collect();
        let locs = rules
            .iter()
            .map(|&i| match &spec.events[i].rule {
                Rule::Pattern { regex, .. } => Some(regex.capture_locations()),
                Rule::Block { start, .. } => Some(start.capture_locations()),
                Rule::Table { .. } => None,
            })
            .collect();
        let tables = rules.iter().map(|_| None).collect();
        LineParser {
            spec,
            rules,
            values,
            locs,
            tables,
            block: None,
            stats: ParseStats::default(),
            instance: instance.to_owned(),
            run: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The same parser, its events carrying the run `run` holds when each is made.
    pub fn with_run(mut self, run: Arc<AtomicU32>) -> LineParser {
        self.run = run;
        self
    }

    /// Writes the current run into the last value of `values`.
    fn stamp_run(run: &AtomicU32, values: &mut [Value]) {
        if let Some(v) = values.last_mut() {
            *v = Value::UInt(u64::from(run.load(Ordering::Relaxed)));
        }
    }

    /// Whether any event reads this source.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The instance its events carry.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The spec it parses by.
    pub fn spec(&self) -> &Arc<Spec> {
        &self.spec
    }

    /// What it did so far.
    pub fn stats(&self) -> ParseStats {
        self.stats
    }

    /// Forgets what spans lines (a table's header, an open block): for a file read again from
    /// its start.
    pub fn reset(&mut self) {
        if self.block.take().is_some() {
            self.stats.broken_blocks += 1;
        }
        for t in &mut self.tables {
            *t = None;
        }
    }

    /// Parses one line (without its newline); calls `emit(event, values)` for each event it
    /// completes, `event` an index into [`Spec::events`]. Returns whether an event took the
    /// line; a line none took is counted as unmatched.
    pub fn line(&mut self, line: &str, emit: &mut impl FnMut(usize, &[Value])) -> bool {
        self.stats.lines += 1;
        if self.block.is_some() && self.block_line(line, emit) {
            return true;
        }
        for k in 0..self.rules.len() {
            if self.try_rule(k, line, emit) {
                return true;
            }
        }
        self.stats.unmatched += 1;
        false
    }

    /// Continues an open block; false if the line ended it (the line is then parsed anew).
    fn block_line(&mut self, line: &str, emit: &mut impl FnMut(usize, &[Value])) -> bool {
        let Some(open) = &mut self.block else {
            return false;
        };
        let k = open.rule;
        let ev = &self.spec.events[self.rules[k]];
        let Rule::Block { field, len, .. } = ev.rule else {
            self.block = None;
            return false;
        };
        let FieldType::Array(elem, _) = ev.fields[field].ty else {
            self.block = None;
            return false;
        };
        let Value::Array(items) = &mut self.values[k][field] else {
            self.block = None;
            return false;
        };
        let mut filled = open.filled;
        for tok in line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|t| !t.is_empty())
        {
            if filled == len {
                break;
            }
            if !set_scalar(&mut items[filled], elem, tok) {
                // Not a line of the block's numbers: the block ends unfinished.
                self.block = None;
                self.stats.broken_blocks += 1;
                return false;
            }
            filled += 1;
        }
        open.filled = filled;
        if filled == len {
            self.block = None;
            self.stats.events += 1;
            Self::stamp_run(&self.run, &mut self.values[k]);
            emit(self.rules[k], &self.values[k]);
        }
        true
    }

    fn try_rule(&mut self, k: usize, line: &str, emit: &mut impl FnMut(usize, &[Value])) -> bool {
        let ei = self.rules[k];
        let spec = &self.spec;
        let ev = &spec.events[ei];
        match &ev.rule {
            Rule::Pattern { regex, captures } => {
                let Some(locs) = &mut self.locs[k] else {
                    return false;
                };
                if regex.captures_read(locs, line).is_none() {
                    return false;
                }
                let values = &mut self.values[k];
                for (g, f) in captures.iter().enumerate() {
                    let Some(f) = *f else { continue };
                    let text = locs.get(g).map(|(a, b)| &line[a..b]).unwrap_or("");
                    if !set_field(&mut values[f], ev.fields[f].ty, text) {
                        return false;
                    }
                }
                self.stats.events += 1;
                Self::stamp_run(&self.run, values);
                emit(ei, values);
                true
            }
            Rule::Block {
                start,
                captures,
                field,
                ..
            } => {
                let Some(locs) = &mut self.locs[k] else {
                    return false;
                };
                if start.captures_read(locs, line).is_none() {
                    return false;
                }
                let values = &mut self.values[k];
                for (g, f) in captures.iter().enumerate() {
                    let Some(f) = *f else { continue };
                    if f == *field {
                        continue;
                    }
                    let text = locs.get(g).map(|(a, b)| &line[a..b]).unwrap_or("");
                    if !set_field(&mut values[f], ev.fields[f].ty, text) {
                        return false;
                    }
                }
                if self.block.take().is_some() {
                    self.stats.broken_blocks += 1;
                }
                self.block = Some(OpenBlock { rule: k, filled: 0 });
                // Numbers on the start line after the match count too.
                let end = locs.get(0).map(|(_, e)| e).unwrap_or(line.len());
                let rest = &line[end..];
                if rest.split_whitespace().next().is_some() {
                    let _ = self.block_line(rest, emit);
                }
                true
            }
            Rule::Table {
                header,
                separator,
                comment,
            } => {
                if header.is_match(line) {
                    let words =
                        line.trim_start_matches(|c: char| comment.contains(c) || c.is_whitespace());
                    let mut columns = Vec::new();
                    for w in split_cells(words, *separator) {
                        let w = w.trim();
                        columns.push(
                            ev.fields
                                .iter()
                                .position(|f| f.column.as_deref().unwrap_or(&f.name) == w),
                        );
                    }
                    self.tables[k] = Some(TableMap { columns });
                    return true;
                }
                let Some(map) = &self.tables[k] else {
                    return false;
                };
                let values = &mut self.values[k];
                // Fields no column names stay NaN (floats) or 0.
                for (f, fd) in ev.fields.iter().enumerate() {
                    values[f] = match fd.ty {
                        FieldType::Scalar(ScalarType::F32 | ScalarType::F64) => {
                            Value::Float(f64::NAN)
                        }
                        ty => zero(ty),
                    };
                }
                let mut cells = 0;
                for (c, cell) in split_cells(line, *separator).enumerate() {
                    if c == 0 && parse_f64(cell).is_none() {
                        return false;
                    }
                    cells += 1;
                    let Some(Some(f)) = map.columns.get(c) else {
                        continue;
                    };
                    let ty = ev.fields[*f].ty;
                    if !set_field(&mut values[*f], ty, cell) {
                        match ty {
                            FieldType::Scalar(ScalarType::F32 | ScalarType::F64) => {
                                values[*f] = Value::Float(f64::NAN)
                            }
                            _ => return false,
                        }
                    }
                }
                if cells == 0 {
                    return false;
                }
                self.stats.events += 1;
                Self::stamp_run(&self.run, values);
                emit(ei, values);
                true
            }
        }
    }
}

fn split_cells(line: &str, sep: Separator) -> impl Iterator<Item = &str> {
    let (ws, ch) = match sep {
        Separator::Whitespace => (true, '\0'),
        Separator::Char(c) => (false, c),
    };
    let trimmed = line.trim();
    let mut it_ws = ws.then(|| trimmed.split_whitespace());
    let mut it_ch = (!ws).then(|| trimmed.split(ch).map(str::trim));
    std::iter::from_fn(move || match (&mut it_ws, &mut it_ch) {
        (Some(w), _) => w.next(),
        (_, Some(c)) => c.next(),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fortran_numbers() {
        assert_eq!(parse_f64("1.234D-05"), Some(1.234e-5));
        assert_eq!(parse_f64("1.234d+02"), Some(123.4));
        assert_eq!(parse_f64("-0.5E-3"), Some(-5e-4));
        assert_eq!(parse_f64("1.234-105"), Some(1.234e-105));
        assert_eq!(parse_f64(" 42 "), Some(42.0));
        assert!(parse_f64("*******").unwrap().is_nan());
        assert_eq!(parse_f64("abc"), None);
        assert_eq!(parse_f64("1-2-3"), None);
    }
}
