//! A Megatron index's documents, checked, in a shuffled order each epoch: what the
//! Megatron-style sampler ([`TokenFile::sequences`](super::TokenFile::sequences)) cuts its
//! samples from.
//!
//! Megatron's GPTDataset writes its order to index files before the first step (a shuffled
//! document index, a new order each epoch, a sample index, a shuffle index). Here an epoch's
//! order is a pure function of the seed and the epoch (the cyclic sampler's permutation of the
//! documents, its cycle `epoch`), computed when the epoch's first sample is read (the first
//! epoch's at build) in O(documents) time and about 4.5 bytes a document: the permutation
//! (`u32`) and the running token count at every [`BLOCK`]-th place of it (`u64`). The
//! documents' lengths are read from the index where it holds them one to a document (the common
//! layout), kept once for every epoch (8 more bytes a document) otherwise. A sample's place is
//! one binary search and a walk of at most `BLOCK` documents.

use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;

use super::check::{Lengths, PIECE, lengths};
use super::file::TokenFile;
use crate::format::tokens::MegatronHeader;
use crate::sys::tuning::ORDER_PREFETCH_AHEAD;
use crate::{Error, Result};

/// The documents that hold tokens ([`Kept`]; empty documents add nothing to a concatenation and
/// are left out), and their order in each epoch.
#[derive(Debug)]
pub(crate) struct Documents {
    kept: Kept,
    /// For each document of more than [`CHECKPOINT`] sequences: the tokens before each of its
    /// `CHECKPOINT`-th sequences, so that a sample's read walks at most `CHECKPOINT` of them
    /// whatever its place in the document (8 bytes a `CHECKPOINT` sequences; review P1).
    checkpoints: std::collections::HashMap<u32, Vec<u64>>,
    /// The permutation of each epoch (its cycle `epoch`); `None`: the file's order, every epoch.
    shuffle: Option<crate::Sampler>,
    /// Epoch `e`'s order, made when first asked for (by [`Documents::with_epochs`]'s count).
    epochs: Vec<Epoch>,
    /// Tokens in all documents (in any order).
    total: u64,
}

/// One epoch's order: `order[j]` is the place `j` of the documents kept ([`Kept`]), `blocks[b]`
/// the tokens before place `b * BLOCK` of the concatenation (its last entry the total).
#[derive(Debug)]
struct Order {
    order: Vec<u32>,
    blocks: Vec<u64>,
}

/// Where an epoch's order is made once: by the first thread to ask, its others waiting for it.
/// The work is done outside every lock (held only to look and to mark), so a process forked
/// while a thread made an order (a PyTorch worker) finds no lock held for good: an order
/// marked as being made by another process is made again by the child (review 47, finding 3:
/// a `OnceLock` caught mid-initialisation by `fork` hung the child).
#[derive(Debug, Default)]
struct Epoch {
    done: OnceLock<Order>,
    /// The process whose thread is making the order, while one is.
    making: Mutex<Option<u32>>,
    made: Condvar,
}

/// Clears an epoch's mark when its maker returns or unwinds, waking its waiters.
struct Unmark<'a>(&'a Epoch);

impl Drop for Unmark<'_> {
    fn drop(&mut self) {
        *self.0.making.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.0.made.notify_all();
    }
}

/// Epochs a Megatron-style sampler may run (each one's order, once made, is kept: about 4.5
/// bytes a document): more than a training run reads a corpus, few enough that their slots
/// (tens of bytes each) cost nothing to make.
pub(crate) const MAX_EPOCHS: u32 = 1 << 16;

/// The documents kept and their token counts.
#[derive(Debug)]
pub(super) enum Kept {
    /// Every document is one sequence holding tokens: kept document `k` is document and
    /// sequence `k`, its length the index's (nothing held per document).
    Index,
    /// Otherwise: the token counts of the documents kept, and their numbers where one was left
    /// out (`None`: kept document `k` is document `k`).
    Listed { lens: Vec<u32>, ids: Option<Vec<u32>> },
}

