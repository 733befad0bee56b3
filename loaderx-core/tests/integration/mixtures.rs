//! Weighted mixtures through the loader: rows aligned across streams, shares close to the
//! weights, batches a pure function of the state, ranks' union the global batch, elastic resume
//! from a saved state onto another world size, bad input as typed errors.

use loaderx_core::{DataLoader, DenseSource, Error, LoaderBuilder, MIXTURE_SLOTS, RaggedSource};

/// Source `j` of `n` records: `id` = `j * 1_000_000 + i` (dense u32) and `t`, a ragged stream
/// whose record `i` is `i % 5 + 1` copies of the same id.
fn source(j: u32, n: u32) -> LoaderBuilder {
    let ids: Vec<u32> = (0..n).map(|i| j * 1_000_000 + i).collect();
    let t: Vec<Vec<u32>> = ids.iter().map(|&v| vec![v; (v % 5 + 1) as usize]).collect();
    DataLoader::builder()
        .stream("id", DenseSource::from_vec(vec![], ids).unwrap())
        .ragged_stream("t", RaggedSource::from_records(vec![], &t).unwrap())
}

fn mix(weights: &[f64], lens: &[u32]) -> LoaderBuilder {
    let sources =
        weights.iter().zip(lens).enumerate().map(|(j, (&w, &n))| (w, source(j as u32, n))).collect();
    LoaderBuilder::mixture(sources).unwrap()
}

fn ids(l: &mut DataLoader<loaderx_core::Batch>) -> Vec<u32> {
    let b = l.next_batch().unwrap().unwrap();
    let id = b.get("id").unwrap().as_slice::<u32>().unwrap().to_vec();
    let t = b.get_ragged("t").unwrap();
    for (k, &v) in id.iter().enumerate() {
        assert_eq!(t.record::<u32>(k).unwrap(), vec![v; (v % 5 + 1) as usize].as_slice(), "row {k} aligned");
    }
    id
}

#[test]
fn a_mixture_deals_rows_by_weight_and_aligns_its_streams() {
    let (weights, lens) = ([0.6, 0.3, 0.1], [500u32, 2000, 60]);
    let mut loader = mix(&weights, &lens).batch_size(64).seed(3).threads(2).build().unwrap();
    assert!(loader.mixture().is_some() && loader.sampler().is_none());
    let steps = 400u64;
    let mut count = [0u64; 3];
    let mut per_source: [Vec<u32>; 3] = Default::default();
    for _ in 0..steps {
        for v in ids(&mut loader) {
            let j = (v / 1_000_000) as usize;
            assert!(v % 1_000_000 < lens[j], "an index of source {j}");
            count[j] += 1;
            per_source[j].push(v % 1_000_000);
        }
    }
    let rows = (steps * 64) as f64;
    for j in 0..3 {
        let bound = 4.0 + rows / f64::from(MIXTURE_SLOTS);
        assert!((count[j] as f64 - weights[j] * rows).abs() <= bound, "source {j}: {} of {rows}", count[j]);
    }
    // The small source has been through ~42 full passes: every record about equally often.
    let mut hits = vec![0u32; 60];
    for &i in &per_source[2] {
        hits[i as usize] += 1;
    }
    let (lo, hi) = (hits.iter().min().unwrap(), hits.iter().max().unwrap());
    assert!(hi - lo <= 1, "each pass every record once: {lo}..{hi}");
}

