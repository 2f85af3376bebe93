//! One event's (or span's) field values, gathered by a [`Visit`]or without allocating, and
//! their encoding in gyr's payload layout.
//!
//! # Types
//!
//! `tracing` says a value's type only when it is recorded, so the type of each field is read
//! from the value: `i64`, `u64`, `f64` and `bool` stay themselves; strings, errors, `Debug`
//! values (including the `message`), and 128-bit integers become strings. A field that was not
//! recorded (`tracing::field::Empty`) is absent. The types of the fields together make an
//! event's [`Signature`], which picks its gyr schema.
//!
//! # Text
//!
//! The text of one event's string fields is kept on the stack, at most [`MAX_TEXT`] bytes in
//! all; what goes beyond is cut at a character boundary.

use std::fmt::{self, Write as _};
use tracing_core::field::{Field, Visit};

/// The most fields a call site can have that gyr records; `tracing`'s macros accept no more
/// than 32 either. Further fields are left out.
pub(crate) const MAX_FIELDS: usize = 32;

/// Bytes of text (strings and `Debug` values) kept per event: the rest is cut off. A larger
/// value keeps longer messages whole and makes every event's stack frame larger.
pub const MAX_TEXT: usize = 512;

/// One field's value: numbers in place, text as a range of the text buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) enum Val {
    #[default]
    Absent,
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Text {
        start: u32,
        len: u32,
    },
}

impl Val {
    /// The 3-bit code of the value's type in a [`Signature`].
    fn code(&self) -> u128 {
        match self {
            Val::Absent => 0,
            Val::I64(_) => 1,
            Val::U64(_) => 2,
            Val::F64(_) => 3,
            Val::Bool(_) => 4,
            Val::Text { .. } => 5,
        }
    }

    /// The gyr field type of a value's type code, `None` when absent.
    pub(crate) fn field_type(code: u128) -> Option<gyr::gyr_core::FieldType> {
        use gyr::gyr_core::FieldType as F;
        Some(match code {
            1 => F::I64,
            2 => F::U64,
            3 => F::F64,
            4 => F::Bool,
            5 => F::Str,
            _ => return None,
        })
    }

    fn encoded_len(&self) -> usize {
        match self {
            Val::Absent => 0,
            Val::I64(_) | Val::U64(_) | Val::F64(_) => 8,
            Val::Bool(_) => 1,
            Val::Text { len, .. } => 4 + *len as usize,
        }
    }
}

/// The types of an event's fields, 3 bits per field index: which schema of its call site
/// the event is recorded under.
pub(crate) type Signature = u128;

/// The type code of field `i` in `sig`.
pub(crate) fn code_at(sig: Signature, i: usize) -> u128 {
    (sig >> (3 * i)) & 7
}

/// The signature of `vals`.
pub(crate) fn signature(vals: &[Val]) -> Signature {
    vals.iter()
        .enumerate()
        .fold(0, |sig, (i, v)| sig | (v.code() << (3 * i)))
}

/// Payload bytes of `vals` in gyr's layout.
pub(crate) fn encoded_len(vals: &[Val]) -> usize {
    vals.iter().map(Val::encoded_len).sum()
}

/// Writes `vals` (their text in `text`) into `out`, which is exactly [`encoded_len`] long, in
/// the layout of [`gyr::gyr_core::value`]: present fields in order, little-endian.
pub(crate) fn encode(vals: &[Val], text: &[u8], out: &mut [u8]) {
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    for v in vals {
        match *v {
            Val::Absent => {}
            Val::I64(x) => put(&x.to_le_bytes()),
            Val::U64(x) => put(&x.to_le_bytes()),
            Val::F64(x) => put(&x.to_le_bytes()),
            Val::Bool(x) => put(&[x as u8]),
            Val::Text { start, len } => {
                put(&len.to_le_bytes());
                put(&text[start as usize..(start + len) as usize]);
            }
        }
    }
}

/// The values of one event, gathered on the stack.
#[derive(Debug)]
pub(crate) struct Capture {
    vals: [Val; MAX_FIELDS],
    n: usize,
    text: [u8; MAX_TEXT],
    text_len: usize,
}

impl Capture {
    /// An empty capture for a call site with `n` fields.
    #[inline]
    pub(crate) fn new(n: usize) -> Self {
        Capture {
            vals: [Val::Absent; MAX_FIELDS],
            n: n.min(MAX_FIELDS),
            text: [0; MAX_TEXT],
            text_len: 0,
        }
    }

