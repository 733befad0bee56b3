//! Writing token files others read: Megatron's `.bin`/`.idx` ([`MegatronWriter`]) and llm.c's
//! token files ([`write_llmc`]). Each file is written under a temporary name of the writer's
//! own, synced, and renamed into place: a reader never sees half a file, a second writer of the
//! same output file is refused (`.OUT.loaderx.lock`), and no file the writer did not create is
//! removed.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::views::dtype_of;
use crate::format::tokens::{TokenType, encode_llmc_header, encode_megatron_header};
use crate::store::{Temporary, check_target};
use crate::{Element, Error, Result};

/// `path` made absolute (`..` kept as the kernel takes it). An empty path, or one that names a
/// directory by its form (ending in a separator, `.` or `..`), is refused: made absolute, `d/.`
/// named `d` and a pair beside the directory was replaced (look 176, L176-4).
fn absolute(path: &Path) -> Result<PathBuf> {
    let text = path.as_os_str().as_encoded_bytes();
    // `Path::components` drops a trailing separator and `.`: those are read from the text.
    let dir_form = text.last().is_some_and(|&b| std::path::is_separator(char::from(b)))
        || text.len() >= 2
            && text.ends_with(b".")
            && std::path::is_separator(char::from(text[text.len() - 2]))
        || !matches!(path.components().next_back(), Some(std::path::Component::Normal(_)));
    if text.is_empty() {
        return Err(Error::InvalidArgument("the output's path is empty".into()));
    }
    if dir_form {
        return Err(Error::InvalidArgument(format!(
            "{}: names a directory, not a file (a token file's path or a Megatron prefix ends in a name)",
            path.display()
        )));
    }
    std::path::absolute(path).map_err(|e| Error::io("resolve", path, e))
}

/// The writer lock of the output file `path`, `.NAME.loaderx.lock` beside it (a name of
/// loaderx's own: a user's `NAME.lock` or `PREFIX.lock` is never taken, cut or removed): a
/// second writer of the same file (a Megatron writer's `.bin` or an llm.c writer's) is refused
/// (`Locked`, naming the first) instead of crossing its files with this one's.
fn lock(path: &Path) -> Result<crate::store::WriteLock> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{} does not name a file", path.display())))?;
    let mut lock = std::ffi::OsString::from(".");
    lock.push(name);
    lock.push(".loaderx.lock");
    let lock = lock.into_string().map_err(|_| {
        Error::InvalidArgument(format!(
            "{} is not a UTF-8 name (its lock file's name would not be)",
            path.display()
        ))
    })?;
    crate::store::WriteLock::acquire_named(dir, &lock, &format!("writing {}", path.display()))
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
    bin: PathBuf,
    idx: PathBuf,
    tmp: Temporary,
    overwrite: bool,
    lengths: Vec<i32>,
    /// Held from `create` to `finish`: one writer an output file (the `.bin`'s and the `.idx`'s).
    locks: [crate::store::WriteLock; 2],
}

