//! Ragged datasets: variable-length records of rows. [`RaggedSource`] gathers a batch as one
//! [`RaggedArray`] (offsets and values, no allocation per record); `pad.rs` makes it dense
//! ([`RaggedArray::pad`], [`crate::pad()`]).

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::dense::{concat_plan, select_view};
use super::dtype::{ArrayData, DType, DenseArray, Element};
use super::open::{check_kind, open_dataset};
use super::ragged_array::RaggedArray;
use super::records::{InMemory, Part, Records};
use super::schema::{Kind, Schema};
use super::selection::{Selection, map_view};
use crate::store::Parallelism;
use crate::sys::fill_vec;
use crate::{Error, Result, Store};

/// A ragged dataset whose element type is known at run time: what the loader holds for a
/// ragged stream. Each record is a sequence of rows of the schema's row shape.
#[derive(Debug, Clone)]
pub struct RaggedSource {
    records: Records,
    schema: Schema,
    view: Option<Selection>,
    path: PathBuf,
    /// How this source's own gathers split over the pool ([`RaggedSource::keep_warm`]).
    par: Parallelism,
}

impl RaggedSource {
    /// Opens the ragged dataset in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Schema`] when it is dense or has no schema; [`Error::NotAStore`] when `dir` does
    /// not exist or is not a dataset; the store's open errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<RaggedSource> {
        RaggedSource::open_with(dir, &crate::StoreOptions::new())
    }

    /// [`RaggedSource::open`] with its stores opened with `opts`, as
    /// [`DenseSource::open_with`](crate::DenseSource::open_with) does; errors as `open`'s.
    pub fn open_with(dir: impl AsRef<Path>, opts: &crate::StoreOptions) -> Result<RaggedSource> {
        #[cfg(feature = "remote")]
        if crate::remote::is_remote(dir.as_ref()) {
            let options = crate::remote::RemoteOptions::new().with_env_cache()?;
            return RaggedSource::open_remote(&dir.as_ref().to_string_lossy(), options);
        }
        let (opened, schema, path) = open_dataset(dir.as_ref(), Kind::Ragged, opts)?;
        Ok(RaggedSource::wrap(opened, schema, path))
    }

    /// The ragged dataset at `url` on object storage (feature `remote`); see
    /// [`DenseSource::open_remote`](crate::DenseSource::open_remote).
    ///
    /// # Errors
    /// As [`DenseSource::open_remote`](crate::DenseSource::open_remote), for a dense dataset.
    #[cfg(feature = "remote")]
    pub fn open_remote(url: &str, options: crate::remote::RemoteOptions) -> Result<RaggedSource> {
        super::open::open_remote_or_set(url, options, Kind::Ragged, RaggedSource::wrap, |parts| {
            RaggedSource::concat_at(parts, PathBuf::from(url))
        })
    }

    /// A ragged view of an open store.
    ///
    /// # Errors
    /// [`Error::Schema`] when `schema` is dense.
    pub fn new(store: Arc<Store>, schema: Schema) -> Result<RaggedSource> {
        let path = store.path().to_path_buf();
        check_kind(&schema, Kind::Ragged, &path)?;
        Ok(RaggedSource::wrap(Records::store(store), schema, path))
    }

    /// A ragged source over any records (`path` names them in errors): a token file's documents.
    pub(crate) fn from_backing(
        records: std::sync::Arc<dyn crate::store::Backing>,
        schema: Schema,
        path: PathBuf,
    ) -> RaggedSource {
        RaggedSource::wrap(Records::other(records), schema, path)
    }

    /// A source over opened records (their schema already checked).
    fn wrap(records: Records, schema: Schema, path: PathBuf) -> RaggedSource {
        RaggedSource { records, schema, view: None, path, par: Parallelism::Pool }
    }

    /// A ragged dataset held in memory: one vector per record, each a whole number of rows of
    /// `row_shape`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first record that is not a whole number of rows.
    pub fn from_records<T: Element>(row_shape: Vec<usize>, records: &[Vec<T>]) -> Result<RaggedSource> {
        let schema = Schema::ragged(T::DTYPE, row_shape);
        let row = schema.unit_elems().max(1);
        let mut offsets = Vec::with_capacity(records.len() + 1);
        let mut values = Vec::with_capacity(records.iter().map(Vec::len).sum());
        offsets.push(0);
        for (i, r) in records.iter().enumerate() {
            if r.len() % row != 0 {
                return Err(Error::InvalidArgument(format!(
                    "record {i} holds {} elements, not a whole number of {row}-element rows",
                    r.len()
                )));
            }
            values.extend_from_slice(r);
            offsets.push(values.len());
        }
        Self::from_flat(schema, values, &offsets)
    }

    /// An in-memory dataset of `values`, record `k` its elements `offsets[k]..offsets[k + 1]`
    /// (checked by the caller: from 0, never decreasing, whole rows, ending at the length).
    pub(crate) fn from_flat<T: Element>(
        schema: Schema,
        values: Vec<T>,
        offsets: &[usize],
    ) -> Result<RaggedSource> {
        Self::from_files(schema, values, offsets, None)
    }

    /// [`RaggedSource::from_flat`], record `k` read from `files[k]` where given (an image folder
    /// read unconverted: an error about a record names its file, [`RaggedSource::record_file`]).
    pub(crate) fn from_files<T: Element>(
        schema: Schema,
        values: Vec<T>,
        offsets: &[usize],
        files: Option<Arc<[PathBuf]>>,
    ) -> Result<RaggedSource> {
        if u32::try_from(offsets.len() - 1).is_err() {
            return Err(Error::InvalidArgument("an in-memory dataset holds at most 2^32 - 1 records".into()));
        }
        let mut memory = InMemory::ragged(Arc::new(T::wrap(values)), offsets);
        if let Some(files) = files {
            memory = memory.with_files(files)?;
        }
        Ok(Self::wrap(Records::other(Arc::new(memory)), schema, PathBuf::from("<memory>")))
    }

    /// `parts` back to back as one source (what a weighted mixture reads through); see
    /// [`DenseSource::concat`](crate::DenseSource::concat).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no parts or more than `u32::MAX` records;
    /// [`Error::Schema`] naming the first part whose dtype or row shape differs.
    pub fn concat(parts: Vec<RaggedSource>) -> Result<RaggedSource> {
        let path = PathBuf::from(format!("<concatenation of {} sources>", parts.len()));
        RaggedSource::concat_at(parts, path)
    }

    /// [`RaggedSource::concat`], named `path` in errors (a store set's URL).
    fn concat_at(parts: Vec<RaggedSource>, path: PathBuf) -> Result<RaggedSource> {
        let (schema, starts) = concat_plan(parts.iter().map(|p| (&p.schema, p.len(), p.path.as_path())))?;
        let parts = parts.into_iter().map(|p| Part { records: p.records.source, view: p.view, path: p.path });
        let records = Records::concat(parts.collect(), starts, path.clone());
        Ok(RaggedSource { records, schema, view: None, path, par: Parallelism::Pool })
    }

    /// A view of the records `selection` names, in its order; composes with an earlier view.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when the selection names a record past the source.
    pub fn select(&self, selection: &Selection) -> Result<RaggedSource> {
        let view = select_view(self.view.as_ref(), self.len(), selection, &self.path)?;
        Ok(RaggedSource { view: Some(view), ..self.clone() })
    }

    /// Number of records (of the view, when this is one).
    pub fn len(&self) -> usize {
        match &self.view {
            Some(v) => v.len(),
            None => self.records.len(),
        }
    }

    /// A fingerprint of the records from what is in memory of their index, nothing fetched:
    /// for a dataset on object storage (a store or a set), its count and every checksum its
    /// index keeps, so that another write at the same URL tells itself apart (a reader planned
    /// before it, look 159); None for a local dataset (its directory tells its replacement) or
    /// a view.
    pub fn fingerprint(&self) -> Option<u64> {
        if self.view.is_some() {
            return None;
        }
        self.records.source.fingerprint()
    }

    /// The remote store behind this source, when it reads one (its
    /// [`stats`](crate::remote::RemoteStore::stats): requests, bytes, cache pages).
    #[cfg(feature = "remote")]
    pub fn remote(&self) -> Option<&crate::remote::RemoteStore> {
        self.records.as_remote()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.schema.dtype
    }

    /// Shape of one row.
    pub fn row_shape(&self) -> &[usize] {
        &self.schema.shape
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The underlying store; `None` for a dataset in memory.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.records.as_store()
    }

    /// The record of [`RaggedSource::path`]'s dataset that index `i` of this source reads
    /// (through its selection, if any): what an error about it names.
    pub fn path_record(&self, i: u32) -> u32 {
        self.view.as_ref().and_then(|v| v.get(i)).unwrap_or(i)
    }

    /// The store's directory, or `<memory>`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file record `i` (of the view, when this is one) was read from, where each record has
    /// one (an image folder read unconverted): what an error about it names instead of
    /// [`RaggedSource::path`].
    pub fn record_file(&self, i: u32) -> Option<PathBuf> {
        self.records.source.record_file(self.path_record(i))
    }

    /// Gathers the records at `indices` as one [`RaggedArray`].
    ///
    /// # Errors
    /// The store's gather errors; [`Error::CorruptRecord`] for a record that is not a whole
    /// number of rows or not valid values of the dtype (a `bool` byte other than 0 or 1).
    pub fn get_batch(&self, indices: &[u32]) -> Result<RaggedArray> {
        let mut out = RaggedArray::empty(self.schema.dtype, self.schema.shape.clone());
        self.gather_into_with(indices, &mut out, self.par)?;
        Ok(out)
    }

    /// [`DenseSource::keep_warm`](crate::DenseSource::keep_warm) for this source's own gathers.
    #[must_use]
    pub fn keep_warm(mut self, yes: bool) -> Self {
        self.par = if yes { Parallelism::PoolKeepWarm } else { Parallelism::Pool };
        self
    }

    /// Asks for the pages of the rows at
    /// `indices`, to be gathered soon (`Records::advise`).
    pub(crate) fn advise(&self, indices: &[u32]) -> Result<()> {
        self.records.advise(self.view.as_ref(), indices, &self.path)
    }

    /// Whether hints of batches to come may help ([`crate::store::Backing::wants_hints`]).
    pub(crate) fn wants_hints(&self) -> bool {
        self.records.source.wants_hints()
    }

    /// [`RaggedSource::get_batch`] into `out`, reusing its buffers.
    pub(crate) fn gather_into_with(
        &self,
        indices: &[u32],
        out: &mut RaggedArray,
        par: Parallelism,
    ) -> Result<()> {
        let mut mapped = Vec::new();
        let indices = map_view(self.view.as_ref(), indices, &mut mapped, &self.path)?;
        out.row_shape.clone_from(&self.schema.shape);
        out.offsets.clear();
        out.offsets.push(0);
        if out.values.dtype() != self.schema.dtype {
            out.values = ArrayData::zeros(self.schema.dtype, 0);
        }
        self.records
            .source
            .gather_var(indices, par, &mut |lens, read| self.fill_resolved(indices, lens, out, read))
    }

    /// Fills `out` with the records of `indices`, whose stored lengths are `lens`, read by `read`
    /// into a destination of exactly their total size.
    fn fill_resolved(
        &self,
        indices: &[u32],
        lens: impl Iterator<Item = u32>,
        out: &mut RaggedArray,
        read: impl FnOnce(crate::sys::Destination<'_>) -> Result<()>,
    ) -> Result<()> {
        let row_bytes = self.schema.unit_bytes().max(1);
        let elem = self.schema.dtype.size();
        let mut rows = 0usize;
        for (&i, len) in indices.iter().zip(lens) {
            if !(len as usize).is_multiple_of(row_bytes) {
                return Err(Error::CorruptRecord {
                    path: self.path.clone(),
                    index: u64::from(i),
                    reason: format!("{len} bytes is not a whole number of {row_bytes}-byte rows"),
                    source: None,
                });
            }
            rows += len as usize / row_bytes;
            out.offsets.push(rows);
        }
        let elems = rows * (row_bytes / elem);
        out.values =
            fill_values(std::mem::replace(&mut out.values, ArrayData::zeros(DType::U8, 0)), elems, read)
                .map_err(|e| match e {
                    BoolError::Store(e) => e,
                    BoolError::Bool(at) => Error::CorruptRecord {
                        path: self.path.clone(),
                        index: u64::from(
                            indices[out.offsets.partition_point(|&o| o * (row_bytes / elem) <= at) - 1],
                        ),
                        reason: "a bool byte is neither 0 nor 1".into(),
                        source: None,
                    },
                })?;
        Ok(())
    }

    /// The number of rows of each record of `indices`, from the index alone (nothing is read):
    /// what sequence packing plans with.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`]; the store's index errors.
    pub fn record_rows(&self, indices: &[u32]) -> Result<Vec<u64>> {
        let mut mapped = Vec::new();
        let indices = map_view(self.view.as_ref(), indices, &mut mapped, &self.path)?;
        let row_bytes = self.schema.unit_bytes().max(1) as u64;
        Ok(self.records.source.record_lens(indices)?.into_iter().map(|l| u64::from(l) / row_bytes).collect())
    }

    /// The typed view.
    ///
    /// # Errors
    /// [`Error::Schema`] when the dtype is not `T`.
    pub fn typed<T: Element>(self) -> Result<RaggedDataset<T>> {
        if self.schema.dtype != T::DTYPE {
            return Err(Error::Schema {
                path: self.path.clone(),
                reason: format!("the dataset holds {} elements, not {}", self.schema.dtype, T::DTYPE),
            });
        }
        Ok(RaggedDataset { source: self, _t: PhantomData })
    }
}

