//! CUDA devices (feature `cuda`): every dtype and a whole loader through pinned staging.
//!
//! These run only where a CUDA device is visible (`Device::new_cuda(0)` succeeds); elsewhere each
//! says so on stderr and returns. CI builds without the feature.

use half::{bf16, f16};
use loaderx_candle::candle_core::{DType as CandleDType, Device, WithDType};
use loaderx_candle::{CandleLoader, Converter, Widen};
use loaderx_core::{DataLoader, DenseArray, Element};

use crate::common::write_dense;

fn cuda() -> Option<Device> {
    match Device::new_cuda(0) {
        Ok(device) => Some(device),
        Err(e) => {
            eprintln!("no CUDA device ({e}): test not run");
            None
        }
    }
}

/// `values` through a CUDA converter (twice, so the second reuses the pooled pinned buffer) and
/// back to the host.
fn round_trip<S: Element, D: WithDType + PartialEq + std::fmt::Debug>(
    conv: &Converter,
    values: &[S],
    want_dtype: CandleDType,
    want: &[D],
) {
    for _ in 0..2 {
        let t = conv.array(DenseArray::from_vec(vec![values.len()], values.to_vec()).unwrap()).unwrap();
        assert!(t.device().is_cuda());
        assert_eq!(t.dtype(), want_dtype, "{}", S::DTYPE);
        assert_eq!(t.to_vec1::<D>().unwrap(), want, "{}", S::DTYPE);
    }
}

#[test]
fn every_dtype_round_trips_through_pinned_staging() {
    let Some(device) = cuda() else { return };
    let conv = Converter::new(&device).widen(Widen::Exact);
    round_trip(&conv, &[0u8, 1, 255], CandleDType::U8, &[0u8, 1, 255]);
    round_trip(&conv, &[0u32, u32::MAX], CandleDType::U32, &[0u32, u32::MAX]);
    round_trip(&conv, &[i16::MIN, 0, i16::MAX], CandleDType::I16, &[i16::MIN, 0, i16::MAX]);
    round_trip(&conv, &[i32::MIN, 0, i32::MAX], CandleDType::I32, &[i32::MIN, 0, i32::MAX]);
    round_trip(&conv, &[i64::MIN, 0, i64::MAX], CandleDType::I64, &[i64::MIN, 0, i64::MAX]);
    let h = [f16::from_f32(-1.5), f16::MAX];
    round_trip(&conv, &h, CandleDType::F16, &h);
    let b = [bf16::from_f32(-1.5), bf16::MAX];
    round_trip(&conv, &b, CandleDType::BF16, &b);
    round_trip(&conv, &[-0.5f32, f32::MAX], CandleDType::F32, &[-0.5f32, f32::MAX]);
    round_trip(&conv, &[-0.5f64, f64::MAX], CandleDType::F64, &[-0.5f64, f64::MAX]);
    // Widened on the host, then staged.
    round_trip(&conv, &[i8::MIN, 0, i8::MAX], CandleDType::I16, &[-128i16, 0, 127]);
    round_trip(&conv, &[true, false], CandleDType::U8, &[1u8, 0]);
    // An empty stream: no pinned allocation of zero bytes.
    let empty = conv.array(DenseArray::from_vec(vec![0, 3], Vec::<f32>::new()).unwrap()).unwrap();
    assert_eq!((empty.dims(), empty.device().is_cuda()), (&[0usize, 3][..], true));
}

#[test]
fn a_cuda_loader_delivers_every_batch_intact_in_step_order() {
    let Some(device) = cuda() else { return };
    let dir = tempfile::tempdir().unwrap();
    // 4,096 records of 1,024 f32 each (4 MiB per batch of 1,024): pinned buffers are reused while
    // earlier copies may still be in flight, which would show as rows from another batch.
    let x: Vec<f32> = (0..4096u32).flat_map(|i| (0..1024u32).map(move |j| (i * 1024 + j) as f32)).collect();
    let path = write_dense(dir.path(), "x", vec![1024], &x);
    let builder =
        DataLoader::builder().open_stream("x", path).batch_size(1024).seed(5).threads(2).prefetch(4);
    let loader = CandleLoader::new(builder, Converter::new(&device)).unwrap();
    for (want, batch) in loader.take(32).enumerate() {
        let batch = batch.unwrap();
        assert_eq!(batch.step(), want as u64);
        let t = batch.get("x").unwrap();
        assert!(t.device().is_cuda());
        let rows = t.to_vec2::<f32>().unwrap();
        for (row, &i) in rows.iter().zip(batch.indices()) {
            let expect: Vec<f32> = (0..1024).map(|j| (i * 1024 + j) as f32).collect();
            assert_eq!(row, &expect, "step {want}, record {i}");
        }
    }
}

/// The staged loader: gathered straight into pinned slots, copied on a side stream, slots
/// released by events. Every batch equals the CPU loader's (two dtypes), in step order, and a
/// resumed loader goes on where the saved state says.
#[test]
fn a_staged_cuda_loader_matches_the_cpu_loader_and_resumes() {
    let Some(device) = cuda() else { return };
    let dir = tempfile::tempdir().unwrap();
    let x: Vec<f32> = (0..2048u32).flat_map(|i| (0..512u32).map(move |j| (i * 512 + j) as f32)).collect();
    let y: Vec<i64> = (0..2048i64).map(|i| i * 7 - 3).collect();
    let (xp, yp) = (write_dense(dir.path(), "x", vec![512], &x), write_dense(dir.path(), "y", vec![], &y));
    let builder = || {
        DataLoader::builder()
            .open_stream("x", &xp)
            .open_stream("y", &yp)
            .batch_size(256)
            .seed(11)
            .threads(3)
            .prefetch(2)
    };
    let mut staged = loaderx_candle::CudaLoader::new(builder(), &device).unwrap();
    let mut cpu = CandleLoader::new(builder(), Converter::new(&Device::Cpu)).unwrap();
    for step in 0..24u64 {
        let (g, w) = (staged.next_batch().unwrap().unwrap(), cpu.next_batch().unwrap().unwrap());
        assert_eq!((g.step(), g.indices()), (step, w.indices()));
        assert!(g.get("x").unwrap().device().is_cuda());
        assert_eq!(
            g.get("x").unwrap().to_vec2::<f32>().unwrap(),
            w.get("x").unwrap().to_vec2::<f32>().unwrap()
        );
        assert_eq!(
            g.get("y").unwrap().to_vec1::<i64>().unwrap(),
            w.get("y").unwrap().to_vec1::<i64>().unwrap()
        );
    }
    let (free, leased, in_flight) = staged.slots();
    assert!(free + leased + in_flight >= 4, "the ring holds depth + 2 slots or more");
    let state = staged.state();
    drop(staged);
    let mut resumed = loaderx_candle::CudaLoader::new(builder().state(state), &device).unwrap();
    let (g, w) = (resumed.next_batch().unwrap().unwrap(), cpu.next_batch().unwrap().unwrap());
    assert_eq!((g.step(), g.indices()), (24, w.indices()));
}