impl MegatronWriter {
    /// Starts `prefix.bin` and `prefix.idx` of `token` tokens (a type Megatron has a code for:
    /// not `u32`). The writer holds a lock on each of the two files until it finishes or is
    /// dropped (a second writer of either is `Locked`); it writes into temporary files of its
    /// own, which a drop removes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `u32`, or a prefix ending in `.bin` or `.idx`;
    /// [`Error::AlreadyExists`] for an existing `.bin` or
    /// `.idx` without `overwrite`; [`Error::NotReplaceable`] for one that is not a regular file;
    /// [`Error::Locked`]; [`Error::Io`].
    pub fn create(prefix: impl AsRef<Path>, token: TokenType, overwrite: bool) -> Result<MegatronWriter> {
        if token.megatron_code().is_none() {
            return Err(Error::InvalidArgument(format!(
                "Megatron has no dtype code for {} tokens",
                token.name()
            )));
        }
        // Absolute: a working directory changed while documents are added (a Python generator's
        // `os.chdir`) left the temporary behind, the rename failing (look 173, L173-2).
        let prefix = &absolute(prefix.as_ref())?;
        // `P.bin` as a prefix writes `P.bin.bin` and `P.bin.idx`, and every reader takes `P.bin`
        // for the `.bin` of the pair `P` (look 108, L108-1: another dataset's tokens read).
        if let Some(ext) = prefix.extension().and_then(|e| e.to_str()).filter(|e| ["bin", "idx"].contains(e))
        {
            return Err(Error::InvalidArgument(format!(
                "{}: a Megatron prefix is named without its .{ext}: the writer adds .bin and .idx, and \
                 readers take a name ending in .{ext} for one file of a pair",
                prefix.display()
            )));
        }
        let with = |ext: &str| {
            let mut p = prefix.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p)
        };
        let (bin, idx) = (with(".bin"), with(".idx"));
        let locks = [lock(&bin)?, lock(&idx)?];
        check_target(&bin, overwrite)?;
        check_target(&idx, overwrite)?;
        let tmp = Temporary::create(&bin)?;
        Ok(MegatronWriter { token, bin, idx, tmp, overwrite, lengths: Vec::new(), locks })
    }

    /// Appends a document of `tokens` (of the file's token type).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for tokens of another type, a negative id, or a document of
    /// 2^31 tokens or more (the index's lengths are `i32`); [`Error::Io`].
    pub fn add_document<T: Element>(&mut self, tokens: &[T]) -> Result<()> {
        let bytes = token_bytes(self.token, tokens)?;
        self.add_document_le(bytes)
    }

    /// Appends a document given as its tokens' little-endian bytes (a binding's arrays).
    ///
    /// # Errors
    /// As [`MegatronWriter::add_document`], and [`Error::InvalidArgument`] for bytes that are
    /// not a whole number of tokens or hold a negative id.
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
        // A token id is never negative: what `verify` calls damage is not written (look 179,
        // L179-4).
        if let Some((i, t)) = self.token.first_outside(bytes, u64::MAX) {
            return Err(Error::InvalidArgument(format!(
                "document {}: token {i} is {t}; a token id is never negative",
                self.lengths.len()
            )));
        }
        self.tmp.write(bytes)?;
        self.lengths.push(len);
        Ok(())
    }

    /// Documents written so far.
    pub fn documents(&self) -> usize {
        self.lengths.len()
    }

    /// Writes the index, syncs both files, and puts them in place (the `.bin`, then the `.idx`):
    /// nothing is renamed until both are durable, so a full disk or a failed write leaves the
    /// dataset there before untouched. Returns the tokens written.
    ///
    /// Without overwrite, a `.bin` or `.idx` that appeared since `create` is kept
    /// ([`Error::AlreadyExists`]). The two renames are not one atomic step: a crash between them
    /// leaves the new `.bin` beside the old `.idx`, which an open refuses (their sizes disagree).
    ///
    /// # Errors
    /// [`Error::AlreadyExists`]; [`Error::NotReplaceable`]; [`Error::Io`] naming the file.
    pub fn finish(mut self) -> Result<u64> {
        let size = self.token.size() as i64;
        let n = self.lengths.len() as u64;
        let mut idx = Temporary::create(&self.idx)?;
        let header = encode_megatron_header(self.token, n, n + 1).expect("checked at create");
        idx.write(&header)?;
        // Streamed through the temporary's buffer, array by array: nothing but the lengths (4
        // bytes a document, kept as documents are added) is held for the index.
        for &l in &self.lengths {
            idx.write(&l.to_le_bytes())?;
        }
        let mut at = 0i64;
        for &l in &self.lengths {
            idx.write(&at.to_le_bytes())?;
            at += i64::from(l) * size;
        }
        for d in 0..=n as i64 {
            idx.write(&d.to_le_bytes())?;
        }
        self.tmp.sync()?;
        idx.sync()?;
        check_target(&self.bin, self.overwrite)?;
        check_target(&self.idx, self.overwrite)?;
        // A bare name's directory is the working one (look 132, L132-2).
        let dir = self.bin.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // The directory the writer locked at `create` must be the one its names lead to now: a
        // link on the way moved meanwhile had the old `.idx` of another pair removed (look 176,
        // L176-2). Nothing is replaced.
        if !self.locks.iter().all(crate::store::WriteLock::still_here) {
            return Err(Error::NotReplaceable {
                path: self.bin.clone(),
                reason:
                    "the directory its name leads to is not the one the writer began in (a link on the way \
                         changed): nothing replaced; write it again"
                        .into(),
            });
        }
        // The `.idx` of a pair being replaced goes first, durably: stopped between the two
        // renames, a rewrite left the new `.bin` beside the old `.idx`, which read pieces of
        // other documents without an error where the token count matched (look 174, L174-1). A
        // `.bin` alone opens as no pair.
        if self.overwrite && std::fs::symlink_metadata(&self.idx).is_ok() {
            std::fs::remove_file(&self.idx).map_err(|e| Error::io("remove", &self.idx, e))?;
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| Error::io("sync directory", dir, e))?;
        }
        self.tmp.place(&self.bin, self.overwrite)?;
        if let Err(e) = idx.place(&self.idx, self.overwrite) {
            if !self.overwrite {
                // The .bin placed a moment ago is this writer's (nothing was there): taken back.
                let _ = std::fs::remove_file(&self.bin);
            }
            return Err(e);
        }
        let _ = File::open(dir).and_then(|d| d.sync_all());
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
    let path = &absolute(path.as_ref())?;
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
    let _lock = lock(path)?;
    check_target(path, overwrite)?;
    let mut tmp = Temporary::create(path)?;
    tmp.write(&header)?;
    tmp.write(bytes)?;
    tmp.sync()?;
    tmp.place(path, overwrite)
}
