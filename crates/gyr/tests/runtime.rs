//! End-to-end tests of the capture path: sensors → rings → local monitors → sinks.

mod support;

use gyr::control::{Rate, Target, set_enabled, set_rate};
use gyr::gyr_core::Value;
use gyr::gyr_core::record::Records;
use gyr::{Batch, Builder, CallbackSink, MemorySink, Policy, Sensor, SensorInstance};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Sensor)]
struct Tick {
    thread: u32,
    n: u64,
}

#[derive(Sensor)]
#[sensor(name = "mixed.event")]
struct Mixed<'a> {
    label: &'a str,
    data: Vec<u8>,
    hist: [f32; 3],
    ok: bool,
    delta: i16,
}

#[test]
fn events_reach_the_memory_sink_with_implicit_fields() {
    let _g = support::serial();
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    for n in 0..100 {
        Tick { thread: 0, n }.emit();
    }
    Mixed {
        label: "héllo",
        data: vec![1, 2, 3],
        hist: [0.5, 1.5, 2.5],
        ok: true,
        delta: -7,
    }
    .emit();
    let summary = rt.shutdown();
    assert_eq!(summary.lost, 0);
    let ticks = mem.events("tick");
    assert_eq!(ticks.len(), 100);
    for (i, (rec, values)) in ticks.iter().enumerate() {
        assert_eq!(rec.seq, i as u64 + 1);
        assert_eq!(values, &vec![Value::UInt(0), Value::UInt(i as u64)]);
    }
    assert!(
        ticks
            .windows(2)
            .all(|w| w[0].0.timestamp <= w[1].0.timestamp)
    );
    let mixed = mem.events("mixed.event");
    assert_eq!(
        mixed[0].1,
        vec![
            Value::Str("héllo".into()),
            Value::Bytes(vec![1, 2, 3]),
            Value::Array(vec![
                Value::Float(0.5),
                Value::Float(1.5),
                Value::Float(2.5)
            ]),
            Value::Bool(true),
            Value::Int(-7),
        ]
    );
    assert_eq!(mem.end().unwrap().records, summary.records);
}

/// `DynamicSensor::emit_encoded_at`: a run-time type's event takes the stamp it is given, as a
/// derived sensor's `emit_at` does, and records nothing while switched off.
#[test]
fn a_dynamic_sensors_event_shares_a_stamp() {
    use gyr::gyr_core::{Field, FieldType};
    let _g = support::serial();
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let sensor =
        gyr::DynamicSensor::register("stamped.dyn", vec![Field::new("v", FieldType::U64)]).unwrap();
    let at = gyr::Stamp::now();
    std::thread::sleep(Duration::from_millis(2));
    gyr::emit_at(&Tick { thread: 1, n: 0 }, at);
    sensor.emit_encoded_at(at, 8, |out| out.copy_from_slice(&7u64.to_le_bytes()));
    set_enabled(&Target::Type("stamped.dyn".into()), false);
    sensor.emit_encoded_at(at, 8, |out| out.copy_from_slice(&8u64.to_le_bytes()));
    set_enabled(&Target::Type("stamped.dyn".into()), true);
    Tick { thread: 1, n: 1 }.emit();
    rt.shutdown();
    let ticks = mem.events("tick");
    let dyns = mem.events("stamped.dyn");
    assert_eq!(dyns.len(), 1, "the one switched off is not recorded");
    assert_eq!(dyns[0].1, vec![Value::UInt(7)]);
    assert_eq!(
        dyns[0].0.timestamp, ticks[0].0.timestamp,
        "one reading, two events"
    );
    assert!(ticks[1].0.timestamp > dyns[0].0.timestamp + 1_000_000);
}

