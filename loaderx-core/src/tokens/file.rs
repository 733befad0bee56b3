//! [`TokenFile`]: a token file opened read-only and mapped, its header checked.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::format::tokens::{
    LLMC_HEADER_LEN, MegatronHeader, TokenType, is_llmc, llmc_header, megatron_header,
};
use crate::sys::MappedFile;
use crate::{Error, Result};

/// Which layout a [`TokenFile`] has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenFormat {
    /// Megatron-LM's indexed dataset: the tokens in the `.bin`, sequences and documents in the
    /// `.idx` beside it.
    Megatron {
        /// The `.idx`.
        index: PathBuf,
    },
    /// llm.c's token file: a 1,024-byte header, then the tokens.
    Llmc {
        /// `header[1]`, as written.
        version: i32,
    },
    /// Tokens and nothing else (nanoGPT's `train.bin`, OLMo's and dolma's memmaps).
    Raw,
}

/// Megatron's index, mapped, with its header.
#[derive(Debug)]
pub(crate) struct MegatronIndex {
    pub(crate) map: MappedFile,
    pub(crate) header: MegatronHeader,
}

/// A token file opened read-only: its tokens mapped, never copied until a batch is gathered.
///
/// The file must not change while it is open (an immutable input, as every input loaderx maps).
/// A clone shares the mappings.
#[derive(Debug, Clone)]
pub struct TokenFile {
    pub(crate) path: PathBuf,
    pub(crate) format: TokenFormat,
    pub(crate) token: TokenType,
    pub(crate) data: Arc<MappedFile>,
    /// Byte offset of token 0 in `data`.
    pub(crate) start: usize,
    pub(crate) tokens: u64,
    pub(crate) index: Option<Arc<MegatronIndex>>,
    /// Token ids must be below this, when given ([`TokenFile::vocabulary`]).
    pub(crate) vocab: Option<u64>,
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::BadInput { path: path.to_path_buf(), reason: reason.into(), source: None }
}

/// Opens `path` for reading, a regular file only (a FIFO is refused, not waited on), and maps it.
fn map(path: &Path) -> Result<MappedFile> {
    map_kept(path).map(|(_, m)| m)
}

/// [`map`], and the file it mapped.
fn map_kept(path: &Path) -> Result<(File, MappedFile)> {
    let file: File = crate::sys::open_regular(File::options().read(true), path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            bad(path, "not a regular file")
        } else {
            Error::io("open", path, e)
        }
    })?;
    let mapped = MappedFile::open_file(&file, path)?;
    Ok((file, mapped))
}

/// Opens of a Megatron pair made before one whose `.idx` kept changing is refused (a writer
/// replaces a pair in a few milliseconds; the waits between them double from 1 ms).
const PAIR_ATTEMPTS: u32 = 6;

