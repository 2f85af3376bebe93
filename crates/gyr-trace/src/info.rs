//! What a trace file holds, in one streaming pass: the header, the schemas and threads with
//! their record counts and time ranges, losses, and whether the file ended cleanly or was cut
//! off (with what could not be read).
//!
//! `gyr trace stats` answers "how busy was the program"; this answers "what is in this file and
//! can I trust it", which is the first question before exporting, merging or replaying one.
//! Memory is constant apart from one entry per schema and per thread: records are counted as
//! they pass, never kept.

use gyr_core::schema::{Schema, TypeId};
use gyr_core::trace::{Damage, Item, ReadSummary, TraceEnd, TraceHeader, TraceReader};
use gyr_core::{LOST_EVENT_NAME, ThreadInfo};
use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::path::Path;

/// Records and time range of one schema or thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Span {
    /// Records counted.
    pub records: u64,
    /// The earliest timestamp, ns since the process's timestamp 0 (`None`: no record).
    pub first_ns: Option<u64>,
    /// The latest timestamp.
    pub last_ns: Option<u64>,
}

impl Span {
    fn add(&mut self, t: u64) {
        self.records += 1;
        self.first_ns = Some(self.first_ns.map_or(t, |f| f.min(t)));
        self.last_ns = Some(self.last_ns.map_or(t, |l| l.max(t)));
    }
}

/// A schema of the file, with what was recorded under it.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaInfo {
    /// The schema (name, id, fields with their types). Schemas carry no units today.
    pub schema: Schema,
    /// Its records.
    pub span: Span,
}

/// A thread of the file, with what it recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSummary {
    /// gyr's thread id.
    pub id: u64,
    /// Its description, if the file holds one (a thread known only from its records has none).
    pub info: Option<ThreadInfo>,
    /// Its records.
    pub span: Span,
    /// Events of this thread reported lost by `gyr.lost` records.
    pub lost: u64,
}

/// Everything [`read`] found out about a trace file.
#[derive(Debug, Clone)]
pub struct TraceInfo {
    /// The file's size in bytes, when known.
    pub file_bytes: Option<u64>,
    /// The trace format version.
    pub format_version: u32,
    /// The header of the process that wrote it.
    pub header: TraceHeader,
    /// Schemas by id.
    pub schemas: BTreeMap<TypeId, SchemaInfo>,
    /// Threads by gyr id.
    pub threads: BTreeMap<u64, ThreadSummary>,
    /// All records.
    pub span: Span,
    /// Events reported lost by `gyr.lost` records, all threads together.
    pub lost_reported: u64,
    /// The end block of a file closed cleanly: the writer's own totals.
    pub end: Option<TraceEnd>,
    /// What reading found: chunks, clean end, damage.
    pub summary: ReadSummary,
}

impl TraceInfo {
    /// Whether the file ended with its end block.
    pub fn clean_end(&self) -> bool {
        self.summary.clean_end
    }

    /// Whether the file ends inside a chunk (the writer was killed or is still running).
    pub fn cut_off(&self) -> bool {
        self.summary.damage.iter().any(Damage::is_cut_off)
    }

    /// Chunks that could not be read: cut off, failing their checksum, or holding a malformed
    /// block.
    pub fn unreadable_chunks(&self) -> u64 {
        self.summary
            .damage
            .iter()
            .filter(|d| {
                matches!(
                    d,
                    Damage::Truncated { .. } | Damage::BadChecksum { .. } | Damage::BadBlock { .. }
                )
            })
            .count() as u64
    }

    /// Bytes known to be unreadable: the present part of a cut-off chunk and skipped garbage.
    /// (A chunk failing its checksum is counted in [`TraceInfo::unreadable_chunks`]; its
    /// length field cannot be trusted, so its bytes are not counted here.)
    pub fn unreadable_bytes(&self) -> u64 {
        self.summary
            .damage
            .iter()
            .map(|d| match d {
                Damage::Truncated { present, .. } => *present,
                Damage::Skipped { len, .. } => *len,
                _ => 0,
            })
            .sum()
    }

    /// What `gyr trace info --json` prints for the file at `file`: one object (the same for
    /// every reader of it, the command and the Python package).
    pub fn to_json(&self, file: &Path) -> serde_json::Value {
        let info = self;
        let h = &info.header;
        serde_json::json!({
            "file": file.display().to_string(),
            "file_bytes": info.file_bytes,
            "format_version": info.format_version,
            "header": {
                "pid": h.pid, "host": h.host, "command_line": h.command_line,
                "start_unix_ns": h.start_unix_ns, "clock_source": h.clock_source,
                "ticks_per_second": h.ticks_per_second, "sensor_cost_ns": h.sensor_cost_ns,
                "policy": h.policy, "gyr_version": h.gyr_version,
            },
            "chunks": info.summary.chunks,
            "records": span_json(&info.span),
            "closed_cleanly": info.clean_end(),
            "cut_off": info.cut_off(),
            "unreadable_chunks": info.unreadable_chunks(),
            "unreadable_bytes": info.unreadable_bytes(),
            "damage": info.summary.damage.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            "lost_reported": info.lost_reported,
            "end": info.end.as_ref().map(|e| serde_json::json!({
                "end_ns": e.end_ns, "records": e.records, "lost": e.lost, "filtered": e.filtered,
            })),
            "schemas": info.schemas.values().map(|s| serde_json::json!({
                "id": s.schema.id,
                "name": s.schema.name,
                "fields": s.schema.fields.iter().map(|f| serde_json::json!({
                    "name": f.name, "type": f.ty.to_string(),
                })).collect::<Vec<_>>(),
                "records": span_json(&s.span),
            })).collect::<Vec<_>>(),
            "threads": info.threads.values().map(|t| serde_json::json!({
                "id": t.id,
                "name": t.info.as_ref().map(|i| i.name.clone()),
                "os_tid": t.info.as_ref().map(|i| i.os_tid),
                "records": span_json(&t.span),
                "lost": t.lost,
            })).collect::<Vec<_>>(),
        })
    }
}

