//! loaderx vs burn's own data path, side by side in one process on the same MNIST data.
//!
//! - loader: loaderx's native `StepLoader` (whole-batch gather + one normalisation pass on the
//!   prefetch threads) vs burn's `DataLoaderBuilder` over an `InMemDataset` (2 workers, the
//!   guide's item-by-item batcher), both producing the guide's `MnistBatch` of 64 on the CPU.
//! - get_many: `ItemStore::get_many` vs `SqliteDataset::get_many`, 64 random MNIST items per
//!   call, both MessagePack records of burn's `MnistItem` layout. Only with `burn-sqlite`, whose
//!   turso_core is a long release build; without it the ItemStore row runs alone.
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
use loaderx::{SamplerMode, WriteOptions};

use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::{Dataset, InMemDataset};
#[cfg(feature = "burn-sqlite")]
use burn::data::dataset::{SqliteDataset, SqliteDatasetWriter};
use burn::tensor::Device;

const BATCH: usize = 64;

struct Fixture {
    _dir: tempfile::TempDir,
    images: std::path::PathBuf,
    labels: std::path::PathBuf,
    items: Vec<MnistItem>,
    item_store: ItemStore<MnistItem>,
    #[cfg(feature = "burn-sqlite")]
    sqlite: SqliteDataset<MnistItem>,
    picks: Vec<Vec<usize>>,
}

fn fixture() -> Fixture {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist-10k");
    let dir = tempfile::tempdir().unwrap();
    let (images, labels) = (dir.path().join("images"), dir.path().join("labels"));
    loaderx::convert::idx(data.join("train-images-idx3-ubyte.gz"), &images, WriteOptions::new()).unwrap();
    loaderx::convert::idx(data.join("train-labels-idx1-ubyte.gz"), &labels, WriteOptions::new()).unwrap();
    let mnist = MnistItems::open(&images, &labels).unwrap();
    let items = mnist.get_many((0..mnist.len()).collect()).unwrap();
    let item_store = ItemStore::from_dataset(&mnist, dir.path().join("items"), WriteOptions::new()).unwrap();
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
        images,
        labels,
        items,
        item_store,
        #[cfg(feature = "burn-sqlite")]
        sqlite,
        picks,
    }
}

fn loaderx_loader(f: &Fixture, device: &Device) -> StepLoader<MnistBatch> {
    StepLoaderBuilder::new()
        .mnist(&f.images, &f.labels)
        .unwrap()
        .batch_size(BATCH as u32)
        .mode(SamplerMode::Cyclic)
        .seed(42)
        .threads(2)
        .device(device)
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

fn main() {
    let f = fixture();
    let device = Device::flex();
    let ours = loaderx_loader(&f, &device);
    let theirs = burn_loader(&f, &device);
    let steps = ours.steps_per_epoch();

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("mnist_loader_epoch");
        g.throughput(Throughput::Elements(steps));
        g.sample_size(10);
        g.bench_function("loaderx_step_loader", |b| b.iter(|| epoch(&ours)));
        g.bench_function("burn_dataloader_inmem_2workers", |b| b.iter(|| epoch(theirs.as_ref())));
        g.finish();
    }
    {
        let mut g = c.benchmark_group("get_many_64_mnist_items");
        g.throughput(Throughput::Elements(BATCH as u64));
        let mut k = 0;
        g.bench_function("loaderx_item_store", |b| {
            b.iter(|| {
                k = (k + 1) % f.picks.len();
                black_box(f.item_store.get_many(f.picks[k].clone()).unwrap())
            })
        });
        #[cfg(feature = "burn-sqlite")]
        g.bench_function("burn_sqlite_dataset", |b| {
            b.iter(|| {
                k = (k + 1) % f.picks.len();
                black_box(f.sqlite.get_many(f.picks[k].clone()).unwrap())
            })
        });
        g.finish();
    }
    c.final_summary();

    // Ratios, timed side by side.
    let budget = Duration::from_secs(3);
    let ours_bps = rate(|| epoch(&ours), budget);
    let theirs_bps = rate(|| epoch(theirs.as_ref()), budget);
    let mut k = 0;
    let store_ips = rate(
        || {
            k = (k + 1) % f.picks.len();
            black_box(f.item_store.get_many(f.picks[k].clone()).unwrap()).len()
        },
        budget,
    );
    #[cfg(feature = "burn-sqlite")]
    let sqlite_ips = rate(
        || {
            k = (k + 1) % f.picks.len();
            black_box(f.sqlite.get_many(f.picks[k].clone()).unwrap()).len()
        },
        budget,
    );
    println!("\n== side by side (batch {BATCH}, {} MNIST train digits, Flex CPU device) ==", f.items.len());
    println!("loader    loaderx StepLoader          {ours_bps:>10.0} batches/s");
    println!("loader    burn DataLoader (2 workers) {theirs_bps:>10.0} batches/s");
    println!("loader    ratio                       {:>10.1}x", ours_bps / theirs_bps);
    println!("get_many  loaderx ItemStore           {store_ips:>10.0} items/s");
    #[cfg(feature = "burn-sqlite")]
    {
        println!("get_many  burn SqliteDataset          {sqlite_ips:>10.0} items/s");
        println!("get_many  ratio                       {:>10.1}x", store_ips / sqlite_ips);
    }
}
