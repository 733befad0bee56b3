//! What overwriting may replace, and the replacing: a loaderx dataset (or an empty directory, or
//! a link to one, which is replaced itself), never a file or a directory holding anything of the
//! user's; the old dataset moved aside under its locks (a live writer's or readers' is `Locked`).

use std::path::{Path, PathBuf};

use super::schema::SCHEMA_FILE;
use super::staging::{remove_dataset_dir, remove_dataset_files};
use super::writer::{DatasetWriter, STAGING_LOCK};
use crate::store::{LOCK_FILE, WriteLock, is_loaderx_lock_file, is_store_file};
use crate::{Error, Result};

impl DatasetWriter {
    /// Moves the dataset now at `out` aside (to a name no other file has), the staging directory
    /// into place, then removes the old dataset: checked again first (it may have changed while
    /// this writer wrote), and held under its writer lock, so a live writer's store is `Locked`,
    /// never moved.
    ///
    /// The old dataset is removed by the [`Replaced`] returned, once the caller has made the
    /// new one's name durable: until then a crash leaves the old one beside it.
    pub(super) fn replace_out(&mut self) -> Result<Replaced> {
        check_replaceable(&self.out)?;
        remove_half_removed_asides(&self.out);
        let mut held = Held::take(&self.out)?;
        let old = aside(&self.out);
        // In one step where the platform can. The new dataset leaves the staging name first, for
        // a name of its own (OUT.old): the old one is then parked there, never under the staging
        // name, which the next writer takes while this one removes the old (look 106, L106-1:
        // that removal took the next writer's staging lock and directory). A crash leaves OUT
        // whole, and one dataset in OUT.old (the new before the exchange, the old after it).
        std::fs::rename(&self.staging, &old).map_err(|e| Error::io("rename", &self.staging, e))?;
        self.lock.moved_to(&old);
        match crate::sys::rename_exchange(&old, &self.out) {
            Ok(true) => {
                held.moved_to(&old);
                self.lock.moved_to(&self.out);
                return Ok(Replaced { held, old });
            }
            Ok(false) => {
                // Two renames, as below, from where the new dataset is now.
                std::fs::rename(&old, &self.staging).map_err(|e| Error::io("rename", &old, e))?;
                self.lock.moved_to(&self.staging);
            }
            Err(e) => {
                // The new dataset back at its staging name, to be removed as a failed one's.
                if std::fs::rename(&old, &self.staging).is_ok() {
                    self.lock.moved_to(&self.staging);
                }
                return Err(Error::io("exchange", &self.out, e));
            }
        }
        std::fs::rename(&self.out, &old).map_err(|e| Error::io("rename", &self.out, e))?;
        held.moved_to(&old);
        if let Err(e) = std::fs::rename(&self.staging, &self.out) {
            // The old dataset back under its name: a failure takes nothing off it (look 102).
            if std::fs::rename(&old, &self.out).is_ok() {
                held.moved_to(&self.out);
            }
            return Err(Error::io("rename", &self.staging, e));
        }
        self.lock.moved_to(&self.out);
        Ok(Replaced { held, old })
    }
}

/// The old dataset an overwrite moved aside, held until it is removed.
pub(super) struct Replaced {
    held: Held,
    old: PathBuf,
}

impl Replaced {
    /// Removes the old dataset.
    pub(super) fn remove(self) -> Result<()> {
        self.held.remove(&self.old)
    }
}

/// A dataset held while it is moved aside and removed: its writer lock taken and its readers
/// locked out, so a dataset a live writer or readers have open is `Locked`, never moved under
/// them. A link is replaced itself: nothing of its target is held.
pub(super) struct Held {
    lock: Option<WriteLock>,
    readers: Option<std::fs::File>,
    is_link: bool,
}

