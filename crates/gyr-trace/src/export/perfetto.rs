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

use super::timeline::{FastMap, Flows, Num, Th, Timeline, Track, field_len, scalar};
use gyr_core::schema::{FieldType, Schema};
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

    #[cfg(test)]
    pub(super) fn varint_len(v: u64) -> usize {
        // 1 byte per 7 bits, at least 1.
        (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
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

/// Bytes of the output buffer: packets are encoded straight into it.
const OUT_BUFFER: usize = 1 << 20;
/// Room kept at the buffer's end for one counter packet, which is written with fixed-size
/// copies (at most 1 + 2 + 11 + 16 + 2 + 16 + 10 bytes).
const SLACK: usize = 64;

/// What a counter's packets share, encoded once: the start of the track event (type and track
/// uuid), up to 16 bytes.
#[derive(Debug, Clone, Copy, Default)]
struct CounterHead {
    bytes: [u8; 16],
    len: usize,
}

/// Writes `v` as a varint at `b[*n..]`.
#[inline(always)]
fn put_varint(b: &mut [u8; SLACK], n: &mut usize, mut v: u64) {
    while v >= 0x80 {
        b[*n & (SLACK - 1)] = v as u8 | 0x80;
        *n += 1;
        v >>= 7;
    }
    b[*n & (SLACK - 1)] = v as u8;
    *n += 1;
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
    threads: FastMap<u64, u64>,
    /// The last thread looked up, and its uuid: records come in blocks of one thread.
    last_thread: (u64, u64),
    holds: Vec<u64>,
    counters: Vec<CounterHead>,
    /// The sequence id field, encoded once per input.
    sequence_field: CounterHead,
    /// Where the length of the event being built in `packet` goes.
    event_at: usize,
    /// Encoded packets not yet written out, and how much of `buf` they fill.
    buf: Vec<u8>,
    pos: usize,
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
            threads: FastMap::default(),
            last_thread: (u64::MAX, 0),
            holds: Vec::new(),
            counters: Vec::new(),
            sequence_field: CounterHead::default(),
            event_at: 0,
            buf: vec![0; OUT_BUFFER + SLACK],
            pos: 0,
        }
    }

    /// Writes out the encoded packets.
    fn drain(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf[..self.pos])?;
        self.pos = 0;
        Ok(())
    }

    /// Appends `bytes` to the output.
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.pos + bytes.len() > OUT_BUFFER {
            self.drain()?;
            if bytes.len() > OUT_BUFFER {
                return self.out.write_all(bytes);
            }
        }
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
        Ok(())
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
        self.put(&head[..=n])?;
        let packet = std::mem::take(&mut self.packet);
        let r = self.put(&packet);
        self.packet = packet;
        r?;
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

    /// Starts a packet holding a track event at `ts` in `self.packet`: the event's fields
    /// are appended to it, then [`PerfettoWriter::close_event`] fills in the lengths.
    fn open_event(&mut self, ts: u64) {
        let p = &mut self.packet;
        p.clear();
        p.push((TRACE_PACKET << 3 | LEN) as u8);
        p.push(0);
        pb::uint(p, PACKET_TIMESTAMP, ts);
        p.extend_from_slice(&self.sequence_field.bytes[..self.sequence_field.len]);
        p.push((PACKET_TRACK_EVENT << 3 | LEN) as u8);
        self.event_at = p.len();
        p.push(0);
    }

    /// Sets the lengths of the event and its packet, and writes the packet.
    fn close_event(&mut self) -> io::Result<()> {
        let event_len = self.packet.len() - self.event_at - 1;
        patch_len(&mut self.packet, self.event_at, event_len);
        let packet_len = self.packet.len() - 2;
        patch_len(&mut self.packet, 1, packet_len);
        let packet = std::mem::take(&mut self.packet);
        let r = self.put(&packet);
        self.packet = packet;
        self.events += 1;
        r
    }

    fn flows(&mut self, flows: Flows<'_>) {
        for &f in flows.out {
            pb::fixed64(&mut self.packet, EVENT_FLOW_IDS, f);
        }
        for &f in flows.end {
            pb::fixed64(&mut self.packet, EVENT_TERMINATING_FLOW_IDS, f);
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
            pb::bytes(&mut self.packet, EVENT_DEBUG_ANNOTATIONS, &self.annotation);
        }
    }
}

