//! The block-wise streaming every converter shares: input is read in blocks of at most
//! [`BLOCK_BYTES`] (plus one record), turned to native byte order, checked and appended, so memory
//! does not grow with the input.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::{DType, DatasetWriter, Error, Result, WriteOptions};

/// Input bytes a converter reads per block (rounded up to one whole record).
pub const BLOCK_BYTES: usize = 4 << 20;

/// Decodes windows `0..windows` in order with `decode` (which runs on the caller's thread and may
/// use the rayon pool) while a writer thread of its own hands each decoded window to `write`, in
/// order, one window behind: the writes overlap the decoding of the next windows instead of
/// taking turns with it. The writer runs in a one-thread pool, so the parallel parts of its
/// appends run there rather than queueing behind the decoding on the global pool. At most
/// three windows are held at once (one written, one queued, one decoding).
///
/// The first error wins in window order: a failed write stops the decoding; a failed decode
/// lets the windows before it be written, then is returned.
///
/// # Errors
/// The first error of `decode` or `write`; [`Error::Io`] naming `out` when no thread can be started.
#[cfg(any(feature = "parquet", feature = "images"))]
pub(crate) fn pipelined<T: Send>(
    windows: usize,
    out: &Path,
    mut decode: impl FnMut(usize) -> Result<T>,
    mut write: impl FnMut(usize, T) -> Result<()> + Send,
) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, T)>(1);
    std::thread::scope(|s| {
        let writer = std::thread::Builder::new()
            .name("loaderx-writer".into())
            .spawn_scoped(s, move || -> Result<()> {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .use_current_thread()
                    .build()
                    .map_err(|e| Error::io("start a writer thread", out, std::io::Error::other(e)))?;
                pool.install(move || rx.into_iter().try_for_each(|(k, t)| write(k, t)))
            })
            .map_err(|e| Error::io("start a writer thread", out, e))?;
        let mut decoded = Ok(());
        for k in 0..windows {
            match decode(k) {
                // A closed channel: the writer failed, its error is returned below.
                Ok(t) => {
                    if tx.send((k, t)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    decoded = Err(e);
                    break;
                }
            }
        }
        drop(tx);
        let written = writer.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        written.and(decoded)
    })
}

/// Runs the third-party decoder call `f` on untrusted bytes, turning a panic of it into `Err`
/// with the panic's message: parquet 57 and arrow-ipc 57 index, unwrap and slice on values read
/// from the file (an RLE run past its buffer, a negative column start, a missing thrift field),
/// and a converter's contract is a typed error naming the file, never a crash.
///
/// The panic is not printed: the first call chains a panic hook in front of the one installed
/// (which still reports every other panic, on every thread) that stays silent while this thread
/// is inside `f`, since the message is returned in the error instead.
#[cfg(any(feature = "parquet", feature = "images"))]
pub(crate) fn catch_decoder_panic<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    use std::cell::Cell;
    thread_local! {
        static INSIDE: Cell<u32> = const { Cell::new(0) };
    }
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A thread whose locals are gone is not inside a decoder call.
            if INSIDE.try_with(Cell::get).unwrap_or(0) == 0 {
                previous(info);
            }
        }));
    });
    INSIDE.with(|n| n.set(n.get() + 1));
    // Unwind safety: `f` owns or borrows only the decoder's state, which is dropped unused
    // after a panic; nothing it touched is observed again.
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    INSIDE.with(|n| n.set(n.get() - 1));
    caught.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

/// Records of `item_bytes` per block: at least one, at most [`BLOCK_BYTES`] worth.
pub(crate) fn records_per_block(item_bytes: usize) -> usize {
    (BLOCK_BYTES / item_bytes.max(1)).max(1)
}

/// Turns elements of `elem` bytes stored in the given byte order into native order, in place.
pub(crate) fn to_native(buf: &mut [u8], elem: usize, little_endian: bool) {
    if elem > 1 && little_endian != cfg!(target_endian = "little") {
        for e in buf.chunks_exact_mut(elem) {
            e.reverse();
        }
    }
}

/// Checks that every byte of a `bool` block is 0 or 1; `first` is the element number of `buf[0]`
/// in the input, `data_offset` its byte offset in the file.
pub(crate) fn check_block(dtype: DType, buf: &[u8], path: &Path, first: u64, data_offset: u64) -> Result<()> {
    if dtype != DType::Bool {
        return Ok(());
    }
    match buf.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(at) => Err(Error::BadInput {
            path: path.to_path_buf(),
            reason: format!(
                "bool element {} (byte offset {}) is {}, not 0 or 1",
                first + at as u64,
                data_offset + at as u64,
                buf[at]
            ),
            source: None,
        }),
    }
}

