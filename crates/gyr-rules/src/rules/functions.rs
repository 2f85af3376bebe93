//! The functions rules call, registered on the shared rhai engine, and the state they reach:
//! windows, working memory, the explanation buffer of the condition being evaluated, and the
//! actions of the `then` being run.
//!
//! rhai calls native functions with their arguments only, so the state they read lives behind
//! one `Rc<RefCell<State>>` the engine and the functions share; the engine never holds the
//! borrow while rhai runs.

use super::action::{self, Action, Severity};
use super::facts::{MAX_FACTS, Memory};
use super::window::{self, Expl, Groups, MAX_EXPLS, WinFn};
use rhai::{Dynamic, EvalAltResult, ImmutableString, Map};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

type Res<T> = Result<T, Box<EvalAltResult>>;

/// What is being evaluated, which decides what the functions may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// An event rule's condition: windows, memory read, explanations recorded.
    When,
    /// A fact rule's condition: memory read, the facts read recorded.
    FactWhen,
    /// A `then`: actions collected.
    Then,
}

/// The rules' functions, with their arguments, for messages and `gyr rules check`.
pub const FUNCTIONS: &[(&str, &str)] = &[
    (
        "dropped(f, n, k)",
        "fell n orders of magnitude within the last k values",
    ),
    (
        "rose(f, n, k)",
        "rose n orders of magnitude within the last k values",
    ),
    (
        "stalled(f, pct, k)",
        "changed less than pct % over the last k values",
    ),
    (
        "oscillates(f, k)",
        "differences change sign at least k/2 times in k values",
    ),
    (
        "slope(f, k)",
        "least-squares slope per event over the last k values",
    ),
    (
        "mean(f, k) / min(f, k) / max(f, k)",
        "over the last k values",
    ),
    ("last(f, k)", "the value k events back (0: this one)"),
    ("count(k)", "events in the window, at most k"),
    ("outside(x, lo, hi)", "x is not within [lo, hi]"),
    ("rel_diff(a, b)", "|a - b| / max(|a|, |b|)"),
    (
        "has(name) / has(name, map)",
        "a fact of that name (holding these values) exists",
    ),
    (
        "fact(name) / facts(name)",
        "the first fact's map, or () / all of them",
    ),
    ("assert(name, map) / assert(name)", "add a fact"),
    ("retract(name) / retract(name, map)", "remove facts"),
    (
        "alert(severity, message)",
        "info, warning, error or critical",
    ),
    ("set(path, value)", "write a steering attribute"),
    (
        "actuate(path, args...)",
        "run an actuator or call a function (up to 8 args)",
    ),
    (
        "sensor(type, on) / sensor(type, on, rate)",
        "sensor control",
    ),
    ("start() / stop()", "start or stop the program"),
    (
        "restart(args) / restart()",
        "restart it with other arguments",
    ),
    ("signal(name)", "send it a signal, e.g. \"SIGUSR1\""),
    ("control(line)", "write a line to its control file"),
    (
        "set_input(file, key, value)",
        "change `key = value` in an input file",
    ),
];

/// Functions that are actions: allowed in `then` only.
pub(crate) const ACTIONS: &[&str] = &[
    "assert",
    "retract",
    "alert",
    "set",
    "actuate",
    "sensor",
    "start",
    "stop",
    "restart",
    "signal",
    "control",
    "set_input",
];

/// The rules' own functions and the argument counts each takes.
pub(crate) fn own_arities(name: &str) -> Option<&'static [usize]> {
    Some(match name {
        "dropped" | "rose" | "stalled" | "outside" => &[3],
        "oscillates" | "slope" | "mean" | "last" | "rel_diff" | "alert" | "set" => &[2],
        "min" | "max" => &[2],
        "count" | "fact" | "facts" | "signal" | "control" => &[1],
        "has" | "assert" | "retract" => &[1, 2],
        "actuate" => &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        "sensor" => &[2, 3],
        "start" | "stop" => &[0],
        "restart" => &[0, 1],
        "set_input" => &[3],
        _ => return None,
    })
}

/// One program's windows and memory, and what its event types resolve to.
#[derive(Debug)]
pub(crate) struct Program {
    pub(crate) name: String,
    pub(crate) name_dyn: ImmutableString,
    /// Per partition (event type and `per` field) of the rule set.
    pub(crate) parts: Vec<Groups>,
    pub(crate) memory: Memory,
}

impl Program {
    pub(crate) fn new(name: &str, parts: usize) -> Program {
        Program {
            name: name.to_owned(),
            name_dyn: name.into(),
            parts: (0..parts).map(|_| Groups::default()).collect(),
            memory: Memory::default(),
        }
    }
}

/// Where the rule being evaluated is.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    pub(crate) pid: u32,
    pub(crate) part: usize,
    pub(crate) group: usize,
}

