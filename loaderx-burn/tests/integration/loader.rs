//! `StepLoader` against burn's `DataLoader` contract: progress, epochs, to_device, slice, resume.

use std::collections::BTreeSet;

use burn::data::dataloader::DataLoader;
use burn::tensor::{DType, Int, Tensor, TensorData};
use loaderx_burn::{
    DenseBatch, DenseItems, MnistBatch, MnistBatcher, MnistItems, StepLoader, StepLoaderBuilder,
};
use loaderx_core::{SamplerConfig, SamplerMode};

use crate::common::{Items, device, mnist_train, write_xy};

fn dense(n: usize, batch: usize) -> (tempfile::TempDir, StepLoaderBuilder) {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = write_xy(dir.path(), n);
    let b = StepLoaderBuilder::new()
        .open_stream("x", x)
        .open_stream("y", y)
        .batch_size(batch)
        .seed(3)
        .threads(3)
        .set_device(device());
    (dir, b)
}

fn steps<O: Send + 'static>(loader: &dyn DataLoader<O>, f: impl Fn(&O) -> u64) -> Vec<u64> {
    loader.iter().map(|b| f(&b.unwrap())).collect()
}

#[test]
fn progress_counts_items_and_reaches_items_total() {
    let (_d, b) = dense(100, 8);
    let loader = b.build().unwrap();
    assert_eq!(loader.steps_per_epoch(), 12); // cyclic: 100 / 8, remainder dropped
    assert_eq!(loader.num_items(), 96);
    let mut it = loader.iter();
    let mut seen = Vec::new();
    while let Some(batch) = it.next() {
        assert_eq!(batch.unwrap().len(), 8);
        let p = it.progress();
        assert_eq!(p.items_total, loader.num_items());
        seen.push(p.items_processed);
    }
    assert_eq!(seen, (1..=12).map(|s| s * 8).collect::<Vec<_>>());
    assert!(it.progress().is_completed());
}

#[test]
fn the_global_step_goes_on_across_epochs_and_follows_the_sampler() {
    let (_d, b) = dense(100, 8);
    let loader = b.clone().steps_per_epoch(5).build().unwrap();
    let e0 = steps(&loader, |b: &DenseBatch| b.step());
    let e1 = steps(&loader, |b: &DenseBatch| b.step());
    assert_eq!(e0, (0..5).collect::<Vec<_>>());
    assert_eq!(e1, (5..10).collect::<Vec<_>>());
    assert_eq!(loader.state().step, 10);
    // Rows are the sampler's indices for that step, and the data is the record's.
    let sampler =
        SamplerConfig { len: 100, batch_size: 8, mode: SamplerMode::Cyclic, seed: 3, rank: 0, world: 1 }
            .build()
            .unwrap();
    let mut it = loader.iter();
    let mut batch = it.next().unwrap().unwrap();
    assert_eq!(batch.step(), 10);
    assert_eq!(batch.indices(), sampler.batch(10).as_slice());
    let x = batch.take("x").unwrap();
    let x = x.as_slice::<f32>().unwrap();
    for (k, &i) in sampler.batch(10).iter().enumerate() {
        assert_eq!(&x[3 * k..3 * k + 3], &[i as f32, i as f32 + 0.5, -(i as f32)]);
    }
}

#[test]
fn an_interrupted_epoch_resumes_where_it_stopped() {
    let (_d, b) = dense(64, 4);
    let loader = b.build().unwrap();
    {
        let mut it = loader.iter();
        for _ in 0..3 {
            it.next().unwrap().unwrap();
        }
    }
    assert_eq!(loader.state().step, 3);
    assert_eq!(steps(&loader, |b: &DenseBatch| b.step()), (3..19).collect::<Vec<_>>());
}

#[test]
fn a_saved_state_resumes_with_the_same_batches() {
    let (_d, b) = dense(100, 10);
    let first = b.clone().steps_per_epoch(7).build().unwrap();
    let _ = steps(&first, |b: &DenseBatch| b.step());
    let state = first.state();
    let next: Vec<Vec<u32>> = first.iter().map(|b| b.unwrap().indices().to_vec()).collect();
    let resumed = b.steps_per_epoch(7).state(state).build().unwrap();
    let again: Vec<Vec<u32>> = resumed.iter().map(|b| b.unwrap().indices().to_vec()).collect();
    assert_eq!(next, again);
    assert_eq!(resumed.state(), first.state());
}