/// Appends a block of whole records of `item_bytes` each (zero-sized items: `count` of them).
pub(crate) fn append_block(w: &mut DatasetWriter, buf: &[u8], item_bytes: usize, count: usize) -> Result<()> {
    if item_bytes == 0 {
        let empty: Vec<&[u8]> = vec![&[]; count];
        w.append_bytes(&empty)
    } else {
        let recs: Vec<&[u8]> = buf.chunks_exact(item_bytes).collect();
        w.append_bytes(&recs)
    }
}

/// A [`Error::BadInput`] naming `path` when axis 0 has more entries than a store of the chosen
/// format holds.
pub(crate) fn check_records(records: usize, path: &Path, opts: &WriteOptions) -> Result<()> {
    let limit = opts.store_format().max_records();
    if records as u64 > limit {
        return Err(Error::BadInput {
            path: path.to_path_buf(),
            reason: format!(
                "axis 0 has {records} entries; a {} store holds at most {limit} records",
                opts.store_format()
            ),
            source: None,
        });
    }
    Ok(())
}

/// The most records of zero-byte items one input may declare. Such records take no bytes of the
/// input but an index entry each in the store, so a header alone (a 128-byte `.npy` of shape
/// `(2^40, 0)`) could otherwise make a conversion write terabytes of index.
pub(crate) const MAX_EMPTY_ITEMS: u64 = 1 << 20;

/// The bytes of one item of `item_shape` (elements of `dtype`), checked against what the input
/// can justify: a [`Error::BadInput`] naming `path` when the item size overflows (a shape such as
/// `(0, 2^32, 2^32, 2^32)` promises no data, so its size was never checked against the file) or
/// when `records` items of zero bytes are more than [`MAX_EMPTY_ITEMS`]: such items hold no data
/// to justify any count.
pub(crate) fn checked_item_bytes(
    records: usize,
    dtype: DType,
    item_shape: &[usize],
    path: &Path,
) -> Result<usize> {
    let bad = |reason: String| Error::BadInput { path: path.to_path_buf(), reason, source: None };
    let bytes = product(item_shape)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| bad(format!("an item of shape {item_shape:?} {dtype} overflows")))?;
    if bytes == 0 && records as u64 > MAX_EMPTY_ITEMS {
        return Err(bad(format!(
            "axis 0 has {records} entries of 0 bytes each: no data backs them, and at most \
             {MAX_EMPTY_ITEMS} records of empty items are converted"
        )));
    }
    Ok(bytes)
}

/// Opens the converter input `path` for reading and returns it with its length, refusing what
/// is not a regular file whose length is its content: converters plan from the length (they map
/// the file or check its data section against it), so a pipe, a terminal, a device or a
/// `/proc` file (which reports 0 bytes) would otherwise read as empty or endless input.
///
/// # Errors
/// [`Error::BadInput`] naming `path` for a file that is not regular or whose reported size of 0
/// hides content; [`Error::Io`] naming it when it cannot be opened or examined.
pub(crate) fn open_input(path: &Path) -> Result<(File, u64)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Without O_NONBLOCK, opening a FIFO waits for a writer that may never come; on a regular
    // file the flag changes nothing. On every Unix, not Linux alone (look 56, M1).
    let file = crate::sys::non_blocking(&mut options).open(path).map_err(|e| Error::io("open", path, e))?;
    let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    let bad = |reason: String| Error::BadInput { path: path.to_path_buf(), reason, source: None };
    if !meta.is_file() {
        let t = meta.file_type();
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_symlink() {
            "a symbolic link"
        } else {
            kind_of_special(&t)
        };
        return Err(bad(format!(
            "{kind}, not a regular file: converters read files whose size is their content (save \
             a stream to a file first)"
        )));
    }
    if meta.len() == 0 {
        let mut probe = [0u8; 1];
        let got = read_at(&file, &mut probe, path)?;
        if got > 0 {
            return Err(bad(
                "it reports a size of 0 bytes but has content (a /proc or /sys file?): converters \
                 read files whose size is their content"
                    .into(),
            ));
        }
    }
    Ok((file, meta.len()))
}

/// The converter input `path` mapped whole, after [`open_input`]'s checks.
///
/// # Errors
/// As [`open_input`]; [`Error::Io`] naming `path` when it cannot be mapped.
pub(crate) fn map_input(path: &Path) -> Result<crate::MappedFile> {
    let (file, len) = open_input(path)?;
    crate::MappedFile::map_prefix(&file, path, len)
}

