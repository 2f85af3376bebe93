//! The discrete-event replay: one logical process (LP) per rank, after MPI-SIM.
//!
//! Each LP has a simulation clock, a request list and, per source and channel, a queue of
//! posted receives and one of messages that arrived before their receive. A send is a message
//! to the receiver's LP stamped with its arrival time; a receive completes at the later of the
//! arrival and the post, plus the receiver's overhead. Traces name the actual source of every
//! receive, so every LP runs in MPI-SIM's deterministic mode: it may take a matching message
//! as soon as it is there.
//!
//! Events are processed in time order from one queue (ties in the order they were queued), and
//! an LP performs one timed operation per event, so that the network interfaces ranks share
//! are taken in the order of simulated time: the prediction is the same on every run.

use crate::model::Network;
use crate::program::{Channel, Op, RankProgram, ReqId};
use foldhash::HashMap;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Why a replay cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// Two programs for one rank.
    #[error("rank {0} has two programs")]
    DuplicateRank(u32),
    /// A message to or from a rank that has no program.
    #[error(
        "rank {rank} exchanges messages with rank {peer}, which has no trace: give every rank's trace"
    )]
    UnknownPeer {
        /// The rank.
        rank: u32,
        /// The rank without a program.
        peer: u32,
    },
    /// A wait for a request that was never started.
    #[error("rank {rank} waits for request {req}, which it never started")]
    UnknownRequest {
        /// The rank.
        rank: u32,
        /// The request.
        req: ReqId,
    },
    /// The network's parameters are not usable.
    #[error("the network model: {0}")]
    Model(String),
}

/// One of the program's calls on the predicted timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallSpan {
    /// The call's name, as an index into [`RankPrediction::names`].
    pub name: u32,
    /// Predicted start, ns from the run's start.
    pub start_ns: u64,
    /// Predicted end.
    pub end_ns: u64,
}

/// A rank's predicted run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankPrediction {
    /// The rank.
    pub rank: u32,
    /// When it finished its last operation (or, if it never could, where it stopped).
    pub end_ns: u64,
    /// Time inside the program's calls.
    pub calls_ns: u64,
    /// Its calls, in order.
    pub calls: Vec<CallSpan>,
    /// The calls' names.
    pub names: Vec<String>,
}

/// A rank that could not finish: it waits for a message no trace sends (a rank was killed, or
/// a trace was cut off).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unfinished {
    /// The rank.
    pub rank: u32,
    /// The operation it is stuck at.
    pub at_op: usize,
    /// What it waits for.
    pub waiting_for: String,
}

/// The replay's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Per rank, in rank order.
    pub ranks: Vec<RankPrediction>,
    /// The last rank's end.
    pub makespan_ns: u64,
    /// Messages simulated (the program's and the collectives').
    pub messages: u64,
    /// Events processed.
    pub events: u64,
    /// Ranks that could not finish.
    pub unfinished: Vec<Unfinished>,
}

/// Replays `programs` on `network`.
pub fn simulate(programs: Vec<RankProgram>, network: &Network) -> Result<Prediction, SimError> {
    network.validate().map_err(SimError::Model)?;
    Sim::new(programs, network.clone())?.run()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The data, sent eagerly.
    Eager,
    /// A rendezvous's request to send; `.0` is the sender's request.
    RequestToSend(ReqId),
}

#[derive(Debug)]
enum Ev {
    /// The LP performs its next operation.
    Step(usize),
    /// A message (or a request to send) reaches `dst`.
    Arrive {
        src: usize,
        dst: usize,
        channel: Channel,
        bytes: u64,
        kind: Kind,
    },
    /// The receiver's clear to send reaches the sender, who sends the data.
    ClearToSend {
        src: usize,
        send_req: ReqId,
        dst: usize,
        recv_req: ReqId,
        bytes: u64,
    },
    /// A rendezvous's data reaches the receiver.
    Data {
        src: usize,
        dst: usize,
        recv_req: ReqId,
        bytes: u64,
    },
    /// A request completes.
    Done { lp: usize, req: ReqId },
}

/// An arrival its receive has not been posted for.
#[derive(Debug)]
struct Unexpected {
    at: u64,
    bytes: u64,
    kind: Kind,
}

#[derive(Debug, Default)]
struct Queues {
    posted: VecDeque<(ReqId, u64)>,
    unexpected: VecDeque<Unexpected>,
}

/// A request's completion time while it has none.
const PENDING: u64 = u64::MAX;

