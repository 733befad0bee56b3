//! A batch's streams lent to NumPy: each array views the loader's own buffer, and the buffer
//! goes back to the loader's pool when NumPy lets the array go (when its base object, a [`Lent`],
//! is dropped), so that the next batches are written over pages already mapped. A buffer handed
//! over for good (`PyArray1::from_vec`) is freed with the array and every batch faults in fresh
//! pages: for 256 normalised 224x224 images, 154 MB that the kernel zeroes page by page.
//!
//! The one module of this crate with `unsafe`: a NumPy array over memory its base object owns.
#![expect(unsafe_code, reason = "a NumPy array over a buffer its base object owns")]

use loaderx_core::{ArrayData, DType, LentArray};
use numpy::ndarray::ArrayView1;
use numpy::{Element, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrays;

/// The owner of a lent buffer and the base object of the NumPy array viewing it. Frozen and
/// without methods: nothing moves or changes its buffer until it is dropped, and the buffer then
/// returns to the pool of the loader that lent it.
#[pyclass(frozen, module = "loaderx._native")]
pub struct Lent {
    lent: LentArray,
}

/// `lent` as a NumPy array of its shape viewing its buffer (from its first element, past the
/// storage's head), the buffer returned to its loader's pool once NumPy drops the array. `bf16`,
/// which NumPy has no type for, is copied as [`arrays::dense`] does, and its buffer kept.
pub fn array(py: Python<'_>, lent: LentArray) -> PyResult<Bound<'_, PyAny>> {
    if lent.array().dtype() == DType::BF16 {
        return arrays::dense(py, lent.into_array());
    }
    let shape: Vec<usize> = lent.array().shape().to_vec();
    let head = lent.array().head();
    let owner = Bound::new(py, Lent { lent })?;
    let flat = match owner.get().lent.array().data() {
        ArrayData::Bool(v) => view(&owner, &v[head..]),
        ArrayData::U8(v) => view(&owner, &v[head..]),
        ArrayData::I8(v) => view(&owner, &v[head..]),
        ArrayData::U16(v) => view(&owner, &v[head..]),
        ArrayData::I16(v) => view(&owner, &v[head..]),
        ArrayData::U32(v) => view(&owner, &v[head..]),
        ArrayData::I32(v) => view(&owner, &v[head..]),
        ArrayData::U64(v) => view(&owner, &v[head..]),
        ArrayData::I64(v) => view(&owner, &v[head..]),
        ArrayData::F16(v) => view(&owner, &v[head..]),
        ArrayData::F32(v) => view(&owner, &v[head..]),
        ArrayData::F64(v) => view(&owner, &v[head..]),
        // bf16 is copied above, never lent; a dtype added later is refused until it is lent.
        other => return Err(PyValueError::new_err(format!("arrays of {} are not lent", other.dtype()))),
    };
    flat.call_method1("reshape", (shape,))
}

/// A one-dimensional NumPy array over `elems`, which `owner` holds.
fn view<'py, T: Element>(owner: &Bound<'py, Lent>, elems: &[T]) -> Bound<'py, PyAny> {
    let view = ArrayView1::from(elems);
    // SAFETY: `elems` lies in the buffer `owner` holds, and `owner` becomes the array's base
    // object: NumPy keeps it alive as long as the array (and every view of it) lives. Nothing
    // reallocates, moves or reads the buffer meanwhile: `Lent` is frozen and has no methods, and
    // the buffer leaves it only when it is dropped, for the pool, after the last array is gone.
    // Python may write the elements through the array (as through any array it owns); Rust holds
    // no reference into them while it can.
    unsafe { PyArray1::borrow_from_array(&view, owner.clone().into_any()) }.into_any()
}
