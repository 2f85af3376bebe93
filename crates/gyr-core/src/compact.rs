//! The compact record encoding of format 2's records blocks: each record's header shrinks
//! to the few bytes that differ from the record before it.
//!
//! The layout is specified in [`crate::trace`] ("Records, format 2"). Rings, batches and the
//! wire keep the fixed 32-byte layout of [`crate::record`], which a sensor writes with plain
//! stores; only the file pays for the encoding, on the monitor's side when writing and on the
//! reader's side when reading. Decoding borrows each payload from the block, so reading
//! allocates nothing per record.

use crate::record::{RECORD_HEADER_LEN, RecordHeader, RecordRef, stride};

/// Tag flag: an explicit sequence number follows (it is not the previous one plus one).
const FLAG_SEQ: u64 = 1;
/// Tag flag: an explicit perturbation follows (it changed since the previous record).
const FLAG_PERTURBATION: u64 = 2;
/// Tag flag: the timestamp delta is subtracted (the clock went backwards).
const FLAG_BACKWARDS: u64 = 4;
/// Bits of the tag below the type id.
const FLAG_BITS: u32 = 3;

/// The most bytes a record's encoded header takes: a tag of a 32-bit type id and three flags
/// (5), three 64-bit varints (30), a payload length below 2^32 (5).
const MAX_HEAD: usize = 40;

/// The largest payload the writer takes: with the largest chunk target and a full records
/// block, a chunk holding a larger record could exceed what readers accept
/// ([`crate::trace::MAX_CHUNK_PAYLOAD`]) and be lost.
const MAX_PAYLOAD: usize = crate::trace::MAX_CHUNK_PAYLOAD / 4;

/// Payloads up to this long are copied as a block of this size (see [`encode`]).
const SHORT_PAYLOAD: usize = 32;

/// A record of a block that cannot be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BadRecord {
    /// Where the record starts in the block's records (after the thread id).
    pub(crate) offset: usize,
    /// What is wrong with it.
    pub(crate) what: &'static str,
}

/// What the previous record of a block left: the base of the next record's fields.
#[derive(Clone, Copy, Debug, Default)]
struct Previous {
    timestamp: u64,
    seq: u64,
    perturbation: u64,
}

/// What one call of [`encode`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Encoded {
    /// Bytes of the input consumed (whole records).
    pub(crate) used: usize,
    /// Records encoded.
    pub(crate) records: u64,
}

