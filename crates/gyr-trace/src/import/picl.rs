//! PICL trace files into gyr: the format ParaGraph reads (`.trf`), in both its versions.
//!
//! Each line is a record, its fields separated by blanks; the processor (node) that wrote it
//! becomes gyr thread `node + 1`, named `node N` (node −1, PICL's "no node", is thread 0), and
//! its time, in seconds, ns since the trace's 0.
//!
//! **Old PICL** (ParaGraph 1.x): `key seconds microseconds node` and the fields of the key,
//! compact form. Each key is a schema `picl.<name>` whose fields are the layout's, as `i64`:
//! `4 12 345678 0 1 99 1024` is `picl.send { to: 1, type: 99, length: 1024 }` at
//! 12.345678 s on node 0. A key with no known layout keeps its fields as text
//! (`picl.record_K { values }`).
//!
//! **New PICL** (MPICL, ORNL/TM-12125): `record_type event_type seconds processor thread
//! data_count [data_type d1 ... dN]`, told apart from the old form by its negative record
//! type. Record types −3 (begin) and −4 (end) of an event become `picl.<event>.begin` /
//! `.end` (`picl.send.begin`, `picl.recv.end`, `picl.open.begin`; an unknown event type `E`
//! is `picl.event_E`), −202 definitions `picl.define`; the data are integer fields named by
//! what the format documents (`bytes`, `dest`, `src`) or `d1`, `d2`, .... The same event with
//! another count of data is another schema (`picl.send.begin_3`).

use super::{Builder, ImportError, ImportReport, Location};
use gyr_core::ThreadInfo;
use gyr_core::schema::{Field, FieldType, Schema, TypeId};
use gyr_core::trace::TraceHeader;
use std::collections::HashMap;
use std::io::{BufRead, Read, Write};

/// The longest line read.
const MAX_LINE: usize = 1 << 20;

/// Old PICL's keys: name and compact layout (`None`: fields not documented, kept as text).
fn old_key(key: i64) -> Option<(&'static str, Option<&'static [&'static str]>)> {
    Some(match key {
        1 => (
            "trace_start",
            Some(&["event_level", "compstats_level", "commstats_level"]),
        ),
        2 => ("open", Some(&[])),
        3 => ("load", None),
        4 => ("send", Some(&["to", "type", "length"])),
        5 => ("probe", Some(&["type"])),
        6 => ("recv", Some(&["from", "type", "length"])),
        7 => ("recv_blocking", Some(&["type"])),
        8 => ("recv_waking", Some(&["from", "type", "length"])),
        9 => ("message", Some(&[])),
        10 => ("sync", Some(&[])),
        11 => ("compstats", Some(&["idle_sec", "idle_usec"])),
        12 => (
            "commstats",
            Some(&[
                "msgs_received",
                "bytes_received",
                "msgs_sent",
                "bytes_sent",
                "probes",
            ]),
        ),
        13 => ("close", Some(&[])),
        14 => ("trace_level", Some(&["event", "compstats", "commstats"])),
        15 => ("trace_mark", Some(&["type"])),
        16 => ("trace_message", None),
        17 => ("trace_stop", Some(&[])),
        18 => ("trace_flush", Some(&["finished_sec", "finished_usec"])),
        19 => ("trace_exit", Some(&["space"])),
        20 => (
            "block_begin",
            Some(&["block_type", "location_type", "parameter_type"]),
        ),
        21 => (
            "block_end",
            Some(&["block_type", "location_type", "parameter_type"]),
        ),
        22 => ("trace_mark_array", None),
        23 => ("clock_sync", None),
        24 => ("trace_files", Some(&["finished_sec", "finished_usec"])),
        _ => return None,
    })
}

/// New PICL's event types: name, and the names of the data of its begin and end records when
/// the format documents them.
fn new_event(event: i64) -> (String, &'static [&'static str], &'static [&'static str]) {
    let (name, begin, end): (&str, &'static [&'static str], &'static [&'static str]) = match event {
        -901 => ("open", &[], &[]),
        -21 => ("send", &["bytes", "d2", "dest", "d4"], &[]),
        -27 => ("isend", &["bytes", "d2", "dest", "d4"], &[]),
        -52 => ("recv", &["d1", "src", "d3"], &["bytes", "d2", "src", "d4"]),
        -57 => ("irecv", &["d1", "src", "d3"], &["bytes", "d2", "src", "d4"]),
        -31 => ("wait", &[], &[]),
        -61 => ("waitall", &[], &[]),
        -402 => ("barrier", &[], &[]),
        -790 => ("reduce", &[], &[]),
        -782 => ("allreduce", &[], &[]),
        -812 => ("subset", &[], &[]),
        other => return (format!("event_{}", other.unsigned_abs()), &[], &[]),
    };
    (name.to_owned(), begin, end)
}

