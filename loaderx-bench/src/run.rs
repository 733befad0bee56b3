//! What a run measures ([`Options`]) and the driver that runs the chosen layers and prints the
//! result.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

#[cfg(feature = "images")]
use crate::images;
#[cfg(any(feature = "parquet", feature = "images"))]
use crate::ingest;
use crate::report::Report;
use crate::{cold, format, gather, loader, machine, plot, sampler, store, tokens};

/// Which layer to measure. With the `clap` feature it is a `clap::ValueEnum`, so `loaderx bench`
/// parses its argument straight into it and shows these docs as the possible values' help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Layer {
    /// Index generation on its own.
    Sampler,
    /// Batch gather from the record store and the alternatives.
    Store,
    /// The endless loader end to end.
    Loader,
    /// The raw gather against the page-aligned memcpy ceiling and NumPy (784 B, 12 KiB and 128 KiB
    /// records; batches of 64, 256, 1024; one thread and all), and zstd against decompress-only.
    Gather,
    /// Store format v2 against v1: raw gathers with and without verify_reads, zstd and LZ4 (bench
    /// records and MNIST), append throughput and size, open of 10 M records to the first batch.
    Format,
    /// The Parquet and image-folder converters against decoding alone (a build with the
    /// `parquet` and/or `images` features).
    Ingest,
    /// Cold reads: the first batch and a stream of batches from a dataset evicted from the page
    /// cache, against NumPy's memmap and `fio` (1M and 10M records of 64 B, 784 B and 12 KiB, as
    /// far as `--cold-max-gib` allows; needs `--python`).
    Cold,
    /// Encoded images: the loader's train and evaluation transforms against decoding each whole
    /// file and nothing else, on the same threads (a build with the `images` feature; generated
    /// JPEGs, or `--image-dir`).
    Images,
    /// Token files: random windows against the memcpy of the same windows, and the first
    /// batch of 1- and 10-billion-token files and of Megatron samples over 1, 5 and 10 million documents.
    Tokens,
    /// Sampler, store and loader.
    #[default]
    All,
}

/// A run's settings, as `loaderx bench` takes them on its command line; `None` takes the
/// default (which `quick` changes).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The layer to measure.
    pub layer: Layer,
    /// Small sizes and 3 rounds: a smoke run, figures only indicative.
    pub quick: bool,
    /// Print one JSON array of rows instead of the tables.
    pub json: bool,
    /// Also draw the store and loader figures as a bar chart (SVG) into this file.
    pub plot: Option<PathBuf>,
    /// Records per store and loader dataset [default: 20000; 2000 with `quick`].
    pub records: Option<u32>,
    /// Records in the zstd_dict store (level 19 writes slowly) [default: all; 1000 with `quick`].
    pub dict_records: Option<u32>,
    /// Record sizes of the store layer, in KiB [default: 12,128; 12 with `quick`].
    pub record_kib: Option<Vec<usize>>,
    /// Interleaved rounds per comparison; figures are medians over them [default: 7; 3 with
    /// `quick`].
    pub rounds: Option<usize>,
    /// Where the temporary data is generated (removed at the end) [default: the system temp
    /// directory].
    pub dir: Option<PathBuf>,
    /// Record sizes of the gather layer, in bytes [default: 784, 12288, 131072].
    pub record_bytes: Option<Vec<usize>>,
    /// The Python interpreter (with NumPy) for the gather layer's NumPy rows; without it they
    /// are skipped with a note.
    pub python: Option<PathBuf>,
    /// Record counts of the cold layer [default: 1000000, 10000000].
    pub cold_records: Option<Vec<u64>>,
    /// The most data one dataset of the cold layer may hold, in GiB (larger ones are skipped
    /// with a note; each is written twice) [default: 12].
    pub cold_max_gib: Option<u64>,
    /// The images layer's input: an image folder (one subdirectory per class) [default: 1,024
    /// generated JPEGs; 512 with `quick`].
    pub image_dir: Option<PathBuf>,
    /// Threads of the images layer's loaders and of its ceiling's pool [default: all].
    pub threads: Option<usize>,
    /// The gather layer also gathers from the fixed-stride store into a `Vec` (a short distance),
    /// as measured and with each near copy (`memcpy`, 256-byte pieces) chosen outright.
    pub near_copy_ab: bool,
    /// The gather layer also gathers from the fixed-stride store with no record hinted and with
    /// every record hinted: the A/B of `StoreOptions::hint_records_below`.
    pub hint_ab: bool,
}

/// The sizes a run uses, resolved from the options.
pub(crate) struct Config {
    pub(crate) records: u32,
    pub(crate) record_kib: Vec<usize>,
    pub(crate) dict_records: u32,
    pub(crate) rounds: usize,
    /// How long one contender runs per round.
    pub(crate) target: Duration,
    pub(crate) dir: PathBuf,
    /// Small sizes (`--quick`).
    pub(crate) quick: bool,
}

