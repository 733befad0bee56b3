//! Element-wise conversions a transform runs over every batch, compiled for AVX2 where the CPU
//! has it (the same bits either way).

use crate::sys::{Kernel, with_avx2};

/// `f32::from(x) * scale + offset` for every byte of `src`, into a fresh `Vec` a tensor can
/// adopt: the usual image normalisation `(x / 255 - mean) / std` is `scale = 1 / (255 * std)`,
/// `offset = -mean / std`.
///
/// A multiply then an add, each rounded (never fused), so every CPU gives the same bits; eight
/// bytes per instruction with AVX2, four without.
///
/// # Examples
/// ```
/// # use loaderx_core as loaderx;
/// let v = loaderx::scale_bytes_to_f32(&[0, 128, 255], 1.0 / 255.0, -0.5);
/// assert_eq!(v[0], -0.5);
/// assert!((v[2] - 0.5).abs() < 1e-6);
/// ```
pub fn scale_bytes_to_f32(src: &[u8], scale: f32, offset: f32) -> Vec<f32> {
    with_avx2(Scale { src, scale, offset })
}

/// [`scale_bytes_to_f32`] as a [`Kernel`] for the AVX2 dispatch.
struct Scale<'a> {
    src: &'a [u8],
    scale: f32,
    offset: f32,
}

impl Kernel for Scale<'_> {
    type Output = Vec<f32>;

    #[inline(always)]
    fn run(self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.src.len());
        out.extend(self.src.iter().map(|&x| f32::from(x) * self.scale + self.offset));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_scaled_then_offset() {
        let src: Vec<u8> = (0..=255).cycle().take(1000).collect();
        let (scale, offset) = (1.0 / (255.0 * 0.3081), -0.1307 / 0.3081);
        let got = scale_bytes_to_f32(&src, scale, offset);
        assert_eq!(got.len(), src.len());
        for (&x, &y) in src.iter().zip(&got) {
            assert_eq!(y.to_bits(), (f32::from(x) * scale + offset).to_bits(), "byte {x}");
        }
        assert!(scale_bytes_to_f32(&[], 1.0, 0.0).is_empty());
    }
}
