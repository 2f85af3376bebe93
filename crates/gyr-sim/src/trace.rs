//! Traced MPI runs turned into rank programs: what `gyr run --mpi` recorded, one file per rank.
//!
//! The replay starts at the end of each rank's `MPI_Init` and stops where `MPI_Finalize`
//! begins. Between two MPI calls the rank computes for as long as the trace says; inside a
//! call, only its messages count (their time is what the model predicts):
//! - `gyr.msg.send` / `gyr.msg.recv` inside a call are its blocking sends and receives
//!   (`MPI_Sendrecv` has both), all posted when the call begins and waited for before it ends;
//! - `gyr.mpi.request` is a nonblocking post (or a persistent request's start), and its
//!   `gyr.mpi.complete` the wait that completes it; a receive's actual source and tag come from
//!   the `gyr.msg.recv` that follows its completion, so a wildcard receive is replayed from the
//!   rank that sent it;
//! - `gyr.mpi.collective` is expanded into its algorithm's messages (see
//!   [`crate::collective`]) on the members `gyr.mpi.comm` named.
//!
//! Communicator constructors are not replayed as messages: a rank that gets no communicator
//! from `MPI_Comm_split` records nothing the others could be matched with.

use crate::collective::{self, Collective, Part};
use crate::program::{Channel, RankProgram, ReqId};
use foldhash::HashMap;
use gyr_core::schema::Schema;
use gyr_core::trace::{Item, TraceReader};
use gyr_core::value::{Value, decode};
use serde::Serialize;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// Why traces cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be opened as a gyr trace.
    #[error("{path}: {error}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: gyr_core::trace::OpenError,
    },
    /// A file holds no MPI rank.
    #[error(
        "{0}: no `gyr.msg.rank` event: this is not the trace of an MPI rank (record with `gyr run --mpi -- mpirun ...`)"
    )]
    NotARank(PathBuf),
    /// Two files claim one rank.
    #[error("{first} and {second} are both rank {rank}: give one file per rank of one run")]
    DuplicateRank {
        /// The rank.
        rank: u32,
        /// One file.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
    /// Ranks of different jobs.
    #[error(
        "{path} is from job `{job}`, the others from job `{expected}`: give the files of one run"
    )]
    OtherJob {
        /// The file.
        path: PathBuf,
        /// Its job.
        job: String,
        /// The first file's job.
        expected: String,
    },
    /// A collective could not be expanded.
    #[error("{path}: {error}")]
    Collective {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        error: collective::CollectiveError,
    },
}

/// What the trace measured of a rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measured {
    /// From the end of `MPI_Init` to the start of `MPI_Finalize` (or the last event of a rank
    /// that never reached it), ns.
    pub span_ns: u64,
    /// Time inside MPI calls in that span, ns.
    pub mpi_ns: u64,
    /// MPI calls in that span.
    pub calls: u64,
    /// Whether the rank reached `MPI_Finalize`.
    pub finalized: bool,
    /// The end of `MPI_Init` on this rank's clock (ns since the process started).
    pub start_ns: u64,
}

/// One rank's trace, turned into its program.
#[derive(Debug, Clone)]
pub struct RankTrace {
    /// The file.
    pub path: PathBuf,
    /// The job, as `gyr.msg.rank` names it.
    pub job: String,
    /// World size.
    pub size: u32,
    /// The replay.
    pub program: RankProgram,
    /// What the trace measured.
    pub measured: Measured,
    /// The file's header (its clock, its process).
    pub header: gyr_core::trace::TraceHeader,
}

/// Everything loaded, and what could not be used.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// Per rank, in rank order.
    pub ranks: Vec<RankTrace>,
    /// Things the replay leaves out, said once each.
    pub warnings: Vec<String>,
}

