//! Loader layer: the endless loader end to end (sample, gather, collate, hand over a batch)
//! against the gather it cannot avoid, with the identity transform and a CPU-heavy one.
//!
//! Records are 12 KiB (a dense f32 stream of 3,072 elements) in a raw store, batch 256, cyclic
//! sampler. The heavy transform normalises each sample to zero mean and unit variance, then
//! runs a few passes of element-wise arithmetic, so it costs several times the gather and the
//! loader's prefetch threads have real work to spread.

use std::cell::RefCell;
use std::hint::black_box;

use loaderx_core::{
    Batch, DataLoader, DatasetWriter, DenseSource, LoaderBuilder, Pack, Pad, Pass, RaggedDataset,
    SamplerMode, WriteOptions,
};

use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing::{self, Contender, Timings, Work, settle};
use crate::workloads::{Gen, blocks, write_structured_f32};

const BATCH: u32 = 256;
const ELEMS: usize = 3072;
const PASSES: usize = 12;
/// The loader's default prefetch depth, set explicitly so the untimed drain below matches it.
const PREFETCH: usize = 2;
const GATHER: &str = "gather (calling thread)";
const IDENTITY: &str = "loaderx identity";
const SERIAL: &str = "gather + transform (calling thread)";
const HEAVY: &str = "loaderx + transform";

/// Per sample: normalise, then `PASSES` passes of arithmetic that vectorises but cannot be
/// folded away.
fn transform(v: &mut [f32]) {
    for s in v.chunks_mut(ELEMS) {
        let n = s.len() as f32;
        let mean = s.iter().sum::<f32>() / n;
        let var = s.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
        let inv = 1.0 / (var.sqrt() + 1e-6);
        for x in s.iter_mut() {
            *x = (*x - mean) * inv;
        }
        for _ in 0..PASSES {
            for x in s.iter_mut() {
                *x = 0.5 * *x + 0.25 * (*x * *x + 1.0).sqrt();
            }
        }
    }
}

fn heavy(mut b: Batch) -> anyhow::Result<Vec<f32>> {
    let mut v = b.take("x").ok_or_else(|| anyhow::anyhow!("no stream x"))?.into_vec::<f32>()?;
    transform(&mut v);
    Ok(v)
}

/// Batches a loader of `threads` threads can hold ready: `threads * prefetch` queued plus one in
/// hand per thread.
fn queued(threads: usize) -> u32 {
    (threads * (PREFETCH + 1)) as u32
}

/// A contender taking batches from `loader`: the `queued` batches it holds ready are drained
/// untimed, and its prefetch threads settle before each round.
fn prefetched<'a, O: Send + 'static>(
    name: &str,
    loader: &'a RefCell<DataLoader<O>>,
    queued: u32,
) -> Contender<'a> {
    Contender {
        untimed: queued,
        settle: Some(Box::new(|| settle(|| loader.borrow().prefetched()))),
        ..Contender::new(
            name,
            Box::new(|| {
                drop(black_box(
                    loader.borrow_mut().next_batch().expect("a batch").expect("an endless loader"),
                ))
            }),
        )
    }
}

/// `loaders` (of `threads` prefetch threads each) timed against each other in interleaved rounds.
fn time_loaders(cfg: &Config, threads: usize, loaders: &[(&str, &RefCell<DataLoader<Batch>>)]) -> Timings {
    let queued = queued(threads);
    let mut contenders: Vec<Contender<'_>> =
        loaders.iter().map(|&(name, l)| prefetched(name, l, queued)).collect();
    timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders)
}

/// The "vs" cell of contender `name`: its speed against `base`, or "baseline".
fn versus(t: &Timings, name: &str, base: Option<&str>) -> String {
    base.map_or_else(|| "baseline".into(), |b| format!("{} ({b})", report::ratio(t.speed_vs(name, b))))
}

