//! Whether a call is recorded: the process-wide switch, and each thread's state (one of gyr's
//! own threads, inside gyr already, or past its exit).
//!
//! # Never recurse
//!
//! Every pthread call of the program passes through this library, and so do gyr's own: its
//! monitors, its server and tokio's threads are created with `pthread_create`, std joins and
//! detaches them, and an allocator may take a pthread mutex inside `malloc`, which gyr calls.
//! A call is recorded only when all of these hold:
//! - the runtime runs ([`ACTIVE`]: set once the constructor started it; cleared at exit, before
//!   gyr's own exit hook ends the runtime, and in the child of a `fork()`);
//! - the thread is not one of gyr's ([`GYR`]: set in a thread whose start routine lies in this
//!   library, since std's thread start is in it, or whose creator had it set);
//! - the thread is not inside gyr already ([`BUSY`]: set while a wrapper calls into gyr, so a
//!   pthread call made on the way, for instance by an allocator, goes straight to the C
//!   library);
//! - the thread has not recorded its exit ([`EXITED`]: the destructors that run after it may
//!   still lock, and gyr's buffer for the thread is gone).
//!
//! # The thread's block
//!
//! What a call needs of its thread is one small block: the state above and the address of the
//! thread's `errno` (found once, not by a call into the C library on every event). It is plain
//! thread-local data without a destructor: reading it never allocates and works at any point of
//! a thread's life, its destructors included, and a new thread's block is zero (state 0, errno
//! not found yet).
//!
//! On x86-64 Linux the block is in the static TLS block (initial-exec: this library is
//! preloaded, so the loader gives it room in every thread's static block), reached with one
//! `%fs`-relative address computation. A `thread_local!` in a shared library goes through
//! `__tls_get_addr` instead, a call measured at about 2.5 ns, paid twice per lock and unlock
//! pair on the gate alone. Elsewhere the block is a `thread_local!`.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether calls are recorded at all (see the module doc).
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The thread is one of gyr's: nothing it does is recorded.
pub(crate) const GYR: u8 = 1;
/// The thread is inside gyr: calls it makes on the way are not recorded.
pub(crate) const BUSY: u8 = 2;
/// The thread has recorded its exit: what its destructors do is not.
pub(crate) const EXITED: u8 = 4;
/// The thread's exit will be recorded by its exit guard (see `threads.rs`).
pub(crate) const ARMED: u8 = 8;

/// The states in which a call is not recorded.
const QUIET: u8 = GYR | BUSY | EXITED;

