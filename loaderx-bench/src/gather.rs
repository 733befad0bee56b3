//! Gather layer: loaderx's raw gather against the copy's physical limit and against NumPy, at
//! three record sizes, three batch sizes, on one thread and on the whole pool; and the zstd
//! gathers against their decompress-only ceilings.
//!
//! Per record size, in one temporary directory: a flat file of the records (the memcpy
//! ceilings read it through a mapping), the same records as a `.npy` (NumPy reads it through
//! `np.load(mmap_mode="r")`), and loaderx stores. Indices are random and unsorted (a shuffled
//! loader's batches), the same for every contender. Every contender's output for one batch is
//! checked equal to the memcpy's before anything is timed.
//!
//! Threads: each contender runs its timed loop inside a rayon pool of one thread or of all
//! cores (`pool.install`), so "1 thread" is a gather that cannot split and "N threads" one that
//! may. NumPy runs in a Python process (`python/gather_worker.py`, its own timing, driven over a
//! pipe between rounds), single-threaded as `np.take` is.

use std::fs::File;
use std::hint::black_box;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use loaderx_core::convert::NpyHeader;
use loaderx_core::{Codec, DType, MappedFile, Store, StoreOptions};
use rayon::ThreadPool;
use rayon::prelude::*;
use zstd::bulk::Decompressor;
use zstd::dict::DecoderDictionary;

use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing::{self, Contender};
use crate::workloads::{Dst, DstBuf, Gen, block, blocks, structured_record, zstd_frames};

/// Record sizes measured: an MNIST digit, the store layer's 12 KiB, and 128 KiB.
pub(crate) const RECORD_SIZES: [usize; 3] = [784, 12 << 10, 128 << 10];
/// Batch sizes measured.
const BATCHES: [usize; 3] = [64, 256, 1024];
/// The batch of the zstd comparison.
const ZSTD_BATCH: usize = 256;
/// Bytes the index batches of one configuration cover before they repeat: past the CPU's caches,
/// so every batch reads records from memory, as batches of a large dataset do.
const INDEX_BYTES: usize = 256 << 20;
/// Bytes generated and written per block.
pub(crate) const BLOCK_BYTES: usize = 64 << 20;
const MIB: f64 = (1 << 20) as f64;
/// The NumPy worker, written next to the data when the run starts.
const WORKER: &str = include_str!("../python/gather_worker.py");

/// Copies the records at `idx` of `rec` bytes from `src` into `dst`, one contiguous block of
/// the batch per thread of the current pool.
pub(crate) fn copy_rows(src: &[u8], idx: &[u32], rec: usize, dst: &mut [u8]) {
    let threads = rayon::current_num_threads();
    if threads == 1 {
        for (j, &i) in idx.iter().enumerate() {
            let at = i as usize * rec;
            dst[j * rec..(j + 1) * rec].copy_from_slice(&src[at..at + rec]);
        }
        return;
    }
    let per = idx.len().div_ceil(threads);
    idx.par_chunks(per).zip(dst.par_chunks_mut(per * rec)).for_each(|(ix, d)| {
        for (j, &i) in ix.iter().enumerate() {
            let at = i as usize * rec;
            d[j * rec..(j + 1) * rec].copy_from_slice(&src[at..at + rec]);
        }
    });
}

/// Decodes one batch of frames into `dst`, split as [`copy_rows`] splits.
fn decompress(frames: &[Vec<u8>], dict: Option<&DecoderDictionary<'_>>, rec: usize, dst: &mut [u8]) {
    let per = frames.len().div_ceil(rayon::current_num_threads());
    frames.par_chunks(per).zip(dst.par_chunks_mut(per * rec)).for_each(|(fs, d)| {
        let mut dc = match dict {
            Some(dd) => Decompressor::with_prepared_dictionary(dd),
            None => Decompressor::new(),
        }
        .expect("a zstd decompression context");
        for (j, f) in fs.iter().enumerate() {
            dc.decompress_to_buffer(f, &mut d[j * rec..(j + 1) * rec]).expect("a frame this run compressed");
        }
    });
}