impl Kept {
    /// The tokens of kept document `k` (`idx`: the index's bytes).
    #[inline]
    fn len(&self, h: &MegatronHeader, idx: &[u8], k: u32) -> u32 {
        match self {
            // Checked (`lengths`): not negative, so its bits are the count.
            Kept::Index => {
                let at = h.lengths_at() + 4 * k as usize;
                u32::from_le_bytes(idx[at..at + 4].try_into().expect("4 bytes"))
            }
            Kept::Listed { lens, .. } => lens[k as usize],
        }
    }

    /// Where kept document `k`'s length lies, to fetch it ahead of its use.
    #[inline]
    fn len_bytes<'a>(&'a self, h: &MegatronHeader, idx: &'a [u8], k: u32) -> &'a [u8] {
        match self {
            Kept::Index => {
                let at = h.lengths_at() + 4 * k as usize;
                &idx[at..at + 4]
            }
            Kept::Listed { lens, .. } => bytemuck::bytes_of(&lens[k as usize]),
        }
    }

    /// The document number of kept document `k`.
    #[inline]
    fn document(&self, k: u32) -> u32 {
        match self {
            Kept::Listed { ids: Some(ids), .. } => ids[k as usize],
            _ => k,
        }
    }
}

/// Places of the order between two running token counts: a sample's place walks at most this
/// many documents' lengths; the counts cost 8 bytes every `BLOCK` documents.
const BLOCK: usize = 16;

/// Sequences between two checkpoints of a long document.
pub(super) const CHECKPOINT: usize = 256;

pub(super) fn bad(file: &TokenFile, field: &str, reason: String) -> Error {
    Error::BadInput {
        path: index_path(file).to_path_buf(),
        reason: format!("{field}: {reason}"),
        source: None,
    }
}

/// The file that holds `file`'s index: a Megatron dataset's `.idx`, otherwise the file itself.
pub(super) fn index_path(file: &TokenFile) -> &std::path::Path {
    match &file.format {
        super::TokenFormat::Megatron { index } => index,
        _ => &file.path,
    }
}

