//! A batch's reads of entries ([`Table`]), monomorphised per format so the hot loop pays no
//! dispatch per entry: the v1 table, a v2 snapshot, the fixed stride and the compact index, each
//! with its checks of one entry; and whether an entry lies before the frontier ([`committed`]).

use crate::format::v2::{self, Entry, decode_compact};
use crate::format::{Codec, Format, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE, RecordLoc};
use crate::sys::{IndexView, MetaMap};

use super::index::{CompactView, FixedView};

/// How a batch reads and checks entries, per format.
pub(crate) trait Table: Sync {
    /// Whether the format keeps checksums of entries and records.
    const CHECKSUMS: bool;

    /// Entry `idx`, below the count the view was taken for.
    fn get(&self, idx: u64) -> Entry;

    /// Hints the CPU to fetch entry `idx`.
    fn prefetch(&self, idx: u64);

    /// Starts reading entry `idx`'s page into the page cache, without waiting.
    fn will_need(&self, idx: u64);

    /// Whether entry `idx`'s page is in the page cache.
    fn resident(&self, idx: u64) -> bool;

    /// Entry `idx` with its own checksum checked (formats with checksums).
    ///
    /// # Errors
    /// What is wrong with the entry's bytes.
    fn get_checked(&self, idx: u64) -> std::result::Result<Entry, String>;

    /// Whether an entry passes the format's checks and holds `record_len` bytes: one
    /// branch-free expression for the hot path (the slow path names what failed).
    fn fits(e: &Entry, record_len: usize) -> bool;

    /// The format's checks of one entry, saying what is wrong.
    ///
    /// # Errors
    /// A sentence naming the field out of range.
    fn check(e: &Entry) -> std::result::Result<Codec, String>;
}

impl Table for MetaMap {
    const CHECKSUMS: bool = false;

    #[inline]
    fn get(&self, idx: u64) -> Entry {
        Entry::from(self.entry(idx as u32))
    }

    #[inline]
    fn prefetch(&self, idx: u64) {
        self.prefetch_entry(u32::try_from(idx).unwrap_or(u32::MAX));
    }

    fn will_need(&self, idx: u64) {
        self.will_need_entry(u32::try_from(idx).unwrap_or(u32::MAX));
    }

    fn resident(&self, idx: u64) -> bool {
        self.entry_resident(u32::try_from(idx).unwrap_or(u32::MAX))
    }

    fn get_checked(&self, idx: u64) -> std::result::Result<Entry, String> {
        Ok(self.get(idx))
    }

    #[inline(always)]
    fn fits(e: &Entry, record_len: usize) -> bool {
        let raw = e.codec == Codec::Raw as u8;
        (e.codec <= Format::V1.max_codec_tag())
            & (e.logical as usize == record_len)
            & (record_len <= MAX_RECORD_SIZE)
            & (u64::from(e.chunk) < MAX_CHUNKS as u64)
            & (e.end() <= MAX_CHUNK_SIZE)
            & (!raw | (e.stored == e.logical))
            & (raw | (e.stored > 0))
    }

    fn check(e: &Entry) -> std::result::Result<Codec, String> {
        RecordLoc::try_from(*e)?.validate_limits()
    }
}

impl Table for IndexView {
    const CHECKSUMS: bool = true;

    #[inline]
    fn get(&self, idx: u64) -> Entry {
        Entry::decode_unchecked(&self.entry_bytes(idx))
    }

    #[inline]
    fn prefetch(&self, idx: u64) {
        IndexView::prefetch(self, idx);
    }

    fn will_need(&self, idx: u64) {
        IndexView::will_need(self, idx);
    }

    fn resident(&self, idx: u64) -> bool {
        IndexView::resident(self, idx)
    }

    fn get_checked(&self, idx: u64) -> std::result::Result<Entry, String> {
        let b = self.entry_bytes(idx);
        if !Entry::checksum_ok(&b) {
            return Err("entry checksum mismatch (a damaged index entry)".into());
        }
        Ok(Entry::decode_unchecked(&b))
    }

