//! The mapping the timeline formats (Perfetto, Chrome) share: what each gyr record becomes on
//! a timeline of processes, threads, slices, instants, counters and flows.
//!
//! [`Mapper`] reads records as a [`Consumer`] and calls a [`Timeline`] (one per format) with
//! what to draw, so that both formats show the same thing and only the encodings differ.
//!
//! | records | on the timeline |
//! |---|---|
//! | `gyr.span.begin` / `end` | a slice named by the span, on its thread |
//! | `gyr.mutex.request` → `acquire` | slice "wait mutex M" |
//! | `gyr.mutex.acquire` → `release` | slice "hold mutex M" on a track of the thread's own for M, so that holds of different locks never mis-nest |
//! | `gyr.rwlock.*` | the same, "wait/hold rwlock L (read/write)" |
//! | `gyr.cond.wait` → `wake` | slice "cond wait C", then an instant "woken cond C" |
//! | `gyr.thread.join_begin` → `join_end` | slice "join T", then an instant "joined T" |
//! | `gyr.barrier.arrive` → `depart` | slice "barrier B", then an instant "depart barrier B" |
//! | `gyr.thread.fork`, `begin`, `exit`, `gyr.cond.signal`, `broadcast`, ... | instants |
//! | `gyr.lost` | instant "lost N events" |
//! | `gyr.mpi.begin` / `end` (the MPI interposer) | a slice named by the MPI call, on its thread |
//! | `gyr.msg.send` / `recv` (`gyr::msg`, the MPI interposer) | instants "send N B to rank P", "recv N B from rank P", joined by an arrow |
//! | numeric fields of the program's event types | a counter track per type and field (`type.field`) |
//! | anything else | an instant with the record's fields |
//!
//! Flows (arrows) link causes to effects: the release after the `n`th acquisition of a mutex to
//! the `n+1`th acquisition (and likewise for write locks), a signal or broadcast `n` to the
//! wake-ups that counted it (one arrow per flow: a broadcast's arrow reaches the first wake-up
//! drawn), a fork to the child's begin, an exit to the join that waited for it, and the last
//! arrival at a barrier generation to every departure from it. Flow ids follow from the object
//! and its sequence numbers alone, so either end can be written without the other having been
//! seen; only barriers keep a small table per generation (the last arrival is known once the
//! parties are).
//!
//! Messages between processes are arrows too: the `n`th send from rank A to rank B with a given
//! communicator and tag to B's `n`th receive from A with the same (MPI's non-overtaking rule),
//! with ids from those alone, so the two files need not be read together. A file's rank is its
//! `gyr.msg.rank` event's (found before the export starts, and shown in its process's name).
//!
//! Waits end with an instant carrying the incoming arrow because viewers draw an arrow to the
//! start of the slice it reaches: drawn to the wait's start, it would point back in time.
//!
//! Every slice opened is closed: a wait or span still open when its input ends is closed at its
//! thread's last timestamp, and an end without its begin (the begin was in a lost chunk) is
//! dropped, so viewers always see balanced slices.

use super::{Consumer, FileStart};
use crate::sync_events::Kind as Sync;
use gyr_core::ThreadInfo;
use gyr_core::record::RecordHeader;
use gyr_core::schema::{FieldType, ScalarType, Schema, TypeId};
use gyr_core::trace::TraceEnd;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for the exports' small integer keys (thread ids, object ids): a multiply and a
/// rotate per word, where the standard one spends a hundred instructions a look-up. The keys
/// come from the file, so a crafted file could make its tables slow, never wrong.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WordHasher(u64);

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by small integers.
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;
use std::io;

/// A thread as the formats name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Th {
    /// gyr's thread id (unique within its input).
    pub(crate) id: u64,
    /// The operating system's thread id, or gyr's when the file does not know it.
    pub(crate) tid: u64,
}

/// Flows starting (`out`) and ending (`end`) at an event.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Flows<'a> {
    pub(crate) out: &'a [u64],
    pub(crate) end: &'a [u64],
}

impl Flows<'_> {
    pub(crate) const NONE: Flows<'static> = Flows { out: &[], end: &[] };

    pub(crate) fn is_empty(&self) -> bool {
        self.out.is_empty() && self.end.is_empty()
    }
}

/// Where a slice is drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Track<'a> {
    /// The thread's own track.
    Thread,
    /// The thread's track for holds of one lock: `index` is unique within the input.
    Hold { index: u32, name: &'a str },
}

/// A counter's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

