//! `gyr script TARGET FILE`: runs a steering script (`gyr_rules`) against a program; exit code
//! 2 when the script or a refused command was at fault, 1 when the program went away.

use crate::Failure;
use crate::client::Session;
use crate::show::printable;
use crate::steer_cmd::Target;
use gyr_rules::ScriptError;
use std::path::Path;
use std::process::ExitCode;

impl From<ScriptError> for Failure {
    fn from(e: ScriptError) -> Failure {
        let error = anyhow::anyhow!("{}", printable(&e.message));
        if e.user_error {
            Failure::input(error)
        } else {
            Failure::from(error)
        }
    }
}

/// Runs `source` against `session`'s program, printing what the script prints.
pub(crate) fn run_source(session: Session, name: &str, source: &str) -> Result<(), Failure> {
    Ok(gyr_rules::run_source(session, name, source, |s| {
        println!("{s}")
    })?)
}

/// `gyr script TARGET FILE` (`-` reads the script from stdin).
pub(crate) fn run_file(target: Target, file: &Path) -> Result<ExitCode, Failure> {
    let (name, source) = if file == Path::new("-") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| {
            Failure::from(anyhow::anyhow!("cannot read the script from stdin: {e}"))
        })?;
        ("<stdin>".to_owned(), s)
    } else {
        let s = std::fs::read_to_string(file).map_err(|e| {
            Failure::input(anyhow::anyhow!(
                "cannot read the script {}: {e}",
                file.display()
            ))
        })?;
        (file.display().to_string(), s)
    };
    let session = Session::connect(&target.program, target.token.clone(), "gyr-script")?;
    run_source(session, &name, &source)?;
    Ok(ExitCode::SUCCESS)
}
