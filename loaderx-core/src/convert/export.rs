//! Datasets out to other formats: `.npy`.

use std::path::Path;

use super::block::{records_per_block, to_native};
use super::npy::NpyHeader;
use crate::dataset::Kind;
use crate::store::{Temporary, check_target};
use crate::{DType, DenseSource, Error, Result};

/// Writes the dense dataset in `dataset` as the `.npy` file `out`: shape `(len, *item_shape)`,
/// little-endian type string, C order, with the header laid out exactly as NumPy writes it, so a
/// little-endian `.npy` converted with [`crate::convert::npy`] comes back byte for byte.
/// Returns the number of records.
///
/// Records are read in blocks of a few MiB into a temporary file of the export's own beside
/// `out` (created exclusively: no file of the user's is written over or removed), which is
/// synced and renamed into place when complete: a failure leaves no partial `out` and no
/// temporary. Without `overwrite`, the rename refuses a file that appeared at `out` meanwhile.
///
/// # Errors
/// [`Error::AlreadyExists`] when `out` exists and `overwrite` is false; [`Error::NotReplaceable`]
/// when `out` is a directory or a link; [`Error::InvalidArgument`] when `out` is inside the
/// dataset (it would replace the dataset's own files) or for bfloat16 (NumPy has no type string
/// for it); [`Error::Schema`] for a ragged dataset or one without schema; the store's gather
/// errors; [`Error::Io`] naming the file.
pub fn npy(dataset: impl AsRef<Path>, out: impl AsRef<Path>, overwrite: bool) -> Result<u64> {
    let (dataset, out) = (dataset.as_ref(), out.as_ref());
    check_target(out, overwrite)?;
    refuse_inside(dataset, out)?;
    let src = DenseSource::open(dataset).map_err(|e| not_dense(dataset, e))?;
    if let Some(store) = src.store() {
        // The whole store: its length from a header that passes its checksum.
        store.check_header()?;
    }
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
    let mut tmp = Temporary::create(out)?;
    write_npy(&src, &header, &mut tmp)?;
    tmp.sync()?;
    tmp.place(out, overwrite)?;
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::store::sync_dir(dir)?;
    Ok(src.len() as u64)
}

/// `e`, the dense open's error, saying what exports a dataset of another kind (look 97, F97-3:
/// a ragged dataset's refusal named `RaggedDataset`, a library type, and not `--megatron`).
fn not_dense(dataset: &Path, e: Error) -> Error {
    let Error::Schema { path, .. } = &e else { return e };
    let reason = match crate::dataset::Schema::read(dataset).map(|s| s.kind) {
        Ok(Kind::Ragged) => {
            "the dataset is ragged (records of different lengths) and a .npy file holds one dense array: a \
             dataset of integer token records exports as a Megatron-LM indexed dataset (`loaderx export \
             --megatron`, `export::megatron`); read other ragged records with RaggedDataset"
        }
        Ok(Kind::Image) => {
            "the dataset holds encoded images (one JPEG, PNG or WebP file a record) and a .npy file holds one \
             dense array: decode them with ImageDataset, or convert the folder without --encoded"
        }
        _ => return e,
    };
    Error::Schema { path: path.clone(), reason: reason.into() }
}

/// Refuses an `out` inside the dataset directory `dataset` or, for a store set, inside any of
/// its parts' directories (wherever the manifest puts them): the export would replace a chunk or
/// an index of the data it reads.
fn refuse_inside(dataset: &Path, out: &Path) -> Result<()> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Ok(parent) = parent.canonicalize() else {
        // An output directory that does not resolve fails to take the temporary.
        return Ok(());
    };
    let mut read = vec![dataset.to_path_buf()];
    if let Some(parts) = crate::set_parts(dataset)? {
        read.extend(parts.into_iter().map(|(part, _)| dataset.join(part)));
    }
    for dir in read {
        // A directory that does not resolve fails the dataset's open next.
        if dir.canonicalize().is_ok_and(|d| parent.starts_with(d)) {
            return Err(Error::InvalidArgument(format!(
                "{} is inside {}, which the export reads (of the dataset {}): it would replace the dataset's \
                 own files; write it elsewhere",
                out.display(),
                dir.display(),
                dataset.display()
            )));
        }
    }
    Ok(())
}

fn write_npy(src: &DenseSource, header: &[u8], tmp: &mut Temporary) -> Result<()> {
    tmp.write(header)?;
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
        tmp.write(block)?;
        done += k;
    }
    Ok(())
}
