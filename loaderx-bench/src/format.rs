//! Format layer: store format v2 against v1 on the same records and indices. The raw gather with
//! and without `verify_reads` against the memcpy ceilings, the compressed gathers (zstd in both
//! formats, LZ4 in v2) with their ratios on the bench records and on the MNIST digits, append
//! throughput and bytes on disk, and the time from opening a store of millions of records to its
//! first batch.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use loaderx_core::framing::MappedFile;
use loaderx_core::{Codec, Format, Store, StoreOptions, WriteOptions};
use rayon::ThreadPool;

use crate::ceiling::{Pools, copy_rows, memcpy_contenders, memcpy_names, name, store_contender};
use crate::gather::{BLOCK_BYTES, index_batches, size};
use crate::report::{self, Report, Section};
use crate::run::Config;
use crate::timing;
use crate::workloads::{Gen, block, blocks, structured_record};

/// Record sizes of the raw comparison (the 12 KiB and 128 KiB).
const RAW_SIZES: [usize; 2] = [12 << 10, 128 << 10];
/// The batch of every gather here.
const BATCH: usize = 256;
const MIB: f64 = (1 << 20) as f64;
const V1_RAW: &str = "v1 raw";
const V2_RAW: &str = "v2 raw";
const V2_VERIFIED: &str = "v2 raw, verify_reads";

fn opts(format: Format) -> StoreOptions {
    StoreOptions::new().format(format)
}

/// Runs the format comparisons and adds their tables.
///
/// # Errors
/// Writing or reading the generated data.
pub(crate) fn run(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let pools = Pools::new()?;
    let pools = pools.list();
    for rec in RAW_SIZES {
        cfg.progress(&format!("format: raw gather, {} records", size(rec)));
        raw_section(cfg, report, rec, &pools)?;
    }
    cfg.progress("format: compressed gathers");
    compressed_section(cfg, report)?;
    cfg.progress("format: append and size");
    append_section(cfg, report)?;
    cfg.progress("format: open to first batch");
    open_section(cfg, report)?;
    Ok(())
}

fn tempdir(cfg: &Config, what: &str) -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("loaderx-format-{what}-"))
        .tempdir_in(&cfg.dir)
        .with_context(|| format!("creating a temporary directory in {}", cfg.dir.display()))
}

