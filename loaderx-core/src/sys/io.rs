//! Positional file I/O and file identity: the only platform-specific code of the crate, with a
//! Unix and a Windows implementation of each function (the Windows ones are written against
//! `std::os::windows` and `windows-sys`, cross-built here and run under Wine, never on Windows).
#![cfg_attr(
    target_os = "linux",
    expect(unsafe_code, reason = "pwritev, sync_file_range and lseek are foreign functions")
)]
#![cfg_attr(windows, expect(unsafe_code, reason = "GetFileInformationByHandle is a foreign function"))]

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

/// One positional read (`pread`): the file's cursor untouched, a pipe refused (`ESPIPE`) with
/// nothing read from it.
#[cfg(unix)]
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, buf, offset)
}

// `seek_read` / `seek_write` move the handle's cursor as a side effect; nothing in the crate uses
// a chunk or meta handle's cursor, so that is harmless.
#[cfg(windows)]
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

#[cfg(windows)]
fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_write(file, buf, offset)
}

/// Writes `records` back to back at `offset` of `file`, from where they lie: one positional
/// vectored write (`pwritev`) per [`MAX_RUNS`] runs, records adjacent in memory (the slices of
/// one buffer) written as one run. The bytes go into the page cache with no copy in between.
#[cfg(target_os = "linux")]
pub(crate) fn write_records_at<'a>(
    file: &File,
    records: impl IntoIterator<Item = &'a [u8]>,
    mut offset: u64,
) -> io::Result<()> {
    let mut runs: Vec<libc::iovec> = Vec::with_capacity(64);
    for r in records {
        if r.is_empty() {
            continue;
        }
        let start = r.as_ptr() as usize;
        match runs.last_mut() {
            // The two ranges are each readable for `'a`; their union is the same bytes.
            Some(last) if last.iov_base as usize + last.iov_len == start => last.iov_len += r.len(),
            _ => {
                if runs.len() == MAX_RUNS {
                    offset = write_runs(file, &mut runs, offset)?;
                }
                runs.push(libc::iovec { iov_base: r.as_ptr().cast_mut().cast(), iov_len: r.len() });
            }
        }
    }
    write_runs(file, &mut runs, offset)?;
    Ok(())
}

/// Runs per `pwritev` (Linux's `IOV_MAX`).
#[cfg(target_os = "linux")]
const MAX_RUNS: usize = 1024;

/// Writes every run of `runs` at `offset`, emptying `runs`; returns the offset after them.
#[cfg(target_os = "linux")]
fn write_runs(file: &File, runs: &mut Vec<libc::iovec>, mut offset: u64) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut first = 0;
    while first < runs.len() {
        let left = &runs[first..];
        let at = libc::off_t::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: every iovec names bytes of a slice the caller borrows for the whole call
        // (adjacent slices merged: still bytes it may read), at most MAX_RUNS of them; the
        // kernel only reads them.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), left.as_ptr(), left.len() as libc::c_int, at) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        let mut n = n as usize;
        offset += n as u64;
        // Skip the runs written whole; a run written in part resumes after its written bytes.
        while n > 0 {
            let run = &mut runs[first];
            if n >= run.iov_len {
                n -= run.iov_len;
                first += 1;
            } else {
                run.iov_base = run.iov_base.cast::<u8>().wrapping_add(n).cast();
                run.iov_len -= n;
                n = 0;
            }
        }
    }
    runs.clear();
    Ok(offset)
}

/// Writes `records` back to back at `offset` of `file` (copied into one buffer: no vectored
/// positional write here).
#[cfg(not(target_os = "linux"))]
pub(crate) fn write_records_at<'a>(
    file: &File,
    records: impl IntoIterator<Item = &'a [u8]>,
    offset: u64,
) -> io::Result<()> {
    let mut buf = Vec::new();
    for r in records {
        buf.extend_from_slice(r);
    }
    write_all_at(file, &buf, offset)
}

