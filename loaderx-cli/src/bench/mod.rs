//! `loaderx bench`: the command line of the bench harness. The harness itself (workloads,
//! interleaved timing, the per-layer measurements, the tables, JSON rows and plot) is the
//! `loaderx-bench` crate, shared with the criterion benches under `benches/`; this module only
//! parses the arguments into its [`loaderx_bench::Options`] and runs it.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use loaderx_bench::Layer;

mod store;

/// `loaderx bench`.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The layer to measure.
    #[arg(value_enum, default_value = "all")]
    layer: Layer,
    /// Small sizes and 3 rounds: a smoke run, figures only indicative.
    #[arg(long)]
    quick: bool,
    /// Print one JSON array of rows instead of the tables.
    #[arg(long)]
    json: bool,
    /// Also draw the store and loader figures as a bar chart (SVG).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Records per store and loader dataset [default: 20000; 2000 with --quick].
    #[arg(long, value_name = "N")]
    records: Option<u32>,
    /// Records in the zstd_dict store (level 19 writes slowly) [default: all; 1000 with --quick].
    #[arg(long, value_name = "N")]
    dict_records: Option<u32>,
    /// Record sizes of the store layer, in KiB [default: 12,128; 12 with --quick].
    #[arg(long, value_name = "KIB", value_delimiter = ',')]
    record_kib: Option<Vec<usize>>,
    /// Interleaved rounds per comparison; figures are medians over them [default: 7; 3 with
    /// --quick].
    #[arg(long, value_name = "N")]
    rounds: Option<usize>,
    /// Where the temporary data is generated (removed at the end) [default: the system temp
    /// directory].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Record sizes of the gather layer, in bytes [default: 784,12288,131072].
    #[arg(long, value_name = "BYTES", value_delimiter = ',')]
    record_bytes: Option<Vec<usize>>,
    /// The Python interpreter with NumPy for the gather layer's NumPy rows (scripts/bench-gather.sh
    /// installs NumPy into a venv); without it those rows are skipped with a note.
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Record counts of the cold layer [default: 1000000,10000000].
    #[arg(long, value_name = "N", value_delimiter = ',')]
    cold_records: Option<Vec<u64>>,
    /// The most data one dataset of the cold layer may hold, in GiB; larger ones are skipped
    /// with a note (each is written twice: a .npy and the store) [default: 12].
    #[arg(long, value_name = "GIB")]
    cold_max_gib: Option<u64>,
    /// The images layer's input: an image folder, one subdirectory per class [default: 1,024
    /// generated JPEGs of 500x375].
    #[arg(long, value_name = "DIR")]
    image_dir: Option<PathBuf>,
    /// Threads of the images layer's loaders and of its ceiling [default: all].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// The gather layer also gathers from the fixed-stride store into a `Vec` (16 bytes past a
    /// page: a short distance), as this CPU's measurement picks and with each near copy chosen
    /// outright (`memcpy`, 256-byte pieces): the A/B of `StoreOptions::near_copy`.
    #[arg(long)]
    near_copy_ab: bool,
    /// The gather layer also gathers from the fixed-stride store with no record hinted and with
    /// every record hinted: the A/B of `StoreOptions::hint_records_below` (the machine table
    /// names the size this CPU's row hints below).
    #[arg(long)]
    hint_ab: bool,
    /// Measure this dataset instead (a store, a store set, or an `s3://` URL with the `remote`
    /// feature): batches in cyclic, IID and block-cyclic order, with requests per batch for a
    /// remote store.
    #[arg(long, value_name = "PATH|URL")]
    store: Option<PathBuf>,
    /// Batch size for --store (at least 1; at most the dataset's records are taken).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Batches per order for --store (at least 1).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
}

/// Runs the chosen layers and writes the tables (or the JSON) to `out`.
///
/// # Errors
/// Writing the data or the output; an invalid size.
pub(crate) fn run(args: &BenchArgs, out: &mut impl Write) -> anyhow::Result<()> {
    if let Some(path) = &args.store {
        return store::run(path, args.batch, args.steps, out);
    }
    let options = loaderx_bench::Options {
        layer: args.layer,
        quick: args.quick,
        json: args.json,
        plot: args.plot.clone(),
        records: args.records,
        dict_records: args.dict_records,
        record_kib: args.record_kib.clone(),
        rounds: args.rounds,
        dir: args.dir.clone(),
        record_bytes: args.record_bytes.clone(),
        python: args.python.clone(),
        cold_records: args.cold_records.clone(),
        cold_max_gib: args.cold_max_gib,
        image_dir: args.image_dir.clone(),
        threads: args.threads,
        near_copy_ab: args.near_copy_ab,
        hint_ab: args.hint_ab,
    };
    loaderx_bench::run(&options, out)
}