impl Held {
    /// Takes the locks of the dataset `dir`.
    ///
    /// # Errors
    /// [`Error::Locked`] while a writer or readers (in this process or another) have it open;
    /// [`Error::Io`].
    pub(super) fn take(dir: &Path) -> Result<Held> {
        if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Ok(Held { lock: None, readers: None, is_link: true });
        }
        let lock = WriteLock::acquire(dir)?;
        // Readers of the old dataset open its chunks by path as they go: not under them.
        let readers = crate::store::lock_out_readers(dir)?;
        Ok(Held { lock: Some(lock), readers, is_link: false })
    }

    /// The held dataset was renamed to `dir` (its lock file with it).
    pub(super) fn moved_to(&mut self, dir: &Path) {
        if let Some(l) = self.lock.as_mut() {
            l.moved_to(dir);
        }
    }

    /// Removes the held dataset, now at `dir`: its files, its writer lock last (its holder
    /// removes it), then the directory, now empty (anything that appeared in it is kept).
    pub(super) fn remove(mut self, dir: &Path) -> Result<()> {
        if self.is_link {
            return remove_dataset_dir(dir);
        }
        // What makes it a dataset goes first, the index with it: a removal killed part way then
        // leaves chunks no index names, which the next forced replacement sweeps, never what
        // looks like a whole dataset (look 130, L130-1: each kill kept a copy of the old data).
        for name in ["index.zr", "meta.zr", SCHEMA_FILE, crate::dataset::SET_FILE] {
            let f = dir.join(name);
            match std::fs::remove_file(&f) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", &f, e)),
            }
        }
        remove_dataset_files(dir, &[STAGING_LOCK])?;
        drop(self.lock.take());
        // The index is removed already (no reader opens it now); closed before the directory
        // goes, which Windows keeps while a file in it is open (issue 46: `OUT.old` stayed).
        drop(self.readers.take());
        let _ = std::fs::remove_dir(dir);
        Ok(())
    }
}

/// Removes what a replacement killed while it removed the old dataset left beside `out`: an
/// `out.old` (or `out.oldN`) that holds a store's chunk files, its schema and locks and nothing
/// else, its index gone first ([`Held::remove`]), and whose lock no process holds. Each kill
/// left one more, which no later run removed (look 125, L125-1). A whole dataset there (its
/// index present) stays, and so does an empty directory (a kill between the last file and the
/// directory leaves one, and so may the user: look 128, L128-2).
pub(super) fn remove_half_removed_asides(out: &Path) {
    for e in asides_of(out) {
        let path = e.path();
        // Whole: a store's index or a set's manifest (a schema alone names no records).
        let whole = ["index.zr", "meta.zr", crate::dataset::SET_FILE].iter().any(|m| path.join(m).exists());
        if whole
            || !e.file_type().is_ok_and(|t| t.is_dir())
            || only_loaderx_files(&path, true).is_err()
            || !holds_a_store_file(&path)
        {
            continue;
        }
        let Ok(lock) = WriteLock::acquire(&path) else { continue };
        if crate::store::remove_store_files(&path).is_ok() {
            // Its schema too, which a removal killed after the index leaves (look 132, L132-3).
            let _ = std::fs::remove_file(path.join(SCHEMA_FILE));
            let _ = std::fs::remove_file(path.join(STAGING_LOCK));
            drop(lock);
            let _ = std::fs::remove_dir(&path);
        }
    }
}

/// The entries beside `out` named as a replacement names what it sets aside (`out.old`,
/// `out.old1`, ...).
pub(super) fn asides_of(out: &Path) -> Vec<std::fs::DirEntry> {
    let (Some(parent), Some(name)) = (out.parent(), out.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
    let Ok(entries) = std::fs::read_dir(parent) else { return Vec::new() };
    let stem = format!("{name}.old");
    let aside = |n: &str| n.strip_prefix(&stem).is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
    entries.flatten().filter(|e| e.file_name().to_str().is_some_and(aside)).collect()
}

/// Whether `dir` holds a store's file other than a lock (a chunk, the manifest, the journal): an
/// empty directory, or one of lock files alone, may be the user's, and stays (look 128, L128-2:
/// `D.old` made by hand went with a forced replacement of `D`).
fn holds_a_store_file(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| e.file_name().to_str().is_some_and(|n| is_store_file(n) && n != LOCK_FILE))
    })
}