/// A timeline format's encoder: [`Mapper`] says what to draw, this writes it.
pub(crate) trait Timeline {
    /// A process (one input) begins; every call until [`Timeline::end_process`] is about it.
    fn process(&mut self, index: usize, pid: u32, name: &str, cmdline: &[String])
    -> io::Result<()>;
    /// A thread's name (again when it changes).
    fn thread(&mut self, th: Th, name: &str) -> io::Result<()>;
    /// A track for the holds of one lock by one thread, before its first slice.
    fn hold_track(&mut self, th: Th, index: u32, name: &str) -> io::Result<()>;
    /// A counter track, before its first value.
    fn counter_track(&mut self, index: u32, name: &str) -> io::Result<()>;
    /// A slice begins.
    fn begin(
        &mut self,
        ts: u64,
        th: Th,
        track: Track<'_>,
        cat: &'static str,
        name: &str,
        flows: Flows<'_>,
    ) -> io::Result<()>;
    /// The innermost open slice of the track ends.
    fn end(&mut self, ts: u64, th: Th, track: Track<'_>, flows: Flows<'_>) -> io::Result<()>;
    /// An instant, with the fields of its record when they are worth showing.
    fn instant(
        &mut self,
        ts: u64,
        th: Th,
        name: &str,
        fields: Option<(&Schema, &[u8])>,
        flows: Flows<'_>,
    ) -> io::Result<()>;
    /// A counter's value.
    fn counter(&mut self, ts: u64, th: Th, index: u32, value: Num) -> io::Result<()>;
    /// The process is done.
    fn end_process(&mut self) -> io::Result<()>;
    /// Everything is done: close the output and flush.
    fn finish(&mut self) -> io::Result<()>;
    /// Events written so far.
    fn events(&self) -> u64;
}

/// What records of one type become.
#[derive(Debug)]
enum Kind {
    Sync(Sync, Schema),
    /// Message passing: MPI calls and messages.
    Msg(Msg, Schema),
    /// A program's own type: counters for its numeric fields, an instant for the rest.
    User {
        schema: Schema,
        /// (field index, counter index) of each numeric scalar field.
        counters: Vec<(usize, u32)>,
        /// When every field before the last counter has a fixed size: each counter's
        /// (offset, type, counter index), read without walking the fields.
        fixed: Option<Vec<(usize, ScalarType, u32)>>,
        /// Whether the type also needs an instant (fields that are not counters, or none).
        instant: bool,
    },
    /// Any other type of gyr's own: an instant with its fields.
    Other(Schema),
}

/// The message-passing events drawn as slices and arrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Msg {
    CallBegin,
    CallEnd,
    Send,
    Recv,
}

impl Msg {
    /// The event `schema` is, recognised by name and field layout (a look-alike type of a
    /// user's is never misread).
    fn recognise(schema: &Schema) -> Option<Msg> {
        let layout: Vec<(&str, FieldType)> = schema
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.ty))
            .collect();
        let message = [
            ("peer", FieldType::U32),
            ("tag", FieldType::I32),
            ("bytes", FieldType::U64),
            ("comm", FieldType::U64),
        ];
        let call = layout.first() == Some(&("call", FieldType::Str));
        match schema.name.as_str() {
            "gyr.mpi.begin" if call => Some(Msg::CallBegin),
            "gyr.mpi.end" if call => Some(Msg::CallEnd),
            "gyr.msg.send" if layout == message => Some(Msg::Send),
            "gyr.msg.recv" if layout == message => Some(Msg::Recv),
            _ => None,
        }
    }
}

/// The most (sender, receiver, communicator, tag) keys counted per file for message arrows;
/// messages of further keys are drawn without arrows.
const MAX_MESSAGE_KEYS: usize = 1 << 20;

/// Object kinds, for flow ids.
#[derive(Debug, Clone, Copy)]
enum Obj {
    Mutex = 1,
    RwLock = 2,
    Cond = 3,
    Fork = 4,
    Exit = 5,
    Barrier = 6,
}

/// What a thread has open on its own track, innermost last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Span,
    WaitMutex(u64),
    WaitRw(u64),
    Cond(u64),
    Join(u64),
    Barrier(u64),
    Mpi,
}

/// The most slices a thread may have open on its own track; deeper begins are dropped (with
/// their ends), so that a runaway recursion cannot grow the table without bound.
const MAX_OPEN: usize = 4096;

#[derive(Debug)]
struct ThreadState {
    th: Th,
    name: String,
    described: bool,
    last_ts: u64,
    open: Vec<Open>,
    /// Span begins dropped past [`MAX_OPEN`], whose ends are dropped too.
    overflow: u64,
}

#[derive(Debug)]
struct Hold {
    thread: u64,
    name: String,
    depth: u32,
}

#[derive(Debug, Default)]
struct BarrierGen {
    arrivals: u32,
    last: Option<(u64, u64)>,
    parties: Option<u32>,
    departs: u32,
    released: bool,
}

/// The threads of an input, found by id; records come in blocks of one thread, so the last
/// one found is remembered and most look-ups cost a comparison.
#[derive(Debug, Default)]
struct Threads {
    list: Vec<ThreadState>,
    index: FastMap<u64, usize>,
    last: Option<(u64, usize)>,
}

impl Threads {
    #[inline]
    fn find(&mut self, id: u64) -> Option<usize> {
        if let Some((last, i)) = self.last
            && last == id
        {
            return Some(i);
        }
        let i = *self.index.get(&id)?;
        self.last = Some((id, i));
        Some(i)
    }

