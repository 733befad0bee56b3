//! What a forced `convert images` killed before it removed the output it set aside leaves, and
//! what the next conversion into OUT takes of it (look 147, L147-1).

use loaderx_core::convert::{ImageOptions, images};
use loaderx_core::{DenseDataset, WriteOptions};

/// A marked aside (`OUT.old`, as a killed conversion leaves it, whole or half removed) goes
/// once the next conversion succeeds; an unmarked `OUT.old1` (a copy the user made) and a
/// marked one holding a file of the user's stay.
#[test]
fn a_killed_conversions_aside_goes_at_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    crate::images::folder(&input, false);
    let convert = |to: &str, force: bool| {
        let out = dir.path().join(to);
        images(&input, &out, ImageOptions::new(8, 8), WriteOptions::new().overwrite(force)).unwrap();
        out
    };
    let out = convert("out", false);
    // Killed between setting the old output aside and removing it: marked, whole.
    std::fs::rename(convert("a", false), dir.path().join("out.old")).unwrap();
    std::fs::write(dir.path().join("out.old/.loaderx-aside"), b"99999").unwrap();
    // Killed part way through removing it: its images gone, its labels left.
    let half = convert("b", false);
    std::fs::remove_dir_all(half.join("images")).unwrap();
    std::fs::rename(&half, dir.path().join("out.old2")).unwrap();
    std::fs::write(dir.path().join("out.old2/.loaderx-aside"), b"99998").unwrap();
    // The user's copy, unmarked; and a marked one holding a file of the user's.
    std::fs::rename(convert("c", false), dir.path().join("out.old1")).unwrap();
    std::fs::rename(convert("d", false), dir.path().join("out.old3")).unwrap();
    std::fs::write(dir.path().join("out.old3/.loaderx-aside"), b"99997").unwrap();
    std::fs::write(dir.path().join("out.old3/notes.txt"), b"mine").unwrap();
    convert("out", true);
    assert!(!dir.path().join("out.old").exists() && !dir.path().join("out.old2").exists());
    assert_eq!(DenseDataset::<u8>::open(dir.path().join("out.old1/images")).unwrap().len(), 5);
    assert!(dir.path().join("out.old3/notes.txt").exists() && dir.path().join("out.old3/images").exists());
    assert_eq!(DenseDataset::<u8>::open(out.join("images")).unwrap().len(), 5);
    // A forced conversion's own aside leaves no mark behind in OUT, and none of its own.
    assert!(!out.join(".loaderx-aside").exists() && !dir.path().join("out.old4").exists());
}