/// A name beside `out` that nothing has (`out.old`, `out.old1`, ...), for the output being
/// replaced while it is removed.
pub(super) fn aside(out: &Path) -> PathBuf {
    (0u32..)
        .map(|n| {
            let mut old = out.to_path_buf().into_os_string();
            old.push(if n == 0 { ".old".to_string() } else { format!(".old{n}") });
            PathBuf::from(old)
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .expect("some name of an unbounded series is free")
}

/// Checks that `out` may be replaced by a dataset written over it: an empty directory, or one
/// holding nothing but a loaderx store's or dataset's files (a store set's manifest included), or
/// a link to such a directory (the link is what is replaced). Anything else (a file, a directory
/// holding a file of the user's, a link to nothing) is never moved or removed.
///
/// # Errors
/// [`Error::NotReplaceable`] naming `out` and what is there; [`Error::Io`].
pub(crate) fn check_replaceable(out: &Path) -> Result<()> {
    let meta = std::fs::metadata(out).map_err(|e| match std::fs::read_link(out) {
        Ok(to) if e.kind() == std::io::ErrorKind::NotFound => {
            not_a_dataset(out, format!("a link to {}, which is not there", to.display())) // look 178, L178-3
        }
        _ => Error::io("stat", out, e),
    })?;
    if !meta.is_dir() {
        return Err(not_a_dataset(out, "it is a file".into()));
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
    let refuse = |reason: String| not_a_dataset(out, reason);
    let entries = std::fs::read_dir(out).map_err(|e| Error::io("read directory", out, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", out, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // A lock file of loaderx's holds a process id: another tool's `convert.lock` is the user's.
        let lock = [LOCK_FILE, STAGING_LOCK].contains(&name.as_ref());
        // One gone since the listing was a loaderx lock released meanwhile (a writer finishing
        // beside this one), not a file of the user's (review 52's race, seen by its test).
        if lock && std::fs::symlink_metadata(entry.path()).is_err() {
            continue;
        }

        let ours = (marked && is_store_file(&name))
            || [SCHEMA_FILE, crate::dataset::SET_FILE].contains(&name.as_ref())
            || (lock && is_loaderx_lock_file(&entry.path()));
        if !ours || entry.file_type().map_err(|e| Error::io("stat", entry.path(), e))?.is_dir() {
            return Err(refuse(format!("it holds {name}, which is not a loaderx file")));
        }
    }
    Ok(())
}

/// Checks that the dataset at `out` may be replaced now: what is there is one (or a link, an
/// empty directory), and no writer or readers have it open. What a writer asks before writing
/// (and asks again at the rename); a converter writing several asks it of each first (look 104,
/// L104-2: a tensor was replaced before the next one was found locked).
///
/// # Errors
/// [`Error::NotReplaceable`]; [`Error::Locked`]; [`Error::Io`].
pub(crate) fn check_free_to_replace(out: &Path) -> Result<()> {
    check_replaceable(out)?;
    if !std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink()) {
        drop(WriteLock::acquire(out)?);
        drop(crate::store::lock_out_readers(out)?);
    }
    Ok(())
}

/// The datasets directly in the directory of datasets `out_dir` that a forced conversion into it
/// does not write (`names`): `--force` replaces OUT, not only the datasets it writes, whose
/// neighbours from an earlier conversion were left beside the new ones, mixing two inputs
/// (look 121, L121-1). Each is checked free to replace (no writer, no reader) before anything
/// is written, to be removed once the conversion's own are placed. Writers' staging directories
/// (`*.partial`: see [`remove_killed_stagings`]), a stitch's staging, and anything that is not a
/// dataset stay.
///
/// # Errors
/// [`Error::NotReplaceable`]; [`Error::Locked`]; [`Error::Io`].
pub(crate) fn others_in_dir_of(out_dir: &Path, names: &[&str]) -> Result<Vec<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(out_dir) else { return Ok(Vec::new()) };
    let mut others = Vec::new();
    for e in entries {
        let e = e.map_err(|e| Error::io("read directory", out_dir, e))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = e.path();
        // A writer's staging stays (a killed one's goes once the conversion succeeds:
        // [`remove_killed_stagings`]).
        if name.ends_with(".partial") {
            continue;
        }
        // A stitch's hidden staging stays; a hidden dataset of the earlier conversion goes with
        // the rest (look 136, L136-1: `.h` outlived a forced conversion that did not write it).
        if super::set_staging::is_stitch_staging(name)
            || names.contains(&name)
            || !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir())
            || !path.join(SCHEMA_FILE).is_file()
        {
            continue;
        }
        check_free_to_replace(&path)?;
        others.push(path);
    }
    others.sort();
    Ok(others)
}

/// Removes from `out_dir`, a directory of datasets a forced conversion has just replaced (writing
/// `names`), the staging directories (`NAME.partial`) that killed writers left there
/// ([`super::staging::remove_killed_staging`]): they went with OUT (look 138, L138-1: a killed
/// conversion's `h.partial` outlived every rerun that wrote no `h`). Only after the conversion
/// succeeded (look 140, L140-1: one refused later had already taken them); one of a dataset it
/// wrote was that writer's to clear.
pub(crate) fn remove_killed_stagings(out_dir: &Path, names: &[String]) {
    let Ok(entries) = std::fs::read_dir(out_dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(dataset) = name.to_str().and_then(|n| n.strip_suffix(".partial")) else { continue };
        if !names.iter().any(|n| n == dataset) {
            super::staging::remove_killed_staging(&e.path());
        }
    }
}

/// Refuses `out_dir`, where a converter writes one dataset a name (`OUT/<name>`), when it is
/// itself a dataset, a store or a store set: the datasets would be written inside it, and it
/// could then no longer be replaced as one (look 104, L104-5).
///
/// # Errors
/// [`Error::NotReplaceable`] naming what `out_dir` is.
pub(crate) fn refuse_dataset_as_dir_of(out_dir: &Path) -> Result<()> {
    let what = if out_dir.join(crate::dataset::SET_FILE).exists() {
        "a store set"
    } else if out_dir.join(SCHEMA_FILE).exists() {
        "a dataset"
    } else if out_dir.join("index.zr").exists() || out_dir.join("meta.zr").exists() {
        "a store"
    } else {
        return Ok(());
    };
    Err(Error::NotReplaceable {
        path: out_dir.to_path_buf(),
        reason: format!(
            "it is {what}, and this conversion writes a directory of datasets (one a name, OUT/<name>): \
             give a directory that is none"
        ),
    })
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
    let refuse = |reason: String| not_a_dataset(out, reason);
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
            // A directory under a file's name is the user's (it is never removed).
            let is_dir = entry.file_type().map_err(|e| Error::io("stat", entry.path(), e))?.is_dir();
            let ours = (files.contains(&name.as_ref()) && !is_dir)
                || (name == STAGING_LOCK && is_loaderx_lock_file(&entry.path()))
                || (name == super::killed_asides::ASIDE_MARK && entry.file_type().is_ok_and(|t| t.is_file()));
            if !ours {
                return Err(refuse(format!("it holds {name}, which this conversion does not write")));
            }
        }
    }
    Ok(())
}

