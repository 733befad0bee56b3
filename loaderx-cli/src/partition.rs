//! `loaderx partition` and `loaderx partition-files`: record-aligned byte-range planning with
//! mmap-chunker 0.2.6's output format, flags, errors and exit statuses.
//!
//! The two commands keep the reference CLI's own argument grammar, not clap's: every option
//! takes its value as the next argument (`--parts 2`; `--parts=2` is an unexpected option), any
//! other argument starting with `-` is an unexpected option (`--`, `-`, `--version`, and
//! `--help` / `-h` unless it is the only argument), the first problem found in argument order
//! is the one reported, and every error is the reference's one line plus a hint line, exit
//! status 1. So [`main`] parses their command lines itself, before clap; clap renders only their
//! help (`loaderx partition --help`, `loaderx help partition`), from the structs below.

use std::ffi::{OsStr, OsString};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use loaderx_core::framing::MappedFile;

const PARTITION_AFTER_HELP: &str = "\
Output: one headerless TSV row per range, index<TAB>start<TAB>end_exclusive<TAB>length.
Offsets are bytes; starts are inclusive, ends exclusive (end_exclusive - start == length).
Ranges are deterministic, contiguous and record-aligned: each ideal target t = len*i/N
(i = 1..N-1) cuts just after the first delimiter at or after byte t itself, or at EOF when
none remains. A target on a record start is not kept: it moves to the end of the record that
starts there. A target at or before the previous cut is skipped, so fewer than N ranges are
emitted when giant records span several targets. Raw byte framing only: no CSV/JSON quoting.
Arguments as mmap-chunker reads them: an option's value is the next argument (`--parts 2`,
not `--parts=2`); any other argument starting with `-`, `--` included, is an error. The file
must not change while it is mapped.";

const PARTITION_FILES_AFTER_HELP: &str = "\
Output: one headerless TSV row per range, worker<TAB>source<TAB>start<TAB>end_exclusive<TAB>length.
source is the zero-based index of FILE in argument order (duplicates are distinct sources);
offsets are local to that file. Rows are ordered by worker, then source; a worker may hold
ranges of several files. Ideal targets over the summed length are kept on file boundaries;
a target inside a file cuts just after the first delimiter at or after the target byte itself
(so a target on a record start moves to that record's end), or at that file's end. A target
at or before the previous cut is skipped; records never cross a file or worker boundary.
Workers are numbered compactly: fewer than N appear when records span several targets.
Empty files give no rows; all-empty input gives empty output. Arguments as mmap-chunker reads
them: an option's value is the next argument; any other argument starting with `-` is an error.";

/// Arguments of `loaderx partition`, as [`main`] parses them (clap renders their help).
#[derive(Debug, Args)]
#[command(after_help = PARTITION_AFTER_HELP)]
pub(crate) struct PartitionArgs {
    /// The input file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Number of record-aligned ranges to plan (at least 1).
    #[arg(long, value_name = "N")]
    parts: usize,
    /// Emit only the zero-based range K (K must be less than N); emits nothing, successfully,
    /// when boundaries collapsed and range K does not exist.
    #[arg(long, value_name = "K")]
    worker: Option<usize>,
    /// Record delimiter: one raw byte in decimal, 0..255 (10 is newline, 0 is NUL).
    #[arg(long, value_name = "B", default_value_t = b'\n')]
    delimiter_byte: u8,
}

/// Arguments of `loaderx partition-files`, as [`main`] parses them (clap renders their help).
#[derive(Debug, Args)]
#[command(after_help = PARTITION_FILES_AFTER_HELP)]
pub(crate) struct PartitionFilesArgs {
    /// The ordered input files, before or after the options (at least one).
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Number of workers to plan for (at least 1).
    #[arg(long, value_name = "N")]
    parts: usize,
    /// Record delimiter: one raw byte in decimal, 0..255 (10 is newline, 0 is NUL).
    #[arg(long, value_name = "B", default_value_t = b'\n')]
    delimiter_byte: u8,
}

/// Which of the two commands a command line names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Partition,
    PartitionFiles,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Partition => "partition",
            Which::PartitionFiles => "partition-files",
        }
    }
}

