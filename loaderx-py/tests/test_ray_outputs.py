"""What loaderx.ray's sink leaves at OUT after a write fails or reruns with fewer columns, locally
and on object storage, on a local Ray cluster when Ray is installed (required where
LOADERX_REQUIRE_RAY is set)."""

import os

import numpy as np
import pytest

# First: where Ray is not installed (and not required), the whole module is skipped here.
from ray_common import cluster, ray  # noqa: F401
from test_remote import s3  # noqa: F401

from loaderx import _native
from loaderx.converter import from_numpy
from loaderx.dataset import DenseDataset


def small(columns, n=40):
    rows = [{c: i * 10 + k for k, c in enumerate(columns)} for i in range(n)]
    return ray.data.from_items(rows, override_num_blocks=2)


def test_a_rerun_to_s3_with_fewer_columns_leaves_none_of_the_old_columns(s3, tmp_path):
    # Look 143, L143-2: the other columns' sets and parts stayed, though OUT holds one write's.
    from loaderx.ray import write_loaderx

    bucket, opts = s3
    write_loaderx(small(["a", "b", "c"]), "s3://bucket/out", remote=opts)
    # A set of the user's beside them, over parts of its own: not the sink's, kept.
    write_loaderx(small(["u"]), "s3://bucket/mine", remote=opts)
    _native.stitch_remote(["s3://bucket/mine/_parts/u/" + p for p in _native.list_remote_dirs("s3://bucket/mine/_parts/u", opts)], "s3://bucket/out/u", opts)
    # Look 145, L145-1: a store of the user's in a stale column's parts folder, and a file of
    # the user's in a column's set: both went with the column.
    from_numpy(tmp_path / "ds", np.arange(5))
    _native.push(str(tmp_path / "ds"), "s3://bucket/out/_parts/b/mine", opts)
    (bucket / "out" / "c" / "NOTES.txt").write_text("mine")
    write_loaderx(small(["a"]), "s3://bucket/out", remote=opts)
    assert _native.list_remote_dirs("s3://bucket/out", opts) == ["_parts", "a", "c", "u"]
    assert _native.list_remote_dirs("s3://bucket/out/_parts", opts) == ["a", "b", "c"]
    assert _native.list_remote_dirs("s3://bucket/out/_parts/b", opts) == ["mine"]
    assert DenseDataset("s3://bucket/out/_parts/b/mine", remote=opts)[:].tolist() == list(range(5))
    assert (bucket / "out" / "c" / "NOTES.txt").read_text() == "mine"
    assert DenseDataset("s3://bucket/out/a", remote=opts)[:].tolist() == [i * 10 for i in range(40)]
    assert len(DenseDataset("s3://bucket/out/u", remote=opts)) == 40


def test_a_refused_write_never_undoes_the_running_ones_lock(tmp_path):
    # Look 143, L143-3: the second write of two into a new OUT removed the first one's lock.
    from loaderx.ray import LoaderxDatasink

    out = tmp_path / "new" / "out"
    a, b = LoaderxDatasink(str(out)), LoaderxDatasink(str(out))
    a.on_write_start()
    with pytest.raises(RuntimeError, match="another write_loaderx"):
        b.on_write_start()
    b.on_write_failed(RuntimeError("refused"))
    assert (out / "_parts" / ".loaderx-write.lock").exists()
    third = LoaderxDatasink(str(out))
    with pytest.raises(RuntimeError, match="another write_loaderx"):
        third.on_write_start()
    a.on_write_failed(RuntimeError("done"))
    # The first write made OUT and the directory above it: gone with it, nothing left.
    assert not (tmp_path / "new").exists()


def test_a_failed_write_leaves_no_folder_it_made(tmp_path):
    # Look 143, L143-4: a refused rerun left an empty parts folder of its new column.
    from loaderx.ray import write_loaderx

    out = tmp_path / "out"
    write_loaderx(small(["a"]), out)
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    os.makedirs(out / "userdir")  # a directory of the user's named as a column
    with pytest.raises(FileExistsError):
        write_loaderx(small(["a", "userdir"]), out)
    bad = ray.data.from_items([{"a": 1, "n": 2}, {"a": 3, "n": None}], override_num_blocks=1)
    with pytest.raises(Exception, match="null"):
        write_loaderx(bad, out)
    os.rmdir(out / "userdir")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before


