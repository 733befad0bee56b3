//! The framework-neutral engine of loaderx.
//!
//! - [`convert`]: `.npy`, safetensors, MNIST IDX, directories of files and iterators into
//!   datasets, streamed in bounded blocks; [`export::npy`] for the way back.
//! - [`Store`]: Zrecord, a persistent record store: batch append with per-record zstd (plain or
//!   against a trained dictionary), zero-copy batch gather straight into the caller's buffer,
//!   swap-last delete and in-place compaction, crash-safe commit order.
//!
//! `loaderx-core` names no ML framework; `loaderx-burn` and `loaderx-candle` turn its batches into
//! tensors. It is not a distributed store: one host, one writer process at a time, any number of
//! readers.

pub mod convert;
mod dataset;
mod error;
mod framing;
mod kernels;
mod loader;
mod mapped;
pub mod msgpack;
mod sampler;
mod store;

pub use dataset::dtype::{ArrayData, DType, DenseArray, Element};
pub use dataset::{
    DatasetWriter, DenseDataset, DenseSource, Kind, ProgressFn, RaggedDataset, SCHEMA_FILE, Schema,
    WriteOptions, pad,
};
pub use error::{Error, Result};
pub use kernels::scale_bytes_to_f32;
pub use loader::{Batch, DataLoader, LoaderBuilder, LoaderState};
#[cfg(feature = "cuda")]
pub use mapped::pinned_zeroed;
pub use sampler::{SampleRng, sample_seed};
pub use sampler::{Sampler, SamplerBuilder, SamplerConfig, SamplerMode};
pub use store::{
    Codec, CodecCounts, CompactReport, MAX_RECORD_SIZE, MAX_RECORDS, Store, StoreOptions, StoreStats,
    VerifyReport,
};

/// Datasets written back out in other formats.
pub mod export {
    pub use crate::convert::export::npy;
}

/// The on-disk format as pure functions over bytes, for tools and fuzzing.
pub mod format {
    pub use crate::convert::{IdxHeader, NpyHeader};
    pub use crate::dataset::Schema;
    pub use crate::store::format::{Header, HeaderError, META_SIZE, RecordLoc, checksum, dict};

    /// Decodes a `journal.zr` (the redo log of delete and compaction) and returns its number of
    /// entries. Exposed for the fuzz targets only; the journal format is not a public API.
    ///
    /// # Errors
    /// `(offset, reason)` of the first problem; never panics on any input.
    #[doc(hidden)]
    pub fn journal_decode(bytes: &[u8]) -> Result<usize, (u64, String)> {
        crate::store::journal_entries(bytes)
    }
}
pub use framing::{
    ChunkCursor, FilePartRange, MappedFile, PartRange, chunk_boundaries, chunk_boundaries_pattern,
    fixed_chunk_bounds, fixed_chunk_count, partition, partition_files, partition_pattern, plan_file,
    plan_files,
};
