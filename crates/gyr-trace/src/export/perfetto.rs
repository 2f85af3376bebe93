//! Perfetto's protobuf trace, encoded by hand.
//!
//! A Perfetto trace is `Trace { repeated TracePacket packet = 1; }`: each packet is written as
//! field 1 of the outer message as soon as it is made, so the output streams. Packets use only
//! the stable TrackEvent protocol (field numbers from Perfetto's published
//! `perfetto_trace.proto`, checked against its Python descriptors by gyr's tests):
//!
//! - one `TrackDescriptor` per process (`ProcessDescriptor`: pid, name, command line) and per
//!   thread (`ThreadDescriptor`: pid, the OS thread id, its name), a child track of its
//!   thread per lock it held, and a `CounterDescriptor` track per counter of the process;
//! - `TrackEvent`s: `SLICE_BEGIN`/`SLICE_END`, `INSTANT` (with `DebugAnnotation`s of the
//!   record's fields), `COUNTER`, and `flow_ids`/`terminating_flow_ids`;
//! - every packet carries `trusted_packet_sequence_id` (one sequence per input) and its
//!   timestamp in ns on the trace's default clock.
//!
//! Hand-encoding rather than `prost` keeps a counter event to one pass over a few dozen bytes
//! with no allocation: the export's target is ten million events a second. Track uuids are
//! small integers handed out in order, so they take a byte or two.

use super::timeline::{Flows, Num, Th, Timeline, Track, field_len, scalar};
use gyr_core::schema::{FieldType, Schema};
use std::collections::HashMap;
use std::io::{self, Write};

// Field numbers (perfetto/trace/*.proto).
const TRACE_PACKET: u32 = 1;
const PACKET_TIMESTAMP: u32 = 8;
const PACKET_SEQUENCE_ID: u32 = 10;
const PACKET_TRACK_EVENT: u32 = 11;
const PACKET_SEQUENCE_FLAGS: u32 = 13;
const PACKET_TRACK_DESCRIPTOR: u32 = 60;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;

const TRACK_UUID: u32 = 1;
const TRACK_NAME: u32 = 2;
const TRACK_PROCESS: u32 = 3;
const TRACK_THREAD: u32 = 4;
const TRACK_PARENT_UUID: u32 = 5;
const TRACK_COUNTER: u32 = 8;

const PROCESS_PID: u32 = 1;
const PROCESS_CMDLINE: u32 = 2;
const PROCESS_NAME: u32 = 6;

const THREAD_PID: u32 = 1;
const THREAD_TID: u32 = 2;
const THREAD_NAME: u32 = 5;

const EVENT_TYPE: u32 = 9;
const EVENT_TRACK_UUID: u32 = 11;
const EVENT_CATEGORIES: u32 = 22;
const EVENT_NAME: u32 = 23;
const EVENT_COUNTER_VALUE: u32 = 30;
const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;
const EVENT_FLOW_IDS: u32 = 47;
const EVENT_TERMINATING_FLOW_IDS: u32 = 48;
const EVENT_DEBUG_ANNOTATIONS: u32 = 4;

const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;

const ANNOTATION_NAME: u32 = 10;
const ANNOTATION_BOOL: u32 = 2;
const ANNOTATION_UINT: u32 = 3;
const ANNOTATION_INT: u32 = 4;
const ANNOTATION_DOUBLE: u32 = 5;
const ANNOTATION_STRING: u32 = 6;
const ANNOTATION_ARRAY: u32 = 12;

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

/// Linux's largest pid is 2^22; a second input with a pid already used is given one above it.
const SYNTHETIC_PID: u32 = 1 << 22;

/// The protobuf encoding of a few field kinds.
mod pb {
    #[inline]
    pub(super) fn varint(buf: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        buf.push(v as u8);
    }

    #[inline]
    pub(super) fn varint_len(v: u64) -> usize {
        // 1 byte per 7 bits, at least 1.
        ((64 - (v | 1).leading_zeros() as usize) + 6) / 7
    }

    #[inline]
    pub(super) fn key(buf: &mut Vec<u8>, field: u32, wire: u32) {
        varint(buf, u64::from(field << 3 | wire));
    }

    #[inline]
    pub(super) fn uint(buf: &mut Vec<u8>, field: u32, v: u64) {
        key(buf, field, super::VARINT);
        varint(buf, v);
    }

    #[inline]
    pub(super) fn bytes(buf: &mut Vec<u8>, field: u32, b: &[u8]) {
        key(buf, field, super::LEN);
        varint(buf, b.len() as u64);
        buf.extend_from_slice(b);
    }

