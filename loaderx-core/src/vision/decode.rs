//! Decoding one encoded image for [`ImagePipeline`](super::ImagePipeline): whole (`image`'s
//! decoders), or a JPEG's region under its crop (libjpeg-turbo, feature `turbojpeg`), within the
//! limits of one decode, into buffers reused from one image to the next.

use std::io::Cursor;

use fast_image_resize as fir;
use image::{DynamicImage, ImageDecoder, ImageReader, Limits};

use super::{MAX_ALLOC, MAX_SIDE};

/// Buffers [`ImagePipeline::apply_with`](super::ImagePipeline::apply_with) reuses from one image
/// to the next.
#[derive(Default)]
pub struct Scratch {
    pub(super) decoded: Vec<u8>,
    pub(super) resized: Vec<u8>,
    pub(super) jittered: Vec<f32>,
    pub(super) resizer: fir::Resizer,
    // libjpeg-turbo's decompressor, made at the first JPEG.
    #[cfg(feature = "turbojpeg")]
    jpeg: Option<crate::sys::Jpeg>,
}

/// An image opened by [`Scratch::open`]: decoded whole already, or a JPEG whose header alone
/// was read, to be decoded in part.
#[derive(Debug, Clone, Copy)]
pub(super) enum Source {
    Whole(u32, u32),
    #[cfg(feature = "turbojpeg")]
    Jpeg(crate::sys::JpegHeader),
}

impl Source {
    pub(super) fn size(&self) -> (u32, u32) {
        match *self {
            Source::Whole(w, h) => (w, h),
            #[cfg(feature = "turbojpeg")]
            Source::Jpeg(header) => (header.width, header.height),
        }
    }
}

impl Scratch {
    /// `bytes` decoded whole to RGB by the decoder the pipeline uses (libjpeg-turbo for a JPEG
    /// with feature `turbojpeg`, `image`'s otherwise), within the same limits: its pixels, width
    /// and height. What a full-decode ceiling decodes.
    ///
    /// # Errors
    /// As [`ImagePipeline::apply`](super::ImagePipeline::apply).
    pub fn decode_whole(&mut self, bytes: &[u8]) -> Result<(&[u8], u32, u32), String> {
        let bytes = jpeg_data(bytes)?;
        let source = self.open(bytes)?;
        let (w, h) = source.size();
        let (rw, rh, _) = self.decode(bytes, source, (0.0, 0.0, f64::from(w), f64::from(h)), (w, h))?;
        Ok((&self.decoded, rw, rh))
    }

    /// `bytes` checked and opened: a JPEG libjpeg-turbo takes (8-bit, lossy, not CMYK) by its
    /// header, its size checked against the limits; anything else decoded whole by `image`.
    pub(super) fn open(&mut self, bytes: &[u8]) -> Result<Source, String> {
        #[cfg(feature = "turbojpeg")]
        if let Some(header) = self.jpeg_header(bytes)? {
            return Ok(Source::Jpeg(header));
        }
        let (w, h) = decode_into(bytes, &mut self.decoded)?;
        Ok(Source::Whole(w, h))
    }

    /// The header of `bytes` when it is a JPEG libjpeg-turbo decodes in part, its size checked
    /// against the limits; `None` for any other file. A JPEG it leaves to `image`'s decoder
    /// (CMYK, another precision, lossless) is decoded whole by libjpeg-turbo first, its pixels
    /// dropped, as a check: `image`'s would fill in a file cut short, and a header it cannot
    /// read is refused (look 114, L114-1: both were decoded by `image`, filled in, and stored).
    #[cfg(feature = "turbojpeg")]
    fn jpeg_header(&mut self, bytes: &[u8]) -> Result<Option<crate::sys::JpegHeader>, String> {
        use crate::sys::Decoded;
        if !bytes.starts_with(&[0xFF, 0xD8]) {
            return Ok(None);
        }
        let jpeg = match &mut self.jpeg {
            Some(jpeg) => jpeg,
            none => none.insert(crate::sys::Jpeg::new(MAX_ALLOC)?),
        };
        match jpeg.header(bytes) {
            Ok(Some(header)) => {
                within_limits(header.width, header.height)?;
                Ok(Some(header))
            }
            Ok(None) => match jpeg.check_whole(bytes, MAX_ALLOC)? {
                Decoded::Clean => Ok(None),
                Decoded::Warned(why) if a_writers_slip(&why) => Ok(None),
                Decoded::Warned(why) => Err(format!("damaged JPEG data: {why}")),
            },
            // A JFIF version other than 1.x, which libjpeg-turbo warns about and every decoder
            // decodes (look 116, L116-1): stopping at warnings, it would stop there, before any
            // data, so the file goes to `image`'s decoder unchecked, as before look 114.
            Err(why) if why.starts_with("Warning: unknown JFIF revision number") => Ok(None),
            Err(why) => Err(format!("a JPEG whose header libjpeg-turbo cannot read: {why}")),
        }
    }

