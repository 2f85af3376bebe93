//! Drop-in wrappers of `std::sync`'s [`Mutex`], [`RwLock`], [`Condvar`] and [`Barrier`] that
//! record Falcon's thread events ([`events`]): who waited for which lock, who held it, which
//! signal woke which waiter. Replace `std::sync::Mutex` with `gyr::sync::Mutex` and the trace
//! shows every contended lock, in causal order once `gyr-trace`'s ordering filter has read it.
//!
//! # Cost
//!
//! An uncontended lock records one event (`gyr.mutex.acquire`) and its unlock one
//! (`gyr.mutex.release`); a contended one adds `gyr.mutex.request` when it starts to wait. Each
//! event is an ordinary sensor event, so switching its type off makes it cost a load and a
//! branch. Sequence numbers are counted under the lock itself (acquisitions) or with one atomic
//! add (signals, barrier arrivals).

pub mod events;

use crate::emit;
use events::{
    BarrierArrive, BarrierDepart, CondBroadcast, CondSignal, CondWait, CondWake, LazyId,
    MutexAcquire, MutexBusy, MutexRelease, MutexRequest, RwLockAcquire, RwLockBusy, RwLockRelease,
    RwLockRequest,
};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult, WaitTimeoutResult};
use std::time::Duration;

pub use std::sync::BarrierWaitResult;

/// Maps a `LockResult` of an inner guard to one of ours, poisoned or not.
fn map_lock<G, H>(r: LockResult<G>, f: impl FnOnce(G) -> H) -> LockResult<H> {
    match r {
        Ok(g) => Ok(f(g)),
        Err(p) => Err(PoisonError::new(f(p.into_inner()))),
    }
}

/// [`std::sync::Mutex`], recording its acquisitions and releases.
#[derive(Default)]
pub struct Mutex<T: ?Sized> {
    id: LazyId,
    /// Acquisitions so far; written only by the holder.
    acquisitions: AtomicU64,
    inner: std::sync::Mutex<T>,
}

/// The guard of a [`Mutex`]: records the release when dropped.
pub struct MutexGuard<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
    n: u64,
    /// `None` only while a [`Condvar`] waits with it.
    inner: Option<std::sync::MutexGuard<'a, T>>,
}

impl<T> Mutex<T> {
    /// A new mutex holding `value`.
    pub const fn new(value: T) -> Self {
        Mutex {
            id: LazyId::new(),
            acquisitions: AtomicU64::new(0),
            inner: std::sync::Mutex::new(value),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> LockResult<T> {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// gyr's id of this mutex in the trace.
    pub fn id(&self) -> u64 {
        self.id.get()
    }

    /// Locks, waiting if another thread holds it (recorded as `gyr.mutex.request`).
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        let inner = match self.inner.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Err(p),
            Err(TryLockError::WouldBlock) => {
                emit!(MutexRequest {
                    mutex: self.id(),
                    addr: self as *const Self as *const u8 as u64,
                });
                self.inner.lock()
            }
        };
        map_lock(inner, |g| self.acquired(g))
    }

    /// Locks if no other thread holds it (a failure is recorded as `gyr.mutex.busy`).
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        match self.inner.try_lock() {
            Ok(g) => Ok(self.acquired(g)),
            Err(TryLockError::Poisoned(p)) => Err(TryLockError::Poisoned(PoisonError::new(
                self.acquired(p.into_inner()),
            ))),
            Err(TryLockError::WouldBlock) => {
                emit!(MutexBusy { mutex: self.id() });
                Err(TryLockError::WouldBlock)
            }
        }
    }