/// Takes the locks of each of `datasets` in the directory `out` that is there (a dataset a
/// live writer or readers have open refuses the replacement of `out`).
///
/// # Errors
/// [`Error::Locked`] naming the dataset; [`Error::Io`].
#[cfg(feature = "images")]
pub(super) fn hold_datasets_of<'a>(out: &Path, datasets: &[&'a str]) -> Result<Vec<(&'a str, Held)>> {
    let mut held = Vec::new();
    for &name in datasets {
        let dir = out.join(name);
        if std::fs::symlink_metadata(&dir).is_ok() {
            held.push((name, Held::take(&dir)?));
        }
    }
    Ok(held)
}

/// Checks that none of `datasets` in the directory `out` is open in a writer or a reader, as
/// the replacement will (asked before a whole conversion is spent on replacing them); a link
/// `out` is replaced itself and holds nothing.
///
/// # Errors
/// [`Error::Locked`] naming the dataset; [`Error::Io`].
#[cfg(feature = "images")]
pub(crate) fn check_free_dir_of(out: &Path, datasets: &[&str]) -> Result<()> {
    if std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok(());
    }
    hold_datasets_of(out, datasets).map(drop)
}

/// A directory of datasets a converter is replacing, moved aside ([`set_aside`]): its datasets
/// held under their locks until [`Aside::remove`] removes them.
#[cfg(feature = "images")]
pub(crate) struct Aside<'a> {
    /// Where the old directory is now; `None` for a link, removed itself.
    old: Option<PathBuf>,
    held: Vec<(&'a str, Held)>,
    files: &'a [&'a str],
}