def test_column_names_that_object_storage_escapes_are_refused(tmp_path):
    # Look 146, L146-1: `x[0]` went up as `x%5B0%5D`, which listings by the raw name missed:
    # its old parts piled up, and `a%23b`'s cleanup removed `a#b`'s parts.
    from loaderx.ray import write_loaderx

    # Look 148, L148-1 and L148-4: non-ASCII names, escaped too; names longer than every name
    # made of them can be.
    for name, said in [("x[0]", "escaped"), ("a#b", "escaped"), ("a%23b", "escaped"), ("a|b", "escaped"), ("é", "escaped"), ("c" * 216, "at most 215")]:
        with pytest.raises(ValueError, match=said):
            write_loaderx(small(["a"]), tmp_path / "o", columns=[name])
        with pytest.raises(Exception, match=said):
            write_loaderx(ray.data.from_items([{name: 1}]), tmp_path / "o")


def test_a_set_the_user_moved_aside_is_not_a_killed_writes_leftover(tmp_path):
    # Look 146, L146-2: `.b.old-202612071018` (twelve hex-legal digits) was swept as a killed
    # write's, though no write of that id left parts here.
    import shutil

    from loaderx.ray import write_loaderx

    out = tmp_path / "out"
    write_loaderx(small(["a", "b"]), out)
    shutil.copytree(out / "b", out / ".b.old-202612071018")
    write_loaderx(small(["a", "b"]), out)
    assert (out / ".b.old-202612071018" / "storeset.msgpack").exists()


def test_an_s3_column_that_is_not_a_set_is_refused_before_anything_is_put(s3, tmp_path):
    # Look 146, L146-4 and L146-5: the set's files went in beside a user's file at a column's
    # URL; a store at a later column's URL was found after the first column was replaced.
    from loaderx.ray import write_loaderx

    bucket, opts = s3
    (bucket / "o1" / "c").mkdir(parents=True)
    (bucket / "o1" / "c" / "data.csv").write_text("mine")
    with pytest.raises(Exception, match="not a loaderx store set"):
        write_loaderx(small(["c"]), "s3://bucket/o1", remote=opts)
    assert sorted(os.listdir(bucket / "o1" / "c")) == ["data.csv"]
    write_loaderx(small(["a", "b"]), "s3://bucket/o2", remote=opts)
    before = _native.remote_set_parts("s3://bucket/o2/a", opts)
    from_numpy(tmp_path / "z", np.arange(3))
    _native.push(str(tmp_path / "z"), "s3://bucket/o2/z", opts)
    with pytest.raises(Exception, match="not a loaderx store set"):
        write_loaderx(small(["a", "z"]), "s3://bucket/o2", remote=opts)
    assert _native.remote_set_parts("s3://bucket/o2/a", opts) == before, "nothing replaced"
    assert len(DenseDataset("s3://bucket/o2/b", remote=opts)) == 40


def test_a_read_of_s3_planned_before_a_rewrite_of_as_many_records_refuses_it(s3):
    # Look 156, L156-2: read tasks of an s3:// set checked its record count only; a task opened
    # after a rewrite of as many records read the new write's rows under the old plan (one read
    # gave rows of both writes).
    from loaderx.ray import read_loaderx, write_loaderx

    _, opts = s3
    write_loaderx(small(["x"], 10), "s3://bucket/mix", remote=opts)
    planned = read_loaderx("s3://bucket/mix/x", remote=opts, override_num_blocks=2)
    write_loaderx(ray.data.from_items([{"x": 200 + i} for i in range(10)]), "s3://bucket/mix", remote=opts)
    with pytest.raises(Exception, match="changed since read_loaderx planned"):
        planned.take_all()
    again = read_loaderx("s3://bucket/mix/x", remote=opts)
    assert sorted(r["x"] for r in again.take_all()) == list(range(200, 210))


def test_a_read_of_s3_planned_before_a_push_or_stitch_again_refuses_it(s3, tmp_path):
    # Look 159, L159-1: a store pushed again to its URL, or a set stitched again over parts
    # pushed again to theirs (the part URLs the same), with as many records: a read planned
    # before gave rows of both writes. Read tasks compare the dataset's fingerprint now.
    from loaderx.ray import read_loaderx

    _, opts = s3
    for k, base in enumerate([0, 200]):
        from_numpy(tmp_path / f"s{k}", np.arange(base, base + 10, dtype=np.int64))
        for p in range(2):
            from_numpy(tmp_path / f"p{k}{p}", np.arange(base + 5 * p, base + 5 * p + 5, dtype=np.int64))
    _native.push(str(tmp_path / "s0"), "s3://bucket/t2/x", opts)
    parts = [f"s3://bucket/t3/p/part-{p:05d}" for p in range(2)]
    for p, url in enumerate(parts):
        _native.push(str(tmp_path / f"p0{p}"), url, opts)
    _native.stitch_remote(parts, "s3://bucket/t3/set", opts)
    store = read_loaderx("s3://bucket/t2/x", remote=opts, override_num_blocks=2)
    stitched = read_loaderx("s3://bucket/t3/set", remote=opts, override_num_blocks=2)
    _native.push(str(tmp_path / "s1"), "s3://bucket/t2/x", opts)
    for p, url in enumerate(parts):
        _native.push(str(tmp_path / f"p1{p}"), url, opts)
    _native.stitch_remote(parts, "s3://bucket/t3/set", opts)
    for planned in (store, stitched):
        with pytest.raises(Exception, match="changed since read_loaderx planned"):
            planned.take_all()
    for url in ("s3://bucket/t2/x", "s3://bucket/t3/set"):
        assert sorted(next(iter(r.values())) for r in read_loaderx(url, remote=opts).take_all()) == list(range(200, 210))

