//! The expert system: rules that watch a program's events, keep windows over them, reason
//! over facts in working memory, and ask for actions (NPSS's CLIPS rules, which warned and
//! later steered).
//!
//! A [`RuleSet`] is a compiled rules file (its format is in [`file`]); an [`Engine`] runs one
//! over events from any number of programs. For each event the engine:
//! 1. pushes the event's values into the windows its rules read (per program, event type and
//!    `per` group);
//! 2. evaluates the event rules watching its type, in agenda order (higher `salience` first,
//!    ties in file order), each just before it may fire, so that it sees what rules before it
//!    did; an event rule fires when its condition turns true (once per episode, see
//!    [`file`]), or on every event with `repeat`;
//! 3. while the program's working memory changed, evaluates the fact rules in agenda order
//!    and fires the first activation that has not fired (refraction, see [`facts`]), then
//!    looks again, at most [`MAX_CHAIN`] fact-rule firings per event.
//!
//! The engine executes nothing: each [`Firing`] carries the [`Action`]s its `then` asked
//! for, and the host carries them out. Working memory is the exception, as the engine owns it:
//! `assert` and `retract` are applied when the `then` has run through (a `then` that fails
//! changes nothing), and reported as actions too.
//!
//! Conditions of the common shapes are evaluated natively ([`native`]), others by rhai, with
//! the same meaning; `then` always runs in rhai. A failure of one rule on one event (a missing
//! field, a type mismatch, an endless loop stopped after [`MAX_OPERATIONS`]) is counted in
//! that rule's [`RuleState`] with its message and never stops the other rules.
//!
//! The engine is not `Send` (rhai's values are reference-counted): a host keeps it on one
//! thread, and a host that reloads rules keeps running the old set when the new file fails to
//! load ([`Engine::replace`] takes only a set that loaded).

mod action;
mod check;
mod facts;
pub mod file;
mod functions;
mod native;
pub mod window;

pub use action::{Action, Severity};
pub use facts::{Fact, MAX_ACTIVATIONS, MAX_FACTS};
pub use file::{MAX_FILE_BYTES, MAX_RULES, RulesError};
pub use functions::FUNCTIONS as RULE_FUNCTIONS;
pub use window::{MAX_GROUPS, MAX_WINDOW};

use crate::limits::limited_engine;
use functions::{Cursor, Mode, Program, State};
use gyr_core::{FieldType, Schema, Value};
use native::{Env, Slot, V};
use rhai::{Dynamic, EvalAltResult, Scope};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;
use std::rc::Rc;

/// Most operations one evaluation of a `when` or `then` may take: more is an endless loop.
pub const MAX_OPERATIONS: u64 = 100_000;
/// Most fact-rule firings one event may cause: past it the chain stops, as the error of the
/// rule that would have fired next.
pub const MAX_CHAIN: usize = 1_000;
/// Deepest nesting of calls to a rule's own functions: rules run on their host's thread, so
/// this is lower than a script's.
pub const MAX_CALL_LEVELS: usize = 16;

/// A hasher for small integer keys (pids, type ids): one multiplication.
#[derive(Debug, Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(29) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    name: String,
    on: Option<String>,
    per: Option<String>,
    salience: i64,
    repeat: bool,
    target: Option<String>,
    when: file::Located,
    then: file::Located,
    /// The condition on one line, for `why`.
    when_line: String,
    when_ast: rhai::AST,
    then_ast: rhai::AST,
    native: Option<native::Cond>,
    /// Variables the condition reads.
    vars: Vec<String>,
    /// The partition of an event rule, and its index among the partition's rules.
    part: Option<(usize, usize)>,
    windows: Vec<(String, usize)>,
}

/// Rules of one event type and `per` field share windows and groups.
#[derive(Debug, Clone)]
struct PartDef {
    on: String,
    per: Option<String>,
    /// Window fields and how many values each keeps.
    fields: Vec<String>,
    caps: Vec<usize>,
    /// Its rules' names, by their index in the partition.
    rules: Vec<String>,
}

/// A compiled rules file: every rule parsed and checked, ready for an [`Engine`].
pub struct RuleSet {
    origin: String,
    /// The file, for placing run-time errors in it.
    src: file::Source,
    rules: Vec<Rule>,
    parts: Vec<PartDef>,
    /// Event type → its rules, in agenda order.
    by_type: HashMap<String, Vec<usize>>,
    /// Fact rules, in agenda order.
    fact_rules: Vec<usize>,
    rhai: rhai::Engine,
    state: Rc<RefCell<State>>,
}

impl std::fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleSet")
            .field("origin", &self.origin)
            .field("rules", &self.rules.len())
            .finish_non_exhaustive()
    }
}

