"""loaderx.torch, when torch is installed (required where LOADERX_REQUIRE_TORCH is set)."""

import os

import numpy as np
import pytest

if os.environ.get("LOADERX_REQUIRE_TORCH"):
    import torch
else:
    torch = pytest.importorskip("torch")

from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset


@pytest.fixture
def streams(tmp_path):
    from_numpy(tmp_path / "x", np.arange(500 * 4, dtype=np.float32).reshape(500, 4))
    from_numpy(tmp_path / "y", np.arange(500, dtype=np.int64))
    return {"x": DenseDataset(tmp_path / "x"), "y": DenseDataset(tmp_path / "y")}


def test_map_dataset_gathers_whole_batches(streams):
    from loaderx.torch import MapDataset, collate

    ds = MapDataset(streams)
    assert len(ds) == 500 and ds[3]["y"] == 3
    dl = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True, collate_fn=collate,
                                     generator=torch.Generator().manual_seed(0))
    seen = []
    for b in dl:
        assert isinstance(b["x"], torch.Tensor) and b["x"].shape[1:] == (4,)
        assert torch.equal(b["x"][:, 0], (b["y"] * 4).float())
        seen.extend(b["y"].tolist())
    assert sorted(seen) == list(range(500))
    # torch's default collate works too (stacking the per-sample views).
    b = next(iter(torch.utils.data.DataLoader(ds, batch_size=8)))
    assert b["x"].shape == (8, 4)


def test_gathered_batches_share_memory_with_the_tensors(streams):
    from loaderx.torch import MapDataset, collate

    gathered = MapDataset(streams).__getitems__([1, 2, 3])
    tensors = collate(gathered)
    assert np.shares_memory(tensors["x"].numpy(), gathered.batch["x"])


def test_getitems_refuses_float_indices_as_getitem_does(streams):
    # Eighteenth look, S2: a float index was rounded down by the batch path.
    from loaderx.torch import MapDataset

    ds = MapDataset(streams)
    with pytest.raises(TypeError):
        ds.__getitems__([1.9])
    assert ds.__getitems__([-1, 0]).batch["y"].tolist() == [499, 0]


def test_iterable_loader_state_dict_resumes(streams):
    from loaderx.torch import IterableLoader

    it = IterableLoader(streams, batch_size=16, seed=3, num_workers=2)
    dl = torch.utils.data.DataLoader(it, batch_size=None)
    stream = iter(dl)
    for _ in range(5):
        next(stream)
    saved = it.state_dict()
    want = [next(stream)["y"] for _ in range(3)]
    it.close()

    again = IterableLoader(streams, batch_size=16, seed=3, num_workers=2)
    again.load_state_dict(saved)
    stream = iter(torch.utils.data.DataLoader(again, batch_size=None))
    for w in want:
        b = next(stream)
        assert isinstance(b["y"], torch.Tensor) and torch.equal(b["y"], w)
    again.close()


def test_a_finite_iterable_loader_has_the_length_of_its_pass(streams):
    # Look 101, L101-6: len() of a finite IterableLoader was a TypeError (no __len__), so
    # torch's DataLoader over it had none either (progress bars lose their total).
    from loaderx.torch import IterableLoader

    it = IterableLoader(streams, batch_size=16, num_workers=1, epochs=2)
    dl = torch.utils.data.DataLoader(it, batch_size=None)
    assert len(it) == len(dl) == 2 * 32  # 500 records: 32 steps an epoch, the last short
    stream = iter(dl)
    for _ in range(5):
        next(stream)
    assert len(it) == 59, "the batches a pass from here yields"
    assert len(list(stream)) == 59 and len(it) == 0
    it.close()
    endless = IterableLoader(streams, batch_size=16, num_workers=1)
    with pytest.raises(TypeError, match="endless"):
        len(endless)
    # Look 103, L103-3: a state beside a start_step that contradicts it won without a word;
    # refused, as DataLoader refuses it. One that agrees is taken.
    for _ in range(3):
        next(iter(torch.utils.data.DataLoader(endless, batch_size=None)))
    saved = endless.state_dict()["loaderx_state"]
    endless.close()
    with pytest.raises(ValueError, match="start_step=6"):
        IterableLoader(streams, batch_size=16, state=saved, start_step=6)
    def first(it):
        batch = next(iter(torch.utils.data.DataLoader(it, batch_size=None)))
        it.close()
        return batch["y"].tolist()

    agreed = IterableLoader(streams, batch_size=16, num_workers=1, state=saved, start_step=3)
    assert first(agreed) == first(IterableLoader(streams, batch_size=16, num_workers=1, state=saved))


