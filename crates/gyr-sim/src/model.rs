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
//!   to send back once the receive is posted, then the data);
//! - and `C`, not LogGOPS's: the connection a transport makes on first use (Open MPI's `tcp`
//!   connects two ranks when the first message between them is sent), paid by that message's
//!   sender once per pair of ranks. Its cost depends on the receiver: one that is not sending
//!   to the sender hears of the connection only when it next polls for events (Open MPI polls
//!   every 10 ms while nothing of its own waits on them), while two ranks that each send to
//!   the other first (an exchange, a collective) connect in a few round trips, `Cx`.
//!
//! Sending `s` bytes at time `t` keeps the sender's processor busy until `t + o + (s-1)·O`, its
//! interface until `t + g + (s-1)·G`, and the data arrives at `t + o + (s-1)·G + L`; the
//! receiver pays `o + (s-1)·O` once the data is there, the receive posted and its processor
//! free. One processor does one message's work at a time, so a rank's sends and receives queue
//! for it: an `MPI_Sendrecv` pays its send's time, then its receive's. (On loopback TCP the
//! kernel does part of that work on the other core, so the truth for a tight exchange sits
//! between this and full overlap; for programs that compute between exchanges it is close.)
//!
//! A line fits a real transport badly where it switches buffers or protocols (loopback TCP's
//! half round trip more than doubles from 16 to 32 KiB on a typical machine). So a calibrated
//! path also keeps the sizes it measured (as PLogP, Kielmann et al.'s parameterised LogP, makes
//! its overhead and latency functions of the size): between them, a message's processor time
//! and flight are interpolated from the nearest measured sizes of its protocol, and the line
//! is used only beyond them.

use serde::{Deserialize, Serialize};

/// One message size the calibration measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizePoint {
    /// Message size.
    pub bytes: u64,
    /// The sending call's time (for an eager size: the sender's processor time).
    pub send_ns: f64,
    /// Half a ping-pong's round trip: from the send's start to the receive's end.
    pub half_round_trip_ns: f64,
}

/// LogGOPS parameters of one kind of path (shared memory inside a node, or the network).
/// Times in nanoseconds, per-byte costs in nanoseconds per byte.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// `C`: what the first message between two ranks costs its sender on top, ns.
    #[serde(rename = "C", default)]
    pub connect_ns: f64,
    /// `Cx`: the same when both ranks send to each other before either waits for the other
    /// (their connections cross, each side answering at once), ns; `C` when not given.
    #[serde(rename = "Cx", default, skip_serializing_if = "Option::is_none")]
    pub connect_crossing_ns: Option<f64>,
    /// The sizes the calibration measured, by size (empty: the line alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<SizePoint>,
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
        connect_ns: 0.0,
        connect_crossing_ns: None,
        measured: Vec::new(),
    };

    /// Open MPI over loopback TCP, roughly (see [`LogGops::SHARED_MEMORY`]).
    pub const TCP_LOOPBACK: LogGops = LogGops {
        latency: 10_000.0,
        o: 2_000.0,
        g: 1_000.0,
        gap_per_byte: 0.4,
        overhead_per_byte: 0.1,
        eager_limit: 65_536 - crate::calibrate::OB1_HEADER,
        connect_ns: 0.0,
        connect_crossing_ns: None,
        measured: Vec::new(),
    };

    /// The checks a user's parameters must pass: finite and not negative.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("L", self.latency),
            ("o", self.o),
            ("g", self.g),
            ("G", self.gap_per_byte),
            ("O", self.overhead_per_byte),
            ("C", self.connect_ns),
            ("Cx", self.connect_crossing_ns.unwrap_or(0.0)),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "{name} = {v} is not a time: give a finite number of nanoseconds, 0 or more"
                ));
            }
        }
        for w in self.measured.windows(2) {
            if w[0].bytes >= w[1].bytes {
                return Err(format!(
                    "the measured sizes must grow: {} bytes comes before {}",
                    w[0].bytes, w[1].bytes
                ));
            }
        }
        for p in &self.measured {
            let time = |v: f64| v.is_finite() && v >= 0.0;
            if !(time(p.send_ns) && time(p.half_round_trip_ns)) {
                return Err(format!(
                    "the measured size {} bytes has a time that is not a finite number of \
                     nanoseconds, 0 or more",
                    p.bytes
                ));
            }
        }
        Ok(())
    }

    /// `o + (s-1)·O`: what a processor pays to send or receive `bytes`; with measured sizes,
    /// the eager sizes' send time (a rendezvous's processor time is its eager part's, and `O`
    /// per byte beyond).
    pub(crate) fn cpu(&self, bytes: u64) -> u64 {
        let eager = self.eager_points();
        if eager.is_empty() {
            return ns(self.o + extra_bytes(bytes) * self.overhead_per_byte);
        }
        let s = bytes.min(self.eager_limit);
        let t = interpolate(eager, s, |p| p.send_ns, self.overhead_per_byte);
        ns(t + bytes.saturating_sub(s) as f64 * self.overhead_per_byte)
    }

    /// The measured sizes sent eagerly, and those sent by rendezvous.
    fn eager_points(&self) -> &[SizePoint] {
        let split = self
            .measured
            .partition_point(|p| p.bytes <= self.eager_limit);
        &self.measured[..split]
    }

    fn rendezvous_points(&self) -> &[SizePoint] {
        let split = self
            .measured
            .partition_point(|p| p.bytes <= self.eager_limit);
        &self.measured[split..]
    }

    /// The half round trip the measured sizes give for `bytes`, from those of its protocol.
    fn half_round_trip(&self, bytes: u64) -> Option<f64> {
        let per_byte = self.gap_per_byte + self.overhead_per_byte;
        if self.rendezvous(bytes) {
            let rdv = self.rendezvous_points();
            if !rdv.is_empty() {
                return Some(interpolate(rdv, bytes, |p| p.half_round_trip_ns, per_byte));
            }
            // No rendezvous size measured: the eager line and the handshake's two messages.
            let eager = self.eager_points();
            return (!eager.is_empty()).then(|| {
                interpolate(eager, bytes, |p| p.half_round_trip_ns, per_byte)
                    + 2.0 * (self.o + self.latency)
            });
        }
        let eager = self.eager_points();
        (!eager.is_empty()).then(|| interpolate(eager, bytes, |p| p.half_round_trip_ns, per_byte))
    }

    /// `g + (s-1)·G`: how long the interface is busy with `bytes`.
    pub(crate) fn interface(&self, bytes: u64) -> u64 {
        ns(self.g.max(0.0) + extra_bytes(bytes) * self.gap_per_byte)
    }

    /// `o + (s-1)·G + L`: from the start of a send to the data's arrival; with measured
    /// sizes, what the half round trip leaves once the receiver's processor time (and, for a
    /// rendezvous, the request and the clear to send) is taken out.
    pub(crate) fn flight(&self, bytes: u64) -> u64 {
        match self.half_round_trip(bytes) {
            Some(h) => {
                let handshake = if self.rendezvous(bytes) {
                    2 * self.control()
                } else {
                    0
                };
                ns(h).saturating_sub(self.cpu(bytes) + handshake)
            }
            None => ns(self.o + extra_bytes(bytes) * self.gap_per_byte + self.latency),
        }
    }

    /// `C`, or `Cx` when `crossing`: the first message between two ranks' extra cost.
    pub(crate) fn connect(&self, crossing: bool) -> u64 {
        match self.connect_crossing_ns {
            Some(c) if crossing => ns(c),
            _ => ns(self.connect_ns),
        }
    }

    /// `o + L`: a control message (a rendezvous's request or clear to send).
    pub(crate) fn control(&self) -> u64 {
        ns(self.o + self.latency)
    }

    pub(crate) fn rendezvous(&self, bytes: u64) -> bool {
        bytes > self.eager_limit
    }
}

