//! The listing of an image folder (torchvision's `ImageFolder` layout: one directory of images
//! per class), shared by `convert images` and [`image_folder`](super::image_folder).
//!
//! As torchvision lists one: the classes are the root's directories (a link to a directory
//! counts), sorted by name; a class's images are every file under its directory, subdirectories
//! and links followed, directory by directory in the order of their paths, each directory's
//! files by name. Unlike it: names starting with `.` are left out, a directory reached twice
//! (by a link) is read once, and a link that leads out of the root is an error naming it, never
//! followed (an image folder reads only what lies inside it) and never silently dropped; an
//! entry that cannot be resolved (permissions, a path too long) is an error naming it, a
//! dangling link left out. Each image is read as the file listed ([`Image::open`]): one swapped
//! for another, or for a link out of the root, after the listing is refused.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// One image of a folder: its path as listed, its class, and the file it was when listed.
#[derive(Debug, Clone)]
pub(super) struct Image {
    pub(super) path: PathBuf,
    pub(super) label: u32,
    /// Device and inode (Unix; `None` elsewhere, where nothing is compared).
    key: Option<(u64, u64)>,
}

impl Image {
    /// Opens the image ([`open_input`](super::block::open_input)'s checks): the file listed,
    /// or an error naming the path when another is there now (replaced, or a link swapped in
    /// after the listing: the out-of-root check would be dodged; review 49).
    pub(super) fn open(&self) -> Result<(File, u64)> {
        let (file, len) = super::block::open_input(&self.path)?;
        let now = crate::sys::file_key(&file).map_err(|e| Error::io("stat", &self.path, e))?;
        if self.key.is_some() && now != self.key {
            return Err(Error::BadInput {
                path: self.path.clone(),
                reason: "another file than the one listed (replaced, or a link swapped in, since the folder was listed)".into(),
                source: None,
            });
        }
        Ok((file, len))
    }
}

/// The class names and every image, in order.
pub(super) fn list(dir: &Path) -> Result<(Vec<String>, Vec<Image>)> {
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
        // Every line break a reader of classes.txt may split at (Python's `splitlines()`: a
        // `cat\r` read back as two names, or as `cat`, look 91, N3).
        if name.contains([
            '\n', '\r', '\u{b}', '\u{c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}',
        ]) {
            return Err(Error::BadInput {
                path,
                reason: format!(
                    "the class name {name:?} holds a line break, so classes.txt (a name a line) cannot list it (rename it)"
                ),
                source: None,
            });
        }
        // A store `convert images` wrote, taken for a folder of images (issue 42's second trial:
        // its datasets were listed as classes, its chunk files as images).
        if path.join(crate::store::SCHEMA_FILE).is_file() {
            return Err(Error::BadInput {
                path: dir.to_path_buf(),
                reason: format!(
                    "a converted store (its {name:?} is a dataset), not a folder of images: open its images \
                     dataset ({}/images) as an encoded image stream",
                    dir.display()
                ),
                source: None,
            });
        }
        let label = u32::try_from(classes.len())
            .map_err(|_| Error::InvalidArgument("more than 2^32 classes".into()))?;
        classes.push(name);
        files.extend(class_files(&root, path, kind.real)?.into_iter().map(|(path, key)| Image {
            path,
            label,
            key,
        }));
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

/// What an entry is, links followed: a directory or a regular file, where it really is, and
/// its identity.
struct Kind {
    is_dir: bool,
    real: PathBuf,
    key: Option<(u64, u64)>,
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

/// `path` as a directory or a regular file, links followed (`None`: anything else, a FIFO, a
/// broken link (dangling, a loop, through a file: review 50) or an entry gone since it was
/// listed, none of which is an image); a link out of `root` is an error naming it, and so is
/// any other entry that cannot be resolved (review 49: it was left out without a word).
fn kind(root: &Path, path: &Path) -> Result<Option<Kind>> {
    let real = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            return Ok(None);
        }
        Err(e) => return Err(Error::io("resolve", path, e)),
    };
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
    let key = crate::sys::meta_key(&meta);
    Ok((meta.is_dir() || meta.is_file()).then_some(Kind { is_dir: meta.is_dir(), real, key }))
}

/// A file found: its path as reached, and its identity ([`Kind::key`]).
type Found = (PathBuf, Option<(u64, u64)>);

/// Every file under the class directory `dir` (whose real path is `real`): each directory
/// reached (once), in the order of their paths, its files by name.
fn class_files(root: &Path, dir: PathBuf, real: PathBuf) -> Result<Vec<Found>> {
    let mut seen = HashSet::from([real]);
    let mut dirs: Vec<(PathBuf, Vec<Found>)> = Vec::new();
    let mut pending = vec![dir];
    while let Some(d) = pending.pop() {
        let mut here = Vec::new();
        for (_, path) in entries(&d)? {
            match kind(root, &path)? {
                Some(Kind { is_dir: true, real, .. }) if !seen.contains(&real) => {
                    seen.insert(real);
                    pending.push(path);
                }
                Some(Kind { is_dir: false, key, .. }) => here.push((path, key)),
                // A directory reached before (through a link), or no directory or file.
                Some(Kind { is_dir: true, .. }) | None => {}
            }
        }
        dirs.push((d, here));
    }
    dirs.sort_by(|a, b| a.0.as_os_str().as_encoded_bytes().cmp(b.0.as_os_str().as_encoded_bytes()));
    Ok(dirs.into_iter().flat_map(|(_, files)| files).collect())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// An image replaced after the listing, by another file or by a link out of the root, is
    /// refused when read, naming it (review 49: the link was followed, the out-of-root check
    /// dodged).
    #[test]
    fn an_image_swapped_after_the_listing_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("cat")).unwrap();
        for name in ["a.png", "b.png"] {
            std::fs::write(root.join("cat").join(name), b"listed").unwrap();
        }
        std::fs::write(tmp.path().join("secret"), b"outside").unwrap();
        let (classes, images) = list(&root).unwrap();
        assert_eq!((classes.len(), images.len()), (1, 2));
        assert!(images[0].open().is_ok() && images[1].open().is_ok());
        std::fs::remove_file(&images[0].path).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), &images[0].path).unwrap();
        std::fs::rename(root.join("cat/b.png"), root.join("cat/old")).unwrap();
        std::fs::write(&images[1].path, b"another").unwrap();
        for image in &images {
            let e = image.open().unwrap_err();
            assert!(
                matches!(&e, Error::BadInput { path, reason, .. } if *path == image.path && reason.contains("another file than the one listed")),
                "{e}"
            );
        }
    }
}