/// Measures the loader and adds its rows and table.
///
/// # Errors
/// Writing or opening the generated dataset.
pub(crate) fn run(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let n = cfg.records;
    let dir = tempfile::Builder::new().prefix("loaderx-bench-").tempdir_in(&cfg.dir)?;
    let path = dir.path().join("x");
    write_structured_f32(&path, ELEMS, blocks(n, ELEMS * 4, 64 << 20))?;
    let source = DenseSource::open(&path)?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(1, 8);
    let typed = source.clone().typed::<f32>()?;
    let builder = DataLoader::builder()
        .stream("x", source)
        .batch_size(BATCH as usize)
        .mode(SamplerMode::Cyclic)
        .seed(7)
        .threads(threads)
        .prefetch(PREFETCH);
    let sampler = sampler_of(&builder)?;
    let identity = RefCell::new(builder.clone().build()?);
    let loaded = RefCell::new(builder.clone().build_with(heavy)?);

    let serial = |with_transform: bool| -> Work<'_> {
        let mut idx = vec![0u32; BATCH as usize];
        let mut out = vec![0f32; BATCH as usize * ELEMS];
        let mut step = 0u64;
        let (sampler, typed) = (&sampler, &typed);
        Box::new(move || {
            sampler.fill(step, &mut idx).expect("a buffer of the batch size");
            typed.gather_into(&idx, &mut out).expect("gather from a dataset this run wrote");
            if with_transform {
                transform(&mut out);
            }
            step += 1;
            black_box(&out);
        })
    };
    let queued = queued(threads);
    let mut contenders = vec![
        Contender::new(GATHER, serial(false)),
        prefetched(IDENTITY, &identity, queued),
        Contender::new(SERIAL, serial(true)),
        prefetched(HEAVY, &loaded, queued),
    ];
    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);

    let batch_mib = f64::from(BATCH) * (ELEMS * 4) as f64 / (1 << 20) as f64;
    let workload = format!("{n} records of 12 KiB, batch {BATCH}");
    let mut s = Section::new(
        format!(
            "3. Loader — {} records of 12 KiB (f32 × {ELEMS}), batch {BATCH}, cyclic, {threads} prefetch threads",
            report::thousands(n.into())
        ),
        &["loader", "batches/s", "per batch", "samples/s", "throughput", "vs"],
    );
    for (name, base) in [(GATHER, None), (IDENTITY, Some(GATHER)), (SERIAL, None), (HEAVY, Some(SERIAL))] {
        let secs = t.median_secs(name);
        let bps = 1.0 / secs;
        report.push_rates(
            ("loader", name, &workload),
            &[(bps, "batches/s"), (bps * f64::from(BATCH), "samples/s"), (bps * batch_mib, "MiB/s")],
            base.map(|b| (b, t.speed_vs(name, b))),
        );
        s.rows.push(vec![
            name.into(),
            format!("{bps:.1}"),
            report::duration(secs),
            report::thousands(bps * f64::from(BATCH)),
            format!("{:.0} MiB/s", bps * batch_mib),
            versus(&t, name, base),
        ]);
    }
    s.notes.push(format!(
        "The calling-thread rows are the work a loader cannot avoid (sample + gather, plus the \
         transform for the second pair), done in the foreground; the loader rows run it on \
         {threads} prefetch threads and hand over finished batches. Transform: per-sample \
         normalisation and {PASSES} passes of element-wise arithmetic."
    ));
    report.sections.push(s);
    drop((identity, loaded));
    cfg.progress("loader: finite pass, padded ragged");
    passes(cfg, report, &builder, threads)?;
    ragged(cfg, report, threads)?;
    cfg.progress("loader: weighted mixture");
    mixture(cfg, report, &builder, dir.path(), threads)?;
    cfg.progress("loader: packing and bucketing");
    packing(cfg, report, threads)?;
    #[cfg(any(feature = "burn", feature = "candle"))]
    {
        cfg.progress("adapters");
        let shared = crate::adapters::Shared { source: typed.source(), elems: ELEMS, threads, queued };
        crate::adapters::run(cfg, report, &shared)?;
    }
    Ok(())
}

/// The sampler of the endless loader `builder` builds.
pub(crate) fn sampler_of(builder: &LoaderBuilder) -> anyhow::Result<loaderx_core::Sampler> {
    builder
        .clone()
        .build()?
        .sampler()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("an endless loader has a sampler"))
}