/// Starts writing `len` bytes of `file` at `offset` back to the disk without waiting for them, so
/// that a later `fdatasync` finds them written or on the way (Linux `sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`). A hint: an error is ignored, and on other systems it does nothing,
/// the later sync writes everything.
///
/// Only the whole [`WRITEBACK_ALIGN`] blocks of the range are started: a page under writeback
/// cannot be written until its writeback ends, so the block the writer is still filling is left
/// alone (page-cache folios are at most that large and aligned to their size).
#[cfg(target_os = "linux")]
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let start = offset / WRITEBACK_ALIGN * WRITEBACK_ALIGN;
    let end = offset.saturating_add(len) / WRITEBACK_ALIGN * WRITEBACK_ALIGN;
    if end <= start {
        return;
    }
    let (Ok(offset), Ok(len)) = (i64::try_from(start), i64::try_from(end - start)) else { return };
    // SAFETY: a plain system call on a descriptor `file` keeps open for the call's duration; it
    // reads and writes no memory of this process.
    let _ = unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
}

/// The first hole (never-written bytes of a sparse file) at or after `from`, or `None` when the
/// file holds data from `from` to its end (or the file system cannot tell: then it says so by
/// reporting the whole file as data).
#[cfg(target_os = "linux")]
pub(crate) fn first_hole(file: &File, from: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let end = file.metadata().ok()?.len();
    let at = libc::off_t::try_from(from).ok()?;
    // SAFETY: a plain system call on a descriptor `file` keeps open for the call's duration; it
    // moves only the descriptor's file position, which nothing here reads from (all I/O is
    // positional).
    let hole = unsafe { libc::lseek(file.as_raw_fd(), at, libc::SEEK_HOLE) };
    u64::try_from(hole).ok().filter(|&h| h < end)
}

/// Other systems are not asked (unbuilt here): no hole is reported.
#[cfg(not(target_os = "linux"))]
pub(crate) fn first_hole(_file: &File, _from: u64) -> Option<u64> {
    None
}

/// The granularity of [`start_writeback`]: the largest page-cache folio (2 MiB).
#[cfg(target_os = "linux")]
const WRITEBACK_ALIGN: u64 = 2 << 20;

/// Does nothing here: the later sync writes everything (see the Linux version).
#[cfg(not(target_os = "linux"))]
pub(crate) fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

/// `opts` made to refuse a symbolic link as the path's last component (`O_NOFOLLOW`): a store's
/// writer never writes through a link planted in its directory. Sets the custom flags: with
/// `O_NONBLOCK` too, [`no_follow_non_blocking`]. Elsewhere the options are
/// returned as they are (a Windows symbolic link needs a privilege to create; unchecked here).
#[cfg(target_os = "linux")]
pub(crate) fn no_follow(opts: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    opts.custom_flags(libc::O_NOFOLLOW)
}

/// See the Linux version: other platforms are not built here, so they keep std's behaviour.
#[cfg(not(target_os = "linux"))]
pub(crate) fn no_follow(opts: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    opts
}

/// [`no_follow`] and [`non_blocking`] at once (each sets the open's custom flags, replacing
/// the other's: they do not compose).
pub(crate) fn no_follow_non_blocking(opts: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
    }
    #[cfg(not(target_os = "linux"))]
    non_blocking(opts)
}

/// `opts` made never to wait in the open itself (`O_NONBLOCK`, which changes nothing for a
/// regular file's reads and writes): a FIFO planted under a store file's name would otherwise
/// block the open until its other end is opened.
pub(crate) fn non_blocking(opts: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    opts
}

/// Opens `path` with `opts` and refuses anything but a regular file (a link to one is followed).
/// The open never waits (`O_NONBLOCK`, which changes nothing for a regular file): a FIFO planted
/// under a store file's name would otherwise block the open until someone writes to it.
///
/// # Errors
/// The open's error; `InvalidInput` for a FIFO, a device, a socket or a directory.
pub(crate) fn open_regular(opts: &mut std::fs::OpenOptions, path: &Path) -> io::Result<File> {
    let file = non_blocking(opts).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

/// How many names `file` has (its hard links); 1 where the platform does not say.
#[cfg(unix)]
pub(crate) fn link_count(file: &File) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.nlink())
}

