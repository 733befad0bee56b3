import numpy as np
import pytest

import loaderx
from loaderx.zrecord import Zrecord


@pytest.mark.parametrize("fmt", ["v1", "v2"])
def test_append_gather_delete_compact(tmp_path, fmt):
    z = Zrecord(tmp_path / "z", format=fmt)
    recs = [bytes([i % 256]) * (i * 7 % 300) for i in range(200)]
    assert z.append(recs[:100], codec="zstd") == range(0, 100)
    assert z.append(recs[100:], codec="raw") == range(100, 200)
    assert len(z) == 200 and z.format == fmt
    assert z.gather([5, 150, 0]) == [recs[5], recs[150], recs[0]]
    assert z.lengths([3, 4]).tolist() == [len(recs[3]), len(recs[4])]
    buf, offsets = z.gather_into([10, 11, 12])
    assert bytes(buf) == recs[10] + recs[11] + recs[12]
    assert offsets.tolist() == [0, len(recs[10]), len(recs[10]) + len(recs[11]), len(buf)]
    z.delete([0, 1])
    assert len(z) == 198 and z.gather([0, 1]) == [recs[198], recs[199]]
    before = z.stats()
    report = z.compact()
    assert report["bytes_after"] <= report["bytes_before"] == before["chunk_bytes"]
    assert z.stats()["chunk_bytes"] == z.stats()["live_bytes"]
    assert sorted(z.gather(range(len(z)))) == sorted(recs[2:])
    assert z.verify()["ok"]
    z.sync()
    assert Zrecord(tmp_path / "z", mode="r").gather([5]) == [recs[5]]


def test_read_only_and_modes(tmp_path):
    Zrecord(tmp_path / "z").append([b"a"])
    ro = Zrecord(tmp_path / "z", mode="r")
    with pytest.raises(loaderx.Error, match="read-only"):
        ro.append([b"b"])
    # Not replaced under a live reader (it would read the new store through its old index).
    with pytest.raises(loaderx.LockedError, match="readers"):
        Zrecord(tmp_path / "z", mode="w")
    assert ro.gather([0]) == [b"a"]
    del ro
    assert len(Zrecord(tmp_path / "z", mode="w")) == 0
    with pytest.raises(ValueError, match="mode"):
        Zrecord(tmp_path / "z", mode="x")
    with pytest.raises(FileNotFoundError):
        Zrecord(tmp_path / "nothing", mode="r")


def test_a_store_set_is_not_opened_to_append_or_create(tmp_path):
    # Look 75's L75-1: Zrecord(set, "a") made a store inside the set's directory, whose appends
    # no reader of the set saw. Refused; the set reads as before.
    from loaderx import _native
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    for p in range(2):
        from_numpy(tmp_path / f"p{p}", np.arange(3, dtype=np.int64) + 10 * p)
    _native.stitch([str(tmp_path / "p0"), str(tmp_path / "p1")], str(tmp_path / "set"))
    for mode in ("a", "w"):
        with pytest.raises(FileExistsError, match="is a store set"):
            Zrecord(tmp_path / "set", mode=mode)
    assert not (tmp_path / "set" / "index.zr").exists()
    np.testing.assert_array_equal(DenseDataset(tmp_path / "set")[:], [0, 1, 2, 10, 11, 12])


def test_verify_names_bad_records(tmp_path):
    z = Zrecord(tmp_path / "z")
    # LZ4 records' checksums are checked on every read (zstd frames check themselves).
    z.append([b"x" * 100, b"y" * 100, b"z" * 100], codec="lz4")
    chunk = tmp_path / "z" / "0.zr"
    chunk.write_bytes(bytes(b ^ 0x5A for b in chunk.read_bytes()))
    report = Zrecord(tmp_path / "z", mode="r").verify()
    assert not report["ok"] and [i for i, _ in report["bad"]] == [0, 1, 2]
    with pytest.raises(loaderx.CorruptError, match="record 1"):
        Zrecord(tmp_path / "z", mode="r").gather([1])


