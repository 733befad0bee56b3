//! [`LoaderBuilder`]: what a loader reads and how; [`LoaderState`]: where it is.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::batch::Batch;
use super::bucket::BucketConfig;
use super::data_loader::{BoxError, DataLoader, Transform};
use super::order::{Order, SavedState};
use super::pack::{Pack, PackConfig};
use crate::dataset::{DenseSource, Kind, Pad, RaggedSource, Schema, Selection};
use crate::sampler::{MixtureConfig, PassConfig, SamplerConfig, SamplerMode};
use crate::{DType, Error, Result};

/// The fingerprint of a description of data (64-bit FNV-1a of `bytes`): what
/// [`LoaderState::fingerprint`] holds. [`LoaderBuilder::fingerprint`] describes dense streams;
/// an adapter over other data describes it in its own words (a dataset's length, say).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    crate::format::hash64(bytes)
}

/// Where a loader is: plain data to save, inspect, edit (skip steps) and restore.
///
/// Serialised in the shape of earlier versions (the order's config under its own optional field:
/// `pass`, `mixture`, `pack` or `bucket`), so states saved by them restore and theirs read ours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SavedState", into = "SavedState")]
pub struct LoaderState {
    /// The sampler: length, global batch size, mode, seed, rank, world.
    pub sampler: SamplerConfig,
    /// The next step to be delivered.
    pub step: u64,
    /// Fingerprint of the streams (names, dtypes, shapes, length): a state only restores onto
    /// the data it was saved from.
    pub fingerprint: u64,
    /// Which records each step reads: the endless sampler, a finite pass, a mixture, a packed
    /// stream (with where its packing stands at `step`) or length buckets.
    pub order: Order,
}

impl LoaderState {
    /// This state moved onto a global batch of `batch_size`, resuming from the samples consumed:
    /// the rule when a run restarts with another global batch (elastic resume with the same
    /// global batch needs nothing: [`shard`](LoaderBuilder::shard) the same state onto any world
    /// size). Cyclic mode (and finite passes) keep the cycle (pass) and its keyed permutation,
    /// which does not depend on the batch: the consumed part of the cycle is `f = (step mod S) *
    /// B` positions and the new step is the cycle's first plus `floor(f / B')`, so nothing is
    /// lost and at most `B' - 1` samples of the cycle are seen again (and the cycle's dropped
    /// remainder becomes `N mod B'`). Sequential, IID and mixture streams are streams of global
    /// rows: the new step is `floor(step * B / B')`, the same rule. A packed stream's cursor
    /// says where it stands whatever the rows per step: its step stays.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a batch of 0, one not divisible by the world, one larger
    /// than the data in cyclic mode, or a bucketed stream (its windows are made of batches).
    pub fn rebatched(&self, batch_size: u32) -> Result<LoaderState> {
        let (b, b2) = (u64::from(self.sampler.batch_size), u64::from(batch_size));
        if b2 == 0 || !batch_size.is_multiple_of(self.sampler.world.max(1)) {
            return Err(Error::InvalidArgument(format!(
                "a global batch of {batch_size} over {} ranks",
                self.sampler.world
            )));
        }
        if let Order::Bucketed(_) = self.order {
            return Err(Error::InvalidArgument(
                "a bucketed stream's windows are made of its batches: it restarts, not rebatches".into(),
            ));
        }
        let within = |spc_old: u64, spc_new: u64| -> Result<u64> {
            if spc_old == 0 || spc_new == 0 {
                return Err(Error::InvalidArgument(format!(
                    "a global batch of {batch_size} leaves no whole batch in {} records",
                    self.sampler.len
                )));
            }
            let (cycle, f) = (self.step / spc_old, (self.step % spc_old) * b);
            Ok(cycle * spc_new + f / b2)
        };
        let mut out = self.clone();
        out.sampler.batch_size = batch_size;
        out.step = match (&self.order, self.sampler.mode) {
            (Order::Packed(_), _) => self.step,
            (Order::Pass(p), _) => {
                let new = PassConfig { batch_size, ..p.clone() };
                let step = within(p.build()?.steps(), new.build()?.steps())?;
                out.order = Order::Pass(new);
                step
            }
            (Order::Endless, SamplerMode::Cyclic) => {
                let n = u64::from(self.sampler.len);
                within(n / b.max(1), n / b2)?
            }
            (Order::Endless, SamplerMode::BlockCyclic { block, .. }) => {
                // A cycle is the records of its whole blocks, whatever the batch.
                let n = u64::from(self.sampler.len / block.max(1) * block);
                within(n / b.max(1), n / b2)?
            }
            (Order::Endless | Order::Mixture(_) | Order::Bucketed(_), _) => self.step.saturating_mul(b) / b2,
        };
        Ok(out)
    }
}

