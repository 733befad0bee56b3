//! What a store holds and whether it is intact: [`Store::stats`] and [`Store::verify`].

use rayon::prelude::*;

use super::Store;
use super::files::{MANIFEST_FILE, chunk_path};
use super::gather::Located;
use super::index::{Index, v2_header_error};
use super::overlaps::Damaged;
use super::table::committed;
use crate::format::Codec;
use crate::format::v2::{self, Manifest};
use crate::sys::fill_vec;
use crate::{Error, Result};

/// Entries read at a time by the scans (stats, verify): memory stays bounded on a big store.
pub(super) const SCAN_BLOCK: u64 = 1 << 16;

/// Reads of a v2 header (with what goes with it) made while a writer's commit keeps it torn or
/// changing, [`HEADER_WAIT`] apart: about 20 ms before a header is taken as it reads (a writer
/// descheduled in the middle of writing it, under load, leaves it torn that long).
const HEADER_TRIES: u32 = 200;
const HEADER_WAIT: std::time::Duration = std::time::Duration::from_micros(100);

/// The header of one moment and what `read` read within it: a header that passes its checksum,
/// read the same before and after `read` (look 68, L68-2: a manifest read after a commit was
/// compared with the header read before it; a header read in the middle of a commit fails its
/// checksum). After [`HEADER_TRIES`] the last read is taken as it is: damage, or a writer that
/// never stopped committing.
fn header_moment<T>(map: &crate::sys::IndexMap, mut read: impl FnMut() -> T) -> ([u8; v2::HEADER_SIZE], T) {
    let mut tries = 0;
    loop {
        let header = map.header();
        let got = read();
        tries += 1;
        if tries >= HEADER_TRIES || (v2::Header::parse(&header, true).is_ok() && map.header() == header) {
            return (header, got);
        }
        std::thread::sleep(HEADER_WAIT);
    }
}

/// Records stored under each codec, indexed by [`Codec`] (`counts[Codec::Lz4]`), in the order of
/// [`Codec::ALL`]: [`Store::stats`] and, with the `remote` feature, `RemoteSummary`.
///
/// Its `Debug` names each codec as a field (`CodecCounts { raw: 3, zstd: 1, .. }`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CodecCounts([u64; Codec::COUNT]);

impl CodecCounts {
    /// The records stored under `codec` (raw counts those that did not shrink too).
    #[inline]
    pub fn get(&self, codec: Codec) -> u64 {
        self.0[codec as usize]
    }

    /// Each codec with its count, in tag order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (Codec, u64)> {
        Codec::ALL.into_iter().zip(self.0.iter().copied())
    }

    /// Counts one record of tag `tag`; an unknown tag counts under no codec.
    pub(crate) fn count_tag(&mut self, tag: u8) {
        if let Some(c) = Codec::from_tag(tag) {
            self[c] += 1;
        }
    }
}

impl std::ops::Index<Codec> for CodecCounts {
    type Output = u64;

    #[inline]
    fn index(&self, codec: Codec) -> &u64 {
        &self.0[codec as usize]
    }
}

impl std::ops::IndexMut<Codec> for CodecCounts {
    #[inline]
    fn index_mut(&mut self, codec: Codec) -> &mut u64 {
        &mut self.0[codec as usize]
    }
}

impl std::fmt::Debug for CodecCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("CodecCounts");
        for (c, n) in self.iter() {
            s.field(c.name(), &n);
        }
        s.finish()
    }
}

/// Space accounting of a store, from [`Store::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Number of records.
    pub length: u64,
    /// Sum of the records' original sizes.
    pub logical_bytes: u64,
    /// Sum of the records' stored sizes: what compaction would keep.
    pub live_bytes: u64,
    /// Bytes used in chunk files up to the write position. `chunk_bytes - live_bytes` is an upper
    /// bound on what compaction reclaims (up to one record per chunk is slack at its end).
    pub chunk_bytes: u64,
    /// Number of chunk files.
    pub chunks: u64,
    /// Size of the dictionary, 0 without one.
    pub dict_bytes: u64,
    /// Size of the index: `meta.zr`'s 256 MiB table (sparse: what it allocates is about 16
    /// bytes a record) or `index.zr`'s header and entries.
    pub index_bytes: u64,
    /// Records per codec.
    pub codecs: CodecCounts,
}

