//! `convert::images` on image folders made here with the `image` crate: PNG, JPEG and WebP of
//! several sizes, a truncated file and a text file among them, crop / pad / stretch.

use std::path::Path;

use image::{ImageFormat, Rgb, RgbImage};
use loaderx_core::convert::{ImageOptions, Resize, images};
use loaderx_core::{DenseDataset, Error, WriteOptions};

fn save(path: &Path, w: u32, h: u32, color: [u8; 3], format: ImageFormat) {
    RgbImage::from_pixel(w, h, Rgb(color)).save_with_format(path, format).unwrap();
}

/// `cat/` (3 images) and `dog/` (2 images), plus `.hidden/` ignored; `bad` adds a truncated
/// PNG and a text file to `dog/`.
pub(crate) fn folder(root: &Path, bad: bool) {
    for c in ["cat", "dog", ".hidden"] {
        std::fs::create_dir_all(root.join(c)).unwrap();
    }
    save(&root.join("cat/a.png"), 40, 30, [255, 0, 0], ImageFormat::Png);
    save(&root.join("cat/b.jpg"), 17, 50, [0, 255, 0], ImageFormat::Jpeg);
    save(&root.join("cat/c.webp"), 64, 64, [0, 0, 255], ImageFormat::WebP);
    save(&root.join("dog/a.png"), 8, 8, [10, 20, 30], ImageFormat::Png);
    save(&root.join("dog/z.png"), 100, 20, [200, 200, 0], ImageFormat::Png);
    save(&root.join(".hidden/x.png"), 8, 8, [1, 1, 1], ImageFormat::Png);
    if bad {
        let png = std::fs::read(root.join("dog/a.png")).unwrap();
        std::fs::write(root.join("dog/b-truncated.png"), &png[..png.len() / 2]).unwrap();
        std::fs::write(root.join("dog/notes.txt"), b"not an image").unwrap();
    }
}

#[test]
fn an_image_folder_becomes_images_labels_and_classes() {
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), false);
    let out = dir.path().join("out");
    let s = images(dir.path().join("in"), &out, ImageOptions::new(32, 24), WriteOptions::new()).unwrap();
    assert_eq!(s.classes, ["cat", "dog"]);
    assert_eq!(s.images.records, 5);
    assert!(s.skipped.is_empty());
    assert_eq!(std::fs::read_to_string(out.join("classes.txt")).unwrap(), "cat\ndog\n");
    let imgs = DenseDataset::<u8>::open(out.join("images")).unwrap();
    assert_eq!(imgs.source().item_shape(), &[24, 32, 3]);
    let labels = DenseDataset::<u32>::open(out.join("labels")).unwrap();
    assert_eq!(labels.get_batch(&[0, 1, 2, 3, 4]).unwrap().as_slice::<u32>().unwrap(), &[0, 0, 0, 1, 1]);
    // Solid images stay solid under a crop (JPEG within its loss).
    let px = imgs.get_batch(&[0, 1, 3]).unwrap();
    let px = px.as_slice::<u8>().unwrap();
    let item = 24 * 32 * 3;
    assert!(px[..item].chunks(3).all(|p| p == [255, 0, 0]), "red png");
    assert!(px[item..2 * item].chunks(3).all(|p| p[0] < 16 && p[1] > 235 && p[2] < 16), "green jpeg");
    assert!(px[2 * item..].chunks(3).all(|p| p == [10, 20, 30]), "upscaled png");
    assert!(
        matches!(
            images(dir.path().join("in"), &out, ImageOptions::new(32, 24), WriteOptions::new()),
            Err(Error::AlreadyExists { path }) if path == out
        ),
        "no overwrite without force"
    );
    // With it, an earlier conversion is replaced (once nothing has it open); a directory of the
    // user's never is.
    drop((imgs, labels));
    let force = WriteOptions::new().overwrite(true);
    images(dir.path().join("in"), &out, ImageOptions::new(32, 24), force.clone()).unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("train.py"), b"mine").unwrap();
    let e = images(dir.path().join("in"), &project, ImageOptions::new(32, 24), force).unwrap_err();
    assert!(matches!(e, Error::NotReplaceable { .. }), "{e}");
    assert_eq!(std::fs::read(project.join("train.py")).unwrap(), b"mine");
}