/// What a rule is, for listings (`gyr rules check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// Its name.
    pub name: String,
    /// The event type it watches (`None`: a fact rule).
    pub on: Option<String>,
    /// The field its windows are grouped by.
    pub per: Option<String>,
    /// Its salience.
    pub salience: i64,
    /// Fires on every matching event rather than once per episode.
    pub repeat: bool,
    /// The program its actions address, when not the one it fired for.
    pub target: Option<String>,
    /// Its condition, on one line.
    pub when: String,
    /// Window fields it reads, with the values each keeps.
    pub windows: Vec<(String, usize)>,
    /// Its condition is evaluated natively (else by rhai).
    pub native: bool,
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn rules_engine(state: &Rc<RefCell<State>>) -> rhai::Engine {
    let mut e = limited_engine();
    e.set_max_operations(MAX_OPERATIONS)
        .set_max_call_levels(MAX_CALL_LEVELS);
    // A rule's print goes nowhere: hosts run for days, and rules speak through alert().
    e.on_print(|_| {});
    e.on_debug(|_, _, _| {});
    functions::register(&mut e, state);
    e
}

/// The condition's expression.
fn top_expr(ast: &rhai::AST) -> Option<rhai::Expr> {
    match ast.statements() {
        [rhai::Stmt::Expr(e)] => Some((**e).clone()),
        [rhai::Stmt::FnCall(f, pos)] => Some(rhai::Expr::FnCall(f.clone(), *pos)),
        _ => None,
    }
}

/// rhai's message without the position it appends.
fn strip_position(msg: &str) -> &str {
    match msg.rfind(" (line ") {
        Some(i) if msg.ends_with(')') => &msg[..i],
        _ => msg,
    }
}