/// A contender whose `batch(k, dst)` fills `dst` with batch `k`, its timed loop run inside
/// `pool`.
pub(crate) fn pooled<'a>(
    name: String,
    pool: &'a ThreadPool,
    at: Dst,
    len: usize,
    mut batch: impl FnMut(usize, &mut [u8]) + Send + 'a,
) -> Contender<'a> {
    let mut buf = DstBuf::new(at, len);
    let mut k = 0usize;
    Contender::self_timed(
        &name,
        Box::new(move |n| {
            let dst = buf.slice();
            pool.install(|| {
                let t = Instant::now();
                for _ in 0..n {
                    batch(k, dst);
                    k += 1;
                    black_box(&mut *dst);
                }
                t.elapsed().as_secs_f64()
            })
        }),
    )
}

/// The NumPy worker process.
struct Numpy {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Numpy {
    /// Starts `python` on the worker script over `npy`; `None` (with the reason) when Python or
    /// NumPy is not there.
    fn start(python: &Path, dir: &Path, npy: &Path) -> Result<Numpy, String> {
        let script = dir.join("gather_worker.py");
        std::fs::write(&script, WORKER).map_err(|e| format!("writing {}: {e}", script.display()))?;
        let probe = Command::new(python).args(["-c", "import numpy"]).output();
        match probe {
            Ok(o) if o.status.success() => {}
            Ok(_) => return Err(format!("{} has no NumPy", python.display())),
            Err(e) => return Err(format!("{} does not run: {e}", python.display())),
        }
        let mut child = Command::new(python)
            .arg("-u")
            .arg(&script)
            .arg(npy)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", python.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Numpy { child, stdin, stdout })
    }

    fn ask(&mut self, line: &str) -> anyhow::Result<String> {
        writeln!(self.stdin, "{line}").context("writing to the NumPy worker")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).context("reading from the NumPy worker")?;
        if answer.is_empty() || answer.starts_with("error") {
            bail!("the NumPy worker answered {answer:?} to {line:?}");
        }
        Ok(answer.trim().to_string())
    }

    /// Loads the index batches (written to `path`, `b` per batch).
    fn load(&mut self, path: &Path, b: usize) -> anyhow::Result<()> {
        self.ask(&format!("load {} {b}", path.display())).map(drop)
    }

    /// Seconds of `n` gathers by `how` (`take` or `fancy`), timed by the worker.
    fn time(&mut self, how: &str, n: u32) -> f64 {
        let answer = self.ask(&format!("{how} {n}")).expect("the NumPy worker answers");
        let ns: f64 = answer.strip_prefix("ns ").and_then(|v| v.parse().ok()).expect("a time in ns");
        ns * 1e-9
    }

    /// Batch `k` as NumPy gathers it.
    fn dump(&mut self, k: usize, dir: &Path) -> anyhow::Result<Vec<u8>> {
        let out = dir.join("numpy-batch.bin");
        self.ask(&format!("dump {k} {}", out.display()))?;
        std::fs::read(&out).with_context(|| format!("reading {}", out.display()))
    }
}

impl Drop for Numpy {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// Random, unsorted index batches of `b` over `n` records of `rec` bytes: as many as it takes to
/// cover [`INDEX_BYTES`] (at least 8), used in turn.
pub(crate) fn index_batches(n: u32, b: usize, rec: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut g = Gen(seed);
    let count = (INDEX_BYTES / (b * rec)).clamp(8, 8192);
    (0..count).map(|_| (0..b).map(|_| g.below(u64::from(n)) as u32).collect()).collect()
}

fn write_indices(path: &Path, batches: &[Vec<u32>]) -> anyhow::Result<()> {
    let mut f = BufWriter::new(File::create(path).with_context(|| format!("creating {}", path.display()))?);
    for i in batches.iter().flatten() {
        f.write_all(&i.to_le_bytes())?;
    }
    f.flush()?;
    Ok(())
}

/// Writes the flat file, the `.npy` and the raw store of `n` records of `rec` bytes.
fn write_data(dir: &Path, n: u32, rec: usize) -> anyhow::Result<(PathBuf, PathBuf, Store)> {
    let (flat, npy) = (dir.join("flat.bin"), dir.join("x.npy"));
    let open =
        |p: &Path| File::create(p).map(BufWriter::new).with_context(|| format!("creating {}", p.display()));
    let (mut f, mut y) = (open(&flat)?, open(&npy)?);
    y.write_all(&NpyHeader::encode(DType::U8, &[n as usize, rec])?)?;
    let store = Store::create(dir.join("raw"), StoreOptions::new())?;
    for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
        let recs = block(lo, hi, rec);
        for r in &recs {
            f.write_all(r)?;
            y.write_all(r)?;
        }
        store.append(&recs, Codec::Raw)?;
    }
    f.flush()?;
    y.flush()?;
    Ok((flat, npy, store))
}

