//! LogGOPS parameters fitted to measurements: half round trips and send-call times of a
//! ping-pong over message sizes, and the per-message time of a stream of back-to-back sends.
//!
//! [`PROGRAM`] is the MPI program that measures them (`gyr sim calibrate` compiles it with
//! `mpicc` and runs it with `mpirun`); [`parse`] reads what it prints and [`fit`] derives:
//! - `o`: the median send-call time of messages up to 64 bytes (an eager send returns once
//!   the data is copied out);
//! - `L`: the one-byte half round trip minus the two overheads, `h(1) − 2o`;
//! - `S`: the eager limit: with the limit `ompi_info` gives for the transport, that limit less
//!   the header Open MPI's `ob1` sends with it ([`OB1_HEADER`]); else the last size before the
//!   half round trip jumps above the small messages' trend by more than a control message
//!   costs (a rendezvous's extra round trip);
//! - `G + O`: the slope of the half round trip over large messages (slopes are Theil–Sen
//!   estimates: medians of the slopes between every two sizes, robust to a noisy size); `O` the slope of the send
//!   call's time over eager sizes, `G` the rest;
//! - `g`: the stream's per-message time for one-byte messages;
//! - `C`: the first round trip between the two ranks less the second: what a transport that
//!   connects on first use (Open MPI's `tcp`) costs the first message between two ranks;
//! - `Cx`: the same for a first exchange, both ranks sending at once. A pair connects once
//!   per job, so each is measured in jobs of their own too, and the median taken: one
//!   connection that meets a busy machine, or an event poll just due, does not set it.

use crate::model::{LogGops, SizePoint};
use serde::Serialize;

/// The measuring program's C source.
pub const PROGRAM: &str = include_str!("calibrate.c");

/// One size of the ping-pong.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PingPong {
    /// Message size.
    pub bytes: u64,
    /// Half the round trip, ns (median).
    pub half_round_trip_ns: f64,
    /// Time inside the send call, ns (median).
    pub send_ns: f64,
}

/// One size of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stream {
    /// Message size.
    pub bytes: u64,
    /// Time per message, ns (median).
    pub per_message_ns: f64,
}

/// What the measuring program printed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measurements {
    /// Ping-pong, by size.
    pub ping_pong: Vec<PingPong>,
    /// Stream, by size.
    pub stream: Vec<Stream>,
    /// The first message's extra time, ns, once per job (a connection is made once).
    pub connect_ns: Vec<f64>,
    /// The same when both ranks send first, ns.
    pub connect_crossing_ns: Vec<f64>,
}

/// Reads the measuring program's output; lines it does not know are errors, with their number.
pub fn parse(text: &str) -> Result<Measurements, String> {
    let mut m = Measurements::default();
    for (i, line) in text.lines().enumerate() {
        let bad = || format!("line {}: cannot read `{line}`", i + 1);
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |k: usize| -> Result<f64, String> {
            f.get(k)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(bad)
        };
        match f.first() {
            None => {}
            Some(&"pingpong") if f.len() == 4 => m.ping_pong.push(PingPong {
                bytes: num(1)? as u64,
                half_round_trip_ns: num(2)?,
                send_ns: num(3)?,
            }),
            Some(&"stream") if f.len() == 3 => m.stream.push(Stream {
                bytes: num(1)? as u64,
                per_message_ns: num(2)?,
            }),
            Some(&"connect") if f.len() == 2 => m.connect_ns.push(num(1)?),
            Some(&"connect_crossing") if f.len() == 2 => m.connect_crossing_ns.push(num(1)?),
            _ => return Err(bad()),
        }
    }
    Ok(m)
}

/// Slope of `y` over `x` by Theil and Sen's estimator (the median of the slopes between every
/// two points), so that one size measured while the machine was busy does not tilt the fit;
/// 0 with fewer than two distinct `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let mut slopes = Vec::new();
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    median(slopes).unwrap_or(0.0)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The bytes of its own header Open MPI's `ob1` counts against a transport's eager limit
/// (the size of its largest header): a message is sent eagerly when its payload is at most
/// `btl_*_eager_limit` less this. Measured with Open MPI 4.1 on x86-64, over `tcp` (a 65 480-byte
/// message returns from `MPI_Send` before its receive is posted, a 65 488-byte one waits for
/// it) and over `vader` (4 040 and 4 048 bytes).
pub const OB1_HEADER: u64 = 56;