#[test]
fn to_device_keeps_the_order_and_shares_the_step() {
    let (_d, b) = dense(90, 6);
    let a = b.clone().build().unwrap();
    let reference: Vec<Vec<u32>> = a.iter().map(|b| b.unwrap().indices().to_vec()).collect();
    let fresh = b.build().unwrap();
    let moved = fresh.to_device(&device());
    let got: Vec<Vec<u32>> = moved.iter().map(|b| b.unwrap().indices().to_vec()).collect();
    assert_eq!(got, reference);
    // The loader the caller kept reports the copy's progress (what a checkpoint saves).
    assert_eq!(fresh.state().step, 15);
    let mut it = moved.iter();
    let batch = it.next().unwrap().unwrap();
    assert_eq!(batch.step(), 15);
    assert_eq!(batch.device(), &device());
}

#[test]
fn slices_are_disjoint_stripes_that_make_up_the_global_batch() {
    let (_d, b) = dense(120, 12);
    // The reference epoch comes from a twin: iterating `whole` would move the step its slices
    // start from.
    let global: Vec<Vec<u32>> =
        b.clone().build().unwrap().iter().map(|b| b.unwrap().indices().to_vec()).collect();
    let whole = b.build().unwrap();
    let n = whole.num_items();
    for parts in [2usize, 3, 4] {
        let width = n / parts;
        let slices: Vec<_> = (0..parts).map(|p| whole.slice(p * width, (p + 1) * width)).collect();
        let per: Vec<Vec<Vec<u32>>> = slices
            .iter()
            .map(|s| {
                assert_eq!(s.num_items(), width);
                s.iter().map(|b| b.unwrap().indices().to_vec()).collect()
            })
            .collect();
        for (step, g) in global.iter().enumerate() {
            let mut union = Vec::new();
            let mut distinct = BTreeSet::new();
            for part in &per {
                union.extend_from_slice(&part[step]);
                distinct.extend(part[step].iter().copied());
            }
            assert_eq!(distinct.len(), union.len(), "slices overlap at step {step}");
            assert_eq!(&union, g, "{parts} slices at step {step}");
        }
    }
    assert_eq!(whole.state().step, 0, "iterating slices leaves the sliced loader's step alone");
}

#[test]
fn a_slice_starts_at_the_step_the_loader_has_reached() {
    let (_d, b) = dense(120, 12);
    let whole = b.clone().steps_per_epoch(4).build().unwrap();
    let _ = steps(&whole, |b: &DenseBatch| b.step());
    let half = whole.slice(0, whole.num_items() / 2);
    let first = half.iter().next().unwrap().unwrap();
    assert_eq!(first.step(), 4);
    let sampler =
        SamplerConfig { len: 120, batch_size: 12, mode: SamplerMode::Cyclic, seed: 3, rank: 0, world: 1 }
            .build()
            .unwrap();
    assert_eq!(first.indices(), &sampler.batch(4)[..6]);
}

#[test]
fn a_slice_that_does_not_divide_the_batch_reports_an_error() {
    let (_d, b) = dense(100, 10);
    let whole = b.build().unwrap();
    let third = whole.slice(0, whole.num_items() / 3);
    let mut it = third.iter();
    let Some(Err(e)) = it.next() else { panic!("an error first") };
    let cause = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<loaderx_burn::Error>());
    assert!(
        matches!(cause, Some(loaderx_burn::Error::Core(loaderx_core::Error::Config { reason, .. })) if reason.contains("not divisible by world")),
        "{e}"
    );
    assert!(it.next().is_none());
}

#[test]
fn dense_batches_become_tensors_in_the_device_default_dtypes() {
    let (_d, b) = dense(50, 5);
    let loader = b.mode(SamplerMode::Sequential).build().unwrap();
    let mut batch = loader.iter().next().unwrap().unwrap();
    assert_eq!(batch.indices(), &[0, 1, 2, 3, 4]);
    assert_eq!(batch.get("y").unwrap().dtype(), DType::U8);
    let x: Tensor<2> = batch.float("x").unwrap();
    assert_eq!(x.dims(), [5, 3]);
    assert_eq!(x.dtype(), DType::F32);
    assert_eq!(x.into_data().try_to_vec::<f32>().unwrap()[3..6], [1.0, 1.5, -1.0]);
    let y: Tensor<1, Int> = batch.int("y").unwrap();
    assert_eq!(y.into_data().convert::<i64>().try_to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4]);
    assert!(
        matches!(batch.float::<2>("y"), Err(loaderx_burn::Error::Stream { name, reason })
            if name == "y" && reason.contains("no such stream")),
        "taken streams are gone"
    );
}

