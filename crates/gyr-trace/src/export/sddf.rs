//! Pablo's Self-Defining Data Format (SDDF), ASCII (`SDDFA`) and binary (`SDDFB`), as gyr
//! writes it.
//!
//! SDDF is a stream of record descriptors (a name, attributes, typed fields) and data records
//! of those descriptors: the same idea as gyr's schemas travelling in the stream, so each gyr
//! schema becomes one descriptor and each record one data record, in file order.
//!
//! # Descriptors
//!
//! | descriptor | fields | holds |
//! |---|---|---|
//! | `gyr process` | `pid`, `host`, `command line` (2-D char), `start unix ns`, `clock source`, `ticks per second`, `sensor cost ns`, `policy`, `gyr version`, `format version` | an input's header, one record per input |
//! | `gyr thread` | `pid`, `thread id`, `name`, `os tid` | a thread's description |
//! | `gyr end` | `pid`, `end ns`, `records`, `lost`, `filtered` | the end block of a cleanly closed input |
//! | one per schema, named as it | `pid`, `time stamp ns`, `thread id`, `sequence number`, `perturbation ns`, then the schema's fields | its records |
//!
//! The names of gyr's own descriptors and fields hold spaces, which gyr's schema and field names
//! never do, so they cannot collide with a program's. A schema's descriptor has the record
//! attributes `gyr name` and `gyr type id`, and each field the attribute `gyr type` (`u32`,
//! `[f64; 8]`, ...), so that `gyr trace import` restores the exact schema; other SDDF readers
//! see ordinary descriptors. Several inputs share a descriptor when their schemas have the same
//! name and fields; a schema whose name is taken by another shape is named `name#2`, `name#3`.
//!
//! # Field types
//!
//! SDDF has `char`, `int` (32 bits), `float` and `double`, each as a scalar or an array of any
//! dimension. gyr's types map to them as:
//!
//! | gyr | SDDF |
//! |---|---|
//! | `i8`, `i16`, `i32`, `u8`, `u16`, `bool` (0 or 1) | `int` |
//! | `u32`, `i64`, `u64` | `long`: 64-bit two's complement, an extension (HDF's Pablo writer used one too): the word `long` in ASCII, type code 5 in binary |
//! | `f32` | `float` |
//! | `f64` | `double` |
//! | `string`, `bytes` | `char[]` |
//! | `[T; N]` | `T[]` with the mapping above |
//!
//! A `u64` above `i64::MAX` is written as the `long` with the same 64 bits, which an SDDF reader
//! sees as negative; its field's `gyr type` attribute (`u64`) tells `gyr trace import` to read
//! it back exactly.
//!
//! # Encodings
//!
//! ASCII: `SDDFA`, a comment of stream attributes closed by `;;`, descriptors
//! (`#TAG: // "key" "value" "name" { type "field"[]; ... };;`) and data records
//! (`"name" { v, [n] { "text" }, ... };;`), as Pablo's and Dimemas's writers lay them out;
//! strings escape `"`, `\` and control bytes with backslashes (`\"`, `\\`, `\n`, `\xHH`), which
//! Pablo left undefined. Floats are written in their shortest exact form.
//!
//! Binary: the 19-byte header (`SDDFB`, its own length, little-endian, two's complement, IEEE,
//! ASCII, then the sizes 1, 2, 4, 8, 4, 8, 16), then packets of three `int`s (length including
//! them, type: 1 attributes, 2 descriptor, 3 data; tag) and a body: strings as an `int` length
//! and the bytes, arrays as an `int` extent per dimension and the elements, all little-endian.

use super::{Consumer, FileStart};
use gyr_core::record::RecordHeader;
use gyr_core::schema::{FieldType, ScalarType, Schema, TypeId};
use gyr_core::trace::TraceEnd;
use gyr_core::{ShortFloat, ThreadInfo};
use std::collections::HashMap;
use std::io::{self, Write};

/// SDDF's machine data types, and gyr's `long`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    Char,
    Int,
    Float,
    Double,
    Long,
}

