//! Falcon's on-line ordering filter: thread events released in causal order.
//!
//! # Why events arrive out of order
//!
//! Each thread writes its own ring and several monitors drain them at their own pace, so the
//! stream is in order per thread but not across threads: a child's first event can arrive
//! before its parent's fork, a lock acquisition before the release it waited for. A view fed
//! such a stream draws nonsense (a thread running before it exists) or fails. Sorting by
//! timestamp needs the whole trace and still misorders events closer than the clocks agree.
//!
//! # The filter
//!
//! Falcon's filter (its section 5.4 and Appendix A) follows a minimum-intervention policy: an
//! event whose causes have all been released passes at once; any other is held back, with
//! every later event of its thread, until they have. The causes are the seeds' rules, carried
//! by sequence numbers the sensors record per object:
//!
//! | event | may pass once |
//! |---|---|
//! | `ThreadBegin { parent: Some(p) }` of thread `t` | `p`'s `Fork { child: t }` |
//! | `JoinEnd { joined: j }` | `j`'s `Exit` |
//! | `MutexAcquire { mutex: m, n }` | `MutexRelease { mutex: m, n: n - 1 }` (the first needs none) |
//! | `SharedAcquire { lock: m, after: k }` | `MutexRelease { mutex: m, n: k }` (a read lock after the `k`th write) |
//! | `CondSignal { cond: c, n }` | `CondSignal { cond: c, n: n - 1 }` (signals and broadcasts share `n`) |
//! | `CondWake { cond: c, after: k }` | `CondSignal { cond: c, n: k }` (`k` = 0: woken by a timeout) |
//! | `BarrierDepart { barrier: b, generation: g, parties }` | `parties` arrivals at `b` in generation `g` |
//!
//! and every event after the events before it in its own thread. A thread whose first event is
//! not `ThreadBegin` existed before monitoring began, and counts as begun.
//!
//! # Bounds
//!
//! A thread that stalls, or a cause that was lost, would hold its dependants forever. The
//! filter holds at most `max_held` events: past that, the event held longest is released as if
//! its cause had passed, and the release is reported as a [`Stall`]. [`OrderFilter::finish`]
//! releases what is still held at the end of a stream the same way, and
//! [`OrderFilter::release_held_before`] what has been held since before a given arrival (the
//! hub's rule: at most about a second, for streams joined while the program ran).
//!
//! A stream can also name any number of threads and objects (a crafted one, or a program
//! running for days), and the filter's state per thread and per object is bounded too:
//! - at most `max_threads` queue slots ([`OrderFilter::limit_threads`]). A thread holding
//!   nothing costs nothing to forget (its next event opens a slot again, and per-thread order
//!   needs only what is held), so past the bound the idle threads' slots are given back; if
//!   too few are idle, the events held longest are released under the stall rule above until
//!   a quarter of the slots are free. Counted in [`OrderStats::threads_forgotten`].
//! - at most `max_objects` objects' state ([`OrderFilter::limit_objects`]): forks and exits
//!   passed, each mutex's and condition's count, each barrier generation's arrivals. Past the
//!   bound the least recently changed half of those nobody waits on is forgotten; an event
//!   that needed a forgotten cause is held and then released under the stall rule. Counted in
//!   [`OrderStats::objects_forgotten`].
//!
//! Finding the event held longest costs O(1) amortised (a queue of the runs of held events in
//! arrival order), so neither bound makes a crafted stream expensive.
//!
//! # Cost
//!
//! A thread's events arrive in bursts (a monitor pass takes a thread's ring at once), so a
//! held event usually has its thread's burst queued behind it. When its cause passes, the
//! queue is drained from its head: each event's cause looked at, and each passing event
//! recorded and handed on as it leaves the queue (one pass, no second walk over the run: the
//! second walk's branches mispredicted often); a burst held behind one event costs
//! one entry in the queue of runs. A queue woken by the number it waited for releases its
//! head without looking again. A held event is kept without its thread (40 bytes for a `u64`
//! of data), in its thread's ring of a power-of-two capacity, so that holding it and releasing
//! it are a store and a load at a masked index; almost every event of a lock-heavy stream
//! passes through one. Looking at a cause and recording a passed event are inlined for the
//! common kinds (other events, a mutex's acquisition and release) and a call for the rest: one
//! branch on the kind where there was a call and a jump through a table, which mispredicted
//! often.
//!
//! Mutexes' and conditions' counts, looked up on every acquisition and release, sit in a dense
//! table behind a hash index, with a small direct-mapped cache of recently used ids in front
//! of it: a program keeps few locks busy at once, so most lookups are one comparison.
//!
//! # Hold-back ratio
//!
//! Falcon measured how misordered a stream is by its hold-back ratio: the times events were
//! held back (an event examined again and still held counts again) over the events.

use std::collections::VecDeque;

/// Threads the filter keeps a queue for, unless told otherwise ([`OrderFilter::limit_threads`]).
pub const DEFAULT_MAX_THREADS: usize = 1 << 16;
/// Objects whose state the filter keeps, unless told otherwise
/// ([`OrderFilter::limit_objects`]).
pub const DEFAULT_MAX_OBJECTS: usize = 1 << 20;

/// Hash maps with a fast hasher: the filter looks up a thread and an object per event.
type Map<K, V> = foldhash::HashMap<K, V>;

/// The thread-level meaning of an event, as far as ordering is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncEvent {
    /// The thread's first event; `parent` is the thread that forked it, when known.
    ThreadBegin { parent: Option<u64> },
    /// This thread created `child`.
    Fork { child: u64 },
    /// The thread ended.
    Exit,
    /// This thread's join of `joined` returned.
    JoinEnd { joined: u64 },
    /// The `n`th acquisition of `mutex` (counted from 1 per mutex).
    MutexAcquire { mutex: u64, n: u64 },
    /// The release of `mutex` after its `n`th acquisition.
    MutexRelease { mutex: u64, n: u64 },
    /// A shared (read) acquisition of `lock`, whose exclusive acquisitions are numbered as a
    /// mutex's, after `after` of them were released.
    SharedAcquire { lock: u64, after: u64 },
    /// The `n`th signal or broadcast of `cond` (counted from 1 per condition).
    CondSignal { cond: u64, n: u64 },
    /// A wait on `cond` returned, with `after` signals counted when it woke.
    CondWake { cond: u64, after: u64 },
    /// The thread reached `barrier` in `generation`.
    BarrierArrive { barrier: u64, generation: u64 },
    /// The thread left `barrier`'s `generation`, which needs `parties` arrivals.
    BarrierDepart {
        barrier: u64,
        generation: u64,
        parties: u32,
    },
    /// Any other event: ordered after the thread's earlier events only.
    Other,
}

/// One event of the stream: its thread, its ordering meaning, and what the caller carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<T> {
    pub thread: u64,
    pub kind: SyncEvent,
    pub data: T,
}

/// What a held event waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// The fork of `child`.
    Fork { child: u64 },
    /// The exit of `thread`.
    Exit { thread: u64 },
    /// The release after the `n`th acquisition of `mutex`.
    Release { mutex: u64, n: u64 },
    /// The `n`th signal of `cond`.
    Signal { cond: u64, n: u64 },
    /// `parties` arrivals at `barrier` in `generation`.
    Arrivals {
        barrier: u64,
        generation: u64,
        parties: u32,
    },
}

/// An event released without its cause: held too long, or held at the end of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// The thread whose event it was.
    pub thread: u64,
    /// What the event was waiting for.
    pub waited_for: Need,
    /// Events held when it was released.
    pub held: usize,
}

