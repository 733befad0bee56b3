//! Images layer (feature `images`): the loader's decode-and-augment streams against the
//! full-decode ceiling, on the same encoded files and the same number of threads.
//!
//! The ceiling is a decoder decoding and nothing else: each whole file, already in memory,
//! decoded to RGB by the decoder the pipeline itself uses (libjpeg-turbo for JPEGs with feature
//! `turbojpeg`, else `image`'s: `Scratch::decode_whole`), on a pool of as many threads as the
//! loader has. The loader contenders read the same files from an encoded store
//! (`convert images --encoded`, warm page cache) and deliver batches of 256: decode, crop,
//! resize, flip, normalise, batch. Each run builds a fresh loader (its first batch included)
//! and drops it, so that no contender prefetches while another is timed.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use loaderx_core::vision::{IMAGENET_MEAN, IMAGENET_STD, ImagePipeline, Scratch};
use loaderx_core::{DataLoader, RaggedSource, WriteOptions};
use rayon::prelude::*;

use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing;
use crate::workloads::Gen;

/// Images per loader batch, as issue 43's goals are stated.
const BATCH: usize = 256;

/// Runs the image comparisons on `folder` (an image folder of class subdirectories), or on
/// generated JPEGs when there is none.
///
/// # Errors
/// Writing the fixtures, converting them, or a loader error.
pub(crate) fn run(
    cfg: &Config,
    report: &mut Report,
    folder: Option<&Path>,
    threads: usize,
) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("loaderx-images-").tempdir_in(&cfg.dir)?;
    let (input, what) = match folder {
        Some(f) => (f.to_path_buf(), format!("the files of {}", f.display())),
        None => {
            let n = if cfg.quick { 2 * BATCH } else { 4 * BATCH };
            (generate(&dir.path().join("folder"), n)?, format!("{n} generated JPEGs of 500x375, quality 90"))
        }
    };
    cfg.progress("images: converting");
    let store = dir.path().join("store");
    loaderx_core::convert::encoded_images(&input, &store, Default::default(), WriteOptions::new())?;
    let images = RaggedSource::open(store.join("images"))?;
    let n = images.len();
    anyhow::ensure!(n >= BATCH, "{what}: {n} images, fewer than a batch of {BATCH}");
    let steps = n / BATCH;
    let per_run = steps * BATCH;
    let all: Vec<u32> = (0..per_run as u32).collect();
    let batch = images.get_batch(&all)?;
    let files: Vec<Vec<u8>> =
        (0..per_run).map(|k| Ok(batch.record::<u8>(k)?.to_vec())).collect::<loaderx_core::Result<_>>()?;
    drop(batch);
    let bytes: usize = files.iter().map(Vec::len).sum();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let ceiling = || {
        pool.install(|| {
            files.par_iter().for_each_init(Scratch::default, |scratch, f| {
                black_box(scratch.decode_whole(f).expect("a fixture decodes").0.len());
            });
        });
    };
    let through_loader = |pipeline: ImagePipeline| {
        let images = images.clone();
        move || {
            let mut loader = DataLoader::builder()
                .image_stream("image", images.clone(), pipeline.clone())
                .batch_size(BATCH)
                .threads(threads)
                .prefetch(threads)
                .seed(7)
                .build()
                .expect("the bench loader builds");
            for _ in 0..steps {
                black_box(loader.next_batch().expect("a batch").expect("an endless loader").len());
            }
        }
    };
    let train = ImagePipeline::train(224).normalize(IMAGENET_MEAN, IMAGENET_STD);
    let eval = ImagePipeline::eval(224).normalize(IMAGENET_MEAN, IMAGENET_STD);
    let jitter = train.clone().jitter(0.4, 0.4, 0.4);
    let train_u8 = ImagePipeline::train(224);
    let mut contenders: Vec<timing::FixedContender<'_>> = vec![
        ("ceiling: decode each whole file to RGB, nothing else", Box::new(ceiling)),
        (
            "loaderx train: RandomResizedCrop(224), flip, Normalize → f32 NCHW",
            Box::new(through_loader(train)),
        ),
        ("loaderx train + ColorJitter(0.4, 0.4, 0.4)", Box::new(through_loader(jitter))),
        ("loaderx train, u8 NHWC (no Normalize)", Box::new(through_loader(train_u8))),
        ("loaderx eval: Resize(256), CenterCrop(224), Normalize", Box::new(through_loader(eval))),
    ];
    cfg.progress("images: timing");
    let results = timing::interleaved_fixed(cfg.rounds, 1, &mut contenders);
    let mut s = Section::new(
        format!(
            "M1. Images — {what} ({:.0} KiB on average), {per_run} a run in batches of {BATCH}, {threads} threads",
            bytes as f64 / per_run as f64 / 1024.0
        ),
        &["contender", "per run", "rate", "vs ceiling"],
    );
    let base = results[0].name.clone();
    for (k, r) in results.iter().enumerate() {
        let secs = r.median_ns / 1e9;
        let rate = per_run as f64 / secs;
        let vs = (k > 0).then_some((base.as_str(), r.speed_vs_baseline));
        report.push_rates(("images", &r.name, &what), &[(rate, "images/s")], vs);
        s.rows.push(vec![
            r.name.clone(),
            report::duration(secs),
            format!("{} images/s", report::thousands(rate)),
            vs.map_or_else(|| "ceiling".into(), |(_, x)| report::ratio(x)),
        ]);
    }
    s.notes.push(
        "The ceiling decodes files held in memory on a rayon pool of the loader's thread count; each loader run \
         builds a loader (prefetch depth = threads), takes every batch of the run, and drops it. With \
         `turbojpeg`, the loader decodes only each crop's region of a JPEG (the ceiling decodes it whole)."
            .into(),
    );
    report.sections.push(s);
    first_batch(cfg, report, &images, threads, &what);
    Ok(())
}

