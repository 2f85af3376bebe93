//! SDDF into gyr: the ASCII and binary readers and the mapping of descriptors to schemas.
//!
//! A file gyr exported (its descriptors carry `gyr name`, `gyr type id` and `gyr type`, see
//! [`crate::export::sddf`]) comes back exactly: header, schemas with their ids and field
//! types, threads, records with their timestamps, sequence numbers and perturbation, and the
//! end block. Several processes in one SDDF file go into one trace, their times placed by their
//! wall-clock anchors and their threads renumbered where two share an id.
//!
//! Any other SDDF (Pablo's, Dimemas's, TAU's dialect with `unsigned long long` and no magic)
//! becomes one schema per descriptor (names made valid: `NX send` → `NX_send`), every field
//! kept: `int` → `i32`, `long` → `i64`, `float` → `f32`, `double` → `f64`, `char` → `u8`,
//! `char[]` → `string`, and numeric arrays, whose extent varies per record, as their text
//! (`[1, 2, 3]`). Its time is the first scalar field named `time stamp`, `timestamp`, `time`,
//! `seconds` or `clock` (seconds when a float, ns when an integer), its thread the first named
//! `node`, `processor`, `processor number`, `thread`, `pthread` or `task` (node `n` is gyr
//! thread `n + 1`, named `node n`).

use super::{Builder, ImportError, ImportReport, Location, field_name, schema_name, unique};
use crate::export::sddf::{
    ATTR_NAME, ATTR_TYPE, ATTR_TYPE_ID, Base, END, PROCESS, RECORD_FIELDS, THREAD, sddf_type,
};
use gyr_core::ThreadInfo;
use gyr_core::schema::{Field, FieldType, ScalarType, Schema, TypeId};
use gyr_core::trace::{TraceEnd, TraceHeader};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Read, Write};

/// The longest packet, string or token an import accepts.
const MAX_PACKET: usize = 64 << 20;
/// The most fields (or attributes) one descriptor may have.
const MAX_FIELDS: usize = 4096;
/// The most descriptors a file may define.
const MAX_DESCRIPTORS: usize = 1 << 16;
/// The most elements of one array value.
const MAX_ELEMENTS: usize = 1 << 24;
/// The most dimensions of a field.
const MAX_DIMS: u32 = 8;

/// A field of a descriptor as read.
#[derive(Debug, Clone)]
pub(crate) struct FieldDesc {
    pub(crate) name: String,
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) base: Base,
    pub(crate) dims: u32,
}

/// A record descriptor as read.
#[derive(Debug, Clone)]
pub(crate) struct Desc {
    pub(crate) name: String,
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) fields: Vec<FieldDesc>,
}

/// A value of a data record as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum V {
    Int(i64),
    Float(f64),
    Chars(Vec<u8>),
    Rows(Vec<Vec<u8>>),
    /// A numeric array, flattened.
    Array(Vec<V>),
}

fn attr<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// What the records of a descriptor become.
#[derive(Debug)]
enum Map {
    Process,
    Thread,
    End,
    /// A descriptor of gyr's: the schema it holds.
    Gyr(Schema),
    /// Any other: the schema made of it, and which fields give time and thread.
    Foreign {
        schema: Schema,
        time: Option<(usize, bool)>,
        thread: Option<usize>,
    },
    /// A descriptor whose records cannot be written (no valid schema); they are skipped.
    Skip,
}

fn is_field(d: &Desc, i: usize, name: &str, base: Base, dims: u32) -> bool {
    d.fields
        .get(i)
        .is_some_and(|f| f.name == name && f.base == base && f.dims == dims)
}

/// Turns what the readers find into a gyr trace.
struct Importer<W: Write> {
    out: Builder<W>,
    maps: Vec<Map>,
    /// Each descriptor's fields: type and dimensions, what its data records hold.
    shapes: Vec<Vec<(Base, u32)>>,
    by_name: HashMap<String, usize>,
    by_tag: HashMap<i64, usize>,
    /// Schemas waiting for the header (the first `gyr process` record).
    pending: Vec<Schema>,
    used_ids: HashSet<TypeId>,
    /// Per process (pid as written): its offset from the first process's clock.
    offsets: HashMap<i64, u64>,
    first_start: Option<u64>,
    threads: HashMap<(i64, u64), u64>,
    used_threads: HashSet<u64>,
    end: Option<TraceEnd>,
    payload: Vec<u8>,
}

impl<W: Write> Importer<W> {
    fn new(out: W, source: &str) -> Self {
        Importer {
            out: Builder::new(
                out,
                TraceHeader {
                    command_line: vec![source.to_owned()],
                    clock_source: "sddf".into(),
                    ..TraceHeader::default()
                },
            ),
            maps: Vec::new(),
            shapes: Vec::new(),
            by_name: HashMap::new(),
            by_tag: HashMap::new(),
            pending: Vec::new(),
            used_ids: HashSet::new(),
            offsets: HashMap::new(),
            first_start: None,
            threads: HashMap::new(),
            used_threads: HashSet::new(),
            end: None,
            payload: Vec::new(),
        }
    }

    fn start(&mut self, header: Option<&TraceHeader>) -> Result<(), ImportError> {
        if self.out.started() {
            return Ok(());
        }
        match header {
            Some(h) => self.out.header(h)?,
            // The builder's default header: the input's name.
            None => self.out.start_default()?,
        }
        for s in std::mem::take(&mut self.pending) {
            self.out.schema(&s)?;
        }
        Ok(())
    }

    fn schema_id(&mut self, wanted: TypeId) -> TypeId {
        let mut id = wanted.max(1);
        while self.used_ids.contains(&id) {
            id = id.wrapping_add(1).max(1);
        }
        self.used_ids.insert(id);
        id
    }

    fn descriptor(&mut self, at: Location, tag: Option<i64>, d: Desc) -> Result<(), ImportError> {
        if self.maps.len() >= MAX_DESCRIPTORS {
            return Err(ImportError::bad(
                at,
                format!("more than {MAX_DESCRIPTORS} record descriptors"),
            ));
        }
        let map = self.map(&d);
        let schema = match &map {
            Map::Gyr(s) | Map::Foreign { schema: s, .. } => Some(s.clone()),
            _ => None,
        };
        if let Some(s) = schema {
            if self.out.started() {
                self.out.schema(&s)?;
            } else {
                self.pending.push(s);
            }
        }
        let index = self.maps.len();
        self.maps.push(map);
        self.shapes
            .push(d.fields.iter().map(|f| (f.base, f.dims)).collect());
        // A later descriptor of the same name or tag replaces the earlier one.
        self.by_name.insert(d.name.clone(), index);
        if let Some(tag) = tag {
            self.by_tag.insert(tag, index);
        }
        Ok(())
    }