def test_dictionary_codec(tmp_path):
    z = Zrecord(tmp_path / "z")
    samples = [(b"header-%d-" % i) + b"payload" * 20 for i in range(500)]
    # Before training: the caller's order of calls, not a corrupt store (look 92, F1).
    with pytest.raises(ValueError, match="train") as e:
        z.append(samples[:2], codec="zstd_dict")
    assert not isinstance(e.value, loaderx.CorruptError) and len(z) == 0
    # Look 92, F5: verify's limit takes NumPy integers as every integer argument does, and a
    # path that no file can have is a ValueError, as open()'s (an OSError of errno 0).
    assert z.verify(limit=np.int64(2))["ok"]
    for bad in ("", "a\0b", b"a\0b"):
        with pytest.raises(ValueError, match="NUL"):
            Zrecord(bad)
    from loaderx.dataset import DenseDataset

    with pytest.raises(ValueError, match="NUL"):
        DenseDataset("a\0b")
    # Named as a NUL byte by every opener (the engine printed "/tmp/a : not a regular file").
    from loaderx.tokens import TokenDataset

    for opener in (DenseDataset, TokenDataset):
        with pytest.raises(ValueError, match="'a\\\\x00': a path cannot hold a NUL byte"):
            opener("a\0")
    assert z.train_dictionary(samples)
    z.append(samples, codec="zstd_dict")
    assert z.gather([499]) == [samples[499]] and z.stats()["codecs"]["zstd_dict"] == 500


def test_verify_counts_every_damaged_record_and_keeps_the_first_limit(tmp_path):
    n = 3000
    z = Zrecord(tmp_path / "z")
    z.append([bytes([i % 251]) * 40 for i in range(n)], codec="lz4")
    chunk = tmp_path / "z" / "0.zr"
    chunk.write_bytes(bytes(b ^ 0x5A for b in chunk.read_bytes()))
    store = Zrecord(tmp_path / "z", mode="r")
    report = store.verify()
    assert report["checked"] == n and report["damaged"] == n and not report["ok"]
    # The first 100 (the default limit), in index order, each with its reason.
    assert [i for i, _ in report["bad"]] == list(range(100))
    assert all("record" in why for _, why in report["bad"])
    few = store.verify(limit=7)
    assert few["damaged"] == n and [i for i, _ in few["bad"]] == list(range(7))
    assert store.verify(limit=0)["bad"] == []
    assert len(store.verify(limit=None)["bad"]) == n
    with pytest.raises(ValueError, match="limit"):
        store.verify(limit=-1)


def test_create_under_a_live_writer_is_refused(tmp_path):
    live = Zrecord(tmp_path / "z", "a")
    live.append([b"kept"])
    with pytest.raises(loaderx.LockedError):
        Zrecord(tmp_path / "z", "w")
    assert live.gather([0]) == [b"kept"] and len(Zrecord(tmp_path / "z", "r")) == 1
    # From another process too.
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", f"import loaderx, loaderx.zrecord as z\n"
         f"try:\n    z.Zrecord({str(tmp_path / 'z')!r}, 'w')\nexcept loaderx.LockedError:\n    print('locked')"],
        capture_output=True, text=True, timeout=60,
    )
    assert child.stdout.strip() == "locked", child.stderr
    assert len(Zrecord(tmp_path / "z", "r")) == 1


def test_a_writer_carried_into_a_forked_child_cannot_write_there(tmp_path):
    # A forked child shares the parent's write lock: both appending at once overwrote each
    # other's acknowledged records. Its writes are refused, and its exit leaves the lock file.
    import gc
    import os

    z = Zrecord(tmp_path / "z", "w")
    z.append([b"parent"])
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            z.append([b"child"])
            code = 3
        except loaderx.LockedError as e:
            code = 0 if "fork" in str(e) else 4
        if z.gather([0]) != [b"parent"]:  # reads still work in the child
            code = 5
        del z
        gc.collect()
        os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert (tmp_path / "z" / "write.lock").exists()
    z.append([b"after"])
    assert z.gather([0, 1]) == [b"parent", b"after"]


