//! Finite passes: every record exactly once per pass, in order or shuffled, the last batch
//! partial or dropped, sharded over ranks without duplicates, resumable; steps per epoch.

use loaderx_core::{Batch, DataLoader, DenseSource, Error, LoaderBuilder, Pass, SamplerMode};

fn ids(n: u32) -> DenseSource {
    DenseSource::from_vec(vec![], (0..n).collect::<Vec<u32>>()).unwrap()
}

fn rows(b: &Batch) -> Vec<u32> {
    b.get("id").unwrap().as_slice::<u32>().unwrap().to_vec()
}

fn run(builder: LoaderBuilder) -> Vec<Vec<u32>> {
    builder.build().unwrap().map(|b| rows(&b.unwrap())).collect()
}

#[test]
fn an_ordered_pass_sees_every_record_once_with_a_partial_last_batch() {
    // 1,000 items at batch 64: 16 steps, the last of 40 (the endless sequential mode wraps
    // around and shows 24 items twice).
    let builder = DataLoader::builder().stream("id", ids(1000)).batch_size(64).pass(Pass::ordered());
    let loader = builder.clone().build().unwrap();
    assert_eq!((loader.steps(), loader.num_items(), loader.steps_per_epoch()), (Some(16), Some(1000), 16));
    let batches = run(builder.clone());
    assert_eq!(batches.len(), 16);
    assert_eq!(batches[15].len(), 40);
    assert_eq!(batches.concat(), (0..1000).collect::<Vec<_>>());
    let dropped = run(builder.pass(Pass::ordered().drop_last(true)));
    assert_eq!(dropped.len(), 15);
    assert_eq!(dropped.concat(), (0..960).collect::<Vec<_>>());
}

#[test]
fn a_shuffled_pass_is_a_permutation_fixed_by_seed_and_epoch() {
    let builder = |seed, epoch| {
        DataLoader::builder()
            .stream("id", ids(1000))
            .batch_size(64)
            .seed(seed)
            .pass(Pass::shuffled().epoch(epoch))
    };
    let a = run(builder(7, 0)).concat();
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1000).collect::<Vec<_>>(), "every record once");
    assert_ne!(a, (0..1000).collect::<Vec<_>>(), "shuffled");
    assert_eq!(run(builder(7, 0)).concat(), a, "the same seed and epoch: the same order");
    assert_ne!(run(builder(7, 1)).concat(), a, "another epoch: another order");
    assert_ne!(run(builder(8, 0)).concat(), a, "another seed: another order");
}

#[test]
fn ranks_together_see_every_record_once() {
    for (n, batch, world) in [(1000u32, 64u32, 4u32), (10, 8, 4), (3, 4, 4), (97, 6, 3)] {
        let mut all = Vec::new();
        let mut items = 0;
        for rank in 0..world {
            let builder = DataLoader::builder()
                .stream("id", ids(n))
                .batch_size(batch as usize)
                .shard(rank, world)
                .seed(3)
                .pass(Pass::shuffled());
            items += builder.clone().build().unwrap().num_items().unwrap();
            all.extend(run(builder).concat());
        }
        assert_eq!(items, u64::from(n));
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>(), "{n} records, batch {batch}, {world} ranks");
    }
}

