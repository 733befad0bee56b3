//! Gather layer: loaderx's raw gather against the copy's physical limit and against NumPy, at
//! three record sizes, three batch sizes, on one thread and on the whole pool; and the zstd
//! gathers against their decompress-only ceilings.
//!
//! Per record size, in one temporary directory: loaderx stores of the records, an entry per
//! record and the fixed stride. The fixed-stride store's one chunk file is the records flat, back
//! to back: the memcpy ceilings read it through a mapping, NumPy through `np.memmap`, and the
//! entry-layout store's chunk is a hard link to it, so every contender copies the same pages of
//! the page cache (separate copies of the data leave whichever contender runs after another
//! file's reads with cold caches for its own: measured at 784 B on a 45 MiB set, the contender
//! after one reading another copy ran 5-27% slower than the same contender after one reading
//! its pages). Indices are random and unsorted (a shuffled loader's batches), the same for every
//! contender. Every contender's output for one batch is checked equal to the memcpy's before
//! anything is timed.
//!
//! Threads: each contender runs its timed loop inside a rayon pool of one thread or of all
//! cores (`pool.install`), so "1 thread" is a gather that cannot split and "N threads" one that
//! may. NumPy runs in a Python process (`python/gather_worker.py`, its own timing, driven over a
//! pipe between rounds), single-threaded as `np.take` is.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use loaderx_core::framing::MappedFile;
use loaderx_core::{Codec, NearCopy, Store, StoreOptions};
use rayon::ThreadPool;
use zstd::dict::DecoderDictionary;

use crate::ceiling::{
    HALF, PAGE, Pools, VEC, copy_rows, decompress, memcpy_contenders, memcpy_names, name, pooled,
    store_contender, store_contender_into,
};
use crate::gather_numpy::Numpy;
use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing::{self, Contender, Timings};
use crate::workloads::{Dst, Gen, block, blocks, structured_record, zstd_frames};

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

/// Writes the raw store (an entry per record) and the fixed-stride store of `n` records of
/// `rec` bytes; returns them and the fixed-stride store's chunk file, the records flat.
fn write_data(dir: &Path, n: u32, rec: usize) -> anyhow::Result<(PathBuf, Store, Store)> {
    let store = Store::create(dir.join("raw"), StoreOptions::new())?;
    let fixed = Store::create(dir.join("fixed"), StoreOptions::new().fixed_stride(u32::try_from(rec)?))?;
    for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
        let recs = block(lo, hi, rec);
        store.append(&recs, Codec::Raw)?;
        fixed.append(&recs, Codec::Raw)?;
    }
    fixed.sync()?;
    store.sync()?;
    let flat = dir.join("fixed").join("0.zr");
    let raw0 = dir.join("raw").join("0.zr");
    let want = u64::from(n) * rec as u64;
    for f in [&flat, &raw0] {
        let len = std::fs::metadata(f).with_context(|| format!("reading {}", f.display()))?.len();
        anyhow::ensure!(
            len == want,
            "{} holds {len} bytes, not the {n} records of {rec} bytes flat: a set larger than one chunk",
            f.display()
        );
    }
    // The entry-layout store's chunk holds the same bytes (raw records packed in order): made a
    // hard link to the fixed-stride store's, so that it too reads the shared pages, and checked
    // against its entries' checksums.
    drop(store);
    std::fs::remove_file(&raw0).with_context(|| format!("removing {}", raw0.display()))?;
    std::fs::hard_link(&flat, &raw0).with_context(|| format!("linking {}", raw0.display()))?;
    let store = Store::open(dir.join("raw"))?;
    let v = store.verify()?;
    anyhow::ensure!(
        v.is_ok(),
        "the entry-layout store over the shared chunk does not verify: {:?}",
        v.bad.first()
    );
    Ok((flat, store, fixed))
}

