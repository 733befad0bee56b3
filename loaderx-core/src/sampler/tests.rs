//! Properties of the whole sampler: purity in (seed, step), sharding, resume, validation.

use std::collections::HashSet;

use proptest::prelude::*;

use super::shuffle::SHUFFLE_MAX_LEN;
use crate::{Error, Result, Sampler, SamplerConfig, SamplerMode};

fn sampler(n: u32, b: u32, mode: SamplerMode, seed: u64, rank: u32, world: u32) -> Sampler {
    Sampler::builder(n).batch_size(b).mode(mode).seed(seed).rank(rank).world(world).build().unwrap()
}

fn any_mode() -> impl Strategy<Value = SamplerMode> {
    prop_oneof![Just(SamplerMode::Sequential), Just(SamplerMode::Iid), Just(SamplerMode::Cyclic)]
}

fn is_invalid(r: Result<Sampler>) -> bool {
    matches!(r, Err(Error::Config { what: "sampler", .. }))
}

#[test]
fn sequential_wraps_around() {
    let s = sampler(10, 4, SamplerMode::Sequential, 0, 0, 1);
    assert_eq!(s.batch(0), [0, 1, 2, 3]);
    assert_eq!(s.batch(1), [4, 5, 6, 7]);
    assert_eq!(s.batch(2), [8, 9, 0, 1]);
    assert_eq!(s.batch(3), [2, 3, 4, 5]);
    assert_eq!(s.steps_per_cycle(), Some(3));
    // A batch larger than the index space wraps within the batch.
    let s = sampler(3, 8, SamplerMode::Sequential, 0, 0, 1);
    assert_eq!(s.batch(1), [2, 0, 1, 2, 0, 1, 2, 0]);
    // The product step * B does not overflow.
    let s = sampler(7, 6, SamplerMode::Sequential, 0, 1, 2);
    let expected = ((u128::from(u64::MAX) * 6 + 3) % 7) as u32;
    assert_eq!(s.batch(u64::MAX)[0], expected);
}

#[test]
fn each_invalid_parameter_is_an_error() {
    let ok = || Sampler::builder(100).batch_size(8).world(4).rank(3);
    assert!(ok().build().is_ok());
    assert!(is_invalid(Sampler::builder(0).batch_size(1).build()));
    assert!(is_invalid(ok().batch_size(0).build()));
    assert!(is_invalid(ok().world(0).rank(0).build()));
    assert!(is_invalid(ok().rank(4).build()));
    assert!(is_invalid(ok().batch_size(10).build()));
    assert!(is_invalid(Sampler::builder(10).batch_size(11).mode(SamplerMode::Cyclic).build()));
    // Batches larger than N are fine where indices may repeat.
    for mode in [SamplerMode::Sequential, SamplerMode::Iid] {
        assert!(Sampler::builder(10).batch_size(11).mode(mode).build().is_ok());
    }
    assert!(Sampler::builder(10).batch_size(10).mode(SamplerMode::Cyclic).build().is_ok());
}

#[test]
fn fill_rejects_a_wrong_length() {
    let s = sampler(100, 8, SamplerMode::Iid, 0, 1, 2);
    assert_eq!(s.local_batch_size(), 4);
    for len in [0, 3, 5, 8] {
        let mut buf = vec![0; len];
        assert!(matches!(s.fill(0, &mut buf), Err(Error::InvalidArgument(_))));
    }
    assert!(s.fill(0, &mut [0; 4]).is_ok());
}

#[test]
fn accessors_report_the_config() {
    let s = sampler(1003, 12, SamplerMode::Cyclic, 5, 2, 3);
    assert_eq!(s.len(), 1003);
    assert_eq!(s.global_batch_size(), 12);
    assert_eq!(s.local_batch_size(), 4);
    assert_eq!(s.stripe_start(), 8);
    assert_eq!(s.steps_per_cycle(), Some(83));
    let c = s.config();
    assert_eq!(
        (c.len, c.batch_size, c.mode, c.seed, c.rank, c.world),
        (1003, 12, SamplerMode::Cyclic, 5, 2, 3)
    );
    assert_eq!(sampler(1003, 12, SamplerMode::Iid, 5, 2, 3).steps_per_cycle(), None);
    assert_eq!(sampler(1003, 12, SamplerMode::Sequential, 5, 2, 3).steps_per_cycle(), Some(84));
}