/// The checked span of sequence `i`: its first token and its token count.
pub(super) fn sequence(file: &TokenFile, h: &MegatronHeader, idx: &[u8], i: usize) -> Result<(u64, u64)> {
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

impl Documents {
    /// Checks every sequence (inside the `.bin`, and back to back from its first token to its
    /// last: [`TokenFile::check_tiling`]) and the document index (from 0 to the sequence count,
    /// never decreasing) of `file`'s Megatron index.
    ///
    /// # Errors
    /// [`Error::BadInput`] naming the `.idx` and the array.
    pub(crate) fn check(file: &TokenFile) -> Result<()> {
        // (Refuses more than 2^32 - 1 documents before reading one, as `new` does.)
        lengths(file, false)?;
        file.check_tiling()
    }

    /// `file`'s documents that hold tokens, checked ([`Documents::check`]), in the order `seed`
    /// shuffles them to each epoch (the file's order for `None`): the cyclic sampler's
    /// permutation of them, its cycle `epoch`. The first epoch's order is made here; one epoch
    /// is held until [`Documents::with_epochs`] asks for more.
    ///
    /// # Errors
    /// As [`Documents::check`]; [`Error::InvalidArgument`] for more than 2^32 - 1 documents.
    pub(crate) fn new(file: &TokenFile, seed: Option<u64>) -> Result<Documents> {
        let Lengths { kept, checkpoints } = lengths(file, true)?;
        file.check_tiling()?;
        let n = match &kept {
            Kept::Index => file.index.as_ref().expect("a Megatron dataset").header.sequences,
            Kept::Listed { lens, .. } => lens.len(),
        };
        let shuffle = match seed {
            // At most as many as the u32 document numbers (checked in `lengths`).
            Some(seed) if n > 0 => Some(
                crate::Sampler::builder(n as u32)
                    .batch_size(n as u32)
                    .mode(crate::SamplerMode::Cyclic)
                    .seed(seed)
                    .build()?,
            ),
            _ => None,
        };
        let mut docs = Documents { kept, checkpoints, shuffle, epochs: vec![Epoch::default()], total: 0 };
        docs.total = *docs.order(file, 0).blocks.last().expect("blocks holds the total");
        Ok(docs)
    }

    /// These documents over `epochs` epochs (1 to [`MAX_EPOCHS`]), each epoch's order made when
    /// its first sample is read.
    pub(crate) fn with_epochs(mut self, epochs: u32) -> Documents {
        debug_assert!((1..=MAX_EPOCHS).contains(&epochs), "checked by the caller");
        self.epochs.resize_with(epochs as usize, Epoch::default);
        self
    }

    /// Epoch `e`'s order (`e` below the epochs asked for): the first epoch's for every epoch
    /// without a shuffle; made on its first use, by the thread that asks (others asking wait).
    fn order(&self, file: &TokenFile, e: usize) -> &Order {
        let e = if self.shuffle.is_some() { e } else { 0 };
        let slot = &self.epochs[e];
        if let Some(order) = slot.done.get() {
            return order;
        }
        let me = std::process::id();
        let mut making = slot.making.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(order) = slot.done.get() {
                return order;
            }
            match *making {
                // A thread of this process is making it: wait for that one.
                Some(pid) if pid == me => {
                    making = slot.made.wait(making).unwrap_or_else(PoisonError::into_inner);
                }
                // Nobody, or a thread of the process this one was forked from (gone here).
                _ => break,
            }
        }
        *making = Some(me);
        drop(making);
        let _unmark = Unmark(slot);
        // Set once: only this thread of this process makes it now.
        let _ = slot.done.set(self.make_order(file, e as u64));
        slot.done.get().expect("set just now")
    }

    /// Epoch `e`'s permutation and running counts.
    fn make_order(&self, file: &TokenFile, e: u64) -> Order {
        let ix = file.index.as_ref().expect("a Megatron dataset");
        let (h, idx) = (&ix.header, ix.map.bytes());
        let kept = &self.kept;
        let n = match kept {
            Kept::Index => h.sequences,
            Kept::Listed { lens, .. } => lens.len(),
        };
        // Inside a pool's thread (a user's gather on the pool) the work stays on this thread: a
        // thread of the pool waiting for its pieces could take up another sample's read of this
        // same epoch, which would wait on itself.
        let pooled = rayon::current_thread_index().is_none();
        let mut order: Vec<u32> = vec![0; n];
        match &self.shuffle {
            // `n` indices: the sampler's batch size, so the call cannot refuse them.
            Some(sampler) => sampler.fill(e, &mut order).expect("a batch of every document"),
            None if pooled => order.par_iter_mut().enumerate().for_each(|(i, o)| *o = i as u32),
            None => order.iter_mut().enumerate().for_each(|(i, o)| *o = i as u32),
        }
        // The running count at every `BLOCK`-th place, in pieces over the pool: each piece's
        // counts from 0 (its reads of the lengths, in the shuffled order, are the cost: each
        // fetched ahead of its use), then each piece moved up by the total of the pieces before.
        let mut blocks = vec![0u64; n.div_ceil(BLOCK) + 1];
        let piece = |(b, o): (&mut [u64], &[u32])| {
            let mut total = 0u64;
            for (j, &k) in o.iter().enumerate() {
                if let Some(&ahead) = o.get(j + ORDER_PREFETCH_AHEAD) {
                    crate::sys::prefetch(kept.len_bytes(h, idx, ahead));
                }
                if j % BLOCK == 0 {
                    b[j / BLOCK] = total;
                }
                total += u64::from(kept.len(h, idx, k));
            }
            total
        };
        let last = blocks.len() - 1;
        let sums: Vec<u64> = if pooled {
            blocks[..last].par_chunks_mut(PIECE / BLOCK).zip(order.par_chunks(PIECE)).map(piece).collect()
        } else {
            blocks[..last].chunks_mut(PIECE / BLOCK).zip(order.chunks(PIECE)).map(piece).collect()
        };
        let mut offsets = Vec::with_capacity(sums.len());
        let mut total = 0u64;
        for t in sums {
            offsets.push(total);
            // At most 2^32 documents of under 2^32 tokens each: below 2^64.
            total += t;
        }
        let shift = |(b, o): (&mut [u64], u64)| b.iter_mut().for_each(|x| *x += o);
        if pooled {
            blocks[..last].par_chunks_mut(PIECE / BLOCK).zip(offsets).for_each(shift);
        } else {
            blocks[..last].chunks_mut(PIECE / BLOCK).zip(offsets).for_each(shift);
        }
        blocks[last] = total;
        Order { order, blocks }
    }

    /// The place in `order` of the document holding token `pos` of its concatenation (`pos`
    /// below the total), and the tokens before it.
    fn locate(&self, order: &Order, h: &MegatronHeader, idx: &[u8], pos: u64) -> (usize, u64) {
        let b = order.blocks.partition_point(|&s| s <= pos) - 1;
        let mut start = order.blocks[b];
        let mut j = b * BLOCK;
        loop {
            let len = u64::from(self.kept.len(h, idx, order.order[j]));
            if start + len > pos {
                return (j, start);
            }
            start += len;
            j += 1;
        }
    }

    /// Tokens in all documents.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Copies tokens `pos..pos + n` of the documents in epoch `epoch`'s order into `out`
    /// (calling it with each contiguous run of bytes and the run's first token in the file).
    pub(crate) fn copy(
        &self,
        file: &TokenFile,
        epoch: usize,
        mut pos: u64,
        mut n: u64,
        out: &mut dyn FnMut(&[u8], u64) -> Result<()>,
    ) -> Result<()> {
        let ix = file.index.as_ref().expect("a Megatron dataset");
        let (h, idx) = (&ix.header, ix.map.bytes());
        let order = self.order(file, epoch);
        let (mut j, mut start) = self.locate(order, h, idx, pos);
        while n > 0 {
            let mut skip = pos - start;
            let doc = self.kept.document(order.order[j]);
            start += u64::from(self.kept.len(h, idx, order.order[j]));
            let mut seqs = document_sequences(h, idx, doc as usize);
            if let Some(marks) = self.checkpoints.get(&doc) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A Megatron dataset of `u16` tokens whose document `d` has the sequences `docs[d]` (their
    /// token counts), contiguous in the `.bin`; opened.
    fn dataset(dir: &std::path::Path, docs: &[Vec<i32>]) -> TokenFile {
        let lens: Vec<i32> = docs.concat();
        let mut idx = b"MMIDIDX\x00\x00".to_vec();
        idx.extend(1u64.to_le_bytes());
        idx.push(8);
        idx.extend((lens.len() as u64).to_le_bytes());
        idx.extend((docs.len() as u64 + 1).to_le_bytes());
        lens.iter().for_each(|l| idx.extend(l.to_le_bytes()));
        let mut at = 0i64;
        for &l in &lens {
            idx.extend((at * 2).to_le_bytes());
            at += i64::from(l);
        }
        let mut entry = 0i64;
        idx.extend(entry.to_le_bytes());
        for d in docs {
            entry += d.len() as i64;
            idx.extend(entry.to_le_bytes());
        }
        std::fs::write(dir.join("c.idx"), idx).unwrap();
        std::fs::write(dir.join("c.bin"), vec![0u8; at as usize * 2]).unwrap();
        TokenFile::open(dir.join("c")).unwrap()
    }

    /// The order and running counts `Documents` holds in each of three epochs, against the
    /// plain computation: the documents with tokens in file order, permuted by the cyclic
    /// sampler's cycle `epoch`; made on this thread and on the pool's alike.
    fn matches_the_plain_computation(docs: &[Vec<i32>], seed: Option<u64>, index: bool) {
        let dir = tempfile::tempdir().unwrap();
        let file = dataset(dir.path(), docs);
        let got = Documents::new(&file, seed).unwrap().with_epochs(3);
        assert_eq!(matches!(got.kept, Kept::Index), index, "the lengths are read from the index");
        let kept: Vec<(u32, u64)> = docs
            .iter()
            .enumerate()
            .map(|(d, s)| (d as u32, s.iter().map(|&l| l as u64).sum::<u64>()))
            .filter(|&(_, t)| t > 0)
            .collect();
        let ix = file.index.as_ref().unwrap();
        let (h, idx) = (&ix.header, ix.map.bytes());
        let mut firsts = Vec::new();
        for epoch in 0..3usize {
            let mut perm: Vec<u32> = (0..kept.len() as u32).collect();
            if let Some(seed) = seed {
                let n = kept.len() as u32;
                let sampler = crate::Sampler::builder(n)
                    .batch_size(n)
                    .mode(crate::SamplerMode::Cyclic)
                    .seed(seed)
                    .build()
                    .unwrap();
                sampler.fill(epoch as u64, &mut perm).unwrap();
            }
            // Epoch 2's made on the pool (where the work stays on its thread).
            let order = if epoch == 2 {
                rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| {
                    assert!(rayon::current_thread_index().is_some());
                    got.order(&file, epoch)
                })
            } else {
                got.order(&file, epoch)
            };
            let mut start = 0u64;
            for (j, &p) in perm.iter().enumerate() {
                let (doc, tokens) = kept[p as usize];
                assert_eq!(got.kept.document(order.order[j]), doc, "epoch {epoch}, place {j}");
                assert_eq!(got.locate(order, h, idx, start), (j, start), "epoch {epoch}, place {j}");
                let last = got.locate(order, h, idx, start + tokens - 1);
                assert_eq!(last, (j, start), "epoch {epoch}, place {j}'s last token");
                start += tokens;
            }
            assert_eq!(got.total(), start);
            assert_eq!(*order.blocks.last().unwrap(), start);
            firsts.push(order.order[..64].to_vec());
        }
        // A new order each epoch with a seed; the file's, every epoch, without.
        assert_eq!(firsts[0] != firsts[1] && firsts[1] != firsts[2], seed.is_some());
    }

    /// An epoch marked as being made by another process (the parent of a fork, whose thread
    /// the child does not have) is made by the asking thread, not waited for (review 47,
    /// finding 3); one marked by this process is waited for, then read.
    #[test]
    fn an_order_being_made_by_another_process_is_made_here() {
        let dir = tempfile::tempdir().unwrap();
        let docs: Vec<Vec<i32>> = (0..5000).map(|d| vec![1 + d % 7]).collect();
        let file = dataset(dir.path(), &docs);
        let got = std::sync::Arc::new(Documents::new(&file, Some(2)).unwrap().with_epochs(3));
        *got.epochs[1].making.lock().unwrap() = Some(std::process::id().wrapping_add(1));
        *got.epochs[2].making.lock().unwrap() = Some(std::process::id());
        let (tx, rx) = std::sync::mpsc::channel();
        for e in [1, 2] {
            let (got, file, tx) = (std::sync::Arc::clone(&got), file.clone(), tx.clone());
            std::thread::spawn(move || tx.send((e, got.order(&file, e).order.len())).unwrap());
        }
        let wait = std::time::Duration::from_secs(20);
        assert_eq!(rx.recv_timeout(wait).expect("made, not waited for"), (1, 5000));
        // Epoch 2's maker (this process's) finishes: its waiter wakes to its order.
        assert!(rx.recv_timeout(std::time::Duration::from_millis(200)).is_err(), "waits for its maker");
        let order = got.make_order(&file, 2);
        let _ = got.epochs[2].done.set(order);
        drop(Unmark(&got.epochs[2]));
        assert_eq!(rx.recv_timeout(wait).expect("woken"), (2, 5000));
    }

    #[test]
    fn the_order_and_counts_are_the_plain_ones_across_pieces() {
        let n = 2 * PIECE + 1000;
        // Every document one sequence with tokens: nothing held per document.
        let one: Vec<Vec<i32>> = (0..n).map(|d| vec![1 + (d % 5) as i32]).collect();
        // Empty documents in the second piece only (numbers kept), and one of three sequences
        // in the third (lengths kept).
        let mut mixed = one.clone();
        for d in (PIECE + 10..PIECE + 400).step_by(7) {
            mixed[d] = vec![0];
        }
        mixed[2 * PIECE + 5] = vec![2, 0, 3];
        // A document of several sequences, none left out: lengths kept, numbers not.
        let mut long = one.clone();
        long[3] = vec![1, 2, 3];
        for seed in [None, Some(3)] {
            matches_the_plain_computation(&one, seed, true);
            matches_the_plain_computation(&mixed, seed, false);
            matches_the_plain_computation(&long, seed, false);
        }
    }
}
