//! What the hub knows of each program it watches, and the live analyses over its events:
//! per-type rates, per-thread counts, decimated series of every numeric field with windowed
//! statistics, and the latest values per group (per domain, per worker) for load-balance bars.
//!
//! Decimation happens here, not in the browser: a series keeps at most one point per
//! [`BUCKET_S`] of program time (the mean of the events in it), so a page receives at most
//! 50 points a second per series whatever the event rate.

use crate::protocol::{
    Alert, AttributeView, Groups, LogLine, ObjectView, Objects, OperationView, ParamView, Point,
    ProcessSummary, Rate, SensorView, Snapshot, Stats, ThreadSummary, Update,
};
use gyr_core::record::Records;
use gyr_core::schema::ScalarType;
use gyr_core::value::decode;
use gyr_core::{RecordHeader, Schema, ThreadInfo};
use gyr_proto::v1;
use indexmap::IndexMap;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Instant;

/// Width of a decimation bucket, in seconds of program time.
pub const BUCKET_S: f64 = 0.02;
/// Decimated points kept per series (at 50 per second: the last 80 seconds).
pub const HISTORY_POINTS: usize = 4000;
/// Program time over which windowed statistics are computed.
pub const STATS_WINDOW_S: f64 = 10.0;
/// Raw values kept per series for the windowed statistics.
const WINDOW_VALUES: usize = 20_000;
/// Distinct values of an integer field up to which it counts as a group key (domain, worker).
const MAX_GROUPS: usize = 64;
/// Steering-log entries kept per program.
const LOG_ENTRIES: usize = 500;

/// A numeric field of one event type, over time.
#[derive(Debug, Default)]
pub(crate) struct Series {
    points: VecDeque<(f64, f64)>,
    fresh: Vec<(f64, f64)>,
    bucket: Option<Bucket>,
    window: VecDeque<(f64, f64)>,
    /// Whether values arrived since the statistics were last computed.
    dirty: bool,
    /// Whether values arrived since the last update to the pages.
    moved: bool,
    stats: Option<Stats>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    index: i64,
    sum: f64,
    n: u32,
}

impl Series {
    fn push(&mut self, t: f64, v: f64) {
        let index = (t / BUCKET_S).floor() as i64;
        match &mut self.bucket {
            Some(b) if b.index == index => {
                b.sum += v;
                b.n += 1;
            }
            _ => {
                self.flush();
                self.bucket = Some(Bucket {
                    index,
                    sum: v,
                    n: 1,
                });
            }
        }
        self.window.push_back((t, v));
        if self.window.len() > WINDOW_VALUES {
            self.window.pop_front();
        }
        self.dirty = true;
        self.moved = true;
    }

    fn flush(&mut self) {
        if let Some(b) = self.bucket.take() {
            let p = ((b.index as f64 + 0.5) * BUCKET_S, b.sum / b.n as f64);
            self.points.push_back(p);
            if self.points.len() > HISTORY_POINTS {
                self.points.pop_front();
            }
            self.fresh.push(p);
            // Nobody took them (no page open): the history has them.
            if self.fresh.len() > HISTORY_POINTS {
                self.fresh.clear();
            }
        }
    }

    /// Points decimated since the last call.
    fn take_fresh(&mut self) -> Vec<(f64, f64)> {
        std::mem::take(&mut self.fresh)
    }

    /// The bucket still filling, as a provisional point: pages draw it at once and replace it
    /// when the bucket closes, so what they show is never a bucket late.
    fn live(&self) -> Option<(f64, f64)> {
        self.bucket
            .map(|b| ((b.index as f64 + 0.5) * BUCKET_S, b.sum / b.n as f64))
    }

    /// Count, mean, min, max, p50, p99 over the last [`STATS_WINDOW_S`] of program time,
    /// recomputed only when values arrived since the last time.
    fn stats(&mut self) -> Option<&Stats> {
        if self.dirty {
            self.dirty = false;
            self.stats = window_stats(&self.window);
        }
        self.stats.as_ref()
    }
}

fn window_stats(window: &VecDeque<(f64, f64)>) -> Option<Stats> {
    let last = window.back()?.0;
    let mut v: Vec<f64> = window
        .iter()
        .rev()
        .take_while(|(t, _)| *t >= last - STATS_WINDOW_S)
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let q = |p: f64| v[((n - 1) as f64 * p).round() as usize];
    Some(Stats {
        n: n as u32,
        mean: v.iter().sum::<f64>() / n as f64,
        min: v[0],
        max: v[n - 1],
        p50: q(0.5),
        p99: q(0.99),
    })
}