/// Look 91 (N3): class names with a line break other than `\n` were listed in classes.txt,
/// which then read back with other names (`cat\r` as `cat`, `u\u{2028}v` as two names). Each
/// is refused, naming the class; nothing is written.
#[test]
fn a_class_name_holding_a_line_break_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (i, class) in ["cat\r", "x\u{b}y", "u\u{2028}v", "a\nb"].iter().enumerate() {
        let root = dir.path().join(format!("in{i}"));
        for c in ["dog", class] {
            std::fs::create_dir_all(root.join(c)).unwrap();
            save(&root.join(c).join("a.png"), 8, 8, [1, 2, 3], ImageFormat::Png);
        }
        let out = dir.path().join(format!("out{i}"));
        let e = images(&root, &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap_err();
        assert!(
            matches!(&e, Error::BadInput { path, reason, .. } if path.ends_with(class) && reason.contains("line break")),
            "{e}"
        );
        assert!(!out.exists());
    }
}

#[test]
fn pad_keeps_the_aspect_on_black_and_stretch_fills() {
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), false);
    for (resize, name) in [(Resize::Pad, "pad"), (Resize::Stretch, "stretch")] {
        let out = dir.path().join(name);
        let opts = ImageOptions { resize, ..ImageOptions::new(20, 20) };
        images(dir.path().join("in"), &out, opts, WriteOptions::new()).unwrap();
        let imgs = DenseDataset::<u8>::open(out.join("images")).unwrap();
        // dog/z.png is 100x20 yellow: padded it is a band 4 rows high in the middle.
        let px = imgs.get_batch(&[4]).unwrap();
        let px = px.as_slice::<u8>().unwrap();
        let row = |y: usize| &px[y * 60..(y + 1) * 60];
        match resize {
            Resize::Pad => {
                assert!(row(0).iter().all(|&b| b == 0), "black above");
                assert!(row(19).iter().all(|&b| b == 0), "black below");
                assert!(row(10).chunks(3).all(|p| p == [200, 200, 0]), "the image in the middle");
            }
            _ => assert!(px.chunks(3).all(|p| p == [200, 200, 0]), "stretched over all of it"),
        }
    }
}

#[test]
fn undecodable_files_fail_with_their_path_or_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), true);
    let out = dir.path().join("out");
    let e = images(dir.path().join("in"), &out, ImageOptions::new(16, 16), WriteOptions::new()).unwrap_err();
    assert!(matches!(&e, Error::BadInput { path, .. } if path.ends_with("dog/b-truncated.png")), "{e}");
    assert!(!out.exists() && !dir.path().join("out.partial").exists(), "nothing written");
    let opts = ImageOptions { skip_bad: true, ..ImageOptions::new(16, 16) };
    let s = images(dir.path().join("in"), &out, opts, WriteOptions::new()).unwrap();
    assert_eq!(s.images.records, 5);
    let skipped: Vec<String> =
        s.skipped.iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into()).collect();
    assert_eq!(skipped, ["b-truncated.png", "notes.txt"]);
    // A folder without classes, a missing folder, a zero size.
    std::fs::create_dir_all(dir.path().join("empty")).unwrap();
    std::fs::write(dir.path().join("empty/loose.png"), b"x").unwrap();
    let e =
        images(dir.path().join("empty"), dir.path().join("o2"), ImageOptions::new(8, 8), WriteOptions::new())
            .unwrap_err();
    assert!(e.to_string().contains("no class"), "{e}");
    assert!(matches!(
        images(
            dir.path().join("missing"),
            dir.path().join("o3"),
            ImageOptions::new(8, 8),
            WriteOptions::new()
        ),
        Err(Error::NotAStore { .. })
    ));
    assert!(matches!(
        images(dir.path().join("in"), dir.path().join("o4"), ImageOptions::new(0, 8), WriteOptions::new()),
        Err(Error::InvalidArgument(m)) if m.contains("an output size of 0x8")
    ));
}

