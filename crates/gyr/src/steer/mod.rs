//! Steering: changing a running program, by hand or by rule, without a restart.
//!
//! # The model (Progress)
//!
//! A program registers **steering objects** under names: structs with `#[derive(Steerable)]`
//! ([`register`]) or single values ([`param`]). From outside, **probes** read and write their
//! attributes at any time ([`get`], [`set`]), each write checked against the attribute's type,
//! range and validator, and applied whole or not at all. **Actuators** are named operations on
//! an object that the program runs itself, at its next **synch point** ([`sync_point`]), with
//! pre- and post-conditions ([`actuate`]). Synch points are also where a program is paused,
//! single-stepped or run until a condition ([`pause`], [`resume`], [`step`], [`run_until`]).
//! **Registered functions** are called with typed arguments on the caller's thread ([`call`]).
//! Everything done is written to the **steering log** ([`log`]). The **event/action
//! repository** ([`repository`]) steers by rule, inside the process.
//!
//! ```
//! use gyr::steer::{self, Actuator, AttrType, Who};
//!
//! #[derive(gyr::Steerable)]
//! struct Integrator {
//!     #[steer(unit = "s", min = 1e-6, max = 0.1, description = "time step")]
//!     dt: f64,
//!     #[steer(read_only)]
//!     step: u64,
//! }
//!
//! let integ = steer::register("integrator", Integrator { dt: 0.01, step: 0 }).unwrap();
//! integ.add_actuator(Actuator::new("halve_dt", |i: &mut Integrator, _| {
//!     i.dt /= 2.0;
//!     Ok(gyr::gyr_core::Value::Float(i.dt))
//! })).unwrap();
//!
//! // From outside (the steering server does this for clients):
//! let who = Who::new("doc example");
//! steer::set("integrator.dt", gyr::gyr_core::Value::Float(0.02), &who).unwrap();
//! assert!(steer::set("integrator.dt", gyr::gyr_core::Value::Float(5.0), &who).is_err()); // out of range
//! assert!(steer::set("integrator.step", gyr::gyr_core::Value::UInt(3), &who).is_err()); // read-only
//! let pending = steer::actuate("integrator.halve_dt", &[], &who).unwrap();
//!
//! // In the program's loop:
//! steer::sync_point("step"); // runs the queued actuator here
//! assert_eq!(pending.wait(std::time::Duration::from_secs(1)).unwrap(), gyr::gyr_core::Value::Float(0.01));
//! assert_eq!(integ.read().dt, 0.01);
//! # integ.unregister();
//! ```

mod condition;
mod dynamic;
pub mod log;
mod object;
mod param;
pub mod repository;
mod synch;
mod value;

pub use condition::Condition;
pub use dynamic::DynamicObject;
pub use object::{
    Actuator, Args, DEFAULT_PROBE_LOCK_TIMEOUT, ObjectKind, OperationInfo, Param as ParamInfo,
    Steerable, Steered,
};
pub use param::{PARAM_ATTRIBUTE, Param, ParamBuilder};
pub use synch::{
    Pending, RunState, pause, resume, run_until, run_until_condition, state, step, sync_point,
    sync_point_interruptible, synch_point_counts,
};
pub use value::{AttrInfo, AttrType, AttrValue, ScalarKind};

use crate::sample::CellValue;
use gyr_core::Value;
use object::ObjectEntry;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Who asked for a steering action, as the log shows it: `cli uid=1000 pid=4242`,
/// `rule balance`, `program`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who(pub String);

impl Who {
    /// A named client.
    pub fn new(name: impl Into<String>) -> Self {
        Who(name.into())
    }

    /// The program itself.
    pub fn program() -> Self {
        Who("program".into())
    }
}

