//! Conditions compiled natively: the common shapes of a `when` (comparisons, arithmetic,
//! `&&`, `||`, `!`, `abs`, window functions with literal fields) evaluated without the rhai
//! interpreter, which is where the time of a rule goes.
//!
//! The compiled form follows rhai's semantics to the bit, including its relative tolerance
//! when comparing floats and its checked integer arithmetic. Whatever it does not handle
//! (strings, a fact read, an overflow, a field of another type in this event, a `last` past
//! its window) makes the evaluation give `None`, and the caller evaluates the same condition
//! with rhai: the native form is a shortcut, never a second meaning.

use super::window::{self, Expl, Group, MAX_EXPLS, WinFn};
use gyr_core::Value;
use rhai::Expr;

/// A value in a native evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum V {
    I(i64),
    F(f64),
    B(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A compiled condition.
#[derive(Debug, Clone)]
pub(crate) enum N {
    Const(V),
    /// A variable: index into [`Cond::vars`].
    Var(usize),
    Bin(Op, Box<N>, Box<N>),
    Not(Box<N>),
    Neg(Box<N>),
    Abs(Box<N>),
    And(Vec<N>),
    Or(Vec<N>),
    Win {
        f: WinFn,
        /// Index of the field among the partition's window fields.
        slot: u32,
        n: Option<Box<N>>,
        k: usize,
    },
    Count(usize),
    Outside(Box<N>, Box<N>, Box<N>),
    RelDiff(Box<N>, Box<N>),
}

/// A condition with the names of the variables it reads.
#[derive(Debug, Clone)]
pub(crate) struct Cond {
    pub(crate) root: N,
    pub(crate) vars: Vec<String>,
}

/// Where a variable's value comes from in one event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Field(usize),
    T,
    Pid,
    /// Not a number here (the program's name, a missing field): rhai decides.
    Other,
}

/// Compiles `e`; `slot_of` gives a window field's slot. `None`: not a shape handled natively.
pub(crate) fn compile(e: &Expr, slot_of: &dyn Fn(&str) -> Option<u32>) -> Option<Cond> {
    let mut vars = Vec::new();
    let root = node(e, slot_of, &mut vars)?;
    Some(Cond { root, vars })
}

fn lit_str(e: &Expr) -> Option<&str> {
    match e {
        Expr::StringConstant(s, _) => Some(s.as_str()),
        _ => None,
    }
}

fn lit_k(e: &Expr) -> Option<usize> {
    match e {
        Expr::IntegerConstant(i, _) => usize::try_from(*i).ok(),
        _ => None,
    }
}

fn node(e: &Expr, slot_of: &dyn Fn(&str) -> Option<u32>, vars: &mut Vec<String>) -> Option<N> {
    let mut sub = |e: &Expr| node(e, slot_of, vars).map(Box::new);
    Some(match e {
        Expr::BoolConstant(b, _) => N::Const(V::B(*b)),
        Expr::IntegerConstant(i, _) => N::Const(V::I(*i)),
        Expr::FloatConstant(x, _) => N::Const(V::F(**x)),
        Expr::Variable(x, _, _) => {
            if !x.2.is_empty() {
                return None;
            }
            let name = x.1.as_str();
            let i = match vars.iter().position(|v| v == name) {
                Some(i) => i,
                None => {
                    vars.push(name.to_owned());
                    vars.len() - 1
                }
            };
            N::Var(i)
        }
        Expr::And(list, _) | Expr::Or(list, _) => {
            let items = list
                .iter()
                .map(|x| node(x, slot_of, vars))
                .collect::<Option<Vec<_>>>()?;
            if matches!(e, Expr::And(..)) {
                N::And(items)
            } else {
                N::Or(items)
            }
        }
        Expr::FnCall(f, _) => {
            if !f.namespace.is_empty() {
                return None;
            }
            let args = &f.args;
            let name = f.name.as_str();
            match (name, args.len()) {
                ("!", 1) => N::Not(sub(&args[0])?),
                ("-", 1) => N::Neg(sub(&args[0])?),
                ("abs", 1) => N::Abs(sub(&args[0])?),
                ("+" | "-" | "*" | "/" | "%" | "==" | "!=" | "<" | "<=" | ">" | ">=", 2) => {
                    let op = match name {
                        "+" => Op::Add,
                        "-" => Op::Sub,
                        "*" => Op::Mul,
                        "/" => Op::Div,
                        "%" => Op::Rem,
                        "==" => Op::Eq,
                        "!=" => Op::Ne,
                        "<" => Op::Lt,
                        "<=" => Op::Le,
                        ">" => Op::Gt,
                        _ => Op::Ge,
                    };
                    let a = sub(&args[0])?;
                    N::Bin(op, a, sub(&args[1])?)
                }
                ("count", 1) => N::Count(lit_k(&args[0])?),
                ("outside", 3) => {
                    let x = sub(&args[0])?;
                    let lo = sub(&args[1])?;
                    N::Outside(x, lo, sub(&args[2])?)
                }
                ("rel_diff", 2) => {
                    let a = sub(&args[0])?;
                    N::RelDiff(a, sub(&args[1])?)
                }
                _ => {
                    let wf = WinFn::from_name(name)?;
                    if args.len() != wf.arity() {
                        return None;
                    }
                    let slot = slot_of(lit_str(&args[0])?)?;
                    let k = lit_k(args.last()?)?;
                    let n = if wf.arity() == 3 {
                        Some(sub(&args[1])?)
                    } else {
                        None
                    };
                    N::Win { f: wf, slot, n, k }
                }
            }
        }
        _ => return None,
    })
}

