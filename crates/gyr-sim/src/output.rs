//! Predicted timelines written as gyr traces, so that the tools that read a measured run
//! (`gyr trace export`, `dump`, `stats`) read the prediction too, and an export of both shows
//! them one above the other.
//!
//! A predicted rank's file holds `gyr.msg.rank` and the `gyr.mpi.begin` / `gyr.mpi.end` of
//! each call at its predicted time, on the measured rank's clock (the replay's zero is the end
//! of that rank's `MPI_Init`), under the measured file's header with `gyr sim` as its command.

use crate::engine::RankPrediction;
use crate::trace::RankTrace;
use gyr_core::FieldType;
use gyr_core::record::push_record;
use gyr_core::schema::{Field, Schema};
use gyr_core::trace::{ThreadInfo, TraceEnd, TraceHeader, TraceWriter};
use gyr_core::value::{Value, encode};
use std::io::{self, Write};

/// A small writer of gyr traces with named event types, one thread.
#[derive(Debug)]
pub struct EventWriter<W: Write> {
    writer: TraceWriter<W>,
    schemas: Vec<Schema>,
    buf: Vec<u8>,
    seq: u64,
    last_ts: u64,
}

/// Field types of the events this crate writes (and its tests forge).
fn schema_of(name: &str) -> Option<Vec<Field>> {
    let f = |n: &str, t: FieldType| Field::new(n, t);
    Some(match name {
        "gyr.msg.rank" => vec![
            f("job", FieldType::Str),
            f("rank", FieldType::U32),
            f("size", FieldType::U32),
        ],
        "gyr.msg.send" | "gyr.msg.recv" => vec![
            f("peer", FieldType::U32),
            f("tag", FieldType::I32),
            f("bytes", FieldType::U64),
            f("comm", FieldType::U64),
        ],
        "gyr.mpi.begin" => vec![f("call", FieldType::Str)],
        "gyr.mpi.end" => vec![f("call", FieldType::Str), f("ret", FieldType::I32)],
        "gyr.mpi.request" => vec![
            f("request", FieldType::U64),
            f("call", FieldType::Str),
            f("recv", FieldType::Bool),
            f("peer", FieldType::I32),
            f("tag", FieldType::I32),
            f("bytes", FieldType::U64),
            f("comm", FieldType::U64),
        ],
        "gyr.mpi.complete" => vec![
            f("request", FieldType::U64),
            f("cancelled", FieldType::Bool),
        ],
        "gyr.mpi.collective" => vec![
            f("call", FieldType::Str),
            f("comm", FieldType::U64),
            f("root", FieldType::I32),
            f("sent", FieldType::U64),
            f("received", FieldType::U64),
        ],
        "gyr.mpi.comm" => vec![
            f("call", FieldType::Str),
            f("comm", FieldType::U64),
            f("parent", FieldType::U64),
            f("size", FieldType::U32),
            f("members", FieldType::Str),
        ],
        _ => return None,
    })
}

impl<W: Write> EventWriter<W> {
    /// Starts a trace with `header`, its one thread named `thread`.
    pub fn new(out: W, header: &TraceHeader, thread: &str) -> io::Result<Self> {
        let mut writer = TraceWriter::new(out, header)?;
        writer.thread(&ThreadInfo {
            id: 1,
            name: thread.to_owned(),
            os_tid: 0,
        })?;
        Ok(EventWriter {
            writer,
            schemas: Vec::new(),
            buf: Vec::new(),
            seq: 0,
            last_ts: 0,
        })
    }

    /// Records event `name` (one of `gyr.msg.*`, `gyr.mpi.*`) at `ts` with `values` in its
    /// fields' order.
    pub fn event(&mut self, ts: u64, name: &str, values: &[Value]) -> io::Result<()> {
        let schema = match self.schemas.iter().position(|s| s.name == name) {
            Some(i) => &self.schemas[i],
            None => {
                let fields = schema_of(name).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("no event {name}"))
                })?;
                let id = self.schemas.len() as u32 + 100;
                let schema = Schema::new(id, name, fields)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
                self.writer.schema(&schema)?;
                self.schemas.push(schema);
                self.schemas.last().expect("pushed above")
            }
        };
        let payload = encode(schema, values)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        self.seq += 1;
        self.last_ts = self.last_ts.max(ts);
        push_record(&mut self.buf, schema.id, ts, self.seq, 0, &payload);
        if self.buf.len() > 1 << 20 {
            self.writer.records(1, &self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes what is buffered and closes the trace.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.buf.is_empty() {
            self.writer.records(1, &self.buf)?;
        }
        self.writer.finish(&TraceEnd {
            end_ns: self.last_ts,
            records: self.seq,
            lost: 0,
            filtered: 0,
        })
    }
}

/// Writes `predicted`, the prediction for `measured`'s rank, to `out`.
pub fn write_prediction<W: Write>(
    out: W,
    measured: &RankTrace,
    predicted: &RankPrediction,
) -> io::Result<W> {
    let mut header = measured.header.clone();
    header.command_line = vec![
        "gyr".into(),
        "sim".into(),
        measured.path.display().to_string(),
    ];
    let mut w = EventWriter::new(
        out,
        &header,
        &format!("rank {} (predicted)", predicted.rank),
    )?;
    let base = measured.measured.start_ns;
    w.event(
        base,
        "gyr.msg.rank",
        &[
            Value::Str(format!("{} (predicted)", measured.job)),
            Value::UInt(predicted.rank as u64),
            Value::UInt(measured.size as u64),
        ],
    )?;
    for c in &predicted.calls {
        let name = predicted
            .names
            .get(c.name as usize)
            .cloned()
            .unwrap_or_default();
        w.event(
            base + c.start_ns,
            "gyr.mpi.begin",
            &[Value::Str(name.clone())],
        )?;
        w.event(
            base + c.end_ns,
            "gyr.mpi.end",
            &[Value::Str(name), Value::Int(0)],
        )?;
    }
    w.finish()
}
