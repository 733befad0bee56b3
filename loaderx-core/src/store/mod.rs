//! Zrecord: the on-disk record store.
//!
//! Layout of a store directory (see `format` for the bytes):
//! - `meta.zr`: header + fixed sparse table of 2^24 entries, memory-mapped and used in place;
//! - `0.zr`, `1.zr`, ...: chunk files of densely packed record bytes, at most 4 GiB each;
//! - `dict.zr`: the trained zstd dictionary of `zstd_dict` stores.

pub(crate) mod format;