/// What a store holds by its files alone, from [`Store::summary`]: no index entry is read, so
/// it costs the same on a store of any length (and on a damaged index that claims billions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreSummary {
    /// Number of records, as the index publishes it.
    pub length: u64,
    /// Bytes used in chunk files up to the write position.
    pub chunk_bytes: u64,
    /// Number of chunk files.
    pub chunks: u64,
    /// Size of the dictionary, 0 without one.
    pub dict_bytes: u64,
    /// Size of the index file (see [`StoreStats::index_bytes`]).
    pub index_bytes: u64,
}

/// What [`Store::verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Records checked.
    pub checked: u64,
    /// Every record that is not intact, with the reason.
    pub bad: Vec<(u64, Error)>,
    /// What is wrong with the store's files as a whole ([`Store::verify_files`]).
    pub files: Vec<Error>,
}

impl VerifyReport {
    /// True when nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.bad.is_empty() && self.files.is_empty()
    }
}

impl Store {
    /// The bytes of the chunk files (the last one up to its frontier) and of the dictionary,
    /// without reading the index: what [`StoreStats`] reports as `chunk_bytes` and `dict_bytes`.
    ///
    /// # Errors
    /// [`Error::Io`] naming a chunk file that cannot be read.
    pub(crate) fn footprint(&self) -> Result<(u64, u64)> {
        let (tail_chunk, tail_offset) = self.index.frontier();
        let mut chunk_bytes = tail_offset;
        for id in 0..tail_chunk {
            let missing = || Error::io("stat", self.chunks.path(id), std::io::ErrorKind::NotFound.into());
            chunk_bytes += self.chunks.file_len(id)?.ok_or_else(missing)?;
        }
        Ok((chunk_bytes, self.dict.get().map_or(0, |d| d.raw.len() as u64)))
    }

    /// Length and file sizes, without reading an index entry ([`Store::stats`] reads them all:
    /// logical and live bytes, records per codec).
    ///
    /// # Errors
    /// [`Error::Io`] when a chunk or index file cannot be inspected.
    pub fn summary(&self) -> Result<StoreSummary> {
        let (chunk_bytes, dict_bytes) = self.footprint()?;
        Ok(StoreSummary {
            length: self.len(),
            chunk_bytes,
            chunks: u64::from(self.index.frontier().0) + 1,
            dict_bytes,
            index_bytes: self
                .index_file
                .metadata()
                .map_err(|e| Error::io("stat", &self.index_path, e))?
                .len(),
        })
    }

    /// Length, live and chunk bytes, and records per codec.
    ///
    /// # Errors
    /// [`Error::Io`] when a chunk file cannot be inspected.
    pub fn stats(&self) -> Result<StoreStats> {
        let len = self.len();
        let (tail_chunk, _) = self.index.frontier();
        let mut s = StoreStats { length: len, chunks: u64::from(tail_chunk) + 1, ..Default::default() };
        let mut first = 0;
        while first < len {
            let end = (first + SCAN_BLOCK).min(len);
            for e in self.index.entries(first, end)? {
                s.logical_bytes += u64::from(e.logical);
                s.live_bytes += u64::from(e.stored);
                s.codecs.count_tag(e.codec);
            }
            first = end;
        }
        let sum = self.summary()?;
        (s.chunk_bytes, s.dict_bytes, s.index_bytes) = (sum.chunk_bytes, sum.dict_bytes, sum.index_bytes);
        Ok(s)
    }

    /// Checks every record and the store's files as a whole ([`Store::verify_files`]): each
    /// index entry against the format's limits and the committed tail (and, v2, its own
    /// checksum), each record's stored bytes against their checksum (v2), each record decoded and
    /// its length against the index, and the records' places against each other (no two share
    /// bytes). Nothing is changed.
    ///
    /// Every damaged record is listed; on a badly damaged store that is a long list, which
    /// [`Store::verify_each`] streams instead.
    ///
    /// # Errors
    /// Only for failures that stop the scan as a whole; bad records are listed in the report.
    pub fn verify(&self) -> Result<VerifyReport> {
        let files = self.verify_files()?;
        let mut bad = Vec::new();
        let checked = self.verify_each(|idx, e| bad.push((idx, e)))?;
        Ok(VerifyReport { checked, bad, files })
    }

