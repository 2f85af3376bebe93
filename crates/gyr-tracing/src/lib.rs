#![doc = include_str!("../README.md")]
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let mem = gyr::MemorySink::new();
//! let rt = gyr::Builder::new().sink(mem.clone()).start().unwrap();
//! let subscriber = tracing_subscriber::registry().with(gyr_tracing::GyrLayer::new());
//! tracing::subscriber::with_default(subscriber, || {
//!     let _solve = tracing::info_span!("solve", domain = 3_u64).entered();
//!     tracing::info!(name: "residual", step = 7_u64, residual = 0.25, "converging");
//! });
//! rt.shutdown();
//! let events = mem.events(&format!("{}.residual.info", module_path!().replace("::", ".")));
//! assert_eq!(events.len(), 1);
//! ```
//!
//! # What a `tracing` program's data becomes
//!
//! | `tracing` | gyr |
//! |---|---|
//! | an event | an event of its call site's type ([`type_name`]: target, name or line, level), its fields typed as [`capture`](mod@capture) says |
//! | a span entered | `gyr.span.begin { name }`, then, if the span has fields, an event of the span's type with the values recorded at its creation and by `record`, stamped with the begin's time |
//! | a span exited | `gyr.span.end { name }` |
//!
//! Spans are entered and exited on one thread, so each begin pairs with the end that follows
//! it on the same thread, also when a span created on one thread is entered on another: gyr's
//! span durations, timelines and exports read them as they read `gyr::span!`.
//!
//! # Switches and cost
//!
//! Every schema is an ordinary gyr event type: `gyr sensors off NAME`, rules and rates work on
//! it. When a call site's first schema is switched off (or no runtime runs), its events cost a
//! table lookup and one load: their fields are not even visited. Figures for this machine, and
//! against `tracing`'s own formatting layer, are in the README (`gyr-bench ffi`).

#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

mod callsite;
pub mod capture;
mod entered;
mod open;

pub use callsite::{DEFAULT_MAX_CALLSITES, DEFAULT_MAX_SCHEMAS, MAX_VARIANTS, type_name};
pub use capture::MAX_TEXT;

use callsite::{Budget, Outcome, Table};
use capture::{Capture, MAX_FIELDS, SpanFields, SpanVisit};
use gyr::sync::events::{SpanBegin, SpanEnd};
use open::Open;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// The layer: records a subscriber's events and spans as gyr events.
///
/// Add it beside any other layers of a [`tracing_subscriber::Registry`]; it never filters what
/// the others see. It records into the gyr runtime of the process (`gyr::init()`), and records
/// nothing, cheaply, while none runs. Clones share their call sites, schemas and counts (keep
/// one to read [`unrecorded`](Self::unrecorded) after handing the other to a subscriber); each
/// clone keeps its own open spans, since each may serve a registry of its own, whose span ids
/// are its own.
#[derive(Debug)]
pub struct GyrLayer {
    inner: Arc<Inner>,
    open: Arc<Open>,
}

