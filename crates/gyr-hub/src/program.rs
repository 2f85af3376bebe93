//! What the hub knows of each program it watches (its identity, state, threads, event types
//! and steering log) and how one batch of its stream is taken in; [`Programs`] holds them all,
//! each behind its own lock, so that ingesting one program never waits for another.

use crate::analysis::{Series, TypeCount, TypeState};
use crate::protocol::{Alert, Groups, LogLine, Stats};
use gyr_core::record::Records;
use gyr_core::value::decode;
use gyr_core::{RecordHeader, Schema, ThreadInfo};
use gyr_proto::v1;
use indexmap::IndexMap;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// Steering-log entries and alerts kept per program.
const LOG_ENTRIES: usize = 500;
/// Threads the hub keeps state for per program: as many as the life-time view draws.
pub(crate) const MAX_THREADS: usize = gyr_trace::timeline::DEFAULT_MAX_THREADS;

/// The state of `thread`, unless it would be past [`MAX_THREADS`] (then counted in `untracked`).
fn thread_state<'a>(
    threads: &'a mut BTreeMap<u64, ThreadState>,
    untracked: &mut u64,
    thread: u64,
) -> Option<&'a mut ThreadState> {
    if threads.len() >= MAX_THREADS && !threads.contains_key(&thread) {
        *untracked += 1;
        return None;
    }
    Some(threads.entry(thread).or_default())
}

/// What the hub knows of one thread of a program.
#[derive(Debug, Default)]
pub(crate) struct ThreadState {
    pub(crate) name: String,
    /// Whether the update stream has carried this name (a snapshot always carries it).
    pub(crate) name_sent: bool,
    pub(crate) count: TypeCount,
    /// The highest sequence number taken in: a record seen twice (a program that both pushes
    /// and is attached, for a moment) is taken once.
    last_seq: Option<u64>,
}

/// How the hub knows a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Found in the announcement directory and attached to.
    Attached,
    /// It connected and pushes its stream (`GYR_HUB`).
    Pushed,
    /// Read from a trace file.
    Replay,
}

impl Source {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Attached => "attached",
            Source::Pushed => "pushed",
            Source::Replay => "replay",
        }
    }
}

/// One watched program.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) pid: u32,
    pub(crate) command_line: Vec<String>,
    /// When it started (from its announcement): tells a new program from an old one's pid.
    pub(crate) started_unix_ns: u64,
    /// Wall-clock time of its timestamp 0 (for trace files written by the hub).
    pub(crate) clock_zero_unix_ns: u64,
    /// The latest clock anchor its stream carried, handed on to the hub's subscribers.
    pub(crate) anchor: Option<v1::ClockAnchor>,
    pub(crate) host: String,
    pub(crate) source: Source,
    pub(crate) alive: bool,
    /// Its event streams still open (attached or pushed): the hub's subscribers to it alone
    /// are ended only once it is gone and the last of these has delivered its last batch.
    pub(crate) streams: u32,
    pub(crate) status: Option<v1::StatusReply>,
    pub(crate) objects: Option<v1::ListObjectsReply>,
    pub(crate) sensors: Option<v1::SensorsReply>,
    /// Events the hub took in from it, and events its stream said the hub missed.
    pub(crate) received: u64,
    pub(crate) missed: u64,
    /// Records of a type whose schema never arrived, or too short for it.
    pub(crate) unreadable: u64,
    pub(crate) types: HashMap<u32, TypeState>,
    /// At most [`MAX_THREADS`]; records of further threads are taken in without per-thread
    /// state (counted in `untracked_records`), so a stream naming millions of threads cannot
    /// grow the hub.
    pub(crate) threads: BTreeMap<u64, ThreadState>,
    /// Threads past [`MAX_THREADS`]: their records are counted in the totals, not per thread,
    /// and a record of theirs seen twice is not recognised.
    pub(crate) untracked_records: u64,
    /// The stream's schemas and threads as they arrived: what a new subscriber of the hub or
    /// a trace file needs before the records.
    pub(crate) wire_schemas: Vec<v1::Schema>,
    /// The same schemas as the hub read them (once): what a trace file written by the hub
    /// takes.
    pub(crate) schemas: Vec<Schema>,
    /// The threads' descriptions by id, in arrival order (a rename replaces its entry).
    pub(crate) wire_threads: IndexMap<u64, v1::ThreadInfo>,
    /// Steering-log entries, as the gRPC API gives them, and as the pages get them.
    pub(crate) log_entries: VecDeque<v1::LogEntry>,
    /// The steering log and alerts as pages get them: all kept, and what is new since the
    /// last update.
    pub(crate) log: VecDeque<LogLine>,
    pub(crate) fresh_log: Vec<LogLine>,
    pub(crate) fresh_alerts: Vec<Alert>,
    pub(crate) alerts: VecDeque<Alert>,
    /// The thread life-time view.
    pub(crate) lifetimes: crate::lifetimes::Lifetimes,
    scratch: Vec<f64>,
    /// The event types the hub's rules watch, when it runs rules.
    pub(crate) rules_watch: Option<Arc<crate::rules::Watch>>,
    /// Events of those types taken in and not yet handed to the rules: (type, time, values).
    pub(crate) rules_out: Vec<(u32, u64, Vec<gyr_core::Value>)>,
    /// How many of `schemas` the rules have been given.
    pub(crate) rules_schemas: usize,
    /// MPI events taken in and not yet handed to the MPI views: (thread, time, event); at
    /// most [`MPI_OUT`].
    pub(crate) mpi_out: Vec<(u64, u64, crate::mpi::Event)>,
}

