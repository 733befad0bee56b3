//! A Megatron index's documents, checked, in a shuffled order: what the Megatron-style sampler
//! ([`TokenFile::sequences`](super::TokenFile::sequences)) cuts its samples from.
//!
//! Megatron's GPTDataset writes its order to index files before the first step (a shuffled
//! document index, a sample index, a shuffle index). Here the order is a pure function of the
//! seed (the cyclic sampler's permutation of the documents), computed at build in O(documents)
//! time and 12 bytes a document: the permutation (`u32`) and the running token count of the
//! documents in its order (`u64`). A sample's place is one binary search.

use rayon::prelude::*;

use super::file::TokenFile;
use crate::format::tokens::MegatronHeader;
use crate::{Error, Result};

/// The documents that hold tokens, in sampling order: `order[j]` is the document at place `j`,
/// whose tokens start at `starts[j]` of the concatenation (`starts[len]` is the total). Empty
/// documents add nothing to a concatenation and are left out.
#[derive(Debug)]
pub(crate) struct Documents {
    order: Vec<u32>,
    starts: Vec<u64>,
    /// For each document of more than [`CHECKPOINT`] sequences: the tokens before each of its
    /// `CHECKPOINT`-th sequences, so that a sample's read walks at most `CHECKPOINT` of them
    /// whatever its place in the document (8 bytes a `CHECKPOINT` sequences; review P1).
    checkpoints: std::collections::HashMap<u32, Vec<u64>>,
}

/// Sequences between two checkpoints of a long document.
const CHECKPOINT: usize = 256;

fn bad(file: &TokenFile, field: &str, reason: String) -> Error {
    let path = match &file.format {
        super::TokenFormat::Megatron { index } => index.clone(),
        _ => file.path.clone(),
    };
    Error::BadInput { path, reason: format!("{field}: {reason}"), source: None }
}

/// The checked span of sequence `i`: its first token and its token count.
fn sequence(file: &TokenFile, h: &MegatronHeader, idx: &[u8], i: usize) -> Result<(u64, u64)> {
    let (len, at) = h.sequence(idx, i).expect("in the checked arrays");
    let size = file.token.size() as u64;
    let len = u64::try_from(len)
        .map_err(|_| bad(file, "sequence_lengths", format!("sequence {i} has {len} tokens")))?;
    let at = u64::try_from(at).ok().filter(|a| a % size == 0).ok_or_else(|| {
        bad(file, "sequence_pointers", format!("sequence {i} starts at byte {at}, not a token's start"))
    })?;
    let first = at / size;
    if first.checked_add(len).is_none_or(|end| end > file.tokens) {
        return Err(bad(
            file,
            "sequence_pointers",
            format!("sequence {i}: {len} tokens at token {first} run past the .bin's {} tokens", file.tokens),
        ));
    }
    Ok((first, len))
}

/// The sequences of document `d` (`entries[d]..entries[d + 1]`), checked in order by
/// [`Documents::check`].
fn document_sequences(h: &MegatronHeader, idx: &[u8], d: usize) -> std::ops::Range<usize> {
    let a = h.document_entry(idx, d).expect("checked") as usize;
    let b = h.document_entry(idx, d + 1).expect("checked") as usize;
    a..b
}

/// Document `d`'s token count, read from the index (checked by [`Documents::check`] before a
/// source hands out documents): nothing is kept per document.
pub(crate) fn document_tokens(file: &TokenFile, d: usize) -> Result<u64> {
    let mut tokens = 0u64;
    for_each_sequence(file, d, &mut |_, len| {
        tokens += len;
        Ok(())
    })?;
    Ok(tokens)
}

/// Calls `out` with each of document `d`'s sequences, as (first token, tokens), streaming (its
/// empty sequences bounded by [`Documents::check`]).
pub(crate) fn for_each_sequence(
    file: &TokenFile,
    d: usize,
    out: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    let ix = file.index.as_ref().expect("a Megatron dataset");
    let (h, idx) = (&ix.header, ix.map.bytes());
    for s in document_sequences(h, idx, d) {
        let (first, len) = sequence(file, h, idx, s)?;
        out(first, len)?;
    }
    Ok(())
}

/// What the checks give back: the (document, tokens) pairs kept, and the checkpoints of the long
/// documents among them.
type Lengths = (Vec<(u32, u32)>, std::collections::HashMap<u32, Vec<u64>>);

