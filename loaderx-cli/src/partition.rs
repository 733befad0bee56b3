//! `loaderx partition` and `loaderx partition-files`: record-aligned byte-range planning with
//! mmap-chunker's output format, flags and edge cases.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use clap::builder::{PathBufValueParser, TypedValueParser};

const PARTITION_AFTER_HELP: &str = "\
Output: one headerless TSV row per range, index<TAB>start<TAB>end_exclusive<TAB>length.
Offsets are bytes; starts are inclusive, ends exclusive (end_exclusive - start == length).
Ranges are deterministic, contiguous and record-aligned: each ideal target t = len*i/N
(i = 1..N-1) cuts just after the first delimiter at or after byte t itself, or at EOF when
none remains. A target on a record start is not kept: it moves to the end of the record that
starts there. A target at or before the previous cut is skipped, so fewer than N ranges are
emitted when giant records span several targets. Raw byte framing only: no CSV/JSON quoting.
A bare `--` is read as the path FILE, not as the end of the options. The file must not
change while it is mapped.";

const PARTITION_FILES_AFTER_HELP: &str = "\
Output: one headerless TSV row per range, worker<TAB>source<TAB>start<TAB>end_exclusive<TAB>length.
source is the zero-based index of FILE in argument order (duplicates are distinct sources);
offsets are local to that file. Rows are ordered by worker, then source; a worker may hold
ranges of several files. Ideal targets over the summed length are kept on file boundaries;
a target inside a file cuts just after the first delimiter at or after the target byte itself
(so a target on a record start moves to that record's end), or at that file's end. A target
at or before the previous cut is skipped; records never cross a file or worker boundary.
Workers are numbered compactly: fewer than N appear when records span several targets.
Empty files give no rows; all-empty input gives empty output. A bare `--` is read as a FILE
path, not as the end of the options.";

/// Arguments of `loaderx partition`.
#[derive(Debug, Args)]
#[command(after_help = PARTITION_AFTER_HELP)]
pub(crate) struct PartitionArgs {
    /// The input file.
    #[arg(value_name = "FILE", value_parser = file_parser())]
    file: PathBuf,
    /// Any further positional argument: an error, reported only once FILE has been opened, so
    /// that `partition --parts 2 -- f` fails on the missing file `--` as mmap-chunker does.
    #[arg(value_name = "EXTRA", hide = true)]
    extra: Vec<OsString>,
    /// Number of record-aligned ranges to plan (at least 1).
    #[arg(long, value_name = "N", value_parser = parse_parts)]
    parts: usize,
    /// Emit only the zero-based range K (K must be less than N); emits nothing, successfully,
    /// when boundaries collapsed and range K does not exist.
    #[arg(long, value_name = "K")]
    worker: Option<usize>,
    /// Record delimiter: one raw byte in decimal, 0..255 (10 is newline, 0 is NUL).
    #[arg(long, value_name = "B", default_value = "10", value_parser = parse_delimiter_byte)]
    delimiter_byte: u8,
}

/// Arguments of `loaderx partition-files`.
#[derive(Debug, Args)]
#[command(after_help = PARTITION_FILES_AFTER_HELP)]
pub(crate) struct PartitionFilesArgs {
    /// The ordered input files, before or after the options (at least one).
    #[arg(value_name = "FILE", value_parser = file_parser())]
    files: Vec<PathBuf>,
    /// Number of workers to plan for (at least 1).
    #[arg(long, value_name = "N", value_parser = parse_parts)]
    parts: usize,
    /// Record delimiter: one raw byte in decimal, 0..255 (10 is newline, 0 is NUL).
    #[arg(long, value_name = "B", default_value = "10", value_parser = parse_delimiter_byte)]
    delimiter_byte: u8,
}

/// Runs `partition`, writing the plan (or worker K's range) to `out`.
///
/// Everything is planned before the first byte is written, so an error leaves `out` empty.
pub(crate) fn run(args: &PartitionArgs, out: &mut impl Write) -> Result<()> {
    if let Some(worker) = args.worker
        && worker >= args.parts
    {
        bail!("--worker {worker} must be less than --parts {}", args.parts);
    }
    let file = loaderx_core::MappedFile::open(&args.file)?;
    if let Some(extra) = args.extra.first() {
        bail!("unexpected argument '{}' found", extra.to_string_lossy());
    }
    let ranges = file.partition(args.parts, args.delimiter_byte)?;
    let selected = match args.worker {
        Some(k) => ranges.get(k).map_or(&[][..], std::slice::from_ref),
        None => &ranges[..],
    };
    for r in selected {
        writeln!(out, "{}\t{}\t{}\t{}", r.index, r.start, r.end, r.length).context("writing to stdout")?;
    }
    Ok(())
}

/// Runs `partition-files`, writing every worker/source row to `out`.
pub(crate) fn run_files(args: &PartitionFilesArgs, out: &mut impl Write) -> Result<()> {
    if args.files.is_empty() {
        bail!("no input files: give one or more ordered FILE paths");
    }
    let rows = loaderx_core::plan_files(&args.files, args.parts, args.delimiter_byte)?;
    for r in &rows {
        writeln!(out, "{}\t{}\t{}\t{}\t{}", r.worker, r.source, r.start, r.end, r.length)
            .context("writing to stdout")?;
    }
    Ok(())
}

/// What `main` puts in place of a bare `--` argument of `partition` and `partition-files`, which
/// mmap-chunker reads as a FILE path while clap would read it as the end of the options. No
/// real argument can equal it: it holds a NUL byte, which no argv string can.
pub(crate) const DOUBLE_DASH: &str = "\0--";

/// FILE values: any path, with [`DOUBLE_DASH`] turned back into the path `--`.
fn file_parser() -> impl TypedValueParser<Value = PathBuf> {
    PathBufValueParser::new()
        .map(|path| if path == Path::new(DOUBLE_DASH) { PathBuf::from("--") } else { path })
}

fn parse_parts(value: &str) -> Result<usize, String> {
    let parts: usize = value.parse().map_err(|_| format!("`{value}` is not a positive integer"))?;
    if parts == 0 {
        return Err("must be greater than zero".to_owned());
    }
    Ok(parts)
}

/// Decimal digits only (no sign, no hex), value 0..=255; leading zeros are fine.
fn parse_delimiter_byte(value: &str) -> Result<u8, String> {
    let bad = || format!("`{value}` is not a decimal byte in 0..255");
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let trimmed = value.trim_start_matches('0');
    if trimmed.len() > 3 {
        return Err(bad());
    }
    let n: u16 = if trimmed.is_empty() { 0 } else { trimmed.parse().map_err(|_| bad())? };
    u8::try_from(n).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_must_be_a_positive_integer() {
        assert_eq!(parse_parts("1"), Ok(1));
        assert!(parse_parts("0").is_err());
        assert!(parse_parts("-1").is_err());
        assert!(parse_parts("x").is_err());
    }

    #[test]
    fn delimiter_byte_accepts_only_decimal_bytes() {
        assert_eq!(parse_delimiter_byte("0"), Ok(0));
        assert_eq!(parse_delimiter_byte("10"), Ok(10));
        assert_eq!(parse_delimiter_byte("000"), Ok(0));
        assert_eq!(parse_delimiter_byte("0000000255"), Ok(255));
        assert_eq!(parse_delimiter_byte("255"), Ok(255));
        for bad in ["", "256", "-1", "+10", "0x0a", "1e2", " 10", "99999999999999999999"] {
            assert!(parse_delimiter_byte(bad).is_err(), "{bad:?} accepted");
        }
    }
}
