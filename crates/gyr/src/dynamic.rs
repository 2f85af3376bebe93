//! Sensors whose event types are defined at run time: from a spec file
//! ([`gyr_core::spec`]) or by code that builds a schema.
//!
//! They emit [`Value`]s checked against their schema: slower than a derived sensor (the values
//! are checked and encoded field by field) but usable without Rust types, which is what C and
//! Fortran bindings and generic tools need.

use crate::clock::Stamp;
use crate::producer;
use crate::registry::{self, RegisterError, STATE_OFF, STATE_ON, SensorType};
use crate::sensor::emit_limited;
use gyr_core::spec::{Spec, SpecError};
use gyr_core::value::{PayloadError, check, encode_into, encoded_len};
use gyr_core::{Field, Schema, Value};
use std::path::Path;
use std::sync::atomic::Ordering;

/// A sensor of a run-time-defined event type.
#[derive(Debug, Clone)]
pub struct DynamicSensor {
    ty: &'static SensorType,
    schema: Schema,
    fixed: Option<usize>,
}

/// Why a spec file's sensors could not be registered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadSpecError {
    /// The spec file is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A sensor conflicts with one already registered.
    #[error(transparent)]
    Register(#[from] RegisterError),
}

impl DynamicSensor {
    /// Registers (or finds) the event type `name` with `fields`.
    pub fn register(name: &str, fields: Vec<Field>) -> Result<Self, RegisterError> {
        let ty = registry::register_dynamic(name, fields.clone(), "dynamic")?;
        let schema = Schema::new(ty.id(), name, fields)?;
        Ok(DynamicSensor {
            ty,
            fixed: schema.fixed_size(),
            schema,
        })
    }

    /// The event type's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Records an event whose payload `encode` writes into the `len` bytes it is given, in the
    /// layout [`gyr_core::value`] specifies for this schema, if the sensor is on: what a bridge
    /// from another instrumentation API uses to skip building [`Value`]s for every event. No
    /// allocation; a payload that does not follow the schema is read back as garbage, so prefer
    /// [`emit`](Self::emit) unless the event rate matters.
    #[inline]
    pub fn emit_encoded(&self, len: usize, encode: impl FnOnce(&mut [u8])) {
        emit_limited(self.ty, &self.ty.limits, len, encode);
    }

    /// [`emit_encoded`](Self::emit_encoded), stamped `at` rather than with a clock reading of
    /// its own, as [`emit_at`](crate::emit_at) stamps a derived sensor's event: for an event
    /// of the same instant as another (a span's fields recorded with its begin). An event of a
    /// type that is rate-limited or watched by a steering rule reads the clock itself.
    #[inline]
    pub fn emit_encoded_at(&self, at: Stamp, len: usize, encode: impl FnOnce(&mut [u8])) {
        if self.ty.state.load(Ordering::Relaxed) == STATE_ON {
            let id = self.ty.id.load(Ordering::Relaxed);
            producer::record_at(id, at.0, len, encode);
        } else {
            emit_limited(self.ty, &self.ty.limits, len, encode);
        }
    }

    /// Records an event with these field values, if the sensor is on. Values that do not fit
    /// the schema are refused with an error saying which field and why.
    pub fn emit(&self, values: &[Value]) -> Result<(), PayloadError> {
        let len = encoded_len(&self.schema, values)?;
        emit_limited(self.ty, &self.ty.limits, len, |out| {
            encode_into(&self.schema, values, out)
        });
        Ok(())
    }
}

impl DynamicSensor {
    /// Whether events of this type are recorded now (one relaxed load): a caller that must
    /// compute a payload can skip it when not.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.ty.state.load(Ordering::Relaxed) != STATE_OFF
    }

    /// Records an event whose payload the caller encoded already, in the layout of
    /// [`gyr_core::value`]: what C, C++ and Fortran sensors call. The switch is checked first;
    /// then the payload's shape (its length alone for a type of fixed size, a walk of its
    /// fields otherwise), and it is copied into the ring as a derived sensor's would be: no
    /// allocation, no lock.
    #[inline]
    pub fn emit_payload(&self, payload: &[u8]) -> Result<(), PayloadError> {
        let state = self.ty.state.load(Ordering::Relaxed);
        if state == STATE_OFF {
            return Ok(());
        }
        match self.fixed {
            Some(n) if n == payload.len() => {}
            _ => check(&self.schema, payload)?,
        }
        if state == STATE_ON {
            let id = self.ty.id.load(Ordering::Relaxed);
            producer::record(id, payload.len(), |out| out.copy_from_slice(payload));
        } else {
            emit_limited(self.ty, &self.ty.limits, payload.len(), |out| {
                out.copy_from_slice(payload)
            });
        }
        Ok(())
    }
}

/// Registers every sensor of the spec file at `path` (at most
/// [`MAX_SPEC_BYTES`](gyr_core::spec::MAX_SPEC_BYTES) long; a longer one is refused).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("sensors.toml");
/// std::fs::write(&path, r#"
/// [[sensor]]
/// name = "work_load"
/// fields = [{ name = "domain", type = "u32" }, { name = "load", type = "f64" }]
/// "#).unwrap();
/// let sensors = gyr::load_spec(&path).unwrap();
/// use gyr_core::Value;
/// sensors[0].emit(&[Value::UInt(3), Value::Float(0.25)]).unwrap();
/// ```
pub fn load_spec(path: impl AsRef<Path>) -> Result<Vec<DynamicSensor>, LoadSpecError> {
    let spec = Spec::load(path)?;
    let mut out = Vec::new();
    for s in &spec.sensors {
        let fields = s.fields.iter().map(|f| Field::new(&f.name, f.ty)).collect();
        out.push(DynamicSensor::register(&s.name, fields)?);
    }
    Ok(out)
}