/// One thread's block (see the module doc). All zeros is its initial value.
#[repr(C)]
pub(crate) struct Block {
    state: Cell<u8>,
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

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tls {
    use super::Block;

    // The block's storage: 16 zero bytes in `.tbss` (so every thread starts with a zeroed
    // copy), hidden (global to this library's objects, which may
    // come from several codegen units, and exported by none).
    std::arch::global_asm!(
        ".pushsection .tbss,\"awT\",@nobits",
        ".p2align 3",
        ".globl gyr_interpose_thread_block",
        ".hidden gyr_interpose_thread_block",
        ".type gyr_interpose_thread_block,@object",
        ".size gyr_interpose_thread_block,16",
        "gyr_interpose_thread_block:",
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
                "mov {p}, qword ptr [rip + gyr_interpose_thread_block@GOTTPOFF]",
                "add {p}, qword ptr fs:[0]",
                p = out(reg) p,
                options(nostack, readonly, pure),
            );
        }
        // SAFETY: the copy is this thread's, 8-byte aligned, zero-initialised (a valid
        // `Block`: state 0, errno null) and lives as long as the thread; `Block` is made of
        // `Cell`s and not `Sync`, and the reference never leaves this thread (`Entered` is
        // neither `Send` nor stored), so it is only ever used here while the thread runs.
        unsafe { &*p }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod tls {
    use super::Block;
    use std::cell::Cell;

    thread_local! {
        static BLOCK: Block = const {
            Block { state: Cell::new(0), errno: Cell::new(std::ptr::null_mut()) }
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

/// The calling thread's state.
#[inline]
pub(crate) fn state() -> u8 {
    tls::block().state.get()
}

/// Sets the calling thread's state.
#[inline]
pub(crate) fn set(state: u8) {
    tls::block().state.set(state)
}

/// Whether the process records at all.
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// A call being recorded: the thread's state before it, restored by [`Entered::leave`].
///
/// Not a guard with `Drop`: the wrappers' frames must stay plain, with nothing to run, for a
/// thread's cancellation or `pthread_exit` to unwind through them.
#[derive(Debug, Clone, Copy)]
#[must_use = "leave() restores the thread's state"]
pub(crate) struct Entered {
    /// The thread's block, found once per call.
    block: &'static Block,
    before: u8,
    /// The thread's `errno`, and the value the program should see: as the call found it, then
    /// as the last real call left it. What gyr does in between is not the program's.
    errno: *mut libc::c_int,
    errno_value: libc::c_int,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("state", &self.state.get())
            .finish()
    }
}

impl Entered {
    /// Ends the call: the thread may be recorded again, and `errno` is what the program's
    /// calls made it.
    #[inline]
    pub(crate) fn leave(self) {
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        self.block.state.set(self.before)
    }

    /// Makes `f`, a call of the C library's function, see and leave `errno` as if it were
    /// the program's own call.
    #[inline]
    pub(crate) fn real<R>(&mut self, f: impl FnOnce() -> R) -> R {
        // SAFETY: the calling thread's errno, which lives as long as the thread.
        unsafe { *self.errno = self.errno_value };
        let r = f();
        // SAFETY: as above.
        self.errno_value = unsafe { *self.errno };
        r
    }

    /// The calling thread, as an object's recorded holder names it: the address of its block,
    /// unique among live threads (and cheaper than `pthread_self`, a call into the C library).
    #[inline]
    pub(crate) fn me(&self) -> u64 {
        self.block as *const Block as u64
    }
}

/// Starts recording a call, if it should be recorded: the thread is marked busy, and its
/// `errno` kept for the program, until [`Entered::leave`].
#[inline]
pub(crate) fn enter() -> Option<Entered> {
    if !active() {
        return None;
    }
    let block = tls::block();
    let before = block.state.get();
    if before & QUIET != 0 {
        return None;
    }
    block.state.set(before | BUSY);
    let errno = block.errno();
    // SAFETY: the calling thread's errno.
    let errno_value = unsafe { *errno };
    Some(Entered {
        block,
        before,
        errno,
        errno_value,
    })
}

/// Whether calls into gyr must hold off the thread's cancellation (see [`quiet`]): set when
/// the runtime's policy is Block, whose wait for room in a full ring sleeps.
pub(crate) static GUARD_CANCEL: AtomicBool = AtomicBool::new(false);

/// Runs `f`, a call into gyr, so that no panic crosses into C: gyr does not panic on these
/// paths, and if it ever did the event would be lost, not the program.
///
/// # Cancellation
///
/// A thread cancelled (`pthread_cancel`) unwinds from its next cancellation point, and
/// `catch_unwind` would stop that unwind, which the C library answers by aborting the process.
/// So no cancellation point may be reached inside `f`. The usual path of an event makes no
/// system call; what may (a thread's attachment, a wait for room in a full ring under the
/// Block policy) runs with the thread's cancellation held off ([`quiet_uncancelled`]), at the
/// cost of two calls into the C library, paid only there.
#[inline(always)]
pub(crate) fn quiet(f: impl FnOnce()) {
    if GUARD_CANCEL.load(Ordering::Relaxed) {
        return quiet_uncancelled(f);
    }
    let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
}

unsafe extern "C" {
    fn pthread_setcancelstate(state: libc::c_int, old: *mut libc::c_int) -> libc::c_int;
}

/// `PTHREAD_CANCEL_DISABLE` of glibc's `pthread.h`.
const PTHREAD_CANCEL_DISABLE: libc::c_int = 1;

/// [`quiet`], with the thread's cancellation held off while `f` runs (a cancellation
/// requested meanwhile acts at the thread's next cancellation point after it).
#[cold]
#[inline(never)]
pub(crate) fn quiet_uncancelled(f: impl FnOnce()) {
    let mut old: libc::c_int = 0;
    // SAFETY: sets the calling thread's cancel state, writing the old one into a local.
    let held = unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) } == 0;
    let _ = std::panic::catch_unwind(AssertUnwindSafe(f));
    if held {
        // SAFETY: restores the state read above.
        unsafe { pthread_setcancelstate(old, &mut old) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_inside_gyr_is_not_recorded_again() {
        ACTIVE.store(true, Ordering::SeqCst);
        let outer = enter().expect("a plain thread is recorded");
        assert!(enter().is_none(), "a nested call is not");
        outer.leave();
        assert_eq!(state(), 0);
        set(GYR);
        assert!(enter().is_none(), "gyr's threads are not");
        set(ARMED);
        let e = enter().expect("an armed thread is recorded");
        assert_eq!(state(), ARMED | BUSY);
        e.leave();
        assert_eq!(state(), ARMED);
        set(0);
    }

    /// The block's `unsafe` (its address computed from the thread pointer): every thread,
    /// however many run at once and however often they come and go, starts from a zeroed block
    /// of its own at an address no other live thread has, and finds its own `errno` there.
    #[test]
    fn every_thread_has_a_zeroed_block_of_its_own() {
        let barrier = std::sync::Barrier::new(8);
        for round in 0..20u8 {
            let addrs: Vec<usize> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..8u8)
                    .map(|t| {
                        let barrier = &barrier;
                        s.spawn(move || {
                            let b = tls::block();
                            assert_eq!(b.state.get(), 0, "a new thread's state is 0");
                            assert!(b.errno.get().is_null(), "and its errno not found yet");
                            // SAFETY: __errno_location has no preconditions.
                            assert_eq!(b.errno(), unsafe { libc::__errno_location() });
                            let mine = (round.wrapping_mul(8) + t) | 0x80;
                            barrier.wait();
                            for _ in 0..10_000 {
                                set(mine);
                                std::hint::black_box(());
                                assert_eq!(state(), mine, "no other thread wrote it");
                            }
                            barrier.wait();
                            set(0);
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
