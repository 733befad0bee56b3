//! Token streams: the token files language models train from, read where they lie, with no
//! conversion. A [`TokenFile`] maps a Megatron-LM indexed dataset (`.bin` + `.idx`), an llm.c
//! token file or a headerless token memmap (nanoGPT, OLMo, dolma) read-only, every header field
//! checked against the file's size first (the layouts: `format::tokens`). Its samplers are
//! dense sources the loader takes as any other: [`TokenFile::windows`] (windows at any offset)
//! and [`TokenFile::sequences`] (Megatron's GPT samples over shuffled documents). The way back:
//! [`MegatronWriter`] and [`write_llmc`].
//!
//! | file | what |
//! | --- | --- |
//! | `file` | [`TokenFile`]: the layouts found, mapped and checked; `verify` |
//! | `check` | a Megatron index's documents checked in one pass; their lengths, where kept |
//! | `documents` | a Megatron index's documents in a seeded order; a sample's place |
//! | `views` | the samples as a dense source (one `Backing` for both samplers) |
//! | `write` | [`MegatronWriter`], [`write_llmc`] |
//!
//! Token files are little endian; a big-endian host is refused at the open.

mod check;
mod documents;
mod file;
mod views;
mod write;

pub use crate::format::tokens::TokenType;
pub use file::{TokenFile, TokenFormat};
pub(crate) use views::dtype_of;
pub use write::{MegatronWriter, write_llmc, write_llmc_le};

/// Token files are little endian: a big-endian host would read them byte-swapped.
pub(crate) fn little_endian_host() -> crate::Result<()> {
    if cfg!(target_endian = "big") {
        return Err(crate::Error::InvalidArgument("token files are little endian; this host is not".into()));
    }
    Ok(())
}