/// What a native evaluation reads.
pub(crate) struct Env<'a> {
    pub(crate) slots: &'a [Slot],
    pub(crate) values: &'a [Value],
    pub(crate) t: f64,
    pub(crate) pid: i64,
    pub(crate) group: &'a Group,
    /// Per window field: the event has no number there.
    pub(crate) bad: &'a [bool],
    pub(crate) expl: &'a mut Vec<Expl>,
}

impl Env<'_> {
    fn explain(&mut self, e: Expl) {
        if self.expl.len() < MAX_EXPLS {
            self.expl.push(e);
        }
    }
}

/// rhai's float comparison (checked build): equal within a relative `f64::EPSILON`.
fn fcmp(op: Op, x: f64, y: f64) -> bool {
    let max = if x * y == 0.0 {
        1.0
    } else {
        x.abs().max(y.abs())
    };
    let eps = f64::EPSILON;
    match op {
        Op::Eq => max == 0.0 || (x - y).abs() / max <= eps,
        Op::Ne => max != 0.0 && (x - y).abs() / max > eps,
        Op::Gt => max != 0.0 && (x - y) / max > eps,
        Op::Ge => max == 0.0 || (x - y) / max > -eps,
        Op::Lt => max != 0.0 && (y - x) / max > eps,
        _ => max == 0.0 || (y - x) / max > -eps,
    }
}

fn as_f(v: V) -> Option<f64> {
    match v {
        V::I(i) => Some(i as f64),
        V::F(x) => Some(x),
        V::B(_) => None,
    }
}

fn bin(op: Op, a: V, b: V) -> Option<V> {
    Some(match (a, b) {
        (V::I(x), V::I(y)) => match op {
            Op::Add => V::I(x.checked_add(y)?),
            Op::Sub => V::I(x.checked_sub(y)?),
            Op::Mul => V::I(x.checked_mul(y)?),
            Op::Div => V::I(if y == 0 {
                return None;
            } else {
                x.checked_div(y)?
            }),
            Op::Rem => V::I(if y == 0 {
                return None;
            } else {
                x.checked_rem(y)?
            }),
            Op::Eq => V::B(x == y),
            Op::Ne => V::B(x != y),
            Op::Lt => V::B(x < y),
            Op::Le => V::B(x <= y),
            Op::Gt => V::B(x > y),
            Op::Ge => V::B(x >= y),
        },
        (V::B(x), V::B(y)) => match op {
            Op::Eq => V::B(x == y),
            Op::Ne => V::B(x != y),
            _ => return None,
        },
        _ => {
            let (x, y) = (as_f(a)?, as_f(b)?);
            match op {
                Op::Add => V::F(x + y),
                Op::Sub => V::F(x - y),
                Op::Mul => V::F(x * y),
                Op::Div => V::F(x / y),
                Op::Rem => V::F(x % y),
                cmp => V::B(fcmp(cmp, x, y)),
            }
        }
    })
}