/// A valid grey PNG of `side` x `side` black pixels that is small on disk: its rows (a filter
/// byte and `side` zeros each) compressed once, 64 rows at a time, and that deflate block
/// repeated (every block is byte-aligned by the sync flush, and refers only to zeros).
fn grey_png_bomb(side: u32) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let rows_per_block = 64;
    assert_eq!(side % rows_per_block, 0);
    let block = vec![0u8; (side as usize + 1) * rows_per_block as usize];
    let mut c = Compress::new(Compression::fast(), false);
    let mut deflated = Vec::with_capacity(block.len());
    c.compress_vec(&block, &mut deflated, FlushCompress::Sync).unwrap();
    assert_eq!(c.total_in(), block.len() as u64, "one call compressed the whole block");
    let mut last = Vec::with_capacity(64);
    c.compress_vec(&[], &mut last, FlushCompress::Finish).unwrap();
    let total = block.len() as u64 * u64::from(side / rows_per_block);
    // zlib: a header, the blocks, the final empty block, then Adler-32 (of zeros: a = 1, b = n).
    let mut zlib = vec![0x78, 0x01];
    for _ in 0..side / rows_per_block {
        zlib.extend_from_slice(&deflated);
    }
    zlib.extend_from_slice(&last);
    zlib.extend_from_slice(&((((total % 65521) as u32) << 16) | 1).to_be_bytes());
    let chunk = |out: &mut Vec<u8>, kind: &[u8], data: &[u8]| {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    };
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = side.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&side.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]); // 8 bits, grey, deflate, no filter set, no interlace
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib);
    chunk(&mut png, b"IEND", &[]);
    png
}

/// An image bomb (issue 27, 3.9): a PNG of about a megabyte that announces 16384 x 16384 grey
/// pixels decodes within the decoder's own limit (256 MiB) but takes 1.8 GiB with its
/// conversion to RGB and its resizing, per decode thread. Refused from its header, before any
/// pixel is decoded, naming the file (or skipped with `skip_bad`); the images beside it convert.
#[test]
fn an_image_bomb_is_refused_from_its_header_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    std::fs::create_dir_all(root.join("cat")).unwrap();
    save(&root.join("cat/a.png"), 40, 30, [255, 0, 0], ImageFormat::Png);
    let bomb = root.join("cat/b-bomb.png");
    let png = grey_png_bomb(1 << 14);
    assert!(png.len() < 2 << 20, "{} bytes on disk", png.len());
    std::fs::write(&bomb, &png).unwrap();
    let out = dir.path().join("out");
    match images(&root, &out, ImageOptions::new(32, 32), WriteOptions::new()).unwrap_err() {
        Error::BadInput { path, reason, .. } => {
            assert_eq!(path, bomb);
            assert!(reason.contains("16384x16384") && reason.contains("needs"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!out.exists() && !dir.path().join("out.partial").exists(), "nothing written");
    let opts = ImageOptions { skip_bad: true, ..ImageOptions::new(32, 32) };
    let s = images(&root, &out, opts, WriteOptions::new()).unwrap();
    assert_eq!(s.images.records, 1);
    assert_eq!(s.skipped.len(), 1);
    assert_eq!(s.skipped[0].0, bomb);
}

/// The image converter's staging directory is locked like a dataset writer's: a conversion into
/// an output another one is writing is refused naming it, a crashed one's leftovers are cleared,
/// and a staging path planted as a link is refused, not written through (issue 27).
#[cfg(unix)]
#[test]
fn the_staging_directory_is_locked_and_never_a_link() {
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), false);
    let out = dir.path().join("out");
    let staging = dir.path().join("out.partial");
    // A live conversion's lock, held here as another converter would hold it.
    std::fs::create_dir(&staging).unwrap();
    let lock = std::fs::File::create(staging.join("convert.lock")).unwrap();
    lock.try_lock().unwrap();
    let err = images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(staging.join("convert.lock").exists() && !out.exists());
    drop(lock);
    // The holder is gone (a crash): its leftovers are cleared and the conversion goes through.
    std::fs::write(staging.join("classes.txt"), b"stale").unwrap();
    std::fs::create_dir(staging.join("images")).unwrap();
    let s = images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap();
    assert_eq!(s.images.records, 5);
    assert_eq!(std::fs::read_to_string(out.join("classes.txt")).unwrap(), "cat\ndog\n");
    assert!(!staging.exists() && !out.join("convert.lock").exists());
    // A staging path that is a link to another directory is refused; that directory is untouched.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep"), b"mine").unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("two.partial")).unwrap();
    let err =
        images(dir.path().join("in"), dir.path().join("two"), ImageOptions::new(8, 8), WriteOptions::new())
            .unwrap_err();
    assert!(matches!(err, Error::BadInput { .. }), "{err}");
    assert_eq!(std::fs::read(elsewhere.join("keep")).unwrap(), b"mine");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
}