/// The rows of a section comparing `name` with `base` in batches per second.
fn pair_rows(report: &mut Report, s: &mut Section, t: &Timings, workload: &str, base: &str, name: &str) {
    for (name, base) in [(base, None), (name, Some(base))] {
        let bps = 1.0 / t.median_secs(name);
        report.push_rates(
            ("loader", name, workload),
            &[(bps, "batches/s")],
            base.map(|b| (b, t.speed_vs(name, b))),
        );
        s.rows.push(vec![name.into(), format!("{bps:.1}"), versus(t, name, base)]);
    }
}

const SINGLE: &str = "one source (endless cyclic loader)";
const MIXED: &str = "mixture of 3 sources, weights 0.5 / 0.3 / 0.2";

/// A weighted mixture of three stores holding the records in thirds against the endless loader
/// over the one store of all of them: batches/s.
fn mixture(
    cfg: &Config,
    report: &mut Report,
    builder: &LoaderBuilder,
    dir: &std::path::Path,
    threads: usize,
) -> anyhow::Result<()> {
    let n = cfg.records;
    let cuts = [0, n / 3, 2 * n / 3, n];
    let mut sources = Vec::new();
    for (k, w) in [0.5, 0.3, 0.2].into_iter().enumerate() {
        let path = dir.join(format!("mix-{k}"));
        let (lo, hi) = (cuts[k], cuts[k + 1]);
        let part: Vec<(u32, u32)> = blocks(n, ELEMS * 4, 64 << 20)
            .into_iter()
            .map(|(a, b)| (a.max(lo), b.min(hi)))
            .filter(|(a, b)| a < b)
            .collect();
        write_structured_f32(&path, ELEMS, part)?;
        sources.push((w, DataLoader::builder().stream("x", DenseSource::open(&path)?)));
    }
    let mixed = LoaderBuilder::mixture(sources)?
        .batch_size(BATCH as usize)
        .seed(7)
        .threads(threads)
        .prefetch(PREFETCH);
    let single = RefCell::new(builder.clone().build()?);
    let mix = RefCell::new(mixed.build()?);
    let t = time_loaders(cfg, threads, &[(SINGLE, &single), (MIXED, &mix)]);
    let mut s = Section::new(
        format!(
            "3d. Loader — a weighted mixture against one source, the same 12 KiB records, batch {BATCH}, {threads} threads"
        ),
        &["loader", "batches/s", "vs"],
    );
    let workload = format!("{n} records of 12 KiB, batch {BATCH}, mixture");
    pair_rows(report, &mut s, &t, &workload, SINGLE, MIXED);
    s.notes.push(
        "The mixture reads three stores holding the records in thirds; each step deals its rows by \
         weight, draws each source's from its own keyed shuffle, shuffles the batch and gathers each \
         source's rows in one run."
            .into(),
    );
    report.sections.push(s);
    Ok(())
}

const PACK_L: u32 = 2048;
const PACK_ROWS: u32 = 8;
const P_PADDED: &str = "padded to the batch's longest";
const P_BUCKETED: &str = "padded, bucketed by length (window 32 steps)";
const P_WHOLE: &str = "packed, samples whole";
const P_SPLIT: &str = "packed, samples split at row ends";
const P_UNCACHED: &str = "packed, samples whole, no length cache (every plan reads each entry)";

/// Writes `records` ragged i32 token records of log-normal lengths (median 300) at `path`;
/// returns their mean length.
fn write_lognormal_tokens(path: &std::path::Path, records: u32) -> anyhow::Result<f64> {
    let mut w =
        DatasetWriter::ragged::<i32>(path, vec![], WriteOptions::new().codec(loaderx_core::Codec::Raw))?;
    let mut g = Gen(0x9ACC);
    let mut total = 0u64;
    for i in 0..records {
        // Box-Muller: a normal deviate, then exp(ln 300 + 0.6 z).
        let (u1, u2) = (
            (g.below(1 << 24) as f64 + 1.0) / f64::from(1 << 24),
            g.below(1 << 24) as f64 / f64::from(1 << 24),
        );
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let len = (300.0 * (0.6 * z).exp()).round().clamp(1.0, 8192.0) as usize;
        total += len as u64;
        w.append_record(&(0..len as i32).map(|j| j ^ i as i32).collect::<Vec<i32>>())?;
    }
    w.finish()?;
    Ok(total as f64 / f64::from(records))
}

