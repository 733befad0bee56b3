//! Positional file I/O and file identity: the only platform-specific code of the crate, with a
//! Unix and a Windows implementation of each function (the Windows ones are written against
//! `std::os::windows` and not built on a Windows machine here).

use std::fs::File;
use std::io;
use std::path::Path;

/// Reads exactly `buf.len()` bytes at `offset` of `file`, without moving any cursor shared with
/// other threads. A short file is `ErrorKind::UnexpectedEof`.
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match read_at(file, buf, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf` at `offset` of `file`, without moving any cursor shared with other threads.
pub(crate) fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match write_at(file, buf, offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, buf, offset)
}

// `seek_read` / `seek_write` move the handle's cursor as a side effect; nothing in the crate uses
// a chunk or meta handle's cursor, so that is harmless.
#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(windows)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_write(file, buf, offset)
}

/// Whether `path` names the file `file` has open (the same device and inode).
#[cfg(unix)]
pub(crate) fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(now) => Ok(held.dev() == now.dev() && held.ino() == now.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `path` names the file `file` has open. Windows does not remove a file that another
/// handle holds open until that handle closes, so a path that still exists is the file we hold.
#[cfg(not(unix))]
pub(crate) fn same_file(_file: &File, path: &Path) -> io::Result<bool> {
    path.try_exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positional_writes_and_reads_round_trip_and_short_reads_are_eof() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        write_all_at(&f, b"world", 6).unwrap();
        write_all_at(&f, b"hello ", 0).unwrap();
        let mut buf = [0u8; 11];
        read_exact_at(&f, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello world");
        let mut past = [0u8; 4];
        assert_eq!(read_exact_at(&f, &mut past, 9).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[cfg(unix)]
    #[test]
    fn a_removed_or_replaced_path_is_not_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let orphan = File::create(&path).unwrap();
        assert!(same_file(&orphan, &path).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert!(!same_file(&orphan, &path).unwrap());
        std::fs::write(&path, b"").unwrap();
        assert!(!same_file(&orphan, &path).unwrap());
        assert!(same_file(&File::open(&path).unwrap(), &path).unwrap());
    }
}
