//! Steering scripts: sequences of steering commands written in rhai and run against a program
//! over its API (Progress's scripts; the rules issue reuses the same engine in the hub).
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
//! reason; the exit code is 2 (as for any bad input), or 1 when the program went away.

use crate::Failure;
use crate::client::Session;
use crate::show::EventDecoder;
use crate::steer_cmd::Target;
use gyr_proto::v1;
use rhai::{Dynamic, Engine, EvalAltResult, ImmutableString, Map, Position};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The functions a script can call, with a line each for `help` in `gyr attach`.
pub(crate) const FUNCTIONS: &[(&str, &str)] = &[
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
pub(crate) fn to_dynamic(v: &v1::Value) -> Dynamic {
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
pub(crate) fn to_wire(d: &Dynamic) -> Result<v1::Value, String> {
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

/// The state a script's functions share.
struct Ctx {
    session: RefCell<Session>,
    /// The exit code of the first failure (2: refused, 1: the program went away).
    code: Cell<u8>,
}

type Res<T> = Result<T, Box<EvalAltResult>>;

impl Ctx {
    fn fail(&self, f: Failure) -> Box<EvalAltResult> {
        self.code.set(f.code);
        format!("{:#}", f.error).into()
    }

    fn with<T>(&self, op: impl FnOnce(&mut Session) -> Result<T, Failure>) -> Res<T> {
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
                self.code.set(2);
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
                    self.code.set(1);
                    return Err("the program closed the event stream".into());
                }
                None => {
                    self.code.set(2);
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
        use crate::steer_cmd::SensorChange as C;
        let words: Vec<&str> = setting.split_whitespace().collect();
        let change = match words.as_slice() {
            ["on"] => C::On,
            ["off"] => C::Off,
            ["all"] => C::All,
            ["every", n] if n.parse::<u32>().is_ok() => C::Every {
                n: n.parse().unwrap_or(1),
            },
            ["rate", r] if r.parse::<f64>().is_ok() => C::Rate {
                per_second: r.parse().unwrap_or(0.0),
            },
            _ => {
                self.code.set(2);
                return Err(format!(
                    "`{setting}` is not a sensor setting: use \"on\", \"off\", \"all\", \"every N\" or \"rate R\""
                )
                .into());
            }
        };
        let ty = (!type_name.is_empty()).then(|| type_name.to_owned());
        let req = crate::steer_cmd::sensor_request(change, ty, None).map_err(|f| self.fail(f))?;
        self.with(|s| s.sensor_control(req)).map(|_| ())
    }
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}

/// An engine whose steering functions act on `session`.
fn engine(ctx: Rc<Ctx>) -> Engine {
    let mut e = Engine::new();
    e.on_print(|s| println!("{s}"));
    e.on_debug(|s, _, pos| eprintln!("debug {pos}: {s}"));

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
        c.control(crate::control(v1::control_request::Action::Pause))
    });
    let c = ctx.clone();
    e.register_fn("resume", move || {
        c.control(crate::control(v1::control_request::Action::Resume))
    });
    let c = ctx.clone();
    e.register_fn("step", move || {
        c.control(crate::control(v1::control_request::Action::Step))
    });
    let c = ctx.clone();
    e.register_fn("step", move |n: i64| {
        c.control(v1::ControlRequest {
            steps: n.max(1) as u64,
            ..crate::control(v1::control_request::Action::Step)
        })
    });
    let c = ctx.clone();
    e.register_fn("run_until", move |cond: ImmutableString| {
        c.control(v1::ControlRequest {
            until: cond.to_string(),
            ..crate::control(v1::control_request::Action::RunUntil)
        })
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
    let c = ctx;
    e.register_fn("sensor", move |t: &str, setting: &str| c.sensor(t, setting));
    e.register_fn("sleep", |t: i64| std::thread::sleep(ms(t)));
    e
}

/// Runs `source` (named `name` in messages) against the program `session` is connected to.
pub(crate) fn run_source(session: Session, name: &str, source: &str) -> Result<(), Failure> {
    let ctx = Rc::new(Ctx {
        session: RefCell::new(session),
        code: Cell::new(2),
    });
    let engine = engine(ctx.clone());
    let ast = engine.compile(source).map_err(|e| {
        let (line, col) = position(e.position());
        Failure::input(anyhow::anyhow!("{name}:{line}:{col}: {}", e.err_type()))
    })?;
    engine.run_ast(&ast).map_err(|e| {
        let (line, col) = position(e.position());
        let msg = match *e {
            EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => inner.to_string(),
            EvalAltResult::ErrorRuntime(ref v, _) => v.to_string(),
            ref other => other.to_string(),
        };
        let msg = strip_position(&msg);
        Failure {
            code: ctx.code.get(),
            error: anyhow::anyhow!("{name}:{line}:{col}: {msg}"),
        }
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

/// `gyr script PID FILE`.
pub(crate) fn run_file(target: Target, file: &Path) -> Result<ExitCode, Failure> {
    let (name, source) = if file == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| {
            Failure::from(anyhow::anyhow!("cannot read the script from stdin: {e}"))
        })?;
        ("<stdin>".to_owned(), s)
    } else {
        let s = std::fs::read_to_string(file).map_err(|e| {
            Failure::input(anyhow::anyhow!(
                "cannot read the script {}: {e}",
                file.display()
            ))
        })?;
        (file.display().to_string(), s)
    };
    let session = Session::connect(&target.program, target.token.clone(), "gyr-script")?;
    run_source(session, &name, &source)?;
    Ok(ExitCode::SUCCESS)
}