const RAW: &str = "loaderx raw → page-aligned buffer";
const FIXED: &str = "loaderx fixed stride → page-aligned buffer";
const FIXED_VEC: &str = "loaderx fixed stride → Vec";
const FIXED_MEMCPY: &str = "loaderx fixed stride → Vec, near copies by memcpy";
const FIXED_BLOCKS: &str = "loaderx fixed stride → Vec, near copies by pieces";
const FIXED_UNHINTED: &str = "loaderx fixed stride → page-aligned buffer, no hints";
const FIXED_HINTED: &str = "loaderx fixed stride → page-aligned buffer, every record hinted";
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
    (near_copy_ab, hint_ab): (bool, bool),
) -> anyhow::Result<()> {
    let cores = rayon::current_num_threads();
    let pools = Pools::new()?;
    let pools = pools.list();
    let mut numpy_note = None;
    // About 256 MiB of records (32 MiB with --quick): past the caches, as a real dataset is; and
    // 45 MiB (MNIST's size, in the caches) for records up to 12 KiB, where the per-record
    // overhead shows.
    let sets: &[usize] = if cfg.quick { &[32 << 20] } else { &[45 << 20, 256 << 20] };
    for (&rec, &bytes) in sizes.iter().flat_map(|r| sets.iter().map(move |b| (r, b))) {
        if bytes < (64 << 20) && rec > (12 << 10) {
            continue;
        }
        cfg.progress(&format!("gather, {rec}-byte records, {} MiB", bytes >> 20));
        let dir = tempfile::Builder::new()
            .prefix("loaderx-gather-")
            .tempdir_in(&cfg.dir)
            .with_context(|| format!("creating a temporary directory in {}", cfg.dir.display()))?;
        let n = u32::try_from((bytes / rec).max(4 * BATCHES[2])).unwrap_or(u32::MAX);
        let (flat_path, store, fixed) = write_data(dir.path(), n, rec)?;
        let flat = MappedFile::open(&flat_path)?;
        // The A/B of the near copy: the same fixed-stride store, once with each copy outright.
        let ab = if near_copy_ab {
            let open = |how| Store::open_with(dir.path().join("fixed"), StoreOptions::new().near_copy(how));
            Some((open(NearCopy::Memcpy)?, open(NearCopy::Blocks)?))
        } else {
            None
        };
        // The A/B of the hint: the same store with no record hinted and with every one.
        let hints = if hint_ab {
            let open = |below| {
                Store::open_with(
                    dir.path().join("fixed"),
                    StoreOptions::new().hint_records_below(Some(below)),
                )
            };
            Some((open(0)?, open(usize::MAX)?))
        } else {
            None
        };
        let mut numpy = match start_numpy(python, dir.path(), (&flat_path, n, rec)) {
            Ok(np) => Some(np),
            Err(why) => {
                numpy_note = Some(why);
                None
            }
        };
        let mut s = Section::new(
            format!(
                "Gather — {} records of {} ({} MiB), random unsorted indices",
                report::thousands(n.into()),
                size(rec),
                (n as usize * rec) >> 20
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
        let data = Data {
            dir: dir.path(),
            n,
            rec,
            flat: flat.bytes(),
            store: &store,
            fixed: &fixed,
            ab: ab.as_ref().map(|(m, b)| (m, b)),
            hints: hints.as_ref().map(|(off, all)| (off, all)),
            pools: &pools,
        };
        for b in BATCHES {
            batch_rows(cfg, report, &mut s, &data, b, numpy.as_mut())?;
        }
        s.notes.push(format!(
            "Each contender runs its timed loop inside a rayon pool of 1 or {cores} threads; the memcpy \
             rows split a batch into one contiguous block per thread, into a buffer at a page \
             boundary, half a page past one, or a `Vec` as allocated (glibc places large ones 16 \
             bytes past a page: the short-distance case of this CPU's `rep movsb`). \"vs best \
             memcpy\" takes, per round, the fastest of the three: the ceiling. loaderx gathers into \
             a page-aligned buffer. NumPy (`np.take(arr, idx, axis=0, out=buf, mode=\"clip\")` and `arr[idx]` \
             on the memmap's ndarray view) is single-threaded; the last column compares each \
             loaderx row with its `np.take`. \"loaderx raw\" is a v2 store with an entry per record, \
             \"fixed stride\" the same records in the fixed-stride layout (no entry: the record's \
             place is its index times its size)."
        ));
        s.notes.extend(ab_notes(near_copy_ab, hint_ab));
        if let Some(note) = &numpy_note {
            s.notes.push(note.clone());
        }
        report.sections.push(s);
        drop(numpy);
        if bytes >= (64 << 20) || cfg.quick {
            zstd_section(cfg, report, rec, n.min(zstd_records(rec)), &flat, &pools)?;
        }
    }
    Ok(())
}

/// The notes of the A/B rows asked for.
fn ab_notes(near_copy_ab: bool, hint_ab: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if near_copy_ab {
        notes.push(
            "The \"→ Vec\" rows gather from the fixed-stride store into a `Vec` as allocated \
             (16 bytes past a page: a short distance for these records), following this \
             CPU's measurement (the machine table's \"near copies\" line) or with \
             `StoreOptions::near_copy` set to `memcpy` or to 256-byte pieces outright."
                .into(),
        );
    }
    if hint_ab {
        notes.push(format!(
            "The \"no hints\" and \"every record hinted\" rows gather from the fixed-stride store \
             with `StoreOptions::hint_records_below` set to 0 and to every size; the plain row \
             follows this CPU's table (records below {} bytes hinted, the machine table's line).",
            loaderx_core::cpu::fixed_stride_hint_below()
        ));
    }
    notes
}

/// The NumPy worker over `npy`, or the note saying why its rows are skipped.
fn start_numpy(python: Option<&Path>, dir: &Path, flat: (&Path, u32, usize)) -> Result<Numpy, String> {
    match python {
        Some(p) => Numpy::start(p, dir, flat).map_err(|why| format!("NumPy rows skipped: {why}.")),
        None => Err("NumPy rows skipped: no Python given (`--python PATH`, which \
                     scripts/bench-gather.sh sets up in a venv)."
            .into()),
    }
}

/// The data of one record size, in one temporary directory.
struct Data<'a> {
    dir: &'a Path,
    n: u32,
    rec: usize,
    /// The records, flat (the memcpy rows copy from it).
    flat: &'a [u8],
    /// The raw store of the same records.
    store: &'a Store,
    /// The same records in the fixed-stride layout.
    fixed: &'a Store,
    /// The fixed-stride store opened with each near copy outright (`memcpy`, blocks).
    ab: Option<(&'a Store, &'a Store)>,
    /// The fixed-stride store opened with no record hinted, and with every record hinted.
    hints: Option<(&'a Store, &'a Store)>,
    pools: &'a [(usize, &'a ThreadPool)],
}

