//! Store layer: batch gather from loaderx stores and the alternatives, random (sorted random
//! draws, the shuffle case) and sequential (consecutive windows, the epoch case), against the
//! physical ceilings of the same bytes.
//!
//! Per record size, in one temporary directory: a flat file of the records (the memcpy
//! ceiling), the same records as a `.npy` and as one safetensors tensor (both read through a
//! mapping), and loaderx stores with each codec. The decompress-only ceilings decode the same
//! batches' frames, compressed as the store compresses them, from memory with no store around
//! them; in memory the order does not matter, so the sequential comparison reuses them.

use std::fs::File;
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use loaderx_core::convert::NpyHeader;
use loaderx_core::framing::MappedFile;
use loaderx_core::{Codec, DType, Store, StoreOptions};
use zstd::dict::DecoderDictionary;

use crate::ceiling::{copy_rows, decompress};
use crate::report::{self, Report, Row, Section};
use crate::run::Config;
use crate::timing::{self, Contender, Timings};
use crate::workloads::{Dst, DstBuf, block, blocks, random_batches, sequential_batches, zstd_frames};

const BATCH: usize = 256;
/// Bytes generated and written per block, so a 2.5 GiB set never sits in memory.
const BLOCK_BYTES: usize = 64 << 20;
const MIB: f64 = (1 << 20) as f64;

/// The ceiling rows: the same records memcpy'd from a flat mapped file into a destination at a
/// page boundary, half a page past one, and a `Vec` as allocated. The ceiling of a round is the
/// fastest of the three (a page-aligned destination over page-aligned records is itself this
/// CPU's short-distance case at 128 KiB; a `Vec`, 16 bytes past a page, is at 12 KiB and up).
pub(crate) const MEMCPY: &str = "memcpy → page-aligned (flat mmap)";
const MEMCPY_HALF: &str = "memcpy → page + 2 KiB (flat mmap)";
const MEMCPY_VEC: &str = "memcpy → Vec (flat mmap)";
/// What "vs ceiling" compares with: the fastest of these in each round.
const CEILINGS: [&str; 3] = [MEMCPY, MEMCPY_HALF, MEMCPY_VEC];
const RAW: &str = "loaderx raw";
const ZSTD: &str = "loaderx zstd";
const ZSTD_DICT: &str = "loaderx zstd_dict";
const NPY: &str = "npy mmap";
const SAFETENSORS: &str = "safetensors mmap";
const ZSTD_FRAMES: &str = "zstd decompress-only";
const DICT_FRAMES: &str = "zstd_dict decompress-only";

/// Table order, with the baseline each row is compared to (`MEMCPY`: the best of [`CEILINGS`]).
const ORDER: [(&str, Option<&str>); 10] = [
    (MEMCPY, None),
    (MEMCPY_HALF, None),
    (MEMCPY_VEC, None),
    (RAW, Some(MEMCPY)),
    (NPY, Some(MEMCPY)),
    (SAFETENSORS, Some(MEMCPY)),
    (ZSTD_FRAMES, None),
    (ZSTD, Some(ZSTD_FRAMES)),
    (DICT_FRAMES, None),
    (ZSTD_DICT, Some(DICT_FRAMES)),
];

/// One contender: owns its destination buffer (a `Vec`) and fills it with batch `k`, `k + 1`, ...
fn contender<'a>(name: &str, rec: usize, f: impl FnMut(usize, &mut [u8]) + 'a) -> Contender<'a> {
    placed(name, rec, Dst::Vec, f)
}

/// [`contender`] with its destination placed as `at` says.
fn placed<'a>(name: &str, rec: usize, at: Dst, mut f: impl FnMut(usize, &mut [u8]) + 'a) -> Contender<'a> {
    let mut dst = DstBuf::new(at, BATCH * rec);
    let mut k = 0usize;
    Contender::new(
        name,
        Box::new(move || {
            let d = dst.slice();
            f(k, d);
            k += 1;
            black_box(d);
        }),
    )
}

/// A store contender's work: `Store::gather_fixed` of batch `k` into the buffer.
fn gather<'a>(s: &'a Store, bs: &'a [Vec<u32>], rec: usize) -> impl FnMut(usize, &mut [u8]) + 'a {
    move |k, d| s.gather_fixed(&bs[k % bs.len()], rec, d).expect("gather from a store this run wrote")
}

fn sync(path: &Path) -> anyhow::Result<()> {
    File::open(path).and_then(|f| f.sync_all()).with_context(|| format!("syncing {}", path.display()))
}

