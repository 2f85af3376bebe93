//! Collectives expanded into the point-to-point messages of the algorithms MPI libraries use,
//! as MPI-SIM implements each collective "in terms of the core communication commands".
//!
//! The choices follow Open MPI's defaults closely enough for prediction, not exactly (its
//! `tuned` component switches algorithms at thresholds that depend on the version):
//!
//! | collective | algorithm | messages of |
//! |---|---|---|
//! | barrier (and communicator creation) | dissemination, ⌈log₂ p⌉ rounds | 0 bytes |
//! | bcast | binomial tree from the root | the root's buffer |
//! | reduce | binomial tree to the root | each rank's buffer |
//! | allreduce | recursive doubling (p a power of two, buffer < 64 KiB); ring otherwise for p a power of two; reduce then bcast for other p | buffer; buffer / p in the ring |
//! | gather, scatter | linear, at the root | a rank's block |
//! | allgather | ring, p − 1 steps | a rank's block |
//! | alltoall | pairwise exchange, p − 1 steps | buffer / p |
//! | reduce-scatter | reduce to the first member, then scatter | buffer, then buffer / p |
//! | scan, exscan | linear chain | buffer |

use crate::program::{Channel, RankProgram};

/// Which collective (the MPI call's name, without `MPI_` and case-insensitive, maps onto one
/// with [`Collective::from_call`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    /// `MPI_Barrier`, and what synchronises like it (communicator creation).
    Barrier,
    /// `MPI_Bcast`.
    Bcast,
    /// `MPI_Reduce`.
    Reduce,
    /// `MPI_Allreduce`.
    Allreduce,
    /// `MPI_Gather(v)`.
    Gather,
    /// `MPI_Scatter(v)`.
    Scatter,
    /// `MPI_Allgather(v)`.
    Allgather,
    /// `MPI_Alltoall(v,w)`.
    Alltoall,
    /// `MPI_Reduce_scatter(_block)`.
    ReduceScatter,
    /// `MPI_Scan`, `MPI_Exscan`.
    Scan,
}

impl Collective {
    /// The collective an MPI call performs (`"MPI_Allreduce"`, `"allreduce"`, `"MPI_Iallreduce"`
    /// all give [`Collective::Allreduce`]); communicator constructors synchronise like a
    /// barrier; `None` for calls that are not collectives.
    pub fn from_call(name: &str) -> Option<Collective> {
        let lower = name.to_ascii_lowercase();
        let mut n = lower.strip_prefix("mpi_").unwrap_or(&lower);
        // Nonblocking collectives are replayed as their blocking form at the call.
        if n.starts_with('i') && !n.starts_with("intercomm") {
            n = &n[1..];
        }
        let n = n.trim_end_matches('_'); // Fortran names
        Some(match n {
            "barrier" | "comm_split" | "comm_dup" | "comm_create" | "cart_create"
            | "comm_split_type" | "comm_create_group" | "graph_create" | "dist_graph_create" => {
                Collective::Barrier
            }
            "bcast" => Collective::Bcast,
            "reduce" => Collective::Reduce,
            "allreduce" => Collective::Allreduce,
            "gather" | "gatherv" => Collective::Gather,
            "scatter" | "scatterv" => Collective::Scatter,
            "allgather" | "allgatherv" => Collective::Allgather,
            "alltoall" | "alltoallv" | "alltoallw" => Collective::Alltoall,
            "reduce_scatter" | "reduce_scatter_block" => Collective::ReduceScatter,
            "scan" | "exscan" => Collective::Scan,
            _ => return None,
        })
    }
}

/// One rank's part in a collective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Part<'a> {
    /// The collective.
    pub kind: Collective,
    /// Its communicator's id.
    pub comm: u64,
    /// The communicator's members, as world ranks, in communicator rank order.
    pub members: &'a [u32],
    /// The root, as a world rank (rooted collectives; ignored by the others).
    pub root: u32,
    /// How many collectives this communicator ran before this one.
    pub seq: u64,
    /// Bytes this rank sent into the collective (its buffer; for gathers, its block).
    pub sent: u64,
    /// Bytes this rank received from it.
    pub received: u64,
}

/// Why a collective cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollectiveError {
    /// The rank is not among the communicator's members.
    #[error("rank {rank} ran a collective on a communicator it is not a member of")]
    NotAMember {
        /// The rank.
        rank: u32,
    },
    /// The root is not among the members.
    #[error("root {root} is not a member of the communicator")]
    RootNotAMember {
        /// The root.
        root: u32,
    },
}

