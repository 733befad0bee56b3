//! Store sets on object storage: a set's parts read from its manifest, and a set stitched over
//! parts already pushed (what `loaderx.ray` writes to `s3://`).

use std::path::PathBuf;

use super::schema::{SCHEMA_FILE, Schema};
use super::set::{SET_FILE, StitchSummary, decode};
use crate::format::storeset::{MAX_SET_MANIFEST, SetManifest, SetPart};
use crate::{Error, Result};

/// A part of a store set on object storage, as the set's manifest names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePart {
    /// Its URL: the manifest's path resolved against the set's URL.
    pub url: String,
    /// The records it held when stitched.
    pub records: u64,
    /// Its identity when stitched (a set stitched locally, then pushed, keeps one per part; a
    /// set stitched on object storage keeps none: see [`stitch_remote`]).
    pub identity: Option<u64>,
}

impl RemotePart {
    /// Checks that `store` (opened at this part's URL) holds what the set was stitched with: its
    /// record count, and its identity where the manifest keeps one (a part replaced by another
    /// store of the same length is refused, as a local set's is; look 80).
    ///
    /// # Errors
    /// [`Error::Schema`] naming the part; the errors of reading its sampled records.
    pub fn check(&self, store: &crate::remote::RemoteStore) -> Result<()> {
        super::set_open::check_part(
            PathBuf::from(&self.url),
            store.len(),
            self.records,
            self.identity,
            || store.identity(),
        )
    }
}

/// The parts of the store set at `url` on object storage (each part's manifest path resolved
/// against `url`), or `None` when there is no set manifest there: what [`remote_set`] reads
/// besides the set's schema, and what `verify` checks when that schema is damaged.
///
/// # Errors
/// [`Error::Remote`] for a failed request; [`Error::Corrupt`] naming the manifest, also for two
/// parts at one URL (their records would be read twice; look 80); [`Error::InvalidArgument`] for
/// a part path that leaves the bucket or is absolute.
pub fn remote_set_parts(
    url: &str,
    options: &crate::remote::RemoteOptions,
) -> Result<Option<Vec<RemotePart>>> {
    Ok(remote_manifest(url, options)?.map(|(parts, _)| parts))
}

/// A remote set manifest's parts and the schema it carries.
type PartsAndSchema = (Vec<RemotePart>, Option<Vec<u8>>);

/// The set's manifest at `url`: its parts resolved against `url`, and the schema it carries (a
/// set stitched on object storage), or `None` when no manifest is there.
fn remote_manifest(url: &str, options: &crate::remote::RemoteOptions) -> Result<Option<PartsAndSchema>> {
    let Some(bytes) = crate::remote::get_optional(url, SET_FILE, options, MAX_SET_MANIFEST)? else {
        return Ok(None);
    };
    let file = PathBuf::from(format!("{}/{SET_FILE}", url.trim_end_matches('/')));
    let mut parts: Vec<RemotePart> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    let manifest = decode(&bytes, &file)?;
    for (i, e) in manifest.parts.into_iter().enumerate() {
        let part_url = crate::remote::join_url(url, &e.path)?;
        if let Some(first) = seen.insert(part_url.clone(), i) {
            return Err(Error::Corrupt {
                path: file,
                offset: 0,
                reason: format!(
                    "parts {first} and {i} are both {}: the set would read its records twice",
                    crate::redact_urls(&part_url)
                ),
                source: None,
            });
        }
        parts.push(RemotePart { url: part_url, records: e.records, identity: e.identity });
    }
    Ok(Some((parts, manifest.schema)))
}

/// A store set on object storage as its own files say: the set's schema and its parts. Nothing
/// of a part is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSet {
    /// The set's schema (`schema.msgpack` at its URL).
    pub schema: Schema,
    /// Its parts, in order.
    pub parts: Vec<RemotePart>,
}

