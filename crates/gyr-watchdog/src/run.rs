//! The watch-dog's loop: starts gyr (trace file or hub), registers the event types and the
//! steering objects, starts the program or finds the files of one already running, and polls
//! until the program ends (or, watching files, until a signal or `--until-idle`).
//!
//! # The `watched` steering object
//!
//! Read-only attributes: `state` (`idle`, `running`, `exited`, `crashed`, `stopped`, or
//! `files` when only files are watched), `pid`, `restarts`, `exit_status` (-1 while none),
//! `exit_signal` (0 when none), `lines_read`, `lines_unmatched`, `events`, `files`, `command`.
//! Actuators (run at the watch-dog's synch point, every poll):
//! - `restart(args: string)`: stop the program (if it runs) and start it again, each
//!   `--opt value`, `--opt=value` or `key=value` in `args` replacing the same option of the
//!   command line, else appended (`""` restarts it as it was);
//! - `stop()`, `start()`;
//! - `signal(name: string)`: `SIGUSR1`, `TERM`, `10`..., to the program's main process;
//! - `control(line: string)`: appends the line to the spec's `control_file`;
//! - `set_input(file: string, key: string, value: string)`: rewrites `key`'s line in one of
//!   the spec's `input_files` (any other file is refused).
//!
//! Watching files only (`--files`), the program is not the watch-dog's: `restart`, `stop`,
//! `start` and `signal` are refused.

use crate::parse::LineParser;
use crate::publish::{self, Publisher};
use crate::spec::{SourceKind, Spec};
use crate::supervise::{self, Ended, State, Supervisor};
use crate::tail::{FileSet, FileTail, Item, Watch};
use gyr::steer::{self, Actuator, AttrInfo, AttrType, Steerable};
use gyr_core::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The program and its arguments; empty to watch files only.
    pub command: Vec<String>,
    /// More files: `GLOB` (read as the program's stdout is: a log it is redirected into) or
    /// `NAME=GLOB` (the files of the spec's source NAME).
    pub files: Vec<String>,
    /// Where the program runs and relative globs are found.
    pub dir: PathBuf,
    /// The trace file; `None`: `GYR_TRACE`, else none when a hub is given, else
    /// `watchdog-<name>-<pid>.gyr` in `dir`.
    pub trace: Option<PathBuf>,
    /// The hub's gRPC address (`host:port`) to publish to.
    pub hub: Option<String>,
    /// The instance of stdout, stderr and files whose glob has no `{instance}`.
    pub instance: String,
    /// Follow only this instance's files.
    pub only: Option<String>,
    /// Do not copy the program's output to the watch-dog's.
    pub quiet: bool,
    /// Print lines no event took.
    pub show_unmatched: bool,
    /// Watching files only: end after this long without a new line.
    pub until_idle: Option<Duration>,
    /// After the program ends, keep watching (and serving `watched`) this long, so that a
    /// rule or a user can still restart it.
    pub linger: Duration,
}

/// How a watch ended.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// How the program's last run ended (none when watching files only).
    pub ended: Option<Ended>,
    /// The trace file written, if any.
    pub trace: Option<PathBuf>,
    /// Lines read.
    pub lines: u64,
    /// Lines no event took.
    pub unmatched: u64,
    /// Events produced.
    pub events: u64,
    /// Restarts of the program.
    pub restarts: u32,
    /// Events lost by gyr (rings full).
    pub lost: u64,
}

/// Why the watch-dog could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The arguments cannot be used.
    #[error("{0}")]
    Usage(String),
    /// gyr could not start.
    #[error("cannot start gyr: {0}")]
    Runtime(#[from] gyr::Error),
    /// The program could not be started.
    #[error("{0}")]
    Start(String),
}

/// The `watched` object's attributes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchedState {
    /// `idle`, `running`, `exited`, `crashed`, `stopped` or `files`.
    pub state: String,
    /// The program's pid (0 when not running).
    pub pid: u64,
    /// Restarts so far.
    pub restarts: u64,
    /// The last run's exit status (-1 while none).
    pub exit_status: i64,
    /// The signal that ended the last run (0 when none).
    pub exit_signal: i64,
    /// Lines read.
    pub lines_read: u64,
    /// Lines no event took.
    pub lines_unmatched: u64,
    /// Events produced.
    pub events: u64,
    /// Files followed.
    pub files: u64,
    /// The command line the next start uses.
    pub command: String,
}