    #[inline]
    pub(super) fn fixed64(buf: &mut Vec<u8>, field: u32, v: u64) {
        key(buf, field, super::FIXED64);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

/// Writes a Perfetto trace to `W`.
#[derive(Debug)]
pub(crate) struct PerfettoWriter<W: Write> {
    out: W,
    /// The packet being built (its body), and the message nested in it.
    packet: Vec<u8>,
    nested: Vec<u8>,
    annotation: Vec<u8>,
    events: u64,
    next_uuid: u64,
    sequence: u64,
    pid: u32,
    pids: Vec<u32>,
    process_uuid: u64,
    threads: HashMap<u64, u64>,
    /// The last thread looked up, and its uuid: records come in blocks of one thread.
    last_thread: (u64, u64),
    holds: Vec<u64>,
    counters: Vec<u64>,
}

impl<W: Write> PerfettoWriter<W> {
    pub(crate) fn new(out: W) -> Self {
        PerfettoWriter {
            out,
            packet: Vec::with_capacity(256),
            nested: Vec::with_capacity(256),
            annotation: Vec::with_capacity(64),
            events: 0,
            next_uuid: 1,
            sequence: 0,
            pid: 0,
            pids: Vec::new(),
            process_uuid: 0,
            threads: HashMap::new(),
            last_thread: (u64::MAX, 0),
            holds: Vec::new(),
            counters: Vec::new(),
        }
    }

    fn uuid(&mut self) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    #[inline]
    fn thread_uuid(&mut self, id: u64) -> u64 {
        if self.last_thread.0 == id {
            return self.last_thread.1;
        }
        let uuid = match self.threads.get(&id) {
            Some(&u) => u,
            None => {
                let u = self.uuid();
                self.threads.insert(id, u);
                u
            }
        };
        self.last_thread = (id, uuid);
        uuid
    }

    /// Writes the packet built in `self.packet`.
    fn emit(&mut self) -> io::Result<()> {
        let mut head = [0u8; 11];
        head[0] = (TRACE_PACKET << 3 | LEN) as u8;
        let mut n = 1;
        let mut v = self.packet.len() as u64;
        while v >= 0x80 {
            head[n] = v as u8 | 0x80;
            v >>= 7;
            n += 1;
        }
        head[n] = v as u8;
        self.out.write_all(&head[..=n])?;
        self.out.write_all(&self.packet)?;
        self.events += 1;
        Ok(())
    }

    /// A packet holding the track descriptor in `self.nested`.
    fn descriptor_packet(&mut self) -> io::Result<()> {
        self.packet.clear();
        pb::uint(&mut self.packet, PACKET_SEQUENCE_ID, self.sequence);
        pb::bytes(&mut self.packet, PACKET_TRACK_DESCRIPTOR, &self.nested);
        self.emit()
    }

    /// A packet holding the track event in `self.nested`, at `ts`.
    fn event_packet(&mut self, ts: u64) -> io::Result<()> {
        self.packet.clear();
        pb::uint(&mut self.packet, PACKET_TIMESTAMP, ts);
        pb::uint(&mut self.packet, PACKET_SEQUENCE_ID, self.sequence);
        pb::bytes(&mut self.packet, PACKET_TRACK_EVENT, &self.nested);
        self.emit()
    }

    fn flows(&mut self, flows: Flows<'_>) {
        for &f in flows.out {
            pb::fixed64(&mut self.nested, EVENT_FLOW_IDS, f);
        }
        for &f in flows.end {
            pb::fixed64(&mut self.nested, EVENT_TERMINATING_FLOW_IDS, f);
        }
    }

    fn track(&mut self, th: Th, track: Track<'_>) -> u64 {
        match track {
            Track::Thread => self.thread_uuid(th.id),
            Track::Hold { index, .. } => self.holds.get(index as usize).copied().unwrap_or(0),
        }
    }

    /// Appends `schema`'s fields decoded from `payload` as debug annotations.
    fn annotations(&mut self, schema: &Schema, payload: &[u8]) {
        let mut at = 0usize;
        for f in &schema.fields {
            let Some(len) = field_len(f.ty, payload, at) else {
                break;
            };
            let Some(bytes) = payload.get(at..at.saturating_add(len)) else {
                break;
            };
            at += len;
            self.annotation.clear();
            pb::bytes(&mut self.annotation, ANNOTATION_NAME, f.name.as_bytes());
            match f.ty {
                FieldType::Scalar(s) => annotate(&mut self.annotation, s, bytes),
                FieldType::Str => {
                    let text = String::from_utf8_lossy(&bytes[4..]);
                    pb::bytes(&mut self.annotation, ANNOTATION_STRING, text.as_bytes());
                }
                FieldType::Bytes => {
                    let mut hex = String::with_capacity(2 + 2 * (bytes.len() - 4));
                    hex.push_str("0x");
                    for b in &bytes[4..] {
                        hex.push_str(&format!("{b:02x}"));
                    }
                    pb::bytes(&mut self.annotation, ANNOTATION_STRING, hex.as_bytes());
                }
                FieldType::Array(s, _) => {
                    let mut element = Vec::with_capacity(16);
                    for chunk in bytes.chunks_exact(s.size()) {
                        element.clear();
                        annotate(&mut element, s, chunk);
                        pb::bytes(&mut self.annotation, ANNOTATION_ARRAY, &element);
                    }
                }
                _ => {}
            }
            pb::bytes(&mut self.nested, EVENT_DEBUG_ANNOTATIONS, &self.annotation);
        }
    }
}

/// A scalar as a debug annotation's value.
fn annotate(buf: &mut Vec<u8>, s: gyr_core::schema::ScalarType, bytes: &[u8]) {
    use gyr_core::schema::ScalarType as S;
    match (s, scalar(s, bytes)) {
        (S::Bool, Num::Int(v)) => pb::uint(buf, ANNOTATION_BOOL, v as u64),
        (S::U64, _) => pb::uint(
            buf,
            ANNOTATION_UINT,
            u64::from_le_bytes(bytes.try_into().expect("8 bytes")),
        ),
        (_, Num::Int(v)) => pb::uint(buf, ANNOTATION_INT, v as u64),
        (_, Num::Float(v)) => pb::fixed64(buf, ANNOTATION_DOUBLE, v.to_bits()),
    }
}

impl<W: Write> Timeline for PerfettoWriter<W> {
    fn process(
        &mut self,
        index: usize,
        pid: u32,
        name: &str,
        cmdline: &[String],
    ) -> io::Result<()> {
        self.sequence = index as u64 + 1;
        self.threads.clear();
        self.last_thread = (u64::MAX, 0);
        self.holds.clear();
        self.counters.clear();
        self.pid = if self.pids.contains(&pid) {
            SYNTHETIC_PID + index as u32
        } else {
            pid
        };
        self.pids.push(self.pid);
        self.process_uuid = self.uuid();
        // The sequence's first packet says it starts from a clean state.
        self.packet.clear();
        pb::uint(&mut self.packet, PACKET_SEQUENCE_ID, self.sequence);
        pb::uint(
            &mut self.packet,
            PACKET_SEQUENCE_FLAGS,
            SEQ_INCREMENTAL_STATE_CLEARED,
        );
        self.nested.clear();
        let mut process = Vec::new();
        pb::uint(&mut process, PROCESS_PID, u64::from(self.pid));
        for arg in cmdline {
            pb::bytes(&mut process, PROCESS_CMDLINE, arg.as_bytes());
        }
        pb::bytes(&mut process, PROCESS_NAME, name.as_bytes());
        pb::uint(&mut self.nested, TRACK_UUID, self.process_uuid);
        pb::bytes(&mut self.nested, TRACK_PROCESS, &process);
        pb::bytes(&mut self.packet, PACKET_TRACK_DESCRIPTOR, &self.nested);
        self.emit()
    }

    fn thread(&mut self, th: Th, name: &str) -> io::Result<()> {
        let uuid = self.thread_uuid(th.id);
        let mut thread = Vec::with_capacity(32 + name.len());
        pb::uint(&mut thread, THREAD_PID, u64::from(self.pid));
        pb::uint(&mut thread, THREAD_TID, th.tid);
        pb::bytes(&mut thread, THREAD_NAME, name.as_bytes());
        self.nested.clear();
        pb::uint(&mut self.nested, TRACK_UUID, uuid);
        pb::uint(&mut self.nested, TRACK_PARENT_UUID, self.process_uuid);
        pb::bytes(&mut self.nested, TRACK_THREAD, &thread);
        self.descriptor_packet()
    }

    fn hold_track(&mut self, th: Th, index: u32, name: &str) -> io::Result<()> {
        let parent = self.thread_uuid(th.id);
        let uuid = self.uuid();
        if self.holds.len() <= index as usize {
            self.holds.resize(index as usize + 1, 0);
        }
        self.holds[index as usize] = uuid;
        self.nested.clear();
        pb::uint(&mut self.nested, TRACK_UUID, uuid);
        pb::uint(&mut self.nested, TRACK_PARENT_UUID, parent);
        pb::bytes(&mut self.nested, TRACK_NAME, name.as_bytes());
        self.descriptor_packet()
    }

    fn counter_track(&mut self, index: u32, name: &str) -> io::Result<()> {
        let uuid = self.uuid();
        if self.counters.len() <= index as usize {
            self.counters.resize(index as usize + 1, 0);
        }
        self.counters[index as usize] = uuid;
        self.nested.clear();
        pb::uint(&mut self.nested, TRACK_UUID, uuid);
        pb::uint(&mut self.nested, TRACK_PARENT_UUID, self.process_uuid);
        pb::bytes(&mut self.nested, TRACK_NAME, name.as_bytes());
        pb::bytes(&mut self.nested, TRACK_COUNTER, &[]);
        self.descriptor_packet()
    }

    fn begin(
        &mut self,
        ts: u64,
        th: Th,
        track: Track<'_>,
        cat: &'static str,
        name: &str,
        flows: Flows<'_>,
    ) -> io::Result<()> {
        let uuid = self.track(th, track);
        self.nested.clear();
        pb::uint(&mut self.nested, EVENT_TYPE, TYPE_SLICE_BEGIN);
        pb::uint(&mut self.nested, EVENT_TRACK_UUID, uuid);
        pb::bytes(&mut self.nested, EVENT_CATEGORIES, cat.as_bytes());
        pb::bytes(&mut self.nested, EVENT_NAME, name.as_bytes());
        self.flows(flows);
        self.event_packet(ts)
    }

    fn end(&mut self, ts: u64, th: Th, track: Track<'_>, flows: Flows<'_>) -> io::Result<()> {
        let uuid = self.track(th, track);
        self.nested.clear();
        pb::uint(&mut self.nested, EVENT_TYPE, TYPE_SLICE_END);
        pb::uint(&mut self.nested, EVENT_TRACK_UUID, uuid);
        self.flows(flows);
        self.event_packet(ts)
    }

    fn instant(
        &mut self,
        ts: u64,
        th: Th,
        name: &str,
        fields: Option<(&Schema, &[u8])>,
        flows: Flows<'_>,
    ) -> io::Result<()> {
        let uuid = self.thread_uuid(th.id);
        self.nested.clear();
        pb::uint(&mut self.nested, EVENT_TYPE, TYPE_INSTANT);
        pb::uint(&mut self.nested, EVENT_TRACK_UUID, uuid);
        pb::bytes(&mut self.nested, EVENT_NAME, name.as_bytes());
        if let Some((schema, payload)) = fields {
            self.annotations(schema, payload);
        }
        self.flows(flows);
        self.event_packet(ts)
    }

    #[inline]
    fn counter(&mut self, ts: u64, _th: Th, index: u32, value: Num) -> io::Result<()> {
        let uuid = self.counters.get(index as usize).copied().unwrap_or(0);
        // The hot path: the packet in one buffer, its lengths computed up front.
        // TrackEvent: type (2 bytes), track_uuid (1 + n), value (2 + 8, or 2 + n).
        let value_len = match value {
            Num::Float(_) => 2 + 8,
            Num::Int(v) => 2 + pb::varint_len(v as u64),
        };
        let event_len = 2 + 1 + pb::varint_len(uuid) + value_len;
        let packet_len = 1
            + pb::varint_len(ts)
            + 1
            + pb::varint_len(self.sequence)
            + 1
            + pb::varint_len(event_len as u64)
            + event_len;
        let p = &mut self.packet;
        p.clear();
        pb::key(p, TRACE_PACKET, LEN);
        pb::varint(p, packet_len as u64);
        pb::uint(p, PACKET_TIMESTAMP, ts);
        pb::uint(p, PACKET_SEQUENCE_ID, self.sequence);
        pb::key(p, PACKET_TRACK_EVENT, LEN);
        pb::varint(p, event_len as u64);
        pb::uint(p, EVENT_TYPE, TYPE_COUNTER);
        pb::uint(p, EVENT_TRACK_UUID, uuid);
        match value {
            Num::Float(v) => pb::fixed64(p, EVENT_DOUBLE_COUNTER_VALUE, v.to_bits()),
            Num::Int(v) => pb::uint(p, EVENT_COUNTER_VALUE, v as u64),
        }
        debug_assert_eq!(p.len(), 1 + pb::varint_len(packet_len as u64) + packet_len);
        self.out.write_all(p)?;
        self.events += 1;
        Ok(())
    }

    fn end_process(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn events(&self) -> u64 {
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::pb;

    #[test]
    fn varints() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut b = Vec::new();
            pb::varint(&mut b, v);
            assert_eq!(b.len(), pb::varint_len(v), "{v}");
        }
        let mut b = Vec::new();
        pb::varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
    }
}
