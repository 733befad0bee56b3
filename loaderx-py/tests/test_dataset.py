import os

import numpy as np
import pytest

import loaderx
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset, pad
from loaderx.zrecord import Zrecord

DTYPES = [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64,
          np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("codec", ["raw", "zstd", "lz4"])
def test_every_dtype_round_trips(tmp_path, dtype, codec):
    rng = np.random.default_rng(3)
    a = (rng.random((50, 3, 2)) * 100).astype(dtype)
    assert from_numpy(tmp_path / "d", a, codec=codec) == 50
    ds = DenseDataset(tmp_path / "d")
    assert ds.dtype == np.dtype(dtype) and ds.item_shape == (3, 2) and len(ds) == 50
    np.testing.assert_array_equal(ds[:], a)


def test_big_endian_and_strided_inputs(tmp_path):
    a = np.arange(120, dtype=">i4").reshape(20, 6)
    from_numpy(tmp_path / "be", a)
    np.testing.assert_array_equal(DenseDataset(tmp_path / "be")[:], a.astype("<i4"))
    strided = np.arange(200, dtype=np.float64).reshape(20, 10)[:, ::2]
    from_numpy(tmp_path / "s", strided)
    np.testing.assert_array_equal(DenseDataset(tmp_path / "s")[:], strided)


def test_one_dimensional_arrays_are_scalars(tmp_path):
    from_numpy(tmp_path / "l", np.arange(10, dtype=np.int64))
    ds = DenseDataset(tmp_path / "l")
    assert ds.item_shape == () and ds[3] == 3 and ds[[1, 2]].tolist() == [1, 2]


def test_indexing_follows_numpy(tmp_path):
    a = np.arange(30 * 4, dtype=np.float32).reshape(30, 4)
    from_numpy(tmp_path / "d", a)
    ds = DenseDataset(tmp_path / "d")
    for key in [0, -1, 29, slice(None), slice(5, 20, 3), slice(None, None, -2), [0, 5, 2], [-1, -30],
                np.array([3, 3, 1]), np.array([[1, 2], [3, 4]]), np.arange(30) % 3 == 0,
                np.array([7], dtype=np.uint32), []]:
        np.testing.assert_array_equal(ds[key], a[key], err_msg=repr(key))
    with pytest.raises(IndexError, match="30"):
        ds[30]
    with pytest.raises(IndexError, match="-31"):
        ds[[-31]]
    with pytest.raises(IndexError):
        ds[np.array([40], dtype=np.uint32)]
    with pytest.raises(TypeError, match="integers"):
        ds[[0.5]]
    # Look 92, F2: negative indices of a narrow type (-1 + 4096 overflowed int8), and the
    # float64 NumPy makes of a sequence with an integer past int64, named as such.
    from_numpy(tmp_path / "long", np.arange(40_000, dtype=np.int32))
    long = DenseDataset(tmp_path / "long")
    for dt in (np.int8, np.int16):
        assert long[np.array([-1, 2, -3], dtype=dt)].tolist() == [39_999, 2, 39_997]
    with pytest.raises(TypeError, match="within int64"):
        long[[-1, 2**63]]
    # Look 101, L101-3: NumPy reads a[1, 2] as one index an axis; records 1 and 2 were given.
    from_iterator(tmp_path / "rag", [np.arange(3), np.arange(2), np.arange(5)])
    rag = RaggedDataset(tmp_path / "rag")
    for key in [(1, 2), (0, slice(None)), (slice(None),)]:
        for d in (ds, rag):
            with pytest.raises(IndexError, match="indexes its records only"):
                d[key]
    assert ds[[1, 2]].shape == (2, 4) and ds[1][2] == a[1, 2] and len(rag[[1, 2]]) == 2
    # Look 103: a ragged dataset answers in the key's shape (L103-2: a 0-d key gave a list of
    # one, a 2-d key a flat list), ints by __index__ are ints (L103-4), np.matrix is an array
    # (L103-6), an empty float array and other things no index are refused (L103-4, L103-7).
    class Two:
        def __index__(self):
            return 2

    assert rag[np.array(2)].tolist() == [0, 1, 2, 3, 4] and rag[Two()].tolist() == [0, 1, 2, 3, 4]
    assert [[len(r) for r in row] for row in rag[[[0, 1], [2, 0]]]] == [[3, 2], [5, 3]]
    # An axis of 0 after the first (look 107, L107-1: "range() arg 3 must not be zero").
    assert rag[[[]]] == [[]] and rag[np.empty((2, 0), int)] == [[], []]
    assert rag[np.empty((2, 0, 3), int)] == [[], []] and ds[np.empty((2, 0), int)].shape == (2, 0, 4)
    np.testing.assert_array_equal(ds[Two()], a[2])
    np.testing.assert_array_equal(ds[np.matrix([[1, 2]])], a[np.matrix([[1, 2]])])
    assert [len(r) for r in rag[np.matrix([[1, 2]])][0]] == [2, 5]
    with pytest.raises(TypeError, match="not float64$"):
        ds[np.array([], dtype=float)]
    for key in (Ellipsis, None, {1}):
        with pytest.raises(TypeError, match=f"not {type(key).__name__}$"):
            ds[key]
    with pytest.raises(IndexError, match=r"dataset\[\(1,\)\]"):
        ds[(1,)]
    # The path first: the other way round is named (L103-7).
    with pytest.raises(TypeError, match=r"from_numpy\(dir, ...\) takes the dataset's path first, not ndarray"):
        from_numpy(a, tmp_path / "swapped")
    with pytest.raises(TypeError, match="from_iterator.*not list"):
        from_iterator([np.arange(2)], tmp_path / "swapped")


def test_gather_into_a_callers_buffer(tmp_path):
    a = np.arange(40 * 3, dtype=np.int16).reshape(40, 3)
    from_numpy(tmp_path / "d", a)
    ds = DenseDataset(tmp_path / "d")
    out = np.zeros((4, 3), dtype=np.int16)
    got = ds.gather([9, 0, 39, 9], out=out)
    assert got is out
    np.testing.assert_array_equal(out, a[[9, 0, 39, 9]])
    with pytest.raises(TypeError, match="dtype"):
        ds.gather([0], out=np.zeros((1, 3), dtype=np.int32))
    with pytest.raises(ValueError, match="shape"):
        ds.gather([0, 1], out=np.zeros((1, 3), dtype=np.int16))
    with pytest.raises(ValueError, match="contiguous"):
        ds.gather([0, 1], out=np.zeros((3, 2), dtype=np.int16).T)
    # Look 92, F3: a matrix (2-D however flattened) is named, not rust-numpy's words.
    with pytest.raises(TypeError, match="numpy.matrix"):
        ds.gather([0, 1], out=np.zeros((2, 3), dtype=np.int16).view(np.matrix))


def test_select_is_a_view(tmp_path):
    a = np.arange(10, dtype=np.int32)
    from_numpy(tmp_path / "d", a)
    sub = DenseDataset(tmp_path / "d").select([8, 2, 5])
    assert len(sub) == 3 and sub[:].tolist() == [8, 2, 5]


def test_split_is_seeded_and_disjoint(tmp_path):
    from_numpy(tmp_path / "d", np.arange(100, dtype=np.int64))
    train, valid = DenseDataset(tmp_path / "d").split(0.8, seed=42)
    assert (len(train), len(valid)) == (80, 20)
    both = np.concatenate([train[:], valid[:]])
    assert sorted(both.tolist()) == list(range(100)) and (np.diff(train[:]) > 0).all()
    again, _ = DenseDataset(tmp_path / "d").split(0.8, seed=42)
    np.testing.assert_array_equal(again[:], train[:])
    other, _ = DenseDataset(tmp_path / "d").split(0.8, seed=43)
    assert not np.array_equal(other[:], train[:])
    with pytest.raises(ValueError, match="fraction"):
        DenseDataset(tmp_path / "d").split(1.5)
    for odd in ("0.5", True):  # look 92, F5: float() took them
        with pytest.raises(TypeError, match="fraction must be a number"):
            DenseDataset(tmp_path / "d").split(odd)


def test_ragged_rows_and_lengths(tmp_path):
    seqs = [np.arange(L * 2, dtype=np.float32).reshape(L, 2) for L in (4, 0, 2, 7)]
    assert from_iterator(tmp_path / "r", seqs) == 4
    rs = RaggedDataset(tmp_path / "r")
    assert rs.row_shape == (2,) and len(rs) == 4
    got = rs[[3, 1, 0]]
    for g, want in zip(got, [seqs[3], seqs[1], seqs[0]]):
        np.testing.assert_array_equal(g, want)
    assert rs[2].shape == (2, 2)
    assert rs.lengths([0, 1, 2, 3]).tolist() == [4, 0, 2, 7]
    with pytest.raises(ValueError, match="sequence 1"):
        from_iterator(tmp_path / "bad", [np.zeros(3, np.int32), np.zeros(3, np.int64)])
    assert not (tmp_path / "bad").exists() and not (tmp_path / "bad.partial").exists()


def test_pad():
    padded, lengths = pad([np.array([1, 2]), np.array([3])], value=-1)
    assert padded.tolist() == [[1, 2], [3, -1]] and lengths.tolist() == [2, 1]
    padded, _ = pad([np.arange(5)], length=3)
    assert padded.tolist() == [[0, 1, 2]]


def test_pad_is_the_engines_for_every_dtype_and_shape():
    # The engine pads (the loader's pad=); checked here against NumPy doing it by hand.
    rng = np.random.default_rng(0)

    def by_hand(records, value, width):
        out = np.full((len(records), width, *records[0].shape[1:]), value, dtype=records[0].dtype)
        for i, r in enumerate(records):
            out[i, : min(len(r), width)] = r[:width]
        return out

    for dtype in (np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64, np.bool_):
        for row_shape in ((), (3,), (2, 2)):
            records = [(rng.integers(0, 2, (n, *row_shape)) * 7).astype(dtype) for n in (3, 0, 5, 1)]
            for length in (None, 0, 2, 8):
                padded, lengths = pad(records, value=1, length=length)
                width = 5 if length is None else length
                want = by_hand(records, 1, width)
                assert padded.dtype == want.dtype and padded.shape == want.shape, (dtype, row_shape, length)
                assert np.array_equal(padded, want), (dtype, row_shape, length)
                assert lengths.tolist() == [3, 0, 5, 1], "row counts before any cut"
    # Another byte order is padded in the machine's.
    big = [np.array([1, 2, 3], dtype=">i4"), np.array([4], dtype=">i4")]
    padded, _ = pad(big, value=-1)
    assert padded.tolist() == [[1, 2, 3], [4, -1, -1]]
    with pytest.raises(ValueError, match="record 1 has rows of shape"):
        pad([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(TypeError, match="complex128 is not supported"):
        pad([np.zeros(2, np.complex128)])
    with pytest.raises(ValueError, match="length"):
        pad([np.zeros(2)], length=-1)


def test_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        DenseDataset(tmp_path / "missing")
    with pytest.raises(TypeError, match="complex"):
        from_numpy(tmp_path / "c", np.zeros(3, np.complex64))
    with pytest.raises(ValueError, match="hold no bytes"):
        from_numpy(tmp_path / "empty-items", np.zeros((4, 0), np.float32))
    with pytest.raises(ValueError, match="codec"):
        from_numpy(tmp_path / "z", np.zeros(3), codec="snappy")
    # Look 101, L101-7: a dictionary size ignored (another codec) or bent (0 taken as 256).
    with pytest.raises(ValueError, match="for the zstd_dict codec: zstd trains no dictionary"):
        from_numpy(tmp_path / "z", np.zeros(3), codec="zstd", dict_size=100_000)
    for size in (0, 255, (64 << 20) + 1):
        with pytest.raises(ValueError, match="its size is 256 to 67108864 bytes"):
            from_numpy(tmp_path / "z", np.zeros(3), codec="zstd_dict", dict_size=size)
    with pytest.raises(TypeError, match="dict_size"):
        from_numpy(tmp_path / "z", np.zeros(3), codec="zstd_dict", dict_size=4096.5)
    assert not (tmp_path / "z").exists()
    assert from_numpy(tmp_path / "zd", np.zeros((3, 4)), codec="zstd_dict", dict_size=4096) == 3
    from_numpy(tmp_path / "d", np.zeros((3, 2)))
    with pytest.raises(FileExistsError):
        from_numpy(tmp_path / "d", np.zeros((3, 2)), overwrite=False)
    from_iterator(tmp_path / "r", [np.zeros(2)])
    with pytest.raises(loaderx.SchemaError, match="ragged"):
        DenseDataset(tmp_path / "r")


def test_a_damaged_store_names_its_file_and_record(tmp_path):
    a = np.repeat(np.arange(20, dtype=np.uint8)[:, None], 64, axis=1)
    # LZ4 records' checksums are checked on every read.
    from_numpy(tmp_path / "d", a, codec="lz4")
    chunk = tmp_path / "d" / "0.zr"
    chunk.write_bytes(bytes(b ^ 0x5A for b in chunk.read_bytes()))
    ds = DenseDataset(tmp_path / "d")
    with pytest.raises(loaderx.CorruptError) as e:
        ds[[5]]
    assert "record 5" in str(e.value) and str(tmp_path / "d") in str(e.value)


def test_an_interrupted_conversion_publishes_nothing(tmp_path):
    def gen():
        yield np.zeros(3, np.int32)
        raise RuntimeError("the source failed")

    with pytest.raises(RuntimeError, match="the source failed"):
        from_iterator(tmp_path / "x", gen())
    assert os.listdir(tmp_path) == []


def test_an_mmapped_array_streams_with_flat_memory(tmp_path):
    import threading
    import time

    n, width = 40_000, 4096  # 156 MiB
    mm = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.uint8, shape=(n, width))
    for s in range(0, n, 5000):
        mm[s : s + 5000] = (np.arange(s, min(s + 5000, n)) % 251)[:, None]
    mm.flush()
    del mm

    def anon_kib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))

    # The peak of this process's anonymous memory (the mapped file's pages are not in it),
    # sampled while the conversion runs without the GIL.
    before = anon_kib()
    peak, stop = [before], threading.Event()

    def poll():
        while not stop.is_set():
            peak[0] = max(peak[0], anon_kib())
            time.sleep(0.002)

    watcher = threading.Thread(target=poll)
    watcher.start()
    try:
        from_numpy(tmp_path / "d", np.load(tmp_path / "big.npy", mmap_mode="r"), codec="zstd")
    finally:
        stop.set()
        watcher.join()
    grown_mib = (peak[0] - before) / 1024
    assert grown_mib < 64, f"anonymous memory peaked {grown_mib:.0f} MiB above its start converting a 156 MiB memmap"
    ds = DenseDataset(tmp_path / "d")
    assert ds[[0, 39_999]][:, 0].tolist() == [0, 39_999 % 251]


