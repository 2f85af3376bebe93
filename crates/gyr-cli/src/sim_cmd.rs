//! `gyr sim`: trace-driven performance prediction (`gyr-sim`).
//!
//! - `gyr sim predict TRACE...` replays a traced MPI run (one file per rank, from
//!   `gyr run --mpi`) on a network model and prints, per rank and for the whole run, the
//!   measured and predicted times and their difference; `--out PREFIX` writes the predicted
//!   timelines as gyr traces (`PREFIX.RANK.gyr`) to view beside the measured ones.
//! - `gyr sim calibrate` measures the model's parameters on this machine: it compiles
//!   `gyr_sim::calibrate::PROGRAM` with `mpicc`, runs it on two ranks with `mpirun` over one
//!   Open MPI transport (`--btl vader` for shared memory, `--btl tcp` for loopback TCP), and
//!   fits LogGOPS to its ping-pong and streaming figures.
//!
//! A model file is TOML: `ranks_per_node`, and `[intra]` and `[inter]` tables with `L`, `o`,
//! `g`, `G`, `O` (ns, ns per byte) and `S` (bytes), as `calibrate` writes it.

use crate::Failure;
use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use gyr_sim::{LogGops, Network};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub(crate) enum SimCommand {
    /// Predict a traced MPI run on a network model: `gyr sim predict --network tcp.toml
    /// run.*.gyr` (per-rank and whole-run times, measured against predicted).
    Predict(PredictArgs),
    /// Measure the model's parameters here (ping-pong and streaming over one Open MPI
    /// transport, with warm-up): `gyr sim calibrate --btl tcp -o tcp.toml`.
    Calibrate(CalibrateArgs),
}

/// Arguments of `gyr sim predict`.
#[derive(Debug, Args)]
pub(crate) struct PredictArgs {
    /// The run's trace files, one per rank.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// The network model (TOML, as `gyr sim calibrate` writes it).
    #[arg(long, value_name = "FILE", conflicts_with = "preset")]
    network: Option<PathBuf>,
    /// A built-in model instead: `shm` (Open MPI's shared memory) or `tcp` (loopback TCP),
    /// rough figures for a current server; calibrate for this machine's.
    #[arg(long, value_parser = ["shm", "tcp"])]
    preset: Option<String>,
    /// Change one parameter: `L=5000`, `inter.G=0.8`, `intra.S=8192`, `ranks_per_node=2`
    /// (a bare name changes both paths). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Write the predicted timelines as gyr traces PREFIX.RANK.gyr.
    #[arg(long, value_name = "PREFIX")]
    out: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// Arguments of `gyr sim calibrate`.
#[derive(Debug, Args)]
pub(crate) struct CalibrateArgs {
    /// Open MPI's transport to measure: `vader` (shared memory) or `tcp` (loopback TCP).
    #[arg(long, default_value = "vader")]
    btl: String,
    /// Write the model here (TOML); printed otherwise.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Largest message measured, bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_bytes: u64,
    /// Timed repetitions per size (after 5 of warm-up).
    #[arg(long, default_value_t = 30)]
    reps: u32,
    /// The MPI launcher.
    #[arg(long, default_value = "mpirun")]
    mpirun: String,
    /// The MPI C compiler wrapper.
    #[arg(long, default_value = "mpicc")]
    mpicc: String,
    /// Also print the measurements, and the fit as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cmd: SimCommand) -> Result<ExitCode, Failure> {
    match cmd {
        SimCommand::Predict(a) => predict(a),
        SimCommand::Calibrate(a) => calibrate(a),
    }
}

/// Reads a model file, with what is wrong and where.
pub(crate) fn read_network(path: &Path) -> Result<Network, Failure> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the network model {}", path.display()))
        .map_err(Failure::input)?;
    let network: Network =
        toml::from_str(&text).map_err(|e| Failure::input(anyhow!("{}: {e}", path.display())))?;
    network
        .validate()
        .map_err(|e| Failure::input(anyhow!("{}: {e}", path.display())))?;
    Ok(network)
}

