//! What the hub knows of each program it watches, and the live analyses over its events:
//! per-type rates, per-thread counts, decimated series of every numeric field with windowed
//! statistics, and the latest values per group (per domain, per worker) for load-balance bars.
//!
//! Decimation happens here, not in the browser: a series keeps at most one point per
//! [`BUCKET_S`] of program time (the mean of the events in it), so a page receives at most
//! 50 points a second per series whatever the event rate.

use gyr_core::Value;
use gyr_proto::events::Event;
use gyr_proto::v1;
use serde_json::{Value as Json, json};
use std::collections::{BTreeMap, VecDeque};
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
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    index: i64,
    sum: f64,
    n: u32,
    /// Whether a tick has seen this bucket open: it is flushed at the next one.
    seen_by_tick: bool,
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
                    seen_by_tick: false,
                });
            }
        }
        self.window.push_back((t, v));
        if self.window.len() > WINDOW_VALUES {
            self.window.pop_front();
        }
    }

    fn flush(&mut self) {
        if let Some(b) = self.bucket.take() {
            let p = ((b.index as f64 + 0.5) * BUCKET_S, b.sum / b.n as f64);
            self.points.push_back(p);
            if self.points.len() > HISTORY_POINTS {
                self.points.pop_front();
            }
            self.fresh.push(p);
        }
    }

    /// Points decimated since the last call (a partly filled bucket goes out one tick late).
    fn take_fresh(&mut self) -> Vec<(f64, f64)> {
        match &mut self.bucket {
            Some(b) if b.seen_by_tick => self.flush(),
            Some(b) => b.seen_by_tick = true,
            None => {}
        }
        std::mem::take(&mut self.fresh)
    }

    /// Count, mean, min, max, p50, p99 over the last [`STATS_WINDOW_S`] of program time.
    fn stats(&self) -> Option<Json> {
        let last = self.window.back()?.0;
        let mut v: Vec<f64> = self
            .window
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
        Some(json!({
            "n": n,
            "mean": v.iter().sum::<f64>() / n as f64,
            "min": v[0],
            "max": v[n - 1],
            "p50": q(0.5),
            "p99": q(0.99),
        }))
    }
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

/// One watched program.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) pid: u32,
    pub(crate) command_line: Vec<String>,
    /// When it started (from its announcement): tells a new program from an old one's pid.
    pub(crate) started_unix_ns: u64,
    pub(crate) alive: bool,
    pub(crate) status: Option<v1::StatusReply>,
    pub(crate) objects: Option<v1::ListObjectsReply>,
    pub(crate) sensors: Option<v1::SensorsReply>,
    /// Events the hub received from it, and events its stream said the hub missed.
    pub(crate) received: u64,
    pub(crate) missed: u64,
    types: BTreeMap<String, TypeCount>,
    threads: BTreeMap<u64, (String, TypeCount)>,
    series: BTreeMap<(String, String), Series>,
    /// (type, group field) → group value → field → latest value.
    groups: BTreeMap<(String, String), BTreeMap<i64, BTreeMap<String, f64>>>,
    /// Integer fields that had too many distinct values to be a group key.
    not_groups: std::collections::BTreeSet<(String, String)>,
    log: VecDeque<Json>,
    fresh_log: Vec<Json>,
    fresh_alerts: Vec<Json>,
    alerts: VecDeque<Json>,
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(x) => Some(*x),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::UInt(u) => i64::try_from(*u).ok(),
        _ => None,
    }
}

/// The id of a series in the UI protocol: `pid/type/field`.
pub(crate) fn series_id(pid: u32, type_name: &str, field: &str) -> String {
    format!("{pid}/{type_name}/{field}")
}

impl Process {
    pub(crate) fn new(pid: u32, command_line: Vec<String>, started_unix_ns: u64) -> Self {
        Process {
            pid,
            command_line,
            started_unix_ns,
            alive: true,
            status: None,
            objects: None,
            sensors: None,
            received: 0,
            missed: 0,
            types: BTreeMap::new(),
            threads: BTreeMap::new(),
            series: BTreeMap::new(),
            groups: BTreeMap::new(),
            not_groups: Default::default(),
            log: VecDeque::new(),
            fresh_log: Vec::new(),
            fresh_alerts: Vec::new(),
            alerts: VecDeque::new(),
        }
    }

