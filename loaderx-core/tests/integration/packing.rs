//! Sequence packing: a step holds a run of the stream's samples (split: in row order; whole:
//! first fit, each row's in stream order), whole unless splitting is asked for, never mixed within a segment; segment ids, positions and the loss mask agree; a
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
        .batch_size(8)
        .mode(SamplerMode::Sequential)
        .threads(2)
}

#[test]
fn split_packing_fills_every_slot_with_the_stream_in_order() {
    let mut loader = builder(true).build().unwrap();
    let mut stream: Vec<i32> = Vec::new();
    for _ in 0..40 {
        let b = loader.next_batch().unwrap().unwrap();
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
fn whole_packing_keeps_samples_whole_first_fit() {
    let mut loader = builder(false).build().unwrap();
    let mut next = 0u32; // the stream position the step starts at (record next % 200)
    let (mut used, mut slots) = (0usize, 0usize);
    for step in 0..40 {
        let b = loader.next_batch().unwrap().unwrap();
        let rows = segments(&b, 64);
        let mut positions = Vec::new();
        let mut fill = Vec::new();
        for row in &rows {
            let mut last = None;
            for s in row {
                let i = (s[0] / 10_000) as u32;
                let k = next + (i + 200 - next % 200) % 200;
                let whole: Vec<i32> = (0..lengths(i).min(64)).map(|p| (i * 10_000 + p) as i32).collect();
                assert_eq!(s, &whole, "sample {i} whole (or its first 64 tokens), alone in its segment");
                assert!(last < Some(k), "step {step}: a row holds its samples in stream order");
                last = Some(k);
                positions.push(k);
                used += s.len();
            }
            fill.push(row.iter().map(Vec::len).sum::<usize>());
            slots += 64;
        }
        positions.sort_unstable();
        let n = positions.len() as u32;
        assert_eq!(
            positions,
            (next..next + n).collect::<Vec<_>>(),
            "step {step}: a run of consecutive samples"
        );
        next += n;
        // First fit: the sample that starts the next step fits no row of this one.
        let t = lengths(next % 200).min(64) as usize;
        assert!(
            fill.iter().all(|f| f + t > 64),
            "step {step}: sample {next} ({t} tokens) would fit {fill:?}"
        );
    }
    assert!(next > 40 * 8, "several samples per row");
    assert!(used * 100 / slots >= 80, "first fit over 8 rows: {used} of {slots} slots");
}

#[test]
fn a_saved_state_resumes_to_the_same_batches() {
    for split in [false, true] {
        let b = builder(split).mode(SamplerMode::Cyclic).seed(11);
        let mut reference = b.clone().build().unwrap();
        // About 14 samples a step of 200 records: 60 steps are four passes, so a loader resumed in
        // a later pass (its length cache empty) is checked against one whose cache is warm.
        let all: Vec<Vec<i32>> = (0..60)
            .map(|_| {
                reference.next_batch().unwrap().unwrap().get("t").unwrap().as_slice::<i32>().unwrap().to_vec()
            })
            .collect();
        for at in [0usize, 1, 7, 19, 45] {
            let mut l = b.clone().build().unwrap();
            for _ in 0..at {
                l.next_batch().unwrap().unwrap();
            }
            let state = l.state();
            assert_eq!(state.step, at as u64);
            let bytes = rmp_serde::to_vec_named(&state).unwrap();
            let restored: loaderx_core::LoaderState = rmp_serde::from_slice(&bytes).unwrap();
            let mut resumed = b.clone().state(restored).build().unwrap();
            for want in &all[at..] {
                assert_eq!(
                    resumed.next_batch().unwrap().unwrap().get("t").unwrap().as_slice::<i32>().unwrap(),
                    &want[..],
                    "split {split}, resumed at {at}"
                );
            }
        }
        // Look 105, L105-1: a step without its state delivered step 0's samples as its own; it
        // is refused, naming start_step and state=. Step 0 is where a fresh loader starts.
        match b.clone().start_step(19).build() {
            Err(Error::Config { what: "start_step", reason }) => {
                assert!(reason.contains("state="), "{reason}")
            }
            other => panic!("split {split}: {:?}", other.map(|_| ())),
        }
        let mut at_zero = b.clone().start_step(0).build().unwrap();
        assert_eq!(
            at_zero.next_batch().unwrap().unwrap().get("t").unwrap().as_slice::<i32>().unwrap(),
            &all[0][..]
        );
    }
}

/// A stream read from a store packs to the batches of the same records held in memory (some
/// samples longer than a row, cut).
#[test]
fn a_stored_stream_packs_to_the_batches_of_the_same_records_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    // Mostly under a row of 64 tokens, now and then longer.
    let len = |i: u32| if i.is_multiple_of(37) { 80 } else { 1 + (i.wrapping_mul(2_654_435_761) >> 9) % 40 };
    let mut w = loaderx_core::DatasetWriter::ragged::<i32>(&path, vec![], Default::default()).unwrap();
    for i in 0..300u32 {
        w.append_record(&(0..len(i)).map(|p| (i * 10_000 + p) as i32).collect::<Vec<_>>()).unwrap();
    }
    w.finish().unwrap();
    let build = |source: RaggedSource| {
        DataLoader::builder()
            .ragged_stream("t", source)
            .pack("t", Pack::new(64))
            .batch_size(8)
            .seed(5)
            .threads(2)
            .build()
            .unwrap()
    };
    let mut stored = build(RaggedSource::open(&path).unwrap());
    let mut memory = build(tokens(300, len));
    for step in 0..80 {
        let (a, b) = (stored.next_batch().unwrap().unwrap(), memory.next_batch().unwrap().unwrap());
        assert_eq!(a.indices(), b.indices(), "step {step}");
        for name in ["t", "t_segments", "t_positions", "t_loss_mask"] {
            assert_eq!(a.get(name).unwrap().data(), b.get(name).unwrap().data(), "step {step}, {name}");
        }
        segments(&a, 64);
    }
}

/// The planner reads lengths a block of records at a time, but a damaged entry is still an
/// error naming it at the step that plans it, not at the first step of its block.
#[test]
fn a_damaged_entry_fails_the_step_that_plans_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut w = loaderx_core::DatasetWriter::ragged::<i32>(&path, vec![], Default::default()).unwrap();
    for i in 0..200u32 {
        w.append_record(&(0..lengths(i)).map(|p| (i * 10_000 + p) as i32).collect::<Vec<_>>()).unwrap();
    }
    w.finish().unwrap();
    // Its codec byte: an entry that no length can be read from.
    let (index, at) = crate::common::entry_at(&path, 150);
    crate::common::patch(&index, at + 20, &[9]);
    let mut loader = DataLoader::builder()
        .ragged_stream("t", RaggedSource::open(&path).unwrap())
        .pack("t", Pack::new(64))
        .batch_size(8)
        .mode(SamplerMode::Sequential)
        .threads(1)
        .build()
        .unwrap();
    let mut seen = 0;
    let err = loop {
        match loader.next_batch() {
            Ok(b) => seen += segments(&b.expect("endless"), 64).iter().map(Vec::len).sum::<usize>(),
            Err(e) => break e,
        }
    };
    // The planner looks 64 samples ahead: the steps up to that far before record 150 come out.
    assert!(seen >= 150 - 64, "the steps before record 150 are produced ({seen} samples)");
    assert!(matches!(err, Error::CorruptRecord { index: 150, .. }), "{err:?}");
}

