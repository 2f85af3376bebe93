//! The thread events of Falcon's default thread-package instrumentation, as sensors.
//!
//! [`gyr::thread`](crate::thread) and [`gyr::sync`](crate::sync) emit them for Rust programs;
//! `gyr-interpose` emits the same for unmodified C and C++ programs on pthreads. Each is an
//! event type like any other (`gyr sensors off gyr.mutex.acquire` switches one off), named
//! `gyr.<object>.<what>`.
//!
//! They carry what the on-line ordering filter (`gyr-trace`'s `OrderFilter`, after Falcon's
//! Appendix A) needs to restore causal order: thread ids as the trace names threads, object ids,
//! and per-object sequence numbers counted where the object itself serialises them (under the
//! mutex for acquisitions, atomically for signals and barrier arrivals).
//!
//! | event | fields | ordered after |
//! |---|---|---|
//! | `gyr.thread.fork` | `child` | |
//! | `gyr.thread.begin` | `parent` (0: unknown) | the parent's fork |
//! | `gyr.thread.join_begin`, `gyr.thread.join_end` | `joined` | (end) the joined thread's exit |
//! | `gyr.thread.detach` | `thread` | |
//! | `gyr.thread.exit` | | |
//! | `gyr.thread.role` | `role`, `index` | |
//! | `gyr.mutex.request` | `mutex`, `addr` | |
//! | `gyr.mutex.acquire` | `mutex`, `n` (1, 2, ... per mutex) | release `n - 1` |
//! | `gyr.mutex.busy` | `mutex` (a try or timed lock that failed) | |
//! | `gyr.mutex.release` | `mutex`, `n` | |
//! | `gyr.rwlock.request`, `gyr.rwlock.busy` | `lock`, `write` | |
//! | `gyr.rwlock.acquire` | `lock`, `write`, `n` (writes: the write's number; reads: writes released before) | write release `n - 1` (writes), `n` (reads) |
//! | `gyr.rwlock.release` | `lock`, `write`, `n` | |
//! | `gyr.cond.wait` | `cond`, `mutex` | |
//! | `gyr.cond.wake` | `cond`, `after` (signals counted when it woke), `timed_out` | signal `after` (unless timed out) |
//! | `gyr.cond.signal`, `gyr.cond.broadcast` | `cond`, `n` (1, 2, ... per condition, both kinds) | signal `n - 1` |
//! | `gyr.barrier.arrive` | `barrier`, `generation` | |
//! | `gyr.barrier.depart` | `barrier`, `generation`, `parties` | `parties` arrivals of its generation |
//! | `gyr.span.begin`, `gyr.span.end` | `name` | |

use std::sync::atomic::{AtomicU64, Ordering};

