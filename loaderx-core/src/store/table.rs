//! The store's index in either format behind one face: [`Index`] for the writer's operations and
//! the count, [`Table`] for the reads of a batch (a view taken once per batch, monomorphised per
//! format so the hot loop pays no dispatch per entry).
//!
//! Every layer above works with the v2 form of an entry ([`Entry`]: `u64` offset, `u32` chunk,
//! lengths and a checksum); a v1 table converts its 16-byte entries on read and refuses, on
//! write, an entry that does not fit its fields (placement never makes one).

use std::path::Path;

use crate::format::v2::{self, ENTRY_SIZE, Entry};
use crate::format::{Codec, Format, MAX_CHUNK_SIZE, MAX_CHUNKS, MAX_RECORD_SIZE, RecordLoc};
use crate::sys::{IndexMap, IndexView, MetaMap};
use crate::{Error, Result};

/// The limits of a format that placement and the checks of entries follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Chunk ids are below this.
    pub(crate) max_chunks: u64,
    /// A record's stored bytes end at most here in their chunk, and a stored frontier is below it.
    pub(crate) max_chunk_size: u64,
}

impl Limits {
    pub(crate) const V1: Limits = Limits { max_chunks: MAX_CHUNKS as u64, max_chunk_size: MAX_CHUNK_SIZE };
    pub(crate) const V2: Limits = Limits { max_chunks: v2::MAX_CHUNKS, max_chunk_size: u64::MAX };
}

/// The index of an open store.
pub(crate) enum Index {
    /// `meta.zr`: the fixed table.
    V1(MetaMap),
    /// `index.zr`: the growing array.
    V2(IndexMap),
}

/// What a batch reads entries through, taken once per batch.
pub(crate) enum View<'a> {
    /// The v1 table (always fully mapped).
    V1(&'a MetaMap),
    /// A v2 snapshot covering the entries asked for.
    V2(IndexView),
}

impl Index {
    /// The store's format.
    pub(crate) fn format(&self) -> Format {
        match self {
            Index::V1(_) => Format::V1,
            Index::V2(_) => Format::V2,
        }
    }

    /// Whether the format keeps checksums of entries and records (v2).
    pub(crate) fn has_checksums(&self) -> bool {
        matches!(self, Index::V2(_))
    }

    /// The format's limits.
    pub(crate) fn limits(&self) -> Limits {
        match self {
            Index::V1(_) => Limits::V1,
            Index::V2(_) => Limits::V2,
        }
    }

