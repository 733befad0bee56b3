//! A fixed-stride store's delete: its journal's planned block checksums, and applying it (after
//! a crash too) without certifying damage that arrived in between.

use std::ops::Range;

use rayon::prelude::*;

use super::Store;
use crate::format::v2::{Entry, Stride};
use crate::{Error, Result};

impl Store {
    /// Sums `blocks` again from the chunks (after a delete moved records into them): their
    /// checksums in a store of `len` records (blocks holding none of them left out).
    pub(super) fn resum_blocks(&self, stride: &Stride, blocks: &[u64], len: u64) -> Result<Vec<(u64, u32)>> {
        blocks
            .par_iter()
            .filter(|&&b| !stride.block_records(b, len).is_empty())
            .map(|&b| {
                let records = stride.block_records(b, len);
                let sum = self
                    .block_sum(stride, records.clone())?
                    .ok_or_else(|| self.block_error(stride, records.start, "truncated or missing chunk"))?;
                Ok((b, sum))
            })
            .collect()
    }

    /// The checksum each of `blocks` will have once every `(hole, source)` of `moves` has the
    /// source's bytes and `new_length` records remain, read from the chunks as they are now
    /// (checked just before): what a delete's journal carries so that applying it can tell its
    /// own bytes from damage (blocks holding none of the records left out).
    pub(super) fn planned_sums(
        &self,
        stride: &Stride,
        blocks: &[u64],
        moves: &std::collections::BTreeMap<u64, u64>,
        new_length: u64,
    ) -> Result<Vec<(u64, u32)>> {
        let bytes_of = |run: Range<u64>, crc: u32| -> Result<u32> {
            let bytes = self
                .block_bytes(stride, run.clone())?
                .ok_or_else(|| self.block_error(stride, run.start, "truncated or missing chunk"))?;
            Ok(crc32c::crc32c_append(crc, bytes.bytes_range(&run, stride)))
        };
        blocks
            .par_iter()
            .filter(|&&b| !stride.block_records(b, new_length).is_empty())
            .map(|&b| {
                let records = stride.block_records(b, new_length);
                let (mut crc, mut at) = (0u32, records.start);
                for (&hole, &from) in moves.range(records.clone()) {
                    if at < hole {
                        crc = bytes_of(at..hole, crc)?;
                    }
                    crc = bytes_of(from..from + 1, crc)?;
                    at = hole + 1;
                }
                if at < records.end {
                    crc = bytes_of(at..records.end, crc)?;
                }
                Ok((b, crc))
            })
            .collect()
    }

