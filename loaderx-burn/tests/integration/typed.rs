//! Typed batches (`typed_batch!`, `StepLoaderBuilder::build_typed`): a struct of tensors filled
//! from the streams, its fields checked when the loader is built.

use burn::data::dataloader::DataLoader;
use loaderx_burn::{Error, StepLoaderBuilder};

use crate::common::{device, write_xy};

loaderx_burn::typed_batch! {
    /// x: (B, 3) floats, y: (B,) labels.
    #[derive(Debug, Clone)]
    pub struct Xy {
        pub x: float<2> = "x",
        pub y: int<1> = "y",
    }
}

loaderx_burn::typed_batch! {
    struct Misnamed { x: float<2> = "x", y: int<1> = "labels" }
}

loaderx_burn::typed_batch! {
    struct WrongRank { x: float<3> = "x" }
}

loaderx_burn::typed_batch! {
    struct Truncating { x: int<2> = "x" }
}

loaderx_burn::typed_batch! {
    struct Cast { x: int_from_float<2> = "x", again: float<2> = "x" }
}

fn builder(dir: &std::path::Path) -> StepLoaderBuilder {
    let (x, y) = write_xy(dir, 40);
    StepLoaderBuilder::new()
        .open_stream("x", x)
        .open_stream("y", y)
        .batch_size(8)
        .seed(1)
        .set_device(device())
}

#[test]
fn a_typed_batch_holds_the_streams_as_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let b = builder(dir.path());
    let loader = b.clone().build_typed::<Xy>().unwrap();
    let plain = b.build().unwrap();
    for (typed, plain) in loader.iter().zip(plain.iter()).take(5) {
        let (typed, mut plain) = (typed.unwrap(), plain.unwrap());
        assert_eq!(typed.x.dims(), [8, 3]);
        assert_eq!(typed.y.dims(), [8]);
        let y: Vec<i64> = typed.y.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
        let x: Vec<f32> = typed.x.into_data().try_to_vec::<f32>().unwrap();
        // Row i of x is [i, i + 0.5, -i] and its label i: the two tensors are of the same rows.
        for (row, label) in x.chunks(3).zip(&y) {
            assert_eq!((row[1] - row[0], row[0] as i64), (0.5, *label));
        }
        let same: Vec<f32> = plain.float::<2>("x").unwrap().into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(x, same, "the batch the untyped loader gives at this step");
    }
}

#[test]
fn fields_their_streams_cannot_fill_are_refused_when_the_loader_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let b = builder(dir.path());
    let refused = |e: Error| match e {
        Error::Stream { name, reason } => (name, reason),
        other => panic!("{other}"),
    };
    let (name, why) = refused(b.clone().build_typed::<Misnamed>().err().unwrap());
    assert_eq!(name, "labels");
    assert!(why.contains("field `y`") && why.contains(r#""x", "y""#), "{why}");
    let (name, why) = refused(b.clone().build_typed::<WrongRank>().err().unwrap());
    assert_eq!(name, "x");
    assert!(why.contains("rank 3") && why.contains("rank 2"), "{why}");
    let (_, why) = refused(b.clone().build_typed::<Truncating>().err().unwrap());
    assert!(why.contains("truncate") && why.contains("int_from_float"), "{why}");
    let (_, why) = refused(b.build_typed::<Cast>().err().unwrap());
    assert!(why.contains("fields `x` and `again`"), "{why}");
}

#[cfg(feature = "images")]
loaderx_burn::typed_batch! {
    struct Pictures { images: float<4> = "image", labels: int<1> = "label" }
}

/// An image stream in a typed burn batch: `[B, 3, H, W]` floats, normalised on the prefetch
/// threads, beside its labels.
#[cfg(feature = "images")]
#[test]
fn an_image_stream_is_a_rank_4_float_tensor() {
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
    let loader = StepLoaderBuilder::new()
        .image_stream("image", images, pipeline)
        .stream("label", labels)
        .batch_size(5)
        .seed(2)
        .set_device(device())
        .build_typed::<Pictures>()
        .unwrap();
    let batch = loader.iter().next().unwrap().unwrap();
    assert_eq!((batch.images.dims(), batch.labels.dims()), ([5, 3, 8, 8], [5]));
    let x: Vec<f32> = batch.images.into_data().try_to_vec::<f32>().unwrap();
    assert!(x.iter().all(|v| v.is_finite() && v.abs() < 3.0), "normalised bytes");
}

loaderx_burn::typed_batch! {
    struct Tokens { t: int<2> = "t" }
}

/// The fourth first-hour trial: a field over a ragged stream left unpadded was "no such stream";
/// now it is named ragged, with the pad that makes a tensor of it (and padded, it builds).
#[test]
fn a_field_over_an_unpadded_ragged_stream_says_to_pad_it() {
    let records: Vec<Vec<i32>> = (0..20).map(|i| vec![i; (i % 5 + 1) as usize]).collect();
    let tokens = loaderx_core::RaggedSource::from_records(vec![], &records).unwrap();
    let builder = StepLoaderBuilder::new().ragged_stream("t", tokens).batch_size(4).set_device(device());
    let Err(e) = builder.clone().build_typed::<Tokens>() else { panic!("an unpadded ragged stream") };
    assert!(
        matches!(&e, Error::Stream { name, reason } if name == "t" && reason.contains("is ragged") && reason.contains(".pad(\"t\", Pad::longest())")),
        "{e}"
    );
    assert!(builder.pad("t", loaderx_core::Pad::longest()).build_typed::<Tokens>().is_ok());
}
