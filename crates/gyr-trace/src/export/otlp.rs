//! OpenTelemetry (OTLP) export: gyr's spans as OTLP spans, and the events a user selects as
//! OTLP log records, for an OpenTelemetry collector, Jaeger or Grafana Tempo.
//!
//! This module converts, and writes OTLP/JSON; it knows no network. What it makes are
//! OTLP's messages in a plain form ([`Span`], [`LogRecord`], [`Resource`]), handed in bounded
//! batches to an [`OtlpSink`]: [`JsonLines`] writes each batch as one line of the protobuf
//! JSON mapping (an `ExportTraceServiceRequest` or `ExportLogsServiceRequest`, as the
//! collector's `otlpjsonfile` receiver reads), and `gyr trace export --format otlp` sends
//! them over gRPC.
//!
//! # What becomes what
//!
//! | gyr | OTLP |
//! |---|---|
//! | one export (all its input files) | one trace: a trace id made from the first input's host, pid and start |
//! | an input file (a process) | a `Resource`: `service.name` (the program), `process.pid`, `host.name`, `process.command_line`, `gyr.rank` |
//! | `gyr.span.begin` … `gyr.span.end` on one thread | a span (kind internal), its parent the span open around it on that thread, times in Unix ns from the file's wall-clock anchor |
//! | fields of a span's begin beyond `name`, or the event of the span's own type that `gyr-tracing` writes right after the begin | the span's attributes |
//! | the thread | attributes `thread.id` (the OS thread id), `thread.name`, `gyr.thread` |
//! | an event selected with `--events` | a log record: `event_name` and body its type's name, its fields as attributes, the trace and span ids of the span open on its thread, a severity from a `tracing` level suffix (`.info`, …) |
//!
//! Fields keep their types: signed and unsigned integers become `intValue` (an unsigned one
//! above `i64::MAX` a decimal string, exactly), floats `doubleValue`, booleans, strings,
//! bytes and arrays their own kinds.
//!
//! Events become log records rather than span events: a span event travels inside its span,
//! so every event of a long span would have to be held until the span ends (memory growing
//! with the run), and events outside any span would have nowhere to go. A log record is
//! written as it is read and still names its trace and span, which is how Grafana links
//! Tempo's spans to their logs and how a collector routes both.
//!
//! # Unmatched begins and ends
//!
//! A span's begin and end can be missing (events lost, a trace cut off). An end whose begin
//! is not open on its thread is skipped; a begin never ended (at the end of its file, or when
//! an end closes a span further out) is exported ending at the last time seen on its thread,
//! with the attribute `gyr.span.unended = true`. Both are counted in [`OtlpStats`]. Nesting
//! deeper than [`MAX_DEPTH`] on a thread is cut there, counted too.

use super::{Consumer, FileStart, Input, Options, Progress, Report};
use crate::clock::ClockCorrection;
use gyr_core::ThreadInfo;
use gyr_core::Value;
use gyr_core::record::RecordHeader;
use gyr_core::schema::Schema;
use gyr_core::trace::TraceEnd;
use std::collections::HashMap;
use std::io::{self, Read, Seek, Write};

/// The most spans or log records one batch (one request) holds by default.
pub const DEFAULT_BATCH: usize = 512;
/// The largest batch allowed: a collector's default limit on a gRPC message is 4 MiB.
pub const MAX_BATCH: usize = 8192;
/// The deepest nesting of open spans kept per thread.
pub const MAX_DEPTH: usize = 256;

/// An attribute's value, typed as OTLP's `AnyValue`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `intValue`.
    Int(i64),
    /// `doubleValue`.
    Double(f64),
    /// `boolValue`.
    Bool(bool),
    /// `stringValue`.
    Str(String),
    /// `bytesValue`.
    Bytes(Vec<u8>),
    /// `arrayValue`.
    Array(Vec<AttrValue>),
}

impl From<&Value> for AttrValue {
    fn from(v: &Value) -> Self {
        match v {
            Value::Int(i) => AttrValue::Int(*i),
            Value::UInt(u) => match i64::try_from(*u) {
                Ok(i) => AttrValue::Int(i),
                Err(_) => AttrValue::Str(u.to_string()),
            },
            Value::Float(f) => AttrValue::Double(*f),
            Value::Bool(b) => AttrValue::Bool(*b),
            Value::Str(s) => AttrValue::Str(s.clone()),
            Value::Bytes(b) => AttrValue::Bytes(b.clone()),
            Value::Array(a) => AttrValue::Array(a.iter().map(AttrValue::from).collect()),
        }
    }
}

/// One attribute: a key and its value.
pub type Attr = (String, AttrValue);

/// The process a batch comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource's attributes.
    pub attributes: Vec<Attr>,
}

/// An OTLP span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace it belongs to.
    pub trace_id: [u8; 16],
    /// Its id, never all zero.
    pub span_id: [u8; 8],
    /// The span open around it on its thread, if any.
    pub parent_span_id: Option<[u8; 8]>,
    /// The span's name (its `gyr.span.begin`'s).
    pub name: String,
    /// Its begin, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Its end, ns since the Unix epoch.
    pub end_unix_ns: u64,
    /// Thread and field attributes.
    pub attributes: Vec<Attr>,
}

