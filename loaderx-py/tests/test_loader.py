import re
import time

import numpy as np
import pytest

import loaderx
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset

from conftest import run_isolated, threads_now


@pytest.fixture
def streams(tmp_path):
    n = 1000
    from_numpy(tmp_path / "x", np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3))
    from_numpy(tmp_path / "y", np.arange(n, dtype=np.int64))
    return {"x": DenseDataset(tmp_path / "x"), "y": DenseDataset(tmp_path / "y")}


def test_batches_line_up_across_streams(streams):
    with DataLoader(streams, batch_size=64, num_workers=2, seed=7) as loader:
        for _ in range(20):
            b = next(loader)
            assert b["x"].shape == (64, 2, 3) and b["y"].shape == (64,)
            np.testing.assert_array_equal(b["x"][:, 0, 0], b["y"] * 6)


def test_batch_arrays_lend_the_loaders_buffers_until_numpy_lets_them_go(streams):
    # A batch's arrays view the loader's own buffers: let go, they are written over by later
    # batches (no fresh pages each batch); held, viewed or written to, they are never touched.
    with DataLoader(streams, batch_size=64, num_workers=2, seed=7) as loader:
        for _ in range(100):
            b = next(loader)
            np.testing.assert_array_equal(b["x"][:, 0, 0], b["y"] * 6)
            del b
        # 200 arrays delivered; without the loans every one would be a fresh buffer.
        assert loader._native._buffers_allocated() <= 2 * 16
        kept = [next(loader) for _ in range(10)]
        column = kept[1]["x"][:, 1, 2]
        kept[0]["x"][...] = -1
        y0 = kept[0]["y"].copy()
        for _ in range(50):
            next(loader)
        assert (kept[0]["x"] == -1).all()
        np.testing.assert_array_equal(kept[0]["y"], y0)
        for b in kept[1:]:
            np.testing.assert_array_equal(b["x"][:, 0, 0], b["y"] * 6)
        # A view outlives its batch: the buffer stays lent to it.
        want = kept[1]["y"] * 6 + 5
        del kept
        for _ in range(50):
            next(loader)
        np.testing.assert_array_equal(column, want)


def test_cyclic_covers_every_record_once_per_cycle(streams):
    with DataLoader(streams, batch_size=100, mode="cyclic", seed=3) as loader:
        seen = np.concatenate([next(loader)["y"] for _ in range(10)])
    assert sorted(seen.tolist()) == list(range(1000))


def test_modes_by_name_and_by_code(streams):
    for name, code in [("sequential", 0), ("iid", 1), ("cyclic", 2)]:
        with DataLoader(streams, batch_size=16, mode=name, seed=5) as a, DataLoader(streams, batch_size=16, mode=code, seed=5) as b:
            for _ in range(3):
                np.testing.assert_array_equal(next(a)["y"], next(b)["y"])
    with DataLoader(streams, batch_size=4, mode="sequential") as s:
        assert next(s)["y"].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="mode"):
        DataLoader(streams, mode="shuffled")
    with pytest.raises(ValueError, match="mode code 7"):
        DataLoader(streams, mode=7)


def test_state_resumes_exactly(streams):
    with DataLoader(streams, batch_size=32, seed=11) as a:
        for _ in range(7):
            next(a)
        saved = a.state()
        assert a.step == 7
        rest = [next(a)["y"] for _ in range(5)]
    with DataLoader(streams, batch_size=32, seed=11, state=saved) as b:
        assert b.step == 7
        for want in rest:
            np.testing.assert_array_equal(next(b)["y"], want)
    with DataLoader(streams, batch_size=32, seed=11, start_step=7) as c:
        np.testing.assert_array_equal(next(c)["y"], rest[0])
    with pytest.raises(ValueError, match="not a loader state"):
        DataLoader(streams, state=b"garbage")