#[test]
fn a_pass_resumes_from_its_state_and_ends_cleanly() {
    let builder = DataLoader::builder().stream("id", ids(100)).batch_size(16).pass(Pass::shuffled()).seed(1);
    let whole = run(builder.clone());
    let mut loader = builder.clone().build().unwrap();
    let first: Vec<Vec<u32>> = (0..3).map(|_| rows(&loader.next_batch().unwrap().unwrap())).collect();
    let state = loader.state();
    assert_eq!((state.step, state.order.pass().map(|p| p.len)), (3, Some(100)));
    let saved = rmp_serde::to_vec(&state).unwrap();
    let rest = run(DataLoader::builder()
        .stream("id", ids(100))
        .batch_size(16)
        .state(rmp_serde::from_slice(&saved).unwrap()));
    assert_eq!([first, rest].concat(), whole);
    let mut done = builder.clone().build().unwrap();
    for _ in 0..7 {
        done.next_batch().unwrap().unwrap();
    }
    assert!(matches!(done.next_batch(), Ok(None)), "a pass over is Ok(None), not an error");
    assert!(matches!(done.next_batch(), Ok(None)), "and stays over");
    assert!(done.next().is_none());
    // Resumed at its end (a finished pass's state) it is over at once; past its end (7 steps
    // of 16 over 100 records) no batch is named, and the builder says so (look 96).
    let mut at_end = builder.clone().start_step(7).build().unwrap();
    assert!(matches!(at_end.next_batch(), Ok(None)));
    for (epochs, step) in [(1, 8), (3, 22), (1, u64::MAX - 1)] {
        match builder.clone().pass(Pass::shuffled().epochs(Some(epochs))).start_step(step).build() {
            Err(Error::Config { what: "start_step", reason }) => {
                assert!(
                    reason.contains(&format!("past the end of this finite pass, step {}", 7 * epochs)),
                    "{reason}"
                );
            }
            other => panic!("{epochs} epochs from step {step}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn a_pass_may_hold_fewer_records_than_a_batch_and_epochs_are_counted_for_every_mode() {
    assert_eq!(
        run(DataLoader::builder().stream("id", ids(5)).batch_size(64).pass(Pass::ordered())),
        vec![vec![0, 1, 2, 3, 4]]
    );
    let endless =
        |mode| DataLoader::builder().stream("id", ids(1000)).batch_size(64).mode(mode).build().unwrap();
    assert_eq!(endless(SamplerMode::Cyclic).steps_per_epoch(), 15, "the remainder dropped");
    assert_eq!(endless(SamplerMode::Sequential).steps_per_epoch(), 16);
    assert_eq!(endless(SamplerMode::Iid).steps_per_epoch(), 16);
    assert_eq!(endless(SamplerMode::Cyclic).steps(), None);
}

/// The run fingerprint: equal on every rank of one run (rank and step left out), different for
/// other data, another seed, another batch or another pass; and the endless sampler's union of
/// ranks at a step is the world-1 global batch for W in {1, 2, 3, 4, 8}.
#[test]
fn ranks_agree_on_the_run_fingerprint_and_their_union_is_the_global_batch() {
    let base = |world: u32, rank: u32| {
        DataLoader::builder()
            .stream("id", ids(5000))
            .batch_size(48)
            .seed(11)
            .mode(SamplerMode::Cyclic)
            .shard(rank, world)
    };
    let f = base(4, 0).run_fingerprint().unwrap();
    assert_eq!(base(4, 3).run_fingerprint().unwrap(), f, "another rank of the same run");
    assert_eq!(base(4, 2).start_step(70).run_fingerprint().unwrap(), f, "another step");
    for other in [
        base(4, 0).seed(12),
        base(4, 0).batch_size(96),
        base(2, 0),
        DataLoader::builder().stream("id", ids(5001)).batch_size(48).seed(11).shard(0, 4),
        base(4, 0).pass(Pass::ordered()),
    ] {
        assert_ne!(other.run_fingerprint().unwrap(), f);
    }
    assert!(
        matches!(
            base(4, 4).run_fingerprint(),
            Err(Error::Config { what: "sampler", reason }) if reason.contains("rank 4 is not below world 4")
        ),
        "rank 4 of 4"
    );

    let global = |step: u64| -> Vec<u32> {
        rows(&base(1, 0).start_step(step).build().unwrap().next_batch().unwrap().unwrap())
    };
    for world in [1u32, 2, 3, 4, 8] {
        for step in [0u64, 1, 103, 104, 5000] {
            let want = global(step);
            let mut union = Vec::new();
            for rank in 0..world {
                let b = base(world, rank).batch_size(48).start_step(step);
                union.extend(rows(&b.build().unwrap().next_batch().unwrap().unwrap()));
            }
            let mut a = want.clone();
            a.sort_unstable();
            union.sort_unstable();
            assert_eq!(union, a, "world {world}, step {step}");
        }
    }
}

/// A run restarted with another global batch resumes from the samples consumed: in cyclic mode
/// the new first batch starts at the old run's last whole new-batch boundary inside the same
/// cycle (nothing lost, fewer than B' seen again); a stream of rows (sequential) continues at
/// floor(step * B / B').
#[test]
fn a_changed_global_batch_resumes_from_the_samples_consumed() {
    let base = |b: u32, mode: SamplerMode| {
        DataLoader::builder().stream("id", ids(5000)).batch_size(b as usize).seed(3).mode(mode)
    };
    let old_batch = |mode, step: u64| -> Vec<u32> {
        rows(&base(48, mode).start_step(step).build().unwrap().next_batch().unwrap().unwrap())
    };
    let mut old = base(48, SamplerMode::Cyclic).start_step(13).build().unwrap();
    old.next_batch().unwrap().unwrap();
    let state = old.state(); // step 14: 14 * 48 = 672 samples of cycle 0 consumed
    let doubled = state.rebatched(96).unwrap();
    assert_eq!(doubled.step, 7);
    let first =
        rows(&base(96, SamplerMode::Cyclic).state(doubled).build().unwrap().next_batch().unwrap().unwrap());
    assert_eq!(
        first,
        [old_batch(SamplerMode::Cyclic, 14), old_batch(SamplerMode::Cyclic, 15)].concat(),
        "exactly where it stopped"
    );
    let halved = state.rebatched(32).unwrap();
    assert_eq!(halved.step, 21, "672 / 32");
    let h =
        rows(&base(32, SamplerMode::Cyclic).state(halved).build().unwrap().next_batch().unwrap().unwrap());
    assert_eq!(h, old_batch(SamplerMode::Cyclic, 14)[..32], "the next 32 of the same cycle");
    // 5000 / 48 = 104 steps per cycle: step 110 is cycle 1, 6 steps (288 samples) in.
    let later =
        base(48, SamplerMode::Cyclic).start_step(110).build().unwrap().state().rebatched(100).unwrap();
    assert_eq!(later.step, 50 + 2, "cycle 1 (50 steps of 100 each) plus floor(288 / 100)");
    let re =
        rows(&base(100, SamplerMode::Cyclic).state(later).build().unwrap().next_batch().unwrap().unwrap());
    let mut seen: Vec<u32> = (104..110).flat_map(|s| old_batch(SamplerMode::Cyclic, s)).collect();
    seen.extend((110..113).flat_map(|s| old_batch(SamplerMode::Cyclic, s)));
    assert_eq!(re, seen[200..300], "cycle 1 from position 200: 88 of them seen again, none lost");
    let seq =
        base(48, SamplerMode::Sequential).start_step(10).build().unwrap().state().rebatched(40).unwrap();
    assert_eq!(seq.step, 12);
    let rebatched = |b: u32| base(48, SamplerMode::Cyclic).build().unwrap().state().rebatched(b);
    assert!(matches!(rebatched(0), Err(Error::InvalidArgument(m)) if m.contains("a global batch of 0")));
    assert!(
        matches!(rebatched(6000), Err(Error::InvalidArgument(m)) if m.contains("no whole batch in 5000 records")),
        "no whole batch"
    );
}

/// A restored state beside a setting named on the builder that contradicts it (the third
/// first-hour trial: `batch_size(32).state(saved at 64)` read batches of 64 without a word):
/// `build` names each contradiction; the same values, or none, resume where the state stopped;
/// a state of another length names both lengths.
#[test]
fn a_state_beside_a_contradicting_setting_is_refused_naming_it() {
    let mut first = DataLoader::builder().stream("id", ids(5000)).batch_size(64).seed(3).build().unwrap();
    first.next_batch().unwrap().unwrap();
    let saved = first.state();
    let next = rows(&first.next_batch().unwrap().unwrap());
    let resumed = || DataLoader::builder().stream("id", ids(5000));
    let refused = |b: LoaderBuilder, wanted: &[&str]| {
        let Err(e) = b.build() else { panic!("a contradicting setting is refused: {wanted:?}") };
        let text = e.to_string();
        assert!(matches!(e, Error::Config { what: "state", .. }), "{text}");
        for w in wanted {
            assert!(text.contains(w), "{w:?} in {text}");
        }
    };
    refused(
        resumed().batch_size(32).state(saved.clone()),
        &["batch_size 32 (the state's is 64", "rebatched"],
    );
    refused(resumed().state(saved.clone()).seed(999), &["seed 999 (the state's is 3)"]);
    refused(
        resumed().state(saved.clone()).start_step(0).mode(SamplerMode::Iid),
        &["start_step 0 (the state's step is 1)", "mode iid"],
    );
    for agreeing in
        [resumed().batch_size(64).seed(3).start_step(1).state(saved.clone()), resumed().state(saved.clone())]
    {
        assert_eq!(rows(&agreeing.build().unwrap().next_batch().unwrap().unwrap()), next);
    }
    refused(
        DataLoader::builder().stream("id", ids(4000)).state(saved.clone()),
        &["belongs to other data", "saved over 5000 records, and these streams hold 4000"],
    );
    // A pass named beside a state (look 63, L63-2): an endless state is not a pass, and a pass
    // state's kind and length must be the one named; leaving the pass out takes the state's.
    refused(
        resumed().state(saved).pass(Pass::ordered()),
        &["pass (shuffle false, drop_last false, epochs 1; the state's order is not a pass)"],
    );
    let mut passes = resumed().batch_size(64).pass(Pass::shuffled().epochs(Some(2))).build().unwrap();
    passes.next_batch().unwrap().unwrap();
    let in_pass = passes.state();
    let next = rows(&passes.next_batch().unwrap().unwrap());
    refused(
        resumed().state(in_pass.clone()).pass(Pass::shuffled().epochs(Some(5)).drop_last(true)),
        &[
            "pass (shuffle true, drop_last true, epochs 5; the state's is shuffle true, drop_last false, epochs 2)",
        ],
    );
    for agreeing in
        [resumed().state(in_pass.clone()).pass(Pass::shuffled().epochs(Some(2))), resumed().state(in_pass)]
    {
        assert_eq!(rows(&agreeing.build().unwrap().next_batch().unwrap().unwrap()), next);
    }
}

/// A loader has one order: a second setter of another kind is refused at `build`, naming both
/// setters, whichever came first; the same setter called again replaces the first call.
#[test]
fn a_second_order_of_another_kind_is_refused_at_build() {
    let records: Vec<Vec<u32>> = (0..42).map(|i| vec![i; (i % 4 + 1) as usize]).collect();
    let ragged = loaderx_core::RaggedSource::from_records(vec![], &records).unwrap();
    let b = LoaderBuilder::new().ragged_stream("t", ragged).batch_size(4);
    let refused = |builder: LoaderBuilder, what: &str, first: &str| {
        let Err(e) = builder.build() else { panic!("two orders are refused") };
        assert!(
            matches!(&e, loaderx_core::Error::Config { what: w, reason } if *w == what && reason.contains(&format!("`{first}`")) && reason.contains("already chose")),
            "{e}"
        );
    };
    let padded = b.clone().pad("t", loaderx_core::Pad::longest());
    refused(padded.clone().pass(Pass::ordered()).bucket("t", 2), "bucket", "pass");
    refused(padded.clone().bucket("t", 2).pass(Pass::ordered()), "pass", "bucket");
    refused(b.clone().pack("t", loaderx_core::Pack::new(8)).pass(Pass::ordered()), "pass", "pack");
    refused(b.clone().pass(Pass::ordered()).pack("t", loaderx_core::Pack::new(8)), "pack", "pass");
    // The same setter twice: the second call's pass wins (42 records: 11 steps, 10 dropping the
    // partial batch).
    let twice = padded.pass(Pass::ordered()).pass(Pass::shuffled().drop_last(true)).build().unwrap();
    assert_eq!(twice.steps(), Some(10));
    assert!(b.pack("t", loaderx_core::Pack::new(8)).pack("t", loaderx_core::Pack::new(16)).build().is_ok());
}

/// Look 63, L63-5: an endless loader restored at its last step delivered it, then said "no
/// prefetch thread is running"; now it says the step counter is at its end.
#[test]
fn the_last_step_a_loader_counts_is_named_after_it() {
    let mut l =
        DataLoader::builder().stream("id", ids(100)).batch_size(10).start_step(u64::MAX - 1).build().unwrap();
    assert_eq!(l.next_batch().unwrap().unwrap().step(), u64::MAX - 1);
    let e = l.next_batch().unwrap_err();
    assert!(matches!(&e, Error::LoaderStopped(why) if why.contains("was the last a loader counts")), "{e}");
}
