//! Steering objects: application state registered under a name, whose attributes probes read
//! and write while the program runs, and whose actuators the program runs at its synch points.
//!
//! # Consistency
//!
//! Progress distinguished asynchronous access (probes, at any time) from synchronous access
//! (actuators, at points the program chooses). A registered object lives behind a read-write
//! lock: the program reads it through [`Steered::read`], a probe write takes the lock for the
//! moment it writes, so a write of several attributes is applied all together or not at all and
//! the program never sees half of it. An actuator runs on the program's own thread at its next
//! synch point, where the program has said that changing the object is safe.

use super::value::{AttrInfo, AttrType, AttrValue};
use super::{SteerError, Who, log};
use gyr_core::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// How long a probe waits for the program to release an object's lock before it gives up.
pub const DEFAULT_PROBE_LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// A struct whose fields are steering attributes. Derive it: `#[derive(gyr::Steerable)]`.
///
/// A hand-written implementation lists its attributes and reads and writes them by name; values
/// reach [`Steerable::set_attr`] already converted to the attribute's type and range-checked.
pub trait Steerable: Send + Sync + 'static {
    /// The attributes, with nested structs flattened as `outer.inner`.
    fn attributes() -> Vec<AttrInfo>;
    /// Reads one attribute; `None` if there is no such attribute.
    fn get_attr(&self, name: &str) -> Option<Value>;
    /// Writes one attribute, or says why the value is refused (a validator's message).
    fn set_attr(&mut self, name: &str, value: &Value) -> Result<(), String>;
}

/// Arguments given to an actuator or a registered function, already checked against its
/// parameter list.
#[derive(Debug, Clone, PartialEq)]
pub struct Args(pub(crate) Vec<Value>);

impl Args {
    /// Argument `i` as a `T`.
    pub fn get<T: AttrValue>(&self, i: usize) -> Result<T, String> {
        let v = self
            .0
            .get(i)
            .ok_or_else(|| format!("argument {} is missing", i + 1))?;
        T::from_value(v)
    }

    /// All arguments.
    pub fn values(&self) -> &[Value] {
        &self.0
    }
}

/// A parameter of an actuator or a function.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: AttrType,
}

