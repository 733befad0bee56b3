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
from loaderx.dataset import DenseDataset

__all__ = ["MapDataset", "IterableLoader", "collate", "to_torch"]


def to_torch(value: Any) -> Any:
    """Arrays (in dicts, lists and tuples) as tensors sharing their memory."""
    if isinstance(value, np.ndarray):
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
    """

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._kwargs.items())
        return f"IterableLoader(streams={list(self._datasets)}{', ' if args else ''}{args})"

    def __init__(self, datasets: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__()
        self._datasets = dict(datasets)
        self._kwargs = kwargs
        self._state: bytes | None = kwargs.pop("state", None)
        self._loader: DataLoader | None = None
        self._pid = os.getpid()
        _LIVE.add(self)

    def _open(self, **extra: Any) -> DataLoader:
        if self._pid != os.getpid():
            # A forked copy: the parent's loader has no threads here (the snapshot taken
            # before the fork, in _snapshot_before_fork, says where it stood).
            self._loader, self._pid = None, os.getpid()
            _LIVE.add(self)
        if self._loader is None:
            kwargs = {**self._kwargs, **extra}
            if self._state is not None:
                kwargs.pop("start_step", None)  # where the state stands is the start
            self._loader = DataLoader(self._datasets, state=self._state, **kwargs)
        return self._loader

    def __iter__(self) -> Any:
        info = torch.utils.data.get_worker_info()
        if info is None or info.num_workers == 1:
            for batch in self._open():
                yield to_torch(batch)
            return
        # Worker k of n keeps the steps k, k + n, ... of the whole sequence; the transform runs
        # on the kept steps only (here, not on the loader's threads).
        transform = self._kwargs.get("transform")
        loader = self._open(transform=None)
        k, n = info.id, info.num_workers
        for i, batch in enumerate(loader):
            if i % n == k:
                yield to_torch(batch if transform is None else transform(batch))

    def __getstate__(self) -> dict[str, Any]:
        # By value, the datasets by path: a spawned worker opens them and starts a loader of its
        # own where this one stands.
        state = self._loader.state() if self._loader is not None and self._pid == os.getpid() else self._state
        return {"datasets": self._datasets, "kwargs": self._kwargs, "state": state}

    def __setstate__(self, d: dict[str, Any]) -> None:
        torch.utils.data.IterableDataset.__init__(self)
        self._datasets, self._kwargs, self._state = d["datasets"], d["kwargs"], d["state"]
        self._loader, self._pid = None, os.getpid()
        _LIVE.add(self)

    def state_dict(self) -> dict[str, Any]:
        """The loader's position, for a checkpoint."""
        state = self._loader.state() if self._loader is not None and self._pid == os.getpid() else self._state
        return {"loaderx_state": state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict` (the loader restarts at that step)."""
        self.close()
        self._state = state["loaderx_state"]

    def close(self) -> None:
        """Stops the loader's threads."""
        if self._loader is not None:
            if self._pid == os.getpid():
                self._loader.close()
            self._loader = None


# The IterableLoaders of this process: before a fork each one running a loader records where it
# stands, so that the child starts its own loader there.
_LIVE: "weakref.WeakSet[IterableLoader]" = weakref.WeakSet()


def _snapshot_before_fork() -> None:
    for it in list(_LIVE):
        if it._loader is not None and it._pid == os.getpid():
            try:
                it._state = it._loader.state()
            except Exception:  # a closed loader keeps the state it had
                pass


os.register_at_fork(before=_snapshot_before_fork)
