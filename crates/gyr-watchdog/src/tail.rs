//! Following files and pipes as lines: [`Lines`] cuts bytes into lines (holding a partial last
//! line until its newline comes, cutting a line past [`MAX_LINE`]), [`FileTail`] follows one
//! path by polling (a file created later, rotation, truncation, removal), [`FileSet`] finds the
//! files of globs again and again (time directories appearing while a solver writes them).
//!
//! Polling, not change notification: it works the same on every file system (NFS and the
//! parallel file systems solvers write to included), costs one `stat` per file per poll, and a
//! poll that finds nothing new reads nothing.

use crate::glob::{Glob, Match};
use std::collections::HashSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The longest line kept, in bytes (1 MiB): a longer one is cut there (the rest is skipped up
/// to its newline) and counted.
pub const MAX_LINE: usize = 1 << 20;
/// The most files followed at once; more matches are counted and left alone.
pub const MAX_FILES: usize = 1024;
/// The most bytes read from one file in one poll, so that one huge file does not hold up the
/// others (the rest is read at the next poll, at once).
pub const MAX_READ_PER_POLL: u64 = 32 << 20;
/// The size of the read buffer.
pub const READ_CHUNK: usize = 256 << 10;

/// Cuts a byte stream into lines.
#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
    cutting: bool,
    scratch: String,
    /// Lines cut at [`MAX_LINE`].
    pub cut: u64,
}

fn with_str(bytes: &[u8], scratch: &mut String, f: &mut impl FnMut(&str)) {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => f(s),
        Err(_) => {
            scratch.clear();
            scratch.push_str(&String::from_utf8_lossy(bytes));
            f(scratch);
        }
    }
}

impl Lines {
    /// Empty.
    pub fn new() -> Lines {
        Lines::default()
    }

    /// Takes more bytes; calls `on_line` for each line they complete (without `\n` or `\r\n`;
    /// bytes that are not UTF-8 replaced).
    pub fn feed(&mut self, mut data: &[u8], on_line: &mut impl FnMut(&str)) {
        while let Some(nl) = data.iter().position(|&b| b == b'\n') {
            let (head, rest) = (&data[..nl], &data[nl + 1..]);
            if self.partial.is_empty() && !self.cutting {
                if head.len() > MAX_LINE {
                    self.cut += 1;
                    with_str(
                        &head[..floor_char(head, MAX_LINE)],
                        &mut self.scratch,
                        on_line,
                    );
                } else {
                    with_str(head, &mut self.scratch, on_line);
                }
            } else {
                self.append(head);
                let line = std::mem::take(&mut self.partial);
                with_str(&line, &mut self.scratch, on_line);
                self.partial = line;
                self.partial.clear();
                self.cutting = false;
            }
            data = rest;
        }
        self.append(data);
    }

    fn append(&mut self, data: &[u8]) {
        if self.cutting {
            return;
        }
        let room = MAX_LINE - self.partial.len();
        if data.len() > room {
            self.partial
                .extend_from_slice(&data[..floor_char(data, room)]);
            self.cutting = true;
            self.cut += 1;
        } else {
            self.partial.extend_from_slice(data);
        }
    }

    /// Gives the partial last line, if any, as a line: at the end of a stream.
    pub fn flush(&mut self, on_line: &mut impl FnMut(&str)) {
        if !self.partial.is_empty() || self.cutting {
            let line = std::mem::take(&mut self.partial);
            with_str(&line, &mut self.scratch, on_line);
            self.partial = line;
            self.partial.clear();
        }
        self.cutting = false;
    }

    /// Drops the partial last line.
    pub fn clear(&mut self) {
        self.partial.clear();
        self.cutting = false;
    }

    /// Bytes held of a line not yet ended.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }
}

/// The largest index ≤ `at` that does not split a UTF-8 character of `b` (or `at`, when `b`
/// is not UTF-8 there anyway).
fn floor_char(b: &[u8], at: usize) -> usize {
    let mut i = at.min(b.len());
    while i > 0 && i < b.len() && (b[i] & 0xC0) == 0x80 && at - i < 4 {
        i -= 1;
    }
    i
}

