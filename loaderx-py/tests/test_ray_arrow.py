"""loaderx.ray's columns of every Arrow type, through the engine's Arrow mapping: nulls and lying
tensor shapes refused, ragged columns, variable-shaped tensors, bytes and strings, extension types,
on a local Ray cluster when Ray is installed (required where LOADERX_REQUIRE_RAY is set)."""

import numpy as np
import pytest

# First: where Ray is not installed (and not required), the whole module is skipped here,
# before pyarrow (which comes with Ray) is imported.
from ray_common import cluster, ray  # noqa: F401

import pyarrow as pa  # noqa: E402

from loaderx.dataset import RaggedDataset  # noqa: E402


def test_nulls_inside_lists_are_refused_not_turned_into_floats(tmp_path):
    # Sixteenth look, Q3: an int64 list column with a null inside became float64 with NaN.
    from loaderx.ray import write_loaderx

    for arr in (
        pa.array([[2**60 + 1, 5], [None, 7], [9]], type=pa.list_(pa.int64())),
        pa.array([[1, 2], [3, None]], type=pa.list_(pa.int64(), 2)),
    ):
        ds = ray.data.from_arrow(pa.table({"ids": arr}))
        with pytest.raises(Exception, match="nulls") as e:
            write_loaderx(ds, tmp_path / "n")
        # Look 73, L73-2: the engine named the column it was handed as "values".
        assert 'column "values"' not in str(e.value) and "ids" in str(e.value), str(e.value)
        assert not (tmp_path / "n" / "ids").exists()
        # Look 141, L141-1: a first write refused left OUT, its parts folder and lock behind.
        assert not (tmp_path / "n").exists(), list((tmp_path / "n").rglob("*"))
    ds = ray.data.from_arrow(pa.table({"ids": pa.array([[2**60 + 1, 5], [7], [9]], type=pa.list_(pa.int64()))}))
    write_loaderx(ds, tmp_path / "ok")
    back = RaggedDataset(tmp_path / "ok" / "ids")
    assert back.dtype == np.int64 and back[[0]][0].tolist() == [2**60 + 1, 5]


def test_tensor_columns_with_nulls_or_lying_shapes_are_refused():
    # Seventeenth look, R2: Ray's tensor columns hide nulls from to_numpy; a shape that does not
    # describe its values would cut records elsewhere.
    from ray.data.extensions import ArrowTensorArray, ArrowVariableShapedTensorArray

    from loaderx._ray_records import _records

    a = ArrowVariableShapedTensorArray.from_numpy(
        [np.arange(4, dtype=np.int64).reshape(2, 2), np.arange(6, dtype=np.int64).reshape(3, 2)]
    )
    data, shape = a.storage.field("data"), a.storage.field("shape")
    with_null = pa.array([[0, None, 2, 3], [0, 1, 2, 3, 4, 5]], type=data.type)
    bad = pa.ExtensionArray.from_storage(a.type, pa.StructArray.from_arrays([with_null, shape], names=["data", "shape"]))
    with pytest.raises(ValueError, match="nulls"):
        _records(bad, "c", "a test block")
    lying = pa.array([[2, 2], [2, 2]], type=shape.type)
    bad = pa.ExtensionArray.from_storage(a.type, pa.StructArray.from_arrays([data, lying], names=["data", "shape"]))
    with pytest.raises(ValueError, match="shapes do not describe"):
        _records(bad, "c", "a test block")
    assert _records(a, "c", "a test block").layout.kind == "ragged"
    # Eighteenth look, S1: a fixed-shape tensor's values read as Arrow holds them (a sliced
    # child, offsets not from 0), and tensors of another length than the shape refused.
    from ray.data.extensions import ArrowTensorType

    tt = ArrowTensorType((2,), pa.int64())
    sliced = pa.LargeListArray.from_arrays(pa.array([0, 2, 4], pa.int64()), pa.array([9, 9, 1, 2, 3, 4], pa.int64()).slice(2))
    if tt.storage_type != sliced.type:
        sliced = sliced.cast(tt.storage_type)
    got = _records(pa.ExtensionArray.from_storage(tt, sliced), "c", "a test block").dense
    assert got.tolist() == [[1, 2], [3, 4]]
    uneven = pa.LargeListArray.from_arrays(pa.array([0, 3, 4], pa.int64()), pa.array([1, 2, 3, 4], pa.int64()))
    if tt.storage_type != uneven.type:
        uneven = uneven.cast(tt.storage_type)
    with pytest.raises(ValueError, match="shapes do not describe"):
        _records(pa.ExtensionArray.from_storage(tt, uneven), "c", "a test block")
    t = ArrowTensorArray.from_numpy(np.arange(8, dtype=np.int64).reshape(2, 4))
    bad = pa.ExtensionArray.from_storage(t.type, pa.array([[0, None, 2, 3], [4, 5, 6, 7]], type=t.storage.type))
    with pytest.raises(ValueError, match="nulls"):
        _records(bad, "c", "a test block")


