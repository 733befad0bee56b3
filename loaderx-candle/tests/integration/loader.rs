//! The tensor loader: step order, resume, errors.

use loaderx_candle::candle_core::{DType as CandleDType, Device};
use loaderx_candle::{CandleLoader, Converter, Error, TensorBatch, Widen};
use loaderx_core::{DataLoader, LoaderBuilder};

use std::path::Path;

use crate::common::write_dense;

/// Writes 200 records: `x` is `[i, i + 0.5]` f32, `y` is `i % 7 == 0` as bool.
fn write_streams(dir: &Path) {
    let x: Vec<f32> = (0..200).flat_map(|i| [i as f32, i as f32 + 0.5]).collect();
    let y: Vec<bool> = (0..200).map(|i| i % 7 == 0).collect();
    write_dense(dir, "x", vec![2], &x);
    write_dense(dir, "y", vec![], &y);
}

/// A loader builder over the streams of [`write_streams`].
fn builder(dir: &Path) -> LoaderBuilder {
    let (xp, yp) = (dir.join("x"), dir.join("y"));
    DataLoader::builder()
        .open_stream("x", xp)
        .open_stream("y", yp)
        .batch_size(16)
        .seed(11)
        .threads(4)
        .prefetch(2)
}

/// The batch's host values: (step, x, y).
fn values(b: &TensorBatch) -> (u64, Vec<f32>, Vec<u8>) {
    let x = b.get("x").unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let y = b.get("y").unwrap().to_vec1::<u8>().unwrap();
    (b.step(), x, y)
}

#[test]
fn batches_arrive_in_step_order_with_rows_aligned_across_streams() {
    let dir = tempfile::tempdir().unwrap();
    write_streams(dir.path());
    let conv = Converter::new(&Device::Cpu).widen(Widen::Exact);
    let loader = CandleLoader::new(builder(dir.path()), conv).unwrap();
    assert_eq!((loader.batch_size(), loader.len()), (16, 200));
    for (want, batch) in loader.take(40).enumerate() {
        let batch = batch.unwrap();
        assert_eq!(batch.step(), want as u64);
        assert_eq!(batch.get("y").unwrap().dtype(), CandleDType::U8);
        let (_, x, y) = values(&batch);
        for (row, &i) in batch.indices().iter().enumerate() {
            assert_eq!(x[2 * row], i as f32);
            assert_eq!(y[row], u8::from(i % 7 == 0));
        }
    }
}

#[test]
fn a_saved_state_resumes_at_the_next_step_with_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    write_streams(dir.path());
    let conv = Converter::new(&Device::Cpu).widen(Widen::Exact);
    let mut first = CandleLoader::new(builder(dir.path()), conv.clone()).unwrap();
    for _ in 0..7 {
        first.next_batch().unwrap().unwrap();
    }
    let saved = first.state();
    assert_eq!(saved.step, 7);
    let rest: Vec<_> = (0..9).map(|_| values(&first.next_batch().unwrap().unwrap())).collect();
    drop(first);

    // A seed beside the state that contradicts it is refused, not dropped without a word.
    let err =
        CandleLoader::new(builder(dir.path()).seed(999).state(saved.clone()), conv.clone()).unwrap_err();
    assert!(err.to_string().contains("seed 999 (the state's is"), "{err}");
    // A fresh loader from the saved state, on another number of threads.
    let resumed_builder = builder(dir.path()).threads(1).state(saved);
    let mut resumed = CandleLoader::new(resumed_builder, conv).unwrap();
    assert_eq!(resumed.step(), 7);
    let again: Vec<_> = (0..9).map(|_| values(&resumed.next_batch().unwrap().unwrap())).collect();
    assert_eq!(rest, again);
    assert_eq!(rest[0].0, 7);
}

