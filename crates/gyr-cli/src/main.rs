#![doc = include_str!("../README.md")]
//!
//! One module per command (`demo`, `hub_cmd` (also `trace view`), `trace_cmd` (stats, dump), `trace_clock` (clock, and `--sync`),
//! `trace_convert` (info, export, import; `otlp_send` sends OTLP to a collector), `spec_cmd`, `gen_cmd`, `steer_cmd` for the one-shot steering
//! commands, `script_cmd` (the engine is `gyr-rules`), `rules_cmd` (the expert system's `rules test`
//! and `rules check`), `attach`, `run_cmd`, `watchdog_cmd`, `ensemble_cmd`); `client` and
//! `show` are how every command talks to programs and prints their answers.
//!
//! Exit codes: 0 success; 1 the command failed for another reason; 2 the input was bad (a
//! missing, foreign or corrupt trace file, an invalid spec, wrong arguments). A closed pipe
//! (`gyr trace dump f | head`) is success. `gyr run` exits with its program's status (see
//! `run_cmd` for the rest).

mod api_cmd;
mod attach;
mod client;
mod demo;
mod demo_heat;
mod demo_npss;
mod ensemble_cmd;
mod gen_cmd;
mod hub_cmd;
mod otlp_send;
mod rules_cmd;
mod run_cmd;
mod script_cmd;
mod show;
mod sim_cmd;
mod spec_cmd;
mod steer_cmd;
mod trace_clock;
mod trace_cmd;
mod trace_convert;
mod watchdog_cmd;

