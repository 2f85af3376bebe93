//! What the watch-dog publishes: one dynamic sensor per event type of the spec, its own event
//! types (`watchdog.start`, `watchdog.exit`, `watchdog.unmatched`, `watchdog.file`, and
//! `gyr.alert` for events with a severity), the counters, and the steering objects `watched`
//! (state and actuators, see [`crate::supervise`]) and `design` (the spec's design points).
//!
//! # The watch-dog's own events
//!
//! | event | fields |
//! |---|---|
//! | `watchdog.start` | `run: u32`, `pid: u32`, `command: string`, `instance` |
//! | `watchdog.exit` | `run: u32`, `status: i32` (-1 when a signal ended it), `signal: i32` (0 when none), `crashed: bool`, `reason: string` (`exited`, `crashed`, `stopped`, `restarted`), `seconds: f64`, `last_lines: string`, `instance` |
//! | `watchdog.unmatched` | `count: u64` (all so far), `new: u64` (since the last such event), `source: string`, `last_line: string`, `instance` |
//! | `watchdog.file` | `path: string`, `what: string` (`opened`, `rotated`, `truncated`, `removed`), `source: string`, `instance` |
//! | `gyr.alert` | `severity: string`, `message: string` (the line), `event: string`, `instance` |

use crate::parse::LineParser;
use crate::spec::{INSTANCE_FIELD, Spec};
use gyr::DynamicSensor;
use gyr::steer::{AttrInfo, AttrType, Steerable};
use gyr_core::{Field, FieldType, Schema, Value};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The longest line an event of the watch-dog's own carries (`last_line`, each of
/// `last_lines`), in bytes.
pub const MAX_SHOWN_LINE: usize = 1024;

/// Counters shared by the threads that read lines.
#[derive(Debug, Default)]
pub struct Counters {
    /// Lines read, from every source.
    pub lines: AtomicU64,
    /// Lines no event took.
    pub unmatched: AtomicU64,
    /// Events of the spec's types produced.
    pub events: AtomicU64,
    /// Lines cut at [`crate::tail::MAX_LINE`].
    pub cut: AtomicU64,
    /// Events gyr refused (a value that does not fit its field).
    pub refused: AtomicU64,
    /// Files found truncated.
    pub truncations: AtomicU64,
    /// Files found rotated.
    pub rotations: AtomicU64,
}

#[derive(Debug, Default)]
struct Unmatched {
    source: String,
    line: String,
    instance: String,
}

/// Cuts `s` to at most `max` bytes at a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// What a [`Tap`] is shown, on the thread that read the line (a pipe's reader, or the loop
/// for files): it must not block.
#[derive(Debug, Clone, Copy)]
pub enum Tapped<'a> {
    /// A line of `instance`'s output was read (whether an event took it or not).
    Line {
        /// The instance the line's parser names.
        instance: &'a str,
    },
    /// An event was recorded: one of the spec's types, or `watchdog.start` and
    /// `watchdog.exit`.
    Event {
        /// The instance it carries.
        instance: &'a str,
        /// The program's run it carries.
        run: u32,
        /// Its type.
        schema: &'a Schema,
        /// Its values, in the schema's order.
        values: &'a [Value],
    },
}

/// A hook that sees every line and event as it is published (the ensemble's rules and
/// progress use it).
pub type Tap = Arc<dyn Fn(Tapped<'_>) + Send + Sync>;

/// The watch-dog's sensors and counters.
pub struct Publisher {
    spec: Arc<Spec>,
    sensors: Vec<Option<DynamicSensor>>,
    start: Option<DynamicSensor>,
    exit: Option<DynamicSensor>,
    unmatched: Option<DynamicSensor>,
    file: Option<DynamicSensor>,
    alert: Option<DynamicSensor>,
    /// The counters.
    pub counters: Counters,
    last_unmatched: Mutex<Unmatched>,
    show_unmatched: bool,
    tap: Option<Tap>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("events", &self.sensors.len())
            .field("counters", &self.counters)
            .field("tap", &self.tap.is_some())
            .finish_non_exhaustive()
    }
}

fn register(name: &str, fields: Vec<Field>) -> Option<DynamicSensor> {
    match DynamicSensor::register(name, fields) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("gyr watchdog: events `{name}` are not recorded: {e}");
            None
        }
    }
}

fn fields(list: &[(&str, FieldType)]) -> Vec<Field> {
    list.iter()
        .map(|(n, t)| Field::new(*n, *t))
        .chain(std::iter::once(Field::new(INSTANCE_FIELD, FieldType::Str)))
        .collect()
}

