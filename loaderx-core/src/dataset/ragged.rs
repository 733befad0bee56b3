//! Ragged datasets: variable-length records of rows, returned as a list; [`pad`] makes them dense.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use super::dtype::{DenseArray, Element};
use super::schema::{Kind, Schema};
use crate::{Error, Result, Store};

/// A ragged dataset of `T`: each record is a sequence of rows of the schema's row shape.
///
/// # Examples
/// ```
/// use loaderx_core::{DatasetWriter, RaggedDataset, WriteOptions, pad};
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::ragged::<i32>(dir.path().join("t"), vec![], WriteOptions::new())?;
/// for len in [3, 1, 4] {
///     w.append_record(&(0..len).collect::<Vec<i32>>())?;
/// }
/// w.finish()?;
/// let rs = RaggedDataset::<i32>::open(dir.path().join("t"))?;
/// let records = rs.get_batch(&[0, 2])?;
/// let (padded, lengths) = pad(&records, rs.row_shape(), 0)?;
/// assert_eq!(padded.shape(), &[2, 4]);
/// assert_eq!(lengths, vec![3, 4]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct RaggedDataset<T: Element> {
    store: Arc<Store>,
    schema: Schema,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> RaggedDataset<T> {
    /// Opens the ragged dataset in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Schema`] when it is dense, has no schema, or its dtype is not `T`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let schema = Schema::read(dir)?;
        RaggedDataset::new(Arc::new(Store::open(dir)?), schema)
    }

    /// A ragged view of an open store.
    ///
    /// # Errors
    /// [`Error::Schema`] when `schema` is dense or its dtype is not `T`.
    pub fn new(store: Arc<Store>, schema: Schema) -> Result<Self> {
        let path = store.path().to_path_buf();
        if schema.kind != Kind::Ragged {
            return Err(Error::Schema {
                path,
                reason: "the dataset is dense; open it with DenseDataset".into(),
            });
        }
        if schema.dtype != T::DTYPE {
            return Err(Error::Schema {
                path,
                reason: format!("the dataset holds {} elements, not {}", schema.dtype, T::DTYPE),
            });
        }
        Ok(RaggedDataset { store, schema, _t: PhantomData })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.store.len() as usize
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shape of one row.
    pub fn row_shape(&self) -> &[usize] {
        &self.schema.shape
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Gathers the records at `indices`, each as a flat row-major `(len_i, *row_shape)` vector.
    ///
    /// # Errors
    /// The store's gather errors; [`Error::CorruptRecord`] for a record that is not a whole
    /// number of rows.
    pub fn get_batch(&self, indices: &[u32]) -> Result<Vec<Vec<T>>> {
        let lens = self.store.record_lens(indices)?;
        let mut flat = vec![0u8; lens.iter().map(|&l| l as usize).sum()];
        self.store.gather_into(indices, &mut flat)?;
        let row = self.schema.unit_bytes().max(1);
        let mut out = Vec::with_capacity(indices.len());
        let mut pos = 0;
        for (&idx, &len) in indices.iter().zip(&lens) {
            let bytes = &flat[pos..pos + len as usize];
            pos += len as usize;
            let bad = |reason: String| Error::CorruptRecord {
                path: self.store.path().to_path_buf(),
                index: u64::from(idx),
                reason,
            };
            if bytes.len() % row != 0 {
                return Err(bad(format!("{} bytes is not a whole number of {row}-byte rows", bytes.len())));
            }
            out.push(T::from_bytes(bytes).ok_or_else(|| bad(format!("bytes are not valid {}", T::DTYPE)))?);
        }
        Ok(out)
    }

    /// Gathers each record as a `(len_i, *row_shape)` array.
    ///
    /// # Errors
    /// As [`RaggedDataset::get_batch`].
    pub fn get_arrays(&self, indices: &[u32]) -> Result<Vec<DenseArray>> {
        let row_elems = self.schema.unit_elems().max(1);
        self.get_batch(indices)?
            .into_iter()
            .map(|v| {
                let mut shape = vec![v.len() / row_elems];
                shape.extend_from_slice(&self.schema.shape);
                DenseArray::from_vec(shape, v)
            })
            .collect()
    }
}

/// Pads variable-length records (flat row-major `(len_i, *row_shape)`) into one dense
/// `(B, max_len, *row_shape)` array filled with `fill`, and returns the row counts.
///
/// # Errors
/// [`Error::InvalidArgument`] when a record is not a whole number of rows.
pub fn pad<T: Element>(records: &[Vec<T>], row_shape: &[usize], fill: T) -> Result<(DenseArray, Vec<usize>)> {
    let row: usize = row_shape.iter().product();
    let row = row.max(1);
    let mut lengths = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        if r.len() % row != 0 {
            return Err(Error::InvalidArgument(format!(
                "record {i} holds {} elements, not a whole number of {row}-element rows",
                r.len()
            )));
        }
        lengths.push(r.len() / row);
    }
    let max_len = lengths.iter().copied().max().unwrap_or(0);
    let mut out = vec![fill; records.len() * max_len * row];
    for (k, r) in records.iter().enumerate() {
        let start = k * max_len * row;
        out[start..start + r.len()].copy_from_slice(r);
    }
    let mut shape = vec![records.len(), max_len];
    shape.extend_from_slice(row_shape);
    Ok((DenseArray::from_vec(shape, out)?, lengths))
}
