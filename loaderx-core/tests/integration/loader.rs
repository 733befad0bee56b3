//! The endless DataLoader: alignment, order, resume, errors, shutdown, recycling.

use std::path::Path;
use std::time::Duration;

use loaderx_core::{
    Batch, Codec, DataLoader, DatasetWriter, DenseSource, Error, LoaderBuilder, SamplerMode, WriteOptions,
};

/// Two aligned streams of `n` records: "x" holds f32 items [i, i+0.5] and "y" the u32 label i.
fn streams(dir: &Path, n: u32) -> LoaderBuilder {
    let mut x =
        DatasetWriter::dense::<f32>(dir.join("x"), vec![2], WriteOptions::new().overwrite(true)).unwrap();
    x.append(&(0..n).flat_map(|i| [i as f32, i as f32 + 0.5]).collect::<Vec<_>>()).unwrap();
    x.finish().unwrap();
    let mut y = DatasetWriter::dense::<u32>(
        dir.join("y"),
        vec![],
        WriteOptions::new().codec(Codec::Raw).overwrite(true),
    )
    .unwrap();
    y.append(&(0..n).collect::<Vec<u32>>()).unwrap();
    y.finish().unwrap();
    DataLoader::builder().open_stream("x", dir.join("x")).open_stream("y", dir.join("y"))
}

fn rows(b: &Batch) -> Vec<u32> {
    b.get("y").unwrap().as_slice::<u32>().unwrap().to_vec()
}

#[test]
fn streams_are_gathered_at_the_same_indices() {
    let dir = tempfile::tempdir().unwrap();
    let mut loader = streams(dir.path(), 1000).batch_size(64).seed(3).threads(3).build().unwrap();
    for _ in 0..20 {
        let b = loader.next_batch().unwrap().unwrap();
        let x = b.get("x").unwrap();
        assert_eq!(x.shape(), &[64, 2]);
        assert_eq!(b.get("y").unwrap().shape(), &[64]);
        let x = x.as_slice::<f32>().unwrap();
        for (k, &i) in b.indices().iter().enumerate() {
            assert_eq!(rows(&b)[k], i);
            assert_eq!(x[2 * k], i as f32);
            assert_eq!(x[2 * k + 1], i as f32 + 0.5);
        }
    }
}

#[test]
fn batches_arrive_in_step_order_whatever_thread_finishes_first() {
    let dir = tempfile::tempdir().unwrap();
    let builder = streams(dir.path(), 500).batch_size(10).seed(11).threads(4).prefetch(1);
    let sampler = builder.clone().build().unwrap().sampler().cloned().unwrap();
    let mut loader = builder
        .build_with(|b: Batch| {
            // Uneven work so later steps often finish first.
            std::thread::sleep(Duration::from_millis((b.step() * 7919 % 5) * 3));
            Ok::<_, Error>((b.step(), rows(&b)))
        })
        .unwrap();
    for s in 0..60 {
        let (step, ids) = loader.next_batch().unwrap().unwrap();
        assert_eq!(step, s);
        assert_eq!(ids, sampler.batch(s));
    }
}

#[test]
fn a_stuck_step_holds_up_only_itself_the_other_threads_take_the_rest_of_the_window() {
    use std::sync::{Arc, Condvar, Mutex};
    let dir = tempfile::tempdir().unwrap();
    // Two threads, prefetch 1: four steps may be claimed ahead of the consumer.
    let builder = streams(dir.path(), 500).batch_size(10).seed(3).threads(2).prefetch(1);
    let done = Arc::new((Mutex::new(Vec::<u64>::new()), Condvar::new()));
    let seen = Arc::clone(&done);
    let mut loader = builder
        .build_with(move |b: Batch| {
            let (lock, cvar) = &*seen;
            if b.step() == 0 {
                // Step 0 waits until steps 1, 2 and 3 are done: with steps dealt out round-robin
                // its own thread would owe step 2, and this would time out.
                let (others, _) = cvar
                    .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(20), |d| {
                        !(1..4).all(|s| d.contains(&s))
                    })
                    .unwrap();
                return Ok::<_, Error>((0, others.clone()));
            }
            lock.lock().unwrap().push(b.step());
            cvar.notify_all();
            Ok((b.step(), vec![]))
        })
        .unwrap();
    let (step, mut others) = loader.next_batch().unwrap().unwrap();
    others.sort_unstable();
    assert_eq!((step, &others[..3]), (0, &[1, 2, 3][..]));
    for s in 1..10 {
        assert_eq!(loader.next_batch().unwrap().unwrap().0, s);
    }
}