/// `path` with `ext` appended (`data/corpus` -> `data/corpus.bin`): Megatron names a dataset by
/// its prefix, which may hold dots of its own.
fn with_suffix(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

impl TokenFile {
    /// Opens the token file at `path`, its layout found from what is there: a Megatron dataset
    /// (`path` its `.bin`, its `.idx`, or the prefix both are named by), or an llm.c token file
    /// (its magic). A headerless file needs its token type: [`TokenFile::open_raw`].
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the file and the field for a header, a count or an offset that
    /// the files do not hold, or for a file of no known layout; [`Error::Io`] naming the path.
    pub fn open(path: impl AsRef<Path>) -> Result<TokenFile> {
        super::little_endian_host()?;
        let path = path.as_ref();
        let ext = path.extension().and_then(|e| e.to_str());
        let megatron = match ext {
            Some("idx") => Some((path.with_extension("bin"), path.to_path_buf())),
            Some("bin") if path.with_extension("idx").exists() => {
                Some((path.to_path_buf(), path.with_extension("idx")))
            }
            // A prefix whose `.bin` alone is there names its missing `.idx` (look 178, L178-4).
            _ if !path.exists()
                && (with_suffix(path, ".idx").exists() || with_suffix(path, ".bin").exists()) =>
            {
                Some((with_suffix(path, ".bin"), with_suffix(path, ".idx")))
            }
            _ => None,
        };
        if let Some((bin, idx)) = megatron {
            return TokenFile::open_megatron(&bin, &idx);
        }
        let data = map(path)?;
        if is_llmc(data.bytes()) {
            let h = llmc_header(data.bytes(), data.len())
                .map_err(|e| bad(path, format!("{}: {}", e.field, e.reason)))?;
            return Ok(TokenFile {
                path: path.to_path_buf(),
                format: TokenFormat::Llmc { version: h.version },
                token: h.token,
                data: Arc::new(data),
                start: LLMC_HEADER_LEN,
                tokens: h.tokens,
                index: None,
                vocab: None,
            });
        }
        Err(bad(
            path,
            "no .idx beside it and no llm.c header: a headerless token file needs its token type \
             (TokenFile::open_raw; dtype= from Python)",
        ))
    }

    /// Opens the headerless token file at `path`: tokens of `token` back to back, nothing else.
    ///
    /// # Errors
    /// [`Error::BadInput`] for a file that is not a whole number of tokens, that is an llm.c
    /// token file (a valid header: [`TokenFile::open`] reads it), or a `.bin` with a `.idx`
    /// beside it (a Megatron dataset: the same); [`Error::Io`].
    pub fn open_raw(path: impl AsRef<Path>, token: TokenType) -> Result<TokenFile> {
        super::little_endian_host()?;
        let path = path.as_ref();
        // A Megatron dataset's prefix: not a file, named as what it is (look 178, L178-4).
        if std::fs::symlink_metadata(path).is_err()
            && (with_suffix(path, ".idx").exists() || with_suffix(path, ".bin").exists())
        {
            return Err(bad(
                path,
                "no such file: it is a Megatron dataset's prefix (its .bin and .idx beside it): open it \
                 without a token type, which reads the index and its type",
            ));
        }
        let data = map(path)?;
        // An llm.c file opened as headerless would read its 1,024-byte header as tokens
        // (review N6): refused, naming what it is.
        if is_llmc(data.bytes()) && llmc_header(data.bytes(), data.len()).is_ok() {
            return Err(bad(
                path,
                "it is an llm.c token file (its header's magic and count agree): open it without a token type",
            ));
        }
        // A Megatron dataset's index opened as headerless would read its header and offsets as
        // tokens, and verify them "intact" (look 151, L151-1).
        if data.bytes().starts_with(b"MMIDIDX\x00\x00") {
            return Err(bad(
                path,
                "it is a Megatron dataset's index (its magic): open the dataset's prefix (the path \
                 without .idx) without a token type",
            ));
        }
        // A Megatron dataset's `.bin` opened as headerless would drop its index, whose checks
        // and documents then go unseen, and read it as whatever type was given (look 84).
        let idx = path.with_extension("idx");
        if path.extension().is_some_and(|e| e == "bin") && std::fs::symlink_metadata(&idx).is_ok() {
            return Err(bad(
                path,
                format!(
                    "it is a Megatron dataset's tokens ({} is beside it): open it without a token type, \
                     which reads the index and its type",
                    idx.display()
                ),
            ));
        }
        let size = token.size() as u64;
        if data.len() % size != 0 {
            return Err(bad(
                path,
                format!(
                    "{} bytes is not a whole number of {} tokens ({size} bytes each)",
                    data.len(),
                    token.name()
                ),
            ));
        }
        let tokens = data.len() / size;
        Ok(TokenFile {
            path: path.to_path_buf(),
            format: TokenFormat::Raw,
            token,
            data: Arc::new(data),
            start: 0,
            tokens,
            index: None,
            vocab: None,
        })
    }

    /// The pair `bin` and `idx`, each mapped as the other was: the `.idx` still at its name once
    /// the `.bin` is open. A reader opening a pair a writer replaces (the old `.idx` removed, the
    /// new `.bin` renamed in, then the new `.idx`) between its two opens paired the old `.idx` with
    /// the new `.bin`, and read pieces of other documents (look 176, L176-1): such an open is made
    /// again, a few times, then refused.
    fn open_megatron(bin: &Path, idx: &Path) -> Result<TokenFile> {
        Self::open_megatron_between(bin, idx, &mut || {})
    }

    /// [`TokenFile::open_megatron`], `between` run between each attempt's two opens (a test's
    /// writer).
    fn open_megatron_between(bin: &Path, idx: &Path, between: &mut dyn FnMut()) -> Result<TokenFile> {
        for attempt in 0..PAIR_ATTEMPTS {
            let (file, index) = match map_kept(idx) {
                Ok(kept) => kept,
                // A rewrite removes the old index before its new pair lands (look 174): asked
                // again a moment later while the `.bin` is there (look 178, L178-4).
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound
                        && attempt + 1 < PAIR_ATTEMPTS
                        && bin.exists() =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
                    continue;
                }
                Err(e) => return Err(e),
            };
            // The index's header first: a file that is no index is named before its `.bin` is.
            megatron_header(index.bytes()).map_err(|e| bad(idx, format!("{}: {}", e.field, e.reason)))?;
            between();
            let data = map(bin)?;
            if crate::sys::same_file(&file, idx).unwrap_or(false) {
                return Self::megatron_pair(bin, idx, index, data);
            }
            std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
        }
        Err(Error::Locked {
            path: idx.to_path_buf(),
            reason:
                "it was replaced each time its pair was opened (a writer rewriting it): open it again once \
                     the writer is done"
                    .into(),
        })
    }

    fn megatron_pair(bin: &Path, idx: &Path, index: MappedFile, data: MappedFile) -> Result<TokenFile> {
        let header =
            megatron_header(index.bytes()).map_err(|e| bad(idx, format!("{}: {}", e.field, e.reason)))?;
        let size = header.token.size() as u64;
        if !data.len().is_multiple_of(size) {
            return Err(bad(
                bin,
                format!(
                    "{} bytes is not a whole number of {} tokens, the index's type",
                    data.len(),
                    header.token.name()
                ),
            ));
        }
        // The last sequence must end where the .bin does: a .bin shorter (or longer) than its
        // index says is refused at the open, in O(1); sequences() checks every one.
        if header.sequences > 0 {
            let last = header.sequences - 1;
            let (len, at) = header.sequence(index.bytes(), last).expect("in the checked arrays");
            let end = u64::try_from(len)
                .ok()
                .and_then(|l| l.checked_mul(size))
                .zip(u64::try_from(at).ok())
                .and_then(|(l, a)| l.checked_add(a));
            if end != Some(data.len()) {
                return Err(bad(
                    bin,
                    format!(
                        "{} bytes, but its index {} says sequence {last} ({len} tokens at byte {at}) ends the file",
                        data.len(),
                        idx.display()
                    ),
                ));
            }
        } else if !data.is_empty() {
            return Err(bad(
                bin,
                format!("{} bytes, but its index {} lists no sequence", data.len(), idx.display()),
            ));
        }
        Ok(TokenFile {
            path: bin.to_path_buf(),
            format: TokenFormat::Megatron { index: idx.to_path_buf() },
            token: header.token,
            tokens: data.len() / size,
            data: Arc::new(data),
            start: 0,
            index: Some(Arc::new(MegatronIndex { map: index, header })),
            vocab: None,
        })
    }

    /// Gathers refuse a token id outside `0..size` ([`Error::BadInput`] naming the file, the
    /// token's position and its value), as [`TokenFile::verify`] does for the whole file.
    #[must_use]
    pub fn vocabulary(mut self, size: u64) -> TokenFile {
        self.vocab = Some(size);
        self
    }

    /// The tokens' file (the `.bin` of a Megatron dataset).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's layout.
    pub fn format(&self) -> &TokenFormat {
        &self.format
    }

    /// The tokens' type.
    pub fn token_type(&self) -> TokenType {
        self.token
    }

    /// Tokens in the file.
    pub fn len(&self) -> u64 {
        self.tokens
    }

    /// True when the file holds no token.
    pub fn is_empty(&self) -> bool {
        self.tokens == 0
    }

    /// Documents, where the layout has them (Megatron's).
    pub fn documents(&self) -> Option<u64> {
        self.index.as_ref().map(|i| i.header.document_entries as u64 - 1)
    }

    /// Sequences, where the layout has them (Megatron's).
    pub fn sequences_in_index(&self) -> Option<u64> {
        self.index.as_ref().map(|i| i.header.sequences as u64)
    }

    /// The bytes of tokens `first..first + n` (`None` past the end).
    pub(crate) fn token_bytes(&self, first: u64, n: u64) -> Option<&[u8]> {
        let size = self.token.size() as u64;
        let end = first.checked_add(n).filter(|&e| e <= self.tokens)?;
        let a = usize::try_from(first * size).ok()? + self.start;
        let b = usize::try_from(end * size).ok()? + self.start;
        self.data.bytes().get(a..b)
    }

    /// Tokens `first..first + n`, widened to `i64`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a range past the end; [`Error::BadInput`] for a token
    /// outside the vocabulary, when one is set.
    pub fn read(&self, first: u64, n: u64) -> Result<Vec<i64>> {
        let bytes = self.token_bytes(first, n).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "tokens {first}..{first}+{n} are past the end of {} ({} tokens)",
                self.path.display(),
                self.tokens
            ))
        })?;
        // The vocabulary, when set, holds here as in every read (review P4).
        self.check_vocab(bytes, first)?;
        Ok((0..n as usize).map(|i| self.token.read(bytes, i).expect("in range")).collect())
    }

    /// Checks that the index's sequences lie back to back from the `.bin`'s first token to its
    /// last, as Megatron's writer (and this crate's) lays them: sequence `i + 1` starts where
    /// `i` ends. The reads check only that each lies inside the `.bin`; a length lowered or a
    /// pointer moved in the `.idx` (no checksums in the format) read other tokens and passed
    /// `verify` (look 71, L71-3); checked by every reader of the index too
    /// ([`Documents::check`](super::documents::Documents), look 84: overlapping or out-of-order
    /// sequences read some tokens twice and others never). Nothing to check without an index.
    pub(crate) fn check_tiling(&self) -> Result<()> {
        let Some(ix) = &self.index else { return Ok(()) };
        let (h, idx) = (&ix.header, ix.map.bytes());
        let mut next = 0u64;
        for i in 0..h.sequences {
            let (first, len) = super::documents::sequence(self, h, idx, i)?;
            if first != next {
                return Err(super::documents::bad(
                    self,
                    "sequence_pointers",
                    format!(
                        "sequence {i} starts at token {first}, where the sequences before it end at token \
                         {next}: Megatron writes them back to back"
                    ),
                ));
            }
            next = first + len;
        }
        if next != self.tokens {
            return Err(super::documents::bad(
                self,
                "sequence_lengths",
                format!("the sequences end at token {next}; the .bin holds {} tokens", self.tokens),
            ));
        }
        Ok(())
    }

    /// Checks `bytes` (tokens from token `first`) against the vocabulary, when one is set.
    pub(crate) fn check_vocab(&self, bytes: &[u8], first: u64) -> Result<()> {
        let Some(v) = self.vocab else { return Ok(()) };
        match self.token.first_outside(bytes, v) {
            None => Ok(()),
            Some((i, t)) => Err(bad(
                &self.path,
                format!("token {} is {t}, outside the vocabulary of {v}", first + i as u64),
            )),
        }
    }

    /// Checks `bytes` (tokens from token `first`) as `verify` and `convert tokens` do: inside
    /// the vocabulary when one is set, and, vocabulary or not, never negative (look 178, L178-1:
    /// one byte of a `.idx` made u16 tokens i16, and the pair verified intact; look 182, L182-2:
    /// and converted into a dataset that verified intact).
    pub(crate) fn check_ids(&self, bytes: &[u8], first: u64) -> Result<()> {
        self.check_vocab(bytes, first)?;
        if self.vocab.is_none()
            && matches!(self.token, TokenType::I8 | TokenType::I16 | TokenType::I32 | TokenType::I64)
            && let Some((i, t)) = self.token.first_outside(bytes, u64::MAX)
        {
            return Err(bad(
                &self.path,
                format!(
                    "token {} is {t}: a token id is never negative (are the tokens {}, as the file says?)",
                    first + i as u64,
                    self.token.name()
                ),
            ));
        }
        Ok(())
    }

    /// Reads every token (and, for a Megatron dataset, every sequence and document of its
    /// index), checking what a reader relies on: offsets and lengths inside the `.bin`, document
    /// boundaries in order, ids inside the vocabulary when one is set, and never negative.
    ///
    /// # Errors
    /// The first problem, as [`Error::BadInput`] naming the file and field;
    /// [`Error::InvalidArgument`] for a file past a limit of this reader rather than damaged (more
    /// than 2^32 - 1 documents, a document of 2^32 tokens or more).
    pub fn verify(&self) -> Result<()> {
        if self.index.is_some() {
            // The sequences' bounds, the documents, and the sequences back to back.
            super::documents::Documents::check(self)?;
        }
        // In pieces of 1 Mi tokens, so that the error names the first bad token's position.
        const PIECE: u64 = 1 << 20;
        let mut at = 0;
        while at < self.tokens {
            let n = PIECE.min(self.tokens - at);
            self.check_ids(self.token_bytes(at, n).expect("in range"), at)?;
            at += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{MegatronWriter, TokenType};

    /// Writes a Megatron pair of `docs` at `prefix`.
    fn pair(prefix: &Path, docs: &[&[u16]]) {
        let mut w = MegatronWriter::create(prefix, TokenType::U16, false).unwrap();
        docs.iter().for_each(|d| w.add_document(d).unwrap());
        w.finish().unwrap();
    }

    /// Look 176 (L176-1): a pair replaced between a reader's two opens (the old `.idx` removed,
    /// the new `.bin` and `.idx` renamed in, as a rewrite does) was read as the old `.idx` over
    /// the new `.bin`: the same count of tokens, other documents. The open is made again.
    #[test]
    fn a_pair_replaced_between_the_two_opens_is_opened_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (p, new) = (tmp.path().join("p"), tmp.path().join("new"));
        pair(&p, &[&[1, 2], &[3, 4], &[5, 6, 7]]);
        pair(&new, &[&[5, 6, 7], &[3, 4], &[1, 2]]);
        let (bin, idx) = (with_suffix(&p, ".bin"), with_suffix(&p, ".idx"));
        let mut rewrites = 0;
        let f = TokenFile::open_megatron_between(&bin, &idx, &mut || {
            if rewrites == 0 {
                std::fs::remove_file(&idx).unwrap();
                std::fs::rename(with_suffix(&new, ".bin"), &bin).unwrap();
                std::fs::rename(with_suffix(&new, ".idx"), &idx).unwrap();
            }
            rewrites += 1;
        })
        .unwrap();
        assert_eq!(rewrites, 2, "opened once more");
        let docs = f.documents_source().unwrap();
        assert_eq!(docs.len(), 3);
        assert_eq!(f.read(0, 7).unwrap(), [5, 6, 7, 3, 4, 1, 2]);
        assert_eq!(docs.record_rows(&[0, 1, 2]).unwrap(), [3, 2, 2], "the new pair's documents");
    }
}