/// Checks and converts arguments against a parameter list.
pub(crate) fn check_args(what: &str, params: &[Param], args: &[Value]) -> Result<Args, SteerError> {
    if args.len() != params.len() {
        let list = params
            .iter()
            .map(|p| format!("{}: {}", p.name, p.ty))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(SteerError::BadArguments {
            target: what.to_owned(),
            reason: format!(
                "it takes {} arguments ({list}) but {} were given",
                params.len(),
                args.len()
            ),
        });
    }
    params
        .iter()
        .zip(args)
        .map(|(p, a)| {
            p.ty.convert(a).map_err(|e| SteerError::BadArguments {
                target: what.to_owned(),
                reason: format!("{}: {e}", p.name),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Args)
}

type Pre<T> = Box<dyn Fn(&T, &Args) -> Result<(), String> + Send + Sync>;
type Run<T> = Box<dyn Fn(&mut T, &Args) -> Result<Value, String> + Send + Sync>;
type Post<T> = Box<dyn Fn(&T) -> Result<(), String> + Send + Sync>;

/// A named operation on a steering object, run synchronously by the program at its next synch
/// point (Progress's "actuate"), guarded by an optional pre-condition and checked by an optional
/// post-condition.
pub struct Actuator<T> {
    name: String,
    description: Option<String>,
    params: Vec<Param>,
    pre: Option<Pre<T>>,
    run: Run<T>,
    post: Option<Post<T>>,
}

impl<T> std::fmt::Debug for Actuator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actuator")
            .field("name", &self.name)
            .field("params", &self.params)
            .finish()
    }
}

impl<T: Steerable> Actuator<T> {
    /// An actuator called `name` that runs `run` on the object.
    pub fn new(
        name: &str,
        run: impl Fn(&mut T, &Args) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        Actuator {
            name: name.to_owned(),
            description: None,
            params: Vec::new(),
            pre: None,
            run: Box::new(run),
            post: None,
        }
    }

    /// Declares the next parameter.
    pub fn param(mut self, name: &str, ty: AttrType) -> Self {
        self.params.push(Param {
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

    /// A test that must pass before the actuator runs; its message says why it did not.
    pub fn pre(
        mut self,
        f: impl Fn(&T, &Args) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.pre = Some(Box::new(f));
        self
    }

    /// A test run after the actuator; a failure is reported to the caller (the change stays).
    pub fn post(mut self, f: impl Fn(&T) -> Result<(), String> + Send + Sync + 'static) -> Self {
        self.post = Some(Box::new(f));
        self
    }
}

/// What a client knows about an actuator or a function.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationInfo {
    /// Its name.
    pub name: String,
    /// Its parameters.
    pub params: Vec<Param>,
    /// What it does.
    pub description: Option<String>,
}

/// The kind of a registered object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A struct registered with [`super::register`].
    Object,
    /// A single value registered with [`super::param`].
    Param,
}

/// The registry's view of an object, whatever its Rust type.
pub(crate) trait ObjectEntry: Send + Sync {
    fn name(&self) -> &str;
    fn kind(&self) -> ObjectKind;
    fn description(&self) -> Option<String>;
    fn attributes(&self) -> Vec<AttrInfo>;
    /// Reads attributes (all of them for an empty list) under one lock: a consistent snapshot.
    fn get(&self, attrs: &[&str]) -> Result<Vec<(String, Value)>, SteerError>;
    /// Writes attributes all together or not at all; returns `(attr, old, new)`.
    fn set(&self, writes: &[(String, Value)]) -> Result<Vec<(String, Value, Value)>, SteerError>;
    fn actuators(&self) -> Vec<OperationInfo>;
    fn actuator_params(&self, name: &str) -> Result<Vec<Param>, SteerError>;
    /// Runs an actuator; called on the program's thread at a synch point.
    fn run_actuator(&self, name: &str, args: &Args) -> Result<Value, SteerError>;
    fn version(&self) -> u64;
}

/// Validates writes against attribute metadata: known, writable, right type, in range.
pub(crate) fn validate_writes(
    object: &str,
    infos: &[AttrInfo],
    writes: &[(String, Value)],
) -> Result<Vec<(String, Value)>, SteerError> {
    writes
        .iter()
        .map(|(name, v)| {
            let info = infos.iter().find(|a| a.name == *name).ok_or_else(|| {
                SteerError::UnknownAttribute {
                    object: object.to_owned(),
                    attribute: name.clone(),
                    known: infos.iter().map(|a| a.name.clone()).collect(),
                }
            })?;
            if info.read_only {
                return Err(SteerError::ReadOnly {
                    path: format!("{object}.{name}"),
                });
            }
            let v = info.ty.convert(v).map_err(|reason| SteerError::WrongType {
                path: format!("{object}.{name}"),
                ty: info.ty,
                reason,
            })?;
            info.check_range(&v)
                .map_err(|reason| SteerError::OutOfRange {
                    path: format!("{object}.{name}"),
                    reason,
                })?;
            Ok((name.clone(), v))
        })
        .collect()
}

struct ObjectCell<T> {
    name: String,
    description: Option<String>,
    infos: Vec<AttrInfo>,
    state: RwLock<T>,
    version: AtomicU64,
    actuators: RwLock<Vec<Arc<Actuator<T>>>>,
}

/// The program's handle to a registered object.
pub struct Steered<T> {
    cell: Arc<ObjectCell<T>>,
}

impl<T> Clone for Steered<T> {
    fn clone(&self) -> Self {
        Steered {
            cell: self.cell.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Steered<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steered")
            .field("name", &self.cell.name)
            .finish()
    }
}

fn read_guard<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // A panic in the program while it held the lock leaves the object as the program left it;
    // steering goes on with that state rather than failing every probe.
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write_guard<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl<T: Steerable> Steered<T> {
    pub(crate) fn new(name: &str, description: Option<String>, value: T) -> Self {
        Steered {
            cell: Arc::new(ObjectCell {
                name: name.to_owned(),
                description,
                infos: T::attributes(),
                state: RwLock::new(value),
                version: AtomicU64::new(0),
                actuators: RwLock::new(Vec::new()),
            }),
        }
    }

    pub(crate) fn entry(&self) -> Arc<dyn ObjectEntry> {
        self.cell.clone()
    }

    /// The name it is registered under.
    pub fn name(&self) -> &str {
        &self.cell.name
    }

    /// Reads the object (probe writes wait until the guard is dropped).
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        read_guard(&self.cell.state)
    }

    /// Changes the object from the program; counted as a change for [`Steered::version`].
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.cell.version.fetch_add(1, Ordering::Release);
        write_guard(&self.cell.state)
    }

    /// Bumped by every probe write and actuator: compare with a remembered value to see
    /// cheaply whether steering changed the object.
    pub fn version(&self) -> u64 {
        self.cell.version.load(Ordering::Acquire)
    }

    /// Adds an actuator; a name already used is refused.
    pub fn add_actuator(&self, actuator: Actuator<T>) -> Result<&Self, SteerError> {
        let mut list = self
            .cell
            .actuators
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if list.iter().any(|a| a.name == actuator.name) {
            return Err(SteerError::AlreadyRegistered {
                name: format!("{}.{}", self.cell.name, actuator.name),
            });
        }
        list.push(Arc::new(actuator));
        Ok(self)
    }

    /// Removes the object from the registry: later probes of it fail with "unknown object".
    pub fn unregister(self) {
        super::unregister(&self.cell.name);
    }
}

impl<T: Steerable> ObjectCell<T> {
    fn write_with_timeout(&self) -> Result<RwLockWriteGuard<'_, T>, SteerError> {
        let deadline = Instant::now() + DEFAULT_PROBE_LOCK_TIMEOUT;
        loop {
            match self.state.try_write() {
                Ok(g) => return Ok(g),
                Err(std::sync::TryLockError::Poisoned(e)) => return Ok(e.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(50))
                }
                Err(_) => {
                    return Err(SteerError::Busy {
                        object: self.name.clone(),
                    });
                }
            }
        }
    }
}

