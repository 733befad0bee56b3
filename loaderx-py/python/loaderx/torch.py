"""PyTorch datasets over loaderx (``torch`` is imported here only, when this module is).

- :class:`MapDataset`: a map-style dataset over named loaderx datasets whose ``__getitems__``
  gathers a whole batch in one call per stream; use it with ``collate_fn=collate`` to keep that
  batch as it is (``torch.from_numpy``, no copy).
- :class:`IterableLoader`: the endless :class:`~loaderx.dataloader.DataLoader` as an
  ``IterableDataset`` of tensor dicts, with ``state_dict()`` / ``load_state_dict()`` for
  checkpoints. Use it with ``torch.utils.data.DataLoader(it, batch_size=None)``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.utils.data

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

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        return {k: d[index] for k, d in self.datasets.items()}

    def __getitems__(self, indices: Sequence[int]) -> _Gathered:
        idx = np.asarray(indices, dtype=np.int64)
        return _Gathered({k: d.gather(idx) for k, d in self.datasets.items()})


class IterableLoader(torch.utils.data.IterableDataset):
    """The endless loader as tensor dicts; ``kwargs`` are :class:`DataLoader`'s."""

    def __init__(self, datasets: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__()
        self._datasets = dict(datasets)
        self._kwargs = kwargs
        self._state: bytes | None = kwargs.pop("state", None)
        self._loader: DataLoader | None = None

    def _open(self) -> DataLoader:
        if self._loader is None:
            self._loader = DataLoader(self._datasets, state=self._state, **self._kwargs)
        return self._loader

    def __iter__(self) -> Any:
        loader = self._open()
        for batch in loader:
            yield to_torch(batch)

    def state_dict(self) -> dict[str, Any]:
        """The loader's position, for a checkpoint."""
        state = self._loader.state() if self._loader is not None else self._state
        return {"loaderx_state": state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict` (the loader restarts at that step)."""
        self.close()
        self._state = state["loaderx_state"]

    def close(self) -> None:
        """Stops the loader's threads."""
        if self._loader is not None:
            self._loader.close()
            self._loader = None