/// The store set at `url` on object storage (its manifest and schema), or `None` when no set
/// manifest is there: what `loaderx info` and `verify` read before they look at the parts.
///
/// # Errors
/// [`Error::Remote`] for a failed request; [`Error::Corrupt`] naming the manifest, also for two
/// parts at one URL; [`Error::InvalidArgument`] for a part path that leaves the bucket or is
/// absolute; [`Error::Schema`] naming the set's schema when it is missing or damaged.
pub fn remote_set(url: &str, options: &crate::remote::RemoteOptions) -> Result<Option<RemoteSet>> {
    let Some((parts, carried)) = remote_manifest(url, options)? else { return Ok(None) };
    if let Some(bytes) = carried {
        // The manifest's own: the file beside it may be a killed commit's newer one.
        let path = PathBuf::from(format!("{}/{SET_FILE}", url.trim_end_matches('/')));
        return Ok(Some(RemoteSet { schema: Schema::decode(&bytes, &path)?, parts }));
    }
    let path = PathBuf::from(format!("{}/{SCHEMA_FILE}", url.trim_end_matches('/')));
    let Some(bytes) = crate::remote::get_optional(url, SCHEMA_FILE, options, 64 << 10)? else {
        return Err(Error::Schema { path, reason: "the store set has no schema".into() });
    };
    Ok(Some(RemoteSet { schema: Schema::decode(&bytes, &path)?, parts }))
}

/// The schema file beside the store set at `url` (`schema.msgpack`), decoded, or `None` when
/// none is there: what `verify` checks of it where the set's manifest carries the schema that
/// readers take (look 156), as it does where the file is the set's schema.
///
/// # Errors
/// [`Error::Remote`] for a failed request; [`Error::Corrupt`] naming the file when it is
/// damaged.
pub fn remote_set_schema_file(url: &str, options: &crate::remote::RemoteOptions) -> Result<Option<Schema>> {
    let path = PathBuf::from(format!("{}/{SCHEMA_FILE}", url.trim_end_matches('/')));
    let Some(bytes) = crate::remote::get_optional(url, SCHEMA_FILE, options, 64 << 10)? else {
        return Ok(None);
    };
    Schema::decode(&bytes, &path).map(Some)
}

/// Writes a store set at `out` (an `s3://` URL) over the stores already at `parts` (URLs in the
/// same bucket), in order: each part's index and schema fetched, the schemas compared, then the
/// set's schema and manifest put, the manifest last, so that a reader sees the set whole or not
/// at all. A set already at `out` is replaced (object storage has no atomic create: the
/// manifest's one put is the switch). The manifest names the parts relative to `out`, as
/// [`stitch`](crate::stitch) does, and carries no part identity (it would take reading records
/// of every part); a reader of the set checks each part's record count.
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts, a part in another bucket or at `out` or above it,
/// more than `u32::MAX` records in all (the loader's indices); [`Error::Schema`] naming the
/// first part whose schema differs from the first's; the parts' open errors
/// ([`RemoteStore::open`](crate::remote::RemoteStore::open)); [`Error::Remote`] naming the
/// object for a failed put. Nothing is put on any other error; when the manifest's put fails,
/// the set's schema is as it was.
pub fn stitch_remote(
    parts: &[String],
    out: &str,
    options: crate::remote::RemoteOptions,
) -> Result<StitchSummary> {
    if parts.is_empty() {
        return Err(Error::InvalidArgument("a store set needs at least one part".into()));
    }
    let mut first: Option<(Schema, Vec<u8>)> = None;
    let mut entries = Vec::with_capacity(parts.len());
    let mut records = 0u64;
    for part in parts {
        let path = crate::remote::part_path(out, part)?;
        let store = crate::remote::RemoteStore::open(part, options.clone()).map_err(|e| {
            let is_set = matches!(e, Error::NotAStore { .. })
                && crate::remote::get_optional(part, SET_FILE, &options, MAX_SET_MANIFEST)
                    .is_ok_and(|m| m.is_some());
            super::set::nested_set(e, is_set, part)
        })?;
        let bytes = store.get_file(SCHEMA_FILE)?;
        let schema = Schema::decode(&bytes, &PathBuf::from(format!("{part}/{SCHEMA_FILE}")))?;
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
        if entries.iter().any(|e: &SetPart| e.path == path) {
            return Err(Error::InvalidArgument(format!(
                "{part} is named twice: a set would read its records twice"
            )));
        }
        records = records
            .checked_add(store.len())
            .ok_or_else(|| Error::InvalidArgument("the parts hold more than 2^64 - 1 records".into()))?;
        entries.push(SetPart { path, records: store.len(), identity: None });
    }
    if records > u64::from(u32::MAX) {
        return Err(Error::InvalidArgument(format!(
            "a store set of {records} records: the loader indexes at most 2^32 - 1"
        )));
    }
    let (_, schema) = first.unwrap_or_else(|| unreachable!("at least one part"));
    crate::remote::refuse_store_at(out, &options)?;
    // A set already there keeps its own schema until its manifest is replaced: the schema is
    // put only when it changes, and put back when the manifest's put fails, so that a failed
    // commit leaves the old set's two files agreeing (review 48, finding 6).
    let old = crate::remote::get_optional(out, SCHEMA_FILE, &options, 64 << 10)?;
    let changed = old.as_ref() != Some(&schema);
    let old_manifest =
        if changed { crate::remote::get_optional(out, SET_FILE, &options, MAX_SET_MANIFEST)? } else { None };
    let manifest = SetManifest::new(entries).with_schema(schema.clone());
    let puts = commit_puts(old.as_deref(), old_manifest.as_deref(), &schema, &manifest);
    let last = puts.len() - 1;
    for (i, (name, bytes)) in puts.into_iter().enumerate() {
        if let Err(e) = crate::remote::put(out, name, bytes, &options) {
            if let (true, Some(old)) = (i == last && changed, old) {
                // Best effort: the manifest's error is the one reported.
                let _ = crate::remote::put(out, SCHEMA_FILE, old, &options);
            }
            return Err(e);
        }
    }
    Ok(StitchSummary { parts: parts.len(), records })
}