def test_a_read_planned_before_rewrites_or_edits_in_place_refuses_each(tmp_path):
    # Look 161: a directory made anew may get the planned one's inode number back (L161-1), and
    # a store edited in place keeps its directory (L161-2): either was read under the old plan.
    from loaderx._ray_read import LoaderxDatasource
    from loaderx.zrecord import Zrecord

    p = tmp_path / "x"
    from_numpy(p, np.arange(10, dtype=np.int64), codec="raw")
    task = LoaderxDatasource(p).get_read_tasks(2)[1]
    assert [b.column(0).to_pylist() for b in task.read_fn()] == [[5, 6, 7, 8, 9]]
    for k in range(1, 7):
        from_numpy(p, np.arange(10, dtype=np.int64) + 100 * k, codec="raw")
        with pytest.raises(RuntimeError, match="changed since read_loaderx planned"):
            list(task.read_fn())
    # A writer that opens it and writes nothing changes nothing (look 163, L163-2: refused).
    task = LoaderxDatasource(p).get_read_tasks(2)[1]
    assert len(Zrecord(p, "a")) == 10
    assert [b.column(0).to_pylist() for b in task.read_fn()] == [[605, 606, 607, 608, 609]]
    z = Zrecord(p, "a")
    z.delete([9])
    z.append([np.int64(999).tobytes()], codec="raw")
    del z
    with pytest.raises(RuntimeError, match="changed since read_loaderx planned"):
        list(task.read_fn())


def test_a_read_planned_before_the_same_bytes_under_another_schema_refuses_them(s3, tmp_path):
    # Look 165, L165-1: a dataset pushed again with the same records under another dtype or
    # shape (its index the same) was read as the new dtype under the old plan.
    from loaderx._ray_read import LoaderxDatasource

    _, opts = s3
    values = np.arange(40, dtype=np.int32).reshape(10, 4)
    for name, array in [("i32", values), ("f32", values.view(np.float32)), ("shape", values.reshape(10, 2, 2))]:
        from_numpy(tmp_path / name, array, codec="raw")
    for other in ("f32", "shape"):
        _native.push(str(tmp_path / "i32"), "s3://bucket/same/x", opts)
        task = LoaderxDatasource("s3://bucket/same/x", remote=opts).get_read_tasks(2)[1]
        _native.push(str(tmp_path / other), "s3://bucket/same/x", opts)
        with pytest.raises(RuntimeError, match="changed since read_loaderx planned"):
            list(task.read_fn())


def test_a_relative_path_is_read_as_the_dataset_it_names_here(tmp_path, monkeypatch):
    # Look 167, L167-2: read tasks resolved a relative path in their worker's directory (a Ray
    # runtime_env working_dir): "changed since planned" of unchanged data, or another dataset.
    from loaderx._ray_read import LoaderxDatasource

    from_numpy(tmp_path / "x", np.arange(10, dtype=np.int64))
    monkeypatch.chdir(tmp_path)
    source = LoaderxDatasource("x")
    assert source.columns[0].path == str(tmp_path / "x")
    monkeypatch.chdir("/")
    assert [b.column(0).to_pylist() for b in source.get_read_tasks(1)[0].read_fn()] == [list(range(10))]
    # The sink writes where readers read, through a link and `..` (look 171, L171-1: it wrote,
    # and removed stale columns, where `abspath` took it).
    from loaderx.ray import read_loaderx, write_loaderx

    monkeypatch.chdir(tmp_path)
    (tmp_path / "real" / "sub").mkdir(parents=True)
    os.symlink(tmp_path / "real" / "sub", tmp_path / "lnk")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("kept")
    write_loaderx(small(["x"], 4), "lnk/../out")
    assert sorted(r["x"] for r in read_loaderx("lnk/../out").take_all()) == [0, 10, 20, 30]
    assert sorted(os.listdir(tmp_path / "real" / "out")) == ["_parts", "x"]
    assert sorted(os.listdir(tmp_path / "out")) == ["mine.txt"]
