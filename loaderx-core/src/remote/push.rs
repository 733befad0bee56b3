use std::path::{Component, Path, PathBuf};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::RemoteOptions;
use super::url::parse_url;
use crate::format::storeset::{MAX_SET_MANIFEST, SET_FILE, SetManifest};
use crate::store::{DICT_FILE, INDEX_FILE, MANIFEST_FILE, META_FILE, SCHEMA_FILE};
use crate::sys::Access;

use super::push_local::{
    changed_since_listed, files_to_push, held_state, put_in_parts, read_all, v1_committed,
};
pub(super) use super::push_local::{hold_still, open_held};
use crate::{Error, Result};

use super::manifest::MAX_MANIFEST;
/// Files larger than this go up as multipart uploads, in parts of [`PART`] bytes.
const MULTIPART_OVER: u64 = 32 << 20;
pub(super) const PART: u64 = 16 << 20;

/// The files of a store directory that go up (the names of `store/files.rs`, with the dataset's
/// schema and class list): the index, v1 metadata, manifest and dictionary; chunks are
/// [`is_chunk`]. The writer's lock, a pending journal and temporary files stay local (a reader
/// of object storage uses none of them), and so does anything else in the directory.
pub(super) const STORE_FILES: [&str; 6] =
    [INDEX_FILE, META_FILE, MANIFEST_FILE, DICT_FILE, SCHEMA_FILE, CLASSES_FILE];

/// The class names beside an image folder's labels.
const CLASSES_FILE: &str = "classes.txt";

/// What says how a store's records read, beside its index: when a push changes it, the URL's
/// index is removed first (`remove_stale`).
const DESCRIBING: [&str; 2] = [SCHEMA_FILE, CLASSES_FILE];

/// Whether `name` is a chunk file's: `<id>.zr`, the id a `u32` written as the writer writes it.
pub(super) fn is_chunk(name: &str) -> bool {
    name.strip_suffix(".zr").and_then(|n| n.parse::<u32>().ok()).is_some_and(|id| name == format!("{id}.zr"))
}

/// Whether `dir` holds a store: an index (v2) or metadata (v1) that is a regular file.
fn is_store(dir: &Path) -> bool {
    [INDEX_FILE, META_FILE]
        .iter()
        .any(|n| std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.file_type().is_file()))
}

