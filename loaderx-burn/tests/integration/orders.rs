//! Every loader order through the burn builder's own setters (packing, bucketing, a mixture):
//! the `StepLoader` yields exactly the core loader's batches, across `iter()` calls, and ends
//! in the core loader's state.

use burn::data::dataloader::DataLoader as _;
use loaderx_burn::StepLoaderBuilder;
use loaderx_core::{Batch, BoxError, DataLoader, LoaderBuilder, LoaderState, Pack, Pad, RaggedSource};

/// Record `i`: `1 + (i * 11) % 29` tokens `i * 100 + position`.
fn tokens(n: u32, base: u32) -> RaggedSource {
    let records: Vec<Vec<i32>> =
        (0..n).map(|i| (0..1 + (i * 11) % 29).map(|p| ((base + i) * 100 + p) as i32).collect()).collect();
    RaggedSource::from_records(vec![], &records).unwrap()
}

/// A batch as comparable data: its step, rows and every dense array's bytes.
type Contents = (u64, Vec<u32>, Vec<(String, Vec<u8>)>);

fn contents(b: Batch) -> Contents {
    let arrays = b.names().map(|n| (n.to_string(), b.get(n).unwrap().as_bytes().to_vec())).collect();
    (b.step(), b.indices().to_vec(), arrays)
}

/// Two `iter()`s of `epoch` steps of the burn loader, and its state after them.
fn burn_run(b: StepLoaderBuilder, epoch: u64) -> (Vec<Contents>, LoaderState) {
    let loader = b
        .steps_per_epoch(epoch)
        .threads(2)
        .build_with(|b: Batch, _: &burn::tensor::Device| Ok::<_, BoxError>(contents(b)))
        .unwrap();
    let mut out: Vec<Contents> = loader.iter().map(Result::unwrap).collect();
    out.extend(loader.iter().map(Result::unwrap));
    (out, loader.state())
}

/// The same number of steps of the core loader, and its state after them.
fn core_run(b: LoaderBuilder, steps: u64) -> (Vec<Contents>, LoaderState) {
    let mut loader = b.threads(2).build().unwrap();
    let out = (0..steps).map(|_| contents(loader.next_batch().unwrap().unwrap())).collect();
    (out, loader.state())
}

#[test]
fn a_packed_step_loader_yields_the_core_loaders_batches() {
    let burn = StepLoaderBuilder::new()
        .ragged_stream("t", tokens(300, 0))
        .pack("t", Pack::new(32))
        .batch_size(4)
        .seed(3);
    let core = DataLoader::builder()
        .ragged_stream("t", tokens(300, 0))
        .pack("t", Pack::new(32))
        .batch_size(4)
        .seed(3);
    let (got, state) = burn_run(burn, 7);
    let (want, want_state) = core_run(core, 14);
    assert!(got.iter().all(|(_, _, a)| a.iter().any(|(n, _)| n == "t_segments")), "packed batches");
    assert_eq!(got, want);
    assert_eq!(state, want_state, "the cursor follows the steps delivered");
    assert!(state.order.pack().is_some_and(|p| p.cursor.sample > 0));
}

#[test]
fn a_bucketed_step_loader_yields_the_core_loaders_batches() {
    let burn = StepLoaderBuilder::new()
        .ragged_stream("t", tokens(500, 0))
        .pad("t", Pad::longest())
        .bucket("t", 8)
        .batch_size(16)
        .seed(5);
    let core = DataLoader::builder()
        .ragged_stream("t", tokens(500, 0))
        .pad("t", Pad::longest())
        .bucket("t", 8)
        .batch_size(16)
        .seed(5);
    let (got, state) = burn_run(burn, 10);
    let (want, want_state) = core_run(core, 20);
    assert_eq!(got, want);
    assert_eq!(state, want_state);
    assert!(state.order.bucket().is_some());
}

#[test]
fn a_mixture_step_loader_yields_the_core_loaders_batches() {
    let src = |base| StepLoaderBuilder::new().ragged_stream("t", tokens(120, base)).pad("t", Pad::longest());
    let burn =
        StepLoaderBuilder::mixture(vec![(2.0, src(0)), (1.0, src(5000))]).unwrap().batch_size(8).seed(1);
    let core_src =
        |base| DataLoader::builder().ragged_stream("t", tokens(120, base)).pad("t", Pad::longest());
    let core = LoaderBuilder::mixture(vec![(2.0, core_src(0)), (1.0, core_src(5000))])
        .unwrap()
        .batch_size(8)
        .seed(1);
    let (got, state) = burn_run(burn, 6);
    let (want, want_state) = core_run(core, 12);
    assert_eq!(got, want);
    assert_eq!(state, want_state);
    assert!(state.order.mixture().is_some());
}

#[test]
fn packing_refuses_a_burn_batcher() {
    struct Count;
    impl burn::data::dataloader::batcher::Batcher<u32, usize> for Count {
        fn batch(&self, items: Vec<u32>, _: &burn::tensor::Device) -> usize {
            items.len()
        }
    }
    let items = burn::data::dataset::InMemDataset::new((0..300u32).collect::<Vec<_>>());
    let e = StepLoaderBuilder::new()
        .ragged_stream("t", tokens(300, 0))
        .pack("t", Pack::new(32))
        .build_batcher(items, Count)
        .unwrap_err();
    assert!(e.to_string().contains("not a batcher"), "{e}");
}
