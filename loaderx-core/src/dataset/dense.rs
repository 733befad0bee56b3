//! Dense datasets: fixed-shape records gathered at a fixed stride, shape from the schema.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::dtype::{ArrayData, DType, DenseArray, Element};
use super::open::{check_kind, open_dataset};
use super::records::{InMemory, Part, Records};
use super::schema::{Kind, Schema};
use super::selection::{Selection, map_view};
use crate::store::Parallelism;
use crate::sys::{Destination, fill_vec, fill_vec_aligned};
use crate::{Error, Result, Store};

/// A dense dataset whose element type is known at run time: what the loader holds per stream.
///
/// A batch is one fixed-stride gather straight into a typed buffer; no per-record metadata is
/// touched beyond the index entry. A source may be a view of some of its records
/// ([`DenseSource::select`]), and may live in memory ([`DenseSource::from_vec`]).
#[derive(Debug, Clone)]
pub struct DenseSource {
    records: Records,
    schema: Schema,
    item_elems: usize,
    view: Option<Selection>,
    /// For errors: the store's directory, or `<memory>`.
    path: PathBuf,
    /// How this source's own gathers split over the pool ([`DenseSource::keep_warm`]).
    par: Parallelism,
}

impl DenseSource {
    /// Opens the dense dataset in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Schema`] when it is ragged or has no schema; [`Error::NotAStore`] when `dir` does
    /// not exist or is not a dataset; the store's open errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<DenseSource> {
        DenseSource::open_with(dir, &crate::StoreOptions::new())
    }

    /// [`DenseSource::open`] with its stores opened with `opts` (read-only whatever they say):
    /// [`StoreOptions::verify_reads`](crate::StoreOptions::verify_reads), say, to check every
    /// record's checksum on every read, raw records included. A URL ignores `opts` (remote
    /// reads check every record's checksum already).
    ///
    /// # Errors
    /// As [`DenseSource::open`].
    pub fn open_with(dir: impl AsRef<Path>, opts: &crate::StoreOptions) -> Result<DenseSource> {
        #[cfg(feature = "remote")]
        if crate::remote::is_remote(dir.as_ref()) {
            let options = crate::remote::RemoteOptions::new().with_env_cache()?;
            return DenseSource::open_remote(&dir.as_ref().to_string_lossy(), options);
        }
        let (opened, schema, path) = open_dataset(dir.as_ref(), Kind::Dense, opts)?;
        Ok(DenseSource::wrap(opened, schema, path))
    }

    /// The dense dataset at `url` on object storage (`s3://bucket/prefix/dataset`), read-only
    /// (feature `remote`): its schema and index fetched once; batches fetched in coalesced
    /// range requests, every record's checksum checked. A store set pushed there (its manifest,
    /// the parts at the paths it names relative to it) opens as one dataset.
    ///
    /// # Errors
    /// As [`RemoteStore::open`](crate::remote::RemoteStore::open); [`Error::Schema`] naming the
    /// URL when the dataset is ragged or its schema does not decode.
    #[cfg(feature = "remote")]
    pub fn open_remote(url: &str, options: crate::remote::RemoteOptions) -> Result<DenseSource> {
        super::open::open_remote_or_set(url, options, Kind::Dense, DenseSource::wrap, |parts| {
            DenseSource::concat_at(parts, PathBuf::from(url))
        })
    }

    /// A dense view of an open store.
    ///
    /// # Errors
    /// [`Error::Schema`] when `schema` is not dense.
    pub fn new(store: Arc<Store>, schema: Schema) -> Result<DenseSource> {
        let path = store.path().to_path_buf();
        check_kind(&schema, Kind::Dense, &path)?;
        Ok(DenseSource::wrap(Records::store(store), schema, path))
    }

    /// A source over opened records (their schema already checked).
    /// A dense source over any records (`path` names them in errors): the token samplers'.
    pub(crate) fn from_backing(
        records: std::sync::Arc<dyn crate::store::Backing>,
        schema: Schema,
        path: PathBuf,
    ) -> DenseSource {
        DenseSource::wrap(Records::other(records), schema, path)
    }

    fn wrap(records: Records, schema: Schema, path: PathBuf) -> DenseSource {
        let item_elems = schema.unit_elems();
        DenseSource { records, schema, item_elems, view: None, path, par: Parallelism::Pool }
    }

    /// A dense dataset held in memory: `data` is the items back to back, each of `item_shape`
    /// (no file is written; for tests, small data and notebooks).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `data` is not a whole number of items.
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::{DataLoader, DenseSource};
    /// let x = DenseSource::from_vec(vec![2], (0..20).map(|v| v as f32).collect::<Vec<f32>>())?;
    /// assert_eq!(x.len(), 10);
    /// let mut loader = DataLoader::builder().stream("x", x).batch_size(5).build()?;
    /// assert_eq!(loader.next_batch()?.expect("endless").get("x").unwrap().shape(), &[5, 2]);
    /// # Ok::<(), loaderx::Error>(())
    /// ```
    pub fn from_vec<T: Element>(item_shape: Vec<usize>, data: Vec<T>) -> Result<DenseSource> {
        let schema = Schema::dense(T::DTYPE, item_shape);
        let item_elems = schema.unit_elems();
        if item_elems == 0 || !data.len().is_multiple_of(item_elems) {
            return Err(Error::InvalidArgument(format!(
                "{} values are not a whole number of items of shape {:?}",
                data.len(),
                schema.shape
            )));
        }
        if u32::try_from(data.len() / item_elems).is_err() {
            return Err(Error::InvalidArgument("an in-memory dataset holds at most 2^32 - 1 items".into()));
        }
        let (len, stride) = (data.len() / item_elems, schema.unit_bytes());
        Ok(DenseSource {
            records: Records::other(Arc::new(InMemory::fixed(Arc::new(T::wrap(data)), stride, len))),
            schema,
            item_elems,
            view: None,
            path: PathBuf::from("<memory>"),
            par: Parallelism::Pool,
        })
    }

    /// A view of the records `selection` names, in its order (a split, a range, a list); composes
    /// with an earlier view. Nothing is copied.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when the selection names a record past the source.
    pub fn select(&self, selection: &Selection) -> Result<DenseSource> {
        let view = select_view(self.view.as_ref(), self.len(), selection, &self.path)?;
        Ok(DenseSource { view: Some(view), ..self.clone() })
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

    /// The underlying store; `None` for a dataset in memory.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.records.as_store()
    }

    /// The store's directory, or `<memory>`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gathers `indices` into `data`, resizing it (keeping its allocation where it fits) to
    /// `indices.len() * item_elems` elements. `data` is replaced by a buffer of the right dtype
    /// when it has another.
    ///
    /// # Errors
    /// The store's gather errors, and [`Error::CorruptRecord`] for a record of the wrong size or a
    /// `bool` byte that is not 0 or 1.
    pub fn gather_into(&self, indices: &[u32], data: &mut ArrayData) -> Result<()> {
        self.gather_into_with(indices, data, self.par)
    }

    /// Gathers `indices` as bytes straight into `out`, which is exactly `indices.len()` items
    /// long: a caller's own buffer (a NumPy array, a pinned slot). `bool` bytes are checked to
    /// be 0 or 1.
    ///
    /// # Errors
    /// As [`DenseSource::gather_into`]; [`Error::InvalidArgument`] for an `out` of another size.
    pub fn gather_bytes(&self, indices: &[u32], out: &mut [u8]) -> Result<()> {
        self.gather_bytes_with(indices, out, self.par)
    }

    /// Keeps the pool's helper threads awake after a gather this source split over the pool
    /// from a thread outside it, for as long as that gather took (at most 1 ms): for a caller
    /// that gathers again within microseconds and does little in between (Python's gather
    /// calls), whose helpers would otherwise fall asleep between calls and each wake-up cost
    /// about a batch. Off by default; the loader's prefetch threads never need it.
    #[must_use]
    pub fn keep_warm(mut self, yes: bool) -> Self {
        self.par = if yes { Parallelism::PoolKeepWarm } else { Parallelism::Pool };
        self
    }

    /// [`DenseSource::gather_into`], split over the pool or not as `par` says.
    pub(crate) fn gather_into_with(
        &self,
        indices: &[u32],
        data: &mut ArrayData,
        par: Parallelism,
    ) -> Result<()> {
        self.gather_into_aligned(indices, data, par, None).map(drop)
    }

    /// [`DenseSource::gather_into_with`] with the elements starting at a multiple of `align`
    /// bytes (`None`: wherever the allocation starts); returns the elements before them in
    /// `data` (see [`DenseArray::head`]). Booleans, checked one by one, are never offset.
    pub(crate) fn gather_into_aligned(
        &self,
        indices: &[u32],
        data: &mut ArrayData,
        par: Parallelism,
        align: Option<usize>,
    ) -> Result<usize> {
        let elems = indices.len() * self.item_elems;
        if data.dtype() != self.schema.dtype {
            *data = ArrayData::zeros(self.schema.dtype, 0);
        }
        let gather = |out: Destination<'_>| self.write_records(indices, out, par);
        // The element's own alignment when none is asked: no head, a plain fill.
        let at = |size: usize| align.unwrap_or(size);
        match data {
            ArrayData::Bool(bools) => {
                let mut raw = Vec::new();
                fill_vec::<u8>(&mut raw, elems, gather)?;
                *bools = bool::from_bytes(&raw).ok_or_else(|| self.bad_bool(indices, &raw))?;
                Ok(0)
            }
            ArrayData::U8(v) => fill_vec_aligned(v, elems, at(1), gather),
            ArrayData::I8(v) => fill_vec_aligned(v, elems, at(1), gather),
            ArrayData::U16(v) => fill_vec_aligned(v, elems, at(2), gather),
            ArrayData::I16(v) => fill_vec_aligned(v, elems, at(2), gather),
            ArrayData::U32(v) => fill_vec_aligned(v, elems, at(4), gather),
            ArrayData::I32(v) => fill_vec_aligned(v, elems, at(4), gather),
            ArrayData::U64(v) => fill_vec_aligned(v, elems, at(8), gather),
            ArrayData::I64(v) => fill_vec_aligned(v, elems, at(8), gather),
            ArrayData::F16(v) => fill_vec_aligned(v, elems, at(2), gather),
            ArrayData::BF16(v) => fill_vec_aligned(v, elems, at(2), gather),
            ArrayData::F32(v) => fill_vec_aligned(v, elems, at(4), gather),
            ArrayData::F64(v) => fill_vec_aligned(v, elems, at(8), gather),
        }
    }

    /// The records of `indices` as bytes, straight into `out` (exactly `indices.len()` items
    /// long): a staged loader's slot. `bool` bytes are checked to be 0 or 1.
    ///
    /// # Errors
    /// As [`DenseSource::gather_into`]; [`Error::InvalidArgument`] for an `out` of another size.
    pub(crate) fn gather_bytes_with(&self, indices: &[u32], out: &mut [u8], par: Parallelism) -> Result<()> {
        let want = indices.len() * self.schema.unit_bytes();
        if out.len() != want {
            return Err(Error::InvalidArgument(format!(
                "a gather of {} records of {} bytes into {} bytes",
                indices.len(),
                self.schema.unit_bytes(),
                out.len()
            )));
        }
        crate::sys::fill_slice(out, |d| self.write_records(indices, d, par))?;
        if self.schema.dtype == DType::Bool && out.iter().any(|&b| b > 1) {
            return Err(self.bad_bool(indices, out));
        }
        Ok(())
    }

    /// Writes the records of `indices` (of this source's index space, its view applied) into
    /// `out`, `item_bytes` each, in order.
    /// Asks for the pages of the items at
    /// `indices`, to be gathered soon (`Records::advise`).
    pub(crate) fn advise(&self, indices: &[u32]) -> Result<()> {
        self.records.advise(self.view.as_ref(), indices, &self.path)
    }

    /// Whether hints of batches to come may help ([`crate::store::Backing::wants_hints`]).
    pub(crate) fn wants_hints(&self) -> bool {
        self.records.source.wants_hints()
    }

    fn write_records(&self, indices: &[u32], out: Destination<'_>, par: Parallelism) -> Result<()> {
        let mut mapped = Vec::new();
        let indices = map_view(self.view.as_ref(), indices, &mut mapped, &self.path)?;
        self.records.source.gather_fixed(indices, self.schema.unit_bytes(), out, par)
    }

    /// `parts` back to back as one source: record `i` of the result is record `i - start(p)` of
    /// the part `p` whose range holds `i` (what a weighted mixture reads through). Nothing is
    /// copied; a batch's runs of one part are gathered by that part into their stretch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no parts, or more than `u32::MAX` records in all;
    /// [`Error::Schema`] naming the first part whose dtype or item shape differs from the first's.
    pub fn concat(parts: Vec<DenseSource>) -> Result<DenseSource> {
        let path = PathBuf::from(format!("<concatenation of {} sources>", parts.len()));
        DenseSource::concat_at(parts, path)
    }

    /// [`DenseSource::concat`], named `path` in errors (a store set's URL).
    fn concat_at(parts: Vec<DenseSource>, path: PathBuf) -> Result<DenseSource> {
        let (schema, starts) = concat_plan(parts.iter().map(|p| (&p.schema, p.len(), p.path.as_path())))?;
        let parts = parts.into_iter().map(|p| Part { records: p.records.source, view: p.view, path: p.path });
        let records = Records::concat(parts.collect(), starts, path.clone());
        let item_elems = schema.unit_elems();
        Ok(DenseSource { records, schema, item_elems, view: None, path, par: Parallelism::Pool })
    }

    fn bad_bool(&self, indices: &[u32], raw: &[u8]) -> Error {
        let at = raw.iter().position(|&b| b > 1).unwrap_or(0);
        Error::CorruptRecord {
            path: self.path.clone(),
            index: u64::from(indices[at / self.item_elems.max(1)]),
            reason: format!("bool byte {} is neither 0 nor 1", raw[at]),
            source: None,
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
/// # use loaderx_core as loaderx;
/// use loaderx::{Codec, DatasetWriter, DenseDataset, WriteOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-dataset-dense-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let data: Vec<f32> = (0..64).map(|x| x as f32).collect();
/// let mut w = DatasetWriter::dense::<f32>(dir.join("d"), vec![2, 4], WriteOptions::new())?;
/// w.append(&data)?;
/// w.finish()?;
/// let ds = DenseDataset::<f32>::open(dir.join("d"))?;
/// let batch = ds.get_batch(&[0, 5, 2])?;
/// assert_eq!(batch.shape(), &[3, 2, 4]);
/// assert_eq!(batch.as_slice::<f32>()?[8], 40.0);
/// # std::fs::remove_dir_all(&dir)?;
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

    /// A dataset held in memory ([`DenseSource::from_vec`]).
    ///
    /// # Errors
    /// As [`DenseSource::from_vec`].
    pub fn from_vec(item_shape: Vec<usize>, data: Vec<T>) -> Result<Self> {
        DenseSource::from_vec(item_shape, data)?.typed()
    }

    /// A view of the records `selection` names ([`DenseSource::select`]).
    ///
    /// # Errors
    /// As [`DenseSource::select`].
    pub fn select(&self, selection: &Selection) -> Result<Self> {
        self.source.select(selection)?.typed()
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
        match (T::bytes_mut(out), self.source.records.as_store(), &self.source.view) {
            (Some(bytes), Some(store), None) => store.gather_fixed(indices, item_bytes, bytes),
            _ => {
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
                path: self.path.clone(),
                reason: format!("the dataset holds {} elements, not {}", self.schema.dtype, T::DTYPE),
            });
        }
        Ok(DenseDataset { source: self, _t: PhantomData })
    }
}

