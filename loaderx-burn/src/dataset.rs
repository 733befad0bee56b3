//! burn [`Dataset`]s over dense loaderx stores.

use std::path::Path;

use burn::data::dataset::{Dataset, DatasetError};
use loaderx_core::{DenseDataset, Element};

use crate::Error;

/// Panics the way burn's datasets do for an index outside `0..len` (the `Dataset` contract:
/// out of range is a caller bug, `Err` is reserved for retrieval failures).
pub(crate) fn check_indices(what: &str, indices: &[usize], len: usize) -> Vec<u32> {
    indices
        .iter()
        .map(|&i| {
            assert!(i < len, "Index out of bounds for {what}: {i} >= {len}");
            // len <= u32::MAX + 1 for every store, so an in-range index fits.
            i as u32
        })
        .collect()
}

/// A dense loaderx dataset as a burn [`Dataset`] of flat `Vec<T>` items (one record each,
/// row-major over [`DenseItems::item_shape`]).
///
/// `get_many` is one batched gather of all its indices, split into items afterwards; burn's
/// loaders fetch every batch through it.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// use burn::data::dataset::Dataset;
/// use loaderx::burn::DenseItems;
/// use loaderx::{DatasetWriter, WriteOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-burn-dataset-1-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut w = DatasetWriter::dense::<f32>(dir.join("x"), vec![3], WriteOptions::new())?;
/// w.append(&(0..30).map(|v| v as f32).collect::<Vec<_>>())?;
/// w.finish()?;
/// let items = DenseItems::<f32>::open(dir.join("x"))?;
/// assert_eq!(items.len(), 10);
/// assert_eq!(items.get_many(vec![2, 0])?, vec![vec![6.0, 7.0, 8.0], vec![0.0, 1.0, 2.0]]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct DenseItems<T: Element> {
    inner: DenseDataset<T>,
}

impl<T: Element> DenseItems<T> {
    /// Opens the dense dataset in `dir`.
    ///
    /// # Errors
    /// [`Error::Core`]: not a dense dataset of `T`, or the store's open errors.
    pub fn open(dir: impl AsRef<Path>) -> crate::Result<Self> {
        Ok(DenseItems { inner: DenseDataset::open(dir)? })
    }

    /// Wraps an open dense dataset.
    pub fn new(inner: DenseDataset<T>) -> Self {
        DenseItems { inner }
    }

    /// Shape of one item.
    pub fn item_shape(&self) -> &[usize] {
        self.inner.item_shape()
    }

    /// The loaderx dataset.
    pub fn inner(&self) -> &DenseDataset<T> {
        &self.inner
    }

    /// Gathers `indices` in one call and splits the buffer into items.
    fn gather(&self, indices: &[u32]) -> Result<Vec<Vec<T>>, Error> {
        let flat = self.inner.get_vec(indices)?;
        let per = self.inner.source().item_elems();
        if per == 0 {
            return Ok(vec![Vec::new(); indices.len()]);
        }
        Ok(flat.chunks_exact(per).map(<[T]>::to_vec).collect())
    }
}

impl<T: Element> Dataset<Vec<T>> for DenseItems<T> {
    fn get(&self, index: usize) -> Result<Vec<T>, DatasetError> {
        let idx = check_indices("DenseItems", &[index], self.inner.len());
        let mut items = self.gather(&idx).map_err(Error::into_dataset_error)?;
        Ok(items.pop().unwrap_or_default())
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<Vec<T>>, DatasetError> {
        let idx = check_indices("DenseItems", &indexes, self.inner.len());
        self.gather(&idx).map_err(Error::into_dataset_error)
    }

    fn len(&self) -> usize {
        self.inner.len()
    }
}

/// Two burn datasets of the same length as one dataset of pairs: item `i` is `(a[i], b[i])`.
/// The way to train on (x, y) items from two stores (two [`DenseItems`], or any datasets);
/// `get_many` asks each side for the whole batch once (one gather per store for
/// [`DenseItems`]). Nest it for more: `Zip::new(Zip::new(a, b)?, c)?`.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// use burn::data::dataset::Dataset;
/// use loaderx::burn::{DenseItems, Zip};
/// use loaderx::{DatasetWriter, WriteOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-burn-dataset-2-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut x = DatasetWriter::dense::<f32>(dir.join("x"), vec![2], WriteOptions::new())?;
/// x.append(&[0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5])?;
/// x.finish()?;
/// let mut y = DatasetWriter::dense::<i64>(dir.join("y"), vec![], WriteOptions::new())?;
/// y.append(&[7i64, 8, 9])?;
/// y.finish()?;
/// let xy = Zip::new(DenseItems::<f32>::open(dir.join("x"))?, DenseItems::<i64>::open(dir.join("y"))?)?;
/// assert_eq!(xy.get_many(vec![2, 0])?, vec![(vec![2.0, 2.5], vec![9]), (vec![0.0, 0.5], vec![7])]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Zip<A, B> {
    a: A,
    b: B,
}

impl<A, B> Zip<A, B> {
    /// `a` and `b` side by side.
    ///
    /// # Errors
    /// [`Error::Core`] with `loaderx_core::Error::Config` when their lengths differ (a zip that
    /// silently cut the longer one would train on a misaligned or partial set).
    pub fn new<IA, IB>(a: A, b: B) -> crate::Result<Self>
    where
        A: Dataset<IA>,
        B: Dataset<IB>,
    {
        if a.len() != b.len() {
            return Err(Error::Core(loaderx_core::Error::Config {
                what: "Zip",
                reason: format!(
                    "the datasets hold {} and {} items; a zip needs the same number",
                    a.len(),
                    b.len()
                ),
            }));
        }
        Ok(Zip { a, b })
    }

    /// The two datasets.
    pub fn into_parts(self) -> (A, B) {
        (self.a, self.b)
    }
}

impl<A, B, IA, IB> Dataset<(IA, IB)> for Zip<A, B>
where
    A: Dataset<IA>,
    B: Dataset<IB>,
{
    fn get(&self, index: usize) -> Result<(IA, IB), DatasetError> {
        Ok((self.a.get(index)?, self.b.get(index)?))
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<(IA, IB)>, DatasetError> {
        let a = self.a.get_many(indexes.clone())?;
        let b = self.b.get_many(indexes)?;
        Ok(a.into_iter().zip(b).collect())
    }

    fn len(&self) -> usize {
        self.a.len()
    }
}