#[test]
fn cycles_use_different_permutations_and_drop_different_remainders() {
    let s = sampler(1000, 300, SamplerMode::Cyclic, 1, 0, 1);
    assert_eq!(s.steps_per_cycle(), Some(3));
    let cycle = |c: u64| -> Vec<u32> { (3 * c..3 * c + 3).flat_map(|t| s.batch(t)).collect() };
    let (c0, c1) = (cycle(0), cycle(1));
    assert_ne!(c0, c1);
    let dropped = |v: &[u32]| -> HashSet<u32> {
        let seen: HashSet<u32> = v.iter().copied().collect();
        (0..1000).filter(|i| !seen.contains(i)).collect()
    };
    assert_eq!(dropped(&c0).len(), 100);
    assert_ne!(dropped(&c0), dropped(&c1));
    // Every record is reached over a few cycles.
    let reached: HashSet<u32> = (0..5).flat_map(cycle).collect();
    assert_eq!(reached.len(), 1000);
}

#[test]
fn cyclic_order_looks_shuffled() {
    // Where a cycle starts is uniform over the index space across cycles: chi-square of the
    // first index of 5000 cycles in 10 buckets (9 degrees of freedom; 40 is over 7
    // deviations out).
    let s = sampler(1000, 10, SamplerMode::Cyclic, 8, 0, 1);
    let spc = s.steps_per_cycle().unwrap();
    let mut buckets = [0u32; 10];
    for cycle in 0..5000 {
        buckets[(s.batch(cycle * spc)[0] / 100) as usize] += 1;
    }
    let chi2: f64 = buckets.iter().map(|&c| (f64::from(c) - 500.0).powi(2) / 500.0).sum();
    assert!(chi2 < 40.0, "chi-square {chi2}, buckets {buckets:?}");
    // Within a cycle, the position and the index drawn there are uncorrelated.
    let n = 10_000u32;
    let s = sampler(n, n, SamplerMode::Cyclic, 8, 0, 1);
    let perm = s.batch(3);
    let mean = f64::from(n - 1) / 2.0;
    let (mut cov, mut var) = (0.0, 0.0);
    for (i, &x) in perm.iter().enumerate() {
        cov += (i as f64 - mean) * (f64::from(x) - mean);
        var += (i as f64 - mean).powi(2);
    }
    // Under a random permutation the correlation has standard deviation 1 / sqrt(n) = 0.01.
    assert!((cov / var).abs() < 0.06, "correlation {}", cov / var);
}

#[test]
fn sampler_is_shareable_across_prefetch_threads() {
    use std::panic::{RefUnwindSafe, UnwindSafe};
    fn assert_shareable<T: Clone + Send + Sync + std::fmt::Debug + UnwindSafe + RefUnwindSafe + 'static>() {}
    assert_shareable::<Sampler>();
}

