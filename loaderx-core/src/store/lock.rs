//! The locks of a store. The writer's advisory lock: `write.lock`, locked for the writer's life
//! and removed when it closes, so a closed store leaves no lock file behind. The index's lock:
//! shared by every handle, taken exclusively by delete, compaction, migration and replacement
//! ([`Store::exclusive`], [`lock_out_readers`]).
//!
//! Removing a lock file is safe only with a check on the way in: a process that opened the file
//! just before the holder removed it would otherwise lock an orphaned inode while a third
//! process creates and locks a new file. So the locker, once it holds the lock, checks that the
//! path still names the file it locked, and starts over when it does not.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Store;
use super::files::{INDEX_FILE, LOCK_FILE, META_FILE};
use crate::sys::{open_regular, same_file};
use crate::{Error, Result};

/// Attempts before giving up on a lock file that keeps being replaced under us.
const ATTEMPTS: usize = 8;

/// How long a contended lock is tried again before it is reported held. A lock is the open file
/// description's, so a child process of this one (any `Command`, in any thread) shares every lock
/// this process holds from its fork until its exec closes the files: a handle just closed can
/// keep its lock for that window, a few milliseconds, longer on a loaded machine
/// (docs/reliability.md, "a closed handle's lock outlives it in a child").
const LOCK_GRACE: Duration = Duration::from_millis(250);

/// Longest pause between two tries of a contended lock.
const LOCK_PAUSE_MAX: Duration = Duration::from_millis(16);

/// The first 16 bytes of the lock file `file` (a process id is at most 10 digits; a longer file
/// is someone else's), read from its start.
fn lock_text(file: &File) -> std::io::Result<Vec<u8>> {
    let mut text = vec![0u8; 16];
    let mut n = 0;
    while n < text.len() {
        match crate::sys::read_exact_at(file, &mut text[n..n + 1], n as u64) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
    }
    text.truncate(n);
    Ok(text)
}

/// Whether `text` (a lock file's start) is what a locker writes there: nothing (new, or left by
/// a crash before the id was written) or a decimal process id.
fn is_process_id(text: &[u8]) -> bool {
    let text = text.trim_ascii();
    text.len() <= 10 && text.iter().all(u8::is_ascii_digit)
}

/// Whether the lock file `file` holds what a locker writes there ([`is_process_id`]): at most
/// 11 bytes (10 digits and a newline; a longer file is someone else's, whatever it starts with).
fn holds_a_process_id(file: &File) -> std::io::Result<bool> {
    Ok(file.metadata()?.len() <= 11 && is_process_id(&lock_text(file)?))
}

/// The holder a locked lock file names: its process id as the holder wrote it (advisory: it may
/// be half written; at most 16 bytes of the file are read), or "another process".
fn holder_of(file: &File) -> String {
    lock_text(file)
        .ok()
        .and_then(|t| std::str::from_utf8(&t).ok()?.trim().parse::<u32>().ok())
        .map_or_else(|| "another process".to_string(), |pid| format!("process {pid}"))
}

/// Who holds `dir`'s writer lock, as an opener that found no index there sees it.
pub(crate) enum WriterThere {
    /// No lock file, or one nobody holds: nothing is being written there.
    Free,
    /// Held when looked at, released within the grace: a writer (a creator) just finished.
    Released,
    /// Still held after the grace, by the holder named.
    Held(String),
}

/// Whether another writer holds `dir`'s lock file, looked at without creating it: a directory
/// whose index is missing while a writer holds it is a store being created (`Store::create`
/// takes the lock before it removes or writes anything), not a directory without a store
/// (look 152, L152-1: a `compact` racing a creator said "not a loaderx store").
pub(crate) fn writer_there(dir: &Path) -> WriterThere {
    let Ok(file) = open_regular(OpenOptions::new().read(true), &dir.join(LOCK_FILE)) else {
        return WriterThere::Free;
    };
    if !matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock)) {
        return WriterThere::Free;
    }
    match within_grace(|| file.try_lock_shared()) {
        Ok(()) => WriterThere::Released,
        Err(TryLockError::WouldBlock) => WriterThere::Held(holder_of(&file)),
        Err(TryLockError::Error(_)) => WriterThere::Free,
    }
}

