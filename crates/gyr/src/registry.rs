//! The process's event types: schemas by id, and the control state of every sensor type and
//! registered sensor instance: the settings made through [`control`](crate::control), the
//! effective state computed from them, the types watched by steering rules, and the hook that
//! hands their events to the rules.
//!
//! Registration is append-only and rare (once per type per process), so it takes a lock; the
//! hot path never does, it reads the atomics of a [`SensorType`] it already holds.

use gyr_core::{Field, Schema, SchemaError, TypeId};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Effective state: events of this type are not recorded.
pub const STATE_OFF: u32 = 0;
/// Effective state: every event is recorded.
pub(crate) const STATE_ON: u32 = 1;
/// Effective state: take the slow path (not registered yet, or rate-limited).
pub(crate) const STATE_SLOW: u32 = 2;

/// The run-time handle of one event type: its id and its on/off switch.
///
/// `#[derive(Sensor)]` makes one `static` per type; dynamic types (spec files, sampling
/// sensors) leak one. The sensor hot path reads `state` with one relaxed load.
#[derive(Debug)]
pub struct SensorType {
    pub(crate) state: AtomicU32,
    pub(crate) id: AtomicU32,
    pub(crate) limits: Limits,
    /// Rules of the event/action repository watch this type: events are also handed to the
    /// steering thread.
    pub(crate) tapped: AtomicBool,
}

/// Rate-limit state shared by [`SensorType`] and [`SensorInstance`](crate::SensorInstance).
#[derive(Debug)]
pub(crate) struct Limits {
    /// Record one event in this many per thread (0 or 1: all).
    pub(crate) every_nth: AtomicU64,
    /// Minimum ns between recorded events, across threads (0: no limit).
    pub(crate) min_interval_ns: AtomicU64,
    /// GCRA theoretical arrival time, ns since process start.
    pub(crate) next_allowed_ns: AtomicU64,
    /// Events skipped by the limits.
    pub(crate) skipped: AtomicU64,
}

impl Limits {
    pub(crate) const fn new() -> Self {
        Limits {
            every_nth: AtomicU64::new(0),
            min_interval_ns: AtomicU64::new(0),
            next_allowed_ns: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    pub(crate) fn apply(&self, rate: Rate) {
        let (nth, interval) = match rate {
            Rate::All => (0, 0),
            Rate::EveryNth(n) => (n as u64, 0),
            Rate::PerSecond(r) => (0, (1e9 / r.max(1e-9)) as u64),
        };
        self.every_nth.store(nth, Ordering::Relaxed);
        self.min_interval_ns.store(interval, Ordering::Relaxed);
    }

    pub(crate) fn is_limited(&self) -> bool {
        self.every_nth.load(Ordering::Relaxed) > 1
            || self.min_interval_ns.load(Ordering::Relaxed) > 0
    }

    /// Whether an event at `now_ns` passes the per-second limit (GCRA with no burst: at most one
    /// event per interval, so any one-second window holds at most the rate, plus one).
    pub(crate) fn admit_at(&self, now_ns: u64) -> bool {
        let interval = self.min_interval_ns.load(Ordering::Relaxed);
        if interval == 0 {
            return true;
        }
        let mut tat = self.next_allowed_ns.load(Ordering::Relaxed);
        loop {
            if now_ns < tat {
                return false;
            }
            match self.next_allowed_ns.compare_exchange_weak(
                tat,
                now_ns + interval,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(t) => tat = t,
            }
        }
    }
}

impl SensorType {
    /// A handle in the unregistered state; the first emit registers the type.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        SensorType {
            state: AtomicU32::new(STATE_SLOW),
            id: AtomicU32::new(0),
            limits: Limits::new(),
            tapped: AtomicBool::new(false),
        }
    }

    /// Whether events of this type are being dropped at the switch (one relaxed load).
    /// [`emit!`](crate::emit!) checks this before it builds the event.
    #[inline(always)]
    pub fn is_off(&self) -> bool {
        self.state.load(Ordering::Relaxed) == STATE_OFF
    }

    /// The switch's state, for [`emit!`](crate::emit!): loaded once per event.
    #[doc(hidden)]
    #[inline(always)]
    pub fn __state(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    /// The type's id, or 0 before its first registration.
    pub fn id(&self) -> TypeId {
        self.id.load(Ordering::Relaxed)
    }
}

/// How many events a sensor records.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Rate {
    /// Every event.
    #[default]
    All,
    /// One event in `n`, counted per thread (Falcon: "trace every fifth lock access").
    EveryNth(u32),
    /// At most this many events per second, spaced at least `1/r` apart, across all threads.
    /// For a sampling sensor, the sampling rate.
    PerSecond(f64),
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::All => f.write_str("all"),
            Rate::EveryNth(n) => write!(f, "every {n}th"),
            Rate::PerSecond(r) => write!(f, "{r}/s"),
        }
    }
}

