//! [`LoaderBuilder`]: what a loader reads and how (its setters; `build.rs` turns it into a loader).

use std::path::Path;
use std::sync::Arc;

use super::adapter::data_fingerprint;
use super::bucket::BucketConfig;
use super::chosen::{BUCKET_ENDLESS, Chosen, MIXTURE_WHOLE, PACKED_ALONE};
use super::pack::Pack;
use super::state::{LoaderState, Pass};
use super::stream::StreamData;
use crate::dataset::{DenseSource, Kind, Pad, RaggedSource, Schema, Selection};
use crate::sampler::{PassConfig, SamplerMode};
use crate::{Error, Result};

/// Builds a [`DataLoader`](crate::DataLoader); see [`DataLoader::builder`](crate::DataLoader::builder).
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LoaderBuilder {
    pub(super) streams: Vec<(String, StreamData)>,
    pub(super) selections: Vec<Selection>,
    /// The order: the endless sampler, or the one setter of [`pass`](Self::pass),
    /// [`mixture`](Self::mixture), [`pack`](Self::pack) or [`bucket`](Self::bucket) called.
    pub(super) order: Chosen,
    pub(super) batch_size: u32,
    pub(super) mode: SamplerMode,
    pub(super) seed: u64,
    /// This process's (rank, world) when [`shard`](Self::shard) was called: a restored state
    /// is moved onto it; otherwise (0, 1), or the state's own.
    pub(super) shard: Option<(u32, u32)>,
    pub(super) start_step: u64,
    /// Which of the sampler's settings and the start step the caller named: a restored
    /// [`state`](Self::state) must agree with each ([`build`](Self::build) refuses one that
    /// does not, rather than dropping it without a word).
    pub(super) named: Named,
    pub(super) state: Option<LoaderState>,
    pub(super) threads: usize,
    pub(super) prefetch: usize,
    /// Where dense streams' elements start ([`LoaderBuilder::batch_alignment`]).
    pub(super) align: Option<usize>,
    /// How `open_stream` reaches `s3://` URLs ([`LoaderBuilder::remote_options`]).
    #[cfg(feature = "remote")]
    pub(super) remote: Option<crate::remote::RemoteOptions>,
    /// The first refusal of a chained setter ([`pad`](LoaderBuilder::pad),
    /// [`pack`](LoaderBuilder::pack), [`bucket`](LoaderBuilder::bucket),
    /// [`open_stream`](LoaderBuilder::open_stream)): the chain goes on, `build` reports it.
    /// Shared by clones, since an [`Error`] is not `Clone`.
    pub(super) failed: Option<Arc<Error>>,
}

impl std::fmt::Debug for LoaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("streams", &self.streams.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("selections", &self.selections.iter().map(Selection::len).collect::<Vec<_>>())
            .field("order", &self.order)
            .field("batch_size", &self.batch_size)
            .field("mode", &self.mode)
            .field("seed", &self.seed)
            .field("shard", &self.shard)
            .field("start_step", &self.start_step)
            .field("threads", &self.threads)
            .field("prefetch", &self.prefetch)
            .field("failed", &self.failed)
            .finish()
    }
}

/// The settings a caller named on a [`LoaderBuilder`] (a restored state must agree with them).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Named {
    pub(super) batch_size: bool,
    pub(super) mode: bool,
    pub(super) seed: bool,
    pub(super) start_step: bool,
}

impl Default for LoaderBuilder {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        LoaderBuilder {
            streams: Vec::new(),
            selections: Vec::new(),
            order: Chosen::Endless,
            batch_size: 32,
            mode: SamplerMode::Cyclic,
            seed: 0,
            shard: None,
            start_step: 0,
            named: Named::default(),
            state: None,
            threads: cores.clamp(1, 8),
            prefetch: 2,
            align: None,
            #[cfg(feature = "remote")]
            remote: None,
            failed: None,
        }
    }
}

impl LoaderBuilder {
    /// A builder with the defaults (what [`DataLoader::builder`](crate::DataLoader::builder) gives).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a named dense stream.
    pub fn stream(mut self, name: impl Into<String>, source: DenseSource) -> Self {
        self.streams.push((name.into(), StreamData::Dense(source)));
        self
    }

