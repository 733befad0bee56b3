"""Token streams from Python (issue 45): Megatron, llm.c and headerless token files read where
they lie, their samplers as DataLoader streams, lying files as errors naming file and field."""

import pickle
import struct
import warnings

import numpy as np
import pytest

import loaderx
from loaderx.dataloader import DataLoader
from loaderx.tokens import TokenDataset, TokenSamples, write_llmc, write_megatron


def docs(count=50):
    # Document k's token j is k * 1000 + j: each sample says where it came from.
    return [np.arange(k * 1000, k * 1000 + (k * 37 + 11) % 300, dtype=np.int64) for k in range(count)]


@pytest.fixture
def megatron(tmp_path):
    d = docs()
    prefix = tmp_path / "corpus"
    assert write_megatron(prefix, d) == sum(len(x) for x in d)
    return prefix, np.concatenate(d).astype(np.uint16)


def test_the_issues_contract_windows_through_the_dataloader(megatron):
    prefix, stream = megatron
    corpus = TokenDataset(f"{prefix}.bin")
    assert (len(corpus), corpus.documents, corpus.format) == (stream.size, 50, "megatron")
    loader = DataLoader({"tokens": corpus.windows(65)}, batch_size=8, num_workers=2, seed=0)
    t = next(iter(loader))["tokens"]
    assert t.shape == (8, 65) and t.dtype == np.uint16
    # Every row is 65 consecutive tokens of the file, as nanoGPT's get_batch slices them.
    memmap = np.memmap(f"{prefix}.bin", dtype=np.uint16, mode="r")
    for row in t:
        starts = np.flatnonzero(memmap[: memmap.size - 64] == row[0])
        assert any(np.array_equal(memmap[s : s + 65], row) for s in starts)
    w = corpus.windows(65)
    assert len(w) == stream.size - 64
    np.testing.assert_array_equal(w[[0, 100]], np.stack([stream[:65], stream[100:165]]))
    np.testing.assert_array_equal(corpus.read(3, 4), stream[3:7].astype(np.int64))
    assert len(corpus.windows(65, stride=64)) == (stream.size - 65) // 64 + 1


def test_megatron_samples_overlap_by_one_and_pickle_by_path(megatron):
    prefix, stream = megatron
    corpus = TokenDataset(prefix)
    plain = corpus.sequences(33, seed=None)
    assert len(plain) == (stream.size - 1) // 32
    np.testing.assert_array_equal(plain[5], stream[160:193])
    shuffled = corpus.sequences(33, seed=4)
    assert isinstance(shuffled, TokenSamples) and len(shuffled) == len(plain)
    rows = shuffled[:]
    assert (rows[1:, 0] == rows[:-1, -1]).all(), "samples overlap by one token"
    assert not np.array_equal(rows, plain[:])
    again = pickle.loads(pickle.dumps(shuffled))
    np.testing.assert_array_equal(again[:], rows)
    part = pickle.loads(pickle.dumps(shuffled.select([3, 1])))
    np.testing.assert_array_equal(part[:], rows[[3, 1]])
    assert pickle.loads(pickle.dumps(corpus)).documents == 50


def test_megatron_samples_shuffle_the_documents_anew_each_epoch(megatron):
    prefix, stream = megatron
    corpus = TokenDataset(prefix)
    one = corpus.sequences(33, seed=4)
    three = corpus.sequences(33, seed=4, epochs=3)
    s = len(one)
    assert len(three) == 3 * s
    rows = three[:]
    np.testing.assert_array_equal(rows[:s], one[:])
    firsts = [tuple(rows[e * s : (e + 1) * s, 0]) for e in range(3)]
    assert len(set(firsts)) == 3, "a new document order each epoch"
    for e in range(3):
        epoch = rows[e * s : (e + 1) * s]
        assert (epoch[1:, 0] == epoch[:-1, -1]).all(), "samples overlap by one token within an epoch"
        # The stream the epoch's samples cut is whole documents, each once (the last one cut).
        ids = np.concatenate([epoch[0], epoch[1:, 1:].ravel()]) // 1000
        runs = ids[np.r_[True, ids[1:] != ids[:-1]]]
        assert len(set(runs.tolist())) == len(runs) >= 40
    again = pickle.loads(pickle.dumps(three))
    np.testing.assert_array_equal(again[[2 * s + 1, 1]], rows[[2 * s + 1, 1]])
    # A recipe pickled before epochs held the seed alone (review 47, finding 7).
    old = TokenSamples((*corpus._recipe, "sequences", 33, 4))
    np.testing.assert_array_equal(old[:], one[:])
    for bad in (0, 2**16 + 1):
        with pytest.raises(ValueError, match="epochs"):
            corpus.sequences(33, epochs=bad)


