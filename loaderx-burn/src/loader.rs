//! [`StepLoader`]: a native burn `DataLoader<O>` driven by loaderx's endless, step-based loader.
//!
//! burn's `DataLoader` is epoch-shaped: `iter()` walks the data once. A `StepLoader` keeps one
//! global step across `iter()` calls: each `iter()` delivers the next `steps_per_epoch` steps of
//! the endless stream, in step order, so epoch `e` of a run is steps `e*S..(e+1)*S` and a run
//! resumed from a saved [`LoaderState`] continues exactly where it stopped.
//!
//! The loader starts its prefetch threads on the first `iter()` (so the copies `to_device` and
//! `slice` make cost nothing until used) and keeps them running between epochs.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::Device;
use loaderx_core::adapter::{self, data_fingerprint};
use loaderx_core::{
    Batch, DataLoader, DenseSource, LoaderBuilder, LoaderState, Order, Pack, Pad, Pass, PassConfig,
    Prefetcher, RaggedSource, SamplerConfig, SamplerMode, Selection,
};

use crate::dense::DenseBatch;
use crate::{Error, Result};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Transform<O> = Arc<dyn Fn(Batch, &Device) -> std::result::Result<O, BoxError> + Send + Sync>;

/// Builds a [`StepLoader`]: the streams (or a burn dataset and batcher), the sampler, the
/// prefetch and the epoch length.
///
/// Defaults: batch 32, [`SamplerMode::Cyclic`], seed 0, one rank, `min(cores, 8)` prefetch
/// threads of depth 2, an epoch of one pass over the data, the device's default (resolved when
/// the loader first runs; burn's learner sets it with `to_device`).
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until a build method is called"]
pub struct StepLoaderBuilder {
    // Streams, sampler, resume and prefetch settings: loaderx's own builder, so defaults and
    // state checks live in one place.
    core: LoaderBuilder,
    steps_per_epoch: Option<u64>,
    device: Option<Device>,
}

impl From<LoaderBuilder> for StepLoaderBuilder {
    /// A burn loader over an already configured loaderx builder: its streams, sampler, resume
    /// and prefetch settings carry over; the epoch length and device keep their defaults.
    fn from(core: LoaderBuilder) -> Self {
        StepLoaderBuilder { core, ..Self::default() }
    }
}

impl StepLoaderBuilder {
    /// A builder with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `f` to the wrapped loaderx builder: every [`LoaderBuilder`] setting (streams,
    /// selections, sampler, sharding, resume, prefetch, padding, packing, bucketing) is reached
    /// this way, with that builder's meaning; the setters below are the common ones, written
    /// through it.
    pub fn map_core(mut self, f: impl FnOnce(LoaderBuilder) -> LoaderBuilder) -> Self {
        self.core = f(self.core);
        self
    }

    /// [`map_core`](Self::map_core) for a fallible setting (`shard_from_env`).
    ///
    /// # Errors
    /// [`Error::Core`] with `f`'s error.
    pub fn try_map_core(
        mut self,
        f: impl FnOnce(LoaderBuilder) -> loaderx_core::Result<LoaderBuilder>,
    ) -> Result<Self> {
        self.core = f(self.core)?;
        Ok(self)
    }

    /// The wrapped loaderx builder (its `data_fingerprint` and `run_fingerprint`; `loaderx_core::adapter` takes it).
    pub fn core(&self) -> &LoaderBuilder {
        &self.core
    }

    /// A loader over a weighted mixture of `sources` ([`LoaderBuilder::mixture`]): each source
    /// a builder with streams of the same names, dtypes and shapes, each with a non-negative
    /// weight. Only the sources' streams and selections are used: batch size, seed, sharding,
    /// the epoch length and the device are set on the returned builder.
    ///
    /// # Errors
    /// [`Error::Core`] as [`LoaderBuilder::mixture`].
    pub fn mixture(sources: Vec<(f64, StepLoaderBuilder)>) -> Result<Self> {
        let sources = sources.into_iter().map(|(w, b)| (w, b.core)).collect();
        Ok(LoaderBuilder::mixture(sources)?.into())
    }