#[test]
fn bad_packings_are_typed_errors() {
    let ids = || DenseSource::from_vec(vec![], vec![0u32; 200]).unwrap();
    let e = DataLoader::builder().stream("x", ids()).pack("x", Pack::new(8)).build().unwrap_err();
    assert!(
        matches!(&e, Error::Config { what: "pack", reason: m } if m.contains("only an unpadded ragged stream")),
        "{e}"
    );
    let e = DataLoader::builder()
        .ragged_stream("t", tokens(10, lengths))
        .pack("u", Pack::new(8))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("\"t\""), "lists the streams: {e}");
    let e = DataLoader::builder()
        .ragged_stream("t", tokens(10, lengths))
        .pack("t", Pack::new(0))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("at least one token"), "{e}");
    let two = DataLoader::builder()
        .ragged_stream("t", tokens(200, lengths))
        .stream("x", ids())
        .pack("t", Pack::new(8));
    let e = two.build().unwrap_err();
    assert!(e.to_string().contains("only stream"), "{e}");
    let other = builder(false).build().unwrap().state();
    let e = builder(true).state(other).build().unwrap_err();
    assert!(e.to_string().contains("other data"), "a state of another packing: {e}");
    // Nothing but empty samples: an error, not a step that never ends.
    let empty = DataLoader::builder().ragged_stream("t", tokens(20, |_| 0)).pack("t", Pack::new(8));
    let e = empty.clone().batch_size(2).build().unwrap().next_batch().unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    // The same when samples are cut at the rows' ends (it hung: no sample ever filled a row).
    let split =
        DataLoader::builder().ragged_stream("t", tokens(20, |_| 0)).pack("t", Pack::new(8).split(true));
    let e = split.batch_size(2).build().unwrap().next_batch().unwrap_err();
    assert!(e.to_string().contains("every record of the packed stream is empty"), "{e}");
    // In order over two ranks, rank 0 reads only the even records: all empty, its steps could
    // never be made, though rank 1's can.
    for split in [false, true] {
        let half = DataLoader::builder()
            .ragged_stream("t", tokens(20, |i| if i % 2 == 0 { 0 } else { 3 }))
            .pack("t", Pack::new(8).split(split))
            .mode(SamplerMode::Sequential)
            .batch_size(2);
        let e = half.clone().shard(0, 2).build().unwrap().next_batch().unwrap_err();
        assert!(e.to_string().contains("every record rank 0 of 2 packs is empty"), "split {split}: {e}");
        assert!(half.shard(1, 2).build().unwrap().next_batch().is_ok(), "split {split}");
    }
    // Shuffled, a stream with one record of tokens in many empty ones packs it.
    let one = DataLoader::builder()
        .ragged_stream("t", tokens(50, |i| u32::from(i == 17) * 3))
        .pack("t", Pack::new(4).split(true))
        .batch_size(2);
    let b = one.shard(1, 2).build().unwrap().next_batch().unwrap().unwrap();
    assert!(b.get("t_segments").unwrap().as_slice::<i32>().unwrap().iter().any(|&s| s > 0));
}