/// Everything the rules' functions reach.
#[derive(Debug)]
pub(crate) struct State {
    /// Field names of each partition's windows.
    pub(crate) fields: Vec<Vec<String>>,
    pub(crate) programs: HashMap<u32, Program>,
    pub(crate) cur: Cursor,
    /// Per field of the current partition: the event has no number there.
    pub(crate) cur_bad: Vec<bool>,
    /// Events seen in the current group.
    pub(crate) mode: Mode,
    pub(crate) expl: Vec<Expl>,
    /// Ids of the facts a fact rule's condition read.
    pub(crate) reads: Vec<u64>,
    pub(crate) actions: Vec<Action>,
    /// Asserts collected in the current `then`, not yet in memory.
    pub(crate) pending_asserts: usize,
    pub(crate) next_fact: u64,
}

impl State {
    pub(crate) fn new(fields: Vec<Vec<String>>) -> State {
        State {
            fields,
            programs: HashMap::new(),
            cur: Cursor::default(),
            cur_bad: Vec::new(),
            mode: Mode::When,
            expl: Vec::new(),
            reads: Vec::new(),
            actions: Vec::new(),
            pending_asserts: 0,
            next_fact: 0,
        }
    }

    fn memory(&self) -> Option<&Memory> {
        self.programs.get(&self.cur.pid).map(|p| &p.memory)
    }

    fn explain(&mut self, e: Expl) {
        if self.mode == Mode::When && self.expl.len() < MAX_EXPLS {
            self.expl.push(e);
        }
    }

    fn window_of(&self, field: &str) -> Res<(u32, &window::Ring)> {
        if self.mode == Mode::FactWhen {
            return Err(
                "window functions read the events of an event rule's type: this rule has no `on`"
                    .into(),
            );
        }
        let cur = self.cur;
        let slot = self
            .fields
            .get(cur.part)
            .and_then(|f| f.iter().position(|x| x == field))
            .ok_or_else(|| -> Box<EvalAltResult> {
                format!("`{field}` has no window in this rule: give window functions the field's name as a literal string, e.g. mean(\"{field}\", 10)").into()
            })?;
        if self.cur_bad.get(slot).copied().unwrap_or(true) {
            return Err(format!(
                "this event has no numeric field `{field}`: check the field's name (`gyr trace info` lists them)"
            )
            .into());
        }
        let ring = self
            .programs
            .get(&cur.pid)
            .and_then(|p| p.parts.get(cur.part))
            .and_then(|g| g.slab.get(cur.group))
            .and_then(|g| g.rings.get(slot))
            .ok_or("no window for this event (internal)")?;
        Ok((slot as u32, ring))
    }

    fn window_call(&mut self, f: WinFn, field: &str, n: f64, k: i64) -> Res<Dynamic> {
        let k = usize::try_from(k).map_err(|_| -> Box<EvalAltResult> {
            format!("{}: k must be 0 or more", f.name()).into()
        })?;
        let (slot, ring) = self.window_of(field)?;
        let (d, e) = match f {
            WinFn::Dropped | WinFn::Rose => {
                let (b, e) = window::orders(f, slot, ring, n, k);
                (Dynamic::from_bool(b), e)
            }
            WinFn::Stalled => {
                let (b, e) = window::stalled(slot, ring, n, k);
                (Dynamic::from_bool(b), e)
            }
            WinFn::Oscillates => {
                let (b, e) = window::oscillates(slot, ring, k);
                (Dynamic::from_bool(b), e)
            }
            _ => {
                let (x, e) = window::stat(f, slot, ring, k);
                let d = if f == WinFn::Last && x.is_nan() && ring.back(k).is_none() {
                    Dynamic::UNIT
                } else {
                    Dynamic::from_float(x)
                };
                (d, e)
            }
        };
        self.explain(e);
        Ok(d)
    }

    fn count(&mut self, k: i64) -> Res<i64> {
        if self.mode == Mode::FactWhen {
            return Err("count(k) counts an event rule's events: this rule has no `on`".into());
        }
        let cur = self.cur;
        let seen = self
            .programs
            .get(&cur.pid)
            .and_then(|p| p.parts.get(cur.part))
            .and_then(|g| g.slab.get(cur.group))
            .map_or(0, |g| g.seen);
        let value = (seen.min(i64::MAX as u64) as i64).min(k.max(0));
        self.explain(Expl::Count {
            k: k.clamp(0, u32::MAX as i64) as u32,
            value,
        });
        Ok(value)
    }

