//! Instrumenting a Python program through the `gyr` crate, as gyr-ffi does for C: the runtime,
//! typed sensors (declared in Python or read from a spec file), spans, sampling sensors,
//! steering objects, functions, synch points, rules and messages.
//!
//! # The emit path
//!
//! `Sensor.emit(*fields)` takes the fields positionally, in declared order; the first eight
//! come as parameters of their own, so that Python builds no tuple for the call. It checks the
//! switch first (one relaxed load) and returns at once when the sensor is off. For a type whose
//! fields are all numbers or booleans (a fixed-size payload) the arguments are packed on the
//! stack into gyr's payload layout (`gyr_core::value`) and copied into the thread's ring: no
//! allocation. Strings, bytes and arrays take the general path, through `Value`s.
//!
//! # Threads and the GIL
//!
//! Whatever may wait (starting and ending the runtime, flushing, a synch point where a paused
//! program stalls) runs with the GIL released, so the program's other threads and the
//! callbacks below go on. Actuators run on the thread that reaches a synch point; functions
//! and the callbacks of rules run on gyr's threads (the steering server, the steering thread):
//! each takes the GIL for the call only. A callback that raises is reported (its traceback on
//! standard error, its message to whoever asked) and never ends the thread that called it.
//! Once the interpreter exits, callbacks are refused instead of run.

use crate::GyrError;
use crate::errors::{NotFoundError, invalid, steer_error};
use crate::value::{from_py, to_py};
use gyr::DynamicSensor;
use gyr::control::{self, Target};
use gyr::steer::{self, AttrInfo, AttrType, DynamicObject, Function, ParamInfo, SteerError, Who};
use gyr_core::schema::ScalarType;
use gyr_core::spec::{SensorKind, Spec};
use gyr_core::{Field, FieldType, Value};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyTuple};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Fields `Sensor.emit` takes as parameters of their own; the rest arrive as a tuple.
const DIRECT_FIELDS: usize = 8;

/// Distinct span names a program may use: each is kept for the life of the process (a span's
/// name is static in gyr), so a name built from changing data would grow without end.
pub(crate) const MAX_SPAN_NAMES: usize = 10_000;

/// Set when the interpreter exits: callbacks from gyr's threads are refused from then on.
static EXITING: AtomicBool = AtomicBool::new(false);

/// The runtime `init` started, which `shutdown` ends.
static RUNTIME: Mutex<Option<gyr::Runtime>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Gives gyr the calling thread's `threading` name (`MainThread`, `Thread-2 (worker)`, or the
/// program's own) before the thread's first record, so that the views name Python's threads as
/// Python does; called where a thread may record first. Once named, a thread costs one load
/// from thread-local storage here.
#[inline]
fn name_thread(py: Python<'_>) {
    if !gyr::thread::is_named() {
        name_thread_now(py);
    }
}

#[cold]
#[inline(never)]
fn name_thread_now(py: Python<'_>) {
    let name = py
        .import("threading")
        .and_then(|t| t.call_method0("current_thread"))
        .and_then(|t| t.getattr("name"))
        .and_then(|n| n.extract::<String>());
    // A thread whose name cannot be read now (the interpreter is ending) is named all the
    // same, so that this is asked once per thread.
    gyr::thread::set_name(name.as_deref().unwrap_or("Python thread"));
}

/// Starts gyr's runtime as a Rust program's `gyr::init` does: configured by the `GYR_*`
/// environment variables, and by the arguments given, which take precedence. Calling it
/// again while it runs changes nothing. Returns where the program is served.
#[pyfunction]
#[pyo3(signature = (*, trace=None, serve=None, listen=None, token=None, hub=None, hub_token=None, rules=None))]
#[allow(clippy::too_many_arguments)]
fn init<'py>(
    py: Python<'py>,
    trace: Option<PathBuf>,
    serve: Option<bool>,
    listen: Option<String>,
    token: Option<String>,
    hub: Option<String>,
    hub_token: Option<String>,
    rules: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    name_thread(py);
    let listen = listen
        .map(|a| {
            a.parse::<std::net::SocketAddr>().map_err(|_| {
                invalid(format!(
                    "listen={a:?} is not an address: give one such as \"127.0.0.1:7171\""
                ))
            })
        })
        .transpose()?;
    if let Some(h) = &hub
        && (!h.contains(':') || h.contains('/'))
    {
        return Err(invalid(format!(
            "hub={h:?}: give the hub's gRPC address as host:port, such as \"127.0.0.1:7071\""
        )));
    }
    let started = py.detach(move || -> Result<(), String> {
        let mut rt = lock(&RUNTIME);
        if rt.is_some() {
            return Ok(());
        }
        let mut b = gyr::Builder::new().with_default_env();
        if let Some(t) = trace {
            b = b.trace_file(t);
        }
        if let Some(s) = serve {
            b = b.serve(s);
        }
        if let Some(a) = listen {
            b = b.listen_tcp(a, token, None);
        }
        if let Some(h) = hub {
            b = b.hub(h, hub_token);
        }
        if let Some(r) = rules {
            b = b.rules(r);
        }
        *rt = Some(b.install().map_err(|e| e.to_string())?);
        Ok(())
    });
    started.map_err(|e| GyrError::new_err(format!("the program runs unmonitored: {e}")))?;
    EXITING.store(false, Ordering::SeqCst);
    let out = PyDict::new(py);
    out.set_item("pid", std::process::id())?;
    let rt = lock(&RUNTIME);
    if let Some(rt) = rt.as_ref() {
        out.set_item("socket", rt.socket().map(|p| p.display().to_string()))?;
        if let Some((addr, token)) = rt.tcp() {
            out.set_item("tcp", addr.to_string())?;
            out.set_item("token", token)?;
        }
    }
    Ok(out)
}

