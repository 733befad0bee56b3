//! The endless, step-based [`DataLoader`].
//!
//! There are no epochs and no final partial batch: step `s` is a pure function of the sampler
//! config and `s`, so resuming is starting at step `s`. Each step gathers every named stream at
//! the same indices (record `i` of every stream lands in the same row), runs the transform on a
//! prefetch thread, and is delivered in step order whichever thread finishes first.
//!
//! Prefetch threads claim the next step from a shared counter, so a thread that is slowed down
//! (sharing its core with the consumer, say) holds up only its own step while the others take
//! the rest; finished steps wait in a reorder window until the consumer reaches them. At most
//! `threads * (prefetch + 1)` steps are claimed and not yet delivered.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use crate::dataset::DenseSource;
use crate::sampler::{SampleRng, Sampler, SamplerConfig, SamplerMode, sample_seed};
use crate::{ArrayData, DType, DenseArray, Error, Result};

/// One step's data: every stream gathered at the same indices.
#[derive(Debug)]
pub struct Batch {
    step: u64,
    seed: u64,
    indices: Vec<u32>,
    streams: BTreeMap<String, DenseArray>,
    pool: Option<Arc<Pool>>,
}

impl Batch {
    /// The global step this batch is.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The record indices of its rows (this rank's stripe of the global batch).
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// True for a batch of no rows (never produced by the loader).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    /// The stream `name`, shaped `(B, *item_shape)`.
    pub fn get(&self, name: &str) -> Option<&DenseArray> {
        self.streams.get(name)
    }

    /// Takes the stream `name` out (its buffer then belongs to the caller, e.g. a tensor).
    pub fn take(&mut self, name: &str) -> Option<DenseArray> {
        self.streams.remove(name)
    }

    /// Puts a stream in (a transform's output, say).
    pub fn insert(&mut self, name: impl Into<String>, array: DenseArray) {
        self.streams.insert(name.into(), array);
    }

    /// Stream names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.streams.keys().map(String::as_str)
    }

    /// Takes every stream out.
    pub fn into_streams(mut self) -> BTreeMap<String, DenseArray> {
        std::mem::take(&mut self.streams)
    }

    /// A deterministic RNG for row `position` of this batch, seeded from (seed, step, position):
    /// an augmentation drawn from it replays exactly when the run resumes.
    pub fn rng(&self, position: u32) -> SampleRng {
        SampleRng::new(sample_seed(self.seed, self.step, position))
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        // Streams nobody took go back to the pool: steady state allocates no fresh pages.
        if let Some(pool) = &self.pool {
            for (name, array) in std::mem::take(&mut self.streams) {
                pool.put(&name, array.into_parts().1);
            }
        }
    }
}

/// Recycled stream buffers, per stream name.
#[derive(Debug, Default)]
struct Pool {
    free: Mutex<BTreeMap<String, Vec<ArrayData>>>,
    cap: usize,
    fresh: std::sync::atomic::AtomicUsize,
}

impl Pool {
    fn get(&self, name: &str, dtype: DType) -> ArrayData {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        free.get_mut(name).and_then(Vec::pop).unwrap_or_else(|| {
            self.fresh.fetch_add(1, Ordering::Relaxed);
            ArrayData::zeros(dtype, 0)
        })
    }

    fn put(&self, name: &str, data: ArrayData) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = free.get_mut(name)
            && list.len() < self.cap
        {
            list.push(data);
        }
    }
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

type Transform<O> = Arc<dyn Fn(Batch) -> std::result::Result<O, BoxError> + Send + Sync>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
    /// [`Error::InvalidArgument`] for no streams, streams of different lengths, invalid sampler
    /// parameters, or a restored state whose fingerprint does not match the streams.
    pub fn build_with<O, E, F>(self, transform: F) -> Result<DataLoader<O>>
    where
        O: Send + 'static,
        E: Into<BoxError>,
        F: Fn(Batch) -> std::result::Result<O, E> + Send + Sync + 'static,
    {
        let transform: Transform<O> = Arc::new(move |b| transform(b).map_err(Into::into));
        DataLoader::start(self, transform)
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

    fn fingerprint(&self) -> u64 {
        let mut text = String::new();
        for (name, s) in &self.streams {
            text.push_str(&format!("{name}:{}:{:?}:{};", s.dtype(), s.item_shape(), s.len()));
        }
        // FNV-1a, 64-bit.
        text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    }
}