/// Writes the flat file (untimed) and the `.npy` (timed, generation excluded, fsync included);
/// returns the `.npy` write time in seconds.
fn write_flat_and_npy(n: u32, rec: usize, flat: &Path, npy: &Path) -> anyhow::Result<f64> {
    let header = NpyHeader::encode(DType::U8, &[n as usize, rec])?;
    let open =
        |p: &Path| File::create(p).map(BufWriter::new).with_context(|| format!("creating {}", p.display()));
    let (mut f, mut y) = (open(flat)?, open(npy)?);
    let t = Instant::now();
    y.write_all(&header)?;
    let mut secs = t.elapsed().as_secs_f64();
    for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
        let recs = block(lo, hi, rec);
        for r in &recs {
            f.write_all(r)?;
        }
        let t = Instant::now();
        for r in &recs {
            y.write_all(r)?;
        }
        secs += t.elapsed().as_secs_f64();
    }
    f.flush()?;
    let t = Instant::now();
    y.flush()?;
    drop(y);
    sync(npy)?;
    Ok(secs + t.elapsed().as_secs_f64())
}

/// Appends every record to a new store with `codec` in blocks; returns the store and the time
/// spent in `append` (which makes the bytes durable).
fn write_store(dir: &Path, n: u32, rec: usize, codec: Codec) -> anyhow::Result<(Store, f64)> {
    let store = Store::create(dir.join(codec.name()), StoreOptions::new())?;
    let mut secs = 0.0;
    for (lo, hi) in blocks(n, rec, BLOCK_BYTES) {
        let recs = block(lo, hi, rec);
        let t = Instant::now();
        // zstd_dict trains on the first block, as the converters do; too few records to train on
        // leave the store plain zstd (the report says so).
        let codec =
            if codec == Codec::ZstdDict && !store.has_dictionary() && !store.train_dictionary(&recs)? {
                Codec::Zstd
            } else {
                codec
            };
        store.append(&recs, codec)?;
        secs += t.elapsed().as_secs_f64();
    }
    Ok((store, secs))
}

/// Measures every record size and adds its rows and tables.
///
/// # Errors
/// Writing or opening the generated data.
pub(crate) fn run(cfg: &Config, report: &mut Report) -> anyhow::Result<()> {
    for &kib in &cfg.record_kib {
        cfg.progress(&format!("store, {kib} KiB records"));
        size(cfg, kib << 10, report)?;
    }
    Ok(())
}

/// The layout of one record size: `n` records of `rec` bytes (`dn` of them in the zstd_dict
/// store) and `nb` batches per order.
struct Shape {
    label: String,
    n: u32,
    dn: u32,
    rec: usize,
    nb: usize,
}

/// The files and stores of one record size, and what writing them took.
struct Written {
    flat: MappedFile,
    npy: MappedFile,
    safetensors: MappedFile,
    /// raw, zstd, zstd_dict.
    stores: Vec<Store>,
    /// MiB/s of each written contender.
    write_mibs: Vec<(&'static str, f64)>,
    /// Bytes on disk of each contender with files.
    on_disk: Vec<(&'static str, u64)>,
}

fn size(cfg: &Config, rec: usize, report: &mut Report) -> anyhow::Result<()> {
    let n = cfg.records;
    let dir = tempfile::Builder::new()
        .prefix("loaderx-bench-")
        .tempdir_in(&cfg.dir)
        .with_context(|| format!("creating a temporary directory in {}", cfg.dir.display()))?;
    let nb = if rec > 64 << 10 { 4 } else { 16 };
    // zstd_dict writes at level 19; `--dict-records` may give it a prefix of the records, and
    // then it and its ceiling draw their indices from that prefix (same seed, same windows).
    let shape = Shape { label: format!("{} KiB", rec >> 10), n, dn: cfg.dict_records.min(n), rec, nb };
    let rnd = random_batches(42, n, BATCH, nb);
    let seq = sequential_batches(n, BATCH, nb);
    let rnd_d = random_batches(42, shape.dn, BATCH, nb);
    let seq_d = sequential_batches(shape.dn, BATCH, nb);
    // The compressed ceilings decode frames from memory, where order does not matter: a few
    // batches of them bound the memory and the level-19 compression time.
    let nf = nb.min(4);

    let written = write(cfg, &shape, dir.path())?;
    let npy_offset = NpyHeader::parse(written.npy.bytes())
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.path().join("x.npy").display()))?
        .data_offset;
    let npy_data = &written.npy.bytes()[npy_offset as usize..];
    let tensors = safetensors::SafeTensors::deserialize(written.safetensors.bytes())?;
    let st_data = tensors.tensor("x")?.data();

