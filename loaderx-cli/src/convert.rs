//! `loaderx convert FORMAT INPUT OUT`: the converters of `loaderx_core::convert`, with a progress
//! bar and a one-line summary.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loaderx_core::convert::{self, ConvertSummary};
use loaderx_core::{Codec, WriteOptions};

/// The input format. New formats (such as `jsonl`) become new variants with their own options.
#[derive(Debug, Subcommand)]
pub enum Format {
    /// A NumPy .npy file (C order, either byte order) → dense dataset, one record per slice of
    /// axis 0.
    Npy(ConvertArgs),
    /// A safetensors file → OUT/<tensor name>, one dense dataset per tensor.
    Safetensors(ConvertArgs),
    /// An MNIST IDX file, plain or .gz → dense dataset.
    Idx(ConvertArgs),
    /// A directory → ragged u8 dataset, one record per regular file in byte-wise name order.
    Dir(ConvertArgs),
    /// JSONL / newline-delimited files → ragged u8 dataset, record i = line i across the files
    /// (the newline excluded), planned into record-aligned ranges and split in parallel.
    Jsonl(JsonlArgs),
    /// Parquet files → OUT/<column>, one dataset per column: numbers and fixed-size lists dense,
    /// variable-length lists ragged, strings and binary values u8 records (build feature
    /// `parquet`).
    #[cfg(feature = "parquet")]
    Parquet(ParquetArgs),
    /// A token file (a Megatron dataset's .bin, .idx or prefix, an llm.c token file, a
    /// headerless one with --dtype) → ragged dataset of its tokens, one record a document (or
    /// --chunk tokens for a file without documents).
    Tokens(TokensArgs),
    /// An image folder (one subdirectory of JPEG, PNG or WebP files per class) → OUT/images
    /// (u8 [H, W, 3], or the files kept encoded), OUT/labels (u32) and OUT/classes.txt (build
    /// feature `images`).
    #[cfg(feature = "images")]
    #[command(after_help = "Examples:\n  \
        loaderx convert images photos/train stores/train --encoded --max-side 512   \
        # kept encoded: decoded and augmented by the loader at every step\n  \
        loaderx convert images photos/train stores/train --size 224x224             \
        # decoded once into pixels\n\n\
        A folder of files trains directly in examples/image_folder_burn.rs and image_folder_candle.rs.")]
    Images(ImagesArgs),
}

/// `convert parquet IN... OUT`.
#[cfg(feature = "parquet")]
#[derive(Debug, Args)]
pub struct ParquetArgs {
    /// The input files, in order (one table), then the directory to write the datasets in.
    #[arg(required = true, num_args = 1.., action = clap::ArgAction::Append, value_name = "IN... OUT")]
    paths: Vec<PathBuf>,
    /// A column to convert, `NAME` or `NAME=DATASET` (repeatable; default: every column).
    #[arg(long = "column", value_name = "NAME[=DATASET]")]
    columns: Vec<String>,
    /// Replace null values by this number (a null list, string or binary value by an empty
    /// record) instead of failing on the first. It must be a value of every numeric column's
    /// type: an integer column's exactly, a bool's 0 or 1.
    #[arg(long, value_name = "VALUE", allow_negative_numbers = true, value_parser = convert::Nulls::parse_fill)]
    fill_nulls: Option<convert::Nulls>,
    #[command(flatten)]
    part: PartArgs,
    #[command(flatten)]
    codec: CodecArgs,
}

/// `convert images DIR OUT`.
#[cfg(feature = "images")]
#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// The image folder: one subdirectory per class.
    input: PathBuf,
    /// The directory to write images, labels and classes.txt in.
    out: PathBuf,
    /// Output size, WIDTHxHEIGHT: every image decoded and resized to it (dense u8 pixels).
    #[arg(long, value_name = "WxH", value_parser = parse_size, required_unless_present = "encoded")]
    size: Option<(u32, u32)>,
    /// How images are brought to the size: crop (cover, then cut the centre), pad (fit, on
    /// black) or stretch.
    #[arg(long, default_value = "crop", conflicts_with = "encoded")]
    resize: loaderx_core::convert::Resize,
    /// Keep each file encoded, one record a file (checked by decoding it), for the loader to
    /// decode and augment at every step: about the JPEG bytes on disk, not 8x as raw pixels.
    #[arg(long, conflicts_with = "size")]
    encoded: bool,
    /// With --encoded: re-encode (as JPEG) the images whose longer side is over N pixels,
    /// resized to N; the others are kept byte for byte.
    #[arg(long, value_name = "N", conflicts_with = "size")]
    max_side: Option<u32>,
    /// With --encoded --max-side: the JPEG quality of re-encoded images (1-100; default 90).
    #[arg(long, value_name = "Q", conflicts_with = "size", requires = "max_side")]
    quality: Option<u8>,
    /// Leave out files that do not decode (listed on stderr) instead of failing.
    #[arg(long)]
    skip_bad: bool,
    #[command(flatten)]
    part: PartArgs,
    #[command(flatten)]
    codec: CodecArgs,
}