proptest! {
    #[test]
    fn cycle_is_a_permutation(
        // Small index spaces (the Fisher-Yates path) and, in a quarter of the cases, both
        // sides of its threshold.
        n in prop_oneof![3 => 1u32..3000, 1 => SHUFFLE_MAX_LEN - 500..SHUFFLE_MAX_LEN + 4000],
        b_frac in 0.0f64..1.0,
        seed: u64,
        cycle in 0u64..1000,
    ) {
        // At most 64 steps per cycle for the large index spaces, to keep the test quick.
        let least = if n > 3000 { n / 64 } else { 1 };
        let b = ((f64::from(n) * b_frac) as u32).clamp(least, n);
        let s = sampler(n, b, SamplerMode::Cyclic, seed, 0, 1);
        let spc = s.steps_per_cycle().unwrap();
        prop_assert_eq!(spc, u64::from(n / b));
        // A bitmap rather than a set: at N near 2^16 the unoptimised set was most of the time.
        // An index repeated within a batch also repeats within the cycle.
        let (mut seen, mut count) = (vec![false; n as usize], 0u32);
        for step in cycle * spc..(cycle + 1) * spc {
            let batch = s.batch(step);
            prop_assert_eq!(batch.len(), b as usize);
            for i in batch {
                prop_assert!(i < n);
                let repeated = std::mem::replace(&mut seen[i as usize], true);
                prop_assert!(!repeated, "index {} repeats within cycle {}", i, cycle);
                count += 1;
            }
        }
        prop_assert_eq!(count, n - n % b);
    }

    #[test]
    fn shards_are_disjoint_and_cover_the_global_batch(
        mode in any_mode(),
        // The Fisher-Yates path and the Feistel network.
        n in prop_oneof![1u32..5000, 65_000u32..200_000],
        k in 1u32..40,
        world in prop::sample::select(vec![1u32, 2, 3, 4, 5, 8]),
        seed: u64,
        step: u64,
    ) {
        let b = world * k;
        prop_assume!(mode != SamplerMode::Cyclic || b <= n);
        let global = sampler(n, b, mode, seed, 0, 1).batch(step);
        let mut union = Vec::new();
        for rank in 0..world {
            let shard = sampler(n, b, mode, seed, rank, world).batch(step);
            prop_assert_eq!(shard.len(), k as usize);
            prop_assert!(shard.iter().all(|&i| i < n));
            union.extend(shard);
        }
        // The stripes, in rank order, are the global batch: disjoint positions covering it.
        prop_assert_eq!(&union, &global);
        if mode == SamplerMode::Cyclic {
            let distinct: HashSet<u32> = union.iter().copied().collect();
            prop_assert_eq!(distinct.len(), union.len());
        }
    }

    #[test]
    fn elastic_resume_keeps_the_global_stream(
        mode in any_mode(),
        n in prop_oneof![8u32..5000, 65_000u32..200_000],
        k in 1u32..32,
        seed: u64,
        step in 0u64..10_000,
    ) {
        let b = 4 * k;
        prop_assume!(mode != SamplerMode::Cyclic || b <= n);
        let one = sampler(n, b, mode, seed, 0, 1).batch(step);
        for world in [2u32, 4] {
            let concatenated: Vec<u32> = (0..world)
                .flat_map(|rank| sampler(n, b, mode, seed, rank, world).batch(step))
                .collect();
            prop_assert_eq!(&concatenated, &one);
        }
    }

    #[test]
    fn seek_equals_iterate(
        mode in any_mode(),
        n in prop_oneof![1u32..2000, 65_000u32..200_000],
        b in 1u32..64,
        seed: u64,
        target in 0u64..200,
    ) {
        prop_assume!(mode != SamplerMode::Cyclic || b <= n);
        let running = sampler(n, b, mode, seed, 0, 1);
        let mut buf = vec![0; b as usize];
        let mut iterated = Vec::new();
        for step in 0..=target {
            running.fill(step, &mut buf).unwrap();
            iterated = buf.clone();
        }
        let fresh = sampler(n, b, mode, seed, 0, 1);
        prop_assert_eq!(fresh.batch(target), iterated);
    }

    #[test]
    fn batches_are_pure_in_seed_and_step(
        mode in any_mode(),
        // Both sides of SHUFFLE_MAX_LEN.
        n in 1u32..100_000,
        b in 1u32..256,
        seed: u64,
        step: u64,
    ) {
        prop_assume!(mode != SamplerMode::Cyclic || b <= n);
        let a = sampler(n, b, mode, seed, 0, 1);
        // Through the serialised config, as the loader saves and restores it.
        let bytes = rmp_serde::to_vec(&a.config()).unwrap();
        let config: SamplerConfig = rmp_serde::from_slice(&bytes).unwrap();
        prop_assert_eq!(&config, &a.config());
        let b2 = config.build().unwrap();
        prop_assert_eq!(a.batch(step), b2.batch(step));
        prop_assert_eq!(a.batch(step), a.batch(step));
        prop_assert!(a.batch(step).iter().all(|&i| i < n));
    }

    #[test]
    fn random_modes_depend_on_seed_and_step(
        mode in prop_oneof![Just(SamplerMode::Iid), Just(SamplerMode::Cyclic)],
        seed: u64,
        step in 0u64..1_000_000,
    ) {
        // With N = 2^20 and 64 indices, two independent batches coincide with negligible
        // probability.
        let n = 1 << 20;
        let s = sampler(n, 64, mode, seed, 0, 1);
        let other = sampler(n, 64, mode, seed ^ 1, 0, 1);
        prop_assert_ne!(s.batch(step), other.batch(step));
        prop_assert_ne!(s.batch(step), s.batch(step + 1));
    }
}