/// An OTLP log record.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// When the event happened, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// OTLP's severity number (0: unspecified).
    pub severity_number: i32,
    /// The severity's name, empty when unspecified.
    pub severity_text: &'static str,
    /// The event type's name (also the body).
    pub event_name: String,
    /// The event's fields, then its thread's attributes.
    pub attributes: Vec<Attr>,
    /// The trace of the span open on its thread (all zero when none).
    pub trace_id: [u8; 16],
    /// The span open on its thread when it happened, if any.
    pub span_id: Option<[u8; 8]>,
}

/// Where the converted batches go.
pub trait OtlpSink {
    /// A batch of spans of `resource` (one `ExportTraceServiceRequest`).
    fn spans(&mut self, resource: &Resource, spans: &[Span]) -> io::Result<()>;
    /// A batch of log records of `resource` (one `ExportLogsServiceRequest`).
    fn logs(&mut self, resource: &Resource, logs: &[LogRecord]) -> io::Result<()>;
    /// Everything was handed over.
    fn finish(&mut self) -> io::Result<()>;
}

/// Which events become log records: a list of globs over event type names (`*` any run of
/// characters, `?` one), as `--events` takes them separated by commas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    globs: Vec<String>,
}

impl EventFilter {
    /// Selects no events (spans only).
    pub fn none() -> Self {
        EventFilter::default()
    }

    /// Parses a comma-separated list of globs; refuses an empty one.
    pub fn parse(list: &str) -> Result<Self, String> {
        let globs: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect();
        if globs.is_empty() {
            return Err(format!(
                "`{list}` names no events: give globs of event type names separated by commas, such as `gyr.alert,app.*`, or `*` for all"
            ));
        }
        Ok(EventFilter { globs })
    }

    /// Whether `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        self.globs
            .iter()
            .any(|g| glob(g.as_bytes(), name.as_bytes()))
    }
}

/// `*` and `?` glob matching, iterative (no backtracking blow-up).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// How to convert.
#[derive(Debug, Clone)]
pub struct OtlpOptions {
    /// The events that become log records.
    pub events: EventFilter,
    /// The most spans or log records per batch (1 to [`MAX_BATCH`]).
    pub batch: usize,
}

impl Default for OtlpOptions {
    fn default() -> Self {
        OtlpOptions {
            events: EventFilter::none(),
            batch: DEFAULT_BATCH,
        }
    }
}

/// What the conversion made and left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpStats {
    /// Spans made.
    pub spans: u64,
    /// Log records made.
    pub logs: u64,
    /// Batches of spans handed to the sink.
    pub span_batches: u64,
    /// Batches of log records handed to the sink.
    pub log_batches: u64,
    /// Begins never ended, exported with `gyr.span.unended`.
    pub unended: u64,
    /// Ends without a begin open on their thread, skipped.
    pub unmatched_ends: u64,
    /// Begins deeper than [`MAX_DEPTH`], skipped (with their ends).
    pub too_deep: u64,
    /// Records whose payload did not match their type, or of a type never described.
    pub undecodable: u64,
}

/// Converts `inputs` (one process each) to OTLP, handing the batches to `sink`; `options`
/// (ordering, `--correct`) and `clock` (`--sync`) as for the other exports. Returns what was
/// read, what the conversion made, and the sink.
pub fn export_otlp<R: Read + Seek, S: OtlpSink>(
    inputs: Vec<Input<R>>,
    sink: S,
    otlp: OtlpOptions,
    options: Options,
    clock: Option<&ClockCorrection>,
    progress: &mut dyn FnMut(&Progress),
) -> io::Result<(Report, OtlpStats, S)> {
    let mut converter = OtlpConverter::new(sink, otlp);
    let report = super::run(inputs, &mut converter, options, clock, progress)?;
    let stats = converter.stats().clone();
    Ok((report, stats, converter.into_sink()))
}

const SPAN_BEGIN: &str = "gyr.span.begin";
const SPAN_END: &str = "gyr.span.end";

/// A span not yet ended.
#[derive(Debug)]
struct Open {
    name: String,
    span_id: [u8; 8],
    start_unix_ns: u64,
    attributes: Vec<Attr>,
}

/// A thread's state.
#[derive(Debug, Default)]
struct ThreadState {
    attrs: Vec<Attr>,
    open: Vec<Open>,
    /// Begins past [`MAX_DEPTH`] still open (their ends are skipped too).
    deep: u64,
    /// The last time seen on it, Unix ns.
    last_unix_ns: u64,
    /// The last record was a begin whose fields may follow as an event of the span's type.
    fields_may_follow: bool,
}

/// The [`Consumer`] that pairs spans and selects events, batching for an [`OtlpSink`].
#[derive(Debug)]
pub(crate) struct OtlpConverter<S> {
    sink: S,
    options: OtlpOptions,
    stats: OtlpStats,
    trace_id: Option<[u8; 16]>,
    file_index: u64,
    span_counter: u64,
    base_unix_ns: u64,
    resource: Resource,
    schemas: HashMap<u32, Schema>,
    threads: HashMap<u64, ThreadState>,
    spans: Vec<Span>,
    logs: Vec<LogRecord>,
}