/// An absurd prefetch depth or thread count is refused at build, naming the setting (it sized
/// the window of steps in flight: an abort, or memory growing without bound); the largest
/// accepted neither overflows nor stalls.
#[test]
fn an_absurd_prefetch_depth_is_refused_and_the_largest_neither_overflows_nor_stalls() {
    let dir = tempfile::tempdir().unwrap();
    let b = streams(dir.path(), 500).batch_size(10);
    for (what, builder) in
        [("prefetch", b.clone().prefetch(usize::MAX)), ("threads", b.clone().threads(1 << 32))]
    {
        let Err(e) = builder.build() else { panic!("{what}: refused") };
        assert!(matches!(&e, Error::Config { what: w, .. } if *w == what), "{e}");
    }
    // Prefetcher::spawn, which adapters start their own threads with, holds the same limits.
    let spawned = loaderx_core::Prefetcher::spawn("p", 1, usize::MAX, 0, |s: u64| Ok(s));
    assert!(matches!(spawned, Err(Error::Config { what: "prefetch", .. })));
    let spawned = loaderx_core::Prefetcher::spawn("p", 1 << 20, 1, 0, |s: u64| Ok(s));
    assert!(matches!(spawned, Err(Error::Config { what: "threads", .. })));
    let mut loader = b.threads(2).prefetch(1024).build().unwrap();
    for s in 0..5 {
        assert_eq!(loader.next_batch().unwrap().unwrap().step(), s);
    }
}

#[test]
fn resume_from_a_saved_state_equals_the_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let b = streams(dir.path(), 300).batch_size(32).seed(5).mode(SamplerMode::Cyclic).threads(2);
    let full: Vec<Vec<u32>> = b.clone().build().unwrap().take(40).map(|r| rows(&r.unwrap())).collect();
    let mut first = b.clone().build().unwrap();
    let head: Vec<Vec<u32>> = (0..17).map(|_| rows(&first.next_batch().unwrap().unwrap())).collect();
    let saved = serde_json_like(&first.state());
    drop(first);
    let state = restore(&saved);
    assert_eq!(state.step, 17);
    let rest: Vec<Vec<u32>> =
        b.clone().state(state.clone()).build().unwrap().take(23).map(|r| rows(&r.unwrap())).collect();
    assert_eq!([head, rest].concat(), full);
    // Editing the state skips steps.
    let mut skipped = state;
    skipped.step = 30;
    assert_eq!(rows(&b.state(skipped).build().unwrap().next_batch().unwrap().unwrap()), full[30]);
}

// The state is plain data: it survives a serialisation round trip (MessagePack here).
fn serde_json_like(state: &loaderx_core::LoaderState) -> Vec<u8> {
    rmp_serde::to_vec_named(state).unwrap()
}

fn restore(bytes: &[u8]) -> loaderx_core::LoaderState {
    rmp_serde::from_slice(bytes).unwrap()
}

#[test]
fn a_state_only_restores_onto_its_own_streams() {
    let dir = tempfile::tempdir().unwrap();
    let state = streams(dir.path(), 100).batch_size(4).build().unwrap().state();
    let other = tempfile::tempdir().unwrap();
    let err = streams(other.path(), 101).state(state).build().unwrap_err();
    assert!(matches!(err, Error::Config { what: "state", .. }), "{err}");
}

#[test]
fn per_row_rng_replays_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let b = streams(dir.path(), 200).batch_size(8).seed(9);
    let draw =
        |b: Batch| Ok::<_, Error>((0..b.len() as u32).map(|k| b.rng(k).next_u64()).collect::<Vec<u64>>());
    let full: Vec<Vec<u64>> = b.clone().build_with(draw).unwrap().take(10).map(Result::unwrap).collect();
    let resumed: Vec<Vec<u64>> =
        b.start_step(6).build_with(draw).unwrap().take(4).map(Result::unwrap).collect();
    assert_eq!(&full[6..], &resumed[..]);
    assert_ne!(full[0], full[1]);
}

