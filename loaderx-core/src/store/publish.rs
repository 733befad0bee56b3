//! Files written for other programs (token files, `.npy` exports): under a temporary name of the
//! writer's own, synced, then renamed into place. The temporary is created exclusively (never a
//! file that was there, never through a link), so no file of the user's (a `NAME.tmp` or
//! `NAME.partial` of theirs) is ever written over or removed, and it is removed whatever fails
//! before it is placed. Its writer holds a lock on it until then: a killed writer's temporary,
//! which no process holds, goes when the next writer of the same name starts.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A temporary file of this writer's beside `path`: `.NAME.PID.N.partial`, created exclusively
/// (never over anything, never through a link), so no file of the user's (a `NAME.partial` of
/// theirs) or of another writer is ever written over or removed.
pub(crate) struct Temporary {
    path: PathBuf,
    w: Option<BufWriter<File>>,
    /// The file again, its lock held until it is placed: the mark of a live writer.
    held: Option<File>,
    /// Renamed into place: nothing of this writer's is left to remove.
    placed: bool,
    /// The process that made it: a fork of it shares the open file (and, once placed, the
    /// published file), so it neither writes, places nor removes anything.
    pid: u32,
}

impl Temporary {
    /// A temporary for `beside`, in its directory.
    pub(crate) fn create(beside: &Path) -> Result<Temporary> {
        let dir = beside.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = beside
            .file_name()
            .ok_or_else(|| Error::InvalidArgument(format!("{} does not name a file", beside.display())))?;
        remove_killed(dir, name);
        for _ in 0..8 {
            let (path, f) = crate::sys::create_own_temporary(dir, name, "partial")
                .map_err(|e| Error::io("create a temporary beside", beside, e))?;
            // Locked, then checked to be still at its name: another writer's sweep may have taken
            // it between its create and its lock (it is made again). Never waited for: another
            // process holding it (look 182, L182-1: one locking each new temporary hung the
            // writer) leaves it, and another is made. Where the file system has no locks,
            // nobody's sweep can take it either.
            if !lock_own(&f, &path) {
                drop(f);
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let held = f.try_clone().map_err(|e| Error::io("open", &path, e))?;
            return Ok(Temporary {
                path,
                w: Some(BufWriter::with_capacity(1 << 20, f)),
                held: Some(held),
                placed: false,
                pid: std::process::id(),
            });
        }
        Err(Error::Locked {
            path: beside.to_path_buf(),
            reason: "another process took each temporary this writer made beside it (removed, or locked \
                     before this writer could lock it): write again"
                .into(),
        })
    }

    /// [`Error::Locked`] in a fork of the process that made it.
    fn refuse_forked(&self) -> Result<()> {
        if self.pid == std::process::id() {
            return Ok(());
        }
        Err(Error::Locked {
            path: self.path.clone(),
            reason: format!(
                "this writer was made by process {}, of which process {} is a fork: make a writer in this process",
                self.pid,
                std::process::id()
            ),
        })
    }

    /// Appends `bytes`.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.refuse_forked()?;
        let w = self.w.as_mut().expect("open until synced");
        w.write_all(bytes).map_err(|e| Error::io("write", &self.path, e))
    }

    /// Flushes and syncs the file: its bytes are durable before any rename.
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.refuse_forked()?;
        let w = self.w.take().expect("synced once");
        let f = w.into_inner().map_err(|e| Error::io("write", &self.path, e.into_error()))?;
        f.sync_all().map_err(|e| Error::io("sync", &self.path, e))
    }

    /// Renames the (synced) file to `to`: over what is there when `overwrite`, else only where
    /// nothing is (`AlreadyExists`, atomically where the platform can).
    pub(crate) fn place(&mut self, to: &Path, overwrite: bool) -> Result<()> {
        self.refuse_forked()?;
        let placed = if overwrite {
            std::fs::rename(&self.path, to)
        } else {
            crate::sys::rename_no_replace(&self.path, to)
        };
        placed.map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Error::AlreadyExists { path: to.to_path_buf() },
            _ => Error::io("rename", &self.path, e),
        })?;
        self.placed = true;
        self.held = None;
        Ok(())
    }
}

/// Locks `f`, the temporary just made at `path`, without waiting: whether it is this writer's
/// (locked, or the file system has no locks) and still at its name.
fn lock_own(f: &File, path: &Path) -> bool {
    match f.try_lock() {
        Ok(()) => crate::sys::same_file(f, path).unwrap_or(true),
        Err(std::fs::TryLockError::WouldBlock) => false,
        Err(std::fs::TryLockError::Error(_)) => true,
    }
}