/// Why a steering request was refused. Every message says what was wrong and, where it helps,
/// what would be accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SteerError {
    /// No object of that name.
    #[error("no steering object named `{name}`; registered: {}", list(known))]
    UnknownObject {
        /// The name asked for.
        name: String,
        /// The names registered.
        known: Vec<String>,
    },
    /// The object has no such attribute.
    #[error(
        "`{object}` has no attribute `{attribute}`; its attributes: {}",
        list(known)
    )]
    UnknownAttribute {
        /// The object.
        object: String,
        /// The attribute asked for.
        attribute: String,
        /// Its attributes.
        known: Vec<String>,
    },
    /// No actuator or function of that name.
    #[error("no actuator or function `{path}`; available: {}", list(known))]
    UnknownOperation {
        /// What was asked for.
        path: String,
        /// What exists.
        known: Vec<String>,
    },
    /// The attribute may only be read.
    #[error("`{path}` is read-only")]
    ReadOnly {
        /// `object.attribute`.
        path: String,
    },
    /// The value has the wrong type.
    #[error("`{path}` is of type {ty}: {reason}")]
    WrongType {
        /// `object.attribute`.
        path: String,
        /// Its type.
        ty: AttrType,
        /// What was wrong.
        reason: String,
    },
    /// The value is outside the attribute's range.
    #[error("`{path}` out of range: {reason}; the value is unchanged")]
    OutOfRange {
        /// `object.attribute`.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The object's own validator refused the value.
    #[error("`{path}` refused the value: {reason}; the value is unchanged")]
    Invalid {
        /// `object.attribute`.
        path: String,
        /// The validator's message.
        reason: String,
    },
    /// Arguments do not match the parameters.
    #[error("bad arguments for `{target}`: {reason}")]
    BadArguments {
        /// The actuator or function.
        target: String,
        /// What was wrong.
        reason: String,
    },
    /// A run-until condition could not be understood.
    #[error("bad condition `{condition}`: {reason}")]
    BadCondition {
        /// The condition as given.
        condition: String,
        /// What was wrong.
        reason: String,
    },
    /// A path is not `object` or `object.attribute`.
    #[error("`{0}` is not a steering path: write `object.attribute`, or `object` for a parameter")]
    BadPath(String),
    /// The name is already taken.
    #[error("`{name}` is already registered")]
    AlreadyRegistered {
        /// The name.
        name: String,
    },
    /// The name cannot be used.
    #[error(
        "`{0}` is not a valid name: use letters, digits, `_` and `-`, starting with a letter (no dots: they separate object and attribute)"
    )]
    BadName(String),
    /// The program held the object's lock too long.
    #[error("`{object}` is locked by the program; try again, or pause the program first")]
    Busy {
        /// The object.
        object: String,
    },
    /// The actuator's pre-condition did not hold; it did not run.
    #[error("pre-condition of `{path}` failed: {reason}; the actuator did not run")]
    PreconditionFailed {
        /// `object.actuator`.
        path: String,
        /// The pre-condition's message.
        reason: String,
    },
    /// The actuator ran, and its post-condition failed.
    #[error("post-condition of `{path}` failed after it ran: {reason}")]
    PostconditionFailed {
        /// `object.actuator`.
        path: String,
        /// The post-condition's message.
        reason: String,
    },
    /// The actuator or function returned an error (or panicked).
    #[error("`{path}` failed: {reason}")]
    ActuatorFailed {
        /// The actuator or function.
        path: String,
        /// Its message.
        reason: String,
    },
    /// The program did not reach a synch point in time.
    #[error(
        "`{path}` is queued, but the program has not reached a synch point in {waited:?}; actuators run at gyr::steer::sync_point"
    )]
    NoSynchPoint {
        /// `object.actuator`.
        path: String,
        /// How long the caller waited.
        waited: std::time::Duration,
    },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn valid_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic())
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        && name.len() <= 64
}

static OBJECTS: Mutex<BTreeMap<String, Arc<dyn ObjectEntry>>> = Mutex::new(BTreeMap::new());

fn objects_lock() -> MutexGuard<'static, BTreeMap<String, Arc<dyn ObjectEntry>>> {
    OBJECTS.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register_entry(name: &str, entry: Arc<dyn ObjectEntry>) -> Result<(), SteerError> {
    if !valid_name(name) {
        return Err(SteerError::BadName(name.to_owned()));
    }
    let mut objects = objects_lock();
    if objects.contains_key(name) || functions_lock().contains_key(name) {
        return Err(SteerError::AlreadyRegistered {
            name: name.to_owned(),
        });
    }
    objects.insert(name.to_owned(), entry);
    Ok(())
}

pub(crate) fn unregister(name: &str) {
    objects_lock().remove(name);
}

/// Registers `value` as the steering object `name`; the program keeps using it through the
/// returned handle.
pub fn register<T: Steerable>(name: &str, value: T) -> Result<Steered<T>, SteerError> {
    register_described(name, None, value)
}

/// [`register`], with a description shown to clients.
pub fn register_described<T: Steerable>(
    name: &str,
    description: Option<&str>,
    value: T,
) -> Result<Steered<T>, SteerError> {
    let steered = Steered::new(name, description.map(str::to_owned), value);
    register_entry(name, steered.entry())?;
    Ok(steered)
}