    #[inline]
    fn get_mut(&mut self, id: &u64) -> Option<&mut ThreadState> {
        let i = self.find(*id)?;
        Some(&mut self.list[i])
    }

    fn get(&self, id: &u64) -> Option<&ThreadState> {
        self.index.get(id).map(|&i| &self.list[i])
    }

    fn contains_key(&mut self, id: &u64) -> bool {
        self.find(*id).is_some()
    }

    fn insert(&mut self, id: u64, state: ThreadState) {
        match self.index.get(&id) {
            Some(&i) => self.list[i] = state,
            None => {
                self.index.insert(id, self.list.len());
                self.list.push(state);
            }
        }
    }

    fn keys(&self) -> impl Iterator<Item = &u64> {
        self.index.keys()
    }

    fn clear(&mut self) {
        self.list.clear();
        self.index.clear();
        self.last = None;
    }
}

impl std::ops::Index<&u64> for Threads {
    type Output = ThreadState;
    fn index(&self, id: &u64) -> &ThreadState {
        self.get(id).expect("a known thread")
    }
}

/// Flow arrows drawn from one barrier's last arrival at most (one per departure).
const MAX_BARRIER_FLOWS: u32 = 1024;
/// Barrier generations tracked at once; past that the table is cleared (some arrows are lost,
/// memory stays bounded).
const MAX_BARRIER_GENS: usize = 1 << 16;

/// Draws records on a [`Timeline`].
#[derive(Debug)]
pub(crate) struct Mapper<T> {
    out: T,
    file: usize,
    offset_ns: u64,
    /// By type id (dense in gyr's files); ids past the vector's end live in `far_types`.
    types: Vec<Option<Kind>>,
    far_types: HashMap<TypeId, Kind>,
    threads: Threads,
    holds: Vec<Hold>,
    hold_index: FastMap<(u64, u8, u64), u32>,
    counters: u32,
    barriers: FastMap<(u64, u64), BarrierGen>,
    name: String,
    flows: Vec<u64>,
    /// The current file's rank (`gyr.msg.rank`), for message arrows.
    rank: Option<u32>,
    /// Messages counted per (from, to, communicator, tag) in the current file.
    messages: FastMap<(u32, u32, u64, i32), u64>,
}

/// The kind of type `id`, from the fields that hold them (so that the timeline can be borrowed
/// at the same time).
fn kind_of<'a>(
    types: &'a [Option<Kind>],
    far: &'a HashMap<TypeId, Kind>,
    id: TypeId,
) -> Option<&'a Kind> {
    if id < DENSE_TYPES {
        types.get(id as usize)?.as_ref()
    } else {
        far.get(&id)
    }
}

/// Type ids below this are kept in a vector.
const DENSE_TYPES: TypeId = 1 << 16;

impl<T: Timeline> Mapper<T> {
    pub(crate) fn new(out: T) -> Self {
        Mapper {
            out,
            file: 0,
            offset_ns: 0,
            types: Vec::new(),
            far_types: HashMap::new(),
            threads: Threads::default(),
            holds: Vec::new(),
            hold_index: FastMap::default(),
            counters: 0,
            barriers: FastMap::default(),
            name: String::new(),
            flows: Vec::new(),
            rank: None,
            messages: FastMap::default(),
        }
    }

    fn kind(&self, id: TypeId) -> Option<&Kind> {
        kind_of(&self.types, &self.far_types, id)
    }

    /// The flow id of `obj`'s event numbered `a`, `b`, `c`: the same at both ends, different
    /// for anything else (a 64-bit mix; collisions are as likely as for random ids).
    fn flow(&self, obj: Obj, a: u64, b: u64, c: u64) -> u64 {
        let mut h = mix(self.file as u64 ^ ((obj as u64) << 56));
        h = mix(h ^ a);
        h = mix(h ^ b);
        h = mix(h ^ c);
        h.max(1)
    }

    /// The flow id of the `n`th message from rank `from` to rank `to` on (`comm`, `tag`): the
    /// same in the sender's file and the receiver's.
    fn message_flow(from: u32, to: u32, comm: u64, tag: i32, n: u64) -> u64 {
        let mut h = mix(0x6d70_6900_0000_0000 ^ u64::from(from));
        h = mix(h ^ u64::from(to));
        h = mix(h ^ comm);
        h = mix(h ^ u64::from(tag as u32));
        h = mix(h ^ n);
        h.max(1)
    }

