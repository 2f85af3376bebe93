//! Checks of a rule's rhai at load, by walking its syntax tree: every call names a function
//! that exists with that many arguments, window functions name their field with a literal
//! string and use a literal window size within the cap, literal severities and signals exist,
//! actions stay in `then`, and a condition's shape can give true or false.
//!
//! Whether a condition gives a boolean is decided from its shape, not by running it: a
//! comparison, `!`, `&&`, `||` or a boolean built-in is a condition; a number, a string, an
//! arithmetic operation or a numeric built-in is not; a bare variable or another call could be
//! either (a boolean field), so it is left to run time, where a non-boolean result is the
//! rule's error.

use super::action::{self, Severity};
use super::functions::{ACTIONS, own_arities};
use super::window::{MAX_WINDOW, WinFn};
use rhai::{ASTNode, Expr, Position};
use std::collections::{HashMap, HashSet};

/// What the walk found in one piece of rhai.
#[derive(Debug, Default)]
pub(crate) struct Uses {
    /// Window fields and the values each call needs.
    pub(crate) windows: Vec<(String, usize)>,
    /// Variables read, in first-use order.
    pub(crate) vars: Vec<String>,
}

/// An error at a position in the rhai string.
pub(crate) type Found = (Position, String);

/// Functions rhai provides beyond its packages (keywords), callable with any arity.
const KEYWORDS: &[&str] = &[
    "print",
    "debug",
    "type_of",
    "Fn",
    "call",
    "curry",
    "is_def_var",
    "is_def_fn",
    "is_shared",
    "eval",
];

/// The functions an engine knows: name → argument counts.
#[derive(Debug, Default)]
pub(crate) struct Known(HashMap<String, Vec<usize>>);

impl Known {
    pub(crate) fn of(e: &rhai::Engine) -> Known {
        let mut m: HashMap<String, Vec<usize>> = HashMap::new();
        for (name, n) in e.collect_fn_metadata(
            None,
            |f| Some((f.metadata.name.to_string(), f.metadata.num_params)),
            true,
        ) {
            m.entry(name).or_default().push(n);
        }
        for v in m.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        Known(m)
    }
}

fn own_hint(name: &str) -> Option<&'static str> {
    super::functions::FUNCTIONS
        .iter()
        .find(|(sig, _)| sig.split(" / ").any(|s| s.split('(').next() == Some(name)))
        .map(|(sig, _)| *sig)
}

/// Walks `ast` (a condition when `is_when`, else a `then`); `fact_rule` says the rule has no
/// `on`.
pub(crate) fn walk(
    ast: &rhai::AST,
    known: &Known,
    is_when: bool,
    fact_rule: bool,
) -> Result<Uses, Found> {
    let script_fns: HashSet<(String, usize)> = ast
        .iter_functions()
        .map(|f| (f.name.to_owned(), f.params.len()))
        .collect();
    let mut uses = Uses::default();
    let mut found: Option<Found> = None;
    ast.walk(&mut |path: &[ASTNode<'_>]| {
        if found.is_some() {
            return false;
        }
        let r = match path.last() {
            // A call standing as a statement is a statement node.
            Some(ASTNode::Stmt(rhai::Stmt::FnCall(f, pos))) => call(
                f,
                *pos,
                0,
                known,
                &script_fns,
                is_when,
                fact_rule,
                &mut uses,
            ),
            Some(ASTNode::Expr(e)) => expr(e, known, &script_fns, is_when, fact_rule, &mut uses),
            _ => Ok(()),
        };
        if let Err(e) = r {
            found = Some(e);
            return false;
        }
        true
    });
    match found {
        Some(f) => Err(f),
        None => Ok(uses),
    }
}

