//! Ingest layer: the Parquet and image-folder converters against the decoding they cannot avoid
//! (features `parquet` and `images`). Each round converts the whole input once and decodes it
//! once more with nothing written, interleaved; the ratio is decode time / conversion time.

use std::hint::black_box;
use std::path::Path;

use loaderx_core::{Codec, WriteOptions};
use rayon::prelude::*;

use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing;
use crate::workloads::Gen;

/// Runs the ingest comparisons this build has features for.
///
/// # Errors
/// Writing the fixtures or converting them.
pub(crate) fn run(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("loaderx-ingest-").tempdir_in(&cfg.dir)?;
    #[cfg(feature = "parquet")]
    {
        cfg.progress("ingest: parquet");
        parquet(cfg, report, dir.path())?;
    }
    #[cfg(feature = "images")]
    {
        cfg.progress("ingest: images");
        images(cfg, report, dir.path())?;
    }
    Ok(())
}

fn fresh(p: &Path) {
    let _ = std::fs::remove_dir_all(p);
}

/// The bytes the files under `dir` take on disk (allocated blocks: a store's index file is
/// reserved ahead of its entries, sparse).
fn disk_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = e.metadata()?;
        total += if meta.is_dir() {
            disk_bytes(&e.path())?
        } else {
            #[cfg(unix)]
            {
                std::os::unix::fs::MetadataExt::blocks(&meta) * 512
            }
            #[cfg(not(unix))]
            {
                meta.len()
            }
        };
    }
    Ok(total)
}

