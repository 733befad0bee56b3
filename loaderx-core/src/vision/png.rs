//! PNG decoding with the checksum of its compressed data checked. `image`'s PNG decoder leaves
//! the zlib stream's Adler-32 unchecked, and offers no switch: a PNG whose deflate data were
//! damaged and whose chunk CRCs were then recomputed (a tool rewriting chunks) decoded as wrong
//! pixels, was stored, and verified intact (look 122, L122-2). Decoded here as `image` decodes
//! it (its `EXPAND` transformation, then its RGB conversion), so the pixels are the same.

use std::io::Cursor;

use image::{DynamicImage, ImageBuffer};

use super::MAX_ALLOC;

/// The decoder's error `e`, said plainly when it is the checksum of the compressed data or the
/// file's end (look 124, L124-3: a PNG without its end chunk was "unexpected end of file").
fn why(e: png::DecodingError) -> String {
    let cut = matches!(&e, png::DecodingError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof);
    let e = e.to_string();
    if e.contains("WrongChecksum") {
        format!("damaged PNG data: they do not match their Adler-32 checksum ({e})")
    } else if cut {
        format!("a PNG cut short: its data end before its end chunk, IEND ({e})")
    } else {
        e
    }
}

/// Whether `bytes` start with the PNG signature.
pub(super) fn is_png(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x89PNG\r\n\x1a\n")
}

/// `bytes`, a PNG, decoded to RGB into `buf` (its length set to the pixels'), its size checked
/// by `check` from the header before anything is allocated: the image's width and height.
pub(super) fn decode_png(
    bytes: &[u8],
    buf: &mut Vec<u8>,
    check: impl FnOnce(u32, u32) -> Result<(), String>,
) -> Result<(u32, u32), String> {
    let limit = usize::try_from(MAX_ALLOC).unwrap_or(usize::MAX);
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: limit });
    decoder.ignore_checksums(false);
    // Neither an ICC profile nor text is used: not inflated (look 110, L110-4: an iCCP chunk
    // inflating to 2 GiB of zeros took seconds at every step).
    decoder.set_ignore_iccp_chunk(true);
    decoder.set_ignore_text_chunk(true);
    let (w, h) = {
        let info = decoder.read_header_info().map_err(why)?;
        (info.width, info.height)
    };
    check(w, h)?;
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().map_err(why)?;
    let size = reader
        .output_buffer_size()
        .filter(|&n| n <= limit)
        .ok_or_else(|| format!("an image of {w}x{h} is past the {MAX_ALLOC}-byte limit of one decode"))?;
    // Straight into the reused buffer (only what it grows by is zeroed), which RGB already is.
    buf.resize(size, 0);
    let frame = reader.next_frame(buf).map_err(why)?;
    // The rest of the compressed data, its Adler-32 with it, up to the end chunk.
    reader.finish().map_err(why)?;
    buf.truncate(frame.buffer_size());
    let colour = reader.output_color_type();
    if colour != (png::ColorType::Rgb, png::BitDepth::Eight) {
        let image = to_image(w, h, colour, std::mem::take(buf))
            .ok_or_else(|| format!("a PNG of {w}x{h} whose pixels do not fill it"))?;
        *buf = image.into_rgb8().into_raw();
    }
    Ok((w, h))
}

/// The decoded pixels `raw` (big-endian for 16 bits, as PNG stores them) as an image of their
/// colour type; `None` when they do not fill `w` x `h`.
fn to_image(
    w: u32,
    h: u32,
    (colour, depth): (png::ColorType, png::BitDepth),
    raw: Vec<u8>,
) -> Option<DynamicImage> {
    use png::{BitDepth, ColorType};
    let wide = || -> Vec<u16> { raw.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect() };
    Some(match (colour, depth) {
        (ColorType::Grayscale, BitDepth::Eight) => {
            DynamicImage::ImageLuma8(ImageBuffer::from_raw(w, h, raw)?)
        }
        (ColorType::GrayscaleAlpha, BitDepth::Eight) => {
            DynamicImage::ImageLumaA8(ImageBuffer::from_raw(w, h, raw)?)
        }
        (ColorType::Rgb, BitDepth::Eight) => DynamicImage::ImageRgb8(ImageBuffer::from_raw(w, h, raw)?),
        (ColorType::Rgba, BitDepth::Eight) => DynamicImage::ImageRgba8(ImageBuffer::from_raw(w, h, raw)?),
        (ColorType::Grayscale, BitDepth::Sixteen) => {
            DynamicImage::ImageLuma16(ImageBuffer::from_raw(w, h, wide())?)
        }
        (ColorType::GrayscaleAlpha, BitDepth::Sixteen) => {
            DynamicImage::ImageLumaA16(ImageBuffer::from_raw(w, h, wide())?)
        }
        (ColorType::Rgb, BitDepth::Sixteen) => DynamicImage::ImageRgb16(ImageBuffer::from_raw(w, h, wide())?),
        (ColorType::Rgba, BitDepth::Sixteen) => {
            DynamicImage::ImageRgba16(ImageBuffer::from_raw(w, h, wide())?)
        }
        // EXPAND leaves neither palettes nor depths under 8 bits.
        _ => return None,
    })
}

/// `Ok` when `bytes` is no PNG, or a PNG whose compressed data and checksums are whole (decoded
/// a row at a time and dropped: a converter's check before its own decode, holding one row).
///
/// # Errors
/// What the decoder refuses the file for: a checksum that does not match, data cut short.
pub fn check_png(bytes: &[u8]) -> Result<(), String> {
    if !is_png(bytes) {
        return Ok(());
    }
    let limit = usize::try_from(MAX_ALLOC).unwrap_or(usize::MAX);
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(bytes), png::Limits { bytes: limit });
    decoder.ignore_checksums(false);
    // Neither an ICC profile nor text is used: not inflated (look 110, L110-4: an iCCP chunk
    // inflating to 2 GiB of zeros took seconds at every step).
    decoder.set_ignore_iccp_chunk(true);
    decoder.set_ignore_text_chunk(true);
    let info = decoder.read_header_info().map_err(why)?;
    super::decode::within_limits(info.width, info.height)?;
    let mut reader = decoder.read_info().map_err(why)?;
    while reader.next_row().map_err(why)?.is_some() {}
    reader.finish().map_err(why)
}
