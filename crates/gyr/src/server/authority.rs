//! Any `:authority` on the Unix socket: what a client names the server there means nothing
//! (the socket's path is the address), yet the HTTP/2 layer under tonic (h2) refuses a request
//! whose `:authority` is not a valid URI authority, and grpc's C core (Python, C++, Ruby...)
//! and grpc-java send the socket's path, percent-encoded: every call of theirs would fail with
//! `RST_STREAM` (PROTOCOL_ERROR) before it reaches the service.
//!
//! So the bytes a client sends on the Unix socket pass through [`AnyAuthority`] first: every
//! frame goes through untouched, except the header blocks (HEADERS and CONTINUATION frames),
//! which are decoded with the client's HPACK context and encoded again, each field as a literal
//! that is never added to the dynamic table (so the server's table stays empty and both sides
//! always agree), an `:authority` that is not a valid authority replaced by `localhost`. Input
//! this cannot decode is passed on as it came, for h2 to refuse as it would have.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What every HTTP/2 connection starts with.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The frame size every HTTP/2 peer accepts; the header blocks written out fit it.
const FRAME: usize = 16_384;
/// The largest header block taken in; past that the connection is passed on untouched.
const MAX_BLOCK: usize = 1 << 20;
/// The HPACK table size the server offers (h2's default): the client's table never exceeds it.
const TABLE: usize = 4096;
/// What replaces an `:authority` that is not one.
const LOCALHOST: &[u8] = b"localhost";

const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// A header block being collected: its HEADERS frame and any CONTINUATION frames so far.
struct Block {
    stream: u32,
    /// END_STREAM, from the HEADERS frame.
    end_stream: bool,
    /// The HEADERS frame's priority fields, when it had them.
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
    /// The frames as they came, for input that cannot be decoded.
    raw: Vec<u8>,
}

/// The client-to-server byte stream's rewriting, apart from any I/O.
pub(crate) struct Rewriter {
    preface: usize,
    /// Bytes of a non-header frame's payload still to pass through.
    passing: usize,
    pending: Vec<u8>,
    block: Option<Block>,
    decoder: loona_hpack::Decoder<'static>,
    /// Something could not be decoded: everything from there on passes through untouched.
    given_up: bool,
}

impl Default for Rewriter {
    fn default() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(TABLE);
        Rewriter {
            preface: PREFACE.len(),
            passing: 0,
            pending: Vec::new(),
            block: None,
            decoder,
            given_up: false,
        }
    }
}

