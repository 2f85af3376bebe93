//! Steering scripts: sequences of steering commands written in rhai and run against a program
//! over its API (Progress's scripts).
//!
//! ```rhai
//! pause();
//! wait_paused();
//! set("nbody.dt", 0.0005);
//! let id = actuate("nbody.add_body", 1.0, 0.0, 0.0, 0.001);
//! run_until("nbody.step >= " + (get("nbody.step") + 100));
//! wait_paused();
//! print(`energy now ${get("nbody.energy")}`);
//! resume();
//! ```
//!
//! A refused command stops the script with the line and column of the call and the program's
//! reason, as a [`ScriptError`] that says whether the user's input was at fault (a refusal, a
//! limit, a script that does not parse) or the program went away.
//!
//! # Limits
//!
//! A script is the user's, but it must not take the client down. The engine is the one rules
//! run on too ([`crate::limits`]): it bounds the size of every value, how many variables live
//! at once, how deep calls and expressions nest, and allows no modules; together they keep a
//! script within a few hundred megabytes. Going past a limit stops the script with its line
//! and the limit, as the user's fault.
//!
//! Time is not bounded: a script that watches a program for hours (`next_event`, `wait_paused`,
//! `sleep` in a loop) runs as long as it likes. What is bounded is work without the program:
//! `DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS` operations with no call to it in between is a loop
//! that can never end, and stops the script.

use crate::limits::{
    DEFAULT_MAX_ARRAY_SIZE, DEFAULT_MAX_CALL_LEVELS, DEFAULT_MAX_EXPR_DEPTHS, DEFAULT_MAX_MAP_SIZE,
    DEFAULT_MAX_STRING_SIZE, DEFAULT_MAX_VARIABLES, limited_engine,
};
use gyr_client::Session;
use gyr_client::command::{self, SensorScope, SensorSetting};
use gyr_client::events::EventDecoder;
use gyr_proto::v1;
use gyr_proto::v1::control_request::Action;
use rhai::{Dynamic, Engine, EvalAltResult, ImmutableString, Map, Position};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Most operations a script runs between two calls to the program or `sleep` (about a minute
/// of pure computation): more is an endless loop, since nothing it waits for can change.
pub const DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS: u64 = 100_000_000;
/// Most memory the client may hold while a script runs, checked every
/// [`MEMORY_CHECK_EVERY`] operations where the system reports it (Linux): the value limits
/// above are not enforced on every path (rhai checks a map's entry, not the map, when one is
/// added by index), so this is the bound that holds whatever the script does.
pub const DEFAULT_MAX_MEMORY: u64 = 1 << 30;
/// Operations between two looks at the client's memory (a look costs a few microseconds).
const MEMORY_CHECK_EVERY: u64 = 256;
/// The stack of the thread a script runs on, enough for the deepest nesting allowed even in a
/// debug build (it is reserved, not used, until the script nests that deep).
const SCRIPT_STACK_SIZE: usize = 256 << 20;

/// The functions a script can call, with a line each for `help` in `gyr attach`.
pub const FUNCTIONS: &[(&str, &str)] = &[
    (
        "get(path)",
        "an attribute's value; get(\"obj\") gives a map of all",
    ),
    ("set(path, value)", "write an attribute"),
    ("set(#{path: value, ...})", "write several, all or none"),
    (
        "actuate(target, args...)",
        "run an actuator, or call a function (up to 8 args)",
    ),
    (
        "pause() / resume()",
        "stall at the next synch point / go on",
    ),
    ("step() / step(n)", "pass n synch points, then pause"),
    (
        "run_until(condition)",
        "run until e.g. \"nbody.step >= 100\" holds",
    ),
    (
        "wait_paused() / wait_paused(ms)",
        "wait until the program is paused",
    ),
    ("status()", "#{state, paused, at, records, lost}"),
    (
        "next_event(type) / next_event(type, ms)",
        "wait for an event, get its fields",
    ),
    (
        "sensor(type, setting)",
        "\"on\", \"off\", \"all\", \"every N\", \"rate R\"; type \"\" is all",
    ),
    ("sleep(ms)", "wait"),
    ("print(x)", "print a line"),
];

/// Converts a wire value into a script value.
pub fn to_dynamic(v: &v1::Value) -> Dynamic {
    use v1::value::Kind;
    match &v.kind {
        None => Dynamic::UNIT,
        Some(Kind::Int(i)) => Dynamic::from_int(*i),
        Some(Kind::Uint(u)) => match i64::try_from(*u) {
            Ok(i) => Dynamic::from_int(i),
            Err(_) => Dynamic::from_float(*u as f64),
        },
        Some(Kind::Float(x)) => Dynamic::from_float(*x),
        Some(Kind::Bool(b)) => Dynamic::from_bool(*b),
        Some(Kind::Str(s) | Kind::Text(s)) => Dynamic::from(s.clone()),
        Some(Kind::Bytes(b)) => Dynamic::from_blob(b.clone()),
        Some(Kind::List(l)) => Dynamic::from_array(l.items.iter().map(to_dynamic).collect()),
    }
}

/// Converts a script value into a wire value, or says why it cannot.
pub fn to_wire(d: &Dynamic) -> Result<v1::Value, String> {
    use v1::value::Kind;
    let kind = if let Ok(i) = d.as_int() {
        Kind::Int(i)
    } else if let Ok(x) = d.as_float() {
        Kind::Float(x)
    } else if let Ok(b) = d.as_bool() {
        Kind::Bool(b)
    } else if let Ok(c) = d.as_char() {
        Kind::Str(c.to_string())
    } else if d.is_string() {
        Kind::Str(d.clone().into_string().unwrap_or_default())
    } else if d.is_array() {
        let items = d.clone().into_array().unwrap_or_default();
        Kind::List(v1::ValueList {
            items: items.iter().map(to_wire).collect::<Result<_, _>>()?,
        })
    } else if d.is_blob() {
        Kind::Bytes(d.clone().into_blob().unwrap_or_default())
    } else {
        return Err(format!(
            "a {} cannot be sent to the program; use numbers, booleans, strings or arrays",
            d.type_name()
        ));
    };
    Ok(v1::Value { kind: Some(kind) })
}

/// Why a script stopped: where, what went wrong, and whose fault it was.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ScriptError {
    /// The script's name, line and column, then what went wrong (a program's own words
    /// among it, which a terminal must not be sent unescaped).
    pub message: String,
    /// The user's input was at fault (a refused command, a limit, a script that does not
    /// parse), rather than the program or the machine (a program that went away).
    pub user_error: bool,
}