/// Uploads the local store (or dataset) directory `dir` to `url`, held still meanwhile (its
/// writer lock taken: no append, delete, compaction or migration runs during the push; on a
/// directory this process may not write, a reader's lock on its index): the store's own files
/// (see `STORE_FILES`: nothing else in the directory), a chunk file skipped when it is already
/// there with the same length and (by the store's manifests, the remote one removed before a
/// chunk is replaced) the same crc32c, so a store pushed again after appends sends what
/// changed, the index last. A reader opening the store during a push sees the old index or
/// the new one, over chunk objects of either: a v2 record's crc32c (and every request's ETag)
/// refuses bytes of the other store, a v1 record carries no checksum and is read as it is (look
/// 78: do not push over a v1 store that is being read). `progress` is called with the bytes done
/// so far (sent or found there already); the bytes uploaded are returned (look 145, L145-2: a
/// push that skipped every chunk reported the whole store pushed). Of a v1 store's `meta.zr` (a fixed 256 MiB table) only the committed prefix goes up;
/// v1 stores have no manifest, so a repeated push of one sends every file again. A store set is
/// refused at a URL holding a store (readers would open the store). A store pushed where another
/// store, dataset or set was reads as itself: the files it lacks (a schema, class names, a
/// dictionary, a set's manifest, the other format's index or manifest) are removed before
/// anything goes up; and where its schema or class names differ from the URL's, the URL's index
/// is removed first, so that until the new index is up the URL is no store (readers get an
/// error, never one store's index read with another's schema; a push cut short leaves no store).
/// Every file is read through the directory held open: the store the push began with goes up
/// whole, whatever is put at its path meanwhile. At its end the push asks whether each object
/// is still as it left it and what it removed still absent: another push to the same URL
/// meanwhile fails it and takes the URL's index and manifest down, as does a push failing as
/// [`Error::Locked`]. One push to a URL at a time: pushes racing may leave no store there (an
/// error to every reader, even after one of them said it pushed) or, two stores of one schema,
/// a store every reader refuses until another is pushed there or the URL's manifest is
/// removed (look 183, L183-2); never one store's records read as another's without an error.
///
/// A store set goes up as its parts, each to the URL its manifest path names relative to the
/// set's, then its own schema and manifest (the manifest last of all; where the set's schema
/// changes, the URL's manifest is removed first, as a store's index is). Every part must be a
/// store (not a set, not any other directory), named by a relative path that is not empty,
/// does not resolve to the set's directory or one above it, and (but on Windows) holds no
/// backslash, a separator on object storage: no two parts, nor a part and the set, go up to one
/// URL.
///
/// # Errors
/// [`Error::Locked`] for a store a writer (or a delete, compaction or migration) has open, or a
/// file changed since it was listed; [`Error::Remote`] for an object another push changed;
/// [`Error::Io`] naming a local file; [`Error::Remote`] naming the object for a failed upload;
/// [`Error::Corrupt`] for a v1 `meta.zr` whose header does not parse, or naming the set's
/// manifest and the part for a part path that is empty, absolute or names the set itself or a
/// directory above it; [`Error::NotAStore`] for a `dir`, or a part, that holds no store;
/// [`Error::InvalidArgument`] for a part whose URL leaves the bucket, meets the set's or another
/// part's, or whose name holds a backslash (but on Windows).
pub fn push(dir: &Path, url: &str, options: RemoteOptions, progress: impl Fn(u64)) -> Result<u64> {
    let manifest = if std::fs::symlink_metadata(dir.join(SET_FILE)).is_ok_and(|m| m.is_file()) {
        let file = dir.join(SET_FILE);
        let bytes = crate::store::read_capped(&file, MAX_SET_MANIFEST)?.unwrap_or_default();
        let manifest = SetManifest::decode(&bytes).map_err(|e| Error::Corrupt {
            path: file,
            offset: e.offset,
            reason: e.reason,
            source: e.source.map(Into::into),
        })?;
        Some((bytes, manifest))
    } else {
        None
    };
    let Some((bytes, manifest)) = manifest else {
        if !is_store(dir) {
            return Err(Error::NotAStore {
                path: dir.to_path_buf(),
                reason: "neither index.zr (v2) nor meta.zr (v1) is there, nor a store set's manifest".into(),
            });
        }
        let still = hold_still(dir)?;
        let held = open_held(dir, &still)?;
        let before = held_state(&held)?;
        // Every file is read through the directory held open: a store moved away meanwhile (and
        // another put at its name) still goes up whole, never as a mix of the two (look 177,
        // L177-1; look 179, L179-1).
        let pushed = push_dir(&held, url, &options, &progress, false);
        // Read-only, the held store may have been written by a writer of other rights: what went
        // up must be what it held, or the URL's index and manifest come down.
        let changed = || Error::Locked {
            path: dir.to_path_buf(),
            reason: format!(
                "the store was written to while it went up; its index at {} was taken down: push again",
                crate::redact_urls(url)
            ),
        };
        return match pushed {
            Ok((_, uploaded)) if held_state(&held).is_ok_and(|now| now == before) => Ok(uploaded),
            Ok(_) => Err(take_down_index(url, &options).err().unwrap_or_else(changed)),
            Err(e @ Error::Locked { .. }) => Err(take_down_index(url, &options).err().unwrap_or(e)),
            Err(e) => Err(e),
        };
    };
    super::push_set::push_set(dir, url, &options, &progress, &bytes, &manifest)
}

/// Removes the manifest of a set at `url` that is not the set's (other bytes than `mine`, its
/// manifest as checked), before any of `dir`'s parts goes up: parts pushed to the URLs the old manifest
/// names were read under it, beside the old set's other parts (a set stitched on object storage
/// keeps no identities to tell them apart: look 160, L160-1) or against another schema (look
/// 158, L158-1), and a push cut short left it so. Until the new manifest is up, no set is there;
/// the same set pushed again keeps its manifest.
///
/// # Errors
/// [`Error::Remote`] naming the object for a failed request.
pub(super) fn retire_another_set(mine: &[u8], url: &str, options: &RemoteOptions) -> Result<()> {
    if super::get_optional(url, SET_FILE, options, MAX_SET_MANIFEST)?.is_none_or(|there| there == mine) {
        return Ok(());
    }
    remove_at(url, options, &[SET_FILE])
}

