//! Chrome's JSON trace event format, written as a stream.
//!
//! The output is one object, `{"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}`,
//! with one event a line. Times (`ts`) are µs with three decimals (ns exact, as doubles of
//! traces up to days long). What each thing becomes:
//!
//! - processes and threads: `M` events `process_name` and `thread_name` (pid, and the OS
//!   thread id as `tid`);
//! - slices on a thread (spans, waits): `B` and `E`, always balanced per thread;
//! - lock holds: async `b`/`e` events (category `lock`, one id per thread and lock), which
//!   viewers draw on tracks of their own, so that holds of different locks never mis-nest with
//!   each other or with the thread's slices;
//! - instants: `i` with `"s":"t"` and the record's fields as `args`;
//! - counters: one `C` event per value, named `type.field`, with `args: {"value": v}`;
//! - flows: version 2 (`bind_id` with `flow_out`/`flow_in`), which binds to `B`, `X` and `b`
//!   events; an instant that starts or ends a flow is written as a zero-length `X`, and the
//!   release ending a hold starts its flow from a zero-length `X` "release" (an `e` cannot
//!   carry one).
//!
//! Strings are escaped as JSON requires (quotes, backslashes, control characters); everything
//! else, Unicode included, is written as UTF-8.

use super::timeline::{Flows, Num, Th, Timeline, Track, field_len, scalar};
use super::{push_i64, push_u64};
use gyr_core::ShortFloat;
use gyr_core::schema::{FieldType, Schema};
use std::io::{self, Write};

/// Writes a Chrome JSON trace to `W`.
#[derive(Debug)]
pub(crate) struct ChromeWriter<W: Write> {
    out: W,
    line: Vec<u8>,
    events: u64,
    pid: u32,
    pids: Vec<u32>,
    file: usize,
    /// Per counter: `,"name":"type.field","args":{"value":`.
    counters: Vec<Vec<u8>>,
    started: bool,
}

/// A second input whose pid is already used gets one above Linux's largest.
const SYNTHETIC_PID: u32 = 1 << 22;

impl<W: Write> ChromeWriter<W> {
    pub(crate) fn new(out: W) -> Self {
        ChromeWriter {
            out,
            line: Vec::with_capacity(512),
            events: 0,
            pid: 0,
            pids: Vec::new(),
            file: 0,
            counters: Vec::new(),
            started: false,
        }
    }

    /// Starts an event: the separator, `{"ph":"P","pid":..,"tid":..`.
    fn start(&mut self, ph: u8, tid: Option<u64>) {
        self.line.clear();
        self.line.extend_from_slice(if self.started {
            b",\n{\"ph\":\""
        } else {
            b"{\"traceEvents\":[\n{\"ph\":\""
        });
        self.started = true;
        self.line.push(ph);
        self.line.extend_from_slice(b"\",\"pid\":");
        push_u64(&mut self.line, u64::from(self.pid));
        if let Some(tid) = tid {
            self.line.extend_from_slice(b",\"tid\":");
            push_u64(&mut self.line, tid);
        }
    }

    fn ts(&mut self, ns: u64) {
        self.line.extend_from_slice(b",\"ts\":");
        push_u64(&mut self.line, ns / 1000);
        let frac = ns % 1000;
        if frac != 0 {
            let digits = [
                b'.',
                b'0' + (frac / 100) as u8,
                b'0' + (frac / 10 % 10) as u8,
                b'0' + (frac % 10) as u8,
            ];
            self.line.extend_from_slice(&digits);
        }
    }

    fn name(&mut self, name: &str) {
        self.line.extend_from_slice(b",\"name\":");
        json_string(&mut self.line, name);
    }

    /// Ends the event and writes it.
    fn finish_event(&mut self) -> io::Result<()> {
        self.line.push(b'}');
        self.out.write_all(&self.line)?;
        self.events += 1;
        Ok(())
    }

    fn bind(&mut self, id: u64, out: bool) {
        self.line.extend_from_slice(b",\"bind_id\":\"0x");
        self.line.extend_from_slice(format!("{id:x}").as_bytes());
        self.line.extend_from_slice(if out {
            b"\",\"flow_out\":true"
        } else {
            b"\",\"flow_in\":true"
        });
    }

    /// Zero-length `X` events carrying `flows` (one flow each: an event binds one id).
    fn flow_marks(&mut self, ts: u64, th: Th, name: &str, flows: Flows<'_>) -> io::Result<()> {
        for (&id, out) in flows
            .end
            .iter()
            .map(|f| (f, false))
            .chain(flows.out.iter().map(|f| (f, true)))
        {
            self.start(b'X', Some(th.tid));
            self.ts(ts);
            self.line.extend_from_slice(b",\"dur\":0,\"cat\":\"flow\"");
            self.name(name);
            self.bind(id, out);
            self.finish_event()?;
        }
        Ok(())
    }

