//! The writer's advisory lock: `write.lock`, locked for the writer's life and removed when it
//! closes, so a closed store leaves no lock file behind.
//!
//! Removing a lock file is safe only with a check on the way in: a process that opened the file
//! just before the holder removed it would otherwise lock an orphaned inode while a third
//! process creates and locks a new file. So the locker, once it holds the lock, checks that the
//! path still names the file it locked, and starts over when it does not.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Name of the lock file in a store directory.
pub(crate) const LOCK_FILE: &str = "write.lock";

/// Attempts before giving up on a lock file that keeps being replaced under us.
const ATTEMPTS: usize = 8;

/// The held writer lock of a store directory; released and removed on drop.
pub(crate) struct WriteLock {
    file: Option<File>,
    path: PathBuf,
}

impl WriteLock {
    /// Takes the writer lock of `dir` without waiting.
    ///
    /// # Errors
    /// [`Error::Locked`] when another handle (in this process or another) holds it;
    /// [`Error::Io`] naming the lock file.
    pub(crate) fn acquire(dir: &Path) -> Result<WriteLock> {
        let path = dir.join(LOCK_FILE);
        for _ in 0..ATTEMPTS {
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io("open", &path, e))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::Locked {
                        path: dir.to_path_buf(),
                        reason: "another process has it open for writing".into(),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
            }
            if same_file(&file, &path).map_err(|e| Error::io("stat", &path, e))? {
                return Ok(WriteLock { file: Some(file), path });
            }
            // The holder removed it between our open and our lock: the lock we got guards
            // nothing. Try again on whatever the path names now.
        }
        Err(Error::Locked { path: dir.to_path_buf(), reason: "its write.lock keeps being replaced".into() })
    }
}

impl Drop for WriteLock {
    fn drop(&mut self) {
        // Remove while still holding the lock, then release it: a process that opened the old
        // file meanwhile sees it is gone once it gets the lock, and starts over.
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

/// Whether `path` names the file `file` has open (the same device and inode).
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(held.dev() == now.dev() && held.ino() == now.ino()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `path` names the file `file` has open. Windows does not remove a file that another
/// handle holds open until that handle closes, so a path that still exists is the file we hold
/// (not checked on a Windows machine).
#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> std::io::Result<bool> {
    path.try_exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_exclusive_and_its_file_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = WriteLock::acquire(dir.path()).unwrap();
        assert!(dir.path().join(LOCK_FILE).exists());
        assert!(matches!(WriteLock::acquire(dir.path()), Err(Error::Locked { .. })));
        drop(a);
        assert!(!dir.path().join(LOCK_FILE).exists(), "a released lock leaves no file");
        let b = WriteLock::acquire(dir.path()).unwrap();
        drop(b);
    }

    #[cfg(unix)]
    #[test]
    fn a_lock_on_a_removed_file_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // What a late opener holds after the holder removed the file: an orphan.
        let orphan = File::create(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(!same_file(&orphan, &path).unwrap());
        std::fs::write(&path, b"").unwrap();
        assert!(!same_file(&orphan, &path).unwrap());
        let fresh = File::open(&path).unwrap();
        assert!(same_file(&fresh, &path).unwrap());
    }
}
