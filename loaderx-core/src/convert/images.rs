//! Image folders (the ImageFolder convention: one subdirectory per class) into a dense `u8`
//! image dataset and a label dataset, decoded and resized with the `image` crate (feature
//! `images`).

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use fast_image_resize as fir;
use image::{ColorType, DynamicImage, ImageDecoder, ImageReader, Limits, RgbImage};
use rayon::prelude::*;

use super::block::{catch_decoder_panic, pipelined};
use super::folder::Image;
use super::image_io::{Budget, Budgets, Undecodable, decode_cost};
use super::part::Part;
use super::summary::ConvertSummary;
use crate::{DatasetWriter, Error, Result, Store, WriteOptions};

/// Images decoded in parallel per window, per thread.
const PER_THREAD: usize = 16;
/// The largest image side decoded, and the most memory one decode may take: an image is
/// untrusted input, and its header alone must not size an allocation.
pub(super) const MAX_SIDE: u32 = 1 << 14;
pub(super) const MAX_ALLOC: u64 = 512 << 20;
/// The most memory one image may take from its decode to its output (see [`decode_cost`]),
/// from the dimensions in its header, before anything is decoded: the decoder's `max_alloc`
/// does not cover the conversion to RGB nor the resizing, which take several times more for a
/// grey image (a 255 KB PNG of 16384 x 16384 grey needs 1.8 GiB).
pub(super) const MAX_IMAGE_BYTES: u64 = 1 << 30;
/// The memory the decodes of one conversion take at once, across all its threads: a decode waits
/// for its bytes to be free, so large images are decoded fewer at a time instead of the memory
/// growing with the number of threads.
pub(super) const DECODE_BUDGET: u64 = MAX_IMAGE_BYTES;
/// The largest image file read, and the memory the files being decoded take at once (each
/// counted twice: the JPEG decoder copies its input).
pub(super) const MAX_FILE_BYTES: u64 = 256 << 20;
pub(super) const FILE_BUDGET: u64 = 2 * MAX_FILE_BYTES;
/// What a conversion writes into OUT: the two datasets, and the class list beside them. Only
/// these are replaced with overwrite, and only these (each of loaderx's files) are cleared from
/// a crashed conversion's staging directory.
const DATASETS: [&str; 2] = ["images", "labels"];
const FILES: [&str; 1] = ["classes.txt"];

/// How an image is brought to the output size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resize {
    /// Scaled to cover the size, then the centre cut out (aspect kept, edges lost).
    #[default]
    Crop,
    /// Scaled to fit inside the size, centred on black (aspect kept, nothing lost).
    Pad,
    /// Scaled to the size (aspect not kept).
    Stretch,
}

impl std::str::FromStr for Resize {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Resize, String> {
        match s {
            "crop" => Ok(Resize::Crop),
            "pad" => Ok(Resize::Pad),
            "stretch" => Ok(Resize::Stretch),
            other => Err(format!("`{other}` is not crop, pad or stretch")),
        }
    }
}

/// What [`images`] converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageOptions {
    /// Output width and height.
    pub size: (u32, u32),
    /// How images are brought to `size`.
    pub resize: Resize,
    /// Skip (and report) files that do not decode, instead of failing with nothing written.
    pub skip_bad: bool,
}

impl ImageOptions {
    /// `width` × `height`, cropped, failing on a bad file.
    pub fn new(width: u32, height: u32) -> ImageOptions {
        ImageOptions { size: (width, height), resize: Resize::Crop, skip_bad: false }
    }
}

/// What [`images`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagesSummary {
    /// The class names, label `i` is `classes[i]` (also in `OUT/classes.txt`).
    pub classes: Vec<String>,
    /// The image dataset's summary (`bytes_in`: the encoded files' bytes).
    pub images: ConvertSummary,
    /// Files skipped as undecodable (with `skip_bad`), with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Converts the image folder `dir` (one subdirectory per class, in byte-wise name order; the
