//! [`StepLoader`]: a native burn `DataLoader<O>` driven by loaderx's endless, step-based loader.
//!
//! burn's `DataLoader` is epoch-shaped: `iter()` walks the data once. A `StepLoader` keeps one
//! global step across `iter()` calls: each `iter()` delivers the next `steps_per_epoch` steps of
//! the endless stream, in step order, so epoch `e` of a run is steps `e*S..(e+1)*S` and a run
//! resumed from a saved [`LoaderState`] continues exactly where it stopped.
//!
//! The loader starts its prefetch threads on the first `iter()` (so the copies `to_device` and
//! `slice` make cost nothing until used) and keeps them running between epochs.

mod builder;
mod recipe;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn::data::dataloader::{DataLoader as BurnDataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::DatasetError;
use burn::tensor::Device;
use loaderx_core::{LoaderState, Order, PassConfig, SamplerConfig};

pub use builder::StepLoaderBuilder;
use recipe::{Recipe, Running};

use crate::{Error, Result};

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
/// # mod loaderx { pub use loaderx_core::*; pub use loaderx_burn as burn; }
/// use burn::data::dataloader::DataLoader;
/// use loaderx::burn::StepLoaderBuilder;
/// use loaderx::{DatasetWriter, WriteOptions};
/// let dir = std::env::temp_dir().join(format!("loaderx-doc-burn-loader-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let mut w = DatasetWriter::dense::<f32>(dir.join("x"), vec![2], WriteOptions::new())?;
/// w.append(&(0..200).map(|v| v as f32).collect::<Vec<_>>())?;
/// w.finish()?;
/// let loader = StepLoaderBuilder::new()
///     .open_stream("x", dir.join("x"))
///     .batch_size(25)
///     .build()?;
/// assert_eq!(loader.num_items(), 100); // 4 steps of 25 per epoch
/// let batches: Vec<_> = loader.iter().collect::<Result<_, _>>()?;
/// assert_eq!(batches.len(), 4);
/// assert_eq!(batches[0].get("x").unwrap().shape().as_slice(), &[25, 2]);
/// assert_eq!(loader.state().step, 4); // the next iter() goes on with step 4
/// # std::fs::remove_dir_all(&dir)?;
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
        checkpoint: Option<usize>,
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
        let step = match checkpoint {
            None => state.step,
            Some(epoch) if state.step != 0 => {
                return Err(Error::Core(loaderx_core::Error::Config {
                    what: "checkpoint",
                    reason: format!(
                        "checkpoint({epoch}) beside a restored state or a start step (step {}): give one of them",
                        state.step
                    ),
                }));
            }
            Some(epoch) => {
                u64::try_from(epoch).ok().and_then(|e| e.checked_mul(steps_per_epoch)).ok_or_else(|| {
                    Error::Core(loaderx_core::Error::Config {
                        what: "checkpoint",
                        reason: format!("epoch {epoch} of {steps_per_epoch} steps is past a u64 step"),
                    })
                })?
            }
        };
        Ok(StepLoader {
            recipe,
            config: state.sampler,
            order: Mutex::new(state.order),
            fingerprint: state.fingerprint,
            steps_per_epoch,
            device,
            next_step: Arc::new(AtomicU64::new(step)),
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
