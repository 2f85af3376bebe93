//! Conversions between the wire's `Value` and gyr-core's `Value`.

use crate::v1;
use gyr_core::Value;

impl From<&Value> for v1::Value {
    fn from(v: &Value) -> Self {
        use v1::value::Kind;
        let kind = match v {
            Value::Int(i) => Kind::Int(*i),
            Value::UInt(u) => Kind::Uint(*u),
            Value::Float(f) => Kind::Float(*f),
            Value::Bool(b) => Kind::Bool(*b),
            Value::Str(s) => Kind::Str(s.clone()),
            Value::Bytes(b) => Kind::Bytes(b.clone()),
            Value::Array(items) => Kind::List(v1::ValueList {
                items: items.iter().map(v1::Value::from).collect(),
            }),
        };
        v1::Value { kind: Some(kind) }
    }
}

impl From<Value> for v1::Value {
    fn from(v: Value) -> Self {
        v1::Value::from(&v)
    }
}

/// A wire value as the server sees it: typed, or text to parse as the target's type.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A typed value.
    Value(Value),
    /// Text typed by a user.
    Text(String),
}

impl v1::Value {
    /// Text for a user typing a value, parsed by the server as the target's type.
    pub fn text(s: impl Into<String>) -> Self {
        v1::Value {
            kind: Some(v1::value::Kind::Text(s.into())),
        }
    }

    /// The value, or `None` when no kind is set (a malformed request).
    pub fn incoming(&self) -> Option<Incoming> {
        use v1::value::Kind;
        Some(match self.kind.as_ref()? {
            Kind::Text(t) => Incoming::Text(t.clone()),
            _ => Incoming::Value(self.to_core()?),
        })
    }

    /// The typed value (`None` for text or an unset kind).
    pub fn to_core(&self) -> Option<Value> {
        use v1::value::Kind;
        Some(match self.kind.as_ref()? {
            Kind::Int(i) => Value::Int(*i),
            Kind::Uint(u) => Value::UInt(*u),
            Kind::Float(f) => Value::Float(*f),
            Kind::Bool(b) => Value::Bool(*b),
            Kind::Str(s) => Value::Str(s.clone()),
            Kind::Bytes(b) => Value::Bytes(b.clone()),
            Kind::List(l) => Value::Array(
                l.items
                    .iter()
                    .map(|x| x.to_core())
                    .collect::<Option<Vec<_>>>()?,
            ),
            Kind::Text(_) => return None,
        })
    }
}

impl std::fmt::Display for v1::Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.to_core(), &self.kind) {
            (Some(v), _) => write!(f, "{v}"),
            (None, Some(v1::value::Kind::Text(t))) => f.write_str(t),
            _ => f.write_str("(none)"),
        }
    }
}

impl v1::AttrType {
    /// The type as users write it: `int`, `float`, `[float]`, ...
    pub fn user_name(code: i32) -> &'static str {
        match v1::AttrType::try_from(code).unwrap_or(v1::AttrType::Unspecified) {
            v1::AttrType::Int => "int",
            v1::AttrType::Uint => "uint",
            v1::AttrType::Float => "float",
            v1::AttrType::Bool => "bool",
            v1::AttrType::Str => "string",
            v1::AttrType::IntList => "[int]",
            v1::AttrType::UintList => "[uint]",
            v1::AttrType::FloatList => "[float]",
            v1::AttrType::BoolList => "[bool]",
            v1::AttrType::Unspecified => "?",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_values() {
        for v in [
            Value::Int(-3),
            Value::UInt(7),
            Value::Float(0.5),
            Value::Bool(true),
            Value::Str("x".into()),
            Value::Array(vec![Value::Float(1.0), Value::Int(2)]),
        ] {
            assert_eq!(v1::Value::from(&v).to_core(), Some(v));
        }
        assert_eq!(
            v1::Value::text("0.1").incoming(),
            Some(Incoming::Text("0.1".into()))
        );
        assert_eq!(v1::Value { kind: None }.incoming(), None);
    }
}