impl ScriptError {
    fn other(message: String) -> Self {
        ScriptError {
            message,
            user_error: false,
        }
    }
}

/// What a script's function can fail with: a client's error or a command outside the grammar.
trait Fault: std::fmt::Display {
    fn is_user_error(&self) -> bool;
}

impl Fault for gyr_client::ClientError {
    fn is_user_error(&self) -> bool {
        gyr_client::ClientError::is_user_error(self)
    }
}

impl Fault for command::CommandError {
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The state a script's functions share.
struct Ctx {
    session: RefCell<Session>,
    /// Whether the first failure was the user's (a refusal) or not (the program went away).
    user_error: Cell<bool>,
    /// Set by every call to the program (and `sleep`): the operations budget starts over.
    called: Rc<Cell<bool>>,
    /// Where the script's `print` goes.
    print: fn(&str),
}

type Res<T> = Result<T, Box<EvalAltResult>>;

impl Ctx {
    fn fail(&self, f: impl Fault) -> Box<EvalAltResult> {
        self.user_error.set(f.is_user_error());
        f.to_string().into()
    }

    fn with<T, E: Fault>(&self, op: impl FnOnce(&mut Session) -> Result<T, E>) -> Res<T> {
        self.called.set(true);
        let mut s = self.session.borrow_mut();
        op(&mut s).map_err(|f| self.fail(f))
    }

