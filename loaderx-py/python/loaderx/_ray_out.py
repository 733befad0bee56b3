"""The local output of ``loaderx.ray``'s sink: its write lock and what it may replace or remove."""

from __future__ import annotations

import os
from typing import Any

from loaderx._ray_read import PARTS_DIR

try:
    import fcntl
except ImportError:  # not Unix: writes into one local OUT are not serialised there (the docs say so)
    fcntl = None  # type: ignore[assignment]

# The write locks the driver holds on local outputs, by write (run): one write at a time per OUT.
_HELD: dict[str, Any] = {}
_LOCK = ".loaderx-write.lock"
# What a store set's directory holds (and the temporary names of their atomic writes).
_SET_FILES = {"storeset.msgpack", "schema.msgpack", "storeset.msgpack.tmp", "schema.msgpack.tmp"}


def _lock_out(path: str, run: str) -> None:
    """Takes OUT's write lock for write ``run``: a second write into the same OUT at once would
    remove this one's parts as stale (and this one its)."""
    if fcntl is None:
        return
    # Beside the parts (OUT/_parts/), where nothing reads it as a dataset.
    f = open(os.path.join(path, PARTS_DIR, _LOCK), "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise RuntimeError(f"{path}: another write_loaderx is writing into it; writes into one output run one at a time")
    _HELD[run] = f


def _unlock_out(run: str) -> None:
    f = _HELD.pop(run, None)
    if f is not None:
        f.close()


def _check_replaceable(out: str) -> None:
    """A column's output is replaced only when it is a store set (what a write leaves there): a
    directory or file of the user's is never moved or removed."""
    if not os.path.lexists(out):
        return
    if os.path.isdir(out) and not os.path.islink(out):
        entries = set(os.listdir(out))
        if "storeset.msgpack" in entries and entries <= _SET_FILES:
            return
    raise FileExistsError(f"{out} exists and is not a loaderx store set: refusing to replace it (remove it or write elsewhere)")


def _is_dataset_file(name: str) -> bool:
    """A file a loaderx dataset directory holds (a store's files, its schema, image classes)."""
    if name in {"schema.msgpack", "index.zr", "meta.zr", "manifest.zr", "dict.zr", "journal.zr", "write.lock", "convert.lock", "classes.txt"}:
        return True
    stem = name[:-3] if name.endswith(".zr") else None
    return (stem is not None and stem.isdigit()) or name.endswith(".tmp")
