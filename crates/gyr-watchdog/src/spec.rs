//! The watch-dog's spec: which event types a program's output holds, where (stdout, stderr,
//! files by glob) and how to read them (a pattern, a table, a block of numbers), in TOML.
//!
//! # Format
//!
//! ```toml
//! [watchdog]                        # all optional
//! name = "adpac"                    # names the default trace file
//! control_file = "adpac.ctl"        # what `watched.control(line)` appends to
//! input_files = ["adpac.input"]     # the only files `watched.set_input` may change
//! restart_on_crash = 0              # restarts after a crash (ended by a signal)
//! stop_grace_ms = 3000              # SIGTERM, then SIGKILL after this long
//! unmatched_every_ms = 1000         # at most one `watchdog.unmatched` event this often
//! last_lines = 20                   # lines of output kept for `watchdog.exit`
//! poll_ms = 50                      # how often files are read
//! scan_ms = 500                     # how often globs are expanded again
//!
//! [source.residuals]                # a file source: `stdout` and `stderr` exist already
//! file = "runs/{instance}/residuals.dat"   # a glob: `*`, `?`, `[abc]`, one `{instance}`
//! from = "start"                    # or "end": skip what a file held when first seen
//!
//! [[event]]
//! name = "adpac.residual"           # letters, digits, `_`, `.`, `-`
//! source = "stdout"                 # or a list: ["stdout", "residuals"]; default stdout
//! pattern = '^\s*(?P<iter>\d+)\s+(?P<rms>\S+)\s+(?P<max>\S+)'
//! fields = [
//!   { name = "iter", type = "u32" },
//!   { name = "rms", type = "f64", design = 1e-6, min = 0.0, max = 1e-2 },
//!   { name = "max", type = "f64" },
//! ]
//!
//! [[event]]
//! name = "tess.history"
//! source = "residuals"
//! table = { header = '^#\s*Iter\b' }  # also `separator = ","`, `comment = "#"`
//! fields = [{ name = "iter", type = "u32", column = "Iter" }, { name = "rho", type = "f64" }]
//!
//! [[event]]
//! name = "adpac.pressure"
//! block = { start = 'PRESSURE DISTRIBUTION AT ITERATION\s+(?P<iter>\d+)', field = "p" }
//! fields = [{ name = "iter", type = "u32" }, { name = "p", type = "[f64; 52]" }]
//!
//! [[event]]
//! name = "adpac.warning"
//! severity = "warning"              # info | warning | error: also a `gyr.alert` event
//! pattern = 'WARNING:\s*(?P<message>.*)'
//! fields = [{ name = "message", type = "string" }]
//!
//! [design]                          # design points, or per field as above
//! "adpac.residual.max" = { design = 1e-5, max = 1e-2, unit = "" }
//! ```
//!
//! - **pattern**: a regular expression (the `regex` crate's syntax); every named capture is a
//!   field of the event and every field a capture. Numbers may be written as Fortran writes
//!   them: `1.234D-05`, `1.234-105`; a float of stars (`*******`, Fortran's overflow) is NaN.
//! - **table**: a header line matched by `header` names the columns (its words, after the
//!   comment characters); each later line of numbers is one event, its fields taken from the
//!   columns named like them (or by `column`); a new header re-maps. A cell that is not a number
//!   is NaN in a float field; an integer field's cell must be an integer. Fields are numbers.
//! - **block**: a line matched by `start` (whose captures fill the scalar fields), then the
//!   numbers of the following lines fill the array field `field`, `[f64; N]`, until N are read;
//!   a line that is not all numbers ends the block early (counted, no event).
//!
//! Each line of a source is given to its events in the spec's order and the first that takes it
//! wins; a line none takes is unmatched (counted; `--show-unmatched` prints it). Every event
//! type gets one more field, `instance` (a string), after its own: the part of a file's path
//! that `{instance}` matched, or the watch-dog's `--instance`.
//!
//! # Limits
//!
//! A spec is at most [`MAX_SPEC_BYTES`] long and defines at most [`MAX_EVENTS`] event types of
//! at most [`MAX_FIELDS`] fields each, and [`MAX_SOURCES`] file sources; a regular expression
//! compiles to at most [`MAX_REGEX_BYTES`]. Errors name the spec's line and column.