/// Every entry under `dir` by path relative to it: a file's bytes, `None` for a directory.
fn tree(dir: &Path) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
    let mut all = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                all.insert(name, None);
                todo.push(p);
            } else {
                all.insert(name, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    all
}

/// K1 (issue 40, eleventh look): a directory of the user's that bears the staging name
/// `OUT.partial` is refused, never emptied nor renamed into place; so is one holding a user's
/// file under a name the conversion writes.
#[test]
fn a_users_partial_directory_is_refused_not_emptied() {
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), false);
    let (out, staging) = (dir.path().join("photos"), dir.path().join("photos.partial"));
    std::fs::create_dir_all(staging.join("2023")).unwrap();
    std::fs::write(staging.join("thesis.tex"), b"\\documentclass{article}").unwrap();
    std::fs::write(staging.join("2023/holiday.txt"), b"beach").unwrap();
    let before = tree(&staging);
    let err = images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { path, .. } if *path == staging), "{err}");
    assert_eq!(tree(&staging), before, "nothing of the user's removed");
    assert!(!out.exists());
    // A user's `images/` (not a dataset) inside: refused too, naming it.
    std::fs::remove_file(staging.join("thesis.tex")).unwrap();
    std::fs::remove_dir_all(staging.join("2023")).unwrap();
    std::fs::create_dir(staging.join("images")).unwrap();
    std::fs::write(staging.join("images/cover.png"), b"mine").unwrap();
    let err = images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { .. }), "{err}");
    assert_eq!(std::fs::read(staging.join("images/cover.png")).unwrap(), b"mine");
    assert!(!out.exists());
    // Twelfth look, L4: what a crashed conversion would leave (a dataset `images/`, a
    // `classes.txt`) but no lock of one: the user's, refused, nothing removed.
    std::fs::remove_dir_all(staging.join("images")).unwrap();
    let mut w =
        loaderx_core::DatasetWriter::dense::<u8>(staging.join("images"), vec![1], WriteOptions::new())
            .unwrap();
    w.append(&[7u8; 100]).unwrap();
    w.finish().unwrap();
    std::fs::write(staging.join("classes.txt"), b"my hand-curated classes\n").unwrap();
    let before = tree(&staging);
    let err = images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { path, .. } if *path == staging), "{err}");
    assert_eq!(tree(&staging), before, "nothing of the user's removed");
    // Beside a crashed conversion's lock (a process id), the same is a conversion's leftovers.
    std::fs::write(staging.join("convert.lock"), b"4242").unwrap();
    images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap();
    assert!(out.join("images").exists() && !staging.exists());
}

/// K2: a directory created at OUT while a conversion runs (here from the progress callback,
/// which runs before the rename) is the user's: without overwrite the conversion is
/// `AlreadyExists`, with it `NotReplaceable`; nothing of it is removed, and the run's staging
/// directory is.
#[test]
fn what_appears_at_out_during_a_conversion_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), false);
    let appear = |out: &Path| {
        let results = out.join("results");
        move |_done: u64| {
            std::fs::create_dir_all(&results).unwrap();
            std::fs::write(results.join("run1.csv"), b"epoch,loss\n1,0.5\n").unwrap();
        }
    };
    let kept = |out: &Path| {
        assert_eq!(std::fs::read(out.join("results/run1.csv")).unwrap(), b"epoch,loss\n1,0.5\n");
        let mut partial = out.as_os_str().to_owned();
        partial.push(".partial");
        assert!(!Path::new(&partial).exists(), "the run's staging directory is removed");
    };
    let outb = dir.path().join("outb");
    let opts = WriteOptions::new().progress(appear(&outb));
    match images(dir.path().join("in"), &outb, ImageOptions::new(8, 8), opts) {
        Err(Error::AlreadyExists { path }) => assert_eq!(path, outb),
        other => panic!("{other:?}"),
    }
    kept(&outb);
    assert_eq!(tree(&outb).len(), 2, "only the user's results/run1.csv");
    // With overwrite, OUT absent at the start.
    let outc = dir.path().join("outc");
    let opts = WriteOptions::new().overwrite(true).progress(appear(&outc));
    let err = images(dir.path().join("in"), &outc, ImageOptions::new(8, 8), opts).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { path, .. } if *path == outc), "{err}");
    kept(&outc);
    // With overwrite, OUT an earlier conversion at the start: the user's file added to it
    // meanwhile refuses the replacement, and the earlier conversion stays whole.
    let outd = dir.path().join("outd");
    images(dir.path().join("in"), &outd, ImageOptions::new(8, 8), WriteOptions::new()).unwrap();
    let opts = WriteOptions::new().overwrite(true).progress(appear(&outd));
    let err = images(dir.path().join("in"), &outd, ImageOptions::new(4, 4), opts).unwrap_err();
    assert!(matches!(&err, Error::NotReplaceable { path, .. } if *path == outd), "{err}");
    kept(&outd);
    assert_eq!(DenseDataset::<u8>::open(outd.join("images")).unwrap().source().item_shape(), &[8, 8, 3]);
}

