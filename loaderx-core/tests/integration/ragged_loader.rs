//! Ragged streams in the loader: records as offsets + values, or padded on the prefetch threads
//! to `[B, L]` with lengths and a mask.

use loaderx_core::{DataLoader, DatasetWriter, Error, Pad, Pass, RaggedSource, WriteOptions};

/// Record `i`: `i % 13 + 1` tokens, token `j` = `1000 i + j`.
fn tokens(i: u32) -> Vec<i32> {
    (0..(i % 13 + 1) as i32).map(|j| 1000 * i as i32 + j).collect()
}

fn ragged_dataset(dir: &std::path::Path, n: u32) -> std::path::PathBuf {
    let out = dir.join("tokens");
    let mut w = DatasetWriter::ragged::<i32>(&out, vec![], WriteOptions::new()).unwrap();
    for i in 0..n {
        w.append_record(&tokens(i)).unwrap();
    }
    w.finish().unwrap();
    out
}

#[test]
fn a_ragged_stream_is_opened_and_batched_as_offsets_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = ragged_dataset(dir.path(), 200);
    let mut loader = DataLoader::builder().open_stream("t", &path).batch_size(16).seed(2).build().unwrap();
    for _ in 0..20 {
        let b = loader.next_batch().unwrap().unwrap();
        let r = b.get_ragged("t").unwrap();
        assert_eq!(r.len(), 16);
        for (k, &i) in b.indices().iter().enumerate() {
            assert_eq!(r.record::<i32>(k).unwrap(), tokens(i), "record {i}");
        }
        assert!(b.get("t").is_none(), "unpadded: no dense array");
    }
}

#[test]
fn a_padded_ragged_stream_is_dense_with_lengths_and_a_mask() {
    let dir = tempfile::tempdir().unwrap();
    let path = ragged_dataset(dir.path(), 200);
    let builder = DataLoader::builder().open_stream("t", &path).batch_size(16).seed(2);
    let mut longest = builder.clone().pad("t", Pad::longest().value(-1.0)).build().unwrap();
    let mut fixed = builder.clone().pad("t", Pad::length(8).truncate(true)).build().unwrap();
    for _ in 0..10 {
        let (a, b) = (longest.next_batch().unwrap().unwrap(), fixed.next_batch().unwrap().unwrap());
        assert_eq!(a.indices(), b.indices());
        let l = a.get("t").unwrap().shape()[1];
        let values = a.get("t").unwrap().as_slice::<i32>().unwrap();
        let lengths = a.get("t_lengths").unwrap().as_slice::<i64>().unwrap();
        let mask = a.get("t_mask").unwrap().as_slice::<u8>().unwrap();
        assert_eq!(l as i64, *lengths.iter().max().unwrap(), "padded to the longest");
        for (k, &i) in a.indices().iter().enumerate() {
            let want = tokens(i);
            assert_eq!(lengths[k] as usize, want.len());
            assert_eq!(&values[k * l..k * l + want.len()], &want[..]);
            assert!(values[k * l + want.len()..(k + 1) * l].iter().all(|&v| v == -1));
            assert!(mask[k * l..(k + 1) * l].iter().enumerate().all(|(j, &m)| m == u8::from(j < want.len())));
        }
        assert_eq!(b.get("t").unwrap().shape(), &[16, 8]);
        let bl = b.get("t_lengths").unwrap().as_slice::<i64>().unwrap();
        for (k, &i) in b.indices().iter().enumerate() {
            assert_eq!(bl[k] as usize, tokens(i).len().min(8), "truncated to 8");
        }
    }
    let strict = builder.clone().pad("t", Pad::length(4)).pass(Pass::ordered()).build().unwrap();
    let errors: Vec<Error> = strict.filter_map(Result::err).collect();
    assert!(
        !errors.is_empty()
            && errors.iter().all(
                |e| matches!(e, Error::InvalidArgument(m) if m.contains("stream \"t\"") && m.contains("rows"))
            )
    );
    assert!(
        matches!(builder.clone().pad("nope", Pad::longest()).build(), Err(Error::Config { what: "pad", reason: m }) if m.contains("\"t\"")),
        "the error lists the streams"
    );
}

#[test]
fn dense_and_ragged_streams_share_rows_and_memory_sources_pad_too() {
    let records: Vec<Vec<f32>> = (0..50).map(|i| vec![i as f32; (i % 4 + 1) * 2]).collect();
    let feats = RaggedSource::from_records(vec![2], &records).unwrap();
    let labels = loaderx_core::DenseSource::from_vec(vec![], (0..50u8).collect::<Vec<_>>()).unwrap();
    let loader = DataLoader::builder()
        .ragged_stream("f", feats)
        .stream("y", labels)
        .pad("f", Pad::longest())
        .batch_size(7)
        .pass(Pass::shuffled())
        .build()
        .unwrap();
    let mut seen = 0;
    for b in loader {
        let b = b.unwrap();
        let (f, y) = (b.get("f").unwrap(), b.get("y").unwrap().as_slice::<u8>().unwrap());
        assert_eq!(f.shape()[2], 2, "rows of 2");
        let l = f.shape()[1];
        let v = f.as_slice::<f32>().unwrap();
        for (k, &label) in y.iter().enumerate() {
            assert_eq!(v[k * l * 2], f32::from(label), "row {k}: the label's record");
        }
        seen += y.len();
    }
    assert_eq!(seen, 50);
}

/// A padded length far past memory (a caller's number) is an error naming it, never an abort
/// on the allocation.
#[test]
fn a_padded_length_past_memory_is_an_error_not_an_abort() {
    let tokens = loaderx_core::RaggedSource::from_records(vec![], &[vec![1i32, 2], vec![3]]).unwrap();
    let batch = tokens.get_batch(&[0, 1]).unwrap();
    for rows in [usize::MAX / 2, 1 << 42] {
        let e = batch.pad(loaderx_core::Pad::length(rows)).unwrap_err();
        assert!(
            matches!(e, loaderx_core::Error::InvalidArgument(ref m) if m.contains("pad to fewer rows")),
            "{e}"
        );
    }
    assert_eq!(batch.pad(loaderx_core::Pad::length(3)).unwrap().values.shape(), &[2, 3]);
}
