//! Event types: a [`Schema`] names an event type, gives it a numeric id and lists its typed fields.
//!
//! # Why schemas travel in the stream
//!
//! Like the SDDF record descriptors of Pablo, a schema is written into the trace before the first
//! record of its type, so a reader needs nothing but the stream to decode it: no header files, no
//! generated code, no agreement on ids made elsewhere.
//! Ids are assigned per process at run time; merging traces of several processes maps by name.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The numeric id of an event type within one process (and so within one trace file).
/// Id 0 is never used.
pub type TypeId = u32;

/// The longest fixed-size array a field may hold, in elements.
pub const MAX_ARRAY_LEN: u32 = 1 << 16;

/// The numeric element types an array field may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ScalarType {
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// A boolean, one byte, 0 or 1.
    Bool,
}

impl ScalarType {
    /// All scalar types, in the order the spec format lists them.
    pub const ALL: [ScalarType; 11] = [
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::Bool,
    ];

    /// The encoded size in bytes.
    pub const fn size(self) -> usize {
        match self {
            ScalarType::I8 | ScalarType::U8 | ScalarType::Bool => 1,
            ScalarType::I16 | ScalarType::U16 => 2,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 4,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 8,
        }
    }

    /// The name used in spec files and displays (`u32`, `f64`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ScalarType::I8 => "i8",
            ScalarType::I16 => "i16",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::U8 => "u8",
            ScalarType::U16 => "u16",
            ScalarType::U32 => "u32",
            ScalarType::U64 => "u64",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::Bool => "bool",
        }
    }

    /// Parses a name such as `u32` (as written by [`ScalarType::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The type of one field of an event: a number (or boolean), a string, bytes, or a fixed-size
/// array of numbers. The scalar types are [`ScalarType`]'s, named here too (`FieldType::F64`)
/// so that a field's type reads as it is written in a spec file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "FieldTypeV1", into = "FieldTypeV1")]
#[non_exhaustive]
pub enum FieldType {
    /// One number or boolean.
    Scalar(ScalarType),
    /// A UTF-8 string: a `u32` byte length, then the bytes.
    Str,
    /// Raw bytes: a `u32` length, then the bytes.
    Bytes,
    /// A fixed-size array of numbers: `len` elements, no length prefix.
    Array(ScalarType, u32),
}

impl FieldType {
    /// Signed 8-bit integer.
    pub const I8: Self = Self::Scalar(ScalarType::I8);
    /// Signed 16-bit integer.
    pub const I16: Self = Self::Scalar(ScalarType::I16);
    /// Signed 32-bit integer.
    pub const I32: Self = Self::Scalar(ScalarType::I32);
    /// Signed 64-bit integer.
    pub const I64: Self = Self::Scalar(ScalarType::I64);
    /// Unsigned 8-bit integer.
    pub const U8: Self = Self::Scalar(ScalarType::U8);
    /// Unsigned 16-bit integer.
    pub const U16: Self = Self::Scalar(ScalarType::U16);
    /// Unsigned 32-bit integer.
    pub const U32: Self = Self::Scalar(ScalarType::U32);
    /// Unsigned 64-bit integer.
    pub const U64: Self = Self::Scalar(ScalarType::U64);
    /// 32-bit IEEE float.
    pub const F32: Self = Self::Scalar(ScalarType::F32);
    /// 64-bit IEEE float.
    pub const F64: Self = Self::Scalar(ScalarType::F64);
    /// A boolean, one byte, 0 or 1 (named like the others' scalar type).
    #[allow(non_upper_case_globals)]
    pub const Bool: Self = Self::Scalar(ScalarType::Bool);

    /// The scalar type this field holds, if it is a scalar.
    pub const fn scalar(self) -> Option<ScalarType> {
        match self {
            FieldType::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The encoded size in bytes, or `None` for variable-size fields (strings, bytes).
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            FieldType::Str | FieldType::Bytes => None,
            FieldType::Array(s, n) => Some(s.size() * n as usize),
            FieldType::Scalar(s) => Some(s.size()),
        }
    }

    /// Whether the field holds a number (or an array of numbers) that a chart can plot.
    pub const fn is_numeric(self) -> bool {
        !matches!(self, FieldType::Str | FieldType::Bytes | FieldType::Bool)
    }