/// The puts that commit a set of `schema` and `manifest` (which carries it) over a URL whose
/// schema file holds `old_schema` and whose manifest `old_manifest`, in order, the new manifest
/// last: a commit killed after any of them leaves a set read as the old one or the new one,
/// never the old manifest against the new schema (look 156, L156-1). An old manifest that
/// carries no schema (pushed, or stitched before manifests carried one) is made to carry its
/// own first (look 158, L158-2).
fn commit_puts(
    old_schema: Option<&[u8]>,
    old_manifest: Option<&[u8]>,
    schema: &[u8],
    manifest: &SetManifest,
) -> Vec<(&'static str, Vec<u8>)> {
    let mut puts = Vec::new();
    if old_schema != Some(schema) {
        let old = old_manifest.and_then(|b| SetManifest::decode(b).ok());
        if let (Some(old_schema), Some(old)) = (old_schema, old)
            && old.schema.is_none()
        {
            puts.push((SET_FILE, old.with_schema(old_schema.to_vec()).encode()));
        }
        puts.push((SCHEMA_FILE, schema.to_vec()));
    }
    puts.push((SET_FILE, manifest.encode()));
    puts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Killed after any put of a commit over an old set (its manifest carrying its schema or
    /// not), a reader (the manifest's schema, else the file's) reads the old set with its old
    /// schema or the new set with its new one.
    #[test]
    fn a_commit_killed_after_any_put_reads_one_set_whole() {
        let part = |path: &str| SetPart { path: path.into(), records: 1, identity: None };
        let (a, b) = (b"schema a".to_vec(), b"schema b".to_vec());
        let new = SetManifest::new(vec![part("new")]).with_schema(b.clone());
        for old in
            [SetManifest::new(vec![part("old")]), SetManifest::new(vec![part("old")]).with_schema(a.clone())]
        {
            let puts = commit_puts(Some(&a), Some(&old.encode()), &b, &new);
            for done in 0..=puts.len() {
                let (mut file, mut manifest) = (a.clone(), old.encode());
                for (name, bytes) in puts.iter().take(done) {
                    if *name == SCHEMA_FILE { file = bytes.clone() } else { manifest = bytes.clone() }
                }
                let m = SetManifest::decode(&manifest).unwrap();
                let read = (m.schema.clone().unwrap_or(file), m.parts[0].path.clone());
                assert!(
                    read == (a.clone(), "old".into()) || read == (b.clone(), "new".into()),
                    "{done}: {read:?}"
                );
            }
        }
    }
}
