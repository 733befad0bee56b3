//! JSONL → store: the planned, parallel converter against single-threaded line splitting.
//!
//! A 256 MiB JSONL file (`LOADERX_BENCH_JSONL_MIB` overrides) of lines of 100..2,000 bytes. Both
//! contenders write the same ragged u8 dataset with the same codec; they alternate, 3 runs each,
//! and the medians are compared:
//! - `loaderx`: `convert::jsonl` (mapped input, record-aligned ranges, parallel line splitting,
//!   records appended straight from the mapping);
//! - `single-threaded`: `BufRead::split(b'\n')` on one thread, each line appended through
//!   `DatasetWriter::append_bytes`.
//!
//! `cargo bench --bench jsonl`

use std::io::{BufRead, BufReader, Write};
use std::time::Instant;

use loaderx::{Codec, DatasetWriter, WriteOptions, convert};

fn main() {
    let mib: usize =
        std::env::var("LOADERX_BENCH_JSONL_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    let dir = tempfile::tempdir_in(
        std::env::var_os("LOADERX_BENCH_DIR").map_or_else(std::env::temp_dir, std::path::PathBuf::from),
    )
    .unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = 0u64;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        let (mut x, mut written) = (0x2545_F491u64, 0usize);
        while written < mib << 20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 100 + (x % 1900) as usize;
            let line = format!("{{\"id\":{lines},\"text\":\"{}\"}}\n", "lorem ipsum ".repeat(len / 12));
            f.write_all(line.as_bytes()).unwrap();
            written += line.len();
            lines += 1;
        }
    }
    let bytes = std::fs::metadata(&input).unwrap().len() as f64;
    println!("JSONL → ragged u8 store, {:.0} MiB, {lines} lines", bytes / (1 << 20) as f64);
    println!("| codec | contender | median time | MiB/s | speed vs single-threaded |");
    println!("| --- | --- | ---: | ---: | ---: |");
    for codec in [Codec::Raw, Codec::Zstd] {
        let opts = || WriteOptions::new().codec(codec).overwrite(true);
        let mut ours = Vec::new();
        let mut base = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let s = convert::jsonl(&[&input], dir.path().join("a"), opts()).unwrap();
            ours.push(t.elapsed().as_secs_f64());
            assert_eq!(s.records, lines);

            let t = Instant::now();
            let mut w = DatasetWriter::ragged::<u8>(dir.path().join("b"), vec![], opts()).unwrap();
            for line in BufReader::with_capacity(1 << 20, std::fs::File::open(&input).unwrap()).split(b'\n') {
                w.append_bytes(&[line.unwrap()]).unwrap();
            }
            assert_eq!(w.finish().unwrap(), lines);
            base.push(t.elapsed().as_secs_f64());
        }
        ours.sort_by(f64::total_cmp);
        base.sort_by(f64::total_cmp);
        for (name, t) in [("single-threaded split", base[1]), ("loaderx convert jsonl", ours[1])] {
            println!(
                "| {codec} | {name} | {:.2} s | {:.0} | {:.2}x |",
                t,
                bytes / (1 << 20) as f64 / t,
                base[1] / t
            );
        }
    }
}
