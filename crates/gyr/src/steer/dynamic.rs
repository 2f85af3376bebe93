//! `DynamicObject`: a steering object whose attributes and actuators are declared at run time,
//! for programs without Rust types to derive from (C, C++ and Fortran through `gyr-ffi`).
//!
//! # Bound variables
//!
//! A C program's attributes are its own variables, which only its threads may touch. So the
//! object keeps a copy of each value, and the two are exchanged where the program says it is
//! safe, at its synch points ([`DynamicObject::exchange`]): a value a probe wrote since the last
//! exchange goes to the program, and otherwise the program's current value comes back, which is
//! what probes then read. A probe write is checked against type and range like any other, and
//! several attributes written in one request reach the program at the same synch point.

use super::object::{Args, ObjectEntry, ObjectKind, OperationInfo, Param, validate_writes};
use super::value::AttrInfo;
use super::{SteerError, register_entry};
use gyr_core::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

type Run = Box<dyn Fn(&Args) -> Result<Value, String> + Send + Sync>;

struct Slot {
    info: AttrInfo,
    value: Value,
    /// Written by a probe since the last exchange.
    steered: bool,
}

struct DynActuator {
    info: OperationInfo,
    run: Run,
}

#[derive(Default)]
struct Inner {
    slots: Vec<Slot>,
    actuators: Vec<Arc<DynActuator>>,
}

struct DynCell {
    name: String,
    description: Option<String>,
    inner: RwLock<Inner>,
    version: AtomicU64,
}

/// A steering object declared at run time. Clones share the object.
#[derive(Clone)]
pub struct DynamicObject {
    cell: Arc<DynCell>,
}

impl std::fmt::Debug for DynamicObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicObject")
            .field("name", &self.cell.name)
            .finish()
    }
}