use clap::{Parser, Subcommand};
use gyr_client::command;
use gyr_proto::v1::control_request::Action;
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
    /// The main demo: the hub's web UI over a steerable molecular-dynamics program (started
    /// imbalanced) and an N-body program; `--headless --json` measures it without a browser;
    /// `gyr demo heat` is the terminal demo; `gyr demo npss` the NPSS example (watch-dogs,
    /// rules, zooming).
    Demo(demo::DemoArgs),
    /// One of the demo's programs (started by `gyr demo`).
    #[command(hide = true)]
    DemoProgram(demo::ProgramArgs),
    /// One of examples/npss's programs, without gyr (started by `gyr demo npss`):
    /// `gyr npss-program compressor|cycle ARGS...`.
    #[command(hide = true)]
    NpssProgram {
        /// compressor or cycle.
        which: String,
        /// Its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run the central monitor: a web UI over every gyr program of this user.
    Hub(hub_cmd::HubArgs),
    /// Inspect trace files.
    #[command(subcommand)]
    Trace(TraceCommand),
    /// What clients written without gyr need of its gRPC API (see docs/client-guide.md).
    #[command(subcommand)]
    Api(ApiCommand),
    /// Check a sensor specification file (TOML) and print the event types it defines.
    Spec {
        /// The spec file.
        file: PathBuf,
    },
    /// Generate typed sensor code for C, C++ or Fortran from a sensor specification file.
    Gen(gen_cmd::GenArgs),
    /// List the running gyr programs of this user, or the programs a hub watches.
    Ps {
        /// The hub's gRPC address (host:port) instead of this machine's announcements.
        #[arg(long)]
        hub: Option<String>,
        /// The hub's token, if it listens beyond this machine (default: $GYR_TOKEN).
        #[arg(long)]
        token: Option<String>,
    },
    /// List the alerts a hub keeps (raised by its rules, or `gyr.alert` events), oldest first.
    Alerts {
        /// The hub's gRPC address (host:port).
        #[arg(long)]
        hub: String,
        /// The hub's token, if it listens beyond this machine (default: $GYR_TOKEN).
        #[arg(long)]
        token: Option<String>,
        /// Only this program's.
        #[arg(long)]
        pid: Option<u32>,
        /// Only the newest N.
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        limit: u32,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// List a program's steering objects, attributes (with values), actuators and functions.
    Ls(steer_cmd::Target),
    /// Read attributes: `object.attribute`, or `object` for all of them.
    Get {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// The attributes.
        #[arg(required = true)]
        paths: Vec<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Write attributes, all together or not at all: `gyr set PID solver.dt 0.02`.
    Set {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// `object.attribute VALUE` pairs.
        #[arg(
            required = true,
            value_name = "PATH VALUE",
            allow_negative_numbers = true
        )]
        pairs: Vec<String>,
    },
    /// Run an actuator at the program's next synch point, or call a registered function.
    Call {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// `object.actuator` or a function's name.
        operation: String,
        /// Its arguments.
        #[arg(allow_negative_numbers = true)]
        args: Vec<String>,
        /// How long to wait for a synch point, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u32,
    },
    /// Show a program's run state and counters.
    Status(steer_cmd::Target),
    /// Stall the program at its next synch point.
    Pause(steer_cmd::Target),
    /// Let a paused program go on.
    Resume(steer_cmd::Target),
    /// Let a paused program pass N synch points, then pause again.
    Step {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// How many synch points (1 or more).
        #[arg(default_value_t = 1)]
        n: u64,
    },
    /// Let the program run until a condition holds at a synch point, then pause:
    /// `gyr run-until PID "nbody.step >= 1000"` (comparisons joined by `and` / `or`).
    RunUntil {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// The condition.
        condition: String,
    },
    /// List sensors, or switch them on/off and set their rate (all, a --type or an --instance).
    Sensors {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// Only this event type.
        #[arg(long = "type", value_name = "TYPE")]
        type_name: Option<String>,
        /// Only this registered instance.
        #[arg(long, value_name = "NAME")]
        instance: Option<String>,
        #[command(subcommand)]
        change: Option<steer_cmd::SensorChange>,
    },
    /// Print the steering log: who changed what, when, old value -> new value.
    Log {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// Keep printing new entries.
        #[arg(long, short)]
        follow: bool,
    },
    /// Print live events (all types, or the ones named).
    Watch {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// Event types to show (default: all).
        types: Vec<String>,
        /// Only this thread (repeatable).
        #[arg(long)]
        thread: Vec<u64>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Run a steering script (rhai) against a program: `gyr script PID plan.rhai`.
    Script {
        #[command(flatten)]
        target: steer_cmd::Target,
        /// The script file (`-` for standard input).
        file: PathBuf,
    },
    /// Steer a program interactively: a command line with history and completion, the
    /// program's objects, and live events and steering changes as they happen.
    Attach(steer_cmd::Target),
    /// Expert-system rules: `gyr rules test rules.toml run.gyr` replays traces through them.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Run an unmodified C or C++ program with its pthread events recorded:
    /// `gyr run --threads [--trace FILE] -- PROGRAM ARGS...`, or an MPI job with every rank's
    /// MPI calls and messages recorded: `gyr run --mpi -- mpirun -np 4 ./app` (exits with the
    /// program's status).
    Run(run_cmd::RunArgs),
    /// Watch an unmodified program's output (stdout, stderr, files) as typed events by a spec,
    /// and steer it (restart with changed arguments, stop, signal) through the `watched`
    /// object: `gyr watchdog --spec S.toml -- PROGRAM ARGS...` (exits with its status);
    /// `--files GLOB` follows a program already running; `--check S.toml [--sample FILE]`.
    Watchdog(watchdog_cmd::WatchdogArgs),
    /// Run a program over a grid of parameters (NPSS's zooming), every member watched by a
    /// spec and rules, failed, hung and diverged members retried once, the results made into
    /// a map (left-out points filled) and cached: `gyr ensemble --spec S.toml --grid
    /// speed=0.6,1.0 --grid back_pressure=1.2:1.8:4 --result mass_flow,recovery --from
    /// result.dat --out compressor.map -- PROGRAM --speed {speed} ...`.
    Ensemble(ensemble_cmd::EnsembleArgs),
    /// Trace-driven performance prediction (SESAME's MPI-SIM): replay a traced MPI run on a
    /// LogGOPS network model (`gyr sim predict`), or measure the model here (`gyr sim
    /// calibrate`).
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
}

#[derive(Debug, Subcommand)]
enum RulesCommand {
    /// Replay trace files through a rules file: every firing (time, program, rule, why,
    /// actions), then each rule's counters.
    Test(rules_cmd::TestArgs),
    /// Load a rules file and list what each rule watches, or say where it is wrong.
    Check(rules_cmd::CheckArgs),
    /// The rules a program runs (`GYR_RULES=FILE`, and its event/action repository):
    /// `gyr rules list PID`; or a hub's (`gyr hub --rules FILE`): `gyr rules list --hub ADDR`.
    /// With their state: fired, last firing, errors, and a newer version of the file refused.
    List {
        /// The program: its pid, host:port of its TCP listener, or PID@HUB.
        #[arg(conflicts_with = "hub", required_unless_present = "hub")]
        program: Option<String>,
        /// The hub's gRPC address (host:port), for the rules the hub runs.
        #[arg(long)]
        hub: Option<String>,
        /// The hub's token, if it listens beyond this machine (default: $GYR_TOKEN).
        #[arg(long)]
        token: Option<String>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ApiCommand {
    /// Write gyr.v1's compiled .proto files (an encoded FileDescriptorSet, with comments), for
    /// tools that take one: `grpcurl -protoset gyr.binpb ...`.
    DescriptorSet {
        /// Where to write it (`-`: standard output, unless a terminal).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum TraceCommand {
    /// Per-type counts and rates, lost events, duration, per-thread summary, perturbation.
    Stats(trace_cmd::StatsArgs),
    /// Print records, filtered by type, thread and time.
    Dump(trace_cmd::DumpArgs),
    /// What a file holds: header, schemas, threads, time range, losses, and whether it ended
    /// cleanly or was cut off.
    Info(trace_convert::InfoArgs),
    /// Each process's clock offset and drift from the messages between them (`gyr.msg.send`
    /// and `gyr.msg.recv`), and the receives that come before their sends, before and after:
    /// `gyr trace clock rank*.gyr`.
    Clock(trace_clock::ClockArgs),
    /// Write traces (one process each) as Perfetto, Chrome JSON or SDDF, as tables (CSV,
    /// Parquet: a directory, one file per event type), or as OpenTelemetry spans (OTLP/JSON,
    /// or sent to a collector): `gyr trace export --format perfetto run.gyr -o run.pftrace`,
    /// `gyr trace export --format csv run.gyr -o run-tables`, `gyr trace export --format otlp
    /// --endpoint http://127.0.0.1:4317 run.gyr`.
    Export(trace_convert::ExportArgs),
    /// Make a gyr trace of an SDDF or PICL file.
    Import(trace_convert::ImportArgs),
    /// Open recordings in the web UI, loaded whole: the thread life-time view, charts and
    /// statistics of the run.
    View(hub_cmd::ViewArgs),
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
        Command::DemoProgram(a) => demo::program(a),
        Command::NpssProgram { which, args } => demo_npss::program(&which, &args),
        Command::Hub(a) => hub_cmd::run(a),
        Command::Trace(TraceCommand::Stats(a)) => trace_cmd::stats(a),
        Command::Trace(TraceCommand::Dump(a)) => trace_cmd::dump(a),
        Command::Trace(TraceCommand::Clock(a)) => trace_clock::clock(a),
        Command::Trace(TraceCommand::Info(a)) => trace_convert::info(a),
        Command::Trace(TraceCommand::Export(a)) => trace_convert::export(a),
        Command::Trace(TraceCommand::Import(a)) => trace_convert::import(a),
        Command::Trace(TraceCommand::View(a)) => hub_cmd::view(a),
        Command::Api(ApiCommand::DescriptorSet { output }) => api_cmd::descriptor_set(&output),
        Command::Spec { file } => spec_cmd::check(&file),
        Command::Gen(a) => gen_cmd::run(a),
        Command::Ps { hub: None, .. } => steer_cmd::ps(),
        Command::Ps {
            hub: Some(hub),
            token,
        } => steer_cmd::ps_hub(&hub, token),
        Command::Alerts {
            hub,
            token,
            pid,
            limit,
            json,
        } => steer_cmd::alerts(&hub, token, pid, limit, json),
        Command::Ls(t) => steer_cmd::ls(t),
        Command::Get {
            target,
            paths,
            json,
        } => steer_cmd::get(target, paths, json),
        Command::Set { target, pairs } => steer_cmd::set(target, pairs),
        Command::Call {
            target,
            operation,
            args,
            timeout_ms,
        } => steer_cmd::call(target, operation, args, timeout_ms),
        Command::Status(t) => steer_cmd::control(t, None),
        Command::Pause(t) => steer_cmd::control(t, Some(command::control_request(Action::Pause))),
        Command::Resume(t) => steer_cmd::control(t, Some(command::control_request(Action::Resume))),
        Command::Step { target, n } => command::step_request(n)
            .map_err(Failure::from)
            .and_then(|r| steer_cmd::control(target, Some(r))),
        Command::RunUntil { target, condition } => command::until_request(&condition)
            .map_err(Failure::from)
            .and_then(|r| steer_cmd::control(target, Some(r))),
        Command::Sensors {
            target,
            type_name,
            instance,
            change,
        } => steer_cmd::sensors(target, change, type_name, instance),
        Command::Log { target, follow } => steer_cmd::log(target, follow),
        Command::Watch {
            target,
            types,
            thread,
            json,
            limit,
        } => steer_cmd::watch(target, types, thread, json, limit),
        Command::Script { target, file } => script_cmd::run_file(target, &file),
        Command::Attach(t) => attach::run(t),
        Command::Rules(RulesCommand::Test(a)) => rules_cmd::test(a),
        Command::Rules(RulesCommand::Check(a)) => rules_cmd::check(a),
        Command::Rules(RulesCommand::List {
            program,
            hub,
            token,
            json,
        }) => steer_cmd::rules(program, hub, token, json),
        Command::Run(a) => run_cmd::run(a),
        Command::Sim(c) => sim_cmd::run(c),
        Command::Watchdog(a) => watchdog_cmd::run(a),
        Command::Ensemble(a) => ensemble_cmd::run(a),
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

    #[test]
    fn parses_clock_and_sync() {
        let a = Args::try_parse_from([
            "gyr",
            "trace",
            "clock",
            "r0.gyr",
            "r1.gyr",
            "--reference",
            "1",
            "--min-latency",
            "2us",
            "--json",
        ])
        .unwrap();
        assert!(matches!(a.command, Command::Trace(TraceCommand::Clock(_))));
        assert!(Args::try_parse_from(["gyr", "trace", "clock"]).is_err());
        let a = Args::try_parse_from(["gyr", "trace", "dump", "a.gyr", "b.gyr", "--sync"]).unwrap();
        let Command::Trace(TraceCommand::Dump(d)) = a.command else {
            panic!("dump")
        };
        assert!(d.sync);
        assert_eq!(d.files.len(), 2);
        let a = Args::try_parse_from([
            "gyr", "trace", "export", "-f", "chrome", "a", "b", "-o", "c", "--sync",
        ])
        .unwrap();
        assert!(matches!(a.command, Command::Trace(TraceCommand::Export(_))));
    }

    #[test]
    fn parses_export_and_import() {
        let a = Args::try_parse_from([
            "gyr",
            "trace",
            "export",
            "--format",
            "chrome",
            "a.gyr",
            "b.gyr",
            "-o",
            "out.json",
            "--ordered",
        ])
        .unwrap();
        assert!(matches!(a.command, Command::Trace(TraceCommand::Export(_))));
        let e = Args::try_parse_from(["gyr", "trace", "export", "--format", "svg", "a", "-o", "b"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("perfetto, chrome, sddf-ascii, sddf-binary"),
            "{e}"
        );
        assert!(
            Args::try_parse_from([
                "gyr", "trace", "import", "-f", "picl", "x.trf", "-o", "x.gyr"
            ])
            .is_ok()
        );
    }
}