    fn map(&mut self, d: &Desc) -> Map {
        let n = d.fields.len();
        if d.name == PROCESS
            && n >= 10
            && is_field(d, 0, "pid", Base::Long, 0)
            && is_field(d, 2, "command line", Base::Char, 2)
        {
            return Map::Process;
        }
        if d.name == THREAD
            && n >= 4
            && is_field(d, 1, "thread id", Base::Long, 0)
            && is_field(d, 2, "name", Base::Char, 1)
        {
            return Map::Thread;
        }
        if d.name == END && n >= 5 && is_field(d, 0, "pid", Base::Long, 0) {
            return Map::End;
        }
        if let (Some(name), Some(id)) = (attr(&d.attrs, ATTR_NAME), attr(&d.attrs, ATTR_TYPE_ID))
            && let Ok(id) = id.parse::<TypeId>()
            && RECORD_FIELDS
                .iter()
                .enumerate()
                .all(|(i, f)| is_field(d, i, f, Base::Long, 0))
        {
            let fields: Option<Vec<Field>> = d.fields[RECORD_FIELDS.len()..]
                .iter()
                .map(|f| {
                    let ty = FieldType::parse(attr(&f.attrs, ATTR_TYPE)?)?;
                    (sddf_type(ty) == (f.base, f.dims)).then(|| Field::new(f.name.clone(), ty))
                })
                .collect();
            if let Some(fields) = fields {
                let id = self.schema_id(id);
                if let Ok(schema) = Schema::new(id, name, fields) {
                    return Map::Gyr(schema);
                }
            }
        }
        self.foreign(d)
    }

    fn foreign(&mut self, d: &Desc) -> Map {
        let norm = |s: &str| s.to_ascii_lowercase().replace('_', " ");
        let time = d.fields.iter().position(|f| {
            f.dims == 0
                && f.base != Base::Char
                && ["time stamp", "timestamp", "time", "seconds", "clock"]
                    .contains(&norm(&f.name).as_str())
        });
        let thread = d.fields.iter().position(|f| {
            f.dims == 0
                && matches!(f.base, Base::Int | Base::Long)
                && [
                    "node",
                    "processor",
                    "processor number",
                    "thread",
                    "pthread",
                    "task",
                ]
                .contains(&norm(&f.name).as_str())
        });
        let names = unique(d.fields.iter().map(|f| field_name(&f.name)).collect());
        let fields = d
            .fields
            .iter()
            .zip(names)
            .map(|(f, name)| {
                let ty = match (f.base, f.dims) {
                    (Base::Char, 0) => FieldType::U8,
                    (Base::Int, 0) => FieldType::I32,
                    (Base::Long, 0) => FieldType::I64,
                    (Base::Float, 0) => FieldType::F32,
                    (Base::Double, 0) => FieldType::F64,
                    _ => FieldType::Str,
                };
                Field::new(name, ty)
            })
            .collect();
        let id = self.schema_id(self.maps.len() as TypeId + 1);
        match Schema::new(id, schema_name(&d.name), fields) {
            Ok(schema) => Map::Foreign {
                time: time.map(|i| (i, matches!(d.fields[i].base, Base::Float | Base::Double))),
                thread,
                schema,
            },
            Err(_) => Map::Skip,
        }
    }

    fn find(
        &self,
        at: Location,
        name: Option<&str>,
        tag: Option<i64>,
    ) -> Result<usize, ImportError> {
        let found = match (name, tag) {
            (Some(n), _) => self.by_name.get(n),
            (None, Some(t)) => self.by_tag.get(&t),
            _ => None,
        };
        found.copied().ok_or_else(|| match (name, tag) {
            (Some(n), _) => ImportError::bad(
                at,
                format!("a data record of \"{n}\", which no descriptor before it defines"),
            ),
            _ => ImportError::bad(
                at,
                format!(
                    "a data packet of tag {}, which no descriptor before it defines",
                    tag.unwrap_or(0)
                ),
            ),
        })
    }

    fn descriptor_shape(&self, index: usize) -> Vec<(Base, u32)> {
        self.shapes[index].clone()
    }

    /// The gyr thread of `(pid, id)`, renumbered if another process took its id.
    fn thread_of(&mut self, pid: i64, id: u64) -> u64 {
        if let Some(&t) = self.threads.get(&(pid, id)) {
            return t;
        }
        let mut t = id;
        while self.used_threads.contains(&t) {
            t = t.wrapping_add(1);
        }
        self.used_threads.insert(t);
        self.threads.insert((pid, id), t);
        t
    }