    /// Adds a named dense stream (for [`build`](Self::build) and
    /// [`build_with`](Self::build_with)).
    pub fn stream(self, name: impl Into<String>, source: DenseSource) -> Self {
        self.map_core(|b| b.stream(name, source))
    }

    /// How [`open_stream`](Self::open_stream) reaches `s3://` URLs (feature `remote`): endpoint,
    /// keys, region, the page cache. Without it, the AWS environment variables.
    #[cfg(feature = "remote")]
    pub fn remote_options(self, options: loaderx_core::remote::RemoteOptions) -> Self {
        self.map_core(|b| b.remote_options(options))
    }

    /// Opens the dataset in `dir` as stream `name`: dense, or ragged (then give it a
    /// [`pad`](Self::pad) for [`build`](Self::build)).
    ///
    /// # Errors
    /// `build_*` reports [`Error::Core`] when `dir` holds no dataset (naming `dir`).
    pub fn open_stream(self, name: impl Into<String>, dir: impl AsRef<Path>) -> Self {
        self.map_core(|b| b.open_stream(name, dir))
    }

    /// Adds a named ragged stream; [`pad`](Self::pad) makes its batches dense tensors.
    pub fn ragged_stream(self, name: impl Into<String>, source: RaggedSource) -> Self {
        self.map_core(|b| b.ragged_stream(name, source))
    }

    /// Pads the ragged stream `name` on the prefetch threads: the batch holds `name` as a dense
    /// `[B, L, ..]` tensor, `{name}_lengths` (`[B]`) and `{name}_mask` (`[B, L]`, 1 for a real
    /// row) ([`LoaderBuilder::pad`]).
    ///
    /// # Errors
    /// `build_*` reports [`Error::Core`] when there is no ragged stream `name` (the message
    /// lists the streams).
    pub fn pad(self, name: &str, pad: Pad) -> Self {
        self.map_core(|b| b.pad(name, pad))
    }

    /// Packs the ragged token stream `name` into dense rows of `pack.length` tokens, with
    /// segment ids, positions and a loss mask ([`LoaderBuilder::pack`]); the stream is the
    /// loader's only one, and the state carries where the packing stands.
    ///
    /// # Errors
    /// `build_*` reports [`Error::Core`] when there is no unpadded ragged stream `name` or
    /// `pack.length` is 0.
    pub fn pack(self, name: &str, pack: Pack) -> Self {
        self.map_core(|b| b.pack(name, pack))
    }

    /// Length bucketing of a padded ragged stream `name` within windows of `window` steps
    /// ([`LoaderBuilder::bucket`]): a padded batch holds records of similar lengths.
    ///
    /// # Errors
    /// `build_*` reports [`Error::Core`] when there is no ragged stream `name` or `window` is 0.
    pub fn bucket(self, name: &str, window: u32) -> Self {
        self.map_core(|b| b.bucket(name, window))
    }

    /// Reads only the records `selection` names (a split, a range, a list) in every stream
    /// ([`LoaderBuilder::select`]): nothing is copied.
    pub fn select(self, selection: Selection) -> Self {
        self.map_core(|b| b.select(selection))
    }

    /// Global batch size, summed over ranks (default 32).
    pub fn batch_size(self, n: u32) -> Self {
        self.map_core(|b| b.batch_size(n))
    }

    /// Sampling mode (default cyclic: shuffled without replacement, a fresh order every pass).
    pub fn mode(self, mode: SamplerMode) -> Self {
        self.map_core(|b| b.mode(mode))
    }

    /// Seed of the sampler and of the per-row RNGs.
    pub fn seed(self, seed: u64) -> Self {
        self.map_core(|b| b.seed(seed))
    }

    /// This process's rank and the number of ranks sharing each global batch.
    pub fn shard(self, rank: u32, world: u32) -> Self {
        self.map_core(|b| b.shard(rank, world))
    }

