//! The event/action repository (Falcon): algorithmic steering inside the process.
//!
//! A rule says "when an event of type T matching a predicate arrives, run an action". Actions
//! steer through the same public API as a person would (set attributes, actuate, change sensor
//! control), and run on a steering thread, never on the program's threads.
//!
//! # Latency
//!
//! Events of a watched type do not wait for a local monitor's pass: the sensor that emits one
//! records it in its ring as usual and also hands a copy to the steering thread, through the
//! hook this repository registers with the registry when its first rule is added. That thread
//! spins briefly after each event (events that steer tend to come in bursts) and otherwise
//! parks, so it costs nothing while nothing happens. Falcon measured 610 µs from sensor to
//! steering action; the figure for gyr is in the README (`gyr-bench steering`).
//!
//! # What a watched event costs its thread
//!
//! The copy goes into a queue bounded at [`DEFAULT_TAP_QUEUE`] events, without a lock and,
//! for a payload of at most 120 bytes, without allocating; waking the steering thread when it
//! is parked is one system call. The sensor never waits for the rules: when the queue is full
//! the event is still recorded, the rules miss it, and [`missed`] counts it (the first miss is
//! also said once on standard error).
//!
//! # Rules files
//!
//! With the `rules` feature (on by default), the same thread also runs a rules file of the
//! expert system (`gyr_rules`, format in `docs/rules.md`): [`load_rules`], `Builder::rules`
//! or `GYR_RULES=FILE`. Its rules see the events of the types they name in `on`, tapped as
//! above and decoded once for the closures and the file alike; their actions are carried out
//! in the process (an alert is a `gyr.alert` event, `set` and `actuate` steer under the name
//! `rule NAME`), and the file is read again when it changes. See [`load_rules`].

use super::{SteerError, Who};
use crate::registry::TAP_INLINE;
use gyr_core::value::decode;
use gyr_core::{Schema, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[cfg(feature = "rules")]
mod file;
#[cfg(feature = "rules")]
pub use file::{
    ACTUATION_PATIENCE, FileRuleInfo, MAX_WAITING_ACTUATIONS, RELOAD_EVERY, RulesHandle,
    RulesState, load_rules, rules_file,
};
#[cfg(feature = "rules")]
pub use gyr_rules::RulesError;

/// How long the steering thread keeps spinning for the next event after one arrives: short
/// enough to cost little on a small machine, long enough to catch a burst.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// Events of watched types waiting for the steering thread, at most: enough for a burst while
/// rules run; beyond it the rules miss events (counted by [`missed`]) rather than make the
/// program wait. The queue is allocated when the first rule is added (about 150 KB).
pub const DEFAULT_TAP_QUEUE: usize = 1024;

/// An event as a rule sees it: its type, origin and decoded fields.
#[derive(Debug, Clone)]
pub struct EventView {
    /// The event type.
    pub schema: Schema,
    /// The fields, in schema order.
    pub values: Vec<Value>,
    /// When it arrived at the steering thread, ns since gyr's timestamp 0.
    pub received_ns: u64,
}

impl EventView {
    /// The field named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schema
            .field_index(name)
            .and_then(|i| self.values.get(i))
    }

    /// The field named `name` as a number.
    pub fn f64(&self, name: &str) -> Option<f64> {
        self.get(name).and_then(Value::as_f64)
    }
}

type When = Box<dyn Fn(&EventView) -> bool + Send + Sync>;
type Then = Box<dyn Fn(&EventView, &Who) -> Result<(), SteerError> + Send + Sync>;

struct Rule {
    name: String,
    type_name: String,
    when: When,
    then: Then,
    who: Who,
    fired: AtomicU64,
    /// When its action last ran, ns since the Unix epoch (0: never).
    last_fired_unix_ns: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
    removed: AtomicBool,
}

/// What a client knows about a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// Its name.
    pub name: String,
    /// The event type it watches.
    pub event_type: String,
    /// Times its action ran.
    pub fired: u64,
    /// When its action last ran, in ns since the Unix epoch (0: never).
    pub last_fired_unix_ns: u64,
    /// Times its action failed.
    pub failed: u64,
    /// The last failure's message.
    pub last_error: Option<String>,
}

/// An event of a watched type on its way to the steering thread.
struct Tapped {
    type_id: u32,
    payload: Payload,
}

/// A watched event's payload: in place when small, so that handing it over does not allocate.
enum Payload {
    Inline { len: u8, bytes: [u8; TAP_INLINE] },
    Heap(Vec<u8>),
}

// `Payload::Inline` keeps its length in a `u8`.
const _: () = assert!(TAP_INLINE <= u8::MAX as usize);

