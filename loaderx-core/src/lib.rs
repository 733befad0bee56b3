//! The framework-neutral engine of loaderx.
//!
//! - [`Store`]: Zrecord, a persistent record store: batch append with per-record zstd (plain or
//!   against a trained dictionary), zero-copy batch gather straight into the caller's buffer,
//!   swap-last delete and in-place compaction, crash-safe commit order.
//! - [`Sampler`]: batches of indices as a pure function of (seed, step): sequential, IID,
//!   cyclic; sharded by rank and world.
//! - [`DenseDataset`], [`RaggedDataset`], [`DatasetWriter`]: typed views over stores.
//! - [`convert`]: `.npy`, safetensors, MNIST IDX, JSONL, directories of files and iterators
//!   into datasets, streamed in bounded blocks; [`export::npy`] for the way back.
//! - [`DataLoader`]: the endless, step-based loader; [`Prefetcher`], its ordered prefetch engine.
//! - [`partition`] and friends: record-aligned byte-range planning (mmap-chunker semantics).
//!
//! `loaderx-core` names no ML framework; `loaderx-burn` and `loaderx-candle` turn its batches into
//! tensors. It is not a distributed store: one host, one writer process at a time, any number of
//! readers. `ARCHITECTURE.md` at the repository root maps the data path and the on-disk format
//! to the modules.
//!
//! Layers depend downward only (ARCHITECTURE.md's table, checked by `tests/integration/layering.rs`):
//! `loader` and `convert` → `dataset` → `store` and `remote` → `format`/`sys`.
//! `sys` holds the platform and all but one `unsafe` block (the AVX2 kernel's CPU check sits
//! beside the kernel in `sampler`), and imports nothing above `format`.

// No function of the engine over 100 lines (clippy's default): each does one thing, and a long one
// is split before it grows (the adapters, the CLI and the bench crate are not held to it yet).
#![warn(clippy::too_many_lines)]

pub mod convert;
mod dataset;
mod error;
pub mod format;
mod framing;
mod kernels;
mod loader;
#[cfg(feature = "remote")]
pub mod remote;
mod sampler;
mod store;
mod sys;

pub use dataset::dtype::{ArrayData, DType, DenseArray, Element};
pub use dataset::{
    DatasetWriter, DenseDataset, DenseSource, Kind, Pad, Padded, ProgressFn, RaggedArray, RaggedDataset,
    RaggedSource, SCHEMA_FILE, SET_FILE, Schema, Selection, StitchSummary, WriteOptions, pad, set_parts,
    stitch,
};
pub use error::{Error, Result};
pub use format::{Codec, Format, MAX_RECORD_SIZE, MAX_RECORDS};
pub use framing::{
    ChunkCursor, FilePartRange, PartRange, chunk_boundaries, chunk_boundaries_pattern, fixed_chunk_bounds,
    fixed_chunk_count, partition, partition_files, partition_pattern, plan_file, plan_files,
};
pub use kernels::scale_bytes_to_f32;
pub use loader::{
    Batch, BoxError, BucketConfig, DataLoader, Finite, Indexer, Launch, LoaderBuilder, LoaderState, Order,
    Pack, PackConfig, PackCursor, Prefetcher, StreamSource, fingerprint,
};
pub use loader::{Fence, Lease, SlotBuffers, SlotRing, Staged, StagedStream};
pub use sampler::{
    MIXTURE_SLOTS, Mixture, MixtureConfig, Pass, PassConfig, SampleRng, Sampler, SamplerBuilder,
    SamplerConfig, SamplerMode, sample_seed,
};
pub use store::{
    CodecCounts, CompactReport, MigrateReport, RecordIndex, Store, StoreOptions, StoreStats, StoreSummary,
    VerifyReport,
};
pub use sys::MappedFile;
#[cfg(feature = "cuda")]
pub use sys::pinned_zeroed;

/// The common imports: `use loaderx::prelude::*;` (or `loaderx_core::prelude`).
pub mod prelude {
    pub use crate::{
        BoxError, Codec, DataLoader, DatasetWriter, DenseDataset, DenseSource, Error, Finite, Format,
        LoaderBuilder, LoaderState, Pad, RaggedDataset, RaggedSource, Result, SamplerMode, Selection, Store,
        StoreOptions, WriteOptions,
    };
}

/// Datasets written back out in other formats.
pub mod export {
    pub use crate::convert::export::npy;
}
