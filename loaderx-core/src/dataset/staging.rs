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
///
/// # Errors
/// [`Error::InvalidArgument`] for an output named `*.partial`: a writer of the name without the
/// suffix would take it for its own killed staging and clear it (look 140, L140-1).
pub(crate) fn out_and_staging(out: &Path) -> Result<(PathBuf, PathBuf)> {
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
    // Absolute from here on (`..` kept as the kernel takes it): a working directory changed
    // while the writer runs (a Python generator's `os.chdir`) put the staging, the rename and
    // the clean-up in another directory, replacing a dataset there (look 173, L173-1).
    if !out.as_os_str().is_empty() {
        out = std::path::absolute(&out).map_err(|e| Error::io("resolve", &out, e))?;
    }
    if out.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".partial")) {
        return Err(Error::InvalidArgument(format!(
            "{}: an output's name may not end in .partial, the name a writer stages its output under",
            out.display()
        )));
    }
    let mut staging = out.clone().into_os_string();
    staging.push(".partial");
    Ok((out, PathBuf::from(staging)))
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

/// Removes `staging`, the staging directory (`NAME.partial`) of a dataset writer that was killed
/// part way, when it bears the writer's mark ([`killed_writers`]), holds nothing but a dataset's
/// files and locks, and neither its lock, its store's, nor a reader holds it: the
/// next forced conversion into the directory of datasets it is in takes it with the datasets it
/// replaces (look 138, L138-1: a killed conversion's `h.partial` outlived every rerun that wrote
/// no `h`). Returns whether it is gone; a live writer's, a user's directory of that name, and
/// one just made (no marks yet) stay.
pub(crate) fn remove_killed_staging(staging: &Path) -> bool {
    if !std::fs::symlink_metadata(staging).is_ok_and(|m| m.is_dir())
        || !killed_writers(staging)
        || super::replace::only_loaderx_files(staging, true).is_err()
    {
        return false;
    }
    let doing = "removing a killed conversion's staging";
    let Ok(lock) = WriteLock::acquire_named(staging, STAGING_LOCK, doing) else { return false };
    let Ok(store_lock) = WriteLock::acquire(staging) else { return false };
    // A reader of its store (a store opened there by hand) keeps it (look 140, L140-1).
    let Ok(readers) = crate::store::lock_out_readers(staging) else { return false };
    // Asked again under the locks: a writer may have taken the directory meanwhile.
    if super::replace::only_loaderx_files(staging, true).is_err()
        || remove_dataset_files(staging, &[SCHEMA_FILE]).is_err()
    {
        return false;
    }
    // Each lock's file goes as it is released, then the directory, which is left if anything
    // appeared in it meanwhile.
    drop(readers);
    drop(store_lock);
    drop(lock);
    std::fs::remove_dir(staging).is_ok()
}

/// Whether `staging` bears a dataset writer's mark: its lock file, holding the process id the
/// writer wrote there once it held it. A killed writer always leaves it (taken before anything
/// is written, removed only after everything else); a store or dataset a user named `*.partial`
/// has none (look 140, L140-1: one was cleared by the writer of the name without the suffix).
pub(crate) fn killed_writers(staging: &Path) -> bool {
    let lock = staging.join(STAGING_LOCK);
    crate::store::is_loaderx_lock_file(&lock) && std::fs::metadata(&lock).is_ok_and(|m| m.len() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Look 138, L138-1: a killed writer's staging goes; a live one's, one just made and a
    /// user's directory of that name stay.
    #[test]
    fn only_a_killed_writers_staging_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let staging = |name: &str| {
            let out = dir.path().join(name);
            let mut w = crate::DatasetWriter::dense::<u8>(&out, vec![2], crate::WriteOptions::new()).unwrap();
            w.append(&[1u8, 2]).unwrap();
            w.finish().unwrap();
            let staged = dir.path().join(format!("{name}.partial"));
            std::fs::rename(&out, &staged).unwrap();
            std::fs::write(staged.join(STAGING_LOCK), b"99999").unwrap();
            staged
        };
        let (dead, live) = (staging("dead"), staging("live"));
        let held = WriteLock::acquire_named(&live, STAGING_LOCK, "converting").unwrap();
        let fresh = dir.path().join("fresh.partial");
        std::fs::create_dir(&fresh).unwrap();
        let users = dir.path().join("users.partial");
        std::fs::create_dir(&users).unwrap();
        std::fs::write(users.join(SCHEMA_FILE), b"x").unwrap();
        std::fs::write(users.join("notes.txt"), b"keep").unwrap();
        assert!(remove_killed_staging(&dead) && !dead.exists());
        assert!(!remove_killed_staging(&live) && live.join("index.zr").exists());
        assert!(!remove_killed_staging(&fresh) && fresh.exists());
        assert!(!remove_killed_staging(&users) && users.join("notes.txt").exists());
        // Look 140, L140-1: one a reader has open, and a store of the user's named `*.partial`
        // (no writer's lock), stay; so does the latter when a writer of its name without the
        // suffix starts; and no output may be named so.
        let read = staging("read");
        let reader = crate::Store::open(&read).unwrap();
        assert!(!remove_killed_staging(&read) && read.join("index.zr").exists());
        drop(reader);
        let store = dir.path().join("raw.partial");
        drop(crate::Store::create(&store, crate::StoreOptions::default()).unwrap());
        assert!(!remove_killed_staging(&store) && store.join("index.zr").exists());
        let opts = crate::WriteOptions::new();
        assert!(crate::DatasetWriter::dense::<u8>(dir.path().join("raw"), vec![2], opts.clone()).is_err());
        assert!(store.join("index.zr").exists(), "the user's store is not a killed writer's staging");
        let Err(e) = crate::DatasetWriter::dense::<u8>(dir.path().join("x.partial"), vec![2], opts) else {
            panic!("an output named like a staging directory")
        };
        assert!(
            e.to_string().contains("x.partial") && e.to_string().contains("may not end in .partial"),
            "{e}"
        );
        drop(held);
    }
}
