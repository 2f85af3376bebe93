//! Tables as Arrow record batches (feature `arrow`): the one conversion of records into the
//! typed Arrow columns of [`super::table`], shared by the Parquet export ([`super::parquet`])
//! and by readers that keep the tables in memory ([`super::arrow_tables`], the Python package's
//! `gyr.read_trace`). `Columns` builds them straight from the payload layout, without a value
//! passing through a generic cell: a reader of millions of events a second spends its time
//! here.
//!
//! Columns keep gyr's types: `i8` .. `u64` as Arrow integers of that width and signedness,
//! `f32`, `f64`, `bool`, strings as `Utf8`, bytes as `Binary`, and the wall-clock time as
//! `Timestamp(Nanosecond, "UTC")`. Every column is nullable (a wall-clock time or a thread name
//! may be unknown).

use super::table::{Column, ColumnType, Fixed, TableSink};
use arrow_array::builder::{BooleanBufferBuilder, NullBufferBuilder, StringBuilder};
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, TimestampNanosecondType,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{ArrayRef, BinaryArray, BooleanArray, PrimitiveArray, RecordBatch, StringArray};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use gyr_core::schema::{FieldType, ScalarType};
use std::io;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};

/// Rows of one record batch of an in-memory table: large enough that per-batch costs vanish,
/// small enough that a batch stays in the caches while it is built.
pub const MEMORY_BATCH_ROWS: usize = 1 << 16;

/// Bytes of one string or bytes column at which its batch is closed early, whatever its rows:
/// Arrow's `i32` offsets must stay below 2 GiB, and a record adds at most 1 GiB
/// (`gyr_core::trace::MAX_CHUNK_PAYLOAD`).
const BATCH_VALUE_BYTES: usize = 1 << 30;

fn arrow_error(e: arrow_schema::ArrowError) -> io::Error {
    io::Error::other(format!("Arrow: {e}"))
}

/// Whether `b` is UTF-8, as `std::str::from_utf8` decides; short ASCII strings, the common
/// case, are told at once.
#[inline]
fn is_utf8(b: &[u8]) -> bool {
    b.is_ascii() || std::str::from_utf8(b).is_ok()
}

/// Strings or bytes being gathered: Arrow's offsets and values.
#[derive(Debug)]
struct Var {
    offsets: Vec<i32>,
    values: Vec<u8>,
}

impl Var {
    fn new() -> Self {
        Var {
            offsets: vec![0],
            values: Vec::new(),
        }
    }

    fn push(&mut self, v: &[u8]) {
        self.values.extend_from_slice(v);
        // Below 2 GiB: the batch closes at `BATCH_VALUE_BYTES`.
        self.offsets.push(self.values.len() as i32);
    }

    fn push_empty(&mut self) {
        self.offsets.push(self.values.len() as i32);
    }

    /// The offsets and values gathered; empty again, with room for as many.
    fn take(&mut self) -> (OffsetBuffer<i32>, Buffer) {
        let rows = self.offsets.len();
        let bytes = self.values.len();
        let offsets = std::mem::replace(&mut self.offsets, Vec::with_capacity(rows));
        self.offsets.push(0);
        let values = std::mem::replace(&mut self.values, Vec::with_capacity(bytes));
        (
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(values),
        )
    }
}

/// One payload column's values being gathered, typed as the column.
#[derive(Debug)]
enum Values {
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(BooleanBufferBuilder),
    Str(Var),
    Bytes(Var),
    /// A scalar type of a later gyr: a column of nulls, counted.
    Unknown(usize),
}

/// `N` bytes of `p` at `at`, which the record's check has found in it.
#[inline(always)]
fn le<const N: usize>(p: &[u8], at: usize) -> [u8; N] {
    p.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .unwrap_or([0; N])
}

impl Values {
    fn new(ty: ColumnType) -> Self {
        match ty {
            ColumnType::Scalar(s) => match s {
                ScalarType::I8 => Values::I8(Vec::new()),
                ScalarType::I16 => Values::I16(Vec::new()),
                ScalarType::I32 => Values::I32(Vec::new()),
                ScalarType::I64 => Values::I64(Vec::new()),
                ScalarType::U8 => Values::U8(Vec::new()),
                ScalarType::U16 => Values::U16(Vec::new()),
                ScalarType::U32 => Values::U32(Vec::new()),
                ScalarType::U64 => Values::U64(Vec::new()),
                ScalarType::F32 => Values::F32(Vec::new()),
                ScalarType::F64 => Values::F64(Vec::new()),
                ScalarType::Bool => Values::Bool(BooleanBufferBuilder::new(0)),
                _ => Values::Unknown(0),
            },
            ColumnType::Str => Values::Str(Var::new()),
            // A wall-clock time is never a payload field's column.
            ColumnType::Bytes | ColumnType::WallTime => Values::Bytes(Var::new()),
        }
    }

    /// Appends the value at `at` in `p`: a scalar, or a string's or bytes' `u32` length and
    /// bytes. The record's check has found it there (and a string's bytes UTF-8).
    #[inline(always)]
    fn push(&mut self, p: &[u8], at: usize) {
        match self {
            Values::I8(v) => v.push(i8::from_le_bytes(le(p, at))),
            Values::I16(v) => v.push(i16::from_le_bytes(le(p, at))),
            Values::I32(v) => v.push(i32::from_le_bytes(le(p, at))),
            Values::I64(v) => v.push(i64::from_le_bytes(le(p, at))),
            Values::U8(v) => v.push(p.get(at).copied().unwrap_or(0)),
            Values::U16(v) => v.push(u16::from_le_bytes(le(p, at))),
            Values::U32(v) => v.push(u32::from_le_bytes(le(p, at))),
            Values::U64(v) => v.push(u64::from_le_bytes(le(p, at))),
            Values::F32(v) => v.push(f32::from_le_bytes(le(p, at))),
            Values::F64(v) => v.push(f64::from_le_bytes(le(p, at))),
            Values::Bool(v) => v.append(p.get(at).is_some_and(|&b| b != 0)),
            Values::Str(v) | Values::Bytes(v) => {
                let len = u32::from_le_bytes(le(p, at)) as usize;
                match p.get(at + 4..at + 4 + len) {
                    Some(b) => v.push(b),
                    None => v.push_empty(),
                }
            }
            Values::Unknown(n) => *n += 1,
        }
    }

    fn value_bytes(&self) -> usize {
        match self {
            Values::Str(v) | Values::Bytes(v) => v.values.len(),
            _ => 0,
        }
    }

