"""A loader in a reference cycle through its transform is collected: its threads joined and its
store let go (looks 119 and 120, L119-1 and L120-1); a loader is never copied or pickled."""

import pytest

from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

import numpy as np

from conftest import run_isolated

# What each trainer's transform does: returns the batch; returns an object that refers back to
# the trainer (the results waiting in the prefetch window hold it); raises (the exception's
# traceback holds the trainer's frame).
TRANSFORMS = {
    "returns the batch": "return batch",
    "returns its owner": "return (self, batch)",
    "raises": "raise ValueError(self.name)",
}


@pytest.mark.parametrize("kind", TRANSFORMS)
def test_a_loader_whose_transform_refers_back_to_it_is_collected(tmp_path, kind):
    # L119-1: a transform holding its loader (a trainer's bound method) made a cycle the
    # collector could not see through the native loader: threads, memory and the store's handles
    # kept for good, and the store's deletes refused. L120-1: so did the transform's results and
    # exceptions waiting in the prefetch window. A collection may find a prefetch thread inside
    # the transform (its frame holds the trainer for that moment): the collector runs again
    # later, as a program's does, a bounded number of times here.
    from_numpy(tmp_path / "y", np.arange(64, dtype=np.int64))
    out = run_isolated(f"""
import gc, os, time
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.zrecord import Zrecord

class Trainer:
    def __init__(self):
        self.name = "trainer"
        self.loader = DataLoader({{"y": DenseDataset({str(tmp_path / "y")!r})}}, batch_size=4,
                                 num_workers=2, prefetch_size=2, seed=0, transform=self.collate)
    def collate(self, batch):
        {TRANSFORMS[kind]}

tasks = lambda: len(os.listdir("/proc/self/task"))
# The engine's own pool starts with the first loader and stays: counted in the base.
with DataLoader({{"y": DenseDataset({str(tmp_path / "y")!r})}}, batch_size=4, seed=0) as first:
    next(first)
base = tasks()
for _ in range(20):
    t = Trainer()
    try:
        next(t.loader)
    except ValueError:
        pass
    del t
collections = 0
while tasks() > base and collections < 200:
    gc.collect()
    collections += 1
    time.sleep(0.01)
print("tasks back:", tasks() <= base)
z = Zrecord({str(tmp_path / "y")!r}, "a")
z.delete([0])
print("deleted:", len(z))
""")
    assert out.split("\n")[:2] == ["tasks back: True", "deleted: 63"], out


def test_a_loader_is_neither_copied_nor_pickled(tmp_path):
    # A copy shared the native loader: closing it closed the original (look 144).
    import copy
    import pickle

    from_numpy(tmp_path / "y", np.arange(100, dtype=np.int64))
    streams = {"y": DenseDataset(tmp_path / "y")}
    with DataLoader(streams, batch_size=10, seed=3) as loader:
        next(loader)
        for clone in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="state="):
                clone(loader)
        assert not loader.closed
        resumed = DataLoader(streams, batch_size=10, seed=3, state=loader.state())
        with resumed:
            assert np.array_equal(next(resumed)["y"], next(loader)["y"])
