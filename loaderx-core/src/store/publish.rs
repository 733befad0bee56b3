//! Files written for other programs (token files, `.npy` exports): under a temporary name of the
//! writer's own, synced, then renamed into place. The temporary is created exclusively (never a
//! file that was there, never through a link), so no file of the user's (a `NAME.tmp` or
//! `NAME.partial` of theirs) is ever written over or removed, and it is removed whatever fails
//! before it is placed.

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
        let (path, f) = crate::sys::create_own_temporary(dir, name, "partial")
            .map_err(|e| Error::io("create a temporary beside", beside, e))?;
        Ok(Temporary {
            path,
            w: Some(BufWriter::with_capacity(1 << 20, f)),
            placed: false,
            pid: std::process::id(),
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
        Ok(())
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
