"""Stores written from Python read by the Rust CLI, and the reverse; zero-copy; the GIL."""

import sys
import threading

import numpy as np
import pytest

from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset


def test_python_writes_and_the_cli_exports(tmp_path, cli):
    a = np.random.default_rng(0).random((300, 5)).astype(np.float32)
    from_numpy(tmp_path / "d", a, codec="zstd")
    cli("verify", tmp_path / "d")
    cli("export", tmp_path / "d", tmp_path / "back.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "back.npy"), a)


def test_the_cli_converts_and_python_reads(tmp_path, cli):
    a = np.arange(200 * 3, dtype=np.int16).reshape(200, 3)
    np.save(tmp_path / "in.npy", a)
    cli("convert", "npy", tmp_path / "in.npy", tmp_path / "d", "--codec", "lz4")
    np.testing.assert_array_equal(DenseDataset(tmp_path / "d")[:], a)


def test_batches_are_handed_over_without_a_copy(tmp_path):
    from_numpy(tmp_path / "x", np.zeros((100, 8), np.float32))
    with DataLoader({"x": DenseDataset(tmp_path / "x")}, batch_size=10) as loader:
        x = next(loader)["x"]
    # NumPy does not own the batch's memory: it is the engine's buffer, lent.
    base = x
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert not x.flags.owndata and type(base.base).__name__ == "Lent"
    x[:] = 1  # writable, and ours
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x)
    assert np.shares_memory(t.numpy(), x)


def test_gathers_release_the_gil(tmp_path):
    n, width = 4000, 64 * 1024  # 250 MiB, zstd: each gather of all records takes a while
    rng = np.random.default_rng(1)
    from_numpy(tmp_path / "d", rng.integers(0, 4, (n, width), dtype=np.uint8), codec="zstd")
    ds = DenseDataset(tmp_path / "d")
    idx = np.arange(n)
    out = np.empty((n, width), np.uint8)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    t = threading.Thread(target=count)
    try:
        t.start()
        while not ticks:
            pass
        before = len(ticks)
        ds.gather(idx, out=out)
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    # The counting thread ran while the main thread was inside the gather: the GIL was free.
    assert during > 1000, during
