use std::io::Cursor;

use image::{ImageFormat, Rgb, RgbImage};

use super::*;

fn png(img: &RgbImage) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).unwrap();
    out.into_inner()
}

/// The CRC-32 (IEEE) of `bytes`, as a PNG chunk's.
fn crc32(bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!0u32, |c, &b| {
        (0..8).fold(c ^ u32::from(b), |c, _| if c & 1 == 1 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 })
    })
}

fn run(p: &ImagePipeline, bytes: &[u8], seed: u64) -> Vec<u8> {
    let mut out = vec![0u8; p.item_elems()];
    p.apply(bytes, &mut SampleRng::new(seed), Out::U8(&mut out)).unwrap();
    out
}

#[test]
fn a_solid_image_stays_solid_and_normalises_per_channel() {
    let bytes = png(&RgbImage::from_pixel(50, 30, Rgb([255, 0, 128])));
    for p in [ImagePipeline::train(16), ImagePipeline::eval(16)] {
        let out = run(&p, &bytes, 7);
        assert!(out.chunks(3).all(|px| px == [255, 0, 128]), "{p:?}");
    }
    let p = ImagePipeline::eval(8).normalize([0.5; 3], [0.25; 3]);
    assert_eq!((p.dtype(), p.item_shape()), (DType::F32, vec![3, 8, 8]));
    let mut out = vec![0f32; p.item_elems()];
    p.apply(&bytes, &mut SampleRng::new(1), Out::F32(&mut out)).unwrap();
    let want = [(1.0 - 0.5) / 0.25, (0.0 - 0.5) / 0.25, (128.0 / 255.0 - 0.5) / 0.25];
    for (c, plane) in out.chunks(64).enumerate() {
        assert!(plane.iter().all(|v| (v - want[c]).abs() < 1e-6), "channel {c}");
    }
}

/// An output that is not one item's size is an error, not a partial write.
#[test]
fn an_output_of_another_size_is_refused() {
    let bytes = png(&RgbImage::from_pixel(20, 20, Rgb([1, 2, 3])));
    let p = ImagePipeline::eval(8);
    let mut short = vec![0u8; p.item_elems() - 1];
    let e = p.apply(&bytes, &mut SampleRng::new(1), Out::U8(&mut short)).unwrap_err();
    assert!(e.contains("191 values for an item of 192"), "{e}");
    let p = p.normalize(IMAGENET_MEAN, IMAGENET_STD);
    let mut long = vec![0f32; p.item_elems() + 1];
    assert!(p.apply(&bytes, &mut SampleRng::new(1), Out::F32(&mut long)).is_err());
}

#[test]
fn a_flip_mirrors_the_same_crop() {
    // Left half red, right half blue, a whole-image crop (area 1, the image's own ratio).
    let img = RgbImage::from_fn(40, 20, |x, _| if x < 20 { Rgb([255, 0, 0]) } else { Rgb([0, 0, 255]) });
    let bytes = png(&img);
    let whole = Crop::RandomResized { scale: (1.0, 1.0), ratio: (2.0, 2.0) };
    let plain = run(&ImagePipeline::train(10).crop(whole).flip(0.0), &bytes, 3);
    let flipped = run(&ImagePipeline::train(10).crop(whole).flip(1.0), &bytes, 3);
    for y in 0..10 {
        for x in 0..10 {
            let (a, b) = ((y * 10 + x) * 3, (y * 10 + 9 - x) * 3);
            assert_eq!(plain[a..a + 3], flipped[b..b + 3], "({x}, {y})");
        }
    }
    assert_eq!(plain[..3], [255, 0, 0], "the left edge is red unflipped");
}

#[test]
fn random_crops_lie_in_the_image_and_follow_the_seed() {
    let p = ImagePipeline::train(8);
    for (iw, ih) in [(1, 1), (3, 500), (500, 3), (640, 480), (17, 17)] {
        for seed in 0..200 {
            let (l, t, w, h) = p.crop_box(iw, ih, &mut SampleRng::new(seed));
            assert!(l >= 0.0 && t >= 0.0 && w > 0.0 && h > 0.0, "{iw}x{ih} seed {seed}");
            assert!(
                l + w <= f64::from(iw) && t + h <= f64::from(ih),
                "{iw}x{ih} seed {seed}: {l} {t} {w} {h}"
            );
        }
    }
    let bytes = png(&RgbImage::from_fn(64, 48, |x, y| Rgb([x as u8 * 4, y as u8 * 5, 7])));
    assert_eq!(run(&p, &bytes, 11), run(&p, &bytes, 11), "a pure function of the seed");
    assert_ne!(run(&p, &bytes, 11), run(&p, &bytes, 12), "another crop for another seed");
}

