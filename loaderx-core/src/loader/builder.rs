//! [`LoaderBuilder`]: what a loader reads and how; [`LoaderState`]: where it is.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::batch::Batch;
use super::data_loader::{BoxError, DataLoader, Transform};
use crate::dataset::DenseSource;
use crate::sampler::{SamplerConfig, SamplerMode};
use crate::{Error, Result};

/// The fingerprint of a description of data (64-bit FNV-1a of `bytes`): what
/// [`LoaderState::fingerprint`] holds. [`LoaderBuilder::fingerprint`] describes dense streams;
/// an adapter over other data describes it in its own words (a dataset's length, say).
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Where a loader is: plain data to save, inspect, edit (skip steps) and restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The sampler: length, global batch size, mode, seed, rank, world.
    pub sampler: SamplerConfig,
    /// The next step to be delivered.
    pub step: u64,
    /// Fingerprint of the streams (names, dtypes, shapes, length): a state only restores onto
    /// the data it was saved from.
    pub fingerprint: u64,
}

/// Builds a [`DataLoader`]; see [`DataLoader::builder`].
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LoaderBuilder {
    streams: Vec<(String, DenseSource)>,
    batch_size: u32,
    mode: SamplerMode,
    seed: u64,
    rank: u32,
    world: u32,
    start_step: u64,
    state: Option<LoaderState>,
    threads: usize,
    prefetch: usize,
}

impl std::fmt::Debug for LoaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("streams", &self.streams.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("batch_size", &self.batch_size)
            .field("mode", &self.mode)
            .field("seed", &self.seed)
            .field("rank", &self.rank)
            .field("world", &self.world)
            .field("start_step", &self.start_step)
            .field("threads", &self.threads)
            .field("prefetch", &self.prefetch)
            .finish()
    }
}

impl Default for LoaderBuilder {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        LoaderBuilder {
            streams: Vec::new(),
            batch_size: 32,
            mode: SamplerMode::Cyclic,
            seed: 0,
            rank: 0,
            world: 1,
            start_step: 0,
            state: None,
            threads: cores.clamp(1, 8),
            prefetch: 2,
        }
    }
}

impl LoaderBuilder {
    /// Adds a named dense stream.
    pub fn stream(mut self, name: impl Into<String>, source: DenseSource) -> Self {
        self.streams.push((name.into(), source));
        self
    }

    /// Opens the dense dataset in `dir` as stream `name`.
    ///
    /// # Errors
    /// As [`DenseSource::open`].
    pub fn open_stream(self, name: impl Into<String>, dir: impl AsRef<Path>) -> Result<Self> {
        Ok(self.stream(name, DenseSource::open(dir)?))
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
        let Some((_, first)) = self.streams.first() else {
            return Err(Error::InvalidArgument("a data loader needs at least one stream".into()));
        };
        let len = first.len();
        if let Some((name, s)) = self.streams.iter().find(|(_, s)| s.len() != len) {
            return Err(Error::InvalidArgument(format!(
                "stream {name:?} has {} records but stream {:?} has {len}; all streams must have the same length",
                s.len(),
                self.streams[0].0
            )));
        }
        let mut names: Vec<&str> = self.streams.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument(format!("two streams are named {:?}", w[0])));
        }
        let len =
            u32::try_from(len).map_err(|_| Error::InvalidArgument("more records than u32 indices".into()))?;
        self.plan(len, self.fingerprint())
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
            Some(state) if state.fingerprint != fingerprint || state.sampler.len != len => {
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
            },
        };
        state.sampler.build()?;
        Ok(state)
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
        let mut text = String::new();
        for (name, s) in &self.streams {
            text.push_str(&format!("{name}:{}:{:?}:{};", s.dtype(), s.item_shape(), s.len()));
        }
        fingerprint(text.as_bytes())
    }

    /// The streams added so far.
    pub(super) fn into_streams(self) -> Vec<(String, DenseSource)> {
        self.streams
    }
}
