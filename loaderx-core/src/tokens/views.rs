//! The samplers over tokens, as datasets: [`TokenFile::windows`] (nanoGPT's random windows at
//! any offset) and [`TokenFile::sequences`] (Megatron's GPTDataset: documents shuffled,
//! concatenated and cut into samples that overlap by one token). Each is a dense source of
//! records of `n` tokens, so the loader's samplers, mixtures, passes and resume apply unchanged,
//! and a batch is `[B, n]`: inputs `[:, :-1]`, targets `[:, 1:]`.

use std::sync::Arc;

use super::documents::{Documents, MAX_EPOCHS};
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

/// Where sample `k` of an epoch is (sample `i` is sample `i % per` of epoch `i / per`).
#[derive(Debug)]
enum Layout {
    /// Tokens `k * stride .. k * stride + n` of the file.
    Strided { stride: u64 },
    /// Tokens `k * (n - 1) .. k * (n - 1) + n` of the documents in the epoch's order.
    Documents(Box<Documents>),
}

/// Samples of `n` tokens of a token file: the records behind both views, `per` an epoch.
#[derive(Debug)]
struct Samples {
    file: TokenFile,
    n: u64,
    count: u64,
    per: u64,
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
                    let k = u64::from(i) % self.per;
                    let at = k as usize * step;
                    let bytes = &data[at..at + len];
                    self.file.check_vocab(bytes, k * stride)?;
                    dst.copy(bytes);
                }
            }
            Layout::Documents(docs) => {
                for &i in indices {
                    let (epoch, k) = (u64::from(i) / self.per, u64::from(i) % self.per);
                    // Below the epochs asked for: `i` is below `count`.
                    let epoch = epoch as usize;
                    docs.copy(&self.file, epoch, k * (self.n - 1), self.n, &mut |bytes, first| {
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
        // A stride past the span leaves one window, at 0: the same as a stride of the span + 1,
        // whose byte offsets fit (a larger one's product with the token size need not).
        let stride = stride.min(span + 1);
        if count > MAX_SAMPLES {
            return Err(Error::InvalidArgument(format!(
                "{count} windows of {} at stride {stride}: a loader indexes at most 2^32 - 1 records (a larger stride)",
                self.path.display()
            )));
        }
        Ok(Samples { file: self.clone(), n, count, per: count, layout: Layout::Strided { stride } }.source())
    }

    /// Megatron-LM's GPT samples over one epoch: [`TokenFile::sequences_epochs`] with 1.
    ///
    /// # Errors
    /// As [`TokenFile::sequences_epochs`].
    pub fn sequences(&self, n: usize, seed: Option<u64>) -> Result<DenseSource> {
        self.sequences_epochs(n, seed, 1)
    }

    /// Megatron-LM's GPT samples over `epochs` epochs: each epoch, the documents in the order
    /// `seed` shuffles them to for that epoch (the file's order for `None`), concatenated, cut
    /// into samples of `n` tokens that overlap by one (sample `k` of an epoch is its tokens
    /// `k * (n - 1) .. k * (n - 1) + n`: `n - 1` inputs and their targets), so a document's
    /// tokens run on into the next one's. Record `i` is sample `i % s` of epoch `i / s`, `s`
    /// the samples of an epoch; an epoch's last `(tokens - 1) % (n - 1)` tokens start no
    /// sample (Megatron runs its concatenation on into the next epoch). A file without
    /// documents (llm.c, headerless) is one document, the same samples every epoch.
    ///
    /// The first epoch's order is computed at the call, in O(documents) time and about 4.5
    /// bytes a document (12.5 more, once, where a document spans several sequences or some are
    /// empty), with no index file written; every other epoch's when its first sample is read,
    /// then kept (4.5 bytes a document each). The loader's cyclic sampler visits every sample of
    /// every epoch once a pass, mixed across epochs as Megatron's shuffle index mixes its epochs
    /// (so a pass's first batches make most epochs' orders); its sequential sampler reads the
    /// epochs one after the other.
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the `.idx` and the array for an index whose sequences or
    /// documents lie (every one is checked here); [`Error::InvalidArgument`] for `n` below 2,
    /// documents holding fewer than `n` tokens, `epochs` outside 1 to 65,536, or more than
    /// 2^32 - 1 samples in all.
    pub fn sequences_epochs(&self, n: usize, seed: Option<u64>, epochs: u32) -> Result<DenseSource> {
        let n = check_n(self, n, 2)?;
        if !(1..=MAX_EPOCHS).contains(&epochs) {
            return Err(Error::InvalidArgument(format!("{epochs} epochs: from 1 to {MAX_EPOCHS}")));
        }
        let (total, docs) = if self.index.is_some() {
            let docs = Documents::new(self, seed)?;
            (docs.total(), Some(docs))
        } else {
            (self.tokens, None)
        };
        if total < n {
            return Err(too_short(self, n, total, " in its documents"));
        }
        let per = (total - 1) / (n - 1);
        let count = per.checked_mul(u64::from(epochs)).filter(|&c| c <= MAX_SAMPLES).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{per} samples of {n} tokens in {}, {epochs} epochs: a loader indexes at most 2^32 - 1 records (longer samples or fewer epochs)",
                self.path.display()
            ))
        })?;
        let layout = match docs {
            Some(docs) => Layout::Documents(Box::new(docs.with_epochs(epochs))),
            None => Layout::Strided { stride: n - 1 },
        };
        Ok(Samples { file: self.clone(), n, count, per, layout }.source())
    }
}
