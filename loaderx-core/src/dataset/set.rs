//! Store sets: datasets converted in parts (`convert jsonl --part K --parts N` on many machines)
//! opened as one dataset with global indices. A set is a directory holding `storeset.msgpack`
//! (the parts, in order, with their record counts) and a copy of the parts' `schema.msgpack`;
//! record `i` of the set is record `i - start(p)` of the part `p` whose range holds `i`.

use std::path::{Component, Path, PathBuf};

use super::schema::Schema;
use super::set_open::is_set;
use super::set_staging::{place, staging_for};
use crate::format::storeset::{MAX_SET_MANIFEST, SetManifest, SetPart};
use crate::{Error, Result, Store};

pub use crate::format::storeset::SET_FILE;

/// The manifest of the set in `dir` (`None` when `dir` holds none), read with its size capped.
///
/// # Errors
/// [`Error::Io`] or [`Error::Corrupt`] naming the manifest.
pub(super) fn read_manifest(dir: &Path) -> Result<Option<SetManifest>> {
    let file = dir.join(SET_FILE);
    if !is_set(dir) {
        return Ok(None);
    }
    let Some(bytes) = crate::store::read_capped(&file, MAX_SET_MANIFEST)? else { return Ok(None) };
    decode(&bytes, &file).map(Some)
}

/// The manifest in `bytes` (of `file`, for errors).
pub(super) fn decode(bytes: &[u8], file: &Path) -> Result<SetManifest> {
    SetManifest::decode(bytes).map_err(|e| Error::Corrupt {
        path: file.to_path_buf(),
        offset: e.offset,
        reason: e.reason,
        source: e.source.map(Into::into),
    })
}

/// The parts of the store set in `dir`, as written in its manifest: (path relative to `dir`,
/// records), or `None` when `dir` holds no set. Only the manifest is read (the parts are not
/// opened).
///
/// # Errors
/// [`Error::Io`] or [`Error::Corrupt`] naming the manifest.
pub fn set_parts(dir: impl AsRef<Path>) -> Result<Option<Vec<(String, u64)>>> {
    Ok(read_manifest(dir.as_ref())?.map(|m| m.parts.into_iter().map(|e| (e.path, e.records)).collect()))
}

/// What [`stitch`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StitchSummary {
    /// Parts in the set.
    pub parts: usize,
    /// Records over all parts.
    pub records: u64,
}

