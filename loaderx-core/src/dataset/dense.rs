//! Dense datasets: fixed-shape records gathered at a fixed stride, shape from the schema.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use super::dtype::{ArrayData, DType, DenseArray, Element};
use super::schema::{Kind, Schema};
use crate::store::Parallelism;
use crate::sys::{Destination, fill_vec};
use crate::{Error, Result, Store};

/// A dense dataset whose element type is known at run time: what the loader holds per stream.
///
/// A batch is one fixed-stride gather straight into a typed buffer; no per-record metadata is
/// touched beyond the table entry.
#[derive(Debug, Clone)]
pub struct DenseSource {
    store: Arc<Store>,
    schema: Schema,
    item_elems: usize,
}

impl DenseSource {
    /// Opens the dense dataset in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Schema`] when it is ragged or has no schema; the store's open errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<DenseSource> {
        let dir = dir.as_ref();
        let schema = Schema::read(dir)?;
        DenseSource::new(Arc::new(Store::open(dir)?), schema)
    }

    /// A dense view of an open store.
    ///
    /// # Errors
    /// [`Error::Schema`] when `schema` is not dense.
    pub fn new(store: Arc<Store>, schema: Schema) -> Result<DenseSource> {
        if schema.kind != Kind::Dense {
            return Err(Error::Schema {
                path: store.path().to_path_buf(),
                reason: "the dataset is ragged; open it with RaggedDataset".into(),
            });
        }
        let item_elems = schema.unit_elems();
        Ok(DenseSource { store, schema, item_elems })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.store.len() as usize
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.schema.dtype
    }

    /// Shape of one record.
    pub fn item_shape(&self) -> &[usize] {
        &self.schema.shape
    }

    /// Elements in one record.
    pub fn item_elems(&self) -> usize {
        self.item_elems
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Gathers `indices` into `data`, resizing it (keeping its allocation where it fits) to
    /// `indices.len() * item_elems` elements. `data` is replaced by a buffer of the right dtype
    /// when it has another.
    ///
    /// # Errors
    /// The store's gather errors, and [`Error::CorruptRecord`] for a record of the wrong size or a
    /// `bool` byte that is not 0 or 1.
    pub fn gather_into(&self, indices: &[u32], data: &mut ArrayData) -> Result<()> {
        self.gather_into_with(indices, data, Parallelism::Pool)
    }

    /// [`DenseSource::gather_into`], split over the pool or not as `par` says.
    pub(crate) fn gather_into_with(
        &self,
        indices: &[u32],
        data: &mut ArrayData,
        par: Parallelism,
    ) -> Result<()> {
        let elems = indices.len() * self.item_elems;
        if data.dtype() != self.schema.dtype {
            *data = ArrayData::zeros(self.schema.dtype, 0);
        }
        let item_bytes = self.schema.unit_bytes();
        // The records are written straight into the buffer's (possibly uninitialised) storage:
        // no zero-fill pass before the gather, whether the buffer is recycled or fresh.
        let gather = |out: Destination<'_>| self.store.gather_fixed_to(indices, item_bytes, out, par);
        match data {
            ArrayData::Bool(bools) => {
                let mut raw = Vec::new();
                fill_vec::<u8>(&mut raw, elems, gather)?;
                *bools = bool::from_bytes(&raw).ok_or_else(|| self.bad_bool(indices, &raw))?;
                Ok(())
            }
            ArrayData::U8(v) => fill_vec(v, elems, gather),
            ArrayData::I8(v) => fill_vec(v, elems, gather),
            ArrayData::U16(v) => fill_vec(v, elems, gather),
            ArrayData::I16(v) => fill_vec(v, elems, gather),
            ArrayData::U32(v) => fill_vec(v, elems, gather),
            ArrayData::I32(v) => fill_vec(v, elems, gather),
            ArrayData::U64(v) => fill_vec(v, elems, gather),
            ArrayData::I64(v) => fill_vec(v, elems, gather),
            ArrayData::F16(v) => fill_vec(v, elems, gather),
            ArrayData::BF16(v) => fill_vec(v, elems, gather),
            ArrayData::F32(v) => fill_vec(v, elems, gather),
            ArrayData::F64(v) => fill_vec(v, elems, gather),
        }
    }

    fn bad_bool(&self, indices: &[u32], raw: &[u8]) -> Error {
        let at = raw.iter().position(|&b| b > 1).unwrap_or(0);
        Error::CorruptRecord {
            path: self.store.path().to_path_buf(),
            index: u64::from(indices[at / self.item_elems.max(1)]),
            reason: format!("bool byte {} is neither 0 nor 1", raw[at]),
        }
    }

    /// Gathers `indices` as a `(B, *item_shape)` array.
    ///
    /// # Errors
    /// As [`DenseSource::gather_into`].
    pub fn get_batch(&self, indices: &[u32]) -> Result<DenseArray> {
        let mut data = ArrayData::zeros(self.schema.dtype, 0);
        self.gather_into(indices, &mut data)?;
        DenseArray::new(self.batch_shape(indices.len()), data)
    }

    /// `(b, *item_shape)`.
    pub fn batch_shape(&self, b: usize) -> Vec<usize> {
        let mut shape = Vec::with_capacity(1 + self.schema.shape.len());
        shape.push(b);
        shape.extend_from_slice(&self.schema.shape);
        shape
    }
}