/// Length bucketing: a window's batches hold exactly the records of the sampler's batches of
/// that window, with far less padding; batches are pure in (seed, step) and the ranks' union
/// is the global batch.
#[test]
fn bucketing_regroups_a_window_by_length_and_pads_less() {
    use loaderx_core::Pad;
    let src = || tokens(4000, lengths);
    let plain =
        DataLoader::builder().ragged_stream("t", src()).pad("t", Pad::longest()).batch_size(32).seed(5);
    let bucketed = plain.clone().bucket("t", 16);
    let waste = |b: LoaderBuilder| -> (Vec<Vec<u32>>, f64) {
        let mut l = b.build().unwrap();
        let (mut pad, mut all, mut ids) = (0usize, 0usize, Vec::new());
        for _ in 0..64 {
            let b = l.next_batch().unwrap().unwrap();
            let mask = b.get("t_mask").unwrap().as_slice::<u8>().unwrap();
            pad += mask.iter().filter(|&&m| m == 0).count();
            all += mask.len();
            ids.push(b.indices().to_vec());
        }
        (ids, pad as f64 / all as f64)
    };
    let (plain_ids, plain_waste) = waste(plain.clone());
    let (bucket_ids, bucket_waste) = waste(bucketed.clone());
    for w in 0..4 {
        let mut a: Vec<u32> = plain_ids[w * 16..(w + 1) * 16].concat();
        let mut b: Vec<u32> = bucket_ids[w * 16..(w + 1) * 16].concat();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "window {w} holds the sampler's records");
    }
    assert!(bucket_waste < plain_waste / 3.0, "padding {bucket_waste:.3} bucketed against {plain_waste:.3}");
    let again = waste(bucketed.clone()).0;
    assert_eq!(again, bucket_ids, "pure in (seed, step)");
    let resumed =
        bucketed.clone().start_step(37).build().unwrap().next_batch().unwrap().unwrap().indices().to_vec();
    assert_eq!(resumed, bucket_ids[37]);
    for world in [2u32, 4] {
        let mut union: Vec<u32> = (0..world)
            .flat_map(|r| {
                bucketed
                    .clone()
                    .shard(r, world)
                    .start_step(21)
                    .build()
                    .unwrap()
                    .next_batch()
                    .unwrap()
                    .unwrap()
                    .indices()
                    .to_vec()
            })
            .collect();
        union.sort_unstable();
        let mut want = bucket_ids[21].clone();
        want.sort_unstable();
        assert_eq!(union, want, "world {world}");
    }
    assert!(matches!(
        plain.clone().bucket("t", 0).build(),
        Err(Error::Config { what: "bucket", reason }) if reason.contains("at least one step")
    ));
    assert!(plain.bucket("nope", 4).build().unwrap_err().to_string().contains("\"t\""));
}

/// A bucketing window or a packed row far past memory is refused when the loader is built, not
/// an allocation that aborts at the first step.
#[test]
fn windows_and_rows_past_memory_are_refused_at_build() {
    let records: Vec<Vec<i32>> = (0..50).map(|i| vec![i; (i % 5 + 1) as usize]).collect();
    let tokens = loaderx_core::RaggedSource::from_records(vec![], &records).unwrap();
    let b = loaderx_core::LoaderBuilder::new().ragged_stream("t", tokens).batch_size(4);
    let e = b.clone().pad("t", loaderx_core::Pad::longest()).bucket("t", u32::MAX).build().err().unwrap();
    assert!(matches!(e, loaderx_core::Error::Config { what: "bucket", .. }), "{e}");
    let e = b.clone().pack("t", loaderx_core::Pack::new(u32::MAX)).build().err().unwrap();
    assert!(matches!(e, loaderx_core::Error::Config { what: "pack", .. }), "{e}");
    assert!(b.pack("t", loaderx_core::Pack::new(64)).build().is_ok());
}