/// Why filling a typed buffer failed.
enum BoolError {
    Store(Error),
    /// The element at this position is a bool byte other than 0 or 1.
    Bool(usize),
}

/// `elems` elements of `data`'s dtype written by `gather` (bytes), `data`'s allocation reused.
fn fill_values(
    data: ArrayData,
    elems: usize,
    gather: impl FnOnce(crate::sys::Destination<'_>) -> Result<()>,
) -> std::result::Result<ArrayData, BoolError> {
    macro_rules! typed {
        ($v:expr, $variant:ident) => {{
            let mut v = $v;
            fill_vec(&mut v, elems, gather).map_err(BoolError::Store)?;
            Ok(ArrayData::$variant(v))
        }};
    }
    match data {
        ArrayData::Bool(_) => {
            let mut raw: Vec<u8> = Vec::new();
            fill_vec(&mut raw, elems, gather).map_err(BoolError::Store)?;
            match bool::from_bytes(&raw) {
                Some(b) => Ok(ArrayData::Bool(b)),
                None => Err(BoolError::Bool(raw.iter().position(|&b| b > 1).unwrap_or(0))),
            }
        }
        ArrayData::U8(v) => typed!(v, U8),
        ArrayData::I8(v) => typed!(v, I8),
        ArrayData::U16(v) => typed!(v, U16),
        ArrayData::I16(v) => typed!(v, I16),
        ArrayData::U32(v) => typed!(v, U32),
        ArrayData::I32(v) => typed!(v, I32),
        ArrayData::U64(v) => typed!(v, U64),
        ArrayData::I64(v) => typed!(v, I64),
        ArrayData::F16(v) => typed!(v, F16),
        ArrayData::BF16(v) => typed!(v, BF16),
        ArrayData::F32(v) => typed!(v, F32),
        ArrayData::F64(v) => typed!(v, F64),
    }
}

/// A ragged dataset of `T`: each record is a sequence of rows of the schema's row shape.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{DatasetWriter, RaggedDataset, WriteOptions, pad};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-dataset-ragged-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut w = DatasetWriter::ragged::<i32>(dir.join("t"), vec![], WriteOptions::new())?;
/// for len in [3, 1, 4] {
///     w.append_record(&(0..len).collect::<Vec<i32>>())?;
/// }
/// w.finish()?;
/// let rs = RaggedDataset::<i32>::open(dir.join("t"))?;
/// let records = rs.get_batch(&[0, 2])?;
/// let (padded, lengths) = pad(&records, rs.row_shape(), 0)?;
/// assert_eq!(padded.shape(), &[2, 4]);
/// assert_eq!(lengths, vec![3, 4]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct RaggedDataset<T: Element> {
    source: RaggedSource,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> RaggedDataset<T> {
    /// Opens the ragged dataset in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Schema`] when it is dense, has no schema, or its dtype is not `T`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        RaggedSource::open(dir)?.typed()
    }

    /// A ragged view of an open store.
    ///
    /// # Errors
    /// [`Error::Schema`] when `schema` is dense or its dtype is not `T`.
    pub fn new(store: Arc<Store>, schema: Schema) -> Result<Self> {
        RaggedSource::new(store, schema)?.typed()
    }

    /// A dataset held in memory ([`RaggedSource::from_records`]).
    ///
    /// # Errors
    /// As [`RaggedSource::from_records`].
    pub fn from_records(row_shape: Vec<usize>, records: &[Vec<T>]) -> Result<Self> {
        RaggedSource::from_records(row_shape, records)?.typed()
    }

    /// A view of the records `selection` names ([`RaggedSource::select`]).
    ///
    /// # Errors
    /// As [`RaggedSource::select`].
    pub fn select(&self, selection: &Selection) -> Result<Self> {
        self.source.select(selection)?.typed()
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.source.len()
    }

    /// True when there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shape of one row.
    pub fn row_shape(&self) -> &[usize] {
        self.source.row_shape()
    }

    /// The underlying store; `None` in memory.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.source.store()
    }

    /// The untyped source, as the loader takes it.
    pub fn source(&self) -> &RaggedSource {
        &self.source
    }

    /// Gathers the records at `indices`, each as a flat row-major `(len_i, *row_shape)` vector.
    ///
    /// # Errors
    /// The store's gather errors; [`Error::CorruptRecord`] for a record that is not a whole
    /// number of rows.
    pub fn get_batch(&self, indices: &[u32]) -> Result<Vec<Vec<T>>> {
        let batch = self.source.get_batch(indices)?;
        (0..batch.len()).map(|k| batch.record::<T>(k).map(<[T]>::to_vec)).collect()
    }

    /// Gathers the records at `indices` as one [`RaggedArray`] (no allocation per record).
    ///
    /// # Errors
    /// As [`RaggedDataset::get_batch`].
    pub fn get_ragged(&self, indices: &[u32]) -> Result<RaggedArray> {
        self.source.get_batch(indices)
    }

    /// Gathers each record as a `(len_i, *row_shape)` array.
    ///
    /// # Errors
    /// As [`RaggedDataset::get_batch`].
    pub fn get_arrays(&self, indices: &[u32]) -> Result<Vec<DenseArray>> {
        let row_elems = self.source.schema.unit_elems().max(1);
        self.get_batch(indices)?
            .into_iter()
            .map(|v| {
                let mut shape = vec![v.len() / row_elems];
                shape.extend_from_slice(self.row_shape());
                DenseArray::from_vec(shape, v)
            })
            .collect()
    }
}