    /// The width and height of `bytes` when it is a JPEG that [`Self::decode_whole`] decodes
    /// with libjpeg-turbo (read from its header alone, within the limits); `None` for a file it
    /// decodes with `image`'s decoders.
    #[cfg(feature = "turbojpeg")]
    fn jpeg_size(&mut self, bytes: &[u8]) -> Result<Option<(u32, u32)>, String> {
        Ok(self.jpeg_header(jpeg_data(bytes)?)?.map(|h| (h.width, h.height)))
    }

    /// The pixels the last [`Self::decode_whole`] wrote, taken out of the scratch buffers.
    #[cfg(feature = "turbojpeg")]
    fn take_decoded(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.decoded)
    }

    /// The pixels of `source` that the crop box `crop` needs, for an output of `out` pixels,
    /// in `self.decoded`: the decoded region's width and height and the box within it.
    #[allow(clippy::type_complexity)]
    #[cfg_attr(not(feature = "turbojpeg"), allow(unused_variables))]
    pub(super) fn decode(
        &mut self,
        bytes: &[u8],
        source: Source,
        crop: (f64, f64, f64, f64),
        out: (u32, u32),
    ) -> Result<(u32, u32, (f64, f64, f64, f64)), String> {
        match source {
            Source::Whole(w, h) => Ok((w, h, crop)),
            #[cfg(feature = "turbojpeg")]
            Source::Jpeg(header) => self.decode_jpeg(bytes, header, crop, out),
        }
    }

    /// [`Self::decode`] of a JPEG: its region under the crop, its left edge moved down to an
    /// iMCU, scaled by 1/2, 1/4 or 1/8 while the crop stays at least the output's size. Data
    /// libjpeg-turbo warns about is an error naming its warning (a file cut short, corrupt
    /// entropy-coded data), except junk before the end-of-image marker, decoded as the rest.
    #[cfg(feature = "turbojpeg")]
    #[allow(clippy::type_complexity)]
    fn decode_jpeg(
        &mut self,
        bytes: &[u8],
        header: crate::sys::JpegHeader,
        (left, top, cw, ch): (f64, f64, f64, f64),
        (ow, oh): (u32, u32),
    ) -> Result<(u32, u32, (f64, f64, f64, f64)), String> {
        use crate::sys::{Decoded, JpegHeader, Region};
        // Halve the scale while the crop stays at least the output each way: the resize then
        // still only shrinks, and libjpeg-turbo's 1/2, 1/4 and 1/8 are its SIMD scales (the M/8
        // between cost more than they save: docs/benchmarks/images.md, spike G).
        let mut num = 8u32;
        while num > 1
            && cw * f64::from(num / 2) / 8.0 >= f64::from(ow)
            && ch * f64::from(num / 2) / 8.0 >= f64::from(oh)
        {
            num /= 2;
        }
        let s = f64::from(num) / 8.0;
        let (sw, sh) = (JpegHeader::scaled(header.width, num), JpegHeader::scaled(header.height, num));
        let mcu = header.mcu_width(num);
        // The box's pixels in the scaled image and a margin: the resize's filter reaches past
        // the box by the shrink factor (so the pixels there are the whole image's), and a column
        // more (libjpeg-turbo's chroma upsampling at a region's cut edge has no neighbour, so
        // that column may differ from the whole image's); the left edge down to an iMCU.
        let mx = (cw * s / f64::from(ow)).ceil() as u32 + 2;
        let my = (ch * s / f64::from(oh)).ceil() as u32 + 1;
        let x0 = ((left * s).floor() as u32).saturating_sub(mx).min(sw - 1) / mcu * mcu;
        let y0 = ((top * s).floor() as u32).saturating_sub(my).min(sh - 1);
        let x1 = (((left + cw) * s).ceil() as u32).saturating_add(mx).clamp(x0 + 1, sw);
        let y1 = (((top + ch) * s).ceil() as u32).saturating_add(my).clamp(y0 + 1, sh);
        let mut region = Region { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
        let jpeg = self.jpeg.as_mut().ok_or("no JPEG decoder")?;
        let mut decoded = jpeg.decode(bytes, &header, num, region, &mut self.decoded, true);
        if decoded.is_err() && (region.x > 0 || region.width < sw) {
            // A left edge on the iMCU of TurboJPEG's subsampling class that is not on the file's
            // own (sampling factors it files under a standard class, e.g. every component 2x1:
            // look 57, J1): the same rows at the full width, which any iMCU starts.
            region = Region { x: 0, width: sw, ..region };
            decoded = jpeg.decode(bytes, &header, num, region, &mut self.decoded, true);
        }
        match decoded? {
            Decoded::Clean => {}
            // Junk between the last scan and the end-of-image marker, met after every pixel was
            // decoded (a common writer's slip, which torchvision and PIL decode): again, with
            // that warning let pass.
            Decoded::Warned(why) if a_writers_slip(&why) => {
                jpeg.decode(bytes, &header, num, region, &mut self.decoded, false)?;
            }
            // Data libjpeg-turbo would fill in (a file cut short with its end marker put back,
            // corrupt entropy-coded data): refused, never decoded whole by a decoder that papers
            // over it at any claimed size (look 57, J2 and J3).
            Decoded::Warned(why) => return Err(format!("damaged JPEG data: {why}")),
        }
        let (bl, bt) = (left * s - f64::from(region.x), top * s - f64::from(region.y));
        let (rw, rh) = (f64::from(region.width), f64::from(region.height));
        let boxed = (bl, bt, (cw * s).min(rw - bl), (ch * s).min(rh - bt));
        Ok((region.width, region.height, boxed))
    }
}

