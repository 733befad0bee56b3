//! Staged loaders ([`LoaderBuilder::build_staged`]): the prefetch threads gather each step's
//! dense streams straight into a slot of a [`SlotRing`] (page-locked host buffers for a device
//! copy), then hand the slot to a stage function (the copy to the device, started
//! asynchronously) together with the fence that says when the slot may be reused. There is no
//! host copy between the gather and the DMA, and a slot comes back when its copy is done, not
//! when the consumer is: the consumer holds device memory, the ring only staging buffers.
//!
//! Plain Rust, no device code: the slots are any [`SlotBuffers`] (plain vectors in the tests,
//! pinned memory in loaderx-candle's CUDA path), the fence any [`Fence`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::builder::LoaderBuilder;
use super::data_loader::{BoxError, DataLoader};
use super::prefetch::panic_message;
use super::ring::{Fence, SlotRing};
use super::stream::StreamData;
use crate::store::Parallelism;
use crate::{DType, Error, Result};

/// A slot's buffers: one per stream, written by the gather.
pub trait SlotBuffers: Send + 'static {
    /// Stream `k`'s buffer for `bytes` bytes of `dtype` elements, exactly that long (a slot
    /// reallocates a buffer whose length or type changed; a finite pass's last batch is
    /// shorter). The gather then writes the batch's records there back to back, in the
    /// platform's byte order.
    ///
    /// # Errors
    /// Whatever keeps the buffer from being had (a failed pinned allocation, say).
    fn stream_buffer(
        &mut self,
        k: usize,
        dtype: DType,
        bytes: usize,
    ) -> std::result::Result<&mut [u8], BoxError>;
}

/// Plain host buffers, one per stream: a ring of these stages on the CPU (tests, or a consumer
/// that only wants the batch in reusable memory).
impl SlotBuffers for Vec<Vec<u8>> {
    fn stream_buffer(
        &mut self,
        k: usize,
        _: DType,
        bytes: usize,
    ) -> std::result::Result<&mut [u8], BoxError> {
        if self.len() <= k {
            self.resize_with(k + 1, Vec::new);
        }
        self[k].resize(bytes, 0);
        Ok(&mut self[k])
    }
}

/// One stream of a staged step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedStream {
    /// The stream's name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// The batch's shape: `(B, *item_shape)`.
    pub shape: Vec<usize>,
    /// Bytes gathered into its buffer.
    pub bytes: usize,
}

/// A step gathered into a slot, for the stage function.
pub struct Staged<'a, S> {
    /// The global step.
    pub step: u64,
    /// The rows' record indices.
    pub indices: &'a [u32],
    /// The streams, in the order of their buffers (`SlotBuffers::stream_buffer`'s `k`).
    pub streams: &'a [StagedStream],
    /// The slot, its buffers filled.
    pub slot: &'a mut S,
}

/// What a staged loader runs per step on a prefetch thread.
pub(super) type StepFn<O> =
    Arc<dyn Fn(u64, &[u32], &[(String, StreamData)], Parallelism) -> Result<O> + Send + Sync>;

impl LoaderBuilder {
    /// A loader whose prefetch threads gather each step's dense streams straight into a slot
    /// leased from `ring` (waiting while every slot is busy: back-pressure), then call `stage`
    /// with the filled slot; `stage` starts the slot's consumption (a device copy) and returns
    /// the step's output with a [`Fence`] that completes when the slot may be reused. A ring of
    /// `prefetch depth + 2` slots lets the consumer's step, a copy in flight and the prefetched
    /// steps each have one. Order, sharding, resume and every sampler mode are as for
    /// [`LoaderBuilder::build`].
    ///
    /// A failed gather or `stage` gives the slot back and is that step's error
    /// ([`Error::Transform`] for `stage`, failed or panicked); once the ring is closed
    /// ([`SlotRing::close`]) every later step is [`Error::LoaderStopped`].
    ///
    /// # Errors
    /// As [`LoaderBuilder::build`]; [`Error::Config`] for a ragged stream (padded or
    /// not) or a packed loader: a staged loader gathers fixed-size records.
    pub fn build_staged<S, O, F>(self, ring: Arc<SlotRing<S>>, stage: F) -> Result<DataLoader<O>>
    where
        S: SlotBuffers,
        O: Send + 'static,
        F: Fn(Staged<'_, S>) -> std::result::Result<(O, Box<dyn Fence>), BoxError> + Send + Sync + 'static,
    {
        let builder = self.checked()?;
        if let Some(name) = builder.non_dense_names().next() {
            return Err(Error::Config {
                what: "staged",
                reason: format!(
                    "stream {name:?} is ragged (or of encoded images): a staged loader gathers fixed-size (dense) streams"
                ),
            });
        }
        if builder.packed().is_some() {
            return Err(Error::Config {
                what: "staged",
                reason: "a staged loader does not pack sequences".into(),
            });
        }
        let run = move |step: u64, indices: &[u32], streams: &[(String, StreamData)], par: Parallelism| {
            let mut lease = ring.lease()?;
            let mut meta = Vec::with_capacity(streams.len());
            let mut fill = || -> Result<()> {
                for (k, (name, source)) in streams.iter().enumerate() {
                    let StreamData::Dense(d) = source else {
                        return Err(Error::InvalidArgument(format!("stream {name:?} is ragged")));
                    };
                    let bytes = indices.len() * d.schema().unit_bytes();
                    let buffer = lease
                        .buffer()
                        .stream_buffer(k, d.dtype(), bytes)
                        .map_err(|source| Error::Transform { step, source })?;
                    if buffer.len() != bytes {
                        return Err(Error::Transform {
                            step,
                            source: format!(
                                "stream {name:?}: a slot buffer of {} bytes for {bytes}",
                                buffer.len()
                            )
                            .into(),
                        });
                    }
                    d.gather_bytes_with(indices, buffer, par)?;
                    meta.push(StagedStream {
                        name: name.clone(),
                        dtype: d.dtype(),
                        shape: d.batch_shape(indices.len()),
                        bytes,
                    });
                }
                Ok(())
            };
            if let Err(e) = fill() {
                ring.give_back(lease);
                return Err(e);
            }
            let staged = Staged { step, indices, streams: &meta, slot: lease.buffer() };
            match catch_unwind(AssertUnwindSafe(|| stage(staged))) {
                Ok(Ok((out, fence))) => {
                    ring.submit(lease, fence);
                    Ok(out)
                }
                Ok(Err(source)) => {
                    ring.give_back(lease);
                    Err(Error::Transform { step, source })
                }
                Err(panic) => {
                    ring.give_back(lease);
                    Err(Error::Transform {
                        step,
                        source: format!("panicked: {}", panic_message(&*panic)).into(),
                    })
                }
            }
        };
        DataLoader::start_staged(builder, Arc::new(run))
    }
}
