//! `gyr watchdog`: an unmodified program's output (stdout, stderr, files) as typed gyr events
//! by a spec (`gyr-watchdog`), the program steered through the `watched` object; `--check`
//! tries a spec, on a sample file with `--sample`.
//!
//! Exit status: the program's last run's (128 + the signal's number when a signal ended it);
//! watching files only, 0; 2 for a bad spec or bad arguments, 1 when gyr or the program cannot
//! start.

use crate::Failure;
use crate::show::printable;
use anyhow::anyhow;
use clap::Args;
use gyr_core::Value;
use gyr_watchdog::{LineParser, Spec};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub(crate) struct WatchdogArgs {
    /// The spec: event types, sources and parsers (TOML; see docs/watchdog.md).
    #[arg(long, value_name = "SPEC.toml", required_unless_present = "check")]
    spec: Option<PathBuf>,
    /// Check a spec and print its event types; with --sample, the events a file gives.
    #[arg(long, value_name = "SPEC.toml", conflicts_with = "spec")]
    check: Option<PathBuf>,
    /// With --check: parse this file and print the events it gives.
    #[arg(long, value_name = "FILE", requires = "check")]
    sample: Option<PathBuf>,
    /// With --sample: the source the file is read as (default: stdout).
    #[arg(long, value_name = "NAME", requires = "sample")]
    source: Option<String>,
    /// Write the trace to FILE (default without a hub: watchdog-<name>-<pid>.gyr here).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Publish to the hub at this gRPC address (host:port) instead of writing a trace.
    #[arg(long, value_name = "ADDR")]
    hub: Option<String>,
    /// Follow files of a program already running: GLOB (read like stdout) or NAME=GLOB (the
    /// spec's source NAME).
    #[arg(long, value_name = "GLOB", num_args = 1..)]
    files: Vec<String>,
    /// Watching files only: end after SECS without a new line (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    until_idle: Option<f64>,
    /// After the program ends, keep watching for SECS more, so that a rule (the hub's) or a
    /// user can still restart it (default: 3 with --hub or GYR_HUB, else 0).
    #[arg(long, value_name = "SECS")]
    linger: Option<f64>,
    /// The instance of stdout, stderr and files without `{instance}` in their glob.
    #[arg(long, value_name = "NAME", default_value = "")]
    instance: String,
    /// Follow only this instance's files.
    #[arg(long, value_name = "INSTANCE")]
    only: Option<String>,
    /// Do not copy the program's output to the terminal.
    #[arg(long, short)]
    quiet: bool,
    /// Print lines no event took (on stderr).
    #[arg(long)]
    show_unmatched: bool,
    /// Where the program runs and relative globs are found (default: here).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<String>,
}

pub(crate) fn run(args: WatchdogArgs) -> Result<ExitCode, Failure> {
    if let Some(path) = &args.check {
        return check(
            path,
            args.sample.as_ref(),
            args.source.as_deref(),
            args.show_unmatched,
        );
    }
    let Some(spec_path) = &args.spec else {
        return Err(Failure::input(anyhow!("give the spec: --spec SPEC.toml")));
    };
    let spec = Spec::load(spec_path).map_err(Failure::input)?;
    if !args.command.is_empty() && args.until_idle.is_some() {
        return Err(Failure::input(anyhow!(
            "--until-idle is for watching files only: with a program, the watch-dog ends when it ends"
        )));
    }
    let until_idle = match args.until_idle {
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(Failure::input(anyhow!(
                "--until-idle {s}: give seconds, more than 0"
            )));
        }
        None => None,
    };
    let linger = match args.linger {
        Some(s) if s.is_finite() && (0.0..1e6).contains(&s) => Duration::from_secs_f64(s),
        Some(s) => {
            return Err(Failure::input(anyhow!(
                "--linger {s}: give seconds, 0 or more"
            )));
        }
        None if args.hub.is_some() || std::env::var_os("GYR_HUB").is_some() => {
            Duration::from_secs(3)
        }
        None => Duration::ZERO,
    };
    let dir = match &args.dir {
        Some(d) => std::path::absolute(d)?,
        None => std::env::current_dir()?,
    };
    let opts = gyr_watchdog::Options {
        command: args.command,
        files: args.files,
        dir,
        trace: args.trace.map(std::path::absolute).transpose()?,
        hub: args.hub,
        instance: args.instance,
        only: args.only,
        quiet: args.quiet,
        show_unmatched: args.show_unmatched,
        until_idle,
        linger,
    };
    let program = opts.command.first().cloned();
    let out = gyr_watchdog::run(spec, opts).map_err(|e| match e {
        gyr_watchdog::Error::Usage(_) => Failure::input(e),
        e => Failure {
            code: 1,
            error: e.into(),
        },
    })?;
    let how = match out.ended {
        Some(e) => match (e.status, e.signal) {
            (Some(c), _) => format!(
                "{} exited with status {c}",
                program.as_deref().unwrap_or("the program")
            ),
            (None, Some(s)) => format!(
                "{} was ended by {}",
                program.as_deref().unwrap_or("the program"),
                gyr_watchdog::supervise::signal_name(s)
            ),
            _ => "the program ended".to_owned(),
        },
        None => "done".to_owned(),
    };
    let trace = match &out.trace {
        Some(t) => format!("; trace in {}", t.display()),
        None => String::new(),
    };
    let lost = if out.lost > 0 {
        format!(", {} lost (gyr's rings were full)", out.lost)
    } else {
        String::new()
    };
    eprintln!(
        "gyr watchdog: {how}; {} lines, {} events, {} unmatched{lost}{}{trace}",
        out.lines,
        out.events,
        out.unmatched,
        if out.restarts > 0 {
            format!(", {} restarts", out.restarts)
        } else {
            String::new()
        }
    );
    let code = out.ended.map(|e| e.code()).unwrap_or(0);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

