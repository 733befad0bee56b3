"""Record-aligned byte-range planning, with mmap-chunker 0.2.6's Python interface.

``plan_file(path, parts)`` splits a file of delimited records (JSONL, say) into at most
``parts`` contiguous byte ranges, each ending just after a delimiter, so that independent
workers can each read whole records of their own range. The ranges are the ones
``loaderx partition`` prints.
"""

from __future__ import annotations

import operator
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from loaderx import _native
from loaderx._native import PlanningError

__all__ = ["DEFAULT_DELIMITER", "Plan", "PlanningError", "Range", "plan_file", "abi_version", "capabilities"]

DEFAULT_DELIMITER = 0x0A

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Range:
    """One record-aligned byte range ``[start, end)`` of a file, ``length = end - start``."""

    index: int
    start: int
    end: int
    length: int

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"range index must be >= 0, got {self.index}")
        if self.start < 0:
            raise ValueError(f"range start must be >= 0, got {self.start}")
        if self.end < self.start:
            raise ValueError(f"range end must be >= start, got {self.end} < {self.start}")
        if self.length != self.end - self.start:
            raise ValueError(
                f"range length must equal end - start, got {self.length} != {self.end} - {self.start}"
            )


@dataclass(frozen=True)
class Plan:
    """The ranges of one file, in order, covering it exactly."""

    path: str
    file_size: int
    requested_parts: int
    delimiter: int
    ranges: tuple[Range, ...]

    @property
    def actual_partitions(self) -> int:
        """Ranges produced: fewer than requested when the file has fewer records."""
        return len(self.ranges)

    def range_for_part(self, part: int) -> Range | None:
        """The range of zero-based part ``part``, or None."""
        return self.ranges[part] if 0 <= part < len(self.ranges) else None


def abi_version() -> int:
    """The planning ABI version: 0x00010003 (v1.3)."""
    return _native.abi_version()


def capabilities() -> int:
    """The ABI's capability bits (0x3F)."""
    return _native.capabilities()


def _path(path: PathLike) -> str:
    raw = os.fspath(path)
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if not isinstance(raw, str):
        raise TypeError(f"path must be str or os.PathLike, got {type(path).__name__}")
    if "\x00" in raw:
        raise ValueError("path contains an embedded NUL byte")
    if not raw:
        # `Path("")` is the working directory (look 144, L144-4).
        raise ValueError("path is empty: give the file to plan")
    return str(Path(raw).resolve())


_MAX_PARTS = 2 * sys.maxsize + 1


def _parts(parts: int) -> int:
    # Any integer, NumPy's too (look 119: `np.int64(2)` was refused); not a bool, a float or a str.
    try:
        if isinstance(parts, bool) or type(parts).__name__ == "bool_":
            raise TypeError
        parts = operator.index(parts)
    except TypeError:
        raise TypeError(f"parts must be an int, got {type(parts).__name__}") from None
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if parts > _MAX_PARTS:
        # The planner counts parts in a size_t (look 84, F84-5: a bare OverflowError before).
        raise ValueError(f"parts must be at most {_MAX_PARTS} (SIZE_MAX), got {parts}")
    return parts


def _delimiter(delimiter: bytes | int) -> int:
    # NumPy's integers too, as `parts` takes them (look 144, L144-4); never a bool.
    if not isinstance(delimiter, (bytes, int)) and type(delimiter).__name__ != "bool_":
        try:
            delimiter = operator.index(delimiter)
        except TypeError:
            pass  # refused below, named
    if isinstance(delimiter, int):
        if isinstance(delimiter, bool) or not 0 <= delimiter <= 255:
            raise ValueError(f"delimiter int must be a byte value 0..255, got {delimiter!r}")
        return delimiter
    if isinstance(delimiter, bytes):
        if len(delimiter) != 1:
            raise ValueError(
                "partition delimiter must be exactly one byte; the current partition ABI accepts "
                f"a single raw byte only, got {len(delimiter)} bytes"
            )
        return delimiter[0]
    raise TypeError(
        f"delimiter must be a single-byte value such as b'\\n' (or its int value 10), got {type(delimiter).__name__}"
    )


def _file_size(path: str) -> int:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"input file does not exist: {path}") from None
    except OSError as exc:
        raise OSError(f"cannot access input file {path}: {exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"input path is a directory, not a file: {path}")
    if not stat.S_ISREG(info.st_mode):
        raise PlanningError(f"input path is not a regular file: {path}")
    return int(info.st_size)


def plan_file(path: PathLike, parts: int, delimiter: bytes | int = DEFAULT_DELIMITER) -> Plan:
    """Plans at most ``parts`` record-aligned ranges of the regular file ``path``, records
    ending at the single byte ``delimiter`` (``b"\\n"`` or its value ``10`` by default).

    Raises ``TypeError`` / ``ValueError`` for bad arguments, ``FileNotFoundError``,
    ``IsADirectoryError``, and :class:`PlanningError` for a file that is not regular or a plan
    that does not cover the file. No returned object refers to the mapped file.
    """
    resolved = _path(path)
    parts = _parts(parts)
    byte = _delimiter(delimiter)
    size = _file_size(resolved)
    ranges = tuple(Range(*r) for r in _native.plan_file(resolved, parts, byte))
    covered = ranges[-1].end if ranges else 0
    if covered != size or any(a.end != b.start for a, b in zip(ranges, ranges[1:])):
        raise PlanningError(
            f"partition coverage {covered} does not match file size {size}; the planner produced an inconsistent plan"
        )
    return Plan(resolved, size, parts, byte, ranges)
