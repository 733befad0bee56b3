//! The staging directory of a stitch ([`super::set`]): made beside the set it becomes, locked
//! for its writer's life, renamed into place once complete; those of killed stitches removed by
//! the next stitch to the same set.

use std::path::{Path, PathBuf};

use super::schema::SCHEMA_FILE;
use super::writer::STAGING_LOCK;
use crate::format::storeset::SET_FILE;
use crate::store::WriteLock;
use crate::{Error, Result};

/// A staging directory of this process's own for the set or sets at `out`, made exclusively
/// beside it (`.NAME.stitch.PID.N`) and locked while this process writes it, renamed to `out`
/// once complete ([`place`]): a stitch killed part way left `out` holding some of its datasets,
/// or a schema and no manifest, which is not a set and refused every retry as existing (look
/// 71, L71-1); now it leaves only this hidden directory, which the next stitch to `out` removes
/// once its lock says no process holds it (look 125, L125-2: they piled up, one a killed run).
///
/// # Errors
/// [`Error::InvalidArgument`] when `out` exists; [`Error::Io`] naming what could not be made.
pub(super) fn staging_for(out: &Path) -> Result<(PathBuf, WriteLock)> {
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(Error::InvalidArgument(format!("{} exists; a store set is written new", out.display())));
    }
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
    let name = out.file_name().ok_or_else(|| {
        Error::InvalidArgument(format!("{}: a store set is written to a named directory", out.display()))
    })?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".stitch.");
    remove_dead_staging(parent, &prefix.to_string_lossy());
    let doing = format!("stitching {}", out.display());
    for n in 0u32..64 {
        let mut tmp = prefix.clone();
        tmp.push(format!("{}.{n}", std::process::id()));
        let tmp = parent.join(tmp);
        match std::fs::create_dir(&tmp) {
            Ok(()) => {
                let lock = WriteLock::acquire_named(&tmp, STAGING_LOCK, &doing)?;
                return Ok((tmp, lock));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io("create directory", &tmp, e)),
        }
    }
    Err(Error::InvalidArgument(format!("{}: no free staging name beside it", out.display())))
}

/// Whether `name` is one a stitch stages a set under ([`staging_for`]): `.NAME.stitch.<pid>.<n>`,
/// both numbers decimal. Nothing else is passed over as a stitch's (look 138, L138-2: any hidden
/// name holding `.stitch.` was, a tensor's among them).
pub(crate) fn is_stitch_staging(name: &str) -> bool {
    let digits = |t: &str| !t.is_empty() && t.len() <= 10 && t.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix('.')
        .and_then(|n| n.rsplit_once(".stitch."))
        .and_then(|(set, tail)| Some((set, tail.split_once('.')?)))
        .is_some_and(|(set, (pid, n))| !set.is_empty() && digits(pid) && digits(n))
}

/// Removes the staging directories `parent/PREFIX<pid>.<n>` of other processes whose lock file
/// holds that process id (written once it held the lock) and is free now: their stitch was
/// killed. One whose lock file is missing or holds nothing yet (just made), one locked (alive),
/// this process's own (another thread's), and anything not a directory stay.
fn remove_dead_staging(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let me = std::process::id().to_string();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        // `<pid>.<n>`, both decimal (look 128, L128-3: an empty pid matched an empty lock file).
        let digits = |t: &str| !t.is_empty() && t.len() <= 10 && t.bytes().all(|b| b.is_ascii_digit());
        let Some((pid, n)) =
            name.to_str().and_then(|n| n.strip_prefix(prefix)).and_then(|n| n.split_once('.'))
        else {
            continue;
        };
        if !digits(pid)
            || !digits(n)
            || pid == me
            || !e.file_type().is_ok_and(|t| t.is_dir())
            || !stitch_written(&path)
        {
            continue;
        }
        // At most a process id's bytes, from a regular file.
        let lock = path.join(STAGING_LOCK);
        let holder = std::fs::symlink_metadata(&lock)
            .ok()
            .filter(|m| m.is_file() && m.len() <= 16)
            .and_then(|_| std::fs::read(&lock).ok())
            .map(|text| String::from_utf8_lossy(&text).trim().to_string());
        if holder.as_deref() != Some(pid) {
            continue;
        }
        if let Ok(lock) = WriteLock::acquire_named(&path, STAGING_LOCK, "removing a killed stitch's staging")
        {
            drop(lock);
            remove_stitch_files(&path);
        }
    }
}