/// Removes the temporaries beside `name` in `dir` that killed writers left (look 178, L178-2: a
/// killed rewrite's `.c.bin.PID.N.partial`, a whole copy of the corpus, outlived every later
/// write): each `.NAME.PID.N.partial` that is a regular file whose lock no process holds.
/// Best effort: what cannot be listed, opened or locked stays.
fn remove_killed(dir: &Path, name: &std::ffi::OsStr) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    // By bytes: a name that is not UTF-8 is swept as any other (look 179, L179-5).
    let prefix = [b".", name.as_encoded_bytes(), b"."].concat();
    let number = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(mid) =
            file.as_encoded_bytes().strip_prefix(&prefix[..]).and_then(|r| r.strip_suffix(b".partial"))
        else {
            continue;
        };
        let mut parts = mid.splitn(2, |&b| b == b'.');
        if !(parts.next().is_some_and(number) && parts.next().is_some_and(number)) {
            continue;
        }
        let path = entry.path();
        // A regular file, opened without waiting (look 179, L179-3: a FIFO under the name hung
        // every writer of it) and without following a link.
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
            continue;
        }
        let Ok(f) = crate::sys::no_follow_non_blocking(File::options().read(true)).open(&path) else {
            continue;
        };
        if f.metadata().is_ok_and(|m| m.is_file())
            && f.try_lock().is_ok()
            && crate::sys::same_file(&f, &path).unwrap_or(false)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

impl std::fmt::Debug for Temporary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Temporary").field("path", &self.path).finish()
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // A fork's copy: its buffered bytes dropped unwritten (`into_parts` does not flush),
            // the file left to the process that made it.
            drop(self.w.take().map(BufWriter::into_parts));
            return;
        }
        // Ours, by its name and its exclusive create: removed unless it was put in place.
        if !self.placed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Refuses `path` when something is there and `overwrite` is not set, or when what is there is
/// not a regular file (a directory, a link: never replaced).
pub(crate) fn check_target(path: &Path, overwrite: bool) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Ok(()),
        Ok(_) if !overwrite => Err(Error::AlreadyExists { path: path.to_path_buf() }),
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(Error::NotReplaceable {
            path: path.to_path_buf(),
            reason: "it is not a regular file (a device, a FIFO, a directory or a link): write to a file"
                .into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Look 178, L178-2: a killed writer's temporary (no lock held) goes when the next writer of
    /// the name starts; a live writer's, another name's and a user's file of the pattern's shape
    /// but not a regular file stay.
    #[test]
    fn a_killed_writers_temporary_goes_a_live_ones_stays() {
        let dir = tempfile::tempdir().unwrap();
        let beside = dir.path().join("c.bin");
        let killed = dir.path().join(".c.bin.4000000.0.partial");
        std::fs::write(&killed, b"a whole corpus").unwrap();
        let live = Temporary::create(&dir.path().join("d.bin")).unwrap();
        let live_path = live.path.clone();
        let live_here = dir.path().join(".c.bin.4000001.3.partial");
        std::fs::write(&live_here, b"being written").unwrap();
        let holder = File::open(&live_here).unwrap();
        holder.lock().unwrap();
        let other = dir.path().join(".c.bin.x.0.partial");
        std::fs::write(&other, b"not a writer's").unwrap();
        // Look 179: a FIFO under the name (L179-3: it hung the sweep) stays, the sweep goes on;
        // a killed writer's of a name that is not UTF-8 goes (L179-5).
        #[cfg(unix)]
        let (fifo, odd_killed) = {
            use std::os::unix::ffi::OsStrExt;
            let fifo = dir.path().join(".c.bin.4000002.0.partial");
            assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
            let odd = std::ffi::OsStr::from_bytes(b"c\xff.bin");
            let odd_killed = dir.path().join(std::ffi::OsStr::from_bytes(b".c\xff.bin.4000003.0.partial"));
            std::fs::write(&odd_killed, b"killed").unwrap();
            drop(Temporary::create(&dir.path().join(odd)).unwrap());
            assert!(!odd_killed.exists(), "a killed writer's temporary of a name that is not UTF-8");
            (fifo, odd_killed)
        };
        let mut t = Temporary::create(&beside).unwrap();
        assert!(!killed.exists(), "the killed writer's temporary is gone");
        assert!(live_here.exists() && live_path.exists() && other.exists());
        #[cfg(unix)]
        assert!(fifo.exists() && !odd_killed.exists());
        // The writer's own is locked until placed: another writer's sweep leaves it.
        drop(Temporary::create(&beside).unwrap());
        assert!(t.path.exists());
        t.write(b"tokens").unwrap();
        t.sync().unwrap();
        drop(Temporary::create(&beside).unwrap());
        assert!(t.path.exists(), "synced, still held until placed");
        t.place(&beside, false).unwrap();
        assert_eq!(std::fs::read(&beside).unwrap(), b"tokens");
        drop((holder, live));
    }

    /// Look 182, L182-1: another process locking a writer's new temporary before the writer
    /// could hung the writer; it is given up without waiting.
    #[test]
    fn a_temporary_another_holds_is_given_up_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".x.npy.1.0.partial");
        let mine = File::create(&path).unwrap();
        let theirs = File::open(&path).unwrap();
        theirs.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || tx.send(lock_own(&mine, &p)).unwrap());
        let ours = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("no wait on another's lock");
        assert!(!ours);
        drop(theirs);
        let again = File::open(&path).unwrap();
        assert!(lock_own(&again, &path), "free: taken");
    }
}