/// Section M2: from building a loader of the train transform to holding its first batch, at a
/// small batch and at [`BATCH`] (issue 43 asks for under 50 ms), the median of fresh loaders.
fn first_batch(cfg: &Config, report: &mut Report, images: &RaggedSource, threads: usize, what: &str) {
    let rounds = cfg.rounds.max(3);
    let mut s = Section::new(
        format!("M2. Images — open to the first batch of the train transform, {threads} threads"),
        &["batch", "open to first batch (median)", "per image"],
    );
    for batch in [32, BATCH] {
        let mut times: Vec<f64> = (0..rounds)
            .map(|_| {
                let t = std::time::Instant::now();
                let mut loader = DataLoader::builder()
                    .image_stream(
                        "image",
                        images.clone(),
                        ImagePipeline::train(224).normalize(IMAGENET_MEAN, IMAGENET_STD),
                    )
                    .batch_size(batch)
                    .threads(threads)
                    .seed(7)
                    .build()
                    .expect("the bench loader builds");
                black_box(loader.next_batch().expect("a batch").expect("an endless loader").len());
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let secs = times[times.len() / 2];
        report.push_rates(("images", &format!("first batch of {batch}"), what), &[(secs * 1e3, "ms")], None);
        s.rows.push(vec![batch.to_string(), report::duration(secs), report::duration(secs / batch as f64)]);
    }
    s.notes.push(
        "One batch is cut by one prefetch thread (the others start the next steps), so a first batch takes its          images' decodes one after another: its time grows with the batch, not with the dataset."
            .into(),
    );
    report.sections.push(s);
}

/// Writes `n` photo-like JPEGs of 500x375 (quality 90) in 4 classes under `dir`: smooth fields
/// of colour with edges and grain, so that they compress as photographs do (tens of KiB), not
/// as flat test cards.
fn generate(dir: &Path, n: usize) -> anyhow::Result<PathBuf> {
    use image::codecs::jpeg::JpegEncoder;
    let mut g = Gen(0x1A6E_5EED);
    for k in 0..n {
        let class = dir.join(format!("class{}", k % 4));
        std::fs::create_dir_all(&class)?;
        let (w, h) = (500u32, 375u32);
        let (fx, fy, phase) = (1 + g.below(6), 1 + g.below(5), g.below(628) as f32 / 100.0);
        let (cx, cy) = (g.below(w as u64) as f32, g.below(h as u64) as f32);
        let base = [g.below(200) as f32, g.below(200) as f32, g.below(200) as f32];
        let mut noise = Gen(g.below(u64::MAX));
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            let (xf, yf) = (x as f32 / w as f32, y as f32 / h as f32);
            let wave = ((xf * fx as f32 * 6.3 + phase).sin() + (yf * fy as f32 * 6.3).cos()) * 30.0;
            let disc = if (x as f32 - cx).hypot(y as f32 - cy) < 90.0 { 40.0 } else { 0.0 };
            let grain = noise.below(25) as f32 - 12.0;
            image::Rgb(base.map(|b| (b + wave + disc + grain).clamp(0.0, 255.0) as u8))
        });
        let mut out = std::io::BufWriter::new(std::fs::File::create(class.join(format!("{k:04}.jpg")))?);
        JpegEncoder::new_with_quality(&mut out, 90).encode_image(&img)?;
    }
    Ok(dir.to_path_buf())
}