/// A setting at one level: unset (inherit) or set.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) enum Setting<T> {
    #[default]
    Inherit,
    Set(T),
}

impl<T: Copy> Setting<T> {
    pub(crate) fn or(self, outer: Setting<T>) -> Setting<T> {
        match self {
            Setting::Set(v) => Setting::Set(v),
            Setting::Inherit => outer,
        }
    }
    pub(crate) fn get_or(self, default: T) -> T {
        match self {
            Setting::Set(v) => v,
            Setting::Inherit => default,
        }
    }
}

/// The control state of one registered sensor instance.
#[derive(Debug)]
pub struct InstanceState {
    pub(crate) state: AtomicU32,
    pub(crate) limits: Limits,
}

/// Control settings for one named sensor type or instance.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Controls {
    pub(crate) enabled: Setting<bool>,
    pub(crate) rate: Setting<Rate>,
}

/// One registered event type.
#[derive(Debug)]
pub(crate) struct TypeEntry {
    pub(crate) schema: Schema,
    pub(crate) handle: &'static SensorType,
    pub(crate) kind: &'static str,
}

/// One registered sensor instance (Falcon: an individually controlled call site).
#[derive(Debug)]
pub(crate) struct InstanceEntry {
    pub(crate) name: String,
    pub(crate) type_name: String,
    pub(crate) handle: &'static InstanceState,
}

#[derive(Debug, Default)]
pub(crate) struct Registry {
    pub(crate) types: Vec<TypeEntry>,
    pub(crate) instances: Vec<InstanceEntry>,
    /// Settings by type or instance name, kept even before the name is registered.
    pub(crate) type_controls: Vec<(String, Controls)>,
    pub(crate) instance_controls: Vec<(String, Controls)>,
    pub(crate) global: Controls,
    pub(crate) running: bool,
    /// Event types watched by the event/action repository.
    pub(crate) tapped: Vec<String>,
}

/// Why an event type could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The schema is invalid.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// Another type with the same name and different fields exists.
    #[error(
        "event type `{name}` is already registered with other fields ({existing}); give one of them another name"
    )]
    Conflict {
        /// The name.
        name: String,
        /// The registered schema.
        existing: String,
    },
}

/// What each recorded event of a type watched by a steering rule is handed to, with its type
/// id and payload: the event/action repository registers it once ([`set_tap`]) when its first
/// rule is added, so that sensors reach the rules without knowing them.
pub(crate) type Tap = fn(TypeId, &[u8]);

/// Payloads of watched events up to this many bytes are copied on the stack and in place in
/// the steering queue, without allocating; a larger one is copied to the heap.
pub(crate) const TAP_INLINE: usize = 120;

static TAP: OnceLock<Tap> = OnceLock::new();

/// Registers the hook of watched events; the first one registered stays.
pub(crate) fn set_tap(hook: Tap) {
    let _ = TAP.set(hook);
}

/// Hands a recorded event of a watched type to the hook, if one is registered.
pub(crate) fn tap(type_id: TypeId, payload: &[u8]) {
    if let Some(hook) = TAP.get() {
        hook(type_id, payload);
    }
}

static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
/// Number of registered schemas, readable without the lock (monitors poll it).
static SCHEMA_COUNT: AtomicU64 = AtomicU64::new(0);

pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    let m = REGISTRY.get_or_init(|| {
        // `gyr.lost` is registered first, so its id is always 1.
        LOST.id.store(LOST_TYPE_ID, Ordering::Release);
        SCHEMA_COUNT.store(1, Ordering::Release);
        let types = vec![TypeEntry {
            schema: gyr_core::lost_schema(LOST_TYPE_ID),
            handle: &LOST,
            kind: "builtin",
        }];
        Mutex::new(Registry {
            types,
            ..Registry::default()
        })
    });
    // A panic while holding this lock cannot leave it half-updated (every update is a push or a
    // store), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn schema_count() -> usize {
    SCHEMA_COUNT.load(Ordering::Acquire) as usize
}

