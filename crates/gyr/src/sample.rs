//! Sampling sensors: values the local monitor reads at a rate, instead of events the program
//! emits.
//!
//! Falcon's sampling sensors were counters in shared memory that the local monitors read
//! periodically: the cheapest kind of sensor, because the application only updates a value.
//! gyr offers two forms: a closure the monitor calls ([`sample`]), and an atomic cell the
//! program stores into ([`sample_cell`]). Either becomes an event type with one field, `value`,
//! recorded by the first local monitor at the sensor's interval. The interval can be changed
//! on the handle, or through [`control::set_rate`](crate::control::set_rate) with
//! [`Rate::PerSecond`](crate::control::Rate::PerSecond).

use crate::config::DEFAULT_SAMPLE_INTERVAL;
use crate::primitives::lock;
use crate::registry::{self, RegisterError, STATE_OFF, SensorType};
use crate::sensor::SensorField;
use gyr_core::Field;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Reader = Box<dyn Fn(&mut [u8; 8]) -> usize + Send + Sync>;

struct Sampler {
    name: String,
    ty: &'static SensorType,
    read: Reader,
    interval_ns: AtomicU64,
    next_due_ns: AtomicU64,
    removed: AtomicBool,
}

static SAMPLERS: Mutex<Vec<Arc<Sampler>>> = Mutex::new(Vec::new());

/// A registered sampling sensor. Dropping the handle leaves it running; call
/// [`SamplingSensor::remove`] to stop it.
#[derive(Clone)]
pub struct SamplingSensor {
    sampler: Arc<Sampler>,
}

impl std::fmt::Debug for SamplingSensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplingSensor")
            .field("name", &self.sampler.name)
            .finish()
    }
}

impl SamplingSensor {
    /// Reads the value every `interval` (at most once per monitor pass, about 1 ms).
    pub fn set_interval(&self, interval: Duration) {
        self.sampler
            .interval_ns
            .store(interval.as_nanos().max(1) as u64, Ordering::Relaxed);
        self.sampler.next_due_ns.store(0, Ordering::Relaxed);
    }

    /// The event type's name.
    pub fn name(&self) -> &str {
        &self.sampler.name
    }

    /// Stops sampling.
    pub fn remove(self) {
        self.sampler.removed.store(true, Ordering::Relaxed);
        lock(&SAMPLERS).retain(|s| !Arc::ptr_eq(s, &self.sampler));
    }
}

/// Trait for the numbers a sampling sensor can report.
pub trait SampleValue: SensorField + Copy + Send + 'static {}
impl<T: SensorField + Copy + Send + 'static> SampleValue for T {}

fn register<T: SampleValue>(name: &str, read: Reader) -> Result<SamplingSensor, RegisterError> {
    if T::TYPE.fixed_size().is_none_or(|n| n > 8) {
        return Err(RegisterError::Schema(gyr_core::SchemaError::BadName(
            format!("{name}: a sampled value must be a number or bool"),
        )));
    }
    let ty = registry::register_dynamic(name, vec![Field::new("value", T::TYPE)], "sampling")?;
    let sampler = Arc::new(Sampler {
        name: name.to_owned(),
        ty,
        read,
        interval_ns: AtomicU64::new(DEFAULT_SAMPLE_INTERVAL.as_nanos() as u64),
        next_due_ns: AtomicU64::new(0),
        removed: AtomicBool::new(false),
    });
    lock(&SAMPLERS).push(sampler.clone());
    Ok(SamplingSensor { sampler })
}

/// Registers a sampling sensor named `name` whose value is `read()`, called on a monitor thread.
///
/// ```
/// # use std::sync::{Arc, Mutex};
/// let queue = Arc::new(Mutex::new(Vec::<u32>::new()));
/// let q = queue.clone();
/// gyr::sample("queue_len", move || q.lock().unwrap().len()).unwrap();
/// ```
pub fn sample<T: SampleValue>(
    name: &str,
    read: impl Fn() -> T + Send + Sync + 'static,
) -> Result<SamplingSensor, RegisterError> {
    register::<T>(
        name,
        Box::new(move |out| {
            let v = read();
            v.encode(out)
        }),
    )
}

