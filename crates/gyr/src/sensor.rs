//! Sensors: the instrumentation points in the application's code.
//!
//! # What is a sensor?
//!
//! Falcon called every instrumentation point a sensor and offered three kinds, which gyr keeps:
//! - a **tracing sensor** emits a timestamped record each time it runs: a struct with
//!   `#[derive(Sensor)]`, then `event.emit()`;
//! - a **sampling sensor** is a value the local monitor reads at a rate
//!   ([`sample`](crate::sample()), [`sample_cell`](crate::sample_cell));
//! - an **extended sensor** is user code with state that decides whether and what to emit
//!   ([`extended`](crate::extended)).
//!
//! Each event type has one switch and one rate (see [`control`](crate::control)); a
//! [`SensorInstance`] adds a switch for one call site.
//!
//! # Cost
//!
//! A disabled sensor costs one relaxed load and a branch. An enabled one reads the clock,
//! reserves room in its thread's ring, writes a 32-byte header and the payload, and publishes it
//! with one release store: no lock, no allocation, no system call. Figures for this machine are
//! in the README (`cargo run --release -p gyr-bench -- sensors`). An event of a type a steering
//! rule watches is also handed to the rules, within the bounds
//! [`repository`](crate::steer::repository) states.

use crate::producer;
use crate::registry::{
    self, InstanceEntry, Limits, RegisterError, STATE_OFF, STATE_ON, SensorType,
};

pub use crate::registry::InstanceState;
use gyr_core::schema::ScalarType;
use gyr_core::{Field, FieldType};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

/// An event type whose values sensors emit. Derive it: `#[derive(gyr::Sensor)]`.
///
/// A hand-written implementation must make [`Sensor::encode`] write exactly
/// [`Sensor::encoded_len`] bytes, in the layout [`gyr_core::value`] specifies.
pub trait Sensor {
    /// The event type's name (the struct's name in snake case, unless renamed).
    const NAME: &'static str;
    /// The fields, in encoding order.
    fn fields() -> Vec<Field>;
    /// The type's run-time handle (a `static` made by the derive).
    fn sensor_type() -> &'static SensorType;
    /// Payload bytes of this value.
    fn encoded_len(&self) -> usize;
    /// Writes the payload into `out`, which is exactly `encoded_len()` bytes long.
    fn encode(&self, out: &mut [u8]);

    /// Records this event, if its sensor is on.
    #[inline(always)]
    fn emit(&self)
    where
        Self: Sized,
    {
        emit(self)
    }
}

/// A type that can be a field of a sensor event.
pub trait SensorField {
    /// The field's type in the schema.
    const TYPE: FieldType;
    /// Encoded bytes of this value.
    fn encoded_len(&self) -> usize;
    /// Writes the value at the start of `out`; returns the bytes written.
    fn encode(&self, out: &mut [u8]) -> usize;
}

macro_rules! scalar_field {
    ($($t:ty => $ft:ident),*) => {$(
        impl SensorField for $t {
            const TYPE: FieldType = FieldType::$ft;
            #[inline(always)]
            fn encoded_len(&self) -> usize { size_of::<$t>() }
            #[inline(always)]
            fn encode(&self, out: &mut [u8]) -> usize {
                out[..size_of::<$t>()].copy_from_slice(&self.to_le_bytes());
                size_of::<$t>()
            }
        }
        impl<const N: usize> SensorField for [$t; N] {
            const TYPE: FieldType = FieldType::Array(ScalarType::$ft, N as u32);
            #[inline(always)]
            fn encoded_len(&self) -> usize { N * size_of::<$t>() }
            #[inline(always)]
            fn encode(&self, out: &mut [u8]) -> usize {
                const { assert!(N > 0 && N <= gyr_core::schema::MAX_ARRAY_LEN as usize, "sensor arrays hold 1 to 65536 elements") };
                let out = &mut out[..N * size_of::<$t>()];
                for (chunk, v) in out.chunks_exact_mut(size_of::<$t>()).zip(self) {
                    chunk.copy_from_slice(&v.to_le_bytes());
                }
                N * size_of::<$t>()
            }
        }
    )*};
}
scalar_field!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64, f32 => F32, f64 => F64);

