//! The page cache: whether a mapped page is resident (`mincore`), reading a range ahead
//! (`madvise(MADV_WILLNEED)`, which starts the reads and returns without waiting), and, for
//! benchmarks and tests, evicting a file's pages and counting its resident ones. Also huge pages
//! for a fresh batch buffer (`madvise(MADV_HUGEPAGE)`), before anything touches it.
//!
//! Linux only: elsewhere a page is always taken as resident (a gather never advises), no buffer
//! is advised, and eviction and counting are [`io::ErrorKind::Unsupported`]. Not built on
//! another system here.
#![cfg_attr(
    target_os = "linux",
    expect(unsafe_code, reason = "mincore, madvise and posix_fadvise are foreign functions")
)]

use std::fs::File;
use std::io;
use std::path::Path;

use super::tuning::HUGE_PAGES_FROM_BYTES;
use crate::{Error, Result};

/// Pages of a file or directory in the page cache, and pages it occupies
/// ([`resident_pages`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageCount {
    /// Pages in the page cache.
    pub resident: u64,
    /// Pages the files' bytes span (each file rounded up to whole pages).
    pub total: u64,
}

/// The system's page size (4096 where it cannot be asked).
pub(crate) fn page_size() -> usize {
    #[cfg(target_os = "linux")]
    {
        static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        *PAGE.get_or_init(|| usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096))
    }
    #[cfg(not(target_os = "linux"))]
    {
        4096
    }
}

/// Whether the page holding `ptr` (inside a live mapping) is in the page cache. An error of
/// `mincore` reads as resident: the caller then does what it does for resident pages.
#[inline]
pub(crate) fn page_resident(ptr: *const u8) -> bool {
    #[cfg(target_os = "linux")]
    {
        let page = ptr.wrapping_sub(ptr as usize & (page_size() - 1));
        let mut v = 0u8;
        // SAFETY: `page` is the start of the page holding `ptr`, which lies in a live mapping
        // (the caller's contract), so the one page asked about is mapped; `v` receives one byte
        // per page, one page here. mincore reads no memory of the mapping.
        let r = unsafe { libc::mincore(page.cast_mut().cast(), 1, &raw mut v) };
        r != 0 || v & 1 == 1
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = ptr;
        true
    }
}

/// Asks for transparent huge pages under the whole 2 MiB pages of a fresh buffer of `len` bytes
/// at `ptr` (allocated, not yet written: the advice applies to pages faulted in after it), when
/// it is at least [`HUGE_PAGES_FROM_BYTES`]. Returns whether the kernel took the advice; it
/// ignores it where huge pages are off (`transparent_hugepage/enabled` "never").
///
/// Every batch of a consumer that keeps its buffers (a burn `TensorData`, a candle tensor)
/// lands on fresh pages: with 4 KiB pages their faults cost the pipeline a fifth of its time.
pub(crate) fn advise_huge_pages(ptr: *const u8, len: usize) -> bool {
    const HUGE: usize = 2 << 20;
    if len < HUGE_PAGES_FROM_BYTES {
        return false;
    }
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize).saturating_add(len) & !(HUGE - 1);
    if end <= start {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `start..end` lies inside the caller's allocation of `len` bytes at `ptr` (rounded
        // inwards to whole 2 MiB pages), which stays allocated across the call; MADV_HUGEPAGE
        // changes how later faults are served, never the memory's contents or its mapping.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Whether the mapping holding `ptr` was advised huge pages (`hg` in its `/proc/self/smaps`
/// flags): for tests.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn advised_huge(ptr: *const u8) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ')
            && let Some((a, b)) = range.split_once('-')
            && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
        {
            inside = (a..b).contains(&(ptr as usize));
        } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
            return flags.split_whitespace().any(|f| f == "hg");
        }
    }
    false
}

/// Evicts `path` (a file, or every file under a directory) from the page cache: its dirty pages
/// written first (so none is kept back), then `posix_fadvise(DONTNEED)`. No privilege is
/// needed; pages another process has mapped and locked may stay.
///
/// # Errors
/// [`Error::Io`] naming the file that cannot be opened, synced or advised;
/// [`io::ErrorKind::Unsupported`] off Linux.
pub fn evict(path: impl AsRef<Path>) -> Result<()> {
    each_file(path.as_ref(), &mut |p, f| {
        f.sync_data().map_err(|e| Error::io("sync", p, e))?;
        fadvise_dontneed(f).map_err(|e| Error::io("posix_fadvise", p, e))
    })
}