    fn acquired<'a>(&'a self, g: std::sync::MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let n = self.count_acquisition();
        MutexGuard {
            lock: self,
            n,
            inner: Some(g),
        }
    }

    /// Counts an acquisition (the caller holds the lock) and records it.
    fn count_acquisition(&self) -> u64 {
        let n = self.acquisitions.load(Ordering::Relaxed) + 1;
        self.acquisitions.store(n, Ordering::Relaxed);
        emit!(MutexAcquire {
            mutex: self.id(),
            n
        });
        n
    }

    /// Whether a thread panicked while holding it.
    pub fn is_poisoned(&self) -> bool {
        self.inner.is_poisoned()
    }

    /// Clears the poison.
    pub fn clear_poison(&self) {
        self.inner.clear_poison()
    }

    /// The value, through `&mut self` (no locking, nothing recorded).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.inner.get_mut()
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex")
            .field("id", &self.id.get())
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        if self.inner.is_some() {
            // Before the inner guard unlocks: the next acquisition is then recorded after it.
            emit!(MutexRelease {
                mutex: self.lock.id(),
                n: self.n
            });
        }
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner
            .as_ref()
            .expect("a guard holds its lock outside Condvar::wait")
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner
            .as_mut()
            .expect("a guard holds its lock outside Condvar::wait")
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// [`std::sync::Condvar`], recording waits, wake-ups, signals and broadcasts.
#[derive(Debug, Default)]
pub struct Condvar {
    id: LazyId,
    /// Signals and broadcasts so far.
    signals: AtomicU64,
    inner: std::sync::Condvar,
}

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Self {
        Condvar {
            id: LazyId::new(),
            signals: AtomicU64::new(0),
            inner: std::sync::Condvar::new(),
        }
    }

    /// gyr's id of this condition variable in the trace.
    pub fn id(&self) -> u64 {
        self.id.get()
    }

    /// Waits for a signal, releasing the guard's mutex meanwhile.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        let (r, _) = self.wait_with(guard, |c, g| {
            c.inner.wait(g).map(|g| (g, false)).map_err(|p| {
                let g = p.into_inner();
                PoisonError::new((g, false))
            })
        });
        r
    }

    /// Waits until `condition` is false.
    pub fn wait_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: F,
    ) -> LockResult<MutexGuard<'a, T>>
    where
        F: FnMut(&mut T) -> bool,
    {
        while condition(&mut *guard) {
            guard = self.wait(guard)?;
        }
        Ok(guard)
    }

    /// Waits for a signal or until `dur` has passed.
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let mut result = None;
        let (r, _) = self.wait_with(guard, |c, g| {
            let mut map = |(g, t): (std::sync::MutexGuard<'a, T>, WaitTimeoutResult)| {
                result = Some(t);
                (g, t.timed_out())
            };
            match c.inner.wait_timeout(g, dur) {
                Ok(x) => Ok(map(x)),
                Err(p) => Err(PoisonError::new(map(p.into_inner()))),
            }
        });
        let t = result.expect("the wait ran");
        match r {
            Ok(g) => Ok((g, t)),
            Err(p) => Err(PoisonError::new((p.into_inner(), t))),
        }
    }

    /// Waits until `condition` is false or `dur` has passed. Each wait and wake-up is
    /// recorded. Unlike std's, a condition that became false just as the time ran out reports
    /// the timeout.
    pub fn wait_timeout_while<'a, T, F>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: F,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)>
    where
        F: FnMut(&mut T) -> bool,
    {
        if !condition(&mut *guard) {
            // std's own call, which returns at once without waiting: the only way to get a
            // "not timed out" result without a wait to record.
            let inner = guard.inner.take().expect("a guard holds its lock");
            let (r, poisoned) = match self.inner.wait_timeout_while(inner, dur, |_| false) {
                Ok(x) => (x, false),
                Err(p) => (p.into_inner(), true),
            };
            guard.inner = Some(r.0);
            return if poisoned {
                Err(PoisonError::new((guard, r.1)))
            } else {
                Ok((guard, r.1))
            };
        }
        let start = std::time::Instant::now();
        loop {
            let left = dur.saturating_sub(start.elapsed());
            let (g, t) = self.wait_timeout(guard, left)?;
            guard = g;
            if t.timed_out() || !condition(&mut *guard) {
                return Ok((guard, t));
            }
        }
    }

    /// The common part of the waits: record the release, wait, record the wake-up and the
    /// re-acquisition.
    fn wait_with<'a, T>(
        &self,
        mut guard: MutexGuard<'a, T>,
        wait: impl FnOnce(
            &Self,
            std::sync::MutexGuard<'a, T>,
        ) -> LockResult<(std::sync::MutexGuard<'a, T>, bool)>,
    ) -> (LockResult<MutexGuard<'a, T>>, bool) {
        let lock = guard.lock;
        let inner = guard.inner.take().expect("a guard holds its lock");
        emit!(MutexRelease {
            mutex: lock.id(),
            n: guard.n
        });
        emit!(CondWait {
            cond: self.id(),
            mutex: lock.id()
        });
        drop(guard);
        let (inner, timed_out, poisoned) = match wait(self, inner) {
            Ok((g, t)) => (g, t, false),
            Err(p) => {
                let (g, t) = p.into_inner();
                (g, t, true)
            }
        };
        let after = if timed_out {
            0
        } else {
            self.signals.load(Ordering::Relaxed)
        };
        emit!(CondWake {
            cond: self.id(),
            after,
            timed_out
        });
        let guard = lock.acquired(inner);
        if poisoned {
            (Err(PoisonError::new(guard)), timed_out)
        } else {
            (Ok(guard), timed_out)
        }
    }

    /// Wakes one waiter.
    pub fn notify_one(&self) {
        let n = self.signals.fetch_add(1, Ordering::Relaxed) + 1;
        emit!(CondSignal { cond: self.id(), n });
        self.inner.notify_one()
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        let n = self.signals.fetch_add(1, Ordering::Relaxed) + 1;
        emit!(CondBroadcast { cond: self.id(), n });
        self.inner.notify_all()
    }
}

