//! Clock correction and the k-way merge over synthetic runs written with `TraceWriter`: ranks
//! whose clocks are off by known offsets (up to ±50 ms) and drifts (up to ±100 ppm) exchange
//! random messages with random positive delays; the estimate must recover the clocks, leave
//! no receive before its send, count what is unmatched, and the merge must give every record
//! once, in corrected time order, within its memory bound.

use gyr_core::record::push_record;
use gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
use gyr_core::value::encode;
use gyr_core::{Field, FieldType, Schema, ThreadInfo, TraceReader, Value};
use gyr_trace::clock::{self, ClockError, ClockOptions, ClockReport, Method};
use gyr_trace::merge::Merge;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const START_UNIX_NS: u64 = 1_700_000_000_000_000_000;
/// Every message takes at least this long.
const MIN_DELAY_NS: f64 = 5_000.0;

fn schemas() -> Vec<Schema> {
    let msg = |id, name| {
        Schema::new(
            id,
            name,
            vec![
                Field::new("peer", FieldType::U32),
                Field::new("tag", FieldType::I32),
                Field::new("bytes", FieldType::U64),
                Field::new("comm", FieldType::U64),
            ],
        )
        .unwrap()
    };
    vec![
        Schema::new(
            3,
            "gyr.msg.rank",
            vec![
                Field::new("job", FieldType::Str),
                Field::new("rank", FieldType::U32),
                Field::new("size", FieldType::U32),
            ],
        )
        .unwrap(),
        msg(4, "gyr.msg.send"),
        msg(5, "gyr.msg.recv"),
        Schema::new(6, "work", vec![Field::new("step", FieldType::U64)]).unwrap(),
    ]
}

/// One process of a synthetic run.
#[derive(Clone)]
struct Proc {
    /// Its clock: local = true · (1 + drift) + offset (ns).
    offset_ns: f64,
    drift: f64,
    /// (true time, thread, event) in any order.
    events: Vec<(f64, u64, Ev)>,
    /// Whether it says its rank.
    announce: bool,
    job: String,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Send { peer: u32, tag: i32 },
    Recv { peer: u32, tag: i32 },
    Work(u64),
}

impl Proc {
    fn local(&self, t: f64) -> u64 {
        (t * (1.0 + self.drift) + self.offset_ns).round() as u64
    }
}

/// A run of `n` processes with random clocks (rank 0 exact) and `messages` random messages
/// over `span_ns`; the pairs in `one_way` only send from the first to the second, `silent`
/// ranks neither send nor receive.
struct Run {
    procs: Vec<Proc>,
}

fn run(seed: u64, n: usize, messages: usize, span_ns: f64, silent: &[u32]) -> Run {
    let mut rng = Rng(seed | 1);
    let mut procs: Vec<Proc> = (0..n)
        .map(|r| Proc {
            offset_ns: if r == 0 {
                0.0
            } else {
                (rng.unit() * 2.0 - 1.0) * 50e6
            },
            drift: if r == 0 {
                0.0
            } else {
                (rng.unit() * 2.0 - 1.0) * 100e-6
            },
            events: Vec::new(),
            announce: true,
            job: "job-42".into(),
        })
        .collect();
    let talkers: Vec<u32> = (0..n as u32).filter(|r| !silent.contains(r)).collect();
    let t0 = 100e6; // every local clock is positive from here
    for k in 0..messages {
        let t = t0 + span_ns * k as f64 / messages as f64 + rng.unit() * 1000.0;
        let src = talkers[rng.below(talkers.len() as u64) as usize];
        let mut dst = src;
        while dst == src {
            dst = talkers[rng.below(talkers.len() as u64) as usize];
        }
        let delay = MIN_DELAY_NS - 20_000.0 * (1.0 - rng.unit()).ln();
        let tag = rng.below(3) as i32;
        let thread = 1 + rng.below(2);
        procs[src as usize]
            .events
            .push((t, thread, Ev::Send { peer: dst, tag }));
        procs[dst as usize]
            .events
            .push((t + delay, thread, Ev::Recv { peer: src, tag }));
    }
    for (r, p) in procs.iter_mut().enumerate() {
        for s in 0..50u64 {
            p.events
                .push((t0 + span_ns * s as f64 / 50.0 + r as f64, 3, Ev::Work(s)));
        }
    }
    Run { procs }
}

