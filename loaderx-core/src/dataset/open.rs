//! Opening a dataset by path: a store, a store set or (feature `remote`) an `s3://` URL, its
//! schema read and its kind checked once for dense and ragged sources alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::records::Records;
use super::schema::{Kind, Schema};
use super::set_open::{StoreSet, is_set};
use crate::{Error, Result, Store, StoreOptions};

/// [`Error::Schema`] naming `path` unless `schema` is of `kind`.
/// A ragged reader reads encoded images too, as their files' bytes.
pub(crate) fn check_kind(schema: &Schema, kind: Kind, path: &Path) -> Result<()> {
    if schema.kind == kind || (kind == Kind::Ragged && schema.kind == Kind::Image) {
        return Ok(());
    }
    let reason = match (kind, schema.kind) {
        (_, Kind::Image) => {
            "the dataset holds encoded images (one JPEG, PNG or WebP file a record); open it with RaggedDataset for \
             the files' bytes"
        }
        (Kind::Dense, _) => "the dataset is ragged; open it with RaggedDataset",
        (_, _) => "the dataset is dense; open it with DenseDataset",
    };
    Err(Error::Schema { path: path.to_path_buf(), reason: reason.into() })
}

/// Opens the local `dir` as a dataset of `kind`: a store set when it holds one, else a store
/// (URLs go through [`open_remote_or_set`]), each store opened with `opts`.
pub(crate) fn open_dataset(
    dir: &Path,
    kind: Kind,
    opts: &StoreOptions,
) -> Result<(Records, Schema, PathBuf)> {
    // The schema is read before the store is opened: a dataset replaced in between (a rename
    // over `dir`) would pair the old schema with the new records. Read again once the store is
    // open and locked, it must be the same, or the open starts over.
    for _ in 0..8 {
        let schema = Schema::read(dir)?;
        check_kind(&schema, kind, dir)?;
        let records = if is_set(dir) {
            Records::set(StoreSet::open(dir, &schema, opts)?)
        } else {
            Records::store(Arc::new(Store::open_with(dir, opts.clone())?))
        };
        if Schema::read(dir)? == schema {
            return Ok((records, schema, dir.to_path_buf()));
        }
    }
    Err(Error::Locked { path: dir.to_path_buf(), reason: "the dataset keeps being replaced".into() })
}

/// The dataset at `url` on object storage, or the store set there (its parts opened and
/// concatenated): `single` wraps one opened store, `concat` joins the parts (each checked to
/// hold the records the set was stitched with: [`RemotePart::check`](super::RemotePart::check)).
///
/// # Errors
/// As [`open_remote`]; [`Error::Schema`] naming a part whose record count, identity or schema
/// changed, or the set's schema when it is missing, damaged or of another kind;
/// [`Error::Corrupt`] for a manifest naming one part twice.
#[cfg(feature = "remote")]
pub(crate) fn open_remote_or_set<S>(
    url: &str,
    options: crate::remote::RemoteOptions,
    kind: Kind,
    single: impl Fn(Records, Schema, PathBuf) -> S,
    concat: impl FnOnce(Vec<S>) -> Result<S>,
) -> Result<S> {
    match open_remote(url, options.clone(), kind) {
        Ok((opened, schema, path)) => Ok(single(opened, schema, path)),
        Err(Error::NotAStore { path, reason }) => {
            let Some(set) = super::set_remote::remote_set(url, &options)? else {
                return Err(Error::NotAStore { path, reason });
            };
            // The set's own schema, as a local set's: of the kind asked, each part's the same
            // (look 81: a missing or other schema went unseen).
            check_kind(&set.schema, kind, &path)?;
            let mut sources = Vec::with_capacity(set.parts.len());
            for part in set.parts {
                let store = crate::remote::RemoteStore::open(&part.url, options.clone())?;
                part.check(&store)?;
                let (opened, schema, path) = remote_dataset(store, &part.url, kind)?;
                if schema != set.schema {
                    return Err(Error::Schema {
                        path,
                        reason: format!(
                            "the part's schema ({schema}) is not the set's ({}): it changed after stitching",
                            set.schema
                        ),
                    });
                }
                sources.push(single(opened, schema, path));
            }
            concat(sources)
        }
        Err(e) => Err(e),
    }
}

/// The dataset of `kind` at `url` on object storage: its index and schema fetched once.
#[cfg(feature = "remote")]
pub(crate) fn open_remote(
    url: &str,
    options: crate::remote::RemoteOptions,
    kind: Kind,
) -> Result<(Records, Schema, PathBuf)> {
    remote_dataset(crate::remote::RemoteStore::open(url, options)?, url, kind)
}

/// The dataset of `kind` that `store` (opened at `url`) holds: its schema fetched and checked.
#[cfg(feature = "remote")]
fn remote_dataset(
    store: crate::remote::RemoteStore,
    url: &str,
    kind: Kind,
) -> Result<(Records, Schema, PathBuf)> {
    let path = PathBuf::from(url);
    let schema = Schema::decode(&store.get_file(super::SCHEMA_FILE)?, &path.join(super::SCHEMA_FILE))?;
    check_kind(&schema, kind, &path)?;
    Ok((Records::remote(Arc::new(store)), schema, path))
}
