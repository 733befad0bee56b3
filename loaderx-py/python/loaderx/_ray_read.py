"""Ray Data out of loaderx datasets: :class:`LoaderxDatasource` and :func:`read_loaderx` (see
:mod:`loaderx.ray`, which exports them)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
from ray.data import Dataset, read_datasource
from ray.data.block import Block, BlockMetadata
from ray.data.datasource import Datasource, ReadTask
from ray.data.extensions import ArrowTensorArray

from loaderx import _native
from loaderx._common import numpy_dtype, opened_path
from loaderx.dataset import DenseDataset, RaggedDataset

# Where the parts of OUT's sets live, beside them (the sets' manifests name them relatively).
PARTS_DIR = "_parts"
# Records gathered per block a read task yields: large enough that a call's cost vanishes,
# small enough that a block stays well under Ray's target block size.
_READ_BLOCK_BYTES = 32 << 20


@dataclass(frozen=True)
class _Column:
    name: str
    path: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    records: int
    # What the dataset was when planned, so that a read task never reads another write under
    # the plan: a local directory's identity and its index file's identity, last change and
    # size (a rewrite renames a new directory into place, whose inode number may be the
    # planned one's: look 161, L161-1; a store edited in place keeps its directory: L161-2;
    # the directory's own times change when a writer opens it and writes nothing: look 163,
    # L163-2); on object storage, the dataset's fingerprint (its count and its index's
    # checksums, a set's parts' folded), as a rewrite at the same URL has another (looks 156
    # and 159).
    key: Any = None


# The files whose change is a dataset's: a v2 index, a v1 one, a store set's manifest.
_INDEX_FILES = ("index.zr", "meta.zr", "storeset.msgpack")


def _key(path: str, d: DenseDataset | RaggedDataset) -> Any:
    """What tells the dataset at ``path``, opened as ``d``, from another written there since."""
    if path.startswith("s3://"):
        return d._native.fingerprint()
    st = os.stat(path)
    key: list[tuple[int, ...]] = [(st.st_dev, st.st_ino)]
    for name in _INDEX_FILES:
        try:
            st = os.stat(os.path.join(path, name))
        except FileNotFoundError:
            continue
        key.append((st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns, st.st_size))
    return tuple(key)


def _schema(d: DenseDataset | RaggedDataset) -> tuple[str, str, tuple[int, ...]]:
    """The kind, dtype and item (or row) shape of ``d``."""
    if isinstance(d, DenseDataset):
        return "dense", d._native.dtype, tuple(d.item_shape)
    return "ragged", d._native.dtype, tuple(d.row_shape)


def _open(path: str, remote: dict[str, Any] | None) -> DenseDataset | RaggedDataset:
    try:
        return DenseDataset(path, remote)
    except _native.SchemaError as e:
        # Only a ragged dataset is opened as one: any other schema error (a set's part replaced
        # since it was stitched, say) is the dense open's own (look 94, M1: it was reported as
        # "the dataset is dense").
        if "open it with RaggedDataset" not in str(e):
            raise
        return RaggedDataset(path, remote)


def _is_dataset(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "schema.msgpack"))


class LoaderxDatasource(Datasource):
    """The Ray ``Datasource`` behind :func:`read_loaderx`: one read task per range of records."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[str] | None = None,
        remote: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        # Absolute: a read task resolves it in its worker's directory (look 167, L167-2).
        path = opened_path(path)
        self.remote = remote
        if isinstance(columns, (str, bytes)):
            # A name is not a list of its letters (look 119, L119-3).
            raise TypeError(f"columns must be a list of column names, got the string {columns!r}")
        if path.startswith("s3://") or _is_dataset(path):
            names = [(columns[0] if columns else os.path.basename(path.rstrip("/")) or "data", path)]
            if columns is not None and len(columns) != 1:
                raise ValueError(f"{path} is one dataset; columns names its one column, got {list(columns)}")
        else:
            if not os.path.isdir(path):
                raise FileNotFoundError(f"{path}: no dataset or directory of datasets there")
            found = sorted(
                e for e in os.listdir(path)
                if not e.startswith(".") and e != PARTS_DIR and _is_dataset(os.path.join(path, e))
            )
            wanted = found if columns is None else list(columns)
            for c in wanted:
                if c not in found:
                    raise FileNotFoundError(f"{os.path.join(path, c)}: no dataset there (datasets in {path}: {found})")
            if not wanted:
                raise FileNotFoundError(f"{path}: neither a dataset nor a directory of datasets")
            names = [(c, os.path.join(path, c)) for c in wanted]
        self.columns: list[_Column] = []
        for name, p in names:
            d = _open(p, remote)
            kind, dtype, shape = _schema(d)
            self.columns.append(_Column(name, p, kind, dtype, shape, len(d), _key(p, d)))
        lengths = {c.name: c.records for c in self.columns}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"the datasets of {path} differ in length: {lengths}")
        self.records = self.columns[0].records

    def get_name(self) -> str:
        return "Loaderx"

    def _row_bytes(self) -> int | None:
        if any(c.kind == "ragged" for c in self.columns):
            return None
        return sum(int(np.prod(c.shape, dtype=np.int64)) * numpy_dtype(c.dtype).itemsize for c in self.columns)

    def estimate_inmemory_data_size(self) -> int | None:
        per_row = self._row_bytes()
        return None if per_row is None else per_row * self.records

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None) -> list[ReadTask]:
        n = self.records
        tasks = max(1, min(int(parallelism), n))
        bounds = [n * k // tasks for k in range(tasks + 1)]
        per_row = self._row_bytes()
        out = []
        for start, stop in zip(bounds, bounds[1:]):
            meta = BlockMetadata(
                num_rows=stop - start,
                size_bytes=None if per_row is None else per_row * (stop - start),
                exec_stats=None,
                input_files=[c.path for c in self.columns],
            )
            out.append(ReadTask(_Reader(self.columns, self.remote, start, stop), meta, per_task_row_limit=per_task_row_limit))
        return out


class _Reader:
    """A read task's function: records ``start..stop`` of every column, in blocks."""

    def __init__(self, columns: list[_Column], remote: dict[str, Any] | None, start: int, stop: int) -> None:
        self.columns, self.remote, self.start, self.stop = columns, remote, start, stop

    def __call__(self) -> Iterable[Block]:
        datasets = [(c, _open(c.path, self.remote)) for c in self.columns]
        for c, d in datasets:
            # Checked after the open: a replacement before it or during it shows here, also one
            # of the same bytes under another schema (look 165, L165-1: read as its new dtype).
            if len(d) != c.records or _key(c.path, d) != c.key or _schema(d) != (c.kind, c.dtype, c.shape):
                counts = f": {len(d)} records now, {c.records} then" if len(d) != c.records else ""
                raise RuntimeError(
                    f"{c.path}: the dataset changed since read_loaderx planned its read (rewritten or "
                    f"replaced{counts}); read it again"
                )
        unit = {c.name: int(np.prod(c.shape, dtype=np.int64)) * numpy_dtype(c.dtype).itemsize for c in self.columns}
        # A dense column's record is its item; a ragged one's is its rows, counted per record below.
        fixed = sum(unit[c.name] for c in self.columns if c.kind != "ragged")
        ragged = [(c, d) for c, d in datasets if c.kind == "ragged"]
        step = max(1, _READ_BLOCK_BYTES // max(1, fixed))
        if ragged:
            step = min(step, 65536)
        a = self.start
        while a < self.stop:
            idx = np.arange(a, min(a + step, self.stop), dtype=np.uint32)
            if ragged:
                # Ragged records cut at the block's bytes (at least one record), from their
                # lengths in the index, before any is read.
                size = np.full(len(idx), fixed, dtype=np.int64)
                for c, d in ragged:
                    size += d.lengths(idx).astype(np.int64) * unit[c.name]
                idx = idx[: max(1, int(np.searchsorted(np.cumsum(size), _READ_BLOCK_BYTES, side="right")))]
            yield pa.table({c.name: _column(c, d, idx) for c, d in datasets})
            a += len(idx)


def _bf16_as_f32(a: np.ndarray) -> np.ndarray:
    """bfloat16 values (``ml_dtypes.bfloat16``, or their ``uint16`` bits) as the ``float32``
    values they are, exactly: a bfloat16 is a float32's top 16 bits. Arrow has no bfloat16 (look
    101, L101-4: every read task of a bf16 dataset failed inside Ray, naming no column)."""
    bits = np.ascontiguousarray(a).view(np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _column(c: _Column, d: DenseDataset | RaggedDataset, idx: np.ndarray) -> pa.Array:
    """The records ``idx`` of one dataset as an Arrow array: a tensor column for dense items of
    a shape, a plain column for scalars, a list column (of fixed-size lists for rows of a
    shape) for ragged records. bfloat16 values come as ``float32``, exactly."""
    if c.kind == "dense":
        items = d.gather(idx)
        if c.dtype == "bf16":
            items = _bf16_as_f32(items)
        return pa.array(items) if items.ndim == 1 else ArrowTensorArray.from_numpy(items)
    values, offsets = d._native.gather(idx)
    values = values.view(numpy_dtype(c.dtype)) if values.dtype != numpy_dtype(c.dtype) else values
    if c.dtype == "bf16":
        values = _bf16_as_f32(values)
    flat: pa.Array = pa.array(values)
    for size in reversed(c.shape):
        flat = pa.FixedSizeListArray.from_arrays(flat, size)
    return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), flat)


def read_loaderx(
    path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    *,
    remote: dict[str, Any] | None = None,
    override_num_blocks: int | None = None,
) -> Dataset:
    """The loaderx dataset (a store or a store set, dense or ragged) at ``path``, or the datasets
    of the directory ``path`` (what :func:`write_loaderx` and ``convert parquet`` write; one
    column each, all of one length), as a Ray dataset read by one task per range of records.
    A single dataset's column is named by ``columns`` or else after its directory; ``s3://``
    URLs name a single dataset (``remote`` as :class:`~loaderx.dataset.DenseDataset` takes it).
    Dense items of a shape become tensor columns, ragged records list columns; ``bfloat16``
    values become ``float32`` (exactly: Arrow has no bfloat16).

    A task that finds a dataset written again since the read was planned (rewritten, edited in
    place, pushed or stitched again) raises ``RuntimeError`` rather than mix two writes' rows.
    On object storage a write is told by its index's checksums: a ``v1`` store, which keeps
    none, pushed again in the same layout with other bytes is not told apart."""
    return read_datasource(LoaderxDatasource(path, columns, remote), override_num_blocks=override_num_blocks)