/// The steps between the prefetch threads and the consumer.
struct Window<O> {
    state: Mutex<WindowState<O>>,
    /// The consumer waits here for its next step.
    ready: Condvar,
    /// Prefetch threads wait here for room in the window.
    room: Condvar,
}

struct WindowState<O> {
    /// The next step a prefetch thread claims.
    claim: u64,
    /// The next step the consumer takes.
    deliver: u64,
    /// How far `claim` may run ahead of `deliver`.
    size: u64,
    /// Finished steps `deliver..`, `None` while one is being produced.
    slots: VecDeque<Option<Result<O>>>,
    consumer_waiting: bool,
    producers_waiting: usize,
    /// The loader is being dropped.
    stop: bool,
    /// Prefetch threads still running.
    live: usize,
}

impl<O> Window<O> {
    fn lock(&self) -> MutexGuard<'_, WindowState<O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims the next step, waiting for room; `None` once the loader stops.
    fn claim(&self) -> Option<u64> {
        let mut st = self.lock();
        while !st.stop && st.claim >= st.deliver.saturating_add(st.size) {
            st.producers_waiting += 1;
            st = self.room.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.producers_waiting -= 1;
        }
        if st.stop {
            return None;
        }
        let step = st.claim;
        // Past the last step there is nothing to claim: the thread ends.
        st.claim = st.claim.checked_add(1)?;
        st.slots.push_back(None);
        Some(step)
    }

    /// Hands in a claimed step's result, waking the consumer if it waits for this step.
    fn finish(&self, step: u64, out: Result<O>) {
        let mut st = self.lock();
        if st.stop {
            return;
        }
        let at = (step - st.deliver) as usize;
        st.slots[at] = Some(out);
        let wake = at == 0 && st.consumer_waiting;
        // Woken after the unlock, so the consumer does not wake only to wait for the lock.
        drop(st);
        if wake {
            self.ready.notify_one();
        }
    }

    /// The next step's result, in order, waiting for it; `Err` (and no step delivered) when no
    /// prefetch thread is left to produce it.
    fn take(&self) -> Result<Result<O>> {
        let mut st = self.lock();
        loop {
            if let Some(Some(_)) = st.slots.front() {
                let out = st.slots.pop_front().flatten().expect("checked just above");
                st.deliver += 1;
                let wake = st.producers_waiting > 0;
                drop(st);
                if wake {
                    self.room.notify_one();
                }
                return Ok(out);
            }
            if st.live == 0 {
                return Err(Error::LoaderStopped("no prefetch thread is running".into()));
            }
            st.consumer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.consumer_waiting = false;
        }
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.room.notify_all();
        self.ready.notify_all();
    }
}

/// Counts a prefetch thread out when it ends. One that unwinds (a panic outside the transform,
/// which is caught) hands in an error for the step it was producing, so the consumer gets that
/// step as an error and goes on with the others' steps instead of waiting for it.
struct DeathWatch<'a, O> {
    window: &'a Window<O>,
    /// The step being produced.
    step: Option<u64>,
}

impl<O> Drop for DeathWatch<'_, O> {
    fn drop(&mut self) {
        let mut st = self.window.lock();
        st.live -= 1;
        if let Some(step) = self.step
            && std::thread::panicking()
            && !st.stop
        {
            let at = (step - st.deliver) as usize;
            st.slots[at] = Some(Err(Error::LoaderStopped(format!(
                "the prefetch thread producing step {step} panicked"
            ))));
        }
        drop(st);
        self.window.ready.notify_all();
    }
}

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
    window: Arc<Window<O>>,
    workers: Vec<JoinHandle<()>>,
    step: u64,
    sampler: Sampler,
    fingerprint: u64,
    streams: Vec<(String, DType, Vec<usize>)>,
    pool: Arc<Pool>,
}