    /// The records part of [`Store::verify`], handing each damaged record to `f`, in index
    /// order, as the scan finds it (records are checked in parallel, a block at a time), then
    /// each record whose bytes overlap another's (both of each pair, found after the scan: not
    /// in index order), and returning the number of records checked. Memory stays bounded
    /// however many records are damaged.
    ///
    /// # Errors
    /// Only for failures that stop the scan as a whole.
    pub fn verify_each(&self, mut f: impl FnMut(u64, Error)) -> Result<u64> {
        self.readable()?;
        let len = self.len();
        if self.index.stride().is_some() {
            self.verify_blocks(&mut f)?;
            return Ok(len);
        }
        let mut first = 0u64;
        let mut damaged = Damaged::default();
        while first < len {
            let end = (first + SCAN_BLOCK).min(len);
            let ids: Vec<u64> = (first..end).collect();
            let bad: Vec<Vec<(u64, Error)>> =
                ids.par_chunks(1024).map(|ids| self.verify_records(ids)).collect();
            for (idx, e) in bad.into_iter().flatten() {
                if readers_failure(&e) {
                    return Err(e);
                }
                damaged.insert(idx, len);
                f(idx, e);
            }
            first = end;
        }
        // Entries each sound but sharing bytes (look 68, L68-1: an entry copied over another's
        // verified intact and was carried into a migrated index).
        self.verify_overlaps(&damaged, &mut f)?;
        Ok(len)
    }

    /// The damaged records among `ids`, with what is wrong with each.
    fn verify_records(&self, ids: &[u64]) -> Vec<(u64, Error)> {
        let mut bad = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let frontier = self.index.frontier();
        let checksums = self.index.has_checksums();
        for &idx in ids {
            let checked = self.index.entry_checked(idx).and_then(|e| {
                let entry = e.map_err(|r| self.record_error(idx, r))?;
                let codec = self
                    .index
                    .check(&entry)
                    .and_then(|c| committed(&entry, frontier).map(|()| c))
                    .map_err(|r| self.record_error(idx, format!("bad index entry: {r}")))?;
                Ok(Located { index: idx, entry, codec })
            });
            let one = checked.and_then(|l| {
                fill_vec(&mut buf, l.entry.logical as usize, |out| self.read_shard(&[l], out, checksums))
            });
            if let Err(e) = one {
                bad.push((idx, e));
            }
        }
        bad
    }

    /// Checks a v2 header's checksum, which readers leave unchecked (a live writer's commit can
    /// be read torn): what a whole-store read such as an export checks first (look 68, L68-3:
    /// a header whose count was lowered exported the records below it as the whole store). Read
    /// again while a writer's commits change it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming `index.zr` where the header fails its checksum every time.
    pub(crate) fn check_header(&self) -> Result<()> {
        let (Index::V2(map) | Index::Fixed(map, _) | Index::Compact(map)) = &self.index else {
            return Ok(());
        };
        let (header, ()) = header_moment(map, || ());
        v2::Header::parse(&header, true).map(drop).map_err(|e| v2_header_error(&self.index_path, e))
    }

