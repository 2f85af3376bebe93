//! Running MPI jobs for calibration and validation: Open MPI's `mpirun` on one transport, the
//! measuring program compiled and run, and a job traced with the MPI interposer. `gyr sim` and
//! the `sim` benchmark both use these.

use crate::calibrate::{self, Measurements};
use crate::model::LogGops;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Open MPI's name of a transport: `vader` (shared memory) or `tcp`; `None` for anything else.
pub fn btl_name(btl: &str) -> Option<&'static str> {
    match btl {
        "vader" | "sm" | "shm" => Some("vader"),
        "tcp" => Some("tcp"),
        _ => None,
    }
}

/// `mpirun` with what it needs here: running as root is refused unless allowed, and more ranks
/// than cores need oversubscription.
pub fn mpirun(launcher: &str) -> Command {
    let mut cmd = Command::new(launcher);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg("--oversubscribe");
    cmd
}

/// `--mca` options that put a job on one transport (`vader` or `tcp`; TCP over the loopback
/// interface).
pub fn btl_args(btl: &str) -> Vec<String> {
    let mut v = vec!["--mca".into(), "btl".into(), format!("self,{btl}")];
    if btl == "vader" {
        // Copies through shared memory: the single-copy mechanism (CMA) is often forbidden in
        // containers, where Open MPI then fails at the first large message.
        v.extend([
            "--mca".into(),
            "btl_vader_single_copy_mechanism".into(),
            "none".into(),
        ]);
    }
    if btl == "tcp" {
        v.extend(["--mca".into(), "btl_tcp_if_include".into(), "lo".into()]);
    }
    v
}

/// Compiles C `source` with `mpicc` into `dir/name`.
pub fn compile(mpicc: &str, source: &Path, dir: &Path, name: &str) -> Result<PathBuf, String> {
    let bin = dir.join(name);
    let out = Command::new(mpicc)
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(source)
        .output()
        .map_err(|e| {
            format!(
                "cannot run {mpicc}: {e}; install Open MPI's compiler wrapper (Debian: libopenmpi-dev)"
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "{mpicc} failed on {}: {}",
            source.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(bin)
}

/// What [`measure`] needs.
#[derive(Debug, Clone)]
pub struct Measure<'a> {
    /// Transport (`vader` or `tcp`).
    pub btl: &'a str,
    /// Largest message, bytes.
    pub max_bytes: u64,
    /// Timed repetitions per size.
    pub reps: u32,
    /// The launcher.
    pub mpirun: &'a str,
    /// The compiler wrapper.
    pub mpicc: &'a str,
}

/// Compiles and runs the measuring program on two ranks (and in short jobs for the
/// connections), then fits the model; also returns the
/// measurements and whether `ompi_info` gave the eager limit.
pub fn measure(m: &Measure<'_>) -> Result<(LogGops, Measurements, bool), String> {
    if m.max_bytes < 64 || m.reps == 0 {
        return Err("the largest size must be 64 bytes or more and repetitions at least 1".into());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let source = dir.path().join("calibrate.c");
    std::fs::write(&source, calibrate::PROGRAM).map_err(|e| e.to_string())?;
    let binary = compile(m.mpicc, &source, dir.path(), "calibrate")?;
    let output = mpirun(m.mpirun)
        .args(["-np", "2"])
        .args(btl_args(m.btl))
        .arg(&binary)
        .arg(m.max_bytes.to_string())
        .arg(m.reps.to_string())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| {
            format!(
                "cannot run {}: {e}; install Open MPI (Debian: openmpi-bin) or name the launcher",
                m.mpirun
            )
        })?;
    if !output.status.success() {
        return Err(format!(
            "the measuring program failed under {} ({})",
            m.mpirun, output.status
        ));
    }
    // A pair of ranks connects once per job: its connections are measured in jobs of their
    // own as well (three of each in all), passive and crossing.
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    for mode in ["crossing", "passive", "crossing", "passive", "crossing"] {
        let job = mpirun(m.mpirun)
            .args(["-np", "2"])
            .args(btl_args(m.btl))
            .arg(&binary)
            .arg(mode)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", m.mpirun))?;
        if !job.status.success() {
            return Err(format!(
                "the measuring program failed under {} ({})",
                m.mpirun, job.status
            ));
        }
        text.push_str(&String::from_utf8_lossy(&job.stdout));
    }
    let measurements = calibrate::parse(&text)?;
    let eager = Command::new("ompi_info")
        .args(["--parsable", "--level", "9", "--param", "btl", m.btl])
        .output()
        .ok()
        .and_then(|o| {
            calibrate::eager_limit_from_ompi_info(&String::from_utf8_lossy(&o.stdout), m.btl)
        });
    let model = calibrate::fit(&measurements, eager)?;
    Ok((model, measurements, eager.is_some()))
}

/// Runs `program` on `np` ranks over `btl` with the MPI interposer `library` preloaded, each
/// rank's trace written to `dir/name.RANK.gyr` (job `name`); returns the files, in rank order.
/// This is what `gyr run --mpi` does for Open MPI's `mpirun`, for callers without the CLI.
pub fn traced_run(
    launcher: &str,
    library: &Path,
    np: u32,
    btl: &str,
    dir: &Path,
    name: &str,
    program: &[impl AsRef<OsStr>],
) -> Result<Vec<PathBuf>, String> {
    let pattern = dir.join(format!("{name}.%r.gyr"));
    let status = mpirun(launcher)
        .args(["-np", &np.to_string()])
        .args(btl_args(btl))
        .args(["-x", "LD_PRELOAD", "-x", "GYR_TRACE", "-x", "GYR_MPI_JOB"])
        .args(program)
        .env("LD_PRELOAD", library)
        .env("GYR_TRACE", &pattern)
        .env("GYR_MPI_JOB", name)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {launcher}: {e}"))?;
    if !status.success() {
        return Err(format!("the run on {btl} failed ({status})"));
    }
    let files: Vec<PathBuf> = (0..np)
        .map(|r| dir.join(format!("{name}.{r}.gyr")))
        .collect();
    if let Some(missing) = files.iter().find(|f| !f.exists()) {
        return Err(format!(
            "the run on {btl} wrote no {}: is the program an MPI program linked dynamically?",
            missing.display()
        ));
    }
    Ok(files)
}
