//! The cold layer (`loaderx bench cold`): batches read from a dense dataset whose pages are not
//! in the page cache, against the same records in a `.npy` read through NumPy's memory map, with
//! `fio`'s random 4 KiB reads of the same disk at queue depth 1 and 32 as the ceiling.
//!
//! Each dataset is written twice (a `.npy` of `u8` rows and its conversion, v2, raw), then per
//! round, each contender after both files are evicted ([`evict`]: a sync, then
//! `posix_fadvise(DONTNEED)`; no root needed): the open and the first batch of 256 random sorted
//! indices (and the pages it brought into the page cache, [`resident_pages`]), the open alone,
//! and 100 random batches through the loader (prefetch 4) or through `np.take`. Every batch
//! gathered is checked against the records' contents, which are a function of their index. The
//! order of the contenders alternates between rounds.

use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use loaderx_core::pagecache::{evict, resident_pages};
use loaderx_core::{
    Codec, DataLoader, DenseSource, Format, Sampler, SamplerMode, Store, StoreOptions, WriteOptions,
};

use crate::report::{Report, Row, Section, duration, ratio, thousands};
use crate::run::Config;
use crate::timing::{FixedContender, Work, interleaved_fixed, median};
use crate::workloads::{blocks, random_batches, write_structured_f32};

const LAYER: &str = "cold";
const BATCH: usize = 256;
const STREAM_BATCHES: usize = 100;
const PREFETCH: usize = 4;
const WORKER: &str = include_str!("../python/cold_worker.py");
/// The record sizes of the layer when none are given, in bytes.
pub(crate) const RECORD_SIZES: [usize; 3] = [64, 784, 12 << 10];
/// The record counts of the layer when none are given.
pub(crate) const RECORD_COUNTS: [u64; 2] = [1_000_000, 10_000_000];

/// Byte `j` of record `i`: what every gathered batch is checked against.
fn fill_record(i: u64, out: &mut [u8]) {
    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 29);
    for (j, b) in out.iter_mut().enumerate() {
        *b = (h >> ((j % 8) * 8)) as u8 ^ (j as u8);
    }
}

/// Whether `got` holds the records `indices`, back to back.
fn check(indices: &[u32], rec: usize, got: &[u8]) -> bool {
    let mut want = vec![0u8; rec];
    got.len() == indices.len() * rec
        && indices.iter().zip(got.chunks_exact(rec)).all(|(&i, g)| {
            fill_record(u64::from(i), &mut want);
            want == g
        })
}

