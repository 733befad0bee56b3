//! Encoded images decoded and augmented on the loader's prefetch threads (feature `images`): an
//! [`ImagePipeline`] turns each record of an encoded image dataset (kind `image`, what
//! `convert images --encoded` writes) into one item of the batch, differently at every step.
//!
//! The crop is torchvision's `RandomResizedCrop` (an area fraction and a log-uniform aspect
//! ratio, ten tries, then the central crop of the clamped ratio) or `Resize` + `CenterCrop`; the
//! crop box is resized to the output in one pass (`fast_image_resize`, bilinear convolution, its
//! support widened when downscaling: torchvision's `antialias=True`); then an optional
//! horizontal flip, an optional colour jitter (torchvision's `ColorJitter(brightness, contrast,
//! saturation)`: each factor drawn from `[max(0, 1 - x), 1 + x]`, the three applied in a random
//! order, computed in `f32` on the resized pixels and clamped after each, as torchvision does on
//! float images), and `Normalize` into `f32` channels-first, or `u8` channels-last when no
//! normalisation is asked. Every random choice comes from [`sample_seed`](crate::sample_seed)
//! of (seed, step, position in the global batch): a batch holds the same bytes on any number of
//! threads, after a resume and on any world size.
//!
//! With feature `turbojpeg`, a JPEG is decoded by libjpeg-turbo only where its crop lies (rows
//! below the crop are never decoded, and columns and rows outside it skip the IDCT), with a
//! margin that gives the resize the whole image's pixels, and at 1/2, 1/4 or 1/8 in the DCT when
//! the crop is at least twice the output; a JPEG whose data it finds damaged is an error (junk
//! before the end marker aside), and JPEGs it leaves aside (CMYK, 12-bit, lossless, headers it
//! cannot read) and every other format are decoded whole by `image`'s decoders. An
//! image is untrusted: its header's size is checked against the limits below before anything is
//! allocated for it.

use fast_image_resize as fir;

use crate::DType;
use crate::sampler::SampleRng;

/// The largest side decoded, and the most memory one decode may take (as `convert images`).
const MAX_SIDE: u32 = 1 << 14;
const MAX_ALLOC: u64 = 512 << 20;

/// How an image is cut before it is resized to the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Crop {
    /// torchvision's `RandomResizedCrop(size, scale, ratio)`: a box of a random fraction of the
    /// area in `scale` and a random aspect ratio (log-uniform) in `ratio`.
    RandomResized {
        /// The area fraction's range.
        scale: (f32, f32),
        /// The aspect ratio's range (width / height).
        ratio: (f32, f32),
    },
    /// torchvision's `Resize(resize)` (the shorter side to `resize`) then `CenterCrop(size)`:
    /// the evaluation transform, with no randomness. A centre larger than the resized image is
    /// the largest centre of the output's proportions (torchvision pads it with zeros instead).
    Center {
        /// The shorter side before the centre is cut out.
        resize: u32,
    },
}

/// What an encoded image becomes in a batch: see the [module](self) docs.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePipeline {
    width: u32,
    height: u32,
    crop: Crop,
    flip: f32,
    // Brightness, contrast and saturation: how far each factor may stray from 1 (0: off).
    jitter: [f32; 3],
    normalize: Option<([f32; 3], [f32; 3])>,
    skip_bad: bool,
}

/// ImageNet's channel means and standard deviations (on the 0..1 scale), torchvision's.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// See [`IMAGENET_MEAN`].
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

impl ImagePipeline {
    /// Images of `width` x `height` cut as `crop` says: no flip, `u8` channels-last.
    pub fn new(width: u32, height: u32, crop: Crop) -> ImagePipeline {
        ImagePipeline { width, height, crop, flip: 0.0, jitter: [0.0; 3], normalize: None, skip_bad: false }
    }

    /// The training transform at `size` x `size`: `RandomResizedCrop(size, scale=(0.08, 1),
    /// ratio=(3/4, 4/3))` and a horizontal flip half of the time, `u8` channels-last.
    pub fn train(size: u32) -> ImagePipeline {
        ImagePipeline {
            width: size,
            height: size,
            crop: Crop::RandomResized { scale: (0.08, 1.0), ratio: (3.0 / 4.0, 4.0 / 3.0) },
            flip: 0.5,
            jitter: [0.0; 3],
            normalize: None,
            skip_bad: false,
        }
    }