/// MPI events a program keeps for the MPI views between two hand-overs (one a batch).
const MPI_OUT: usize = 1 << 16;

impl Process {
    pub(crate) fn new(
        pid: u32,
        command_line: Vec<String>,
        started_unix_ns: u64,
        source: Source,
    ) -> Self {
        Process {
            pid,
            command_line,
            started_unix_ns,
            clock_zero_unix_ns: started_unix_ns,
            anchor: None,
            host: String::new(),
            source,
            alive: source != Source::Replay,
            streams: 0,
            status: None,
            objects: None,
            sensors: None,
            received: 0,
            missed: 0,
            unreadable: 0,
            types: HashMap::new(),
            threads: BTreeMap::new(),
            untracked_records: 0,
            wire_schemas: Vec::new(),
            schemas: Vec::new(),
            wire_threads: IndexMap::new(),
            log_entries: VecDeque::new(),
            log: VecDeque::new(),
            fresh_log: Vec::new(),
            fresh_alerts: Vec::new(),
            alerts: VecDeque::new(),
            lifetimes: Default::default(),
            scratch: Vec::new(),
            rules_watch: None,
            rules_out: Vec::new(),
            rules_schemas: 0,
            mpi_out: Vec::new(),
        }
    }

    /// Learns an event type.
    pub(crate) fn add_schema(&mut self, schema: Schema) {
        if self
            .types
            .get(&schema.id)
            .is_some_and(|t| t.schema == schema)
        {
            return;
        }
        self.wire_schemas
            .push(gyr_proto::stream::wire_schema(&schema));
        self.schemas.push(schema.clone());
        self.lifetimes.add_schema(&schema);
        self.types.insert(schema.id, TypeState::new(schema));
    }

    /// Learns a thread's name.
    pub(crate) fn add_thread(&mut self, t: &ThreadInfo) {
        let Some(th) = thread_state(&mut self.threads, &mut self.untracked_records, t.id) else {
            return;
        };
        if th.name != t.name || !self.wire_threads.contains_key(&t.id) {
            th.name = t.name.clone();
            th.name_sent = false;
            self.lifetimes.name_thread(t.id, &t.name);
            self.wire_threads
                .insert(t.id, gyr_proto::stream::wire_thread(t));
        }
    }

