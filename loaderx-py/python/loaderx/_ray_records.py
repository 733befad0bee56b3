"""Arrow arrays as loaderx records: the mapping the Ray sink (``loaderx.ray``) writes through.

A column's Arrow arrays (numbers, fixed-size lists and binaries, Ray's fixed- and variable-shape
tensors, lists, binaries and strings, image structs with a ``bytes`` field) become dense items of
one shape or ragged records of rows, each with its :class:`Layout`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from ray.data.extensions import ArrowTensorType, ArrowTensorTypeV2, ArrowVariableShapedTensorType

from loaderx._common import engine_dtype, numpy_dtype


@dataclass(frozen=True)
class Layout:
    """What a column's records are: ``kind`` ("dense" or "ragged"), the engine's dtype name, and
    the item shape (dense) or row shape (ragged)."""

    kind: str
    dtype: str
    shape: tuple[int, ...]

    def __str__(self) -> str:
        what = "items" if self.kind == "dense" else "records of rows"
        return f"{self.kind} {numpy_dtype(self.dtype)} {what} of shape {self.shape}"


@dataclass
class _Records:
    """One Arrow array's records: a dense array ``(n, *shape)``, or ragged bytes and offsets."""

    layout: Layout
    dense: np.ndarray | None = None
    values: np.ndarray | None = None
    offsets: np.ndarray | None = None


def _no_nulls(arr: pa.Array, where: str) -> None:
    """Refuses nulls in ``arr`` (a column's values at any depth), naming the column."""
    if arr.null_count:
        raise ValueError(f"{where} holds {arr.null_count} nulls; loaderx records cannot hold nulls")


def _fixed(arr: pa.Array, where: str) -> tuple[np.ndarray, list[int]]:
    """A fixed-size Arrow array (numbers, fixed-size lists of them, fixed-size binary) as a
    NumPy array ``(len(arr), *shape)``, and that shape."""
    t = arr.type
    if arr.null_count:
        # Nulls inside lists (or fixed-size lists) too: Arrow would turn integers with a null
        # into float64 and the null into NaN (review Q3).
        raise ValueError(f"{where} holds {arr.null_count} nulls; loaderx records cannot hold nulls")
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return arr.to_numpy(zero_copy_only=False), []
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        data = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        return data[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width), [width]
    if pa.types.is_fixed_size_list(t):
        inner, shape = _fixed(arr.flatten(), where)
        return inner.reshape(len(arr), t.list_size, *shape), [t.list_size, *shape]
    raise TypeError(f"{where} is of Arrow type {t}, which has no loaderx layout")


