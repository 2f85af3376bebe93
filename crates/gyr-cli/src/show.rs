//! How steering answers look on a terminal: objects, status, sensors, changes, log entries
//! and live events. Shared by the one-shot commands, `gyr attach` and `gyr script`, so that a
//! value reads the same everywhere.
//!
//! Every string a program (or its trace file) chose, such as names, command lines,
//! descriptions and string values, goes through [`printable`] before it reaches a terminal in
//! human form: a hostile program must not move the cursor, clear the screen or reverse text.
//! JSON output needs no such step; JSON escaping applies there.

pub(crate) use gyr_client::events::{Event, EventDecoder};
use gyr_proto::v1;
use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` would act on a terminal or on how text around it is shown: control characters
/// (escape sequences, carriage return, newline, ...), bidirectional marks and overrides
/// (U+202E turns the rest of the line around), invisible separators and joiners.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// Program-controlled text made safe to print: every character that would act on the terminal
/// is shown as visible text in Rust's form, `\u{1b}`.
pub(crate) fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(acts_on_terminal) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if acts_on_terminal(c) {
            let _ = write!(out, "{}", c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A command line, its words made [`printable`] and joined by spaces.
pub(crate) fn command_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| printable(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An attribute or parameter type as users write it.
pub(crate) fn attr_type(t: i32) -> &'static str {
    v1::AttrType::user_name(t)
}

/// A value, or nothing.
pub(crate) fn value(v: &Option<v1::Value>) -> String {
    v.as_ref()
        .map(|v| printable(&v.to_string()).into_owned())
        .unwrap_or_default()
}

/// A value as it is, for JSON output (which escapes it itself).
pub(crate) fn value_for_json(v: &Option<v1::Value>) -> String {
    v.as_ref().map(|v| v.to_string()).unwrap_or_default()
}

/// `object.attribute`, or the object's name alone for a parameter.
pub(crate) fn attr_path(o: &v1::ObjectInfo, a: &v1::AttrInfo) -> String {
    if o.is_param {
        printable(&o.name).into_owned()
    } else {
        format!("{}.{}", printable(&o.name), printable(&a.name))
    }
}

fn signature(op: &v1::OperationInfo) -> String {
    op.params
        .iter()
        .map(|p| format!("{}: {}", printable(&p.name), attr_type(p.r#type)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The listing of `gyr ls`: objects with their attributes (type, value, unit, range, notes),
/// actuators, then functions.
pub(crate) fn objects(reply: &v1::ListObjectsReply, program: &str) -> String {
    let mut out = String::new();
    if reply.objects.is_empty() && reply.functions.is_empty() {
        let _ = writeln!(
            out,
            "program {program} has no steering objects or functions registered"
        );
    }
    for o in &reply.objects {
        let desc = if o.description.is_empty() {
            String::new()
        } else {
            format!("  -- {}", printable(&o.description))
        };
        let kind = if o.is_param { " (parameter)" } else { "" };
        let _ = writeln!(out, "{}{kind}{desc}", printable(&o.name));
        for a in &o.attributes {
            let mut notes = Vec::new();
            if !a.unit.is_empty() {
                notes.push(printable(&a.unit).into_owned());
            }
            if a.has_min || a.has_max {
                let lo = if a.has_min {
                    gyr::gyr_core::ShortFloat(a.min).to_string()
                } else {
                    String::new()
                };
                let hi = if a.has_max {
                    gyr::gyr_core::ShortFloat(a.max).to_string()
                } else {
                    String::new()
                };
                notes.push(format!("{lo}..={hi}"));
            }
            if a.read_only {
                notes.push("read-only".into());
            }
            if !a.description.is_empty() {
                notes.push(printable(&a.description).into_owned());
            }
            let _ = writeln!(
                out,
                "  {:<28} {:<8} = {:<16} {}",
                attr_path(o, a),
                attr_type(a.r#type),
                value(&a.value),
                notes.join(", ")
            );
        }
        for op in &o.actuators {
            let _ = writeln!(
                out,
                "  {}.{}({})  [actuator] {}",
                printable(&o.name),
                printable(&op.name),
                signature(op),
                printable(&op.description)
            );
        }
    }
    for f in &reply.functions {
        let _ = writeln!(
            out,
            "{}({})  [function] {}",
            printable(&f.name),
            signature(f),
            printable(&f.description)
        );
    }
    out
}

/// A program's run state and counters.
pub(crate) fn status(s: &v1::StatusReply) -> String {
    let mut out = String::new();
    let state = printable(s.state.as_ref().map(|x| x.text.as_str()).unwrap_or("?"));
    let _ = writeln!(out, "program {}: {state}", s.pid);
    let _ = writeln!(out, "  command   {}", command_line(&s.command_line));
    let _ = writeln!(out, "  events    {} recorded, {} lost", s.records, s.lost);
    for (name, n) in &s.synch_points {
        let _ = writeln!(
            out,
            "  synch point {}: reached {n} times while steered",
            printable(name)
        );
    }
    out
}

/// The sensor table of `gyr sensors`.
pub(crate) fn sensors(reply: &v1::SensorsReply) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<18} {:<9} {:<8} {:<12} {:>10}",
        "TYPE", "INSTANCE", "KIND", "STATE", "RATE", "SKIPPED"
    );
    for s in &reply.sensors {
        let state = if s.active {
            "on"
        } else if s.enabled {
            "idle"
        } else {
            "off"
        };
        let _ = writeln!(
            out,
            "{:<28} {:<18} {:<9} {:<8} {:<12} {:>10}",
            printable(&s.type_name),
            printable(&s.instance),
            printable(&s.kind),
            state,
            printable(&s.rate),
            s.skipped
        );
    }
    out
}

/// What a write changed: `path: old -> new`, a line each.
pub(crate) fn changes(changes: &[v1::Change]) -> String {
    let mut out = String::new();
    for ch in changes {
        let _ = writeln!(
            out,
            "{}: {} -> {}",
            printable(&ch.path),
            value(&ch.old),
            value(&ch.new)
        );
    }
    out
}

/// A time in ns since the Unix epoch as UTC to the millisecond: `2026-11-26T10:41:07.123Z`.
pub(crate) fn utc(unix_ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(unix_ns);
    humantime::format_rfc3339_millis(t).to_string()
}

/// One steering-log entry on one line.
pub(crate) fn log_entry(e: &v1::LogEntry) -> String {
    let err = if e.error.is_empty() {
        String::new()
    } else {
        format!("  REFUSED: {}", printable(&e.error))
    };
    format!(
        "{:>6} {:>12.6}s  {:<28} {}{err}",
        e.seq,
        e.time_ns as f64 / 1e9,
        printable(&e.who),
        printable(&e.action)
    )
}

/// `time  thread  type { field: value, ... }`, floats to 7 significant digits (the JSON
/// form keeps every digit).
pub(crate) fn event_line(e: &Event) -> String {
    let body: Vec<String> = e
        .fields
        .iter()
        .map(|(f, v)| format!("{}: {}", printable(f), printable(&compact(v))))
        .collect();
    format!(
        "{:>14.9}  {:<12} {} {{ {} }}",
        e.t_ns as f64 / 1e9,
        printable(&e.thread_name),
        printable(&e.type_name),
        body.join(", ")
    )
}

/// One live event as one JSON object: `t_ns`, `thread`, `type`, `fields` (values as
/// [`value_json`] writes them), the shape `gyr trace dump --json` prints too.
pub(crate) fn event_json(e: &Event) -> String {
    let fields: serde_json::Map<String, serde_json::Value> = e
        .fields
        .iter()
        .map(|(f, v)| (f.clone(), value_json(v)))
        .collect();
    serde_json::json!({"t_ns": e.t_ns, "thread": e.thread, "type": e.type_name, "fields": fields})
        .to_string()
}

/// A field's value in JSON, for every command that prints events as JSON: numbers as
/// numbers, strings as strings, arrays as arrays, bytes as a hex string, and a float JSON
/// cannot hold (NaN, infinite) as its text.
pub(crate) fn value_json(v: &gyr::gyr_core::Value) -> serde_json::Value {
    use gyr::gyr_core::Value;
    match v {
        Value::Int(i) => (*i).into(),
        Value::UInt(u) => (*u).into(),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Into::into)
            .unwrap_or_else(|| f.to_string().into()),
        Value::Bool(b) => (*b).into(),
        Value::Str(s) => s.clone().into(),
        Value::Bytes(b) => b
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
            .into(),
        Value::Array(items) => items.iter().map(value_json).collect::<Vec<_>>().into(),
    }
}

/// A value for reading, not for round-tripping: floats shortened.
fn compact(v: &gyr::gyr_core::Value) -> String {
    use gyr::gyr_core::Value;
    match v {
        Value::Float(x) if *x == 0.0 || (1e-3..1e7).contains(&x.abs()) => {
            let digits = 6usize.saturating_sub(x.abs().log10().floor().max(0.0) as usize);
            let s = format!("{x:.digits$}");
            let s = s.trim_end_matches('0');
            s.strip_suffix('.').unwrap_or(s).to_owned()
        }
        Value::Float(x) => format!("{x:.6e}"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(compact).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{command_line, compact, printable};
    use gyr::gyr_core::Value;

    #[test]
    fn terminal_controls_are_shown_not_obeyed() {
        assert_eq!(printable("plain é 名"), "plain é 名");
        assert_eq!(printable("\x1b[2Jx"), "\\u{1b}[2Jx");
        assert_eq!(printable("a\u{202e}b\rc\n"), "a\\u{202e}b\\u{d}c\\u{a}");
        assert_eq!(printable("\u{9b}\u{7f}\u{2066}"), "\\u{9b}\\u{7f}\\u{2066}");
        assert_eq!(
            command_line(&["prog".into(), "--x=\x1b]0;t\x07".into()]),
            "prog --x=\\u{1b}]0;t\\u{7}"
        );
    }

    #[test]
    fn floats_are_shortened_for_reading() {
        assert_eq!(compact(&Value::Float(55.409210673131)), "55.40921");
        assert_eq!(compact(&Value::Float(-105.82101949481861)), "-105.821");
        assert_eq!(compact(&Value::Float(0.25)), "0.25");
        assert_eq!(compact(&Value::Float(0.0)), "0");
        assert_eq!(compact(&Value::Float(1.5e-9)), "1.500000e-9");
        assert_eq!(compact(&Value::UInt(7)), "7");
    }
}
