//! gyr's values as Python objects and back: integers stay `int`, floats `float`, strings `str`,
//! bytes `bytes`, arrays `list`, so that the instrumentation and the client speak the types a
//! Python program uses.

use crate::errors::invalid;
use gyr_core::Value;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

/// The Python object for a value.
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|x| to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any()
        }
    })
}

/// The value of a Python object: `bool`, `int`, `float`, `str`, `bytes`, or a list or tuple of
/// those. `what` names it in the error.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.extract::<bool>()?));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Int(i));
        }
        return obj.extract::<u64>().map(Value::UInt).map_err(|_| {
            invalid(format!(
                "{what}: the integer does not fit 64 bits; pass one from -2**63 to 2**64-1"
            ))
        });
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Value::Float(obj.extract::<f64>()?));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::Str(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for x in obj.try_iter()? {
            items.push(from_py(&x?, what)?);
        }
        return Ok(Value::Array(items));
    }
    Err(invalid(format!(
        "{what}: a {} cannot be sent; pass a bool, int, float, str, bytes or a list of them",
        obj.get_type().name()?
    )))
}