/// Loads one trace per rank (any order).
pub fn load(paths: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    for path in paths {
        let rank = load_rank(path, &mut loaded.warnings)?;
        if let Some(first) = loaded.ranks.first()
            && first.job != rank.job
        {
            return Err(LoadError::OtherJob {
                path: path.clone(),
                job: rank.job,
                expected: first.job.clone(),
            });
        }
        if let Some(other) = loaded
            .ranks
            .iter()
            .find(|r| r.program.rank == rank.program.rank)
        {
            return Err(LoadError::DuplicateRank {
                rank: rank.program.rank,
                first: other.path.clone(),
                second: path.clone(),
            });
        }
        loaded.ranks.push(rank);
    }
    loaded.ranks.sort_by_key(|r| r.program.rank);
    loaded.warnings.sort();
    loaded.warnings.dedup();
    Ok(loaded)
}

/// An event of interest, decoded.
#[derive(Debug, Clone)]
enum Ev {
    Rank {
        job: String,
        rank: u32,
        size: u32,
    },
    Begin(u32),
    End(u32),
    Send {
        peer: u32,
        tag: i32,
        bytes: u64,
        comm: u64,
    },
    Recv {
        peer: u32,
        tag: i32,
        comm: u64,
    },
    Request {
        id: u64,
        recv: bool,
        peer: i64,
        tag: i32,
        bytes: u64,
        comm: u64,
    },
    Complete {
        id: u64,
        cancelled: bool,
    },
    Collective {
        call: u32,
        comm: u64,
        root: i64,
        sent: u64,
        received: u64,
    },
    Comm {
        comm: u64,
        members: Option<Vec<u32>>,
    },
}

/// Call names, each kept once.
#[derive(Debug, Default)]
struct Names {
    index: HashMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

fn field<'a>(schema: &Schema, values: &'a [Value], name: &str) -> Option<&'a Value> {
    schema.field_index(name).and_then(|i| values.get(i))
}

fn uint(schema: &Schema, values: &[Value], name: &str) -> Option<u64> {
    match field(schema, values, name)? {
        Value::UInt(v) => Some(*v),
        Value::Int(v) => u64::try_from(*v).ok(),
        _ => None,
    }
}

fn int(schema: &Schema, values: &[Value], name: &str) -> Option<i64> {
    match field(schema, values, name)? {
        Value::UInt(v) => i64::try_from(*v).ok(),
        Value::Int(v) => Some(*v),
        _ => None,
    }
}

fn text<'a>(schema: &Schema, values: &'a [Value], name: &str) -> Option<&'a str> {
    match field(schema, values, name)? {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

fn boolean(schema: &Schema, values: &[Value], name: &str) -> Option<bool> {
    match field(schema, values, name)? {
        Value::Bool(b) => Some(*b),
        _ => None,
    }
}

fn tag(schema: &Schema, values: &[Value]) -> Option<i32> {
    int(schema, values, "tag").and_then(|t| i32::try_from(t).ok())
}

fn to_event(schema: &Schema, values: &[Value], names: &mut Names) -> Option<Ev> {
    let (s, v) = (schema, values);
    Some(match schema.name.as_str() {
        "gyr.msg.rank" => Ev::Rank {
            job: text(s, v, "job")?.to_owned(),
            rank: u32::try_from(uint(s, v, "rank")?).ok()?,
            size: u32::try_from(uint(s, v, "size")?).ok()?,
        },
        "gyr.mpi.begin" => Ev::Begin(names.intern(text(s, v, "call")?)),
        "gyr.mpi.end" => Ev::End(names.intern(text(s, v, "call")?)),
        "gyr.msg.send" => Ev::Send {
            peer: u32::try_from(uint(s, v, "peer")?).ok()?,
            tag: tag(s, v)?,
            bytes: uint(s, v, "bytes")?,
            comm: uint(s, v, "comm")?,
        },
        "gyr.msg.recv" => Ev::Recv {
            peer: u32::try_from(uint(s, v, "peer")?).ok()?,
            tag: tag(s, v)?,
            comm: uint(s, v, "comm")?,
        },
        "gyr.mpi.request" => Ev::Request {
            id: uint(s, v, "request")?,
            recv: boolean(s, v, "recv")?,
            peer: int(s, v, "peer")?,
            tag: tag(s, v)?,
            bytes: uint(s, v, "bytes")?,
            comm: uint(s, v, "comm")?,
        },
        "gyr.mpi.complete" => Ev::Complete {
            id: uint(s, v, "request")?,
            cancelled: boolean(s, v, "cancelled")?,
        },
        "gyr.mpi.collective" => Ev::Collective {
            call: names.intern(text(s, v, "call")?),
            comm: uint(s, v, "comm")?,
            root: int(s, v, "root")?,
            sent: uint(s, v, "sent")?,
            received: uint(s, v, "received")?,
        },
        "gyr.mpi.comm" => Ev::Comm {
            comm: uint(s, v, "comm")?,
            members: parse_members(text(s, v, "members")?),
        },
        _ => return None,
    })
}

/// `"0,2,4"` as ranks; `None` when the list was cut (`,...`) or does not parse.
fn parse_members(s: &str) -> Option<Vec<u32>> {
    if s.ends_with("...") {
        return None;
    }
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.trim().parse().ok())
        .collect()
}