/// v1 raw, v2 raw and v2 raw verified against the three memcpys, batch 256.
fn raw_section(
    cfg: &Config,
    report: &mut Report,
    rec: usize,
    pools: &[(usize, &ThreadPool)],
) -> anyhow::Result<()> {
    let dir = tempdir(cfg, "raw")?;
    let bytes: usize = if cfg.quick { 32 << 20 } else { 256 << 20 };
    let n = u32::try_from((bytes / rec).max(4 * BATCH)).unwrap_or(u32::MAX);
    let flat_path = dir.path().join("flat.bin");
    let v1 = Store::create(dir.path().join("v1"), opts(Format::V1))?;
    let v2 = Store::create(dir.path().join("v2"), opts(Format::V2))?;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&flat_path)?);
        for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
            let recs = block(lo, hi, rec);
            for r in &recs {
                std::io::Write::write_all(&mut f, r)?;
            }
            v1.append(&recs, Codec::Raw)?;
            v2.append(&recs, Codec::Raw)?;
        }
        std::io::Write::flush(&mut f)?;
    }
    drop(v2);
    let v2 = Store::open(dir.path().join("v2"))?;
    let verified = Store::open_with(dir.path().join("v2"), StoreOptions::new().verify_reads(true))?;
    let flat = MappedFile::open(&flat_path)?;
    let batches = index_batches(n, BATCH, rec, 0xF0F0 ^ rec as u64);
    let len = BATCH * rec;
    let mut want = vec![0u8; len];
    copy_rows(flat.bytes(), &batches[0], rec, &mut want);
    for (s, what) in [(&v1, V1_RAW), (&v2, V2_RAW), (&verified, V2_VERIFIED)] {
        let mut got = vec![0u8; len];
        s.gather_fixed(&batches[0], rec, &mut got)?;
        anyhow::ensure!(got == want, "the {what} batch differs from the records");
    }
    let mut contenders = Vec::new();
    for &(threads, pool) in pools {
        contenders.extend(memcpy_contenders((threads, pool), flat.bytes(), &batches, rec));
        for (st, what) in [(&v1, V1_RAW), (&v2, V2_RAW), (&verified, V2_VERIFIED)] {
            contenders.push(store_contender(name(what, threads), pool, st, &batches, rec));
        }
    }
    let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
    drop(contenders);
    let mut s = Section::new(
        format!(
            "Format — raw gather, {} records of {}, batch {BATCH}",
            report::thousands(n.into()),
            size(rec)
        ),
        &["threads", "contender", "MiB/s", "vs v1 raw", "vs best memcpy", "vs v2 unverified"],
    );
    let workload = format!("{rec} B records, batch {BATCH}, formats");
    for &(threads, _) in pools {
        let memcpys = memcpy_names(threads);
        let best = [memcpys[0].as_str(), memcpys[1].as_str(), memcpys[2].as_str()];
        let (k1, k2) = (name(V1_RAW, threads), name(V2_RAW, threads));
        for what in [V1_RAW, V2_RAW, V2_VERIFIED] {
            let key = name(what, threads);
            let secs = t.median_secs(&key);
            let mibs = len as f64 / MIB / secs;
            report.push_rates(
                ("format", &key, &workload),
                &[(mibs, "MiB/s")],
                (what != V1_RAW).then(|| (k1.as_str(), t.speed_vs(&key, &k1))),
            );
            s.rows.push(vec![
                threads.to_string(),
                what.into(),
                format!("{mibs:.0}"),
                if what == V1_RAW { "baseline".into() } else { report::ratio(t.speed_vs(&key, &k1)) },
                report::ratio(t.speed_vs_best(&key, &best)),
                if what == V2_VERIFIED { report::ratio(t.speed_vs(&key, &k2)) } else { "—".into() },
            ]);
        }
    }
    s.notes.push(
        "The same records and random unsorted indices in a v1 and a v2 store, and in a flat file the \
         memcpy rows copy from (into a page-aligned buffer, half a page past one, or a Vec; \"best\" \
         is the fastest of the three per round). verify_reads checks each entry's and each record's \
         crc32c (SSE4.2, crc32c crate) on the gathering thread."
            .into(),
    );
    report.sections.push(s);
    Ok(())
}

/// One compressed workload: its records.
struct Workload {
    label: String,
    records: Vec<Vec<u8>>,
}

/// The MNIST training digits bundled with the repository, when they are there.
fn mnist() -> Option<Workload> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/mnist-10k/train-images-idx3-ubyte.gz");
    let dir = tempfile::tempdir().ok()?;
    let out = dir.path().join("d");
    loaderx_core::convert::idx(&path, &out, WriteOptions::new().codec(Codec::Raw)).ok()?;
    let store = Store::open(&out).ok()?;
    let all: Vec<u64> = (0..store.len()).collect();
    Some(Workload { label: "MNIST digits (784 B)".into(), records: store.gather(&all).ok()? })
}

