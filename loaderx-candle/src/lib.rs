//! loaderx batches as candle (candle-core 0.11) tensors.
//!
//! - [`to_tensor`] / [`tensor_from_parts`]: one stream of a batch ([`loaderx_core::DenseArray`])
//!   becomes a [`Tensor`](candle_core::Tensor) of the same shape on any
//!   [`Device`](candle_core::Device). On the CPU the gathered `Vec` *is* the tensor's storage
//!   (`Tensor::from_vec` moves it; no copy). On CUDA it is copied host→device exactly once.
//! - [`candle_dtype`] and [`Widen`]: candle holds `u8 u32 i16 i32 i64 f16 bf16 f32 f64`; the
//!   loaderx dtypes it lacks (`i8 u16 u64 bool`) are refused unless the caller picks a widening,
//!   which converts values (checked, never wrapped) into a new buffer.
//! - [`Converter`] and [`TensorBatch`]: a whole batch as `HashMap<String, Tensor>` plus its step
//!   and indices.
//! - [`CandleLoader`]: the endless, step-ordered, resumable loaderx loader yielding
//!   [`TensorBatch`]es, or a transform's output; gathering, tensor construction and the transform
//!   run on the prefetch threads.
//!
//! It is not a dataset library (no downloads, no candle-datasets) and it does no device-side
//! augmentation: a transform can, with candle ops.
//!
//! # Example
//! ```
//! # mod loaderx { pub use loaderx_core::*; pub use loaderx_candle as candle; }
//! use loaderx::candle::{CandleLoader, Converter, Widen, candle_core::{DType, Device}};
//! use loaderx::{DataLoader, DatasetWriter, WriteOptions};
//! let dir = std::env::temp_dir().join(format!("loaderx-doc-candle-lib-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let mut w = DatasetWriter::dense::<u8>(dir.join("image"), vec![2, 2], WriteOptions::new())?;
//! w.append(&(0..=255).collect::<Vec<u8>>())?;
//! w.finish()?;
//! let mut w = DatasetWriter::dense::<bool>(dir.join("flag"), vec![], WriteOptions::new())?;
//! w.append(&(0..64).map(|i| i % 3 == 0).collect::<Vec<_>>())?;
//! w.finish()?;
//!
//! let builder = DataLoader::builder()
//!     .open_stream("image", dir.join("image"))
//!     .open_stream("flag", dir.join("flag"))
//!     .batch_size(16)
//!     .seed(7);
//! // bool has no candle dtype: widen it explicitly; normalise the bytes on the prefetch threads.
//! let conv = Converter::new(&Device::Cpu).widen(Widen::Exact);
//! let mut loader = CandleLoader::build_with(builder, conv, |mut batch, conv| {
//!     let image = conv.array(batch.take("image").unwrap())?.to_dtype(DType::F32)? / 255.0;
//!     let flag = conv.array(batch.take("flag").unwrap())?;
//!     Ok::<_, loaderx::candle::Error>((image?, flag))
//! })?;
//! let (image, flag) = loader.next_batch()?.expect("an endless loader");
//! assert_eq!(image.dims(), &[16, 2, 2]);
//! assert_eq!(flag.dtype(), DType::U8);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Crate features
//! - `nn`: re-exports [candle-nn](https://docs.rs/candle-nn/0.11) as `candle_nn` (layers,
//!   optimisers, losses), so training code needs no direct dependency.
//! - `cuda`: turns on `candle-core/cuda` (and `candle-nn/cuda` with `nn`). Building it needs the
//!   CUDA toolkit (`nvcc` 12 or newer on `PATH`) and either a visible GPU or `CUDA_COMPUTE_CAP`
//!   set (e.g. `90` for H100/H200, `80` for A100) for candle's kernels. CI builds without it.
//!
//! # CUDA: what is done and what is not
//! The free functions ([`to_tensor`], [`tensor_from_parts`]) copy a stream host→device once with
//! `Tensor::from_vec`, from the gathered (pageable) buffer. A [`Converter`] on a CUDA device, and
//! so a [`CandleLoader`], stages instead (feature `cuda`): each stream is copied into page-locked
//! host memory from a pool its clones share (`loaderx_core::pinned_zeroed`; the allocation is
//! `unsafe` in cudarc, so its safe wrapper lives in loaderx-core's one unsafe module), then copied
//! to the device from there on the prefetch thread's stream, which waits for the transfer (a DMA
//! from pinned memory, at the link's speed) before handing the tensor over: the training thread
//! never waits for it, and the transfer overlaps its compute. (It must wait: candle's
//! `Device::new_cuda` gives each thread its own default stream, so the training thread's kernels
//! are not ordered after another thread's copy, and the buffer is reused by the next batch.)
//! Empty streams take the free functions' path.
//!
//! Verified: the crate with `cuda` builds against the CUDA 13.0 toolkit (`nvcc` 13.0,
//! `CUDA_COMPUTE_CAP=90`), lints clean and its tests link (`scripts/check-cuda.sh`). **Not verified: nothing of it has run on a GPU** (no
//! GPU on the machine it was written on). The tests for it (`tests/integration/cuda.rs`: every
//! dtype through pinned staging, a loader's batches intact and in step order while pinned buffers
//! are reused) run only where a CUDA device is visible.
//!
//! `CudaLoader` (feature `cuda`) saves the host copy: its prefetch threads gather straight into
//! the pinned buffers of a ring of slots (`loaderx_core::LoaderBuilder::build_staged`), start
//! the copy on a side stream, and hand the slot back when the event recorded after the copy is
//! done, never synchronising the device; the consumer's stream waits on that event in
//! `CudaLoader::next_batch`. The ring's bookkeeping is tested on the CPU (loaderx-core's
//! `SlotRing` and staged-loader tests); the CUDA half only builds here (`scripts/check-cuda.sh`).
#![forbid(unsafe_code)]

#[cfg(feature = "cuda")]
mod cuda;
mod dtype;
mod error;
mod loader;
pub mod mnist;
mod tensor;

#[cfg(feature = "cuda")]
pub use cuda::CudaLoader;
pub use dtype::{Widen, candle_dtype};
pub use error::{Error, Result};
pub use loader::CandleLoader;
pub use tensor::{Converter, TensorBatch, tensor_from_parts, to_tensor};

/// The common imports of a candle program: `use loaderx::candle::prelude::*;`.
pub mod prelude {
    pub use candle_core::{DType, Device, Tensor};
    pub use loaderx_core::{
        BoxError, DataLoader, DenseSource, LoaderBuilder, LoaderState, Pad, Pass, RaggedSource, SamplerMode,
        Selection, WriteOptions,
    };

    pub use crate::{CandleLoader, Converter, TensorBatch, Widen};
}

pub use candle_core;
/// candle-nn 0.11 (feature `nn`).
#[cfg(feature = "nn")]
pub use candle_nn;
pub use loaderx_core;
