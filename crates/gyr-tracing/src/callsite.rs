//! Call sites: the gyr schemas of each `tracing` call site, found without a lock.
//!
//! # Cost settled once per call site
//!
//! The first event of a call site (or the first with another set of field types) registers a
//! gyr schema for it, under a lock, and keeps its [`gyr::DynamicSensor`] in the call site's
//! slot. Later events find the call site in a fixed-size open-addressing table keyed by the
//! address of its `'static` metadata and read the slot: atomic loads, no lock, no allocation.
//!
//! # Bounds
//!
//! A program's call sites are fixed when it is compiled, but metadata made at run time (a
//! bridge from another logging API) and fields whose type varies could make the number of
//! schemas grow without end. The table holds at most [`DEFAULT_MAX_CALLSITES`] call sites, each
//! with at most [`MAX_VARIANTS`] schemas (sets of field types), and one layer registers at most
//! [`DEFAULT_MAX_SCHEMAS`] schemas. Events beyond the bounds are not recorded: they are counted
//! ([`GyrLayer::unrecorded`](crate::GyrLayer::unrecorded)) and the first is reported once on
//! stderr.

use crate::capture::{self, MAX_FIELDS, Signature, Val};
use gyr::gyr_core::Field as GyrField;
use gyr::{DynamicSensor, Stamp};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use tracing_core::{Level, Metadata};

/// Call sites one layer records, at most. A larger table costs 16 bytes per slot (two to four slots
/// per call site) and holds more call sites made at run time.
pub const DEFAULT_MAX_CALLSITES: usize = 4096;

/// Schemas one layer registers, at most (each a gyr event type, listed by `gyr sensors` and
/// sent to every client once). A larger bound admits more run-time variety.
pub const DEFAULT_MAX_SCHEMAS: usize = 8192;

/// Schemas of one call site, at most: its events with other sets of field types than these
/// are not recorded.
pub const MAX_VARIANTS: usize = 4;

/// One schema of a call site: the field types it was made for and its sensor.
#[derive(Debug)]
struct Variant {
    sig: Signature,
    sensor: DynamicSensor,
}

/// What the layer knows of one call site.
#[derive(Debug)]
pub(crate) struct Callsite {
    meta: &'static Metadata<'static>,
    /// The gyr type name of the call site's first schema ([`type_name`]).
    name: String,
    variants: [OnceLock<Variant>; MAX_VARIANTS],
    /// Serializes registrations of this call site's variants.
    registering: Mutex<()>,
    /// Whether the call site's first unrecorded event has been reported.
    reported: AtomicBool,
}

/// What became of an event handed to [`Callsite::emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Recorded, or dropped at a switch that is off.
    Done,
    /// Not recorded: a bound was reached or the schema was refused.
    Unrecorded,
}

impl Callsite {
    fn new(meta: &'static Metadata<'static>) -> Self {
        Callsite {
            meta,
            name: type_name(meta),
            variants: Default::default(),
            registering: Mutex::new(()),
            reported: AtomicBool::new(false),
        }
    }

    /// The call site's metadata.
    pub(crate) fn meta(&self) -> &'static Metadata<'static> {
        self.meta
    }

    /// Whether the call site's first schema is registered and switched off: then its events
    /// are not gathered at all (one load and a branch after the table lookup).
    #[inline]
    pub(crate) fn is_off(&self) -> bool {
        self.variants[0].get().is_some_and(|v| !v.sensor.is_on())
    }

    /// Records `vals` (their text in `text`) under the schema of their field types,
    /// registering it on first use within `budget`.
    #[inline]
    pub(crate) fn emit(&self, vals: &[Val], text: &[u8], budget: &Budget) -> Outcome {
        let len = capture::encoded_len(vals);
        match self.sensor(capture::signature(vals), budget) {
            Some(sensor) => {
                sensor.emit_encoded(len, |out| capture::encode(vals, text, out));
                Outcome::Done
            }
            None => Outcome::Unrecorded,
        }
    }

