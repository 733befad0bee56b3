"""Ray Data into and out of loaderx datasets: :func:`write_loaderx` and :func:`read_loaderx`.

Ray is imported by this module only (``import loaderx`` never imports it, and the package does
not depend on it).

A write is two-phase, as Lance's distributed writes: every Ray write task converts its blocks into
one part per column, each a dataset of its own written under a temporary name and renamed when
complete; once every task has succeeded, the driver stitches each column's parts, in the order of
the write tasks, into a store set at ``OUT/<column>`` (the layout ``loaderx convert parquet``
writes: one dataset per column). The stitch is the commit point: the driver stitches only the parts
named in the write tasks' results, so a failed or retried attempt's part never enters a set, and a
write that fails leaves what ``OUT`` held before as it was. The parts stay in
``OUT/_parts/<column>/`` (the sets name them there); a rerun replaces the sets (an earlier write's
sets of columns it does not write go too: ``OUT`` holds one write's columns) and removes the parts
they no longer name: ``OUT/_parts/`` is the sink's, and a set stitched by hand over parts there no
longer opens after the next write (stitch over copies of them instead). Column names hold none of
``\\{^}%`]">[~<#|*?`` and no non-ASCII character, which object storage keys hold escaped, and are at
most 215 bytes (the longest name made of them fits a file name). The sets are put in place by
renames, all of them or none: a rename that fails undoes the ones before it. What fails after them
(an old part a reader still holds open on a network file system) is a warning, the write committed;
the next write removes it. A driver killed during the renames themselves leaves some columns new and
the others old, or one moved aside to ``OUT/.<column>.old-<run>``; the next write replaces them all
and removes what such a write left.

Columns become datasets as ``convert parquet`` maps Arrow types: numbers, fixed-size lists of
them and fixed-shape tensors (Ray's tensor extension types) dense; lists of fixed-size values and
variable-shaped tensors ragged (rows along the first axis); binary and string values ``uint8``
records. Nulls are refused.

Record order: a set holds the write tasks' records in task order, which is the dataset's order
when Ray preserves it (``DataContext.get_current().execution_options.preserve_order = True``);
otherwise Ray hands blocks to write tasks as they are produced, and so does the set.

``OUT`` is a local path, which the driver and every write task must see at the same place (a
shared file system on a cluster), or an ``s3://`` URL (a wheel built with the ``remote``
feature): then each write task writes its parts in a local temporary directory and pushes each
finished part to ``OUT/_parts/<column>/`` (its index last, so a part cut off mid-upload is no
store), and the driver puts each set's schema and manifest at ``OUT/<column>`` over the pushed
parts (the manifest last: the commit). A set already there is replaced by that one put; the
parts no set names, and on failure this write's own parts, are removed (unless a set was put
already: a failure between two columns' puts leaves the columns put so far new and the others
old, and keeps the parts they name; the next write replaces them).

One write at a time into an output: a local ``OUT`` is locked for the write (a second one is
refused); an ``s3://`` output is not (object storage has no lock here), and two writes into one
URL at once can remove each other's parts, leaving a set that names parts no longer there.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import uuid
import warnings
from typing import Any, Iterable, Sequence

import numpy as np
from ray.data import DataContext, Dataset
from ray.data.block import Block, BlockAccessor
from ray.data.datasource import Datasink
from ray.data.datasource.datasink import WriteResult

from loaderx import _native
from loaderx._common import fs_path, opened_path

# The reading side, exported here (`_READ_BLOCK_BYTES` for the tests).
from loaderx._ray_read import _READ_BLOCK_BYTES, PARTS_DIR, LoaderxDatasource, read_loaderx  # noqa: F401
from loaderx._ray_out import _LOCK, _PART, _check_replaceable, _is_dataset_file, _lock_out, _remove_stale_remote, _stale_columns, _stale_remote_columns, _unlock_out
from loaderx._ray_out import _check_replaceable_remote
from loaderx._ray_records import Layout, _advice, _as_ragged, _fits, _no_bytes, _records, _Records

__all__ = ["LoaderxDatasink", "LoaderxDatasource", "read_loaderx", "write_loaderx"]



class _Part:
    """One column's part being written by one write task."""

    def __init__(self, path: str, layout: Layout, codec: str, format: str) -> None:
        self.layout = layout
        self.writer = _native.Writer(path, layout.kind, layout.dtype, list(layout.shape), codec, format)

    def append(self, r: _Records) -> None:
        if r.dense is not None:
            self.writer.append_items(r.dense.reshape(-1).view(np.uint8))
        else:
            self.writer.append_ragged(r.values, r.offsets)


