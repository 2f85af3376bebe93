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
//! - `gyr sim validate -- PROGRAM ARGS` is the validation harness: it traces the program on
//!   shared memory (`gyr run --mpi`), predicts it on loopback TCP (a model given, or calibrated
//!   first), runs it on TCP as well, and reports each rank's and the whole run's error, beside
//!   the error of taking the shared-memory run itself as the prediction.
//!
//! A model file is TOML: `ranks_per_node`, and `[intra]` and `[inter]` tables with `L`, `o`,
//! `g`, `G`, `O` (ns, ns per byte) and `S` (bytes), as `calibrate` writes it.

use crate::Failure;
use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use gyr_sim::{LogGops, Network, mpi};
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
    /// Check predictions against reality: trace a run on shared memory, predict it on loopback
    /// TCP, run it there too, and report per-rank and whole-run error: `gyr sim validate
    /// --np 4 -- ./halo`.
    Validate(ValidateArgs),
}

/// Arguments of `gyr sim validate`.
#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Ranks.
    #[arg(long, default_value_t = 4)]
    np: u32,
    /// The TCP model (as `gyr sim calibrate --btl tcp` writes it); measured first when not
    /// given.
    #[arg(long, value_name = "FILE")]
    network: Option<PathBuf>,
    /// Keep the traces and predictions here (a temporary directory otherwise).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The MPI launcher.
    #[arg(long, default_value = "mpirun")]
    mpirun: String,
    /// The MPI C compiler wrapper (for the calibration).
    #[arg(long, default_value = "mpicc")]
    mpicc: String,
    /// One JSON object.
    #[arg(long)]
    json: bool,
    /// The MPI program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<std::ffi::OsString>,
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
        SimCommand::Validate(a) => validate(a),
    }
}

