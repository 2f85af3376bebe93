//! Ensembles (NPSS's zooming): many runs of a slow high-fidelity program over a grid of
//! parameters, watched together, their results made into a map for a faster model, and the
//! map cached under a key of its inputs.
//!
//! [`prepare`] checks a request ([`Options`]) and computes its cache key; [`Prepared::cached`]
//! finds the map in the cache; [`Prepared::run`] runs it:
//! - one member per grid point ([`grid`]), each in a directory of its own, its command the
//!   template with `{axis}`, `{dir}`, `{member}`, `{instance}` and `{cwd}` replaced, then
//!   changed by the overrides that select it; at most `jobs` run at once;
//! - each member is supervised as `gyr watchdog` supervises its program ([`Supervisor`]: a
//!   process group of its own, its pipes and the spec's files parsed into events that gyr
//!   publishes, `instance` being the member's name, so a hub shows them side by side);
//! - one rules [`Engine`] on this thread sees every member's events, each member a program of
//!   its own (its windows, facts and refraction apart); a firing that asks to `restart(args)`
//!   or `stop()` a member marks it *diverged* and ends it; `control`, `signal` and
//!   `set_input` are carried out on the member; alerts are reported;
//! - an attempt ends *ok* (exit status 0 and every result read), *failed* (another status, a
//!   signal, or a result missing), *hung* (no line on any of its outputs for `timeout`, or
//!   longer than `max_time` in all: its process group is ended) or *diverged*; a member that
//!   did not end ok is tried once more, with the rules' `restart` arguments applied when they
//!   gave some, and left out if that fails too;
//! - the map is the grid's points with their results, left-out points filled from their
//!   neighbours ([`fill`]), written to `out` and kept in the cache ([`cache`]).

pub mod cache;
pub mod fill;
pub mod grid;

use crate::parse::LineParser;
use crate::publish::{Publisher, Tap, Tapped};
use crate::run::{Tailed, poll_files, watches};
use crate::spec::Spec;
use crate::supervise::{self, Ended, Supervisor, join_words};
use crate::tail::FileSet;
use grid::{Grid, Override, ResultSource, Results};
use gyr_core::{Schema, Value};
use gyr_rules::rules::{Action, Engine, EventRef, RuleSet, Severity};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TrySendError, sync_channel};
use std::time::{Duration, Instant};

/// Most members running at once.
pub const MAX_JOBS: usize = 256;
/// Events queued for the rules at most; past it they are dropped for the rules (and counted),
/// never waited for.
pub const EVENT_QUEUE: usize = 1 << 16;
/// The largest result file read.
pub const MAX_RESULT_BYTES: u64 = 1 << 20;
/// Attempts per member: the first and one retry.
pub const ATTEMPTS: usize = 2;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The watch-dog spec the members' output is read by.
    pub spec: PathBuf,
    /// The rules file run over every member's events.
    pub rules: Option<PathBuf>,
    /// The axes, each as `--grid` takes it.
    pub grid: Vec<String>,
    /// What each member gives: names, or comma-separated lists of them.
    pub results: Vec<String>,
    /// The file of `key = value` lines, in each member's directory, results are read from.
    pub from: Option<String>,
    /// Changes of some members' commands: `AXIS=VALUE,...: ARGS`.
    pub overrides: Vec<String>,
    /// The command template: the program and its arguments.
    pub command: Vec<String>,
    /// Members running at once.
    pub jobs: usize,
    /// A member printing no line for this long is hung.
    pub timeout: Duration,
    /// A member running longer than this in all is hung.
    pub max_time: Option<Duration>,
    /// Where the map is written.
    pub out: PathBuf,
    /// The cache directory (`None`: no cache).
    pub cache: Option<PathBuf>,
    /// Run even if the cache has the map (the new map replaces it).
    pub no_cache: bool,
    /// The hub to publish the members' events to.
    pub hub: Option<String>,
    /// The trace file to write the members' events to.
    pub trace: Option<PathBuf>,
    /// Keep the members' directories here (`DIR/member-N`); else in a temporary directory
    /// removed at the end.
    pub keep: Option<PathBuf>,
    /// Where relative paths are taken from, and `{cwd}`.
    pub cwd: PathBuf,
}

/// Why an ensemble could not run, or could not give a map.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be run as given.
    #[error("{0}")]
    Usage(String),
    /// Something failed on the way (a directory, the map file).
    #[error("{0}")]
    Failed(String),
    /// SIGINT, SIGTERM or SIGHUP: the members were stopped.
    #[error("interrupted: the members still running were stopped, no map was written")]
    Interrupted,
    /// gyr could not start.
    #[error("cannot start gyr: {0}")]
    Runtime(#[from] gyr::Error),
}

/// How one attempt of a member ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Exit status 0, every result read.
    Ok,
    /// Another exit status, a signal, or a result missing.
    Failed,
    /// No output for the timeout, or over the time limit: ended.
    Hung,
    /// The rules asked to restart or stop it: ended.
    Diverged,
}

impl Verdict {
    /// `ok`, `failed`, `hung` or `diverged`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Failed => "failed",
            Verdict::Hung => "hung",
            Verdict::Diverged => "diverged",
        }
    }
}

