//! The files of a store directory: their names, and the one way a file is replaced atomically.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `meta.zr` | v1: header + fixed sparse table of 2^24 entries, memory-mapped and used in place |
//! | `index.zr` | v2: header + a dense array of entries that grows with the store, mapped |
//! | `manifest.zr` | v2: every chunk's committed length and crc32c |
//! | `0.zr`, `1.zr`, ... | chunk files of densely packed record bytes, at most 4 GiB each |
//! | `dict.zr` | the trained zstd dictionary of `zstd_dict` records |
//! | `journal.zr` | present only while a delete or compaction batch is being applied |
//! | `write.lock` | the writer's advisory lock, present while a writer has the store open |

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The metadata file of a v1 store.
pub(crate) const META_FILE: &str = "meta.zr";
/// The index of a v2 store.
pub(crate) const INDEX_FILE: &str = "index.zr";
/// The chunk manifest of a v2 store.
pub(crate) const MANIFEST_FILE: &str = "manifest.zr";
/// The trained dictionary.
pub(crate) const DICT_FILE: &str = "dict.zr";
/// The redo log of delete and compaction.
pub(crate) const JOURNAL_FILE: &str = "journal.zr";
/// The writer's lock.
pub(crate) const LOCK_FILE: &str = "write.lock";
/// File name of the schema inside a dataset directory (a store with its schema): written by
/// `dataset/`, named here with the store's files, since uploads and removals handle both.
pub const SCHEMA_FILE: &str = "schema.msgpack";
/// Suffix of the temporary file [`write_atomic`] renames into place.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Opens `path` for writing, created when missing, its bytes kept, refusing a symbolic link at
/// `path` (a lock file: one planted as a link would have the locker write its process id through
/// it).
///
/// # Errors
/// [`Error::Io`] naming `path`.
pub(crate) fn open_or_create_no_follow(path: &Path) -> Result<File> {
    let mut opts = File::options();
    opts.read(true).write(true).create(true).truncate(false);
    // Never waits in the open (a FIFO planted there), and takes a regular file only.
    let file =
        crate::sys::no_follow_non_blocking(&mut opts).open(path).map_err(|e| Error::io("open", path, e))?;
    if !file.metadata().map_err(|e| Error::io("stat", path, e))?.is_file() {
        return Err(Error::NotReplaceable { path: path.to_path_buf(), reason: "not a regular file".into() });
    }
    Ok(file)
}

/// Creates `path` as a new file for writing, replacing a stale one a crash left behind: removing
/// a name never touches what a link there points to, and the exclusive create (`O_EXCL`) refuses
/// whatever is put back in between, link or file.
fn create_fresh(path: &Path) -> Result<File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", path, e)),
    }
    File::options().write(true).create_new(true).open(path).map_err(|e| Error::io("create", path, e))
}

/// Creates chunk 0 of a new store in `dir`, or takes the empty one a killed create left: never
/// through a link, never removing or truncating a file (one that appeared since the directory
/// was looked at is refused, not deleted).
///
/// # Errors
/// [`Error::NotReplaceable`] for a `0.zr` that is not an empty regular file; [`Error::Io`].
pub(crate) fn create_chunk_zero(dir: &Path) -> Result<File> {
    let path = chunk_path(dir, 0);
    let mut opts = File::options();
    opts.read(true).write(true).create(true).truncate(false);
    let file = crate::sys::no_follow(&mut opts).open(&path).map_err(|e| Error::io("create", &path, e))?;
    let meta = file.metadata().map_err(|e| Error::io("stat", &path, e))?;
    let links = crate::sys::link_count(&file).map_err(|e| Error::io("stat", &path, e))?;
    if !meta.is_file() || meta.len() != 0 || links > 1 {
        return Err(Error::NotReplaceable {
            path,
            reason: format!("{} holds no store, but a chunk file a new store would overwrite", dir.display()),
        });
    }
    Ok(file)
}