/// Finite passes over the data: every record exactly once per pass (one pass by default), then
/// the loader ends; see [`LoaderBuilder::finite`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finite {
    /// In a keyed shuffle of the builder's seed and the epoch, or in record order.
    pub shuffle: bool,
    /// Drop the last batch of each pass when it is partial.
    pub drop_last: bool,
    /// The first pass's epoch: each has its own shuffle.
    pub epoch: u64,
    /// Passes run back to back, the prefetch threads going on across the boundary; `None`:
    /// without end (exactly-once training epochs: [`DataLoader::steps_per_epoch`] steps each).
    pub epochs: Option<u64>,
}

impl Default for Finite {
    fn default() -> Self {
        Finite { shuffle: false, drop_last: false, epoch: 0, epochs: Some(1) }
    }
}

impl Finite {
    /// Every record once, in record order, the last batch partial: an evaluation pass.
    pub fn ordered() -> Finite {
        Finite::default()
    }

    /// Every record once, in a shuffle of the builder's seed and the epoch.
    pub fn shuffled() -> Finite {
        Finite { shuffle: true, ..Finite::default() }
    }

    /// `n` passes back to back (epochs `epoch..epoch + n`); `None`: without end.
    pub fn epochs(mut self, n: Option<u64>) -> Finite {
        self.epochs = n;
        self
    }

    /// Drop the last batch when it is partial.
    pub fn drop_last(mut self, yes: bool) -> Finite {
        self.drop_last = yes;
        self
    }

    /// The epoch (its own shuffle).
    pub fn epoch(mut self, epoch: u64) -> Finite {
        self.epoch = epoch;
        self
    }
}

/// The data of one loader stream: a dense source, or a ragged one with how it is padded (or
/// not: its batches then carry [`RaggedArray`](crate::RaggedArray)s).
#[derive(Debug, Clone)]
pub enum StreamSource {
    /// Fixed-shape records.
    Dense(DenseSource),
    /// Variable-length records, padded on the prefetch threads when a [`Pad`] is given.
    Ragged(RaggedSource, Option<Pad>),
}

impl StreamSource {
    /// Records in the stream.
    pub fn len(&self) -> usize {
        match self {
            StreamSource::Dense(d) => d.len(),
            StreamSource::Ragged(r, _) => r.len(),
        }
    }

    /// True when the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            StreamSource::Dense(d) => d.dtype(),
            StreamSource::Ragged(r, _) => r.dtype(),
        }
    }

    /// The item shape (dense) or row shape (ragged).
    pub fn shape(&self) -> &[usize] {
        match self {
            StreamSource::Dense(d) => d.item_shape(),
            StreamSource::Ragged(r, _) => r.row_shape(),
        }
    }

    fn select(&self, s: &Selection) -> Result<StreamSource> {
        Ok(match self {
            StreamSource::Dense(d) => StreamSource::Dense(d.select(s)?),
            StreamSource::Ragged(r, p) => StreamSource::Ragged(r.select(s)?, *p),
        })
    }
}