use gyr_core::schema::ScalarType;
use gyr_core::spec::SpecError;
use gyr_core::{Field, FieldType};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest spec read, in bytes (1 MiB).
pub const MAX_SPEC_BYTES: usize = gyr_core::spec::MAX_SPEC_BYTES;
/// The most event types a spec defines.
pub const MAX_EVENTS: usize = 256;
/// The most fields an event type has.
pub const MAX_FIELDS: usize = 256;
/// The most file sources a spec names.
pub const MAX_SOURCES: usize = 64;
/// The most memory one compiled regular expression may take.
pub const MAX_REGEX_BYTES: usize = 4 << 20;
/// The field every event type gets after its own: which run (instance) it came from.
pub const INSTANCE_FIELD: &str = "instance";
/// The field every event type gets last: the program's run it came from (1 for the first
/// start, one more at each restart; 0 for files of a program the watch-dog did not start), so
/// that rules can keep windows per run (`per = "run"`).
pub const RUN_FIELD: &str = "run";

/// How bad a matched line is: an event with a severity is also sent as a `gyr.alert` event,
/// which the hub shows among its alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Worth seeing.
    Info,
    /// Something may be going wrong.
    Warning,
    /// Something went wrong.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Where lines come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceKind {
    /// The program's standard output.
    Stdout,
    /// The program's standard error.
    Stderr,
    /// Files matching a glob, found again as they appear.
    Files {
        /// The glob (relative to the watch-dog's directory unless absolute).
        glob: String,
        /// Skip what a file held when it was first seen (files found later are read whole).
        from_end: bool,
    },
}

/// A named source of lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// `stdout`, `stderr`, or the name of its `[source.NAME]` table.
    pub name: String,
    /// What it is.
    pub kind: SourceKind,
}

/// One field of an event type, with what the spec says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: FieldType,
    /// Its unit.
    pub unit: Option<String>,
    /// What it means.
    pub description: Option<String>,
    /// The smallest value expected (for gauges).
    pub min: Option<f64>,
    /// The largest value expected (for gauges).
    pub max: Option<f64>,
    /// The design point (for gauges).
    pub design: Option<f64>,
    /// A table's column name for this field, when it is not the field's name.
    pub column: Option<String>,
}

/// How a table's cells are separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Separator {
    /// Runs of spaces and tabs.
    Whitespace,
    /// One character (`,`, `;`), with spaces around cells trimmed.
    Char(char),
}

/// How an event type's lines are recognised.
#[derive(Debug, Clone)]
pub enum Rule {
    /// One line, matched by a regular expression whose named captures are the fields.
    Pattern {
        /// The compiled expression.
        regex: Regex,
        /// Per capture group index, the field it fills.
        captures: Vec<Option<usize>>,
    },
    /// A table: a header line, then rows of numbers.
    Table {
        /// Matches the header line.
        header: Regex,
        /// How cells are separated.
        separator: Separator,
        /// Characters stripped from the start of the header before its words are read.
        comment: String,
    },
    /// A start line, then N numbers over the following lines.
    Block {
        /// Matches the start line.
        start: Regex,
        /// Per capture group index of `start`, the field it fills.
        captures: Vec<Option<usize>>,
        /// The array field the numbers fill.
        field: usize,
        /// How many numbers (the array's length).
        len: usize,
    },
}

/// One event type of the spec.
#[derive(Debug, Clone)]
pub struct EventDef {
    /// Its name.
    pub name: String,
    /// What it records.
    pub description: Option<String>,
    /// Its fields, in order (the `instance` field follows them in events).
    pub fields: Vec<FieldDef>,
    /// How its lines are recognised.
    pub rule: Rule,
    /// The sources it reads (indices into [`Spec::sources`]).
    pub sources: Vec<usize>,
    /// Whether it is also an alert.
    pub severity: Option<Severity>,
}

impl EventDef {
    /// The fields of its events as gyr records them: its own, then `instance`.
    pub fn schema_fields(&self) -> Vec<Field> {
        self.fields
            .iter()
            .map(|f| Field::new(&f.name, f.ty))
            .chain([
                Field::new(INSTANCE_FIELD, FieldType::Str),
                Field::new(RUN_FIELD, FieldType::U32),
            ])
            .collect()
    }

