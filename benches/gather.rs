//! Store gather against its physical ceilings, in one process on the same data and indices.
//!
//! For 12 KiB and 128 KiB records (20,000 of each; `LOADERX_BENCH_RECORDS` overrides), random
//! batches of 256 sorted indices:
//! - `memcpy`: the same records copied from one flat memory-mapped file into a page-aligned
//!   destination (the raw ceiling; `loaderx bench store` and `loaderx bench gather` also show
//!   the half-page and plain-`Vec` destinations, and take the best of the three);
//! - `raw`, `zstd`, `zstd_dict`: `Store::gather_fixed` into a reused buffer;
//! - `zstd_frames`, `zstd_dict_frames`: decompressing the same frames from memory with no store
//!   around them (the compressed ceilings).
//!
//! Every contender uses the same rayon pool and the same contiguous-block split. After criterion
//! has run, a table of MiB/s and ratios is printed from its medians, with write throughput and
//! bytes on disk.
//!
//! `cargo bench --bench gather -- --warm-up-time 1 --measurement-time 3`

mod common;

use std::io::Write;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use loaderx::framing::MappedFile;
use loaderx::{Codec, Format, Store, StoreOptions};
use loaderx_bench::timing::{FixedContender, interleaved_fixed};
use loaderx_bench::workloads::{Dst, DstBuf, block, blocks as record_blocks, random_batches, zstd_frames};
use rayon::prelude::*;
use zstd::bulk::Decompressor;
use zstd::dict::DecoderDictionary;

const BATCH: usize = 256;
const BATCHES: usize = 16;

struct Row {
    size: &'static str,
    codec: &'static str,
    ceiling_mibs: f64,
    gather_mibs: f64,
    vs_ceiling: f64,
    write_mibs: f64,
    on_disk: u64,
    logical: u64,
}

/// Splits `idx` into one contiguous block per thread with the matching slices of `dst`.
fn blocks<'a>(idx: &'a [u32], rec: usize, dst: &'a mut [u8]) -> Vec<(&'a [u32], &'a mut [u8])> {
    let per = idx.len().div_ceil(rayon::current_num_threads());
    idx.chunks(per).zip(dst.chunks_mut(per * rec)).collect()
}

/// One unit of a contender's work: fill this buffer with batch `k`.
type Work<'a> = Box<dyn FnMut(&mut [u8], usize) + 'a>;

/// Each contender owns its buffer (page-aligned for the memcpy ceiling, a `Vec` for the rest) and
/// walks the same batches.
fn contender<'a>(name: &'a str, rec: usize, mut f: Work<'a>) -> FixedContender<'a> {
    let at = if name == "memcpy" { Dst::Page } else { Dst::Vec };
    let mut dst = DstBuf::new(at, BATCH * rec);
    let mut k = 0usize;
    (
        name,
        Box::new(move || {
            f(dst.slice(), k);
            k += 1;
        }),
    )
}

/// The flat file the memcpy ceiling reads, written in blocks, mapped.
fn write_flat(dir: &std::path::Path, n: u32, rec: usize) -> MappedFile {
    let flat_path = dir.join("flat.bin");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&flat_path).unwrap());
        for (lo, hi) in record_blocks(n, rec, 512 * rec) {
            for r in block(lo, hi, rec) {
                f.write_all(&r).unwrap();
            }
        }
    }
    MappedFile::open(&flat_path).unwrap()
}

/// One store per codec v1 shares with v2 (the zstd rows against raw), each with its row of
/// write speed and size in `rows`.
fn write_stores(
    dir: &std::path::Path,
    n: u32,
    rec: usize,
    label: &'static str,
    rows: &mut Vec<Row>,
) -> Vec<(Codec, Store)> {
    let mut stores = Vec::new();
    // The codecs v1 shares with v2: the zstd rows against raw.
    for &codec in Format::V1.codecs() {
        let store = Store::create(dir.join(codec.name()), StoreOptions::new()).unwrap();
        let mut secs = 0.0;
        for (lo, hi) in record_blocks(n, rec, 2048 * rec) {
            let recs = block(lo, hi, rec);
            let t = Instant::now();
            // zstd_dict trains on the first block (training is explicit, as in the converters).
            if codec == Codec::ZstdDict && !store.has_dictionary() {
                assert!(store.train_dictionary(&recs).unwrap(), "too few records to train a dictionary");
            }
            store.append(&recs, codec).unwrap();
            secs += t.elapsed().as_secs_f64();
        }
        let s = store.stats().unwrap();
        rows.push(Row {
            size: label,
            codec: codec.name(),
            ceiling_mibs: 0.0,
            gather_mibs: 0.0,
            vs_ceiling: 0.0,
            write_mibs: (s.logical_bytes as f64 / (1 << 20) as f64) / secs,
            on_disk: s.chunk_bytes + s.dict_bytes,
            logical: s.logical_bytes,
        });
        stores.push((codec, store));
    }
    stores
}