const WATCHED_ATTRS: [(&str, AttrType, &str); 10] = [
    (
        "state",
        AttrType::Str,
        "idle, running, exited, crashed, stopped, or files (files only)",
    ),
    (
        "pid",
        AttrType::UInt,
        "the program's pid, 0 when it does not run",
    ),
    ("restarts", AttrType::UInt, "restarts so far"),
    (
        "exit_status",
        AttrType::Int,
        "the last run's exit status, -1 while none",
    ),
    (
        "exit_signal",
        AttrType::Int,
        "the signal that ended the last run, 0 when none",
    ),
    ("lines_read", AttrType::UInt, "lines read from every source"),
    ("lines_unmatched", AttrType::UInt, "lines no event took"),
    ("events", AttrType::UInt, "events produced"),
    ("files", AttrType::UInt, "files followed"),
    (
        "command",
        AttrType::Str,
        "the command line the next start uses",
    ),
];

impl Steerable for WatchedState {
    fn attributes() -> Vec<AttrInfo> {
        WATCHED_ATTRS
            .iter()
            .map(|(n, t, d)| {
                let mut a = AttrInfo::new(*n, *t);
                a.read_only = true;
                a.description = Some((*d).to_owned());
                a
            })
            .collect()
    }

    fn get_attr(&self, name: &str) -> Option<Value> {
        Some(match name {
            "state" => Value::Str(self.state.clone()),
            "pid" => Value::UInt(self.pid),
            "restarts" => Value::UInt(self.restarts),
            "exit_status" => Value::Int(self.exit_status),
            "exit_signal" => Value::Int(self.exit_signal),
            "lines_read" => Value::UInt(self.lines_read),
            "lines_unmatched" => Value::UInt(self.lines_unmatched),
            "events" => Value::UInt(self.events),
            "files" => Value::UInt(self.files),
            "command" => Value::Str(self.command.clone()),
            _ => return None,
        })
    }

    fn set_attr(&mut self, name: &str, _value: &Value) -> Result<(), String> {
        Err(format!(
            "watched.{name} is read-only: use the actuators to act"
        ))
    }
}

type Shared = Arc<Mutex<Option<Supervisor>>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Option<Supervisor>> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

const FILES_ONLY: &str = "the watch-dog follows files only (--files): it did not start the program, so it cannot control it; run the program under `gyr watchdog --spec SPEC -- COMMAND` to";

fn with_program<T>(
    sup: &Shared,
    what: &str,
    f: impl FnOnce(&mut Supervisor) -> Result<T, String>,
) -> Result<T, String> {
    match lock(sup).as_mut() {
        Some(s) => f(s),
        None => Err(format!("{FILES_ONLY} {what} it")),
    }
}

