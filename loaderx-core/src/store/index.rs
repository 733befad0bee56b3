//! The store's index in either format behind one face: [`Index`], the writer's operations and
//! the count, and the [`View`] a batch takes of it once (read through `table`'s [`Table`]).
//!
//! Every layer above works with the v2 form of an entry ([`Entry`]: `u64` offset, `u32` chunk,
//! lengths and a checksum); a v1 table converts its 16-byte entries on read and refuses, on
//! write, an entry that does not fit its fields (placement never makes one). A fixed-stride index
//! has no entries: it makes each one from the record's index ([`Stride`]), with no per-record
//! checksum (its records are checked a block at a time: `store/stride.rs`). A compact index
//! holds 16 bytes per raw record (`format/v2/compact.rs`): the entry a reader gets is raw, its
//! logical length the stored one, its record checksum kept.
//!
//! [`Table`]: super::table::Table

use std::path::Path;

use super::table::Table;
use crate::format::v2::{self, ENTRY_SIZE, Entry, Layout, Stride, encode_compact};
use crate::format::{Codec, Format, MAX_CHUNK_SIZE, MAX_CHUNKS, RecordLoc};
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
    pub(crate) const COMPACT: Limits =
        Limits { max_chunks: v2::COMPACT_MAX_CHUNKS, max_chunk_size: v2::COMPACT_MAX_OFFSET };
}

/// The index of an open store.
pub(crate) enum Index {
    /// `meta.zr`: the fixed table.
    V1(MetaMap),
    /// `index.zr`: the growing array.
    V2(IndexMap),
    /// `index.zr` of the fixed-stride layout: a checksum per block of records.
    Fixed(IndexMap, Stride),
    /// `index.zr` of the compact layout: a 16-byte entry per raw record.
    Compact(IndexMap),
}

/// What a batch reads entries through, taken once per batch.
pub(crate) enum View<'a> {
    /// The v1 table (always fully mapped).
    V1(&'a MetaMap),
    /// A v2 snapshot covering the entries asked for.
    V2(IndexView),
    /// The fixed stride: entries made from the index.
    Fixed(FixedView),
    /// A compact snapshot covering the entries asked for.
    Compact(CompactView),
}

/// A batch's view of a compact index.
pub(crate) struct CompactView(pub(crate) IndexView);

/// A batch's view of a fixed-stride index: the geometry, and the block checksums covering the
/// records it was taken for.
pub(crate) struct FixedView {
    pub(crate) blocks: IndexView,
    pub(crate) stride: Stride,
}

impl Index {
    /// The store's format.
    pub(crate) fn format(&self) -> Format {
        match self {
            Index::V1(_) => Format::V1,
            Index::V2(_) | Index::Fixed(..) | Index::Compact(_) => Format::V2,
        }
    }

    /// How the index locates records (v1 and v2 stores both keep an entry per record).
    pub(crate) fn layout(&self) -> Layout {
        match self {
            Index::V1(_) | Index::V2(_) => Layout::Entries,
            Index::Compact(_) => Layout::Compact,
            Index::Fixed(_, s) => Layout::Fixed {
                record_size: u32::try_from(s.record_size).unwrap_or(u32::MAX),
                block_records: u32::try_from(s.per_block).unwrap_or(u32::MAX),
            },
        }
    }

    /// The fixed stride's geometry, `None` for an index of entries.
    pub(crate) fn stride(&self) -> Option<Stride> {
        match self {
            Index::Fixed(_, s) => Some(*s),
            _ => None,
        }
    }

    /// Whether the format keeps a checksum of each record (v2's entry and compact layouts; a
    /// fixed-stride index keeps them per block).
    pub(crate) fn has_checksums(&self) -> bool {
        matches!(self, Index::V2(_) | Index::Compact(_))
    }

    /// The format's limits.
    pub(crate) fn limits(&self) -> Limits {
        match self {
            Index::V1(_) => Limits::V1,
            Index::V2(_) | Index::Fixed(..) => Limits::V2,
            Index::Compact(_) => Limits::COMPACT,
        }
    }

    /// The mapped `index.zr` of a v2 store, either layout.
    fn v2_map(&self) -> Option<&IndexMap> {
        match self {
            Index::V1(_) => None,
            Index::V2(x) | Index::Fixed(x, _) | Index::Compact(x) => Some(x),
        }
    }

    /// The published record count (acquire).
    #[inline]
    pub(crate) fn len(&self) -> u64 {
        match self {
            Index::V1(m) => u64::from(m.length()),
            Index::V2(x) | Index::Fixed(x, _) | Index::Compact(x) => x.count(),
        }
    }

    /// The write frontier the header holds: (tail chunk, offset in it).
    pub(crate) fn frontier(&self) -> (u32, u64) {
        match self {
            Index::V1(m) => {
                let h = m.header();
                (u32::from(h.tail_chunk), u64::from(h.tail_offset))
            }
            Index::V2(x) | Index::Fixed(x, _) | Index::Compact(x) => {
                let h = v2::Header::parse(&x.header(), false).unwrap_or(v2::Header::empty(1));
                (h.tail_chunk, h.tail_offset)
            }
        }
    }

    /// The count and [`Index::frontier`] for a writer about to act on them: `None` when a v2
    /// header does not parse or its frontier and count fail their checksum (where `frontier`
    /// says `(0, 0)`, or whatever damage wrote).
    pub(crate) fn checked_state(&self) -> Option<(u64, (u32, u64))> {
        match self {
            Index::V1(_) => Some((self.len(), self.frontier())),
            Index::V2(x) | Index::Fixed(x, _) | Index::Compact(x) => {
                v2::Header::parse(&x.header(), true).ok().map(|h| (h.count, (h.tail_chunk, h.tail_offset)))
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
            Index::Compact(x) => View::Compact(CompactView(x.view(len)?)),
            Index::Fixed(x, stride) => {
                View::Fixed(FixedView { blocks: x.view(stride.blocks(len))?, stride: *stride })
            }
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
            View::Fixed(f) => f.get(idx),
            View::Compact(c) => c.get(idx),
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
            View::Fixed(f) => (from..to).map(|i| f.get(i)).collect(),
            View::Compact(c) => (from..to).map(|i| c.get(i)).collect(),
        })
    }