    /// Adds a named ragged stream; its batches carry a [`RaggedArray`](crate::RaggedArray)
    /// ([`Batch::get_ragged`](crate::Batch::get_ragged)) unless [`LoaderBuilder::pad`] makes them dense.
    pub fn ragged_stream(mut self, name: impl Into<String>, source: RaggedSource) -> Self {
        self.streams.push((name.into(), StreamData::Ragged(source, None)));
        self
    }

    /// Adds the stream `name` of encoded images (`source`: a dataset of kind `image`, or any
    /// ragged `u8` dataset of whole files), each decoded and transformed by `pipeline` on the
    /// prefetch threads into a dense item of the batch: `u8` `[H, W, 3]`, or `f32` `[3, H, W]`
    /// when it normalises ([`crate::vision`], feature `images`). Its random choices come from
    /// the loader's seed, the step and the sample's position in the global batch.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] for a pipeline that cannot run, or a source that is not
    /// of `u8` bytes; a record that does not decode is an error of its step naming the record.
    #[cfg(feature = "images")]
    pub fn image_stream(
        mut self,
        name: impl Into<String>,
        source: RaggedSource,
        pipeline: crate::vision::ImagePipeline,
    ) -> Self {
        let name = name.into();
        let why = pipeline.check().err().or_else(|| {
            (source.dtype() != crate::DType::U8 || !source.row_shape().is_empty()).then(|| {
                format!(
                    "{}: records of {} rows of shape {:?}, not bytes",
                    source.path().display(),
                    source.dtype(),
                    source.row_shape()
                )
            })
        });
        if let Some(reason) = why {
            return self.refuse(Error::Config {
                what: "image_stream",
                reason: format!("stream {name:?}: {reason}"),
            });
        }
        self.streams.push((name, StreamData::Image(source, std::sync::Arc::new(pipeline))));
        self
    }

    /// How [`LoaderBuilder::open_stream`] reaches `s3://` URLs from here on (endpoint, keys,
    /// region, the page cache...; feature `remote`). Without it, the AWS environment variables.
    #[cfg(feature = "remote")]
    pub fn remote_options(mut self, options: crate::remote::RemoteOptions) -> Self {
        self.remote = Some(options);
        self
    }

    /// Opens the dataset in `dir`, dense or ragged (its schema says), as stream `name`; with
    /// the `remote` feature `dir` may be an `s3://` URL (a store or a store set), reached with
    /// `LoaderBuilder::remote_options` (a method of that feature).
    ///
    /// # Errors
    /// `build` reports what [`DenseSource::open`] / [`RaggedSource::open`] do (the stream is
    /// not added).
    pub fn open_stream(self, name: impl Into<String>, dir: impl AsRef<Path>) -> Self {
        self.open_stream_with(name, dir, &crate::StoreOptions::new())
    }

    /// [`open_stream`](Self::open_stream) with the dataset's stores opened with `opts`:
    /// `StoreOptions::new().verify_reads(true)` checks every record's checksum on every read,
    /// raw records included, so that a damaged record is an error naming it rather than bytes
    /// handed to a model (by default only compressed records are checked as they are read:
    /// [`StoreOptions::verify_reads`](crate::StoreOptions::verify_reads)). A URL ignores
    /// `opts`: remote reads check every record already.
    ///
    /// # Errors
    /// As [`open_stream`](Self::open_stream).
    pub fn open_stream_with(
        self,
        name: impl Into<String>,
        dir: impl AsRef<Path>,
        opts: &crate::StoreOptions,
    ) -> Self {
        match self.opened(dir.as_ref(), opts) {
            Ok(StreamData::Dense(d)) => self.stream(name, d),
            Ok(StreamData::Ragged(r, _)) => self.ragged_stream(name, r),
            #[cfg(feature = "images")]
            Ok(StreamData::Image(r, p)) => self.image_stream(name, r, (*p).clone()),
            Err(e) => self.refuse(e),
        }
    }

