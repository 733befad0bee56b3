//! [`DataLoader`]: the endless, step-based loader over dense streams.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::batch::{Batch, Pool};
use super::builder::LoaderBuilder;
use super::order::Indexer;
use super::prefetch::{Prefetcher, panic_message};
use super::staged::StepFn;
use super::state::LoaderState;
use super::stream::StreamData;
use crate::sampler::{Mixture, PassSampler, Sampler};
use crate::store::Parallelism;
use crate::{DType, DenseArray, Error, RaggedArray, Result};

#[cfg(feature = "images")]
mod images;

/// The collate step a loader's prefetch threads run on each batch.
pub(super) type Transform<O> = Arc<dyn Fn(Batch) -> std::result::Result<O, BoxError> + Send + Sync>;
/// Any error a transform returns.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The endless, step-based loader: an iterator of `Result<O>` that never ends.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// use loaderx::{DataLoader, DatasetWriter, WriteOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-core-loader-data-loader-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut w = DatasetWriter::dense::<f32>(dir.join("x"), vec![4], WriteOptions::new())?;
/// w.append(&(0..400).map(|v| v as f32).collect::<Vec<_>>())?;
/// w.finish()?;
/// let mut w = DatasetWriter::dense::<u8>(dir.join("y"), vec![], WriteOptions::new())?;
/// w.append(&(0..100).map(|v| v as u8).collect::<Vec<_>>())?;
/// w.finish()?;
/// let mut loader = DataLoader::builder()
///     .open_stream("x", dir.join("x"))
///     .open_stream("y", dir.join("y"))
///     .batch_size(16)
///     .seed(1)
///     .build()?;
/// let batch = loader.next_batch()?.expect("an endless loader always has a next batch");
/// assert_eq!(batch.get("x").unwrap().shape(), &[16, 4]);
/// // Row k of every stream is the same record.
/// let (x, y) = (batch.get("x").unwrap().as_slice::<f32>()?, batch.get("y").unwrap().as_slice::<u8>()?);
/// assert_eq!((x[4 * 3] / 4.0) as u8, y[3]);
/// let state = loader.state(); // save it; `.state(state)` on a builder resumes here
/// assert_eq!(state.step, 1);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DataLoader<O> {
    prefetcher: Prefetcher<O>,
    /// The endless sampler's config (kept for the state, also under a pass).
    config: crate::SamplerConfig,
    indexer: Indexer,
    fingerprint: u64,
    streams: Vec<(String, DType, Vec<usize>)>,
    pool: Arc<Pool>,
    /// Set when the loader is dropped: a step's image decoding stops at its next image, so the
    /// drop (which joins the prefetch threads) does not wait for steps no one will take.
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// Stops a [`DataLoader`]'s long steps from another thread ([`DataLoader::stopper`]): a step
/// decoding images stops at its next image, and steps waiting for their turn to decode stop
/// waiting, each failing with [`Error::LoaderStopped`]. For a face whose close may come while
/// another thread waits in `next_batch` (Python's `close`): that wait ends within an image's
/// time, not a whole step's. The loader is to be dropped after; dropping it stops it too.
#[derive(Debug, Clone)]
pub struct Stopper(Arc<std::sync::atomic::AtomicBool>);

