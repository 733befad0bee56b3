//! A Megatron index's documents, checked, in a shuffled order: what the Megatron-style sampler
//! ([`TokenFile::sequences`](super::TokenFile::sequences)) cuts its samples from.
//!
//! Megatron's GPTDataset writes its order to index files before the first step (a shuffled
//! document index, a sample index, a shuffle index). Here the order is a pure function of the
//! seed, computed at build in O(documents) time and 12 bytes a document: the permutation (`u32`)
//! and the running token count of the documents in its order (`u64`). A sample's place is one
//! binary search.

use super::file::TokenFile;
use crate::format::tokens::MegatronHeader;
use crate::{Error, Result};

/// Documents in sampling order: `order[j]` is the document at place `j`, whose tokens start at
/// `starts[j]` of the concatenation (`starts[len]` is the total).
#[derive(Debug)]
pub(crate) struct Documents {
    order: Vec<u32>,
    starts: Vec<u64>,
}

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

impl Documents {
    /// Checks every sequence (inside the `.bin`) and the document index (from 0 to the sequence
    /// count, never decreasing) of `file`'s Megatron index.
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the `.idx` and the array.
    pub(crate) fn check(file: &TokenFile) -> Result<()> {
        let ix = file.index.as_ref().expect("a Megatron dataset");
        let (h, idx) = (&ix.header, ix.map.bytes());
        for i in 0..h.sequences {
            sequence(file, h, idx, i)?;
        }
        let mut last = 0i64;
        for k in 0..h.document_entries {
            let e = h.document_entry(idx, k).expect("in the checked arrays");
            let ok = if k == 0 { e == 0 } else { e >= last && e as u64 <= h.sequences as u64 };
            if !ok {
                return Err(bad(
                    file,
                    "document_indices",
                    format!(
                        "entry {k} is {e} (after {last}); entries run from 0 to the {} sequences, never back",
                        h.sequences
                    ),
                ));
            }
            last = e;
        }
        if last as u64 != h.sequences as u64 {
            return Err(bad(
                file,
                "document_indices",
                format!("the last entry is {last}, not the sequence count {}", h.sequences),
            ));
        }
        Ok(())
    }

    /// `file`'s documents, checked ([`Documents::check`]), in the order `seed` shuffles them to
    /// (the file's order for `None`).
    ///
    /// # Errors
    /// As [`Documents::check`]; [`Error::InvalidArgument`] for more than 2^32 - 1 documents.
    pub(crate) fn new(file: &TokenFile, seed: Option<u64>) -> Result<Documents> {
        Documents::check(file)?;
        let ix = file.index.as_ref().expect("a Megatron dataset");
        let (h, idx) = (&ix.header, ix.map.bytes());
        let docs = h.document_entries - 1;
        let n = u32::try_from(docs).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} holds {docs} documents; sampling them takes at most 2^32 - 1",
                file.path.display()
            ))
        })?;
        let mut order: Vec<u32> = (0..n).collect();
        if let Some(seed) = seed {
            shuffle(&mut order, seed);
        }
        let mut starts = Vec::with_capacity(order.len() + 1);
        let mut total = 0u64;
        for &d in &order {
            starts.push(total);
            for s in document_sequences(h, idx, d as usize) {
                // Each length is checked; sequences may overlap (the index says where each one
                // is), so their sum is checked too.
                let len = u64::try_from(h.sequence(idx, s).expect("checked").0).expect("checked");
                total = total.checked_add(len).ok_or_else(|| {
                    bad(file, "sequence_lengths", "the lengths sum past 2^64 tokens".into())
                })?;
            }
        }
        starts.push(total);
        Ok(Documents { order, starts })
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
            for s in document_sequences(h, idx, self.order[j] as usize) {
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

/// Fisher-Yates over `v` with SplitMix64 seeded by `seed`: the same order on every machine.
fn shuffle(v: &mut [u32], seed: u64) {
    let mut state = seed ^ 0x6a09_e667_f3bc_c909;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        // Lemire's multiply-shift: unbiased enough for an order (bias below 2^-32 per draw).
        let j = ((u128::from(next()) * (i as u128 + 1)) >> 64) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::shuffle;

    #[test]
    fn a_shuffle_is_a_permutation_fixed_by_its_seed() {
        let mut a: Vec<u32> = (0..1000).collect();
        let mut b = a.clone();
        shuffle(&mut a, 7);
        shuffle(&mut b, 7);
        assert_eq!(a, b);
        let mut c: Vec<u32> = (0..1000).collect();
        shuffle(&mut c, 8);
        assert_ne!(a, c);
        a.sort_unstable();
        assert_eq!(a, (0..1000).collect::<Vec<_>>());
    }
}