    /// The column gathered so far, as an array of `rows` values; empty again.
    fn finish(&mut self) -> io::Result<ArrayRef> {
        fn take<T: Copy>(v: &mut Vec<T>) -> Vec<T> {
            let cap = v.len();
            std::mem::replace(v, Vec::with_capacity(cap))
        }
        fn prim<T: arrow_array::ArrowPrimitiveType>(v: Vec<T::Native>) -> ArrayRef {
            Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(v), None))
        }
        Ok(match self {
            Values::I8(v) => prim::<Int8Type>(take(v)),
            Values::I16(v) => prim::<Int16Type>(take(v)),
            Values::I32(v) => prim::<Int32Type>(take(v)),
            Values::I64(v) => prim::<Int64Type>(take(v)),
            Values::U8(v) => prim::<UInt8Type>(take(v)),
            Values::U16(v) => prim::<UInt16Type>(take(v)),
            Values::U32(v) => prim::<UInt32Type>(take(v)),
            Values::U64(v) => prim::<UInt64Type>(take(v)),
            Values::F32(v) => prim::<Float32Type>(take(v)),
            Values::F64(v) => prim::<Float64Type>(take(v)),
            Values::Bool(v) => Arc::new(BooleanArray::new(v.finish(), None)),
            Values::Str(v) => {
                let (offsets, values) = v.take();
                Arc::new(StringArray::try_new(offsets, values, None).map_err(arrow_error)?)
            }
            Values::Bytes(v) => {
                let (offsets, values) = v.take();
                Arc::new(BinaryArray::try_new(offsets, values, None).map_err(arrow_error)?)
            }
            Values::Unknown(n) => Arc::new(BinaryArray::new_null(std::mem::take(n))),
        })
    }
}

/// Where a payload column's value lies: in field `field`, `at` bytes from the field's start.
#[derive(Debug, Clone, Copy)]
struct Slot {
    field: usize,
    at: usize,
}

/// How a payload of one event type is laid out, worked out once per table.
#[derive(Debug)]
struct Layout {
    /// Each field's type.
    fields: Vec<FieldType>,
    /// Where each field starts when every field has a fixed size (then `starts` never
    /// changes), with the bytes the payload needs; `None` when a string or bytes field moves
    /// the fields after it.
    fixed_size: Option<usize>,
    /// A field of a type of a later gyr: no record of this type matches.
    unknown_field: bool,
    /// The payload columns' places, in column order.
    slots: Vec<Slot>,
}

impl Layout {
    fn new(schema: &gyr_core::schema::Schema) -> Self {
        let mut slots = Vec::new();
        let mut size = Some(0usize);
        let mut unknown_field = false;
        for (i, f) in schema.fields.iter().enumerate() {
            match f.ty {
                FieldType::Scalar(s) => {
                    slots.push(Slot { field: i, at: 0 });
                    size = size.map(|n| n + s.size());
                }
                FieldType::Array(s, n) => {
                    for k in 0..n as usize {
                        slots.push(Slot {
                            field: i,
                            at: k * s.size(),
                        });
                    }
                    size = size.map(|z| z + s.size() * n as usize);
                }
                FieldType::Str | FieldType::Bytes => {
                    slots.push(Slot { field: i, at: 0 });
                    size = None;
                }
                _ => {
                    slots.push(Slot { field: i, at: 0 });
                    unknown_field = true;
                }
            }
        }
        Layout {
            fields: schema.fields.iter().map(|f| f.ty).collect(),
            fixed_size: size,
            unknown_field,
            slots,
        }
    }

    /// Sets `starts` to where each field of `p` starts; false when `p` does not match (a field
    /// cut short, a string not UTF-8), as [`super::table::payload_cells`] decides.
    fn check(&self, p: &[u8], starts: &mut [usize]) -> bool {
        if self.unknown_field {
            return false;
        }
        if let Some(size) = self.fixed_size {
            return p.len() >= size;
        }
        let mut at = 0usize;
        for (ty, start) in self.fields.iter().zip(starts.iter_mut()) {
            *start = at;
            let size = match *ty {
                FieldType::Scalar(s) => s.size(),
                FieldType::Array(s, n) => s.size() * n as usize,
                FieldType::Str | FieldType::Bytes => {
                    let Some(len) = p.get(at..at + 4) else {
                        return false;
                    };
                    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
                    let Some(b) = p.get(at + 4..).and_then(|r| r.get(..len)) else {
                        return false;
                    };
                    if *ty == FieldType::Str && !is_utf8(b) {
                        return false;
                    }
                    4 + len
                }
                _ => return false,
            };
            at = match at.checked_add(size) {
                Some(end) if end <= p.len() => end,
                _ => return false,
            };
        }
        true
    }

    /// Where each payload column's value lies in every payload, when every field has a fixed
    /// size; `None` otherwise.
    fn fixed_places(&self) -> Option<Vec<usize>> {
        self.fixed_size?;
        let starts = self.fixed_starts();
        Some(
            self.slots
                .iter()
                .map(|s| starts.get(s.field).copied().unwrap_or(0) + s.at)
                .collect(),
        )
    }

    /// Where each field starts in every payload, when that is fixed.
    fn fixed_starts(&self) -> Vec<usize> {
        let mut at = 0;
        self.fields
            .iter()
            .map(|ty| {
                let start = at;
                at += match *ty {
                    FieldType::Scalar(s) => s.size(),
                    FieldType::Array(s, n) => s.size() * n as usize,
                    _ => 0,
                };
                start
            })
            .collect()
    }
}

/// One table's columns being gathered straight from record payloads: the fixed columns into
/// typed vectors, each payload field's value from its place in the payload (worked out once
/// per type, [`Layout`]). The one conversion of records into Arrow columns, shared by the
/// Parquet export and the in-memory tables.
#[derive(Debug)]
pub(crate) struct Columns {
    schema: SchemaRef,
    layout: Layout,
    /// Where each field of the current payload starts.
    starts: Vec<usize>,
    /// Where each payload column's value lies, the same in every payload (fixed-size types):
    /// no field start is looked up per row.
    places: Option<Vec<usize>>,
    rows: usize,
    time_ns: Vec<u64>,
    wall: Vec<i64>,
    wall_valid: NullBufferBuilder,
    pid: Vec<u32>,
    thread: Vec<u64>,
    /// Built from `&str`s, so that closing a batch does not check every name's UTF-8 again.
    thread_name: StringBuilder,
    seq: Vec<u64>,
    perturbation_ns: Vec<u64>,
    values: Vec<Values>,
    /// The string and bytes columns among `values`: the only ones that can fill a batch
    /// early, checked after every row.
    var_values: Vec<usize>,
}