    /// The values by field index.
    pub(crate) fn vals(&self) -> &[Val] {
        &self.vals[..self.n]
    }

    /// The text the values' ranges point into.
    pub(crate) fn text(&self) -> &[u8] {
        &self.text[..self.text_len]
    }

    fn set(&mut self, field: &Field, v: Val) {
        if let Some(slot) = self.vals[..self.n].get_mut(field.index()) {
            *slot = v;
        }
    }

    /// Appends as much of `s` as fits, cut at a character boundary; returns its range.
    fn push_str(&mut self, s: &str) -> (u32, u32) {
        let start = self.text_len;
        let room = MAX_TEXT - start;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.text[start..start + take].copy_from_slice(&s.as_bytes()[..take]);
        self.text_len += take;
        (start as u32, take as u32)
    }
}

/// Writes into a capture's text buffer, cutting what does not fit.
struct TextWriter<'a>(&'a mut Capture);

impl fmt::Write for TextWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.push_str(s);
        Ok(())
    }
}

impl Visit for Capture {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, Val::F64(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, Val::I64(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, Val::U64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, Val::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.index() >= self.n {
            return;
        }
        let (start, len) = self.push_str(value);
        self.set(field, Val::Text { start, len });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.index() >= self.n {
            return;
        }
        let start = self.text_len;
        let _ = write!(TextWriter(self), "{value:?}");
        let len = self.text_len - start;
        self.set(
            field,
            Val::Text {
                start: start as u32,
                len: len as u32,
            },
        );
    }
}

/// Payload bytes of a span's fields kept inline; longer payloads take an allocation of their
/// own.
const INLINE: usize = 64;

/// A span's fields, kept from `new_span` on (in the layer's table of open spans, or in the
/// span's registry extensions) and updated by `record`: encoded once in gyr's payload layout,
/// so that each enter copies them into the ring as they are, and held inline, so that a span
/// with short fields allocates nothing where owned values and text would allocate twice.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanFields {
    /// The types of the fields: which schema of the span's call site they are recorded under.
    pub(crate) sig: Signature,
    enc: Encoded,
}

#[derive(Debug, Clone, PartialEq)]
enum Encoded {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl SpanFields {
    /// The values of `cap`, encoded.
    pub(crate) fn from_capture(cap: &Capture) -> Self {
        let vals = cap.vals();
        let len = encoded_len(vals);
        let enc = if len <= INLINE {
            let mut buf = [0; INLINE];
            encode(vals, cap.text(), &mut buf[..len]);
            Encoded::Inline {
                len: len as u8,
                buf,
            }
        } else {
            let mut buf = vec![0; len].into_boxed_slice();
            encode(vals, cap.text(), &mut buf);
            Encoded::Heap(buf)
        };
        SpanFields {
            sig: signature(vals),
            enc,
        }
    }

    /// The encoded payload.
    #[inline]
    pub(crate) fn payload(&self) -> &[u8] {
        match &self.enc {
            Encoded::Inline { len, buf } => &buf[..*len as usize],
            Encoded::Heap(buf) => buf,
        }
    }

    /// Takes the values `cap` recorded (later `record` calls win), keeping the others, of a
    /// span with `n` fields; the text stays within [`MAX_TEXT`].
    pub(crate) fn update(&mut self, cap: &Capture, n: usize) {
        let old = Capture::decode(self.sig, self.payload(), n);
        let mut merged = Capture::new(n);
        for i in 0..merged.n {
            let (v, src) = match cap.vals().get(i) {
                Some(c) if *c != Val::Absent => (*c, cap),
                _ => (old.vals[i], &old),
            };
            merged.vals[i] = match v {
                Val::Text { start, len } => {
                    let s = src.text_at(start, len);
                    let (start, len) = merged.push_str(s);
                    Val::Text { start, len }
                }
                other => other,
            };
        }
        *self = SpanFields::from_capture(&merged);
    }
}

/// A new span's values, visited: numbers, booleans and strings arriving in field order and
/// fitting in [`INLINE`] bytes are encoded as they come, so that a span's creation neither
/// zeroes nor encodes a [`Capture`] (half a kilobyte of values, as much of text); the first
/// value that does not (a `Debug` value, a field out of order, too many bytes) moves what was
/// encoded into a `Capture`, which gathers the rest as an event's.
#[derive(Debug)]
// Made once per span, on the stack, the capture moved in only when the direct way fails: a box
// would allocate for every span with a `Debug` field.
#[allow(clippy::large_enum_variant)]
pub(crate) enum SpanVisit {
    Direct {
        /// The call site's fields, at most [`MAX_FIELDS`].
        n: usize,
        /// The lowest field index a value encoded in place may have.
        next: usize,
        sig: Signature,
        len: usize,
        buf: [u8; INLINE],
    },
    Gathered(Capture),
}

impl SpanVisit {
    /// A visit of a call site with `n` fields.
    #[inline]
    pub(crate) fn new(n: usize) -> Self {
        SpanVisit::Direct {
            n: n.min(MAX_FIELDS),
            next: 0,
            sig: 0,
            len: 0,
            buf: [0; INLINE],
        }
    }

