//! The datasets a forced conversion into a directory of datasets replaces, moved aside under
//! their locks before it writes anything: put back when it fails, removed once it has placed its
//! own. Replaced one at a time as each was written, a conversion failing part-way (a reader
//! holding one, a full disk) left OUT a mix of the new input's datasets and the old one's
//! (look 120, L120-2).

use std::path::{Path, PathBuf};

use super::replace::{Held, aside, check_replaceable, remove_half_removed_asides};
use crate::{Error, Result};

/// Datasets moved aside (`OUT/<name>.old`, or the next free name), each held under its locks.
#[must_use = "put back with `restore` or removed with `remove`"]
pub(crate) struct SetAside {
    /// (its name, where it is now, its locks), in the order moved.
    moved: Vec<(PathBuf, PathBuf, Held)>,
}

impl SetAside {
    /// Moves each of `outs` that exists aside, after checking it is a dataset (or a link to one,
    /// which is moved itself) that no writer or reader has open.
    ///
    /// # Errors
    /// [`Error::NotReplaceable`]; [`Error::Locked`]; [`Error::Io`]: what was moved already is put
    /// back first.
    pub(crate) fn take<'a>(outs: impl IntoIterator<Item = &'a Path>) -> Result<SetAside> {
        let mut set = SetAside { moved: Vec::new() };
        for out in outs {
            // What a conversion killed while removing these left (look 125, L125-1).
            remove_half_removed_asides(out);
            if std::fs::symlink_metadata(out).is_err() {
                continue;
            }
            if let Err(e) = set.move_one(out) {
                set.restore();
                return Err(e);
            }
        }
        Ok(set)
    }

    fn move_one(&mut self, out: &Path) -> Result<()> {
        check_replaceable(out)?;
        let mut held = Held::take(out)?;
        let old = aside(out);
        std::fs::rename(out, &old).map_err(|e| Error::io("rename", out, e))?;
        held.moved_to(&old);
        self.moved.push((out.to_path_buf(), old, held));
        Ok(())
    }

    /// Puts each dataset back under its name, unless something has taken the name meanwhile
    /// (then it stays where it is, a dataset a later forced conversion removes).
    pub(crate) fn restore(self) {
        for (out, old, mut held) in self.moved.into_iter().rev() {
            if std::fs::symlink_metadata(&out).is_err() && std::fs::rename(&old, &out).is_ok() {
                held.moved_to(&out);
            }
        }
    }

    /// Removes the datasets moved aside, once the caller's own are placed under their names.
    ///
    /// # Errors
    /// [`Error::Io`] of a removal (the ones after it are left, datasets a later forced
    /// conversion removes).
    pub(crate) fn remove(self) -> Result<()> {
        for (_, old, held) in self.moved {
            held.remove(&old)?;
        }
        Ok(())
    }
}