impl Columns {
    /// The columns of `schema`'s table, `columns` (see [`super::table::columns`]).
    pub(crate) fn new(schema: &gyr_core::schema::Schema, columns: &[Column]) -> Self {
        let layout = Layout::new(schema);
        let starts = layout.fixed_starts();
        let places = layout.fixed_places();
        let values: Vec<Values> = columns
            .iter()
            .skip(super::table::FIXED_COLUMNS.len())
            .map(|c| Values::new(c.ty))
            .collect();
        let var_values = values
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v, Values::Str(_) | Values::Bytes(_)))
            .map(|(i, _)| i)
            .collect();
        Columns {
            schema: schema_of(columns),
            starts,
            places,
            rows: 0,
            time_ns: Vec::new(),
            wall: Vec::new(),
            wall_valid: NullBufferBuilder::new(0),
            pid: Vec::new(),
            thread: Vec::new(),
            thread_name: StringBuilder::new(),
            seq: Vec::new(),
            perturbation_ns: Vec::new(),
            values,
            var_values,
            layout,
        }
    }

    /// The table's Arrow schema.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows gathered since the last batch.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Whether a string or bytes column is so full that the batch must close now.
    pub(crate) fn full(&self) -> bool {
        self.thread_name.values_slice().len() >= BATCH_VALUE_BYTES
            || self.var_values.iter().any(|&i| {
                self.values
                    .get(i)
                    .is_some_and(|v| v.value_bytes() >= BATCH_VALUE_BYTES)
            })
    }

    /// Appends a record's row; false, appending nothing, when `payload` does not match the
    /// table's type. Inlined into the table writer's per-record call, so that a row's fixed
    /// columns go from the record header to the columns without a `Fixed` laid out in memory.
    #[inline(always)]
    pub(crate) fn push(&mut self, fixed: &Fixed<'_>, payload: &[u8]) -> bool {
        if !self.layout.check(payload, &mut self.starts) {
            return false;
        }
        self.time_ns.push(fixed.time_ns);
        match fixed.wall_ns {
            Some(ns) => {
                self.wall.push(ns as i64);
                self.wall_valid.append_non_null();
            }
            None => {
                self.wall.push(0);
                self.wall_valid.append_null();
            }
        }
        self.pid.push(fixed.pid);
        self.thread.push(fixed.thread);
        match fixed.thread_name {
            Some(name) => self.thread_name.append_value(name),
            None => self.thread_name.append_null(),
        }
        self.seq.push(fixed.seq);
        self.perturbation_ns.push(fixed.perturbation_ns);
        match &self.places {
            Some(places) => {
                for (v, &at) in self.values.iter_mut().zip(places) {
                    v.push(payload, at);
                }
            }
            None => {
                for (v, slot) in self.values.iter_mut().zip(&self.layout.slots) {
                    let at = self.starts.get(slot.field).copied().unwrap_or(0) + slot.at;
                    v.push(payload, at);
                }
            }
        }
        self.rows += 1;
        true
    }

    /// The rows gathered as a record batch (`None` when there are none); the columns are empty
    /// again, with room for as many rows.
    pub(crate) fn batch(&mut self) -> io::Result<Option<RecordBatch>> {
        if self.rows == 0 {
            return Ok(None);
        }
        fn take<T: arrow_buffer::ArrowNativeType>(v: &mut Vec<T>) -> ScalarBuffer<T> {
            let cap = v.len();
            ScalarBuffer::from(std::mem::replace(v, Vec::with_capacity(cap)))
        }
        let rows = self.rows;
        self.rows = 0;
        let name_bytes = self.thread_name.values_slice().len();
        let names = std::mem::replace(
            &mut self.thread_name,
            StringBuilder::with_capacity(rows, name_bytes),
        )
        .finish();
        let mut arrays: Vec<ArrayRef> = vec![
            Arc::new(PrimitiveArray::<UInt64Type>::new(
                take(&mut self.time_ns),
                None,
            )),
            Arc::new(
                PrimitiveArray::<TimestampNanosecondType>::new(
                    take(&mut self.wall),
                    self.wall_valid.finish(),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(PrimitiveArray::<UInt32Type>::new(take(&mut self.pid), None)),
            Arc::new(PrimitiveArray::<UInt64Type>::new(
                take(&mut self.thread),
                None,
            )),
            Arc::new(names),
            Arc::new(PrimitiveArray::<UInt64Type>::new(take(&mut self.seq), None)),
            Arc::new(PrimitiveArray::<UInt64Type>::new(
                take(&mut self.perturbation_ns),
                None,
            )),
        ];
        for v in &mut self.values {
            arrays.push(v.finish()?);
        }
        debug_assert!(arrays.iter().all(|a| a.len() == rows));
        RecordBatch::try_new(self.schema.clone(), arrays)
            .map(Some)
            .map_err(arrow_error)
    }
}

/// The Arrow type of a column of type `ty`.
pub(crate) fn data_type(ty: ColumnType) -> DataType {
    match ty {
        ColumnType::Scalar(s) => match s {
            ScalarType::I8 => DataType::Int8,
            ScalarType::I16 => DataType::Int16,
            ScalarType::I32 => DataType::Int32,
            ScalarType::I64 => DataType::Int64,
            ScalarType::U8 => DataType::UInt8,
            ScalarType::U16 => DataType::UInt16,
            ScalarType::U32 => DataType::UInt32,
            ScalarType::U64 => DataType::UInt64,
            ScalarType::F32 => DataType::Float32,
            ScalarType::F64 => DataType::Float64,
            ScalarType::Bool => DataType::Boolean,
            _ => DataType::Binary,
        },
        ColumnType::Str => DataType::Utf8,
        ColumnType::Bytes => DataType::Binary,
        ColumnType::WallTime => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
    }
}

/// The Arrow schema of a table of `columns`.
pub(crate) fn schema_of(columns: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(&c.name, data_type(c.ty), true))
            .collect::<Vec<_>>(),
    ))
}

/// One event type's table, in memory.
#[derive(Debug, Clone)]
pub struct ArrowTable {
    /// The event type's name (`name#2` for a second shape under one name, as in the exports).
    pub name: String,
    /// Its columns (see [`super::table`]).
    pub schema: SchemaRef,
    /// Its rows, in the order they were read, in batches of at most [`MEMORY_BATCH_ROWS`].
    pub batches: Vec<RecordBatch>,
}

impl ArrowTable {
    /// Rows in all.
    pub fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// One table being gathered.
#[derive(Debug)]
struct Gathering {
    table: ArrowTable,
    columns: Columns,
}

impl Gathering {
    fn close_batch(&mut self) -> io::Result<()> {
        if let Some(batch) = self.columns.batch()? {
            self.table.batches.push(batch);
        }
        Ok(())
    }
}

/// Keeps every table in memory as Arrow record batches.
#[derive(Debug, Default)]
pub(crate) struct ArrowSink {
    tables: Vec<Gathering>,
}

/// A sink that keeps its tables in memory.
pub(crate) trait MemoryTables: TableSink {
    /// The tables, in order of creation, named `names` (the table writer knows the event
    /// types' names; a sink is told only file stems); call after [`TableSink::finish`].
    fn into_tables(self, names: Vec<String>) -> Vec<ArrowTable>;
}

impl MemoryTables for ArrowSink {
    fn into_tables(self, names: Vec<String>) -> Vec<ArrowTable> {
        self.tables
            .into_iter()
            .zip(names)
            .map(|(g, name)| ArrowTable { name, ..g.table })
            .collect()
    }
}

impl TableSink for ArrowSink {
    fn create(
        &mut self,
        file: &str,
        schema: &gyr_core::schema::Schema,
        columns: Vec<Column>,
    ) -> io::Result<usize> {
        let columns = Columns::new(schema, &columns);
        self.tables.push(Gathering {
            table: ArrowTable {
                name: file.to_owned(),
                schema: columns.schema().clone(),
                batches: Vec::new(),
            },
            columns,
        });
        Ok(self.tables.len() - 1)
    }