#[derive(Debug)]
struct Lp {
    prog: RankProgram,
    pc: usize,
    clock: u64,
    /// Completion time of each request, indexed by its (dense) id; [`PENDING`] until then.
    reqs: Vec<u64>,
    /// The index of the `Op::Wait` it is blocked in.
    waiting: Option<usize>,
    /// Per (source LP, channel). A collective's entry goes once both its queues are empty,
    /// since its channel never comes back.
    queues: HashMap<(usize, Channel), Queues>,
    /// When its own interface can take the next message.
    tx_free: u64,
    /// When its processor is done with the messages' work queued on it (a send's or a
    /// receive's processor time, `o + (s-1)·O`): one processor does one at a time, so a
    /// sendrecv pays for its send and its receive one after the other.
    cpu_free: u64,
    open: HashMap<u32, u64>,
    calls: Vec<CallSpan>,
    calls_ns: u64,
}

struct Sim {
    lps: Vec<Lp>,
    network: Network,
    /// Per node: when its network interface can send, and receive, the next message.
    node_tx: HashMap<u32, u64>,
    node_rx: HashMap<u32, u64>,
    /// Pairs of LPs (lower first) a message has connected.
    connected: foldhash::HashSet<(usize, usize)>,
    /// Pairs of LPs (lower first) that each send to the other before waiting for it: their
    /// connection costs `Cx`, not `C`.
    crossing: foldhash::HashSet<(usize, usize)>,
    queue: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slots: Vec<Option<Ev>>,
    free_slots: Vec<usize>,
    seq: u64,
    events: u64,
    messages: u64,
}