def test_llmc_and_headerless_files(tmp_path):
    t16 = (np.arange(4000) * 7 % 50257).astype(np.uint16)
    t32 = (np.arange(3000) * 101 % 128256).astype(np.uint32)
    write_llmc(tmp_path / "a.bin", t16)
    write_llmc(tmp_path / "b.bin", t32, dtype=np.uint32)
    header = np.fromfile(tmp_path / "a.bin", dtype=np.int32, count=3)
    assert header.tolist() == [20240520, 1, 4000]
    a, b = TokenDataset(tmp_path / "a.bin"), TokenDataset(tmp_path / "b.bin")
    assert (a.format, a.dtype, len(a), a.documents) == ("llmc", np.uint16, 4000, None)
    assert (b.dtype, len(b)) == (np.uint32, 3000)
    np.testing.assert_array_equal(b.windows(4)[17], t32[17:21])
    with pytest.raises(FileExistsError):
        write_llmc(tmp_path / "a.bin", t16)
    raw = tmp_path / "train.bin"
    t16.tofile(raw)
    with pytest.raises(loaderx.Error, match="needs its token type") as e:
        TokenDataset(raw)
    assert str(raw) in str(e.value)
    r = TokenDataset(raw, dtype=np.uint16)
    np.testing.assert_array_equal(r.windows(9)[3990], t16[3990:3999])
    with pytest.raises(ValueError, match="n must be"):
        r.windows(0)
    with pytest.raises(ValueError):
        r.windows(4001)


def test_lying_files_name_the_file_and_field(megatron, tmp_path):
    prefix, stream = megatron
    idx = tmp_path / "corpus.idx"
    good = idx.read_bytes()
    bad = bytearray(good)
    bad[17] = 6  # float64: not token ids
    idx.write_bytes(bytes(bad))
    with pytest.raises(loaderx.Error, match="dtype") as e:
        TokenDataset(prefix)
    assert str(idx) in str(e.value)
    bad = bytearray(good)
    bad[18:26] = struct.pack("<Q", 2**62)
    idx.write_bytes(bytes(bad))
    with pytest.raises(loaderx.Error, match="sequence_count"):
        TokenDataset(prefix)
    # A pointer past the .bin: the open reads only the last one; sequences() reads them all.
    bad = bytearray(good)
    pointers = 34 + 4 * 50
    bad[pointers + 8 * 7 : pointers + 8 * 8] = struct.pack("<q", 2**40)
    idx.write_bytes(bytes(bad))
    corpus = TokenDataset(prefix)
    with pytest.raises(loaderx.Error, match="sequence_pointers"):
        corpus.sequences(17)
    with pytest.raises(loaderx.Error, match="sequence_pointers"):
        corpus.verify()
    idx.write_bytes(good)
    bin_ = tmp_path / "corpus.bin"
    bin_.write_bytes(bin_.read_bytes()[:-4])
    with pytest.raises(loaderx.Error, match="ends the file") as e:
        TokenDataset(prefix)
    assert str(bin_) in str(e.value)