    /// Entries `from..to`, each with its own checksum (where the format keeps one) and its
    /// fields checked: `Err(reason)` for a damaged one.
    ///
    /// # Errors
    /// As [`Index::view`].
    pub(crate) fn entries_checked(
        &self,
        from: u64,
        to: u64,
    ) -> Result<Vec<std::result::Result<Entry, String>>> {
        fn all<T: Table>(t: &T, from: u64, to: u64) -> Vec<std::result::Result<Entry, String>> {
            (from..to).map(|i| t.get_checked(i).and_then(|e| T::check(&e).map(|_| e))).collect()
        }
        Ok(match self.view(to)? {
            View::V1(m) => all(m, from, to),
            View::V2(v) => all(&v, from, to),
            View::Fixed(f) => all(&f, from, to),
            View::Compact(c) => all(&c, from, to),
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
            View::Fixed(f) => f.get_checked(idx),
            View::Compact(c) => c.get_checked(idx),
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
            Index::Fixed(..) => FixedView::check(e),
            Index::Compact(_) => CompactView::check(e),
        }
    }

    /// The writer makes room for records `0..records` (their entries, or their blocks').
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when a v2 index cannot grow.
    pub(crate) fn reserve(&self, records: u64) -> Result<()> {
        match self {
            Index::V1(_) => Ok(()),
            Index::V2(x) | Index::Compact(x) => x.reserve(records),
            Index::Fixed(x, s) => x.reserve(s.blocks(records)),
        }
    }

    /// The writer, holding the store alone, drops the room past records `0..records` that deletes
    /// left (a v1 table keeps its fixed size).
    ///
    /// # Errors
    /// [`Error::Io`] naming the index.
    pub(crate) fn shrink(&self, records: u64) -> Result<()> {
        match self {
            Index::V1(_) => Ok(()),
            Index::V2(x) | Index::Compact(x) => x.shrink(records),
            Index::Fixed(x, s) => x.shrink(s.blocks(records)),
        }
    }

    /// The writer writes the checksums of blocks `first..` of a fixed-stride index (reserved).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index of entries; [`Error::Io`] naming the path.
    pub(crate) fn set_block_crcs(&self, first: u64, crcs: &[u32]) -> Result<()> {
        match self {
            Index::Fixed(x, _) => x.set_block_crcs(first, crcs),
            _ => Err(Error::InvalidArgument("block checksums written to an index of entries".into())),
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
            Index::Compact(x) => {
                let bytes = entries.iter().map(encode_compact).collect::<std::result::Result<Vec<_>, _>>();
                x.set_compact_entries(first, &bytes.map_err(Error::InvalidArgument)?)?;
            }
            Index::Fixed(..) => {
                return Err(Error::InvalidArgument(
                    "a fixed-stride index has no entries to write: its records lie where their index says"
                        .into(),
                ));
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
            Index::V2(x) | Index::Compact(x) => x.flush_entries(first, n),
            Index::Fixed(x, s) => {
                let (from, to) = block_span(s, first, n);
                x.flush_entries(from, to - from)
            }
        }
    }

    /// Starts writing entries `first..first + n` to the disk without waiting (v2; v1 tables are
    /// flushed whole by their next sync).
    pub(crate) fn start_writeback(&self, first: u64, n: u64) {
        match self {
            Index::V1(_) => {}
            Index::V2(x) | Index::Compact(x) => x.start_writeback(first, n),
            Index::Fixed(x, s) => {
                let (from, to) = block_span(s, first, n);
                x.start_writeback(from, to - from);
            }
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
            Index::V2(x) | Index::Fixed(x, _) | Index::Compact(x) => {
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
        match self.v2_map() {
            None => Ok(None),
            Some(x) => v2::Header::parse(&x.header(), false).map(Some).map_err(|e| v2_header_error(path, e)),
        }
    }

    /// The writer records the dictionary's id in a v2 header (before any record needs it).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub(crate) fn set_dict_id(&self, id: u32, path: &Path) -> Result<()> {
        if let Index::Fixed(..) | Index::Compact(_) = self {
            return Err(Error::InvalidArgument(format!(
                "{} is a {} store of raw records: it has no dictionary",
                path.display(),
                self.layout().name()
            )));
        }
        if let Index::V2(x) = self {
            // Its dynamic fields checked too: they are written again with a fresh checksum.
            let mut h = v2::Header::parse(&x.header(), true).map_err(|e| v2_header_error(path, e))?;
            h.dict_id = id;
            x.set_header(&h.encode(), true)?;
        }
        Ok(())
    }
}

/// The block checksums `from..to` covering records `first..first + n` (none for no record).
fn block_span(s: &Stride, first: u64, n: u64) -> (u64, u64) {
    if n == 0 { (0, 0) } else { (s.block_of(first), s.block_of(first + n - 1) + 1) }
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
        HeaderError::Version(v) => {
            Error::Version { path, found: v, expected: crate::format::VERSION..=crate::format::VERSION }
        }
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
        v2::HeaderError::Version(v) => {
            Error::Version { path, found: v, expected: v2::VERSION..=v2::VERSION_COMPACT }
        }
        v2::HeaderError::Field(offset, reason) => {
            Error::Corrupt { path, offset: offset as u64, reason, source: None }
        }
    }
}