    /// An alert a rule of the hub raised about this program, at `t` seconds of its clock.
    pub(crate) fn raise_alert(&mut self, t: f64, severity: &str, message: &str, rule: &str) {
        let a = Alert {
            pid: self.pid,
            t,
            fields: [("severity", severity), ("message", message), ("rule", rule)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        };
        self.alerts.push_back(a.clone());
        if self.alerts.len() > LOG_ENTRIES {
            self.alerts.pop_front();
        }
        push_fresh(&mut self.fresh_alerts, a);
    }

    /// The name rules know this program by: its command's file name.
    pub(crate) fn name(&self) -> &str {
        self.command_line
            .first()
            .map_or("", |c| crate::rules::program_name(c))
    }

    /// Takes in one batch of the program's stream; returns the events taken in.
    /// Its trace clock against the wall clock: the latest anchor of its stream, else its
    /// timestamp 0 as its announcement, hello or trace header gave it.
    pub(crate) fn clock_anchor(&self) -> v1::ClockAnchor {
        self.anchor.unwrap_or(v1::ClockAnchor {
            trace_ns: 0,
            unix_ns: self.clock_zero_unix_ns,
        })
    }

    pub(crate) fn ingest_batch(&mut self, b: &v1::EventBatch) -> u64 {
        self.missed += b.lost;
        if b.anchor.is_some() {
            self.anchor = b.anchor;
        }
        for s in &b.schemas {
            match gyr_proto::stream::schema(s) {
                Some(s) => self.add_schema(s),
                None => self.unreadable += 1,
            }
        }
        for t in &b.threads {
            self.add_thread(&gyr_proto::stream::thread(t));
            if let Some((role, index)) = gyr_proto::stream::thread_role(t) {
                self.lifetimes.set_role(t.id, role, index);
            }
        }
        let before = self.received;
        for block in &b.blocks {
            for r in Records::new(block.thread, &block.records) {
                match r {
                    Ok(r) => self.ingest_record(block.thread, &r.header, r.payload),
                    Err(_) => {
                        self.unreadable += 1;
                        break;
                    }
                }
            }
        }
        self.received - before
    }

    /// Takes in one record: counts, series, groups, alerts.
    pub(crate) fn ingest_record(&mut self, thread: u64, h: &RecordHeader, payload: &[u8]) {
        let mut th = thread_state(&mut self.threads, &mut self.untracked_records, thread);
        if let Some(th) = th.as_deref_mut() {
            if th.last_seq.is_some_and(|l| h.seq <= l) {
                return;
            }
            th.last_seq = Some(h.seq);
        }
        self.lifetimes.record(thread, h, payload);
        let Some(ts) = self.types.get_mut(&h.type_id) else {
            self.unreadable += 1;
            return;
        };
        if !gyr_core::value::numbers(&ts.schema, payload, &mut self.scratch) {
            self.unreadable += 1;
            return;
        }
        if let Some(th) = th {
            th.count.count += 1;
        }
        self.received += 1;
        let t = h.timestamp as f64 / 1e9;
        ts.take(t, &self.scratch);
        if ts.has_text_groups()
            && let Ok(values) = decode(&ts.schema, payload)
        {
            ts.take_text(&values, &self.scratch);
        }
        if let Some(k) = ts.mpi
            && self.mpi_out.len() < MPI_OUT
            && let Ok(values) = decode(&ts.schema, payload)
            && let Some(e) = crate::mpi::event(k, &ts.schema, &values)
        {
            self.mpi_out.push((thread, h.timestamp, e));
        }
        if let Some(w) = &self.rules_watch {
            if ts.rules_generation != w.generation {
                ts.rules_generation = w.generation;
                ts.ruled = w.names.contains(&ts.schema.name);
            }
            if ts.ruled
                && let Ok(values) = decode(&ts.schema, payload)
            {
                self.rules_out.push((h.type_id, h.timestamp, values));
            }
        }
        if ts.alert {
            let fields = decode(&ts.schema, payload)
                .unwrap_or_default()
                .iter()
                .zip(&ts.schema.fields)
                .map(|(v, f)| {
                    let text = match v {
                        gyr_core::Value::Str(s) => s.clone(),
                        v => v.to_string(),
                    };
                    (f.name.clone(), text)
                })
                .collect();
            let a = Alert {
                pid: self.pid,
                t,
                fields,
            };
            self.alerts.push_back(a.clone());
            if self.alerts.len() > LOG_ENTRIES {
                self.alerts.pop_front();
            }
            push_fresh(&mut self.fresh_alerts, a);
        }
        // A live program's log comes from its server; a recording's from its events.
        if ts.steer && self.source == Source::Replay {
            let v = decode(&ts.schema, payload).unwrap_or_default();
            let field = |name: &str| {
                ts.schema
                    .field_index(name)
                    .and_then(|i| v.get(i))
                    .map(|x| match x {
                        gyr_core::Value::Str(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default()
            };
            let entry = v1::LogEntry {
                seq: field("seq").parse().unwrap_or(0),
                time_ns: h.timestamp,
                who: field("who"),
                action: gyr_client::describe(
                    &field("action"),
                    &field("target"),
                    &field("before"),
                    &field("after"),
                ),
                error: field("error"),
                pid: self.pid,
            };
            self.log_entry(&entry);
        }
    }

    pub(crate) fn log_entry(&mut self, e: &v1::LogEntry) {
        let j = LogLine {
            pid: self.pid,
            seq: e.seq,
            t: e.time_ns as f64 / 1e9,
            who: e.who.clone(),
            action: e.action.clone(),
            error: e.error.clone(),
        };
        self.log.push_back(j.clone());
        if self.log.len() > LOG_ENTRIES {
            self.log.pop_front();
        }
        push_fresh(&mut self.fresh_log, j);
        self.log_entries.push_back(v1::LogEntry {
            pid: self.pid,
            ..e.clone()
        });
        if self.log_entries.len() > LOG_ENTRIES {
            self.log_entries.pop_front();
        }
    }

    /// Every series: (type, field, series).
    pub(crate) fn series_mut(&mut self) -> impl Iterator<Item = (&str, &str, &mut Series)> {
        self.types.values_mut().flat_map(TypeState::series_mut)
    }

    /// Windowed statistics of every series with new values (`all`: of every series), and the
    /// latest values per group, by series id.
    pub(crate) fn analyses(
        &mut self,
        all: bool,
        stats: &mut IndexMap<String, Stats>,
        groups: &mut IndexMap<String, Groups>,
    ) {
        for ts in self.types.values_mut() {
            ts.analyses(self.pid, all, stats, groups);
        }
    }

    /// Gone, with nothing more of its stream to come: a subscriber to it alone is done.
    pub(crate) fn finished(&self) -> bool {
        !self.alive && self.streams == 0 && self.source != Source::Replay
    }

    /// The program as the gRPC API lists it.
    pub(crate) fn info(&self) -> v1::ProcessInfo {
        v1::ProcessInfo {
            pid: self.pid,
            command_line: self.command_line.clone(),
            alive: self.alive,
            started_unix_ns: self.started_unix_ns,
            events: self.received,
            lost: self.missed + self.status.as_ref().map(|s| s.lost).unwrap_or(0),
            source: self.source.name().into(),
        }
    }
}
/// Adds a line for the next update. With no page open nobody takes them: past
/// [`LOG_ENTRIES`] the oldest go (the kept log has them, and a new page gets that).
fn push_fresh<T>(fresh: &mut Vec<T>, line: T) {
    if fresh.len() >= LOG_ENTRIES {
        fresh.remove(0);
    }
    fresh.push(line);
}

/// Every watched program, by pid. The map has its own lock, held only to find, add or list
/// programs; each program has its own, held while one of its batches is taken in or it is
/// read. Lock order: the map, then a program; never a program, then the map.
#[derive(Debug, Default)]
pub(crate) struct Programs {
    map: RwLock<BTreeMap<u32, Arc<Mutex<Process>>>>,
}

/// A program, locked.
pub(crate) type Locked<'a> = MutexGuard<'a, Process>;

pub(crate) fn lock(p: &Mutex<Process>) -> Locked<'_> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

impl Programs {
    /// Program `pid`, to lock.
    pub(crate) fn get(&self, pid: u32) -> Option<Arc<Mutex<Process>>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&pid)
            .cloned()
    }

    /// Runs `f` on program `pid` under its lock; `None` when the hub knows no such program.
    pub(crate) fn with<R>(&self, pid: u32, f: impl FnOnce(&mut Process) -> R) -> Option<R> {
        let p = self.get(pid)?;
        let mut p = lock(&p);
        Some(f(&mut p))
    }

    /// Every program, in pid order, to lock one at a time.
    pub(crate) fn all(&self) -> Vec<Arc<Mutex<Process>>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Runs `f` on every program in pid order, each under its own lock in turn.
    pub(crate) fn each(&self, mut f: impl FnMut(&mut Process)) {
        for p in self.all() {
            f(&mut lock(&p));
        }
    }

    /// Adds program `pid` or replaces the one known under that pid, deciding under the map's
    /// lock so that two sources of the same program (its announcement, its push) race to
    /// one outcome: `decide` sees the program known now (locked) and returns the one to put in
    /// its place, if any. Returns whether it put one.
    pub(crate) fn put_if(
        &self,
        pid: u32,
        decide: impl FnOnce(Option<&mut Process>) -> Option<Process>,
    ) -> bool {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let new = match map.get(&pid) {
            Some(p) => decide(Some(&mut lock(p))),
            None => decide(None),
        };
        match new {
            Some(p) => {
                map.insert(pid, Arc::new(Mutex::new(p)));
                true
            }
            None => false,
        }
    }

    /// Adds a program, replacing any known under its pid.
    pub(crate) fn insert(&self, p: Process) {
        self.put_if(p.pid, |_| Some(p));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::Series;
    use gyr_core::{Field, FieldType, Value};

    /// A batch of one thread's events of one type, as a program's stream carries it.
    pub(crate) fn batch(
        schema: &Schema,
        events: &[(u64, Vec<Value>)],
        seq0: u64,
    ) -> v1::EventBatch {
        let mut records = Vec::new();
        for (i, (t, values)) in events.iter().enumerate() {
            let payload = gyr_core::value::encode(schema, values).unwrap();
            gyr_core::record::push_record(
                &mut records,
                schema.id,
                *t,
                seq0 + i as u64,
                0,
                &payload,
            );
        }
        v1::EventBatch {
            schemas: vec![gyr_proto::stream::wire_schema(schema)],
            threads: vec![v1::ThreadInfo {
                id: 1,
                name: "main".into(),
                os_tid: 1,
                ..Default::default()
            }],
            blocks: vec![v1::RecordBlock {
                thread: 1,
                records: records.into(),
            }],
            lost: 0,
            pid: 0,
            anchor: None,
            events: Vec::new(),
            undecodable: 0,
        }
    }

    fn series<'a>(p: &'a mut Process, ty: &str, f: &str) -> &'a mut Series {
        p.series_mut()
            .find(|(t, n, _)| *t == ty && *n == f)
            .map(|(_, _, s)| s)
            .unwrap()
    }

    #[test]
    fn series_are_decimated_to_one_mean_per_bucket() {
        let schema = Schema::new(3, "step_time", vec![Field::new("ms", FieldType::F64)]).unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Attached);
        // 1000 events in 0.1 s: five buckets of 20 ms.
        let events: Vec<_> = (0..1000u64)
            .map(|i| (i * 100_000, vec![Value::Float((i % 2) as f64)]))
            .collect();
        assert_eq!(p.ingest_batch(&batch(&schema, &events, 1)), 1000);
        // The same records again (a program both pushing and attached) are taken once.
        assert_eq!(p.ingest_batch(&batch(&schema, &events, 1)), 0);
        let s = series(&mut p, "step_time", "ms");
        let pts = s.take_fresh();
        assert_eq!(pts.len(), 4, "the fifth bucket is still open: {pts:?}");
        assert!(pts.iter().all(|(_, v)| (*v - 0.5).abs() < 1e-9));
        let live = s.live().unwrap();
        assert!((live.0 - 0.09).abs() < 1e-9 && (live.1 - 0.5).abs() < 1e-9);
        let st = s.stats().unwrap().clone();
        assert_eq!(st.n, 1000);
        assert_eq!(st.max, 1.0);
        assert!(!s.dirty, "statistics are recomputed only after new values");
    }