/// Appends the compact encoding of `records` (the fixed layout of [`crate::record`]) to
/// `out`, stopping after the first record that takes `out` to `limit` bytes or more, so that
/// the caller can start a new block there.
///
/// On error `out` holds a partial encoding: the caller truncates it.
pub(crate) fn encode(
    records: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<Encoded, BadRecord> {
    // The compact form of a record is at most 8 bytes longer than its fixed form, and usually
    // 25 or more shorter: one reservation covers most blocks.
    // (Plus one head's worth: heads are written whole, then cut to length.)
    out.reserve(records.len().min(limit.saturating_sub(out.len())) + MAX_HEAD);
    let mut prev = Previous::default();
    let mut pos = 0;
    let mut n = 0;
    while pos < records.len() && out.len() < limit {
        let rest = &records[pos..];
        let bad = |what| BadRecord { offset: pos, what };
        let h = RecordHeader::read(rest)
            .filter(|h| {
                (h.len as usize) >= RECORD_HEADER_LEN && stride(h.len as usize) <= rest.len()
            })
            .ok_or(bad("its length field is impossible"))?;
        let payload = &rest[RECORD_HEADER_LEN..h.len as usize];
        if payload.len() > MAX_PAYLOAD {
            return Err(bad("its payload is larger than a trace chunk can hold"));
        }
        let mut flags = 0;
        if h.seq != prev.seq.wrapping_add(1) {
            flags |= FLAG_SEQ;
        }
        if h.perturbation != prev.perturbation {
            flags |= FLAG_PERTURBATION;
        }
        let delta = if h.timestamp >= prev.timestamp {
            h.timestamp - prev.timestamp
        } else {
            flags |= FLAG_BACKWARDS;
            prev.timestamp - h.timestamp
        };
        let tag = (u64::from(h.type_id) << FLAG_BITS) | flags;
        let len = payload.len() as u64;
        if flags & (FLAG_SEQ | FLAG_PERTURBATION) == 0
            && tag < 1 << 28
            && delta < 1 << 56
            && len < 1 << 28
        {
            // The steady stream of events: tag, delta and length (16 bytes at most) built in
            // registers and stored as whole words. Bytes stored one by one and then copied
            // as a block stall the copy's load until the stores retire (store-to-load
            // forwarding fails), which cost the monitor a fifth of its encoding time.
            let (t, nt) = varint_word(tag);
            let (d, nd) = varint_word(delta);
            let (l, nl) = varint_word(len);
            let head = u128::from(t) | u128::from(d) << (8 * nt) | u128::from(l) << (8 * (nt + nd));
            let n = (nt + nd + nl) as usize;
            out.extend_from_slice(&(head as u64).to_le_bytes());
            if n > 8 {
                out.extend_from_slice(&((head >> 64) as u64).to_le_bytes());
                out.truncate(out.len() - (16 - n));
            } else {
                out.truncate(out.len() - (8 - n));
            }
        } else {
            let mut head = [0u8; MAX_HEAD];
            let mut at = 0;
            put_varint(&mut head, &mut at, tag);
            put_varint(&mut head, &mut at, delta);
            if flags & FLAG_SEQ != 0 {
                put_varint(&mut head, &mut at, h.seq);
            }
            if flags & FLAG_PERTURBATION != 0 {
                put_varint(&mut head, &mut at, h.perturbation);
            }
            put_varint(&mut head, &mut at, len);
            out.extend_from_slice(&head[..at]);
        }
        if payload.len() <= SHORT_PAYLOAD && rest.len() >= RECORD_HEADER_LEN + SHORT_PAYLOAD {
            // A short payload copied as a block of fixed size (what follows it in the ring is
            // cut off again): a few vector moves, where a copy of the payload's own length is
            // a call of `memcpy`.
            let cut = SHORT_PAYLOAD - payload.len();
            out.extend_from_slice(&rest[RECORD_HEADER_LEN..RECORD_HEADER_LEN + SHORT_PAYLOAD]);
            out.truncate(out.len() - cut);
        } else {
            out.extend_from_slice(payload);
        }
        prev = Previous {
            timestamp: h.timestamp,
            seq: h.seq,
            perturbation: h.perturbation,
        };
        pos += stride(h.len as usize);
        n += 1;
    }
    Ok(Encoded {
        used: pos,
        records: n,
    })
}

/// The unsigned LEB128 varint of `v` (below 2^56) in a word, first byte lowest, and its length
/// in bytes (at most 8).
#[inline(always)]
fn varint_word(mut v: u64) -> (u64, u32) {
    debug_assert!(v < 1 << 56);
    let mut word = 0;
    let mut n = 0;
    while v >= 0x80 {
        word |= ((v & 0x7f) | 0x80) << (8 * n);
        v >>= 7;
        n += 1;
    }
    (word | v << (8 * n), n + 1)
}

/// Writes `v` as an unsigned LEB128 varint at `head[*at..]`.
#[inline]
fn put_varint(head: &mut [u8; MAX_HEAD], at: &mut usize, mut v: u64) {
    while v >= 0x80 {
        head[*at] = v as u8 | 0x80;
        v >>= 7;
        *at += 1;
    }
    head[*at] = v as u8;
    *at += 1;
}

/// Reads an unsigned LEB128 varint at `bytes[*at..]`.
#[inline]
fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, &'static str> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at).ok_or("it is cut short")?;
        *at += 1;
        if shift == 63 && b > 1 {
            break;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err("a number in it does not fit in 64 bits")
}

/// Iterates over the records of a format-2 block, all emitted by `thread`, with their headers
/// rebuilt as [`crate::record`] lays them out.
///
/// Stops with an error at the first record that does not decode. Each record takes at least
/// three bytes, so the work is linear in the block's size.
#[derive(Clone, Debug)]
pub(crate) struct CompactRecords<'a> {
    thread: u64,
    bytes: &'a [u8],
    at: usize,
    prev: Previous,
}

