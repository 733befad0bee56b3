// `loaderx convert images` and `loaderx convert parquet` through the binary (features `images`
// and `parquet`): the summary line, the datasets written, and a bad file named with nothing
// written.

use std::process::Command;

/// A 2x2 red PNG.
#[cfg(feature = "images")]
pub(crate) const RED_PNG: [u8; 73] = [
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0, 253,
    212, 154, 115, 0, 0, 0, 16, 73, 68, 65, 84, 120, 156, 99, 248, 207, 192, 0, 68, 12, 16, 10, 0, 31, 238,
    3, 253, 139, 95, 20, 212, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];

#[cfg(feature = "images")]
#[test]
fn convert_images_writes_images_labels_and_classes_or_names_the_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    for (class, n) in [("a", 2), ("b", 3)] {
        std::fs::create_dir_all(input.join(class)).unwrap();
        for k in 0..n {
            std::fs::write(input.join(class).join(format!("{k}.png")), RED_PNG).unwrap();
        }
    }
    let run = |out: &std::path::Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["convert", "images"])
            .arg(&input)
            .arg(out)
            .args(["--size", "4x3"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = dir.path().join("out");
    let o = run(&out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("5 records") && text.contains("2 classes"), "{text}");
    let imgs = loaderx_core::DenseSource::open(out.join("images")).unwrap();
    assert_eq!(imgs.item_shape(), &[3, 4, 3]);
    assert_eq!(std::fs::read_to_string(out.join("classes.txt")).unwrap(), "a\nb\n");
    std::fs::write(input.join("b/broken.png"), &RED_PNG[..30]).unwrap();
    let bad = dir.path().join("bad");
    let o = run(&bad, &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("broken.png"));
    assert!(!bad.exists());
    let o = run(&bad, &["--skip-bad", "--resize", "pad"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("skipped"));
}

/// `--encoded` keeps each file as a record (`info` says the kind), and refuses `--size`.
#[cfg(feature = "images")]
#[test]
fn convert_images_encoded_keeps_the_files_and_info_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir_all(input.join("a")).unwrap();
    std::fs::write(input.join("a/0.png"), RED_PNG).unwrap();
    let loaderx =
        |args: &[&std::ffi::OsStr]| Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args).output().unwrap();
    let out = dir.path().join("out");
    let o = loaderx(&[
        "convert".as_ref(),
        "images".as_ref(),
        input.as_os_str(),
        out.as_os_str(),
        "--encoded".as_ref(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("encoded"), "{}", String::from_utf8_lossy(&o.stdout));
    let o = loaderx(&["info".as_ref(), out.join("images").as_os_str()]);
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(info.contains("kind:    image") && info.contains("encoded images"), "{info}");
    let o = loaderx(&["verify".as_ref(), out.join("images").as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let both = dir.path().join("both");
    let o = loaderx(&[
        "convert".as_ref(),
        "images".as_ref(),
        input.as_os_str(),
        both.as_os_str(),
        "--encoded".as_ref(),
        "--size".as_ref(),
        "4x4".as_ref(),
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--size"));
}

#[cfg(feature = "parquet")]
#[test]
fn convert_parquet_names_a_file_that_is_not_parquet_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let not = dir.path().join("x.parquet");
    std::fs::write(&not, b"not parquet at all").unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["convert", "parquet"])
        .arg(&not)
        .arg(&out)
        .args(["--column", "a=b"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("x.parquet") && err.contains("Parquet"), "{err}");
    assert!(!out.join("b").exists());
}