def test_a_state_restores_only_onto_its_data(streams, tmp_path):
    with DataLoader(streams, batch_size=8) as a:
        saved = a.state()
    from_numpy(tmp_path / "other", np.arange(999, dtype=np.int64))
    with pytest.raises(ValueError, match="belongs to other data"):
        DataLoader({"y": DenseDataset(tmp_path / "other")}, batch_size=8, state=saved)


def test_endless_has_no_length_but_a_pass_has(streams):
    with DataLoader(streams, batch_size=10) as loader:
        with pytest.raises(TypeError, match="endless"):
            len(loader)
    with DataLoader(streams, batch_size=300, epochs=1, shuffle=False) as finite:
        assert len(finite) == 4
        batches = list(finite)
    assert [len(b["y"]) for b in batches] == [300, 300, 300, 100]
    assert np.concatenate([b["y"] for b in batches]).tolist() == list(range(1000))
    # More steps than len() can return (look 75: Python's unnamed "cannot fit 'int'").
    with DataLoader(streams, batch_size=10, epochs=(2**64 - 1) // 100) as huge:
        with pytest.raises(OverflowError, match="more than len"):
            len(huge)
    # More steps than a pass counts: refused, not saturated (look 144).
    with pytest.raises(ValueError, match="more steps than a pass counts"):
        DataLoader(streams, batch_size=10, epochs=2**62)


def test_an_exception_in_the_transform_surfaces_from_next(streams):
    class Boom(Exception):
        pass

    def transform(batch):
        if batch["y"][0] >= 0:
            raise Boom("from the transform")
        return batch

    loader = DataLoader(streams, batch_size=8, transform=transform)
    with pytest.raises(Boom, match="from the transform"):
        next(loader)
    loader.close()


def test_the_transform_runs_off_the_main_thread(streams):
    import threading

    where = set()

    def transform(batch):
        where.add(threading.get_ident())
        return batch["y"].sum()

    with DataLoader(streams, batch_size=8, num_workers=2, transform=transform) as loader:
        total = sum(next(loader) for _ in range(10))
    assert total >= 0 and threading.get_ident() not in where


def test_close_and_with_stop_every_thread(streams):
    base = threads_now()
    loader = DataLoader(streams, batch_size=8, num_workers=4, transform=lambda b: b)
    next(loader)
    # A thread takes its name (what threads_now counts) once it runs: on two cores the last of
    # the four may not have run yet when the first batch is back.
    deadline = time.monotonic() + 30
    while threads_now() < base + 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threads_now() >= base + 4
    loader.close()
    loader.close()
    assert loader.closed and threads_now() == base
    with pytest.raises(RuntimeError, match="closed"):
        next(loader)
    with DataLoader(streams, batch_size=8, num_workers=3) as loader:
        next(loader)
    assert threads_now() == base
    # Collected without close: the finalizer joins the threads.
    loader = DataLoader(streams, batch_size=8, num_workers=3)
    next(loader)
    del loader
    import gc

    gc.collect()
    deadline = time.monotonic() + 5
    while threads_now() != base and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threads_now() == base


def test_shard_takes_a_share_of_each_global_batch(streams):
    parts = []
    for rank in range(2):
        with DataLoader(streams, batch_size=64, seed=1, shard=(rank, 2)) as loader:
            parts.append(next(loader)["y"])
    with DataLoader(streams, batch_size=64, seed=1) as whole:
        everything = next(whole)["y"]
    assert all(len(p) == 32 for p in parts)
    np.testing.assert_array_equal(np.concatenate(parts), everything)


def test_shard_from_the_environment(streams, monkeypatch):
    with DataLoader(streams, batch_size=64, seed=1) as whole:
        everything = next(whole)["y"]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with DataLoader(streams, batch_size=64, seed=1, shard="env") as loader:
        np.testing.assert_array_equal(next(loader)["y"], everything[16:32])
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="RANK"):
        DataLoader(streams, batch_size=64, shard="env")


