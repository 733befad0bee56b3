//! What a burn user meets first: exactly-once validation passes, burn's builder names backed by
//! loaderx, MNIST from IDX files converted once, errors naming what there is.

use burn::data::dataloader::DataLoader;
use burn::data::dataset::Dataset;
use loaderx_burn::{
    DataLoaderBuilder, DenseBatch, MnistBatcher, MnistDataset, MnistSplit, StepLoaderBuilder,
};
use loaderx_core::Pass;

use crate::common::{mnist_dir, write_xy};

/// The `y` stream of a batch: `i % 251` of each row.
fn ys(b: &mut DenseBatch) -> Vec<i64> {
    b.int::<1>("y").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap()
}

#[test]
fn a_finite_step_loader_sees_every_item_once_per_iter_with_a_partial_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    write_xy(dir.path(), 250);
    let builder = StepLoaderBuilder::new()
        .open_stream("x", dir.path().join("x"))
        .open_stream("y", dir.path().join("y"))
        .batch_size(32);
    let valid = builder.clone().pass(Pass::ordered()).build().unwrap();
    assert_eq!((valid.num_items(), valid.steps_per_epoch()), (250, 8));
    for _ in 0..2 {
        let mut it = valid.iter();
        let mut seen = Vec::new();
        while let Some(b) = it.next() {
            seen.extend(ys(&mut b.unwrap()));
            let p = it.progress();
            assert_eq!(
                (p.items_processed, p.items_total),
                (seen.len(), 250),
                "progress counts the items delivered"
            );
        }
        assert_eq!(
            seen,
            (0..250).map(|i| i % 251).collect::<Vec<i64>>(),
            "every item once, in order, each iter()"
        );
    }
    let train = builder.pass(Pass::shuffled()).seed(9).build().unwrap();
    let epoch =
        |l: &dyn DataLoader<DenseBatch>| -> Vec<i64> { l.iter().flat_map(|b| ys(&mut b.unwrap())).collect() };
    let (e0, e1) = (epoch(&train), epoch(&train));
    assert_ne!(e0, e1, "a new shuffle each epoch");
    for e in [e0, e1] {
        let mut sorted = e.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..250).collect::<Vec<i64>>());
    }
    let state = train.state();
    assert_eq!(
        (state.step, state.order.pass().unwrap().epoch),
        (16, 0),
        "two epochs of 8 steps from epoch 0"
    );
}

#[test]
fn burns_builder_names_build_a_loaderx_loader_over_mnist_converted_once() {
    let cache = tempfile::tempdir().unwrap();
    let test = MnistDataset::cached_in(mnist_dir(), MnistSplit::Test, cache.path()).unwrap();
    assert_eq!(test.len(), 2000);
    let converted: Vec<_> = std::fs::read_dir(cache.path()).unwrap().collect();
    assert_eq!(converted.len(), 1, "one cached conversion");
    let again = MnistDataset::cached_in(mnist_dir(), MnistSplit::Test, cache.path()).unwrap();
    assert_eq!(again.get(5).unwrap(), test.get(5).unwrap(), "the cache is reused");
    let loader = DataLoaderBuilder::new(MnistBatcher).batch_size(64).shuffle(42).num_workers(2).build(test);
    assert_eq!(loader.num_items(), 2000);
    let mut rows = 0;
    let mut labels = Vec::new();
    for b in loader.iter() {
        let b = b.unwrap();
        rows += b.targets.dims()[0];
        labels.extend(b.targets.into_data().convert::<i64>().try_to_vec::<i64>().unwrap());
    }
    assert_eq!(rows, 2000, "every digit once, the last batch partial");
    let in_order = DataLoaderBuilder::new(MnistBatcher).batch_size(500).build(again);
    let ordered: Vec<i64> = in_order
        .iter()
        .flat_map(|b| b.unwrap().targets.into_data().convert::<i64>().try_to_vec::<i64>().unwrap())
        .collect();
    let (mut a, mut b) = (labels.clone(), ordered.clone());
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "the same digits");
    assert_ne!(labels, ordered, "shuffled");
    let bad = DataLoaderBuilder::new(MnistBatcher)
        .batch_size(0)
        .build(MnistDataset::cached_in(mnist_dir(), MnistSplit::Test, cache.path()).unwrap());
    let Some(Err(first)) = bad.iter().next() else { panic!("a build error is the first item") };
    let cause = std::error::Error::source(&first).and_then(|s| s.downcast_ref::<loaderx_burn::Error>());
    assert!(
        matches!(cause, Some(loaderx_burn::Error::InvalidArgument(m)) if m.contains("could not be built") && m.contains("batch")),
        "{first}"
    );
    // try_build refuses it when the loader is built, naming the setting.
    let refused = DataLoaderBuilder::new(MnistBatcher)
        .batch_size(0)
        .try_build(MnistDataset::cached_in(mnist_dir(), MnistSplit::Test, cache.path()).unwrap());
    let Err(e) = refused else { panic!("a batch of 0 is refused by try_build") };
    assert!(
        matches!(&e, loaderx_burn::Error::Core(loaderx_core::Error::Config { what: "pass", reason }) if reason.contains("batch")),
        "{e}"
    );
    assert!(
        MnistDataset::cached_in(cache.path(), MnistSplit::Train, cache.path()).is_err(),
        "no IDX files there"
    );
    // The fourth first-hour trial: burn's builder resumes the data with burn's checkpoint number.
    let shuffled = |checkpoint: Option<usize>| {
        let b = DataLoaderBuilder::new(MnistBatcher).batch_size(500).shuffle(7);
        let b = match checkpoint {
            Some(epoch) => b.checkpoint(epoch),
            None => b,
        };
        b.build(MnistDataset::cached_in(mnist_dir(), MnistSplit::Test, cache.path()).unwrap())
    };
    let epoch = |loader: &std::sync::Arc<dyn DataLoader<loaderx_burn::MnistBatch>>| -> Vec<i64> {
        loader
            .iter()
            .flat_map(|b| b.unwrap().targets.into_data().convert::<i64>().try_to_vec::<i64>().unwrap())
            .collect()
    };
    let first = shuffled(None);
    let epochs: Vec<_> = (0..3).map(|_| epoch(&first)).collect();
    assert_ne!(epochs[1], epochs[2], "a new order every epoch");
    assert_eq!(epoch(&shuffled(Some(2))), epochs[2], "epoch 3, as the first run read it");
}

