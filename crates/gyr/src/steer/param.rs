//! `Param<T>`: one tunable value in an atomic cell, the light form of a steering object.
//!
//! The program reads it with one relaxed load (`dt.get()`), so it can sit in the innermost
//! loop; a probe write is checked against the parameter's type and range and stored atomically.

use super::object::{
    Args, ObjectEntry, ObjectKind, OperationInfo, Param as ParamDecl, validate_writes,
};
use super::value::{AttrInfo, AttrValue};
use super::{SteerError, register_entry};
use crate::sample::CellValue;
use gyr_core::Value;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The attribute name a parameter's value has (`gyr get PID dt` means `dt.value`).
pub const PARAM_ATTRIBUTE: &str = "value";

struct ParamCell {
    name: String,
    info: AttrInfo,
    bits: AtomicU64,
    version: AtomicU64,
    to_value: fn(u64) -> Value,
    from_value: fn(&Value) -> Result<u64, String>,
}

/// A steerable value. Clones share the cell.
pub struct Param<T> {
    cell: Arc<ParamCell>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Param<T> {
    fn clone(&self) -> Self {
        Param {
            cell: self.cell.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Param<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Param")
            .field("name", &self.cell.name)
            .finish()
    }
}

impl<T: CellValue + AttrValue> Param<T> {
    /// The current value (one relaxed atomic load).
    #[inline]
    pub fn get(&self) -> T {
        T::from_bits(self.cell.bits.load(Ordering::Relaxed))
    }

    /// Sets the value from the program (not checked against the range: the program is trusted).
    pub fn set(&self, v: T) {
        self.cell.bits.store(v.to_bits(), Ordering::Relaxed);
        self.cell.version.fetch_add(1, Ordering::Release);
    }

    /// Bumped by every change.
    pub fn version(&self) -> u64 {
        self.cell.version.load(Ordering::Acquire)
    }

    /// The name it is registered under.
    pub fn name(&self) -> &str {
        &self.cell.name
    }

    /// Removes it from the registry: later probes of it fail with "unknown object".
    pub fn unregister(self) {
        super::unregister(&self.cell.name);
    }
}

/// Describes a parameter before it is registered: see [`super::param`].
#[derive(Debug)]
#[must_use = "a parameter is registered only by `.register()`"]
pub struct ParamBuilder<T> {
    name: String,
    initial: T,
    info: AttrInfo,
}

impl<T: CellValue + AttrValue> ParamBuilder<T> {
    pub(crate) fn new(name: &str, initial: T) -> Self {
        ParamBuilder {
            name: name.to_owned(),
            initial,
            info: AttrInfo::new(PARAM_ATTRIBUTE, <T as AttrValue>::TYPE),
        }
    }

    /// Its unit, shown to clients.
    pub fn unit(mut self, unit: &str) -> Self {
        self.info.unit = Some(unit.to_owned());
        self
    }

    /// The values probes may set, inclusive.
    pub fn range(mut self, min: f64, max: f64) -> Self {
        self.info.min = Some(min);
        self.info.max = Some(max);
        self
    }

    /// What it means.
    pub fn description(mut self, d: &str) -> Self {
        self.info.description = Some(d.to_owned());
        self
    }

    /// Probes may read it but not write it.
    pub fn read_only(mut self) -> Self {
        self.info.read_only = true;
        self
    }

    /// Registers the parameter; a name already in use is refused.
    pub fn register(self) -> Result<Param<T>, SteerError> {
        let cell = Arc::new(ParamCell {
            name: self.name.clone(),
            info: self.info,
            bits: AtomicU64::new(self.initial.to_bits()),
            version: AtomicU64::new(0),
            to_value: |bits| T::from_bits(bits).to_value(),
            from_value: |v| T::from_value(v).map(T::to_bits),
        });
        register_entry(&self.name, cell.clone())?;
        Ok(Param {
            cell,
            _t: PhantomData,
        })
    }
}

impl ObjectEntry for ParamCell {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> ObjectKind {
        ObjectKind::Param
    }

    fn description(&self) -> Option<String> {
        self.info.description.clone()
    }

    fn attributes(&self) -> Vec<AttrInfo> {
        vec![self.info.clone()]
    }

    fn get(&self, attrs: &[&str]) -> Result<Vec<(String, Value)>, SteerError> {
        if let Some(bad) = attrs.iter().find(|a| **a != PARAM_ATTRIBUTE) {
            return Err(SteerError::UnknownAttribute {
                object: self.name.clone(),
                attribute: (*bad).to_owned(),
                known: vec![PARAM_ATTRIBUTE.to_owned()],
            });
        }
        Ok(vec![(
            PARAM_ATTRIBUTE.to_owned(),
            (self.to_value)(self.bits.load(Ordering::Relaxed)),
        )])
    }

    fn set(&self, writes: &[(String, Value)]) -> Result<Vec<(String, Value, Value)>, SteerError> {
        let writes = validate_writes(&self.name, std::slice::from_ref(&self.info), writes)?;
        let Some((_, v)) = writes.last() else {
            return Ok(Vec::new());
        };
        let bits = (self.from_value)(v).map_err(|reason| SteerError::Invalid {
            path: format!("{}.{PARAM_ATTRIBUTE}", self.name),
            reason,
        })?;
        let old = (self.to_value)(self.bits.swap(bits, Ordering::Relaxed));
        self.version.fetch_add(1, Ordering::Release);
        Ok(vec![(PARAM_ATTRIBUTE.to_owned(), old, v.clone())])
    }

    fn actuators(&self) -> Vec<OperationInfo> {
        Vec::new()
    }

    fn actuator_params(&self, name: &str) -> Result<Vec<ParamDecl>, SteerError> {
        Err(SteerError::UnknownOperation {
            path: format!("{}.{name}", self.name),
            known: Vec::new(),
        })
    }

    fn run_actuator(&self, name: &str, _args: &Args) -> Result<Value, SteerError> {
        Err(SteerError::UnknownOperation {
            path: format!("{}.{name}", self.name),
            known: Vec::new(),
        })
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}
