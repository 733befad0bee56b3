//! Sequence packing: rows hold exactly the stream's samples in order, whole unless splitting is
//! asked for, never mixed within a segment; segment ids, positions and the loss mask agree; a
//! saved state resumes to the same batches; bad packings are typed errors.

use loaderx_core::{Batch, DataLoader, DenseSource, Error, LoaderBuilder, Pack, RaggedSource, SamplerMode};

/// Record `i` is `len(i)` tokens `i * 10_000 + position`.
fn tokens(n: u32, len: impl Fn(u32) -> u32) -> RaggedSource {
    let records: Vec<Vec<i32>> =
        (0..n).map(|i| (0..len(i)).map(|p| (i * 10_000 + p) as i32).collect()).collect();
    RaggedSource::from_records(vec![], &records).unwrap()
}

fn lengths(i: u32) -> u32 {
    // 1..=70 tokens, some longer than a row of 64.
    1 + (i.wrapping_mul(2_654_435_761) >> 7) % 70
}

/// Each row's segments as (segment id, tokens), checked against the segment and position arrays.
fn segments(b: &Batch, l: usize) -> Vec<Vec<Vec<i32>>> {
    let t = b.get("t").unwrap().as_slice::<i32>().unwrap();
    let seg = b.get("t_segments").unwrap().as_slice::<i32>().unwrap();
    let pos = b.get("t_positions").unwrap().as_slice::<i32>().unwrap();
    let mask = b.get("t_loss_mask").unwrap().as_slice::<u8>().unwrap();
    let rows = t.len() / l;
    (0..rows)
        .map(|r| {
            let mut out: Vec<Vec<i32>> = Vec::new();
            for c in 0..l {
                let k = r * l + c;
                if mask[k] == 0 {
                    assert_eq!((t[k], seg[k], pos[k]), (0, 0, 0), "padding is zeros");
                    continue;
                }
                if seg[k] as usize != out.len() {
                    assert_eq!(seg[k] as usize, out.len() + 1, "segment ids count up from 1 in a row");
                    out.push(Vec::new());
                }
                assert_eq!(t[k] % 10_000, pos[k], "a position is the token's place in its sample");
                out.last_mut().unwrap().push(t[k]);
            }
            out
        })
        .collect()
}

fn builder(split: bool) -> LoaderBuilder {
    DataLoader::builder()
        .ragged_stream("t", tokens(200, lengths))
        .pack("t", Pack::new(64).split(split))
        .unwrap()
        .batch_size(8)
        .mode(SamplerMode::Sequential)
        .threads(2)
}

#[test]
fn split_packing_fills_every_slot_with_the_stream_in_order() {
    let mut loader = builder(true).build().unwrap();
    let mut stream: Vec<i32> = Vec::new();
    for _ in 0..40 {
        let b = loader.next_batch().unwrap();
        assert!(
            b.get("t_loss_mask").unwrap().as_slice::<u8>().unwrap().iter().all(|&m| m == 1),
            "no padding"
        );
        for row in segments(&b, 64) {
            for s in row {
                stream.extend(s);
            }
        }
    }
    let want: Vec<i32> = (0..)
        .flat_map(|k: u32| {
            let i = k % 200;
            (0..lengths(i)).map(move |p| (i * 10_000 + p) as i32)
        })
        .take(stream.len())
        .collect();
    assert_eq!(stream, want, "the tokens of the samples in order, nothing lost or repeated");
}

#[test]
fn whole_packing_keeps_samples_whole_and_in_order() {
    let mut loader = builder(false).build().unwrap();
    let mut next = 0u32;
    let (mut used, mut slots) = (0usize, 0usize);
    for _ in 0..40 {
        let b = loader.next_batch().unwrap();
        for row in segments(&b, 64) {
            slots += 64;
            for s in row {
                let i = next % 200;
                let whole: Vec<i32> = (0..lengths(i).min(64)).map(|p| (i * 10_000 + p) as i32).collect();
                assert_eq!(s, whole, "sample {i} whole (or its first 64 tokens), alone in its segment");
                used += s.len();
                next += 1;
            }
        }
    }
    assert!(next > 40 * 8, "several samples per row");
    assert!(used * 100 / slots >= 50, "{used} of {slots} slots");
}

#[test]
fn a_saved_state_resumes_to_the_same_batches() {
    for split in [false, true] {
        let b = builder(split).mode(SamplerMode::Cyclic).seed(11);
        let mut reference = b.clone().build().unwrap();
        let all: Vec<Vec<i32>> = (0..30)
            .map(|_| reference.next_batch().unwrap().get("t").unwrap().as_slice::<i32>().unwrap().to_vec())
            .collect();
        for at in [0usize, 1, 7, 19] {
            let mut l = b.clone().build().unwrap();
            for _ in 0..at {
                l.next_batch().unwrap();
            }
            let state = l.state();
            assert_eq!(state.step, at as u64);
            let bytes = rmp_serde::to_vec_named(&state).unwrap();
            let restored: loaderx_core::LoaderState = rmp_serde::from_slice(&bytes).unwrap();
            let mut resumed = b.clone().state(restored).build().unwrap();
            for want in &all[at..] {
                assert_eq!(
                    resumed.next_batch().unwrap().get("t").unwrap().as_slice::<i32>().unwrap(),
                    &want[..],
                    "split {split}, resumed at {at}"
                );
            }
        }
    }
}

#[test]
fn bad_packings_are_typed_errors() {
    let ids = || DenseSource::from_vec(vec![], vec![0u32; 200]).unwrap();
    let e = DataLoader::builder().stream("x", ids()).pack("x", Pack::new(8)).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("only an unpadded ragged stream")), "{e}");
    let e =
        DataLoader::builder().ragged_stream("t", tokens(10, lengths)).pack("u", Pack::new(8)).unwrap_err();
    assert!(e.to_string().contains("\"t\""), "lists the streams: {e}");
    let e =
        DataLoader::builder().ragged_stream("t", tokens(10, lengths)).pack("t", Pack::new(0)).unwrap_err();
    assert!(e.to_string().contains("at least one token"), "{e}");
    let two = DataLoader::builder()
        .ragged_stream("t", tokens(200, lengths))
        .stream("x", ids())
        .pack("t", Pack::new(8))
        .unwrap();
    let e = two.build().unwrap_err();
    assert!(e.to_string().contains("only stream"), "{e}");
    let other = builder(false).build().unwrap().state();
    let e = builder(true).state(other).build().unwrap_err();
    assert!(e.to_string().contains("other data"), "a state of another packing: {e}");
}