    /// Draws a message-passing event.
    fn msg_record(
        &mut self,
        msg: Msg,
        ts: u64,
        thread: u64,
        p: &[u8],
        type_id: TypeId,
    ) -> io::Result<()> {
        let th = self.threads.get_mut(&thread).expect("a known thread").th;
        let schema = match self.kind(type_id) {
            Some(Kind::Msg(_, s)) => s.clone(),
            _ => return Ok(()),
        };
        match msg {
            Msg::CallBegin => {
                let Some(call) = str_at(p, 0) else {
                    return self.out.instant(ts, th, &schema.name, None, Flows::NONE);
                };
                let call = if call.is_empty() { "MPI" } else { call };
                let call = call.to_owned();
                self.open(ts, thread, Open::Mpi, "mpi", &call)
            }
            Msg::CallEnd => self.close(ts, thread, Open::Mpi).map(|_| ()),
            Msg::Send | Msg::Recv => {
                let (Some(peer), Some(tag), Some(bytes), Some(comm)) = (
                    p.get(0..4)
                        .map(|b| u32::from_le_bytes(b.try_into().unwrap())),
                    p.get(4..8)
                        .map(|b| i32::from_le_bytes(b.try_into().unwrap())),
                    u64_at(p, 8),
                    u64_at(p, 16),
                ) else {
                    return self.out.instant(ts, th, &schema.name, None, Flows::NONE);
                };
                self.name.clear();
                let send = msg == Msg::Send;
                if send {
                    let _ = write!(self.name, "send {bytes} B to rank {peer}");
                } else {
                    let _ = write!(self.name, "recv {bytes} B from rank {peer}");
                }
                let flow = self.rank.and_then(|me| {
                    let key = if send {
                        (me, peer, comm, tag)
                    } else {
                        (peer, me, comm, tag)
                    };
                    if self.messages.len() >= MAX_MESSAGE_KEYS && !self.messages.contains_key(&key)
                    {
                        return None;
                    }
                    let n = self.messages.entry(key).or_insert(0);
                    *n += 1;
                    Some(Self::message_flow(key.0, key.1, comm, tag, *n))
                });
                let f = flow.map(|f| [f]);
                let flows = match (&f, send) {
                    (Some(f), true) => Flows { out: f, end: &[] },
                    (Some(f), false) => Flows { out: &[], end: f },
                    (None, _) => Flows::NONE,
                };
                let name = std::mem::take(&mut self.name);
                let r = self.out.instant(ts, th, &name, Some((&schema, p)), flows);
                self.name = name;
                r
            }
        }
    }

    /// The thread `id`'s state, described to the timeline first if it is new.
    fn thread_state(&mut self, id: u64) -> io::Result<&mut ThreadState> {
        if !self.threads.contains_key(&id) {
            let th = Th { id, tid: id };
            let name = format!("thread {id}");
            self.out.thread(th, &name)?;
            self.threads.insert(
                id,
                ThreadState {
                    th,
                    name,
                    described: true,
                    last_ts: 0,
                    open: Vec::new(),
                    overflow: 0,
                },
            );
        }
        Ok(self.threads.get_mut(&id).expect("inserted above"))
    }

    fn hold(&mut self, th: Th, kind: u8, obj: u64, write: bool) -> io::Result<u32> {
        let key = (th.id, kind, obj);
        if let Some(&i) = self.hold_index.get(&key) {
            return Ok(i);
        }
        let index = self.holds.len() as u32;
        let name = match kind {
            1 => format!("mutex {obj}"),
            _ => format!("rwlock {obj} ({})", if write { "write" } else { "read" }),
        };
        self.out.hold_track(th, index, &name)?;
        self.holds.push(Hold {
            thread: th.id,
            name: format!("hold {name}"),
            depth: 0,
        });
        self.hold_index.insert(key, index);
        Ok(index)
    }

    fn hold_begin(
        &mut self,
        ts: u64,
        th: Th,
        kind: u8,
        obj: u64,
        write: bool,
        flows: Flows<'_>,
    ) -> io::Result<()> {
        let i = self.hold(th, kind, obj, write)?;
        let h = &mut self.holds[i as usize];
        h.depth += 1;
        let track = Track::Hold {
            index: i,
            name: &h.name,
        };
        self.out.begin(ts, th, track, "lock", &h.name, flows)
    }

    fn hold_end(
        &mut self,
        ts: u64,
        th: Th,
        kind: u8,
        obj: u64,
        write: bool,
        flows: Flows<'_>,
    ) -> io::Result<()> {
        let Some(&i) = self.hold_index.get(&(th.id, kind, obj)) else {
            // Released without an acquisition in the file (it was held before the trace
            // began, or its acquisition was lost): nothing to close.
            return Ok(());
        };
        let h = &mut self.holds[i as usize];
        if h.depth == 0 {
            return Ok(());
        }
        h.depth -= 1;
        let _ = write;
        let track = Track::Hold {
            index: i,
            name: &h.name,
        };
        self.out.end(ts, th, track, flows)
    }

    /// Opens a slice on the thread's own track.
    fn open(
        &mut self,
        ts: u64,
        thread: u64,
        what: Open,
        cat: &'static str,
        name: &str,
    ) -> io::Result<()> {
        let t = self.threads.get_mut(&thread).expect("a known thread");
        if t.open.len() >= MAX_OPEN {
            if what == Open::Span {
                t.overflow += 1;
            }
            return Ok(());
        }
        t.open.push(what);
        let th = t.th;
        self.out
            .begin(ts, th, Track::Thread, cat, name, Flows::NONE)
    }