/// [`std::sync::RwLock`], recording read and write acquisitions and releases.
///
/// Writes are numbered like a mutex's acquisitions; a read records how many writes were
/// released before it, so that the ordering filter puts it after the write it read.
#[derive(Default)]
pub struct RwLock<T: ?Sized> {
    id: LazyId,
    /// Writes so far; written only by the writer holding the lock.
    writes: AtomicU64,
    inner: std::sync::RwLock<T>,
}

/// The guard of a read lock of a [`RwLock`].
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    n: u64,
    inner: std::sync::RwLockReadGuard<'a, T>,
}

/// The guard of a write lock of a [`RwLock`].
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
    n: u64,
    inner: std::sync::RwLockWriteGuard<'a, T>,
}

impl<T> RwLock<T> {
    /// A new lock holding `value`.
    pub const fn new(value: T) -> Self {
        RwLock {
            id: LazyId::new(),
            writes: AtomicU64::new(0),
            inner: std::sync::RwLock::new(value),
        }
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> LockResult<T> {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// gyr's id of this lock in the trace.
    pub fn id(&self) -> u64 {
        self.id.get()
    }

    /// Locks for reading, waiting while a writer holds it.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, T>> {
        let inner = match self.inner.try_read() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Err(p),
            Err(TryLockError::WouldBlock) => {
                emit!(RwLockRequest {
                    lock: self.id(),
                    write: false
                });
                self.inner.read()
            }
        };
        map_lock(inner, |g| self.read_acquired(g))
    }