/// regular files directly in each, in name order) into `out/images`, a dense `u8` dataset of
/// `[height, width, 3]` RGB items, `out/labels`, a dense `u32` dataset of class indices, and
/// `out/classes.txt`, the class names one per line. JPEG, PNG and WebP are decoded (the format
/// from the content, not the name), in parallel, and resized as `options` say (bilinear).
///
/// All or nothing: `out` is written as `out.partial` and renamed into place when complete.
/// Nothing of the user's is removed: an `out.partial` holding anything but a crashed
/// conversion's files is refused, and so is an `out` that appears while the conversion runs
/// (without overwrite); with overwrite, only an earlier conversion's `images/`, `labels/` and
/// `classes.txt` are replaced, none of them open in a writer or a reader.
/// A file that does not decode is an error naming it (nothing written), or with `skip_bad` is
/// left out and listed in the summary; so is one whose header announces an image that would take
/// more than 1 GiB from decode to output (pixels times channels, counted before decoding), or a
/// file over 256 MiB. The decodes running at once share 1 GiB, whatever the number of threads.
///
/// # Errors
/// [`Error::NotAStore`] naming `dir` when it does not exist; [`Error::BadInput`] naming `dir`
/// when it has no class subdirectories or no files, or naming a file that does not decode;
/// [`Error::InvalidArgument`] for a size of 0 or an item over the format's record limit;
/// [`Error::AlreadyExists`] for an `out` that exists, at the start or once the conversion is
/// complete, without overwrite; [`Error::NotReplaceable`] for an `out.partial`, or (with
/// overwrite) an `out`, holding anything a conversion does not write; [`Error::Locked`] for
/// another conversion into `out`, or (with overwrite) a dataset of `out` that a writer or
/// readers have open; [`Error::Io`].
pub fn images(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: ImageOptions,
    opts: WriteOptions,
) -> Result<ImagesSummary> {
    images_part(dir, out, options, opts, Part::WHOLE)
}

/// [`images`] of only part `part` of the files: the files [`Part::rows`] of the folder's
/// files in order (class by class, name by name), so that `out/images` and `out/labels` hold
/// the same records as the whole conversion's from those files (with `skip_bad`, the same
/// files left out). Every part lists the whole folder: `out/classes.txt` and the labels are
/// the whole folder's. Only the part's files are decoded, so a bad file is an error (or
/// skipped) in its own part only. A part of no files, or whose files were all skipped, is a
/// pair of empty datasets (only the whole conversion refuses to write no image).
///
/// # Errors
/// As [`images`]; [`Error::InvalidArgument`] for a part out of range.
pub fn images_part(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: ImageOptions,
    opts: WriteOptions,
    part: Part,
) -> Result<ImagesSummary> {
    let (w, h) = options.size;
    if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE {
        return Err(Error::InvalidArgument(format!("an output size of {w}x{h} (each side 1..={MAX_SIDE})")));
    }
    let item = w as usize * h as usize * 3;
    if item > opts.max_record_size() {
        return Err(Error::InvalidArgument(format!(
            "an image of {w}x{h}x3 is {item} bytes; a {} record holds at most {}",
            opts.store_format(),
            opts.max_record_size()
        )));
    }
    convert_folder(dir.as_ref(), out.as_ref(), Target::Decoded(options), opts, part)
}

/// What a folder conversion writes of each file.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    /// The pixels, decoded and resized ([`images`]).
    Decoded(ImageOptions),
    /// The file as it is, or re-encoded smaller ([`super::encoded_images`]).
    Encoded(super::encoded::EncodedOptions),
}

impl Target {
    fn skip_bad(self) -> bool {
        match self {
            Target::Decoded(o) => o.skip_bad,
            Target::Encoded(o) => o.skip_bad,
        }
    }
}