/// `224x224`.
#[cfg(feature = "images")]
fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(|| format!("`{s}` is not WIDTHxHEIGHT"))?;
    let n = |v: &str| {
        v.parse::<u32>().ok().filter(|&v| v > 0).ok_or_else(|| format!("`{s}` is not WIDTHxHEIGHT"))
    };
    Ok((n(w)?, n(h)?))
}

/// What every converter takes.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The input file (the directory for `dir`).
    input: PathBuf,
    /// The dataset to write (for `safetensors`, the directory that receives one per tensor).
    out: PathBuf,
    #[command(flatten)]
    part: PartArgs,
    #[command(flatten)]
    codec: CodecArgs,
}

/// `convert tokens IN OUT`.
#[derive(Debug, Args)]
pub struct TokensArgs {
    /// The token file.
    input: PathBuf,
    /// The dataset to write.
    out: PathBuf,
    /// The token type of a headerless token file (u16, u32...).
    #[arg(long)]
    dtype: Option<String>,
    /// Tokens a record for a file without documents (the last record shorter; default 65536).
    /// A file with documents makes one record a document, and refuses it.
    #[arg(long)]
    chunk: Option<usize>,
    #[command(flatten)]
    codec: CodecArgs,
}

/// `convert tokens` converts a whole file: it has no part options (look 151, L151-2: they were
/// listed, then always refused).
static WHOLE: PartArgs = PartArgs { part: None, parts: None, part_from_env: false };

/// `convert jsonl IN... OUT`.
#[derive(Debug, Args)]
pub struct JsonlArgs {
    /// The input files, in order, then the dataset to write.
    #[arg(required = true, num_args = 1.., action = clap::ArgAction::Append, value_name = "IN... OUT")]
    paths: Vec<PathBuf>,
    #[command(flatten)]
    part: PartArgs,
    #[command(flatten)]
    codec: CodecArgs,
}

/// Which part of the input to convert, for conversions on many machines.
#[derive(Debug, Args, Default)]
pub struct PartArgs {
    /// Convert only part K (zero-based) of --parts N, written to OUT itself: N processes with
    /// K = 0..N write N datasets that, in order, hold the whole conversion's records (rows of
    /// npy, safetensors and idx, files of dir and images in name order, whole row groups of
    /// parquet, record-aligned byte ranges of jsonl).
    #[arg(long, value_name = "K", requires = "parts", conflicts_with = "part_from_env")]
    part: Option<usize>,
    /// The number of parts, for --part (and for --part-from-env under a Kubernetes indexed job,
    /// which sets no count; checked against the count a scheduler sets).
    #[arg(long, value_name = "N")]
    parts: Option<usize>,
    /// Read the part from the scheduler's environment (LOADERX_PART / LOADERX_PARTS, Slurm's
    /// SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT, or Kubernetes'
    /// JOB_COMPLETION_INDEX of --parts) and write it to OUT/part-NNNNN: OUT is the directory of
    /// parts, which `loaderx stitch OUT SET` stitches.
    #[arg(long)]
    part_from_env: bool,
}

impl PartArgs {
    /// The part to convert (`None`: the whole input) and where it goes: `out` itself for
    /// `--part`, `out/part-NNNNN` for `--part-from-env`.
    fn resolve(&self, out: &Path) -> anyhow::Result<(Option<convert::Part>, PathBuf)> {
        match (self.part, self.parts, self.part_from_env) {
            (_, _, true) => {
                let part = convert::Part::from_env(self.parts)?;
                Ok((Some(part), out.join(part.name())))
            }
            (Some(k), Some(n), false) => Ok((Some(convert::Part::new(k, n)?), out.to_path_buf())),
            (None, Some(_), false) => anyhow::bail!("--parts N needs --part K or --part-from-env"),
            _ => Ok((None, out.to_path_buf())),
        }
    }
}