def test_a_vocabulary_refuses_ids_outside_it(megatron):
    prefix, stream = megatron
    corpus = TokenDataset(prefix, vocab_size=5000)
    first_bad = int(np.flatnonzero(stream >= 5000)[0])
    w = corpus.windows(8)
    w[[0]]
    with pytest.raises(loaderx.Error, match=f"token {first_bad} is {stream[first_bad]}, outside the vocabulary of 5000"):
        w[[first_bad - 2]]
    with pytest.raises(loaderx.Error, match=f"token {first_bad} "):
        corpus.verify()
    with pytest.raises(ValueError, match="cannot hold"):
        write_megatron(prefix.parent / "x", [np.array([70000])], overwrite=True)
    with pytest.raises(ValueError, match="not token ids"):
        write_megatron(prefix.parent / "y", [np.array([1.5])])
    # uint64 ids past int64 are not int64 tokens (a cast through int64 made them negative).
    for big in (2**63, 2**64 - 1):
        with pytest.raises(ValueError, match="cannot hold"):
            write_megatron(prefix.parent / "z", [np.array([1, big], dtype=np.uint64)], dtype=np.int64)
    assert not (prefix.parent / "z.bin").exists()


def test_documents_pack_into_rows_of_whole_documents(megatron):
    prefix, stream = megatron
    corpus = TokenDataset(prefix)
    docs = corpus.document_records()
    assert len(docs) == 50
    assert repr(docs).startswith("TokenDocuments("), repr(docs)  # what it is (look 119, L119-5)
    np.testing.assert_array_equal(docs[[3]][0], np.arange(3000, 3000 + (3 * 37 + 11) % 300).astype(np.uint16))
    with DataLoader({"tokens": docs}, batch_size=4, num_workers=2, seed=0, pack={"tokens": 129}) as loader:
        batch = next(iter(loader))
    t, seg, pos = batch["tokens"], batch["tokens_segments"], batch["tokens_positions"]
    assert t.shape == (4, 129)
    real = seg > 0
    # Each token's id is its document * 1000 + its place: a segment is a document from its start.
    np.testing.assert_array_equal(t[real] % 1000, pos[real])
    again = pickle.loads(pickle.dumps(docs))
    assert len(again) == 50


def test_big_endian_values_are_written_little_endian_and_read_only_so(tmp_path):
    # Thirteenth look, M1: tokens given (or asked for) in big-endian byte order.
    write_megatron(tmp_path / "be", [np.array([1, 2, 3], dtype=">u2")], dtype=">u2")
    np.testing.assert_array_equal(TokenDataset(tmp_path / "be").read(0, 3), [1, 2, 3])
    write_llmc(tmp_path / "be4.bin", np.array([1, 2, 3], dtype=">u4"), dtype=">u4")
    np.testing.assert_array_equal(TokenDataset(tmp_path / "be4.bin").read(0, 3), [1, 2, 3])
    (tmp_path / "be.raw").write_bytes(bytes([0, 1, 0, 2]))
    with pytest.raises(ValueError, match="little endian"):
        TokenDataset(tmp_path / "be.raw", dtype=">u2")


def test_a_headerless_dataset_pickles_with_its_dtype(tmp_path):
    # Fourteenth look, N4: every token type reopens as itself.
    for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64):
        path = tmp_path / f"{np.dtype(dt).name}.raw"
        values = np.arange(1, 17, dtype=dt)
        values.tofile(path)
        ds = TokenDataset(path, dtype=dt)
        again = pickle.loads(pickle.dumps(ds))
        assert (again.dtype, len(again)) == (np.dtype(dt), 16)
        np.testing.assert_array_equal(again.read(0, 16), values.astype(np.int64))


