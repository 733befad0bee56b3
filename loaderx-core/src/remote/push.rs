//! [`push`]: a local store uploaded to object storage, restartable, the index last.

use std::path::{Path, PathBuf};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutPayload};

use super::{RemoteOptions, parse_url, scrub};
use crate::{Error, Result};

/// Files larger than this go up as multipart uploads, in parts of [`PART`] bytes.
const MULTIPART_OVER: u64 = 32 << 20;
const PART: u64 = 16 << 20;

/// Uploads the local store (or dataset) directory `dir` to `url`: every regular file, a chunk
/// file skipped when it is already there with the same length and (by the store's manifests)
/// the same crc32c, so an interrupted push restarts where it stopped, the index last (a reader opening the store during a push sees the old index or
/// none). `progress` is called with the bytes sent so far. Of a v1 store's `meta.zr` (a fixed
/// 256 MiB table) only the committed prefix goes up; v1 stores have no manifest, so a restarted
/// push of one sends every file again.
///
/// # Errors
/// [`Error::Io`] naming a local file; [`Error::Remote`] naming the object for a failed upload;
/// [`Error::Corrupt`] for a v1 `meta.zr` whose header does not parse.
pub fn push(dir: &Path, url: &str, options: RemoteOptions, progress: impl Fn(u64)) -> Result<u64> {
    push_dir(dir, url, &options, &progress)
}

fn push_dir(dir: &Path, url: &str, options: &RemoteOptions, progress: &dyn Fn(u64)) -> Result<u64> {
    // A store set: its parts first, each to the URL its manifest path names relative to the
    // set's, then the set's own files (the manifest last of all).
    let mut base = 0u64;
    for (rel, _) in crate::dataset::parts_of(dir)?.unwrap_or_default() {
        let part_url = super::join_url(url, &rel)?;
        base += push_dir(&dir.join(&rel), &part_url, options, &|n| progress(base + n))?;
    }
    let progress = |n: u64| progress(base + n);
    let (bucket, prefix) = parse_url(url)?;
    // A v1 store's meta.zr is a fixed 256 MiB table: only its committed prefix (the header
    // and `length` entries) goes up, all a reader fetches.
    let meta = dir.join("meta.zr");
    let v1_prefix = if meta.exists() { Some(v1_committed(&meta)?) } else { None };
    let store = options.build(&bucket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::io("start the runtime of", url, e))?;
    // The multipart writer spawns its part uploads on the current runtime.
    let _entered = runtime.enter();
    let mut files: Vec<(String, PathBuf, u64)> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let e = e.map_err(|e| Error::io("read directory", dir, e))?;
        let meta = e.metadata().map_err(|err| Error::io("stat", e.path(), err))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if meta.is_file() && name != "write.lock" {
            let len = if name == "meta.zr" { v1_prefix.unwrap_or(meta.len()) } else { meta.len() };
            files.push((name, e.path(), len));
        }
    }
    // The index goes last: its count publishes the records.
    files.sort_by_key(|(n, _, _)| {
        (n == "index.zr" || n == "meta.zr" || n == crate::dataset::SET_FILE, n.clone())
    });
    let key = |name: &str| {
        if prefix.is_empty() { ObjectPath::from(name) } else { ObjectPath::from(format!("{prefix}/{name}")) }
    };
    // A chunk file is skipped only when the remote manifest (what an earlier push of this store
    // finished with) and the local one give it the same committed length and crc32c, and the
    // object there has that length: a restarted push resumes, another store under the same URL
    // is uploaded whole.
    let manifest = |bytes: &[u8]| crate::format::v2::Manifest::decode(bytes).ok();
    let local_manifest = std::fs::read(dir.join("manifest.zr")).ok().and_then(|b| manifest(&b));
    let remote_manifest = runtime
        .block_on(async { store.get(&key("manifest.zr")).await?.bytes().await })
        .ok()
        .and_then(|b| manifest(&b));
    let same_chunk = |name: &str| -> bool {
        let Some(id) = name.strip_suffix(".zr").and_then(|n| n.parse::<usize>().ok()) else { return false };
        match (&local_manifest, &remote_manifest) {
            (Some(l), Some(r)) => l.chunks.get(id).is_some_and(|c| r.chunks.get(id) == Some(c)),
            _ => false,
        }
    };
    let mut sent = 0u64;
    for (name, path, len) in files {
        let k = key(&name);
        let there = runtime.block_on(store.head(&k)).ok().map(|m| m.size);
        if there != Some(len) || !same_chunk(&name) {
            let failed = |e: object_store::Error| Error::Remote {
                url: format!("{}/{name}", url.trim_end_matches('/')),
                range: None,
                reason: scrub(&e.to_string()),
            };
            if name == "meta.zr"
                && let Some(n) = v1_prefix
            {
                let mut bytes = vec![0u8; n as usize];
                let f = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
                crate::sys::read_exact_at(&f, &mut bytes, 0).map_err(|e| Error::io("read", &path, e))?;
                runtime.block_on(store.put(&k, PutPayload::from(bytes))).map_err(failed)?;
            } else if len <= MULTIPART_OVER {
                let bytes = std::fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
                runtime.block_on(store.put(&k, PutPayload::from(bytes))).map_err(failed)?;
            } else {
                // Large chunk files go up in parts, read a part at a time.
                use std::io::Read;
                let mut f = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
                let upload = runtime.block_on(store.put_multipart(&k)).map_err(failed)?;
                let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, PART as usize);
                let mut buf = vec![0u8; PART as usize];
                let mut done = 0u64;
                loop {
                    let n = f.read(&mut buf).map_err(|e| Error::io("read", &path, e))?;
                    if n == 0 {
                        break;
                    }
                    runtime.block_on(w.wait_for_capacity(4)).map_err(failed)?;
                    w.write(&buf[..n]);
                    done += n as u64;
                    progress(sent + done);
                }
                runtime.block_on(w.finish()).map_err(failed)?;
            }
        }
        sent += len;
        progress(sent);
    }
    Ok(base + sent)
}

/// The committed prefix of a v1 `meta.zr`: its header and `length` entries, in bytes.
fn v1_committed(path: &Path) -> Result<u64> {
    use crate::format::{ENTRY_SIZE, Header};
    let f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut head = [0u8; ENTRY_SIZE];
    crate::sys::read_exact_at(&f, &mut head, 0).map_err(|e| Error::io("read", path, e))?;
    let header = Header::parse(&head).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        reason: format!("{e:?}"),
    })?;
    Ok(ENTRY_SIZE as u64 * (1 + u64::from(header.length)))
}
