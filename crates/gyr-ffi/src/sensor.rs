//! Sensors for C, C++ and Fortran: event types from a spec file, typed emits, sensor control,
//! sampling and aggregating sensors.
//!
//! # The emit path
//!
//! A program registers its spec (`gyr_spec_load` from a file, or `gyr_spec_register` from the
//! text that `gyr gen` embeds in the generated code), finds each event type's handle once
//! (`gyr_sensor_find`), and emits with `gyr_emit(handle, payload, len)`, the payload already in
//! gyr's layout (`gyr_core::value`: fields packed little-endian in schema order). The generated
//! functions are static inline wrappers that pack their typed arguments on the stack and call
//! it. `gyr_emit` checks the switch first (one relaxed load), then the payload's length (a type
//! of fixed size) or its fields (strings and bytes), and copies it into the thread's ring as a
//! Rust sensor would: no allocation, lock or system call.

use crate::{
    Error, GYR_E_EXISTS, GYR_E_INVALID, GYR_E_NOT_FOUND, GYR_E_NULL, handle, status, text,
};
use gyr::DynamicSensor;
use gyr::control::{self, Target};
use gyr_core::spec::{SensorKind, Spec};
use gyr_core::{Field, FieldType};
use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::Mutex;

/// An event type's handle for `gyr_emit`, valid for the whole process.
#[derive(Debug)]
pub struct GyrSensor {
    sensor: DynamicSensor,
}

/// The handles made so far, by event type: finding a type twice gives the same handle, so that
/// handles are never freed and never leak more than one per type.
static SENSORS: Mutex<Option<HashMap<String, &'static GyrSensor>>> = Mutex::new(None);

fn register(spec: &Spec) -> Result<(), Error> {
    let mut map = SENSORS.lock().unwrap_or_else(|e| e.into_inner());
    let map = map.get_or_insert_with(HashMap::new);
    for s in &spec.sensors {
        let fields: Vec<Field> = s.fields.iter().map(|f| Field::new(&f.name, f.ty)).collect();
        if s.kind == SensorKind::Sampling {
            // A sampled value is read from a cell (`gyr_sample_*`), not emitted.
            continue;
        }
        let sensor = DynamicSensor::register(&s.name, fields)
            .map_err(|e| Error::new(GYR_E_EXISTS, e.to_string()))?;
        map.entry(s.name.clone())
            .or_insert_with(|| Box::leak(Box::new(GyrSensor { sensor })));
    }
    Ok(())
}

/// Registers every event type of the spec file at `path` (TOML; `gyr spec FILE` checks one).
///
/// # Safety
///
/// `path` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_spec_load(path: *const c_char) -> i32 {
    status("gyr_spec_load", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let path = unsafe { text(path, "path") }?;
        let spec = Spec::load(path).map_err(|e| Error::new(GYR_E_INVALID, e.to_string()))?;
        register(&spec)
    })
}

/// Registers every event type of a spec given as TOML text (what generated code embeds).
///
/// # Safety
///
/// `toml` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_spec_register(toml: *const c_char) -> i32 {
    status("gyr_spec_register", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let toml = unsafe { text(toml, "toml") }?;
        let spec = Spec::parse(toml).map_err(|e| Error::new(GYR_E_INVALID, e.to_string()))?;
        register(&spec)
    })
}

/// The handle of the event type `name`, registered by a spec before; null (and a message) if
/// there is none. Handles live as long as the process.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sensor_find(name: *const c_char) -> *mut GyrSensor {
    handle("gyr_sensor_find", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        let map = SENSORS.lock().unwrap_or_else(|e| e.into_inner());
        let found = map.as_ref().and_then(|m| m.get(name).copied());
        let s = found.ok_or_else(|| {
            let mut known: Vec<&str> = map
                .as_ref()
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default();
            known.sort_unstable();
            Error::new(
                GYR_E_NOT_FOUND,
                format!(
                    "no event type `{name}` was registered: load its spec first \
                     (gyr_spec_load); registered: {}",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        })?;
        Ok(s as *const GyrSensor as *mut GyrSensor)
    })
}

