//! The `gyr` command: runs the demo and inspects trace files and sensor specs.
//!
//! Exit codes: 0 success; 1 the command failed for another reason; 2 the input was bad (a
//! missing, foreign or corrupt trace file, an invalid spec, wrong arguments). A closed pipe
//! (`gyr trace dump f | head`) is success.

mod demo;
mod spec_cmd;
mod trace_cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// On-line monitoring and steering for parallel programs.
#[derive(Debug, Parser)]
#[command(name = "gyr", version, about, long_about = None, propagate_version = true)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the instrumented heat-diffusion example with a live summary, writing a trace.
    Demo(demo::DemoArgs),
    /// Inspect trace files.
    #[command(subcommand)]
    Trace(TraceCommand),
    /// Check a sensor specification file (TOML) and print the event types it defines.
    Spec {
        /// The spec file.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// Per-type counts and rates, lost events, duration, per-thread summary, perturbation.
    Stats(trace_cmd::StatsArgs),
    /// Print records, filtered by type, thread and time.
    Dump(trace_cmd::DumpArgs),
}

/// An error with the exit code it should produce.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl Failure {
    /// Bad input: exit code 2.
    pub(crate) fn input(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 2,
            error: error.into(),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure { code: 1, error }
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure {
            code: 1,
            error: error.into(),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Command::Demo(a) => demo::run(a),
        Command::Trace(TraceCommand::Stats(a)) => trace_cmd::stats(a),
        Command::Trace(TraceCommand::Dump(a)) => trace_cmd::dump(a),
        Command::Spec { file } => spec_cmd::check(&file),
    };
    match result {
        Ok(code) => code,
        Err(f) => {
            if is_broken_pipe(&f.error) {
                return ExitCode::SUCCESS;
            }
            eprintln!("gyr: error: {:#}", f.error);
            ExitCode::from(f.code)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dump_filters() {
        let a = Args::try_parse_from([
            "gyr",
            "trace",
            "dump",
            "f.gyr",
            "--type",
            "work_load",
            "--thread",
            "3",
            "--from",
            "1.5s",
            "--to",
            "2s",
            "--json",
        ])
        .unwrap();
        let Command::Trace(TraceCommand::Dump(d)) = a.command else {
            panic!("dump")
        };
        assert_eq!(d.types, vec!["work_load"]);
        assert_eq!(d.thread, Some(3));
        assert_eq!(d.from, Some(trace_cmd::Time(1_500_000_000)));
        assert!(d.json);
        assert!(Args::try_parse_from(["gyr", "trace", "dump", "f", "--from", "soon"]).is_err());
    }
}