def _hammered(indices, read, rounds=300):
    """Calls `read()` `rounds` times while another thread keeps overwriting `indices` with
    out-of-range values and back: every call gives correct records or a clean IndexError,
    never a panic (a PanicException is a BaseException: it escapes `except Exception`)."""
    import threading

    good = indices.copy()
    bad = np.full_like(indices, np.iinfo(indices.dtype).max // 2)
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            indices[:] = bad
            indices[:] = good

    t = threading.Thread(target=hammer)
    t.start()
    outcomes = set()
    try:
        for _ in range(rounds):
            try:
                read()
                outcomes.add("read")
            except IndexError as e:
                # Ours, naming a value the array held (look 92, F4: NumPy's "index 0 is out of
                # bounds for axis 0 with size 0", or an index in range, from a second read).
                said = str(e)
                if "dataset of length" in said:
                    assert int(said.split()[1]) in (int(bad[0]), -int(bad[0])) or "record" in said, said
                else:
                    assert "axis 0" not in said, said
                outcomes.add("IndexError")
    finally:
        stop.set()
        t.join()
    return outcomes


def test_indices_mutated_by_another_thread_never_panic(tmp_path):
    n = 2000
    from_numpy(tmp_path / "d", np.arange(n * 8, dtype=np.uint8).reshape(n, 8), codec="raw")
    from_iterator(tmp_path / "r", (np.full(i % 5 + 1, i, dtype=np.int32) for i in range(n)), codec="raw")
    store = Zrecord(tmp_path / "z", "w")
    store.append([bytes([i % 256]) * 8 for i in range(n)], codec="raw")
    ds, rs = DenseDataset(tmp_path / "d"), RaggedDataset(tmp_path / "r")

    idx32 = np.arange(n, dtype=np.uint32)[::-1].copy()
    out = np.empty((n, 8), dtype=np.uint8)

    def dense():
        got = ds.gather(idx32, out=out)
        # A read that succeeded read one of the two index arrays the other thread writes.
        assert (got[:, 0] == np.arange(n, dtype=np.uint64)[::-1] * 8 % 256).all()

    assert _hammered(idx32, dense) <= {"read", "IndexError"}
    assert _hammered(idx32, lambda: rs.gather(idx32)) <= {"read", "IndexError"}
    assert _hammered(idx32, lambda: rs.lengths(idx32)) <= {"read", "IndexError"}
    idx64 = np.arange(n, dtype=np.uint64)[::-1].copy()
    buf = np.empty(n * 8, dtype=np.uint8)
    assert _hammered(idx64, lambda: store._native.gather_into(idx64, buf)) <= {"read", "IndexError"}
    assert _hammered(idx64, lambda: store._native.gather(idx64)) <= {"read", "IndexError"}


def test_from_numpy_never_replaces_what_is_not_a_dataset(tmp_path):
    project = tmp_path / "myproject"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    with pytest.raises((FileExistsError, ValueError), match="myproject"):
        from_numpy(project, np.arange(10, dtype=np.int32))
    assert [p.name for p in project.iterdir()] == ["notes.txt"]
    assert (project / "notes.txt").read_text() == "mine"
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"data")
    with pytest.raises((FileExistsError, ValueError, NotADirectoryError), match="plain.bin"):
        from_numpy(plain, np.arange(10, dtype=np.int32))
    assert plain.read_bytes() == b"data"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["myproject", "plain.bin"], "no .old or .partial left"
    # An existing dataset is replaced.
    from_numpy(tmp_path / "ds", np.arange(10, dtype=np.int32))
    from_numpy(tmp_path / "ds", np.arange(3, dtype=np.int32))
    assert DenseDataset(tmp_path / "ds")[:].tolist() == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "myproject", "plain.bin"]


