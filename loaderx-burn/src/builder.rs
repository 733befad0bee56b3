//! [`DataLoaderBuilder`]: burn's `DataLoaderBuilder` names and types, backed by loaderx, so
//! switching a burn program is an import line.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::Device;
use loaderx_core::Pass;

use crate::{Error, StepLoaderBuilder};

/// burn's `DataLoaderBuilder`, same names and types, backed by a loaderx [`StepLoader`](crate::StepLoader)
/// (`crate::StepLoader`): each batch is one `get_many` of its indices (one batched gather for
/// the loaderx datasets of this crate), built on loaderx's prefetch threads and delivered in
/// order; every `iter()` is one exactly-once pass, shuffled anew each epoch with
/// [`shuffle`](Self::shuffle) (as burn's), the last batch partial (as burn's).
///
/// What differs: the shuffle order is loaderx's (seeded, the same on every machine, not burn's
/// `StdRng` order); `num_workers(n)` is the number of prefetch threads (at least one; burn runs
/// on the calling thread without it); a build error (a dataset of more than `u32::MAX` items,
/// a batch size of 0) arrives as the first item of the first `iter()`, since burn's `build`
/// returns no `Result`.
///
/// # Examples
/// ```
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// use burn::data::dataloader::DataLoader;
/// use loaderx::burn::{DataLoaderBuilder, MnistBatcher, MnistItems};
/// # let dir = std::env::temp_dir().join(format!("loaderx-doc-burn-builder-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/mnist-10k");
/// # let (images, labels) = (dir.join("images"), dir.join("labels"));
/// # loaderx::convert::idx(root.join("t10k-images-idx3-ubyte.gz"), &images, Default::default())?;
/// # loaderx::convert::idx(root.join("t10k-labels-idx1-ubyte.gz"), &labels, Default::default())?;
/// let test = MnistItems::open(&images, &labels)?;
/// let loader = DataLoaderBuilder::new(MnistBatcher).batch_size(64).shuffle(42).num_workers(2).build(test);
/// assert_eq!(loader.num_items(), 2000);
/// let batches = loader.iter().count();
/// assert_eq!(batches, 32); // 31 of 64 and one of 16: every digit once
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DataLoaderBuilder<I, O> {
    batcher: Arc<dyn Batcher<I, O>>,
    batch_size: usize,
    shuffle: Option<u64>,
    num_workers: Option<usize>,
    device: Option<Device>,
    checkpoint: Option<usize>,
}

/// A shared batcher as a batcher (burn's builder takes one by value).
struct Shared<I, O>(Arc<dyn Batcher<I, O>>);

impl<I, O> Batcher<I, O> for Shared<I, O> {
    fn batch(&self, items: Vec<I>, device: &Device) -> O {
        self.0.batch(items, device)
    }
}

impl<I, O> DataLoaderBuilder<I, O>
where
    I: Send + Sync + Clone + std::fmt::Debug + 'static,
    O: Send + Clone + std::fmt::Debug + 'static,
{
    /// A builder of loaders batching with `batcher` (batch 1, in order, as burn's).
    pub fn new<Bt>(batcher: Bt) -> Self
    where
        Bt: Batcher<I, O> + 'static,
    {
        DataLoaderBuilder {
            batcher: Arc::new(batcher),
            batch_size: 1,
            shuffle: None,
            num_workers: None,
            device: None,
            checkpoint: None,
        }
    }

    /// Items per batch.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Shuffle with this seed, a new order every epoch.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle = Some(seed);
        self
    }

    /// The epoch training resumes from, the number burn's `SupervisedTraining::checkpoint` takes
    /// (not a method of burn's builder): the loader starts after `epoch` epochs, with the
    /// batches the first run read from there ([`StepLoaderBuilder::checkpoint`]).
    pub fn checkpoint(mut self, epoch: usize) -> Self {
        self.checkpoint = Some(epoch);
        self
    }

    /// Prefetch threads building batches ahead of the training loop.
    pub fn num_workers(mut self, num_workers: usize) -> Self {
        self.num_workers = Some(num_workers);
        self
    }

    /// The device batches are built on (burn's learner moves the loader with `to_device`).
    pub fn set_device(mut self, device: Device) -> Self {
        self.device = Some(device);
        self
    }

    /// The loader over `dataset`, burn's signature: a build error (a batch size of 0, a dataset
    /// of more than `u32::MAX` items) arrives as the first item of the first `iter()`.
    /// [`try_build`](Self::try_build) refuses it here instead.
    pub fn build<D>(self, dataset: D) -> Arc<dyn DataLoader<O>>
    where
        D: Dataset<I> + 'static,
    {
        match self.try_build(dataset) {
            Ok(loader) => loader,
            Err(e) => Arc::new(Failed(Arc::new(e.to_string()))),
        }
    }

    /// The loader over `dataset`, its settings checked now.
    ///
    /// # Errors
    /// [`Error::Core`] with `loaderx_core::Error::Config` for a batch size of 0 or above
    /// `u32::MAX`, or a dataset of more than `u32::MAX` items.
    pub fn try_build<D>(self, dataset: D) -> Result<Arc<dyn DataLoader<O>>, Error>
    where
        D: Dataset<I> + 'static,
    {
        let mut b = StepLoaderBuilder::new()
            .batch_size(self.batch_size)
            .seed(self.shuffle.unwrap_or(0))
            .pass(if self.shuffle.is_some() { Pass::shuffled() } else { Pass::ordered() })
            .threads(self.num_workers.unwrap_or(1).max(1));
        if let Some(d) = self.device {
            b = b.set_device(d);
        }
        if let Some(epoch) = self.checkpoint {
            b = b.checkpoint(epoch);
        }
        Ok(Arc::new(b.build_batcher(dataset, Shared(self.batcher))?))
    }
}

/// A loader that could not be built: its first `iter()` item is the error.
struct Failed(Arc<String>);

impl<O: 'static> DataLoader<O> for Failed {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        Box::new(FailedIter(Some(Arc::clone(&self.0)), std::marker::PhantomData))
    }

    fn num_items(&self) -> usize {
        0
    }

    fn to_device(&self, _: &Device) -> Arc<dyn DataLoader<O>> {
        Arc::new(Failed(Arc::clone(&self.0)))
    }

    fn slice(&self, _: usize, _: usize) -> Arc<dyn DataLoader<O>> {
        Arc::new(Failed(Arc::clone(&self.0)))
    }
}

struct FailedIter<O>(Option<Arc<String>>, std::marker::PhantomData<fn() -> O>);

impl<O> Iterator for FailedIter<O> {
    type Item = Result<O, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        let why = self.0.take()?;
        Some(
            Err(Error::InvalidArgument(format!("the loader could not be built: {why}")).into_dataset_error()),
        )
    }
}

impl<O> DataLoaderIterator<O> for FailedIter<O> {
    fn progress(&self) -> Progress {
        Progress::new(0, 0, Some("items".to_string()))
    }
}