impl<'a> CompactRecords<'a> {
    /// The records of `thread` encoded in `bytes` (a block's body after the thread id).
    pub(crate) fn new(thread: u64, bytes: &'a [u8]) -> Self {
        CompactRecords {
            thread,
            bytes,
            at: 0,
            prev: Previous::default(),
        }
    }

    fn decode(&mut self) -> Result<RecordRef<'a>, &'static str> {
        let b = self.bytes;
        let mut at = self.at;
        let tag = varint(b, &mut at)?;
        let type_id = u32::try_from(tag >> FLAG_BITS).map_err(|_| "its type id is out of range")?;
        let delta = varint(b, &mut at)?;
        let timestamp = if tag & FLAG_BACKWARDS != 0 {
            self.prev.timestamp.checked_sub(delta)
        } else {
            self.prev.timestamp.checked_add(delta)
        }
        .ok_or("its timestamp is out of range")?;
        let seq = if tag & FLAG_SEQ != 0 {
            varint(b, &mut at)?
        } else {
            self.prev.seq.wrapping_add(1)
        };
        let perturbation = if tag & FLAG_PERTURBATION != 0 {
            varint(b, &mut at)?
        } else {
            self.prev.perturbation
        };
        let len = varint(b, &mut at)?;
        let payload = usize::try_from(len)
            .ok()
            .and_then(|len| b.get(at..at.checked_add(len)?))
            .ok_or("its payload runs past the end of the block")?;
        let len = u32::try_from(RECORD_HEADER_LEN + payload.len())
            .map_err(|_| "its payload is too long")?;
        self.at = at + payload.len();
        self.prev = Previous {
            timestamp,
            seq,
            perturbation,
        };
        Ok(RecordRef {
            thread: self.thread,
            header: RecordHeader {
                len,
                type_id,
                timestamp,
                seq,
                perturbation,
            },
            payload,
        })
    }
}

