//! The live analyses over one event type's stream: decimated series of every numeric field
//! with windowed statistics, per-type rates, and the latest values per group (per domain, per
//! worker) for load-balance bars.
//!
//! Decimation happens here, not in the browser: a series keeps at most one point per
//! [`BUCKET_S`] of program time (the mean of the events in it), so a page receives at most
//! 50 points a second per series whatever the event rate.

use crate::protocol::{Groups, Stats};
use gyr_core::Schema;
use gyr_core::schema::ScalarType;
use indexmap::IndexMap;
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

/// A numeric field of one event type, over time.
#[derive(Debug, Default)]
pub(crate) struct Series {
    pub(crate) points: VecDeque<(f64, f64)>,
    fresh: Vec<(f64, f64)>,
    bucket: Option<Bucket>,
    window: VecDeque<(f64, f64)>,
    /// Whether values arrived since the statistics were last computed.
    pub(crate) dirty: bool,
    /// Whether values arrived since the last update to the pages.
    pub(crate) moved: bool,
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
    pub(crate) fn take_fresh(&mut self) -> Vec<(f64, f64)> {
        std::mem::take(&mut self.fresh)
    }

    /// The bucket still filling, as a provisional point: pages draw it at once and replace it
    /// when the bucket closes, so what they show is never a bucket late.
    pub(crate) fn live(&self) -> Option<(f64, f64)> {
        self.bucket
            .map(|b| ((b.index as f64 + 0.5) * BUCKET_S, b.sum / b.n as f64))
    }

    /// The latest value taken in, raw (not decimated), and its program time: what `/metrics`
    /// reports.
    pub(crate) fn latest(&self) -> Option<(f64, f64)> {
        self.window.back().copied()
    }

