//! Actions: what a rule's `then` asks for. The engine collects them and hands them to its
//! host (the hub, `gyr rules test`), which executes them: the engine itself never touches a
//! program, so the same rules can be tested against a recorded trace and then run live.
//!
//! Steering and program-control actions address the program the rule fired for, unless the
//! rule names another with its `target` key ([`crate::rules::Firing::target`]).

use gyr_core::Value;
use rhai::Dynamic;
use std::fmt;

/// How bad an alert is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// For the record.
    Info,
    /// Worth a look.
    Warning,
    /// The run is going wrong.
    Error,
    /// The run is lost unless someone acts.
    Critical,
}

impl Severity {
    /// The severities' names, as written in rules.
    pub const NAMES: &'static str = "info, warning, error or critical";

    /// The severity named `s`.
    pub fn parse(s: &str) -> Option<Severity> {
        Some(match s {
            "info" => Severity::Info,
            "warning" => Severity::Warning,
            "error" => Severity::Error,
            "critical" => Severity::Critical,
            _ => return None,
        })
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing a firing asks its host to do (or, for `Assert` and `Retract`, what it did to
/// working memory).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Tell the user.
    Alert {
        /// How bad.
        severity: Severity,
        /// What happened.
        message: String,
    },
    /// A fact was asserted (or was there already).
    Assert {
        /// Its name.
        name: String,
        /// Its values, sorted by key.
        fields: Vec<(String, Value)>,
    },
    /// Facts were retracted.
    Retract {
        /// Their name.
        name: String,
        /// Only those holding these values (`None`: all of that name).
        fields: Option<Vec<(String, Value)>>,
    },
    /// Write a steering attribute, `object.attribute`.
    Set {
        /// The attribute.
        path: String,
        /// Its new value.
        value: Value,
    },
    /// Run an actuator (`object.actuator`) or call a registered function.
    Call {
        /// The actuator or function.
        path: String,
        /// Its arguments.
        args: Vec<Value>,
    },
    /// Switch a sensor (event type) on or off, optionally at a rate.
    Sensor {
        /// The event type (`""`: all).
        name: String,
        /// On or off.
        enabled: bool,
        /// Events a second at most, when given.
        rate: Option<f64>,
    },
    /// Start the program.
    Start,
    /// Stop the program.
    Stop,
    /// Restart the program with these arguments (empty: the same as before).
    Restart {
        /// The new arguments, as one shell-quoted string.
        args: String,
    },
    /// Send the program a signal, e.g. `SIGUSR1`.
    Signal {
        /// The signal's name.
        signal: String,
    },
    /// Write a line to the program's control file.
    Control {
        /// The line.
        line: String,
    },
    /// Change a `key = value` line of an input file (before a restart).
    SetInput {
        /// The file.
        file: String,
        /// The key.
        key: String,
        /// The new value, as text.
        value: String,
    },
}

fn fields_text(f: &mut fmt::Formatter<'_>, fields: &[(String, Value)]) -> fmt::Result {
    f.write_str("#{")?;
    for (i, (k, v)) in fields.iter().enumerate() {
        write!(f, "{}{k}: {v}", if i == 0 { "" } else { ", " })?;
    }
    f.write_str("}")
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Alert { severity, message } => write!(f, "alert {severity}: {message}"),
            Action::Assert { name, fields } => {
                write!(f, "assert {name} ")?;
                fields_text(f, fields)
            }
            Action::Retract { name, fields } => {
                write!(f, "retract {name}")?;
                match fields {
                    Some(fields) => {
                        f.write_str(" ")?;
                        fields_text(f, fields)
                    }
                    None => Ok(()),
                }
            }
            Action::Set { path, value } => write!(f, "set {path} = {value}"),
            Action::Call { path, args } => {
                write!(f, "call {path}(")?;
                for (i, a) in args.iter().enumerate() {
                    write!(f, "{}{a}", if i == 0 { "" } else { ", " })?;
                }
                f.write_str(")")
            }
            Action::Sensor {
                name,
                enabled,
                rate,
            } => {
                let name = if name.is_empty() { "*" } else { name };
                write!(f, "sensor {name} {}", if *enabled { "on" } else { "off" })?;
                match rate {
                    Some(r) => write!(f, " rate {r}"),
                    None => Ok(()),
                }
            }
            Action::Start => f.write_str("start"),
            Action::Stop => f.write_str("stop"),
            Action::Restart { args } => write!(f, "restart {args:?}"),
            Action::Signal { signal } => write!(f, "signal {signal}"),
            Action::Control { line } => write!(f, "control {line:?}"),
            Action::SetInput { file, key, value } => {
                write!(f, "set_input {file}: {key} = {value}")
            }
        }
    }
}