    /// Closes the innermost open slice matching `what` (and any left open inside it); returns
    /// whether there was one.
    fn close(&mut self, ts: u64, thread: u64, what: Open) -> io::Result<bool> {
        let t = self.threads.get_mut(&thread).expect("a known thread");
        if what == Open::Span && t.overflow > 0 && t.open.len() >= MAX_OPEN {
            t.overflow -= 1;
            return Ok(false);
        }
        let Some(at) = t.open.iter().rposition(|&o| o == what) else {
            return Ok(false);
        };
        let th = t.th;
        let n = t.open.len() - at;
        t.open.truncate(at);
        for _ in 0..n {
            self.out.end(ts, th, Track::Thread, Flows::NONE)?;
        }
        Ok(true)
    }

    fn barrier_update(&mut self, barrier: u64, generation: u64) -> io::Result<()> {
        let key = (barrier, generation);
        let Some(g) = self.barriers.get(&key) else {
            return Ok(());
        };
        if !g.released
            && let (Some(parties), Some((thread, ts))) = (g.parties, g.last)
            && g.arrivals >= parties
        {
            self.flows.clear();
            for k in 1..=parties.min(MAX_BARRIER_FLOWS) {
                let f = self.flow(Obj::Barrier, barrier, generation, u64::from(k));
                self.flows.push(f);
            }
            let th = self.thread_state(thread)?.th;
            self.name.clear();
            let _ = write!(self.name, "barrier {barrier} released");
            self.out.instant(
                ts,
                th,
                &self.name,
                None,
                Flows {
                    out: &self.flows,
                    end: &[],
                },
            )?;
            self.barriers.get_mut(&key).expect("found above").released = true;
        }
        let g = &self.barriers[&key];
        if g.released && g.parties.is_some_and(|p| g.departs >= p) {
            self.barriers.remove(&key);
        }
        Ok(())
    }