fn show_value(v: &Value) -> String {
    match v {
        Value::Str(s) => format!("{:?}", printable(s)),
        Value::Array(items) if items.len() > 8 => {
            let head: Vec<String> = items[..4].iter().map(|x| x.to_string()).collect();
            format!(
                "[{}, ... {} more, {}]",
                head.join(", "),
                items.len() - 5,
                items[items.len() - 1]
            )
        }
        other => other.to_string(),
    }
}

fn check(
    path: &PathBuf,
    sample: Option<&PathBuf>,
    source: Option<&str>,
    show_unmatched: bool,
) -> Result<ExitCode, Failure> {
    let spec = Arc::new(Spec::load(path).map_err(Failure::input)?);
    let mut out = std::io::stdout().lock();
    let w = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    };
    if sample.is_none() {
        for e in &spec.events {
            let fields: Vec<String> = e
                .schema_fields()
                .iter()
                .map(|f| format!("{}: {}", f.name, f.ty))
                .collect();
            let sources: Vec<&str> = e
                .sources
                .iter()
                .map(|&s| spec.sources[s].name.as_str())
                .collect();
            w(writeln!(
                out,
                "{} {{ {} }}  {} from {}{}",
                e.name,
                fields.join(", "),
                e.rule_name(),
                sources.join(", "),
                e.severity
                    .map(|s| format!(", {}", s.name()))
                    .unwrap_or_default()
            ))?;
        }
        for s in spec.sources.iter().skip(2) {
            if let gyr_watchdog::spec::SourceKind::Files { glob, .. } = &s.kind {
                w(writeln!(out, "source {}: {glob}", s.name))?;
            }
        }
        for d in spec.design_points() {
            w(writeln!(
                out,
                "design {}.{}: {}{}{}",
                d.event,
                d.field,
                d.design
                    .map(|x| x.to_string())
                    .unwrap_or_else(|| "-".into()),
                match (d.min, d.max) {
                    (None, None) => String::new(),
                    (a, b) => format!(
                        ", range {} ..= {}",
                        a.map(|x| x.to_string()).unwrap_or_default(),
                        b.map(|x| x.to_string()).unwrap_or_default()
                    ),
                },
                d.unit.map(|u| format!(" {u}")).unwrap_or_default()
            ))?;
        }
        w(writeln!(
            out,
            "{}: {} event types, valid",
            path.display(),
            spec.events.len()
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    let sample = sample.unwrap_or(path);
    let source_name = source.unwrap_or("stdout");
    let Some(src) = spec.source(source_name) else {
        return Err(Failure::input(anyhow!(
            "--source {source_name}: the spec has no such source; its sources: {}",
            spec.sources
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let file = std::fs::File::open(sample)
        .map_err(|e| Failure::input(anyhow!("cannot read {}: {e}", sample.display())))?;
    let mut parser = LineParser::new(spec.clone(), src, "");
    let mut reader = file;
    let mut buf = vec![0u8; 256 << 10];
    let mut lines = gyr_watchdog::tail::Lines::new();
    let mut result = Ok(());
    let mut on_line = |line: &str| {
        if result.is_err() {
            return;
        }
        let matched = parser.line(line, &mut |event, values| {
            let e = &spec.events[event];
            let shown: Vec<String> = e
                .fields
                .iter()
                .zip(values)
                .map(|(f, v)| format!("{}={}", f.name, show_value(v)))
                .collect();
            if result.is_ok() {
                result = w(writeln!(out, "{} {}", e.name, shown.join(" ")));
            }
        });
        if !matched && show_unmatched && result.is_ok() {
            result = w(writeln!(out, "unmatched: {}", printable(line)));
        }
    };
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| Failure::input(anyhow!("cannot read {}: {e}", sample.display())))?;
        if n == 0 {
            break;
        }
        lines.feed(&buf[..n], &mut on_line);
    }
    lines.flush(&mut on_line);
    result?;
    let st = parser.stats();
    eprintln!(
        "{}: {} lines, {} events, {} unmatched{}",
        sample.display(),
        st.lines,
        st.events,
        st.unmatched,
        if st.broken_blocks > 0 {
            format!(", {} blocks cut short", st.broken_blocks)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