/// Sequence packing against padding on log-normal token lengths (median 300): the share of
/// token slots filled, and batches/s with the padded batches holding as many samples as a
/// packed batch does on average.
fn packing(cfg: &Config, report: &mut Report, threads: usize) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("loaderx-bench-pack-").tempdir_in(&cfg.dir)?;
    let path = dir.path().join("tokens");
    let mean = write_lognormal_tokens(&path, cfg.records)?;
    let base = DataLoader::builder().open_stream("t", &path).seed(7).threads(threads).prefetch(PREFETCH);
    let packed_with = |pack: Pack| -> anyhow::Result<LoaderBuilder> {
        Ok(base.clone().pack("t", pack).batch_size(PACK_ROWS as usize))
    };
    let packed = |split: bool| packed_with(Pack::new(PACK_L).split(split));
    let uncached = || packed_with(Pack::new(PACK_L).cache_lengths(false));
    // As many samples per padded batch as a packed batch holds on average.
    let per_batch = ((f64::from(PACK_ROWS * PACK_L) / mean).round() as u32).max(1);
    let padded = base.clone().pad("t", Pad::longest()).batch_size(per_batch as usize);
    let bucketed = padded.clone().bucket("t", 32);
    let fill = |b: &LoaderBuilder, mask: &str| -> anyhow::Result<f64> {
        let mut l = b.clone().build()?;
        let (mut on, mut all) = (0usize, 0usize);
        for _ in 0..200 {
            let batch = l.next_batch()?.ok_or_else(|| anyhow::anyhow!("the loader ended"))?;
            let m = batch.get(mask).ok_or_else(|| anyhow::anyhow!("no {mask}"))?.as_slice::<u8>()?;
            on += m.iter().filter(|&&x| x != 0).count();
            all += m.len();
        }
        Ok(on as f64 / all as f64)
    };
    let fills = [
        (P_PADDED, fill(&padded, "t_mask")?),
        (P_BUCKETED, fill(&bucketed, "t_mask")?),
        (P_WHOLE, fill(&packed(false)?, "t_loss_mask")?),
        (P_SPLIT, fill(&packed(true)?, "t_loss_mask")?),
        (P_UNCACHED, fill(&uncached()?, "t_loss_mask")?),
    ];
    let loaders = [
        RefCell::new(padded.build()?),
        RefCell::new(bucketed.build()?),
        RefCell::new(packed(false)?.build()?),
        RefCell::new(packed(true)?.build()?),
        RefCell::new(uncached()?.build()?),
    ];
    let named: Vec<(&str, &RefCell<DataLoader<Batch>>)> =
        fills.iter().map(|(name, _)| *name).zip(&loaders).collect();
    let t = time_loaders(cfg, threads, &named);
    let mut s = Section::new(
        format!(
            "3e. Loader — packing and bucketing, i32 tokens of log-normal lengths (median 300, mean {mean:.0}), \
             rows of {PACK_L}, {threads} threads"
        ),
        &["loader", "token slots filled", "batches/s", "vs"],
    );
    let workload =
        format!("{} ragged records, {PACK_ROWS} rows of {PACK_L} or {per_batch} padded samples", cfg.records);
    for (name, f) in fills {
        let bps = 1.0 / t.median_secs(name);
        let base = (name != P_PADDED).then_some(P_PADDED);
        report.push_rates(
            ("loader", name, &workload),
            &[(bps, "batches/s"), (100.0 * f, "% slots filled")],
            base.map(|b| (b, t.speed_vs(name, b))),
        );
        s.rows.push(vec![
            name.into(),
            format!("{:.1}%", 100.0 * f),
            format!("{bps:.1}"),
            versus(&t, name, base),
        ]);
    }
    s.notes.push(format!(
        "A packed batch is {PACK_ROWS} rows of {PACK_L} tokens; the padded batches hold {per_batch} samples, \
         what a packed batch holds on average, so each row of the table moves the same samples per batch. \
         The packed loaders' planners read record lengths from the index a block of 4,096 records at a time \
         and keep them (a first pass reads each block once; this run of {} records reads them in its first \
         steps); the last row reads each sample's entry at every plan.",
        cfg.records
    ));
    report.sections.push(s);
    Ok(())
}

