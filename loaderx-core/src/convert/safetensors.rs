//! safetensors files: one dense dataset per tensor.

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};

use super::block::{append_block, check_block, checked_item_bytes, map_input, records_per_block, to_native};
use super::part::Part;
use super::summary::{ConvertSummary, finish};
use crate::{DType, DatasetWriter, Error, Result, Schema, WriteOptions};

/// Our dtype of a safetensors dtype, if we have one.
fn dtype_of(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::U16 => DType::U16,
        Dtype::I16 => DType::I16,
        Dtype::U32 => DType::U32,
        Dtype::I32 => DType::I32,
        Dtype::U64 => DType::U64,
        Dtype::I64 => DType::I64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        _ => return None,
    })
}

/// A tensor name usable as one dataset's directory name: no separators, not `.` or `..`, none of
/// the names a replacement gives what it moves aside, and none of a store's own files. Each
/// dataset `D` is written as `D.partial` first, and one it replaces is parked as `D.old` (or
/// `D.old1`, ...): a dataset of such a name beside `D` would be the other's staging directory,
/// or a leftover `stitch` leaves out (look 113, L113-1). A dataset named `index.zr` or
/// `schema.msgpack` would make its directory of datasets look like a store (L113-3).
pub(crate) fn valid_name(name: &str) -> bool {
    let parked = |n: &str| n.rsplit_once(".old").is_some_and(|(_, k)| k.bytes().all(|b| b.is_ascii_digit()));
    let store_file = |n: &str| {
        crate::store::is_store_file(n)
            || [crate::store::LOCK_FILE, crate::store::SCHEMA_FILE, crate::format::storeset::SET_FILE]
                .contains(&n)
    };
    // The longest name made of it, a stitch's staging (`.NAME.stitch.<pid>.<n>`: 22 bytes more
    // at most), within a file name's 255 bytes (looks 147 and 148, L147-3, L148-4: longer names
    // were taken, then "File name too long" from the system).
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.ends_with(STAGING_SUFFIX)
        && !parked(name)
        && !store_file(name)
        && !crate::dataset::is_stitch_staging(name)
}

/// The longest dataset name, in bytes: see [`valid_name`].
pub(crate) const MAX_NAME_BYTES: usize = 255 - 22;

/// What a dataset name must not be, said in an error: what [`valid_name`] refuses.
pub(crate) const NAME_RULE: &str = "one directory name, not ending in .partial, .old or .old<N> (the names \
     a writer stages a dataset under or moves a replaced one to), not .NAME.stitch.<pid>.<n> (a stitch's \
     staging), no store file's name, and at most 233 bytes (255 with the longest suffix loaderx adds)";

/// The suffix of a dataset's staging directory (see [`crate::DatasetWriter`]).
pub(crate) const STAGING_SUFFIX: &str = ".partial";

/// Converts every tensor of the safetensors file `input` into a dense dataset `out_dir/<name>`
/// (axis 0 = records, item shape the remaining axes), in name order, and returns each name with
/// its summary.
///
/// A 0-D tensor becomes a dataset of one scalar record (item shape `[]`). The file is
/// memory-mapped and must not be truncated while it is converted. Every tensor is checked
/// (dtype, name, record size) before anything is written; if writing fails half way, the datasets
/// this call created are removed again, and the ones it replaced under `overwrite` put back.
///
/// # Errors
/// [`Error::BadInput`] naming `input` for a malformed file, a dtype loaderx has no equivalent for
/// (the 8-bit and smaller float formats, complex), or a tensor name that is not a valid directory
/// name; [`Error::InvalidArgument`] for an item over 1 MiB; [`Error::AlreadyExists`] for an
/// existing `out_dir/<name>` without overwrite; [`Error::Io`] naming the file.
pub fn safetensors(
    input: impl AsRef<Path>,
    out_dir: impl AsRef<Path>,
    opts: WriteOptions,
) -> Result<Vec<(String, ConvertSummary)>> {
    safetensors_part(input, out_dir, opts, Part::WHOLE)
}