def test_pad_refuses_mixed_dtypes_and_rows_of_no_bytes():
    # No silent cast (int64 -1 would become uint8 255) and no panic on zero-width rows.
    with pytest.raises(ValueError, match="record 1 is int64; record 0 is uint8"):
        pad([np.array([1, 2], np.uint8), np.array([-1, 300], np.int64)])
    with pytest.raises(ValueError, match="hold no values"):
        pad([np.zeros((5, 0), np.float32)])


def test_from_iterator_refuses_rows_of_no_bytes(tmp_path):
    # A record of zero-width rows holds no bytes, so its row count could not be kept.
    with pytest.raises(ValueError, match="hold no bytes"):
        from_iterator(tmp_path / "zw", [np.zeros((5, 0), np.float32), np.zeros((3, 0), np.float32)])
    assert not (tmp_path / "zw").exists() and not (tmp_path / "zw.partial").exists()


def test_from_iterator_copies_each_record_as_it_is_taken(tmp_path):
    # Seventeenth look, R3: a generator that refills and yields one buffer.
    def refilled():
        buf = np.empty(3, np.int32)
        for i in range(5):
            buf[:] = i
            yield buf

    assert from_iterator(tmp_path / "r", refilled()) == 5
    back = RaggedDataset(tmp_path / "r")
    assert [r.tolist() for r in back[list(range(5))]] == [[i, i, i] for i in range(5)]


