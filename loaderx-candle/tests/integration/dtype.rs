//! Every loaderx dtype round-trips store → tensor → host values, widened ones included.

use std::fmt::Debug;

use half::{bf16, f16};
use loaderx_candle::candle_core::{DType as CandleDType, Device, WithDType};
use loaderx_candle::{Error, Widen, candle_dtype, to_tensor};
use loaderx_core::{DType, DenseSource, Element};

use crate::common::{cpu_storage_ptr, write_dense};

/// Stores `values` as record 0 and their reverse as record 1, gathers rows `[1, 0]`, converts
/// under `widen` and checks dtype, shape, values and (for adopted dtypes) storage identity.
fn round_trip<S: Element, D: WithDType + PartialEq + Debug>(
    values: &[S],
    widen: Widen,
    want_dtype: CandleDType,
    want: &[D],
) {
    let dir = tempfile::tempdir().unwrap();
    let mut records = values.to_vec();
    records.extend(values.iter().rev());
    let path = write_dense(dir.path(), "d", vec![values.len()], &records);
    let source = DenseSource::open(&path).unwrap();
    assert_eq!(source.dtype(), S::DTYPE);
    let array = source.get_batch(&[1, 0]).unwrap();
    let gathered = array.as_bytes().as_ptr() as usize;
    let t = to_tensor(array, &Device::Cpu, widen).unwrap();
    assert_eq!(t.dtype(), want_dtype, "{}", S::DTYPE);
    assert_eq!(t.dims(), &[2, values.len()]);
    let mut expect: Vec<D> = want.iter().rev().copied().collect();
    expect.extend_from_slice(want);
    assert_eq!(t.flatten_all().unwrap().to_vec1::<D>().unwrap(), expect, "{}", S::DTYPE);
    if candle_dtype(S::DTYPE).is_some() {
        assert_eq!(cpu_storage_ptr::<D>(&t), gathered, "{} must be adopted, not copied", S::DTYPE);
    }
}

#[test]
fn dtypes_candle_holds_round_trip_without_conversion() {
    round_trip(&[0u8, 1, 127, 255], Widen::Never, CandleDType::U8, &[0u8, 1, 127, 255]);
    round_trip(&[0u32, 1, 12345, u32::MAX], Widen::Never, CandleDType::U32, &[0u32, 1, 12345, u32::MAX]);
    round_trip(&[i16::MIN, -1, 0, i16::MAX], Widen::Never, CandleDType::I16, &[i16::MIN, -1, 0, i16::MAX]);
    round_trip(&[i32::MIN, -1, 0, i32::MAX], Widen::Never, CandleDType::I32, &[i32::MIN, -1, 0, i32::MAX]);
    round_trip(&[i64::MIN, -1, 0, i64::MAX], Widen::Never, CandleDType::I64, &[i64::MIN, -1, 0, i64::MAX]);
    let h = [f16::from_f32(-1.5), f16::MAX, f16::MIN_POSITIVE, f16::ZERO];
    round_trip(&h, Widen::Never, CandleDType::F16, &h);
    let b = [bf16::from_f32(-1.5), bf16::MAX, bf16::MIN_POSITIVE, bf16::from_f32(3.0e38)];
    round_trip(&b, Widen::Never, CandleDType::BF16, &b);
    let f = [-0.5f32, f32::MAX, f32::MIN_POSITIVE, 1e-3];
    round_trip(&f, Widen::Never, CandleDType::F32, &f);
    let d = [-0.5f64, f64::MAX, f64::MIN_POSITIVE, 1e-300];
    round_trip(&d, Widen::Never, CandleDType::F64, &d);
    // The widening policy never touches a dtype candle holds.
    round_trip(&f, Widen::To(CandleDType::F64), CandleDType::F32, &f);
}

#[test]
fn exact_widening_round_trips_every_value() {
    round_trip(&[i8::MIN, -1, 0, i8::MAX], Widen::Exact, CandleDType::I16, &[-128i16, -1, 0, 127]);
    round_trip(&[0u16, 1, 40000, u16::MAX], Widen::Exact, CandleDType::I32, &[0i32, 1, 40000, 65535]);
    round_trip(
        &[0u64, 1, 1 << 40, i64::MAX as u64],
        Widen::Exact,
        CandleDType::I64,
        &[0i64, 1, 1 << 40, i64::MAX],
    );
    round_trip(&[true, false, false, true], Widen::Exact, CandleDType::U8, &[1u8, 0, 0, 1]);
}

#[test]
fn widening_to_a_chosen_dtype_converts_values() {
    round_trip(
        &[i8::MIN, -1, 0, i8::MAX],
        Widen::To(CandleDType::F32),
        CandleDType::F32,
        &[-128f32, -1., 0., 127.],
    );
    round_trip(
        &[0u16, 1, 40000, u16::MAX],
        Widen::To(CandleDType::U32),
        CandleDType::U32,
        &[0u32, 1, 40000, 65535],
    );
    round_trip(
        &[0u16, 1, 2048, 65504],
        Widen::To(CandleDType::F16),
        CandleDType::F16,
        &[f16::ZERO, f16::ONE, f16::from_f32(2048.0), f16::MAX],
    );
    round_trip(
        &[0u64, 3, 1 << 53, 7],
        Widen::To(CandleDType::F64),
        CandleDType::F64,
        &[0f64, 3., 9007199254740992., 7.],
    );
    round_trip(
        &[true, false, true, true],
        Widen::To(CandleDType::F32),
        CandleDType::F32,
        &[1f32, 0., 1., 1.],
    );
    round_trip(
        &[true, false, true, true],
        Widen::To(CandleDType::BF16),
        CandleDType::BF16,
        &[bf16::ONE, bf16::ZERO, bf16::ONE, bf16::ONE],
    );
    round_trip(&[5i8, 0, 1, 2], Widen::To(CandleDType::U8), CandleDType::U8, &[5u8, 0, 1, 2]);
}

#[test]
fn widening_refuses_values_that_do_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_dense(dir.path(), "big", vec![], &[1u64, u64::MAX, 3]);
    let array = DenseSource::open(&path).unwrap().get_batch(&[0, 1, 2]).unwrap();
    let err = to_tensor(array.clone(), &Device::Cpu, Widen::Exact).unwrap_err();
    assert!(
        matches!(&err, Error::OutOfRange { from: DType::U64, to: CandleDType::I64, index: 1, value } if value == "18446744073709551615"),
        "{err}"
    );
    let err = to_tensor(array, &Device::Cpu, Widen::To(CandleDType::U32)).unwrap_err();
    assert!(matches!(err, Error::OutOfRange { index: 1, .. }), "{err}");

    let path = write_dense(dir.path(), "neg", vec![], &[3i8, -1]);
    let array = DenseSource::open(&path).unwrap().get_batch(&[0, 1]).unwrap();
    let err = to_tensor(array, &Device::Cpu, Widen::To(CandleDType::U8)).unwrap_err();
    assert!(matches!(err, Error::OutOfRange { from: DType::I8, index: 1, .. }), "{err}");
}

#[test]
fn every_loaderx_dtype_has_a_mapping_or_an_exact_widening() {
    for d in DType::ALL {
        let t = Widen::Exact.target(d).unwrap();
        assert!(t.size_in_bytes() >= d.size(), "{d} → {t:?} must not narrow");
        assert_eq!(candle_dtype(d).is_none(), matches!(d, DType::I8 | DType::U16 | DType::U64 | DType::Bool));
    }
}