def test_close_or_load_state_dict_in_a_pass_ends_it_once_and_keeps_the_position(streams):
    from loaderx.torch import IterableLoader

    # Look 89, F89-1: the pass went on calling the closed loader, each next() raising "the
    # loader is closed" for ever.
    it = IterableLoader(streams, batch_size=2, epochs=1, shuffle=False, num_workers=1)
    for end in ("close", "load"):
        stream = iter(torch.utils.data.DataLoader(it, batch_size=None))
        taken = [next(stream)["y"].tolist() for _ in range(3)]
        saved = it.state_dict()
        if end == "close":
            it.close()
        else:
            it.load_state_dict({"loaderx_state": None})
        with pytest.raises(RuntimeError, match="this pass ended"):
            next(stream)
        with pytest.raises(StopIteration):
            next(stream)
        again = iter(torch.utils.data.DataLoader(it, batch_size=None))
        if end == "close":
            assert taken == [[0, 1], [2, 3], [4, 5]]
            assert next(again)["y"].tolist() == [6, 7]
        else:
            assert next(again)["y"].tolist() == [0, 1]
        it.load_state_dict(saved)
    it.close()


def _torch_workers_script(tmp_path, context, body):
    """A child interpreter's script: datasets x (rows of 1,024 float32: gathers large enough
    that the engine splits them over its pool) and y, a read in the parent first, then
    `body` under torch's DataLoader with two workers started by `context`."""
    return f"""
import numpy as np, torch
from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset
from loaderx.dataloader import DataLoader as LxLoader
from loaderx.torch import IterableLoader, MapDataset, collate

n = 600
from_numpy({str(tmp_path / "x")!r}, np.repeat(np.arange(n, dtype=np.float32)[:, None], 1024, axis=1), codec="raw")
from_numpy({str(tmp_path / "y")!r}, np.arange(n, dtype=np.int64))
streams = {{"x": DenseDataset({str(tmp_path / "x")!r}), "y": DenseDataset({str(tmp_path / "y")!r})}}
# A read in the parent first (it starts the engine's pool), a large one too.
assert streams["y"][0] == 0 and streams["x"][np.arange(0, n, 2)].shape == (n // 2, 1024)
context = {context!r}
{body}
"""


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_map_dataset_under_torch_workers_after_a_read_in_the_parent(tmp_path, context):
    from conftest import run_isolated

    out = run_isolated(_torch_workers_script(tmp_path, context, """
ds = MapDataset(streams)
assert ds[5]["y"] == 5
dl = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=2, collate_fn=collate,
                                 multiprocessing_context=context, generator=torch.Generator().manual_seed(0))
seen = []
for b in dl:
    assert torch.equal(b["x"][:, 7], b["y"].float())
    seen.extend(b["y"].tolist())
assert sorted(seen) == list(range(n)), len(seen)
print("map ok")
"""), timeout=120)
    assert "map ok" in out


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_iterable_loader_under_torch_workers_yields_each_step_once_in_order(tmp_path, context, monkeypatch):
    from conftest import run_isolated

    monkeypatch.chdir(tmp_path)
    out = run_isolated(_torch_workers_script(tmp_path, context, """
import sys, pathlib
# A transform spawned workers can import (a function of __main__ from -c is not).
pathlib.Path(context + "_transforms.py").write_text("def doubled(b):\\n    return {'y2': b['y'] * 2}\\n")
sys.path.insert(0, ".")
doubled = __import__(context + "_transforms").doubled

with LxLoader(streams, batch_size=16, seed=3, num_workers=2) as ref:
    want = [next(ref)["y"] for _ in range(14)]
it = IterableLoader(streams, batch_size=16, seed=3, num_workers=2)
# The parent reads from it first: the workers go on from there.
parent = iter(torch.utils.data.DataLoader(it, batch_size=None))
for w in want[:3]:
    assert torch.equal(next(parent)["y"], torch.from_numpy(w))
dl = torch.utils.data.DataLoader(it, batch_size=None, num_workers=2, multiprocessing_context=context)
got = []
for b in dl:
    got.append(b["y"])
    if len(got) == 11:
        break
for k, (g, w) in enumerate(zip(got, want[3:])):
    assert torch.equal(g, torch.from_numpy(w)), f"batch {k}: {g} != {w}"
# A transform runs in the workers, on each worker's own steps.
it2 = IterableLoader(streams, batch_size=16, seed=3, num_workers=1, transform=doubled)
dl2 = torch.utils.data.DataLoader(it2, batch_size=None, num_workers=2, multiprocessing_context=context)
for k, b in zip(range(6), dl2):
    assert torch.equal(b["y2"], torch.from_numpy(want[k] * 2)), k
print("iterable ok")
"""), timeout=120)
    assert "iterable ok" in out


