//! Quick start: convert the bundled MNIST digits into stores, then read shuffled, aligned batches
//! from the endless loader.
//!
//! ```text
//! cargo run --release --example quickstart [MNIST_DIR] [STORE_DIR]
//! ```
//! `MNIST_DIR` defaults to `data/mnist-10k` (any directory holding the standard IDX files works,
//! including the full 60,000/10,000 MNIST); `STORE_DIR` defaults to `target/mnist-stores`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use loaderx::{Codec, DataLoader, SamplerMode, WriteOptions, convert};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mnist = PathBuf::from(args.next().unwrap_or_else(|| "data/mnist-10k".into()));
    let stores = PathBuf::from(args.next().unwrap_or_else(|| "target/mnist-stores".into()));

    for (file, name, codec) in [
        ("train-images-idx3-ubyte", "train-images", Codec::ZstdDict),
        ("train-labels-idx1-ubyte", "train-labels", Codec::Raw),
    ] {
        let out = stores.join(name);
        if !out.exists() {
            let input = find(&mnist, file)?;
            let t = Instant::now();
            let s = convert::idx(&input, &out, WriteOptions::new().codec(codec))?;
            println!(
                "converted {} -> {}: {} records, {:.2}x smaller, {:.2?}",
                input.display(),
                out.display(),
                s.records,
                s.ratio(),
                t.elapsed()
            );
        }
    }

    let mut loader = DataLoader::builder()
        .open_stream("image", stores.join("train-images"))
        .open_stream("label", stores.join("train-labels"))
        .batch_size(256)
        .mode(SamplerMode::Cyclic)
        .seed(42)
        .build()?;
    let t = Instant::now();
    let mut counts = [0u64; 10];
    let steps = 256;
    for _ in 0..steps {
        let batch = loader.next_batch()?.expect("an endless loader");
        for &l in batch.get("label").expect("label stream").as_slice::<u8>()? {
            counts[usize::from(l)] += 1;
        }
    }
    let batch = loader.next_batch()?.expect("an endless loader");
    println!(
        "image batch {:?} {}",
        batch.get("image").expect("image").shape(),
        batch.get("image").expect("image").dtype()
    );
    println!(
        "label batch {:?} {}",
        batch.get("label").expect("label").shape(),
        batch.get("label").expect("label").dtype()
    );
    println!("{steps} batches in {:.2?}; labels seen per digit: {counts:?}", t.elapsed());
    println!("resume from: {:?}", loader.state());
    Ok(())
}

/// `dir/name` or `dir/name.gz`.
fn find(dir: &Path, name: &str) -> Result<PathBuf, String> {
    [dir.join(name), dir.join(format!("{name}.gz"))]
        .into_iter()
        .find(|p| p.exists())
        .ok_or_else(|| format!("no {name}[.gz] in {}", dir.display()))
}
