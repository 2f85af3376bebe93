//! The exceptions of the instrumentation and the client, below `gyr.GyrError`: one class per
//! thing a user does about it (reconnect, pass a token, fix a name, fix a value), each carrying
//! gyr's own message.

use crate::GyrError;
use gyr::steer::SteerError;
use pyo3::prelude::*;

pyo3::create_exception!(
    gyr,
    ConnectError,
    GyrError,
    "The program or hub could not be reached, or went away."
);
pyo3::create_exception!(
    gyr,
    AccessError,
    GyrError,
    "The server refused the token, or the token only allows watching."
);
pyo3::create_exception!(
    gyr,
    NotFoundError,
    GyrError,
    "No steering object, attribute, actuator, function or sensor of that name."
);
pyo3::create_exception!(
    gyr,
    InvalidValueError,
    GyrError,
    "A value, name or argument was refused: out of range, wrong type, read-only, malformed."
);

/// Adds the classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ConnectError", py.get_type::<ConnectError>())?;
    m.add("AccessError", py.get_type::<AccessError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("InvalidValueError", py.get_type::<InvalidValueError>())?;
    Ok(())
}

/// A steering refusal as the exception a Python caller catches.
pub(crate) fn steer_error(e: SteerError) -> PyErr {
    let msg = e.to_string();
    match e {
        SteerError::UnknownObject { .. }
        | SteerError::UnknownAttribute { .. }
        | SteerError::UnknownOperation { .. } => NotFoundError::new_err(msg),
        SteerError::WrongType { .. }
        | SteerError::OutOfRange { .. }
        | SteerError::Invalid { .. }
        | SteerError::BadArguments { .. }
        | SteerError::BadCondition { .. }
        | SteerError::BadPath(_)
        | SteerError::ReadOnly { .. }
        | SteerError::AlreadyRegistered { .. }
        | SteerError::BadName(_) => InvalidValueError::new_err(msg),
        _ => GyrError::new_err(msg),
    }
}

/// An invalid argument, with gyr's message.
pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidValueError::new_err(msg.into())
}