    #[test]
    fn threads_are_bounded_and_a_rename_replaces_its_description() {
        let schema = Schema::new(3, "tick", vec![Field::new("n", FieldType::U64)]).unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Pushed);
        let mut b = batch(&schema, &[(1, vec![Value::UInt(1)])], 1);
        for id in 1..=(MAX_THREADS as u64 + 100) {
            b.threads = vec![v1::ThreadInfo {
                id,
                name: format!("t{id}"),
                ..Default::default()
            }];
            b.blocks[0].thread = id;
            assert_eq!(p.ingest_batch(&b), 1, "thread {id}'s event is taken in");
            b.schemas.clear();
        }
        assert_eq!(p.threads.len(), MAX_THREADS);
        assert_eq!(p.wire_threads.len(), MAX_THREADS);
        // Each of the last 100 threads: its description and its record went untracked.
        assert_eq!(p.untracked_records, 200);
        // A rename replaces the description instead of adding one.
        p.add_thread(&ThreadInfo {
            id: 1,
            name: "renamed".into(),
            ..Default::default()
        });
        assert_eq!(p.wire_threads.len(), MAX_THREADS);
        assert_eq!(p.wire_threads[&1].name, "renamed");
        assert_eq!(p.wire_threads.get_index(0).unwrap().1.name, "renamed");
    }

    #[test]
    fn small_integer_fields_become_groups_and_large_ones_do_not() {
        let schema = Schema::new(
            4,
            "domain_work",
            vec![
                Field::new("domain", FieldType::U32),
                Field::new("step", FieldType::U64),
                Field::new("label", FieldType::Str),
                Field::new("seconds", FieldType::F64),
            ],
        )
        .unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Attached);
        let events: Vec<_> = (0..200u64)
            .map(|i| {
                (
                    i,
                    vec![
                        Value::UInt(i % 4),
                        Value::UInt(i),
                        Value::Str("x".into()),
                        Value::Float(i as f64),
                    ],
                )
            })
            .collect();
        p.ingest_batch(&batch(&schema, &events, 0));
        let (mut stats, mut groups): (IndexMap<String, Stats>, IndexMap<String, Groups>) =
            Default::default();
        p.analyses(true, &mut stats, &mut groups);
        let g = &groups["7/domain_work/domain"];
        assert_eq!(g.len(), 4);
        assert_eq!(g["3"]["seconds"], 199.0);
        assert!(g["3"].get("label").is_none());
        assert!(!groups.contains_key("7/domain_work/step"));
        assert_eq!(stats["7/domain_work/seconds"].max, 199.0);
    }

    #[test]
    fn text_fields_group_runs_side_by_side() {
        let schema = Schema::new(
            4,
            "solver.residual",
            vec![
                Field::new("rho", FieldType::F64),
                Field::new("instance", FieldType::Str),
            ],
        )
        .unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Attached);
        let events: Vec<_> = (0..30u64)
            .map(|i| {
                let run = ["speed=0.8", "speed=1.0", ""][(i % 3) as usize];
                (i, vec![Value::Float(i as f64), Value::Str(run.into())])
            })
            .collect();
        p.ingest_batch(&batch(&schema, &events, 0));
        let (mut stats, mut groups): (IndexMap<String, Stats>, IndexMap<String, Groups>) =
            Default::default();
        p.analyses(true, &mut stats, &mut groups);
        let g = &groups["7/solver.residual/instance"];
        // An empty instance is no group.
        assert_eq!(g.keys().collect::<Vec<_>>(), ["speed=0.8", "speed=1.0"]);
        assert_eq!(g["speed=0.8"]["rho"], 27.0);
        assert_eq!(g["speed=1.0"]["rho"], 28.0);
    }

    #[test]
    fn records_without_a_schema_are_counted_not_misread() {
        let schema = Schema::new(5, "x", vec![Field::new("v", FieldType::F64)]).unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Pushed);
        let mut b = batch(&schema, &[(1, vec![Value::Float(1.0)])], 0);
        b.schemas.clear();
        assert_eq!(p.ingest_batch(&b), 0);
        assert_eq!(p.unreadable, 1);
    }

    #[test]
    fn one_program_is_taken_in_while_another_is_locked() {
        let programs = Arc::new(Programs::default());
        programs.insert(Process::new(1, vec![], 0, Source::Pushed));
        programs.insert(Process::new(2, vec![], 0, Source::Pushed));
        let one = programs.get(1).unwrap();
        let _held = lock(&one);
        let (tx, rx) = std::sync::mpsc::channel();
        let p = programs.clone();
        std::thread::spawn(move || {
            let schema = Schema::new(5, "x", vec![Field::new("v", FieldType::F64)]).unwrap();
            let b = batch(&schema, &[(1, vec![Value::Float(1.0)])], 0);
            let _ = tx.send(p.with(2, |p| p.ingest_batch(&b)));
        });
        let taken = rx.recv_timeout(std::time::Duration::from_secs(30));
        assert_eq!(taken, Ok(Some(1)), "program 2 waited for program 1's lock");
        assert_eq!(programs.all().len(), 2);
    }

    #[test]
    fn lines_no_page_takes_are_bounded() {
        let mut p = Process::new(7, vec![], 0, Source::Attached);
        for seq in 0..(LOG_ENTRIES as u64 + 10) {
            p.log_entry(&v1::LogEntry {
                seq,
                ..Default::default()
            });
        }
        assert_eq!(p.fresh_log.len(), LOG_ENTRIES);
        assert_eq!(p.fresh_log[0].seq, 10, "the oldest went");
        assert_eq!(p.log.len(), LOG_ENTRIES);
    }
}
