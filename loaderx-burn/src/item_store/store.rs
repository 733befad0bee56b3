//! [`ItemStore`]: one MessagePack record per serde item, the fast stand-in for burn's
//! `SqliteDataset`.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::{Dataset, DatasetError};
use loaderx_core::{DatasetWriter, RaggedDataset, Store, WriteOptions};
use rayon::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::dataset::check_indices;
use crate::{Error, Result};

/// Items moved per `get_many` call when migrating from another dataset.
const MIGRATE_BATCH: usize = 1024;

/// A persistent dataset of serde items, one MessagePack record per item (`rmp_serde::to_vec`, the
/// encoding burn's `SqliteDataset` writer stores in its `item` blob column).
///
/// On disk it is a ragged `u8` loaderx dataset: a Zrecord store (per-record zstd by default) plus
/// its schema. [`ItemStore::get_batch`] (and burn's `Dataset::get_many`) decodes a whole batch
/// where its records lie, in parallel, without copying raw records first.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// use burn::data::dataset::{Dataset, InMemDataset};
/// use loaderx::burn::ItemStore;
/// use loaderx::WriteOptions;
///
/// #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Item { text: String, label: u8 }
///
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-burn-item-store-store-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let source = InMemDataset::new(vec![
///     Item { text: "a".into(), label: 0 },
///     Item { text: "bc".into(), label: 1 },
/// ]);
/// let store = ItemStore::from_dataset(&source, dir.join("items"), WriteOptions::new())?;
/// assert_eq!(store.len(), 2);
/// assert_eq!(store.get(1)?, Item { text: "bc".into(), label: 1 });
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ItemStore<I> {
    store: Arc<Store>,
    path: PathBuf,
    _item: PhantomData<fn() -> I>,
}

impl<I> Clone for ItemStore<I> {
    fn clone(&self) -> Self {
        ItemStore { store: Arc::clone(&self.store), path: self.path.clone(), _item: PhantomData }
    }
}

impl<I> std::fmt::Debug for ItemStore<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemStore").field("path", &self.path).field("len", &self.store.len()).finish()
    }
}

impl<I: Serialize + DeserializeOwned> ItemStore<I> {
    /// Starts writing a new item store at `dir`.
    ///
    /// # Errors
    /// [`Error::Core`]: `dir` exists and `opts` does not allow overwriting it, or the store
    /// cannot be created.
    pub fn create(dir: impl AsRef<Path>, opts: WriteOptions) -> Result<ItemWriter<I>> {
        let path = dir.as_ref().to_path_buf();
        let writer = DatasetWriter::ragged::<u8>(&path, vec![], opts)?;
        Ok(ItemWriter { writer, path, count: 0, _item: PhantomData })
    }

    /// Opens the item store in `dir` read-only.
    ///
    /// # Errors
    /// [`Error::Core`]: no dataset there, or one that is not a ragged `u8` dataset.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let path = dir.as_ref().to_path_buf();
        let ragged = RaggedDataset::<u8>::open(&path)?;
        let store = ragged
            .store()
            .ok_or_else(|| Error::InvalidArgument("an item store lives in a directory".into()))?;
        Ok(ItemStore { store: Arc::clone(store), path, _item: PhantomData })
    }

    /// Copies every item of a burn dataset (`InMemDataset`, `SqliteDataset`, `MnistDataset`...)
    /// into a new item store at `dir`, in order, fetching `get_many` batches of 1024.
    ///
    /// # Errors
    /// [`Error::Source`] when the source dataset fails; [`Error::Encode`]; the store's write
    /// errors. A failed migration leaves nothing at `dir`.
    pub fn from_dataset<D, E>(dataset: &D, dir: impl AsRef<Path>, opts: WriteOptions) -> Result<Self>
    where
        D: Dataset<I, E> + ?Sized,
        E: std::error::Error + Send + Sync + 'static,
        I: Sync,
    {
        let mut writer = Self::create(dir, opts)?;
        let len = dataset.len();
        let mut start = 0;
        while start < len {
            let end = (start + MIGRATE_BATCH).min(len);
            let items = dataset
                .get_many((start..end).collect())
                .map_err(|e| Error::Source { index: start as u64, source: Box::new(e) })?;
            writer.extend(&items)?;
            start = end;
        }
        writer.finish()
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.store.len() as usize
    }

    /// True when there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying record store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Reads the items at `indices`, decoding each record where it lies (raw records straight
    /// from the mapped store, compressed ones from a per-thread scratch buffer) with
    /// [`msgpack`](super::msgpack), rmp-serde's decoding without its per-value overhead; a batch of
    /// 64 or more decodes on two or more threads.
    ///
    /// # Errors
    /// [`Error::Core`] for an index out of range or a record that cannot be read;
    /// [`Error::Decode`] naming the record that is not an `I`.
    pub fn get_batch(&self, indices: &[u32]) -> Result<Vec<I>>
    where
        I: Send,
    {
        self.store.map_records(indices, |k, bytes| {
            super::msgpack::from_slice::<I>(bytes).map_err(|source| Error::Decode {
                path: self.path.clone(),
                index: u64::from(indices[k]),
                source,
            })
        })
    }
}