/// zstd in v1 and v2 and LZ4 in v2 (and v2 raw), records/s and stored/logical.
fn compressed_section(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let n = if cfg.quick { 1000 } else { 2000u64 };
    let mut workloads = vec![Workload {
        label: "12 KiB bench records".into(),
        records: (0..n).map(|i| structured_record(i, 12 << 10)).collect(),
    }];
    let mut note = None;
    match mnist() {
        Some(w) => workloads.push(w),
        None => note = Some("MNIST rows skipped: data/mnist-10k is not next to this build.".to_string()),
    }
    let mut s = Section::new(
        format!("Format — compressed gathers, batch {BATCH}, the pool"),
        &["workload", "contender", "records/s", "MiB/s (decoded)", "stored / logical", "vs v1 zstd"],
    );
    for w in &workloads {
        let dir = tempdir(cfg, "codec")?;
        let kinds = [
            ("v1 zstd", Format::V1, Codec::Zstd),
            ("v2 zstd", Format::V2, Codec::Zstd),
            ("v2 lz4", Format::V2, Codec::Lz4),
            ("v2 raw", Format::V2, Codec::Raw),
        ];
        let mut stores = Vec::new();
        for (what, format, codec) in kinds {
            let st = Store::create(dir.path().join(what.replace(' ', "-")), opts(format))?;
            for part in w.records.chunks(4096) {
                st.append(part, codec)?;
            }
            let stats = st.stats()?;
            stores.push((what, st, stats.live_bytes as f64 / stats.logical_bytes.max(1) as f64));
        }
        let rec = w.records[0].len();
        let batches = index_batches(w.records.len() as u32, BATCH, rec, 0xC0DE);
        let len = BATCH * rec;
        for (what, st, _) in &stores {
            let mut got = vec![0u8; len];
            st.gather_fixed(&batches[0], rec, &mut got)?;
            let want: Vec<u8> = batches[0].iter().flat_map(|&i| w.records[i as usize].clone()).collect();
            anyhow::ensure!(got == want, "the {what} batch differs from the records");
        }
        let pool = rayon::ThreadPoolBuilder::new().build()?;
        let mut contenders = Vec::new();
        for (what, st, _) in &stores {
            contenders.push(store_contender((*what).to_string(), &pool, st, &batches, rec));
        }
        let t = timing::interleaved(cfg.rounds, cfg.target, 1, &mut contenders);
        drop(contenders);
        for (what, _, ratio) in &stores {
            let secs = t.median_secs(what);
            let workload = format!("{}, batch {BATCH}, codecs", w.label);
            report.push_rates(
                ("format", what, &workload),
                &[(BATCH as f64 / secs, "records/s")],
                (*what != "v1 zstd").then(|| ("v1 zstd", t.speed_vs(what, "v1 zstd"))),
            );
            s.rows.push(vec![
                w.label.clone(),
                (*what).into(),
                report::thousands(BATCH as f64 / secs),
                format!("{:.0}", len as f64 / MIB / secs),
                format!("{ratio:.3}"),
                if *what == "v1 zstd" {
                    "baseline".into()
                } else {
                    report::ratio(t.speed_vs(what, "v1 zstd"))
                },
            ]);
        }
    }
    s.notes.push(
        "stored / logical is the store's live bytes over its records' bytes (lower is smaller); a \
         record that does not shrink is stored raw under any codec."
            .into(),
    );
    if let Some(n) = note {
        s.notes.push(n);
    }
    report.sections.push(s);
    Ok(())
}