    /// The evaluation transform at `size` x `size`: the shorter side resized to `size * 8 / 7`
    /// (256 for 224, torchvision's recipe) and the centre cut out, no flip, `u8` channels-last.
    pub fn eval(size: u32) -> ImagePipeline {
        ImagePipeline {
            width: size,
            height: size,
            // At least the output, at most the largest side decoded.
            crop: Crop::Center {
                resize: (u64::from(size) * 8 / 7).min(u64::from(MAX_SIDE)).max(u64::from(size)) as u32,
            },
            flip: 0.0,
            jitter: [0.0; 3],
            normalize: None,
            skip_bad: false,
        }
    }

    /// This pipeline with `crop`.
    #[must_use]
    pub fn crop(mut self, crop: Crop) -> ImagePipeline {
        self.crop = crop;
        self
    }

    /// This pipeline flipping horizontally with probability `p`.
    #[must_use]
    pub fn flip(mut self, p: f32) -> ImagePipeline {
        self.flip = p;
        self
    }

    /// This pipeline jittering colours as torchvision's `ColorJitter(brightness, contrast,
    /// saturation)` does: each factor drawn uniformly from `[max(0, 1 - x), 1 + x]` (0 leaves that
    /// property alone), the three applied in a random order. Brightness scales the pixels;
    /// contrast blends them with the image's mean grey, saturation with each pixel's grey (ITU-R
    /// 601 weights, as torchvision).
    #[must_use]
    pub fn jitter(mut self, brightness: f32, contrast: f32, saturation: f32) -> ImagePipeline {
        self.jitter = [brightness, contrast, saturation];
        self
    }

    /// This pipeline writing `(pixel / 255 - mean) / std` per channel, as `f32` channels-first
    /// (`[3, H, W]`).
    #[must_use]
    pub fn normalize(mut self, mean: [f32; 3], std: [f32; 3]) -> ImagePipeline {
        self.normalize = Some((mean, std));
        self
    }

    /// This pipeline leaving an image that does not decode out of its batch instead of failing
    /// the step: its item is zeros (the mean colour once normalised, black as `u8`) and the
    /// loader adds `{name}_ok` (`u8`, `(B,)`, 0 for each image left out) beside the stream, so a
    /// training step can mask it and count it.
    #[must_use]
    pub fn skip_bad(mut self, yes: bool) -> ImagePipeline {
        self.skip_bad = yes;
        self
    }

    /// Whether images that do not decode are left out ([`Self::skip_bad`]) rather than errors.
    pub fn skips_bad(&self) -> bool {
        self.skip_bad
    }

    /// Why the pipeline cannot run, if it cannot: a side of 0 or over 16,384, a scale or ratio
    /// range that is empty, negative or not finite, a flip probability outside 0..=1, a jitter
    /// that is negative or not finite, a standard deviation of 0.
    pub fn check(&self) -> Result<(), String> {
        let side = 1..=MAX_SIDE;
        if !side.contains(&self.width) || !side.contains(&self.height) {
            return Err(format!("an output of {}x{} (each side 1..={MAX_SIDE})", self.width, self.height));
        }
        match self.crop {
            Crop::RandomResized { scale: (lo, hi), ratio: (rlo, rhi) } => {
                if !(lo.is_finite() && hi.is_finite() && 0.0 < lo && lo <= hi && hi <= 1.0) {
                    return Err(format!("a crop scale of ({lo}, {hi}): 0 < low <= high <= 1"));
                }
                if !(rlo.is_finite() && rhi.is_finite() && 0.0 < rlo && rlo <= rhi) {
                    return Err(format!("a crop ratio of ({rlo}, {rhi}): 0 < low <= high"));
                }
            }
            Crop::Center { resize } if !side.contains(&resize) => {
                return Err(format!("a resize to {resize} (1..={MAX_SIDE})"));
            }
            Crop::Center { .. } => {}
        }
        if !(0.0..=1.0).contains(&self.flip) {
            return Err(format!("a flip probability of {}", self.flip));
        }
        if self.jitter.iter().any(|j| !(j.is_finite() && *j >= 0.0)) {
            let [b, c, s] = self.jitter;
            return Err(format!(
                "a colour jitter of brightness {b}, contrast {c}, saturation {s} (each finite, >= 0)"
            ));
        }
        if let Some((mean, std)) = self.normalize {
            if std.iter().any(|s| !s.is_finite() || *s == 0.0) {
                return Err(format!("a normalisation by {std:?}"));
            }
            // What the pass computes, `v * scale + offset` in `f32`, finite for every `v` in
            // 0..=255 (look 180, L180-2: a mean of 4 over a deviation of 1e-38 made a channel
            // -inf).
            let finite = (0..3).all(|c| {
                let (scale, offset) = (1.0 / (255.0 * std[c]), -mean[c] / std[c]);
                [mean[c], scale, offset, 255.0 * scale + offset].iter().all(|v| v.is_finite())
            });
            if !finite {
                return Err(format!(
                    "a normalisation of mean {mean:?} by {std:?}: (v / 255 - mean) / std is past f32 for \
                     some pixel value v"
                ));
            }
        }
        Ok(())
    }