/// Whether `path` is a lock file loaderx left: a regular file (not a link, not a FIFO) holding
/// nothing or a process id. Overwriting accepts and removes only those; another tool's file of
/// that name is the user's.
pub(crate) fn is_loaderx_lock_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
        && open_regular(OpenOptions::new().read(true), path)
            .and_then(|f| holds_a_process_id(&f))
            .unwrap_or(false)
}

/// Runs `try_lock` until it succeeds, fails otherwise than by contention, or [`LOCK_GRACE`]
/// has passed, pausing between tries (1 ms, doubling, at most [`LOCK_PAUSE_MAX`]).
pub(crate) fn within_grace(
    mut try_lock: impl FnMut() -> std::result::Result<(), TryLockError>,
) -> std::result::Result<(), TryLockError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match try_lock() {
            Err(TryLockError::WouldBlock) if start.elapsed() < LOCK_GRACE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(LOCK_PAUSE_MAX);
            }
            other => return other,
        }
    }
}

/// The held writer lock of a store directory; released and removed on drop.
#[derive(Debug)]
pub(crate) struct WriteLock {
    file: Option<File>,
    path: PathBuf,
    /// The process that took it: a child forked from that process shares the lock (it is the
    /// open file description's) but is not its holder.
    pid: u32,
}

impl WriteLock {
    /// Takes the writer lock of `dir`, waiting only out a contended lock's grace ([`within_grace`]).
    ///
    /// # Errors
    /// [`Error::Locked`] when another handle (in this process or another) holds it;
    /// [`Error::Io`] naming the lock file.
    pub(crate) fn acquire(dir: &Path) -> Result<WriteLock> {
        Self::acquire_named(dir, LOCK_FILE, "open for writing")
    }

    /// Takes the lock file `dir/name`, waiting only out a contended lock's grace; the holder
    /// writes its process id there, so the error of the one refused names it (`doing`: what the
    /// holder is doing).
    ///
    /// # Errors
    /// [`Error::Locked`] naming `dir` and the holder; [`Error::Io`] naming the lock file (a
    /// symbolic link planted as the lock file is refused, not followed).
    pub(crate) fn acquire_named(dir: &Path, name: &str, doing: &str) -> Result<WriteLock> {
        let path = dir.join(name);
        for _ in 0..ATTEMPTS {
            let file = super::files::open_or_create_no_follow(&path)?;
            match within_grace(|| file.try_lock()) {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Locked {
                        path: dir.to_path_buf(),
                        reason: format!("{} has it {doing}", holder_of(&file)),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
            }
            // A lock file with other names (a hard link planted in the directory) would have the
            // locker write its id into, and remove, a file elsewhere.
            if crate::sys::link_count(&file).map_err(|e| Error::io("stat", &path, e))? > 1 {
                return Err(Error::NotReplaceable {
                    path,
                    reason: "the lock file has other names (a hard link): not written through".into(),
                });
            }
            if same_file(&file, &path).map_err(|e| Error::io("stat", &path, e))? {
                // A file of this name that no loaderx wrote (another tool's `write.lock` in the
                // directory a store is created in) is not written over, nor removed on close.
                if !holds_a_process_id(&file).map_err(|e| Error::io("read", &path, e))? {
                    return Err(Error::NotReplaceable {
                        path,
                        reason: "a file of this name that is not a loaderx lock (a process id) is in the way"
                            .into(),
                    });
                }
                let id = std::process::id().to_string();
                // Best effort: the lock itself is the flock, the id only names its holder.
                let _ = file.set_len(0).and_then(|()| crate::sys::write_all_at(&file, id.as_bytes(), 0));
                return Ok(WriteLock { file: Some(file), path, pid: std::process::id() });
            }
            // The holder removed it between our open and our lock: the lock we got guards
            // nothing. Try again on whatever the path names now.
        }
        Err(Error::Locked { path: dir.to_path_buf(), reason: format!("its {name} keeps being replaced") })
    }

    /// Whether the lock file's path still names the file this lock holds (a directory renamed
    /// away after the lock was taken takes the lock with it: then it guards another path).
    pub(crate) fn still_here(&self) -> bool {
        self.file.as_ref().is_some_and(|f| same_file(f, &self.path).unwrap_or(false))
    }

    /// Whether this process took the lock: a child forked from the holder shares the open
    /// file description, so the lock covers it too, but writing from both at once would put
    /// two writers on one store.
    pub(crate) fn held_here(&self) -> bool {
        self.pid == std::process::id()
    }

    /// The process that took the lock.
    pub(crate) fn holder(&self) -> u32 {
        self.pid
    }

    /// The lock file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file was moved with its directory (a staging directory renamed into place
    /// while locked): it is now `dir/name`, removed from there on release.
    pub(crate) fn moved_to(&mut self, dir: &Path) {
        if let Some(name) = self.path.file_name() {
            self.path = dir.join(name);
        }
    }
}

impl WriteLock {
    /// Releases the lock now (what dropping it does; nothing the second time). Its file is
    /// removed while still held, then closed: a process that opened the old file meanwhile
    /// sees it is gone once it gets the lock, and starts over. Only the file this lock holds:
    /// a path that names another now (the directory renamed away, another writer's lock there)
    /// is left alone.
    pub(crate) fn release(&mut self) {
        // A forked copy closes its descriptor and leaves the holder's file where it is.
        if self.held_here() && self.still_here() {
            let _ = std::fs::remove_file(&self.path);
        }
        drop(self.file.take());
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_exclusive_and_its_file_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = WriteLock::acquire(dir.path()).unwrap();
        assert!(dir.path().join(LOCK_FILE).exists());
        let Err(refused) = WriteLock::acquire(dir.path()) else { panic!("held") };
        assert!(matches!(refused, Error::Locked { .. }), "{refused}");
        // The holder is named by its process id (here, this process).
        assert!(refused.to_string().contains(&format!("process {}", std::process::id())), "{refused}");
        drop(a);
        assert!(!dir.path().join(LOCK_FILE).exists(), "a released lock leaves no file");
        let b = WriteLock::acquire(dir.path()).unwrap();
        drop(b);
    }