    /// The first global step delivered (resume).
    pub fn start_step(self, step: u64) -> Self {
        self.map_core(|b| b.start_step(step))
    }

    /// Restores a saved [`StepLoader::state`]: sampler config and step. It must come from the
    /// same data (checked by fingerprint at build).
    pub fn state(self, state: LoaderState) -> Self {
        self.map_core(|b| b.state(state))
    }

    /// Prefetch threads (default: the number of cores, at most 8).
    pub fn threads(self, n: usize) -> Self {
        self.map_core(|b| b.threads(n))
    }

    /// Batches per thread that may be ready ahead of the consumer (default 2; see
    /// `loaderx_core::LoaderBuilder::prefetch`: 4–8 for small, fast batches such as MNIST's).
    pub fn prefetch(self, depth: usize) -> Self {
        self.map_core(|b| b.prefetch(depth))
    }

    /// Each `iter()` is one finite pass ([`Pass`]): every item exactly once, in order or
    /// shuffled (a new shuffle each `iter()`: epoch 0, 1, ...), the last batch partial unless
    /// dropped; `num_items()` and `progress()` count exactly the items delivered. For
    /// validation loaders (`Pass::ordered()`) and exactly-once training epochs
    /// (`Pass::shuffled()`). [`mode`](Self::mode) and [`steps_per_epoch`](Self::steps_per_epoch)
    /// do not apply.
    pub fn pass(self, finite: Pass) -> Self {
        // One pass per `iter()`, the passes back to back: the prefetch threads go on into the
        // next epoch while this one is consumed.
        self.map_core(|b| b.pass(finite.epochs(None)))
    }

    /// Steps per `iter()` (a burn "epoch"). Default: one pass over the data, `len / batch`
    /// steps for the cyclic sampler (its remainder is dropped), `ceil(len / batch)` otherwise.
    pub fn steps_per_epoch(mut self, steps: u64) -> Self {
        self.steps_per_epoch = Some(steps);
        self
    }

    /// The device batches are built on (burn's learner replaces it through `to_device`).
    pub fn device(mut self, device: &Device) -> Self {
        self.device = Some(device.clone());
        self
    }

    /// A loader of [`DenseBatch`]es: one `TensorData` per stream, adopting the gathered buffer.
    ///
    /// # Errors
    /// As [`build_with`](Self::build_with).
    pub fn build(self) -> Result<StepLoader<DenseBatch>> {
        self.build_with(|batch: Batch, device: &Device| DenseBatch::from_batch(batch, device))
    }

