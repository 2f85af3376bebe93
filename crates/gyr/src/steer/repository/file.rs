//! A rules file run by the program's own steering thread (feature `rules`): loading and
//! checking it ([`load_rules`]), running its `gyr_rules::Engine` over tapped events, carrying
//! out its actions in the process, reloading it when it changes, and its state for
//! `ListRules` ([`rules_file`]).
//!
//! The engine is not `Send`: it is made, run, replaced and dropped on the `gyr-steering`
//! thread alone. Other threads talk to it through [`COMMAND`] (load, unload) and read what it
//! publishes in [`STATE`].

use super::{EventView, set_file_types, unix_now_ns};
use crate::control::{self, Rate, Target};
use crate::dynamic::DynamicSensor;
use crate::steer::{self, Pending, SteerError, Who, log};
use gyr_core::{Field, FieldType, Value};
use gyr_rules::{Action, Engine, EventRef, Firing, RuleSet, RulesError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// How often the steering thread looks at the rules file (its length and modification time)
/// to take a new version.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// How long the rules wait for an actuator they queued to run at a synch point before they
/// stop waiting and count it as the rule's error (the actuator may still run later).
pub const ACTUATION_PATIENCE: Duration = Duration::from_secs(60);

/// Actuations the rules queued that may wait for a synch point at once; an actuation asked for
/// beyond it is not queued, and counted as the rule's error.
pub const MAX_WAITING_ACTUATIONS: usize = 256;

/// How often the rules' state is published while events keep coming.
const STATE_EVERY: Duration = Duration::from_millis(250);

/// How soon after it changed the rules' state is published once events stop coming: soon
/// enough for a user's look, seldom enough that sparse events do not each cost a copy of it.
const IDLE_STATE_EVERY: Duration = Duration::from_millis(50);

/// How often waiting actuations are looked at.
const ACTUATION_POLL: Duration = Duration::from_millis(20);

/// The event type an `alert` becomes.
const ALERT_EVENT: &str = "gyr.alert";

/// What the steering thread is asked to do with the rules file.
#[derive(Debug)]
enum Command {
    Load { path: PathBuf, generation: u64 },
    Unload { generation: u64 },
}

/// The latest command for the steering thread (a newer one replaces one not yet taken).
static COMMAND: Mutex<Option<Command>> = Mutex::new(None);
/// Whether [`COMMAND`] holds one: what the steering thread looks at on every turn.
static COMMANDED: AtomicBool = AtomicBool::new(false);
/// The generation of the latest [`load_rules`].
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The rules file's state as the steering thread last published it.
static STATE: Mutex<Option<RulesState>> = Mutex::new(None);

/// A rules file running in the program, and what its rules have done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesState {
    /// The file, as given.
    pub origin: String,
    /// Its rules, in file order.
    pub rules: Vec<FileRuleInfo>,
    /// Why the file's latest version was refused (file:line:col: what), while the rules above
    /// (the last version that loaded) go on; `None` when the latest version runs.
    pub load_error: Option<String>,
    /// When the rules in force were loaded, ns since the Unix epoch.
    pub loaded_unix_ns: u64,
}

/// One rule of a rules file and what it has done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRuleInfo {
    /// Its name.
    pub name: String,
    /// The event type it watches (`None`: a rule over facts).
    pub on: Option<String>,
    /// Its condition, on one line.
    pub when: String,
    /// Times it fired.
    pub fired: u64,
    /// Its last firing, ns since the Unix epoch (0: never).
    pub last_fired_unix_ns: u64,
    /// Evaluations that failed and actions that could not be carried out.
    pub errors: u64,
    /// The last of those failures.
    pub last_error: Option<String>,
}