    #[inline(always)]
    fn record(
        &mut self,
        table: usize,
        _schema: &gyr_core::schema::Schema,
        fixed: &Fixed<'_>,
        payload: &[u8],
    ) -> io::Result<bool> {
        let Some(g) = self.tables.get_mut(table) else {
            return Err(io::Error::other(format!("no table {table}")));
        };
        if !g.columns.push(fixed, payload) {
            return Ok(false);
        }
        if g.columns.rows() >= MEMORY_BATCH_ROWS || g.columns.full() {
            g.close_batch()?;
        }
        Ok(true)
    }

    fn finish(&mut self) -> io::Result<()> {
        for g in &mut self.tables {
            g.close_batch()?;
        }
        Ok(())
    }
}

/// Records taken from the walk at most per [`Unit`]: a unit's rows make at most one batch of
/// each table.
const UNIT_ROWS: usize = MEMORY_BATCH_ROWS;

/// Payload bytes at which a unit is handed over whatever its rows (a record adds at most
/// 1 GiB, so `u32` places within a unit suffice).
const UNIT_BYTES: usize = 8 << 20;

/// `Row::name` of a thread not yet described.
const NO_NAME: u32 = u32::MAX;

/// One table as a builder thread makes its columns.
#[derive(Debug)]
struct TableSpec {
    schema: gyr_core::schema::Schema,
    columns: Vec<Column>,
}

/// A record as the walk hands it to a builder: [`Fixed`] without borrowing, its payload's
/// place in [`Unit::payloads`].
#[derive(Debug, Clone, Copy)]
struct Row {
    time_ns: u64,
    wall_ns: Option<u64>,
    thread: u64,
    seq: u64,
    perturbation_ns: u64,
    table: u32,
    pid: u32,
    /// Index in [`Unit::names`], or [`NO_NAME`].
    name: u32,
    at: u32,
    len: u32,
}

/// Consecutive records of the walk, built into batches by one builder thread.
#[derive(Debug, Default)]
struct Unit {
    /// Its place in the walk, from 0: the batches are put together in this order.
    index: u64,
    /// The tables known when it was handed over.
    tables: Arc<Vec<TableSpec>>,
    rows: Vec<Row>,
    payloads: Vec<u8>,
    /// The thread names its rows carry.
    names: Vec<String>,
    /// A test's way to make the builder panic.
    #[cfg(test)]
    panic: bool,
}

/// What a builder made of a unit.
#[derive(Debug)]
struct Built {
    index: u64,
    /// Each batch with its table, in row order.
    batches: io::Result<Vec<(usize, RecordBatch)>>,
    refused: u64,
    /// The unit, emptied, for the walk to fill again.
    spare: Unit,
}

/// Builds the units it receives, with columns of its own for each table (kept from one unit to
/// the next, so that a batch's vectors are sized as the last one's), until the walk closes the
/// channel.
fn build_units(work: &Mutex<Receiver<Unit>>, done: &Sender<Built>) {
    let mut columns: Vec<Option<Columns>> = Vec::new();
    loop {
        let next = work.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(mut unit) = next else { return };
        #[cfg(test)]
        if unit.panic {
            panic!("a unit made to fail");
        }
        let mut refused = 0;
        let batches = build_unit(&mut columns, &unit, &mut refused);
        unit.rows.clear();
        unit.payloads.clear();
        unit.names.clear();
        let built = Built {
            index: unit.index,
            batches,
            refused,
            spare: unit,
        };
        if done.send(built).is_err() {
            return;
        }
    }
}

/// The batches of `unit`'s rows, in row order per table; `refused` counts the payloads that do
/// not match their type.
fn build_unit(
    columns: &mut Vec<Option<Columns>>,
    unit: &Unit,
    refused: &mut u64,
) -> io::Result<Vec<(usize, RecordBatch)>> {
    let mut out = Vec::new();
    for row in &unit.rows {
        let t = row.table as usize;
        if columns.len() <= t {
            columns.resize_with(t + 1, || None);
        }
        let c = match &mut columns[t] {
            Some(c) => c,
            slot => {
                let Some(spec) = unit.tables.get(t) else {
                    return Err(io::Error::other(format!("no table {t}")));
                };
                slot.insert(Columns::new(&spec.schema, &spec.columns))
            }
        };
        let at = row.at as usize;
        let payload = unit
            .payloads
            .get(at..at + row.len as usize)
            .unwrap_or_default();
        let fixed = Fixed {
            time_ns: row.time_ns,
            wall_ns: row.wall_ns,
            pid: row.pid,
            thread: row.thread,
            thread_name: unit.names.get(row.name as usize).map(String::as_str),
            seq: row.seq,
            perturbation_ns: row.perturbation_ns,
        };
        if !c.push(&fixed, payload) {
            *refused += 1;
            continue;
        }
        if (c.rows() >= MEMORY_BATCH_ROWS || c.full())
            && let Some(b) = c.batch()?
        {
            out.push((t, b));
        }
    }
    for (t, c) in columns.iter_mut().enumerate() {
        if let Some(b) = c.as_mut().map(Columns::batch).transpose()?.flatten() {
            out.push((t, b));
        }
    }
    Ok(out)
}

/// Keeps every table in memory as [`ArrowSink`] does, its columns built on `threads` builder
/// threads: the walk cuts the records into units of consecutive rows ([`UNIT_ROWS`] records or
/// [`UNIT_BYTES`] of payload), any idle builder builds a unit's batches, and the batches are
/// put together in the units' order, so every table holds its rows in the walk's order, as
/// [`ArrowSink`]'s do (in batches cut at other rows).
///
/// Memory beyond the tables: at most `2 × threads + 2` units, each of at most [`UNIT_ROWS`]
/// rows and [`UNIT_BYTES`] of payload plus one record (one being filled, `threads` waiting,
/// one being built by each builder, one on its way back; a new one is made only when none has
/// come back), and each builder's columns of a batch per table.
/// A builder that panics stops the read with an error once the walk is done; an error building
/// a batch stops it at the next unit.
#[derive(Debug)]
pub(crate) struct ArrowBuilders<'scope> {
    /// The tables, in order of creation, as builders see them.
    specs: Arc<Vec<TableSpec>>,
    /// The tables being put together.
    tables: Vec<ArrowTable>,
    /// The unit being filled.
    unit: Unit,
    /// The last name given to `unit.names`, by the address and length of the table writer's
    /// string (the same string until [`TableSink::renamed`]), and its index: no name is
    /// compared per record.
    last_name: Option<((usize, usize), u32)>,
    /// Emptied units, to fill again.
    spares: Vec<Unit>,
    /// Units handed over so far.
    handed: u64,
    /// The next unit whose batches go into the tables, and those built before their turn.
    next: u64,
    early: std::collections::BTreeMap<u64, Vec<(usize, RecordBatch)>>,
    refused: u64,
    /// The first error of a builder.
    error: Option<io::Error>,
    work: Option<SyncSender<Unit>>,
    done: Receiver<Built>,
    builders: Vec<ScopedJoinHandle<'scope, ()>>,
    /// Records per unit: [`UNIT_ROWS`], fewer in tests.
    unit_rows: usize,
    /// A test's unit to make a builder panic on.
    #[cfg(test)]
    panic_at: Option<u64>,
}

