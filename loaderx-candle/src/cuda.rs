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

use candle_core::cuda::cudarc::driver::{
    CudaContext, CudaEvent, CudaStream, DeviceRepr, PinnedHostSlice, ValidAsZeroBits,
};
use candle_core::cuda::{CudaDType, WrapErr};
use candle_core::op::BackpropOp;
use candle_core::{CudaDevice, CudaStorage, Device, Storage, Tensor};
use loaderx_core::staging::{Fence, SlotBuffers, SlotRing, Staged};
use loaderx_core::{BoxError, DType, DataLoader, LoaderBuilder, LoaderState, adapter};

use crate::dtype::Adoptable;
use crate::{Result, TensorBatch};

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

/// A page-locked buffer typed as its stream (a device slice of the same type is made from it).
enum Pinned {
    U8(PinnedHostSlice<u8>),
    U32(PinnedHostSlice<u32>),
    I16(PinnedHostSlice<i16>),
    I32(PinnedHostSlice<i32>),
    I64(PinnedHostSlice<i64>),
    F16(PinnedHostSlice<half::f16>),
    BF16(PinnedHostSlice<half::bf16>),
    F32(PinnedHostSlice<f32>),
    F64(PinnedHostSlice<f64>),
}

macro_rules! each_pinned {
    ($p:expr, $v:ident => $e:expr) => {
        match $p {
            Pinned::U8($v) => $e,
            Pinned::U32($v) => $e,
            Pinned::I16($v) => $e,
            Pinned::I32($v) => $e,
            Pinned::I64($v) => $e,
            Pinned::F16($v) => $e,
            Pinned::BF16($v) => $e,
            Pinned::F32($v) => $e,
            Pinned::F64($v) => $e,
        }
    };
}

impl Pinned {
    fn alloc(ctx: &Arc<CudaContext>, dtype: DType, elems: usize) -> std::result::Result<Pinned, BoxError> {
        use loaderx_core::pinned_zeroed as z;
        Ok(match dtype {
            DType::U8 => Pinned::U8(z(ctx, elems)?),
            DType::U32 => Pinned::U32(z(ctx, elems)?),
            DType::I16 => Pinned::I16(z(ctx, elems)?),
            DType::I32 => Pinned::I32(z(ctx, elems)?),
            DType::I64 => Pinned::I64(z(ctx, elems)?),
            DType::F16 => Pinned::F16(z(ctx, elems)?),
            DType::BF16 => Pinned::BF16(z(ctx, elems)?),
            DType::F32 => Pinned::F32(z(ctx, elems)?),
            DType::F64 => Pinned::F64(z(ctx, elems)?),
            other => {
                return Err(format!(
                    "a {other} stream needs widening on the host, which staging skips: use CandleLoader for it"
                )
                .into());
            }
        })
    }

    fn fits(&self, dtype: DType, elems: usize) -> bool {
        let same = matches!(
            (self, dtype),
            (Pinned::U8(_), DType::U8)
                | (Pinned::U32(_), DType::U32)
                | (Pinned::I16(_), DType::I16)
                | (Pinned::I32(_), DType::I32)
                | (Pinned::I64(_), DType::I64)
                | (Pinned::F16(_), DType::F16)
                | (Pinned::BF16(_), DType::BF16)
                | (Pinned::F32(_), DType::F32)
                | (Pinned::F64(_), DType::F64)
        );
        same && each_pinned!(self, p => p.len()) == elems
    }

    /// The buffer's bytes, for the gather (waiting first for the copy that last read it).
    fn bytes_mut(&mut self) -> std::result::Result<&mut [u8], BoxError> {
        each_pinned!(self, p => Ok(bytemuck::cast_slice_mut(p.as_mut_slice()?)))
    }

    /// A device tensor of `shape` copied from the buffer, asynchronously, on `stream`.
    fn to_device(&self, stream: &Arc<CudaStream>, device: &CudaDevice, shape: Vec<usize>) -> Result<Tensor> {
        each_pinned!(self, p => {
            let slice = stream.clone_htod(p).w()?;
            let storage = CudaStorage::wrap_cuda_slice(slice, device.clone());
            Ok(Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false))
        })
    }
}

/// A slot of a [`CudaLoader`]'s ring: one pinned buffer per stream, reallocated only when a
/// stream's length or type changes (a finite pass's last batch).
pub(crate) struct PinnedSlot {
    ctx: Arc<CudaContext>,
    buffers: Vec<Option<Pinned>>,
}

impl SlotBuffers for PinnedSlot {
    fn stream_buffer(
        &mut self,
        k: usize,
        dtype: DType,
        bytes: usize,
    ) -> std::result::Result<&mut [u8], BoxError> {
        if self.buffers.len() <= k {
            self.buffers.resize_with(k + 1, || None);
        }
        let elems = bytes / dtype.size().max(1);
        if elems == 0 {
            // No pinned allocation of zero bytes: the stream's tensor is made empty.
            self.buffers[k] = None;
            return Ok(&mut []);
        }
        if !self.buffers[k].as_ref().is_some_and(|p| p.fits(dtype, elems)) {
            self.buffers[k] = Some(Pinned::alloc(&self.ctx, dtype, elems)?);
        }
        match &mut self.buffers[k] {
            Some(p) => p.bytes_mut(),
            None => Err("the slot's buffer was not allocated".into()),
        }
    }
}

/// A slot's copy to the device: done when the event recorded after it on the copy stream is.
struct CopyDone(Arc<CudaEvent>);