#[test]
fn a_failed_conversion_names_its_step_and_the_loader_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    write_streams(dir.path());
    // `y` is bool and the converter refuses to widen: `new` says so, naming the stream, before
    // any batch is made.
    let err = CandleLoader::new(builder(dir.path()).threads(2), Converter::new(&Device::Cpu)).unwrap_err();
    assert!(
        matches!(&err, Error::Stream { name, cause } if name == "y"
            && matches!(**cause, Error::UnsupportedDType { dtype: loaderx_core::DType::Bool })),
        "{err}"
    );
    assert!(err.to_string().contains("stream \"y\"") && err.to_string().contains("Widen"), "{err}");
    // The cause is in the text once: a printer of error chains does not repeat it.
    assert!(std::error::Error::source(&err).is_none(), "{err}");
    assert!(err.to_string().contains("Widen::To(DType::U32) for class labels"), "{err}");
    // A transform converting every stream itself fails at each step, each with its own step.
    let mut loader =
        CandleLoader::build_with(builder(dir.path()).threads(2), Converter::new(&Device::Cpu), |b, c| {
            c.batch(b)
        })
        .unwrap();
    for want in 0..3u64 {
        let err = loader.next_batch().unwrap_err();
        assert!(
            matches!(&err, Error::Core(loaderx_core::Error::Transform { step, source }) if *step == want && source.to_string().contains("bool")),
            "{err}"
        );
    }
    assert_eq!(loader.step(), 3);
}

/// A finite pass through the candle loader: every record once, then the iterator ends; its
/// steps, epoch length and item count; an f64 stream cast to f32 on request; a ragged stream
/// padded into tensors; a transform with `?` on any error.
#[test]
fn a_finite_candle_pass_floats_as_and_padded_ragged_tensors() {
    use loaderx_core::{DenseSource, Pad, Pass, RaggedSource};
    let x = DenseSource::from_vec(vec![2], (0..100).map(f64::from).collect::<Vec<f64>>()).unwrap();
    let t =
        RaggedSource::from_records(vec![], &(0..50).map(|i| vec![i as u32; i % 5 + 1]).collect::<Vec<_>>())
            .unwrap();
    let builder = DataLoader::builder()
        .stream("x", x)
        .ragged_stream("t", t)
        .pad("t", Pad::longest())
        .batch_size(16)
        .pass(Pass::ordered());
    let loader =
        CandleLoader::new(builder.clone(), Converter::new(&Device::Cpu).floats_as(CandleDType::F32)).unwrap();
    assert_eq!((loader.steps(), loader.steps_per_epoch(), loader.num_items()), (Some(4), 4, Some(50)));
    let mut rows = 0;
    for b in loader {
        let b = b.unwrap();
        let x = b.get("x").unwrap();
        assert_eq!(x.dtype(), CandleDType::F32, "f64 cast to f32");
        let t = b.get("t").unwrap();
        assert_eq!(t.dims()[0], x.dims()[0]);
        let lengths = b.get("t_lengths").unwrap().to_vec1::<i64>().unwrap();
        for (k, &i) in b.indices().iter().enumerate() {
            assert_eq!(lengths[k], i64::from(i % 5 + 1));
        }
        rows += x.dims()[0];
    }
    assert_eq!(rows, 50);
    let kept =
        CandleLoader::new(builder.clone(), Converter::new(&Device::Cpu)).unwrap().next().unwrap().unwrap();
    assert_eq!(kept.get("x").unwrap().dtype(), CandleDType::F64, "without floats_as an f64 stream stays f64");
    let mut sums = CandleLoader::build_map(builder, Converter::new(&Device::Cpu), |mut b, _| {
        let x = b.take("x").ok_or("no x")?.into_vec::<f64>()?;
        Ok(x.iter().sum::<f64>())
    })
    .unwrap();
    assert_eq!(sums.next_batch().unwrap().unwrap(), (0..32).map(f64::from).sum::<f64>());
}

