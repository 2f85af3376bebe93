//! Imports of other tools' traces into gyr trace files: Pablo's SDDF (ASCII and binary, gyr's
//! own exports restored exactly) and PICL's trace files (the format ParaGraph reads).
//!
//! An import streams: it reads its input once and writes the gyr trace as it goes, holding at
//! most a few MiB of records. Every size read from the input (a packet's length, a string's, an
//! array's extent, a count of fields) is checked against what remains and against a fixed
//! limit before anything is allocated, so a crafted file cannot make an import allocate more
//! than that. Bad input ends the import with an [`ImportError`] naming the line (text) or byte
//! (binary) and what was expected there.

pub mod picl;
pub mod sddf;

use gyr_core::ThreadInfo;
use gyr_core::record::push_record;
use gyr_core::schema::{Schema, TypeId};
use gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, Write};

/// The formats an import reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// Pablo's SDDF as text (`SDDFA`).
    SddfAscii,
    /// Pablo's SDDF, binary (`SDDFB`).
    SddfBinary,
    /// PICL's trace file: the old ParaGraph format or the newer MPICL one, told apart by
    /// their first record.
    Picl,
}

impl ImportFormat {
    /// The names the command line takes.
    pub const NAMES: [&'static str; 3] = ["sddf-ascii", "sddf-binary", "picl"];
}

impl std::str::FromStr for ImportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sddf-ascii" | "sddfa" => Ok(ImportFormat::SddfAscii),
            "sddf-binary" | "sddfb" => Ok(ImportFormat::SddfBinary),
            "picl" | "trf" => Ok(ImportFormat::Picl),
            _ => Err(format!(
                "unknown import format `{s}`: use one of {}",
                ImportFormat::NAMES.join(", ")
            )),
        }
    }
}

/// Where in the input something was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A line of a text input, from 1.
    Line(u64),
    /// A byte offset of a binary input, from 0.
    Byte(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(l) => write!(f, "line {l}"),
            Location::Byte(b) => write!(f, "byte {b}"),
        }
    }
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The input is not what its format says it should be.
    #[error("{at}: {what}")]
    Bad {
        /// Where.
        at: Location,
        /// What was found, and what was expected.
        what: String,
    },
    /// Reading the input failed.
    #[error("reading the input failed: {0}")]
    Read(io::Error),
    /// Writing the trace failed.
    #[error("writing the trace failed: {0}")]
    Write(io::Error),
}

impl ImportError {
    pub(crate) fn bad(at: Location, what: impl Into<String>) -> Self {
        ImportError::Bad {
            at,
            what: what.into(),
        }
    }
}

/// What an import wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Schemas written.
    pub schemas: u64,
    /// Threads written.
    pub threads: u64,
    /// Records written.
    pub records: u64,
}

/// Records buffered across threads before they are written.
const BUFFERED: usize = 4 << 20;

/// Builds a gyr trace from what an importer finds, in the order it finds it.
///
/// The writer is made when the header is known ([`Builder::header`]), or with a default
/// header at the first schema, thread or record; records are gathered per thread and written
/// in blocks.
pub(crate) struct Builder<W: Write> {
    out: Option<W>,
    writer: Option<TraceWriter<W>>,
    default_header: TraceHeader,
    buffers: HashMap<u64, Vec<u8>>,
    buffered: usize,
    threads: HashSet<u64>,
    schemas: HashMap<TypeId, Schema>,
    seq: HashMap<u64, u64>,
    report: ImportReport,
    last_ts: u64,
}

impl<W: Write> fmt::Debug for Builder<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Builder<W> {
    /// A builder writing to `out`; `default_header` is used unless the input has one.
    pub(crate) fn new(out: W, default_header: TraceHeader) -> Self {
        Builder {
            out: Some(out),
            writer: None,
            default_header,
            buffers: HashMap::new(),
            buffered: 0,
            threads: HashSet::new(),
            schemas: HashMap::new(),
            seq: HashMap::new(),
            report: ImportReport::default(),
            last_ts: 0,
        }
    }

    /// Whether the trace has been started (its header written).
    pub(crate) fn started(&self) -> bool {
        self.writer.is_some()
    }

    /// Starts the trace with `header` (only before anything else was written).
    pub(crate) fn header(&mut self, header: &TraceHeader) -> Result<(), ImportError> {
        if self.writer.is_none() {
            let out = self.out.take().expect("a builder starts once");
            self.writer = Some(TraceWriter::new(out, header).map_err(ImportError::Write)?);
        }
        Ok(())
    }

