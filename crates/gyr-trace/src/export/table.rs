//! Tables: one per event type, typed columns, for data-frame tools (pandas, polars, DuckDB,
//! spreadsheets) through CSV or Parquet.
//!
//! One table holds every record of one event type, so that each column has one type: an
//! integer field stays an integer of its width, a string a string. Several inputs share a table
//! when their event types have the same name and fields; a type whose name is taken by another
//! shape gets a table of its own, `name#2`, `name#3` (file `name_2`). Each table starts with
//! the columns every record has:
//!
//! | column | type | holds |
//! |---|---|---|
//! | `time_ns` | u64 | ns since the process's timestamp 0 (several inputs: since the earliest one's, as the other exports place them) |
//! | `wall_time` | timestamp (ns, UTC); RFC 3339 in CSV | the wall-clock time, from the header's anchor; empty when the file has none, or when the times were put on another process's clock (`--sync`) |
//! | `pid` | u32 | the process (its input's header) |
//! | `thread` | u64 | gyr's thread id |
//! | `thread_name` | string | the thread's name, from its description; empty before one is seen |
//! | `seq` | u64 | the thread's sequence number |
//! | `perturbation_ns` | u64 | the thread's cumulative time spent waiting on monitoring |
//!
//! then one column per field, named as it (a field named like one of the columns above gets
//! `_field` added): scalars as their type, `string` as text, `bytes` as binary (hexadecimal in
//! CSV), and an array `[T; N]` as `N` columns `name_0` .. `name_{N-1}` of type `T`.
//!
//! A record whose payload does not match its type, or of a type never described, is counted in
//! [`TableStats::skipped`] and left out.

use super::{Consumer, FileStart};
use gyr_core::ThreadInfo;
use gyr_core::record::RecordHeader;
use gyr_core::schema::{FieldType, ScalarType, Schema, TypeId};
use gyr_core::trace::TraceEnd;
use std::io;
use std::path::{Path, PathBuf};

/// The per-record lookups (type id, thread) hash with foldhash: a table export spends much of
/// its time on them.
type FastMap<K, V> = foldhash::HashMap<K, V>;

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnType {
    /// A scalar of gyr's.
    Scalar(ScalarType),
    /// UTF-8 text.
    Str,
    /// Bytes.
    Bytes,
    /// ns since the Unix epoch, UTC.
    WallTime,
}

/// A column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) ty: ColumnType,
}

/// One cell of a row, borrowed from the record it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Cell<'a> {
    Null,
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(&'a str),
    Bytes(&'a [u8]),
}

/// The columns every record has (the first seven of each table), as the table writer hands
/// them to a sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fixed<'a> {
    pub(crate) time_ns: u64,
    /// ns since the Unix epoch; `None` when the file has no anchor or the times were moved.
    pub(crate) wall_ns: Option<u64>,
    pub(crate) pid: u32,
    pub(crate) thread: u64,
    /// `None` before the thread's description is seen.
    pub(crate) thread_name: Option<&'a str>,
    pub(crate) seq: u64,
    pub(crate) perturbation_ns: u64,
}

/// Where the tables go: CSV files, Parquet files or Arrow tables in memory.
pub(crate) trait TableSink {
    /// A new table of `columns` (those of `schema`, see [`columns`]), written to a file named
    /// `file` (without its extension). Returns its index, counted from 0 in order of creation.
    fn create(&mut self, file: &str, schema: &Schema, columns: Vec<Column>) -> io::Result<usize>;
    /// A record of table `table`, whose type is `schema`: its fixed columns, then its payload's
    /// fields. Returns false, having written nothing, when the payload does not match `schema`.
    fn record(
        &mut self,
        table: usize,
        schema: &Schema,
        fixed: &Fixed<'_>,
        payload: &[u8],
    ) -> io::Result<bool>;
    /// Every row is given: close every file.
    fn finish(&mut self) -> io::Result<()>;
    /// Records [`TableSink::record`] took but found, once [`TableSink::finish`]ed, not to match
    /// their type: a sink that checks payloads on other threads answers `true` first.
    fn refused(&self) -> u64 {
        0
    }
    /// The thread names [`Fixed::thread_name`] borrows from may have changed (a thread was
    /// described, or an input begins): until then a name at the same address is the same name.
    fn renamed(&mut self) {}
}

