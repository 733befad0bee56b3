//! [`StepLoaderBuilder`]: a [`StepLoader`]'s streams (or a burn dataset and batcher), sampler,
//! prefetch and epoch length, over loaderx's own builder.

use std::path::Path;
use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::tensor::Device;
use loaderx_core::adapter::{self, data_fingerprint};
use loaderx_core::{
    Batch, DenseSource, LoaderBuilder, LoaderState, Order, Pack, Pad, Pass, RaggedSource, SamplerMode,
    Selection,
};

use super::StepLoader;
use super::recipe::{BoxError, CoreRecipe, DatasetRecipe, Transform};
use crate::dense::DenseBatch;
use crate::{Error, Result};

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
    /// The epoch burn's learner resumes from ([`checkpoint`](Self::checkpoint)).
    checkpoint: Option<usize>,
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

    /// Adds the stream `name` of encoded images, each decoded and transformed by `pipeline` on the
    /// prefetch threads (core's [`LoaderBuilder::image_stream`](loaderx_core::LoaderBuilder::image_stream),
    /// feature `images`): take it with `DenseBatch::float::<4>` as `[B, 3, H, W]` when the pipeline
    /// normalises, or `int::<4>` as `[B, H, W, 3]` bytes.
    #[cfg(feature = "images")]
    pub fn image_stream(
        self,
        name: impl Into<String>,
        source: loaderx_core::RaggedSource,
        pipeline: loaderx_core::vision::ImagePipeline,
    ) -> Self {
        self.map_core(|b| b.image_stream(name, source, pipeline))
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

    /// [`open_stream`](Self::open_stream) with the dataset's stores opened with `opts`:
    /// `StoreOptions::new().verify_reads(true)` makes a damaged record an error naming it
    /// rather than bytes handed to the model ([`LoaderBuilder::open_stream_with`]).
    pub fn open_stream_with(
        self,
        name: impl Into<String>,
        dir: impl AsRef<Path>,
        opts: &loaderx_core::StoreOptions,
    ) -> Self {
        self.map_core(|b| b.open_stream_with(name, dir, opts))
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
    pub fn batch_size(self, n: usize) -> Self {
        self.map_core(|b| b.batch_size(n))
    }

    /// Sampling mode (default cyclic: shuffled without replacement, a fresh order every pass).
    pub fn mode(self, mode: SamplerMode) -> Self {
        self.map_core(|b| b.mode(mode))
    }

    /// Seed of the sampler and of the per-row RNGs (burn's `shuffle(seed)`: the order is
    /// shuffled by default, [`mode`](Self::mode) and [`pass`](Self::pass) say how).
    #[doc(alias = "shuffle")]
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

    /// The epoch training resumes from, as burn's learner takes it
    /// (`SupervisedTraining::checkpoint(epoch)`, which goes on with epoch `epoch + 1`): the loader
    /// starts after `epoch` epochs, at step `epoch * steps_per_epoch`, so the same number given
    /// to both resumes the model and the data together, with no file of the loader's own. The
    /// batches are those the first run would have read from there on.
    ///
    /// # Errors
    /// A build reports [`loaderx_core::Error::Config`] when a [`state`](Self::state) or a
    /// [`start_step`](Self::start_step) past 0 is also given (they name the step themselves).
    pub fn checkpoint(mut self, epoch: usize) -> Self {
        self.checkpoint = Some(epoch);
        self
    }

    /// Restores a saved [`StepLoader::state`]: sampler config and step. It must come from the
    /// same data (checked by fingerprint at build).
    pub fn state(self, state: LoaderState) -> Self {
        self.map_core(|b| b.state(state))
    }

    /// Prefetch threads (default: the number of cores, at most 8): burn's `num_workers`.
    #[doc(alias = "num_workers")]
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

    /// The device batches are built on (burn's learner replaces it through `to_device`). Owned,
    /// and named as burn's `DataLoaderBuilder::set_device` (and this crate's mirror of it).
    pub fn set_device(mut self, device: Device) -> Self {
        self.device = Some(device);
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
        StepLoader::new(recipe, state, self.steps_per_epoch, self.checkpoint, self.device)
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

    /// A loader of a [`TypedBatch`](crate::TypedBatch) (a struct declared with
    /// [`typed_batch!`](crate::typed_batch)): each field's stream, rank and kind checked against
    /// the streams here, before any thread starts, so a mistyped name, a wrong rank or an `int`
    /// field over floats is refused now rather than at the first batch, and the model takes
    /// the fields with no `Result`.
    ///
    /// # Errors
    /// [`Error::Stream`] for a field its stream cannot fill ([`check_typed`](crate::check_typed));
    /// as [`build_with`](Self::build_with).
    pub fn build_typed<T: crate::TypedBatch>(self) -> Result<StepLoader<T>> {
        let core = adapter::checked(self.core.clone())?;
        let ragged = adapter::unpadded_ragged(&core);
        crate::typed::check::<T>(&adapter::batch_streams(&core)?).map_err(|e| match e {
            // Missing from the batch because it is ragged: say so, and how to pad it.
            Error::Stream { name, .. } if ragged.contains(&name) => Error::Stream {
                reason: format!(
                    "is ragged (records of different lengths), which no tensor holds: pad it, \
                     .pad({name:?}, Pad::longest()), or make the field in a build_map of your own"
                ),
                name,
            },
            e => e,
        })?;
        self.build_with(|batch: Batch, device: &Device| {
            let mut dense = DenseBatch::from_batch(batch, device)?;
            T::from_batch(&mut dense)
        })
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
        StepLoader::new(recipe, state, self.steps_per_epoch, self.checkpoint, self.device)
    }
}
