//! The fixed-stride layout's arithmetic: where record `i` lies and which block of records checks
//! it, as pure functions of the header's record size, chunk capacity and records per block.
//!
//! A chunk of capacity `C` holds `K = C / R` records of `R` bytes, record `i` at chunk `i / K`,
//! offset `(i % K) * R`: the positions the placement rule gives records of one size appended
//! in order, so a store of raw records of one size written that way already lies where this
//! layout says. Blocks of `P` records are counted within a chunk (`ceil(K / P)` blocks per
//! chunk, the last of a chunk possibly short), so a block's bytes are contiguous in one chunk.

/// Bytes of records a block aims at: a crc32c per 4 KiB costs a 64-byte record 0.1% of its size,
/// and a verified read of one record sums at most a page around it.
pub const BLOCK_TARGET: u64 = 4096;

/// The geometry of a fixed-stride store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stride {
    /// Bytes per record, `R > 0`.
    pub record_size: u64,
    /// Records per chunk, `K = capacity / R > 0`.
    pub per_chunk: u64,
    /// Records per block, `0 < P <= K`.
    pub per_block: u64,
    /// The chunk capacity the header holds.
    pub capacity: u64,
}

impl Stride {
    /// The geometry of a store of `record_size`-byte records in chunks of `capacity` bytes,
    /// `per_block` records to a block; `None` when a record is empty or larger than a chunk, or
    /// `per_block` is 0.
    pub fn new(record_size: u64, capacity: u64, per_block: u64) -> Option<Stride> {
        if record_size == 0 || per_block == 0 || capacity < record_size {
            return None;
        }
        let per_chunk = capacity / record_size;
        Some(Stride { record_size, per_chunk, per_block: per_block.min(per_chunk), capacity })
    }

    /// The records per block a new store of `record_size`-byte records gets: as many as fit in
    /// [`BLOCK_TARGET`] bytes, at least one.
    pub fn default_per_block(record_size: u64) -> u64 {
        (BLOCK_TARGET / record_size.max(1)).max(1)
    }

    /// Blocks in each chunk (the last one of a chunk may hold fewer than `per_block` records).
    #[inline]
    pub fn blocks_per_chunk(&self) -> u64 {
        self.per_chunk.div_ceil(self.per_block)
    }

    /// `(chunk, offset)` of record `i`; `None` past the chunk ids `u32` holds.
    #[inline]
    pub fn locate(&self, i: u64) -> Option<(u32, u64)> {
        let chunk = u32::try_from(i / self.per_chunk).ok()?;
        Some((chunk, (i % self.per_chunk) * self.record_size))
    }

    /// The block holding record `i`.
    #[inline]
    pub fn block_of(&self, i: u64) -> u64 {
        (i / self.per_chunk) * self.blocks_per_chunk() + (i % self.per_chunk) / self.per_block
    }

    /// The records of block `b` in a store of `count` records: `first..end`, empty when the
    /// block holds none of them.
    pub fn block_records(&self, b: u64, count: u64) -> std::ops::Range<u64> {
        let bpc = self.blocks_per_chunk();
        let chunk_first = (b / bpc).saturating_mul(self.per_chunk);
        let first = chunk_first.saturating_add((b % bpc) * self.per_block).min(count);
        let chunk_end = chunk_first.saturating_add(self.per_chunk);
        let end = first.saturating_add(self.per_block).min(chunk_end).min(count);
        first..end.max(first)
    }

    /// Blocks that hold any of `count` records.
    pub fn blocks(&self, count: u64) -> u64 {
        if count == 0 { 0 } else { self.block_of(count - 1) + 1 }
    }

    /// The write frontier after `count` records, as the placement rule leaves it: the end of the
    /// last record, or the start of the next chunk when that end is the chunk's capacity.
    pub fn frontier(&self, count: u64) -> Option<(u32, u64)> {
        if count == 0 {
            return Some((0, 0));
        }
        let (chunk, offset) = self.locate(count - 1)?;
        let end = offset + self.record_size;
        if end >= self.capacity { Some((chunk.checked_add(1)?, 0)) } else { Some((chunk, end)) }
    }

    /// Records a store with this frontier holds (the inverse of [`Stride::frontier`]); `None`
    /// for a frontier no count of records leaves.
    pub fn count_at(&self, (chunk, offset): (u32, u64)) -> Option<u64> {
        if offset % self.record_size != 0 || offset / self.record_size > self.per_chunk {
            return None;
        }
        let count = u64::from(chunk).checked_mul(self.per_chunk)?.checked_add(offset / self.record_size)?;
        (self.frontier(count) == Some((chunk, offset))).then_some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_blocks_and_frontiers_agree() {
        for (r, cap, p) in
            [(64, 4096, 64), (784, 1 << 30, 5), (12 << 10, 1 << 20, 1), (10, 95, 4), (8, 8, 512)]
        {
            let s = Stride::new(r, cap, p).unwrap();
            let mut seen_blocks = 0;
            for count in 0..3 * s.per_chunk + 2 {
                let f = s.frontier(count).unwrap();
                assert_eq!(s.count_at(f), Some(count), "{s:?} count {count}");
                if count > 0 {
                    let (c, o) = s.locate(count - 1).unwrap();
                    assert!(o + r <= cap, "record {} ends past its chunk", count - 1);
                    let b = s.block_of(count - 1);
                    assert!(s.block_records(b, count).contains(&(count - 1)));
                    assert!(b + 1 >= seen_blocks, "blocks only grow");
                    seen_blocks = seen_blocks.max(b + 1);
                    assert_eq!(s.blocks(count), seen_blocks);
                    let _ = c;
                }
            }
        }
        assert_eq!(Stride::new(0, 10, 1), None);
        assert_eq!(Stride::new(11, 10, 1), None);
        assert_eq!(Stride::default_per_block(64), 64);
        assert_eq!(Stride::default_per_block(1 << 20), 1);
    }

    #[test]
    fn a_block_never_straddles_a_chunk() {
        let s = Stride::new(10, 95, 4).unwrap(); // 9 records a chunk: blocks of 4, 4, 1
        assert_eq!(s.blocks_per_chunk(), 3);
        assert_eq!(s.block_records(2, 100), 8..9);
        assert_eq!(s.block_records(3, 100), 9..13);
        assert_eq!(s.block_records(3, 11), 9..11);
        assert_eq!(s.block_records(9, 11), 11..11);
        assert_eq!(s.locate(9), Some((1, 0)));
    }
}