impl Run {
    /// Writes one file per process into `dir`, in the order of `order` (ranks).
    fn write(&self, dir: &std::path::Path, order: &[usize]) -> Vec<PathBuf> {
        let schemas = schemas();
        let n = self.procs.len() as u32;
        order
            .iter()
            .map(|&r| {
                let p = &self.procs[r];
                let mut header = TraceHeader::for_this_process();
                header.start_unix_ns = START_UNIX_NS;
                header.pid = 1000 + r as u32;
                let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
                for s in &schemas {
                    w.schema(s).unwrap();
                }
                for t in 1..=3 {
                    w.thread(&ThreadInfo {
                        id: t,
                        name: format!("t{t}"),
                        os_tid: t,
                    })
                    .unwrap();
                }
                let mut events = p.events.clone();
                events.sort_by(|a, b| a.0.total_cmp(&b.0));
                // Per thread, in blocks of 64 records, threads interleaved block by block
                // (as monitors write them).
                let mut per_thread: BTreeMap<u64, Vec<(u64, u32, Vec<u8>)>> = BTreeMap::new();
                if p.announce {
                    let payload = encode(
                        &schemas[0],
                        &[
                            Value::Str(p.job.clone()),
                            Value::UInt(r as u64),
                            Value::UInt(u64::from(n)),
                        ],
                    )
                    .unwrap();
                    per_thread
                        .entry(1)
                        .or_default()
                        .push((p.local(1e6), 3, payload));
                }
                for (t, thread, ev) in events {
                    let (type_id, payload) = match ev {
                        Ev::Send { peer, tag } | Ev::Recv { peer, tag } => {
                            let s = if matches!(ev, Ev::Send { .. }) { 1 } else { 2 };
                            let v = [
                                Value::UInt(u64::from(peer)),
                                Value::Int(i64::from(tag)),
                                Value::UInt(64),
                                Value::UInt(0),
                            ];
                            (schemas[s].id, encode(&schemas[s], &v).unwrap())
                        }
                        Ev::Work(step) => (6, encode(&schemas[3], &[Value::UInt(step)]).unwrap()),
                    };
                    per_thread
                        .entry(thread)
                        .or_default()
                        .push((p.local(t), type_id, payload));
                }
                let mut cursors: BTreeMap<u64, usize> = BTreeMap::new();
                loop {
                    let mut wrote = false;
                    for (&thread, recs) in &per_thread {
                        let at = cursors.entry(thread).or_default();
                        if *at >= recs.len() {
                            continue;
                        }
                        let mut block = Vec::new();
                        for (i, (ts, ty, payload)) in recs[*at..].iter().take(64).enumerate() {
                            push_record(&mut block, *ty, *ts, (*at + i + 1) as u64, 0, payload);
                        }
                        *at = (*at + 64).min(recs.len());
                        w.records(thread, &block).unwrap();
                        wrote = true;
                    }
                    if !wrote {
                        break;
                    }
                }
                let bytes = w.finish(&TraceEnd::default()).unwrap();
                let path = dir.join(format!("rank{r}.gyr"));
                std::fs::write(&path, bytes).unwrap();
                path
            })
            .collect()
    }
}

/// The corrected time of a true instant `t` on rank `r`, by the report.
fn corrected(report: &ClockReport, run: &Run, file: usize, rank: usize, t: f64) -> f64 {
    report.processes[file].clock.map(run.procs[rank].local(t)) as f64
}