fn register_watched(
    spec: &Arc<Spec>,
    sup: &Shared,
    dir: &Path,
) -> Result<steer::Steered<WatchedState>, steer::SteerError> {
    let w = steer::register_described(
        "watched",
        Some(
            "the watched program: its state, and actuators to restart, stop, signal and reconfigure it",
        ),
        WatchedState::default(),
    )?;
    let s = sup.clone();
    w.add_actuator(
        Actuator::new("restart", move |_: &mut WatchedState, a| {
            let changes: String = a.get(0)?;
            with_program(&s, "restart", |p| p.restart(&changes)).map(Value::Str)
        })
        .param("args", AttrType::Str)
        .description("restart the program, each --opt value, --opt=value or key=value replacing the same in its command line (else appended)"),
    )?;
    let s = sup.clone();
    w.add_actuator(
        Actuator::new("stop", move |_: &mut WatchedState, _| {
            with_program(&s, "stop", |p| p.stop()).map(|e| {
                Value::Str(match (e.status, e.signal) {
                    (Some(c), _) => format!("stopped: exit status {c}"),
                    (None, Some(sig)) => format!("stopped by {}", supervise::signal_name(sig)),
                    _ => "stopped".into(),
                })
            })
        })
        .description("stop the program: SIGTERM to its process group, SIGKILL after the grace"),
    )?;
    let s = sup.clone();
    w.add_actuator(
        Actuator::new("start", move |_: &mut WatchedState, _| {
            with_program(&s, "start", |p| p.start())
                .map(|pid| Value::Str(format!("started as pid {pid}")))
        })
        .description("start the program again after a stop or its end"),
    )?;
    let s = sup.clone();
    w.add_actuator(
        Actuator::new("signal", move |_: &mut WatchedState, a| {
            let name: String = a.get(0)?;
            let sig = supervise::signal_number(&name)?;
            with_program(&s, "signal", |p| p.signal(sig))
                .map(|_| Value::Str(format!("sent {}", supervise::signal_name(sig))))
        })
        .param("name", AttrType::Str)
        .description("send a signal (SIGUSR1, TERM, 10...) to the program"),
    )?;
    let control = spec.options.control_file.as_ref().map(|c| dir.join(c));
    w.add_actuator(
        Actuator::new("control", move |_: &mut WatchedState, a| {
            let line: String = a.get(0)?;
            let Some(path) = &control else {
                return Err("the spec names no control file: add `control_file = \"FILE\"` under [watchdog]".into());
            };
            supervise::append_control(path, &line)
                .map(|_| Value::Str(format!("appended to {}", path.display())))
        })
        .param("line", AttrType::Str)
        .description("append a line to the spec's control file, which the program reads"),
    )?;
    let allowed: Vec<(String, PathBuf)> = spec
        .options
        .input_files
        .iter()
        .map(|f| (f.display().to_string(), dir.join(f)))
        .collect();
    w.add_actuator(
        Actuator::new("set_input", move |_: &mut WatchedState, a| {
            let (file, key, value): (String, String, String) = (a.get(0)?, a.get(1)?, a.get(2)?);
            let wanted = std::fs::canonicalize(&file).ok();
            let found = allowed.iter().find(|(name, path)| {
                *name == file
                    || wanted.is_some() && std::fs::canonicalize(path).ok() == wanted
            });
            let Some((_, path)) = found else {
                return Err(format!(
                    "`{file}` is not one of the spec's input_files ({}): the watch-dog changes no other file",
                    if allowed.is_empty() {
                        "none are listed".to_owned()
                    } else {
                        allowed.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
                    }
                ));
            };
            supervise::rewrite_input(path, &key, &value)
                .map(|old| Value::Str(format!("{key}: {old} -> {value} in {}", path.display())))
        })
        .param("file", AttrType::Str)
        .param("key", AttrType::Str)
        .param("value", AttrType::Str)
        .description("rewrite `key = value` in one of the spec's input files"),
    )?;
    Ok(w)
}

/// The file globs to follow: the spec's file sources, with `--files` replacing or adding.
pub(crate) fn watches(spec: &Spec, files: &[String]) -> Result<Vec<Watch>, Error> {
    let mut globs: Vec<(usize, String, bool)> = spec
        .sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.kind {
            SourceKind::Files { glob, from_end } => Some((i, glob.clone(), *from_end)),
            _ => None,
        })
        .collect();
    for f in files {
        let named = f
            .split_once('=')
            .and_then(|(n, g)| spec.source(n).filter(|&i| i > 1).map(|i| (i, g)));
        match named {
            Some((i, g)) => {
                globs.retain(|(s, _, _)| *s != i);
                globs.push((i, g.to_owned(), false));
            }
            None => globs.push((0, f.clone(), false)),
        }
    }
    globs
        .into_iter()
        .map(|(source, g, from_end)| {
            crate::glob::Glob::new(&g)
                .map(|glob| Watch {
                    glob,
                    source,
                    from_end,
                })
                .map_err(|e| Error::Usage(format!("--files {g}: {e}")))
        })
        .collect()
}

/// A followed file and the parser of its lines.
pub(crate) struct Tailed {
    pub(crate) tail: FileTail,
    pub(crate) parser: LineParser,
    pub(crate) source: String,
}

/// Reads what is new in every followed file; returns whether any line came.
pub(crate) fn poll_files(
    tails: &mut [Tailed],
    publisher: &Publisher,
    buf: &mut Vec<u8>,
    finish: bool,
) -> bool {
    let before = publisher.counters.lines.load(Ordering::Relaxed);
    for t in tails.iter_mut() {
        let Tailed {
            tail,
            parser,
            source,
        } = t;
        let path = tail.path.display().to_string();
        let instance = tail.instance.clone();
        let cut_before = tail.cut();
        let mut on = |item: Item<'_>| match item {
            Item::Line(l) => publisher.line(parser, source, l),
            Item::File(ev) => {
                match ev {
                    crate::tail::FileEvent::Truncated => {
                        publisher
                            .counters
                            .truncations
                            .fetch_add(1, Ordering::Relaxed);
                        parser.reset();
                    }
                    crate::tail::FileEvent::Rotated => {
                        publisher.counters.rotations.fetch_add(1, Ordering::Relaxed);
                        parser.reset();
                    }
                    _ => {}
                }
                publisher.file_event(&path, ev.name(), source, &instance);
            }
        };
        if finish {
            tail.finish(buf, &mut on);
        } else {
            tail.poll(buf, &mut on);
        }
        publisher
            .counters
            .cut
            .fetch_add(tail.cut() - cut_before, Ordering::Relaxed);
    }
    publisher.counters.lines.load(Ordering::Relaxed) != before
}

