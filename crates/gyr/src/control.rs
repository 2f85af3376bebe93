//! Sensor control: switching sensors on and off and limiting their rate while the program runs.
//!
//! # Levels
//!
//! Falcon controlled sensors per type, per registered instance and for the whole program; gyr
//! does the same. A sensor records an event only when the global switch, its type's switch and
//! (for an instance) its own switch are all on. The rate in force is the most specific one set:
//! instance, else type, else global.
//!
//! Settings are kept by name, so a setting made before a type is first used applies when it is.
//! Each change recomputes one effective state per type and instance, which is all the hot path
//! reads: a disabled sensor costs one relaxed load and a branch. The settings and that
//! computation live with the registry; this module is the way to change and list them.

use crate::registry::{Controls, STATE_OFF, Setting, controls, recompute, registry};
use std::fmt;
use std::sync::atomic::Ordering;

pub use crate::registry::Rate;

/// Which sensors a control command applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every sensor.
    Global,
    /// Every sensor of the event type with this name.
    Type(String),
    /// The registered sensor instance with this name.
    Instance(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Global => f.write_str("all sensors"),
            Target::Type(n) => write!(f, "type `{n}`"),
            Target::Instance(n) => write!(f, "instance `{n}`"),
        }
    }
}

/// A control command was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The rate is not positive.
    #[error(
        "rate {0} is not valid: give a positive number of events per second, or every N with N >= 1"
    )]
    BadRate(String),
    /// `gyr.lost` cannot be switched off or thinned.
    #[error(
        "`{name}` cannot be switched off or rate-limited: losses are always reported, so that nothing is lost silently"
    )]
    LossesAlwaysReported {
        /// The loss type's name.
        name: String,
    },
    /// No sensor type of that name is registered.
    #[error("no sensor type named `{name}`; types: {}", known.join(", "))]
    UnknownType {
        /// The name asked for.
        name: String,
        /// The registered types.
        known: Vec<String>,
    },
    /// No sensor instance of that name is registered.
    #[error("no sensor instance named `{name}`; {}", instances_text(known))]
    UnknownInstance {
        /// The name asked for.
        name: String,
        /// The registered instances.
        known: Vec<String>,
    },
}

fn instances_text(known: &[String]) -> String {
    if known.is_empty() {
        "this program registers no instances (use --type for a whole type)".to_owned()
    } else {
        format!("instances: {}", known.join(", "))
    }
}

/// Checks a change asked for from outside the program before it is made: the type or
/// instance must exist (in process, a setting may come before its type is first used), and
/// `gyr.lost` stays on with every event, since losses are always reported whatever the
/// switches say.
pub fn check_change(
    target: &Target,
    enabled: Option<bool>,
    rate: Option<Rate>,
) -> Result<(), ControlError> {
    let all = sensors();
    match target {
        Target::Global => {}
        Target::Type(n) => {
            if !all
                .iter()
                .any(|s| &s.type_name == n && s.instance.is_none())
            {
                return Err(ControlError::UnknownType {
                    name: n.clone(),
                    known: all
                        .iter()
                        .filter(|s| s.instance.is_none())
                        .map(|s| s.type_name.clone())
                        .collect(),
                });
            }
            let thinned = rate.is_some_and(|r| r != Rate::All);
            if n == gyr_core::LOST_EVENT_NAME && (enabled == Some(false) || thinned) {
                return Err(ControlError::LossesAlwaysReported { name: n.clone() });
            }
        }
        Target::Instance(n) => {
            if !all.iter().any(|s| s.instance.as_ref() == Some(n)) {
                return Err(ControlError::UnknownInstance {
                    name: n.clone(),
                    known: all.into_iter().filter_map(|s| s.instance).collect(),
                });
            }
        }
    }
    match rate {
        Some(Rate::EveryNth(0)) => Err(ControlError::BadRate(
            "every 0: every N needs N >= 1; use `all` or `on` for every event".into(),
        )),
        Some(Rate::PerSecond(r)) if !(r > 0.0 && r.is_finite()) => {
            Err(ControlError::BadRate(format!("{r}/s")))
        }
        _ => Ok(()),
    }
}

