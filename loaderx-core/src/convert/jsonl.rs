//! JSONL / newline-delimited text: one byte record per line, planned and split in parallel.

use std::path::Path;

use rayon::prelude::*;

use super::block::map_input;
use super::part::Part;
use super::summary::{ConvertSummary, finish};
use crate::{DatasetWriter, Error, MappedFile, Result, WriteOptions, partition, partition_files};

/// Bytes of input per planned range.
const RANGE_BYTES: u64 = 8 << 20;

/// Writes a ragged `u8` dataset at `out` with one record per line of `inputs` (the `\n` excluded,
/// anything else, `\r` included, kept): record `i` is line `i` across the files in the order
/// given. A last line without a trailing newline is a record; blank lines are empty records.
///
/// Each file is memory-mapped and cut into record-aligned ranges by the framing planner
/// ([`partition`]); the lines of a window of ranges are found in parallel (SIMD `memchr`) and
/// appended in order straight from the mapping, and compression runs in parallel inside the
/// store. The inputs must not change while they are converted. The summary's `bytes_in` counts
/// the records' bytes (newlines excluded), as `info` and [`Store::stats`](crate::Store::stats)
/// count a dataset's logical bytes; progress is reported in bytes of input read.
///
/// # Errors
/// [`Error::InvalidArgument`] for no inputs; [`Error::BadInput`] naming the file and 1-based line
/// of a line over 1 MiB, or naming an input that is not a regular file (a pipe, a device, a
/// `/proc` file: nothing is converted from input that was not read); [`Error::Io`] naming a file
/// that cannot be read; otherwise as
/// [`DatasetWriter::with_schema`]. Nothing is left at `out` on error.
pub fn jsonl<P: AsRef<Path>>(
    inputs: &[P],
    out: impl AsRef<Path>,
    opts: WriteOptions,
) -> Result<ConvertSummary> {
    if inputs.is_empty() {
        return Err(Error::InvalidArgument("convert jsonl needs at least one input file".into()));
    }
    // Open every input before writing anything, so a missing file fails fast.
    let files: Vec<MappedFile> = inputs.iter().map(|p| map_input(p.as_ref())).collect::<Result<_>>()?;
    let spans: Vec<(usize, u64, u64)> =
        files.iter().enumerate().map(|(i, f)| (i, 0, f.bytes().len() as u64)).collect();
    convert_spans(&files, &spans, out.as_ref(), opts)
}

/// [`jsonl`] of only part `part` of the inputs: the lines of the `part.index`-th of the
/// `part.count` record-aligned ranges the framing planner ([`partition_files`](crate::partition_files))
/// cuts the files into, taken as one input. Every process (a Slurm array task, a Ray or Spark
/// job) plans the same ranges from the same files with no coordination; the parts, in order,
/// hold exactly the records of the whole conversion (a part the plan leaves without bytes,
/// because giant lines swallowed its share, is an empty dataset).
///
/// # Errors
/// As [`jsonl`]; [`Error::InvalidArgument`] for a part out of range.
pub fn jsonl_part<P: AsRef<Path>>(
    inputs: &[P],
    out: impl AsRef<Path>,
    opts: WriteOptions,
    part: Part,
) -> Result<ConvertSummary> {
    let part = part.checked()?;
    if inputs.is_empty() {
        return Err(Error::InvalidArgument("convert jsonl needs at least one input file".into()));
    }
    let files: Vec<MappedFile> = inputs.iter().map(|p| map_input(p.as_ref())).collect::<Result<_>>()?;
    let sources: Vec<&[u8]> = files.iter().map(MappedFile::bytes).collect();
    let spans: Vec<(usize, u64, u64)> = partition_files(&sources, part.count, b'\n')?
        .into_iter()
        .filter(|r| r.worker == part.index as u64)
        .map(|r| (r.source as usize, r.start, r.end))
        .collect();
    convert_spans(&files, &spans, out.as_ref(), opts)
}

/// Writes the lines of each `(file, start, end)` span, in order, as one ragged `u8` dataset.
fn convert_spans(
    files: &[MappedFile],
    spans: &[(usize, u64, u64)],
    out: &Path,
    opts: WriteOptions,
) -> Result<ConvertSummary> {
    let mut w = DatasetWriter::ragged::<u8>(out, Vec::new(), opts.clone())?;
    let window = 2 * rayon::current_num_threads();
    let mut done = 0u64;
    // The records' bytes, newlines excluded: what `info` reports as the logical size.
    let mut logical = 0u64;
    for &(f, start, end) in spans {
        let file = &files[f];
        let bytes = &file.bytes()[start as usize..end as usize];
        let parts = (bytes.len() as u64).div_ceil(RANGE_BYTES).max(1) as usize;
        let ranges = partition(bytes, parts, b'\n')?;
        for group in ranges.chunks(window) {
            let lines: Vec<Vec<&[u8]>> = group
                .par_iter()
                .map(|r| {
                    split_lines(
                        &bytes[r.start as usize..r.end as usize],
                        start + r.start,
                        file,
                        opts.max_record_size(),
                    )
                })
                .collect::<Result<_>>()?;
            for l in &lines {
                w.append_bytes(l)?;
                logical += l.iter().map(|r| r.len() as u64).sum::<u64>();
            }
            done += group.iter().map(|r| r.length).sum::<u64>();
            opts.report(done);
        }
    }
    finish(w, logical)
}