/// The filter's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderStats {
    /// Events taken in.
    pub events: u64,
    /// Events released.
    pub released: u64,
    /// Times an event was held back (again each time it was examined and still held).
    pub holds: u64,
    /// Events held now.
    pub held: usize,
    /// The most events held at once.
    pub peak_held: usize,
    /// Events released without their cause (see [`Stall`]).
    pub forced: u64,
    /// Idle threads' queue slots given back to stay within `max_threads` (nothing is lost:
    /// their next events open a slot again).
    pub threads_forgotten: u64,
    /// Objects' state forgotten to stay within `max_objects`.
    pub objects_forgotten: u64,
}

/// How much per-thread and per-object state a filter keeps now (see
/// [`OrderFilter::sizes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OrderSizes {
    /// Threads with a queue slot.
    pub threads: usize,
    /// Queue slots allocated (in use or free).
    pub slots: usize,
    /// Objects whose state is kept (forks, exits, mutexes, conditions, barrier generations).
    pub objects: usize,
    /// Entries in the queue of held events by arrival (one per run a thread held).
    pub arrivals: usize,
}

impl OrderStats {
    /// Falcon's hold-back ratio: holds per event.
    pub fn hold_back_ratio(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.holds as f64 / self.events as f64
        }
    }
}

/// The object a need is about, under which held threads wait to be examined again. Mutexes
/// and conditions have none: their waiters are kept with their counts ([`Counted`]), so that a
/// release wakes only the acquisition it lets pass, not every waiter of the mutex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Fork(u64),
    Exit(u64),
    Barrier(u64, u64),
}

impl Need {
    /// The key to wait under, for needs other than a count's.
    fn key(self) -> Option<Key> {
        match self {
            Need::Fork { child } => Some(Key::Fork(child)),
            Need::Exit { thread } => Some(Key::Exit(thread)),
            Need::Release { .. } | Need::Signal { .. } => None,
            Need::Arrivals {
                barrier,
                generation,
                ..
            } => Some(Key::Barrier(barrier, generation)),
        }
    }
}

/// What has been released so far, per object; each with the arrival number of its last
/// change, so that the least recently changed can be forgotten.
#[derive(Debug, Default)]
struct Released {
    /// Children whose fork has passed and who have not begun yet.
    forked: Map<u64, u64>,
    exited: Map<u64, u64>,
    /// Per mutex, the highest `n` whose release has passed, and who waits for which.
    mutex: Counts,
    /// Per condition, the highest signal number passed (signals pass in order), and waiters.
    cond: Counts,
    /// Per barrier generation, the arrivals passed.
    arrivals: Map<(u64, u64), (u32, u64)>,
    /// The arrival number of the event being handled.
    now: u64,
}

impl Released {
    /// The unmet cause of `kind`, if any.
    fn need(&self, thread: u64, kind: SyncEvent) -> Option<Need> {
        let need = match kind {
            SyncEvent::ThreadBegin { parent: Some(_) } => Need::Fork { child: thread },
            SyncEvent::JoinEnd { joined } => Need::Exit { thread: joined },
            SyncEvent::MutexAcquire { mutex, n } if n > 1 => Need::Release { mutex, n: n - 1 },
            SyncEvent::SharedAcquire { lock, after } if after > 0 => Need::Release {
                mutex: lock,
                n: after,
            },
            SyncEvent::CondSignal { cond, n } if n > 1 => Need::Signal { cond, n: n - 1 },
            SyncEvent::CondWake { cond, after } if after > 0 => Need::Signal { cond, n: after },
            SyncEvent::BarrierDepart {
                barrier,
                generation,
                parties,
            } => Need::Arrivals {
                barrier,
                generation,
                parties,
            },
            _ => return None,
        };
        (!self.met(need)).then_some(need)
    }

    fn met(&self, need: Need) -> bool {
        match need {
            Need::Fork { child } => self.forked.contains_key(&child),
            Need::Exit { thread } => self.exited.contains_key(&thread),
            Need::Release { mutex, n } => self.mutex.get(mutex).is_some_and(|c| c.count >= n),
            Need::Signal { cond, n } => self.cond.get(cond).is_some_and(|c| c.count >= n),
            Need::Arrivals {
                barrier,
                generation,
                parties,
            } => self
                .arrivals
                .get(&(barrier, generation))
                .is_some_and(|&(a, _)| a >= parties),
        }
    }

    /// Records a released event of `thread`; returns the key whose waiters may now pass, and
    /// adds counted objects' waiters that may to `woken`.
    fn pass(&mut self, thread: u64, kind: SyncEvent, woken: &mut Vec<(u32, u64)>) -> Option<Key> {
        let now = self.now;
        match kind {
            SyncEvent::ThreadBegin { .. } => {
                // A thread begins once: its fork is needed no more.
                self.forked.remove(&thread);
                None
            }
            SyncEvent::Exit => {
                self.exited.insert(thread, now);
                Some(Key::Exit(thread))
            }
            SyncEvent::Fork { child } => {
                self.forked.insert(child, now);
                Some(Key::Fork(child))
            }
            SyncEvent::MutexRelease { mutex, n } => {
                self.mutex.raise(mutex, n, now, woken);
                None
            }
            SyncEvent::CondSignal { cond, n } => {
                self.cond.raise(cond, n, now, woken);
                None
            }
            SyncEvent::BarrierArrive {
                barrier,
                generation,
            } => {
                let a = self.arrivals.entry((barrier, generation)).or_default();
                *a = (a.0.saturating_add(1), now);
                Some(Key::Barrier(barrier, generation))
            }
            _ => None,
        }
    }

    /// Records `need` as met, for an event released without its cause.
    fn assume(&mut self, need: Need, woken: &mut Vec<(u32, u64)>) -> Option<Key> {
        let now = self.now;
        match need {
            Need::Fork { child } => {
                self.forked.insert(child, now);
            }
            Need::Exit { thread } => {
                self.exited.insert(thread, now);
            }
            Need::Release { mutex, n } => {
                self.mutex.raise(mutex, n, now, woken);
                return None;
            }
            Need::Signal { cond, n } => {
                self.cond.raise(cond, n, now, woken);
                return None;
            }
            Need::Arrivals {
                barrier,
                generation,
                parties,
            } => {
                let a = self.arrivals.entry((barrier, generation)).or_default();
                *a = (a.0.max(parties), now);
            }
        }
        need.key()
    }

    /// Objects whose state is kept.
    fn objects(&self) -> usize {
        self.forked.len()
            + self.exited.len()
            + self.mutex.len()
            + self.cond.len()
            + self.arrivals.len()
    }

    /// Forgets the least recently changed half (at least) of the objects nobody waits on;
    /// returns how many were forgotten. Linear in the objects, so called only when their
    /// number has doubled since the last time or so.
    fn forget_oldest_half(&mut self) -> usize {
        let idle = |c: &Counted| c.waiters.is_empty();
        let mut stamps: Vec<u64> = Vec::with_capacity(self.objects());
        stamps.extend(self.forked.values().copied());
        stamps.extend(self.exited.values().copied());
        stamps.extend(self.mutex.values().filter(|c| idle(c)).map(|c| c.used));
        stamps.extend(self.cond.values().filter(|c| idle(c)).map(|c| c.used));
        stamps.extend(self.arrivals.values().map(|&(_, used)| used));
        if stamps.is_empty() {
            return 0;
        }
        let mid = stamps.len() / 2;
        let (_, &mut cut, _) = stamps.select_nth_unstable(mid);
        let before = self.objects();
        self.forked.retain(|_, used| *used > cut);
        self.exited.retain(|_, used| *used > cut);
        self.mutex.retain(|c| !idle(c) || c.used > cut);
        self.cond.retain(|c| !idle(c) || c.used > cut);
        self.arrivals.retain(|_, (_, used)| *used > cut);
        before - self.objects()
    }
}