/// One attempt of a member.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// How it ended.
    pub verdict: Verdict,
    /// Why, in words.
    pub why: String,
    /// How long it ran.
    pub seconds: f64,
    /// Its command line.
    pub command: String,
}

/// What became of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its first attempt gave its results.
    Ok,
    /// Its retry did.
    RetriedOk,
    /// Neither did: its point was filled, or the map not built.
    LeftOut,
}

impl Status {
    /// `ok`, `retried ok` or `left out`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::RetriedOk => "retried ok",
            Status::LeftOut => "left out",
        }
    }
}

/// One member's account.
#[derive(Debug, Clone)]
pub struct MemberReport {
    /// Its name (its grid values).
    pub name: String,
    /// What became of it.
    pub status: Status,
    /// Its attempts.
    pub attempts: Vec<Attempt>,
    /// Its results (`None`: left out).
    pub results: Option<Vec<f64>>,
    /// How its point was filled, when it was left out.
    pub filled: Option<String>,
    /// The last alert the rules raised for it.
    pub last_alert: Option<String>,
    /// Its directory, when kept.
    pub dir: Option<PathBuf>,
}

/// What an ensemble gave.
#[derive(Debug, Clone)]
pub struct Report {
    /// The cache key.
    pub key: String,
    /// The map file.
    pub out: PathBuf,
    /// The results' names.
    pub results: Vec<String>,
    /// Every member, in grid order.
    pub members: Vec<MemberReport>,
    /// Why the map could not be built (then no map was written).
    pub map_error: Option<String>,
    /// What became of the cache: stored, or why not.
    pub cache_note: Option<String>,
    /// Events the rules did not see (their queue was full).
    pub rules_missed: u64,
    /// Events gyr lost (its rings were full).
    pub lost: u64,
    /// Firings' actions an ensemble does not carry out (`set`, `call`, `sensor`, `start`).
    pub ignored_actions: u64,
    /// How long it took.
    pub seconds: f64,
}

/// A change an [`Observer`] is told of.
#[derive(Debug, Clone, Copy)]
pub enum Update<'a> {
    /// An attempt started.
    Started {
        /// The member's index.
        member: usize,
        /// Its name.
        name: &'a str,
        /// 1 for the first attempt, 2 for the retry.
        attempt: usize,
        /// Its command line.
        command: &'a str,
    },
    /// A running member's progress changed.
    Progress {
        /// The member's index.
        member: usize,
        /// Its name.
        name: &'a str,
        /// Its latest iteration.
        iter: Option<u64>,
        /// Its latest residual: the field's name and value.
        residual: Option<(&'a str, f64)>,
    },
    /// An attempt ended.
    Ended {
        /// The member's index.
        member: usize,
        /// Its name.
        name: &'a str,
        /// Which attempt.
        attempt: usize,
        /// How it ended.
        verdict: Verdict,
        /// Why.
        why: &'a str,
        /// Whether it is tried again.
        retry: bool,
        /// Its results, when ok.
        results: Option<&'a [f64]>,
    },
    /// The rules raised an alert for a member.
    Alert {
        /// The member's name.
        name: &'a str,
        /// How bad.
        severity: Severity,
        /// What.
        message: &'a str,
    },
    /// The counts changed.
    Tally(Tally),
}

/// The ensemble's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Members in all.
    pub members: usize,
    /// Members done (ok or left out).
    pub done: usize,
    /// Members running.
    pub running: usize,
    /// Attempts that did not end ok.
    pub failed: usize,
    /// Retries started.
    pub retried: usize,
    /// Members left out.
    pub left_out: usize,
}