impl<'a> Iterator for CompactRecords<'a> {
    type Item = Result<RecordRef<'a>, BadRecord>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let offset = self.at;
        Some(self.decode().map_err(|what| {
            self.at = self.bytes.len();
            BadRecord { offset, what }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Records, push_record};

    fn round_trip(fixed: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let done = encode(fixed, &mut out, usize::MAX).unwrap();
        assert_eq!(done.used, fixed.len());
        out
    }

    #[test]
    fn a_steady_record_costs_three_bytes_plus_its_payload() {
        let mut fixed = Vec::new();
        push_record(&mut fixed, 2, 1000, 1, 0, &[7; 64]);
        push_record(&mut fixed, 2, 1030, 2, 0, &[8; 64]);
        let out = round_trip(&fixed);
        // The first record: tag, a two-byte timestamp, length; seq 1 follows seq 0.
        assert_eq!(out[..4], [2 << 3, 0xe8, 0x07, 64]);
        assert_eq!(out[68..71], [2 << 3, 30, 64]);
        assert_eq!(out.len(), 4 + 64 + 3 + 64);
        let back: Vec<_> = CompactRecords::new(5, &out).map(Result::unwrap).collect();
        let expected: Vec<_> = Records::new(5, &fixed).map(Result::unwrap).collect();
        assert_eq!(back, expected);
    }

    #[test]
    fn a_varint_in_a_word_is_the_varint_in_bytes() {
        let edges = (0..56).flat_map(|b| {
            let p = 1u64 << b;
            [p - 1, p, p + 1, p | (p >> 1)]
        });
        for v in edges.chain([0, 0x7f, 0x80, (1 << 56) - 1]) {
            let mut head = [0u8; MAX_HEAD];
            let mut at = 0;
            put_varint(&mut head, &mut at, v);
            let (word, n) = varint_word(v);
            assert_eq!(n as usize, at, "{v:#x}");
            assert_eq!(word.to_le_bytes()[..at], head[..at], "{v:#x}");
        }
    }

    #[test]
    fn heads_of_every_length_round_trip() {
        // Deltas and lengths whose varints make heads of 3 to 16 bytes (and past, to the
        // general path), each followed by a record that must still decode.
        let mut fixed = Vec::new();
        let (mut t, mut seq) = (0u64, 1u64);
        for shift in [0, 7, 14, 21, 28, 35, 42, 49, 55, 56, 63] {
            for len in [0usize, 1, 127, 128, 300] {
                t = t.wrapping_add(1u64 << shift);
                push_record(
                    &mut fixed,
                    1 << (shift % 25),
                    t,
                    seq,
                    0,
                    &vec![len as u8; len],
                );
                seq += 1;
            }
        }
        let out = round_trip(&fixed);
        let back: Vec<_> = CompactRecords::new(1, &out).map(Result::unwrap).collect();
        let expected: Vec<_> = Records::new(1, &fixed).map(Result::unwrap).collect();
        assert_eq!(back, expected);
    }

    #[test]
    fn flags_carry_seq_gaps_perturbation_and_backward_time() {
        let mut fixed = Vec::new();
        push_record(&mut fixed, 3, 500, 10, 0, &[]);
        push_record(&mut fixed, 3, 400, 11, 9, &[1]);
        push_record(&mut fixed, 1, 400, 11, 9, &[2, 3]);
        push_record(&mut fixed, u32::MAX, u64::MAX, u64::MAX, u64::MAX, &[4]);
        push_record(&mut fixed, 0, 0, 0, 0, &[]);
        let out = round_trip(&fixed);
        assert_eq!(out[0], (3 << 3) | FLAG_SEQ as u8);
        let back: Vec<_> = CompactRecords::new(1, &out).map(Result::unwrap).collect();
        let expected: Vec<_> = Records::new(1, &fixed).map(Result::unwrap).collect();
        assert_eq!(back, expected);
    }

    #[test]
    fn the_limit_ends_a_block_between_records() {
        let mut fixed = Vec::new();
        for i in 0..10 {
            push_record(&mut fixed, 2, i, i + 1, 0, &[0; 20]);
        }
        let mut out = Vec::new();
        let first = encode(&fixed, &mut out, 50).unwrap();
        assert_eq!(first.records, 3);
        assert_eq!(first.used, 3 * 56);
        assert!(out.len() >= 50);
    }

    #[test]
    fn a_bad_fixed_record_is_refused_with_its_offset() {
        let mut fixed = Vec::new();
        push_record(&mut fixed, 2, 1, 1, 0, &[0; 8]);
        push_record(&mut fixed, 2, 2, 2, 0, &[0; 8]);
        fixed[40..44].copy_from_slice(&9u32.to_le_bytes());
        let err = encode(&fixed, &mut Vec::new(), usize::MAX).unwrap_err();
        assert_eq!(err.offset, 40);
        assert!(encode(&fixed[..20], &mut Vec::new(), usize::MAX).is_err());
    }

    #[test]
    fn crafted_bytes_give_errors_not_panics() {
        let cases: &[(&[u8], &str)] = &[
            (&[0x80], "it is cut short"),
            (&[0x10, 0x80, 0x80], "it is cut short"),
            (&[0x11, 0x00], "it is cut short"),
            (
                &[0x10, 0x00, 0x05, 1, 2],
                "its payload runs past the end of the block",
            ),
            (
                &[
                    0x10, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                ],
                "its payload runs past the end of the block",
            ),
            (
                &[
                    0x10, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
                ],
                "a number in it does not fit in 64 bits",
            ),
            (
                &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00, 0x00],
                "its type id is out of range",
            ),
            (&[0x14, 0x01, 0x00], "its timestamp is out of range"),
            (
                &[
                    0x10, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
                ],
                "a number in it does not fit in 64 bits",
            ),
        ];
        for (bytes, what) in cases {
            let got: Vec<_> = CompactRecords::new(0, bytes).collect();
            assert_eq!(got, vec![Err(BadRecord { offset: 0, what })], "{bytes:?}");
        }
        // A timestamp pushed past 2^64 by a second delta.
        let bytes = [
            0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            0x00, // u64::MAX
            0x10, 0x01, 0x00, // one more
        ];
        let got: Vec<_> = CompactRecords::new(0, &bytes).collect();
        assert!(got[0].is_ok());
        assert_eq!(
            got[1],
            Err(BadRecord {
                offset: 12,
                what: "its timestamp is out of range"
            })
        );
        assert_eq!(got.len(), 2);
    }
}