# The characters object storage keys hold escaped (core's `ESCAPED_IN_KEYS`): a column named
# with one could not go to `s3://`, and its listings there would miss it (look 146, L146-1);
# refused locally too, so that a local OUT can be pushed.
_ESCAPED_IN_KEYS = set('\\{^}%`]">[~<#|*?')


def _check_column_name(name: str) -> None:
    if not name or name in (".", "..", PARTS_DIR) or "/" in name or name.startswith("."):
        raise ValueError(f"column {name!r} cannot name a dataset directory")
    bad = sorted({c for c in name if c in _ESCAPED_IN_KEYS or not c.isprintable() or not c.isascii()})
    if bad:
        raise ValueError(
            f"column {name!r} cannot name a dataset directory: it holds {''.join(bad)!r}, which object "
            "storage keys hold escaped; rename the column (Dataset.rename_columns)"
        )
    # The longest name made of it within a file name's 255 bytes: the commit stages a column's
    # set as `.<column>.set-<run>` (18 bytes more), which the stitch stages as
    # `.<that>.stitch.<pid>.<n>` (22 more) (looks 148 and 150, L148-4, L150-1: refused only at
    # the commit).
    if len(name.encode()) > 215:
        raise ValueError(f"column {name[:40]!r}... is {len(name.encode())} bytes; a column name is at most 215")