/// Removes the objects `names` under `url`, in turn (those not there are no error).
///
/// # Errors
/// [`Error::Remote`] naming the object for a failed request.
fn remove_at(url: &str, options: &RemoteOptions, names: &[&str]) -> Result<()> {
    let (bucket, prefix) = parse_url(url)?;
    let store = options.build(&bucket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))?;
    for name in names {
        let key = if prefix.is_empty() { (*name).to_string() } else { format!("{prefix}/{name}") };
        remove_object(&runtime, store.as_ref(), &ObjectPath::from(key), url, name, options)?;
    }
    Ok(())
}

/// Removes the manifest, the index (v2 and v1) and a set's manifest at `url`: a store that
/// changed while it went up is no store there, an error to a reader, never one store's index
/// over another's chunks; nor does a manifest vouch for chunk objects it does not describe,
/// which the next push would skip (look 77).
///
/// # Errors
/// [`Error::Remote`] naming the object for a failed request.
pub(super) fn take_down_index(url: &str, options: &RemoteOptions) -> Result<()> {
    // A set's manifest too: one another push put there would open over this store's files
    // (look 183, L183-3).
    remove_at(url, options, &[MANIFEST_FILE, INDEX_FILE, META_FILE, SET_FILE])
}

/// The directory of the set `set`'s part `rel`, checked: a relative path, not empty, not the
/// set's directory or one above it (lexically: `a/..` is the set itself), naming a store.
pub(super) fn part_dir(set: &Path, rel: &str) -> Result<PathBuf> {
    let manifest = set.join(SET_FILE);
    let refuse = |why: &str| Error::Corrupt {
        path: manifest.clone(),
        offset: 0,
        reason: format!("the part {rel:?} {why}; a part is a store named relative to the set"),
        source: None,
    };
    let path = Path::new(rel);
    if rel.is_empty() {
        return Err(refuse("is an empty path"));
    }
    if path.has_root() || path.is_absolute() || rel.contains(':') || rel.starts_with('\\') {
        return Err(refuse("is an absolute path"));
    }
    // Resolved lexically against the set's absolute path: a part that is the set itself or a
    // directory holding it (`""`, `.`, `a/..`, `../all` of the set `all`) would send the set
    // inside itself, or far more than a store.
    let set_abs = std::path::absolute(set).map_err(|e| Error::io("resolve", set, e))?;
    let mut resolved = set_abs.clone();
    for c in path.components() {
        match c {
            Component::Normal(n) => resolved.push(n),
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(refuse("is an absolute path")),
        }
    }
    if set_abs.starts_with(&resolved) {
        return Err(refuse("names the set's directory or one above it"));
    }
    let dir = set.join(path);
    if !is_store(&dir) {
        return Err(Error::NotAStore {
            path: dir,
            reason: format!("the part {rel:?} of the store set {} holds no store", set.display()),
        });
    }
    if dir.join(SET_FILE).exists() {
        return Err(Error::NotAStore {
            path: dir,
            reason: format!("the part {rel:?} of the store set {} is itself a set", set.display()),
        });
    }
    Ok(dir)
}