/// Defines a built-in event type: the struct and its [`Sensor`] implementation (what
/// `#[derive(Sensor)]` writes for users' types).
macro_rules! builtin_event {
    ($(
        $(#[$m:meta])*
        $ty:ident $(<$lt:lifetime>)? = $name:literal { $($(#[$fm:meta])* $f:ident : $ft:ty),* $(,)? }
    )*) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        #[allow(missing_docs)] // the struct's doc says what each field is
        pub struct $ty $(<$lt>)? { $($(#[$fm])* pub $f: $ft),* }

        impl $(<$lt>)? $crate::sensor::Sensor for $ty $(<$lt>)? {
            const NAME: &'static str = $name;
            fn fields() -> Vec<$crate::gyr_core::Field> {
                vec![$($crate::gyr_core::Field::new(stringify!($f), <$ft as $crate::sensor::SensorField>::TYPE)),*]
            }
            fn sensor_type() -> &'static $crate::SensorType {
                static TYPE: $crate::SensorType = $crate::SensorType::new();
                &TYPE
            }
            #[inline(always)]
            fn encoded_len(&self) -> usize {
                0 $(+ $crate::sensor::SensorField::encoded_len(&self.$f))*
            }
            #[inline(always)]
            #[allow(unused_variables, unused_mut)]
            fn encode(&self, out: &mut [u8]) {
                let mut at = 0;
                $(at += $crate::sensor::SensorField::encode(&self.$f, &mut out[at..]);)*
                debug_assert_eq!(at, out.len());
            }
        }
    )*};
}

// `gyr::msg` defines its events with the same macro.
pub(crate) use builtin_event;

builtin_event! {
    /// This thread created `child` (gyr's id for it, reserved before it ran).
    ThreadFork = "gyr.thread.fork" { child: u64 }
    /// The thread's first event; `parent` forked it (0 when unknown).
    ThreadBegin = "gyr.thread.begin" { parent: u64 }
    /// This thread starts waiting for `joined` to end.
    ThreadJoinBegin = "gyr.thread.join_begin" { joined: u64 }
    /// This thread's wait for `joined` returned.
    ThreadJoinEnd = "gyr.thread.join_end" { joined: u64 }
    /// This thread detached `thread`: nobody will join it.
    ThreadDetach = "gyr.thread.detach" { thread: u64 }
    /// The thread ends (its last event).
    ThreadExit = "gyr.thread.exit" {}
    /// The thread's logical identity: views group threads of one role and index into one row.
    ThreadRole<'a> = "gyr.thread.role" { role: &'a str, index: u64 }
    /// The thread must wait for `mutex` (emitted only when the lock is taken).
    MutexRequest = "gyr.mutex.request" { mutex: u64, addr: u64 }
    /// The thread holds `mutex`: its `n`th acquisition.
    MutexAcquire = "gyr.mutex.acquire" { mutex: u64, n: u64 }
    /// A try or timed lock of `mutex` gave up.
    MutexBusy = "gyr.mutex.busy" { mutex: u64 }
    /// The thread releases `mutex` after its `n`th acquisition.
    MutexRelease = "gyr.mutex.release" { mutex: u64, n: u64 }
    /// The thread must wait for a read (`write` false) or write lock of `lock`.
    RwLockRequest = "gyr.rwlock.request" { lock: u64, write: bool }
    /// The thread holds `lock`; for a write, `n` is its number; for a read, the writes
    /// released before it.
    RwLockAcquire = "gyr.rwlock.acquire" { lock: u64, write: bool, n: u64 }
    /// A try or timed lock of `lock` gave up.
    RwLockBusy = "gyr.rwlock.busy" { lock: u64, write: bool }
    /// The thread releases `lock` (`n` as its acquisition said).
    RwLockRelease = "gyr.rwlock.release" { lock: u64, write: bool, n: u64 }
    /// The thread waits on `cond`, releasing `mutex`.
    CondWait = "gyr.cond.wait" { cond: u64, mutex: u64 }
    /// The wait on `cond` returned: `after` signals had been counted, or it timed out.
    CondWake = "gyr.cond.wake" { cond: u64, after: u64, timed_out: bool }
    /// The `n`th signal or broadcast of `cond` is a signal.
    CondSignal = "gyr.cond.signal" { cond: u64, n: u64 }
    /// The `n`th signal or broadcast of `cond` is a broadcast.
    CondBroadcast = "gyr.cond.broadcast" { cond: u64, n: u64 }
    /// The thread reached `barrier` in `generation`.
    BarrierArrive = "gyr.barrier.arrive" { barrier: u64, generation: u64 }
    /// The thread left `barrier`'s `generation`, which `parties` threads reach.
    BarrierDepart = "gyr.barrier.depart" { barrier: u64, generation: u64, parties: u32 }
    /// A span (a scoped sensor) begins.
    SpanBegin = "gyr.span.begin" { name: &'static str }
    /// A span ends.
    SpanEnd = "gyr.span.end" { name: &'static str }
}

/// Process-wide ids of synchronisation objects; 0 means "not assigned yet".
static NEXT_OBJECT: AtomicU64 = AtomicU64::new(1);

/// A new synchronisation object id, unique in this process.
pub fn new_object_id() -> u64 {
    NEXT_OBJECT.fetch_add(1, Ordering::Relaxed)
}

/// An object id assigned on first use, so that objects can be built in `const` contexts and
/// only objects that are used take an id.
#[derive(Debug, Default)]
pub(crate) struct LazyId(AtomicU64);

impl LazyId {
    pub(crate) const fn new() -> Self {
        LazyId(AtomicU64::new(0))
    }

    #[inline]
    pub(crate) fn get(&self) -> u64 {
        match self.0.load(Ordering::Relaxed) {
            0 => self.assign(),
            id => id,
        }
    }

    #[cold]
    fn assign(&self) -> u64 {
        let id = new_object_id();
        match self
            .0
            .compare_exchange(0, id, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => id,
            Err(other) => other,
        }
    }
}