impl RuleSet {
    /// Compiles the rules file `source`, named `origin` in errors.
    pub fn parse(source: &str, origin: &str) -> Result<RuleSet, RulesError> {
        let src = file::Source {
            origin: origin.to_owned(),
            text: source.to_owned(),
        };
        let parsed = file::parse(&src)?;
        let state = Rc::new(RefCell::new(State::new(Vec::new())));
        let engine = rules_engine(&state);
        let known = check::Known::of(&engine);
        let mut rules = Vec::with_capacity(parsed.len());
        for p in parsed {
            let name = p.name.clone();
            let fail = |at: usize, msg: String| src.error(at, Some(&name), msg);
            let fact_rule = p.on.is_none();
            let when_ast = engine.compile_expression(&p.when.text).map_err(|e| {
                fail(
                    p.when.at(e.position()),
                    format!("`when`: {}; a condition is one rhai expression, e.g. rose(\"rho\", 2, 20) && iter > 10", parse_message(&e)),
                )
            })?;
            let then_ast = engine.compile(&p.then.text).map_err(|e| {
                fail(
                    p.then.at(e.position()),
                    format!("`then`: {}", parse_message(&e)),
                )
            })?;
            let uw = check::walk(&when_ast, &known, true, fact_rule)
                .map_err(|(pos, m)| fail(p.when.at(pos), m))?;
            let top = top_expr(&when_ast).ok_or_else(|| {
                fail(
                    p.when.start(),
                    "`when` must be one expression giving true or false".into(),
                )
            })?;
            check::boolean(&top).map_err(|(pos, m)| fail(p.when.at(pos), m))?;
            let ut = check::walk(&then_ast, &known, false, fact_rule)
                .map_err(|(pos, m)| fail(p.then.at(pos), m))?;
            let mut windows = uw.windows;
            windows.extend(ut.windows);
            rules.push((
                Rule {
                    name: p.name,
                    on: p.on.map(|o| o.0),
                    per: p.per.map(|o| o.0),
                    salience: p.salience,
                    repeat: p.repeat,
                    target: p.target,
                    when_line: one_line(&p.when.text),
                    when: p.when,
                    then: p.then,
                    when_ast,
                    then_ast,
                    native: None,
                    vars: uw.vars,
                    part: None,
                    windows,
                },
                top,
            ));
        }
        // Partitions: one per (event type, per field), with every window its rules read.
        let mut parts: Vec<PartDef> = Vec::new();
        for (r, _) in &mut rules {
            let Some(on) = &r.on else { continue };
            let pi = match parts.iter().position(|p| &p.on == on && p.per == r.per) {
                Some(i) => i,
                None => {
                    parts.push(PartDef {
                        on: on.clone(),
                        per: r.per.clone(),
                        fields: Vec::new(),
                        caps: Vec::new(),
                        rules: Vec::new(),
                    });
                    parts.len() - 1
                }
            };
            let part = &mut parts[pi];
            for (f, need) in &r.windows {
                match part.fields.iter().position(|x| x == f) {
                    Some(i) => part.caps[i] = part.caps[i].max(*need),
                    None => {
                        part.fields.push(f.clone());
                        part.caps.push(*need);
                    }
                }
            }
            r.part = Some((pi, part.rules.len()));
            part.rules.push(r.name.clone());
        }
        // Native forms, now that the window slots are known.
        for (r, top) in &mut rules {
            if let Some((pi, _)) = r.part {
                let fields = &parts[pi].fields;
                let slot_of = |f: &str| fields.iter().position(|x| x == f).map(|i| i as u32);
                r.native = native::compile(top, &slot_of);
            }
        }
        let rules: Vec<Rule> = rules.into_iter().map(|(r, _)| r).collect();
        let mut order: Vec<usize> = (0..rules.len()).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(rules[i].salience), i));
        let mut by_type: HashMap<String, Vec<usize>> = HashMap::new();
        let mut fact_rules = Vec::new();
        for i in order {
            match &rules[i].on {
                Some(on) => by_type.entry(on.clone()).or_default().push(i),
                None => fact_rules.push(i),
            }
        }
        state.borrow_mut().fields = parts.iter().map(|p| p.fields.clone()).collect();
        Ok(RuleSet {
            origin: origin.to_owned(),
            src,
            rules,
            parts,
            by_type,
            fact_rules,
            rhai: engine,
            state,
        })
    }

    /// Reads and compiles the rules file at `path`.
    pub fn load(path: &Path) -> Result<RuleSet, RulesError> {
        let origin = path.display().to_string();
        let whole = |message: String| RulesError {
            origin: origin.clone(),
            line: 0,
            column: 0,
            rule: None,
            message,
        };
        let meta = std::fs::metadata(path)
            .map_err(|e| whole(format!("cannot read the rules file: {e}; check the path")))?;
        if meta.len() > MAX_FILE_BYTES as u64 {
            return Err(whole(format!(
                "the file has {} bytes, more than the {MAX_FILE_BYTES} a rules file may have: split it",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            whole(format!(
                "cannot read the rules file: {e}; a rules file is UTF-8 TOML text"
            ))
        })?;
        RuleSet::parse(&text, &origin)
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The file's name as given.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The same rules with every condition evaluated by rhai, none natively: what the native
    /// forms save is measured against it (`gyr-bench rules`). A condition means the same
    /// either way.
    pub fn interpreted(mut self) -> RuleSet {
        for r in &mut self.rules {
            r.native = None;
        }
        self
    }

    /// The rules, in file order.
    pub fn info(&self) -> Vec<RuleInfo> {
        self.rules
            .iter()
            .map(|r| RuleInfo {
                name: r.name.clone(),
                on: r.on.clone(),
                per: r.per.clone(),
                salience: r.salience,
                repeat: r.repeat,
                target: r.target.clone(),
                when: r.when_line.clone(),
                windows: r.windows.clone(),
                native: r.native.is_some(),
            })
            .collect()
    }
}

fn parse_message(e: &rhai::ParseError) -> String {
    match e.err_type() {
        rhai::ParseErrorType::ExprTooDeep => format!(
            "expressions nest deeper than the limit of {} levels; split them up",
            crate::limits::DEFAULT_MAX_EXPR_DEPTHS.0
        ),
        other => other.to_string(),
    }
}

/// One event as the engine sees it.
#[derive(Debug, Clone, Copy)]
pub struct EventRef<'a> {
    /// The program's process id.
    pub pid: u32,
    /// The program's name.
    pub program: &'a str,
    /// When, in ns since the program's timestamp 0.
    pub t_ns: u64,
    /// Its type.
    pub schema: &'a Schema,
    /// Its fields, in schema order.
    pub values: &'a [Value],
}

/// A rule that fired, with why and what it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    /// The rule's name.
    pub rule: String,
    /// The program it fired for.
    pub pid: u32,
    /// That program's name.
    pub program: String,
    /// The time of the event that caused it, ns since the program's timestamp 0.
    pub t_ns: u64,
    /// The condition, and what its window functions saw (or the facts it read).
    pub why: String,
    /// What its `then` asked for, in order.
    pub actions: Vec<Action>,
    /// The program the steering and program-control actions address, when the rule's
    /// `target` names one; `None`: the program it fired for (`pid`).
    pub target: Option<String>,
}

/// When and for which program a rule last fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFiring {
    /// The event's time, ns since the program's timestamp 0.
    pub t_ns: u64,
    /// The program's pid.
    pub pid: u32,
    /// The program's name.
    pub program: String,
}

/// A rule's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleState {
    /// Its name.
    pub name: String,
    /// The event type it watches (`None`: a fact rule).
    pub on: Option<String>,
    /// How many times it fired.
    pub fired: u64,
    /// Its last firing.
    pub last_firing: Option<LastFiring>,
    /// How many evaluations failed.
    pub errors: u64,
    /// The last failure, with its place in the rules file.
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct Counters {
    fired: u64,
    last_firing: Option<LastFiring>,
    errors: u64,
    last_error: Option<String>,
}