    fn data(&mut self, at: Location, index: usize, values: Vec<V>) -> Result<(), ImportError> {
        let int = |v: &V| match v {
            V::Int(i) => Some(*i),
            V::Float(f) => Some(*f as i64),
            _ => None,
        };
        let float = |v: &V| match v {
            V::Int(i) => Some(*i as f64),
            V::Float(f) => Some(*f),
            _ => None,
        };
        let text = |v: &V| match v {
            V::Chars(c) => Some(String::from_utf8_lossy(c).into_owned()),
            _ => None,
        };
        let short = |what: &str| {
            ImportError::bad(
                at,
                format!("a `{what}` record whose values do not match its descriptor"),
            )
        };
        match &self.maps[index] {
            Map::Process => {
                let v = &values;
                let (Some(pid), Some(start)) = (v.first().and_then(int), v.get(3).and_then(int))
                else {
                    return Err(short(PROCESS));
                };
                let command_line = match v.get(2) {
                    Some(V::Rows(rows)) => rows
                        .iter()
                        .map(|r| String::from_utf8_lossy(r).into_owned())
                        .collect(),
                    _ => Vec::new(),
                };
                let header = TraceHeader {
                    pid: pid as u32,
                    host: v.get(1).and_then(text).unwrap_or_default(),
                    command_line,
                    start_unix_ns: start as u64,
                    clock_source: v.get(4).and_then(text).unwrap_or_default(),
                    ticks_per_second: v.get(5).and_then(float).unwrap_or(0.0),
                    sensor_cost_ns: v.get(6).and_then(float).unwrap_or(0.0),
                    policy: v.get(7).and_then(text).unwrap_or_default(),
                    gyr_version: v.get(8).and_then(text).unwrap_or_default(),
                };
                let first = *self.first_start.get_or_insert(header.start_unix_ns);
                self.offsets
                    .insert(pid, header.start_unix_ns.saturating_sub(first));
                self.start(Some(&header))
            }
            Map::Thread => {
                self.start(None)?;
                let v = &values;
                let (Some(pid), Some(id), Some(os_tid)) = (
                    v.first().and_then(int),
                    v.get(1).and_then(int),
                    v.get(3).and_then(int),
                ) else {
                    return Err(short(THREAD));
                };
                let id = self.thread_of(pid, id as u64);
                self.out.thread(&ThreadInfo {
                    id,
                    name: v.get(2).and_then(text).unwrap_or_default(),
                    os_tid: os_tid as u64,
                })
            }
            Map::End => {
                let v = &values;
                let get = |i: usize| v.get(i).and_then(int).map(|x| x as u64);
                let (Some(end_ns), Some(records), Some(lost), Some(filtered)) =
                    (get(1), get(2), get(3), get(4))
                else {
                    return Err(short(END));
                };
                let e = self.end.get_or_insert_with(TraceEnd::default);
                e.end_ns = e.end_ns.max(end_ns);
                e.records += records;
                e.lost += lost;
                e.filtered += filtered;
                Ok(())
            }
            Map::Gyr(schema) => {
                let get = |i: usize| values.get(i).and_then(int);
                let (Some(pid), Some(ts), Some(thread), Some(seq), Some(pert)) =
                    (get(0), get(1), get(2), get(3), get(4))
                else {
                    return Err(short(&schema.name));
                };
                let schema = schema.clone();
                self.payload.clear();
                encode(&mut self.payload, &schema, &values[RECORD_FIELDS.len()..])
                    .map_err(|what| ImportError::bad(at, what))?;
                self.start(None)?;
                let offset = self.offsets.get(&pid).copied().unwrap_or(0);
                let thread = self.thread_of(pid, thread as u64);
                if !self.out.has_thread(thread) {
                    self.out.thread(&ThreadInfo {
                        id: thread,
                        name: String::new(),
                        os_tid: 0,
                    })?;
                }
                let payload = std::mem::take(&mut self.payload);
                let r = self.out.record(
                    thread,
                    schema.id,
                    (ts as u64).saturating_add(offset),
                    Some(seq as u64),
                    pert as u64,
                    &payload,
                );
                self.payload = payload;
                r
            }
            Map::Foreign {
                schema,
                time,
                thread,
            } => {
                let schema = schema.clone();
                let ts = match *time {
                    Some((i, true)) => values
                        .get(i)
                        .and_then(float)
                        .map(|s| (s * 1e9).round().max(0.0) as u64),
                    Some((i, false)) => values.get(i).and_then(int).map(|n| n.max(0) as u64),
                    None => None,
                }
                .unwrap_or(0);
                let node = thread.and_then(|i| values.get(i).and_then(int));
                self.payload.clear();
                encode_foreign(&mut self.payload, &schema, &values)
                    .map_err(|what| ImportError::bad(at, what))?;
                self.start(None)?;
                let id = node.map_or(1, |n| (n.max(-1) + 1) as u64);
                if !self.out.has_thread(id) {
                    self.out.thread(&ThreadInfo {
                        id,
                        name: match node {
                            Some(n) => format!("node {}", n.max(-1)),
                            None => "main".into(),
                        },
                        os_tid: 0,
                    })?;
                }
                let payload = std::mem::take(&mut self.payload);
                let r = self.out.record(id, schema.id, ts, None, 0, &payload);
                self.payload = payload;
                r
            }
            Map::Skip => Ok(()),
        }
    }

    fn finish(mut self) -> Result<(W, ImportReport), ImportError> {
        self.start(None)?;
        let end = self.end.take();
        self.out.finish(end)
    }
}