/// A dense dataset of element type `T`: fixed-shape records, batches of `(B, *item_shape)`.
///
/// # Examples
/// ```
/// use loaderx_core::{Codec, DatasetWriter, DenseDataset, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let data: Vec<f32> = (0..64).map(|x| x as f32).collect();
/// let mut w = DatasetWriter::dense::<f32>(dir.path().join("d"), vec![2, 4], WriteOptions::new())?;
/// w.append(&data)?;
/// w.finish()?;
/// let ds = DenseDataset::<f32>::open(dir.path().join("d"))?;
/// let batch = ds.get_batch(&[0, 5, 2])?;
/// assert_eq!(batch.shape(), &[3, 2, 4]);
/// assert_eq!(batch.as_slice::<f32>()?[8], 40.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct DenseDataset<T: Element> {
    source: DenseSource,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> DenseDataset<T> {
    /// Opens the dense dataset in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Schema`] when it is ragged or its dtype is not `T`; the store's open errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        DenseSource::open(dir)?.typed()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.source.len()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
    }

    /// Shape of one record.
    pub fn item_shape(&self) -> &[usize] {
        self.source.item_shape()
    }

    /// The untyped view, as the loader takes it.
    pub fn source(&self) -> &DenseSource {
        &self.source
    }

    /// Gathers `indices` into `out`, which must hold `indices.len() * item_elems` elements.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a wrong `out` length; the store's gather errors.
    pub fn gather_into(&self, indices: &[u32], out: &mut [T]) -> Result<()> {
        let item_bytes = self.source.schema.unit_bytes();
        match T::bytes_mut(out) {
            Some(bytes) => self.source.store.gather_fixed(indices, item_bytes, bytes),
            None => {
                let mut data = ArrayData::zeros(T::DTYPE, 0);
                self.source.gather_into(indices, &mut data)?;
                let v = T::view(&data).unwrap_or_default();
                if v.len() != out.len() {
                    return Err(Error::InvalidArgument(format!(
                        "out holds {} elements, need {}",
                        out.len(),
                        v.len()
                    )));
                }
                out.copy_from_slice(v);
                Ok(())
            }
        }
    }

    /// Gathers `indices` as one contiguous `(B, *item_shape)` array of `T`.
    ///
    /// # Errors
    /// The store's gather errors.
    pub fn get_batch(&self, indices: &[u32]) -> Result<DenseArray> {
        self.source.get_batch(indices)
    }

    /// Gathers `indices` into a `Vec<T>` of `B * item_elems` elements.
    ///
    /// # Errors
    /// The store's gather errors.
    pub fn get_vec(&self, indices: &[u32]) -> Result<Vec<T>> {
        self.get_batch(indices)?.into_vec()
    }
}

impl DenseSource {
    /// The typed view.
    ///
    /// # Errors
    /// [`Error::Schema`] when the dtype is not `T`.
    pub fn typed<T: Element>(self) -> Result<DenseDataset<T>> {
        if self.schema.dtype != T::DTYPE {
            return Err(Error::Schema {
                path: self.store.path().to_path_buf(),
                reason: format!("the dataset holds {} elements, not {}", self.schema.dtype, T::DTYPE),
            });
        }
        Ok(DenseDataset { source: self, _t: PhantomData })
    }
}