/// Writes `bytes` to a fresh file in `dir` in 4 MiB writes and syncs it: what making the
/// converter's output durable costs this disk at the least.
fn durable_write(dir: &Path, bytes: u64) -> std::io::Result<()> {
    use std::io::Write;
    let path = dir.join("ceiling.bin");
    let mut f = std::fs::File::create(&path)?;
    let block = vec![0x5Au8; 4 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.sync_data()?;
    drop(f);
    std::fs::remove_file(path)
}

/// `decode` on the pool while `bytes` are written durably on a thread of their own, both
/// finished: the conversion's ceiling (its decode and its output's write perfectly overlapped,
/// nothing else done).
fn decode_beside_write(dir: &Path, bytes: u64, decode: impl FnOnce()) {
    std::thread::scope(|s| {
        let w = s.spawn(|| durable_write(dir, bytes).expect("the ceiling's write"));
        decode();
        w.join().expect("the ceiling's writer");
    });
}

/// A note comparing the conversion (row `conv`) with the ceiling (row `ceiling`), by median.
fn ceiling_note(results: &[timing::Interleaved], ceiling: usize, conv: usize, bytes: u64) -> String {
    format!(
        "Ceiling: decoding beside a durable write of the {:.1} MiB the output takes on disk, on a thread of \
         its own, perfectly overlapped; the conversion runs at {} of it.",
        bytes as f64 / (1u64 << 20) as f64,
        report::ratio(results[ceiling].median_ns / results[conv].median_ns)
    )
}

/// Rows of a section: each contender's seconds per run, rate and speed against contender 0.
fn table_rows(
    report: &mut Report,
    s: &mut Section,
    results: &[timing::Interleaved],
    workload: &str,
    per_run: (f64, &'static str),
) {
    let base = &results[0].name;
    for (k, r) in results.iter().enumerate() {
        let secs = r.median_ns / 1e9;
        let rate = per_run.0 / secs;
        let vs = (k > 0).then_some((base.as_str(), r.speed_vs_baseline));
        report.push_rates(("ingest", &r.name, workload), &[(rate, per_run.1)], vs);
        s.rows.push(vec![
            r.name.clone(),
            report::duration(secs),
            format!("{} {}", report::thousands(rate), per_run.1),
            vs.map_or_else(|| "baseline".into(), |(b, x)| format!("{} ({b})", report::ratio(x))),
        ]);
    }
}

/// Writes the Parquet table of the ingest rows at `path`: `rows` rows (int64, 32 × f32,
/// list<int32> of 0..63, string), snappy, row groups of 10,000.
#[cfg(feature = "parquet")]
fn write_parquet_table(path: &Path, rows: usize) -> anyhow::Result<()> {
    use std::sync::Arc;

    use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, Int32Builder, ListBuilder};
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;

    const GROUP: usize = 10_000;
    let mut g = Gen(0xBA4C);
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_size(GROUP)
        .build();
    let mut writer: Option<ArrowWriter<std::fs::File>> = None;
    for start in (0..rows).step_by(GROUP) {
        let n = GROUP.min(rows - start);
        let label = Int64Array::from_iter_values((0..n).map(|_| g.below(1000) as i64));
        let mut emb = FixedSizeListBuilder::new(Float32Builder::new(), 32);
        let mut ids = ListBuilder::new(Int32Builder::new());
        for _ in 0..n {
            for _ in 0..32 {
                emb.values().append_value(g.below(1 << 20) as f32 / 1024.0);
            }
            emb.append(true);
            for _ in 0..g.below(64) {
                ids.values().append_value(g.below(50_000) as i32);
            }
            ids.append(true);
        }
        let text = StringArray::from_iter_values(
            (0..n).map(|i| format!("row {} {}", start + i, "lorem ipsum ".repeat(4))),
        );
        let batch = RecordBatch::try_from_iter(vec![
            ("label", Arc::new(label) as ArrayRef),
            ("emb", Arc::new(emb.finish()) as ArrayRef),
            ("ids", Arc::new(ids.finish()) as ArrayRef),
            ("text", Arc::new(text) as ArrayRef),
        ])?;
        let w = match &mut writer {
            Some(w) => w,
            None => writer.insert(ArrowWriter::try_new(
                std::fs::File::create(path)?,
                batch.schema(),
                Some(props.clone()),
            )?),
        };
        w.write(&batch)?;
    }
    if let Some(w) = writer {
        w.close()?;
    }
    Ok(())
}

#[cfg(feature = "parquet")]
fn parquet(cfg: &Config, report: &mut Report, dir: &Path) -> anyhow::Result<()> {
    use loaderx_core::convert::{Nulls, ParquetColumn};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let rows = 5 * cfg.records as usize;
    let path = dir.join("table.parquet");
    write_parquet_table(&path, rows)?;
    let groups =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path)?)?.metadata().num_row_groups();
    let out = dir.join("parquet-out");
    let decode = || -> anyhow::Result<()> {
        (0..groups).into_par_iter().try_for_each(|g| -> anyhow::Result<()> {
            let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path)?)?;
            for batch in b.with_row_groups(vec![g]).with_batch_size(8192).build()? {
                black_box(batch?.num_rows());
            }
            Ok(())
        })
    };
    let convert = || -> anyhow::Result<()> {
        let none: [ParquetColumn; 0] = [];
        loaderx_core::convert::parquet(
            &[&path],
            &out,
            &none,
            Nulls::Error,
            WriteOptions::new().codec(Codec::Raw),
        )?;
        Ok(())
    };
    convert()?;
    let out_bytes = disk_bytes(&out)?;
    fresh(&out);
    let mut contenders: Vec<timing::FixedContender<'_>> = vec![
        (
            "the parquet crate alone: decode every row group, nothing written",
            Box::new(|| decode().expect("decode")),
        ),
        (
            "ceiling: that decode beside a durable write of the output's bytes",
            Box::new(|| decode_beside_write(dir, out_bytes, || decode().expect("decode"))),
        ),
        ("loaderx convert parquet (raw codec)", Box::new(|| convert().expect("convert"))),
    ];
    let results = timing::interleaved_fixed_tidy(cfg.rounds, 1, &mut contenders, &mut || fresh(&out));
    let mut s = Section::new(
        format!(
            "I1. Ingest — Parquet → store: {rows} rows (int64, 32 × f32, list<int32> of 0..63, string), snappy, \
             {groups} row groups, {} threads",
            rayon::current_num_threads()
        ),
        &["contender", "per run", "rate", "vs"],
    );
    table_rows(report, &mut s, &results, &format!("{rows} Parquet rows, 4 columns"), (rows as f64, "rows/s"));
    s.notes.push(
        "Both decode the same four columns, row groups in parallel on the same pool; the converter \
         also turns each batch into records and writes four datasets (raw)."
            .into(),
    );
    s.notes.push(ceiling_note(&results, 1, 2, out_bytes));
    report.sections.push(s);
    Ok(())
}

