//! The record layout of per-thread rings, monitors' batches, the wire and trace files of
//! format 1.
//!
//! Every record has the same fixed header, so a sensor writes it with plain stores and readers
//! find each field at a known offset. Trace files of format 2 store the same records compactly
//! (see [`crate::trace`]); their reader gives them back as [`RecordRef`]s of this layout.
//!
//! # Record layout
//!
//! Every record starts on an 8-byte boundary and is padded with zeros to a multiple of 8 bytes.
//! All integers are little-endian.
//!
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 4 | `len` | header plus payload, in bytes, before padding |
//! | 4 | 4 | `type_id` | the event type ([`crate::Schema::id`]) |
//! | 8 | 8 | `timestamp` | in a trace file: ns since the process started; in a ring: raw clock ticks |
//! | 16 | 8 | `seq` | per-thread sequence number, from 1, consumed by dropped events too |
//! | 24 | 8 | `perturbation` | ns this thread has spent waiting on gyr so far (see below) |
//! | 32 | `len - 32` | payload | the fields, as [`crate::value`] describes |
//!
//! The thread id is not repeated in each record: records travel in per-thread blocks
//! (see [`crate::trace`]), so the fourth of Falcon's implicit fields comes from the block.
//!
//! # Perturbation
//!
//! Falcon's perturbation field records time the application lost to monitoring.
//! gyr records the part that varies: the cumulative time this thread has waited for room in its
//! full ring (Block policy). The fixed cost of a sensor call is measured once at start-up and
//! stored in the trace header ([`crate::TraceHeader::sensor_cost_ns`]), so a reader can add
//! `seq × sensor_cost_ns` for the total. A sensor reads the clock before it writes, so a
//! record's own wait for room (included in its `perturbation`) came after its `timestamp`.

/// Bytes of the fixed record header.
pub const RECORD_HEADER_LEN: usize = 32;

/// Records start and end on multiples of this.
pub const RECORD_ALIGN: usize = 8;

/// The size a record of `len` bytes (header plus payload) occupies, padding included.
#[inline]
pub const fn stride(len: usize) -> usize {
    (len + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// The fixed header of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header plus payload length, before padding.
    pub len: u32,
    /// The event type.
    pub type_id: u32,
    /// ns since process start (in a file) or raw ticks (in a ring).
    pub timestamp: u64,
    /// Per-thread sequence number.
    pub seq: u64,
    /// Cumulative wait in ns (in a file) or ticks (in a ring).
    pub perturbation: u64,
}

impl RecordHeader {
    /// Writes the header into the first [`RECORD_HEADER_LEN`] bytes of `out`.
    #[inline]
    pub fn write(&self, out: &mut [u8]) {
        let out: &mut [u8; RECORD_HEADER_LEN] = (&mut out[..RECORD_HEADER_LEN]).try_into().unwrap();
        out[0..4].copy_from_slice(&self.len.to_le_bytes());
        out[4..8].copy_from_slice(&self.type_id.to_le_bytes());
        out[8..16].copy_from_slice(&self.timestamp.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.perturbation.to_le_bytes());
    }

    /// Reads a header from the first [`RECORD_HEADER_LEN`] bytes of `bytes`, if there are that many.
    #[inline]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let b: &[u8; RECORD_HEADER_LEN] = bytes.get(..RECORD_HEADER_LEN)?.try_into().ok()?;
        Some(RecordHeader {
            len: u32::from_le_bytes(b[0..4].try_into().unwrap()),
            type_id: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            timestamp: u64::from_le_bytes(b[8..16].try_into().unwrap()),
            seq: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            perturbation: u64::from_le_bytes(b[24..32].try_into().unwrap()),
        })
    }
}

/// A record inside a block of one thread's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The thread that emitted it.
    pub thread: u64,
    /// The fixed header.
    pub header: RecordHeader,
    /// The payload, without padding.
    pub payload: &'a [u8],
}

/// Iterates over the records packed in `bytes`, all emitted by `thread`.
///
/// Stops with an error at the first record whose length is impossible.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    thread: u64,
    bytes: &'a [u8],
}

/// A records block holds a record whose length field is impossible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed record at byte {offset} of a records block")]
pub struct MalformedRecord {
    /// Offset of the bad record within the block.
    pub offset: usize,
}

impl<'a> Records<'a> {
    /// Records of `thread` packed in `bytes`.
    pub fn new(thread: u64, bytes: &'a [u8]) -> Self {
        Records { thread, bytes }
    }

    /// Checks every record's length without decoding anything.
    pub fn validate(bytes: &[u8]) -> Result<usize, MalformedRecord> {
        let mut it = Records::new(0, bytes);
        let mut n = 0;
        let total = bytes.len();
        while !it.bytes.is_empty() {
            let offset = total - it.bytes.len();
            match it.next() {
                Some(Ok(_)) => n += 1,
                _ => return Err(MalformedRecord { offset }),
            }
        }
        Ok(n)
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RecordRef<'a>, MalformedRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() {
            return None;
        }
        let header = match RecordHeader::read(self.bytes) {
            Some(h)
                if (h.len as usize) >= RECORD_HEADER_LEN
                    && stride(h.len as usize) <= self.bytes.len() =>
            {
                h
            }
            _ => {
                self.bytes = &[];
                return Some(Err(MalformedRecord { offset: 0 }));
            }
        };
        let payload = &self.bytes[RECORD_HEADER_LEN..header.len as usize];
        self.bytes = &self.bytes[stride(header.len as usize)..];
        Some(Ok(RecordRef {
            thread: self.thread,
            header,
            payload,
        }))
    }
}

/// Appends one record (header and padded payload) to `out`.
pub fn push_record(
    out: &mut Vec<u8>,
    type_id: u32,
    timestamp: u64,
    seq: u64,
    perturbation: u64,
    payload: &[u8],
) {
    let len = RECORD_HEADER_LEN + payload.len();
    let start = out.len();
    out.resize(start + stride(len), 0);
    RecordHeader {
        len: len as u32,
        type_id,
        timestamp,
        seq,
        perturbation,
    }
    .write(&mut out[start..]);
    out[start + RECORD_HEADER_LEN..start + len].copy_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_iterates() {
        let mut buf = Vec::new();
        push_record(&mut buf, 7, 100, 1, 0, &[1, 2, 3]);
        push_record(&mut buf, 8, 200, 2, 5, &[]);
        assert_eq!(buf.len(), 40 + 32);
        let recs: Vec<_> = Records::new(9, &buf).map(Result::unwrap).collect();
        assert_eq!(recs[0].payload, &[1, 2, 3]);
        assert_eq!(recs[1].header.perturbation, 5);
        assert_eq!(recs[1].thread, 9);
        assert_eq!(Records::validate(&buf), Ok(2));
        assert!(Records::validate(&buf[..50]).is_err());
    }
}
