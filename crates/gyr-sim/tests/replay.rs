//! Rank traces forged event by event, loaded and replayed: what the trace says becomes the
//! right program, and the prediction is the hand-computed one.

use gyr_core::trace::TraceHeader;
use gyr_core::value::Value;
use gyr_sim::output::EventWriter;
use gyr_sim::{LogGops, Network, load, simulate};
use std::path::PathBuf;

/// Writes one rank's trace: `events` are (ns, event name, field values).
fn rank_file(dir: &std::path::Path, rank: u32, events: &[(u64, &str, Vec<Value>)]) -> PathBuf {
    let path = dir.join(format!("job.{rank}.gyr"));
    let file = std::fs::File::create(&path).unwrap();
    let mut w = EventWriter::new(file, &TraceHeader::default(), "main").unwrap();
    for (ts, name, values) in events {
        w.event(*ts, name, values).unwrap();
    }
    w.finish().unwrap();
    path
}

fn s(v: &str) -> Value {
    Value::Str(v.into())
}
fn u(v: u64) -> Value {
    Value::UInt(v)
}
fn i(v: i64) -> Value {
    Value::Int(v)
}

fn begin(ts: u64, call: &str) -> (u64, &'static str, Vec<Value>) {
    (ts, "gyr.mpi.begin", vec![s(call)])
}
fn end(ts: u64, call: &str) -> (u64, &'static str, Vec<Value>) {
    (ts, "gyr.mpi.end", vec![s(call), i(0)])
}
fn rank(ts: u64, r: u64) -> (u64, &'static str, Vec<Value>) {
    (ts, "gyr.msg.rank", vec![s("job"), u(r), u(2)])
}
fn send(ts: u64, peer: u64, tag: i64, bytes: u64) -> (u64, &'static str, Vec<Value>) {
    (ts, "gyr.msg.send", vec![u(peer), i(tag), u(bytes), u(0)])
}
fn recv(ts: u64, peer: u64, tag: i64, bytes: u64) -> (u64, &'static str, Vec<Value>) {
    (ts, "gyr.msg.recv", vec![u(peer), i(tag), u(bytes), u(0)])
}

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

