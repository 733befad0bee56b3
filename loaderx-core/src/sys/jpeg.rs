//! libjpeg-turbo's TurboJPEG 3 API (feature `turbojpeg`): a JPEG's header, then only the part of
//! it a crop needs, optionally scaled in the DCT (1/2, 1/4, 1/8), into a reused buffer.
//!
//! Why libjpeg-turbo beside `image`'s zune-jpeg: it decodes a region (rows below it are never
//! entropy-decoded, columns and rows outside it skip the IDCT and the colour conversion) and
//! scales in the DCT, which zune-jpeg cannot; on whole images it is also the faster decoder here
//! (docs/benchmarks/images.md, spike B and run D). The crate (`turbojpeg-sys`) builds the bundled
//! libjpeg-turbo 3.1 with cmake and nasm; its bindings are pre-generated.
#![expect(unsafe_code, reason = "TurboJPEG is a C library: every call crosses the FFI boundary")]

use std::ffi::CStr;
use std::ptr::NonNull;

use turbojpeg_sys as tj;

/// The most scans a progressive JPEG may take: libjpeg-turbo's advice against a file whose
/// hundreds of thousands of tiny scans would take minutes to decode.
const SCAN_LIMIT: i32 = 500;

/// One TurboJPEG decompressor, reused from one image to the next by one thread at a time.
pub(crate) struct Jpeg {
    handle: NonNull<std::ffi::c_void>,
    max_memory: u64,
}

// SAFETY: a TurboJPEG instance holds no thread-local state and is only used through `&mut self`,
// so moving it to another thread between calls is sound (libjpeg-turbo documents one instance
// per thread at a time).
unsafe impl Send for Jpeg {}

impl std::fmt::Debug for Jpeg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Jpeg")
    }
}

/// What a JPEG's header says, as this decoder will take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JpegHeader {
    /// Its width and height in pixels.
    pub width: u32,
    pub height: u32,
    /// The width of its iMCU (the unit a region's left edge must fall on), unscaled.
    mcu_width: u32,
}

/// How a decode ended, when it did not fail outright.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// Every pixel of the region came from the data.
    Clean,
    /// libjpeg-turbo met damaged data it would have papered over (grey blocks, resynchronised
    /// restarts, extraneous bytes) and stopped: its warning; the output is not to be used.
    Warned(String),
}

/// A region of the image scaled by `num / 8`, in the scaled image's pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

impl JpegHeader {
    /// A side of `len` pixels scaled by `num / 8`, rounded up (libjpeg-turbo's `TJSCALED`).
    pub fn scaled(len: u32, num: u32) -> u32 {
        (len * num).div_ceil(8)
    }

    /// The width of the iMCU once scaled by `num / 8`: a region's left edge falls on a multiple.
    pub fn mcu_width(&self, num: u32) -> u32 {
        Self::scaled(self.mcu_width, num)
    }
}