/// Starts describing a steerable parameter: `steer::param("dt", 0.01).unit("s").range(0.0, 0.1).register()`.
pub fn param<T: CellValue + AttrValue>(name: &str, initial: T) -> ParamBuilder<T> {
    ParamBuilder::new(name, initial)
}

fn lookup(name: &str) -> Result<Arc<dyn ObjectEntry>, SteerError> {
    let objects = objects_lock();
    objects
        .get(name)
        .cloned()
        .ok_or_else(|| SteerError::UnknownObject {
            name: name.to_owned(),
            known: objects.keys().cloned().collect(),
        })
}

/// Splits `object.attribute` (a bare name means a parameter's value).
fn split_path(path: &str) -> Result<(&str, &str), SteerError> {
    let path = path.trim();
    match path.split_once('.') {
        Some((o, a)) if !o.is_empty() && !a.is_empty() => Ok((o, a)),
        None if !path.is_empty() => Ok((path, PARAM_ATTRIBUTE)),
        _ => Err(SteerError::BadPath(path.to_owned())),
    }
}

/// What a client knows about a registered object.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectInfo {
    /// Its name.
    pub name: String,
    /// Object or parameter.
    pub kind: ObjectKind,
    /// What it is.
    pub description: Option<String>,
    /// Its attributes.
    pub attributes: Vec<AttrInfo>,
    /// Its actuators.
    pub actuators: Vec<OperationInfo>,
    /// Bumped by every change (probe write, actuator, or the program's own write).
    pub version: u64,
}

/// Every registered object, by name.
pub fn objects() -> Vec<ObjectInfo> {
    let entries: Vec<_> = objects_lock().values().cloned().collect();
    entries
        .into_iter()
        .map(|e| ObjectInfo {
            name: e.name().to_owned(),
            kind: e.kind(),
            description: e.description(),
            attributes: e.attributes(),
            actuators: e.actuators(),
            version: e.version(),
        })
        .collect()
}

/// Probe read of `object.attribute` (or a parameter's name).
pub fn get(path: &str) -> Result<Value, SteerError> {
    let (o, a) = split_path(path)?;
    let entry = lookup(o)?;
    let mut v = entry.get(&[a])?;
    Ok(v.pop().map(|(_, v)| v).unwrap_or(Value::Bool(false)))
}

/// Probe read of every attribute of `object`, as one consistent snapshot.
pub fn get_all(object: &str) -> Result<Vec<(String, Value)>, SteerError> {
    lookup(object)?.get(&[])
}

/// Probe write of one attribute: checked, applied atomically, logged. Returns the old value.
pub fn set(path: &str, value: Value, who: &Who) -> Result<Value, SteerError> {
    let mut done = set_many(&[(path.to_owned(), value)], who)?;
    Ok(done
        .pop()
        .map(|(_, old, _)| old)
        .unwrap_or(Value::Bool(false)))
}

