//! [`push`](super::push) of a store set: every part checked against the set's manifest before
//! anything goes up, then each held still, checked again and sent, and the set's own schema and
//! manifest last, as the bytes that were checked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::RemoteOptions;
use super::push::{hold_still, part_dir, push_dir, retire_another_set, same_schema};
use super::url::parse_url;
use crate::format::storeset::{SET_FILE, SetManifest, SetPart};
use crate::store::{SCHEMA_FILE, StoreKey};
use crate::{Error, Result};

/// The most bytes a schema file is read to (the dataset layer's own cap).
const MAX_SCHEMA: u64 = 64 << 10;

/// Pushes the set in `dir`, whose manifest `manifest` was decoded from `bytes`: see
/// [`push`](super::push). The checks, each naming the part: its path and URL; its count and
/// identity against the manifest's; its schema against the set's, where the set has one (look
/// 172, L172-1: a part of another dtype went up); no store twice under two names (L172-4). A part
/// is held still ([`hold_still`]) from its second check until it is up and found unchanged and
/// at its path (L172-3: a directory swapped in during its upload went up); one part at a time,
/// so a set of many parts needs no more open files than one (L172-7). The set's schema and
/// manifest go up as they were checked, from a private copy (L172-3: a set stitched again
/// during the push sent a manifest naming parts that never went up).
pub(super) fn push_set(
    dir: &Path,
    url: &str,
    options: &RemoteOptions,
    progress: &dyn Fn(u64),
    bytes: &[u8],
    manifest: &SetManifest,
) -> Result<u64> {
    // The URL first: a store there would hide the set.
    super::refuse_store_at(url, options)?;
    let schema = crate::store::read_capped(&dir.join(SCHEMA_FILE), MAX_SCHEMA)?;
    let mut resolved: Vec<(PathBuf, String, &SetPart)> = Vec::with_capacity(manifest.parts.len());
    let mut seen: HashMap<StoreKey, &str> = HashMap::new();
    for part in &manifest.parts {
        let local = part_dir(dir, &part.path)?;
        // Object storage takes a backslash for a separator (as Windows does): where this
        // platform takes it for a character of a name, the part would go up elsewhere than it
        // lies here, above the set or over another dataset (look 80).
        if part.path.contains('\\') && std::path::MAIN_SEPARATOR != '\\' {
            return Err(Error::InvalidArgument(format!(
                "{}: the part {:?} has a backslash in its name, a separator on object storage: it \
                 would go up to another place than it lies here; rename it and stitch again",
                dir.display(),
                part.path
            )));
        }
        let part_url = super::join_url(url, &part.path)?;
        // Its URL refused now if it would be, before anything goes up (look 150, L150-2).
        parse_url(&part_url)?;
        // Two parts, or a part and the set, must not meet at one URL (look 79).
        let at = |u: &str| u.trim_end_matches('/').to_string();
        if at(&part_url) == at(url) || resolved.iter().any(|(_, u, _)| at(u) == at(&part_url)) {
            return Err(Error::InvalidArgument(format!(
                "{}: the part {:?} would go up to {}, where the set or another part goes",
                dir.display(),
                part.path,
                crate::redact_urls(&part_url)
            )));
        }
        // The part the set was stitched with (look 168, L168-1), each store once.
        let key = check(dir, &local, part, schema.as_deref())?;
        if let Some(first) = seen.insert(key, &part.path) {
            return Err(Error::Corrupt {
                path: dir.join(SET_FILE),
                offset: 0,
                reason: format!(
                    "parts {first} and {} are the same store: its records would be read twice",
                    part.path
                ),
                source: None,
            });
        }
        resolved.push((local, part_url, part));
    }
    retire_another_set(bytes, url, options)?;
    let (mut base, mut uploaded) = (0u64, 0u64);
    for (local, part_url, part) in resolved {
        let still = hold_still(&local)?;
        let held = super::push::open_held(&local, &still)?;
        let before = check(dir, &local, part, schema.as_deref())?;
        let pushed = push_dir(&held, &part_url, options, &|n| progress(base + n), false);
        if let Err(e @ Error::Locked { .. }) = pushed {
            return Err(super::push::take_down_index(&part_url, options).err().unwrap_or(e));
        }
        let (covered, up) = pushed?;
        let moved = still.0.as_ref().is_some_and(|lock| !lock.still_here());
        if moved || check(dir, &local, part, schema.as_deref()).ok() != Some(before) {
            // Nor does the part's own URL keep an index over what went up (look 177, L177-1).
            super::push::take_down_index(&part_url, options)?;
            return Err(Error::Locked {
                path: local,
                reason: "the part was moved, replaced or written to while it went up; the set's manifest \
                         did not go up and the part's index was taken down: push again"
                    .into(),
            });
        }
        drop(still);
        (base, uploaded) = (base + covered, uploaded + up);
    }
    let own = Pinned::new(bytes, schema.as_deref())?;
    let own_dir = crate::sys::Dir::open(own.0.path()).map_err(|e| Error::io("open", own.0.path(), e))?;
    let (_, up) = push_dir(&own_dir, url, options, &|n| progress(base + n), true)?;
    Ok(uploaded + up)
}

/// Checks the part `local` (the manifest's `part`) of the set in `dir`: its count and identity
/// as the manifest has them, its schema saying what the set's (`schema`) says, where the set has
/// one. The part's store key.
fn check(dir: &Path, local: &Path, part: &SetPart, schema: Option<&[u8]>) -> Result<StoreKey> {
    let store = crate::Store::open(local)?;
    crate::store::check_part(local.to_path_buf(), store.len(), part.records, part.identity, || {
        store.identity()
    })?;
    if let Some(set) = schema {
        let own = crate::store::read_capped(&local.join(SCHEMA_FILE), MAX_SCHEMA)?;
        if !own.is_some_and(|own| same_schema(set, &own)) {
            return Err(Error::Schema {
                path: local.to_path_buf(),
                reason: format!(
                    "the part's schema is not the set's ({}): it changed after stitching; stitch again",
                    dir.join(SCHEMA_FILE).display()
                ),
            });
        }
    }
    store.key()
}

/// The set's schema and manifest as checked, in a private directory the push sends them from.
struct Pinned(tempfile::TempDir);

impl Pinned {
    fn new(manifest: &[u8], schema: Option<&[u8]>) -> Result<Pinned> {
        let dir = tempfile::Builder::new()
            .prefix("loaderx-push-")
            .tempdir()
            .map_err(|e| Error::io("create a directory in", std::env::temp_dir(), e))?;
        let put = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).map_err(|e| Error::io("write", &path, e))
        };
        put(SET_FILE, manifest)?;
        if let Some(schema) = schema {
            put(SCHEMA_FILE, schema)?;
        }
        Ok(Pinned(dir))
    }
}
