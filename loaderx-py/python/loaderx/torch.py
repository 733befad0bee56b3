"""PyTorch datasets over loaderx (``torch`` is imported here only, when this module is).

- :class:`MapDataset`: a map-style dataset over named loaderx datasets whose ``__getitems__``
  gathers a whole batch in one call per stream; use it with ``collate_fn=collate`` to keep that
  batch as it is (``torch.from_numpy``, no copy).
- :class:`IterableLoader`: the endless :class:`~loaderx.dataloader.DataLoader` as an
  ``IterableDataset`` of tensor dicts, with ``state_dict()`` / ``load_state_dict()`` for
  checkpoints. Use it with ``torch.utils.data.DataLoader(it, batch_size=None)``.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.utils.data

from loaderx._common import indices as _indices
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset

__all__ = ["MapDataset", "IterableLoader", "collate", "to_torch"]


def to_torch(value: Any) -> Any:
    """Arrays (in dicts, lists and tuples) as tensors sharing their memory."""
    if isinstance(value, np.ndarray):
        # torch takes no `ml_dtypes.bfloat16` array: its bits, as torch's bfloat16 (look 153,
        # L153-1).
        if value.dtype.name == "bfloat16":
            return torch.from_numpy(value.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(value)
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torch(v) for v in value)
    return value


class _Gathered(list):
    """What ``__getitems__`` returns: a list of samples for torch's default collate, carrying
    the batch it was cut from for :func:`collate`."""

    def __init__(self, batch: dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        super().__init__({k: v[i] for k, v in batch.items()} for i in range(n))
        self.batch = batch


def collate(samples: Any) -> Any:
    """A ``collate_fn`` that hands a gathered batch over as tensors without a copy (and falls
    back to torch's default collate for anything else)."""
    if isinstance(samples, _Gathered):
        return to_torch(samples.batch)
    return torch.utils.data.default_collate(samples)


class MapDataset(torch.utils.data.Dataset):
    """Map-style: item ``i`` is ``{name: ds[i]}``; ``__getitems__`` gathers a batch in one
    call per stream."""

    def __init__(self, datasets: Mapping[str, DenseDataset]) -> None:
        self.datasets = dict(datasets)
        if not self.datasets:
            raise ValueError("MapDataset needs at least one dataset ({name: dataset})")
        for name, ds in self.datasets.items():
            # Refused when made, as DataLoader refuses it (look 133, L133-2: accepted, then an
            # AttributeError at the first batch, in a worker).
            if not isinstance(ds, (DenseDataset, RaggedDataset)):
                raise TypeError(f"stream {name!r} is a {type(ds).__name__}, not a DenseDataset or RaggedDataset")
        lengths = {len(d) for d in self.datasets.values()}
        if len(lengths) != 1:
            raise ValueError(f"the datasets have different lengths: {sorted(lengths)}")
        self._len = lengths.pop()

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        streams = ", ".join(f"{k}: {d!r}" for k, d in self.datasets.items())
        return f"MapDataset(len={self._len}, {{{streams}}})"

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {k: d[index] for k, d in self.datasets.items()}

    def __getitems__(self, indices: Sequence[int]) -> _Gathered:
        # Checked as every index is (integers only: a float is refused, never rounded down;
        # review S2), once for all the streams.
        idx, _ = _indices(indices, self._len)
        return _Gathered({k: d.gather(idx) for k, d in self.datasets.items()})


class IterableLoader(torch.utils.data.IterableDataset):
    """The endless loader as tensor dicts; ``kwargs`` are :class:`DataLoader`'s.

    Under torch's worker processes (``num_workers=n``) worker ``k`` yields the steps ``k``,
    ``k + n``, ``k + 2n``, ... of the loader it would be alone, so torch's round-robin delivers
    exactly the batches, in exactly the order, that ``num_workers=0`` gives (each step once).
    Each worker runs a loader of its own over every step and keeps its share; a ``transform``
    runs in the worker only on the steps it keeps. Workers start where this object stands:
    its ``state`` (or ``load_state_dict``), or where its in-process loader had got to when
    the workers were forked or pickled (``spawn``: the datasets travel by path). The
    checkpoint of a run with workers is the parent's count of batches taken, as with any
    torch ``IterableDataset``; :meth:`state_dict` sees the parent's own loader only.

    Passes (each ``for`` over torch's ``DataLoader``): with ``num_workers=0`` a pass goes on
    from where the last one stopped (one loader in this process). Workers cannot know how many
    of their batches the last pass took (torch runs them ahead and drops what was not taken),
    so with workers every pass starts where this object stands, as torch starts every pass
    over an ``IterableDataset`` afresh: the same batches again unless the object is moved
    (``load_state_dict``, or a new ``IterableLoader(..., start_step=steps_taken)``). With
    ``persistent_workers=True`` a second pass is refused (``RuntimeError``): its workers would
    replay the first pass, stale, beyond the reach of a move in the parent (look 86).
    :meth:`close` stops the threads and keeps the position: a later pass goes on from it.

    A step's exception (a transform's, a read's) is raised from that step's ``next()`` and the
    pass goes on with the next step, as :class:`DataLoader`'s own ``next()`` does; under
    workers, by the worker the step belongs to. ``datasets`` is a dict of streams or, as for
    :class:`DataLoader`, a mixture: a list of ``(weight, {name: dataset})`` pairs.
    """

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        if isinstance(self._datasets, dict):
            streams = f"streams={list(self._datasets)}"
        else:
            streams = f"mixture of {len(self._datasets)} sources"
        return f"IterableLoader({streams}{', ' if args else ''}{args})"

    def __init__(self, datasets: Mapping[str, Any] | Sequence[tuple[float, Mapping[str, Any]]], **kwargs: Any) -> None:
        super().__init__()
        # A dict of streams, or a mixture as DataLoader takes it: (weight, {name: dataset})
        # pairs, kept as pairs (look 87, F87-2: dict() of them merged equal weights).
        self._datasets: dict[str, Any] | list[tuple[float, dict[str, Any]]]
        if isinstance(datasets, Mapping):
            self._datasets = dict(datasets)
        else:
            pairs = list(datasets) if isinstance(datasets, Sequence) and not isinstance(datasets, (str, bytes)) else []
            for j, source in enumerate(pairs):
                if not (isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], Mapping)):
                    raise TypeError(f"mixture source {j} must be a (weight, {{name: dataset}}) pair")
            if not pairs:
                raise TypeError(
                    "datasets must be a dict of {name: dataset}, or a list of (weight, dict) pairs for a mixture"
                )
            self._datasets = [(weight, dict(streams)) for weight, streams in pairs]
        self._kwargs = kwargs
        self._state: bytes | None = kwargs.pop("state", None)
        # The arguments checked now, by a loader built and closed here, as DataLoader checks
        # them (look 119, L119-8: a bad one was raised only at the first batch, in a worker);
        # a state and a start_step that contradict each other are refused too (look 103, L103-3).
        DataLoader(self._datasets, state=self._state, **{**kwargs, "num_workers": 0}).close()
        if self._state is not None and kwargs.get("start_step") is not None:
            kwargs.pop("start_step")
        self._loader: DataLoader | None = None
        self._pid = os.getpid()
        # The torch worker process that has run a pass over this object, if any.
        self._worker_pass: int | None = None
        # Where the loader stood at the last fork, for a forked child only (look 87, F87-3:
        # written over _state, a fork moved where the parent's own next pass started).
        self._fork_state: bytes | None = None
        _LIVE.add(self)

    def _open(self, **extra: Any) -> DataLoader:
        if self._pid != os.getpid():
            # A forked copy: the parent's loader has no threads here (the snapshot taken
            # before the fork, in _snapshot_before_fork, says where it stood).
            self._loader, self._pid = None, os.getpid()
            if self._fork_state is not None:
                self._state, self._fork_state = self._fork_state, None
            _LIVE.add(self)
        if self._loader is None:
            kwargs = {**self._kwargs, **extra}
            if self._state is not None:
                kwargs.pop("start_step", None)  # where the state stands is the start
            self._loader = DataLoader(self._datasets, state=self._state, **kwargs)
        return self._loader

    def __iter__(self) -> "_Pass":
        # An iterator object, not a generator: a step's exception (a transform's, a read's) is
        # raised from that step's next() and the pass goes on, as DataLoader's own next() does;
        # a generator ends at its first exception (look 87, F87-1: later steps lost, and under
        # n workers every n-th step from then on, without an error).
        return _Pass(self)

    def __len__(self) -> int:
        """The batches a pass yields from where this object stands: a finite pass's
        (``epochs=n``) steps not yet taken, as torch's ``len(DataLoader(self, batch_size=None))``
        and progress bars ask (look 101, L101-6); ``TypeError`` for an endless loader, as
        :class:`DataLoader`'s ``len()``."""
        loader = self._open()
        return len(loader) - min(loader.step, len(loader))

    def __getstate__(self) -> dict[str, Any]:
        # By value, the datasets by path: a spawned worker opens them and starts a loader of its
        # own where this one stands.
        state = self._loader.state() if self._loader is not None and self._pid == os.getpid() else self._state
        return {"datasets": self._datasets, "kwargs": self._kwargs, "state": state}

    def __setstate__(self, d: dict[str, Any]) -> None:
        torch.utils.data.IterableDataset.__init__(self)
        self._datasets, self._kwargs, self._state = d["datasets"], d["kwargs"], d["state"]
        self._loader, self._pid, self._worker_pass, self._fork_state = None, os.getpid(), None, None
        _LIVE.add(self)

    def state_dict(self) -> dict[str, Any]:
        """The loader's position, for a checkpoint."""
        state = self._loader.state() if self._loader is not None and self._pid == os.getpid() else self._state
        return {"loaderx_state": state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict` (the loader restarts at that step). A pass in
        progress in this process ends: its next ``next()`` raises ``RuntimeError`` once."""
        self.close()
        self._state = state["loaderx_state"]

    def close(self) -> None:
        """Stops the loader's threads; a later pass in this process starts where it stood. A
        pass in progress in this process ends: its next ``next()`` raises ``RuntimeError``
        once."""
        if self._loader is not None:
            if self._pid == os.getpid():
                try:
                    self._state = self._loader.state()
                except Exception:  # a loader that failed keeps the position it was given
                    pass
                self._loader.close()
            self._loader = None


class _Pass:
    """One pass over an :class:`IterableLoader`: in this process, its loader from where it
    stands; in torch worker ``k`` of ``n``, the steps ``k``, ``k + n``, ... of a loader of its
    own. Opened at the first ``next()``, as a generator's body would run."""

    def __init__(self, it: IterableLoader) -> None:
        self._it = it
        self._loader: DataLoader | None = None
        self._share: tuple[int, int] | None = None  # (k, n) in worker k of n > 1
        self._transform: Any = None
        self._step = 0  # steps of the loader passed in this pass
        self._failed = False  # the loader failed to open, or was closed: the pass is over
        self._owner: DataLoader | None = None  # the IterableLoader's loader this pass reads

    def __iter__(self) -> "_Pass":
        return self

    def _start(self) -> DataLoader:
        it = self._it
        info = torch.utils.data.get_worker_info()
        if info is None:
            # iter(): DataLoader's own refusal of a pass that is over (look 57) or has no steps.
            return iter(it._open())
        # A torch worker: one pass per process. A persistent worker's second pass would go on
        # from where its loader had run ahead, the steps it had made and torch dropped skipped,
        # and the split off by as many (look 86, F86-1: steps skipped and repeated).
        if it._worker_pass == os.getpid():
            raise RuntimeError(
                "IterableLoader under torch's persistent_workers=True: a second pass would replay "
                "the first from stale workers (they cannot know how many batches it took); pass "
                "persistent_workers=False and move the IterableLoader between passes "
                "(load_state_dict, or a new IterableLoader(..., start_step=steps_taken)), or take "
                "every step in one pass (the loader is endless)"
            )
        if info.num_workers == 1:
            loader = iter(it._open())
        else:
            # The transform runs on the kept steps only (here, not on the loader's threads).
            self._share, self._transform = (info.id, info.num_workers), it._kwargs.get("transform")
            loader = iter(it._open(transform=None))
        # Marked once open: a loader that failed to open is no pass (look 88, F88-1: the next
        # next() blamed persistent_workers).
        it._worker_pass = os.getpid()
        return loader

    def __next__(self) -> Any:
        if self._loader is None:
            if self._failed:
                raise StopIteration
            try:
                self._loader = self._start()
            except Exception:
                # Raised once (by each worker), then the pass is over: a caller going on past
                # errors, as the guide allows, is not held in a loop of the same refusal.
                self._failed = True
                raise
            self._owner = self._it._loader
        if self._it._loader is not self._owner:
            # close() or load_state_dict() in this process ended the loader this pass read
            # (look 89, F89-1: each later next() raised "the loader is closed", for ever).
            self._loader, self._failed = None, True
            raise RuntimeError(
                "this pass ended: close() or load_state_dict() closed its loader; the position "
                "is kept, and a new pass (iter() again) goes on from it"
            )
        if self._share is None:
            return to_torch(next(self._loader))
        k, n = self._share
        while True:
            mine = self._step % n == k
            self._step += 1
            try:
                batch = next(self._loader)
            except StopIteration:
                raise
            except Exception:
                # A step that failed is raised by the worker it belongs to, once; the loader
                # has moved past it, and so has every worker.
                if mine:
                    raise
                continue
            if mine:
                if self._transform is None:
                    return to_torch(batch)
                try:
                    return to_torch(self._transform(batch))
                except StopIteration as e:
                    # As the engine raises it from a transform on its threads (look 124, L124-1;
                    # look 127, L127-1): out of __next__ it ended this worker's stream, its
                    # steps lost for the rest of the run without an error.
                    raise RuntimeError(
                        "the transform raised StopIteration: raised as it was, it would end the loop over the "
                        "loader and drop the rest of the pass"
                    ) from e


# The IterableLoaders of this process: before a fork each one running a loader records where it
# stands, so that the child starts its own loader there.
_LIVE: "weakref.WeakSet[IterableLoader]" = weakref.WeakSet()


def _snapshot_before_fork() -> None:
    for it in list(_LIVE):
        it._fork_state = None
        if it._loader is not None and it._pid == os.getpid():
            try:
                it._fork_state = it._loader.state()
            except Exception:  # a closed loader: the child starts from the state it was given
                pass


os.register_at_fork(before=_snapshot_before_fork)