/// Look 94 (L1): `Resize(10)` then `CenterCrop(30)` of a 100 x 50 image clamped each side of the
/// crop on its own, stretching the image (0.3 across, 0.6 down). The box keeps the output's
/// proportions, centred, inside the image.
#[test]
fn a_centre_larger_than_the_resized_image_is_never_stretched() {
    for (iw, ih, resize, size) in [(100, 50, 10, 30), (50, 100, 10, 30), (40, 40, 8, 64)] {
        let p = ImagePipeline::eval(size).crop(Crop::Center { resize });
        let (l, t, w, h) = p.crop_box(iw, ih, &mut SampleRng::new(0));
        assert!((w - h).abs() < 1e-9, "{iw}x{ih}: a square output from a {w} x {h} box");
        assert!(l >= 0.0 && t >= 0.0 && l + w <= f64::from(iw) + 1e-9 && t + h <= f64::from(ih) + 1e-9);
        assert!((l - (f64::from(iw) - w) / 2.0).abs() < 1e-9 && (t - (f64::from(ih) - h) / 2.0).abs() < 1e-9);
    }
    // Within the image, torchvision's box: 640 x 480 resized to 341 x 256 (the longer side
    // truncated), cut at (58, 16) (58.5 rounded half to even), each side over its own scale.
    let p = ImagePipeline::eval(224).crop(Crop::Center { resize: 256 });
    let (l, t, w, h) = p.crop_box(640, 480, &mut SampleRng::new(0));
    let (sx, sy) = (640.0 / 341.0, 480.0 / 256.0);
    for (got, want) in [(l, 58.0 * sx), (t, 16.0 * sy), (w, 224.0 * sx), (h, 224.0 * sy)] {
        assert!((got - want).abs() < 1e-9, "{got} != {want}");
    }
}

/// Look 105, L105-4: Resize(256) + CenterCrop(224) of a 341 x 256 image (no scaling) cut at
/// 58.5 pixels: every output pixel the mean of two, where torchvision copies the pixels at
/// offset 58. The engine copies them too.
#[test]
fn a_centre_crop_at_scale_one_copies_torchvisions_pixels() {
    let img = RgbImage::from_fn(341, 256, |x, y| {
        let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)).to_le_bytes();
        Rgb([v[0], v[1], v[2]])
    });
    let p = ImagePipeline::eval(224).crop(Crop::Center { resize: 256 });
    let got = run(&p, &png(&img), 0);
    let img = &img;
    let want: Vec<u8> = (16..240).flat_map(|y| (58..282).flat_map(move |x| img.get_pixel(x, y).0)).collect();
    assert_eq!(got.len(), want.len());
    let off = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    assert_eq!(off, 0, "{off} bytes differ from torchvision's crop");
}

#[test]
fn bad_images_and_settings_are_refused_without_a_panic() {
    let p = ImagePipeline::eval(8);
    let mut out = vec![0u8; p.item_elems()];
    let good = png(&RgbImage::from_pixel(4, 4, Rgb([1, 2, 3])));
    // Truncated, not an image, a header claiming 2^31 - 1 rows.
    let mut tall = good.clone();
    tall[20..24].copy_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
    // The IHDR chunk's CRC (IEEE, over its type and data) made right, so that the rows are what
    // is refused, not the checksum.
    let crc = crc32(&tall[12..29]);
    tall[29..33].copy_from_slice(&crc.to_be_bytes());
    let cases: [(&[u8], &str); 4] = [
        (&good[..good.len() / 2], "unexpected end of file"),
        (b"not an image at all", "format could not be determined"),
        (&tall, "past the 16384-pixel limit of a side"),
        (&[], "format could not be determined"),
    ];
    for (bytes, why) in cases {
        let e = p.apply(bytes, &mut SampleRng::new(0), Out::U8(&mut out));
        assert!(e.as_ref().is_err_and(|e| e.contains(why)), "{why}: {e:?}");
    }
    let bad = [
        (ImagePipeline::train(0), "an output of 0x0"),
        (ImagePipeline::train(8).flip(1.5), "a flip probability of 1.5"),
        (
            ImagePipeline::train(8).crop(Crop::RandomResized { scale: (0.5, 0.1), ratio: (1.0, 1.0) }),
            "a crop scale of (0.5, 0.1)",
        ),
        (
            ImagePipeline::train(8).crop(Crop::RandomResized { scale: (0.1, 1.0), ratio: (0.0, 1.0) }),
            "a crop ratio of (0, 1)",
        ),
        (ImagePipeline::eval(8).crop(Crop::Center { resize: 0 }), "a resize to 0"),
        (ImagePipeline::eval(8).normalize([0.0; 3], [1.0, 0.0, 1.0]), "a normalisation by [1.0, 0.0, 1.0]"),
        // Look 180, L180-2: each finite, their quotient past f32 (-inf), and a NaN mean.
        (ImagePipeline::eval(8).normalize([4.0, 0.0, 0.0], [1e-38, 1.0, 1.0]), "is past f32"),
        (ImagePipeline::eval(8).normalize([3e38, 0.0, 0.0], [0.5, 1.0, 1.0]), "is past f32"),
        (ImagePipeline::eval(8).normalize([f32::NAN, 0.0, 0.0], [1.0; 3]), "is past f32"),
    ];
    for (b, why) in bad {
        assert!(b.check().is_err_and(|e| e.contains(why)), "{b:?}: {:?}", b.check());
    }
    assert!(ImagePipeline::train(224).normalize(IMAGENET_MEAN, IMAGENET_STD).check().is_ok());
}