impl Jpeg {
    /// A decompressor that stops at the first warning (damaged data is never papered over),
    /// takes no more than `max_memory` bytes for its own buffers and at most 500 scans.
    ///
    /// # Errors
    /// Why TurboJPEG could not make one (out of memory).
    pub fn new(max_memory: u64) -> Result<Jpeg, String> {
        // SAFETY: `tj3Init` takes a plain integer and returns a new instance or null.
        let handle = unsafe { tj::tj3Init(tj::TJINIT_TJINIT_DECOMPRESS as i32) };
        let handle = NonNull::new(handle).ok_or("TurboJPEG could not start a decompressor")?;
        let jpeg = Jpeg { handle, max_memory };
        let megabytes = i32::try_from(max_memory >> 20).unwrap_or(i32::MAX).max(1);
        jpeg.set(tj::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
        jpeg.set(tj::TJPARAM_TJPARAM_MAXMEMORY, megabytes)?;
        jpeg.set(tj::TJPARAM_TJPARAM_SCANLIMIT, SCAN_LIMIT)?;
        Ok(jpeg)
    }

    fn set(&self, param: tj::TJPARAM, value: i32) -> Result<(), String> {
        // SAFETY: `handle` is a live instance; `tj3Set` takes plain integers.
        if unsafe { tj::tj3Set(self.handle.as_ptr(), param as i32, value) } == 0 {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    fn get(&self, param: tj::TJPARAM) -> i32 {
        // SAFETY: `handle` is a live instance; `tj3Get` takes plain integers.
        unsafe { tj::tj3Get(self.handle.as_ptr(), param as i32) }
    }

    /// TurboJPEG's message for the last failure of this instance: called on the thread of the
    /// failing call, right after it (the library keeps some messages in a thread-local buffer).
    fn error(&self) -> String {
        // SAFETY: `tj3GetErrorStr` returns a pointer to a NUL-terminated string owned by the
        // instance (or a static one), valid until the next call on it; it is copied at once.
        let text = unsafe { tj::tj3GetErrorStr(self.handle.as_ptr()) };
        if text.is_null() {
            return "TurboJPEG failed without saying why".into();
        }
        // SAFETY: non-null and NUL-terminated, as above.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().trim().replace('\n', " ")
    }

    /// `bytes`' header, or `None` when it is a JPEG this decoder leaves to another: CMYK or YCCK
    /// colour, a precision other than 8 bits, lossless coding, or a subsampling it cannot name.
    ///
    /// # Errors
    /// Why the header cannot be read (not a JPEG, damaged markers).
    pub fn header(&mut self, bytes: &[u8]) -> Result<Option<JpegHeader>, String> {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes that TurboJPEG only reads, for
        // the length of the call.
        let read = unsafe { tj::tj3DecompressHeader(self.handle.as_ptr(), bytes.as_ptr(), bytes.len() as _) };
        if read != 0 {
            let why = self.error();
            // A header that fails part-way leaves the instance mid-header (TurboJPEG does not
            // abort it), and the next image's header would be read from that state: start over.
            *self = Jpeg::new(self.max_memory)?;
            return Err(why);
        }
        let colour = self.get(tj::TJPARAM_TJPARAM_COLORSPACE);
        let other_colour = colour == tj::TJCS_TJCS_CMYK as i32 || colour == tj::TJCS_TJCS_YCCK as i32;
        let subsamp = self.get(tj::TJPARAM_TJPARAM_SUBSAMP);
        // The iMCU widths of TJSAMP 444, 422, 420, GRAY, 440, 411 and 441 (TurboJPEG's
        // `tjMCUWidth`, a header-only table the library does not export).
        const MCU_WIDTH: [u32; 7] = [8, 16, 16, 8, 8, 32, 8];
        let mcu_width = usize::try_from(subsamp).ok().and_then(|s| MCU_WIDTH.get(s).copied());
        let (width, height) =
            (self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH), self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT));
        let eight_bit = self.get(tj::TJPARAM_TJPARAM_PRECISION) == 8;
        let lossless = self.get(tj::TJPARAM_TJPARAM_LOSSLESS) != 0;
        Ok(match (mcu_width, u32::try_from(width), u32::try_from(height)) {
            (Some(mcu_width), Ok(width), Ok(height)) if eight_bit && !lossless && !other_colour => {
                Some(JpegHeader { width, height, mcu_width })
            }
            _ => None,
        })
    }

    /// Decodes the whole of `bytes` in whatever form libjpeg-turbo takes it (CMYK or YCCK as
    /// CMYK, 2 to 16 bits, lossless, any subsampling), at full size, into a buffer dropped at
    /// once: the check of a JPEG [`Self::header`] left to another decoder, which would fill in a
    /// file cut short (look 114, L114-1). Its pixels, at their precision, may take at most
    /// `max_bytes`.
    ///
    /// [`Decoded::Warned`] as [`Self::decode`], stopping at the first warning.
    ///
    /// # Errors
    /// A header or data libjpeg-turbo cannot decode, or pixels past `max_bytes`.
    pub fn check_whole(&mut self, bytes: &[u8], max_bytes: u64) -> Result<Decoded, String> {
        // SAFETY: as in `header`: `bytes` only read, for the call.
        let read = unsafe { tj::tj3DecompressHeader(self.handle.as_ptr(), bytes.as_ptr(), bytes.len() as _) };
        if read != 0 {
            let why = self.error();
            *self = Jpeg::new(self.max_memory)?;
            return Err(why);
        }
        let (w, h) = (self.get(tj::TJPARAM_TJPARAM_JPEGWIDTH), self.get(tj::TJPARAM_TJPARAM_JPEGHEIGHT));
        let (Ok(w), Ok(h)) = (usize::try_from(w), usize::try_from(h)) else {
            return Err(format!("a JPEG of {w}x{h} pixels"));
        };
        let colour = self.get(tj::TJPARAM_TJPARAM_COLORSPACE);
        let cmyk = colour == tj::TJCS_TJCS_CMYK as i32 || colour == tj::TJCS_TJCS_YCCK as i32;
        let (format, channels) = if cmyk { (tj::TJPF_TJPF_CMYK, 4) } else { (tj::TJPF_TJPF_RGB, 3) };
        let precision = self.get(tj::TJPARAM_TJPARAM_PRECISION);
        let samples = w.checked_mul(h).and_then(|n| n.checked_mul(channels)).unwrap_or(usize::MAX);
        let size = if precision <= 8 { samples } else { samples.saturating_mul(2) };
        if w == 0 || h == 0 || size as u64 > max_bytes {
            return Err(format!(
                "a JPEG of {w}x{h} pixels at {precision} bits is past {max_bytes} bytes decoded"
            ));
        }
        self.set(tj::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
        // The whole image at full size, whatever an earlier region decode set.
        let whole = tj::tjscalingfactor { num: 1, denom: 1 };
        let uncropped = tj::tjregion { x: 0, y: 0, w: 0, h: 0 };
        // SAFETY: `handle` is a live instance whose header was just read; the factor is plain.
        let scaled = unsafe { tj::tj3SetScalingFactor(self.handle.as_ptr(), whole) };
        // SAFETY: as above; the region is plain data.
        let cropped = unsafe { tj::tj3SetCroppingRegion(self.handle.as_ptr(), uncropped) };
        if scaled != 0 || cropped != 0 {
            return Err(self.error());
        }
        // Each call: `bytes` only read; TurboJPEG writes `h` rows of `w * channels` samples of
        // its precision's type (pitch 0: packed), exactly the buffer's length, which nothing
        // else holds during the call.
        let done = match precision {
            ..=8 => {
                let mut out = vec![0u8; samples];
                // SAFETY: as said above the match.
                unsafe {
                    tj::tj3Decompress8(
                        self.handle.as_ptr(),
                        bytes.as_ptr(),
                        bytes.len() as _,
                        out.as_mut_ptr(),
                        0,
                        format,
                    )
                }
            }
            9..=12 => {
                let mut out = vec![0i16; samples];
                // SAFETY: as said above the match.
                unsafe {
                    tj::tj3Decompress12(
                        self.handle.as_ptr(),
                        bytes.as_ptr(),
                        bytes.len() as _,
                        out.as_mut_ptr(),
                        0,
                        format,
                    )
                }
            }
            _ => {
                let mut out = vec![0u16; samples];
                // SAFETY: as said above the match.
                unsafe {
                    tj::tj3Decompress16(
                        self.handle.as_ptr(),
                        bytes.as_ptr(),
                        bytes.len() as _,
                        out.as_mut_ptr(),
                        0,
                        format,
                    )
                }
            }
        };
        if done == 0 {
            return Ok(Decoded::Clean);
        }
        // SAFETY: `handle` is a live instance; `tj3GetErrorCode` reads its last outcome.
        let warned = unsafe { tj::tj3GetErrorCode(self.handle.as_ptr()) } == tj::TJERR_TJERR_WARNING as i32;
        let why = self.error();
        if warned { Ok(Decoded::Warned(why)) } else { Err(why) }
    }

    /// Decodes `region` of `bytes` (whose header is `header`, just read by [`Self::header`])
    /// scaled by `num / 8` (`num` 1, 2, 4 or 8) into `out` as RGB rows of `region.width`
    /// pixels (its length set to the region's).
    ///
    /// [`Decoded::Warned`] when libjpeg-turbo met a warning: it stops there when
    /// `stop_on_warning`, else it decodes on and the last warning is returned.
    ///
    /// # Errors
    /// A region that is not inside the scaled image or whose left edge is not on an iMCU, and
    /// whatever stops the decoder with an error (damaged markers, limits).
    pub fn decode(
        &mut self,
        bytes: &[u8],
        header: &JpegHeader,
        num: u32,
        region: Region,
        out: &mut Vec<u8>,
        stop_on_warning: bool,
    ) -> Result<Decoded, String> {
        let (sw, sh) = (JpegHeader::scaled(header.width, num), JpegHeader::scaled(header.height, num));
        let inside = matches!(num, 1 | 2 | 4 | 8)
            && region.width > 0
            && region.height > 0
            && u64::from(region.x) + u64::from(region.width) <= u64::from(sw)
            && u64::from(region.y) + u64::from(region.height) <= u64::from(sh)
            && region.x.is_multiple_of(header.mcu_width(num));
        if !inside {
            return Err(format!("a region of {region:?} at scale {num}/8 in an image of {sw}x{sh}"));
        }
        self.set(tj::TJPARAM_TJPARAM_STOPONWARNING, i32::from(stop_on_warning))?;
        let pitch = region.width as usize * 3;
        out.resize(pitch * region.height as usize, 0);
        // TurboJPEG knows its factors in lowest terms only (1/1, 1/2, 1/4, 1/8).
        let factor = tj::tjscalingfactor { num: 1, denom: 8 / num as i32 };
        // SAFETY: `handle` is a live instance whose header was just read; the factor is plain.
        if unsafe { tj::tj3SetScalingFactor(self.handle.as_ptr(), factor) } != 0 {
            return Err(self.error());
        }
        let crop = tj::tjregion {
            x: region.x as i32,
            y: region.y as i32,
            w: region.width as i32,
            h: region.height as i32,
        };
        // SAFETY: as above; the region is plain data, checked by TurboJPEG against the header.
        if unsafe { tj::tj3SetCroppingRegion(self.handle.as_ptr(), crop) } != 0 {
            return Err(self.error());
        }
        // SAFETY: `bytes` is read only, for the call. TurboJPEG writes `crop.h` rows of
        // `crop.w` RGB pixels (3 bytes each), row `i` at `out[i * pitch..]`: exactly
        // `out.len()` bytes, all inside `out`, which nothing else holds during the call. The
        // region was checked above to lie in the scaled image, so the rows it writes are those.
        let done = unsafe {
            tj::tj3Decompress8(
                self.handle.as_ptr(),
                bytes.as_ptr(),
                bytes.len() as _,
                out.as_mut_ptr(),
                pitch as i32,
                tj::TJPF_TJPF_RGB,
            )
        };
        if done == 0 {
            return Ok(Decoded::Clean);
        }
        // SAFETY: `handle` is a live instance; `tj3GetErrorCode` reads its last outcome.
        let warned = unsafe { tj::tj3GetErrorCode(self.handle.as_ptr()) } == tj::TJERR_TJERR_WARNING as i32;
        let why = self.error();
        if warned { Ok(Decoded::Warned(why)) } else { Err(why) }
    }
}

impl Drop for Jpeg {
    fn drop(&mut self) {
        // SAFETY: `handle` is a live instance, destroyed once here and never used again.
        unsafe { tj::tj3Destroy(self.handle.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pixels` (RGB, `w` x `h`) as a JPEG of `subsamp` at quality 90 (TurboJPEG's encoder).
    pub(crate) fn encode(pixels: &[u8], w: u32, h: u32, subsamp: tj::TJSAMP) -> Vec<u8> {
        encode_as(pixels, w, h, tj::TJPF_TJPF_RGB, subsamp)
    }

    /// [`encode`] of pixels in `format` (CMYK pixels make a YCCK JPEG).
    fn encode_as(pixels: &[u8], w: u32, h: u32, format: tj::TJPF, subsamp: tj::TJSAMP) -> Vec<u8> {
        let channels = if format == tj::TJPF_TJPF_CMYK { 4 } else { 3 };
        assert_eq!(pixels.len(), w as usize * h as usize * channels);
        // SAFETY: a fresh compressor, its parameters set, the pixels read for the call, the
        // output buffer allocated by TurboJPEG, copied out and freed once (a test's encoder).
        unsafe {
            let handle = tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as i32);
            assert!(!handle.is_null());
            assert_eq!(tj::tj3Set(handle, tj::TJPARAM_TJPARAM_QUALITY as i32, 90), 0);
            assert_eq!(tj::tj3Set(handle, tj::TJPARAM_TJPARAM_SUBSAMP as i32, subsamp), 0);
            let mut buf: *mut u8 = std::ptr::null_mut();
            let mut size = 0;
            let rc =
                tj::tj3Compress8(handle, pixels.as_ptr(), w as i32, 0, h as i32, format, &mut buf, &mut size);
            assert_eq!(rc, 0);
            let jpeg = std::slice::from_raw_parts(buf, size as usize).to_vec();
            tj::tj3Free(buf.cast());
            tj::tj3Destroy(handle);
            jpeg
        }
    }

    fn pattern(w: u32, h: u32) -> Vec<u8> {
        (0..w * h * 3).map(|k| ((k % 3) * 80 + (k / 3 % w) * 3 + (k / 3 / w) * 5) as u8).collect()
    }

    #[test]
    fn a_region_decodes_to_the_same_pixels_as_the_whole_image_there() {
        let (w, h) = (203, 141);
        let mut jpeg = Jpeg::new(64 << 20).unwrap();
        for subsamp in [
            tj::TJSAMP_TJSAMP_444,
            tj::TJSAMP_TJSAMP_422,
            tj::TJSAMP_TJSAMP_420,
            tj::TJSAMP_TJSAMP_440,
            tj::TJSAMP_TJSAMP_411,
        ] {
            let bytes = encode(&pattern(w, h), w, h, subsamp);
            let header = jpeg.header(&bytes).unwrap().unwrap();
            assert_eq!((header.width, header.height), (w, h));
            for num in [8, 4, 2, 1] {
                let (sw, sh) = (JpegHeader::scaled(w, num), JpegHeader::scaled(h, num));
                let mut whole = Vec::new();
                let full = Region { x: 0, y: 0, width: sw, height: sh };
                assert_eq!(jpeg.decode(&bytes, &header, num, full, &mut whole, true), Ok(Decoded::Clean));
                assert_eq!(whole.len(), sw as usize * sh as usize * 3);
                let mcu = header.mcu_width(num);
                for (x, y) in [(mcu, 1), (0, sh / 3), (mcu * (sw / mcu / 2), sh / 2)] {
                    let region =
                        Region { x, y, width: (sw - x).min(sw / 2 + 1), height: (sh - y).min(sh / 3 + 1) };
                    let mut part = Vec::new();
                    assert_eq!(
                        jpeg.decode(&bytes, &header, num, region, &mut part, true),
                        Ok(Decoded::Clean)
                    );
                    let row = region.width as usize * 3;
                    for (r, got) in part.chunks_exact(row).enumerate() {
                        let start = ((region.y as usize + r) * sw as usize + region.x as usize) * 3;
                        let want = &whole[start..start + row];
                        // The columns at a region's cut edges may differ (the chroma upsampling there
                        // has no neighbour to blend with): the pipeline keeps a column of margin.
                        let first = usize::from(region.x > 0);
                        let last = row / 3 - usize::from(region.x + region.width < sw);
                        assert_eq!(
                            &got[first * 3..last * 3],
                            &want[first * 3..last * 3],
                            "subsamp {subsamp} scale {num}/8 {region:?} row {r}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_regions_and_damaged_data_are_errors_not_panics() {
        let (w, h) = (64, 48);
        let bytes = encode(&pattern(w, h), w, h, tj::TJSAMP_TJSAMP_420);
        let mut jpeg = Jpeg::new(64 << 20).unwrap();
        let header = jpeg.header(&bytes).unwrap().unwrap();
        let mut out = Vec::new();
        for (num, region) in [
            (8, Region { x: 8, y: 0, width: 8, height: 8 }), // not on a 16-pixel iMCU
            (8, Region { x: 0, y: 0, width: 65, height: 8 }), // past the right edge
            (8, Region { x: 0, y: 40, width: 8, height: 9 }), // past the bottom
            (8, Region { x: 0, y: 0, width: 0, height: 8 }), // empty
            (3, Region { x: 0, y: 0, width: 8, height: 8 }), // a scale with no SIMD path
            (4, Region { x: 0, y: 0, width: 33, height: 8 }), // past the half-size edge
        ] {
            assert!(jpeg.decode(&bytes, &header, num, region, &mut out, true).is_err(), "{num} {region:?}");
        }
        // A flipped byte inside the entropy-coded data: an error, never a grey image.
        let mut damaged = bytes.clone();
        let mid = damaged.len() / 2;
        damaged[mid..mid + 8].fill(0xFF);
        let header = jpeg.header(&damaged).unwrap().unwrap();
        let whole = Region { x: 0, y: 0, width: w, height: h };
        assert!(!matches!(jpeg.decode(&damaged, &header, 8, whole, &mut out, true), Ok(Decoded::Clean)));
        // Cut short: the decoder stops at the missing data instead of filling it with grey.
        let cut = &bytes[..bytes.len() * 2 / 3];
        let header = jpeg.header(cut).unwrap().unwrap();
        assert!(matches!(jpeg.decode(cut, &header, 8, whole, &mut out, true), Ok(Decoded::Warned(_))));
        assert!(jpeg.header(b"not a jpeg").is_err());
        assert!(jpeg.header(&bytes[..20]).is_err());
    }

    /// Look 114, L114-1: a JPEG `header` leaves to another decoder (here YCCK) is checked whole:
    /// clean when whole, refused cut short with its end marker put back, or past the size given;
    /// and the instance decodes a region as before afterwards.
    #[test]
    fn a_whole_check_finds_a_cut_file_the_header_leaves_to_another_decoder() {
        let (w, h) = (64u32, 48u32);
        let cmyk: Vec<u8> = (0..w * h * 4).map(|k| (k * 7 % 251) as u8).collect();
        let bytes = encode_as(&cmyk, w, h, tj::TJPF_TJPF_CMYK, tj::TJSAMP_TJSAMP_444);
        let mut jpeg = Jpeg::new(64 << 20).unwrap();
        assert_eq!(jpeg.header(&bytes), Ok(None), "left to another decoder");
        assert_eq!(jpeg.check_whole(&bytes, 1 << 20), Ok(Decoded::Clean));
        let mut cut = bytes[..bytes.len() / 2].to_vec();
        cut.extend_from_slice(&[0xFF, 0xD9]);
        assert!(!matches!(jpeg.check_whole(&cut, 1 << 20), Ok(Decoded::Clean)));
        assert!(jpeg.check_whole(&bytes, 1000).unwrap_err().contains("past 1000 bytes"));
        let rgb = encode(&pattern(w, h), w, h, tj::TJSAMP_TJSAMP_420);
        let header = jpeg.header(&rgb).unwrap().unwrap();
        let mut out = Vec::new();
        let region = Region { x: 16, y: 8, width: 16, height: 8 };
        assert_eq!(jpeg.decode(&rgb, &header, 8, region, &mut out, true), Ok(Decoded::Clean));
        assert_eq!(out.len(), 16 * 8 * 3);
    }
}