impl Sim {
    fn new(mut programs: Vec<RankProgram>, network: Network) -> Result<Sim, SimError> {
        programs.sort_by_key(|p| p.rank);
        for w in programs.windows(2) {
            if w[0].rank == w[1].rank {
                return Err(SimError::DuplicateRank(w[0].rank));
            }
        }
        let index: HashMap<u32, usize> = programs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.rank, i))
            .collect();
        // Check peers and requests up front, so that the replay itself cannot fail.
        let mut requests = Vec::with_capacity(programs.len());
        for p in &mut programs {
            let mut started = Started::new(p);
            for op in &p.ops {
                match op {
                    Op::Isend { req, to: peer, .. }
                    | Op::Irecv {
                        req, from: peer, ..
                    } => {
                        if !index.contains_key(peer) {
                            return Err(SimError::UnknownPeer {
                                rank: p.rank,
                                peer: *peer,
                            });
                        }
                        started.insert(*req);
                    }
                    Op::Wait(reqs) => {
                        if let Some(req) = reqs.iter().find(|r| !started.contains(**r)) {
                            return Err(SimError::UnknownRequest {
                                rank: p.rank,
                                req: *req,
                            });
                        }
                    }
                    _ => {}
                }
            }
            requests.push(started.into_dense(p));
        }
        let charged = [&network.intra, &network.inter]
            .iter()
            .any(|p| p.connect(false) != p.connect(true));
        let mut crossing = foldhash::HashSet::default();
        if charged {
            let first: Vec<_> = programs.iter().map(sends_first).collect();
            for (a, peers) in first.iter().enumerate() {
                for peer in peers {
                    let b = index[peer];
                    if a < b && first[b].contains(&programs[a].rank) {
                        crossing.insert((a, b));
                    }
                }
            }
        }
        let lps = programs
            .into_iter()
            .zip(requests)
            .map(|(prog, requests)| Lp {
                prog,
                pc: 0,
                clock: 0,
                reqs: vec![PENDING; requests],
                waiting: None,
                queues: HashMap::default(),
                tx_free: 0,
                cpu_free: 0,
                open: HashMap::default(),
                calls: Vec::new(),
                calls_ns: 0,
            })
            .collect();
        Ok(Sim {
            lps,
            network,
            node_tx: HashMap::default(),
            node_rx: HashMap::default(),
            connected: Default::default(),
            crossing,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            seq: 0,
            events: 0,
            messages: 0,
        })
    }

    fn rank(&self, lp: usize) -> u32 {
        self.lps[lp].prog.rank
    }

    /// The path between two LPs.
    fn path(&self, src: usize, dst: usize) -> &crate::model::LogGops {
        self.network.path(self.rank(src), self.rank(dst))
    }

    fn at(&mut self, time: u64, ev: Ev) {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(ev);
                s
            }
            None => {
                self.slots.push(Some(ev));
                self.slots.len() - 1
            }
        };
        self.queue.push(Reverse((time, self.seq, slot)));
        self.seq += 1;
    }

    fn run(mut self) -> Result<Prediction, SimError> {
        for lp in 0..self.lps.len() {
            self.at(0, Ev::Step(lp));
        }
        while let Some(Reverse((now, _, slot))) = self.queue.pop() {
            let ev = self.slots[slot]
                .take()
                .expect("a queued event is in its slot");
            self.free_slots.push(slot);
            self.events += 1;
            self.dispatch(now, ev);
        }
        Ok(self.finish())
    }

    /// Processes one event due at `now`.
    fn dispatch(&mut self, now: u64, ev: Ev) {
        match ev {
            Ev::Step(lp) => self.step(lp, now),
            Ev::Arrive {
                src,
                dst,
                channel,
                bytes,
                kind,
            } => self.arrive(now, src, dst, channel, bytes, kind),
            Ev::ClearToSend {
                src,
                send_req,
                dst,
                recv_req,
                bytes,
            } => {
                let (start, done) = self.transmit(src, dst, now, bytes);
                let flight = self.path(src, dst).flight(bytes);
                self.at(
                    done,
                    Ev::Done {
                        lp: src,
                        req: send_req,
                    },
                );
                self.at(
                    start + flight,
                    Ev::Data {
                        src,
                        dst,
                        recv_req,
                        bytes,
                    },
                );
            }
            Ev::Data {
                src,
                dst,
                recv_req,
                bytes,
            } => {
                let at = self.take_interface_in(src, dst, now, bytes);
                let done = self.receive_cpu(src, dst, at, bytes);
                self.at(
                    done,
                    Ev::Done {
                        lp: dst,
                        req: recv_req,
                    },
                );
            }
            Ev::Done { lp, req } => self.complete(lp, req, now),
        }
    }

    /// Whether an event queued now for `time` would be the next one out: nothing else is due
    /// by then (an event due at the same time was queued earlier, and goes first).
    fn next_out(&self, time: u64) -> bool {
        self.queue.peek().is_none_or(|Reverse((t, _, _))| *t > time)
    }

    /// Performs `lp`'s operations from `now` until one blocks, or takes time while another
    /// event is due first. Going on in place of queueing the step that would be taken next
    /// anyway keeps the order (and the prediction) the same, with fewer heap operations; the
    /// step is counted as an event all the same.
    fn step(&mut self, lp: usize, mut now: u64) {
        loop {
            let l = &mut self.lps[lp];
            let pc = l.pc;
            let Some(op) = l.prog.ops.get(pc) else {
                return;
            };
            l.pc += 1;
            match *op {
                Op::Compute(ns) => {
                    l.clock = now.saturating_add(ns);
                    let t = l.clock;
                    if self.next_out(t) {
                        self.events += 1;
                        now = t;
                        continue;
                    }
                    self.at(t, Ev::Step(lp));
                    return;
                }
                Op::Begin(i) => {
                    l.open.insert(i, now);
                }
                Op::End(i) => {
                    if let Some(start) = l.open.remove(&i) {
                        let name = l.prog.calls.get(i as usize).copied().unwrap_or_default();
                        l.calls_ns += now - start;
                        l.calls.push(CallSpan {
                            name,
                            start_ns: start,
                            end_ns: now,
                        });
                    }
                }
                Op::Isend {
                    req,
                    to,
                    channel,
                    bytes,
                } => {
                    let dst = self.index_of(to);
                    let t = self.send(lp, now, req, dst, channel, bytes);
                    if self.next_out(t) {
                        self.events += 1;
                        now = t;
                        continue;
                    }
                    self.at(t, Ev::Step(lp));
                    return;
                }
                Op::Irecv { req, from, channel } => {
                    let src = self.index_of(from);
                    self.post(lp, now, req, src, channel);
                }
                Op::Wait(ref reqs) => match wait_done(&l.reqs, reqs) {
                    Some(done) if done <= now => {}
                    Some(done) => {
                        l.clock = done;
                        if self.next_out(done) {
                            self.events += 1;
                            now = done;
                            continue;
                        }
                        self.at(done, Ev::Step(lp));
                        return;
                    }
                    None => {
                        l.waiting = Some(pc);
                        return;
                    }
                },
            }
        }
    }

    fn index_of(&self, rank: u32) -> usize {
        // Ranks 0..n, the usual case, are their own index.
        if self
            .lps
            .get(rank as usize)
            .is_some_and(|l| l.prog.rank == rank)
        {
            return rank as usize;
        }
        // Checked in `new`: every peer has a program.
        self.lps
            .binary_search_by_key(&rank, |l| l.prog.rank)
            .expect("peers were checked before the replay")
    }

    /// Reserves the sender's interfaces for `bytes` from `now` on: returns when the data
    /// starts to leave and when the sender's processor is done with it.
    fn transmit(&mut self, src: usize, dst: usize, now: u64, bytes: u64) -> (u64, u64) {
        let (a, b) = (self.rank(src), self.rank(dst));
        let path = self.network.path(a, b);
        let (busy, cpu) = (path.interface(bytes), path.cpu(bytes));
        let mut start = now.max(self.lps[src].tx_free).max(self.lps[src].cpu_free);
        let crosses = self.network.node(a) != self.network.node(b);
        if crosses {
            let node = self.network.node(a);
            let free = self.node_tx.entry(node).or_insert(0);
            start = start.max(*free);
            *free = start + busy;
        }
        self.lps[src].tx_free = start + busy;
        self.lps[src].cpu_free = start + cpu;
        self.messages += 1;
        (start, start + cpu)
    }

    /// When a message of `bytes` reaching `dst` at `now` is in: later if the receiving node's
    /// interface is still busy with earlier ones.
    fn take_interface_in(&mut self, src: usize, dst: usize, now: u64, bytes: u64) -> u64 {
        let (a, b) = (self.rank(src), self.rank(dst));
        if self.network.node(a) == self.network.node(b) {
            return now;
        }
        let busy = self.network.path(a, b).interface(bytes);
        let free = self.node_rx.entry(self.network.node(b)).or_insert(0);
        let at = now.max(*free);
        *free = at + busy;
        at
    }

    /// Starts `lp`'s send; returns when its processor is free for the next operation.
    fn send(
        &mut self,
        lp: usize,
        now: u64,
        req: ReqId,
        dst: usize,
        channel: Channel,
        bytes: u64,
    ) -> u64 {
        let path = self.path(lp, dst);
        let pair = (lp.min(dst), lp.max(dst));
        let (flight, control) = (path.flight(bytes), path.control());
        let connect = path.connect(self.crossing.contains(&pair));
        let (rendezvous, o) = (path.rendezvous(bytes), path.o.round().max(0.0) as u64);
        // The first message between two ranks connects them, at its sender's cost.
        let now = if connect > 0 && self.connected.insert(pair) {
            now + connect
        } else {
            now
        };
        if rendezvous {
            // Only the request to send leaves now; the data waits for the clear to send.
            let now = now.max(self.lps[lp].cpu_free);
            let t = now + o;
            self.lps[lp].cpu_free = t;
            self.lps[lp].clock = t;
            self.lps[lp].reqs[req as usize] = PENDING;
            self.messages += 1;
            self.at(
                now + control,
                Ev::Arrive {
                    src: lp,
                    dst,
                    channel,
                    bytes,
                    kind: Kind::RequestToSend(req),
                },
            );
            t
        } else {
            let (start, done) = self.transmit(lp, dst, now, bytes);
            self.lps[lp].clock = done;
            // An eager send is complete once the data is copied out.
            self.lps[lp].reqs[req as usize] = done;
            self.at(
                start + flight,
                Ev::Arrive {
                    src: lp,
                    dst,
                    channel,
                    bytes,
                    kind: Kind::Eager,
                },
            );
            done
        }
    }

    fn post(&mut self, lp: usize, now: u64, req: ReqId, src: usize, channel: Channel) {
        self.lps[lp].reqs[req as usize] = PENDING;
        let queues = &mut self.lps[lp].queues;
        let q = queues.entry((src, channel)).or_default();
        match q.unexpected.pop_front() {
            Some(m) => {
                forget_if_done(queues, src, channel);
                self.matched(src, lp, req, m.at.max(now), m.bytes, m.kind)
            }
            None => q.posted.push_back((req, now)),
        }
    }

    fn arrive(
        &mut self,
        now: u64,
        src: usize,
        dst: usize,
        channel: Channel,
        bytes: u64,
        kind: Kind,
    ) {
        let now = match kind {
            Kind::Eager => self.take_interface_in(src, dst, now, bytes),
            Kind::RequestToSend(_) => now,
        };
        let queues = &mut self.lps[dst].queues;
        let q = queues.entry((src, channel)).or_default();
        match q.posted.pop_front() {
            Some((req, posted)) => {
                forget_if_done(queues, src, channel);
                self.matched(src, dst, req, now.max(posted), bytes, kind)
            }
            None => q.unexpected.push_back(Unexpected {
                at: now,
                bytes,
                kind,
            }),
        }
    }

    /// A message and its receive met at `at`.
    fn matched(&mut self, src: usize, dst: usize, req: ReqId, at: u64, bytes: u64, kind: Kind) {
        let path = self.path(src, dst);
        let control = path.control();
        match kind {
            Kind::Eager => {
                let done = self.receive_cpu(src, dst, at, bytes);
                self.at(done, Ev::Done { lp: dst, req });
            }
            // MPI libraries move a rendezvous on only inside MPI calls (Open MPI has no
            // progress thread): a receiver computing when the request to send comes answers
            // it when its computing ends, at its next call, so a nonblocking receive's
            // data does not flow behind the computing it was meant to overlap.
            Kind::RequestToSend(send_req) => self.at(
                self.progressed(dst, at) + control,
                Ev::ClearToSend {
                    src,
                    send_req,
                    dst,
                    recv_req: req,
                    bytes,
                },
            ),
        }
    }

    /// When `lp` next makes progress on its messages, from `at`: at once when it is in an MPI
    /// call (blocked in a wait, or between operations), else when its computing ends.
    fn progressed(&self, lp: usize, at: u64) -> u64 {
        let l = &self.lps[lp];
        if l.waiting.is_some() {
            at
        } else {
            at.max(l.clock)
        }
    }

    /// When `dst`'s processor is done receiving `bytes` from `src` that are there at `at`: after
    /// the work already queued on it.
    fn receive_cpu(&mut self, src: usize, dst: usize, at: u64, bytes: u64) -> u64 {
        let cpu = self.path(src, dst).cpu(bytes);
        let done = at.max(self.lps[dst].cpu_free) + cpu;
        self.lps[dst].cpu_free = done;
        done
    }

    fn complete(&mut self, lp: usize, req: ReqId, now: u64) {
        let l = &mut self.lps[lp];
        l.reqs[req as usize] = now;
        let Some(at) = l.waiting else { return };
        let Op::Wait(waiting) = &l.prog.ops[at] else {
            unreachable!("an LP waits in a wait")
        };
        if let Some(done) = wait_done(&l.reqs, waiting) {
            l.waiting = None;
            l.clock = l.clock.max(done);
            let t = l.clock;
            self.at(t, Ev::Step(lp));
        }
    }

    fn finish(self) -> Prediction {
        let mut unfinished = Vec::new();
        let mut ranks = Vec::with_capacity(self.lps.len());
        for l in self.lps {
            if l.pc < l.prog.ops.len() || l.waiting.is_some() {
                let waiting_for = match l.waiting.map(|at| &l.prog.ops[at]) {
                    Some(Op::Wait(reqs)) => describe_wait(&l.prog, reqs),
                    _ => "nothing (stopped)".into(),
                };
                unfinished.push(Unfinished {
                    rank: l.prog.rank,
                    at_op: l.pc.saturating_sub(1),
                    waiting_for,
                });
            }
            ranks.push(RankPrediction {
                rank: l.prog.rank,
                end_ns: l.clock,
                calls_ns: l.calls_ns,
                calls: l.calls,
                names: l.prog.names,
            });
        }
        Prediction {
            makespan_ns: ranks.iter().map(|r| r.end_ns).max().unwrap_or(0),
            ranks,
            messages: self.messages,
            events: self.events,
            unfinished,
        }
    }
}

