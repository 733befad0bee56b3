"""Many Python threads sharing one loader, one store, one sampler and one writer (issue 44): no
batch lost or handed out twice, no record lost or torn, the same draws as one thread, no crash.
On a free-threaded CPython the threads really run at once (and the module must leave the GIL
off); on a GIL build the same tests check the locks' hand-offs."""

import sys
import sysconfig
import threading

import numpy as np
import pytest

import loaderx
from loaderx import _native
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.tokens import TokenDataset
from loaderx.zrecord import Zrecord
from loaderx.zsampler import Zsampler

THREADS = 8
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def run_threads(target, n=THREADS):
    """Runs ``target(k)`` on ``n`` threads released together; re-raises the first failure."""
    barrier = threading.Barrier(n)
    errors = []

    def body(k):
        try:
            barrier.wait()
            target(k)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    if errors:
        raise errors[0]


@pytest.mark.skipif(not FREE_THREADED, reason="a GIL build of CPython")
def test_importing_loaderx_leaves_the_gil_off():
    # A module declaring it needs the GIL turns it back on at import (with a RuntimeWarning).
    assert loaderx.__name__ == "loaderx" and _native.__version__
    assert not sys._is_gil_enabled()


@pytest.fixture
def rows(tmp_path):
    # Record i holds i in every one of its 64 int64 cells: a batch says which records it holds.
    n = 3_000
    data = np.repeat(np.arange(n, dtype=np.int64)[:, None], 64, axis=1)
    from_numpy(tmp_path / "x", data, codec="zstd")
    from_numpy(tmp_path / "y", np.arange(n, dtype=np.int64))
    return tmp_path, data


def drain(loader, per_thread):
    """Each thread takes batches until the loader ends; the batches each thread saw."""

    def take(k):
        while True:
            try:
                batch = next(loader)
            except StopIteration:
                return
            per_thread[k].append(batch)

    return take


@pytest.mark.parametrize("transform", [False, True])
def test_one_loader_shared_by_many_threads_hands_out_each_batch_once(rows, transform):
    tmp, data = rows
    x, y = DenseDataset(tmp / "x"), DenseDataset(tmp / "y")
    # The transform runs on the loader's threads: Python code there (in parallel without the GIL)
    # adds a key computed from the batch.
    fn = (lambda b: {**b, "sum": b["x"].sum(axis=1)}) if transform else None
    per_thread = [[] for _ in range(THREADS)]
    with DataLoader({"x": x, "y": y}, batch_size=50, num_workers=4, seed=3, epochs=2, transform=fn) as dl:
        run_threads(drain(dl, per_thread))
        assert dl.step == 2 * 3_000 // 50
    batches = [b for seen in per_thread for b in seen]
    assert len(batches) == 2 * 3_000 // 50
    # Every record twice (two epochs), each batch whole and consistent with its labels.
    labels = np.concatenate([b["y"] for b in batches])
    assert np.array_equal(np.bincount(labels, minlength=3_000), np.full(3_000, 2))
    for b in batches:
        assert np.array_equal(b["x"], data[b["y"]])
        if transform:
            assert np.array_equal(b["sum"], b["y"] * 64)
    # The batches are the ones a single thread gets, step for step.
    with DataLoader({"x": x, "y": y}, batch_size=50, num_workers=4, seed=3, epochs=2) as alone:
        expected = sorted(tuple(b["y"]) for b in alone)
    assert sorted(tuple(b["y"]) for b in batches) == expected


def whole(record):
    """Whether ``record`` is one thread's payload: its "thread K record J " unit repeated."""
    unit = record[: record.index(b" ", record.index(b"record ") + 7) + 1]
    return record == unit * (len(record) // len(unit))


def test_one_store_shared_by_appending_and_gathering_threads(tmp_path):
    store = Zrecord(tmp_path / "s", "w")
    per_thread = 40

    def work(k):
        for j in range(per_thread):
            payload = f"thread {k} record {j} ".encode() * (1 + (k + j) % 50)
            ids = store.append([payload], codec="zstd" if j % 2 else "raw")
            assert store.gather(list(ids)) == [payload]
            # Gathers of what any thread wrote so far never see a torn record.
            n = len(store)
            assert all(whole(rec) for rec in store.gather(list(range(max(0, n - 5), n))))

    run_threads(work)
    records = store.gather(list(range(len(store))))
    assert len(records) == THREADS * per_thread
    heads = sorted(r.split(b" record ")[0] + b":" + r.split(b" ")[3] for r in records)
    assert heads == sorted(f"thread {k}:{j}".encode() for k in range(THREADS) for j in range(per_thread))
    assert store.verify()["damaged"] == 0


def test_one_sampler_shared_by_many_threads_draws_as_one_thread():
    sampler = Zsampler(100_000, 256, "cyclic", seed=7)
    steps = range(0, 4_000, 3)
    expected = {s: sampler.batch(s) for s in steps}
    got = [dict() for _ in range(THREADS)]

    def draw(k):
        out = np.empty(256, dtype=np.uint32)
        for s in steps[k::THREADS]:
            got[k][s] = sampler.batch(s).copy()
            # The caller's own buffer, one per thread.
            assert np.array_equal(sampler.batch(s, out=out), expected[s])

    run_threads(draw)
    merged = {s: b for part in got for s, b in part.items()}
    assert merged.keys() == expected.keys()
    assert all(np.array_equal(merged[s], expected[s]) for s in steps)


def test_one_megatron_writer_shared_by_many_threads_keeps_documents_whole(tmp_path):
    w = _native.MegatronWriter(str(tmp_path / "c"), "u16", False)

    def add(k):
        for j in range(25):
            doc = np.full(10 + (k * 25 + j) % 90, k * 100 + j, dtype="<u2")
            w.add_document(doc.view(np.uint8))

    run_threads(add)
    total = w.finish()
    with pytest.raises(RuntimeError, match="finished"):
        w.finish()
    corpus = TokenDataset(tmp_path / "c.bin")
    assert corpus.documents == THREADS * 25
    # Each document holds one value throughout (none interleaved with another's tokens).
    stream = corpus.read(0, len(corpus))
    assert total == len(stream)
    cuts = np.flatnonzero(np.diff(stream.astype(np.int64))) + 1
    runs = np.split(stream, cuts)
    assert sorted(int(r[0]) for r in runs) == sorted(k * 100 + j for k in range(THREADS) for j in range(25))
    assert all(len(r) == 10 + ((int(r[0]) // 100) * 25 + int(r[0]) % 100) % 90 for r in runs)


def test_a_builder_racing_setters_is_refused_or_applied_never_torn():
    # A builder is for one thread; racing setters are either applied or refused with
    # "Already borrowed" (PyO3's borrow flag), and the builder stays usable.
    b = _native.LoaderBuilder()
    refused = []

    def set_many(k):
        for _ in range(200):
            try:
                b.batch_size(1 + k)
            except RuntimeError as e:
                assert "borrow" in str(e).lower()
                refused.append(e)

    run_threads(set_many)
    b.batch_size(5)
