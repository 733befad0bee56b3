//! The `loaderx` command-line tool: convert files into datasets, inspect, verify, export and
//! compact stores, plan record-aligned byte ranges (`partition`, the mmap-chunker contract), and
//! measure the sampler, store and loader against their baselines (`bench`).
//!
//! Each subcommand group lives in its own module: `convert` (files into datasets), `inspect`
//! (`info`, `stats`, `verify`), `maintain` (`export`, `migrate`, `compact`), `sets` (`stitch`,
//! `push`), `partition` and `bench`; each prints through [`print`]. `main` only parses,
//! dispatches and turns errors into one line on stderr and an exit status. `partition` and
//! `partition-files` are the exception: they keep mmap-chunker's argument grammar, errors
//! and exit statuses, so `partition::main` parses and runs them before clap sees them.

use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod bench;
mod convert;
mod inspect;
mod maintain;
mod partition;
#[cfg(feature = "remote")]
mod remote_inspect;
mod sets;
mod tokens;

/// loaderx: record store, sampler and data-layer tools.
#[derive(Debug, Parser)]
#[command(name = "loaderx", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Plan record-aligned byte ranges of one file for N independent workers.
    Partition(partition::PartitionArgs),
    /// Plan record-aligned worker/source byte ranges over an ordered list of files.
    PartitionFiles(partition::PartitionFilesArgs),
    /// Convert a file (or a directory of files) into a dataset.
    Convert {
        #[command(subcommand)]
        format: convert::Format,
    },
    /// Show a store's kind, dtype, shape, length, codecs and space (or a token file's header).
    Info(inspect::InfoArgs),
    /// Check every record's checksum and decoding (or a token file's index and ids); exit 1 if any
    /// is damaged.
    Verify(inspect::VerifyArgs),
    /// Write a dense dataset as a NumPy .npy file (little-endian, C order), or a dataset of
    /// token records as a Megatron-LM indexed dataset (--megatron: OUT.bin and OUT.idx).
    Export {
        /// The dataset directory.
        store: PathBuf,
        /// The .npy file to write (with --megatron, the prefix of the .bin and .idx).
        out: PathBuf,
        /// Replace OUT if it exists.
        #[arg(long)]
        force: bool,
        /// Write OUT.bin and OUT.idx, one Megatron document a record (integer tokens).
        #[arg(long)]
        megatron: bool,
    },
    /// Rewrite a store's index in the other on-disk format, in place and atomically.
    Migrate {
        /// The store directory.
        store: PathBuf,
        /// What to migrate to: the format v2, or v1 (where every record fits v1's limits); or
        /// v2's layout: `fixed` (raw records of one size found from their index: a crc32c per
        /// block of records instead of an entry per record; every record must lie where the
        /// stride puts it, as appending them leaves), `compact` (a 16-byte entry per raw record
        /// of any size) or `entries` (a 32-byte entry per record, any codec).
        #[arg(long)]
        to: maintain::MigrateTo,
    },
    /// Reclaim the space of deleted records in place.
    Compact {
        /// The store directory.
        store: PathBuf,
    },
    /// Write a store set: datasets converted in parts (`convert ... --part K --parts N`), listed
    /// in order, or one directory of parts (`convert ... --part-from-env`), opened as one dataset
    /// with global indices. Parts that are directories of datasets (parquet, safetensors,
    /// images) make OUT/<name>, one set per dataset.
    Stitch {
        /// The parts, in order, then the set directory to write; or one directory holding the
        /// parts as part-00000, part-00001, ... (in numeric order; a missing or doubled number is
        /// an error), then the set directory. With the `remote` feature all of them may be s3://
        /// URLs instead (parts already pushed, each a dataset: a directory of datasets is
        /// stitched there a dataset at a time; the set's manifest is put last and replaces one
        /// already there).
        #[arg(required = true, num_args = 1.., action = clap::ArgAction::Append, value_name = "PART... OUT")]
        paths: Vec<PathBuf>,
        /// With a directory of parts: how many it must hold (part 0 to N-1). Without it the
        /// highest number found sets the count, and a missing last part cannot be seen.
        #[arg(long, value_name = "N")]
        parts: Option<usize>,
    },
    /// Upload a store (or dataset) directory to S3-compatible object storage (build feature
    /// `remote`; endpoint and keys from the AWS environment variables). A v2 chunk already
    /// there with the same length and checksum is skipped, so an interrupted push restarts
    /// where it stopped; of a v1 store's meta.zr only the committed prefix goes up.
    #[cfg(feature = "remote")]
    Push {
        /// The local store directory.
        store: PathBuf,
        /// Where to: `s3://bucket/prefix/store`.
        url: String,
    },
    /// Print the store's space accounting.
    Stats {
        /// The store directory.
        store: PathBuf,
    },
    /// Measure the sampler, store and loader against baselines and ceilings, in one process.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    // A write past `ulimit -f` is an error each command cleans up after, not a kill that leaves
    // a temporary behind.
    loaderx_core::process::file_size_limit_as_error();
    let argv: Vec<OsString> = std::env::args_os().collect();
    // `partition` and `partition-files` keep mmap-chunker's own argument grammar and errors,
    // which clap's cannot express (`--` and `--parts=2` are errors there): they are parsed and
    // run apart, and reach clap only for their help.
    if let Some(code) = partition::main(&argv) {
        return code;
    }
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let ok = |r: anyhow::Result<()>| r.map(|()| ExitCode::SUCCESS);
    let result = match cli.command {
        Command::Partition(_) | Command::PartitionFiles(_) => {
            unreachable!("partition::main runs these command lines; clap only shows their help")
        }
        Command::Convert { format } => ok(convert::run(format)),
        Command::Info(args) => ok(inspect::info(&args)),
        Command::Verify(args) => inspect::verify(&args),
        Command::Export { store, out, force, megatron } => {
            ok(maintain::export(&store, &out, force, megatron))
        }
        Command::Compact { store } => ok(maintain::compact(&store)),
        Command::Migrate { store, to } => ok(maintain::migrate(&store, to)),
        Command::Stats { store } => ok(inspect::stats(&store)),
        Command::Stitch { paths, parts } => ok(sets::stitch(&paths, parts)),
        #[cfg(feature = "remote")]
        Command::Push { store, url } => ok(sets::push(&store, &url)),
        Command::Bench(args) => ok(bench::run(&args, &mut out)),
    }
    .and_then(|code| out.flush().context("writing to stdout").map(|()| code));
    match result {
        Ok(code) => code,
        // A closed reader (`| head`) is a normal way for a consumer to stop: exit quietly.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // The whole line: a context above the engine's error may quote a path that is a URL
            // with credentials written into it (look 64, L64-3).
            eprintln!("error: {}", loaderx_core::redact_urls(&one_line(&err)));
            ExitCode::FAILURE
        }
    }
}

/// Help and version go to stdout with status 0; any other parse error becomes one line on
/// stderr (clap's message without its usage block) and status 1, like every other error.
fn usage_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // Help on a closed pipe is not worth an error either.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("error: missing subcommand (try `loaderx --help`)");
            return ExitCode::FAILURE;
        }
        _ => {}
    }
    let rendered = err.render().to_string();
    let message = rendered.split("\n\n").next().unwrap_or_default();
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    eprintln!("{line}");
    ExitCode::FAILURE
}

/// The error and its causes on one line, each part once (loaderx_core::error_chain's rule).
fn one_line(err: &anyhow::Error) -> String {
    loaderx_core::error_chain(err.as_ref())
}

/// Writes `text` to stdout, so that a closed pipe comes back as an error rather than a panic.
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|cause| cause.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe))
}