/// Uploads the files of one store (or, `set`, a set's own schema and manifest) in `dir` to `url`;
/// the caller holds a store still ([`hold_still`]) until it is up.
pub(super) fn push_dir(
    dir: &crate::sys::Dir,
    url: &str,
    options: &RemoteOptions,
    progress: &dyn Fn(u64),
    set: bool,
) -> Result<(u64, u64)> {
    let (bucket, prefix) = parse_url(url)?;
    // A v1 store's meta.zr is a fixed 256 MiB table: only its committed prefix (the header
    // and `length` entries) goes up, all a reader fetches.
    let v1_prefix = if !set && dir.stat(META_FILE).is_ok() { Some(v1_committed(dir)?) } else { None };
    let store = options.build(&bucket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))?;
    // The multipart writer spawns its part uploads on the current runtime.
    let _entered = runtime.enter();
    let files = files_to_push(dir, set, v1_prefix)?;
    let key = |name: &str| {
        if prefix.is_empty() { ObjectPath::from(name) } else { ObjectPath::from(format!("{prefix}/{name}")) }
    };
    // A chunk file is skipped only when the remote manifest (what an earlier push of this store
    // finished with) and the local one give it the same committed length and crc32c, and the
    // object there has that length: a store pushed again after appends sends what changed,
    // another store under the same URL is uploaded whole.
    let manifest = |bytes: &[u8]| crate::format::v2::Manifest::decode(bytes).ok();
    let local_manifest = read_all(dir, MANIFEST_FILE).ok().and_then(|b| manifest(&b));
    // What the server sends is read with a cap (a lying length would size an allocation);
    // any failure only means nothing is skipped.
    let remote_manifest = runtime
        .block_on(async {
            let response = store.get(&key(MANIFEST_FILE)).await.map_err(super::body::BodyError::Store)?;
            super::body::read(response, super::body::Expect::AtMost(MAX_MANIFEST)).await
        })
        .ok()
        .and_then(|b| manifest(&b));
    let same_chunk = |name: &str| -> bool {
        let Some(id) = name.strip_suffix(".zr").and_then(|n| n.parse::<usize>().ok()) else { return false };
        match (&local_manifest, &remote_manifest) {
            (Some(l), Some(r)) => l.chunks.get(id).is_some_and(|c| r.chunks.get(id) == Some(c)),
            _ => false,
        }
    };
    // A v2 index there (another store, or this one before a migration to v1) would hide the v1
    // store's `meta.zr` from every reader, who open `index.zr` first: removed before anything
    // goes up (look 81: a v1 push said "pushed" and readers read the old v2 store).
    if v1_prefix.is_some() {
        remove_object(&runtime, store.as_ref(), &key(INDEX_FILE), url, INDEX_FILE, options)?;
    }
    let local: Vec<&str> = files.iter().map(|(n, _, _)| n.as_str()).collect();
    remove_stale(&runtime, store.as_ref(), &key, dir, &local, url, options)?;
    let (mut sent, mut uploaded) = (0u64, 0u64);
    // Whether the remote manifest may still vouch for a chunk object this push replaces.
    let mut vouching = remote_manifest.is_some();
    // Each object as this push left or found it (its entity tag), asked again at the end.
    let mut tags: Vec<(String, Option<String>)> = Vec::with_capacity(files.len());
    for (name, path, len) in files {
        let k = key(&name);
        let head = runtime.block_on(store.head(&k)).ok();
        let there = head.as_ref().map(|m| m.size);
        let mut tag = head.and_then(|m| m.e_tag);
        if there != Some(len) || !same_chunk(&name) {
            let failed = |e: object_store::Error| Error::Remote {
                url: format!("{}/{name}", url.trim_end_matches('/')),
                range: None,
                reason: options.scrub(&e.to_string()),
            };
            // The remote manifest goes before the first chunk object is replaced (look 77: it
            // would vouch for bytes it does not describe, which a later push would skip).
            if vouching && is_chunk(&name) {
                remove_object(&runtime, store.as_ref(), &key(MANIFEST_FILE), url, MANIFEST_FILE, options)?;
                vouching = false;
            }
            let put = match v1_prefix {
                Some(n) if name == META_FILE => n,
                _ => len,
            };
            if name == META_FILE
                && let Some(n) = v1_prefix
            {
                let mut bytes = vec![0u8; n as usize];
                let f = dir.open_file(&name, Access::Read).map_err(|e| Error::io("open", &path, e))?;
                crate::sys::read_exact_at(&f, &mut bytes, 0).map_err(|e| Error::io("read", &path, e))?;
                runtime.block_on(store.put(&k, PutPayload::from(bytes))).map_err(failed)?;
            } else if len <= MULTIPART_OVER {
                let bytes = read_all(dir, &name)?;
                changed_since_listed(&path, len, bytes.len() as u64)?;
                runtime.block_on(store.put(&k, PutPayload::from(bytes))).map_err(failed)?;
            } else {
                put_in_parts(&runtime, store.as_ref(), &k, dir, (&name, &path, len), &|n| progress(sent + n))
                    .map_err(|e| e.either(failed))?;
            }
            // What the server says it holds now: a server that answered a put with success
            // without keeping the bytes made push report a store pushed that was not (look 112,
            // L112-4).
            let now = runtime.block_on(store.head(&k)).map_err(failed)?;
            let held = now.size;
            tag = now.e_tag;
            if held != put {
                return Err(Error::Remote {
                    url: format!("{}/{name}", url.trim_end_matches('/')),
                    range: None,
                    reason: format!("the server took {put} bytes and holds {held}: the upload did not land"),
                });
            }
            uploaded += put;
        }
        tags.push((name, tag));
        sent += len;
        progress(sent);
    }
    // What this store lacks, removed from the URL before anything went up (`remove_stale`).
    // Of a set's own files, a store's index (look 183, L183-1: a store pushed there meanwhile
    // was read under the set's schema, "all intact").
    let absent: Vec<&str> = if set {
        vec![INDEX_FILE, META_FILE]
    } else {
        [SCHEMA_FILE, CLASSES_FILE, DICT_FILE, SET_FILE, META_FILE, MANIFEST_FILE, INDEX_FILE]
            .into_iter()
            .filter(|n| !tags.iter().any(|(t, _)| t == n))
            .collect()
    };
    still_ours(&runtime, store.as_ref(), &key, (url, options), &tags, &absent)?;
    Ok((sent, uploaded))
}

