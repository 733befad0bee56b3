//! Writing token files others read: Megatron's `.bin`/`.idx` ([`MegatronWriter`]) and llm.c's
//! token files ([`write_llmc`]). Each file is written under a `.partial` name, synced, and
//! renamed into place: a reader never sees half a file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::views::dtype_of;
use crate::format::tokens::{TokenType, encode_llmc_header, encode_megatron_header};
use crate::{Element, Error, Result};

fn partial(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

/// Creates `path`'s `.partial` file, refusing an existing `path` unless `overwrite`.
fn create(path: &Path, overwrite: bool) -> Result<(PathBuf, BufWriter<File>)> {
    if !overwrite && std::fs::symlink_metadata(path).is_ok() {
        return Err(Error::AlreadyExists { path: path.to_path_buf() });
    }
    let tmp = partial(path);
    // A stale .partial of ours (a writer killed before its rename) is replaced; the exclusive
    // create refuses anything put there in between, and never follows a link.
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", &tmp, e)),
    }
    let f =
        File::options().write(true).create_new(true).open(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    Ok((tmp, BufWriter::with_capacity(1 << 20, f)))
}

/// Flushes, syncs and renames `tmp` to `path`.
fn seal(tmp: &Path, w: BufWriter<File>, path: &Path) -> Result<()> {
    let f = w.into_inner().map_err(|e| Error::io("write", tmp, e.into_error()))?;
    f.sync_all().map_err(|e| Error::io("sync", tmp, e))?;
    std::fs::rename(tmp, path).map_err(|e| Error::io("rename", tmp, e))
}

fn token_bytes<T: Element>(token: TokenType, tokens: &[T]) -> Result<&[u8]> {
    super::little_endian_host()?;
    if T::DTYPE != dtype_of(token) {
        return Err(Error::InvalidArgument(format!(
            "{} tokens given to a file of {} tokens",
            T::DTYPE,
            token.name()
        )));
    }
    Ok(bytemuck::cast_slice(tokens))
}

/// Writes a Megatron-LM indexed dataset, `PREFIX.bin` and `PREFIX.idx`, one document (of one
/// sequence) at a time, as Megatron's `IndexedDatasetBuilder` does: Megatron and loaderx read it.
#[derive(Debug)]
pub struct MegatronWriter {
    token: TokenType,
    bin: (PathBuf, PathBuf, BufWriter<File>),
    idx: PathBuf,
    overwrite: bool,
    lengths: Vec<i32>,
}

impl MegatronWriter {
    /// Starts `prefix.bin` and `prefix.idx` of `token` tokens (a type Megatron has a code for:
    /// not `u32`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `u32`; [`Error::AlreadyExists`] for an existing `.bin` or
    /// `.idx` without `overwrite`; [`Error::Io`].
    pub fn create(prefix: impl AsRef<Path>, token: TokenType, overwrite: bool) -> Result<MegatronWriter> {
        if token.megatron_code().is_none() {
            return Err(Error::InvalidArgument(format!(
                "Megatron has no dtype code for {} tokens",
                token.name()
            )));
        }
        let prefix = prefix.as_ref().as_os_str().to_owned();
        let (mut bin, mut idx) = (prefix.clone(), prefix);
        bin.push(".bin");
        idx.push(".idx");
        let (bin, idx) = (PathBuf::from(bin), PathBuf::from(idx));
        if !overwrite && std::fs::symlink_metadata(&idx).is_ok() {
            return Err(Error::AlreadyExists { path: idx });
        }
        let (tmp, w) = create(&bin, overwrite)?;
        Ok(MegatronWriter { token, bin: (bin, tmp, w), idx, overwrite, lengths: Vec::new() })
    }

    /// Appends a document of `tokens` (of the file's token type).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for tokens of another type or a document of 2^31 tokens or
    /// more (the index's lengths are `i32`); [`Error::Io`].
    pub fn add_document<T: Element>(&mut self, tokens: &[T]) -> Result<()> {
        let bytes = token_bytes(self.token, tokens)?;
        self.add_document_le(bytes)
    }

    /// Appends a document given as its tokens' little-endian bytes (a binding's arrays).
    ///
    /// # Errors
    /// As [`MegatronWriter::add_document`], and [`Error::InvalidArgument`] for bytes that are
    /// not a whole number of tokens.
    pub fn add_document_le(&mut self, bytes: &[u8]) -> Result<()> {
        super::little_endian_host()?;
        let size = self.token.size();
        if !bytes.len().is_multiple_of(size) {
            return Err(Error::InvalidArgument(format!(
                "{} bytes are not a whole number of {} tokens",
                bytes.len(),
                self.token.name()
            )));
        }
        let n = bytes.len() / size;
        let len = i32::try_from(n).map_err(|_| {
            Error::InvalidArgument(format!("a document of {n} tokens: Megatron's lengths are i32"))
        })?;
        let (_, tmp, w) = &mut self.bin;
        w.write_all(bytes).map_err(|e| Error::io("write", &*tmp, e))?;
        self.lengths.push(len);
        Ok(())
    }

    /// Documents written so far.
    pub fn documents(&self) -> usize {
        self.lengths.len()
    }

    /// Writes the index and puts both files in place (the `.bin`, then the `.idx`). Returns the
    /// tokens written.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub fn finish(self) -> Result<u64> {
        let size = self.token.size() as i64;
        let n = self.lengths.len() as u64;
        let (idx_tmp, mut w) = create(&self.idx, self.overwrite)?;
        let header = encode_megatron_header(self.token, n, n + 1).expect("checked at create");
        let mut body = Vec::with_capacity(12 * self.lengths.len() + 8 * (self.lengths.len() + 1));
        body.extend(self.lengths.iter().flat_map(|l| l.to_le_bytes()));
        let mut at = 0i64;
        for &l in &self.lengths {
            body.extend(at.to_le_bytes());
            at += i64::from(l) * size;
        }
        body.extend((0..=n as i64).flat_map(|d| d.to_le_bytes()));
        w.write_all(&header)
            .and_then(|()| w.write_all(&body))
            .map_err(|e| Error::io("write", &idx_tmp, e))?;
        let (bin, bin_tmp, bw) = self.bin;
        seal(&bin_tmp, bw, &bin)?;
        seal(&idx_tmp, w, &self.idx)?;
        Ok((at / size) as u64)
    }
}

