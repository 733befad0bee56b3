//! A store's directory, held open: its files are opened by name relative to the directory
//! itself (`openat`), so a store stays on its own files when its directory is renamed away (and
//! another store made at the old name), and when the process changes its working directory after
//! opening it by a relative path.
//!
//! On Unix the directory's descriptor is held. Elsewhere the absolute path is used: Windows
//! refuses to rename a directory while a file in it is open, and an open store holds its index.
#![cfg_attr(
    unix,
    expect(unsafe_code, reason = "openat, fstatat, renameat and unlinkat are foreign functions")
)]

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// What [`Dir::stat`] says of a name: its length, whether it is a regular file, and (on Unix)
/// its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) len: u64,
    pub(crate) file: bool,
    pub(crate) key: Option<(u64, u64)>,
}

/// How [`Dir::open`] opens a file: for reading, for reading and writing, or (`Create`) read-write
/// and made when missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    ReadWrite,
    Create,
}

/// An open directory and its absolute path (for messages, and where the platform has no
/// `openat`: on Windows a store's directory is followed by its path, which the system keeps
/// from being renamed, in general, while files in it are open).
#[derive(Debug)]
pub(crate) struct Dir {
    path: PathBuf,
    #[cfg(unix)]
    handle: File,
}

impl Dir {
    /// Opens the directory `path` names now, made absolute against the working directory of
    /// this moment.
    ///
    /// # Errors
    /// The open's error (`NotFound` for a missing directory, `NotADirectory` for a file).
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        let path = std::path::absolute(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let handle = File::options().read(true).custom_flags(libc::O_DIRECTORY).open(&path)?;
            Ok(Dir { path, handle })
        }
        #[cfg(not(unix))]
        {
            if !std::fs::metadata(&path)?.is_dir() {
                return Err(io::Error::from(io::ErrorKind::NotADirectory));
            }
            Ok(Dir { path })
        }
    }

    /// The directory's absolute path, as it was named when opened.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory (for messages).
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Whether the path this directory was opened by still names it.
    pub(crate) fn still_named(&self) -> io::Result<bool> {
        #[cfg(unix)]
        {
            super::same_file(&self.handle, &self.path)
        }
        #[cfg(not(unix))]
        {
            self.path.try_exists()
        }
    }

    /// Opens `name` (a plain file name) in this directory, following a link as `open(2)` does,
    /// never waiting in the open (`O_NONBLOCK`: a FIFO planted under the name would block it).
    /// Anything but a regular file is refused (`InvalidInput`), as is a name with a separator.
    pub(crate) fn open_file(&self, name: &str, access: Access) -> io::Result<File> {
        let file = self.open_any(name, access)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Ok(file)
    }

    /// What `name` in this directory is now (a link followed), without opening it (a socket
    /// cannot be opened; a device should not be).
    pub(crate) fn stat(&self, name: &str) -> io::Result<Stat> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let c = c_name(name)?;
            let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
            // SAFETY: `c` is a NUL-terminated string that outlives the call; `self.handle` is an
            // open directory this value owns; `st` is writable memory of a `stat`, which the call
            // fills when it returns 0.
            if unsafe { libc::fstatat(self.handle.as_raw_fd(), c.as_ptr(), st.as_mut_ptr(), 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fstatat returned 0: it filled `st`.
            let st = unsafe { st.assume_init() };
            #[allow(
                clippy::unnecessary_cast,
                reason = "dev_t and ino_t are narrower or signed elsewhere (macOS)"
            )]
            Ok(Stat {
                len: st.st_size as u64,
                file: st.st_mode & libc::S_IFMT == libc::S_IFREG,
                key: Some((st.st_dev as u64, st.st_ino as u64)),
            })
        }
        #[cfg(not(unix))]
        {
            plain(name)?;
            let m = std::fs::metadata(self.join(name))?;
            Ok(Stat { len: m.len(), file: m.is_file(), key: None })
        }
    }

    /// Whether `name` in this directory is the file `held` (the same device and inode); `false`
    /// when nothing has the name.
    pub(crate) fn names(&self, held: &File, name: &str) -> io::Result<bool> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let held = held.metadata()?;
            match self.stat(name) {
                Ok(now) => Ok(now.key == Some((held.dev(), held.ino()))),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            }
        }
        #[cfg(not(unix))]
        {
            super::same_file(held, &self.join(name))
        }
    }

    /// Makes this directory's entries durable (its names: a file made, renamed or removed).
    /// Windows cannot open a directory to sync it, and its renames are durable once they return.
    pub(crate) fn sync(&self) -> io::Result<()> {
        #[cfg(unix)]
        {
            self.handle.sync_all()
        }
        #[cfg(not(unix))]
        {
            Ok(())
        }
    }

    /// The names in this directory: listed by its path, then checked to be this directory's
    /// (`NotFound` when the path leads elsewhere now).
    pub(crate) fn names_listed(&self) -> io::Result<Vec<std::ffi::OsString>> {
        let names =
            std::fs::read_dir(&self.path)?.map(|e| e.map(|e| e.file_name())).collect::<io::Result<_>>()?;
        if !self.still_named()? {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the directory was moved: its path leads elsewhere",
            ));
        }
        Ok(names)
    }

    /// Creates `name` in this directory as a new file for writing, refusing anything already
    /// there, a link included (`O_EXCL`, `O_NOFOLLOW`).
    pub(crate) fn create_new(&self, name: &str) -> io::Result<File> {
        #[cfg(unix)]
        {
            let c = c_name(name)?;
            self.openat(&c, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        }
        #[cfg(not(unix))]
        {
            plain(name)?;
            File::options().read(true).write(true).create_new(true).open(self.join(name))
        }
    }

    /// Renames `from` over `to`, both in this directory.
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let (f, t) = (c_name(from)?, c_name(to)?);
            let fd = self.handle.as_raw_fd();
            // SAFETY: both names are NUL-terminated strings that outlive the call; `fd` is the
            // directory this value owns; the call writes no memory of ours.
            if unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) } == 0 {
                return Ok(());
            }
            Err(io::Error::last_os_error())
        }
        #[cfg(not(unix))]
        {
            plain(from)?;
            plain(to)?;
            std::fs::rename(self.join(from), self.join(to))
        }
    }

    /// Removes `name` from this directory (a link itself, never what it points to).
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let c = c_name(name)?;
            // SAFETY: `c` is a NUL-terminated string that outlives the call; `self.handle` is an
            // open directory this value owns.
            if unsafe { libc::unlinkat(self.handle.as_raw_fd(), c.as_ptr(), 0) } == 0 {
                return Ok(());
            }
            Err(io::Error::last_os_error())
        }
        #[cfg(not(unix))]
        {
            plain(name)?;
            std::fs::remove_file(self.join(name))
        }
    }

    /// [`Dir::open_file`] of whatever the name leads to (a device too: the writer writes where
    /// its chunk files lead).
    #[cfg(unix)]
    pub(crate) fn open_any(&self, name: &str, access: Access) -> io::Result<File> {
        let c = c_name(name)?;
        let mode = match access {
            Access::Read => libc::O_RDONLY,
            Access::ReadWrite => libc::O_RDWR,
            Access::Create => libc::O_RDWR | libc::O_CREAT,
        };
        self.openat(&c, mode | libc::O_CLOEXEC | libc::O_NONBLOCK)
    }

    /// `openat(2)` of `name` in this directory with `flags` (the mode, read only with `O_CREAT`,
    /// 0o666 as the process's umask allows), retried when interrupted.
    #[cfg(unix)]
    fn openat(&self, name: &std::ffi::CStr, flags: libc::c_int) -> io::Result<File> {
        use std::os::fd::{AsRawFd, FromRawFd};
        loop {
            // SAFETY: `name` is a NUL-terminated string that outlives the call; `self.handle` is
            // an open directory this value owns; the mode argument is a `c_uint`, what a
            // variadic `mode_t` is promoted to.
            let fd =
                unsafe { libc::openat(self.handle.as_raw_fd(), name.as_ptr(), flags, 0o666 as libc::c_uint) };
            if fd >= 0 {
                // SAFETY: `fd` was just returned by openat and nothing else owns it.
                return Ok(unsafe { File::from_raw_fd(fd) });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// See the Unix version.
    #[cfg(not(unix))]
    pub(crate) fn open_any(&self, name: &str, access: Access) -> io::Result<File> {
        plain(name)?;
        let mut opts = File::options();
        opts.read(true).write(access != Access::Read).create(access == Access::Create).truncate(false);
        let path = self.join(name);
        // Windows refuses to open a directory as a file with "access denied": it is not a
        // regular file, as the Unix version says.
        super::io::non_blocking(&mut opts).open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::PermissionDenied && path.is_dir() {
                io::Error::new(io::ErrorKind::InvalidInput, "not a regular file")
            } else {
                e
            }
        })
    }
}