/// Moves `staging`, the complete output of a converter writing `datasets` and `files`, to `out`,
/// looked at again: whatever appeared there while the converter ran is the user's. Without
/// `overwrite` it is kept (the rename replaces nothing); with it, only a conversion's own
/// datasets and files are replaced: the old `out` is set aside ([`set_aside`]), for the caller
/// to remove once it has moved the staging directory's lock.
///
/// # Errors
/// [`Error::AlreadyExists`] naming `out` without `overwrite`; as [`set_aside`]; [`Error::Io`].
#[cfg(feature = "images")]
pub(crate) fn place_dir_of<'a>(
    staging: &Path,
    out: &Path,
    overwrite: bool,
    datasets: &[&'a str],
    files: &'a [&'a str],
) -> Result<Option<Aside<'a>>> {
    let mut aside = if overwrite && std::fs::symlink_metadata(out).is_ok() {
        Some(set_aside(out, datasets, files)?)
    } else {
        None
    };
    if let Err(e) = crate::sys::rename_no_replace(staging, out) {
        // The old directory back under its name, its datasets' locks with it: a failure takes
        // nothing off it (look 102).
        if let Some(a) = aside.as_mut()
            && let Some(old) = a.old.take()
        {
            let _ = std::fs::remove_file(old.join(super::killed_asides::ASIDE_MARK));
            if std::fs::rename(&old, out).is_ok() {
                for (name, h) in &mut a.held {
                    h.moved_to(&out.join(name));
                }
            } else {
                a.old = Some(old);
            }
        }
        let exists =
            matches!(e.kind(), std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty);
        return Err(if exists {
            Error::AlreadyExists { path: out.to_path_buf() }
        } else {
            Error::io("rename into", out, e)
        });
    }
    Ok(aside)
}

/// Moves the directory of datasets `out` aside (to a name nothing has, `out.old`) for a
/// converter's output to take its place: checked again first ([`check_replaceable_dir_of`]: it
/// may have changed while the converter wrote), and each of its `datasets` held under its locks
/// from before the move, so one a live writer or readers have open is `Locked`, nothing moved.
/// A link `out` is removed itself.
///
/// # Errors
/// [`Error::NotReplaceable`] naming what is there; [`Error::Locked`]; [`Error::Io`].
#[cfg(feature = "images")]
fn set_aside<'a>(out: &Path, datasets: &[&'a str], files: &'a [&'a str]) -> Result<Aside<'a>> {
    check_replaceable_dir_of(out, datasets, files)?;
    if std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(out).map_err(|e| Error::io("remove", out, e))?;
        return Ok(Aside { old: None, held: Vec::new(), files });
    }
    let mut held = hold_datasets_of(out, datasets)?;
    let old = aside(out);
    super::killed_asides::rename_marked(out, &old)?;
    for (name, h) in &mut held {
        h.moved_to(&old.join(name));
    }
    Ok(Aside { old: Some(old), held, files })
}