/// Checks that each object this push put or kept at `url` (`tags`: its name and entity tag) is
/// still as it left it, and that each of `absent` (what this store lacks, removed from the URL
/// before anything went up) is still not there: another push to the same URL meanwhile (look
/// 179, L179-2: two pushes of different stores both said they pushed, and left one's chunk
/// under the other's index; look 181, L181-1: or one's records under the other's schema) fails
/// the push, and the URL's index, manifest and set manifest are taken down
/// ([`take_down_index`]): no store there, an error to every reader, never a mix. Objects the
/// server gave no entity tag are not asked.
///
/// # Errors
/// [`Error::Remote`] naming the URL; its requests' errors.
fn still_ours(
    runtime: &tokio::runtime::Runtime,
    store: &dyn ObjectStore,
    key: &dyn Fn(&str) -> ObjectPath,
    (url, options): (&str, &RemoteOptions),
    tags: &[(String, Option<String>)],
    absent: &[&str],
) -> Result<()> {
    let changed = tags.iter().find_map(|(name, tag)| {
        let tag = tag.as_ref()?;
        let now = runtime.block_on(store.head(&key(name))).ok().and_then(|m| m.e_tag);
        (now.as_ref() != Some(tag)).then_some(name.as_str())
    });
    let appeared = || absent.iter().copied().find(|name| runtime.block_on(store.head(&key(name))).is_ok());
    let Some(name) = changed.or_else(appeared) else { return Ok(()) };
    take_down_index(url, options)?;
    Err(Error::Remote {
        url: crate::redact_urls(url),
        range: None,
        reason: format!(
            "{name} changed while this push ran (another push to the same URL); the URL's index and \
             manifests were taken down, no store or set is there: push again, one push to a URL at a time"
        ),
    })
}

