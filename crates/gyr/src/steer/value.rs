//! Attribute types and values: what a steering object exposes, and how values from outside are
//! checked and converted before they reach the application.

use gyr_core::{ShortFloat, Value};
use std::fmt;

/// The element type of a list attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScalarKind {
    /// Signed integers.
    Int,
    /// Unsigned integers.
    UInt,
    /// Floating point numbers.
    Float,
    /// Booleans.
    Bool,
}

/// The type of a steerable attribute, an actuator's argument or a function's argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttrType {
    /// A signed integer.
    Int,
    /// An unsigned integer.
    UInt,
    /// A floating point number.
    Float,
    /// A boolean.
    Bool,
    /// A string.
    Str,
    /// A vector of numbers (or booleans).
    List(ScalarKind),
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |k: &ScalarKind| match k {
            ScalarKind::Int => "int",
            ScalarKind::UInt => "uint",
            ScalarKind::Float => "float",
            ScalarKind::Bool => "bool",
        };
        match self {
            AttrType::Int => f.write_str("int"),
            AttrType::UInt => f.write_str("uint"),
            AttrType::Float => f.write_str("float"),
            AttrType::Bool => f.write_str("bool"),
            AttrType::Str => f.write_str("string"),
            AttrType::List(k) => write!(f, "[{}]", s(k)),
        }
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "a negative integer",
        Value::UInt(_) => "an integer",
        Value::Float(_) => "a number with a fraction",
        Value::Bool(_) => "a boolean",
        Value::Str(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Array(_) => "a list",
    }
}

fn convert_scalar(kind: ScalarKind, v: &Value) -> Result<Value, String> {
    match (kind, v) {
        (ScalarKind::Int, Value::Int(i)) => Ok(Value::Int(*i)),
        (ScalarKind::Int, Value::UInt(u)) => i64::try_from(*u)
            .map(Value::Int)
            .map_err(|_| format!("{u} is too large for an int")),
        (ScalarKind::Int, Value::Float(x)) if x.fract() == 0.0 && x.abs() < 9.0e15 => {
            Ok(Value::Int(*x as i64))
        }
        (ScalarKind::UInt, Value::UInt(u)) => Ok(Value::UInt(*u)),
        (ScalarKind::UInt, Value::Int(i)) => u64::try_from(*i)
            .map(Value::UInt)
            .map_err(|_| format!("{i} is negative; a uint is 0 or more")),
        (ScalarKind::UInt, Value::Float(x)) if x.fract() == 0.0 && *x >= 0.0 && *x < 9.0e15 => {
            Ok(Value::UInt(*x as u64))
        }
        (ScalarKind::Float, Value::Float(x)) => Ok(Value::Float(*x)),
        (ScalarKind::Float, Value::Int(i)) => Ok(Value::Float(*i as f64)),
        (ScalarKind::Float, Value::UInt(u)) => Ok(Value::Float(*u as f64)),
        (ScalarKind::Bool, Value::Bool(b)) => Ok(Value::Bool(*b)),
        (k, v) => Err(format!(
            "expected {}, got {} ({v})",
            match k {
                ScalarKind::Int => "an int",
                ScalarKind::UInt => "a uint",
                ScalarKind::Float => "a float",
                ScalarKind::Bool => "a bool (true or false)",
            },
            kind_name(v)
        )),
    }
}