    /// Records a payload encoded already (a span's fields, encoded once when they were
    /// recorded) under the schema of `sig`, stamped `at` (its begin's clock reading).
    #[inline]
    pub(crate) fn emit_encoded_at(
        &self,
        sig: Signature,
        payload: &[u8],
        at: Stamp,
        budget: &Budget,
    ) -> Outcome {
        match self.sensor(sig, budget) {
            Some(sensor) => {
                sensor.emit_encoded_at(at, payload.len(), |out| out.copy_from_slice(payload));
                Outcome::Done
            }
            None => Outcome::Unrecorded,
        }
    }

    /// The sensor of the schema for `sig`, registered on first use within `budget`.
    #[inline]
    fn sensor(&self, sig: Signature, budget: &Budget) -> Option<&DynamicSensor> {
        for slot in &self.variants {
            match slot.get() {
                Some(v) if v.sig == sig => return Some(&v.sensor),
                Some(_) => continue,
                None => break,
            }
        }
        self.register(sig, budget)
    }

    /// Registers the schema for `sig` (or finds the one another thread just registered).
    #[cold]
    #[inline(never)]
    fn register(&self, sig: Signature, budget: &Budget) -> Option<&DynamicSensor> {
        let _guard = self.registering.lock().unwrap_or_else(|e| e.into_inner());
        let mut free = None;
        for (k, slot) in self.variants.iter().enumerate() {
            match slot.get() {
                Some(v) if v.sig == sig => return Some(&v.sensor),
                Some(_) => {}
                None => {
                    free = Some(k);
                    break;
                }
            }
        }
        let Some(k) = free else {
            self.report(&format!(
                "its events came with more than {MAX_VARIANTS} different sets of field types; \
                 give each field one type"
            ));
            return None;
        };
        if !budget.take() {
            self.report(&format!(
                "the layer's limit of {} event types is reached; raise it with \
                 `GyrLayer::with_limits`",
                budget.max
            ));
            return None;
        }
        let fields = self.fields(sig);
        let base = if k == 0 {
            self.name.clone()
        } else {
            format!("{}-{}", self.name, k + 1)
        };
        // Another call site may have the same name with other fields (two events on one line,
        // or a span and an event of the same name): try a few suffixes.
        let mut last_err = None;
        for attempt in 0..8 {
            let name = if attempt == 0 {
                base.clone()
            } else {
                format!("{base}-{}", (b'a' + attempt as u8 - 1) as char)
            };
            match DynamicSensor::register(&name, fields.clone()) {
                Ok(sensor) => {
                    let _ = self.variants[k].set(Variant { sig, sensor });
                    return self.variants[k].get().map(|v| &v.sensor);
                }
                Err(e) => last_err = Some(e),
            }
        }
        if let Some(e) = last_err {
            self.report(&e.to_string());
        }
        None
    }

    /// The gyr fields of the schema for `sig`: the present fields, named as gyr allows.
    fn fields(&self, sig: Signature) -> Vec<GyrField> {
        let mut out: Vec<GyrField> = Vec::new();
        for (i, f) in self.meta.fields().iter().enumerate().take(MAX_FIELDS) {
            let Some(ty) = Val::field_type(capture::code_at(sig, i)) else {
                continue;
            };
            let mut name = field_name(f.name());
            while out.iter().any(|g| g.name == name) {
                name.push('_');
            }
            out.push(GyrField::new(name, ty));
        }
        out
    }

    /// Says once, on stderr, why this call site's events are not recorded.
    #[cold]
    fn report(&self, why: &str) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            gyr::diag!(
                "gyr-tracing: events of `{}` ({}) are not recorded: {why}",
                self.name,
                self.meta.name()
            );
        }
    }
}

/// How many more schemas one layer may register.
#[derive(Debug)]
pub(crate) struct Budget {
    used: AtomicUsize,
    pub(crate) max: usize,
}

impl Budget {
    pub(crate) fn new(max: usize) -> Self {
        Budget {
            used: AtomicUsize::new(0),
            max,
        }
    }

    fn take(&self) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }
}

/// The call sites of one layer: a fixed open-addressing table, read without a lock.
#[derive(Debug)]
pub(crate) struct Table {
    slots: Box<[OnceLock<Box<Callsite>>]>,
    max: usize,
    len: AtomicUsize,
    inserting: Mutex<()>,
    /// Whether the table's being full has been reported.
    full_reported: AtomicBool,
    /// Events of call sites the table had no room for.
    pub(crate) overflow: AtomicU64,
}