    /// Count, mean, min, max, p50, p99 over the last [`STATS_WINDOW_S`] of program time,
    /// recomputed only when values arrived since the last time.
    pub(crate) fn stats(&mut self) -> Option<&Stats> {
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
pub(crate) struct TypeCount {
    pub(crate) count: u64,
    /// (when, count) at recent ticks, for a rate over about a second.
    history: VecDeque<(Instant, u64)>,
}

impl TypeCount {
    pub(crate) fn rate(&mut self, now: Instant) -> f64 {
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
pub(crate) struct TypeState {
    pub(crate) schema: Schema,
    pub(crate) count: TypeCount,
    /// Per field: its series, for scalar (numeric) fields.
    series: Vec<Option<Series>>,
    /// Per field: for integer fields still taken as a group key (domain, worker, rank), the
    /// latest value of every field per key value (NaN: none yet).
    groups: Vec<Option<BTreeMap<i64, Vec<f64>>>>,
    /// Per field: for text fields still taken as a group key (a watch-dog's `instance`: one
    /// run of an ensemble), the latest value of every numeric field per key.
    text_groups: Vec<Option<BTreeMap<String, Vec<f64>>>>,
    /// `gyr.alert`: its events feed the alerts panel.
    pub(crate) alert: bool,
    /// `gyr.steer`: in a replay, the steering log is rebuilt from these.
    pub(crate) steer: bool,
    /// Whether the hub's rules watch this type, as of the rules' generation `rules_generation`.
    pub(crate) ruled: bool,
    pub(crate) rules_generation: u64,
    /// Which event of the MPI views this type is, if one (`crate::mpi`).
    pub(crate) mpi: Option<crate::mpi::Kind>,
}

/// The event type whose events feed the alerts panel.
const ALERT_EVENT: &str = "gyr.alert";
/// The families of `gyr::sync::events`, the thread events.
const THREAD_EVENT_PREFIXES: [&str; 6] = [
    "gyr.thread.",
    "gyr.mutex.",
    "gyr.rwlock.",
    "gyr.cond.",
    "gyr.barrier.",
    "gyr.span.",
];
/// The event type the steering log is also written as.
const STEER_EVENT: &str = "gyr.steer";

impl TypeState {
    pub(crate) fn new(schema: Schema) -> Self {
        // Thread events carry ids and sequence numbers, not quantities: they are counted, and
        // drawn by the life-time view, not charted.
        let charted = !THREAD_EVENT_PREFIXES
            .iter()
            .any(|p| schema.name.starts_with(p));
        let series = schema
            .fields
            .iter()
            .map(|f| f.ty.scalar().filter(|_| charted).map(|_| Series::default()))
            .collect();
        let groups = schema
            .fields
            .iter()
            .map(|f| {
                (charted
                    && matches!(
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
                    ))
                .then(BTreeMap::new)
            })
            .collect();
        let text_groups = schema
            .fields
            .iter()
            .map(|f| (charted && f.ty == gyr_core::FieldType::Str).then(BTreeMap::new))
            .collect();
        TypeState {
            text_groups,
            alert: schema.name == ALERT_EVENT,
            steer: schema.name == STEER_EVENT,
            ruled: false,
            rules_generation: 0,
            mpi: crate::mpi::kind(&schema.name),
            schema,
            count: TypeCount::default(),
            series,
            groups,
        }
    }

    /// Takes in one event's numeric fields (`v`, by field position) at program time `t`.
    pub(crate) fn take(&mut self, t: f64, v: &[f64]) {
        self.count.count += 1;
        for (s, x) in self.series.iter_mut().zip(v) {
            if let Some(s) = s {
                s.push(t, *x);
            }
        }
        for i in 0..self.groups.len() {
            let Some(g) = &mut self.groups[i] else {
                continue;
            };
            let key = v[i] as i64;
            if !g.contains_key(&key) && g.len() >= MAX_GROUPS {
                self.groups[i] = None;
                continue;
            }
            let latest = g.entry(key).or_insert_with(|| vec![f64::NAN; v.len()]);
            for (j, x) in v.iter().enumerate() {
                if j != i && x.is_finite() {
                    latest[j] = *x;
                }
            }
        }
    }

    /// Whether some text field is still taken as a group key: then [`TypeState::take_text`]
    /// wants the event's decoded values.
    pub(crate) fn has_text_groups(&self) -> bool {
        self.text_groups.iter().any(Option::is_some)
    }

    /// Takes in one event's text group keys (`values`, decoded) with its numeric fields (`v`).
    /// An empty key is no group; past [`MAX_GROUPS`] keys the field is no longer a group key.
    pub(crate) fn take_text(&mut self, values: &[gyr_core::Value], v: &[f64]) {
        for (i, g) in self.text_groups.iter_mut().enumerate() {
            let Some(map) = g else { continue };
            let Some(gyr_core::Value::Str(key)) = values.get(i) else {
                continue;
            };
            if key.is_empty() {
                continue;
            }
            if !map.contains_key(key) && map.len() >= MAX_GROUPS {
                *g = None;
                continue;
            }
            let latest = map
                .entry(key.clone())
                .or_insert_with(|| vec![f64::NAN; v.len()]);
            for (j, x) in v.iter().enumerate() {
                if x.is_finite() {
                    latest[j] = *x;
                }
            }
        }
    }

    /// Every series: (type, field, series).
    pub(crate) fn series_mut(&mut self) -> impl Iterator<Item = (&str, &str, &mut Series)> {
        let TypeState { schema, series, .. } = self;
        series
            .iter_mut()
            .zip(&schema.fields)
            .filter_map(|(s, f)| Some((schema.name.as_str(), f.name.as_str(), s.as_mut()?)))
    }

    /// Windowed statistics of every series with new values (`all`: of every series), and the
    /// latest values per group, by series id.
    pub(crate) fn analyses(
        &mut self,
        pid: u32,
        all: bool,
        stats: &mut IndexMap<String, Stats>,
        groups: &mut IndexMap<String, Groups>,
    ) {
        for (ty, f, s) in self.series_mut() {
            if (all || s.dirty)
                && let Some(st) = s.stats()
            {
                stats.insert(series_id(pid, ty, f), st.clone());
            }
        }
        let fields = &self.schema.fields;
        let mut insert = |i: usize, by: Groups| {
            groups.insert(series_id(pid, &self.schema.name, &fields[i].name), by);
        };
        for (i, g) in self.groups.iter().enumerate() {
            if let Some(g) = g.as_ref().filter(|g| !g.is_empty()) {
                insert(
                    i,
                    group_view(fields, g.iter().map(|(k, v)| (k.to_string(), v))),
                );
            }
        }
        for (i, g) in self.text_groups.iter().enumerate() {
            // One run alone has nothing to compare with.
            if let Some(g) = g.as_ref().filter(|g| g.len() >= 2) {
                insert(i, group_view(fields, g.iter().map(|(k, v)| (k.clone(), v))));
            }
        }
    }
}

/// The page's view of one grouped field: per group key, its latest finite values by field name.
fn group_view<'a>(
    fields: &[gyr_core::Field],
    latest: impl Iterator<Item = (String, &'a Vec<f64>)>,
) -> Groups {
    latest
        .map(|(k, values)| {
            let by_name = values
                .iter()
                .zip(fields)
                .filter(|(x, _)| x.is_finite())
                .map(|(x, f)| (f.name.clone(), *x))
                .collect();
            (k, by_name)
        })
        .collect()
}

/// The id of a series in the UI protocol: `pid/type/field`.
pub(crate) fn series_id(pid: u32, type_name: &str, field: &str) -> String {
    format!("{pid}/{type_name}/{field}")
}
