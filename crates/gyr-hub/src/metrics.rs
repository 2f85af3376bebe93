//! `GET /metrics`: what the hub tracks, in Prometheus's text exposition format (version
//! 0.0.4), for a scraper to store and alert on beside the rest of a cluster's metrics.
//!
//! Metric names are fixed (`gyr_…`); the program, event type and field are label values,
//! escaped as the format says (`\\`, `\"`, `\n`), so that no name a program chooses can make
//! a malformed line or a metric name of its own. Every program gives:
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `gyr_program_alive` | gauge | `program`, `command` | 1 while the program runs, 0 after |
//! | `gyr_program_events_received_total` | counter | `program`, `command` | events the hub took in |
//! | `gyr_program_events_lost_total` | counter | `program`, `command` | events lost on the way (the stream fell behind, unreadable records, the program's own losses) |
//! | `gyr_events_total` | counter | `program`, `command`, `event` | events of one type |
//! | `gyr_event_rate` | gauge | `program`, `command`, `event` | events of one type per second, over about the last second |
//! | `gyr_field_value` | gauge | `program`, `command`, `event`, `field` | the latest value of a numeric field the hub charts |
//!
//! and the hub itself `gyr_hub_programs`, `gyr_hub_events_received_total`,
//! `gyr_hub_events_lost_total` (with what recording dropped) and `gyr_hub_metrics_omitted`.
//!
//! The output is bounded: at most [`MAX_SERIES`] series of programs (past that, programs and
//! fields are left out in pid order and counted in `gyr_hub_metrics_omitted`), label values
//! cut at [`MAX_LABEL_BYTES`] bytes.

use crate::Shared;
use crate::program::Process;
use std::fmt::Write;
use std::time::Instant;

/// The most series of programs (events and fields) one scrape returns.
pub const MAX_SERIES: usize = 10_000;
/// The longest label value, in bytes (a command line can be long); longer ones are cut at a
/// character boundary and end with `…`.
pub const MAX_LABEL_BYTES: usize = 256;

/// The content type of the text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Appends `v` as a label value: escaped, and cut at [`MAX_LABEL_BYTES`].
pub(crate) fn push_label_value(out: &mut String, v: &str) {
    let mut end = v.len().min(MAX_LABEL_BYTES);
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    for c in v[..end].chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    if end < v.len() {
        out.push('…');
    }
}

/// Appends `v` as a sample value: Go's float syntax, `NaN`, `+Inf`, `-Inf`.
pub(crate) fn push_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{}", gyr_core::ShortFloat(v));
    }
}

/// The exposition being written: one family at a time, each with its `# HELP` and `# TYPE`
/// once, before its samples.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts the family `name`.
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// A sample of the current family.
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                push_label_value(&mut self.out, val);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        push_value(&mut self.out, v);
        self.out.push('\n');
    }

    pub(crate) fn into_text(self) -> String {
        self.out
    }
}

/// A family with one sample per program: name, type, help, and the value.
type PerProgram = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ProgramMetrics) -> f64,
);

/// What one program gives, gathered under its lock.
struct ProgramMetrics {
    pid: String,
    command: String,
    alive: bool,
    received: u64,
    lost: u64,
    /// (event, count, rate)
    events: Vec<(String, u64, f64)>,
    /// (event, field, latest)
    fields: Vec<(String, String, f64)>,
}

fn gather(p: &mut Process, now: Instant, budget: &mut usize, omitted: &mut u64) -> ProgramMetrics {
    let mut types: Vec<&mut crate::analysis::TypeState> = p.types.values_mut().collect();
    types.sort_by(|a, b| a.schema.name.cmp(&b.schema.name));
    let mut events = Vec::new();
    let mut fields = Vec::new();
    for t in types {
        // Two series per event type.
        if *budget < 2 {
            *omitted += 1;
            continue;
        }
        *budget -= 2;
        events.push((t.schema.name.clone(), t.count.count, t.count.rate(now)));
        for (ty, f, s) in t.series_mut() {
            let Some((_, v)) = s.latest() else { continue };
            if *budget == 0 {
                *omitted += 1;
                continue;
            }
            *budget -= 1;
            fields.push((ty.to_owned(), f.to_owned(), v));
        }
    }
    ProgramMetrics {
        pid: p.pid.to_string(),
        command: p.name().to_owned(),
        alive: p.alive,
        received: p.received,
        lost: p.missed + p.unreadable + p.status.as_ref().map_or(0, |s| s.lost),
        events,
        fields,
    }
}

