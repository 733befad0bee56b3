//! What a forced `convert images` killed before it removed the output it set aside leaves, and
//! what the next conversion into OUT takes of it (looks 147 and 148).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use loaderx_core::convert::{ImageOptions, images};
use loaderx_core::{DenseDataset, WriteOptions};

/// Marks `dir` as a conversion marks what it sets aside: a process id, the directory's device
/// and inode, and its last change once the mark is in it.
fn mark(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create_new(dir.join(".loaderx-aside")).unwrap();
    let m = std::fs::metadata(dir).unwrap();
    write!(f, "99999 {} {} {} {}", m.dev(), m.ino(), m.ctime(), m.ctime_nsec()).unwrap();
}

/// Converts the image folder `dir/in` into `dir/to` (forced or not), at 8x8: its path.
fn convert_in(dir: &Path, to: &str, force: bool) -> std::path::PathBuf {
    let out = dir.join(to);
    images(dir.join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new().overwrite(force)).unwrap();
    out
}

/// Copies the directory `from` (one level of directories) to `to`, as `cp -r` does.
fn copy(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A marked aside (`OUT.old`, as a killed conversion leaves it, whole or part removed, its
/// index gone first) goes once the next conversion succeeds; an unmarked `OUT.old1` (a copy the
/// user made), a copy of a marked one, and a marked one holding a file of the user's stay; a
/// mark that is a link is never written through.
#[test]
fn a_killed_conversions_aside_goes_at_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    crate::images::folder(&dir.path().join("in"), false);
    let at = |name: &str| dir.path().join(name);
    let convert = |to: &str, force: bool| convert_in(dir.path(), to, force);
    let out = convert("out", false);
    // Killed between setting the old output aside and removing it: marked, whole.
    std::fs::rename(convert("a", false), at("out.old")).unwrap();
    mark(&at("out.old"));
    // Killed part way through removing it (look 148, L148-2): its images' index and schema gone
    // first, their chunks left; its labels whole.
    std::fs::rename(convert("b", false), at("out.old2")).unwrap();
    std::fs::remove_file(at("out.old2/images/index.zr")).unwrap();
    std::fs::remove_file(at("out.old2/images/schema.msgpack")).unwrap();
    mark(&at("out.old2"));
    // The user's copy, unmarked; a marked one holding a file of the user's; a copy (`cp -r`)
    // of a marked one, its mark with it (look 148, L148-3).
    std::fs::rename(convert("c", false), at("out.old1")).unwrap();
    std::fs::rename(convert("d", false), at("out.old3")).unwrap();
    mark(&at("out.old3"));
    std::fs::write(at("out.old3/notes.txt"), b"mine").unwrap();
    let e = convert("e", false);
    mark(&e);
    copy(&e, &at("out.old4"));
    // A marked aside the user restored (`mv OUT.old OUT`) and later kept again under that name
    // (look 150, L150-3): renamed since it was marked, whole.
    std::fs::rename(convert("f", false), at("out.old5")).unwrap();
    mark(&at("out.old5"));
    std::fs::rename(at("out.old5"), at("f")).unwrap();
    std::fs::rename(at("f"), at("out.old5")).unwrap();
    // A mark in OUT that is a link to a file of the user's (look 148, L148-3).
    std::fs::write(at("victim.txt"), b"precious").unwrap();
    std::os::unix::fs::symlink(at("victim.txt"), out.join(".loaderx-aside")).unwrap();
    let forced = WriteOptions::new().overwrite(true);
    let e = images(at("in"), &out, ImageOptions::new(8, 8), forced).unwrap_err().to_string();
    assert!(e.contains(".loaderx-aside"), "a link of that name is the user's: {e}");
    assert_eq!(std::fs::read(at("victim.txt")).unwrap(), b"precious");
    std::fs::remove_file(out.join(".loaderx-aside")).unwrap();
    convert("out", true);
    assert!(!at("out.old").exists() && !at("out.old2").exists());
    assert_eq!(DenseDataset::<u8>::open(at("out.old1/images")).unwrap().len(), 5);
    assert!(at("out.old3/notes.txt").exists() && at("out.old3/images").exists());
    assert_eq!(DenseDataset::<u8>::open(at("out.old4/images")).unwrap().len(), 5, "a copy is the user's");
    assert_eq!(std::fs::read(at("victim.txt")).unwrap(), b"precious");
    assert_eq!(DenseDataset::<u8>::open(at("out.old5/images")).unwrap().len(), 5, "restored, kept again");
    assert_eq!(DenseDataset::<u8>::open(out.join("images")).unwrap().len(), 5);
    // A forced conversion's own aside leaves no mark behind in OUT, and none of its own.
    assert!(!out.join(".loaderx-aside").exists() && !at("out.old6").exists());
}

/// Look 155, L155-1: a conversion killed between setting OUT aside and finishing its mark
/// leaves the mark it began in OUT before the rename (a process id, the device and inode): that
/// aside goes at the next conversion; one whose last change came long after its mark was made
/// (renamed by the user since) stays, and so does a mark begun in OUT by a conversion killed
/// before the rename, which the next forced conversion makes anew.
#[test]
fn an_aside_with_an_unfinished_mark_goes_unless_renamed_since() {
    let dir = tempfile::tempdir().unwrap();
    crate::images::folder(&dir.path().join("in"), false);
    let at = |name: &str| dir.path().join(name);
    let convert = |to: &str, force: bool| convert_in(dir.path(), to, force);
    let unfinished = |d: &Path| {
        let m = std::fs::metadata(d).unwrap();
        std::fs::write(d.join(".loaderx-aside"), format!("99999 {} {}", m.dev(), m.ino())).unwrap();
    };
    let out = convert("out", false);
    unfinished(&out);
    for (from, to) in [("a", "out.old"), ("b", "out.old1")] {
        let d = convert(from, false);
        unfinished(&d);
        std::fs::rename(d, at(to)).unwrap();
    }
    // out.old1's mark made an hour before its directory's last change: renamed by the user since.
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mark = std::fs::File::options().write(true).open(at("out.old1/.loaderx-aside")).unwrap();
    mark.set_modified(hour_ago).unwrap();
    convert("out", true);
    assert!(!at("out.old").exists(), "killed before its mark was finished: swept");
    assert_eq!(DenseDataset::<u8>::open(at("out.old1/images")).unwrap().len(), 5, "renamed since");
    assert!(!out.join(".loaderx-aside").exists() && !at("out.old2").exists());
    assert_eq!(DenseDataset::<u8>::open(out.join("images")).unwrap().len(), 5);
}
