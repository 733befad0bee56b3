//! The directories of datasets a forced `convert images` set aside (`OUT.old`, `OUT.oldN`) and
//! was killed before it removed: marked as a conversion's when they are made, and removed by the
//! next conversion into OUT that succeeds (look 147, L147-1: each kill kept a whole copy of the
//! old output for good). An `OUT.old` without the mark (one the user made) is never taken.

use std::path::Path;

use super::replace::only_loaderx_files;
use super::writer::STAGING_LOCK;
use crate::store::is_loaderx_lock_file;
use crate::{Error, Result};

/// The file a conversion leaves in the directory it set aside: its process id, and the
/// directory's identity (device and inode) where the platform has one, so that a copy of it
/// (`cp -r`, a backup of the user's) is not taken for the aside itself (look 148, L148-3).
/// Removed last when the aside is removed, and before the directory is put back.
pub(crate) const ASIDE_MARK: &str = ".loaderx-aside";

/// Marks `old`, just set aside, as a conversion's (best effort: unmarked, a killed
/// conversion's aside stays, as any `OUT.old` of the user's does). Whatever had the mark's name
/// goes first, and the mark is made new, never written through a link (L148-3).
pub(super) fn mark(old: &Path) {
    let path = old.join(ASIDE_MARK);
    let _ = std::fs::remove_file(&path);
    let key = std::fs::symlink_metadata(old).ok().and_then(|m| crate::sys::meta_key(&m));
    let text = match key {
        Some((dev, ino)) => format!("{} {dev} {ino}", std::process::id()),
        None => std::process::id().to_string(),
    };
    let made = std::fs::OpenOptions::new().write(true).create_new(true).open(&path);
    let _ = made.and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
}

/// Whether `dir` bears a conversion's mark made for it: a regular file of a few bytes whose
/// identity, where it has one, is `dir`'s own.
fn marked(dir: &Path) -> bool {
    let path = dir.join(ASIDE_MARK);
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= 64) {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(&path) else { return false };
    let key = std::fs::symlink_metadata(dir).ok().and_then(|m| crate::sys::meta_key(&m));
    let said: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    match (key, said.as_slice()) {
        (Some((dev, ino)), [_, d, i]) => *d == dev && *i == ino,
        (None, [_]) => true,
        _ => false,
    }
}

/// Removes the marked asides beside `out` (`out.old`, `out.oldN`) that hold nothing but the
/// conversion's `datasets` (whole or part removed) and `files`, none of them open (their locks
/// taken first): those of conversions killed before they removed them. What cannot be taken
/// stays.
pub(crate) fn remove_killed_asides_dir_of<'a>(out: &Path, datasets: &[&'a str], files: &'a [&'a str]) {
    for e in super::replace::asides_of(out) {
        let path = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) && marked(&path) {
            let _ = remove_one(&path, datasets, files);
        }
    }
}

/// [`remove_killed_asides_dir_of`] of one aside: each entry a dataset of the conversion's
/// holding only a store's files (its index may be gone already: L148-2, a kill in the middle of
/// its removal), a file of the conversion's, a loaderx lock, or the mark.
fn remove_one<'a>(path: &Path, datasets: &[&'a str], files: &'a [&'a str]) -> Result<()> {
    let refuse =
        || Error::NotReplaceable { path: path.to_path_buf(), reason: "not a conversion's aside".into() };
    for e in std::fs::read_dir(path).map_err(|e| Error::io("read directory", path, e))? {
        let e = e.map_err(|e| Error::io("read directory", path, e))?;
        let (name, kind) = (e.file_name(), e.file_type().map_err(|err| Error::io("stat", e.path(), err))?);
        let name = name.to_string_lossy();
        let ours = if datasets.contains(&name.as_ref()) {
            kind.is_dir() && only_loaderx_files(&e.path(), true).is_ok()
        } else {
            kind.is_file()
                && (files.contains(&name.as_ref())
                    || name == ASIDE_MARK
                    || (name == STAGING_LOCK && is_loaderx_lock_file(&e.path())))
        };
        if !ours {
            return Err(refuse());
        }
    }
    let held = super::replace::hold_datasets_of(path, datasets)?;
    super::replace::Aside::found(path.to_path_buf(), held, files).remove()
}