/// Builds a [`DataLoader`]; see [`DataLoader::builder`].
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LoaderBuilder {
    streams: Vec<(String, StreamSource)>,
    selections: Vec<Selection>,
    finite: Option<Finite>,
    batch_size: u32,
    mode: SamplerMode,
    seed: u64,
    rank: u32,
    world: u32,
    start_step: u64,
    state: Option<LoaderState>,
    threads: usize,
    prefetch: usize,
    /// The weights of a mixture ([`LoaderBuilder::mixture`]) and its sources' lengths.
    mixture: Option<(Vec<f64>, Vec<u32>)>,
    /// The packed stream ([`LoaderBuilder::pack`]).
    pack: Option<(String, Pack)>,
    /// Length bucketing ([`LoaderBuilder::bucket`]).
    bucket: Option<BucketConfig>,
    /// How `open_stream` reaches `s3://` URLs ([`LoaderBuilder::remote_options`]).
    #[cfg(feature = "remote")]
    remote: Option<crate::remote::RemoteOptions>,
}

impl std::fmt::Debug for LoaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("streams", &self.streams.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("selections", &self.selections.iter().map(Selection::len).collect::<Vec<_>>())
            .field("finite", &self.finite)
            .field("batch_size", &self.batch_size)
            .field("mode", &self.mode)
            .field("seed", &self.seed)
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("start_step", &self.start_step)
            .field("threads", &self.threads)
            .field("prefetch", &self.prefetch)
            .field("mixture", &self.mixture)
            .field("pack", &self.pack)
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl Default for LoaderBuilder {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        LoaderBuilder {
            streams: Vec::new(),
            selections: Vec::new(),
            finite: None,
            batch_size: 32,
            mode: SamplerMode::Cyclic,
            seed: 0,
            rank: 0,
            world: 1,
            start_step: 0,
            state: None,
            threads: cores.clamp(1, 8),
            prefetch: 2,
            mixture: None,
            pack: None,
            bucket: None,
            #[cfg(feature = "remote")]
            remote: None,
        }
    }
}

impl LoaderBuilder {
    /// A builder with the defaults (what [`DataLoader::builder`] gives).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a named dense stream.
    pub fn stream(mut self, name: impl Into<String>, source: DenseSource) -> Self {
        self.streams.push((name.into(), StreamSource::Dense(source)));
        self
    }