#[test]
fn known_offsets_and_drifts_are_recovered() {
    for (seed, n) in [(1u64, 4usize), (2, 6), (3, 8)] {
        let dir = tempfile::tempdir().unwrap();
        let span = 10e9;
        let run = run(seed, n, 4000, span, &[]);
        let order: Vec<usize> = (0..n).collect();
        let paths = run.write(dir.path(), &order);
        let report = clock::estimate_files(&paths, &ClockOptions::default()).unwrap();
        assert_eq!(report.job.as_deref(), Some("job-42"));
        assert_eq!(report.reference, 0);
        assert_eq!(report.matched, 4000);
        assert_eq!((report.unmatched_sends, report.unmatched_recvs), (0, 0));
        assert!(
            report.before.reversed > 0,
            "the clocks were off: {:?}",
            report.before
        );
        assert_eq!(report.after.reversed, 0, "seed {seed}: {:?}", report.after);
        for (r, p) in report.processes.iter().enumerate().skip(1) {
            let from = p.from.expect("every rank talked");
            assert_eq!(from.line.method, Method::ConvexHull, "rank {r}");
            // Within the minimum delay (5 µs), over the whole run (1.3 µs is typical).
            for t in [100e6, 100e6 + span / 2.0, 100e6 + span] {
                let err = corrected(&report, &run, r, r, t) - t;
                assert!(
                    err.abs() <= MIN_DELAY_NS,
                    "seed {seed} rank {r} at {t}: off by {err} ns"
                );
            }
            // The drift that undoes the rank's, within 0.5 ppm (0.25 is typical).
            let truth = -run.procs[r].drift / (1.0 + run.procs[r].drift);
            assert!(
                (p.clock.drift - truth).abs() < 0.5e-6,
                "seed {seed} rank {r}: drift {} ppm, truth {} ppm",
                p.drift_ppm(),
                truth * 1e6
            );
        }
    }
}

#[test]
fn ranks_come_from_the_rank_events_and_the_reference_can_be_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let run = run(7, 5, 1500, 2e9, &[]);
    // Files given in another order than their ranks.
    let order = [3usize, 0, 4, 1, 2];
    let paths = run.write(dir.path(), &order);
    let options = ClockOptions {
        reference: Some(4),
        ..ClockOptions::default()
    };
    let report = clock::estimate_files(&paths, &options).unwrap();
    let ranks: Vec<u32> = report.processes.iter().map(|p| p.rank).collect();
    assert_eq!(ranks, [3, 0, 4, 1, 2]);
    assert_eq!(report.reference, 2);
    assert_eq!(report.after.reversed, 0);
    // On rank 4's clock: every rank's true instant lands where rank 4's does.
    let t = 1e9;
    let on_ref = corrected(&report, &run, 2, 4, t);
    for (file, &rank) in order.iter().enumerate() {
        let d = corrected(&report, &run, file, rank, t) - on_ref;
        assert!(d.abs() < 2.0 * (MIN_DELAY_NS + 5_000.0), "rank {rank}: {d}");
    }
}

#[test]
fn one_way_pairs_and_silent_processes() {
    let dir = tempfile::tempdir().unwrap();
    // Rank 0 only sends to 1, 1 only receives: one way. Rank 2 is silent.
    let mut r = run(11, 3, 0, 1e9, &[]);
    for k in 0..200 {
        let t = 100e6 + k as f64 * 1e6;
        r.procs[0].events.push((t, 1, Ev::Send { peer: 1, tag: 0 }));
        r.procs[1].events.push((
            t + MIN_DELAY_NS + (k % 7) as f64 * 1000.0,
            1,
            Ev::Recv { peer: 0, tag: 0 },
        ));
    }
    let paths = r.write(dir.path(), &[0, 1, 2]);
    let report = clock::estimate_files(&paths, &ClockOptions::default()).unwrap();
    let one = report.processes[1].from.unwrap();
    assert_eq!(one.line.method, Method::OneWay);
    assert_eq!((one.received, one.sent), (200, 0));
    assert_eq!(report.processes[1].clock.drift, 0.0);
    assert_eq!(report.after.reversed, 0);
    assert_eq!(
        report.after.min_delay_ns,
        Some(0),
        "the fastest message is left no delay"
    );
    // The silent rank is reported, left where its start places it.
    assert!(report.processes[2].from.is_none());
    assert_eq!(report.processes[2].messages, 0);
    assert_eq!(report.processes[2].clock.offset_ns, 0.0);
    // A minimum latency is left to the fastest message.
    let options = ClockOptions {
        min_latency_ns: 1000,
        ..ClockOptions::default()
    };
    let report = clock::estimate_files(&paths, &options).unwrap();
    assert_eq!(report.after.under_latency, 0);
    assert_eq!(report.after.min_delay_ns, Some(1000));
}