def test_create_never_writes_through_a_chunk_file_it_did_not_make(tmp_path):
    # A link named 0.zr in a directory holding no store (found through this face: the record
    # went into the file outside the directory), and a user's own 0.zr: refused, nothing touched.
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "0.zr").symlink_to(victim)
    users = tmp_path / "users"
    users.mkdir()
    (users / "0.zr").write_bytes(b"notes")
    for d in (linked, users):
        with pytest.raises(FileExistsError, match="0.zr"):
            Zrecord(d, "w")
    assert victim.read_bytes() == b"precious"
    assert (users / "0.zr").read_bytes() == b"notes"
    assert sorted(p.name for p in linked.iterdir()) == ["0.zr"]


def test_a_failed_manifest_write_after_a_commit_does_not_fail_the_write(tmp_path):
    # A retry of a call that raised after its commit would write twice: a derived file's
    # failed write (a directory where its temporary goes) is not the caller's error.
    z = Zrecord(tmp_path / "z")
    z.append([b"a", b"b"])
    (tmp_path / "z" / "manifest.zr.tmp").mkdir()
    assert z.append([b"c"]) == range(2, 3)
    z.delete([0])
    assert len(z) == 2 and z.gather([0, 1]) == [b"c", b"b"]
    assert issubclass(loaderx.CommittedError, loaderx.Error)
    del z
    (tmp_path / "z" / "manifest.zr.tmp").rmdir()
    z = Zrecord(tmp_path / "z")
    assert z.verify()["ok"] and z.gather([0, 1]) == [b"c", b"b"]


def test_records_must_be_bytes_like_not_ints_or_one_bytes_value(tmp_path):
    # Review 46, finding 3: append(b"hi") stored two records of 104 and 105 zero bytes, an int
    # record that many zero bytes.
    z = Zrecord(tmp_path / "z")
    for bad, what in [(b"hi", "one bytes"), ([3], "record 0 is a int"), ([b"a", "s"], "record 1 is a str")]:
        with pytest.raises(TypeError, match=what):
            z.append(bad)
    # An array of Python objects: its bytes are pointers (review 47, finding 6).
    with pytest.raises(TypeError, match="record 0 is an array of Python objects"):
        z.append([np.array([b"ab", b"cd"], dtype=object)])
    with pytest.raises(TypeError, match="record 1 is an array of Python objects"):
        z.train_dictionary([b"x", np.array([1], dtype=object)])
    assert len(z) == 0
    assert z.append([b"a", bytearray(b"bc"), memoryview(b"d"), np.arange(3, dtype=np.uint8)]) == range(4)
    assert z.gather(range(4)) == [b"a", b"bc", b"d", b"\x00\x01\x02"]
    # Any buffer is bytes-like (look 56: array.array was refused); a bool is an int, refused.
    import array

    assert z.append([array.array("H", [1, 2]), memoryview(b"abcdef")[::2]]) == range(4, 6)
    assert z.gather([4, 5]) == [array.array("H", [1, 2]).tobytes(), b"ace"]
    for bad in ([True], [object()], [None]):
        with pytest.raises(TypeError, match="record 0 is a"):
            z.append(bad)
    assert len(z) == 6


