//! Typed views over stores: element types, schema, dense and ragged datasets, the writer.

mod dense;
pub(crate) mod dtype;
mod open;
mod pad;
mod parts;
mod ragged;
mod records;
mod schema;
mod selection;
mod set;
mod writer;

pub use dense::{DenseDataset, DenseSource};
pub use pad::{Pad, Padded, pad};
#[cfg(feature = "remote")]
pub use parts::remote_part_urls;
pub use parts::{PART_PREFIX, part_dirs, part_name};
pub use ragged::{RaggedArray, RaggedDataset, RaggedSource};
pub use schema::{Kind, SCHEMA_FILE, Schema};
pub use selection::Selection;
#[cfg(feature = "remote")]
pub use set::stitch_remote;
pub use set::{SET_FILE, StitchSummary, set_parts, stitch, stitch_datasets};
pub(crate) use writer::remove_dataset_dir;
#[cfg(feature = "parquet")]
pub(crate) use writer::{DIRECT_BYTES, DIRECT_RECORDS};
pub use writer::{DatasetWriter, ProgressFn, WriteOptions};
#[cfg(feature = "images")]
pub(crate) use writer::{STAGING_LOCK, check_replaceable, lock_staging};