/// `emit_at`: the events given one clock reading share it, and a reading older than the
/// thread's last record is raised to that record's time, so a thread's records never go back in
/// time; a sensor switched off records nothing.
#[test]
fn a_stamp_read_once_stamps_its_events_and_never_goes_back() {
    let _g = support::serial();
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let before = gyr::now_ns();
    let first = gyr::Stamp::now();
    let after = gyr::now_ns();
    std::thread::sleep(Duration::from_millis(5));
    // A type's first event registers it, and is still stamped as asked.
    gyr::emit_at(&Stamped { n: 0 }, first);
    let early = gyr::Stamp::now();
    std::thread::sleep(Duration::from_millis(2));
    Tick { thread: 9, n: 0 }.emit();
    gyr::emit_at(&Tick { thread: 9, n: 1 }, early);
    std::thread::sleep(Duration::from_millis(2));
    let at = gyr::Stamp::now();
    gyr::emit_at(&Tick { thread: 9, n: 2 }, at);
    gyr::emit_at(&Tick { thread: 9, n: 3 }, at);
    set_enabled(&Target::Type("tick".into()), false);
    gyr::emit_at(&Tick { thread: 9, n: 4 }, at);
    set_enabled(&Target::Type("tick".into()), true);
    Tick { thread: 9, n: 5 }.emit();
    rt.shutdown();
    let ticks = mem.events("tick");
    let ns: Vec<u64> = ticks
        .iter()
        .map(|(_, v)| match v[1] {
            Value::UInt(n) => n,
            ref v => panic!("{v:?}"),
        })
        .collect();
    assert_eq!(ns, [0, 1, 2, 3, 5], "the one switched off is not recorded");
    let ts: Vec<u64> = ticks.iter().map(|(r, _)| r.timestamp).collect();
    assert_eq!(
        ts[1], ts[0],
        "an older stamp is raised to the last record's"
    );
    assert!(
        ts[2] > ts[1] + 1_000_000,
        "a stamp read later is used: {ts:?}"
    );
    assert_eq!(ts[2], ts[3], "one reading, two events");
    assert!(ts[4] >= ts[3]);
    let stamped = mem.events("stamped");
    assert_eq!(stamped.len(), 1);
    let t = stamped[0].0.timestamp;
    assert!(
        before.saturating_sub(1) <= t && t <= after + 1,
        "stamped when asked: {before} <= {t} <= {after}"
    );
}

#[derive(Sensor)]
struct Stamped {
    n: u64,
}

#[derive(Sensor)]
struct Paired {
    n: u64,
}

/// `emit_pair_at`: both events, first then second, with the one stamp (raised to the thread's
/// last record's like `emit_at`'s); a type's first event registers it; a sensor switched off
/// drops its event and not the other.
#[test]
fn a_pair_of_events_shares_one_stamp_in_order() {
    let _g = support::serial();
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let first = gyr::Stamp::now();
    std::thread::sleep(Duration::from_millis(2));
    gyr::emit_pair_at(&Paired { n: 0 }, &Stamped { n: 1 }, first);
    let at = gyr::Stamp::now();
    gyr::emit_pair_at(&Stamped { n: 2 }, &Paired { n: 3 }, at);
    Tick { thread: 1, n: 0 }.emit();
    gyr::emit_pair_at(&Paired { n: 4 }, &Stamped { n: 5 }, at);
    set_enabled(&Target::Type("paired".into()), false);
    let later = gyr::Stamp::now();
    gyr::emit_pair_at(&Paired { n: 6 }, &Stamped { n: 7 }, later);
    set_enabled(&Target::Type("paired".into()), true);
    rt.shutdown();
    let n = |v: &[Value]| match v[0] {
        Value::UInt(n) => n,
        ref v => panic!("{v:?}"),
    };
    let mut all: Vec<(u64, u64, u64)> = ["paired", "stamped", "tick"]
        .into_iter()
        .flat_map(|t| mem.events(t))
        .map(|(r, v)| (r.seq, r.timestamp, if v.len() == 1 { n(&v) } else { 100 }))
        .collect();
    all.sort_unstable();
    let order: Vec<u64> = all.iter().map(|e| e.2).collect();
    assert_eq!(
        order,
        [0, 1, 2, 3, 100, 4, 5, 7],
        "in order; the one switched off dropped"
    );
    let ts: Vec<u64> = all.iter().map(|e| e.1).collect();
    assert_eq!(ts[0], ts[1], "one stamp for the first pair");
    assert!(ts[2] > ts[1] + 1_000_000, "the later stamp is used: {ts:?}");
    assert_eq!(ts[2], ts[3], "one stamp for the second pair");
    assert_eq!(
        ts[5], ts[6],
        "an older stamp is raised to the last record's, for both"
    );
    assert_eq!(ts[5], ts[4]);
    assert!(ts[7] >= ts[6]);
}