def test_a_failed_gather_surfaces_from_next(tmp_path):
    from_numpy(tmp_path / "x", np.repeat(np.arange(100, dtype=np.uint8)[:, None], 64, axis=1), codec="lz4")
    chunk = tmp_path / "x" / "0.zr"
    chunk.write_bytes(bytes(b ^ 0x5A for b in chunk.read_bytes()))
    with DataLoader({"x": DenseDataset(tmp_path / "x")}, batch_size=8) as loader:
        with pytest.raises(loaderx.CorruptError, match="record"):
            next(loader)


def test_ragged_streams_padded_in_the_loader(tmp_path):
    seqs = [np.full(i % 5 + 1, i, dtype=np.int32) for i in range(50)]
    from_iterator(tmp_path / "t", seqs)
    from_numpy(tmp_path / "id", np.arange(50, dtype=np.int64))
    loader = DataLoader({"t": RaggedDataset(tmp_path / "t"), "id": DenseDataset(tmp_path / "id")},
                        batch_size=10, pad={"t": None}, pad_value=-1)
    with loader:
        b = next(loader)
    lengths = b["t_lengths"]
    for row, n, i in zip(b["t"], lengths, b["id"]):
        assert n == i % 5 + 1 and (row[:n] == i).all() and (row[n:] == -1).all()
    # Look 131, L131-1: a stream named as an array the loader adds beside another replaced it,
    # or was replaced by it, silently: refused by name, in either order.
    from_numpy(tmp_path / "len", np.arange(1000, 1050, dtype=np.int64))
    # Look 137, L137-1: a ragged stream of that name too, delivered as it is.
    for streams in ({"t": RaggedDataset(tmp_path / "t"), "t_lengths": DenseDataset(tmp_path / "len")},
                    {"t_lengths": DenseDataset(tmp_path / "len"), "t": RaggedDataset(tmp_path / "t")},
                    {"t": RaggedDataset(tmp_path / "t"), "t_lengths": RaggedDataset(tmp_path / "t")}):
        with pytest.raises(ValueError, match='the stream "t_lengths" has the name of an array the loader adds'):
            DataLoader(streams, batch_size=10, pad={"t": None})
    # Look 127: a value the stream's dtype cannot hold is refused when the loader is made.
    for value in (1.5, float("nan"), 2.0**40):
        with pytest.raises(ValueError, match="the pad value .* is not a i32"):
            DataLoader({"t": RaggedDataset(tmp_path / "t")}, batch_size=10, pad={"t": None}, pad_value=value)


def test_bad_arguments(streams):
    with pytest.raises(TypeError):
        DataLoader([streams["x"]])
    with pytest.raises(TypeError, match="DenseDataset"):
        DataLoader({"x": np.zeros(3)})
    with pytest.raises(ValueError, match="batch"):
        DataLoader(streams, batch_size=0)
    with pytest.raises(TypeError, match="callable"):
        DataLoader(streams, transform=3)


def test_a_weighted_mixture(tmp_path):
    from_numpy(tmp_path / "a", np.zeros(1000, dtype=np.int64))
    from_numpy(tmp_path / "b", np.ones(500, dtype=np.int64))
    sources = [(0.75, {"v": DenseDataset(tmp_path / "a")}), (0.25, {"v": DenseDataset(tmp_path / "b")})]
    with DataLoader(sources, batch_size=100, seed=2) as loader:
        ones = sum(int(next(loader)["v"].sum()) for _ in range(20))
    assert ones == 20 * 25  # the quota of each source in each batch is exact
    with pytest.raises(TypeError, match="weight"):
        DataLoader([(0.5, DenseDataset(tmp_path / "a"))])
    with pytest.raises(ValueError, match="weight"):
        DataLoader([(-1.0, {"v": DenseDataset(tmp_path / "a")})])


