//! What one rank does, as the simulator replays it: compute gaps, nonblocking sends and
//! receives, waits, and the bounds of the program's calls (for the predicted timeline).
//!
//! Blocking calls are a nonblocking call and its wait, as MPI defines them; collectives are
//! expanded into point-to-point messages by [`crate::collective`].

/// A request of one rank (MPI-SIM's request list holds them until their wait).
pub type ReqId = u32;

/// What a message is matched on besides its source and destination. Messages of one channel
/// between two ranks are received in the order they were sent (MPI's non-overtaking rule);
/// collectives' own messages never match the program's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Channel {
    /// The program's messages on communicator `comm` with tag `tag`.
    User {
        /// Communicator id, the same on every member.
        comm: u64,
        /// The message's (actual) tag.
        tag: i32,
    },
    /// The messages of the `seq`-th collective on communicator `comm`.
    Collective {
        /// Communicator id.
        comm: u64,
        /// How many collectives this communicator ran before.
        seq: u64,
    },
}

/// One step of a rank's replay.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Computing (or anything outside message passing) for this many nanoseconds.
    Compute(u64),
    /// Start sending `bytes` to `to`; `req` completes when the send buffer may be reused.
    Isend {
        /// The request.
        req: ReqId,
        /// Destination (world rank).
        to: u32,
        /// Matched on.
        channel: Channel,
        /// Message size.
        bytes: u64,
    },
    /// Post a receive from `from`; `req` completes when the data is in place.
    Irecv {
        /// The request.
        req: ReqId,
        /// Source (world rank; traces name the actual source of wildcard receives).
        from: u32,
        /// Matched on.
        channel: Channel,
    },
    /// Wait until every request listed has completed.
    Wait(Vec<ReqId>),
    /// The program's call number `.0` (an index into [`RankProgram::calls`]) begins.
    Begin(u32),
    /// The program's call number `.0` ends.
    End(u32),
}

/// One rank's replay: its operations in program order and the names of its calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankProgram {
    /// The rank (in the job's world).
    pub rank: u32,
    /// Operations, in the order the rank performs them.
    pub ops: Vec<Op>,
    /// Each of the program's calls, indexed by [`Op::Begin`] and [`Op::End`]: its name's
    /// index in [`RankProgram::names`] (a trace of millions of calls has a few names).
    pub calls: Vec<u32>,
    /// The calls' names, each once.
    pub names: Vec<String>,
    name_ids: std::collections::HashMap<String, u32>,
    next_req: ReqId,
}

impl RankProgram {
    /// An empty program for `rank`.
    pub fn new(rank: u32) -> RankProgram {
        RankProgram {
            rank,
            ..RankProgram::default()
        }
    }

    /// Computes for `ns` nanoseconds (gaps of 0 are left out).
    pub fn compute(&mut self, ns: u64) {
        if ns > 0 {
            self.ops.push(Op::Compute(ns));
        }
    }

    /// Starts a send and returns its request.
    pub fn isend(&mut self, to: u32, channel: Channel, bytes: u64) -> ReqId {
        let req = self.new_req();
        self.ops.push(Op::Isend {
            req,
            to,
            channel,
            bytes,
        });
        req
    }

    /// Posts a receive and returns its request.
    pub fn irecv(&mut self, from: u32, channel: Channel) -> ReqId {
        let req = self.new_req();
        self.ops.push(Op::Irecv { req, from, channel });
        req
    }

    /// Waits for every request in `reqs` (none: nothing to wait for).
    pub fn wait(&mut self, reqs: &[ReqId]) {
        if !reqs.is_empty() {
            self.ops.push(Op::Wait(reqs.to_vec()));
        }
    }

    /// A blocking send.
    pub fn send(&mut self, to: u32, channel: Channel, bytes: u64) {
        let r = self.isend(to, channel, bytes);
        self.wait(&[r]);
    }

    /// A blocking receive.
    pub fn recv(&mut self, from: u32, channel: Channel) {
        let r = self.irecv(from, channel);
        self.wait(&[r]);
    }

    /// A send and a receive that proceed together (`MPI_Sendrecv`).
    pub fn sendrecv(&mut self, to: u32, bytes: u64, from: u32, channel: Channel) {
        let r = self.irecv(from, channel);
        let s = self.isend(to, channel, bytes);
        self.wait(&[r, s]);
    }

    /// Opens the program's call `name`; pass the number returned to [`RankProgram::end`].
    pub fn begin(&mut self, name: &str) -> u32 {
        let i = self.calls.len() as u32;
        let id = match self.name_ids.get(name) {
            Some(id) => *id,
            None => {
                let id = self.names.len() as u32;
                self.names.push(name.to_owned());
                self.name_ids.insert(name.to_owned(), id);
                id
            }
        };
        self.calls.push(id);
        self.ops.push(Op::Begin(i));
        i
    }

    /// Closes call `i`.
    pub fn end(&mut self, i: u32) {
        self.ops.push(Op::End(i));
    }

    fn new_req(&mut self) -> ReqId {
        let r = self.next_req;
        self.next_req += 1;
        r
    }
}