/// The columns every table starts with.
pub const FIXED_COLUMNS: [&str; 7] = [
    "time_ns",
    "wall_time",
    "pid",
    "thread",
    "thread_name",
    "seq",
    "perturbation_ns",
];

/// The most tables one export writes (each holds a file open).
pub const MAX_TABLES: usize = 512;

/// What a table export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableStats {
    /// The tables, in order of creation: the event type's name and the file written.
    pub tables: Vec<(String, PathBuf)>,
    /// Rows written.
    pub rows: u64,
    /// Records left out: a payload not matching its type, or a type never described.
    pub skipped: u64,
}

/// A table being written.
#[derive(Debug)]
struct Table {
    schema: Schema,
    /// The sink's index of it.
    index: usize,
}

/// The largest type id looked up in a vector rather than a map (ids are small and dense in
/// practice: counted from 1 by each process).
const DENSE_TYPE_IDS: usize = 1 << 16;

/// What the current input's records of one type id become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// A type never described: the record is counted as skipped.
    Unknown,
    /// A type left out by `only`: read past, not counted.
    LeftOut,
    /// Rows of the table at this index of `tables`.
    Table(usize),
}

/// The consumer of table exports: hands each record to its type's table in the sink.
#[derive(Debug)]
pub(crate) struct TableWriter<S: TableSink> {
    sink: S,
    dir: PathBuf,
    extension: &'static str,
    tables: Vec<Table>,
    /// The current input's type ids below [`DENSE_TYPE_IDS`] → routes, indexed by id.
    dense: Vec<Route>,
    /// The current input's other type ids → routes.
    sparse: FastMap<TypeId, Route>,
    /// The current input's thread names, in order of description.
    names: Vec<String>,
    /// The current input's threads → their index in `names`.
    threads: FastMap<u64, usize>,
    /// The thread of the last record and its name's index: a thread's records come in blocks.
    last_thread: Option<(u64, Option<usize>)>,
    /// File stems taken.
    stems: std::collections::HashSet<String>,
    pid: u32,
    offset_ns: u64,
    start_unix_ns: u64,
    stats: TableStats,
    /// When set, the only event type names given tables; records of others are read past.
    only: Option<std::collections::HashSet<String>>,
}

impl<S: TableSink> TableWriter<S> {
    /// Tables written by `sink` into `dir`, whose files end in `extension`.
    pub(crate) fn new(sink: S, dir: &Path, extension: &'static str) -> Self {
        TableWriter {
            sink,
            dir: dir.to_owned(),
            extension,
            tables: Vec::new(),
            dense: Vec::new(),
            sparse: FastMap::default(),
            names: Vec::new(),
            threads: FastMap::default(),
            last_thread: None,
            stems: Default::default(),
            pid: 0,
            offset_ns: 0,
            start_unix_ns: 0,
            stats: TableStats::default(),
            only: None,
        }
    }

    /// Gives tables only to the event types named in `names`.
    #[cfg_attr(not(feature = "arrow"), allow(dead_code))]
    pub(crate) fn keep_only(&mut self, names: &[String]) {
        self.only = Some(names.iter().cloned().collect());
    }

    /// The sink, once the export is done.
    #[cfg_attr(not(feature = "arrow"), allow(dead_code))]
    pub(crate) fn into_sink(self) -> S {
        self.sink
    }

    /// What was written so far.
    pub(crate) fn stats(&self) -> &TableStats {
        &self.stats
    }