#[cfg(feature = "images")]
fn images(cfg: &Config, report: &mut Report, dir: &Path) -> anyhow::Result<()> {
    use loaderx_core::convert::{ImageOptions, fit};

    let n = (cfg.records as usize * 12 / 1000).max(16);
    let input = dir.join("folder");
    let mut g = Gen(0x1A6E);
    let mut files = Vec::new();
    for k in 0..n {
        let class = input.join(format!("class{}", k % 4));
        std::fs::create_dir_all(&class)?;
        let (w, h) = (320, 240);
        let (a, b) = (g.below(256) as u8, g.below(256) as u8);
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([
                (x as u8).wrapping_add(a),
                (y as u8).wrapping_mul(3).wrapping_add(b),
                ((x ^ y) as u8),
            ])
        });
        let path = class.join(format!("{k:04}.jpg"));
        img.save_with_format(&path, image::ImageFormat::Jpeg)?;
        files.push(path);
    }
    let options = ImageOptions::new(224, 224);
    let out = dir.join("images-out");
    // The decoder the converter uses (libjpeg-turbo for these JPEGs with `turbojpeg`, as the
    // loader decodes them; `image`'s otherwise), each whole file to RGB.
    let decode_only = || {
        files.par_iter().for_each_init(loaderx_core::vision::Scratch::default, |scratch, p| {
            let bytes = std::fs::read(p).expect("a fixture");
            black_box(scratch.decode_whole(&bytes).expect("a jpeg").1);
        })
    };
    let decode_resize = || {
        files.par_iter().for_each_init(loaderx_core::vision::Scratch::default, |scratch, p| {
            let bytes = std::fs::read(p).expect("a fixture");
            let (pixels, w, h) = scratch.decode_whole(&bytes).expect("a jpeg");
            let img = image::RgbImage::from_raw(w, h, pixels.to_vec()).expect("whole");
            black_box(fit(&image::DynamicImage::ImageRgb8(img), options).len());
        })
    };
    let convert = || {
        loaderx_core::convert::images(&input, &out, options, WriteOptions::new().codec(Codec::Raw))
            .expect("convert");
    };
    convert();
    let out_bytes = disk_bytes(&out)?;
    fresh(&out);
    let mut contenders: Vec<timing::FixedContender<'_>> = vec![
        ("decode alone (the converter's decoder, in parallel)", Box::new(decode_only)),
        ("decode + resize to 224x224, nothing written", Box::new(decode_resize)),
        (
            "ceiling: decode + resize beside a durable write of the output's bytes",
            Box::new(|| decode_beside_write(dir, out_bytes, decode_resize)),
        ),
        ("loaderx convert images --size 224x224 (raw)", Box::new(convert)),
    ];
    let results = timing::interleaved_fixed_tidy(cfg.rounds, 1, &mut contenders, &mut || fresh(&out));
    let mut s = Section::new(
        format!(
            "I2. Ingest — an image folder: {n} JPEGs of 320x240 in 4 classes, cropped to 224x224, {} threads",
            rayon::current_num_threads()
        ),
        &["contender", "per run", "rate", "vs"],
    );
    table_rows(report, &mut s, &results, &format!("{n} JPEGs 320x240 to 224x224"), (n as f64, "images/s"));
    s.notes.push(
        "Every contender reads the files; the converter decodes, crops and resizes (bilinear) and writes the \
         images and labels."
            .into(),
    );
    s.notes.push(ceiling_note(&results, 2, 3, out_bytes));
    report.sections.push(s);
    Ok(())
}
