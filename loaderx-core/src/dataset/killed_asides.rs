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
/// directory's identity (device and inode) and last change where the platform has them, so that
/// a copy of it (`cp -r`, a backup of the user's: look 148, L148-3) or the aside itself renamed
/// back and forth since (restored by the user, then kept as a backup: look 150, L150-3) is not
/// taken for a killed conversion's. Removed last when the aside is removed, and before the
/// directory is put back.
pub(crate) const ASIDE_MARK: &str = ".loaderx-aside";

/// A conversion's mark on the output it sets aside, begun in OUT before the rename and finished
/// at the aside after it ([`begin`], [`Mark::finish`]).
struct Mark(Option<std::fs::File>);

/// Renames `out` aside to `old`, marked as a conversion's.
///
/// # Errors
/// [`Error::Io`] naming `out` when it cannot be renamed (left as it was, unmarked).
pub(super) fn rename_marked(out: &Path, old: &Path) -> Result<()> {
    let mark = begin(out);
    if let Err(e) = std::fs::rename(out, old) {
        let _ = std::fs::remove_file(out.join(ASIDE_MARK));
        return Err(Error::io("rename", out, e));
    }
    mark.finish(old);
    Ok(())
}

/// Begins the mark in `out`, about to be set aside (best effort: unmarked, a killed
/// conversion's aside stays, as any `OUT.old` of the user's does): the process id and the
/// directory's device and inode, which the rename keeps. Made before the rename, so that no kill
/// leaves an aside without it (look 155, L155-1: killed between the rename and the mark's text,
/// a whole copy of the old output stayed for good). Whatever had the mark's name goes first,
/// and the mark is made new, never written through a link (L148-3).
fn begin(out: &Path) -> Mark {
    let path = out.join(ASIDE_MARK);
    let _ = std::fs::remove_file(&path);
    let Ok(mut file) = std::fs::OpenOptions::new().write(true).create_new(true).open(&path) else {
        return Mark(None);
    };
    let key = std::fs::symlink_metadata(out).ok().as_ref().and_then(crate::sys::meta_key);
    let text = match key {
        Some((dev, ino)) => format!("{} {dev} {ino}", std::process::id()),
        None => std::process::id().to_string(),
    };
    if std::io::Write::write_all(&mut file, text.as_bytes()).is_err() {
        // Half written it would be nobody's: gone, the aside is as unmarked.
        let _ = std::fs::remove_file(&path);
        return Mark(None);
    }
    Mark(Some(file))
}

impl Mark {
    /// Finishes the mark of the directory now at `old`: its last change (the rename's, the
    /// mark being in it already) appended, so that a copy of it or the aside renamed back and
    /// forth since is not taken for a conversion's (L150-3).
    fn finish(self, old: &Path) {
        let Some(mut file) = self.0 else { return };
        let changed = std::fs::symlink_metadata(old).ok().as_ref().and_then(crate::sys::meta_changed);
        if let Some((s, ns)) = changed {
            let _ = std::io::Write::write_all(&mut file, format!(" {s} {ns}").as_bytes());
        }
    }
}

/// How long after its mark was made a directory with an unfinished mark may have last changed
/// and still be a conversion's aside: the rename follows the mark at once, a user's later one
/// (a restore, a backup under that name) comes after a person's pause.
const UNFINISHED_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether `dir`'s last change, `changed`, came at most [`UNFINISHED_WITHIN`] after the mark
/// `mark` was last written: an unfinished mark's aside left by a kill just after the rename.
fn renamed_at_marking(mark: &std::fs::Metadata, changed: (i64, i64)) -> bool {
    let (Ok(marked), Ok(s), Ok(ns)) = (mark.modified(), u64::try_from(changed.0), u32::try_from(changed.1))
    else {
        return false;
    };
    let changed = std::time::UNIX_EPOCH + std::time::Duration::new(s, ns);
    changed.duration_since(marked).is_ok_and(|d| d <= UNFINISHED_WITHIN)
        || marked.duration_since(changed).is_ok_and(|d| d <= UNFINISHED_WITHIN)
}

/// Whether `dir` bears a conversion's mark made for it: a regular file of a few bytes whose
/// identity, where it has one, is `dir`'s own, and `dir` unchanged since, unless its removal had
/// begun (one of `datasets` gone or without its index: L148-2), which changes it.
fn marked(dir: &Path, datasets: &[&str]) -> bool {
    let path = dir.join(ASIDE_MARK);
    let Ok(mark) = std::fs::symlink_metadata(&path) else { return false };
    if !(mark.is_file() && mark.len() <= 64) {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(&path) else { return false };
    let meta = std::fs::symlink_metadata(dir).ok();
    let key = meta.as_ref().and_then(crate::sys::meta_key);
    let changed = meta.as_ref().and_then(crate::sys::meta_changed);
    let said: Vec<i128> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let begun = || {
        datasets.iter().any(|d| {
            let d = dir.join(d);
            !d.join("index.zr").exists() && !d.join("meta.zr").exists()
        })
    };
    match (key, changed, said.as_slice()) {
        (Some((dev, ino)), Some((s, ns)), [_, d, i, cs, cn]) => {
            *d == i128::from(dev)
                && *i == i128::from(ino)
                && ((*cs == i128::from(s) && *cn == i128::from(ns)) || begun())
        }
        // Unfinished (killed between the rename and `finish`), the last word maybe half there.
        (Some((dev, ino)), Some(changed), [_, d, i] | [_, d, i, _]) => {
            *d == i128::from(dev) && *i == i128::from(ino) && (renamed_at_marking(&mark, changed) || begun())
        }
        (None, _, [_]) | (_, None, [_]) => true,
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
        if e.file_type().is_ok_and(|t| t.is_dir()) && marked(&path, datasets) {
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
