//! Drop-in wrappers of `std::thread`'s [`spawn`] and [`Builder`] that record Falcon's thread
//! events: the parent's fork (naming the child's id before the child has run), the child's
//! begin and exit, and the joins. [`set_role`] gives a thread its logical identity.
//!
//! ```
//! let rt = gyr::Builder::new().sink(gyr::MemorySink::new()).start().unwrap();
//! let worker = gyr::thread::spawn(|| {
//!     gyr::thread::set_role("worker", 0);
//!     6 * 7
//! });
//! assert_eq!(worker.join().unwrap(), 42);
//! rt.shutdown();
//! ```
//!
//! The lower-level [`fork`], [`Child::begin`], [`exit`], [`join_begin`] and [`join_end`] are
//! what other thread packages' wrappers (such as `gyr-interpose` for pthreads) call.

use crate::emit;
use crate::producer::{self, ReservedThread};
use crate::sync::events::{
    ThreadBegin, ThreadDetach, ThreadExit, ThreadFork, ThreadJoinBegin, ThreadJoinEnd, ThreadRole,
};
use std::io;

/// A thread about to be created: the id its parent reserved for it. Move it into the new
/// thread and call [`Child::begin`] there first.
#[derive(Debug, Clone, Copy)]
pub struct Child {
    reserved: Option<ReservedThread>,
    parent: u64,
}

impl Child {
    /// gyr's id of the child (0 when no runtime runs).
    pub fn id(&self) -> u64 {
        self.reserved.map_or(0, |r| r.id)
    }

    /// In the new thread, before anything else: takes the reserved id and records the begin.
    pub fn begin(self) {
        if let Some(r) = self.reserved {
            producer::adopt_thread(r);
        }
        emit!(ThreadBegin {
            parent: self.parent
        });
    }
}

/// Reserves an id for a thread about to be created and records the fork in the calling
/// (parent) thread.
pub fn fork() -> Child {
    let reserved = producer::reserve_thread();
    let parent = current_id();
    if let Some(r) = reserved {
        emit!(ThreadFork { child: r.id });
    }
    Child { reserved, parent }
}

/// gyr's id of the calling thread in the running runtime (0 when none runs).
pub fn current_id() -> u64 {
    producer::current_thread_id().unwrap_or(0)
}

/// Names the calling thread in gyr's views, for threads std has no name for (those of a C or
/// Python program, named by their own thread package); a thread named by
/// `std::thread::Builder` keeps that name unless this is called. A name is cut at 256 bytes
/// (every chunk of a trace repeats it). Takes effect only before the
/// thread's first record in the running runtime, which then carries it; returns whether it
/// will (false once the thread has recorded).
pub fn set_name(name: &str) -> bool {
    producer::name_thread(name)
}

/// Whether [`set_name`] named the calling thread, in any runtime: cheap enough (one load from
/// thread-local storage) for a binding that names threads lazily to ask before every event.
#[inline]
pub fn is_named() -> bool {
    producer::thread_named()
}

/// Records the calling thread's end: call it last in the thread.
pub fn exit() {
    emit!(ThreadExit {});
}

/// Records that the calling thread starts waiting for thread `joined` to end.
pub fn join_begin(joined: u64) {
    emit!(ThreadJoinBegin { joined });
}

/// Records that the calling thread's wait for `joined` returned.
pub fn join_end(joined: u64) {
    emit!(ThreadJoinEnd { joined });
}

/// Records that nobody will join thread `thread`.
pub fn detach(thread: u64) {
    emit!(ThreadDetach { thread });
}

/// Names the calling thread's role and index, so that short-lived threads of one role (scoped
/// threads spawned per frame, pool workers) group into one row in every view. The runtime
/// also remembers it, so that a consumer attaching later (a hub) gets it with the thread's
/// description; a thread calls it once or so, not per event (it allocates).
pub fn set_role(role: &str, index: u64) {
    producer::set_role(role, index);
    crate::emit(&ThreadRole { role, index });
}

/// Records the exit when the thread's closure returns or unwinds.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        exit();
    }
}

/// Runs `f` as the body of a forked thread: begin, `f`, exit.
fn body<F: FnOnce() -> T, T>(child: Child, f: F) -> impl FnOnce() -> T {
    move || {
        child.begin();
        let _exit = ExitGuard;
        f()
    }
}

/// [`std::thread::spawn`], recording fork, begin and exit.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().spawn(f).expect("failed to spawn thread")
}

/// [`std::thread::Builder`], recording fork, begin and exit.
#[derive(Debug)]
pub struct Builder {
    inner: std::thread::Builder,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with std's defaults.
    pub fn new() -> Self {
        Builder {
            inner: std::thread::Builder::new(),
        }
    }

    /// Names the thread (the name the trace shows).
    pub fn name(self, name: String) -> Self {
        Builder {
            inner: self.inner.name(name),
        }
    }

    /// Sets the thread's stack size in bytes.
    pub fn stack_size(self, size: usize) -> Self {
        Builder {
            inner: self.inner.stack_size(size),
        }
    }

    /// Spawns the thread.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let child = fork();
        let inner = self.inner.spawn(body(child, f))?;
        Ok(JoinHandle {
            id: child.id(),
            inner,
        })
    }

    /// Spawns a scoped thread (see [`std::thread::scope`]).
    pub fn spawn_scoped<'scope, 'env, F, T>(
        self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        let child = fork();
        let inner = self.inner.spawn_scoped(scope, body(child, f))?;
        Ok(ScopedJoinHandle {
            id: child.id(),
            inner,
        })
    }
}

/// Spawns a scoped thread in `scope`, recording fork, begin and exit: the recorded
/// counterpart of `scope.spawn(f)`. The scope's implicit join at its end is not recorded:
/// join the handle to record it.
pub fn spawn_scoped<'scope, 'env, F, T>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    f: F,
) -> ScopedJoinHandle<'scope, T>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    Builder::new()
        .spawn_scoped(scope, f)
        .expect("failed to spawn thread")
}

/// [`std::thread::JoinHandle`], recording the join.
#[derive(Debug)]
pub struct JoinHandle<T> {
    id: u64,
    inner: std::thread::JoinHandle<T>,
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to end.
    pub fn join(self) -> std::thread::Result<T> {
        join_begin(self.id);
        let r = self.inner.join();
        join_end(self.id);
        r
    }

    /// gyr's id of the thread (0 when no runtime ran at its fork).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The thread's handle.
    pub fn thread(&self) -> &std::thread::Thread {
        self.inner.thread()
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

/// [`std::thread::ScopedJoinHandle`], recording the join.
#[derive(Debug)]
pub struct ScopedJoinHandle<'scope, T> {
    id: u64,
    inner: std::thread::ScopedJoinHandle<'scope, T>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the thread to end.
    pub fn join(self) -> std::thread::Result<T> {
        join_begin(self.id);
        let r = self.inner.join();
        join_end(self.id);
        r
    }

    /// gyr's id of the thread.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}
