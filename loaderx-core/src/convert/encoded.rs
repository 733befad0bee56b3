//! Image folders into encoded image datasets (`convert images --encoded`): each JPEG, PNG or
//! WebP file kept as one record, as it is, or re-encoded as JPEG when a side is longer than asked
//! (FFCV's `max_resolution`), so that the loader can decode and augment differently at every
//! step. The folder walk, the staging directory and the labels are [`super::images`]'.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

use super::image_io::{Budget, Budgets, Undecodable, decode_cost};
use super::images::{
    ImageOptions, ImagesSummary, MAX_ALLOC, MAX_IMAGE_BYTES, MAX_SIDE, Resize, Target, convert_folder, fit,
    with_file,
};
use super::part::Part;
use crate::{Error, Result, WriteOptions};

/// What [`encoded_images`] keeps of each file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedOptions {
    /// The longest side kept: a larger image is resized to it (aspect kept) and re-encoded as
    /// JPEG; `None` keeps every file as it is.
    pub max_side: Option<u32>,
    /// The JPEG quality of re-encoded images, 1 to 100.
    pub quality: u8,
    /// Skip (and report) files that do not decode, instead of failing with nothing written.
    pub skip_bad: bool,
}

impl Default for EncodedOptions {
    /// Every file kept as it is (quality 90 for any re-encoded), failing on a bad file.
    fn default() -> Self {
        EncodedOptions { max_side: None, quality: 90, skip_bad: false }
    }
}

/// Converts the image folder `dir` (one subdirectory per class, as [`super::images`] reads it)
/// into `out/images`, a dataset of encoded images (kind `image`: one file a record; read its
/// bytes with a ragged reader), `out/labels` and `out/classes.txt`. Each file is decoded whole
/// to check it (a file that does not decode is an error naming it, or with `skip_bad` left out
/// and listed); it is kept byte for byte when both sides are within `max_side`, and otherwise
/// resized to `max_side` on its longer side and stored as a JPEG of `quality`. The format comes
/// from the content: JPEG, PNG and WebP are kept, any other format is refused. The images are
/// stored raw whatever codec `opts` asks (they are compressed already); the labels take it.
/// All or nothing, as [`super::images`].
///
/// # Errors
/// As [`super::images`]; [`Error::InvalidArgument`] for a `max_side` of 0 or over 16,384, or a
/// quality outside 1..=100.
pub fn encoded_images(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: EncodedOptions,
    opts: WriteOptions,
) -> Result<ImagesSummary> {
    encoded_images_part(dir, out, options, opts, Part::WHOLE)
}

/// [`encoded_images`] of part `part` of the files, as [`super::images_part`] splits them.
///
/// # Errors
/// As [`encoded_images`]; [`Error::InvalidArgument`] for a part out of range.
pub fn encoded_images_part(
    dir: impl AsRef<Path>,
    out: impl AsRef<Path>,
    options: EncodedOptions,
    opts: WriteOptions,
    part: Part,
) -> Result<ImagesSummary> {
    if let Some(side) = options.max_side.filter(|&s| s == 0 || s > MAX_SIDE) {
        return Err(Error::InvalidArgument(format!("a longest side of {side} (1..={MAX_SIDE})")));
    }
    if !(1..=100).contains(&options.quality) {
        return Err(Error::InvalidArgument(format!("a JPEG quality of {} (1..=100)", options.quality)));
    }
    convert_folder(dir.as_ref(), out.as_ref(), Target::Encoded(options), opts, part)
}

/// Reads, checks and (when larger than asked) re-encodes the image file `image` within the
/// budgets: the bytes read, and the record, or why not.
pub(super) fn encode_file(
    image: &super::folder::Image,
    options: EncodedOptions,
    budgets: &Budgets,
) -> (u64, std::result::Result<Vec<u8>, Undecodable>) {
    with_file(image, budgets, |bytes| encode(bytes, options, &budgets.pixels))
}

/// The size `(w, h)` is brought to so that its longer side is `side` (aspect kept, each side at
/// least 1), or `None` when it is within.
fn shrunk((w, h): (u32, u32), side: Option<u32>) -> Option<(u32, u32)> {
    let side = side?;
    if w.max(h) <= side {
        return None;
    }
    let scale = f64::from(side) / f64::from(w.max(h));
    let fit = |v: u32| ((f64::from(v) * scale).round() as u32).clamp(1, side);
    Some((fit(w), fit(h)))
}