impl Stopper {
    /// Stops the loader's long steps (see [`Stopper`]).
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl<O> Drop for DataLoader<O> {
    fn drop(&mut self) {
        // Before the prefetcher's own drop joins its threads (fields drop after this body).
        self.dropped.store(true, Ordering::Relaxed);
    }
}

impl<O> std::fmt::Debug for DataLoader<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("step", &self.prefetcher.step())
            .field("indexer", &self.indexer)
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
        DataLoader::start_output(b, Output::Batch(transform))
    }

    /// A staged loader ([`LoaderBuilder::build_staged`]): `run` gathers and stages each step.
    pub(super) fn start_staged(b: LoaderBuilder, run: StepFn<O>) -> Result<DataLoader<O>> {
        DataLoader::start_output(b, Output::Staged(run))
    }

    fn start_output(b: LoaderBuilder, output: Output<O>) -> Result<DataLoader<O>> {
        let state = b.resolve()?;
        let (threads, depth, align) = (b.threads, b.prefetch, b.align);
        let streams: Arc<Vec<(String, StreamData)>> = Arc::new(b.into_streams()?);
        let indexer = state.indexer(&streams)?;
        let LoaderState { sampler: config, step, fingerprint, .. } = state;
        let meta = batch_meta(&streams, &indexer);
        distinct_names(&streams, &meta, &indexer)?;
        let pool = Arc::new(Pool::new(
            meta.iter().map(|(n, _, _)| n.as_str()),
            threads.saturating_mul(depth.saturating_add(2)),
        ));
        // As many prefetch threads as the pool keep every core busy with whole batches: a
        // gather split over the pool as well would only add hand-offs and oversubscription.
        let par = if threads >= rayon::current_num_threads() {
            Parallelism::CallingThread
        } else {
            Parallelism::Pool
        };
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let producer = Producer {
            dropped: Arc::clone(&dropped),
            #[cfg(feature = "images")]
            images: images::Shared::new(step, rayon::current_num_threads().saturating_sub(1)),
            streams,
            indexer: indexer.clone(),
            seed: config.seed,
            output,
            pool: Arc::clone(&pool),
            par,
            stripe: config.rank.wrapping_mul(config.batch_size / config.world.max(1)),
            align,
            // The first step past the prefetch window when step `s` starts: its pages are asked
            // for then, a window ahead of its gather.
            hint_ahead: threads.saturating_mul(depth.saturating_add(1)) as u64,
        };
        let prefetcher =
            Prefetcher::spawn("loaderx-prefetch", threads, depth, step, move |s| producer.produce(s))?;
        Ok(DataLoader { prefetcher, config, indexer, fingerprint, streams: meta, pool, dropped })
    }

    /// The next batch, in step order: `None` once a finite pass is over (never for an endless
    /// loader).
    ///
    /// # Errors
    /// A gather or transform failure of this step ([`Error::Transform`] for the transform,
    /// failed or panicked); the loader goes on with the next step afterwards.
    /// [`Error::LoaderStopped`] for a step whose prefetch thread panicked outside the transform
    /// (the loader goes on), or, without consuming a step, when no prefetch thread is left.
    pub fn next_batch(&mut self) -> Result<Option<O>> {
        if let Some(steps) = self.steps()
            && self.step() >= steps
        {
            return Ok(None);
        }
        self.prefetcher.next().map(Some)
    }

    /// A handle that stops this loader's long steps from another thread ([`Stopper`]).
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.dropped))
    }

    /// Steps of all the finite passes ([`LoaderBuilder::pass`]), `None` for an endless loader
    /// (or passes without end).
    pub fn steps(&self) -> Option<u64> {
        self.indexer.steps()
    }

    /// Steps of one epoch: a finite pass's steps; for the endless modes one cycle (cyclic:
    /// `N / B`, the remainder dropped), `ceil(N / B)` (sequential, and IID by convention).
    pub fn steps_per_epoch(&self) -> u64 {
        self.indexer.steps_per_epoch()
    }

    /// Records this rank reads in one pass (`None` for an endless loader).
    pub fn num_items(&self) -> Option<u64> {
        self.indexer.num_items()
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

    /// Calls `f` on each prefetched step's result (batch or error) waiting for the consumer,
    /// without waiting; see [`Prefetcher::try_for_each_prefetched`].
    pub fn try_for_each_prefetched(&self, f: impl FnMut(&Result<O>)) -> bool {
        self.prefetcher.try_for_each_prefetched(f)
    }

    /// The state to save: restoring it resumes at the next undelivered step.
    pub fn state(&self) -> LoaderState {
        let step = self.step();
        LoaderState {
            sampler: self.config.clone(),
            step,
            fingerprint: self.fingerprint,
            order: self.indexer.order_at(step),
        }
    }

    /// The endless sampler; `None` for a finite pass ([`DataLoader::pass`]) or a mixture
    /// ([`DataLoader::mixture`]).
    pub fn sampler(&self) -> Option<&Sampler> {
        self.indexer.sampler()
    }

    /// The finite pass; `None` for an endless loader.
    pub fn pass(&self) -> Option<&PassSampler> {
        self.indexer.pass()
    }

    /// The weighted mixture ([`LoaderBuilder::mixture`]); `None` otherwise.
    pub fn mixture(&self) -> Option<&Mixture> {
        self.indexer.mixture()
    }

    /// Number of records in every stream.
    pub fn len(&self) -> usize {
        self.config.len as usize
    }

    /// True when the streams are empty (never: the sampler refuses that).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rows per batch on this rank (a finite pass's last batch may hold fewer).
    pub fn batch_size(&self) -> usize {
        (self.config.batch_size / self.config.world.max(1)) as usize
    }

    /// Stream buffers allocated so far (the rest were recycled from dropped batches).
    #[doc(hidden)]
    pub fn buffers_allocated(&self) -> usize {
        self.pool.fresh.load(Ordering::Relaxed)
    }

    /// (name, dtype, item shape) of each dense array a batch holds: the dense streams, and for
    /// a padded ragged stream `name` (shape `[L, *row]`, `L` 0 when padded to the longest),
    /// `{name}_lengths` and `{name}_mask`.
    pub fn streams(&self) -> &[(String, DType, Vec<usize>)] {
        &self.streams
    }
}