impl Rewriter {
    /// Takes in bytes from the client; appends what the server is to read to `out`.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        // The preface, and the payloads of frames other than headers, stream straight through.
        while !input.is_empty() && self.pending.is_empty() && (self.preface > 0 || self.passing > 0)
        {
            let n = if self.preface > 0 {
                self.preface
            } else {
                self.passing
            }
            .min(input.len());
            out.extend_from_slice(&input[..n]);
            input = &input[n..];
            if self.preface > 0 {
                self.preface -= n;
            } else {
                self.passing -= n;
            }
        }
        if self.given_up {
            out.extend_from_slice(input);
            return;
        }
        self.pending.extend_from_slice(input);
        let mut at = 0;
        while self.pending.len() - at >= 9 {
            let h = &self.pending[at..at + 9];
            let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            if kind != HEADERS && kind != CONTINUATION && self.block.is_none() {
                // Passed on as it arrives, without waiting for the whole payload.
                let here = len.min(self.pending.len() - at - 9);
                out.extend_from_slice(&self.pending[at..at + 9 + here]);
                at += 9 + here;
                self.passing = len - here;
                if self.passing > 0 {
                    break;
                }
                continue;
            }
            if self.pending.len() - at < 9 + len {
                if len > MAX_BLOCK {
                    self.give_up(at, out);
                    return;
                }
                break;
            }
            let frame = at..at + 9 + len;
            at += 9 + len;
            if !self.header_frame(kind, flags, stream, frame.clone(), out) {
                // Not a header block this can follow: what was held back, and the rest,
                // goes to the server as it came.
                let mut raw = self.block.take().map(|b| b.raw).unwrap_or_default();
                raw.extend_from_slice(&self.pending[frame.start..]);
                out.extend_from_slice(&raw);
                self.pending.clear();
                self.given_up = true;
                return;
            }
            if self.given_up {
                out.extend_from_slice(&self.pending[at..]);
                self.pending.clear();
                return;
            }
        }
        self.pending.drain(..at);
    }

    /// The client closed its side: whatever is held back goes on as it came.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        if let Some(b) = self.block.take() {
            out.extend_from_slice(&b.raw);
        }
        out.append(&mut self.pending);
    }

    fn give_up(&mut self, at: usize, out: &mut Vec<u8>) {
        if let Some(b) = self.block.take() {
            out.extend_from_slice(&b.raw);
        }
        out.extend_from_slice(&self.pending[at..]);
        self.pending.clear();
        self.given_up = true;
    }

    /// Takes a HEADERS or CONTINUATION frame (or another frame inside a header block, which is
    /// an error); false if it cannot be followed.
    fn header_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        frame: std::ops::Range<usize>,
        out: &mut Vec<u8>,
    ) -> bool {
        let bytes = &self.pending[frame];
        let payload = &bytes[9..];
        match (kind, self.block.as_mut()) {
            (HEADERS, None) => {
                let mut p = payload;
                let mut pad = 0;
                if flags & PADDED != 0 {
                    let Some((&n, rest)) = p.split_first() else {
                        return false;
                    };
                    pad = usize::from(n);
                    p = rest;
                }
                let mut priority = None;
                if flags & PRIORITY != 0 {
                    let Some((fields, rest)) = p.split_first_chunk::<5>() else {
                        return false;
                    };
                    priority = Some(*fields);
                    p = rest;
                }
                let Some(fragment) = p.len().checked_sub(pad).map(|n| &p[..n]) else {
                    return false;
                };
                self.block = Some(Block {
                    stream,
                    end_stream: flags & END_STREAM != 0,
                    priority,
                    fragment: fragment.to_vec(),
                    raw: bytes.to_vec(),
                });
            }
            (CONTINUATION, Some(b)) if b.stream == stream => {
                if b.fragment.len() + payload.len() > MAX_BLOCK {
                    return false;
                }
                b.fragment.extend_from_slice(payload);
                b.raw.extend_from_slice(bytes);
            }
            _ => return false,
        }
        if flags & END_HEADERS == 0 {
            return true;
        }
        let Some(block) = self.block.take() else {
            return false;
        };
        match self.reencode(&block.fragment) {
            Some(fragment) => {
                write_block(&block, &fragment, out);
                true
            }
            None => {
                // As it came, and so everything after it (h2 refuses it as it would have).
                out.extend_from_slice(&block.raw);
                self.given_up = true;
                true
            }
        }
    }

    /// The block decoded in the client's context, encoded again with literals only; `None` if
    /// it does not decode.
    fn reencode(&mut self, fragment: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(fragment.len() * 2);
        self.decoder
            .decode_with_cb(fragment, |name, value| {
                let value: &[u8] = if &*name == b":authority"
                    && http::uri::Authority::try_from(&*value).is_err()
                {
                    LOCALHOST
                } else {
                    &value
                };
                // Literal header field without indexing, new name (RFC 7541, 6.2.2).
                out.push(0);
                literal(&name, &mut out);
                literal(value, &mut out);
            })
            .ok()?;
        Some(out)
    }
}

/// A string literal, not Huffman-coded (RFC 7541, 5.2).
fn literal(s: &[u8], out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = loona_hpack::encoder::encode_integer_into(s.len(), 7, 0, out);
    out.extend_from_slice(s);
}

/// A HEADERS frame, then CONTINUATION frames as needed, carrying `fragment`.
fn write_block(b: &Block, fragment: &[u8], out: &mut Vec<u8>) {
    let head = if b.priority.is_some() { 5 } else { 0 };
    let first = fragment.len().min(FRAME - head);
    let mut flags = if b.end_stream { END_STREAM } else { 0 };
    if b.priority.is_some() {
        flags |= PRIORITY;
    }
    if first == fragment.len() {
        flags |= END_HEADERS;
    }
    frame_header(head + first, HEADERS, flags, b.stream, out);
    if let Some(p) = b.priority {
        out.extend_from_slice(&p);
    }
    out.extend_from_slice(&fragment[..first]);
    let mut rest = &fragment[first..];
    while !rest.is_empty() {
        let n = rest.len().min(FRAME);
        let flags = if n == rest.len() { END_HEADERS } else { 0 };
        frame_header(n, CONTINUATION, flags, b.stream, out);
        out.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
    }
}