/// Bytes a file takes on disk (allocated blocks: `meta.zr` is sparse).
#[cfg(unix)]
fn on_disk(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

#[cfg(not(unix))]
fn on_disk(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn dir_on_disk(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |rd| rd.filter_map(Result::ok).map(|e| on_disk(&e.path())).sum())
}

/// Append throughput (MiB/s of records) and the bytes on disk, v1 and v2.
fn append_section(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let rec = 12 << 10;
    let n = if cfg.quick { 1000 } else { 8000u64 };
    let records: Vec<Vec<u8>> = (0..n).map(|i| structured_record(i, rec)).collect();
    let kinds = [
        ("v1 raw", Format::V1, Codec::Raw),
        ("v2 raw", Format::V2, Codec::Raw),
        ("v1 zstd", Format::V1, Codec::Zstd),
        ("v2 zstd", Format::V2, Codec::Zstd),
        ("v2 lz4", Format::V2, Codec::Lz4),
    ];
    let rounds = cfg.rounds.min(5);
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    let mut sizes = vec![(0u64, 0u64); kinds.len()];
    for round in 0..rounds {
        for (k, (what, format, codec)) in kinds.iter().enumerate() {
            let dir = tempdir(cfg, "append")?;
            let path = dir.path().join("s");
            let st = Store::create(&path, opts(*format))?;
            let t = Instant::now();
            for part in records.chunks(1000) {
                st.append(part, *codec)?;
            }
            secs[k].push(t.elapsed().as_secs_f64());
            drop(st);
            if round == 0 {
                let index = if *format == Format::V1 { "meta.zr" } else { "index.zr" };
                sizes[k] = (dir_on_disk(&path), on_disk(&path.join(index)));
            }
            let _ = what;
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut s = Section::new(
        format!(
            "Format — append, {} records of 12 KiB in batches of 1,000, fsync per batch",
            report::thousands(n as f64)
        ),
        &["contender", "MiB/s", "vs v1, same codec", "on disk", "of which the index"],
    );
    let total = (n as usize * rec) as f64 / MIB;
    let rates: Vec<f64> = secs.iter_mut().map(|v| total / med(v)).collect();
    for (k, (what, _, codec)) in kinds.iter().enumerate() {
        let v1 = kinds.iter().position(|(_, f, c)| *f == Format::V1 && c == codec);
        report.push_rates(("format", what, "append 12 KiB records"), &[(rates[k], "MiB/s")], None);
        s.rows.push(vec![
            (*what).into(),
            format!("{:.0}", rates[k]),
            match v1 {
                Some(j) if j != k => report::ratio(rates[k] / rates[j]),
                Some(_) => "baseline".into(),
                None => "—".into(),
            },
            format!("{:.1} MiB", sizes[k].0 as f64 / MIB),
            format!("{:.2} MiB", sizes[k].1 as f64 / MIB),
        ]);
    }
    s.notes.push(format!(
        "Median of {rounds} rounds, each appending into a fresh store; appends are timed one after \
         another, not interleaved per batch, so these ratios carry more noise than the gathers'. \
         \"On disk\" counts allocated blocks (v1's 256 MiB meta.zr is sparse); v2 adds a crc32c per \
         record and the manifest rewrite per commit."
    ));
    report.sections.push(s);
    Ok(())
}

/// Opening a store of millions of records and gathering its first batch.
fn open_section(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    let n: u64 = if cfg.quick { 1_000_000 } else { 10_000_000 };
    let mut s = Section::new(
        format!(
            "Format — open a store of {} records to its first batch of {BATCH}",
            report::thousands(n as f64)
        ),
        &["format", "write", "open + first batch (median)", "slowest"],
    );
    for format in [Format::V1, Format::V2] {
        let dir = tempdir(cfg, "open")?;
        let path = dir.path().join("s");
        let st = Store::create(&path, opts(format))?;
        let t = Instant::now();
        let mut next = 0u64;
        while next < n {
            let hi = (next + 1_000_000).min(n);
            let recs: Vec<[u8; 16]> = (next..hi)
                .map(|i| [(i as u128).to_le_bytes()].concat().try_into().expect("16 bytes"))
                .collect();
            st.append(&recs, Codec::Raw)?;
            next = hi;
        }
        let write = t.elapsed().as_secs_f64();
        drop(st);
        let mut g = Gen(0x0FE7);
        let mut times = Vec::new();
        for _ in 0..cfg.rounds.max(3) {
            let idx: Vec<u64> = (0..BATCH).map(|_| g.below(n)).collect();
            let t = Instant::now();
            let store = Store::open(&path)?;
            let mut out = vec![0u8; BATCH * 16];
            store.gather_fixed(&idx, 16, &mut out)?;
            times.push(t.elapsed().as_secs_f64());
            anyhow::ensure!(out[..8] == idx[0].to_le_bytes(), "the first record is not the one asked for");
        }
        times.sort_by(f64::total_cmp);
        let med = times[times.len() / 2];
        report.push_rates(("format", format.name(), "open to first batch"), &[(med * 1e3, "ms")], None);
        s.rows.push(vec![
            format.name().into(),
            report::duration(write),
            format!("{:.2} ms", med * 1e3),
            format!("{:.2} ms", times[times.len() - 1] * 1e3),
        ]);
    }
    s.notes.push(
        "Open maps the index and reads its header (no scan of the entries); the first batch reads 256 \
         random entries and records. Warm page cache."
            .into(),
    );
    report.sections.push(s);
    Ok(())
}
