//! The listing of an image folder (torchvision's `ImageFolder` layout: one directory of images
//! per class), shared by `convert images` and [`image_folder`](super::image_folder).
//!
//! As torchvision lists one: the classes are the root's directories (a link to a directory
//! counts), sorted by name; a class's images are every file under its directory, subdirectories
//! and links followed, directory by directory in the order of their paths, each directory's
//! files by name. Unlike it: names starting with `.` are left out, a directory reached twice
//! (by a link) is read once, and a link that leads out of the root is an error naming it, never
//! followed (an image folder reads only what lies inside it) and never silently dropped.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Every `(file, label)` of a folder, in order.
pub(super) type Labelled = Vec<(PathBuf, u32)>;

/// The class names and every `(file, label)`, in order.
pub(super) fn list(dir: &Path) -> Result<(Vec<String>, Labelled)> {
    let root = std::fs::canonicalize(dir).map_err(|e| Error::io("open", dir, e))?;
    let mut classes = Vec::new();
    let mut files = Vec::new();
    for (name, path) in entries(dir)? {
        let Some(kind) = kind(&root, &path)? else { continue };
        if !kind.is_dir {
            continue;
        }
        let Some(name) = name.to_str().map(str::to_owned) else {
            return Err(Error::BadInput {
                path,
                reason: "a class directory whose name is not UTF-8: class names are text (rename it)".into(),
                source: None,
            });
        };
        if name.contains('\n') {
            return Err(Error::BadInput {
                path,
                reason: "a class name with a newline cannot be listed in classes.txt".into(),
                source: None,
            });
        }
        let label = u32::try_from(classes.len())
            .map_err(|_| Error::InvalidArgument("more than 2^32 classes".into()))?;
        classes.push(name);
        files.extend(class_files(&root, path, kind.real)?.into_iter().map(|f| (f, label)));
    }
    let bad = |reason: &str| Error::BadInput { path: dir.to_path_buf(), reason: reason.into(), source: None };
    if classes.is_empty() {
        return Err(bad("no class subdirectories: an image folder holds one directory of images per class"));
    }
    if files.is_empty() {
        return Err(bad("the class directories hold no files"));
    }
    Ok((classes, files))
}

/// What an entry is, links followed: a directory or a regular file, and where it really is.
struct Kind {
    is_dir: bool,
    real: PathBuf,
}

/// The entries of `d` not starting with `.`, sorted by name (as bytes).
fn entries(d: &Path) -> Result<Vec<(OsString, PathBuf)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).map_err(|e| Error::io("read directory", d, e))? {
        let e = e.map_err(|e| Error::io("read directory", d, e))?;
        if !e.file_name().as_encoded_bytes().starts_with(b".") {
            v.push((e.file_name(), e.path()));
        }
    }
    v.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
    Ok(v)
}

/// `path` as a directory or a regular file, links followed (`None`: anything else, a FIFO or
/// a dangling link, which is no image); a link out of `root` is an error naming it.
fn kind(root: &Path, path: &Path) -> Result<Option<Kind>> {
    let Ok(real) = std::fs::canonicalize(path) else { return Ok(None) };
    if !real.starts_with(root) {
        return Err(Error::BadInput {
            path: path.to_path_buf(),
            reason: format!(
                "a link to {}, outside the image folder {}: only what lies inside the folder is read (move or copy it in)",
                real.display(),
                root.display()
            ),
            source: None,
        });
    }
    let meta = std::fs::metadata(&real).map_err(|e| Error::io("stat", path, e))?;
    Ok((meta.is_dir() || meta.is_file()).then_some(Kind { is_dir: meta.is_dir(), real }))
}

/// Every file under the class directory `dir` (whose real path is `real`): each directory
/// reached (once), in the order of their paths, its files by name.
fn class_files(root: &Path, dir: PathBuf, real: PathBuf) -> Result<Vec<PathBuf>> {
    let mut seen = HashSet::from([real]);
    let mut dirs: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    let mut pending = vec![dir];
    while let Some(d) = pending.pop() {
        let mut here = Vec::new();
        for (_, path) in entries(&d)? {
            match kind(root, &path)? {
                Some(Kind { is_dir: true, real }) if !seen.contains(&real) => {
                    seen.insert(real);
                    pending.push(path);
                }
                Some(Kind { is_dir: false, .. }) => here.push(path),
                // A directory reached before (through a link), or no directory or file.
                Some(Kind { is_dir: true, .. }) | None => {}
            }
        }
        dirs.push((d, here));
    }
    dirs.sort_by(|a, b| a.0.as_os_str().as_encoded_bytes().cmp(b.0.as_os_str().as_encoded_bytes()));
    Ok(dirs.into_iter().flat_map(|(_, files)| files).collect())
}