impl Table {
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        let cap = (max * 2).next_power_of_two();
        Table {
            slots: (0..cap).map(|_| OnceLock::new()).collect(),
            max,
            len: AtomicUsize::new(0),
            inserting: Mutex::new(()),
            full_reported: AtomicBool::new(false),
            overflow: AtomicU64::new(0),
        }
    }

    fn start(&self, meta: &'static Metadata<'static>) -> usize {
        let key = meta as *const Metadata<'static> as usize;
        // Fibonacci hashing of the address (metadata are at least 8-byte aligned).
        (key >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - self.bits())
    }

    fn bits(&self) -> u32 {
        self.slots.len().trailing_zeros()
    }

    /// The call site of `meta`, added on first sight; `None` when the table is full.
    #[inline]
    pub(crate) fn get(&self, meta: &'static Metadata<'static>) -> Option<&Callsite> {
        let mask = self.slots.len() - 1;
        let mut i = self.start(meta);
        for _ in 0..self.slots.len() {
            match self.slots[i].get() {
                Some(c) if std::ptr::eq(c.meta, meta) => return Some(c),
                Some(_) => i = (i + 1) & mask,
                None => return self.insert(meta),
            }
        }
        self.insert(meta)
    }

    #[cold]
    #[inline(never)]
    fn insert(&self, meta: &'static Metadata<'static>) -> Option<&Callsite> {
        let _guard = self.inserting.lock().unwrap_or_else(|e| e.into_inner());
        let mask = self.slots.len() - 1;
        let mut i = self.start(meta);
        loop {
            match self.slots[i].get() {
                Some(c) if std::ptr::eq(c.meta, meta) => return Some(c),
                Some(_) => i = (i + 1) & mask,
                None => break,
            }
        }
        if self.len.load(Ordering::Relaxed) >= self.max {
            self.overflow.fetch_add(1, Ordering::Relaxed);
            if !self.full_reported.swap(true, Ordering::Relaxed) {
                gyr::diag!(
                    "gyr-tracing: events of `{}` and further call sites are not recorded: the \
                     layer's limit of {} call sites is reached; raise it with \
                     `GyrLayer::with_limits`",
                    type_name(meta),
                    self.max
                );
            }
            return None;
        }
        self.len.fetch_add(1, Ordering::Relaxed);
        let _ = self.slots[i].set(Box::new(Callsite::new(meta)));
        self.slots[i].get().map(|c| &**c)
    }
}

/// The gyr type name of a call site's events: its target (`::` as `.`), then its name if the
/// code gave one (`info!(name: "residual", ...)`, a span's name) or `L` and its line, then its
/// level in lower case: `solver.residual.info`, `my_app.io.L42.debug`. Characters gyr does not
/// allow in a name become `_`.
pub fn type_name(meta: &Metadata<'_>) -> String {
    let mut out = String::with_capacity(meta.target().len() + 16);
    push_clean(&mut out, &meta.target().replace("::", "."));
    out.push('.');
    let name = meta.name();
    if meta.is_event() && name.starts_with("event ") {
        match meta.line() {
            Some(line) => {
                out.push('L');
                out.push_str(&line.to_string());
            }
            None => out.push_str("event"),
        }
    } else {
        push_clean(&mut out, name);
    }
    out.push('.');
    out.push_str(level_name(meta.level()));
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        _ => "error",
    }
}

fn push_clean(out: &mut String, s: &str) {
    out.extend(s.chars().map(|c| {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            c
        } else {
            '_'
        }
    }));
}

/// A `tracing` field name as a gyr field name: letters, digits and `_`, starting with a letter
/// or `_` (`log.target` becomes `log_target`, `r#type` becomes `type`).
fn field_name(name: &str) -> String {
    let name = name.strip_prefix("r#").unwrap_or(name);
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_become_gyr_names() {
        assert_eq!(field_name("log.target"), "log_target");
        assert_eq!(field_name("r#type"), "type");
        assert_eq!(field_name("2nd"), "_2nd");
        assert_eq!(field_name(""), "_");
    }

    #[test]
    fn budget_stops_at_its_maximum() {
        let b = Budget::new(2);
        assert!(b.take());
        assert!(b.take());
        assert!(!b.take());
    }
}