/// Appends `p`'s messages for `prog`'s rank to `prog`.
pub fn expand(prog: &mut RankProgram, p: &Part<'_>) -> Result<(), CollectiveError> {
    let members = p.members;
    let size = members.len() as u64;
    let me = members
        .iter()
        .position(|&m| m == prog.rank)
        .ok_or(CollectiveError::NotAMember { rank: prog.rank })? as u64;
    if size <= 1 {
        return Ok(());
    }
    let ch = Channel::Collective {
        comm: p.comm,
        seq: p.seq,
    };
    let root = || {
        members
            .iter()
            .position(|&m| m == p.root)
            .map(|r| r as u64)
            .ok_or(CollectiveError::RootNotAMember { root: p.root })
    };
    let at = |i: u64| members[(i % size) as usize];
    let data = p.sent.max(p.received);
    match p.kind {
        Collective::Barrier => dissemination(prog, me, size, &at, ch),
        Collective::Bcast => binomial_bcast(prog, me, root()?, size, &at, ch, data),
        Collective::Reduce => binomial_reduce(prog, me, root()?, size, &at, ch, p.sent),
        Collective::Allreduce => {
            if size.is_power_of_two() && p.sent < 64 * 1024 {
                let mut mask = 1;
                while mask < size {
                    let peer = at(me ^ mask);
                    prog.sendrecv(peer, p.sent, peer, ch);
                    mask <<= 1;
                }
            } else if size.is_power_of_two() {
                ring(prog, me, size, &at, ch, p.sent / size, 2 * (size - 1));
            } else {
                binomial_reduce(prog, me, 0, size, &at, ch, p.sent);
                binomial_bcast(prog, me, 0, size, &at, ch, p.sent);
            }
        }
        Collective::Gather => {
            let root = root()?;
            if me == root {
                let reqs: Vec<_> = (0..size)
                    .filter(|&i| i != root)
                    .map(|i| prog.irecv(at(i), ch))
                    .collect();
                prog.wait(&reqs);
            } else {
                prog.send(at(root), ch, p.sent);
            }
        }
        Collective::Scatter => {
            let root = root()?;
            if me == root {
                let block = p.sent / size;
                let reqs: Vec<_> = (0..size)
                    .filter(|&i| i != root)
                    .map(|i| prog.isend(at(i), ch, block))
                    .collect();
                prog.wait(&reqs);
            } else {
                prog.recv(at(root), ch);
            }
        }
        Collective::Allgather => ring(prog, me, size, &at, ch, p.sent, size - 1),
        Collective::Alltoall => {
            let block = p.sent / size;
            for k in 1..size {
                prog.sendrecv(at(me + k), block, at(me + size - k), ch);
            }
        }
        Collective::ReduceScatter => {
            binomial_reduce(prog, me, 0, size, &at, ch, p.sent);
            let block = p.sent / size;
            if me == 0 {
                let reqs: Vec<_> = (1..size).map(|i| prog.isend(at(i), ch, block)).collect();
                prog.wait(&reqs);
            } else {
                prog.recv(at(0), ch);
            }
        }
        Collective::Scan => {
            if me > 0 {
                prog.recv(at(me - 1), ch);
            }
            if me + 1 < size {
                prog.send(at(me + 1), ch, p.sent);
            }
        }
    }
    Ok(())
}

/// ⌈log₂ p⌉ rounds; in round k every rank sends to the rank 2ᵏ ahead and hears from the one
/// 2ᵏ behind.
fn dissemination(prog: &mut RankProgram, me: u64, size: u64, at: &dyn Fn(u64) -> u32, ch: Channel) {
    let mut dist = 1;
    while dist < size {
        prog.sendrecv(at(me + dist), 0, at(me + size - dist), ch);
        dist <<= 1;
    }
}