/// The rows of batch size `b`: every contender's batch 0 checked equal to the memcpy's, then
/// timed in interleaved rounds.
fn batch_rows(
    cfg: &Config,
    report: &mut Report,
    s: &mut Section,
    data: &Data<'_>,
    b: usize,
    mut numpy: Option<&mut Numpy>,
) -> anyhow::Result<()> {
    let rec = data.rec;
    let batches = index_batches(data.n, b, rec, 0x5EED ^ rec as u64 ^ b as u64);
    let len = b * rec;
    let mut want = vec![0u8; len];
    copy_rows(data.flat, &batches[0], rec, &mut want);
    let mut got = vec![0u8; len];
    data.store.gather_fixed(&batches[0], rec, &mut got)?;
    anyhow::ensure!(got == want, "loaderx's batch differs from the memcpy's");
    got.fill(0);
    data.fixed.gather_fixed(&batches[0], rec, &mut got)?;
    anyhow::ensure!(got == want, "the fixed-stride store's batch differs from the memcpy's");
    if let Some(np) = &mut numpy {
        let idx = data.dir.join(format!("idx-{b}.bin"));
        write_indices(&idx, &batches)?;
        np.load(&idx, b)?;
        anyhow::ensure!(np.dump(0, data.dir)? == want, "NumPy's batch differs from the memcpy's");
    }
    let mut contenders = Vec::new();
    for &(threads, pool) in data.pools {
        contenders.extend(memcpy_contenders((threads, pool), data.flat, &batches, rec));
        // Into the ceiling's own destination: a page-aligned buffer.
        contenders.push(store_contender_into(name(RAW, threads), pool, Dst::Page, data.store, &batches, rec));
        contenders.push(store_contender_into(
            name(FIXED, threads),
            pool,
            Dst::Page,
            data.fixed,
            &batches,
            rec,
        ));
        if let Some((off, all)) = data.hints {
            for (what, store) in [(FIXED_UNHINTED, off), (FIXED_HINTED, all)] {
                contenders.push(store_contender_into(
                    name(what, threads),
                    pool,
                    Dst::Page,
                    store,
                    &batches,
                    rec,
                ));
            }
        }
        if let Some((by_memcpy, by_blocks)) = data.ab {
            // Into a `Vec`, 16 bytes past a page: a short distance for page-multiple records.
            for (what, store) in
                [(FIXED_VEC, data.fixed), (FIXED_MEMCPY, by_memcpy), (FIXED_BLOCKS, by_blocks)]
            {
                contenders.push(store_contender_into(
                    name(what, threads),
                    pool,
                    Dst::Vec,
                    store,
                    &batches,
                    rec,
                ));
            }
        }
    }
    let numpy_cell = numpy.map(std::cell::RefCell::new);
    if let Some(np) = &numpy_cell {
        contenders.push(Contender::self_timed(TAKE, Box::new(|n| np.borrow_mut().time("take", n))));
        contenders.push(Contender::self_timed(FANCY, Box::new(|n| np.borrow_mut().time("fancy", n))));
    }
    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);
    let table = BatchTable {
        t: &t,
        workload: format!("{rec} B records ({} MiB), batch {b}", (data.n as usize * rec) >> 20),
        b,
        len,
        numpy: numpy_cell.is_some(),
    };
    for &(threads, _) in data.pools {
        for (what, ceiling, vs_np) in [
            (PAGE, true, false),
            (HALF, true, false),
            (VEC, true, false),
            (RAW, false, true),
            (FIXED, false, true),
            (FIXED_UNHINTED, false, true),
            (FIXED_HINTED, false, true),
            (FIXED_VEC, false, true),
            (FIXED_MEMCPY, false, true),
            (FIXED_BLOCKS, false, true),
        ] {
            if data.ab.is_none() && [FIXED_VEC, FIXED_MEMCPY, FIXED_BLOCKS].contains(&what) {
                continue;
            }
            if data.hints.is_none() && [FIXED_UNHINTED, FIXED_HINTED].contains(&what) {
                continue;
            }
            s.rows.push(table.row(report, threads, what, &name(what, threads), ceiling, vs_np));
        }
    }
    if table.numpy {
        s.rows.push(table.row(report, 1, TAKE, TAKE, false, false));
        s.rows.push(table.row(report, 1, FANCY, FANCY, false, false));
    }
    Ok(())
}

