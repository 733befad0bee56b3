"""Encoded images decoded and augmented on the loader's threads, without the GIL.

An image dataset is what ``loaderx convert images DIR OUT --encoded`` writes (``OUT/images``:
one JPEG, PNG or WebP file a record). ``ImageDataset(path, transforms)`` is a stream of it for
``DataLoader``: each batch's images are decoded, cut, resized, flipped and normalised in Rust on
the prefetch threads, every random choice a pure function of the loader's seed, the step and
the sample's position in the global batch (the same bytes on any number of threads, after a
resume, on any world size)::

    from loaderx import vision as V
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import DenseDataset

    train = V.ImageDataset("stores/inet/images", [V.RandomResizedCrop(224), V.HorizontalFlip(),
                                                   V.Normalize(V.IMAGENET_MEAN, V.IMAGENET_STD)])
    loader = DataLoader({"image": train, "label": DenseDataset("stores/inet/labels")},
                        batch_size=256, num_workers=2, seed=0)
    batch = next(loader)   # batch["image"]: float32 (256, 3, 224, 224)

The transforms are torchvision's, in this order: one crop (``RandomResizedCrop(size)``, or
``Resize(n)`` then ``CenterCrop(size)``), then ``HorizontalFlip(p)`` and ``ColorJitter(brightness,
contrast, saturation)`` (either order: they commute), then ``Normalize(mean, std)``; without
``Normalize`` a batch is ``uint8`` ``(B, H, W, 3)``. The labels ``convert images`` writes are
``uint32`` class indices: torch's losses take ``int64``, so cast them
(``torch.from_numpy(batch["label"]).long()``).

A JPEG whose crop is at least twice the output on both sides is decoded at 1/2, 1/4 or 1/8 in
the DCT (libjpeg-turbo's scaled decode) before the resize, as FFCV and DALI do for speed: its
pixels then differ from torchvision's full decode and antialiased resize by a few levels on
average and more at sharp edges. Smaller crops, PNG and WebP are decoded whole.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _native
from ._common import check_int, check_number, fs_path, numpy_dtype, opened_path
from .dataset import DenseDataset, _take_views

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


_MAX_SIDE = 16384


def _side(transform: str, value: Any, name: str = "size") -> None:
    """``ValueError``/``TypeError`` naming the transform and argument unless ``value`` is an
    output side (an int in 1..16384): checked when the transform is made, not at a first batch."""
    if isinstance(value, (tuple, list)):
        raise TypeError(f"{transform}({name}={value!r}): {name} is one int, a square output; (height, width) sizes are not supported")
    check_int(f"{transform}({name}={value!r}): {name}", value, 1, _MAX_SIDE + 1)


# The largest float32: the engine computes in float32, so a parameter is checked as it will be
# there (look 94, L2: values fine in float64 made inf and NaN channels).
_F32_MAX = float(np.finfo(np.float32).max)


def _numbers(transform: str, name: str, value: Any, n: int) -> tuple[float, ...]:
    """``value`` as ``n`` floats, read once (a generator would be spent by a second reading,
    look 94, L3), or ``TypeError``/``ValueError`` naming the transform and argument."""
    try:
        numbers = tuple(check_number(name, v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{transform}({name}={value!r}): {n} numbers") from None
    if len(numbers) != n:
        raise ValueError(f"{transform}({name}={numbers!r}): {n} numbers, not {len(numbers)}")
    return numbers


def _range(transform: str, name: str, value: Any, upper: float | None) -> tuple[float, float]:
    lo, hi = _numbers(transform, name, value, 2)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi and (upper is None or hi <= upper)):
        bound = f" <= {upper:g}" if upper is not None else ""
        raise ValueError(f"{transform}({name}={(lo, hi)!r}): 0 < low <= high{bound}")
    return lo, hi


@dataclass(frozen=True)
class RandomResizedCrop:
    """A box of a random fraction ``scale`` of the area and a random aspect ratio ``ratio``
    (log-uniform), resized to ``size`` x ``size`` (torchvision's, antialiased bilinear). A
    transform list starts with it (training) or with ``Resize`` then ``CenterCrop``
    (evaluation)."""

    size: int
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)

    def __post_init__(self) -> None:
        _side("RandomResizedCrop", self.size)
        object.__setattr__(self, "scale", _range("RandomResizedCrop", "scale", self.scale, 1.0))
        object.__setattr__(self, "ratio", _range("RandomResizedCrop", "ratio", self.ratio, None))


@dataclass(frozen=True)
class Resize:
    """The shorter side resized to ``size``; always followed by ``CenterCrop`` (the pair is the
    evaluation transform: ``Resize`` alone is not supported)."""

    size: int

    def __post_init__(self) -> None:
        _side("Resize", self.size)


@dataclass(frozen=True)
class CenterCrop:
    """The centre ``size`` x ``size`` (after ``Resize``; a centre larger than the resized image
    is the largest square centre of the image, scaled to ``size``: never stretched, not
    padded)."""

    size: int

    def __post_init__(self) -> None:
        _side("CenterCrop", self.size)


@dataclass(frozen=True)
class HorizontalFlip:
    """A left-right flip with probability ``p``."""

    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= check_number(f"HorizontalFlip(p={self.p!r}): p", self.p) <= 1.0:
            raise ValueError(f"HorizontalFlip(p={self.p!r}): a probability in [0, 1]")


@dataclass(frozen=True)
class Normalize:
    """``(pixel / 255 - mean) / std`` per channel, as ``float32`` channels-first."""

    mean: Sequence[float]
    std: Sequence[float]

    def __post_init__(self) -> None:
        mean = _numbers("Normalize", "mean", self.mean, 3)
        std = _numbers("Normalize", "std", self.std, 3)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "std", std)
        # As float32, where the engine computes: a mean past its range, or a deviation whose
        # reciprocal (times 255) is past it or rounds to 0, would make a channel inf or NaN.
        fits = all(abs(m) <= _F32_MAX for m in mean) and all(
            s != 0 and abs(s) >= 1 / _F32_MAX and abs(1 / (255 * s)) <= _F32_MAX and float(np.float32(s)) != 0
            for s in std
        )
        if fits and all(math.isfinite(v) for v in mean + std):
            # What the engine computes, v * scale + offset in float32, finite for every pixel
            # value (look 180, L180-2: a mean of 4 over a deviation of 1e-38 made a channel -inf).
            with np.errstate(all="ignore"):
                m, s = np.asarray(mean, dtype=np.float32), np.asarray(std, dtype=np.float32)
                scale, offset = np.float32(1) / (np.float32(255) * s), -m / s
                fits = bool(np.isfinite(np.concatenate([scale, offset, np.float32(255) * scale + offset])).all())
        if not all(math.isfinite(v) for v in mean + std) or not fits:
            raise ValueError(
                f"Normalize(mean={mean}, std={std}): finite values within float32, no standard deviation of 0 "
                "or so small that its reciprocal, or (pixel / 255 - mean) / std, is past float32"
            )


@dataclass(frozen=True)
class ColorJitter:
    """torchvision's: each factor drawn from ``[max(0, 1 - x), 1 + x]``, brightness, contrast and
    saturation applied in a random order (in ``float32`` on the resized pixels, clamped after
    each). A ``hue`` other than 0 raises ``NotImplementedError``."""

    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    hue: float = 0.0

    def __post_init__(self) -> None:
        for name in ("brightness", "contrast", "saturation", "hue"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"ColorJitter({name}={value!r}): a number")
        if self.hue != 0:
            raise NotImplementedError("ColorJitter(hue=...): hue is not supported yet (brightness, contrast and saturation are)")
        for name in ("brightness", "contrast", "saturation"):
            v = float(getattr(self, name))
            # A factor up to 1 + v scales 0-255 values in float32: past its range they are inf,
            # and then NaN (look 94, L2).
            if not (math.isfinite(v) and v >= 0 and 255 * (1 + v) <= _F32_MAX):
                raise ValueError(f"ColorJitter({name}={v!r}): a finite amount >= 0 (255 * (1 + it) within float32)")


def _skip_bad(value: Any) -> bool:
    # A bool, not anything truthy: "no" skipped bad images (look 105, L105-5).
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"skip_bad must be True or False, not {value!r}")
    return bool(value)


def _transform_list(transforms: Any) -> tuple:
    """``transforms`` as a tuple (a generator would be spent by the checks, not pickled); one
    transform where a list is due is a ``TypeError`` naming the argument (look 133, L133-5)."""
    if isinstance(transforms, (RandomResizedCrop, Resize, CenterCrop, HorizontalFlip, Normalize, ColorJitter)):
        raise TypeError(f"transforms must be a list of transforms, not one {type(transforms).__name__}")
    try:
        return tuple(transforms)
    except TypeError:
        raise TypeError(f"transforms must be a list of transforms, not {type(transforms).__name__}") from None


def _pipeline(transforms: Sequence[Any]) -> tuple[tuple, float, tuple | None, tuple]:
    """The engine's (crop, flip, normalize, jitter) of a transform list, or ``ValueError`` naming
    what is out of order or missing."""
    steps = list(transforms)
    crop = None
    if steps and isinstance(steps[0], RandomResizedCrop):
        c = steps.pop(0)
        crop = ("random_resized", int(c.size), float(c.scale[0]), float(c.scale[1]), float(c.ratio[0]), float(c.ratio[1]))
    elif len(steps) >= 2 and isinstance(steps[0], Resize) and isinstance(steps[1], CenterCrop):
        r, c = steps.pop(0), steps.pop(0)
        crop = ("center", int(c.size), float(r.size), 0.0, 0.0, 0.0)
    else:
        raise ValueError("an image transform starts with RandomResizedCrop(size), or Resize(n) then CenterCrop(size)")
    flip, jitter = None, None
    normalize = None
    for step in steps:
        if isinstance(step, ColorJitter) and jitter is None and normalize is None:
            if step.hue != 0:
                raise NotImplementedError("ColorJitter's hue is not supported yet (brightness, contrast and saturation are)")
            jitter = (float(step.brightness), float(step.contrast), float(step.saturation))
        elif isinstance(step, HorizontalFlip) and flip is None and normalize is None:
            flip = float(step.p)
        elif isinstance(step, Normalize) and normalize is None:
            mean, std = tuple(map(float, step.mean)), tuple(map(float, step.std))
            if len(mean) != 3 or len(std) != 3:
                raise ValueError(f"Normalize takes 3 means and 3 standard deviations, got {mean} and {std}")
            normalize = (mean, std)
        else:
            raise ValueError(
                f"{step!r} is out of place: after the crop come HorizontalFlip and ColorJitter, then Normalize, each once"
            )
    return crop, flip or 0.0, normalize, jitter or (0.0, 0.0, 0.0)


class ImageDataset:
    """The encoded image dataset at ``path`` (kind ``image``), as a ``DataLoader`` stream whose
    batches hold each image transformed by ``transforms`` (see the module docs). With
    ``skip_bad=True`` an image that does not decode is left out instead of failing its step: its
    item is zeros and the batch holds ``{name}_ok`` (``uint8``, ``(B,)``, 0 for each one left
    out), to mask and count. It is a stream, not a map: images are read through ``DataLoader`` or
    ``IterableLoader`` (each random choice belongs to a step), not indexed."""

    __slots__ = ("_native", "_recipe", "dtype", "item_shape")

    def __init__(self, path: str | os.PathLike[str], transforms: Sequence[Any], skip_bad: bool = False) -> None:
        path = opened_path(path)
        transforms = _transform_list(transforms)
        if not os.path.exists(path):
            # The path's error first: a transform list's would hide it (issue 42's trial); a
            # missing path is a FileNotFoundError, as for every dataset (look 119, L119-4).
            raise FileNotFoundError(errno.ENOENT, "no loaderx dataset there: it does not exist", path)
        crop, flip, normalize, jitter = _pipeline(transforms)
        self._native = _native.Images(path, crop, flip, normalize, jitter, _skip_bad(skip_bad))
        self._recipe = (path, transforms, _skip_bad(skip_bad))
        self.dtype: np.dtype = numpy_dtype(self._native.dtype)
        self.item_shape: tuple[int, ...] = tuple(self._native.item_shape)

    def __reduce__(self) -> tuple:
        return (ImageDataset, self._recipe)

    @property
    def path(self) -> str:
        """The dataset's directory."""
        return str(self._native.path)

    def __len__(self) -> int:
        return len(self._native)

    def __repr__(self) -> str:
        return f"ImageDataset({self.path!r}, len={len(self)}, dtype={self.dtype}, item_shape={self.item_shape})"


class ImageFolder:
    """A folder of images in torchvision's ``ImageFolder`` layout (``root/<class>/<image>``), read
    into memory with no conversion, for a first run: ``images``, a stream of the images
    transformed by ``transforms`` (as :class:`ImageDataset`'s); ``labels``, each image's class
    index (``uint32``), a :class:`~loaderx.dataset.DenseDataset`; ``classes``, the class names
    (the subdirectories, sorted) by index. Every file's bytes are read here and nothing is
    decoded (an image that does not decode fails the step that draws it, or with
    ``skip_bad=True`` is left out as zeros, marked in ``{name}_ok``). A folder of more than 4 GiB
    of files is refused: convert it (``loaderx convert images ROOT OUT --encoded``) and read the
    store, which also reads it once instead of at every run::

        folder = V.ImageFolder("data/train", [V.RandomResizedCrop(224), V.HorizontalFlip()])
        loader = DataLoader({"image": folder.images, "label": folder.labels}, batch_size=64)

    The classes are the root's directories (links to directories inside it count), sorted; a
    class's images every file under its directory, subdirectories and links inside the root
    followed, as torchvision lists them (``files``: each image's path, in order); names starting
    with ``.`` are left out, and a link out of the root is an error naming it. A pickle of either
    dataset (a worker process's) lists the folder again, and refuses a listing that changed
    since (other classes, paths or file sizes: a worker would pair images with other labels);
    an image rewritten in place at the same size is read as it now is, with its own label."""

    __slots__ = ("images", "labels", "classes", "files", "root", "_digest")

    def __init__(
        self, root: str | os.PathLike[str], transforms: Sequence[Any], skip_bad: bool = False, *, _digest: str | None = None
    ) -> None:
        root = opened_path(root)
        transforms = _transform_list(transforms)
        if not os.path.exists(root):
            # The path's error first, as ImageDataset's (look 133, L133-5).
            raise FileNotFoundError(errno.ENOENT, "no image folder there: it does not exist", root)
        crop, flip, normalize, jitter = _pipeline(transforms)
        ragged, labels, classes, files = _native.image_folder(root)
        self.files: list[str] = [fs_path(f) for f in files]
        self.classes: list[str] = list(classes)
        self._digest = _listing_digest(self.classes, self.files, ragged)
        if _digest is not None and _digest != self._digest:
            raise RuntimeError(
                f"{root}: the image folder changed since this dataset was pickled ({len(self.files)} "
                "files now, or other files or sizes): a worker would pair images with other labels"
            )
        recipe = (root, transforms, _skip_bad(skip_bad), self._digest)
        images = _FolderImages.__new__(_FolderImages)
        images._native = _native.Images.from_ragged(ragged, crop, flip, normalize, jitter, _skip_bad(skip_bad))
        images._recipe = recipe
        images.dtype = numpy_dtype(images._native.dtype)
        images.item_shape = tuple(images._native.item_shape)
        self.images: ImageDataset = images
        self.labels: DenseDataset = _FolderLabels._of(labels, recipe)
        self.root = root

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return f"ImageFolder({self.root!r}, len={len(self)}, classes={len(self.classes)})"


def _listing_digest(classes: list[str], files: list[str], ragged: Any) -> str:
    """What a pickle checks the folder against: its classes (the labels' numbers: review 49),
    its files, in order, and their sizes."""
    sizes = ragged.record_rows(np.arange(len(files), dtype=np.uint32))
    h = hashlib.sha256("\0".join(classes).encode("utf-8") + b"\1")
    h.update("\0".join(files).encode("utf-8", "surrogateescape"))
    h.update(np.ascontiguousarray(sizes, dtype="<u8").tobytes())
    return h.hexdigest()


def _folder(recipe: tuple) -> "ImageFolder":
    """The folder of a pickled part, read again and checked against the pickle's listing."""
    root, transforms, skip_bad, digest = recipe
    return ImageFolder(root, transforms, skip_bad, _digest=digest)


def _folder_part(recipe: tuple, part: str) -> Any:
    """A pickled part of an :class:`ImageFolder`: the folder read again."""
    return getattr(_folder(recipe), part)


def _folder_labels(recipe: tuple, views: tuple) -> Any:
    """Pickled ``ImageFolder.labels`` (or a view of them): the folder read again, the views
    taken again in order."""
    return _take_views(_folder(recipe).labels, views)


class _FolderImages(ImageDataset):
    """``ImageFolder.images``: its pickle reads the folder again."""

    __slots__ = ()

    def __reduce__(self) -> tuple:
        return (_folder_part, (self._recipe, "images"))

    @property
    def path(self) -> str:
        return self._recipe[0]

    def __repr__(self) -> str:
        return f"ImageFolder({self.path!r}).images(len={len(self)}, dtype={self.dtype}, item_shape={self.item_shape})"


class _FolderLabels(DenseDataset):
    """``ImageFolder.labels``: its pickle reads the folder again."""

    __slots__ = ("_folder",)

    @classmethod
    def _of(cls, native: Any, recipe: tuple) -> "_FolderLabels":
        labels = cls.__new__(cls)
        labels._adopt(native, (recipe[0], None, ()))
        labels._folder = recipe
        return labels

    def _wrap(self, native: Any, view: tuple) -> Any:
        ds = super()._wrap(native, view)
        ds._folder = self._folder
        return ds

    def __reduce__(self) -> tuple:
        return (_folder_labels, (self._folder, self._recipe[2]))

    @property
    def path(self) -> str:
        return self._recipe[0]

    def __repr__(self) -> str:
        return f"ImageFolder({self.path!r}).labels(len={self._len}, dtype={self.dtype})"
