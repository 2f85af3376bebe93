//! Finding a trace's valid chunks in one forward pass, so that reading takes work linear in the
//! file's size however it is damaged.
//!
//! A chunk is valid when its header is plausible and its payload matches its CRC-32. Checking
//! each candidate header by hashing its payload costs the payload's length, so a file crafted
//! with a header every 16 bytes, each claiming the rest of the file, would cost the square of
//! its size. Here every byte is hashed once, into one running CRC; CRC-32 being linear, the
//! checksum of any candidate's payload follows from the running value at its two ends
//! (`crc(B) = crc(A‖B) ⊕ shift(crc(A), |B|)`, [`crc32fast::Hasher::combine`]), so a candidate
//! costs a few hundred operations however long it claims to be.

use crate::trace::{CHUNK_HEADER_LEN, CHUNK_MAGIC, MAX_CHUNK_PAYLOAD};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read, Seek, SeekFrom};

/// Bytes read per step of a scan.
const SCAN_WINDOW: u64 = 1 << 16;

/// The input of a reader: reads at an offset, seeking only when needed (a seek empties a
/// `BufReader`), and counts the bytes read.
#[derive(Debug)]
pub(crate) struct Input<R> {
    r: R,
    /// Where `r` stands, if known.
    pos: Option<u64>,
    /// The file's length when it was opened.
    pub(crate) len: u64,
    /// Bytes read so far.
    pub(crate) examined: u64,
}

impl<R: Read + Seek> Input<R> {
    pub(crate) fn new(mut r: R) -> io::Result<Self> {
        let len = r.seek(SeekFrom::End(0))?;
        Ok(Input {
            r,
            pos: None,
            len,
            examined: 0,
        })
    }

    /// Reads as many bytes at `offset` as are there, up to `buf.len()`.
    pub(crate) fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos != Some(offset) {
            self.pos = None;
            self.r.seek(SeekFrom::Start(offset))?;
        }
        let mut n = 0;
        while n < buf.len() {
            match self.r.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pos = Some(offset + n as u64);
        self.examined += n as u64;
        Ok(n)
    }
}

/// What a chunk header says, if it could start a chunk within a file of `file_len` bytes.
pub(crate) fn plausible_header(header: &[u8], at: u64, file_len: u64) -> Option<(u32, u32, u32)> {
    let word = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().unwrap());
    let len = word(4);
    let fits = at + CHUNK_HEADER_LEN as u64 + u64::from(len) <= file_len;
    (header[..4] == CHUNK_MAGIC
        && len as usize <= MAX_CHUNK_PAYLOAD
        && len.is_multiple_of(8)
        && fits)
        .then(|| (len, word(8), word(12)))
}

/// The CRC-32 of `a ‖ b` from those of `a` and `b`; linear in both.
fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc_a);
    h.combine(&crc32fast::Hasher::new_with_initial_len(crc_b, len_b));
    h.finalize()
}

/// A chunk the scan found valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// Where its header starts.
    pub(crate) offset: u64,
    /// Payload bytes.
    pub(crate) len: u32,
    /// The index its header gives.
    pub(crate) index: u32,
}

/// A candidate whose payload end the scan has not reached yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    end: u64,
    /// The running CRC's value at `end` if the payload matches its checksum.
    target: u32,
    index: u32,
}

/// The payload of the candidate the reader asked about, kept while it is scanned so that a
/// valid chunk is read once.
#[derive(Debug)]
struct Capture {
    offset: u64,
    data: Vec<u8>,
}

/// The state of the forward pass. Queries come with non-decreasing offsets (the reader only
/// moves forward), so whatever lies before the last query is forgotten.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    /// Bytes before this offset have been hashed.
    frontier: u64,
    /// The next 8-aligned offset to look at for a chunk header; at most `frontier`.
    next_header: u64,
    /// CRC-32 of the bytes from where the scan last started up to `frontier`.
    crc: crc32fast::Hasher,
    /// Bytes `[next_header, frontier)`, so that a header across two windows is seen whole.
    carry: Vec<u8>,
    /// Candidates by header offset.
    pending: BTreeMap<u64, Pending>,
    /// Candidates by `(end, offset)`: the order in which the scan resolves them.
    by_end: BTreeSet<(u64, u64)>,
    /// Valid chunks found ahead of the reader, by header offset.
    valid: BTreeMap<u64, Found>,
    capture: Option<Capture>,
    /// Payloads the reader is done with, to be filled again (fresh memory costs page faults).
    spare: Vec<Vec<u8>>,
}

/// Spare payload buffers a scanner keeps.
const MAX_SPARE: usize = 8;

/// The largest spare buffer kept: a few chunks of the writer's usual size (a rare larger one
/// is given back, not kept in every spare).
const MAX_SPARE_BYTES: usize = 4 * crate::trace::DEFAULT_CHUNK_TARGET;