/// What a schema is made for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Old(i64),
    /// Old key with fields kept as text.
    OldText(i64),
    New(i64, i64, usize),
}

struct Picl<W: Write> {
    out: Builder<W>,
    schemas: HashMap<Key, TypeId>,
    names: HashMap<String, u32>,
    next_id: TypeId,
    payload: Vec<u8>,
}

impl<W: Write> Picl<W> {
    fn schema(
        &mut self,
        key: Key,
        name: &str,
        fields: impl FnOnce() -> Vec<Field>,
    ) -> Result<TypeId, ImportError> {
        if let Some(&id) = self.schemas.get(&key) {
            return Ok(id);
        }
        let seen = self.names.entry(name.to_owned()).or_insert(0);
        *seen += 1;
        let name = if *seen == 1 {
            name.to_owned()
        } else {
            format!("{name}_{seen}")
        };
        let id = self.next_id;
        self.next_id += 1;
        let schema = Schema::new(id, name, fields()).expect("PICL's schemas are valid");
        self.out.schema(&schema)?;
        self.schemas.insert(key, id);
        Ok(id)
    }

    fn record(&mut self, node: i64, ts: u64, type_id: TypeId) -> Result<(), ImportError> {
        let thread = (node + 1) as u64;
        if !self.out.has_thread(thread) {
            self.out.thread(&ThreadInfo {
                id: thread,
                name: format!("node {node}"),
                os_tid: 0,
            })?;
        }
        let payload = std::mem::take(&mut self.payload);
        let r = self.out.record(thread, type_id, ts, None, 0, &payload);
        self.payload = payload;
        r
    }
}

fn ints(n: usize, names: &[&str]) -> Vec<Field> {
    (0..n)
        .map(|i| {
            let name = names
                .get(i)
                .map(|s| (*s).to_owned())
                .unwrap_or_else(|| format!("d{}", i + 1));
            Field::new(name, FieldType::I64)
        })
        .collect()
}