    /// Adds a named ragged stream; its batches carry a [`RaggedArray`](crate::RaggedArray)
    /// ([`Batch::get_ragged`]) unless [`LoaderBuilder::pad`] makes them dense.
    pub fn ragged_stream(mut self, name: impl Into<String>, source: RaggedSource) -> Self {
        self.streams.push((name.into(), StreamSource::Ragged(source, None)));
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
    /// [`LoaderBuilder::remote_options`].
    ///
    /// # Errors
    /// As [`DenseSource::open`] / [`RaggedSource::open`].
    pub fn open_stream(self, name: impl Into<String>, dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        #[cfg(feature = "remote")]
        if crate::remote::is_remote(dir) {
            let url = dir.to_string_lossy();
            let options = self.remote.clone().unwrap_or_default();
            // The kind is in the schema, fetched with the store: dense first, else ragged.
            return Ok(match DenseSource::open_remote(&url, options.clone()) {
                Ok(d) => self.stream(name, d),
                Err(Error::Schema { .. }) => {
                    self.ragged_stream(name, RaggedSource::open_remote(&url, options)?)
                }
                Err(e) => return Err(e),
            });
        }
        Ok(match Schema::read(dir)?.kind {
            Kind::Dense => self.stream(name, DenseSource::open(dir)?),
            Kind::Ragged => self.ragged_stream(name, RaggedSource::open(dir)?),
        })
    }

    /// Pads the ragged stream `name` on the prefetch threads: the batch then holds `name` as a
    /// dense `(B, L, *row_shape)` array, `{name}_lengths` (`i64`, `(B,)`) and `{name}_mask`
    /// (`u8`, `(B, L)`: 1 for a real row), and no ragged `name`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no ragged stream `name` (the message lists the
    /// streams there are).
    pub fn pad(mut self, name: &str, pad: Pad) -> Result<Self> {
        let names = self.stream_names();
        match self.streams.iter_mut().find(|(n, _)| n == name) {
            Some((_, StreamSource::Ragged(_, p))) => *p = Some(pad),
            Some(_) => {
                return Err(Error::InvalidArgument(format!(
                    "stream {name:?} is dense; only a ragged stream is padded"
                )));
            }
            None => {
                return Err(Error::InvalidArgument(format!(
                    "no stream {name:?} to pad; the streams are {names}"
                )));
            }
        }
        Ok(self)
    }

    fn stream_names(&self) -> String {
        let names: Vec<String> = self.streams.iter().map(|(n, _)| format!("{n:?}")).collect();
        if names.is_empty() { "none yet".into() } else { names.join(", ") }
    }

    /// A builder over a weighted mixture of `sources`: each a builder with streams of the same
    /// names, dtypes and shapes as the others (its own selections applied), each with a
    /// non-negative weight. Row `r` of step `s` reads a source and a record chosen from
    /// (seed, `s`, `r`) alone: the sources are dealt rows in proportion to their weights (within
    /// `k + 1 + W / 2^16` rows over any `W` consecutive global rows, for `k` sources), and each
    /// cycles through its own keyed shuffles independently ([`Mixture`](crate::Mixture)). Batch
    /// size, seed, sharding, threads and resume are set on the returned builder as on any other;
    /// the sources' own such settings are not used. A rank's rows arrive grouped by source.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no sources, a source without streams or with streams of
    /// different lengths, a negative, NaN or infinite weight, all weights zero, streams whose
    /// names differ between sources, or a ragged stream padded differently in two sources;
    /// [`Error::Schema`] naming the first source whose stream has another dtype or shape.
    pub fn mixture(sources: Vec<(f64, LoaderBuilder)>) -> Result<LoaderBuilder> {
        if sources.is_empty() {
            return Err(Error::InvalidArgument("a mixture needs at least one source".into()));
        }
        let mut weights = Vec::with_capacity(sources.len());
        let mut lens = Vec::with_capacity(sources.len());
        let mut per_source: Vec<Vec<(String, StreamSource)>> = Vec::with_capacity(sources.len());
        for (j, (w, b)) in sources.into_iter().enumerate() {
            if !w.is_finite() || w < 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "mixture weight {j} is {w}: weights are finite and non-negative"
                )));
            }
            let mut streams = b.selected_streams()?;
            let Some((_, first)) = streams.first() else {
                return Err(Error::InvalidArgument(format!("mixture source {j} has no streams")));
            };
            let len = first.len();
            if let Some((name, s)) = streams.iter().find(|(_, s)| s.len() != len) {
                return Err(Error::InvalidArgument(format!(
                    "mixture source {j}: stream {name:?} has {} records, {:?} has {len}",
                    s.len(),
                    streams[0].0
                )));
            }
            streams.sort_by(|a, b| a.0.cmp(&b.0));
            if let Some(first) = per_source.first() {
                let names =
                    |v: &[(String, StreamSource)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
                if names(first) != names(&streams) {
                    return Err(Error::InvalidArgument(format!(
                        "mixture source {j} has streams {:?}, source 0 {:?}",
                        names(&streams),
                        names(first)
                    )));
                }
            }
            weights.push(w);
            lens.push(u32::try_from(len).map_err(|_| {
                Error::InvalidArgument(format!("mixture source {j} has more records than u32 indices"))
            })?);
            per_source.push(streams);
        }
        if weights.iter().all(|&w| w == 0.0) {
            return Err(Error::InvalidArgument("every mixture weight is zero".into()));
        }
        let mut out = LoaderBuilder::default();
        for (k, (name, first)) in per_source[0].iter().enumerate() {
            let column = per_source.iter().map(|s| s[k].1.clone());
            let stream = match first {
                StreamSource::Dense(_) => {
                    let parts = column
                        .map(|s| match s {
                            StreamSource::Dense(d) => Ok(d),
                            StreamSource::Ragged(..) => Err(Error::InvalidArgument(format!(
                                "stream {name:?} is dense in one source, ragged in another"
                            ))),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    StreamSource::Dense(DenseSource::concat(parts)?)
                }
                StreamSource::Ragged(_, pad) => {
                    let parts = column
                        .map(|s| match s {
                            StreamSource::Ragged(r, p) if p == *pad => Ok(r),
                            StreamSource::Ragged(..) => Err(Error::InvalidArgument(format!(
                                "ragged stream {name:?} is padded differently in two sources"
                            ))),
                            StreamSource::Dense(_) => Err(Error::InvalidArgument(format!(
                                "stream {name:?} is ragged in one source, dense in another"
                            ))),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    StreamSource::Ragged(RaggedSource::concat(parts)?, *pad)
                }
            };
            out.streams.push((name.clone(), stream));
        }
        out.mixture = Some((weights, lens));
        Ok(out)
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
    /// [`Error::InvalidArgument`] when there is no ragged, unpadded stream `name` (the message
    /// lists the streams) or `pack.length` is 0.
    pub fn pack(mut self, name: &str, pack: Pack) -> Result<Self> {
        let names = self.stream_names();
        match self.streams.iter().find(|(n, _)| n == name) {
            Some((_, StreamSource::Ragged(_, None))) if pack.length > 0 => {}
            Some((_, StreamSource::Ragged(_, None))) => {
                return Err(Error::InvalidArgument("a packed row needs at least one token".into()));
            }
            Some(_) => {
                return Err(Error::InvalidArgument(format!(
                    "stream {name:?} is dense or padded; only an unpadded ragged stream is packed"
                )));
            }
            None => {
                return Err(Error::InvalidArgument(format!(
                    "no stream {name:?} to pack; the streams are {names}"
                )));
            }
        }
        self.pack = Some((name.to_string(), pack));
        Ok(self)
    }

    /// Length bucketing for padded ragged batches: within each window of `window` steps, the
    /// records of the sampler's global batches are sorted by the length of the ragged stream
    /// `name` and cut into `window` batches again, served in a keyed order, so a padded batch
    /// holds records of similar lengths. Which records a window holds is the sampler's (every
    /// record once per cycle, in cyclic mode); batches are still a pure function of (seed,
    /// step) and resume exactly, on any world size.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no ragged stream `name` (the message lists the
    /// streams) or `window` is 0.
    pub fn bucket(mut self, name: &str, window: u32) -> Result<Self> {
        let names = self.stream_names();
        match self.streams.iter().find(|(n, _)| n == name) {
            Some((_, StreamSource::Ragged(..))) if window > 0 => {}
            Some((_, StreamSource::Ragged(..))) => {
                return Err(Error::InvalidArgument("a bucketing window needs at least one step".into()));
            }
            Some(_) => {
                return Err(Error::InvalidArgument(format!(
                    "stream {name:?} is dense; buckets sort a ragged stream"
                )));
            }
            None => {
                return Err(Error::InvalidArgument(format!(
                    "no stream {name:?} to bucket by; the streams are {names}"
                )));
            }
        }
        self.bucket = Some(BucketConfig { stream: name.to_string(), window });
        Ok(self)
    }

    /// The packed stream's name and packing, if any.
    pub(super) fn packed(&self) -> Option<&(String, Pack)> {
        self.pack.as_ref()
    }

    /// The names of the ragged streams (padded or not).
    pub(super) fn ragged_names(&self) -> impl Iterator<Item = &str> {
        self.streams.iter().filter(|(_, s)| matches!(s, StreamSource::Ragged(..))).map(|(n, _)| n.as_str())
    }

    /// Reads only the records `selection` names (a split, a range, a list), in every stream:
    /// the loader's index space is the selection's (nothing is copied). A second call selects
    /// within the first.
    pub fn select(mut self, selection: Selection) -> Self {
        self.selections.push(selection);
        self
    }

    /// One finite pass ([`Finite`]) instead of the endless sampler: every record once, in
    /// order or shuffled, the last batch partial unless dropped, sharded over ranks without
    /// duplicates; the loader's iterator ends after it. [`mode`](Self::mode) is ignored.
    ///
    /// # Examples
    /// ```
    /// use loaderx_core::{DataLoader, DenseSource, Finite};
    /// let x = DenseSource::from_vec(vec![], (0..10u32).collect::<Vec<u32>>())?;
    /// let loader = DataLoader::builder().stream("x", x).batch_size(4).finite(Finite::ordered()).build()?;
    /// assert_eq!(loader.steps(), Some(3));
    /// let seen: Vec<u32> = loader
    ///     .map(|b| b.map(|b| b.get("x").unwrap().as_slice::<u32>().unwrap().to_vec()))
    ///     .collect::<Result<Vec<_>, _>>()?
    ///     .concat();
    /// assert_eq!(seen, (0..10).collect::<Vec<u32>>(), "each record once, the last batch partial");
    /// # Ok::<(), loaderx_core::Error>(())
    /// ```
    pub fn finite(mut self, finite: Finite) -> Self {
        self.finite = Some(finite);
        self
    }

    /// Global batch size, summed over ranks (default 32).
    pub fn batch_size(mut self, n: u32) -> Self {
        self.batch_size = n;
        self
    }

    /// Sampling mode (default cyclic: shuffled without replacement).
    pub fn mode(mut self, mode: SamplerMode) -> Self {
        self.mode = mode;
        self
    }

    /// Seed of the sampler and of the per-row RNGs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// This process's rank and the number of ranks sharing each global batch.
    pub fn shard(mut self, rank: u32, world: u32) -> Self {
        self.rank = rank;
        self.world = world;
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
    /// As [`resolve`](Self::resolve).
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
        Ok(fingerprint(&bytes))
    }

    /// The first step delivered (resume).
    pub fn start_step(mut self, step: u64) -> Self {
        self.start_step = step;
        self
    }

    /// Restores a saved state: sampler config and step. The streams must be the ones it was
    /// saved from (checked by fingerprint at `build`).
    pub fn state(mut self, state: LoaderState) -> Self {
        self.state = Some(state);
        self
    }

    /// Prefetch threads (default: the number of cores, at most 8).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    /// Batches per thread that may be ready ahead of the consumer (default 2): the loader claims
    /// at most `threads * (depth + 1)` steps ahead of the one the consumer waits for. Small,
    /// fast batches (tens of microseconds each) gain from 4–8, which absorbs the consumer's
    /// wake-ups; large ones cost `depth` batches of memory per thread.
    pub fn prefetch(mut self, depth: usize) -> Self {
        self.prefetch = depth.max(1);
        self
    }

    /// Builds a loader delivering [`Batch`]es.
    ///
    /// # Errors
    /// As [`LoaderBuilder::build_with`].
    pub fn build(self) -> Result<DataLoader<Batch>> {
        self.build_with(|b: Batch| Ok::<_, BoxError>(b))
    }

    /// [`LoaderBuilder::build_with`] for a transform whose error is any boxed error: `?` works on
    /// every error type inside it, and `Ok(x)` needs no type annotation.
    ///
    /// # Errors
    /// As [`LoaderBuilder::build_with`].
    ///
    /// # Examples
    /// ```
    /// use loaderx_core::{DataLoader, DenseSource};
    /// let x = DenseSource::from_vec(vec![2], vec![1f32; 40])?;
    /// let mut loader = DataLoader::builder().stream("x", x).batch_size(4).build_map(|mut b| {
    ///     let x = b.take("x").ok_or("no stream x")?.into_vec::<f32>()?;
    ///     Ok(x.iter().sum::<f32>())
    /// })?;
    /// assert_eq!(loader.next_batch()?, 8.0);
    /// # Ok::<(), loaderx_core::Error>(())
    /// ```
    pub fn build_map<O, F>(self, transform: F) -> Result<DataLoader<O>>
    where
        O: Send + 'static,
        F: Fn(Batch) -> std::result::Result<O, BoxError> + Send + Sync + 'static,
    {
        self.build_with(transform)
    }

    /// Builds a loader whose prefetch threads run `transform` (the collate step) on each batch.
    ///
    /// # Errors
    /// As [`LoaderBuilder::resolve`], and [`Error::LoaderStopped`] when a thread cannot start.
    pub fn build_with<O, E, F>(self, transform: F) -> Result<DataLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Batch) -> std::result::Result<O, E> + Send + Sync + 'static,
    {
        let transform: Transform<O> = Arc::new(move |b| transform(b).map_err(Into::into));
        DataLoader::start(self, transform)
    }

    /// The state a loader built from this builder starts in: the streams checked (at least one,
    /// the same length, distinct names), their [fingerprint](Self::fingerprint) taken, and
    /// [`plan`](Self::plan) applied. Adapters that run their own producers over these streams
    /// start from it without building a loader.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no streams, streams of different lengths or with the same
    /// name, more records than `u32` indices, invalid sampler parameters, or a restored state
    /// whose fingerprint does not match the streams.
    pub fn resolve(&self) -> Result<LoaderState> {
        let streams = self.selected_streams()?;
        let Some((_, first)) = streams.first() else {
            return Err(Error::InvalidArgument("a data loader needs at least one stream".into()));
        };
        let len = first.len();
        if let Some((name, s)) = streams.iter().find(|(_, s)| s.len() != len) {
            return Err(Error::InvalidArgument(format!(
                "stream {name:?} has {} records but stream {:?} has {len}; all streams must have the same length",
                s.len(),
                streams[0].0
            )));
        }
        let mut names: Vec<&str> = self.streams.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!("two streams are named {:?}", w[0])));
        }
        let len =
            u32::try_from(len).map_err(|_| Error::InvalidArgument("more records than u32 indices".into()))?;
        self.plan(len, fingerprint_of(&streams))
    }

    /// The streams with the [selection](Self::select) applied.
    fn selected_streams(&self) -> Result<Vec<(String, StreamSource)>> {
        let mut streams = self.streams.clone();
        for sel in &self.selections {
            streams = streams.into_iter().map(|(n, s)| Ok((n, s.select(sel)?))).collect::<Result<_>>()?;
        }
        Ok(streams)
    }

    /// Where a loader over `len` records of data with `fingerprint` starts: the restored
    /// [`state`](Self::state) when there is one, else the builder's sampler settings at its
    /// [`start_step`](Self::start_step). Adapters that feed the loader's sampler from their own
    /// data (a framework's dataset) start from this too.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a restored state belongs to other data (another
    /// fingerprint or length) or the sampler parameters are invalid.
    pub fn plan(&self, len: u32, fingerprint: u64) -> Result<LoaderState> {
        let state = match &self.state {
            // A restored state's order is its own (a pass is not compared with the builder's
            // `finite`); a mixture, packing or bucketing must be the builder's.
            Some(state)
                if state.fingerprint != fingerprint
                    || state.sampler.len != len
                    || state.order.pass().is_some_and(|p| p.len != len)
                    || state.order.mixture().map(|m| &m.lens) != self.mixture.as_ref().map(|(_, l)| l)
                    || state.order.pack().map(|p| p.pack) != self.pack.as_ref().map(|(_, p)| *p)
                    || state.order.bucket() != self.bucket.as_ref() =>
            {
                return Err(Error::InvalidArgument(
                    "the saved loader state belongs to other data (names, dtypes, shapes or length differ)"
                        .into(),
                ));
            }
            Some(state) => state.clone(),
            None => LoaderState {
                sampler: SamplerConfig {
                    len,
                    batch_size: self.batch_size,
                    mode: self.mode,
                    seed: self.seed,
                    rank: self.rank,
                    world: self.world,
                },
                step: self.start_step,
                fingerprint,
                order: self.order(len)?,
            },
        };
        match &state.order {
            Order::Packed(_) => {
                let (b, w, r) = (state.sampler.batch_size, state.sampler.world, state.sampler.rank);
                if self.streams.len() != 1 {
                    return Err(Error::InvalidArgument(PACKED_ALONE.into()));
                }
                if b == 0 || w == 0 || r >= w || !b.is_multiple_of(w) {
                    return Err(Error::InvalidArgument(format!(
                        "{b} rows over rank {r} of world {w}: the rows must be positive and divisible by the world"
                    )));
                }
            }
            Order::Mixture(_) if !self.selections.is_empty() => {
                return Err(Error::InvalidArgument(MIXTURE_WHOLE.into()));
            }
            Order::Mixture(m) => drop(m.build(&state.sampler)?),
            // A pass has no sampler of its own; its config is checked instead (a batch larger
            // than the data is fine in a pass: one partial batch).
            Order::Pass(p) => drop(p.build()?),
            Order::Endless | Order::Bucketed(_) => drop(state.sampler.build()?),
        }
        Ok(state)
    }

    /// The order the builder's settings ask for over `len` records, one of them at most: its
    /// [`finite`](Self::finite) pass, [`mixture`](Self::mixture), [`pack`](Self::pack) or
    /// [`bucket`](Self::bucket) (the setters may be called in any order, so a combination is
    /// refused here).
    fn order(&self, len: u32) -> Result<Order> {
        let pass = self.finite.map(|f| PassConfig {
            len,
            batch_size: self.batch_size,
            shuffle: f.shuffle,
            seed: self.seed,
            epoch: f.epoch,
            epochs: f.epochs,
            drop_last: f.drop_last,
            rank: self.rank,
            world: self.world,
        });
        let mixture = self
            .mixture
            .as_ref()
            .map(|(weights, lens)| MixtureConfig { weights: weights.clone(), lens: lens.clone() });
        let pack = self.pack.as_ref().map(|(_, p)| PackConfig { pack: *p, cursor: Default::default() });
        Ok(match (pass, mixture, pack, self.bucket.clone()) {
            (None, None, None, None) => Order::Endless,
            (None, None, None, Some(b)) => Order::Bucketed(b),
            (_, _, _, Some(_)) => {
                return Err(Error::InvalidArgument(
                    "length bucketing serves the endless sampler's batches: not with a finite pass, a mixture or packing"
                        .into(),
                ));
            }
            (None, None, Some(p), None) => Order::Packed(p),
            (_, _, Some(_), None) => return Err(Error::InvalidArgument(PACKED_ALONE.into())),
            (None, Some(m), None, None) => Order::Mixture(m),
            (Some(_), Some(_), None, None) => return Err(Error::InvalidArgument(MIXTURE_WHOLE.into())),
            (Some(p), None, None, None) => Order::Pass(p),
        })
    }

    /// The number of prefetch threads a built loader runs.
    pub fn thread_count(&self) -> usize {
        self.threads
    }

    /// Batches per prefetch thread that may be ready ahead of the consumer ([`Self::prefetch`]).
    pub fn prefetch_depth(&self) -> usize {
        self.prefetch
    }

    /// The fingerprint of the streams (names, dtypes, item shapes, lengths) that a
    /// [`LoaderState`] carries: ranks can compare it at start-up, and a state restores only onto
    /// data with the same one.
    pub fn fingerprint(&self) -> u64 {
        match self.selected_streams() {
            Ok(streams) => fingerprint_of(&streams),
            Err(_) => fingerprint_of(&self.streams),
        }
    }

    /// The streams, the selection applied.
    pub(super) fn into_streams(self) -> Result<Vec<(String, StreamSource)>> {
        self.selected_streams()
    }
}

/// Why a packed stream stands alone.
const PACKED_ALONE: &str = "a packed stream is the loader's only stream, endless and not mixed";
/// Why a mixture is endless and unselected.
const MIXTURE_WHOLE: &str = "a mixture is endless and reads its sources whole: select within the sources, and \
                             evaluate each source with its own finite loader";

/// The fingerprint of streams (names, kinds, dtypes, shapes, lengths).
fn fingerprint_of(streams: &[(String, StreamSource)]) -> u64 {
    let mut text = String::new();
    for (name, s) in streams {
        match s {
            // Dense streams' text is the same as before ragged streams and selections existed, so
            // saved states still restore.
            StreamSource::Dense(d) => {
                text.push_str(&format!("{name}:{}:{:?}:{};", d.dtype(), d.item_shape(), d.len()))
            }
            StreamSource::Ragged(r, p) => text.push_str(&format!(
                "{name}:ragged:{}:{:?}:{}:{:?};",
                r.dtype(),
                r.row_shape(),
                r.len(),
                p.map(|p| p.length)
            )),
        }
    }
    fingerprint(text.as_bytes())
}