    /// `f32` when normalising, else `u8`.
    pub fn dtype(&self) -> DType {
        if self.normalize.is_some() { DType::F32 } else { DType::U8 }
    }

    /// `[3, H, W]` when normalising, else `[H, W, 3]`.
    pub fn item_shape(&self) -> Vec<usize> {
        let (w, h) = (self.width as usize, self.height as usize);
        if self.normalize.is_some() { vec![3, h, w] } else { vec![h, w, 3] }
    }

    /// Elements in one output item.
    pub fn item_elems(&self) -> usize {
        self.width as usize * self.height as usize * 3
    }

    /// Decodes the encoded image `bytes` and writes it into `out` (one item: [`Self::item_elems`]
    /// elements of [`Self::dtype`]), its random choices from `rng`.
    ///
    /// # Errors
    /// Why the image cannot be decoded (its format, a size past the limits, damaged data).
    pub fn apply(&self, bytes: &[u8], rng: &mut SampleRng, out: Out<'_>) -> Result<(), String> {
        self.apply_with(bytes, rng, out, &mut Scratch::default())
    }

    /// [`Self::apply`] reusing `scratch`'s buffers (the decoded and the resized pixels), so
    /// that a batch's images allocate nothing once the first has sized them.
    ///
    /// # Errors
    /// As [`Self::apply`].
    pub fn apply_with(
        &self,
        bytes: &[u8],
        rng: &mut SampleRng,
        mut out: Out<'_>,
        scratch: &mut Scratch,
    ) -> Result<(), String> {
        let len = match &out {
            Out::U8(o) => o.len(),
            Out::F32(o) => o.len(),
        };
        if len != self.item_elems() {
            return Err(format!("an output of {len} values for an item of {}", self.item_elems()));
        }
        let bytes = jpeg_data(bytes)?;
        let source = scratch.open(bytes)?;
        let (iw, ih) = source.size();
        let (left, top, cw, ch) = self.crop_box(iw, ih, rng);
        // Less than a pixel is a crop (look 180, L180-1: Resize(256), CenterCrop(224) of a
        // 1-pixel-wide image, 0.875 of its pixel, is torchvision's solid colour); empty is not.
        if !(cw > 0.0 && ch > 0.0) {
            return Err(format!("a crop of {cw}x{ch} pixels in an image of {iw}x{ih}"));
        }
        let flip = self.flip > 0.0 && rng.next_f32() < self.flip;
        // Only the crop's region (and, a crop twice the output or more, scaled) where the decoder
        // can: the box is then in the decoded region's pixels.
        let (iw, ih, (left, top, cw, ch)) =
            scratch.decode(bytes, source, (left, top, cw, ch), (self.width, self.height))?;
        let (w, h) = (self.width, self.height);
        let src = fir::images::ImageRef::new(iw, ih, &scratch.decoded, fir::PixelType::U8x3)
            .map_err(|e| e.to_string())?;
        // Every byte is written by the resize: a buffer of the right length is all it needs.
        scratch.resized.resize(self.item_elems(), 0);
        let mut dst = fir::images::Image::from_slice_u8(w, h, &mut scratch.resized, fir::PixelType::U8x3)
            .map_err(|e| e.to_string())?;
        let options = fir::ResizeOptions::new()
            .resize_alg(fir::ResizeAlg::Convolution(fir::FilterType::Bilinear))
            .crop(left, top, cw, ch);
        scratch.resizer.resize(&src, &mut dst, &options).map_err(|e| e.to_string())?;
        let (w, h) = (w as usize, h as usize);
        // `(v / 255 - mean) / std` as `v * scale + offset`.
        let normalize = self
            .normalize
            .map(|(mean, std)| (std.map(|s| 1.0 / (255.0 * s)), std::array::from_fn(|c| -mean[c] / std[c])));
        if self.jitter != [0.0; 3] {
            let px = &mut scratch.jittered;
            px.clear();
            px.extend(scratch.resized.iter().map(|&v| f32::from(v)));
            jitter(px, self.jitter, rng);
            if let (Out::F32(out), Some(n)) = (&mut out, normalize) {
                planes::normalised_planes(px, (w, h), flip, out, n);
                return Ok(());
            }
            // Bytes again, rounded, for a u8 output.
            for (b, v) in scratch.resized.iter_mut().zip(px.iter()) {
                *b = v.round() as u8;
            }
        }
        match (out, normalize) {
            (Out::F32(out), Some(n)) => {
                planes::normalised_planes(&scratch.resized, (w, h), flip, out, n);
                Ok(())
            }
            (Out::U8(out), _) => {
                planes::pixels(&scratch.resized, (w, h), flip, out);
                Ok(())
            }
            (Out::F32(_), None) => Err("an f32 output without a normalisation".into()),
        }
    }

