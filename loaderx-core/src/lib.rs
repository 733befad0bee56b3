//! The framework-neutral engine of loaderx.
//!
//! `loaderx-core` names no ML framework; `loaderx-burn` and `loaderx-candle` turn its batches into
//! tensors.

mod dataset;
mod error;
mod mapped;
mod sampler;
mod store;

pub use dataset::dtype::{ArrayData, DType, DenseArray, Element};
pub use error::{Error, Result};
pub use sampler::{SampleRng, sample_seed};
pub use sampler::{Sampler, SamplerBuilder, SamplerConfig, SamplerMode};