/// See the Unix version: other platforms report one name.
#[cfg(not(unix))]
pub(crate) fn link_count(_file: &File) -> io::Result<u64> {
    Ok(1)
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

/// Whether `path` names the file `file` has open: the same volume and file index (a path that
/// merely exists is not enough: std opens files sharing deletion, so a held file's name can be
/// removed and made again; issue 46).
#[cfg(windows)]
pub(crate) fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::windows::fs::OpenOptionsExt;
    // No access asked (a directory opens too, with backup semantics); std shares everything.
    const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
    let now = match std::fs::OpenOptions::new()
        .access_mode(0)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    Ok(file_key(file)? == file_key(&now)?)
}

/// Whether `path` names the file `file` has open: where no file identity is known, whether the
/// path still exists.
#[cfg(not(any(unix, windows)))]
pub(crate) fn same_file(_file: &File, path: &Path) -> io::Result<bool> {
    path.try_exists()
}

/// What tells the file `file` has open from every other on this machine, however it was named
/// (its device and inode); `None` where the platform gives no such key to stable Rust, and the
/// caller compares canonical paths instead.
#[cfg(unix)]
pub(crate) fn file_key(file: &File) -> io::Result<Option<(u64, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata()?;
    Ok(Some((m.dev(), m.ino())))
}

/// See the Unix version: on Windows the volume's serial number and the file's index.
#[cfg(windows)]
pub(crate) fn file_key(file: &File) -> io::Result<Option<(u64, u64)>> {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle};
    // SAFETY: the struct is integers only, for which all zeroes is a value.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is `file`'s, open for the call; `info` is the struct the call fills.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &raw mut info) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    Ok(Some((u64::from(info.dwVolumeSerialNumber), index)))
}

/// See the Unix version.
#[cfg(not(any(unix, windows)))]
pub(crate) fn file_key(_file: &File) -> io::Result<Option<(u64, u64)>> {
    Ok(None)
}

/// [`file_key`] of what `meta` describes (a path's metadata, links followed or not).
#[cfg(all(unix, feature = "images"))]
pub(crate) fn meta_key(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

/// See the Unix version.
#[cfg(all(not(unix), feature = "images"))]
pub(crate) fn meta_key(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// When what `meta` describes last changed (its inode: a rename of it, an entry made or removed
/// in a directory), to the nanosecond; `None` where the platform gives none to stable Rust.
#[cfg(all(unix, feature = "images"))]
pub(crate) fn meta_changed(meta: &std::fs::Metadata) -> Option<(i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.ctime(), meta.ctime_nsec()))
}

/// See the Unix version.
#[cfg(all(not(unix), feature = "images"))]
pub(crate) fn meta_changed(_meta: &std::fs::Metadata) -> Option<(i64, i64)> {
    None
}

/// `renameat2(2)` of `from` to `to` with `flags`: `Ok(true)` done, `Ok(false)` where the kernel
/// or the file system has no such call or flag (EINVAL, ENOSYS), else its error.
#[cfg(target_os = "linux")]
fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let nul = |_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte");
    let f = CString::new(from.as_os_str().as_bytes()).map_err(nul)?;
    let t = CString::new(to.as_os_str().as_bytes()).map_err(nul)?;
    // SAFETY: both pointers are NUL-terminated strings that outlive the call; AT_FDCWD
    // resolves relative paths as rename(2) does; the call writes no memory of ours. The
    // system call itself, not libc's wrapper: musl before 1.2.5 has none (issue 46).
    let rc = unsafe {
        libc::syscall(libc::SYS_renameat2, libc::AT_FDCWD, f.as_ptr(), libc::AT_FDCWD, t.as_ptr(), flags)
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) { Ok(false) } else { Err(e) }
}