#[test]
fn a_ping_pong_with_compute_is_predicted_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 computes 10 µs, sends 101 bytes, then receives the answer; rank 1 receives from
    // any source (resolved to 0 by its trace), computes 5 µs, answers with a nonblocking send.
    let r0 = rank_file(
        dir.path(),
        0,
        &[
            begin(100, "MPI_Init"),
            rank(150, 0),
            end(1_000, "MPI_Init"),
            begin(11_000, "MPI_Send"),
            send(11_010, 1, 7, 101),
            end(11_500, "MPI_Send"),
            begin(11_600, "MPI_Recv"),
            recv(40_000, 1, 8, 101),
            end(40_010, "MPI_Recv"),
            begin(40_100, "MPI_Finalize"),
            end(41_000, "MPI_Finalize"),
        ],
    );
    let r1 = rank_file(
        dir.path(),
        1,
        &[
            begin(0, "MPI_Init"),
            rank(10, 1),
            end(2_000, "MPI_Init"),
            begin(2_000, "MPI_Recv"),
            recv(30_000, 0, 7, 101),
            end(30_001, "MPI_Recv"),
            begin(35_001, "MPI_Isend"),
            (
                35_002,
                "gyr.mpi.request",
                vec![
                    u(9),
                    s("MPI_Isend"),
                    Value::Bool(false),
                    i(0),
                    i(8),
                    u(101),
                    u(0),
                ],
            ),
            send(35_003, 0, 8, 101),
            end(35_010, "MPI_Isend"),
            begin(35_010, "MPI_Wait"),
            (35_020, "gyr.mpi.complete", vec![u(9), Value::Bool(false)]),
            end(35_030, "MPI_Wait"),
            begin(36_000, "MPI_Finalize"),
        ],
    );
    let loaded = load(&[r1, r0]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.ranks.len(), 2);
    let m0 = &loaded.ranks[0].measured;
    assert_eq!((m0.start_ns, m0.span_ns, m0.calls), (1_000, 39_100, 2));
    assert!(m0.finalized);
    let m1 = &loaded.ranks[1].measured;
    assert_eq!((m1.start_ns, m1.span_ns, m1.calls), (2_000, 34_000, 3));

    let p = simulate(
        loaded.ranks.iter().map(|r| r.program.clone()).collect(),
        &net(),
    )
    .unwrap();
    assert!(p.unfinished.is_empty(), "{:?}", p.unfinished);
    // Rank 0: computes 10_000, sends (busy 100): 10_100; its data arrives at 10_000 + 1200 =
    // 11_200. Rank 1: posted at 0, completes at 11_300, computes 5_000 (the gap between its
    // receive's end and its Isend's begin): 16_300, Isend busy 100: 16_400 (its wait done at
    // once; then 970 ns of gap before Finalize's begin... the gap between Isend's end and
    // Wait's begin is 0, Wait's end to Finalize 970): ends 17_370.
    // Rank 0's receive: the answer arrives 16_300 + 1200 = 17_500, done 17_600, then 90 ns
    // to Finalize: 17_690.
    assert_eq!(p.ranks[1].end_ns, 17_370);
    assert_eq!(p.ranks[0].end_ns, 17_690);
    let names: Vec<&str> = p.ranks[1]
        .calls
        .iter()
        .map(|c| p.ranks[1].names[c.name as usize].as_str())
        .collect();
    assert_eq!(names, ["MPI_Recv", "MPI_Isend", "MPI_Wait"]);

    // The prediction reads back as a trace of its own.
    let out = dir.path().join("pred.0.gyr");
    gyr_sim::output::write_prediction(
        std::fs::File::create(&out).unwrap(),
        &loaded.ranks[0],
        &p.ranks[0],
    )
    .unwrap();
    let mut reader = gyr_core::TraceReader::open(&out).unwrap();
    let mut n = 0;
    reader.for_each_item(|item| {
        if let gyr_core::trace::Item::Record { .. } = item {
            n += 1;
        }
    });
    assert_eq!(n, 1 + 2 * 2);
}

#[test]
fn a_killed_rank_leaves_the_others_replayable_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let r0 = rank_file(
        dir.path(),
        0,
        &[
            begin(0, "MPI_Init"),
            rank(1, 0),
            end(10, "MPI_Init"),
            begin(100, "MPI_Recv"),
        ],
    );
    let r1 = rank_file(
        dir.path(),
        1,
        &[begin(0, "MPI_Init"), rank(1, 1), end(10, "MPI_Init")],
    );
    let loaded = load(&[r0, r1]).unwrap();
    assert!(!loaded.ranks[0].measured.finalized);
    let p = simulate(
        loaded.ranks.iter().map(|r| r.program.clone()).collect(),
        &net(),
    )
    .unwrap();
    // Rank 0's receive left no message event: nothing to wait for in the replay.
    assert!(p.unfinished.is_empty());
}

#[test]
fn files_that_are_not_ranks_or_of_two_jobs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plain = rank_file(dir.path(), 5, &[begin(0, "MPI_Init")]);
    let e = load(&[plain]).unwrap_err().to_string();
    assert!(e.contains("no `gyr.msg.rank`"), "{e}");
    let a = rank_file(dir.path(), 0, &[rank(0, 0)]);
    let b = dir.path().join("other.gyr");
    {
        let f = std::fs::File::create(&b).unwrap();
        let mut w = EventWriter::new(f, &TraceHeader::default(), "main").unwrap();
        w.event(0, "gyr.msg.rank", &[s("other"), u(1), u(2)])
            .unwrap();
        w.finish().unwrap();
    }
    let e = load(&[a.clone(), b]).unwrap_err().to_string();
    assert!(e.contains("from job `other`"), "{e}");
    let e = load(&[a.clone(), a]).unwrap_err().to_string();
    assert!(e.contains("are both rank 0"), "{e}");
}
