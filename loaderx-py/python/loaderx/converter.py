"""NumPy arrays into datasets.

``from_numpy`` writes a dense dataset, one record per slice along axis 0; ``from_iterator`` a
ragged one, one record per array. Both stream: the input is read in bounded blocks (an
mmapped array is never materialised), written into ``PATH.partial`` and published at ``PATH``
only once complete, so a failed conversion leaves whatever was at ``PATH`` as it was.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np

from loaderx import _native
from loaderx._common import check_bool, check_int, check_str, engine_dtype, fs_path, opened_path

__all__ = ["from_numpy", "from_iterator"]

# Input bytes handed to the engine per call: large enough that a call's cost vanishes, small
# enough that memory stays flat whatever the array's size.
_BLOCK_BYTES = 32 << 20


def _check_dir(dir: Any, what: str) -> None:
    # A path first: the arguments given the other way round met a refusal of the array as one
    # (look 103, L103-7).
    if not isinstance(dir, (str, bytes, os.PathLike)):
        raise TypeError(f"{what}(dir, ...) takes the dataset's path first, not {type(dir).__name__}")
    if not os.fspath(dir):
        # Named before anything is written (look 137, L137-2: the write ran, then failed renaming
        # ".partial").
        raise ValueError(f"{what}(dir, ...): the dataset's path is empty")


def _check_dict_size(dict_size: Any) -> None:
    # An int, named (the engine says which sizes and codecs take one).
    if dict_size is not None:
        check_int("dict_size", dict_size, 0, 2**64)


def from_numpy(
    dir: str | os.PathLike[str],
    array: Any,
    codec: str = "zstd",
    dict_size: int | None = None,
    *,
    format: str = "v2",
    overwrite: bool = True,
) -> int:
    """Writes ``array`` as a dense dataset at ``dir``: one record per slice along axis 0 (a 1-D
    array becomes a dataset of scalars). Returns the number of records.

    ``codec`` is ``"raw"``, ``"zstd"`` (plain, level 3), ``"zstd_dict"`` (a dictionary trained
    on the data first, stored as ``dict.zr``; ``dict_size`` caps it) or, in ``format="v2"``
    stores, ``"lz4"``. ``overwrite=False`` refuses an existing ``dir``
    (``FileExistsError``).
    """
    _check_dir(dir, "from_numpy")
    _check_dict_size(dict_size)
    arr = array if isinstance(array, np.ndarray) else np.asarray(array)
    if arr.ndim == 0:
        raise ValueError("from_numpy needs an array of at least one dimension (its records along axis 0)")
    dtype = engine_dtype(arr.dtype)
    native_dtype = arr.dtype.newbyteorder("=")
    item_shape = tuple(int(d) for d in arr.shape[1:])
    if arr.shape[0] and 0 in item_shape:
        raise ValueError(f"records of shape {item_shape} hold no bytes: a dense dataset cannot store them")
    writer = _native.Writer(
        fs_path(dir), "dense", dtype, list(item_shape), check_str("codec", codec), check_str("format", format), dict_size,
        check_bool("overwrite", overwrite),
    )
    try:
        item_bytes = max(1, int(np.prod(item_shape, dtype=np.int64)) * arr.dtype.itemsize)
        rows = max(1, _BLOCK_BYTES // item_bytes)
        for start in range(0, arr.shape[0], rows):
            block = np.ascontiguousarray(arr[start : start + rows], dtype=native_dtype)
            writer.append_items(block.reshape(-1).view(np.uint8))
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def from_iterator(
    dir: str | os.PathLike[str],
    seqs: Iterable[Any],
    codec: str = "zstd",
    dict_size: int | None = None,
    *,
    format: str = "v2",
    overwrite: bool = True,
) -> int:
    """Writes each array of ``seqs`` as one record of a ragged dataset at ``dir``: the first
    fixes the dtype and the row shape (``shape[1:]``), every other must match it. Returns the
    number of records."""
    _check_dir(dir, "from_iterator")
    _check_dict_size(dict_size)
    # The output fixed here, before the first item is drawn: a generator changing the working
    # directory before its first yield put the dataset elsewhere (look 176, L176-3).
    out = opened_path(dir)
    it = iter(seqs)
    try:
        first = np.asarray(next(it))
    except StopIteration:
        raise ValueError("from_iterator needs at least one sequence to learn the dtype") from None
    if first.ndim == 0:
        raise ValueError("each sequence must have at least one dimension (its rows)")
    dtype = engine_dtype(first.dtype)
    native_dtype = first.dtype.newbyteorder("=")
    row_shape = first.shape[1:]
    writer = _native.Writer(
        out, "ragged", dtype, list(row_shape), check_str("codec", codec), check_str("format", format), dict_size,
        check_bool("overwrite", overwrite),
    )
    try:
        block: list[np.ndarray] = []
        block_bytes = 0
        for i, seq in enumerate(_chain(first, it)):
            a = np.asarray(seq)
            if a.ndim == 0 or a.shape[1:] != row_shape or engine_dtype(a.dtype) != dtype:
                raise ValueError(
                    f"sequence {i} is {a.dtype} {a.shape}; the first was {first.dtype} with rows of shape {row_shape}"
                )
            # A copy of its own: a generator that refills and yields one buffer would otherwise
            # leave every record of the block holding its last contents (review R3).
            a = np.array(a, dtype=native_dtype, order="C", copy=True).reshape(-1).view(np.uint8)
            block.append(a)
            block_bytes += a.size
            if block_bytes >= _BLOCK_BYTES or len(block) >= 65536:
                writer.append_records(block)
                block, block_bytes = [], 0
        if block:
            writer.append_records(block)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def _chain(first: Any, rest: Any) -> Iterable[Any]:
    yield first
    yield from rest