    /// Checks the store's files as a whole, beyond its records: a v2 header's fields that
    /// readers do not check (the frontier's checksum, the reserved bytes), and `manifest.zr`
    /// against the chunks (each chunk's length and crc32c) and the header's count. A v1 store
    /// has nothing more to check. Beside a writer appending in another handle or process, the
    /// header and the manifest are read at one moment (again while commits change the header).
    ///
    /// # Errors
    /// Only for failures that stop the check (an unreadable file); what is wrong is returned.
    pub fn verify_files(&self) -> Result<Vec<Error>> {
        let mut problems = Vec::new();
        let (Index::V2(map) | Index::Fixed(map, _) | Index::Compact(map)) = &self.index else {
            return Ok(problems);
        };
        // The header and the manifest of one moment: a writer in another process commits the
        // header, then writes the manifest, so one read between the two reads of an unchanged
        // header is the header's or one behind it (look 68, L68-2: a manifest read after a
        // commit was compared with the header read before it, and an intact store reported
        // damaged). Tried a few times while commits keep coming, then compared as read.
        let (header, read) =
            header_moment(map, || super::files::read_manifest(self.chunks.dir(), self.known_chunks()));
        let h = match v2::Header::parse(&header, true) {
            Ok(h) => h,
            Err(e) => {
                problems.push(v2_header_error(&self.index_path, e));
                return Ok(problems);
            }
        };
        let path = self.dir.join(MANIFEST_FILE);
        let corrupt =
            |offset: u64, reason: String| Error::Corrupt { path: path.clone(), offset, reason, source: None };
        let manifest = match read {
            Ok(Some(bytes)) if Manifest::decode(&bytes).is_err() && super::files::torn_unsynced(&bytes) => {
                problems.push(corrupt(
                    0,
                    "empty or cut off by zeros, as a power loss leaves it (the next read-write open writes it \
                     again)"
                        .into(),
                ));
                return Ok(problems);
            }
            Ok(Some(bytes)) => match Manifest::decode(&bytes) {
                Ok(m) => m,
                Err((offset, reason)) => {
                    problems.push(corrupt(offset, reason));
                    return Ok(problems);
                }
            },
            Ok(None) => {
                problems.push(corrupt(0, "missing (the next read-write open writes it again)".into()));
                return Ok(problems);
            }
            Err(e @ Error::Corrupt { .. }) => {
                problems.push(e);
                return Ok(problems);
            }
            Err(e) => return Err(e),
        };
        if manifest.count < h.count
            && manifest.chunks.len() as u64 <= u64::from(h.tail_chunk) + 1
            && self.manifest_describes_a_prefix(&manifest)
        {
            // Behind the header, but true of the chunks as far as it goes: what a deferred
            // store's writer leaves between syncs (the manifest is written at `sync`), or one
            // killed before the next read-write open writes it again. Not damage (the records
            // past it are checked by their own checksums).
            return Ok(problems);
        }
        if manifest.count != h.count {
            problems
                .push(corrupt(0, format!("counts {} records; the index header {}", manifest.count, h.count)));
        }
        if manifest.chunks.len() as u64 != u64::from(h.tail_chunk) + 1 {
            problems.push(corrupt(
                0,
                format!(
                    "lists {} chunks; the index header's tail is chunk {}",
                    manifest.chunks.len(),
                    h.tail_chunk
                ),
            ));
        }
        let sums: Vec<(u32, Result<v2::ChunkSummary>)> = (0..=h.tail_chunk)
            .into_par_iter()
            .map(|id| (id, self.summarise_chunk(id, (id == h.tail_chunk).then_some(h.tail_offset))))
            .collect();
        for (id, sum) in sums {
            let sum = match sum {
                Ok(s) => s,
                Err(e) if readers_failure(&e) => return Err(e),
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            if let Some(want) = manifest.chunks.get(id as usize)
                && *want != sum
            {
                problems.push(Error::Corrupt {
                    path: chunk_path(&self.dir, id),
                    offset: 0,
                    reason: format!(
                        "{} bytes with crc32c {:#010x}; the manifest says {} bytes with crc32c {:#010x}",
                        sum.len, sum.crc, want.len, want.crc
                    ),
                    source: None,
                });
            }
        }
        Ok(problems)
    }
}

impl Store {
    /// Whether each chunk `manifest` lists holds, up to the length it records, the bytes whose
    /// crc32c it records.
    fn manifest_describes_a_prefix(&self, manifest: &Manifest) -> bool {
        manifest.chunks.par_iter().enumerate().all(|(id, want)| {
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            self.summarise_chunk(id, Some(want.len)).is_ok_and(|sum| sum == *want)
        })
    }
}

/// Whether `e` is a failure of the reader (out of descriptors or memory, no permission), not
/// damage of what it reads: a scan for damage stops on it rather than list it (review V3).
pub(super) fn readers_failure(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => crate::sys::is_a_readers_failure(source),
        Error::CorruptRecord { source: Some(s), .. } | Error::Corrupt { source: Some(s), .. } => {
            s.downcast_ref::<std::io::Error>().is_some_and(crate::sys::is_a_readers_failure)
                || s.downcast_ref::<Error>().is_some_and(readers_failure)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_counts_are_indexed_by_codec_and_debug_by_name() {
        let mut c = CodecCounts::default();
        for tag in [0, 3, 3, 1, 9] {
            c.count_tag(tag);
        }
        let want = [(Codec::Raw, 1), (Codec::Zstd, 1), (Codec::ZstdDict, 0), (Codec::Lz4, 2)];
        assert_eq!(c.iter().collect::<Vec<_>>(), want);
        for (codec, n) in want {
            assert_eq!((c.get(codec), c[codec]), (n, n), "{codec}");
        }
        // The form the committed v1 fixture's stats.txt was written in (a field per codec).
        assert_eq!(format!("{c:?}"), "CodecCounts { raw: 1, zstd: 1, zstd_dict: 0, lz4: 2 }");
    }
}