/// Reads a PICL trace from `input` into a gyr trace on `out`.
pub fn import<R: Read, W: Write>(
    input: R,
    out: W,
    source: &str,
) -> Result<(W, ImportReport), ImportError> {
    let mut p = Picl {
        out: Builder::new(
            out,
            TraceHeader {
                command_line: vec![source.to_owned()],
                clock_source: "picl".into(),
                ..TraceHeader::default()
            },
        ),
        schemas: HashMap::new(),
        names: HashMap::new(),
        next_id: 1,
        payload: Vec::new(),
    };
    let mut r = std::io::BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        number += 1;
        let at = Location::Line(number);
        let n = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(ImportError::Read)?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_LINE {
            return Err(ImportError::bad(
                at,
                format!("a line longer than {MAX_LINE} bytes"),
            ));
        }
        let text = std::str::from_utf8(&line)
            .map_err(|_| ImportError::bad(at, "a line that is not text"))?;
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() || words[0].starts_with('#') {
            continue;
        }
        let int = |i: usize, what: &str| -> Result<i64, ImportError> {
            let w = words.get(i).ok_or_else(|| {
                ImportError::bad(
                    at,
                    format!("the record ends before its {what} (field {})", i + 1),
                )
            })?;
            w.parse::<i64>().map_err(|_| {
                ImportError::bad(
                    at,
                    format!("field {} (the {what}) is `{w}`, not an integer", i + 1),
                )
            })
        };
        let key = int(0, "record type")?;
        if key > 0 {
            // Old PICL: key seconds microseconds node fields...
            let (sec, usec, node) = (
                int(1, "clock's seconds")?,
                int(2, "clock's microseconds")?,
                int(3, "node")?,
            );
            if sec < 0 || !(0..1_000_000).contains(&usec) {
                return Err(ImportError::bad(
                    at,
                    format!(
                        "a clock of {sec} s {usec} µs: expected seconds ≥ 0 and 0 to 999999 µs"
                    ),
                ));
            }
            if node < -1 {
                return Err(ImportError::bad(
                    at,
                    format!("node {node}: expected a node number, or -1"),
                ));
            }
            let ts = (sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(usec as u64 * 1000);
            let rest = &words[4..];
            let (name, layout) = old_key(key).unwrap_or(("record", None));
            p.payload.clear();
            let id = match layout {
                Some(fields) => {
                    if rest.len() != fields.len() {
                        return Err(ImportError::bad(
                            at,
                            format!(
                                "a `{name}` record (key {key}) has {} values after its node; expected {} ({})",
                                rest.len(),
                                fields.len(),
                                if fields.is_empty() {
                                    "none".to_owned()
                                } else {
                                    fields.join(" ")
                                }
                            ),
                        ));
                    }
                    for (i, field) in fields.iter().enumerate() {
                        p.payload
                            .extend_from_slice(&int(4 + i, field)?.to_le_bytes());
                    }
                    p.schema(Key::Old(key), &format!("picl.{name}"), || {
                        ints(fields.len(), fields)
                    })?
                }
                None => {
                    let values = rest.join(" ");
                    p.payload
                        .extend_from_slice(&(values.len() as u32).to_le_bytes());
                    p.payload.extend_from_slice(values.as_bytes());
                    let name = if old_key(key).is_some() {
                        format!("picl.{name}")
                    } else {
                        format!("picl.record_{key}")
                    };
                    p.schema(Key::OldText(key), &name, || {
                        vec![Field::new("values", FieldType::Str)]
                    })?
                }
            };
            p.record(node, ts, id)?;
        } else {
            // New PICL: record_type event_type seconds processor thread data_count [type d...]
            let event = int(1, "event type")?;
            let secs: f64 = words
                .get(2)
                .ok_or_else(|| ImportError::bad(at, "the record ends before its timestamp"))?
                .parse()
                .map_err(|_| {
                    ImportError::bad(
                        at,
                        format!("the timestamp `{}` is not a number of seconds", words[2]),
                    )
                })?;
            if !(secs >= 0.0 && secs.is_finite()) {
                return Err(ImportError::bad(at, format!("a timestamp of {secs} s")));
            }
            let node = int(3, "processor")?;
            int(4, "thread")?;
            let count = int(5, "data count")?;
            if node < -1 {
                return Err(ImportError::bad(
                    at,
                    format!("processor {node}: expected a processor number, or -1"),
                ));
            }
            let expected = if count > 0 { 7 + count as usize } else { 6 };
            if count < 0 || words.len() != expected {
                return Err(ImportError::bad(
                    at,
                    format!(
                        "a data count of {count} with {} words on the line; expected {expected} (6 fields, then the data type and {count} values)",
                        words.len()
                    ),
                ));
            }
            if count > 0 {
                let data_type = int(6, "data type")?;
                if data_type != 2 {
                    return Err(ImportError::bad(
                        at,
                        format!("data type {data_type}: only 2 (integers) is known"),
                    ));
                }
            }
            let count = count as usize;
            p.payload.clear();
            for i in 0..count {
                p.payload
                    .extend_from_slice(&int(7 + i, "data value")?.to_le_bytes());
            }
            let (name, begin, end) = new_event(event);
            let (schema, names): (String, &[&str]) = match key {
                -3 => (format!("picl.{name}.begin"), begin),
                -4 => (format!("picl.{name}.end"), end),
                -202 => ("picl.define".into(), &[]),
                other => (format!("picl.{name}.record_{}", other.unsigned_abs()), &[]),
            };
            let names = if names.len() == count { names } else { &[] };
            let id = p.schema(Key::New(key, event, count), &schema, || ints(count, names))?;
            p.record(node, (secs * 1e9).round() as u64, id)?;
        }
    }
    p.out.finish(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_line() {
        let e = import("4 12 345678 0 1 99\n".as_bytes(), Vec::new(), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("to type length"), "{e}");
        let e = import("1 0 0 0 1 1 1\n4 x 0 0 1 2 3\n".as_bytes(), Vec::new(), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("`x`"), "{e}");
        let e = import("-3 -21 0.1 0 0 4 2 1 2\n".as_bytes(), Vec::new(), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("data count of 4"), "{e}");
    }
}