    fn hold_id(&mut self, index: u32) {
        self.line.extend_from_slice(b",\"cat\":\"lock\",\"id\":\"");
        push_u64(&mut self.line, self.file as u64);
        self.line.push(b'.');
        push_u64(&mut self.line, u64::from(index));
        self.line.push(b'"');
    }

    fn args(&mut self, schema: &Schema, payload: &[u8]) {
        self.line.extend_from_slice(b",\"args\":{");
        let mut at = 0usize;
        for (i, f) in schema.fields.iter().enumerate() {
            let Some(len) = field_len(f.ty, payload, at) else {
                break;
            };
            let Some(bytes) = payload.get(at..at.saturating_add(len)) else {
                break;
            };
            at += len;
            if i > 0 {
                self.line.push(b',');
            }
            json_string(&mut self.line, &f.name);
            self.line.push(b':');
            match f.ty {
                FieldType::Scalar(gyr_core::schema::ScalarType::Bool) => self
                    .line
                    .extend_from_slice(if bytes[0] != 0 { b"true" } else { b"false" }),
                FieldType::Scalar(gyr_core::schema::ScalarType::U64) => push_u64(
                    &mut self.line,
                    u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
                ),
                FieldType::Scalar(s) => json_number(&mut self.line, scalar(s, bytes)),
                FieldType::Str => {
                    json_string(&mut self.line, &String::from_utf8_lossy(&bytes[4..]))
                }
                FieldType::Bytes => {
                    let mut hex = String::from("0x");
                    for b in &bytes[4..] {
                        hex.push_str(&format!("{b:02x}"));
                    }
                    json_string(&mut self.line, &hex);
                }
                FieldType::Array(s, _) => {
                    self.line.push(b'[');
                    for (k, chunk) in bytes.chunks_exact(s.size()).enumerate() {
                        if k > 0 {
                            self.line.push(b',');
                        }
                        json_number(&mut self.line, scalar(s, chunk));
                    }
                    self.line.push(b']');
                }
                _ => self.line.extend_from_slice(b"null"),
            }
        }
        self.line.push(b'}');
    }
}

/// A number as JSON: integers exactly, floats as their shortest form, non-finite as `null`.
fn json_number(out: &mut Vec<u8>, v: Num) {
    match v {
        Num::Int(i) => push_i64(out, i),
        Num::Float(x) if x.is_finite() => {
            // Straight into the line: no string made per number.
            let _ = write!(out, "{}", ShortFloat(x));
        }
        Num::Float(_) => out.extend_from_slice(b"null"),
    }
}

/// `s` as a JSON string: `"`, `\` and control characters escaped, the rest as UTF-8.
pub(crate) fn json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[from..i]);
        if escape.is_empty() {
            out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
        } else {
            out.extend_from_slice(escape);
        }
        from = i + 1;
    }
    out.extend_from_slice(&bytes[from..]);
    out.push(b'"');
}

impl<W: Write> Timeline for ChromeWriter<W> {
    fn process(
        &mut self,
        index: usize,
        pid: u32,
        name: &str,
        cmdline: &[String],
    ) -> io::Result<()> {
        self.file = index;
        self.counters.clear();
        self.pid = if self.pids.contains(&pid) {
            SYNTHETIC_PID + index as u32
        } else {
            pid
        };
        self.pids.push(self.pid);
        self.start(b'M', None);
        self.line
            .extend_from_slice(b",\"name\":\"process_name\",\"args\":{\"name\":");
        json_string(&mut self.line, name);
        self.line.push(b'}');
        self.finish_event()?;
        if !cmdline.is_empty() {
            self.start(b'M', None);
            self.line
                .extend_from_slice(b",\"name\":\"process_labels\",\"args\":{\"labels\":");
            json_string(&mut self.line, &cmdline.join(" "));
            self.line.push(b'}');
            self.finish_event()?;
        }
        Ok(())
    }

    fn thread(&mut self, th: Th, name: &str) -> io::Result<()> {
        self.start(b'M', Some(th.tid));
        self.line
            .extend_from_slice(b",\"name\":\"thread_name\",\"args\":{\"name\":");
        json_string(&mut self.line, name);
        self.line.push(b'}');
        self.finish_event()
    }

    fn hold_track(&mut self, _th: Th, _index: u32, _name: &str) -> io::Result<()> {
        Ok(())
    }

