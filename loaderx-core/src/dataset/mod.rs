//! Typed views over stores: element types, schema, dense and ragged datasets, the writer.
//!
//! A dataset is a store plus `schema.msgpack` (its kind, dtype and item or row shape); a store
//! set is a directory whose `storeset.msgpack` lists stores (parts) read as one index space.
//! Datasets read through one `Backing` whatever holds the records (a store, a set, a
//! remote store, memory), and write through [`DatasetWriter`], all or nothing.
//!
//! Names: a *source* ([`DenseSource`], [`RaggedSource`]) is a dataset whose element type is known
//! at run time (what a loader stream holds); a *dataset* ([`DenseDataset<T>`], [`RaggedDataset<T>`])
//! is typed; a *backing* is what holds the records under either.
//!
//! | file | what |
//! | --- | --- |
//! | `schema` | `schema.msgpack`: kind, dtype, item shape; the one check read and write share |
//! | `dense` | [`DenseSource`] / [`DenseDataset`]: one fixed-stride gather per batch through the source's records (`concat`: runs per part) |
//! | `ragged` | [`RaggedSource`] / [`RaggedDataset`], [`RaggedArray`] (offsets + values): one variable gather per batch |
//! | `pad` | [`Pad`], [`Padded`], `RaggedArray::pad` (values, lengths, mask) and [`pad`] |
//! | `records` | `Records`: a source's one `Arc<dyn Backing>` (a store, a set, a remote store, memory, a concatenation) |
//! | `selection` | [`Selection`] (a range, indices, a split by fraction and seed) and the views it makes |
//! | `open` | opening by path: a store, a store set or an `s3://` URL, the kind checked once |
//! | `set` | store sets: [`stitch`] (one store never named twice), `stitch_datasets`, [`set_parts`] |
//! | `set_open` | a set opened: `StoreSet` (its parts checked: `check_part`, for remote sets too), one index space |
//! | `set_remote` | store sets on object storage: `stitch_remote`, `remote_set` (a set's schema and parts) |
//! | `side` | the side files of a directory of datasets, compared a block at a time |
//! | `parts` | directories of parts: [`part_name`], [`part_dirs`] (numeric order, a missing or doubled number refused) |
//! | `dtype` | `DType`, `ArrayData`, `DenseArray`, `Element` |
//! | `writer` | [`DatasetWriter`]: store + schema through `OUT.partial`, locked, renamed into place |
//! | `staging` | `OUT.partial` taken and locked by one writer; a dataset directory's files removed; killed writers' stagings swept |
//! | `replace` | what overwriting may replace (a loaderx dataset, never the user's files) and the replacing |
//! | `set_staging` | a stitch's staging directory: locked, its copies listed, placed, a killed one's removed |
//! | `killed_asides` | a forced `convert images`'s aside (`OUT.old`), marked, and a killed one's removed |
//! | `set_aside` | the datasets a forced conversion into a directory of datasets replaces: put back if it fails |

mod dense;
pub(crate) mod dtype;
#[cfg(feature = "images")]
mod killed_asides;
mod open;
mod pad;
mod parts;
mod ragged;
mod ragged_array;
mod records;
mod replace;
mod schema;
mod selection;
mod set;
mod set_aside;
mod set_open;
#[cfg(feature = "remote")]
mod set_remote;
mod set_staging;
mod side;
mod staging;
mod writer;

pub use dense::{DenseDataset, DenseSource};
#[cfg(feature = "images")]
pub(crate) use killed_asides::remove_killed_asides_dir_of;
pub(crate) use pad::fill_bytes;
pub use pad::{Pad, Padded, pad};
#[cfg(feature = "remote")]
pub use parts::remote_part_urls;
pub use parts::{PART_PREFIX, part_dirs, part_name};
pub use ragged::{RaggedDataset, RaggedSource};
pub use ragged_array::RaggedArray;
#[cfg(feature = "images")]
pub(crate) use replace::{check_free_dir_of, check_replaceable_dir_of, clear_staging_dir_of, place_dir_of};
pub(crate) use replace::{
    check_free_to_replace, others_in_dir_of, refuse_dataset_as_dir_of, remove_killed_stagings,
};
pub use schema::{Kind, SCHEMA_FILE, Schema};
pub use selection::Selection;
pub use set::{SET_FILE, StitchSummary, set_parts, stitch, stitch_datasets};
pub(crate) use set_aside::SetAside;
#[cfg(feature = "remote")]
pub use set_remote::{
    RemotePart, RemoteSet, remote_set, remote_set_parts, remote_set_schema_file, stitch_remote,
};
pub(crate) use set_staging::is_stitch_staging;
pub(crate) use staging::remove_dataset_dir;
#[cfg(feature = "images")]
pub(crate) use staging::{lock_staging, out_and_staging};
#[cfg(feature = "images")]
pub(crate) use writer::STAGING_LOCK;
#[cfg(feature = "parquet")]
pub(crate) use writer::{DIRECT_BYTES, DIRECT_RECORDS};
pub use writer::{DatasetWriter, ProgressFn, WriteOptions};