/// K3: `--force` never replaces a dataset of OUT that a reader or a writer has open, whether it
/// was open at the start or opened while the conversion ran: `Locked`, the old datasets whole.
#[test]
fn a_forced_conversion_leaves_datasets_open_elsewhere_alone() {
    use loaderx_core::{Store, StoreOptions};
    let dir = tempfile::tempdir().unwrap();
    folder(&dir.path().join("in"), false);
    let out = dir.path().join("out");
    images(dir.path().join("in"), &out, ImageOptions::new(8, 8), WriteOptions::new()).unwrap();
    let force = WriteOptions::new().overwrite(true);
    let whole = |out: &Path| {
        assert_eq!(DenseDataset::<u8>::open(out.join("images")).unwrap().source().item_shape(), &[8, 8, 3]);
        assert_eq!(Store::open(out.join("labels")).unwrap().len(), 5);
        assert!(!dir.path().join("out.partial").exists());
    };
    let reader = Store::open(out.join("images")).unwrap();
    let err = images(dir.path().join("in"), &out, ImageOptions::new(4, 4), force.clone()).unwrap_err();
    assert!(matches!(&err, Error::Locked { .. }), "{err}");
    assert_eq!(reader.len(), 5);
    drop(reader);
    whole(&out);
    let writer = Store::open_rw(out.join("labels"), StoreOptions::new()).unwrap();
    let err = images(dir.path().join("in"), &out, ImageOptions::new(4, 4), force.clone()).unwrap_err();
    assert!(matches!(&err, Error::Locked { .. }), "{err}");
    drop(writer);
    whole(&out);
    // A reader that opens while the conversion runs is there at the replacement.
    let held = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (h, images_dir) = (held.clone(), out.join("images"));
    let opts = force.clone().progress(move |_| {
        h.lock().unwrap().get_or_insert_with(|| Store::open(&images_dir).unwrap());
    });
    let err = images(dir.path().join("in"), &out, ImageOptions::new(4, 4), opts).unwrap_err();
    assert!(matches!(&err, Error::Locked { .. }), "{err}");
    assert!(held.lock().unwrap().take().is_some(), "the reader was open");
    whole(&out);
    // Alone, it is replaced.
    images(dir.path().join("in"), &out, ImageOptions::new(4, 4), force).unwrap();
    assert_eq!(DenseDataset::<u8>::open(out.join("images")).unwrap().source().item_shape(), &[4, 4, 3]);
}

/// An image of a folder read unconverted that does not decode is an error naming its file, not
/// `<memory>` (look 69, L69-2), through a view too.
#[test]
fn an_undecodable_image_of_a_folder_names_its_file() {
    use loaderx_core::vision::ImagePipeline;
    use loaderx_core::{DataLoader, Selection};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("cat")).unwrap();
    for i in 0..3u32 {
        RgbImage::from_pixel(8, 8, Rgb([1, 2, 3]))
            .save(dir.path().join("cat").join(format!("{i}.png")))
            .unwrap();
    }
    std::fs::write(dir.path().join("cat/1.png"), b"not an image").unwrap();
    let folder = loaderx_core::convert::image_folder(dir.path()).unwrap();
    let view = folder.images.select(&Selection::indices(vec![2u32, 1])).unwrap();
    assert_eq!(view.record_file(1), Some(dir.path().join("cat/1.png")));
    for (images, batch) in [(folder.images, 3), (view, 2)] {
        let mut loader = DataLoader::builder()
            .image_stream("image", images, ImagePipeline::eval(4))
            .batch_size(batch)
            .build()
            .unwrap();
        match loader.next_batch() {
            Err(Error::BadInput { path, reason, .. }) => {
                assert_eq!(path, dir.path().join("cat/1.png"), "{reason}");
                assert!(reason.contains("not a decodable image"), "{reason}");
            }
            other => panic!("{:?}", other.map(|b| b.is_some())),
        }
    }
}

