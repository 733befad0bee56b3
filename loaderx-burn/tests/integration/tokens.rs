//! Token files as burn batches (issue 45): windows of a Megatron dataset arrive as
//! `Tensor<B, 2, Int>`, each row consecutive tokens of the file.

use burn::data::dataloader::DataLoader;
use loaderx_burn::StepLoaderBuilder;
use loaderx_core::tokens::{MegatronWriter, TokenFile, TokenType};

#[test]
fn token_windows_arrive_as_int_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("corpus");
    let mut w = MegatronWriter::create(&prefix, TokenType::U16, false).unwrap();
    w.add_document(&(0..3000u16).collect::<Vec<_>>()).unwrap();
    w.finish().unwrap();
    let corpus = TokenFile::open(&prefix).unwrap();
    let loader = StepLoaderBuilder::new()
        .stream("tokens", corpus.windows(9, None).unwrap())
        .batch_size(4)
        .seed(1)
        .build()
        .unwrap();
    let mut batch = loader.iter().next().unwrap().unwrap();
    let t = batch.int::<2>("tokens").unwrap();
    assert_eq!(t.dims(), [4, 9]);
    let v = t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
    for row in v.chunks(9) {
        assert!(row.windows(2).all(|p| p[1] == p[0] + 1), "a window is consecutive tokens: {row:?}");
        assert!((0..=2991).contains(&row[0]));
    }
}