    fn open_table(&mut self, schema: &Schema) -> io::Result<usize> {
        if let Some(i) = self
            .tables
            .iter()
            .position(|t| t.schema.name == schema.name && t.schema.same_shape(schema))
        {
            return Ok(i);
        }
        if self.tables.len() >= MAX_TABLES {
            return Err(io::Error::other(format!(
                "the trace holds more than {MAX_TABLES} event types (or shapes of them); export fewer files at once"
            )));
        }
        let same_name = self
            .tables
            .iter()
            .filter(|t| t.schema.name.split('#').next() == Some(&schema.name))
            .count();
        let name = if same_name == 0 {
            schema.name.clone()
        } else {
            format!("{}#{}", schema.name, same_name + 1)
        };
        let mut stem = file_stem(&name);
        while !self.stems.insert(stem.clone()) {
            stem.push('_');
        }
        let index = self.sink.create(&stem, schema, columns(schema))?;
        self.stats.tables.push((
            name.clone(),
            self.dir.join(format!("{stem}.{}", self.extension)),
        ));
        self.tables.push(Table {
            schema: Schema {
                name,
                ..schema.clone()
            },
            index,
        });
        Ok(self.tables.len() - 1)
    }

    fn set_route(&mut self, id: TypeId, route: Route) {
        match usize::try_from(id) {
            Ok(i) if i < DENSE_TYPE_IDS => {
                if self.dense.len() <= i {
                    self.dense.resize(i + 1, Route::Unknown);
                }
                self.dense[i] = route;
            }
            _ => {
                self.sparse.insert(id, route);
            }
        }
    }

    fn route(&self, id: TypeId) -> Route {
        match usize::try_from(id) {
            Ok(i) if i < DENSE_TYPE_IDS => self.dense.get(i).copied().unwrap_or(Route::Unknown),
            _ => self.sparse.get(&id).copied().unwrap_or(Route::Unknown),
        }
    }

    /// The index in `names` of `thread`'s name, if it was described.
    fn thread_name(&mut self, thread: u64) -> Option<usize> {
        match self.last_thread {
            Some((t, name)) if t == thread => name,
            _ => {
                let name = self.threads.get(&thread).copied();
                self.last_thread = Some((thread, name));
                name
            }
        }
    }
}

/// A file name of only `[A-Za-z0-9_.-]`, not starting with a dot.
fn file_stem(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        s.insert(0, '_');
    }
    s
}

/// The columns of `schema`'s table.
pub(crate) fn columns(schema: &Schema) -> Vec<Column> {
    let col = |name: &str, ty| Column {
        name: name.to_owned(),
        ty,
    };
    let mut cols = vec![
        col("time_ns", ColumnType::Scalar(ScalarType::U64)),
        col("wall_time", ColumnType::WallTime),
        col("pid", ColumnType::Scalar(ScalarType::U32)),
        col("thread", ColumnType::Scalar(ScalarType::U64)),
        col("thread_name", ColumnType::Str),
        col("seq", ColumnType::Scalar(ScalarType::U64)),
        col("perturbation_ns", ColumnType::Scalar(ScalarType::U64)),
    ];
    let mut taken: std::collections::HashSet<String> =
        FIXED_COLUMNS.iter().map(|s| s.to_string()).collect();
    let mut unique = |base: String| {
        let mut n = base;
        if taken.contains(&n) {
            n.push_str("_field");
        }
        while !taken.insert(n.clone()) {
            n.push('_');
        }
        n
    };
    for f in &schema.fields {
        match f.ty {
            FieldType::Scalar(s) => cols.push(col(&unique(f.name.clone()), ColumnType::Scalar(s))),
            FieldType::Str => cols.push(col(&unique(f.name.clone()), ColumnType::Str)),
            FieldType::Bytes => cols.push(col(&unique(f.name.clone()), ColumnType::Bytes)),
            FieldType::Array(s, n) => {
                for i in 0..n {
                    cols.push(col(
                        &unique(format!("{}_{i}", f.name)),
                        ColumnType::Scalar(s),
                    ));
                }
            }
            // A type of a later gyr: its records are skipped.
            _ => cols.push(col(&unique(f.name.clone()), ColumnType::Bytes)),
        }
    }
    cols
}

