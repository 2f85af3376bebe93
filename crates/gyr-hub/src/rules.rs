//! The hub's expert system: a rules file (`gyr hub --rules FILE`, `gyr_rules`) run over the
//! events of every program the hub sees, on a thread of its own.
//!
//! Taking in a batch never waits for the rules: the events of the types some rule watches are
//! decoded while the batch is taken in (`Process::rules_out`) and sent to the rules thread
//! through a bounded queue; when it is full they are counted (`missed`) and the rules do not
//! see them. The thread carries out what the rules ask: an alert goes into the program's
//! alerts (the page pops it up, `gyr alerts` lists it); steering (`set`, `actuate`, `sensor`)
//! and program control (`restart`, `stop`, `signal`, `control`, ...: actuators of a
//! watch-dog's `watched` object) go to the program through the hub, under the name
//! `rule NAME (hub)` in its steering log. An action that fails becomes an alert too.
//!
//! The file is read again when it changes; a version with an error is refused (its file, line
//! and column in `ListRules` and on the hub's standard error) and the rules in force go on.

use crate::Shared;
use gyr_core::{Schema, Value};
use gyr_proto::v1;
use gyr_rules::{Action, Engine, EventRef, Firing, RuleSet};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Batches of events waiting for the rules thread, at most: about a second of a busy hub.
const QUEUE_BATCHES: usize = 1024;
/// How often the rules file is looked at.
const RELOAD_EVERY: Duration = Duration::from_secs(1);
/// How often the rules' state (`ListRules`) is refreshed while they work.
const STATE_EVERY: Duration = Duration::from_millis(250);
/// How long a steering call a rule made may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The steering object through which a watch-dog controls the program it watches.
pub(crate) const WATCHED_OBJECT: &str = "watched";

/// The event types the rules watch, with a generation so that each program's event types
/// learn a change once.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    pub(crate) generation: u64,
    pub(crate) names: HashSet<String>,
}

/// One batch's events for the rules: the program, the schemas it introduced, and the decoded
/// events of watched types.
pub(crate) struct Input {
    pub(crate) pid: u32,
    pub(crate) program: Arc<str>,
    pub(crate) schemas: Vec<Schema>,
    /// (type id, time in ns, values).
    pub(crate) events: Vec<(u32, u64, Vec<Value>)>,
}

/// The rules' side of the hub.
#[derive(Debug)]
pub(crate) struct Rules {
    path: PathBuf,
    tx: SyncSender<Input>,
    rx: Mutex<Option<Receiver<Input>>>,
    watch: RwLock<Arc<Watch>>,
    /// Events the rules did not see: their queue was full.
    pub(crate) missed: AtomicU64,
    state: Mutex<v1::ListRulesReply>,
}

impl Rules {
    /// Checks `path`: an error here stops the hub from starting, with the file's line and
    /// column. (The rules thread loads the file again: a compiled rule set stays on the thread
    /// that made it.)
    pub(crate) fn load(path: &Path) -> Result<Rules, gyr_rules::RulesError> {
        let set = RuleSet::load(path)?;
        let (tx, rx) = sync_channel(QUEUE_BATCHES);
        let rules = Rules {
            path: path.to_owned(),
            tx,
            rx: Mutex::new(Some(rx)),
            watch: RwLock::new(Arc::new(Watch::default())),
            missed: AtomicU64::new(0),
            state: Mutex::new(v1::ListRulesReply::default()),
        };
        rules.watch_types(&set, 1);
        *rules.state.lock().unwrap_or_else(|e| e.into_inner()) = reply(&set, &[], now_ns());
        Ok(rules)
    }

    fn watch_types(&self, set: &RuleSet, generation: u64) {
        let names = set.info().into_iter().filter_map(|r| r.on).collect();
        *self.watch.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(Watch { generation, names });
    }