/// Ends the runtime: what was recorded reaches the trace file and the sinks, the steering
/// server stops. Returns the runtime's counters.
#[pyfunction]
fn shutdown(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let summary = py.detach(|| {
        let rt = lock(&RUNTIME).take();
        match rt {
            Some(rt) => rt.shutdown(),
            None => gyr::shutdown(),
        }
    });
    let out = PyDict::new(py);
    out.set_item("records", summary.records)?;
    out.set_item("lost", summary.lost)?;
    out.set_item("filtered", summary.filtered)?;
    out.set_item("sink_errors", summary.sink_errors)?;
    out.set_item("threads", summary.threads)?;
    Ok(out)
}

/// At interpreter exit: refuse callbacks from now on, then shut down.
#[pyfunction]
fn _at_exit(py: Python<'_>) -> PyResult<()> {
    EXITING.store(true, Ordering::SeqCst);
    shutdown(py).map(drop)
}

/// Waits (at most 5 s) until every event recorded so far has reached the sinks; false when no
/// runtime runs or it did not drain in time.
#[pyfunction]
fn flush(py: Python<'_>) -> bool {
    py.detach(gyr::flush)
}

/// Whether a runtime runs.
#[pyfunction]
fn running() -> bool {
    lock(&RUNTIME).is_some()
}

/// Parses a field type as spec files write it, naming the field in the error.
fn field_type(field: &str, ty: &str) -> PyResult<FieldType> {
    FieldType::parse(ty).ok_or_else(|| {
        invalid(format!(
            "field `{field}` has type `{ty}`: use i8, i16, i32, i64, u8, u16, u32, u64, f32, \
             f64, bool, string, bytes or an array such as `[f64; 3]`"
        ))
    })
}

/// A sensor of an event type declared by the program: `Sensor("solver.step", [("step",
/// "u64"), ("residual", "f64")])`.
#[pyclass(module = "gyr._gyr", frozen)]
struct Sensor {
    sensor: DynamicSensor,
    /// The fields' types, in order.
    types: Box<[FieldType]>,
    /// The payload's size when the type has at most [`DIRECT_FIELDS`] fields, each a number or
    /// a boolean (so at most 64 bytes, packed on the stack).
    fixed: Option<usize>,
}

impl Sensor {
    fn of(sensor: DynamicSensor) -> Sensor {
        let types: Box<[FieldType]> = sensor.schema().fields.iter().map(|f| f.ty).collect();
        let fixed = sensor
            .schema()
            .fixed_size()
            .filter(|_| types.len() <= DIRECT_FIELDS && types.iter().all(|t| t.scalar().is_some()));
        Sensor {
            sensor,
            types,
            fixed,
        }
    }

    fn name(&self) -> &str {
        &self.sensor.schema().name
    }

    fn field_error(&self, i: usize, e: PyErr, py: Python<'_>) -> PyErr {
        let f = &self.sensor.schema().fields[i];
        invalid(format!(
            "{}: field `{}` ({}) refused its value: {}",
            self.name(),
            f.name,
            f.ty,
            e.value(py)
        ))
    }

    /// Why the fields given do not fit the type: too few or too many, or a None among them
    /// (`more` fields came after the direct ones).
    fn arity_error(&self, direct: &[Option<&Bound<'_, PyAny>>], more: usize) -> PyErr {
        let given = if more > 0 {
            direct.len() + more
        } else {
            direct
                .iter()
                .rposition(Option::is_some)
                .map_or(0, |i| i + 1)
        };
        let fields = &self.sensor.schema().fields;
        if given == fields.len()
            && let Some(i) = direct[..given.min(direct.len())]
                .iter()
                .position(Option::is_none)
        {
            return invalid(format!(
                "{}: field `{}` ({}) is None: every field needs a value",
                self.name(),
                fields[i].name,
                fields[i].ty
            ));
        }
        let names = fields
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        invalid(format!(
            "{} takes {} fields ({names}), {given} given{}",
            self.name(),
            fields.len(),
            if given < fields.len() {
                " (a None counts as no value)"
            } else {
                ""
            }
        ))
    }

    /// The general path: every field as a `Value`, checked and encoded by gyr.
    fn emit_values(&self, py: Python<'_>, items: &[Bound<'_, PyAny>]) -> PyResult<()> {
        let mut values = Vec::with_capacity(self.types.len());
        for (i, (ty, item)) in self.types.iter().zip(items).enumerate() {
            let v = field_value(item, *ty).map_err(|e| self.field_error(i, e, py))?;
            values.push(v);
        }
        self.sensor
            .emit(&values)
            .map_err(|e| invalid(format!("{}: {e}", self.name())))
    }
}

