//! A dataset's staging directory (`OUT.partial`): taken and locked by one writer, and a
//! dataset directory's files removed (the staging of a writer that did not finish, or a dataset
//! being replaced).

use std::path::{Path, PathBuf};

use super::schema::SCHEMA_FILE;
use super::writer::STAGING_LOCK;
use crate::store::{WriteLock, remove_store_files};
use crate::{Error, Result};

/// `out` without trailing separators (`out/`, as a shell completes a directory, names `out`),
/// and `out` + `.partial`, its staging directory: made beside `out`, never inside it (look 101,
/// L101-1: `out/.partial` was staged in the output, and a dataset replaced through `ds/` kept
/// the staging inside it, refusing every later replacement).
///
/// A name through `..` or ending in `.` is resolved first, through the directories it names
/// (look 102: `sub/ds/../ds` lost its way once `sub/ds` was moved aside, and `.` was staged in
/// `..partial`, inside itself): `.` and `..` at its end name the directory they lead to, a `..`
/// before its last component the parent it leads to.
pub(crate) fn out_and_staging(out: &Path) -> (PathBuf, PathBuf) {
    use std::path::Component;
    let mut out: PathBuf = out.components().collect();
    let dots = |p: &Path| p.components().any(|c| matches!(c, Component::ParentDir));
    if !matches!(out.components().next_back(), Some(Component::Normal(_))) {
        // `.`, `..`, `a/..`: the directory named (an error of the writer's later if none).
        if let Ok(real) = out.canonicalize() {
            out = real;
        }
    } else if let (Some(parent), Some(name)) = (out.parent(), out.file_name())
        && dots(parent)
        && let Ok(real) = parent.canonicalize()
    {
        out = real.join(name);
    }
    let mut staging = out.clone().into_os_string();
    staging.push(".partial");
    (out, PathBuf::from(staging))
}

/// Takes the staging directory `staging` of output `out`: created when missing (a symbolic link
/// or a file there is refused, never followed), then locked.
///
/// # Errors
/// [`Error::Locked`] naming the writer already converting into `out`; [`Error::BadInput`] for a
/// staging path that is a link or not a directory; [`Error::Io`].
pub(crate) fn lock_staging(staging: &Path, out: &Path) -> Result<WriteLock> {
    if let Some(parent) = staging.parent().filter(|p| !p.as_os_str().is_empty()) {
        // A missing directory that a `..` goes up out of is not made: `nodir/../ds` would leave
        // an empty `nodir` behind a name the kernel refuses (look 106, L106-3). A `..` that
        // comes before the missing part (`../new/ds`) resolves, and `new` is made as any other
        // missing directory is (look 116, L116-3).
        let mut walked = PathBuf::new();
        for c in parent.components() {
            if c == std::path::Component::ParentDir && !walked.as_os_str().is_empty() && !walked.is_dir() {
                let missing = std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such directory to go up out of with `..` (it is not created)",
                );
                return Err(Error::io("open directory", &walked, missing));
            }
            walked.push(c);
        }
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
    }
    // Another conversion can rename the staging directory into place between this one's making
    // it and locking it: it is made again (a few tries, each after a whole conversion), never
    // reported as a missing file (review 52).
    let mut tries = 0;
    loop {
        match take_staging(staging, out) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound && tries < 8 => {
                tries += 1
            }
            other => return other,
        }
    }
}

/// One try of [`lock_staging`].
fn take_staging(staging: &Path, out: &Path) -> Result<WriteLock> {
    match std::fs::create_dir(staging) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io("create directory", staging, e)),
    }
    // `create_dir` does not follow a link at the last component, but an existing entry can be
    // anything: only a real directory is written into.
    let meta = std::fs::symlink_metadata(staging).map_err(|e| Error::io("stat", staging, e))?;
    if !meta.is_dir() {
        return Err(Error::BadInput {
            path: staging.to_path_buf(),
            reason: format!(
                "the staging path of {} is {}, not a directory; refusing to write through it",
                out.display(),
                if meta.file_type().is_symlink() { "a symbolic link" } else { "a file" }
            ),
            source: None,
        });
    }
    WriteLock::acquire_named(staging, STAGING_LOCK, &format!("converting into {}", out.display()))
}

/// Removes a store's files and `also` from `dir`, keeping anything else.
pub(super) fn remove_dataset_files(dir: &Path, also: &[&str]) -> Result<()> {
    remove_store_files(dir)?;
    for name in also {
        let f = dir.join(name);
        match std::fs::remove_file(&f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove", &f, e)),
        }
    }
    Ok(())
}

/// Removes a dataset directory: the store's files, the schema, then the directory itself if that
/// leaves it empty (anything else in it is kept). A symbolic link is removed itself: nothing is
/// deleted through it.
pub(crate) fn remove_dataset_dir(dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return std::fs::remove_file(dir).map_err(|e| Error::io("remove", dir, e));
    }
    remove_dataset_files(dir, &[SCHEMA_FILE, STAGING_LOCK])?;
    let _ = std::fs::remove_dir(dir);
    Ok(())
}