/// `bytes` decoded whole to RGB by libjpeg-turbo as the pipeline decodes them (its warnings
/// errors, within the same limits) once `admit` has taken the image's width and height (a
/// converter's memory, held through the decode); `None` when they are not a JPEG libjpeg-turbo
/// decodes, which `image`'s decoders then decode in the pipeline too. A converter's check that
/// the loader will decode what it stores.
///
/// # Errors
/// What the pipeline refuses the file for, and `admit`'s refusal.
#[cfg(feature = "turbojpeg")]
pub fn whole_jpeg<G>(
    bytes: &[u8],
    admit: impl FnOnce(u32, u32) -> Result<G, String>,
) -> Result<Option<image::RgbImage>, String> {
    let mut scratch = Scratch::default();
    let Some((w, h)) = scratch.jpeg_size(bytes)? else { return Ok(None) };
    let _held = admit(w, h)?;
    let (dw, dh) = {
        let (_, dw, dh) = scratch.decode_whole(bytes)?;
        (dw, dh)
    };
    let pixels = scratch.take_decoded();
    image::RgbImage::from_raw(dw, dh, pixels)
        .map(Some)
        .ok_or_else(|| format!("a decode of {dw}x{dh} pixels of an image of {w}x{h} that is not whole"))
}

/// Whether libjpeg-turbo's warning `why` is a writer's slip to decode past: a few stray bytes
/// between the last scan and the end-of-image marker, met once every pixel was decoded (which
/// torchvision and PIL decode). More of them is what a file cut short and padded out to its end
/// marker leaves (look 114, L114-2: the padding decoded as pixels, and only its rest warned).
#[cfg(feature = "turbojpeg")]
fn a_writers_slip(why: &str) -> bool {
    /// The most stray bytes a slip is: an encoder's padding, not a scan's worth of data.
    const MOST: u64 = 16;
    why.split_once(" extraneous bytes before marker 0xd9")
        .and_then(|(head, _)| head.rsplit(' ').next()?.parse::<u64>().ok())
        .is_some_and(|n| n <= MOST)
}

/// An image of `w` x `h` within the limits of one decode (each side, the RGB pixels' bytes).
pub(super) fn within_limits(w: u32, h: u32) -> Result<(), String> {
    if w == 0 || h == 0 {
        return Err(format!("an image of {w}x{h}"));
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(format!("an image of {w}x{h} is past the {MAX_SIDE}-pixel limit of a side"));
    }
    if u64::from(w) * u64::from(h) * 3 > MAX_ALLOC {
        return Err(format!("an image of {w}x{h} is past the {MAX_ALLOC}-byte limit of one decode"));
    }
    Ok(())
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").field("decoded", &self.decoded.len()).finish_non_exhaustive()
    }
}