/// The name of chunk `id`'s file (its object's name, in a store on object storage).
pub(crate) fn chunk_name(id: u32) -> String {
    format!("{id}.zr")
}

/// The path of chunk `id` in `dir`.
pub(crate) fn chunk_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(chunk_name(id))
}

/// Removes every chunk file of the store directory `dir` numbered past `tail`, highest first, whatever gaps there are
/// among them: a removal killed part way (of a trim, or of a compaction's or delete's chunks past
/// its new frontier) leaves files past a gap, which a walk up from `tail + 1` would stop before
/// and a later append would then write into over their old bytes.
///
/// # Errors
/// [`Error::Io`] naming `dir` when it cannot be listed, or a file that cannot be removed.
pub(crate) fn remove_chunks_after(dir: &crate::sys::Dir, tail: u32) -> Result<()> {
    let mut past = Vec::new();
    let names = dir.names_listed().map_err(|e| Error::io("read directory", dir.path(), e))?;
    for name in names {
        if let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".zr"))
            .filter(|n| is_chunk_id(n))
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|&id| id > tail)
        {
            past.push(id);
        }
    }
    past.sort_unstable_by(|a, b| b.cmp(a));
    // Removed from the directory held open, whatever its path leads to now.
    for id in past {
        match dir.remove(&chunk_name(id)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove", chunk_path(dir.path(), id), e)),
        }
    }
    Ok(())
}

/// Whether `n` is a chunk id as loaderx names one: decimal, no sign, no leading zero (a user's
/// `007.zr` or `+1.zr` is not a chunk).
fn is_chunk_id(n: &str) -> bool {
    n.parse::<u32>().is_ok_and(|id| id.to_string() == n)
}

/// Whether `name` is one of a store's own files (or a temporary file of one). `write.lock` is
/// not: it is removed only by the writer that holds it, never with a store's files (a creator
/// that removed it would lock a new file beside a live writer).
pub(crate) fn is_store_file(name: &str) -> bool {
    let ours = |n: &str| matches!(n, META_FILE | INDEX_FILE | MANIFEST_FILE | DICT_FILE | JOURNAL_FILE);
    // Only the temporary files `write_atomic` makes of a store's or dataset's files: a user's
    // `thesis.tmp` is not one.
    let temporary = |n: &str| ours(n) || n == SCHEMA_FILE || n == crate::format::storeset::SET_FILE;
    ours(name)
        || name.strip_suffix(".zr").is_some_and(is_chunk_id)
        || name.strip_suffix(TMP_SUFFIX).is_some_and(temporary)
}

/// Replaces `dir/name` atomically and durably: `fill` writes a temporary file beside it, which
/// is synced, renamed over `name`, and the directory synced. A crash leaves the old file or the
/// new one, never a mix; the temporary file of a failed `fill`, sync or rename is removed.
///
/// # Errors
/// `fill`'s error; [`Error::Io`] naming the file that failed.
pub(crate) fn write_atomic_with(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&File, &Path) -> Result<()>,
) -> Result<()> {
    write_atomic_landing(dir, name, fill).map_err(|(e, _)| e)
}

/// [`write_atomic_with`], whose error says whether the new file landed (its rename done, only
/// the directory's sync failed): for a rename that is a commit.
pub(crate) fn write_atomic_landing(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&File, &Path) -> Result<()>,
) -> std::result::Result<(), (Error, bool)> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let file = create_fresh(&tmp).map_err(|e| (e, false))?;
    let written = fill(&file, &tmp).and_then(|()| file.sync_all().map_err(|e| Error::io("sync", &tmp, e)));
    drop(file);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err((e, false));
    }
    rename_or_remove(&tmp, &path).map_err(|e| (e, false))?;
    sync_dir(dir).map_err(|e| (e, true))
}

/// [`write_atomic_landing`] in the store directory `dir` held open: the temporary made, renamed
/// and the directory synced there, whatever its path leads to now.
pub(crate) fn write_atomic_in(
    dir: &crate::sys::Dir,
    name: &str,
    fill: impl FnOnce(&File, &Path) -> Result<()>,
) -> std::result::Result<(), (Error, bool)> {
    write_atomic_in_then(dir, name, fill, || Ok(()))
}