/// Appends the payload of `values` under `schema`'s gyr field types.
fn encode(out: &mut Vec<u8>, schema: &Schema, values: &[V]) -> Result<(), String> {
    if values.len() != schema.fields.len() {
        return Err(format!(
            "a record of `{}` has {} values after the record fields; its descriptor has {}",
            schema.name,
            values.len(),
            schema.fields.len()
        ));
    }
    for (f, v) in schema.fields.iter().zip(values) {
        let wrong = || {
            format!(
                "field `{}` of `{}` does not hold a {}",
                f.name, schema.name, f.ty
            )
        };
        match (f.ty, v) {
            (FieldType::Scalar(s), V::Int(_) | V::Float(_)) => put_scalar(out, s, v),
            (FieldType::Str, V::Chars(c)) => {
                let s = std::str::from_utf8(c).map_err(|_| {
                    format!("field `{}` of `{}` is not UTF-8 text", f.name, schema.name)
                })?;
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            (FieldType::Bytes, V::Chars(c)) => {
                out.extend_from_slice(&(c.len() as u32).to_le_bytes());
                out.extend_from_slice(c);
            }
            (FieldType::Array(s, n), V::Array(items)) if items.len() == n as usize => {
                for item in items {
                    put_scalar(out, s, item);
                }
            }
            _ => return Err(wrong()),
        }
    }
    Ok(())
}

/// Appends the payload of a foreign record, every value kept (see the module doc).
fn encode_foreign(out: &mut Vec<u8>, schema: &Schema, values: &[V]) -> Result<(), String> {
    if values.len() != schema.fields.len() {
        return Err(format!(
            "a record of `{}` has {} values; its descriptor has {} fields",
            schema.name,
            values.len(),
            schema.fields.len()
        ));
    }
    for (f, v) in schema.fields.iter().zip(values) {
        match (f.ty, v) {
            (FieldType::Scalar(s), V::Int(_) | V::Float(_)) => put_scalar(out, s, v),
            (FieldType::Str, v) => {
                let text = match v {
                    V::Chars(c) => String::from_utf8_lossy(c).into_owned(),
                    V::Rows(rows) => rows
                        .iter()
                        .map(|r| String::from_utf8_lossy(r).into_owned())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    V::Array(items) => {
                        let parts: Vec<String> = items.iter().map(value_text).collect();
                        format!("[{}]", parts.join(", "))
                    }
                    other => value_text(other),
                };
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            _ => {
                return Err(format!(
                    "field `{}` of `{}` does not hold the {} its descriptor says",
                    f.name, schema.name, f.ty
                ));
            }
        }
    }
    Ok(())
}

fn value_text(v: &V) -> String {
    match v {
        V::Int(i) => i.to_string(),
        V::Float(x) => gyr_core::ShortFloat(*x).to_string(),
        V::Chars(c) => String::from_utf8_lossy(c).into_owned(),
        _ => String::new(),
    }
}

/// A number as scalar type `s` (integers wrap as C's casts do; a `u64` written as a negative
/// `long` comes back whole).
fn put_scalar(out: &mut Vec<u8>, s: ScalarType, v: &V) {
    let (i, x) = match *v {
        V::Int(i) => (i, i as f64),
        V::Float(x) => (x as i64, x),
        _ => (0, 0.0),
    };
    match s {
        ScalarType::I8 | ScalarType::U8 => out.push(i as u8),
        ScalarType::Bool => out.push(u8::from(i != 0)),
        ScalarType::I16 | ScalarType::U16 => out.extend_from_slice(&(i as u16).to_le_bytes()),
        ScalarType::I32 | ScalarType::U32 => out.extend_from_slice(&(i as u32).to_le_bytes()),
        ScalarType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
        ScalarType::F64 => out.extend_from_slice(&x.to_le_bytes()),
        _ => out.extend_from_slice(&(i as u64).to_le_bytes()),
    }
}

// ---------------------------------------------------------------------------------------------
// ASCII

/// A token of ASCII SDDF.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A quoted string, unescaped.
    Str(Vec<u8>),
    /// A number or a word (`int`, `nan`, `SDDFA`).
    Word(String),
    /// `{ } [ ] ; , : # % *`
    Punct(u8),
    /// `;;`
    End,
    /// `/*` and `*/`
    Open,
    Close,
    /// `//`
    Attr,
    Eof,
}

struct Lexer<R: BufRead> {
    r: R,
    line: u64,
    peeked: Option<(Tok, u64)>,
}

impl<R: BufRead> Lexer<R> {
    fn byte(&mut self) -> Result<Option<u8>, ImportError> {
        let buf = self.r.fill_buf().map_err(ImportError::Read)?;
        let Some(&b) = buf.first() else {
            return Ok(None);
        };
        self.r.consume(1);
        if b == b'\n' {
            self.line += 1;
        }
        Ok(Some(b))
    }

    fn peek_byte(&mut self) -> Result<Option<u8>, ImportError> {
        Ok(self
            .r
            .fill_buf()
            .map_err(ImportError::Read)?
            .first()
            .copied())
    }

    fn at(&self) -> Location {
        Location::Line(self.line)
    }

    fn peek(&mut self) -> Result<&Tok, ImportError> {
        if self.peeked.is_none() {
            let t = self.lex()?;
            self.peeked = Some(t);
        }
        Ok(&self.peeked.as_ref().expect("set above").0)
    }

    /// The next token and the line it starts on.
    fn next(&mut self) -> Result<(Tok, u64), ImportError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lex(),
        }
    }

    fn lex(&mut self) -> Result<(Tok, u64), ImportError> {
        loop {
            let line = self.line;
            let Some(b) = self.byte()? else {
                return Ok((Tok::Eof, line));
            };
            let tok = match b {
                b' ' | b'\t' | b'\r' | b'\n' => continue,
                b'"' => Tok::Str(self.string()?),
                b'/' => match self.byte()? {
                    Some(b'*') => Tok::Open,
                    Some(b'/') => Tok::Attr,
                    _ => {
                        return Err(ImportError::bad(
                            Location::Line(line),
                            "a lone `/`: expected `/*` or `//`",
                        ));
                    }
                },
                b'*' if self.peek_byte()? == Some(b'/') => {
                    self.byte()?;
                    Tok::Close
                }
                b';' if self.peek_byte()? == Some(b';') => {
                    self.byte()?;
                    Tok::End
                }
                b'{' | b'}' | b'[' | b']' | b';' | b',' | b':' | b'#' | b'%' | b'*' => {
                    Tok::Punct(b)
                }
                b if b.is_ascii_alphanumeric() || b"-+._".contains(&b) => {
                    let mut w = String::from(b as char);
                    while let Some(c) = self.peek_byte()? {
                        if c.is_ascii_alphanumeric() || b"-+._".contains(&c) {
                            if w.len() >= 256 {
                                return Err(ImportError::bad(
                                    Location::Line(line),
                                    "a word or number longer than 256 characters",
                                ));
                            }
                            w.push(c as char);
                            self.byte()?;
                        } else {
                            break;
                        }
                    }
                    Tok::Word(w)
                }
                other => {
                    return Err(ImportError::bad(
                        Location::Line(line),
                        format!(
                            "unexpected character {:?}: expected a string, a number, a type or punctuation",
                            other as char
                        ),
                    ));
                }
            };
            return Ok((tok, line));
        }
    }

    /// The rest of a quoted string, unescaped (see [`crate::export::sddf`]).
    fn string(&mut self) -> Result<Vec<u8>, ImportError> {
        let start = self.line;
        let mut s = Vec::new();
        loop {
            let Some(b) = self.byte()? else {
                return Err(ImportError::bad(
                    Location::Line(start),
                    "a string that never ends (no closing `\"`)",
                ));
            };
            match b {
                b'"' => return Ok(s),
                b'\\' => match self.byte()? {
                    Some(b'n') => s.push(b'\n'),
                    Some(b'r') => s.push(b'\r'),
                    Some(b't') => s.push(b'\t'),
                    Some(b'0') => s.push(0),
                    Some(b'x') => {
                        let hi = self.byte()?;
                        let lo = self.byte()?;
                        let hex = |c: Option<u8>| (c? as char).to_digit(16);
                        match (hex(hi), hex(lo)) {
                            (Some(h), Some(l)) => s.push((h * 16 + l) as u8),
                            _ => {
                                return Err(ImportError::bad(
                                    self.at(),
                                    "`\\x` in a string not followed by two hex digits",
                                ));
                            }
                        }
                    }
                    Some(c) => s.push(c),
                    None => {
                        return Err(ImportError::bad(self.at(), "a string cut after `\\`"));
                    }
                },
                b => s.push(b),
            }
            if s.len() > MAX_PACKET {
                return Err(ImportError::bad(
                    Location::Line(start),
                    format!("a string longer than {MAX_PACKET} bytes"),
                ));
            }
        }
    }

    fn expect(&mut self, want: Tok, what: &str) -> Result<(), ImportError> {
        let (t, line) = self.next()?;
        if t == want {
            Ok(())
        } else {
            Err(ImportError::bad(
                Location::Line(line),
                format!("expected {what}, found {}", shown(&t)),
            ))
        }
    }

    fn string_tok(&mut self, what: &str) -> Result<Vec<u8>, ImportError> {
        match self.next()? {
            (Tok::Str(s), _) => Ok(s),
            (t, line) => Err(ImportError::bad(
                Location::Line(line),
                format!("expected {what} (a quoted string), found {}", shown(&t)),
            )),
        }
    }

    fn number(&mut self, what: &str) -> Result<(f64, Option<i64>), ImportError> {
        match self.next()? {
            (Tok::Word(w), line) => parse_number(&w).ok_or_else(|| {
                ImportError::bad(
                    Location::Line(line),
                    format!("expected {what} (a number), found `{w}`"),
                )
            }),
            (t, line) => Err(ImportError::bad(
                Location::Line(line),
                format!("expected {what} (a number), found {}", shown(&t)),
            )),
        }
    }
}

