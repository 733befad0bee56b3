//! Store gather against its physical ceilings, in one process on the same data and indices.
//!
//! For 12 KiB and 128 KiB records (20,000 of each; `LOADERX_BENCH_RECORDS` overrides), random
//! batches of 256 sorted indices:
//! - `memcpy`: the same records copied from one flat memory-mapped file (the raw ceiling);
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

use common::{median_ns, random_batches, structured_record};
use criterion::{BenchmarkId, Criterion, Throughput};
use loaderx::{Codec, MappedFile, Store, StoreOptions};
use rayon::prelude::*;
use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

const BATCH: usize = 256;
const BATCHES: usize = 16;

struct Row {
    size: &'static str,
    codec: &'static str,
    write_mibs: f64,
    on_disk: u64,
    logical: u64,
}

/// Splits `idx` into one contiguous block per thread with the matching slices of `dst`.
fn blocks<'a>(idx: &'a [u32], rec: usize, dst: &'a mut [u8]) -> Vec<(&'a [u32], &'a mut [u8])> {
    let per = idx.len().div_ceil(rayon::current_num_threads());
    idx.chunks(per).zip(dst.chunks_mut(per * rec)).collect()
}

fn frames_for(
    records: &(dyn Fn(u64) -> Vec<u8> + Sync),
    batches: &[Vec<u32>],
    dict: Option<&[u8]>,
) -> Vec<Vec<Vec<u8>>> {
    let enc_dict = dict.map(|d| EncoderDictionary::copy(d, 19));
    batches
        .par_iter()
        .map(|b| {
            let mut c = match &enc_dict {
                Some(d) => Compressor::with_prepared_dictionary(d).unwrap(),
                None => Compressor::new(3).unwrap(),
            };
            c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).unwrap();
            b.iter().map(|&i| c.compress(&records(u64::from(i))).unwrap()).collect()
        })
        .collect()
}

fn bench_size(c: &mut Criterion, rec: usize, label: &'static str, n: u32, rows: &mut Vec<Row>) {
    let dir =
        tempfile::tempdir_in(std::env::var_os("LOADERX_BENCH_DIR").unwrap_or_else(|| ".".into())).unwrap();
    let gen_rec = move |i: u64| structured_record(i, rec);
    let batches = random_batches(42, n, BATCH, BATCHES);

    // The flat file the memcpy ceiling reads, written in blocks.
    let flat_path = dir.path().join("flat.bin");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&flat_path).unwrap());
        for block in (0..u64::from(n)).collect::<Vec<_>>().chunks(512) {
            let recs: Vec<Vec<u8>> = block.par_iter().map(|&i| gen_rec(i)).collect();
            for r in recs {
                f.write_all(&r).unwrap();
            }
        }
    }
    let flat = MappedFile::open(&flat_path).unwrap();

    let mut stores = Vec::new();
    for codec in Codec::ALL {
        let store = Store::create(dir.path().join(codec.name()), StoreOptions::new()).unwrap();
        let mut secs = 0.0;
        for block in (0..u64::from(n)).collect::<Vec<_>>().chunks(2048) {
            let recs: Vec<Vec<u8>> = block.par_iter().map(|&i| gen_rec(i)).collect();
            let t = Instant::now();
            store.append(&recs, codec).unwrap();
            secs += t.elapsed().as_secs_f64();
        }
        let s = store.stats().unwrap();
        rows.push(Row {
            size: label,
            codec: codec.name(),
            write_mibs: (s.logical_bytes as f64 / (1 << 20) as f64) / secs,
            on_disk: s.chunk_bytes + s.dict_bytes,
            logical: s.logical_bytes,
        });
        stores.push((codec, store));
    }
    let dict = stores[2].1.dictionary().map(<[u8]>::to_vec);
    let plain_frames = frames_for(&gen_rec, &batches, None);
    let dict_frames = frames_for(&gen_rec, &batches, dict.as_deref());
    let ddict = dict.as_deref().map(DecoderDictionary::copy);

    let group_name = format!("gather_{label}");
    let mut g = c.benchmark_group(&group_name);
    g.throughput(Throughput::Bytes((BATCH * rec) as u64));
    g.sample_size(20);
    let mut dst = vec![0u8; BATCH * rec];
    let bytes = flat.bytes();
    let mut k = 0usize;
    g.bench_function(BenchmarkId::from_parameter("memcpy"), |b| {
        b.iter(|| {
            let idx = &batches[k % BATCHES];
            k += 1;
            blocks(idx, rec, &mut dst).into_par_iter().for_each(|(ix, d)| {
                for (j, &i) in ix.iter().enumerate() {
                    let at = i as usize * rec;
                    d[j * rec..(j + 1) * rec].copy_from_slice(&bytes[at..at + rec]);
                }
            });
        })
    });
    for (codec, store) in &stores {
        let mut k = 0usize;
        g.bench_function(BenchmarkId::from_parameter(codec.name()), |b| {
            b.iter(|| {
                store.gather_fixed(&batches[k % BATCHES], rec, &mut dst).unwrap();
                k += 1;
            })
        });
    }
    for (name, frames, with_dict) in
        [("zstd_frames", &plain_frames, false), ("zstd_dict_frames", &dict_frames, true)]
    {
        let mut k = 0usize;
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                let fr = &frames[k % BATCHES];
                k += 1;
                let per = BATCH.div_ceil(rayon::current_num_threads());
                fr.par_chunks(per).zip(dst.par_chunks_mut(per * rec)).for_each(|(fs, d)| {
                    let mut dc = match (&ddict, with_dict) {
                        (Some(dd), true) => Decompressor::with_prepared_dictionary(dd).unwrap(),
                        _ => Decompressor::new().unwrap(),
                    };
                    for (j, f) in fs.iter().enumerate() {
                        dc.decompress_to_buffer(f, &mut d[j * rec..(j + 1) * rec]).unwrap();
                    }
                });
            })
        });
    }
    g.finish();
}

