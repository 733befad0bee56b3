"""What a PyTorch user met in a first hour with the package: objects that print as what they
are, a ``shape``, errors that name the argument (or the way out), truncation from the loader."""

import importlib.util
import os

import numpy as np
import pytest

import loaderx
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset


@pytest.fixture
def data(in_tmp):
    from_numpy("x", np.arange(40, dtype=np.float32).reshape(10, 4))
    from_iterator("t", (np.arange(n % 5 + 1, dtype=np.int32) for n in range(10)))
    return DenseDataset("x"), RaggedDataset("t")


def test_datasets_have_a_shape(data):
    x, t = data
    assert x.shape == (10, 4) and x[:].shape == x.shape
    assert t.shape == (10, None)


def test_an_endless_loader_is_truthy_and_its_len_says_how_to_get_one(data):
    x, _ = data
    with DataLoader({"x": x}, batch_size=2, num_workers=1) as loader:
        assert loader
        with pytest.raises(TypeError, match="epochs="):
            len(loader)
        assert repr(loader) == "DataLoader(batch_size=2, endless, next step 0)"
    assert "closed" in repr(loader)
    with DataLoader({"x": x}, batch_size=4, num_workers=1, epochs=1) as finite:
        assert len(finite) == 3 and "3 steps" in repr(finite)


@pytest.mark.parametrize("arg", ["batch_size", "num_workers", "prefetch_size", "epochs"])
def test_a_negative_size_is_a_value_error_naming_it(data, arg):
    x, _ = data
    with pytest.raises(ValueError, match=arg):
        DataLoader({"x": x}, **{arg: -1})


def test_padding_truncates_only_when_asked_and_says_so_in_python_terms(data):
    _, t = data
    with DataLoader({"t": t}, batch_size=10, num_workers=1, mode="sequential", pad={"t": 2}) as loader:
        with pytest.raises(ValueError, match="truncation was not asked for") as e:
            next(loader)
        assert "Pad::" not in str(e.value) and "pad_truncate=True" in str(e.value)
    with DataLoader({"t": t}, batch_size=10, num_workers=1, mode="sequential", pad={"t": 2}, pad_truncate=True) as loader:
        batch = next(loader)
    assert batch["t"].shape == (10, 2)
    assert batch["t_lengths"].max() == 2


def test_a_path_that_holds_no_dataset_says_what_it_is(in_tmp):
    np.save("x.npy", np.zeros((3, 2), dtype=np.float32))
    with pytest.raises(loaderx.NotAStoreError, match=r"\.npy file.*convert") as e:
        DenseDataset("x.npy")
    assert not isinstance(e.value, loaderx.CorruptError)
    (in_tmp / "project").mkdir()
    (in_tmp / "project" / "notes.txt").write_text("mine")
    with pytest.raises(loaderx.NotAStoreError, match="no schema.msgpack"):
        DenseDataset("project")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_the_torch_classes_print_as_what_they_are(data):
    from loaderx.torch import IterableLoader, MapDataset

    x, _ = data
    assert repr(MapDataset({"x": x})).startswith("MapDataset(len=10, {x: DenseDataset(")
    assert repr(IterableLoader({"x": x}, batch_size=2)) == "IterableLoader(streams=['x'], batch_size=2)"


@pytest.mark.parametrize(
    "make",
    [
        lambda x: DataLoader({"x": x}, seed=-1),
        lambda x: DataLoader({"x": x}, seed=2**64),
        lambda x: DataLoader({"x": x}, shard=(-1, 2)),
        lambda x: DataLoader({"x": x}, batch_size=2**32),
        lambda x: x.split(0.5, seed=-1),
        lambda x: loaderx.zsampler.Zsampler(length=10, batch_size=-1),
        lambda x: loaderx.zsampler.Zsampler(length=2**32, batch_size=2),
        lambda x: loaderx.zsampler.Zsampler(length=10, batch_size=2, seed=-1),
        lambda x: loaderx.zsampler.Zsampler(length=10, batch_size=2).batch(-1),
    ],
)
def test_out_of_range_integers_are_value_errors_naming_the_argument(data, make):
    x, _ = data
    with pytest.raises(ValueError, match=r"(seed|shard|batch_size|length|step).* must be an int in \["):
        make(x)