fn bench_size(c: &mut Criterion, rec: usize, label: &'static str, n: u32, rows: &mut Vec<Row>) {
    let dir = tempfile::tempdir_in(
        std::env::var_os("LOADERX_BENCH_DIR").map_or_else(std::env::temp_dir, std::path::PathBuf::from),
    )
    .unwrap();
    let batches = random_batches(42, n, BATCH, BATCHES);

    let flat = write_flat(dir.path(), n, rec);
    let stores = write_stores(dir.path(), n, rec, label, rows);
    let dict = stores[2].1.dictionary().map(<[u8]>::to_vec);
    let plain_frames = zstd_frames(rec, &batches, None);
    let dict_frames = zstd_frames(rec, &batches, dict.as_deref());
    let ddict = dict.as_deref().map(DecoderDictionary::copy);

    let group_name = format!("gather_{label}");
    let bytes = flat.bytes();
    let ddict = &ddict;
    let memcpy = |dst: &mut [u8], k: usize| {
        blocks(&batches[k % BATCHES], rec, dst).into_par_iter().for_each(|(ix, d)| {
            for (j, &i) in ix.iter().enumerate() {
                let at = i as usize * rec;
                d[j * rec..(j + 1) * rec].copy_from_slice(&bytes[at..at + rec]);
            }
        });
    };
    let frames = |frames: &Vec<Vec<Vec<u8>>>, with_dict: bool, dst: &mut [u8], k: usize| {
        let fr = &frames[k % BATCHES];
        let per = BATCH.div_ceil(rayon::current_num_threads());
        fr.par_chunks(per).zip(dst.par_chunks_mut(per * rec)).for_each(|(fs, d)| {
            let mut dc = match (ddict, with_dict) {
                (Some(dd), true) => Decompressor::with_prepared_dictionary(dd).unwrap(),
                _ => Decompressor::new().unwrap(),
            };
            for (j, f) in fs.iter().enumerate() {
                dc.decompress_to_buffer(f, &mut d[j * rec..(j + 1) * rec]).unwrap();
            }
        });
    };
    let batches = &batches;
    let contender = |name, f| contender(name, rec, f);
    let (raw, zstd, zstd_dict) = (&stores[0].1, &stores[1].1, &stores[2].1);
    let mut contenders: Vec<FixedContender<'_>> = vec![
        contender("memcpy", Box::new(memcpy)),
        contender(
            "raw",
            Box::new(move |d: &mut [u8], k| raw.gather_fixed(&batches[k % BATCHES], rec, d).unwrap()),
        ),
        contender("zstd_frames", Box::new(|d: &mut [u8], k| frames(&plain_frames, false, d, k))),
        contender(
            "zstd",
            Box::new(move |d: &mut [u8], k| zstd.gather_fixed(&batches[k % BATCHES], rec, d).unwrap()),
        ),
        contender("zstd_dict_frames", Box::new(|d: &mut [u8], k| frames(&dict_frames, true, d, k))),
        contender(
            "zstd_dict",
            Box::new(move |d: &mut [u8], k| zstd_dict.gather_fixed(&batches[k % BATCHES], rec, d).unwrap()),
        ),
    ];
    let mut g = c.benchmark_group(&group_name);
    g.throughput(Throughput::Bytes((BATCH * rec) as u64));
    g.sample_size(20);
    for (name, f) in contenders.iter_mut() {
        g.bench_function(BenchmarkId::from_parameter(*name), |b| b.iter(&mut *f));
    }
    g.finish();

    // The ratios: interleaved rounds, each ceiling paired with its contender.
    let rounds = 15;
    let iters = if rec > 64 << 10 { 4 } else { 20 };
    for pair in contenders.chunks_mut(2) {
        let res = interleaved_fixed(rounds, iters, pair);
        let mibs = |ns: f64| (BATCH * rec) as f64 / (1 << 20) as f64 / (ns * 1e-9);
        let row = rows.iter_mut().find(|r| r.size == label && r.codec == res[1].name).expect("row");
        row.ceiling_mibs = mibs(res[0].median_ns);
        row.gather_mibs = mibs(res[1].median_ns);
        row.vs_ceiling = res[1].speed_vs_baseline;
    }
}

fn main() {
    let n: u32 = std::env::var("LOADERX_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut c = Criterion::default().output_directory(&common::criterion_dir()).configure_from_args();
    let mut rows = Vec::new();
    bench_size(&mut c, 12 << 10, "12KiB", n, &mut rows);
    bench_size(&mut c, 128 << 10, "128KiB", n, &mut rows);
    c.final_summary();

    println!(
        "\nStore gather, {n} records, random batches of {BATCH} sorted indices, warm page cache, {} threads;",
        rayon::current_num_threads()
    );
    println!(
        "median of 15 interleaved rounds; vs ceiling = median over rounds of ceiling time / loaderx time"
    );
    println!(
        "| records | codec | loaderx gather MiB/s | its ceiling | ceiling MiB/s | vs ceiling | write MiB/s | on disk MiB | ratio |"
    );
    println!("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        let ceiling = match r.codec {
            "raw" => "memcpy from a flat mmap into a page-aligned buffer",
            "zstd" => "zstd frames, no store",
            _ => "zstd_dict frames, no store",
        };
        println!(
            "| {} | {} | {:.0} | {ceiling} | {:.0} | {:.2}x | {:.0} | {:.0} | {:.2}x |",
            r.size,
            r.codec,
            r.gather_mibs,
            r.ceiling_mibs,
            r.vs_ceiling,
            r.write_mibs,
            r.on_disk as f64 / (1 << 20) as f64,
            r.logical as f64 / r.on_disk.max(1) as f64
        );
    }
}
