//! File-level entry points: map an immutable input once ([`MappedFile`]) and plan over its bytes.

use std::path::Path;

use super::multi::partition_files;
use super::partition::partition;
use super::range::{FilePartRange, PartRange};
use crate::{Error, MappedFile, Result};

impl MappedFile {
    /// Plans `parts` record-aligned ranges over the file; see [`partition`] (0 parts: an empty
    /// plan, as mmap-chunker's `partition_records(0, d)`).
    ///
    /// # Errors
    /// None today; the `Result` is [`partition`]'s.
    pub fn partition(&self, parts: usize, delimiter: u8) -> Result<Vec<PartRange>> {
        partition(self.bytes(), parts, delimiter)
    }
}

/// Maps the file at `path` and plans `parts` record-aligned ranges on the single byte
/// `delimiter`; the mapping is released before returning, the plan is plain data.
///
/// Semantics are [`partition`]'s: an empty file gives zero ranges, giant records give fewer
/// ranges than asked, a missing trailing delimiter is fine, 0 parts give an empty plan. The
/// file is opened whatever `parts` is (as mmap-chunker's `open` then `partition_records`), so a
/// path that cannot be mapped is an error even then.
///
/// # Errors
/// [`Error::Io`] naming `path` when it cannot be opened or mapped.
pub fn plan_file(path: impl AsRef<Path>, parts: usize, delimiter: u8) -> Result<Vec<PartRange>> {
    MappedFile::open(path)?.partition(parts, delimiter)
}

/// Maps every file of the ordered list `paths` and plans `parts` workers' ranges over them as
/// one logical dataset; see [`partition_files`]. Duplicate paths are distinct sources.
///
/// As in [`plan_file`], 0 parts give an empty plan once every file has been opened.
///
/// # Errors
/// [`Error::InvalidArgument`] when `paths` is empty (checked before any file is opened);
/// [`Error::Io`] naming the first path that cannot be opened or mapped.
pub fn plan_files<P: AsRef<Path>>(paths: &[P], parts: usize, delimiter: u8) -> Result<Vec<FilePartRange>> {
    if paths.is_empty() {
        return Err(Error::InvalidArgument("at least one source path is required".to_owned()));
    }
    let files = paths.iter().map(MappedFile::open).collect::<Result<Vec<_>>>()?;
    let sources: Vec<&[u8]> = files.iter().map(MappedFile::bytes).collect();
    partition_files(&sources, parts, delimiter)
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::PathBuf;

    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn plan_file_matches_partition_of_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let data = b"one\ntwo\nthree\nfour\nfive\n";
        let p = write(dir.path(), "a.jsonl", data);
        assert_eq!(plan_file(&p, 3, b'\n').unwrap(), partition(data, 3, b'\n').unwrap());
        let m = MappedFile::open(&p).unwrap();
        assert_eq!(m.bytes(), data);
        assert_eq!(m.len(), data.len() as u64);
        assert_eq!(m.path(), p);
        let plan = m.partition(3, b'\n').unwrap();
        let joined: Vec<u8> = plan.iter().flat_map(|r| r.slice(m.bytes()).unwrap()).copied().collect();
        assert_eq!(joined, data);
    }

    #[test]
    fn empty_file_is_not_mapped_and_gives_no_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "empty", b"");
        let m = MappedFile::open(&p).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.bytes(), b"");
        assert!(plan_file(&p, 4, b'\n').unwrap().is_empty());
    }

    #[test]
    fn missing_file_error_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope.jsonl");
        let err = plan_file(&p, 2, b'\n').unwrap_err();
        match &err {
            Error::Io { op, path, source } => {
                assert_eq!(*op, "open");
                assert_eq!(path, &p);
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("nope.jsonl"));
    }

    #[test]
    fn directory_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = MappedFile::open(dir.path()).unwrap_err();
        assert!(matches!(&err, Error::Io { path, .. } if path == dir.path()));
    }

    #[test]
    fn parts_zero_gives_an_empty_plan_after_opening() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", b"a1\na2\n");
        assert_eq!(plan_file(&a, 0, b'\n').unwrap(), []);
        assert_eq!(MappedFile::open(&a).unwrap().partition(0, b'\n').unwrap(), []);
        assert_eq!(plan_files(&[&a, &a], 0, b'\n').unwrap(), []);
        // The files are still opened: a missing one is an error naming it.
        let missing = dir.path().join("missing");
        assert!(matches!(plan_file(&missing, 0, b'\n'), Err(Error::Io { path, .. }) if path == missing));
        let err = plan_files(&[&a, &missing], 0, b'\n').unwrap_err();
        assert!(matches!(&err, Error::Io { path, .. } if path == &missing));
    }

    #[test]
    fn plan_files_maps_every_source_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", b"a1\na2\n");
        let e = write(dir.path(), "e", b"");
        let rows = plan_files(&[&a, &e, &a], 2, b'\n').unwrap();
        let flat: Vec<_> = rows.iter().map(|r| (r.worker, r.source, r.start, r.end)).collect();
        assert_eq!(flat, [(0, 0, 0, 6), (1, 2, 0, 6)]);
        let none: [&Path; 0] = [];
        assert!(matches!(plan_files(&none, 2, b'\n'), Err(Error::InvalidArgument(_))));
        let missing = dir.path().join("missing");
        let err = plan_files(&[&a, &missing], 2, b'\n').unwrap_err();
        assert!(matches!(&err, Error::Io { path, .. } if path == &missing));
    }
}