/// `name` checked by [`plain`], as the C string the `*at` calls take.
#[cfg(unix)]
fn c_name(name: &str) -> io::Result<std::ffi::CString> {
    plain(name)?;
    std::ffi::CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
}

/// Refuses a name that is not one plain file name of the directory.
fn plain(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a plain file name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix only: there a store holds its directory open. Windows follows a store's directory
    /// by its path (it refuses, in general, to rename a directory holding open files).
    #[cfg(unix)]
    #[test]
    fn a_renamed_directory_keeps_leading_to_its_files() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::write(a.join("f"), b"first").unwrap();
        let dir = Dir::open(&a).unwrap();
        assert!(dir.still_named().unwrap());
        std::fs::rename(&a, &b).unwrap();
        std::fs::create_dir(&a).unwrap();
        std::fs::write(a.join("f"), b"other").unwrap();
        assert!(!dir.still_named().unwrap());
        let mut s = String::new();
        std::io::Read::read_to_string(&mut dir.open_file("f", Access::Read).unwrap(), &mut s).unwrap();
        assert_eq!(s, "first", "the file of the directory opened, not the one at its old name");
        let made = dir.open_file("g", Access::Create).unwrap();
        assert!(b.join("g").exists() && !a.join("g").exists());
        assert!(dir.names(&made, "g").unwrap() && !dir.names(&made, "f").unwrap());
        assert_eq!(dir.path(), a.as_path());
        assert!(
            dir.names_listed().is_err_and(|e| e.kind() == io::ErrorKind::NotFound),
            "listed by a path now elsewhere"
        );
        dir.remove("g").unwrap();
        assert!(!b.join("g").exists());
        drop(dir.create_new("h").unwrap());
        assert_eq!(dir.create_new("h").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        dir.rename("h", "f").unwrap();
        assert!(
            b.join("f").exists() && !b.join("h").exists() && a.join("f").exists(),
            "renamed in b, a untouched"
        );
        assert_eq!(dir.remove("g").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn names_are_plain_and_files_regular() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        for bad in ["", ".", "..", "sub/x", "../x", "a\\b"] {
            assert_eq!(
                dir.open_file(bad, Access::Read).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad}"
            );
        }
        assert_eq!(dir.open_file("sub", Access::Read).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(dir.open_file("missing", Access::Read).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(Dir::open(&tmp.path().join("missing")).is_err_and(|e| e.kind() == io::ErrorKind::NotFound));
    }
}
