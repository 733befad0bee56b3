//! Cross-crate tests through the `loaderx` facade: what a user of the published crate sees.

use loaderx::{Codec, DataLoader, DenseDataset, SamplerMode, WriteOptions, convert};

/// The bundled MNIST subset, converted through the facade and read back by the loader: the
/// README's quick start, end to end, on real data.
#[test]
fn bundled_mnist_converts_and_loads_aligned_batches() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mnist-10k");
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join("images");
    let labels = dir.path().join("labels");
    let s = convert::idx(
        data.join("t10k-images-idx3-ubyte.gz"),
        &images,
        WriteOptions::new().codec(Codec::ZstdDict),
    )
    .unwrap();
    assert_eq!(s.records, 2000);
    assert!(s.ratio() > 2.0, "MNIST digits compress well against a dictionary: {}", s.ratio());
    convert::idx(data.join("t10k-labels-idx1-ubyte.gz"), &labels, WriteOptions::new().codec(Codec::Raw))
        .unwrap();

    let all_labels =
        DenseDataset::<u8>::open(&labels).unwrap().get_vec(&(0..2000).collect::<Vec<_>>()).unwrap();
    let image_set = DenseDataset::<u8>::open(&images).unwrap();
    let mut loader = DataLoader::builder()
        .open_stream("image", &images)
        .open_stream("label", &labels)
        .batch_size(100)
        .mode(SamplerMode::Cyclic)
        .seed(3)
        .build()
        .unwrap();
    let mut seen = vec![0u32; 2000];
    for _ in 0..20 {
        let b = loader.next_batch().unwrap().unwrap();
        assert_eq!(b.get("image").unwrap().shape(), &[100, 28, 28]);
        let got = b.get("label").unwrap().as_slice::<u8>().unwrap();
        let pixels = b.get("image").unwrap().as_slice::<u8>().unwrap();
        for (k, &i) in b.indices().iter().enumerate() {
            seen[i as usize] += 1;
            assert_eq!(got[k], all_labels[i as usize], "label row {k} is record {i}");
            assert_eq!(
                &pixels[k * 784..(k + 1) * 784],
                &image_set.get_vec(&[i]).unwrap()[..],
                "image row {k}"
            );
        }
    }
    // 20 steps of 100 = one cycle over the 2,000 digits: each exactly once.
    assert!(seen.iter().all(|&c| c == 1));
}

// The token-file example's own functions, run here: a causal language model trained in candle
// from a Megatron dataset (issue 45), its loss halving in 200 steps.
#[cfg(feature = "candle-nn")]
#[path = "../../examples/tokens_candle.rs"]
mod tokens_candle;

#[cfg(feature = "candle-nn")]
#[test]
fn the_candle_token_example_learns_from_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    tokens_candle::write_corpus(&prefix, 200).unwrap();
    let losses = tokens_candle::train(&prefix, 200).unwrap();
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    let (first, last) = (losses[0], mean(&losses[190..]));
    assert!(first > 3.5, "untrained, a loss near ln 64 = 4.16 or above, not {first}");
    eprintln!("loss {first} -> {last}");
    assert!(last < first / 2.0, "the loss did not halve: {first} -> {last}");
}
