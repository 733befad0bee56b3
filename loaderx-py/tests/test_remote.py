"""Datasets on S3-compatible storage: s3s-fs on 127.0.0.1 (loaderx-core's example
`s3_test_server`, started and stopped by each test). Required where LOADERX_REQUIRE_S3 is set."""

import os
import signal
import shutil
import subprocess
import time

import numpy as np
import pytest

import loaderx
from loaderx import _native
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset

from conftest import REPO

SECRET = "loaderx-test-secret"


def server_binary():
    exe = os.environ.get("LOADERX_S3_SERVER") or str(REPO / "target" / "debug" / "examples" / "s3_test_server")
    if os.path.isfile(exe) and _native.REMOTE:
        return exe
    if os.environ.get("LOADERX_REQUIRE_S3"):
        raise RuntimeError(f"LOADERX_REQUIRE_S3 is set, but remote={_native.REMOTE} and {exe} exists={os.path.isfile(exe)}")
    pytest.skip("no S3 test server (cargo build -p loaderx-core --example s3_test_server) or a build without remote")


@pytest.fixture
def s3(tmp_path):
    exe = server_binary()
    root = tmp_path / "s3"
    (root / "bucket").mkdir(parents=True)
    proc = subprocess.Popen([exe, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("http://127.0.0.1:"), endpoint
        yield root / "bucket", {
            "endpoint": endpoint,
            "region": "us-east-1",
            "access_key_id": "loaderx-test",
            "secret_access_key": SECRET,
            "allow_http": True,
            "retries": 1,
            "timeout": 10,
        }
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_dense_and_ragged_datasets_read_from_s3(tmp_path, s3):
    bucket, opts = s3
    a = np.arange(500 * 6, dtype=np.float32).reshape(500, 6)
    from_numpy(tmp_path / "d", a, codec="zstd")
    shutil.copytree(tmp_path / "d", bucket / "sets" / "d")
    seqs = [np.full(i % 4 + 1, i, dtype=np.int16) for i in range(100)]
    from_iterator(tmp_path / "r", seqs, codec="lz4")
    shutil.copytree(tmp_path / "r", bucket / "sets" / "r")

    ds = DenseDataset("s3://bucket/sets/d", remote=opts)
    assert len(ds) == 500 and ds.item_shape == (6,)
    np.testing.assert_array_equal(ds[[499, 0, 250]], a[[499, 0, 250]])
    rs = RaggedDataset("s3://bucket/sets/r", remote=opts)
    assert [r.tolist() for r in rs[[5, 6]]] == [seqs[5].tolist(), seqs[6].tolist()]
    with DataLoader({"x": ds}, batch_size=50, num_workers=2, seed=3) as loader:
        b = next(loader)
    assert b["x"].shape == (50, 6) and np.isin(b["x"][:, 0] // 6, np.arange(500)).all()


def test_remote_errors_never_show_the_secret(s3):
    _, opts = s3
    with pytest.raises((FileNotFoundError, loaderx.Error)) as e:
        DenseDataset("s3://bucket/nothing-here", remote=opts)
    assert SECRET not in str(e.value)
    bad = dict(opts, secret_access_key="wrong-" + SECRET)
    with pytest.raises(loaderx.Error) as e:
        DenseDataset("s3://bucket/nothing-here", remote=bad)
    assert SECRET not in str(e.value)


def test_credentials_written_into_a_url_are_never_shown(tmp_path):
    # Look 64: a secret holding `/` (half of AWS's) was quoted whole by the refusal meant to hide
    # it, and a store opened by such a URL named it unscrubbed.
    from loaderx.zrecord import Zrecord

    for url in ["s3://AKIAEXAMPLE:wJalrXUtnFEMI/K7MDENG@mybucket/data", "s3://user:pa(ss@mybucket/x"]:
        opens = [lambda: Zrecord(url, "r")]
        if _native.REMOTE:
            opens += [lambda: DenseDataset(url), lambda: RaggedDataset(url)]
        for open_ in opens:
            with pytest.raises(Exception) as e:
                open_()
            said = str(e.value)
            assert "wJalr" not in said and "AKIAEXAMPLE" not in said and "pa(ss" not in said, said
            assert "<redacted>@mybucket" in said, said


def test_remote_options_are_checked():
    if not _native.REMOTE:
        pytest.skip("a build without remote")
    with pytest.raises(ValueError, match='unknown remote option "endpiont"'):
        DenseDataset("s3://bucket/x", remote={"endpiont": "http://127.0.0.1:1"})
    with pytest.raises(ValueError, match="together"):
        DenseDataset("s3://bucket/x", remote={"access_key_id": "k"})


@pytest.mark.parametrize("cached", [False, True])
def test_a_remote_dataset_read_in_forked_children_and_theirs(tmp_path, s3, cached):
    # A child forked after the parent's first read (torch's fork workers) used the parent's
    # runtime as the fork left it, without its worker threads: every child's first read waited
    # for good (3 of 3). Each process now reaches the store through a client of its own; the
    # parent's is never dropped in a child (its runtime would wait for threads not there).
    bucket, opts = s3
    a = np.arange(500 * 6, dtype=np.float32).reshape(500, 6)
    from_numpy(tmp_path / "d", a, codec="zstd")
    shutil.copytree(tmp_path / "d", bucket / "d")
    if cached:
        opts = dict(opts, cache_dir=str(tmp_path / "cache"), cache_bytes=1 << 26)
    ds = DenseDataset("s3://bucket/d", remote=opts)
    np.testing.assert_array_equal(ds[[1, 2]], a[[1, 2]])
    statuses = []
    for k in range(3):
        pid = os.fork()
        if pid == 0:
            # Never back into pytest from a child, whatever happens here.
            try:
                signal.alarm(30)
                ok = np.array_equal(ds[[499, 0, 250 + k]], a[[499, 0, 250 + k]])
                # A child of the child: its own client again, then the dataset dropped in both.
                grandchild = os.fork()
                if grandchild == 0:
                    try:
                        signal.alarm(30)
                        good = np.array_equal(ds[[7, 8]], a[[7, 8]])
                        del ds
                        os._exit(0 if good else 3)
                    finally:
                        os._exit(4)
                ok = ok and os.waitpid(grandchild, 0)[1] == 0 and np.array_equal(ds[[9]], a[[9]])
                del ds
                os._exit(0 if ok else 3)
            finally:
                os._exit(4)
        statuses.append(os.waitpid(pid, 0)[1])
    assert statuses == [0, 0, 0]
    np.testing.assert_array_equal(ds[[3, 4]], a[[3, 4]])


def test_children_forked_while_parent_threads_fill_the_page_cache(tmp_path, s3):
    # Look 65, L65-2: the page cache's stripe locks are flocks, which a child forked while a
    # parent thread held one shares; released by closing only, the lock lived on in the child's
    # copy and the child's own request for it waited for good (4 of 48 children). Now the lock
    # is released explicitly, for every copy.
    import threading

    bucket, opts = s3
    a = np.arange(4000 * 64, dtype=np.int32).reshape(4000, 64)
    from_numpy(tmp_path / "d", a, codec="zstd")
    shutil.copytree(tmp_path / "d", bucket / "d")
    opts = dict(opts, cache_dir=str(tmp_path / "cache"), cache_bytes=1 << 20)
    ds = DenseDataset("s3://bucket/d", remote=opts)
    stop, bad = threading.Event(), []

    def reader(seed):
        r = np.random.default_rng(seed)
        while not stop.is_set():
            i = r.integers(0, 4000, 32)
            if not (ds[i] == a[i]).all():
                bad.append(i)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    statuses = []
    try:
        for k in range(12):
            time.sleep(0.05)
            pid = os.fork()
            if pid == 0:
                try:
                    signal.alarm(30)
                    r = np.random.default_rng(100 + k)
                    ok = all((ds[i] == a[i]).all() for i in (r.integers(0, 4000, 64) for _ in range(20)))
                    os._exit(0 if ok else 3)
                finally:
                    os._exit(4)
            statuses.append(os.waitpid(pid, 0)[1])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert statuses == [0] * 12 and not bad, statuses