def test_gather_into_reads_lengths_and_bytes_together_while_another_thread_deletes(tmp_path):
    # Review 46, finding 2: the lengths were read in one call, the bytes in another; a delete
    # between them gave records no record ever held. Each record's bytes equal its length.
    import threading

    z = Zrecord(tmp_path / "z")
    z.append([bytes([3]) * 3 if i % 4 in (0, 3) else bytes([5]) * 5 for i in range(8_000)], codec="raw")
    torn, done = [], threading.Event()

    def reader():
        for _ in range(20_000):
            if done.is_set():
                break
            buf, offsets = z.gather_into([0, 1])
            for k in range(2):
                r = bytes(buf[offsets[k] : offsets[k + 1]])
                if not r or any(b != len(r) for b in r):
                    torn.append((offsets.tolist(), buf.tolist()))

    def deleter():
        for _ in range(3_000):
            z.delete([0, 1])
        done.set()

    threads = [threading.Thread(target=reader), threading.Thread(target=deleter)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not torn, torn[:3]
    n = 2 * int(z.lengths([0])[0])
    with pytest.raises(ValueError, match=rf"shape \({n},\)"):
        z.gather_into([0, 0], out=np.empty(n + 1, dtype=np.uint8))
    idx = np.zeros(2, dtype=np.uint64)
    with pytest.raises(ValueError, match="overlaps the indices"):
        z.gather_into(idx, out=idx.view(np.uint8)[:n])
    buf, offsets = z.gather_into([0, 0], out=np.empty(n, dtype=np.uint8))
    assert offsets.tolist() == [0, n // 2, n] and set(buf.tolist()) == {n // 2}


def test_a_store_of_a_newer_format_is_unsupported_not_corrupt(tmp_path):
    # Review 46, finding 6: CorruptError invited a user to discard a healthy store.
    import struct

    z = Zrecord(tmp_path / "z")
    z.append([b"abc"] * 3)
    del z
    with open(tmp_path / "z" / "index.zr", "r+b") as f:
        f.seek(4)
        f.write(struct.pack("<H", 9))
    with pytest.raises(loaderx.UnsupportedError, match="version 9") as e:
        Zrecord(tmp_path / "z", mode="r")
    assert not isinstance(e.value, loaderx.CorruptError)


def test_a_fork_while_another_thread_appends_is_refused_at_once(tmp_path):
    # The fork check came after the handle's append lock, which the appending thread of the
    # parent may hold at the fork: the child's copy of it is held for good, and its append hung.
    from conftest import run_isolated

    out = run_isolated(f"""
import os, signal, threading
import loaderx
from loaderx.zrecord import Zrecord
z = Zrecord({str(tmp_path / "z")!r}, "w")
stop = threading.Event()
def appending():
    while not stop.is_set():
        z.append([bytes(1 << 20)] * 16, "zstd")
t = threading.Thread(target=appending)
t.start()
statuses = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        try:
            z.append([b"x"])
            os._exit(3)
        except loaderx.LockedError:
            pass
        try:
            z.sync()
            os._exit(4)
        except loaderx.LockedError:
            os._exit(0)
    statuses.append(os.waitpid(pid, 0)[1])
stop.set()
t.join()
print("statuses", statuses)
""", timeout=180)
    assert "statuses [0, 0, 0, 0, 0, 0]" in out, out


def test_a_fork_while_another_thread_holds_the_handle_is_refused_never_waits(tmp_path):
    # The binding's own lock over the engine's store was taken before the engine's fork check:
    # a child forked while a thread of the parent gathered (or deleted) waited forever for the
    # child's copy of that lock, in delete, compact, len and gather.
    from conftest import FORK_HELPERS, run_isolated

    out = run_isolated(FORK_HELPERS + f"""
from loaderx.zrecord import Zrecord
z = Zrecord({str(tmp_path / "z")!r}, "w")
z.append([bytes([i % 251]) * 4096 for i in range(4000)])
stop, t = busy(lambda: z.gather(list(range(4000))))
print("writes", children([(True, lambda: z.delete([0])), (True, z.compact), (True, lambda: z.append([b"x"]))], 6))
stop.set(); t.join()
n = len(z)
stop, t = busy(lambda: (z.delete([len(z) - 1]), z.compact()))
print("reads", children([(False, lambda: len(z)), (False, lambda: z.gather([0, 1]))], 6))
stop.set(); t.join()
print("deleted", n - len(z) > 0)
""", timeout=240)
    assert "writes [0, 0, 0, 0, 0, 0]" in out, out
    assert "reads [0, 0, 0, 0, 0, 0]" in out, out
    assert "deleted True" in out, out


def test_reads_taking_arrays_in_children_forked_while_threads_borrow_arrays(tmp_path):
    # rust-numpy keeps its borrow flags under one process-wide lock. On a free-threaded build a
    # child forked while a parent thread held it would wait for it for good in its first call
    # taking an array; CPython stops every attached thread before a fork (PyOS_BeforeFork) and
    # the lock is only held attached, so it never is: 0 of 3,000 such children hung on 3.14t.
    from conftest import FORK_HELPERS, run_isolated

    out = run_isolated(FORK_HELPERS + f"""
import numpy as np
from loaderx.zrecord import Zrecord
z = Zrecord({str(tmp_path / "z")!r}, "w")
z.append([bytes([i % 251]) * 1024 for i in range(512)])
z.sync()
r = Zrecord({str(tmp_path / "z")!r}, "r")
def reads():
    i = np.arange(0, 512, 3, dtype=np.uint64)
    r.gather(i)
    r.gather_into(i, np.empty(int(r.lengths(i).sum()), dtype=np.uint8))
reads()
threads = [busy(reads) for _ in range(4)]
print("children", set(children([(False, reads)], 40)))
for stop, t in threads:
    stop.set(); t.join()
""", timeout=240)
    assert "children {0}" in out, out


def test_children_reading_through_the_writer_while_the_parent_rewrites(tmp_path):
    # Look 64, L64-1: a child reading through the parent's read-write handle while a thread of
    # the parent deleted and compacted got other records' bytes back as success (1,303 of
    # 114,232) and CorruptError for intact ones: the parent's lock was the child's too, so the
    # parent found the store alone. A child now reads through a handle of its own.
    from conftest import FORK_HELPERS, run_isolated

    out = run_isolated(FORK_HELPERS + f"""
import random, struct, time
import numpy as np
from loaderx.zrecord import Zrecord
L = 2048
def rec(i):
    return struct.pack("<Q", i) + bytes((i * 31 + j) % 256 for j in range(8, L))
w = Zrecord({str(tmp_path / "w")!r}, "w")
w.append([rec(i) for i in range(256)], "zstd")
stop = threading.Event()
def rewrite():
    i = 1 << 20
    while not stop.is_set():
        try:
            w.append([rec(i)], "zstd"); i += 1
            w.delete([random.randrange(len(w))])
            w.compact()
        except loaderx.LockedError:
            pass
        time.sleep(0.002)
t = threading.Thread(target=rewrite); t.start()
totals = [0, 0, 0]
for k in range(8):
    time.sleep(0.02)
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        c = [0, 0, 0]
        for _ in range(200):
            try:
                n = len(w)
                for b in w.gather(np.random.randint(0, n, 8).astype(np.uint64)):
                    c[0] += 1
                    c[1] += b != rec(struct.unpack("<Q", b[:8])[0])
            except loaderx.LockedError as e:
                c[2] += "fork" not in str(e)
            except Exception:
                c[2] += 1
        os.write(wfd, repr(c).encode()); os._exit(0)
    os.close(wfd)
    got = eval(os.read(r, 4096).decode()); os.close(r); os.waitpid(pid, 0)
    totals = [a + b for a, b in zip(totals, got)]
stop.set(); t.join()
print("read", totals[0] > 0, "wrong", totals[1], "failed", totals[2], "intact", w.verify()["ok"])
""", timeout=240)
    assert "read True wrong 0 failed 0 intact True" in out, out


def test_a_child_never_reads_another_store_through_the_writers_path(tmp_path):
    # Look 65, L65-1: a forked child's own handle of a read-write Zrecord was opened by the
    # handle's path; with the path repointed (a link) or the directory renamed and another store
    # made there, the child read the other store's records as success.
    from conftest import FORK_HELPERS, run_isolated

    out = run_isolated(FORK_HELPERS + f"""
import shutil
import numpy as np
from loaderx.zrecord import Zrecord
root = {str(tmp_path)!r}
for name in ("v1", "v2"):
    z = Zrecord(os.path.join(root, name), "w")
    z.append([f"{{name}}-{{i}}".encode() for i in range(8)])
    z.sync()
    del z
os.symlink("v1", os.path.join(root, "current"))
w = Zrecord(os.path.join(root, "current"), "a")
os.replace(os.path.join(root, "current"), os.path.join(root, "old-link"))
os.symlink("v2", os.path.join(root, "current"))
def read():
    assert w.gather([3]) == [b"v1-3"], w.gather([3])
print("relinked", children([(True, read)], 2), w.gather([3]))
w2 = Zrecord(os.path.join(root, "v2"), "a")
os.rename(os.path.join(root, "v2"), os.path.join(root, "v2-old"))
shutil.copytree(os.path.join(root, "v1"), os.path.join(root, "v2"))
def read2():
    assert w2.gather([3]) == [b"v2-3"], w2.gather([3])
print("renamed", children([(True, read2)], 2), w2.gather([3]))
""", timeout=120)
    # A child's read is refused (LockedError, naming the fork: status 0), never another store's.
    assert "relinked [0, 0] [b'v1-3']" in out, out
    assert "renamed [0, 0] [b'v2-3']" in out, out
