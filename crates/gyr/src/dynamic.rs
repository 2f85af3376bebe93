//! Sensors whose event types are defined at run time: from a spec file
//! ([`gyr_core::spec`]) or by code that builds a schema.
//!
//! They emit [`Value`]s checked against their schema: slower than a derived sensor (the values
//! are checked and encoded field by field) but usable without Rust types, which is what C and
//! Fortran bindings and generic tools need.

use crate::registry::{self, RegisterError, SensorType};
use crate::sensor::emit_limited;
use gyr_core::spec::{Spec, SpecError};
use gyr_core::value::{PayloadError, encode_into, encoded_len};
use gyr_core::{Field, Schema, Value};
use std::path::Path;

/// A sensor of a run-time-defined event type.
#[derive(Debug, Clone)]
pub struct DynamicSensor {
    ty: &'static SensorType,
    schema: Schema,
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
        Ok(DynamicSensor {
            ty,
            schema: Schema::new(ty.id(), name, fields)?,
        })
    }

    /// The event type's schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Whether this sensor is switched off (one relaxed load): check it before gathering values
    /// that cost something to compute.
    #[inline]
    pub fn is_off(&self) -> bool {
        self.ty.is_off()
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
