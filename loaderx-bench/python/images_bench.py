"""loaderx.vision against torchvision v2's DataLoader on the same JPEG files, through Python.

    python images_bench.py FOLDER STORE [--rounds N] [--workers N] [--batches N]

FOLDER is an image folder (one subdirectory per class) and STORE what
``loaderx convert images FOLDER STORE --encoded`` wrote from it. Each contender delivers batches
of 256 images, 224x224 normalised float32, with ``workers`` worker processes (torch) or prefetch
threads (loaderx), in a steady state as a training job sees it: every run builds its loader
(torch's workers start, or loaderx's threads), takes ``warm`` batches untimed (the start, and
the batches made ahead while it started), then times ``batches`` more, each dropped before the
next is asked for as a training step would, and drops the loader. Both read every file once
per epoch in a shuffled order. What a loader made ahead while the warm batches were taken (the
batch in the making, at most) is timed as free: a share of a batch in ``batches``, which the
default of 24 keeps to a few percent. Rounds alternate the contenders; each ratio is taken per round
and its median printed. scripts/bench-images.sh sets this up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torchvision
from torch.utils.data import DataLoader as TorchLoader, Dataset, RandomSampler
from torchvision.io import decode_jpeg
from torchvision.transforms import v2

from loaderx import vision as V
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

BATCH = 256
MEAN, STD = list(V.IMAGENET_MEAN), list(V.IMAGENET_STD)


class Files(Dataset):
    """Each file's bytes, decoded by libjpeg-turbo (torchvision's ``decode_jpeg``) and transformed."""

    def __init__(self, paths, transform):
        self.paths, self.transform = paths, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
        return self.transform(decode_jpeg(data)), i % 4


def steady(it, warm, batches):
    """Seconds to take ``batches`` batches from ``it`` after ``warm`` untimed ones, each let go at once."""
    for _ in range(warm):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return time.perf_counter() - t0


def torch_run(paths, transform, workers, warm, batches):
    files = Files(paths, transform)
    # Shuffled epochs back to back, as many as the run needs.
    sampler = RandomSampler(files, num_samples=BATCH * (warm + batches))
    loader = TorchLoader(files, batch_size=BATCH, sampler=sampler, num_workers=workers, drop_last=True)
    it = iter(loader)
    x, _ = next(it)
    assert x.shape == (BATCH, 3, 224, 224) and x.dtype == torch.float32
    del x
    secs = steady(it, warm - 1, batches)
    del it
    return secs


def loaderx_run(store, transforms, workers, warm, batches):
    images = V.ImageDataset(os.path.join(store, "images"), transforms)
    labels = DenseDataset(os.path.join(store, "labels"))
    with DataLoader({"image": images, "label": labels}, batch_size=BATCH, num_workers=workers, seed=0) as loader:
        b = next(loader)
        assert b["image"].shape == (BATCH, 3, 224, 224) and b["image"].dtype.name == "float32"
        del b
        return steady(loader, warm - 1, batches)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("store")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warm", type=int, default=6, help="batches taken untimed first (>= 1)")
    ap.add_argument("--batches", type=int, default=24, help="batches timed after them")
    a = ap.parse_args()
    paths = sorted(
        os.path.join(root, f) for root, _, files in os.walk(a.folder) for f in files if f.lower().endswith((".jpg", ".jpeg"))
    )
    assert len(paths) >= BATCH, f"{len(paths)} JPEGs, fewer than a batch of {BATCH}"
    assert a.warm >= 1 and a.batches >= 1, "--warm and --batches: 1 or more"
    tv_train = v2.Compose([
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(MEAN, STD),
    ])
    tv_eval = v2.Compose([
        v2.Resize(256, antialias=True),
        v2.CenterCrop(224),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(MEAN, STD),
    ])
    lx_train = [V.RandomResizedCrop(224), V.HorizontalFlip(), V.Normalize(MEAN, STD)]
    lx_eval = [V.Resize(256), V.CenterCrop(224), V.Normalize(MEAN, STD)]
    w = (a.workers, a.warm, a.batches)
    pairs = [
        ("train", lambda: torch_run(paths, tv_train, *w), lambda: loaderx_run(a.store, lx_train, *w)),
        ("eval", lambda: torch_run(paths, tv_eval, *w), lambda: loaderx_run(a.store, lx_eval, *w)),
    ]
    n = BATCH * a.batches
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, torchvision {torchvision.__version__}; "
          f"{len(paths)} JPEGs, {a.batches} batches of {BATCH} timed a run after {a.warm}, {a.workers} workers/threads, "
          f"{a.rounds} rounds")
    print("| transform | torchvision v2 DataLoader | loaderx.vision | loaderx / torchvision |")
    print("|---|---:|---:|---:|")
    for name, tv, lx in pairs:
        tv(), lx()  # warm-up: page cache, imports
        t_tv, t_lx, ratios = [], [], []
        for r in range(a.rounds):
            order = [(tv, t_tv), (lx, t_lx)] if r % 2 == 0 else [(lx, t_lx), (tv, t_tv)]
            for f, times in order:
                times.append(f())
            ratios.append(t_tv[-1] / t_lx[-1])
        tv_rate, lx_rate = n / statistics.median(t_tv), n / statistics.median(t_lx)
        print(f"| {name} | {tv_rate:,.0f} images/s | {lx_rate:,.0f} images/s | {statistics.median(ratios):.2f}x |")


if __name__ == "__main__":
    main()