/// Writes `n` records of `rec` bytes as a `.npy` of shape `(n, rec)`, `u8`.
fn write_npy(path: &Path, n: u64, rec: usize) -> anyhow::Result<()> {
    let mut header = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({n}, {rec}), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut w = BufWriter::with_capacity(8 << 20, File::create(path)?);
    w.write_all(b"\x93NUMPY\x01\x00")?;
    w.write_all(&u16::try_from(header.len())?.to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    let mut buf = vec![0u8; rec];
    for i in 0..n {
        fill_record(i, &mut buf);
        w.write_all(&buf)?;
    }
    w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

/// The NumPy worker process.
struct Numpy {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Numpy {
    fn start(python: &Path, dir: &Path) -> anyhow::Result<Numpy> {
        let script = dir.join("cold_worker.py");
        std::fs::write(&script, WORKER)?;
        let mut child = Command::new(python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", python.display()))?;
        let stdin = child.stdin.take().context("the worker's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the worker's stdout")?);
        Ok(Numpy { child, stdin, stdout })
    }

    /// Sends one command and returns the nanoseconds of its answer.
    fn ns(&mut self, cmd: &str) -> anyhow::Result<f64> {
        writeln!(self.stdin, "{cmd}")?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let ns = line.strip_prefix("ns ").with_context(|| format!("NumPy worker: {line:?} for {cmd:?}"))?;
        Ok(ns.trim().parse()?)
    }
}

impl Drop for Numpy {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// One round's figures for one contender: seconds for the open and the first batch, pages then
/// resident, seconds for the open alone, records per second of the stream.
#[derive(Default, Clone, Copy)]
struct Figures {
    first: f64,
    pages: u64,
    open: f64,
    stream: f64,
}

/// The files of one dataset and what its rounds read.
struct Dataset {
    npy: PathBuf,
    store: PathBuf,
    rec: usize,
    records: u64,
    batches: Vec<Vec<u32>>,
    /// Index files for NumPy: the first batches; the loader's stream of each round.
    first_idx: PathBuf,
}

/// Writes `batches` as the raw `u32` file the worker reads.
fn write_indices(path: &Path, batches: &[Vec<u32>]) -> anyhow::Result<()> {
    let bytes: Vec<u8> = batches.iter().flatten().flat_map(|i| i.to_le_bytes()).collect();
    std::fs::write(path, bytes)?;
    Ok(())
}

/// Evicts both files of a dataset.
fn evict_all(ds: &Dataset) -> anyhow::Result<()> {
    evict(&ds.npy)?;
    evict(&ds.store)?;
    Ok(())
}

/// The loader over `store`, IID order seeded by `seed`, batches of 256, prefetch 4.
fn loader(store: &Path, seed: u64) -> anyhow::Result<loaderx_core::LoaderBuilder> {
    Ok(DataLoader::builder()
        .stream("x", DenseSource::open(store)?)
        .batch_size(BATCH)
        .mode(SamplerMode::Iid)
        .seed(seed)
        .prefetch(PREFETCH))
}

/// The batches of round `r`'s stream: what [`loader`] yields (checked in [`loaderx_round`]).
fn stream_batches(ds: &Dataset, r: usize) -> anyhow::Result<Vec<Vec<u32>>> {
    let n = u32::try_from(ds.records)?;
    let s = Sampler::builder(n).batch_size(BATCH as u32).mode(SamplerMode::Iid).seed(r as u64).build()?;
    Ok((0..STREAM_BATCHES as u64).map(|k| s.batch(k)).collect())
}

/// loaderx's figures of round `r`.
fn loaderx_round(ds: &Dataset, r: usize) -> anyhow::Result<Figures> {
    let batch = &ds.batches[r];
    let mut buf = vec![0u8; BATCH * ds.rec];
    evict_all(ds)?;
    let t = Instant::now();
    let src = DenseSource::open(&ds.store)?;
    src.gather_bytes(batch, &mut buf)?;
    let first = t.elapsed().as_secs_f64();
    let pages = resident_pages(&ds.store)?.resident;
    anyhow::ensure!(check(batch, ds.rec, &buf), "loaderx's first batch of round {r} differs");
    drop(src);
    evict_all(ds)?;
    let t = Instant::now();
    let src = DenseSource::open(&ds.store)?;
    let open = t.elapsed().as_secs_f64();
    drop(src);
    evict_all(ds)?;
    let t = Instant::now();
    let mut l = loader(&ds.store, r as u64)?.build()?;
    let mut got = Vec::with_capacity(STREAM_BATCHES);
    for _ in 0..STREAM_BATCHES {
        got.push(l.next_batch()?.ok_or_else(|| anyhow::anyhow!("the loader ended"))?);
    }
    let stream = (STREAM_BATCHES * BATCH) as f64 / t.elapsed().as_secs_f64();
    drop(l);
    let want = stream_batches(ds, r)?;
    for (b, w) in got.iter().zip(&want) {
        anyhow::ensure!(b.indices() == w.as_slice(), "the loader's stream of round {r} is not the sampler's");
        let x = b.get("x").context("the batch's stream")?;
        anyhow::ensure!(check(b.indices(), ds.rec, x.as_bytes()), "a loader batch of round {r} differs");
    }
    Ok(Figures { first, pages, open, stream })
}

/// NumPy's figures of round `r`.
fn numpy_round(ds: &Dataset, np: &mut Numpy, r: usize, dir: &Path) -> anyhow::Result<Figures> {
    let dump = dir.join("numpy-batch.bin");
    evict_all(ds)?;
    let cmd = format!("first {} {} {BATCH} {r} {}", ds.npy.display(), ds.first_idx.display(), dump.display());
    let first = np.ns(&cmd)? / 1e9;
    let pages = resident_pages(&ds.npy)?.resident;
    anyhow::ensure!(
        check(&ds.batches[r], ds.rec, &std::fs::read(&dump)?),
        "NumPy's batch of round {r} differs"
    );
    let stream_idx = dir.join("stream.u32");
    write_indices(&stream_idx, &stream_batches(ds, r)?)?;
    evict_all(ds)?;
    let cmd = format!("stream {} {} {BATCH} {STREAM_BATCHES}", ds.npy.display(), stream_idx.display());
    let stream = (STREAM_BATCHES * BATCH) as f64 / (np.ns(&cmd)? / 1e9);
    Ok(Figures { first, pages, open: f64::NAN, stream })
}

/// `fio`'s random 4 KiB read rate of `file` at queue depth `depth` (direct I/O, 2 s), or why not.
fn fio_iops(file: &Path, depth: u32) -> Result<f64, String> {
    let out = Command::new("fio")
        .args(["--name=cold", "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio"])
        .arg(format!("--iodepth={depth}"))
        .args(["--runtime=2", "--time_based", "--output-format=json"])
        .arg(format!("--filename={}", file.display()))
        .output()
        .map_err(|e| format!("fio does not run ({e}): install Debian's fio for the ceiling rows"))?;
    if !out.status.success() {
        return Err(format!("fio failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("fio's JSON: {e}"))?;
    v["jobs"][0]["read"]["iops"].as_f64().ok_or_else(|| "fio's JSON has no read IOPS".into())
}

/// Distinct 4 KiB pages the records of `batch` span in a file of back-to-back records.
fn record_pages(batch: &[u32], rec: usize) -> usize {
    let mut pages: Vec<u64> = batch
        .iter()
        .flat_map(|&i| {
            let start = u64::from(i) * rec as u64;
            start / 4096..=(start + rec as u64 - 1) / 4096
        })
        .collect();
    pages.sort_unstable();
    pages.dedup();
    pages.len()
}

/// Datasets up to this size are also measured as a v1 raw and a v2 zstd store (first batch).
const VARIANT_MAX_BYTES: u64 = 2 << 30;

/// The first batch of the dataset converted as a v1 raw and a v2 zstd store, `rounds` rounds
/// each (every file of the dataset evicted before each): rows beside the v2 raw store's.
fn variants(
    ds: &Dataset,
    workload: &str,
    dir: &Path,
    rounds: usize,
    section: &mut Section,
    report: &mut Report,
) -> anyhow::Result<()> {
    for (name, format, codec) in
        [("loaderx v1 raw", Format::V1, Codec::Raw), ("loaderx v2 zstd", Format::V2, Codec::Zstd)]
    {
        let path = dir.join(name.replace(' ', "-"));
        loaderx_core::convert::npy(&ds.npy, &path, WriteOptions::new().codec(codec).format(format))?;
        let (mut first, mut pages) = (Vec::new(), Vec::new());
        let mut buf = vec![0u8; BATCH * ds.rec];
        for (r, batch) in ds.batches.iter().enumerate().take(rounds) {
            evict_all(ds)?;
            evict(&path)?;
            let t = Instant::now();
            DenseSource::open(&path)?.gather_bytes(batch, &mut buf)?;
            first.push(t.elapsed().as_secs_f64());
            pages.push(resident_pages(&path)?.resident as f64);
            anyhow::ensure!(check(batch, ds.rec, &buf), "{name}'s first batch of round {r} differs");
        }
        let (first, pages) = (median(first), median(pages));
        report.rows.push(Row::new(LAYER, &format!("{name} open + first batch"), workload, first * 1e3, "ms"));
        report.rows.push(Row::new(LAYER, &format!("{name} pages read"), workload, pages, "pages"));
        let cells = [
            workload.to_string(),
            name.into(),
            duration(first),
            thousands(pages),
            String::new(),
            String::new(),
        ];
        section.rows.push(cells.to_vec());
        std::fs::remove_dir_all(&path)?;
    }
    Ok(())
}

/// Runs the layer over every `(count, size)` whose data fits `max_bytes`.
///
/// # Errors
/// Writing the data, a loaderx or NumPy error, a batch that differs from its records.
pub(crate) fn run(
    cfg: &Config,
    report: &mut Report,
    counts: &[u64],
    sizes: &[usize],
    max_bytes: u64,
    python: Option<&Path>,
) -> anyhow::Result<()> {
    let python = python.context("the cold layer compares against NumPy: give `--python PATH`")?;
    let mut section = Section::new(
        "Cold reads (page cache evicted before each try; v2 raw store against .npy memmap)",
        &["dataset", "contender", "open + first batch", "pages read", "open", "stream (records/s)"],
    );
    let mut skipped = Vec::new();
    for &n in counts {
        for &rec in sizes {
            if n.saturating_mul(rec as u64) > max_bytes {
                skipped.push(format!("{} × {}", thousands(n as f64), crate::gather::size(rec)));
                continue;
            }
            cfg.progress(&format!("cold: {n} records of {rec} bytes"));
            dataset(cfg, report, &mut section, n, rec, python)?;
        }
    }
    section.notes.push(format!(
        "Medians of {} rounds. First batch: 256 random sorted indices; stream: {STREAM_BATCHES} \
         IID batches of {BATCH} (loaderx's loader, prefetch {PREFETCH}; NumPy np.take of the same \
         indices, one after the other). Pages read: the file's pages resident after the first batch \
         (the records alone span the pages in brackets). fio: random 4 KiB direct reads of the .npy, \
         the time 256 of them take at that queue depth.",
        cfg.rounds
    ));
    if !skipped.is_empty() {
        section.notes.push(format!("Not run (over --cold-max-gib): {}.", skipped.join(", ")));
    }
    report.sections.push(section);
    warm(cfg, report)
}

/// One dataset: written, measured over the rounds, removed.
fn dataset(
    cfg: &Config,
    report: &mut Report,
    section: &mut Section,
    n: u64,
    rec: usize,
    python: &Path,
) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("loaderx-bench-cold-").tempdir_in(&cfg.dir)?;
    let npy = dir.path().join("x.npy");
    write_npy(&npy, n, rec)?;
    let store = dir.path().join("x");
    loaderx_core::convert::npy(&npy, &store, WriteOptions::new().codec(Codec::Raw).format(Format::V2))?;
    let rounds = cfg.rounds.max(1);
    let batches = random_batches(0xC01D ^ n, u32::try_from(n)?, BATCH, rounds);
    let first_idx = dir.path().join("first.u32");
    write_indices(&first_idx, &batches)?;
    let ds = Dataset { npy, store, rec, records: n, batches, first_idx };
    let mut np = Numpy::start(python, dir.path())?;
    let (mut lx, mut npf, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let (a, b) = if r % 2 == 0 {
            let a = loaderx_round(&ds, r)?;
            (a, numpy_round(&ds, &mut np, r, dir.path())?)
        } else {
            let b = numpy_round(&ds, &mut np, r, dir.path())?;
            (loaderx_round(&ds, r)?, b)
        };
        ratios.push(b.first / a.first);
        lx.push(a);
        npf.push(b);
    }
    let workload = format!("{} × {}", thousands(n as f64), crate::gather::size(rec));
    let pages = record_pages(&ds.batches[0], rec);
    for (name, f) in [("loaderx", &lx), ("NumPy memmap", &npf)] {
        let m = |g: fn(&Figures) -> f64| median(f.iter().map(g).collect());
        let (first, open, stream) = (m(|x| x.first), m(|x| x.open), m(|x| x.stream));
        let pages_read = m(|x| x.pages as f64);
        let mut cells = vec![workload.clone(), name.to_string(), duration(first)];
        cells.push(format!("{} [{pages}]", thousands(pages_read)));
        cells.push(if open.is_nan() { "–".into() } else { duration(open) });
        cells.push(thousands(stream));
        section.rows.push(cells);
        let row = Row::new(LAYER, &format!("{name} open + first batch"), &workload, first * 1e3, "ms");
        report.rows.push(if name == "loaderx" {
            row.vs("NumPy memmap open + first batch", median(ratios.clone()))
        } else {
            row
        });
        report.rows.push(Row::new(LAYER, &format!("{name} pages read"), &workload, pages_read, "pages"));
        report.rows.push(Row::new(LAYER, &format!("{name} stream"), &workload, stream, "records/s"));
        if !open.is_nan() {
            report.rows.push(Row::new(LAYER, &format!("{name} open"), &workload, open * 1e3, "ms"));
        }
    }
    if n.saturating_mul(rec as u64) <= VARIANT_MAX_BYTES {
        variants(&ds, &workload, dir.path(), rounds, section, report)?;
    }
    section.rows.push(vec![
        workload.clone(),
        "loaderx vs NumPy (first batch)".into(),
        ratio(median(ratios)),
        String::new(),
        String::new(),
        String::new(),
    ]);
    for depth in [1, 32] {
        let cells = match fio_iops(&ds.npy, depth) {
            Ok(iops) => {
                report.rows.push(Row::new(LAYER, &format!("fio qd{depth}"), &workload, iops, "IOPS"));
                vec![duration(BATCH as f64 / iops), String::new(), String::new(), thousands(iops)]
            }
            Err(why) => vec![why, String::new(), String::new(), String::new()],
        };
        let mut row = vec![workload.clone(), format!("fio 4 KiB, queue depth {depth}")];
        row.extend(cells);
        section.rows.push(row);
    }
    Ok(())
}

/// Warm batches of a handle with cold reads on against one with them off, interleaved: what
/// watching residency costs a batch whose pages are all resident (the 45 MiB sets fit in the
/// caches, the 256 MiB ones do not).
///
/// # Errors
/// Writing or reading the generated datasets.
pub(crate) fn warm(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let mut section = Section::new(
        "Warm batches, cold reads on and off (v2 raw, 256 random indices, one handle each)",
        &["dataset", "on", "off", "on vs off"],
    );
    for (set, rec) in
        [(45usize << 20, 784usize), (45 << 20, 12 << 10), (256 << 20, 784), (256 << 20, 12 << 10)]
    {
        let n = u32::try_from(set / rec)?;
        cfg.progress(&format!("cold: warm batches, {n} records of {rec} bytes"));
        let dir = tempfile::Builder::new().prefix("loaderx-bench-warm-").tempdir_in(&cfg.dir)?;
        let path = dir.path().join("w");
        write_structured_f32(&path, rec / 4, blocks(n, rec, 64 << 20))?;
        let schema = DenseSource::open(&path)?.schema().clone();
        let open = |on: bool| -> anyhow::Result<DenseSource> {
            let store = Store::open_with(&path, StoreOptions::new().cold_reads(on))?;
            Ok(DenseSource::new(Arc::new(store), schema.clone())?)
        };
        let (on, off) = (open(true)?, open(false)?);
        let batches = random_batches(0x3A5 ^ u64::from(n), n, BATCH, 64);
        let work = |src: DenseSource| -> Work<'_> {
            let (mut buf, mut k, batches) = (vec![0u8; BATCH * rec], 0, &batches);
            Box::new(move || {
                src.gather_bytes(&batches[k % batches.len()], &mut buf)
                    .expect("a gather of a dataset this run wrote");
                k += 1;
                black_box(&buf);
            })
        };
        let iters = ((256usize << 20) / (BATCH * rec)).max(20);
        let mut contenders: Vec<FixedContender<'_>> = vec![("off", work(off)), ("on", work(on))];
        let t = interleaved_fixed(cfg.rounds, iters, &mut contenders);
        let workload =
            format!("{} × {} ({} MiB)", thousands(f64::from(n)), crate::gather::size(rec), set >> 20);
        let rate = |ns: f64| (BATCH * rec) as f64 / ns;
        let (off_ns, on_ns, speed) = (t[0].median_ns, t[1].median_ns, t[1].speed_vs_baseline);
        report.rows.push(Row::new(LAYER, "warm gather, cold reads off", &workload, rate(off_ns), "GB/s"));
        let row = Row::new(LAYER, "warm gather, cold reads on", &workload, rate(on_ns), "GB/s");
        report.rows.push(row.vs("warm gather, cold reads off", speed));
        let gbs = |ns: f64| format!("{:.2} GB/s", rate(ns));
        section.rows.push(vec![workload, gbs(on_ns), gbs(off_ns), ratio(speed)]);
    }
    section.notes.push(format!(
        "Medians of {} interleaved rounds; \"on vs off\" is the median per-round speed ratio.",
        cfg.rounds
    ));
    report.sections.push(section);
    Ok(())
}