/// The transport `--btl` names.
fn btl(name: &str) -> Result<&'static str, Failure> {
    mpi::btl_name(name).ok_or_else(|| {
        Failure::input(anyhow!(
            "--btl {name}: give `vader` (shared memory) or `tcp` (loopback TCP)"
        ))
    })
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
                "--set {s}: {why}; write KEY=VALUE with KEY one of L, o, g, G, O, S, C (optionally \
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
                "C" => p.connect_ns = value,
                "Cx" => p.connect_crossing_ns = Some(value),
                _ => return Err(bad("unknown parameter")),
            }
            // The measured sizes would hide a change of the line's L, o, G or O.
            if matches!(name, "L" | "o" | "G" | "O") && !p.measured.is_empty() {
                p.measured.clear();
                eprintln!(
                    "note: --set {key}: the sizes the calibration measured are set aside, so the \
                     prediction follows the LogGOPS line (L, o, g, G, O, S) alone"
                );
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

fn describe(model: &LogGops) -> String {
    format!(
        "L = {:.0} ns, o = {:.0} ns, g = {:.0} ns, G = {:.4} ns/byte ({:.2} GB/s), O = {:.4} ns/byte, S = {} bytes, C = {:.0} ns{}",
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
        model.eager_limit,
        model.connect_ns,
        match model.connect_crossing_ns {
            Some(c) => format!(" (Cx = {c:.0} ns when both send first)"),
            None => String::new(),
        }
    ) + match (model.measured.first(), model.measured.last()) {
        (Some(a), Some(b)) => format!(
            "; {} sizes measured ({} to {} bytes) give the times between them",
            model.measured.len(),
            a.bytes,
            b.bytes
        ),
        _ => String::new(),
    }
    .as_str()
}

fn calibrate(args: CalibrateArgs) -> Result<ExitCode, Failure> {
    let btl = btl(&args.btl)?;
    eprintln!(
        "measuring {btl} on 2 ranks: ping-pong and streaming up to {} bytes, {} repetitions each",
        args.max_bytes, args.reps
    );
    let (model, measurements, from_ompi_info) = mpi::measure(&mpi::Measure {
        btl,
        max_bytes: args.max_bytes,
        reps: args.reps,
        mpirun: &args.mpirun,
        mpicc: &args.mpicc,
    })
    .map_err(|e| Failure::input(anyhow!("{e}")))?;
    let network = Network::single(model.clone());
    let toml = format!(
        "# gyr sim calibrate --btl {btl}: LogGOPS fitted to ping-pong and streaming on this machine\n\
         # (L, o, g, C in ns; G, O in ns per byte; S in bytes; eager limit {}).\n\
         # The measured sizes (bytes, the send call's ns, half the round trip's ns) give the\n\
         # times between them; the line, beyond them.\n{}",
        if from_ompi_info {
            "ompi_info's, less ob1's header"
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
    eprintln!("{}", describe(&model));
    if args.json {
        println!(
            "{}",
            json!({"btl": btl, "model": model, "measurements": measurements})
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `command` on `np` ranks over `btl` under `gyr run --mpi`, traces as `dir/name.RANK.gyr`;
/// returns the trace files.
fn traced_run(
    args: &ValidateArgs,
    btl: &str,
    name: &str,
    dir: &Path,
) -> Result<Vec<PathBuf>, Failure> {
    let gyr = std::env::current_exe().context("cannot find the gyr binary itself")?;
    let pattern = dir.join(format!("{name}.%r.gyr"));
    let launcher = mpi::mpirun(&args.mpirun);
    eprintln!("running on {btl}: {} ranks", args.np);
    let status = std::process::Command::new(gyr)
        .args(["run", "--mpi", "--trace"])
        .arg(&pattern)
        .arg("--")
        .arg(launcher.get_program())
        .args(launcher.get_args())
        .args(["-np", &args.np.to_string()])
        .args(mpi::btl_args(btl))
        .args(&args.command)
        .stdout(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        return Err(Failure::from(anyhow!(
            "the run on {btl} failed ({status}); run it alone with `gyr run --mpi -- mpirun ...` to see why"
        )));
    }
    let files: Vec<PathBuf> = (0..args.np)
        .map(|r| dir.join(format!("{name}.{r}.gyr")))
        .collect();
    if let Some(missing) = files.iter().find(|f| !f.exists()) {
        return Err(Failure::from(anyhow!(
            "the run on {btl} wrote no {}: is the program an MPI program linked dynamically?",
            missing.display()
        )));
    }
    Ok(files)
}

fn validate(args: ValidateArgs) -> Result<ExitCode, Failure> {
    if args.np < 2 {
        return Err(Failure::input(anyhow!("--np must be 2 or more")));
    }
    let temp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir()?;
            temp.path().to_owned()
        }
    };
    let network = match &args.network {
        Some(path) => read_network(path)?,
        None => {
            eprintln!("measuring loopback TCP first (give --network to skip)");
            let (model, _, _) = mpi::measure(&mpi::Measure {
                btl: "tcp",
                max_bytes: 4 << 20,
                reps: 20,
                mpirun: &args.mpirun,
                mpicc: &args.mpicc,
            })
            .map_err(|e| Failure::input(anyhow!("{e}")))?;
            eprintln!("TCP model: {}", describe(&model));
            Network::single(model)
        }
    };
    let shm = traced_run(&args, "vader", "shm", &dir)?;
    let shm = gyr_sim::load(&shm).map_err(Failure::input)?;
    let prediction = gyr_sim::simulate(
        shm.ranks.iter().map(|r| r.program.clone()).collect(),
        &network,
    )
    .map_err(Failure::input)?;
    for (m, p) in shm.ranks.iter().zip(&prediction.ranks) {
        let path = dir.join(format!("predicted.{}.gyr", p.rank));
        let file = std::fs::File::create(&path)?;
        gyr_sim::output::write_prediction(std::io::BufWriter::new(file), m, p)
            .and_then(|mut w| w.flush())?;
    }
    let tcp = traced_run(&args, "tcp", "tcp", &dir)?;
    let tcp = gyr_sim::load(&tcp).map_err(Failure::input)?;

    let whole =
        |ranks: &[gyr_sim::RankTrace]| ranks.iter().map(|r| r.measured.span_ns).max().unwrap_or(0);
    let (shm_run, tcp_run) = (whole(&shm.ranks), whole(&tcp.ranks));
    let rows: Vec<_> = shm
        .ranks
        .iter()
        .zip(&tcp.ranks)
        .zip(&prediction.ranks)
        .map(|((s, t), p)| {
            json!({
                "rank": p.rank,
                "shm_measured_ns": s.measured.span_ns,
                "tcp_measured_ns": t.measured.span_ns,
                "tcp_predicted_ns": p.end_ns,
                "error_pct": error_pct(p.end_ns, t.measured.span_ns),
                "unchanged_error_pct": error_pct(s.measured.span_ns, t.measured.span_ns),
            })
        })
        .collect();
    let summary = json!({
        "np": args.np,
        "network": network,
        "ranks": rows,
        "shm_measured_ns": shm_run,
        "tcp_measured_ns": tcp_run,
        "tcp_predicted_ns": prediction.makespan_ns,
        "error_pct": error_pct(prediction.makespan_ns, tcp_run),
        "unchanged_error_pct": error_pct(shm_run, tcp_run),
        "max_rank_error_pct": rows.iter().filter_map(|r| r["error_pct"].as_f64()).map(f64::abs).fold(0.0, f64::max),
        "unfinished": prediction.unfinished,
        "warnings": shm.warnings,
        "dir": args.dir,
    });
    let out = std::io::stdout();
    let mut out = out.lock();
    if args.json {
        writeln!(out, "{summary}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let pct = |v: &serde_json::Value| {
        v.as_f64()
            .map(|e| format!("{e:+.1}%"))
            .unwrap_or_else(|| "-".into())
    };
    writeln!(
        out,
        "{:>6} {:>12} {:>12} {:>14} {:>8} {:>16}",
        "rank", "shm ms", "tcp ms", "tcp pred. ms", "error", "if unchanged"
    )?;
    for r in &rows {
        let ns = |k: &str| r[k].as_u64().unwrap_or(0);
        writeln!(
            out,
            "{:>6} {:>12.3} {:>12.3} {:>14.3} {:>8} {:>16}",
            r["rank"].as_u64().unwrap_or(0),
            ms(ns("shm_measured_ns")),
            ms(ns("tcp_measured_ns")),
            ms(ns("tcp_predicted_ns")),
            pct(&r["error_pct"]),
            pct(&r["unchanged_error_pct"])
        )?;
    }
    writeln!(
        out,
        "{:>6} {:>12.3} {:>12.3} {:>14.3} {:>8} {:>16}",
        "run",
        ms(shm_run),
        ms(tcp_run),
        ms(prediction.makespan_ns),
        pct(&summary["error_pct"]),
        pct(&summary["unchanged_error_pct"])
    )?;
    writeln!(
        out,
        "error: the prediction against the run on TCP; if unchanged: the shared-memory run taken as the prediction"
    )?;
    for u in &prediction.unfinished {
        writeln!(
            out,
            "rank {} could not finish: it waits for {}",
            u.rank, u.waiting_for
        )?;
    }
    if let Some(d) = &args.dir {
        writeln!(
            out,
            "traces in {}: shm.RANK.gyr, tcp.RANK.gyr, predicted.RANK.gyr",
            d.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