impl SensorField for usize {
    const TYPE: FieldType = FieldType::U64;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        8
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) -> usize {
        (*self as u64).encode(out)
    }
}

impl SensorField for isize {
    const TYPE: FieldType = FieldType::I64;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        8
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) -> usize {
        (*self as i64).encode(out)
    }
}

impl SensorField for bool {
    const TYPE: FieldType = FieldType::Bool;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        1
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) -> usize {
        out[0] = *self as u8;
        1
    }
}

#[inline]
fn encode_var(bytes: &[u8], out: &mut [u8]) -> usize {
    // Strings longer than 4 GiB cannot occur in a ring (records are at most a quarter of it).
    out[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    out[4..4 + bytes.len()].copy_from_slice(bytes);
    4 + bytes.len()
}

impl SensorField for str {
    const TYPE: FieldType = FieldType::Str;
    #[inline]
    fn encoded_len(&self) -> usize {
        4 + self.len()
    }
    #[inline]
    fn encode(&self, out: &mut [u8]) -> usize {
        encode_var(self.as_bytes(), out)
    }
}

impl SensorField for String {
    const TYPE: FieldType = FieldType::Str;
    fn encoded_len(&self) -> usize {
        4 + self.len()
    }
    fn encode(&self, out: &mut [u8]) -> usize {
        encode_var(self.as_bytes(), out)
    }
}

impl SensorField for [u8] {
    const TYPE: FieldType = FieldType::Bytes;
    fn encoded_len(&self) -> usize {
        4 + self.len()
    }
    fn encode(&self, out: &mut [u8]) -> usize {
        encode_var(self, out)
    }
}

impl SensorField for Vec<u8> {
    const TYPE: FieldType = FieldType::Bytes;
    fn encoded_len(&self) -> usize {
        4 + self.len()
    }
    fn encode(&self, out: &mut [u8]) -> usize {
        encode_var(self, out)
    }
}

impl<T: SensorField + ?Sized> SensorField for &T {
    const TYPE: FieldType = T::TYPE;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        (**self).encoded_len()
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) -> usize {
        (**self).encode(out)
    }
}

/// Records an event written as a struct literal, checking the sensor's switch *before* the
/// event is built: a disabled sensor then costs one relaxed load and a branch, whatever the
/// fields cost to compute. Use it in hot loops; `event.emit()` is the same otherwise.
///
/// ```
/// #[derive(gyr::Sensor)]
/// struct Step { n: u64, residual: f64 }
/// # fn expensive() -> f64 { 0.5 }
/// gyr::emit!(Step { n: 7, residual: expensive() }); // `expensive()` runs only if Step is on
/// ```
#[macro_export]
macro_rules! emit {
    ($($ty:ident)::+ { $($fields:tt)* }) => {{
        let ty = <$($ty)::+ as $crate::Sensor>::sensor_type();
        let state = ty.__state();
        if state != $crate::__private::STATE_OFF {
            $crate::__private::emit_in_state(ty, state, &$($ty)::+ { $($fields)* })
        }
    }};
}

/// Records `event`, if its sensor is on. Same as `event.emit()`.
///
/// Always inlined, so that a disabled sensor is one load and a branch at the call site, and the
/// event itself is only built when the sensor is on.
#[inline(always)]
pub fn emit<E: Sensor>(event: &E) {
    let ty = E::sensor_type();
    let state = ty.state.load(Ordering::Relaxed);
    if state != STATE_OFF {
        emit_in_state(ty, state, event)
    }
}