/// [`write_atomic_in`], `before_rename` run once the temporary is written and synced and before
/// it is renamed into place (a failure there removes the temporary: nothing landed). What must
/// not happen unless the file can land goes there: the part that needs disk space is done.
pub(crate) fn write_atomic_in_then(
    dir: &crate::sys::Dir,
    name: &str,
    fill: impl FnOnce(&File, &Path) -> Result<()>,
    before_rename: impl FnOnce() -> Result<()>,
) -> std::result::Result<(), (Error, bool)> {
    let tmp_name = format!("{name}{TMP_SUFFIX}");
    let tmp = dir.join(&tmp_name);
    let file = fresh_in(dir, &tmp_name).map_err(|e| (e, false))?;
    let written = fill(&file, &tmp)
        .and_then(|()| file.sync_all().map_err(|e| Error::io("sync", &tmp, e)))
        .and_then(|()| before_rename());
    drop(file);
    if let Err(e) = written {
        let _ = dir.remove(&tmp_name);
        return Err((e, false));
    }
    rename_or_remove_in(dir, &tmp_name, name).map_err(|e| (e, false))?;
    dir.sync().map_err(|e| (Error::io("sync directory", dir.path(), e), true))
}

/// [`write_atomic`] in the store directory `dir` held open.
pub(crate) fn write_atomic_bytes_in(dir: &crate::sys::Dir, name: &str, bytes: &[u8]) -> Result<()> {
    write_atomic_in(dir, name, |file, tmp| {
        crate::sys::write_all_at(file, bytes, 0).map_err(|e| Error::io("write", tmp, e))
    })
    .map_err(|(e, _)| e)
}

/// Replaces `name` in the store directory `dir` held open with `bytes` atomically but without waiting for the disk: a temporary
/// file renamed over `name`, neither synced. For a file that is derived from the durable ones and
/// rebuilt from them when it is missing, damaged or behind (v2's `manifest.zr`): a crash leaves
/// the old file, the new one, or (after a power loss) an empty or stale one, never a mix that
/// decodes.
///
/// # Errors
/// [`Error::Io`] naming the file that failed.
pub(crate) fn replace_unsynced_in(dir: &crate::sys::Dir, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp_name = format!("{name}{TMP_SUFFIX}");
    let file = fresh_in(dir, &tmp_name)?;
    let written =
        crate::sys::write_all_at(&file, bytes, 0).map_err(|e| Error::io("write", dir.join(&tmp_name), e));
    drop(file);
    if let Err(e) = written {
        let _ = dir.remove(&tmp_name);
        return Err(e);
    }
    rename_or_remove_in(dir, &tmp_name, name)
}

/// [`create_fresh`] in `dir` held open.
fn fresh_in(dir: &crate::sys::Dir, name: &str) -> Result<File> {
    match dir.remove(name) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", dir.join(name), e)),
    }
    dir.create_new(name).map_err(|e| Error::io("create", dir.join(name), e))
}

/// [`rename_or_remove`] in `dir` held open.
fn rename_or_remove_in(dir: &crate::sys::Dir, tmp: &str, name: &str) -> Result<()> {
    dir.rename(tmp, name).map_err(|e| {
        let _ = dir.remove(tmp);
        Error::io("rename a temporary file over", dir.join(name), e)
    })
}

/// Renames the temporary `tmp` to `path`; when that fails, removes `tmp` (the caller's own,
/// just made) and names `path`, the file that could not be replaced.
fn rename_or_remove(tmp: &Path, path: &Path) -> Result<()> {
    std::fs::rename(tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(tmp);
        Error::io("rename a temporary file over", path, e)
    })
}

/// [`write_atomic_with`] of the bytes `bytes`.
///
/// # Errors
/// [`Error::Io`] naming the file that failed.
pub(crate) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    write_atomic_with(dir, name, |file, tmp| {
        crate::sys::write_all_at(file, bytes, 0).map_err(|e| Error::io("write", tmp, e))
    })
}

