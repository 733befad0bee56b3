//! A remote store's index: `index.zr` (v2, every entry's checksum checked) or the committed
//! prefix of `meta.zr` (v1), parsed by [`crate::format`]'s parsers, the v2 index cached locally by
//! its ETag; and the dictionary.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::RemoteStore;
use super::fetch::add;
use crate::format::v2::{
    COMPACT_ENTRY_SIZE, ENTRY_SIZE, Entry, EntryError, HEADER_SIZE, Header, Layout, Stride, decode_compact,
};
use crate::store::{DICT_FILE, INDEX_FILE, META_FILE};
use crate::{Codec, Error, Result};

/// The most bytes a store's small files (`schema.msgpack`, `dict.zr`) may hold: a zstd
/// dictionary is some hundreds of KiB, a schema less.
pub(super) const MAX_SMALL_FILE: u64 = 64 << 20;

impl RemoteStore {
    /// A v2 store: `index.zr`'s header and every entry parsed and checked (each entry's own
    /// checksum; a compact entry, which has none, its fields), the dictionary fetched when the
    /// header names one.
    pub(super) fn open_v2(&mut self, index: &[u8]) -> Result<()> {
        let path = self.object_url(INDEX_FILE);
        let corrupt = |offset: u64, reason: String| Error::Corrupt {
            path: PathBuf::from(&path),
            offset,
            reason,
            source: None,
        };
        let header =
            Header::parse(index, true).map_err(|e| crate::store::v2_header_error(Path::new(&path), e))?;
        let count = usize::try_from(header.count).map_err(|_| corrupt(40, "a count past usize".into()))?;
        if let Some(stride) = header.stride() {
            return self.open_stride(&stride, header.count, index);
        }
        let size = header.layout.element_size();
        let need = count.checked_mul(size).and_then(|n| n.checked_add(HEADER_SIZE));
        if need.is_none_or(|n| n > index.len()) {
            return Err(corrupt(40, format!("{count} entries in {} bytes", index.len())));
        }
        let compact = header.layout == Layout::Compact;
        self.entries = (0..count)
            .map(|i| {
                let at = HEADER_SIZE + i * size;
                let entry = if compact {
                    // A compact entry is raw and checked by its record's checksum.
                    let b: &[u8; COMPACT_ENTRY_SIZE] = index[at..at + size].try_into().unwrap_or(&[0; 16]);
                    let e = decode_compact(b);
                    e.validate().map(|_| e).map_err(EntryError::Field)
                } else {
                    Entry::parse(&index[at..at + ENTRY_SIZE])
                };
                entry.map_err(|e| corrupt(at as u64, format!("entry {i}: {e}")))
            })
            .collect::<Result<_>>()?;
        if header.dict_id != 0 {
            self.load_dictionary()?;
        }
        Ok(())
    }

    /// A fixed-stride store: an entry made for each block of records, holding the block's
    /// checksum from `index.zr`, so that reads fetch, cache and check whole blocks (at most
    /// about 4 KiB around a record: `remote/stride.rs`) and hand out the records in them.
    fn open_stride(&mut self, stride: &Stride, count: u64, index: &[u8]) -> Result<()> {
        let path = self.object_url(INDEX_FILE);
        let blocks = stride.blocks(count);
        let need = usize::try_from(blocks)
            .ok()
            .and_then(|b| b.checked_mul(4))
            .and_then(|b| b.checked_add(HEADER_SIZE));
        if need.is_none_or(|n| n > index.len()) {
            return Err(Error::Corrupt {
                path: PathBuf::from(&path),
                offset: index.len() as u64,
                reason: format!("{blocks} block checksums in {} bytes", index.len()),
                source: None,
            });
        }
        self.entries = (0..blocks)
            .map(|b| {
                let records = stride.block_records(b, count);
                let (chunk, offset) = stride.locate(records.start).unwrap_or((u32::MAX, 0));
                let len =
                    u32::try_from((records.end - records.start) * stride.record_size).unwrap_or(u32::MAX);
                let at = HEADER_SIZE + 4 * b as usize;
                let crc = u32::from_le_bytes(index[at..at + 4].try_into().unwrap_or_default());
                Entry { offset, stored: len, logical: len, chunk, codec: Codec::Raw as u8, crc }
            })
            .collect();
        self.stride = Some((*stride, count));
        Ok(())
    }