/// Runs `loaderx partition ...` or `loaderx partition-files ...` (`argv` is the whole command
/// line, program name first) and returns the exit status; `None` for any other command line,
/// and for a command's help (its only argument `--help` or `-h`), which are clap's.
///
/// On an error, stderr gets `error: MESSAGE` and the hint line, the status is 1. The hint is
/// mmap-chunker's (`Try \`mmap-chunker --help\` for usage.`) with the command that shows the
/// same usage here, `loaderx partition --help` (or `partition-files`).
pub(crate) fn main(argv: &[OsString]) -> Option<ExitCode> {
    let which = match argv.get(1).and_then(|a| a.to_str()) {
        Some("partition") => Which::Partition,
        Some("partition-files") => Which::PartitionFiles,
        _ => return None,
    };
    let rest = &argv[2..];
    if let [only] = rest
        && (only == "--help" || only == "-h")
    {
        return None;
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = match which {
        Which::Partition => parse_partition(rest).and_then(|args| run(&args, &mut out)),
        Which::PartitionFiles => parse_partition_files(rest).and_then(|args| run_files(&args, &mut out)),
    }
    .and_then(|()| out.flush().map_err(write_error));
    Some(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // Rows already written stay written, as with the reference (dropping the buffer
            // retries what it holds and ignores a second failure, as the reference's does).
            drop(out);
            eprintln!("error: {message}");
            eprintln!("Try `loaderx {} --help` for usage.", which.name());
            ExitCode::FAILURE
        }
    })
}

/// The options and arguments both commands share, as read so far.
#[derive(Default)]
struct Scanned {
    files: Vec<PathBuf>,
    parts: Option<usize>,
    worker: Option<usize>,
    delimiter: Option<u8>,
}

/// Reads `args` left to right, failing on the first problem, in mmap-chunker's order: an
/// option given twice, an option without its value, a bad value, an unknown option (anything
/// else starting with `-`), or (`partition`) a second positional argument. What is missing
/// altogether is the caller's to check, after this.
fn scan(args: &[OsString], which: Which) -> Result<Scanned, String> {
    let mut s = Scanned::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("missing value for `{name}`"));
        match arg.to_str() {
            Some("--parts") => {
                duplicate_check(s.parts.is_some(), "--parts")?;
                s.parts = Some(parse_parts(value("--parts")?)?);
            }
            Some("--delimiter-byte") => {
                duplicate_check(s.delimiter.is_some(), "--delimiter-byte")?;
                s.delimiter = Some(parse_delimiter_byte(value("--delimiter-byte")?)?);
            }
            Some("--worker") if which == Which::Partition => {
                duplicate_check(s.worker.is_some(), "--worker")?;
                s.worker = Some(parse_worker(value("--worker")?)?);
            }
            _ if arg.to_string_lossy().starts_with('-') => {
                return Err(format!("unexpected option `{}`", arg.to_string_lossy()));
            }
            _ if which == Which::Partition && !s.files.is_empty() => {
                return Err(format!("unexpected argument `{}`", arg.to_string_lossy()));
            }
            _ => s.files.push(PathBuf::from(arg)),
        }
    }
    Ok(s)
}

fn duplicate_check(seen: bool, name: &str) -> Result<(), String> {
    if seen { Err(format!("duplicate option `{name}`")) } else { Ok(()) }
}

fn missing_parts() -> String {
    "missing required option `--parts`".to_owned()
}

/// `partition`'s arguments; FILE is checked before `--parts`, and `--worker` against
/// `--parts` before the file is opened.
fn parse_partition(args: &[OsString]) -> Result<PartitionArgs, String> {
    let s = scan(args, Which::Partition)?;
    let file = s.files.into_iter().next().ok_or("missing FILE")?;
    let parts = s.parts.ok_or_else(missing_parts)?;
    if s.worker.is_some_and(|k| k >= parts) {
        return Err("`--worker` must be less than `--parts`".to_owned());
    }
    Ok(PartitionArgs { file, parts, worker: s.worker, delimiter_byte: s.delimiter.unwrap_or(b'\n') })
}