fn shown(t: &Tok) -> String {
    match t {
        Tok::Str(s) => format!("the string \"{}\"", String::from_utf8_lossy(s)),
        Tok::Word(w) => format!("`{w}`"),
        Tok::Punct(p) => format!("`{}`", *p as char),
        Tok::End => "`;;`".into(),
        Tok::Open => "`/*`".into(),
        Tok::Close => "`*/`".into(),
        Tok::Attr => "`//`".into(),
        Tok::Eof => "the end of the file".into(),
    }
}

/// A number as C's `strtol`/`strtod` read it: `(value, Some(integer))` for integers.
fn parse_number(w: &str) -> Option<(f64, Option<i64>)> {
    if let Ok(i) = w.parse::<i64>() {
        return Some((i as f64, Some(i)));
    }
    if let Ok(u) = w.parse::<u64>() {
        return Some((u as f64, Some(u as i64)));
    }
    let lower = w.to_ascii_lowercase();
    let x = match lower.trim_start_matches(['+', '-']) {
        "nan" => f64::NAN,
        "inf" | "infinity" => f64::INFINITY,
        _ => return w.parse::<f64>().ok().map(|x| (x, None)),
    };
    Some((if lower.starts_with('-') { -x } else { x }, None))
}

/// Reads ASCII SDDF from `input` into a gyr trace on `out`.
pub fn import_ascii<R: Read, W: Write>(
    input: R,
    out: W,
    source: &str,
) -> Result<(W, ImportReport), ImportError> {
    let mut lx = Lexer {
        r: std::io::BufReader::with_capacity(1 << 16, input),
        line: 1,
        peeked: None,
    };
    let mut im = Importer::new(out, source);
    if let Tok::Word(w) = lx.peek()?
        && w == "SDDFA"
    {
        lx.next()?;
    }
    loop {
        let (t, line) = lx.next()?;
        let at = Location::Line(line);
        match t {
            Tok::Eof => break,
            Tok::Open => {
                // Stream attributes: `* "key" "value"` pairs; kept by nobody.
                loop {
                    match lx.next()? {
                        (Tok::Close, _) => break,
                        (Tok::Punct(b'*') | Tok::Str(_) | Tok::Word(_), _) => {}
                        (Tok::Eof, _) => {
                            return Err(ImportError::bad(
                                at,
                                "a comment of stream attributes that never ends (no `*/`)",
                            ));
                        }
                        _ => {}
                    }
                }
                if lx.peek()? == &Tok::End {
                    lx.next()?;
                }
            }
            Tok::Punct(b'#') => {
                let (_, tag) = lx.number("a descriptor's tag after `#`")?;
                lx.expect(Tok::Punct(b':'), "`:` after a descriptor's tag")?;
                let attrs = attributes(&mut lx)?;
                let name = lx.string_tok("the descriptor's name")?;
                lx.expect(Tok::Punct(b'{'), "`{` opening the descriptor's fields")?;
                let mut fields = Vec::new();
                loop {
                    if lx.peek()? == &Tok::Punct(b'}') {
                        lx.next()?;
                        break;
                    }
                    if fields.len() >= MAX_FIELDS {
                        return Err(ImportError::bad(
                            at,
                            format!("a descriptor with more than {MAX_FIELDS} fields"),
                        ));
                    }
                    fields.push(ascii_field(&mut lx)?);
                }
                lx.expect(Tok::End, "`;;` ending the descriptor")?;
                im.descriptor(
                    at,
                    tag,
                    Desc {
                        name: String::from_utf8_lossy(&name).into_owned(),
                        attrs,
                        fields,
                    },
                )?;
            }
            Tok::Punct(b'%') => {
                // A command packet: its tag, then `;;`.
                lx.number("a command's tag after `%`")?;
                if lx.peek()? == &Tok::Punct(b':') {
                    lx.next()?;
                }
                lx.expect(Tok::End, "`;;` ending the command")?;
            }
            Tok::Str(name) => {
                let name = String::from_utf8_lossy(&name).into_owned();
                let index = im.find(at, Some(&name), None)?;
                let shape: Vec<(Base, u32)> = im.descriptor_shape(index);
                lx.expect(Tok::Punct(b'{'), "`{` opening the record's values")?;
                let mut values = Vec::with_capacity(shape.len());
                for (i, &(base, dims)) in shape.iter().enumerate() {
                    if i > 0 {
                        lx.expect(Tok::Punct(b','), "`,` between values")?;
                    }
                    values.push(ascii_value(&mut lx, base, dims)?);
                }
                lx.expect(Tok::Punct(b'}'), "`}` after the record's last value")?;
                lx.expect(Tok::End, "`;;` ending the record")?;
                im.data(at, index, values)?;
            }
            other => {
                return Err(ImportError::bad(
                    at,
                    format!(
                        "expected a descriptor (`#tag:`), a data record (\"name\" {{ ... }}) or stream attributes (`/* ... */`), found {}",
                        shown(&other)
                    ),
                ));
            }
        }
    }
    im.finish()
}