def test_datasets_pickle_by_path_with_their_views(tmp_path):
    import pickle

    from loaderx.dataset import RaggedDataset
    from loaderx.converter import from_iterator
    from loaderx.torch import IterableLoader, MapDataset

    from_numpy(tmp_path / "d", np.arange(100, dtype=np.int32))
    from_iterator(tmp_path / "r", (np.full(i % 3 + 1, i, dtype=np.int16) for i in range(50)))
    d, r = DenseDataset(tmp_path / "d"), RaggedDataset(tmp_path / "r")
    view = d.select([5, 3, 99]).split(0.5, seed=4)[1]
    for ds in [d, view, r.split(0.3, seed=1)[0], r.select(np.array([7, 1]))]:
        back = pickle.loads(pickle.dumps(ds))
        assert type(back) is type(ds) and back.path == ds.path and len(back) == len(ds)
        a, b = ds[np.arange(len(ds))], back[np.arange(len(back))]
        if isinstance(ds, DenseDataset):
            np.testing.assert_array_equal(a, b)
        else:
            assert all(np.array_equal(x, y) for x, y in zip(a, b))
    m = pickle.loads(pickle.dumps(MapDataset({"d": d})))
    assert m[7]["d"] == 7
    it = IterableLoader({"d": d}, batch_size=4, seed=1, num_workers=1)
    first = next(iter(it))["d"]
    again = pickle.loads(pickle.dumps(it))  # goes on where `it` stands
    assert not torch.equal(next(iter(again))["d"], first)
    it.close()


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_iterable_loader_passes_under_torch_workers_never_skip_or_repeat_steps(tmp_path, context):
    # Look 86, F86-1: a persistent worker's second pass went on from where its loader had run
    # ahead, split by a count restarted at 0: steps skipped and repeated, no error.
    from conftest import run_isolated

    out = run_isolated(_torch_workers_script(tmp_path, context, """
import itertools
with LxLoader(streams, batch_size=16, seed=3, num_workers=2) as ref:
    want = [next(ref)["y"] for _ in range(6)]
def one_pass(dl):
    return [b["y"] for b in itertools.islice(dl, 6)]
def same(got):
    return len(got) == 6 and all(torch.equal(g, torch.from_numpy(w)) for g, w in zip(got, want))
for workers in (1, 2):
    it = IterableLoader(streams, batch_size=16, seed=3, num_workers=1)
    dl = torch.utils.data.DataLoader(it, batch_size=None, num_workers=workers, persistent_workers=True,
                                     multiprocessing_context=context)
    assert same(one_pass(dl)), workers
    try:
        one_pass(dl)
        raise AssertionError("a second pass over persistent workers was not refused")
    except RuntimeError as e:
        assert "persistent_workers=False" in str(e), e
    # Fresh workers each pass: each starts where the IterableLoader stands (documented).
    dl = torch.utils.data.DataLoader(it, batch_size=None, num_workers=workers, multiprocessing_context=context)
    assert same(one_pass(dl)) and same(one_pass(dl)), workers
print("passes ok")
"""), timeout=180)
    assert "passes ok" in out


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_steps_exception_under_iterable_loader_skips_that_step_only(tmp_path, context, monkeypatch):
    # Look 87, F87-1: the exception ended the pass's generator: the pass stopped (0 or 1
    # workers), or under n workers every n-th step from then on was lost without an error.
    from conftest import run_isolated

    monkeypatch.chdir(tmp_path)
    out = run_isolated(_torch_workers_script(tmp_path, context, """
import sys, pathlib
pathlib.Path(context + "_boom.py").write_text(
    "def boom(b):\\n    if int(b['y'][0]) == 32:\\n        raise ValueError('boom')\\n"
    # Look 127, L127-1: a StopIteration (a next() on an exhausted iterator) fails its step too.
    "    if int(b['y'][0]) == 96:\\n        next(iter(()))\\n    return b\\n")
sys.path.insert(0, ".")
boom = __import__(context + "_boom").boom
kw = dict(batch_size=16, mode="sequential", epochs=1, shuffle=False, num_workers=1)
def firsts(dl):
    got, errors, it = [], 0, iter(dl)
    while True:
        try:
            b = next(it)
        except StopIteration:
            return got, errors
        except (ValueError, RuntimeError) as e:
            # From a worker, torch raises its own RuntimeError, the worker's traceback its text.
            assert isinstance(e, ValueError) or "raised StopIteration" in str(e), e
            errors += 1
            continue
        got.append(int(b["y"][0]))
want = ([k for k in range(0, n, 16) if k not in (32, 96)], 2)
assert firsts(LxLoader(streams, transform=boom, **kw)) == want
for workers in (0, 1, 2, 3):
    it = IterableLoader(streams, transform=boom, **kw)
    dl = torch.utils.data.DataLoader(it, batch_size=None, num_workers=workers,
                                     multiprocessing_context=context if workers else None)
    assert firsts(dl) == want, (workers, firsts(dl))
print("steps ok")
"""), timeout=180)
    assert "steps ok" in out