/// A cell the program stores into and a sampling sensor reads: one relaxed store per update.
#[derive(Debug, Clone)]
pub struct SampleCell<T> {
    bits: Arc<AtomicU64>,
    sensor: SamplingSensor,
    _t: std::marker::PhantomData<fn(T)>,
}

/// Numbers that fit a [`SampleCell`].
pub trait CellValue: SampleValue {
    /// To the cell's bits.
    fn to_bits(self) -> u64;
    /// From the cell's bits.
    fn from_bits(bits: u64) -> Self;
}

macro_rules! cell_value {
    ($($t:ty: |$v:ident| $to:expr, |$b:ident| $from:expr;)*) => {$(
        impl CellValue for $t {
            fn to_bits(self) -> u64 { let $v = self; $to }
            fn from_bits($b: u64) -> Self { $from }
        }
    )*};
}
cell_value! {
    f64: |v| v.to_bits(), |b| f64::from_bits(b);
    f32: |v| v.to_bits() as u64, |b| f32::from_bits(b as u32);
    u64: |v| v, |b| b;
    i64: |v| v as u64, |b| b as i64;
    u32: |v| v as u64, |b| b as u32;
    i32: |v| v as u32 as u64, |b| b as u32 as i32;
    usize: |v| v as u64, |b| b as usize;
    bool: |v| v as u64, |b| b != 0;
}

impl<T: CellValue> SampleCell<T> {
    /// Stores a new value (one relaxed atomic store).
    #[inline]
    pub fn set(&self, v: T) {
        self.bits.store(v.to_bits(), Ordering::Relaxed);
    }

    /// The value stored last.
    pub fn get(&self) -> T {
        T::from_bits(self.bits.load(Ordering::Relaxed))
    }

    /// The sampling sensor reading this cell.
    pub fn sensor(&self) -> &SamplingSensor {
        &self.sensor
    }
}

/// Registers a sampling sensor named `name` that reads an atomic cell; returns the cell.
///
/// ```
/// let residual = gyr::sample_cell::<f64>("residual", 0.0).unwrap();
/// residual.set(1e-3);
/// ```
pub fn sample_cell<T: CellValue>(name: &str, initial: T) -> Result<SampleCell<T>, RegisterError> {
    let bits = Arc::new(AtomicU64::new(initial.to_bits()));
    let b = bits.clone();
    let sensor = register::<T>(
        name,
        Box::new(move |out| T::from_bits(b.load(Ordering::Relaxed)).encode(out)),
    )?;
    Ok(SampleCell {
        bits,
        sensor,
        _t: std::marker::PhantomData,
    })
}

/// Reads every due sampler, appending a record for each to `out` (called by monitor 0).
pub(crate) fn run_due(now_ns: u64, out: &mut Vec<u8>, seq: &mut u64) {
    let samplers: Vec<Arc<Sampler>> = lock(&SAMPLERS).clone();
    for s in samplers {
        if s.removed.load(Ordering::Relaxed) || s.ty.state.load(Ordering::Relaxed) == STATE_OFF {
            continue;
        }
        let limit = s.ty.limits.min_interval_ns.load(Ordering::Relaxed);
        let interval = if limit > 0 {
            limit
        } else {
            s.interval_ns.load(Ordering::Relaxed)
        };
        let due = s.next_due_ns.load(Ordering::Relaxed);
        if now_ns < due {
            continue;
        }
        s.next_due_ns.store(
            due.max(now_ns.saturating_sub(interval)) + interval,
            Ordering::Relaxed,
        );
        let mut value = [0u8; 8];
        // A sampling closure is user code running on gyr's thread: if it panics, stop calling it
        // rather than lose the monitor.
        match std::panic::catch_unwind(AssertUnwindSafe(|| (s.read)(&mut value))) {
            Ok(n) => {
                *seq += 1;
                gyr_core::record::push_record(out, s.ty.id(), now_ns, *seq, 0, &value[..n]);
            }
            Err(_) => {
                s.removed.store(true, Ordering::Relaxed);
                crate::diag!(
                    "gyr: sampling sensor `{}` panicked; it is no longer read",
                    s.name
                );
            }
        }
    }
}
