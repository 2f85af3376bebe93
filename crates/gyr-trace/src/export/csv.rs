//! CSV tables (RFC 4180): one file per event type, a header line of column names, then one
//! line per record (see [`super::table`] for the columns).
//!
//! A field holding a comma, a double quote, a carriage return or a line feed is quoted, its
//! quotes doubled; an empty string is `""` and a missing value (no wall-clock anchor, a thread
//! not yet described) nothing at all. Integers are written in full, floats in their shortest
//! exact form with a decimal point or exponent (`2.0`, `1e300`; `NaN`, `inf`, `-inf`), so that
//! readers that guess types from text still see floats, booleans as `true`/`false`, bytes in
//! lower-case hexadecimal, wall-clock times as RFC 3339 in UTC with nine decimals. Lines end
//! with `\n`.

use super::table::{Cell, Column, ColumnType, Fixed, TableSink, rfc3339, row_cells};
use super::{push_i64, push_u64};
use gyr_core::schema::Schema;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// Writes each table as a CSV file in one directory.
#[derive(Debug)]
pub(crate) struct CsvSink {
    dir: PathBuf,
    files: Vec<(BufWriter<File>, Vec<ColumnType>)>,
    line: Vec<u8>,
    /// A row's cells; empty between records, so that it borrows nothing.
    cells: Vec<Cell<'static>>,
}

impl CsvSink {
    /// Tables written into `dir`, which exists.
    pub(crate) fn new(dir: PathBuf) -> Self {
        CsvSink {
            dir,
            files: Vec::new(),
            line: Vec::new(),
            cells: Vec::new(),
        }
    }
}

/// Appends `text` to `out` as a CSV field, quoted when it must be.
pub(crate) fn push_text(out: &mut Vec<u8>, text: &[u8]) {
    if text.is_empty() {
        out.extend_from_slice(b"\"\"");
    } else if text
        .iter()
        .any(|&b| matches!(b, b',' | b'"' | b'\r' | b'\n'))
    {
        out.push(b'"');
        for &b in text {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(text);
    }
}

/// Appends the cell `c` of a column of type `ty` to `out`.
pub(crate) fn push_cell(out: &mut Vec<u8>, ty: ColumnType, c: &Cell<'_>) {
    match (*c, ty) {
        (Cell::Null, _) => {}
        (Cell::UInt(ns), ColumnType::WallTime) => out.extend_from_slice(rfc3339(ns).as_bytes()),
        (Cell::Int(v), _) => push_i64(out, v),
        (Cell::UInt(v), _) => push_u64(out, v),
        (Cell::Float(v), _) => {
            if v.is_nan() {
                out.extend_from_slice(b"NaN");
            } else {
                // Shortest text that reads back as the same number; `inf` and `-inf` as such.
                let at = out.len();
                let _ = write!(out, "{}", gyr_core::ShortFloat(v));
                // A whole number keeps a decimal point, so that readers infer a float column.
                if v.is_finite() && !out[at..].iter().any(|b| matches!(b, b'.' | b'e')) {
                    out.extend_from_slice(b".0");
                }
            }
        }
        (Cell::Bool(b), _) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        (Cell::Str(s), _) => push_text(out, s.as_bytes()),
        (Cell::Bytes(b), _) => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            for &x in b {
                out.push(HEX[usize::from(x >> 4)]);
                out.push(HEX[usize::from(x & 15)]);
            }
        }
    }
}

impl TableSink for CsvSink {
    fn create(&mut self, file: &str, _schema: &Schema, columns: Vec<Column>) -> io::Result<usize> {
        let path = self.dir.join(format!("{file}.csv"));
        let f = File::create(&path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        let mut w = BufWriter::with_capacity(64 << 10, f);
        let mut line = Vec::new();
        for (i, c) in columns.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            push_text(&mut line, c.name.as_bytes());
        }
        line.push(b'\n');
        w.write_all(&line)?;
        self.files
            .push((w, columns.into_iter().map(|c| c.ty).collect()));
        Ok(self.files.len() - 1)
    }

    fn record(
        &mut self,
        table: usize,
        schema: &Schema,
        fixed: &Fixed<'_>,
        payload: &[u8],
    ) -> io::Result<bool> {
        // The buffer keeps its capacity between records; its cells never outlive this call.
        let mut cells: Vec<Cell<'_>> = std::mem::take(&mut self.cells);
        let matched = row_cells(fixed, schema, payload, &mut cells);
        let result = if matched {
            let (w, types) = &mut self.files[table];
            self.line.clear();
            for (i, (c, ty)) in cells.iter().zip(types.iter()).enumerate() {
                if i > 0 {
                    self.line.push(b',');
                }
                push_cell(&mut self.line, *ty, c);
            }
            self.line.push(b'\n');
            w.write_all(&self.line)
        } else {
            Ok(())
        };
        cells.clear();
        // Emptied, the buffer borrows nothing and is kept for the next record.
        self.cells = cells.into_iter().map(|_| Cell::Null).collect();
        result.map(|()| matched)
    }

    fn finish(&mut self) -> io::Result<()> {
        for (w, _) in &mut self.files {
            w.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> String {
        let mut v = Vec::new();
        push_text(&mut v, t.as_bytes());
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn quoting() {
        assert_eq!(text("plain"), "plain");
        assert_eq!(text(""), "\"\"");
        assert_eq!(text("a,b"), "\"a,b\"");
        assert_eq!(text("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(text("two\nlines\r"), "\"two\nlines\r\"");
    }

    #[test]
    fn cells() {
        let mut v = Vec::new();
        let ty = ColumnType::Scalar(gyr_core::schema::ScalarType::F64);
        for (i, c) in [
            Cell::Float(0.1),
            Cell::Float(2.0),
            Cell::Float(1e300),
            Cell::Float(f64::NAN),
            Cell::Float(f64::NEG_INFINITY),
            Cell::Int(-5),
            Cell::UInt(u64::MAX),
            Cell::Bool(true),
            Cell::Bytes(&[0, 0xab]),
            Cell::Null,
        ]
        .iter()
        .enumerate()
        {
            if i > 0 {
                v.push(b'|');
            }
            push_cell(&mut v, ty, c);
        }
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "0.1|2.0|1e300|NaN|-inf|-5|18446744073709551615|true|00ab|"
        );
        let mut v = Vec::new();
        push_cell(&mut v, ColumnType::WallTime, &Cell::UInt(1_000_000_001));
        assert_eq!(v, b"1970-01-01T00:00:01.000000001Z");
    }
}