impl AttrType {
    /// Converts `v` to this type where that loses nothing (an int to a float, a whole float to
    /// an int), or says why it cannot.
    pub fn convert(self, v: &Value) -> Result<Value, String> {
        match self {
            AttrType::Int => convert_scalar(ScalarKind::Int, v),
            AttrType::UInt => convert_scalar(ScalarKind::UInt, v),
            AttrType::Float => convert_scalar(ScalarKind::Float, v),
            AttrType::Bool => convert_scalar(ScalarKind::Bool, v),
            AttrType::Str => match v {
                Value::Str(s) => Ok(Value::Str(s.clone())),
                other => Err(format!(
                    "expected a string, got {} ({other})",
                    kind_name(other)
                )),
            },
            AttrType::List(k) => match v {
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| convert_scalar(k, x).map_err(|e| format!("element {i}: {e}")))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array),
                other => Err(format!(
                    "expected a list such as [1, 2.5], got {} ({other})",
                    kind_name(other)
                )),
            },
        }
    }

    /// Parses text typed by a user (`0.01`, `-3`, `true`, `hello`, `[1, 2, 3]`) as this type.
    pub fn parse(self, text: &str) -> Result<Value, String> {
        let t = text.trim();
        let scalar = |k: ScalarKind, t: &str| -> Result<Value, String> {
            match k {
                ScalarKind::Bool => match t {
                    "true" | "on" | "yes" | "1" => Ok(Value::Bool(true)),
                    "false" | "off" | "no" | "0" => Ok(Value::Bool(false)),
                    _ => Err(format!("`{t}` is not a bool: use true or false")),
                },
                ScalarKind::Int => t
                    .parse::<i64>()
                    .map(Value::Int)
                    .map_err(|_| format!("`{t}` is not an int")),
                ScalarKind::UInt => t.parse::<u64>().map(Value::UInt).map_err(|_| {
                    if t.starts_with('-') {
                        format!("`{t}` is negative; a uint is 0 or more")
                    } else {
                        format!("`{t}` is not a uint")
                    }
                }),
                ScalarKind::Float => match t.parse::<f64>() {
                    Ok(x) if x.is_finite() => Ok(Value::Float(x)),
                    _ => Err(format!("`{t}` is not a finite number")),
                },
            }
        };
        match self {
            AttrType::Int => scalar(ScalarKind::Int, t),
            AttrType::UInt => scalar(ScalarKind::UInt, t),
            AttrType::Float => scalar(ScalarKind::Float, t),
            AttrType::Bool => scalar(ScalarKind::Bool, t),
            AttrType::Str => Ok(Value::Str(text.to_owned())),
            AttrType::List(k) => {
                let inner = t
                    .strip_prefix('[')
                    .and_then(|s| s.strip_suffix(']'))
                    .ok_or_else(|| format!("`{t}` is not a list: write it as [1, 2, 3]"))?;
                if inner.trim().is_empty() {
                    return Ok(Value::Array(Vec::new()));
                }
                inner
                    .split(',')
                    .map(|x| scalar(k, x.trim()))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array)
            }
        }
    }
}

/// A Rust type that can be a steerable attribute.
pub trait AttrValue: Sized + Send + Sync + 'static {
    /// Its attribute type.
    const TYPE: AttrType;
    /// Its value.
    fn to_value(&self) -> Value;
    /// Builds it from a value already converted to [`Self::TYPE`].
    fn from_value(v: &Value) -> Result<Self, String>;
}

macro_rules! int_attr {
    ($($t:ty => $variant:ident / $kind:ident),*) => {$(
        impl AttrValue for $t {
            const TYPE: AttrType = AttrType::$kind;
            fn to_value(&self) -> Value { Value::$variant(*self as _) }
            fn from_value(v: &Value) -> Result<Self, String> {
                match v {
                    Value::Int(i) => <$t>::try_from(*i).map_err(|_| format!("{i} does not fit a {}", stringify!($t))),
                    Value::UInt(u) => <$t>::try_from(*u).map_err(|_| format!("{u} does not fit a {}", stringify!($t))),
                    other => Err(format!("expected an integer, got {other}")),
                }
            }
        }
    )*};
}
int_attr!(i8 => Int / Int, i16 => Int / Int, i32 => Int / Int, i64 => Int / Int, isize => Int / Int,
          u8 => UInt / UInt, u16 => UInt / UInt, u32 => UInt / UInt, u64 => UInt / UInt, usize => UInt / UInt);

impl AttrValue for f64 {
    const TYPE: AttrType = AttrType::Float;
    fn to_value(&self) -> Value {
        Value::Float(*self)
    }
    fn from_value(v: &Value) -> Result<Self, String> {
        v.as_f64()
            .ok_or_else(|| format!("expected a number, got {v}"))
    }
}

impl AttrValue for f32 {
    const TYPE: AttrType = AttrType::Float;
    fn to_value(&self) -> Value {
        Value::Float(*self as f64)
    }
    fn from_value(v: &Value) -> Result<Self, String> {
        v.as_f64()
            .map(|x| x as f32)
            .ok_or_else(|| format!("expected a number, got {v}"))
    }
}

impl AttrValue for bool {
    const TYPE: AttrType = AttrType::Bool;
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Bool(b) => Ok(*b),
            other => Err(format!("expected a bool, got {other}")),
        }
    }
}

impl AttrValue for String {
    const TYPE: AttrType = AttrType::Str;
    fn to_value(&self) -> Value {
        Value::Str(self.clone())
    }
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Str(s) => Ok(s.clone()),
            other => Err(format!("expected a string, got {other}")),
        }
    }
}

macro_rules! list_attr {
    ($($t:ty => $kind:ident),*) => {$(
        impl AttrValue for Vec<$t> {
            const TYPE: AttrType = AttrType::List(ScalarKind::$kind);
            fn to_value(&self) -> Value { Value::Array(self.iter().map(|x| x.to_value()).collect()) }
            fn from_value(v: &Value) -> Result<Self, String> {
                match v {
                    Value::Array(items) => items.iter().map(<$t>::from_value).collect(),
                    other => Err(format!("expected a list, got {other}")),
                }
            }
        }
    )*};
}
list_attr!(f64 => Float, f32 => Float, i64 => Int, i32 => Int, u64 => UInt, u32 => UInt, usize => UInt, bool => Bool);

