"""Writes an image folder of JPEG photographs for the image benches: crops of the photographs
scikit-image's wheel bundles (astronaut, coffee, chelsea, rocket, retina, hubble_deep_field,
immunohistochemistry), each resized to 500x375 (a fifth 375x500), a random half flipped, saved at
quality 90 with Pillow (ImageNet-like sizes and quality), in 4 class folders.

    python photos.py OUT [--count N] [--seed S]
"""

import argparse
import os

import numpy as np
from PIL import Image
from skimage import data

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "retina", "hubble_deep_field", "immunohistochemistry"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    photos = [Image.fromarray(getattr(data, name)()[..., :3]) for name in PHOTOS]
    for k in range(a.count):
        src = photos[k % len(photos)]
        w, h = (375, 500) if rng.random() < 0.2 else (500, 375)
        # A box of the output's aspect, 35-100% of the largest that fits, anywhere in the photo.
        fit = min(src.width / w, src.height / h)
        s = fit * np.sqrt(rng.uniform(0.35, 1.0))
        bw, bh = w * s, h * s
        x, y = rng.uniform(0, src.width - bw), rng.uniform(0, src.height - bh)
        img = src.resize((w, h), Image.BILINEAR, box=(x, y, x + bw, y + bh))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        d = os.path.join(a.out, f"class{k % 4}")
        os.makedirs(d, exist_ok=True)
        img.save(os.path.join(d, f"{k:05}.jpg"), quality=90)


if __name__ == "__main__":
    main()