def test_packing_and_bucketing_ragged_tokens(tmp_path):
    seqs = [np.arange(1, i % 9 + 2, dtype=np.int32) for i in range(300)]
    from_iterator(tmp_path / "t", seqs)
    tokens = RaggedDataset(tmp_path / "t")
    with DataLoader({"t": tokens}, batch_size=8, pack={"t": 32}, seed=1) as loader:
        b = next(loader)
    assert b["t"].shape == (8, 32) and b["t_segments"].shape == (8, 32) and b["t_positions"].shape == (8, 32)
    # Each segment is a whole sample: its positions count from 0 and its tokens from 1.
    for row, seg, pos in zip(b["t"], b["t_segments"], b["t_positions"]):
        for s_id in set(seg.tolist()) - {0}:
            assert (row[seg == s_id] == pos[seg == s_id] + 1).all()
    with DataLoader({"t": tokens}, batch_size=8, bucket={"t": 4}, pad={"t": None}, seed=1) as loader:
        b = next(loader)
    assert b["t"].shape[0] == 8 and b["t_lengths"].max() == b["t"].shape[1]
    with pytest.raises(TypeError, match="one stream"):
        DataLoader({"t": tokens}, pack={"t": 32, "u": 1})
    # Look 96: taken and ignored without pack=, where pad_truncate without pad= is refused.
    with pytest.raises(ValueError, match="pack_split=True splits"):
        DataLoader({"t": tokens}, batch_size=8, pack_split=True)


@pytest.mark.parametrize("call", ["close", "closed"])
def test_close_from_another_thread_while_next_waits_on_a_transform_finishes(tmp_path, call):
    # close() and closed used to wait for the loader's lock with the GIL held while next()
    # held that lock waiting for a batch whose transform needs the GIL: a hang. Run in a child
    # with a timeout so that a regression fails instead of hanging the suite.
    from_numpy(tmp_path / "y", np.arange(100, dtype=np.int64))
    out = run_isolated(f"""
import threading, time
import loaderx
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

started = threading.Event()
def slow(batch):
    started.set()
    time.sleep(0.5)  # Python work holding the GIL now and then
    return batch

loader = DataLoader({{"y": DenseDataset({str(tmp_path / "y")!r})}}, batch_size=4, num_workers=1,
                    prefetch_size=1, transform=slow)
def other():
    started.wait()
    time.sleep(0.1)  # let next() below take the loader and wait for the transform
    print("closed:", loader.closed) if {call!r} == "closed" else loader.close()
closer = threading.Thread(target=other)
closer.start()
try:
    print("batch:", next(loader)["y"].shape)
except loaderx.LoaderStoppedError:
    print("stopped")
except RuntimeError as e:
    print("refused:", e)
closer.join()
loader.close()
print("done", loader.closed)
""", timeout=30)
    assert out.rstrip().endswith("done True"), out


def test_a_step_past_the_last_one_is_a_prompt_error_naming_start_step(tmp_path):
    from_numpy(tmp_path / "a", np.zeros(100, dtype=np.int64))
    from_numpy(tmp_path / "b", np.ones(50, dtype=np.int64))
    # On 6bf9251 a mixture at step 2**64 - 1 wrapped its row numbers: no batch, no error. Run
    # in a child with a timeout so that a hang fails the test.
    out = run_isolated(f"""
import numpy as np
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

a, b = DenseDataset({str(tmp_path / "a")!r}), DenseDataset({str(tmp_path / "b")!r})
mixture = [(0.5, {{"v": a}}), (0.5, {{"v": b}})]
last = (2**64 - 1) // 8 - 1  # rows up to (step + 1) * 8 must be numbered in a u64
for sources, step in [(mixture, 2**64 - 1), (mixture, last + 1), ({{"v": a}}, 2**64 - 1)]:
    try:
        DataLoader(sources, batch_size=8, num_workers=1, start_step=step)
    except ValueError as e:
        assert "start_step" in str(e) and str(step) in str(e), e
        print("refused", step)
    else:
        raise AssertionError(f"step {{step}} was accepted")
for step in [2**64, -1, 1.5]:
    try:
        DataLoader(mixture, batch_size=8, start_step=step)
    except (ValueError, OverflowError, TypeError) as e:
        assert "start_step" in str(e), e
        print("refused", step)
with DataLoader(mixture, batch_size=8, num_workers=1, start_step=last) as loader:
    print("last", loader.step == last, next(loader)["v"].shape)
# A finite pass (13 steps of 8 over 100 records) ends: its end resumes as over, a step past it
# is refused at construction, by name (look 96); NumPy's integers count as ints (look 99).
with DataLoader({{"v": a}}, batch_size=8, epochs=1, start_step=np.uint64(13)) as over:
    print("over", over.step)
for step in [14, np.int64(27)]:
    try:
        DataLoader({{"v": a}}, batch_size=8, epochs=1, start_step=step)
    except ValueError as e:
        assert "start_step" in str(e) and "past the end of this finite pass, step 13" in str(e), e
        print("refused", step)
""", timeout=60)
    assert out.count("refused") == 8 and "last True (8,)" in out and "over 13" in out, out