/// Writes a store set at `out` listing the datasets `parts` in order (each a dense or ragged
/// dataset, all of one schema), so that [`DenseSource::open`](crate::DenseSource::open),
/// [`RaggedSource::open`](crate::RaggedSource::open), the loader and the adapters open `out` as
/// one dataset. The parts stay where they are (the manifest names them relative to `out`); a
/// part changed afterwards (appended to, replaced) is an error when the set is opened.
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts or more than `u32::MAX` records in all (the
/// loader's indices); [`Error::Schema`] naming the first part whose schema differs from the
/// first's; [`Error::InvalidArgument`] when `out` exists; the parts' open errors.
pub fn stitch<P: AsRef<Path>>(parts: &[P], out: impl AsRef<Path>) -> Result<StitchSummary> {
    let out = out.as_ref();
    if parts.is_empty() {
        return Err(Error::InvalidArgument("a store set needs at least one part".into()));
    }
    if out.exists() {
        return Err(Error::InvalidArgument(format!("{} exists; a store set is written new", out.display())));
    }
    let mut schema: Option<Schema> = None;
    let mut entries = Vec::with_capacity(parts.len());
    let mut records = 0u64;
    // Related through the paths the kernel will follow: a link on `out`'s way (or a part's)
    // would otherwise make a lexically relative path name another directory.
    let out_abs = resolved(out)?;
    let mut seen = SameStore::default();
    for p in parts {
        let p = p.as_ref();
        let s = Schema::read(p)?;
        match &schema {
            None => schema = Some(s.clone()),
            Some(first) if *first != s => {
                return Err(Error::Schema {
                    path: p.to_path_buf(),
                    reason: format!("the part's schema ({s}) differs from the first part's ({first})"),
                });
            }
            Some(_) => {}
        }
        let store = Store::open(p).map_err(|e| nested_set(e, is_set(p), &p.display()))?;
        if let Some(first) = seen.insert(&store, p)? {
            return Err(Error::InvalidArgument(format!(
                "{} is the same store as the part {}: a set would read its records twice",
                p.display(),
                first.display()
            )));
        }
        // A part being appended to moves between its count and its identity read apart, and the
        // set would be refused from the start (look 115, L115-2): read again until the count
        // holds still around the identity, a few times, else refused.
        let (n, identity) = steady_count(&store, p)?;
        records = records
            .checked_add(n)
            .ok_or_else(|| Error::InvalidArgument("the parts hold more than 2^64 - 1 records".into()))?;
        let part_abs = resolved(p)?;
        // A set inside one of its parts names that part `..` and goes up inside it, which
        // `push` refuses (look 91, N2): a set lies beside its parts, or above them.
        if out_abs.starts_with(&part_abs) {
            return Err(Error::InvalidArgument(format!(
                "{} lies inside the part {}: a store set is written beside its parts or above them",
                out.display(),
                p.display()
            )));
        }
        let rel = relative(&part_abs, &out_abs);
        // The manifest holds UTF-8 paths: a lossy one would name another path, which the set
        // then never opens (review 46, finding 4).
        let Some(rel) = rel.to_str() else {
            return Err(Error::InvalidArgument(format!(
                "{}: a set names its parts by UTF-8 paths, and the path from the set to this part is not UTF-8 ({})",
                p.display(),
                rel.display()
            )));
        };
        entries.push(SetPart { path: rel.to_owned(), records: n, identity: Some(identity) });
    }
    if records > u64::from(u32::MAX) {
        return Err(Error::InvalidArgument(format!(
            "a store set of {records} records: the loader indexes at most 2^32 - 1"
        )));
    }
    let schema = schema.unwrap_or_else(|| unreachable!("at least one part"));
    let bytes = SetManifest::new(entries).encode();
    // Written whole beside `out` and renamed into place (a sibling: the parts' relative paths
    // are the same from it).
    let (staging, lock) = staging_for(out)?;
    let written =
        schema.write(&staging).and_then(|()| crate::store::write_atomic(&staging, SET_FILE, &bytes));
    place(written, (&staging, lock), out)?;
    Ok(StitchSummary { parts: parts.len(), records })
}

/// The parts of [`stitch_datasets`]: each a directory of datasets by name (what `convert
/// parquet`, `safetensors` and `images` write), its other regular files (`classes.txt`).
struct Group {
    datasets: Vec<String>,
    files: Vec<String>,
}

/// The datasets and other regular files directly in `dir` (hidden names left out, but for
/// datasets), sorted; a link counts as the dataset or regular file it leads to inside `dir`,
/// any other is refused.
fn group_of(dir: &Path) -> Result<Group> {
    let (mut datasets, mut files) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))? {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let path = entry.path();
        let dataset = path.join(super::schema::SCHEMA_FILE).is_file();
        // A hidden file (`.DS_Store`) is no part of the data; a dataset is, whatever its name
        // (look 100, L100-1: a tensor or column named `.hidden` was left out of the set).
        if name.starts_with('.') && !dataset {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if dataset && !meta.file_type().is_symlink() {
            datasets.push(name);
        } else if meta.is_file() {
            files.push(name);
        } else if meta.file_type().is_symlink() {
            // A link was left out without a word (look 56, S1), or led to a dataset anywhere
            // (look 57): one to a dataset or a regular file inside the part counts as that; any
            // other is refused, named.
            let inside = match (std::fs::canonicalize(&path), std::fs::canonicalize(dir)) {
                (Ok(target), Ok(root)) => target.starts_with(&root) && (dataset || target.is_file()),
                _ => false,
            };
            if inside && dataset {
                datasets.push(name);
                continue;
            }
            if !inside {
                return Err(Error::BadInput {
                    path,
                    reason: "a link to no dataset or regular file of its part: stitch takes a part's own \
                             datasets and files; put a copy in its place"
                        .into(),
                    source: None,
                });
            }
            files.push(name);
        }
    }
    // A replacement's leftovers beside the dataset they were (a crash's: `x.partial`, `x.old`,
    // `x.old1`, ...) are no datasets of the part (look 106, L106-2: counted, the part's datasets
    // differed from its siblings', and another part was blamed).
    let leftover = |n: &str| {
        datasets.iter().any(|d| {
            n.strip_prefix(d.as_str()).is_some_and(|rest| {
                rest == ".partial"
                    || rest.strip_prefix(".old").is_some_and(|k| k.bytes().all(|b| b.is_ascii_digit()))
            })
        })
    };
    let kept: Vec<String> = datasets.iter().filter(|n| !leftover(n)).cloned().collect();
    let mut datasets = kept;
    datasets.sort();
    files.sort();
    Ok(Group { datasets, files })
}

