//! Converters: other formats in, datasets (store + schema) out, streamed in bounded blocks.
//!
//! Every converter writes through [`DatasetWriter`](crate::DatasetWriter), so it refuses an
//! existing output unless [`WriteOptions::overwrite`](crate::WriteOptions::overwrite) is set,
//! and a converter that fails half way leaves nothing that opens as a complete dataset (neither
//! `OUT` nor `OUT.partial`). Input is read in blocks of at most [`BLOCK_BYTES`] (plus one record),
//! so memory does not grow with the input.
//!
//! | function | input | output |
//! | --- | --- | --- |
//! | [`npy`] | a NumPy `.npy` file (v1/v2/v3, C order, either byte order) | dense, axis 0 = records |
//! | [`safetensors`] | a safetensors file | one dense dataset per tensor in a directory |
//! | [`idx`] | MNIST IDX, plain or gzip | dense, axis 0 = records |
//! | [`from_arrays`] | [`DenseArray`](crate::DenseArray)s of one shape | dense |
//! | [`from_ragged`] | `Vec<T>`s of whole rows | ragged |
//! | [`from_bytes`] | byte records | ragged `u8` |
//! | [`dir`] | a directory, one record per regular file | ragged `u8` |
//! | [`jsonl`] | JSONL / newline-delimited files, one record per line | ragged `u8` |
//! | [`tokens`](fn@tokens) | a token file ([`TokenFile`](crate::tokens::TokenFile)) | ragged, a record a document (or `chunk` tokens) |
//! | `parquet` (feature `parquet`) | Parquet files, one dataset per column | dense, ragged or `u8` |
//! | `arrow` (feature `arrow`) | Arrow IPC streams (the Python face's Ray sink), per column | dense, ragged or `u8` |
//! | `images` (feature `images`) | an image folder, one subdirectory per class | dense `u8` images + labels |
//! | `encoded_images` (feature `images`) | the same, each file kept encoded | `image` records + labels |
//! | `image_folder` (feature `images`) | the same, read into memory unconverted (a first run) | an in-memory source + labels |
//!
//! Every converter has a `_part` twin ([`npy_part`], [`safetensors_part`], [`idx_part`],
//! [`dir_part`], [`jsonl_part`], `parquet_part`, `images_part`) that converts only part `k` of
//! `n` ([`Part`], given or read from a scheduler's environment with [`Part::from_env`]), planned
//! with no coordination: the parts, in order, hold exactly the records of the whole conversion,
//! and [`stitch`](crate::stitch) (or [`stitch_datasets`] for the converters that write a
//! directory of datasets) makes them one dataset again. Under a scheduler each part goes to
//! `OUT/part-00007` ([`part_name`], [`Part::name`]), and [`part_dirs`] lists such a directory
//! back in part order, refusing missing or doubled numbers.
//!
//! The reverse direction for `.npy` is [`crate::export::npy`], for token files
//! [`crate::export::megatron`].

#[cfg(feature = "arrow")]
pub mod arrow;
mod block;
mod dir;
#[cfg(feature = "images")]
mod encoded;
pub(crate) mod export;
#[cfg(feature = "images")]
mod folder;
mod idx;
#[cfg(feature = "images")]
mod image_io;
#[cfg(feature = "images")]
mod images;
mod iter;
mod jsonl;
mod mnist;
mod npy;
#[cfg(feature = "parquet")]
mod parquet;
mod part;
mod safetensors;
mod summary;
pub(crate) mod tokens;

#[cfg(feature = "remote")]
pub use crate::dataset::remote_part_urls;
pub use crate::dataset::{PART_PREFIX, part_dirs, part_name, stitch_datasets};
pub use crate::sys::cache_dir;
pub use block::BLOCK_BYTES;
pub use dir::{dir, dir_part};
#[cfg(feature = "images")]
pub use encoded::{
    EncodedOptions, IMAGE_FOLDER_MAX_BYTES, ImageFolder, encoded_images, encoded_images_part, image_folder,
};
pub use idx::{IdxHeader, idx, idx_part};
#[cfg(feature = "images")]
pub use images::{ImageOptions, ImagesSummary, Resize, fit, images, images_part};
pub use iter::{from_arrays, from_bytes, from_ragged};
pub use jsonl::{jsonl, jsonl_part};
pub use mnist::{MnistSplit, mnist_dir, mnist_stores};
pub use npy::{NpyHeader, npy, npy_part};
#[cfg(feature = "parquet")]
pub use parquet::{Nulls, ParquetColumn, parquet, parquet_part};
pub use part::Part;
pub use safetensors::{safetensors, safetensors_part};
pub use summary::ConvertSummary;
pub use tokens::tokens;