/// Evaluates `n`; `None`: let rhai evaluate the condition.
pub(crate) fn eval(n: &N, env: &mut Env<'_>) -> Option<V> {
    Some(match n {
        N::Const(v) => *v,
        N::Var(i) => match env.slots.get(*i)? {
            Slot::Field(f) => match env.values.get(*f)? {
                Value::Int(i) => V::I(*i),
                Value::UInt(u) => match i64::try_from(*u) {
                    Ok(i) => V::I(i),
                    Err(_) => V::F(*u as f64),
                },
                Value::Float(x) => V::F(*x),
                Value::Bool(b) => V::B(*b),
                _ => return None,
            },
            Slot::T => V::F(env.t),
            Slot::Pid => V::I(env.pid),
            Slot::Other => return None,
        },
        N::Bin(op, a, b) => {
            let a = eval(a, env)?;
            let b = eval(b, env)?;
            bin(*op, a, b)?
        }
        N::Not(a) => match eval(a, env)? {
            V::B(b) => V::B(!b),
            _ => return None,
        },
        N::Neg(a) => match eval(a, env)? {
            V::I(i) => V::I(i.checked_neg()?),
            V::F(x) => V::F(-x),
            V::B(_) => return None,
        },
        N::Abs(a) => match eval(a, env)? {
            V::I(i) => V::I(i.checked_abs()?),
            V::F(x) => V::F(x.abs()),
            V::B(_) => return None,
        },
        N::And(items) => {
            for i in items {
                match eval(i, env)? {
                    V::B(true) => {}
                    V::B(false) => return Some(V::B(false)),
                    _ => return None,
                }
            }
            V::B(true)
        }
        N::Or(items) => {
            for i in items {
                match eval(i, env)? {
                    V::B(false) => {}
                    V::B(true) => return Some(V::B(true)),
                    _ => return None,
                }
            }
            V::B(false)
        }
        N::Win { f, slot, n, k } => {
            if env.bad.get(*slot as usize).copied().unwrap_or(true) {
                return None;
            }
            let nv = match n {
                Some(n) => as_f(eval(n, env)?)?,
                None => 0.0,
            };
            let ring = env.group.rings.get(*slot as usize)?;
            let (v, e) = match f {
                WinFn::Dropped | WinFn::Rose => {
                    let (b, e) = window::orders(*f, *slot, ring, nv, *k);
                    (V::B(b), e)
                }
                WinFn::Stalled => {
                    let (b, e) = window::stalled(*slot, ring, nv, *k);
                    (V::B(b), e)
                }
                WinFn::Oscillates => {
                    let (b, e) = window::oscillates(*slot, ring, *k);
                    (V::B(b), e)
                }
                _ => {
                    if *f == WinFn::Last && ring.back(*k).is_none() {
                        return None;
                    }
                    let (x, e) = window::stat(*f, *slot, ring, *k);
                    (V::F(x), e)
                }
            };
            env.explain(e);
            v
        }
        N::Count(k) => {
            let value = (env.group.seen.min(i64::MAX as u64) as i64).min(*k as i64);
            env.explain(Expl::Count {
                k: (*k).min(u32::MAX as usize) as u32,
                value,
            });
            V::I(value)
        }
        N::Outside(x, lo, hi) => {
            let x = as_f(eval(x, env)?)?;
            let lo = as_f(eval(lo, env)?)?;
            let hi = as_f(eval(hi, env)?)?;
            let (r, e) = window::outside(x, lo, hi);
            env.explain(e);
            V::B(r)
        }
        N::RelDiff(a, b) => {
            let a = as_f(eval(a, env)?)?;
            let b = as_f(eval(b, env)?)?;
            let (r, e) = window::rel_diff(a, b);
            env.explain(e);
            V::F(r)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_comparisons_follow_rhai() {
        let e = rhai::Engine::new();
        let xs = [0.0, 1.0, -1.0, 1.0 + 1e-17, 3.5, 1e-300, f64::NAN, 2.0];
        for &x in &xs {
            for &y in &xs {
                for (op, sym) in [
                    (Op::Eq, "=="),
                    (Op::Ne, "!="),
                    (Op::Lt, "<"),
                    (Op::Le, "<="),
                    (Op::Gt, ">"),
                    (Op::Ge, ">="),
                ] {
                    let mut scope = rhai::Scope::new();
                    scope.push("x", x).push("y", y);
                    let want: bool = e
                        .eval_with_scope(&mut scope, &format!("x {sym} y"))
                        .unwrap();
                    assert_eq!(fcmp(op, x, y), want, "{x} {sym} {y}");
                }
            }
        }
    }
}