/// The twenty-sixth look's V1 and V3: a ratio range no crop of the image fits falls back to a
/// crop of at least a pixel each way (never an empty one, which left the output black); the
/// evaluation transform builds at the largest sizes.
#[test]
fn extreme_ratios_still_crop_the_image_and_eval_builds_at_any_size() {
    let wide = png(&RgbImage::from_pixel(400, 1, Rgb([200, 100, 50])));
    let tall = png(&RgbImage::from_pixel(1, 300, Rgb([200, 100, 50])));
    for (bytes, ratio) in
        [(&wide, (0.25, 0.4)), (&tall, (3.0, 4.0)), (&wide, (1e-6, 1e-6)), (&tall, (1e6, 1e6))]
    {
        let p = ImagePipeline::train(8).crop(Crop::RandomResized { scale: (0.08, 1.0), ratio });
        let out = run(&p, bytes, 5);
        assert!(out.chunks(3).all(|px| px == [200, 100, 50]), "{ratio:?}");
    }
    // Look 180, L180-1: Resize(256) + CenterCrop(224) of an image a pixel wide or high crops
    // 0.875 of a pixel: torchvision's solid colour, not an undecodable image.
    for (w, h) in [(1, 1), (300, 1), (1, 300)] {
        let thin = png(&RgbImage::from_pixel(w, h, Rgb([200, 100, 50])));
        let out = run(&ImagePipeline::eval(224), &thin, 0);
        assert!(out.chunks(3).all(|px| px == [200, 100, 50]), "{w}x{h}");
    }
    for size in [1, 224, 14_337, 16_384] {
        assert!(ImagePipeline::eval(size).check().is_ok(), "{size}");
    }
}

/// The twenty-sixth look's V6: a JPEG cut short is refused (its decoder would fill the rest);
/// look 110's L110-2: bytes after its end-of-image marker (a motion photo's video, padding) are
/// not the image's, and the image decodes as without them.
#[test]
fn a_truncated_jpeg_is_refused_and_a_trailer_ignored() {
    let img = RgbImage::from_fn(64, 48, |x, y| Rgb([x as u8 * 3, y as u8 * 5, 9]));
    let mut jpeg = Cursor::new(Vec::new());
    img.write_to(&mut jpeg, ImageFormat::Jpeg).unwrap();
    let jpeg = jpeg.into_inner();
    assert_eq!(jpeg_data(&jpeg), Ok(&jpeg[..]));
    assert_eq!(jpeg_data(b"not a jpeg"), Ok(&b"not a jpeg"[..]));
    let p = ImagePipeline::eval(8);
    let whole = run(&p, &jpeg, 0);
    for tail in [&[0u8, 0, 0][..], b"\0\0\0\x18ftypmp42 and a video", &[0xFF, 0xD8, 0xFF, 0xD9]] {
        let mut longer = jpeg.clone();
        longer.extend_from_slice(tail);
        assert_eq!(jpeg_data(&longer), Ok(&jpeg[..]), "{tail:?}");
        assert_eq!(run(&p, &longer, 0), whole, "{tail:?}");
    }
    let mut out = vec![0u8; p.item_elems()];
    for cut in [&jpeg[..jpeg.len() / 2], &jpeg[..jpeg.len() - 1], &jpeg[..3]] {
        assert!(jpeg_data(cut).unwrap_err().contains("truncated"));
        let e = p.apply(cut, &mut SampleRng::new(0), Out::U8(&mut out)).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }
    // Segments that do not follow one another: no marker where one must be, a length below 2.
    let mut no_marker = jpeg.clone();
    no_marker[2] = 0x12;
    assert!(jpeg_data(&no_marker).unwrap_err().contains("no marker at byte 2"));
    let mut short = jpeg.clone();
    short[4..6].copy_from_slice(&[0, 1]);
    assert!(jpeg_data(&short).unwrap_err().contains("length 1"));
    // Look 122, L122-1: an arithmetic-coded frame (its SOF0 marked SOF9 here) is refused, as a
    // cut one decodes as a whole one.
    let sof = jpeg.windows(2).position(|m| m == [0xFF, 0xC0]).expect("a baseline frame");
    let mut arithmetic = jpeg.clone();
    arithmetic[sof + 1] = 0xC9;
    let e = jpeg_data(&arithmetic).unwrap_err();
    assert!(e.contains("arithmetic-coded JPEG (SOF9)"), "{e}");
    let e = p.apply(&arithmetic, &mut SampleRng::new(0), Out::U8(&mut out)).unwrap_err();
    assert!(e.contains("arithmetic-coded"), "{e}");
}