/// Probe write of several attributes in one request. Writes to one object are applied all
/// together or not at all; a request spanning objects is checked whole before anything is
/// written. Returns `(path, old, new)` for each write.
pub fn set_many(
    writes: &[(String, Value)],
    who: &Who,
) -> Result<Vec<(String, Value, Value)>, SteerError> {
    let result = set_many_inner(writes, who);
    if let Err(e) = &result {
        let path = writes
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let value = writes
            .iter()
            .map(|(_, v)| v.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        log::record(
            who,
            log::Action::Refused { path, value },
            Err(e.to_string()),
        );
    }
    result
}

/// `(attribute, value)` pairs for one object.
type Writes = Vec<(String, Value)>;

fn set_many_inner(
    writes: &[(String, Value)],
    who: &Who,
) -> Result<Vec<(String, Value, Value)>, SteerError> {
    // Group by object, keeping request order.
    let mut groups: Vec<(Arc<dyn ObjectEntry>, Writes)> = Vec::new();
    for (path, v) in writes {
        let (o, a) = split_path(path)?;
        let entry = lookup(o)?;
        match groups.iter_mut().find(|(e, _)| e.name() == o) {
            Some((_, w)) => w.push((a.to_owned(), v.clone())),
            None => groups.push((entry, vec![(a.to_owned(), v.clone())])),
        }
    }
    // Check every group before writing any.
    for (entry, w) in &groups {
        object::validate_writes(entry.name(), &entry.attributes(), w)?;
    }
    let mut out = Vec::new();
    for (entry, w) in groups {
        let done = entry.set(&w)?;
        object::log_writes(who, entry.name(), &done);
        out.extend(
            done.into_iter()
                .map(|(a, old, new)| (format!("{}.{a}", entry.name()), old, new)),
        );
    }
    Ok(out)
}

/// Parses text typed by a user as the type of the attribute at `path`.
pub fn parse_value(path: &str, text: &str) -> Result<Value, SteerError> {
    let (o, a) = split_path(path)?;
    let entry = lookup(o)?;
    let infos = entry.attributes();
    let info = infos
        .iter()
        .find(|i| i.name == a)
        .ok_or_else(|| SteerError::UnknownAttribute {
            object: o.to_owned(),
            attribute: a.to_owned(),
            known: infos.iter().map(|i| i.name.clone()).collect(),
        })?;
    info.ty.parse(text).map_err(|reason| SteerError::WrongType {
        path: format!("{o}.{a}"),
        ty: info.ty,
        reason,
    })
}

/// Queues the actuator `object.actuator` with `args`; it runs at the program's next synch point.
pub fn actuate(path: &str, args: &[Value], who: &Who) -> Result<Pending, SteerError> {
    let (o, a) = path
        .split_once('.')
        .ok_or_else(|| SteerError::BadPath(path.to_owned()))?;
    let entry = lookup(o)?;
    let params = entry.actuator_params(a)?;
    let args = object::check_args(path, &params, args)?;
    Ok(synch::enqueue(entry, a, args, who.clone()))
}

type FunctionBody = Box<dyn Fn(&Args) -> Result<Value, String> + Send + Sync>;

/// A program function that clients may call with typed arguments (Progress: registered
/// functions). It runs on the caller's thread (the steering server's), so it must do its own
/// synchronisation with the program, or be called while the program is paused.
pub struct Function {
    name: String,
    description: Option<String>,
    params: Vec<object::Param>,
    body: FunctionBody,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .finish()
    }
}

impl Function {
    /// A function called `name`.
    pub fn new(
        name: &str,
        body: impl Fn(&Args) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Function {
            name: name.to_owned(),
            description: None,
            params: Vec::new(),
            body: Box::new(body),
        }
    }

    /// Declares the next parameter.
    pub fn param(mut self, name: &str, ty: AttrType) -> Self {
        self.params.push(object::Param {
            name: name.to_owned(),
            ty,
        });
        self
    }

    /// Says what it does.
    pub fn description(mut self, d: &str) -> Self {
        self.description = Some(d.to_owned());
        self
    }

    /// Registers it.
    pub fn register(self) -> Result<(), SteerError> {
        if !valid_name(&self.name) {
            return Err(SteerError::BadName(self.name));
        }
        let mut functions = functions_lock();
        if functions.contains_key(&self.name) || objects_lock().contains_key(&self.name) {
            return Err(SteerError::AlreadyRegistered { name: self.name });
        }
        functions.insert(self.name.clone(), Arc::new(self));
        Ok(())
    }
}

static FUNCTIONS: Mutex<BTreeMap<String, Arc<Function>>> = Mutex::new(BTreeMap::new());

fn functions_lock() -> MutexGuard<'static, BTreeMap<String, Arc<Function>>> {
    FUNCTIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every registered function.
pub fn functions() -> Vec<OperationInfo> {
    functions_lock()
        .values()
        .map(|f| OperationInfo {
            name: f.name.clone(),
            params: f.params.clone(),
            description: f.description.clone(),
        })
        .collect()
}

/// Calls the registered function `name`.
pub fn call(name: &str, args: &[Value], who: &Who) -> Result<Value, SteerError> {
    let f = {
        let functions = functions_lock();
        functions
            .get(name)
            .cloned()
            .ok_or_else(|| SteerError::UnknownOperation {
                path: name.to_owned(),
                known: functions.keys().cloned().collect(),
            })?
    };
    let args = object::check_args(name, &f.params, args)?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (f.body)(&args)))
        .unwrap_or_else(|_| Err("it panicked".to_owned()))
        .map_err(|reason| SteerError::ActuatorFailed {
            path: name.to_owned(),
            reason,
        });
    log::record(
        who,
        log::Action::Call {
            name: name.to_owned(),
            args: args.0.clone(),
        },
        result.as_ref().map(|_| ()).map_err(|e| e.to_string()),
    );
    result
}