/// Packs one number or boolean into `out` (little-endian); returns its size.
#[inline]
fn put_scalar(out: &mut [u8], s: ScalarType, item: &Bound<'_, PyAny>) -> PyResult<usize> {
    fn int<T: TryFrom<i64> + TryFrom<u64>>(item: &Bound<'_, PyAny>, s: ScalarType) -> PyResult<T> {
        let range = || invalid(format!("{} does not fit {}", item, s.name()));
        match item.extract::<i64>() {
            Ok(i) => T::try_from(i).map_err(|_| range()),
            Err(e) => match item.extract::<u64>() {
                Ok(u) => T::try_from(u).map_err(|_| range()),
                Err(_) => Err(e),
            },
        }
    }
    macro_rules! put {
        ($v:expr) => {{
            let b = $v.to_le_bytes();
            out[..b.len()].copy_from_slice(&b);
            Ok(b.len())
        }};
    }
    match s {
        ScalarType::F64 => put!(item.extract::<f64>()?),
        ScalarType::F32 => put!((item.extract::<f64>()? as f32)),
        ScalarType::U64 => put!(int::<u64>(item, s)?),
        ScalarType::I64 => put!(int::<i64>(item, s)?),
        ScalarType::U32 => put!(int::<u32>(item, s)?),
        ScalarType::I32 => put!(int::<i32>(item, s)?),
        ScalarType::U16 => put!(int::<u16>(item, s)?),
        ScalarType::I16 => put!(int::<i16>(item, s)?),
        ScalarType::U8 => put!(int::<u8>(item, s)?),
        ScalarType::I8 => put!(int::<i8>(item, s)?),
        ScalarType::Bool => {
            if !item.is_instance_of::<PyBool>() {
                return Err(invalid(format!("{item} is not a bool: pass True or False")));
            }
            out[0] = item.extract::<bool>()? as u8;
            Ok(1)
        }
        _ => Err(invalid(format!("type {} is not supported", s.name()))),
    }
}