/// `partition-files`' arguments; here `--parts` is checked before the FILEs.
fn parse_partition_files(args: &[OsString]) -> Result<PartitionFilesArgs, String> {
    let s = scan(args, Which::PartitionFiles)?;
    let parts = s.parts.ok_or_else(missing_parts)?;
    if s.files.is_empty() {
        return Err("missing FILE (provide one or more ordered source paths)".to_owned());
    }
    Ok(PartitionFilesArgs { files: s.files, parts, delimiter_byte: s.delimiter.unwrap_or(b'\n') })
}

/// Maps `path`. The reference reports every failure to open, size or map a file in the same
/// words, whatever the cause (its own mapping layer keeps no `errno`), so this does too.
fn open(path: &std::path::Path) -> Result<MappedFile, String> {
    MappedFile::open(path)
        .map_err(|_| format!("failed to open {}: failed to open or map file", path.display()))
}

fn write_error(err: io::Error) -> String {
    format!("failed to write output: {err}")
}

/// Runs `partition`, writing the plan (or worker K's range) to `out`.
fn run(args: &PartitionArgs, out: &mut impl Write) -> Result<(), String> {
    let file = open(&args.file)?;
    let ranges = loaderx_core::framing::partition(file.bytes(), args.parts, args.delimiter_byte)
        .map_err(|e| e.to_string())?;
    let selected = match args.worker {
        Some(k) => ranges.get(k).map_or(&[][..], std::slice::from_ref),
        None => &ranges[..],
    };
    for r in selected {
        writeln!(out, "{}\t{}\t{}\t{}", r.index, r.start, r.end, r.length).map_err(write_error)?;
    }
    Ok(())
}

/// Runs `partition-files`, writing every worker/source row to `out`. Every file is opened, in
/// argument order, before anything is planned.
fn run_files(args: &PartitionFilesArgs, out: &mut impl Write) -> Result<(), String> {
    let files = args.files.iter().map(|p| open(p)).collect::<Result<Vec<_>, _>>()?;
    let sources: Vec<&[u8]> = files.iter().map(MappedFile::bytes).collect();
    let rows = loaderx_core::framing::partition_files(&sources, args.parts, args.delimiter_byte)
        .map_err(|e| e.to_string())?;
    for r in &rows {
        writeln!(out, "{}\t{}\t{}\t{}\t{}", r.worker, r.source, r.start, r.end, r.length)
            .map_err(write_error)?;
    }
    Ok(())
}

/// A positive decimal count (Rust's `usize` syntax, so a leading `+` is accepted, as by the
/// reference). 0 is refused here, by the CLI: the library plans nothing for it.
fn parse_parts(value: &OsStr) -> Result<usize, String> {
    let parts = value
        .to_str()
        .ok_or("`--parts` must be a positive integer")?
        .parse::<usize>()
        .map_err(|_| format!("invalid value for `--parts`: `{}`", value.to_string_lossy()))?;
    if parts == 0 {
        return Err("`--parts` must be greater than zero".to_owned());
    }
    Ok(parts)
}

fn parse_worker(value: &OsStr) -> Result<usize, String> {
    value
        .to_str()
        .ok_or("`--worker` must be a non-negative integer")?
        .parse::<usize>()
        .map_err(|_| format!("invalid value for `--worker`: `{}`", value.to_string_lossy()))
}