/// Writes `tokens` as an llm.c token file at `path` (a 1,024-byte header, then the tokens):
/// `u16` tokens under magic 20240520 (GPT-2), `u32` under 20240801 (Llama-3).
///
/// # Errors
/// [`Error::InvalidArgument`] for another token type or 2^31 tokens or more (llm.c's count is
/// an `i32`); [`Error::AlreadyExists`] without `overwrite`; [`Error::Io`].
pub fn write_llmc<T: Element>(path: impl AsRef<Path>, tokens: &[T], overwrite: bool) -> Result<()> {
    super::little_endian_host()?;
    let token = match T::DTYPE {
        crate::DType::U16 => TokenType::U16,
        crate::DType::U32 => TokenType::U32,
        other => {
            return Err(Error::InvalidArgument(format!(
                "llm.c token files hold u16 or u32 tokens, not {other}"
            )));
        }
    };
    write_llmc_le(path, token, bytemuck::cast_slice(tokens), overwrite)
}

/// [`write_llmc`] of tokens given as their little-endian bytes (a binding's arrays).
///
/// # Errors
/// As [`write_llmc`], and [`Error::InvalidArgument`] for bytes that are not a whole number of
/// tokens.
pub fn write_llmc_le(path: impl AsRef<Path>, token: TokenType, bytes: &[u8], overwrite: bool) -> Result<()> {
    let path = path.as_ref();
    if !bytes.len().is_multiple_of(token.size()) {
        return Err(Error::InvalidArgument(format!(
            "{} bytes are not a whole number of {} tokens",
            bytes.len(),
            token.name()
        )));
    }
    let n = bytes.len() / token.size();
    let header = encode_llmc_header(token, n as u64).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{n} {} tokens: llm.c holds u16 or u32 tokens, at most 2^31 - 1",
            token.name()
        ))
    })?;
    let (tmp, mut w) = create(path, overwrite)?;
    w.write_all(&header).and_then(|()| w.write_all(bytes)).map_err(|e| Error::io("write", &tmp, e))?;
    seal(&tmp, w, path)
}
