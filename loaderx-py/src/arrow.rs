//! Arrow data as records through the engine's own mapping (`loaderx_core::convert::arrow`, the
//! one Parquet files take): the Ray sink hands each block over as an Arrow IPC stream.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::IntoPy;

/// One column's records: `(name, kind, dtype name, shape, values, offsets)`, `values` every
/// record's bytes back to back (`uint8`), `offsets` where each starts and the last ends
/// (`uint64`, one more than the rows).
type Column<'py> =
    (String, String, &'static str, Vec<usize>, Bound<'py, PyArray1<u8>>, Bound<'py, PyArray1<u64>>);

/// The records of every column of the Arrow IPC stream `ipc` (its batches in order), as
/// [`Column`]s; `what` names the stream in errors (a null or a type without a layout is a
/// `ValueError` naming the column and row).
#[pyfunction]
pub fn arrow_records<'py>(
    py: Python<'py>,
    ipc: &Bound<'py, PyBytes>,
    what: &str,
) -> PyResult<Vec<Column<'py>>> {
    let bytes = ipc.as_bytes();
    let columns =
        crate::fork::detach(py, || loaderx_core::convert::arrow::ipc_columns(bytes, what.as_ref()))?.py()?;
    Ok(columns
        .into_iter()
        .map(|c| {
            let offsets: Vec<u64> = std::iter::once(0).chain(c.ends.iter().map(|&e| e as u64)).collect();
            (
                c.name,
                c.schema.kind.to_string(),
                c.schema.dtype.name(),
                c.schema.shape,
                PyArray1::from_vec(py, c.bytes),
                PyArray1::from_vec(py, offsets),
            )
        })
        .collect())
}