fn attributes<R: BufRead>(lx: &mut Lexer<R>) -> Result<Vec<(String, String)>, ImportError> {
    let mut attrs = Vec::new();
    while lx.peek()? == &Tok::Attr {
        lx.next()?;
        let k = lx.string_tok("an attribute's key")?;
        let v = lx.string_tok("an attribute's value")?;
        if attrs.len() < MAX_FIELDS {
            attrs.push((
                String::from_utf8_lossy(&k).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
    }
    Ok(attrs)
}

fn ascii_field<R: BufRead>(lx: &mut Lexer<R>) -> Result<FieldDesc, ImportError> {
    let attrs = attributes(lx)?;
    let mut words = Vec::new();
    let (name, line) = loop {
        match lx.next()? {
            (Tok::Word(w), _) if words.len() < 4 => words.push(w),
            (Tok::Str(s), line) if !words.is_empty() => break (s, line),
            (t, line) => {
                return Err(ImportError::bad(
                    Location::Line(line),
                    format!(
                        "expected a field: a type (char, int, float, double) and a quoted name, found {}",
                        shown(&t)
                    ),
                ));
            }
        }
    };
    let base = match words.join(" ").as_str() {
        "char" => Base::Char,
        "int" | "short" => Base::Int,
        "float" => Base::Float,
        "double" => Base::Double,
        "long" | "unsigned long long" | "long long" | "unsigned long" => Base::Long,
        other => {
            return Err(ImportError::bad(
                Location::Line(line),
                format!("unknown field type `{other}`: expected char, int, float or double"),
            ));
        }
    };
    let mut dims = 0;
    while lx.peek()? == &Tok::Punct(b'[') {
        lx.next()?;
        lx.expect(Tok::Punct(b']'), "`]` after `[` in a field's declaration")?;
        dims += 1;
        if dims > MAX_DIMS {
            return Err(ImportError::bad(
                Location::Line(line),
                format!("a field of more than {MAX_DIMS} dimensions"),
            ));
        }
    }
    lx.expect(Tok::Punct(b';'), "`;` ending the field's declaration")?;
    Ok(FieldDesc {
        name: String::from_utf8_lossy(&name).into_owned(),
        attrs,
        base,
        dims,
    })
}

/// One value of a field of type `base` and `dims` dimensions.
fn ascii_value<R: BufRead>(lx: &mut Lexer<R>, base: Base, dims: u32) -> Result<V, ImportError> {
    if dims == 0 {
        if base == Base::Char
            && let Tok::Str(_) = lx.peek()?
        {
            let s = lx.string_tok("a char")?;
            return Ok(V::Int(i64::from(s.first().copied().unwrap_or(0))));
        }
        let (x, i) = lx.number("a number")?;
        return Ok(match (base, i) {
            (Base::Float | Base::Double, _) | (_, None) => V::Float(x),
            (_, Some(i)) => V::Int(i),
        });
    }
    // `[n]` per dimension, then `{ elements }`.
    let line = lx.line;
    for _ in 0..dims {
        lx.expect(Tok::Punct(b'['), "`[` and an array's extent")?;
        let (n, _) = lx.number("an array's extent")?;
        if !(0.0..=MAX_ELEMENTS as f64).contains(&n) {
            return Err(ImportError::bad(
                Location::Line(line),
                format!("an array extent of {n}: at most {MAX_ELEMENTS} elements are read"),
            ));
        }
        lx.expect(Tok::Punct(b']'), "`]` after an array's extent")?;
    }
    lx.expect(Tok::Punct(b'{'), "`{` opening an array's elements")?;
    let mut items = Vec::new();
    let mut rows = Vec::new();
    let mut total = 0usize;
    loop {
        match lx.next()? {
            (Tok::Punct(b'}'), _) => break,
            (Tok::Punct(b','), _) => {}
            (Tok::Str(s), _) => {
                total += s.len();
                rows.push(s);
            }
            (Tok::Word(w), l) => {
                let (x, i) = parse_number(&w).ok_or_else(|| {
                    ImportError::bad(
                        Location::Line(l),
                        format!("expected an array element (a number or a string), found `{w}`"),
                    )
                })?;
                items.push(match (base, i) {
                    (Base::Float | Base::Double, _) | (_, None) => V::Float(x),
                    (_, Some(i)) => V::Int(i),
                });
                total += 8;
            }
            (t, l) => {
                return Err(ImportError::bad(
                    Location::Line(l),
                    format!("expected an array element or `}}`, found {}", shown(&t)),
                ));
            }
        }
        if items.len() + rows.len() > MAX_ELEMENTS || total > MAX_PACKET {
            return Err(ImportError::bad(
                Location::Line(line),
                format!("an array of more than {MAX_ELEMENTS} elements or {MAX_PACKET} bytes"),
            ));
        }
    }
    Ok(match (base, dims) {
        (Base::Char, 1) => match rows.len() {
            0 => V::Chars(items.iter().map(value_byte).collect()),
            _ => V::Chars(rows.concat()),
        },
        (Base::Char, _) => V::Rows(rows),
        _ => V::Array(items),
    })
}

fn value_byte(v: &V) -> u8 {
    match v {
        V::Int(i) => *i as u8,
        V::Float(x) => *x as u8,
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Binary

/// The layout a binary file declares in its header.
#[derive(Debug, Clone, Copy)]
struct Layout {
    big_endian: bool,
    int: usize,
    long: usize,
}

/// A packet's body being read, with its offset in the file for messages.
struct Body<'a> {
    bytes: &'a [u8],
    at: usize,
    offset: u64,
    layout: Layout,
}

impl Body<'_> {
    fn here(&self) -> Location {
        Location::Byte(self.offset + self.at as u64)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], ImportError> {
        if self.bytes.len() - self.at < n {
            return Err(ImportError::bad(
                self.here(),
                format!(
                    "{what} needs {n} bytes but its packet has {} left",
                    self.bytes.len() - self.at
                ),
            ));
        }
        let b = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(b)
    }

    fn uint(&mut self, size: usize, what: &str) -> Result<i64, ImportError> {
        let big = self.layout.big_endian;
        let b = self.take(size, what)?;
        let mut v: u64 = 0;
        if big {
            for &x in b {
                v = v << 8 | u64::from(x);
            }
        } else {
            for &x in b.iter().rev() {
                v = v << 8 | u64::from(x);
            }
        }
        // Sign-extend from `size` bytes.
        let shift = 64 - 8 * size as u32;
        Ok(((v << shift) as i64) >> shift)
    }

    fn int(&mut self, what: &str) -> Result<i64, ImportError> {
        self.uint(self.layout.int, what)
    }

    /// A count: an int that must be within `0..=max` and fit what is left at `each` bytes.
    fn count(&mut self, what: &str, max: usize, each: usize) -> Result<usize, ImportError> {
        let here = self.here();
        let n = self.int(what)?;
        let left = (self.bytes.len() - self.at) / each.max(1);
        if n < 0 || n as usize > max || n as usize > left {
            return Err(ImportError::bad(
                here,
                format!(
                    "{what} is {n}; expected 0 to {} (what the packet's remaining bytes can hold)",
                    max.min(left)
                ),
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Result<Vec<u8>, ImportError> {
        let n = self.count(&format!("the length of {what}"), MAX_PACKET, 1)?;
        Ok(self.take(n, what)?.to_vec())
    }

    fn attrs(&mut self) -> Result<Vec<(String, String)>, ImportError> {
        let n = self.count("an attribute count", MAX_FIELDS, 2 * self.layout.int)?;
        let mut attrs = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.string("an attribute's key")?;
            let v = self.string("an attribute's value")?;
            attrs.push((
                String::from_utf8_lossy(&k).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
        Ok(attrs)
    }

    fn scalar(&mut self, base: Base) -> Result<V, ImportError> {
        Ok(match base {
            Base::Char => V::Int(self.uint(1, "a char")? & 0xff),
            Base::Int => V::Int(self.int("an int")?),
            Base::Long => V::Int(self.uint(self.layout.long, "a long")?),
            Base::Float => V::Float(f64::from(f32::from_bits(self.uint(4, "a float")? as u32))),
            Base::Double => V::Float(f64::from_bits(self.uint(8, "a double")? as u64)),
        })
    }

    fn value(&mut self, base: Base, dims: u32) -> Result<V, ImportError> {
        if dims == 0 {
            return self.scalar(base);
        }
        let size = match base {
            Base::Char => 1,
            Base::Int => self.layout.int,
            Base::Long => self.layout.long,
            Base::Float => 4,
            Base::Double => 8,
        };
        let here = self.here();
        let mut extents = Vec::with_capacity(dims as usize);
        let mut total: usize = 1;
        for _ in 0..dims {
            let e = self.count("an array extent", MAX_ELEMENTS, 0)?;
            extents.push(e);
            total = total.saturating_mul(e);
        }
        if total > MAX_ELEMENTS || total.saturating_mul(size) > self.bytes.len() - self.at {
            return Err(ImportError::bad(
                here,
                format!("an array of {total} elements of {size} bytes, more than its packet holds"),
            ));
        }
        if base == Base::Char {
            let bytes = self.take(total, "an array of chars")?;
            let strip = |r: &[u8]| {
                let end = r.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
                r[..end].to_vec()
            };
            if dims == 1 {
                return Ok(V::Chars(strip(bytes)));
            }
            let width = *extents.last().expect("dims > 1");
            let rows = if width == 0 {
                Vec::new()
            } else {
                bytes.chunks(width).map(strip).collect()
            };
            return Ok(V::Rows(rows));
        }
        let mut items = Vec::with_capacity(total);
        for _ in 0..total {
            items.push(self.scalar(base)?);
        }
        Ok(V::Array(items))
    }
}

/// Reads binary SDDF from `input` into a gyr trace on `out`.
pub fn import_binary<R: Read, W: Write>(
    input: R,
    out: W,
    source: &str,
) -> Result<(W, ImportReport), ImportError> {
    let mut r = std::io::BufReader::with_capacity(1 << 16, input);
    let mut offset: u64 = 0;
    let mut head = [0u8; 19];
    let got = read_full(&mut r, &mut head)?;
    if got < 5 || &head[..5] != b"SDDFB" {
        return Err(ImportError::bad(
            Location::Byte(0),
            "the file does not start with `SDDFB`: it is not binary SDDF (try --format sddf-ascii)",
        ));
    }
    if got < 19 || head[5] != 19 {
        return Err(ImportError::bad(
            Location::Byte(5),
            "the 14 bytes of data characteristics after `SDDFB` (header length 19, byte order, representations, sizes) are missing; files of Pablo's oldest versions are not read",
        ));
    }
    let sizes_ok = head[7] == 0 && head[8] == 0 && head[9] == 0 && head[11] == 0;
    let layout = Layout {
        big_endian: head[6] == 0,
        int: usize::from(head[14]),
        long: usize::from(head[15]),
    };
    if !sizes_ok
        || ![2, 4, 8].contains(&layout.int)
        || ![4, 8].contains(&layout.long)
        || head[16] != 4
        || head[17] != 8
        || head[12] != 1
    {
        return Err(ImportError::bad(
            Location::Byte(6),
            format!(
                "data characteristics {:?}: gyr reads two's complement integers of 2, 4 or 8 bytes, IEEE floats of 4 and 8 bytes and ASCII chars",
                &head[6..19]
            ),
        ));
    }
    offset += 19;
    let mut im = Importer::new(out, source);
    let int = layout.int;
    let mut header = vec![0u8; 3 * int];
    let mut body = Vec::new();
    loop {
        let got = read_full(&mut r, &mut header)?;
        if got == 0 {
            break;
        }
        if got < header.len() {
            return Err(ImportError::bad(
                Location::Byte(offset),
                format!("a packet header cut short: {got} of {} bytes", header.len()),
            ));
        }
        let mut h = Body {
            bytes: &header,
            at: 0,
            offset,
            layout,
        };
        let len = h.int("a packet's length")?;
        let kind = h.int("a packet's type")?;
        let tag = h.int("a packet's tag")?;
        if len < 3 * int as i64 || len as usize > MAX_PACKET + 3 * int {
            return Err(ImportError::bad(
                Location::Byte(offset),
                format!(
                    "a packet length of {len}: expected {} to {} bytes (its header included)",
                    3 * int,
                    MAX_PACKET
                ),
            ));
        }
        let n = len as usize - 3 * int;
        body.clear();
        body.resize(n, 0);
        let got = read_full(&mut r, &mut body)?;
        if got < n {
            return Err(ImportError::bad(
                Location::Byte(offset + (3 * int + got) as u64),
                format!("the file ends inside a packet: {got} of its {n} bytes are present"),
            ));
        }
        let at = Location::Byte(offset);
        let mut b = Body {
            bytes: &body,
            at: 0,
            offset: offset + 3 * int as u64,
            layout,
        };
        match kind {
            1 => {
                b.attrs()?;
            }
            2 => {
                let name = b.string("the descriptor's name")?;
                let attrs = b.attrs()?;
                let n = b.count("a field count", MAX_FIELDS, 4 * int)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let fname = b.string("a field's name")?;
                    let fattrs = b.attrs()?;
                    let here = b.here();
                    let code = b.int("a field's type")?;
                    let base = Base::from_code(code).ok_or_else(|| {
                        ImportError::bad(
                            here,
                            format!(
                                "field type {code}: expected 0 (char), 1 (int), 2 (float), 3 (double) or 5 (long)"
                            ),
                        )
                    })?;
                    let here = b.here();
                    let dims = b.int("a field's dimension")?;
                    if !(0..=i64::from(MAX_DIMS)).contains(&dims) {
                        return Err(ImportError::bad(
                            here,
                            format!("a field of dimension {dims}: expected 0 to {MAX_DIMS}"),
                        ));
                    }
                    fields.push(FieldDesc {
                        name: String::from_utf8_lossy(&fname).into_owned(),
                        attrs: fattrs,
                        base,
                        dims: dims as u32,
                    });
                }
                im.descriptor(
                    at,
                    Some(tag),
                    Desc {
                        name: String::from_utf8_lossy(&name).into_owned(),
                        attrs,
                        fields,
                    },
                )?;
            }
            3 => {
                let index = im.find(at, None, Some(tag))?;
                let shape = im.descriptor_shape(index);
                let mut values = Vec::with_capacity(shape.len());
                for (base, dims) in shape {
                    values.push(b.value(base, dims)?);
                }
                if b.at != b.bytes.len() {
                    return Err(ImportError::bad(
                        b.here(),
                        format!(
                            "{} bytes left in a data packet after its descriptor's last field",
                            b.bytes.len() - b.at
                        ),
                    ));
                }
                im.data(at, index, values)?;
            }
            4 => {}
            other => {
                return Err(ImportError::bad(
                    Location::Byte(offset + int as u64),
                    format!(
                        "packet type {other}: expected 1 (attributes), 2 (descriptor), 3 (data) or 4 (command)"
                    ),
                ));
            }
        }
        offset += len as u64;
    }
    im.finish()
}

/// Fills `buf` as far as the input goes; returns how much was read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> Result<usize, ImportError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ImportError::Read(e)),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(text: &str) -> Result<ImportReport, ImportError> {
        import_ascii(text.as_bytes(), Vec::new(), "test").map(|(_, r)| r)
    }

    #[test]
    fn reads_a_foreign_ascii_file() {
        let text = r#"SDDFA
/*
 * "Trace Format" "Version 1.0"
 */ ;;

#40:
// "description" "send"
"NX send" {
	double	"time stamp";
	int	"node";
	int	"bytes";
	char	"label"[];
	int	"path"[];
};;

"NX send" { 0.5, 0, 1024, [6] { "hello" }, [3] { 1, 2, 3 } };;
"NX send" { 1.5, 1, 2048, [1] { "" }, [0] { } };;
"#;
        let r = import(text).unwrap();
        assert_eq!((r.schemas, r.threads, r.records), (1, 2, 2));
    }

    #[test]
    fn bad_text_names_the_line_and_what_was_expected() {
        let text = "SDDFA\n#1:\n\"a\" {\n\tint \"x\";\n};;\n\"a\" { 1, 2 };;\n";
        let e = import(text).unwrap_err().to_string();
        assert!(e.contains("line 6") && e.contains("`}`"), "{e}");
        let e = import("SDDFA\n\"b\" { 1 };;\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("no descriptor"), "{e}");
        let e = import("SDDFA\n#1: \"a\" { int \"x\"[]; };;\n\"a\" { [99999999999] { } };;\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most"), "{e}");
        let e = import("SDDFA\n#1: \"a\" { quad \"x\"; };;")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field type `quad`"), "{e}");
    }

    #[test]
    fn crafted_binary_sizes_are_refused_without_allocating() {
        let mut f = b"SDDFB".to_vec();
        f.extend_from_slice(&[19, 1, 0, 0, 0, 0, 0, 1, 2, 4, 8, 4, 8, 16]);
        // A packet claiming 2 GiB.
        f.extend_from_slice(&i32::MAX.to_le_bytes());
        f.extend_from_slice(&2i32.to_le_bytes());
        f.extend_from_slice(&1i32.to_le_bytes());
        let e = import_binary(&f[..], Vec::new(), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("byte 19") && e.contains("packet length"), "{e}");
        // A descriptor whose name claims more bytes than its packet has.
        let mut g = f[..19].to_vec();
        g.extend_from_slice(&20i32.to_le_bytes());
        g.extend_from_slice(&2i32.to_le_bytes());
        g.extend_from_slice(&1i32.to_le_bytes());
        g.extend_from_slice(&1_000_000i32.to_le_bytes());
        g.extend_from_slice(&[0; 4]);
        let e = import_binary(&g[..], Vec::new(), "t")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("byte 31") && e.contains("length of the descriptor's name"),
            "{e}"
        );
        let e = import_binary(&b"SDDFA"[..], Vec::new(), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not binary SDDF"), "{e}");
    }
}