    pub(super) fn load_dictionary(&mut self) -> Result<()> {
        let bytes = self.get_whole(DICT_FILE, MAX_SMALL_FILE, None)?;
        let raw = crate::format::dict::decode(&bytes).map_err(|(o, why)| Error::Corrupt {
            path: PathBuf::from(self.object_url(DICT_FILE)),
            offset: o,
            reason: why,
            source: None,
        })?;
        let prepared = crate::store::Dictionary::new(raw.to_vec()).map_err(|reason| Error::Corrupt {
            path: PathBuf::from(self.object_url(DICT_FILE)),
            offset: 0,
            reason,
            source: None,
        })?;
        self.dict = Some(prepared);
        Ok(())
    }

    /// A v1 store: the header of `meta.zr` and its committed entries (one range request each;
    /// the rest of the fixed 256 MiB table is never fetched), the dictionary when there is one.
    /// v1 records carry no checksum, so they are read unchecked (as a v1 store is locally).
    pub(super) fn open_v1(&mut self) -> Result<()> {
        use crate::format::{ENTRY_SIZE as V1_ENTRY, Header as V1Header, RecordLoc};
        self.checksums = false;
        let path = PathBuf::from(self.object_url(META_FILE));
        let corrupt =
            |offset: u64, reason: String| Error::Corrupt { path: path.clone(), offset, reason, source: None };
        let head = self.get_range(META_FILE, 0..V1_ENTRY as u64)?;
        let header = V1Header::parse(&head).map_err(|e| crate::store::v1_header_error(&path, e))?;
        let count = u64::from(header.length);
        let table = if count == 0 {
            Bytes::new()
        } else {
            self.get_range(META_FILE, V1_ENTRY as u64..V1_ENTRY as u64 * (1 + count))?
        };
        self.entries = table
            .chunks_exact(V1_ENTRY)
            .enumerate()
            .map(|(i, b)| {
                let at = (V1_ENTRY * (i + 1)) as u64;
                let loc =
                    RecordLoc::from_bytes(b.try_into().map_err(|_| corrupt(at, "a short entry".into()))?);
                loc.validate(&header).map_err(|why| corrupt(at, format!("entry {i}: {why}")))?;
                Ok(Entry {
                    offset: u64::from(loc.offset),
                    stored: loc.phys_length,
                    logical: loc.logic_length,
                    chunk: u32::from(loc.chunk_id),
                    codec: loc.codec,
                    crc: 0,
                })
            })
            .collect::<Result<_>>()?;
        if self.entries.iter().any(|e| e.codec == Codec::ZstdDict as u8) {
            self.load_dictionary()?;
        }
        Ok(())
    }

