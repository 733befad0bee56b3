//! The local page cache of remote stores ([`RemoteOptions::cache`](super::RemoteOptions::cache)):
//! aligned pages of chunk objects in a directory with a byte limit, shared by the processes of
//! one host.
//!
//! Layout: `DIR/<store>-p<page size>/<chunk>-<tag>/<page>.pg`, where `<store>` is a hash of the
//! store's URL and `<tag>` a hash of the chunk object's ETag (its consistency token): a chunk
//! replaced under the same URL gets new pages, never a mix of versions, and readers of other
//! page sizes never take each other's pages (page 1 of 4 KiB and the last page of 8 KiB can
//! have the same length). Page `p` of a chunk holds its bytes `p * page .. min((p + 1) * page,
//! size)`.
//!
//! - **Fills are atomic**: a page is written to a temporary of the filler's own
//!   (`.<page>.pg.<pid>.<n>.tmp`, created exclusively) and renamed into place, so a page file is
//!   whole or absent; one whose length is not the page's is ignored (refetched).
//! - **Shared by processes** through file locks, no shared memory: a filler holds the lock of the
//!   page's stripe (`<store>/locks/<k>.lock`, one of 64, taken in ascending order so two fillers
//!   never deadlock), looks again (another process may have filled it meanwhile) and only then
//!   fetches: two processes missing the same page fetch it once.
//! - **Checked when filled**: every record lying wholly inside a page is checked against its
//!   crc32c before the page is written (records across a page boundary are checked when read, as
//!   every record is).
//! - **Healed when damaged**: a record read from cached pages is checked before a byte of it is
//!   handed out; on a mismatch its pages are dropped and fetched once from the store, so a page
//!   file damaged on disk costs a request, not every later read. A v1 store's records carry no
//!   checksum (read unchecked, as a v1 store is locally): its pages are neither checked when
//!   filled nor healed, and a page damaged on disk is read as it is (review 52; migrate to v2).
//! - **Byte limit, least recently used out**: before a fill would take the directory past the
//!   limit, the filler takes `DIR/evict.lock`, lists every page of every store and removes the
//!   least recently used (by modification time, which a use refreshes at most once a minute)
//!   until the fill fits with an eighth of the limit free. The directory can exceed the limit
//!   only by pages other processes filled since the last listing.
//!
//! Each process keeps up to `OPEN_PAGES` pages open (mapped), so a warm page costs a memory
//! copy. Pages are never modified in place (only renamed over or removed), which is what makes
//! mapping them sound: see `MappedFile::map_prefix`.
//!
//! The cache is an optimisation: a page that cannot be written (a full disk, say) is served from
//! memory for the batch and counted in [`RemoteStats::cache_errors`](super::RemoteStats).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

use crate::sys::{MadeIn, MappedFile};
use crate::{Error, Result};

/// Lock stripes per store.
const STRIPES: u64 = 64;
/// Pages one process keeps open.
pub(super) const OPEN_PAGES: usize = 4096;
/// How often a page in use has its modification time refreshed.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// A page: which chunk (with its consistency token) and which page of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct PageKey {
    pub(super) chunk: u32,
    pub(super) page: u64,
}

/// A mapped page file as the owner of a `Bytes`.
struct Mapped(MappedFile);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

struct Open {
    bytes: Bytes,
    path: PathBuf,
    used: u64,
    touched: Instant,
}

#[derive(Default)]
struct OpenPages {
    pages: HashMap<PageKey, Open>,
    tick: u64,
}

/// The cache of one remote store; see the [module documentation](self).
pub(super) struct PageCache {
    dir: PathBuf,
    store: PathBuf,
    limit: u64,
    page: u64,
    /// Bytes in the directory as last listed, plus this process's fills since.
    used: RwLock<Option<u64>>,
    open: RwLock<OpenPages>,
    /// The process `used` and `open` were made in: a child forked while a thread held one goes
    /// on without it (a page neither kept open nor written; fetched all the same).
    made_in: MadeIn,
}

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageCache")
            .field("dir", &self.dir)
            .field("limit", &self.limit)
            .field("page", &self.page)
            .finish_non_exhaustive()
    }
}

/// Lock files held (a page's stripes, the eviction lock), unlocked when dropped: explicitly, not
/// by closing them. A `flock` belongs to the open file, which a process forked while a thread
/// held it shares: closed only, the lock lived on in the child's copy, and the child's own
/// request for it waited for good (look 65, L65-2: 4 of 48 children), the parent's too while
/// that child lived. Unlocked, it is free for every copy.
pub(super) struct Held(Vec<File>);

impl Drop for Held {
    fn drop(&mut self) {
        for f in &self.0 {
            // Best effort: a lock that cannot be released is released when its last copy closes.
            let _ = f.unlock();
        }
    }
}