/// What a piece of the checks gives back: the (document, tokens) pairs it kept, and the tokens
/// of all its documents.
type Piece = (Vec<(u32, u32)>, u64, Vec<(u32, Vec<u64>)>);

/// Documents a parallel piece of the checks covers: enough that a piece's hand-off to the pool
/// costs little beside it.
const PIECE: usize = 1 << 16;

/// The documents that hold tokens, as (document, tokens) pairs in file order (`keep`; none kept
/// when only checking), each of every document's sequences checked (inside the `.bin`, a token
/// count that is not negative) and the document index checked (from 0 to the sequence count,
/// never decreasing): one pass over the index in file order, in pieces over the pool. What is
/// kept is bounded by the documents that hold tokens, never by the index's entries alone (a
/// sparse `.idx` of empty documents sizes nothing).
fn lengths(file: &TokenFile, keep: bool) -> Result<Lengths> {
    let ix = file.index.as_ref().expect("a Megatron dataset");
    let (h, idx) = (&ix.header, ix.map.bytes());
    let entry = |k: usize| h.document_entry(idx, k).expect("in the checked arrays");
    let first = entry(0);
    if first != 0 {
        return Err(bad(file, "document_indices", format!("entry 0 is {first}, not 0")));
    }
    let last = entry(h.document_entries - 1);
    if last as u64 != h.sequences as u64 {
        return Err(bad(
            file,
            "document_indices",
            format!("the last entry is {last}, not the sequence count {}", h.sequences),
        ));
    }
    let docs = h.document_entries - 1;
    if u32::try_from(docs).is_err() {
        return Err(Error::InvalidArgument(format!(
            "{} lists {docs} documents; a document is numbered by a u32 (at most 2^32 - 1)",
            file.path.display()
        )));
    }
    let pieces: Vec<Result<Piece>> = (0..docs.div_ceil(PIECE))
        .into_par_iter()
        .map(|p| {
            let range = p * PIECE..((p + 1) * PIECE).min(docs);
            let mut out = Vec::new();
            let mut piece_tokens = 0u64;
            let mut marks = Vec::new();
            for d in range {
                let (a, b) = (entry(d), entry(d + 1));
                if b < a || b as u64 > h.sequences as u64 {
                    return Err(bad(
                        file,
                        "document_indices",
                        format!(
                            "entry {} is {b} (after {a}); entries run from 0 to the {} sequences, never back",
                            d + 1,
                            h.sequences
                        ),
                    ));
                }
                let (mut tokens, mut empty, mut full) = (0u32, 0u64, 0u64);
                let long = keep && (b - a) as usize > CHECKPOINT;
                let mut doc_marks = Vec::new();
                for s in a as usize..b as usize {
                    if long && (s - a as usize).is_multiple_of(CHECKPOINT) {
                        doc_marks.push(u64::from(tokens));
                    }
                    let (_, len) = sequence(file, h, idx, s)?;
                    tokens =
                        u32::try_from(len).ok().and_then(|l| tokens.checked_add(l)).ok_or_else(|| {
                            bad(file, "sequence_lengths", format!("document {d} holds 2^32 tokens or more"))
                        })?;
                    if len == 0 {
                        empty += 1;
                    } else {
                        full += 1;
                    }
                }
                // Empty sequences hold nothing, but every read of the document walks them: at
                // most one more than the sequences that hold tokens (review N1).
                if empty > full + 1 {
                    return Err(bad(
                        file,
                        "sequence_lengths",
                        format!("document {d} lists {empty} empty sequences beside {full} with tokens"),
                    ));
                }
                piece_tokens += u64::from(tokens);
                if keep && tokens > 0 {
                    out.push((d as u32, tokens));
                    if long {
                        marks.push((d as u32, doc_marks));
                    }
                }
            }
            Ok((out, piece_tokens, marks))
        })
        .collect();
    let mut all = Vec::new();
    let mut total = 0u64;
    let mut checkpoints = std::collections::HashMap::new();
    for p in pieces {
        let (kept, tokens, marks) = p?;
        all.extend(kept);
        total += tokens;
        checkpoints.extend(marks);
    }
    if total > file.tokens {
        // Sequences that overlap (the same tokens listed again and again) would make the
        // documents, and all that is sized by them, larger than the .bin (reviews M2, N2, N3).
        return Err(bad(
            file,
            "sequence_pointers",
            format!(
                "the documents hold {total} tokens, more than the .bin's {}: sequences overlap",
                file.tokens
            ),
        ));
    }
    Ok((all, checkpoints))
}