    /// `pattern`, `table` or `block`.
    pub fn rule_name(&self) -> &'static str {
        match self.rule {
            Rule::Pattern { .. } => "pattern",
            Rule::Table { .. } => "table",
            Rule::Block { .. } => "block",
        }
    }
}

/// The `[watchdog]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Names the default trace file.
    pub name: Option<String>,
    /// What `watched.control(line)` appends to.
    pub control_file: Option<PathBuf>,
    /// The only files `watched.set_input` may change.
    pub input_files: Vec<PathBuf>,
    /// How many times a crashed program is started again.
    pub restart_on_crash: u32,
    /// How long a program is given to end after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
    /// At most one `watchdog.unmatched` event this often.
    pub unmatched_every: Duration,
    /// How many of the last lines of output `watchdog.exit` carries.
    pub last_lines: usize,
    /// How often files are read.
    pub poll: Duration,
    /// How often globs are expanded again.
    pub scan: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: None,
            control_file: None,
            input_files: Vec::new(),
            restart_on_crash: 0,
            stop_grace: Duration::from_millis(3000),
            unmatched_every: Duration::from_millis(1000),
            last_lines: 20,
            poll: Duration::from_millis(50),
            scan: Duration::from_millis(500),
        }
    }
}

/// A design point and range of one field, for gauges (the hub's and the `design` steering
/// object's).
#[derive(Debug, Clone, PartialEq)]
pub struct DesignPoint {
    /// The event type.
    pub event: String,
    /// The field.
    pub field: String,
    /// The design value.
    pub design: Option<f64>,
    /// The smallest value expected.
    pub min: Option<f64>,
    /// The largest value expected.
    pub max: Option<f64>,
    /// The unit.
    pub unit: Option<String>,
}