    /// Parses a type as written in spec files: `u32`, `f64`, `bool`, `string`, `bytes`,
    /// `[f64; 8]`.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        match t {
            "string" | "str" => return Some(FieldType::Str),
            "bytes" => return Some(FieldType::Bytes),
            _ => {}
        }
        if let Some(s) = ScalarType::from_name(t) {
            return Some(FieldType::Scalar(s));
        }
        let inner = t.strip_prefix('[')?.strip_suffix(']')?;
        let (elem, len) = inner.split_once(';')?;
        let elem = ScalarType::from_name(elem.trim())?;
        let len: u32 = len.trim().parse().ok()?;
        if len == 0 || len > MAX_ARRAY_LEN {
            return None;
        }
        Some(FieldType::Array(elem, len))
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldType::Str => f.write_str("string"),
            FieldType::Bytes => f.write_str("bytes"),
            FieldType::Array(s, n) => write!(f, "[{}; {}]", s.name(), n),
            FieldType::Scalar(s) => f.write_str(s.name()),
        }
    }
}

/// A field type as trace format version 1 encodes it, and version 2 alike (postcard: the
/// variant's number, then an array's element type and length): kept apart so that
/// [`FieldType`]'s shape can change without changing the format.
#[derive(Serialize, Deserialize)]
#[serde(rename = "FieldType")]
enum FieldTypeV1 {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
    Bool,
    Str,
    Bytes,
    Array(ScalarType, u32),
}

impl From<FieldType> for FieldTypeV1 {
    fn from(t: FieldType) -> Self {
        use ScalarType as S;
        match t {
            FieldType::Str => Self::Str,
            FieldType::Bytes => Self::Bytes,
            FieldType::Array(s, n) => Self::Array(s, n),
            FieldType::Scalar(s) => match s {
                S::I8 => Self::I8,
                S::I16 => Self::I16,
                S::I32 => Self::I32,
                S::I64 => Self::I64,
                S::U8 => Self::U8,
                S::U16 => Self::U16,
                S::U32 => Self::U32,
                S::U64 => Self::U64,
                S::F32 => Self::F32,
                S::F64 => Self::F64,
                S::Bool => Self::Bool,
            },
        }
    }
}

impl From<FieldTypeV1> for FieldType {
    fn from(t: FieldTypeV1) -> Self {
        use FieldTypeV1 as V;
        let s = match t {
            V::Str => return FieldType::Str,
            V::Bytes => return FieldType::Bytes,
            V::Array(s, n) => return FieldType::Array(s, n),
            V::I8 => ScalarType::I8,
            V::I16 => ScalarType::I16,
            V::I32 => ScalarType::I32,
            V::I64 => ScalarType::I64,
            V::U8 => ScalarType::U8,
            V::U16 => ScalarType::U16,
            V::U32 => ScalarType::U32,
            V::U64 => ScalarType::U64,
            V::F32 => ScalarType::F32,
            V::F64 => ScalarType::F64,
            V::Bool => ScalarType::Bool,
        };
        FieldType::Scalar(s)
    }
}

/// One named, typed field of an event type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    /// The field's name, unique within its schema.
    pub name: String,
    /// The field's type.
    pub ty: FieldType,
}

impl Field {
    /// A field named `name` of type `ty`.
    pub fn new(name: impl Into<String>, ty: FieldType) -> Self {
        Field {
            name: name.into(),
            ty,
        }
    }
}

/// An event type: its id in this process, its name and its fields, in encoding order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schema {
    /// The id records of this type carry.
    pub id: TypeId,
    /// The event type's name, e.g. `work_load`.
    pub name: String,
    /// The fields, in the order they are encoded.
    pub fields: Vec<Field>,
}

/// Why a schema is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// The event type has an empty or malformed name.
    #[error(
        "event type name `{0}` is not valid: use letters, digits, `_`, `.` and `-`, starting with a letter"
    )]
    BadName(String),
    /// A field has an empty or malformed name.
    #[error(
        "field name `{field}` of event type `{event}` is not valid: use letters, digits and `_`"
    )]
    BadFieldName {
        /// The event type.
        event: String,
        /// The field name.
        field: String,
    },
    /// Two fields share a name.
    #[error("event type `{event}` has two fields named `{field}`: rename one")]
    DuplicateField {
        /// The event type.
        event: String,
        /// The repeated field name.
        field: String,
    },
    /// Id 0 is reserved.
    #[error("event type `{0}` has id 0, which is reserved")]
    ZeroId(String),
}

