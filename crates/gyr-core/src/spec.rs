//! The sensor specification file: event types described in TOML, so that programs in any language
//! (Rust now; C and Fortran through generated code) share one description.
//!
//! # Format
//!
//! Falcon's sensor specification language described each tracing sensor by its attributes:
//! `sensor work_load { attributes { int domain_num; double work_load; } }`.
//! gyr's form of the same is TOML:
//!
//! ```toml
//! # sensors.toml
//! [[sensor]]
//! name = "work_load"                  # letters, digits, `_`, `.`, `-`
//! kind = "tracing"                    # tracing (default) | sampling | extended
//! description = "work done by one domain in one step"
//! fields = [
//!   { name = "domain", type = "u32" },
//!   { name = "load", type = "f64", unit = "s" },
//!   { name = "histogram", type = "[u32; 8]" },
//! ]
//! ```
//!
//! Field types: `i8` `i16` `i32` `i64` `u8` `u16` `u32` `u64` `f32` `f64` `bool` `string`
//! `bytes`, and fixed-size arrays of numbers written `[f64; 8]`.
//! A sampling sensor has exactly one numeric field, the sampled value.
//! A spec is at most [`MAX_SPEC_BYTES`] long.
//!
//! # Example
//!
//! ```
//! let spec = gyr_core::spec::Spec::parse(r#"
//! [[sensor]]
//! name = "work_load"
//! fields = [{ name = "domain", type = "u32" }, { name = "load", type = "f64" }]
//! "#).unwrap();
//! assert_eq!(spec.sensors[0].fields[1].ty, gyr_core::FieldType::F64);
//! ```

use crate::schema::{Field, FieldType, Schema, SchemaError, TypeId};
use serde::Deserialize;
use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::path::Path;

/// The largest spec gyr reads, in bytes (1 MiB): thousands of sensors fit, and a file that is
/// not a spec (`/dev/zero`, a log) is refused after reading this much instead of filling memory.
pub const MAX_SPEC_BYTES: usize = 1 << 20;

fn too_large() -> String {
    format!(
        "the spec is larger than {MAX_SPEC_BYTES} bytes (1 MiB), the most gyr reads: \
         is it a spec file? Split a larger one into several"
    )
}

