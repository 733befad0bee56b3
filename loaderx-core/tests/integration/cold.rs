//! Cold reads: a batch from a store evicted from the page cache asks for exactly its pages
//! (`StoreOptions::cold_reads`), in every read path, and reads the right records. Linux only:
//! eviction and page counts are Linux calls.
#![cfg(target_os = "linux")]

use std::path::Path;

use loaderx_core::pagecache::{evict, resident_pages};
use loaderx_core::{
    Codec, DataLoader, DatasetWriter, DenseSource, Format, RaggedSource, SamplerMode, Store, StoreOptions,
    WriteOptions,
};

const REC: usize = 64;
const N: u64 = 100_000;

/// Record `i`: `REC` bytes that name it.
fn record(i: u64) -> Vec<u8> {
    (0..REC).map(|j| (i.wrapping_mul(0x9E37_79B9) >> (j % 4 * 8)) as u8 ^ j as u8).collect()
}

/// A dense dataset of `N` records of `REC` bytes (6.4 MB), raw, in `format`.
fn dense(dir: &Path, format: Format, codec: Codec) -> std::path::PathBuf {
    let path = dir.join(format!("d-{format:?}-{codec:?}"));
    let opts = WriteOptions::new().format(format).codec(codec);
    let mut w = DatasetWriter::dense::<u8>(&path, vec![REC], opts).unwrap();
    let all: Vec<u8> = (0..N).flat_map(record).collect();
    w.append(&all).unwrap();
    w.finish().unwrap();
    path
}

/// 64 random sorted indices, spread over the store.
fn batch(seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    let mut b: Vec<u32> = (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % N) as u32
        })
        .collect();
    b.sort_unstable();
    b.dedup();
    b
}

/// Evicts `path` and checks that eviction works here (it does on a disk file system, not on
/// tmpfs): the premise of every test below.
fn evicted(path: &Path) {
    evict(path).unwrap();
    let c = resident_pages(path).unwrap();
    assert!(
        c.resident * 20 < c.total,
        "eviction left {} of {} pages of {}",
        c.resident,
        c.total,
        path.display()
    );
}

fn expected(indices: &[u32]) -> Vec<u8> {
    indices.iter().flat_map(|&i| record(u64::from(i))).collect()
}

/// Pages resident after one fixed-stride gather of `indices` from the evicted dataset `path`.
fn pages_after_gather(path: &Path, opts: StoreOptions, indices: &[u32]) -> u64 {
    evicted(path);
    let store = std::sync::Arc::new(Store::open_with(path, opts).unwrap());
    let src = DenseSource::new(store, DenseSource::open(path).unwrap().schema().clone()).unwrap();
    let mut out = vec![0u8; indices.len() * REC];
    src.gather_bytes(indices, &mut out).unwrap();
    assert_eq!(out, expected(indices));
    resident_pages(path).unwrap().resident
}

#[test]
fn a_cold_batch_reads_its_pages_and_not_their_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    for format in [Format::V1, Format::V2] {
        let path = dense(dir.path(), format, Codec::Raw);
        let b = batch(7);
        // Each record's page and its index entry's page, and a few of the store's own files
        // (schema, header): at most 2 pages per record and 16 more.
        let advised = pages_after_gather(&path, StoreOptions::new(), &b);
        assert!(advised <= 2 * b.len() as u64 + 16, "{format:?}: {advised} pages for {} records", b.len());
        // Faulted in one at a time, each fault brings its neighbours in too (readahead).
        let faulted = pages_after_gather(&path, StoreOptions::new().cold_reads(false), &b);
        assert!(
            faulted > 2 * advised,
            "{format:?}: readahead brought only {faulted} pages (advised: {advised})"
        );
    }
}

#[test]
fn every_read_path_of_a_cold_store_reads_the_right_records() {
    let dir = tempfile::tempdir().unwrap();
    for (format, codec) in [(Format::V2, Codec::Raw), (Format::V2, Codec::Lz4), (Format::V1, Codec::Zstd)] {
        let path = dense(dir.path(), format, codec);
        let b = batch(11);
        evicted(&path);
        let store = Store::open(&path).unwrap();
        let got = store.gather(&b).unwrap();
        assert_eq!(got.concat(), expected(&b), "{format:?} {codec:?}: gather");
        // Pages a live handle has mapped cannot be evicted: each read path on a fresh handle.
        drop(store);
        evicted(&path);
        let store = Store::open(&path).unwrap();
        let lens = store.map_records(&b, |_, r| Ok::<_, loaderx_core::Error>(r.to_vec())).unwrap();
        assert_eq!(lens.concat(), expected(&b), "{format:?} {codec:?}: map_records");
        drop(store);
        evicted(&path);
        let store = Store::open(&path).unwrap();
        let mut out = vec![0u8; b.len() * REC];
        store.gather_into(&b, &mut out).unwrap();
        assert_eq!(out, expected(&b), "{format:?} {codec:?}: gather_into");
    }
}

#[test]
fn a_ragged_batch_of_a_cold_store_reads_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r");
    let mut w = DatasetWriter::ragged::<u8>(&path, vec![], WriteOptions::new().codec(Codec::Raw)).unwrap();
    for i in 0..N {
        w.append_record(&record(i)[..(i % REC as u64) as usize + 1]).unwrap();
    }
    w.finish().unwrap();
    let b = batch(5);
    evicted(&path);
    let src = RaggedSource::open(&path).unwrap();
    let got = src.get_batch(&b).unwrap();
    for (k, &i) in b.iter().enumerate() {
        let want = &record(u64::from(i))[..(u64::from(i) % REC as u64) as usize + 1];
        assert_eq!(got.record::<u8>(k).unwrap(), want, "row {k} (record {i})");
    }
    let pages = resident_pages(&path).unwrap().resident;
    assert!(pages <= 2 * b.len() as u64 + 16, "{pages} pages for {} records", b.len());
}

#[test]
fn a_loader_over_a_cold_store_hints_its_steps_and_delivers_them_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dense(dir.path(), Format::V2, Codec::Raw);
    evicted(&path);
    let mut loader = DataLoader::builder()
        .stream("x", DenseSource::open(&path).unwrap())
        .batch_size(64)
        .mode(SamplerMode::Iid)
        .seed(3)
        .threads(2)
        .prefetch(4)
        .build()
        .unwrap();
    for _ in 0..40 {
        let b = loader.next_batch().unwrap().unwrap();
        assert_eq!(b.get("x").unwrap().as_bytes(), expected(b.indices()), "step {}", b.step());
    }
    drop(loader);
    // 40 steps delivered, at most 2 * 4 + 1 gathered ahead, and the hints a window past those:
    // the steps' pages (2 per record), not the file.
    let pages = resident_pages(&path).unwrap();
    assert!(pages.resident <= 2 * 64 * (40 + 2 * 10) + 16, "{} of {} pages", pages.resident, pages.total);
}