fn span_json(s: &Span) -> serde_json::Value {
    serde_json::json!({ "records": s.records, "first_ns": s.first_ns, "last_ns": s.last_ns })
}

/// Reads the trace at `path` through, counting.
pub fn read_file(path: impl AsRef<Path>) -> Result<TraceInfo, gyr_core::trace::OpenError> {
    let path = path.as_ref();
    let len = std::fs::metadata(path).ok().map(|m| m.len());
    let reader = TraceReader::open(path)?;
    Ok(read(reader, len))
}

/// Reads `reader` through, counting; `file_bytes` is the input's size if the caller knows it.
pub fn read<R: Read + Seek>(mut reader: TraceReader<R>, file_bytes: Option<u64>) -> TraceInfo {
    let mut schemas: BTreeMap<TypeId, SchemaInfo> = BTreeMap::new();
    let mut threads: BTreeMap<u64, ThreadSummary> = BTreeMap::new();
    let mut span = Span::default();
    let mut lost_reported = 0u64;
    let mut end = None;
    reader.for_each_item(|item| match item {
        Item::Schema(s) => {
            schemas
                .entry(s.id)
                .and_modify(|e| e.schema = s.clone())
                .or_insert_with(|| SchemaInfo {
                    schema: s.clone(),
                    span: Span::default(),
                });
        }
        Item::Thread(t) => {
            thread_mut(&mut threads, t.id).info = Some(t.clone());
        }
        Item::Record { schema, record } => {
            let t = record.header.timestamp;
            span.add(t);
            thread_mut(&mut threads, record.thread).span.add(t);
            let Some(schema) = schema else { return };
            if let Some(s) = schemas.get_mut(&schema.id) {
                s.span.add(t);
            }
            if schema.name == LOST_EVENT_NAME
                && let Some((thread, count)) = lost_fields(schema, record.payload)
            {
                lost_reported += count;
                thread_mut(&mut threads, thread).lost += count;
            }
        }
        Item::End(e) => end = Some(e.clone()),
    });
    TraceInfo {
        file_bytes,
        format_version: reader.format_version(),
        header: reader.header().clone(),
        schemas,
        threads,
        span,
        lost_reported,
        end,
        summary: reader.summary().clone(),
    }
}

fn thread_mut(threads: &mut BTreeMap<u64, ThreadSummary>, id: u64) -> &mut ThreadSummary {
    threads.entry(id).or_insert_with(|| ThreadSummary {
        id,
        info: None,
        span: Span::default(),
        lost: 0,
    })
}

/// The `thread` and `count` of a `gyr.lost` record, if its schema has them as `u64`s first.
pub(crate) fn lost_fields(schema: &Schema, payload: &[u8]) -> Option<(u64, u64)> {
    let f = &schema.fields;
    if f.len() < 2
        || f[0].name != "thread"
        || f[0].ty != gyr_core::FieldType::U64
        || f[1].name != "count"
        || f[1].ty != gyr_core::FieldType::U64
    {
        return None;
    }
    let word = |at: usize| {
        Some(u64::from_le_bytes(
            payload.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    Some((word(0)?, word(8)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_core::record::push_record;
    use gyr_core::{Field, FieldType, TraceWriter, lost_schema};
    use std::io::Cursor;

    #[test]
    fn counts_schemas_threads_and_losses() {
        let load = Schema::new(2, "load", vec![Field::new("v", FieldType::F64)]).unwrap();
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
        w.schema(&load).unwrap();
        w.schema(&lost_schema(1)).unwrap();
        w.thread(&ThreadInfo {
            id: 3,
            name: "worker".into(),
            os_tid: 99,
        })
        .unwrap();
        let mut recs = Vec::new();
        push_record(&mut recs, 2, 100, 1, 0, &1.0f64.to_le_bytes());
        push_record(&mut recs, 2, 300, 2, 0, &2.0f64.to_le_bytes());
        let mut lost = Vec::new();
        for v in [3u64, 5, 10, 14] {
            lost.extend(v.to_le_bytes());
        }
        push_record(&mut recs, 1, 400, 8, 0, &lost);
        w.records(3, &recs).unwrap();
        let file = w
            .finish(&TraceEnd {
                records: 3,
                lost: 5,
                ..TraceEnd::default()
            })
            .unwrap();
        let len = file.len() as u64;
        let info = read(TraceReader::new(Cursor::new(file)).unwrap(), Some(len));
        assert!(info.clean_end() && !info.cut_off());
        assert_eq!(info.span.records, 3);
        assert_eq!(
            (info.span.first_ns, info.span.last_ns),
            (Some(100), Some(400))
        );
        assert_eq!(info.schemas[&2].span.records, 2);
        assert_eq!(info.threads[&3].span.records, 3);
        assert_eq!(info.threads[&3].lost, 5);
        assert_eq!(info.threads[&3].info.as_ref().unwrap().os_tid, 99);
        assert_eq!(info.lost_reported, 5);
        assert_eq!(info.end.as_ref().unwrap().lost, 5);
        assert_eq!(info.unreadable_bytes(), 0);
    }
}