fn is_init(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "mpi_init" || n == "mpi_init_thread" || n == "mpi_init_" || n == "mpi_init_thread_"
}

fn is_finalize(name: &str) -> bool {
    name.to_ascii_lowercase().starts_with("mpi_finalize")
}

fn load_rank(path: &Path, warnings: &mut Vec<String>) -> Result<RankTrace, LoadError> {
    let mut reader = TraceReader::open(path).map_err(|error| LoadError::Open {
        path: path.to_owned(),
        error,
    })?;
    let header = reader.header().clone();
    let mut names = Names::default();
    // (timestamp, order read, event): a rank's events in time order, its threads merged.
    let mut events: Vec<(u64, u64, Ev)> = Vec::new();
    let mut n = 0u64;
    reader.for_each_item(|item| {
        if let Item::Record {
            schema: Some(schema),
            record,
        } = item
            && (schema.name.starts_with("gyr.mpi.") || schema.name.starts_with("gyr.msg."))
            && let Ok(values) = decode(schema, record.payload)
            && let Some(ev) = to_event(schema, &values, &mut names)
        {
            events.push((record.header.timestamp, n, ev));
            n += 1;
        }
    });
    events.sort_by_key(|&(ts, n, _)| (ts, n));
    let Some((job, rank, size)) = events.iter().find_map(|(_, _, e)| match e {
        Ev::Rank { job, rank, size } => Some((job.clone(), *rank, *size)),
        _ => None,
    }) else {
        return Err(LoadError::NotARank(path.to_owned()));
    };
    let mut b = Build {
        prog: RankProgram::new(rank),
        names: &names.names,
        warnings,
        comms: HashMap::default(),
        coll_seq: HashMap::default(),
        requests: HashMap::default(),
    };
    b.comms.insert(0, Some((0..size).collect()));
    let resolved = resolve_receives(&events);
    let measured = b
        .replay(&events, &resolved)
        .map_err(|error| LoadError::Collective {
            path: path.to_owned(),
            error,
        })?;
    Ok(RankTrace {
        path: path.to_owned(),
        job,
        size,
        program: b.prog,
        measured,
        header,
    })
}

/// What a posted receive turned out to be.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Resolution {
    /// Matched a message from `peer` with `tag`.
    From { peer: u32, tag: i32, comm: u64 },
    /// Cancelled, or never completed in the trace.
    Nothing,
}

/// For every `gyr.mpi.request` (by its position among them) that receives, where its message
/// came from; and which `gyr.msg.recv` events belong to a completion (their indices in
/// `events`), so that they are not replayed as blocking receives too.
struct Resolved {
    posts: Vec<Resolution>,
    claimed: foldhash::HashSet<usize>,
}