/// Whether `name` is a file a stitch writes in its staging: a set's schema, its manifest, their
/// temporaries, the lock, the list of side files it copies ([`COPIES_FILE`]).
fn set_file(name: &str) -> bool {
    [SCHEMA_FILE, SET_FILE, STAGING_LOCK, COPIES_FILE].contains(&name)
        || name
            .strip_suffix(crate::store::TMP_SUFFIX)
            .is_some_and(|n| n == SCHEMA_FILE || n == SET_FILE || n == COPIES_FILE)
}

/// The file a stitch of a directory of datasets lists the side files in (`classes.txt`, one a
/// line) before it copies them into its staging, removed once the set is in place: a killed stitch's
/// copies and their temporaries are then known for its own, and swept with the rest (look 140,
/// L140-2: they kept the staging there for good). Hidden: a part's hidden files are no side
/// files, so none has this name.
const COPIES_FILE: &str = ".stitch-copies";

/// Lists `copies` in the staging `dir` ([`COPIES_FILE`]) before they are copied there.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub(super) fn copying(dir: &Path, copies: &[String]) -> Result<()> {
    if copies.is_empty() {
        return Ok(());
    }
    crate::store::write_atomic_with(dir, COPIES_FILE, |file, tmp| {
        let mut to = file;
        std::io::Write::write_all(&mut to, copies.join("\n").as_bytes())
            .map_err(|e| Error::io("write", tmp, e))
    })
}

/// Removes the list [`copying`] wrote from `dir`, the set placed with every copy.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub(super) fn copied(dir: &Path) -> Result<()> {
    let list = dir.join(COPIES_FILE);
    match std::fs::remove_file(&list) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("remove", &list, e)),
        _ => Ok(()),
    }
}

/// The side files a killed stitch listed in its staging `dir` ([`copying`]), each a plain name;
/// none when the list is missing, not a regular file, or larger than any such list (a
/// megabyte).
fn listed_copies(dir: &Path) -> Vec<String> {
    let list = dir.join(COPIES_FILE);
    let readable = std::fs::symlink_metadata(&list).is_ok_and(|m| m.is_file() && m.len() <= 1 << 20);
    let Some(text) = readable.then(|| std::fs::read(&list).ok()).flatten() else { return Vec::new() };
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|n| !n.is_empty() && *n != "." && *n != ".." && !n.contains(['/', '\\', '\0']))
        .map(str::to_owned)
        .collect()
}

/// Whether the file `name` at the top of a killed stitch's staging is the stitch's: a
/// [`set_file`], or a side file it listed as copying, or that one's temporary.
fn stitchs_file(name: &str, copies: &[String]) -> bool {
    let listed = |n: &str| copies.iter().any(|c| c == n);
    set_file(name) || listed(name) || name.strip_suffix(crate::store::TMP_SUFFIX).is_some_and(listed)
}

/// Removes from the dead staging `dir` what a stitch writes there ([`set_file`]s, and the sets'
/// directories of them), then `dir` if that empties it: any other file (the parts' side files
/// copied, or anything of the user's) stays, never removed whole (look 134, L134-1: a user's
/// files beside a set's directory went with `remove_dir_all`).
fn remove_stitch_files(dir: &Path) {
    let copies = listed_copies(dir);
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let (path, name) = (e.path(), e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                if let Ok(inner) = std::fs::read_dir(&path) {
                    for f in inner.flatten() {
                        if f.file_type().is_ok_and(|t| t.is_file())
                            && f.file_name().to_str().is_some_and(set_file)
                        {
                            let _ = std::fs::remove_file(f.path());
                        }
                    }
                }
                let _ = std::fs::remove_dir(&path);
            }
            // The list last: a sweep killed part way leaves what it names known.
            Ok(t)
                if t.is_file()
                    && name != COPIES_FILE
                    && name.to_str().is_some_and(|n| stitchs_file(n, &copies)) =>
            {
                let _ = std::fs::remove_file(&path);
            }
            _ => {}
        }
    }
    let _ = std::fs::remove_file(dir.join(COPIES_FILE));
    let _ = std::fs::remove_dir(dir);
}