impl<T: Steerable> ObjectEntry for ObjectCell<T> {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ObjectKind {
        ObjectKind::Object
    }

    fn description(&self) -> Option<String> {
        self.description.clone()
    }

    fn attributes(&self) -> Vec<AttrInfo> {
        self.infos.clone()
    }

    fn get(&self, attrs: &[&str]) -> Result<Vec<(String, Value)>, SteerError> {
        let names: Vec<&str> = if attrs.is_empty() {
            self.infos.iter().map(|a| a.name.as_str()).collect()
        } else {
            attrs.to_vec()
        };
        let state = read_guard(&self.state);
        names
            .into_iter()
            .map(|n| {
                state.get_attr(n).map(|v| (n.to_owned(), v)).ok_or_else(|| {
                    SteerError::UnknownAttribute {
                        object: self.name.clone(),
                        attribute: n.to_owned(),
                        known: self.infos.iter().map(|a| a.name.clone()).collect(),
                    }
                })
            })
            .collect()
    }

    fn set(&self, writes: &[(String, Value)]) -> Result<Vec<(String, Value, Value)>, SteerError> {
        let writes = validate_writes(&self.name, &self.infos, writes)?;
        let mut state = self.write_with_timeout()?;
        let mut done: Vec<(String, Value, Value)> = Vec::with_capacity(writes.len());
        for (name, v) in writes {
            let old = state.get_attr(&name).unwrap_or(Value::Bool(false));
            if let Err(reason) = state.set_attr(&name, &v) {
                // All or nothing: put back what this request already changed.
                for (n, old, _) in done.iter().rev() {
                    let _ = state.set_attr(n, old);
                }
                return Err(SteerError::Invalid {
                    path: format!("{}.{name}", self.name),
                    reason,
                });
            }
            done.push((name, old, v));
        }
        self.version.fetch_add(1, Ordering::Release);
        Ok(done)
    }

    fn actuators(&self) -> Vec<OperationInfo> {
        self.actuators
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|a| OperationInfo {
                name: a.name.clone(),
                params: a.params.clone(),
                description: a.description.clone(),
            })
            .collect()
    }

    fn actuator_params(&self, name: &str) -> Result<Vec<Param>, SteerError> {
        self.find_actuator(name).map(|a| a.params.clone())
    }

    fn run_actuator(&self, name: &str, args: &Args) -> Result<Value, SteerError> {
        let a = self.find_actuator(name)?;
        let path = format!("{}.{name}", self.name);
        let mut state = write_guard(&self.state);
        if let Some(pre) = &a.pre {
            pre(&state, args).map_err(|reason| SteerError::PreconditionFailed {
                path: path.clone(),
                reason,
            })?;
        }
        let result = (a.run)(&mut state, args).map_err(|reason| SteerError::ActuatorFailed {
            path: path.clone(),
            reason,
        })?;
        self.version.fetch_add(1, Ordering::Release);
        if let Some(post) = &a.post {
            post(&state).map_err(|reason| SteerError::PostconditionFailed { path, reason })?;
        }
        Ok(result)
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

impl<T: Steerable> ObjectCell<T> {
    fn find_actuator(&self, name: &str) -> Result<Arc<Actuator<T>>, SteerError> {
        let list = self.actuators.read().unwrap_or_else(|e| e.into_inner());
        list.iter()
            .find(|a| a.name == name)
            .cloned()
            .ok_or_else(|| SteerError::UnknownOperation {
                path: format!("{}.{name}", self.name),
                known: list.iter().map(|a| a.name.clone()).collect(),
            })
    }
}

/// Logs a completed write (used by the probe API).
pub(crate) fn log_writes(who: &Who, object: &str, done: &[(String, Value, Value)]) {
    for (attr, old, new) in done {
        log::record(
            who,
            log::Action::Set {
                path: format!("{object}.{attr}"),
                old: old.clone(),
                new: new.clone(),
            },
            Ok(()),
        );
    }
}