/// Fits LogGOPS to `m`; `eager_limit` when the MPI library says it (the transport's, header
/// included: see [`OB1_HEADER`]; else it is found in the data). Fails when the measurements
/// are too few to fit.
pub fn fit(m: &Measurements, eager_limit: Option<u64>) -> Result<LogGops, String> {
    let mut pp = m.ping_pong.clone();
    pp.sort_by_key(|p| p.bytes);
    pp.dedup_by_key(|p| p.bytes);
    if pp.len() < 4 {
        return Err(format!(
            "{} ping-pong sizes measured; at least 4 are needed",
            pp.len()
        ));
    }
    let o = median(
        pp.iter()
            .filter(|p| p.bytes <= 64)
            .map(|p| p.send_ns)
            .collect(),
    )
    .unwrap_or(pp[0].send_ns);
    let h1 = pp[0].half_round_trip_ns;
    let latency = (h1 - 2.0 * o).max(0.0);
    // The small messages' trend, to find the rendezvous's jump.
    let small: Vec<(f64, f64)> = pp
        .iter()
        .filter(|p| p.bytes <= 1024)
        .map(|p| (p.bytes as f64, p.half_round_trip_ns))
        .collect();
    let trend = slope(&small).max(0.0);
    // The sizes measured are powers of two, too coarse to place the limit: the library's
    // figure wins when there is one.
    let jump = pp
        .windows(2)
        .find(|w| {
            let expected = w[0].half_round_trip_ns + trend * (w[1].bytes - w[0].bytes) as f64;
            w[1].half_round_trip_ns - expected > o + latency
        })
        .map(|w| w[0].bytes);
    let largest = pp.last().map(|p| p.bytes).unwrap_or(0);
    let eager_limit = match (eager_limit, jump) {
        (Some(given), _) => given.saturating_sub(OB1_HEADER),
        (None, Some(j)) => j,
        (None, None) => largest,
    };
    let large_from = (eager_limit * 2).max(64 * 1024);
    let mut large: Vec<(f64, f64)> = pp
        .iter()
        .filter(|p| p.bytes >= large_from)
        .map(|p| (p.bytes as f64, p.half_round_trip_ns))
        .collect();
    if large.len() < 2 {
        large = pp
            .iter()
            .filter(|p| p.bytes >= 1024)
            .map(|p| (p.bytes as f64, p.half_round_trip_ns))
            .collect();
    }
    let per_byte = slope(&large).max(0.0);
    let eager: Vec<(f64, f64)> = pp
        .iter()
        .filter(|p| p.bytes >= 64 && p.bytes <= eager_limit)
        .map(|p| (p.bytes as f64, p.send_ns))
        .collect();
    let overhead_per_byte = slope(&eager).clamp(0.0, per_byte);
    let gap = m
        .stream
        .iter()
        .min_by_key(|s| s.bytes)
        .map(|s| s.per_message_ns)
        .unwrap_or(o);
    let model = LogGops {
        latency,
        o,
        g: gap,
        gap_per_byte: per_byte - overhead_per_byte,
        overhead_per_byte,
        eager_limit,
        connect_ns: median(m.connect_ns.clone()).unwrap_or(0.0),
        connect_crossing_ns: median(m.connect_crossing_ns.clone()),
        measured: pp
            .iter()
            .map(|p| SizePoint {
                bytes: p.bytes,
                send_ns: p.send_ns,
                half_round_trip_ns: p.half_round_trip_ns,
            })
            .collect(),
    };
    model.validate()?;
    Ok(model)
}