#[test]
fn streams_of_different_lengths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::dense::<u8>(dir.path().join("short"), vec![], WriteOptions::new()).unwrap();
    w.append(&[1u8, 2, 3]).unwrap();
    w.finish().unwrap();
    let err =
        streams(dir.path(), 10).stream("short", DenseSource::open(dir.path().join("short")).unwrap()).build();
    assert!(matches!(err, Err(Error::Config { what: "streams", reason: m }) if m.contains("short")));
    assert!(matches!(DataLoader::builder().build(), Err(Error::Config { what: "streams", .. })));
    assert!(matches!(
        streams(dir.path(), 10).batch_size(0).build(),
        Err(Error::Config { what: "sampler", .. })
    ));
}

#[test]
fn transform_errors_and_panics_surface_and_the_loader_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut loader = streams(dir.path(), 50)
        .batch_size(5)
        .threads(2)
        .build_with(|b: Batch| match b.step() {
            3 => Err("bad step".to_string()),
            5 => panic!("boom"),
            s => Ok(s),
        })
        .unwrap();
    for s in 0..8u64 {
        match (s, loader.next_batch()) {
            (3, Err(e @ Error::Transform { step: 3, .. })) => {
                // What a framework prints (Display alone) names the cause, once in the chain.
                assert_eq!(e.to_string(), "transform failed at step 3: bad step");
                assert_eq!(loaderx_core::error_chain(&e), e.to_string());
            }
            (5, Err(Error::Transform { step: 5, source })) => assert!(source.to_string().contains("boom")),
            (s, Ok(Some(got))) if s != 3 && s != 5 => assert_eq!(got, s),
            (s, other) => panic!("step {s}: {other:?}"),
        }
    }
}

#[test]
fn shards_split_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let b = streams(dir.path(), 400).batch_size(24).seed(2);
    let global: Vec<Vec<u32>> = b.clone().build().unwrap().take(5).map(|r| rows(&r.unwrap())).collect();
    let mut parts: Vec<Vec<Vec<u32>>> = Vec::new();
    for rank in 0..3 {
        let mut l = b.clone().shard(rank, 3).build().unwrap();
        assert_eq!(l.batch_size(), 8);
        parts.push((0..5).map(|_| rows(&l.next_batch().unwrap().unwrap())).collect());
    }
    for s in 0..5 {
        assert_eq!([parts[0][s].clone(), parts[1][s].clone(), parts[2][s].clone()].concat(), global[s]);
    }
}

/// Dropping a loader stops and joins its prefetch threads: the transform they run (holding a
/// token here) is released by the time `drop` returns, and the store files can be removed. A
/// thread left running would still hold the token.
#[test]
fn dropping_the_loader_stops_its_threads() {
    let dir = tempfile::tempdir().unwrap();
    let token = std::sync::Arc::new(());
    for _ in 0..5 {
        let held = std::sync::Arc::clone(&token);
        let mut loader = streams(dir.path().join("d").as_path(), 100)
            .batch_size(10)
            .threads(4)
            .prefetch(1)
            .build_map(move |b| {
                let _ = &held;
                Ok(b)
            })
            .unwrap();
        loader.next_batch().unwrap().unwrap();
        assert!(std::sync::Arc::strong_count(&token) > 1, "the threads hold the transform");
        drop(loader);
        assert_eq!(std::sync::Arc::strong_count(&token), 1, "a prefetch thread outlived its loader");
        std::fs::remove_dir_all(dir.path().join("d")).unwrap();
    }
}

#[test]
fn steady_state_recycles_batch_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let mut loader = streams(dir.path(), 1000).batch_size(50).threads(2).prefetch(2).build().unwrap();
    for _ in 0..200 {
        drop(loader.next_batch().unwrap().unwrap());
    }
    // Two streams, at most threads * (prefetch + 2) buffers each in circulation.
    assert!(loader.buffers_allocated() <= 2 * 2 * 4, "{} buffers allocated", loader.buffers_allocated());
}