impl<S: OtlpSink> OtlpConverter<S> {
    pub(crate) fn new(sink: S, mut options: OtlpOptions) -> Self {
        options.batch = options.batch.clamp(1, MAX_BATCH);
        OtlpConverter {
            sink,
            options,
            stats: OtlpStats::default(),
            trace_id: None,
            file_index: 0,
            span_counter: 0,
            base_unix_ns: 0,
            resource: Resource {
                attributes: Vec::new(),
            },
            schemas: HashMap::new(),
            threads: HashMap::new(),
            spans: Vec::new(),
            logs: Vec::new(),
        }
    }

    pub(crate) fn stats(&self) -> &OtlpStats {
        &self.stats
    }

    pub(crate) fn into_sink(self) -> S {
        self.sink
    }

    fn trace_id(&self) -> [u8; 16] {
        self.trace_id.unwrap_or([0; 16])
    }

    /// A new span id: a hash of the trace, the file and a counter (unique in the trace,
    /// the same on every export of the same files).
    fn next_span_id(&mut self) -> [u8; 8] {
        self.span_counter += 1;
        let mut h = fnv(FNV_OFFSET, &self.trace_id());
        h = fnv(h, &self.file_index.to_le_bytes());
        h = fnv(h, &self.span_counter.to_le_bytes());
        let h = if h == 0 { 1 } else { h };
        h.to_be_bytes()
    }

    fn push_span(&mut self, span: Span) -> io::Result<()> {
        self.stats.spans += 1;
        self.spans.push(span);
        if self.spans.len() >= self.options.batch {
            self.flush_spans()?;
        }
        Ok(())
    }

    fn flush_spans(&mut self) -> io::Result<()> {
        if !self.spans.is_empty() {
            self.sink.spans(&self.resource, &self.spans)?;
            self.stats.span_batches += 1;
            self.spans.clear();
        }
        Ok(())
    }

    fn flush_logs(&mut self) -> io::Result<()> {
        if !self.logs.is_empty() {
            self.sink.logs(&self.resource, &self.logs)?;
            self.stats.log_batches += 1;
            self.logs.clear();
        }
        Ok(())
    }

    /// Ends `open` (child of `parent_span_id`) on `thread` at `end_unix_ns`; `unended` when
    /// its end was never seen.
    fn close(
        &mut self,
        thread: u64,
        open: Open,
        parent_span_id: Option<[u8; 8]>,
        end_unix_ns: u64,
        unended: bool,
    ) -> io::Result<()> {
        let trace_id = self.trace_id();
        let mut attributes = open.attributes;
        attributes.extend(
            thread_state(&mut self.threads, thread)
                .attrs
                .iter()
                .cloned(),
        );
        if unended {
            self.stats.unended += 1;
            attributes.push(("gyr.span.unended".into(), AttrValue::Bool(true)));
        }
        self.push_span(Span {
            trace_id,
            span_id: open.span_id,
            parent_span_id,
            name: open.name,
            start_unix_ns: open.start_unix_ns,
            end_unix_ns: end_unix_ns.max(open.start_unix_ns),
            attributes,
        })
    }
}

/// What a record is to the conversion.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Begin,
    End,
    SpanFields,
    Log,
}

/// `thread`'s state, made on its first record.
fn thread_state(threads: &mut HashMap<u64, ThreadState>, thread: u64) -> &mut ThreadState {
    threads.entry(thread).or_insert_with(|| ThreadState {
        attrs: vec![("gyr.thread".into(), AttrValue::Int(thread as i64))],
        ..ThreadState::default()
    })
}

/// Whether `type_name` is the type `gyr-tracing` gives a span's fields: `TARGET.NAME.LEVEL`.
fn is_span_fields(type_name: &str, span: &str) -> bool {
    let Some((rest, level)) = type_name.rsplit_once('.') else {
        return false;
    };
    severity(level).0 != 0
        && rest
            .strip_suffix(span)
            .is_some_and(|t| t.is_empty() || t.ends_with('.'))
}

/// OTLP's severity for a `tracing` level name.
fn severity(level: &str) -> (i32, &'static str) {
    match level {
        "trace" => (1, "TRACE"),
        "debug" => (5, "DEBUG"),
        "info" => (9, "INFO"),
        "warn" => (13, "WARN"),
        "error" => (17, "ERROR"),
        _ => (0, ""),
    }
}

fn field_attrs(schema: &Schema, values: &[Value], skip: Option<usize>) -> Vec<Attr> {
    schema
        .fields
        .iter()
        .zip(values)
        .enumerate()
        .filter(|(i, _)| Some(*i) != skip)
        .map(|(_, (f, v))| (f.name.clone(), AttrValue::from(v)))
        .collect()
}

