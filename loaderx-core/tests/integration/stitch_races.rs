//! `stitch` from several threads at once onto one new output: one writes the set, the others are
//! refused (the parts from `parts.rs`'s converter helpers).

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