/// `value` at `bytes` from `points` (sorted, not empty): linear between the two measured sizes
/// around it, the nearest one's plus `per_byte` beyond the largest, the smallest's below it.
fn interpolate(
    points: &[SizePoint],
    bytes: u64,
    value: impl Fn(&SizePoint) -> f64,
    per_byte: f64,
) -> f64 {
    let i = points.partition_point(|p| p.bytes < bytes);
    if i == points.len() {
        let last = &points[i - 1];
        return value(last) + (bytes - last.bytes) as f64 * per_byte;
    }
    let hi = &points[i];
    if i == 0 || hi.bytes == bytes {
        return value(hi);
    }
    let lo = &points[i - 1];
    let f = (bytes - lo.bytes) as f64 / (hi.bytes - lo.bytes) as f64;
    value(lo) + f * (value(hi) - value(lo))
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            intra: path.clone(),
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
            connect_ns: 0.0,
            connect_crossing_ns: None,
            measured: Vec::new(),
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

    fn measured_path() -> LogGops {
        let point = |bytes, send_ns, half_round_trip_ns| SizePoint {
            bytes,
            send_ns,
            half_round_trip_ns,
        };
        LogGops {
            latency: 1000.0,
            o: 100.0,
            g: 50.0,
            gap_per_byte: 1.0,
            overhead_per_byte: 0.5,
            eager_limit: 1000,
            connect_ns: 0.0,
            connect_crossing_ns: None,
            // A step between 100 and 500 bytes no line fits, and a rendezvous at 4000.
            measured: vec![
                point(1, 100.0, 1200.0),
                point(100, 110.0, 1300.0),
                point(500, 400.0, 3000.0),
                point(4000, 9000.0, 20_000.0),
            ],
        }
    }

    #[test]
    fn measured_sizes_give_their_half_round_trip_back() {
        let p = measured_path();
        // Eager: the data's flight and the receiver's processor time.
        for m in &p.measured[..3] {
            assert_eq!(p.flight(m.bytes) + p.cpu(m.bytes), ns(m.half_round_trip_ns));
            assert_eq!(p.cpu(m.bytes), ns(m.send_ns));
        }
        // Rendezvous: the request and the clear to send as well.
        assert_eq!(
            2 * p.control() + p.flight(4000) + p.cpu(4000),
            20_000,
            "{p:?}"
        );
        // Between two sizes, linear; beyond the largest, the line's slope.
        assert_eq!(p.flight(300) + p.cpu(300), 2150);
        assert_eq!(p.cpu(300), 255);
        assert_eq!(
            2 * p.control() + p.flight(5000) + p.cpu(5000),
            20_000 + 1500
        );
        // The line alone where nothing was measured.
        let mut line = p.clone();
        line.measured.clear();
        assert_eq!(line.flight(101), 100 + 100 + 1000);
    }

    #[test]
    fn measured_sizes_must_grow() {
        let mut p = measured_path();
        p.measured.swap(1, 2);
        assert!(p.validate().unwrap_err().contains("must grow"));
        let mut p = measured_path();
        p.measured[0].send_ns = f64::NAN;
        assert!(p.validate().is_err());
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