/// What a file that is neither regular, a directory nor a link is.
#[cfg(unix)]
fn kind_of_special(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a pipe (FIFO)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn kind_of_special(_: &std::fs::FileType) -> &'static str {
    "a special file"
}

/// Reads into `buf` from byte 0 of `file` without moving its position.
fn read_at(file: &File, buf: &mut [u8], path: &Path) -> Result<usize> {
    #[cfg(unix)]
    let got = std::os::unix::fs::FileExt::read_at(file, buf, 0);
    #[cfg(windows)]
    let got = std::os::windows::fs::FileExt::seek_read(file, buf, 0);
    got.map_err(|e| Error::io("read", path, e))
}

/// Where a stream of fixed-size records lies in its input file, for error positions and the
/// truncation message.
pub(crate) struct DataSection<'a> {
    pub(crate) path: &'a Path,
    /// Byte offset of the data in the file (of the decompressed stream for `.gz`).
    pub(crate) offset: u64,
    /// Bytes the header promises.
    pub(crate) expected: u64,
    /// Records of the section before the stream's first (a part's rows start there).
    pub(crate) first: u64,
}

/// Streams `records` records of `item_bytes` bytes (elements of `dtype`, stored little- or
/// big-endian) from `r` into `w` in bounded blocks: each block read, turned to native order,
/// checked and appended. `report` gets the data bytes read so far after every block. `r` stands
/// at record `data.first` of the section (errors name offsets in the whole section).
///
/// # Errors
/// A truncated data section, a bad `bool` byte, read and write errors.
pub(crate) fn stream_records(
    r: &mut impl Read,
    w: &mut DatasetWriter,
    (dtype, little_endian): (DType, bool),
    (records, item_bytes): (usize, usize),
    data: &DataSection<'_>,
    mut report: impl FnMut(u64),
) -> Result<()> {
    let per_block = records_per_block(item_bytes);
    let mut buf = vec![0u8; per_block * item_bytes];
    let mut done = 0usize;
    while done < records {
        let k = per_block.min(records - done);
        let block = &mut buf[..k * item_bytes];
        let got = read_full(r, block, data.path)?;
        let at = (data.first + done as u64) * item_bytes as u64;
        if got < block.len() {
            return Err(truncated(data.path, data.expected, at + got as u64));
        }
        to_native(block, dtype.size(), little_endian);
        check_block(dtype, block, data.path, at / dtype.size() as u64, data.offset + at)?;
        append_block(w, block, item_bytes, k)?;
        done += k;
        report((done * item_bytes) as u64);
    }
    Ok(())
}

/// `a * b * ...` with overflow reported as `None`.
pub(crate) fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// A [`Error::BadInput`] for a data section that ends early.
pub(crate) fn truncated(path: &Path, expected: u64, actual: u64) -> Error {
    Error::BadInput {
        path: path.to_path_buf(),
        reason: format!("data section is truncated: expected {expected} bytes, found {actual}"),
        source: None,
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // Errors from the operating system carry an errno; one without is a decoder (gzip)
            // saying the stream is damaged or cut short.
            Err(e) if e.raw_os_error().is_none() => {
                return Err(Error::BadInput {
                    path: path.to_path_buf(),
                    reason: format!("the stream does not decode after {n} bytes"),
                    source: Some(e.into()),
                });
            }
            Err(e) => return Err(Error::io("read", path, e)),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_native_swaps_only_foreign_order() {
        let mut b = vec![1, 2, 3, 4, 5, 6, 7, 8];
        let native_le = cfg!(target_endian = "little");
        to_native(&mut b, 4, native_le);
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        to_native(&mut b, 4, !native_le);
        assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5]);
        to_native(&mut b, 1, !native_le);
        assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5]);
    }

    #[test]
    fn records_per_block_is_at_least_one() {
        assert_eq!(records_per_block(0), BLOCK_BYTES);
        assert_eq!(records_per_block(BLOCK_BYTES * 2), 1);
        assert_eq!(records_per_block(1024), BLOCK_BYTES / 1024);
    }

    #[test]
    fn check_block_names_the_bad_bool() {
        let e = check_block(DType::Bool, &[0, 1, 7], Path::new("x.npy"), 10, 128).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("element 12") && msg.contains("offset 130"), "{msg}");
        assert!(check_block(DType::U8, &[7], Path::new("x"), 0, 0).is_ok());
    }
}