/// The text of the spec file at `path`: at most [`MAX_SPEC_BYTES`] read, whatever the file is
/// (`/dev/zero` included), and refused unless it is UTF-8. Every kind of spec file (sensors
/// here, the watch-dog's output specs) is read through it, with the same errors.
pub fn read_spec_text(path: &Path) -> Result<String, SpecError> {
    let fail = |message: String| SpecError {
        path: Some(path.display().to_string()),
        line_col: None,
        message,
    };
    let file =
        std::fs::File::open(path).map_err(|e| fail(format!("cannot read the spec file: {e}")))?;
    // Never more than the limit and one byte.
    let mut bytes = Vec::new();
    file.take(MAX_SPEC_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read the spec file: {e}")))?;
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(fail(too_large()));
    }
    String::from_utf8(bytes).map_err(|e| {
        fail(format!(
            "the spec file is not UTF-8 text (byte {} is not): a spec is a TOML file",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// What kind of sensor a spec entry describes (Falcon's three kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SensorKind {
    /// Emits a timestamped record at each call.
    Tracing,
    /// A value the local monitor reads at a set rate.
    Sampling,
    /// User code that filters or aggregates before emitting.
    Extended,
}

/// One field of a sensor in a spec file.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecField {
    /// The field's name.
    pub name: String,
    /// The field's type.
    pub ty: FieldType,
    /// Its unit, if given (`s`, `K`, `bytes`).
    pub unit: Option<String>,
    /// What it means, if given.
    pub description: Option<String>,
}

/// One sensor of a spec file.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecSensor {
    /// The event type's name.
    pub name: String,
    /// Its kind.
    pub kind: SensorKind,
    /// What it records, if given.
    pub description: Option<String>,
    /// Its fields, in encoding order.
    pub fields: Vec<SpecField>,
}

impl SpecSensor {
    /// The schema of this sensor's events, with the given id.
    pub fn schema(&self, id: TypeId) -> Result<Schema, SchemaError> {
        Schema::new(
            id,
            &self.name,
            self.fields
                .iter()
                .map(|f| Field::new(&f.name, f.ty))
                .collect(),
        )
    }
}

/// A parsed, validated spec file.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The sensors, in file order.
    pub sensors: Vec<SpecSensor>,
}

/// Why a spec file was rejected: where, and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The file, if the spec was read from one.
    pub path: Option<String>,
    /// 1-based line and column, when known.
    pub line_col: Option<(usize, usize)>,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{p}:")?;
        }
        if let Some((l, c)) = self.line_col {
            write!(f, "{l}:{c}:")?;
        }
        if self.path.is_some() || self.line_col.is_some() {
            f.write_str(" ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpecError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    sensor: Vec<toml::Spanned<RawSensor>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSensor {
    name: String,
    #[serde(default)]
    kind: Option<toml::Spanned<String>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    fields: Vec<toml::Spanned<RawField>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawField {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, col)
}

impl Spec {
    /// Reads and parses the spec file at `path`, refusing one longer than [`MAX_SPEC_BYTES`].
    pub fn load(path: impl AsRef<Path>) -> Result<Spec, SpecError> {
        let path = path.as_ref();
        let text = read_spec_text(path)?;
        Spec::parse(&text).map_err(|e| SpecError {
            path: Some(path.display().to_string()),
            ..e
        })
    }

    /// Parses a spec from TOML text, at most [`MAX_SPEC_BYTES`] long. Checking takes time
    /// linear in the text's length.
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        if text.len() > MAX_SPEC_BYTES {
            return Err(SpecError {
                path: None,
                line_col: None,
                message: too_large(),
            });
        }
        let at = |offset: usize, message: String| SpecError {
            path: None,
            line_col: Some(line_col(text, offset)),
            message,
        };
        let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError {
            path: None,
            line_col: e.span().map(|s| line_col(text, s.start)),
            message: format!(
                "{}; see the format in `gyr spec --help`",
                e.message().trim_end_matches('\n')
            ),
        })?;
        if raw.sensor.is_empty() {
            return Err(SpecError {
                path: None,
                line_col: None,
                message: "no sensors defined: add a `[[sensor]]` table with a `name` and `fields`"
                    .into(),
            });
        }
        let mut sensors: Vec<SpecSensor> = Vec::new();
        let mut names = HashSet::new();
        for spanned in raw.sensor {
            let start = spanned.span().start;
            let s = spanned.into_inner();
            let kind = match s
                .kind
                .as_ref()
                .map(|k| (k.get_ref().as_str(), k.span().start))
            {
                None | Some(("tracing", _)) => SensorKind::Tracing,
                Some(("sampling", _)) => SensorKind::Sampling,
                Some(("extended", _)) => SensorKind::Extended,
                Some((other, off)) => {
                    return Err(at(
                        off,
                        format!(
                            "sensor `{}`: unknown kind `{other}`; use `tracing`, `sampling` or `extended`",
                            s.name
                        ),
                    ));
                }
            };
            if !names.insert(s.name.clone()) {
                return Err(at(
                    start,
                    format!(
                        "sensor `{}` is defined twice: each sensor needs its own name",
                        s.name
                    ),
                ));
            }
            if s.name.starts_with("gyr.") {
                return Err(at(
                    start,
                    format!(
                        "sensor `{}`: names starting with `gyr.` are reserved for gyr's own events",
                        s.name
                    ),
                ));
            }
            let mut fields = Vec::new();
            for (i, f) in s.fields.into_iter().enumerate() {
                let off = f.span().start;
                let f = f.into_inner();
                let ty = FieldType::parse(&f.ty).ok_or_else(|| {
                    at(
                        off,
                        format!(
                            "sensor `{}`, field {} (`{}`): unknown type `{}`; use one of i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 bool string bytes, or an array such as `[f64; 8]` (1 to 65536 elements)",
                            s.name,
                            i + 1,
                            f.name,
                            f.ty
                        ),
                    )
                })?;
                fields.push(SpecField {
                    name: f.name,
                    ty,
                    unit: f.unit,
                    description: f.description,
                });
            }
            let sensor = SpecSensor {
                name: s.name,
                kind,
                description: s.description,
                fields,
            };
            sensor.schema(1).map_err(|e| at(start, e.to_string()))?;
            if kind == SensorKind::Sampling
                && !(sensor.fields.len() == 1
                    && sensor.fields[0].ty.scalar().is_some()
                    && sensor.fields[0].ty.is_numeric())
            {
                return Err(at(
                    start,
                    format!(
                        "sampling sensor `{}` must have exactly one numeric field (the sampled value)",
                        sensor.name
                    ),
                ));
            }
            sensors.push(sensor);
        }
        Ok(Spec { sensors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Spec::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn parses_all_kinds() {
        let spec = Spec::parse(
            r#"
[[sensor]]
name = "work_load"
description = "load"
fields = [{ name = "domain", type = "u32" }, { name = "hist", type = "[f64; 4]", unit = "s" }]

[[sensor]]
name = "queue_len"
kind = "sampling"
fields = [{ name = "value", type = "u64" }]
"#,
        )
        .unwrap();
        assert_eq!(spec.sensors.len(), 2);
        assert_eq!(spec.sensors[1].kind, SensorKind::Sampling);
        assert_eq!(
            spec.sensors[0].schema(5).unwrap().fixed_size(),
            Some(4 + 32)
        );
    }

    #[test]
    fn explains_bad_specs() {
        let e = err("[[sensor]]\nname = \"a\"\nfields = [{ name = \"x\", type = \"float\" }]\n");
        assert!(
            e.starts_with("3:11: sensor `a`, field 1 (`x`): unknown type `float`"),
            "{e}"
        );
        let e = err("[[sensor]]\nname = \"a\"\nkind = \"sampled\"\n");
        assert!(e.contains("unknown kind `sampled`"), "{e}");
        let e = err("[[sensor]]\nname = \"a\"\n[[sensor]]\nname = \"a\"\n");
        assert!(e.contains("defined twice"), "{e}");
        let e = err(
            "[[sensor]]\nname = \"a\"\nfields = [{ name = \"x\", type = \"u8\" }, { name = \"x\", type = \"u8\" }]\n",
        );
        assert!(e.contains("two fields named `x`"), "{e}");
        let e = err("[[sensor]]\nnme = \"a\"\n");
        assert!(e.starts_with("2:1:"), "{e}");
        assert!(err("").contains("no sensors defined"));
        assert!(err("[[sensor]]\nname = \"gyr.x\"\n").contains("reserved"));
        assert!(
            err("[[sensor]]\nname = \"s\"\nkind = \"sampling\"\nfields = []\n")
                .contains("exactly one numeric field")
        );
        assert!(err("[[sensor]]\nname = \"bad name\"\n").contains("not valid"));
        assert!(err("[[sensor\n").starts_with("1:"));
    }

    /// 40 000 fields in one sensor and 20 000 sensors are checked in one pass each (duplicate
    /// names are looked up, not searched for), well within the size limit.
    #[test]
    fn large_specs_are_checked_in_linear_time() {
        let mut text = String::from("[[sensor]]\nname=\"big\"\nfields=[");
        for i in 0..40_000 {
            text.push_str(&format!("{{name=\"f{i}\",type=\"u8\"}},"));
        }
        text.push_str("]\n");
        assert!(text.len() <= MAX_SPEC_BYTES);
        assert_eq!(Spec::parse(&text).unwrap().sensors[0].fields.len(), 40_000);
        text.push_str("[[sensor]]\nname=\"big\"\n");
        assert!(err(&text).contains("`big` is defined twice"));

        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("[[sensor]]\nname=\"s{i}\"\n"));
        }
        assert!(text.len() <= MAX_SPEC_BYTES);
        assert_eq!(Spec::parse(&text).unwrap().sensors.len(), 20_000);
    }

    #[test]
    fn oversize_specs_are_refused_without_reading_them_whole() {
        let limit = format!("larger than {MAX_SPEC_BYTES} bytes");
        let text = format!("# {}\n", "x".repeat(MAX_SPEC_BYTES));
        assert!(err(&text).contains(&limit));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.toml");
        std::fs::write(&path, &text).unwrap();
        let e = Spec::load(&path).unwrap_err().to_string();
        assert!(e.contains("big.toml: ") && e.contains(&limit), "{e}");
        // A file without an end is refused after the limit too.
        if Path::new("/dev/zero").exists() {
            let e = Spec::load("/dev/zero").unwrap_err().to_string();
            assert!(e.contains(&limit), "{e}");
        }
    }
}