impl<I> Dataset<I> for ItemStore<I>
where
    I: Serialize + DeserializeOwned + Send,
{
    fn get(&self, index: usize) -> Result<I, DatasetError> {
        let idx = check_indices("ItemStore", &[index], self.len());
        let mut items = self.get_batch(&idx).map_err(Error::into_dataset_error)?;
        Ok(items.pop().expect("one index gives one item"))
    }

    fn get_many(&self, indexes: Vec<usize>) -> Result<Vec<I>, DatasetError> {
        let idx = check_indices("ItemStore", &indexes, self.len());
        self.get_batch(&idx).map_err(Error::into_dataset_error)
    }

    fn len(&self) -> usize {
        self.store.len() as usize
    }
}

/// Writes an [`ItemStore`]; see [`ItemStore::create`]. All or nothing: a writer dropped before
/// [`ItemWriter::finish`] leaves no store behind.
pub struct ItemWriter<I> {
    writer: DatasetWriter,
    path: PathBuf,
    count: u64,
    _item: PhantomData<fn(&I)>,
}

impl<I> std::fmt::Debug for ItemWriter<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemWriter").field("path", &self.path).field("count", &self.count).finish()
    }
}

impl<I: Serialize + DeserializeOwned> ItemWriter<I> {
    /// Appends one item.
    ///
    /// # Errors
    /// [`Error::Encode`]; [`Error::Core`] for an encoding over the 1 MiB record limit or a
    /// write failure.
    pub fn push(&mut self, item: &I) -> Result<()> {
        let bytes = self.encode(item)?;
        self.writer.append_bytes(&[bytes])?;
        self.count += 1;
        Ok(())
    }

    /// Appends items in order (encoded in parallel).
    ///
    /// # Errors
    /// As [`ItemWriter::push`]; nothing of a batch with an item that fails to encode is written.
    pub fn extend(&mut self, items: &[I]) -> Result<()>
    where
        I: Sync,
    {
        let first = self.count;
        let encoded: Vec<Vec<u8>> = items
            .par_iter()
            .enumerate()
            .map(|(k, item)| {
                rmp_serde::to_vec(item).map_err(|source| Error::Encode {
                    path: self.path.clone(),
                    index: first + k as u64,
                    source,
                })
            })
            .collect::<Result<_>>()?;
        self.writer.append_bytes(&encoded)?;
        self.count += items.len() as u64;
        Ok(())
    }

    fn encode(&self, item: &I) -> Result<Vec<u8>> {
        rmp_serde::to_vec(item).map_err(|source| Error::Encode {
            path: self.path.clone(),
            index: self.count,
            source,
        })
    }

    /// Items written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Finishes the store and opens it for reading.
    ///
    /// # Errors
    /// The store's write errors.
    pub fn finish(self) -> Result<ItemStore<I>> {
        self.writer.finish()?;
        ItemStore::open(&self.path)
    }
}