#[test]
fn batches_are_a_pure_function_of_the_saved_state_and_resume_on_any_world() {
    let build = |world: u32, rank: u32| {
        mix(&[2.0, 1.0, 1.0], &[300, 700, 50]).batch_size(48).seed(9).shard(rank, world)
    };
    let mut reference = build(1, 0).build().unwrap();
    let global: Vec<Vec<u32>> = (0..30)
        .map(|_| {
            let mut g = ids(&mut reference);
            g.sort_unstable();
            g
        })
        .collect();
    // World 2 up to step 13, its states saved as bytes; resumed on worlds 1, 2, 3, 4 and 8.
    let mut states = Vec::new();
    for rank in 0..2 {
        let mut l = build(2, rank).build().unwrap();
        for (s, want) in global.iter().enumerate().take(13) {
            let mut g = ids(&mut l);
            g.sort_unstable();
            assert!(g.iter().all(|v| want.binary_search(v).is_ok()), "rank {rank}, step {s}");
        }
        states.push(serde_json_like(&l.state()));
    }
    assert_eq!(states[0].step, 13);
    for world in [1u32, 2, 3, 4, 8] {
        let mut loaders: Vec<_> = (0..world)
            .map(|rank| {
                let mut st = states[0].clone();
                st.sampler.rank = rank;
                st.sampler.world = world;
                build(world, rank).state(st).build().unwrap()
            })
            .collect();
        for (s, want) in global.iter().enumerate().skip(13) {
            let mut union: Vec<u32> = loaders.iter_mut().flat_map(ids).collect();
            union.sort_unstable();
            assert_eq!(&union, want, "world {world}, step {s}");
        }
    }
    // Look 96 (finding 1): other weights beside the state were dropped for the state's, the draw
    // going on at the old proportions (or, the sources given in another order, another's).
    let other = mix(&[1.0, 2.0, 1.0], &[300, 700, 50]).batch_size(48).seed(9).state(states[0].clone());
    let Err(e @ Error::Config { .. }) = other.build().map(drop) else { panic!("other weights were taken") };
    let m = e.to_string();
    assert!(m.contains("weights [2.0, 1.0, 1.0]") && m.contains("[1.0, 2.0, 1.0]"), "{m}");
}

/// A state through its serialised form, as a run saves and reloads it.
fn serde_json_like(s: &loaderx_core::LoaderState) -> loaderx_core::LoaderState {
    rmp_serde::from_slice(&rmp_serde::to_vec_named(s).unwrap()).unwrap()
}