/// When the last of `reqs` completed, if all have.
/// The peers `prog`'s rank sends to before it first waits for a message from them: a
/// transport that connects on first use sees it ask for their connection.
fn sends_first(prog: &RankProgram) -> foldhash::HashSet<u32> {
    let mut first = foldhash::HashSet::default();
    let mut decided = foldhash::HashSet::default();
    // Receives posted from peers not decided yet, by request.
    let mut receives: HashMap<ReqId, u32> = HashMap::default();
    for op in &prog.ops {
        match op {
            // The first exchange with `to` decided here: a send.
            Op::Isend { to, .. } if decided.insert(*to) => {
                first.insert(*to);
            }
            Op::Irecv { req, from, .. } if !decided.contains(from) => {
                receives.insert(*req, *from);
            }
            Op::Wait(reqs) => {
                for r in reqs {
                    if let Some(from) = receives.remove(r) {
                        decided.insert(from);
                    }
                }
            }
            _ => {}
        }
    }
    first
}

fn wait_done(state: &[u64], reqs: &[ReqId]) -> Option<u64> {
    let mut last = 0;
    for r in reqs {
        let done = state[*r as usize];
        if done == PENDING {
            return None;
        }
        last = last.max(done);
    }
    Some(last)
}

/// Drops a collective's queues once empty: its channel is never used again, and a long run's
/// thousands of collectives would otherwise each leave an entry behind.
fn forget_if_done(queues: &mut HashMap<(usize, Channel), Queues>, src: usize, channel: Channel) {
    if matches!(channel, Channel::Collective { .. })
        && queues
            .get(&(src, channel))
            .is_some_and(|q| q.posted.is_empty() && q.unexpected.is_empty())
    {
        queues.remove(&(src, channel));
    }
}