/// A gradient of colours, with no pixel at 0 or 255 (so a jitter's clamp rarely bites).
fn colours() -> Vec<u8> {
    png(&RgbImage::from_fn(48, 32, |x, y| Rgb([80 + x as u8, 90 + (y * 2) as u8, 140 - (x + y) as u8])))
}

#[test]
fn colour_jitter_scales_blends_and_keeps_greys() {
    let bytes = colours();
    let whole = Crop::RandomResized { scale: (1.0, 1.0), ratio: (1.5, 1.5) };
    let base = ImagePipeline::new(12, 8, whole);
    let plain = run(&base, &bytes, 5);
    let mut factors = Vec::new();
    for seed in 0..40 {
        // Brightness alone: every pixel scaled by one factor in [0.6, 1.4].
        let bright = run(&base.clone().jitter(0.4, 0.0, 0.0), &bytes, seed);
        let (num, den) = plain.iter().zip(&bright).fold((0.0, 0.0), |(n, d), (&a, &b)| {
            (n + f64::from(a) * f64::from(b), d + f64::from(a) * f64::from(a))
        });
        let f = num / den;
        assert!((0.6 - 1e-3..=1.4 + 1e-3).contains(&f), "seed {seed}: factor {f}");
        for (&a, &b) in plain.iter().zip(&bright) {
            assert!((f * f64::from(a) - f64::from(b)).abs() <= 1.0, "seed {seed}: {a} -> {b} at {f}");
        }
        factors.push(f);
        // Saturation alone keeps each pixel's grey; contrast alone the image's mean grey.
        let grey = |p: &[u8]| 0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]);
        let sat = run(&base.clone().jitter(0.0, 0.0, 0.5), &bytes, seed);
        for (a, b) in plain.chunks(3).zip(sat.chunks(3)) {
            assert!((grey(a) - grey(b)).abs() <= 1.0, "seed {seed}: {a:?} -> {b:?}");
        }
        let con = run(&base.clone().jitter(0.0, 0.9, 0.0), &bytes, seed);
        let mean = |img: &[u8]| img.chunks(3).map(grey).sum::<f64>() / (img.len() / 3) as f64;
        assert!((mean(&plain) - mean(&con)).abs() <= 1.0, "seed {seed}");
    }
    // Factors spread over the range, and follow the seed.
    let (lo, hi) = factors.iter().fold((f64::MAX, f64::MIN), |(l, h), &f| (l.min(f), h.max(f)));
    assert!(lo < 0.8 && hi > 1.2, "{lo} {hi}");
    let all = base.clone().jitter(0.4, 0.4, 0.4);
    assert_eq!(run(&all, &bytes, 9), run(&all, &bytes, 9));
    assert_ne!(run(&all, &bytes, 9), run(&all, &bytes, 10));
    // A grey image stays grey under any jitter.
    let grey_png = png(&RgbImage::from_pixel(20, 20, Rgb([90, 90, 90])));
    for seed in 0..20 {
        let out = run(&ImagePipeline::eval(8).jitter(0.5, 0.5, 0.5), &grey_png, seed);
        assert!(out.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]), "seed {seed}");
    }
    // Normalised output is the jittered pixels normalised (to within rounding).
    let p = base.clone().jitter(0.4, 0.4, 0.4);
    let bytes_out = run(&p, &bytes, 3);
    let mut f = vec![0f32; p.item_elems()];
    p.clone().normalize([0.0; 3], [1.0; 3]).apply(&bytes, &mut SampleRng::new(3), Out::F32(&mut f)).unwrap();
    for (i, &b) in bytes_out.iter().enumerate() {
        let (y, x, c) = (i / 36, (i / 3) % 12, i % 3);
        assert!((f[c * 96 + y * 12 + x] * 255.0 - f32::from(b)).abs() <= 0.5 + 1e-3, "{i}");
    }
    for bad in [-0.1, f32::NAN, f32::INFINITY] {
        assert!(ImagePipeline::train(8).jitter(0.1, bad, 0.0).check().unwrap_err().contains("jitter"));
    }
}

