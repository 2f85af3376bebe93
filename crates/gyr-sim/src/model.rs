//! The network model: LogGOPS parameters for one kind of path, and a network of nodes whose
//! ranks share a network interface.
//!
//! LogGOPS (Hoefler, Schneider and Lumsdaine's extension of LogP and LogGP) describes a message
//! of `s` bytes by:
//! - `L`: the latency of the wire, paid once per message;
//! - `o`: the processor's overhead to send or receive a message, and `O` per byte on top;
//! - `g`: the gap between two messages leaving (or entering) one network interface, and `G`
//!   per byte on top;
//! - `S`: the eager limit: a message above it is sent by rendezvous (a request to send, a clear
//!   to send back once the receive is posted, then the data).
//!
//! Sending `s` bytes at time `t` keeps the sender's processor busy until `t + o + (s-1)·O`, its
//! interface until `t + g + (s-1)·G`, and the data arrives at `t + o + (s-1)·G + L`; the
//! receiver pays `o + (s-1)·O` once the data is there and the receive posted.

use serde::{Deserialize, Serialize};

/// LogGOPS parameters of one kind of path (shared memory inside a node, or the network).
/// Times in nanoseconds, per-byte costs in nanoseconds per byte.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogGops {
    /// `L`: wire latency, ns.
    #[serde(rename = "L")]
    pub latency: f64,
    /// `o`: overhead per message on the sending and on the receiving processor, ns.
    pub o: f64,
    /// `g`: gap between messages at one network interface, ns.
    pub g: f64,
    /// `G`: gap per byte at the interface (the inverse of bandwidth), ns/byte.
    #[serde(rename = "G")]
    pub gap_per_byte: f64,
    /// `O`: processor overhead per byte (copies), ns/byte.
    #[serde(rename = "O")]
    pub overhead_per_byte: f64,
    /// `S`: messages of more bytes than this go by rendezvous.
    #[serde(rename = "S")]
    pub eager_limit: u64,
}

impl LogGops {
    /// Open MPI's shared-memory path on a current x86 server, roughly: a starting point that
    /// `gyr sim calibrate` replaces with this machine's figures.
    pub const SHARED_MEMORY: LogGops = LogGops {
        latency: 300.0,
        o: 200.0,
        g: 100.0,
        gap_per_byte: 0.1,
        overhead_per_byte: 0.05,
        eager_limit: 4096 - crate::calibrate::OB1_HEADER,
    };

    /// Open MPI over loopback TCP, roughly (see [`LogGops::SHARED_MEMORY`]).
    pub const TCP_LOOPBACK: LogGops = LogGops {
        latency: 10_000.0,
        o: 2_000.0,
        g: 1_000.0,
        gap_per_byte: 0.4,
        overhead_per_byte: 0.1,
        eager_limit: 65_536 - crate::calibrate::OB1_HEADER,
    };

    /// The checks a user's parameters must pass: finite and not negative.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("L", self.latency),
            ("o", self.o),
            ("g", self.g),
            ("G", self.gap_per_byte),
            ("O", self.overhead_per_byte),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "{name} = {v} is not a time: give a finite number of nanoseconds, 0 or more"
                ));
            }
        }
        Ok(())
    }

    /// `o + (s-1)·O`: what a processor pays to send or receive `bytes`.
    pub(crate) fn cpu(&self, bytes: u64) -> u64 {
        ns(self.o + extra_bytes(bytes) * self.overhead_per_byte)
    }

    /// `g + (s-1)·G`: how long the interface is busy with `bytes`.
    pub(crate) fn interface(&self, bytes: u64) -> u64 {
        ns(self.g.max(0.0) + extra_bytes(bytes) * self.gap_per_byte)
    }

    /// `o + (s-1)·G + L`: from the start of a send to the data's arrival.
    pub(crate) fn flight(&self, bytes: u64) -> u64 {
        ns(self.o + extra_bytes(bytes) * self.gap_per_byte + self.latency)
    }

    /// `o + L`: a control message (a rendezvous's request or clear to send).
    pub(crate) fn control(&self) -> u64 {
        ns(self.o + self.latency)
    }

    pub(crate) fn rendezvous(&self, bytes: u64) -> bool {
        bytes > self.eager_limit
    }
}

fn extra_bytes(bytes: u64) -> f64 {
    bytes.saturating_sub(1) as f64
}

/// Nanoseconds, rounded; negative or not-a-number values (which validation refuses) become 0.
fn ns(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round().min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// The machine a run is predicted on: nodes of `ranks_per_node` ranks (consecutive world ranks
/// share a node, as `mpirun` places them by default), shared memory inside a node, the network
/// between nodes, one network interface per node that its ranks' messages queue for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Paths between ranks of one node.
    pub intra: LogGops,
    /// Paths between nodes.
    pub inter: LogGops,
    /// Ranks per node; 0 means every rank on one node.
    pub ranks_per_node: u32,
}

impl Network {
    /// One node: every message goes through `path`, and ranks queue for nothing but their own
    /// processor and interface.
    pub fn single(path: LogGops) -> Network {
        Network {
            intra: path,
            inter: path,
            ranks_per_node: 0,
        }
    }

    /// The node of `rank`.
    pub fn node(&self, rank: u32) -> u32 {
        rank.checked_div(self.ranks_per_node).unwrap_or(0)
    }

    /// The path between two ranks.
    pub fn path(&self, a: u32, b: u32) -> &LogGops {
        if self.node(a) == self.node(b) {
            &self.intra
        } else {
            &self.inter
        }
    }

    /// Checks both paths (see [`LogGops::validate`]).
    pub fn validate(&self) -> Result<(), String> {
        self.intra
            .validate()
            .map_err(|e| format!("intra-node path: {e}"))?;
        self.inter
            .validate()
            .map_err(|e| format!("inter-node path: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_loggops() {
        let p = LogGops {
            latency: 1000.0,
            o: 100.0,
            g: 50.0,
            gap_per_byte: 2.0,
            overhead_per_byte: 0.5,
            eager_limit: 10,
        };
        assert_eq!(p.cpu(1), 100);
        assert_eq!(p.cpu(11), 105);
        assert_eq!(p.interface(11), 70);
        assert_eq!(p.flight(11), 1120);
        assert_eq!(p.control(), 1100);
        assert!(!p.rendezvous(10));
        assert!(p.rendezvous(11));
        assert_eq!(
            p.cpu(0),
            100,
            "an empty message costs what a one-byte one does"
        );
    }

    #[test]
    fn nodes_group_consecutive_ranks() {
        let mut n = Network::single(LogGops::SHARED_MEMORY);
        assert_eq!(n.node(7), 0);
        n.ranks_per_node = 2;
        n.inter = LogGops::TCP_LOOPBACK;
        assert_eq!(n.node(3), 1);
        assert_eq!(n.path(2, 3), &LogGops::SHARED_MEMORY);
        assert_eq!(n.path(1, 2), &LogGops::TCP_LOOPBACK);
    }

    #[test]
    fn bad_parameters_are_refused_with_their_name() {
        let mut p = LogGops::SHARED_MEMORY;
        p.gap_per_byte = -1.0;
        assert!(p.validate().unwrap_err().starts_with("G = -1"));
        p.gap_per_byte = f64::NAN;
        assert!(p.validate().is_err());
    }
}