class LoaderxDatasink(Datasink):
    """The Ray ``Datasink`` behind :func:`write_loaderx` (see the module docs)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        columns: Sequence[str] | None = None,
        codec: str = "zstd",
        format: str = "v2",
        ragged: Sequence[str] = (),
        remote: dict[str, Any] | None = None,
    ) -> None:
        path = fs_path(path)
        # Where the sets go: a local directory (`path`) or an s3:// URL (`url`), never both.
        self.url: str | None = None
        # Another scheme's URL (`gs://`) is refused, not written as a local directory `gs:`: a
        # write there is a mistake (readers take it as the local path it also is).
        if "://" in path:
            if not path.startswith("s3://"):
                raise ValueError(f"{path}: write_loaderx writes local paths and s3:// URLs")
            if not _native.REMOTE:
                raise ValueError(f"{path}: this build of loaderx has no object storage (the `remote` feature)")
            self.url = path.rstrip("/")
        self.remote = remote
        # As readers take it, `..` not dropped by its text (look 171, L171-1: `abspath` wrote elsewhere).
        self.path = path if self.url else opened_path(path)
        if isinstance(columns, (str, bytes)):
            # list("image") would be five one-letter columns (look 57).
            raise TypeError(f"columns={columns!r}: a list of column names, e.g. [{columns!r}]")
        self.columns = None if columns is None else list(columns)
        if self.columns == []:
            # A write of no columns would replace every set in OUT by nothing (look 56, R1).
            raise ValueError("write_loaderx: columns=[] names no column to write; a store set needs at least one")
        for c in self.columns or []:
            _check_column_name(c)
        twice = sorted({c for c in self.columns or [] if self.columns.count(c) > 1})
        if twice:
            raise ValueError(f"columns names {twice[0]!r} twice: each column is one dataset")
        # Checked here, before any write task runs (look 56: a v1 lz4 write was refused in each
        # task, after its work).
        if format not in ("v1", "v2"):
            raise ValueError(f"format={format!r}: \"v2\" or \"v1\"")
        if codec not in ("raw", "zstd", "zstd_dict", "lz4"):
            raise ValueError(f"codec={codec!r}: \"zstd\", \"raw\", \"lz4\" or \"zstd_dict\"")
        if format == "v1" and codec == "lz4":
            raise ValueError("v1 stores have no lz4 codec: write format=\"v2\"")
        self.codec = codec
        self.format = format
        if isinstance(ragged, (str, bytes)):
            # A name is not a set of its letters (look 119, L119-2: "tokens" became six names).
            raise TypeError(f"ragged must be a list of column names, got the string {ragged!r}")
        self.ragged = frozenset(ragged)
        # Names this write's parts, so that a failed write removes its own and no other's.
        self.run = uuid.uuid4().hex[:12]
        self.committed: dict[str, tuple[int, int]] = {}
        # Set when sets in OUT may name this write's parts after a failure: a failed write then
        # removes none of them.
        self.keep_parts = False
        # The directories this write made (its parts folder, OUT, the missing ones above it),
        # deepest first, and the column folders there before it: a failed write removes the
        # ones it made when it leaves them empty (looks 141 and 143, L141-1, L143-4). Set once
        # this write holds OUT's lock (`holds_out`): one refused undoes nothing (L143-3).
        self.made: list[str] = []
        self.had: set[str] = set()
        self.holds_out = False

    def get_name(self) -> str:
        return "Loaderx"

    def on_write_start(self, schema: Any = None) -> None:
        if self.url is None:
            parts = os.path.join(self.path, PARTS_DIR)
            made, d = [], parts
            while not os.path.lexists(d) and os.path.dirname(d) != d:
                made.append(d)
                d = os.path.dirname(d)
            os.makedirs(parts, exist_ok=True)
            _lock_out(self.path, self.run)
            self.made, self.had, self.holds_out = made, set(os.listdir(parts)), True

    def write(self, blocks: Iterable[Block], ctx: Any) -> dict[str, Any]:
        """One write task: its blocks into one part per column, published only when complete."""
        task = ctx.task_idx
        name = f"part-{self.run}-{task:05d}-{uuid.uuid4().hex[:8]}"
        # A write to object storage stages its parts in a directory of its own, pushed when done.
        root = tempfile.mkdtemp(prefix="loaderx-ray-") if self.url else self.path
        try:
            return self._write(blocks, task, name, root)
        finally:
            if self.url:
                shutil.rmtree(root, ignore_errors=True)

    def _write(self, blocks: Iterable[Block], task: int, name: str, root: str) -> dict[str, Any]:
        parts: dict[str, _Part] = {}
        columns = self.columns
        rows = 0
        try:
            for b, block in enumerate(blocks):
                table = BlockAccessor.for_block(block).to_arrow()
                if table.num_rows == 0:
                    continue
                if columns is None:
                    columns = list(table.column_names)
                    if not columns:
                        raise ValueError(f"block {b} of write task {task} has rows but no columns: nothing to write")
                    for c in columns:
                        _check_column_name(c)
                missing = [c for c in columns if c not in table.column_names]
                if missing:
                    raise ValueError(f"block {b} of write task {task} has no column {missing[0]!r} (it has {table.column_names})")
                for c in columns:
                    where = f"column {c!r}, block {b} of write task {task}"
                    for chunk in table.column(c).chunks:
                        if len(chunk) == 0:
                            continue
                        r = _records(chunk, c, f"block {b} of write task {task}")
                        if c in self.ragged:
                            r = _as_ragged(r)
                        part = parts.get(c)
                        if part is None:
                            _no_bytes(r, where)
                            folder = os.path.join(root, PARTS_DIR, c)
                            os.makedirs(folder, exist_ok=True)
                            part = parts[c] = _Part(os.path.join(folder, name), r.layout, self.codec, self.format)
                        else:
                            fitted = _fits(r, part.layout)
                            if fitted is None:
                                advice = _advice(r.layout, part.layout)
                                raise ValueError(f"{where} holds {r.layout}; the task's first block held {part.layout}{advice}")
                            r = fitted
                        part.append(r)
                rows += table.num_rows
            counts = {c: p.writer.finish() for c, p in parts.items()}
        except BaseException:
            for p in parts.values():
                p.writer.abort()
            raise
        if any(n != rows for n in counts.values()):
            raise RuntimeError(f"write task {task} wrote {counts} records of {rows} rows")
        if self.url:
            for c in parts:
                _native.push(os.path.join(root, PARTS_DIR, c, name), f"{self.url}/{PARTS_DIR}/{c}/{name}", self.remote)
        return {
            "task": task,
            "name": name,
            "rows": rows,
            "columns": columns or [],
            "layouts": {c: p.layout for c, p in parts.items()},
        }

    def on_write_complete(self, write_result: WriteResult) -> None:
        """The commit: every column's parts (of the tasks that succeeded, in task order) stitched
        into ``OUT/<column>``, then the parts no set names any more removed. A column's output
        that is not a store set (a directory of the user's) is refused, nothing replaced."""
        try:
            self._complete(write_result)
        finally:
            _unlock_out(self.run)

    def _complete(self, write_result: WriteResult) -> None:
        results = sorted((r for r in write_result.write_returns if r and r["rows"]), key=lambda r: r["task"])
        tasks = [r["task"] for r in results]
        if len(set(tasks)) != len(tasks):
            raise RuntimeError(f"write tasks reported twice: {sorted(t for t in tasks if tasks.count(t) > 1)}")
        if not results:
            raise ValueError("write_loaderx: the dataset has no rows; a store set needs at least one record")
        first = results[0]
        if not first["columns"]:
            # Never commit nothing: it would remove every set OUT holds (look 56, R1).
            raise ValueError("write_loaderx: the dataset has no columns; a store set needs at least one")
        for r in results[1:]:
            if r["columns"] != first["columns"]:
                raise ValueError(f"write task {r['task']} holds the columns {r['columns']}; write task {first['task']} {first['columns']}")
            for c in first["columns"]:
                a, b = r["layouts"][c], first["layouts"][c]
                if a != b:
                    advice = _advice(a, b)
                    raise ValueError(
                        f"column {c!r}: write task {r['task']}'s blocks hold {a}; "
                        f"the first block (of write task {first['task']}) held {b}{advice}"
                    )
        if self.url:
            self._commit_remote(results, first["columns"])
            return
        columns = first["columns"]
        for c in columns:
            _check_replaceable(os.path.join(self.path, c))
        # The sets an earlier write made of columns this one does not write: replaced too (by
        # nothing), so that OUT holds this write's columns alone (review 46, finding 5).
        stale = _stale_columns(self.path, columns)
        staged: list[tuple[str, str]] = []
        try:
            for c in columns:
                tmp = os.path.join(self.path, f".{c}.set-{self.run}")
                parts = [os.path.join(self.path, PARTS_DIR, c, r["name"]) for r in results]
                self.committed[c] = _native.stitch(parts, tmp)
                staged.append((c, tmp))
        except BaseException:
            for _, tmp in staged:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._swap(staged, stale)
        # Committed: the sets name this write's parts, which nothing may remove now, whatever
        # follows raises (review 47, finding 1). What follows only tidies: a path it cannot
        # remove (a reader holding it open on a network file system), or any failure listing
        # what to remove, is left for the next write, with a warning; the write stands (review
        # 46, finding 1: a raise here had Ray remove the committed parts).
        self.keep_parts = True
        leftovers: list[str] = []
        try:
            self._tidy_local(results, columns, stale, leftovers)
        except Exception as error:
            leftovers.append(f"{self.path} ({error})")
        if leftovers:
            warnings.warn(
                f"write_loaderx committed {self.path}, but could not remove {len(leftovers)} old "
                f"files ({leftovers[0]} first); the next write into it removes them",
                RuntimeWarning,
                stacklevel=2,
            )

    def _tidy_local(self, results: list[dict[str, Any]], columns: list[str], stale: list[str], leftovers: list[str]) -> None:
        """After a local commit: the sets moved aside, the parts no set names, what a killed
        commit left; a path that cannot be removed goes to ``leftovers``."""
        names = {r["name"] for r in results}
        # The writes whose parts are here, before any goes: a leftover set is a killed write's
        # only when that write left parts (look 146, L146-2: a set the user moved aside as
        # `.b.old-202612071018`, twelve hex-legal digits, was taken for one).
        root = os.path.join(self.path, PARTS_DIR)
        runs = {
            entry[5:17]
            for c in (os.listdir(root) if os.path.isdir(root) else [])
            if os.path.isdir(os.path.join(root, c))
            for entry in os.listdir(os.path.join(root, c))
            if _PART.fullmatch(entry)
        }
        for c in [*columns, *stale]:
            _tidy(os.path.join(self.path, f".{c}.old-{self.run}"), leftovers)
            folder = os.path.join(self.path, PARTS_DIR, c)
            for entry in os.listdir(folder) if os.path.isdir(folder) else []:
                # Only an older write's part (the sink's name for one, a loaderx dataset): a
                # user's file or directory in the parts folder is never removed.
                if entry not in names and _is_old_part(os.path.join(folder, entry), entry):
                    _tidy(os.path.join(folder, entry), leftovers)
            if c in stale:
                try:
                    os.rmdir(folder)  # once empty: nothing of the column is left
                except OSError:
                    pass
        # What a driver killed mid-commit left: its staged and moved-aside sets (the lock is
        # held: no other write is running).
        for entry in sorted(os.listdir(self.path)):
            left = _LEFT.fullmatch(entry)
            if left and left.group(2) in runs:
                try:
                    _check_replaceable(os.path.join(self.path, entry))
                except FileExistsError:
                    continue
                _tidy(os.path.join(self.path, entry), leftovers)

    def _swap(self, staged: list[tuple[str, str]], stale: list[str]) -> None:
        """Puts every staged set in place, each old set moved aside to ``.<column>.old-<run>``,
        and moves the stale sets aside: all or, when a rename fails, none (the renames done are
        undone in reverse, then the error raised; the failed write's parts go, the sets in OUT
        are the ones before). A rename that fails while undoing leaves OUT's sets naming this
        write's parts: those are then kept (``_failed``), and the error says which sets."""
        done: list[tuple[str, str]] = []  # (from, to) of each rename made
        try:
            for c, tmp in staged:
                out, old = os.path.join(self.path, c), os.path.join(self.path, f".{c}.old-{self.run}")
                if os.path.lexists(out):
                    _rename(out, old)
                    done.append((out, old))
                _rename(tmp, out)
                done.append((tmp, out))
            for c in stale:
                out, old = os.path.join(self.path, c), os.path.join(self.path, f".{c}.old-{self.run}")
                _rename(out, old)
                done.append((out, old))
        except BaseException as error:
            undone = 0
            try:
                for a, b in reversed(done):
                    _rename(b, a)
                    undone += 1
            except OSError as again:
                self.keep_parts = True
                left = [b for _, b in reversed(done)][undone:]
                raise RuntimeError(
                    f"write_loaderx into {self.path}: a rename failed ({error}), and undoing the "
                    f"renames failed too ({again}); these paths are as this write left them: {left}"
                ) from error
            for _, tmp in staged:
                shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _commit_remote(self, results: list[dict[str, Any]], columns: list[str]) -> None:
        """The commit on object storage: each column's set put over its pushed parts, then the
        parts no set names removed. Once one set is put it names this write's parts, which a
        later failure then keeps (a put that fails for a later column leaves the columns put
        so far new, the others old: object storage has no rename to undo them with); what
        fails after the puts is a warning (review 46, finding 1's remote twin). The sets an
        earlier write made of columns this one does not write go last, with their parts."""
        parts_url = f"{self.url}/{PARTS_DIR}"
        for c in columns:
            _check_replaceable_remote(f"{self.url}/{c}", self.remote)
        stale = _stale_remote_columns(self.url, columns, self.remote)
        for c in columns:
            parts = [f"{parts_url}/{c}/{r['name']}" for r in results]
            summary = _native.stitch_remote(parts, f"{self.url}/{c}", self.remote)
            self.keep_parts = True
            self.committed[c] = summary
        names = {r["name"] for r in results}
        leftovers: list[str] = []
        for c in columns:
            try:
                entries = _native.list_remote_dirs(f"{parts_url}/{c}", self.remote)
            except _native.Error:
                leftovers.append(f"{parts_url}/{c}/")
                continue
            for entry in entries:
                if entry not in names and _PART.fullmatch(entry):
                    try:
                        _native.remove_remote(f"{parts_url}/{c}/{entry}", self.remote)
                    except _native.Error:
                        leftovers.append(f"{parts_url}/{c}/{entry}")
        for c in stale:
            _remove_stale_remote(self.url, c, self.remote, leftovers)
        if leftovers:
            warnings.warn(
                f"write_loaderx committed {self.url}, but could not remove {len(leftovers)} old "
                f"parts ({leftovers[0]} first); the next write into it removes them",
                RuntimeWarning,
                stacklevel=2,
            )

    def on_write_failed(self, error: Exception) -> None:
        """Removes this write's parts; the sets in ``OUT`` stay as they were."""
        try:
            self._failed()
        finally:
            try:
                self._unmake()
            finally:
                _unlock_out(self.run)

    def _unmake(self) -> None:
        """Removes what a failed write made and left empty: its column folders of parts, and
        when it made OUT's parts folder, its lock, that folder, and OUT and the directories
        above it it made (look 141, L141-1: a first write refused left OUT holding them, and
        every later conversion there found it taken). Only a write that holds OUT's lock."""
        if self.url or self.keep_parts or not self.holds_out:
            return
        root = os.path.join(self.path, PARTS_DIR)
        for c in os.listdir(root) if os.path.isdir(root) else []:
            folder = os.path.join(root, c)
            if c not in self.had and not c.startswith(".") and os.path.isdir(folder) and not os.path.islink(folder):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)  # only when empty
        if not self.made:
            return
        # Removed while still held (then closed by the caller), as the engine's locks are.
        with contextlib.suppress(OSError):
            os.remove(os.path.join(root, _LOCK))
        for d in self.made:
            with contextlib.suppress(OSError):
                os.rmdir(d)

    def _failed(self) -> None:
        if self.keep_parts:
            return  # sets in OUT name this write's parts (`_swap`)
        if self.url:
            parts_url = f"{self.url}/{PARTS_DIR}"
            for c in _native.list_remote_dirs(parts_url, self.remote):
                for entry in _native.list_remote_dirs(f"{parts_url}/{c}", self.remote):
                    if entry.startswith(f"part-{self.run}-"):
                        _native.remove_remote(f"{parts_url}/{c}/{entry}", self.remote)
            return
        root = os.path.join(self.path, PARTS_DIR)
        for c in os.listdir(root) if os.path.isdir(root) else []:
            folder = os.path.join(root, c)
            if c.startswith(".") or not os.path.isdir(folder):
                continue  # the write lock
            for entry in os.listdir(folder):
                if entry.startswith(f"part-{self.run}-"):
                    _remove(os.path.join(folder, entry))
        for entry in os.listdir(self.path) if os.path.isdir(self.path) else []:
            if entry.startswith(".") and entry.endswith(f".set-{self.run}"):
                _remove(os.path.join(self.path, entry))