fn valid_name(name: &str, extra: &[char]) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || extra.contains(&c))
        && name.len() <= 128
}

impl Schema {
    /// A schema, validated: names well formed, field names unique, id not 0.
    pub fn new(
        id: TypeId,
        name: impl Into<String>,
        fields: Vec<Field>,
    ) -> Result<Self, SchemaError> {
        let schema = Schema {
            id,
            name: name.into(),
            fields,
        };
        schema.validate()?;
        Ok(schema)
    }

    /// Checks the rules [`Schema::new`] enforces (for schemas read from a stream).
    pub fn validate(&self) -> Result<(), SchemaError> {
        if !valid_name(&self.name, &['.', '-']) {
            return Err(SchemaError::BadName(self.name.clone()));
        }
        if self.id == 0 {
            return Err(SchemaError::ZeroId(self.name.clone()));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.fields.len());
        for f in &self.fields {
            if !valid_name(&f.name, &[]) {
                return Err(SchemaError::BadFieldName {
                    event: self.name.clone(),
                    field: f.name.clone(),
                });
            }
            if !seen.insert(f.name.as_str()) {
                return Err(SchemaError::DuplicateField {
                    event: self.name.clone(),
                    field: f.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// The payload size when every field is fixed-size, else `None`.
    pub fn fixed_size(&self) -> Option<usize> {
        self.fields.iter().map(|f| f.ty.fixed_size()).sum()
    }

    /// The index of the field named `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// Whether `other` describes the same fields (ids may differ).
    pub fn same_shape(&self, other: &Schema) -> bool {
        self.name == other.name && self.fields == other.fields
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {{", self.name)?;
        for (i, field) in self.fields.iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{}: {}", field.name, field.ty)?;
        }
        f.write_str(" }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_types_encode_as_trace_format_1_fixed_them() {
        let bytes = |t: FieldType| postcard::to_allocvec(&t).unwrap();
        for (i, s) in ScalarType::ALL.into_iter().enumerate() {
            assert_eq!(bytes(FieldType::Scalar(s)), [i as u8], "{s:?}");
        }
        assert_eq!(bytes(FieldType::Bool), [10]);
        assert_eq!(bytes(FieldType::Str), [11]);
        assert_eq!(bytes(FieldType::Bytes), [12]);
        assert_eq!(
            bytes(FieldType::Array(ScalarType::F64, 300)),
            [13, 9, 0xac, 0x02]
        );
        for t in [
            FieldType::U16,
            FieldType::Str,
            FieldType::Array(ScalarType::I8, 2),
        ] {
            assert_eq!(postcard::from_bytes::<FieldType>(&bytes(t)).unwrap(), t);
        }
        assert!(postcard::from_bytes::<FieldType>(&[14]).is_err());
    }

    #[test]
    fn parses_field_types() {
        assert_eq!(FieldType::parse("u32"), Some(FieldType::U32));
        assert_eq!(FieldType::parse("string"), Some(FieldType::Str));
        assert_eq!(
            FieldType::parse("[f64; 8]"),
            Some(FieldType::Array(ScalarType::F64, 8))
        );
        assert_eq!(FieldType::parse("[f64;0]"), None);
        assert_eq!(FieldType::parse("[string; 2]"), None);
        assert_eq!(FieldType::parse("float"), None);
        for t in ["i8", "u64", "bool", "bytes", "[u8; 3]"] {
            assert_eq!(FieldType::parse(t).unwrap().to_string(), t);
        }
    }

    #[test]
    fn rejects_bad_schemas() {
        let f = |n: &str| Field::new(n, FieldType::U8);
        assert!(matches!(
            Schema::new(1, "", vec![]),
            Err(SchemaError::BadName(_))
        ));
        assert!(matches!(
            Schema::new(0, "a", vec![]),
            Err(SchemaError::ZeroId(_))
        ));
        assert!(matches!(
            Schema::new(1, "a", vec![f("x"), f("x")]),
            Err(SchemaError::DuplicateField { .. })
        ));
        assert!(matches!(
            Schema::new(1, "a", vec![f("x y")]),
            Err(SchemaError::BadFieldName { .. })
        ));
        assert_eq!(
            Schema::new(1, "gyr.lost", vec![f("a"), f("b")])
                .unwrap()
                .fixed_size(),
            Some(2)
        );
    }
}