/// The requests a program started, checked as its operations are; then numbered densely, so
/// that the replay keeps their state in a vector.
enum Started {
    /// Ids below the bound, the usual case (a program numbers its requests from 0).
    Dense(Vec<bool>),
    /// Anything else.
    Sparse(foldhash::HashSet<ReqId>),
}

impl Started {
    fn new(p: &RankProgram) -> Started {
        let bound = 2 * p.ops.len() + 64;
        let max = p.ops.iter().filter_map(request_of).max();
        match max {
            Some(m) if m as usize >= bound => Started::Sparse(Default::default()),
            m => Started::Dense(vec![false; m.map_or(0, |m| m as usize + 1)]),
        }
    }

    fn insert(&mut self, req: ReqId) {
        match self {
            Started::Dense(v) => v[req as usize] = true,
            Started::Sparse(s) => {
                s.insert(req);
            }
        }
    }

    fn contains(&self, req: ReqId) -> bool {
        match self {
            Started::Dense(v) => v.get(req as usize).copied().unwrap_or(false),
            Started::Sparse(s) => s.contains(&req),
        }
    }

    /// Renumbers `p`'s requests 0.. if they were sparse; returns how many ids there are.
    fn into_dense(self, p: &mut RankProgram) -> usize {
        let set = match self {
            Started::Dense(v) => return v.len(),
            Started::Sparse(s) => s,
        };
        let mut ids: Vec<ReqId> = set.into_iter().collect();
        ids.sort_unstable();
        let number: HashMap<ReqId, ReqId> = ids
            .iter()
            .enumerate()
            .map(|(i, r)| (*r, i as ReqId))
            .collect();
        for op in &mut p.ops {
            match op {
                Op::Isend { req, .. } | Op::Irecv { req, .. } => *req = number[req],
                Op::Wait(reqs) => reqs.iter_mut().for_each(|r| *r = number[r]),
                _ => {}
            }
        }
        ids.len()
    }
}