impl<'scope> ArrowBuilders<'scope> {
    /// Starts `threads` builders in `scope`; an error when none could be started.
    pub(crate) fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        threads: usize,
    ) -> io::Result<Self> {
        let (work, units) = mpsc::sync_channel::<Unit>(threads);
        let units = Arc::new(Mutex::new(units));
        let (built, done) = mpsc::channel();
        let mut builders = Vec::with_capacity(threads);
        for _ in 0..threads {
            let units = units.clone();
            let built = built.clone();
            let spawned = std::thread::Builder::new()
                .name("gyr-table-builder".into())
                .spawn_scoped(scope, move || build_units(&units, &built));
            match spawned {
                Ok(h) => builders.push(h),
                Err(e) if builders.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(ArrowBuilders {
            specs: Arc::default(),
            tables: Vec::new(),
            unit: Unit::default(),
            last_name: None,
            spares: Vec::new(),
            handed: 0,
            next: 0,
            early: Default::default(),
            refused: 0,
            error: None,
            work: Some(work),
            done,
            builders,
            unit_rows: UNIT_ROWS,
            #[cfg(test)]
            panic_at: None,
        })
    }

    /// Puts a built unit's batches into the tables once the units before it are in.
    fn take(&mut self, built: Built) {
        self.refused += built.refused;
        if self.spares.len() <= self.builders.len() {
            self.spares.push(built.spare);
        }
        match built.batches {
            Ok(b) => {
                self.early.insert(built.index, b);
            }
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        while let Some(batches) = self.early.remove(&self.next) {
            self.next += 1;
            for (t, b) in batches {
                if let Some(table) = self.tables.get_mut(t) {
                    table.batches.push(b);
                }
            }
        }
    }

    /// Hands the unit being filled to the builders.
    fn hand_over(&mut self) -> io::Result<()> {
        while let Ok(built) = self.done.try_recv() {
            self.take(built);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let spare = self.spares.pop().unwrap_or_default();
        let mut unit = std::mem::replace(&mut self.unit, spare);
        self.last_name = None;
        unit.index = self.handed;
        unit.tables = self.specs.clone();
        #[cfg(test)]
        {
            unit.panic = self.panic_at == Some(self.handed);
        }
        self.handed += 1;
        let sent = match &self.work {
            Some(work) => work.send(unit).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // Every builder is gone: it can only have panicked.
        let why = self.join().unwrap_or_else(|| "no reason given".into());
        Err(io::Error::other(format!(
            "a table-building thread stopped ({why})"
        )))
    }

    /// Waits for every builder to end (the channel of units closed).
    fn join(&mut self) -> Option<String> {
        self.work = None;
        let mut panicked = None;
        for b in self.builders.drain(..) {
            if let Err(panic) = b.join() {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                panicked.get_or_insert(why);
            }
        }
        panicked
    }
}

impl MemoryTables for ArrowBuilders<'_> {
    fn into_tables(mut self, names: Vec<String>) -> Vec<ArrowTable> {
        std::mem::take(&mut self.tables)
            .into_iter()
            .zip(names)
            .map(|(t, name)| ArrowTable { name, ..t })
            .collect()
    }
}

impl Drop for ArrowBuilders<'_> {
    fn drop(&mut self) {
        // A read stopped early: the builders end once the units handed over are built.
        self.join();
    }
}

impl TableSink for ArrowBuilders<'_> {
    fn create(
        &mut self,
        file: &str,
        schema: &gyr_core::schema::Schema,
        columns: Vec<Column>,
    ) -> io::Result<usize> {
        self.tables.push(ArrowTable {
            name: file.to_owned(),
            schema: schema_of(&columns),
            batches: Vec::new(),
        });
        // Units already handed over keep the list they were given.
        let mut specs: Vec<TableSpec> = self
            .specs
            .iter()
            .map(|s| TableSpec {
                schema: s.schema.clone(),
                columns: s.columns.clone(),
            })
            .collect();
        specs.push(TableSpec {
            schema: schema.clone(),
            columns,
        });
        self.specs = Arc::new(specs);
        Ok(self.tables.len() - 1)
    }

    #[inline(always)]
    fn record(
        &mut self,
        table: usize,
        _schema: &gyr_core::schema::Schema,
        fixed: &Fixed<'_>,
        payload: &[u8],
    ) -> io::Result<bool> {
        let unit = &mut self.unit;
        let name = match fixed.thread_name {
            None => NO_NAME,
            Some(name) => {
                let key = (name.as_ptr() as usize, name.len());
                match self.last_name {
                    Some((k, i)) if k == key => i,
                    _ => {
                        let i = unit.names.len() as u32;
                        unit.names.push(name.to_owned());
                        self.last_name = Some((key, i));
                        i
                    }
                }
            }
        };
        let at = unit.payloads.len();
        unit.payloads.extend_from_slice(payload);
        unit.rows.push(Row {
            time_ns: fixed.time_ns,
            wall_ns: fixed.wall_ns,
            thread: fixed.thread,
            seq: fixed.seq,
            perturbation_ns: fixed.perturbation_ns,
            table: table as u32,
            pid: fixed.pid,
            name,
            at: at as u32,
            len: payload.len() as u32,
        });
        if unit.rows.len() >= self.unit_rows || unit.payloads.len() >= UNIT_BYTES {
            self.hand_over()?;
        }
        // Checked by a builder: `refused` counts what it refuses.
        Ok(true)
    }

    fn finish(&mut self) -> io::Result<()> {
        if !self.unit.rows.is_empty() {
            self.hand_over()?;
        }
        let panicked = self.join();
        while let Ok(built) = self.done.try_recv() {
            self.take(built);
        }
        if let Some(why) = panicked {
            return Err(io::Error::other(format!(
                "a table-building thread stopped ({why})"
            )));
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.next != self.handed {
            return Err(io::Error::other(format!(
                "{} of {} units of rows were not built",
                self.handed - self.next,
                self.handed
            )));
        }
        Ok(())
    }

    fn refused(&self) -> u64 {
        self.refused
    }

    fn renamed(&mut self) {
        self.last_name = None;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Input, Options, arrow_tables};
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampNanosecondType, UInt32Type, UInt64Type};
    use arrow_schema::{DataType, TimeUnit};
    use gyr_core::record::push_record;
    use gyr_core::trace::{TraceEnd, TraceHeader, TraceReader, TraceWriter};
    use gyr_core::{Field, FieldType, Schema, ThreadInfo};
    use std::io::Cursor;

    /// A trace of `n` records of `step {i: u64, d: i64, ok: bool, s: string}` and one of
    /// `other {x: u32}`, on thread 1 named `worker`.
    fn trace(n: u64) -> Vec<u8> {
        let header = TraceHeader {
            pid: 9,
            start_unix_ns: 1_000_000_000,
            ..TraceHeader::default()
        };
        let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
        let step = Schema::new(
            1,
            "step",
            vec![
                Field::new("i", FieldType::U64),
                Field::new("d", FieldType::I64),
                Field::new("ok", FieldType::Bool),
                Field::new("s", FieldType::Str),
            ],
        )
        .unwrap();
        let other = Schema::new(2, "other", vec![Field::new("x", FieldType::U32)]).unwrap();
        w.schema(&step).unwrap();
        w.schema(&other).unwrap();
        w.thread(&ThreadInfo {
            id: 1,
            name: "worker".into(),
            os_tid: 5,
        })
        .unwrap();
        let mut r = Vec::new();
        for i in 0..n {
            let mut p = i.to_le_bytes().to_vec();
            p.extend((-(i as i64)).to_le_bytes());
            p.push(u8::from(i.is_multiple_of(2)));
            let s = format!("#{i}");
            p.extend((s.len() as u32).to_le_bytes());
            p.extend(s.as_bytes());
            push_record(&mut r, 1, 10 * i, i, 0, &p);
        }
        push_record(&mut r, 2, 10 * n, n, 0, &7u32.to_le_bytes());
        w.records(1, &r).unwrap();
        w.finish(&TraceEnd::default()).unwrap()
    }

    fn read(bytes: Vec<u8>, only: Option<&[String]>) -> Vec<super::ArrowTable> {
        let input = Input::new("t", TraceReader::new(Cursor::new(bytes)).unwrap());
        let (_, stats, tables) =
            arrow_tables(vec![input], only, Options::default(), None, 1, &mut |_| {}).unwrap();
        assert_eq!(stats.skipped, 0);
        tables
    }

    #[test]
    fn typed_columns_in_batches() {
        let n = super::MEMORY_BATCH_ROWS as u64 + 10;
        let tables = read(trace(n), None);
        assert_eq!(
            tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["step", "other"]
        );
        let step = &tables[0];
        assert_eq!(step.rows() as u64, n);
        assert_eq!(step.batches.len(), 2, "a batch closes at MEMORY_BATCH_ROWS");
        let ty = |name: &str| {
            step.schema
                .field_with_name(name)
                .unwrap()
                .data_type()
                .clone()
        };
        assert_eq!(ty("time_ns"), DataType::UInt64);
        assert_eq!(
            ty("wall_time"),
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        );
        assert_eq!(ty("i"), DataType::UInt64);
        assert_eq!(ty("d"), DataType::Int64);
        assert_eq!(ty("ok"), DataType::Boolean);
        assert_eq!(ty("s"), DataType::Utf8);
        let last = step.batches.last().unwrap();
        let col = |name: &str| last.column(step.schema.index_of(name).unwrap()).clone();
        let k = n - 1;
        let row = last.num_rows() - 1;
        assert_eq!(col("i").as_primitive::<UInt64Type>().value(row), k);
        assert_eq!(col("d").as_primitive::<Int64Type>().value(row), -(k as i64));
        assert_eq!(col("ok").as_boolean().value(row), k.is_multiple_of(2));
        assert_eq!(col("s").as_string::<i32>().value(row), format!("#{k}"));
        assert_eq!(col("thread_name").as_string::<i32>().value(row), "worker");
        assert_eq!(col("pid").as_primitive::<UInt32Type>().value(row), 9);
        assert_eq!(
            col("wall_time")
                .as_primitive::<TimestampNanosecondType>()
                .value(row),
            1_000_000_000 + 10 * k as i64
        );
        assert_eq!(tables[1].rows(), 1);
    }

    /// A thread's name is null before its description, and a new description renames the
    /// rows after it, however the threads' blocks interleave; ids beyond the dense range work.
    #[test]
    fn thread_names_as_described() {
        let mut w = TraceWriter::new(Vec::new(), &TraceHeader::default()).unwrap();
        let id = 1 << 20;
        let ev = Schema::new(id, "ev", vec![Field::new("x", FieldType::U32)]).unwrap();
        w.schema(&ev).unwrap();
        let block = |w: &mut TraceWriter<Vec<u8>>, thread: u64, seq: u64| {
            let mut r = Vec::new();
            push_record(&mut r, id, seq, seq, 0, &(seq as u32).to_le_bytes());
            w.records(thread, &r).unwrap();
        };
        let named = |w: &mut TraceWriter<Vec<u8>>, thread: u64, name: &str| {
            w.thread(&ThreadInfo {
                id: thread,
                name: name.into(),
                os_tid: 0,
            })
            .unwrap();
        };
        block(&mut w, 1, 0);
        named(&mut w, 1, "one");
        block(&mut w, 1, 1);
        block(&mut w, 2, 2);
        named(&mut w, 2, "two");
        block(&mut w, 2, 3);
        block(&mut w, 1, 4);
        named(&mut w, 1, "uno");
        block(&mut w, 1, 5);
        let bytes = w.finish(&TraceEnd::default()).unwrap();
        let tables = read(bytes, None);
        let b = &tables[0].batches[0];
        let names = b.column(tables[0].schema.index_of("thread_name").unwrap());
        let names = names.as_string::<i32>();
        let got: Vec<Option<&str>> = (0..b.num_rows())
            .map(|i| names.is_valid(i).then(|| names.value(i)))
            .collect();
        assert_eq!(
            got,
            [
                None,
                Some("one"),
                None,
                Some("two"),
                Some("one"),
                Some("uno")
            ]
        );
    }

    #[test]
    fn only_the_types_asked_for() {
        let tables = read(trace(3), Some(&["other".to_string()]));
        assert_eq!(tables.len(), 1);
        assert_eq!(tables[0].name, "other");
        assert_eq!(tables[0].rows(), 1);
    }
}

/// The columns built from payloads hold, record for record, the cells the row-at-a-time path
/// (CSV) writes, and leave out the same records.
#[cfg(test)]
mod same_as_cells {
    use super::super::table::{Cell, Fixed, columns, row_cells};
    use super::Columns;
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    use arrow_array::{Array, RecordBatch};
    use arrow_schema::DataType;
    use gyr_core::{Field, FieldType, Schema};
    use proptest::prelude::*;

    /// A cell, owned, floats by their bits.
    #[derive(Debug, Clone, PartialEq)]
    enum Owned {
        Null,
        Int(i64),
        UInt(u64),
        Float(u64),
        Bool(bool),
        Bytes(Vec<u8>),
    }

    fn own(c: &Cell<'_>) -> Owned {
        match *c {
            Cell::Null => Owned::Null,
            Cell::Int(v) => Owned::Int(v),
            Cell::UInt(v) => Owned::UInt(v),
            Cell::Float(v) => Owned::Float(v.to_bits()),
            Cell::Bool(v) => Owned::Bool(v),
            Cell::Str(v) => Owned::Bytes(v.as_bytes().to_vec()),
            Cell::Bytes(v) => Owned::Bytes(v.to_vec()),
        }
    }

    fn cell(a: &dyn Array, row: usize) -> Owned {
        if a.is_null(row) {
            return Owned::Null;
        }
        match a.data_type() {
            DataType::Int8 => Owned::Int(a.as_primitive::<Int8Type>().value(row).into()),
            DataType::Int16 => Owned::Int(a.as_primitive::<Int16Type>().value(row).into()),
            DataType::Int32 => Owned::Int(a.as_primitive::<Int32Type>().value(row).into()),
            DataType::Int64 => Owned::Int(a.as_primitive::<Int64Type>().value(row)),
            DataType::UInt8 => Owned::UInt(a.as_primitive::<UInt8Type>().value(row).into()),
            DataType::UInt16 => Owned::UInt(a.as_primitive::<UInt16Type>().value(row).into()),
            DataType::UInt32 => Owned::UInt(a.as_primitive::<UInt32Type>().value(row).into()),
            DataType::UInt64 => Owned::UInt(a.as_primitive::<UInt64Type>().value(row)),
            DataType::Float32 => {
                Owned::Float(f64::from(a.as_primitive::<Float32Type>().value(row)).to_bits())
            }
            DataType::Float64 => Owned::Float(a.as_primitive::<Float64Type>().value(row).to_bits()),
            DataType::Boolean => Owned::Bool(a.as_boolean().value(row)),
            DataType::Utf8 => Owned::Bytes(a.as_string::<i32>().value(row).as_bytes().to_vec()),
            DataType::Binary => Owned::Bytes(a.as_binary::<i32>().value(row).to_vec()),
            DataType::Timestamp(..) => {
                Owned::UInt(a.as_primitive::<TimestampNanosecondType>().value(row) as u64)
            }
            t => panic!("unexpected column type {t}"),
        }
    }

    fn schema() -> Schema {
        Schema::new(
            3,
            "mixed",
            vec![
                Field::new("a", FieldType::I8),
                Field::new("s", FieldType::Str),
                Field::new("v", FieldType::Array(gyr_core::schema::ScalarType::F32, 3)),
                Field::new("ok", FieldType::Bool),
                Field::new("b", FieldType::Bytes),
                Field::new("n", FieldType::U16),
                Field::new("x", FieldType::F64),
                Field::new("seq", FieldType::I64),
            ],
        )
        .unwrap()
    }

    /// A payload of `schema()`, whole or damaged: `cut` bytes short, a string not UTF-8, or
    /// a length beyond the payload.
    fn payload() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<i8>(),
            "[a-z,\"é]{0,12}",
            any::<[f32; 3]>(),
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 0..10),
            any::<(u16, f64, i64)>(),
            0usize..4,
            0usize..40,
        )
            .prop_map(|(a, s, v, ok, b, (n, x, q), damage, cut)| {
                let mut p = vec![a as u8];
                let s = s.into_bytes();
                p.extend((s.len() as u32).to_le_bytes());
                let at = p.len();
                p.extend(&s);
                if damage == 1 && !s.is_empty() {
                    p[at] = 0xff;
                }
                for f in v {
                    p.extend(f.to_le_bytes());
                }
                p.push(ok);
                let len = if damage == 2 {
                    u32::MAX
                } else {
                    b.len() as u32
                };
                p.extend(len.to_le_bytes());
                p.extend(&b);
                p.extend(n.to_le_bytes());
                p.extend(x.to_le_bytes());
                p.extend(q.to_le_bytes());
                if damage == 3 {
                    p.truncate(p.len().saturating_sub(cut));
                } else if damage == 0 {
                    p.extend(std::iter::repeat_n(7u8, cut % 3));
                }
                p
            })
    }

    proptest! {
        #[test]
        fn columns_hold_the_cells(payloads in proptest::collection::vec(payload(), 1..40)) {
            let schema = schema();
            let cols = columns(&schema);
            let mut built = Columns::new(&schema, &cols);
            let mut expected = Vec::new();
            let mut cells = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                let fixed = Fixed {
                    time_ns: i as u64 * 3,
                    wall_ns: (i % 4 != 0).then_some(1_000 + i as u64),
                    pid: 7,
                    thread: (i % 3) as u64,
                    thread_name: (i % 5 != 1).then_some(["t0", "t1", "t2"][i % 3]),
                    seq: i as u64,
                    perturbation_ns: 11 * i as u64,
                };
                let matched = row_cells(&fixed, &schema, p, &mut cells);
                prop_assert_eq!(built.push(&fixed, p), matched, "payload {:?}", p);
                if matched {
                    expected.push(cells.iter().map(own).collect::<Vec<_>>());
                }
            }
            let batch: Option<RecordBatch> = built.batch().unwrap();
            prop_assert_eq!(batch.as_ref().map_or(0, RecordBatch::num_rows), expected.len());
            if let Some(batch) = batch {
                prop_assert_eq!(batch.num_columns(), cols.len());
                for (row, want) in expected.iter().enumerate() {
                    let got: Vec<Owned> =
                        batch.columns().iter().map(|a| cell(a.as_ref(), row)).collect();
                    prop_assert_eq!(&got, want);
                }
            }
            prop_assert!(built.batch().unwrap().is_none(), "a batch empties the columns");
        }

        /// A file read with its records decoded on the read-ahead thread (as `gyr.read_trace`
        /// reads) gives the tables, counts and damage of a walk that decodes them itself, and
        /// its rows hold the cells of the row-at-a-time path; whatever the payloads, the chunk
        /// sizes, a type never described or a damaged chunk.
        #[test]
        fn read_ahead_gives_the_walks_tables(
            payloads in proptest::collection::vec(payload(), 1..120),
            chunk in 64usize..4096,
            damage_at in proptest::option::of(0usize..1 << 16),
        ) {
            use super::super::{Input, Options, arrow_tables, open_input};
            use gyr_core::trace::{TraceEnd, TraceHeader, TraceReader, TraceWriter};
            let schema = schema();
            let header = TraceHeader { pid: 4, start_unix_ns: 5_000, ..TraceHeader::default() };
            let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
            w.set_chunk_target(chunk);
            w.schema(&schema).unwrap();
            let mut expected = 0u64;
            let mut cells = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                let thread = (i % 3) as u64 + 1;
                if i % 7 == 2 {
                    w.thread(&gyr_core::ThreadInfo {
                        id: thread,
                        name: format!("t{i}"),
                        os_tid: 0,
                    })
                    .unwrap();
                }
                let mut r = Vec::new();
                let fixed = Fixed {
                    time_ns: 0, wall_ns: None, pid: 0, thread, thread_name: None, seq: 0,
                    perturbation_ns: 0,
                };
                expected += u64::from(row_cells(&fixed, &schema, p, &mut cells));
                gyr_core::record::push_record(&mut r, 3, 10 * i as u64, i as u64, i as u64, p);
                // A type never described: counted, as the walk counts it.
                if i % 11 == 5 {
                    gyr_core::record::push_record(&mut r, 99, 10 * i as u64, i as u64, 0, &[1]);
                }
                w.records(thread, &r).unwrap();
            }
            let mut bytes = w.finish(&TraceEnd::default()).unwrap();
            if let Some(at) = damage_at {
                let at = 64 + at % bytes.len().saturating_sub(64).max(1);
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= 0x5a;
                }
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.gyr");
            std::fs::write(&path, &bytes).unwrap();
            let plain = Input::new("t", TraceReader::new(std::io::Cursor::new(bytes)).unwrap());
            let (walk_report, walk_stats, walk_tables) =
                arrow_tables(vec![plain], None, Options::default(), None, 1, &mut |_| {}).unwrap();
            let ahead = open_input(&path).unwrap();
            let (report, stats, tables) =
                arrow_tables(vec![ahead], None, Options::default(), None, 1, &mut |_| {}).unwrap();
            prop_assert_eq!(&stats, &walk_stats);
            prop_assert_eq!(report.records, walk_report.records);
            prop_assert_eq!(report.events, walk_report.events);
            prop_assert_eq!(
                &report.files[0].summary.damage,
                &walk_report.files[0].summary.damage
            );
            prop_assert_eq!(tables.len(), walk_tables.len());
            for (a, b) in tables.iter().zip(&walk_tables) {
                prop_assert_eq!(&a.name, &b.name);
                prop_assert_eq!(&a.batches, &b.batches);
            }
            if damage_at.is_none() {
                prop_assert_eq!(stats.rows, expected);
            }
        }

        /// Tables built on builder threads hold the rows of the tables built on the walking
        /// thread, in the same order, with the same counts and damage; whatever the payloads
        /// (refused ones included), the units' sizes, the builders and the damage.
        #[test]
        fn builders_give_the_walks_tables(
            payloads in proptest::collection::vec(payload(), 1..150),
            chunk in 64usize..4096,
            damage_at in proptest::option::of(0usize..1 << 16),
            threads in 2usize..5,
            unit_rows in 1usize..40,
        ) {
            let bytes = trace_of(&payloads, chunk, damage_at);
            let (walk_report, walk_stats, walk_tables) = read_with(bytes.clone(), 1, None).unwrap();
            let (report, stats, tables) =
                read_with(bytes, threads, Some((unit_rows, None))).unwrap();
            prop_assert_eq!(&stats, &walk_stats);
            prop_assert_eq!(report.records, walk_report.records);
            prop_assert_eq!(report.events, walk_report.events);
            prop_assert_eq!(
                &report.files[0].summary.damage,
                &walk_report.files[0].summary.damage
            );
            prop_assert_eq!(tables.len(), walk_tables.len());
            for (a, b) in tables.iter().zip(&walk_tables) {
                prop_assert_eq!(&a.name, &b.name);
                prop_assert_eq!(&a.schema, &b.schema);
                prop_assert!(a.batches.iter().all(|x| x.num_rows() <= super::MEMORY_BATCH_ROWS));
                prop_assert_eq!(one_row_batches(a), one_row_batches(b));
            }
        }
    }

    /// A trace of `payloads` as records of `schema()` on three threads, renamed now and then,
    /// in chunks of about `chunk` bytes, a byte flipped at `damage_at`.
    fn trace_of(payloads: &[Vec<u8>], chunk: usize, damage_at: Option<usize>) -> Vec<u8> {
        use gyr_core::trace::{TraceEnd, TraceHeader, TraceWriter};
        let header = TraceHeader {
            pid: 4,
            start_unix_ns: 5_000,
            ..TraceHeader::default()
        };
        let mut w = TraceWriter::new(Vec::new(), &header).unwrap();
        w.set_chunk_target(chunk);
        w.schema(&schema()).unwrap();
        for (i, p) in payloads.iter().enumerate() {
            let thread = (i % 3) as u64 + 1;
            if i % 7 == 2 {
                w.thread(&gyr_core::ThreadInfo {
                    id: thread,
                    name: format!("t{i}"),
                    os_tid: 0,
                })
                .unwrap();
            }
            let mut r = Vec::new();
            gyr_core::record::push_record(&mut r, 3, 10 * i as u64, i as u64, i as u64, p);
            if i % 11 == 5 {
                gyr_core::record::push_record(&mut r, 99, 10 * i as u64, i as u64, 0, &[1]);
            }
            w.records(thread, &r).unwrap();
        }
        let mut bytes = w.finish(&TraceEnd::default()).unwrap();
        if let Some(at) = damage_at {
            let at = 64 + at % bytes.len().saturating_sub(64).max(1);
            if let Some(b) = bytes.get_mut(at) {
                *b ^= 0x5a;
            }
        }
        bytes
    }

    type Read = (
        super::super::Report,
        super::super::table::TableStats,
        Vec<super::ArrowTable>,
    );

    /// `bytes` read into tables by `arrow_tables` on `threads`, or, given `(unit_rows,
    /// panic_at)`, by builders cutting units of `unit_rows` records, one of which panics.
    fn read_with(
        bytes: Vec<u8>,
        threads: usize,
        units: Option<(usize, Option<u64>)>,
    ) -> std::io::Result<Read> {
        use super::super::{Input, Options, arrow_tables, tables_into};
        use gyr_core::trace::TraceReader;
        let input = Input::new("t", TraceReader::new(std::io::Cursor::new(bytes)).unwrap());
        let Some((unit_rows, panic_at)) = units else {
            return arrow_tables(
                vec![input],
                None,
                Options::default(),
                None,
                threads,
                &mut |_| {},
            );
        };
        std::thread::scope(|scope| {
            let mut sink = super::ArrowBuilders::start(scope, threads)?;
            sink.unit_rows = unit_rows;
            sink.panic_at = panic_at;
            tables_into(
                sink,
                vec![input],
                None,
                Options::default(),
                None,
                &mut |_| {},
            )
        })
    }

    /// A table's rows, each as a batch of its own.
    fn one_row_batches(t: &super::ArrowTable) -> Vec<RecordBatch> {
        t.batches
            .iter()
            .flat_map(|b| (0..b.num_rows()).map(move |i| b.slice(i, 1)))
            .collect()
    }

    /// A builder that panics makes the read an error that says so, whichever unit it was
    /// building, and the read ends (no hang on the other builders or the walk).
    #[test]
    fn a_builder_panic_is_an_error() {
        let payloads: Vec<Vec<u8>> = (0..200u8)
            .map(|i| {
                let mut p = vec![i];
                p.extend(0u32.to_le_bytes());
                p.extend([0u8; 12]);
                p.push(1);
                p.extend(0u32.to_le_bytes());
                p.extend([0u8; 18]);
                p
            })
            .collect();
        let bytes = trace_of(&payloads, 512, None);
        let (_, stats, tables) = read_with(bytes.clone(), 2, Some((7, None))).unwrap();
        assert_eq!(stats.rows, 200);
        assert_eq!(tables[0].rows(), 200);
        for at in [0, 5, 28] {
            let e = read_with(bytes.clone(), 2, Some((7, Some(at)))).unwrap_err();
            assert!(
                e.to_string()
                    .contains("a table-building thread stopped (a unit made to fail)"),
                "{e}"
            );
        }
    }
}
