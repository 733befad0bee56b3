"""Arrow arrays as loaderx records: the mapping the Ray sink (``loaderx.ray``) writes through.

A column's Arrow arrays (numbers, fixed-size lists and binaries, Ray's fixed- and variable-shape
tensors, lists, binaries and strings, image structs with a ``bytes`` field) become dense items of
one shape or ragged records of rows, each with its :class:`Layout`: Ray's tensor types are turned
into the standard Arrow types they hold, and every array becomes records through the engine's own
mapping (``loaderx_core::convert::arrow``, the one Parquet files take), handed over as an Arrow
IPC stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from ray.data.extensions import ArrowTensorType, ArrowTensorTypeV2, ArrowVariableShapedTensorType

from loaderx import _native
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


def _ragged(rows: np.ndarray, lengths: np.ndarray, where: str) -> _Records:
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


def _nested(values: pa.Array, shape: tuple[int, ...]) -> pa.Array:
    """``values`` as fixed-size lists of ``shape`` (innermost axis last), one per item."""
    for d in reversed(shape):
        values = pa.FixedSizeListArray.from_arrays(values, d)
    return values


def _standard(arr: pa.Array, where: str) -> pa.Array:
    """Ray's tensor columns as the standard Arrow types the engine maps (a fixed-shape tensor a
    fixed-size list of its shape, a variable-shaped one a list of rows), their shapes checked
    against their values; any other array as it is."""
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
        return _nested(values, shape)
    if isinstance(t, ArrowVariableShapedTensorType):
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
        row_shape = tuple(int(d) for d in row_shapes[0]) if len(row_shapes) else ()
        rows = np.zeros(len(arr) + 1, dtype=np.int64)
        np.cumsum(shapes[:, 0], out=rows[1:])
        return pa.LargeListArray.from_arrays(pa.array(rows), _nested(pc.list_flatten(data), row_shape))
    if isinstance(t, pa.FixedShapeTensorType):
        # Arrow's own fixed-shape tensors (Ray's ARROW_NATIVE format; look 66, L66-1: written
        # as flat items of the shape's product before): their logical C-order values, whatever
        # the permutation the storage keeps them in.
        tensors = np.ascontiguousarray(arr.to_numpy_ndarray())
        return _nested(pa.array(tensors.reshape(-1)), tuple(int(d) for d in tensors.shape[1:]))
    # Every other array as it is: the engine maps it, or refuses it by name (any other extension
    # type, a struct whose `bytes` field is not binary).
    return arr


def _no_values(arr: pa.Array, where: str) -> _Records | None:
    """The records of a fixed-shape tensor array whose tensors hold no values (a shape with a 0,
    as Ray stores a block of empty arrays): items of no bytes, which a ragged column takes as
    records of no rows. Arrow has no fixed-size list of 0 values to map them through (look 101,
    L101-2: pyarrow's "list_size needs to be a strict positive integer", naming nothing)."""
    t = arr.type
    if isinstance(t, (ArrowTensorType, ArrowTensorTypeV2)):
        shape, values = tuple(int(d) for d in t.shape), t.storage_type.value_type
    elif isinstance(t, pa.FixedShapeTensorType):
        shape, values = tuple(int(d) for d in t.shape), t.value_type
    else:
        return None
    if 0 not in shape:
        return None
    dtype = _dtype(np.dtype(values.to_pandas_dtype()), where)
    return _Records(Layout("dense", dtype, shape), dense=np.empty((len(arr), *shape), dtype=numpy_dtype(dtype)))


def _no_bytes(r: _Records, where: str) -> None:
    """Refuses dense items of no bytes as the first records of a column (a ragged column's were
    made records of no rows before)."""
    if r.dense is not None and len(r.dense) and 0 in r.layout.shape:
        raise ValueError(
            f"{where} holds items of shape {r.layout.shape}, which hold no bytes (name it in write_loaderx's "
            "`ragged` if its records are rows)"
        )


def _records(arr: pa.Array, column: str, block: str) -> _Records:
    """The records of one Arrow array (a chunk of the block ``block``'s column ``column``),
    through the engine's mapping of Arrow types (the one Parquet files take:
    ``loaderx_core::convert::arrow``), whose errors name the column and the row."""
    where = f"column {column!r}, {block}"
    if arr.null_count:
        raise ValueError(f"{where} holds {arr.null_count} nulls; loaderx records cannot be null")
    empty = _no_values(arr, where)
    if empty is not None:
        return empty
    arr = _standard(arr, where)
    batch = pa.record_batch([arr], names=[column])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    try:
        [(_, kind, dtype, shape, values, offsets)] = _native.arrow_records(sink.getvalue().to_pybytes(), block)
    except _native.Error as e:
        # A type without a layout, a null deeper in (named by column and row): the caller's kind.
        raise (TypeError if "has no loaderx layout" in str(e) else ValueError)(str(e)) from None
    layout = Layout(kind, dtype, tuple(shape))
    if kind == "ragged":
        return _Records(layout, values=values, offsets=offsets)
    if len(arr) and 0 in layout.shape:
        raise ValueError(f"{where} holds items of shape {layout.shape}, which hold no bytes")
    dense = values.view(numpy_dtype(dtype)).reshape(len(arr), *layout.shape)
    return _Records(layout, dense=dense)


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