def _bytes(arr: pa.Array) -> _Records:
    """Binary or string values as ``uint8`` records."""
    arr = arr.cast(pa.large_binary())
    _, offsets, data = arr.buffers()
    offs = np.frombuffer(offsets, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    values = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    return _Records(Layout("ragged", "u8", ()), values=values, offsets=offs.astype(np.uint64))


def _ragged(rows: list[np.ndarray] | np.ndarray, lengths: np.ndarray, where: str) -> _Records:
    """Records of ``lengths`` rows each, their rows back to back in ``rows`` (n_rows, *shape)."""
    rows = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("="))
    shape = tuple(int(d) for d in rows.shape[1:])
    row_bytes = int(np.prod(shape, dtype=np.int64)) * rows.dtype.itemsize
    offsets = np.zeros(len(lengths) + 1, dtype=np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    offsets *= np.uint64(row_bytes)
    layout = Layout("ragged", _dtype(rows.dtype, where), shape)
    return _Records(layout, values=rows.reshape(-1).view(np.uint8), offsets=offsets)


def _dtype(dt: np.dtype, where: str) -> str:
    try:
        return engine_dtype(dt)
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from None


def _records(arr: pa.Array, where: str) -> _Records:
    """The records of one Arrow array (a chunk of a block's column)."""
    if arr.null_count:
        raise ValueError(f"{where} holds {arr.null_count} nulls; loaderx records cannot be null")
    t = arr.type
    if isinstance(t, (ArrowTensorType, ArrowTensorTypeV2)):
        # Not Ray's to_numpy: it reads the raw buffer from the array's offset, ignoring the
        # values' null mask (review R2), the list offsets and where a sliced child starts
        # (review S1). The values as Arrow holds them, every tensor checked against the shape.
        shape = tuple(int(d) for d in t.shape)
        per = int(np.prod(shape, dtype=object))
        storage = arr.storage
        values = pc.list_flatten(storage)
        _no_nulls(values, where)
        lengths = pc.list_value_length(storage).to_numpy(zero_copy_only=False)
        if len(lengths) and (lengths != per).any():
            raise ValueError(f"{where} holds tensors whose shapes do not describe their values")
        dense = values.to_numpy(zero_copy_only=False).reshape(len(arr), *shape)
    elif isinstance(t, ArrowVariableShapedTensorType):
        # Its storage: each tensor's elements (a list) and its shape (a list of ndim ints).
        if t.ndim == 0:
            raise ValueError(f"{where} holds 0-d tensors; a ragged record needs rows along axis 0")
        storage = arr.storage
        shapes = pc.list_flatten(storage.field("shape")).to_numpy(zero_copy_only=False).reshape(len(arr), t.ndim)
        row_shapes = np.unique(shapes[:, 1:], axis=0)
        if len(row_shapes) > 1:
            raise ValueError(f"{where} holds tensors of several row shapes: {[tuple(r) for r in row_shapes.tolist()]}")
        data = storage.field("data")
        _no_nulls(data, where)
        _no_nulls(pc.list_flatten(data), where)
        # The shapes must describe the data, tensor by tensor (as Python ints: no overflow), or
        # records would be cut elsewhere than the tensors lie.
        sizes = [int(np.prod([int(d) for d in sh], dtype=object)) for sh in shapes.tolist()]
        lengths = pc.list_value_length(data).to_numpy(zero_copy_only=False).tolist()
        if any(n < 0 for n in sizes) or sizes != lengths:
            raise ValueError(f"{where} holds tensors whose shapes do not describe their values")
        values = pc.list_flatten(data).to_numpy(zero_copy_only=False)
        rows = values.reshape(-1, *(int(d) for d in row_shapes[0]))
        return _ragged(rows, shapes[:, 0].astype(np.uint64), where)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        rows, _ = _fixed(pc.list_flatten(arr), f"{where} (its list values)")
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False).astype(np.uint64)
        return _ragged(rows, lengths, where)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return _bytes(arr)
    elif pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return _bytes(arr)
    elif pa.types.is_struct(t) and t.get_field_index("bytes") >= 0:
        return _records(arr.field("bytes"), f"{where} (its bytes field)")
    else:
        dense, _ = _fixed(arr, where)
    dense = np.ascontiguousarray(dense, dtype=dense.dtype.newbyteorder("="))
    shape = tuple(int(d) for d in dense.shape[1:])
    if len(dense) and 0 in shape:
        raise ValueError(f"{where} holds items of shape {shape}, which hold no bytes")
    return _Records(Layout("dense", _dtype(dense.dtype, where), shape), dense=dense)


def _as_ragged(r: _Records) -> _Records:
    """Dense items of shape ``(L, *row_shape)`` as ragged records of ``L`` rows each: Ray stores a
    batch whose tensors all have one shape as a fixed-shape tensor, the next as a variable one."""
    if r.dense is None or not r.layout.shape:
        return r
    lengths = np.full(len(r.dense), r.layout.shape[0], dtype=np.uint64)
    return _ragged(r.dense.reshape(-1, *r.layout.shape[1:]), lengths, "")


def _fits(r: _Records, layout: Layout) -> _Records | None:
    """``r`` as records of ``layout``, or None when they are not."""
    if r.layout == layout:
        return r
    if layout.kind == "ragged" and r.layout.kind == "dense":
        r = _as_ragged(r)
        return r if r.layout == layout else None
    return None


def _advice(a: Layout, b: Layout) -> str:
    """What to do when ``a`` and ``b`` could be one ragged column's blocks."""
    could = a.dtype == b.dtype and (
        {a.kind, b.kind} == {"dense", "ragged"}
        or (a.kind == b.kind == "dense" and a.shape[1:] == b.shape[1:] and a.shape and b.shape)
    )
    if not could:
        return ""
    return (
        " (Ray stores a batch whose tensors all have one shape as a fixed-shape tensor: name a ragged"
        " column in write_loaderx's `ragged` to write it ragged from its first block)"
    )
