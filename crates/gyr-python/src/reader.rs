//! Trace files for Python: one typed Arrow table per event type (`read_tables`), and what a file
//! holds (`trace_info_json`, the object `gyr trace info --json` prints).
//!
//! The tables are built by gyr-trace (`export::arrow_tables`, the same conversion as the Parquet
//! export) with the GIL released, and handed over through the Arrow C stream interface: each
//! `ArrowTable` has `__arrow_c_stream__`, which pyarrow (15 and later) and polars import without
//! copying a value.

use crate::GyrError;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::SchemaRef;
use gyr_trace::export::{self, Options};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::path::PathBuf;

/// The most inputs one read takes (each is one process of the trace).
const MAX_INPUTS: usize = 4096;

/// One event type's table, exported to Arrow consumers through `__arrow_c_stream__`.
#[pyclass(frozen, module = "gyr._gyr", name = "ArrowTable")]
struct ArrowTable {
    name: String,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    rows: usize,
}

#[pymethods]
impl ArrowTable {
    /// The event type's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Rows in all.
    #[getter]
    fn num_rows(&self) -> usize {
        self.rows
    }

    /// The column names, in order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// The Arrow PyCapsule interface: a capsule named `arrow_array_stream` holding an
    /// `ArrowArrayStream` over this table's batches (shared, not copied). A requested schema
    /// is a hint the protocol allows a producer to ignore: the table has one type per column.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    fn __repr__(&self) -> String {
        format!(
            "<gyr ArrowTable {:?}: {} rows, {} columns>",
            self.name,
            self.rows,
            self.schema.fields().len()
        )
    }
}

/// Reads the traces at `paths` (one process each) into one table per event type; `events`,
/// when given, names the event types to keep; `threads` builds the columns on that many
/// threads (`None`: the cores available, at most `export::MAX_BUILDERS`; 1: on the reading
/// thread). Returns the tables, the rows read and the records left out (a payload not matching
/// its type, or a type never described).
#[pyfunction]
#[pyo3(signature = (paths, events=None, ordered=false, correct=false, threads=None))]
fn read_tables(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    events: Option<Vec<String>>,
    ordered: bool,
    correct: bool,
    threads: Option<usize>,
) -> PyResult<(Vec<ArrowTable>, u64, u64)> {
    if threads == Some(0) {
        return Err(GyrError::new_err(
            "threads=0: give at least 1 (1 builds the tables on the reading thread)",
        ));
    }
    let threads = threads.unwrap_or_else(export::default_builders);
    if paths.is_empty() {
        return Err(GyrError::new_err(
            "no trace file given: pass the path of a file written with GYR_TRACE=FILE",
        ));
    }
    if paths.len() > MAX_INPUTS {
        return Err(GyrError::new_err(format!(
            "{} trace files given, at most {MAX_INPUTS} are read at once: read fewer",
            paths.len()
        )));
    }
    let (rows, skipped, tables) = py
        .detach(|| -> Result<_, String> {
            let inputs = paths
                .iter()
                .map(|p| export::open_input(p).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            let options = Options {
                ordered: ordered || correct,
                correct,
                ..Options::default()
            };
            let (_, stats, tables) = export::arrow_tables(
                inputs,
                events.as_deref(),
                options,
                None,
                threads,
                &mut |_| {},
            )
            .map_err(|e| format!("reading {}: {e}", names(&paths)))?;
            Ok((stats.rows, stats.skipped, tables))
        })
        .map_err(GyrError::new_err)?;
    let tables = tables
        .into_iter()
        .map(|t| ArrowTable {
            rows: t.rows(),
            name: t.name,
            schema: t.schema,
            batches: t.batches,
        })
        .collect();
    Ok((tables, rows, skipped))
}

fn names(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the trace at `path` holds, as the JSON text of `gyr trace info --json` (the package
/// parses it). The GIL is released while the file is read through.
#[pyfunction]
fn trace_info_json(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        gyr_trace::info::read_file(&path)
            .map(|info| info.to_json(&path).to_string())
            .map_err(|e| e.to_string())
    })
    .map_err(GyrError::new_err)
}

/// Adds the reader's functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowTable>()?;
    m.add_function(wrap_pyfunction!(read_tables, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info_json, m)?)?;
    Ok(())
}
