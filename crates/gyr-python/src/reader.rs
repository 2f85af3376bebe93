//! Trace files for Python: what a file holds (`trace_info`, the object `gyr trace info --json`
//! prints).

use crate::GyrError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// What the trace at `path` holds, as the JSON text of `gyr trace info --json` (the package
/// parses it). The GIL is released while the file is read through.
#[pyfunction]
fn trace_info_json(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        gyr_trace::info::read_file(&path)
            .map(|info| info.to_json(&path).to_string())
            .map_err(|e| e.to_string())
    })
    .map_err(GyrError::new_err)
}

/// Adds the reader's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trace_info_json, m)?)?;
    Ok(())
}
