//! Whether a call is recorded: the process-wide switch, and whether the thread is inside an
//! MPI call of ours already.
//!
//! # Never recurse
//!
//! A call is recorded only when the runtime runs ([`ACTIVE`]: set once the constructor started
//! it in an MPI rank; cleared at exit, before gyr's own exit hook ends the runtime, and in the
//! child of a `fork()`) and the thread is not inside a call of ours already ([`Call`] marks it
//! busy from its start to its end, the real call included): an MPI library whose `MPI_Sendrecv`
//! called `MPI_Send`, or a Fortran binding that called the C `MPI_*` function rather than
//! `PMPI_*`, is recorded once, as the call the program made.
//!
//! # The thread's block
//!
//! What a call needs of its thread is one small block: the busy flag and the address of the
//! thread's `errno` (found once, not by a call into the C library on every call). It is plain
//! thread-local data without a destructor, zero in a new thread: reading it never allocates.
//! On x86-64 Linux it is in the static TLS block (initial-exec: this library is preloaded),
//! reached with one `%fs`-relative address computation rather than a call of `__tls_get_addr`,
//! which a `thread_local!` in a shared library costs; elsewhere it is a `thread_local!`.

use crate::events::{MpiBegin, MpiEnd};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether calls are recorded at all (see the module doc).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);

/// One thread's block (see the module doc). All zeros is its initial value.
#[repr(C)]
pub(crate) struct Block {
    busy: Cell<bool>,
    /// The thread's `errno`, null until first needed.
    errno: Cell<*mut libc::c_int>,
}

impl Block {
    /// The address of the calling thread's `errno`.
    #[inline]
    fn errno(&self) -> *mut libc::c_int {
        let p = self.errno.get();
        if !p.is_null() {
            return p;
        }
        // SAFETY: __errno_location has no preconditions; it returns the calling thread's
        // errno, whose address stays the same for the thread's life (and in a forked child).
        let p = unsafe { libc::__errno_location() };
        self.errno.set(p);
        p
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("busy", &self.busy.get())
            .finish()
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tls {
    use super::Block;

    // The block's storage: 16 zero bytes in `.tbss` (so every thread starts with a zeroed
    // copy), hidden (global to this library's objects, which may
    // come from several codegen units, and exported by none).
    std::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl gyr_mpi_thread_block",
        ".hidden gyr_mpi_thread_block",
        ".type gyr_mpi_thread_block,@object",
        ".size gyr_mpi_thread_block,16",
        "gyr_mpi_thread_block:",
        ".zero 16",
        ".popsection",
    );

    const _: () = assert!(size_of::<Block>() <= 16 && align_of::<Block>() <= 8);

    /// The calling thread's block.
    #[inline(always)]
    pub(super) fn block() -> &'static Block {
        let p: *const Block;
        // SAFETY: reads the block's offset from the thread pointer (a GOT entry the loader
        // fills, initial-exec model) and adds the thread pointer (`%fs:0` holds its own
        // address on x86-64 Linux): the address of this thread's copy of the 16 bytes above.
        // No memory is written; the addition changes the flags.
        unsafe {
            std::arch::asm!(
                "mov {p}, qword ptr [rip + gyr_mpi_thread_block@GOTTPOFF]",
                "add {p}, qword ptr fs:[0]",
                p = out(reg) p,
                options(nostack, readonly, pure),
            );
        }
        // SAFETY: the copy is this thread's, 8-byte aligned, zero-initialised (a valid
        // `Block`: not busy, errno null) and lives as long as the thread; `Block` is made of
        // `Cell`s and not `Sync`, and the reference never leaves this thread (`Call` is neither
        // `Send` nor stored), so it is only ever used here while the thread runs.
        unsafe { &*p }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod tls {
    use super::Block;
    use std::cell::Cell;

    thread_local! {
        static BLOCK: Block = const {
            Block { busy: Cell::new(false), errno: Cell::new(std::ptr::null_mut()) }
        };
    }

    /// The calling thread's block.
    #[inline(always)]
    pub(super) fn block() -> &'static Block {
        // SAFETY: the block lives as long as the thread and has no destructor, and the
        // reference never leaves this thread (see the x86-64 version).
        BLOCK.with(|b| unsafe { &*(b as *const Block) })
    }
}

/// One MPI call being recorded: `gyr.mpi.begin` was emitted, the thread is busy and its `errno`
/// is kept for the program until [`Call::end`].
///
/// # One clock reading for two events
///
/// The clock is read once at the call's begin and once when the real call returns, and each
/// reading stamps the events of that instant ([`gyr::emit_at`]): a send's `gyr.msg.send` has
/// its call's begin time (a few ns early: a message still cannot arrive before it left, which
/// clock correction relies on), and a receive's `gyr.msg.recv`, a request's
/// `gyr.mpi.complete` and the call's `gyr.mpi.end` have the time the real call returned.
/// Reading the clock (`rdtsc`) costs as much as the rest of a sensor on a virtual machine.
///
/// Not a guard with `Drop`: the wrappers' frames stay plain.
#[derive(Debug)]
#[must_use = "end() records the call's end and restores the thread's state"]
pub(crate) struct Call {
    name: &'static str,
    block: &'static Block,
    /// The thread's `errno`, and the value the program should see: as the call found it, then
    /// as the real call left it. What gyr does in between is not the program's.
    errno: *mut libc::c_int,
    errno_value: libc::c_int,
    /// The clock at the call's begin, then when the real call returned (see above).
    at: gyr::Stamp,
}

impl Call {
    /// Starts recording the call `name`, if it should be recorded.
    #[inline]
    pub(crate) fn begin(name: &'static str) -> Option<Call> {
        Self::begin_then(name, |_| ())
    }