    /// The index, from the local cache when the object's ETag is the cached copy's (the
    /// consistency token: a store rewritten under the same URL has another), else fetched and
    /// cached (temporary file, then rename). The cache is `$LOADERX_CACHE_DIR/remote/...`
    /// (the cache directory, `convert::cache_dir`); it is an optimisation: any failure to use it fetches.
    pub(super) fn cached_index(&self) -> Result<Bytes> {
        let key = self.key(INDEX_FILE);
        add(&self.counters.requests, 1);
        let link = self.link()?;
        let meta = link
            .runtime
            .block_on(link.store.head(&key))
            .map_err(|e| self.remote_err(INDEX_FILE, None, &e))?;
        let token = meta.e_tag.clone().unwrap_or_default();
        // Checked before the cached copy is read or the object fetched: an index larger than
        // memory may hold is refused, whatever the server says next.
        let limit = self.options.memory();
        if meta.size > limit {
            return Err(Error::Remote {
                url: self.object_url(INDEX_FILE),
                range: None,
                reason: format!(
                    "the server gives it {} bytes, more than the memory limit of {limit} (RemoteOptions::memory_limit)",
                    meta.size
                ),
            });
        }
        let dir = crate::sys::cache_dir()
            .join("remote")
            .join(format!("{:016x}", crate::format::hash64(self.url.as_bytes())));
        let cached = dir.join(INDEX_CACHE);
        // The cache's directory must be one (a link planted there is neither read nor written
        // through), its files regular (a FIFO is never waited on), the tag small and the index
        // the size the server gives before either is read (review Q1, Q2).
        // Both levels below the cache directory (`remote` and the store's), not only the last
        // (review R4).
        let own_dir = || {
            [dir.parent().expect("remote/<hash>"), dir.as_path()]
                .iter()
                .all(|d| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        };
        // The tag and the index in one file, landed by one rename: as two files, two readers
        // caching two versions at once could leave one's index under the other's tag, and every
        // later reader took the old index for the new (look 115, L115-1).
        let head = (CACHE_MAGIC.len() + 2 + token.len()) as u64;
        let cached_index = || -> Option<Vec<u8>> {
            let f = crate::sys::open_regular(std::fs::File::options().read(true), &cached).ok()?;
            if f.metadata().ok()?.len() != head + meta.size {
                return None;
            }
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(&f, head + meta.size + 1), &mut bytes)
                .ok()?;
            let tag = bytes.get(CACHE_MAGIC.len() + 2..head as usize)?;
            let ours = bytes.len() as u64 == head + meta.size
                && bytes.starts_with(CACHE_MAGIC)
                && bytes[CACHE_MAGIC.len()..CACHE_MAGIC.len() + 2] == (token.len() as u16).to_le_bytes()
                && tag == token.as_bytes();
            ours.then(|| bytes.split_off(head as usize))
        };
        let caching = !token.is_empty() && token.len() <= 1024 && !self.options.is_uncached();
        if caching
            && own_dir()
            && let Some(bytes) = cached_index()
        {
            return Ok(Bytes::from(bytes));
        }
        let bytes = self.get_whole(INDEX_FILE, limit, meta.e_tag.clone())?;
        if bytes.len() as u64 != meta.size {
            return Err(Error::Remote {
                url: self.object_url(INDEX_FILE),
                range: None,
                reason: format!(
                    "{} bytes came back where the server gave its size as {}",
                    bytes.len(),
                    meta.size
                ),
            });
        }
        if caching && std::fs::create_dir_all(&dir).is_ok() && own_dir() {
            let mut file = Vec::with_capacity(head as usize + bytes.len());
            file.extend_from_slice(CACHE_MAGIC);
            file.extend_from_slice(&(token.len() as u16).to_le_bytes());
            file.extend_from_slice(token.as_bytes());
            file.extend_from_slice(&bytes);
            cache_file(&dir, &file);
        }
        Ok(bytes)
    }

    /// Where this store's index is cached locally: a file of the 8 bytes `LXIDXC1\n`, the
    /// ETag's length (`u16`, little-endian), the ETag, then the index's bytes.
    pub fn index_cache(&self) -> PathBuf {
        crate::sys::cache_dir()
            .join("remote")
            .join(format!("{:016x}", crate::format::hash64(self.url.as_bytes())))
            .join(INDEX_CACHE)
    }
}

/// The cached index's file name in a store's cache directory.
const INDEX_CACHE: &str = "index.cache";

/// The first bytes of a cached index ([`RemoteStore::index_cache`]).
const CACHE_MAGIC: &[u8; 8] = b"LXIDXC1\n";

/// Puts `bytes` in `dir` as the cached index, best effort (the cache is an optimisation): a
/// temporary file of this call's own name (another process's or thread's is never removed or
/// written into, as a fixed name's was), renamed over the cached file. Not synced: a file cut by
/// a crash fails its length check and is fetched again.
fn cache_file(dir: &std::path::Path, bytes: &[u8]) {
    // What readers killed while caching left (look 116, L116-2: a temporary of the index's size
    // for each, never reclaimed): removed once older than any write of one takes.
    const STALE: std::time::Duration = std::time::Duration::from_secs(600);
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name();
        let ours =
            name.to_str().is_some_and(|n| n.starts_with(&format!("{INDEX_CACHE}.")) && n.ends_with(".tmp"));
        let old = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
        if ours && old.is_some_and(|age| age > STALE) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!("{INDEX_CACHE}.{}.{n}.tmp", std::process::id()));
    let written = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
        .and_then(|()| std::fs::rename(&tmp, dir.join(INDEX_CACHE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