fn resolve_receives(events: &[(u64, u64, Ev)]) -> Resolved {
    let mut posts = Vec::new();
    let mut open: HashMap<u64, VecDeque<usize>> = HashMap::default();
    let mut claimed = foldhash::HashSet::default();
    let mut awaiting: Option<usize> = None;
    for (i, (_, _, e)) in events.iter().enumerate() {
        match e {
            Ev::Request { id, recv, .. } => {
                let k = posts.len();
                posts.push(Resolution::Nothing);
                if *recv {
                    open.entry(*id).or_default().push_back(k);
                }
                awaiting = None;
            }
            Ev::Complete { id, cancelled } => {
                awaiting = None;
                if let Some(k) = open.get_mut(id).and_then(VecDeque::pop_front)
                    && !cancelled
                {
                    awaiting = Some(k);
                }
            }
            Ev::Recv { peer, tag, comm } => {
                if let Some(k) = awaiting.take() {
                    posts[k] = Resolution::From {
                        peer: *peer,
                        tag: *tag,
                        comm: *comm,
                    };
                    claimed.insert(i);
                }
            }
            _ => awaiting = None,
        }
    }
    Resolved { posts, claimed }
}

struct Build<'a> {
    prog: RankProgram,
    names: &'a [String],
    warnings: &'a mut Vec<String>,
    /// Members of each communicator (`None`: too many to have been recorded).
    comms: HashMap<u64, Option<Vec<u32>>>,
    coll_seq: HashMap<u64, u64>,
    /// Per request id, its posts' replay requests not yet completed (`None`: nothing to wait
    /// for in the replay).
    requests: HashMap<u64, VecDeque<Option<ReqId>>>,
}

/// What one call did, gathered until it returns.
#[derive(Default)]
struct Call {
    sends: Vec<(u32, i32, u64, u64)>,
    recvs: Vec<(u32, i32, u64)>,
    /// (post number, the request event).
    requests: Vec<(usize, u64, bool, i64, i32, u64, u64)>,
    completes: Vec<u64>,
    collectives: Vec<(u32, u64, i64, u64, u64)>,
}