/// A field's value from its Python object, by the field's type.
fn field_value(item: &Bound<'_, PyAny>, ty: FieldType) -> PyResult<Value> {
    let scalar = |s: ScalarType, item: &Bound<'_, PyAny>| -> PyResult<Value> {
        let mut buf = [0u8; 8];
        put_scalar(&mut buf, s, item)?;
        Ok(match s {
            ScalarType::F32 | ScalarType::F64 => Value::Float(item.extract::<f64>()?),
            ScalarType::Bool => Value::Bool(buf[0] != 0),
            ScalarType::U8 | ScalarType::U16 | ScalarType::U32 | ScalarType::U64 => {
                Value::UInt(item.extract::<u64>()?)
            }
            _ => Value::Int(item.extract::<i64>()?),
        })
    };
    match ty {
        FieldType::Scalar(s) => scalar(s, item),
        FieldType::Str => Ok(Value::Str(item.extract::<String>().map_err(|_| {
            invalid(format!(
                "{} is not a str",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?)),
        FieldType::Bytes => Ok(Value::Bytes(item.extract::<Vec<u8>>().map_err(|_| {
            invalid("pass bytes, a bytearray or a list of ints from 0 to 255")
        })?)),
        FieldType::Array(s, n) => {
            let mut out = Vec::with_capacity(n as usize);
            for x in item.try_iter()? {
                out.push(scalar(s, &x?)?);
            }
            if out.len() != n as usize {
                return Err(invalid(format!(
                    "{} elements given, the array holds {n}",
                    out.len()
                )));
            }
            Ok(Value::Array(out))
        }
        _ => Err(invalid(format!("type {ty} is not supported"))),
    }
}

#[pymethods]
impl Sensor {
    /// Registers (or finds) the event type `name` with `fields`, a list of (name, type) pairs,
    /// then the keyword fields in order, with types as spec files write them (`u64`, `f64`,
    /// `string`, `[f32; 3]`). `name` and `fields` are positional only, so that fields may be
    /// called so.
    #[new]
    #[pyo3(signature = (name, fields=Vec::new(), /, **more))]
    fn new(
        name: &str,
        mut fields: Vec<(String, String)>,
        more: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Sensor> {
        if let Some(more) = more {
            for (k, v) in more.iter() {
                fields.push((k.extract()?, v.extract()?));
            }
        }
        let fields = fields
            .iter()
            .map(|(n, t)| Ok(Field::new(n, field_type(n, t)?)))
            .collect::<PyResult<Vec<Field>>>()?;
        DynamicSensor::register(name, fields)
            .map(Sensor::of)
            .map_err(|e| invalid(e.to_string()))
    }

    /// Records one event, its fields given positionally in declared order. Returns at once
    /// when the sensor is off.
    ///
    /// The first [`DIRECT_FIELDS`] fields are parameters of their own, so that Python passes
    /// them without building a tuple (a `*args` tuple was a fifth of an emit's instructions);
    /// further fields come in `more`. None is never a field's value, so a None reads as a
    /// field not given.
    #[pyo3(
        signature = (f0=None, f1=None, f2=None, f3=None, f4=None, f5=None, f6=None, f7=None, /, *more),
        text_signature = "($self, /, *fields)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn emit<'py>(
        &self,
        py: Python<'py>,
        f0: Option<&Bound<'py, PyAny>>,
        f1: Option<&Bound<'py, PyAny>>,
        f2: Option<&Bound<'py, PyAny>>,
        f3: Option<&Bound<'py, PyAny>>,
        f4: Option<&Bound<'py, PyAny>>,
        f5: Option<&Bound<'py, PyAny>>,
        f6: Option<&Bound<'py, PyAny>>,
        f7: Option<&Bound<'py, PyAny>>,
        more: &Bound<'py, PyTuple>,
    ) -> PyResult<()> {
        if !self.sensor.is_on() {
            return Ok(());
        }
        let direct = [f0, f1, f2, f3, f4, f5, f6, f7];
        let n = self.types.len();
        if !(more.len() == n.saturating_sub(DIRECT_FIELDS)
            && direct
                .iter()
                .enumerate()
                .all(|(i, f)| f.is_some() == (i < n)))
        {
            return Err(self.arity_error(&direct, more.len()));
        }
        name_thread(py);
        let Some(size) = self.fixed else {
            let items = direct
                .into_iter()
                .flatten()
                .cloned()
                .chain(more.iter())
                .collect::<Vec<_>>();
            return self.emit_values(py, &items);
        };
        // At most eight fields of at most eight bytes.
        let mut buf = [0u8; DIRECT_FIELDS * 8];
        let mut at = 0;
        for (i, (ty, item)) in self
            .types
            .iter()
            .zip(direct.into_iter().flatten())
            .enumerate()
        {
            let s = ty.scalar().unwrap_or(ScalarType::U8);
            at += put_scalar(&mut buf[at..], s, item).map_err(|e| self.field_error(i, e, py))?;
        }
        debug_assert_eq!(at, size);
        self.sensor
            .emit_payload(&buf[..at])
            .map_err(|e| invalid(format!("{}: {e}", self.name())))
    }

    /// Whether events of this type are recorded now (one relaxed load): skip computing costly
    /// fields when not.
    #[getter]
    fn is_on(&self) -> bool {
        self.sensor.is_on()
    }

    /// Switches this event type on or off, as `gyr sensors PID on|off NAME` does.
    fn enable(&self, on: bool) {
        control::set_enabled(&Target::Type(self.name().to_owned()), on);
    }

    /// The event type's name.
    #[getter(name)]
    fn py_name(&self) -> String {
        self.name().to_owned()
    }

    /// The fields as (name, type) pairs.
    #[getter]
    fn fields(&self) -> Vec<(String, String)> {
        self.sensor
            .schema()
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.ty.to_string()))
            .collect()
    }

    fn __repr__(&self) -> String {
        let fields: Vec<String> = self
            .fields()
            .into_iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect();
        format!("Sensor({:?}, {})", self.name(), fields.join(", "))
    }
}

/// Registers every event type of the spec file at `path` (TOML, as `gyr spec FILE` checks and
/// `gyr gen` reads); returns them by name. Sampling sensors of the spec are left out: make
/// them with `sample`.
#[pyfunction]
fn load_spec(path: PathBuf) -> PyResult<HashMap<String, Sensor>> {
    let spec = Spec::load(&path).map_err(|e| invalid(e.to_string()))?;
    let mut out = HashMap::new();
    for s in &spec.sensors {
        if s.kind == SensorKind::Sampling {
            continue;
        }
        let fields: Vec<Field> = s.fields.iter().map(|f| Field::new(&f.name, f.ty)).collect();
        let sensor =
            DynamicSensor::register(&s.name, fields).map_err(|e| invalid(e.to_string()))?;
        out.insert(s.name.clone(), Sensor::of(sensor));
    }
    Ok(out)
}

/// Switches the event type `name` on or off; `*` means every sensor. A type not registered
/// yet is switched when it is.
#[pyfunction]
fn sensor_enable(name: &str, on: bool) {
    let target = if name == "*" {
        Target::Global
    } else {
        Target::Type(name.to_owned())
    };
    control::set_enabled(&target, on);
}

/// Span names made static, once each.
static SPAN_NAMES: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);

