//! Reading Falcon's thread events from records: which event types are `gyr.thread.*`,
//! `gyr.mutex.*`, `gyr.rwlock.*`, `gyr.cond.*` and `gyr.barrier.*` (as `gyr::sync` and
//! `gyr-interpose` write them), and what each record means to the [ordering
//! filter](crate::order).
//!
//! A type is recognised by its name *and* its fields' names and types, so a file that names a
//! type of its own `gyr.mutex.acquire` with other fields is read as ordinary events, never
//! misread.

use crate::order::SyncEvent;
use gyr_core::schema::{FieldType, Schema, TypeId};

/// The thread event types of `gyr::sync::events` (and `gyr.lost`): what a recognised type
/// means; the offsets of its fields follow from its layout. One table for the ordering filter,
/// the life-time view and the exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    SpanBegin,
    SpanEnd,
    Fork,
    Begin,
    Exit,
    JoinBegin,
    JoinEnd,
    Detach,
    MutexRequest,
    MutexAcquire,
    MutexBusy,
    MutexRelease,
    RwRequest,
    RwAcquire,
    RwBusy,
    RwRelease,
    CondWait,
    CondWake,
    CondSignal,
    CondBroadcast,
    BarrierArrive,
    BarrierDepart,
    Lost,
}

use FieldType as F;

/// The recognised types: name, leading fields, meaning.
/// A recognised type's leading fields: name and type.
type Layout = &'static [(&'static str, FieldType)];

const KNOWN: &[(&str, Layout, Kind)] = &[
    ("gyr.span.begin", &[("name", F::Str)], Kind::SpanBegin),
    ("gyr.span.end", &[("name", F::Str)], Kind::SpanEnd),
    ("gyr.thread.fork", &[("child", F::U64)], Kind::Fork),
    ("gyr.thread.begin", &[("parent", F::U64)], Kind::Begin),
    ("gyr.thread.exit", &[], Kind::Exit),
    (
        "gyr.thread.join_begin",
        &[("joined", F::U64)],
        Kind::JoinBegin,
    ),
    ("gyr.thread.join_end", &[("joined", F::U64)], Kind::JoinEnd),
    ("gyr.thread.detach", &[("thread", F::U64)], Kind::Detach),
    (
        "gyr.mutex.request",
        &[("mutex", F::U64)],
        Kind::MutexRequest,
    ),
    (
        "gyr.mutex.acquire",
        &[("mutex", F::U64), ("n", F::U64)],
        Kind::MutexAcquire,
    ),
    ("gyr.mutex.busy", &[("mutex", F::U64)], Kind::MutexBusy),
    (
        "gyr.mutex.release",
        &[("mutex", F::U64), ("n", F::U64)],
        Kind::MutexRelease,
    ),
    (
        "gyr.rwlock.request",
        &[("lock", F::U64), ("write", F::Bool)],
        Kind::RwRequest,
    ),
    (
        "gyr.rwlock.acquire",
        &[("lock", F::U64), ("write", F::Bool), ("n", F::U64)],
        Kind::RwAcquire,
    ),
    (
        "gyr.rwlock.busy",
        &[("lock", F::U64), ("write", F::Bool)],
        Kind::RwBusy,
    ),
    (
        "gyr.rwlock.release",
        &[("lock", F::U64), ("write", F::Bool), ("n", F::U64)],
        Kind::RwRelease,
    ),
    (
        "gyr.cond.wait",
        &[("cond", F::U64), ("mutex", F::U64)],
        Kind::CondWait,
    ),
    (
        "gyr.cond.wake",
        &[("cond", F::U64), ("after", F::U64), ("timed_out", F::Bool)],
        Kind::CondWake,
    ),
    (
        "gyr.cond.signal",
        &[("cond", F::U64), ("n", F::U64)],
        Kind::CondSignal,
    ),
    (
        "gyr.cond.broadcast",
        &[("cond", F::U64), ("n", F::U64)],
        Kind::CondBroadcast,
    ),
    (
        "gyr.barrier.arrive",
        &[("barrier", F::U64), ("generation", F::U64)],
        Kind::BarrierArrive,
    ),
    (
        "gyr.barrier.depart",
        &[
            ("barrier", F::U64),
            ("generation", F::U64),
            ("parties", F::U32),
        ],
        Kind::BarrierDepart,
    ),
    (
        gyr_core::LOST_EVENT_NAME,
        &[("thread", F::U64), ("count", F::U64)],
        Kind::Lost,
    ),
];