    /// A lock whose directory was renamed away removes nothing of what its old path names now
    /// (another writer's lock): two writers never hold one store.
    #[test]
    fn a_moved_lock_leaves_the_lock_now_at_its_old_path() {
        let dir = tempfile::tempdir().unwrap();
        let (d, d2) = (dir.path().join("d"), dir.path().join("d2"));
        std::fs::create_dir(&d).unwrap();
        let a = WriteLock::acquire(&d).unwrap();
        std::fs::rename(&d, &d2).unwrap();
        std::fs::create_dir(&d).unwrap();
        let b = WriteLock::acquire(&d).unwrap();
        drop(a);
        assert!(d.join(LOCK_FILE).exists(), "B's lock stays");
        let Err(refused) = WriteLock::acquire(&d) else { panic!("B holds it") };
        assert!(matches!(refused, Error::Locked { .. }), "{refused}");
        drop(b);
    }

    /// A hard link planted as the lock file is refused: the locker never writes its id into,
    /// or removes, a file that has other names.
    #[cfg(unix)]
    #[test]
    fn a_lock_file_with_other_names_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, b"precious").unwrap();
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::hard_link(&outside, d.join(LOCK_FILE)).unwrap();
        let Err(e) = WriteLock::acquire(&d) else { panic!("refused") };
        assert!(matches!(e, Error::NotReplaceable { .. }), "{e}");
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious");
        assert!(d.join(LOCK_FILE).exists());
    }

    /// Another tool's `write.lock` in the directory is not a loaderx lock: refused, neither
    /// written over nor removed. A stale lock a crash left (a process id, or nothing) is taken.
    #[test]
    fn a_file_named_as_the_lock_that_no_loaderx_wrote_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(LOCK_FILE);
        // (The long one starts like a process id: twelve blank lines, then another tool's data;
        // review L5.)
        let long = [&b"4242"[..], &[b'\n'; 12], b"host=build-7\n", &[b'x'; 4096]].concat();
        for theirs in [&b"held by make, do not touch"[..], b"12345678901", b"-1", &long] {
            std::fs::write(&lock, theirs).unwrap();
            let Err(e) = WriteLock::acquire(dir.path()) else { panic!("refused") };
            assert!(matches!(&e, Error::NotReplaceable { path, .. } if *path == lock), "{e}");
            assert_eq!(std::fs::read(&lock).unwrap(), theirs);
        }
        for stale in [&b""[..], b"4242", b"4242\n"] {
            std::fs::write(&lock, stale).unwrap();
            let held = WriteLock::acquire(dir.path()).unwrap();
            assert_eq!(std::fs::read_to_string(&lock).unwrap(), std::process::id().to_string());
            drop(held);
            assert!(!lock.exists());
        }
    }
}