impl<S: OtlpSink> Consumer for OtlpConverter<S> {
    fn begin_file(&mut self, file: &FileStart<'_>) -> io::Result<()> {
        let h = file.header;
        if self.trace_id.is_none() {
            let mut a = fnv(FNV_OFFSET, h.host.as_bytes());
            a = fnv(a, &h.pid.to_le_bytes());
            a = fnv(a, &h.start_unix_ns.to_le_bytes());
            let b = fnv(a ^ 0x9e37_79b9_7f4a_7c15, b"gyr trace");
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&a.to_be_bytes());
            id[8..].copy_from_slice(&b.to_be_bytes());
            if id == [0; 16] {
                id[15] = 1;
            }
            self.trace_id = Some(id);
        }
        self.file_index = file.index as u64;
        self.base_unix_ns = file.base_unix_ns.saturating_add(file.offset_ns);
        self.schemas.clear();
        self.threads.clear();
        let program = h
            .command_line
            .first()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "unknown_service".to_owned());
        let mut attributes = vec![
            ("service.name".into(), AttrValue::Str(program)),
            ("process.pid".into(), AttrValue::Int(h.pid.into())),
        ];
        if !h.host.is_empty() {
            attributes.push(("host.name".into(), AttrValue::Str(h.host.clone())));
        }
        if !h.command_line.is_empty() {
            attributes.push((
                "process.command_line".into(),
                AttrValue::Str(h.command_line.join(" ")),
            ));
        }
        if let Some(rank) = file.rank {
            attributes.push(("gyr.rank".into(), AttrValue::Int(rank.into())));
        }
        self.resource = Resource { attributes };
        Ok(())
    }

    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        self.schemas.insert(schema.id, schema.clone());
        Ok(())
    }

    fn thread(&mut self, thread: &ThreadInfo) -> io::Result<()> {
        let st = thread_state(&mut self.threads, thread.id);
        st.attrs = vec![
            ("thread.id".into(), AttrValue::Int(thread.os_tid as i64)),
            ("gyr.thread".into(), AttrValue::Int(thread.id as i64)),
        ];
        if !thread.name.is_empty() {
            st.attrs
                .push(("thread.name".into(), AttrValue::Str(thread.name.clone())));
        }
        Ok(())
    }

    fn record(&mut self, thread: u64, header: &RecordHeader, payload: &[u8]) -> io::Result<()> {
        let now = self.base_unix_ns.saturating_add(header.timestamp);
        let Some(schema) = self.schemas.get(&header.type_id) else {
            self.stats.undecodable += 1;
            return Ok(());
        };
        let st = thread_state(&mut self.threads, thread);
        st.last_unix_ns = st.last_unix_ns.max(now);
        let fields_may_follow = std::mem::take(&mut st.fields_may_follow);
        let name = schema.name.as_str();
        let kind = if name == SPAN_BEGIN {
            Kind::Begin
        } else if name == SPAN_END {
            Kind::End
        } else if fields_may_follow
            && st
                .open
                .last()
                .is_some_and(|o| is_span_fields(name, &o.name))
        {
            Kind::SpanFields
        } else if self.options.events.matches(name) {
            Kind::Log
        } else {
            return Ok(());
        };
        let Ok(values) = gyr_core::value::decode(schema, payload) else {
            self.stats.undecodable += 1;
            return Ok(());
        };
        let name_at = schema.field_index("name");
        let span_name = match name_at.and_then(|i| values.get(i)) {
            Some(Value::Str(s)) => s.clone(),
            _ => String::new(),
        };
        match kind {
            Kind::Begin => {
                let attributes = field_attrs(schema, &values, name_at);
                if st.open.len() >= MAX_DEPTH {
                    st.deep += 1;
                    self.stats.too_deep += 1;
                    return Ok(());
                }
                st.fields_may_follow = true;
                let span_id = self.next_span_id();
                thread_state(&mut self.threads, thread).open.push(Open {
                    name: span_name,
                    span_id,
                    start_unix_ns: now,
                    attributes,
                });
            }
            Kind::End => {
                if st.deep > 0 {
                    st.deep -= 1;
                    return Ok(());
                }
                match st.open.iter().rposition(|o| o.name == span_name) {
                    None => self.stats.unmatched_ends += 1,
                    Some(at) => {
                        // Spans opened inside this one and never ended end with it.
                        let mut closing = st.open.split_off(at);
                        while let Some(open) = closing.pop() {
                            let unended = !closing.is_empty();
                            // The parent is the span below: put the rest back first.
                            let parent = closing
                                .last()
                                .map(|o| o.span_id)
                                .or_else(|| self.threads[&thread].open.last().map(|o| o.span_id));
                            self.close(thread, open, parent, now, unended)?;
                        }
                    }
                }
            }
            Kind::SpanFields => {
                let attributes = field_attrs(schema, &values, None);
                if let Some(o) = st.open.last_mut() {
                    o.attributes.extend(attributes);
                }
            }
            Kind::Log => {
                let (severity_number, severity_text) = name
                    .rsplit_once('.')
                    .map_or((0, ""), |(_, level)| severity(level));
                let mut attributes = field_attrs(schema, &values, None);
                attributes.extend(st.attrs.iter().cloned());
                let record = LogRecord {
                    time_unix_ns: now,
                    severity_number,
                    severity_text,
                    event_name: name.to_owned(),
                    attributes,
                    // Outside any span a record names no trace: OTLP links a record to
                    // a span, and the run's trace may hold no span at all.
                    trace_id: match st.open.last() {
                        Some(_) => self.trace_id.unwrap_or([0; 16]),
                        None => [0; 16],
                    },
                    span_id: st.open.last().map(|o| o.span_id),
                };
                self.stats.logs += 1;
                self.logs.push(record);
                if self.logs.len() >= self.options.batch {
                    self.flush_logs()?;
                }
            }
        }
        Ok(())
    }

    fn end(&mut self, _end: &TraceEnd) -> io::Result<()> {
        Ok(())
    }

    fn end_file(&mut self) -> io::Result<()> {
        // Spans still open end at the last time seen on their thread, innermost first.
        let mut threads: Vec<u64> = self.threads.keys().copied().collect();
        threads.sort_unstable();
        for t in threads {
            let st = thread_state(&mut self.threads, t);
            let end = st.last_unix_ns;
            let mut open = std::mem::take(&mut st.open);
            while let Some(o) = open.pop() {
                let parent = open.last().map(|p| p.span_id);
                self.close(t, o, parent, end, true)?;
            }
        }
        self.flush_spans()?;
        self.flush_logs()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.sink.finish()
    }

    fn events(&self) -> u64 {
        self.stats.spans + self.stats.logs
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64 bits: stable across versions and platforms, so ids stay the same.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Writes each batch as one line of OTLP/JSON (the protobuf JSON mapping with OTLP's
/// exceptions: ids in hex, enums as numbers), one `ExportTraceServiceRequest` or
/// `ExportLogsServiceRequest` per line, as the collector's `otlpjsonfile` receiver reads.
#[derive(Debug)]
pub struct JsonLines<W: Write> {
    out: W,
}

impl<W: Write> JsonLines<W> {
    /// Lines written to `out`.
    pub fn new(out: W) -> Self {
        JsonLines { out }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The instrumentation scope of everything gyr exports.
pub const SCOPE_NAME: &str = "gyr";

fn scope_json() -> serde_json::Value {
    serde_json::json!({ "name": SCOPE_NAME, "version": env!("CARGO_PKG_VERSION") })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// An `AnyValue` in the JSON mapping: 64-bit integers as decimal strings, non-finite
/// doubles as `"NaN"`, `"Infinity"`, `"-Infinity"`, bytes in base64.
pub fn any_value_json(v: &AttrValue) -> serde_json::Value {
    use serde_json::json;
    match v {
        AttrValue::Int(i) => json!({ "intValue": i.to_string() }),
        AttrValue::Double(f) if f.is_finite() => json!({ "doubleValue": f }),
        AttrValue::Double(f) => json!({ "doubleValue": if f.is_nan() {
            "NaN"
        } else if *f > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        } }),
        AttrValue::Bool(b) => json!({ "boolValue": b }),
        AttrValue::Str(s) => json!({ "stringValue": s }),
        AttrValue::Bytes(b) => json!({ "bytesValue": base64(b) }),
        AttrValue::Array(a) => {
            json!({ "arrayValue": { "values": a.iter().map(any_value_json).collect::<Vec<_>>() } })
        }
    }
}

fn attrs_json(attrs: &[Attr]) -> serde_json::Value {
    attrs
        .iter()
        .map(|(k, v)| serde_json::json!({ "key": k, "value": any_value_json(v) }))
        .collect()
}

/// An `ExportTraceServiceRequest` in the JSON mapping.
pub fn spans_json(resource: &Resource, spans: &[Span]) -> serde_json::Value {
    let spans: Vec<_> = spans
        .iter()
        .map(|s| {
            let mut o = serde_json::json!({
                "traceId": hex(&s.trace_id),
                "spanId": hex(&s.span_id),
                "name": s.name,
                "kind": 1,
                "startTimeUnixNano": s.start_unix_ns.to_string(),
                "endTimeUnixNano": s.end_unix_ns.to_string(),
                "attributes": attrs_json(&s.attributes),
            });
            if let Some(p) = s.parent_span_id {
                o["parentSpanId"] = hex(&p).into();
            }
            o
        })
        .collect();
    serde_json::json!({ "resourceSpans": [{
        "resource": { "attributes": attrs_json(&resource.attributes) },
        "scopeSpans": [{ "scope": scope_json(), "spans": spans }],
    }] })
}

/// An `ExportLogsServiceRequest` in the JSON mapping.
pub fn logs_json(resource: &Resource, logs: &[LogRecord]) -> serde_json::Value {
    let records: Vec<_> = logs
        .iter()
        .map(|l| {
            let mut o = serde_json::json!({
                "timeUnixNano": l.time_unix_ns.to_string(),
                "observedTimeUnixNano": l.time_unix_ns.to_string(),
                "body": { "stringValue": l.event_name },
                "eventName": l.event_name,
                "attributes": attrs_json(&l.attributes),
            });
            if l.severity_number != 0 {
                o["severityNumber"] = l.severity_number.into();
                o["severityText"] = l.severity_text.into();
            }
            if let Some(s) = l.span_id {
                o["traceId"] = hex(&l.trace_id).into();
                o["spanId"] = hex(&s).into();
            }
            o
        })
        .collect();
    serde_json::json!({ "resourceLogs": [{
        "resource": { "attributes": attrs_json(&resource.attributes) },
        "scopeLogs": [{ "scope": scope_json(), "logRecords": records }],
    }] })
}

impl<W: Write> OtlpSink for JsonLines<W> {
    fn spans(&mut self, resource: &Resource, spans: &[Span]) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, &spans_json(resource, spans))?;
        self.out.write_all(b"\n")
    }

    fn logs(&mut self, resource: &Resource, logs: &[LogRecord]) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, &logs_json(resource, logs))?;
        self.out.write_all(b"\n")
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Input;
    use gyr_core::record::push_record;
    use gyr_core::schema::ScalarType;
    use gyr_core::trace::{TraceHeader, TraceReader, TraceWriter};
    use gyr_core::{Field, FieldType};
    use std::io::Cursor;

    const START: u64 = 1_700_000_000_000_000_000;

    /// What a sink was handed.
    #[derive(Default, Debug)]
    struct Collect {
        spans: Vec<Vec<Span>>,
        logs: Vec<Vec<LogRecord>>,
        resources: Vec<Resource>,
        finished: bool,
    }

    impl OtlpSink for &mut Collect {
        fn spans(&mut self, resource: &Resource, spans: &[Span]) -> io::Result<()> {
            self.resources.push(resource.clone());
            self.spans.push(spans.to_vec());
            Ok(())
        }
        fn logs(&mut self, resource: &Resource, logs: &[LogRecord]) -> io::Result<()> {
            self.resources.push(resource.clone());
            self.logs.push(logs.to_vec());
            Ok(())
        }
        fn finish(&mut self) -> io::Result<()> {
            self.finished = true;
            Ok(())
        }
    }

    fn schemas() -> Vec<Schema> {
        let name = || vec![Field::new("name", FieldType::Str)];
        vec![
            Schema::new(1, SPAN_BEGIN, name()).unwrap(),
            Schema::new(2, SPAN_END, name()).unwrap(),
            Schema::new(
                3,
                "app.step",
                vec![
                    Field::new("n", FieldType::Scalar(ScalarType::I64)),
                    Field::new("big", FieldType::Scalar(ScalarType::U64)),
                    Field::new("load", FieldType::Scalar(ScalarType::F64)),
                    Field::new("ok", FieldType::Scalar(ScalarType::Bool)),
                    Field::new("who", FieldType::Str),
                ],
            )
            .unwrap(),
            // The type gyr-tracing gives the fields of a span named `solve`.
            Schema::new(
                4,
                "app.solver.solve.info",
                vec![Field::new("domain", FieldType::Scalar(ScalarType::U64))],
            )
            .unwrap(),
            Schema::new(
                5,
                "app.residual.warn",
                vec![Field::new("r", FieldType::Scalar(ScalarType::F64))],
            )
            .unwrap(),
        ]
    }

    /// A trace of `records` (thread, type, time, values) on threads 1 and 2.
    fn trace(records: &[(u64, u32, u64, Vec<Value>)]) -> Vec<u8> {
        let header = TraceHeader {
            pid: 4242,
            host: "node7".into(),
            command_line: vec!["/opt/bin/solver".into(), "--fast".into()],
            start_unix_ns: START,
            ..TraceHeader::default()
        };
        let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
        let schemas = schemas();
        for s in &schemas {
            w.schema(s).unwrap();
        }
        w.thread(&ThreadInfo {
            id: 1,
            name: "main".into(),
            os_tid: 901,
        })
        .unwrap();
        for (seq, (thread, ty, t, values)) in records.iter().enumerate() {
            let s = &schemas[*ty as usize - 1];
            let payload = gyr_core::value::encode(s, values).unwrap();
            let mut block = Vec::new();
            push_record(&mut block, *ty, *t, seq as u64, 0, &payload);
            w.records(*thread, &block).unwrap();
        }
        w.finish(&TraceEnd::default()).unwrap()
    }

    fn convert(bytes: Vec<u8>, otlp: OtlpOptions) -> (Collect, OtlpStats) {
        let mut c = Collect::default();
        let input = Input::new("t", TraceReader::new(Cursor::new(bytes)).unwrap());
        let (_, stats, _) = export_otlp(
            vec![input],
            &mut c,
            otlp,
            Options::default(),
            None,
            &mut |_| {},
        )
        .unwrap();
        (c, stats)
    }

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    fn attr<'a>(attrs: &'a [Attr], key: &str) -> Option<&'a AttrValue> {
        attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    #[test]
    fn spans_pair_and_nest_per_thread() {
        let bytes = trace(&[
            (1, 1, 100, vec![s("outer")]),
            (2, 1, 150, vec![s("other")]),
            (1, 1, 200, vec![s("inner")]),
            (1, 2, 300, vec![s("inner")]),
            (2, 2, 350, vec![s("other")]),
            (1, 2, 400, vec![s("outer")]),
        ]);
        let (c, stats) = convert(bytes, OtlpOptions::default());
        assert!(c.finished);
        let spans: Vec<Span> = c.spans.concat();
        assert_eq!(spans.len(), 3);
        assert_eq!(stats.spans, 3);
        assert_eq!((stats.unended, stats.unmatched_ends), (0, 0));
        let by = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
        let (outer, inner, other) = (by("outer"), by("inner"), by("other"));
        assert_eq!(inner.parent_span_id, Some(outer.span_id));
        assert_eq!(outer.parent_span_id, None);
        assert_eq!(other.parent_span_id, None);
        assert_eq!(
            (inner.start_unix_ns, inner.end_unix_ns),
            (START + 200, START + 300)
        );
        assert_eq!(
            (outer.start_unix_ns, outer.end_unix_ns),
            (START + 100, START + 400)
        );
        let ids: std::collections::HashSet<_> = spans.iter().map(|s| s.span_id).collect();
        assert_eq!(ids.len(), 3, "span ids are unique");
        assert!(spans.iter().all(|s| s.trace_id == outer.trace_id));
        assert_ne!(outer.trace_id, [0; 16]);
        // Thread attributes: the described thread and one never described.
        assert_eq!(
            attr(&outer.attributes, "thread.id"),
            Some(&AttrValue::Int(901))
        );
        assert_eq!(
            attr(&outer.attributes, "thread.name"),
            Some(&AttrValue::Str("main".into()))
        );
        assert_eq!(
            attr(&other.attributes, "gyr.thread"),
            Some(&AttrValue::Int(2))
        );
        // The resource.
        let r = &c.resources[0].attributes;
        assert_eq!(
            attr(r, "service.name"),
            Some(&AttrValue::Str("solver".into()))
        );
        assert_eq!(attr(r, "process.pid"), Some(&AttrValue::Int(4242)));
        assert_eq!(attr(r, "host.name"), Some(&AttrValue::Str("node7".into())));
        // The same files give the same ids.
        let again = convert(
            trace(&[(1, 1, 100, vec![s("outer")]), (1, 2, 400, vec![s("outer")])]),
            OtlpOptions::default(),
        )
        .0;
        assert_eq!(again.spans[0][0].trace_id, outer.trace_id);
    }

    #[test]
    fn unmatched_begins_and_ends_are_counted() {
        let bytes = trace(&[
            (1, 2, 50, vec![s("never begun")]),
            (1, 1, 100, vec![s("a")]),
            (1, 1, 200, vec![s("b")]),
            // b's end was lost: a's end closes it too.
            (1, 2, 300, vec![s("a")]),
            (1, 1, 400, vec![s("c")]),
            (1, 5, 500, vec![Value::Float(0.5)]),
        ]);
        let (c, stats) = convert(bytes, OtlpOptions::default());
        assert_eq!(stats.unmatched_ends, 1);
        assert_eq!(stats.unended, 2);
        let spans = c.spans.concat();
        assert_eq!(spans.len(), 3);
        let by = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
        let (a, b, cc) = (by("a"), by("b"), by("c"));
        assert_eq!(b.parent_span_id, Some(a.span_id));
        assert_eq!(b.end_unix_ns, START + 300);
        assert_eq!(
            attr(&b.attributes, "gyr.span.unended"),
            Some(&AttrValue::Bool(true))
        );
        assert_eq!(attr(&a.attributes, "gyr.span.unended"), None);
        // Never ended: ends at the last time seen on its thread.
        assert_eq!(cc.end_unix_ns, START + 500);
        assert!(c.logs.is_empty(), "no events were selected");
    }

    #[test]
    fn selected_events_become_typed_log_records_in_their_span() {
        let bytes = trace(&[
            (1, 1, 100, vec![s("solve")]),
            // gyr-tracing's span fields, right after the begin.
            (1, 4, 100, vec![Value::UInt(3)]),
            (
                1,
                3,
                150,
                vec![
                    Value::Int(-7),
                    Value::UInt(u64::MAX),
                    Value::Float(2.5),
                    Value::Bool(true),
                    s("ö"),
                ],
            ),
            (1, 5, 160, vec![Value::Float(0.25)]),
            (1, 2, 200, vec![s("solve")]),
            (1, 5, 300, vec![Value::Float(0.5)]),
        ]);
        let (c, stats) = convert(
            bytes,
            OtlpOptions {
                events: EventFilter::parse("app.st?p, *.warn").unwrap(),
                batch: 2,
            },
        );
        assert_eq!(stats.logs, 3);
        assert_eq!(stats.log_batches, 2, "batches of at most 2");
        assert!(c.logs.iter().all(|b| b.len() <= 2));
        let span = &c.spans[0][0];
        assert_eq!(attr(&span.attributes, "domain"), Some(&AttrValue::Int(3)));
        let logs = c.logs.concat();
        let step = &logs[0];
        assert_eq!(step.event_name, "app.step");
        assert_eq!(step.time_unix_ns, START + 150);
        assert_eq!(step.span_id, Some(span.span_id));
        assert_eq!(step.trace_id, span.trace_id);
        assert_eq!(step.severity_number, 0);
        assert_eq!(attr(&step.attributes, "n"), Some(&AttrValue::Int(-7)));
        assert_eq!(
            attr(&step.attributes, "big"),
            Some(&AttrValue::Str(u64::MAX.to_string()))
        );
        assert_eq!(
            attr(&step.attributes, "load"),
            Some(&AttrValue::Double(2.5))
        );
        assert_eq!(attr(&step.attributes, "ok"), Some(&AttrValue::Bool(true)));
        assert_eq!(
            attr(&step.attributes, "who"),
            Some(&AttrValue::Str("ö".into()))
        );
        assert_eq!(
            (logs[1].severity_number, logs[1].severity_text),
            (13, "WARN")
        );
        // Outside any span: no trace either.
        assert_eq!(logs[2].span_id, None);
        assert_eq!(logs[2].trace_id, [0; 16]);
    }

    #[test]
    fn json_follows_the_protobuf_mapping() {
        let bytes = trace(&[
            (1, 1, 100, vec![s("outer")]),
            (1, 1, 200, vec![s("inner")]),
            (1, 2, 300, vec![s("inner")]),
            (
                1,
                3,
                310,
                vec![
                    Value::Int(1),
                    Value::UInt(2),
                    Value::Float(f64::NAN),
                    Value::Bool(false),
                    s("x"),
                ],
            ),
            (1, 2, 400, vec![s("outer")]),
        ]);
        let mut out = Vec::new();
        let input = Input::new("t", TraceReader::new(Cursor::new(bytes)).unwrap());
        let (_, stats, _) = export_otlp(
            vec![input],
            JsonLines::new(&mut out),
            OtlpOptions {
                events: EventFilter::parse("*").unwrap(),
                batch: 1,
            },
            Options::default(),
            None,
            &mut |_| {},
        )
        .unwrap();
        let lines: Vec<serde_json::Value> = std::str::from_utf8(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len() as u64, stats.span_batches + stats.log_batches);
        assert_eq!(lines.len(), 3, "one span or record per line at batch 1");
        let spans: Vec<&serde_json::Value> = lines
            .iter()
            .filter_map(|l| l.get("resourceSpans"))
            .map(|r| &r[0]["scopeSpans"][0]["spans"][0])
            .collect();
        let inner = spans.iter().find(|s| s["name"] == "inner").unwrap();
        let outer = spans.iter().find(|s| s["name"] == "outer").unwrap();
        assert_eq!(inner["parentSpanId"], outer["spanId"]);
        assert!(outer.get("parentSpanId").is_none());
        assert_eq!(outer["traceId"].as_str().unwrap().len(), 32);
        assert_eq!(outer["spanId"].as_str().unwrap().len(), 16);
        assert_eq!(outer["startTimeUnixNano"], (START + 100).to_string());
        assert_eq!(outer["endTimeUnixNano"], (START + 400).to_string());
        assert_eq!(outer["kind"], 1);
        let log = lines
            .iter()
            .find_map(|l| l.get("resourceLogs"))
            .map(|r| &r[0]["scopeLogs"][0]["logRecords"][0])
            .unwrap();
        assert_eq!(log["eventName"], "app.step");
        assert_eq!(log["spanId"], outer["spanId"]);
        assert_eq!(log["traceId"], outer["traceId"]);
        let a = |k: &str| {
            log["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .unwrap()["value"]
                .clone()
        };
        assert_eq!(a("n"), serde_json::json!({ "intValue": "1" }));
        assert_eq!(a("load"), serde_json::json!({ "doubleValue": "NaN" }));
        assert_eq!(a("ok"), serde_json::json!({ "boolValue": false }));
        assert_eq!(a("who"), serde_json::json!({ "stringValue": "x" }));
        let r = &lines[0]["resourceSpans"][0]["resource"]["attributes"][0];
        assert_eq!(r["key"], "service.name");
    }

    #[test]
    fn globs_and_encodings() {
        let f = EventFilter::parse("gyr.mutex.*,app.?x,exact").unwrap();
        assert!(f.matches("gyr.mutex.acquire"));
        assert!(f.matches("app.ax"));
        assert!(f.matches("exact"));
        assert!(!f.matches("exactly"));
        assert!(!f.matches("app.abx"));
        assert!(!f.matches("gyr.cond.wait"));
        assert!(EventFilter::parse("*").unwrap().matches(""));
        assert!(
            EventFilter::parse(" , ")
                .unwrap_err()
                .contains("names no events")
        );
        assert!(!EventFilter::none().matches("x"));
        assert!(glob(b"*a*b*c", b"xxaxxbxxbxc"));
        assert!(!glob(b"*a*b*c", b"xxaxxbxxbx"));
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert!(is_span_fields("app.solver.solve.info", "solve"));
        assert!(is_span_fields("solve.debug", "solve"));
        assert!(!is_span_fields("app.resolve.info", "solve"));
        assert!(!is_span_fields("app.solve.other", "solve"));
    }
}