    /// Takes in one event: counts, series, groups, alerts.
    pub(crate) fn ingest(&mut self, e: &Event) {
        self.received += 1;
        self.types.entry(e.type_name.clone()).or_default().count += 1;
        let th = self
            .threads
            .entry(e.thread)
            .or_insert_with(|| (e.thread_name.clone(), TypeCount::default()));
        th.1.count += 1;
        if th.0.is_empty() && !e.thread_name.is_empty() {
            th.0 = e.thread_name.clone();
        }
        let t = e.t_ns as f64 / 1e9;
        if e.type_name == "gyr.alert" {
            let fields: serde_json::Map<String, Json> = e
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), Json::String(v.to_string())))
                .collect();
            let a = json!({"pid": self.pid, "t": t, "fields": fields});
            self.alerts.push_back(a.clone());
            if self.alerts.len() > LOG_ENTRIES {
                self.alerts.pop_front();
            }
            self.fresh_alerts.push(a);
        }
        for (name, v) in &e.fields {
            if let Some(x) = number(v) {
                self.series
                    .entry((e.type_name.clone(), name.clone()))
                    .or_default()
                    .push(t, x);
            }
        }
        // Group keys: integer fields with few distinct values (domain, worker, rank).
        for (gname, gv) in &e.fields {
            let Some(g) = integer(gv) else { continue };
            let key = (e.type_name.clone(), gname.clone());
            if self.not_groups.contains(&key) {
                continue;
            }
            let groups = self.groups.entry(key.clone()).or_default();
            if !groups.contains_key(&g) && groups.len() >= MAX_GROUPS {
                self.groups.remove(&key);
                self.not_groups.insert(key);
                continue;
            }
            let latest = groups.entry(g).or_default();
            for (name, v) in &e.fields {
                if name != gname
                    && let Some(x) = number(v)
                {
                    latest.insert(name.clone(), x);
                }
            }
        }
    }

    pub(crate) fn log_entry(&mut self, e: &v1::LogEntry) {
        let j = json!({
            "pid": self.pid,
            "seq": e.seq,
            "t": e.time_ns as f64 / 1e9,
            "who": e.who,
            "action": e.action,
            "error": e.error,
        });
        self.log.push_back(j.clone());
        if self.log.len() > LOG_ENTRIES {
            self.log.pop_front();
        }
        self.fresh_log.push(j);
    }

    /// Windowed statistics of every series and the latest values per group, by series id.
    fn analyses(
        &self,
        stats: &mut serde_json::Map<String, Json>,
        groups: &mut serde_json::Map<String, Json>,
    ) {
        for ((ty, f), s) in &self.series {
            if let Some(st) = s.stats() {
                stats.insert(series_id(self.pid, ty, f), st);
            }
        }
        for ((ty, g), by) in &self.groups {
            groups.insert(series_id(self.pid, ty, g), json!(by));
        }
    }

    /// The process as the UI shows it (without series).
    fn summary(&mut self, now: Instant) -> Json {
        let rates: serde_json::Map<String, Json> = self
            .types
            .iter_mut()
            .map(|(k, c)| (k.clone(), json!({"count": c.count, "rate": c.rate(now)})))
            .collect();
        let threads: Vec<Json> = self
            .threads
            .iter_mut()
            .map(|(id, (name, c))| {
                json!({"id": id, "name": name, "count": c.count, "rate": c.rate(now)})
            })
            .collect();
        let state = self.status.as_ref().and_then(|s| s.state.clone());
        json!({
            "pid": self.pid,
            "command": self.command_line.join(" "),
            "alive": self.alive,
            "state": state.as_ref().map(|s| s.text.clone()).unwrap_or_default(),
            "paused": state.as_ref().is_some_and(|s| s.kind == v1::run_state::Kind::Paused as i32),
            "records": self.status.as_ref().map(|s| s.records).unwrap_or(0),
            "lost": self.status.as_ref().map(|s| s.lost).unwrap_or(0),
            "received": self.received,
            "missed": self.missed,
            "types": rates,
            "threads": threads,
            "objects": self.objects.as_ref().map(objects_json).unwrap_or(Json::Null),
            "sensors": self.sensors.as_ref().map(sensors_json).unwrap_or(Json::Null),
        })
    }
}

fn attr_type(t: i32) -> &'static str {
    v1::AttrType::user_name(t)
}

