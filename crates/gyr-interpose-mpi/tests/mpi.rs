//! C and Fortran MPI programs (`tests/c/ranks.c`, `tests/c/ranks.f90`, compiled here with
//! `mpicc` and `mpif90`) run with 4 ranks under the interposer: each rank's trace reads cleanly,
//! every call is recorded, every send matches exactly one receive, requests complete, wildcards
//! resolve to the actual source and tag, communicators map to world ranks, collectives carry
//! their sizes, and a rank that aborts leaves the others' traces readable. A hybrid MPI +
//! OpenMP program (`tests/c/hybrid.c`) has several threads of each rank calling MPI at once.
//!
//! Skipped, with a line saying so, where Open MPI's `mpicc` is missing (`scripts/test`
//! installs it).

use gyr_core::trace::{Item, ReadSummary, TraceEnd, TraceReader};
use gyr_core::value::{Value, decode};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const RANKS: usize = 4;

/// `libgyr_mpi.so`, built beside this test (in `deps/`) or one directory up.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [deps, deps.parent().unwrap()]
        .iter()
        .map(|d| d.join("libgyr_mpi.so"))
        .find(|p| p.exists())
        .expect("libgyr_mpi.so is built with the tests")
}

/// Whether Open MPI's compiler wrapper is here; says so when it is not.
fn have_mpi() -> bool {
    let ok = Command::new("mpicc")
        .arg("--showme:version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "skipped: mpicc not found; install Open MPI (apt-get install libopenmpi-dev \
             openmpi-bin gfortran) to run the MPI interposer's tests"
        );
    }
    ok
}

