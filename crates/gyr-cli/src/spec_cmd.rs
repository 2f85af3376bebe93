//! `gyr spec FILE`: checks a sensor specification and prints its event types.

use crate::Failure;
use crate::show::printable;
use gyr_core::spec::{SensorKind, Spec};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn check(path: &Path) -> Result<ExitCode, Failure> {
    let spec = Spec::load(path).map_err(Failure::input)?;
    for s in &spec.sensors {
        let kind = match s.kind {
            SensorKind::Tracing => "tracing",
            SensorKind::Sampling => "sampling",
            SensorKind::Extended => "extended",
        };
        let schema = s.schema(1).map_err(Failure::input)?;
        let size = schema
            .fixed_size()
            .map(|n| format!("{n} bytes"))
            .unwrap_or_else(|| "variable size".into());
        println!("{kind:<9} {}  ({size})", schema);
        if let Some(d) = &s.description {
            println!("          {}", printable(d));
        }
    }
    println!("{}: {} sensors, valid", path.display(), spec.sensors.len());
    Ok(ExitCode::SUCCESS)
}