/// Records `event`, if its sensor is on, stamped `at` rather than with a clock reading of its
/// own: for events that happen at one instant, so that the clock is read once for them (an MPI
/// call's begin and the message it sends, a receive's message and the call's end).
///
/// A thread's records never go back in time: a stamp older than the thread's last record
/// (read before another event was recorded) is raised to that record's. An event of a type
/// that is rate-limited or watched by a steering rule reads the clock itself.
#[inline(always)]
pub fn emit_at<E: Sensor>(event: &E, at: crate::clock::Stamp) {
    let ty = E::sensor_type();
    let state = ty.state.load(Ordering::Relaxed);
    if state == STATE_ON {
        let id = ty.id.load(Ordering::Relaxed);
        producer::record_at(id, at.0, event.encoded_len(), |out| event.encode(out));
    } else if state != STATE_OFF {
        emit_slow_at(ty, event, at);
    }
}

/// Records two events of one instant, `first` then `second`, both stamped `at`, each if its
/// sensor is on: what two [`emit_at`] calls record, with the thread's buffer found once for
/// both while both sensors are plainly on (an MPI receive's message and its call's end: the
/// buffer's lookup, borrow and last-stamp compare once, not twice).
#[inline(always)]
pub fn emit_pair_at<A: Sensor, B: Sensor>(first: &A, second: &B, at: crate::clock::Stamp) {
    let (ta, tb) = (A::sensor_type(), B::sensor_type());
    if ta.state.load(Ordering::Relaxed) == STATE_ON && tb.state.load(Ordering::Relaxed) == STATE_ON
    {
        let (ia, ib) = (ta.id.load(Ordering::Relaxed), tb.id.load(Ordering::Relaxed));
        producer::record_pair_at(
            at.0,
            (ia, first.encoded_len(), |out: &mut [u8]| first.encode(out)),
            (ib, second.encoded_len(), |out: &mut [u8]| {
                second.encode(out)
            }),
        );
    } else {
        emit_at(first, at);
        emit_at(second, at);
    }
}

/// [`emit_slow`] for [`emit_at`]: a type used for the first time is stamped `at` too.
#[cold]
#[inline(never)]
fn emit_slow_at<E: Sensor>(ty: &'static SensorType, event: &E, at: crate::clock::Stamp) {
    if ty.id() == 0 && !register_or_report(ty, E::NAME, E::fields) {
        return;
    }
    if ty.state.load(Ordering::Relaxed) == STATE_ON {
        producer::record_at(ty.id(), at.0, event.encoded_len(), |out| event.encode(out));
    } else {
        emit_limited(ty, &ty.limits, event.encoded_len(), |out| event.encode(out));
    }
}

/// [`emit`] once the switch's `state` is loaded (and not off): what [`emit!`] expands to.
#[doc(hidden)]
#[inline(always)]
pub fn emit_in_state<E: Sensor>(ty: &'static SensorType, state: u32, event: &E) {
    if state == STATE_ON {
        let id = ty.id.load(Ordering::Relaxed);
        producer::record(id, event.encoded_len(), |out| event.encode(out));
        return;
    }
    emit_slow(ty, event);
}

/// Registers the type on first use, or applies a rate limit.
#[cold]
#[inline(never)]
fn emit_slow<E: Sensor>(ty: &'static SensorType, event: &E) {
    if ty.id() == 0 && !register_or_report(ty, E::NAME, E::fields) {
        return;
    }
    emit_limited(ty, &ty.limits, event.encoded_len(), |out| event.encode(out));
}

pub(crate) fn register_or_report(
    ty: &'static SensorType,
    name: &str,
    fields: fn() -> Vec<Field>,
) -> bool {
    match registry::register(ty, name, fields(), "tracing") {
        Ok(_) => true,
        Err(e) => {
            // Turn this sensor off for good so the message appears once, and go on: a bad
            // sensor definition must not stop the application.
            ty.state.store(STATE_OFF, Ordering::Relaxed);
            crate::diag!("gyr: sensor `{name}` is disabled: {e}");
            false
        }
    }
}