/// What happened to a followed file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileEvent {
    /// It was opened (found for the first time).
    Opened,
    /// Another file took its path (renamed away, or deleted and created again): the old one
    /// was read to its end, the new one is read from its start.
    Rotated,
    /// It shrank: it is read again from its start.
    Truncated,
    /// Its path is gone (the file was read to its end).
    Removed,
}

impl FileEvent {
    /// `opened`, `rotated`, `truncated` or `removed`.
    pub fn name(self) -> &'static str {
        match self {
            FileEvent::Opened => "opened",
            FileEvent::Rotated => "rotated",
            FileEvent::Truncated => "truncated",
            FileEvent::Removed => "removed",
        }
    }
}

/// What a poll of a file found: a line, or something that happened to the file (before the
/// lines it concerns).
#[derive(Debug)]
pub enum Item<'a> {
    /// A line.
    Line(&'a str),
    /// Something happened to the file.
    File(FileEvent),
}

/// One followed path.
#[derive(Debug)]
pub struct FileTail {
    /// The path.
    pub path: PathBuf,
    /// The source it belongs to (an index into [`crate::Spec::sources`]).
    pub source: usize,
    /// The run it belongs to.
    pub instance: String,
    file: Option<File>,
    id: (u64, u64),
    offset: u64,
    lines: Lines,
    from_end: bool,
    seen: bool,
}

impl FileTail {
    /// Follows `path`; with `from_end`, what the file holds when first opened is skipped.
    pub fn new(path: PathBuf, source: usize, instance: String, from_end: bool) -> FileTail {
        FileTail {
            path,
            source,
            instance,
            file: None,
            id: (0, 0),
            offset: 0,
            lines: Lines::new(),
            from_end,
            seen: false,
        }
    }

    /// Lines cut at [`MAX_LINE`] so far.
    pub fn cut(&self) -> u64 {
        self.lines.cut
    }

