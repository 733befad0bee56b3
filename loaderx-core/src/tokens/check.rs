//! The checks of a Megatron index's documents, in one pass over the index in file order, and
//! what they keep for the seeded order ([`super::documents`]): the documents that hold tokens
//! and their lengths, read from the index where it holds one sequence a document.

use rayon::prelude::*;

use super::documents::{CHECKPOINT, Kept, bad, index_path, sequence};
use super::file::TokenFile;
use crate::format::tokens::MegatronHeader;
use crate::{Error, Result};

/// What the checks give back ([`lengths`]): the documents kept, and the checkpoints of the long
/// ones among them.
pub(super) struct Lengths {
    pub(super) kept: Kept,
    pub(super) checkpoints: std::collections::HashMap<u32, Vec<u64>>,
}

/// What a piece of the checks gives back: the token counts of the documents it kept (`None`
/// while every one of them is one sequence holding tokens: the index holds them), their numbers
/// where one was left out (`None` until one is), the tokens of all its documents and the
/// checkpoints of its long documents.
struct Piece {
    lens: Option<Vec<u32>>,
    ids: Option<Vec<u32>>,
    tokens: u64,
    marks: Vec<(u32, Vec<u64>)>,
}

/// Documents a parallel piece of the checks covers: enough that a piece's hand-off to the pool
/// costs little beside it.
pub(super) const PIECE: usize = 1 << 16;

/// The documents that hold tokens, in file order (`keep`; none kept when only checking), each of
/// every document's sequences checked (inside the `.bin`, a token count that is not negative)
/// and the document index checked (from 0 to the sequence count, never decreasing): one pass
/// over the index in file order, in pieces over the pool. What is kept is bounded by the
/// documents that hold tokens, never by the index's entries alone (a sparse `.idx` of empty
/// documents sizes nothing).
pub(super) fn lengths(file: &TokenFile, keep: bool) -> Result<Lengths> {
    let ix = file.index.as_ref().expect("a Megatron dataset");
    let (h, idx) = (&ix.header, ix.map.bytes());
    let entry = |k: usize| h.document_entry(idx, k).expect("in the checked arrays");
    // The length of a document of one sequence, checked before.
    let one = |d: usize| h.sequence(idx, entry(d) as usize).expect("in the checked arrays").0 as u32;
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
        .map(|p| check_piece(file, p * PIECE..((p + 1) * PIECE).min(docs), keep))
        .collect();
    let mut pieces: Vec<Piece> = pieces.into_iter().collect::<Result<_>>()?;
    let total: u64 = pieces.iter().map(|p| p.tokens).sum();
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
    let mut checkpoints = std::collections::HashMap::new();
    for piece in &mut pieces {
        checkpoints.extend(std::mem::take(&mut piece.marks));
    }
    if !keep || pieces.iter().all(|p| p.lens.is_none()) {
        return Ok(Lengths { kept: Kept::Index, checkpoints });
    }
    // Sized by the documents kept, each holding a token the `.bin` holds (checked just above).
    let kept: usize = pieces
        .iter()
        .enumerate()
        .map(|(p, piece)| piece.lens.as_ref().map_or(PIECE.min(docs - p * PIECE), Vec::len))
        .sum();
    let mut lens = Vec::with_capacity(kept);
    let mut ids = pieces.iter().any(|p| p.ids.is_some()).then(|| Vec::with_capacity(kept));
    for (p, piece) in pieces.iter().enumerate() {
        let range = p * PIECE..((p + 1) * PIECE).min(docs);
        match &piece.lens {
            Some(own) => lens.extend_from_slice(own),
            None => lens.extend(range.clone().map(one)),
        }
        if let Some(ids) = &mut ids {
            match &piece.ids {
                Some(own) => ids.extend_from_slice(own),
                None => ids.extend(range.start as u32..range.end as u32),
            }
        }
    }
    Ok(Lengths { kept: Kept::Listed { lens, ids }, checkpoints })
}