fn span_name(name: &str) -> PyResult<&'static str> {
    let mut names = lock(&SPAN_NAMES);
    let names = names.get_or_insert_with(HashMap::new);
    if let Some(n) = names.get(name) {
        return Ok(n);
    }
    if names.len() >= MAX_SPAN_NAMES {
        return Err(invalid(format!(
            "span `{name}`: this program already uses {MAX_SPAN_NAMES} span names; keep what \
             varies in a sensor's field, not in the span's name"
        )));
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(name.to_owned(), leaked);
    Ok(leaked)
}

/// A span: `gyr.span.begin` when entered, `gyr.span.end` when left, as Rust's `gyr::span!`.
#[pyclass(module = "gyr._gyr")]
struct Span {
    name: &'static str,
    open: Vec<gyr::span::Span>,
}

#[pymethods]
impl Span {
    #[new]
    fn new(name: &str) -> PyResult<Span> {
        Ok(Span {
            name: span_name(name)?,
            open: Vec::new(),
        })
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        name_thread(slf.py());
        let name = slf.name;
        slf.open.push(gyr::span::Span::enter(name));
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.open.pop();
        false
    }

    /// The span's name.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    fn __repr__(&self) -> String {
        format!("Span({:?})", self.name)
    }
}

/// A sampling sensor's cell: the program stores values, a local monitor records the latest at
/// the sensor's interval.
#[pyclass(module = "gyr._gyr", frozen)]
struct Sample {
    cell: Cell,
    name: String,
}

enum Cell {
    F64(gyr::SampleCell<f64>),
    I64(gyr::SampleCell<i64>),
}

#[pymethods]
impl Sample {
    /// Registers the sampling sensor `name` over a cell holding `initial`: an `int` makes an
    /// integer cell, a `float` a floating-point one.
    #[new]
    fn new(name: &str, initial: &Bound<'_, PyAny>) -> PyResult<Sample> {
        let cell = if initial.is_instance_of::<PyInt>() && !initial.is_instance_of::<PyBool>() {
            gyr::sample_cell(name, initial.extract::<i64>()?).map(Cell::I64)
        } else {
            gyr::sample_cell(name, initial.extract::<f64>()?).map(Cell::F64)
        }
        .map_err(|e| invalid(e.to_string()))?;
        Ok(Sample {
            cell,
            name: name.to_owned(),
        })
    }

    /// Stores a value (one relaxed store); an integer cell refuses a float.
    fn set(&self, v: &Bound<'_, PyAny>) -> PyResult<()> {
        match &self.cell {
            Cell::F64(c) => c.set(v.extract::<f64>()?),
            Cell::I64(c) => c.set(v.extract::<i64>().map_err(|_| {
                invalid(format!(
                    "sample `{}` holds integers: pass an int",
                    self.name
                ))
            })?),
        }
        Ok(())
    }

    /// The value stored last.
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match &self.cell {
            Cell::F64(c) => c.get().into_pyobject(py)?.into_any(),
            Cell::I64(c) => c.get().into_pyobject(py)?.into_any(),
        })
    }

    /// The sensor's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    fn __repr__(&self) -> String {
        match &self.cell {
            Cell::F64(c) => format!("Sample({:?}, {})", self.name, c.get()),
            Cell::I64(c) => format!("Sample({:?}, {})", self.name, c.get()),
        }
    }
}

/// The type of an attribute or parameter as a user writes it.
fn attr_type(name: &str, ty: &str) -> PyResult<AttrType> {
    Ok(match ty.trim() {
        "float" | "f64" | "double" => AttrType::Float,
        "int" | "i64" => AttrType::Int,
        "uint" | "u64" => AttrType::UInt,
        "bool" => AttrType::Bool,
        "str" | "string" => AttrType::Str,
        other => {
            return Err(invalid(format!(
                "`{name}` has type `{other}`: use float, int, uint, bool or str"
            )));
        }
    })
}

/// One attribute as the program sees it: its declared type and the program's copy.
struct Slot {
    name: String,
    value: Value,
}

/// A steering object's shared state: the registered object and the program's copies.
struct ObjectState {
    object: DynamicObject,
    slots: Mutex<Vec<Slot>>,
}

impl ObjectState {
    /// Exchanges the program's copies with the attributes (see gyr's `DynamicObject`): a
    /// value a client set since the last exchange becomes the program's, otherwise the
    /// program's is what clients read.
    fn sync(&self) {
        let mut slots = lock(&self.slots);
        self.object.exchange(|i, steered| {
            let Some(slot) = slots.get_mut(i) else {
                return Value::Bool(false);
            };
            if let Some(v) = steered {
                slot.value = v.clone();
            }
            slot.value.clone()
        });
    }
}

/// Every object made, for `sync_point`; objects live as long as the process.
static OBJECTS: Mutex<Vec<Arc<ObjectState>>> = Mutex::new(Vec::new());

/// A Python callable registered as an actuator, a function or a rule's action.
struct Callback {
    f: Py<PyAny>,
    what: String,
}