/// Records one event of `sensor`'s type, its payload `len` bytes at `payload` in gyr's layout
/// (fields packed little-endian in schema order; a string or bytes field as a `u32` length and
/// its bytes). A switched-off sensor returns at once. A payload that does not fit the type is
/// refused with `GYR_E_INVALID`.
///
/// # Safety
///
/// `sensor` is null or a handle from `gyr_sensor_find`; `payload` is null or points to `len`
/// readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_emit(sensor: *const GyrSensor, payload: *const u8, len: usize) -> i32 {
    // SAFETY: null or a handle from gyr_sensor_find, which lives for the whole process.
    let Some(s) = (unsafe { sensor.as_ref() }) else {
        return status("gyr_emit", || {
            Err(Error::new(
                GYR_E_NULL,
                "`sensor` is a null pointer: pass a handle from gyr_sensor_find",
            ))
        });
    };
    if !s.sensor.is_on() {
        return crate::GYR_OK;
    }
    if payload.is_null() && len > 0 {
        return status("gyr_emit", || {
            Err(Error::new(
                GYR_E_NULL,
                "`payload` is a null pointer but `len` is not 0",
            ))
        });
    }
    let bytes: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: non-null, and the caller promises `len` readable bytes.
        unsafe { std::slice::from_raw_parts(payload, len) }
    };
    match s.sensor.emit_payload(bytes) {
        Ok(()) => crate::GYR_OK,
        Err(e) => status("gyr_emit", || Err(Error::new(GYR_E_INVALID, e.to_string()))),
    }
}

/// Whether `sensor` records now (one relaxed load): skip computing a costly payload when not.
///
/// # Safety
///
/// `sensor` is null or a handle from `gyr_sensor_find`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sensor_on(sensor: *const GyrSensor) -> bool {
    // SAFETY: null or a handle from gyr_sensor_find, which lives for the whole process.
    unsafe { sensor.as_ref() }.is_some_and(|s| s.sensor.is_on())
}

/// Switches the event type `name` on or off (as `gyr sensors PID on|off NAME` does); `name`
/// `*` means every sensor. A type not registered yet is switched when it is.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sensor_enable(name: *const c_char, on: bool) -> i32 {
    status("gyr_sensor_enable", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        let target = if name == "*" {
            Target::Global
        } else {
            Target::Type(name.to_owned())
        };
        control::set_enabled(&target, on);
        Ok(())
    })
}

/// A sampling sensor's cell: the program stores values, a local monitor records the latest at
/// the sensor's interval.
#[derive(Debug)]
pub enum GyrSample {
    /// A `double` cell.
    F64(gyr::SampleCell<f64>),
    /// An `int64_t` cell.
    I64(gyr::SampleCell<i64>),
}

fn sample(
    name: *const c_char,
    make: impl FnOnce(&str) -> Result<GyrSample, gyr::RegisterError>,
) -> *mut GyrSample {
    handle("gyr_sample", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        let cell = make(name).map_err(|e| Error::new(GYR_E_EXISTS, e.to_string()))?;
        Ok(Box::into_raw(Box::new(cell)))
    })
}

/// Registers the sampling sensor `name` over a `double` cell holding `initial`; null on error.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sample_double(name: *const c_char, initial: f64) -> *mut GyrSample {
    sample(name, |n| gyr::sample_cell(n, initial).map(GyrSample::F64))
}

/// Registers the sampling sensor `name` over an `int64_t` cell holding `initial`; null on error.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sample_int64(name: *const c_char, initial: i64) -> *mut GyrSample {
    sample(name, |n| gyr::sample_cell(n, initial).map(GyrSample::I64))
}

/// Stores `v` in a sampling sensor's cell (one relaxed store; an `int64_t` cell takes it
/// truncated).
///
/// # Safety
///
/// `cell` is null or a handle from `gyr_sample_*`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_sample_set(cell: *const GyrSample, v: f64) {
    // SAFETY: null or a live handle from gyr_sample_*, which are never freed.
    match unsafe { cell.as_ref() } {
        Some(GyrSample::F64(c)) => c.set(v),
        Some(GyrSample::I64(c)) => c.set(v as i64),
        None => {}
    }
}

/// An aggregating extended sensor: every `every` observations become one event
/// `{count, sum, min, max, mean}`. Use one per thread.
#[derive(Debug)]
pub struct GyrAggregate {
    inner: gyr::extended::Aggregate,
}

/// Registers the aggregating sensor `name`, one event per `every` observations; null on error.
///
/// # Safety
///
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_aggregate_new(name: *const c_char, every: u64) -> *mut GyrAggregate {
    handle("gyr_aggregate_new", || {
        // SAFETY: the caller passes null or a NUL-terminated string.
        let name = unsafe { text(name, "name") }?;
        let inner = gyr::extended::Aggregate::new(name, every)
            .map_err(|e| Error::new(GYR_E_EXISTS, e.to_string()))?;
        Ok(Box::into_raw(Box::new(GyrAggregate { inner })))
    })
}

/// Adds one observation; emits when `every` have been seen.
///
/// # Safety
///
/// `agg` is null or a handle from `gyr_aggregate_new` not freed, used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_aggregate_observe(agg: *mut GyrAggregate, v: f64) {
    // SAFETY: null or a live handle the caller uses from one thread at a time.
    if let Some(a) = unsafe { agg.as_mut() } {
        a.inner.observe(v);
    }
}

