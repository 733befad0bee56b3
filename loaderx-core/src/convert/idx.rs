//! MNIST IDX files, plain or gzip-compressed.

use std::io::{BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::block::{
    DataSection, check_records, checked_item_bytes, open_input, product, read_full, stream_records, truncated,
};
use super::part::Part;
use super::summary::{ConvertSummary, finish};
use crate::{DType, DatasetWriter, Error, Result, Schema, WriteOptions};

/// The header of an IDX file: two zero bytes, a type byte, the number of dimensions, then each
/// dimension as a big-endian `u32`. The data that follows is big-endian.
///
/// Type bytes: `0x08` u8, `0x09` i8, `0x0B` i16, `0x0C` i32, `0x0D` f32, `0x0E` f64. MNIST labels
/// are `0x00000801` (1-D u8), images `0x00000803` (N×28×28 u8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxHeader {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, axis 0 first.
    pub dims: Vec<usize>,
}

impl IdxHeader {
    /// The header's size in bytes, from its first 4 bytes.
    pub fn len_from_magic(magic: [u8; 4]) -> usize {
        4 + 4 * usize::from(magic[3])
    }

    /// Parses a header from `bytes` (at least [`IdxHeader::len_from_magic`] bytes). Never panics.
    ///
    /// # Errors
    /// A sentence naming the byte offset of the problem.
    pub fn parse(bytes: &[u8]) -> std::result::Result<IdxHeader, String> {
        let magic = bytes.get(..4).ok_or("byte 0: file ends inside the 4-byte magic")?;
        if magic[0] != 0 || magic[1] != 0 {
            return Err(format!(
                "byte 0: magic {:02x}{:02x} is not an IDX file (must start 0000)",
                magic[0], magic[1]
            ));
        }
        let dtype = match magic[2] {
            0x08 => DType::U8,
            0x09 => DType::I8,
            0x0B => DType::I16,
            0x0C => DType::I32,
            0x0D => DType::F32,
            0x0E => DType::F64,
            t => return Err(format!("byte 2: unknown IDX type byte 0x{t:02x}")),
        };
        let ndims = usize::from(magic[3]);
        if ndims == 0 {
            return Err("byte 3: an IDX file needs at least one dimension".into());
        }
        let dims = (0..ndims)
            .map(|i| {
                let at = 4 + 4 * i;
                bytes
                    .get(at..at + 4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .ok_or_else(|| format!("byte {at}: file ends inside dimension {i}"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if product(&dims).and_then(|n| n.checked_mul(dtype.size())).is_none() {
            return Err(format!("dimensions {dims:?} overflow"));
        }
        Ok(IdxHeader { dtype, dims })
    }
}

/// Counts the bytes read through it (the compressed bytes under a gzip decoder).
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Converts the IDX file `input` (gzip-compressed or not: detected by the magic bytes `1f 8b`)
/// into a dense dataset at `out`: one record per entry of axis 0, item shape the remaining
/// dimensions (`[]` for labels, `[28, 28]` for MNIST images), big-endian data turned to native
/// order.
///
/// Progress is reported in bytes of the file as stored (compressed for `.gz`); the summary's
/// `bytes_in` counts the decompressed data.
///
/// # Errors
/// [`Error::BadInput`] naming `input` for a bad header, a truncated data section (expected vs
/// actual bytes), trailing bytes, a corrupt gzip stream, more than 2^20 records of zero-byte items
/// or an input that is not a regular file; otherwise as [`crate::convert::npy`].
pub fn idx(input: impl AsRef<Path>, out: impl AsRef<Path>, opts: WriteOptions) -> Result<ConvertSummary> {
    idx_part(input, out, opts, Part::WHOLE)
}

/// [`idx`] of only part `part` of the rows: the records [`Part::rows`] of axis 0, the same
/// records as the whole conversion's there, after the same checks of the whole file (its
/// header, its length, and for `.gz` the whole decompressed stream: a gzip stream is read
/// from its start, so the rows before the part are decompressed and dropped, and those after
/// it too, to find trailing bytes). A part of no rows is an empty dataset of the item shape.
///
/// # Errors
/// As [`idx`]; [`Error::InvalidArgument`] for a part out of range.
pub fn idx_part(
    input: impl AsRef<Path>,
    out: impl AsRef<Path>,
    opts: WriteOptions,
    part: Part,
) -> Result<ConvertSummary> {
    let part = part.checked()?;
    let (input, out) = (input.as_ref(), out.as_ref());
    let bad = |reason: String| Error::BadInput { path: input.to_path_buf(), reason, source: None };
    let (file, file_len) = open_input(input)?;
    let consumed = Arc::new(AtomicU64::new(0));
    let mut raw = BufReader::with_capacity(1 << 20, Counting { inner: file, count: consumed.clone() });
    let mut magic = [0u8; 2];
    let n = read_full(&mut raw, &mut magic, input)?;
    let chained = std::io::Cursor::new(magic[..n].to_vec()).chain(raw);
    let gz = n == 2 && magic == [0x1f, 0x8b];
    let mut r: Box<dyn Read> = if gz {
        Box::new(BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(chained)))
    } else {
        Box::new(chained)
    };

    let mut head = [0u8; 4];
    let got = read_full(&mut r, &mut head, input)?;
    if got < 4 {
        return Err(bad(format!("byte {got}: file ends inside the 4-byte magic")));
    }
    let mut hbytes = head.to_vec();
    hbytes.resize(IdxHeader::len_from_magic(head), 0);
    let got = read_full(&mut r, &mut hbytes[4..], input)?;
    if got + 4 < hbytes.len() {
        return Err(bad(format!("byte {}: file ends inside the {}-byte header", got + 4, hbytes.len())));
    }
    let h = IdxHeader::parse(&hbytes).map_err(bad)?;
    let header_len = hbytes.len() as u64;
    let (records, item_shape) = (h.dims[0], h.dims[1..].to_vec());
    check_records(records, input, &opts)?;
    let item_bytes = checked_item_bytes(records, h.dtype, &item_shape, input)?;
    let schema = Schema::dense(h.dtype, item_shape);
    let expected = (records as u64) * item_bytes as u64;
    let data_len = file_len.saturating_sub(header_len);
    if !gz && data_len < expected {
        return Err(truncated(input, expected, data_len));
    }
    if !gz && data_len > expected {
        return Err(bad(format!("trailing bytes after the {expected}-byte data section")));
    }
    let rows = part.rows(records as u64);
    let (before, count) = (rows.start * item_bytes as u64, (rows.end - rows.start) as usize);
    let mut w = DatasetWriter::with_schema(out, schema, opts.clone())?;
    skip(&mut r, (0, before), input, expected)?;
    let data = DataSection { path: input, offset: header_len, expected, first: rows.start };
    stream_records(&mut r, &mut w, (h.dtype, false), (count, item_bytes), &data, |_| {
        opts.report(consumed.load(Ordering::Relaxed))
    })?;
    if gz {
        // Only a whole stream shows whether it is as long as its header says.
        let end = rows.end * item_bytes as u64;
        skip(&mut r, (end, expected - end), input, expected)?;
        let mut extra = [0u8; 1];
        if read_full(&mut r, &mut extra, input)? != 0 {
            return Err(bad(format!("trailing bytes after the {expected}-byte data section")));
        }
    }
    finish(w, count as u64 * item_bytes as u64)
}

/// Reads and drops the `n` bytes at `at` of the data section (of `expected` bytes) of `input`.
fn skip(r: &mut impl Read, (at, n): (u64, u64), input: &Path, expected: u64) -> Result<()> {
    let dropped = std::io::copy(&mut r.take(n), &mut std::io::sink()).map_err(|e| {
        // As read_full says it: an error with no errno is the decoder's.
        if e.raw_os_error().is_none() {
            Error::BadInput {
                path: input.to_path_buf(),
                reason: "the stream does not decode".into(),
                source: Some(e.into()),
            }
        } else {
            Error::io("read", input, e)
        }
    })?;
    if dropped < n {
        return Err(truncated(input, expected, at + dropped));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mnist_magics() {
        let labels = [0, 0, 8, 1, 0, 0, 0x1f, 0x40];
        let h = IdxHeader::parse(&labels).unwrap();
        assert_eq!((h.dtype, h.dims.as_slice()), (DType::U8, &[8000][..]));
        let images = [0, 0, 8, 3, 0, 0, 0x07, 0xd0, 0, 0, 0, 28, 0, 0, 0, 28];
        assert_eq!(IdxHeader::len_from_magic([0, 0, 8, 3]), 16);
        assert_eq!(IdxHeader::parse(&images).unwrap().dims, vec![2000, 28, 28]);
    }

    #[test]
    fn rejects_bad_headers() {
        let says =
            |bytes: &[u8], start: &str| matches!(IdxHeader::parse(bytes), Err(m) if m.starts_with(start));
        assert!(says(&[1, 0, 8, 1, 0, 0, 0, 1], "byte 0: magic 0100 is not an IDX file"));
        assert!(says(&[0, 0, 0x0A, 1, 0, 0, 0, 1], "byte 2: unknown IDX type byte 0x0a"));
        assert!(says(&[0, 0, 8, 0], "byte 3: an IDX file needs at least one dimension"));
        assert!(says(&[0, 0, 8, 2, 0, 0, 0, 1], "byte 8: file ends inside dimension 1"));
        assert!(says(&[0, 0], "byte 0: file ends inside the 4-byte magic"));
    }
}