fn expr(
    e: &Expr,
    known: &Known,
    script_fns: &HashSet<(String, usize)>,
    is_when: bool,
    fact_rule: bool,
    uses: &mut Uses,
) -> Result<(), Found> {
    match e {
        Expr::FnCall(f, pos) => call(f, *pos, 0, known, script_fns, is_when, fact_rule, uses),
        Expr::MethodCall(f, pos) => call(f, *pos, 1, known, script_fns, is_when, fact_rule, uses),
        Expr::Variable(x, _, _) => {
            let name = x.1.as_str();
            if !uses.vars.iter().any(|v| v == name) {
                uses.vars.push(name.to_owned());
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[allow(clippy::too_many_arguments)]
fn call(
    f: &rhai::FnCallExpr,
    pos: Position,
    receiver: usize,
    known: &Known,
    script_fns: &HashSet<(String, usize)>,
    is_when: bool,
    fact_rule: bool,
    uses: &mut Uses,
) -> Result<(), Found> {
    let name = f.name.as_str();
    let n = f.args.len() + receiver;
    // Operators, property access and indexing are rhai's own.
    if f.is_operator_call()
        || !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        || name.contains('$')
    {
        return Ok(());
    }
    if !f.namespace.is_empty() {
        return Err((
            pos,
            "rules use no modules: call functions by their plain name".into(),
        ));
    }
    if name == "call" && receiver == 0 && matches!(f.args.first(), Some(Expr::StringConstant(..))) {
        return Err((
            pos,
            "`call` is rhai's call of a function pointer: run an actuator or function with actuate(path, args...)".into(),
        ));
    }
    if KEYWORDS.contains(&name) || script_fns.contains(&(name.to_owned(), n)) {
        return Ok(());
    }
    let own = own_arities(name);
    let first_str = receiver == 0 && matches!(f.args.first(), Some(Expr::StringConstant(..)));
    // min(a, b) and max(a, b) are rhai's too; with a field's name first they are windows.
    let window_form = match name {
        "min" | "max" => first_str,
        _ => WinFn::from_name(name).is_some(),
    };
    if let Some(arities) =
        own.filter(|_| receiver == 0 && (window_form || WinFn::from_name(name).is_none()))
    {
        if !arities.contains(&n) {
            let hint = own_hint(name).unwrap_or(name);
            let takes = if arities.len() == 1 {
                format!(
                    "{} argument{}",
                    arities[0],
                    if arities[0] == 1 { "" } else { "s" }
                )
            } else {
                format!("{} to {} arguments", arities[0], arities[arities.len() - 1])
            };
            return Err((pos, format!("`{name}` takes {takes} ({hint}), not {n}")));
        }
        if is_when && ACTIONS.contains(&name) {
            return Err((
                pos,
                format!("`{name}` is an action: a condition only reads; put it in `then`"),
            ));
        }
        return literal_checks(f, pos, name, fact_rule, uses);
    }
    if let Some(arities) = known.0.get(name) {
        if arities.contains(&n) {
            return Ok(());
        }
        return Err((
            pos,
            format!(
                "`{name}` takes {} argument(s), not {n}",
                arities
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        ));
    }
    Err((
        pos,
        format!(
            "unknown function `{name}` ({n} argument{}): the rules' functions are dropped, rose, stalled, oscillates, slope, mean, min, max, last, count, outside, rel_diff, has, fact, facts, and in `then` the actions alert, set, actuate, sensor, start, stop, restart, signal, control, set_input, assert, retract (see docs/rules.md)",
            if n == 1 { "" } else { "s" }
        ),
    ))
}

fn literal_checks(
    f: &rhai::FnCallExpr,
    pos: Position,
    name: &str,
    fact_rule: bool,
    uses: &mut Uses,
) -> Result<(), Found> {
    let arg_pos = |i: usize| f.args.get(i).map_or(pos, |a| a.start_position());
    let lit = |i: usize| match f.args.get(i) {
        Some(Expr::StringConstant(s, _)) => Some(s.as_str()),
        _ => None,
    };
    let k_of = |i: usize, min: i64| -> Result<usize, Found> {
        match f.args.get(i) {
            Some(Expr::IntegerConstant(k, p)) if *k >= min && *k as u64 <= MAX_WINDOW as u64 => {
                let _ = p;
                Ok(*k as usize)
            }
            Some(Expr::IntegerConstant(k, p)) if *k >= min => Err((
                *p,
                format!(
                    "a window of {k} values is more than the {MAX_WINDOW} a rule may use: use a smaller k"
                ),
            )),
            Some(Expr::IntegerConstant(k, p)) => Err((
                *p,
                format!("the window size k is {k}: it must be {min} or more"),
            )),
            _ => Err((
                arg_pos(i),
                format!(
                    "`{name}`: give the window size k as a whole number written in the rule, e.g. 20 (the windows are sized at load)"
                ),
            )),
        }
    };
    if let Some(wf) = WinFn::from_name(name) {
        if fact_rule {
            return Err((
                pos,
                format!(
                    "`{name}` reads the events of an event rule's type: this rule has no `on`; add `on = \"TYPE\"`"
                ),
            ));
        }
        let Some(field) = lit(0) else {
            return Err((
                arg_pos(0),
                format!("`{name}`: give the field's name as a string, e.g. {name}(\"rho\", ...)"),
            ));
        };
        let k = k_of(f.args.len() - 1, if wf == WinFn::Last { 0 } else { 1 })?;
        uses.windows.push((field.to_owned(), wf.needs(k)));
        return Ok(());
    }
    match name {
        "count" => {
            if fact_rule {
                return Err((
                    pos,
                    "`count` counts an event rule's events: this rule has no `on`".into(),
                ));
            }
            k_of(0, 0)?;
        }
        "alert" => {
            if let Some(s) = lit(0)
                && Severity::parse(s).is_none()
            {
                return Err((
                    arg_pos(0),
                    format!("`{s}` is not a severity: use {}", Severity::NAMES),
                ));
            }
        }
        "signal" => {
            if let Some(s) = lit(0) {
                action::signal_name(s).map_err(|e| (arg_pos(0), e))?;
            }
        }
        "set" => {
            if let Some(s) = lit(0) {
                action::attribute_path(s).map_err(|e| (arg_pos(0), e))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// What a condition's shape gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Bool,
    Not(&'static str),
    Unknown,
}

fn shape(e: &Expr) -> Shape {
    match e {
        Expr::BoolConstant(..) | Expr::And(..) | Expr::Or(..) => Shape::Bool,
        Expr::IntegerConstant(..) | Expr::FloatConstant(..) => Shape::Not("a number"),
        Expr::StringConstant(..) | Expr::InterpolatedString(..) | Expr::CharConstant(..) => {
            Shape::Not("a string")
        }
        Expr::Array(..) => Shape::Not("an array"),
        Expr::Map(..) => Shape::Not("a map"),
        Expr::Unit(..) => Shape::Not("()"),
        Expr::FnCall(f, _) => {
            let name = f.name.as_str();
            let first_str = matches!(f.args.first(), Some(Expr::StringConstant(..)));
            match (name, f.args.len()) {
                ("==" | "!=" | "<" | "<=" | ">" | ">=" | "!", _) => Shape::Bool,
                ("+" | "-" | "*" | "/" | "%" | "**", _) => {
                    let all_num = f.args.iter().all(|a| shape(a) == Shape::Not("a number"));
                    if all_num {
                        Shape::Not("a number")
                    } else {
                        Shape::Unknown
                    }
                }
                ("dropped" | "rose" | "stalled", 3)
                | ("oscillates", 2)
                | ("outside", 3)
                | ("has", 1 | 2) => Shape::Bool,
                ("slope" | "mean" | "rel_diff", 2) | ("count", 1) => Shape::Not("a number"),
                ("min" | "max", 2) if first_str => Shape::Not("a number"),
                ("facts", 1) => Shape::Not("an array"),
                _ => Shape::Unknown,
            }
        }
        _ => Shape::Unknown,
    }
}

/// Whether a condition could give true or false; the error says what it gives instead.
pub(crate) fn boolean(e: &Expr) -> Result<(), Found> {
    match shape(e) {
        Shape::Not(what) => Err((
            e.start_position(),
            format!(
                "the condition gives {what}, not true or false: compare it, e.g. `mean(\"rho\", 10) < 1e-6`"
            ),
        )),
        _ => Ok(()),
    }
}
