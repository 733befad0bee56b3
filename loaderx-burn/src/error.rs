//! The one error type of `loaderx-burn`.

use std::path::PathBuf;

/// Everything that can go wrong in `loaderx-burn`.
///
/// burn's traits carry errors as [`burn::data::dataset::DatasetError`]; this enum is what is
/// inside it (`DatasetError::source()` gives it back), so a failure keeps the store path and the
/// record index loaderx names. Messages say what failed and where; the cause is the `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A loaderx store, dataset or loader failed (I/O, a corrupt record, a bad argument...).
    #[error(transparent)]
    Core(#[from] loaderx_core::Error),
    /// An item could not be encoded as MessagePack while writing an item store.
    #[error("cannot encode item {index} as MessagePack for {}", path.display())]
    Encode {
        /// The item store being written.
        path: PathBuf,
        /// The item's position in what was being written.
        index: u64,
        /// The encoder's error.
        #[source]
        source: rmp_serde::encode::Error,
    },
    /// A stored record is not the MessagePack encoding of the item type asked for.
    #[error("record {index} of {} does not decode as the item type", path.display())]
    Decode {
        /// The item store.
        path: PathBuf,
        /// The record's index.
        index: u64,
        /// The decoder's error.
        #[source]
        source: rmp_serde::decode::Error,
    },
    /// The burn dataset being migrated failed to hand out an item.
    #[error("the source dataset failed at item {index}")]
    Source {
        /// The index asked of the source dataset (the first of the failed batch).
        index: u64,
        /// The source dataset's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The burn dataset a [`StepLoader`](crate::StepLoader) reads failed to hand out a step's
    /// items.
    #[error("the dataset failed to hand out the items of step {step}")]
    Dataset {
        /// The loader step whose items were asked for.
        step: u64,
        /// The dataset's error.
        #[source]
        source: burn::data::dataset::DatasetError,
    },
    /// A stream of a batch is missing or does not have the dtype or shape asked for.
    #[error("stream {name:?}: {reason}")]
    Stream {
        /// The stream name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A caller-provided argument does not fit the operation.
    #[error("{0}")]
    InvalidArgument(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps this error as burn's [`DatasetError`](burn::data::dataset::DatasetError).
    pub fn into_dataset_error(self) -> burn::data::dataset::DatasetError {
        burn::data::dataset::DatasetError::new(self)
    }
}