fn encode(
    bytes: &[u8],
    options: EncodedOptions,
    pixels: &Budget,
) -> std::result::Result<Vec<u8>, Undecodable> {
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    // Only the JPEG's own bytes are checked (a file cut short is refused); the file is kept whole.
    let data = crate::vision::jpeg_data(bytes).map_err(Undecodable::why)?;
    let mut reader = ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(|e| Undecodable::caused(Some("its format cannot be guessed"), e))?;
    match reader.format() {
        Some(ImageFormat::Jpeg | ImageFormat::Png | ImageFormat::WebP) => {}
        Some(other) => {
            return Err(Undecodable::why(format!("a {other:?} file: JPEG, PNG and WebP are kept")));
        }
        None => return Err(Undecodable::why("not a JPEG, PNG or WebP file".into())),
    }
    // A JPEG libjpeg-turbo takes is checked by decoding it as the loader does, its warnings
    // errors (look 110, L110-1: `image`'s decoder passed a file cut short with its end marker
    // put back, filled in, and a header claiming 16000x10000 pixels over a few kilobytes).
    #[cfg(feature = "turbojpeg")]
    if let Some(rgb) = crate::vision::whole_jpeg(data, |w, h| {
        let target = shrunk((w, h), options.max_side);
        let rgb = u64::from(w) * u64::from(h) * 3;
        let need = target.map_or(rgb, |size| decode_cost(w, h, rgb, true, size));
        if need > MAX_IMAGE_BYTES {
            return Err(format!(
                "an image of {w}x{h} needs {need} bytes to check and resize; one image is given at most \
                 {MAX_IMAGE_BYTES}"
            ));
        }
        Ok(pixels.take(need))
    })
    .map_err(Undecodable::why)?
    {
        return match shrunk(rgb.dimensions(), options.max_side) {
            None => Ok(bytes.to_vec()),
            Some(size) => reencode(&DynamicImage::ImageRgb8(rgb), size, options.quality),
        };
    }
    reader.limits(limits);
    let decoder = reader.into_decoder().map_err(|e| Undecodable::caused(None, e))?;
    let ((w, h), color, decoded) = (decoder.dimensions(), decoder.color_type(), decoder.total_bytes());
    // The loader's limits (`vision`): the decoded pixels and their RGB copy. A file past them is
    // refused here, where it can be named, not at a training step.
    let rgb = u64::from(w) * u64::from(h) * 3;
    if decoded > MAX_ALLOC || rgb > MAX_ALLOC {
        return Err(Undecodable::why(format!(
            "an image of {w}x{h} is {} bytes decoded (as RGB); the loader decodes at most {MAX_ALLOC}",
            decoded.max(rgb)
        )));
    }
    let target = shrunk((w, h), options.max_side);
    let need = match target {
        Some(size) => decode_cost(w, h, decoded, color == image::ColorType::Rgb8, size),
        None => decoded,
    };
    if need > MAX_IMAGE_BYTES {
        return Err(Undecodable::why(format!(
            "an image of {w}x{h} needs {need} bytes to check and resize; one image is given at most {MAX_IMAGE_BYTES}"
        )));
    }
    let _held = pixels.take(need);
    // Decoded whole, whether it is kept or not: a file the loader could not decode is refused
    // here, where it can be named, not at a training step.
    let img = DynamicImage::from_decoder(decoder).map_err(|e| Undecodable::caused(None, e))?;
    // A PNG's compressed data checked against their Adler-32, which `image` skips (look 122,
    // L122-2): decoded again a row at a time, once `image` has taken it within the limits.
    crate::vision::check_png(data).map_err(Undecodable::why)?;
    let Some(size) = target else { return Ok(bytes.to_vec()) };
    reencode(&img, size, options.quality)
}