    fn status_map(s: &v1::StatusReply) -> Map {
        let st = s.state.clone().unwrap_or_default();
        let mut m = Map::new();
        m.insert("state".into(), Dynamic::from(st.text.clone()));
        m.insert(
            "paused".into(),
            Dynamic::from_bool(st.kind == v1::run_state::Kind::Paused as i32),
        );
        m.insert("at".into(), Dynamic::from(st.at.clone()));
        m.insert("records".into(), Dynamic::from_int(s.records as i64));
        m.insert("lost".into(), Dynamic::from_int(s.lost as i64));
        m
    }

    fn control(&self, req: v1::ControlRequest) -> Res<Map> {
        self.with(|s| s.control(req)).map(|r| Self::status_map(&r))
    }

    fn call(&self, target: &str, args: &[Dynamic]) -> Res<Dynamic> {
        let args = args
            .iter()
            .map(to_wire)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| -> Box<EvalAltResult> { e.into() })?;
        let target = target.to_owned();
        self.with(|s| s.call(target, args, 10_000))
            .map(|v| to_dynamic(&v))
    }

    fn wait_paused(&self, timeout: Duration) -> Res<Map> {
        let start = Instant::now();
        loop {
            let st = self.with(|s| s.status())?;
            let kind = st.state.as_ref().map(|k| k.kind).unwrap_or_default();
            if kind == v1::run_state::Kind::Paused as i32 {
                return Ok(Self::status_map(&st));
            }
            if start.elapsed() >= timeout {
                self.user_error.set(true);
                return Err(format!(
                    "the program did not pause within {} ms (it is {}); does it reach a synch point?",
                    timeout.as_millis(),
                    st.state.map(|s| s.text).unwrap_or_default()
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn next_event(&self, type_name: &str, timeout: Duration) -> Res<Map> {
        self.called.set(true);
        let mut s = self.session.borrow_mut();
        let mut stream = s
            .subscribe(vec![type_name.to_owned()], vec![])
            .map_err(|f| self.fail(f))?;
        let mut decoder = EventDecoder::default();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let batch = match s.next_within(&mut stream, left).map_err(|f| self.fail(f))? {
                Some(Some(b)) => b,
                Some(None) => {
                    self.user_error.set(false);
                    return Err("the program closed the event stream".into());
                }
                None => {
                    self.user_error.set(true);
                    return Err(format!(
                        "no `{type_name}` event within {} ms (is the type's name right, and its sensor on?)",
                        timeout.as_millis()
                    )
                    .into());
                }
            };
            if let Some(e) = decoder.batch(batch).events.into_iter().next() {
                let mut m = Map::new();
                for (name, v) in e.fields {
                    m.insert(name.into(), to_dynamic(&v1::Value::from(v)));
                }
                m.insert("_t_ns".into(), Dynamic::from_int(e.t_ns as i64));
                m.insert("_thread".into(), Dynamic::from_int(e.thread as i64));
                return Ok(m);
            }
        }
    }

    fn sensor(&self, type_name: &str, setting: &str) -> Res<()> {
        let req = SensorSetting::parse(setting)
            .and_then(|s| command::sensor_request(&SensorScope::from_word(type_name), s))
            .map_err(|e| self.fail(e))?;
        self.with(|s| s.sensor_control(req)).map(|_| ())
    }
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}

/// The client's resident memory in bytes, where the system reports it.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    Some(kb.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()? * 1024)
}

/// Why a script was stopped by the progress check.
const TOO_MANY_OPERATIONS: &str = "operations";
const TOO_MUCH_MEMORY: &str = "memory";

/// Bounds what a script may hold and how deep it may nest; `called` is set by every call to the
/// program, which starts the budget of `max_ops` operations over; `max_memory` bounds the
/// client's resident memory.
fn set_limits(e: &mut Engine, called: Rc<Cell<bool>>, max_ops: u64, max_memory: u64) {
    // No limit on operations overall (`set_max_operations` would end a long watch): the
    // budget starts over at every call to the program.
    let since = Cell::new(0u64);
    e.on_progress(move |ops| {
        if called.replace(false) {
            since.set(ops);
        }
        if ops - since.get() > max_ops {
            return Some(TOO_MANY_OPERATIONS.into());
        }
        (ops.is_multiple_of(MEMORY_CHECK_EVERY) && resident_bytes().is_some_and(|b| b > max_memory))
            .then(|| TOO_MUCH_MEMORY.into())
    });
}

/// An engine whose steering functions act on `session`.
fn engine(ctx: Rc<Ctx>) -> Engine {
    let mut e = limited_engine();
    set_limits(
        &mut e,
        ctx.called.clone(),
        DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS,
        DEFAULT_MAX_MEMORY,
    );
    e.on_print(ctx.print);
    // One write per line, and none of `eprintln!`'s panic when standard error is full: rules run
    // inside the monitored program.
    e.on_debug(|s, _, pos| {
        use std::io::Write;
        let _ = std::io::stderr().write_all(format!("debug {pos}: {s}\n").as_bytes());
    });

    let c = ctx.clone();
    e.register_fn("get", move |path: &str| -> Res<Dynamic> {
        let values = c.with(|s| s.get(vec![path.to_owned()]))?;
        Ok(if values.len() == 1 && values[0].path == path {
            to_dynamic(&values[0].value.clone().unwrap_or_default())
        } else {
            let mut m = Map::new();
            for v in values {
                m.insert(
                    v.path.into(),
                    to_dynamic(&v.value.clone().unwrap_or_default()),
                );
            }
            Dynamic::from_map(m)
        })
    });
    let c = ctx.clone();
    e.register_fn("set", move |path: &str, value: Dynamic| -> Res<()> {
        let value = to_wire(&value).map_err(|e| -> Box<EvalAltResult> { e.into() })?;
        let writes = vec![v1::PathValue {
            path: path.to_owned(),
            value: Some(value),
        }];
        c.with(|s| s.set(writes)).map(|_| ())
    });
    let c = ctx.clone();
    e.register_fn("set", move |writes: Map| -> Res<()> {
        let writes = writes
            .iter()
            .map(|(p, v)| {
                Ok(v1::PathValue {
                    path: p.to_string(),
                    value: Some(to_wire(v)?),
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| -> Box<EvalAltResult> { e.into() })?;
        c.with(|s| s.set(writes)).map(|_| ())
    });
    // One overload per arity: rhai has no variadic native functions.
    macro_rules! actuate {
        ($($a:ident),*) => {{
            let c = ctx.clone();
            e.register_fn("actuate", move |t: &str, $($a: Dynamic),*| c.call(t, &[$($a),*]));
        }};
    }
    actuate!();
    actuate!(a1);
    actuate!(a1, a2);
    actuate!(a1, a2, a3);
    actuate!(a1, a2, a3, a4);
    actuate!(a1, a2, a3, a4, a5);
    actuate!(a1, a2, a3, a4, a5, a6);
    actuate!(a1, a2, a3, a4, a5, a6, a7);
    actuate!(a1, a2, a3, a4, a5, a6, a7, a8);
    let c = ctx.clone();
    e.register_fn("pause", move || {
        c.control(command::control_request(Action::Pause))
    });
    let c = ctx.clone();
    e.register_fn("resume", move || {
        c.control(command::control_request(Action::Resume))
    });
    let c = ctx.clone();
    e.register_fn("step", move || {
        c.control(command::step_request(1).map_err(|e| c.fail(e))?)
    });
    let c = ctx.clone();
    e.register_fn("step", move |n: i64| {
        let steps = u64::try_from(n).map_err(|_| -> Box<EvalAltResult> {
            format!("step({n}): give a number of synch points of 1 or more").into()
        })?;
        c.control(command::step_request(steps).map_err(|e| c.fail(e))?)
    });
    let c = ctx.clone();
    e.register_fn("run_until", move |cond: ImmutableString| {
        c.control(command::until_request(&cond).map_err(|e| c.fail(e))?)
    });
    let c = ctx.clone();
    e.register_fn("wait_paused", move || {
        c.wait_paused(Duration::from_secs(30))
    });
    let c = ctx.clone();
    e.register_fn("wait_paused", move |t: i64| c.wait_paused(ms(t)));
    let c = ctx.clone();
    e.register_fn("status", move || -> Res<Map> {
        c.with(|s| s.status()).map(|r| Ctx::status_map(&r))
    });
    let c = ctx.clone();
    e.register_fn("next_event", move |t: &str| {
        c.next_event(t, Duration::from_secs(10))
    });
    let c = ctx.clone();
    e.register_fn("next_event", move |t: &str, timeout: i64| {
        c.next_event(t, ms(timeout))
    });
    let c = ctx.clone();
    e.register_fn("sensor", move |t: &str, setting: &str| c.sensor(t, setting));
    let c = ctx;
    e.register_fn("sleep", move |t: i64| {
        c.called.set(true);
        std::thread::sleep(ms(t))
    });
    e
}

/// Runs `source` (named `name` in messages) against the program `session` is connected to, on
/// a thread of its own with a stack deep enough for the nesting the limits allow; the script's
/// `print` goes to `print`.
pub fn run_source(
    session: Session,
    name: &str,
    source: &str,
    print: fn(&str),
) -> Result<(), ScriptError> {
    let (name, source) = (name.to_owned(), source.to_owned());
    std::thread::Builder::new()
        .name("gyr-script".into())
        .stack_size(SCRIPT_STACK_SIZE)
        .spawn(move || run_on_this_thread(session, &name, &source, print))
        .map_err(|e| ScriptError::other(format!("cannot start the script's thread: {e}")))?
        .join()
        .unwrap_or_else(|_| {
            Err(ScriptError::other(
                "the script's thread failed; the message above says why".to_owned(),
            ))
        })
}

fn run_on_this_thread(
    session: Session,
    name: &str,
    source: &str,
    print: fn(&str),
) -> Result<(), ScriptError> {
    let ctx = Rc::new(Ctx {
        session: RefCell::new(session),
        user_error: Cell::new(true),
        called: Rc::new(Cell::new(true)),
        print,
    });
    let engine = engine(ctx.clone());
    let ast = engine.compile(source).map_err(|e| {
        let (line, col) = position(e.position());
        let msg = match e.err_type() {
            rhai::ParseErrorType::ExprTooDeep => format!(
                "expressions nest deeper than the limit of {} levels ({} within functions); split them up",
                DEFAULT_MAX_EXPR_DEPTHS.0, DEFAULT_MAX_EXPR_DEPTHS.1
            ),
            other => other.to_string(),
        };
        ScriptError {
            message: format!("{name}:{line}:{col}: {msg}"),
            user_error: true,
        }
    })?;
    engine.run_ast(&ast).map_err(|e| {
        // A failure inside the script's own functions comes wrapped once per call level: the
        // innermost error says what went wrong, and where.
        let mut err = &*e;
        let mut pos = err.position();
        while let EvalAltResult::ErrorInFunctionCall(_, _, inner, _) = err {
            err = inner;
            if !err.position().is_none() {
                pos = err.position();
            }
        }
        let (line, col) = position(pos);
        let msg = match limit_hit(err) {
            Some(limit) => {
                ctx.user_error.set(true);
                limit
            }
            None => match err {
                EvalAltResult::ErrorRuntime(v, _) => strip_position(&v.to_string()).to_owned(),
                other => strip_position(&other.to_string()).to_owned(),
            },
        };
        ScriptError {
            message: format!("{name}:{line}:{col}: {msg}"),
            user_error: ctx.user_error.get(),
        }
    })
}

/// What a script's limit error means, in the user's terms.
fn limit_hit(e: &EvalAltResult) -> Option<String> {
    Some(match e {
        EvalAltResult::ErrorTerminated(why, _) if why.to_string() == TOO_MUCH_MEMORY => format!(
            "the script went past the limit of {} MiB of memory",
            DEFAULT_MAX_MEMORY >> 20
        ),
        EvalAltResult::ErrorTerminated(..) | EvalAltResult::ErrorTooManyOperations(_) => format!(
            "the script went past the limit of {DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS} operations without calling the program (an endless loop?)"
        ),
        EvalAltResult::ErrorDataTooLarge(what, _) => {
            let (limit, unit) = if what.contains("string") {
                (DEFAULT_MAX_STRING_SIZE, "bytes of strings in one value")
            } else if what.contains("map") {
                (DEFAULT_MAX_MAP_SIZE, "properties in one object map")
            } else {
                (DEFAULT_MAX_ARRAY_SIZE, "elements in one array or blob")
            };
            format!("the script went past the limit of {limit} {unit}")
        }
        EvalAltResult::ErrorStackOverflow(_) => format!(
            "the script went past the limit of {DEFAULT_MAX_CALL_LEVELS} nested function calls (endless recursion?)"
        ),
        EvalAltResult::ErrorTooManyVariables(_) => format!(
            "the script went past the limit of {DEFAULT_MAX_VARIABLES} variables alive at once"
        ),
        EvalAltResult::ErrorTooManyModules(_) => {
            "a steering script is one file: it cannot import modules".to_owned()
        }
        _ => return None,
    })
}

/// The error's own position suffix, which rhai appends to nested errors.
fn strip_position(msg: &str) -> &str {
    match msg.rfind(" (line ") {
        Some(i) if msg.ends_with(')') => &msg[..i],
        _ => msg,
    }
}

fn position(p: Position) -> (usize, usize) {
    (p.line().unwrap_or(0), p.position().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(max_ops: u64, max_memory: u64) -> (Engine, Rc<Cell<bool>>) {
        let mut e = limited_engine();
        let called = Rc::new(Cell::new(true));
        set_limits(&mut e, called.clone(), max_ops, max_memory);
        let c = called.clone();
        e.register_fn("ping", move || c.set(true));
        (e, called)
    }

    #[test]
    fn an_endless_loop_without_calls_is_stopped() {
        let (e, _) = limited(10_000, u64::MAX);
        let err = e.run("let x = 0; loop { x += 1; }").unwrap_err();
        assert!(limit_hit(&err).unwrap().contains("operations"), "{err}");
    }

    #[test]
    fn a_loop_that_calls_the_program_runs_past_the_budget() {
        let (e, _) = limited(10_000, u64::MAX);
        // 100 000 iterations: many times the budget in all, a few operations between calls.
        let n = e
            .eval::<i64>("let n = 0; for i in 0..100000 { ping(); n += 1; } n")
            .unwrap();
        assert_eq!(n, 100_000);
    }

    #[test]
    fn values_cannot_grow_past_their_limits() {
        // On a stack as deep as a script's, for the recursion.
        std::thread::Builder::new()
            .stack_size(SCRIPT_STACK_SIZE)
            .spawn(values_cannot_grow_past_their_limits_here)
            .unwrap()
            .join()
            .unwrap();
    }

    fn values_cannot_grow_past_their_limits_here() {
        let (e, _) = limited(DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS, u64::MAX);
        for (script, limit) in [
            ("let s = \"x\"; loop { s += s; }", "bytes of strings"),
            ("let a = [1]; loop { a += a; }", "elements in one array"),
            ("fn f(n) { f(n + 1) } f(0)", "nested function calls"),
        ] {
            let err = e.run(script).unwrap_err();
            let mut inner = &*err;
            while let EvalAltResult::ErrorInFunctionCall(_, _, i, _) = inner {
                inner = i;
            }
            let msg = limit_hit(inner).unwrap_or_else(|| panic!("{script}: {err}"));
            assert!(msg.contains(limit), "{script}: {msg}");
        }
    }

    #[test]
    fn memory_is_bounded_where_value_limits_are_not_checked() {
        // rhai checks the new entry, not the map, when one is added by index.
        let Some(now) = resident_bytes() else {
            return;
        };
        let (e, _) = limited(DEFAULT_MAX_OPERATIONS_BETWEEN_CALLS, now + (32 << 20));
        let err = e
            .run("let s = \"\"; s.pad(1000, 'y'); let m = #{}; let i = 0; loop { m[`k${i}`] = s + i; i += 1; }")
            .unwrap_err();
        assert!(
            limit_hit(&err).is_some_and(|m| m.contains("memory")),
            "{err}"
        );
    }
}
