//! The samplers over tokens, as datasets: [`TokenFile::windows`] (nanoGPT's random windows at
//! any offset) and [`TokenFile::sequences`] (Megatron's GPTDataset: documents shuffled,
//! concatenated and cut into samples that overlap by one token). Each is a dense source of
//! records of `n` tokens, so the loader's samplers, mixtures, passes and resume apply unchanged,
//! and a batch is `[B, n]`: inputs `[:, :-1]`, targets `[:, 1:]`.

use std::sync::Arc;

use super::documents::Documents;
use super::file::TokenFile;
use crate::format::tokens::TokenType;
use crate::store::{Backing, Parallelism, VarFill};
use crate::sys::Destination;
use crate::{DType, DenseSource, Error, RaggedSource, Result, Schema};

/// The loader's record indices are `u32`.
const MAX_SAMPLES: u64 = u32::MAX as u64;

/// The dtype of `t`'s tokens in a batch: the file's own, so a batch is a plain copy.
pub(crate) fn dtype_of(t: TokenType) -> DType {
    match t {
        TokenType::U8 => DType::U8,
        TokenType::I8 => DType::I8,
        TokenType::I16 => DType::I16,
        TokenType::I32 => DType::I32,
        TokenType::I64 => DType::I64,
        TokenType::U16 => DType::U16,
        TokenType::U32 => DType::U32,
    }
}

/// Where sample `i`'s tokens are.
#[derive(Debug)]
enum Layout {
    /// Tokens `i * stride .. i * stride + n` of the file.
    Strided { stride: u64 },
    /// Tokens `i * (n - 1) .. i * (n - 1) + n` of the documents in their order.
    Documents(Documents),
}

/// Samples of `n` tokens of a token file: the records behind both views.
#[derive(Debug)]
struct Samples {
    file: TokenFile,
    n: u64,
    count: u64,
    layout: Layout,
}

impl Samples {
    fn check_index(&self, i: u32) -> Result<()> {
        if u64::from(i) >= self.count {
            return Err(Error::IndexOutOfRange {
                path: self.file.path.clone(),
                index: u64::from(i),
                len: self.count,
            });
        }
        Ok(())
    }

    /// Copies the samples at `indices` into `dst`, in one pass: the indices checked once, then
    /// each sample copied straight out of the mapping (windows: one slice each, what the memcpy
    /// ceiling does), its ids checked against the vocabulary when one is set.
    fn copy_all(&self, indices: &[u32], dst: &mut Destination<'_>) -> Result<()> {
        if let Some(&i) = indices.iter().find(|&&i| u64::from(i) >= self.count) {
            self.check_index(i)?;
        }
        match &self.layout {
            Layout::Strided { stride } => {
                // The last window ends inside the file (the count says so), so every one does.
                let data = &self.file.data.bytes()[self.file.start..];
                let (step, len) = (*stride as usize * self.file.token.size(), self.record_len());
                for &i in indices {
                    let at = i as usize * step;
                    let bytes = &data[at..at + len];
                    self.file.check_vocab(bytes, u64::from(i) * stride)?;
                    dst.copy(bytes);
                }
            }
            Layout::Documents(docs) => {
                for &i in indices {
                    docs.copy(&self.file, u64::from(i) * (self.n - 1), self.n, &mut |bytes, first| {
                        self.file.check_vocab(bytes, first)?;
                        dst.copy(bytes);
                        Ok(())
                    })?;
                }
            }
        }
        Ok(())
    }

    fn record_len(&self) -> usize {
        (self.n as usize) * self.file.token.size()
    }

    fn source(self) -> DenseSource {
        let schema = Schema::dense(dtype_of(self.file.token), vec![self.n as usize]);
        let path = self.file.path.clone();
        DenseSource::from_backing(Arc::new(self), schema, path)
    }
}