#[test]
fn a_stream_name_typo_lists_the_streams() {
    let dir = tempfile::tempdir().unwrap();
    write_xy(dir.path(), 40);
    let loader =
        StepLoaderBuilder::new().open_stream("x", dir.path().join("x")).batch_size(8).build().unwrap();
    let mut b = loader.iter().next().unwrap().unwrap();
    let e = b.float::<2>("xx").unwrap_err().to_string();
    assert!(e.contains("\"x\""), "{e}");
}

/// A ragged stream padded into burn tensors, over a split of in-memory data: the padded values,
/// the lengths and the mask agree with the records, and train and validation are disjoint.
#[test]
fn padded_ragged_tensors_over_an_in_memory_split() {
    use loaderx_core::{DenseSource, Pad, RaggedSource, Selection};
    let records: Vec<Vec<i32>> = (0..60).map(|i| (0..i % 7 + 1).map(|k| i * 10 + k).collect()).collect();
    let tokens = RaggedSource::from_records(vec![], &records).unwrap();
    let ids = DenseSource::from_vec(vec![], (0..60).map(|i| i as i64).collect::<Vec<i64>>()).unwrap();
    let (train, valid) = Selection::split(60, 0.8, 3).unwrap();
    let builder = StepLoaderBuilder::new()
        .ragged_stream("t", tokens)
        .stream("id", ids)
        .pad("t", Pad::longest())
        .batch_size(8)
        .pass(Pass::ordered());
    let ids_of = |sel: Selection| -> Vec<i64> {
        let loader = builder.clone().select(sel).build().unwrap();
        let mut seen = Vec::new();
        for b in loader.iter() {
            let mut b = b.unwrap();
            let id = b.int::<1>("id").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
            let t = b.int::<2>("t").unwrap();
            let width = t.dims()[1];
            let t = t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
            let lengths =
                b.int::<1>("t_lengths").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
            let mask =
                b.int::<2>("t_mask").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
            for (row, &i) in id.iter().enumerate() {
                let want = &records[i as usize];
                assert_eq!(lengths[row], want.len() as i64);
                for k in 0..width {
                    let (v, m) = (t[row * width + k], mask[row * width + k]);
                    match want.get(k) {
                        Some(&w) => assert_eq!((v, m), (i64::from(w), 1)),
                        None => assert_eq!((v, m), (0, 0), "padding is 0 and masked out"),
                    }
                }
            }
            seen.extend(id);
        }
        seen
    };
    let (a, b) = (ids_of(train), ids_of(valid));
    assert_eq!((a.len(), b.len()), (48, 12));
    let mut all: Vec<i64> = a.iter().chain(&b).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..60).collect::<Vec<i64>>(), "the split covers every record once");
}

/// A weighted mixture through the burn loader: the rows come from both sources in about their
/// weights' proportion, and the state carries the mixture (it resumes to the same batches).
#[test]
fn a_weighted_mixture_feeds_the_step_loader() {
    use loaderx_core::{DenseSource, LoaderBuilder};
    let src = |base: i64, n: i64| {
        LoaderBuilder::new()
            .stream("v", DenseSource::from_vec(vec![], (base..base + n).collect::<Vec<i64>>()).unwrap())
    };
    let mix = LoaderBuilder::mixture(vec![(3.0, src(0, 100)), (1.0, src(1000, 40))])
        .unwrap()
        .batch_size(16)
        .seed(4);
    let loader = StepLoaderBuilder::from(mix.clone()).steps_per_epoch(25).build().unwrap();
    let mut low = 0usize;
    let mut all = Vec::new();
    for b in loader.iter() {
        let v = b.unwrap().int::<1>("v").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
        low += v.iter().filter(|&&x| x < 1000).count();
        all.extend(v);
    }
    assert_eq!(all.len(), 400);
    assert!((290..=310).contains(&low), "3:1 → ~300 of 400 from the first source, got {low}");
    let state = loader.state();
    assert!(state.order.mixture().is_some());
    let again = StepLoaderBuilder::from(mix.state(loaderx_core::LoaderState { step: 0, ..state }))
        .steps_per_epoch(25)
        .build()
        .unwrap();
    let replay: Vec<i64> = again
        .iter()
        .flat_map(|b| {
            b.unwrap().int::<1>("v").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap()
        })
        .collect();
    assert_eq!(replay, all, "the same batches from the saved state");
}