/// Names of the contenders of one configuration.
pub(crate) fn name(what: &str, threads: usize) -> String {
    format!("{what}, {threads} thread{}", if threads == 1 { "" } else { "s" })
}

pub(crate) const PAGE: &str = "memcpy → page-aligned buffer";
pub(crate) const HALF: &str = "memcpy → page + 2 KiB";
pub(crate) const VEC: &str = "memcpy → Vec";
const RAW: &str = "loaderx raw → Vec";
const TAKE: &str = "NumPy np.take(out=)";
const FANCY: &str = "NumPy arr[idx]";

/// Measures every record size and batch size and adds the tables.
///
/// # Errors
/// Writing or reading the generated data; a NumPy worker that stops answering.
pub(crate) fn run(
    cfg: &Config,
    report: &mut Report,
    sizes: &[usize],
    python: Option<&Path>,
) -> anyhow::Result<()> {
    let cores = rayon::current_num_threads();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let all = rayon::ThreadPoolBuilder::new().num_threads(cores).build()?;
    let pools: Vec<(usize, &ThreadPool)> =
        if cores > 1 { vec![(1, &one), (cores, &all)] } else { vec![(1, &one)] };
    let mut numpy_note = None;
    for &rec in sizes {
        cfg.progress(&format!("gather, {rec}-byte records"));
        let dir = tempfile::Builder::new()
            .prefix("loaderx-gather-")
            .tempdir_in(&cfg.dir)
            .with_context(|| format!("creating a temporary directory in {}", cfg.dir.display()))?;
        // About 256 MiB of records (32 MiB with --quick): past the caches, as a real dataset is.
        let bytes: usize = if cfg.quick { 32 << 20 } else { 256 << 20 };
        let n = u32::try_from((bytes / rec).max(4 * BATCHES[2])).unwrap_or(u32::MAX);
        let (flat_path, npy_path, store) = write_data(dir.path(), n, rec)?;
        let flat = MappedFile::open(&flat_path)?;
        let mut numpy = match python {
            Some(p) => match Numpy::start(p, dir.path(), &npy_path) {
                Ok(np) => Some(np),
                Err(why) => {
                    numpy_note = Some(format!("NumPy rows skipped: {why}."));
                    None
                }
            },
            None => {
                numpy_note = Some(
                    "NumPy rows skipped: no Python given (`--python PATH`, which \
                     scripts/bench-gather.sh sets up in a venv)."
                        .into(),
                );
                None
            }
        };
        let mut s = Section::new(
            format!(
                "Gather — {} records of {}, random unsorted indices",
                report::thousands(n.into()),
                size(rec)
            ),
            &[
                "batch",
                "threads",
                "contender",
                "MiB/s",
                "records/s",
                "vs page-aligned memcpy",
                "vs best memcpy",
                "vs NumPy take",
            ],
        );
        for b in BATCHES {
            let batches = index_batches(n, b, rec, 0x5EED ^ rec as u64 ^ b as u64);
            let len = b * rec;
            // Every contender's batch 0 is the memcpy's.
            let mut want = vec![0u8; len];
            copy_rows(flat.bytes(), &batches[0], rec, &mut want);
            let mut got = vec![0u8; len];
            store.gather_fixed(&batches[0], rec, &mut got)?;
            anyhow::ensure!(got == want, "loaderx's batch differs from the memcpy's");
            if let Some(np) = &mut numpy {
                let idx = dir.path().join(format!("idx-{b}.bin"));
                write_indices(&idx, &batches)?;
                np.load(&idx, b)?;
                anyhow::ensure!(np.dump(0, dir.path())? == want, "NumPy's batch differs from the memcpy's");
            }
            let mut contenders = Vec::new();
            for &(threads, pool) in &pools {
                let (src, bs) = (flat.bytes(), &batches);
                for (what, at) in [(PAGE, Dst::Page), (HALF, Dst::HalfPage), (VEC, Dst::Vec)] {
                    contenders.push(pooled(name(what, threads), pool, at, len, move |k, d| {
                        copy_rows(src, &bs[k % bs.len()], rec, d);
                    }));
                }
                let st = &store;
                contenders.push(pooled(name(RAW, threads), pool, Dst::Vec, len, move |k, d| {
                    st.gather_fixed(&bs[k % bs.len()], rec, d).expect("gather from a store this run wrote");
                }));
            }
            let numpy_cell = numpy.as_mut().map(std::cell::RefCell::new);
            if let Some(np) = &numpy_cell {
                contenders.push(Contender::self_timed(TAKE, Box::new(|n| np.borrow_mut().time("take", n))));
                contenders.push(Contender::self_timed(FANCY, Box::new(|n| np.borrow_mut().time("fancy", n))));
            }
            let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
            drop(contenders);
            let workload = format!("{} B records, batch {b}", rec);
            let mut push = |threads: usize, label: &str, key: &str, ceiling: bool, vs_np: bool| {
                let secs = t.median_secs(key);
                let mibs = len as f64 / MIB / secs;
                let memcpys = [PAGE, HALF, VEC].map(|m| name(m, threads));
                let best = [memcpys[0].as_str(), memcpys[1].as_str(), memcpys[2].as_str()];
                report.push_rates(
                    ("gather", key, &workload),
                    &[(mibs, "MiB/s"), (b as f64 / secs, "records/s")],
                    (!ceiling || key != memcpys[0])
                        .then(|| (memcpys[0].as_str(), t.speed_vs(key, &memcpys[0]))),
                );
                s.rows.push(vec![
                    b.to_string(),
                    threads.to_string(),
                    label.into(),
                    format!("{mibs:.0}"),
                    report::thousands(b as f64 / secs),
                    if key == memcpys[0] {
                        "ceiling".into()
                    } else {
                        report::ratio(t.speed_vs(key, &memcpys[0]))
                    },
                    report::ratio(t.speed_vs_best(key, &best)),
                    if vs_np && numpy_cell.is_some() {
                        report::ratio(t.speed_vs(key, TAKE))
                    } else {
                        "—".into()
                    },
                ]);
            };
            for &(threads, _) in &pools {
                push(threads, PAGE, &name(PAGE, threads), true, false);
                push(threads, HALF, &name(HALF, threads), true, false);
                push(threads, VEC, &name(VEC, threads), true, false);
                push(threads, RAW, &name(RAW, threads), false, true);
            }
            if numpy_cell.is_some() {
                push(1, TAKE, TAKE, false, false);
                push(1, FANCY, FANCY, false, false);
            }
        }
        s.notes.push(format!(
            "Each contender runs its timed loop inside a rayon pool of 1 or {cores} threads; the memcpy \
             rows split a batch into one contiguous block per thread, into a buffer at a page \
             boundary, half a page past one, or a `Vec` as allocated (glibc places large ones 16 \
             bytes past a page: the short-distance case of this CPU's `rep movsb`). \"vs best \
             memcpy\" takes, per round, the fastest of the three: the ceiling. loaderx gathers into \
             a `Vec`. NumPy (`np.take(arr, idx, axis=0, out=buf, mode=\"clip\")` and `arr[idx]` \
             on the memmap's ndarray view) is single-threaded; the last column compares each \
             loaderx row with its `np.take`."
        ));
        if let Some(note) = &numpy_note {
            s.notes.push(note.clone());
        }
        report.sections.push(s);
        drop(numpy);
        zstd_section(cfg, report, rec, n.min(zstd_records(rec)), &flat, &pools)?;
    }
    Ok(())
}

