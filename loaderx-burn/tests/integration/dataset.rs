//! The `Dataset` implementations against burn's contract and burn's own loader.

use std::sync::Arc;

use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::{Dataset, InMemDataset};
use loaderx_burn::{DenseItems, Error, MnistItems, Zip};
use loaderx_core::{DatasetWriter, WriteOptions};

use crate::common::{Items, device, mnist_train, write_xy};

#[test]
fn get_many_is_get_for_every_index_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let (x, _) = write_xy(dir.path(), 100);
    let items = DenseItems::<f32>::open(&x).unwrap();
    let order = vec![99, 0, 17, 17, 50, 3];
    let many = items.get_many(order.clone()).unwrap();
    let one: Vec<Vec<f32>> = order.iter().map(|&i| items.get(i).unwrap()).collect();
    assert_eq!(many, one);
    assert_eq!(many[0], vec![99.0, 99.5, -99.0]);
}

#[test]
fn burn_loader_over_dense_items_yields_the_same_items_as_over_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (x, _) = write_xy(dir.path(), 103);
    let ours = DenseItems::<f32>::open(&x).unwrap();
    let reference = InMemDataset::new((0..103).map(|i| ours.get(i).unwrap()).collect::<Vec<_>>());
    let collect = |loader: Arc<dyn DataLoader<Vec<Vec<f32>>>>| -> Vec<Vec<f32>> {
        loader.iter().flat_map(|b| b.unwrap()).collect()
    };
    let a = collect(DataLoaderBuilder::new(Items).batch_size(10).set_device(device()).build(ours));
    let b = collect(DataLoaderBuilder::new(Items).batch_size(10).set_device(device()).build(reference));
    assert_eq!(a.len(), 103);
    assert_eq!(a, b);
    // Two burn worker threads: the same multiset of items.
    let ours = DenseItems::<f32>::open(&x).unwrap();
    let mut c = collect(DataLoaderBuilder::new(Items).batch_size(10).num_workers(2).build(ours));
    let mut a = a;
    let key = |v: &Vec<f32>| v[0] as u32;
    c.sort_by_key(key);
    a.sort_by_key(key);
    assert_eq!(a, c);
}

#[test]
#[should_panic(expected = "Index out of bounds")]
fn out_of_range_get_panics_as_burn_datasets_do() {
    let dir = tempfile::tempdir().unwrap();
    let (x, _) = write_xy(dir.path(), 5);
    let _ = DenseItems::<f32>::open(&x).unwrap().get(5);
}

#[test]
#[should_panic(expected = "Index out of bounds")]
fn out_of_range_get_many_panics_as_burn_datasets_do() {
    let dir = tempfile::tempdir().unwrap();
    let (x, _) = write_xy(dir.path(), 5);
    let _ = DenseItems::<f32>::open(&x).unwrap().get_many(vec![0, 7]);
}

#[test]
fn a_damaged_store_is_a_dataset_error_holding_the_loaderx_error() {
    let dir = tempfile::tempdir().unwrap();
    // Records that compress (64 equal floats), so each is a zstd frame with a checksum: a record
    // that does not shrink (the 12 bytes of `write_xy`) is stored raw, without one.
    let x = dir.path().join("x");
    let mut w = DatasetWriter::dense::<f32>(&x, vec![64], WriteOptions::new()).unwrap();
    w.append(&(0..50).flat_map(|i| [i as f32; 64]).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let items = DenseItems::<f32>::open(&x).unwrap();
    assert_eq!(items.get(49).unwrap(), vec![49.0; 64]);
    // Flip every stored byte: each frame now fails to decode.
    let chunk = x.join("0.zr");
    let bytes: Vec<u8> = std::fs::read(&chunk).unwrap().into_iter().map(|b| !b).collect();
    std::fs::write(&chunk, bytes).unwrap();
    let items = DenseItems::<f32>::open(&x).unwrap();
    let err = items.get_many(vec![0, 49]).unwrap_err();
    let inner = std::error::Error::source(&err).expect("the loaderx error inside");
    let ours = inner.downcast_ref::<Error>().expect("a loaderx_burn::Error");
    assert!(matches!(ours, Error::Core(_)), "{ours:?}");
    assert!(err.to_string().contains(&*x.to_string_lossy()), "the error names the store: {err}");
}

#[test]
fn mnist_items_match_the_raw_stores() {
    let (images, labels) = mnist_train();
    let items = MnistItems::open(images, labels).unwrap();
    assert_eq!(items.len(), 8000);
    let got = items.get_many(vec![0, 7999, 1234]).unwrap();
    let px = loaderx_core::DenseDataset::<u8>::open(images).unwrap().get_vec(&[7999]).unwrap();
    let lb = loaderx_core::DenseDataset::<u8>::open(labels).unwrap().get_vec(&[0, 7999, 1234]).unwrap();
    assert_eq!(got.iter().map(|m| m.label).collect::<Vec<_>>(), lb);
    assert_eq!(got[1].image.as_flattened().iter().map(|&p| p as u8).collect::<Vec<_>>(), px);
    assert!(got.iter().all(|m| m.label < 10));
    assert_eq!(items.get(1234).unwrap(), got[2]);
}

/// Issue 42, item 5: (x, y) items from two stores, through burn's own loader: every pair is the
/// record and its label, each exactly once; stores of different lengths are refused.
#[test]
fn a_zip_of_two_stores_is_a_burn_dataset_of_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = write_xy(dir.path(), 57);
    let xy = Zip::new(DenseItems::<f32>::open(&x).unwrap(), DenseItems::<u8>::open(&y).unwrap()).unwrap();
    assert_eq!(xy.len(), 57);
    let loader = DataLoaderBuilder::new(Items).batch_size(8).shuffle(3).set_device(device()).build(xy);
    let mut pairs: Vec<(Vec<f32>, Vec<u8>)> = loader.iter().flat_map(|b| b.unwrap()).collect();
    pairs.sort_by_key(|(x, _)| x[0] as u32);
    assert_eq!(pairs.len(), 57);
    for (i, (x, y)) in pairs.iter().enumerate() {
        assert_eq!((x.clone(), y.clone()), (vec![i as f32, i as f32 + 0.5, -(i as f32)], vec![i as u8]));
    }
    std::fs::create_dir(dir.path().join("short")).unwrap();
    let (short, _) = write_xy(&dir.path().join("short"), 56);
    let err =
        Zip::new(DenseItems::<f32>::open(&short).unwrap(), DenseItems::<u8>::open(&y).unwrap()).unwrap_err();
    assert!(matches!(&err, Error::Core(loaderx_core::Error::Config { what: "Zip", .. })), "{err}");
    assert!(err.to_string().contains("56 and 57"), "{err}");
}
