//! The local side of a [`push`](super::push::push): the store held still under its lock, its
//! directory held open so that every file comes from the store the push began with, its files
//! listed and read, a large one sent in parts, a file changed since it was listed named so.

use std::path::{Path, PathBuf};

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use super::push::{PART, STORE_FILES, is_chunk};
use crate::format::storeset::SET_FILE;
use crate::store::{INDEX_FILE, META_FILE, SCHEMA_FILE};
use crate::sys::Access;
use crate::{Error, Result};

/// The directory `dir` held open, checked to be the one `hold_still` locked (a store moved away
/// between the two, and another put at its name, is refused).
///
/// # Errors
/// [`Error::Io`] naming `dir`; [`Error::Locked`] for a store moved meanwhile.
pub(super) fn open_held(
    dir: &Path,
    still: &(Option<crate::store::WriteLock>, Option<crate::Store>),
) -> Result<crate::sys::Dir> {
    let held = crate::sys::Dir::open(dir).map_err(|e| Error::io("open", dir, e))?;
    if still.0.as_ref().is_some_and(|lock| !lock.still_here()) {
        return Err(Error::Locked {
            path: dir.to_path_buf(),
            reason: "the store was moved as the push began: push again".into(),
        });
    }
    Ok(held)
}

/// What tells the store in a held directory written to from the same one unchanged, without
/// opening it (a damaged store goes up as it is): its index file's identity, length and last
/// change.
pub(super) type HeldState = (Option<(u64, u64)>, u64, Option<std::time::SystemTime>);

/// The [`HeldState`] of the store in `dir`.
pub(super) fn held_state(dir: &crate::sys::Dir) -> Result<HeldState> {
    let name = if dir.stat(INDEX_FILE).is_ok() { INDEX_FILE } else { META_FILE };
    let f =
        dir.open_file(name, crate::sys::Access::Read).map_err(|e| Error::io("open", dir.join(name), e))?;
    let meta = f.metadata().map_err(|e| Error::io("stat", dir.join(name), e))?;
    let key = crate::sys::file_key(&f).map_err(|e| Error::io("stat", dir.join(name), e))?;
    Ok((key, meta.len(), meta.modified().ok()))
}

/// A failure of [`put_in_parts`]: of the object store's, or of this side's.
pub(super) enum PartsFailed {
    Store(object_store::Error),
    Local(Error),
}

impl PartsFailed {
    pub(super) fn either(self, store: impl FnOnce(object_store::Error) -> Error) -> Error {
        match self {
            PartsFailed::Store(e) => store(e),
            PartsFailed::Local(e) => e,
        }
    }
}

/// Sends the large file `name` (at `path`, listed at `len` bytes) of `dir` to `k` in parts, read
/// a part at a time; `progress` hears the bytes sent so far. A file read at another length than
/// listed aborts the upload.
pub(super) fn put_in_parts(
    runtime: &tokio::runtime::Runtime,
    store: &dyn ObjectStore,
    k: &ObjectPath,
    dir: &crate::sys::Dir,
    (name, path, len): (&str, &Path, u64),
    progress: &dyn Fn(u64),
) -> std::result::Result<(), PartsFailed> {
    use std::io::Read;
    let local = |e: Error| PartsFailed::Local(e);
    let mut f = dir.open_file(name, Access::Read).map_err(|e| local(Error::io("open", path, e)))?;
    let upload = runtime.block_on(store.put_multipart(k)).map_err(PartsFailed::Store)?;
    let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, PART as usize);
    let mut buf = vec![0u8; PART as usize];
    let mut done = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| local(Error::io("read", path, e)))?;
        if n == 0 {
            break;
        }
        runtime.block_on(w.wait_for_capacity(4)).map_err(PartsFailed::Store)?;
        w.write(&buf[..n]);
        done += n as u64;
        progress(done);
    }
    if let Err(e) = changed_since_listed(path, len, done) {
        runtime.block_on(w.abort()).map_err(PartsFailed::Store)?;
        return Err(local(e));
    }
    runtime.block_on(w.finish()).map_err(PartsFailed::Store)?;
    Ok(())
}

/// A local file read at another length than it was listed with changed while the push ran:
/// said so, not blamed on the server (look 177, L177-2).
///
/// # Errors
/// [`Error::Locked`] naming the file.
pub(super) fn changed_since_listed(path: &Path, listed: u64, read: u64) -> Result<()> {
    if read == listed {
        return Ok(());
    }
    Err(Error::Locked {
        path: path.to_path_buf(),
        reason: format!(
            "{listed} bytes when the push listed it, {read} when it read it: the store changed while it went \
             up; push again"
        ),
    })
}

