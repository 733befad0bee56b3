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
//! use loaderx_candle::{CandleLoader, Converter, Widen, candle_core::{DType, Device}};
//! use loaderx_core::{DataLoader, DatasetWriter, WriteOptions};
//! let dir = tempfile::tempdir()?;
//! let mut w = DatasetWriter::dense::<u8>(dir.path().join("image"), vec![2, 2], WriteOptions::new())?;
//! w.append(&(0..=255).collect::<Vec<u8>>())?;
//! w.finish()?;
//! let mut w = DatasetWriter::dense::<bool>(dir.path().join("flag"), vec![], WriteOptions::new())?;
//! w.append(&(0..64).map(|i| i % 3 == 0).collect::<Vec<_>>())?;
//! w.finish()?;
//!
//! let builder = DataLoader::builder()
//!     .open_stream("image", dir.path().join("image"))?
//!     .open_stream("flag", dir.path().join("flag"))?
//!     .batch_size(16)
//!     .seed(7);
//! // bool has no candle dtype: widen it explicitly; normalise the bytes on the prefetch threads.
//! let conv = Converter::new(&Device::Cpu).widen(Widen::Exact);
//! let mut loader = CandleLoader::with_transform(builder, conv, |mut batch, conv| {
//!     let image = conv.array(batch.take("image").unwrap())?.to_dtype(DType::F32)? / 255.0;
//!     let flag = conv.array(batch.take("flag").unwrap())?;
//!     Ok::<_, loaderx_candle::Error>((image?, flag))
//! })?;
//! let (image, flag) = loader.next_batch()?;
//! assert_eq!(image.dims(), &[16, 2, 2]);
//! assert_eq!(flag.dtype(), DType::U8);
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
//! With a CUDA [`Device`](candle_core::Device), each stream is copied host→device once by
//! `Tensor::from_vec`, on the loader's prefetch thread, from the gathered (pageable) buffer. No
//! code in this crate depends on the `cuda` feature: the path is the same call as on the CPU.
//! **It was not built or run on a GPU**: the machine this crate was written on has neither a GPU
//! nor `nvcc`. Staging batches in pinned (page-locked) host memory, which makes the copy several
//! times faster and lets it overlap compute, is **not implemented**: cudarc's pinned allocation
//! (`CudaContext::alloc_pinned`) is an `unsafe fn`, this crate forbids `unsafe`, and loaderx-core
//! may not name a framework. It is the next step for this crate.
#![forbid(unsafe_code)]

mod dtype;
mod error;
mod loader;
mod tensor;

pub use dtype::{Widen, candle_dtype};
pub use error::{Error, Result};
pub use loader::CandleLoader;
pub use tensor::{Converter, TensorBatch, tensor_from_parts, to_tensor};

pub use candle_core;
/// candle-nn 0.11 (feature `nn`).
#[cfg(feature = "nn")]
pub use candle_nn;
pub use loaderx_core;