    fn sync_record(
        &mut self,
        sync: Sync,
        ts: u64,
        thread: u64,
        p: &[u8],
        type_id: TypeId,
    ) -> io::Result<()> {
        let th = self.threads.get_mut(&thread).expect("a known thread").th;
        let (a, b) = (u64_at(p, 0), u64_at(p, 8));
        self.name.clear();
        // A payload too short for its type (a damaged record) is shown as an instant.
        let fallback = |m: &mut Self| -> io::Result<()> {
            let schema = match m.kind(type_id) {
                Some(Kind::Sync(_, s)) => s.clone(),
                _ => return Ok(()),
            };
            m.out
                .instant(ts, th, &schema.name, Some((&schema, p)), Flows::NONE)
        };
        match sync {
            Sync::SpanBegin => {
                let Some(name) = str_at(p, 0) else {
                    return fallback(self);
                };
                let name = if name.is_empty() { "span" } else { name };
                self.open(ts, thread, Open::Span, "span", name)?;
            }
            Sync::SpanEnd => {
                self.close(ts, thread, Open::Span)?;
            }
            Sync::Fork => {
                let Some(child) = a else {
                    return fallback(self);
                };
                let f = [self.flow(Obj::Fork, child, 0, 0)];
                let _ = write!(self.name, "fork {child}");
                let flows = Flows { out: &f, end: &[] };
                self.out.instant(ts, th, &self.name, None, flows)?;
            }
            Sync::Begin => {
                let Some(parent) = a else {
                    return fallback(self);
                };
                let f = [self.flow(Obj::Fork, thread, 0, 0)];
                let flows = if parent != 0 {
                    Flows { out: &[], end: &f }
                } else {
                    Flows::NONE
                };
                self.out.instant(ts, th, "thread begin", None, flows)?;
            }
            Sync::Exit => {
                let f = [self.flow(Obj::Exit, thread, 0, 0)];
                let flows = Flows { out: &f, end: &[] };
                self.out.instant(ts, th, "thread exit", None, flows)?;
            }
            Sync::JoinBegin => {
                let Some(joined) = a else {
                    return fallback(self);
                };
                let _ = write!(self.name, "join {joined}");
                let name = std::mem::take(&mut self.name);
                self.open(ts, thread, Open::Join(joined), "wait", &name)?;
                self.name = name;
            }
            Sync::JoinEnd => {
                let Some(joined) = a else {
                    return fallback(self);
                };
                self.close(ts, thread, Open::Join(joined))?;
                let f = [self.flow(Obj::Exit, joined, 0, 0)];
                let _ = write!(self.name, "joined {joined}");
                let flows = Flows { out: &[], end: &f };
                self.out.instant(ts, th, &self.name, None, flows)?;
            }
            Sync::Detach => {
                let Some(t) = a else { return fallback(self) };
                let _ = write!(self.name, "detach {t}");
                self.out.instant(ts, th, &self.name, None, Flows::NONE)?;
            }
            Sync::MutexRequest => {
                let Some(m) = a else { return fallback(self) };
                let _ = write!(self.name, "wait mutex {m}");
                let name = std::mem::take(&mut self.name);
                self.open(ts, thread, Open::WaitMutex(m), "wait", &name)?;
                self.name = name;
            }
            Sync::MutexAcquire => {
                let (Some(m), Some(n)) = (a, b) else {
                    return fallback(self);
                };
                self.close(ts, thread, Open::WaitMutex(m))?;
                let f = [self.flow(Obj::Mutex, m, n.wrapping_sub(1), 0)];
                let end: &[u64] = if n > 1 { &f } else { &[] };
                self.hold_begin(ts, th, 1, m, true, Flows { out: &[], end })?;
            }
            Sync::MutexBusy => {
                let Some(m) = a else { return fallback(self) };
                let _ = write!(self.name, "busy mutex {m}");
                self.out.instant(ts, th, &self.name, None, Flows::NONE)?;
            }
            Sync::MutexRelease => {
                let (Some(m), Some(n)) = (a, b) else {
                    return fallback(self);
                };
                let f = [self.flow(Obj::Mutex, m, n, 0)];
                self.hold_end(ts, th, 1, m, true, Flows { out: &f, end: &[] })?;
            }
            Sync::RwRequest => {
                let (Some(l), Some(&w)) = (a, p.get(8)) else {
                    return fallback(self);
                };
                let _ = write!(
                    self.name,
                    "wait rwlock {l} ({})",
                    if w != 0 { "write" } else { "read" }
                );
                let name = std::mem::take(&mut self.name);
                self.open(ts, thread, Open::WaitRw(l), "wait", &name)?;
                self.name = name;
            }
            Sync::RwAcquire | Sync::RwRelease => {
                let (Some(l), Some(&w), Some(n)) = (a, p.get(8), u64_at(p, 9)) else {
                    return fallback(self);
                };
                let write = w != 0;
                let kind = if write { 2 } else { 3 };
                if sync == Sync::RwAcquire {
                    self.close(ts, thread, Open::WaitRw(l))?;
                    // Write acquisitions follow the write release before them.
                    let f = [self.flow(Obj::RwLock, l, n.wrapping_sub(1), 0)];
                    let end: &[u64] = if write && n > 1 { &f } else { &[] };
                    self.hold_begin(ts, th, kind, l, write, Flows { out: &[], end })?;
                } else {
                    let f = [self.flow(Obj::RwLock, l, n, 0)];
                    let out: &[u64] = if write { &f } else { &[] };
                    self.hold_end(ts, th, kind, l, write, Flows { out, end: &[] })?;
                }
            }
            Sync::RwBusy => {
                let Some(l) = a else { return fallback(self) };
                let _ = write!(self.name, "busy rwlock {l}");
                self.out.instant(ts, th, &self.name, None, Flows::NONE)?;
            }
            Sync::CondWait => {
                let Some(c) = a else { return fallback(self) };
                let _ = write!(self.name, "cond wait {c}");
                let name = std::mem::take(&mut self.name);
                self.open(ts, thread, Open::Cond(c), "wait", &name)?;
                self.name = name;
            }
            Sync::CondWake => {
                let (Some(c), Some(after), Some(&timed_out)) = (a, b, p.get(16)) else {
                    return fallback(self);
                };
                self.close(ts, thread, Open::Cond(c))?;
                if timed_out != 0 {
                    let _ = write!(self.name, "timed out cond {c}");
                    self.out.instant(ts, th, &self.name, None, Flows::NONE)?;
                } else {
                    let f = [self.flow(Obj::Cond, c, after, 0)];
                    let end: &[u64] = if after > 0 { &f } else { &[] };
                    let _ = write!(self.name, "woken cond {c}");
                    self.out
                        .instant(ts, th, &self.name, None, Flows { out: &[], end })?;
                }
            }
            Sync::CondSignal | Sync::CondBroadcast => {
                let (Some(c), Some(n)) = (a, b) else {
                    return fallback(self);
                };
                let f = [self.flow(Obj::Cond, c, n, 0)];
                let what = if sync == Sync::CondSignal {
                    "signal"
                } else {
                    "broadcast"
                };
                let _ = write!(self.name, "{what} cond {c}");
                self.out
                    .instant(ts, th, &self.name, None, Flows { out: &f, end: &[] })?;
            }
            Sync::BarrierArrive => {
                let (Some(bar), Some(generation)) = (a, b) else {
                    return fallback(self);
                };
                let _ = write!(self.name, "barrier {bar}");
                let name = std::mem::take(&mut self.name);
                self.open(ts, thread, Open::Barrier(bar), "wait", &name)?;
                self.name = name;
                if self.barriers.len() >= MAX_BARRIER_GENS {
                    self.barriers.clear();
                }
                let g = self.barriers.entry((bar, generation)).or_default();
                g.arrivals += 1;
                if g.last.is_none_or(|(_, t)| ts >= t) {
                    g.last = Some((thread, ts));
                }
                self.barrier_update(bar, generation)?;
            }
            Sync::BarrierDepart => {
                let (Some(bar), Some(generation), Some(parties)) = (
                    a,
                    b,
                    p.get(16..20)
                        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))),
                ) else {
                    return fallback(self);
                };
                self.close(ts, thread, Open::Barrier(bar))?;
                if self.barriers.len() >= MAX_BARRIER_GENS {
                    self.barriers.clear();
                }
                let g = self.barriers.entry((bar, generation)).or_default();
                g.parties = Some(parties);
                g.departs += 1;
                let k = g.departs;
                let f = [self.flow(Obj::Barrier, bar, generation, u64::from(k))];
                let end: &[u64] = if k <= MAX_BARRIER_FLOWS { &f } else { &[] };
                let _ = write!(self.name, "depart barrier {bar}");
                self.out
                    .instant(ts, th, &self.name, None, Flows { out: &[], end })?;
                self.barrier_update(bar, generation)?;
            }
            Sync::Lost => {
                let Some(count) = b else {
                    return fallback(self);
                };
                let schema = match self.kind(type_id) {
                    Some(Kind::Sync(_, s)) => s.clone(),
                    _ => return Ok(()),
                };
                let _ = write!(self.name, "lost {count} events");
                self.out
                    .instant(ts, th, &self.name, Some((&schema, p)), Flows::NONE)?;
            }
        }
        Ok(())
    }
}