/// Whether `bytes`, a file replaced with [`replace_unsynced_in`] that does not decode, are what a
/// power loss leaves of one: nothing, or its first sectors and then zeros to its end (a file
/// system that made the new length durable before all of its data). Sectors of 512 bytes, the
/// smallest unit a disk writes.
pub(crate) fn torn_unsynced(bytes: &[u8]) -> bool {
    bytes.is_empty() || written_sectors(bytes) < bytes.len()
}

/// The bytes of `bytes` up to the end of its last sector that is not all zeros: what a power
/// loss that zeroed its tail left as written.
pub(crate) fn written_sectors(bytes: &[u8]) -> usize {
    const SECTOR: usize = 512;
    let written = bytes.iter().rposition(|&b| b != 0).map_or(0, |k| k + 1);
    written.div_ceil(SECTOR) * SECTOR
}

/// The bytes of the small file `path` (a manifest, a schema), or `None` when there is none; a
/// file over `cap` bytes is refused before it is read (its length would size the buffer).
///
/// # Errors
/// [`Error::Corrupt`] for a file over `cap`; [`Error::Io`] naming `path`.
pub(crate) fn read_capped(path: &Path, cap: u64) -> Result<Option<Vec<u8>>> {
    let file = match crate::sys::open_regular(File::options().read(true), path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    read_capped_file(file, path, cap).map(Some)
}

/// [`read_capped`] of `name` in the store directory `dir` held open.
pub(crate) fn read_capped_in(dir: &crate::sys::Dir, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
    match dir.open_file(name, crate::sys::Access::Read) {
        Ok(f) => read_capped_file(f, &dir.join(name), cap).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("open", dir.join(name), e)),
    }
}

