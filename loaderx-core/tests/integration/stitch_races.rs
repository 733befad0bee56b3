//! `stitch` from several threads at once onto one new output: one writes the set, the others are
//! refused (the parts from `parts.rs`'s converter helpers); a set is never written inside a part.

use loaderx_core::{Error, WriteOptions, convert, stitch};

use crate::parts::npy_file;

/// Two stitches racing onto one new `out`: one writes the set, the other is refused (both
/// found no `out`, and both once wrote it, the second set over the first's, each reporting it).
#[test]
fn of_two_stitches_racing_onto_one_out_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (input, part) = (dir.path().join("a.npy"), dir.path().join("p"));
    npy_file(&input, 2);
    convert::npy(&input, &part, WriteOptions::new()).unwrap();
    for round in 0..20 {
        let out = dir.path().join(format!("set{round}"));
        let barrier = std::sync::Barrier::new(2);
        let results = std::thread::scope(|s| {
            let go = || {
                barrier.wait();
                stitch(std::slice::from_ref(&part), &out)
            };
            let (a, b) = (s.spawn(go), s.spawn(go));
            [a.join().unwrap(), b.join().unwrap()]
        });
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "round {round}: {results:?}");
        assert!(
            results.iter().any(|r| matches!(r, Err(Error::InvalidArgument(m)) if m.contains("written new")))
        );
    }
}

/// `out` appears whole or not at all (look 71, L71-1: a stitch of 300 datasets killed part way
/// left `out` with some of them, the last a schema without its manifest, which every retry then
/// refused as existing). Watched from another thread while a directory of 60 datasets is
/// stitched: whenever `out` is there, it holds every set.
#[test]
fn a_directory_of_sets_appears_whole_or_not_at_all() {
    use safetensors::tensor::{Dtype, TensorView};
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<Vec<u8>> = (0..60u8).map(|t| vec![t; 8]).collect();
    let names: Vec<String> = (0..60).map(|t| format!("t{t:02}")).collect();
    let tensors: Vec<(&str, TensorView<'_>)> = names
        .iter()
        .zip(&data)
        .map(|(n, d)| (n.as_str(), TensorView::new(Dtype::U8, vec![4, 2], d).unwrap()))
        .collect();
    let input = dir.path().join("m.safetensors");
    std::fs::write(&input, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let parts: Vec<_> = (0..2).map(|k| dir.path().join(format!("p{k}"))).collect();
    for (k, p) in parts.iter().enumerate() {
        convert::safetensors_part(&input, p, WriteOptions::new(), convert::Part::new(k, 2).unwrap()).unwrap();
    }
    let out = dir.path().join("set");
    let done = std::sync::atomic::AtomicBool::new(false);
    let seen_partial = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut partial = None;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                if out.exists() {
                    let sets =
                        names.iter().filter(|n| out.join(n).join(loaderx_core::SET_FILE).exists()).count();
                    if sets < names.len() && partial.is_none() {
                        partial = Some(sets);
                    }
                }
                std::thread::yield_now();
            }
            partial
        });
        convert::stitch_datasets(&parts, &out).unwrap();
        done.store(true, std::sync::atomic::Ordering::Release);
        watcher.join().unwrap()
    });
    assert_eq!(seen_partial, None, "out seen with only some of its {} sets", names.len());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("stitch"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Look 91 (N2): a set written inside one of its parts named that part `..`, which `push` then
/// refused as a corrupt manifest. Refused where it is made, naming the part; beside or above the
/// parts, a set is written.
#[test]
fn a_set_is_never_written_inside_one_of_its_parts() {
    let dir = tempfile::tempdir().unwrap();
    let (input, a, b) = (dir.path().join("a.npy"), dir.path().join("a"), dir.path().join("b"));
    npy_file(&input, 2);
    convert::npy(&input, &a, WriteOptions::new()).unwrap();
    convert::npy(&input, &b, WriteOptions::new()).unwrap();
    for inside in [a.join("sub"), a.join("x/y"), b.join("set")] {
        let e = stitch(&[&a, &b], &inside).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("lies inside the part")), "{e}");
        assert!(!inside.exists());
    }
    assert_eq!(stitch(&[&a, &b], dir.path().join("set")).unwrap().records, 4);
    // Directories of datasets: the refusal names the output given (look 93, F93-5: it named
    // the staging directory inside it).
    let (ga, gb) = (dir.path().join("ga"), dir.path().join("gb"));
    for g in [&ga, &gb] {
        convert::npy(&input, g.join("x"), WriteOptions::new()).unwrap();
    }
    let inside = ga.join("x/out");
    let e = loaderx_core::convert::stitch_datasets(&[&ga, &gb], &inside).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.starts_with(&format!("{} lies inside", inside.display()))),
        "{e}"
    );
    assert!(
        !ga.join("x").read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("stitch"))
    );
}