fn frame_header(len: usize, kind: u8, flags: u8, stream: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A server-side connection whose client's `:authority` may be anything (see the module).
pub(crate) struct AnyAuthority<S> {
    inner: S,
    rewriter: Rewriter,
    /// What every request of the connection is handed (its client's name).
    connection: gyr_proto::listen::ConnectionInfo,
    out: Vec<u8>,
    at: usize,
    eof: bool,
}

impl<S> AnyAuthority<S> {
    pub(crate) fn new(inner: S) -> Self {
        AnyAuthority {
            inner,
            rewriter: Rewriter::default(),
            connection: gyr_proto::listen::ConnectionInfo::default(),
            out: Vec::new(),
            at: 0,
            eof: false,
        }
    }
}

impl<S> std::fmt::Debug for AnyAuthority<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnyAuthority")
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AnyAuthority<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.at);
                buf.put_slice(&this.out[this.at..this.at + n]);
                this.at += n;
                if this.at == this.out.len() {
                    this.out.clear();
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                this.eof = true;
                this.rewriter.finish(&mut this.out);
            } else {
                this.rewriter.feed(read.filled(), &mut this.out);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AnyAuthority<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Each connection's own slot for the name its client gives at the handshake (the socket's
/// peer is always the program's user, and nothing is marked: no token is asked for).
impl<S> tonic::transport::server::Connected for AnyAuthority<S> {
    type ConnectInfo = gyr_proto::listen::ConnectionInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.connection.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame_header(payload.len(), kind, flags, stream, &mut out);
        out.extend_from_slice(payload);
        out
    }

    /// Feeds `input` in pieces of `step` bytes; returns what the server reads.
    fn through(input: &[u8], step: usize) -> Vec<u8> {
        let mut r = Rewriter::default();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            r.feed(piece, &mut out);
        }
        r.finish(&mut out);
        out
    }

    /// The frames of `bytes` (after the preface): (kind, flags, stream, payload).
    fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        assert_eq!(&bytes[..PREFACE.len()], PREFACE);
        bytes = &bytes[PREFACE.len()..];
        let mut v = Vec::new();
        while !bytes.is_empty() {
            let len = (usize::from(bytes[0]) << 16)
                | (usize::from(bytes[1]) << 8)
                | usize::from(bytes[2]);
            let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
            v.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
            bytes = &bytes[9 + len..];
        }
        v
    }

    /// The header lists the server decodes from `bytes`, one per header block.
    fn decoded(bytes: &[u8]) -> Vec<Vec<(String, String)>> {
        let mut d = loona_hpack::Decoder::new();
        let mut lists = Vec::new();
        let mut block = Vec::new();
        for (kind, flags, _, payload) in frames(bytes) {
            match kind {
                HEADERS => {
                    let skip = if flags & PRIORITY != 0 { 5 } else { 0 };
                    block = payload[skip..].to_vec();
                }
                CONTINUATION => block.extend_from_slice(&payload),
                _ => continue,
            }
            if flags & END_HEADERS != 0 {
                let list = d.decode(&block).unwrap();
                lists.push(
                    list.into_iter()
                        .map(|(n, v)| {
                            (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap())
                        })
                        .collect(),
                );
            }
        }
        lists
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541, C.4: three requests with Huffman-coded literals and the dynamic table.
    fn rfc_requests() -> Vec<Vec<u8>> {
        let hex = |s: &str| -> Vec<u8> {
            let s: String = s.split_whitespace().collect();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        vec![
            hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
            hex("8286 84be 5886 a8eb 1064 9cbf"),
            hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
        ]
    }

    #[test]
    fn valid_header_blocks_reach_the_server_as_the_client_meant_them() {
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, 0, &[0, 0, 0, 0, 0, 0]));
        for (i, block) in rfc_requests().iter().enumerate() {
            input.extend(frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                1 + 2 * i as u32,
                block,
            ));
        }
        input.extend(frame(0x0, END_STREAM, 1, b"some data"));
        let expected = vec![
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ]),
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ]),
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ]),
        ];
        for step in [1, 2, 7, 64, input.len()] {
            let out = through(&input, step);
            assert_eq!(decoded(&out), expected, "in pieces of {step}");
            let f = frames(&out);
            // Settings and data untouched; the flags kept.
            assert_eq!(f[0], (0x4, 0, 0, vec![0; 6]));
            assert_eq!(f[4], (0x0, END_STREAM, 1, b"some data".to_vec()));
            assert!(
                f[1..4]
                    .iter()
                    .all(|f| f.0 == HEADERS && f.1 == END_HEADERS | END_STREAM)
            );
        }
    }

    #[test]
    fn a_socket_path_as_authority_becomes_localhost_in_every_request() {
        // `:authority` (static index 1) with incremental indexing, the socket's path as grpc's
        // C core sends it; the second request refers to it through the dynamic table (62).
        let authority = b"%2Ftmp%2Fgyr-0%2F1234.sock";
        let mut first = vec![0x83, 0x86, 0x44, 0x05];
        first.extend_from_slice(b"/a/b1");
        first.extend_from_slice(&[0x41, authority.len() as u8]);
        first.extend_from_slice(authority);
        let second = vec![0x83, 0x86, 0xbe, 0x44, 0x02, b'/', b'c'];
        let mut input = PREFACE.to_vec();
        // The first one padded, with priority fields, split over a CONTINUATION frame.
        let mut payload = vec![3];
        payload.extend_from_slice(&[0, 0, 0, 0, 16]);
        payload.extend_from_slice(&first[..5]);
        payload.extend_from_slice(&[0, 0, 0]);
        input.extend(frame(HEADERS, PADDED | PRIORITY, 1, &payload));
        input.extend(frame(CONTINUATION, END_HEADERS, 1, &first[5..]));
        input.extend(frame(HEADERS, END_HEADERS, 3, &second));
        for step in [1, 3, input.len()] {
            let out = through(&input, step);
            let lists = decoded(&out);
            assert_eq!(
                lists,
                vec![
                    pairs(&[
                        (":method", "POST"),
                        (":scheme", "http"),
                        (":path", "/a/b1"),
                        (":authority", "localhost")
                    ]),
                    pairs(&[
                        (":method", "POST"),
                        (":scheme", "http"),
                        (":authority", "localhost"),
                        (":path", "/c")
                    ]),
                ]
            );
            let f = frames(&out);
            assert_eq!(
                f[0].1,
                PRIORITY | END_HEADERS,
                "padding dropped, priority kept"
            );
            assert_eq!(&f[0].3[..5], &[0, 0, 0, 0, 16]);
        }
    }

    #[test]
    fn what_cannot_be_decoded_reaches_the_server_as_it_came() {
        let mut input = PREFACE.to_vec();
        // Index 99 is in no table.
        input.extend(frame(HEADERS, END_HEADERS, 1, &[0x80 | 99]));
        input.extend(frame(0x0, 0, 1, b"x"));
        assert_eq!(through(&input, 5), input);
        // A frame of another stream inside a header block: passed on too.
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, 0, 1, &[0x82]));
        input.extend(frame(0x0, 0, 3, b"y"));
        assert_eq!(through(&input, 4), input);
        // Cut off in the middle.
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &[0x82, 0x86]));
        input.truncate(input.len() - 1);
        assert_eq!(through(&input, 3), input);
    }

    #[test]
    fn a_large_header_block_is_split_into_frames_the_server_accepts() {
        let big = "v".repeat(40_000);
        let mut block = vec![0x83, 0x00, 0x01, b'k'];
        literal(big.as_bytes(), &mut block);
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, &block));
        let out = through(&input, 1000);
        let f = frames(&out);
        assert!(f.len() >= 3);
        assert!(f.iter().all(|f| f.3.len() <= FRAME));
        assert_eq!(f[0].1, END_STREAM);
        assert_eq!(f.last().unwrap().1, END_HEADERS);
        assert_eq!(
            decoded(&out),
            vec![vec![(":method".into(), "POST".into()), ("k".into(), big)]]
        );
    }
}