impl<O> std::fmt::Debug for DataLoader<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("step", &self.step)
            .field("sampler", &self.sampler)
            .field("threads", &self.workers.len())
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
    fn start(b: LoaderBuilder, transform: Transform<O>) -> Result<DataLoader<O>> {
        let Some((_, first)) = b.streams.first() else {
            return Err(Error::InvalidArgument("a data loader needs at least one stream".into()));
        };
        let len = first.len();
        if let Some((name, s)) = b.streams.iter().find(|(_, s)| s.len() != len) {
            return Err(Error::InvalidArgument(format!(
                "stream {name:?} has {} records but stream {:?} has {len}; all streams must have the same length",
                s.len(),
                b.streams[0].0
            )));
        }
        let mut names: Vec<&str> = b.streams.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::InvalidArgument("two streams have the same name".into()));
        }
        let len =
            u32::try_from(len).map_err(|_| Error::InvalidArgument("more records than u32 indices".into()))?;
        let fingerprint = b.fingerprint();
        let LoaderState { sampler: config, step, .. } = b.plan(len, fingerprint)?;
        let sampler = config.build()?;
        let threads = b.threads;
        let window = Arc::new(Window {
            state: Mutex::new(WindowState {
                claim: step,
                deliver: step,
                size: threads.saturating_mul(b.prefetch.saturating_add(1)) as u64,
                slots: VecDeque::new(),
                consumer_waiting: false,
                producers_waiting: 0,
                stop: false,
                live: threads,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
        });
        let pool = Arc::new(Pool {
            free: Mutex::new(b.streams.iter().map(|(n, _)| (n.clone(), Vec::new())).collect()),
            cap: threads.saturating_mul(b.prefetch.saturating_add(2)),
            fresh: Default::default(),
        });
        let streams: Arc<Vec<(String, DenseSource)>> = Arc::new(b.streams);
        let meta = streams.iter().map(|(n, s)| (n.clone(), s.dtype(), s.item_shape().to_vec())).collect();
        // Built before the threads start, so an early return stops the ones already running.
        let mut loader =
            DataLoader { window, workers: Vec::new(), step, sampler, fingerprint, streams: meta, pool };
        for w in 0..threads {
            let job = Job {
                streams: Arc::clone(&streams),
                sampler: loader.sampler.clone(),
                transform: Arc::clone(&transform),
                pool: Arc::clone(&loader.pool),
                window: Arc::clone(&loader.window),
                threads,
            };
            let handle = std::thread::Builder::new()
                .name(format!("loaderx-prefetch-{w}"))
                .spawn(move || job.run())
                .map_err(|e| Error::LoaderStopped(format!("cannot start a prefetch thread: {e}")))?;
            loader.workers.push(handle);
        }
        Ok(loader)
    }

    /// The next batch, in step order.
    ///
    /// # Errors
    /// A gather or transform failure of this step ([`Error::Transform`] for the transform); the
    /// loader goes on with the next step afterwards. [`Error::LoaderStopped`] for a step whose
    /// prefetch thread panicked outside the transform (the loader goes on with the others), or,
    /// without consuming a step, when no prefetch thread is left.
    pub fn next_batch(&mut self) -> Result<O> {
        let out = self.window.take()?;
        self.step += 1;
        out
    }

    /// The next step to be delivered.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The state to save: restoring it resumes at the next undelivered step.
    pub fn state(&self) -> LoaderState {
        LoaderState { sampler: self.sampler.config(), step: self.step, fingerprint: self.fingerprint }
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

impl<O> Drop for DataLoader<O> {
    fn drop(&mut self) {
        self.window.stop();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

struct Job<O> {
    streams: Arc<Vec<(String, DenseSource)>>,
    sampler: Sampler,
    transform: Transform<O>,
    pool: Arc<Pool>,
    window: Arc<Window<O>>,
    threads: usize,
}

impl<O> Job<O> {
    fn run(self) {
        let mut watch = DeathWatch { window: &self.window, step: None };
        if self.threads >= rayon::current_num_threads() {
            crate::store::gather_inline();
        }
        while let Some(step) = self.window.claim() {
            watch.step = Some(step);
            let out = self.produce(step);
            self.window.finish(step, out);
            watch.step = None;
        }
    }

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
            source.gather_into(&batch.indices, &mut data)?;
            batch
                .streams
                .insert(name.clone(), DenseArray::new(source.batch_shape(batch.indices.len()), data)?);
        }
        match catch_unwind(AssertUnwindSafe(|| (self.transform)(batch))) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(Error::Transform { step, message: e.to_string() }),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "panicked".into());
                Err(Error::Transform { step, message: format!("panicked: {message}") })
            }
        }
    }
}
