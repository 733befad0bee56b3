//! Pinned host staging for CUDA devices (feature `cuda`).
//!
//! A [`Converter`](crate::Converter) on a CUDA device copies each stream into a page-locked
//! buffer from a small pool and copies it to the device from there, on the calling (prefetch)
//! thread's stream, then waits for that copy before handing the tensor over. Waiting is needed
//! twice over: candle's `Device::new_cuda` uses per-thread default streams, so the consumer's
//! kernels are not ordered after a copy enqueued by another thread, and cudarc records the
//! pinned buffer's "in use" event only in multi-stream mode, so nothing else would keep the next
//! batch from overwriting a buffer the DMA engine is still reading. The prefetch thread pays the
//! wait (a DMA from pinned memory, at the link's speed), the consumer does not: the transfer
//! overlaps its compute on its own stream.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use candle_core::cuda::cudarc::driver::{DeviceRepr, PinnedHostSlice, ValidAsZeroBits};
use candle_core::cuda::{CudaDType, WrapErr};
use candle_core::op::BackpropOp;
use candle_core::{CudaDevice, CudaStorage, Storage, Tensor};

use crate::Result;
use crate::dtype::Adoptable;

/// Pinned buffers kept per element type and length, and in all: one per prefetch thread and
/// stream in the common case; more are allocated on demand and freed when returned to a full
/// pool, so streams whose length changes every batch cannot grow it without bound.
const POOL_PER_SHAPE: usize = 4;
const POOL_TOTAL: usize = 32;

type Pool = HashMap<(TypeId, usize), Vec<Box<dyn Any + Send>>>;

/// The pinned buffers of a converter and its clones.
#[derive(Clone, Default)]
pub(crate) struct Staging {
    pool: Arc<Mutex<Pool>>,
}

impl std::fmt::Debug for Staging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Staging")
            .field("pinned_buffers", &pool.values().map(Vec::len).sum::<usize>())
            .finish()
    }
}

impl Staging {
    /// `data` as a tensor of `shape` (length already checked) on `device`, through a pinned buffer.
    pub(crate) fn tensor(&self, device: &CudaDevice, shape: Vec<usize>, data: Adoptable) -> Result<Tensor> {
        match data {
            Adoptable::U8(v) => self.stage(device, shape, &v),
            Adoptable::U32(v) => self.stage(device, shape, &v),
            Adoptable::I16(v) => self.stage(device, shape, &v),
            Adoptable::I32(v) => self.stage(device, shape, &v),
            Adoptable::I64(v) => self.stage(device, shape, &v),
            Adoptable::F16(v) => self.stage(device, shape, &v),
            Adoptable::BF16(v) => self.stage(device, shape, &v),
            Adoptable::F32(v) => self.stage(device, shape, &v),
            Adoptable::F64(v) => self.stage(device, shape, &v),
        }
    }

    fn stage<T>(&self, device: &CudaDevice, shape: Vec<usize>, host: &[T]) -> Result<Tensor>
    where
        T: CudaDType + DeviceRepr + ValidAsZeroBits + Copy + Send + 'static,
    {
        let stream = device.cuda_stream();
        let mut pinned = match self.take::<T>(host.len()) {
            Some(p) => p,
            None => loaderx_core::pinned_zeroed::<T>(stream.context(), host.len()).w()?,
        };
        pinned.as_mut_slice().w()?.copy_from_slice(host);
        let slice = stream.clone_htod(&pinned).w()?;
        // The copy must be done before the tensor reaches another thread's stream and before
        // the buffer can be reused (see the module documentation).
        stream.synchronize().w()?;
        self.put(pinned);
        let storage = CudaStorage::wrap_cuda_slice(slice, device.clone());
        Ok(Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false))
    }

    fn take<T: 'static>(&self, len: usize) -> Option<PinnedHostSlice<T>> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let buffer = pool.get_mut(&(TypeId::of::<T>(), len))?.pop()?;
        // The key holds the type: the downcast cannot fail.
        buffer.downcast::<PinnedHostSlice<T>>().ok().map(|b| *b)
    }

    fn put<T: Send + 'static>(&self, pinned: PinnedHostSlice<T>) {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let total: usize = pool.values().map(Vec::len).sum();
        let free = pool.entry((TypeId::of::<T>(), pinned.len())).or_default();
        if free.len() < POOL_PER_SHAPE && total < POOL_TOTAL {
            free.push(Box::new(pinned));
        }
    }
}
