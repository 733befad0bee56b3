//! The framework-neutral engine of loaderx.
//!
//! - [`Store`]: Zrecord, a persistent record store with batch append, zero-copy batch gather,
//!   per-record zstd (plain or with a trained dictionary), swap-last delete and in-place compaction.
//!
//! `loaderx-core` names no ML framework; `loaderx-burn` and `loaderx-candle` turn its batches into
//! tensors.

mod dataset;
mod error;

pub use dataset::dtype::{ArrayData, DType, DenseArray, Element};
pub use error::{Error, Result};