/// Per-type counters for rates.
#[derive(Debug, Default)]
struct TypeCount {
    count: u64,
    /// (when, count) at recent ticks, for a rate over about a second.
    history: VecDeque<(Instant, u64)>,
}

impl TypeCount {
    fn rate(&mut self, now: Instant) -> f64 {
        self.history.push_back((now, self.count));
        while self.history.len() > 2 && now.duration_since(self.history[1].0).as_secs_f64() >= 1.0 {
            self.history.pop_front();
        }
        let (t0, c0) = self.history[0];
        let dt = now.duration_since(t0).as_secs_f64();
        if dt > 0.0 {
            (self.count - c0) as f64 / dt
        } else {
            0.0
        }
    }
}

/// What the hub keeps of one event type of one program, indexed by field position so that
/// an event is taken in without a lookup by name.
#[derive(Debug)]
struct TypeState {
    schema: Schema,
    count: TypeCount,
    /// Per field: its series, for scalar (numeric) fields.
    series: Vec<Option<Series>>,
    /// Per field: for integer fields still taken as a group key (domain, worker, rank), the
    /// latest value of every field per key value (NaN: none yet).
    groups: Vec<Option<BTreeMap<i64, Vec<f64>>>>,
    alert: bool,
    /// `gyr.steer`: in a replay, the steering log is rebuilt from these.
    steer: bool,
}

impl TypeState {
    fn new(schema: Schema) -> Self {
        let series = schema
            .fields
            .iter()
            .map(|f| f.ty.scalar().map(|_| Series::default()))
            .collect();
        let groups = schema
            .fields
            .iter()
            .map(|f| {
                matches!(
                    f.ty.scalar(),
                    Some(
                        ScalarType::I8
                            | ScalarType::I16
                            | ScalarType::I32
                            | ScalarType::I64
                            | ScalarType::U8
                            | ScalarType::U16
                            | ScalarType::U32
                            | ScalarType::U64
                    )
                )
                .then(BTreeMap::new)
            })
            .collect();
        TypeState {
            alert: schema.name == ALERT_EVENT,
            steer: schema.name == STEER_EVENT,
            schema,
            count: TypeCount::default(),
            series,
            groups,
        }
    }
}

/// The event type whose events feed the alerts panel.
const ALERT_EVENT: &str = "gyr.alert";
/// The event type the steering log is also written as.
const STEER_EVENT: &str = "gyr.steer";

/// What the hub knows of one thread of a program.
#[derive(Debug, Default)]
struct ThreadState {
    name: String,
    /// Whether the update stream has carried this name (a snapshot always carries it).
    name_sent: bool,
    count: TypeCount,
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
    types: HashMap<u32, TypeState>,
    threads: BTreeMap<u64, ThreadState>,
    /// The stream's schemas and threads as they arrived: what a new subscriber of the hub or
    /// a trace file needs before the records.
    pub(crate) wire_schemas: Vec<v1::Schema>,
    pub(crate) wire_threads: Vec<v1::ThreadInfo>,
    /// Steering-log entries, as the gRPC API gives them, and as the pages get them.
    pub(crate) log_entries: VecDeque<v1::LogEntry>,
    log: VecDeque<LogLine>,
    fresh_log: Vec<LogLine>,
    fresh_alerts: Vec<Alert>,
    alerts: VecDeque<Alert>,
    scratch: Vec<f64>,
}

