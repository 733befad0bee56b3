//! What a [`StepLoader`](super::StepLoader) runs: a recipe (the core loader's streams, or a burn
//! dataset and batcher) that starts a producer of consecutive steps, again for every
//! `to_device` and `slice` copy.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::tensor::Device;
use loaderx_core::{Batch, DataLoader, LoaderBuilder, LoaderState, Order, Prefetcher};

use crate::{Error, Result};

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(super) type Transform<O> = Arc<dyn Fn(Batch, &Device) -> std::result::Result<O, BoxError> + Send + Sync>;

/// What a loader runs: the same recipe makes every `to_device` and `slice` copy.
pub(super) trait Recipe<O>: Send + Sync {
    fn start(&self, state: &LoaderState, device: &Device) -> Result<Box<dyn Running<O>>>;
}

/// A started producer: delivers consecutive steps.
pub(super) trait Running<O>: Send {
    fn next(&mut self) -> Result<O>;
    /// The next step [`Running::next`] delivers.
    fn step(&self) -> u64;
    /// The order at [`Running::step`] (where a packed stream's packing stands), when it moves.
    fn order(&self) -> Option<Order> {
        None
    }
}

pub(super) struct CoreRecipe<O> {
    pub(super) builder: LoaderBuilder,
    pub(super) fingerprint: u64,
    pub(super) transform: Transform<O>,
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
        match self.next_batch()? {
            Some(out) => Ok(out),
            None => Err(loaderx_core::Error::PassEnded { steps: self.steps().unwrap_or(0) }.into()),
        }
    }

    fn step(&self) -> u64 {
        DataLoader::step(self)
    }

    fn order(&self) -> Option<Order> {
        Some(self.state().order)
    }
}

pub(super) struct DatasetRecipe<I, O> {
    pub(super) dataset: Arc<dyn Dataset<I>>,
    pub(super) batcher: Arc<dyn Batcher<I, O>>,
    pub(super) threads: usize,
    pub(super) prefetch: usize,
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