fn scalar(s: ScalarType, b: &[u8]) -> Cell<'static> {
    macro_rules! le {
        ($t:ty) => {
            <$t>::from_le_bytes(b.try_into().expect("sliced to the scalar's size"))
        };
    }
    match s {
        ScalarType::I8 => Cell::Int(le!(i8).into()),
        ScalarType::I16 => Cell::Int(le!(i16).into()),
        ScalarType::I32 => Cell::Int(le!(i32).into()),
        ScalarType::I64 => Cell::Int(le!(i64)),
        ScalarType::U8 => Cell::UInt(le!(u8).into()),
        ScalarType::U16 => Cell::UInt(le!(u16).into()),
        ScalarType::U32 => Cell::UInt(le!(u32).into()),
        ScalarType::U64 => Cell::UInt(le!(u64)),
        ScalarType::F32 => Cell::Float(le!(f32).into()),
        ScalarType::F64 => Cell::Float(le!(f64)),
        ScalarType::Bool => Cell::Bool(b[0] != 0),
        _ => Cell::Null,
    }
}

/// Appends the cells of `payload`'s fields to `out`; `None` when it does not match `schema`.
pub(crate) fn payload_cells<'a>(
    schema: &Schema,
    payload: &'a [u8],
    out: &mut Vec<Cell<'a>>,
) -> Option<()> {
    let mut at = 0usize;
    for field in &schema.fields {
        match field.ty {
            FieldType::Scalar(s) => {
                let b = payload.get(at..at.checked_add(s.size())?)?;
                at += s.size();
                out.push(scalar(s, b));
            }
            FieldType::Array(s, n) => {
                for _ in 0..n {
                    let b = payload.get(at..at.checked_add(s.size())?)?;
                    at += s.size();
                    out.push(scalar(s, b));
                }
            }
            FieldType::Str | FieldType::Bytes => {
                let len = u32::from_le_bytes(payload.get(at..at.checked_add(4)?)?.try_into().ok()?);
                at += 4;
                let b = payload.get(at..at.checked_add(len as usize)?)?;
                at += len as usize;
                out.push(if field.ty == FieldType::Str {
                    Cell::Str(std::str::from_utf8(b).ok()?)
                } else {
                    Cell::Bytes(b)
                });
            }
            _ => return None,
        }
    }
    Some(())
}

/// Sets `out` to the cells of a row: `fixed`'s, then those of `payload`'s fields; false when
/// the payload does not match `schema`. For sinks that write a row at a time (CSV).
pub(crate) fn row_cells<'a>(
    fixed: &Fixed<'a>,
    schema: &Schema,
    payload: &'a [u8],
    out: &mut Vec<Cell<'a>>,
) -> bool {
    out.clear();
    out.extend([
        Cell::UInt(fixed.time_ns),
        fixed.wall_ns.map_or(Cell::Null, Cell::UInt),
        Cell::UInt(fixed.pid.into()),
        Cell::UInt(fixed.thread),
        fixed.thread_name.map_or(Cell::Null, Cell::Str),
        Cell::UInt(fixed.seq),
        Cell::UInt(fixed.perturbation_ns),
    ]);
    payload_cells(schema, payload, out).is_some()
}

impl<S: TableSink> Consumer for TableWriter<S> {
    fn begin_file(&mut self, file: &FileStart<'_>) -> io::Result<()> {
        self.dense.clear();
        self.sparse.clear();
        self.names.clear();
        self.threads.clear();
        self.last_thread = None;
        self.sink.renamed();
        self.pid = file.header.pid;
        self.offset_ns = file.offset_ns;
        // On another process's clock, times are no longer this file's wall clock's.
        self.start_unix_ns = if file.on_clock {
            0
        } else {
            file.header.start_unix_ns
        };
        Ok(())
    }

    fn schema(&mut self, schema: &Schema) -> io::Result<()> {
        if let Some(only) = &self.only
            && !only.contains(&schema.name)
        {
            self.set_route(schema.id, Route::LeftOut);
            return Ok(());
        }
        let t = self.open_table(schema)?;
        self.set_route(schema.id, Route::Table(t));
        Ok(())
    }