    /// [`Call::begin`], with `f` recording the events of the call's begin instant (a send's
    /// message) under the same guard as `gyr.mpi.begin`: one `catch_unwind` frame for both,
    /// on the path every send takes. (Recording both through [`gyr::emit_pair_at`], as
    /// [`Call::end_with`] does, measured more instructions per send under callgrind, not fewer.)
    #[inline]
    pub(crate) fn begin_then(name: &'static str, f: impl FnOnce(gyr::Stamp)) -> Option<Call> {
        let (block, errno, errno_value) = Self::enter()?;
        let at = gyr::Stamp::now();
        quiet(|| {
            gyr::emit_at(&MpiBegin { call: name }, at);
            f(at)
        });
        Some(Call {
            name,
            block,
            errno,
            errno_value,
            at,
        })
    }

    /// Marks the thread busy and reads its `errno`, if the call should be recorded.
    #[inline(always)]
    fn enter() -> Option<(&'static Block, *mut libc::c_int, libc::c_int)> {
        if !ACTIVE.load(Ordering::Relaxed) {
            return None;
        }
        let block = tls::block();
        if block.busy.get() {
            return None;
        }
        block.busy.set(true);
        let errno = block.errno();
        // SAFETY: the calling thread's errno.
        let errno_value = unsafe { *errno };
        Some((block, errno, errno_value))
    }

    /// Records what `f` does (builds and emits events), so that no panic reaches the program.
    #[inline]
    pub(crate) fn record(&self, f: impl FnOnce()) {
        quiet(f)
    }

    /// As [`Call::record`], for events of the call's present instant: `f` is given the time
    /// stamp to record them with (the call's begin before the real call, the time it returned
    /// after it).
    #[inline]
    pub(crate) fn record_at(&self, f: impl FnOnce(gyr::Stamp)) {
        let at = self.at;
        quiet(|| f(at))
    }

    /// Makes `f`, the real call, see and leave `errno` as the program's own call would.
    #[inline]
    pub(crate) fn real<R>(&mut self, f: impl FnOnce() -> R) -> R {
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        let r = f();
        self.at = gyr::Stamp::now();
        // SAFETY: as above.
        self.errno_value = unsafe { *self.errno };
        r
    }

    /// Records the call's end with its return code (a Fortran call's `ierr`), stamped when the
    /// real call returned; restores `errno` and the thread's state, and returns `ret`.
    #[inline]
    pub(crate) fn end(self, ret: libc::c_int) -> libc::c_int {
        self.end_with(ret, || None::<MpiEnd>)
    }

    /// [`Call::end`], with the event `f` makes (a receive's message), if any, recorded just
    /// before `gyr.mpi.end` with the same stamp: under one `catch_unwind` frame, and with the
    /// thread's buffer found once for both ([`gyr::emit_pair_at`]), on the path every receive
    /// takes.
    #[inline]
    pub(crate) fn end_with<E: gyr::Sensor>(
        self,
        ret: libc::c_int,
        f: impl FnOnce() -> Option<E>,
    ) -> libc::c_int {
        let (name, at) = (self.name, self.at);
        quiet(|| {
            let end = MpiEnd { call: name, ret };
            match f() {
                Some(e) => gyr::emit_pair_at(&e, &end, at),
                None => gyr::emit_at(&end, at),
            }
        });
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        self.block.busy.set(false);
        ret
    }
}

/// Runs `f`, a call into gyr, so that no panic crosses into C: gyr does not panic on these
/// paths, and if it ever did the event would be lost, not the program.
#[inline(always)]
pub(crate) fn quiet(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_inside_a_call_is_not_recorded_again() {
        ACTIVE.store(true, Ordering::SeqCst);
        let outer = Call::begin("MPI_Sendrecv").expect("a plain thread is recorded");
        assert!(Call::begin("MPI_Send").is_none(), "a nested call is not");
        assert_eq!(outer.end(3), 3);
        let again = Call::begin("MPI_Send").expect("recorded again after the end");
        let _ = again.end(0);
        ACTIVE.store(false, Ordering::SeqCst);
    }

    /// The block's `unsafe` (its address computed from the thread pointer): every thread,
    /// however many run at once, starts from a zeroed block of its own at an address no other
    /// live thread has, and finds its own `errno` there.
    #[test]
    fn every_thread_has_a_zeroed_block_of_its_own() {
        let barrier = std::sync::Barrier::new(8);
        for _ in 0..20 {
            let addrs: Vec<usize> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..8usize)
                    .map(|t| {
                        let barrier = &barrier;
                        s.spawn(move || {
                            let b = tls::block();
                            assert!(!b.busy.get(), "a new thread is not busy");
                            assert!(b.errno.get().is_null(), "nor has it found its errno");
                            // SAFETY: __errno_location has no preconditions.
                            assert_eq!(b.errno(), unsafe { libc::__errno_location() });
                            barrier.wait();
                            for i in 0..10_000 {
                                let mine = (i + t) % 2 == 0;
                                b.busy.set(mine);
                                std::hint::black_box(());
                                assert_eq!(tls::block().busy.get(), mine, "nobody else wrote it");
                            }
                            barrier.wait();
                            b.busy.set(false);
                            b as *const Block as usize
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut unique = addrs.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), addrs.len(), "{addrs:x?}");
        }
    }
}