/// The count of the part `store` (at `path`) and its identity, read while the count held still.
///
/// # Errors
/// [`Error::InvalidArgument`] naming a part whose count moved at every try (a writer appending
/// to it); the identity's errors.
fn steady_count(store: &Store, path: &Path) -> Result<(u64, u64)> {
    for _ in 0..8 {
        let n = store.len();
        let identity = store.identity()?.now;
        if store.len() == n {
            return Ok((n, identity));
        }
    }
    Err(Error::InvalidArgument(format!(
        "{}: the part's count moved while it was read (a writer is appending to it): stitch the set once its \
         parts are complete",
        path.display()
    )))
}

/// `err`, the open error of the part `part`, or, where the part is a store set (`is_set`), a
/// refusal that says so: sets do not nest (look 87, F87-4: "not a loaderx store").
pub(crate) fn nested_set(err: Error, is_set: bool, part: &dyn std::fmt::Display) -> Error {
    if is_set && matches!(err, Error::NotAStore { .. }) {
        return Error::InvalidArgument(format!(
            "{part} is a store set: sets do not nest; stitch the set's parts instead"
        ));
    }
    err
}

/// Writes one store set per dataset of `parts`, each part a directory of datasets by name (the
/// output of `convert parquet`, `safetensors` or `images` run with a part): `out/<name>` is
/// [`stitch`] of every part's `<name>`, in order. Every part holds the same datasets; the other
/// regular files of the first part (`classes.txt`) are copied to `out` when every part holds
/// them with the same bytes. Returns each dataset's name and summary, in name order.
///
/// # Errors
/// [`Error::InvalidArgument`] for no parts or an existing `out`; [`Error::BadInput`] naming a part
/// that holds no dataset, or other datasets or files than the first part, or a file whose bytes
/// differ from the first part's; [`Error::Io`] naming the file; [`stitch`]'s errors. On error
/// nothing is left at `out`.
pub fn stitch_datasets<P: AsRef<Path>>(
    parts: &[P],
    out: impl AsRef<Path>,
) -> Result<Vec<(String, StitchSummary)>> {
    let out = out.as_ref();
    let Some(first) = parts.first().map(AsRef::as_ref) else {
        return Err(Error::InvalidArgument("a store set needs at least one part".into()));
    };
    // Anything at `out`, a dangling link included (`exists` follows links and says no).
    if std::fs::symlink_metadata(out).is_ok() {
        return Err(Error::InvalidArgument(format!("{} exists; a store set is written new", out.display())));
    }
    let want = group_of(first)?;
    let bad = |p: &Path, reason: String| Error::BadInput { path: p.to_path_buf(), reason, source: None };
    if want.datasets.is_empty() {
        return Err(bad(first, "neither a dataset nor a directory of datasets".into()));
    }
    let copies = &want.files;
    for p in &parts[1..] {
        let p = p.as_ref();
        let g = group_of(p)?;
        if g.datasets != want.datasets || g.files != want.files {
            return Err(bad(
                p,
                format!(
                    "it holds the datasets {:?} and files {:?}; the first part {:?} and {:?}",
                    g.datasets, g.files, want.datasets, want.files
                ),
            ));
        }
        for f in copies {
            if !super::side::same_bytes(&first.join(f), &p.join(f))? {
                return Err(bad(&p.join(f), format!("differs from the first part's {f}")));
            }
        }
    }
    // Checked here, naming `out`: within, each dataset's set is made in a staging directory,
    // whose path the part's refusal would name (look 93, F93-5).
    let out_abs = resolved(out)?;
    for p in parts {
        if out_abs.starts_with(resolved(p.as_ref())?) {
            return Err(Error::InvalidArgument(format!(
                "{} lies inside the part {}: a store set is written beside its parts or above them",
                out.display(),
                p.as_ref().display()
            )));
        }
    }
    // Written whole in a staging directory of this call's own, then renamed into place.
    let (staging, lock) = staging_for(out)?;
    let mut done = Vec::new();
    let written = stitch_each(parts, &staging, &want.datasets, copies).map(|d| done = d);
    place(written, (&staging, lock), out)?;
    // The list of copies goes once the set is in place, not before: a stitch killed until then
    // leaves its staging swept whole. A kill here leaves only that hidden file in the set.
    let _ = super::set_staging::copied(out);
    Ok(done)
}