impl Build<'_> {
    fn replay(
        &mut self,
        events: &[(u64, u64, Ev)],
        resolved: &Resolved,
    ) -> Result<Measured, collective::CollectiveError> {
        let mut m = Measured::default();
        let mut started = false;
        let mut prev_end = 0u64;
        let mut last_ts = 0u64;
        let mut call: Option<(u32, u64, Call)> = None;
        let mut post = 0usize;
        for (i, (ts, _, e)) in events.iter().enumerate() {
            let ts = *ts;
            last_ts = last_ts.max(ts);
            match e {
                Ev::Begin(name) => {
                    let n = &self.names[*name as usize];
                    if started && is_finalize(n) {
                        self.prog.compute(ts.saturating_sub(prev_end));
                        m.finalized = true;
                        m.span_ns = ts.saturating_sub(m.start_ns);
                        return Ok(m);
                    }
                    if started {
                        self.prog.compute(ts.saturating_sub(prev_end));
                    }
                    call = Some((*name, ts, Call::default()));
                }
                Ev::End(name) => {
                    let n = &self.names[*name as usize];
                    if !started {
                        if is_init(n) {
                            started = true;
                            m.start_ns = ts;
                            prev_end = ts;
                        }
                        call = None;
                        continue;
                    }
                    let Some((begun, at, c)) = call.take() else {
                        continue;
                    };
                    let i = self.prog.begin(&self.names[begun as usize]);
                    self.flush(c, &resolved.posts)?;
                    self.prog.end(i);
                    m.mpi_ns += ts.saturating_sub(at);
                    m.calls += 1;
                    prev_end = ts;
                }
                Ev::Send {
                    peer,
                    tag,
                    bytes,
                    comm,
                } => {
                    if let Some((_, _, c)) = &mut call {
                        c.sends.push((*peer, *tag, *bytes, *comm));
                    }
                }
                Ev::Recv { peer, tag, comm } => {
                    if let Some((_, _, c)) = &mut call
                        && !resolved.claimed.contains(&i)
                    {
                        c.recvs.push((*peer, *tag, *comm));
                    }
                }
                Ev::Request {
                    id,
                    recv,
                    peer,
                    tag,
                    bytes,
                    comm,
                } => {
                    if let Some((_, _, c)) = &mut call {
                        c.requests
                            .push((post, *id, *recv, *peer, *tag, *bytes, *comm));
                    }
                    post += 1;
                }
                Ev::Complete { id, .. } => {
                    if let Some((_, _, c)) = &mut call {
                        c.completes.push(*id);
                    }
                }
                Ev::Collective {
                    call: name,
                    comm,
                    root,
                    sent,
                    received,
                } => {
                    if let Some((_, _, c)) = &mut call {
                        c.collectives.push((*name, *comm, *root, *sent, *received));
                    }
                }
                Ev::Comm { comm, members } => {
                    self.comms.insert(*comm, members.clone());
                }
                Ev::Rank { .. } => {}
            }
        }
        m.span_ns = last_ts.saturating_sub(m.start_ns);
        Ok(m)
    }

    /// Appends one call's operations.
    fn flush(
        &mut self,
        mut c: Call,
        posts: &[Resolution],
    ) -> Result<(), collective::CollectiveError> {
        let mut wait = Vec::new();
        for &(k, id, recv, peer, tag, bytes, comm) in &c.requests {
            let req = if recv {
                match posts.get(k) {
                    Some(Resolution::From { peer, tag, comm }) => Some(self.prog.irecv(
                        *peer,
                        Channel::User {
                            comm: *comm,
                            tag: *tag,
                        },
                    )),
                    _ => None,
                }
            } else if let Ok(peer) = u32::try_from(peer) {
                // This post's own message event is not a blocking send.
                if let Some(i) = c
                    .sends
                    .iter()
                    .position(|s| (s.0, s.1, s.3) == (peer, tag, comm))
                {
                    c.sends.remove(i);
                }
                Some(self.prog.isend(peer, Channel::User { comm, tag }, bytes))
            } else {
                None // MPI_PROC_NULL
            };
            self.requests.entry(id).or_default().push_back(req);
        }
        for &(peer, tag, comm) in &c.recvs {
            wait.push(self.prog.irecv(peer, Channel::User { comm, tag }));
        }
        for &(peer, tag, bytes, comm) in &c.sends {
            wait.push(self.prog.isend(peer, Channel::User { comm, tag }, bytes));
        }
        for id in &c.completes {
            if let Some(Some(req)) = self.requests.get_mut(id).and_then(VecDeque::pop_front) {
                wait.push(req);
            }
        }
        self.prog.wait(&wait);
        for &(name, comm, root, sent, received) in &c.collectives {
            let call = &self.names[name as usize];
            let Some(kind) = Collective::from_call(call) else {
                self.warnings.push(format!(
                    "{call} is not a collective the replay knows: its time is left out"
                ));
                continue;
            };
            let members = match self.comms.get(&comm) {
                Some(Some(m)) => m.clone(),
                _ => {
                    self.warnings.push(format!(
                        "a collective on communicator {comm:#x}, whose members the trace does not list: left out"
                    ));
                    continue;
                }
            };
            let seq = self.coll_seq.entry(comm).or_insert(0);
            let part = Part {
                kind,
                comm,
                members: &members,
                root: u32::try_from(root).unwrap_or_else(|_| members.first().copied().unwrap_or(0)),
                seq: *seq,
                sent,
                received,
            };
            *seq += 1;
            collective::expand(&mut self.prog, &part)?;
        }
        Ok(())
    }
}