/// [`safetensors()`] of only part `part` of every tensor's rows: `out_dir/<name>` holds the
/// records [`Part::rows`] of the tensor's axis 0 (a 0-D tensor's one record goes to the last
/// part), the same records as the whole conversion's there, after the same checks of every
/// tensor. A part of no rows of a tensor is an empty dataset of its item shape.
///
/// # Errors
/// As [`safetensors()`]; [`Error::InvalidArgument`] for a part out of range.
pub fn safetensors_part(
    input: impl AsRef<Path>,
    out_dir: impl AsRef<Path>,
    opts: WriteOptions,
    part: Part,
) -> Result<Vec<(String, ConvertSummary)>> {
    let part = part.checked()?;
    let (input, out_dir) = (input.as_ref(), out_dir.as_ref());
    let bad = |reason: String| Error::BadInput { path: input.to_path_buf(), reason, source: None };
    let map = map_input(input)?;
    let st = SafeTensors::deserialize(map.bytes()).map_err(|e| Error::BadInput {
        path: input.to_path_buf(),
        reason: "not a valid safetensors file".into(),
        source: Some(e.into()),
    })?;
    let mut tensors = st.tensors();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));

    // Check everything before writing anything.
    let mut plan = Vec::with_capacity(tensors.len());
    for (name, view) in &tensors {
        let dtype = dtype_of(view.dtype()).ok_or_else(|| {
            bad(format!("tensor '{name}' has dtype {}, which loaderx does not hold", view.dtype()))
        })?;
        if !valid_name(name) {
            return Err(bad(format!(
                "tensor name '{name}' cannot be a dataset's directory name: {NAME_RULE}"
            )));
        }
        let (records, item_shape) = match view.shape().split_first() {
            Some((&n, rest)) => (n, rest.to_vec()),
            None => (1, Vec::new()),
        };
        if records as u64 > opts.store_format().max_records() {
            return Err(bad(format!(
                "tensor '{name}' has {records} entries on axis 0; a {} store holds at most {}",
                opts.store_format(),
                opts.store_format().max_records()
            )));
        }
        // The library checked the data's length against the whole shape; an axis 0 of 0 leaves
        // the item's size unchecked, and items of 0 bytes make records from no data.
        checked_item_bytes(records, dtype, &item_shape, input).map_err(|e| match e {
            Error::BadInput { path, reason, source } => {
                Error::BadInput { path, reason: format!("tensor '{name}': {reason}"), source }
            }
            other => other,
        })?;
        let schema = Schema::dense(dtype, item_shape);
        if schema.unit_bytes() > opts.max_record_size() {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}': an item of shape {:?} is {} bytes; a {} record holds at most {} bytes",
                schema.shape,
                schema.unit_bytes(),
                opts.store_format(),
                opts.max_record_size()
            )));
        }
        let out = out_dir.join(name);
        if out.exists() && !opts.overwrites() {
            return Err(Error::AlreadyExists { path: out });
        }
        plan.push((name.clone(), view, schema, records, out));
    }
    // Every dataset this call replaces, free to be replaced before the first is written: one
    // found locked (a reader has it open) after another was replaced left OUT a mix (look 104,
    // L104-2). One opened later is still refused at its turn, the others as they were placed.
    for (.., out) in &plan {
        if out.exists() {
            crate::dataset::check_free_to_replace(out)?;
        }
    }
    crate::dataset::refuse_dataset_as_dir_of(out_dir)?;
    // Forced: OUT is replaced, the datasets of an earlier conversion this one does not write too.
    let names: Vec<String> = plan.iter().map(|(name, ..)| name.clone()).collect();
    let others = if opts.overwrites() {
        crate::dataset::others_in_dir_of(out_dir, &names.iter().map(String::as_str).collect::<Vec<_>>())?
    } else {
        Vec::new()
    };
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io("create directory", out_dir, e))?;
    // What this call replaces, moved aside until its own are placed (look 120, L120-2).
    let outs = plan.iter().map(|(.., out)| out.as_path()).chain(others.iter().map(PathBuf::as_path));
    let aside = crate::dataset::SetAside::take(outs)?;
    match write_plan((input, map.bytes()), plan, part, &opts) {
        Ok(results) => {
            aside.remove()?;
            if opts.overwrites() {
                crate::dataset::remove_killed_stagings(out_dir, &names);
            }
            Ok(results)
        }
        Err(e) => {
            aside.restore();
            Err(e)
        }
    }
}