/// A stream lent out of its batch comes back to the pool when the loan drops (even after the
/// loader is gone); one kept with `into_array` or `take` does not.
#[test]
fn lent_streams_return_to_the_pool_and_kept_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut loader = streams(dir.path(), 1000).batch_size(50).threads(2).prefetch(2).build().unwrap();
    let mut kept = Vec::new();
    for k in 0..200 {
        let mut batch = loader.next_batch().unwrap().unwrap();
        let want = rows(&batch);
        let x = batch.lend("x").unwrap();
        assert_eq!((x.name(), x.array().shape()), ("x", &[50, 2][..]));
        assert_eq!(x.array().as_slice::<f32>().unwrap()[0], want[0] as f32, "batch {k}");
        if k < 20 {
            kept.push(x.into_array());
        }
    }
    // Twenty kept buffers were replaced by fresh ones; the others circulated (two streams, at
    // most threads * (prefetch + 2) each).
    let allocated = loader.buffers_allocated();
    assert!((20..=20 + 2 * 2 * 4).contains(&allocated), "{allocated} buffers allocated");
    let mut batch = loader.next_batch().unwrap().unwrap();
    let late = batch.lend("x").unwrap();
    drop((batch, loader));
    assert_eq!(late.array().len(), 100, "a loan outlives its loader");
    drop(late);
    assert!(kept.iter().all(|a| a.len() == 100));
}

/// A loader started at the last step it can deliver gives that step, then an error, promptly
/// (its prefetch threads used to wait for room forever, and the loader hung).
#[test]
fn the_last_step_is_delivered_then_the_loader_ends_without_hanging() {
    for threads in [1, 2] {
        let x = loaderx_core::DenseSource::from_vec(vec![], (0..16u32).collect::<Vec<u32>>()).unwrap();
        let mut loader = loaderx_core::LoaderBuilder::new()
            .stream("x", x)
            .batch_size(4)
            .threads(threads)
            .start_step(u64::MAX - 1)
            .build()
            .unwrap();
        assert_eq!(loader.next_batch().unwrap().unwrap().step(), u64::MAX - 1);
        let e = loader.next_batch().unwrap_err();
        assert!(matches!(e, Error::LoaderStopped(_)), "{threads} threads: {e}");
    }
}

/// A loader asked for aligned batches starts every dense stream's elements at that alignment,
/// batch after batch (recycled buffers too), with the same elements as an unaligned loader;
/// taking the elements out moves them to the front. Other alignments are refused at build.
#[test]
fn aligned_batches_start_at_the_alignment_and_hold_the_same_elements() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = DatasetWriter::dense::<u8>(dir.path().join("b"), vec![3], WriteOptions::new()).unwrap();
    b.append(&(0..300u32).map(|i| i as u8).collect::<Vec<u8>>()).unwrap();
    b.finish().unwrap();
    let base =
        streams(dir.path(), 100).open_stream("b", dir.path().join("b")).batch_size(7).seed(5).threads(2);
    let (mut plain, mut aligned) =
        (base.clone().build().unwrap(), base.clone().batch_alignment(64).build().unwrap());
    let mut offset = 0;
    for _ in 0..40 {
        let (p, a) = (plain.next_batch().unwrap().unwrap(), aligned.next_batch().unwrap().unwrap());
        for name in ["x", "y", "b"] {
            let (pa, aa) = (p.get(name).unwrap(), a.get(name).unwrap());
            assert_eq!(aa.as_bytes().as_ptr() as usize % 64, 0, "{name}");
            assert_eq!(
                (aa.shape(), aa.len(), aa.as_bytes()),
                (pa.shape(), pa.len(), pa.as_bytes()),
                "{name}"
            );
            assert_eq!(aa, pa, "{name}");
            offset += aa.head();
        }
        assert_eq!(
            a.get("x").unwrap().as_slice::<f32>().unwrap(),
            p.get("x").unwrap().as_slice::<f32>().unwrap()
        );
        let mut a = a;
        let x = a.take("x").unwrap();
        assert_eq!(x.clone().into_vec::<f32>().unwrap(), p.get("x").unwrap().as_slice::<f32>().unwrap());
        assert_eq!(x.into_parts().1.as_bytes(), p.get("x").unwrap().as_bytes());
    }
    assert!(offset > 0, "some storage started elsewhere: the offsets were exercised");
    for bad in [0, 8, 48, 8192] {
        let e = base.clone().batch_alignment(bad).build().unwrap_err();
        assert!(matches!(e, Error::Config { what: "batch_alignment", .. }), "{bad}: {e}");
    }
}