/// Records through the slow path: honours switch state and rate limits.
pub(crate) fn emit_limited(
    ty: &SensorType,
    limits: &Limits,
    len: usize,
    encode: impl FnOnce(&mut [u8]),
) {
    emit_gated(ty, &ty.state, limits, len, encode)
}

fn emit_gated(
    ty: &SensorType,
    state: &AtomicU32,
    limits: &Limits,
    len: usize,
    encode: impl FnOnce(&mut [u8]),
) {
    let id = ty.id();
    match state.load(Ordering::Relaxed) {
        STATE_OFF => {}
        STATE_ON => producer::record(id, len, encode),
        _ if ty.tapped.load(Ordering::Relaxed) => record_tapped(id, limits, len, encode),
        _ => {
            producer::record_limited(limits, id, len, encode);
        }
    }
}

/// Records an event of a type a steering rule watches, and hands it to the rules' hook
/// ([`registry::tap`]): encoded once, on the stack unless it exceeds
/// [`TAP_INLINE`](registry::TAP_INLINE) bytes.
fn record_tapped(id: u32, limits: &Limits, len: usize, encode: impl FnOnce(&mut [u8])) {
    let mut stack = [0u8; registry::TAP_INLINE];
    let mut heap = Vec::new();
    let payload: &mut [u8] = if len <= stack.len() {
        &mut stack[..len]
    } else {
        heap.resize(len, 0);
        &mut heap
    };
    encode(payload);
    if producer::record_limited(limits, id, len, |out| out.copy_from_slice(payload)) {
        registry::tap(id, payload);
    }
}

/// One individually controlled sensor: Falcon's registered instrumentation object.
///
/// It emits events of type `E`, under `E`'s switch and rate, and adds a switch and a rate of
/// its own, so that one call site (one domain, one lock) can be traced without the others.
///
/// ```
/// #[derive(gyr::Sensor)]
/// struct LockWait { ns: u64 }
/// let hot_lock = gyr::SensorInstance::<LockWait>::new("lock.table3").unwrap();
/// hot_lock.emit(&LockWait { ns: 120 });
/// gyr::control::set_enabled(&gyr::control::Target::Instance("lock.table3".into()), false);
/// ```
pub struct SensorInstance<E> {
    ty: &'static SensorType,
    state: &'static InstanceState,
    _event: PhantomData<fn(&E)>,
}

impl<E> std::fmt::Debug for SensorInstance<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SensorInstance")
            .field("type_id", &self.ty.id())
            .finish()
    }
}

impl<E: Sensor> SensorInstance<E> {
    /// Registers (or finds) the instance called `name` of event type `E`.
    pub fn new(name: &str) -> Result<Self, RegisterError> {
        let ty = E::sensor_type();
        if ty.id() == 0 {
            registry::register(ty, E::NAME, E::fields(), "tracing")?;
        }
        let mut reg = registry::registry();
        let state = match reg.instances.iter().find(|i| i.name == name) {
            Some(i) => i.handle,
            None => {
                let handle: &'static InstanceState = Box::leak(Box::new(InstanceState {
                    state: AtomicU32::new(STATE_OFF),
                    limits: Limits::new(),
                }));
                reg.instances.push(InstanceEntry {
                    name: name.to_owned(),
                    type_name: E::NAME.to_owned(),
                    handle,
                });
                registry::recompute(&mut reg);
                handle
            }
        };
        Ok(SensorInstance {
            ty,
            state,
            _event: PhantomData,
        })
    }

    /// Records `event` if the global, type and instance switches are on.
    #[inline]
    pub fn emit(&self, event: &E) {
        if self.state.state.load(Ordering::Relaxed) == STATE_OFF {
            return;
        }
        emit_gated(
            self.ty,
            &self.state.state,
            &self.state.limits,
            event.encoded_len(),
            |out| event.encode(out),
        );
    }
}
