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
#[derive(Debug)]
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
        Self::acquire_named(dir, LOCK_FILE, "open for writing")
    }

    /// Takes the lock file `dir/name` without waiting; the holder writes its process id there,
    /// so the error of the one refused names it (`doing`: what the holder is doing).
    ///
    /// # Errors
    /// [`Error::Locked`] naming `dir` and the holder; [`Error::Io`] naming the lock file (a
    /// symbolic link planted as the lock file is refused, not followed).
    pub(crate) fn acquire_named(dir: &Path, name: &str, doing: &str) -> Result<WriteLock> {
        let path = dir.join(name);
        for _ in 0..ATTEMPTS {
            let file = super::files::open_or_create_no_follow(&path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    // The holder's id, as it wrote it: advisory (it may be half written).
                    let holder = std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|t| t.trim().parse::<u32>().ok())
                        .map_or_else(|| "another process".to_string(), |pid| format!("process {pid}"));
                    return Err(Error::Locked {
                        path: dir.to_path_buf(),
                        reason: format!("{holder} has it {doing}"),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
            }
            if same_file(&file, &path).map_err(|e| Error::io("stat", &path, e))? {
                let id = std::process::id().to_string();
                // Best effort: the lock itself is the flock, the id only names its holder.
                let _ = file.set_len(0).and_then(|()| crate::sys::write_all_at(&file, id.as_bytes(), 0));
                return Ok(WriteLock { file: Some(file), path });
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

    /// The lock file was moved with its directory (a staging directory renamed into place
    /// while locked): it is now `dir/name`, removed from there on release.
    pub(crate) fn moved_to(&mut self, dir: &Path) {
        if let Some(name) = self.path.file_name() {
            self.path = dir.join(name);
        }
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
        let Err(refused) = WriteLock::acquire(dir.path()) else { panic!("held") };
        assert!(matches!(refused, Error::Locked { .. }), "{refused}");
        // The holder is named by its process id (here, this process).
        assert!(refused.to_string().contains(&format!("process {}", std::process::id())), "{refused}");
        drop(a);
        assert!(!dir.path().join(LOCK_FILE).exists(), "a released lock leaves no file");
        let b = WriteLock::acquire(dir.path()).unwrap();
        drop(b);
    }
}