impl Backing for Samples {
    fn len(&self) -> u64 {
        self.count
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        let len = u32::try_from(self.record_len()).expect("checked at build");
        indices.iter().map(|&i| self.check_index(i).map(|()| len)).collect()
    }

    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        mut dst: Destination<'_>,
        _par: Parallelism,
    ) -> Result<()> {
        if record_len != self.record_len() {
            return Err(Error::InvalidArgument(format!(
                "records of {} are {} bytes, not {record_len}",
                self.file.path.display(),
                self.record_len()
            )));
        }
        // One thread: a batch of windows is a few hundred kilobytes of copies, less than a
        // hand-off to the pool costs; the loader's prefetch threads run batches side by side.
        self.copy_all(indices, &mut dst)
    }

    fn gather_var(&self, indices: &[u32], _par: Parallelism, fill: VarFill<'_>) -> Result<()> {
        let lens = self.record_lens(indices)?;
        fill(&mut lens.iter().copied(), &mut |mut dst| self.copy_all(indices, &mut dst))
    }
}

/// A token file's documents, each a record (what packing reads).
#[derive(Debug)]
struct DocumentRecords {
    file: TokenFile,
    /// Documents in the index (all of them, empty ones too: record `i` is document `i`).
    docs: usize,
}

impl DocumentRecords {
    /// Document `i`'s size in bytes, checked against the loader's `u32` record lengths.
    fn record(&self, i: u32) -> Result<u32> {
        if i as usize >= self.docs {
            return Err(Error::IndexOutOfRange {
                path: self.file.path.clone(),
                index: u64::from(i),
                len: self.docs as u64,
            });
        }
        let tokens = super::documents::document_tokens(&self.file, i as usize)?;
        let bytes = tokens.checked_mul(self.file.token.size() as u64).and_then(|b| u32::try_from(b).ok());
        bytes.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "document {i} of {} holds {tokens} tokens: a record holds under 4 GiB",
                self.file.path.display()
            ))
        })
    }

    /// Copies document `i`'s tokens into `dst`, a sequence at a time.
    fn copy(&self, i: u32, dst: &mut Destination<'_>) -> Result<()> {
        super::documents::for_each_sequence(&self.file, i as usize, &mut |first, len| {
            let bytes = self.file.token_bytes(first, len).expect("checked inside the .bin");
            self.file.check_vocab(bytes, first)?;
            dst.copy(bytes);
            Ok(())
        })
    }
}

impl Backing for DocumentRecords {
    fn len(&self) -> u64 {
        self.docs as u64
    }

    fn record_lens(&self, indices: &[u32]) -> Result<Vec<u32>> {
        indices.iter().map(|&i| self.record(i)).collect()
    }

    fn gather_fixed(
        &self,
        indices: &[u32],
        record_len: usize,
        mut dst: Destination<'_>,
        _par: Parallelism,
    ) -> Result<()> {
        for &i in indices {
            let bytes = self.record(i)?;
            if bytes as usize != record_len {
                return Err(Error::CorruptRecord {
                    path: self.file.path.clone(),
                    index: u64::from(i),
                    reason: format!("{bytes} bytes, the batch's records are {record_len}"),
                    source: None,
                });
            }
            self.copy(i, &mut dst)?;
        }
        Ok(())
    }

    fn gather_var(&self, indices: &[u32], _par: Parallelism, fill: VarFill<'_>) -> Result<()> {
        let lens = self.record_lens(indices)?;
        fill(&mut lens.iter().copied(), &mut |mut dst| {
            for &i in indices {
                self.copy(i, &mut dst)?;
            }
            Ok(())
        })
    }
}

fn too_short(file: &TokenFile, n: u64, have: u64, what: &str) -> Error {
    Error::InvalidArgument(format!(
        "{} holds {have} tokens{what}; a sample of {n} needs at least {n}",
        file.path.display()
    ))
}

fn check_n(file: &TokenFile, n: usize, least: usize) -> Result<u64> {
    let bytes = n.checked_mul(file.token.size()).filter(|&b| n >= least && u32::try_from(b).is_ok());
    bytes.map(|_| n as u64).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "a sample of {n} tokens: samples hold {least} tokens or more, and under 4 GiB"
        ))
    })
}