def test_out_overlapping_the_indices_is_refused_clearly(data):
    x, _ = data
    buf = np.zeros(8, dtype=np.float32)
    with pytest.raises(ValueError, match="overlaps the indices"):
        x.gather(buf.view(np.uint32)[:2], out=buf.reshape(2, 4))
    z = loaderx.zrecord.Zrecord("z")
    z.append([b"ab", b"c"])
    ro = np.zeros(3, dtype=np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        z.gather_into([0, 1], out=ro)


def test_the_native_gather_into_names_what_is_wrong_with_out(tmp_path):
    # Look 69, L69-3: an out sharing memory with the indices was "out must be writable", and
    # one of another dtype a TypeError naming no dtype.
    z = loaderx.zrecord.Zrecord(tmp_path / "z")
    z.append([b"abcdefgh", b"c"])
    buf = np.zeros(9, dtype=np.uint8)
    idx = buf[:8].view(np.uint64)
    idx[:] = 0
    with pytest.raises(ValueError, match="share no memory with indices"):
        z._native.gather_into(idx, buf)
    with pytest.raises(TypeError, match="uint8"):
        z._native.gather_into(np.zeros(1, dtype=np.uint64), np.zeros(8, dtype=np.int8))


def test_a_zrecord_of_an_s3_url_points_at_the_datasets(tmp_path):
    # Look 69, L69-4: the refusal named the engine's Rust types.
    with pytest.raises(ValueError, match=r"DenseDataset\(url\) or RaggedDataset") as e:
        loaderx.zrecord.Zrecord("s3://KEY:SE/CRET@bucket/x", "r")
    assert "SE/CRET" not in str(e.value) and "RemoteStore" not in str(e.value)


def test_a_second_for_over_a_finished_pass_says_so_instead_of_doing_nothing(data):
    # Issue 42's second trial: `for epoch in range(E): for b in loader:` with epochs=1 did the
    # first epoch's work and then nothing, silently (torch's DataLoader restarts at each `for`).
    x, _ = data
    with DataLoader({"x": x}, batch_size=4, num_workers=1, epochs=1) as loader:
        assert sum(1 for _ in loader) == 3
        with pytest.raises(RuntimeError, match="make a DataLoader per epoch"):
            for _ in loader:
                pass
    with DataLoader({"x": x}, batch_size=4, num_workers=1, epochs=2) as loader:
        assert sum(1 for _ in loader) == 6
        done = loader.state()
    # Look 57: resumed from a finished pass, the first `for` yielded nothing, without a word.
    with DataLoader({"x": x}, batch_size=4, num_workers=1, epochs=2, state=done) as again:
        with pytest.raises(RuntimeError, match="pass is over"):
            for _ in again:
                pass
    # Look 84, F84-6: a pass of no steps said it was over, as if it had run.
    with DataLoader({"x": x}, batch_size=64, num_workers=1, epochs=1, drop_last=True) as none:
        assert len(none) == 0
        with pytest.raises(RuntimeError, match="has no steps.*drop_last=False keeps it"):
            for _ in none:
                pass


def test_finite_pass_options_without_epochs_are_refused_not_ignored(data):
    x, t = data
    for kwargs in ({"shuffle": False}, {"drop_last": True}):
        with pytest.raises(ValueError, match="epochs=n"):
            DataLoader({"x": x}, **kwargs)
    with pytest.raises(ValueError, match="pad="):
        DataLoader({"t": t}, pad_truncate=True)
    with DataLoader({"x": x}, batch_size=4, num_workers=1, epochs=1, shuffle=False) as ordered:
        np.testing.assert_array_equal(next(ordered)["x"], x[:4])


def test_vision_transforms_check_their_arguments_when_made():
    from loaderx import vision as V

    for make, what in [
        (lambda: V.RandomResizedCrop(-3), r"RandomResizedCrop\(size=-3\)"),
        (lambda: V.RandomResizedCrop(0), r"\[1, 16385\)"),
        (lambda: V.RandomResizedCrop((32, 48)), "square"),
        (lambda: V.RandomResizedCrop(8, scale=(0.5, 0.1)), "scale"),
        (lambda: V.Resize(0), r"Resize\(size=0\)"),
        (lambda: V.CenterCrop(2.5), "must be an int"),
        (lambda: V.HorizontalFlip(p=2.0), r"\[0, 1\]"),
        (lambda: V.Normalize([0.5] * 3, [0.0] * 3), "standard deviation of 0"),
        (lambda: V.ColorJitter(brightness=-1), "brightness"),
    ]:
        with pytest.raises((ValueError, TypeError), match=what):
            make()
    with pytest.raises(NotImplementedError, match="hue"):
        V.ColorJitter(hue=0.1)


def test_a_directory_of_datasets_names_the_one_to_open(in_tmp):
    # `convert images` writes OUT/images and OUT/labels; opening OUT named nothing to open.
    from loaderx import vision as V

    from_numpy("out/labels", np.arange(4, dtype=np.uint32))
    from_numpy("out/images", np.arange(8, dtype=np.uint8).reshape(4, 2))
    with pytest.raises(loaderx.NotAStoreError, match=r"open one of them, e\.g\. .*out/images"):
        DenseDataset("out")
    # A missing path is named before any transform list is looked at (a FileNotFoundError, as
    # every dataset's: look 119, L119-4).
    with pytest.raises(FileNotFoundError, match="does not exist"):
        V.ImageDataset("nope", [V.Resize(32)])
    # The store given to ImageFolder as if it were a folder of images.
    with pytest.raises(loaderx.Error, match="converted store"):
        V.ImageFolder("out", [V.RandomResizedCrop(8)])


def test_paths_given_as_bytes_are_taken_as_os_fsdecode_reads_them(tmp_path):
    # Look 101, L101-5: a bytes path met the binding's "'bytes' object is not an instance of
    # 'str'" in Zrecord, from_numpy and the datasets (Zrecord even checked bytes for NUL).
    from loaderx.zrecord import Zrecord

    base = os.fsencode(tmp_path)
    from_numpy(base + b"/d", np.arange(6, dtype=np.int32).reshape(3, 2))
    assert DenseDataset(base + b"/d")[2].tolist() == [4, 5]
    from_iterator(base + b"/r", [np.arange(2), np.arange(3)])
    assert len(RaggedDataset(base + b"/r")[1]) == 3
    z = Zrecord(base + b"/z", "w")
    z.append([b"abc"])
    assert Zrecord(os.fsdecode(base + b"/z"), "r").gather([0]) == [b"abc"]
    with pytest.raises(ValueError, match="NUL"):
        Zrecord(base + b"/\x00z")
    # Look 103, L103-1: a name that is not UTF-8 was written, then refused by every reader with
    # a UnicodeEncodeError naming no path. As bytes, and as the str os.fsdecode makes of them.
    for name in (base + b"/\xff-d", os.fsdecode(base + b"/\xfe-d")):
        from_numpy(name, np.arange(6, dtype=np.int32).reshape(3, 2))
        assert DenseDataset(name)[1].tolist() == [2, 3]
        rag = name + (b"-r" if isinstance(name, bytes) else "-r")
        from_iterator(rag, [np.arange(2), np.arange(3)])
        assert len(RaggedDataset(rag)[1]) == 3


def test_look_119_contract_gaps(tmp_path):
    # L119-4: a missing image dataset is a FileNotFoundError, as every dataset's.
    from loaderx import vision as V
    with pytest.raises(FileNotFoundError):
        V.ImageDataset(str(tmp_path / "nope"), [V.CenterCrop(8)])
    # L119-5: a sampler's attributes say what it draws: read-only, shown, pickled.
    import pickle
    s = loaderx.zsampler.Zsampler(length=10, batch_size=4, seed=1)
    with pytest.raises(AttributeError):
        s.length = 99
    assert repr(s) == "Zsampler(length=10, batch_size=4, mode='iid', seed=1, rank=0, world=1)"
    again = pickle.loads(pickle.dumps(s))
    assert (len(again), again.seed, again.batch(3).tolist()) == (10, 1, s.batch(3).tolist())


def test_look_119_arguments_of_the_wrong_type_are_refused_by_name(tmp_path):
    # L119-6: a string (or bool) where a number is due, which float() takes, is refused as
    # every sibling refuses it.
    from loaderx import vision as V
    from loaderx.dataset import pad
    with pytest.raises(TypeError, match="p must be a number, not str"):
        V.HorizontalFlip("0.7")
    with pytest.raises(TypeError, match="3 numbers"):
        V.Normalize(("0.5", 0.5, 0.5), (1, 1, 1))
    with pytest.raises(TypeError, match="the pad value must be a number, not str"):
        pad([np.arange(3)], "5")
    assert V.HorizontalFlip(np.float32(0.25)).p == np.float32(0.25)
    # L119-7: the argument is named.
    with pytest.raises(ValueError, match="the dataset's path is empty"):
        from_numpy("", np.arange(3))
    with pytest.raises(TypeError, match="overwrite must be a bool, not int"):
        from_numpy(tmp_path / "a", np.arange(3), overwrite=1)
    with pytest.raises(TypeError, match="mode must be a str, not NoneType"):
        loaderx.zrecord.Zrecord(tmp_path / "z", None)
    # Look 131, L131-3: codec and format named too, and a token dtype that is no integer.
    with pytest.raises(TypeError, match="codec must be a str, not int"):
        from_numpy(tmp_path / "b", np.arange(3), codec=5)
    with pytest.raises(TypeError, match="format must be a str, not int"):
        from_iterator(tmp_path / "c", [np.arange(3)], format=5)
    with pytest.raises(TypeError, match="codec must be a str, not int"):
        loaderx.zrecord.Zrecord(tmp_path / "z2", "w").append([b"x"], codec=5)
    from loaderx.tokens import write_llmc
    with pytest.raises(TypeError, match="dtype must be an integer type of token ids, not bool"):
        write_llmc(tmp_path / "t.bin", np.arange(3), dtype=bool)
    # plan_file takes NumPy's integers as it takes Python's, and still no bool.
    (tmp_path / "f").write_bytes(b"a\nb\nc\n")
    assert len(loaderx.chunker.plan_file(tmp_path / "f", np.int64(2)).ranges) == 2
    with pytest.raises(TypeError, match="parts must be an int, got bool"):
        loaderx.chunker.plan_file(tmp_path / "f", True)
    # Look 144, L144-4: the delimiter takes NumPy's integers too; an empty path is named so.
    assert loaderx.chunker.plan_file(tmp_path / "f", 2, np.uint8(10)) == loaderx.chunker.plan_file(tmp_path / "f", 2, 10)
    with pytest.raises(ValueError, match="path is empty"):
        loaderx.chunker.plan_file("", 2)
    # L119-8: IterableLoader checks its arguments when it is made, not at its first batch.
    torch = pytest.importorskip("torch")
    del torch
    from loaderx.torch import IterableLoader
    from_numpy(tmp_path / "y", np.arange(10))
    with pytest.raises(ValueError, match="batch_size must be an int in"):
        IterableLoader({"y": DenseDataset(tmp_path / "y")}, batch_size=0)
    # Look 133: options, datasets, token dtypes, pad lengths and transform lists named.
    streams = {"y": DenseDataset(tmp_path / "y")}
    for option, value, said in (("pad", ["y"], "pad must be a dict of stream names, not list"),
                                ("pack", [("y", 8)], "pack must be a dict of stream names, not list"),
                                ("bucket", {3: 2}, "bucket's stream names must be str, not int")):
        with pytest.raises(TypeError, match=said):
            DataLoader(streams, batch_size=2, **{option: value})
    from loaderx.torch import MapDataset
    with pytest.raises(TypeError, match="stream 'x' is a ndarray, not a DenseDataset or RaggedDataset"):
        MapDataset({"x": np.arange(10)})
    from loaderx.tokens import TokenDataset, write_megatron
    with pytest.raises(TypeError, match="dtype must be an integer type of token ids, not float32"):
        write_megatron(tmp_path / "m", [np.arange(3)], dtype=np.float32)
    with pytest.raises(TypeError, match="dtype 'nope' is not a NumPy dtype"):
        TokenDataset(tmp_path / "raw.bin", dtype="nope")
    from loaderx import vision as V
    with pytest.raises(TypeError, match="transforms must be a list of transforms, not one RandomResizedCrop"):
        V.ImageDataset(tmp_path / "y", V.RandomResizedCrop(8))
    with pytest.raises(FileNotFoundError):
        V.ImageFolder(tmp_path / "missing", [])
    # Look 127: no dataset at all is said so, not "different lengths: []".
    from loaderx.torch import MapDataset
    with pytest.raises(ValueError, match="at least one dataset"):
        MapDataset({})


def test_a_writer_keeps_its_output_where_it_began_when_the_directory_changes(tmp_path, monkeypatch):
    # Look 173 (L173-1, L173-2): a generator changing the working directory while a writer of a
    # relative output ran put the staging, its rename and its clean-up in the new directory:
    # `from_iterator` said it wrote, the records stayed in `a/out.partial`, and a dataset `out`
    # in the new directory was replaced by a killed writer's staging there; `write_megatron`
    # failed and left its temporary. The output is the one the call named, where it began.
    from loaderx.tokens import TokenDataset, write_megatron

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    from_iterator(b / "out", [np.arange(5, dtype=np.int32)] * 3)
    (b / "out.partial").mkdir()  # what a killed writer of b/out leaves
    monkeypatch.chdir(a)

    def away(items):
        yield items[0]
        os.chdir(b)
        yield from items[1:]

    assert from_iterator("out", away([np.arange(3, dtype=np.int32), np.arange(4, dtype=np.int32)])) == 2
    assert [len(r) for r in RaggedDataset(a / "out")[:]] == [3, 4]
    assert [len(r) for r in RaggedDataset(b / "out")[:]] == [5, 5, 5]
    assert not (a / "out.partial").exists()
    os.chdir(a)
    assert write_megatron("corpus", away([np.arange(3), np.arange(4)]), dtype=np.uint16) == 7
    t = TokenDataset(a / "corpus")
    assert t.documents == 2 and t.read(0, len(t)).tolist() == [0, 1, 2, 0, 1, 2, 3]
    assert sorted(p.name for p in a.iterdir() if "corpus" in p.name) == ["corpus.bin", "corpus.idx"]
    assert not any("corpus" in p.name for p in b.iterdir())
    # Before its first item too (look 176, L176-3: the output was fixed after it was drawn).
    os.chdir(a)

    def away_first():
        os.chdir(b)
        yield np.arange(2, dtype=np.int32)

    assert from_iterator("early", away_first()) == 1
    assert len(RaggedDataset(a / "early")) == 1 and not (b / "early").exists()