    /// The dataset in `dir` (or at an `s3://` URL), dense or ragged.
    fn opened(&self, dir: &Path, opts: &crate::StoreOptions) -> Result<StreamData> {
        #[cfg(feature = "remote")]
        if crate::remote::is_remote(dir) {
            let url = dir.to_string_lossy();
            let options = self.remote.clone().unwrap_or_default();
            // The kind is in the schema, fetched with the store: dense first, else ragged.
            return match DenseSource::open_remote(&url, options.clone()) {
                Ok(d) => Ok(StreamData::Dense(d)),
                Err(Error::Schema { .. }) => {
                    Ok(StreamData::Ragged(RaggedSource::open_remote(&url, options)?, None))
                }
                Err(e) => Err(e),
            };
        }
        Ok(match Schema::read(dir)?.kind {
            Kind::Dense => StreamData::Dense(DenseSource::open_with(dir, opts)?),
            Kind::Ragged | Kind::Image => StreamData::Ragged(RaggedSource::open_with(dir, opts)?, None),
        })
    }

    /// This builder with `e` recorded as its setters' first refusal (a later one is not kept).
    fn refuse(mut self, e: Error) -> Self {
        self.failed.get_or_insert_with(|| Arc::new(e));
        self
    }

    /// This builder, or the first refusal of a chained setter ([`pad`](Self::pad),
    /// [`pack`](Self::pack), [`bucket`](Self::bucket), [`open_stream`](Self::open_stream)) as
    /// it was made: what `build` checks first. Adapters that start from the builder's settings
    /// without `build` call it first.
    ///
    /// # Errors
    /// The refusal: [`Error::Config`] from `pad`, `pack` and `bucket`, `open_stream`'s own
    /// error (an [`Error::Config`] with its message when a clone of this builder holds it too).
    pub(crate) fn checked(mut self) -> Result<Self> {
        match self.failed.take() {
            None => Ok(self),
            Some(e) => Err(Arc::try_unwrap(e).unwrap_or_else(|shared| retold(&shared))),
        }
    }

    /// The first refusal of a chained setter, for a check by reference (`resolve`, `plan`).
    pub(super) fn refusal(&self) -> Result<()> {
        self.failed.as_deref().map_or(Ok(()), |e| Err(retold(e)))
    }

    /// Pads the ragged stream `name` on the prefetch threads: the batch then holds `name` as a
    /// dense `(B, L, *row_shape)` array, `{name}_lengths` (`i64`, `(B,)`) and `{name}_mask`
    /// (`u8`, `(B, L)`: 1 for a real row), and no ragged `name`.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] when there is no ragged stream `name` here (the
    /// message lists the streams there are).
    pub fn pad(mut self, name: &str, pad: Pad) -> Self {
        let names = self.stream_names();
        let reason = match self.streams.iter_mut().find(|(n, _)| n == name) {
            // A value the stream's dtype cannot hold is refused here, where the loader is made,
            // not at its first step (look 127).
            Some((_, StreamData::Ragged(src, p))) => match crate::dataset::fill_bytes(src.dtype(), pad.value)
            {
                Ok(_) => {
                    *p = Some(pad);
                    return self;
                }
                Err(e) => format!("stream {name:?}: {e}"),
            },
            Some(_) => format!("stream {name:?} is dense; only a ragged stream is padded"),
            None => format!("no stream {name:?} to pad; the streams are {names}"),
        };
        self.refuse(Error::Config { what: "pad", reason })
    }

    fn stream_names(&self) -> String {
        let names: Vec<String> = self.streams.iter().map(|(n, _)| format!("{n:?}")).collect();
        if names.is_empty() { "none yet".into() } else { names.join(", ") }
    }