impl<O: Send + 'static> Iterator for DataLoader<O> {
    type Item = Result<O>;

    /// Never `None` for an endless loader; `None` after the last step of a finite pass.
    fn next(&mut self) -> Option<Result<O>> {
        self.next_batch().transpose()
    }
}

/// What a loader makes of a step: a [`Batch`] through the transform, or (a staged loader) the
/// step gathered into a ring slot and staged.
enum Output<O> {
    Batch(Transform<O>),
    Staged(StepFn<O>),
}

/// What the prefetch threads of a [`DataLoader`] run for each step.
struct Producer<O> {
    streams: Arc<Vec<(String, StreamData)>>,
    indexer: Indexer,
    seed: u64,
    output: Output<O>,
    pool: Arc<Pool>,
    par: Parallelism,
    /// This rank's first position in the global batch: per-sample randomness is keyed by it.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    stripe: u32,
    /// Where dense streams' elements start ([`LoaderBuilder::batch_alignment`]).
    align: Option<usize>,
    /// How many steps ahead of the one it starts a thread asks for a cold store's pages.
    hint_ahead: u64,
    /// The loader's [`DataLoader::dropped`]: long steps stop early once it is set.
    #[cfg_attr(not(feature = "images"), allow(dead_code))]
    dropped: Arc<std::sync::atomic::AtomicBool>,
    /// The image streams' decode buffers, kept between steps, and whose turn it is to decode.
    #[cfg(feature = "images")]
    images: images::Shared,
}

impl<O> Producer<O> {
    /// Asks for the pages of step `step + hint_ahead` when a stream's store is cold (not known
    /// to be resident), so that they are read while the steps before it are gathered. A hint:
    /// its failures are left for that step's gather to report.
    fn hint(&self, step: u64) {
        if !self.streams.iter().any(|(_, s)| s.wants_hints()) {
            return;
        }
        let ahead = step.saturating_add(self.hint_ahead);
        if self.indexer.steps().is_some_and(|n| ahead >= n) {
            return;
        }
        let mut indices = Vec::new();
        if self.indexer.fill(ahead, &mut indices).is_ok() {
            for (_, s) in self.streams.iter() {
                let _ = s.advise(&indices);
            }
        }
    }

    /// Step `step`: its indices, every stream gathered at them, then the transform (or, staged,
    /// the slot's stage function).
    fn produce(&self, step: u64) -> Result<O> {
        let transform = match &self.output {
            Output::Batch(t) => t,
            Output::Staged(run) => {
                self.hint(step);
                let mut indices = Vec::new();
                self.indexer.fill(step, &mut indices)?;
                return run(step, &indices, &self.streams, self.par);
            }
        };
        if let Some((packer, name)) = self.indexer.packed() {
            let (indices, arrays) = packer.produce(step, name, &self.pool, self.par)?;
            let mut batch = self.empty_batch(step, indices);
            batch.streams.extend(arrays);
            return self.finish(transform, step, batch);
        }
        // Steps with images decode one at a time, in order, on every core (`images`).
        #[cfg(feature = "images")]
        let turn = match self.streams.iter().any(|(_, s)| matches!(s, StreamData::Image(..))) {
            true => Some(self.images.turn(step, &self.dropped)?),
            false => None,
        };
        self.hint(step);
        let mut indices = Vec::new();
        self.indexer.fill(step, &mut indices)?;
        let mut batch = self.empty_batch(step, indices);
        for (name, source) in self.streams.iter() {
            match source {
                StreamData::Dense(source) => {
                    let mut data = self.pool.get(name, source.dtype());
                    let head = source.gather_into_aligned(&batch.indices, &mut data, self.par, self.align)?;
                    batch.streams.insert(
                        name.clone(),
                        DenseArray::with_head(source.batch_shape(batch.indices.len()), data, head)?,
                    );
                }
                #[cfg(feature = "images")]
                StreamData::Image(source, pipeline) => {
                    let (data, ok) = self.decode_images(source, pipeline, name, &batch)?;
                    let mut shape = vec![batch.indices.len()];
                    shape.extend(pipeline.item_shape());
                    batch.streams.insert(name.clone(), DenseArray::new(shape, data)?);
                    if let Some(ok) = ok {
                        batch.streams.insert(format!("{name}_ok"), DenseArray::from_vec(vec![ok.len()], ok)?);
                    }
                }
                StreamData::Ragged(source, pad) => {
                    let mut ragged = RaggedArray::empty(source.dtype(), source.row_shape().to_vec());
                    source.gather_into_with(&batch.indices, &mut ragged, self.par)?;
                    match pad {
                        Some(p) => {
                            let padded = ragged.pad(*p).map_err(|e| match e {
                                Error::InvalidArgument(m) => {
                                    Error::InvalidArgument(format!("stream {name:?}, step {step}: {m}"))
                                }
                                other => other,
                            })?;
                            batch.streams.insert(format!("{name}_lengths"), padded.lengths);
                            batch.streams.insert(format!("{name}_mask"), padded.mask);
                            batch.streams.insert(name.clone(), padded.values);
                        }
                        None => {
                            batch.ragged.insert(name.clone(), ragged);
                        }
                    }
                }
            }
        }
        // The next step decodes while this one's transform runs.
        #[cfg(feature = "images")]
        drop(turn);
        self.finish(transform, step, batch)
    }

