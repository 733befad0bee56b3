"""Dense and ragged datasets: typed views over Zrecord stores.

A :class:`DenseDataset` holds fixed-shape records, its batch shape straight from the schema; a
:class:`RaggedDataset` holds records of any number of rows, read as a list of arrays. Both index
like NumPy arrays along axis 0 (ints, negative ints, slices, integer arrays, boolean masks), and
each read is one gather in the engine with the GIL released.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from loaderx import _native
from loaderx._common import check_int, engine_dtype, indices, numpy_dtype, opened_path, pad_float, record_key

__all__ = ["DenseDataset", "RaggedDataset", "pad"]


class _Dataset:
    """What both kinds share: the native source, its dtype and length, views and splits."""

    __slots__ = ("_native", "dtype", "_len", "_recipe")
    _NATIVE: Any = None

    def __init__(self, path: str | os.PathLike[str], remote: dict[str, Any] | None = None) -> None:
        path = opened_path(path)
        self._adopt(self._NATIVE(path, remote), (path, None if remote is None else dict(remote), ()))

    def _adopt(self, native: Any, recipe: tuple) -> None:
        self._native = native
        self.dtype: np.dtype = numpy_dtype(native.dtype)
        self._len = len(native)
        # (path, remote options, views taken since): what a pickle carries, by path.
        self._recipe = recipe

    def _wrap(self, native: Any, view: tuple) -> Any:
        ds = type(self).__new__(type(self))
        path, remote, views = self._recipe
        ds._adopt(native, (path, remote, views + (view,)))
        return ds

    def __reduce__(self) -> tuple:
        # By path (and remote options and views), never by the engine's handles: a worker
        # process (PyTorch's, multiprocessing's spawn) opens the dataset itself.
        return (_reopen, (type(self), *self._recipe))

    @property
    def path(self) -> str:
        """The dataset's directory (or URL)."""
        return str(self._native.path)

    def __len__(self) -> int:
        return self._len

    def select(self, indices_: Any) -> Any:
        """The records at ``indices_`` as a dataset of their own (nothing is copied)."""
        idx, _ = indices(indices_, self._len)
        idx = np.array(idx, dtype=np.uint32)  # kept for a pickle: a copy the caller cannot change
        return self._wrap(self._native.select(idx), ("select", idx))

    def split(self, fraction: float, seed: int = 0) -> tuple[Any, Any]:
        """``(first, rest)``: ``first`` holds ``len * fraction`` records, rounded half away from
        zero (19 of 37 at 0.5, where Python's ``round`` gives 18), chosen by ``seed``; ``rest``
        the others, each in record order (a train/validation split; nothing is copied)."""
        if isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, (int, float, np.integer, np.floating)):
            raise TypeError(f"fraction must be a number in [0, 1], not {type(fraction).__name__}")
        a, b = self._native.split(float(fraction), check_int("seed", seed, 0, 2**64))
        # The length split over, for a pickle: a store appended to since is split over the same
        # records again, never its new length (look 109, L109-1: the validation records moved).
        n = self._len
        return (
            self._wrap(a, ("split", float(fraction), seed, 0, n)),
            self._wrap(b, ("split", float(fraction), seed, 1, n)),
        )


