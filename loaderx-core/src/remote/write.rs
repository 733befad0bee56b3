//! Store sets written on object storage: [`stitch_remote`] (a set's schema and manifest over
//! parts already pushed), and the two calls a distributed writer cleans up with: [`list_dirs`]
//! and [`remove_prefix`].

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::RemoteOptions;
use super::url::parse_url;
use crate::dataset::{SCHEMA_FILE, Schema, StitchSummary};
use crate::format::storeset::{SET_FILE, SetManifest, SetPart};
use crate::{Error, Result};

/// The object `name` under `prefix`.
fn key(prefix: &str, name: &str) -> ObjectPath {
    if prefix.is_empty() { ObjectPath::from(name) } else { ObjectPath::from(format!("{prefix}/{name}")) }
}

/// A private runtime for one call's requests.
fn runtime(url: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))
}

/// The path of the directory `to` relative to the directory `from`, both `/`-separated prefixes
/// in one bucket; `None` when `to` is `from` or a directory above it (a set cannot hold itself).
fn relative(from: &str, to: &str) -> Option<String> {
    let a: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let b: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == b.len() {
        return None;
    }
    let mut parts = vec![".."; a.len() - common];
    parts.extend(&b[common..]);
    Some(parts.join("/"))
}

/// Writes a store set at `out` (an `s3://` URL) over the stores already at `parts` (URLs in the
/// same bucket), in order: each part's index and schema fetched, the schemas compared, then the
/// set's schema and manifest put, the manifest last, so that a reader sees the set whole or not
/// at all. A set already at `out` is replaced (object storage has no atomic create; the
/// manifest's one put is the switch). The manifest names the parts relative to `out`, as
/// [`stitch`](crate::stitch) does, and carries no part identity (it would take reading records
/// of every part); a reader of the set checks each part's record count.
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts, a part in another bucket or at `out` or above it,
/// more than `u32::MAX` records in all (the loader's indices); [`Error::Schema`] naming the
/// first part whose schema differs from the first's; the parts' open errors
/// ([`RemoteStore::open`](super::RemoteStore::open)); [`Error::Remote`] naming the object for a
/// failed put.
pub fn stitch_remote(parts: &[String], out: &str, options: RemoteOptions) -> Result<StitchSummary> {
    let (bucket, out_prefix) = parse_url(out)?;
    if parts.is_empty() {
        return Err(Error::InvalidArgument("a store set needs at least one part".into()));
    }
    let mut first: Option<(Schema, Vec<u8>)> = None;
    let mut entries = Vec::with_capacity(parts.len());
    let mut records = 0u64;
    for part in parts {
        let (b, prefix) = parse_url(part)?;
        if b != bucket {
            return Err(Error::InvalidArgument(format!(
                "{part}: a set's parts lie in its bucket ({out} is in {bucket:?})"
            )));
        }
        let path = relative(&out_prefix, &prefix).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{part}: a part of the set {out} is the set's directory or one above it"
            ))
        })?;
        let store = super::RemoteStore::open(part, options.clone())?;
        let bytes = store.get_file(SCHEMA_FILE)?;
        let schema = Schema::decode(&bytes, &std::path::PathBuf::from(format!("{part}/{SCHEMA_FILE}")))?;
        match &first {
            None => first = Some((schema, bytes)),
            Some((s, _)) if *s != schema => {
                return Err(Error::Schema {
                    path: part.into(),
                    reason: format!("the part's schema ({schema}) differs from the first part's ({s})"),
                });
            }
            Some(_) => {}
        }
        records += store.len();
        entries.push(SetPart { path, records: store.len(), identity: None });
    }
    if records > u64::from(u32::MAX) {
        return Err(Error::InvalidArgument(format!(
            "a store set of {records} records: the loader indexes at most 2^32 - 1"
        )));
    }
    let (_, schema) = first.unwrap_or_else(|| unreachable!("at least one part"));
    let manifest = SetManifest::new(entries).encode();
    let store = options.build(&bucket)?;
    let rt = runtime(out)?;
    for (name, bytes) in [(SCHEMA_FILE, schema), (SET_FILE, manifest)] {
        rt.block_on(store.put(&key(&out_prefix, name), PutPayload::from(bytes))).map_err(|e| {
            Error::Remote {
                url: format!("{}/{name}", out.trim_end_matches('/')),
                range: None,
                reason: options.scrub(&e.to_string()),
            }
        })?;
    }
    Ok(StitchSummary { parts: parts.len(), records })
}

/// The names of the "directories" directly under the `s3://` URL `url` (the common prefixes of
/// its objects, one level down), sorted.
///
/// # Errors
/// [`Error::Remote`] naming `url` for a failed listing.
pub fn list_dirs(url: &str, options: RemoteOptions) -> Result<Vec<String>> {
    let (bucket, prefix) = parse_url(url)?;
    let store = options.build(&bucket)?;
    let rt = runtime(url)?;
    let at = (!prefix.is_empty()).then(|| ObjectPath::from(prefix.as_str()));
    let listed = rt.block_on(store.list_with_delimiter(at.as_ref())).map_err(|e| Error::Remote {
        url: url.into(),
        range: None,
        reason: options.scrub(&e.to_string()),
    })?;
    let mut names: Vec<String> =
        listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_owned)).collect();
    names.sort();
    Ok(names)
}

/// Removes every object under the `s3://` URL `url` taken as a directory (`url/...`, never an
/// object merely starting with its name); returns how many. A URL naming a bucket's root is
/// refused: this removes one store or set, never a bucket's contents.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bucket's root; [`Error::Remote`] naming `url` for a failed
/// listing or delete.
pub fn remove_prefix(url: &str, options: RemoteOptions) -> Result<u64> {
    let (bucket, prefix) = parse_url(url)?;
    if prefix.is_empty() {
        return Err(Error::InvalidArgument(format!("{url}: refusing to remove a bucket's contents")));
    }
    let store = options.build(&bucket)?;
    let rt = runtime(url)?;
    let failed = |e: object_store::Error| Error::Remote {
        url: url.into(),
        range: None,
        reason: options.scrub(&e.to_string()),
    };
    let at = ObjectPath::from(prefix.as_str());
    rt.block_on(async {
        let objects: Vec<ObjectPath> = store.list(Some(&at)).map_ok(|m| m.location).try_collect().await?;
        let n = objects.len() as u64;
        for o in objects {
            match store.delete(&o).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    })
    .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_named_relative_to_the_set_and_never_hold_it() {
        assert_eq!(
            relative("train/tokens", "train/_parts/tokens/p0").as_deref(),
            Some("../_parts/tokens/p0")
        );
        assert_eq!(relative("sets/all", "sets/all/p0").as_deref(), Some("p0"));
        assert_eq!(relative("", "p0").as_deref(), Some("p0"));
        assert_eq!(relative("a/b", "c").as_deref(), Some("../../c"));
        assert_eq!(relative("a/b", "a/b"), None);
        assert_eq!(relative("a/b", "a"), None);
        assert_eq!(relative("a/b", ""), None);
    }
}