/// Registers a type under `name` with `fields`, or returns the id it already has.
pub(crate) fn register(
    handle: &'static SensorType,
    name: &str,
    fields: Vec<Field>,
    kind: &'static str,
) -> Result<TypeId, RegisterError> {
    let mut reg = registry();
    let id = handle.id.load(Ordering::Acquire);
    if id != 0 {
        return Ok(id);
    }
    if let Some(e) = reg.types.iter().find(|e| e.schema.name == name) {
        if e.schema.fields != fields {
            return Err(RegisterError::Conflict {
                name: name.to_owned(),
                existing: e.schema.to_string(),
            });
        }
        // The same type seen through another handle (e.g. a spec loaded twice): share its id
        // and follow its switch.
        let id = e.schema.id;
        handle.id.store(id, Ordering::Release);
        let st = e.handle.state.load(Ordering::Relaxed);
        handle.state.store(st, Ordering::Relaxed);
        return Ok(id);
    }
    let id = reg.types.len() as TypeId + 1;
    let schema = Schema::new(id, name, fields)?;
    reg.types.push(TypeEntry {
        schema,
        handle,
        kind,
    });
    SCHEMA_COUNT.store(reg.types.len() as u64, Ordering::Release);
    handle.id.store(id, Ordering::Release);
    recompute(&mut reg);
    Ok(id)
}

/// Schemas from index `from` on (ids `from + 1 ..`).
pub(crate) fn schemas_from(from: usize) -> Vec<Schema> {
    registry()
        .types
        .iter()
        .skip(from)
        .map(|e| e.schema.clone())
        .collect()
}

/// The schema registered under `name`.
pub fn schema_by_name(name: &str) -> Option<Schema> {
    registry()
        .types
        .iter()
        .find(|e| e.schema.name == name)
        .map(|e| e.schema.clone())
}

/// All registered schemas, by id.
pub fn schemas() -> Vec<Schema> {
    schemas_from(0)
}

static LOST: SensorType = SensorType::new();

/// The id of the built-in `gyr.lost` event type.
pub const LOST_TYPE_ID: TypeId = 1;

/// Registers a run-time-defined type (spec file, sampling sensor), or returns the handle of the
/// type already registered under `name` with the same fields.
pub(crate) fn register_dynamic(
    name: &str,
    fields: Vec<Field>,
    kind: &'static str,
) -> Result<&'static SensorType, RegisterError> {
    {
        let reg = registry();
        if let Some(e) = reg.types.iter().find(|e| e.schema.name == name) {
            if e.schema.fields != fields {
                return Err(RegisterError::Conflict {
                    name: name.to_owned(),
                    existing: e.schema.to_string(),
                });
            }
            return Ok(e.handle);
        }
    }
    // Validate before leaking a handle.
    Schema::new(1, name, fields.clone())?;
    let handle: &'static SensorType = Box::leak(Box::new(SensorType::new()));
    register(handle, name, fields, kind)?;
    Ok(handle)
}

pub(crate) fn controls(list: &[(String, Controls)], name: &str) -> Controls {
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| *c)
        .unwrap_or_default()
}

/// Recomputes every effective state from the settings; called with the registry locked.
pub(crate) fn recompute(reg: &mut Registry) {
    let global_on = reg.running && reg.global.enabled.get_or(true);
    for t in &reg.types {
        let c = controls(&reg.type_controls, &t.schema.name);
        let on = global_on && c.enabled.get_or(true);
        let rate = c.rate.or(reg.global.rate).get_or(Rate::All);
        t.handle.limits.apply(rate);
        let tapped = reg.tapped.contains(&t.schema.name);
        t.handle.tapped.store(tapped, Ordering::Relaxed);
        let state = match (on, t.handle.limits.is_limited() || tapped) {
            (false, _) => STATE_OFF,
            (true, false) => STATE_ON,
            (true, true) => STATE_SLOW,
        };
        t.handle.state.store(state, Ordering::Relaxed);
    }
    for i in &reg.instances {
        let tc = controls(&reg.type_controls, &i.type_name);
        let ic = controls(&reg.instance_controls, &i.name);
        let on = global_on && tc.enabled.get_or(true) && ic.enabled.get_or(true);
        i.handle
            .limits
            .apply(ic.rate.or(tc.rate).or(reg.global.rate).get_or(Rate::All));
        let tapped = reg.tapped.contains(&i.type_name);
        let state = match (on, i.handle.limits.is_limited() || tapped) {
            (false, _) => STATE_OFF,
            (true, false) => STATE_ON,
            (true, true) => STATE_SLOW,
        };
        i.handle.state.store(state, Ordering::Relaxed);
    }
    let _ = STATE_SLOW;
}