fn text(v: &Option<v1::Value>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

fn ops_json(ops: &[v1::OperationInfo], prefix: &str) -> Vec<Json> {
    ops.iter()
        .map(|op| {
            json!({
                "name": op.name,
                "target": format!("{prefix}{}", op.name),
                "description": op.description,
                "params": op.params.iter().map(|p| json!({"name": p.name, "type": attr_type(p.r#type)})).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn objects_json(r: &v1::ListObjectsReply) -> Json {
    let objects: Vec<Json> = r
        .objects
        .iter()
        .map(|o| {
            json!({
                "name": o.name,
                "is_param": o.is_param,
                "description": o.description,
                "attributes": o.attributes.iter().map(|a| json!({
                    "name": a.name,
                    "path": if o.is_param { o.name.clone() } else { format!("{}.{}", o.name, a.name) },
                    "type": attr_type(a.r#type),
                    "value": text(&a.value),
                    "unit": a.unit,
                    "min": a.has_min.then_some(a.min),
                    "max": a.has_max.then_some(a.max),
                    "read_only": a.read_only,
                    "description": a.description,
                })).collect::<Vec<_>>(),
                "actuators": ops_json(&o.actuators, &format!("{}.", o.name)),
            })
        })
        .collect();
    json!({"objects": objects, "functions": ops_json(&r.functions, "")})
}

fn sensors_json(r: &v1::SensorsReply) -> Json {
    Json::Array(
        r.sensors
            .iter()
            .map(|s| {
                json!({
                    "type": s.type_name,
                    "instance": s.instance,
                    "kind": s.kind,
                    "enabled": s.enabled,
                    "active": s.active,
                    "rate": s.rate,
                    "skipped": s.skipped,
                })
            })
            .collect(),
    )
}

/// Every watched program.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) processes: BTreeMap<u32, Process>,
}

impl Model {
    /// What changed since the last update: processes, fresh series points, statistics,
    /// groups, new log entries and alerts.
    pub(crate) fn update(&mut self, now: Instant) -> Json {
        let mut processes = Vec::new();
        let mut points = serde_json::Map::new();
        let mut stats = serde_json::Map::new();
        let mut groups = serde_json::Map::new();
        let mut log = Vec::new();
        let mut alerts = Vec::new();
        for p in self.processes.values_mut() {
            processes.push(p.summary(now));
            for ((ty, f), s) in &mut p.series {
                let fresh = s.take_fresh();
                if !fresh.is_empty() {
                    points.insert(series_id(p.pid, ty, f), json!(fresh));
                }
            }
            p.analyses(&mut stats, &mut groups);
            log.append(&mut p.fresh_log);
            alerts.append(&mut p.fresh_alerts);
        }
        json!({
            "t": "update",
            "processes": processes,
            "points": points,
            "stats": stats,
            "groups": groups,
            "log": log,
            "alerts": alerts,
        })
    }

    /// Everything a newly connected page needs: the history of every series, the whole log.
    pub(crate) fn snapshot(&mut self, now: Instant) -> Json {
        let mut processes = Vec::new();
        let mut points = serde_json::Map::new();
        let mut stats = serde_json::Map::new();
        let mut groups = serde_json::Map::new();
        let mut log = Vec::new();
        let mut alerts = Vec::new();
        for p in self.processes.values_mut() {
            processes.push(p.summary(now));
            for ((ty, f), s) in &p.series {
                points.insert(
                    series_id(p.pid, ty, f),
                    json!(s.points.iter().collect::<Vec<_>>()),
                );
            }
            p.analyses(&mut stats, &mut groups);
            log.extend(p.log.iter().cloned());
            alerts.extend(p.alerts.iter().cloned());
        }
        json!({
            "t": "snapshot",
            "bucket_s": BUCKET_S,
            "stats_window_s": STATS_WINDOW_S,
            "processes": processes,
            "points": points,
            "stats": stats,
            "groups": groups,
            "log": log,
            "alerts": alerts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t_ns: u64, ty: &str, fields: &[(&str, Value)]) -> Event {
        Event {
            t_ns,
            thread: 1,
            thread_name: "main".into(),
            type_name: ty.into(),
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn series_are_decimated_to_one_mean_per_bucket() {
        let mut p = Process::new(7, vec![], 0);
        // 1000 events in 0.1 s: five buckets of 20 ms.
        for i in 0..1000u64 {
            p.ingest(&event(
                i * 100_000,
                "step_time",
                &[("ms", Value::Float((i % 2) as f64))],
            ));
        }
        let s = p
            .series
            .get_mut(&("step_time".into(), "ms".into()))
            .unwrap();
        let a = s.take_fresh();
        let b = s.take_fresh();
        let pts: Vec<_> = a.into_iter().chain(b).collect();
        assert_eq!(pts.len(), 5, "{pts:?}");
        assert!(pts.iter().all(|(_, v)| (*v - 0.5).abs() < 1e-9));
        let st = s.stats().unwrap();
        assert_eq!(st["n"], 1000);
        assert_eq!(st["max"], 1.0);
    }

    #[test]
    fn small_integer_fields_become_groups_and_large_ones_do_not() {
        let mut p = Process::new(7, vec![], 0);
        for i in 0..200u64 {
            p.ingest(&event(
                i,
                "domain_work",
                &[
                    ("domain", Value::UInt(i % 4)),
                    ("step", Value::UInt(i)),
                    ("seconds", Value::Float(i as f64)),
                ],
            ));
        }
        let g = &p.groups[&("domain_work".to_string(), "domain".to_string())];
        assert_eq!(g.len(), 4);
        assert_eq!(g[&3]["seconds"], 199.0);
        assert!(
            !p.groups
                .contains_key(&("domain_work".to_string(), "step".to_string()))
        );
    }
}