/// A packed token stream through the burn loader: `[rows, L]` int tensors, and a state saved
/// after an epoch resumes to the same rows.
#[test]
fn packed_rows_through_the_step_loader_resume_exactly() {
    use loaderx_core::{LoaderBuilder, Pack, RaggedSource};
    let records: Vec<Vec<i32>> = (0..300).map(|i| vec![i; (i % 37 + 1) as usize]).collect();
    let core = LoaderBuilder::new()
        .ragged_stream("t", RaggedSource::from_records(vec![], &records).unwrap())
        .pack("t", Pack::new(32).split(true))
        .batch_size(4)
        .seed(2);
    let rows = |l: &loaderx_burn::StepLoader<DenseBatch>| -> Vec<i64> {
        l.iter()
            .flat_map(|b| {
                let mut b = b.unwrap();
                assert_eq!(b.int::<2>("t_segments").unwrap().dims(), [4, 32]);
                b.int::<2>("t").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap()
            })
            .collect()
    };
    let loader = StepLoaderBuilder::from(core.clone()).steps_per_epoch(5).build().unwrap();
    let first = rows(&loader);
    let state = loader.state();
    assert_eq!(state.step, 5);
    assert!(state.order.pack().is_some_and(|p| p.cursor.sample > 0), "the cursor moved: {:?}", state.order);
    let second = rows(&loader);
    let resumed = StepLoaderBuilder::from(core.state(state)).steps_per_epoch(5).build().unwrap();
    assert_eq!(rows(&resumed), second, "resumed at step 5");
    assert_ne!(first, second);
}

/// Labels stored as floats are not truncated into ints without a word: `int()` refuses them,
/// naming the stream (which stays in the batch), and `int_from_float` casts as asked.
#[test]
fn int_refuses_a_stream_of_floats_unless_the_cast_is_asked_for() {
    let labels = loaderx_core::DenseSource::from_vec(vec![], vec![1.7f32, 2.2, 3.9, 4.0]).unwrap();
    let loader = StepLoaderBuilder::new()
        .stream("y", labels)
        .batch_size(4)
        .pass(Pass::ordered())
        .set_device(burn::tensor::Device::flex())
        .build()
        .unwrap();
    let mut b = loader.iter().next().unwrap().unwrap();
    let e = b.int::<1>("y").unwrap_err();
    assert!(
        matches!(&e, loaderx_burn::Error::Stream { name, reason } if name == "y" && reason.contains("int_from_float")
            && reason.starts_with("holds f32 values")),
        "{e}"
    );
    let cast = b.int_from_float::<1>("y").unwrap().into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
    assert_eq!(cast, [1, 2, 3, 4], "toward zero, as asked");
}

/// burn's learner resumed with `checkpoint(epoch)` goes on with epoch `epoch + 1`; a loader given
/// the same number reads what the first run read from there, endless or finite (the third
/// first-hour trial found no recipe for resuming the data under the learner). Beside a state or
/// a start step, which name the step themselves, it is refused.
#[test]
fn checkpoint_resumes_the_data_where_burns_learner_resumes_the_model() {
    let dir = tempfile::tempdir().unwrap();
    write_xy(dir.path(), 250);
    let builder = || {
        StepLoaderBuilder::new()
            .open_stream("x", dir.path().join("x"))
            .open_stream("y", dir.path().join("y"))
            .batch_size(32)
            .seed(5)
    };
    let epoch = |loader: &loaderx_burn::StepLoader<DenseBatch>| -> Vec<Vec<i64>> {
        loader.iter().map(|b| ys(&mut b.unwrap())).collect()
    };
    for finite in [false, true] {
        let b = || if finite { builder().pass(Pass::shuffled()) } else { builder() };
        let first = b().build().unwrap();
        let epochs: Vec<_> = (0..3).map(|_| epoch(&first)).collect();
        assert_ne!(epochs[1], epochs[2], "reshuffled every epoch");
        let resumed = b().checkpoint(2).build().unwrap();
        assert_eq!(resumed.step(), 2 * first.steps_per_epoch());
        assert_eq!(epoch(&resumed), epochs[2], "finite: {finite}");
    }
    let Err(e) = builder().start_step(3).checkpoint(1).build() else { panic!("two steps named") };
    assert!(e.to_string().contains("checkpoint(1) beside a restored state or a start step (step 3)"), "{e}");
}