/// `bytes` decoded to RGB into `buf` (its length set to the pixels'), within the limits, the
/// header's size checked before anything is allocated; the image's width and height.
pub(super) fn decode_into(bytes: &[u8], buf: &mut Vec<u8>) -> Result<(u32, u32), String> {
    if super::png::is_png(bytes) {
        return super::png::decode_png(bytes, buf, within_limits);
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_ALLOC);
    let mut reader =
        ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| format!("its format: {e}"))?;
    reader.limits(limits);
    let decoder = reader.into_decoder().map_err(|e| e.to_string())?;
    let ((w, h), decoded) = (decoder.dimensions(), decoder.total_bytes());
    // The decoded pixels and their RGB copy: what `ImageReader::decode` checks for the first.
    if decoded > MAX_ALLOC {
        return Err(format!("an image of {w}x{h} is past the {MAX_ALLOC}-byte limit of one decode"));
    }
    within_limits(w, h)?;
    let rgb = (u64::from(w) * u64::from(h) * 3) as usize;
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if decoder.color_type() == image::ColorType::Rgb8 {
            // Straight into the reused buffer: only what it grows by is zeroed first.
            buf.resize(rgb, 0);
            decoder.read_image(buf)
        } else {
            let img = DynamicImage::from_decoder(decoder)?.into_rgb8();
            buf.clear();
            buf.extend_from_slice(img.as_raw());
            Ok(())
        }
    }));
    decoded.map_err(|_| "it broke the decoder".to_string())?.map_err(|e| e.to_string())?;
    Ok((w, h))
}

/// The bytes of the JPEG `bytes` starts with, up to and with its end-of-image marker, found by
/// walking its segments and scans (whatever follows is not the image's: a motion photo's video,
/// a camera's trailer, padding); `bytes` as they are when they are not a JPEG (`FF D8` first).
/// A JPEG whose data end before that marker is refused: `image`'s decoder would fill the missing
/// part with grey, and libjpeg-turbo's region decode, stopping at a crop's bottom, may not reach
/// the cut.
///
/// # Errors
/// A JPEG cut short, or whose segments do not follow one another (a marker missing where one
/// must be, a segment shorter than its length field); an arithmetic-coded JPEG, whose damage
/// cannot be found.
pub fn jpeg_data(bytes: &[u8]) -> Result<&[u8], String> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Ok(bytes);
    }
    let cut = || Err("a JPEG cut short: its data end before its end-of-image marker (truncated)".to_string());
    let mut i = 2usize;
    loop {
        match bytes.get(i) {
            None => return cut(),
            Some(0xFF) => {}
            Some(_) => return Err(format!("a damaged JPEG: no marker at byte {i}")),
        }
        // Any number of fill bytes 0xFF, then the marker's code.
        while bytes.get(i) == Some(&0xFF) {
            i += 1;
        }
        let Some(&code) = bytes.get(i) else { return cut() };
        i += 1;
        match code {
            0xD9 => return Ok(&bytes[..i]),
            // Markers without a length: TEM and restarts.
            0x01 | 0xD0..=0xD7 => {}
            0x00 => return Err(format!("a damaged JPEG: no marker at byte {}", i - 2)),
            _ => {
                let Some(&[hi, lo]) = bytes.get(i..i + 2) else { return cut() };
                let len = usize::from(u16::from_be_bytes([hi, lo]));
                if len < 2 {
                    return Err(format!("a damaged JPEG: a segment of length {len} at byte {}", i - 2));
                }
                // Arithmetic coding (SOF9 to SOF11, and SOF13 to SOF15): its decoder supplies
                // zeros for data past a marker, as the standard has it, so a file cut short with
                // its end marker put back decodes as a whole one, warning of nothing (look 122,
                // L122-1: stored and verified intact). Rare, and decoded by no web browser.
                if matches!(code, 0xC9..=0xCB | 0xCD..=0xCF) {
                    return Err(format!(
                        "an arithmetic-coded JPEG (SOF{}): its damage cannot be found (a file cut \
                         short decodes as a whole one); re-encode it with Huffman coding, e.g. \
                         `jpegtran -optimize`",
                        code - 0xC0
                    ));
                }
                i += len;
                if code == 0xDA {
                    // A scan's entropy-coded data run to the next 0xFF that is neither a stuffed
                    // 0xFF00 nor a restart marker.
                    loop {
                        let Some(k) = bytes.get(i..).and_then(|rest| memchr::memchr(0xFF, rest)) else {
                            return cut();
                        };
                        i += k;
                        match bytes.get(i + 1) {
                            None => return cut(),
                            Some(0x00 | 0xD0..=0xD7) => i += 2,
                            Some(_) => break,
                        }
                    }
                }
            }
        }
    }
}
