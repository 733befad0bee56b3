//! The directories of datasets a forced `convert images` set aside (`OUT.old`, `OUT.oldN`) and
//! was killed before it removed: marked as a conversion's when they are made, and removed by the
//! next conversion into OUT that succeeds (look 147, L147-1: each kill kept a whole copy of the
//! old output for good). An `OUT.old` without the mark (one the user made) is never taken.

use std::path::Path;

use crate::Result;

/// The file a conversion leaves in the directory it set aside, holding its process id: what
/// tells its aside from a user's `OUT.old`. Removed last when the aside is removed, and before
/// the directory is put back under its name.
pub(crate) const ASIDE_MARK: &str = ".loaderx-aside";

/// Marks `old`, just set aside, as a conversion's (best effort: unmarked, a killed
/// conversion's aside stays, as any `OUT.old` of the user's does).
pub(super) fn mark(old: &Path) {
    let _ = std::fs::write(old.join(ASIDE_MARK), std::process::id().to_string());
}

/// Removes the marked asides beside `out` (`out.old`, `out.oldN`) that hold nothing but the
/// conversion's `datasets` and `files`, none of them open (their locks taken first): those of
/// conversions killed before they removed them. What cannot be taken stays.
pub(crate) fn remove_killed_asides_dir_of<'a>(out: &Path, datasets: &[&'a str], files: &'a [&'a str]) {
    for e in super::replace::asides_of(out) {
        let path = e.path();
        let marked =
            std::fs::symlink_metadata(path.join(ASIDE_MARK)).is_ok_and(|m| m.is_file() && m.len() <= 16);
        if marked && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = remove_one(&path, datasets, files);
        }
    }
}

/// [`remove_killed_asides_dir_of`] of one aside.
fn remove_one<'a>(path: &Path, datasets: &[&'a str], files: &'a [&'a str]) -> Result<()> {
    super::replace::check_replaceable_dir_of(path, datasets, files)?;
    let held = super::replace::hold_datasets_of(path, datasets)?;
    super::replace::Aside::found(path.to_path_buf(), held, files).remove()
}
