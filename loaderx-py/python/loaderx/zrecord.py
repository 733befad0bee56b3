"""Zrecord: the store of raw byte records underneath every dataset.

Records are independent byte strings in a dense index space ``0..len``; every read and write
is a batch. Deleting swaps the last record into each hole, so an index is stable only until
something is deleted. ``gather`` and ``append`` may run from many threads at once; ``delete``
and ``compact`` take the store alone.

In a process forked from the one that opened it (torch's fork workers, ``multiprocessing``), a
handle reads and refuses writes (``LockedError``); a read-write handle reads there through a
read-only handle of the child's own, opened at its first read, which holds the store's shared
lock: the parent's ``delete`` and ``compact`` are ``LockedError`` until that child, and every
process forked from it since, has ended.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np

from loaderx import _native
from loaderx._common import check_int, fs_path, indices

__all__ = ["Zrecord"]


class Zrecord:
    """The store at ``path``: ``mode="r"`` opens it read-only, ``"a"`` read-write (created when
    ``path`` does not exist), ``"w"`` creates it afresh. ``format`` (``"v2"`` or ``"v1"``)
    applies to a store being created."""

    __slots__ = ("_native",)

    def __init__(self, path: str | os.PathLike[str], mode: str = "a", format: str = "v2") -> None:
        for name, value in (("mode", mode), ("format", format)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        where = fs_path(path)
        if not where or (isinstance(where, str) and "\x00" in where) or (isinstance(where, bytes) and b"\x00" in where):
            # As open() does (look 92, F5: an OSError of errno 0).
            raise ValueError(f"a store's path must be non-empty and hold no NUL byte, not {where!r}")
        self._native = _native.Store(where, mode, format)

    @property
    def path(self) -> str:
        """The store's directory."""
        return str(self._native.path)

    @property
    def format(self) -> str:
        """``"v1"`` or ``"v2"``."""
        return self._native.format

    def __len__(self) -> int:
        return len(self._native)

    def __repr__(self) -> str:
        return f"Zrecord({self.path!r}, len={len(self)}, format={self.format!r})"

    def append(self, records: Iterable[bytes], codec: str = "zstd") -> range:
        """Appends ``records`` (bytes-like) as one batch with ``codec`` (``raw``, ``zstd``,
        ``zstd_dict``, ``lz4``); returns their indices."""
        if not isinstance(codec, str):
            raise TypeError(f"codec must be a str, not {type(codec).__name__}")
        batch = [_record(r, k) for k, r in enumerate(_records(records))]
        start = self._native.append(batch, codec)
        return range(start, start + len(batch))

    def train_dictionary(self, samples: Iterable[bytes]) -> bool:
        """Trains the store's zstd dictionary (``dict.zr``) on ``samples``, before any
        ``zstd_dict`` record is appended; False, with nothing changed, when they are too few to
        train on or the store has a dictionary already."""
        return self._native.train_dictionary([_record(r, k) for k, r in enumerate(_records(samples))])

    def gather(self, indices_: Any) -> list[bytes]:
        """The records at ``indices_``, as ``bytes``."""
        idx, _ = indices(indices_, len(self), np.uint64)
        return self._native.gather(idx)

    def lengths(self, indices_: Any) -> np.ndarray:
        """The byte length of each record at ``indices_`` (from the index: nothing is read)."""
        idx, _ = indices(indices_, len(self), np.uint64)
        return self._native.record_lens(idx)

    def gather_into(self, indices_: Any, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The records at ``indices_`` back to back in one ``uint8`` array (``out``, of exactly
        their total length, when given): ``(buffer, offsets)``, record ``k`` being
        ``buffer[offsets[k]:offsets[k + 1]]``."""
        idx, _ = indices(indices_, len(self), np.uint64)
        if out is not None:
            if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 1:
                raise ValueError("out must be a one-dimensional uint8 array of the records' total length")
            if not out.flags.writeable or not out.flags.c_contiguous:
                raise ValueError("out must be writable and C-contiguous")
            if np.may_share_memory(idx, out):
                raise ValueError("out overlaps the indices: gather into memory of its own")
        # Lengths and bytes in one native call, under one hold of the store: a delete on another
        # thread cannot fall between them.
        return self._native.gather_into(idx, out)

    def delete(self, indices_: Any) -> None:
        """Deletes the records at ``indices_`` (the last record moves into each hole)."""
        idx, _ = indices(indices_, len(self), np.uint64)
        self._native.delete(idx)

    def compact(self) -> dict[str, int]:
        """Rewrites the live records densely, in place; safe to interrupt and run again."""
        return self._native.compact()

    def stats(self) -> dict[str, Any]:
        """Space accounting: ``live_bytes`` against ``chunk_bytes`` says when to compact."""
        return self._native.stats()

    def verify(self, limit: int | None = 100) -> dict[str, Any]:
        """Reads back every record: ``{"checked", "damaged", "bad": [(index, message)],
        "files": [...], "ok"}``.

        ``damaged`` counts every damaged record; ``bad`` lists the first ``limit`` of them:
        those the record scan finds, in index order, then those whose bytes overlap another
        record's, found after it (all of them with ``limit=None``, which on a badly damaged
        store costs memory in proportion). The scan streams, as the CLI's ``loaderx verify`` does, so its
        memory stays flat however many records are damaged. Before ``limit`` existed ``bad``
        listed every damaged record; it still does whenever there are at most ``limit``.
        """
        if limit is not None:
            limit = check_int("limit", limit, 0, 2**64)
        checked, damaged, bad, files = self._native.verify(limit)
        return {"checked": checked, "damaged": damaged, "bad": bad, "files": files,
                "ok": not damaged and not files}

    def sync(self) -> None:
        """Makes every committed record durable."""
        self._native.sync()


def _records(records: Any) -> Any:
    """``records`` as an iterable of records: one bytes-like value is refused, not read as a
    list of its bytes (``append(b"hi")`` stored two records of 104 and 105 bytes; review 46)."""
    if isinstance(records, (bytes, bytearray, memoryview, str)):
        raise TypeError(f"records must be a list of bytes-like records, not one {type(records).__name__} (wrap it: [record])")
    return records


def _record(r: Any, k: int) -> bytes:
    """Record ``k`` as bytes: a bytes-like value (bytes, bytearray, memoryview, a NumPy array's
    bytes); an int, which ``bytes()`` turns into that many zero bytes, or a str is refused."""
    if isinstance(r, np.ndarray) and r.dtype.hasobject:
        # Its bytes are pointers to Python objects (review 47, finding 6).
        raise TypeError(f"record {k} is an array of Python objects ({r.dtype}), not bytes-like")
    if isinstance(r, np.ndarray):
        return r.tobytes()
    if isinstance(r, (str, int)):
        raise TypeError(f"record {k} is a {type(r).__name__}, not bytes-like (bytes, bytearray, memoryview or a NumPy array)")
    try:
        # Anything with the buffer protocol (array.array, mmap, ...): its bytes (look 56).
        with memoryview(r) as view:
            return view.tobytes()
    except TypeError:
        raise TypeError(
            f"record {k} is a {type(r).__name__}, not bytes-like (bytes, bytearray, memoryview or a NumPy array)"
        ) from None