    /// The span's fields.
    #[inline]
    pub(crate) fn finish(self) -> SpanFields {
        match self {
            SpanVisit::Direct { sig, len, buf, .. } => SpanFields {
                sig,
                enc: Encoded::Inline {
                    len: len as u8,
                    buf,
                },
            },
            SpanVisit::Gathered(cap) => SpanFields::from_capture(&cap),
        }
    }

    /// Encodes field `i`'s value (type `code`) in place, its bytes `head` then `tail`; `false`
    /// when it must be gathered instead. A field beyond the call site's is left out, as a
    /// `Capture` leaves it.
    #[inline]
    fn put(&mut self, i: usize, code: u128, head: &[u8], tail: &[u8]) -> bool {
        let SpanVisit::Direct {
            n,
            next,
            sig,
            len,
            buf,
        } = self
        else {
            return false;
        };
        if i >= *n {
            return true;
        }
        let end = *len + head.len() + tail.len();
        if i < *next || end > INLINE {
            return false;
        }
        let mid = *len + head.len();
        buf[*len..mid].copy_from_slice(head);
        buf[mid..end].copy_from_slice(tail);
        *len = end;
        *sig |= code << (3 * i);
        *next = i + 1;
        true
    }

    /// The capture gathering the values, made from those encoded so far on first use.
    #[cold]
    fn gathered(&mut self) -> &mut Capture {
        if let SpanVisit::Direct {
            n, sig, len, buf, ..
        } = self
        {
            *self = SpanVisit::Gathered(Capture::decode(*sig, &buf[..*len], *n));
        }
        match self {
            SpanVisit::Gathered(cap) => cap,
            SpanVisit::Direct { .. } => unreachable!("made a capture above"),
        }
    }
}

impl Visit for SpanVisit {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if !self.put(field.index(), 3, &value.to_le_bytes(), &[]) {
            self.gathered().record_f64(field, value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if !self.put(field.index(), 1, &value.to_le_bytes(), &[]) {
            self.gathered().record_i64(field, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if !self.put(field.index(), 2, &value.to_le_bytes(), &[]) {
            self.gathered().record_u64(field, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if !self.put(field.index(), 4, &[value as u8], &[]) {
            self.gathered().record_bool(field, value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        // Longer than `INLINE`, the string does not fit: its length is never cut to a `u32`.
        let len = (value.len() as u32).to_le_bytes();
        if value.len() > INLINE || !self.put(field.index(), 5, &len, value.as_bytes()) {
            self.gathered().record_str(field, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.gathered().record_debug(field, value);
    }
}

impl Capture {
    /// The text of a range of the text buffer (empty if it is not whole text, which the
    /// buffer's writers never leave).
    fn text_at(&self, start: u32, len: u32) -> &str {
        let range = start as usize..(start as usize).saturating_add(len as usize);
        self.text()
            .get(range)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// The values of `payload`, encoded by [`encode`] for the signature `sig`, of a call site
    /// with `n` fields. A payload shorter than `sig` says leaves the rest absent.
    fn decode(sig: Signature, payload: &[u8], n: usize) -> Self {
        let mut cap = Capture::new(n);
        let mut rest = payload;
        let mut take = |k: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(k)?;
            rest = tail;
            Some(head)
        };
        let word = |b: &[u8]| -> [u8; 8] { b.try_into().unwrap_or([0; 8]) };
        for i in 0..cap.n {
            let v = match code_at(sig, i) {
                1 => take(8).map(|b| Val::I64(i64::from_le_bytes(word(b)))),
                2 => take(8).map(|b| Val::U64(u64::from_le_bytes(word(b)))),
                3 => take(8).map(|b| Val::F64(f64::from_le_bytes(word(b)))),
                4 => take(1).map(|b| Val::Bool(b[0] != 0)),
                5 => take(4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as usize)
                    .and_then(&mut take)
                    .map(|b| std::str::from_utf8(b).unwrap_or(""))
                    .map(|s| {
                        let (start, len) = cap.push_str(s);
                        Val::Text { start, len }
                    }),
                _ => continue,
            };
            match v {
                Some(v) => cap.vals[i] = v,
                None => break,
            }
        }
        cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        let mut cap = Capture::new(2);
        let long = "é".repeat(MAX_TEXT); // 2 bytes each
        let (start, len) = cap.push_str("ab");
        assert_eq!((start, len), (0, 2));
        let (start, len) = cap.push_str(&long);
        assert_eq!(start, 2);
        assert_eq!(len as usize, MAX_TEXT - 2);
        assert!(std::str::from_utf8(cap.text()).is_ok());
        // Full: nothing more fits.
        assert_eq!(cap.push_str("x").1, 0);
    }

    #[test]
    fn encoding_follows_gyr_payload_layout() {
        use gyr::gyr_core::{Field as F, FieldType as T, Schema, Value, value::decode};
        let mut cap = Capture::new(5);
        cap.vals[0] = Val::I64(-3);
        cap.vals[1] = Val::U64(7);
        let (start, len) = cap.push_str("héllo");
        cap.vals[2] = Val::Text { start, len };
        // Field 3 absent.
        cap.vals[4] = Val::Bool(true);
        let sig = signature(cap.vals());
        assert_eq!(code_at(sig, 3), 0);
        let mut out = vec![0; encoded_len(cap.vals())];
        encode(cap.vals(), cap.text(), &mut out);
        let schema = Schema::new(
            9,
            "t",
            vec![
                F::new("a", T::I64),
                F::new("b", T::U64),
                F::new("c", T::Str),
                F::new("e", T::Bool),
            ],
        )
        .unwrap();
        assert_eq!(
            decode(&schema, &out).unwrap(),
            vec![
                Value::Int(-3),
                Value::UInt(7),
                Value::Str("héllo".into()),
                Value::Bool(true)
            ]
        );
    }

    /// The text of field `i` of `f`'s fields, decoded.
    fn text_of(f: &SpanFields, n: usize, i: usize) -> String {
        let cap = Capture::decode(f.sig, f.payload(), n);
        match cap.vals[i] {
            Val::Text { start, len } => cap.text_at(start, len).to_owned(),
            other => panic!("not text: {other:?}"),
        }
    }

    #[test]
    fn span_fields_decode_to_what_was_encoded() {
        let mut cap = Capture::new(6);
        cap.vals[0] = Val::I64(-3);
        let (start, len) = cap.push_str("héllo");
        cap.vals[1] = Val::Text { start, len };
        cap.vals[2] = Val::F64(0.25);
        // Field 3 absent.
        cap.vals[4] = Val::Bool(true);
        cap.vals[5] = Val::U64(u64::MAX);
        let f = SpanFields::from_capture(&cap);
        assert!(matches!(f.enc, Encoded::Inline { .. }));
        let back = Capture::decode(f.sig, f.payload(), 6);
        assert_eq!(back.vals(), cap.vals());
        assert_eq!(back.text(), cap.text());
        assert_eq!(SpanFields::from_capture(&back), f);
    }

    #[test]
    fn long_span_fields_are_kept_whole() {
        let mut cap = Capture::new(2);
        let (start, len) = cap.push_str(&"x".repeat(300));
        cap.vals[0] = Val::Text { start, len };
        cap.vals[1] = Val::U64(9);
        let f = SpanFields::from_capture(&cap);
        assert!(matches!(f.enc, Encoded::Heap(_)));
        assert_eq!(f.payload().len(), 4 + 300 + 8);
        assert_eq!(text_of(&f, 2, 0), "x".repeat(300));
    }

    #[test]
    fn a_short_payload_decodes_to_absent_fields() {
        let mut cap = Capture::new(2);
        cap.vals[0] = Val::U64(1);
        cap.vals[1] = Val::U64(2);
        let f = SpanFields::from_capture(&cap);
        let back = Capture::decode(f.sig, &f.payload()[..12], 2);
        assert_eq!(back.vals(), &[Val::U64(1), Val::Absent]);
    }

    mod site {
        use tracing_core::callsite::{Callsite, Identifier};
        use tracing_core::field::FieldSet;
        use tracing_core::{Kind, Level, Metadata};

        pub(super) struct Cs;
        impl Callsite for Cs {
            fn set_interest(&self, _: tracing_core::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                &META
            }
        }
        static CS: Cs = Cs;
        pub(super) static META: Metadata<'static> = Metadata::new(
            "s",
            "t",
            Level::INFO,
            None,
            None,
            None,
            FieldSet::new(
                &["a", "b", "c", "d", "e", "f", "g", "h", "i"],
                Identifier(&CS),
            ),
            Kind::SPAN,
        );
    }

    /// `values` recorded by a span visit and by a capture; whether the visit stayed direct.
    fn visit_both(values: &tracing_core::field::ValueSet<'_>) -> (SpanFields, SpanFields, bool) {
        let n = site::META.fields().len();
        let mut visit = SpanVisit::new(n);
        values.record(&mut visit);
        let direct = matches!(visit, SpanVisit::Direct { .. });
        let mut cap = Capture::new(n);
        values.record(&mut cap);
        (visit.finish(), SpanFields::from_capture(&cap), direct)
    }

    #[test]
    fn a_span_visit_encodes_what_a_capture_gathers() {
        use tracing_core::field::{Value as V, debug};
        let fs = site::META.fields();
        let f: Vec<_> = fs.iter().collect();
        let long = "y".repeat(INLINE + 1);
        let dbg = debug(vec![1, 2]);
        // In order and short: encoded in place.
        let vals: [(&Field, Option<&dyn V>); 5] = [
            (&f[0], Some(&7_u64)),
            (&f[1], Some(&-2_i64)),
            (&f[2], Some(&0.5_f64)),
            (&f[3], Some(&true)),
            (&f[4], Some(&"héllo")),
        ];
        let (visited, gathered, direct) = visit_both(&fs.value_set(&vals));
        assert!(direct);
        assert_eq!(visited, gathered);
        // A `Debug` value, a field out of order, a long string, too many bytes: gathered,
        // with the values encoded before kept.
        let vals: [(&Field, Option<&dyn V>); 3] = [
            (&f[0], Some(&7_u64)),
            (&f[1], Some(&"ab")),
            (&f[2], Some(&dbg)),
        ];
        let (visited, gathered, direct) = visit_both(&fs.value_set(&vals));
        assert!(!direct);
        assert_eq!(visited, gathered);
        let vals: [(&Field, Option<&dyn V>); 2] = [(&f[3], Some(&1_u64)), (&f[1], Some(&2_u64))];
        let (visited, gathered, direct) = visit_both(&fs.value_set(&vals));
        assert!(!direct);
        assert_eq!(visited, gathered);
        let vals: [(&Field, Option<&dyn V>); 2] =
            [(&f[0], Some(&1_u64)), (&f[1], Some(&long.as_str()))];
        let (visited, gathered, direct) = visit_both(&fs.value_set(&vals));
        assert!(!direct);
        assert_eq!(visited, gathered);
        assert!(matches!(visited.enc, Encoded::Heap(_)));
        let nine: Vec<u64> = (0..9).collect();
        let vals: [(&Field, Option<&dyn V>); 9] =
            std::array::from_fn(|i| (&f[i], Some(&nine[i] as &dyn V)));
        let (visited, gathered, direct) = visit_both(&fs.value_set(&vals));
        assert!(!direct);
        assert_eq!(visited, gathered);
    }

    #[test]
    fn span_fields_update_keeps_unrecorded_fields() {
        let mut first = Capture::new(3);
        let (s, l) = first.push_str("one");
        first.vals[0] = Val::Text { start: s, len: l };
        first.vals[1] = Val::U64(1);
        let mut span = SpanFields::from_capture(&first);
        let mut later = Capture::new(3);
        let (s, l) = later.push_str("two!");
        later.vals[2] = Val::Text { start: s, len: l };
        later.vals[1] = Val::U64(2);
        span.update(&later, 3);
        let cap = Capture::decode(span.sig, span.payload(), 3);
        assert_eq!(cap.vals[1], Val::U64(2));
        assert_eq!(text_of(&span, 3, 0), "one");
        assert_eq!(text_of(&span, 3, 2), "two!");
        assert_eq!(cap.text().len(), 7);
        // A later value of another type changes the signature.
        let mut third = Capture::new(3);
        third.vals[1] = Val::I64(-1);
        span.update(&third, 3);
        assert_eq!(code_at(span.sig, 1), 1);
        assert_eq!(text_of(&span, 3, 2), "two!");
    }
}