    /// A loader whose prefetch threads turn each gathered [`Batch`] into an `O` on the loader's
    /// device (the collate step), delivered in step order.
    ///
    /// # Errors
    /// [`Error::Core`] for no streams, streams of different lengths, invalid sampler
    /// parameters, a restored state from other data, or an epoch of 0 steps
    /// ([`loaderx_core::Error::Config`]).
    pub fn build_with<O, E, F>(self, transform: F) -> Result<StepLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Batch, &Device) -> std::result::Result<O, E> + Send + Sync + 'static,
    {
        let core = adapter::checked(self.core)?;
        // Validates the streams and the sampler and yields the starting state; the threads start
        // on the first `iter()`.
        let state = adapter::resolve(&core)?;
        let transform: Transform<O> = Arc::new(move |b, d| transform(b, d).map_err(Into::into));
        let recipe = Arc::new(CoreRecipe { builder: core, fingerprint: state.fingerprint, transform });
        StepLoader::new(recipe, state, self.steps_per_epoch, self.device)
    }

    /// [`build_with`](Self::build_with) for a transform whose error is any boxed error: `?` works
    /// on every error type inside it, and `Ok(x)` needs no type annotation.
    ///
    /// # Errors
    /// As [`build_with`](Self::build_with).
    pub fn build_map<O, F>(self, transform: F) -> Result<StepLoader<O>>
    where
        O: Send + 'static,
        F: Fn(Batch, &Device) -> std::result::Result<O, BoxError> + Send + Sync + 'static,
    {
        self.build_with(transform)
    }

    /// A loader over any burn dataset with a burn batcher: each step's indices come from the
    /// loaderx sampler and are fetched with one `get_many` call (one batched gather for the
    /// loaderx datasets of this crate), batched on a prefetch thread and delivered in step order.
    /// Streams added to this builder are not used.
    ///
    /// # Errors
    /// [`Error::Core`] for invalid sampler parameters (an empty dataset among them) or a
    /// restored state from other data, an epoch of 0 steps or packing or bucketing asked of a
    /// batcher ([`loaderx_core::Error::Config`]); [`Error::InvalidArgument`] for a dataset of
    /// more than `u32::MAX` items.
    pub fn build_batcher<I, O, D, B>(self, dataset: D, batcher: B) -> Result<StepLoader<O>>
    where
        I: Send + 'static,
        O: Send + 'static,
        D: Dataset<I> + 'static,
        B: Batcher<I, O> + 'static,
    {
        let len = u32::try_from(dataset.len())
            .map_err(|_| Error::InvalidArgument("a dataset of more than u32::MAX items".into()))?;
        let fingerprint = data_fingerprint(format!("dataset:{len}").as_bytes());
        let core = adapter::checked(self.core)?;
        let state = adapter::plan(&core, len, fingerprint)?;
        if let Order::Packed(_) | Order::Bucketed(_) = state.order {
            // Both read the builder's ragged stream (its records' lengths), which a dataset loader
            // does not gather: its items are the batcher's.
            return Err(Error::Core(loaderx_core::Error::Config {
                what: "build_batcher",
                reason: "packing and length bucketing read the builder's ragged stream: build, build_with or build_map, not a batcher"
                    .into(),
            }));
        }
        let recipe = Arc::new(DatasetRecipe {
            dataset: Arc::new(dataset),
            batcher: Arc::new(batcher),
            threads: adapter::thread_count(&core),
            prefetch: adapter::prefetch_depth(&core),
        });
        StepLoader::new(recipe, state, self.steps_per_epoch, self.device)
    }
}

/// What a loader runs: the same recipe makes every `to_device` and `slice` copy.
trait Recipe<O>: Send + Sync {
    fn start(&self, state: &LoaderState, device: &Device) -> Result<Box<dyn Running<O>>>;
}

/// A started producer: delivers consecutive steps.
trait Running<O>: Send {
    fn next(&mut self) -> Result<O>;
    /// The next step [`Running::next`] delivers.
    fn step(&self) -> u64;
    /// The order at [`Running::step`] (where a packed stream's packing stands), when it moves.
    fn order(&self) -> Option<Order> {
        None
    }
}

struct CoreRecipe<O> {
    builder: LoaderBuilder,
    fingerprint: u64,
    transform: Transform<O>,
}

impl<O: Send + 'static> Recipe<O> for CoreRecipe<O> {
    fn start(&self, state: &LoaderState, device: &Device) -> Result<Box<dyn Running<O>>> {
        let state = LoaderState { fingerprint: self.fingerprint, ..state.clone() };
        let transform = Arc::clone(&self.transform);
        let device = device.clone();
        let loader = self.builder.clone().state(state).build_with(move |b| transform(b, &device))?;
        Ok(Box::new(loader))
    }
}

impl<O: Send + 'static> Running<O> for DataLoader<O> {
    fn next(&mut self) -> Result<O> {
        Ok(self.next_batch()?)
    }

    fn step(&self) -> u64 {
        DataLoader::step(self)
    }

    fn order(&self) -> Option<Order> {
        Some(self.state().order)
    }
}

struct DatasetRecipe<I, O> {
    dataset: Arc<dyn Dataset<I>>,
    batcher: Arc<dyn Batcher<I, O>>,
    threads: usize,
    prefetch: usize,
}