/// `img` brought to `size` and encoded as a JPEG of `quality`.
fn reencode(img: &DynamicImage, size: (u32, u32), quality: u8) -> std::result::Result<Vec<u8>, Undecodable> {
    let rgb = fit(img, ImageOptions { size, resize: Resize::Stretch, skip_bad: false });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode_image(&rgb)
        .map_err(|e| Undecodable::caused(Some("it could not be re-encoded"), e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::shrunk;

    #[test]
    fn the_longer_side_is_brought_to_the_limit_and_the_aspect_kept() {
        assert_eq!(shrunk((500, 375), None), None);
        assert_eq!(shrunk((500, 375), Some(500)), None);
        assert_eq!(shrunk((500, 375), Some(256)), Some((256, 192)));
        assert_eq!(shrunk((375, 500), Some(256)), Some((192, 256)));
        assert_eq!(shrunk((10_000, 3), Some(100)), Some((100, 1)));
    }
}

/// An image folder read as it is, unconverted ([`image_folder`]).
#[derive(Debug, Clone)]
pub struct ImageFolder {
    /// Each file's bytes, a record (in class order, then file name order): the source of a
    /// [`LoaderBuilder::image_stream`](crate::LoaderBuilder::image_stream).
    pub images: crate::RaggedSource,
    /// Each file's class, `u32`, in the same order.
    pub labels: crate::DenseSource,
    /// The class names (the subdirectories), by label.
    pub classes: Vec<String>,
    /// Each record's file, in the same order (torchvision's `samples`, without the labels).
    pub files: Vec<PathBuf>,
}

/// The most bytes [`image_folder`] reads into memory: a folder larger is converted instead.
pub const IMAGE_FOLDER_MAX_BYTES: u64 = 4 << 30;

/// Reads the image folder `dir` (one subdirectory per class, as [`encoded_images`] reads it)
/// into memory for a first run, with no conversion: every file's bytes as a record, its class
/// as a label. Nothing is decoded here: a file that does not decode is an error of the step
/// that draws it (or left out, with [`ImagePipeline::skip_bad`](crate::vision::ImagePipeline::skip_bad)).
/// For a folder larger than memory, or to read it more than once, convert it
/// (`loaderx convert images DIR OUT --encoded`).
///
/// # Errors
/// As [`encoded_images`] for the folder's layout; [`Error::BadInput`] naming a file that is not
/// a regular file or is over 256 MiB; [`Error::InvalidArgument`] for a folder of more than
/// [`IMAGE_FOLDER_MAX_BYTES`].
pub fn image_folder(dir: impl AsRef<Path>) -> Result<ImageFolder> {
    use std::io::Read;
    let dir = dir.as_ref();
    let (classes, files) = super::folder::list(dir)?;
    // The lengths first (nothing opened yet), so that the bytes go into one buffer allocated
    // once: the folder held once in memory, not file by file and then copied (review 48).
    let mut lens = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for super::folder::Image { path, .. } in &files {
        let len = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?.len();
        if len > super::images::MAX_FILE_BYTES {
            return Err(Error::BadInput {
                path: path.clone(),
                reason: format!(
                    "{len} bytes; image files of at most {} bytes are read",
                    super::images::MAX_FILE_BYTES
                ),
                source: None,
            });
        }
        total += len;
        if total > IMAGE_FOLDER_MAX_BYTES {
            return Err(Error::InvalidArgument(format!(
                "{}: more than {IMAGE_FOLDER_MAX_BYTES} bytes of files to hold in memory; convert it \
                 (`loaderx convert images DIR OUT --encoded`) and read the store",
                dir.display()
            )));
        }
        lens.push(len);
    }
    let mut values: Vec<u8> = Vec::new();
    // At most IMAGE_FOLDER_MAX_BYTES, checked above.
    values.try_reserve_exact(total as usize).map_err(|_| {
        Error::InvalidArgument(format!("{}: {total} bytes of files cannot be held in memory", dir.display()))
    })?;
    let mut offsets = Vec::with_capacity(files.len() + 1);
    offsets.push(0);
    for (image, len) in files.iter().zip(lens) {
        // The file listed (one swapped in since is refused); no more than the length measured
        // (a file growing meanwhile reads as it was), and no less (one cut short is refused).
        let (file, now) = image.open()?;
        let path = &image.path;
        if now != len {
            // Rewritten since its length was taken: neither length's bytes are known to be the
            // file's (review 50: a file rewritten larger kept its first bytes).
            return Err(Error::BadInput {
                path: path.clone(),
                reason: format!(
                    "{now} bytes now, {len} when the folder was listed: the file changed while read"
                ),
                source: None,
            });
        }
        let got = file.take(len).read_to_end(&mut values).map_err(|e| Error::io("read", path, e))?;
        if (got as u64) < len {
            return Err(Error::BadInput {
                path: path.clone(),
                reason: format!("{got} of its {len} bytes read: the file was cut short while read"),
                source: None,
            });
        }
        offsets.push(values.len());
    }
    let schema = crate::Schema::ragged(crate::DType::U8, vec![]);
    let labels = crate::DenseSource::from_vec(vec![], files.iter().map(|image| image.label).collect())?;
    let files: Vec<PathBuf> = files.into_iter().map(|image| image.path).collect();
    Ok(ImageFolder {
        // Each record's file, for the errors of an image that does not decode.
        images: crate::RaggedSource::from_files(schema, values, &offsets, Some(files.clone().into()))?,
        labels,
        classes,
        files,
    })
}