/// Refuses an `out` inside the image folder `dir`: its output, staging and old copy would be
/// listed as a class of it on the next run (look 104, L104-4: a class `out` of chunk files).
fn refuse_inside(dir: &Path, out: &Path) -> Result<()> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let (Ok(dir), Ok(parent)) = (dir.canonicalize(), parent.canonicalize())
        && parent.starts_with(&dir)
    {
        return Err(Error::InvalidArgument(format!(
            "{} lies inside the image folder {}: the next conversion would take it for a class; write it \
             elsewhere",
            out.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// [`images_part`] and [`super::encoded_images_part`]: the folder listed, the part's files
/// converted into a staging directory, placed at `out` when complete.
pub(super) fn convert_folder(
    dir: &Path,
    out: &Path,
    target: Target,
    opts: WriteOptions,
    part: Part,
) -> Result<ImagesSummary> {
    let part = part.checked()?;
    if !dir.is_dir() {
        return Err(Error::NotAStore {
            path: dir.to_path_buf(),
            reason: "it is not a directory of class folders".into(),
        });
    }
    let (out, staging) = crate::dataset::out_and_staging(out)?;
    let out = out.as_path();
    refuse_inside(dir, out)?;
    if std::fs::symlink_metadata(out).is_ok() {
        if !opts.overwrites() {
            return Err(Error::AlreadyExists { path: out.to_path_buf() });
        }
        crate::dataset::check_replaceable_dir_of(out, &DATASETS, &FILES)?;
        // Asked now as well as at the replacement: datasets a writer or readers have open are
        // refused before a whole conversion is spent on replacing them.
        crate::dataset::check_free_dir_of(out, &DATASETS)?;
    }
    let (classes, files) = super::folder::list(dir)?;
    let rows = part.rows(files.len() as u64);
    let files = &files[rows.start as usize..rows.end as usize];
    // Locked for the whole conversion, through the rename: a second conversion into `out` fails
    // naming this one instead of removing its files (and a link planted there is refused).
    // A crashed conversion leaves its lock: only beside one that was there before this one's is
    // anything in the staging directory a conversion's to remove (review L4).
    let crashed = staging.join(crate::dataset::STAGING_LOCK).exists();
    let mut lock = crate::dataset::lock_staging(&staging, out)?;
    // What a crashed conversion left is this one's to remove; a directory of the user's that
    // happens to bear the staging name is not: refused whole, nothing in it removed.
    crate::dataset::clear_staging_dir_of(&staging, &DATASETS, &FILES, crashed)?;
    let mut made = Vec::new();
    // OUT is looked at again once the conversion is complete: what appeared there meanwhile is
    // the user's, kept without overwrite, and replaced with it only if a conversion's own.
    let placed = write(dir, &staging, &classes, files, (target, part == Part::WHOLE), &opts, &mut made)
        .and_then(|written| {
            Ok((written, crate::dataset::place_dir_of(&staging, out, opts.overwrites(), &DATASETS, &FILES)?))
        });
    let ((images, skipped), aside) = match placed {
        Ok(placed) => placed,
        Err(e) => {
            discard(&staging, &made, lock);
            return Err(e);
        }
    };
    lock.moved_to(out);
    // In place from here: a failure says so, as a dataset writer's does (look 117's sweep: the
    // parent's sync failing was a plain error over a conversion standing complete in OUT).
    let placed = |source: Error| Error::Committed {
        path: out.to_path_buf(),
        what: format!("the conversion of {} images", images.records),
        remedy: "it is in place; its name may not be durable yet, and an old output it replaced may be \
                 left beside it (OUT.old, OUT.old1, ...)",
        source: Box::new(source),
    };
    if let Some(aside) = aside {
        aside.remove().map_err(placed)?;
    }
    // And those of conversions killed before they removed theirs (look 147, L147-1).
    crate::dataset::remove_killed_asides_dir_of(out, &DATASETS, &FILES);
    // A bare relative `out` has the parent "", which names no directory.
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    crate::store::sync_dir(parent).map_err(placed)?;
    Ok(ImagesSummary { classes, images, skipped })
}

/// Removes what this conversion made in its staging directory (`made`: its datasets, its class
/// list), then its lock, then the directory if that leaves it empty: nothing else that is there.
fn discard(staging: &Path, made: &[&str], lock: crate::store::WriteLock) {
    for name in made {
        let path = staging.join(name);
        // Best effort: the conversion's own error is the one reported.
        if DATASETS.contains(name) {
            let _ = crate::dataset::remove_dataset_dir(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    drop(lock);
    let _ = std::fs::remove_dir(staging);
}

/// Reads and decodes the image file `image` within the budgets: its length and the bytes read,
/// and the image brought to `options.size`, or why not.
pub(super) fn decode_file(
    image: &Image,
    options: ImageOptions,
    budgets: &Budgets,
) -> (u64, std::result::Result<RgbImage, Undecodable>) {
    with_file(image, budgets, |bytes| decode(bytes, options, &budgets.pixels))
}

/// Reads the image file `image` within the file budget and hands its bytes to `f` (a decoder's
/// panic caught as why the file is refused): the bytes read, and `f`'s result or why not. The
/// file read is the one listed ([`Image::open`]), and all of it: a file cut short while read is
/// refused, not kept as part of an image.
pub(super) fn with_file<T>(
    image: &Image,
    budgets: &Budgets,
    f: impl FnOnce(&[u8]) -> std::result::Result<T, Undecodable>,
) -> (u64, std::result::Result<T, Undecodable>) {
    let (file, len) = match image.open() {
        Ok(f) => f,
        Err(Error::BadInput { reason, source: None, .. }) => return (0, Err(Undecodable::why(reason))),
        Err(e) => return (0, Err(Undecodable::caused(Some("cannot be read"), e))),
    };
    if len > MAX_FILE_BYTES {
        let why = format!("{len} bytes; image files of at most {MAX_FILE_BYTES} bytes are decoded");
        return (len, Err(Undecodable::why(why)));
    }
    let _file_bytes = budgets.files.take(2 * len);
    let mut bytes = Vec::with_capacity(len as usize);
    // No more than the length measured: a file growing meanwhile cannot outgrow its budget.
    if let Err(e) = file.take(len).read_to_end(&mut bytes) {
        return (0, Err(Undecodable::caused(Some("cannot be read"), e)));
    }
    if (bytes.len() as u64) < len {
        let why = format!("{} of its {len} bytes read: the file was cut short while read", bytes.len());
        return (bytes.len() as u64, Err(Undecodable::why(why)));
    }
    let done = catch_decoder_panic(|| f(&bytes))
        .unwrap_or_else(|panic| Err(Undecodable::why(format!("it broke the decoder: {panic}"))));
    (bytes.len() as u64, done)
}

/// Decodes `bytes` within the limits and brings the image to `options.size` as RGB, its memory
/// (from the header's dimensions) taken from `pixels` first.
fn decode(
    bytes: &[u8],
    options: ImageOptions,
    pixels: &Budget,
) -> std::result::Result<RgbImage, Undecodable> {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    // Only the JPEG's own bytes (the decoder fills a cut file's missing part with grey).
    let bytes = crate::vision::jpeg_data(bytes).map_err(Undecodable::why)?;
    // A JPEG libjpeg-turbo takes is decoded by it as the loader decodes it, its warnings errors
    // (look 110, L110-1: `image`'s decoder passed a file cut short with its end marker put back,
    // filled in, and a header claiming 16000x10000 pixels over a few kilobytes of data).
    #[cfg(feature = "turbojpeg")]
    if let Some(rgb) = crate::vision::whole_jpeg(bytes, |w, h| {
        let need = decode_cost(w, h, u64::from(w) * u64::from(h) * 3, true, options.size);
        if need > MAX_IMAGE_BYTES {
            return Err(format!(
                "an image of {w}x{h} needs {need} bytes to decode and resize to {}x{}; one image is given at most \
                 {MAX_IMAGE_BYTES}",
                options.size.0, options.size.1
            ));
        }
        Ok(pixels.take(need))
    })
    .map_err(Undecodable::why)?
    {
        return Ok(fit(&DynamicImage::ImageRgb8(rgb), options));
    }
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| Undecodable::caused(Some("its format cannot be guessed"), e))?;
    reader.limits(limits);
    let decoder = reader.into_decoder().map_err(|e| Undecodable::caused(None, e))?;
    let ((w, h), color, decoded) = (decoder.dimensions(), decoder.color_type(), decoder.total_bytes());
    let pixel = color.bytes_per_pixel();
    // What `ImageReader::decode` checks before allocating its output: the decoder's limits
    // bound only its own working memory.
    if decoded > MAX_ALLOC {
        return Err(Undecodable::why(format!(
            "an image of {w}x{h} at {pixel} bytes a pixel is {decoded} bytes decoded; the limit is {MAX_ALLOC}"
        )));
    }
    let need = decode_cost(w, h, decoded, color == ColorType::Rgb8, options.size);
    if need > MAX_IMAGE_BYTES {
        return Err(Undecodable::why(format!(
            "an image of {w}x{h} at {pixel} bytes a pixel needs {need} bytes to decode, convert and resize to {}x{}; \
             one image is given at most {MAX_IMAGE_BYTES}",
            options.size.0, options.size.1
        )));
    }
    let _held = pixels.take(need);
    let img = DynamicImage::from_decoder(decoder).map_err(|e| Undecodable::caused(None, e))?;
    // A PNG's compressed data checked against their Adler-32, which `image` skips (look 122,
    // L122-2): decoded again a row at a time, once `image` has taken it within the limits.
    crate::vision::check_png(bytes).map_err(Undecodable::why)?;
    Ok(fit(&img, options))
}

/// `img` brought to `options.size` as RGB, as [`images`] does to each image (bilinear
/// convolution, its support widened when downscaling).
pub fn fit(img: &DynamicImage, options: ImageOptions) -> RgbImage {
    let (w, h) = options.size;
    let converted;
    let rgb = match img.as_rgb8() {
        Some(rgb) => rgb,
        None => {
            converted = img.to_rgb8();
            &converted
        }
    };
    let (iw, ih) = (rgb.width().max(1), rgb.height().max(1));
    let alg = fir::ResizeOptions::new().resize_alg(fir::ResizeAlg::Convolution(fir::FilterType::Bilinear));
    let resize = |dw: u32, dh: u32, opts: &fir::ResizeOptions| -> Option<Vec<u8>> {
        let src = fir::images::ImageRef::new(iw, ih, rgb.as_raw(), fir::PixelType::U8x3).ok()?;
        let mut dst = fir::images::Image::new(dw, dh, fir::PixelType::U8x3);
        fir::Resizer::new().resize(&src, &mut dst, opts).ok()?;
        Some(dst.into_vec())
    };
    let out = match options.resize {
        Resize::Stretch => resize(w, h, &alg),
        Resize::Crop => resize(w, h, &alg.fit_into_destination(Some((0.5, 0.5)))),
        Resize::Pad => {
            let scale = (f64::from(w) / f64::from(iw)).min(f64::from(h) / f64::from(ih));
            let (sw, sh) = (
                ((f64::from(iw) * scale).round() as u32).clamp(1, w),
                ((f64::from(ih) * scale).round() as u32).clamp(1, h),
            );
            resize(sw, sh, &alg).map(|scaled| {
                let mut canvas = vec![0u8; w as usize * h as usize * 3];
                let (x, y) = (((w - sw) / 2) as usize, ((h - sh) / 2) as usize);
                for (r, row) in scaled.chunks_exact(sw as usize * 3).enumerate() {
                    let at = ((y + r) * w as usize + x) * 3;
                    canvas[at..at + row.len()].copy_from_slice(row);
                }
                canvas
            })
        }
    };
    // The resizer fails only on buffers of the wrong size, which these are not; black then.
    out.and_then(|v| RgbImage::from_raw(w, h, v)).unwrap_or_else(|| RgbImage::new(w, h))
}

type Written = (ConvertSummary, Vec<(PathBuf, String)>);

fn write(
    input: &Path,
    staging: &Path,
    classes: &[String],
    files: &[Image],
    (target, whole): (Target, bool),
    opts: &WriteOptions,
    made: &mut Vec<&'static str>,
) -> Result<Written> {
    let inner = WriteOptions::new().codec(opts.record_codec()).format(opts.store_format());
    let (images_dir, labels_dir) = (staging.join("images"), staging.join("labels"));
    let mut images = match target {
        Target::Decoded(o) => {
            let (w, h) = o.size;
            DatasetWriter::dense::<u8>(&images_dir, vec![h as usize, w as usize, 3], inner.clone())?
        }
        // Stored raw whatever the codec asked: JPEG, PNG and WebP are compressed already, and
        // the loader's decode would pay for a second decompression at every step.
        Target::Encoded(_) => {
            let raw = inner.clone().codec(crate::Codec::Raw);
            DatasetWriter::with_schema(&images_dir, crate::Schema::image(), raw)?
        }
    };
    let mut labels = DatasetWriter::dense::<u32>(&labels_dir, vec![], inner)?;
    let window = PER_THREAD * rayon::current_num_threads();
    let (mut bytes_in, mut done) = (0u64, 0u64);
    let mut skipped = Vec::new();
    let budgets = Budgets::new();
    let decode_window = |chunk: &[Image]| -> Vec<(u64, std::result::Result<Vec<u8>, Undecodable>)> {
        chunk
            .par_iter()
            .map(|image| match target {
                Target::Decoded(o) => {
                    let (n, img) = decode_file(image, o, &budgets);
                    (n, img.map(RgbImage::into_raw))
                }
                Target::Encoded(o) => super::encoded::encode_file(image, o, &budgets),
            })
            .collect()
    };
    let windows: Vec<&[Image]> = files.chunks(window).collect();
    // Each window is written on a writer thread while the next ones decode on the pool.
    let write = |k: usize, decoded: Vec<(u64, std::result::Result<Vec<u8>, Undecodable>)>| -> Result<()> {
        let mut pixels: Vec<Vec<u8>> = Vec::with_capacity(decoded.len());
        let mut ids: Vec<u32> = Vec::with_capacity(decoded.len());
        for (Image { path, label, .. }, (n, img)) in windows[k].iter().zip(decoded) {
            done += n;
            match img {
                Ok(record) => {
                    bytes_in += n;
                    pixels.push(record);
                    ids.push(*label);
                }
                Err(why) if target.skip_bad() => skipped.push((path.clone(), why.report())),
                Err(why) => return Err(why.into_error(path.clone())),
            }
        }
        images.append_bytes(&pixels)?;
        labels.append(&ids)?;
        opts.report(done);
        Ok(())
    };
    pipelined(windows.len(), staging, |k| Ok(decode_window(windows[k])), write)?;
    // A dataset placed in the staging directory whose directory sync then failed "committed"
    // there, but the conversion did not: it is removed with the rest, and the failure is the
    // sync's (look 117, L117-1: it was reported committed, "do not repeat it", and left in the
    // staging directory, which then refused every rerun).
    let staged = |e: Error| match e {
        Error::Committed { source, .. } => *source,
        e => e,
    };
    let records = images.finish();
    made.push("images");
    let records = records.map_err(staged)?;
    let labelled = labels.finish();
    made.push("labels");
    labelled.map_err(staged)?;
    if records == 0 && whole {
        // Named by the input and each file's reason (look 110, L110-3: the error named the
        // staging directory, gone by then, and the reasons were never printed).
        let mut why: Vec<String> =
            skipped.iter().take(5).map(|(p, why)| format!("{}: {why}", p.display())).collect();
        if skipped.len() > 5 {
            why.push(format!("and {} more", skipped.len() - 5));
        }
        return Err(Error::BadInput {
            path: input.to_path_buf(),
            reason: format!(
                "no file decoded: all {} images were skipped ({})",
                skipped.len(),
                why.join("; ")
            ),
            source: None,
        });
    }
    let text: String = classes.iter().map(|c| format!("{c}\n")).collect();
    // Made before its write is known to have landed: a directory sync failing after the rename
    // left it in the staging directory, refusing the rerun (look 117's sweep).
    let written = crate::store::write_atomic(staging, "classes.txt", text.as_bytes());
    made.push("classes.txt");
    written?;
    let (chunk_bytes, dict_bytes) = Store::open(&images_dir)?.footprint()?;
    Ok((ConvertSummary { records, bytes_in, bytes_on_disk: chunk_bytes + dict_bytes }, skipped))
}
