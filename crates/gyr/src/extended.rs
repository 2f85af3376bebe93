//! Extended sensors: user code with state that decides whether and what to emit.
//!
//! Falcon's extended sensors filtered or combined data on the application's side before any
//! record was made, when tracing every value would cost too much or say too little. They run on
//! the application's thread, so they should be cheap; they obey the switch and rate of the event
//! type they emit.
//!
//! gyr provides two common ones and a general form:
//! - [`Threshold`]: emit only when a value moved by more than a threshold since the last emit;
//! - [`Aggregate`]: fold N observations into one `{count, sum, min, max, mean}` event;
//! - [`Extended`]: any state and any decision, as a closure.

use crate::registry::{self, RegisterError, STATE_OFF, SensorType};
use crate::sensor::{Sensor, emit, emit_limited};
use gyr_core::{Field, FieldType};
use std::sync::atomic::Ordering;

/// Emits an event only when the observed value moved by more than `threshold` since the value
/// last emitted (the first observation is always emitted).
///
/// ```
/// #[derive(gyr::Sensor)]
/// struct Temperature { kelvin: f64 }
/// let mut t = gyr::extended::Threshold::new(0.5);
/// for k in [300.0, 300.2, 301.0] {
///     t.observe(k, || Temperature { kelvin: k }); // emits at 300.0 and 301.0
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Threshold {
    threshold: f64,
    last: Option<f64>,
}

impl Threshold {
    /// A filter passing moves larger than `threshold`.
    pub fn new(threshold: f64) -> Self {
        Threshold {
            threshold,
            last: None,
        }
    }

    /// Observes `value`; emits `make()` if it moved enough. Returns whether it emitted.
    #[inline]
    pub fn observe<E: Sensor>(&mut self, value: f64, make: impl FnOnce() -> E) -> bool {
        if E::sensor_type().state.load(Ordering::Relaxed) == STATE_OFF {
            return false;
        }
        match self.last {
            Some(last) if (value - last).abs() <= self.threshold => false,
            _ => {
                self.last = Some(value);
                emit(&make());
                true
            }
        }
    }
}

/// Folds every `every` observations into one event `{count, sum, min, max, mean}` of the event
/// type it registers under its name.
///
/// ```
/// let mut step = gyr::extended::Aggregate::new("step_time", 100).unwrap();
/// for i in 0..1000 { step.observe(i as f64); } // 10 events
/// ```
#[derive(Debug)]
pub struct Aggregate {
    ty: &'static SensorType,
    every: u64,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Aggregate {
    /// Registers the event type `name` and aggregates `every` observations per event.
    pub fn new(name: &str, every: u64) -> Result<Self, RegisterError> {
        let fields = ["count", "sum", "min", "max", "mean"]
            .iter()
            .map(|n| {
                Field::new(
                    *n,
                    if *n == "count" {
                        FieldType::U64
                    } else {
                        FieldType::F64
                    },
                )
            })
            .collect();
        let ty = registry::register_dynamic(name, fields, "extended")?;
        Ok(Aggregate {
            ty,
            every: every.max(1),
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        })
    }

    /// Adds one observation; emits when `every` have been seen.
    #[inline]
    pub fn observe(&mut self, v: f64) {
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if self.count >= self.every {
            self.flush();
        }
    }

    /// Emits what has been aggregated so far (if anything) and starts over.
    pub fn flush(&mut self) {
        if self.count == 0 {
            return;
        }
        let mut payload = [0u8; 40];
        payload[..8].copy_from_slice(&self.count.to_le_bytes());
        let mean = self.sum / self.count as f64;
        for (i, v) in [self.sum, self.min, self.max, mean].into_iter().enumerate() {
            payload[8 + i * 8..16 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        emit_limited(self.ty, &self.ty.limits, payload.len(), |out| {
            out.copy_from_slice(&payload)
        });
        self.count = 0;
        self.sum = 0.0;
        self.min = f64::INFINITY;
        self.max = f64::NEG_INFINITY;
    }
}

/// An extended sensor with any state: `decide(&mut state, input)` returns the event to emit,
/// if any.
///
/// ```
/// #[derive(gyr::Sensor)]
/// struct Stall { iteration: u64, residual: f64 }
/// // Emit when the residual stops falling for 10 iterations in a row.
/// let mut stall = gyr::extended::Extended::new((f64::MAX, 0u32), |(best, flat): &mut (f64, u32), (i, r): (u64, f64)| {
///     if r < *best { *best = r; *flat = 0; None } else { *flat += 1; (*flat == 10).then_some(Stall { iteration: i, residual: r }) }
/// });
/// stall.observe((1, 0.5));
/// ```
pub struct Extended<S, I, E, F>
where
    F: FnMut(&mut S, I) -> Option<E>,
{
    state: S,
    decide: F,
    _io: std::marker::PhantomData<fn(I) -> E>,
}

impl<S: std::fmt::Debug, I, E, F: FnMut(&mut S, I) -> Option<E>> std::fmt::Debug
    for Extended<S, I, E, F>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extended")
            .field("state", &self.state)
            .finish()
    }
}

impl<S, I, E: Sensor, F: FnMut(&mut S, I) -> Option<E>> Extended<S, I, E, F> {
    /// An extended sensor starting from `state`.
    pub fn new(state: S, decide: F) -> Self {
        Extended {
            state,
            decide,
            _io: std::marker::PhantomData,
        }
    }

    /// Feeds one input; emits if `decide` says so (and the event type is on).
    #[inline]
    pub fn observe(&mut self, input: I) {
        if E::sensor_type().state.load(Ordering::Relaxed) == STATE_OFF && E::sensor_type().id() != 0
        {
            return;
        }
        if let Some(event) = (self.decide)(&mut self.state, input) {
            emit(&event);
        }
    }

    /// The state, for inspection.
    pub fn state(&self) -> &S {
        &self.state
    }
}
