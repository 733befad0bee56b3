//! loaderx vs burn's own data path, side by side in one process on the same MNIST data.
//!
//! - loader: loaderx's native `StepLoader` (whole-batch gather + one normalisation pass on the
//!   prefetch threads, 2 threads, prefetch 4) over zstd and over raw stores vs burn's `DataLoaderBuilder`
//!   over an `InMemDataset` (2 workers, the guide's item-by-item batcher), all producing the
//!   guide's `MnistBatch` of 64 on the CPU.
//! - get_many: `ItemStore::get_many` (zstd and raw) vs `SqliteDataset::get_many`, 64 random MNIST
//!   items per call, all MessagePack records of burn's `MnistItem` layout, plus the ceiling any
//!   store of that encoding shares: decoding the same MessagePack bytes from memory, in parallel,
//!   with rmp-serde (what `SqliteDataset` uses) and with `loaderx::msgpack` (what `ItemStore` uses).
//!   `SqliteDataset` only with `burn-sqlite` (turso_core: a 10-minute release build here).
//!
//! Run: `cargo bench --bench burn --features burn-train,burn-sqlite -- --warm-up-time 1 --measurement-time 3`
//! (loader rows only: `--features burn-train`)
//! After criterion's rows it prints the ratios, timed again side by side.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use loaderx::burn::burn;
use loaderx::burn::{
    ItemStore, MnistBatch, MnistBatcher, MnistItem, MnistItems, StepLoader, StepLoaderBuilder,
};
use loaderx::{Codec, SamplerMode, WriteOptions};

use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::{Dataset, InMemDataset};
#[cfg(feature = "burn-sqlite")]
use burn::data::dataset::{SqliteDataset, SqliteDatasetWriter};
use burn::tensor::Device;

const BATCH: usize = 64;

struct Fixture {
    _dir: tempfile::TempDir,
    /// (images, labels) stores with the default codec (zstd) and stored raw.
    zstd: (std::path::PathBuf, std::path::PathBuf),
    raw: (std::path::PathBuf, std::path::PathBuf),
    items: Vec<MnistItem>,
    item_store: ItemStore<MnistItem>,
    item_store_raw: ItemStore<MnistItem>,
    /// Every item's MessagePack encoding, in memory: the decode-only ceiling of `get_many`.
    encoded: Vec<Vec<u8>>,
    #[cfg(feature = "burn-sqlite")]
    sqlite: SqliteDataset<MnistItem>,
    picks: Vec<Vec<usize>>,
}

fn fixture() -> Fixture {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist-10k");
    let dir = tempfile::tempdir().unwrap();
    let convert = |name: &str, codec: Codec| {
        let (images, labels) =
            (dir.path().join(format!("images-{name}")), dir.path().join(format!("labels-{name}")));
        let opts = || WriteOptions::new().codec(codec);
        loaderx::convert::idx(data.join("train-images-idx3-ubyte.gz"), &images, opts()).unwrap();
        loaderx::convert::idx(data.join("train-labels-idx1-ubyte.gz"), &labels, opts()).unwrap();
        (images, labels)
    };
    let (zstd, raw) = (convert("zstd", Codec::Zstd), convert("raw", Codec::Raw));
    let mnist = MnistItems::open(&zstd.0, &zstd.1).unwrap();
    let items = mnist.get_many((0..mnist.len()).collect()).unwrap();
    let item_store = ItemStore::from_dataset(&mnist, dir.path().join("items"), WriteOptions::new()).unwrap();
    let item_store_raw =
        ItemStore::from_dataset(&mnist, dir.path().join("items-raw"), WriteOptions::new().codec(Codec::Raw))
            .unwrap();
    let encoded = items.iter().map(|item| rmp_serde::to_vec(item).unwrap()).collect();
    #[cfg(feature = "burn-sqlite")]
    let sqlite = {
        let db = dir.path().join("mnist.db");
        let mut writer = SqliteDatasetWriter::<MnistItem>::new(&db, true).unwrap();
        for item in &items {
            writer.write("train", item).unwrap();
        }
        writer.set_completed().unwrap();
        SqliteDataset::<MnistItem>::from_db_file(&db, "train").unwrap()
    };
    // Fixed pseudo-random batches (an LCG): the same indices for both stores.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let picks = (0..64)
        .map(|_| {
            (0..BATCH)
                .map(|_| {
                    state =
                        state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    ((state >> 33) % items.len() as u64) as usize
                })
                .collect()
        })
        .collect();
    Fixture {
        _dir: dir,
        zstd,
        raw,
        items,
        item_store,
        item_store_raw,
        encoded,
        #[cfg(feature = "burn-sqlite")]
        sqlite,
        picks,
    }
}

fn loaderx_loader(
    stores: &(std::path::PathBuf, std::path::PathBuf),
    device: &Device,
) -> StepLoader<MnistBatch> {
    StepLoaderBuilder::new()
        .mnist(&stores.0, &stores.1)
        .batch_size(BATCH)
        .mode(SamplerMode::Cyclic)
        .seed(42)
        .threads(2)
        // Four batches ready ahead per thread (the default is two): a 64-digit batch takes ~15 µs,
        // so a deeper window absorbs the consumer's wake-ups (burn's workers queue without bound).
        .prefetch(4)
        .set_device(device.clone())
        .build_mnist()
        .unwrap()
}

fn burn_loader(f: &Fixture, device: &Device) -> std::sync::Arc<dyn DataLoader<MnistBatch>> {
    DataLoaderBuilder::new(MnistBatcher)
        .batch_size(BATCH)
        .shuffle(42)
        .num_workers(2)
        .set_device(device.clone())
        .build(InMemDataset::new(f.items.clone()))
}