/// Look 101, L101-1: an output named with a trailing separator (`out/`, as a shell completes a
/// directory) was staged inside itself (`out/.partial`): a fresh path failed as "already
/// exists", and a dataset replaced through `ds/` kept the staging inside it, refusing every later
/// replacement. The output is the directory the name names, staged beside it, for a dataset
/// writer and for an image folder's directory of datasets alike.
#[test]
fn an_output_named_with_a_trailing_slash_is_staged_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let slash = |p: &Path| format!("{}/", p.display());
    let ds = dir.path().join("ds");
    for overwrite in [false, true, true] {
        let opts = WriteOptions::new().overwrite(overwrite);
        let mut w = loaderx_core::DatasetWriter::dense::<u32>(slash(&ds), vec![2], opts).unwrap();
        w.append(&[1u32, 2, 3, 4]).unwrap();
        w.finish().unwrap();
        assert_eq!(DenseDataset::<u32>::open(&ds).unwrap().len(), 2);
        let mut names: Vec<_> = std::fs::read_dir(&ds).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert!(!names.iter().any(|n| n.to_string_lossy().contains("partial")), "{names:?}");
    }
    // And without the slash after: nothing inside refuses the replacement. Then through the
    // dataset's own `..` (look 102, L102-1: `ds/../ds` lost its way once `ds` was moved aside,
    // and the dataset was left off its name).
    for name in [ds.clone(), ds.join("..").join("ds")] {
        let mut w =
            loaderx_core::DatasetWriter::dense::<u32>(&name, vec![2], WriteOptions::new().overwrite(true))
                .unwrap();
        w.append(&[5u32, 6]).unwrap();
        w.finish().unwrap();
        assert_eq!(DenseDataset::<u32>::open(&ds).unwrap().len(), 1, "{}", name.display());
    }
    // Through a directory that does not exist, then `..`: refused as the kernel refuses the
    // name, and the directory not made (look 106, L106-3: an empty one was left).
    let through = dir.path().join("nodir").join("..").join("ds2");
    let e = loaderx_core::DatasetWriter::dense::<u32>(&through, vec![2], WriteOptions::new()).unwrap_err();
    assert!(matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound), "{e}");
    assert!(!dir.path().join("nodir").exists() && !dir.path().join("ds2").exists());
    // A `..` before the missing part resolves, and the missing directory is made (L116-3).
    std::fs::create_dir(dir.path().join("x")).unwrap();
    let up = dir.path().join("x").join("..").join("new").join("ds3");
    let mut w = loaderx_core::DatasetWriter::dense::<u32>(&up, vec![2], WriteOptions::new()).unwrap();
    w.append(&[7u32, 8]).unwrap();
    w.finish().unwrap();
    assert_eq!(DenseDataset::<u32>::open(dir.path().join("new/ds3")).unwrap().len(), 1);
    std::fs::remove_dir_all(dir.path().join("new")).unwrap();
    std::fs::remove_dir(dir.path().join("x")).unwrap();
    folder(&dir.path().join("in"), false);
    let out = dir.path().join("out");
    for overwrite in [false, true] {
        let opts = WriteOptions::new().overwrite(overwrite);
        images(dir.path().join("in"), slash(&out), ImageOptions::new(8, 8), opts).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["classes.txt", "images", "labels"], "{overwrite}");
    }
    let mut beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    beside.sort();
    assert_eq!(beside, ["ds", "in", "out"]);
}