impl Publisher {
    /// Registers the spec's event types and the watch-dog's own; with `show_unmatched`, lines
    /// no event takes are printed on stderr.
    pub fn new(spec: Arc<Spec>, show_unmatched: bool) -> Publisher {
        let sensors = spec
            .events
            .iter()
            .map(|e| register(&e.name, e.schema_fields()))
            .collect();
        let s = FieldType::Str;
        Publisher {
            sensors,
            start: register(
                "watchdog.start",
                fields(&[
                    ("run", FieldType::U32),
                    ("pid", FieldType::U32),
                    ("command", s),
                ]),
            ),
            exit: register(
                "watchdog.exit",
                fields(&[
                    ("run", FieldType::U32),
                    ("status", FieldType::I32),
                    ("signal", FieldType::I32),
                    ("crashed", FieldType::Bool),
                    ("reason", s),
                    ("seconds", FieldType::F64),
                    ("last_lines", s),
                ]),
            ),
            unmatched: register(
                "watchdog.unmatched",
                fields(&[
                    ("count", FieldType::U64),
                    ("new", FieldType::U64),
                    ("source", s),
                    ("last_line", s),
                ]),
            ),
            file: register(
                "watchdog.file",
                fields(&[("path", s), ("what", s), ("source", s)]),
            ),
            alert: spec
                .events
                .iter()
                .any(|e| e.severity.is_some())
                .then(|| {
                    register(
                        "gyr.alert",
                        fields(&[("severity", s), ("message", s), ("event", s)]),
                    )
                })
                .flatten(),
            spec,
            counters: Counters::default(),
            last_unmatched: Mutex::new(Unmatched::default()),
            show_unmatched,
            tap: None,
        }
    }

    /// The same publisher, showing every line and event to `tap` too.
    pub fn with_tap(mut self, tap: Tap) -> Publisher {
        self.tap = Some(tap);
        self
    }

    /// The types of the events it records: the spec's (those that registered) and its own.
    pub fn schemas(&self) -> Vec<Schema> {
        self.sensors
            .iter()
            .flatten()
            .chain(&self.start)
            .chain(&self.exit)
            .map(|s| s.schema().clone())
            .collect()
    }

    /// The spec.
    pub fn spec(&self) -> &Arc<Spec> {
        &self.spec
    }

    /// Parses one line of `parser`'s stream and records the events it completes.
    pub fn line(&self, parser: &mut LineParser, source: &str, line: &str) {
        self.counters.lines.fetch_add(1, Ordering::Relaxed);
        if let Some(tap) = &self.tap {
            tap(Tapped::Line {
                instance: parser.instance(),
            });
        }
        let tap = self.tap.as_ref();
        // The parser is borrowed while it parses: the instance is copied for the tap only
        // (without one, nothing is allocated per line).
        let instance = match tap {
            Some(_) => parser.instance().to_owned(),
            None => String::new(),
        };
        let matched = parser.line(line, &mut |event, values| {
            self.counters.events.fetch_add(1, Ordering::Relaxed);
            if let Some(s) = &self.sensors[event] {
                if s.emit(values).is_err() {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(tap) = tap {
                    let run = match values.last() {
                        Some(Value::UInt(r)) => *r as u32,
                        _ => 0,
                    };
                    tap(Tapped::Event {
                        instance: &instance,
                        run,
                        schema: s.schema(),
                        values,
                    });
                }
            }
            let def = &self.spec.events[event];
            if let (Some(sev), Some(alert)) = (def.severity, &self.alert) {
                // The values end with `instance`, then `run`.
                let instance = values
                    .len()
                    .checked_sub(2)
                    .and_then(|i| values.get(i))
                    .cloned()
                    .unwrap_or(Value::Str(String::new()));
                let _ = alert.emit(&[
                    Value::Str(sev.name().to_owned()),
                    Value::Str(cut(line, MAX_SHOWN_LINE).to_owned()),
                    Value::Str(def.name.clone()),
                    instance,
                ]);
            }
        });
        if !matched {
            self.counters.unmatched.fetch_add(1, Ordering::Relaxed);
            if self.show_unmatched {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "gyr watchdog: unmatched [{source}] {line}"
                );
            }
            let mut u = self
                .last_unmatched
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            u.source.clear();
            u.source.push_str(source);
            u.line.clear();
            u.line.push_str(cut(line, MAX_SHOWN_LINE));
            u.instance.clear();
            u.instance.push_str(parser.instance());
        }
    }