/// Block-cyclic mode: every record of a cycle's whole blocks exactly once per cycle (the left
/// over records, fewer than a block, differ from cycle to cycle), batches local to few blocks,
/// pure in (seed, step), the union of ranks the world-1 batch, and invalid shapes refused.
#[test]
fn block_cyclic_covers_each_cycle_in_few_blocks_per_batch() {
    let (n, k, w, b) = (10_007u32, 64u32, 4u32, 128u32);
    let mode = SamplerMode::BlockCyclic { block: k, window: w };
    let build = |rank: u32, world: u32| sampler(n, b, mode, 21, rank, world);
    let s = build(0, 1);
    let spc = s.steps_per_cycle().unwrap();
    assert_eq!(spc, u64::from((n / k) * k / b));
    let mut left_out = Vec::new();
    for cycle in 0..3u64 {
        let mut seen = HashSet::new();
        let mut blocks_per_batch = Vec::new();
        for step in cycle * spc..(cycle + 1) * spc {
            let batch = s.batch(step);
            let offset = batch.iter().map(|&i| i % k).collect::<HashSet<_>>().len();
            assert!(offset <= k as usize);
            for &i in &batch {
                assert!(i < n);
                assert!(seen.insert(i), "record {i} twice in cycle {cycle}");
            }
            // Records of one batch fall in few aligned-to-the-cycle blocks.
            let grid = batch.iter().map(|&i| i / k).collect::<HashSet<_>>().len();
            blocks_per_batch.push(grid);
        }
        assert_eq!(seen.len() as u64, spc * u64::from(b), "every position of the cycle once");
        let worst = blocks_per_batch.iter().max().unwrap();
        // Two windows at most, each block straddling at most two cells of the aligned grid.
        assert!(*worst <= 4 * w as usize, "a batch spans few blocks, got {worst}");
        let missing: Vec<u32> = (0..n).filter(|i| !seen.contains(i)).collect();
        left_out.push(missing);
    }
    assert!(left_out.windows(2).any(|p| p[0] != p[1]), "the left-over records change between cycles");
    assert_eq!(s.batch(77), build(0, 1).batch(77), "pure in (seed, step)");
    for world in [2u32, 4, 8] {
        let mut union: Vec<u32> = (0..world).flat_map(|r| build(r, world).batch(99)).collect();
        union.sort_unstable();
        let mut want = s.batch(99);
        want.sort_unstable();
        assert_eq!(union, want, "world {world}");
    }
    for bad in
        [SamplerMode::BlockCyclic { block: 0, window: 4 }, SamplerMode::BlockCyclic { block: 4, window: 0 }]
    {
        assert!(matches!(
            Sampler::builder(100).batch_size(4).mode(bad).build(),
            Err(Error::Config { what: "sampler", reason }) if reason.ends_with("both at least 1")
        ));
    }
    assert!(matches!(
        Sampler::builder(95).batch_size(91).mode(SamplerMode::BlockCyclic { block: 10, window: 2 }).build(),
        Err(Error::Config { what: "sampler", reason }) if reason.contains("batch_size 91 exceeds the 90 records")
    ));
    let one = Sampler::builder(50)
        .batch_size(10)
        .mode(SamplerMode::BlockCyclic { block: 1, window: 1 })
        .build()
        .unwrap();
    let mut all: Vec<u32> = (0..5).flat_map(|st| one.batch(st)).collect();
    all.sort_unstable();
    assert_eq!(all, (0..50).collect::<Vec<_>>(), "block 1: a plain permutation");
}

/// The named modes round-trip through their names, which are the one table the Python module
/// and the C ABI number them by; anything else is refused naming every mode.
#[test]
fn modes_round_trip_by_name_and_unknown_names_are_refused() {
    for (code, m) in SamplerMode::ALL.into_iter().enumerate() {
        assert_eq!(m.name().parse::<SamplerMode>().unwrap(), m, "code {code}");
        assert_eq!(m.to_string(), m.name());
    }
    assert_eq!(SamplerMode::ALL.map(SamplerMode::name), ["sequential", "iid", "cyclic"]);
    let e = "shuffled".parse::<SamplerMode>().unwrap_err();
    assert!(matches!(e, crate::Error::InvalidArgument(ref m) if m.contains("'iid'")), "{e}");
    let block = SamplerMode::BlockCyclic { block: 64, window: 2 };
    assert_eq!(block.to_string(), "block_cyclic(64 x 2)");
    assert!(
        matches!(
            block.name().parse::<SamplerMode>(),
            Err(Error::InvalidArgument(m)) if m.contains("unknown sampler mode \"block_cyclic\"")
        ),
        "block-cyclic needs its block and window"
    );
}