// ---- The index's lock: shared by every handle, exclusive for delete, compaction, migration
// and replacement.

impl Store {
    /// What tells this store from every other on this machine, however its path is spelt
    /// (through links, `..`, a second name): its index file's device and inode, or where the
    /// platform has none, its canonical directory.
    ///
    /// # Errors
    /// [`Error::Io`] naming the index file or directory.
    pub(crate) fn key(&self) -> Result<StoreKey> {
        match crate::sys::file_key(&self.index_file).map_err(|e| Error::io("stat", &self.index_path, e))? {
            Some(k) => Ok(StoreKey::File(k)),
            None => Ok(StoreKey::Path(
                std::fs::canonicalize(&self.dir).map_err(|e| Error::io("resolve", &self.dir, e))?,
            )),
        }
    }

    /// Takes the store exclusively across processes for the guard's life; `doing` names the
    /// operation that needs it ("compacting it"), for the error of a store others have open.
    pub(super) fn exclusive(&self, doing: &str) -> Result<Exclusive<'_>> {
        // The shared lock released first: std converts a lock in place on no platform (flock
        // replaces it, not atomically either; Windows refuses an exclusive lock over the same
        // handle's shared one, issue 46).
        let _ = self.index_file.unlock();
        match within_grace(|| self.index_file.try_lock()) {
            // Alone on the file this handle holds: also the one readers now open by its name.
            Ok(()) => match same_file(&self.index_file, &self.index_path) {
                Ok(true) => {
                    // Alone from here: the chunks are opened again by name, so that moves read
                    // and write the files the store's names lead to now (one replaced under a
                    // cached handle would take them into a file with no name).
                    self.chunks.reset();
                    Ok(Exclusive(&self.index_file))
                }
                here => {
                    back_to_shared(&self.index_file);
                    Err(match here {
                        Err(e) => Error::io("stat", &self.index_path, e),
                        Ok(_) => self.replaced(&self.index_path),
                    })
                }
            },
            Err(e) => {
                // The shared lock, released above: taken back.
                let _ = self.index_file.lock_shared();
                match e {
                    TryLockError::WouldBlock => Err(Error::Locked {
                        path: self.dir.clone(),
                        reason: format!("other handles have it open; {doing} needs it alone"),
                    }),
                    TryLockError::Error(e) => Err(Error::io("lock", &self.index_path, e)),
                }
            }
        }
    }
}

/// Takes the index of the store in `dir` exclusively (none there: nothing to take), so that no
/// reader has it open while it is removed or replaced; held while the returned file lives.
///
/// # Errors
/// [`Error::Locked`] while a reader (in this process or another) has the store open;
/// [`Error::Io`] naming the index.
pub(crate) fn lock_out_readers(dir: &Path) -> Result<Option<File>> {
    for name in [INDEX_FILE, META_FILE] {
        let path = dir.join(name);
        let file = match open_regular(OpenOptions::new().read(true), &path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        return match within_grace(|| file.try_lock()) {
            Ok(()) => Ok(Some(file)),
            Err(TryLockError::WouldBlock) => Err(Error::Locked {
                path: dir.to_path_buf(),
                reason: "readers have it open; replacing it needs it alone".into(),
            }),
            Err(TryLockError::Error(e)) => Err(Error::io("lock", &path, e)),
        };
    }
    Ok(None)
}

/// A store's identity on this machine ([`Store::key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum StoreKey {
    /// The index file's device and inode.
    File((u64, u64)),
    /// The canonical directory.
    Path(PathBuf),
}

/// Holds the index file's exclusive lock; drops back to shared.
pub(super) struct Exclusive<'a>(&'a File);

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        back_to_shared(self.0);
    }
}

/// `file`'s exclusive lock made shared again: released, then taken shared (Windows would stack
/// the shared lock on the exclusive one, which then stays).
fn back_to_shared(file: &File) {
    let _ = file.unlock();
    let _ = file.lock_shared();
}