impl Fence for CopyDone {
    fn is_done(&self) -> bool {
        self.0.is_complete()
    }
    fn wait(&self) {
        // An error here is the copy's, and surfaces on the consumer's stream; the slot is free.
        let _ = self.0.synchronize();
    }
}

/// A loader that gathers each step straight into page-locked memory and copies it to a CUDA
/// device asynchronously (feature `cuda`).
///
/// The prefetch threads gather every stream into a slot of a ring of pinned buffers
/// (`prefetch depth + 2` slots, at least one more than the prefetch threads), start the
/// host-to-device copy on a side stream and record an event after it; the slot is reused once
/// that event is done (no device synchronisation), the device memory comes from CUDA's
/// stream-ordered pool. [`CudaLoader::next_batch`] makes the calling thread's stream (candle's
/// `Device::new_cuda` gives each thread its own) wait on the batch's event, so kernels enqueued
/// after it see the batch, while the copy of the next ones overlaps them. Creating the side
/// stream puts the context in cudarc's multi-stream mode, whose per-buffer events also order the
/// device buffers' reads and frees across the streams.
///
/// Streams of dtypes candle has (u8, u32, i16, i32, i64, f16, bf16, f32, f64), dense (pad
/// ragged ones with a transform and [`crate::CandleLoader`]). Not verified on a GPU (none was
/// lent to this project); `tests/integration/cuda.rs` runs it where a device is visible.
pub struct CudaLoader {
    loader: DataLoader<(TensorBatch, Arc<CudaEvent>)>,
    device: CudaDevice,
    ring: Arc<SlotRing<PinnedSlot>>,
}

impl std::fmt::Debug for CudaLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaLoader").field("loader", &self.loader).field("ring", &self.ring).finish()
    }
}

impl CudaLoader {
    /// A staged loader of `builder`'s dense streams onto the CUDA `device`.
    ///
    /// # Errors
    /// [`crate::Error::Candle`] for a device that is not CUDA or a side stream that cannot be
    /// made; the loader's build errors ([`loaderx_core::LoaderBuilder::build_staged`]).
    pub fn new(builder: LoaderBuilder, device: &Device) -> Result<CudaLoader> {
        let Device::Cuda(cuda) = device else {
            return Err(candle_core::Error::Msg(format!(
                "CudaLoader needs a CUDA device, not {}",
                device_name(device)
            ))
            .into());
        };
        let ctx = Arc::clone(cuda.cuda_stream().context());
        let copies = ctx.new_stream().w()?;
        let slots = (adapter::prefetch_depth(&builder) + 2).max(adapter::thread_count(&builder) + 1);
        let ring = Arc::new(SlotRing::new(
            (0..slots).map(|_| PinnedSlot { ctx: Arc::clone(&ctx), buffers: Vec::new() }).collect(),
        ));
        let dev = cuda.clone();
        let loader = builder.build_staged(Arc::clone(&ring), move |s: Staged<'_, PinnedSlot>| {
            let mut tensors = HashMap::with_capacity(s.streams.len());
            for (k, m) in s.streams.iter().enumerate() {
                let t = match s.slot.buffers.get(k).and_then(Option::as_ref) {
                    Some(p) if m.bytes > 0 => p.to_device(&copies, &dev, m.shape.clone())?,
                    _ => {
                        let dtype = crate::candle_dtype(m.dtype)
                            .ok_or_else(|| format!("stream {:?}: no candle dtype for {}", m.name, m.dtype))?;
                        Tensor::zeros(m.shape.clone(), dtype, &Device::Cuda(dev.clone()))?
                    }
                };
                tensors.insert(m.name.clone(), t);
            }
            let event = Arc::new(copies.record_event(None).w()?);
            let batch = TensorBatch::from_parts(s.step, s.indices.to_vec(), tensors);
            Ok(((batch, Arc::clone(&event)), Box::new(CopyDone(event)) as Box<dyn Fence>))
        })?;
        Ok(CudaLoader { loader, device: cuda.clone(), ring })
    }

    /// The next batch, in step order, its copy ordered before this thread's later kernels.
    ///
    /// # Errors
    /// As [`crate::CandleLoader::next_batch`]; [`crate::Error::Candle`] when the wait cannot be
    /// enqueued.
    pub fn next_batch(&mut self) -> Result<Option<TensorBatch>> {
        let Some((batch, copied)) = self.loader.next_batch()? else { return Ok(None) };
        self.device.cuda_stream().wait(&copied).w()?;
        Ok(Some(batch))
    }

    /// The state to save (a builder given it resumes at the next undelivered step).
    pub fn state(&self) -> LoaderState {
        self.loader.state()
    }

    /// The next step to be delivered.
    pub fn step(&self) -> u64 {
        self.loader.step()
    }

    /// Slots free, being filled and with a copy in flight.
    pub fn slots(&self) -> (usize, usize, usize) {
        self.ring.counts()
    }
}

impl Iterator for CudaLoader {
    type Item = Result<TensorBatch>;

    /// `None` after the last step of a finite pass.
    fn next(&mut self) -> Option<Result<TensorBatch>> {
        self.next_batch().transpose()
    }
}

impl Drop for CudaLoader {
    fn drop(&mut self) {
        // Every copy still reading a slot finishes before its pinned buffer is freed.
        let _ = self.ring.drain();
    }
}

/// The device a [`CudaLoader`] was given instead of a CUDA one, in words.
fn device_name(device: &Device) -> &'static str {
    if device.is_cpu() {
        "the CPU"
    } else if device.is_metal() {
        "a Metal device"
    } else {
        "another device"
    }
}