    /// The event types the rules watch now.
    pub(crate) fn watch(&self) -> Arc<Watch> {
        self.watch.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Hands a batch's events to the rules thread, or counts them when it is behind.
    pub(crate) fn feed(&self, input: Input) {
        if input.events.is_empty() && input.schemas.is_empty() {
            return;
        }
        let n = input.events.len() as u64;
        match self.tx.try_send(input) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.missed.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// What `ListRules` answers.
    pub(crate) fn state(&self) -> v1::ListRulesReply {
        let mut reply = self.state.lock().unwrap_or_else(|e| e.into_inner()).clone();
        reply.events_missed = self.missed.load(Ordering::Relaxed);
        reply
    }

    /// Starts the rules thread.
    pub(crate) fn start(
        shared: &Arc<Shared>,
        runtime: tokio::runtime::Handle,
    ) -> std::io::Result<()> {
        let Some(rules) = &shared.rules else {
            return Ok(());
        };
        let Some(rx) = rules.rx.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Ok(());
        };
        let shared = Arc::downgrade(shared);
        std::thread::Builder::new()
            .name("gyr-hub-rules".into())
            .spawn(move || run(shared, runtime, rx))?;
        Ok(())
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn reply(set: &RuleSet, states: &[gyr_rules::RuleState], loaded: u64) -> v1::ListRulesReply {
    let info = set.info();
    let rules = info
        .iter()
        .map(|r| {
            let s = states.iter().find(|s| s.name == r.name);
            let last = s.and_then(|s| s.last_firing.as_ref());
            v1::RuleInfo {
                name: r.name.clone(),
                on: r.on.clone().unwrap_or_default(),
                when: r.when.clone(),
                fired: s.map_or(0, |s| s.fired),
                last_fired_unix_ns: 0,
                last_pid: last.map_or(0, |l| l.pid),
                errors: s.map_or(0, |s| s.errors),
                last_error: s.and_then(|s| s.last_error.clone()).unwrap_or_default(),
            }
        })
        .collect();
    v1::ListRulesReply {
        origin: set.origin().to_owned(),
        rules,
        load_error: String::new(),
        loaded_unix_ns: loaded,
        events_missed: 0,
    }
}

/// The file's identity, to notice a change: length and modification time.
fn stamp(path: &Path) -> Option<(u64, SystemTime)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

struct Thread {
    shared: std::sync::Weak<Shared>,
    runtime: tokio::runtime::Handle,
    engine: Engine,
    schemas: HashMap<(u32, u32), Schema>,
    /// When each rule last fired, on the Unix clock (the engine knows program time only).
    fired_at: HashMap<String, u64>,
    loaded: u64,
    load_error: String,
    generation: u64,
}

fn run(shared: std::sync::Weak<Shared>, runtime: tokio::runtime::Handle, rx: Receiver<Input>) {
    let Some(path) = shared
        .upgrade()
        .and_then(|s| s.rules.as_ref().map(|r| r.path.clone()))
    else {
        return;
    };
    let mut stamp_seen = stamp(&path);
    // Checked when the hub started; if it changed since and no longer loads, no rules run
    // until it is fixed.
    let (set, load_error) = match RuleSet::load(&path) {
        Ok(set) => (set, String::new()),
        Err(e) => {
            eprintln!("gyr hub: the rules file was refused, no rules run until it is fixed: {e}");
            let empty = RuleSet::parse("", &path.display().to_string());
            match empty {
                Ok(set) => (set, e.to_string()),
                Err(_) => return,
            }
        }
    };
    let mut t = Thread {
        shared,
        runtime,
        engine: Engine::new(set),
        schemas: HashMap::new(),
        fired_at: HashMap::new(),
        loaded: now_ns(),
        load_error,
        generation: 1,
    };
    t.publish_state();
    let mut last_reload = Instant::now();
    let mut last_state = Instant::now();
    let mut dirty = false;
    loop {
        match rx.recv_timeout(STATE_EVERY) {
            Ok(input) => {
                t.take(input);
                dirty = true;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if t.shared.strong_count() == 0 {
            return;
        }
        if last_reload.elapsed() >= RELOAD_EVERY {
            last_reload = Instant::now();
            let now = stamp(&path);
            if now != stamp_seen {
                stamp_seen = now;
                t.reload(&path);
                dirty = true;
            }
            t.forget_ended();
        }
        if dirty && last_state.elapsed() >= STATE_EVERY {
            last_state = Instant::now();
            dirty = false;
            t.publish_state();
        }
    }
}

impl Thread {
    fn take(&mut self, input: Input) {
        for s in input.schemas {
            self.schemas.insert((input.pid, s.id), s);
        }
        for (type_id, t_ns, values) in input.events {
            let Some(schema) = self.schemas.get(&(input.pid, type_id)) else {
                continue;
            };
            let firings = self.engine.event(&EventRef {
                pid: input.pid,
                program: &input.program,
                t_ns,
                schema,
                values: &values,
            });
            for f in firings {
                self.fired_at.insert(f.rule.clone(), now_ns());
                for (rule, message) in self.carry_out(f) {
                    self.engine.action_failed(&rule, message);
                }
            }
        }
    }

    fn reload(&mut self, path: &Path) {
        match RuleSet::load(path) {
            Ok(set) => {
                eprintln!(
                    "gyr hub: rules reloaded from {} ({} rules)",
                    path.display(),
                    set.len()
                );
                self.generation += 1;
                if let Some(shared) = self.shared.upgrade()
                    && let Some(r) = &shared.rules
                {
                    r.watch_types(&set, self.generation);
                }
                self.engine.replace(set);
                self.loaded = now_ns();
                self.load_error.clear();
            }
            Err(e) => {
                eprintln!(
                    "gyr hub: the rules file changed but was refused, the rules in force go on: {e}"
                );
                self.load_error = e.to_string();
            }
        }
    }

    /// Programs that ended leave the engine: their windows and facts go.
    fn forget_ended(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut alive = HashSet::new();
        shared.programs.each(|p| {
            if p.alive {
                alive.insert(p.pid);
            }
        });
        let known: HashSet<u32> = self.schemas.keys().map(|(pid, _)| *pid).collect();
        for pid in known.difference(&alive) {
            self.engine.forget_program(*pid);
            self.schemas.retain(|(p, _), _| p != pid);
        }
    }

    fn publish_state(&self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let Some(r) = &shared.rules else { return };
        let mut reply = reply(self.engine.rule_set(), &self.engine.rules(), self.loaded);
        for rule in &mut reply.rules {
            rule.last_fired_unix_ns = self.fired_at.get(&rule.name).copied().unwrap_or(0);
        }
        reply.load_error = self.load_error.clone();
        *r.state.lock().unwrap_or_else(|e| e.into_inner()) = reply;
    }

    /// Carries out what a firing asks for; returns the actions that do not apply, as (rule,
    /// why), to be counted in the rule's errors.
    fn carry_out(&self, f: Firing) -> Vec<(String, String)> {
        let mut not_applied = Vec::new();
        let Some(shared) = self.shared.upgrade() else {
            return not_applied;
        };
        let target = match &f.target {
            None => Some(f.pid),
            Some(name) => find_program(&shared, name),
        };
        let who = format!("rule {} (hub)", f.rule);
        for action in &f.actions {
            let call = match action {
                Action::Alert { severity, message } => {
                    raise(
                        &shared,
                        f.pid,
                        f.t_ns,
                        &severity.to_string(),
                        message,
                        &f.rule,
                    );
                    continue;
                }
                Action::Assert { .. } | Action::Retract { .. } => continue,
                Action::Set { path, value } => Steer::Set(path.clone(), value.clone()),
                Action::Call { path, args } => Steer::Call(path.clone(), args.clone()),
                Action::Sensor {
                    name,
                    enabled,
                    rate,
                } => Steer::Sensor(name.clone(), *enabled, *rate),
                Action::Start => watched("start", vec![]),
                Action::Stop => watched("stop", vec![]),
                Action::Restart { args } => watched("restart", vec![Value::Str(args.clone())]),
                Action::Signal { signal } => watched("signal", vec![Value::Str(signal.clone())]),
                Action::Control { line } => watched("control", vec![Value::Str(line.clone())]),
                Action::SetInput { file, key, value } => watched(
                    "set_input",
                    vec![
                        Value::Str(file.clone()),
                        Value::Str(key.clone()),
                        Value::Str(value.clone()),
                    ],
                ),
                other => {
                    let message = format!("the hub cannot carry out `{other}`");
                    raise(&shared, f.pid, f.t_ns, "warning", &message, &f.rule);
                    continue;
                }
            };
            let Some(pid) = target else {
                let message = format!(
                    "no program `{}` to {}: the rule's target names none the hub watches",
                    f.target.as_deref().unwrap_or_default(),
                    action
                );
                raise(&shared, f.pid, f.t_ns, "warning", &message, &f.rule);
                continue;
            };
            // Program control is a watch-dog's: a program without its `watched` object (an
            // instrumented program, an ensemble, which retries its members itself) is not
            // one, and the rule's error says so rather than an alert each time.
            if let Steer::Call(path, _) = &call
                && path.starts_with(&format!("{WATCHED_OBJECT}."))
                && shared.programs.with(pid, |p| {
                    p.objects
                        .as_ref()
                        .is_some_and(|o| !o.objects.iter().any(|x| x.name == WATCHED_OBJECT))
                }) == Some(true)
            {
                not_applied.push((
                    f.rule.clone(),
                    format!(
                        "`{action}` controls a watch-dog's program, and program {pid} is not run by a watch-dog (it has no `{WATCHED_OBJECT}` object)"
                    ),
                ));
                continue;
            }
            let client = shared.clients().get(&pid).cloned();
            let Some(client) = client else {
                let message = format!(
                    "cannot {action}: the hub cannot steer program {pid} (it has no steering server the hub reaches)"
                );
                raise(&shared, f.pid, f.t_ns, "warning", &message, &f.rule);
                continue;
            };
            let (shared2, who2, rule, t_ns, alert_pid) =
                (shared.clone(), who.clone(), f.rule.clone(), f.t_ns, f.pid);
            let what = action.to_string();
            self.runtime.spawn(async move {
                let result = tokio::time::timeout(CALL_TIMEOUT, call.send(&client, &who2)).await;
                let err = match result {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e,
                    Err(_) => format!("no answer within {CALL_TIMEOUT:?}"),
                };
                let message = format!("{what} failed: {err}");
                raise(&shared2, alert_pid, t_ns, "warning", &message, &rule);
            });
        }
        not_applied
    }
}

/// A steering request a rule makes.
enum Steer {
    Set(String, Value),
    Call(String, Vec<Value>),
    Sensor(String, bool, Option<f64>),
}

fn watched(actuator: &str, args: Vec<Value>) -> Steer {
    Steer::Call(format!("{WATCHED_OBJECT}.{actuator}"), args)
}

impl Steer {
    async fn send(self, c: &crate::input::ProgramClient, who: &str) -> Result<(), String> {
        let mut inner = c.inner.clone();
        let status = |s: tonic::Status| s.message().to_owned();
        match self {
            Steer::Set(path, value) => {
                let reply = inner
                    .set(c.req(
                        v1::SetRequest {
                            writes: vec![v1::PathValue {
                                path,
                                value: Some(v1::Value::from(&value)),
                            }],
                        },
                        who,
                    ))
                    .await
                    .map_err(status)?;
                let _ = reply;
                Ok(())
            }
            Steer::Call(target, args) => {
                inner
                    .call(c.req(
                        v1::CallRequest {
                            target,
                            args: args.iter().map(v1::Value::from).collect(),
                            ..Default::default()
                        },
                        who,
                    ))
                    .await
                    .map_err(status)?;
                Ok(())
            }
            Steer::Sensor(name, enabled, rate) => {
                inner
                    .sensor_control(c.req(
                        v1::SensorControlRequest {
                            scope: if name.is_empty() {
                                v1::sensor_control_request::Scope::Global
                            } else {
                                v1::sensor_control_request::Scope::Type
                            } as i32,
                            name,
                            enabled: Some(enabled),
                            per_second: rate,
                            ..Default::default()
                        },
                        who,
                    ))
                    .await
                    .map_err(status)?;
                Ok(())
            }
        }
    }
}

/// The live program a rule's `target` names: its pid, or the name of its program (the last
/// part of its command's first word, or of the command a watch-dog runs).
fn find_program(shared: &Shared, name: &str) -> Option<u32> {
    if let Ok(pid) = name.parse::<u32>() {
        return shared.programs.with(pid, |_| pid);
    }
    let mut found = None;
    shared.programs.each(|p| {
        if found.is_none() && p.alive && p.command_line.iter().any(|w| program_name(w) == name) {
            found = Some(p.pid);
        }
    });
    found
}

/// The name a program goes by in rules: its command's file name.
pub(crate) fn program_name(command: &str) -> &str {
    command.rsplit('/').next().unwrap_or(command)
}

/// Raises an alert about program `pid`, as a rule does.
fn raise(shared: &Shared, pid: u32, t_ns: u64, severity: &str, message: &str, rule: &str) {
    shared.programs.with(pid, |p| {
        p.raise_alert(t_ns as f64 / 1e9, severity, message, rule);
    });
}