def test_a_pad_value_the_dtype_cannot_hold_is_refused():
    # Nineteenth look, T1: -100 padding uint16 tokens became 0, a real token id.
    records = [np.array([1, 2, 3], np.uint16), np.array([5], np.uint16)]
    for bad in (-100, 70000, 1.5, float("nan")):
        with pytest.raises(ValueError, match="pad value"):
            pad(records, bad)
    padded, lengths = pad(records, 7)
    assert padded.tolist() == [[1, 2, 3], [5, 7, 7]] and lengths.tolist() == [3, 1]
    with pytest.raises(ValueError, match="pad value"):
        pad([np.array([1], np.int64)], 2**53 + 1)
    assert pad([np.array([1, 2], np.int64), np.array([3], np.int64)], -100)[0].tolist() == [[1, 2], [3, -100]]


def test_a_pickled_split_reopens_as_the_records_it_was(tmp_path):
    # Look 109, L109-1: a split pickled, then the store appended to: the reopened split was
    # taken over the new length, another split (validation records in train). It is taken over
    # the records it was, and refused once records it held are gone.
    import pickle

    from loaderx.zrecord import Zrecord

    from_numpy(tmp_path / "d", np.arange(100, dtype=np.int64), codec="raw")
    ds = DenseDataset(tmp_path / "d")
    train, val = ds.split(0.8, seed=1)
    want = (train[:].tolist(), val[:].tolist())
    saved = pickle.dumps((train, val))
    z = Zrecord(tmp_path / "d", "a")
    z.append([np.int64(v).tobytes() for v in range(1000, 1020)], codec="raw")
    t2, v2 = pickle.loads(saved)
    assert (t2[:].tolist(), v2[:].tolist()) == want
    del ds, train, val, t2, v2  # readers: a delete takes the store alone
    import gc

    gc.collect()
    z.delete(list(range(50)))
    z.compact()
    del z
    with pytest.raises(ValueError, match="fewer than the 100 it was split over"):
        pickle.loads(saved)