/// Applies `KEY=VALUE` changes to `network`.
fn apply_sets(network: &mut Network, sets: &[String]) -> Result<(), Failure> {
    for s in sets {
        let bad = |why: &str| {
            Failure::input(anyhow!(
                "--set {s}: {why}; write KEY=VALUE with KEY one of L, o, g, G, O, S (optionally \
                 intra. or inter. before it) or ranks_per_node"
            ))
        };
        let (key, value) = s.split_once('=').ok_or_else(|| bad("no `=`"))?;
        let value: f64 = value
            .trim()
            .parse()
            .map_err(|_| bad("the value is not a number"))?;
        if !value.is_finite() || value < 0.0 {
            return Err(bad("the value must be a finite number, 0 or more"));
        }
        if key == "ranks_per_node" {
            network.ranks_per_node = value as u32;
            continue;
        }
        let (paths, name): (Vec<&mut LogGops>, &str) = match key.split_once('.') {
            Some(("intra", n)) => (vec![&mut network.intra], n),
            Some(("inter", n)) => (vec![&mut network.inter], n),
            Some(_) => return Err(bad("the path is `intra` or `inter`")),
            None => (vec![&mut network.intra, &mut network.inter], key),
        };
        for p in paths {
            match name {
                "L" => p.latency = value,
                "o" => p.o = value,
                "g" => p.g = value,
                "G" => p.gap_per_byte = value,
                "O" => p.overhead_per_byte = value,
                "S" => p.eager_limit = value as u64,
                _ => return Err(bad("unknown parameter")),
            }
        }
    }
    Ok(())
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// (predicted − measured) / measured, as a percentage; `None` for an empty measurement.
fn error_pct(predicted: u64, measured: u64) -> Option<f64> {
    (measured > 0).then(|| (predicted as f64 - measured as f64) / measured as f64 * 100.0)
}

fn predict(args: PredictArgs) -> Result<ExitCode, Failure> {
    let (mut network, model_name) = match (&args.network, args.preset.as_deref()) {
        (Some(path), _) => (read_network(path)?, path.display().to_string()),
        (None, Some("tcp")) => (Network::single(LogGops::TCP_LOOPBACK), "preset tcp".into()),
        _ => (
            Network::single(LogGops::SHARED_MEMORY),
            "preset shm".to_owned(),
        ),
    };
    apply_sets(&mut network, &args.set)?;
    network
        .validate()
        .map_err(|e| Failure::input(anyhow!("--set: {e}")))?;
    let loaded = gyr_sim::load(&args.traces).map_err(Failure::input)?;
    let programs = loaded.ranks.iter().map(|r| r.program.clone()).collect();
    let prediction = gyr_sim::simulate(programs, &network).map_err(Failure::input)?;

    let mut written = Vec::new();
    if let Some(prefix) = &args.out {
        for (m, p) in loaded.ranks.iter().zip(&prediction.ranks) {
            let path = PathBuf::from(format!("{}.{}.gyr", prefix.display(), p.rank));
            let file = std::fs::File::create(&path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            gyr_sim::output::write_prediction(std::io::BufWriter::new(file), m, p)
                .and_then(|mut w| w.flush())
                .with_context(|| format!("cannot write {}", path.display()))?;
            written.push(path);
        }
    }

    let measured_run = loaded
        .ranks
        .iter()
        .map(|r| r.measured.span_ns)
        .max()
        .unwrap_or(0);
    let out = std::io::stdout();
    let mut out = out.lock();
    if args.json {
        let ranks: Vec<_> = loaded
            .ranks
            .iter()
            .zip(&prediction.ranks)
            .map(|(m, p)| {
                json!({
                    "rank": p.rank,
                    "file": m.path,
                    "measured_ns": m.measured.span_ns,
                    "predicted_ns": p.end_ns,
                    "error_pct": error_pct(p.end_ns, m.measured.span_ns),
                    "measured_mpi_ns": m.measured.mpi_ns,
                    "predicted_mpi_ns": p.calls_ns,
                    "calls": m.measured.calls,
                    "finalized": m.measured.finalized,
                })
            })
            .collect();
        let v = json!({
            "model": model_name,
            "network": network,
            "ranks": ranks,
            "measured_ns": measured_run,
            "predicted_ns": prediction.makespan_ns,
            "error_pct": error_pct(prediction.makespan_ns, measured_run),
            "messages": prediction.messages,
            "events": prediction.events,
            "unfinished": prediction.unfinished,
            "warnings": loaded.warnings,
            "written": written,
        });
        writeln!(out, "{v}")?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{} ranks of job {}, model {model_name}",
        loaded.ranks.len(),
        loaded.ranks.first().map(|r| r.job.as_str()).unwrap_or("?")
    )?;
    writeln!(
        out,
        "{:>6} {:>13} {:>13} {:>8} {:>13} {:>13}",
        "rank", "measured ms", "predicted ms", "error", "MPI meas. ms", "MPI pred. ms"
    )?;
    for (m, p) in loaded.ranks.iter().zip(&prediction.ranks) {
        let err = error_pct(p.end_ns, m.measured.span_ns)
            .map(|e| format!("{e:+.1}%"))
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:>6} {:>13.3} {:>13.3} {:>8} {:>13.3} {:>13.3}{}",
            p.rank,
            ms(m.measured.span_ns),
            ms(p.end_ns),
            err,
            ms(m.measured.mpi_ns),
            ms(p.calls_ns),
            if m.measured.finalized {
                ""
            } else {
                "  (never reached MPI_Finalize)"
            }
        )?;
    }
    let err = error_pct(prediction.makespan_ns, measured_run)
        .map(|e| format!("{e:+.1}%"))
        .unwrap_or_else(|| "-".into());
    writeln!(
        out,
        "{:>6} {:>13.3} {:>13.3} {:>8}",
        "run",
        ms(measured_run),
        ms(prediction.makespan_ns),
        err
    )?;
    writeln!(
        out,
        "{} messages simulated ({} events)",
        prediction.messages, prediction.events
    )?;
    for u in &prediction.unfinished {
        writeln!(
            out,
            "rank {} could not finish: it waits for {} (a rank was killed, or its trace is cut off)",
            u.rank, u.waiting_for
        )?;
    }
    for w in &loaded.warnings {
        writeln!(out, "note: {w}")?;
    }
    for p in &written {
        writeln!(out, "wrote {}", p.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments `mpirun` needs here: running as root is refused unless allowed, and two ranks on
/// a one-core machine need oversubscription.
pub(crate) fn mpirun_base(mpirun: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(mpirun);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg("--oversubscribe");
    cmd
}

fn calibrate(args: CalibrateArgs) -> Result<ExitCode, Failure> {
    let btl = match args.btl.as_str() {
        "vader" | "sm" | "shm" => "vader",
        "tcp" => "tcp",
        other => {
            return Err(Failure::input(anyhow!(
                "--btl {other}: give `vader` (shared memory) or `tcp` (loopback TCP)"
            )));
        }
    };
    if args.max_bytes < 64 || args.reps == 0 {
        return Err(Failure::input(anyhow!(
            "--max-bytes must be 64 or more and --reps at least 1"
        )));
    }
    let dir = tempfile::tempdir()?;
    let source = dir.path().join("calibrate.c");
    std::fs::write(&source, gyr_sim::calibrate::PROGRAM)?;
    let binary = dir.path().join("calibrate");
    eprintln!("compiling the measuring program with {}", args.mpicc);
    let status = std::process::Command::new(&args.mpicc)
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .status()
        .map_err(|e| {
            Failure::input(anyhow!(
                "cannot run {}: {e}; install Open MPI's compiler wrapper (Debian: libopenmpi-dev) or name yours with --mpicc",
                args.mpicc
            ))
        })?;
    if !status.success() {
        return Err(Failure::from(anyhow!("{} failed ({status})", args.mpicc)));
    }
    eprintln!(
        "measuring {btl} on 2 ranks: ping-pong and streaming up to {} bytes, {} repetitions each",
        args.max_bytes, args.reps
    );
    let output = mpirun_base(&args.mpirun)
        .args(["-np", "2", "--mca", "btl"])
        .arg(format!("self,{btl}"))
        .arg(&binary)
        .arg(args.max_bytes.to_string())
        .arg(args.reps.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| {
            Failure::input(anyhow!(
                "cannot run {}: {e}; install Open MPI (Debian: openmpi-bin) or name the launcher with --mpirun",
                args.mpirun
            ))
        })?;
    if !output.status.success() {
        return Err(Failure::from(anyhow!(
            "the measuring program failed under {} ({})",
            args.mpirun,
            output.status
        )));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let measurements = gyr_sim::calibrate::parse(&text).map_err(|e| anyhow!("{e}"))?;
    let eager = std::process::Command::new("ompi_info")
        .args(["--parsable", "--level", "9", "--param", "btl", btl])
        .output()
        .ok()
        .and_then(|o| {
            gyr_sim::calibrate::eager_limit_from_ompi_info(&String::from_utf8_lossy(&o.stdout), btl)
        });
    let model = gyr_sim::calibrate::fit(&measurements, eager).map_err(|e| anyhow!("{e}"))?;
    let network = Network::single(model);
    let toml = format!(
        "# gyr sim calibrate --btl {btl}: LogGOPS fitted to ping-pong and streaming on this machine\n\
         # (L, o, g in ns; G, O in ns per byte; S in bytes; eager limit {}).\n{}",
        if eager.is_some() {
            "from ompi_info"
        } else {
            "found in the measurements"
        },
        toml::to_string(&network).map_err(|e| anyhow!("{e}"))?
    );
    match &args.output {
        Some(path) => {
            std::fs::write(path, &toml)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{toml}"),
    }
    eprintln!(
        "L = {:.0} ns, o = {:.0} ns, g = {:.0} ns, G = {:.4} ns/byte ({:.2} GB/s), O = {:.4} ns/byte, S = {} bytes",
        model.latency,
        model.o,
        model.g,
        model.gap_per_byte,
        if model.gap_per_byte + model.overhead_per_byte > 0.0 {
            1.0 / (model.gap_per_byte + model.overhead_per_byte)
        } else {
            f64::INFINITY
        },
        model.overhead_per_byte,
        model.eager_limit
    );
    if args.json {
        println!(
            "{}",
            json!({"btl": btl, "model": model, "measurements": measurements})
        );
    }
    Ok(ExitCode::SUCCESS)
}
