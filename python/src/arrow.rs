//! Arrow tables handed to Python through the Arrow C stream interface, as
//! the Arrow PyCapsule interface defines it: an `ArrowStream` keeps the
//! batches Rust computed, and its `__arrow_c_stream__` exports them as an
//! `ArrowArrayStream` in a capsule named `arrow_array_stream`. pyarrow,
//! polars, DuckDB and others import that without copying a buffer: the
//! arrays they build point into the batches' own memory, which the
//! exported arrays keep alive (each holds `Arc`s of its buffers) after the
//! `ArrowStream` is gone.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ffi::FFI_ArrowSchema;
use datafusion::arrow::ffi_stream::FFI_ArrowArrayStream;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchIterator};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// A table's batches, which Python reads through `__arrow_c_stream__`
/// (python/hvaudit/__init__.py makes a `pyarrow.Table` of it).
#[pyclass(frozen, module = "hvaudit._hvaudit")]
pub struct ArrowStream {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl ArrowStream {
    /// `batches`, whose schema is the first batch's, else `schema`.
    pub fn new(schema: &SchemaRef, batches: Vec<RecordBatch>) -> Self {
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| schema.clone());
        ArrowStream { schema, batches }
    }
}

#[pymethods]
impl ArrowStream {
    /// A new stream of the batches, in a capsule that owns it: its
    /// destructor releases the stream unless a consumer moved it out
    /// (dropping an `FFI_ArrowArrayStream` calls its `release`, which an
    /// import sets to null). Each call gives a stream of its own over the
    /// same batches (their buffers are shared, not copied).
    ///
    /// `requested_schema` is ignored, which the PyCapsule interface allows
    /// a producer: the stream has the batches' own schema, and a consumer
    /// that asked for another one casts, or fails, on its side.
    #[pyo3(signature = (requested_schema = None))]
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

    /// The schema, in a capsule named `arrow_schema` that owns it.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.schema.as_ref()).map_err(crate::run::other)?;
        PyCapsule::new_with_value(py, schema, c"arrow_schema")
    }

    /// How many rows the batches hold.
    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }
}