impl Config {
    /// A progress line on stderr, only for a person watching a terminal.
    pub(crate) fn progress(&self, what: &str) {
        if std::io::stderr().is_terminal() {
            eprintln!("bench: {what}");
        }
    }
}

/// Runs the chosen layers and writes the tables (or the JSON) to `out`. The error messages name
/// the options by their `loaderx bench` flags.
///
/// # Errors
/// Writing the data or the output; an invalid size.
pub fn run(args: &Options, out: &mut impl Write) -> anyhow::Result<()> {
    let records = args.records.unwrap_or(if args.quick { 2000 } else { 20_000 });
    anyhow::ensure!(records >= 256, "--records must be at least the batch size, 256");
    anyhow::ensure!(
        args.dict_records.is_none_or(|d| d >= 256),
        "--dict-records must be at least the batch size, 256"
    );
    let record_kib =
        args.record_kib.clone().unwrap_or_else(|| if args.quick { vec![12] } else { vec![12, 128] });
    anyhow::ensure!(
        record_kib.iter().all(|&k| (1..=1024).contains(&k)),
        "--record-kib must be between 1 and 1024 (the store's record limit is 1 MiB)"
    );
    let cfg = Config {
        records,
        record_kib,
        dict_records: args.dict_records.unwrap_or(if args.quick { 1000 } else { records }),
        rounds: args.rounds.unwrap_or(if args.quick { 3 } else { 7 }).max(1),
        target: Duration::from_millis(if args.quick { 20 } else { 100 }),
        dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
        quick: args.quick,
    };
    let all = args.layer == Layer::All;
    let mut report = Report::default();
    report.sections.push(machine::section());
    if all || args.layer == Layer::Sampler {
        cfg.progress("sampler");
        sampler::run(&cfg, &mut report);
    }
    if all || args.layer == Layer::Store {
        store::run(&cfg, &mut report)?;
    }
    if all || args.layer == Layer::Loader {
        cfg.progress("loader");
        loader::run(&cfg, &mut report)?;
    }
    if args.layer == Layer::Gather {
        let sizes = args.record_bytes.clone().unwrap_or_else(|| gather::RECORD_SIZES.to_vec());
        anyhow::ensure!(
            sizes.iter().all(|&b| (1..=1 << 20).contains(&b)),
            "--record-bytes must be between 1 and 1048576 (the store's record limit is 1 MiB)"
        );
        gather::run(&cfg, &mut report, &sizes, args.python.as_deref(), (args.near_copy_ab, args.hint_ab))?;
    }
    if args.layer == Layer::Cold {
        let sizes = args.record_bytes.clone().unwrap_or_else(|| cold::RECORD_SIZES.to_vec());
        let counts = args.cold_records.clone().unwrap_or_else(|| cold::RECORD_COUNTS.to_vec());
        anyhow::ensure!(
            counts.iter().all(|&n| (256..=u64::from(u32::MAX)).contains(&n)),
            "--cold-records must be between 256 and 2^32 - 1"
        );
        let max = args.cold_max_gib.unwrap_or(12).saturating_mul(1 << 30);
        cold::run(&cfg, &mut report, &counts, &sizes, max, args.python.as_deref())?;
    }
    if args.layer == Layer::Format {
        format::run(&cfg, &mut report)?;
    }
    if args.layer == Layer::Ingest {
        #[cfg(any(feature = "parquet", feature = "images"))]
        ingest::run(&cfg, &mut report)?;
        #[cfg(not(any(feature = "parquet", feature = "images")))]
        anyhow::bail!("the ingest layer needs a build with the `parquet` or `images` feature");
    }
    if args.layer == Layer::Images {
        #[cfg(feature = "images")]
        images::run(
            &cfg,
            &mut report,
            args.image_dir.as_deref(),
            args.threads.unwrap_or_else(rayon::current_num_threads).max(1),
        )?;
        #[cfg(not(feature = "images"))]
        anyhow::bail!("the images layer needs a build with the `images` feature");
    }
    if args.layer == Layer::Tokens {
        tokens::run(&cfg, &mut report)?;
    }
    if let Some(path) = &args.plot {
        plot::draw(&report, path).with_context(|| format!("drawing {}", path.display()))?;
    }
    if args.json {
        serde_json::to_writer(&mut *out, &report.json())?;
        writeln!(out)?;
    } else {
        let cache =
            if args.layer == Layer::Cold { "page cache as each table says" } else { "warm page cache" };
        writeln!(
            out,
            "Every figure is the median of {} interleaved rounds, {cache}, all contenders in one \
             process on the same data and indices; each ratio is taken per round and its median \
             shown.\n",
            cfg.rounds
        )?;
        for s in &report.sections {
            write!(out, "{}", s.render())?;
        }
    }
    Ok(())
}
