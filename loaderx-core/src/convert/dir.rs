//! A directory of files: one byte record per regular file.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::block::open_input;
use super::part::Part;
use super::summary::{ConvertSummary, finish};
use crate::{DatasetWriter, Error, Result, WriteOptions};

/// Writes a ragged `u8` dataset at `out` with one record per regular file directly in `input`
/// (symbolic links followed, subdirectories and other entries skipped, hidden files included), in
/// byte-wise order of the file names. Record `i` is then the `i`-th name of `ls` under `LC_ALL=C`.
///
/// Sizes are checked before anything is written.
///
/// # Errors
/// [`Error::BadInput`] naming a file over 1 MiB, one whose size changed while it was read, or one
/// whose size is not its content (a `/proc` file);
/// [`Error::Io`] naming the path; otherwise as [`DatasetWriter::with_schema`]. Nothing is left at
/// `out` on error.
pub fn dir(input: impl AsRef<Path>, out: impl AsRef<Path>, opts: WriteOptions) -> Result<ConvertSummary> {
    dir_part(input, out, opts, Part::WHOLE)
}

/// [`dir`] of only part `part` of the files: the files [`Part::rows`] of the directory's
/// regular files in name order, the same records as the whole conversion's there. Every file's
/// size is checked, as for the whole; only the part's files are read. A part of no files is an
/// empty dataset.
///
/// # Errors
/// As [`dir`]; [`Error::InvalidArgument`] for a part out of range.
pub fn dir_part(
    input: impl AsRef<Path>,
    out: impl AsRef<Path>,
    opts: WriteOptions,
    part: Part,
) -> Result<ConvertSummary> {
    let part = part.checked()?;
    let (input, out) = (input.as_ref(), out.as_ref());
    let mut files: Vec<(PathBuf, u64)> = Vec::new();
    let limit = opts.max_record_size();
    let entries = std::fs::read_dir(input).map_err(|e| Error::io("read directory", input, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", input, e))?;
        let path = entry.path();
        let meta = std::fs::metadata(&path).map_err(|e| Error::io("stat", &path, e))?;
        if !meta.is_file() {
            continue;
        }
        if meta.len() > limit as u64 {
            return Err(Error::BadInput {
                path,
                reason: format!(
                    "{} bytes; a {} record holds at most {limit} bytes",
                    meta.len(),
                    opts.store_format()
                ),
                source: None,
            });
        }
        files.push((path, meta.len()));
    }
    // `OsStr` orders by its bytes on Unix.
    files.sort_by(|a, b| a.0.file_name().cmp(&b.0.file_name()));
    let rows = part.rows(files.len() as u64);
    let files = &files[rows.start as usize..rows.end as usize];

    let mut w = DatasetWriter::ragged::<u8>(out, Vec::new(), opts.clone())?;
    let mut bytes_in = 0u64;
    let mut buf = Vec::new();
    for (path, len) in files.iter().map(|(p, l)| (p, *l)) {
        buf.clear();
        // Listed as a regular file, but it may have been replaced since (by a FIFO, whose open
        // would wait for a writer) or be a `/proc` file whose size is not its content.
        let (f, _) = open_input(path)?;
        // One byte more than the limit reveals a file that grew past it.
        f.take(limit as u64 + 1).read_to_end(&mut buf).map_err(|e| Error::io("read", path, e))?;
        if buf.len() as u64 != len {
            return Err(Error::BadInput {
                path: path.clone(),
                reason: format!("the file changed while it was read ({len} bytes, then {})", buf.len()),
                source: None,
            });
        }
        w.append_bytes(&[&buf])?;
        bytes_in += len;
        opts.report(bytes_in);
    }
    finish(w, bytes_in)
}