/// A counted object (a mutex's releases, a condition's signals): the count passed so far and
/// the queues waiting for a number not yet passed. Keeping the waiters with the object makes a
/// hold, a release and a wake-up one lookup each.
#[derive(Debug, Default)]
struct Counted {
    count: u64,
    /// The arrival number of the last raise.
    used: u64,
    /// `(n, slot, ticket)`: the queue in `slot` waits for number `n` (while its ticket is
    /// `ticket`); the highest `n` first, so that a raise takes the waiters it satisfies from
    /// the end without looking at the others.
    waiters: Vec<(u64, u32, u64)>,
}

impl Counted {
    /// Adds a waiter for number `n`, after those waiting longer for the same number.
    fn add_waiter(&mut self, n: u64, slot: u32, ticket: u64) {
        let at = self.waiters.partition_point(|&(w, _, _)| w > n);
        self.waiters.insert(at, (n, slot, ticket));
    }
}

/// Entries of [`Counts`]' cache: a power of two, a few times the locks a program keeps busy at
/// once (a miss costs a hash probe, as without the cache).
const COUNTS_CACHE: usize = 256;

/// The counted objects of one kind (mutexes, or conditions) by id: densely in a table, found
/// through a hash index with a direct-mapped cache in front of it. A program keeps a few locks
/// busy, and an acquisition and its release look the same lock up, so most lookups are one
/// comparison instead of a hash probe.
#[derive(Debug)]
struct Counts {
    /// Object id → its place in `items`.
    index: Map<u64, u32>,
    /// The objects and their ids.
    items: Vec<(u64, Counted)>,
    /// `(id, place)` of objects looked up lately, each at the entry its id hashes to; a place
    /// past the end of `items` marks an empty entry. Emptied whenever places change.
    cache: Box<[(u64, u32)]>,
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            index: Map::default(),
            items: Vec::new(),
            cache: vec![(0, u32::MAX); COUNTS_CACHE].into_boxed_slice(),
        }
    }
}

impl Counts {
    /// The cache entry of `id` (Fibonacci hashing: ids that are addresses or small numbers
    /// both spread over the entries).
    #[inline]
    fn entry_of(id: u64) -> usize {
        (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - COUNTS_CACHE.trailing_zeros())) as usize
    }

    /// The place of `id`'s object in `items`, if it has one.
    #[inline]
    fn find(&self, id: u64) -> Option<usize> {
        let (cached, place) = self.cache[Self::entry_of(id)];
        if cached == id && (place as usize) < self.items.len() {
            return Some(place as usize);
        }
        self.index.get(&id).map(|&p| p as usize)
    }

    /// `id`'s object, if it has one.
    #[inline]
    fn get(&self, id: u64) -> Option<&Counted> {
        self.find(id).map(|p| &self.items[p].1)
    }

    /// `id`'s object, made (count 0, no waiters) if it had none.
    #[inline]
    fn get_or_default(&mut self, id: u64) -> &mut Counted {
        let e = Self::entry_of(id);
        let (cached, place) = self.cache[e];
        let place = if cached == id && (place as usize) < self.items.len() {
            place as usize
        } else {
            self.miss(id, e)
        };
        &mut self.items[place].1
    }

    /// Finds or makes `id`'s object through the index, and caches it at entry `e`.
    #[cold]
    #[inline(never)]
    fn miss(&mut self, id: u64, e: usize) -> usize {
        let items = &mut self.items;
        let place = *self.index.entry(id).or_insert_with(|| {
            items.push((id, Counted::default()));
            (items.len() - 1) as u32
        });
        self.cache[e] = (id, place);
        place as usize
    }

    /// Raises `id`'s count to `n`, moving the waiters it satisfies to `woken`.
    #[inline]
    fn raise(&mut self, id: u64, n: u64, now: u64, woken: &mut Vec<(u32, u64)>) {
        let c = self.get_or_default(id);
        c.used = now;
        if n <= c.count {
            return;
        }
        c.count = n;
        while let Some(&(w, slot, ticket)) = c.waiters.last()
            && w <= n
        {
            c.waiters.pop();
            woken.push((slot, ticket));
        }
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    fn values(&self) -> impl Iterator<Item = &Counted> {
        self.items.iter().map(|(_, c)| c)
    }

    /// Keeps the objects `keep` says to; the others' places are reused, so the index is
    /// rebuilt and the cache emptied.
    fn retain(&mut self, mut keep: impl FnMut(&Counted) -> bool) {
        self.items.retain(|(_, c)| keep(c));
        self.index.clear();
        self.index.extend(
            self.items
                .iter()
                .enumerate()
                .map(|(p, &(id, _))| (id, p as u32)),
        );
        self.cache.fill((0, u32::MAX));
    }
}

/// A held event without its thread (its queue's), with its arrival number: 40 bytes for a
/// `u64` of data rather than 48, since every held event is moved in and out of a queue.
#[derive(Debug)]
struct Held<T> {
    arrival: u64,
    kind: SyncEvent,
    data: T,
}

/// A thread's hold-back queue: its held events, oldest first, in a ring whose capacity is a
/// power of two, so that holding an event and releasing the oldest are a store and a load at a
/// masked index (a `VecDeque` wraps its indices by comparison and checks more on each).
/// Empty places are `None`, which costs no space: `Held`'s kind has room for the tag.
#[derive(Debug)]
struct HoldBack<T> {
    ring: Box<[Option<Held<T>>]>,
    /// The oldest event's place (always below the capacity, when there is one).
    head: usize,
    len: usize,
}

impl<T> Default for HoldBack<T> {
    fn default() -> Self {
        HoldBack {
            ring: Box::default(),
            head: 0,
            len: 0,
        }
    }
}

impl<T> HoldBack<T> {
    /// The capacity of a ring's first allocation.
    const FIRST: usize = 16;

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn capacity(&self) -> usize {
        self.ring.len()
    }

    #[inline]
    fn mask(&self) -> usize {
        self.ring.len().wrapping_sub(1)
    }

    #[inline]
    fn push_back(&mut self, held: Held<T>) {
        if self.len == self.ring.len() {
            self.grow();
        }
        let at = (self.head + self.len) & self.mask();
        self.ring[at] = Some(held);
        self.len += 1;
    }

    #[inline]
    fn front(&self) -> Option<&Held<T>> {
        if self.len == 0 {
            return None;
        }
        self.ring[self.head].as_ref()
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Held<T>> {
        if self.len == 0 {
            return None;
        }
        let held = self.ring[self.head].take();
        self.head = (self.head + 1) & self.mask();
        self.len -= 1;
        held
    }

    /// The held events, oldest first.
    fn iter(&self) -> impl Iterator<Item = &Held<T>> {
        let mask = self.mask();
        (0..self.len).filter_map(move |i| self.ring[(self.head + i) & mask].as_ref())
    }

    /// Doubles the capacity, the oldest event moved to the first place.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let capacity = (self.ring.len() * 2).max(Self::FIRST);
        let mut ring: Box<[Option<Held<T>>]> = (0..capacity).map(|_| None).collect();
        let mask = self.mask();
        for (i, place) in ring.iter_mut().take(self.len).enumerate() {
            *place = self.ring[(self.head + i) & mask].take();
        }
        self.ring = ring;
        self.head = 0;
    }
}