fn controls_mut<'a>(list: &'a mut Vec<(String, Controls)>, name: &str) -> &'a mut Controls {
    if let Some(i) = list.iter().position(|(n, _)| n == name) {
        return &mut list[i].1;
    }
    list.push((name.to_owned(), Controls::default()));
    &mut list.last_mut().unwrap().1
}

/// Switches sensors on or off. `gyr.lost` is not a sensor of the program: losses are reported
/// whatever the switches say (clients are told so by [`check_change`]).
pub fn set_enabled(target: &Target, on: bool) {
    let mut reg = registry();
    match target {
        Target::Global => reg.global.enabled = Setting::Set(on),
        Target::Type(n) => controls_mut(&mut reg.type_controls, n).enabled = Setting::Set(on),
        Target::Instance(n) => {
            controls_mut(&mut reg.instance_controls, n).enabled = Setting::Set(on)
        }
    }
    recompute(&mut reg);
}

/// Limits how many events sensors record.
pub fn set_rate(target: &Target, rate: Rate) -> Result<(), ControlError> {
    match rate {
        Rate::EveryNth(0) => return Err(ControlError::BadRate("every 0th".into())),
        Rate::PerSecond(r) if !(r > 0.0 && r.is_finite()) => {
            return Err(ControlError::BadRate(format!("{r}/s")));
        }
        _ => {}
    }
    let mut reg = registry();
    match target {
        Target::Global => reg.global.rate = Setting::Set(rate),
        Target::Type(n) => controls_mut(&mut reg.type_controls, n).rate = Setting::Set(rate),
        Target::Instance(n) => {
            controls_mut(&mut reg.instance_controls, n).rate = Setting::Set(rate)
        }
    }
    recompute(&mut reg);
    Ok(())
}

/// What one sensor type or instance is doing, for listings.
#[derive(Debug, Clone, PartialEq)]
pub struct SensorStatus {
    /// The event type's name.
    pub type_name: String,
    /// The instance's name, for a registered instance.
    pub instance: Option<String>,
    /// `tracing`, `sampling`, `extended`, `spec` or `builtin`.
    pub kind: &'static str,
    /// Whether events are being recorded now (all switches on and a runtime running).
    pub active: bool,
    /// Whether its own switches (global, type, instance) are on.
    pub enabled: bool,
    /// The rate in force.
    pub rate: Rate,
    /// Events skipped by the rate limit so far.
    pub skipped: u64,
}

/// Lists every registered sensor type and instance with its state.
pub fn sensors() -> Vec<SensorStatus> {
    let reg = registry();
    let mut out = Vec::new();
    for t in &reg.types {
        let c = controls(&reg.type_controls, &t.schema.name);
        let enabled = reg.global.enabled.get_or(true) && c.enabled.get_or(true);
        out.push(SensorStatus {
            type_name: t.schema.name.clone(),
            instance: None,
            kind: t.kind,
            active: t.handle.state.load(Ordering::Relaxed) != STATE_OFF && reg.running,
            enabled,
            rate: c.rate.or(reg.global.rate).get_or(Rate::All),
            skipped: t.handle.limits.skipped.load(Ordering::Relaxed),
        });
    }
    for i in &reg.instances {
        let tc = controls(&reg.type_controls, &i.type_name);
        let ic = controls(&reg.instance_controls, &i.name);
        let enabled =
            reg.global.enabled.get_or(true) && tc.enabled.get_or(true) && ic.enabled.get_or(true);
        out.push(SensorStatus {
            type_name: i.type_name.clone(),
            instance: Some(i.name.clone()),
            kind: "instance",
            active: i.handle.state.load(Ordering::Relaxed) != STATE_OFF && reg.running,
            enabled,
            rate: ic.rate.or(tc.rate).or(reg.global.rate).get_or(Rate::All),
            skipped: i.handle.limits.skipped.load(Ordering::Relaxed),
        });
    }
    out
}

/// Sets whether a runtime is running (no runtime: every sensor is off).
pub(crate) fn set_running(running: bool) {
    let mut reg = registry();
    reg.running = running;
    recompute(&mut reg);
}