impl Kind {
    /// Whether the ordering filter or a life-time view reads records of this kind (spans,
    /// detaches, failed tries and losses only the exports draw).
    fn ordered_or_viewed(self) -> bool {
        !matches!(
            self,
            Kind::SpanBegin
                | Kind::SpanEnd
                | Kind::Detach
                | Kind::MutexBusy
                | Kind::RwBusy
                | Kind::Lost
        )
    }
}

/// What `schema` is, if it is one of the thread event types: by name *and* leading fields.
pub(crate) fn recognise(schema: &Schema) -> Option<Kind> {
    KNOWN.iter().find_map(|(name, fields, kind)| {
        let matches = schema.name == *name
            && schema.fields.len() >= fields.len()
            && schema
                .fields
                .iter()
                .zip(fields.iter())
                .all(|(f, (n, t))| f.name == *n && f.ty == *t);
        matches.then_some(*kind)
    })
}

/// Maps records to [`SyncEvent`]s, by type id, once told the stream's schemas.
#[derive(Debug, Default, Clone)]
pub struct SyncDecoder {
    /// Indexed by type id (ids are small and dense in gyr's streams).
    kinds: Vec<Option<Kind>>,
}

/// Type ids past this are never recognised (a crafted schema cannot make the table huge).
const MAX_TYPE_ID: TypeId = 1 << 16;

impl SyncDecoder {
    /// A decoder that knows no types yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Learns a schema of the stream: recognises it if it is one of the thread events.
    pub fn add_schema(&mut self, schema: &Schema) {
        if schema.id >= MAX_TYPE_ID {
            return;
        }
        let kind = recognise(schema).filter(|k| k.ordered_or_viewed());
        let i = schema.id as usize;
        if self.kinds.len() <= i {
            self.kinds.resize(i + 1, None);
        }
        self.kinds[i] = kind;
    }

    /// Whether `type_id` is one of the thread events.
    pub fn is_sync(&self, type_id: TypeId) -> bool {
        matches!(self.kinds.get(type_id as usize), Some(Some(_)))
    }

    /// What a record of `type_id` with `payload` means for ordering. A payload too short for
    /// its type (a corrupt record) is [`SyncEvent::Other`].
    pub fn classify(&self, type_id: TypeId, payload: &[u8]) -> SyncEvent {
        let Some(Some(kind)) = self.kinds.get(type_id as usize) else {
            return SyncEvent::Other;
        };
        decode(*kind, payload).unwrap_or(SyncEvent::Other)
    }
}

/// What a thread event means to a view of thread life-times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewEvent {
    /// The thread began; `parent` forked it (0: unknown).
    Begin { parent: u64 },
    /// The thread forked `child`.
    Fork { child: u64 },
    /// The thread ended.
    Exit,
    /// The thread starts waiting: for a mutex, a read or write lock, a condition, a join or a
    /// barrier (`object` is its id, or the joined thread).
    Wait { on: WaitOn, object: u64 },
    /// The thread holds `lock` (a mutex, or a rwlock for writing), acquisition `n`.
    Acquire { lock: u64, n: u64 },
    /// The thread holds `lock` for reading, after `after` writes.
    AcquireShared { lock: u64, after: u64 },
    /// The thread releases `lock` after acquisition `n` (a mutex or a write lock).
    Release { lock: u64, n: u64 },
    /// Signal or broadcast `n` of `cond`.
    Signal { cond: u64, n: u64 },
    /// A wait on `cond` returned after signal `after` (0: timed out).
    Wake { cond: u64, after: u64 },
    /// A join of `joined` returned.
    Joined { joined: u64 },
    /// The thread reached `barrier` in `generation`.
    Arrive { barrier: u64, generation: u64 },
    /// The thread left `barrier`'s `generation`.
    Depart { barrier: u64, generation: u64 },
}