/// Whether the staging directory `dir` holds only what a stitch writes there: a set's schema,
/// manifest, their temporaries and the lock, or (a directory of datasets) such sets, each in a
/// directory, with the parts' side files copied beside them. Anything else (a link, a file beside
/// no set) may be the user's: the directory stays (look 128, L128-3).
fn stitch_written(dir: &Path) -> bool {
    let only_set_files = |d: &Path| {
        std::fs::read_dir(d).is_ok_and(|entries| {
            entries.flatten().all(|e| {
                e.file_type().is_ok_and(|t| t.is_file()) && e.file_name().to_str().is_some_and(set_file)
            })
        })
    };
    let copies = listed_copies(dir);
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let (mut sets, mut others) = (0, 0);
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { return false };
        let Some(name) = e.file_name().to_str().map(str::to_owned) else { return false };
        if kind.is_dir() {
            // A set stitched into it, or a set's own staging there (a hidden `.NAME.stitch.`).
            if !only_set_files(&e.path()) {
                return false;
            }
            let path = e.path();
            sets += usize::from(
                !name.starts_with('.') && (path.join(SET_FILE).is_file() || path.join(SCHEMA_FILE).is_file()),
            );
        } else if !kind.is_file() {
            return false;
        } else if !stitchs_file(&name, &copies) {
            others += 1;
        }
    }
    others == 0 || sets > 0
}