impl<I: Send + 'static, O: Send + 'static> Recipe<O> for DatasetRecipe<I, O> {
    fn start(&self, state: &LoaderState, device: &Device) -> Result<Box<dyn Running<O>>> {
        // A dataset loader gathers no streams of its own: its order (endless, a pass or a
        // mixture) reads none.
        let indexer = state.indexer(&[])?;
        let step = state.step;
        let dataset = Arc::clone(&self.dataset);
        let batcher = Arc::clone(&self.batcher);
        let device = device.clone();
        // The outer result is the prefetcher's own (a panicking step); the inner one the step's.
        let produce = move |step: u64| -> loaderx_core::Result<Result<O>> {
            let mut batch = Vec::new();
            match indexer.fill(step, &mut batch) {
                Ok(()) => {}
                // The prefetch threads run ahead of the consumer, past a pass's end too: those
                // steps are not batched (a batcher may not take an empty list).
                Err(loaderx_core::Error::PassEnded { .. }) => {
                    let steps = indexer.steps_per_epoch();
                    return Ok(Err(loaderx_core::Error::PassEnded { steps }.into()));
                }
                Err(e) => return Ok(Err(e.into())),
            }
            let indices: Vec<usize> = batch.into_iter().map(|i| i as usize).collect();
            Ok(match dataset.get_many(indices) {
                Ok(items) => Ok(batcher.batch(items, &device)),
                Err(source) => Err(Error::Dataset { step, source }),
            })
        };
        let prefetcher = Prefetcher::spawn("loaderx-burn", self.threads, self.prefetch, step, produce)?;
        Ok(Box::new(prefetcher))
    }
}

impl<O: Send + 'static> Running<O> for Prefetcher<Result<O>> {
    fn next(&mut self) -> Result<O> {
        Prefetcher::next(self)?
    }

    fn step(&self) -> u64 {
        Prefetcher::step(self)
    }
}

/// A burn [`DataLoader`](BurnDataLoader) driven by loaderx's endless step-based loader.
///
/// - whole-batch gather: each step is one gather per stream (or one `get_many`), never a
///   per-item `get`; batches arrive in step order whichever prefetch thread finishes first;
/// - the global step goes on across `iter()` calls: each `iter()` yields the next
///   [`steps_per_epoch`](Self::steps_per_epoch) steps;
/// - `progress()` counts items (`steps done × local batch`), reaching `num_items()` at the end
///   of the epoch, so burn's gradient accumulation and metrics see a normal epoch;
/// - `to_device` gives a copy that builds its batches on that device and shares this loader's
///   step counter (so [`state`](Self::state) on the loader you kept follows the training run);
/// - `slice(start, end)` maps an equal split of `num_items()` onto loaderx sharding: part `r`
///   of `k` is rank `r` of `k` (composed with the builder's own shard), each taking its stripe
///   of every global batch;
/// - [`state`](Self::state) is plain data to save; [`StepLoaderBuilder::state`] resumes from it.
///
/// # Examples
/// ```
/// use burn::data::dataloader::DataLoader;
/// use loaderx_burn::StepLoaderBuilder;
/// use loaderx_core::{DatasetWriter, WriteOptions};
/// let dir = tempfile::tempdir()?;
/// let mut w = DatasetWriter::dense::<f32>(dir.path().join("x"), vec![2], WriteOptions::new())?;
/// w.append(&(0..200).map(|v| v as f32).collect::<Vec<_>>())?;
/// w.finish()?;
/// let loader = StepLoaderBuilder::new()
///     .open_stream("x", dir.path().join("x"))
///     .batch_size(25)
///     .build()?;
/// assert_eq!(loader.num_items(), 100); // 4 steps of 25 per epoch
/// let batches: Vec<_> = loader.iter().collect::<Result<_, _>>()?;
/// assert_eq!(batches.len(), 4);
/// assert_eq!(batches[0].get("x").unwrap().shape().as_slice(), &[25, 2]);
/// assert_eq!(loader.state().step, 4); // the next iter() goes on with step 4
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct StepLoader<O> {
    recipe: Arc<dyn Recipe<O>>,
    config: SamplerConfig,
    /// The order at [`StepLoader::step`]: a finite pass is one pass per `iter()`
    /// ([`StepLoaderBuilder::pass`]), back to back from its `epoch`; a packed stream's cursor
    /// follows the steps delivered.
    order: Mutex<Order>,
    fingerprint: u64,
    steps_per_epoch: u64,
    device: Option<Device>,
    next_step: Arc<AtomicU64>,
    running: Mutex<Option<Box<dyn Running<O>>>>,
}

