//! Helpers shared by the test modules.

use std::path::{Path, PathBuf};

use loaderx_candle::candle_core::{Storage, Tensor};
use loaderx_core::{DatasetWriter, Element, WriteOptions};

/// Writes `values` as a dense dataset of items shaped `item_shape` into `dir/name`.
pub fn write_dense<T: Element>(dir: &Path, name: &str, item_shape: Vec<usize>, values: &[T]) -> PathBuf {
    let path = dir.join(name);
    let mut w = DatasetWriter::dense::<T>(&path, item_shape, WriteOptions::new()).unwrap();
    w.append(values).unwrap();
    w.finish().unwrap();
    path
}

/// Address of the first element of a CPU tensor's storage.
pub fn cpu_storage_ptr<T: loaderx_candle::candle_core::WithDType>(t: &Tensor) -> usize {
    let (storage, layout) = t.storage_and_layout();
    assert_eq!(layout.start_offset(), 0);
    match &*storage {
        Storage::Cpu(cpu) => cpu.as_slice::<T>().unwrap().as_ptr() as usize,
        _ => panic!("not a CPU tensor"),
    }
}
