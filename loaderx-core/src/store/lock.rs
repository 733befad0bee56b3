//! The writer's advisory lock: `write.lock`, locked for the writer's life and removed when it
//! closes, so a closed store leaves no lock file behind.
//!
//! Removing a lock file is safe only with a check on the way in: a process that opened the file
//! just before the holder removed it would otherwise lock an orphaned inode while a third
//! process creates and locks a new file. So the locker, once it holds the lock, checks that the
//! path still names the file it locked, and starts over when it does not.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use super::files::LOCK_FILE;
use crate::sys::same_file;
use crate::{Error, Result};

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
            let file = super::open_or_create(&path)?;
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
}