    let dict = written.stores[2].dictionary().map(<[u8]>::to_vec);
    let plain_frames = zstd_frames(rec, &rnd[..nf], None);
    let dict_frames = zstd_frames(rec, &rnd_d[..nf], dict.as_deref());
    let ddict = dict.as_deref().map(DecoderDictionary::copy);

    let mut measured = Vec::new();
    for (mode, bs, bs_d) in [("random", &rnd, &rnd_d), ("sequential", &seq, &seq_d)] {
        cfg.progress(&format!("store, {}: gather {mode}", shape.label));
        let (raw, zstd, zdict) = (&written.stores[0], &written.stores[1], &written.stores[2]);
        let (flat, ddict, plain_frames, dict_frames) =
            (written.flat.bytes(), ddict.as_ref(), &plain_frames, &dict_frames);
        let mut contenders = vec![
            placed(MEMCPY, rec, Dst::Page, |k, d| copy_rows(flat, &bs[k % nb], rec, d)),
            placed(MEMCPY_HALF, rec, Dst::HalfPage, |k, d| copy_rows(flat, &bs[k % nb], rec, d)),
            placed(MEMCPY_VEC, rec, Dst::Vec, |k, d| copy_rows(flat, &bs[k % nb], rec, d)),
            contender(RAW, rec, gather(raw, bs, rec)),
            contender(NPY, rec, |k, d| copy_rows(npy_data, &bs[k % nb], rec, d)),
            contender(SAFETENSORS, rec, |k, d| copy_rows(st_data, &bs[k % nb], rec, d)),
            contender(ZSTD_FRAMES, rec, |k, d| decompress(&plain_frames[k % nf], None, rec, d)),
            contender(ZSTD, rec, gather(zstd, bs, rec)),
            contender(DICT_FRAMES, rec, move |k, d| decompress(&dict_frames[k % nf], ddict, rec, d)),
            contender(ZSTD_DICT, rec, gather(zdict, bs_d, rec)),
        ];
        // Warm-up walks every batch once, so no mapping pays its first-touch page faults in a round.
        measured.push((mode, timing::interleaved(cfg.rounds, cfg.target, nb, &mut contenders)));
    }
    let s = table(report, &shape, &written, &measured, dict.is_some());
    report.sections.push(s);
    Ok(())
}

/// Writes the flat file, the `.npy`, the safetensors file and the three stores in `dir`, timed.
fn write(cfg: &Config, shape: &Shape, dir: &Path) -> anyhow::Result<Written> {
    let Shape { n, dn, rec, .. } = *shape;
    let logical = n as f64 * rec as f64 / MIB;
    let mut write_mibs: Vec<(&str, f64)> = Vec::new();
    let mut on_disk: Vec<(&str, u64)> = Vec::new();
    let (flat_path, npy_path, st_path) = (dir.join("flat.bin"), dir.join("x.npy"), dir.join("x.safetensors"));
    let secs = write_flat_and_npy(n, rec, &flat_path, &npy_path)?;
    write_mibs.push((NPY, logical / secs));
    let flat = MappedFile::open(&flat_path)?;
    {
        let t = Instant::now();
        let view = safetensors::tensor::TensorView::new(
            safetensors::Dtype::U8,
            vec![n as usize, rec],
            flat.bytes(),
        )?;
        safetensors::serialize_to_file([("x", view)], None, &st_path)?;
        sync(&st_path)?;
        write_mibs.push((SAFETENSORS, logical / t.elapsed().as_secs_f64()));
    }
    let mut stores = Vec::new();
    for (name, codec) in [(RAW, Codec::Raw), (ZSTD, Codec::Zstd), (ZSTD_DICT, Codec::ZstdDict)] {
        cfg.progress(&format!("store, {}: writing {name}", shape.label));
        let count = if codec == Codec::ZstdDict { dn } else { n };
        let (store, secs) = write_store(dir, count, rec, codec)?;
        let st = store.stats()?;
        write_mibs.push((name, count as f64 * rec as f64 / MIB / secs));
        on_disk.push((name, st.chunk_bytes + st.dict_bytes));
        stores.push(store);
    }
    let npy = MappedFile::open(&npy_path)?;
    let safetensors = MappedFile::open(&st_path)?;
    on_disk.extend([(MEMCPY, flat.len()), (NPY, npy.len()), (SAFETENSORS, safetensors.len())]);
    Ok(Written { flat, npy, safetensors, stores, write_mibs, on_disk })
}