/// The default trace file's name: `watchdog-<name>-<pid>.gyr`.
pub fn default_trace_name(spec: &Spec, command: &[String]) -> String {
    let name = spec
        .options
        .name
        .clone()
        .or_else(|| {
            command
                .first()
                .and_then(|c| Path::new(c).file_name())
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "files".to_owned());
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("watchdog-{name}-{}.gyr", std::process::id())
}

/// Runs the watch-dog until the program ends (or, watching files only, until SIGINT, SIGTERM
/// or `until_idle`). One per process: it starts the process's gyr runtime.
pub fn run(spec: Spec, opts: Options) -> Result<Outcome, Error> {
    let spec = Arc::new(spec);
    if opts.command.is_empty()
        && opts.files.is_empty()
        && !spec
            .sources
            .iter()
            .any(|s| matches!(s.kind, SourceKind::Files { .. }))
    {
        return Err(Error::Usage(
            "nothing to watch: give the program after `--` (gyr watchdog --spec S -- PROGRAM ARGS), or files with --files GLOB".into(),
        ));
    }
    let watches = watches(&spec, &opts.files)?;
    supervise::install_signal_handlers();

    let mut builder = gyr::Builder::new()
        .policy(gyr::Policy::Drop)
        .with_default_env()
        .handle_signals(false);
    let env_trace = std::env::var_os("GYR_TRACE").filter(|v| !v.is_empty());
    let hub = opts
        .hub
        .clone()
        .or_else(|| std::env::var("GYR_HUB").ok().filter(|v| !v.is_empty()));
    let trace = match (&opts.trace, &env_trace, &hub) {
        (Some(t), _, _) => Some(t.clone()),
        (None, Some(t), _) => Some(PathBuf::from(t)),
        (None, None, Some(_)) => None,
        (None, None, None) => Some(opts.dir.join(default_trace_name(&spec, &opts.command))),
    };
    if let Some(t) = &trace {
        builder = builder.trace_file(t);
    }
    if let Some(h) = &opts.hub {
        builder = builder.hub(
            h.clone(),
            std::env::var("GYR_HUB_TOKEN")
                .ok()
                .filter(|v| !v.is_empty()),
        );
    }
    let rt = builder.start()?;

    let publisher = Arc::new(Publisher::new(spec.clone(), opts.show_unmatched));
    if let Err(e) = publish::register_design(&spec) {
        eprintln!("gyr watchdog: the `design` object is not available: {e}");
    }
    let sup: Shared = Arc::new(Mutex::new(None));
    if !opts.command.is_empty() {
        *lock(&sup) = Some(Supervisor::new(
            opts.command.clone(),
            &opts.dir,
            spec.clone(),
            publisher.clone(),
            &opts.instance,
            !opts.quiet,
        ));
    }
    let watched = match register_watched(&spec, &sup, &opts.dir) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("gyr watchdog: the `watched` object is not available: {e}");
            None
        }
    };
    if let Some(s) = lock(&sup).as_mut()
        && let Err(e) = s.start()
    {
        let _ = rt.shutdown();
        return Err(Error::Start(e));
    }

    // The files' events carry the program's run too (0 when the watch-dog did not start it).
    let run_number = lock(&sup)
        .as_ref()
        .map(|s| s.run_number.clone())
        .unwrap_or_default();
    let mut files = FileSet::new(&opts.dir, watches, &opts.instance, opts.only.clone());
    let mut tails: Vec<Tailed> = Vec::new();
    let mut buf = Vec::new();
    let mut last_scan: Option<Instant> = None;
    let mut last_line = Instant::now();
    let mut unmatched_seen = 0u64;
    let mut last_unmatched = Instant::now();
    let mut auto_restarts = 0u32;
    // When the program ended and the watch-dog lingers for a restart.
    let mut ended_at: Option<Instant> = None;
    let files_only = opts.command.is_empty();
    let poll = spec.options.poll;
    loop {
        steer::sync_point("watchdog");
        if !files.is_empty() && last_scan.is_none_or(|t| t.elapsed() >= spec.options.scan) {
            for tail in files.scan() {
                let source = spec.sources[tail.source].name.clone();
                tails.push(Tailed {
                    parser: LineParser::new(spec.clone(), tail.source, &tail.instance)
                        .with_run(run_number.clone()),
                    tail,
                    source,
                });
            }
            last_scan = Some(Instant::now());
        }
        if poll_files(&mut tails, &publisher, &mut buf, false) {
            last_line = Instant::now();
        }
        let (signals, _) = supervise::signals_received();
        let mut done = false;
        {
            let mut guard = lock(&sup);
            match guard.as_mut() {
                Some(s) => {
                    if let Some(ended) = s.poll() {
                        let crashed = ended.signal.is_some();
                        if crashed && signals == 0 && auto_restarts < spec.options.restart_on_crash
                        {
                            auto_restarts += 1;
                            eprintln!(
                                "gyr watchdog: the program crashed ({}); starting it again ({auto_restarts} of {})",
                                ended.signal.map(supervise::signal_name).unwrap_or_default(),
                                spec.options.restart_on_crash
                            );
                            if let Err(e) = s.start() {
                                eprintln!("gyr watchdog: {e}");
                                done = true;
                            }
                        } else if signals > 0 || opts.linger.is_zero() {
                            done = true;
                        } else {
                            ended_at = Some(Instant::now());
                        }
                    } else if s.state == State::Stopped && signals > 0 {
                        done = true;
                    }
                    if let Some(at) = ended_at {
                        if s.state == State::Running {
                            // Restarted while lingering: watch it as before.
                            ended_at = None;
                        } else if at.elapsed() >= opts.linger || signals > 0 {
                            done = true;
                        }
                    }
                }
                None => {
                    if signals > 0 {
                        done = true;
                    }
                    if let Some(idle) = opts.until_idle
                        && last_line.elapsed() >= idle
                    {
                        done = true;
                    }
                }
            }
        }
        let c = &publisher.counters;
        let unmatched = c.unmatched.load(Ordering::Relaxed);
        if unmatched != unmatched_seen
            && (done || last_unmatched.elapsed() >= spec.options.unmatched_every)
        {
            publisher.unmatched_event(unmatched - unmatched_seen);
            unmatched_seen = unmatched;
            last_unmatched = Instant::now();
        }
        if let Some(w) = &watched {
            let guard = lock(&sup);
            let now = WatchedState {
                state: match guard.as_ref() {
                    Some(s) => s.state.name().to_owned(),
                    None => "files".to_owned(),
                },
                pid: guard.as_ref().and_then(|s| s.pid()).unwrap_or(0) as u64,
                restarts: guard.as_ref().map(|s| s.restarts).unwrap_or(0) as u64,
                exit_status: guard
                    .as_ref()
                    .and_then(|s| s.last_end)
                    .and_then(|e| e.status)
                    .unwrap_or(-1) as i64,
                exit_signal: guard
                    .as_ref()
                    .and_then(|s| s.last_end)
                    .and_then(|e| e.signal)
                    .unwrap_or(0) as i64,
                lines_read: c.lines.load(Ordering::Relaxed),
                lines_unmatched: unmatched,
                events: c.events.load(Ordering::Relaxed),
                files: tails.len() as u64,
                command: guard
                    .as_ref()
                    .map(|s| supervise::join_words(&s.command))
                    .unwrap_or_default(),
            };
            drop(guard);
            if *w.read() != now {
                *w.write() = now;
            }
        }
        if done {
            break;
        }
        std::thread::sleep(poll);
    }
    // The program is done: what its files still hold, partial last lines included.
    poll_files(&mut tails, &publisher, &mut buf, true);
    let unmatched = publisher.counters.unmatched.load(Ordering::Relaxed);
    if unmatched != unmatched_seen {
        publisher.unmatched_event(unmatched - unmatched_seen);
    }
    let (ended, restarts) = {
        let mut guard = lock(&sup);
        match guard.as_mut() {
            Some(s) => {
                s.shutdown();
                (s.last_end, s.restarts)
            }
            None => (None, 0),
        }
    };
    if let Some(w) = watched {
        w.unregister();
    }
    let summary = rt.shutdown();
    let _ = files_only;
    let c = &publisher.counters;
    Ok(Outcome {
        ended,
        trace,
        lines: c.lines.load(Ordering::Relaxed),
        unmatched: c.unmatched.load(Ordering::Relaxed),
        events: c.events.load(Ordering::Relaxed),
        restarts,
        lost: summary.lost,
    })
}