/// The checks of [`lengths`] over documents `range`, and what they keep.
fn check_piece(file: &TokenFile, range: std::ops::Range<usize>, keep: bool) -> Result<Piece> {
    let ix = file.index.as_ref().expect("a Megatron dataset");
    let (h, idx) = (&ix.header, ix.map.bytes());
    let entry = |k: usize| h.document_entry(idx, k).expect("in the checked arrays");
    let one = |d: usize| h.sequence(idx, entry(d) as usize).expect("in the checked arrays").0 as u32;
    let mut piece = Piece { lens: None, ids: None, tokens: 0, marks: Vec::new() };
    if let Some(tokens) = simple_piece(file, h, idx, range.clone()) {
        piece.tokens = tokens;
        return Ok(piece);
    }
    let mut a = entry(range.start);
    // Checked here too, not only as the piece before's last entry: pieces run in parallel, and a
    // negative start would name a sequence before the first (review W1).
    if a < 0 || a as u64 > h.sequences as u64 {
        return Err(bad(
            file,
            "document_indices",
            format!("entry {} is {a}; entries run from 0 to the {} sequences", range.start, h.sequences),
        ));
    }
    for d in range.clone() {
        let b = entry(d + 1);
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
        let single = b == a + 1;
        let tokens = if single {
            // One sequence (the common layout): its tokens are the document's.
            let (_, len) = sequence(file, h, idx, a as usize)?;
            u32::try_from(len).map_err(|_| {
                bad(file, "sequence_lengths", format!("document {d} holds 2^32 tokens or more"))
            })?
        } else {
            let (tokens, marks) = long_document(file, h, idx, d, a as usize..b as usize, keep)?;
            if let Some(marks) = marks {
                piece.marks.push((d as u32, marks));
            }
            tokens
        };
        a = b;
        piece.tokens += u64::from(tokens);
        if !keep {
            continue;
        }
        if piece.lens.is_none() && (!single || tokens == 0) {
            // The first document the index does not hold the length of as it is kept.
            piece.lens = Some((range.start..d).map(one).collect());
        }
        if tokens == 0 {
            // The first document left out: the ones kept before it are numbered.
            piece.ids.get_or_insert_with(|| (range.start as u32..d as u32).collect());
        } else {
            if let Some(lens) = &mut piece.lens {
                lens.push(tokens);
            }
            if let Some(ids) = &mut piece.ids {
                ids.push(d as u32);
            }
        }
    }
    Ok(piece)
}

/// The tokens of documents `range` when each is sequence `d` (one sequence) holding tokens, every
/// check of [`lengths`] passed: the common layout, read as three arrays side by side. `None`
/// otherwise (the general walk then checks each and says what is wrong).
fn simple_piece(
    file: &TokenFile,
    h: &MegatronHeader,
    idx: &[u8],
    range: std::ops::Range<usize>,
) -> Option<u64> {
    let (start, end) = (range.start, range.end);
    if end > h.sequences {
        return None;
    }
    // Inside the arrays the header was checked to describe (`TokenFile::open`).
    let entries = idx.get(h.documents_at() + 8 * start..h.documents_at() + 8 * (end + 1))?;
    let lens = idx.get(h.lengths_at() + 4 * start..h.lengths_at() + 4 * end)?;
    let pointers = idx.get(h.pointers_at() + 8 * start..h.pointers_at() + 8 * end)?;
    // A token is 1, 2, 4 or 8 bytes: a shift, not a division, in the loop.
    let shift = (file.token.size() as u64).trailing_zeros();
    let i64_at = |b: &[u8], i: usize| i64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    if i64_at(entries, 0) != start as i64 {
        return None;
    }
    let mut tokens = 0u64;
    let mut ok = true;
    for (i, (len, at)) in lens.chunks_exact(4).zip(pointers.chunks_exact(8)).enumerate() {
        let len = i32::from_le_bytes(len.try_into().expect("4 bytes"));
        let at = i64::from_le_bytes(at.try_into().expect("8 bytes"));
        // Branch-free: one flag for every check of the piece.
        ok &= i64_at(entries, i + 1) == (start + i + 1) as i64;
        ok &= len > 0 && at >= 0 && (at as u64).trailing_zeros() >= shift;
        ok &= ((at as u64) >> shift).saturating_add(len as u64) <= file.tokens;
        tokens += u64::from(len as u32);
    }
    ok.then_some(tokens)
}

/// The tokens of document `d`, whose sequences are `seqs` (more than one), each checked; and,
/// when `keep` and it has more than [`CHECKPOINT`] sequences, its checkpoints.
fn long_document(
    file: &TokenFile,
    h: &MegatronHeader,
    idx: &[u8],
    d: usize,
    seqs: std::ops::Range<usize>,
    keep: bool,
) -> Result<(u32, Option<Vec<u64>>)> {
    let (mut tokens, mut empty, mut full) = (0u32, 0u64, 0u64);
    let long = keep && seqs.len() > CHECKPOINT;
    let mut marks = Vec::new();
    for s in seqs.clone() {
        if long && (s - seqs.start).is_multiple_of(CHECKPOINT) {
            marks.push(u64::from(tokens));
        }
        let (_, len) = sequence(file, h, idx, s)?;
        // Megatron's format allows it (a document of several sequences); this reader counts a
        // document's tokens in a u32: a limit of the reader, not damage (look 85, F85-1).
        tokens = u32::try_from(len).ok().and_then(|l| tokens.checked_add(l)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: document {d} holds 2^32 tokens or more, over the 2^32 - 1 loaderx reads in a \
                 document (a limit of this reader, not damage to the file)",
                index_path(file).display()
            ))
        })?;
        if len == 0 {
            empty += 1;
        } else {
            full += 1;
        }
    }
    // Empty sequences hold nothing, but every read of the document walks them: at most one more
    // than the sequences that hold tokens (review N1).
    if empty > full + 1 {
        return Err(bad(
            file,
            "sequence_lengths",
            format!("document {d} lists {empty} empty sequences beside {full} with tokens"),
        ));
    }
    Ok((tokens, (long && tokens > 0).then_some(marks)))
}