impl<T: Timeline> Consumer for Mapper<T> {
    fn begin_file(&mut self, file: &FileStart<'_>) -> io::Result<()> {
        self.file = file.index;
        self.offset_ns = file.offset_ns;
        self.types.clear();
        self.far_types.clear();
        self.threads.clear();
        self.holds.clear();
        self.hold_index.clear();
        self.barriers.clear();
        self.messages.clear();
        self.rank = file.rank;
        let h = file.header;
        let program = h
            .command_line
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| format!("pid {}", h.pid));
        let program = match file.rank {
            Some(r) => format!("rank {r} · {program}"),
            None => program,
        };
        self.out
            .process(file.index, h.pid, &program, &h.command_line)
    }

    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        let known = crate::sync_events::recognise(schema);
        let kind = match known {
            Some(sync) => Kind::Sync(sync, schema.clone()),
            None if let Some(msg) = Msg::recognise(schema) => Kind::Msg(msg, schema.clone()),
            None if schema.name.starts_with("gyr.") => Kind::Other(schema.clone()),
            None => {
                let mut counters = Vec::new();
                for (i, f) in schema.fields.iter().enumerate() {
                    if matches!(f.ty, FieldType::Scalar(s) if s != ScalarType::Bool) {
                        let index = self.counters;
                        self.counters += 1;
                        self.out
                            .counter_track(index, &format!("{}.{}", schema.name, f.name))?;
                        counters.push((i, index));
                    }
                }
                let instant = counters.is_empty() || counters.len() < schema.fields.len();
                let mut fixed = Some(Vec::new());
                for &(i, index) in &counters {
                    let offset: Option<usize> =
                        schema.fields[..i].iter().map(|f| f.ty.fixed_size()).sum();
                    match (offset, schema.fields[i].ty, fixed.as_mut()) {
                        (Some(o), FieldType::Scalar(s), Some(v)) => v.push((o, s, index)),
                        _ => fixed = None,
                    }
                }
                Kind::User {
                    schema: schema.clone(),
                    counters,
                    fixed,
                    instant,
                }
            }
        };
        if schema.id < DENSE_TYPES {
            let i = schema.id as usize;
            if self.types.len() <= i {
                self.types.resize_with(i + 1, || None);
            }
            self.types[i] = Some(kind);
        } else {
            self.far_types.insert(schema.id, kind);
        }
        Ok(())
    }

    fn thread(&mut self, info: &ThreadInfo) -> io::Result<()> {
        let tid = if info.os_tid != 0 {
            info.os_tid
        } else {
            info.id
        };
        let name = if info.name.is_empty() {
            format!("thread {}", info.id)
        } else {
            info.name.clone()
        };
        let th = Th { id: info.id, tid };
        match self.threads.get_mut(&info.id) {
            Some(t) if t.described && t.th == th && t.name == name => return Ok(()),
            Some(t) => {
                t.th = th;
                t.name = name.clone();
                t.described = true;
            }
            None => {
                self.threads.insert(
                    info.id,
                    ThreadState {
                        th,
                        name: name.clone(),
                        described: true,
                        last_ts: 0,
                        open: Vec::new(),
                        overflow: 0,
                    },
                );
            }
        }
        self.out.thread(th, &name)
    }

    #[inline]
    fn record(&mut self, thread: u64, header: &RecordHeader, payload: &[u8]) -> io::Result<()> {
        let ts = self.offset_ns.saturating_add(header.timestamp);
        let state = self.thread_state(thread)?;
        state.last_ts = state.last_ts.max(ts);
        let th = state.th;
        let type_id = header.type_id;
        let Some(kind) = kind_of(&self.types, &self.far_types, type_id) else {
            // No schema (it was in a lost chunk): nothing to draw it with.
            return Ok(());
        };
        match kind {
            Kind::User {
                schema,
                counters,
                fixed,
                instant,
            } => {
                if let Some(fixed) = fixed {
                    for &(at, s, index) in fixed {
                        let Some(bytes) = payload.get(at..at + s.size()) else {
                            break;
                        };
                        self.out.counter(ts, th, index, scalar(s, bytes))?;
                    }
                    if *instant {
                        self.out.instant(
                            ts,
                            th,
                            &schema.name,
                            Some((schema, payload)),
                            Flows::NONE,
                        )?;
                    }
                    return Ok(());
                }
                let mut at = 0usize;
                let mut next = counters.iter().peekable();
                for (i, f) in schema.fields.iter().enumerate() {
                    let Some(&&(fi, index)) = next.peek() else {
                        break;
                    };
                    if fi == i
                        && let FieldType::Scalar(s) = f.ty
                    {
                        next.next();
                        let Some(bytes) = payload.get(at..at + s.size()) else {
                            break;
                        };
                        self.out.counter(ts, th, index, scalar(s, bytes))?;
                        at += s.size();
                    } else {
                        match field_len(f.ty, payload, at) {
                            Some(len) => at += len,
                            None => break,
                        }
                    }
                }
                if *instant {
                    self.out
                        .instant(ts, th, &schema.name, Some((schema, payload)), Flows::NONE)?;
                }
                Ok(())
            }
            Kind::Other(schema) => {
                self.out
                    .instant(ts, th, &schema.name, Some((schema, payload)), Flows::NONE)
            }
            Kind::Sync(sync, _) => {
                let sync = *sync;
                self.sync_record(sync, ts, thread, payload, type_id)
            }
            Kind::Msg(msg, _) => {
                let msg = *msg;
                self.msg_record(msg, ts, thread, payload, type_id)
            }
        }
    }

    fn end(&mut self, _end: &TraceEnd) -> io::Result<()> {
        Ok(())
    }

    fn end_file(&mut self) -> io::Result<()> {
        // Close what is still open, innermost first, at each thread's last timestamp.
        let mut threads: Vec<u64> = self.threads.keys().copied().collect();
        threads.sort_unstable();
        for id in threads {
            let t = self.threads.get_mut(&id).expect("listed above");
            let (th, ts, n) = (t.th, t.last_ts, t.open.len());
            t.open.clear();
            for _ in 0..n {
                self.out.end(ts, th, Track::Thread, Flows::NONE)?;
            }
        }
        for (i, h) in self.holds.iter_mut().enumerate() {
            let Some(t) = self.threads.get(&h.thread) else {
                continue;
            };
            for _ in 0..h.depth {
                let track = Track::Hold {
                    index: i as u32,
                    name: &h.name,
                };
                self.out.end(t.last_ts, t.th, track, Flows::NONE)?;
            }
            h.depth = 0;
        }
        self.out.end_process()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.finish()
    }

    fn events(&self) -> u64 {
        self.out.events()
    }
}