fn request_of(op: &Op) -> Option<ReqId> {
    match op {
        Op::Isend { req, .. } | Op::Irecv { req, .. } => Some(*req),
        Op::Wait(reqs) => reqs.iter().copied().max(),
        _ => None,
    }
}

fn describe_wait(prog: &RankProgram, reqs: &[ReqId]) -> String {
    let mut parts = Vec::new();
    for op in &prog.ops {
        match op {
            Op::Isend { req, to, bytes, .. } if reqs.contains(req) => {
                parts.push(format!("a send of {bytes} bytes to rank {to}"))
            }
            Op::Irecv { req, from, .. } if reqs.contains(req) => {
                parts.push(format!("a message from rank {from}"))
            }
            _ => {}
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LogGops;

    const CH: Channel = Channel::User { comm: 0, tag: 0 };

    fn net() -> Network {
        Network::single(LogGops {
            latency: 1000.0,
            o: 100.0,
            g: 50.0,
            gap_per_byte: 1.0,
            overhead_per_byte: 0.0,
            eager_limit: 1000,
            connect_ns: 0.0,
            connect_crossing_ns: None,
            measured: Vec::new(),
        })
    }

    /// Rank 0 sends two messages of `bytes` at once; rank 1 receives them.
    fn two_sends(bytes: u64) -> Vec<RankProgram> {
        let mut a = RankProgram::new(0);
        let r1 = a.isend(1, CH, bytes);
        let r2 = a.isend(1, CH, bytes);
        a.wait(&[r1, r2]);
        let mut b = RankProgram::new(1);
        b.recv(0, CH);
        b.recv(0, CH);
        vec![a, b]
    }

    #[test]
    fn an_eager_ping_pong_by_hand() {
        // Rank 0 sends 101 bytes at 0: its processor is busy until o = 100; the data arrives at
        // o + 100·G + L = 1200; rank 1, waiting since 0, completes at 1200 + o = 1300, then
        // sends back: arrives at 1300 + 1200 = 2500, completes at 2600.
        let mut a = RankProgram::new(0);
        a.send(1, CH, 101);
        a.recv(1, CH);
        let mut b = RankProgram::new(1);
        b.recv(0, CH);
        b.send(0, CH, 101);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert_eq!(p.ranks[0].end_ns, 2600);
        assert_eq!(
            p.ranks[1].end_ns, 1400,
            "rank 1 ends after its send's overhead"
        );
        assert_eq!(p.makespan_ns, 2600);
        assert!(p.unfinished.is_empty());
        assert_eq!(p.messages, 2);
    }

    #[test]
    fn a_late_receiver_delays_a_rendezvous_sender() {
        // 2001 bytes > S: rank 0's request to send arrives at o + L = 1100; rank 1 posts at
        // 5000 (after computing), its clear to send reaches rank 0 at 5000 + 1100 = 6100; the
        // data leaves then: rank 0's send completes at 6100 + o = 6200, the data arrives at
        // 6100 + o + 2000·G + L = 9200 and the receive completes at 9300.
        let mut a = RankProgram::new(0);
        let c = a.begin("MPI_Send");
        a.send(1, CH, 2001);
        a.end(c);
        let mut b = RankProgram::new(1);
        b.compute(5000);
        b.recv(0, CH);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert_eq!(p.ranks[0].end_ns, 6200);
        assert_eq!(p.ranks[1].end_ns, 9300);
        assert_eq!(
            p.ranks[0].calls,
            vec![CallSpan {
                name: 0,
                start_ns: 0,
                end_ns: 6200
            }]
        );
        assert_eq!(p.ranks[0].names, vec!["MPI_Send".to_owned()]);
        assert_eq!(p.ranks[0].calls_ns, 6200);
    }

    #[test]
    fn a_rendezvous_waits_for_its_receiver_to_stop_computing() {
        // Rank 1 posts its receive at 0, then computes until 5000: the request to send that
        // arrives at 1100 is answered only then, at its wait, as by a late receiver (above):
        // the clear to send reaches rank 0 at 6100, its send completes at 6200, the receive
        // at 9300. Answered at once, the data would have flowed during the computing (the
        // receive done at 5400) though no MPI call ran to move it.
        let mut a = RankProgram::new(0);
        a.send(1, CH, 2001);
        let mut b = RankProgram::new(1);
        let r = b.irecv(0, CH);
        b.compute(5000);
        b.wait(&[r]);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert_eq!(p.ranks[0].end_ns, 6200);
        assert_eq!(p.ranks[1].end_ns, 9300);
        // Waiting already, the receiver answers at once: 1100 + 1100 = 2200, done at 5400.
        let mut a = RankProgram::new(0);
        a.send(1, CH, 2001);
        let mut b = RankProgram::new(1);
        let r = b.irecv(0, CH);
        b.wait(&[r]);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert_eq!((p.ranks[0].end_ns, p.ranks[1].end_ns), (2300, 5400));
    }

    #[test]
    fn a_sendrecv_pays_its_send_and_its_receive_one_after_the_other() {
        // L = 0, G = 0: a message's flight is the sender's o = 100. Rank 0 sends at 0 (busy to
        // 100), its data in at 100. Rank 1 computes 50 first: its send keeps its processor
        // busy 50..150, so the data that came at 100 is received 150..250, not 100..200. Rank
        // 1's data, in at 150, finds rank 0's processor free since 100: done at 250.
        let mut network = net();
        network.intra.latency = 0.0;
        network.intra.gap_per_byte = 0.0;
        let mut a = RankProgram::new(0);
        a.sendrecv(1, 10, 1, CH);
        let mut b = RankProgram::new(1);
        b.compute(50);
        b.sendrecv(0, 10, 0, CH);
        let p = simulate(vec![a, b], &network).unwrap();
        assert_eq!(p.ranks[0].end_ns, 250);
        assert_eq!(p.ranks[1].end_ns, 250);
        // Two sends in a row on one processor: the second's processor time follows the first's.
        let p = simulate(two_sends(10), &network).unwrap();
        assert_eq!(p.ranks[0].end_ns, 200);
        // In at 100 and 200; received 100..200 and 200..300.
        assert_eq!(p.ranks[1].end_ns, 300);
    }

    #[test]
    fn an_eager_sender_does_not_wait_for_a_late_receiver() {
        let mut a = RankProgram::new(0);
        a.send(1, CH, 10);
        let mut b = RankProgram::new(1);
        b.compute(5000);
        b.recv(0, CH);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert_eq!(p.ranks[0].end_ns, 100);
        // Arrived at 1109, posted at 5000: complete at 5100.
        assert_eq!(p.ranks[1].end_ns, 5100);
    }

    #[test]
    fn back_to_back_sends_queue_for_the_interface() {
        // g + (s-1)G = 50 + 100 = 150 per message: the second leaves at 150, not at 100.
        let p = simulate(two_sends(101), &net()).unwrap();
        // Second message: leaves at 150, arrives 150 + 1200 = 1350, received at 1450.
        assert_eq!(p.ranks[1].end_ns, 1450);
        assert_eq!(p.ranks[0].end_ns, 250);
    }

    #[test]
    fn ranks_on_two_nodes_share_their_interface() {
        let mut network = net();
        network.ranks_per_node = 2;
        // Ranks 0 and 1 (node 0) both send to ranks 2 and 3 (node 1) at 0: the second message
        // to cross waits for the node's interface (150 ns) on both sides.
        let mut progs = vec![];
        for r in 0..2 {
            let mut p = RankProgram::new(r);
            p.send(r + 2, CH, 101);
            progs.push(p);
        }
        for r in 2..4 {
            let mut p = RankProgram::new(r);
            p.recv(r - 2, CH);
            progs.push(p);
        }
        let p = simulate(progs, &network).unwrap();
        let mut ends: Vec<u64> = p.ranks[2..].iter().map(|r| r.end_ns).collect();
        ends.sort();
        assert_eq!(ends, vec![1300, 1450]);
    }

    #[test]
    fn messages_of_one_channel_do_not_overtake() {
        let mut a = RankProgram::new(0);
        a.send(1, CH, 5000); // rendezvous
        a.send(1, CH, 10); // eager, would arrive first
        let mut b = RankProgram::new(1);
        let r1 = b.irecv(0, CH);
        b.wait(&[r1]);
        let r2 = b.irecv(0, CH);
        b.wait(&[r2]);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert!(p.unfinished.is_empty());
    }

    #[test]
    fn a_missing_sender_is_reported_not_hung() {
        let mut a = RankProgram::new(0);
        a.recv(1, CH);
        let b = RankProgram::new(1);
        let p = simulate(vec![a, b], &net()).unwrap();
        assert_eq!(p.unfinished.len(), 1);
        assert_eq!(p.unfinished[0].rank, 0);
        assert_eq!(p.unfinished[0].waiting_for, "a message from rank 1");
    }

    #[test]
    fn the_first_message_between_two_ranks_connects_them() {
        let mut network = net();
        network.intra.connect_ns = 10_000.0;
        network.intra.connect_crossing_ns = Some(500.0);
        // As in the eager ping-pong by hand, but the first send starts at C = 10 000 (rank 1
        // waits for rank 0 before it sends: not Cx) and the reply, on the same connection,
        // pays nothing more.
        let mut a = RankProgram::new(0);
        a.send(1, CH, 101);
        a.recv(1, CH);
        let mut b = RankProgram::new(1);
        b.recv(0, CH);
        b.send(0, CH, 101);
        let p = simulate(vec![a, b], &network).unwrap();
        assert_eq!(p.ranks[0].end_ns, 12_600);
        assert_eq!(p.ranks[1].end_ns, 11_400);
    }

    #[test]
    fn an_exchange_connects_at_the_crossing_cost() {
        let mut network = net();
        network.intra.connect_ns = 10_000.0;
        network.intra.connect_crossing_ns = Some(500.0);
        // Both ranks send 101 bytes to each other at 0. Rank 0's send goes first and connects
        // the pair at Cx = 500: busy until 600, its data in at 500 + 1200 = 1700, where rank 1
        // completes at 1800. Rank 1's send, connected already, arrives at 1200: rank 0 done at
        // 1300.
        let exchange = |rank: u32| {
            let mut p = RankProgram::new(rank);
            p.sendrecv(1 - rank, 101, 1 - rank, CH);
            p
        };
        let p = simulate(vec![exchange(0), exchange(1)], &network).unwrap();
        assert_eq!(p.ranks[0].end_ns, 1300);
        assert_eq!(p.ranks[1].end_ns, 1800);
        // Without Cx the exchange pays C.
        network.intra.connect_crossing_ns = None;
        let p = simulate(vec![exchange(0), exchange(1)], &network).unwrap();
        assert_eq!(p.ranks[1].end_ns, 11_300);
    }

    #[test]
    fn a_rank_that_waits_before_it_sends_does_not_ask_to_connect() {
        let mut a = RankProgram::new(0);
        let r = a.irecv(1, CH);
        a.isend(2, CH, 8);
        a.wait(&[r]);
        a.send(1, CH, 8);
        let first: Vec<u32> = sends_first(&a).into_iter().collect();
        assert_eq!(first, [2]);
    }

    #[test]
    fn sparse_request_ids_replay_as_dense_ones() {
        let ping = |far: ReqId| {
            let mut a = RankProgram::new(0);
            a.ops.push(Op::Isend {
                req: far,
                to: 1,
                channel: CH,
                bytes: 101,
            });
            a.ops.push(Op::Wait(vec![far]));
            a.ops.push(Op::Irecv {
                req: 7,
                from: 1,
                channel: CH,
            });
            a.ops.push(Op::Wait(vec![7]));
            let mut b = RankProgram::new(1);
            b.recv(0, CH);
            b.send(0, CH, 101);
            simulate(vec![a, b], &net()).unwrap()
        };
        let (dense, sparse) = (ping(3), ping(4_000_000_000));
        assert_eq!(dense.ranks, sparse.ranks);
        assert_eq!(sparse.ranks[0].end_ns, 2600);
    }

    #[test]
    fn a_long_run_keeps_no_queues_for_past_collectives() {
        let mut progs: Vec<RankProgram> = (0..2).map(RankProgram::new).collect();
        for seq in 0..1000 {
            let ch = Channel::Collective { comm: 0, seq };
            progs[0].send(1, ch, 8);
            progs[1].recv(0, ch);
        }
        let mut sim = Sim::new(progs, net()).unwrap();
        for lp in 0..2 {
            sim.at(0, Ev::Step(lp));
        }
        while let Some(Reverse((now, _, slot))) = sim.queue.pop() {
            let ev = sim.slots[slot].take().unwrap();
            sim.free_slots.push(slot);
            sim.dispatch(now, ev);
        }
        assert!(sim.lps.iter().all(|l| l.queues.is_empty()));
        assert_eq!(sim.lps[1].pc, 2000);
    }

    #[test]
    fn bad_programs_are_refused_before_the_replay() {
        let mut a = RankProgram::new(0);
        a.send(7, CH, 1);
        assert_eq!(
            simulate(vec![a], &net()),
            Err(SimError::UnknownPeer { rank: 0, peer: 7 })
        );
        let mut a = RankProgram::new(0);
        a.ops.push(Op::Wait(vec![3]));
        assert_eq!(
            simulate(vec![a], &net()),
            Err(SimError::UnknownRequest { rank: 0, req: 3 })
        );
        assert_eq!(
            simulate(vec![RankProgram::new(1), RankProgram::new(1)], &net()),
            Err(SimError::DuplicateRank(1))
        );
    }
}