def test_iterable_loader_takes_a_mixture_and_close_keeps_its_position_across_forks(tmp_path, streams):
    from loaderx.dataloader import DataLoader as LxLoader
    from loaderx.torch import IterableLoader

    # Look 87, F87-2: a mixture's pairs went through dict(): equal weights merged into one
    # source, refused late in a worker as a stream named 0.5.
    from_numpy(tmp_path / "z", -np.arange(300, dtype=np.int64))
    mixture = [(0.5, {"y": streams["y"]}), (0.5, {"y": DenseDataset(tmp_path / "z")})]
    it = IterableLoader(mixture, batch_size=8, seed=1, num_workers=1)
    assert "mixture of 2 sources" in repr(it)
    with LxLoader(mixture, batch_size=8, seed=1, num_workers=1) as ref:
        want = [next(ref)["y"] for _ in range(4)]
    got = [b["y"] for _, b in zip(range(4), torch.utils.data.DataLoader(it, batch_size=None))]
    assert len(got) == 4 and all(torch.equal(g, torch.from_numpy(w)) for g, w in zip(got, want))
    with pytest.raises(TypeError, match=r"mixture source 1 must be a \(weight"):
        IterableLoader([(0.5, {"y": streams["y"]}), 0.5])
    it.close()

    # A second pass over a finished finite pass is refused, as a DataLoader's second `for` is
    # (look 57), not an empty pass (so it was, briefly, once a pass became an iterator object).
    once = IterableLoader({"y": streams["y"]}, batch_size=100, epochs=1, num_workers=1)
    dl = torch.utils.data.DataLoader(once, batch_size=None)
    assert len(list(dl)) == 5
    with pytest.raises(RuntimeError, match="pass is over"):
        list(dl)
    once.close()

    # Look 87, F87-3: a fork wrote where the loader stood over the object's position, so a
    # pass after close() started there in a process that had forked, at 0 in one that had not.
    if not hasattr(os, "fork"):
        return
    it = IterableLoader(streams, batch_size=16, seed=3, num_workers=1)
    dl = torch.utils.data.DataLoader(it, batch_size=None)
    first = [b["y"] for _, b in zip(range(3), dl)]
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    more = [b["y"] for _, b in zip(range(4), dl)]
    it.close()
    after = [b["y"] for _, b in zip(range(2), dl)]
    with LxLoader(streams, batch_size=16, seed=3, num_workers=1) as ref:
        want = [torch.from_numpy(next(ref)["y"]) for _ in range(9)]
    assert len(first + more + after) == 9
    assert all(torch.equal(g, w) for g, w in zip(first + more + after, want))
    it.close()


def test_a_loader_that_fails_to_open_is_raised_once_per_worker_then_the_pass_ends(tmp_path):
    # Look 88, F88-1: a worker whose loader failed to open blamed persistent_workers at its
    # next next() (off here); and a pass of a loader that cannot open never ended.
    from conftest import run_isolated

    out = run_isolated(_torch_workers_script(tmp_path, "fork", """
# Look 119, L119-8: arguments are checked when it is made.
try:
    IterableLoader(streams, batch_size=10, epochs=1, shard=(3, 2), num_workers=1)
    raise AssertionError("made with a shard past the world")
except ValueError as e:
    assert "rank 3 is not below world 2" in str(e), e
# A loader that fails to open in the workers all the same (what they open changed after).
it = IterableLoader(streams, batch_size=10, epochs=1, shard=(1, 2), num_workers=1)
it._kwargs["shard"] = (3, 2)
for workers in (0, 2):
    errors = []
    dl = iter(torch.utils.data.DataLoader(it, batch_size=None, num_workers=workers,
                                          multiprocessing_context=context if workers else None))
    for _ in range(10):
        try:
            next(dl)
            raise AssertionError("a batch from a loader that cannot open")
        except StopIteration:
            break
        except ValueError as e:
            errors.append(str(e))
    assert len(errors) == max(workers, 1), (workers, errors)
    assert all("rank 3 is not below world 2" in e for e in errors), errors
print("open ok")
"""), timeout=120)
    assert "open ok" in out