def test_settings_nothing_reads_are_refused(streams):
    # Look 105: mode= beside epochs= or a mixture was ignored (sequential gave a shuffled pass,
    # L105-2); pad_value= without pad= used nowhere (L105-3); pad_truncate="no" was true (L105-5).
    for mode, shuffle in (("sequential", True), ("iid", True), ("iid", False), ("cyclic", False)):
        with pytest.raises(ValueError, match=f"mode='{mode}' beside epochs=.*shuffle={shuffle} here"):
            DataLoader(streams, batch_size=8, mode=mode, epochs=1, shuffle=shuffle)
    with pytest.raises(ValueError, match="a mixture's are ordered by its weights"):
        DataLoader([(1.0, streams), (1.0, streams)], batch_size=8, mode="iid")
    with DataLoader(streams, batch_size=8, mode="sequential", epochs=1, shuffle=False) as agreed:
        assert next(agreed)["y"].tolist() == list(range(8))
    # NumPy's integers as mode codes, as for every count; weights numbers, not True or "2".
    with DataLoader(streams, batch_size=8, mode=np.int64(0)) as seq:
        assert next(seq)["y"].tolist() == list(range(8))
    for weight in (True, "2"):
        with pytest.raises(TypeError, match="weight must be a number"):
            DataLoader([(weight, streams), (1.0, streams)], batch_size=8)
    # Look 107: pad values that are no number (L107-3); shards of another form, named (L107-4).
    for value in ("5", True, np.array([0.0])):
        with pytest.raises(TypeError, match="pad_value must be a number"):
            DataLoader(streams, batch_size=8, pad_value=value)
    for shard in ("ENV", "rank0", (0, 2, 1)):
        with pytest.raises(ValueError, match="shard must be \\(rank, world\\) or \"env\""):
            DataLoader(streams, batch_size=8, shard=shard)
    with pytest.raises(ValueError, match="pad_value pads the streams pad= names"):
        DataLoader(streams, batch_size=8, pad_value=-100)
    for flag in ("pad_truncate", "shuffle", "drop_last", "pack_split"):
        with pytest.raises(TypeError, match=f"{flag} must be True or False, not 'no'"):
            DataLoader(streams, batch_size=8, epochs=1, **{flag: "no"})
    with DataLoader(streams, batch_size=8, epochs=1, shuffle=False) as ordered:
        assert next(ordered)["y"].tolist() == list(range(8))