    /// The crop box `(left, top, width, height)` in an image of `iw` x `ih`.
    fn crop_box(&self, iw: u32, ih: u32, rng: &mut SampleRng) -> (f64, f64, f64, f64) {
        let (iw, ih) = (f64::from(iw), f64::from(ih));
        match self.crop {
            Crop::Center { resize } => {
                // torchvision's Resize(n) then CenterCrop: the shorter side n, the longer
                // int(n * long / short); the crop at integer offsets of that image (Python's
                // round, half to even), mapped back through each side's own scale (look 105,
                // L105-4: a centre half a pixel off blended every pixel with its neighbour).
                let r = f64::from(resize);
                let (rw, rh) = if iw <= ih { (r, (r * ih / iw).floor()) } else { ((r * iw / ih).floor(), r) };
                let (ow, oh) = (f64::from(self.width), f64::from(self.height));
                if ow <= rw && oh <= rh {
                    let (left, top) =
                        (((rw - ow) / 2.0).round_ties_even(), ((rh - oh) / 2.0).round_ties_even());
                    let (sx, sy) = (iw / rw, ih / rh);
                    return (left * sx, top * sy, ow * sx, oh * sy);
                }
                // The shorter side scaled to `resize`, the output cut from its centre: in the
                // source's pixels, a box of the output's size over the scale.
                let scale = r / iw.min(ih);
                let (cw, ch) = (f64::from(self.width) / scale, f64::from(self.height) / scale);
                // A centre larger than the image: both sides shrunk by one factor, so that the
                // output keeps the image's proportions (look 94, L1: each side clamped on its
                // own stretched the image, 0.3 across and 0.6 down).
                let fit = (iw / cw).min(ih / ch).min(1.0);
                let (cw, ch) = (cw * fit, ch * fit);
                ((iw - cw) / 2.0, (ih - ch) / 2.0, cw, ch)
            }
            Crop::RandomResized { scale: (lo, hi), ratio: (rlo, rhi) } => {
                let area = iw * ih;
                let (log_lo, log_hi) = (f64::from(rlo).ln(), f64::from(rhi).ln());
                for _ in 0..10 {
                    let target = area * (f64::from(lo) + f64::from(hi - lo) * f64::from(rng.next_f32()));
                    let ratio = (log_lo + (log_hi - log_lo) * f64::from(rng.next_f32())).exp();
                    // Python's round, half to even, as torchvision's (look 131, L131-2).
                    let (cw, ch) = (
                        (target * ratio).sqrt().round_ties_even(),
                        (target / ratio).sqrt().round_ties_even(),
                    );
                    if 0.0 < cw && cw <= iw && 0.0 < ch && ch <= ih {
                        let left = f64::from(rng.below((iw - cw) as u32 + 1));
                        let top = f64::from(rng.below((ih - ch) as u32 + 1));
                        return (left, top, cw, ch);
                    }
                }
                // torchvision's fallback: the central crop of the ratio clamped into range.
                let r = iw / ih;
                let (cw, ch) = if r < f64::from(rlo) {
                    (iw, (iw / f64::from(rlo)).round_ties_even())
                } else if r > f64::from(rhi) {
                    ((ih * f64::from(rhi)).round_ties_even(), ih)
                } else {
                    (iw, ih)
                };
                // At least a pixel each way (an extreme ratio rounds a side to 0, which the
                // resizer would take for an empty crop and leave the output black).
                let (cw, ch) = (cw.clamp(1.0, iw), ch.clamp(1.0, ih));
                // torchvision's integer offsets ((w - cw) // 2): an odd margin halved was half a
                // pixel off, every pixel the mean of two (look 107, L107-2).
                (((iw - cw) / 2.0).floor(), ((ih - ch) / 2.0).floor(), cw, ch)
            }
        }
    }
}

