//! Resized pixels into the batch: as normalised `f32` planes (compiled for AVX2 where the CPU
//! has it), or as bytes, row by row. The last pass over every output value.

use crate::sys::{Kernel, with_avx2};

/// Pixels a row is cut into: each piece is split into its three channels (reversed for a flip)
/// in buffers on the stack, then each channel converted in one straight loop the compiler turns
/// into vector instructions (eight values an instruction with AVX2).
const PIECE: usize = 256;

/// Writes `px` (`[h, w, 3]` values on the 0..=255 scale, bytes or the floats of a colour jitter,
/// mirrored left-right when `flip`) into `out` (`[3, h, w]`) as
/// `f32::from(v) * scale[c] + offset[c]`: a multiply then an add, each rounded (never fused),
/// so every CPU gives the same bits. Normalising `(v / 255 - mean) / std` is `scale = 1 / (255 *
/// std)`, `offset = -mean / std`. Extra rows or values of `px` and `out` are left alone.
pub(super) fn normalised_planes<T: Copy + Default + Into<f32>>(
    px: &[T],
    (w, h): (usize, usize),
    flip: bool,
    out: &mut [f32],
    (scale, offset): ([f32; 3], [f32; 3]),
) {
    with_avx2(Planes { px, w, h, flip, out, scale, offset });
}

/// Copies `px` (`[h, w, 3]` bytes) into `out` as they are, each row mirrored left-right when
/// `flip`: whole rows copied, or pixels in reverse order. Extra rows of either are left alone.
pub(super) fn pixels(px: &[u8], (w, h): (usize, usize), flip: bool, out: &mut [u8]) {
    if w == 0 {
        return;
    }
    for (src, dst) in px.chunks_exact(w * 3).zip(out.chunks_exact_mut(w * 3)).take(h) {
        if flip {
            for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(3).rev()) {
                d.copy_from_slice(s);
            }
        } else {
            dst.copy_from_slice(src);
        }
    }
}

/// [`normalised_planes`] as a [`Kernel`].
struct Planes<'a, T> {
    px: &'a [T],
    w: usize,
    h: usize,
    flip: bool,
    out: &'a mut [f32],
    scale: [f32; 3],
    offset: [f32; 3],
}

impl<T: Copy + Default + Into<f32>> Kernel for Planes<'_, T> {
    type Output = ();

    #[inline(always)]
    fn run(self) {
        let Planes { px, w, h, flip, out, scale, offset } = self;
        if w == 0 {
            return;
        }
        let plane = w * h;
        let (r, rest) = out.split_at_mut(plane.min(out.len()));
        let (g, b) = rest.split_at_mut(plane.min(rest.len()));
        let planes = r.chunks_exact_mut(w).zip(g.chunks_exact_mut(w)).zip(b.chunks_exact_mut(w));
        let mut split = [[T::default(); PIECE]; 3];
        for (src, ((r, g), b)) in px.chunks_exact(w * 3).zip(planes).take(h) {
            let mut dst = [r, g, b];
            for (p, src) in src.chunks(PIECE * 3).enumerate() {
                let n = src.len() / 3;
                let [c0, c1, c2] = &mut split;
                let (c0, c1, c2) = (&mut c0[..n], &mut c1[..n], &mut c2[..n]);
                for (((v, a), b), c) in
                    src.chunks_exact(3).zip(c0.iter_mut()).zip(c1.iter_mut()).zip(c2.iter_mut())
                {
                    (*a, *b, *c) = (v[0], v[1], v[2]);
                }
                // The piece's place in the output row: mirrored, the row's other end, reversed.
                let start = if flip { w - p * PIECE - n } else { p * PIECE };
                for (c, dst) in dst.iter_mut().enumerate() {
                    let vals = &mut split[c][..n];
                    if flip {
                        vals.reverse();
                    }
                    let (s, o) = (scale[c], offset[c]);
                    for (d, &v) in dst[start..start + n].iter_mut().zip(vals.iter()) {
                        *d = v.into() * s + o;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value, flipped or not, at widths below, at and across a piece, against the formula
    /// applied pixel by pixel; the bytes likewise.
    #[test]
    fn planes_hold_each_channel_scaled_and_mirrored_when_flipped() {
        let (scale, offset) = ([0.5, 0.25, 2.0], [-1.0, 3.0, 0.5]);
        for (w, h) in [(1, 1), (3, 2), (255, 2), (256, 3), (257, 2), (700, 3)] {
            let px: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 251) as u8).collect();
            for flip in [false, true] {
                let mut out = vec![f32::NAN; w * h * 3 + 1];
                normalised_planes(&px, (w, h), flip, &mut out, (scale, offset));
                for y in 0..h {
                    for x in 0..w {
                        let sx = if flip { w - 1 - x } else { x };
                        for c in 0..3 {
                            let v = px[(y * w + sx) * 3 + c];
                            let want = f32::from(v) * scale[c] + offset[c];
                            assert_eq!(
                                out[c * w * h + y * w + x].to_bits(),
                                want.to_bits(),
                                "{w}x{h} {flip}"
                            );
                        }
                    }
                }
                assert!(out[w * h * 3].is_nan(), "a value past the planes was written");
                let mut bytes = vec![7u8; w * h * 3 + 1];
                pixels(&px, (w, h), flip, &mut bytes);
                for y in 0..h {
                    for x in 0..w {
                        let sx = if flip { w - 1 - x } else { x };
                        let (at, from) = ((y * w + x) * 3, (y * w + sx) * 3);
                        assert_eq!(bytes[at..at + 3], px[from..from + 3], "{w}x{h} {flip}");
                    }
                }
                assert_eq!(bytes[w * h * 3], 7, "a byte past the rows was written");
            }
        }
    }
}