impl Base {
    /// The type code of binary SDDF.
    pub(crate) fn code(self) -> i32 {
        match self {
            Base::Char => 0,
            Base::Int => 1,
            Base::Float => 2,
            Base::Double => 3,
            Base::Long => 5,
        }
    }

    pub(crate) fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            0 => Base::Char,
            1 => Base::Int,
            2 => Base::Float,
            3 => Base::Double,
            5 => Base::Long,
            _ => return None,
        })
    }

    /// The type's word in ASCII SDDF.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Base::Char => "char",
            Base::Int => "int",
            Base::Float => "float",
            Base::Double => "double",
            Base::Long => "long",
        }
    }
}

/// The SDDF type of a scalar type.
pub(crate) fn base_of(s: ScalarType) -> Base {
    match s {
        ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::U8 | ScalarType::U16 => {
            Base::Int
        }
        ScalarType::Bool => Base::Int,
        ScalarType::F32 => Base::Float,
        ScalarType::F64 => Base::Double,
        _ => Base::Long,
    }
}

/// The SDDF type and dimension of a gyr field type.
pub(crate) fn sddf_type(ty: FieldType) -> (Base, u32) {
    match ty {
        FieldType::Scalar(s) => (base_of(s), 0),
        FieldType::Array(s, _) => (base_of(s), 1),
        _ => (Base::Char, 1),
    }
}

/// The name of gyr's descriptor of a process.
pub(crate) const PROCESS: &str = "gyr process";
/// The name of gyr's descriptor of a thread.
pub(crate) const THREAD: &str = "gyr thread";
/// The name of gyr's descriptor of an end block.
pub(crate) const END: &str = "gyr end";
/// The fields every record's descriptor starts with.
pub(crate) const RECORD_FIELDS: [&str; 5] = [
    "pid",
    "time stamp ns",
    "thread id",
    "sequence number",
    "perturbation ns",
];
/// The record attribute naming the gyr schema a descriptor holds.
pub(crate) const ATTR_NAME: &str = "gyr name";
/// The record attribute giving the schema's type id.
pub(crate) const ATTR_TYPE_ID: &str = "gyr type id";
/// The field attribute giving the gyr field type.
pub(crate) const ATTR_TYPE: &str = "gyr type";

/// A field of a descriptor as written.
#[derive(Debug, Clone)]
struct FieldDesc {
    name: String,
    attrs: Vec<(String, String)>,
    base: Base,
    dims: u32,
}

/// A descriptor as written.
#[derive(Debug, Clone)]
struct Descriptor {
    tag: i32,
    name: String,
    attrs: Vec<(String, String)>,
    fields: Vec<FieldDesc>,
}

fn plain(name: &str, base: Base, dims: u32) -> FieldDesc {
    FieldDesc {
        name: name.to_owned(),
        attrs: Vec::new(),
        base,
        dims,
    }
}

/// Whether the output is text or binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Ascii,
    Binary,
}