/// Writes each tensor of `plan` (its rows of `part`) as its dataset, in order; on a failure the
/// datasets this call created are removed (`file` is the input's path and its mapped bytes, for
/// errors).
#[allow(clippy::type_complexity)]
fn write_plan(
    (input, file): (&Path, &[u8]),
    plan: Vec<(String, &safetensors::tensor::TensorView<'_>, Schema, usize, PathBuf)>,
    part: Part,
    opts: &WriteOptions,
) -> Result<Vec<(String, ConvertSummary)>> {
    let mut created: Vec<PathBuf> = Vec::new();
    let mut results = Vec::with_capacity(plan.len());
    let mut done_bytes = 0u64;
    for (name, view, schema, records, out) in plan {
        let existed = out.exists();
        let item_bytes = schema.unit_bytes();
        let rows = part.rows(records as u64);
        let (from, to) = (rows.start as usize * item_bytes, rows.end as usize * item_bytes);
        // Where the tensor's data lie in the file, for an error's byte offset (look 113, L113-4).
        let at = view.data().as_ptr() as usize - file.as_ptr() as usize;
        let data = ((at + from, from), &view.data()[from..to], (rows.end - rows.start) as usize);
        match write_tensor((input, &name), data, schema, &out, opts, &mut done_bytes) {
            Ok(s) => {
                if !existed {
                    created.push(out);
                }
                results.push((name, s));
            }
            Err(e) => {
                // Placed, then its directory sync failed: one dataset's commit, not the call's,
                // which fails (look 117, L117-2: "committed, do not repeat it" was reported of
                // a conversion left without its other tensors). Removed with the others this
                // call created.
                let e = match e {
                    Error::Committed { source, .. } => {
                        if !existed {
                            created.push(out);
                        }
                        *source
                    }
                    e => e,
                };
                for dir in created {
                    let _ = crate::dataset::remove_dataset_dir(&dir);
                }
                return Err(e);
            }
        }
    }
    Ok(results)
}

/// Writes the `records` records in `data` (at byte `offset` of the file `input` and byte `from`
/// of its tensor `name`, for errors) as the dense dataset `out`.
fn write_tensor(
    (input, name): (&Path, &str),
    ((offset, from), data, records): ((usize, usize), &[u8], usize),
    schema: Schema,
    out: &Path,
    opts: &WriteOptions,
    done_bytes: &mut u64,
) -> Result<ConvertSummary> {
    let dtype = schema.dtype;
    let item_bytes = schema.unit_bytes();
    let mut w = DatasetWriter::with_schema(out, schema, opts.clone())?;
    let per_block = records_per_block(item_bytes);
    let mut buf = Vec::with_capacity(per_block * item_bytes);
    let mut done = 0usize;
    while done < records {
        let k = per_block.min(records - done);
        let at = done * item_bytes;
        buf.clear();
        buf.extend_from_slice(&data[at..at + k * item_bytes]);
        to_native(&mut buf, dtype.size(), true);
        let first = ((from + at) / dtype.size()) as u64;
        check_block(dtype, &buf, input, first, (offset + at) as u64).map_err(|e| match e {
            Error::BadInput { path, reason, source } => {
                Error::BadInput { path, reason: format!("tensor '{name}': {reason}"), source }
            }
            e => e,
        })?;
        append_block(&mut w, &buf, item_bytes, k)?;
        done += k;
        opts.report(*done_bytes + (done * item_bytes) as u64);
    }
    *done_bytes += data.len() as u64;
    finish(w, data.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_separators_are_refused() {
        assert!(valid_name("model.layers.0.weight"));
        assert!(valid_name("a.partial.x"));
        assert!(
            valid_name("a.older") && valid_name("a.old.x") && valid_name("old") && valid_name("index.zr.x")
        );
        // Look 138, L138-2: a stitch's staging name is refused, names merely like it are not.
        assert!(valid_name(".s.stitch.1") && valid_name("s.stitch.1.2") && valid_name("..stitch.1.2"));
        assert!(valid_name(".s.stitch.1.x") && valid_name(".s.stitch..2"));
        // Look 147, L147-3: with `.partial`, a file name's 255 bytes at most.
        assert!(valid_name(&"n".repeat(233)) && !valid_name(&"n".repeat(234)));
        for n in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "a\0",
            "a.partial",
            ".partial",
            "w.old",
            "w.old1",
            "x.old42",
            ".old",
        ]
        .into_iter()
        .chain([
            "index.zr",
            "schema.msgpack",
            "write.lock",
            "storeset.msgpack",
            "meta.zr",
            "manifest.zr",
            "0.zr",
            ".s.stitch.1.2",
            ".a.b.stitch.4294967295.63",
        ]) {
            assert!(!valid_name(n), "{n:?}");
        }
    }

    #[test]
    fn every_dtype_we_hold_maps() {
        assert_eq!(dtype_of(Dtype::BF16), Some(DType::BF16));
        assert_eq!(dtype_of(Dtype::BOOL), Some(DType::Bool));
        assert_eq!(dtype_of(Dtype::F8_E4M3), None);
    }
}