    #[inline(always)]
    fn fits(e: &Entry, record_len: usize) -> bool {
        let raw = e.codec == Codec::Raw as u8;
        (e.codec <= Format::V2.max_codec_tag())
            & (e.logical as usize == record_len)
            & e.offset.checked_add(u64::from(e.stored)).is_some()
            & (!raw | (e.stored == e.logical))
            & (raw | (e.stored > 0))
    }

    fn check(e: &Entry) -> std::result::Result<Codec, String> {
        e.validate()
    }
}

impl Table for FixedView {
    // Records are summed a block at a time before a verified batch reads them
    // (`Store::check_blocks`), never one by one.
    const CHECKSUMS: bool = false;

    #[inline(always)]
    fn get(&self, idx: u64) -> Entry {
        let (chunk, offset) = self.stride.locate(idx).unwrap_or((u32::MAX, 0));
        let len = self.stride.record_size as u32;
        Entry { offset, stored: len, logical: len, chunk, codec: Codec::Raw as u8, crc: 0 }
    }

    #[inline]
    fn prefetch(&self, _idx: u64) {}

    fn will_need(&self, _idx: u64) {}

    fn resident(&self, _idx: u64) -> bool {
        true
    }

    fn get_checked(&self, idx: u64) -> std::result::Result<Entry, String> {
        Ok(self.get(idx))
    }

    #[inline(always)]
    fn fits(e: &Entry, record_len: usize) -> bool {
        (e.logical as usize == record_len) & (e.stored == e.logical) & (e.codec == Codec::Raw as u8)
    }

    fn check(e: &Entry) -> std::result::Result<Codec, String> {
        match e.validate()? {
            Codec::Raw => Ok(Codec::Raw),
            other => Err(format!("a {other} record in a fixed-stride store of raw records")),
        }
    }
}

impl Table for CompactView {
    const CHECKSUMS: bool = true;

    #[inline(always)]
    fn get(&self, idx: u64) -> Entry {
        decode_compact(&self.0.compact_entry_bytes(idx))
    }

    #[inline]
    fn prefetch(&self, idx: u64) {
        self.0.prefetch(idx);
    }

    fn will_need(&self, idx: u64) {
        self.0.will_need(idx);
    }

    fn resident(&self, idx: u64) -> bool {
        self.0.resident(idx)
    }

    /// A compact entry has no checksum of its own: the record's, over the bytes the entry points
    /// at, finds a damaged one (`format/v2/compact.rs`).
    fn get_checked(&self, idx: u64) -> std::result::Result<Entry, String> {
        Ok(self.get(idx))
    }

    #[inline(always)]
    fn fits(e: &Entry, record_len: usize) -> bool {
        (e.logical as usize == record_len) & (e.end() <= v2::COMPACT_MAX_OFFSET)
    }

    fn check(e: &Entry) -> std::result::Result<Codec, String> {
        match e.validate()? {
            Codec::Raw if e.end() <= v2::COMPACT_MAX_OFFSET => Ok(Codec::Raw),
            Codec::Raw => Err(format!("ends at byte {} of its chunk, past a compact index's 2^40", e.end())),
            other => Err(format!("a {other} record in a compact store of raw records")),
        }
    }
}

/// Whether an entry lies in the committed part of the chunks: before the frontier.
pub(crate) fn committed(e: &Entry, (tail_chunk, tail_offset): (u32, u64)) -> std::result::Result<(), String> {
    if e.chunk > tail_chunk {
        return Err(format!("chunk {} is past the tail chunk {tail_chunk}", e.chunk));
    }
    if e.chunk == tail_chunk && e.end() > tail_offset {
        return Err(format!(
            "ends at byte {} of the tail chunk, past its committed end {tail_offset}",
            e.end()
        ));
    }
    Ok(())
}
