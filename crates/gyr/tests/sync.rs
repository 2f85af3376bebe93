//! `gyr::thread` and `gyr::sync` record Falcon's thread events, and those events, delivered in
//! the worst order, come out of `gyr-trace`'s ordering filter causally consistent.

mod support;

use gyr::gyr_core::Value;
use gyr::sync::{Barrier, Condvar, Mutex, RwLock};
use gyr::{Builder, MemorySink, OwnedRecord};
use gyr_trace::{Event, OrderFilter, SyncDecoder, SyncEvent};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A workload using every wrapped primitive: a contended counter, a bounded queue with
/// condition variables (one timed wait), a barrier over several generations and a rwlock.
fn workload() {
    let counter = Arc::new(Mutex::new(0u64));
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let counter = counter.clone();
            gyr::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    gyr::thread::set_role("worker", i);
                    for _ in 0..300 {
                        *counter.lock().unwrap() += 1;
                    }
                })
                .unwrap()
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(*counter.lock().unwrap(), 1200);

    let queue = Arc::new((
        Mutex::new(Vec::<u32>::new()),
        Condvar::new(),
        Condvar::new(),
    ));
    let consumer = {
        let queue = queue.clone();
        gyr::thread::spawn(move || {
            let (items, not_empty, not_full) = &*queue;
            let mut got = 0;
            while got < 200 {
                let mut q = items.lock().unwrap();
                while q.is_empty() {
                    q = not_empty
                        .wait_timeout(q, Duration::from_millis(5))
                        .unwrap()
                        .0;
                }
                q.pop();
                got += 1;
                not_full.notify_one();
            }
        })
    };
    {
        let (items, not_empty, not_full) = &*queue;
        for i in 0..200 {
            let q = items.lock().unwrap();
            let mut q = not_full.wait_while(q, |q| q.len() >= 4).unwrap();
            q.push(i);
            not_empty.notify_all();
        }
    }
    consumer.join().unwrap();

    let barrier = Arc::new(Barrier::new(3));
    let table = Arc::new(RwLock::new(0u32));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (barrier, table) = (barrier.clone(), table.clone());
                gyr::thread::spawn_scoped(s, move || {
                    for _ in 0..5 {
                        barrier.wait();
                        *table.write().unwrap() += 1;
                        let _ = *table.read().unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    assert_eq!(*table.read().unwrap(), 15);
}

#[gyr::instrument]
fn instrumented(x: u32) -> u32 {
    let _inner = gyr::span!("inner");
    x + 1
}

fn record_workload() -> MemorySink {
    let mem = MemorySink::new();
    let rt = Builder::new().sink(mem.clone()).start().unwrap();
    workload();
    assert_eq!(instrumented(1), 2);
    rt.shutdown();
    mem
}

fn u(v: &Value) -> u64 {
    match v {
        Value::UInt(x) => *x,
        Value::Bool(b) => *b as u64,
        other => panic!("not an integer: {other:?}"),
    }
}

#[test]
fn forks_name_the_threads_that_begin() {
    let _g = support::serial();
    let mem = record_workload();
    let forks = mem.events("gyr.thread.fork");
    let begins = mem.events("gyr.thread.begin");
    assert_eq!(forks.len(), 8, "4 workers, a consumer, 3 scoped threads");
    for (fork, fields) in &forks {
        let child = u(&fields[0]);
        let (begin, b) = begins
            .iter()
            .find(|(r, _)| r.thread == child)
            .unwrap_or_else(|| panic!("thread {child} forked but never began"));
        assert_eq!(u(&b[0]), fork.thread, "the begin names its parent");
        assert!(begin.timestamp >= fork.timestamp);
    }
    let exits = mem.events("gyr.thread.exit");
    assert_eq!(exits.len(), 8);
    let joins = mem.events("gyr.thread.join_end");
    assert_eq!(joins.len(), 8, "every thread joined through the wrapper");
    let roles = mem.events("gyr.thread.role");
    assert_eq!(roles.len(), 4);
    assert!(
        roles
            .iter()
            .all(|(_, f)| f[0] == Value::Str("worker".into()))
    );
    let names: Vec<_> = mem.threads().into_iter().map(|t| t.name).collect();
    assert!(names.iter().any(|n| n == "worker-2"), "{names:?}");
}

#[test]
fn spans_record_begin_and_end() {
    let _g = support::serial();
    let mem = record_workload();
    let names = |ty| -> Vec<Value> {
        mem.events(ty)
            .into_iter()
            .map(|(_, f)| f[0].clone())
            .collect()
    };
    let begin = names("gyr.span.begin");
    let end = names("gyr.span.end");
    assert_eq!(
        begin,
        vec![
            Value::Str("instrumented".into()),
            Value::Str("inner".into())
        ]
    );
    assert_eq!(
        end,
        vec![
            Value::Str("inner".into()),
            Value::Str("instrumented".into())
        ]
    );
}

/// Delivers the records thread by thread, last thread first: the worst order for the filter,
/// since every thread's events arrive before its causes.
fn worst_order(mem: &MemorySink) -> (Vec<OwnedRecord>, SyncDecoder) {
    let mut by_thread: HashMap<u64, Vec<OwnedRecord>> = HashMap::new();
    let mut decoder = SyncDecoder::new();
    for r in mem.records() {
        if let Some(s) = mem.schema(r.type_id) {
            decoder.add_schema(&s);
        }
        by_thread.entry(r.thread).or_default().push(r);
    }
    let mut threads: Vec<_> = by_thread.into_iter().collect();
    threads.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    (threads.into_iter().flat_map(|(_, r)| r).collect(), decoder)
}

#[test]
fn the_ordering_filter_restores_causal_order() {
    let _g = support::serial();
    let mem = record_workload();
    let (records, decoder) = worst_order(&mem);
    let total = records.len();
    let mut filter = OrderFilter::new(usize::MAX);
    let mut out = Vec::new();
    for r in records {
        let kind = decoder.classify(r.type_id, &r.payload);
        filter.push(
            Event {
                thread: r.thread,
                kind,
                data: (),
            },
            &mut |e| out.push(e),
        );
    }
    filter.finish(&mut |e| out.push(e));
    let stats = filter.stats();
    assert_eq!(out.len(), total, "every event exactly once");
    assert_eq!(
        stats.forced,
        0,
        "no cause is missing: {:?}",
        filter.take_stalls()
    );
    assert!(
        stats.hold_back_ratio() > 0.0,
        "the worst order holds events back"
    );

    // Per mutex (and rwlock writes), acquisitions and releases alternate: 1, 1, 2, 2, ...
    let mut last: HashMap<u64, (u64, bool)> = HashMap::new();
    let mut begun: Vec<u64> = Vec::new();
    let mut forked: Vec<u64> = Vec::new();
    let mut signals: HashMap<u64, u64> = HashMap::new();
    for e in &out {
        match e.kind {
            SyncEvent::MutexAcquire { mutex, n } => {
                let (prev, released) = last.get(&mutex).copied().unwrap_or((0, true));
                assert!(
                    released && n == prev + 1,
                    "acquire {n} of {mutex} after {prev}"
                );
                last.insert(mutex, (n, false));
            }
            SyncEvent::MutexRelease { mutex, n } => {
                assert_eq!(
                    last.get(&mutex),
                    Some(&(n, false)),
                    "release {n} of {mutex}"
                );
                last.insert(mutex, (n, true));
            }
            SyncEvent::SharedAcquire { lock, after } => {
                let (prev, _) = last.get(&lock).copied().unwrap_or((0, true));
                assert!(prev >= after, "a read after write {after} came before it");
            }
            SyncEvent::Fork { child } => forked.push(child),
            SyncEvent::ThreadBegin { parent: Some(_) } => {
                assert!(
                    forked.contains(&e.thread),
                    "thread {} began before its fork",
                    e.thread
                );
                begun.push(e.thread);
            }
            SyncEvent::CondSignal { cond, n } => {
                let s = signals.entry(cond).or_default();
                assert_eq!(*s + 1, n, "signals of {cond} in order");
                *s = n;
            }
            SyncEvent::CondWake { cond, after } => {
                assert!(signals.get(&cond).copied().unwrap_or(0) >= after);
            }
            _ => {}
        }
    }
    assert_eq!(begun.len(), 8);
}