/// What a waiting thread waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitOn {
    /// A mutex.
    Mutex,
    /// A rwlock, for reading.
    Read,
    /// A rwlock, for writing.
    Write,
    /// A condition variable.
    Cond,
    /// Another thread's end.
    Join,
    /// A barrier.
    Barrier,
}

impl SyncDecoder {
    /// What a record means to a life-time view, if it is a thread event.
    pub fn view(&self, type_id: TypeId, payload: &[u8]) -> Option<ViewEvent> {
        let Some(Some(kind)) = self.kinds.get(type_id as usize) else {
            return None;
        };
        let p = payload;
        let a = || u64_at(p, 0);
        let b = || u64_at(p, 8);
        Some(match kind {
            Kind::MutexRequest => ViewEvent::Wait {
                on: WaitOn::Mutex,
                object: a()?,
            },
            Kind::RwRequest => ViewEvent::Wait {
                on: if *p.get(8)? != 0 {
                    WaitOn::Write
                } else {
                    WaitOn::Read
                },
                object: a()?,
            },
            Kind::CondWait => ViewEvent::Wait {
                on: WaitOn::Cond,
                object: a()?,
            },
            Kind::JoinBegin => ViewEvent::Wait {
                on: WaitOn::Join,
                object: a()?,
            },
            Kind::BarrierArrive => ViewEvent::Arrive {
                barrier: a()?,
                generation: b()?,
            },
            Kind::BarrierDepart => ViewEvent::Depart {
                barrier: a()?,
                generation: b()?,
            },
            _ => match decode(*kind, p)? {
                SyncEvent::ThreadBegin { parent } => ViewEvent::Begin {
                    parent: parent.unwrap_or(0),
                },
                SyncEvent::Fork { child } => ViewEvent::Fork { child },
                SyncEvent::Exit => ViewEvent::Exit,
                SyncEvent::JoinEnd { joined } => ViewEvent::Joined { joined },
                SyncEvent::MutexAcquire { mutex, n } => ViewEvent::Acquire { lock: mutex, n },
                SyncEvent::SharedAcquire { lock, after } => {
                    ViewEvent::AcquireShared { lock, after }
                }
                SyncEvent::MutexRelease { mutex, n } => ViewEvent::Release { lock: mutex, n },
                SyncEvent::CondSignal { cond, n } => ViewEvent::Signal { cond, n },
                SyncEvent::CondWake { cond, after } => ViewEvent::Wake { cond, after },
                _ => return None,
            },
        })
    }
}

fn u64_at(p: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(p.get(at..at + 8)?.try_into().ok()?))
}