    fn counter_track(&mut self, index: u32, name: &str) -> io::Result<()> {
        if self.counters.len() <= index as usize {
            self.counters.resize(index as usize + 1, Vec::new());
        }
        // What every value of the counter repeats, rendered once.
        let mut tail = b",\"name\":".to_vec();
        json_string(&mut tail, name);
        tail.extend_from_slice(b",\"args\":{\"value\":");
        self.counters[index as usize] = tail;
        Ok(())
    }

    fn begin(
        &mut self,
        ts: u64,
        th: Th,
        track: Track<'_>,
        cat: &'static str,
        name: &str,
        flows: Flows<'_>,
    ) -> io::Result<()> {
        match track {
            Track::Thread => {
                self.start(b'B', Some(th.tid));
                self.line.extend_from_slice(b",\"cat\":");
                json_string(&mut self.line, cat);
            }
            Track::Hold { index, .. } => {
                self.start(b'b', Some(th.tid));
                self.hold_id(index);
            }
        }
        self.ts(ts);
        self.name(name);
        // A slice begin binds one flow; more go on marks of their own.
        let mut rest = flows;
        if let Some((&id, tail)) = flows.end.split_first() {
            self.bind(id, false);
            rest.end = tail;
        } else if let Some((&id, tail)) = flows.out.split_first() {
            self.bind(id, true);
            rest.out = tail;
        }
        self.finish_event()?;
        if !rest.is_empty() {
            self.flow_marks(ts, th, name, rest)?;
        }
        Ok(())
    }

    fn end(&mut self, ts: u64, th: Th, track: Track<'_>, flows: Flows<'_>) -> io::Result<()> {
        let name = match track {
            Track::Thread => {
                self.start(b'E', Some(th.tid));
                self.ts(ts);
                "end"
            }
            Track::Hold { index, name } => {
                self.start(b'e', Some(th.tid));
                self.hold_id(index);
                self.ts(ts);
                self.name(name);
                name
            }
        };
        self.finish_event()?;
        if !flows.is_empty() {
            let mark = match track {
                Track::Hold { name, .. } => name.replacen("hold ", "release ", 1),
                Track::Thread => name.to_owned(),
            };
            self.flow_marks(ts, th, &mark, flows)?;
        }
        Ok(())
    }

    fn instant(
        &mut self,
        ts: u64,
        th: Th,
        name: &str,
        fields: Option<(&Schema, &[u8])>,
        flows: Flows<'_>,
    ) -> io::Result<()> {
        let mut rest = flows;
        if flows.is_empty() {
            self.start(b'i', Some(th.tid));
            self.line.extend_from_slice(b",\"s\":\"t\"");
        } else {
            // Only slices bind flows: a zero-length one stands for the instant.
            self.start(b'X', Some(th.tid));
            self.line.extend_from_slice(b",\"dur\":0");
            if let Some((&id, tail)) = flows.end.split_first() {
                self.bind(id, false);
                rest.end = tail;
            } else if let Some((&id, tail)) = flows.out.split_first() {
                self.bind(id, true);
                rest.out = tail;
            }
        }
        self.ts(ts);
        self.name(name);
        if let Some((schema, payload)) = fields {
            self.args(schema, payload);
        }
        self.finish_event()?;
        if !rest.is_empty() {
            self.flow_marks(ts, th, name, rest)?;
        }
        Ok(())
    }

    fn counter(&mut self, ts: u64, th: Th, index: u32, value: Num) -> io::Result<()> {
        if let Num::Float(x) = value
            && !x.is_finite()
        {
            // JSON has no NaN or infinity; a gap in the counter says as much.
            return Ok(());
        }
        if self.counters.get(index as usize).is_none() {
            return Ok(());
        }
        self.start(b'C', Some(th.tid));
        self.ts(ts);
        self.line.extend_from_slice(&self.counters[index as usize]);
        json_number(&mut self.line, value);
        self.line.push(b'}');
        self.finish_event()
    }

    fn end_process(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        if !self.started {
            self.out.write_all(b"{\"traceEvents\":[")?;
        }
        self.out.write_all(
            b"\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"exporter\":\"gyr trace export\"}}\n",
        )?;
        self.out.flush()
    }

    fn events(&self) -> u64 {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings_for_json() {
        let mut out = Vec::new();
        json_string(&mut out, "a\"b\\c\nd\u{1}é→𝄞");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "\"a\\\"b\\\\c\\nd\\u0001é→𝄞\"");
        let back: String = serde_json::from_str(&text).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é→𝄞");
    }
}
