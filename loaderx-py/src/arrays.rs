//! Engine arrays handed to NumPy, and NumPy arrays lent to the engine.

use loaderx_core::{ArrayData, DenseArray};
use numpy::{PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// `data` as a one-dimensional NumPy array owning the same allocation (no copy), except `bf16`,
/// which NumPy has no type for: its bit patterns are copied into a `uint16` array, which the
/// Python layer views as `ml_dtypes.bfloat16` where that package is installed.
pub fn flat(py: Python<'_>, data: ArrayData) -> PyResult<Bound<'_, PyAny>> {
    Ok(match data {
        ArrayData::Bool(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::U8(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::I8(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::U16(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::I16(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::U32(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::I32(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::U64(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::I64(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::F16(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::BF16(v) => PyArray1::from_iter(py, v.iter().map(|x| x.to_bits())).into_any(),
        ArrayData::F32(v) => PyArray1::from_vec(py, v).into_any(),
        ArrayData::F64(v) => PyArray1::from_vec(py, v).into_any(),
        other => {
            return Err(PyValueError::new_err(format!("arrays of {} are not supported here", other.dtype())));
        }
    })
}

/// `array` as a NumPy array of its shape, owning the engine's buffer: from its first element,
/// past the storage's [`DenseArray::head`] (the loader's aligned batches), without a copy.
pub fn dense(py: Python<'_>, array: DenseArray) -> PyResult<Bound<'_, PyAny>> {
    let (shape, data, head) = array.into_raw_parts();
    let flat = if head == 0 { flat(py, data)? } else { flat_past(py, data, head)? };
    flat.call_method1("reshape", (shape,))
}

/// [`flat`] of the elements of `data` past its first `head`, owning the whole allocation
/// (`ndarray` keeps the offset, NumPy points at it).
fn flat_past(py: Python<'_>, data: ArrayData, head: usize) -> PyResult<Bound<'_, PyAny>> {
    use numpy::ndarray::{Array1, Axis, Slice};
    fn past<T: numpy::Element>(py: Python<'_>, v: Vec<T>, head: usize) -> Bound<'_, PyAny> {
        let mut a = Array1::from_vec(v);
        a.slice_axis_inplace(Axis(0), Slice::from(head..));
        numpy::PyArray1::from_owned_array(py, a).into_any()
    }
    Ok(match data {
        ArrayData::U8(v) => past(py, v, head),
        ArrayData::I8(v) => past(py, v, head),
        ArrayData::U16(v) => past(py, v, head),
        ArrayData::I16(v) => past(py, v, head),
        ArrayData::U32(v) => past(py, v, head),
        ArrayData::I32(v) => past(py, v, head),
        ArrayData::U64(v) => past(py, v, head),
        ArrayData::I64(v) => past(py, v, head),
        ArrayData::F16(v) => past(py, v, head),
        ArrayData::F32(v) => past(py, v, head),
        ArrayData::F64(v) => past(py, v, head),
        // bf16 is copied to u16 bits anyway (booleans are never offset).
        ArrayData::BF16(v) => flat(py, ArrayData::BF16(v[head..].to_vec()))?,
        other => {
            return Err(PyValueError::new_err(format!(
                "arrays of {} are not handed over from an offset",
                other.dtype()
            )));
        }
    })
}

/// The elements of a read-only, C-contiguous one-dimensional array, copied while the GIL is
/// held.
///
/// What the engine reads without the GIL must be a copy: "read-only" binds Rust alone, and
/// another Python thread may write the array the moment the GIL is released. The engine checks
/// indices once and reads them again in its copy loop, so a write in between turned a checked
/// index into an out-of-range one (a panic); a record's bytes written while it is appended
/// would be stored under a checksum of other bytes.
pub fn owned<T: numpy::Element + Copy>(array: &PyReadonlyArray1<'_, T>, what: &str) -> PyResult<Vec<T>> {
    slice(array, what).map(<[T]>::to_vec)
}

/// The elements of a read-only, C-contiguous, aligned one-dimensional array, borrowed: only for
/// reads made with the GIL held (see [`owned`]).
pub fn slice<'a, T: numpy::Element>(array: &'a PyReadonlyArray1<'_, T>, what: &str) -> PyResult<&'a [T]> {
    array.as_slice().map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a C-contiguous, aligned array (got strides {:?}, {})",
            array.strides(),
            if array.is_aligned() { "aligned" } else { "not aligned" }
        ))
    })
}

/// `bytes` (native-endian elements of `dtype`, copied) as engine data; a `bool` byte other
/// than 0 or 1 is refused.
pub fn data_from_bytes(dtype: loaderx_core::DType, bytes: &[u8]) -> PyResult<ArrayData> {
    let size = dtype.size();
    if !bytes.len().is_multiple_of(size) {
        return Err(PyValueError::new_err(format!("{} bytes are not whole {dtype} elements", bytes.len())));
    }
    let mut data = ArrayData::try_zeros(dtype, bytes.len() / size).ok_or_else(|| {
        PyValueError::new_err(format!("{} bytes of {dtype} do not fit in memory", bytes.len()))
    })?;
    match data.as_bytes_mut() {
        Some(out) => out.copy_from_slice(bytes),
        None => {
            if let Some(k) = bytes.iter().position(|&b| b > 1) {
                return Err(PyValueError::new_err(format!("bool element {k} is {}, not 0 or 1", bytes[k])));
            }
            data = ArrayData::Bool(bytes.iter().map(|&b| b == 1).collect());
        }
    }
    Ok(data)
}

/// Records (their `values` back to back, native-endian `dtype_name` elements, `offsets` in
/// rows) padded as the engine pads a ragged batch (`RaggedArray::pad`): `(B, L, *row_shape)`,
/// `L` the longest record or `length`, longer records cut, the rest filled with `value`.
#[pyfunction]
#[pyo3(signature = (values, offsets, dtype_name, row_shape, value = 0.0, length = None))]
pub fn pad_records<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'_, u8>,
    offsets: Vec<usize>,
    dtype_name: &str,
    row_shape: Vec<usize>,
    value: f64,
    length: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    use crate::errors::IntoPy;
    let data = data_from_bytes(crate::dataset::dtype(dtype_name)?, slice(&values, "values")?)?;
    let batch = loaderx_core::RaggedArray::from_parts(row_shape, offsets, data).py()?;
    let pad =
        length.map_or_else(loaderx_core::Pad::longest, loaderx_core::Pad::length).value(value).truncate(true);
    let padded = py.detach(|| batch.pad(pad)).py()?;
    dense(py, padded.values)
}