    /// Applies a delete's journal to a fixed-stride store: each hole gets the bytes of the record
    /// that fills it (from past the new count, so a second application copies the same bytes),
    /// the changed blocks and the new last one are summed again, the count and frontier
    /// published, and the chunk bytes past the frontier dropped. Idempotent: a journal found
    /// after its count was published only sums and trims again. With `planned` sums (every
    /// journal this version writes), a block that sums otherwise is refused before any checksum
    /// is written: damage that arrived since the delete was planned (before a crash, or after
    /// it) is reported, never certified; the journal stays.
    pub(super) fn apply_stride_delete(
        &self,
        stride: &Stride,
        entries: &[(u64, Entry)],
        new_length: u64,
        planned: &[(u64, u32)],
    ) -> Result<()> {
        let journal = || self.dir.join(super::files::JOURNAL_FILE);
        if new_length > self.len() {
            // A delete only shortens: a longer length would extend the tail chunk past what was
            // ever written and leave a frontier the next writer refuses.
            return Err(Error::Corrupt {
                path: journal(),
                offset: 0,
                reason: format!(
                    "the journal's new length {new_length} is past the store's {} records",
                    self.len()
                ),
                source: None,
            });
        }
        let mut blocks: Vec<u64> = entries.iter().map(|&(i, _)| stride.block_of(i)).collect();
        blocks.extend(new_length.checked_sub(1).map(|last| stride.block_of(last)));
        blocks.sort_unstable();
        blocks.dedup();
        let want: std::collections::BTreeMap<u64, u32> = planned.iter().copied().collect();
        // A block whose sum is not the one planned: refused, naming it, with no checksum written.
        let differs = |sums: &[(u64, u32)], when: &str| -> Result<()> {
            let Some(&(b, sum)) = sums.iter().find(|(b, sum)| want.get(b) != Some(sum)) else {
                return Ok(());
            };
            let planned = want.get(&b).map_or("no sum".to_string(), |p| format!("{p:#010x}"));
            Err(self.block_error(
                stride,
                stride.block_records(b, new_length).start,
                format!(
                    "{when} its block sums to {sum:#010x}, the delete planned {planned}: damaged since the \
                     delete was planned. No checksum written and {} kept, so every open refuses the store; \
                     to read it, move the journal aside and run `loaderx verify`, which names the damaged \
                     blocks (a hole the delete already filled holds the record moved into it)",
                    journal().display()
                ),
            ))
        };
        if self.len() > new_length {
            self.check_journal(entries)?;
            if !planned.is_empty() {
                // The blocks as the moves will leave them, from the chunks as they are now (a
                // hole a crashed run already filled reads the same): damage is refused before
                // anything is written.
                let moves = journal_moves(stride, entries, new_length).map_err(|reason| Error::Corrupt {
                    path: journal(),
                    offset: 0,
                    reason,
                    source: None,
                })?;
                differs(&self.planned_sums(stride, &blocks, &moves, new_length)?, "before the moves")?;
            }
            let mut touched = std::collections::BTreeSet::new();
            let mut buf = vec![0u8; stride.record_size as usize];
            for &(idx, e) in entries {
                let to = stride
                    .locate(idx)
                    .filter(|_| idx < new_length && u64::from(e.stored) == stride.record_size);
                let Some((chunk, offset)) = to else {
                    return Err(Error::Corrupt {
                        path: journal(),
                        offset: 0,
                        reason: format!(
                            "the journal moves a record of {} bytes to {idx} of {new_length}",
                            e.stored
                        ),
                        source: None,
                    });
                };
                let f = self.chunks.get(e.chunk)?;
                if !self.chunks.read_exact(&f, e.chunk, e.offset, &mut buf)? {
                    return Err(self.block_error(
                        stride,
                        idx,
                        "truncated chunk: the record moved into it is not there",
                    ));
                }
                self.chunks.write_all(chunk, offset, &buf)?;
                touched.insert(chunk);
            }
            for id in touched {
                self.chunks.sync(id)?;
            }
        }
        let sums = self.resum_blocks(stride, &blocks, new_length)?;
        if !planned.is_empty() {
            differs(&sums, "after the moves")?;
        }
        for (b, sum) in sums {
            self.index.set_block_crcs(b, &[sum])?;
            let first = stride.block_records(b, new_length).start;
            self.index.flush_entries(first, 1, &self.index_path)?;
        }
        let frontier = stride.frontier(new_length).ok_or_else(|| Error::Corrupt {
            path: journal(),
            offset: 0,
            reason: format!("{new_length} records pass the last chunk id"),
            source: None,
        })?;
        self.publish(new_length.min(self.len()), frontier, true)?;
        self.drop_chunks_past(frontier)
    }
}

/// The `(hole, source index)` of each of a fixed-stride delete journal's entries: the record
/// whose bytes the entry names, which must lie past the new length.
fn journal_moves(
    stride: &Stride,
    entries: &[(u64, Entry)],
    new_length: u64,
) -> std::result::Result<std::collections::BTreeMap<u64, u64>, String> {
    let mut moves = std::collections::BTreeMap::new();
    for &(idx, e) in entries {
        let from = u64::from(e.chunk)
            .checked_mul(stride.per_chunk)
            .and_then(|first| first.checked_add(e.offset / stride.record_size))
            .filter(|&from| stride.locate(from) == Some((e.chunk, e.offset)) && from >= new_length);
        let Some(from) = from else {
            return Err(format!(
                "the journal moves into {idx} bytes at chunk {} byte {}, which is not a record past the new \
                 length {new_length}",
                e.chunk, e.offset
            ));
        };
        moves.insert(idx, from);
    }
    Ok(moves)
}