impl Payload {
    fn new(payload: &[u8]) -> Self {
        match payload.len() {
            len if len <= TAP_INLINE => {
                let mut bytes = [0u8; TAP_INLINE];
                bytes[..len].copy_from_slice(payload);
                Payload::Inline {
                    len: len as u8,
                    bytes,
                }
            }
            _ => Payload::Heap(payload.to_vec()),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Inline { len, bytes } => &bytes[..*len as usize],
            Payload::Heap(v) => v,
        }
    }
}

struct Repository {
    rules: Mutex<Vec<Arc<Rule>>>,
    tx: SyncSender<Tapped>,
    /// The steering thread, unparked after each event handed to it.
    thread: Thread,
}

static REPOSITORY: OnceLock<Repository> = OnceLock::new();
/// Events of watched types the rules missed because the queue was full.
static MISSED: AtomicU64 = AtomicU64::new(0);

fn repository() -> &'static Repository {
    REPOSITORY.get_or_init(|| {
        let (tx, rx) = sync_channel(DEFAULT_TAP_QUEUE);
        let thread = std::thread::Builder::new()
            .name("gyr-steering".into())
            .spawn(move || steering_thread(rx))
            .expect("start the gyr steering thread")
            .thread()
            .clone();
        crate::registry::set_tap(tap);
        Repository {
            rules: Mutex::new(Vec::new()),
            tx,
            thread,
        }
    })
}

/// Hands an event of a watched type to the steering thread: the hook registered with the
/// registry, called by sensors on the program's threads. It never waits: the queue is
/// bounded, and the steering thread never blocks on it (it parks, and is unparked here), so
/// sending takes no lock either.
fn tap(type_id: u32, payload: &[u8]) {
    let Some(r) = REPOSITORY.get() else { return };
    let tapped = Tapped {
        type_id,
        payload: Payload::new(payload),
    };
    match r.tx.try_send(tapped) {
        Ok(()) => r.thread.unpark(),
        Err(TrySendError::Full(_)) => {
            if MISSED.fetch_add(1, Ordering::Relaxed) == 0 {
                crate::diag!(
                    "gyr: the steering thread is behind: rules miss events of the types they watch (the events are still recorded; counted by gyr::steer::repository::missed)"
                );
            }
        }
        Err(TrySendError::Disconnected(_)) => {}
    }
}

/// Events of watched types the rules missed because the steering thread's queue
/// ([`DEFAULT_TAP_QUEUE`]) was full; the events themselves were recorded.
pub fn missed() -> u64 {
    MISSED.load(Ordering::Relaxed)
}

/// A registered rule; [`RuleHandle::remove`] takes it out.
#[derive(Debug, Clone)]
pub struct RuleHandle {
    name: String,
}

impl RuleHandle {
    /// Removes the rule.
    pub fn remove(self) {
        remove(&self.name);
    }
}

/// Adds a rule `name`: when an event of type `event_type` arrives and `when` holds, run `then`
/// (with the rule as the steering log's "who").
///
/// ```
/// # use gyr::steer::{self, repository};
/// let limit = steer::param("max_load", 0.9f64).register().unwrap();
/// repository::on_event("overload", "work_load", |e| e.f64("load").unwrap_or(0.0) > 0.95, |_e, who| {
///     steer::set("max_load", gyr::gyr_core::Value::Float(0.8), who).map(drop)
/// }).unwrap();
/// # repository::remove("overload");
/// # limit.unregister();
/// ```
pub fn on_event(
    name: &str,
    event_type: &str,
    when: impl Fn(&EventView) -> bool + Send + Sync + 'static,
    then: impl Fn(&EventView, &Who) -> Result<(), SteerError> + Send + Sync + 'static,
) -> Result<RuleHandle, SteerError> {
    let r = repository();
    let mut rules = r.rules.lock().unwrap_or_else(|e| e.into_inner());
    if rules.iter().any(|x| x.name == name) {
        return Err(SteerError::AlreadyRegistered {
            name: name.to_owned(),
        });
    }
    rules.push(Arc::new(Rule {
        name: name.to_owned(),
        type_name: event_type.to_owned(),
        when: Box::new(when),
        then: Box::new(then),
        who: Who::new(format!("rule {name}")),
        fired: AtomicU64::new(0),
        last_fired_unix_ns: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        last_error: Mutex::new(None),
        removed: AtomicBool::new(false),
    }));
    set_taps(&rules);
    Ok(RuleHandle {
        name: name.to_owned(),
    })
}

/// Removes the rule called `name`, if there is one.
pub fn remove(name: &str) {
    let Some(r) = REPOSITORY.get() else { return };
    let mut rules = r.rules.lock().unwrap_or_else(|e| e.into_inner());
    for rule in rules.iter().filter(|x| x.name == name) {
        rule.removed.store(true, Ordering::Relaxed);
    }
    rules.retain(|x| x.name != name);
    set_taps(&rules);
}