fn main() {
    let n: u32 = std::env::var("LOADERX_BENCH_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let mut c = Criterion::default().output_directory(&common::criterion_dir()).configure_from_args();
    let mut rows = Vec::new();
    bench_size(&mut c, 12 << 10, "12KiB", n, &mut rows);
    bench_size(&mut c, 128 << 10, "128KiB", n, &mut rows);
    c.final_summary();

    println!(
        "\nStore gather, {n} records, random batches of {BATCH} sorted indices, warm page cache, {} threads",
        rayon::current_num_threads()
    );
    println!("| records | contender | gather MiB/s | vs ceiling | write MiB/s | on disk MiB | ratio |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for size in ["12KiB", "128KiB"] {
        let rec = if size == "12KiB" { 12 << 10 } else { 128 << 10 };
        let group = format!("gather_{size}");
        let mibs =
            |id: &str| median_ns(&group, id).map(|ns| (BATCH * rec) as f64 / (1 << 20) as f64 / (ns * 1e-9));
        let fmt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        println!("| {size} | memcpy from mmap (ceiling) | {} | 1.00x | | | |", fmt(mibs("memcpy")));
        println!("| {size} | zstd frames, no store (ceiling) | {} | 1.00x | | | |", fmt(mibs("zstd_frames")));
        println!(
            "| {size} | zstd_dict frames, no store (ceiling) | {} | 1.00x | | | |",
            fmt(mibs("zstd_dict_frames"))
        );
        for r in rows.iter().filter(|r| r.size == size) {
            let ceiling = match r.codec {
                "raw" => "memcpy",
                "zstd" => "zstd_frames",
                _ => "zstd_dict_frames",
            };
            println!(
                "| {size} | loaderx {} | {} | {} | {:.0} | {:.0} | {:.2}x |",
                r.codec,
                fmt(mibs(r.codec)),
                ratio(mibs(r.codec), mibs(ceiling)),
                r.write_mibs,
                r.on_disk as f64 / (1 << 20) as f64,
                r.logical as f64 / r.on_disk.max(1) as f64
            );
        }
    }
}