    /// The byte offset read up to.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads what is new, calling `on` for each line and each thing that happened; `buf` is
    /// the read buffer, reused. Returns the bytes read.
    pub fn poll(&mut self, buf: &mut Vec<u8>, on: &mut impl FnMut(Item<'_>)) -> u64 {
        let meta = std::fs::metadata(&self.path).ok().filter(|m| m.is_file());
        let mut read = 0;
        if self.file.is_some() {
            let same = meta.as_ref().is_some_and(|m| (m.dev(), m.ino()) == self.id);
            if !same {
                // Renamed away or deleted: what the old file still holds is read first.
                read += self.read_to_end(buf, on, u64::MAX);
                self.lines.flush(&mut |l| on(Item::Line(l)));
                self.file = None;
                if meta.is_none() {
                    on(Item::File(FileEvent::Removed));
                    return read;
                }
            } else if let Some(m) = &meta
                && m.len() < self.offset
            {
                on(Item::File(FileEvent::Truncated));
                self.lines.clear();
                self.offset = 0;
                if let Some(f) = &mut self.file
                    && f.seek(SeekFrom::Start(0)).is_err()
                {
                    self.file = None;
                }
            }
        }
        if self.file.is_none() {
            let Some(m) = meta else {
                return read;
            };
            let Ok(mut f) = File::open(&self.path) else {
                return read;
            };
            // The file opened is the one looked at, unless it changed in between: take its own.
            let (dev, ino, len) = match f.metadata() {
                Ok(fm) => (fm.dev(), fm.ino(), fm.len()),
                Err(_) => (m.dev(), m.ino(), m.len()),
            };
            self.id = (dev, ino);
            self.offset = 0;
            if self.from_end && !self.seen {
                self.offset = len;
                if f.seek(SeekFrom::Start(len)).is_err() {
                    self.offset = 0;
                }
            }
            on(Item::File(if self.seen {
                FileEvent::Rotated
            } else {
                FileEvent::Opened
            }));
            self.seen = true;
            self.file = Some(f);
        }
        read + self.read_to_end(buf, on, MAX_READ_PER_POLL)
    }

    fn read_to_end(&mut self, buf: &mut Vec<u8>, on: &mut impl FnMut(Item<'_>), limit: u64) -> u64 {
        let Some(f) = &mut self.file else {
            return 0;
        };
        if buf.len() < READ_CHUNK {
            buf.resize(READ_CHUNK, 0);
        }
        let mut total = 0u64;
        while total < limit {
            let n = match f.read(buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            total += n as u64;
            self.offset += n as u64;
            self.lines.feed(&buf[..n], &mut |l| on(Item::Line(l)));
        }
        total
    }

    /// Reads to the end and gives the partial last line as a line: when the writer is done.
    pub fn finish(&mut self, buf: &mut Vec<u8>, on: &mut impl FnMut(Item<'_>)) {
        self.poll(buf, on);
        self.read_to_end(buf, on, u64::MAX);
        self.lines.flush(&mut |l| on(Item::Line(l)));
    }
}

/// A glob of a source, with what its files are followed as.
#[derive(Debug, Clone)]
pub struct Watch {
    /// The glob.
    pub glob: Glob,
    /// The source its files belong to.
    pub source: usize,
    /// Skip what files held when first seen.
    pub from_end: bool,
}

/// The files of several globs, found again at each [`FileSet::scan`].
#[derive(Debug)]
pub struct FileSet {
    base: PathBuf,
    watches: Vec<Watch>,
    default_instance: String,
    only: Option<String>,
    known: HashSet<PathBuf>,
    first: bool,
    /// Matches left alone because [`MAX_FILES`] files are followed already.
    pub over_limit: u64,
}

impl FileSet {
    /// Globs relative to `base`; files whose glob has no `{instance}` belong to
    /// `default_instance`; with `only`, only that instance's files are followed.
    pub fn new(
        base: &Path,
        watches: Vec<Watch>,
        default_instance: &str,
        only: Option<String>,
    ) -> FileSet {
        FileSet {
            base: base.to_owned(),
            watches,
            default_instance: default_instance.to_owned(),
            only,
            known: HashSet::new(),
            first: true,
            over_limit: 0,
        }
    }

    /// Whether it has no globs.
    pub fn is_empty(&self) -> bool {
        self.watches.is_empty()
    }

    /// Expands the globs and returns the files not seen before, in natural order. A file
    /// present at the first scan is followed from its end when its source says `from = "end"`;
    /// later ones are read whole.
    pub fn scan(&mut self) -> Vec<FileTail> {
        let mut new = Vec::new();
        for w in &self.watches {
            for Match { path, instance } in w.glob.expand(&self.base) {
                let instance = instance.unwrap_or_else(|| self.default_instance.clone());
                if self.only.as_ref().is_some_and(|o| *o != instance) {
                    continue;
                }
                if self.known.contains(&path) {
                    continue;
                }
                if self.known.len() >= MAX_FILES {
                    self.over_limit += 1;
                    continue;
                }
                self.known.insert(path.clone());
                new.push(FileTail::new(
                    path,
                    w.source,
                    instance,
                    w.from_end && self.first,
                ));
            }
        }
        self.first = false;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(l: &mut Lines, data: &[u8]) -> Vec<String> {
        let mut v = Vec::new();
        l.feed(data, &mut |s| v.push(s.to_owned()));
        v
    }

    #[test]
    fn holds_partial_lines_and_cuts_long_ones() {
        let mut l = Lines::new();
        assert_eq!(collect(&mut l, b"a\nb"), ["a"]);
        assert_eq!(collect(&mut l, b"c\r\nd"), ["bc"]);
        let mut v = Vec::new();
        l.flush(&mut |s| v.push(s.to_owned()));
        assert_eq!(v, ["d"]);
        let long = vec![b'x'; MAX_LINE + 10];
        assert!(collect(&mut l, &long).is_empty());
        assert!(l.pending() <= MAX_LINE);
        let got = collect(&mut l, b"yy\nz\n");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].len(), MAX_LINE);
        assert_eq!(got[1], "z");
        assert_eq!(l.cut, 1);
    }
}