def test_a_ragged_column_takes_blocks_whose_records_have_one_length(tmp_path):
    from loaderx.ray import write_loaderx

    def tokens(batch):
        ids = batch["id"]
        # One batch per task, its records all as long: Ray makes each a fixed-shape tensor.
        return {"tokens": np.repeat(ids[:, None], ids[0] // 500 + 1, axis=1).astype(np.int32)}

    ds = ray.data.range(1_000, override_num_blocks=2).map_batches(tokens, batch_size=500)
    write_loaderx(ds, tmp_path / "a", ragged=["tokens"])
    got = RaggedDataset(tmp_path / "a" / "tokens")
    assert len(got) == 1_000
    for i, record in enumerate(got[:]):
        np.testing.assert_array_equal(record, np.full(i // 500 + 1, i, np.int32))
    with pytest.raises(ValueError, match=r"shape \(2,\).*shape \(1,\).*name a ragged column in write_loaderx's `ragged`"):
        write_loaderx(ds, tmp_path / "b")


def test_a_block_of_empty_tensors_is_records_of_no_rows(tmp_path):
    # Look 101, L101-2: a block whose tensors all hold no values (Ray: a fixed-shape tensor of
    # shape (0,) or (0, 2)) failed the write task with pyarrow's "list_size needs to be a strict
    # positive integer", naming nothing; as records they are rows of none.
    from loaderx.ray import write_loaderx

    cases = {
        "first": [np.arange(i % 4, dtype=np.int16) for i in range(7)],
        "all": [np.zeros(0, np.int16) for _ in range(3)],
        "rows": [np.zeros((i % 2, 2), np.float32) for i in range(4)],
    }
    for name, records in cases.items():
        for blocks in (1, len(records)):
            ds = ray.data.from_items([{"r": r} for r in records], override_num_blocks=blocks)
            out = tmp_path / f"{name}-{blocks}"
            write_loaderx(ds, out, ragged=["r"])
            got = RaggedDataset(out / "r")[:]
            assert [g.shape for g in got] == [r.shape for r in records], (name, blocks)
    # Not named ragged: items of no bytes are refused by column, as a dense column's.
    ds = ray.data.from_items([{"r": np.zeros(0, np.int16)} for _ in range(3)], override_num_blocks=1)
    with pytest.raises(ValueError, match=r"column 'r'.*shape \(0,\), which hold no bytes.*`ragged`"):
        write_loaderx(ds, tmp_path / "dense")


def test_bfloat16_datasets_read_as_their_float32_values(tmp_path):
    # Look 101, L101-4: Arrow has no bfloat16, and every read task of a bf16 dataset failed
    # inside Ray, naming no column. Its values come as float32, exactly (a bf16 is a float32's
    # top 16 bits), written here as bits: ml_dtypes need not be installed.
    from loaderx import _native
    from loaderx.ray import read_loaderx

    exact = np.array([1.5, -2.25, 2.0**100, 2.0**-120, 0.0, -0.0, np.inf, 7.0], dtype=np.float32)
    bits = (exact.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    for kind, shape, name in [("dense", [2], "d"), ("dense", [], "s"), ("ragged", [], "r")]:
        w = _native.Writer(str(tmp_path / name), kind, "bf16", shape, "raw", "v2", None, False)
        if kind == "dense":
            w.append_items(bits)
        else:
            w.append_ragged(bits, np.array([0, 6, 6, 16], dtype=np.uint64))
        w.finish()
        rows = read_loaderx(tmp_path / name, override_num_blocks=2).take_all()
        got = [np.asarray(r[name], dtype=np.float32) for r in rows]
        want = {"d": list(exact.reshape(4, 2)), "s": list(exact), "r": [exact[:3], exact[3:3], exact[3:]]}[name]
        assert len(got) == len(want), name
        for g, e in zip(got, want):
            np.testing.assert_array_equal(g, e, err_msg=name)
            assert g.dtype == np.float32


def test_variable_shaped_tensors_become_ragged_records_of_rows(tmp_path):
    from loaderx.ray import read_loaderx, write_loaderx

    def boxes(batch):
        return {"boxes": [np.full((int(i) % 4 + 1, 4), i, np.float32) for i in batch["id"]]}

    write_loaderx(ray.data.range(2_000, override_num_blocks=3).map_batches(boxes), tmp_path / "out")
    got = RaggedDataset(tmp_path / "out" / "boxes")
    assert (len(got), got.row_shape, got.dtype) == (2_000, (4,), np.float32)
    for i, record in enumerate(got[:]):
        np.testing.assert_array_equal(record, np.full((i % 4 + 1, 4), i, np.float32))
    back = read_loaderx(tmp_path / "out").take_batch(6, batch_format="pyarrow").column("boxes").to_pylist()
    assert back[5] == [[5.0] * 4] * 2


def test_bytes_and_strings_become_u8_records(tmp_path):
    from loaderx.ray import read_loaderx, write_loaderx

    blobs = [bytes(range(i % 7)) * 3 for i in range(1_000)]
    words = [f"word {i}" * (i % 4) for i in range(1_000)]
    ds = ray.data.from_arrow(pa.table({"blob": pa.array(blobs, pa.binary()), "word": words}))
    write_loaderx(ds, tmp_path / "out")
    got = RaggedDataset(tmp_path / "out" / "blob")
    assert got.dtype == np.uint8 and [r.tobytes() for r in got[:]] == blobs
    assert [r.tobytes().decode() for r in RaggedDataset(tmp_path / "out" / "word")[:]] == words
    back = read_loaderx(tmp_path / "out", columns=["word"]).take_batch(3, batch_format="pyarrow")
    assert [bytes(r) for r in back.column("word").to_pylist()] == [w.encode() for w in words[:3]]


def test_extension_types_map_by_their_own_rules_or_are_refused():
    # Look 66: since the sink maps through the engine, an extension array went over as its
    # storage: Arrow's own fixed-shape tensors (Ray's ARROW_NATIVE format) lost their shape (and
    # a permuted one its order), Ray's pickled objects were written as pickle bytes, and a
    # struct's non-binary `bytes` field was unwrapped where `convert parquet` refuses it.
    from loaderx._ray_records import _records

    x = np.arange(48, dtype=np.int32).reshape(8, 3, 2).transpose(0, 2, 1)
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    for arr, want in [(tensors, x), (tensors.slice(2, 3), x[2:5])]:
        r = _records(arr, "x", "a test block")
        assert (r.layout.kind, r.layout.shape) == ("dense", (2, 3)), r.layout
        np.testing.assert_array_equal(r.dense, want)

    class Pickled(pa.ExtensionType):
        def __init__(self):
            super().__init__(pa.large_binary(), "ray.data.arrow_pickled_object")

        def __arrow_ext_serialize__(self):
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return cls()

    pickled = pa.ExtensionArray.from_storage(Pickled(), pa.array([b"\x80\x05"], pa.large_binary()))
    with pytest.raises(TypeError, match="extension type \"ray.data.arrow_pickled_object\""):
        _records(pickled, "p", "a test block")
    for not_binary in (pa.array([{"bytes": 1}]), pa.array([{"bytes": [1, 2]}])):
        with pytest.raises(TypeError, match="without a binary `bytes` field"):
            _records(not_binary, "s", "a test block")
    assert _records(pa.array([{"bytes": b"ab", "path": "p"}]), "image", "a test block").values.tobytes() == b"ab"


def test_a_sets_replaced_part_is_named_not_called_dense(tmp_path):
    # Look 94, M1: every schema error of the dense open was retried as ragged, so a set whose
    # part was replaced since stitching was reported as "the dataset is dense".
    from loaderx import _native
    from loaderx._ray_read import _open
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    from_numpy(tmp_path / "p0", np.arange(6, dtype=np.int32))
    from_numpy(tmp_path / "p1", np.arange(4, dtype=np.int32))
    _native.stitch([str(tmp_path / "p0"), str(tmp_path / "p1")], str(tmp_path / "set"))
    assert isinstance(_open(str(tmp_path / "set"), None), DenseDataset)
    from_numpy(tmp_path / "p1", np.arange(10, 14, dtype=np.int32))
    with pytest.raises(_native.SchemaError) as e:
        _open(str(tmp_path / "set"), None)
    assert "the dataset is dense" not in str(e.value) and "stitch" in str(e.value), str(e.value)
    from_numpy(tmp_path / "r", np.arange(3, dtype=np.int32))
    assert isinstance(_open(str(tmp_path / "r"), None), DenseDataset)


def test_a_string_where_a_list_of_columns_is_due_is_refused(tmp_path):
    # Look 119, L119-2 and L119-3: a string was taken for the list of its letters ("tokens" as
    # six one-letter columns): written dense without a word, or read naming the column "t".
    from loaderx.ray import LoaderxDatasink
    from loaderx._ray_read import LoaderxDatasource

    with pytest.raises(TypeError, match="ragged must be a list"):
        LoaderxDatasink(str(tmp_path / "out"), ragged="tokens")
    with pytest.raises(TypeError, match="columns must be a list"):
        LoaderxDatasource(str(tmp_path), columns="tokens")