/// torchvision's grey of an RGB pixel (ITU-R 601).
#[inline(always)]
fn grey(p: &[f32]) -> f32 {
    0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]
}

/// Brightness, contrast and saturation jittered by up to `amount` each, on `px` (`[.., 3]`
/// values on the 0..=255 scale), in an order drawn from `rng` after the three factors.
fn jitter(px: &mut [f32], amount: [f32; 3], rng: &mut SampleRng) {
    let factors = amount.map(|a| {
        let lo = (1.0 - a).max(0.0);
        lo + (1.0 + a - lo) * rng.next_f32()
    });
    // The six orders of three operations.
    const ORDERS: [[usize; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let order = ORDERS[rng.below(6) as usize];
    crate::sys::with_avx2(Jitter { px, amount, factors, order });
}

/// The arithmetic of [`jitter`], compiled for AVX2 where the CPU has it (the same bits).
struct Jitter<'a> {
    px: &'a mut [f32],
    amount: [f32; 3],
    factors: [f32; 3],
    order: [usize; 3],
}

impl crate::sys::Kernel for Jitter<'_> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let Jitter { px, amount, factors, order } = self;
        for op in order {
            let f = factors[op];
            if amount[op] == 0.0 {
                continue;
            }
            match op {
                0 => px.iter_mut().for_each(|v| *v = (*v * f).clamp(0.0, 255.0)),
                1 => {
                    let pixels = (px.len() / 3).max(1) as f32;
                    let sum: f64 = px.chunks_exact(3).map(|p| f64::from(grey(p))).sum();
                    let mean = (sum / f64::from(pixels)) as f32;
                    px.iter_mut().for_each(|v| *v = (f * *v + (1.0 - f) * mean).clamp(0.0, 255.0));
                }
                _ => {
                    for p in px.chunks_exact_mut(3) {
                        let g = grey(p);
                        p.iter_mut().for_each(|v| *v = (f * *v + (1.0 - f) * g).clamp(0.0, 255.0));
                    }
                }
            }
        }
    }
}

/// Where [`ImagePipeline::apply`] writes one item.
#[derive(Debug)]
pub enum Out<'a> {
    /// `[H, W, 3]` bytes.
    U8(&'a mut [u8]),
    /// `[3, H, W]` normalised floats.
    F32(&'a mut [f32]),
}

/// A batch buffer of `total` zeroed items, fresh from the allocator (`calloc`: a large one is
/// fresh pages, zero already, not a pass of zeros), its pages huge where the system lends them
/// (every batch a consumer keeps is written over fresh pages). `None` when it cannot be
/// allocated.
pub(crate) fn zeroed_batch<T: bytemuck::Zeroable>(total: usize) -> Option<Vec<T>> {
    let v: Vec<T> = bytemuck::allocation::try_zeroed_vec(total).ok()?;
    crate::sys::advise_huge_pages(v.as_ptr().cast(), std::mem::size_of_val(v.as_slice()));
    Some(v)
}

#[cfg(all(test, target_os = "linux"))]
pub(crate) use crate::sys::{advice_visible, advised_huge};

mod decode;
mod planes;
mod png;
pub use png::check_png;

#[cfg(feature = "turbojpeg")]
pub use decode::whole_jpeg;
pub use decode::{Scratch, jpeg_data};

#[cfg(test)]
mod tests;