/// A thread's held events, oldest first. Queues are kept for the thread's life so that
/// holding an event allocates nothing once the queue has grown.
#[derive(Debug)]
struct Queue<T> {
    thread: u64,
    events: HoldBack<T>,
    /// The ticket under which the head waits for its cause (0: it does not), kept by the
    /// waiter entry too: an entry whose ticket is no longer the queue's is stale (the head was
    /// forced, or the slot given back), so a wake-up is one comparison.
    ticket: u64,
    /// The head is released without looking at its cause again: the cause it waited for has
    /// passed, or it was forced (its assumed cause may already be forgotten under a small
    /// `max_objects`, and looking again would hold it forever).
    head_passes: bool,
}

/// The ordering filter (see the module doc).
#[derive(Debug)]
pub struct OrderFilter<T> {
    max_held: usize,
    max_threads: usize,
    max_objects: usize,
    released: Released,
    /// Each thread's queue, by slot; slots of exited threads are reused.
    queues: Vec<Queue<T>>,
    slots: Map<u64, u32>,
    free: Vec<u32>,
    /// The last thread looked up and its slot: events come in bursts of one thread.
    last: Option<(u64, u32)>,
    /// Who waits for a fork, an exit or a barrier's arrivals: `(slot, ticket)`.
    waiters: Map<Key, Vec<(u32, u64)>>,
    /// Emptied waiter lists, reused so that a hold allocates nothing.
    spare: Vec<Vec<(u32, u64)>>,
    /// Waiters of counted objects a release lets pass, to examine again: `(slot, ticket)`.
    woken: Vec<(u32, u64)>,
    /// The last ticket handed to a waiting queue.
    tickets: u64,
    /// Slots to examine again, from objects that changed.
    ready: Vec<u32>,
    /// `(arrival, slot)` of the held events in arrival order, one entry per run of events held
    /// one after the other by the same slot (a thread's burst), so that the one held longest
    /// is found at once. Entries of runs since released are dropped when they reach the front
    /// (see [`OrderFilter::oldest`]), and the whole queue is rebuilt when such entries
    /// outnumber the held events.
    arrivals: VecDeque<(u64, u32)>,
    /// The slot of `arrivals`' last entry, if any: a held event joins its run on one
    /// comparison, without reaching into the `VecDeque`.
    last_run: Option<u32>,
    /// The counters; `peak_held` is brought up to date only before `held` falls and when read,
    /// not on every hold.
    stats: OrderStats,
    stalls: VecDeque<Stall>,
}

/// The most stalls kept for [`OrderFilter::take_stalls`]; all are counted in `forced`.
const KEPT_STALLS: usize = 1024;

impl<T> OrderFilter<T> {
    /// A filter that holds at most `max_held` events (at least 1), and keeps the state of at
    /// most [`DEFAULT_MAX_THREADS`] threads and [`DEFAULT_MAX_OBJECTS`] objects.
    pub fn new(max_held: usize) -> Self {
        OrderFilter {
            max_held: max_held.max(1),
            max_threads: DEFAULT_MAX_THREADS,
            max_objects: DEFAULT_MAX_OBJECTS,
            released: Released::default(),
            queues: Vec::new(),
            slots: Map::default(),
            free: Vec::new(),
            last: None,
            waiters: Map::default(),
            spare: Vec::new(),
            woken: Vec::new(),
            tickets: 0,
            ready: Vec::new(),
            arrivals: VecDeque::new(),
            last_run: None,
            stats: OrderStats::default(),
            stalls: VecDeque::new(),
        }
    }

    /// Keeps a queue for at most `max` threads (at least 4): past that, idle threads are
    /// forgotten, and if too few are idle the events held longest are released without their
    /// causes (see the module doc).
    pub fn limit_threads(&mut self, max: usize) {
        self.max_threads = max.max(4);
    }

    /// Keeps the state of at most `max` objects (at least 16) besides those waited on: past
    /// that, the least recently changed half is forgotten (see the module doc).
    pub fn limit_objects(&mut self, max: usize) {
        self.max_objects = max.max(16);
    }

    /// The per-thread and per-object state kept now.
    pub fn sizes(&self) -> OrderSizes {
        OrderSizes {
            threads: self.slots.len(),
            slots: self.queues.len(),
            objects: self.released.objects(),
            arrivals: self.arrivals.len(),
        }
    }

    /// Takes in one event; calls `out` with every event it releases, in causal order.
    #[inline]
    pub fn push(&mut self, event: Event<T>, out: &mut impl FnMut(Event<T>)) {
        self.stats.events += 1;
        let arrival = self.stats.events;
        self.released.now = arrival;
        let slot = self.slot(event.thread, out);
        let q = &mut self.queues[slot as usize];
        // Behind an earlier event of its thread, or its cause has not passed.
        if !q.events.is_empty()
            || (!matches!(event.kind, SyncEvent::Other)
                && self.hold(slot, event.thread, event.kind))
        {
            self.queues[slot as usize].events.push_back(Held {
                arrival,
                kind: event.kind,
                data: event.data,
            });
            self.stats.holds += 1;
            self.note_held(slot, arrival);
        } else {
            self.release(event, out);
        }
        if !self.ready.is_empty() {
            self.run_ready(out);
        }
        while self.stats.held > self.max_held {
            self.force_oldest(out);
        }
    }

    /// Releases, oldest first, every event held since before arrival number `arrival` (the
    /// value of `stats().events` when it was noted), each reported as a [`Stall`]. An on-line
    /// user calls it with the count of a second or so ago: a stream joined while the program
    /// ran lacks the causes of its first events (a fork, release or signal before the
    /// stream began), which would otherwise hold them until `max_held` is reached.
    pub fn release_held_before(&mut self, arrival: u64, out: &mut impl FnMut(Event<T>)) {
        while self.oldest_arrival().is_some_and(|a| a < arrival) {
            self.force_oldest(out);
        }
    }

    /// The arrival number of the event held longest.
    fn oldest_arrival(&mut self) -> Option<u64> {
        self.oldest().map(|(_, a)| a)
    }

    /// The slot and arrival number of the event held longest. The front entry of `arrivals`
    /// stands for a run: the events its slot held from its arrival up to the next entry's. If
    /// its queue's head lies in that run, it is the event held longest (every event held
    /// before it had an entry further ahead, and every other one lies in a later run); if not,
    /// the whole run was released.
    fn oldest(&mut self) -> Option<(u32, u64)> {
        while let Some(&(a, slot)) = self.arrivals.front() {
            let next = self.arrivals.get(1).map_or(u64::MAX, |&(n, _)| n);
            if let Some(h) = self.queues[slot as usize].events.front()
                && (a..next).contains(&h.arrival)
            {
                return Some((slot, h.arrival));
            }
            self.arrivals.pop_front();
            if self.arrivals.is_empty() {
                self.last_run = None;
            }
        }
        None
    }