#[test]
fn a_rank_killed_mid_run_leaves_unmatched_messages_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = run(5, 4, 2000, 2e9, &[]);
    // Rank 3 died at 1.1 s: nothing of it after.
    let died = 100e6 + 1e9;
    r.procs[3].events.retain(|e| e.0 < died);
    let lost_sends = r
        .procs
        .iter()
        .flat_map(|p| p.events.iter())
        .filter(|e| matches!(e.2, Ev::Send { peer: 3, .. }))
        .count() as u64
        - r.procs[3]
            .events
            .iter()
            .filter(|e| matches!(e.2, Ev::Recv { .. }))
            .count() as u64;
    let paths = r.write(dir.path(), &[0, 1, 2, 3]);
    let report = clock::estimate_files(&paths, &ClockOptions::default()).unwrap();
    assert!(lost_sends > 0);
    assert_eq!(report.unmatched_sends, lost_sends);
    assert!(report.unmatched_recvs > 0, "what rank 3 would have sent");
    assert_eq!(report.after.reversed, 0);
    // With room for only a few unmatched messages the oldest are dropped, and counted.
    let options = ClockOptions {
        max_unmatched: 4,
        ..ClockOptions::default()
    };
    let small = clock::estimate_files(&paths, &options).unwrap();
    assert!(small.dropped > 0);
    assert_eq!(small.unmatched_sends, report.unmatched_sends);
}

#[test]
fn mistakes_a_user_can_make_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(9, 3, 100, 1e9, &[]);
    let paths = r.write(dir.path(), &[0, 1, 2]);
    let e = clock::estimate_files(&paths[..1], &ClockOptions::default()).unwrap_err();
    assert!(matches!(e, ClockError::TooFewFiles(1)), "{e}");
    let e = clock::estimate_files(
        &[paths[0].clone(), paths[0].clone()],
        &ClockOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("both rank 0"), "{e}");
    let options = ClockOptions {
        reference: Some(9),
        ..ClockOptions::default()
    };
    let e = clock::estimate_files(&paths, &options).unwrap_err();
    assert!(e.to_string().contains("no file is rank 9"), "{e}");
    // Another job.
    let mut other = run(9, 3, 100, 1e9, &[]);
    other.procs[2].job = "job-43".into();
    let dir2 = tempfile::tempdir().unwrap();
    let mixed = other.write(dir2.path(), &[0, 1, 2]);
    let e = clock::estimate_files(&mixed, &ClockOptions::default()).unwrap_err();
    assert!(e.to_string().contains("job-43"), "{e}");
    // No messages at all.
    let quiet = run(9, 2, 0, 1e9, &[]);
    let dir3 = tempfile::tempdir().unwrap();
    let e = clock::estimate_files(&quiet.write(dir3.path(), &[0, 1]), &ClockOptions::default())
        .unwrap_err();
    assert!(matches!(e, ClockError::NoMessages), "{e}");
}