/// The event types a rules file's rules watch: tapped beside the closures' types.
static FILE_TYPES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn set_taps(rules: &[Arc<Rule>]) {
    let mut tapped: Vec<String> = rules.iter().map(|r| r.type_name.clone()).collect();
    tapped.extend(
        FILE_TYPES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned(),
    );
    tapped.sort();
    tapped.dedup();
    let mut reg = crate::registry::registry();
    reg.tapped = tapped;
    crate::registry::recompute(&mut reg);
}

/// Taps the event types a rules file watches (and no longer those of its version before).
#[cfg_attr(not(feature = "rules"), allow(dead_code))]
fn set_file_types(types: Vec<String>) {
    let r = repository();
    *FILE_TYPES.lock().unwrap_or_else(|e| e.into_inner()) = types;
    let rules = r.rules.lock().unwrap_or_else(|e| e.into_inner());
    set_taps(&rules);
}

/// Now, in ns since the Unix epoch.
fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Every rule with its counters.
pub fn rules() -> Vec<RuleInfo> {
    let Some(r) = REPOSITORY.get() else {
        return Vec::new();
    };
    r.rules
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|x| RuleInfo {
            name: x.name.clone(),
            event_type: x.type_name.clone(),
            fired: x.fired.load(Ordering::Relaxed),
            last_fired_unix_ns: x.last_fired_unix_ns.load(Ordering::Relaxed),
            failed: x.failed.load(Ordering::Relaxed),
            last_error: x
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        })
        .collect()
}

fn steering_thread(rx: Receiver<Tapped>) {
    let mut schemas: Vec<Option<Schema>> = Vec::new();
    // The rules file's engine lives here: it is not `Send`, so it is made on this thread.
    #[cfg(feature = "rules")]
    let mut file = file::Runner::new();
    // Until when to spin for the next event of a burst before parking again.
    let mut spin_until: Option<Instant> = None;
    loop {
        #[cfg(feature = "rules")]
        file.poll();
        match rx.try_recv() {
            Ok(t) => {
                if let Some(view) = decode_tapped(t, &mut schemas) {
                    run_closures(&view);
                    #[cfg(feature = "rules")]
                    file.event(&view);
                }
                spin_until = Some(Instant::now() + DEFAULT_SPIN);
            }
            Err(TryRecvError::Empty) => match spin_until {
                Some(deadline) if Instant::now() < deadline => std::hint::spin_loop(),
                // Never a blocking receive: a receiver waiting inside the channel would make
                // every send take the channel's lock to wake it. An unpark that comes before
                // this park makes it return at once, so no event is left waiting.
                _ => {
                    spin_until = None;
                    #[cfg(feature = "rules")]
                    {
                        file.idle();
                        match file.tick() {
                            Some(d) => std::thread::park_timeout(d),
                            None => std::thread::park(),
                        }
                    }
                    #[cfg(not(feature = "rules"))]
                    std::thread::park();
                }
            },
            Err(TryRecvError::Disconnected) => return,
        }
    }
}

/// A tapped event decoded, once, for every rule that watches its type.
fn decode_tapped(t: Tapped, schemas: &mut Vec<Option<Schema>>) -> Option<EventView> {
    let i = t.type_id as usize;
    if schemas.len() <= i {
        schemas.resize(i + 1, None);
    }
    if schemas[i].is_none() {
        schemas[i] = crate::registry::schemas()
            .into_iter()
            .find(|s| s.id == t.type_id);
    }
    let schema = schemas[i].as_ref()?;
    let values = decode(schema, t.payload.bytes()).ok()?;
    Some(EventView {
        schema: schema.clone(),
        values,
        received_ns: crate::clock::now_ns(),
    })
}

fn run_closures(view: &EventView) {
    let schema = &view.schema;
    let rules: Vec<Arc<Rule>> = match REPOSITORY.get() {
        Some(r) => r.rules.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        None => return,
    };
    for rule in rules
        .iter()
        .filter(|r| r.type_name == schema.name && !r.removed.load(Ordering::Relaxed))
    {
        // Rules are user code: a panic counts as a failure of that rule, nothing more.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if (rule.when)(view) {
                Some((rule.then)(view, &rule.who))
            } else {
                None
            }
        }));
        let result = match outcome {
            Ok(None) => continue,
            Ok(Some(r)) => r.map_err(|e| e.to_string()),
            Err(_) => Err("the rule panicked".to_owned()),
        };
        rule.fired.fetch_add(1, Ordering::Relaxed);
        rule.last_fired_unix_ns
            .store(unix_now_ns(), Ordering::Relaxed);
        if let Err(e) = result {
            rule.failed.fetch_add(1, Ordering::Relaxed);
            *rule.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    }
}