/// The lines of `range` (which starts at byte `start` of `file` and ends after a `\n` or at EOF).
fn split_lines<'a>(range: &'a [u8], start: u64, file: &MappedFile, limit: usize) -> Result<Vec<&'a [u8]>> {
    let mut lines = Vec::with_capacity(range.len() / 64 + 1);
    let mut from = 0usize;
    for nl in memchr::memchr_iter(b'\n', range) {
        lines.push(&range[from..nl]);
        from = nl + 1;
    }
    if from < range.len() {
        lines.push(&range[from..]);
    }
    if let Some(long) = lines.iter().find(|l| l.len() > limit) {
        let at = long.as_ptr() as usize - range.as_ptr() as usize + start as usize;
        // Only on this error path is the file scanned up to the line, to name it.
        let line = memchr::memchr_iter(b'\n', &file.bytes()[..at]).count() + 1;
        return Err(Error::BadInput {
            path: file.path().to_path_buf(),
            reason: format!("line {line} is {} bytes; a record holds at most {limit} bytes", long.len()),
            source: None,
        });
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn lines_become_records_in_order_across_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.jsonl", b"{\"a\":1}\n\n{\"a\":3}\r\n");
        let b = write(dir.path(), "b.jsonl", b"");
        let c = write(dir.path(), "c.jsonl", b"x\ny");
        let s = jsonl(&[&a, &b, &c, &a], dir.path().join("out"), WriteOptions::new()).unwrap();
        assert_eq!(s.records, 8);
        let store = crate::Store::open(dir.path().join("out")).unwrap();
        // The summary counts what `info` counts: record bytes, without the newlines.
        assert_eq!(s.bytes_in, store.stats().unwrap().logical_bytes);
        assert_eq!(s.bytes_in, 2 * 15 + 2);
        let got = store.gather(&(0..8).collect::<Vec<_>>()).unwrap();
        let want: Vec<&[u8]> =
            vec![b"{\"a\":1}", b"", b"{\"a\":3}\r", b"x", b"y", b"{\"a\":1}", b"", b"{\"a\":3}\r"];
        assert_eq!(got, want);
    }

    #[test]
    fn a_line_over_the_limit_names_file_and_line_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = b"ok\nok\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', crate::MAX_RECORD_SIZE + 1));
        text.extend_from_slice(b"\nafter\n");
        let p = write(dir.path(), "big.jsonl", &text);
        let opts = WriteOptions::new().format(crate::Format::V1);
        let err = jsonl(&[&p], dir.path().join("out"), opts).unwrap_err();
        match err {
            Error::BadInput { path, reason, .. } => {
                assert_eq!(path, p);
                assert!(reason.contains("line 3"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!dir.path().join("out").exists());
        assert!(!dir.path().join("out.partial").exists());
    }

    #[test]
    fn parts_converted_separately_are_the_whole_conversion_record_for_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = Vec::new();
        for i in 0..5000 {
            text.extend_from_slice(format!("{{\"id\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i % 97)).as_bytes());
        }
        let a = write(dir.path(), "a.jsonl", &text);
        let b = write(dir.path(), "b.jsonl", b"tail-1\n\ntail-3");
        let inputs = [&a, &b, &a];
        jsonl(&inputs, dir.path().join("whole"), WriteOptions::new()).unwrap();
        let whole = crate::Store::open(dir.path().join("whole")).unwrap();
        let all = whole.gather(&(0..whole.len()).collect::<Vec<u64>>()).unwrap();
        for n in [1usize, 2, 3, 7, 64] {
            let mut joined: Vec<Vec<u8>> = Vec::new();
            for k in 0..n {
                let out = dir.path().join(format!("p{n}-{k}"));
                jsonl_part(&inputs, &out, WriteOptions::new(), Part::new(k, n).unwrap()).unwrap();
                let part = crate::Store::open(&out).unwrap();
                joined.extend(part.gather(&(0..part.len()).collect::<Vec<u64>>()).unwrap());
            }
            assert_eq!(joined, all, "{n} parts in order are the whole conversion");
        }
        assert!(matches!(Part::new(3, 3), Err(Error::InvalidArgument(m)) if m.contains("part 3 of 3")));
        assert!(matches!(Part::new(0, 0), Err(Error::InvalidArgument(m)) if m.contains("part 0 of 0")));
        let bad = Part { index: 5, count: 2 };
        assert!(matches!(
            jsonl_part(&inputs, dir.path().join("bad"), WriteOptions::new(), bad),
            Err(Error::InvalidArgument(m)) if m.contains("part 5 of 2")
        ));
        assert!(!dir.path().join("bad").exists());
    }

    #[test]
    fn no_inputs_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let none: [&Path; 0] = [];
        assert!(matches!(
            jsonl(&none, dir.path().join("o"), WriteOptions::new()),
            Err(Error::InvalidArgument(_))
        ));
    }
}