class DenseDataset(_Dataset):
    """The dense dataset at ``path`` (a directory, or an ``s3://`` URL in a build with remote
    stores, reached as the AWS environment variables and the ``remote`` dict say: ``endpoint``,
    ``region``, ``access_key_id``/``secret_access_key``, ``anonymous``, ``allow_http``,
    ``concurrency``, ``retries``, ``timeout``, ``memory_limit``, ``cache_dir``/``cache_bytes``):
    ``ds[[0, 5, 2]]`` is an array of shape ``(3, *item_shape)``.

    A local store is read beside its writer's appends; its ``delete``, ``compact`` and
    migrations take it alone: opening it while one runs is ``LockedError`` at once, not a wait
    (a worker that opens it then retries, or opens it before), and a dataset open keeps them out
    (``LockedError`` to the writer) while it lives. ``RaggedDataset`` alike."""

    __slots__ = ("item_shape",)
    _NATIVE = _native.Dense

    def _adopt(self, native: Any, recipe: tuple) -> None:
        super()._adopt(native, recipe)
        self.item_shape: tuple[int, ...] = tuple(native.item_shape)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(len(self), *item_shape)``: the shape of the array ``self[:]`` would be."""
        return (self._len, *self.item_shape)

    def __repr__(self) -> str:
        return f"DenseDataset({self.path!r}, len={self._len}, dtype={self.dtype}, item_shape={self.item_shape})"

    def __getitem__(self, key: Any) -> np.ndarray:
        idx, shape = indices(record_key(key), self._len)
        out = np.empty((idx.size, *self.item_shape), dtype=self.dtype)
        self._native.gather_into(idx, out.reshape(-1).view(np.uint8))
        if shape is None:
            return out[0]
        return out.reshape(shape + self.item_shape) if len(shape) != 1 else out

    def gather(self, indices_: Any, out: np.ndarray | None = None) -> np.ndarray:
        """The records at ``indices_`` as one array, written into ``out`` when given (a
        writable, C-contiguous array of shape ``(len(indices_), *item_shape)`` and this
        dataset's dtype), else into a new one."""
        idx, _ = indices(indices_, self._len)
        if out is None:
            out = np.empty((idx.size, *self.item_shape), dtype=self.dtype)
        else:
            _check_out(out, (idx.size, *self.item_shape), self.dtype)
            if np.may_share_memory(idx, out):
                raise ValueError("out overlaps the indices: gather into memory of its own")
        self._native.gather_into(idx, out.reshape(-1).view(np.uint8))
        return out


def _nested(records: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """``records`` as nested lists of ``shape`` (an axis of 0 included: look 107, L107-1)."""
    if len(shape) == 1:
        return list(records)
    step = int(np.prod(shape[1:], dtype=np.int64))
    return [_nested(records[k * step : (k + 1) * step], shape[1:]) for k in range(shape[0])]


class RaggedDataset(_Dataset):
    """The ragged dataset at ``path``: ``rs[[0, 2, 4]]`` is a list of arrays, one per record,
    each of shape ``(rows, *row_shape)``; all of them are views of one buffer gathered at once."""

    __slots__ = ("row_shape",)
    _NATIVE = _native.Ragged

    def _adopt(self, native: Any, recipe: tuple) -> None:
        super()._adopt(native, recipe)
        self.row_shape: tuple[int, ...] = tuple(native.row_shape)

    @property
    def shape(self) -> tuple[int | None, ...]:
        """``(len(self), None, *row_shape)``: records of any number of rows (``None``), each row of
        ``row_shape``."""
        return (self._len, None, *self.row_shape)

    def __repr__(self) -> str:
        return f"RaggedDataset({self.path!r}, len={self._len}, dtype={self.dtype}, row_shape={self.row_shape})"

    def __getitem__(self, key: Any) -> np.ndarray | list[np.ndarray]:
        idx, shape = indices(record_key(key), self._len)
        records = self.gather(idx)
        # The key's shape, as NumPy gives an object array's: a record for a 0-d key, nested
        # lists for a key of several axes (look 103, L103-2: a list of one, or flat).
        if shape is None or shape == ():
            return records[0]
        return _nested(records, shape)

    def gather(self, indices_: Any) -> list[np.ndarray]:
        """The records at ``indices_``, in one gather."""
        idx, _ = indices(indices_, self._len)
        values, offsets = self._native.gather(idx)
        if values.dtype != self.dtype:
            values = values.view(self.dtype)
        values = values.reshape((-1, *self.row_shape))
        bounds = offsets.tolist()
        return [values[a:b] for a, b in zip(bounds, bounds[1:])]

    def lengths(self, indices_: Any) -> np.ndarray:
        """Rows of each record at ``indices_``, from the index alone (nothing is read)."""
        idx, _ = indices(indices_, self._len)
        return self._native.record_rows(idx)


def _reopen(cls: type, path: str, remote: dict[str, Any] | None, views: tuple) -> Any:
    """A pickled dataset: opened at ``path`` again, its views taken again in order."""
    return _take_views(cls(path, remote), views)


def _take_views(ds: Any, views: tuple) -> Any:
    """``ds`` with ``views`` (a pickle's record of ``select`` and ``split``) taken in order."""
    for view in views:
        if view[0] == "select":
            ds = ds.select(view[1])
        else:
            _, fraction, seed, part, *over = view
            if over and len(ds) != over[0]:
                if len(ds) < over[0]:
                    raise ValueError(
                        f"{ds.path} holds {len(ds)} records, fewer than the {over[0]} it was split over: records "
                        "were deleted since, and the split cannot be taken again"
                    )
                # Appended to since: the split is of the records it was taken over.
                ds = ds.select(np.arange(over[0], dtype=np.uint32))
            ds = ds.split(fraction, seed)[part]
    return ds


def pad(records: Sequence[np.ndarray], value: Any = 0, length: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(padded, lengths)``: the records stacked into one array of shape ``(B, L, *row_shape)``,
    ``L`` the longest record (or ``length``, records longer than it cut), filled with
    ``value`` past each record's end; ``lengths[i]`` is record ``i``'s row count (before any cut:
    the loader's ``name_lengths`` under ``pad_truncate=True`` count the rows kept, as its mask
    does). The padding is the engine's (the loader's ``pad=``): records of the dtypes a dataset
    holds.
    """
    if len(records) == 0:
        raise ValueError("pad needs at least one record")
    arrays = [np.asarray(r) for r in records]
    first = arrays[0]
    if first.ndim == 0:
        raise ValueError("records must have at least one dimension (their rows)")
    row_shape = first.shape[1:]
    name = engine_dtype(first.dtype)
    dtype = first.dtype.newbyteorder("=")
    for i, r in enumerate(arrays):
        if r.ndim == 0 or r.shape[1:] != row_shape:
            raise ValueError(f"record {i} has rows of shape {r.shape[1:]}; record 0's are {row_shape}")
        # Never cast silently (int64 -1 would become uint8 255): one dtype, in either byte order.
        if r.dtype.newbyteorder("=") != dtype:
            raise ValueError(f"record {i} is {r.dtype}; record 0 is {first.dtype}: pad takes records of one dtype")
    lengths = np.fromiter((len(r) for r in arrays), dtype=np.int64, count=len(arrays))
    if length is not None:
        check_int("length", length, 0, 2**63)
    offsets = np.zeros(len(arrays) + 1, dtype=np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.concatenate([r.astype(dtype, copy=False).reshape(-1) for r in arrays])
    padded = _native.pad_records(
        np.ascontiguousarray(values).view(np.uint8), offsets.tolist(), name, list(row_shape), pad_float(value), length
    )
    if padded.dtype != numpy_dtype(name):
        padded = padded.view(numpy_dtype(name))
    return padded, lengths


def _check_out(out: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray) or isinstance(out, np.matrix):
        # A matrix is an ndarray that stays 2-D when flattened (look 92, F3).
        raise TypeError(f"out must be a numpy.ndarray, not {type(out).__module__}.{type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}; the dataset's is {dtype}")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}; the gather needs {shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be writable and C-contiguous")