#[test]
fn the_merge_gives_every_record_once_in_corrected_order_within_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(21, 6, 3000, 3e9, &[]);
    let paths = r.write(dir.path(), &[0, 1, 2, 3, 4, 5]);
    let report = clock::estimate_files(&paths, &ClockOptions::default()).unwrap();
    let open = || {
        paths
            .iter()
            .map(|p| TraceReader::open(p).unwrap())
            .collect::<Vec<_>>()
    };
    let expected: usize = r.procs.iter().map(|p| p.events.len() + 1).sum();
    // A small bound: 16 KiB per file.
    let merged = |bytes: usize| {
        let mut merge = Merge::new(open(), report.correction()).with_limits(100_000_000, bytes);
        let mut out = Vec::new();
        let mut most_held = 0;
        while let Some(rec) = merge.next() {
            most_held = most_held.max(merge.held());
            out.push((rec.time, rec.file, rec.thread, rec.header.seq));
        }
        let late: u64 = (0..paths.len()).map(|f| merge.stats(f).late).sum();
        (out, most_held, late)
    };
    let (out, most_held, late) = merged(16 << 10);
    assert_eq!(out.len(), expected);
    let mut keys: Vec<_> = out.iter().map(|&(_, f, t, s)| (f, t, s)).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), expected, "every record exactly once");
    assert_eq!(late, 0);
    assert!(
        out.windows(2).all(|w| w[0].0 <= w[1].0),
        "in corrected time order"
    );
    // Records of at most 16 KiB per file are held (a record costs its payload and 64 bytes),
    // plus one chunk each.
    assert!(most_held < 6 * ((16 << 10) / 64 + 2000), "{most_held}");
    // Every receive after its send in the merged stream: checked through the report.
    assert_eq!(report.after.reversed, 0);
    // Determinism: the same input merges the same way.
    assert_eq!(merged(16 << 10).0, out);
    let (again, _, _) = merged(1 << 20);
    assert_eq!(again, out);
}

#[test]
fn estimates_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(33, 5, 1000, 1e9, &[]);
    let paths = r.write(dir.path(), &[0, 1, 2, 3, 4]);
    let a = clock::estimate_files(&paths, &ClockOptions::default()).unwrap();
    let b = clock::estimate_files(&paths, &ClockOptions::default()).unwrap();
    assert_eq!(a.processes, b.processes);
    assert_eq!(a.after, b.after);
}

mod hull_estimator {
    use gyr_trace::clock::{DEFAULT_MAX_DRIFT, Hull, Method, estimate_line};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Whatever the true line and the delays, the line found for messages both ways
        /// leaves every message its direction's order (the true line is feasible, so the
        /// region is not empty), keeping only hull points does not change the answer, and a
        /// hull never holds more than its buffer beyond its points.
        #[test]
        fn the_line_violates_no_message(
            offset in -100_000_000i64..100_000_000,
            drift_ppm in -200.0f64..200.0,
            there in proptest::collection::vec((0i64..10_000_000_000, 1i64..1_000_000), 1..40),
            back in proptest::collection::vec((0i64..10_000_000_000, 1i64..1_000_000), 1..40),
        ) {
            let y = |x: i64| offset as f64 + drift_ppm * 1e-6 * x as f64;
            let mut above = Hull::upper();
            let mut all_above = Vec::new();
            for &(x, d) in &there {
                let p = (x, (y(x) - d as f64).floor() as i64);
                above.add(p.0, p.1);
                all_above.push(p);
            }
            let mut below = Hull::lower();
            let mut all_below = Vec::new();
            for &(x, d) in &back {
                let p = (x, (y(x) + d as f64).ceil() as i64);
                below.add(p.0, p.1);
                all_below.push(p);
            }
            let line = estimate_line(above.points(), below.points(), 0, DEFAULT_MAX_DRIFT).unwrap();
            let full = estimate_line(&all_above, &all_below, 0, DEFAULT_MAX_DRIFT).unwrap();
            prop_assert!((line.offset_ns - full.offset_ns).abs() < 1e-3 * (1.0 + line.offset_ns.abs()) + 1.0);
            prop_assert_ne!(line.method, Method::OneWay);
            let at = |x: i64| line.offset_ns + line.drift * x as f64;
            // A tolerance of 2 ns for floating point over 10 s.
            for &(x, v) in &all_above {
                prop_assert!(at(x) >= v as f64 - 2.0, "{line:?} under ({x}, {v})");
            }
            for &(x, v) in &all_below {
                prop_assert!(at(x) <= v as f64 + 2.0, "{line:?} over ({x}, {v})");
            }
        }
    }
}
