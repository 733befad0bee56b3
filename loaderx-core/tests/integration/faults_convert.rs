//! Conversions under the fault shim of `faults.rs` (look 117): a directory sync failing after
//! one dataset of a conversion was placed is the conversion's failure, never reported as its
//! commit, and leaves nothing that refuses the rerun. Linux only, as `faults.rs`.
#![cfg(all(target_os = "linux", feature = "images"))]

use std::path::Path;

use loaderx_core::{WriteOptions, convert};

use crate::faults::{child_store, in_child_failing, outcome, shim};

/// `dir/a.st`: tensors `b` (4 x 2 u8) and `w` (3 x 2 u8); `dir/imgs`: two classes of a PNG.
fn inputs(dir: &Path) {
    use safetensors::tensor::{Dtype, TensorView};
    std::fs::create_dir_all(dir).unwrap();
    let (b, w) = ((0..8u8).collect::<Vec<_>>(), (10..16u8).collect::<Vec<_>>());
    let tensors = vec![
        ("b", TensorView::new(Dtype::U8, vec![4, 2], &b).unwrap()),
        ("w", TensorView::new(Dtype::U8, vec![3, 2], &w).unwrap()),
    ];
    std::fs::write(dir.join("a.st"), safetensors::serialize(tensors, None).unwrap()).unwrap();
    for class in ["cat", "dog"] {
        std::fs::create_dir_all(dir.join("imgs").join(class)).unwrap();
        image::RgbImage::from_pixel(6, 4, image::Rgb([9, 80, 200]))
            .save(dir.join("imgs").join(class).join("a.png"))
            .unwrap();
    }
}

fn run(dir: &Path, kind: &str) -> loaderx_core::Result<()> {
    match kind {
        "safetensors" => {
            convert::safetensors(dir.join("a.st"), dir.join("st"), WriteOptions::new()).map(drop)
        }
        _ => convert::images(
            dir.join("imgs"),
            dir.join("im"),
            convert::ImageOptions::new(4, 4),
            WriteOptions::new(),
        )
        .map(drop),
    }
}

#[test]
#[ignore = "a child of a_sync_failing_inside_a_conversion_is_its_failure: runs under its shim"]
fn child_convert() {
    let Some((dir, kind)) = child_store() else { return };
    println!("convert {}", outcome(&run(&dir, &kind)));
}

/// L117-1 and L117-2: `convert images` reported a dataset placed in its staging directory as
/// committed ("do not repeat it") and left it there, refusing every rerun; `convert
/// safetensors` reported one tensor's dataset committed with the next never written, and its
/// rerun refused. Now a failure leaves no dataset of a fresh conversion, and the rerun works.
#[test]
fn a_sync_failing_inside_a_conversion_is_its_failure() {
    shim();
    let mut failed = 0;
    for kind in ["safetensors", "images"] {
        for (call, at) in (1..=24).map(|at| ("fsync", at)).chain((1..=8).map(|at| ("rename", at))) {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            inputs(&dir);
            let printed = in_child_failing("faults_convert::child_convert", &dir, kind, call, at);
            let out = dir.join(if kind == "safetensors" { "st" } else { "im" });
            if printed.contains("convert failed") {
                failed += 1;
                let left: Vec<_> = std::fs::read_dir(&out)
                    .map(|d| d.flatten().map(|e| e.file_name()).collect())
                    .unwrap_or_default();
                assert!(left.is_empty(), "{kind}, {call} {at} failing: {left:?} left: {printed}");
            } else {
                assert!(
                    printed.contains("convert ok")
                        || (kind == "images" && printed.contains("convert committed")),
                    "{kind}, {call} {at}: {printed}"
                );
            }
            let rerun = if printed.contains("convert failed") {
                run(&dir, kind)
            } else if kind == "images" {
                let opts = WriteOptions::new().overwrite(true);
                convert::images(dir.join("imgs"), &out, convert::ImageOptions::new(4, 4), opts).map(drop)
            } else {
                convert::safetensors(dir.join("a.st"), &out, WriteOptions::new().overwrite(true)).map(drop)
            };
            assert!(rerun.is_ok(), "{kind}, {call} {at}: the rerun: {rerun:?}: {printed}");
        }
    }
    assert!(failed >= 4, "the failures reached a conversion {failed} times");
}