#[test]
fn a_wrong_rank_is_an_error_not_a_panic() {
    let (_d, b) = dense(50, 5);
    let loader = b.build().unwrap();
    let mut batch = loader.iter().next().unwrap().unwrap();
    assert!(matches!(batch.float::<3>("x"), Err(loaderx_burn::Error::Stream { name, reason })
        if name == "x" && reason.contains("asked for rank 3")));
    assert!(batch.float::<2>("x").is_ok(), "a failed take leaves the stream in place");
}

#[test]
fn the_batcher_path_gives_burn_items_in_sampler_order() {
    let dir = tempfile::tempdir().unwrap();
    let (x, _) = write_xy(dir.path(), 40);
    let loader: StepLoader<Vec<Vec<f32>>> = StepLoaderBuilder::new()
        .batch_size(8)
        .mode(SamplerMode::Sequential)
        .threads(2)
        .build_batcher(DenseItems::<f32>::open(&x).unwrap(), Items)
        .unwrap();
    assert_eq!(loader.num_items(), 40);
    let firsts: Vec<f32> = loader.iter().flat_map(|b| b.unwrap()).map(|item| item[0]).collect();
    assert_eq!(firsts, (0..40).map(|i| i as f32).collect::<Vec<_>>());
    let again: Vec<f32> = loader.iter().flat_map(|b| b.unwrap()).map(|item| item[0]).collect();
    assert_eq!(again, firsts, "sequential wraps around: epoch 2 is the same pass");
}

#[test]
fn a_panicking_batcher_is_an_error_and_the_loader_goes_on() {
    struct FailOdd;
    impl burn::data::dataloader::batcher::Batcher<Vec<f32>, f32> for FailOdd {
        fn batch(&self, items: Vec<Vec<f32>>, _: &burn::tensor::Device) -> f32 {
            assert!((items[0][0] as u32).is_multiple_of(2), "odd first item");
            items[0][0]
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (x, _) = write_xy(dir.path(), 10);
    let loader = StepLoaderBuilder::new()
        .batch_size(1)
        .mode(SamplerMode::Sequential)
        .build_batcher(DenseItems::<f32>::open(&x).unwrap(), FailOdd)
        .unwrap();
    let out: Vec<bool> = loader.iter().map(|r| r.is_ok()).collect();
    assert_eq!(out, (0..10).map(|i| i % 2 == 0).collect::<Vec<_>>());
}

#[test]
fn mnist_batches_match_the_guide_batcher() {
    let (images, labels) = mnist_train();
    let loader = StepLoaderBuilder::new()
        .mnist(images, labels)
        .batch_size(16)
        .seed(9)
        .set_device(device())
        .build_mnist()
        .unwrap();
    assert_eq!(loader.num_items(), 8000);
    let batch: MnistBatch = loader.iter().next().unwrap().unwrap();
    assert_eq!(batch.images.dims(), [16, 28, 28]);
    assert_eq!(batch.targets.dims(), [16]);
    // The same rows through burn's item-by-item guide batcher.
    let sampler = loader.sampler().build().unwrap();
    let idx: Vec<usize> = sampler.batch(0).into_iter().map(|i| i as usize).collect();
    let items =
        burn::data::dataset::Dataset::get_many(&MnistItems::open(images, labels).unwrap(), idx).unwrap();
    let guide = burn::data::dataloader::batcher::Batcher::batch(&MnistBatcher, items, &device());
    let ours: TensorData = batch.images.into_data();
    ours.assert_approx_eq::<f32>(&guide.images.into_data(), burn::tensor::Tolerance::default());
    assert_eq!(
        batch.targets.into_data().convert::<i64>().try_to_vec::<i64>().unwrap(),
        guide.targets.into_data().convert::<i64>().try_to_vec::<i64>().unwrap()
    );
}