/// The bytes of `file` (named `path`), refused past `cap`.
fn read_capped_file(file: File, path: &Path, cap: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let too_long = |len: u64| Error::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason: format!("{len} bytes is more than this file may hold ({cap})"),
        source: None,
    };
    let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    if len > cap {
        return Err(too_long(len));
    }
    // At most `cap + 1` bytes whatever the file does meanwhile (one growing is still refused).
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| Error::io("read", path, e))?;
    if bytes.len() as u64 > cap {
        return Err(too_long(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Makes a directory entry change (create, rename, remove) durable.
///
/// # Errors
/// [`Error::Io`] naming the directory.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    // Windows cannot open a directory as a file to sync it (and its renames are durable by the
    // time they return); a directory that cannot be opened is skipped there.
    match File::open(dir) {
        Ok(d) => d.sync_all().map_err(|e| Error::io("sync directory", dir, e)),
        Err(_) if cfg!(windows) => Ok(()),
        Err(e) => Err(Error::io("sync directory", dir, e)),
    }
}

/// Refuses `dir` when it is a store set (it holds `storeset.msgpack`): every reader opens the
/// set's manifest first, so a store made beside it would take appends no reader ever sees.
///
/// # Errors
/// [`Error::NotReplaceable`] naming the set's manifest.
pub(crate) fn refuse_set(dir: &Path) -> Result<()> {
    let set = dir.join(crate::format::storeset::SET_FILE);
    if std::fs::symlink_metadata(&set).is_ok() {
        return Err(Error::NotReplaceable {
            path: set,
            reason: format!(
                "{} is a store set (its records live in its parts): no store is made or written in it; \
                 append to, compact or migrate each part and stitch them again, or write the set again",
                dir.display()
            ),
        });
    }
    Ok(())
}

/// Removes the files of a store (and nothing else) from `dir`.
///
/// # Errors
/// [`Error::Io`] naming the file or directory.
/// Refuses to create a store in `dir` (which holds no index) over files a creator did not leave:
/// what a create killed before its index was renamed into place leaves (an empty `0.zr`, an
/// empty store's manifest, temporary files) is taken over; any other store-named file (a user's
/// `0.zr`, a link there, a dictionary or a journal) is [`Error::NotReplaceable`], nothing touched.
///
/// # Errors
/// [`Error::NotReplaceable`] naming the file; [`Error::Io`] naming the directory.
pub(crate) fn refuse_strays(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_store_file(&name) || name.ends_with(TMP_SUFFIX) {
            continue;
        }
        let path = entry.path();
        // Not followed: a link is what it is, whatever it points to.
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
        let left_by_a_create = meta.is_file()
            && match name.as_str() {
                "0.zr" => meta.len() == 0,
                MANIFEST_FILE => read_capped(&path, crate::format::v2::manifest_len(1))?
                    .and_then(|b| crate::format::v2::Manifest::decode(&b).ok())
                    .is_some_and(|m| m.count == 0 && m.chunks.iter().all(|c| c.len == 0)),
                _ => false,
            };
        if !left_by_a_create {
            return Err(Error::NotReplaceable {
                path,
                reason: format!(
                    "{} holds no store, but a file named {name} that a store would overwrite{}",
                    dir.display(),
                    if meta.file_type().is_symlink() { " (a symbolic link)" } else { "" }
                ),
            });
        }
    }
    Ok(())
}

/// The bytes of `dir`'s `manifest.zr` (`None` when there is none), refused before it is read
/// when it is longer than a manifest of a row per chunk file present: every chunk an honest
/// manifest lists exists (a compaction's, written before its last header, too), and a header's
/// tail may be the damage being looked at. Only when the directory was renamed away (its files
/// cannot be listed by a path) are the `known` chunks (the index's) the bound.
///
/// # Errors
/// [`Error::Corrupt`] for a longer file; [`Error::Io`] naming the file or the directory.
pub(crate) fn read_manifest(dir: &crate::sys::Dir, known: u64) -> Result<Option<Vec<u8>>> {
    let files = match dir.names_listed() {
        Ok(names) => names
            .iter()
            .filter(|name| name.to_str().and_then(|n| n.strip_suffix(".zr")).is_some_and(is_chunk_id))
            .count() as u64,
        // The directory renamed away: its chunks cannot be listed by a path, so the manifest
        // may list the `known` chunks (the index's); it is still read from this directory.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.still_named().is_ok_and(|named| !named) => {
            known
        }
        Err(e) => return Err(Error::io("read directory", dir.path(), e)),
    };
    read_capped_in(dir, MANIFEST_FILE, crate::format::v2::manifest_len(files.max(1)))
}

/// Whether `dir` holds a store to replace: an `index.zr` or `meta.zr` that is a regular file
/// beginning with its format's magic (a damaged store still has it). A file of that name
/// holding anything else is a stray ([`refuse_strays`]), never taken for a store.
pub(crate) fn holds_a_store(dir: &Path) -> bool {
    [(INDEX_FILE, crate::format::v2::MAGIC), (META_FILE, crate::format::MAGIC)].into_iter().any(
        |(name, magic)| {
            let path = dir.join(name);
            std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && crate::sys::open_regular(File::options().read(true), &path).is_ok_and(|f| {
                    let mut head = [0u8; 4];
                    crate::sys::read_exact_at(&f, &mut head, 0).is_ok() && head == magic
                })
        },
    )
}

/// Removes a store's own files from `dir` ([`is_store_file`]), its index last.
///
/// # Errors
/// [`Error::Io`] naming the file or the directory.
pub(crate) fn remove_store_files(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    let mut index = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let name = entry.file_name();
        if is_store_file(&name.to_string_lossy()) {
            let p = entry.path();
            // The index goes last: a removal killed part way leaves a store (with chunks
            // missing) that the next overwrite replaces, never store files without an index,
            // which a creator refuses to take for its own.
            if name == INDEX_FILE || name == META_FILE {
                index.push(p);
                continue;
            }
            std::fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
        }
    }
    for p in index {
        std::fs::remove_file(&p).map_err(|e| Error::io("remove", &p, e))?;
    }
    Ok(())
}