/// Records in the zstd stores: enough to draw random batches from, few enough that the level-19
/// `zstd_dict` store writes in seconds.
fn zstd_records(rec: usize) -> u32 {
    u32::try_from((24usize << 20) / rec).unwrap_or(u32::MAX).max(4 * ZSTD_BATCH as u32)
}

pub(crate) fn size(rec: usize) -> String {
    if rec.is_multiple_of(1024) { format!("{} KiB", rec >> 10) } else { format!("{rec} B") }
}

/// zstd and zstd_dict gathers in records/s next to decoding the same frames from memory, on one
/// thread and on the pool.
fn zstd_section(
    cfg: &Config,
    report: &mut Report,
    rec: usize,
    n: u32,
    flat: &MappedFile,
    pools: &[(usize, &ThreadPool)],
) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("loaderx-gather-zstd-").tempdir_in(&cfg.dir)?;
    let batches = index_batches(n, ZSTD_BATCH, rec, 0x2575 ^ rec as u64);
    let plain = Store::create(dir.path().join("zstd"), StoreOptions::new())?;
    let dict = Store::create(dir.path().join("zstd_dict"), StoreOptions::new())?;
    for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
        let recs: Vec<Vec<u8>> = (lo..hi).map(|i| structured_record(u64::from(i), rec)).collect();
        plain.append(&recs, Codec::Zstd)?;
        if !dict.has_dictionary() {
            anyhow::ensure!(dict.train_dictionary(&recs)?, "too few records to train a dictionary");
        }
        dict.append(&recs, Codec::ZstdDict)?;
    }
    let few = &batches[..4];
    let plain_frames = zstd_frames(rec, few, None);
    let raw_dict = dict.dictionary().map(<[u8]>::to_vec);
    let dict_frames = zstd_frames(rec, few, raw_dict.as_deref());
    let prepared = raw_dict.as_deref().map(DecoderDictionary::copy);
    let len = ZSTD_BATCH * rec;
    let mut want = vec![0u8; len];
    copy_rows(flat.bytes(), &batches[0], rec, &mut want);
    for (s, what) in [(&plain, "zstd"), (&dict, "zstd_dict")] {
        let mut got = vec![0u8; len];
        s.gather_fixed(&batches[0], rec, &mut got)?;
        anyhow::ensure!(got == want, "the {what} store's batch differs from the records");
    }
    let mut contenders = Vec::new();
    for &(threads, pool) in pools {
        let (pf, df, pd) = (&plain_frames, &dict_frames, prepared.as_ref());
        contenders.push(pooled(name("zstd decompress-only", threads), pool, Dst::Vec, len, move |k, d| {
            decompress(&pf[k % pf.len()], None, rec, d);
        }));
        contenders.push(pooled(
            name("zstd_dict decompress-only", threads),
            pool,
            Dst::Vec,
            len,
            move |k, d| {
                decompress(&df[k % df.len()], pd, rec, d);
            },
        ));
        for (st, what) in [(&plain, "loaderx zstd"), (&dict, "loaderx zstd_dict")] {
            let bs = &batches[..4];
            contenders.push(pooled(name(what, threads), pool, Dst::Vec, len, move |k, d| {
                st.gather_fixed(&bs[k % bs.len()], rec, d).expect("gather from a store this run wrote");
            }));
        }
    }
    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);
    let mut s = Section::new(
        format!(
            "Gather, compressed — {} records of {}, batch {ZSTD_BATCH}",
            report::thousands(n.into()),
            size(rec)
        ),
        &["threads", "contender", "records/s", "MiB/s (decoded)", "vs decompress-only"],
    );
    let workload = format!("{} B records, batch {ZSTD_BATCH}, compressed", rec);
    for &(threads, _) in pools {
        for (what, ceiling) in [
            ("zstd decompress-only", None),
            ("loaderx zstd", Some("zstd decompress-only")),
            ("zstd_dict decompress-only", None),
            ("loaderx zstd_dict", Some("zstd_dict decompress-only")),
        ] {
            let key = name(what, threads);
            let base = ceiling.map(|c| name(c, threads));
            let secs = t.median_secs(&key);
            let rps = ZSTD_BATCH as f64 / secs;
            report.push_rates(
                ("gather", &key, &workload),
                &[(rps, "records/s"), (len as f64 / MIB / secs, "MiB/s")],
                base.as_deref().map(|b| (b, t.speed_vs(&key, b))),
            );
            s.rows.push(vec![
                threads.to_string(),
                what.into(),
                report::thousands(rps),
                format!("{:.0}", len as f64 / MIB / secs),
                base.map_or("ceiling".into(), |b| report::ratio(t.speed_vs(&key, &b))),
            ]);
        }
    }
    s.notes.push(
        "The decompress-only rows decode the same batches' frames (compressed as the store compresses \
         them) from memory with no store around them, split over the pool as loaderx splits a batch."
            .into(),
    );
    for (st, what) in [(&plain, "zstd"), (&dict, "zstd_dict")] {
        let c = st.stats()?.codecs;
        let raw = c[Codec::Raw];
        if raw > 0 {
            let all: u64 = c.iter().map(|(_, n)| n).sum();
            s.notes.push(format!(
                "The {what} store holds {} of its {} records raw (they did not shrink), so its gather \
                 copies those: its row is not a decompression.",
                report::thousands(raw as f64),
                report::thousands(all as f64)
            ));
        }
    }
    report.sections.push(s);
    Ok(())
}