    /// The published record count (acquire).
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        match self {
            Index::V1(m) => u64::from(m.length()),
            Index::V2(x) => x.count(),
        }
    }

    /// The write frontier the header holds: (tail chunk, offset in it).
    pub(crate) fn frontier(&self) -> (u32, u64) {
        match self {
            Index::V1(m) => {
                let h = m.header();
                (u32::from(h.tail_chunk), u64::from(h.tail_offset))
            }
            Index::V2(x) => {
                let h = v2::Header::parse(&x.header(), false).unwrap_or(v2::Header::empty(1));
                (h.tail_chunk, h.tail_offset)
            }
        }
    }

    /// A view for reading entries `0..len`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when a v2 index file holds fewer entries than `len`.
    #[inline]
    pub(crate) fn view(&self, len: u64) -> Result<View<'_>> {
        Ok(match self {
            Index::V1(m) => View::V1(m),
            Index::V2(x) => View::V2(x.view(len)?),
        })
    }

    /// Entry `idx` (below the count), for the writer's and the reports' scans; a batch takes a
    /// [`View`].
    ///
    /// # Errors
    /// As [`Index::view`].
    pub(crate) fn entry(&self, idx: u64) -> Result<Entry> {
        Ok(match self.view(idx + 1)? {
            View::V1(m) => m.get(idx),
            View::V2(v) => v.get(idx),
        })
    }

    /// Entries `from..to` (below the count), read through one view, unchecked.
    ///
    /// # Errors
    /// As [`Index::view`].
    pub(crate) fn entries(&self, from: u64, to: u64) -> Result<Vec<Entry>> {
        Ok(match self.view(to)? {
            View::V1(m) => (from..to).map(|i| m.get(i)).collect(),
            View::V2(v) => (from..to).map(|i| v.get(i)).collect(),
        })
    }

    /// Entry `idx` with its own checksum checked where the format keeps one.
    ///
    /// # Errors
    /// As [`Index::view`]; `Ok(Err(reason))` for a damaged entry.
    pub(crate) fn entry_checked(&self, idx: u64) -> Result<std::result::Result<Entry, String>> {
        Ok(match self.view(idx + 1)? {
            View::V1(m) => m.get_checked(idx),
            View::V2(v) => v.get_checked(idx),
        })
    }

    /// The format's checks of one entry ([`Table::check`]).
    ///
    /// # Errors
    /// A sentence naming the field out of range.
    pub(crate) fn check(&self, e: &Entry) -> std::result::Result<Codec, String> {
        match self {
            Index::V1(_) => MetaMap::check(e),
            Index::V2(_) => IndexView::check(e),
        }
    }

    /// The writer makes room for entries `0..entries`.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when a v2 index cannot grow.
    pub(crate) fn reserve(&self, entries: u64) -> Result<()> {
        match self {
            Index::V1(_) => Ok(()),
            Index::V2(x) => x.reserve(entries),
        }
    }

    /// The writer writes entries `first..` (reserved, not yet published or held exclusively).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an entry a v1 table cannot hold (placement never makes one).
    pub(crate) fn set_entries(&self, first: u64, entries: &[Entry]) -> Result<()> {
        match self {
            Index::V1(m) => {
                for (k, e) in entries.iter().enumerate() {
                    let loc = RecordLoc::try_from(*e).map_err(Error::InvalidArgument)?;
                    let idx = u32::try_from(first + k as u64)
                        .map_err(|_| Error::InvalidArgument("a v1 index past u32".into()))?;
                    m.set_entry(idx, loc);
                }
            }
            Index::V2(x) => {
                let bytes: Vec<[u8; ENTRY_SIZE]> = entries.iter().map(Entry::encode).collect();
                x.set_entries(first, &bytes)?;
            }
        }
        Ok(())
    }

    /// Flushes entries `first..first + n` to disk.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub(crate) fn flush_entries(&self, first: u64, n: u64, path: &Path) -> Result<()> {
        match self {
            Index::V1(m) => {
                let (from, to) = (first as u32, (first + n) as u32);
                m.flush_entries(from, to, path)
            }
            Index::V2(x) => x.flush_entries(first, n),
        }
    }

    /// Starts writing entries `first..first + n` to the disk without waiting (v2; v1 tables are
    /// flushed whole by their next sync).
    pub(crate) fn start_writeback(&self, first: u64, n: u64) {
        if let Index::V2(x) = self {
            x.start_writeback(first, n);
        }
    }

    /// Publishes `count` records and the frontier: the header's other fields first, the count
    /// last (release), then (`durable`) the header made durable.
    ///
    /// # Errors
    /// [`Error::StoreFull`] for a frontier a v1 header cannot hold; [`Error::Io`] naming `path`.
    pub(crate) fn publish(
        &self,
        count: u64,
        (chunk, offset): (u32, u64),
        path: &Path,
        durable: bool,
    ) -> Result<()> {
        match self {
            Index::V1(m) => {
                let full =
                    || Error::StoreFull { path: path.to_path_buf(), len: count, adding: 0, limit: count };
                let mut h = m.header();
                h.tail_chunk = u16::try_from(chunk).map_err(|_| full())?;
                h.tail_offset = u32::try_from(offset).map_err(|_| full())?;
                h.length = u32::try_from(count).map_err(|_| full())?;
                m.set_header(h);
                if durable { m.flush_header(path) } else { Ok(()) }
            }
            Index::V2(x) => {
                let mut h = v2::Header::parse(&x.header(), false).map_err(|e| v2_header_error(path, e))?;
                h.tail_chunk = chunk;
                h.tail_offset = offset;
                h.count = count;
                x.set_header(&h.encode(), durable)
            }
        }
    }

    /// The v2 header (static fields and the frontier), `None` for v1.
    pub(crate) fn v2_header(&self, path: &Path) -> Result<Option<v2::Header>> {
        match self {
            Index::V1(_) => Ok(None),
            Index::V2(x) => {
                v2::Header::parse(&x.header(), false).map(Some).map_err(|e| v2_header_error(path, e))
            }
        }
    }

    /// The writer records the dictionary's id in a v2 header (before any record needs it).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub(crate) fn set_dict_id(&self, id: u32, path: &Path) -> Result<()> {
        if let Index::V2(x) = self {
            let mut h = v2::Header::parse(&x.header(), false).map_err(|e| v2_header_error(path, e))?;
            h.dict_id = id;
            x.set_header(&h.encode(), true)?;
        }
        Ok(())
    }
}

/// The error for a v1 `meta.zr` header that does not parse.
pub(crate) fn v1_header_error(path: &Path, e: crate::format::HeaderError) -> Error {
    use crate::format::HeaderError;
    let path = path.to_path_buf();
    match e {
        HeaderError::Short(n) => Error::Corrupt {
            path,
            offset: n as u64,
            reason: "truncated header (meta.zr is shorter than 16 bytes)".into(),
            source: None,
        },
        HeaderError::Magic(m) => {
            Error::NotAStore { path, reason: format!("bad magic {m:?}, expected \"ZREC\"") }
        }
        HeaderError::ByteOrder => Error::ByteOrder { path },
        HeaderError::Version(v) => Error::Version { path, found: v, expected: crate::format::VERSION },
        HeaderError::Field(reason) => Error::Corrupt { path, offset: 0, reason, source: None },
    }
}

/// The error for a v2 header that does not parse.
pub(crate) fn v2_header_error(path: &Path, e: v2::HeaderError) -> Error {
    let path = path.to_path_buf();
    match e {
        v2::HeaderError::Short(n) => Error::Corrupt {
            path,
            offset: n as u64,
            reason: format!("truncated header (index.zr is shorter than {} bytes)", v2::HEADER_SIZE),
            source: None,
        },
        v2::HeaderError::Magic(m) => {
            Error::NotAStore { path, reason: format!("bad magic {m:?}, expected \"ZRC2\"") }
        }
        v2::HeaderError::Version(v) => Error::Version { path, found: v, expected: v2::VERSION },
        v2::HeaderError::Field(offset, reason) => {
            Error::Corrupt { path, offset: offset as u64, reason, source: None }
        }
    }
}

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