/// Writes `len` at `at`, where one byte was reserved for it (more bytes are made when it
/// needs them, which only long names and many annotations do).
fn patch_len(v: &mut Vec<u8>, at: usize, len: usize) {
    if len < 0x80 {
        v[at] = len as u8;
    } else {
        let mut encoded = Vec::with_capacity(4);
        pb::varint(&mut encoded, len as u64);
        v.splice(at..=at, encoded);
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
        let mut field = [0u8; SLACK];
        let mut n = 0;
        put_varint(
            &mut field,
            &mut n,
            u64::from(PACKET_SEQUENCE_ID << 3 | VARINT),
        );
        put_varint(&mut field, &mut n, self.sequence);
        self.sequence_field = CounterHead::default();
        self.sequence_field.bytes[..n].copy_from_slice(&field[..n]);
        self.sequence_field.len = n;
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
            self.counters
                .resize(index as usize + 1, CounterHead::default());
        }
        let mut head = [0u8; SLACK];
        let mut n = 0;
        put_varint(&mut head, &mut n, u64::from(EVENT_TYPE << 3 | VARINT));
        put_varint(&mut head, &mut n, TYPE_COUNTER);
        put_varint(&mut head, &mut n, u64::from(EVENT_TRACK_UUID << 3 | VARINT));
        put_varint(&mut head, &mut n, uuid);
        let c = &mut self.counters[index as usize];
        c.bytes[..n].copy_from_slice(&head[..n]);
        c.len = n;
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
        self.open_event(ts);
        pb::uint(&mut self.packet, EVENT_TYPE, TYPE_SLICE_BEGIN);
        pb::uint(&mut self.packet, EVENT_TRACK_UUID, uuid);
        pb::bytes(&mut self.packet, EVENT_CATEGORIES, cat.as_bytes());
        pb::bytes(&mut self.packet, EVENT_NAME, name.as_bytes());
        self.flows(flows);
        self.close_event()
    }

    fn end(&mut self, ts: u64, th: Th, track: Track<'_>, flows: Flows<'_>) -> io::Result<()> {
        let uuid = self.track(th, track);
        self.open_event(ts);
        pb::uint(&mut self.packet, EVENT_TYPE, TYPE_SLICE_END);
        pb::uint(&mut self.packet, EVENT_TRACK_UUID, uuid);
        self.flows(flows);
        self.close_event()
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
        self.open_event(ts);
        pb::uint(&mut self.packet, EVENT_TYPE, TYPE_INSTANT);
        pb::uint(&mut self.packet, EVENT_TRACK_UUID, uuid);
        pb::bytes(&mut self.packet, EVENT_NAME, name.as_bytes());
        if let Some((schema, payload)) = fields {
            self.annotations(schema, payload);
        }
        self.flows(flows);
        self.close_event()
    }

    #[inline]
    fn counter(&mut self, ts: u64, _th: Th, index: u32, value: Num) -> io::Result<()> {
        let Some(&head) = self.counters.get(index as usize) else {
            return Ok(());
        };
        // The hot path: encoded straight into the output buffer with copies of fixed size,
        // the counter's track event head and the sequence field encoded once; both lengths
        // fit a byte (a counter packet takes at most 47 bytes) and are set at the end.
        if self.pos > OUT_BUFFER {
            self.drain()?;
        }
        let seq = self.sequence_field;
        let b: &mut [u8; SLACK] = (&mut self.buf[self.pos..self.pos + SLACK])
            .try_into()
            .expect("SLACK bytes");
        b[0] = (TRACE_PACKET << 3 | LEN) as u8;
        b[2] = (PACKET_TIMESTAMP << 3 | VARINT) as u8;
        let mut n = 3;
        put_varint(b, &mut n, ts);
        b[n..n + 16].copy_from_slice(&seq.bytes);
        n += seq.len;
        b[n] = (PACKET_TRACK_EVENT << 3 | LEN) as u8;
        let event_at = n + 1;
        n += 2;
        b[n..n + 16].copy_from_slice(&head.bytes);
        n += head.len;
        match value {
            Num::Float(v) => {
                // Field 44, fixed64: its key takes two bytes.
                const KEY: u32 = EVENT_DOUBLE_COUNTER_VALUE << 3 | FIXED64;
                b[n] = (KEY & 0x7f | 0x80) as u8;
                b[n + 1] = (KEY >> 7) as u8;
                b[n + 2..n + 10].copy_from_slice(&v.to_bits().to_le_bytes());
                n += 10;
            }
            Num::Int(v) => {
                // Field 30, varint: its key takes two bytes too.
                const KEY: u32 = EVENT_COUNTER_VALUE << 3 | VARINT;
                b[n] = (KEY & 0x7f | 0x80) as u8;
                b[n + 1] = (KEY >> 7) as u8;
                n += 2;
                put_varint(b, &mut n, v as u64);
            }
        }
        b[event_at] = (n - event_at - 1) as u8;
        b[1] = (n - 2) as u8;
        self.pos += n;
        self.events += 1;
        Ok(())
    }

    fn end_process(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.drain()?;
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