impl PageCache {
    /// The cache of the store at `url` in `dir`, pages of `page` bytes, at most `limit` bytes.
    ///
    /// # Errors
    /// [`Error::Io`] naming the directory when it cannot be created.
    pub(super) fn new(dir: &Path, limit: u64, page: u64, url: &str) -> Result<PageCache> {
        let store = dir.join(format!("{:016x}-p{page}", crate::format::hash64(url.as_bytes())));
        let locks = store.join("locks");
        let not_ours = |d: &Path| {
            Error::io(
                "use the cache directory",
                d,
                std::io::Error::other("a link (or not a directory) where the cache keeps its own"),
            )
        };
        if std::fs::symlink_metadata(&store).is_ok_and(|m| !m.is_dir()) {
            return Err(not_ours(&store));
        }
        std::fs::create_dir_all(&locks).map_err(|e| Error::io("create the cache directory", &locks, e))?;
        // The store's directory and its locks' must be directories, not links planted there: a
        // link would have pages written (and removed) outside the cache, uncounted (review Q2).
        for d in [&store, &locks] {
            if !std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
                return Err(not_ours(d));
            }
        }
        Ok(PageCache {
            dir: dir.to_path_buf(),
            store,
            limit,
            page,
            used: RwLock::new(None),
            open: RwLock::new(OpenPages::default()),
            made_in: MadeIn::here(),
        })
    }

    pub(super) fn page_size(&self) -> u64 {
        self.page
    }

    /// The page's file, for the chunk object whose ETag is `tag`.
    pub(super) fn path(&self, key: PageKey, tag: &str) -> PathBuf {
        self.store
            .join(format!("{}-{:016x}", key.chunk, crate::format::hash64(tag.as_bytes())))
            .join(format!("{}.pg", key.page))
    }

    /// A page this process has open.
    pub(super) fn get_open(&self, key: PageKey) -> Option<Bytes> {
        let mut open = self.made_in.write(&self.open).ok()?;
        open.tick += 1;
        let tick = open.tick;
        let page = open.pages.get_mut(&key)?;
        page.used = tick;
        if page.touched.elapsed() >= TOUCH_EVERY {
            page.touched = Instant::now();
            touch(&page.path);
        }
        Some(page.bytes.clone())
    }

    /// The page file at `path` when it is there and `len` bytes long, mapped, its use recorded.
    pub(super) fn load(&self, key: PageKey, path: &Path, len: u64) -> Option<Bytes> {
        // Never waits on a FIFO planted under a page's name, takes regular files only (review Q1).
        let file = crate::sys::open_regular(File::options().read(true), path).ok()?;
        if file.metadata().ok()?.len() != len {
            return None;
        }
        // A use refreshes the page's place in the eviction order.
        let _ = file.set_modified(SystemTime::now());
        let mapped = MappedFile::map_prefix(&file, path, len).ok()?;
        let bytes = Bytes::from_owner(Mapped(mapped));
        self.keep(key, path, bytes.clone());
        Some(bytes)
    }

    /// Drops page `key`: this process's open copy and its file at `path` (a page that failed a
    /// record's checksum). Readers that have it mapped keep their mapping; the next fill renames
    /// a new file into place.
    pub(super) fn discard(&self, key: PageKey, path: &Path) {
        if let Ok(mut open) = self.made_in.write(&self.open) {
            open.pages.remove(&key);
        }
        // Best effort: a file already gone is what was wanted.
        let _ = std::fs::remove_file(path);
    }

    /// Keeps `bytes` open as page `key`, the least recently used open page closed when full.
    pub(super) fn keep(&self, key: PageKey, path: &Path, bytes: Bytes) {
        let Ok(mut open) = self.made_in.write(&self.open) else {
            return;
        };
        open.tick += 1;
        let used = open.tick;
        if open.pages.len() >= OPEN_PAGES
            && !open.pages.contains_key(&key)
            && let Some(oldest) = open.pages.iter().min_by_key(|(_, p)| p.used).map(|(k, _)| *k)
        {
            open.pages.remove(&oldest);
        }
        open.pages.insert(key, Open { bytes, path: path.to_path_buf(), used, touched: Instant::now() });
    }

    /// Locks the stripes of `keys` (ascending: fillers never deadlock); unlocked when dropped.
    ///
    /// # Errors
    /// [`Error::Io`] naming a lock file that cannot be opened or locked.
    pub(super) fn lock(&self, keys: impl Iterator<Item = PageKey>) -> Result<Held> {
        let mut stripes: Vec<u64> = keys
            .map(|k| {
                crate::format::hash64(&[k.chunk.to_le_bytes(), (k.page as u32).to_le_bytes()].concat())
                    % STRIPES
            })
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes
            .into_iter()
            .map(|s| {
                let path = self.store.join("locks").join(format!("{s}.lock"));
                // Never through a link, never waiting on a FIFO (review Q1).
                let file = crate::store::open_or_create_no_follow(&path)?;
                file.lock().map_err(|e| Error::io("lock", &path, e))?;
                Ok(file)
            })
            .collect::<Result<_>>()
            .map(Held)
    }

    /// Writes a filled page (temporary file, then rename), room made first. Returns the pages
    /// evicted, or the error that kept the page from being written.
    pub(super) fn store(&self, path: &Path, bytes: &[u8]) -> std::io::Result<u64> {
        use std::io::Write;
        let evicted = self.make_room(bytes.len() as u64)?;
        let dir = path.parent().unwrap_or(&self.store);
        std::fs::create_dir_all(dir)?;
        // The chunk's directory, and the store's above it, must be directories: a link planted
        // there would have the page written elsewhere (reviews P3, Q2).
        if !std::fs::symlink_metadata(dir)?.is_dir() || !std::fs::symlink_metadata(&self.store)?.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a directory of the cache's",
                dir.display()
            )));
        }
        // A temporary of this process's own, created exclusively (never through a link planted
        // under a fixed name, never over another filler's), removed if the fill fails.
        let (tmp, mut file) =
            crate::sys::create_own_temporary(dir, path.file_name().unwrap_or_default(), "tmp")?;
        let written = file.write_all(bytes).and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        Ok(evicted)
    }

    /// Makes room for `need` more bytes; returns how many pages were removed.
    fn make_room(&self, need: u64) -> std::io::Result<u64> {
        if need > self.limit {
            return Err(std::io::Error::other(format!(
                "a page of {need} bytes is over the cache's limit of {}",
                self.limit
            )));
        }
        let mut used = self
            .made_in
            .write(&self.used)
            .map_err(|held| std::io::Error::other(held.reason("the cache's count of its bytes")))?;
        let now = match *used {
            Some(u) => u,
            None => self.list()?.iter().map(|p| p.1).sum(),
        };
        if now + need <= self.limit {
            *used = Some(now + need);
            return Ok(0);
        }
        let lock = crate::store::open_or_create_no_follow(&self.dir.join("evict.lock"))
            .map_err(std::io::Error::other)?;
        lock.lock()?;
        let _held = Held(vec![lock]);
        let mut pages = self.list()?;
        let mut total: u64 = pages.iter().map(|p| p.1).sum();
        let target = self.limit.saturating_sub(self.limit / 8).saturating_sub(need);
        pages.sort_by_key(|p| p.0);
        let mut removed = 0;
        for (_, len, path) in pages {
            if total <= target {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                removed += 1;
            }
        }
        *used = Some(total + need);
        Ok(removed)
    }

    /// Every page file in the cache directory (all stores): modified, length, path. Only the
    /// cache's own names count (`<16 hex>-p<N>/<chunk>-<16 hex>/<page>.pg`), only real
    /// directories are entered and only regular files listed: a user's `*.pg` or a link in the
    /// directory is never evicted or followed (review P2).
    fn list(&self) -> std::io::Result<Vec<(SystemTime, u64, PathBuf)>> {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let hex16 = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
        let store_name = |n: &str| n.split_once("-p").is_some_and(|(h, p)| hex16(h) && digits(p));
        let chunk_name = |n: &str| n.split_once('-').is_some_and(|(c, h)| digits(c) && hex16(h));
        let page_name = |n: &str| n.strip_suffix(".pg").is_some_and(digits);
        // Entries of `dir` named as `ok` says, of the kind `want` says, not followed.
        let entries =
            |dir: &Path, ok: &dyn Fn(&str) -> bool, want_dir: bool| -> Vec<(PathBuf, std::fs::Metadata)> {
                let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
                rd.flatten()
                    .filter(|e| e.file_name().to_str().is_some_and(ok))
                    .filter_map(|e| {
                        let meta = std::fs::symlink_metadata(e.path()).ok()?;
                        let kind = if want_dir { meta.is_dir() } else { meta.is_file() };
                        kind.then(|| (e.path(), meta))
                    })
                    .collect()
            };
        std::fs::read_dir(&self.dir)?;
        let mut out = Vec::new();
        for (store, _) in entries(&self.dir, &store_name, true) {
            for (chunk, _) in entries(&store, &chunk_name, true) {
                for (path, meta) in entries(&chunk, &page_name, false) {
                    out.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), path));
                }
            }
        }
        Ok(out)
    }
}

/// Refreshes a page file's modification time (its eviction order); best effort.
fn touch(path: &Path) {
    if let Ok(f) = crate::sys::open_regular(File::options().read(true), path) {
        let _ = f.set_modified(SystemTime::now());
    }
}