/// Counts the pages of `path` (a file, or every file under a directory) in the page cache.
///
/// # Errors
/// [`Error::Io`] naming the file that cannot be opened or mapped;
/// [`io::ErrorKind::Unsupported`] off Linux.
pub fn resident_pages(path: impl AsRef<Path>) -> Result<PageCount> {
    let mut count = PageCount::default();
    each_file(path.as_ref(), &mut |p, f| {
        let c = file_resident(p, f)?;
        count.resident += c.resident;
        count.total += c.total;
        Ok(())
    })?;
    Ok(count)
}

/// Calls `f` with every regular file at or under `path`, in no fixed order.
fn each_file(path: &Path, f: &mut dyn FnMut(&Path, &File) -> Result<()>) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io("stat", path, e))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| Error::io("read dir", path, e))? {
            let entry = entry.map_err(|e| Error::io("read dir", path, e))?;
            each_file(&entry.path(), f)?;
        }
        Ok(())
    } else if meta.is_file() {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        f(path, &file)
    } else {
        Ok(())
    }
}

#[cfg(target_os = "linux")]
fn fadvise_dontneed(f: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain call on a file descriptor that `f` keeps open; no memory is passed.
    match unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

#[cfg(not(target_os = "linux"))]
fn fadvise_dontneed(_: &File) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// The resident and total pages of one file, asked through a mapping a window at a time.
fn file_resident(path: &Path, file: &File) -> Result<PageCount> {
    let map = super::map::MappedFile::open_file(file, path)?;
    let page = page_size();
    let bytes = map.bytes();
    let total = bytes.len().div_ceil(page);
    let mut resident = 0u64;
    const WINDOW: usize = 1 << 30;
    for start in (0..bytes.len()).step_by(WINDOW) {
        let len = WINDOW.min(bytes.len() - start);
        resident += window_resident(&bytes[start..start + len]).map_err(|e| Error::io("mincore", path, e))?;
    }
    Ok(PageCount { resident, total: total as u64 })
}

#[cfg(target_os = "linux")]
fn window_resident(window: &[u8]) -> io::Result<u64> {
    let mut vec = vec![0u8; window.len().div_ceil(page_size())];
    // SAFETY: `window` is a page-aligned part of a live mapping (it starts at the mapping's start
    // plus a multiple of 1 GiB); `vec` holds one byte for each of its pages. mincore reads none
    // of the mapped bytes.
    let r = unsafe { libc::mincore(window.as_ptr().cast_mut().cast(), window.len(), vec.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 == 1).count() as u64)
}

#[cfg(not(target_os = "linux"))]
fn window_resident(_: &[u8]) -> io::Result<u64> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Whether this system shows the advice in `/proc/self/smaps`, asked of a buffer advised here:
/// not under qemu-user (the cross-test stage), which takes `madvise` and shows no flag. The tests
/// that look for the advice ask first.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn advice_visible() -> bool {
    let probe = vec![0u8; HUGE_PAGES_FROM_BYTES + (4 << 20)];
    let seen =
        advise_huge_pages(probe.as_ptr(), probe.len()) && advised_huge(probe[probe.len() / 2..].as_ptr());
    if !seen {
        eprintln!("huge-page advice is not visible in /proc/self/smaps here (an emulator?): not checked");
    }
    seen
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn only_a_large_fresh_buffer_is_advised_huge_pages() {
        let small = vec![0u8; HUGE_PAGES_FROM_BYTES - 1];
        assert!(!advise_huge_pages(small.as_ptr(), small.len()), "a small buffer is left as it is");
        if !advice_visible() {
            return;
        }
        // (Whether it was advised before is not asked: after the probe's free, glibc may serve
        // this one from a heap another buffer's advice already covers.)
        let big = vec![0u8; HUGE_PAGES_FROM_BYTES + (4 << 20)];
        assert!(advise_huge_pages(big.as_ptr(), big.len()), "the kernel took the advice");
        assert!(advised_huge(big[big.len() / 2..].as_ptr()), "the buffer's middle is advised");
    }
}