def test_a_state_contradicted_by_explicit_arguments_is_refused_naming_them(streams):
    with DataLoader(streams, batch_size=32, seed=11, mode="cyclic") as a:
        next(a)
        saved = a.state()
    for given, named in [({"batch_size": 16}, "batch_size=16"), ({"seed": 12}, "seed=12"),
                         ({"mode": "iid"}, "mode='iid'"), ({"start_step": 5}, "start_step=5")]:
        with pytest.raises(ValueError, match=re.escape(named)):
            DataLoader(streams, state=saved, **given)
    with pytest.raises(ValueError, match="batch_size=16.*seed=12"):
        DataLoader(streams, batch_size=16, seed=12, state=saved)
    # The method, not its bytes: the argument named, and what to do (look 99, L99-2).
    with pytest.raises(TypeError, match=r"state must be the bytes .*method: call it, loader\.state\(\)"):
        DataLoader(streams, state=a.state)
    with pytest.raises(TypeError, match="state must be the bytes .*not str$"):
        DataLoader(streams, state="abc")
    # Arguments that agree with the state, or are left out, are the state's.
    with DataLoader(streams, batch_size=32, seed=11, mode=2, start_step=1, state=saved) as same, \
            DataLoader(streams, state=saved) as bare:
        assert same.batch_size == bare.batch_size == 32 and bare.step == 1
        np.testing.assert_array_equal(next(same)["y"], next(bare)["y"])
    with DataLoader(streams) as defaults:
        assert defaults.batch_size == 256


def test_a_state_moves_onto_the_shard_given_beside_it(streams):
    # shard= beside state= was dropped for the state's own: a resumed rank read rank 0's rows.
    with DataLoader(streams, batch_size=32, seed=11, shard=(0, 2)) as r0:
        next(r0)
        saved = r0.state()
    with DataLoader(streams, state=saved, shard=(1, 2)) as moved, \
            DataLoader(streams, batch_size=32, seed=11, shard=(1, 2), start_step=1) as fresh:
        np.testing.assert_array_equal(next(moved)["y"], next(fresh)["y"])
    # A state of one process resumed on two ranks: together they read its next global batch.
    with DataLoader(streams, batch_size=32, seed=11) as one:
        next(one)
        single = one.state()
        whole = next(one)["y"]
    halves = []
    for rank in (0, 1):
        with DataLoader(streams, state=single, shard=(rank, 2)) as part:
            halves.append(next(part)["y"])
    assert sorted(np.concatenate(halves).tolist()) == sorted(whole.tolist())
    assert not set(halves[0].tolist()) & set(halves[1].tolist())


@pytest.mark.parametrize("use", ["step", "closed", "state", "close", "next"])
def test_a_transform_using_its_own_loader_is_refused_not_a_deadlock(tmp_path, use):
    # It used to wait for the lock the waiting next() holds, from the thread next() waits for:
    # the loader and the process hung. Run in a child with a timeout so a regression fails.
    from_numpy(tmp_path / "y", np.arange(100, dtype=np.int64))
    out = run_isolated(f"""
import threading
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

held = {{}}
ready = threading.Event()
def touch(batch):
    ready.wait()  # the prefetch thread may start before the loader is in `held`
    loader = held["loader"]
    use = {use!r}
    if use == "step":
        loader.step
    elif use == "closed":
        loader.closed
    elif use == "state":
        loader.state()
    elif use == "close":
        loader.close()
    else:
        next(loader)
    return batch

loader = DataLoader({{"y": DenseDataset({str(tmp_path / "y")!r})}}, batch_size=4, num_workers=1,
                    prefetch_size=1, transform=touch)
held["loader"] = loader
ready.set()
try:
    next(loader)
except RuntimeError as e:
    print("refused:", e)
loader.close()
print("closed:", loader.closed)
""")
    assert "refused: a loader's transform cannot use its own loader" in out, out
    assert "closed: True" in out, out


def test_worker_and_prefetch_counts_past_the_limits_are_value_errors(tmp_path):
    from_numpy(tmp_path / "x", np.arange(40, dtype=np.float32).reshape(10, 4))
    ds = DenseDataset(tmp_path / "x")
    for kwargs in ({"num_workers": 2**32 - 1}, {"prefetch_size": 2**32 - 1}):
        with pytest.raises(ValueError, match="at most 1024"):
            DataLoader({"x": ds}, batch_size=4, **kwargs)


