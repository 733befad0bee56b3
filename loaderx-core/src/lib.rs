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
//! - [`framing`]: record-aligned byte-range planning (mmap-chunker semantics).
//! - [`staging`]: loaders gathering into reusable device-staging buffers; [`adapter`]: what the
//!   framework adapters build their loaders from.
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

pub mod convert;
mod dataset;
mod error;
// The on-disk layouts' parsers: public only for the fuzz targets and the bench crate (feature
// `internals`), not part of the API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod format;
#[cfg(not(feature = "internals"))]
#[allow(
    dead_code,
    unused_imports,
    reason = "the parts only the fuzz targets, the bench crate and the tests use (feature `internals`)"
)]
mod format;
pub mod framing;
mod kernels;
mod loader;
#[cfg(feature = "remote")]
pub mod remote;
mod sampler;
mod store;
mod sys;
pub mod tokens;
#[cfg(feature = "images")]
pub mod vision;

pub use dataset::dtype::{ArrayData, DType, DenseArray, Element};
pub use dataset::{
    DatasetWriter, DenseDataset, DenseSource, Kind, Pad, Padded, ProgressFn, RaggedArray, RaggedDataset,
    RaggedSource, SCHEMA_FILE, SET_FILE, Schema, Selection, StitchSummary, WriteOptions, pad, set_parts,
    stitch,
};
#[cfg(feature = "remote")]
pub use dataset::{
    RemotePart, RemoteSet, remote_set, remote_set_parts, remote_set_schema_file, stitch_remote,
};
pub use error::{Error, Result, error_chain, redact_urls};
pub use format::v2::Layout;
pub use format::{Codec, Format, MAX_RECORD_SIZE, MAX_RECORDS};
pub use kernels::scale_bytes_to_f32;
pub use loader::{
    Batch, BoxError, BucketConfig, DataLoader, Launch, LentArray, LoaderBuilder, LoaderState, Order, Pack,
    PackConfig, PackCursor, Pass, Prefetcher, Stopper,
};
pub use sampler::{
    MIXTURE_SLOTS, Mixture, MixtureConfig, PassConfig, PassSampler, SampleRng, Sampler, SamplerBuilder,
    SamplerConfig, SamplerMode, sample_seed,
};
pub use store::{
    CodecCounts, CompactReport, MigrateReport, OpenMode, RecordIndex, SharedStore, Store, StoreOptions,
    StoreStats, StoreSummary, VerifyReport,
};
pub use sys::NearCopy;
#[cfg(feature = "cuda")]
pub use sys::pinned_zeroed;

// Short paths inside the crate for names public in their own modules.
pub(crate) use framing::{partition, partition_files};
pub(crate) use sys::MappedFile;

/// The common imports: `use loaderx::prelude::*;` (or `loaderx_core::prelude`).
pub mod prelude {
    pub use crate::{
        BoxError, Codec, DataLoader, DatasetWriter, DenseDataset, DenseSource, Error, Format, LoaderBuilder,
        LoaderState, Pad, Pass, RaggedDataset, RaggedSource, Result, SamplerMode, Selection, Store,
        StoreOptions, WriteOptions,
    };
}

/// Device staging: loaders that gather each step straight into reusable slot buffers
/// ([`LoaderBuilder::build_staged`]) handed back when a completion [`Fence`](staging::Fence)
/// says the device copy is done.
pub mod staging {
    pub use crate::loader::{Fence, Lease, SlotBuffers, SlotRing, Staged, StagedStream};
}

/// Hooks for framework adapters (loaderx-burn, loaderx-candle) that run their own producers
/// over a [`LoaderBuilder`]'s settings instead of building its loader: the settings checked
/// into a [`LoaderState`] ([`resolve`](adapter::resolve), [`plan`](adapter::plan)), the
/// thread settings, the data fingerprint of a framework's dataset, and the types a state's
/// [`indexer`](LoaderState::indexer) takes and gives. Not needed to use a loader.
pub mod adapter {
    pub use crate::loader::adapter::{
        batch_streams, checked, data_fingerprint, plan, prefetch_depth, resolve, thread_count,
        unpadded_ragged,
    };
    pub use crate::loader::{Indexer, StreamData};
}

/// For the faces whose callers fork (Python's workers, a C program's children): the pool a forked
/// child's engine calls run on.
pub mod fork {
    pub use crate::store::forked_child_pool as child_pool;
}

/// What the engine found of the CPU it runs on: the choices a store follows unless its options
/// name others, for a bench's or a log's machine report.
pub mod cpu {
    pub use crate::sys::{NearCopyCalibration, cpu_signature as signature, fixed_stride_hint_below};
}

/// The page cache, for benchmarks and tests of cold reads: a file's or a store's pages evicted
/// ([`evict`](pagecache::evict)) and counted ([`resident_pages`](pagecache::resident_pages)).
/// Linux only; elsewhere both are `Unsupported` I/O errors.
pub mod pagecache {
    pub use crate::sys::{PageCount, evict, resident_pages};
}

/// What a program built on the engine may set for its own process, at its edge (the engine
/// changes nothing of the process it runs in).
pub mod process {
    pub use crate::sys::file_size_limit_as_error;
}

/// Datasets written back out in other formats.
pub mod export {
    pub use crate::convert::export::npy;
    pub use crate::convert::tokens::megatron;
}