    fn read_facts(&mut self, name: &str, want: Option<&Map>, all: bool) -> Res<Vec<Map>> {
        let want = want
            .map(action::map_fields)
            .transpose()
            .map_err(|e| -> Box<EvalAltResult> { e.into() })?;
        let mut out = Vec::new();
        let mut ids = Vec::new();
        if let Some(m) = self.memory() {
            for f in m.named(name, want.as_deref()) {
                out.push(action::fields_map(&f.fields));
                ids.push(f.id);
                if !all {
                    break;
                }
            }
        }
        if self.mode == Mode::FactWhen {
            self.reads.extend(ids);
        }
        Ok(out)
    }

    fn act(&mut self, a: Action) -> Res<()> {
        if self.mode != Mode::Then {
            return Err("actions belong in `then`: a condition only reads".into());
        }
        if self.actions.len() >= 10_000 {
            return Err("more than 10000 actions in one firing: is `then` looping?".into());
        }
        self.actions.push(a);
        Ok(())
    }
}

fn num(d: &Dynamic, what: &str) -> Res<f64> {
    d.as_float()
        .or_else(|_| d.as_int().map(|i| i as f64))
        .map_err(|t| format!("{what} must be a number, not {t}").into())
}

fn err(e: String) -> Box<EvalAltResult> {
    e.into()
}