def test_writers_carried_into_a_forked_child_leave_the_parents_output(tmp_path):
    # A child forked while a writer runs has a copy of it: its writes went into the parent's
    # files (the published .bin too), and its exit removed the parent's temporary or staging
    # directory. Now the copy refuses to write and leaves everything to the parent.
    from conftest import run_isolated

    out = run_isolated(f"""
import os
import numpy as np
from loaderx.converter import from_iterator
from loaderx.dataset import RaggedDataset
from loaderx.tokens import TokenDataset, write_megatron

parent, children = os.getpid(), []

def forking(make, n):
    for i in range(n):
        if i == 2:
            pid = os.fork()
            if pid == 0:
                yield make(99)  # the child's one record, then its writer finishes
                return
            children.append(pid)
        yield make(i)

def run(write):
    try:
        result = write()
    except Exception as e:
        if os.getpid() != parent:
            os._exit(0 if "fork" in str(e) else 3)
        raise
    if os.getpid() != parent:
        os._exit(4)  # the child's copy must not succeed
    return result

prefix = {str(tmp_path / "m")!r}
n = run(lambda: write_megatron(prefix, forking(lambda i: np.arange(1, 4 + i % 50, dtype=np.uint16), 5)))
for pid in children:
    assert os.waitpid(pid, 0)[1] == 0
d = TokenDataset(prefix)
assert d.read(0, n).tolist() == [t for i in range(5) for t in range(1, 4 + i)], d.read(0, n)

children.clear()
out = {str(tmp_path / "r")!r}
run(lambda: from_iterator(out, forking(lambda i: np.full(3, i, np.uint8), 6)))
for pid in children:
    assert os.waitpid(pid, 0)[1] == 0
r = RaggedDataset(out)
assert [r[i].tolist() for i in range(len(r))] == [[i] * 3 for i in range(6)]
print("both ok")
""", timeout=120)
    assert "both ok" in out, out


def test_writers_in_a_child_forked_while_a_thread_writes_refuse_never_wait(tmp_path):
    # The writers' locks were taken before the engine's fork check: a child forked while a
    # thread of the parent appended waited forever in every call (abort too, so `from_numpy`'s
    # cleanup hung); and a small append in a child was acknowledged, though never writable.
    from conftest import FORK_HELPERS, run_isolated

    script = FORK_HELPERS + f"""
import numpy as np
from loaderx import _native
w = _native.Writer({str(tmp_path / "d")!r}, "dense", "u8", [4096], "zstd", "v2", None, False)
block = np.arange(4096 * 64, dtype=np.uint8)
# A first call from this thread before any fork: rust-numpy sets up NumPy's C API once per
# process, and a child forked while another thread does that waits for it forever.
w.append_items(block)
stop, t = busy(lambda: w.append_items(block))
print("writer", children([(True, lambda: w.append_items(block[:4096])), (False, w.count), (True, w.finish), (False, w.abort)], 4))
stop.set(); t.join()
small = np.arange(400, dtype=np.uint8)
w2 = _native.Writer({str(tmp_path / "small")!r}, "dense", "u8", [4], "raw", "v2", None, False)
print("small", children([(True, lambda: w2.append_items(small))], 4))
w2.append_items(small)
print("parent", w2.finish())
m = _native.MegatronWriter({str(tmp_path / "m")!r}, "u16", False)
doc = np.arange(200000, dtype="<u2").view(np.uint8)
stop, t = busy(lambda: m.add_document(doc))
print("megatron", children([(True, lambda: m.add_document(doc[:20])), (True, m.finish)], 4))
stop.set(); t.join()
w.abort()
"""
    # Up to three runs: the defect this guards made every child wait in every call, each run; a
    # child of a parent whose other thread is appending has also been seen to hang, rarely, in
    # a run (2026-12-06: 1 child in 4 in one CI run on CPython 3.12, 0 in 25 runs after it; 2 in
    # 15 under qemu-user), open in docs/reliability.md ("A forked child that hangs, rarely").
    for _ in range(3):
        out, err = run_isolated(script, timeout=240, stderr=True)
        if "writer [0, 0, 0, 0]" in out and "megatron [0, 0, 0, 0]" in out:
            break
        # Kept in the run's log even when a later run passes: the call that hung, and where.
        warnings.warn(f"a forked child hung; run again. Its output:\n{out}\nits children's stderr:\n{err[-6000:]}")
    assert "writer [0, 0, 0, 0]" in out, out
    assert "small [0, 0, 0, 0]" in out, out
    assert "parent 100" in out, out
    assert "megatron [0, 0, 0, 0]" in out, out