    /// Packs the ragged token stream `name` into dense rows of `pack.length` tokens: each step's
    /// `batch / world` rows on a rank hold consecutive samples of the rank's stripe of the
    /// (shuffled) stream, and the batch holds `name` (`[rows, L]`, the tokens, 0 in padding),
    /// `{name}_segments` and `{name}_positions` (`i32`: segment ids from 1 within a row and
    /// positions within the sample, 0 in padding) and `{name}_loss_mask` (`u8`, 1 on a token);
    /// see [`Pack`]. The stream must be the loader's only one. The state carries where the
    /// packing stands (a sample and an offset), so a saved state resumes exactly, on the same
    /// world size (each rank packs its own stripe). `steps_per_epoch` is `records / batch` by
    /// convention.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] when there is no ragged, unpadded stream `name` here
    /// (the message lists the streams) or `pack.length` is 0.
    pub fn pack(self, name: &str, pack: Pack) -> Self {
        let names = self.stream_names();
        let reason = match self.streams.iter().find(|(n, _)| n == name) {
            Some((_, StreamData::Ragged(_, None))) if pack.length > 0 => {
                return self.choose(Chosen::Pack(name.to_string(), pack));
            }
            Some((_, StreamData::Ragged(_, None))) => "a packed row needs at least one token".into(),
            Some(_) => {
                format!("stream {name:?} is dense or padded; only an unpadded ragged stream is packed")
            }
            None => format!("no stream {name:?} to pack; the streams are {names}"),
        };
        self.refuse(Error::Config { what: "pack", reason })
    }

    /// Length bucketing for padded ragged batches: within each window of `window` steps, the
    /// records of the sampler's global batches are sorted by the length of the ragged stream
    /// `name` and cut into `window` batches again, served in a keyed order, so a padded batch
    /// holds records of similar lengths. Which records a window holds is the sampler's (every
    /// record once per cycle, in cyclic mode); batches are still a pure function of (seed,
    /// step) and resume exactly, on any world size.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] when there is no ragged stream `name` here (the
    /// message lists the streams) or `window` is 0.
    pub fn bucket(self, name: &str, window: u32) -> Self {
        let names = self.stream_names();
        let reason = match self.streams.iter().find(|(n, _)| n == name) {
            Some((_, StreamData::Ragged(..))) if window > 0 => {
                return self.choose(Chosen::Bucket(BucketConfig { stream: name.to_string(), window }));
            }
            Some((_, StreamData::Ragged(..))) => "a bucketing window needs at least one step".into(),
            Some(_) => format!("stream {name:?} is dense; buckets sort a ragged stream"),
            None => format!("no stream {name:?} to bucket by; the streams are {names}"),
        };
        self.refuse(Error::Config { what: "bucket", reason })
    }

    /// The packed stream's name and packing, if any.
    pub(super) fn packed(&self) -> Option<(&str, Pack)> {
        match &self.order {
            Chosen::Pack(name, pack) => Some((name, *pack)),
            _ => None,
        }
    }

    /// Sets the order, refusing (at `build`) a second order of another kind: a later call of
    /// the same setter replaces the first.
    fn choose(self, order: Chosen) -> Self {
        let (was, now) = (self.order.setter(), order.setter());
        if was.is_none() || was == now {
            return LoaderBuilder { order, ..self };
        }
        let why = match (&self.order, &order) {
            (Chosen::Bucket(_), _) | (_, Chosen::Bucket(_)) => BUCKET_ENDLESS,
            (Chosen::Pack(..), _) | (_, Chosen::Pack(..)) => PACKED_ALONE,
            _ => MIXTURE_WHOLE,
        };
        // Named as each face spells it: Python's `epochs=` is the builder's `pass` (look 131,
        // L131-4: "`pass` already chose" said to a Python user who gave `epochs=`).
        let said = |setter: Option<&str>| match setter {
            Some("pass") => "`pass` (a finite pass: `epochs=` in Python)".to_string(),
            Some(other) => format!("`{other}`"),
            None => "`order`".to_string(),
        };
        let reason = format!("{} already chose the loader's order, and a loader has one: {why}", said(was));
        self.refuse(Error::Config { what: now.unwrap_or("order"), reason })
    }

    /// The names of the streams that are not dense (ragged, padded or not; encoded images).
    pub(super) fn non_dense_names(&self) -> impl Iterator<Item = &str> {
        self.streams.iter().filter(|(_, s)| !matches!(s, StreamData::Dense(..))).map(|(n, _)| n.as_str())
    }

    /// Reads only the records `selection` names (a split, a range, a list), in every stream:
    /// the loader's index space is the selection's (nothing is copied). A second call selects
    /// within the first.
    pub fn select(mut self, selection: Selection) -> Self {
        self.selections.push(selection);
        self
    }

