//! Opening a dataset by path: a store, a store set or (feature `remote`) an `s3://` URL, its
//! schema read and its kind checked once for dense and ragged sources alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::schema::{Kind, Schema};
use super::set::{StoreSet, is_set};
use crate::{Error, Result, Store};

/// Where an opened dataset's records are, before a source wraps them.
pub(crate) enum Opened {
    Store(Arc<Store>),
    Set(Arc<StoreSet>),
    #[cfg(feature = "remote")]
    Remote(Arc<crate::remote::RemoteStore>),
}

/// [`Error::Schema`] naming `path` unless `schema` is of `kind`.
pub(crate) fn check_kind(schema: &Schema, kind: Kind, path: &Path) -> Result<()> {
    if schema.kind == kind {
        return Ok(());
    }
    let reason = match kind {
        Kind::Dense => "the dataset is ragged; open it with RaggedDataset",
        Kind::Ragged => "the dataset is dense; open it with DenseDataset",
    };
    Err(Error::Schema { path: path.to_path_buf(), reason: reason.into() })
}

/// Opens `dir` as a dataset of `kind`: a store set when it holds one, a remote store for an
/// `s3://` URL (with the environment's settings), else a store.
pub(crate) fn open_dataset(dir: &Path, kind: Kind) -> Result<(Opened, Schema, PathBuf)> {
    #[cfg(feature = "remote")]
    if crate::remote::is_remote(dir) {
        return open_remote(&dir.to_string_lossy(), crate::remote::RemoteOptions::new(), kind);
    }
    let schema = Schema::read(dir)?;
    check_kind(&schema, kind, dir)?;
    let opened = if is_set(dir) {
        Opened::Set(Arc::new(StoreSet::open(dir, &schema)?))
    } else {
        Opened::Store(Arc::new(Store::open(dir)?))
    };
    Ok((opened, schema, dir.to_path_buf()))
}

/// The dataset of `kind` at `url` on object storage: its index and schema fetched once.
#[cfg(feature = "remote")]
pub(crate) fn open_remote(
    url: &str,
    options: crate::remote::RemoteOptions,
    kind: Kind,
) -> Result<(Opened, Schema, PathBuf)> {
    let store = crate::remote::RemoteStore::open(url, options)?;
    let path = PathBuf::from(url);
    let schema = Schema::decode(&store.get_file(super::SCHEMA_FILE)?)
        .map_err(|reason| Error::Schema { path: path.clone(), reason })?;
    check_kind(&schema, kind, &path)?;
    Ok((Opened::Remote(Arc::new(store)), schema, path))
}