    /// Locks for reading if no writer holds it.
    pub fn try_read(&self) -> TryLockResult<RwLockReadGuard<'_, T>> {
        match self.inner.try_read() {
            Ok(g) => Ok(self.read_acquired(g)),
            Err(TryLockError::Poisoned(p)) => Err(TryLockError::Poisoned(PoisonError::new(
                self.read_acquired(p.into_inner()),
            ))),
            Err(TryLockError::WouldBlock) => {
                emit!(RwLockBusy {
                    lock: self.id(),
                    write: false
                });
                Err(TryLockError::WouldBlock)
            }
        }
    }

    /// Locks for writing, waiting while anyone holds it.
    pub fn write(&self) -> LockResult<RwLockWriteGuard<'_, T>> {
        let inner = match self.inner.try_write() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Err(p),
            Err(TryLockError::WouldBlock) => {
                emit!(RwLockRequest {
                    lock: self.id(),
                    write: true
                });
                self.inner.write()
            }
        };
        map_lock(inner, |g| self.write_acquired(g))
    }

    /// Locks for writing if nobody holds it.
    pub fn try_write(&self) -> TryLockResult<RwLockWriteGuard<'_, T>> {
        match self.inner.try_write() {
            Ok(g) => Ok(self.write_acquired(g)),
            Err(TryLockError::Poisoned(p)) => Err(TryLockError::Poisoned(PoisonError::new(
                self.write_acquired(p.into_inner()),
            ))),
            Err(TryLockError::WouldBlock) => {
                emit!(RwLockBusy {
                    lock: self.id(),
                    write: true
                });
                Err(TryLockError::WouldBlock)
            }
        }
    }

    fn read_acquired<'a>(&'a self, g: std::sync::RwLockReadGuard<'a, T>) -> RwLockReadGuard<'a, T> {
        let n = self.writes.load(Ordering::Relaxed);
        emit!(RwLockAcquire {
            lock: self.id(),
            write: false,
            n
        });
        RwLockReadGuard {
            lock: self,
            n,
            inner: g,
        }
    }

    fn write_acquired<'a>(
        &'a self,
        g: std::sync::RwLockWriteGuard<'a, T>,
    ) -> RwLockWriteGuard<'a, T> {
        let n = self.writes.load(Ordering::Relaxed) + 1;
        self.writes.store(n, Ordering::Relaxed);
        emit!(RwLockAcquire {
            lock: self.id(),
            write: true,
            n
        });
        RwLockWriteGuard {
            lock: self,
            n,
            inner: g,
        }
    }

    /// Whether a thread panicked while holding it for writing.
    pub fn is_poisoned(&self) -> bool {
        self.inner.is_poisoned()
    }

    /// Clears the poison.
    pub fn clear_poison(&self) {
        self.inner.clear_poison()
    }

    /// The value, through `&mut self` (no locking, nothing recorded).
    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.inner.get_mut()
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}

impl<T: fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("id", &self.id.get())
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        emit!(RwLockRelease {
            lock: self.lock.id(),
            write: false,
            n: self.n
        });
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        emit!(RwLockRelease {
            lock: self.lock.id(),
            write: true,
            n: self.n
        });
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockReadGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLockWriteGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// [`std::sync::Barrier`], recording each thread's arrival and departure with the barrier's
/// generation.
#[derive(Debug)]
pub struct Barrier {
    id: LazyId,
    parties: usize,
    /// Arrivals so far: arrival `a` belongs to generation `a / parties`, since no thread of
    /// the next generation can arrive before all of this one have.
    arrivals: AtomicU64,
    inner: std::sync::Barrier,
}

impl Barrier {
    /// A barrier for `n` threads.
    pub fn new(n: usize) -> Self {
        Barrier {
            id: LazyId::new(),
            parties: n.max(1),
            arrivals: AtomicU64::new(0),
            inner: std::sync::Barrier::new(n),
        }
    }

    /// gyr's id of this barrier in the trace.
    pub fn id(&self) -> u64 {
        self.id.get()
    }

    /// Waits until `n` threads have called `wait`.
    pub fn wait(&self) -> BarrierWaitResult {
        let arrival = self.arrivals.fetch_add(1, Ordering::Relaxed);
        let generation = arrival / self.parties as u64;
        let barrier = self.id();
        emit!(BarrierArrive {
            barrier,
            generation
        });
        let r = self.inner.wait();
        emit!(BarrierDepart {
            barrier,
            generation,
            parties: self.parties.min(u32::MAX as usize) as u32
        });
        r
    }
}
