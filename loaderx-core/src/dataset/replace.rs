//! What overwriting may replace, and the replacing: a loaderx dataset (or an empty directory, or
//! a link to one, which is replaced itself), never a file or a directory holding anything of the
//! user's; the old dataset moved aside under its locks (a live writer's or readers' is `Locked`).

use std::path::{Path, PathBuf};

use super::schema::SCHEMA_FILE;
use super::writer::{DatasetWriter, STAGING_LOCK, remove_dataset_dir, remove_dataset_files};
use crate::store::{LOCK_FILE, WriteLock, is_loaderx_lock_file, is_store_file};
use crate::{Error, Result};

impl DatasetWriter {
    /// Moves the dataset now at `out` aside (to a name no other file has), the staging directory
    /// into place, then removes the old dataset: checked again first (it may have changed while
    /// this writer wrote), and held under its writer lock, so a live writer's store is `Locked`,
    /// never moved.
    pub(super) fn replace_out(&mut self) -> Result<()> {
        check_replaceable(&self.out)?;
        let is_link = std::fs::symlink_metadata(&self.out).is_ok_and(|m| m.file_type().is_symlink());
        let mut held = if is_link { None } else { Some(WriteLock::acquire(&self.out)?) };
        // Readers of the old dataset open its chunks by path as they go: not under them.
        let _readers_gone = if is_link { None } else { crate::store::lock_out_readers(&self.out)? };
        let old = (0u32..)
            .map(|n| {
                let mut old = self.out.clone().into_os_string();
                old.push(if n == 0 { ".old".to_string() } else { format!(".old{n}") });
                PathBuf::from(old)
            })
            .find(|p| std::fs::symlink_metadata(p).is_err())
            .expect("some name of an unbounded series is free");
        std::fs::rename(&self.out, &old).map_err(|e| Error::io("rename", &self.out, e))?;
        if let Some(l) = held.as_mut() {
            l.moved_to(&old);
        }
        std::fs::rename(&self.staging, &self.out).map_err(|e| Error::io("rename", &self.staging, e))?;
        self.lock.moved_to(&self.out);
        if is_link {
            return remove_dataset_dir(&old);
        }
        remove_dataset_files(&old, &[SCHEMA_FILE, STAGING_LOCK, crate::dataset::SET_FILE])?;
        // The old writer lock goes last (its holder removes it), then the directory, now empty.
        drop(held);
        let _ = std::fs::remove_dir(&old);
        Ok(())
    }
}

/// Checks that `out` may be replaced by a dataset written over it: an empty directory, or one
/// holding nothing but a loaderx store's or dataset's files (a store set's manifest included), or
/// a link to such a directory (the link is what is replaced). Anything else (a file, a directory
/// holding a file of the user's) is never moved or removed.
///
/// # Errors
/// [`Error::NotReplaceable`] naming `out` and what is there; [`Error::Io`].
pub(crate) fn check_replaceable(out: &Path) -> Result<()> {
    let meta = std::fs::metadata(out).map_err(|e| Error::io("stat", out, e))?;
    if !meta.is_dir() {
        return Err(Error::NotReplaceable { path: out.to_path_buf(), reason: "it is a file".into() });
    }
    // Chunk-like names (`2024.zr`) are a store's only beside its index or a set's manifest.
    let marked =
        ["index.zr", "meta.zr", SCHEMA_FILE, crate::dataset::SET_FILE].iter().any(|m| out.join(m).exists());
    only_loaderx_files(out, marked)
}

/// Checks that the directory `dir` holds only a store's or dataset's own files (none at all
/// when not `marked` as a store or dataset).
///
/// # Errors
/// [`Error::NotReplaceable`] naming `dir` and the first other entry; [`Error::Io`].
pub(super) fn only_loaderx_files(dir: &Path, marked: bool) -> Result<()> {
    let out = dir;
    let refuse = |reason: String| Error::NotReplaceable { path: out.to_path_buf(), reason };
    let entries = std::fs::read_dir(out).map_err(|e| Error::io("read directory", out, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", out, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // A lock file of loaderx's holds a process id: another tool's `convert.lock` is the user's.
        let lock = [LOCK_FILE, STAGING_LOCK].contains(&name.as_ref());
        let ours = (marked && is_store_file(&name))
            || [SCHEMA_FILE, crate::dataset::SET_FILE].contains(&name.as_ref())
            || (lock && is_loaderx_lock_file(&entry.path()));
        if !ours || entry.file_type().map_err(|e| Error::io("stat", entry.path(), e))?.is_dir() {
            return Err(refuse(format!("it holds {name}, which is not a loaderx file")));
        }
    }
    Ok(())
}

/// Checks that `out`, a directory of datasets a converter writes (`datasets`, each a dataset, and
/// `files` beside them), may be replaced: anything else there (a directory or file of the
/// user's) refuses it; a link is replaced itself.
///
/// # Errors
/// [`Error::NotReplaceable`] naming what is there; [`Error::Io`].
#[cfg(feature = "images")]
pub(crate) fn check_replaceable_dir_of(out: &Path, datasets: &[&str], files: &[&str]) -> Result<()> {
    let meta = std::fs::symlink_metadata(out).map_err(|e| Error::io("stat", out, e))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let refuse = |reason: String| Error::NotReplaceable { path: out.to_path_buf(), reason };
    if !meta.is_dir() {
        return Err(refuse("it is a file".into()));
    }
    for entry in std::fs::read_dir(out).map_err(|e| Error::io("read directory", out, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", out, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if datasets.contains(&name.as_ref()) {
            check_replaceable(&entry.path())?;
        } else {
            let ours = files.contains(&name.as_ref())
                || (name == STAGING_LOCK && is_loaderx_lock_file(&entry.path()));
            if !ours {
                return Err(refuse(format!("it holds {name}, which this conversion does not write")));
            }
        }
    }
    Ok(())
}
