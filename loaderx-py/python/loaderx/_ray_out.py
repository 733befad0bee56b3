"""The local output of ``loaderx.ray``'s sink: its write lock and what it may replace or remove."""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

from loaderx import _native
from loaderx._ray_read import PARTS_DIR

# The name the sink gives a part: `part-<run>-<task>-<nonce>`, and the staging directory of one
# a killed task left (`.partial`).
_PART = re.compile(r"part-[0-9a-f]{12}-[0-9]{5,}-[0-9a-f]{8}(\.partial)?")

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


def _stale_columns(out: str, columns: Sequence[str]) -> list[str]:
    """The columns of OUT not among ``columns`` whose sets an earlier write made: a store set
    (``_check_replaceable``) every part of which is one of the sink's in ``OUT/_parts/<column>/``.
    A set of the user's (``convert parquet``'s, ``stitch``'s, parts anywhere else) is left
    alone, even beside a parts folder of its name (review 47, finding 5)."""
    stale = []
    for entry in sorted(os.listdir(out)):
        path = os.path.join(out, entry)
        if entry in columns or entry.startswith(".") or entry == PARTS_DIR:
            continue
        if not os.path.isdir(os.path.join(out, PARTS_DIR, entry)) or not os.path.isdir(path):
            continue
        try:
            _check_replaceable(path)
            # Paths relative to the set's directory.
            parts = [os.path.join(path, p) for p, _ in _native.set_parts(path) or []]
        except (FileExistsError, _native.Error, OSError):
            continue
        folder = os.path.realpath(os.path.join(out, PARTS_DIR, entry))
        if parts and all(
            os.path.dirname(os.path.realpath(p)) == folder and _PART.fullmatch(os.path.basename(p)) for p in parts
        ):
            stale.append(entry)
    return stale


def _stale_remote_columns(url: str, columns: Sequence[str], remote: dict[str, Any] | None) -> list[str]:
    """``_stale_columns`` on object storage: the columns at the URL ``url`` not among ``columns``
    whose sets an earlier write made there (every part one of the sink's in
    ``url/_parts/<column>/``, nothing below the set but its files), which a rerun removes once
    its own are put (look 143, L143-2: they stayed, though ``OUT`` holds one write's columns):
    the set, then the sink's parts alone (``_remove_stale_remote``)."""
    parts_url = f"{url}/{PARTS_DIR}"
    try:
        folders = set(_native.list_remote_dirs(parts_url, remote))
        entries = _native.list_remote_dirs(url, remote)
    except _native.Error:
        return []
    stale = []
    for entry in entries:
        if entry in columns or entry.startswith(".") or entry == PARTS_DIR or entry not in folders:
            continue
        try:
            parts = _native.remote_set_parts(f"{url}/{entry}", remote)
            below = _native.list_remote_dirs(f"{url}/{entry}", remote)
            files = set(_native.list_remote_objects(f"{url}/{entry}", remote))
        except _native.Error:
            continue
        # Nothing at the set's URL but its own files (look 145, L145-1: a file of the user's
        # there went with it), and every part one of the sink's.
        prefix = f"{parts_url}/{entry}/"
        ours = not below and "storeset.msgpack" in files and files <= _SET_FILES
        if ours and parts and all(p.startswith(prefix) and _PART.fullmatch(p[len(prefix):]) for p in parts):
            stale.append(entry)
    return stale


def _remove_stale_remote(url: str, column: str, remote: dict[str, Any] | None, leftovers: list[str]) -> None:
    """Removes the stale column ``column`` at the URL ``url`` (``_stale_remote_columns``): its
    set first (never one naming parts gone), then each of the sink's parts in its parts folder,
    one by one; anything else there stays (look 145, L145-1: the whole folder went, a store of
    the user's in it with it). What cannot be removed goes to ``leftovers``."""
    folder = f"{url}/{PARTS_DIR}/{column}"
    try:
        _native.remove_remote(f"{url}/{column}", remote)
        entries = _native.list_remote_dirs(folder, remote)
    except _native.Error:
        leftovers.append(f"{url}/{column}/")
        return
    for entry in entries:
        if _PART.fullmatch(entry):
            try:
                _native.remove_remote(f"{folder}/{entry}", remote)
            except _native.Error:
                leftovers.append(f"{folder}/{entry}/")


def _check_replaceable_remote(url: str, remote: dict[str, Any] | None) -> None:
    """``_check_replaceable`` at the URL ``url``: a column's set there is replaced only when
    nothing but a set's files is there, asked of every column before the first is put (look
    146, L146-4 and L146-5: the set's files went in beside a user's file, and a store at a later
    column's URL was found only after the first column was replaced)."""
    objects = set(_native.list_remote_objects(url, remote))
    below = _native.list_remote_dirs(url, remote)
    if below or not objects <= _SET_FILES:
        raise FileExistsError(f"{url} exists and is not a loaderx store set: refusing to replace it (remove it or write elsewhere)")
