//! Arrow tables handed to Python as one Arrow IPC stream in a `bytes`
//! object, which `pyarrow.ipc.open_stream` reads without copying (its
//! arrays point into the bytes). The Arrow C stream interface would avoid
//! the one copy made here, but needs arrow's `ffi` feature, which the
//! CLI's build lacks: enabling it would build DataFusion a second time.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `batches` (of `schema`) as an IPC stream.
pub fn ipc(schema: &SchemaRef, batches: &[RecordBatch]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, schema)?;
    for b in batches {
        writer.write(b)?;
    }
    writer.finish()?;
    drop(writer);
    Ok(out)
}

/// `batches` as Python `bytes` holding their IPC stream; the schema is the
/// first batch's, else `schema`.
pub fn to_py<'py>(
    py: Python<'py>,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> PyResult<Bound<'py, PyBytes>> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or(schema.clone());
    let bytes = ipc(&schema, batches).map_err(crate::run::other)?;
    Ok(PyBytes::new(py, &bytes))
}