def test_a_loader_dropped_inside_its_own_transform_does_not_panic(tmp_path):
    import gc
    import time

    from_numpy(tmp_path / "x", np.arange(400, dtype=np.float32).reshape(100, 4))
    ds = DenseDataset(tmp_path / "x")
    import threading

    holder = []
    errors = []
    # Both prefetch threads run the transform at once without a GIL: one takes the loader.
    taking = threading.Lock()

    def t(b):
        time.sleep(0.02)
        with taking:
            x = holder.pop() if holder else None
        if x is not None:
            try:
                del x  # the last reference goes away on a prefetch thread
            except BaseException as e:  # a PanicException is a BaseException
                errors.append(repr(e))
        return b

    dl = DataLoader({"x": ds}, batch_size=4, num_workers=2, transform=t)
    holder.append(dl)
    del dl
    gc.collect()
    time.sleep(1)
    assert not holder and not errors, errors


def test_ctrl_c_during_next_keeps_the_batch_and_the_state_before_it(tmp_path):
    # Look 111, L111-1: a SIGINT while `next` waited was raised as the call returned, the batch
    # dropped though the state counted it: a checkpoint taken on Ctrl-C resumed past it. The
    # first batch's transform cannot end before the signal is sent, and the signal is sent once
    # the main thread is about to wait: no timing decides the outcome.
    from_numpy(tmp_path / "y", np.arange(40, dtype=np.int64))
    out = run_isolated(f"""
import os, signal, threading, time
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

# A process started in the background by a shell without job control (a CI runner) inherits
# SIGINT ignored, and Python then installs no KeyboardInterrupt handler: installed here.
signal.signal(signal.SIGINT, signal.default_int_handler)
waiting, sent = threading.Event(), threading.Event()
def slow(batch):
    sent.wait(60)
    return batch

def streams():
    return {{"y": DenseDataset({str(tmp_path / "y")!r})}}
loader = DataLoader(streams(), batch_size=4, num_workers=1, prefetch_size=1, shuffle=False, epochs=1,
                    transform=slow)
def interrupt():
    waiting.wait(60)
    time.sleep(0.2)  # next() below waits for the transform by now, or is about to
    os.kill(os.getpid(), signal.SIGINT)
    sent.set()
threading.Thread(target=interrupt).start()
try:
    waiting.set()
    next(loader)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
saved = loader.state()
print("then:", next(loader)["y"].tolist())
loader.close()
with DataLoader(streams(), batch_size=4, shuffle=False, epochs=1, state=saved) as resumed:
    print("resumed:", next(resumed)["y"].tolist())
""")
    assert out.split("\n")[:3] == ["interrupted", "then: [0, 1, 2, 3]", "resumed: [0, 1, 2, 3]"], out


def test_a_transform_raising_stop_iteration_fails_its_step_not_the_pass(tmp_path):
    # Look 124, L124-1: a transform's StopIteration (its next() on an exhausted iterator) was
    # raised from next() as it was: the for loop over the loader ended there, the rest of the
    # pass dropped without a word. Now a RuntimeError caused by it (PEP 479), and the pass goes on.
    from_numpy(tmp_path / "y", np.arange(16, dtype=np.int64))

    def transform(batch):
        if batch["y"][0] == 4:
            next(iter(()))
        return batch["y"].tolist()

    loader = DataLoader({"y": DenseDataset(tmp_path / "y")}, batch_size=4, shuffle=False, epochs=1,
                        num_workers=2, transform=transform)
    got = []
    with loader:
        while True:
            try:
                got.append(next(loader))
            except RuntimeError as e:
                assert "raised StopIteration" in str(e) and isinstance(e.__cause__, StopIteration), e
                got.append("failed")
            except StopIteration:
                break
    assert got == [[0, 1, 2, 3], "failed", [8, 9, 10, 11], [12, 13, 14, 15]]

