//! Peak memory of the `.npy` converter on an input far larger than the budget.
//!
//! Writes a `.npy` of `GIB` GiB of little-endian f32 (rows of 1024 values, generated block by
//! block so the generator itself stays small), converts it with `raw` and then `zstd`, and prints
//! the peak resident set (`VmHWM` from `/proc/self/status`, reset before each phase through
//! `/proc/self/clear_refs`) of each phase. Linux only. The files are deleted at the end.
//!
//! ```text
//! cargo run -p loaderx --example convert_memory -- [GIB=3] [DIR=$TMPDIR]
//! ```
//!
//! Goal: at most 256 MiB per conversion, whatever the input size. Results: `BENCH_CONVERT.md`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use loaderx::{Codec, WriteOptions, convert};

const ROW: usize = 1024;

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets the peak RSS to the current RSS (Linux >= 4.0).
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let gib: f64 = args.next().map_or(Ok(3.0), |a| a.parse())?;
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let work = dir.join(format!("loaderx-convert-memory-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let input = work.join("big.npy");
    let rows = ((gib * (1u64 << 30) as f64) as usize) / (ROW * 4);

    reset_hwm();
    let t = Instant::now();
    {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&input)?);
        f.write_all(&loaderx::convert::NpyHeader::encode(loaderx::DType::F32, &[rows, ROW])?)?;
        let mut block = vec![0u8; 1024 * ROW * 4];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut done = 0;
        while done < rows {
            let k = 1024.min(rows - done);
            for (j, v) in block[..k * ROW * 4].chunks_exact_mut(4).enumerate() {
                // Smooth values with a little noise: compressible, not trivially.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let val = ((done * ROW + j) % 4096) as f32 * 0.25 + (x % 8) as f32;
                v.copy_from_slice(&val.to_le_bytes());
            }
            f.write_all(&block[..k * ROW * 4])?;
            done += k;
        }
        f.flush()?;
    }
    let size = std::fs::metadata(&input)?.len();
    println!(
        "generate: {rows} x {ROW} f32 = {:.2} GiB in {:.1}s, peak RSS {} MiB",
        size as f64 / (1u64 << 30) as f64,
        t.elapsed().as_secs_f64(),
        vm_hwm_kib() / 1024
    );

    for codec in [Codec::Raw, Codec::Zstd] {
        let out = work.join(format!("out_{codec}"));
        reset_hwm();
        let t = Instant::now();
        let s = convert::npy(&input, &out, WriteOptions::new().codec(codec))?;
        let secs = t.elapsed().as_secs_f64();
        println!(
            "convert --codec {codec}: {} records, {:.2} GiB in, {:.2} GiB on disk, {:.1}s ({:.0} MiB/s), peak RSS {} MiB",
            s.records,
            s.bytes_in as f64 / (1u64 << 30) as f64,
            s.bytes_on_disk as f64 / (1u64 << 30) as f64,
            secs,
            s.bytes_in as f64 / secs / (1u64 << 20) as f64,
            vm_hwm_kib() / 1024
        );
        std::fs::remove_dir_all(&out)?;
    }
    std::fs::remove_dir_all(&work)?;
    Ok(())
}