impl DynCell {
    fn inner(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn inner_mut(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl DynamicObject {
    /// Registers an object called `name` with no attributes yet; a name in use is refused.
    pub fn register(name: &str, description: Option<&str>) -> Result<Self, SteerError> {
        let cell = Arc::new(DynCell {
            name: name.to_owned(),
            description: description.map(str::to_owned),
            inner: RwLock::new(Inner::default()),
            version: AtomicU64::new(0),
        });
        register_entry(name, cell.clone())?;
        Ok(DynamicObject { cell })
    }

    /// The name it is registered under.
    pub fn name(&self) -> &str {
        &self.cell.name
    }

    /// Adds an attribute with its current value; returns its index for [`Self::exchange`].
    /// A name already used, or a value of another type, is refused.
    pub fn add_attribute(&self, info: AttrInfo, value: Value) -> Result<usize, SteerError> {
        if !super::valid_name(&info.name) || info.name.contains('.') {
            return Err(SteerError::BadName(info.name));
        }
        let value = info
            .ty
            .convert(&value)
            .map_err(|reason| SteerError::WrongType {
                path: format!("{}.{}", self.cell.name, info.name),
                ty: info.ty,
                reason,
            })?;
        let mut inner = self.cell.inner_mut();
        if inner.slots.iter().any(|s| s.info.name == info.name) {
            return Err(SteerError::AlreadyRegistered {
                name: format!("{}.{}", self.cell.name, info.name),
            });
        }
        inner.slots.push(Slot {
            info,
            value,
            steered: false,
        });
        Ok(inner.slots.len() - 1)
    }

    /// Adds an actuator, run on the program's thread at its next synch point with arguments
    /// checked against `params`.
    pub fn add_actuator(
        &self,
        name: &str,
        params: Vec<Param>,
        description: Option<&str>,
        run: impl Fn(&Args) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Result<(), SteerError> {
        if !super::valid_name(name) || name.contains('.') {
            return Err(SteerError::BadName(name.to_owned()));
        }
        let mut inner = self.cell.inner_mut();
        if inner.actuators.iter().any(|a| a.info.name == name) {
            return Err(SteerError::AlreadyRegistered {
                name: format!("{}.{name}", self.cell.name),
            });
        }
        inner.actuators.push(Arc::new(DynActuator {
            info: OperationInfo {
                name: name.to_owned(),
                params,
                description: description.map(str::to_owned),
            },
            run: Box::new(run),
        }));
        Ok(())
    }

    /// Exchanges values with the program's variables, at a synch point: for each attribute,
    /// `bind(index, steered)` gets the value a probe wrote since the last exchange (`Some`, to
    /// store into the program's variable) and returns the program's current value, kept as
    /// what probes read.
    pub fn exchange(&self, mut bind: impl FnMut(usize, Option<&Value>) -> Value) {
        let mut inner = self.cell.inner_mut();
        for (i, slot) in inner.slots.iter_mut().enumerate() {
            let steered = std::mem::take(&mut slot.steered);
            let now = bind(i, steered.then_some(&slot.value));
            if let Ok(v) = slot.info.ty.convert(&now) {
                slot.value = v;
            }
        }
    }

    /// Bumped by every probe write and actuator.
    pub fn version(&self) -> u64 {
        self.cell.version.load(Ordering::Acquire)
    }

    /// Removes it from the registry: later probes of it fail with "unknown object".
    pub fn unregister(self) {
        super::unregister(&self.cell.name);
    }
}

impl ObjectEntry for DynCell {
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
        self.inner().slots.iter().map(|s| s.info.clone()).collect()
    }

    fn get(&self, attrs: &[&str]) -> Result<Vec<(String, Value)>, SteerError> {
        let inner = self.inner();
        let find = |n: &str| {
            inner
                .slots
                .iter()
                .find(|s| s.info.name == n)
                .map(|s| (n.to_owned(), s.value.clone()))
                .ok_or_else(|| SteerError::UnknownAttribute {
                    object: self.name.clone(),
                    attribute: n.to_owned(),
                    known: inner.slots.iter().map(|s| s.info.name.clone()).collect(),
                })
        };
        if attrs.is_empty() {
            Ok(inner
                .slots
                .iter()
                .map(|s| (s.info.name.clone(), s.value.clone()))
                .collect())
        } else {
            attrs.iter().map(|n| find(n)).collect()
        }
    }

    fn set(&self, writes: &[(String, Value)]) -> Result<Vec<(String, Value, Value)>, SteerError> {
        let mut inner = self.inner_mut();
        let infos: Vec<AttrInfo> = inner.slots.iter().map(|s| s.info.clone()).collect();
        let writes = validate_writes(&self.name, &infos, writes)?;
        let mut done = Vec::with_capacity(writes.len());
        for (name, v) in writes {
            if let Some(slot) = inner.slots.iter_mut().find(|s| s.info.name == name) {
                let old = std::mem::replace(&mut slot.value, v.clone());
                slot.steered = true;
                done.push((name, old, v));
            }
        }
        self.version.fetch_add(1, Ordering::Release);
        Ok(done)
    }

    fn actuators(&self) -> Vec<OperationInfo> {
        self.inner()
            .actuators
            .iter()
            .map(|a| a.info.clone())
            .collect()
    }

    fn actuator_params(&self, name: &str) -> Result<Vec<Param>, SteerError> {
        self.find_actuator(name).map(|a| a.info.params.clone())
    }

    fn run_actuator(&self, name: &str, args: &Args) -> Result<Value, SteerError> {
        let a = self.find_actuator(name)?;
        // Run without the object's lock: the actuator may read the program's state, and a
        // probe must not wait for it.
        let result = (a.run)(args).map_err(|reason| SteerError::ActuatorFailed {
            path: format!("{}.{name}", self.name),
            reason,
        })?;
        self.version.fetch_add(1, Ordering::Release);
        Ok(result)
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

impl DynCell {
    fn find_actuator(&self, name: &str) -> Result<Arc<DynActuator>, SteerError> {
        let inner = self.inner();
        inner
            .actuators
            .iter()
            .find(|a| a.info.name == name)
            .cloned()
            .ok_or_else(|| SteerError::UnknownOperation {
                path: format!("{}.{name}", self.name),
                known: inner
                    .actuators
                    .iter()
                    .map(|a| a.info.name.clone())
                    .collect(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steer::{self, AttrType, Who};

    #[test]
    fn probes_reach_the_program_at_exchange_and_values_come_back() {
        let obj = DynamicObject::register("dyn_test_obj", Some("test")).unwrap();
        let mut info = AttrInfo::new("dt", AttrType::Float);
        info.min = Some(0.0);
        info.max = Some(1.0);
        let dt = obj.add_attribute(info, Value::Float(0.1)).unwrap();
        let mut ro = AttrInfo::new("step", AttrType::Int);
        ro.read_only = true;
        obj.add_attribute(ro, Value::Int(0)).unwrap();
        assert!(
            obj.add_attribute(AttrInfo::new("dt", AttrType::Int), Value::Int(1))
                .is_err()
        );
        let who = Who::new("test");
        assert!(steer::set("dyn_test_obj.dt", Value::Float(2.0), &who).is_err());
        assert!(steer::set("dyn_test_obj.step", Value::Int(3), &who).is_err());
        steer::set("dyn_test_obj.dt", Value::Float(0.5), &who).unwrap();
        // The program's variables: dt steered, step moved by the program.
        let mut vars = [0.1f64, 7.0];
        obj.exchange(|i, steered| {
            if let Some(v) = steered {
                vars[i] = v.as_f64().unwrap();
            }
            if i == dt {
                Value::Float(vars[i])
            } else {
                Value::Int(vars[i] as i64)
            }
        });
        assert_eq!(vars[0], 0.5);
        assert_eq!(steer::get("dyn_test_obj.step").unwrap(), Value::Int(7));
        // Nothing steered since: the program's value wins.
        vars[0] = 0.25;
        obj.exchange(|i, steered| {
            assert!(steered.is_none());
            Value::Float(vars[i])
        });
        assert_eq!(steer::get("dyn_test_obj.dt").unwrap(), Value::Float(0.25));

        obj.add_actuator(
            "double",
            vec![Param {
                name: "by".into(),
                ty: AttrType::Float,
            }],
            None,
            |args| Ok(Value::Float(args.get::<f64>(0)? * 2.0)),
        )
        .unwrap();
        let pending = steer::actuate("dyn_test_obj.double", &[Value::Float(3.0)], &who).unwrap();
        steer::sync_point("dyn_test");
        assert_eq!(
            pending.wait(std::time::Duration::from_secs(5)).unwrap(),
            Value::Float(6.0)
        );
        obj.unregister();
        assert!(steer::get("dyn_test_obj.dt").is_err());
    }
}
