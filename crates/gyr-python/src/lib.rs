//! gyr for Python: the extension module `gyr._gyr`, which the package `gyr`
//! (`python/gyr/__init__.py`) wraps with typed, documented functions.
//!
//! One module per job: `reader` turns trace files into Arrow tables, `instrument` makes a
//! Python program a gyr program (sensors, spans, steering, rules), `client` steers and watches
//! any gyr program; `value` converts gyr's values to and from Python's, and `errors` holds the
//! exceptions below `GyrError`. Every error a user can cause is raised as `gyr.GyrError` (or a
//! subclass) carrying gyr's own message.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

mod client;
mod errors;
mod instrument;
mod reader;
mod value;

create_exception!(
    _gyr,
    GyrError,
    PyException,
    "An error of gyr's: the message says what was wrong and what to do."
);

/// The extension module `gyr._gyr`.
#[pymodule]
fn _gyr(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GyrError", m.py().get_type::<GyrError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    reader::register(m)?;
    errors::register(m)?;
    instrument::register(m)?;
    client::register(m)?;
    Ok(())
}
