//! Record-aligned planning of a 1 GiB JSONL-like file versus a full `memchr` scan of the same
//! mapped bytes.
//!
//! The file is generated once into a temp dir (lines of 100..2000 bytes: an odd first line,
//! then a 4 MiB block of lines written 256 times, each copy rotated to start at a different
//! line), mapped once, and removed at the end. Planning probes forward from
//! each ideal cut only, so its cost grows with the number of parts, not the file size; the
//! full scan counting every newline is the floor of any approach that reads the file.
//!
//! Run: `cargo bench --bench framing -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use loaderx::framing::{MappedFile, partition};

const FILE_BYTES: usize = 1 << 30;
const PATTERN_BYTES: usize = 4 << 20;
const PARTS: [usize; 3] = [8, 64, 1024];

/// A 4 MiB block of JSON-ish lines of 100..2000 bytes, ending with a newline.
fn pattern() -> Vec<u8> {
    let mut out = Vec::with_capacity(PATTERN_BYTES);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut id = 0u64;
    while out.len() < PATTERN_BYTES {
        // xorshift: deterministic, no dependency on rand's algorithm choices.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let line_len = 100 + (state % 1901) as usize;
        let head = format!("{{\"id\":{id},\"text\":\"");
        let room = line_len.saturating_sub(head.len() + 3).min(PATTERN_BYTES);
        out.extend_from_slice(head.as_bytes());
        out.extend((0..room).map(|k| b'a' + ((k as u64 + state) % 26) as u8));
        out.extend_from_slice(b"\"}\n");
        id += 1;
    }
    // Trim to a whole number of lines no longer than the block size.
    let cut = out[..PATTERN_BYTES.min(out.len())].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    out.truncate(cut);
    out
}

fn median_of(mut f: impl FnMut(), runs: usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.jsonl");
    let block = pattern();
    let t = Instant::now();
    {
        // Neither a prefix-free nor a periodic file: ideal cuts at multiples of len/parts would
        // otherwise land exactly on block (= line) starts and never search. An odd first line
        // shifts every cut, and each block copy starts at a different line.
        let starts: Vec<usize> = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', &block).map(|p| p + 1))
            .filter(|&p| p < block.len())
            .collect();
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        let mut prefix = vec![b'p'; 1233];
        prefix.push(b'\n');
        file.write_all(&prefix).expect("write");
        let mut written = prefix.len();
        let mut copy = 0usize;
        while written + block.len() <= FILE_BYTES + prefix.len() {
            let rotate = starts[(copy * 97) % starts.len()];
            file.write_all(&block[rotate..]).expect("write");
            file.write_all(&block[..rotate]).expect("write");
            written += block.len();
            copy += 1;
        }
        file.flush().expect("flush");
    }
    let map = MappedFile::open(&path).expect("map");
    let data = map.bytes();
    eprintln!(
        "generated {} bytes ({} lines per block) in {:.2?}",
        data.len(),
        memchr::memchr_iter(b'\n', &block).count(),
        t.elapsed()
    );

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("framing_1GiB");
        g.throughput(Throughput::Bytes(data.len() as u64));
        for parts in PARTS {
            g.bench_function(format!("plan_{parts}_parts"), |b| {
                b.iter(|| partition(black_box(data), parts, b'\n').expect("plan"))
            });
        }
        g.sample_size(10);
        g.bench_function("full_memchr_scan", |b| {
            b.iter(|| memchr::memchr_iter(b'\n', black_box(data)).count())
        });
        g.finish();
    }
    c.final_summary();

    // Side-by-side ratios from the same process and mapping (medians of a few runs).
    let scan = median_of(
        || {
            black_box(memchr::memchr_iter(b'\n', data).count());
        },
        7,
    );
    let scan_gbs = data.len() as f64 / scan.as_secs_f64() / 1e9;
    println!("\n| case | median | vs full scan |");
    println!("|---|---:|---:|");
    println!("| full memchr scan (count newlines) | {scan:.2?} ({scan_gbs:.1} GB/s) | 1x |");
    for parts in PARTS {
        let plan = median_of(|| drop(black_box(partition(data, parts, b'\n').expect("plan"))), 101);
        let ranges = partition(data, parts, b'\n').expect("plan").len();
        println!(
            "| plan {parts} parts ({ranges} ranges) | {plan:.2?} | {:.0}x faster |",
            scan.as_secs_f64() / plan.as_secs_f64()
        );
    }
    drop(map);
    dir.close().expect("remove the 1 GiB file");
}
