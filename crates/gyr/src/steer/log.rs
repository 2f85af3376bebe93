//! The steering log: who changed what, when, from which value to which.
//!
//! Every probe write, actuation, function call and pause/resume/step is recorded here (the last
//! [`DEFAULT_LOG_CAPACITY`] entries) and, while a runtime runs, emitted as a `gyr.steer` event,
//! so traces show the steering beside the program's own events.

use super::Who;
use crate::dynamic::DynamicSensor;
use gyr_core::{Field, FieldType, Value};
use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};

/// Entries kept in memory; older ones remain in traces as `gyr.steer` events.
pub const DEFAULT_LOG_CAPACITY: usize = 10_000;

/// What was done.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// A probe write.
    Set {
        /// `object.attribute`.
        path: String,
        /// The value before.
        old: Value,
        /// The value after.
        new: Value,
    },
    /// A refused probe write.
    Refused {
        /// `object.attribute` (or the request's target).
        path: String,
        /// The value asked for, as given.
        value: String,
    },
    /// An actuator ran (or failed).
    Actuate {
        /// `object.actuator`.
        path: String,
        /// Its arguments.
        args: Vec<Value>,
        /// What it returned.
        result: Option<Value>,
    },
    /// A registered function was called.
    Call {
        /// The function.
        name: String,
        /// Its arguments.
        args: Vec<Value>,
    },
    /// Pause requested.
    Pause,
    /// The program stalled at a synch point.
    Paused {
        /// Where.
        at: String,
    },
    /// Resumed.
    Resume,
    /// Single-step of `n` synch points.
    Step {
        /// How many.
        n: u64,
    },
    /// Run until a condition.
    RunUntil {
        /// The condition.
        condition: String,
    },
    /// A sensor-control change.
    Sensors {
        /// What changed, as text.
        change: String,
    },
}

impl Action {
    fn parts(&self) -> (&'static str, String, String, String) {
        let args = |a: &[Value]| {
            a.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Action::Set { path, old, new } => {
                ("set", path.clone(), old.to_string(), new.to_string())
            }
            Action::Refused { path, value } => {
                ("refused", path.clone(), String::new(), value.clone())
            }
            Action::Actuate {
                path,
                args: a,
                result,
            } => (
                "actuate",
                path.clone(),
                args(a),
                result.as_ref().map(|r| r.to_string()).unwrap_or_default(),
            ),
            Action::Call { name, args: a } => ("call", name.clone(), args(a), String::new()),
            Action::Pause => ("pause", String::new(), String::new(), String::new()),
            Action::Paused { at } => ("paused", at.clone(), String::new(), String::new()),
            Action::Resume => ("resume", String::new(), String::new(), String::new()),
            Action::Step { n } => ("step", String::new(), String::new(), n.to_string()),
            Action::RunUntil { condition } => {
                ("run-until", condition.clone(), String::new(), String::new())
            }
            Action::Sensors { change } => ("sensors", change.clone(), String::new(), String::new()),
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (verb, target, a, b) = self.parts();
        f.write_str(&describe(verb, &target, &a, &b))
    }
}

pub use gyr_client::describe;

/// One entry of the steering log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    /// Its number, from 1, in the order things happened.
    pub seq: u64,
    /// When, in ns since gyr's timestamp 0 (the trace's time base).
    pub time_ns: u64,
    /// Who did it.
    pub who: String,
    /// What was done.
    pub action: Action,
    /// `Err` with the reason when it failed or was refused.
    pub result: Result<(), String>,
}

struct Log {
    next: u64,
    entries: VecDeque<LogEntry>,
}

static LOG: Mutex<Log> = Mutex::new(Log {
    next: 1,
    entries: VecDeque::new(),
});

fn sensor() -> Option<&'static DynamicSensor> {
    static SENSOR: OnceLock<Option<DynamicSensor>> = OnceLock::new();
    SENSOR
        .get_or_init(|| {
            let fields = vec![
                Field::new("seq", FieldType::U64),
                Field::new("who", FieldType::Str),
                Field::new("action", FieldType::Str),
                Field::new("target", FieldType::Str),
                Field::new("before", FieldType::Str),
                Field::new("after", FieldType::Str),
                Field::new("ok", FieldType::Bool),
                Field::new("error", FieldType::Str),
            ];
            DynamicSensor::register("gyr.steer", fields).ok()
        })
        .as_ref()
}

/// Records one action.
pub(crate) fn record(who: &Who, action: Action, result: Result<(), String>) {
    let time_ns = crate::clock::now_ns();
    let seq = {
        let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
        let seq = log.next;
        log.next += 1;
        if log.entries.len() == DEFAULT_LOG_CAPACITY {
            log.entries.pop_front();
        }
        log.entries.push_back(LogEntry {
            seq,
            time_ns,
            who: who.0.clone(),
            action: action.clone(),
            result: result.clone(),
        });
        seq
    };
    if let Some(s) = sensor() {
        let (verb, target, before, after) = action.parts();
        let _ = s.emit(&[
            Value::UInt(seq),
            Value::Str(who.0.clone()),
            Value::Str(verb.to_owned()),
            Value::Str(target),
            Value::Str(before),
            Value::Str(after),
            Value::Bool(result.is_ok()),
            Value::Str(result.err().unwrap_or_default()),
        ]);
    }
}

/// Entries with a number above `after` (0: all kept), oldest first.
pub fn entries(after: u64) -> Vec<LogEntry> {
    LOG.lock()
        .unwrap_or_else(|e| e.into_inner())
        .entries
        .iter()
        .filter(|e| e.seq > after)
        .cloned()
        .collect()
}

/// Records a sensor-control change made through the server.
pub fn record_sensor_change(who: &Who, change: &str) {
    record(
        who,
        Action::Sensors {
            change: change.to_owned(),
        },
        Ok(()),
    );
}