fn decode(kind: Kind, p: &[u8]) -> Option<SyncEvent> {
    Some(match kind {
        Kind::MutexRequest
        | Kind::RwRequest
        | Kind::CondWait
        | Kind::JoinBegin
        | Kind::SpanBegin
        | Kind::SpanEnd
        | Kind::Detach
        | Kind::MutexBusy
        | Kind::RwBusy
        | Kind::Lost => SyncEvent::Other,
        Kind::Begin => {
            let parent = u64_at(p, 0)?;
            SyncEvent::ThreadBegin {
                parent: (parent != 0).then_some(parent),
            }
        }
        Kind::Fork => SyncEvent::Fork {
            child: u64_at(p, 0)?,
        },
        Kind::Exit => SyncEvent::Exit,
        Kind::JoinEnd => SyncEvent::JoinEnd {
            joined: u64_at(p, 0)?,
        },
        Kind::MutexAcquire => SyncEvent::MutexAcquire {
            mutex: u64_at(p, 0)?,
            n: u64_at(p, 8)?,
        },
        Kind::MutexRelease => SyncEvent::MutexRelease {
            mutex: u64_at(p, 0)?,
            n: u64_at(p, 8)?,
        },
        Kind::RwAcquire => {
            let lock = u64_at(p, 0)?;
            let n = u64_at(p, 9)?;
            if *p.get(8)? != 0 {
                SyncEvent::MutexAcquire { mutex: lock, n }
            } else {
                SyncEvent::SharedAcquire { lock, after: n }
            }
        }
        Kind::RwRelease => {
            if *p.get(8)? != 0 {
                SyncEvent::MutexRelease {
                    mutex: u64_at(p, 0)?,
                    n: u64_at(p, 9)?,
                }
            } else {
                SyncEvent::Other
            }
        }
        Kind::CondSignal | Kind::CondBroadcast => SyncEvent::CondSignal {
            cond: u64_at(p, 0)?,
            n: u64_at(p, 8)?,
        },
        Kind::CondWake => {
            let timed_out = *p.get(16)? != 0;
            SyncEvent::CondWake {
                cond: u64_at(p, 0)?,
                after: if timed_out { 0 } else { u64_at(p, 8)? },
            }
        }
        Kind::BarrierArrive => SyncEvent::BarrierArrive {
            barrier: u64_at(p, 0)?,
            generation: u64_at(p, 8)?,
        },
        Kind::BarrierDepart => SyncEvent::BarrierDepart {
            barrier: u64_at(p, 0)?,
            generation: u64_at(p, 8)?,
            parties: u32::from_le_bytes(p.get(16..20)?.try_into().ok()?),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::schema::Field;

    fn schema(id: TypeId, name: &str, fields: &[(&str, FieldType)]) -> Schema {
        Schema::new(
            id,
            name,
            fields.iter().map(|(n, t)| Field::new(*n, *t)).collect(),
        )
        .unwrap()
    }

    #[test]
    fn recognises_by_name_and_fields() {
        let mut d = SyncDecoder::new();
        d.add_schema(&schema(
            5,
            "gyr.mutex.acquire",
            &[("mutex", F::U64), ("n", F::U64)],
        ));
        d.add_schema(&schema(6, "gyr.mutex.release", &[("mutex", F::F64)]));
        let mut p = 7u64.to_le_bytes().to_vec();
        p.extend(3u64.to_le_bytes());
        assert_eq!(
            d.classify(5, &p),
            SyncEvent::MutexAcquire { mutex: 7, n: 3 }
        );
        assert_eq!(d.classify(6, &p), SyncEvent::Other, "wrong field type");
        assert_eq!(d.classify(5, &p[..12]), SyncEvent::Other, "short payload");
        assert_eq!(d.classify(99, &p), SyncEvent::Other, "unknown type");
    }

    #[test]
    fn reads_and_writes_of_a_rwlock() {
        let mut d = SyncDecoder::new();
        let f = [("lock", F::U64), ("write", F::Bool), ("n", F::U64)];
        d.add_schema(&schema(2, "gyr.rwlock.acquire", &f));
        let mut p = 4u64.to_le_bytes().to_vec();
        p.push(0);
        p.extend(2u64.to_le_bytes());
        assert_eq!(
            d.classify(2, &p),
            SyncEvent::SharedAcquire { lock: 4, after: 2 }
        );
        p[8] = 1;
        assert_eq!(
            d.classify(2, &p),
            SyncEvent::MutexAcquire { mutex: 4, n: 2 }
        );
    }

    #[test]
    fn a_timed_out_wake_needs_no_signal() {
        let mut d = SyncDecoder::new();
        let f = [("cond", F::U64), ("after", F::U64), ("timed_out", F::Bool)];
        d.add_schema(&schema(3, "gyr.cond.wake", &f));
        let mut p = 1u64.to_le_bytes().to_vec();
        p.extend(5u64.to_le_bytes());
        p.push(1);
        assert_eq!(d.classify(3, &p), SyncEvent::CondWake { cond: 1, after: 0 });
    }
}