/// One scratch through images of other sizes and kinds (RGB, grey, large then small) gives the
/// bytes a fresh one does: nothing of an image is left over for the next.
#[test]
fn a_reused_scratch_gives_the_bytes_a_fresh_one_does() {
    let grey = {
        let mut out = Cursor::new(Vec::new());
        image::GrayImage::from_fn(30, 20, |x, y| image::Luma([(x * 7 + y) as u8]))
            .write_to(&mut out, ImageFormat::Png)
            .unwrap();
        out.into_inner()
    };
    let files = [
        colours(),
        png(&RgbImage::from_fn(9, 7, |x, y| Rgb([x as u8 * 20, y as u8 * 30, 5]))),
        grey,
        colours(),
    ];
    for p in [
        ImagePipeline::train(8).jitter(0.3, 0.3, 0.3),
        ImagePipeline::eval(6).normalize(IMAGENET_MEAN, IMAGENET_STD),
    ] {
        let mut scratch = Scratch::default();
        for (k, f) in files.iter().enumerate() {
            let (mut a, mut b) = (vec![0f32; p.item_elems()], vec![0f32; p.item_elems()]);
            let (mut ua, mut ub) = (vec![0u8; p.item_elems()], vec![0u8; p.item_elems()]);
            let (fresh, reused) = if p.dtype() == DType::F32 {
                p.apply(f, &mut SampleRng::new(k as u64), Out::F32(&mut a)).unwrap();
                p.apply_with(f, &mut SampleRng::new(k as u64), Out::F32(&mut b), &mut scratch).unwrap();
                (bytemuck::cast_slice::<f32, u8>(&a).to_vec(), bytemuck::cast_slice::<f32, u8>(&b).to_vec())
            } else {
                p.apply(f, &mut SampleRng::new(k as u64), Out::U8(&mut ua)).unwrap();
                p.apply_with(f, &mut SampleRng::new(k as u64), Out::U8(&mut ub), &mut scratch).unwrap();
                (ua.clone(), ub.clone())
            };
            assert_eq!(fresh, reused, "image {k}");
        }
    }
}