/// The id of a series in the UI protocol: `pid/type/field`.
pub(crate) fn series_id(pid: u32, type_name: &str, field: &str) -> String {
    format!("{pid}/{type_name}/{field}")
}

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
            wire_schemas: Vec::new(),
            wire_threads: Vec::new(),
            log_entries: VecDeque::new(),
            log: VecDeque::new(),
            fresh_log: Vec::new(),
            fresh_alerts: Vec::new(),
            alerts: VecDeque::new(),
            scratch: Vec::new(),
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
        self.types.insert(schema.id, TypeState::new(schema));
    }

    /// Learns a thread's name.
    pub(crate) fn add_thread(&mut self, t: &ThreadInfo) {
        let th = self.threads.entry(t.id).or_default();
        if th.name != t.name || self.wire_threads.iter().all(|w| w.id != t.id) {
            th.name = t.name.clone();
            th.name_sent = false;
            self.wire_threads.push(gyr_proto::stream::wire_thread(t));
        }
    }

    /// Takes in one batch of the program's stream; returns the events taken in.
    pub(crate) fn ingest_batch(&mut self, b: &v1::EventBatch) -> u64 {
        self.missed += b.lost;
        for s in &b.schemas {
            match gyr_proto::stream::schema(s) {
                Some(s) => self.add_schema(s),
                None => self.unreadable += 1,
            }
        }
        for t in &b.threads {
            self.add_thread(&gyr_proto::stream::thread(t));
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
        let th = self.threads.entry(thread).or_default();
        if th.last_seq.is_some_and(|l| h.seq <= l) {
            return;
        }
        th.last_seq = Some(h.seq);
        let Some(ts) = self.types.get_mut(&h.type_id) else {
            self.unreadable += 1;
            return;
        };
        if !gyr_core::value::numbers(&ts.schema, payload, &mut self.scratch) {
            self.unreadable += 1;
            return;
        }
        th.count.count += 1;
        ts.count.count += 1;
        self.received += 1;
        let t = h.timestamp as f64 / 1e9;
        let v = &self.scratch;
        for (s, x) in ts.series.iter_mut().zip(v) {
            if let Some(s) = s {
                s.push(t, *x);
            }
        }
        for i in 0..ts.groups.len() {
            let Some(g) = &mut ts.groups[i] else { continue };
            let key = v[i] as i64;
            if !g.contains_key(&key) && g.len() >= MAX_GROUPS {
                ts.groups[i] = None;
                continue;
            }
            let latest = g.entry(key).or_insert_with(|| vec![f64::NAN; v.len()]);
            for (j, x) in v.iter().enumerate() {
                if j != i && x.is_finite() {
                    latest[j] = *x;
                }
            }
        }
        if ts.alert {
            let fields = decode(&ts.schema, payload)
                .unwrap_or_default()
                .iter()
                .zip(&ts.schema.fields)
                .map(|(v, f)| (f.name.clone(), v.to_string()))
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
            self.fresh_alerts.push(a);
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
        self.fresh_log.push(j);
        self.log_entries.push_back(v1::LogEntry {
            pid: self.pid,
            ..e.clone()
        });
        if self.log_entries.len() > LOG_ENTRIES {
            self.log_entries.pop_front();
        }
    }

    /// Every series: (type, field, series).
    fn series_mut(&mut self) -> impl Iterator<Item = (&str, &str, &mut Series)> {
        self.types.values_mut().flat_map(|ts| {
            let TypeState { schema, series, .. } = ts;
            series
                .iter_mut()
                .zip(&schema.fields)
                .filter_map(|(s, f)| Some((schema.name.as_str(), f.name.as_str(), s.as_mut()?)))
        })
    }

    /// Windowed statistics of every series with new values (`all`: of every series), and the
    /// latest values per group, by series id.
    fn analyses(
        &mut self,
        all: bool,
        stats: &mut IndexMap<String, Stats>,
        groups: &mut IndexMap<String, Groups>,
    ) {
        let pid = self.pid;
        for (ty, f, s) in self.series_mut() {
            if (all || s.dirty)
                && let Some(st) = s.stats()
            {
                stats.insert(series_id(pid, ty, f), st.clone());
            }
        }
        for ts in self.types.values() {
            for (i, g) in ts.groups.iter().enumerate() {
                let Some(g) = g else { continue };
                if g.is_empty() {
                    continue;
                }
                let by: Groups = g
                    .iter()
                    .map(|(k, latest)| {
                        let fields = latest
                            .iter()
                            .zip(&ts.schema.fields)
                            .filter(|(x, _)| x.is_finite())
                            .map(|(x, f)| (f.name.clone(), *x))
                            .collect();
                        (k.to_string(), fields)
                    })
                    .collect();
                groups.insert(
                    series_id(pid, &ts.schema.name, &ts.schema.fields[i].name),
                    by,
                );
            }
        }
    }

    /// The process as the UI shows it (without series).
    /// `whole`: every thread's name (a snapshot); otherwise only names the update stream has
    /// not carried yet, since a page keeps what it was told.
    fn summary(&mut self, now: Instant, whole: bool) -> ProcessSummary {
        let mut types: Vec<&mut TypeState> = self.types.values_mut().collect();
        types.sort_by(|a, b| a.schema.name.cmp(&b.schema.name));
        let rates = types
            .into_iter()
            .map(|t| {
                (
                    t.schema.name.clone(),
                    Rate {
                        count: t.count.count,
                        rate: t.count.rate(now),
                    },
                )
            })
            .collect();
        let threads = self
            .threads
            .iter_mut()
            .filter(|(_, t)| t.count.count > 0 || !t.name.is_empty())
            .map(|(id, t)| {
                let name = (whole || !t.name_sent).then(|| t.name.clone());
                if !whole {
                    t.name_sent = true;
                }
                ThreadSummary {
                    id: *id,
                    name,
                    count: t.count.count,
                    rate: shown(t.count.rate(now)),
                }
            })
            .collect();
        let state = self.status.as_ref().and_then(|s| s.state.clone());
        ProcessSummary {
            pid: self.pid,
            command: self.command_line.join(" "),
            source: self.source.name().to_owned(),
            alive: self.alive,
            state: state.as_ref().map(|s| s.text.clone()).unwrap_or_default(),
            paused: state
                .as_ref()
                .is_some_and(|s| s.kind == v1::run_state::Kind::Paused as i32),
            records: self.status.as_ref().map(|s| s.records).unwrap_or(0),
            lost: self.status.as_ref().map(|s| s.lost).unwrap_or(0),
            received: self.received,
            missed: self.missed,
            unreadable: self.unreadable,
            types: rates,
            threads,
            objects: self.objects.as_ref().map(objects_view),
            sensors: self.sensors.as_ref().map(sensors_view),
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

fn attr_type(t: i32) -> &'static str {
    v1::AttrType::user_name(t)
}

fn text(v: &Option<v1::Value>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

fn ops_view(ops: &[v1::OperationInfo], prefix: &str) -> Vec<OperationView> {
    ops.iter()
        .map(|op| OperationView {
            name: op.name.clone(),
            target: format!("{prefix}{}", op.name),
            description: op.description.clone(),
            params: op
                .params
                .iter()
                .map(|p| ParamView {
                    name: p.name.clone(),
                    ty: attr_type(p.r#type).to_owned(),
                })
                .collect(),
        })
        .collect()
}

fn objects_view(r: &v1::ListObjectsReply) -> Objects {
    let objects = r
        .objects
        .iter()
        .map(|o| ObjectView {
            name: o.name.clone(),
            is_param: o.is_param,
            description: o.description.clone(),
            attributes: o
                .attributes
                .iter()
                .map(|a| AttributeView {
                    name: a.name.clone(),
                    path: if o.is_param {
                        o.name.clone()
                    } else {
                        format!("{}.{}", o.name, a.name)
                    },
                    ty: attr_type(a.r#type).to_owned(),
                    value: text(&a.value),
                    unit: a.unit.clone(),
                    min: a.has_min.then_some(a.min),
                    max: a.has_max.then_some(a.max),
                    read_only: a.read_only,
                    description: a.description.clone(),
                })
                .collect(),
            actuators: ops_view(&o.actuators, &format!("{}.", o.name)),
        })
        .collect();
    Objects {
        objects,
        functions: ops_view(&r.functions, ""),
    }
}

fn sensors_view(r: &v1::SensorsReply) -> Vec<SensorView> {
    r.sensors
        .iter()
        .map(|s| SensorView {
            type_name: s.type_name.clone(),
            instance: s.instance.clone(),
            kind: s.kind.clone(),
            enabled: s.enabled,
            active: s.active,
            rate: s.rate.clone(),
            skipped: s.skipped,
        })
        .collect()
}

/// A value as pages get it: 7 significant digits (single precision, finer than any chart or
/// gauge draws), so that its JSON is short; statistics are computed on the full values.
fn shown(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(6 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// A series point as pages get it: the time to the microsecond, the value to 7 digits.
fn shown_point((t, v): Point) -> Point {
    ((t * 1e6).round() / 1e6, shown(v))
}

/// Every watched program.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) processes: BTreeMap<u32, Process>,
}

impl Model {
    /// What changed since the last update: fresh series points and the provisional point of
    /// every series that moved, new log entries and alerts; with `full`, also every program's
    /// summary (state, objects, sensors, rates), the statistics of the series that moved and
    /// the groups (these cost more, and change slower than the eye follows).
    pub(crate) fn update(&mut self, now: Instant, full: bool) -> Update {
        let mut summaries = Vec::new();
        let mut points: IndexMap<String, Vec<Point>> = IndexMap::new();
        let mut live = IndexMap::new();
        let mut stats = IndexMap::new();
        let mut groups = IndexMap::new();
        let mut log = Vec::new();
        let mut alerts = Vec::new();
        for p in self.processes.values_mut() {
            if full {
                summaries.push(p.summary(now, false));
            }
            let pid = p.pid;
            for (ty, f, s) in p.series_mut() {
                if !s.moved {
                    continue;
                }
                s.moved = false;
                let fresh = s.take_fresh();
                if !fresh.is_empty() {
                    points.insert(
                        series_id(pid, ty, f),
                        fresh.into_iter().map(shown_point).collect(),
                    );
                }
                if let Some(l) = s.live() {
                    live.insert(series_id(pid, ty, f), shown_point(l));
                }
            }
            if full {
                p.analyses(false, &mut stats, &mut groups);
            }
            log.append(&mut p.fresh_log);
            alerts.append(&mut p.fresh_alerts);
        }
        Update {
            points,
            live,
            log,
            alerts,
            processes: full.then_some(summaries),
            stats: full.then_some(stats),
            groups: full.then_some(groups),
            ..Update::default()
        }
    }

    /// Everything a newly connected page needs: the history of every series, the whole log.
    pub(crate) fn snapshot(&mut self, now: Instant) -> Snapshot {
        let mut processes = Vec::new();
        let mut points = IndexMap::new();
        let mut live = IndexMap::new();
        let mut stats = IndexMap::new();
        let mut groups = IndexMap::new();
        let mut log = Vec::new();
        let mut alerts = Vec::new();
        for p in self.processes.values_mut() {
            processes.push(p.summary(now, true));
            let pid = p.pid;
            for (ty, f, s) in p.series_mut() {
                // Fresh points are in this history and will come in the next update too (other
                // pages need them): the page takes a point once, by its time.
                points.insert(
                    series_id(pid, ty, f),
                    s.points.iter().copied().map(shown_point).collect(),
                );
                if let Some(l) = s.live() {
                    live.insert(series_id(pid, ty, f), shown_point(l));
                }
            }
            p.analyses(true, &mut stats, &mut groups);
            log.extend(p.log.iter().cloned());
            alerts.extend(p.alerts.iter().cloned());
        }
        Snapshot {
            bucket_s: BUCKET_S,
            stats_window_s: STATS_WINDOW_S,
            processes,
            points,
            live,
            stats,
            groups,
            log,
            alerts,
            replay: None,
            hub: Default::default(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
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
            }],
            blocks: vec![v1::RecordBlock {
                thread: 1,
                records: records.into(),
            }],
            lost: 0,
            pid: 0,
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
    fn records_without_a_schema_are_counted_not_misread() {
        let schema = Schema::new(5, "x", vec![Field::new("v", FieldType::F64)]).unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Pushed);
        let mut b = batch(&schema, &[(1, vec![Value::Float(1.0)])], 0);
        b.schemas.clear();
        assert_eq!(p.ingest_batch(&b), 0);
        assert_eq!(p.unreadable, 1);
    }

    #[test]
    fn pages_get_values_to_seven_digits_and_times_to_the_microsecond() {
        assert_eq!(shown(123.456789012), 123.4568);
        assert_eq!(shown(-0.000123456789), -0.0001234568);
        assert_eq!(shown(0.0), 0.0);
        assert!(shown(f64::NAN).is_nan());
        assert_eq!(shown(f64::INFINITY), f64::INFINITY);
        assert_eq!(shown_point((1.23456789, 2.0)), (1.234568, 2.0));
    }

    #[test]
    fn a_thread_name_goes_out_once_in_updates_and_always_in_snapshots() {
        let schema = Schema::new(5, "x", vec![Field::new("v", FieldType::F64)]).unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Attached);
        p.ingest_batch(&batch(&schema, &[(1, vec![Value::Float(1.0)])], 0));
        let now = Instant::now();
        let names =
            |s: &ProcessSummary| s.threads.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&p.summary(now, false)), [Some("main".to_owned())]);
        assert_eq!(names(&p.summary(now, false)), [None]);
        assert_eq!(names(&p.summary(now, true)), [Some("main".to_owned())]);
        assert_eq!(names(&p.summary(now, false)), [None]);
    }
}