/// One value of a data record.
#[derive(Debug, Clone, Copy)]
enum Val<'a> {
    Int(i64),
    Long(i64),
    Float(f32),
    Double(f64),
    /// `char[]`: the bytes (UTF-8 text for strings).
    Chars(&'a [u8]),
    /// `char[][]`: rows.
    Rows(&'a [String]),
}

/// Writes SDDF.
#[derive(Debug)]
pub(crate) struct SddfWriter<W: Write> {
    out: W,
    enc: Encoding,
    events: u64,
    started: bool,
    next_tag: i32,
    /// Descriptors by (name, fields) of the schema they hold, across inputs.
    by_shape: HashMap<(String, Vec<gyr_core::Field>), usize>,
    names: HashMap<String, u32>,
    descriptors: Vec<Descriptor>,
    /// This input's schemas: type id → (descriptor, schema).
    types: HashMap<TypeId, (usize, Schema)>,
    pid: u32,
    pids: Vec<u32>,
    buf: Vec<u8>,
}

impl<W: Write> SddfWriter<W> {
    pub(crate) fn new(out: W, enc: Encoding) -> Self {
        SddfWriter {
            out,
            enc,
            events: 0,
            started: false,
            next_tag: 1,
            by_shape: HashMap::new(),
            names: HashMap::new(),
            descriptors: Vec::new(),
            types: HashMap::new(),
            pid: 0,
            pids: Vec::new(),
            buf: Vec::with_capacity(4096),
        }
    }

    fn start(&mut self) -> io::Result<()> {
        if self.started {
            return Ok(());
        }
        self.started = true;
        let attrs = [("creator", "gyr trace export"), ("gyr sddf", "1")];
        match self.enc {
            Encoding::Ascii => {
                let mut s = String::from("SDDFA\n/*\n");
                for (k, v) in attrs {
                    s.push_str(" * ");
                    quote(&mut s, k.as_bytes());
                    s.push(' ');
                    quote(&mut s, v.as_bytes());
                    s.push('\n');
                }
                s.push_str(" */\n;;\n\n");
                self.out.write_all(s.as_bytes())?;
            }
            Encoding::Binary => {
                let mut h = Vec::with_capacity(19);
                h.extend_from_slice(b"SDDFB");
                // Header length, little-endian, two's complement, IEEE x3, ASCII.
                h.extend_from_slice(&[19, 1, 0, 0, 0, 0, 0]);
                // Bytes in char, short, int, long, float, double, long double.
                h.extend_from_slice(&[1, 2, 4, 8, 4, 8, 16]);
                self.out.write_all(&h)?;
                let mut body = Vec::new();
                put_int(&mut body, attrs.len() as i64);
                for (k, v) in attrs {
                    put_str(&mut body, k.as_bytes());
                    put_str(&mut body, v.as_bytes());
                }
                self.packet(1, 0, &body)?;
            }
        }
        for (name, fields) in [
            (
                PROCESS,
                vec![
                    plain("pid", Base::Long, 0),
                    plain("host", Base::Char, 1),
                    plain("command line", Base::Char, 2),
                    plain("start unix ns", Base::Long, 0),
                    plain("clock source", Base::Char, 1),
                    plain("ticks per second", Base::Double, 0),
                    plain("sensor cost ns", Base::Double, 0),
                    plain("policy", Base::Char, 1),
                    plain("gyr version", Base::Char, 1),
                    plain("format version", Base::Int, 0),
                ],
            ),
            (
                THREAD,
                vec![
                    plain("pid", Base::Long, 0),
                    plain("thread id", Base::Long, 0),
                    plain("name", Base::Char, 1),
                    plain("os tid", Base::Long, 0),
                ],
            ),
            (
                END,
                vec![
                    plain("pid", Base::Long, 0),
                    plain("end ns", Base::Long, 0),
                    plain("records", Base::Long, 0),
                    plain("lost", Base::Long, 0),
                    plain("filtered", Base::Long, 0),
                ],
            ),
        ] {
            let description = match name {
                PROCESS => "the process that wrote a gyr trace (its header)",
                THREAD => "a thread of a gyr trace",
                _ => "the totals of a gyr trace closed cleanly",
            };
            self.descriptor(Descriptor {
                tag: 0,
                name: name.to_owned(),
                attrs: vec![("description".into(), description.into())],
                fields,
            })?;
        }
        Ok(())
    }

    /// Writes a descriptor (giving it the next tag); returns its index.
    fn descriptor(&mut self, mut d: Descriptor) -> io::Result<usize> {
        d.tag = self.next_tag;
        self.next_tag += 1;
        match self.enc {
            Encoding::Ascii => {
                let mut s = format!("#{}:\n", d.tag);
                for (k, v) in &d.attrs {
                    s.push_str("// ");
                    quote(&mut s, k.as_bytes());
                    s.push(' ');
                    quote(&mut s, v.as_bytes());
                    s.push('\n');
                }
                quote(&mut s, d.name.as_bytes());
                s.push_str(" {\n");
                for f in &d.fields {
                    for (k, v) in &f.attrs {
                        s.push_str("\t// ");
                        quote(&mut s, k.as_bytes());
                        s.push(' ');
                        quote(&mut s, v.as_bytes());
                        s.push('\n');
                    }
                    s.push('\t');
                    s.push_str(f.base.word());
                    s.push('\t');
                    quote(&mut s, f.name.as_bytes());
                    for _ in 0..f.dims {
                        s.push_str("[]");
                    }
                    s.push_str(";\n");
                }
                s.push_str("};;\n\n");
                self.out.write_all(s.as_bytes())?;
            }
            Encoding::Binary => {
                let mut body = Vec::new();
                put_str(&mut body, d.name.as_bytes());
                put_int(&mut body, d.attrs.len() as i64);
                for (k, v) in &d.attrs {
                    put_str(&mut body, k.as_bytes());
                    put_str(&mut body, v.as_bytes());
                }
                put_int(&mut body, d.fields.len() as i64);
                for f in &d.fields {
                    put_str(&mut body, f.name.as_bytes());
                    put_int(&mut body, f.attrs.len() as i64);
                    for (k, v) in &f.attrs {
                        put_str(&mut body, k.as_bytes());
                        put_str(&mut body, v.as_bytes());
                    }
                    put_int(&mut body, i64::from(f.base.code()));
                    put_int(&mut body, i64::from(f.dims));
                }
                self.packet(2, d.tag, &body)?;
            }
        }
        self.events += 1;
        self.descriptors.push(d);
        Ok(self.descriptors.len() - 1)
    }

    fn packet(&mut self, kind: i32, tag: i32, body: &[u8]) -> io::Result<()> {
        let len = i32::try_from(12 + body.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "an SDDF packet would exceed 2 GiB",
            )
        })?;
        let mut h = [0u8; 12];
        h[..4].copy_from_slice(&len.to_le_bytes());
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[8..].copy_from_slice(&tag.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(body)
    }

    /// Writes a data record of descriptor `d`: `values` first, then `payload`'s fields as
    /// `schema` lays them out.
    fn data(
        &mut self,
        d: usize,
        values: &[Val<'_>],
        fields: Option<(&Schema, &[u8])>,
    ) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let ascii = self.enc == Encoding::Ascii;
        if ascii {
            let mut name = String::new();
            quote(&mut name, self.descriptors[d].name.as_bytes());
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b" { ");
        }
        let mut first = true;
        for v in values {
            if ascii && !first {
                buf.extend_from_slice(b", ");
            }
            first = false;
            put_val(&mut buf, *v, ascii);
        }
        if let Some((schema, payload)) = fields {
            let mut at = 0usize;
            for f in &schema.fields {
                let len = super::timeline::field_len(f.ty, payload, at);
                let Some(bytes) = len.and_then(|l| payload.get(at..at.saturating_add(l))) else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "a record of `{}` is shorter than its schema says; the trace is damaged",
                            schema.name
                        ),
                    ));
                };
                at += bytes.len();
                if ascii && !first {
                    buf.extend_from_slice(b", ");
                }
                first = false;
                match f.ty {
                    FieldType::Scalar(s) => put_val(&mut buf, scalar_val(s, bytes), ascii),
                    FieldType::Str | FieldType::Bytes => {
                        put_val(&mut buf, Val::Chars(&bytes[4..]), ascii)
                    }
                    FieldType::Array(s, n) => {
                        if ascii {
                            buf.push(b'[');
                            super::push_u64(&mut buf, u64::from(n));
                            buf.extend_from_slice(b"] { ");
                        } else {
                            put_int(&mut buf, i64::from(n));
                        }
                        for (k, c) in bytes.chunks_exact(s.size()).enumerate() {
                            if ascii && k > 0 {
                                buf.extend_from_slice(b", ");
                            }
                            put_val(&mut buf, scalar_val(s, c), ascii);
                        }
                        if ascii {
                            buf.extend_from_slice(b" }");
                        }
                    }
                    _ => {}
                }
            }
        }
        let result = if ascii {
            buf.extend_from_slice(b" };;\n");
            self.out.write_all(&buf)
        } else {
            let tag = self.descriptors[d].tag;
            self.packet(3, tag, &buf)
        };
        self.buf = buf;
        self.events += 1;
        result
    }
}