/// What an event type resolves to in one program: computed once per (program, type).
#[derive(Debug)]
struct Plan {
    schema: Schema,
    parts: Vec<PlanPart>,
    rules: Vec<PlanRule>,
}

#[derive(Debug)]
struct PlanPart {
    part: usize,
    /// `None`: no `per`; `Some(None)`: a `per` field is not in this event type; else the
    /// fields' positions (several: `per = "instance,run"`).
    per: Option<Option<Vec<usize>>>,
    /// Per window field: its index in the event.
    fields: Vec<Option<usize>>,
    /// Per window field: not a number in this event type.
    bad: Vec<bool>,
}

#[derive(Debug)]
struct PlanRule {
    rule: usize,
    /// Index into [`Plan::parts`].
    pp: usize,
    /// The native condition's variables, resolved.
    slots: Vec<Slot>,
}

fn numeric(ty: FieldType) -> bool {
    ty.is_numeric() || ty == FieldType::Bool
}

impl Plan {
    fn new(set: &RuleSet, schema: &Schema) -> Plan {
        let mut parts: Vec<PlanPart> = Vec::new();
        let mut rules = Vec::new();
        for &ri in set.by_type.get(&schema.name).map_or(&[][..], |v| v) {
            let r = &set.rules[ri];
            let Some((pi, _)) = r.part else { continue };
            let pp = match parts.iter().position(|p| p.part == pi) {
                Some(i) => i,
                None => {
                    let def = &set.parts[pi];
                    let fields: Vec<Option<usize>> =
                        def.fields.iter().map(|f| schema.field_index(f)).collect();
                    let bad = fields
                        .iter()
                        .map(|i| i.is_none_or(|i| !numeric(schema.fields[i].ty)))
                        .collect();
                    parts.push(PlanPart {
                        part: pi,
                        per: def.per.as_ref().map(|p| {
                            p.split(',')
                                .map(|f| schema.field_index(f.trim()))
                                .collect::<Option<Vec<_>>>()
                        }),
                        fields,
                        bad,
                    });
                    parts.len() - 1
                }
            };
            let slots = r.native.as_ref().map_or_else(Vec::new, |c| {
                c.vars
                    .iter()
                    .map(|v| match schema.field_index(v) {
                        Some(i) if numeric(schema.fields[i].ty) => Slot::Field(i),
                        Some(_) => Slot::Other,
                        None if v == "t" => Slot::T,
                        None if v == "pid" => Slot::Pid,
                        None => Slot::Other,
                    })
                    .collect()
            });
            rules.push(PlanRule {
                rule: ri,
                pp,
                slots,
            });
        }
        Plan {
            schema: schema.clone(),
            parts,
            rules,
        }
    }
}

/// What the rhai scope holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScopeHolds {
    Nothing,
    /// The current event's variables.
    Event,
    /// A fact rule's variables (program, pid, t).
    Program,
}

/// Runs a [`RuleSet`] over events: windows, working memory, agenda, counters.
pub struct Engine {
    set: RuleSet,
    counters: Vec<Counters>,
    scope: Scope<'static>,
    holds: ScopeHolds,
    plans: IdMap<(u32, u32), Plan>,
    /// Per part of the current plan: its group's slot (`usize::MAX`: none).
    groups: Vec<usize>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rules", &self.set)
            .finish_non_exhaustive()
    }
}

/// The message of a failed evaluation, placed in the rules file.
fn run_error(src: &file::Source, loc: &file::Located, e: &EvalAltResult) -> String {
    let mut err = e;
    let mut pos = err.position();
    while let EvalAltResult::ErrorInFunctionCall(_, _, inner, _) = err {
        err = inner;
        if !err.position().is_none() {
            pos = err.position();
        }
    }
    let msg = match err {
        EvalAltResult::ErrorTooManyOperations(_) => {
            format!("went past {MAX_OPERATIONS} operations in one evaluation (an endless loop?)")
        }
        EvalAltResult::ErrorStackOverflow(_) => {
            format!("went past {MAX_CALL_LEVELS} nested function calls (endless recursion?)")
        }
        EvalAltResult::ErrorRuntime(v, _) => strip_position(&v.to_string()).to_owned(),
        EvalAltResult::ErrorVariableNotFound(name, _) => format!(
            "this event has no field `{name}` (and it is no variable of a rule): check the name"
        ),
        other => strip_position(&other.to_string()).to_owned(),
    };
    let (line, col) = src.line_col(loc.at(pos));
    format!("{}:{line}:{col}: {msg}", src.origin)
}

impl Engine {
    /// An engine running `rules`, with no windows or facts yet.
    pub fn new(rules: RuleSet) -> Engine {
        let counters = vec![Counters::default(); rules.rules.len()];
        Engine {
            set: rules,
            counters,
            scope: Scope::new(),
            holds: ScopeHolds::Nothing,
            plans: IdMap::default(),
            groups: Vec::new(),
        }
    }

