//! `lx_schema`: a dataset's kind, element type and shape, from and to `schema.msgpack`.

use std::path::Path;

use loaderx_core::{DType, Kind, Schema};

use crate::error::{Failure, Outcome};

/// The most dimensions an item (or row) shape has here: `LX_MAX_DIMS`.
pub(crate) const MAX_DIMS: usize = 8;

/// `lx_schema`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct LxSchema {
    /// `LX_KIND_DENSE` (0), `LX_KIND_RAGGED` (1) or `LX_KIND_IMAGE` (2).
    kind: i32,
    /// `LX_DTYPE_*`: the position in `DType::ALL`.
    dtype: i32,
    /// Bytes per element (read only; ignored when writing).
    elem_size: u32,
    /// Dimensions used in `shape`.
    ndim: u32,
    /// Dense: the item shape; ragged: the shape of one row.
    shape: [u64; MAX_DIMS],
}

/// Reads `dir/schema.msgpack`.
pub(crate) fn read(dir: &Path) -> Outcome<LxSchema> {
    let schema = Schema::read(dir)?;
    if schema.shape.len() > MAX_DIMS {
        return Err(Failure::argument(format!(
            "the schema of {} has {} dimensions; lx_schema holds {MAX_DIMS}",
            dir.display(),
            schema.shape.len()
        )));
    }
    let mut out = LxSchema {
        kind: match schema.kind {
            Kind::Dense => 0,
            Kind::Ragged => 1,
            Kind::Image => 2,
        },
        // Every dtype is in ALL.
        dtype: DType::ALL.iter().position(|&d| d == schema.dtype).map_or(-1, |i| i as i32),
        elem_size: schema.dtype.size() as u32,
        ndim: schema.shape.len() as u32,
        shape: [0; MAX_DIMS],
    };
    for (slot, &dim) in out.shape.iter_mut().zip(&schema.shape) {
        *slot = dim as u64;
    }
    Ok(out)
}

/// Writes `dir/schema.msgpack` (beside a store, it makes the store a dataset).
///
/// A schema [`Schema::read`] would refuse (an item or row no record can hold) is refused here by
/// the same check, [`Schema::validate`], before anything is written: a write never leaves a
/// dataset that no longer opens.
pub(crate) fn write(dir: &Path, schema: &LxSchema) -> Outcome<()> {
    let dtype = usize::try_from(schema.dtype)
        .ok()
        .and_then(|i| DType::ALL.get(i).copied())
        .ok_or_else(|| Failure::argument(format!("unknown dtype {}", schema.dtype)))?;
    let ndim = schema.ndim as usize;
    let dims = schema
        .shape
        .get(..ndim)
        .ok_or_else(|| Failure::argument(format!("ndim {ndim} is more than LX_MAX_DIMS ({MAX_DIMS})")))?;
    let shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| Failure::argument(format!("dimension {d} does not fit"))))
        .collect::<Outcome<Vec<usize>>>()?;
    let schema = match schema.kind {
        0 => Schema::dense(dtype, shape),
        1 => Schema::ragged(dtype, shape),
        2 => Schema { kind: Kind::Image, dtype, shape },
        other => {
            return Err(Failure::argument(format!(
                "unknown kind {other} (LX_KIND_DENSE, LX_KIND_RAGGED or LX_KIND_IMAGE)"
            )));
        }
    };
    schema.validate().map_err(|e| Failure::argument(format!("schema: {}", loaderx_core::error_chain(&e))))?;
    // lx_schema_read refuses a converter's staging directory (`OUT.partial`: never a dataset);
    // a schema written there could not be read back through this ABI.
    if dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".partial")) {
        return Err(Failure::argument(format!(
            "{}: a .partial directory is a converter's staging directory, never read as a dataset",
            dir.display()
        )));
    }
    Ok(schema.write(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error;

    /// What lx_schema_write accepts, lx_schema_read reads: never a converter's staging directory.
    #[test]
    fn a_staging_directory_gets_no_schema() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("x.partial");
        std::fs::create_dir(&staging).unwrap();
        let s = LxSchema { kind: 0, dtype: 0, ndim: 0, ..LxSchema::default() };
        let e = write(&staging, &s).unwrap_err();
        assert_eq!(e.code, error::INVALID_ARGUMENT);
        assert!(!staging.join("schema.msgpack").exists());
        std::fs::create_dir(dir.path().join("x")).unwrap();
        write(&dir.path().join("x"), &s).unwrap();
    }

    #[test]
    fn a_schema_written_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LxSchema { kind: 0, dtype: 10, ndim: 2, ..LxSchema::default() };
        s.shape[..2].copy_from_slice(&[28, 28]);
        write(dir.path(), &s).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!((back.kind, back.dtype, back.elem_size, back.ndim), (0, 10, 4, 2));
        assert_eq!(&back.shape[..3], &[28, 28, 0]);
        assert_eq!(Schema::read(dir.path()).unwrap(), Schema::dense(DType::F32, vec![28, 28]));
    }

    #[test]
    fn a_shape_no_record_holds_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LxSchema { kind: 0, dtype: 0, ndim: 1, ..LxSchema::default() };
        s.shape[0] = 8 << 30;
        let err = write(dir.path(), &s).unwrap_err();
        assert_eq!(err.code, error::INVALID_ARGUMENT);
        assert_eq!(err.message, "schema: shape [8589934592] of u8 is larger than a record can be");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        s.shape[0] = u64::from(u32::MAX);
        write(dir.path(), &s).unwrap();
        assert_eq!(read(dir.path()).unwrap().shape[0], u64::from(u32::MAX));
    }

    #[test]
    fn an_encoded_image_schema_round_trips_as_kind_2() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &LxSchema { kind: 2, ..LxSchema::default() }).unwrap();
        assert_eq!(Schema::read(dir.path()).unwrap(), Schema::image());
        let back = read(dir.path()).unwrap();
        assert_eq!((back.kind, back.dtype, back.ndim), (2, 0, 0));
    }

    #[test]
    fn bad_kinds_dtypes_and_ndims_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for (s, says) in [
            (LxSchema { kind: 3, ..LxSchema::default() }, "unknown kind 3"),
            (LxSchema { kind: 2, dtype: 10, ..LxSchema::default() }, "schema: encoded images are u8 bytes"),
            (LxSchema { dtype: 13, ..LxSchema::default() }, "unknown dtype 13"),
            (LxSchema { ndim: 9, ..LxSchema::default() }, "ndim 9 is more than LX_MAX_DIMS (8)"),
        ] {
            let e = write(dir.path(), &s).unwrap_err();
            assert!(
                e.code == error::INVALID_ARGUMENT && e.message.starts_with(says),
                "{says}: {}",
                e.message
            );
        }
    }
}