def test_bool_bytes_other_than_0_or_1_are_refused_when_written(tmp_path):
    # Look 113, L113-2: NumPy's ``.view(bool)`` keeps whatever the bytes were; the writers stored
    # them, ``verify`` passed them and every reader refused them at a training step.
    odd = np.array([0, 1, 2, 255], np.uint8).view(np.bool_)
    with pytest.raises(ValueError, match="bool element 0 is 2"):
        from_numpy(str(tmp_path / "d"), odd)
    assert not (tmp_path / "d").exists()
    with pytest.raises(ValueError, match="bool element 1 is 255"):
        rows = [np.array([1, 0], np.bool_), np.array([0, 255], np.uint8).view(np.bool_)]
        from_iterator(str(tmp_path / "r"), iter(rows))
    from_numpy(str(tmp_path / "ok"), np.array([True, False, True]))
    assert DenseDataset(str(tmp_path / "ok"))[:].tolist() == [True, False, True]


def test_an_unaligned_index_array_is_read_as_numpy_reads_it(tmp_path):
    # Look 144, L144-1: a contiguous but unaligned index array (`np.frombuffer` at an odd
    # offset, a memmap past a header) was refused as "not C-contiguous".
    data = np.arange(40, dtype=np.int64).reshape(8, 5)
    from_numpy(tmp_path / "d", data)
    ds = DenseDataset(tmp_path / "d")
    raw = bytearray(13)
    raw[1:13] = np.array([3, 1, 2], dtype=np.uint32).tobytes()
    k = np.frombuffer(raw, np.uint32, offset=1)
    assert not k.flags.aligned and k.flags.c_contiguous
    np.testing.assert_array_equal(ds[k], data[k])
    np.testing.assert_array_equal(ds.gather(k), data[k])
    z = Zrecord(tmp_path / "z", "w")
    z.append([bytes([i]) * 3 for i in range(8)])
    raw64 = bytearray(25)
    raw64[1:25] = np.array([3, 1, 2], dtype=np.uint64).tobytes()
    k64 = np.frombuffer(raw64, np.uint64, offset=1)
    assert z.gather(k64) == [b"\x03" * 3, b"\x01" * 3, b"\x02" * 3]