/// `source` (in `tests/c`) compiled by `compiler`, with `flags` besides, into `dir`.
fn compile(compiler: &str, source: &str, dir: &Path, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(source);
    let bin = dir.join(source.replace('.', "_"));
    let out = Command::new(compiler)
        .args(flags)
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} runs: {e}"));
    assert!(
        out.status.success(),
        "{compiler} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Runs `bin` with `args` on 4 ranks under the interposer, its traces `dir/t-test.<rank>.gyr`.
fn mpirun(dir: &Path, bin: &Path, args: &[&str]) -> Output {
    // One job at a time: several jobs' ranks busy-polling on a small machine crawl.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(RANKS.to_string())
        // Shared memory without the single-copy mechanism, which containers often forbid.
        .args(["--mca", "btl", "self,vader"])
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"]);
    for var in [
        "LD_PRELOAD",
        "GYR_TRACE",
        "GYR_POLICY",
        "GYR_SOCKET_DIR",
        "GYR_MPI_JOB",
    ] {
        cmd.args(["-x", var]);
    }
    cmd.arg(bin)
        .args(args)
        .current_dir(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("LD_PRELOAD", library())
        .env("GYR_TRACE", dir.join("t-%j.%r.gyr"))
        // Deterministic for the checks: a full ring waits rather than dropping.
        .env("GYR_POLICY", "block")
        .env("GYR_SOCKET_DIR", dir.join("sockets"))
        .env("GYR_MPI_JOB", "test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("mpirun runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "mpirun hung: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// One event of a rank's trace.
#[derive(Debug, Clone)]
struct Ev {
    name: String,
    thread: u64,
    /// The record's time stamp, in ns.
    ts: u64,
    values: Vec<Value>,
}

impl Ev {
    fn u(&self, i: usize) -> u64 {
        match &self.values[i] {
            Value::UInt(v) => *v,
            Value::Int(v) => *v as u64,
            v => panic!("{}: field {i} is {v:?}", self.name),
        }
    }
    fn i(&self, i: usize) -> i64 {
        match &self.values[i] {
            Value::UInt(v) => *v as i64,
            Value::Int(v) => *v,
            v => panic!("{}: field {i} is {v:?}", self.name),
        }
    }
    fn s(&self, i: usize) -> &str {
        match &self.values[i] {
            Value::Str(s) => s,
            v => panic!("{}: field {i} is {v:?}", self.name),
        }
    }
    fn b(&self, i: usize) -> bool {
        match &self.values[i] {
            Value::Bool(b) => *b,
            v => panic!("{}: field {i} is {v:?}", self.name),
        }
    }
}

/// A rank's trace, read whole (events in the order its one thread recorded them).
#[derive(Debug)]
struct Trace {
    events: Vec<Ev>,
    summary: ReadSummary,
    end: Option<TraceEnd>,
}

impl Trace {
    fn read(path: &Path) -> Trace {
        let mut reader = TraceReader::open(path)
            .unwrap_or_else(|e| panic!("{} does not open: {e}", path.display()));
        let mut raw = Vec::new();
        let mut end = None;
        reader.for_each_item(|item| match item {
            Item::Record { record, .. } => raw.push((
                record.thread,
                record.header.timestamp,
                record.header.type_id,
                record.payload.to_vec(),
            )),
            Item::End(e) => end = Some(e.clone()),
            _ => {}
        });
        let schemas = reader.schemas().clone();
        let events = raw
            .into_iter()
            .filter_map(|(thread, ts, ty, payload)| {
                let schema = schemas.get(&ty)?;
                Some(Ev {
                    name: schema.name.clone(),
                    thread,
                    ts,
                    values: decode(schema, &payload).expect("payloads decode"),
                })
            })
            .collect();
        Trace {
            events,
            summary: reader.summary().clone(),
            end,
        }
    }

    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Ev> + 'a {
        self.events.iter().filter(move |e| e.name == name)
    }

    fn assert_clean(&self) {
        assert!(
            self.summary.damage.is_empty(),
            "damage: {:?}",
            self.summary.damage
        );
        assert!(self.summary.clean_end, "the trace was not closed");
        assert_eq!(self.end.as_ref().expect("an end block").lost, 0);
    }

    /// The calls recorded, each `begin` followed by its `end` before the next `begin`.
    fn calls(&self) -> Vec<String> {
        self.calls_of(None)
    }

    /// The same for one thread's events (`None`: all).
    fn calls_of(&self, thread: Option<u64>) -> Vec<String> {
        let mut open: Option<String> = None;
        let mut calls = Vec::new();
        for e in self
            .events
            .iter()
            .filter(|e| thread.is_none_or(|t| e.thread == t))
        {
            match e.name.as_str() {
                "gyr.mpi.begin" => {
                    assert!(open.is_none(), "{} began inside {open:?}", e.s(0));
                    open = Some(e.s(0).to_owned());
                }
                "gyr.mpi.end" => {
                    let call = open.take().expect("an end after its begin");
                    assert_eq!(call, e.s(0));
                    assert_eq!(e.i(1), 0, "{call} returned an error");
                    calls.push(call);
                }
                _ => {}
            }
        }
        assert!(open.is_none(), "{open:?} never ended");
        calls
    }
}

/// A run's traces, one per rank.
struct Run {
    _dir: tempfile::TempDir,
    out: Output,
    traces: Vec<Option<Trace>>,
}

fn run(compiler: &str, source: &str, args: &[&str]) -> Run {
    run_with(compiler, source, &[], args)
}

fn run_with(compiler: &str, source: &str, flags: &[&str], args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(compiler, source, dir.path(), flags);
    let out = mpirun(dir.path(), &bin, args);
    let traces = (0..RANKS)
        .map(|r| {
            let p = dir.path().join(format!("t-test.{r}.gyr"));
            p.exists().then(|| Trace::read(&p))
        })
        .collect();
    Run {
        _dir: dir,
        out,
        traces,
    }
}

impl Run {
    fn assert_success(&self) {
        assert!(
            self.out.status.success(),
            "mpirun failed: {}{}",
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        );
    }

    fn trace(&self, rank: usize) -> &Trace {
        self.traces[rank]
            .as_ref()
            .unwrap_or_else(|| panic!("rank {rank} wrote no trace"))
    }
}

/// The C program's `all` scenario, run once for the tests that read it.
fn c_run() -> Option<&'static Run> {
    static RUN: OnceLock<Option<Run>> = OnceLock::new();
    RUN.get_or_init(|| {
        have_mpi().then(|| {
            let r = run("mpicc", "ranks.c", &["all"]);
            r.assert_success();
            r
        })
    })
    .as_ref()
}

/// (source, destination, comm, tag) → the bytes of the n-th message, from the sends and from
/// the receives: the two must be equal.
type Matching = BTreeMap<(u64, u64, u64, i64), Vec<u64>>;

fn messages(run: &Run) -> (Matching, Matching) {
    let (mut sent, mut received) = (Matching::new(), Matching::new());
    for rank in 0..RANKS {
        let t = run.trace(rank);
        for e in t.named("gyr.msg.send") {
            sent.entry((rank as u64, e.u(0), e.u(3), e.i(1)))
                .or_default()
                .push(e.u(2));
        }
        for e in t.named("gyr.msg.recv") {
            received
                .entry((e.u(0), rank as u64, e.u(3), e.i(1)))
                .or_default()
                .push(e.u(2));
        }
    }
    (sent, received)
}

#[test]
fn every_rank_records_every_call_and_its_rank() {
    let Some(run) = c_run() else { return };
    for rank in 0..RANKS {
        let t = run.trace(rank);
        t.assert_clean();
        let calls = t.calls();
        for expected in [
            "MPI_Init_thread",
            "MPI_Send",
            "MPI_Recv",
            "MPI_Isend",
            "MPI_Irecv",
            "MPI_Issend",
            "MPI_Waitall",
            "MPI_Waitsome",
            "MPI_Send_init",
            "MPI_Recv_init",
            "MPI_Startall",
            "MPI_Waitany",
            "MPI_Request_free",
            "MPI_Sendrecv",
            "MPI_Sendrecv_replace",
            "MPI_Comm_split",
            "MPI_Cart_create",
            "MPI_Comm_free",
            "MPI_Barrier",
            "MPI_Bcast",
            "MPI_Reduce",
            "MPI_Allreduce",
            "MPI_Gather",
            "MPI_Gatherv",
            "MPI_Scatter",
            "MPI_Scatterv",
            "MPI_Allgather",
            "MPI_Allgatherv",
            "MPI_Alltoall",
            "MPI_Alltoallv",
            "MPI_Reduce_scatter_block",
            "MPI_Reduce_scatter",
            "MPI_Scan",
            "MPI_Exscan",
            "MPI_Finalize",
        ] {
            assert!(
                calls.iter().any(|c| c == expected),
                "rank {rank} has no {expected}: {calls:?}"
            );
        }
        let ranks: Vec<_> = t.named("gyr.msg.rank").collect();
        assert_eq!(ranks.len(), 1);
        assert_eq!(ranks[0].s(0), "test");
        assert_eq!(ranks[0].u(1), rank as u64);
        assert_eq!(ranks[0].u(2), RANKS as u64);
    }
    assert!(run.trace(0).calls().iter().any(|c| c == "MPI_Test"));
    assert!(run.trace(2).calls().iter().any(|c| c == "MPI_Probe"));
}

#[test]
fn every_send_matches_exactly_one_receive() {
    let Some(run) = c_run() else { return };
    let (sent, received) = messages(run);
    assert_eq!(sent, received);
    // Nothing to or from MPI_PROC_NULL.
    assert!(!sent.keys().any(|k| k.3 == 14));
    // The blocking ring: 8 ints from each rank to the next.
    for r in 0..RANKS as u64 {
        assert_eq!(sent[&(r, (r + 1) % 4, 0, 10)], [32]);
        assert_eq!(sent[&(r, (r + 1) % 4, 0, 11)], [32]);
        assert_eq!(
            sent[&(r, (r + 1) % 4, 0, 12)],
            [8, 8],
            "persistent, started twice"
        );
        assert_eq!(sent[&(r, (r + 3) % 4, 0, 15)], [20]);
    }
}

/// A call's message shares one clock reading with the event beside it (`gyr::emit_at`): a send
/// has its call's begin time, a receive (and a request's completion) its call's end time; and
/// no thread's events go back in time.
#[test]
fn a_message_shares_its_call_s_begin_or_end_time() {
    let Some(run) = c_run() else { return };
    for rank in 0..RANKS {
        let t = run.trace(rank);
        let mut last: HashMap<u64, u64> = HashMap::new();
        // Per thread: the open call's name and begin time, and what must end with it.
        let mut open: HashMap<u64, (String, u64, Vec<u64>)> = HashMap::new();
        let (mut sends, mut recvs) = (0, 0);
        for e in &t.events {
            let before = last.insert(e.thread, e.ts).unwrap_or(0);
            assert!(e.ts >= before, "rank {rank}: {} went back in time", e.name);
            match e.name.as_str() {
                "gyr.mpi.begin" => {
                    open.insert(e.thread, (e.s(0).to_owned(), e.ts, Vec::new()));
                }
                "gyr.msg.send" => {
                    let (call, begin, _) = &open[&e.thread];
                    // A persistent send is recorded when `MPI_Start(all)` starts it, after
                    // the request's own event.
                    if !call.starts_with("MPI_Start") {
                        assert_eq!(e.ts, *begin, "rank {rank}: {call}'s send");
                        sends += 1;
                    }
                }
                "gyr.msg.recv" | "gyr.mpi.complete" => {
                    open.get_mut(&e.thread).expect("inside a call").2.push(e.ts);
                    recvs += usize::from(e.name == "gyr.msg.recv");
                }
                "gyr.mpi.end" => {
                    let (call, _, ends) = open.remove(&e.thread).expect("an end after its begin");
                    for ts in ends {
                        assert_eq!(ts, e.ts, "rank {rank}: {call}'s receive or completion");
                    }
                }
                _ => {}
            }
        }
        assert!(
            sends > 5 && recvs > 5,
            "rank {rank}: {sends} sends, {recvs} receives"
        );
    }
}

#[test]
fn wildcard_receives_resolve_to_the_actual_source_and_tag() {
    let Some(run) = c_run() else { return };
    let t = run.trace(0);
    let recvs: Vec<_> = t
        .named("gyr.msg.recv")
        .filter(|e| e.i(1) >= 100)
        .map(|e| (e.u(0), e.i(1), e.u(2)))
        .collect();
    let mut sorted = recvs.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [(1, 101, 4), (2, 102, 8), (3, 103, 12), (3, 200, 12)]
    );
    // The Irecv was posted for any source, and said so.
    assert!(
        t.named("gyr.mpi.request")
            .any(|e| e.b(2) && e.i(3) == -1 && e.i(4) == 200)
    );
}

#[test]
fn requests_complete_once_and_persistent_ones_at_each_start() {
    let Some(run) = c_run() else { return };
    for rank in 0..RANKS {
        let t = run.trace(rank);
        let mut posted: HashMap<u64, usize> = HashMap::new();
        for e in t.named("gyr.mpi.request") {
            *posted.entry(e.u(0)).or_default() += 1;
        }
        let mut completed: HashMap<u64, usize> = HashMap::new();
        for e in t.named("gyr.mpi.complete") {
            assert!(!e.b(1), "nothing was cancelled");
            *completed.entry(e.u(0)).or_default() += 1;
        }
        assert_eq!(posted, completed, "rank {rank}");
        // Two persistent requests, started twice each.
        assert_eq!(posted.values().filter(|&&n| n == 2).count(), 2);
    }
}

#[test]
fn a_split_communicator_carries_world_ranks() {
    let Some(run) = c_run() else { return };
    let (sent, _) = messages(run);
    let on_half: Vec<_> = sent.keys().filter(|k| k.3 == 20).copied().collect();
    // Keys -rank reverse each half: its rank 0 is world 2 (evens) or 3 (odds).
    assert_eq!(on_half.len(), 2);
    let (even, odd) = (
        on_half.iter().find(|k| k.0 == 2),
        on_half.iter().find(|k| k.0 == 3),
    );
    let (even, odd) = (even.expect("2 -> 0"), odd.expect("3 -> 1"));
    assert_eq!(even.1, 0);
    assert_eq!(odd.1, 1);
    assert!(even.2 > 1 && odd.2 > 1 && even.2 != odd.2);
    for rank in 0..RANKS {
        let t = run.trace(rank);
        let split: Vec<_> = t
            .named("gyr.mpi.comm")
            .filter(|e| e.s(0) == "MPI_Comm_split")
            .collect();
        assert_eq!(split.len(), 1);
        let expected = if rank % 2 == 0 {
            (even.2, "2,0")
        } else {
            (odd.2, "3,1")
        };
        assert_eq!((split[0].u(1), split[0].s(4)), expected);
        assert_eq!((split[0].u(2), split[0].u(3)), (0, 2));
        assert!(t.named("gyr.mpi.comm_free").any(|e| e.u(0) == expected.0));
        // The Cart_create communicator: the same id everywhere, all four ranks.
        let cart: Vec<_> = t
            .named("gyr.mpi.comm")
            .filter(|e| e.s(0) == "MPI_Cart_create")
            .collect();
        assert_eq!(cart.len(), 1);
        assert_eq!(cart[0].s(4), "0,1,2,3");
        let cart0 = run
            .trace(0)
            .named("gyr.mpi.comm")
            .find(|e| e.s(0) == "MPI_Cart_create")
            .unwrap()
            .u(1);
        assert_eq!(cart[0].u(1), cart0);
    }
}

#[test]
fn collectives_carry_comm_root_and_sizes() {
    let Some(run) = c_run() else { return };
    for rank in 0..RANKS {
        let t = run.trace(rank);
        let coll: HashMap<&str, (u64, i64, u64, u64)> = t
            .named("gyr.mpi.collective")
            .filter(|e| e.u(1) == 0)
            .map(|e| (e.s(0), (e.u(1), e.i(2), e.u(3), e.u(4))))
            .collect();
        let bcast = if rank == 1 {
            (0, 1, 128, 0)
        } else {
            (0, 1, 0, 128)
        };
        assert_eq!(coll["MPI_Bcast"], bcast);
        assert_eq!(coll["MPI_Barrier"], (0, -1, 0, 0));
        assert_eq!(coll["MPI_Allreduce"], (0, -1, 128, 128));
        let reduce = if rank == 2 {
            (0, 2, 128, 128)
        } else {
            (0, 2, 128, 0)
        };
        assert_eq!(coll["MPI_Reduce"], reduce);
        let gather = if rank == 0 {
            (0, 0, 16, 64)
        } else {
            (0, 0, 16, 0)
        };
        assert_eq!(coll["MPI_Gather"], gather);
        assert_eq!(coll["MPI_Gatherv"], gather);
        let scatter = if rank == 0 {
            (0, 0, 64, 16)
        } else {
            (0, 0, 0, 16)
        };
        assert_eq!(coll["MPI_Scatter"], scatter);
        assert_eq!(coll["MPI_Scatterv"], scatter);
        assert_eq!(coll["MPI_Allgather"], (0, -1, 16, 64));
        assert_eq!(coll["MPI_Allgatherv"], (0, -1, 16, 64));
        assert_eq!(coll["MPI_Alltoall"], (0, -1, 64, 64));
        assert_eq!(coll["MPI_Alltoallv"], (0, -1, 64, 64));
        assert_eq!(coll["MPI_Reduce_scatter_block"], (0, -1, 64, 16));
        assert_eq!(coll["MPI_Reduce_scatter"], (0, -1, 64, 16));
        assert_eq!(coll["MPI_Scan"], (0, -1, 24, 24));
        assert_eq!(coll["MPI_Exscan"], (0, -1, 24, 24));
        // The nonblocking ones record what their blocking forms do.
        assert_eq!(coll["MPI_Ibarrier"], coll["MPI_Barrier"]);
        assert_eq!(coll["MPI_Ibcast"], bcast);
        assert_eq!(coll["MPI_Ireduce"], reduce);
        assert_eq!(coll["MPI_Iallreduce"], coll["MPI_Allreduce"]);
        assert_eq!(coll["MPI_Igather"], gather);
        assert_eq!(coll["MPI_Iscatter"], scatter);
        assert_eq!(coll["MPI_Iallgather"], coll["MPI_Allgather"]);
        assert_eq!(coll["MPI_Ialltoall"], coll["MPI_Alltoall"]);
        assert_eq!(coll["MPI_Igatherv"], gather);
        assert_eq!(coll["MPI_Iscatterv"], scatter);
        assert_eq!(coll["MPI_Iallgatherv"], coll["MPI_Allgatherv"]);
        assert_eq!(coll["MPI_Ialltoallv"], coll["MPI_Alltoallv"]);
        assert_eq!(coll["MPI_Ireduce_scatter_block"], (0, -1, 64, 16));
        assert_eq!(coll["MPI_Ireduce_scatter"], (0, -1, 64, 16));
        assert_eq!(coll["MPI_Iscan"], coll["MPI_Scan"]);
        assert_eq!(coll["MPI_Iexscan"], coll["MPI_Exscan"]);
        // The Allreduce on the split communicator.
        assert!(
            t.named("gyr.mpi.collective")
                .any(|e| e.s(0) == "MPI_Allreduce" && e.u(1) > 1 && e.u(3) == 16)
        );
    }
}

#[test]
fn a_fortran_program_is_recorded() {
    if !have_mpi() {
        return;
    }
    let run = run("mpif90", "ranks.f90", &[]);
    run.assert_success();
    for rank in 0..RANKS {
        let t = run.trace(rank);
        t.assert_clean();
        let calls = t.calls();
        for expected in [
            "mpi_init_",
            "mpi_send_",
            "mpi_recv_",
            "mpi_isend_",
            "mpi_irecv_",
            "mpi_waitall_",
            "mpi_sendrecv_",
            "mpi_barrier_",
            "mpi_bcast_",
            "mpi_allreduce_",
            "mpi_reduce_",
            "mpi_alltoall_",
            "mpi_comm_split_",
            "mpi_comm_dup_",
            "mpi_comm_free_",
            "mpi_gather_",
            "mpi_scatter_",
            "mpi_allgather_",
            "mpi_gatherv_",
            "mpi_allgatherv_",
            "mpi_alltoallv_",
            "mpi_scan_",
            "mpi_reduce_scatter_block_",
            "mpi_ibarrier_",
            "mpi_iallreduce_",
            "mpi_waitany_",
            "mpi_igatherv_",
            "mpi_iscan_",
            "mpi_send_init_",
            "mpi_recv_init_",
            "mpi_startall_",
            "mpi_waitsome_",
            "mpi_request_free_",
            "mpi_sendrecv_replace_",
            "mpi_cart_create_",
            "mpi_finalize_",
        ] {
            assert!(
                calls.iter().any(|c| c == expected),
                "rank {rank} has no {expected}: {calls:?}"
            );
        }
        assert!(
            !calls.iter().any(|c| c.starts_with("MPI_")),
            "a Fortran call recorded twice: {calls:?}"
        );
        assert_eq!(t.named("gyr.msg.rank").count(), 1);
        assert_eq!(t.named("gyr.mpi.comm").count(), 3);
        // MPI_IN_PLACE recognised: this rank's part is sent from the receive buffer.
        let allgatherv = t
            .named("gyr.mpi.collective")
            .find(|e| e.s(0) == "mpi_allgatherv_")
            .map(|e| (e.u(3), e.u(4)));
        assert_eq!(allgatherv, Some((16, 64)), "rank {rank}");
    }
    assert!(run.trace(0).calls().iter().any(|c| c == "mpi_wait_"));
    assert!(run.trace(0).calls().iter().any(|c| c == "mpi_issend_"));
    assert!(run.trace(0).calls().iter().any(|c| c == "mpi_test_"));
    assert!(run.trace(1).calls().iter().any(|c| c == "mpi_probe_"));
    let gather = run
        .trace(0)
        .named("gyr.mpi.collective")
        .find(|e| e.s(0) == "mpi_gather_")
        .map(|e| (e.i(2), e.u(3), e.u(4)));
    assert_eq!(gather, Some((0, 16, 64)));
    let igatherv = run
        .trace(0)
        .named("gyr.mpi.collective")
        .find(|e| e.s(0) == "mpi_igatherv_")
        .map(|e| (e.i(2), e.u(3), e.u(4)));
    assert_eq!(igatherv, gather);
    let (sent, received) = messages(&run);
    assert_eq!(sent, received);
    // Rank 0's wildcard receives: the actual sources and tags, 8 bytes per element.
    for r in 1..RANKS as u64 {
        assert_eq!(received[&(r, 0, 0, 10 + r as i64)], [8 * r]);
    }
    // The split's messages: world 0 -> 2 and 1 -> 3.
    let on_half: Vec<_> = sent
        .keys()
        .filter(|k| k.3 == 4)
        .map(|k| (k.0, k.1))
        .collect();
    assert_eq!(on_half, [(0, 2), (1, 3)]);
    // The synchronous send completed by polling, and the persistent sends, started twice.
    assert_eq!(received[&(0, 1, 0, 20)], [40]);
    for r in 0..RANKS as u64 {
        let right = (r + 1) % RANKS as u64;
        assert_eq!(
            sent[&(r, right, 0, 21)],
            [48, 48],
            "rank {r}'s persistent sends"
        );
    }
    let bcast = run
        .trace(2)
        .named("gyr.mpi.collective")
        .find(|e| e.s(0) == "mpi_bcast_")
        .map(|e| (e.i(2), e.u(3), e.u(4)));
    assert_eq!(bcast, Some((2, 64, 0)));
}

#[test]
fn a_rank_that_aborts_leaves_the_others_traces_readable() {
    if !have_mpi() {
        return;
    }
    let run = run("mpicc", "ranks.c", &["abort"]);
    assert!(!run.out.status.success(), "mpirun reports the abort");
    for rank in [0, 2, 3] {
        let t = run.trace(rank);
        assert!(
            t.summary.damage.is_empty(),
            "rank {rank}: {:?}",
            t.summary.damage
        );
        let r: Vec<_> = t.named("gyr.msg.rank").collect();
        assert_eq!(r.len(), 1, "rank {rank} says who it was");
        assert_eq!(r[0].u(1), rank as u64);
    }
    // The aborted rank's own trace, if any, reads too.
    if let Some(t) = &run.traces[1] {
        assert!(t.named("gyr.msg.rank").count() <= 1);
    }
}

#[test]
fn threads_of_a_hybrid_program_call_mpi_at_once() {
    if !have_mpi() {
        return;
    }
    let run = run_with("mpicc", "hybrid.c", &["-fopenmp"], &[]);
    run.assert_success();
    let stdout = String::from_utf8_lossy(&run.out.stdout);
    assert!(stdout.contains("4 ranks"), "{stdout}");
    for rank in 0..RANKS {
        let t = run.trace(rank);
        t.assert_clean();
        let init = t.named("gyr.mpi.begin").next().expect("a first call");
        assert_eq!(init.s(0), "MPI_Init_thread");
        // Every thread's calls pair up on that thread, and three threads exchanged.
        let threads: std::collections::BTreeSet<u64> =
            t.named("gyr.msg.send").map(|e| e.thread).collect();
        assert_eq!(threads.len(), 3, "rank {rank}: sends from {threads:?}");
        let mut sendrecvs = 0;
        for th in &threads {
            let calls = t.calls_of(Some(*th));
            let n = calls.iter().filter(|c| *c == "MPI_Sendrecv").count();
            assert_eq!(n, 50, "rank {rank} thread {th}: {calls:?}");
            sendrecvs += n;
        }
        assert_eq!(sendrecvs, 150);
        assert_eq!(t.named("gyr.mpi.collective").count(), 1);
    }
    // Each thread's tag: 50 messages each way between neighbours, sent and received.
    let (sent, received) = messages(&run);
    assert_eq!(sent, received);
    for ((src, dst, _, tag), sizes) in &sent {
        assert_eq!((*src as usize + 1) % RANKS, *dst as usize);
        assert!((0..3).contains(tag), "tag {tag}");
        assert_eq!(sizes.len(), 50);
    }
    assert_eq!(sent.len(), RANKS * 3);
}