/// The view `selection` of a source of `len` records, itself viewed by `inner` when given.
pub(crate) fn select_view(
    inner: Option<&Selection>,
    len: usize,
    selection: &Selection,
    path: &Path,
) -> Result<Selection> {
    if let Some(of) = selection.split_of()
        && of as usize != len
    {
        let what = if (of as usize) < len {
            format!("its last {} records would never be read", len - of as usize)
        } else {
            "it names records past the dataset's end".to_string()
        };
        return Err(Error::InvalidArgument(format!(
            "{}: a split of {of} records applied to a dataset of {len}: {what} (split the dataset's own \
             length: Selection::split(len, ..))",
            path.display()
        )));
    }
    if let Some(max) = selection.max()
        && max as usize >= len
    {
        return Err(Error::IndexOutOfRange {
            path: path.to_path_buf(),
            index: u64::from(max),
            len: len as u64,
        });
    }
    match inner {
        Some(inner) => selection.within(inner),
        None => Ok(selection.clone()),
    }
}

/// The schema and part starts of a concatenation of parts given as (schema, records, path): the
/// schema they all share and each part's first index (then the total).
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts or more than `u32::MAX` records; [`Error::Schema`]
/// naming the first part whose schema differs from the first's.
pub(crate) fn concat_plan<'a>(
    parts: impl Iterator<Item = (&'a Schema, usize, &'a Path)>,
) -> Result<(Schema, Vec<u64>)> {
    let mut schema: Option<Schema> = None;
    let mut starts = vec![0u64];
    for (k, (s, len, path)) in parts.enumerate() {
        match &schema {
            None => schema = Some(s.clone()),
            Some(first) if first != s => {
                return Err(Error::Schema {
                    path: path.to_path_buf(),
                    reason: format!(
                        "source {k} holds {} {:?} records, source 0 {} {:?}",
                        s.dtype, s.shape, first.dtype, first.shape
                    ),
                });
            }
            Some(_) => {}
        }
        starts.push(starts[k] + len as u64);
    }
    let schema =
        schema.ok_or_else(|| Error::InvalidArgument("a concatenation needs at least one source".into()))?;
    if starts[starts.len() - 1] > u64::from(u32::MAX) {
        return Err(Error::InvalidArgument("a concatenation of more than 2^32 - 1 records".into()));
    }
    Ok((schema, starts))
}