def test_a_dataset_opened_by_a_relative_path_reopens_the_same_one_elsewhere(tmp_path, monkeypatch):
    # Look 167, L167-1: opened by a relative path, a dataset pickled after a chdir (a spawned
    # torch worker, a multiprocessing child) reopened whatever lay at that path there.
    import pickle

    from loaderx.tokens import TokenDataset, write_llmc

    for d, base in (("a", 0), ("b", 100)):
        from_numpy(tmp_path / d / "x", np.arange(base, base + 5, dtype=np.int64))
        write_llmc(tmp_path / d / "t.bin", np.arange(base, base + 8, dtype=np.uint16))
    monkeypatch.chdir(tmp_path / "a")
    ds, tokens = DenseDataset("x"), TokenDataset("t.bin")
    assert ds.path == str(tmp_path / "a" / "x")
    monkeypatch.chdir(tmp_path / "b")
    assert pickle.loads(pickle.dumps(ds))[:].tolist() == [0, 1, 2, 3, 4]
    assert pickle.loads(pickle.dumps(ds[1:3]))[:].tolist() == [1, 2]
    assert pickle.loads(pickle.dumps(tokens)).read(0, 8).tolist() == list(range(8))
    # Through a link and `..`, where the kernel takes it (look 169, L169-1: `abspath` dropped
    # `..` by its text and read `b/x`); `run://x` is a local path (L169-3: kept relative).
    (tmp_path / "real" / "sub").mkdir(parents=True)
    os.symlink(tmp_path / "real" / "sub", tmp_path / "b" / "lnk")
    from_numpy("lnk/../x", np.arange(50, 55, dtype=np.int64))
    assert DenseDataset("lnk/../x")[:].tolist() == [50, 51, 52, 53, 54]
    from_numpy("run://x", np.arange(7, dtype=np.int64))
    odd = DenseDataset("run://x")
    monkeypatch.chdir(tmp_path / "a")
    assert pickle.loads(pickle.dumps(odd))[:].tolist() == list(range(7))