/// Every event of 8 threads × 1M arrives exactly once, and per-thread sequence numbers have no
/// gaps (Block policy).
#[test]
fn stress_block_policy_delivers_everything_exactly_once() {
    let _g = support::serial();
    block_policy_delivers_everything(8, 1_000_000, 64 << 10);
}

/// Rings large enough that one drain spans many of the monitor's batches, with records that
/// straddle the pieces it copies and the batches it delivers.
#[test]
fn big_drains_are_delivered_whole_across_batches() {
    let _g = support::serial();
    block_policy_delivers_everything(2, 2_000_000, 8 << 20);
}

/// Every thread's `tick` events arrive exactly once, in order and whole, and nothing is lost.
fn block_policy_delivers_everything(threads: u32, per_thread: u64, ring: usize) {
    type Seen = HashMap<u64, (u32, u64, u64)>; // gyr thread -> (app thread, last seq, count)
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let bad = Arc::new(Mutex::new(Vec::<String>::new()));
    let (s2, b2) = (seen.clone(), bad.clone());
    let tick_id = Arc::new(Mutex::new(None::<u32>));
    let t2 = tick_id.clone();
    let sink = CallbackSink::new(move |batch: &Batch| {
        if let Some(s) = batch.schemas().iter().find(|s| s.name == "tick") {
            *t2.lock().unwrap() = Some(s.id);
        }
        let tick = t2.lock().unwrap().unwrap_or(0);
        let mut seen = s2.lock().unwrap();
        for (thread, bytes) in batch.blocks() {
            for r in Records::new(thread, bytes) {
                let r = r.unwrap();
                if r.header.type_id != tick {
                    continue;
                }
                let app = u32::from_le_bytes(r.payload[..4].try_into().unwrap());
                let n = u64::from_le_bytes(r.payload[4..12].try_into().unwrap());
                let e = seen.entry(thread).or_insert((app, 0, 0));
                if r.header.seq != e.1 + 1 || n + 1 != r.header.seq || e.0 != app {
                    b2.lock().unwrap().push(format!(
                        "thread {thread}: seq {} after {}, n {n}",
                        r.header.seq, e.1
                    ));
                }
                e.1 = r.header.seq;
                e.2 += 1;
            }
        }
    });
    let rt = Builder::new()
        .policy(Policy::Block)
        .ring_capacity(ring)
        .sink(sink)
        .start()
        .unwrap();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                for n in 0..per_thread {
                    Tick { thread: t, n }.emit();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let summary = rt.shutdown();
    assert!(
        bad.lock().unwrap().is_empty(),
        "{:?}",
        &bad.lock().unwrap()[..5.min(bad.lock().unwrap().len())]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), threads as usize);
    for (thread, (_, last, count)) in seen.iter() {
        assert_eq!(*count, per_thread, "thread {thread}");
        assert_eq!(*last, per_thread);
    }
    assert_eq!(summary.lost, 0);
}