    /// Runs `rules` from now on: windows and facts are kept (windows resized to what the new
    /// rules read), a rule kept by name keeps its counters, episodes and activations.
    pub fn replace(&mut self, rules: RuleSet) {
        let old = std::mem::replace(&mut self.set, rules);
        let mut old_state = old.state.borrow_mut();
        let mut st = self.set.state.borrow_mut();
        st.next_fact = old_state.next_fact;
        let rule_map: Vec<Option<usize>> = old
            .rules
            .iter()
            .map(|r| self.set.rules.iter().position(|n| n.name == r.name))
            .collect();
        for (pid, mut prog) in old_state.programs.drain() {
            let mut parts = Vec::with_capacity(self.set.parts.len());
            for def in &self.set.parts {
                let found = old
                    .parts
                    .iter()
                    .position(|o| o.on == def.on && o.per == def.per);
                let mut groups = match found {
                    Some(i) => std::mem::take(&mut prog.parts[i]),
                    None => window::Groups::default(),
                };
                let od = found.map(|i| &old.parts[i]);
                for g in &mut groups.slab {
                    let rings = def
                        .fields
                        .iter()
                        .zip(&def.caps)
                        .map(|(f, &cap)| {
                            od.and_then(|od| od.fields.iter().position(|x| x == f))
                                .map_or_else(|| window::Ring::new(cap), |i| g.rings[i].resized(cap))
                        })
                        .collect();
                    let active = def
                        .rules
                        .iter()
                        .map(|name| {
                            od.and_then(|od| od.rules.iter().position(|x| x == name))
                                .is_some_and(|i| g.active[i])
                        })
                        .collect();
                    g.rings = rings;
                    g.active = active;
                }
                parts.push(groups);
            }
            prog.parts = parts;
            prog.memory.refraction.renumber(&rule_map);
            // New fact rules get a look at the facts already there.
            prog.memory.changed = true;
            st.programs.insert(pid, prog);
        }
        drop(st);
        drop(old_state);
        let old_counters = std::mem::take(&mut self.counters);
        self.counters = self
            .set
            .rules
            .iter()
            .map(|r| {
                old.rules
                    .iter()
                    .position(|o| o.name == r.name)
                    .map_or_else(Counters::default, |i| old_counters[i].clone())
            })
            .collect();
        self.plans.clear();
        self.holds = ScopeHolds::Nothing;
    }

    /// The rules running now.
    pub fn rule_set(&self) -> &RuleSet {
        &self.set
    }

    /// Every rule's counters, in file order.
    pub fn rules(&self) -> Vec<RuleState> {
        self.set
            .rules
            .iter()
            .zip(&self.counters)
            .map(|(r, c)| RuleState {
                name: r.name.clone(),
                on: r.on.clone(),
                fired: c.fired,
                last_firing: c.last_firing.clone(),
                errors: c.errors,
                last_error: c.last_error.clone(),
            })
            .collect()
    }

    /// The facts of one program's working memory, or of all, in assertion order.
    pub fn facts(&self, program: Option<u32>) -> Vec<Fact> {
        let st = self.set.state.borrow();
        let mut out: Vec<Fact> = st
            .programs
            .iter()
            .filter(|(pid, _)| program.is_none_or(|p| p == **pid))
            .flat_map(|(_, p)| p.memory.facts.iter().cloned())
            .collect();
        out.sort_by_key(|f| f.id);
        out
    }

    /// Groups forgotten to stay within [`MAX_GROUPS`], all programs and types together.
    pub fn forgotten_groups(&self) -> u64 {
        let st = self.set.state.borrow();
        st.programs
            .values()
            .flat_map(|p| p.parts.iter().map(|g| g.forgotten))
            .sum()
    }

    /// Forgets a program that ended: its windows, facts and activations.
    pub fn forget_program(&mut self, pid: u32) {
        self.set.state.borrow_mut().programs.remove(&pid);
        self.plans.retain(|(p, _), _| *p != pid);
        self.holds = ScopeHolds::Nothing;
    }

    /// Counts a failure of the host carrying out an action of the rule `rule` (a write
    /// refused, an actuator that failed, an action the host cannot take) in that rule's
    /// errors, so that its state tells the whole story. A rule no longer in the set (the file
    /// was reloaded since) is ignored. Returns whether the rule was found.
    pub fn action_failed(&mut self, rule: &str, message: String) -> bool {
        match self.set.rules.iter().position(|r| r.name == rule) {
            Some(i) => {
                self.error(i, message);
                true
            }
            None => false,
        }
    }

    fn error(&mut self, rule: usize, msg: String) {
        let c = &mut self.counters[rule];
        c.errors += 1;
        c.last_error = Some(msg);
    }