/// Moves the staging directory `staging`, `written` into, to `out`, unless `out` appeared
/// meanwhile (of two stitches racing onto one `out`, the second fails instead of replacing the
/// first's); on any failure the staging directory is removed.
///
/// # Errors
/// What `written` holds; [`Error::InvalidArgument`] when `out` exists; [`Error::Io`].
pub(super) fn place(written: Result<()>, (staging, mut lock): (&Path, WriteLock), out: &Path) -> Result<()> {
    let placed = written.and_then(|()| crate::store::sync_dir(staging)).and_then(|()| {
        crate::sys::rename_no_replace(staging, out).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty => {
                Error::InvalidArgument(format!("{} exists; a store set is written new", out.display()))
            }
            _ => Error::io("rename into", out, e),
        })
    });
    if placed.is_err() {
        drop(lock);
        let _ = std::fs::remove_dir_all(staging);
        return placed;
    }
    lock.moved_to(out);
    drop(lock);
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::store::sync_dir(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Look 125, L125-2: a killed stitch's staging directory (its lock file there, free) is
    /// removed by the next stitch to the same set; a live one's (locked), one just made (no lock
    /// file yet), another thread's of this process and another set's stay.
    #[test]
    fn a_killed_stitchs_staging_goes_at_the_next_stitch() {
        let dir = tempfile::tempdir().unwrap();
        let staging = |name: &str, lock: bool| {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("schema.msgpack"), b"x").unwrap();
            if lock {
                std::fs::write(d.join(STAGING_LOCK), b"99999").unwrap();
            }
            d
        };
        let dead = staging(".SET.stitch.99999.0", true);
        let live = staging(".SET.stitch.99998.0", true);
        let held = WriteLock::acquire_named(&live, STAGING_LOCK, "stitching").unwrap();
        std::fs::write(live.join(STAGING_LOCK), b"99998").unwrap(); // as that process wrote it
        let mine_too = staging(&format!(".SET.stitch.{}.7", std::process::id()), true);
        std::fs::write(mine_too.join(STAGING_LOCK), std::process::id().to_string()).unwrap();
        let fresh = staging(".SET.stitch.99997.0", false);
        let other = staging(".SET2.stitch.99999.0", true);
        // Look 128, L128-3: no process id in the name, or a file a stitch does not write.
        let no_pid = staging(".SET.stitch.", false);
        std::fs::write(no_pid.join(STAGING_LOCK), b"").unwrap();
        let users = staging(".SET.stitch.77.0", true);
        std::fs::write(users.join(STAGING_LOCK), b"77").unwrap();
        std::fs::write(users.join("notes.txt"), b"keep").unwrap();
        // A killed stitch of a directory of datasets: a set in it, and a side file copied.
        let of_datasets = staging(".SET.stitch.99995.0", false);
        std::fs::write(of_datasets.join(STAGING_LOCK), b"99995").unwrap();
        std::fs::create_dir(of_datasets.join("images")).unwrap();
        std::fs::write(of_datasets.join("images").join(SET_FILE), b"x").unwrap();
        std::fs::write(of_datasets.join("classes.txt"), b"cat\n").unwrap();
        let (mine, lock) = staging_for(&dir.path().join("SET")).unwrap();
        assert!(!dead.exists(), "the killed stitch's staging is gone");
        // Of a directory of datasets, its sets; the side file copied stays (it may be anyone's).
        assert!(!of_datasets.join("images").exists() && of_datasets.join("classes.txt").exists());
        assert!(live.exists() && fresh.exists() && other.exists() && mine_too.exists());
        assert!(no_pid.exists() && users.join("notes.txt").exists());
        // Look 134, L134-1: files beside a set's directory are never removed with it.
        let beside = staging(".SET.stitch.99991.0", false);
        std::fs::write(beside.join(STAGING_LOCK), b"99991").unwrap();
        std::fs::create_dir(beside.join("sub")).unwrap();
        std::fs::write(beside.join("sub").join(SCHEMA_FILE), b"x").unwrap();
        std::fs::write(beside.join("thesis.tex"), b"keep").unwrap();
        // Look 140, L140-2: killed while copying the side files it listed: they go with it, a
        // file it did not list stays; one killed with every file its own goes whole.
        let copying = staging(".SET.stitch.99990.0", false);
        std::fs::write(copying.join(STAGING_LOCK), b"99990").unwrap();
        std::fs::create_dir(copying.join("images")).unwrap();
        std::fs::write(copying.join("images").join(SET_FILE), b"x").unwrap();
        super::copying(&copying, &["classes.txt".into(), "labels.txt".into()]).unwrap();
        std::fs::write(copying.join("classes.txt"), b"cat\n").unwrap();
        std::fs::write(copying.join("labels.txt.tmp"), b"").unwrap();
        std::fs::write(copying.join("notes.md"), b"keep").unwrap();
        let copied = staging(".SET.stitch.99989.0", false);
        std::fs::write(copied.join(STAGING_LOCK), b"99989").unwrap();
        std::fs::create_dir(copied.join("images")).unwrap();
        std::fs::write(copied.join("images").join(SET_FILE), b"x").unwrap();
        super::copying(&copied, &["classes.txt".into()]).unwrap();
        std::fs::write(copied.join("classes.txt.tmp"), b"ca").unwrap();
        let (again, again_lock) = staging_for(&dir.path().join("SET")).unwrap();
        assert!(beside.join("thesis.tex").exists() && !beside.join("sub").exists());
        assert!(!copied.exists(), "every file the stitch's own: gone whole");
        let mut left: Vec<_> = std::fs::read_dir(&copying).unwrap().map(|e| e.unwrap().file_name()).collect();
        left.sort();
        assert_eq!(left, ["notes.md"], "the file it did not list stays, the rest goes");
        drop(again_lock);
        let _ = std::fs::remove_dir_all(again);
        assert!(mine.join(STAGING_LOCK).is_file(), "this stitch's own is locked");
        place(Ok(()), (&mine, lock), &dir.path().join("SET")).unwrap();
        assert!(!dir.path().join("SET").join(STAGING_LOCK).exists(), "the lock goes once placed");
        drop(held);
    }
}