    /// Step `step`'s batch of rows `indices`, no stream in it yet, its buffers from the pool.
    fn empty_batch(&self, step: u64, indices: Vec<u32>) -> Batch {
        Batch {
            step,
            seed: self.seed,
            indices,
            streams: BTreeMap::new(),
            ragged: BTreeMap::new(),
            pool: Some(Arc::clone(&self.pool)),
        }
    }

    /// The transform of a gathered batch, its failure or panic as the step's error.
    fn finish(&self, transform: &Transform<O>, step: u64, batch: Batch) -> Result<O> {
        match catch_unwind(AssertUnwindSafe(|| transform(batch))) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(source)) => Err(Error::Transform { step, source }),
            Err(panic) => {
                Err(Error::Transform { step, source: format!("panicked: {}", panic_message(&*panic)).into() })
            }
        }
    }
}

/// Refuses a batch whose arrays would share a name: a stream named as an array the loader adds
/// beside another (`t_lengths` beside a padded `t`) replaced it, or was replaced by it, silently,
/// whichever came later (look 131, L131-1).
///
/// # Errors
/// [`Error::Config`] naming the stream.
fn distinct_names(
    streams: &[(String, StreamData)],
    meta: &[(String, DType, Vec<usize>)],
    indexer: &Indexer,
) -> Result<()> {
    // The batch's names: every dense array (`meta`), and each ragged stream delivered as it is,
    // which has no entry there (look 137, L137-1: such a stream was passed over, and the added
    // array of its name replaced it).
    let as_is = streams.iter().filter(|(n, s)| {
        matches!(s, StreamData::Ragged(_, None)) && indexer.packed().is_none_or(|(_, packed)| packed != n)
    });
    let mut seen = std::collections::HashSet::new();
    for name in meta.iter().map(|(n, ..)| n).chain(as_is.map(|(n, _)| n)) {
        if !seen.insert(name.as_str()) {
            return Err(Error::Config {
                what: "streams",
                reason: format!(
                    "the stream {name:?} has the name of an array the loader adds beside another stream \
                     (`_lengths` and `_mask` of a padded one, `_segments`, `_positions` and `_loss_mask` of a \
                     packed one, `_ok` of an image stream leaving bad images out): rename it"
                ),
            });
        }
    }
    Ok(())
}

/// (name, dtype, item shape) of every dense array a batch of `streams` sampled by `indexer`
/// holds: the dense streams, an image stream's items (and `{name}_ok` when it leaves bad images
/// out), a padded ragged stream's values, lengths and mask, and a packed stream's values,
/// segments, positions and loss mask.
pub(super) fn batch_meta(
    streams: &[(String, StreamData)],
    indexer: &Indexer,
) -> Vec<(String, DType, Vec<usize>)> {
    let mut meta: Vec<(String, DType, Vec<usize>)> = Vec::new();
    for (n, s) in streams {
        match s {
            StreamData::Dense(d) => meta.push((n.clone(), d.dtype(), d.item_shape().to_vec())),
            StreamData::Ragged(r, Some(p)) => {
                let mut shape = vec![p.length.unwrap_or(0)];
                shape.extend_from_slice(r.row_shape());
                meta.push((n.clone(), r.dtype(), shape));
                meta.push((format!("{n}_lengths"), DType::I64, vec![]));
                meta.push((format!("{n}_mask"), DType::U8, vec![p.length.unwrap_or(0)]));
            }
            #[cfg(feature = "images")]
            StreamData::Image(_, p) => {
                meta.push((n.clone(), p.dtype(), p.item_shape()));
                if p.skips_bad() {
                    meta.push((format!("{n}_ok"), DType::U8, vec![]));
                }
            }
            StreamData::Ragged(r, None) => {
                if let Some((p, packed)) = indexer.packed()
                    && packed == n
                {
                    let l = p.pack().length as usize;
                    meta.push((n.clone(), r.dtype(), vec![l]));
                    meta.push((format!("{n}_segments"), DType::I32, vec![l]));
                    meta.push((format!("{n}_positions"), DType::I32, vec![l]));
                    meta.push((format!("{n}_loss_mask"), DType::U8, vec![l]));
                }
            }
        }
    }
    meta
}