#[cfg(feature = "turbojpeg")]
/// A 4:2:0 JPEG of a smooth picture with some texture, `w` x `h` (the `image` crate's encoder).
fn photo_jpeg(w: u32, h: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| {
        let t = ((x * 7 + y * 13) % 23) as u8;
        Rgb([(x * 255 / w) as u8 / 2 + t, (y * 255 / h) as u8 / 2 + t, ((x + y) % 256) as u8 / 3 + 40])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

/// Issue 43's partial decode: a JPEG decoded only where the crop lies gives the pixels a whole
/// decode by the same decoder gives (the PNG of that decode through the whole-image path); a
/// crop twice the output or more, decoded at 1/2, 1/4 or 1/8 in the DCT, comes close.
#[cfg(feature = "turbojpeg")]
#[test]
fn a_jpeg_decoded_only_under_its_crop_matches_its_whole_decode() {
    use crate::sys::{Decoded, Jpeg, Region};
    let (w, h) = (301, 203);
    let jpeg_bytes = photo_jpeg(w, h);
    let mut jpeg = Jpeg::new(64 << 20).unwrap();
    let header = jpeg.header(&jpeg_bytes).unwrap().unwrap();
    let mut whole = Vec::new();
    let all = Region { x: 0, y: 0, width: w, height: h };
    assert_eq!(jpeg.decode(&jpeg_bytes, &header, 8, all, &mut whole, true), Ok(Decoded::Clean));
    let png_bytes = png(&RgbImage::from_raw(w, h, whole).unwrap());
    let mut scratch = Scratch::default();
    // Outputs of 150 and more: no crop is twice the output, so the decode is at full scale.
    for (p, exact) in [
        (ImagePipeline::train(150), true),
        (ImagePipeline::eval(180), true),
        (ImagePipeline::new(160, 150, Crop::RandomResized { scale: (0.5, 1.0), ratio: (0.5, 2.0) }), true),
        (ImagePipeline::train(24), false),
        (ImagePipeline::eval(40), false),
    ] {
        for seed in 0..40 {
            let mut region = vec![0u8; p.item_elems()];
            p.apply_with(&jpeg_bytes, &mut SampleRng::new(seed), Out::U8(&mut region), &mut scratch).unwrap();
            let reference = run(&p, &png_bytes, seed);
            let diffs: Vec<u8> = region.iter().zip(&reference).map(|(a, b)| a.abs_diff(*b)).collect();
            let max = diffs.iter().copied().max().unwrap();
            let mean = diffs.iter().map(|&d| f64::from(d)).sum::<f64>() / diffs.len() as f64;
            if exact {
                assert_eq!(max, 0, "{p:?} seed {seed}: off by up to {max}");
            } else {
                assert!(mean < 4.0 && max < 64, "{p:?} seed {seed}: off by {mean} on average, {max} at most");
            }
        }
    }
}

/// Look 57, J2 and J3: a JPEG libjpeg-turbo finds damaged (corrupt entropy-coded data, or a file
/// cut short with its end marker put back) was handed to `image`'s decoder whole, which papered
/// over the missing data at whatever size the header claimed (minutes and twice the memory limit
/// for a 60 KB file claiming 16000x10000). It is an error naming the warning now; junk before
/// the end marker, met once every pixel is decoded, is decoded as the clean file is.
#[cfg(feature = "turbojpeg")]
#[test]
fn damaged_jpeg_data_is_an_error_and_junk_before_its_end_is_not() {
    let jpeg_bytes = photo_jpeg(96, 64);
    let p = ImagePipeline::eval(32);
    let mut scratch = Scratch::default();
    let mut out = vec![0u8; p.item_elems()];
    let mut damaged = jpeg_bytes.clone();
    let mid = damaged.len() * 3 / 4;
    damaged[mid..mid + 6].copy_from_slice(&[0xFF, 0xD0, 0x12, 0x34, 0xFF, 0xD3]);
    let mut cut = jpeg_bytes[..jpeg_bytes.len() / 2].to_vec();
    cut.extend_from_slice(&[0xFF, 0xD9]);
    for bad in [&damaged, &cut] {
        let e = p.apply_with(bad, &mut SampleRng::new(0), Out::U8(&mut out), &mut scratch).unwrap_err();
        assert!(e.contains("damaged JPEG data"), "{e}");
    }
    let reference = run(&p, &jpeg_bytes, 0);
    let mut junk = jpeg_bytes[..jpeg_bytes.len() - 2].to_vec();
    junk.extend_from_slice(&[0x12, 0x34, 0x56, 0xFF, 0xD9]);
    p.apply_with(&junk, &mut SampleRng::new(0), Out::U8(&mut out), &mut scratch).unwrap();
    assert!(out == reference, "junk before the end marker: the clean file's pixels");
    // More than a slip's worth is what a cut file padded out to its end marker leaves (look
    // 114, L114-2): refused.
    let mut padded = jpeg_bytes[..jpeg_bytes.len() - 2].to_vec();
    padded.extend(std::iter::repeat_n(0x12, 40).chain([0xFF, 0xD9]));
    let e = p.apply_with(&padded, &mut SampleRng::new(0), Out::U8(&mut out), &mut scratch).unwrap_err();
    assert!(e.contains("39 extraneous bytes"), "{e}");
    // A segment libjpeg-turbo's header reader refuses (a reserved marker), whole or cut short
    // with its end marker put back: refused, never left to `image`'s decoder, which fills in
    // (look 114, L114-1).
    let mut reserved = jpeg_bytes[..2].to_vec();
    reserved.extend_from_slice(&[0xFF, 0x02, 0x00, 0x04, 0x61, 0x62]);
    reserved.extend_from_slice(&jpeg_bytes[2..]);
    let mut cut_reserved = reserved[..reserved.len() / 2].to_vec();
    cut_reserved.extend_from_slice(&[0xFF, 0xD9]);
    for bad in [&reserved, &cut_reserved] {
        let e = p.apply_with(bad, &mut SampleRng::new(0), Out::U8(&mut out), &mut scratch).unwrap_err();
        assert!(e.contains("header libjpeg-turbo cannot read"), "{e}");
    }
    // A JFIF version 2.01, which libjpeg-turbo warns about in the header: decoded, as PIL does
    // (look 116, L116-1).
    let mut jfif2 = jpeg_bytes.clone();
    let app0 = jfif2.windows(5).position(|w| w == b"JFIF\0").expect("a JFIF segment");
    jfif2[app0 + 5..app0 + 7].copy_from_slice(&[2, 1]);
    p.apply_with(&jfif2, &mut SampleRng::new(0), Out::U8(&mut out), &mut scratch).unwrap();
    // A header libjpeg-turbo refuses (its frame's size zeroed): `image` names the error.
    let mut no_size = jpeg_bytes.clone();
    let sof = no_size.windows(2).position(|m| m == [0xFF, 0xC0]).unwrap();
    no_size[sof + 5..sof + 9].fill(0);
    assert!(p.apply_with(&no_size, &mut SampleRng::new(0), Out::U8(&mut out), &mut scratch).is_err());
    // And the decoder carries on with the next good image as a fresh one would.
    let reference = run(&p, &jpeg_bytes, 5);
    let mut again = vec![0u8; p.item_elems()];
    p.apply_with(&jpeg_bytes, &mut SampleRng::new(5), Out::U8(&mut again), &mut scratch).unwrap();
    assert!(again == reference, "the next image decoded as by a fresh decoder");
}

/// Look 57, J1: JPEGs whose sampling factors TurboJPEG files under a standard class with a
/// narrower iMCU (every component 2x1; Y 4x1 with Cb and Cr 2x1) had random crops refused
/// ("Unexplained mismatch ... cropping region left boundary"): with `skip_bad`, valid images left
/// out at random. Every crop decodes now, and a whole-image crop gives the whole decode.
#[cfg(feature = "turbojpeg")]
#[test]
fn a_jpeg_with_a_wider_imcu_than_its_class_crops_anywhere() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jpeg");
    for name in ["sampling-2x1-all.jpg", "sampling-4x1-2x1.jpg"] {
        let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
        let train = ImagePipeline::train(16)
            .crop(Crop::RandomResized { scale: (0.05, 0.3), ratio: (0.75, 4.0 / 3.0) });
        let mut scratch = Scratch::default();
        let mut out = vec![0u8; train.item_elems()];
        for seed in 0..60 {
            let r = train.apply_with(&bytes, &mut SampleRng::new(seed), Out::U8(&mut out), &mut scratch);
            assert!(r.is_ok(), "{name} seed {seed}: {r:?}");
        }
        // The whole image, shrunk less than twice (no DCT scaling), against its whole decode.
        let (whole, w, h) = {
            let (px, w, h) =
                Scratch::default().decode_whole(&bytes).map(|(p, w, h)| (p.to_vec(), w, h)).unwrap();
            (px, w, h)
        };
        let png_bytes = png(&RgbImage::from_raw(w, h, whole).unwrap());
        let all = ImagePipeline::new(
            120,
            72,
            Crop::RandomResized { scale: (1.0, 1.0), ratio: (5.0 / 3.0, 5.0 / 3.0) },
        );
        assert_eq!(run(&all, &bytes, 1), run(&all, &png_bytes, 1), "{name}");
    }
}

/// Look 107, L107-2: RandomResizedCrop's fallback (a central crop, every try out of range) cut
/// at half a pixel for an odd margin; torchvision's offset is `(w - cw) // 2`: an exact copy.
#[test]
fn random_resized_crops_fallback_copies_torchvisions_pixels() {
    let img = RgbImage::from_fn(27, 20, |x, y| {
        let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)).to_le_bytes();
        Rgb([v[0], v[1], v[2]])
    });
    let p =
        ImagePipeline::train(20).crop(Crop::RandomResized { scale: (1.0, 1.0), ratio: (1.0, 1.0) }).flip(0.0);
    let got = run(&p, &png(&img), 3);
    let img = &img;
    let want: Vec<u8> = (0..20).flat_map(|y| (3..23).flat_map(move |x| img.get_pixel(x, y).0)).collect();
    assert_eq!(got, want);
    // Look 131, L131-2: a side of 12.5 rounds half to even, as Python's round: 12 wide at 14.
    let wide = ImagePipeline::train(10).crop(Crop::RandomResized { scale: (1.0, 1.0), ratio: (0.8, 1.25) });
    assert_eq!(wide.crop_box(40, 10, &mut SampleRng::new(0)), (14.0, 0.0, 12.0, 10.0));
}

