//! The `loaderx` command-line tool: convert files into datasets, inspect, verify, export and
//! compact stores.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod convert;
mod inspect;

/// loaderx: a persistent record store and data loader for burn and candle.
#[derive(Debug, Parser)]
#[command(name = "loaderx", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Convert a file (or a directory of files) into a dataset.
    Convert {
        #[command(subcommand)]
        format: convert::Format,
    },
    /// Show a store's kind, dtype, shape, length, codecs and space.
    Info(inspect::InfoArgs),
    /// Check every record's checksum and decoding; exit 1 if any is damaged.
    Verify {
        /// The store directory.
        store: PathBuf,
    },
    /// Write a dense dataset as a NumPy .npy file (little-endian, C order).
    Export {
        /// The dataset directory.
        store: PathBuf,
        /// The .npy file to write.
        out: PathBuf,
        /// Replace OUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Reclaim the space of deleted records in place.
    Compact {
        /// The store directory.
        store: PathBuf,
    },
    /// Print the store's space accounting.
    Stats {
        /// The store directory.
        store: PathBuf,
    },
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Convert { format } => convert::run(format).map(|()| ExitCode::SUCCESS),
        Command::Info(args) => inspect::info(&args).map(|()| ExitCode::SUCCESS),
        Command::Verify { store } => inspect::verify(&store),
        Command::Export { store, out, force } => {
            inspect::export(&store, &out, force).map(|()| ExitCode::SUCCESS)
        }
        Command::Compact { store } => inspect::compact(&store).map(|()| ExitCode::SUCCESS),
        Command::Stats { store } => inspect::stats(&store).map(|()| ExitCode::SUCCESS),
    }
}

/// Writes `text` to stdout, so that a closed pipe comes back as an error rather than a panic.
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // `loaderx info big | head` is not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "loaderx: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