/// With a tiny ring and the Drop policy, delivered + reported lost = emitted, per thread.
#[test]
fn drop_policy_counts_every_lost_event() {
    let _g = support::serial();
    let mem = MemorySink::new();
    let rt = Builder::new()
        .policy(Policy::Drop)
        .ring_capacity(4096)
        .poll_interval(Duration::from_millis(5))
        .max_monitors(1)
        .sink(mem.clone())
        .start()
        .unwrap();
    const PER_THREAD: u64 = 200_000;
    let handles: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                for n in 0..PER_THREAD {
                    Tick { thread: t, n }.emit();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let summary = rt.shutdown();
    let mut delivered: HashMap<u64, u64> = HashMap::new();
    for (rec, _) in mem.events("tick") {
        *delivered.entry(rec.thread).or_default() += 1;
    }
    let mut lost: HashMap<u64, u64> = HashMap::new();
    let mut lost_total = 0;
    for (_, v) in mem.events("gyr.lost") {
        let (Value::UInt(thread), Value::UInt(count), Value::UInt(from), Value::UInt(to)) =
            (&v[0], &v[1], &v[2], &v[3])
        else {
            panic!("gyr.lost has four u64 fields")
        };
        assert_eq!(to - from + 1, *count);
        *lost.entry(*thread).or_default() += count;
        lost_total += count;
    }
    assert!(
        lost_total > 0,
        "a 4 KiB ring under 200k events should overflow"
    );
    assert_eq!(delivered.len(), 2);
    for (thread, d) in &delivered {
        assert_eq!(
            d + lost.get(thread).copied().unwrap_or(0),
            PER_THREAD,
            "thread {thread}"
        );
    }
    assert_eq!(summary.lost, lost_total);
}

#[test]
fn sensors_switch_and_rate_limit_at_run_time() {
    let _g = support::serial();
    #[derive(Sensor)]
    struct Ctl {
        n: u32,
    }
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    Ctl { n: 0 }.emit();
    set_enabled(&Target::Type("ctl".into()), false);
    Ctl { n: 1 }.emit();
    set_enabled(&Target::Type("ctl".into()), true);
    set_enabled(&Target::Global, false);
    Ctl { n: 2 }.emit();
    set_enabled(&Target::Global, true);
    set_rate(&Target::Type("ctl".into()), Rate::EveryNth(10)).unwrap();
    for n in 100..200 {
        Ctl { n }.emit();
    }
    set_rate(&Target::Type("ctl".into()), Rate::PerSecond(1.0)).unwrap();
    for n in 1000..1100 {
        Ctl { n }.emit();
    }
    set_rate(&Target::Type("ctl".into()), Rate::All).unwrap();
    assert!(set_rate(&Target::Type("ctl".into()), Rate::EveryNth(0)).is_err());
    assert!(set_rate(&Target::Global, Rate::PerSecond(-1.0)).is_err());
    let inst = SensorInstance::<Ctl>::new("ctl.hot").unwrap();
    inst.emit(&Ctl { n: 5000 });
    set_enabled(&Target::Instance("ctl.hot".into()), false);
    inst.emit(&Ctl { n: 5001 });
    Ctl { n: 5002 }.emit();
    let status = gyr::control::sensors();
    rt.shutdown();
    let ns: Vec<u64> = mem
        .events("ctl")
        .iter()
        .map(|(_, v)| match v[0] {
            Value::UInt(n) => n,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        ns,
        vec![
            0, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 1000, 5000, 5002
        ]
    );
    let ctl = status
        .iter()
        .find(|s| s.type_name == "ctl" && s.instance.is_none())
        .unwrap();
    assert_eq!(ctl.skipped, 90 + 99);
    let hot = status
        .iter()
        .find(|s| s.instance.as_deref() == Some("ctl.hot"))
        .unwrap();
    assert!(!hot.enabled);
    set_enabled(&Target::Instance("ctl.hot".into()), true);
}

#[test]
fn sampling_sensors_are_read_by_the_monitor() {
    let _g = support::serial();
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = counter.clone();
    let s = gyr::sample("test.counter", move || {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    })
    .unwrap();
    s.set_interval(Duration::from_millis(5));
    let cell = gyr::sample_cell::<f64>("test.residual", 0.5).unwrap();
    cell.sensor().set_interval(Duration::from_millis(5));
    std::thread::sleep(Duration::from_millis(100));
    cell.set(0.25);
    std::thread::sleep(Duration::from_millis(50));
    rt.shutdown();
    s.remove();
    let counts = mem.events("test.counter");
    assert!(
        counts.len() >= 5,
        "sampled {} times in 150 ms at 5 ms",
        counts.len()
    );
    let residuals: Vec<f64> = mem
        .events("test.residual")
        .iter()
        .filter_map(|(_, v)| v[0].as_f64())
        .collect();
    assert_eq!(residuals.first(), Some(&0.5));
    assert_eq!(residuals.last(), Some(&0.25));
    // A bad name is refused with a clear error.
    assert!(
        gyr::sample("bad name", || 1u32)
            .unwrap_err()
            .to_string()
            .contains("not valid")
    );
}

#[test]
fn exited_threads_are_drained_and_extended_sensors_filter() {
    let _g = support::serial();
    #[derive(Sensor)]
    struct Level {
        v: f64,
    }
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    std::thread::Builder::new()
        .name("worker-a".into())
        .spawn(|| {
            let mut t = gyr::extended::Threshold::new(1.0);
            for v in [0.0, 0.5, 2.0, 2.5, 4.0] {
                t.observe(v, || Level { v });
            }
            let mut agg = gyr::extended::Aggregate::new("test.agg", 4).unwrap();
            for v in 1..=10 {
                agg.observe(v as f64);
            }
            agg.flush();
        })
        .unwrap()
        .join()
        .unwrap();
    rt.shutdown();
    let levels: Vec<f64> = mem
        .events("level")
        .iter()
        .filter_map(|(_, v)| v[0].as_f64())
        .collect();
    assert_eq!(levels, vec![0.0, 2.0, 4.0]);
    let agg = mem.events("test.agg");
    assert_eq!(agg.len(), 3);
    assert_eq!(agg[0].1[0], Value::UInt(4));
    assert_eq!(agg[2].1[4], Value::Float(9.5));
    assert!(mem.threads().iter().any(|t| t.name == "worker-a"));
}

/// Threads std knows no name for (a C program's pthreads) are named as the program named them
/// for the kernel, and unnamed ones, which carry the process's name, stay `thread-<id>`.
#[test]
fn threads_without_a_std_name_take_their_kernel_name() {
    let _g = support::serial();
    #[derive(Sensor)]
    struct Ping {
        n: u32,
    }
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let process = std::fs::read_to_string("/proc/self/comm").unwrap();
    for (n, kernel_name) in [(1, Some("solver-io")), (2, None)] {
        let process = process.clone();
        std::thread::Builder::new()
            .spawn(move || {
                // What pthread_setname_np does, without unsafe code; an unnamed thread is
                // given the process's name, as a thread of a C program inherits it.
                let name = kernel_name.map_or(process, str::to_owned);
                std::fs::write("/proc/thread-self/comm", name).unwrap();
                gyr::emit!(Ping { n });
            })
            .unwrap()
            .join()
            .unwrap();
    }
    rt.shutdown();
    let names: Vec<String> = mem.threads().iter().map(|t| t.name.clone()).collect();
    assert!(names.iter().any(|n| n == "solver-io"), "{names:?}");
    assert!(
        names.iter().any(|n| n.starts_with("thread-")),
        "the unnamed one: {names:?}"
    );
}

/// A name set through `gyr::thread::set_name` before a thread's first record is the one its
/// records carry (before std's); set after it, it is refused and the thread keeps its name.
/// `is_named` tells whether the thread was named, from then on.
#[test]
fn a_thread_named_before_its_first_record_carries_that_name() {
    let _g = support::serial();
    #[derive(Sensor)]
    struct Ping {
        n: u32,
    }
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let (early, late) = std::thread::Builder::new()
        .name("std-name".into())
        .spawn(|| {
            // A std name is not the program's: a binding naming threads lazily still asks.
            assert!(!gyr::thread::is_named());
            let early = gyr::thread::set_name("Thread-1 (worker)");
            assert!(gyr::thread::is_named());
            gyr::emit!(Ping { n: 1 });
            let late = gyr::thread::set_name("too late");
            gyr::emit!(Ping { n: 2 });
            assert!(gyr::thread::is_named());
            (early, late)
        })
        .unwrap()
        .join()
        .unwrap();
    rt.shutdown();
    assert!(early && !late, "{early} {late}");
    let names: Vec<String> = mem.threads().iter().map(|t| t.name.clone()).collect();
    assert!(names.iter().any(|n| n == "Thread-1 (worker)"), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "std-name" || n == "too late"),
        "{names:?}"
    );

    // A name without end is cut, at a character boundary.
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    std::thread::spawn(|| {
        gyr::thread::set_name(&"é".repeat(1000));
        gyr::emit!(Ping { n: 3 });
    })
    .join()
    .unwrap();
    rt.shutdown();
    let long = mem
        .threads()
        .into_iter()
        .find(|t| t.name.starts_with('é'))
        .unwrap();
    assert_eq!(long.name, "é".repeat(128));
}

/// Threads emitting from their thread-locals' destructors, before and after gyr's own buffer for
/// the thread is destroyed, while others come and go: the sensor's fast path to that buffer
/// (its address in the static TLS block) is closed before the buffer goes, so every event is
/// delivered or counted as lost, and none is written through a buffer already dropped.
#[test]
fn events_from_thread_local_destructors_are_delivered_or_counted() {
    let _g = support::serial();
    #[derive(Sensor)]
    struct Late {
        n: u64,
    }
    struct EmitOnDrop(u64);
    impl Drop for EmitOnDrop {
        fn drop(&mut self) {
            for n in 0..self.0 {
                gyr::emit(&Late { n });
            }
        }
    }
    thread_local! {
        static FIRST: EmitOnDrop = const { EmitOnDrop(100) };
        static LAST: EmitOnDrop = const { EmitOnDrop(100) };
    }
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    let (rounds, per_round) = (16, 8);
    for _ in 0..rounds {
        let hs: Vec<_> = (0..per_round)
            .map(|_| {
                std::thread::spawn(|| {
                    // One destructor registered before gyr's buffer exists, one after.
                    FIRST.with(|_| {});
                    gyr::emit(&Late { n: u64::MAX });
                    LAST.with(|_| {});
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    let summary = rt.shutdown();
    let threads = (rounds * per_round) as u64;
    let delivered = mem.events("late").len() as u64;
    assert!(delivered >= threads, "{delivered}");
    assert_eq!(delivered + summary.lost, threads * 201, "{summary:?}");
}

#[test]
fn a_second_runtime_is_refused_and_bad_env_is_explained() {
    let _g = support::serial();
    let rt = Builder::new().start().unwrap();
    assert!(matches!(
        Builder::new().start(),
        Err(gyr::Error::AlreadyRunning)
    ));
    drop(rt);
    // SAFETY of set_var: this test holds the serial lock, and no other thread reads the
    // environment meanwhile.
    unsafe { std::env::set_var("GYR_POLICY", "sometimes") };
    let err = Builder::new()
        .with_default_env()
        .start()
        .unwrap_err()
        .to_string();
    unsafe { std::env::remove_var("GYR_POLICY") };
    assert!(err.contains("GYR_POLICY") && err.contains("block"), "{err}");
    let err = Builder::new()
        .trace_file("/nonexistent-dir/x.gyr")
        .start()
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot create the trace file"), "{err}");
}

#[test]
fn more_monitors_start_when_one_falls_behind() {
    let _g = support::serial();
    let rt = Builder::new()
        .monitors(1)
        .max_monitors(3)
        .ring_capacity(4096)
        .max_lag(Duration::from_micros(50))
        .start()
        .unwrap();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for n in 0..200_000 {
                    Tick { thread: t, n }.emit();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let monitors = rt.monitor_count();
    let summary = rt.shutdown();
    assert!(
        monitors > 1,
        "blocked producers should have started another monitor"
    );
    assert_eq!(summary.lost, 0);
}

#[test]
fn a_panicking_sink_is_disabled_and_the_others_go_on() {
    let _g = support::serial();
    let mem = MemorySink::new();
    let bad = CallbackSink::new(|batch: &Batch| {
        if !batch.is_empty() {
            panic!("a bug in a user's sink");
        }
    });
    let rt = Builder::new().sink(bad).sink(mem.clone()).start().unwrap();
    for n in 0..10 {
        Tick { thread: 0, n }.emit();
    }
    assert!(rt.flush());
    for n in 10..20 {
        Tick { thread: 0, n }.emit();
    }
    let summary = rt.shutdown();
    assert_eq!(summary.sink_errors, 1);
    assert_eq!(mem.events("tick").len(), 20);
    // It failed on the first records: it lost every record, and says so.
    assert!(summary.records >= 20);
    assert_eq!(summary.sink_lost, summary.records);
}