/// Look 122, L122-2: a PNG whose compressed data were damaged and its chunk's CRC recomputed
/// (a tool rewriting chunks) is refused by its Adler-32, which `image` leaves unchecked; every
/// PNG `image` writes decodes to the pixels `image` decodes.
#[test]
fn a_png_is_decoded_as_image_decodes_it_and_its_adler32_checked() {
    use image::{DynamicImage, ImageBuffer, Luma, LumaA, Rgba};
    let rgb = RgbImage::from_fn(5, 3, |x, y| Rgb([x as u8 * 40, y as u8 * 70, 200]));
    let kinds = [
        DynamicImage::ImageRgb8(rgb.clone()),
        DynamicImage::ImageRgba8(ImageBuffer::from_fn(5, 3, |x, y| Rgba([x as u8, y as u8, 7, 99]))),
        DynamicImage::ImageLuma8(ImageBuffer::from_fn(5, 3, |x, y| Luma([(x * 50 + y) as u8]))),
        DynamicImage::ImageLumaA8(ImageBuffer::from_fn(5, 3, |x, y| LumaA([(x * 50 + y) as u8, 3]))),
        DynamicImage::ImageRgb16(ImageBuffer::from_fn(5, 3, |x, y| {
            Rgb([x as u16 * 9000, y as u16 * 333, 65535])
        })),
        DynamicImage::ImageLuma16(ImageBuffer::from_fn(5, 3, |x, y| Luma([(x * 13000 + y * 129) as u16]))),
    ];
    for img in kinds {
        let mut bytes = Cursor::new(Vec::new());
        img.write_to(&mut bytes, ImageFormat::Png).unwrap();
        let bytes = bytes.into_inner();
        let want = image::load_from_memory(&bytes).unwrap().into_rgb8().into_raw();
        let mut scratch = Scratch::default();
        assert_eq!(scratch.decode_whole(&bytes).unwrap(), (&want[..], 5, 3), "{:?}", img.color());
    }
    // A PNG of one stored (uncompressed) deflate block, so that a changed byte still inflates.
    let chunk = |kind: &[u8], data: &[u8]| {
        let body = [kind, data].concat();
        [&(data.len() as u32).to_be_bytes()[..], &body, &crc32(&body).to_be_bytes()].concat()
    };
    let rows: Vec<u8> = rgb.rows().flat_map(|row| std::iter::once(0).chain(row.flat_map(|p| p.0))).collect();
    let adler = {
        let (a, b) = rows
            .iter()
            .fold((1u32, 0u32), |(a, b), &v| ((a + u32::from(v)) % 65521, (b + a + u32::from(v)) % 65521));
        (b << 16) | a
    };
    let n = rows.len() as u16;
    let idat = |rows: &[u8]| {
        [&[0x78, 0x01, 0x01][..], &n.to_le_bytes(), &(!n).to_le_bytes(), rows, &adler.to_be_bytes()].concat()
    };
    let file = |rows: &[u8]| {
        let ihdr = [&5u32.to_be_bytes()[..], &3u32.to_be_bytes(), &[8, 2, 0, 0, 0]].concat();
        [
            &b"\x89PNG\r\n\x1a\n"[..],
            &chunk(b"IHDR", &ihdr),
            &chunk(b"IDAT", &idat(rows)),
            &chunk(b"IEND", &[]),
        ]
        .concat()
    };
    let whole = file(&rows);
    assert_eq!(Scratch::default().decode_whole(&whole).unwrap().0, rgb.as_raw().as_slice());
    assert_eq!(check_png(&whole), Ok(()));
    // Look 124, L124-3: without its end chunk, said so.
    let e = Scratch::default().decode_whole(&whole[..whole.len() - 12]).unwrap_err();
    assert!(e.starts_with("a PNG cut short: its data end before its end chunk, IEND"), "{e}");
    let mut damaged = rows.clone();
    damaged[7] ^= 0x40;
    let damaged = file(&damaged);
    assert!(image::load_from_memory(&damaged).is_ok(), "image's decoder takes it");
    let e = Scratch::default().decode_whole(&damaged).unwrap_err();
    assert!(e.starts_with("damaged PNG data: they do not match their Adler-32"), "{e}");
    assert!(check_png(&damaged).unwrap_err().contains("Adler-32"));
}