/// Stitches `out/<name>` for every name and copies the files into `out`.
fn stitch_each<P: AsRef<Path>>(
    parts: &[P],
    out: &Path,
    names: &[String],
    copies: &[String],
) -> Result<Vec<(String, StitchSummary)>> {
    let mut done = Vec::with_capacity(names.len());
    for name in names {
        let of: Vec<PathBuf> = parts.iter().map(|p| p.as_ref().join(name)).collect();
        done.push((name.clone(), stitch(&of, out.join(name))?));
    }
    let Some(first) = parts.first() else { return Ok(done) };
    // Listed first, so that a killed stitch's copies are known for its own (look 140, L140-2).
    super::set_staging::copying(out, copies)?;
    for f in copies {
        let from = first.as_ref().join(f);
        let mut src = std::fs::File::open(&from).map_err(|e| Error::io("open", &from, e))?;
        crate::store::write_atomic_with(out, f, |file, tmp| {
            let mut to = file;
            std::io::copy(&mut src, &mut to).map(drop).map_err(|e| Error::io("copy into", tmp, e))
        })?;
    }
    Ok(done)
}

/// The parts of a set seen so far, by store identity ([`Store::key`]): one store under two
/// names (a link, a second path) is one part, never two.
#[derive(Default)]
pub(super) struct SameStore(std::collections::HashMap<crate::store::StoreKey, PathBuf>);

impl SameStore {
    /// Records `store` (at `path`); the path of an earlier part that is the same store, if any.
    pub(super) fn insert(&mut self, store: &Store, path: &Path) -> Result<Option<PathBuf>> {
        Ok(match self.0.entry(store.key()?) {
            std::collections::hash_map::Entry::Occupied(o) => Some(o.get().clone()),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(path.to_path_buf());
                None
            }
        })
    }
}

/// `p` with every link resolved: its longest existing prefix canonicalised, the rest (not yet
/// created, so holding no link) appended.
fn resolved(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p).map_err(|e| Error::io("resolve", p, e))?;
    let mut rest = Vec::new();
    let mut head = abs.as_path();
    loop {
        match std::fs::canonicalize(head) {
            Ok(mut real) => {
                real.extend(rest.iter().rev());
                return Ok(real);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match (head.parent(), head.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    head = parent;
                }
                _ => return Err(Error::io("resolve", p, e)),
            },
            Err(e) => return Err(Error::io("resolve", p, e)),
        }
    }
}

/// `target` as a path relative to the directory `base` (both absolute), through `..` where they
/// part; `target` itself when they share no root.
fn relative(target: &Path, base: &Path) -> PathBuf {
    let t: Vec<Component<'_>> = target.components().collect();
    let b: Vec<Component<'_>> = base.components().collect();
    let common = t.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return target.to_path_buf();
    }
    let mut rel = PathBuf::new();
    for _ in common..b.len() {
        rel.push("..");
    }
    for c in &t[common..] {
        rel.push(c.as_os_str());
    }
    rel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_climb_to_the_common_directory() {
        let r = |t: &str, b: &str| relative(Path::new(t), Path::new(b));
        assert_eq!(r("/data/parts/p0", "/data/set"), Path::new("../parts/p0"));
        assert_eq!(r("/data/set/p0", "/data/set"), Path::new("p0"));
        assert_eq!(r("/a/b", "/c/d/e"), Path::new("../../../a/b"));
    }
}