/// Look 104, L104-4: an output inside the image folder was taken for a class on the next run
/// (its chunk files as images, `classes.txt` gaining a class). Refused, naming both.
#[test]
fn an_output_inside_the_image_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    folder(&input, false);
    std::fs::create_dir(dir.path().join("x")).unwrap();
    for out in [
        input.join("out"),
        input.join("cat").join("out"),
        dir.path().join("x").join("..").join("in").join("o"),
    ] {
        match images(&input, &out, ImageOptions::new(8, 8), WriteOptions::new()) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("lies inside the image folder"), "{m}"),
            other => panic!("{}: {other:?}", out.display()),
        }
        assert!(!out.exists());
    }
    images(&input, dir.path().join("beside"), ImageOptions::new(8, 8), WriteOptions::new()).unwrap();
}

/// A detailed JPEG of 128 x 96 at quality 90, its height field in the frame header at `height`.
#[cfg(feature = "turbojpeg")]
fn jpeg_claiming(height: u16) -> Vec<u8> {
    let img = RgbImage::from_fn(128, 96, |x, y| Rgb([(x * 2) as u8, (y * 3) as u8, ((x * y) % 251) as u8]));
    let mut bytes = std::io::Cursor::new(Vec::new());
    img.write_to(&mut bytes, ImageFormat::Jpeg).unwrap();
    let mut bytes = bytes.into_inner();
    let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).expect("a baseline frame header");
    bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
    bytes
}

/// Look 110, L110-1 and L110-2: a JPEG cut short with its end marker put back, and one whose
/// header claims more rows than its data hold, are refused by both conversions as the loader
/// refuses them (the `image` crate's decoder filled their missing rows in), naming the file; a
/// JPEG followed by other bytes (a motion photo's video) is converted, and kept whole.
#[test]
#[cfg(feature = "turbojpeg")]
fn jpegs_the_loader_refuses_are_refused_and_a_trailer_is_not() {
    use loaderx_core::convert::{EncodedOptions, encoded_images};
    let jpeg = jpeg_claiming(96);
    let mut cut = jpeg[..jpeg.len() / 2].to_vec();
    cut.extend_from_slice(&[0xFF, 0xD9]);
    let mut trailer = jpeg.clone();
    trailer.extend_from_slice(b"\0\0\0\x18ftypmp42");
    trailer.extend((0..1000u32).map(|k| (k * 7919 % 253) as u8));
    // A reserved marker libjpeg-turbo's header reader refuses, cut short with its end marker put
    // back: it went to `image`'s decoder, which filled it in (look 114, L114-1).
    let mut reserved = jpeg[..2].to_vec();
    reserved.extend_from_slice(&[0xFF, 0x02, 0x00, 0x04, 0x61, 0x62]);
    reserved.extend_from_slice(&jpeg[2..jpeg.len() / 2]);
    reserved.extend_from_slice(&[0xFF, 0xD9]);
    let dir = tempfile::tempdir().unwrap();
    let cases = [("cut", cut, true), ("tall", jpeg_claiming(3000), true), ("reserved", reserved, true)];
    for (name, bytes, refused) in cases.into_iter().chain([("trailer", trailer, false)]) {
        let input = dir.path().join(name);
        std::fs::create_dir_all(input.join("a")).unwrap();
        std::fs::write(input.join("a/good.jpg"), &jpeg).unwrap();
        std::fs::write(input.join("a/x.jpg"), &bytes).unwrap();
        let decoded = images(
            &input,
            dir.path().join(format!("{name}-d")),
            ImageOptions::new(16, 16),
            WriteOptions::new(),
        );
        let encoded = encoded_images(
            &input,
            dir.path().join(format!("{name}-e")),
            EncodedOptions::default(),
            WriteOptions::new(),
        );
        if refused {
            for e in [decoded.map(|_| ()).unwrap_err(), encoded.map(|_| ()).unwrap_err()] {
                assert!(
                    matches!(&e, Error::BadInput { path, .. } if path.ends_with("a/x.jpg")),
                    "{name}: {e}"
                );
            }
        } else {
            assert_eq!(decoded.unwrap().images.records, 2, "{name}");
            assert_eq!(encoded.unwrap().images.records, 2, "{name}");
            let kept = crate::parts::records_of(&dir.path().join(format!("{name}-e/images")));
            assert_eq!(kept[1], bytes, "the file is kept whole, its trailer with it");
        }
    }
}
