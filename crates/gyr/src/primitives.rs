//! Synchronisation primitives, imported from one place so that `--cfg loom` can swap in loom's
//! model-checked versions for the lock-free ring; and [`lock`], the one way gyr takes its
//! (standard) mutexes.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A fixed-size byte buffer shared by one producer and one consumer, which access disjoint
/// regions of it as the ring's head and tail allow.
///
/// Without loom it is plain memory handed out as slices. Under loom every byte is a
/// `loom::cell::UnsafeCell`, so that loom reports any access the ring's protocol fails to order.
#[cfg(not(loom))]
pub(crate) struct ByteBuf {
    bytes: Box<[std::cell::UnsafeCell<u8>]>,
}

#[cfg(not(loom))]
impl ByteBuf {
    pub(crate) fn new(len: usize) -> Self {
        ByteBuf {
            bytes: (0..len).map(|_| std::cell::UnsafeCell::new(0)).collect(),
        }
    }

    /// Runs `f` on `len` bytes at `pos`, mutably.
    ///
    /// # Safety
    /// `pos..pos + len` must be in bounds, and no other access to those bytes may happen while
    /// `f` runs (the ring's producer owns the region between tail and head + capacity).
    #[inline(always)]
    pub(crate) unsafe fn with_mut<R>(
        &self,
        pos: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        debug_assert!(pos + len <= self.bytes.len());
        // SAFETY: `UnsafeCell<u8>` has the layout of `u8` and permits mutation through a shared
        // reference; the caller guarantees the region is in bounds and not accessed elsewhere.
        let slice =
            unsafe { std::slice::from_raw_parts_mut(self.bytes.as_ptr().add(pos) as *mut u8, len) };
        f(slice)
    }

    /// Runs `f` on `len` bytes at `pos`, read-only.
    ///
    /// # Safety
    /// `pos..pos + len` must be in bounds, and nobody may write those bytes while `f` runs (the
    /// ring's consumer owns the region between head and tail).
    #[inline(always)]
    pub(crate) unsafe fn with<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        debug_assert!(pos + len <= self.bytes.len());
        // SAFETY: as for `with_mut`, with no writer during `f`.
        let slice =
            unsafe { std::slice::from_raw_parts(self.bytes.as_ptr().add(pos) as *const u8, len) };
        f(slice)
    }
}

#[cfg(loom)]
pub(crate) struct ByteBuf {
    bytes: Box<[loom::cell::UnsafeCell<u8>]>,
}

#[cfg(loom)]
impl ByteBuf {
    pub(crate) fn new(len: usize) -> Self {
        ByteBuf {
            bytes: (0..len).map(|_| loom::cell::UnsafeCell::new(0)).collect(),
        }
    }

    pub(crate) unsafe fn with_mut<R>(
        &self,
        pos: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        let mut tmp: Vec<u8> = (pos..pos + len)
            .map(|i| self.bytes[i].with(|p| unsafe { *p }))
            .collect();
        let r = f(&mut tmp);
        for (i, b) in tmp.into_iter().enumerate() {
            self.bytes[pos + i].with_mut(|p| unsafe { *p = b });
        }
        r
    }

    pub(crate) unsafe fn with<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let tmp: Vec<u8> = (pos..pos + len)
            .map(|i| self.bytes[i].with(|p| unsafe { *p }))
            .collect();
        f(&tmp)
    }
}

// SAFETY: the buffer is only reached through the ring, whose head/tail protocol gives producer
// and consumer disjoint regions (see ring.rs); the bytes themselves are plain data.
unsafe impl Sync for ByteBuf {}
// SAFETY: as above; owning the buffer on another thread is fine.
unsafe impl Send for ByteBuf {}

impl std::fmt::Debug for ByteBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ByteBuf({} bytes)", self.bytes.len())
    }
}

/// Takes `m`, poisoned or not.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // gyr's locks guard plain data that every update leaves consistent: a panic elsewhere while
    // holding one must not take monitoring down with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