impl<O> std::fmt::Debug for StepLoader<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepLoader")
            .field("sampler", &self.config)
            .field("step", &self.step())
            .field("steps_per_epoch", &self.steps_per_epoch)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl<O> StepLoader<O> {
    fn new(
        recipe: Arc<dyn Recipe<O>>,
        state: LoaderState,
        steps_per_epoch: Option<u64>,
        device: Option<Device>,
    ) -> Result<Self> {
        let steps_per_epoch = match &state.order {
            Order::Pass(p) => p.build()?.steps(),
            Order::Mixture(_) | Order::Packed(_) => {
                let batch = u64::from(state.sampler.batch_size.max(1));
                steps_per_epoch.unwrap_or(u64::from(state.sampler.len).div_ceil(batch))
            }
            // A bucketed epoch is the sampler's: a cycle of the records it regroups.
            Order::Endless | Order::Bucketed(_) => {
                let one_pass = state.sampler.build()?.steps_per_cycle();
                let batch = u64::from(state.sampler.batch_size);
                steps_per_epoch
                    .unwrap_or_else(|| one_pass.unwrap_or(u64::from(state.sampler.len).div_ceil(batch)))
            }
        };
        if steps_per_epoch == 0 {
            return Err(Error::Core(loaderx_core::Error::Config {
                what: "steps_per_epoch",
                reason: "an epoch needs at least one step".into(),
            }));
        }
        Ok(StepLoader {
            recipe,
            config: state.sampler,
            order: Mutex::new(state.order),
            fingerprint: state.fingerprint,
            steps_per_epoch,
            device,
            next_step: Arc::new(AtomicU64::new(state.step)),
            running: Mutex::new(None),
        })
    }

    /// The next global step to be delivered.
    pub fn step(&self) -> u64 {
        self.next_step.load(Ordering::Acquire)
    }

    /// The state to save: restoring it resumes at the next undelivered step (of a finite
    /// loader, epoch `pass.epoch + step / steps_per_epoch`).
    pub fn state(&self) -> LoaderState {
        LoaderState {
            sampler: self.config.clone(),
            step: self.step(),
            fingerprint: self.fingerprint,
            order: self.order(),
        }
    }

    /// The order at [`StepLoader::step`].
    fn order(&self) -> Order {
        self.order.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The finite pass each `iter()` runs one of, if the loader is finite.
    fn pass(&self) -> Option<PassConfig> {
        self.order().pass().cloned()
    }

    /// Items each `iter()` delivers on this rank (burn's `num_items`).
    pub fn items_per_epoch(&self) -> usize {
        match self.pass() {
            Some(p) => p.build().map_or(0, |p| p.num_items() as usize),
            None => (self.steps_per_epoch as usize).saturating_mul(self.batch_size()),
        }
    }

    /// Steps each `iter()` delivers.
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }

    /// Rows per batch on this rank: the global batch divided by the number of ranks.
    pub fn batch_size(&self) -> usize {
        (self.config.batch_size / self.config.world.max(1)) as usize
    }

    /// The sampler configuration (length, global batch, mode, seed, rank, world).
    pub fn sampler(&self) -> &SamplerConfig {
        &self.config
    }

    /// The device batches are built on; `None` means the default device.
    pub fn device(&self) -> Option<&Device> {
        self.device.as_ref()
    }

    fn copy(&self, config: SamplerConfig, device: Option<Device>, next_step: Arc<AtomicU64>) -> Self {
        let order = match self.order() {
            Order::Pass(p) => Order::Pass(PassConfig { rank: config.rank, world: config.world, ..p }),
            other => other,
        };
        StepLoader {
            recipe: Arc::clone(&self.recipe),
            config,
            order: Mutex::new(order),
            fingerprint: self.fingerprint,
            steps_per_epoch: self.steps_per_epoch,
            device,
            next_step,
            running: Mutex::new(None),
        }
    }
}

