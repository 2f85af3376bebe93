//! `gyr gen --lang c|cpp|fortran SPEC.toml`: typed sensor code from a spec file
//! (`gyr_ffi::codegen`), written to standard output or to `--output`.

use crate::Failure;
use gyr_core::spec::Spec;
use gyr_ffi::codegen::{self, Lang};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The language of the generated code.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum GenLang {
    /// A C header (C99).
    C,
    /// A C++ header (C++17).
    Cpp,
    /// A Fortran module (Fortran 2008, over the `gyr` module).
    Fortran,
}

/// Arguments of `gyr gen`.
#[derive(Debug, clap::Args)]
pub(crate) struct GenArgs {
    /// The language to generate.
    #[arg(long)]
    lang: GenLang,
    /// Where to write the code (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// The spec file (TOML, as `gyr spec` checks it).
    spec: PathBuf,
}

pub(crate) fn run(a: GenArgs) -> Result<ExitCode, Failure> {
    let spec = Spec::load(&a.spec).map_err(Failure::input)?;
    // Read again to embed it: `Spec::load` checked it is UTF-8 and within the size limit.
    let text = std::fs::read_to_string(&a.spec).map_err(Failure::input)?;
    let lang = match a.lang {
        GenLang::C => Lang::C,
        GenLang::Cpp => Lang::Cpp,
        GenLang::Fortran => Lang::Fortran,
    };
    let source = a
        .spec
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| a.spec.display().to_string());
    let code = codegen::generate(&spec, &text, &source, lang)
        .map_err(|e| Failure::input(anyhow::anyhow!("{}: {e}", a.spec.display())))?;
    match &a.output {
        Some(path) => std::fs::write(path, code)
            .map_err(|e| Failure::from(anyhow::anyhow!("cannot write {}: {e}", path.display())))?,
        None => std::io::stdout().lock().write_all(code.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}