/// Open MPI's eager limit for `btl` (`tcp`, `vader`, `sm`) from `ompi_info --parsable`'s
/// output (`mca:btl:tcp:param:btl_tcp_eager_limit:value:65536`).
pub fn eager_limit_from_ompi_info(text: &str, btl: &str) -> Option<u64> {
    let key = format!("btl_{btl}_eager_limit:value:");
    text.lines()
        .find_map(|l| l.split_once(&key).map(|(_, v)| v.trim().parse().ok()))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Measurements made by the model itself: the fit must give its parameters back.
    fn synthetic(p: &LogGops) -> String {
        let mut out = format!("connect {:.1}\n", p.connect_ns);
        if let Some(c) = p.connect_crossing_ns {
            out += &format!("connect_crossing {c:.1}\n");
        }
        let mut bytes = 1u64;
        while bytes <= 4 << 20 {
            let extra = (bytes - 1) as f64;
            let mut h = 2.0 * p.o + p.latency + extra * (p.gap_per_byte + p.overhead_per_byte);
            if p.rendezvous(bytes) {
                h += 2.0 * (p.o + p.latency);
            }
            let send = p.o + extra * p.overhead_per_byte;
            out += &format!("pingpong {bytes} {h:.1} {send:.1}\n");
            if bytes <= 65536 {
                let per = p.o.max(p.g + extra * p.gap_per_byte);
                out += &format!("stream {bytes} {per:.1}\n");
            }
            bytes *= 2;
        }
        out
    }

    #[test]
    fn the_fit_recovers_the_model_that_made_the_data() {
        let truth = LogGops {
            latency: 9000.0,
            o: 1500.0,
            g: 2500.0,
            gap_per_byte: 0.35,
            overhead_per_byte: 0.05,
            eager_limit: 65536,
            connect_ns: 9_000_000.0,
            connect_crossing_ns: Some(150_000.0),
            measured: Vec::new(),
        };
        let m = parse(&synthetic(&truth)).unwrap();
        let got = fit(&m, None).unwrap();
        assert_eq!(got.eager_limit, truth.eager_limit);
        assert!((got.o - truth.o).abs() < 1.0, "{got:?}");
        assert!((got.latency - truth.latency).abs() < 2.0, "{got:?}");
        assert!((got.g - truth.g).abs() < 1.0, "{got:?}");
        assert_eq!(got.connect_ns, truth.connect_ns);
        assert_eq!(got.connect_crossing_ns, truth.connect_crossing_ns);
        // Jobs of their own: the median connection, not one met by a busy machine.
        let more = "connect 26000000.0\nconnect 9100000.0\nconnect_crossing 900000.0\n";
        let m = parse(&(synthetic(&truth) + more)).unwrap();
        let got = fit(&m, None).unwrap();
        assert_eq!(got.connect_ns, 9_100_000.0);
        assert_eq!(got.connect_crossing_ns, Some(525_000.0));
        assert!(
            (got.gap_per_byte - truth.gap_per_byte).abs() < 0.01,
            "{got:?}"
        );
        assert!(
            (got.overhead_per_byte - truth.overhead_per_byte).abs() < 0.01,
            "{got:?}"
        );
        // The library's limit wins over the coarse sizes, less the header it counts.
        assert_eq!(fit(&m, Some(65536)).unwrap().eager_limit, 65480);
        assert_eq!(fit(&m, Some(4096)).unwrap().eager_limit, 4040);
        assert_eq!(fit(&m, Some(1 << 20)).unwrap().eager_limit, (1 << 20) - 56);
    }

    #[test]
    fn bad_output_is_refused_at_its_line() {
        assert_eq!(
            parse("pingpong 1 10 5\nhello\n").unwrap_err(),
            "line 2: cannot read `hello`"
        );
        assert!(parse("pingpong 1 -3 5").is_err());
        assert!(fit(&parse("pingpong 1 10 5").unwrap(), None).is_err());
    }

    #[test]
    fn ompi_info_gives_the_eager_limit() {
        let text = "mca:btl:tcp:param:btl_tcp_eager_limit:value:65536\n\
                    mca:btl:vader:param:btl_vader_eager_limit:value:4096\n";
        assert_eq!(eager_limit_from_ompi_info(text, "tcp"), Some(65536));
        assert_eq!(eager_limit_from_ompi_info(text, "vader"), Some(4096));
        assert_eq!(eager_limit_from_ompi_info(text, "sm"), None);
    }
}