/// A scalar field's value (`b` holds exactly its size).
fn scalar_val(s: ScalarType, b: &[u8]) -> Val<'static> {
    use super::timeline::{Num, scalar};
    match (base_of(s), scalar(s, b)) {
        (Base::Float, Num::Float(x)) => Val::Float(x as f32),
        (Base::Double, Num::Float(x)) => Val::Double(x),
        (Base::Int, Num::Int(v)) => Val::Int(v),
        (_, Num::Int(v)) => Val::Long(v),
        (_, Num::Float(x)) => Val::Double(x),
    }
}

fn put_int(buf: &mut Vec<u8>, v: i64) {
    buf.extend_from_slice(&(v as i32).to_le_bytes());
}

fn put_str(buf: &mut Vec<u8>, s: &[u8]) {
    put_int(buf, s.len() as i64);
    buf.extend_from_slice(s);
}

fn put_val(buf: &mut Vec<u8>, v: Val<'_>, ascii: bool) {
    if ascii {
        match v {
            Val::Int(i) | Val::Long(i) => super::push_i64(buf, i),
            Val::Float(x) => float_text(buf, f64::from(x)),
            Val::Double(x) => float_text(buf, x),
            Val::Chars(c) => {
                // The extent counts the terminating NUL, as Pablo's writers counted it.
                buf.push(b'[');
                super::push_u64(buf, c.len() as u64 + 1);
                buf.extend_from_slice(b"] { ");
                let mut s = String::new();
                quote(&mut s, c);
                buf.extend_from_slice(s.as_bytes());
                buf.extend_from_slice(b" }");
            }
            Val::Rows(rows) => {
                let width = rows.iter().map(|r| r.len() + 1).max().unwrap_or(1);
                buf.push(b'[');
                super::push_u64(buf, rows.len() as u64);
                buf.extend_from_slice(b"][");
                super::push_u64(buf, width as u64);
                buf.extend_from_slice(b"] { ");
                for (i, r) in rows.iter().enumerate() {
                    if i > 0 {
                        buf.extend_from_slice(b", ");
                    }
                    let mut s = String::new();
                    quote(&mut s, r.as_bytes());
                    buf.extend_from_slice(s.as_bytes());
                }
                buf.extend_from_slice(b" }");
            }
        }
    } else {
        match v {
            Val::Int(i) => put_int(buf, i),
            Val::Long(i) => buf.extend_from_slice(&i.to_le_bytes()),
            Val::Float(x) => buf.extend_from_slice(&x.to_le_bytes()),
            Val::Double(x) => buf.extend_from_slice(&x.to_le_bytes()),
            Val::Chars(c) => put_str(buf, c),
            Val::Rows(rows) => {
                let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
                put_int(buf, rows.len() as i64);
                put_int(buf, width as i64);
                for r in rows {
                    buf.extend_from_slice(r.as_bytes());
                    buf.resize(buf.len() + width - r.len(), 0);
                }
            }
        }
    }
}

