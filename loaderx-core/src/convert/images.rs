//! Image folders (the ImageFolder convention: one subdirectory per class) into a dense `u8`
//! image dataset and a label dataset, decoded and resized with the `image` crate (feature
//! `images`).

use std::io::Cursor;
use std::path::{Path, PathBuf};

use fast_image_resize as fir;
use image::{DynamicImage, ImageReader, Limits, RgbImage};
use rayon::prelude::*;

use super::block::pipelined;
use super::summary::ConvertSummary;
use crate::{DatasetWriter, Error, Result, Store, WriteOptions};

/// Images decoded in parallel per window, per thread.
const PER_THREAD: usize = 16;
/// The largest image side decoded, and the most memory one decode may take: an image is
/// untrusted input, and its header alone must not size an allocation.
const MAX_SIDE: u32 = 1 << 14;
const MAX_ALLOC: u64 = 512 << 20;

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
/// A file that does not decode is an error naming it (nothing written), or with `skip_bad` is
/// left out and listed in the summary.
///
/// # Errors
/// [`Error::NotAStore`] naming `dir` when it does not exist; [`Error::BadInput`] naming `dir`
/// when it has no class subdirectories or no files, or naming a file that does not decode;
/// [`Error::InvalidArgument`] for a size of 0 or an item over the format's record limit;
/// [`Error::AlreadyExists`] for an existing `out` without overwrite; [`Error::Io`].
pub fn images(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: ImageOptions,
    opts: WriteOptions,
) -> Result<ImagesSummary> {
    let (dir, out) = (dir.as_ref(), out.as_ref());
    let (w, h) = options.size;
    if w == 0 || h == 0 || w > MAX_SIDE || h > MAX_SIDE {
        return Err(Error::InvalidArgument(format!("an output size of {w}x{h} (each side 1..={MAX_SIDE})")));
    }
    let item = w as usize * h as usize * 3;
    if item > opts.max_record_size() {
        return Err(Error::InvalidArgument(format!(
            "an image of {w}x{h}x3 is {item} bytes; a {} record holds at most {}",
            opts.format_of(),
            opts.max_record_size()
        )));
    }
    if !dir.is_dir() {
        return Err(Error::NotAStore {
            path: dir.to_path_buf(),
            reason: "it is not a directory of class folders".into(),
        });
    }
    if out.exists() && !opts.overwrite_of() {
        return Err(Error::AlreadyExists { path: out.to_path_buf() });
    }
    let (classes, files) = list(dir)?;
    let staging = PathBuf::from(format!("{}.partial", out.display()));
    if staging.exists() {
        remove_dir(&staging)?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| Error::io("create directory", &staging, e))?;
    let result = write(&staging, &classes, &files, options, &opts);
    match result {
        Ok((images, skipped)) => {
            if out.exists() {
                remove_dir(out)?;
            }
            std::fs::rename(&staging, out).map_err(|e| Error::io("rename into", out, e))?;
            crate::store::sync_dir(out.parent().unwrap_or(Path::new(".")))?;
            Ok(ImagesSummary { classes, images, skipped })
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

fn remove_dir(p: &Path) -> Result<()> {
    std::fs::remove_dir_all(p).map_err(|e| Error::io("remove", p, e))
}

/// Every `(file, label)` of a folder, in order.
type Labelled = Vec<(PathBuf, u32)>;

/// The class names and every `(file, label)`, in order.
fn list(dir: &Path) -> Result<(Vec<String>, Labelled)> {
    let entries = |d: &Path| -> Result<Vec<(String, PathBuf, std::fs::FileType)>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(d).map_err(|e| Error::io("read directory", d, e))? {
            let e = e.map_err(|e| Error::io("read directory", d, e))?;
            let t = e.file_type().map_err(|err| Error::io("stat", e.path(), err))?;
            v.push((e.file_name().to_string_lossy().into_owned(), e.path(), t));
        }
        v.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        Ok(v)
    };
    let mut classes = Vec::new();
    let mut files = Vec::new();
    for (name, path, t) in entries(dir)? {
        if !t.is_dir() || name.starts_with('.') {
            continue;
        }
        if name.contains('\n') {
            return Err(Error::BadInput {
                path,
                reason: "a class name with a newline cannot be listed in classes.txt".into(),
            });
        }
        let label = u32::try_from(classes.len())
            .map_err(|_| Error::InvalidArgument("more than 2^32 classes".into()))?;
        classes.push(name);
        for (fname, fpath, ft) in entries(&path)? {
            if ft.is_file() && !fname.starts_with('.') {
                files.push((fpath, label));
            }
        }
    }
    let bad = |reason: &str| Error::BadInput { path: dir.to_path_buf(), reason: reason.into() };
    if classes.is_empty() {
        return Err(bad("no class subdirectories: an image folder holds one directory of images per class"));
    }
    if files.is_empty() {
        return Err(bad("the class directories hold no files"));
    }
    Ok((classes, files))
}

/// Decodes `bytes` within the limits and brings the image to `options.size` as RGB.
fn decode(bytes: &[u8], options: ImageOptions) -> std::result::Result<RgbImage, String> {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    let mut reader = ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| e.to_string())?;
    reader.limits(limits);
    let img = reader.decode().map_err(|e| e.to_string())?;
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
    staging: &Path,
    classes: &[String],
    files: &[(PathBuf, u32)],
    options: ImageOptions,
    opts: &WriteOptions,
) -> Result<Written> {
    let (w, h) = options.size;
    let inner = WriteOptions::new().codec(opts.codec_of()).format(opts.format_of());
    let (images_dir, labels_dir) = (staging.join("images"), staging.join("labels"));
    let mut images = DatasetWriter::dense::<u8>(&images_dir, vec![h as usize, w as usize, 3], inner.clone())?;
    let mut labels = DatasetWriter::dense::<u32>(&labels_dir, vec![], inner)?;
    let window = PER_THREAD * rayon::current_num_threads();
    let (mut bytes_in, mut done) = (0u64, 0u64);
    let mut skipped = Vec::new();
    let decode_window = |chunk: &[(PathBuf, u32)]| -> Vec<(u64, std::result::Result<RgbImage, String>)> {
        chunk
            .par_iter()
            .map(|(path, _)| match std::fs::read(path) {
                Ok(b) => (b.len() as u64, decode(&b, options)),
                Err(e) => (0, Err(format!("cannot be read: {e}"))),
            })
            .collect()
    };
    let windows: Vec<&[(PathBuf, u32)]> = files.chunks(window).collect();
    // Each window is written on a writer thread while the next ones decode on the pool.
    let write = |k: usize, decoded: Vec<(u64, std::result::Result<RgbImage, String>)>| -> Result<()> {
        let mut pixels: Vec<Vec<u8>> = Vec::with_capacity(decoded.len());
        let mut ids: Vec<u32> = Vec::with_capacity(decoded.len());
        for ((path, label), (n, img)) in windows[k].iter().zip(decoded) {
            done += n;
            match img {
                Ok(img) => {
                    bytes_in += n;
                    pixels.push(img.into_raw());
                    ids.push(*label);
                }
                Err(why) if options.skip_bad => skipped.push((path.clone(), why)),
                Err(why) => {
                    return Err(Error::BadInput {
                        path: path.clone(),
                        reason: format!("not a decodable image ({why}); --skip-bad leaves such files out"),
                    });
                }
            }
        }
        images.append_bytes(&pixels)?;
        labels.append(&ids)?;
        opts.report(done);
        Ok(())
    };
    pipelined(windows.len(), staging, |k| Ok(decode_window(windows[k])), write)?;
    let records = images.finish()?;
    labels.finish()?;
    if records == 0 {
        return Err(Error::BadInput {
            path: staging.to_path_buf(),
            reason: "no file decoded: every image was skipped".into(),
        });
    }
    let text: String = classes.iter().map(|c| format!("{c}\n")).collect();
    crate::store::write_atomic(staging, "classes.txt", text.as_bytes())?;
    let (chunk_bytes, dict_bytes) = Store::open(&images_dir)?.footprint()?;
    Ok((ConvertSummary { records, bytes_in, bytes_on_disk: chunk_bytes + dict_bytes }, skipped))
}