/// How the output is written.
#[derive(Debug, Args)]
pub struct CodecArgs {
    /// How records are compressed: zstd (each record alone), zstd_dict (against a dictionary
    /// trained on the data), lz4 (v2 only) or raw. Data that does not compress (float features:
    /// a ratio near 1.00x) is best raw: a fixed-size record store then has no per-record index
    /// and is gathered at the speed of a plain copy.
    #[arg(long, default_value = "zstd")]
    codec: Codec,
    /// The store format: v2 (no record-count or record-size walls, every record checksummed) or
    /// v1 (the specification's format).
    #[arg(long, default_value = "v2")]
    format: loaderx_core::Format,
    /// Upper bound on the zstd_dict dictionary size in bytes, 256 to 64 MiB, with --codec
    /// zstd_dict only (default: adapts to the data).
    #[arg(long, value_name = "BYTES")]
    dict_size: Option<usize>,
    /// Replace OUT if it exists (only once the new dataset is complete).
    #[arg(long)]
    force: bool,
}

fn input_size(path: &Path, is_dir: bool) -> u64 {
    if !is_dir {
        return std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    }
    std::fs::read_dir(path)
        .map(|rd| rd.filter_map(|e| e.ok()?.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum())
        .unwrap_or(0)
}

pub(crate) fn progress_bar(total: u64) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(total), target);
    pb.set_style(
        ProgressStyle::with_template(
            "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

/// `1.5 MiB`.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// `OUT: N records, ... ratio R` (the caller appends the time).
fn summary_line(what: &str, s: &ConvertSummary) -> String {
    format!(
        "{what}: {} records, {} in, {} on disk, ratio {:.2}x",
        s.records,
        human(s.bytes_in),
        human(s.bytes_on_disk),
        s.ratio()
    )
}

/// One line per dataset of a multi-dataset conversion, then the total's summary line.
fn per_dataset(out: &str, what: &str, all: &[(String, ConvertSummary)]) -> String {
    let mut total = ConvertSummary::default();
    let mut text = String::new();
    for (name, s) in all {
        text.push_str(&format!("  {name}: {} records, {} on disk\n", s.records, human(s.bytes_on_disk)));
        total.records += s.records;
        total.bytes_in += s.bytes_in;
        total.bytes_on_disk += s.bytes_on_disk;
    }
    text.push_str(&summary_line(&format!("{out} ({} {what})", all.len()), &total));
    text
}

/// Runs one conversion.
pub fn run(format: Format) -> anyhow::Result<()> {
    let (name, inputs, out, codec, part): (&str, Vec<&Path>, &Path, &CodecArgs, &PartArgs) = match &format {
        Format::Npy(a) => ("npy", vec![&a.input], &a.out, &a.codec, &a.part),
        Format::Safetensors(a) => ("safetensors", vec![&a.input], &a.out, &a.codec, &a.part),
        Format::Idx(a) => ("idx", vec![&a.input], &a.out, &a.codec, &a.part),
        Format::Dir(a) => ("dir", vec![&a.input], &a.out, &a.codec, &a.part),
        Format::Tokens(a) => ("tokens", vec![&a.input], &a.out, &a.codec, &WHOLE),
        Format::Jsonl(a) => {
            let (out, inputs) = in_and_out(&a.paths, "convert jsonl")?;
            ("jsonl", inputs.iter().map(PathBuf::as_path).collect(), out, &a.codec, &a.part)
        }
        #[cfg(feature = "parquet")]
        Format::Parquet(a) => {
            let (out, inputs) = in_and_out(&a.paths, "convert parquet")?;
            ("parquet", inputs.iter().map(PathBuf::as_path).collect(), out, &a.codec, &a.part)
        }
        #[cfg(feature = "images")]
        Format::Images(a) => ("images", vec![&a.input], &a.out, &a.codec, &a.part),
    };
    let shown: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    let ctx = |out: &Path| format!("convert {name} {} → {}", shown.join(" "), out.display());
    let (part, out) = part.resolve(out).with_context(|| ctx(out))?;
    let is_dir = match &format {
        Format::Dir(_) => true,
        #[cfg(feature = "images")]
        Format::Images(_) => true,
        _ => false,
    };
    let total = inputs.iter().map(|p| input_size(p, is_dir)).sum();
    let pb = progress_bar(total);
    let bar = pb.clone();
    let opts = WriteOptions::new()
        .codec(codec.codec)
        .format(codec.format)
        .dict_cap(codec.dict_size)
        .overwrite(codec.force)
        .progress(move |done| bar.set_position(done));
    let start = Instant::now();
    let text = convert_one(&format, &inputs, &out, opts, part).with_context(|| ctx(&out))?;
    pb.finish_and_clear();
    crate::print(&format!("{text}, {:.2}s\n", start.elapsed().as_secs_f64()))
}

/// Converts `format`'s input (part `part`, or the whole) into `out` and returns the summary,
/// without its time and newline.
fn convert_one(
    format: &Format,
    inputs: &[&Path],
    out: &Path,
    opts: WriteOptions,
    part: Option<convert::Part>,
) -> anyhow::Result<String> {
    let shown = out.display().to_string();
    let whole = part.unwrap_or(convert::Part::WHOLE);
    Ok(match format {
        Format::Npy(a) => summary_line(&shown, &convert::npy_part(&a.input, out, opts, whole)?),
        Format::Idx(a) => summary_line(&shown, &convert::idx_part(&a.input, out, opts, whole)?),
        Format::Dir(a) => summary_line(&shown, &convert::dir_part(&a.input, out, opts, whole)?),
        Format::Tokens(a) => {
            let file = crate::tokens::open(&a.input, a.dtype.as_deref(), None)?;
            // Said, not ignored (L151-2).
            anyhow::ensure!(
                a.chunk.is_none() || file.documents().is_none(),
                "convert tokens {}: --chunk cuts a file without documents; this one has its documents, \
                 one record each (drop --chunk)",
                a.input.display()
            );
            summary_line(&shown, &convert::tokens(&file, out, a.chunk.unwrap_or(65_536), opts)?)
        }
        Format::Jsonl(_) => {
            let s = match part {
                Some(part) => convert::jsonl_part(inputs, out, opts, part)?,
                None => convert::jsonl(inputs, out, opts)?,
            };
            summary_line(&shown, &s)
        }
        Format::Safetensors(a) => {
            per_dataset(&shown, "tensors", &convert::safetensors_part(&a.input, out, opts, whole)?)
        }
        #[cfg(feature = "parquet")]
        Format::Parquet(a) => {
            let columns = a
                .columns
                .iter()
                .map(|c| convert::ParquetColumn::parse(c))
                .collect::<loaderx_core::Result<Vec<_>>>()?;
            let nulls = a.fill_nulls.unwrap_or(convert::Nulls::Error);
            per_dataset(&shown, "columns", &convert::parquet_part(inputs, out, &columns, nulls, opts, whole)?)
        }
        #[cfg(feature = "images")]
        Format::Images(a) => {
            let (s, shape) = match a.size {
                Some(size) => {
                    let options = convert::ImageOptions { size, resize: a.resize, skip_bad: a.skip_bad };
                    (
                        convert::images_part(&a.input, out, options, opts, whole)?,
                        format!("{}x{}", size.0, size.1),
                    )
                }
                None => {
                    let options = convert::EncodedOptions {
                        max_side: a.max_side,
                        quality: a.quality.unwrap_or(90),
                        skip_bad: a.skip_bad,
                    };
                    let kept = a.max_side.map_or("encoded".to_string(), |n| format!("encoded, sides <= {n}"));
                    (convert::encoded_images_part(&a.input, out, options, opts, whole)?, kept)
                }
            };
            for (path, why) in &s.skipped {
                eprintln!("skipped {}: {why}", path.display());
            }
            let what = format!("{shown} ({} classes, {shape}, {} skipped)", s.classes.len(), s.skipped.len());
            summary_line(&what, &s.images)
        }
    })
}

/// The inputs and the output of a command taking `IN... OUT`, given apart or around options
/// (`IN --codec raw OUT`; look 147, L147-2: clap said "2 values required; only 1 was provided").
///
/// # Errors
/// When fewer than two paths are given, saying what is needed.
pub fn in_and_out<'a>(paths: &'a [PathBuf], command: &str) -> anyhow::Result<(&'a PathBuf, &'a [PathBuf])> {
    match paths.split_last() {
        Some((out, inputs)) if !inputs.is_empty() => Ok((out, inputs)),
        _ => anyhow::bail!(
            "{command} needs at least one input and then the output (IN... OUT); got {}",
            paths.len()
        ),
    }
}
