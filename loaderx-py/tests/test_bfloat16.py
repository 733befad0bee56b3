"""bfloat16 records through the loader and torch: as ``ml_dtypes.bfloat16`` where that package
is installed, as gathers give them (look 153, L153-1: loader batches came as their uint16 bits,
which torch's ``.float()`` then read as integers)."""

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

from loaderx.converter import from_iterator, from_numpy  # noqa: E402
from loaderx.dataloader import DataLoader  # noqa: E402
from loaderx.dataset import DenseDataset, RaggedDataset  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def test_loader_batches_of_bfloat16_are_bfloat16(tmp_path):
    values = (np.arange(120, dtype=np.float32).reshape(40, 3) / 7).astype(BF16)
    from_numpy(tmp_path / "bf", values)
    rows = [(np.arange(k % 5 + 1, dtype=np.float32) / 3).astype(BF16) for k in range(40)]
    from_iterator(tmp_path / "r", iter(rows))
    dense, ragged = DenseDataset(tmp_path / "bf"), RaggedDataset(tmp_path / "r")
    assert dense.dtype == BF16 and ragged.dtype == BF16
    seen = []
    loaders = [
        DataLoader({"x": dense}, batch_size=4, mode="sequential", seed=0),
        DataLoader({"x": dense, "r": ragged}, batch_size=4, mode="sequential", seed=0, pad={"r": None}),
        DataLoader({"x": dense}, batch_size=4, mode="sequential", seed=0, transform=lambda b: seen.append(b["x"].dtype) or b),
    ]
    for loader in loaders:
        batch = next(iter(loader))
        assert batch["x"].dtype == BF16, batch["x"].dtype
        np.testing.assert_array_equal(batch["x"].astype(np.float32), values[:4].astype(np.float32))
        if "r" in batch:
            assert batch["r"].dtype == BF16
            np.testing.assert_array_equal(batch["r"][1, :2].astype(np.float32), rows[1].astype(np.float32))
        loader.close()
    assert seen and set(seen) == {BF16}, "a transform takes bfloat16 too"
    torch = pytest.importorskip("torch")
    from loaderx.torch import to_torch

    t = to_torch(values[:2])
    assert t.dtype == torch.bfloat16
    assert torch.equal(t.float(), torch.from_numpy(values[:2].astype(np.float32)))