impl Documents {
    /// Checks every sequence (inside the `.bin`) and the document index (from 0 to the sequence
    /// count, never decreasing) of `file`'s Megatron index.
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the `.idx` and the array.
    pub(crate) fn check(file: &TokenFile) -> Result<()> {
        // (Refuses more than 2^32 - 1 documents before reading one, as `new` does.)
        lengths(file, false).map(drop)
    }

    /// `file`'s documents that hold tokens, checked ([`Documents::check`]), in the order `seed`
    /// shuffles them to (the file's order for `None`): the cyclic sampler's permutation of
    /// them, its first cycle.
    ///
    /// # Errors
    /// As [`Documents::check`]; [`Error::InvalidArgument`] for more than 2^32 - 1 documents.
    pub(crate) fn new(file: &TokenFile, seed: Option<u64>) -> Result<Documents> {
        let (kept, checkpoints) = lengths(file, true)?;
        let (ids, lens): (Vec<u32>, Vec<u32>) = kept.into_iter().unzip();
        // At most as many as the u32 document numbers (checked in `lengths`).
        let n = ids.len() as u32;
        let mut perm: Vec<u32> = vec![0; ids.len()];
        match seed {
            Some(seed) if n > 0 => {
                let sampler = crate::Sampler::builder(n)
                    .batch_size(n)
                    .mode(crate::SamplerMode::Cyclic)
                    .seed(seed)
                    .build()?;
                sampler.fill(0, &mut perm)?;
            }
            _ => perm.iter_mut().enumerate().for_each(|(i, o)| *o = i as u32),
        }
        // The running count in the documents' order, in pieces over the pool: each piece's
        // counts from 0 (its reads of `lens`, in the shuffled order, are the cost), then each
        // piece moved up by the total of the pieces before it.
        let mut starts = vec![0u64; lens.len() + 1];
        let sums: Vec<u64> = starts[..lens.len()]
            .par_chunks_mut(PIECE)
            .zip(perm.par_chunks(PIECE))
            .map(|(s, o)| {
                let mut total = 0u64;
                for (start, &d) in s.iter_mut().zip(o) {
                    *start = total;
                    total += u64::from(lens[d as usize]);
                }
                total
            })
            .collect();
        let mut offsets = Vec::with_capacity(sums.len());
        let mut total = 0u64;
        for t in sums {
            offsets.push(total);
            // At most 2^32 documents of under 2^32 tokens each: below 2^64.
            total += t;
        }
        starts[..lens.len()]
            .par_chunks_mut(PIECE)
            .zip(offsets)
            .for_each(|(s, o)| s.iter_mut().for_each(|x| *x += o));
        starts[lens.len()] = total;
        // The order as document numbers, the permutation's places replaced in place.
        perm.par_iter_mut().for_each(|p| *p = ids[*p as usize]);
        Ok(Documents { order: perm, starts, checkpoints })
    }

    /// Tokens in all documents.
    pub(crate) fn total(&self) -> u64 {
        *self.starts.last().expect("starts holds the total")
    }

    /// Copies tokens `pos..pos + n` of the documents in their order into `out` (calling it with
    /// each contiguous run of bytes and the run's first token in the file).
    pub(crate) fn copy(
        &self,
        file: &TokenFile,
        mut pos: u64,
        mut n: u64,
        out: &mut dyn FnMut(&[u8], u64) -> Result<()>,
    ) -> Result<()> {
        let ix = file.index.as_ref().expect("a Megatron dataset");
        let (h, idx) = (&ix.header, ix.map.bytes());
        let mut j = self.starts.partition_point(|&s| s <= pos) - 1;
        while n > 0 {
            let mut skip = pos - self.starts[j];
            let mut seqs = document_sequences(h, idx, self.order[j] as usize);
            if let Some(marks) = self.checkpoints.get(&self.order[j]) {
                // Start at the last checkpoint at or before the sample's first token.
                let c = marks.partition_point(|&t| t <= skip) - 1;
                seqs.start += c * CHECKPOINT;
                skip -= marks[c];
            }
            for s in seqs {
                let (first, len) = sequence(file, h, idx, s)?;
                if skip >= len {
                    skip -= len;
                    continue;
                }
                let take = (len - skip).min(n);
                out(file.token_bytes(first + skip, take).expect("checked"), first + skip)?;
                (pos, n, skip) = (pos + take, n - take, 0);
                if n == 0 {
                    break;
                }
            }
            j += 1;
        }
        Ok(())
    }
}