/// Removes from the URL what it held before that would be read with the store in `dir` (its
/// files `local`) as if it were its own (look 91, N1: a raw store pushed over a dataset read as
/// the dataset's type, and verified "intact"). When what describes the records changes (the
/// schema, as a schema: an older encoding of the same one is the same; the class names; either
/// present or not), the URL's index goes first, so that until this store's index is up the URL
/// is no store (an error to a reader), never one store's index read with another's schema, and
/// a push cut short leaves no store that verifies (look 93, F1 and F2). Then the files this
/// store lacks: schema, class names, dictionary, a set's manifest, the other format's index
/// metadata and manifest. Of a set (`local` its own files), only its manifest goes first when
/// its schema changes.
fn remove_stale(
    runtime: &tokio::runtime::Runtime,
    store: &dyn ObjectStore,
    key: &dyn Fn(&str) -> ObjectPath,
    dir: &crate::sys::Dir,
    local: &[&str],
    url: &str,
    options: &RemoteOptions,
) -> Result<()> {
    let changed = describing_changed(runtime, store, key, dir, local)?;
    if local.contains(&SET_FILE) {
        // A set (its own files only) of another schema: the URL's manifest first, so that a
        // push cut short leaves no set whose manifest is read against the new schema (look
        // 156, L156-1's class).
        if changed {
            remove_object(runtime, store, &key(SET_FILE), url, SET_FILE, options)?;
        }
        return Ok(());
    }
    if changed {
        for name in [INDEX_FILE, META_FILE] {
            remove_object(runtime, store, &key(name), url, name, options)?;
        }
    }
    for name in [SCHEMA_FILE, CLASSES_FILE, DICT_FILE, SET_FILE, META_FILE, MANIFEST_FILE] {
        if !local.contains(&name) {
            remove_object(runtime, store, &key(name), url, name, options)?;
        }
    }
    Ok(())
}

/// Whether what describes the records in `dir` (its files `local`) differs from what the URL
/// holds: the schema, as a schema (an older encoding of the same one is the same), the class
/// names, either present or not; a failed request counts as a change.
fn describing_changed(
    runtime: &tokio::runtime::Runtime,
    store: &dyn ObjectStore,
    key: &dyn Fn(&str) -> ObjectPath,
    dir: &crate::sys::Dir,
    local: &[&str],
) -> Result<bool> {
    let mut changes = false;
    for name in DESCRIBING {
        let mine = if local.contains(&name) { Some(read_all(dir, name)?) } else { None };
        // What the URL holds under the name, read up to one byte past this store's (or, where
        // this store has none, only whether it is there); a failed request counts as a change.
        let there = runtime.block_on(async {
            let response = store.get(&key(name)).await?;
            let cap = mine.as_ref().map_or(0, Vec::len) as u64 + 1;
            Ok::<_, object_store::Error>(
                super::body::read(response, super::body::Expect::AtMost(cap)).await.ok(),
            )
        });
        let same = match (&mine, there) {
            (None, Err(object_store::Error::NotFound { .. })) => true,
            (Some(mine), Ok(Some(there))) => {
                there[..] == mine[..] || name == SCHEMA_FILE && same_schema(mine, &there)
            }
            _ => false,
        };
        changes |= !same;
    }
    Ok(changes)
}

/// Whether two `schema.msgpack` files say the same kind, element type and shape (one written
/// before schemas carried their checksum, say). Read here as MessagePack fields, not as the
/// dataset layer's schema (a layer above this one): either failing to read is a change.
pub(super) fn same_schema(a: &[u8], b: &[u8]) -> bool {
    #[derive(serde::Deserialize, PartialEq)]
    struct Says {
        kind: String,
        dtype: String,
        shape: Vec<u64>,
    }
    match (rmp_serde::from_slice::<Says>(a), rmp_serde::from_slice::<Says>(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Removes the object `name` at `key` of the store at `url` (there or not). The remote manifest
/// goes before a push replaces a chunk object: it describes the chunks an earlier push finished
/// with, and a push stopped after replacing one (with another store's chunk of the same length,
/// say) would leave it vouching for bytes it does not describe, which a later push would skip as
/// already there (look 77). Readers never read it; the push writes the new one after its chunks.
///
/// # Errors
/// [`Error::Remote`] naming the object's URL.
fn remove_object(
    runtime: &tokio::runtime::Runtime,
    store: &dyn ObjectStore,
    key: &ObjectPath,
    url: &str,
    name: &str,
    options: &RemoteOptions,
) -> Result<()> {
    match runtime.block_on(store.delete(key)) {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(Error::Remote {
            url: format!("{}/{name}", url.trim_end_matches('/')),
            range: None,
            reason: options.scrub(&e.to_string()),
        }),
    }
}
