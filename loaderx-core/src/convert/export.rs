//! Datasets out to other formats: `.npy`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::block::{records_per_block, to_native};
use super::npy::NpyHeader;
use crate::store::write_atomic_with;
use crate::{DType, DenseSource, Error, Result};

/// Writes the dense dataset in `dataset` as the `.npy` file `out`: shape `(len, *item_shape)`,
/// little-endian type string, C order, with the header laid out exactly as NumPy writes it, so a
/// little-endian `.npy` converted with [`crate::convert::npy`] comes back byte for byte.
/// Returns the number of records.
///
/// Records are read in blocks of a few MiB; the file is written beside `out` and renamed into
/// place when complete, so a failure leaves no partial `out`.
///
/// # Errors
/// [`Error::AlreadyExists`] when `out` exists and `overwrite` is false; [`Error::Schema`] for a
/// ragged dataset or one without schema; [`Error::InvalidArgument`] for bfloat16 (NumPy has no
/// type string for it); the store's gather errors; [`Error::Io`] naming the file.
pub fn npy(dataset: impl AsRef<Path>, out: impl AsRef<Path>, overwrite: bool) -> Result<u64> {
    let out = out.as_ref();
    if out.exists() && !overwrite {
        return Err(Error::AlreadyExists { path: out.to_path_buf() });
    }
    let src = DenseSource::open(dataset)?;
    if src.schema().unit_bytes() == 0
        && let Some(store) = src.store()
        && store.stats()?.logical_bytes > 0
    {
        // Items of no bytes would export as an empty array while the records hold data: the
        // schema does not describe this store.
        return Err(Error::Schema {
            path: src.path().to_path_buf(),
            reason: format!(
                "the schema's items ({:?} {}) are 0 bytes, but the records hold bytes",
                src.item_shape(),
                src.dtype()
            ),
        });
    }
    let header = NpyHeader::encode(src.dtype(), &src.batch_shape(src.len()))?;
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::InvalidArgument(format!("{} does not name a file", out.display())))?;
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    write_atomic_with(dir, name, |file, tmp| write_npy(&src, &header, file, tmp))?;
    Ok(src.len() as u64)
}

fn write_npy(src: &DenseSource, header: &[u8], file: &File, tmp: &Path) -> Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, file);
    w.write_all(header).map_err(|e| Error::io("write", tmp, e))?;
    let item_bytes = src.schema().unit_bytes();
    let per_block = records_per_block(item_bytes);
    let mut buf = vec![0u8; per_block * item_bytes];
    let len = src.len();
    let mut done = 0usize;
    while done < len && item_bytes > 0 {
        let k = per_block.min(len - done);
        let indices: Vec<u32> = (done as u32..(done + k) as u32).collect();
        let block = &mut buf[..k * item_bytes];
        match src.store() {
            Some(store) => store.gather_fixed(&indices, item_bytes, block)?,
            None => block.copy_from_slice(src.get_batch(&indices)?.as_bytes()),
        }
        if src.dtype() == DType::Bool
            && let Some(at) = block.iter().position(|&b| b > 1)
        {
            // NumPy reads any byte as a bool; the dataset's own reads refuse these, so does this.
            return Err(Error::CorruptRecord {
                path: src.path().to_path_buf(),
                index: (done + at / item_bytes) as u64,
                reason: format!("a bool item holds the byte {} (bools are 0 or 1)", block[at]),
                source: None,
            });
        }
        // The header promises little-endian data; a byte swap is its own inverse, so "from
        // little-endian to native" is also "from native to little-endian".
        to_native(block, src.dtype().size(), true);
        w.write_all(block).map_err(|e| Error::io("write", tmp, e))?;
        done += k;
    }
    w.flush().map_err(|e| Error::io("write", tmp, e))
}