#[inline]
fn mix(mut z: u64) -> u64 {
    // splitmix64's finaliser.
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[inline]
fn u64_at(p: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(at..at + 8)?.try_into().ok()?))
}

/// The string field at `at` (a `u32` length, then UTF-8).
fn str_at(p: &[u8], at: usize) -> Option<&str> {
    let len = u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?) as usize;
    std::str::from_utf8(p.get(at + 4..(at + 4).checked_add(len)?)?).ok()
}

/// The encoded length of a field of type `ty` at `at`.
#[inline]
pub(crate) fn field_len(ty: FieldType, p: &[u8], at: usize) -> Option<usize> {
    match ty.fixed_size() {
        Some(n) => Some(n),
        None => {
            let len = u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?) as usize;
            4usize.checked_add(len)
        }
    }
}

/// A scalar's value from its bytes (`bytes` holds exactly its size).
#[inline]
pub(crate) fn scalar(s: ScalarType, b: &[u8]) -> Num {
    macro_rules! le {
        ($t:ty) => {
            <$t>::from_le_bytes(b.try_into().expect("the scalar's size"))
        };
    }
    match s {
        ScalarType::I8 => Num::Int(b[0] as i8 as i64),
        ScalarType::I16 => Num::Int(le!(i16) as i64),
        ScalarType::I32 => Num::Int(le!(i32) as i64),
        ScalarType::I64 => Num::Int(le!(i64)),
        ScalarType::U8 | ScalarType::Bool => Num::Int(b[0] as i64),
        ScalarType::U16 => Num::Int(le!(u16) as i64),
        ScalarType::U32 => Num::Int(le!(u32) as i64),
        // Above i64::MAX a counter wraps; counters that large are not plotted anyway.
        ScalarType::U64 => Num::Int(le!(u64) as i64),
        ScalarType::F32 => Num::Float(le!(f32) as f64),
        ScalarType::F64 => Num::Float(le!(f64)),
        _ => Num::Float(f64::NAN),
    }
}