/// Emits what was aggregated so far and frees the handle.
///
/// # Safety
///
/// `agg` is null or a handle from `gyr_aggregate_new`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gyr_aggregate_free(agg: *mut GyrAggregate) {
    if agg.is_null() {
        return;
    }
    // SAFETY: a handle from Box::into_raw in gyr_aggregate_new, given back once.
    let mut a = unsafe { Box::from_raw(agg) };
    a.inner.flush();
}

/// The C type of a field (an array's element) in generated code, and its size in the payload.
pub(crate) fn c_scalar(ty: FieldType) -> Option<(&'static str, usize)> {
    use gyr_core::schema::ScalarType as S;
    let s = match ty {
        FieldType::Array(s, _) => s,
        _ => ty.scalar()?,
    };
    Some(match s {
        S::I8 => ("int8_t", 1),
        S::I16 => ("int16_t", 2),
        S::I32 => ("int32_t", 4),
        S::I64 => ("int64_t", 8),
        S::U8 => ("uint8_t", 1),
        S::U16 => ("uint16_t", 2),
        S::U32 => ("uint32_t", 4),
        S::U64 => ("uint64_t", 8),
        S::F32 => ("float", 4),
        S::F64 => ("double", 8),
        S::Bool => ("bool", 1),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: gyr_last_error returns a NUL-terminated string.
        unsafe { CStr::from_ptr(crate::gyr_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn spec_sensors_emit_checked_payloads() {
        let _one = crate::RUNTIME_TEST
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mem = gyr::MemorySink::new();
        let rt = gyr::Builder::new()
            .sink(mem.clone())
            .serve(false)
            .start()
            .unwrap();
        let spec = c"[[sensor]]\nname = \"ffi_step\"\nfields = [{ name = \"n\", type = \"u32\" }, { name = \"r\", type = \"f64\" }]\n\n[[sensor]]\nname = \"ffi_note\"\nfields = [{ name = \"text\", type = \"string\" }]\n";
        // SAFETY: NUL-terminated strings, payloads of the lengths given, handles from find.
        unsafe {
            assert_eq!(gyr_spec_register(spec.as_ptr()), crate::GYR_OK);
            let step = gyr_sensor_find(c"ffi_step".as_ptr());
            assert!(!step.is_null());
            assert_eq!(step, gyr_sensor_find(c"ffi_step".as_ptr()));
            let mut p = [0u8; 12];
            p[..4].copy_from_slice(&7u32.to_le_bytes());
            p[4..].copy_from_slice(&0.5f64.to_le_bytes());
            assert_eq!(gyr_emit(step, p.as_ptr(), 12), crate::GYR_OK);
            assert_eq!(gyr_emit(step, p.as_ptr(), 11), GYR_E_INVALID);
            assert!(last().contains("too short"), "{}", last());
            assert_eq!(gyr_emit(step, std::ptr::null(), 12), GYR_E_NULL);
            assert_eq!(gyr_emit(std::ptr::null(), p.as_ptr(), 12), GYR_E_NULL);

            let note = gyr_sensor_find(c"ffi_note".as_ptr());
            let mut q = 2u32.to_le_bytes().to_vec();
            q.extend_from_slice(b"hi");
            assert_eq!(gyr_emit(note, q.as_ptr(), q.len()), crate::GYR_OK);
            q[4] = 0xff;
            assert_eq!(gyr_emit(note, q.as_ptr(), q.len()), GYR_E_INVALID);
            assert!(last().contains("UTF-8"), "{}", last());

            assert_eq!(
                gyr_sensor_enable(c"ffi_step".as_ptr(), false),
                crate::GYR_OK
            );
            assert!(!gyr_sensor_on(step));
            assert_eq!(gyr_emit(step, p.as_ptr(), 12), crate::GYR_OK);
            gyr_sensor_enable(c"ffi_step".as_ptr(), true);

            assert!(gyr_sensor_find(c"nope".as_ptr()).is_null());
            assert!(last().contains("no event type `nope`"), "{}", last());
            // The same name with other fields conflicts.
            let other =
                c"[[sensor]]\nname = \"ffi_step\"\nfields = [{ name = \"n\", type = \"u64\" }]\n";
            assert_eq!(gyr_spec_register(other.as_ptr()), GYR_E_EXISTS);
            assert_eq!(gyr_spec_register(c"[[sensor".as_ptr()), GYR_E_INVALID);
            assert!(last().starts_with("gyr_spec_register: 1:"), "{}", last());
        }
        rt.shutdown();
        let steps = mem.events("ffi_step");
        assert_eq!(steps.len(), 1, "only the event emitted while on");
        assert_eq!(
            steps[0].1,
            vec![gyr_core::Value::UInt(7), gyr_core::Value::Float(0.5)]
        );
        let notes = mem.events("ffi_note");
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].1, vec![gyr_core::Value::Str("hi".into())]);
    }
}