impl Scanner {
    /// Takes back a payload the reader is done with.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < MAX_SPARE && buf.capacity() <= MAX_SPARE_BYTES {
            self.spare.push(buf);
        }
    }

    /// The first valid chunk starting at or after `from` (an 8-aligned offset), and its payload
    /// if the scan kept it.
    pub(crate) fn first_valid<R: Read + Seek>(
        &mut self,
        input: &mut Input<R>,
        from: u64,
    ) -> io::Result<Option<(Found, Option<Vec<u8>>)>> {
        while self.valid.first_key_value().is_some_and(|(&k, _)| k < from) {
            self.valid.pop_first();
        }
        while self
            .pending
            .first_key_value()
            .is_some_and(|(&k, _)| k < from)
        {
            self.pending.pop_first();
        }
        if from >= self.frontier {
            // Nothing known lies at or after `from`: start a fresh pass there.
            self.frontier = from;
            self.next_header = from;
            self.crc = crc32fast::Hasher::new();
            self.carry.clear();
            self.by_end.clear();
            let mut data = self.spare.pop().unwrap_or_default();
            data.clear();
            self.capture = Some(Capture { offset: from, data });
        } else if from > self.next_header {
            self.carry.drain(..(from - self.next_header) as usize);
            self.next_header = from;
        }
        loop {
            let valid = self.valid.range(from..).next().map(|(_, f)| *f);
            let pending = self.pending.range(from..).next().map(|(&k, _)| k);
            match (valid, pending) {
                // Every earlier candidate is resolved (and every earlier header was seen, since
                // the scan has passed the valid chunk's end).
                (Some(found), p) if p.is_none_or(|p| p > found.offset) => {
                    let payload = match self.capture.take() {
                        Some(c)
                            if c.offset == found.offset && c.data.len() == found.len as usize =>
                        {
                            Some(c.data)
                        }
                        other => {
                            self.capture = other;
                            None
                        }
                    };
                    return Ok(Some((found, payload)));
                }
                (None, None) if self.frontier >= input.len => return Ok(None),
                _ => self.advance(input)?,
            }
        }
    }

    /// Scans one more window: finds headers, hashes, and resolves candidates ending in it.
    fn advance<R: Read + Seek>(&mut self, input: &mut Input<R>) -> io::Result<()> {
        let start = self.frontier;
        let mut want = SCAN_WINDOW.min(input.len - start);
        // While the asked-for candidate is open, read no further than it needs: its header
        // first, then up to its end. A valid chunk is then read exactly once, and the next
        // query starts a fresh pass with its own capture.
        if let Some(c) = &self.capture {
            if self.next_header <= c.offset {
                want = want.min(c.offset + CHUNK_HEADER_LEN as u64 - start);
            } else if let Some(p) = self.pending.get(&c.offset) {
                want = want.min(p.end - start);
            }
        }
        let want = want as usize;
        let base = self.next_header;
        let mut buf = std::mem::take(&mut self.carry);
        let old = buf.len();
        buf.resize(old + want, 0);
        let got = input.read_at(start, &mut buf[old..])?;
        if got < want {
            // The file shrank since it was opened: what is gone is not there to read.
            buf.truncate(old + got);
            input.len = start + got as u64;
            let gone: Vec<_> = self.by_end.range((input.len + 1, 0)..).copied().collect();
            for (e, x) in gone {
                self.by_end.remove(&(e, x));
                self.pending.remove(&x);
            }
        }
        let end = start + got as u64;

        // Headers wholly inside the buffer.
        let mut starts = Vec::new();
        let mut x = self.next_header;
        while x + CHUNK_HEADER_LEN as u64 <= end {
            let i = (x - base) as usize;
            if let Some((len, crc, index)) =
                plausible_header(&buf[i..i + CHUNK_HEADER_LEN], x, input.len)
            {
                starts.push((x, len, crc, index));
            }
            x += 8;
        }
        self.next_header = x;

        // Hash up to each payload start and each candidate's end, in order.
        let mut pos = start;
        let mut next_start = starts.into_iter().peekable();
        loop {
            let s = next_start
                .peek()
                .map(|&(x, ..)| x + CHUNK_HEADER_LEN as u64);
            let e = self.by_end.first().map(|&(e, _)| e).filter(|&e| e <= end);
            let t = match (s, e) {
                (None, None) => break,
                (Some(s), None) => s,
                (None, Some(e)) => e,
                (Some(s), Some(e)) => s.min(e),
            };
            self.crc
                .update(&buf[(pos - base) as usize..(t - base) as usize]);
            pos = t;
            let here = self.crc.clone().finalize();
            // A start before an end at the same offset: an empty payload ends where it starts.
            if s == Some(t) {
                let (x, len, crc, index) = next_start.next().unwrap();
                let end = t + u64::from(len);
                let target = combine(here, crc, u64::from(len));
                self.pending.insert(x, Pending { end, target, index });
                self.by_end.insert((end, x));
                continue;
            }
            let (e, x) = self.by_end.pop_first().unwrap();
            if let Some(p) = self.pending.remove(&x)
                && p.target == here
            {
                let len = (e - x) as u32 - CHUNK_HEADER_LEN as u32;
                let index = p.index;
                self.valid.insert(
                    x,
                    Found {
                        offset: x,
                        len,
                        index,
                    },
                );
            }
        }
        self.crc.update(&buf[(pos - base) as usize..]);
        self.frontier = end;

        // Keep the asked-for candidate's payload while it may still be valid.
        if let Some(c) = &mut self.capture {
            let payload_end = self.pending.get(&c.offset).map(|p| p.end).or_else(|| {
                self.valid
                    .get(&c.offset)
                    .map(|f| c.offset + CHUNK_HEADER_LEN as u64 + u64::from(f.len))
            });
            match payload_end {
                Some(payload_end) => {
                    let from = start.max(c.offset + CHUNK_HEADER_LEN as u64);
                    let to = end.min(payload_end);
                    // Its length is known: grow the copy once, not window by window.
                    let whole = payload_end.saturating_sub(c.offset + CHUNK_HEADER_LEN as u64);
                    c.data
                        .reserve_exact((whole as usize).saturating_sub(c.data.len()));
                    if from < to {
                        c.data
                            .extend_from_slice(&buf[(from - base) as usize..(to - base) as usize]);
                    }
                }
                None => self.capture = None,
            }
        }
        buf.drain(..(self.next_header - base) as usize);
        self.carry = buf;
        Ok(())
    }
}