/// Registers the rules' functions on `e`, acting on `state`.
pub(crate) fn register(e: &mut rhai::Engine, state: &Rc<RefCell<State>>) {
    // Windows.
    for f in [WinFn::Dropped, WinFn::Rose, WinFn::Stalled] {
        let s = state.clone();
        e.register_fn(
            f.name(),
            move |field: &str, n: Dynamic, k: i64| -> Res<Dynamic> {
                let n = num(&n, if f == WinFn::Stalled { "pct" } else { "n" })?;
                s.borrow_mut().window_call(f, field, n, k)
            },
        );
    }
    for f in [
        WinFn::Oscillates,
        WinFn::Slope,
        WinFn::Mean,
        WinFn::Min,
        WinFn::Max,
        WinFn::Last,
    ] {
        let s = state.clone();
        e.register_fn(f.name(), move |field: &str, k: i64| -> Res<Dynamic> {
            s.borrow_mut().window_call(f, field, 0.0, k)
        });
    }
    let s = state.clone();
    e.register_fn("count", move |k: i64| s.borrow_mut().count(k));
    let s = state.clone();
    e.register_fn(
        "outside",
        move |x: Dynamic, lo: Dynamic, hi: Dynamic| -> Res<bool> {
            let (r, ex) = window::outside(num(&x, "x")?, num(&lo, "lo")?, num(&hi, "hi")?);
            s.borrow_mut().explain(ex);
            Ok(r)
        },
    );
    let s = state.clone();
    e.register_fn("rel_diff", move |a: Dynamic, b: Dynamic| -> Res<f64> {
        let (r, ex) = window::rel_diff(num(&a, "a")?, num(&b, "b")?);
        s.borrow_mut().explain(ex);
        Ok(r)
    });

    // Working memory: reads.
    let s = state.clone();
    e.register_fn("has", move |name: &str| -> Res<bool> {
        Ok(!s.borrow_mut().read_facts(name, None, false)?.is_empty())
    });
    let s = state.clone();
    e.register_fn("has", move |name: &str, want: Map| -> Res<bool> {
        Ok(!s
            .borrow_mut()
            .read_facts(name, Some(&want), false)?
            .is_empty())
    });
    let s = state.clone();
    e.register_fn("fact", move |name: &str| -> Res<Dynamic> {
        Ok(s.borrow_mut()
            .read_facts(name, None, false)?
            .pop()
            .map_or(Dynamic::UNIT, Dynamic::from_map))
    });
    let s = state.clone();
    e.register_fn("facts", move |name: &str| -> Res<rhai::Array> {
        Ok(s.borrow_mut()
            .read_facts(name, None, true)?
            .into_iter()
            .map(Dynamic::from_map)
            .collect())
    });

    // Working memory: changes (applied when the `then` has run through).
    fn assert_fact(s: &RefCell<State>, name: &str, fields: &Map) -> Res<()> {
        let fields = action::map_fields(fields).map_err(err)?;
        let mut st = s.borrow_mut();
        let held = st.memory().map_or(0, |m| m.facts.len());
        if held + st.pending_asserts >= MAX_FACTS {
            return Err(err(format!(
                "this program's working memory holds {MAX_FACTS} facts, the most it may: retract facts that are no longer true"
            )));
        }
        if name.is_empty() {
            return Err(err("a fact needs a name".into()));
        }
        st.act(Action::Assert {
            name: name.to_owned(),
            fields,
        })?;
        st.pending_asserts += 1;
        Ok(())
    }
    let s = state.clone();
    e.register_fn("assert", move |name: &str, fields: Map| {
        assert_fact(&s, name, &fields)
    });
    let s = state.clone();
    e.register_fn("assert", move |name: &str| {
        assert_fact(&s, name, &Map::new())
    });
    let s = state.clone();
    e.register_fn("retract", move |name: &str| {
        s.borrow_mut().act(Action::Retract {
            name: name.to_owned(),
            fields: None,
        })
    });
    let s = state.clone();
    e.register_fn("retract", move |name: &str, want: Map| -> Res<()> {
        let fields = action::map_fields(&want).map_err(err)?;
        s.borrow_mut().act(Action::Retract {
            name: name.to_owned(),
            fields: Some(fields),
        })
    });

    // Actions for the host.
    let s = state.clone();
    e.register_fn(
        "alert",
        move |severity: &str, message: Dynamic| -> Res<()> {
            let severity = Severity::parse(severity).ok_or_else(|| {
                err(format!(
                    "`{severity}` is not a severity: use {}",
                    Severity::NAMES
                ))
            })?;
            let message = match message.clone().into_string() {
                Ok(s) => s,
                Err(_) => message.to_string(),
            };
            s.borrow_mut().act(Action::Alert { severity, message })
        },
    );
    let s = state.clone();
    e.register_fn("set", move |path: &str, value: Dynamic| -> Res<()> {
        action::attribute_path(path).map_err(err)?;
        let value = action::to_value(&value).map_err(err)?;
        s.borrow_mut().act(Action::Set {
            path: path.to_owned(),
            value,
        })
    });
    // One overload per arity: rhai has no variadic native functions.
    macro_rules! actuate {
        ($($a:ident),*) => {{
            let s = state.clone();
            e.register_fn("actuate", move |path: &str, $($a: Dynamic),*| -> Res<()> {
                let args = [$($a),*]
                    .iter()
                    .map(action::to_value)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?;
                s.borrow_mut().act(Action::Call { path: path.to_owned(), args })
            });
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
    fn on_off(d: &Dynamic) -> Res<bool> {
        if let Ok(b) = d.as_bool() {
            return Ok(b);
        }
        match d.clone().into_string().as_deref() {
            Ok("on") => Ok(true),
            Ok("off") => Ok(false),
            _ => Err(err(format!(
                "sensor(type, on): give true/false or \"on\"/\"off\", not {d}"
            ))),
        }
    }
    let s = state.clone();
    e.register_fn("sensor", move |name: &str, on: Dynamic| -> Res<()> {
        let enabled = on_off(&on)?;
        s.borrow_mut().act(Action::Sensor {
            name: name.to_owned(),
            enabled,
            rate: None,
        })
    });
    let s = state.clone();
    e.register_fn(
        "sensor",
        move |name: &str, on: Dynamic, rate: Dynamic| -> Res<()> {
            let enabled = on_off(&on)?;
            let rate = num(&rate, "the rate")?;
            if !(rate > 0.0 && rate.is_finite()) {
                return Err(err(format!(
                    "sensor rate {rate}: give events a second, more than 0"
                )));
            }
            s.borrow_mut().act(Action::Sensor {
                name: name.to_owned(),
                enabled,
                rate: Some(rate),
            })
        },
    );
    let s = state.clone();
    e.register_fn("start", move || s.borrow_mut().act(Action::Start));
    let s = state.clone();
    e.register_fn("stop", move || s.borrow_mut().act(Action::Stop));
    let s = state.clone();
    e.register_fn("restart", move |args: &str| {
        s.borrow_mut().act(Action::Restart {
            args: args.to_owned(),
        })
    });
    let s = state.clone();
    e.register_fn("restart", move || {
        s.borrow_mut().act(Action::Restart {
            args: String::new(),
        })
    });
    let s = state.clone();
    e.register_fn("signal", move |name: &str| -> Res<()> {
        let signal = action::signal_name(name).map_err(err)?;
        s.borrow_mut().act(Action::Signal { signal })
    });
    let s = state.clone();
    e.register_fn("control", move |line: &str| -> Res<()> {
        if line.contains('\n') {
            return Err(err(
                "control(line): one line, without a newline in it".into()
            ));
        }
        s.borrow_mut().act(Action::Control {
            line: line.to_owned(),
        })
    });
    let s = state.clone();
    e.register_fn(
        "set_input",
        move |file: &str, key: &str, value: Dynamic| -> Res<()> {
            if key.is_empty() || key.contains(['=', '\n']) {
                return Err(err(format!(
                    "set_input: `{key}` is not a key of a `key = value` line"
                )));
            }
            let value = match value.clone().into_string() {
                Ok(s) => s,
                Err(_) => value.to_string(),
            };
            s.borrow_mut().act(Action::SetInput {
                file: file.to_owned(),
                key: key.to_owned(),
                value,
            })
        },
    );
}