impl Callback {
    /// Calls it with gyr's values, taking the GIL for the call only.
    fn call(&self, args: &[Value]) -> Result<Value, String> {
        if EXITING.load(Ordering::SeqCst) {
            return Err("the Python program is exiting; nothing was run".into());
        }
        let out = Python::try_attach(|py| {
            let run = || -> PyResult<Value> {
                let args = args
                    .iter()
                    .map(|v| to_py(py, v))
                    .collect::<PyResult<Vec<_>>>()?;
                let out = self.f.call1(py, PyTuple::new(py, args)?)?;
                let out = out.bind(py);
                if out.is_none() {
                    Ok(Value::Bool(true))
                } else {
                    from_py(out, &self.what)
                }
            };
            run().map_err(|e| {
                let msg = format!("the Python callback {} raised {}", self.what, e);
                e.display(py);
                msg
            })
        });
        out.unwrap_or_else(|| Err("the Python interpreter is not running; nothing was run".into()))
    }
}

/// Reads a parameter list: a list of (name, type) pairs.
fn params(list: Vec<(String, String)>) -> PyResult<Vec<ParamInfo>> {
    list.into_iter()
        .map(|(name, ty)| {
            Ok(ParamInfo {
                ty: attr_type(&name, &ty)?,
                name,
            })
        })
        .collect()
}

/// A steering object whose attributes are the program's values: clients read and set them, and
/// a value set reaches the program at its next synch point, on the thread that reaches it.
#[pyclass(module = "gyr._gyr", frozen)]
struct Object {
    state: Arc<ObjectState>,
}

impl Object {
    fn index(slots: &[Slot], obj: &str, name: &str) -> PyResult<usize> {
        slots.iter().position(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = slots.iter().map(|s| s.name.as_str()).collect();
            NotFoundError::new_err(format!(
                "`{obj}` has no attribute `{name}`; its attributes: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ))
        })
    }
}

#[pymethods]
impl Object {
    /// Registers the steering object `name`; a name in use is refused.
    #[new]
    #[pyo3(signature = (name, description=None))]
    fn new(name: &str, description: Option<&str>) -> PyResult<Object> {
        let object = DynamicObject::register(name, description).map_err(steer_error)?;
        let state = Arc::new(ObjectState {
            object,
            slots: Mutex::new(Vec::new()),
        });
        lock(&OBJECTS).push(state.clone());
        Ok(Object { state })
    }

    /// Adds the attribute `name` holding `value`, of type `type` (`float`, `int`, `uint`,
    /// `bool`, `str`; by default the value's), with a unit, a range and a description;
    /// `read_only` ones clients may read but not set.
    #[pyo3(signature = (name, value, *, r#type=None, unit=None, min=None, max=None, read_only=false, description=None))]
    #[allow(clippy::too_many_arguments)]
    fn attribute(
        &self,
        name: &str,
        value: &Bound<'_, PyAny>,
        r#type: Option<&str>,
        unit: Option<String>,
        min: Option<f64>,
        max: Option<f64>,
        read_only: bool,
        description: Option<String>,
    ) -> PyResult<()> {
        let path = format!("{}.{name}", self.state.object.name());
        let v = from_py(value, &path)?;
        let ty = match r#type {
            Some(t) => attr_type(name, t)?,
            None => match &v {
                Value::Bool(_) => AttrType::Bool,
                Value::Int(_) => AttrType::Int,
                Value::UInt(_) => AttrType::UInt,
                Value::Float(_) => AttrType::Float,
                Value::Str(_) => AttrType::Str,
                _ => {
                    return Err(invalid(format!(
                        "{path}: an attribute holds a bool, int, float or str"
                    )));
                }
            },
        };
        if let (Some(lo), Some(hi)) = (min, max)
            && lo > hi
        {
            return Err(invalid(format!(
                "{path}: the range's minimum {lo} is above its maximum {hi}"
            )));
        }
        let v = ty.convert(&v).map_err(|reason| {
            steer_error(SteerError::WrongType {
                path: path.clone(),
                ty,
                reason,
            })
        })?;
        let mut info = AttrInfo::new(name, ty);
        info.unit = unit;
        info.min = min;
        info.max = max;
        info.read_only = read_only;
        info.description = description;
        info.check_range(&v).map_err(|reason| {
            invalid(format!(
                "{path}: the initial value is out of range: {reason}"
            ))
        })?;
        let mut slots = lock(&self.state.slots);
        self.state
            .object
            .add_attribute(info, v.clone())
            .map_err(steer_error)?;
        slots.push(Slot {
            name: name.to_owned(),
            value: v,
        });
        Ok(())
    }