/// The table of one record size, its figures added to `report`; `dict`: whether the zstd_dict
/// store trained a dictionary.
fn table(
    report: &mut Report,
    shape: &Shape,
    written: &Written,
    measured: &[(&str, Timings)],
    dict: bool,
) -> Section {
    let Shape { ref label, n, dn, rec, nb } = *shape;
    let batch_mib = (BATCH * rec) as f64 / MIB;
    let mut s = Section::new(
        format!(
            "2. Store — {label} records, {} of them ({} MiB per batch of {BATCH})",
            report::thousands(n.into()),
            format_args!("{batch_mib:.0}")
        ),
        &[
            "store",
            "write",
            "gather rnd",
            "gather seq",
            "per batch (rnd)",
            "on disk",
            "ratio",
            "vs ceiling rnd",
            "vs ceiling seq",
        ],
    );
    for (name, base) in ORDER {
        s.rows.push(table_row(report, shape, written, measured, (name, base)));
    }
    s.notes.push(format!(
        "gather rnd: {nb} batches of {BATCH} sorted random indices; gather seq: {nb} consecutive windows \
         of {BATCH}. Every contender splits a batch into one contiguous block per thread of the same \
         rayon pool. The memcpy ceiling of a round is the fastest of its three rows (destination at a \
         page boundary, half a page past one, a `Vec`); the others copy into a `Vec`. write: generation excluded, fsync included; safetensors is serialised from the \
         mapped flat file. ratio: logical bytes over bytes on disk."
    ));
    if dn < n {
        s.notes.push(format!(
            "zstd_dict (level 19, slow to write by design) holds only the first {} records \
             (`--dict-records`); its gathers and its ceiling draw indices from those, by the same rule.",
            report::thousands(dn.into())
        ));
    }
    if !dict {
        s.notes.push(
            "Too few records to train a dictionary: the zstd_dict store holds plain zstd records and its \
             ceiling decodes plain frames."
                .into(),
        );
    }
    s
}

/// The cells of contender `name` (compared with `base`), its figures added to `report`.
fn table_row(
    report: &mut Report,
    shape: &Shape,
    written: &Written,
    measured: &[(&str, Timings)],
    (name, base): (&str, Option<&str>),
) -> Vec<String> {
    let Shape { ref label, n, dn, rec, .. } = *shape;
    let batch_mib = (BATCH * rec) as f64 / MIB;
    let mut cells = vec![name.to_string()];
    match written.write_mibs.iter().find(|(w, _)| *w == name) {
        Some(&(_, v)) => {
            report.rows.push(Row::new("store", name, &format!("{label} write"), v, "MiB/s"));
            cells.push(format!("{v:.0} MiB/s"));
        }
        None => cells.push("—".into()),
    }
    let mut vs = Vec::new();
    for (mode, t) in measured {
        let mibs = batch_mib / t.median_secs(name);
        let mut row = Row::new("store", name, &format!("{label} gather {mode} batch={BATCH}"), mibs, "MiB/s");
        if let Some(b) = base {
            let speed = if b == MEMCPY { t.speed_vs_best(name, &CEILINGS) } else { t.speed_vs(name, b) };
            row = row.vs(b, speed);
            let label = if b == MEMCPY { "best memcpy" } else { b };
            vs.push(format!("{} ({label})", report::ratio(speed)));
        } else if CEILINGS.contains(&name) {
            vs.push(format!("{} of best", report::ratio(t.speed_vs_best(name, &CEILINGS))));
        } else {
            vs.push("ceiling".into());
        }
        report.rows.push(row);
        cells.push(format!("{mibs:.0} MiB/s"));
    }
    cells.push(report::duration(measured[0].1.median_secs(name)));
    match written.on_disk.iter().find(|(w, _)| *w == name) {
        Some(&(_, bytes)) => {
            report.rows.push(Row::new("store", name, &format!("{label} on disk"), bytes as f64, "bytes"));
            cells.push(format!("{:.0} MiB", bytes as f64 / MIB));
            let count = if name == ZSTD_DICT { dn } else { n };
            cells.push(report::ratio(count as f64 * rec as f64 / bytes as f64));
        }
        None => cells.extend(["— (memory)".to_string(), "—".into()]),
    }
    cells.extend(vs);
    cells
}