/// Holds the store in `dir` still while it goes up (look 82: a compaction, delete or append
/// during a push said "pushed" over a remote copy that was wrong or unreadable): its writer lock
/// taken, so no append, delete, compaction or migration runs meanwhile (a store a writer has
/// open is [`Error::Locked`]); a damaged store goes up as it is, for `verify` to name. Where
/// this process may not write the directory (a read-only mount), the store is opened as a
/// reader instead, whose shared lock on the index it opens (checked to be the file the store's
/// name leads to, look 83) keeps deletes, compactions and migrations out, not appends by a
/// writer with other rights: one at work when the push starts is refused by its lock (look 172),
/// one that starts later is not seen (a set's part is checked again once it is up); a store that
/// does not open so is not pushed.
pub(super) fn hold_still(dir: &Path) -> Result<(Option<crate::store::WriteLock>, Option<crate::Store>)> {
    match crate::store::WriteLock::acquire(dir) {
        Ok(lock) => Ok((Some(lock), None)),
        Err(Error::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            // A writer of other rights at work now is seen by its lock (look 172, L172-2: the
            // reader's lock let its appends through, and the part went up changed).
            if let crate::store::WriterThere::Held(holder) = crate::store::writer_there(dir) {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                    reason: format!(
                        "{holder} has it open for writing; a push needs it unchanged while it goes up"
                    ),
                });
            }
            Ok((None, Some(crate::Store::open(dir)?)))
        }
        Err(Error::Locked { path, reason }) => Err(Error::Locked {
            path,
            reason: format!("{reason}; a push needs it unchanged while it goes up"),
        }),
        Err(e) => Err(e),
    }
}

/// The files of the store (or, `set`, of the set's own files) in `dir` that go up, in the order
/// they go: (name, path, bytes to send), the index last. A v1 `meta.zr` sends `v1_prefix` bytes.
pub(super) fn files_to_push(
    dir: &crate::sys::Dir,
    set: bool,
    v1_prefix: Option<u64>,
) -> Result<Vec<(String, PathBuf, u64)>> {
    let mut files: Vec<(String, PathBuf, u64)> = Vec::new();
    // Listed by its path, checked to be the directory held.
    for name in dir.names_listed().map_err(|e| Error::io("read directory", dir.path(), e))? {
        let name = name.to_string_lossy().into_owned();
        let wanted = if set {
            name == SET_FILE || name == SCHEMA_FILE
        } else {
            STORE_FILES.contains(&name.as_str()) || is_chunk(&name)
        };
        if !wanted {
            continue;
        }
        // Not followed: a store's file that is a link (to a key, say) is refused, not sent.
        let path = dir.join(&name);
        let meta = std::fs::symlink_metadata(&path).map_err(|err| Error::io("stat", &path, err))?;
        if !meta.file_type().is_file() {
            return Err(Error::InvalidArgument(format!(
                "{}: a store's file that is not a regular file (a link, a directory) is not pushed",
                path.display()
            )));
        }
        let len = if name == META_FILE { v1_prefix.unwrap_or(meta.len()) } else { meta.len() };
        files.push((name, path, len));
    }
    // The index goes last: its count publishes the records.
    files.sort_by_key(|(n, _, _)| (n == INDEX_FILE || n == META_FILE || n == SET_FILE, n.clone()));
    Ok(files)
}

/// The committed prefix of a v1 `meta.zr`: its header and `length` entries, in bytes.
pub(super) fn v1_committed(dir: &crate::sys::Dir) -> Result<u64> {
    use crate::format::{ENTRY_SIZE, Header};
    let path = &dir.join(META_FILE);
    let f = dir.open_file(META_FILE, Access::Read).map_err(|e| Error::io("open", path, e))?;
    let mut head = [0u8; ENTRY_SIZE];
    crate::sys::read_exact_at(&f, &mut head, 0).map_err(|e| Error::io("read", path, e))?;
    let header = Header::parse(&head).map_err(|e| crate::store::v1_header_error(path, e))?;
    Ok(ENTRY_SIZE as u64 * (1 + u64::from(header.length)))
}

/// The whole of the file `name` in `dir`.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub(super) fn read_all(dir: &crate::sys::Dir, name: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let path = dir.join(name);
    let mut bytes = Vec::new();
    dir.open_file(name, Access::Read)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::io("read", &path, e))?;
    Ok(bytes)
}