/// Decimal digits only (no sign, no hex), value 0..=255; leading zeros are fine.
fn parse_delimiter_byte(value: &OsStr) -> Result<u8, String> {
    let text = value.to_str().ok_or("`--delimiter-byte` must be a decimal byte in the range 0..255")?;
    let bad = || format!("invalid value for `--delimiter-byte`: `{text}` (expected decimal byte 0..255)");
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    // Digits only, so the one failure left is a value past 255 (however many digits).
    let trimmed = text.trim_start_matches('0');
    if trimmed.len() > 3 {
        return Err(bad());
    }
    let n: u16 = if trimmed.is_empty() { 0 } else { trimmed.parse().map_err(|_| bad())? };
    u8::try_from(n).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn err(which: Which, args: &[&str]) -> String {
        match which {
            Which::Partition => parse_partition(&os(args)).map(|_| ()),
            Which::PartitionFiles => parse_partition_files(&os(args)).map(|_| ()),
        }
        .unwrap_err()
    }

    #[test]
    fn parts_must_be_a_positive_integer() {
        assert_eq!(parse_parts(OsStr::new("1")), Ok(1));
        assert_eq!(parse_parts(OsStr::new("+7")), Ok(7));
        assert_eq!(parse_parts(OsStr::new("0")).unwrap_err(), "`--parts` must be greater than zero");
        assert_eq!(parse_parts(OsStr::new("-1")).unwrap_err(), "invalid value for `--parts`: `-1`");
        assert_eq!(parse_parts(OsStr::new("x")).unwrap_err(), "invalid value for `--parts`: `x`");
    }

    #[test]
    fn delimiter_byte_accepts_only_decimal_bytes() {
        assert_eq!(parse_delimiter_byte(OsStr::new("0")), Ok(0));
        assert_eq!(parse_delimiter_byte(OsStr::new("10")), Ok(10));
        assert_eq!(parse_delimiter_byte(OsStr::new("000")), Ok(0));
        assert_eq!(parse_delimiter_byte(OsStr::new("0000000255")), Ok(255));
        assert_eq!(parse_delimiter_byte(OsStr::new("255")), Ok(255));
        for bad in ["", "256", "-1", "+10", "0x0a", "1e2", " 10", "99999999999999999999"] {
            assert_eq!(
                parse_delimiter_byte(OsStr::new(bad)).unwrap_err(),
                format!("invalid value for `--delimiter-byte`: `{bad}` (expected decimal byte 0..255)")
            );
        }
    }

    #[test]
    fn options_take_the_next_argument_whatever_it_is() {
        let args =
            parse_partition(&os(&["--parts", "2", "--delimiter-byte", "0", "f", "--worker", "1"])).unwrap();
        assert_eq!((args.file, args.parts, args.worker, args.delimiter_byte), ("f".into(), 2, Some(1), 0));
        assert_eq!(
            err(Which::Partition, &["f", "--parts", "--worker"]),
            "invalid value for `--parts`: `--worker`"
        );
        let args = parse_partition_files(&os(&["a", "--parts", "3", "b", "a"])).unwrap();
        assert_eq!(args.files, [PathBuf::from("a"), "b".into(), "a".into()]);
        assert_eq!((args.parts, args.delimiter_byte), (3, b'\n'));
    }

    #[test]
    fn the_first_problem_in_argument_order_is_reported() {
        assert_eq!(err(Which::Partition, &["--bogus", "--parts", "0"]), "unexpected option `--bogus`");
        assert_eq!(
            err(Which::Partition, &["--parts", "0", "--bogus"]),
            "`--parts` must be greater than zero"
        );
        assert_eq!(err(Which::Partition, &["f", "g", "--parts", "x"]), "unexpected argument `g`");
        // What is missing is checked only after every argument was read.
        assert_eq!(err(Which::Partition, &["--parts", "2"]), "missing FILE");
        assert_eq!(err(Which::Partition, &["f"]), "missing required option `--parts`");
        assert_eq!(err(Which::PartitionFiles, &[]), "missing required option `--parts`");
        assert_eq!(
            err(Which::PartitionFiles, &["--parts", "2"]),
            "missing FILE (provide one or more ordered source paths)"
        );
        assert_eq!(err(Which::PartitionFiles, &["--worker", "0"]), "unexpected option `--worker`");
        assert_eq!(
            err(Which::Partition, &["f", "--parts", "2", "--worker", "2"]),
            "`--worker` must be less than `--parts`"
        );
    }
}