#[test]
fn a_step_past_the_last_numbered_row_is_refused_at_build() {
    // Rows are numbered from row 0 in a u64: step s of a global batch of 8 needs (s + 1) * 8 <= u64::MAX.
    let last = u64::MAX / 8 - 1;
    for (step, what) in [(u64::MAX, "start_step"), (last + 1, "start_step")] {
        match mix(&[0.5, 0.5], &[100, 50]).batch_size(8).start_step(step).build() {
            Err(Error::Config { what: w, reason }) => {
                assert_eq!(w, what);
                assert!(reason.contains(&step.to_string()) && reason.contains(&last.to_string()), "{reason}");
            }
            other => panic!("step {step}: {:?}", other.map(|_| ())),
        }
    }
    let mut at_last = mix(&[0.5, 0.5], &[100, 50]).batch_size(8).threads(1).start_step(last).build().unwrap();
    assert_eq!(ids(&mut at_last).len(), 8, "the last step has its rows");
    // A saved state past the end is named as the state.
    let mut state = mix(&[0.5, 0.5], &[100, 50]).batch_size(8).build().unwrap().state();
    state.step = u64::MAX;
    match mix(&[0.5, 0.5], &[100, 50]).batch_size(8).state(state).build() {
        Err(Error::Config { what: "state", .. }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn bad_mixtures_are_typed_errors() {
    let err = |r: loaderx_core::Result<LoaderBuilder>| r.map(|_| ()).unwrap_err();
    for (w, what) in [(-1.0, "non-negative"), (f64::NAN, "non-negative")] {
        let e = err(LoaderBuilder::mixture(vec![(1.0, source(0, 10)), (w, source(1, 10))]));
        assert!(matches!(&e, Error::Config { what: "mixture", reason: m } if m.contains(what)), "{e}");
    }
    let e = err(LoaderBuilder::mixture(vec![(0.0, source(0, 10)), (0.0, source(1, 10))]));
    assert!(e.to_string().contains("zero"), "{e}");
    let other_dtype = DataLoader::builder()
        .stream("id", DenseSource::from_vec(vec![], vec![0u64; 10]).unwrap())
        .ragged_stream("t", RaggedSource::from_records(vec![], &vec![vec![1u32]; 10]).unwrap());
    let e = err(LoaderBuilder::mixture(vec![(1.0, source(0, 10)), (1.0, other_dtype)]));
    assert!(matches!(&e, Error::Schema { reason, .. } if reason.contains("source 1")), "{e}");
    let other_names =
        DataLoader::builder().stream("x", DenseSource::from_vec(vec![], vec![0u32; 10]).unwrap());
    let e = err(LoaderBuilder::mixture(vec![(1.0, source(0, 10)), (1.0, other_names)]));
    assert!(e.to_string().contains("streams"), "{e}");
    let e = err(LoaderBuilder::mixture(vec![]));
    assert!(matches!(e, Error::Config { what: "mixture", .. }));
    // A mixture is endless: a finite pass over it is refused at build.
    let e = mix(&[1.0, 1.0], &[10, 10]).pass(loaderx_core::Pass::ordered()).build().unwrap_err();
    assert!(e.to_string().contains("endless"), "{e}");
}

/// A world-2 run in two real processes (this test binary started twice, one rank each), each
/// saving its batches and its state to a file at step 13; the states resumed on worlds 1 and 4
/// give the same global sample sequence as one world-1 run, and the two ranks' batches before
/// it were disjoint halves of the same global batches.
#[test]
fn a_two_process_run_resumed_on_other_world_sizes_yields_the_same_global_sequence() {
    let build = |world: u32, rank: u32| {
        DataLoader::builder()
            .stream("id", DenseSource::from_vec(vec![], (0..5000u32).collect::<Vec<_>>()).unwrap())
            .batch_size(48)
            .seed(17)
            .shard(rank, world)
    };
    let ids = |b: &loaderx_core::Batch| b.get("id").unwrap().as_slice::<u32>().unwrap().to_vec();
    if let (Ok(rank), Ok(out)) = (std::env::var("LOADERX_TEST_RANK"), std::env::var("LOADERX_TEST_OUT")) {
        // A child: rank `rank` of world 2 up to step 13.
        let mut l = build(2, rank.parse().unwrap()).build().unwrap();
        let batches: Vec<Vec<u32>> = (0..13).map(|_| ids(&l.next_batch().unwrap().unwrap())).collect();
        let bytes = rmp_serde::to_vec_named(&(batches, l.state())).unwrap();
        std::fs::write(out, bytes).unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let name = "mixtures::a_two_process_run_resumed_on_other_world_sizes_yields_the_same_global_sequence";
    let children: Vec<_> = (0..2)
        .map(|rank| {
            crate::common::this_binary()
                .args(["--exact", name, "--test-threads", "1"])
                .env("LOADERX_TEST_RANK", rank.to_string())
                .env("LOADERX_TEST_OUT", dir.path().join(format!("rank{rank}")))
                .output()
                .unwrap()
        })
        .collect();
    for c in &children {
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    }
    let saved: Vec<(Vec<Vec<u32>>, loaderx_core::LoaderState)> = (0..2)
        .map(|r| rmp_serde::from_slice(&std::fs::read(dir.path().join(format!("rank{r}"))).unwrap()).unwrap())
        .collect();
    let mut reference = build(1, 0).build().unwrap();
    let global: Vec<Vec<u32>> = (0..30).map(|_| ids(&reference.next_batch().unwrap().unwrap())).collect();
    for (s, want) in global.iter().enumerate().take(13) {
        let got = [saved[0].0[s].clone(), saved[1].0[s].clone()].concat();
        assert_eq!(&got, want, "step {s}: the two processes' stripes are the global batch");
    }
    assert_eq!(saved[0].1.step, 13);
    for world in [1u32, 4] {
        let mut loaders: Vec<_> = (0..world)
            .map(|rank| {
                let mut st = saved[0].1.clone();
                st.sampler.rank = rank;
                st.sampler.world = world;
                build(world, rank).state(st).build().unwrap()
            })
            .collect();
        for (s, want) in global.iter().enumerate().skip(13) {
            let got: Vec<u32> =
                loaders.iter_mut().flat_map(|l| ids(&l.next_batch().unwrap().unwrap())).collect();
            assert_eq!(&got, want, "world {world}, step {s}");
        }
    }
}

/// Look 79: a mixture draws the whole global batch at every step; a batch of 2^31 (or of 2^26 + 2,
/// past a rank's cap) was built, and its first step aborted the process on 32 GiB of draws.
#[test]
fn a_mixture_batch_past_the_cap_is_refused_at_build() {
    for (batch, world) in [(1usize << 31, 1u32), ((1 << 26) + 2, 2), (1 << 31, 64)] {
        let e = mix(&[0.5, 0.5], &[100, 100]).batch_size(batch).shard(0, world).build().err().unwrap();
        assert!(e.to_string().contains("a mixture draws the whole batch"), "{batch} {world}: {e}");
    }
    assert!(mix(&[0.5, 0.5], &[100, 100]).batch_size(64).shard(0, 2).build().is_ok());
}
