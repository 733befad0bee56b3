//! Datasets from in-memory iterators: arrays, typed rows, byte records.

use std::path::Path;

use super::summary::{ConvertSummary, finish};
use crate::{DatasetWriter, DenseArray, Element, Error, Result, Schema, WriteOptions};

/// Writes a dense dataset at `out` with one record per array; the first array fixes the dtype
/// and the item shape, and every other must match it.
///
/// # Errors
/// [`Error::InvalidArgument`] for an empty iterator (no dtype to record) or an array whose dtype
/// or shape differs from the first (naming its position); otherwise as
/// [`DatasetWriter::with_schema`] and [`DatasetWriter::append_bytes`]. Nothing is left at `out`
/// on error.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{DenseArray, DenseDataset, WriteOptions, convert};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-convert-iter-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let arrays = (0..4).map(|i| DenseArray::from_vec(vec![2], vec![i as f32, -(i as f32)]).unwrap());
/// convert::from_arrays(dir.join("d"), arrays, WriteOptions::new())?;
/// assert_eq!(DenseDataset::<f32>::open(dir.join("d"))?.get_vec(&[3])?, vec![3.0, -3.0]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn from_arrays(
    out: impl AsRef<Path>,
    arrays: impl IntoIterator<Item = DenseArray>,
    opts: WriteOptions,
) -> Result<ConvertSummary> {
    let out = out.as_ref();
    let mut it = arrays.into_iter();
    let first = it.next().ok_or_else(|| {
        Error::InvalidArgument("from_arrays needs at least one array to learn the dtype".into())
    })?;
    let (dtype, shape) = (first.dtype(), first.shape().to_vec());
    let mut w = DatasetWriter::with_schema(out, Schema::dense(dtype, shape.clone()), opts.clone())?;
    let mut bytes_in = 0u64;
    for (i, a) in std::iter::once(first).chain(it).enumerate() {
        if a.dtype() != dtype || a.shape() != shape.as_slice() {
            return Err(Error::InvalidArgument(format!(
                "array {i} is {} {:?}; the first was {dtype} {shape:?}",
                a.dtype(),
                a.shape()
            )));
        }
        w.append_bytes(&[a.as_bytes()])?;
        bytes_in += a.as_bytes().len() as u64;
        opts.report(bytes_in);
    }
    finish(w, bytes_in)
}

/// Writes a ragged dataset of `T` at `out`: one record per item, each a whole number of rows of
/// `row_shape` (flat, row-major).
///
/// # Errors
/// [`Error::InvalidArgument`] for a record that is not a whole number of rows (naming it);
/// [`Error::RecordTooLarge`]; otherwise as [`DatasetWriter::with_schema`]. Nothing is left at
/// `out` on error.
pub fn from_ragged<T: Element, R: AsRef<[T]>>(
    out: impl AsRef<Path>,
    row_shape: Vec<usize>,
    records: impl IntoIterator<Item = R>,
    opts: WriteOptions,
) -> Result<ConvertSummary> {
    let out = out.as_ref();
    let mut w = DatasetWriter::ragged::<T>(out, row_shape, opts.clone())?;
    let mut bytes_in = 0u64;
    for r in records {
        let bytes: &[u8] = bytemuck::cast_slice(r.as_ref());
        w.append_bytes(&[bytes])?;
        bytes_in += bytes.len() as u64;
        opts.report(bytes_in);
    }
    finish(w, bytes_in)
}

/// Writes a ragged `u8` dataset of byte records at `out` (pre-encoded images, serialized
/// samples...).
///
/// # Errors
/// [`Error::RecordTooLarge`] for a record over 1 MiB; otherwise as
/// [`DatasetWriter::with_schema`]. Nothing is left at `out` on error.
pub fn from_bytes<R: AsRef<[u8]>>(
    out: impl AsRef<Path>,
    records: impl IntoIterator<Item = R>,
    opts: WriteOptions,
) -> Result<ConvertSummary> {
    from_ragged::<u8, R>(out, Vec::new(), records, opts)
}