/// Told of every change, on the ensemble's thread, so a display can follow.
pub trait Observer {
    /// Something changed.
    fn update(&mut self, u: Update<'_>);
}

/// A request checked and ready to run.
pub struct Prepared {
    opts: Options,
    spec: Arc<Spec>,
    rules: Option<RuleSet>,
    grid: Grid,
    results: Results,
    overrides: Vec<Override>,
    command: Vec<String>,
    program: cache::ProgramId,
    key: String,
    /// The event type, iteration field and residual field shown as progress.
    progress: Option<(usize, usize, usize)>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("members", &self.grid.len())
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

fn read_limited(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, Error> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Usage(format!("cannot read the {what} {}: {e}", path.display())))?;
    if meta.len() > max {
        return Err(Error::Usage(format!(
            "the {what} {} has {} bytes, more than {max}",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path)
        .map_err(|e| Error::Usage(format!("cannot read the {what} {}: {e}", path.display())))
}

/// The program of a command: a path (made absolute: members run in their own directories),
/// else found on `PATH`.
fn resolve_program(program: &str, cwd: &Path) -> Result<PathBuf, Error> {
    let found = if program.contains('/') {
        let p = cwd.join(program);
        p.is_file().then_some(p)
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
    };
    found.ok_or_else(|| {
        Error::Usage(format!(
            "cannot find the program `{program}`: {}",
            if program.contains('/') {
                "no such file (a relative path is taken from the current directory)".to_owned()
            } else {
                "it is not on PATH; give its path (e.g. ./target/release/".to_owned()
                    + program
                    + ")"
            }
        ))
    })
}

/// The spec's event type whose progress is shown: the first with a field that has a design
/// point (the residual) and an integer field named `iter`, `iteration` or `step`.
fn progress_fields(spec: &Spec) -> Option<(usize, usize, usize)> {
    let design = spec.design_points();
    spec.events.iter().enumerate().find_map(|(e, def)| {
        let iter = def.fields.iter().position(|f| {
            ["iter", "iteration", "iterations", "step", "it"]
                .contains(&f.name.to_ascii_lowercase().as_str())
                && f.ty.is_numeric()
        })?;
        let res = def.fields.iter().position(|f| {
            f.ty.is_numeric()
                && design
                    .iter()
                    .any(|d| d.event == def.name && d.field == f.name && d.design.is_some())
        })?;
        Some((e, iter, res))
    })
}

/// Checks a request: the spec, the rules, the grid, the results, the command and its
/// placeholders; computes its cache key.
pub fn prepare(opts: Options) -> Result<Prepared, Error> {
    let usage = Error::Usage;
    let spec_bytes = read_limited(&opts.spec, crate::spec::MAX_SPEC_BYTES as u64, "spec")?;
    let spec = Spec::load(&opts.spec).map_err(|e| usage(e.to_string()))?;
    let rules_bytes = match &opts.rules {
        Some(r) => Some(read_limited(
            r,
            gyr_rules::rules::MAX_FILE_BYTES as u64,
            "rules file",
        )?),
        None => None,
    };
    let rules = match &opts.rules {
        Some(r) => Some(RuleSet::load(r).map_err(|e| usage(e.to_string()))?),
        None => None,
    };
    let axes = opts
        .grid
        .iter()
        .map(|g| grid::parse_axis(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)?;
    let grid = Grid::new(axes).map_err(usage)?;
    let overrides = opts
        .overrides
        .iter()
        .map(|o| Override::parse(o, &grid))
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)?;
    let results = Results::new(&opts.results, opts.from.as_deref(), &spec).map_err(usage)?;
    if opts.command.is_empty() {
        return Err(usage(
            "no command: give the program after `--`, with {axis} placeholders, e.g. -- npss-compressor --speed {speed} --back_pressure {back_pressure}".into(),
        ));
    }
    if opts.jobs == 0 || opts.jobs > MAX_JOBS {
        return Err(usage(format!("--jobs {}: give 1 to {MAX_JOBS}", opts.jobs)));
    }
    if opts.timeout.is_zero() {
        return Err(usage("--timeout: give seconds, more than 0".into()));
    }
    // Every placeholder is known, and every axis is used.
    let known = |n: &str| grid.axes.iter().any(|a| a.name == n) || grid::BUILT_IN.contains(&n);
    let words: Vec<&str> = opts
        .command
        .iter()
        .map(String::as_str)
        .chain(overrides.iter().map(|o| o.args.as_str()))
        .collect();
    let mut used = Vec::new();
    for w in &words {
        grid::substitute(w, &|n: &str| known(n).then(String::new)).map_err(|e| {
            usage(format!(
                "{e}: the placeholders are the grid's axes ({}) and {}",
                grid.axes
                    .iter()
                    .map(|a| format!("{{{}}}", a.name))
                    .collect::<Vec<_>>()
                    .join(", "),
                grid::BUILT_IN
                    .iter()
                    .map(|b| format!("{{{b}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        used.extend(grid::placeholders(w));
    }
    for a in &grid.axes {
        if !used.contains(&a.name) {
            return Err(usage(format!(
                "the grid's axis `{0}` appears nowhere in the command, so every member would run the same: pass it, e.g. --{0} {{{0}}}",
                a.name
            )));
        }
    }
    let program_path = resolve_program(&opts.command[0], &opts.cwd)?;
    let program = cache::ProgramId::of(&program_path).map_err(|e| {
        usage(format!(
            "cannot read the program {}: {e}",
            program_path.display()
        ))
    })?;
    let mut command = opts.command.clone();
    if opts.command[0].contains('/') {
        command[0] = program_path.display().to_string();
    }
    if let Some(parent) = opts.out.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        return Err(usage(format!(
            "--out {}: the directory {} does not exist",
            opts.out.display(),
            parent.display()
        )));
    }
    let key = cache::key(&cache::KeyInputs {
        command: &opts.command,
        grid: &grid,
        overrides: &opts.overrides,
        results: &results.names,
        from: results.from.as_deref(),
        spec: &spec_bytes,
        rules: rules_bytes.as_deref(),
        program: &program,
    });
    Ok(Prepared {
        progress: progress_fields(&spec),
        spec: Arc::new(spec),
        rules,
        grid,
        results,
        overrides,
        command,
        program,
        key,
        opts,
    })
}

/// A member's state on the ensemble's thread.
struct Member {
    name: String,
    coords: Vec<usize>,
    dir: PathBuf,
    sup: Option<Supervisor>,
    files: FileSet,
    tails: Vec<Tailed>,
    last_scan: Option<Instant>,
    running: bool,
    done: bool,
    /// The run whose end is being classified, when it ended.
    ended: Option<Ended>,
    attempts: Vec<Attempt>,
    attempt_started: Instant,
    /// What the rules asked of the current run: `Some(args)` to restart, `Some(None)` to stop.
    remedy: Option<Option<String>>,
    iter: Option<u64>,
    residual: Option<f64>,
    progress_dirty: bool,
    field_results: Vec<Option<f64>>,
    results: Option<Vec<f64>>,
    last_alert: Option<String>,
}

/// One event for the rules and the progress, from a reader thread.
struct Msg {
    member: usize,
    run: u32,
    type_id: gyr_core::TypeId,
    t_ns: u64,
    values: Vec<Value>,
}

impl Prepared {
    /// The cache key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The grid.
    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The program the members run.
    pub fn program(&self) -> &Path {
        &self.program.path
    }

    /// The map in the cache, unless `no_cache` or no cache.
    pub fn cached(&self) -> Option<cache::Hit> {
        if self.opts.no_cache {
            return None;
        }
        let dir = self.opts.cache.as_ref()?;
        cache::Cache { dir: dir.clone() }.lookup(&self.key)
    }

    /// Copies the cached map to the output.
    pub fn use_cached(&self, hit: &cache::Hit) -> Result<(), Error> {
        let text = std::fs::read(&hit.map).map_err(|e| {
            Error::Failed(format!(
                "cannot read the cached map {}: {e}",
                hit.map.display()
            ))
        })?;
        cache::write_atomically(&self.opts.out, &text).map_err(|e| {
            Error::Failed(format!(
                "cannot write the map to {}: {e}",
                self.opts.out.display()
            ))
        })
    }

    fn member_command(
        &self,
        m: usize,
        coords: &[usize],
        dir: &Path,
    ) -> Result<Vec<String>, String> {
        let name = self.grid.name(m);
        let lookup = |n: &str| -> Option<String> {
            match n {
                "dir" => Some(dir.display().to_string()),
                "member" => Some((m + 1).to_string()),
                "instance" => Some(name.clone()),
                "cwd" => Some(self.opts.cwd.display().to_string()),
                _ => {
                    let k = self.grid.axes.iter().position(|a| a.name == n)?;
                    Some(self.grid.axes[k].values[coords[k]].text.clone())
                }
            }
        };
        let mut cmd = self
            .command
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    Ok(w.clone())
                } else {
                    grid::substitute(w, &lookup)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        for o in self.overrides.iter().filter(|o| o.selects(coords)) {
            let args = grid::substitute(&o.args, &lookup)?;
            cmd = supervise::apply_changes(&cmd, &args)
                .map_err(|e| format!("--override {}: {e}", o.text))?;
        }
        Ok(cmd)
    }

    /// Runs the ensemble; `observer` is told of every change. The map is written unless it
    /// cannot be built ([`Report::map_error`]).
    pub fn run(mut self, observer: &mut dyn Observer) -> Result<Report, Error> {
        let clock = Instant::now();
        let n = self.grid.len();
        let (_temp, base) = match &self.opts.keep {
            Some(d) => {
                let d = self.opts.cwd.join(d);
                std::fs::create_dir_all(&d).map_err(|e| {
                    Error::Failed(format!("cannot create --keep {}: {e}", d.display()))
                })?;
                (None, d)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("gyr-ensemble-")
                    .tempdir()
                    .map_err(|e| {
                        Error::Failed(format!("cannot create a temporary directory: {e}"))
                    })?;
                let p = t.path().to_owned();
                (Some(t), p)
            }
        };
        supervise::install_signal_handlers();
        let mut builder = gyr::Builder::new()
            .policy(gyr::Policy::Drop)
            .with_default_env()
            .handle_signals(false);
        if let Some(t) = &self.opts.trace {
            builder = builder.trace_file(self.opts.cwd.join(t));
        }
        if let Some(h) = &self.opts.hub {
            builder = builder.hub(
                h.clone(),
                std::env::var("GYR_HUB_TOKEN")
                    .ok()
                    .filter(|v| !v.is_empty()),
            );
        }
        let rt = builder.start()?;

        // Lines and events of every member, seen on the readers' threads.
        let names: Vec<String> = (0..n).map(|m| self.grid.name(m)).collect();
        let index: Arc<HashMap<String, usize>> = Arc::new(
            names
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, s)| (s, i))
                .collect(),
        );
        let last_line: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let missed = Arc::new(AtomicU64::new(0));
        let (tx, rx) = sync_channel::<Msg>(EVENT_QUEUE);
        let tap: Tap = {
            let (index, last_line, missed) = (index.clone(), last_line.clone(), missed.clone());
            Arc::new(move |t: Tapped<'_>| match t {
                Tapped::Line { instance } => {
                    if let Some(&m) = index.get(instance) {
                        last_line[m].store(clock.elapsed().as_millis() as u64, Ordering::Relaxed);
                    }
                }
                Tapped::Event {
                    instance,
                    run,
                    schema,
                    values,
                } => {
                    let Some(&m) = index.get(instance) else {
                        return;
                    };
                    let msg = Msg {
                        member: m,
                        run,
                        type_id: schema.id,
                        t_ns: clock.elapsed().as_nanos() as u64,
                        values: values.to_vec(),
                    };
                    if let Err(TrySendError::Full(_)) = tx.try_send(msg) {
                        missed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        let publisher = Arc::new(Publisher::new(self.spec.clone(), false).with_tap(tap));
        let schemas: HashMap<gyr_core::TypeId, Schema> =
            publisher.schemas().into_iter().map(|s| (s.id, s)).collect();
        let file_watches = watches(&self.spec, &[]).map_err(|e| Error::Usage(e.to_string()))?;

        let mut members = Vec::with_capacity(n);
        for (m, name) in names.iter().enumerate() {
            let dir = base.join(format!("member-{}", m + 1));
            let coords = self.grid.coords(m);
            // Files there before the member starts are followed from their end.
            let w = file_watches
                .iter()
                .cloned()
                .map(|mut w| {
                    w.from_end = true;
                    w
                })
                .collect();
            members.push(Member {
                name: name.clone(),
                coords,
                files: FileSet::new(&dir, w, name, None),
                dir,
                sup: None,
                tails: Vec::new(),
                last_scan: None,
                running: false,
                done: false,
                ended: None,
                attempts: Vec::new(),
                attempt_started: clock,
                remedy: None,
                iter: None,
                residual: None,
                progress_dirty: false,
                field_results: vec![None; self.results.names.len()],
                results: None,
                last_alert: None,
            });
        }
        // The rules move into the engine here: it is not Send and stays on this thread.
        let engine = self.rules.take().map(Engine::new);
        let mut ens = Run {
            p: &self,
            members,
            engine,
            publisher: publisher.clone(),
            schemas,
            last_line,
            clock,
            tally: Tally {
                members: n,
                ..Tally::default()
            },
            ignored_actions: 0,
            buf: Vec::new(),
            rx,
        };
        let outcome = ens.run_loop(observer);
        // Whatever still runs (interrupted) is ended.
        for m in &mut ens.members {
            if let Some(s) = m.sup.as_mut() {
                s.shutdown();
            }
        }
        let ignored_actions = ens.ignored_actions;
        let members = std::mem::take(&mut ens.members);
        drop(ens);
        let summary = rt.shutdown();
        outcome?;
        self.finish(
            members,
            clock,
            missed.load(Ordering::Relaxed),
            summary.lost,
            ignored_actions,
            self.opts.keep.is_some(),
        )
    }

    /// The map from the members' results: filled, written, cached.
    fn finish(
        &self,
        members: Vec<Member>,
        clock: Instant,
        rules_missed: u64,
        lost: u64,
        ignored_actions: u64,
        kept: bool,
    ) -> Result<Report, Error> {
        let values: Vec<Option<Vec<f64>>> = members.iter().map(|m| m.results.clone()).collect();
        let mut reports: Vec<MemberReport> = members
            .into_iter()
            .map(|m| MemberReport {
                status: match (&m.results, m.attempts.len()) {
                    (None, _) => Status::LeftOut,
                    (Some(_), 1) => Status::Ok,
                    (Some(_), _) => Status::RetriedOk,
                },
                name: m.name,
                attempts: m.attempts,
                results: m.results,
                filled: None,
                last_alert: m.last_alert,
                dir: kept.then_some(m.dir),
            })
            .collect();
        let mut report = Report {
            key: self.key.clone(),
            out: self.opts.out.clone(),
            results: self.results.names.clone(),
            members: Vec::new(),
            map_error: None,
            cache_note: None,
            rules_missed,
            lost,
            ignored_actions,
            seconds: 0.0,
        };
        match fill::fill(&self.grid, &values) {
            Err(e) => report.map_error = Some(e),
            Ok((full, filled)) => {
                for f in &filled {
                    reports[f.member].filled = Some(f.describe(&self.grid));
                }
                let text =
                    fill::map_text(&self.grid, &self.results.names, &full, &filled, &self.key);
                cache::write_atomically(&self.opts.out, text.as_bytes()).map_err(|e| {
                    Error::Failed(format!(
                        "cannot write the map to {}: {e}",
                        self.opts.out.display()
                    ))
                })?;
                if let Some(dir) = &self.opts.cache {
                    let c = cache::Cache { dir: dir.clone() };
                    let about = self.about(&reports, &filled);
                    report.cache_note = Some(match c.store(&self.key, &text, &about) {
                        Ok(()) => format!("kept in the cache {}", dir.display()),
                        Err(e) => format!("not kept in the cache {}: {e}", dir.display()),
                    });
                }
            }
        }
        report.members = reports;
        report.seconds = clock.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The cache entry's description: its inputs and what the run gave.
    fn about(&self, members: &[MemberReport], filled: &[fill::Filled]) -> serde_json::Value {
        let made = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        serde_json::json!({
            "key": self.key,
            "made_unix": made,
            "gyr": env!("CARGO_PKG_VERSION"),
            "command": self.opts.command,
            "grid": self.grid.axes.iter().map(|a| serde_json::json!({
                "name": a.name,
                "values": a.values.iter().map(|v| v.text.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "overrides": self.opts.overrides,
            "results": self.results.names,
            "from": self.results.from,
            "spec": self.opts.spec.display().to_string(),
            "rules": self.opts.rules.as_ref().map(|r| r.display().to_string()),
            "program": {
                "path": self.program.path.display().to_string(),
                "size": self.program.size,
                "mtime_ns": self.program.mtime_ns.to_string(),
            },
            "members": members.len(),
            "retried_ok": members.iter().filter(|m| m.status == Status::RetriedOk).count(),
            "filled": filled.iter().map(|f| serde_json::json!({
                "member": self.grid.name(f.member),
                "how": f.describe(&self.grid),
            })).collect::<Vec<_>>(),
        })
    }
}

/// The running ensemble, on one thread.
struct Run<'a> {
    p: &'a Prepared,
    members: Vec<Member>,
    engine: Option<Engine>,
    publisher: Arc<Publisher>,
    schemas: HashMap<gyr_core::TypeId, Schema>,
    last_line: Arc<Vec<AtomicU64>>,
    clock: Instant,
    tally: Tally,
    ignored_actions: u64,
    buf: Vec<u8>,
    rx: Receiver<Msg>,
}

impl Run<'_> {
    fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    fn run_loop(&mut self, obs: &mut dyn Observer) -> Result<(), Error> {
        let n = self.members.len();
        let jobs = self.p.opts.jobs.min(n);
        let poll = self
            .p
            .spec
            .options
            .poll
            .clamp(Duration::from_millis(10), Duration::from_millis(100));
        let mut next = 0;
        let mut last_progress = Instant::now();
        obs.update(Update::Tally(self.tally));
        loop {
            if supervise::signals_received().0 > 0 {
                return Err(Error::Interrupted);
            }
            // Start members while there is room.
            while self.tally.running < jobs && next < n {
                let m = next;
                next += 1;
                self.start_first(m, obs);
            }
            // Their files, what ended, and what their events say.
            let mut ended = Vec::new();
            for m in 0..n {
                if !self.members[m].running {
                    continue;
                }
                self.poll_member_files(m, false);
                let e = self.members[m].sup.as_mut().and_then(|s| s.poll());
                if let Some(e) = e {
                    self.poll_member_files(m, true);
                    self.members[m].ended = Some(e);
                    ended.push(m);
                }
            }
            self.drain(obs);
            for m in ended {
                let verdict = self.classify(m);
                self.end_attempt(m, verdict.0, verdict.1, obs);
            }
            // The rules' remedies, and members gone quiet or over their time.
            let now = self.now_ms();
            for m in 0..n {
                let mem = &self.members[m];
                if !mem.running {
                    continue;
                }
                let why = if let Some(remedy) = &mem.remedy {
                    Some((
                        Verdict::Diverged,
                        match remedy {
                            Some(args) if args.trim().is_empty() => {
                                "the rules asked to restart it".to_owned()
                            }
                            Some(args) => format!("the rules asked to restart it with `{args}`"),
                            None => "the rules asked to stop it".to_owned(),
                        },
                    ))
                } else if now.saturating_sub(self.last_line[m].load(Ordering::Relaxed))
                    > self.p.opts.timeout.as_millis() as u64
                {
                    Some((
                        Verdict::Hung,
                        format!(
                            "no output for {} s",
                            fmt_secs(self.p.opts.timeout.as_secs_f64())
                        ),
                    ))
                } else if self
                    .p
                    .opts
                    .max_time
                    .is_some_and(|t| mem.attempt_started.elapsed() > t)
                {
                    Some((
                        Verdict::Hung,
                        format!(
                            "ran longer than --max-time {} s",
                            fmt_secs(self.p.opts.max_time.unwrap_or_default().as_secs_f64())
                        ),
                    ))
                } else {
                    None
                };
                if let Some((verdict, why)) = why {
                    if let Some(s) = self.members[m].sup.as_mut() {
                        let _ = s.stop();
                    }
                    self.poll_member_files(m, true);
                    self.drain(obs);
                    self.end_attempt(m, verdict, why, obs);
                }
            }
            if last_progress.elapsed() >= Duration::from_millis(100) {
                last_progress = Instant::now();
                for (m, mem) in self.members.iter_mut().enumerate() {
                    if mem.running && mem.progress_dirty {
                        mem.progress_dirty = false;
                        let res_name = self
                            .p
                            .progress
                            .map(|(e, _, r)| self.p.spec.events[e].fields[r].name.as_str());
                        obs.update(Update::Progress {
                            member: m,
                            name: &mem.name,
                            iter: mem.iter,
                            residual: res_name.zip(mem.residual),
                        });
                    }
                }
            }
            if self.members.iter().all(|m| m.done) {
                return Ok(());
            }
            std::thread::sleep(poll);
        }
    }

    fn poll_member_files(&mut self, m: usize, finish: bool) {
        let spec = &self.p.spec;
        let mem = &mut self.members[m];
        if !mem.files.is_empty()
            && (finish
                || mem
                    .last_scan
                    .is_none_or(|t| t.elapsed() >= spec.options.scan))
        {
            let run = mem
                .sup
                .as_ref()
                .map(|s| s.run_number.clone())
                .unwrap_or_default();
            for tail in mem.files.scan() {
                let source = spec.sources[tail.source].name.clone();
                mem.tails.push(Tailed {
                    parser: LineParser::new(spec.clone(), tail.source, &tail.instance)
                        .with_run(run.clone()),
                    tail,
                    source,
                });
            }
            mem.last_scan = Some(Instant::now());
        }
        poll_files(&mut mem.tails, &self.publisher, &mut self.buf, finish);
    }

    /// Starts member `m`'s first attempt.
    fn start_first(&mut self, m: usize, obs: &mut dyn Observer) {
        let mem = &mut self.members[m];
        let command = match std::fs::create_dir_all(&mem.dir)
            .map_err(|e| format!("cannot create its directory {}: {e}", mem.dir.display()))
            .and_then(|_| self.p.member_command(m, &mem.coords, &mem.dir))
        {
            Ok(c) => c,
            Err(e) => {
                // Nothing to retry: the same would fail again.
                mem.attempts.push(Attempt {
                    verdict: Verdict::Failed,
                    why: e.clone(),
                    seconds: 0.0,
                    command: String::new(),
                });
                mem.done = true;
                self.tally.done += 1;
                self.tally.failed += 1;
                self.tally.left_out += 1;
                obs.update(Update::Ended {
                    member: m,
                    name: &self.members[m].name,
                    attempt: 1,
                    verdict: Verdict::Failed,
                    why: &e,
                    retry: false,
                    results: None,
                });
                obs.update(Update::Tally(self.tally));
                return;
            }
        };
        // Files already there (an earlier ensemble's, with --keep) are old: seen now, they are
        // followed from their end.
        let spec = self.p.spec.clone();
        let mut sup = Supervisor::new(
            command,
            &mem.dir,
            spec,
            self.publisher.clone(),
            &mem.name,
            false,
        );
        let run = sup.run_number.clone();
        for tail in mem.files.scan() {
            let source = self.p.spec.sources[tail.source].name.clone();
            mem.tails.push(Tailed {
                parser: LineParser::new(self.p.spec.clone(), tail.source, &tail.instance)
                    .with_run(run.clone()),
                tail,
                source,
            });
        }
        mem.last_scan = Some(Instant::now());
        self.remove_result_file(m);
        let started = sup.start();
        self.members[m].sup = Some(sup);
        self.after_start(m, 1, started, obs);
    }

    fn remove_result_file(&self, m: usize) {
        if let Some(from) = &self.p.results.from {
            let _ = std::fs::remove_file(self.members[m].dir.join(from));
        }
    }

    /// Bookkeeping once attempt `attempt` of `m` was started (or could not be).
    fn after_start(
        &mut self,
        m: usize,
        attempt: usize,
        started: Result<u32, String>,
        obs: &mut dyn Observer,
    ) {
        let now = self.now_ms();
        self.last_line[m].store(now, Ordering::Relaxed);
        let mem = &mut self.members[m];
        mem.attempt_started = Instant::now();
        mem.remedy = None;
        mem.ended = None;
        mem.iter = None;
        mem.residual = None;
        mem.field_results.iter_mut().for_each(|r| *r = None);
        let command = mem
            .sup
            .as_ref()
            .map(|s| join_words(&s.command))
            .unwrap_or_default();
        match started {
            Ok(_) => {
                if !mem.running {
                    mem.running = true;
                    self.tally.running += 1;
                }
                obs.update(Update::Started {
                    member: m,
                    name: &self.members[m].name,
                    attempt,
                    command: &command,
                });
                obs.update(Update::Tally(self.tally));
            }
            Err(e) => {
                if !mem.running {
                    // Counted as running for end_attempt to uncount.
                    mem.running = true;
                    self.tally.running += 1;
                }
                self.end_attempt(m, Verdict::Failed, e, obs);
            }
        }
    }

    /// Every queued event through the progress, the result fields and the rules.
    fn drain(&mut self, obs: &mut dyn Observer) {
        while let Ok(msg) = self.rx.try_recv() {
            self.event(msg, obs);
        }
    }

    fn event(&mut self, msg: Msg, obs: &mut dyn Observer) {
        let Some(schema) = self.schemas.get(&msg.type_id) else {
            return;
        };
        let m = msg.member;
        let spec = &self.p.spec;
        let mem = &mut self.members[m];
        let current_run = mem
            .sup
            .as_ref()
            .map(|s| s.run_number.load(Ordering::Relaxed))
            .unwrap_or(0);
        let current = msg.run == current_run && mem.running;
        if current {
            if let Some((e, it, r)) = self.p.progress
                && spec.events[e].name == schema.name
            {
                mem.iter = msg.values.get(it).and_then(Value::as_f64).map(|x| x as u64);
                mem.residual = msg.values.get(r).and_then(Value::as_f64);
                mem.progress_dirty = true;
            }
            for (i, src) in self.p.results.sources.iter().enumerate() {
                if let ResultSource::Field { event, field } = src
                    && spec.events[*event].name == schema.name
                {
                    mem.field_results[i] = msg.values.get(*field).and_then(Value::as_f64);
                }
            }
        }
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        let firings = engine.event(&EventRef {
            pid: m as u32 + 1,
            program: &mem.name,
            t_ns: msg.t_ns,
            schema,
            values: &msg.values,
        });
        for f in firings {
            for a in f.actions {
                match a {
                    Action::Alert { severity, message } => {
                        mem.last_alert = Some(format!("{severity}: {message}"));
                        obs.update(Update::Alert {
                            name: &mem.name,
                            severity,
                            message: &message,
                        });
                    }
                    Action::Restart { args } if current => {
                        if mem.remedy.is_none() {
                            mem.remedy = Some(Some(args));
                        }
                    }
                    Action::Stop if current => {
                        if mem.remedy.is_none() {
                            mem.remedy = Some(None);
                        }
                    }
                    Action::Control { line } if current => {
                        if let Some(c) = &spec.options.control_file {
                            let _ = supervise::append_control(&mem.dir.join(c), &line);
                        }
                    }
                    Action::Signal { signal } if current => {
                        if let (Ok(sig), Some(s)) =
                            (supervise::signal_number(&signal), mem.sup.as_mut())
                        {
                            let _ = s.signal(sig);
                        }
                    }
                    Action::SetInput { file, key, value } => {
                        if spec
                            .options
                            .input_files
                            .iter()
                            .any(|f| f.as_os_str() == file.as_str())
                        {
                            let _ = supervise::rewrite_input(&mem.dir.join(&file), &key, &value);
                        } else {
                            self.ignored_actions += 1;
                        }
                    }
                    Action::Assert { .. } | Action::Retract { .. } => {}
                    Action::Restart { .. }
                    | Action::Stop
                    | Action::Control { .. }
                    | Action::Signal { .. } => {
                        // For a run already over.
                    }
                    _ => self.ignored_actions += 1,
                }
            }
        }
    }

    /// How the run of `m` that ended went.
    fn classify(&mut self, m: usize) -> (Verdict, String) {
        let mem = &self.members[m];
        let ended = mem.ended.unwrap_or(Ended {
            status: None,
            signal: None,
        });
        if let Some(remedy) = &mem.remedy {
            return (
                Verdict::Diverged,
                match remedy {
                    Some(args) if !args.trim().is_empty() => {
                        format!("the rules asked to restart it with `{args}`")
                    }
                    Some(_) => "the rules asked to restart it".into(),
                    None => "the rules asked to stop it".into(),
                },
            );
        }
        match (ended.status, ended.signal) {
            (Some(0), _) => match self.read_results(m) {
                Ok(v) => {
                    self.members[m].results = Some(v);
                    (Verdict::Ok, String::new())
                }
                Err(e) => (Verdict::Failed, format!("exit status 0, but {e}")),
            },
            (Some(c), _) => (Verdict::Failed, format!("exit status {c}")),
            (None, Some(s)) => (
                Verdict::Failed,
                format!("ended by {}", supervise::signal_name(s)),
            ),
            _ => (Verdict::Failed, "ended".into()),
        }
    }

    fn read_results(&self, m: usize) -> Result<Vec<f64>, String> {
        let mem = &self.members[m];
        let r = &self.p.results;
        let kv = match &r.from {
            Some(from) => {
                let path = mem.dir.join(from);
                let meta = std::fs::metadata(&path).map_err(|_| format!("it wrote no {from}"))?;
                if meta.len() > MAX_RESULT_BYTES {
                    return Err(format!("{from} is larger than {MAX_RESULT_BYTES} bytes"));
                }
                let text = std::fs::read(&path).map_err(|e| format!("cannot read {from}: {e}"))?;
                grid::key_values(&String::from_utf8_lossy(&text))
            }
            None => HashMap::new(),
        };
        r.sources
            .iter()
            .zip(&r.names)
            .enumerate()
            .map(|(i, (src, name))| {
                let v = match src {
                    ResultSource::Key(k) => {
                        let from = r.from.as_deref().unwrap_or("");
                        let raw = kv
                            .get(k)
                            .ok_or_else(|| format!("{from} has no `{k} = ...` line"))?;
                        grid::parse_number(raw)
                            .ok_or_else(|| format!("{from}: `{k} = {raw}` is not a number"))?
                    }
                    ResultSource::Field { .. } => {
                        mem.field_results[i].ok_or_else(|| format!("its output gave no {name}"))?
                    }
                };
                if v.is_finite() {
                    Ok(v)
                } else {
                    Err(format!("{name} is {v}"))
                }
            })
            .collect()
    }

    /// Records how an attempt ended; retries once, else the member is done.
    fn end_attempt(&mut self, m: usize, verdict: Verdict, why: String, obs: &mut dyn Observer) {
        let mem = &mut self.members[m];
        let command = mem
            .sup
            .as_ref()
            .map(|s| join_words(&s.command))
            .unwrap_or_default();
        mem.attempts.push(Attempt {
            verdict,
            why: why.clone(),
            seconds: mem.attempt_started.elapsed().as_secs_f64(),
            command,
        });
        let attempt = mem.attempts.len();
        let retry = verdict != Verdict::Ok && attempt < ATTEMPTS;
        if verdict != Verdict::Ok {
            self.tally.failed += 1;
        }
        obs.update(Update::Ended {
            member: m,
            name: &mem.name,
            attempt,
            verdict,
            why: &why,
            retry,
            results: mem.results.as_deref(),
        });
        if retry {
            self.tally.retried += 1;
            let changes = mem.remedy.take().flatten().unwrap_or_default();
            self.remove_result_file(m);
            let mem = &mut self.members[m];
            let started = match mem.sup.as_mut() {
                Some(s) => s.restart(&changes),
                None => Err("no command".into()),
            };
            self.after_start(m, attempt + 1, started.map(|_| 0), obs);
            return;
        }
        mem.running = false;
        mem.done = true;
        self.tally.running = self.tally.running.saturating_sub(1);
        self.tally.done += 1;
        if mem.results.is_none() {
            self.tally.left_out += 1;
        }
        mem.tails.clear();
        if let Some(e) = self.engine.as_mut() {
            e.forget_program(m as u32 + 1);
        }
        obs.update(Update::Tally(self.tally));
    }
}

/// Seconds as text: `5`, `0.5`, `120`.
fn fmt_secs(s: f64) -> String {
    grid::number_text((s * 1000.0).round() / 1000.0)
}
