//! [`DataLoader`]: the endless, step-based loader over dense streams.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::batch::{Batch, Pool};
use super::builder::{LoaderBuilder, LoaderState};
use super::prefetch::{Prefetcher, panic_message};
use crate::dataset::DenseSource;
use crate::sampler::Sampler;
use crate::store::Parallelism;
use crate::{DType, DenseArray, Error, Result};

/// The collate step a loader's prefetch threads run on each batch.
pub(super) type Transform<O> = Arc<dyn Fn(Batch) -> std::result::Result<O, BoxError> + Send + Sync>;
/// Any error a transform returns.
pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The endless, step-based loader: an iterator of `Result<O>` that never ends.
///
/// # Examples
/// ```
/// use loaderx_core::{DataLoader, DatasetWriter, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::dense::<f32>(dir.path().join("x"), vec![4], WriteOptions::new())?;
/// w.append(&(0..400).map(|v| v as f32).collect::<Vec<_>>())?;
/// w.finish()?;
/// let mut w = DatasetWriter::dense::<u8>(dir.path().join("y"), vec![], WriteOptions::new())?;
/// w.append(&(0..100).map(|v| v as u8).collect::<Vec<_>>())?;
/// w.finish()?;
/// let mut loader = DataLoader::builder()
///     .open_stream("x", dir.path().join("x"))?
///     .open_stream("y", dir.path().join("y"))?
///     .batch_size(16)
///     .seed(1)
///     .build()?;
/// let batch = loader.next_batch()?;
/// assert_eq!(batch.get("x").unwrap().shape(), &[16, 4]);
/// // Row k of every stream is the same record.
/// let (x, y) = (batch.get("x").unwrap().as_slice::<f32>()?, batch.get("y").unwrap().as_slice::<u8>()?);
/// assert_eq!((x[4 * 3] / 4.0) as u8, y[3]);
/// let state = loader.state(); // save it; `.state(state)` on a builder resumes here
/// assert_eq!(state.step, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DataLoader<O> {
    prefetcher: Prefetcher<O>,
    sampler: Sampler,
    fingerprint: u64,
    streams: Vec<(String, DType, Vec<usize>)>,
    pool: Arc<Pool>,
}

impl<O> std::fmt::Debug for DataLoader<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("step", &self.prefetcher.step())
            .field("sampler", &self.sampler)
            .field("prefetcher", &self.prefetcher)
            .finish_non_exhaustive()
    }
}

impl DataLoader<Batch> {
    /// A builder with defaults: batch 32, cyclic, seed 0, one rank.
    pub fn builder() -> LoaderBuilder {
        LoaderBuilder::default()
    }
}

impl<O: Send + 'static> DataLoader<O> {
    pub(super) fn start(b: LoaderBuilder, transform: Transform<O>) -> Result<DataLoader<O>> {
        let LoaderState { sampler: config, step, fingerprint } = b.resolve()?;
        let sampler = config.build()?;
        let (threads, depth) = (b.thread_count(), b.prefetch_depth());
        let streams: Arc<Vec<(String, DenseSource)>> = Arc::new(b.into_streams());
        let pool = Arc::new(Pool::new(
            streams.iter().map(|(n, _)| n.as_str()),
            threads.saturating_mul(depth.saturating_add(2)),
        ));
        let meta = streams.iter().map(|(n, s)| (n.clone(), s.dtype(), s.item_shape().to_vec())).collect();
        // As many prefetch threads as the pool keep every core busy with whole batches: a
        // gather split over the pool as well would only add hand-offs and oversubscription.
        let par = if threads >= rayon::current_num_threads() {
            Parallelism::CallingThread
        } else {
            Parallelism::Pool
        };
        let producer =
            Producer { streams, sampler: sampler.clone(), transform, pool: Arc::clone(&pool), par };
        let prefetcher =
            Prefetcher::spawn("loaderx-prefetch", threads, depth, step, move |s| producer.produce(s))?;
        Ok(DataLoader { prefetcher, sampler, fingerprint, streams: meta, pool })
    }

    /// The next batch, in step order.
    ///
    /// # Errors
    /// A gather or transform failure of this step ([`Error::Transform`] for the transform,
    /// failed or panicked); the loader goes on with the next step afterwards.
    /// [`Error::LoaderStopped`] for a step whose prefetch thread panicked outside the transform
    /// (the loader goes on), or, without consuming a step, when no prefetch thread is left.
    pub fn next_batch(&mut self) -> Result<O> {
        self.prefetcher.next()
    }

    /// The next step to be delivered.
    pub fn step(&self) -> u64 {
        self.prefetcher.step()
    }

    /// Batches ready and waiting, and the most that may be in flight; see
    /// [`Prefetcher::prefetched`].
    pub fn prefetched(&self) -> (usize, usize) {
        self.prefetcher.prefetched()
    }

    /// The state to save: restoring it resumes at the next undelivered step.
    pub fn state(&self) -> LoaderState {
        LoaderState { sampler: self.sampler.config(), step: self.step(), fingerprint: self.fingerprint }
    }

    /// The sampler.
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Number of records in every stream.
    pub fn len(&self) -> usize {
        self.sampler.len() as usize
    }

    /// True when the streams are empty (never: the sampler refuses that).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows per batch on this rank.
    pub fn batch_size(&self) -> usize {
        self.sampler.local_batch_size() as usize
    }

    /// Stream buffers allocated so far (the rest were recycled from dropped batches).
    #[doc(hidden)]
    pub fn buffers_allocated(&self) -> usize {
        self.pool.fresh.load(Ordering::Relaxed)
    }

    /// (name, dtype, item shape) of each stream.
    pub fn streams(&self) -> &[(String, DType, Vec<usize>)] {
        &self.streams
    }
}

impl<O: Send + 'static> Iterator for DataLoader<O> {
    type Item = Result<O>;

    /// Never `None`: the loader is endless.
    fn next(&mut self) -> Option<Result<O>> {
        Some(self.next_batch())
    }
}

/// What the prefetch threads of a [`DataLoader`] run for each step.
struct Producer<O> {
    streams: Arc<Vec<(String, DenseSource)>>,
    sampler: Sampler,
    transform: Transform<O>,
    pool: Arc<Pool>,
    par: Parallelism,
}

impl<O> Producer<O> {
    /// Step `step`: its indices, every stream gathered at them, then the transform.
    fn produce(&self, step: u64) -> Result<O> {
        let mut indices = vec![0u32; self.sampler.local_batch_size() as usize];
        self.sampler.fill(step, &mut indices)?;
        let mut batch = Batch {
            step,
            seed: self.sampler.config().seed,
            indices,
            streams: BTreeMap::new(),
            pool: Some(Arc::clone(&self.pool)),
        };
        for (name, source) in self.streams.iter() {
            let mut data = self.pool.get(name, source.dtype());
            source.gather_into_with(&batch.indices, &mut data, self.par)?;
            batch
                .streams
                .insert(name.clone(), DenseArray::new(source.batch_shape(batch.indices.len()), data)?);
        }
        match catch_unwind(AssertUnwindSafe(|| (self.transform)(batch))) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(source)) => Err(Error::Transform { step, source }),
            Err(panic) => {
                Err(Error::Transform { step, source: format!("panicked: {}", panic_message(&*panic)).into() })
            }
        }
    }
}