/// Batches of one epoch; returns how many.
fn epoch(loader: &dyn DataLoader<MnistBatch>) -> usize {
    let mut n = 0;
    for batch in loader.iter() {
        black_box(batch.unwrap());
        n += 1;
    }
    n
}

fn rate(mut f: impl FnMut() -> usize, budget: Duration) -> f64 {
    f(); // warm
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < budget {
        n += f();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Decodes the MessagePack items at `picks` from memory with `decode`, in parallel: what a store
/// of these records decoding them that way cannot beat (rmp-serde: `SqliteDataset`;
/// `loaderx::msgpack`: `ItemStore`).
fn decode_only(decode: fn(&[u8]) -> MnistItem, encoded: &[Vec<u8>], picks: &[usize]) -> Vec<MnistItem> {
    use rayon::prelude::*;
    picks.par_iter().map(|&i| decode(&encoded[i])).collect()
}

fn rmp(bytes: &[u8]) -> MnistItem {
    rmp_serde::from_slice(bytes).unwrap()
}

fn fast(bytes: &[u8]) -> MnistItem {
    loaderx::burn::msgpack::from_slice(bytes).unwrap()
}

fn main() {
    let f = fixture();
    let device = Device::flex();
    let ours = loaderx_loader(&f.zstd, &device);
    let ours_raw = loaderx_loader(&f.raw, &device);
    let theirs = burn_loader(&f, &device);
    let steps = ours.steps_per_epoch();

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("mnist_loader_epoch");
        g.throughput(Throughput::Elements(steps));
        g.sample_size(10);
        g.bench_function("loaderx_step_loader_zstd", |b| b.iter(|| epoch(&ours)));
        g.bench_function("loaderx_step_loader_raw", |b| b.iter(|| epoch(&ours_raw)));
        g.bench_function("burn_dataloader_inmem_2workers", |b| b.iter(|| epoch(theirs.as_ref())));
        g.finish();
    }
    let mut k = 0;
    let mut next = || {
        k = (k + 1) % f.picks.len();
        f.picks[k].clone()
    };
    {
        let mut g = c.benchmark_group("get_many_64_mnist_items");
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function("rmp_serde_decode_only", |b| {
            b.iter(|| black_box(decode_only(rmp, &f.encoded, &next())))
        });
        g.bench_function("loaderx_msgpack_decode_only", |b| {
            b.iter(|| black_box(decode_only(fast, &f.encoded, &next())))
        });
        g.bench_function("loaderx_item_store_zstd", |b| {
            b.iter(|| black_box(f.item_store.get_many(next()).unwrap()))
        });
        g.bench_function("loaderx_item_store_raw", |b| {
            b.iter(|| black_box(f.item_store_raw.get_many(next()).unwrap()))
        });
        #[cfg(feature = "burn-sqlite")]
        g.bench_function("burn_sqlite_dataset", |b| b.iter(|| black_box(f.sqlite.get_many(next()).unwrap())));
        g.finish();
    }
    c.final_summary();

    // Ratios, timed side by side: per round each contender runs for `slot`; the ratio is taken
    // per round and the median over rounds reported.
    let (rounds, slot) = (7, Duration::from_millis(600));
    let mut loader_rows: Vec<(&str, Vec<f64>)> = vec![
        ("loaderx StepLoader, zstd stores", vec![]),
        ("loaderx StepLoader, raw stores", vec![]),
        ("burn DataLoader, InMemDataset, 2 workers", vec![]),
    ];
    let mut get_rows: Vec<(&str, Vec<f64>)> = vec![
        ("rmp-serde decode only (no store)", vec![]),
        ("loaderx msgpack decode only (no store)", vec![]),
        ("loaderx ItemStore, zstd", vec![]),
        ("loaderx ItemStore, raw", vec![]),
        #[cfg(feature = "burn-sqlite")]
        ("burn SqliteDataset", vec![]),
    ];
    for _ in 0..rounds {
        loader_rows[0].1.push(rate(|| epoch(&ours), slot));
        loader_rows[1].1.push(rate(|| epoch(&ours_raw), slot));
        loader_rows[2].1.push(rate(|| epoch(theirs.as_ref()), slot));
        get_rows[0].1.push(rate(|| decode_only(rmp, &f.encoded, &next()).len(), slot));
        get_rows[1].1.push(rate(|| decode_only(fast, &f.encoded, &next()).len(), slot));
        get_rows[2].1.push(rate(|| f.item_store.get_many(next()).unwrap().len(), slot));
        get_rows[3].1.push(rate(|| f.item_store_raw.get_many(next()).unwrap().len(), slot));
        #[cfg(feature = "burn-sqlite")]
        get_rows[4].1.push(rate(|| f.sqlite.get_many(next()).unwrap().len(), slot));
    }
    println!(
        "\n== side by side (batch {BATCH}, {} MNIST train digits, Flex CPU device; median of {rounds} interleaved rounds) ==",
        f.items.len()
    );
    report("loader", "batches/s", &loader_rows, 2);
    report("get_many", "items/s", &get_rows, get_rows.len() - 1);
}

/// Prints each row's median rate and its median per-round ratio to row `base`.
fn report(layer: &str, unit: &str, rows: &[(&str, Vec<f64>)], base: usize) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (name, rates) in rows {
        let ratio = median(rates.iter().zip(&rows[base].1).map(|(a, b)| a / b).collect());
        println!(
            "{layer:<9} {name:<42} {:>10.0} {unit}  {ratio:>6.2}x {}",
            median(rates.clone()),
            rows[base].0
        );
    }
}
