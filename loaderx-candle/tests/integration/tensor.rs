//! A stream becomes a tensor: storage identity, shapes, refusals.

use loaderx_candle::candle_core::{Device, Tensor};
use loaderx_candle::{CandleLoader, Converter, Error, Widen, tensor_from_parts, to_tensor};
use loaderx_core::{ArrayData, DataLoader, DenseArray, DenseSource};

use crate::common::{cpu_storage_ptr, write_dense};

#[test]
fn cpu_tensor_storage_is_the_gathered_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..3 * 100).map(|v| v as f32).collect();
    let path = write_dense(dir.path(), "x", vec![3], &values);
    let source = DenseSource::open(&path).unwrap();
    let array = source.get_batch(&[5, 0, 99, 7]).unwrap();
    let gathered = array.as_slice::<f32>().unwrap().as_ptr() as usize;
    let t = to_tensor(array, &Device::Cpu, Widen::Never).unwrap();
    assert_eq!(cpu_storage_ptr::<f32>(&t), gathered, "the tensor must own the gathered Vec, not a copy");
    assert_eq!(t.dims(), &[4, 3]);
    assert_eq!(t.to_vec2::<f32>().unwrap()[2], [297.0, 298.0, 299.0]);
}

#[test]
fn loader_tensors_own_the_buffers_the_prefetch_threads_gathered() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<u8> = (0..64 * 16).map(|v| (v % 251) as u8).collect();
    let path = write_dense(dir.path(), "x", vec![16], &values);
    let builder = DataLoader::builder().open_stream("x", path).batch_size(8).threads(3).seed(2);
    let mut loader = CandleLoader::build_with(builder, Converter::new(&Device::Cpu), |mut b, conv| {
        let array = b.take("x").unwrap();
        let gathered = array.as_slice::<u8>().unwrap().as_ptr() as usize;
        Ok::<_, Error>((gathered, conv.array(array)?))
    })
    .unwrap();
    for _ in 0..12 {
        let (gathered, t) = loader.next_batch().unwrap().unwrap();
        assert_eq!(cpu_storage_ptr::<u8>(&t), gathered);
    }
}

#[test]
fn shape_and_length_mismatches_are_errors() {
    let err =
        tensor_from_parts(vec![2, 3], ArrayData::F32(vec![0.0; 5]), &Device::Cpu, Widen::Never).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { needs: Some(6), len: 5, .. }), "{err}");
    let err = tensor_from_parts(vec![4], ArrayData::U8(vec![1; 5]), &Device::Cpu, Widen::Exact).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { needs: Some(4), len: 5, .. }), "{err}");
    // A widened dtype is checked before any conversion work.
    let err =
        tensor_from_parts(vec![3], ArrayData::Bool(vec![true; 2]), &Device::Cpu, Widen::Exact).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("[3]"), "{err}");
    // The matching shape is accepted.
    let t = tensor_from_parts(vec![5], ArrayData::U8(vec![1; 5]), &Device::Cpu, Widen::Never).unwrap();
    assert_eq!(t.dims(), &[5]);
}

#[test]
fn dtypes_candle_lacks_are_refused_without_a_widening() {
    let array = DenseArray::from_vec(vec![2], vec![true, false]).unwrap();
    let err = to_tensor(array, &Device::Cpu, Widen::Never).unwrap_err();
    assert!(matches!(err, Error::UnsupportedDType { dtype: loaderx_core::DType::Bool }), "{err}");
}

#[test]
fn tensor_batch_names_the_missing_stream() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_dense(dir.path(), "x", vec![], &[1u32, 2, 3, 4]);
    let builder = DataLoader::builder().open_stream("x", path).batch_size(2);
    let mut loader = CandleLoader::new(builder, Converter::new(&Device::Cpu)).unwrap();
    let mut batch = loader.next_batch().unwrap().unwrap();
    let err = batch.get("y").unwrap_err();
    assert!(matches!(&err, Error::MissingStream { name, available } if name == "y" && available == &["x"]));
    // Worded as burn's batches word it.
    assert_eq!(err.to_string(), r#"stream "y": no such stream in the batch; it has "x""#);
    let x: Tensor = batch.take("x").unwrap();
    assert_eq!(x.dims(), &[2]);
    assert!(matches!(batch.take("x"), Err(Error::MissingStream { name, .. }) if name == "x"), "taken once");
}
