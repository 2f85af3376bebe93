//! Run-until conditions written as text, so that a remote client can say "run until
//! `nbody.step >= 1000`" without shipping code into the program.
//!
//! The language is deliberately small: comparisons of an attribute with a literal, joined by
//! `and` / `or` (`and` binds tighter; `&&` and `||` work too). A literal is parsed as the
//! attribute's own type, so `nbody.dt < 1e-3` and `solver.mode == "fast"` are checked when the
//! condition is given, not when it is first evaluated.

use super::{SteerError, get, parse_value};
use gyr_core::{ShortFloat, Value};
use std::cmp::Ordering;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "==" | "=" => Op::Eq,
            "!=" => Op::Ne,
            _ => return None,
        })
    }

    fn holds(self, o: Ordering) -> bool {
        match self {
            Op::Lt => o.is_lt(),
            Op::Le => o.is_le(),
            Op::Gt => o.is_gt(),
            Op::Ge => o.is_ge(),
            Op::Eq => o.is_eq(),
            Op::Ne => o.is_ne(),
        }
    }
}

/// `path op literal`.
#[derive(Debug, Clone)]
struct Comparison {
    path: String,
    op: Op,
    literal: Value,
}

/// A parsed condition: any of the groups holds when all of its comparisons hold.
#[derive(Debug, Clone)]
pub struct Condition {
    any_of: Vec<Vec<Comparison>>,
    text: String,
}

fn bad(condition: &str, reason: impl Into<String>) -> SteerError {
    SteerError::BadCondition {
        condition: condition.to_owned(),
        reason: reason.into(),
    }
}

/// Splits a condition into words: paths, operators, literals (quoted strings kept whole) and
/// the joiners `and`/`or`.
fn words(text: &str) -> Result<Vec<String>, SteerError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(ch) => s.push(ch),
                    None => return Err(bad(text, "a string is not closed with `\"`")),
                }
            }
            out.push(s);
        } else if "<>=!".contains(c) {
            let mut s = String::new();
            while let Some(&ch) = chars.peek() {
                if !"<>=!".contains(ch) {
                    break;
                }
                s.push(ch);
                chars.next();
            }
            out.push(s);
        } else if c == '&' || c == '|' {
            let mut s = String::new();
            while let Some(&ch) = chars.peek() {
                if ch != c {
                    break;
                }
                s.push(ch);
                chars.next();
            }
            out.push(s);
        } else {
            let mut s = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() || "<>=!&|\"".contains(ch) {
                    break;
                }
                s.push(ch);
                chars.next();
            }
            out.push(s);
        }
    }
    Ok(out)
}

impl Condition {
    /// Parses `text`, checking that every attribute exists and every literal fits its type.
    pub fn parse(text: &str) -> Result<Condition, SteerError> {
        let w = words(text)?;
        if w.is_empty() {
            return Err(bad(
                text,
                "it is empty; write e.g. `nbody.step >= 1000` or `solver.residual < 1e-6 and solver.iter > 10`",
            ));
        }
        let mut any_of = vec![Vec::new()];
        let mut i = 0;
        loop {
            let (Some(path), Some(op), Some(lit)) = (w.get(i), w.get(i + 1), w.get(i + 2)) else {
                return Err(bad(
                    text,
                    format!(
                        "expected `object.attribute OP value` at `{}` (OP is one of < <= > >= == !=)",
                        w[i..].join(" ")
                    ),
                ));
            };
            let op = Op::parse(op).ok_or_else(|| {
                bad(
                    text,
                    format!("`{op}` is not a comparison; use one of < <= > >= == !="),
                )
            })?;
            // A number compares with any numeric attribute (`step > 1e3`, `level == 5.0`), if
            // the attribute's type can hold it: a uint is never -1.
            let literal =
                parse_value(path, lit).or_else(|e| match (lit.parse::<f64>(), get(path)) {
                    (Ok(x), Ok(current)) if x.is_finite() && number(&current).is_some() => {
                        match type_range(&current) {
                            Some((lo, hi, ty)) if !(lo..=hi).contains(&x) => Err(bad(
                                text,
                                format!(
                                    "`{path}` is {ty}, from {} to {}: it is never {lit}",
                                    ShortFloat(lo),
                                    ShortFloat(hi)
                                ),
                            )),
                            _ => Ok(Value::Float(x)),
                        }
                    }
                    _ => Err(e),
                })?;
            if !matches!(op, Op::Eq | Op::Ne) && compare(&literal, &literal).is_none() {
                return Err(bad(
                    text,
                    format!("`{path}` is not a number: only == and != compare it"),
                ));
            }
            any_of
                .last_mut()
                .expect("starts with a group")
                .push(Comparison {
                    path: path.clone(),
                    op,
                    literal,
                });
            i += 3;
            match w.get(i).map(String::as_str) {
                None => break,
                Some("and" | "&&") => {}
                Some("or" | "||") => any_of.push(Vec::new()),
                Some(other) => {
                    return Err(bad(
                        text,
                        format!("expected `and` or `or`, found `{other}`"),
                    ));
                }
            }
            i += 1;
        }
        Ok(Condition {
            any_of,
            text: text.trim().to_owned(),
        })
    }

    /// The condition as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it holds now. An attribute that has gone away (its object was unregistered)
    /// counts as holding, so that the program pauses and the user sees why rather than it
    /// running on forever.
    pub fn holds(&self) -> bool {
        self.any_of.iter().any(|all| {
            all.iter().all(|c| match get(&c.path) {
                Ok(v) => match c.op {
                    Op::Eq => v == c.literal || compare(&v, &c.literal).is_some_and(|o| o.is_eq()),
                    Op::Ne => v != c.literal && !compare(&v, &c.literal).is_some_and(|o| o.is_eq()),
                    op => compare(&v, &c.literal).is_some_and(|o| op.holds(o)),
                },
                Err(_) => true,
            })
        })
    }
}

/// The values an integer attribute can take, and its type's name.
fn type_range(v: &Value) -> Option<(f64, f64, &'static str)> {
    match v {
        Value::Int(_) => Some((i64::MIN as f64, i64::MAX as f64, "an int")),
        Value::UInt(_) => Some((0.0, u64::MAX as f64, "a uint")),
        _ => None,
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(x) => Some(*x),
        _ => None,
    }
}

/// Numbers compare as numbers, whatever their integer or float type.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        _ => number(a)?.partial_cmp(&number(b)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_operators_and_strings() {
        assert_eq!(
            words(r#"a.b>=3 and c.d=="x y"||e.f != -1"#).unwrap(),
            vec![
                "a.b", ">=", "3", "and", "c.d", "==", "x y", "||", "e.f", "!=", "-1"
            ]
        );
        assert!(words("a.b == \"open").is_err());
    }

    #[test]
    fn empty_and_malformed_conditions_say_what_to_write() {
        let e = Condition::parse("  ").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = Condition::parse("x.y").unwrap_err().to_string();
        assert!(e.contains("object.attribute OP value"), "{e}");
    }
}