impl TokenFile {
    /// The file's documents, each a record of its tokens (record `i` is document `i`, empty ones
    /// included), in the file's order: a ragged source for the loader's packing (`pack`), which
    /// fills rows with whole documents (document-aligned samples). Every sequence and boundary
    /// is checked first; a document is then read from the index when asked for, nothing kept
    /// per document. A file without documents has none to give.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a file without documents (llm.c, headerless); as
    /// [`TokenFile::sequences`] for a lying index.
    pub fn documents_source(&self) -> Result<RaggedSource> {
        if self.index.is_none() {
            return Err(Error::InvalidArgument(format!(
                "{} has no documents (only a Megatron index lists them): use windows or sequences",
                self.path.display()
            )));
        }
        // Every sequence and boundary checked once, streaming; each document is then read from
        // the index as it is asked for (nothing kept per document).
        Documents::check(self)?;
        let docs = self.documents().expect("a Megatron dataset") as usize;
        let schema = Schema::ragged(dtype_of(self.token), Vec::new());
        let records = DocumentRecords { file: self.clone(), docs };
        Ok(RaggedSource::from_backing(Arc::new(records), schema, self.path.clone()))
    }

    /// Windows of `n` tokens at every `stride`-th offset of the file's tokens (nanoGPT's random
    /// windows when the loader samples them: `n` is the block size plus one, a batch row holds
    /// the inputs and, shifted by one, the targets). `stride` 1 is every offset; `None` picks the
    /// least stride that keeps the count under the loader's 2^32 - 1 records (1 below 4 Gi
    /// tokens).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `n` or `stride` of 0, a file shorter than `n`, or a
    /// stride that leaves more than 2^32 - 1 windows.
    pub fn windows(&self, n: usize, stride: Option<u64>) -> Result<DenseSource> {
        let n = check_n(self, n, 1)?;
        if self.tokens < n {
            return Err(too_short(self, n, self.tokens, ""));
        }
        let span = self.tokens - n;
        let stride = match stride {
            Some(0) => return Err(Error::InvalidArgument("a stride of 0 tokens".into())),
            Some(s) => s,
            None => (span / MAX_SAMPLES + 1).max(1),
        };
        let count = span / stride + 1;
        if count > MAX_SAMPLES {
            return Err(Error::InvalidArgument(format!(
                "{count} windows of {} at stride {stride}: a loader indexes at most 2^32 - 1 records (a larger stride)",
                self.path.display()
            )));
        }
        Ok(Samples { file: self.clone(), n, count, layout: Layout::Strided { stride } }.source())
    }

    /// Megatron-LM's GPT samples: the documents in the order `seed` shuffles them to (the file's
    /// order for `None`), concatenated, cut into samples of `n` tokens that overlap by one (sample
    /// `i` is tokens `i * (n - 1) .. i * (n - 1) + n`: `n - 1` inputs and their targets), so a
    /// document's tokens run on into the next one's. The order is computed at the call, in
    /// O(documents) time and about 4.5 bytes a document (12.5 where a document spans several
    /// sequences or some are empty), with no index file written. A file without
    /// documents (llm.c, headerless) is one document.
    ///
    /// The documents are shuffled once; the loader's sampler shuffles the samples each epoch
    /// (Megatron concatenates a new document order each epoch).
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the `.idx` and the array for an index whose sequences or
    /// documents lie (every one is checked here); [`Error::InvalidArgument`] for `n` below 2 or
    /// documents holding fewer than `n` tokens.
    pub fn sequences(&self, n: usize, seed: Option<u64>) -> Result<DenseSource> {
        let n = check_n(self, n, 2)?;
        let (total, layout) = if self.index.is_some() {
            let docs = Documents::new(self, seed)?;
            (docs.total(), Layout::Documents(docs))
        } else {
            (self.tokens, Layout::Strided { stride: n - 1 })
        };
        if total < n {
            return Err(too_short(self, n, total, " in its documents"));
        }
        let count = (total - 1) / (n - 1);
        if count > MAX_SAMPLES {
            return Err(Error::InvalidArgument(format!(
                "{count} samples of {n} tokens in {}: a loader indexes at most 2^32 - 1 records (longer samples)",
                self.path.display()
            )));
        }
        Ok(Samples { file: self.clone(), n, count, layout }.source())
    }
}