impl Clone for GyrLayer {
    fn clone(&self) -> Self {
        GyrLayer {
            inner: self.inner.clone(),
            open: Arc::default(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    callsites: Table,
    budget: Budget,
    unrecorded: AtomicU64,
}

impl Default for GyrLayer {
    fn default() -> Self {
        GyrLayer::new()
    }
}

impl GyrLayer {
    /// A layer with the default bounds ([`DEFAULT_MAX_CALLSITES`], [`DEFAULT_MAX_SCHEMAS`]).
    pub fn new() -> Self {
        GyrLayer::with_limits(DEFAULT_MAX_CALLSITES, DEFAULT_MAX_SCHEMAS)
    }

    /// A layer recording at most `max_callsites` call sites (events and spans) and registering
    /// at most `max_schemas` gyr event types. Events beyond them are counted, not recorded.
    pub fn with_limits(max_callsites: usize, max_schemas: usize) -> Self {
        GyrLayer {
            inner: Arc::new(Inner {
                callsites: Table::new(max_callsites),
                budget: Budget::new(max_schemas),
                unrecorded: AtomicU64::new(0),
            }),
            open: Arc::default(),
        }
    }

    /// Events (and span field sets) this layer could not record because a bound was reached
    /// or their schema was refused; each kind is also reported once on stderr.
    pub fn unrecorded(&self) -> u64 {
        self.inner.unrecorded.load(Ordering::Relaxed)
            + self.inner.callsites.overflow.load(Ordering::Relaxed)
    }
}

impl GyrLayer {
    /// What tells this layer's entered spans from other layers' (and other clones') on one
    /// thread.
    #[inline]
    fn key(&self) -> usize {
        Arc::as_ptr(&self.open) as usize
    }
}

impl GyrLayer {
    /// A new span's fields, encoded, if it has any and its call site is recorded.
    fn fields_of(
        &self,
        attrs: &Attributes<'_>,
        meta: &'static Metadata<'static>,
    ) -> Option<SpanFields> {
        if meta.fields().is_empty() {
            return None;
        }
        let cs = self.inner.callsites.get(meta)?;
        if cs.is_off() {
            return None;
        }
        let mut visit = SpanVisit::new(meta.fields().len());
        attrs.record(&mut visit);
        Some(visit.finish())
    }

    /// Records span `id`'s begin and, if it has fields, its fields, and notes it entered.
    /// Both events are of one instant: one clock reading stamps them.
    #[inline]
    fn begin(&self, id: &Id, meta: &'static Metadata<'static>, fields: Option<&SpanFields>) {
        let at = gyr::Stamp::now();
        gyr::emit_at(&SpanBegin { name: meta.name() }, at);
        entered::push(self.key(), id.into_u64(), meta.name());
        let Some(fields) = fields else {
            return;
        };
        let Some(cs) = self.inner.callsites.get(meta) else {
            return;
        };
        if !cs.is_off() {
            self.inner.count(cs.emit_encoded_at(
                fields.sig,
                fields.payload(),
                at,
                &self.inner.budget,
            ));
        }
    }
}

impl Inner {
    fn count(&self, outcome: Outcome) {
        if outcome == Outcome::Unrecorded {
            self.unrecorded.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<S> Layer<S> for GyrLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(cs) = self.inner.callsites.get(event.metadata()) else {
            return;
        };
        if cs.is_off() {
            return;
        }
        let mut cap = Capture::new(cs.meta().fields().len());
        event.record(&mut cap);
        self.inner
            .count(cs.emit(cap.vals(), cap.text(), &self.inner.budget));
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let fields = self.fields_of(attrs, meta);
        // The span's slot, or, when another open span holds it, the registry's extensions.
        if let Err(Some(fields)) = self.open.insert(id.into_u64(), meta, fields)
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        // Gathered outside the slot's lock: a value's `Debug` may log, even into this span.
        let mut cap = Capture::new(MAX_FIELDS);
        values.record(&mut cap);
        let kept = self.open.with(id.into_u64(), |e| {
            let n = e.meta.fields().len();
            match &mut e.fields {
                Some(f) => f.update(&cap, n),
                None => e.fields = Some(SpanFields::from_capture(&cap)),
            }
        });
        if kept.is_some() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let n = span.metadata().fields().len();
        let mut ext = span.extensions_mut();
        match ext.get_mut::<SpanFields>() {
            Some(f) => f.update(&cap, n),
            None => ext.insert(SpanFields::from_capture(&cap)),
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        // A span in the table needs no registry lookup; its exit finds the name in this
        // thread's entries.
        let found = self.open.with(id.into_u64(), |e| {
            self.begin(id, e.meta, e.fields.as_ref());
        });
        if found.is_some() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let ext = span.extensions();
        self.begin(id, span.metadata(), ext.get::<SpanFields>());
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        // Dropped outside the slot's lock.
        drop(self.open.remove(id.into_u64()));
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let name = match entered::pop(self.key(), id.into_u64()) {
            Some(name) => name,
            None => match ctx.metadata(id) {
                Some(meta) => meta.name(),
                None => return,
            },
        };
        gyr::emit!(SpanEnd { name });
    }
}
