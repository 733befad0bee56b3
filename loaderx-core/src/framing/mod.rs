//! Record-aligned byte-range planning over immutable inputs, with mmap-chunker-core 0.2.6's
//! semantics.
//!
//! Framing, not parsing: a delimiter is a raw byte (or byte pattern); quoting and escaping
//! are not interpreted. Modes:
//! - delimiter framing with a target chunk size: [`chunk_boundaries`], [`ChunkCursor`] and
//!   their multi-byte pattern forms;
//! - fixed-size chunks by arithmetic: [`fixed_chunk_count`], [`fixed_chunk_bounds`];
//! - N-way record-aligned partitioning of one buffer or file: [`partition`], [`plan_file`];
//! - ordered multi-file partitioning: [`partition_files`], [`plan_files`].
//!
//! Plans are plain [`PartRange`] / [`FilePartRange`] values that outlive the mapping; a
//! consumer reads its range through a [`MappedFile`]. Delimiter search is `memchr` /
//! `memchr::memmem`; planning probes forward from each ideal cut, never scanning the file.
//!
//! | file | what |
//! | --- | --- |
//! | `chunk` | delimiter framing with a target size: `chunk_boundaries`, `ChunkCursor` |
//! | `search` | the delimiter and pattern search behind every planner |
//! | `fixed` | fixed-size chunks by arithmetic |
//! | `partition` | N-way record-aligned partitions of one buffer |
//! | `file` | `plan_file`: the same over a file, through a mapping |
//! | `multi` | ordered multi-file partitioning: `partition_files`, `plan_files` |
//! | `range` | `PartRange`, `FilePartRange`: the plans |

mod chunk;
mod file;
mod fixed;
mod multi;
mod partition;
mod range;
mod search;

pub use crate::sys::MappedFile;
pub use chunk::{ChunkCursor, chunk_boundaries, chunk_boundaries_pattern};
pub use file::{plan_file, plan_files};
pub use fixed::{fixed_chunk_bounds, fixed_chunk_count};
pub use multi::partition_files;
pub use partition::{partition, partition_pattern};
pub use range::{FilePartRange, PartRange};