/// What the rows of one batch size share.
struct BatchTable<'a> {
    t: &'a Timings,
    workload: String,
    b: usize,
    len: usize,
    /// Whether the NumPy rows ran.
    numpy: bool,
}

impl BatchTable<'_> {
    /// The cells of contender `key` (shown as `label`) on `threads` threads, its figures added to
    /// `report`; `ceiling` for a memcpy row, `vs_np` for a row compared with `np.take`.
    fn row(
        &self,
        report: &mut Report,
        threads: usize,
        label: &str,
        key: &str,
        ceiling: bool,
        vs_np: bool,
    ) -> Vec<String> {
        let (t, b) = (self.t, self.b);
        let secs = t.median_secs(key);
        let mibs = self.len as f64 / MIB / secs;
        let memcpys = memcpy_names(threads);
        let best = [memcpys[0].as_str(), memcpys[1].as_str(), memcpys[2].as_str()];
        report.push_rates(
            ("gather", key, &self.workload),
            &[(mibs, "MiB/s"), (b as f64 / secs, "records/s")],
            (!ceiling || key != memcpys[0]).then(|| (memcpys[0].as_str(), t.speed_vs(key, &memcpys[0]))),
        );
        vec![
            b.to_string(),
            threads.to_string(),
            label.into(),
            format!("{mibs:.0}"),
            report::thousands(b as f64 / secs),
            if key == memcpys[0] { "ceiling".into() } else { report::ratio(t.speed_vs(key, &memcpys[0])) },
            report::ratio(t.speed_vs_best(key, &best)),
            if vs_np && self.numpy { report::ratio(t.speed_vs(key, TAKE)) } else { "—".into() },
        ]
    }
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
    let (plain, dict) = write_zstd_stores(dir.path(), n, rec)?;
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
            contenders.push(store_contender(name(what, threads), pool, st, &batches[..4], rec));
        }
    }
    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);
    let s = zstd_table(report, &t, (n, rec), pools, [&plain, &dict])?;
    report.sections.push(s);
    Ok(())
}

/// The zstd and zstd_dict stores of records `0..n` of `rec` bytes in `dir`.
fn write_zstd_stores(dir: &Path, n: u32, rec: usize) -> anyhow::Result<(Store, Store)> {
    let plain = Store::create(dir.join("zstd"), StoreOptions::new())?;
    let dict = Store::create(dir.join("zstd_dict"), StoreOptions::new())?;
    for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
        let recs: Vec<Vec<u8>> = (lo..hi).map(|i| structured_record(u64::from(i), rec)).collect();
        plain.append(&recs, Codec::Zstd)?;
        if !dict.has_dictionary() {
            anyhow::ensure!(dict.train_dictionary(&recs)?, "too few records to train a dictionary");
        }
        dict.append(&recs, Codec::ZstdDict)?;
    }
    Ok((plain, dict))
}

/// The table of [`zstd_section`], its figures added to `report`.
fn zstd_table(
    report: &mut Report,
    t: &Timings,
    (n, rec): (u32, usize),
    pools: &[(usize, &ThreadPool)],
    [plain, dict]: [&Store; 2],
) -> anyhow::Result<Section> {
    let len = ZSTD_BATCH * rec;
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
    for (st, what) in [(plain, "zstd"), (dict, "zstd_dict")] {
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
    Ok(s)
}