    /// The program's value of the attribute `name`.
    fn get<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let slots = lock(&self.state.slots);
        let i = Object::index(&slots, self.state.object.name(), name)?;
        to_py(py, &slots[i].value)
    }

    /// Changes the program's value of the attribute `name` (clients see it after the next
    /// synch point); it must keep its type.
    fn set(&self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let obj = self.state.object.name();
        let path = format!("{obj}.{name}");
        let v = from_py(value, &path)?;
        let mut slots = lock(&self.state.slots);
        let i = Object::index(&slots, obj, name)?;
        let slot = &mut slots[i];
        let ty = match &slot.value {
            Value::Bool(_) => AttrType::Bool,
            Value::Int(_) => AttrType::Int,
            Value::UInt(_) => AttrType::UInt,
            Value::Float(_) => AttrType::Float,
            _ => AttrType::Str,
        };
        slot.value = ty
            .convert(&v)
            .map_err(|reason| steer_error(SteerError::WrongType { path, ty, reason }))?;
        Ok(())
    }

    /// The attributes' names, in declared order.
    fn attributes(&self) -> Vec<String> {
        lock(&self.state.slots)
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// Adds the actuator `name`: `callback(*args)` runs at the program's next synch point after
    /// a client asks (`gyr call PID object.name ARGS`), on the thread that reaches it, with
    /// arguments checked against `params` (a list of (name, type) pairs). What it returns
    /// goes back to the client (None as true); an exception it raises is the client's error.
    #[pyo3(signature = (name, callback, params=Vec::new(), description=None))]
    fn actuator(
        &self,
        name: &str,
        callback: Py<PyAny>,
        params: Vec<(String, String)>,
        description: Option<&str>,
    ) -> PyResult<()> {
        let params = self::params(params)?;
        let cb = Callback {
            f: callback,
            what: format!("{}.{name}", self.state.object.name()),
        };
        self.state
            .object
            .add_actuator(name, params, description, move |args| {
                cb.call(args.values())
            })
            .map_err(steer_error)
    }

    /// Exchanges this object's values with its attributes without a synch point.
    fn sync(&self, py: Python<'_>) {
        name_thread(py);
        let state = self.state.clone();
        py.detach(move || state.sync());
    }

    /// The object's name.
    #[getter]
    fn name(&self) -> &str {
        self.state.object.name()
    }
}

/// Registers the function `name`, which clients call (`gyr call PID name ARGS`): the callback
/// runs then, on the steering server's thread, holding the GIL for the call.
#[pyfunction]
#[pyo3(signature = (name, callback, params=Vec::new(), description=None))]
fn function(
    name: &str,
    callback: Py<PyAny>,
    params: Vec<(String, String)>,
    description: Option<&str>,
) -> PyResult<()> {
    let params = self::params(params)?;
    let cb = Callback {
        f: callback,
        what: name.to_owned(),
    };
    let mut f = Function::new(name, move |args| cb.call(args.values()));
    for p in params {
        f = f.param(&p.name, p.ty);
    }
    if let Some(d) = description {
        f = f.description(d);
    }
    f.register().map_err(steer_error)
}

/// A synch point called `name`: queued actuators run here, a paused program waits here, and
/// every object's values are exchanged with its attributes. The GIL is released meanwhile; a
/// signal (Ctrl-C) while paused resumes the program and raises here, as in any blocking call.
#[pyfunction]
fn sync_point(py: Python<'_>, name: &str) -> PyResult<()> {
    name_thread(py);
    let mut signal = None;
    py.detach(|| {
        let interrupted = steer::sync_point_interruptible(name, || {
            Python::attach(|py| py.check_signals())
                .map_err(|e| signal = Some(e))
                .is_err()
        });
        if interrupted {
            return;
        }
        let objects: Vec<Arc<ObjectState>> = lock(&OBJECTS).clone();
        for o in objects {
            o.sync();
        }
    });
    signal.map_or(Ok(()), Err)
}

/// A rules file running in the program's steering thread (`load_rules`).
#[pyclass(module = "gyr._gyr", frozen)]
struct Rules {
    handle: Mutex<Option<steer::repository::RulesHandle>>,
    path: String,
}

#[pymethods]
impl Rules {
    /// Stops the rules, unless another file replaced them since.
    fn unload(&self) {
        if let Some(h) = lock(&self.handle).take() {
            h.unload();
        }
    }

    /// The rules and their counters, as of a quarter of a second ago at most: a dict with
    /// `origin`, `load_error` and `rules` (each with `name`, `on`, `when`, `fired`, `errors`,
    /// `last_error`); None once unloaded.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(s) = steer::repository::rules_file() else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        out.set_item("origin", s.origin)?;
        out.set_item("load_error", s.load_error)?;
        let mut rules = Vec::new();
        for r in s.rules {
            let d = PyDict::new(py);
            d.set_item("name", r.name)?;
            d.set_item("on", r.on)?;
            d.set_item("when", r.when)?;
            d.set_item("fired", r.fired)?;
            d.set_item("errors", r.errors)?;
            d.set_item("last_error", r.last_error)?;
            rules.push(d);
        }
        out.set_item("rules", rules)?;
        Ok(Some(out))
    }

    /// The rules file.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    fn __repr__(&self) -> String {
        format!("Rules({:?})", self.path)
    }
}

