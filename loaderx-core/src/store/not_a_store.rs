//! What a directory that is not a store is instead (a store set, a directory of datasets), so
//! that every face's "not a loaderx store" says what to open.

use std::path::Path;

use super::files::{INDEX_FILE, META_FILE, SCHEMA_FILE};
use crate::Error;

/// The names of the datasets directly inside `dir` (sorted, at most 8), if it holds any.
pub(crate) fn datasets_in(dir: &Path) -> Option<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        // An error path: a look at the first entries only, however large the directory.
        .take(4096)
        .filter(|e| e.path().join(SCHEMA_FILE).is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    names.sort();
    names.truncate(8);
    (!names.is_empty()).then_some(names)
}

/// Why `dir`, a directory without `meta.zr` or `index.zr`, is not a store: what it is instead
/// (a store set, a directory of datasets) and what to open, where that can be told (look 97,
/// F97-2: `stats` of a set or of `convert images`' output said only that no index was there).
pub(crate) fn not_a_store_reason(dir: &Path) -> String {
    if std::fs::symlink_metadata(dir.join(crate::format::storeset::SET_FILE)).is_ok() {
        "it is a store set (its records live in its parts): open it as a dataset, or one of its parts as \
         a store"
            .into()
    } else if let Some(inside) = datasets_in(dir) {
        format!(
            "it is a directory of datasets ({}), not one: open one of them, e.g. {}",
            inside.join(", "),
            dir.join(&inside[0]).display()
        )
    } else {
        "it has no meta.zr (v1) or index.zr (v2)".into()
    }
}

/// What an opener that found no index in `handle`'s directory reports (`None`: look again). A
/// directory that is neither a store set nor a directory of datasets, whose writer lock another
/// process holds, is a store being created (its creator takes the lock before it removes or
/// writes anything): waited for within the lock's grace, then `Locked`, never "not a store"
/// (look 152, L152-1: a `compact` racing a creator said so). `holding`: whether the opener
/// holds the writer lock itself.
pub(super) fn missing_index(handle: &crate::sys::Dir, holding: bool) -> Option<Error> {
    use super::lock::{WriterThere, writer_there};
    let dir = handle.path();
    let plain = std::fs::symlink_metadata(dir.join(crate::format::storeset::SET_FILE)).is_err()
        && datasets_in(dir).is_none();
    if !holding && plain {
        match writer_there(dir) {
            // A creator that finished and closed since the index was asked for (look 154).
            WriterThere::Free if handle.stat(INDEX_FILE).is_ok() || handle.stat(META_FILE).is_ok() => {
                return None;
            }
            WriterThere::Free => {}
            WriterThere::Released => return None,
            WriterThere::Held(holder) => {
                return Some(Error::Locked {
                    path: dir.to_path_buf(),
                    reason: format!("{holder} is writing it and its index is not there yet"),
                });
            }
        }
    }
    Some(Error::NotAStore { path: dir.to_path_buf(), reason: not_a_store_reason(dir) })
}

/// An empty path names no store: a bad argument, not a failing disk (look 165, L165-3: the C
/// ABI's create said `LX_ERR_IO`, "cannot make an empty path absolute").
pub(super) fn refuse_empty(dir: &Path) -> crate::Result<()> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument("the store's path is empty".into()));
    }
    Ok(())
}
