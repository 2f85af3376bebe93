//! C and C++ programs (`tests/c/workload.c` and `tests/c/cxx.cc`, compiled here with `cc` and
//! `c++`) run under the interposer: each scenario's trace reads cleanly, and its thread events, delivered thread by thread with the
//! last thread first, come out of `gyr-trace`'s ordering filter causally consistent.

use gyr_core::schema::{Schema, TypeId};
use gyr_core::trace::{Item, ReadSummary, TraceEnd, TraceReader};
use gyr_trace::{Event, OrderFilter, SyncDecoder, SyncEvent};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `libgyr_interpose.so`, built beside this test (in `deps/`) or one directory up.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps, deps.parent().unwrap()]
        .iter()
        .map(|d| d.join("libgyr_interpose.so"))
        .find(|p| p.exists())
        .expect("libgyr_interpose.so is built with the tests")
}

/// The workload compiled into `dir`.
fn compile(dir: &Path) -> PathBuf {
    compile_with("cc", "workload.c", dir)
}

/// `source` (in `tests/c`) compiled by `compiler` into `dir`.
fn compile_with(compiler: &str, source: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(source);
    let bin = dir.join(source.split('.').next().unwrap());
    let out = Command::new(compiler)
        .args(["-O1", "-g", "-pthread", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} runs (install gcc and g++): {e}"));
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// A scenario run under the interposer, with its trace in `dir`.
struct Run {
    dir: tempfile::TempDir,
    out: Output,
    trace: PathBuf,
}

fn run(scenario: &str, env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path());
    run_program(dir, &bin, &[scenario], env)
}

fn run_program(dir: tempfile::TempDir, bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let trace = dir.path().join("trace.gyr");
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("LD_PRELOAD", library())
        .env("GYR_TRACE", &trace)
        // Deterministic for the checks: a full ring waits rather than dropping.
        .env("GYR_POLICY", "block")
        .env("GYR_SOCKET_DIR", dir.path().join("sockets"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    let out = wait(child, Duration::from_secs(120));
    Run { dir, out, trace }
}

/// Waits for `child`, killing it (and failing) if it outlives `limit`: a hang is a failure.
fn wait(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the program hung; its output: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    fn assert_exit(&self, code: i32) {
        assert_eq!(
            self.out.status.code(),
            Some(code),
            "{}{}",
            self.stdout(),
            self.stderr()
        );
    }
}

/// One record of a trace.
#[derive(Debug, Clone)]
struct Record {
    thread: u64,
    type_id: TypeId,
    payload: Vec<u8>,
}

/// A trace file, read whole.
#[derive(Debug)]
struct Trace {
    records: Vec<Record>,
    schemas: HashMap<TypeId, Schema>,
    summary: ReadSummary,
    end: Option<TraceEnd>,
}

impl Trace {
    fn read(path: &Path) -> Trace {
        let mut reader = TraceReader::open(path)
            .unwrap_or_else(|e| panic!("{} does not open: {e}", path.display()));
        let mut records = Vec::new();
        let mut end = None;
        reader.for_each_item(|item| match item {
            Item::Record { record, .. } => records.push(Record {
                thread: record.thread,
                type_id: record.header.type_id,
                payload: record.payload.to_vec(),
            }),
            Item::End(e) => end = Some(e.clone()),
            _ => {}
        });
        Trace {
            records,
            schemas: reader.schemas().clone(),
            summary: reader.summary().clone(),
            end,
        }
    }

    /// Records of the event type `name`.
    fn count(&self, name: &str) -> usize {
        self.records
            .iter()
            .filter(|r| self.schemas.get(&r.type_id).is_some_and(|s| s.name == name))
            .count()
    }

    /// The payloads' first `u64` field of the event type `name`.
    fn first_fields(&self, name: &str) -> Vec<u64> {
        self.records
            .iter()
            .filter(|r| self.schemas.get(&r.type_id).is_some_and(|s| s.name == name))
            .map(|r| u64::from_le_bytes(r.payload[..8].try_into().unwrap()))
            .collect()
    }

    /// A file closed cleanly, undamaged, that lost nothing.
    fn assert_clean(&self) {
        assert!(
            self.summary.damage.is_empty(),
            "damage: {:?}",
            self.summary.damage
        );
        assert!(self.summary.clean_end, "the trace was not closed");
        let end = self.end.as_ref().expect("an end block");
        assert_eq!(end.lost, 0, "events lost");
        assert_eq!(self.count(gyr_core::LOST_EVENT_NAME), 0);
    }
}

/// What the ordering check saw, for a scenario's own checks.
#[derive(Debug, Default)]
struct Seen {
    forks: usize,
    begins: usize,
    acquisitions: usize,
    signals: usize,
    wakes: usize,
}

/// Delivers the records thread by thread, last thread first (every thread's events before its
/// causes), through the ordering filter, and checks what comes out.
fn check_order(trace: &Trace) -> Seen {
    let mut decoder = SyncDecoder::new();
    for s in trace.schemas.values() {
        decoder.add_schema(s);
    }
    let mut by_thread: HashMap<u64, Vec<&Record>> = HashMap::new();
    for r in &trace.records {
        by_thread.entry(r.thread).or_default().push(r);
    }
    let mut threads: Vec<_> = by_thread.into_iter().collect();
    threads.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    let total = trace.records.len();
    let mut filter = OrderFilter::new(usize::MAX);
    let mut out = Vec::new();
    for r in threads.into_iter().flat_map(|(_, r)| r) {
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
    assert_eq!(out.len(), total, "every event comes out exactly once");
    let stats = filter.stats();
    assert_eq!(
        stats.forced,
        0,
        "no cause is missing: {:?}",
        filter.take_stalls()
    );

    let mut seen = Seen::default();
    // Per mutex (and rwlock writes): acquisition n, release n, acquisition n + 1, ...
    let mut last: HashMap<u64, (u64, bool)> = HashMap::new();
    let mut forked: Vec<u64> = Vec::new();
    let mut signals: HashMap<u64, u64> = HashMap::new();
    for e in &out {
        match e.kind {
            SyncEvent::MutexAcquire { mutex, n } => {
                seen.acquisitions += 1;
                assert_ne!(mutex, 0, "no object went without a slot");
                let (prev, released) = last.get(&mutex).copied().unwrap_or((0, true));
                assert!(
                    released && n == prev + 1,
                    "acquisition {n} of {mutex} after {prev} (released: {released})"
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
                let (prev, released) = last.get(&lock).copied().unwrap_or((0, true));
                assert!(released, "a read of {lock} while write {prev} is held");
                assert!(prev >= after, "a read after write {after} came before it");
            }
            SyncEvent::Fork { child } => {
                seen.forks += 1;
                forked.push(child);
            }
            SyncEvent::ThreadBegin { parent: Some(_) } => {
                seen.begins += 1;
                assert!(
                    forked.contains(&e.thread),
                    "thread {} began before its fork",
                    e.thread
                );
            }
            SyncEvent::CondSignal { cond, n } => {
                seen.signals += 1;
                let s = signals.entry(cond).or_default();
                assert_eq!(*s + 1, n, "signals of {cond} in order");
                *s = n;
            }
            SyncEvent::CondWake { cond, after } => {
                seen.wakes += 1;
                assert!(
                    signals.get(&cond).copied().unwrap_or(0) >= after,
                    "a wake of {cond} after signal {after} came before it"
                );
            }
            _ => {}
        }
    }
    seen
}

#[test]
fn a_thread_pool_with_a_work_queue() {
    let r = run("pool", &[]);
    r.assert_exit(0);
    assert!(r.stdout().contains("pool: total 2001000"), "{}", r.stdout());
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!((seen.forks, seen.begins), (4, 4));
    assert_eq!(t.count("gyr.thread.exit"), 4);
    assert_eq!(t.count("gyr.thread.join_end"), 4);
    // Each of the 2000 tasks is queued and taken under the queue's lock, and added to the
    // total under another; the recursive mutex is recorded once per outer hold.
    assert!(seen.acquisitions >= 3 * 2000, "{seen:?}");
    assert!(seen.signals > 2000, "{seen:?}");
    assert!(t.count("gyr.cond.wait") >= seen.wakes);
}

#[test]
fn producers_and_consumers_with_timed_waits() {
    let r = run("prodcons", &[]);
    r.assert_exit(0);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!(seen.forks, 2);
    assert!(seen.wakes > 0);
    // The program's last wait times out for sure (and its consumers' may).
    let timed_out = t
        .records
        .iter()
        .filter(|r| t.schemas[&r.type_id].name == "gyr.cond.wake" && r.payload[16] == 1)
        .count();
    assert!(timed_out >= 1);
    assert!(t.count("gyr.cond.broadcast") >= 1000);
}

#[test]
fn detached_threads_and_a_main_that_does_not_wait_for_their_end() {
    let r = run("detached", &[]);
    r.assert_exit(0);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!((seen.forks, seen.begins), (9, 9));
    // By attribute (recorded by the parent at creation), by the thread itself, by its parent.
    assert_eq!(t.count("gyr.thread.detach"), 9);
    assert_eq!(t.count("gyr.thread.join_end"), 0);
}

#[test]
fn barrier_generations_and_a_barrier_made_again() {
    let r = run("barrier", &[]);
    r.assert_exit(0);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    check_order(&t);
    assert_eq!(t.count("gyr.barrier.arrive"), 4 * 10 + 2 * 10);
    assert_eq!(t.count("gyr.barrier.depart"), 4 * 10 + 2 * 10);
    let mut barriers = t.first_fields("gyr.barrier.depart");
    barriers.sort();
    barriers.dedup();
    assert_eq!(
        barriers.len(),
        2,
        "a destroyed barrier's address gets a new id"
    );
}

#[test]
fn readers_and_writers() {
    let r = run("rwlock", &[]);
    r.assert_exit(0);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    check_order(&t);
    let acquisitions: Vec<bool> = t
        .records
        .iter()
        .filter(|r| t.schemas[&r.type_id].name == "gyr.rwlock.acquire")
        .map(|r| r.payload[8] == 1)
        .collect();
    let writes = acquisitions.iter().filter(|w| **w).count();
    assert_eq!(
        writes, 401,
        "400 by the writers, one by main (its second is refused)"
    );
    assert_eq!(acquisitions.len() - writes, 900);
}

#[test]
fn a_forked_child_records_nothing_and_an_executed_one_writes_its_own_trace() {
    let r = run("fork", &[]);
    r.assert_exit(0);
    let out = r.stdout();
    let line = out
        .lines()
        .find(|l| l.starts_with("fork: children"))
        .unwrap();
    let pids: Vec<u32> = line
        .split_whitespace()
        .skip(2)
        .map(|p| p.parse().unwrap())
        .collect();
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!(seen.forks, 2, "the two spinners; nothing of the children");
    // The child that ran on wrote nowhere; the one that executed the program wrote its own.
    let mut files: Vec<String> = std::fs::read_dir(r.dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("trace.gyr"))
        .collect();
    files.sort();
    assert_eq!(
        files,
        vec!["trace.gyr".to_owned(), format!("trace.gyr.{}", pids[1])]
    );
    let exec = Trace::read(&r.dir.path().join(format!("trace.gyr.{}", pids[1])));
    exec.assert_clean();
    assert_eq!(check_order(&exec).forks, 4);
}

#[test]
fn exit_from_a_worker_while_others_hold_locks() {
    let r = run("exit", &[]);
    r.assert_exit(3);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!(seen.forks, 4);
    // The three holders' acquisitions and the exiting worker's 500, all before exit().
    assert!(seen.acquisitions >= 503, "{seen:?}");
    assert_eq!(t.count("gyr.barrier.depart"), 4);
    assert_eq!(
        t.count("gyr.thread.exit"),
        1,
        "the worker that called exit()"
    );
}

#[test]
fn pthread_exit_from_workers_and_from_main() {
    let r = run("pexit", &[]);
    r.assert_exit(0);
    assert!(
        r.stdout().contains("the C11 thread ends last"),
        "the process ends when its last thread does, not before: {}",
        r.stdout()
    );
    let t = Trace::read(&r.trace);
    t.assert_clean();
    check_order(&t);
    assert_eq!(t.count("gyr.thread.exit"), 4, "three workers and main");
    assert_eq!(t.count("gyr.thread.join_end"), 2);
}

#[test]
fn a_thread_started_before_main() {
    let r = run("static", &[("WORKLOAD_EARLY_THREAD", "1")]);
    r.assert_exit(0);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!((seen.forks, seen.begins), (1, 1));
    assert_eq!(t.count("gyr.thread.join_end"), 1);
}

#[test]
fn a_full_table_degrades_to_unordered_events_and_says_so() {
    let r = run("overflow", &[]);
    r.assert_exit(0);
    assert!(
        r.stderr().contains("found no room"),
        "the overflow is reported: {}",
        r.stderr()
    );
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let mutexes = t.first_fields("gyr.mutex.acquire");
    assert_eq!(mutexes.len(), 70_000);
    let unordered = mutexes.iter().filter(|m| **m == 0).count();
    assert!(unordered > 0 && unordered < 70_000 - 60_000, "{unordered}");
}

#[test]
fn threads_cancelled_while_waiting_sleeping_and_starting() {
    // Under Block, calls into gyr hold the thread's cancellation off; under Drop only a
    // thread's start does (nothing else in them reaches a cancellation point).
    for policy in ["block", "drop"] {
        let r = run("cancel", &[("GYR_POLICY", policy)]);
        r.assert_exit(0);
        let t = Trace::read(&r.trace);
        t.assert_clean();
        let seen = check_order(&t);
        assert_eq!((seen.forks, seen.begins), (22, 22), "{policy}");
        assert_eq!(
            t.count("gyr.thread.exit"),
            22,
            "{policy}: a cancelled thread's end"
        );
        assert_eq!(t.count("gyr.thread.join_end"), 22, "{policy}");
    }
}

#[test]
fn a_cpp_program_with_std_threads_mutexes_and_condition_variables() {
    let dir = tempfile::tempdir().unwrap();
    let bin = compile_with("c++", "cxx.cc", dir.path());
    let r = run_program(dir, &bin, &[], &[]);
    r.assert_exit(0);
    let t = Trace::read(&r.trace);
    t.assert_clean();
    let seen = check_order(&t);
    assert_eq!((seen.forks, seen.begins), (3, 3));
    assert_eq!(t.count("gyr.thread.exit"), 3);
    assert_eq!(t.count("gyr.thread.join_end"), 3);
    // std::condition_variable's timed waits (pthread_cond_clockwait) are seen.
    assert!(t.count("gyr.cond.wait") > 0 && seen.wakes > 0, "{seen:?}");
    // std::shared_mutex: 200 writes, 800 reads.
    assert_eq!(t.count("gyr.rwlock.acquire"), 1000);
}