impl<O: Send + 'static> BurnDataLoader<O> for StepLoader<O> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        let step = self.step();
        let parked = self.running.lock().unwrap_or_else(|e| e.into_inner()).take();
        let state = self.state();
        let started = match parked {
            Some(r) if r.step() == step => Ok(r),
            _ => {
                let device = self.device.clone().unwrap_or_default();
                self.recipe.start(&state, &device)
            }
        };
        let (running, failed) = match started {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        };
        // A finite loader's `iter()` ends at its epoch's end, also when a restored state resumes
        // mid-epoch.
        let done = if self.pass().is_some() { step % self.steps_per_epoch } else { 0 };
        Box::new(StepIter { loader: self, running, failed, done })
    }

    fn num_items(&self) -> usize {
        self.items_per_epoch()
    }

    fn to_device(&self, device: &Device) -> Arc<dyn BurnDataLoader<O>> {
        Arc::new(self.copy(self.config.clone(), Some(device.clone()), Arc::clone(&self.next_step)))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn BurnDataLoader<O>> {
        let total = self.num_items().max(1);
        let width = end.saturating_sub(start).max(1);
        let parts = ((total as f64 / width as f64).round() as u32).max(1);
        let part = ((start as u64 * u64::from(parts)) / total as u64).min(u64::from(parts - 1)) as u32;
        let config = SamplerConfig {
            rank: self.config.rank * parts + part,
            world: self.config.world * parts,
            ..self.config.clone()
        };
        let next = Arc::new(AtomicU64::new(self.step()));
        Arc::new(self.copy(config, self.device.clone(), next))
    }
}

struct StepIter<'a, O> {
    loader: &'a StepLoader<O>,
    running: Option<Box<dyn Running<O>>>,
    failed: Option<Error>,
    done: u64,
}

impl<O> Iterator for StepIter<'_, O> {
    type Item = std::result::Result<O, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done >= self.loader.steps_per_epoch {
            return None;
        }
        if let Some(e) = self.failed.take() {
            // The loader could not start (e.g. a slice whose world does not divide the batch).
            self.done = self.loader.steps_per_epoch;
            return Some(Err(e.into_dataset_error()));
        }
        let running = self.running.as_mut()?;
        let out = running.next();
        self.done += 1;
        self.loader.next_step.store(running.step(), Ordering::Release);
        let mut order = self.loader.order.lock().unwrap_or_else(|e| e.into_inner());
        if let Order::Packed(_) = *order {
            // Only a packed stream's order moves with the steps (its cursor); a producer that
            // cannot say where it stands leaves the order as it was.
            if let Some(now) = running.order() {
                *order = now;
            }
        }
        Some(out.map_err(Error::into_dataset_error))
    }
}

impl<O> DataLoaderIterator<O> for StepIter<'_, O> {
    fn progress(&self) -> Progress {
        let batch = self.loader.batch_size();
        let total = self.loader.items_per_epoch();
        // Only a finite pass's last step can be partial: the count is exact.
        Progress::new((self.done as usize * batch).min(total), total, Some("items".to_string()))
    }
}

impl<O> Drop for StepIter<'_, O> {
    fn drop(&mut self) {
        // Park the running producer: the next `iter()` goes on from its prefetched steps.
        if let Some(r) = self.running.take() {
            *self.loader.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        }
    }
}