    /// Starts the trace with the default header, if it has not started.
    pub(crate) fn start_default(&mut self) -> Result<(), ImportError> {
        if self.writer.is_none() {
            let header = self.default_header.clone();
            self.header(&header)?;
        }
        Ok(())
    }

    fn writer(&mut self) -> Result<&mut TraceWriter<W>, ImportError> {
        self.start_default()?;
        Ok(self.writer.as_mut().expect("started above"))
    }

    pub(crate) fn schema(&mut self, schema: &Schema) -> Result<(), ImportError> {
        self.writer()?.schema(schema).map_err(ImportError::Write)?;
        self.schemas.insert(schema.id, schema.clone());
        self.report.schemas += 1;
        Ok(())
    }

    /// Whether `id` was described already.
    pub(crate) fn has_thread(&self, id: u64) -> bool {
        self.threads.contains(&id)
    }

    pub(crate) fn thread(&mut self, info: &ThreadInfo) -> Result<(), ImportError> {
        self.writer()?.thread(info).map_err(ImportError::Write)?;
        if self.threads.insert(info.id) {
            self.report.threads += 1;
        }
        Ok(())
    }

    /// Appends a record; `seq` `None` numbers it after the thread's previous record.
    pub(crate) fn record(
        &mut self,
        thread: u64,
        type_id: TypeId,
        ts: u64,
        seq: Option<u64>,
        perturbation: u64,
        payload: &[u8],
    ) -> Result<(), ImportError> {
        self.writer()?;
        let last = self.seq.entry(thread).or_insert(0);
        let seq = seq.unwrap_or(*last + 1);
        *last = seq;
        let buf = self.buffers.entry(thread).or_default();
        let before = buf.len();
        push_record(buf, type_id, ts, seq, perturbation, payload);
        self.buffered += buf.len() - before;
        self.report.records += 1;
        self.last_ts = self.last_ts.max(ts);
        if self.buffered >= BUFFERED {
            self.flush_records()?;
        }
        Ok(())
    }

    fn flush_records(&mut self) -> Result<(), ImportError> {
        let writer = self.writer.as_mut().expect("records come after the start");
        let mut threads: Vec<u64> = self.buffers.keys().copied().collect();
        threads.sort_unstable();
        for t in threads {
            let buf = self.buffers.get_mut(&t).expect("listed above");
            if !buf.is_empty() {
                writer.records(t, buf).map_err(ImportError::Write)?;
                buf.clear();
            }
        }
        self.buffered = 0;
        Ok(())
    }

    /// Writes what is buffered and the end block (`end`, or totals of what was written).
    pub(crate) fn finish(
        mut self,
        end: Option<TraceEnd>,
    ) -> Result<(W, ImportReport), ImportError> {
        self.writer()?;
        self.flush_records()?;
        let end = end.unwrap_or(TraceEnd {
            end_ns: self.last_ts,
            records: self.report.records,
            lost: 0,
            filtered: 0,
        });
        let writer = self.writer.take().expect("started above");
        let out = writer.finish(&end).map_err(ImportError::Write)?;
        Ok((out, self.report))
    }
}

/// `name` made a valid schema name: letters, digits, `_`, `.` and `-`, starting with a letter
/// or `_`, at most 128 bytes; anything else becomes `_`.
pub(crate) fn schema_name(name: &str) -> String {
    clean_name(name, &['.', '-'])
}

/// `name` made a valid field name: letters, digits and `_`.
pub(crate) fn field_name(name: &str) -> String {
    clean_name(name, &[])
}

fn clean_name(name: &str, extra: &[char]) -> String {
    let mut s: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || extra.contains(&c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, '_');
    }
    s.truncate(120);
    s
}

/// `names` made unique by suffixes `_2`, `_3`, ...
pub(crate) fn unique(names: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .map(|n| {
            let mut candidate = n.clone();
            let mut k = 2;
            while !seen.insert(candidate.clone()) {
                candidate = format!("{n}_{k}");
                k += 1;
            }
            candidate
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_valid() {
        assert_eq!(schema_name("NX send"), "NX_send");
        assert_eq!(schema_name("gyr.mutex-x"), "gyr.mutex-x");
        assert_eq!(field_name("time stamp"), "time_stamp");
        assert_eq!(field_name("2nd"), "_2nd");
        assert_eq!(
            unique(vec!["a".into(), "a".into(), "a".into()]),
            vec!["a", "a_2", "a_3"]
        );
        assert!(Schema::new(1, schema_name("é x"), vec![]).is_ok());
    }
}