    fn thread(&mut self, thread: &ThreadInfo) -> io::Result<()> {
        match self.threads.get(&thread.id) {
            Some(&i) => thread.name.clone_into(&mut self.names[i]),
            None => {
                self.threads.insert(thread.id, self.names.len());
                self.names.push(thread.name.clone());
            }
        }
        self.last_thread = None;
        self.sink.renamed();
        Ok(())
    }

    fn record(&mut self, thread: u64, header: &RecordHeader, payload: &[u8]) -> io::Result<()> {
        let t = match self.route(header.type_id) {
            Route::Table(t) => t,
            Route::LeftOut => return Ok(()),
            Route::Unknown => {
                self.stats.skipped += 1;
                return Ok(());
            }
        };
        let name = self.thread_name(thread);
        let fixed = Fixed {
            time_ns: header.timestamp.saturating_add(self.offset_ns),
            wall_ns: (self.start_unix_ns > 0)
                .then(|| self.start_unix_ns.saturating_add(header.timestamp)),
            pid: self.pid,
            thread,
            thread_name: name.and_then(|i| self.names.get(i)).map(String::as_str),
            seq: header.seq,
            perturbation_ns: header.perturbation,
        };
        let table = &self.tables[t];
        if self
            .sink
            .record(table.index, &table.schema, &fixed, payload)?
        {
            self.stats.rows += 1;
        } else {
            self.stats.skipped += 1;
        }
        Ok(())
    }

    fn end(&mut self, _end: &TraceEnd) -> io::Result<()> {
        Ok(())
    }

    fn end_file(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.sink.finish()?;
        let refused = self.sink.refused();
        self.stats.rows -= refused;
        self.stats.skipped += refused;
        Ok(())
    }

    fn events(&self) -> u64 {
        self.stats.rows
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// ns since the Unix epoch as RFC 3339 in UTC with nine decimals:
/// `2026-11-27T07:50:01.123456789Z`.
pub(crate) fn rfc3339(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let frac = ns % 1_000_000_000;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::Field;

    #[test]
    fn wall_clock_text() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        // 2000-02-29 (a leap day of a century divisible by 400) 12:34:56.000000789
        assert_eq!(
            rfc3339(951_827_696_000_000_789),
            "2000-02-29T12:34:56.000000789Z"
        );
        assert_eq!(
            rfc3339(1_795_765_801_123_456_789),
            "2026-11-27T07:50:01.123456789Z"
        );
    }

    #[test]
    fn columns_are_typed_and_unique() {
        // Not a valid name for a program's type, but a file read may hold anything.
        let s = Schema {
            id: 7,
            name: "odd name".into(),
            fields: vec![
                Field::new("pid", FieldType::Scalar(ScalarType::I16)),
                Field::new("v", FieldType::Array(ScalarType::F32, 2)),
                Field::new("v_0", FieldType::Str),
            ],
        };
        let names: Vec<_> = columns(&s).into_iter().map(|c| c.name).collect();
        assert_eq!(
            &names[7..],
            ["pid_field", "v_0", "v_1", "v_0_field"].map(String::from)
        );
        assert_eq!(file_stem(&s.name), "odd_name");
        assert_eq!(file_stem("gyr.steer#2"), "gyr.steer_2");
        assert_eq!(file_stem(".x"), "_.x");
    }

    #[test]
    fn short_payloads_are_refused() {
        let s = Schema::new(
            1,
            "t",
            vec![
                Field::new("a", FieldType::Scalar(ScalarType::U16)),
                Field::new("s", FieldType::Str),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut p = 513u16.to_le_bytes().to_vec();
        p.extend(3u32.to_le_bytes());
        p.extend(b"a,b");
        assert!(payload_cells(&s, &p, &mut out).is_some());
        assert_eq!(out, [Cell::UInt(513), Cell::Str("a,b")]);
        out.clear();
        assert!(payload_cells(&s, &p[..p.len() - 1], &mut out).is_none());
        out.clear();
        let mut long = p.clone();
        long[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(payload_cells(&s, &long, &mut out).is_none());
    }
}
