//! The page view: what a newly connected page gets (a snapshot) and what changed since the
//! last tick (an update), built from the programs and their analyses. Times go out to the
//! microsecond, rates to 7 significant digits, values exactly; a thread's name goes out once.

use crate::analysis::{BUCKET_S, STATS_WINDOW_S, series_id};
use crate::program::{Process, Programs};
use crate::protocol::{
    AttributeView, ObjectView, Objects, OperationView, ParamView, Point, ProcessSummary, Rate,
    SensorView, Snapshot, ThreadSummary, Update,
};
use gyr_proto::v1;
use indexmap::IndexMap;
use std::time::Instant;

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

/// A rate as pages get it: an estimate over about a second, so 7 significant digits say all
/// it knows, in less JSON.
fn shown_rate(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(6 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// A series point as pages get it: the time to the microsecond (a bucket is 20 ms), the value
/// exactly as the program gave it (a step count past ten million, or a wall-clock time, needs
/// every digit).
fn shown_point((t, v): Point) -> Point {
    ((t * 1e6).round() / 1e6, v)
}

/// The process as the UI shows it (without series).
/// `whole`: every thread's name (a snapshot); otherwise only names the update stream has
/// not carried yet, since a page keeps what it was told.
fn summary(p: &mut Process, now: Instant, whole: bool) -> ProcessSummary {
    let mut types: Vec<&mut crate::analysis::TypeState> = p.types.values_mut().collect();
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
    let threads = p
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
                rate: shown_rate(t.count.rate(now)),
            }
        })
        .collect();
    let state = p.status.as_ref().and_then(|s| s.state.clone());
    ProcessSummary {
        pid: p.pid,
        command: p.command_line.join(" "),
        source: p.source.name().to_owned(),
        alive: p.alive,
        state: state.as_ref().map(|s| s.text.clone()).unwrap_or_default(),
        paused: state
            .as_ref()
            .is_some_and(|s| s.kind == v1::run_state::Kind::Paused as i32),
        records: p.status.as_ref().map(|s| s.records).unwrap_or(0),
        lost: p.status.as_ref().map(|s| s.lost).unwrap_or(0),
        received: p.received,
        missed: p.missed,
        unreadable: p.unreadable,
        untracked_records: p.untracked_records,
        types: rates,
        threads,
        objects: p.objects.as_ref().map(objects_view),
        sensors: p.sensors.as_ref().map(sensors_view),
    }
}

/// What changed since the last update: fresh series points and the provisional point of
/// every series that moved, new log entries and alerts; with `full`, also every program's
/// summary (state, objects, sensors, rates), the statistics of the series that moved and
/// the groups (these cost more, and change slower than the eye follows).
pub(crate) fn update(programs: &Programs, now: Instant, full: bool) -> Update {
    let mut summaries = Vec::new();
    let mut points: IndexMap<String, Vec<Point>> = IndexMap::new();
    let mut live = IndexMap::new();
    let mut stats = IndexMap::new();
    let mut groups = IndexMap::new();
    let mut log = Vec::new();
    let mut alerts = Vec::new();
    programs.each(|p| {
        if full {
            summaries.push(summary(p, now, false));
        }
        let pid = p.pid;
        for (ty, f, s) in p.series_mut() {
            if !s.moved {
                continue;
            }
            s.moved = false;
            let id = series_id(pid, ty, f);
            let fresh = s.take_fresh();
            if !fresh.is_empty() {
                points.insert(id.clone(), fresh.into_iter().map(shown_point).collect());
            }
            if let Some(l) = s.live() {
                live.insert(id, shown_point(l));
            }
        }
        if full {
            p.analyses(false, &mut stats, &mut groups);
        }
        log.append(&mut p.fresh_log);
        alerts.append(&mut p.fresh_alerts);
    });
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
pub(crate) fn snapshot(programs: &Programs, now: Instant) -> Snapshot {
    let mut processes = Vec::new();
    let mut points = IndexMap::new();
    let mut live = IndexMap::new();
    let mut stats = IndexMap::new();
    let mut groups = IndexMap::new();
    let mut log = Vec::new();
    let mut alerts = Vec::new();
    programs.each(|p| {
        processes.push(summary(p, now, true));
        let pid = p.pid;
        for (ty, f, s) in p.series_mut() {
            // Fresh points are in this history and will come in the next update too (other
            // pages need them): the page takes a point once, by its time.
            let id = series_id(pid, ty, f);
            points.insert(
                id.clone(),
                s.points.iter().copied().map(shown_point).collect(),
            );
            if let Some(l) = s.live() {
                live.insert(id, shown_point(l));
            }
        }
        p.analyses(true, &mut stats, &mut groups);
        log.extend(p.log.iter().cloned());
        alerts.extend(p.alerts.iter().cloned());
    });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{Source, tests::batch};
    use gyr_core::{Field, FieldType, Schema, Value};

    #[test]
    fn pages_get_values_exactly_times_to_the_microsecond_and_rates_to_seven_digits() {
        assert_eq!(shown_point((1.23456789, 2.0)), (1.234568, 2.0));
        for v in [123_456_789.0, 1_764_077_000_123.5, 0.1 + 0.2, -1e-300] {
            assert_eq!(shown_point((0.0, v)).1, v);
        }
        assert_eq!(shown_rate(123.456789012), 123.4568);
        assert_eq!(shown_rate(-0.000123456789), -0.0001234568);
        assert_eq!(shown_rate(0.0), 0.0);
        assert!(shown_rate(f64::NAN).is_nan());
        assert_eq!(shown_rate(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn a_thread_name_goes_out_once_in_updates_and_always_in_snapshots() {
        let schema = Schema::new(5, "x", vec![Field::new("v", FieldType::F64)]).unwrap();
        let mut p = Process::new(7, vec![], 0, Source::Attached);
        p.ingest_batch(&batch(&schema, &[(1, vec![Value::Float(1.0)])], 0));
        let now = Instant::now();
        let names =
            |s: &ProcessSummary| s.threads.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&summary(&mut p, now, false)),
            [Some("main".to_owned())]
        );
        assert_eq!(names(&summary(&mut p, now, false)), [None]);
        assert_eq!(
            names(&summary(&mut p, now, true)),
            [Some("main".to_owned())]
        );
        assert_eq!(names(&summary(&mut p, now, false)), [None]);
    }
}