# The name the sink gives a part: `part-<run>-<task>-<nonce>` (see `write`), and the staging
# directory of one a killed task left (`.partial`).
# A set a commit staged or moved aside (`.<column>.set-<run>`, `.<column>.old-<run>`).
_LEFT = re.compile(r"\..+\.(set|old)-([0-9a-f]{12})")


def _is_old_part(path: str, name: str) -> bool:
    """Whether ``path`` is a part an earlier write (or a killed task) left: the sink's name, a
    real directory (not a link) holding nothing but a dataset's files, its schema among them
    unless it is a staging directory."""
    if not _PART.fullmatch(name) or os.path.islink(path) or not os.path.isdir(path):
        return False
    entries = os.listdir(path)
    staging = name.endswith(".partial")
    return (staging or "schema.msgpack" in entries) and all(_is_dataset_file(e) for e in entries)


def _rename(a: str, b: str) -> None:
    """``os.rename``: the commit's one way to move a set (a test fails it here)."""
    os.rename(a, b)


def _tidy(path: str, leftovers: list[str]) -> None:
    """Removes what a committed write no longer needs; a path it cannot remove goes to
    ``leftovers``."""
    try:
        _remove(path)
    except OSError:
        leftovers.append(path)


def _remove(path: str) -> None:
    """Removes a part a failed write left; a file a task still finishing removes meanwhile (its
    lock file, as its writer closes) is gone already, which is what was wanted."""

    def gone(_function: Any, _path: str, error: Any) -> None:
        exc = error if isinstance(error, BaseException) else error[1]
        if not isinstance(exc, FileNotFoundError):
            raise exc

    try:
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
        elif os.path.isdir(path):
            if sys.version_info >= (3, 12):
                shutil.rmtree(path, onexc=gone)
            else:
                shutil.rmtree(path, onerror=gone)
    except FileNotFoundError:
        pass