#[cfg(feature = "images")]
impl<'a> Aside<'a> {
    /// Removes the old directory's datasets (each its files, then its lock), its files and a
    /// lock file a crashed conversion left, then the directory, now empty: anything that
    /// appeared in it after the check is kept there.
    ///
    /// # Errors
    /// [`Error::Io`] naming what could not be removed.
    pub(crate) fn remove(self) -> Result<()> {
        let Some(old) = self.old else { return Ok(()) };
        for (name, h) in self.held {
            h.remove(&old.join(name))?;
        }
        for name in self.files {
            remove_if_there(&old.join(name))?;
        }
        // As the check found it: another tool's file of that name would have refused `out`.
        let stale = old.join(STAGING_LOCK);
        if is_loaderx_lock_file(&stale) {
            remove_if_there(&stale)?;
        }
        // Last: a removal killed before it leaves the aside known for a conversion's.
        remove_if_there(&old.join(super::killed_asides::ASIDE_MARK))?;
        let _ = std::fs::remove_dir(&old);
        Ok(())
    }

    /// The aside `old`, found marked by a killed conversion, its `datasets` held.
    pub(super) fn found(old: PathBuf, held: Vec<(&'a str, Held)>, files: &'a [&'a str]) -> Aside<'a> {
        Aside { old: Some(old), held, files }
    }
}

/// Clears the staging directory `staging` of a converter that writes `datasets` and `files`
/// there, of what a crashed conversion left: those datasets (each holding only a store's or
/// dataset's files), those files and their temporaries (regular files), each removed alone;
/// the lock, which the caller holds, stays, and the datasets' own staging directories
/// (`images.partial`: a dataset writer killed part way) are left to their writers, which check
/// and clear them under their locks. Anything else (a directory of the user's that bears the
/// staging name) refuses the directory before anything in it is removed, and so does anything
/// at all but the lock when no crashed conversion's lock was there (`crashed` false) before the
/// caller took its own.
///
/// # Errors
/// [`Error::NotReplaceable`] naming `staging` or the dataset and what is there; [`Error::Io`].
#[cfg(feature = "images")]
pub(crate) fn clear_staging_dir_of(
    staging: &Path,
    datasets: &[&str],
    files: &[&str],
    crashed: bool,
) -> Result<()> {
    let refuse = |reason: String| not_a_dataset(staging, reason);
    let mut found = Vec::new();
    for entry in std::fs::read_dir(staging).map_err(|e| Error::io("read directory", staging, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", staging, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Not followed: a crashed conversion leaves no link.
        let kind = entry.file_type().map_err(|e| Error::io("stat", entry.path(), e))?;
        let file = |n: &str| files.contains(&n);
        // Without a crashed conversion's lock there before this one's, nothing but that lock is
        // a conversion's: the directory is the user's.
        let dir = kind.is_dir() && crashed;
        let dataset = dir && datasets.contains(&name.as_ref());
        let writers_staging = dir && name.strip_suffix(".partial").is_some_and(|d| datasets.contains(&d));
        let ours = crashed
            && kind.is_file()
            && (file(&name) || name.strip_suffix(crate::store::TMP_SUFFIX).is_some_and(file));
        if dataset {
            check_replaceable(&entry.path())?;
            found.push((entry.path(), true));
        } else if ours {
            found.push((entry.path(), false));
        } else if !(writers_staging || name == STAGING_LOCK) {
            return Err(refuse(format!("it holds {name}, which a crashed conversion does not leave")));
        }
    }
    for (path, is_dataset) in found {
        if is_dataset { remove_dataset_dir(&path)? } else { remove_if_there(&path)? }
    }
    Ok(())
}

/// Removes the file `path`, if it is there.
#[cfg(feature = "images")]
fn remove_if_there(path: &Path) -> Result<()> {
    std::fs::remove_file(path).or_else(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Ok(()),
        _ => Err(Error::io("remove", path, e)),
    })
}

/// What is at `path` is not a loaderx dataset (`reason` says what it is), so it is not replaced.
fn not_a_dataset(path: &Path, reason: String) -> Error {
    Error::NotReplaceable {
        path: path.to_path_buf(),
        reason: format!("it is not a loaderx dataset ({reason}): remove it or write elsewhere"),
    }
}