/// Runs the rules file at `path` in the program's steering thread, over its own events (the
/// same as `GYR_RULES`): checked now (an error names its line and column), reloaded when it
/// changes. Its `set` and `actuate` reach the program's objects, actuators and functions,
/// Python callbacks among them.
#[pyfunction]
fn load_rules(path: PathBuf) -> PyResult<Rules> {
    let handle = steer::repository::load_rules(&path).map_err(|e| invalid(e.to_string()))?;
    Ok(Rules {
        handle: Mutex::new(Some(handle)),
        path: path.display().to_string(),
    })
}

/// The fields of an event as a dict, for a rule's callbacks.
fn event_dict<'py>(
    py: Python<'py>,
    e: &steer::repository::EventView,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (f, v) in e.schema.fields.iter().zip(&e.values) {
        d.set_item(&f.name, to_py(py, v)?)?;
    }
    Ok(d)
}

/// Adds the rule `name`: when an event of type `event_type` is recorded and `when(fields)`
/// (if given) is true, `then(fields)` runs on the steering thread with the event's fields as a
/// dict. Exceptions are counted as the rule's failures and printed; the program goes on.
#[pyfunction]
#[pyo3(signature = (name, event_type, then, when=None))]
fn on_event(
    name: &str,
    event_type: &str,
    then: Py<PyAny>,
    when: Option<Py<PyAny>>,
) -> PyResult<()> {
    let rule = name.to_owned();
    let call = move |f: &Py<PyAny>, e: &steer::repository::EventView| -> Result<bool, String> {
        if EXITING.load(Ordering::SeqCst) {
            return Err("the Python program is exiting".into());
        }
        Python::try_attach(|py| {
            let run = || -> PyResult<bool> {
                let out = f.call1(py, (event_dict(py, e)?,))?;
                out.bind(py).is_truthy()
            };
            run().map_err(|err| {
                let msg = format!("the Python callback of rule `{rule}` raised {err}");
                err.display(py);
                msg
            })
        })
        .unwrap_or_else(|| Err("the Python interpreter is not running".into()))
    };
    let call = Arc::new(call);
    let c2 = call.clone();
    let rule = name.to_owned();
    steer::repository::on_event(
        name,
        event_type,
        move |e| match &when {
            Some(w) => c2(w, e).unwrap_or(false),
            None => true,
        },
        move |e, _who: &Who| {
            call(&then, e)
                .map(drop)
                .map_err(|reason| SteerError::ActuatorFailed {
                    path: format!("rule {rule}"),
                    reason,
                })
        },
    )
    .map(drop)
    .map_err(steer_error)
}

/// Removes the rule `name` added by `on_event`, if there is one.
#[pyfunction]
fn remove_rule(name: &str) {
    steer::repository::remove(name);
}

/// Says that this process is rank `rank` of `size` in job `job`, for clock correction across
/// processes. Call it once, before the first message.
#[pyfunction]
fn msg_init(job: &str, rank: u32, size: u32) {
    gyr::msg::init(job, rank, size);
}

/// Records that a message of `nbytes` bytes to rank `peer` begins to leave.
#[pyfunction]
#[pyo3(signature = (peer, tag, nbytes, comm=0))]
fn msg_send(py: Python<'_>, peer: u32, tag: i32, nbytes: u64, comm: u64) {
    name_thread(py);
    gyr::msg::send_on(comm, peer, tag, nbytes);
}

/// Records that a message of `nbytes` bytes from rank `peer` has arrived.
#[pyfunction]
#[pyo3(signature = (peer, tag, nbytes, comm=0))]
fn msg_recv(py: Python<'_>, peer: u32, tag: i32, nbytes: u64, comm: u64) {
    name_thread(py);
    gyr::msg::recv_on(comm, peer, tag, nbytes);
}

/// Adds the instrumentation's classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Sensor>()?;
    m.add_class::<Span>()?;
    m.add_class::<Sample>()?;
    m.add_class::<Object>()?;
    m.add_class::<Rules>()?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(_at_exit, m)?)?;
    m.add_function(wrap_pyfunction!(flush, m)?)?;
    m.add_function(wrap_pyfunction!(running, m)?)?;
    m.add_function(wrap_pyfunction!(load_spec, m)?)?;
    m.add_function(wrap_pyfunction!(sensor_enable, m)?)?;
    m.add_function(wrap_pyfunction!(function, m)?)?;
    m.add_function(wrap_pyfunction!(sync_point, m)?)?;
    m.add_function(wrap_pyfunction!(load_rules, m)?)?;
    m.add_function(wrap_pyfunction!(on_event, m)?)?;
    m.add_function(wrap_pyfunction!(remove_rule, m)?)?;
    m.add_function(wrap_pyfunction!(msg_init, m)?)?;
    m.add_function(wrap_pyfunction!(msg_send, m)?)?;
    m.add_function(wrap_pyfunction!(msg_recv, m)?)?;
    Ok(())
}