/// The whole exposition of the hub now.
pub(crate) fn render(shared: &Shared) -> String {
    let now = Instant::now();
    let mut budget = MAX_SERIES;
    let mut omitted = 0u64;
    let mut programs = Vec::new();
    let all = shared.programs.all();
    let (mut received, mut lost) = (0u64, 0u64);
    for p in &all {
        let mut p = crate::program::lock(p);
        received += p.received;
        lost += p.missed + p.unreadable + p.status.as_ref().map_or(0, |s| s.lost);
        // Three series per program.
        if budget < 3 {
            omitted += 1;
            continue;
        }
        budget -= 3;
        programs.push(gather(&mut p, now, &mut budget, &mut omitted));
    }
    if let Some(s) = &shared.store {
        lost += s.dropped.load(std::sync::atomic::Ordering::Relaxed);
    }
    let mut e = Exposition::default();
    e.family(
        "gyr_hub_programs",
        "gauge",
        "Programs the hub knows, running or ended.",
    );
    e.sample("gyr_hub_programs", &[], all.len() as f64);
    e.family(
        "gyr_hub_events_received_total",
        "counter",
        "Events the hub took in from every program.",
    );
    e.sample("gyr_hub_events_received_total", &[], received as f64);
    e.family(
        "gyr_hub_events_lost_total",
        "counter",
        "Events lost on the way to the hub or in it (streams that fell behind, unreadable records, programs' own losses, batches recording dropped).",
    );
    e.sample("gyr_hub_events_lost_total", &[], lost as f64);
    e.family(
        "gyr_hub_metrics_omitted",
        "gauge",
        "Programs, event types and fields left out of this scrape to stay within its bound.",
    );
    e.sample("gyr_hub_metrics_omitted", &[], omitted as f64);

    let per_program: [PerProgram; 3] = [
        (
            "gyr_program_alive",
            "gauge",
            "1 while the program runs, 0 once it ended.",
            |p| f64::from(u8::from(p.alive)),
        ),
        (
            "gyr_program_events_received_total",
            "counter",
            "Events the hub took in from the program.",
            |p| p.received as f64,
        ),
        (
            "gyr_program_events_lost_total",
            "counter",
            "Events of the program lost on the way to the hub or by the program itself.",
            |p| p.lost as f64,
        ),
    ];
    for (name, kind, help, value) in per_program {
        e.family(name, kind, help);
        for p in &programs {
            e.sample(
                name,
                &[("program", &p.pid), ("command", &p.command)],
                value(p),
            );
        }
    }
    e.family("gyr_events_total", "counter", "Events of one type.");
    for p in &programs {
        for (ev, count, _) in &p.events {
            e.sample(
                "gyr_events_total",
                &[("program", &p.pid), ("command", &p.command), ("event", ev)],
                *count as f64,
            );
        }
    }
    e.family(
        "gyr_event_rate",
        "gauge",
        "Events of one type per second, over about the last second.",
    );
    for p in &programs {
        for (ev, _, rate) in &p.events {
            e.sample(
                "gyr_event_rate",
                &[("program", &p.pid), ("command", &p.command), ("event", ev)],
                *rate,
            );
        }
    }
    e.family(
        "gyr_field_value",
        "gauge",
        "The latest value of a numeric field of an event type.",
    );
    for p in &programs {
        for (ev, field, v) in &p.fields {
            e.sample(
                "gyr_field_value",
                &[
                    ("program", &p.pid),
                    ("command", &p.command),
                    ("event", ev),
                    ("field", field),
                ],
                *v,
            );
        }
    }
    e.into_text()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_cut() {
        let mut s = String::new();
        push_label_value(&mut s, "a\\b\"c\nd");
        assert_eq!(s, r#"a\\b\"c\nd"#);
        let mut s = String::new();
        let long = "é".repeat(200);
        push_label_value(&mut s, &long);
        assert!(s.ends_with('…'));
        assert!(s.len() <= MAX_LABEL_BYTES + '…'.len_utf8());
        assert!(s.trim_end_matches('…').chars().all(|c| c == 'é'));
    }

    #[test]
    fn values_use_prometheus_spellings() {
        let text = |v| {
            let mut s = String::new();
            push_value(&mut s, v);
            s
        };
        assert_eq!(text(f64::NAN), "NaN");
        assert_eq!(text(f64::INFINITY), "+Inf");
        assert_eq!(text(f64::NEG_INFINITY), "-Inf");
        assert_eq!(text(2.5), "2.5");
        assert_eq!(text(1e300), "1e300");
        assert_eq!(text(-3.0), "-3");
    }

    #[test]
    fn families_come_once_before_their_samples() {
        let mut e = Exposition::default();
        e.family("gyr_x", "gauge", "An x.");
        e.sample("gyr_x", &[("program", "1"), ("event", "a\"b")], 1.5);
        e.sample("gyr_x", &[], 0.0);
        assert_eq!(
            e.into_text(),
            "# HELP gyr_x An x.\n# TYPE gyr_x gauge\ngyr_x{program=\"1\",event=\"a\\\"b\"} 1.5\ngyr_x 0\n"
        );
    }
}