    fn fill_event_scope(&mut self, ev: &EventRef<'_>, name: rhai::ImmutableString) {
        if self.holds == ScopeHolds::Event {
            return;
        }
        let s = &mut self.scope;
        s.clear();
        s.push("program", name);
        s.push("pid", i64::from(ev.pid));
        s.push("t", ev.t_ns as f64 / 1e9);
        for (f, v) in ev.schema.fields.iter().zip(ev.values) {
            s.push_dynamic(f.name.as_str(), action::to_dynamic(v));
        }
        self.holds = ScopeHolds::Event;
    }

    fn fill_program_scope(&mut self, pid: u32, t_ns: u64, name: rhai::ImmutableString) {
        let s = &mut self.scope;
        s.clear();
        s.push("program", name);
        s.push("pid", i64::from(pid));
        s.push("t", t_ns as f64 / 1e9);
        self.holds = ScopeHolds::Program;
    }

    /// Places a failure of a rule's `when` (or `then`) in the rules file.
    fn place(&self, rule: usize, in_then: bool, e: &EvalAltResult) -> String {
        let r = &self.set.rules[rule];
        run_error(&self.set.src, if in_then { &r.then } else { &r.when }, e)
    }

    fn program_name(&self, pid: u32) -> rhai::ImmutableString {
        self.set
            .state
            .borrow()
            .programs
            .get(&pid)
            .map(|p| p.name_dyn.clone())
            .unwrap_or_default()
    }

    /// One event in: the firings it caused (chained fact rules included), in firing order.
    pub fn event(&mut self, ev: &EventRef<'_>) -> Vec<Firing> {
        let mut out = Vec::new();
        let key = (ev.pid, ev.schema.id);
        let plan = match self.plans.remove(&key) {
            Some(p) if p.schema.same_shape(ev.schema) => p,
            _ => Plan::new(&self.set, ev.schema),
        };
        if plan.rules.is_empty() {
            self.plans.insert(key, plan);
            return out;
        }
        self.holds = ScopeHolds::Nothing;
        self.push_windows(ev, &plan);
        let t = ev.t_ns as f64 / 1e9;
        for pr in &plan.rules {
            let ri = pr.rule;
            let Some((part, idx)) = self.set.rules[ri].part else {
                continue;
            };
            let pp = &plan.parts[pr.pp];
            let gi = self.groups[pr.pp];
            if gi == usize::MAX {
                let r = &self.set.rules[ri];
                let msg = format!(
                    "{}: this `{}` event has no field `{}`, which the rule's `per` names: check the name",
                    self.set.origin,
                    ev.schema.name,
                    r.per.as_deref().unwrap_or("")
                );
                self.error(ri, msg);
                continue;
            }
            let mut verdict = None;
            {
                let mut st = self.set.state.borrow_mut();
                let st = &mut *st;
                st.expl.clear();
                if let Some(cond) = &self.set.rules[ri].native
                    && let Some(group) = st
                        .programs
                        .get(&ev.pid)
                        .and_then(|p| p.parts.get(part))
                        .and_then(|g| g.slab.get(gi))
                {
                    let mut env = Env {
                        slots: &pr.slots,
                        values: ev.values,
                        t,
                        pid: i64::from(ev.pid),
                        group,
                        bad: &pp.bad,
                        expl: &mut st.expl,
                    };
                    match native::eval(&cond.root, &mut env) {
                        Some(V::B(b)) => verdict = Some(b),
                        _ => st.expl.clear(),
                    }
                }
                if verdict.is_none() {
                    st.cur = Cursor {
                        pid: ev.pid,
                        part,
                        group: gi,
                    };
                    st.cur_bad.clear();
                    st.cur_bad.extend_from_slice(&pp.bad);
                    st.mode = Mode::When;
                }
            }
            let verdict = match verdict {
                Some(b) => b,
                None => {
                    let name = self.program_name(ev.pid);
                    self.fill_event_scope(ev, name);
                    let r = self.set.rhai.eval_ast_with_scope::<Dynamic>(
                        &mut self.scope,
                        &self.set.rules[ri].when_ast,
                    );
                    match r {
                        Ok(d) => match d.as_bool() {
                            Ok(b) => b,
                            Err(ty) => {
                                let msg = format!(
                                    "{}: `when` gave {ty}, not true or false: compare it, e.g. `x > 1`",
                                    self.set.origin
                                );
                                self.error(ri, msg);
                                continue;
                            }
                        },
                        Err(e) => {
                            let msg = self.place(ri, false, &e);
                            self.error(ri, msg);
                            continue;
                        }
                    }
                }
            };
            let fire = {
                let mut st = self.set.state.borrow_mut();
                match st
                    .programs
                    .get_mut(&ev.pid)
                    .and_then(|p| p.parts.get_mut(part))
                    .and_then(|g| g.slab.get_mut(gi))
                {
                    Some(g) => {
                        let was = g.active[idx];
                        g.active[idx] = verdict;
                        verdict && (self.set.rules[ri].repeat || !was)
                    }
                    None => false,
                }
            };
            if fire {
                let why = self.why_event(ri, part, ev);
                let cur = Cursor {
                    pid: ev.pid,
                    part,
                    group: gi,
                };
                if let Some(f) = self.fire(ri, ev.t_ns, Some((ev, &pp.bad)), cur, why) {
                    out.push(f);
                }
            }
        }
        self.plans.insert(key, plan);
        self.agenda(ev.pid, ev.t_ns, &mut out);
        out
    }