/// What a steering client knows about one attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct AttrInfo {
    /// Its name within the object (dotted for nested structs: `params.dt`).
    pub name: String,
    /// Its type.
    pub ty: AttrType,
    /// Its unit (`s`, `K`), if any.
    pub unit: Option<String>,
    /// The smallest value accepted (each element, for lists).
    pub min: Option<f64>,
    /// The largest value accepted (each element, for lists).
    pub max: Option<f64>,
    /// Whether probes may only read it.
    pub read_only: bool,
    /// What it means.
    pub description: Option<String>,
}

impl AttrInfo {
    /// A writable attribute with no unit, range or description.
    pub fn new(name: impl Into<String>, ty: AttrType) -> Self {
        AttrInfo {
            name: name.into(),
            ty,
            unit: None,
            min: None,
            max: None,
            read_only: false,
            description: None,
        }
    }

    /// Checks a converted value against the range.
    pub fn check_range(&self, v: &Value) -> Result<(), String> {
        let check = |x: f64| -> Result<(), String> {
            if let Some(min) = self.min
                && x < min
            {
                return Err(format!(
                    "{} is below the minimum {}{}",
                    ShortFloat(x),
                    ShortFloat(min),
                    self.unit_suffix()
                ));
            }
            if let Some(max) = self.max
                && x > max
            {
                return Err(format!(
                    "{} is above the maximum {}{}",
                    ShortFloat(x),
                    ShortFloat(max),
                    self.unit_suffix()
                ));
            }
            Ok(())
        };
        match v {
            Value::Array(items) => items.iter().filter_map(Value::as_f64).try_for_each(check),
            Value::Bool(_) | Value::Str(_) | Value::Bytes(_) => Ok(()),
            other => other.as_f64().map_or(Ok(()), check),
        }
    }

    fn unit_suffix(&self) -> String {
        self.unit
            .as_ref()
            .map(|u| format!(" {u}"))
            .unwrap_or_default()
    }

    /// The range as text (`0 ..= 1 s`), if one is set.
    pub fn range_text(&self) -> Option<String> {
        match (self.min, self.max) {
            (None, None) => None,
            (min, max) => Some(format!(
                "{} ..= {}{}",
                min.map(|m| ShortFloat(m).to_string()).unwrap_or_default(),
                max.map(|m| ShortFloat(m).to_string()).unwrap_or_default(),
                self.unit_suffix()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_only_without_loss() {
        assert_eq!(
            AttrType::Float.convert(&Value::Int(3)),
            Ok(Value::Float(3.0))
        );
        assert_eq!(AttrType::Int.convert(&Value::Float(3.0)), Ok(Value::Int(3)));
        assert!(
            AttrType::Int
                .convert(&Value::Float(3.5))
                .unwrap_err()
                .contains("expected an int")
        );
        assert!(
            AttrType::UInt
                .convert(&Value::Int(-1))
                .unwrap_err()
                .contains("negative")
        );
        assert!(AttrType::Bool.convert(&Value::Str("x".into())).is_err());
        assert_eq!(
            AttrType::List(ScalarKind::Float)
                .convert(&Value::Array(vec![Value::Int(1), Value::Float(2.5)])),
            Ok(Value::Array(vec![Value::Float(1.0), Value::Float(2.5)]))
        );
    }

    #[test]
    fn parses_user_text() {
        assert_eq!(AttrType::Float.parse(" 0.01 "), Ok(Value::Float(0.01)));
        assert_eq!(AttrType::Bool.parse("on"), Ok(Value::Bool(true)));
        assert!(AttrType::UInt.parse("-3").unwrap_err().contains("negative"));
        assert!(AttrType::Float.parse("NaN").is_err());
        assert_eq!(
            AttrType::List(ScalarKind::Int).parse("[1, -2]"),
            Ok(Value::Array(vec![Value::Int(1), Value::Int(-2)]))
        );
        assert!(
            AttrType::List(ScalarKind::Int)
                .parse("1, 2")
                .unwrap_err()
                .contains("[1, 2, 3]")
        );
    }

    #[test]
    fn checks_ranges_with_units() {
        let mut a = AttrInfo::new("dt", AttrType::Float);
        a.min = Some(0.0);
        a.max = Some(0.1);
        a.unit = Some("s".into());
        assert_eq!(
            a.check_range(&Value::Float(0.5)),
            Err("0.5 is above the maximum 0.1 s".into())
        );
        assert!(a.check_range(&Value::Float(0.05)).is_ok());
        assert_eq!(
            a.check_range(&Value::Float(1e308)),
            Err("1e308 is above the maximum 0.1 s".into())
        );
        assert_eq!(a.range_text().as_deref(), Some("0 ..= 0.1 s"));
    }
}