    /// The end of the stream: releases everything still held, oldest first, each reported as
    /// a [`Stall`].
    pub fn finish(&mut self, out: &mut impl FnMut(Event<T>)) {
        while self.stats.held > 0 {
            self.force_oldest(out);
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> OrderStats {
        OrderStats {
            peak_held: self.stats.peak_held.max(self.stats.held),
            ..self.stats
        }
    }

    /// The stalls reported since the last call (the most recent [`KEPT_STALLS`]).
    pub fn take_stalls(&mut self) -> Vec<Stall> {
        std::mem::take(&mut self.stalls).into()
    }

    /// The queue slot of `thread`, made on its first event.
    #[inline]
    fn slot(&mut self, thread: u64, out: &mut impl FnMut(Event<T>)) -> u32 {
        if let Some((t, s)) = self.last
            && t == thread
        {
            return s;
        }
        let slot = match self.slots.get(&thread) {
            Some(&s) => s,
            None => self.new_slot(thread, out),
        };
        self.last = Some((thread, slot));
        slot
    }

    #[cold]
    fn new_slot(&mut self, thread: u64, out: &mut impl FnMut(Event<T>)) -> u32 {
        if self.slots.len() >= self.max_threads {
            self.make_room(out);
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.queues[s as usize].thread = thread;
                s
            }
            None => {
                self.queues.push(Queue {
                    thread,
                    events: HoldBack::default(),
                    ticket: 0,
                    head_passes: false,
                });
                (self.queues.len() - 1) as u32
            }
        };
        self.slots.insert(thread, slot);
        slot
    }

    /// Frees a quarter of `max_threads` slots: first those of the threads holding nothing,
    /// then, if too few were, those whose events have been held longest, releasing them
    /// without their causes (each reported as a [`Stall`]). Linear in the threads, but it frees
    /// a quarter of them, so a new thread costs O(1) amortised.
    #[cold]
    fn make_room(&mut self, out: &mut impl FnMut(Event<T>)) {
        self.forget_idle();
        let target = self.max_threads - self.max_threads / 4;
        while self.slots.len() > target
            && let Some((slot, _)) = self.oldest()
        {
            self.force_oldest(out);
            let thread = self.queues[slot as usize].thread;
            if self.retire(thread) {
                self.stats.threads_forgotten += 1;
            }
        }
        if self.slots.len() > target {
            // Forcing released everything: the rest are idle now.
            self.forget_idle();
        }
    }

    /// Gives back the slots of every thread holding nothing.
    fn forget_idle(&mut self) {
        let idle: Vec<u64> = self
            .slots
            .iter()
            .filter(|&(_, &s)| self.queues[s as usize].events.is_empty())
            .map(|(&t, _)| t)
            .collect();
        for t in idle {
            if self.retire(t) {
                self.stats.threads_forgotten += 1;
            }
        }
    }

    /// Forgets a thread whose queue is empty (it exited, or it is idle and room is needed), so
    /// that slots stay as many as the threads alive; returns whether it did.
    fn retire(&mut self, thread: u64) -> bool {
        if let Some(&slot) = self.slots.get(&thread)
            && self.queues[slot as usize].events.is_empty()
        {
            self.slots.remove(&thread);
            let q = &mut self.queues[slot as usize];
            q.ticket = 0;
            q.head_passes = false;
            if q.events.capacity() > 1024 {
                q.events = HoldBack::default();
            }
            self.free.push(slot);
            if self.last.is_some_and(|(t, _)| t == thread) {
                self.last = None;
            }
            return true;
        }
        false
    }

    /// Notes an event held in `slot` on arrival.
    fn note_held(&mut self, slot: u32, arrival: u64) {
        self.stats.held += 1;
        if self.last_run != Some(slot) {
            self.arrivals.push_back((arrival, slot));
            self.last_run = Some(slot);
            if self.arrivals.len() > 2 * self.stats.held + 1024 {
                self.rebuild_arrivals();
            }
        }
    }

    /// Rebuilds `arrivals` from the queues: entries of released events had come to
    /// outnumber the held ones (an event held long while many passed behind it).
    #[cold]
    fn rebuild_arrivals(&mut self) {
        let mut all: Vec<(u64, u32)> = Vec::with_capacity(self.stats.held);
        for (s, q) in self.queues.iter().enumerate() {
            all.extend(q.events.iter().map(|h| (h.arrival, s as u32)));
        }
        all.sort_unstable();
        all.dedup_by_key(|&mut (_, s)| s);
        self.last_run = all.last().map(|&(_, s)| s);
        self.arrivals = all.into();
    }

    /// Forgets the least recently changed objects when there are more than `max_objects`.
    fn bound_objects(&mut self) {
        if self.released.objects() > self.max_objects {
            self.stats.objects_forgotten += self.released.forget_oldest_half() as u64;
        }
    }

    /// Whether the event `kind` of `thread`, at the head of `slot`, must wait for its cause;
    /// if so, the slot now waits for it. A mutex's or condition's count is looked up once for
    /// both. Inlined where events pass: most have no cause, and an acquisition's is one
    /// lookup; the rarer kinds take a call.
    #[inline(always)]
    fn hold(&mut self, slot: u32, thread: u64, kind: SyncEvent) -> bool {
        match kind {
            SyncEvent::MutexAcquire { mutex, n } if n > 1 => self.hold_mutex(slot, mutex, n - 1),
            SyncEvent::Other
            | SyncEvent::MutexAcquire { .. }
            | SyncEvent::MutexRelease { .. }
            | SyncEvent::Exit
            | SyncEvent::Fork { .. }
            | SyncEvent::BarrierArrive { .. }
            | SyncEvent::ThreadBegin { parent: None } => false,
            _ => self.hold_other(slot, thread, kind),
        }
    }

    /// [`OrderFilter::hold`] for an acquisition that needs release `n` of `mutex`.
    #[inline(always)]
    fn hold_mutex(&mut self, slot: u32, mutex: u64, n: u64) -> bool {
        let c = self.released.mutex.get_or_default(mutex);
        if c.count >= n {
            return false;
        }
        Self::wait_counted(&mut self.queues, &mut self.tickets, c, slot, n);
        true
    }

    /// Makes `slot` wait for number `n` of the counted object `c`. A queue already waiting
    /// waits for this head's cause: its head cannot change before it is woken or forced,
    /// which takes its ticket back.
    #[inline]
    fn wait_counted(
        queues: &mut [Queue<T>],
        tickets: &mut u64,
        c: &mut Counted,
        slot: u32,
        n: u64,
    ) {
        let q = &mut queues[slot as usize];
        if q.ticket == 0 {
            *tickets += 1;
            q.ticket = *tickets;
            c.add_waiter(n, slot, q.ticket);
        }
    }

    /// [`OrderFilter::hold`] for the kinds other than a mutex's.
    #[inline(never)]
    fn hold_other(&mut self, slot: u32, thread: u64, kind: SyncEvent) -> bool {
        let (counts, object, n) = match kind {
            SyncEvent::SharedAcquire { lock, after } if after > 0 => {
                (&mut self.released.mutex, lock, after)
            }
            SyncEvent::CondSignal { cond, n } if n > 1 => (&mut self.released.cond, cond, n - 1),
            SyncEvent::CondWake { cond, after } if after > 0 => {
                (&mut self.released.cond, cond, after)
            }
            SyncEvent::ThreadBegin { parent: Some(_) }
            | SyncEvent::JoinEnd { .. }
            | SyncEvent::BarrierDepart { .. } => {
                return match self.released.need(thread, kind).and_then(Need::key) {
                    Some(key) => {
                        self.wait(slot, key);
                        true
                    }
                    None => false,
                };
            }
            _ => return false,
        };
        let c = counts.get_or_default(object);
        if c.count >= n {
            return false;
        }
        Self::wait_counted(&mut self.queues, &mut self.tickets, c, slot, n);
        true
    }

    /// Makes `slot` wait for a fork, an exit or a barrier's arrivals.
    fn wait(&mut self, slot: u32, key: Key) {
        let q = &mut self.queues[slot as usize];
        if q.ticket == 0 {
            self.tickets += 1;
            q.ticket = self.tickets;
            let spare = &mut self.spare;
            self.waiters
                .entry(key)
                .or_insert_with(|| spare.pop().unwrap_or_default())
                .push((slot, q.ticket));
        }
    }

    #[inline]
    fn release(&mut self, event: Event<T>, out: &mut impl FnMut(Event<T>)) {
        self.stats.released += 1;
        let (thread, kind) = (event.thread, event.kind);
        self.passed(thread, kind);
        out(event);
        if matches!(kind, SyncEvent::Exit) {
            self.retire(thread);
        }
    }

    /// Records that an event of `thread` has passed, waking what it lets pass. Most events
    /// change nothing another waits for: they return at once. Inlined where events pass; a
    /// mutex's release is handled here, the rarer kinds take a call.
    #[inline(always)]
    fn passed(&mut self, thread: u64, kind: SyncEvent) {
        match kind {
            SyncEvent::Other
            | SyncEvent::MutexAcquire { .. }
            | SyncEvent::SharedAcquire { .. }
            | SyncEvent::CondWake { .. }
            | SyncEvent::JoinEnd { .. }
            | SyncEvent::BarrierDepart { .. } => {}
            SyncEvent::MutexRelease { mutex, n } => {
                let now = self.released.now;
                let before = self.released.mutex.len();
                self.released.mutex.raise(mutex, n, now, &mut self.woken);
                if !self.woken.is_empty() {
                    self.wake_passed(None);
                }
                // Only a mutex seen for the first time adds an object.
                if self.released.mutex.len() != before {
                    self.bound_objects();
                }
            }
            _ => self.passed_other(thread, kind),
        }
    }

    /// [`OrderFilter::passed`] for forks, exits, beginnings, signals and barrier arrivals.
    #[inline(never)]
    fn passed_other(&mut self, thread: u64, kind: SyncEvent) {
        let key = self.released.pass(thread, kind, &mut self.woken);
        if key.is_some() || !self.woken.is_empty() {
            self.wake_passed(key);
        }
        self.bound_objects();
    }

    /// Wakes the waiters of `key` and the counted objects' waiters in `self.woken`.
    fn wake_passed(&mut self, key: Option<Key>) {
        if let Some(key) = key {
            self.wake(key);
        }
        // Indexed, then cleared: a `drain` iterator cost more than the usual one entry's work.
        let (woken, queues, ready) = (&mut self.woken, &mut self.queues, &mut self.ready);
        for &(slot, ticket) in woken.iter() {
            let q = &mut queues[slot as usize];
            if q.ticket == ticket {
                q.ticket = 0;
                // Woken by the number it waits for: its cause has passed.
                q.head_passes = true;
                ready.push(slot);
            }
        }
        woken.clear();
    }

    fn wake(&mut self, key: Key) {
        if let Some(mut slots) = self.waiters.remove(&key) {
            // A fork or exit is the whole cause; a barrier's arrival may be one of several.
            let passes = !matches!(key, Key::Barrier(..));
            for (s, ticket) in slots.drain(..) {
                let q = &mut self.queues[s as usize];
                if q.ticket == ticket {
                    q.ticket = 0;
                    q.head_passes = passes;
                    self.ready.push(s);
                }
            }
            if self.spare.len() < 1024 {
                self.spare.push(slots);
            }
        }
    }

    /// Examines again the threads whose causes may have passed, releasing what now may.
    fn run_ready(&mut self, out: &mut impl FnMut(Event<T>)) {
        while let Some(s) = self.ready.pop() {
            self.drain_queue(s, out);
        }
    }

    /// Releases a queue's events from the head while their causes have passed, oldest first:
    /// each event's cause looked at, the event recorded as passed and handed on.
    fn drain_queue(&mut self, slot: u32, out: &mut impl FnMut(Event<T>)) {
        let q = &mut self.queues[slot as usize];
        let mut passes = std::mem::take(&mut q.head_passes);
        let thread = q.thread;
        // Out of the queue while it is drained, so that looking at causes may borrow the
        // filter; nothing else touches this queue meanwhile.
        let mut events = std::mem::take(&mut q.events);
        let mut run = 0;
        let mut exit = false;
        while let Some(head) = events.front() {
            let kind = head.kind;
            if !matches!(kind, SyncEvent::Other) {
                if !passes && self.hold(slot, thread, kind) {
                    self.stats.holds += 1;
                    break;
                }
                self.passed(thread, kind);
                exit |= matches!(kind, SyncEvent::Exit);
            }
            passes = false;
            run += 1;
            // Handed on at once: recording wakes other queues but releases nothing, so the
            // order of what is handed on is the same as handing the run on after it.
            if let Some(Held { kind, data, .. }) = events.pop_front() {
                out(Event { thread, kind, data });
            }
        }
        self.stats.peak_held = self.stats.peak_held.max(self.stats.held);
        self.stats.held -= run;
        self.stats.released += run as u64;
        self.queues[slot as usize].events = events;
        if exit {
            self.retire(thread);
        }
    }

    /// Releases the event held longest as if its cause had passed, and reports it.
    fn force_oldest(&mut self, out: &mut impl FnMut(Event<T>)) {
        let Some((slot, _)) = self.oldest() else {
            return;
        };
        let q = &self.queues[slot as usize];
        let thread = q.thread;
        let head = q.events.front().expect("found above").kind;
        if let Some(need) = self.released.need(thread, head) {
            if self.stalls.len() == KEPT_STALLS {
                self.stalls.pop_front();
            }
            self.stalls.push_back(Stall {
                thread,
                waited_for: need,
                held: self.stats.held,
            });
            self.stats.forced += 1;
            let key = self.released.assume(need, &mut self.woken);
            self.wake_passed(key);
            self.bound_objects();
        }
        let q = &mut self.queues[slot as usize];
        q.ticket = 0;
        q.head_passes = true;
        self.ready.push(slot);
        self.run_ready(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Ids whose cache entry is `id`'s (`n` of them, `id` first).
    fn colliding(id: u64, n: usize) -> Vec<u64> {
        let e = Counts::entry_of(id);
        (0..)
            .map(|k| id + k)
            .filter(|&o| Counts::entry_of(o) == e)
            .take(n)
            .collect()
    }

    #[test]
    fn ids_sharing_a_cache_entry_keep_their_own_counts() {
        let ids = colliding(7, 3);
        assert_eq!(ids.len(), 3);
        let mut c = Counts::default();
        let mut woken = Vec::new();
        // Alternate between the ids, so that each lookup evicts the last one's entry.
        let mut expect = [None; 3];
        for round in 1..=5u64 {
            for (k, &id) in ids.iter().enumerate() {
                let n = round * 10 + k as u64;
                c.raise(id, n, round, &mut woken);
                expect[k] = Some(n);
                for (j, &o) in ids.iter().enumerate() {
                    assert_eq!(c.get(o).map(|c| c.count), expect[j], "id {o}");
                }
            }
        }
        assert_eq!(c.len(), 3);
        // Forgetting one moves the others' places: the cache must not point at old ones.
        let keep = ids[2];
        c.get_or_default(ids[0]).used = 0;
        c.get_or_default(ids[1]).used = 0;
        c.retain(|o| o.used > 0);
        assert_eq!(c.len(), 1);
        assert!(c.get(ids[0]).is_none() && c.get(ids[1]).is_none());
        assert_eq!(c.get(keep).map(|c| c.count), Some(52));
        assert_eq!(
            c.get_or_default(ids[0]).count,
            0,
            "made again, from nothing"
        );
    }

    /// What [`Counts`] does for one op, the plain way: a hash map of [`Counted`].
    #[derive(Debug, Clone)]
    enum CountsOp {
        Raise(usize, u64),
        Wait(usize, u64),
        Get(usize),
        Forget(u64),
    }

    fn counts_op() -> impl Strategy<Value = CountsOp> {
        prop_oneof![
            4 => (0..12usize, 0..40u64).prop_map(|(i, n)| CountsOp::Raise(i, n)),
            2 => (0..12usize, 0..40u64).prop_map(|(i, n)| CountsOp::Wait(i, n)),
            3 => (0..12usize).prop_map(CountsOp::Get),
            1 => (0..200u64).prop_map(CountsOp::Forget),
        ]
    }

    proptest! {
        /// The cached table answers as a plain map would, for ids that share cache entries
        /// and ids that do not, through raises, waits and forgetting.
        #[test]
        fn counts_answer_as_a_plain_map(
            seed in any::<u64>(),
            ops in proptest::collection::vec(counts_op(), 1..300),
        ) {
            let mut ids = colliding(seed % 1000, 6);
            ids.extend((1..=6u64).map(|k| seed.wrapping_mul(k).rotate_left(k as u32)));
            let mut cached = Counts::default();
            let mut plain: Map<u64, Counted> = Map::default();
            let (mut woken_c, mut woken_p) = (Vec::new(), Vec::new());
            for (now, op) in ops.into_iter().enumerate() {
                let now = now as u64 + 1;
                match op {
                    CountsOp::Raise(i, n) => {
                        cached.raise(ids[i], n, now, &mut woken_c);
                        let c = plain.entry(ids[i]).or_default();
                        c.used = now;
                        if n > c.count {
                            c.count = n;
                            while let Some(&(w, slot, ticket)) = c.waiters.last()
                                && w <= n
                            {
                                c.waiters.pop();
                                woken_p.push((slot, ticket));
                            }
                        }
                        prop_assert_eq!(&woken_c, &woken_p);
                    }
                    CountsOp::Wait(i, n) => {
                        cached.get_or_default(ids[i]).add_waiter(n, i as u32, now);
                        plain.entry(ids[i]).or_default().add_waiter(n, i as u32, now);
                    }
                    CountsOp::Get(i) => {
                        let c = cached.get(ids[i]).map(|c| (c.count, c.used, c.waiters.clone()));
                        let p = plain.get(&ids[i]).map(|c| (c.count, c.used, c.waiters.clone()));
                        prop_assert_eq!(c, p);
                    }
                    CountsOp::Forget(cut) => {
                        cached.retain(|c| !c.waiters.is_empty() || c.used > cut);
                        plain.retain(|_, c| !c.waiters.is_empty() || c.used > cut);
                    }
                }
                prop_assert_eq!(cached.len(), plain.len());
            }
            for &id in &ids {
                let c = cached.get(id).map(|c| (c.count, c.used, c.waiters.clone()));
                let p = plain.get(&id).map(|c| (c.count, c.used, c.waiters.clone()));
                prop_assert_eq!(c, p);
            }
        }
    }

    proptest! {
        /// A hold-back queue gives its events back oldest first, as a `VecDeque` does,
        /// across growing and wrapping around its ring.
        #[test]
        fn a_hold_back_queue_answers_as_a_deque(ops in proptest::collection::vec(0..3u8, 1..400)) {
            let mut ring = HoldBack::default();
            let mut plain = VecDeque::new();
            for (arrival, op) in ops.into_iter().enumerate() {
                let arrival = arrival as u64;
                if op == 0 {
                    prop_assert_eq!(ring.pop_front().map(|h| h.arrival), plain.pop_front());
                } else {
                    let kind = SyncEvent::MutexAcquire { mutex: arrival, n: 1 };
                    ring.push_back(Held { arrival, kind, data: arrival });
                    plain.push_back(arrival);
                }
                prop_assert_eq!(ring.front().map(|h| h.arrival), plain.front().copied());
                prop_assert_eq!(ring.is_empty(), plain.is_empty());
                let listed: Vec<u64> = ring.iter().map(|h| h.data).collect();
                prop_assert_eq!(listed, plain.iter().copied().collect::<Vec<_>>());
            }
        }
    }

    fn ev(thread: u64, kind: SyncEvent) -> Event<u32> {
        Event {
            thread,
            kind,
            data: 0,
        }
    }

    fn run(filter: &mut OrderFilter<u32>, events: Vec<Event<u32>>) -> Vec<(u64, SyncEvent)> {
        let mut out = Vec::new();
        for e in events {
            filter.push(e, &mut |e| out.push((e.thread, e.kind)));
        }
        out
    }

    #[test]
    fn a_child_waits_for_its_fork_and_a_join_for_the_exit() {
        let mut f = OrderFilter::new(100);
        let out = run(
            &mut f,
            vec![
                ev(2, SyncEvent::ThreadBegin { parent: Some(1) }),
                ev(2, SyncEvent::Exit),
                ev(1, SyncEvent::ThreadBegin { parent: None }),
                ev(1, SyncEvent::Fork { child: 2 }),
                ev(1, SyncEvent::JoinEnd { joined: 2 }),
            ],
        );
        assert_eq!(
            out,
            vec![
                (1, SyncEvent::ThreadBegin { parent: None }),
                (1, SyncEvent::Fork { child: 2 }),
                (2, SyncEvent::ThreadBegin { parent: Some(1) }),
                (2, SyncEvent::Exit),
                (1, SyncEvent::JoinEnd { joined: 2 }),
            ]
        );
        let s = f.stats();
        assert_eq!((s.events, s.released, s.held, s.forced), (5, 5, 0, 0));
        // Thread 2's begin was held on arrival (1), its exit behind it (1).
        assert_eq!(s.holds, 2);
        assert!((s.hold_back_ratio() - 0.4).abs() < 1e-9);
    }

    #[test]
    fn acquisitions_of_one_mutex_pass_in_order() {
        let mut f = OrderFilter::new(100);
        let m = 7;
        let out = run(
            &mut f,
            vec![
                ev(2, SyncEvent::MutexAcquire { mutex: m, n: 2 }),
                ev(2, SyncEvent::MutexRelease { mutex: m, n: 2 }),
                ev(1, SyncEvent::MutexAcquire { mutex: m, n: 1 }),
                ev(1, SyncEvent::MutexRelease { mutex: m, n: 1 }),
            ],
        );
        let order: Vec<u64> = out.iter().map(|(t, _)| *t).collect();
        assert_eq!(order, vec![1, 1, 2, 2]);
    }

    #[test]
    fn events_held_too_long_are_released_in_arrival_order() {
        let mut f = OrderFilter::new(100);
        // A stream joined late: acquisition 5's cause (release 4) came before it began.
        let out = run(
            &mut f,
            vec![
                ev(2, SyncEvent::MutexAcquire { mutex: 1, n: 5 }),
                ev(2, SyncEvent::MutexRelease { mutex: 1, n: 5 }),
                ev(3, SyncEvent::MutexAcquire { mutex: 1, n: 6 }),
            ],
        );
        assert!(out.is_empty());
        let mut out = Vec::new();
        f.release_held_before(2, &mut |e| out.push((e.thread, e.kind)));
        assert_eq!(
            out,
            vec![
                (2, SyncEvent::MutexAcquire { mutex: 1, n: 5 }),
                (2, SyncEvent::MutexRelease { mutex: 1, n: 5 }),
                (3, SyncEvent::MutexAcquire { mutex: 1, n: 6 }),
            ]
        );
        assert_eq!((f.stats().forced, f.stats().held), (1, 0));
    }

    #[test]
    fn a_barrier_departure_waits_for_every_arrival() {
        let mut f = OrderFilter::new(100);
        let depart = |t| {
            ev(
                t,
                SyncEvent::BarrierDepart {
                    barrier: 1,
                    generation: 0,
                    parties: 3,
                },
            )
        };
        let arrive = |t| {
            ev(
                t,
                SyncEvent::BarrierArrive {
                    barrier: 1,
                    generation: 0,
                },
            )
        };
        let out = run(
            &mut f,
            vec![
                arrive(1),
                depart(1),
                arrive(2),
                depart(2),
                arrive(3),
                depart(3),
            ],
        );
        let kinds: Vec<bool> = out
            .iter()
            .map(|(_, k)| matches!(k, SyncEvent::BarrierArrive { .. }))
            .collect();
        assert_eq!(kinds, vec![true, true, true, false, false, false]);
    }

    #[test]
    fn a_lost_cause_stalls_within_the_bound_and_is_reported() {
        let mut f = OrderFilter::new(16);
        let mut events = vec![ev(2, SyncEvent::MutexAcquire { mutex: 1, n: 2 })];
        events.extend((0..100).map(|_| ev(2, SyncEvent::Other)));
        let out = run(&mut f, events);
        let s = f.stats();
        assert!(s.peak_held <= 17, "{s:?}");
        assert!(s.held <= 16);
        assert_eq!(s.forced, 1);
        assert_eq!(out.len() as u64, s.released);
        assert_eq!(
            f.take_stalls(),
            vec![Stall {
                thread: 2,
                waited_for: Need::Release { mutex: 1, n: 1 },
                held: 17
            }]
        );
        // The late release passes, and the next acquisition needs release 2, not 1.
        let out = run(
            &mut f,
            vec![
                ev(1, SyncEvent::MutexRelease { mutex: 1, n: 1 }),
                ev(3, SyncEvent::MutexAcquire { mutex: 1, n: 3 }),
            ],
        );
        assert_eq!(out.len(), 1);
        let mut rest = Vec::new();
        f.finish(&mut |e| rest.push(e.kind));
        assert_eq!(rest, vec![SyncEvent::MutexAcquire { mutex: 1, n: 3 }]);
        assert_eq!(f.stats().forced, 2);
        assert_eq!(f.stats().held, 0);
        assert!(
            f.waiters.is_empty(),
            "causes that never came leave no waiters"
        );
    }

    /// A crafted stream: two million threads, each with one event. Idle threads are forgotten
    /// (nothing is lost), so the filter keeps at most its bound of them.
    #[test]
    fn millions_of_threads_stay_within_the_bound() {
        let mut f = OrderFilter::new(1 << 20);
        f.limit_threads(1000);
        let mut released = 0u64;
        for t in 0..2_000_000u64 {
            f.push(ev(t, SyncEvent::Other), &mut |_| released += 1);
            assert!(f.sizes().threads <= 1000);
        }
        let s = f.stats();
        assert_eq!(released, 2_000_000);
        assert_eq!(s.forced, 0, "forgetting idle threads loses nothing");
        assert!(s.threads_forgotten >= 2_000_000 - 1000, "{s:?}");
        assert!(f.sizes().slots <= 1000, "{:?}", f.sizes());
    }

    /// Threads each holding an event whose cause never comes: room is made by
    /// releasing the events held longest under the stall rule, each counted.
    #[test]
    fn millions_of_held_threads_are_released_and_counted() {
        let mut f = OrderFilter::new(1 << 20);
        f.limit_threads(1000);
        let mut released = 0u64;
        for t in 1..=200_000u64 {
            f.push(
                ev(t, SyncEvent::ThreadBegin { parent: Some(0) }),
                &mut |_| released += 1,
            );
            let sizes = f.sizes();
            assert!(sizes.threads <= 1000 && sizes.slots <= 1000, "{sizes:?}");
            assert!(sizes.arrivals <= 2 * f.stats().held + 1025, "{sizes:?}");
        }
        let s = f.stats();
        assert!(s.held <= 1000);
        assert_eq!(released + s.held as u64, 200_000);
        assert_eq!(s.forced, released);
        // Each begin needed its own fork: once assumed, it is forgotten when the child begins.
        assert!(f.sizes().objects <= 1000, "{:?}", f.sizes());
    }

    /// Two million mutexes, conditions, barrier generations and forks: the least recently
    /// changed are forgotten, and counted.
    #[test]
    fn millions_of_objects_stay_within_the_bound() {
        let mut f = OrderFilter::new(1 << 20);
        f.limit_objects(10_000);
        let mut released = 0u64;
        for o in 1..=2_000_000u64 {
            let kind = match o % 4 {
                0 => SyncEvent::MutexRelease { mutex: o, n: 1 },
                1 => SyncEvent::CondSignal { cond: o, n: 1 },
                2 => SyncEvent::BarrierArrive {
                    barrier: 1,
                    generation: o,
                },
                _ => SyncEvent::Fork { child: o },
            };
            f.push(ev(1, kind), &mut |_| released += 1);
            assert!(f.sizes().objects <= 10_000, "{:?}", f.sizes());
        }
        assert_eq!(released, 2_000_000);
        let s = f.stats();
        assert!(s.objects_forgotten >= 2_000_000 - 10_000, "{s:?}");
        assert_eq!(s.forced, 0);
    }

    /// Forcing with a small object bound: the cause a forced release assumes can be forgotten
    /// at once (every object changed at the same arrival), and the event must still come out;
    /// each forced release releases at least one event, so the end of a stream terminates.
    #[test]
    fn every_forced_release_makes_progress_under_a_small_object_bound() {
        let mut f = OrderFilter::new(1 << 20);
        f.limit_objects(16);
        let mut out = 0usize;
        for t in 1..=40u64 {
            f.push(
                ev(t, SyncEvent::MutexAcquire { mutex: t, n: 2 }),
                &mut |_| out += 1,
            );
            f.push(ev(t, SyncEvent::Other), &mut |_| out += 1);
        }
        assert_eq!((out, f.stats().held), (0, 80));
        // At most one force per held event: a force that releases nothing would loop forever.
        for _ in 0..80 {
            if f.stats().held == 0 {
                break;
            }
            let before = f.stats().held;
            f.force_oldest(&mut |_| out += 1);
            assert!(f.stats().held < before, "a forced release released nothing");
        }
        assert_eq!((out, f.stats().held, f.stats().forced), (80, 0, 40));
        // And `finish` ends on the same stream.
        let mut f = OrderFilter::new(1 << 20);
        f.limit_objects(16);
        for t in 1..=40u64 {
            f.push(
                ev(t, SyncEvent::MutexAcquire { mutex: t, n: 2 }),
                &mut |_| {},
            );
        }
        let mut rest = 0;
        f.finish(&mut |_| rest += 1);
        assert_eq!(rest, 40);
    }

    /// An acquisition whose mutex was forgotten waits for a release that passed long ago: it is
    /// released by the stall rule, and the mutex is known again from then on.
    #[test]
    fn a_forgotten_object_costs_a_stall_not_an_error() {
        let mut f = OrderFilter::new(1 << 20);
        f.limit_objects(16);
        let mut out = Vec::new();
        f.push(
            ev(1, SyncEvent::MutexRelease { mutex: 7, n: 1 }),
            &mut |e| out.push(e.kind),
        );
        for m in 100..200 {
            f.push(
                ev(1, SyncEvent::MutexRelease { mutex: m, n: 1 }),
                &mut |e| out.push(e.kind),
            );
        }
        assert!(f.stats().objects_forgotten > 0);
        f.push(
            ev(2, SyncEvent::MutexAcquire { mutex: 7, n: 2 }),
            &mut |e| out.push(e.kind),
        );
        assert_eq!(out.len(), 101, "held: its cause was forgotten");
        f.release_held_before(u64::MAX, &mut |e| out.push(e.kind));
        assert_eq!(out.len(), 102);
        assert_eq!(f.stats().forced, 1);
        f.push(
            ev(2, SyncEvent::MutexRelease { mutex: 7, n: 2 }),
            &mut |e| out.push(e.kind),
        );
        f.push(
            ev(3, SyncEvent::MutexAcquire { mutex: 7, n: 3 }),
            &mut |e| out.push(e.kind),
        );
        assert_eq!(out.len(), 104);
        assert_eq!(f.stats().forced, 1);
    }
}