/// Signals a rule may send, by name.
pub(crate) const SIGNALS: &[&str] = &[
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGCONT", "SIGSTOP",
    "SIGTSTP", "SIGKILL", "SIGALRM", "SIGWINCH",
];

/// Checks a signal's name (`SIGUSR1` or `USR1`), giving its full name.
pub(crate) fn signal_name(s: &str) -> Result<String, String> {
    let full = if s.starts_with("SIG") {
        s.to_owned()
    } else {
        format!("SIG{s}")
    };
    if SIGNALS.contains(&full.as_str()) {
        Ok(full)
    } else {
        Err(format!(
            "`{s}` is not a signal a rule may send: use one of {}",
            SIGNALS.join(", ")
        ))
    }
}

/// Checks an attribute's path: `object.attribute`, or a parameter's name alone (a steerable
/// value registered on its own, `gyr::steer::param`).
pub(crate) fn attribute_path(s: &str) -> Result<(), String> {
    let name = |x: &str| {
        x.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && x.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let ok = match s.split_once('.') {
        Some((o, a)) => name(o) && !a.is_empty(),
        None => name(s),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{s}` is not an attribute: write `object.attribute` (e.g. \"solver.relax\"), or a parameter's name"
        ))
    }
}

/// A script value as an event value, or why it cannot be one.
pub(crate) fn to_value(d: &Dynamic) -> Result<Value, String> {
    if let Ok(i) = d.as_int() {
        Ok(Value::Int(i))
    } else if let Ok(x) = d.as_float() {
        Ok(Value::Float(x))
    } else if let Ok(b) = d.as_bool() {
        Ok(Value::Bool(b))
    } else if let Ok(c) = d.as_char() {
        Ok(Value::Str(c.to_string()))
    } else if d.is_string() {
        Ok(Value::Str(d.clone().into_string().unwrap_or_default()))
    } else if d.is_array() {
        let items = d.clone().into_array().unwrap_or_default();
        Ok(Value::Array(
            items.iter().map(to_value).collect::<Result<_, _>>()?,
        ))
    } else if d.is_blob() {
        Ok(Value::Bytes(d.clone().into_blob().unwrap_or_default()))
    } else {
        Err(format!(
            "a {} cannot be a value here; use numbers, booleans, strings or arrays",
            d.type_name()
        ))
    }
}

/// An event value as a script value.
pub(crate) fn to_dynamic(v: &Value) -> Dynamic {
    match v {
        Value::Int(i) => Dynamic::from_int(*i),
        Value::UInt(u) => match i64::try_from(*u) {
            Ok(i) => Dynamic::from_int(i),
            Err(_) => Dynamic::from_float(*u as f64),
        },
        Value::Float(x) => Dynamic::from_float(*x),
        Value::Bool(b) => Dynamic::from_bool(*b),
        Value::Str(s) => Dynamic::from(s.clone()),
        Value::Bytes(b) => Dynamic::from_blob(b.clone()),
        Value::Array(items) => Dynamic::from_array(items.iter().map(to_dynamic).collect()),
    }
}

/// A script map as a fact's values, sorted by key.
pub(crate) fn map_fields(m: &rhai::Map) -> Result<Vec<(String, Value)>, String> {
    let mut out = m
        .iter()
        .map(|(k, v)| {
            to_value(v)
                .map(|v| (k.to_string(), v))
                .map_err(|e| format!("value `{k}`: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A fact's values as a script map.
pub(crate) fn fields_map(fields: &[(String, Value)]) -> rhai::Map {
    fields
        .iter()
        .map(|(k, v)| (k.as_str().into(), to_dynamic(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_and_signals_are_checked() {
        assert_eq!(Severity::parse("critical"), Some(Severity::Critical));
        assert_eq!(Severity::parse("fatal"), None);
        assert_eq!(signal_name("USR1").unwrap(), "SIGUSR1");
        assert!(signal_name("SIGFOO").unwrap_err().contains("SIGUSR1"));
        assert!(attribute_path("solver.relax").is_ok());
        assert!(attribute_path("relax").is_ok(), "a parameter");
        assert!(attribute_path("").is_err());
        assert!(attribute_path(".relax").is_err());
        assert!(attribute_path("9x.y").is_err());
    }

    #[test]
    fn values_round_trip_through_scripts() {
        for v in [
            Value::Int(-3),
            Value::Float(2.5),
            Value::Bool(true),
            Value::Str("x".into()),
            Value::Array(vec![Value::Float(1.0), Value::Float(2.0)]),
        ] {
            assert_eq!(to_value(&to_dynamic(&v)).unwrap(), v);
        }
        assert!(to_value(&Dynamic::from_map(rhai::Map::new())).is_err());
    }
}