    /// Pushes the event's values into the windows of its groups; `self.groups` gets each
    /// part's group.
    fn push_windows(&mut self, ev: &EventRef<'_>, plan: &Plan) {
        let mut st = self.set.state.borrow_mut();
        let nparts = self.set.parts.len();
        let prog = st
            .programs
            .entry(ev.pid)
            .or_insert_with(|| Program::new(ev.program, nparts));
        if prog.name != ev.program {
            prog.name = ev.program.to_owned();
            prog.name_dyn = ev.program.into();
        }
        self.groups.clear();
        for pp in &plan.parts {
            let def = &self.set.parts[pp.part];
            // Several `per` fields make one key of their values, joined.
            let joined;
            let key = match &pp.per {
                None => Some(None),
                Some(Some(i)) if i.len() == 1 => ev.values.get(i[0]).map(Some),
                Some(Some(fields)) => {
                    let parts: Option<Vec<String>> = fields
                        .iter()
                        .map(|&i| ev.values.get(i).map(|v| v.to_string()))
                        .collect();
                    match parts {
                        Some(p) => {
                            joined = Value::Str(p.join("\u{1f}"));
                            Some(Some(&joined))
                        }
                        None => None,
                    }
                }
                Some(None) => None,
            };
            let Some(key) = key else {
                self.groups.push(usize::MAX);
                continue;
            };
            let groups = &mut prog.parts[pp.part];
            let gi = groups.find(key, &def.caps, def.rules.len());
            let g = &mut groups.slab[gi];
            g.seen += 1;
            for (ring, f) in g.rings.iter_mut().zip(&pp.fields) {
                let x = f
                    .and_then(|i| ev.values.get(i))
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN);
                ring.push(x);
            }
            self.groups.push(gi);
        }
    }

    /// Why an event rule fired: its condition, what the window functions saw, the values of
    /// the variables it read.
    fn why_event(&self, ri: usize, part: usize, ev: &EventRef<'_>) -> String {
        let r = &self.set.rules[ri];
        let st = self.set.state.borrow();
        let fields = &self.set.parts[part].fields;
        let mut details: Vec<String> = st.expl.iter().map(|e| e.describe(fields)).collect();
        for v in &r.vars {
            let value = match ev.schema.field_index(v) {
                Some(i) => ev.values.get(i).map(|x| x.to_string()),
                None => match v.as_str() {
                    "t" => Some(format!("{:.6}", ev.t_ns as f64 / 1e9)),
                    "pid" => Some(ev.pid.to_string()),
                    "program" => Some(format!("{:?}", ev.program)),
                    _ => None,
                },
            };
            if let Some(value) = value {
                details.push(format!("{v} = {value}"));
            }
        }
        if details.is_empty() {
            r.when_line.clone()
        } else if details[0].starts_with(&format!("{}:", r.when_line)) {
            // The condition is the one call: its explanation says it all.
            details.join("; ")
        } else {
            format!("{}: {}", r.when_line, details.join("; "))
        }
    }

    /// Runs rule `ri`'s `then`; applies its changes to working memory and counts the firing.
    fn fire(
        &mut self,
        ri: usize,
        t_ns: u64,
        ev: Option<(&EventRef<'_>, &[bool])>,
        cur: Cursor,
        why: String,
    ) -> Option<Firing> {
        {
            let mut st = self.set.state.borrow_mut();
            st.mode = Mode::Then;
            st.actions.clear();
            st.pending_asserts = 0;
            st.cur = cur;
            st.cur_bad.clear();
            if let Some((_, bad)) = ev {
                st.cur_bad.extend_from_slice(bad);
            }
        }
        let name = self.program_name(cur.pid);
        match ev {
            Some((ev, _)) => self.fill_event_scope(ev, name.clone()),
            None => {
                if self.holds != ScopeHolds::Program {
                    self.fill_program_scope(cur.pid, t_ns, name.clone());
                }
            }
        }
        let r = self
            .set
            .rhai
            .run_ast_with_scope(&mut self.scope, &self.set.rules[ri].then_ast);
        // A `then` may assign to the event's variables: the scope is filled again when needed.
        self.holds = ScopeHolds::Nothing;
        let actions = std::mem::take(&mut self.set.state.borrow_mut().actions);
        if let Err(e) = r {
            let msg = self.place(ri, true, &e);
            self.error(ri, msg);
            return None;
        }
        let mut failed = None;
        {
            let mut st = self.set.state.borrow_mut();
            let st = &mut *st;
            if let Some(p) = st.programs.get_mut(&cur.pid) {
                for a in &actions {
                    match a {
                        Action::Assert { name, fields } => {
                            if let Err(e) =
                                p.memory
                                    .assert(cur.pid, name, fields.clone(), &mut st.next_fact)
                            {
                                failed = Some(e);
                            }
                        }
                        Action::Retract { name, fields } => {
                            p.memory.retract(name, fields.as_deref());
                        }
                        _ => {}
                    }
                }
            }
        }
        if let Some(e) = failed {
            let msg = format!("{}: {e}", self.set.origin);
            self.error(ri, msg);
        }
        let r = &self.set.rules[ri];
        let firing = Firing {
            rule: r.name.clone(),
            pid: cur.pid,
            program: name.to_string(),
            t_ns,
            why,
            actions,
            target: r.target.clone(),
        };
        let c = &mut self.counters[ri];
        c.fired += 1;
        c.last_firing = Some(LastFiring {
            t_ns,
            pid: cur.pid,
            program: firing.program.clone(),
        });
        Some(firing)
    }

    /// The fact rules' agenda for one program, while its working memory changed.
    fn agenda(&mut self, pid: u32, t_ns: u64, out: &mut Vec<Firing>) {
        {
            let mut st = self.set.state.borrow_mut();
            let Some(p) = st.programs.get_mut(&pid) else {
                return;
            };
            if !p.memory.changed {
                return;
            }
            if self.set.fact_rules.is_empty() {
                p.memory.changed = false;
                return;
            }
        }
        let name = self.program_name(pid);
        let mut chain = 0usize;
        let mut errored: Vec<usize> = Vec::new();
        let cur = Cursor {
            pid,
            part: usize::MAX,
            group: usize::MAX,
        };
        loop {
            let mut chosen = None;
            for k in 0..self.set.fact_rules.len() {
                let ri = self.set.fact_rules[k];
                {
                    let mut st = self.set.state.borrow_mut();
                    st.mode = Mode::FactWhen;
                    st.reads.clear();
                    st.expl.clear();
                    st.cur = cur;
                }
                if self.holds != ScopeHolds::Program {
                    self.fill_program_scope(pid, t_ns, name.clone());
                }
                let r = self
                    .set
                    .rhai
                    .eval_ast_with_scope::<Dynamic>(&mut self.scope, &self.set.rules[ri].when_ast);
                let msg = match r.map(|d| d.as_bool()) {
                    Ok(Ok(true)) => {
                        let st = self.set.state.borrow();
                        let mut ids = st.reads.clone();
                        ids.sort_unstable();
                        ids.dedup();
                        let fired = st
                            .programs
                            .get(&pid)
                            .is_some_and(|p| p.memory.refraction.has(ri, &ids));
                        if !fired {
                            chosen = Some((ri, ids));
                            break;
                        }
                        continue;
                    }
                    Ok(Ok(false)) => continue,
                    Ok(Err(ty)) => format!(
                        "{}: `when` gave {ty}, not true or false: compare it, e.g. `has(\"x\")`",
                        self.set.origin
                    ),
                    Err(e) => self.place(ri, false, &e),
                };
                if !errored.contains(&ri) {
                    errored.push(ri);
                    self.error(ri, msg);
                }
            }
            let Some((ri, ids)) = chosen else { break };
            if chain >= MAX_CHAIN {
                let msg = format!(
                    "{}: {MAX_CHAIN} fact rules fired on one event and this one was next: the chain was stopped (do rules keep asserting facts that make each other fire?)",
                    self.set.origin
                );
                self.error(ri, msg);
                break;
            }
            chain += 1;
            let why = {
                let mut st = self.set.state.borrow_mut();
                let facts: Vec<String> = st
                    .programs
                    .get(&pid)
                    .map(|p| {
                        p.memory
                            .facts
                            .iter()
                            .filter(|f| ids.contains(&f.id))
                            .map(|f| f.to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(p) = st.programs.get_mut(&pid) {
                    p.memory.refraction.insert(ri, ids);
                }
                let line = &self.set.rules[ri].when_line;
                if facts.is_empty() {
                    line.clone()
                } else {
                    format!("{line}: facts {}", facts.join("; "))
                }
            };
            if let Some(f) = self.fire(ri, t_ns, None, cur, why) {
                out.push(f);
            }
        }
        if let Some(p) = self.set.state.borrow_mut().programs.get_mut(&pid) {
            p.memory.changed = false;
        }
    }
}