/// The root's data down a binomial tree: a rank receives from the rank that differs in its
/// lowest set bit (relative to the root), then forwards to the ranks below that bit.
fn binomial_bcast(
    prog: &mut RankProgram,
    me: u64,
    root: u64,
    size: u64,
    at: &dyn Fn(u64) -> u32,
    ch: Channel,
    bytes: u64,
) {
    let vr = (me + size - root) % size;
    let mut mask = 1;
    while mask < size {
        if vr & mask != 0 {
            prog.recv(at(vr - mask + root), ch);
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < size {
            prog.send(at(vr + mask + root), ch, bytes);
        }
        mask >>= 1;
    }
}

/// Up a binomial tree: a rank hears from its children, lowest bit first, then sends to its
/// parent.
fn binomial_reduce(
    prog: &mut RankProgram,
    me: u64,
    root: u64,
    size: u64,
    at: &dyn Fn(u64) -> u32,
    ch: Channel,
    bytes: u64,
) {
    let vr = (me + size - root) % size;
    let mut mask = 1;
    while mask < size {
        if vr & mask == 0 {
            let child = vr | mask;
            if child < size {
                prog.recv(at(child + root), ch);
            }
        } else {
            prog.send(at(vr - mask + root), ch, bytes);
            break;
        }
        mask <<= 1;
    }
}

/// `steps` rounds of passing `bytes` to the right neighbour while hearing from the left.
fn ring(
    prog: &mut RankProgram,
    me: u64,
    size: u64,
    at: &dyn Fn(u64) -> u32,
    ch: Channel,
    bytes: u64,
    steps: u64,
) {
    for _ in 0..steps {
        prog.sendrecv(at(me + 1), bytes, at(me + size - 1), ch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Op;

    fn part(kind: Collective, members: &[u32], root: u32, bytes: u64) -> Part<'_> {
        Part {
            kind,
            comm: 0,
            members,
            root,
            seq: 0,
            sent: bytes,
            received: bytes,
        }
    }

    /// (sends to, receives from) of `rank`'s expansion.
    fn peers(rank: u32, p: &Part<'_>) -> (Vec<u32>, Vec<u32>) {
        let mut prog = RankProgram::new(rank);
        expand(&mut prog, p).unwrap();
        let mut to = vec![];
        let mut from = vec![];
        for op in &prog.ops {
            match op {
                Op::Isend { to: t, .. } => to.push(*t),
                Op::Irecv { from: f, .. } => from.push(*f),
                _ => {}
            }
        }
        (to, from)
    }

    #[test]
    fn names_map_onto_collectives() {
        assert_eq!(
            Collective::from_call("MPI_Allreduce"),
            Some(Collective::Allreduce)
        );
        assert_eq!(
            Collective::from_call("mpi_iallreduce_"),
            Some(Collective::Allreduce)
        );
        assert_eq!(
            Collective::from_call("MPI_Comm_split"),
            Some(Collective::Barrier)
        );
        assert_eq!(Collective::from_call("MPI_Send"), None);
        assert_eq!(Collective::from_call("MPI_Init"), None);
    }

    #[test]
    fn binomial_bcast_from_root_2_of_8() {
        let m: Vec<u32> = (0..8).collect();
        let p = part(Collective::Bcast, &m, 2, 100);
        // Relative to the root: 0 sends to 4, 2, 1; relative 6 hears from 4 and sends to 7.
        assert_eq!(peers(2, &p), (vec![6, 4, 3], vec![]));
        assert_eq!(peers(0, &p), (vec![1], vec![6]));
        assert_eq!(peers(1, &p), (vec![], vec![0]));
        // Every rank but the root receives exactly once.
        let mut received = 0;
        for r in 0..8 {
            received += peers(r, &p).1.len();
        }
        assert_eq!(received, 7);
    }

    #[test]
    fn every_send_of_a_collective_has_its_receive() {
        for size in 1..=9u32 {
            let m: Vec<u32> = (0..size).map(|r| r * 10).collect();
            for kind in [
                Collective::Barrier,
                Collective::Bcast,
                Collective::Reduce,
                Collective::Allreduce,
                Collective::Gather,
                Collective::Scatter,
                Collective::Allgather,
                Collective::Alltoall,
                Collective::ReduceScatter,
                Collective::Scan,
            ] {
                for bytes in [8, 1 << 20] {
                    let p = part(kind, &m, m[(size / 2) as usize], bytes);
                    let mut pairs = std::collections::HashMap::<(u32, u32), i64>::new();
                    for &r in &m {
                        let (to, from) = peers(r, &p);
                        for t in to {
                            *pairs.entry((r, t)).or_default() += 1;
                        }
                        for f in from {
                            *pairs.entry((f, r)).or_default() -= 1;
                        }
                    }
                    assert!(
                        pairs.values().all(|&n| n == 0),
                        "{kind:?} over {size} ranks, {bytes} bytes: {pairs:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_rank_outside_the_communicator_is_an_error() {
        let mut prog = RankProgram::new(5);
        let p = part(Collective::Barrier, &[0, 1], 0, 0);
        assert_eq!(
            expand(&mut prog, &p),
            Err(CollectiveError::NotAMember { rank: 5 })
        );
    }
}