def write_loaderx(
    ds: Dataset,
    path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    codec: str = "zstd",
    format: str = "v2",
    *,
    ragged: Sequence[str] = (),
    concurrency: int | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    remote: dict[str, Any] | None = None,
) -> dict[str, tuple[int, int]]:
    """Writes the Ray dataset ``ds`` as one loaderx store set per column at ``path/<column>``
    (``columns``: those of the first block when None). ``codec`` and ``format`` are the
    converters' (``"zstd"``, ``"raw"``, ``"lz4"``, ``"zstd_dict"``; ``"v2"`` or ``"v1"``).
    ``ragged`` names columns written ragged even from a block whose records all have one shape
    (Ray makes such a batch a fixed-shape tensor; a ragged part takes it after its first block
    anyway). ``concurrency`` and ``ray_remote_args`` go to ``Dataset.write_datasink``.
    ``path`` may be an ``s3://`` URL, ``remote`` its options (as ``DenseDataset``'s ``remote=``).
    Rerunning it replaces the sets, and removes an earlier write's sets of columns it does not
    write. Returns each column's ``(parts, records)``.

    A column whose blocks disagree (dtype, shape, kind) is a ``ValueError`` naming the column
    and the block; nothing is committed then.
    """
    # Ray drops the rows of up to max_errored_blocks failed blocks and calls the write a
    # success: the sets would read as whole without them (look 88, read, not reached by a run).
    errored = getattr(DataContext.get_current(), "max_errored_blocks", 0)
    if errored != 0:
        raise ValueError(
            f"write_loaderx: Ray's DataContext.max_errored_blocks is {errored}: a failed block's rows would be "
            "left out of sets that read as whole; set it to 0 for the write"
        )
    sink = LoaderxDatasink(path, columns, codec, format, ragged, remote)
    try:
        ds.write_datasink(sink, concurrency=concurrency, ray_remote_args=ray_remote_args)
    finally:
        # On any exit: Ray calls on_write_failed for an Exception only, so a Ctrl-C kept OUT
        # locked for the rest of the driver's life (its parts go with the next write's clean-up).
        _unlock_out(sink.run)
    return dict(sink.committed)