const ENDLESS: &str = "endless loader (cyclic)";
const PASS: &str = "exactly-once epochs (shuffled passes back to back)";

/// The finite pass against the endless loader on the same data: batches/s.
fn passes(cfg: &Config, report: &mut Report, builder: &LoaderBuilder, threads: usize) -> anyhow::Result<()> {
    let endless = RefCell::new(builder.clone().build()?);
    let passes = RefCell::new(builder.clone().pass(Pass::shuffled().epochs(None)).build()?);
    let steps = passes.borrow().steps_per_epoch();
    let t = time_loaders(cfg, threads, &[(ENDLESS, &endless), (PASS, &passes)]);
    let mut s = Section::new(
        format!(
            "3b. Loader — finite passes against the endless loader, 12 KiB records, batch {BATCH}, {threads} threads"
        ),
        &["loader", "batches/s", "vs"],
    );
    let workload = format!("{} records of 12 KiB, batch {BATCH}, passes", cfg.records);
    pair_rows(report, &mut s, &t, &workload, ENDLESS, PASS);
    let epochs = passes.borrow().step() / steps.max(1);
    s.notes.push(format!(
        "{epochs} epochs of {steps} steps ran, each every record once in a new shuffle, its last batch \
         partial; the prefetch threads go on into the next epoch."
    ));
    report.sections.push(s);
    Ok(())
}

const BY_HAND: &str = "by hand: sample + get_batch + pad (calling thread)";
const PADDED: &str = "loaderx padded ragged loader";

/// A ragged token stream padded on the prefetch threads against the same work done by hand.
fn ragged(cfg: &Config, report: &mut Report, threads: usize) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("loaderx-bench-ragged-").tempdir_in(&cfg.dir)?;
    let path = dir.path().join("tokens");
    let mut w =
        DatasetWriter::ragged::<i32>(&path, vec![], WriteOptions::new().codec(loaderx_core::Codec::Raw))?;
    let mut g = Gen(0x70C3);
    let mut total = 0usize;
    for i in 0..cfg.records {
        let len = 16 + g.below(497) as usize;
        total += len;
        w.append_record(&(0..len as i32).map(|j| j ^ i as i32).collect::<Vec<i32>>())?;
    }
    w.finish()?;
    let data = RaggedDataset::<i32>::open(&path)?;
    let builder = DataLoader::builder()
        .open_stream("t", &path)
        .batch_size(BATCH as usize)
        .seed(3)
        .threads(threads)
        .prefetch(PREFETCH);
    let sampler = builder.clone().build()?.sampler().cloned().ok_or_else(|| anyhow::anyhow!("a sampler"))?;
    let padded = RefCell::new(builder.pad("t", Pad::longest()).build()?);
    let mut step = 0u64;
    let mut idx = vec![0u32; BATCH as usize];
    let queued = queued(threads);
    let mut contenders = vec![
        Contender::new(
            BY_HAND,
            Box::new(|| {
                sampler.fill(step, &mut idx).expect("a buffer of the batch size");
                let records = data.get_batch(&idx).expect("a gather");
                let (values, lengths) = loaderx_core::pad(&records, &[], 0).expect("whole rows");
                step += 1;
                black_box((values, lengths));
            }),
        ),
        prefetched(PADDED, &padded, queued),
    ];
    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);
    let mean = total as f64 / f64::from(cfg.records);
    let mut s = Section::new(
        format!(
            "3c. Loader — ragged i32 token records (16..512 tokens, mean {mean:.0}), padded to the batch's longest, batch {BATCH}, {threads} threads"
        ),
        &["loader", "batches/s", "vs"],
    );
    let workload = format!("{} ragged records, batch {BATCH}, padded", cfg.records);
    pair_rows(report, &mut s, &t, &workload, BY_HAND, PADDED);
    s.notes.push(
        "By hand is what a user writes without the loader: the sampler's indices, \
         RaggedDataset::get_batch (a Vec per record) and loaderx_core::pad, on the training thread. The \
         loader gathers the batch as one offsets + values array and pads it (with lengths and a mask) \
         on its prefetch threads."
            .into(),
    );
    report.sections.push(s);
    Ok(())
}