/// A float as the shortest text that reads back exactly (`nan`, `inf`, `-inf` as C's `strtod`
/// reads them).
fn float_text(buf: &mut Vec<u8>, x: f64) {
    if x.is_nan() {
        buf.extend_from_slice(b"nan");
    } else if x.is_infinite() {
        buf.extend_from_slice(if x > 0.0 { b"inf" } else { b"-inf" });
    } else {
        buf.extend_from_slice(ShortFloat(x).to_string().as_bytes());
    }
}

/// `s` as a quoted ASCII SDDF string: `"` and `\` escaped with a backslash, `\n`, `\r`, `\t`,
/// other control bytes and bytes that are not UTF-8 as `\xHH`.
pub(crate) fn quote(out: &mut String, s: &[u8]) {
    out.push('"');
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                    out.push_str(&format!("\\x{:02x}", c as u32));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
}

impl<W: Write> Consumer for SddfWriter<W> {
    fn begin_file(&mut self, file: &FileStart<'_>) -> io::Result<()> {
        self.start()?;
        self.types.clear();
        let h = file.header;
        // Records name their process by pid: a second input with a pid already used (two
        // files of one process, or of two hosts) gets one above Linux's largest.
        self.pid = if self.pids.contains(&h.pid) {
            (1 << 22) + file.index as u32
        } else {
            h.pid
        };
        self.pids.push(self.pid);
        self.data(
            0,
            &[
                Val::Long(i64::from(self.pid)),
                Val::Chars(h.host.as_bytes()),
                Val::Rows(&h.command_line),
                Val::Long(h.start_unix_ns as i64),
                Val::Chars(h.clock_source.as_bytes()),
                Val::Double(h.ticks_per_second),
                Val::Double(h.sensor_cost_ns),
                Val::Chars(h.policy.as_bytes()),
                Val::Chars(h.gyr_version.as_bytes()),
                Val::Int(i64::from(file.format_version)),
            ],
            None,
        )
    }

    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        let shape = (schema.name.clone(), schema.fields.clone());
        let d = match self.by_shape.get(&shape) {
            Some(&d) => d,
            None => {
                let seen = self.names.entry(schema.name.clone()).or_insert(0);
                *seen += 1;
                let name = if *seen == 1 {
                    schema.name.clone()
                } else {
                    format!("{}#{}", schema.name, seen)
                };
                let mut fields: Vec<FieldDesc> = RECORD_FIELDS
                    .iter()
                    .map(|n| plain(n, Base::Long, 0))
                    .collect();
                for f in &schema.fields {
                    let (base, dims) = sddf_type(f.ty);
                    fields.push(FieldDesc {
                        name: f.name.clone(),
                        attrs: vec![(ATTR_TYPE.into(), f.ty.to_string())],
                        base,
                        dims,
                    });
                }
                let d = self.descriptor(Descriptor {
                    tag: 0,
                    name,
                    attrs: vec![
                        (
                            "description".into(),
                            format!("records of the gyr event type {}", schema.name),
                        ),
                        (ATTR_NAME.into(), schema.name.clone()),
                        (ATTR_TYPE_ID.into(), schema.id.to_string()),
                    ],
                    fields,
                })?;
                self.by_shape.insert(shape, d);
                d
            }
        };
        self.types.insert(schema.id, (d, schema.clone()));
        Ok(())
    }

    fn thread(&mut self, t: &ThreadInfo) -> io::Result<()> {
        self.data(
            1,
            &[
                Val::Long(i64::from(self.pid)),
                Val::Long(t.id as i64),
                Val::Chars(t.name.as_bytes()),
                Val::Long(t.os_tid as i64),
            ],
            None,
        )
    }

    fn record(&mut self, thread: u64, h: &RecordHeader, payload: &[u8]) -> io::Result<()> {
        let Some((d, schema)) = self.types.remove(&h.type_id) else {
            // No schema (it was in a lost chunk): no descriptor to write it with.
            return Ok(());
        };
        let result = self.data(
            d,
            &[
                Val::Long(i64::from(self.pid)),
                Val::Long(h.timestamp as i64),
                Val::Long(thread as i64),
                Val::Long(h.seq as i64),
                Val::Long(h.perturbation as i64),
            ],
            Some((&schema, payload)),
        );
        self.types.insert(h.type_id, (d, schema));
        result
    }

    fn end(&mut self, e: &TraceEnd) -> io::Result<()> {
        self.data(
            2,
            &[
                Val::Long(i64::from(self.pid)),
                Val::Long(e.end_ns as i64),
                Val::Long(e.records as i64),
                Val::Long(e.lost as i64),
                Val::Long(e.filtered as i64),
            ],
            None,
        )
    }

    fn end_file(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.start()?;
        self.out.flush()
    }

    fn events(&self) -> u64 {
        self.events
    }
}