    /// Records `watchdog.unmatched` with the count so far and the last such line.
    pub fn unmatched_event(&self, new: u64) {
        let Some(s) = &self.unmatched else { return };
        let u = self
            .last_unmatched
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let _ = s.emit(&[
            Value::UInt(self.counters.unmatched.load(Ordering::Relaxed)),
            Value::UInt(new),
            Value::Str(u.source.clone()),
            Value::Str(u.line.clone()),
            Value::Str(u.instance.clone()),
        ]);
    }

    /// Records `watchdog.start`.
    pub fn start_event(&self, run: u32, pid: u32, command: &str, instance: &str) {
        if let Some(s) = &self.start {
            let values = [
                Value::UInt(run as u64),
                Value::UInt(pid as u64),
                Value::Str(command.to_owned()),
                Value::Str(instance.to_owned()),
            ];
            let _ = s.emit(&values);
            self.tap_own(s, run, instance, &values);
        }
    }

    /// Records `watchdog.exit`.
    #[allow(clippy::too_many_arguments)]
    pub fn exit_event(
        &self,
        run: u32,
        status: Option<i32>,
        signal: Option<i32>,
        reason: &str,
        seconds: f64,
        last_lines: &str,
        instance: &str,
    ) {
        if let Some(s) = &self.exit {
            let values = [
                Value::UInt(run as u64),
                Value::Int(status.unwrap_or(-1) as i64),
                Value::Int(signal.unwrap_or(0) as i64),
                Value::Bool(reason == "crashed"),
                Value::Str(reason.to_owned()),
                Value::Float(seconds),
                Value::Str(last_lines.to_owned()),
                Value::Str(instance.to_owned()),
            ];
            let _ = s.emit(&values);
            self.tap_own(s, run, instance, &values);
        }
    }

    fn tap_own(&self, sensor: &DynamicSensor, run: u32, instance: &str, values: &[Value]) {
        if let Some(tap) = &self.tap {
            tap(Tapped::Event {
                instance,
                run,
                schema: sensor.schema(),
                values,
            });
        }
    }

    /// Records `watchdog.file`.
    pub fn file_event(&self, path: &str, what: &str, source: &str, instance: &str) {
        if let Some(s) = &self.file {
            let _ = s.emit(&[
                Value::Str(path.to_owned()),
                Value::Str(what.to_owned()),
                Value::Str(source.to_owned()),
                Value::Str(instance.to_owned()),
            ]);
        }
    }
}

/// The spec's design points, for the `design` steering object (its attribute list is the
/// process's: one spec per watch-dog).
static DESIGN: OnceLock<Vec<(AttrInfo, f64)>> = OnceLock::new();

/// The `design` steering object: one read-only attribute `EVENT.FIELD` per field with a design
/// point or range, whose value is the design point (NaN when only a range is given) and whose
/// unit, minimum and maximum are the spec's.
#[derive(Debug)]
pub struct Design;

impl Steerable for Design {
    fn attributes() -> Vec<AttrInfo> {
        DESIGN
            .get()
            .map(|d| d.iter().map(|(a, _)| a.clone()).collect())
            .unwrap_or_default()
    }

    fn get_attr(&self, name: &str) -> Option<Value> {
        DESIGN
            .get()?
            .iter()
            .find(|(a, _)| a.name == name)
            .map(|(_, v)| Value::Float(*v))
    }

    fn set_attr(&mut self, name: &str, _value: &Value) -> Result<(), String> {
        Err(format!(
            "design.{name} comes from the spec: change it there and start the watch-dog again"
        ))
    }
}

/// Registers the `design` object for `spec`, if it has design points (once per process).
pub fn register_design(spec: &Spec) -> Result<(), gyr::steer::SteerError> {
    let points = spec.design_points();
    if points.is_empty() {
        return Ok(());
    }
    let list = points
        .into_iter()
        .map(|p| {
            let mut a = AttrInfo::new(format!("{}.{}", p.event, p.field), AttrType::Float);
            a.read_only = true;
            a.unit = p.unit.filter(|u| !u.is_empty());
            a.min = p.min;
            a.max = p.max;
            a.description = Some(format!(
                "design point of {}.{} (from the spec)",
                p.event, p.field
            ));
            (a, p.design.unwrap_or(f64::NAN))
        })
        .collect();
    if DESIGN.set(list).is_err() {
        return Ok(());
    }
    gyr::steer::register_described(
        "design",
        Some("the spec's design points and ranges, for gauges"),
        Design,
    )
    .map(|_| ())
}