    /// One finite pass ([`Pass`]) instead of the endless sampler: every record once, in
    /// order or shuffled, the last batch partial unless dropped, sharded over ranks without
    /// duplicates; the loader's iterator ends after it. [`mode`](Self::mode) is ignored.
    ///
    /// # Examples
    /// ```
    /// # use loaderx_core as loaderx;
    /// use loaderx::{DataLoader, DenseSource, Pass};
    /// let x = DenseSource::from_vec(vec![], (0..10u32).collect::<Vec<u32>>())?;
    /// let loader = DataLoader::builder().stream("x", x).batch_size(4).pass(Pass::ordered()).build()?;
    /// assert_eq!(loader.steps(), Some(3));
    /// let seen: Vec<u32> = loader
    ///     .map(|b| b.map(|b| b.get("x").unwrap().as_slice::<u32>().unwrap().to_vec()))
    ///     .collect::<Result<Vec<_>, _>>()?
    ///     .concat();
    /// assert_eq!(seen, (0..10).collect::<Vec<u32>>(), "each record once, the last batch partial");
    /// # Ok::<(), loaderx::Error>(())
    /// ```
    pub fn pass(self, finite: Pass) -> Self {
        self.choose(Chosen::Pass(finite))
    }

    /// Global batch size, summed over ranks (default 32): a `usize`, as burn's and candle's
    /// sizes are.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] for a batch of more than `u32::MAX` records (the
    /// sampler's index space).
    pub fn batch_size(mut self, n: usize) -> Self {
        match u32::try_from(n) {
            Ok(n) => {
                self.batch_size = n;
                self.named.batch_size = true;
                self
            }
            Err(_) => self.refuse(Error::Config {
                what: "batch_size",
                reason: format!("a batch of {n} records is more than the sampler's {}", u32::MAX),
            }),
        }
    }

