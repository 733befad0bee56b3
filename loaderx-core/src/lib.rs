//! The framework-neutral engine of loaderx.
//!
//! `loaderx-core` names no ML framework; `loaderx-burn` and `loaderx-candle` turn its batches into
//! tensors.

mod dataset;
mod error;
mod framing;
mod mapped;
mod store;

pub use dataset::dtype::{ArrayData, DType, DenseArray, Element};
pub use error::{Error, Result};
pub use framing::{
    ChunkCursor, FilePartRange, MappedFile, PartRange, chunk_boundaries, chunk_boundaries_pattern,
    fixed_chunk_bounds, fixed_chunk_count, partition, partition_files, partition_pattern,
    plan_file, plan_files,
};