/// A weighted mixture through the candle loader: tensors of rows from every source.
#[test]
fn a_weighted_mixture_becomes_candle_tensors() {
    use loaderx_core::{DenseSource, LoaderBuilder};
    let src = |base: u32, n: u32| {
        LoaderBuilder::new()
            .stream("v", DenseSource::from_vec(vec![], (base..base + n).collect::<Vec<u32>>()).unwrap())
    };
    let mix = LoaderBuilder::mixture(vec![(1.0, src(0, 30)), (1.0, src(100, 30))]).unwrap().batch_size(20);
    let mut loader = CandleLoader::new(mix, Converter::new(&Device::Cpu)).unwrap();
    let v = loader.next_batch().unwrap().unwrap().get("v").unwrap().to_vec1::<u32>().unwrap();
    assert_eq!(v.len(), 20);
    assert_eq!(v.iter().filter(|&&x| x >= 100).count(), 10, "1:1 over a batch of 20");
}

/// An image stream as a candle tensor: `[B, 3, H, W]` f32, normalised on the prefetch threads,
/// beside its labels; the same tensors for the same seed.
#[cfg(feature = "images")]
#[test]
fn an_image_stream_is_a_rank_4_f32_tensor() {
    use loaderx_core::vision::{IMAGENET_MEAN, IMAGENET_STD, ImagePipeline};
    use loaderx_core::{DenseSource, RaggedSource};
    let files: Vec<Vec<u8>> = (0..10u32)
        .map(|i| {
            let img =
                image::RgbImage::from_fn(20 + i, 16, |x, y| image::Rgb([x as u8 * 9, y as u8 * 9, i as u8]));
            let mut out = std::io::Cursor::new(Vec::new());
            img.write_to(&mut out, image::ImageFormat::Png).unwrap();
            out.into_inner()
        })
        .collect();
    let images = RaggedSource::from_records(vec![], &files).unwrap();
    let labels = DenseSource::from_vec(vec![], (0..10u32).collect::<Vec<_>>()).unwrap();
    let pipeline = ImagePipeline::train(8).normalize(IMAGENET_MEAN, IMAGENET_STD);
    let builder = DataLoader::builder()
        .image_stream("image", images, pipeline)
        .stream("label", labels)
        .batch_size(5)
        .seed(2);
    let run = || {
        let mut loader = CandleLoader::new(builder.clone(), Converter::new(&Device::Cpu)).unwrap();
        let batch = loader.next_batch().unwrap().unwrap();
        let x = batch.get("image").unwrap();
        assert_eq!((x.dims(), x.dtype()), (&[5, 3, 8, 8][..], CandleDType::F32));
        assert_eq!(batch.get("label").unwrap().dims(), &[5]);
        x.flatten_all().unwrap().to_vec1::<f32>().unwrap()
    };
    let x = run();
    assert!(x.iter().all(|v| v.is_finite() && v.abs() < 3.0), "normalised bytes");
    assert_eq!(run(), x);
}

/// The fourth first-hour trial: an unpadded ragged stream was accepted by `new` and then "no such
/// stream" at `get`; now `new` names it ragged and says how to pad it (padded, it builds).
#[test]
fn an_unpadded_ragged_stream_is_refused_by_new_saying_to_pad_it() {
    let records: Vec<Vec<i32>> = (0..20).map(|i| vec![i; (i % 5 + 1) as usize]).collect();
    let tokens = loaderx_core::RaggedSource::from_records(vec![], &records).unwrap();
    let builder = DataLoader::builder().ragged_stream("t", tokens).batch_size(4);
    let err = CandleLoader::new(builder.clone(), Converter::new(&Device::Cpu)).unwrap_err();
    assert!(
        err.to_string().contains("stream \"t\" is ragged") && err.to_string().contains("builder.pad(\"t\""),
        "{err}"
    );
    let padded = builder.pad("t", loaderx_core::Pad::longest());
    assert!(CandleLoader::new(padded, Converter::new(&Device::Cpu)).is_ok());
}