/// The rules file running in the program, as of the last time the steering thread published
/// its state (a quarter of a second ago at most while events keep coming, a twentieth of a
/// second after they stop); `None` when no rules file was loaded.
pub fn rules_file() -> Option<RulesState> {
    STATE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// A rules file loaded by [`load_rules`]. Dropping the handle leaves the rules running;
/// [`RulesHandle::unload`] stops them.
#[derive(Debug, Clone)]
pub struct RulesHandle {
    path: PathBuf,
    generation: u64,
}

impl RulesHandle {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rules' state (see [`rules_file`]).
    pub fn state(&self) -> Option<RulesState> {
        rules_file()
    }

    /// Stops the rules, unless another [`load_rules`] has replaced them since.
    pub fn unload(self) {
        // A newer generation keeps the running engine from publishing again.
        if GENERATION
            .compare_exchange(
                self.generation,
                self.generation + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_err()
        {
            return;
        }
        send(Command::Unload {
            generation: self.generation,
        });
        *STATE.lock().unwrap_or_else(|e| e.into_inner()) = None;
        set_file_types(Vec::new());
    }
}

fn send(c: Command) {
    let r = super::repository();
    *COMMAND.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
    COMMANDED.store(true, Ordering::SeqCst);
    r.thread.unpark();
}

/// Runs the rules file at `path` in this program's steering thread, over the program's own
/// events: the file is checked now (an error says its file, line and column, and nothing
/// changes), then its rules watch the events of the types they name in `on`, handed to the
/// steering thread by the sensors as for [`super::on_event`]'s closures.
///
/// What its rules ask is done in the process: `alert(severity, message)` emits a `gyr.alert`
/// event (fields `severity`, `message`, `rule`), which a hub shows among its alerts;
/// `set(path, value)` writes an attribute and `actuate(path, args)` queues an actuator (or
/// calls a registered function), under the name `rule NAME` in the steering log; `sensor(type,
/// on, rate)` switches sensors. The rules never wait for an actuator: its outcome is taken
/// when the program reaches a synch point, or it is counted as an error after
/// [`ACTUATION_PATIENCE`]. Program control (`start`, `stop`, `restart`, `signal`, `control`,
/// `set_input`) is for a watch-dog or the hub: in a program it is counted as the rule's error.
/// Every failure is counted in the rule's state ([`rules_file`], `gyr rules list PID`).
///
/// The file is looked at again about every [`RELOAD_EVERY`]: a new version that loads
/// replaces the rules (windows, facts and counters of rules kept by name go on); one that does
/// not is refused with its file, line and column (once on standard error, and in the state's
/// `load_error`), and the rules in force go on.
///
/// One rules file runs in a program: loading another replaces it.
pub fn load_rules(path: impl AsRef<Path>) -> Result<RulesHandle, RulesError> {
    let path = path.as_ref().to_owned();
    let set = RuleSet::load(&path)?;
    let types = watched_types(&set);
    let generation = GENERATION.fetch_add(1, Ordering::SeqCst) + 1;
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(state_of(&set, &[], &HashMap::new(), unix_now_ns(), None));
    drop(set);
    // The command goes before the taps: the steering thread takes commands before events, so
    // the first event the new taps catch finds the rules loaded.
    send(Command::Load {
        path: path.clone(),
        generation,
    });
    set_file_types(types);
    Ok(RulesHandle { path, generation })
}

fn watched_types(set: &RuleSet) -> Vec<String> {
    set.info().into_iter().filter_map(|r| r.on).collect()
}

fn state_of(
    set: &RuleSet,
    states: &[gyr_rules::RuleState],
    fired_at: &HashMap<String, u64>,
    loaded_unix_ns: u64,
    load_error: Option<String>,
) -> RulesState {
    let rules = set
        .info()
        .into_iter()
        .map(|r| {
            let s = states.iter().find(|s| s.name == r.name);
            FileRuleInfo {
                fired: s.map_or(0, |s| s.fired),
                last_fired_unix_ns: fired_at.get(&r.name).copied().unwrap_or(0),
                errors: s.map_or(0, |s| s.errors),
                last_error: s.and_then(|s| s.last_error.clone()),
                name: r.name,
                on: r.on,
                when: r.when,
            }
        })
        .collect();
    RulesState {
        origin: set.origin().to_owned(),
        rules,
        load_error,
        loaded_unix_ns,
    }
}

/// The file's identity, to notice a change: length and modification time.
fn stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// The rules file's side of the steering thread.
pub(super) struct Runner {
    file: Option<Loaded>,
    /// Actuations queued by rules, waiting for the program's synch point.
    waiting: Vec<Waiting>,
    last_actuation_poll: Instant,
    /// The `gyr.alert` sensor, registered at the first alert (or why it could not be).
    alert: Option<Result<DynamicSensor, String>>,
    /// The program's pid and name, as rules see them.
    pid: u32,
    program: String,
    /// Whether the engine's failure on an event was said already.
    engine_failed: bool,
}

struct Loaded {
    path: PathBuf,
    generation: u64,
    engine: Engine,
    stamp: Option<(u64, SystemTime)>,
    last_look: Instant,
    loaded_unix_ns: u64,
    load_error: Option<String>,
    /// When each rule last fired, on the Unix clock (the engine keeps program time).
    fired_at: HashMap<String, u64>,
    /// Whether the state changed since it was last published.
    dirty: bool,
    last_publish: Instant,
}

struct Waiting {
    rule: String,
    what: String,
    pending: Pending,
    since: Instant,
}

impl Runner {
    pub(super) fn new() -> Runner {
        let program = std::env::args_os()
            .next()
            .map(|a| {
                Path::new(&a)
                    .file_name()
                    .unwrap_or(a.as_os_str())
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default();
        Runner {
            file: None,
            waiting: Vec::new(),
            last_actuation_poll: Instant::now(),
            alert: None,
            pid: std::process::id(),
            program,
            engine_failed: false,
        }
    }

    /// Every turn of the steering thread: commands, and (at their pace) the file's changes
    /// and the actuations waiting.
    pub(super) fn poll(&mut self) {
        if COMMANDED.load(Ordering::Relaxed) {
            COMMANDED.store(false, Ordering::SeqCst);
            let command = COMMAND.lock().unwrap_or_else(|e| e.into_inner()).take();
            match command {
                Some(Command::Load { path, generation }) => self.load(path, generation),
                Some(Command::Unload { generation })
                    if self
                        .file
                        .as_ref()
                        .is_some_and(|f| f.generation == generation) =>
                {
                    self.file = None;
                }
                Some(Command::Unload { .. }) | None => {}
            }
        }
        if self.file.is_none() && self.waiting.is_empty() {
            return;
        }
        let now = Instant::now();
        if let Some(f) = &mut self.file
            && now.duration_since(f.last_look) >= RELOAD_EVERY
        {
            f.last_look = now;
            let s = stamp(&f.path);
            if s != f.stamp {
                f.stamp = s;
                f.reload();
            }
        }
        if !self.waiting.is_empty()
            && now.duration_since(self.last_actuation_poll) >= ACTUATION_POLL
        {
            self.last_actuation_poll = now;
            self.poll_actuations();
        }
    }

    /// When the steering thread has run out of events: publish what changed.
    pub(super) fn idle(&mut self) {
        if !self.waiting.is_empty() {
            self.poll_actuations();
        }
        if let Some(f) = &mut self.file
            && f.dirty
            && f.last_publish.elapsed() >= IDLE_STATE_EVERY
        {
            f.publish();
        }
    }

    /// How long the steering thread may park: `None` for as long as nothing comes.
    pub(super) fn tick(&self) -> Option<Duration> {
        if !self.waiting.is_empty() {
            Some(ACTUATION_POLL)
        } else if self.file.as_ref().is_some_and(|f| f.dirty) {
            Some(IDLE_STATE_EVERY)
        } else if self.file.is_some() {
            Some(RELOAD_EVERY)
        } else {
            None
        }
    }

    fn load(&mut self, path: PathBuf, generation: u64) {
        // Checked by `load_rules` a moment ago; if it changed since and no longer loads, no
        // rules run until it is fixed (and the change is taken like any other).
        let (set, load_error) = match RuleSet::load(&path) {
            Ok(set) => (set, None),
            Err(e) => {
                crate::diag!(
                    "gyr: the rules file was refused, no rules run until it is fixed: {e}"
                );
                match RuleSet::parse("", &path.display().to_string()) {
                    Ok(set) => (set, Some(e.to_string())),
                    Err(_) => return,
                }
            }
        };
        if GENERATION.load(Ordering::SeqCst) == generation {
            set_file_types(watched_types(&set));
        }
        let mut f = Loaded {
            stamp: stamp(&path),
            path,
            generation,
            engine: Engine::new(set),
            last_look: Instant::now(),
            loaded_unix_ns: unix_now_ns(),
            load_error,
            fired_at: HashMap::new(),
            dirty: true,
            last_publish: Instant::now(),
        };
        f.publish();
        self.file = Some(f);
    }

    /// One tapped event through the rules; their firings carried out.
    pub(super) fn event(&mut self, view: &EventView) {
        let Some(f) = &mut self.file else { return };
        let ev = EventRef {
            pid: self.pid,
            program: &self.program,
            t_ns: view.received_ns,
            schema: &view.schema,
            values: &view.values,
        };
        // The engine bounds every evaluation; a panic in it is a bug of gyr's, which must
        // not take the program down: the event is skipped and the bug said once.
        let engine = &mut f.engine;
        let firings = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.event(&ev)
        })) {
            Ok(firings) => firings,
            Err(_) => {
                if !self.engine_failed {
                    self.engine_failed = true;
                    crate::diag!(
                        "gyr: the rules engine failed on a `{}` event, which the rules skip (a bug of gyr's: please report it)",
                        view.schema.name
                    );
                }
                return;
            }
        };
        f.dirty = true;
        if !firings.is_empty() {
            let now = unix_now_ns();
            for firing in &firings {
                f.fired_at.insert(firing.rule.clone(), now);
            }
            for firing in firings {
                let failures = self.carry_out(&firing);
                if let Some(f) = &mut self.file {
                    for (rule, message) in failures {
                        f.engine.action_failed(&rule, message);
                    }
                }
            }
        }
        if let Some(f) = &mut self.file
            && f.last_publish.elapsed() >= STATE_EVERY
        {
            f.publish();
        }
    }

    /// Carries out what a firing asks for; what failed, as (rule, message).
    fn carry_out(&mut self, f: &Firing) -> Vec<(String, String)> {
        let who = Who::new(format!("rule {}", f.rule));
        let mut failed = Vec::new();
        let mut fail = |what: &dyn std::fmt::Display, why: String| {
            failed.push((f.rule.clone(), format!("`{what}`: {why}")));
        };
        for action in &f.actions {
            if let Some(target) = &f.target
                && matches!(
                    action,
                    Action::Set { .. } | Action::Call { .. } | Action::Sensor { .. }
                )
            {
                fail(
                    action,
                    format!(
                        "the rule's target is {target:?}: a program's own rules steer the program itself; a rule addressing another program runs in the hub (`gyr hub --rules FILE`)"
                    ),
                );
                continue;
            }
            match action {
                Action::Alert { severity, message } => {
                    let sensor = self.alert.get_or_insert_with(|| {
                        DynamicSensor::register(
                            ALERT_EVENT,
                            vec![
                                Field::new("severity", FieldType::Str),
                                Field::new("message", FieldType::Str),
                                Field::new("rule", FieldType::Str),
                            ],
                        )
                        .map_err(|e| e.to_string())
                    });
                    let result = match sensor {
                        Ok(s) => s
                            .emit(&[
                                Value::Str(severity.to_string()),
                                Value::Str(message.clone()),
                                Value::Str(f.rule.clone()),
                            ])
                            .map_err(|e| e.to_string()),
                        Err(e) => Err(format!("cannot raise it as a `{ALERT_EVENT}` event: {e}")),
                    };
                    if let Err(e) = result {
                        fail(action, e);
                    }
                }
                Action::Assert { .. } | Action::Retract { .. } => {}
                Action::Set { path, value } => {
                    if let Err(e) = steer::set(path, value.clone(), &who) {
                        fail(action, e.to_string());
                    }
                }
                Action::Call { path, args } => {
                    let is_function = !path.contains('.');
                    if is_function {
                        // A registered function runs on its caller's thread, as for a client.
                        if let Err(e) = steer::call(path, args, &who) {
                            fail(action, e.to_string());
                        }
                    } else if self.waiting.len() >= MAX_WAITING_ACTUATIONS {
                        fail(
                            action,
                            format!(
                                "not queued: {MAX_WAITING_ACTUATIONS} actuations of the rules are waiting for the program's synch point already (does it reach gyr::steer::sync_point?)"
                            ),
                        );
                    } else {
                        match steer::actuate(path, args, &who) {
                            Ok(pending) => self.waiting.push(Waiting {
                                rule: f.rule.clone(),
                                what: action.to_string(),
                                pending,
                                since: Instant::now(),
                            }),
                            Err(e) => fail(action, e.to_string()),
                        }
                    }
                }
                Action::Sensor {
                    name,
                    enabled,
                    rate,
                } => {
                    if let Err(e) = sensor_control(name, *enabled, *rate, &who) {
                        fail(action, e);
                    }
                }
                Action::Start
                | Action::Stop
                | Action::Restart { .. }
                | Action::Signal { .. }
                | Action::Control { .. }
                | Action::SetInput { .. } => fail(
                    action,
                    "program control is for a watch-dog or the hub: a program's own rules cannot start, stop, restart or signal it; run this rule in `gyr hub --rules FILE` over a program run by `gyr watchdog`".into(),
                ),
                other => fail(other, "a program's rules cannot carry this out".into()),
            }
        }
        failed
    }

    /// Takes the outcomes of the actuations that ran; counts those that failed or waited too
    /// long.
    fn poll_actuations(&mut self) {
        let mut failures = Vec::new();
        self.waiting.retain(|w| match w.pending.try_result() {
            Some(Ok(_)) => false,
            Some(Err(e)) => {
                failures.push((w.rule.clone(), format!("`{}`: {e}", w.what)));
                false
            }
            None if w.since.elapsed() >= ACTUATION_PATIENCE => {
                let e = SteerError::NoSynchPoint {
                    path: w.what.clone(),
                    waited: ACTUATION_PATIENCE,
                };
                failures.push((
                    w.rule.clone(),
                    format!("{e}; the rules no longer wait for its result"),
                ));
                false
            }
            None => true,
        });
        if let Some(f) = &mut self.file {
            for (rule, message) in failures {
                f.engine.action_failed(&rule, message);
                f.dirty = true;
            }
        }
    }
}

/// `sensor(type, on, rate)`: the switch and rate of an event type (`""`: every sensor).
fn sensor_control(name: &str, on: bool, rate: Option<f64>, who: &Who) -> Result<(), String> {
    let target = if name.is_empty() {
        Target::Global
    } else {
        Target::Type(name.to_owned())
    };
    let rate = rate.map(Rate::PerSecond);
    control::check_change(&target, Some(on), rate).map_err(|e| e.to_string())?;
    control::set_enabled(&target, on);
    let mut change = if on { "on" } else { "off" }.to_owned();
    if let Some(rate) = rate {
        control::set_rate(&target, rate).map_err(|e| e.to_string())?;
        change.push_str(&format!(", rate {rate}"));
    }
    log::record_sensor_change(who, &format!("{target}: {change}"));
    Ok(())
}

impl Loaded {
    fn reload(&mut self) {
        match RuleSet::load(&self.path) {
            Ok(set) => {
                crate::diag!(
                    "gyr: rules reloaded from {} ({} rules)",
                    self.path.display(),
                    set.len()
                );
                if self.current() {
                    set_file_types(watched_types(&set));
                }
                self.engine.replace(set);
                self.loaded_unix_ns = unix_now_ns();
                self.load_error = None;
            }
            Err(e) => {
                let e = e.to_string();
                if self.load_error.as_ref() != Some(&e) {
                    crate::diag!(
                        "gyr: the rules file changed but was refused, the rules in force go on: {e}"
                    );
                }
                self.load_error = Some(e);
            }
        }
        self.dirty = true;
        self.publish();
    }

    /// Whether no newer [`load_rules`] (or an unload) came since this file was loaded.
    fn current(&self) -> bool {
        GENERATION.load(Ordering::SeqCst) == self.generation
    }

    fn publish(&mut self) {
        self.dirty = false;
        self.last_publish = Instant::now();
        // A newer `load_rules` published its own state already.
        if !self.current() {
            return;
        }
        let state = state_of(
            self.engine.rule_set(),
            &self.engine.rules(),
            &self.fired_at,
            self.loaded_unix_ns,
            self.load_error.clone(),
        );
        *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(state);
    }
}