/// A parsed, checked watch-dog spec.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The `[watchdog]` table.
    pub options: Options,
    /// Sources: `stdout` (0), `stderr` (1), then the `[source.NAME]` tables by name.
    pub sources: Vec<Source>,
    /// The event types, in file order.
    pub events: Vec<EventDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    watchdog: Option<RawOptions>,
    #[serde(default)]
    source: BTreeMap<String, toml::Spanned<RawSource>>,
    #[serde(default)]
    event: Vec<toml::Spanned<RawEvent>>,
    #[serde(default)]
    design: BTreeMap<String, toml::Spanned<RawDesign>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOptions {
    name: Option<toml::Spanned<String>>,
    control_file: Option<PathBuf>,
    #[serde(default)]
    input_files: Vec<PathBuf>,
    restart_on_crash: Option<u32>,
    stop_grace_ms: Option<toml::Spanned<u64>>,
    unmatched_every_ms: Option<toml::Spanned<u64>>,
    last_lines: Option<toml::Spanned<usize>>,
    poll_ms: Option<toml::Spanned<u64>>,
    scan_ms: Option<toml::Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    file: toml::Spanned<String>,
    from: Option<toml::Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    name: toml::Spanned<String>,
    description: Option<String>,
    source: Option<toml::Spanned<OneOrMany>>,
    pattern: Option<toml::Spanned<String>>,
    table: Option<toml::Spanned<RawTable>>,
    block: Option<toml::Spanned<RawBlock>>,
    severity: Option<toml::Spanned<String>>,
    #[serde(default)]
    fields: Vec<toml::Spanned<RawField>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    header: toml::Spanned<String>,
    separator: Option<toml::Spanned<String>>,
    comment: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBlock {
    start: toml::Spanned<String>,
    field: toml::Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawField {
    name: toml::Spanned<String>,
    #[serde(rename = "type")]
    ty: toml::Spanned<String>,
    unit: Option<String>,
    description: Option<String>,
    min: Option<f64>,
    max: Option<f64>,
    design: Option<f64>,
    column: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDesign {
    Value(f64),
    Table(RawDesignTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDesignTable {
    design: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    unit: Option<String>,
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before[before.rfind('\n').map(|i| i + 1).unwrap_or(0)..]
        .chars()
        .count()
        + 1;
    (line, col)
}

/// The byte offset in the spec's text of byte `inner` of the string value whose TOML literal
/// spans `span` (quotes included): literal strings map one to one, basic strings are decoded
/// escape by escape.
fn offset_in_literal(text: &str, span: &Range<usize>, inner: usize) -> usize {
    let Some(lit) = text.get(span.clone()) else {
        return span.start;
    };
    let (delim, basic) = if lit.starts_with("'''") {
        (3, false)
    } else if lit.starts_with("\"\"\"") {
        (3, true)
    } else if lit.starts_with('\'') {
        (1, false)
    } else if lit.starts_with('"') {
        (1, true)
    } else {
        return span.start;
    };
    let mut start = delim;
    // A newline right after an opening triple quote is not part of the string.
    if delim == 3 {
        if lit[start..].starts_with("\r\n") {
            start += 2;
        } else if lit[start..].starts_with('\n') {
            start += 1;
        }
    }
    let body = &lit[start..];
    if !basic {
        return span.start + start + inner.min(body.len());
    }
    // Walk the basic string, counting decoded bytes.
    let bytes = body.as_bytes();
    let (mut raw, mut decoded) = (0usize, 0usize);
    while raw < bytes.len() && decoded < inner {
        if bytes[raw] == b'\\' && raw + 1 < bytes.len() {
            let (len, out) = match bytes[raw + 1] {
                b'u' => (6, 1),
                b'U' => (10, 1),
                b'\n' | b'\r' | b' ' | b'\t' => {
                    // A line-ending backslash: it and the whitespace after it vanish.
                    let mut k = raw + 1;
                    while k < bytes.len() && bytes[k].is_ascii_whitespace() {
                        k += 1;
                    }
                    (k - raw, 0)
                }
                _ => (2, 1),
            };
            raw += len;
            decoded += out;
        } else {
            raw += 1;
            decoded += 1;
        }
    }
    span.start + start + raw.min(bytes.len())
}

struct Ctx<'a> {
    text: &'a str,
}

impl Ctx<'_> {
    fn at(&self, offset: usize, message: String) -> SpecError {
        SpecError {
            path: None,
            line_col: Some(line_col(self.text, offset)),
            message,
        }
    }

    /// Compiles a regular expression written at `span`, mapping a syntax error's position
    /// inside the pattern to the spec's line and column.
    fn regex(&self, what: &str, s: &toml::Spanned<String>) -> Result<Regex, SpecError> {
        let pattern = s.get_ref();
        let span = s.span();
        match RegexBuilder::new(pattern)
            .size_limit(MAX_REGEX_BYTES)
            .build()
        {
            Ok(r) => Ok(r),
            Err(regex::Error::Syntax(_)) => {
                let (offset, message) = match regex_syntax::Parser::new().parse(pattern) {
                    Err(regex_syntax::Error::Parse(e)) => {
                        (e.span().start.offset, e.kind().to_string())
                    }
                    Err(regex_syntax::Error::Translate(e)) => {
                        (e.span().start.offset, e.kind().to_string())
                    }
                    _ => (0, "invalid regular expression".to_owned()),
                };
                Err(self.at(
                    offset_in_literal(self.text, &span, offset),
                    format!(
                        "{what}: the regular expression does not compile: {message}; the syntax is the `regex` crate's (write literal backslashes in '...' strings)"
                    ),
                ))
            }
            Err(e) => Err(self.at(
                span.start,
                format!("{what}: the regular expression is too large ({e}): simplify it"),
            )),
        }
    }
}

fn valid_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic())
        && c.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
        && name.len() <= 128
}

fn valid_field_name(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && name.len() <= 64
}

/// Where a capture group's name is written in the pattern: `(?P<name>` or `(?<name>`.
fn capture_name_offset(pattern: &str, name: &str) -> usize {
    for open in ["(?P<", "(?<"] {
        if let Some(i) = pattern.find(&format!("{open}{name}>")) {
            return i + open.len();
        }
    }
    0
}

/// Maps the named captures of `regex` onto `fields`: each capture must name a scalar field.
fn map_captures(
    ctx: &Ctx<'_>,
    event: &str,
    regex: &Regex,
    lit: &toml::Spanned<String>,
    fields: &[FieldDef],
) -> Result<Vec<Option<usize>>, SpecError> {
    let mut out = Vec::new();
    for name in regex.capture_names() {
        let Some(name) = name else {
            out.push(None);
            continue;
        };
        let at = offset_in_literal(
            ctx.text,
            &lit.span(),
            capture_name_offset(lit.get_ref(), name),
        );
        let Some(i) = fields.iter().position(|f| f.name == name) else {
            return Err(ctx.at(
                at,
                format!(
                    "event `{event}`: the capture `{name}` is not one of its fields ({}); add a field named `{name}` or rename the capture",
                    fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        };
        if matches!(fields[i].ty, FieldType::Array(..) | FieldType::Bytes) {
            return Err(ctx.at(
                at,
                format!(
                    "event `{event}`: the capture `{name}` fills field `{name}` of type {}, which one capture cannot fill; give it a number or string type",
                    fields[i].ty
                ),
            ));
        }
        out.push(Some(i));
    }
    Ok(out)
}

impl Spec {
    /// Reads and parses the spec at `path` (at most [`MAX_SPEC_BYTES`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Spec, SpecError> {
        let path = path.as_ref();
        let text = gyr_core::spec::read_spec_text(path)?;
        Spec::parse(&text).map_err(|e| SpecError {
            path: Some(path.display().to_string()),
            ..e
        })
    }

    /// Parses and checks a spec from TOML text.
    pub fn parse(text: &str) -> Result<Spec, SpecError> {
        if text.len() > MAX_SPEC_BYTES {
            return Err(SpecError {
                path: None,
                line_col: None,
                message: too_large(),
            });
        }
        let ctx = Ctx { text };
        let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError {
            path: None,
            line_col: e.span().map(|s| line_col(text, s.start)),
            message: format!(
                "{}; the format is in docs/watchdog.md (`gyr watchdog --help`)",
                e.message().trim_end_matches('\n')
            ),
        })?;
        let options = options(&ctx, raw.watchdog)?;

        let mut sources = vec![
            Source {
                name: "stdout".into(),
                kind: SourceKind::Stdout,
            },
            Source {
                name: "stderr".into(),
                kind: SourceKind::Stderr,
            },
        ];
        if raw.source.len() > MAX_SOURCES {
            return Err(SpecError {
                path: None,
                line_col: None,
                message: format!(
                    "{} file sources: at most {MAX_SOURCES} are watched; merge some with a wider glob",
                    raw.source.len()
                ),
            });
        }
        for (name, s) in raw.source {
            let at = s.span().start;
            let s = s.into_inner();
            if !valid_field_name(&name) || name == "stdout" || name == "stderr" {
                return Err(ctx.at(
                    at,
                    format!(
                        "source `{name}`: name it with letters, digits and `_` (stdout and stderr exist already)"
                    ),
                ));
            }
            let from_end = match s.from.as_ref().map(|f| (f.get_ref().as_str(), f.span())) {
                None | Some(("start", _)) => false,
                Some(("end", _)) => true,
                Some((other, span)) => {
                    return Err(ctx.at(
                        span.start,
                        format!("source `{name}`: `from = \"{other}\"`: use \"start\" or \"end\""),
                    ));
                }
            };
            crate::glob::Glob::new(s.file.get_ref())
                .map_err(|e| ctx.at(s.file.span().start, format!("source `{name}`: {e}")))?;
            sources.push(Source {
                name,
                kind: SourceKind::Files {
                    glob: s.file.into_inner(),
                    from_end,
                },
            });
        }

        if raw.event.is_empty() {
            return Err(SpecError {
                path: None,
                line_col: None,
                message: "no events defined: add an `[[event]]` table with a `name`, a `pattern` (or `table` or `block`) and `fields`".into(),
            });
        }
        if raw.event.len() > MAX_EVENTS {
            return Err(SpecError {
                path: None,
                line_col: None,
                message: format!(
                    "{} event types: at most {MAX_EVENTS} are allowed",
                    raw.event.len()
                ),
            });
        }
        let mut events: Vec<EventDef> = Vec::new();
        for spanned in raw.event {
            let event_at = spanned.span().start;
            events.push(event(
                &ctx,
                event_at,
                spanned.into_inner(),
                &sources,
                &events,
            )?);
        }

        for (key, d) in raw.design {
            let at = d.span().start;
            let found = key.rsplit_once('.').and_then(|(e, f)| {
                let ei = events.iter().position(|x| x.name == e)?;
                let fi = events[ei].fields.iter().position(|x| x.name == f)?;
                Some((ei, fi))
            });
            let Some((ei, fi)) = found else {
                return Err(ctx.at(
                    at,
                    format!(
                        "design `{key}`: no such event field; write \"EVENT.FIELD\", such as \"{}.{}\"",
                        events[0].name, events[0].fields.first().map(|f| f.name.as_str()).unwrap_or("x")
                    ),
                ));
            };
            let field = &mut events[ei].fields[fi];
            if !field.ty.is_numeric() || field.ty.scalar().is_none() {
                return Err(ctx.at(
                    at,
                    format!("design `{key}`: the field is a {}, not a number", field.ty),
                ));
            }
            match d.into_inner() {
                RawDesign::Value(v) => field.design = Some(v),
                RawDesign::Table(t) => {
                    field.design = t.design.or(field.design);
                    field.min = t.min.or(field.min);
                    field.max = t.max.or(field.max);
                    field.unit = t.unit.or(field.unit.take());
                }
            }
        }
        Ok(Spec {
            options,
            sources,
            events,
        })
    }

    /// The index of the source named `name`.
    pub fn source(&self, name: &str) -> Option<usize> {
        self.sources.iter().position(|s| s.name == name)
    }

    /// The index of the event type named `name`.
    pub fn event(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e.name == name)
    }

    /// Every field with a design point or a range, in spec order.
    pub fn design_points(&self) -> Vec<DesignPoint> {
        self.events
            .iter()
            .flat_map(|e| {
                e.fields
                    .iter()
                    .filter(|f| f.design.is_some() || f.min.is_some() || f.max.is_some())
                    .map(|f| DesignPoint {
                        event: e.name.clone(),
                        field: f.name.clone(),
                        design: f.design,
                        min: f.min,
                        max: f.max,
                        unit: f.unit.clone(),
                    })
            })
            .collect()
    }
}

fn too_large() -> String {
    format!(
        "the spec is larger than {MAX_SPEC_BYTES} bytes (1 MiB), the most gyr reads: is it a spec file?"
    )
}

fn options(ctx: &Ctx<'_>, raw: Option<RawOptions>) -> Result<Options, SpecError> {
    let mut o = Options::default();
    let Some(raw) = raw else {
        return Ok(o);
    };
    let ms = |v: &Option<toml::Spanned<u64>>,
              what: &str,
              range: Range<u64>,
              default: Duration|
     -> Result<Duration, SpecError> {
        match v {
            None => Ok(default),
            Some(v) if range.contains(v.get_ref()) => Ok(Duration::from_millis(*v.get_ref())),
            Some(v) => Err(ctx.at(
                v.span().start,
                format!(
                    "`{what} = {}`: give milliseconds from {} to {}",
                    v.get_ref(),
                    range.start,
                    range.end - 1
                ),
            )),
        }
    };
    if let Some(n) = raw.name {
        if !valid_field_name(&n.get_ref().replace(['-', '.'], "_")) {
            return Err(ctx.at(
                n.span().start,
                "`name`: use letters, digits, `_`, `-` and `.`".into(),
            ));
        }
        o.name = Some(n.into_inner());
    }
    o.control_file = raw.control_file;
    o.input_files = raw.input_files;
    o.restart_on_crash = raw.restart_on_crash.unwrap_or(0).min(1000);
    o.stop_grace = ms(
        &raw.stop_grace_ms,
        "stop_grace_ms",
        0..600_001,
        o.stop_grace,
    )?;
    o.unmatched_every = ms(
        &raw.unmatched_every_ms,
        "unmatched_every_ms",
        10..3_600_001,
        o.unmatched_every,
    )?;
    o.poll = ms(&raw.poll_ms, "poll_ms", 1..10_001, o.poll)?;
    o.scan = ms(&raw.scan_ms, "scan_ms", 1..60_001, o.scan)?;
    if let Some(n) = raw.last_lines {
        if *n.get_ref() > 1000 {
            return Err(ctx.at(n.span().start, "`last_lines`: at most 1000".into()));
        }
        o.last_lines = n.into_inner();
    }
    Ok(o)
}

fn event(
    ctx: &Ctx<'_>,
    at: usize,
    e: RawEvent,
    sources: &[Source],
    earlier: &[EventDef],
) -> Result<EventDef, SpecError> {
    let name = e.name.get_ref().clone();
    let name_at = e.name.span().start;
    if !valid_name(&name) {
        return Err(ctx.at(
            name_at,
            format!(
                "event `{name}`: name it with letters, digits, `_`, `.` and `-`, starting with a letter"
            ),
        ));
    }
    if name.starts_with("gyr.") || name.starts_with("watchdog.") {
        return Err(ctx.at(
            name_at,
            format!("event `{name}`: names starting with `gyr.` or `watchdog.` are gyr's own"),
        ));
    }
    if earlier.iter().any(|x| x.name == name) {
        return Err(ctx.at(
            name_at,
            format!("event `{name}` is defined twice: each needs its own name"),
        ));
    }
    if e.fields.is_empty() {
        return Err(ctx.at(
            at,
            format!(
                "event `{name}` has no fields: add `fields = [{{ name = \"x\", type = \"f64\" }}]`"
            ),
        ));
    }
    if e.fields.len() > MAX_FIELDS {
        return Err(ctx.at(at, format!("event `{name}`: at most {MAX_FIELDS} fields")));
    }
    let mut fields: Vec<FieldDef> = Vec::new();
    for f in e.fields {
        let f = f.into_inner();
        let fname = f.name.get_ref().clone();
        if !valid_field_name(&fname) || fname == INSTANCE_FIELD || fname == RUN_FIELD {
            return Err(ctx.at(
                f.name.span().start,
                format!(
                    "event `{name}`, field `{fname}`: name fields with letters, digits and `_` (`instance` and `run` are added by the watch-dog)"
                ),
            ));
        }
        if fields.iter().any(|x| x.name == fname) {
            return Err(ctx.at(
                f.name.span().start,
                format!("event `{name}`: field `{fname}` is defined twice"),
            ));
        }
        let ty = FieldType::parse(f.ty.get_ref())
            .filter(|t| *t != FieldType::Bytes)
            .ok_or_else(|| {
                ctx.at(
                    f.ty.span().start,
                    format!(
                        "event `{name}`, field `{fname}`: unknown type `{}`; use one of i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 bool string, or an array such as `[f64; 52]` (for a block)",
                        f.ty.get_ref()
                    ),
                )
            })?;
        fields.push(FieldDef {
            name: fname,
            ty,
            unit: f.unit,
            description: f.description,
            min: f.min,
            max: f.max,
            design: f.design,
            column: f.column,
        });
    }

    let mut source_list = Vec::new();
    let (given, source_at): (Vec<String>, usize) = match e.source {
        None => (Vec::new(), at),
        Some(s) => {
            let at = s.span().start;
            match s.into_inner() {
                OneOrMany::One(s) => (vec![s], at),
                OneOrMany::Many(v) => (v, at),
            }
        }
    };
    for s in &given {
        let i = sources
            .iter()
            .position(|x| x.name == *s)
            .ok_or_else(|| {
                ctx.at(
                    source_at,
                    format!(
                        "event `{name}`: no source `{s}`; the sources are {}; add a `[source.{s}]` table with `file = \"GLOB\"`",
                        sources.iter().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", "),
                    ),
                )
            })?;
        if !source_list.contains(&i) {
            source_list.push(i);
        }
    }
    if source_list.is_empty() {
        source_list.push(0);
    }

    let severity = match e
        .severity
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None => None,
        Some(("info", _)) => Some(Severity::Info),
        Some(("warning", _)) => Some(Severity::Warning),
        Some(("error", _)) => Some(Severity::Error),
        Some((other, span)) => {
            return Err(ctx.at(
                span.start,
                format!("event `{name}`: severity `{other}`: use info, warning or error"),
            ));
        }
    };

    let what = format!("event `{name}`");
    let rule = match (e.pattern, e.table, e.block) {
        (Some(p), None, None) => {
            let regex = ctx.regex(&what, &p)?;
            let captures = map_captures(ctx, &name, &regex, &p, &fields)?;
            for (i, f) in fields.iter().enumerate() {
                if !captures.contains(&Some(i)) {
                    return Err(ctx.at(
                        p.span().start,
                        format!(
                            "event `{name}`: field `{}` has no capture in the pattern: add `(?P<{}>...)`",
                            f.name, f.name
                        ),
                    ));
                }
            }
            Rule::Pattern { regex, captures }
        }
        (None, Some(t), None) => {
            let t_at = t.span().start;
            let t = t.into_inner();
            let header = ctx.regex(&what, &t.header)?;
            let separator = match t
                .separator
                .as_ref()
                .map(|s| (s.get_ref().as_str(), s.span()))
            {
                None => Separator::Whitespace,
                Some((s, _)) if s == " " || s == "whitespace" => Separator::Whitespace,
                Some((s, span)) => {
                    let mut c = s.chars();
                    match (c.next(), c.next()) {
                        (Some(ch), None) if ch != '\n' => Separator::Char(ch),
                        _ => {
                            return Err(ctx.at(
                                span.start,
                                format!(
                                    "event `{name}`: separator `{s}`: give one character such as \",\", or \"whitespace\""
                                ),
                            ));
                        }
                    }
                }
            };
            for f in &fields {
                if f.ty.scalar().is_none() || !f.ty.is_numeric() {
                    return Err(ctx.at(
                        t_at,
                        format!(
                            "event `{name}`: table field `{}` is a {}; a table's fields are numbers",
                            f.name, f.ty
                        ),
                    ));
                }
            }
            Rule::Table {
                header,
                separator,
                comment: t.comment.unwrap_or_else(|| "#%!".to_owned()),
            }
        }
        (None, None, Some(b)) => {
            let b = b.into_inner();
            let start = ctx.regex(&what, &b.start)?;
            let fname = b.field.get_ref();
            let field = fields
                .iter()
                .position(|f| f.name == *fname)
                .ok_or_else(|| {
                    ctx.at(
                        b.field.span().start,
                        format!("event `{name}`: block field `{fname}` is not one of its fields"),
                    )
                })?;
            let len = match fields[field].ty {
                FieldType::Array(s, n) if s != ScalarType::Bool => n as usize,
                other => {
                    return Err(ctx.at(
                        b.field.span().start,
                        format!(
                            "event `{name}`: block field `{fname}` is a {other}; make it an array of numbers such as `[f64; 52]`"
                        ),
                    ));
                }
            };
            let captures = map_captures(ctx, &name, &start, &b.start, &fields)?;
            for (i, f) in fields.iter().enumerate() {
                if i != field && !captures.contains(&Some(i)) {
                    return Err(ctx.at(
                        b.start.span().start,
                        format!(
                            "event `{name}`: field `{}` is neither the block's array nor a capture of `start`: add `(?P<{}>...)` to `start`",
                            f.name, f.name
                        ),
                    ));
                }
            }
            Rule::Block {
                start,
                captures,
                field,
                len,
            }
        }
        _ => {
            return Err(ctx.at(
                at,
                format!(
                    "event `{name}`: give exactly one of `pattern = '...'`, `table = {{ header = '...' }}` or `block = {{ start = '...', field = \"...\" }}`"
                ),
            ));
        }
    };
    if !matches!(rule, Rule::Block { .. })
        && let Some(f) = fields.iter().find(|f| matches!(f.ty, FieldType::Array(..)))
    {
        return Err(ctx.at(
            at,
            format!(
                "event `{name}`: field `{}` is an array; arrays are filled by a `block`",
                f.name
            ),
        ));
    }
    gyr_core::Schema::new(1, &name, {
        let mut v: Vec<Field> = fields.iter().map(|f| Field::new(&f.name, f.ty)).collect();
        v.push(Field::new(INSTANCE_FIELD, FieldType::Str));
        v.push(Field::new(RUN_FIELD, FieldType::U32));
        v
    })
    .map_err(|e| ctx.at(at, format!("event `{name}`: {e}")))?;
    Ok(EventDef {
        name,
        description: e.description,
        fields,
        rule,
        sources: source_list,
        severity,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_offsets_inside_string_literals() {
        let text = r#"a = 'x(y'
b = "p\\d(q"
"#;
        // 'x(y' starts at 4; inner offset 1 is `(` at 6.
        assert_eq!(offset_in_literal(text, &(4..9), 1), 6);
        // "p\\d(q": the decoded `(` is at inner 3; raw: p \\ d ( -> 1 + 2 + 1 = 4 after the quote.
        let start = text.find('"').unwrap();
        let end = text.rfind('"').unwrap() + 1;
        assert_eq!(&text[offset_in_literal(text, &(start..end), 3)..][..1], "(");
    }
}