    /// Sampling mode (default cyclic: shuffled without replacement).
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.mode = mode;
        self.named.mode = true;
        self
    }

    /// Seed of the sampler and of the per-row RNGs (what a `shuffle(seed)` names elsewhere).
    #[doc(alias = "shuffle")]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self.named.seed = true;
        self
    }

    /// This process's rank and the number of ranks sharing each global batch. With a restored
    /// [`state`](Self::state), the state is moved onto this shard: the global batches stay the
    /// same, each rank reading its stripe of them ([`LoaderState::resharded`]).
    pub fn shard(mut self, rank: u32, world: u32) -> Self {
        self.shard = Some((rank, world));
        self
    }

    /// [`shard`](Self::shard) with this process's rank and world size from the launcher's
    /// environment ([`Launch::from_env`](crate::Launch::from_env): torchrun's `RANK` and
    /// `WORLD_SIZE`, or Slurm's `SLURM_PROCID` and `SLURM_NTASKS`; one process without them).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the variables when they are inconsistent.
    pub fn shard_from_env(self) -> Result<Self> {
        let l = crate::Launch::from_env()?;
        Ok(self.shard(l.rank, l.world))
    }

    /// A fingerprint of everything every rank must agree on: the streams (names, dtypes, shapes,
    /// lengths, the selection) and the sampler config and pass, but not the rank or the step.
    /// Compare it across ranks at start-up (an all-gather of one `u64`) to catch a rank that
    /// opened other data or another seed.
    ///
    /// # Errors
    /// As [`adapter::resolve`](crate::adapter::resolve).
    pub fn run_fingerprint(&self) -> Result<u64> {
        let state = self.resolve()?;
        let mut sampler = state.sampler;
        sampler.rank = 0;
        // The pass alone of the orders: the run fingerprint is the same as before the order was
        // one type.
        let pass = state.order.pass().map(|p| PassConfig { rank: 0, ..p.clone() });
        let shared = (state.fingerprint, sampler, pass);
        let bytes = rmp_serde::to_vec(&shared)
            .map_err(|e| Error::InvalidArgument(format!("the run's config does not serialise: {e}")))?;
        Ok(data_fingerprint(&bytes))
    }

    /// The first step delivered (resume).
    pub fn start_step(mut self, step: u64) -> Self {
        self.start_step = step;
        self.named.start_step = true;
        self
    }

    /// Restores a saved state: sampler config and step. The streams must be the ones it was
    /// saved from (checked by fingerprint at `build`).
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] when a [`batch_size`](Self::batch_size),
    /// [`mode`](Self::mode), [`seed`](Self::seed) or [`start_step`](Self::start_step) also set
    /// on the builder differs from the state's: leave them out to resume with the state's values
    /// (a resumed run with another batch size is [`LoaderState::rebatched`]).
    pub fn state(mut self, state: LoaderState) -> Self {
        self.state = Some(state);
        self
    }

    /// Prefetch threads (default: the number of cores, at most 8): burn's and torch's
    /// `num_workers`.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] for more than 1,024 threads.
    #[doc(alias = "num_workers")]
    pub fn threads(mut self, n: usize) -> Self {
        if let Err(e) = check_threads(n) {
            return self.refuse(e);
        }
        self.threads = n.max(1);
        self
    }

    /// Batches per thread that may be ready ahead of the consumer (default 2): the loader claims
    /// at most `threads * (depth + 1)` steps ahead of the one the consumer waits for. Small,
    /// fast batches (tens of microseconds each) gain from 4–8, which absorbs the consumer's
    /// wake-ups; large ones cost `depth` batches of memory per thread.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] for a depth over 1,024.
    pub fn prefetch(mut self, depth: usize) -> Self {
        if let Err(e) = check_prefetch(depth) {
            return self.refuse(e);
        }
        self.prefetch = depth.max(1);
        self
    }

    /// Starts every dense stream's elements at an address that is a multiple of `bytes` (a
    /// power of two from 16 to 4,096): for a consumer that adopts a buffer without a copy only
    /// when it is aligned more than the allocator's 16 bytes (JAX's CPU client wants 64; the
    /// Python package asks for that). The storage then holds a few elements before the array's
    /// own ([`DenseArray::head`](crate::DenseArray::head)); `into_parts` and `into_vec` move
    /// them to the front (a copy), so leave it off for burn and candle, whose tensors adopt a
    /// `Vec` from its start. Booleans,
    /// padded and packed streams keep the allocator's alignment. Default: off.
    ///
    /// # Errors
    /// `build` reports [`Error::Config`] for another value.
    pub fn batch_alignment(mut self, bytes: usize) -> Self {
        if !bytes.is_power_of_two() || !(16..=4096).contains(&bytes) {
            return self.refuse(Error::Config {
                what: "batch_alignment",
                reason: format!("{bytes} bytes: a power of two from 16 to 4096"),
            });
        }
        self.align = Some(bytes);
        self
    }
}

/// [`Error::Config`] for more than [`MAX_THREADS`] prefetch threads (every face that starts
/// prefetch threads checks this one rule).
pub(super) fn check_threads(n: usize) -> Result<()> {
    if n > MAX_THREADS {
        return Err(Error::Config {
            what: "threads",
            reason: format!("{n} prefetch threads; a loader runs at most {MAX_THREADS}"),
        });
    }
    Ok(())
}

/// [`Error::Config`] for a prefetch depth over [`MAX_PREFETCH`].
pub(super) fn check_prefetch(depth: usize) -> Result<()> {
    if depth > MAX_PREFETCH {
        return Err(Error::Config {
            what: "prefetch",
            reason: format!("{depth} batches ahead per thread; a loader keeps at most {MAX_PREFETCH}"),
        });
    }
    Ok(())
}

/// The most prefetch threads a loader runs: its window of steps in flight (`threads * (depth
/// + 1)`) is sized when it is built, and each thread is an OS thread.
const MAX_THREADS: usize = 1024;
/// The most batches a prefetch thread keeps ready ahead of the consumer.
const MAX_PREFETCH: usize = 1024;

/// A setter's refusal told again from a shared reference: a configuration refusal as it was,
/// another (an `open_stream` that failed) as [`Error::Config`] with its message and causes.
fn retold(e: &Error) -> Error {
    if let Error::Config { what, reason } = e {
        return Error::Config { what, reason: reason.clone() };
    }
    let mut reason = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        reason = format!("{reason}: {c}");
        cause = c.source();
    }
    Error::Config { what: "open_stream", reason }
}