/// Swaps the names `a` and `b` (both there) in one step: `Ok(true)` on Linux (`renameat2` with
/// `RENAME_EXCHANGE`), `Ok(false)` where the platform or the file system has no such call (the
/// caller renames twice then). A dataset replaced this way is never without its name, not even
/// for a crash between two renames (look 104, L104-3).
pub(crate) fn rename_exchange(a: &Path, b: &Path) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    return renameat2(a, b, libc::RENAME_EXCHANGE);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (a, b);
        Ok(false)
    }
}

/// Renames `from` to `to` unless something is at `to` (`AlreadyExists` then): atomically on
/// Linux (`renameat2` with `RENAME_NOREPLACE`); elsewhere, or on a file system without the
/// flag, `to` is looked at first and the rename follows (a window between the two remains).
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    if renameat2(from, to, libc::RENAME_NOREPLACE)? {
        return Ok(());
    }
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(io::Error::from(io::ErrorKind::AlreadyExists));
    }
    // Another rename may land between the look and this one: where the platform refuses to
    // rename a directory over another (Windows: "access denied"), that is what it says.
    std::fs::rename(from, to).map_err(|e| {
        if from.is_dir() && std::fs::symlink_metadata(to).is_ok() {
            io::Error::from(io::ErrorKind::AlreadyExists)
        } else {
            e
        }
    })
}

/// Creates a temporary file of this process's own in `dir`, `.NAME.PID.N.SUFFIX` (the first `N`
/// free): created exclusively, so it is never a file that was there (a user's, another
/// writer's) and never a link planted under a predictable name.
pub(crate) fn create_own_temporary(
    dir: &Path,
    name: &std::ffi::OsStr,
    suffix: &str,
) -> io::Result<(std::path::PathBuf, File)> {
    for n in 0u32..64 {
        let mut tmp = std::ffi::OsString::from(".");
        tmp.push(name);
        tmp.push(format!(".{}.{n}.{suffix}", std::process::id()));
        let path = dir.join(tmp);
        match File::options().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

/// Whether `e` says the process ran out of something (descriptors, memory) or may not read a
/// file: a failure of the reader, not damage of what it reads. A scan for damage stops on it.
pub(crate) fn is_a_readers_failure(e: &io::Error) -> bool {
    // EMFILE and ENFILE (Unix), ERROR_TOO_MANY_OPEN_FILES (Windows): no std kind names them.
    #[cfg(unix)]
    let out_of_files = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
    #[cfg(windows)]
    let out_of_files = e.raw_os_error() == Some(4);
    #[cfg(not(any(unix, windows)))]
    let out_of_files = false;
    out_of_files || matches!(e.kind(), io::ErrorKind::OutOfMemory | io::ErrorKind::PermissionDenied)
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

    #[test]
    fn records_written_from_where_they_lie_land_back_to_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::create_new(dir.path().join("f")).unwrap();
        // Slices of one buffer (adjacent: merged into runs), separate buffers, empty records, and
        // more runs than one vectored write takes.
        let one: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let others: Vec<Vec<u8>> = (0..3000).map(|k| vec![(k % 251) as u8; k % 7]).collect();
        let mut records: Vec<&[u8]> = one.chunks(37).collect();
        records.insert(5, &[]);
        for (k, o) in others.iter().enumerate() {
            records.insert((k * 3) % records.len(), o);
        }
        write_records_at(&f, records.iter().copied(), 100).unwrap();
        let expect: Vec<u8> = records.concat();
        let mut back = vec![0u8; expect.len()];
        read_exact_at(&f, &mut back, 100).unwrap();
        assert_eq!(back, expect);
        assert_eq!(f.metadata().unwrap().len(), 100 + expect.len() as u64);
    }

    /// Another file at a path is not the file held (on Windows the check was once "the path
    /// exists": issue 46), nor is a path with nothing there.
    #[test]
    fn another_file_is_not_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let held = File::create(&a).unwrap();
        File::create(&b).unwrap();
        assert!(same_file(&held, &a).unwrap());
        assert!(!same_file(&held, &b).unwrap());
        assert!(!same_file(&held, &dir.path().join("c")).unwrap());
        assert_ne!(file_key(&held).unwrap(), file_key(&File::open(&b).unwrap()).unwrap());
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
