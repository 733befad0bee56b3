"""loaderx.ray on a local Ray cluster, when Ray is installed (required where LOADERX_REQUIRE_RAY
is set): Ray datasets written as store sets, read back by the loader and by read_loaderx; a
write task killed mid-write and retried; failed and repeated writes."""

import os
import shutil
import subprocess

import numpy as np
import pytest

if os.environ.get("LOADERX_REQUIRE_RAY"):
    import ray
else:
    ray = pytest.importorskip("ray")

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from loaderx import _native
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from ray_common import N, check_sets, cluster, expected, parts_on_disk, rows, set_part_names, source  # noqa: F401


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    from loaderx.ray import write_loaderx

    out = tmp_path_factory.mktemp("ray") / "train"
    summary = write_loaderx(source(), out)
    return out, summary


def test_write_loaderx_writes_one_store_set_per_column(written):
    out, summary = written
    assert sorted(summary) == ["image", "label", "tokens"]
    assert all(records == N for _, records in summary.values())
    for column, (parts, _) in summary.items():
        assert parts > 1
        assert set_part_names(out, column) == parts_on_disk(out, column)
        assert len(parts_on_disk(out, column)) == parts
    check_sets(out)


def test_the_loader_reads_a_ray_written_set_record_for_record(written):
    out, _ = written
    image, label, tokens = expected(np.arange(N))
    streams = {"image": DenseDataset(out / "image"), "label": DenseDataset(out / "label"),
               "tokens": RaggedDataset(out / "tokens")}
    seen = 0
    with DataLoader(streams, batch_size=4_096, num_workers=2, epochs=1, shuffle=False,
                    pad={"tokens": None}) as loader:
        for batch in loader:
            k = len(batch["label"])
            np.testing.assert_array_equal(batch["image"], image[seen:seen + k])
            np.testing.assert_array_equal(batch["label"], label[seen:seen + k])
            lengths = batch["tokens_lengths"]
            np.testing.assert_array_equal(lengths, [len(t) for t in tokens[seen:seen + k]])
            for row, n, want in zip(batch["tokens"], lengths, tokens[seen:seen + k]):
                np.testing.assert_array_equal(row[:n], want)
            seen += k
    assert seen == N


def test_read_loaderx_reads_every_record_in_order(written):
    from loaderx.ray import read_loaderx

    out, _ = written
    image, label, tokens = expected(np.arange(N))
    ds = read_loaderx(out, override_num_blocks=4)
    assert ds.count() == N
    table = pa.concat_tables(ray.get(ds.to_arrow_refs()))
    assert table.column_names == ["image", "label", "tokens"]
    np.testing.assert_array_equal(table.column("image").combine_chunks().to_numpy(), image)
    np.testing.assert_array_equal(table.column("label").to_numpy(), label)
    toks = table.column("tokens").combine_chunks()
    np.testing.assert_array_equal(pc.list_value_length(toks).to_numpy(), [len(t) for t in tokens])
    np.testing.assert_array_equal(pc.list_flatten(toks).to_numpy(), np.concatenate(tokens))
    one = read_loaderx(out / "label").take_batch(5)
    np.testing.assert_array_equal(one["label"], label[:5])


def test_read_tasks_cover_disjoint_ranges_of_records(written):
    from loaderx.ray import LoaderxDatasource

    out, _ = written
    source_ = LoaderxDatasource(out, columns=["label"])
    tasks = source_.get_read_tasks(7)
    assert len(tasks) == 7 and sum(t.metadata.num_rows for t in tasks) == N
    labels = np.concatenate([b.column("label").to_numpy() for t in tasks for b in t()])
    np.testing.assert_array_equal(labels, expected(np.arange(N))[1])


def test_an_interrupted_write_leaves_its_output_unlocked(tmp_path, monkeypatch):
    # Ray calls on_write_failed for an Exception only: a Ctrl-C during the write kept OUT's
    # lock held, and every later write into it in this process was refused.
    from loaderx.ray import write_loaderx

    def interrupted(self, sink, **kw):
        sink.on_write_start()
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(ray.data.Dataset, "write_datasink", interrupted)
        with pytest.raises(KeyboardInterrupt):
            write_loaderx(ray.data.range(10), tmp_path / "out")
    assert write_loaderx(ray.data.range(10), tmp_path / "out")["id"][1] == 10


def test_a_write_that_may_drop_failed_blocks_is_refused(tmp_path):
    # Look 88 (read): with max_errored_blocks above 0, Ray leaves a failed block's rows out and
    # calls the write a success, so the sets would read as whole without them.
    from loaderx.ray import write_loaderx

    ctx = ray.data.DataContext.get_current()
    old, ctx.max_errored_blocks = ctx.max_errored_blocks, 1
    try:
        with pytest.raises(ValueError, match="max_errored_blocks is 1"):
            write_loaderx(ray.data.range(10), tmp_path / "out")
    finally:
        ctx.max_errored_blocks = old
    assert not (tmp_path / "out").exists()


def test_ragged_read_blocks_are_cut_at_their_bytes(tmp_path):
    # Ragged records were read 65,536 at a time whatever their size: 2,000 records of 256 KiB
    # made one block of 500 MiB.
    from loaderx.converter import from_iterator
    from loaderx.ray import _READ_BLOCK_BYTES, LoaderxDatasource

    big = 256 << 10
    from_iterator(tmp_path / "blobs", (np.full(big if i % 3 else 10, i % 251, np.uint8) for i in range(400)), codec="lz4")
    (task,) = LoaderxDatasource(tmp_path / "blobs").get_read_tasks(1)
    blocks = list(task())
    assert sum(b.num_rows for b in blocks) == 400 and len(blocks) > 1
    assert all(b.nbytes <= _READ_BLOCK_BYTES + 2 * big for b in blocks), [b.nbytes for b in blocks]
    values = pc.list_flatten(pa.concat_tables(blocks).column(0).combine_chunks()).to_numpy()
    assert values.size == sum(big if i % 3 else 10 for i in range(400))


def test_a_write_task_killed_mid_write_is_retried_with_nothing_lost_or_doubled(tmp_path):
    from loaderx.ray import write_loaderx

    out, marker = tmp_path / "train", tmp_path / "killed"

    def dies_once(batch):
        # The first attempt at rows 60,000.. exits its worker process after its task appended
        # earlier blocks to its parts; Ray retries the task (a system failure).
        if batch["id"][0] == 60_000 and not marker.exists():
            partial = [n for c in ("image", "label", "tokens") if (out / "_parts" / c).is_dir()
                       for n in os.listdir(out / "_parts" / c) if n.endswith(".partial")]
            marker.write_text("\n".join(partial))
            os._exit(1)
        return rows(batch)

    ctx = ray.data.DataContext.get_current()
    before = ctx.target_max_block_size
    ctx.target_max_block_size = 256 << 10  # several blocks per write task: the kill is mid-write
    try:
        summary = write_loaderx(source(dies_once), out)
    finally:
        ctx.target_max_block_size = before
    killed = marker.read_text().split("\n")
    assert marker.exists() and killed != [""], "the worker was killed before it had written anything"
    assert all(records == N for _, records in summary.values())
    check_sets(out)
    for column in ("image", "label", "tokens"):
        on_disk = parts_on_disk(out, column)
        assert on_disk == set_part_names(out, column)
        assert not set(killed) & set(on_disk)


def test_a_failed_write_commits_nothing(written, tmp_path):
    from loaderx.ray import write_loaderx

    out, _ = written
    parts_before = {c: parts_on_disk(out, c) for c in ("image", "label", "tokens")}

    def fails(batch):
        if batch["id"][0] == 30_000:
            raise RuntimeError("injected failure")
        return rows(batch)

    with pytest.raises(Exception, match="injected failure"):
        write_loaderx(source(fails), out)
    assert {c: parts_on_disk(out, c) for c in parts_before} == parts_before
    assert not [e for e in os.listdir(out) if e.startswith(".")]
    check_sets(out)


def test_a_rerun_replaces_the_sets_and_their_parts(tmp_path):
    from loaderx.ray import write_loaderx

    out = tmp_path / "train"
    n = 20_000
    small = ray.data.range(n, override_num_blocks=4).map_batches(rows, batch_size=2_500)
    write_loaderx(small, out)
    first = set_part_names(out, "image")
    write_loaderx(small, out)
    second = set_part_names(out, "image")
    assert len(first) == len(second) == 4 and not set(first) & set(second)
    assert parts_on_disk(out, "image") == second
    check_sets(out, n)


def small(n=20_000):
    return ray.data.range(n, override_num_blocks=4).map_batches(rows, batch_size=2_500)


def test_a_commit_that_cannot_remove_old_parts_stands_with_a_warning(tmp_path, monkeypatch):
    # Review 46, finding 1: a failure after the renames had Ray call on_write_failed, which
    # removed the parts the new sets name: neither the old data nor the new opened.
    import loaderx.ray as lray

    out = tmp_path / "train"
    lray.write_loaderx(small(), out)
    first = set_part_names(out, "image")
    real = lray._remove

    def busy(path):
        if f"{os.sep}_parts{os.sep}" in path:
            raise OSError(16, "Device or resource busy", path)
        real(path)

    monkeypatch.setattr(lray, "_remove", busy)
    with pytest.warns(RuntimeWarning, match="could not remove"):
        lray.write_loaderx(small(), out)
    second = set_part_names(out, "image")
    assert not set(first) & set(second)
    check_sets(out, 20_000)
    monkeypatch.setattr(lray, "_remove", real)
    lray.write_loaderx(small(), out)
    assert parts_on_disk(out, "image") == set_part_names(out, "image")
    check_sets(out, 20_000)


def test_whatever_fails_after_the_renames_never_removes_the_committed_parts(tmp_path, monkeypatch):
    # Review 47, finding 1: a failure other than one removal (listing the parts folder, a
    # warning turned into an error) still reached on_write_failed, which removed the parts the
    # committed sets name.
    import warnings

    import loaderx.ray as lray

    out = tmp_path / "train"
    lray.write_loaderx(small(), out)

    def unreadable(path, name):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(lray, "_is_old_part", unreadable)
    with pytest.warns(RuntimeWarning, match="Permission denied"):
        lray.write_loaderx(small(), out)
    check_sets(out, 20_000)
    real = lray._remove

    def busy(path):
        if f"{os.sep}_parts{os.sep}" in path:
            raise OSError(16, "Device or resource busy", path)
        real(path)

    monkeypatch.undo()
    monkeypatch.setattr(lray, "_remove", busy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="could not remove"):
            lray.write_loaderx(small(), out)
    check_sets(out, 20_000)


def test_a_rename_failing_mid_commit_leaves_every_old_set(tmp_path, monkeypatch):
    import loaderx.ray as lray

    out = tmp_path / "train"
    lray.write_loaderx(small(), out)
    before = {c: set_part_names(out, c) for c in ("image", "label", "tokens")}
    real = lray._rename
    failed = []

    def fails_at_label(a, b):
        # The new label set's rename into place fails, once (the undoing renames work).
        if b == os.path.join(str(out), "label") and ".set-" in a and not failed:
            failed.append(a)
            raise OSError(5, "Input/output error", b)
        real(a, b)

    monkeypatch.setattr(lray, "_rename", fails_at_label)
    with pytest.raises(Exception, match="Input/output error"):
        lray.write_loaderx(small(), out)
    # image was put in place first, then undone: every set is the first write's, and the failed
    # write left nothing behind.
    assert {c: set_part_names(out, c) for c in before} == before
    assert {c: parts_on_disk(out, c) for c in before} == before
    assert not [e for e in os.listdir(out) if e.startswith(".")]
    check_sets(out, 20_000)
    assert failed


def test_a_rerun_with_fewer_columns_leaves_none_of_the_old_columns(tmp_path):
    from loaderx.ray import read_loaderx, write_loaderx

    out = tmp_path / "train"
    write_loaderx(small(), out)
    from loaderx.converter import from_numpy

    from_numpy(out / "mine", np.arange(20_000, dtype=np.int64))  # the user's: never touched
    write_loaderx(small(), out, columns=["label"])
    assert sorted(os.listdir(out)) == ["_parts", "label", "mine"]
    assert sorted(os.listdir(out / "_parts")) == [".loaderx-write.lock", "label"]
    got = read_loaderx(out, columns=["label"]).take(3)
    assert [r["label"] for r in got] == [0, 1, 2]
    assert sorted(read_loaderx(out).take(1)[0]) == ["label", "mine"]
    # A set of the user's beside an (empty) parts folder of its name is left alone too (review
    # 47, finding 5): its parts are not the sink's.
    os.makedirs(out / "_parts" / "theirs")
    _native.stitch([str(out / "mine")], str(out / "theirs"))
    write_loaderx(small(), out, columns=["label"])
    assert sorted(os.listdir(out)) == ["_parts", "label", "mine", "theirs"]
    np.testing.assert_array_equal(DenseDataset(out / "theirs")[:3], [0, 1, 2])


def test_a_write_of_no_columns_is_refused_and_leaves_every_set(tmp_path):
    # Look 56, R1: `columns=[]`, or rows with no columns, committed nothing and so replaced
    # every set OUT held by nothing, and returned success.
    from loaderx.ray import read_loaderx, write_loaderx

    out = tmp_path / "train"
    write_loaderx(small(), out)
    before = sorted(os.listdir(out))
    with pytest.raises(ValueError, match="no column"):
        write_loaderx(small(), out, columns=[])
    no_columns = ray.data.from_items([{"x": i} for i in range(5)]).drop_columns(["x"])
    with pytest.raises(Exception, match="no columns"):
        write_loaderx(no_columns, out)
    # A column name given as a string (list() would make one-letter columns): refused.
    with pytest.raises(TypeError, match="a list of column names"):
        write_loaderx(small(), out, columns="label")
    # A codec or format the stores have not is refused before any task runs.
    for kwargs, why in [({"format": "v1", "codec": "lz4"}, "no lz4"), ({"codec": "gzip"}, "codec"), ({"format": "v3"}, "format")]:
        with pytest.raises(ValueError, match=why):
            write_loaderx(small(), out, **kwargs)
    assert sorted(os.listdir(out)) == before
    check_sets(out, 20_000)
    assert len(read_loaderx(out).take(2)) == 2


def test_a_read_planned_before_a_rewrite_refuses_the_new_data(tmp_path):
    # Review 51: read_loaderx's tasks opened each column again by path and read whatever was
    # there: a rewrite between planning and reading gave the new rows under the old plan.
    from loaderx.ray import read_loaderx, write_loaderx

    out = tmp_path / "t"
    write_loaderx(ray.data.from_items([{"a": i, "b": i * 10} for i in range(100)]), out)
    ds = read_loaderx(out, override_num_blocks=4)
    assert ds.count() == 100
    write_loaderx(ray.data.from_items([{"a": 1000 + i, "b": 7} for i in range(300)]), out)
    with pytest.raises(Exception, match="changed since read_loaderx planned"):
        ds.take_all()
    assert sorted(r["a"] for r in read_loaderx(out).take_all()) == list(range(1000, 1300))


def test_a_column_named_twice_is_refused_before_anything_is_written(tmp_path):
    from loaderx.ray import write_loaderx

    with pytest.raises(ValueError, match="'label' twice"):
        write_loaderx(small(), tmp_path / "t", columns=["label", "image", "label"])
    assert not os.path.exists(tmp_path / "t")


def test_a_block_of_another_shape_is_refused_naming_the_column_and_block(tmp_path):
    from loaderx.ray import write_loaderx

    def reshaped(batch):
        r = rows(batch)
        if batch["id"][0] >= 50_000:
            r["image"] = np.zeros((len(batch["id"]), 8, 9), dtype=np.uint8)
        return r

    # One block per task: the driver compares the tasks' first blocks. In the dataset's order,
    # so that the reshaped block is task 1's (otherwise Ray hands blocks to tasks as they are
    # produced, and a loaded machine may finish the second block first).
    ctx = ray.data.DataContext.get_current()
    ordered = ctx.execution_options.preserve_order
    ctx.execution_options.preserve_order = True
    try:
        across = ray.data.range(N, override_num_blocks=2).map_batches(reshaped, batch_size=None)
        with pytest.raises(ValueError, match=r"column 'image': write task 1's blocks hold dense uint8 items of shape \(8, 9\).*write task 0\) held dense uint8 items of shape \(8, 8\)$"):
            write_loaderx(across, tmp_path / "a")
    finally:
        ctx.execution_options.preserve_order = ordered
    assert not (tmp_path / "a" / "image").exists()
    # Many blocks in one task (Ray would make one block of them a variable-shaped tensor): the
    # task compares each block with its first.
    before = ctx.target_max_block_size
    ctx.target_max_block_size = 256 << 10
    try:
        within = ray.data.range(N, override_num_blocks=1).map_batches(reshaped, batch_size=25_000)
        with pytest.raises(ValueError, match=r"column 'image', block [1-9]\d* of write task \d+ holds dense uint8 items of shape \(8, 9\); the task's first block held dense uint8 items of shape \(8, 8\)\n"):
            write_loaderx(within, tmp_path / "b")
    finally:
        ctx.target_max_block_size = before
    assert not (tmp_path / "b" / "image").exists()


def test_ray_written_sets_hold_the_records_convert_parquet_writes(cli, tmp_path):
    from loaderx.ray import write_loaderx

    ids = np.arange(5_000)
    image, label, tokens = expected(ids)
    table = pa.table({
        "image": pa.FixedSizeListArray.from_arrays(pa.array(image.reshape(-1)), 64),
        "label": label,
        "tokens": pa.array(tokens, pa.list_(pa.int32())),
        "text": [f"row {i}" for i in ids],
    })
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1_000)
    cli("convert", "parquet", tmp_path / "t.parquet", tmp_path / "cli")
    write_loaderx(ray.data.read_parquet(str(tmp_path / "t.parquet")), tmp_path / "ray")
    for column in ("image", "label"):
        a, b = DenseDataset(tmp_path / "cli" / column), DenseDataset(tmp_path / "ray" / column)
        assert (a.dtype, a.item_shape) == (b.dtype, b.item_shape)
        assert a[:].tobytes() == b[:].tobytes()
    for column in ("tokens", "text"):
        a, b = RaggedDataset(tmp_path / "cli" / column), RaggedDataset(tmp_path / "ray" / column)
        assert (a.dtype, a.row_shape) == (b.dtype, b.row_shape)
        assert [r.tobytes() for r in a[:]] == [r.tobytes() for r in b[:]]


def test_write_loaderx_refuses_other_urls_and_bad_column_names(tmp_path):
    from loaderx.ray import write_loaderx

    with pytest.raises(ValueError, match="writes local paths and s3:// URLs"):
        write_loaderx(ray.data.range(10), "gs://bucket/out")
    with pytest.raises(ValueError, match="cannot name a dataset directory"):
        write_loaderx(ray.data.range(10), tmp_path, columns=["_parts"])


def test_loaderx_does_not_import_ray():
    code = "import sys, loaderx, loaderx.dataset, loaderx.converter; assert 'ray' not in sys.modules"
    subprocess.run([os.sys.executable, "-c", code], check=True)


from test_remote import s3  # noqa: E402,F401  (the S3 server fixture: s3s-fs on loopback)


def test_read_loaderx_reads_a_ray_written_set_from_s3(written, s3):
    from loaderx.ray import read_loaderx

    out, _ = written
    bucket, opts = s3
    # The set and its parts uploaded as they lie (the manifest names the parts relatively).
    shutil.copytree(out / "tokens", bucket / "train" / "tokens")
    shutil.copytree(out / "_parts" / "tokens", bucket / "train" / "_parts" / "tokens")
    ds = read_loaderx("s3://bucket/train/tokens", remote=opts, override_num_blocks=3)
    table = pa.concat_tables(ray.get(ds.to_arrow_refs()))
    tokens = expected(np.arange(N))[2]
    assert table.num_rows == N
    column = table.column("tokens").combine_chunks()
    np.testing.assert_array_equal(pc.list_value_length(column).to_numpy(), [len(t) for t in tokens])
    np.testing.assert_array_equal(pc.list_flatten(column).to_numpy(), np.concatenate(tokens))


def parts_in_bucket(out, column):
    """The parts of `column` holding any object under the bucket directory `out` (the S3 test
    server keeps the directories of deleted objects)."""
    folder = out / "_parts" / column
    return sorted(d for d in os.listdir(folder) if any(files for _, _, files in os.walk(folder / d)))


def remote_sets(url, opts, n=N):
    """The three sets at the URL `url` hold the test data record for record, read from S3."""
    image, label, tokens = expected(np.arange(n))
    images = DenseDataset(f"{url}/image", remote=opts)
    labels = DenseDataset(f"{url}/label", remote=opts)
    toks = RaggedDataset(f"{url}/tokens", remote=opts)
    assert (len(images), len(labels), len(toks)) == (n, n, n)
    np.testing.assert_array_equal(images[:], image)
    np.testing.assert_array_equal(labels[:], label)
    np.testing.assert_array_equal(np.concatenate(toks[:]), np.concatenate(tokens))


def test_write_loaderx_writes_store_sets_to_s3_and_reruns_replace_them(s3, tmp_path):
    from loaderx.ray import read_loaderx, write_loaderx

    bucket, opts = s3
    summary = write_loaderx(source(), "s3://bucket/train", remote=opts)
    assert all(records == N for _, records in summary.values())
    remote_sets("s3://bucket/train", opts)
    # The sets name exactly the parts in the bucket; nothing was staged there but the parts.
    first = {c: set_part_names(bucket / "train", c) for c in ("image", "label", "tokens")}
    for c, names in first.items():
        assert parts_in_bucket(bucket / "train", c) == names and len(names) == summary[c][0]
    assert sorted(os.listdir(bucket / "train")) == ["_parts", "image", "label", "tokens"]
    # The same records as a local write of the same data.
    local = tmp_path / "local"
    write_loaderx(source(), local)
    for c in ("image", "label"):
        assert DenseDataset(local / c)[:].tobytes() == DenseDataset(f"s3://bucket/train/{c}", remote=opts)[:].tobytes()
    back = read_loaderx("s3://bucket/train/label", remote=opts, override_num_blocks=2)
    assert sorted(back.take_batch(N, batch_format="pyarrow").column("label").to_pylist()) == sorted(expected(np.arange(N))[1].tolist())
    # A rerun replaces the sets and removes the parts they no longer name.
    write_loaderx(source(), "s3://bucket/train", remote=opts)
    for c, names in first.items():
        second = set_part_names(bucket / "train", c)
        assert _native.list_remote_dirs(f"s3://bucket/train/_parts/{c}", opts) == second
        assert not set(second) & set(names)
        assert parts_in_bucket(bucket / "train", c) == second
    remote_sets("s3://bucket/train", opts)


def test_a_failed_write_to_s3_commits_nothing_and_leaves_none_of_its_parts(s3):
    from loaderx.ray import write_loaderx

    bucket, opts = s3
    n = 20_000
    small = ray.data.range(n, override_num_blocks=4).map_batches(rows, batch_size=2_500)
    write_loaderx(small, "s3://bucket/out", remote=opts)
    before = {c: parts_in_bucket(bucket / "out", c) for c in ("image", "label", "tokens")}

    def fails(batch):
        if batch["id"][0] == 15_000:
            raise RuntimeError("injected failure")
        return rows(batch)

    failing = ray.data.range(n, override_num_blocks=4).map_batches(fails, batch_size=2_500)
    with pytest.raises(Exception, match="injected failure"):
        write_loaderx(failing, "s3://bucket/out", remote=opts)
    assert {c: parts_in_bucket(bucket / "out", c) for c in before} == before
    remote_sets("s3://bucket/out", opts, n)


def test_an_s3_commit_that_cannot_remove_old_parts_stands_with_a_warning(s3, monkeypatch):
    # The remote twin of review 46's finding 1: a failure removing old parts after the sets were
    # put had on_write_failed remove the parts the new sets name.
    import loaderx
    import loaderx.ray as lray

    bucket, opts = s3
    n = 20_000
    lray.write_loaderx(small(n), "s3://bucket/busy", remote=opts)
    first = {c: parts_in_bucket(bucket / "busy", c) for c in ("image", "label", "tokens")}
    real = lray._native.remove_remote

    def fails(url, remote=None):
        raise loaderx.RemoteError(f"injected: {url}")

    monkeypatch.setattr(lray._native, "remove_remote", fails)
    with pytest.warns(RuntimeWarning, match="could not remove"):
        lray.write_loaderx(small(n), "s3://bucket/busy", remote=opts)
    remote_sets("s3://bucket/busy", opts, n)
    monkeypatch.setattr(lray._native, "remove_remote", real)
    lray.write_loaderx(small(n), "s3://bucket/busy", remote=opts)
    for c, names in first.items():
        now = set_part_names(bucket / "busy", c)
        assert parts_in_bucket(bucket / "busy", c) == now and not set(now) & set(names)
    remote_sets("s3://bucket/busy", opts, n)


def test_a_directory_of_the_users_named_as_a_column_is_never_replaced(tmp_path):
    from loaderx.ray import write_loaderx

    out = tmp_path / "out"
    (out / "x").mkdir(parents=True)
    (out / "x" / "precious.txt").write_text("user data")
    with pytest.raises(Exception, match="not a loaderx store set"):
        write_loaderx(ray.data.from_items([{"x": i} for i in range(100)]), out)
    assert (out / "x" / "precious.txt").read_text() == "user data"
    assert sorted(os.listdir(out / "x")) == ["precious.txt"]


def test_a_users_files_in_the_parts_folder_are_never_removed(tmp_path):
    # A commit removes the parts an older write left, and nothing else of the parts folder.
    from loaderx.ray import write_loaderx

    out = tmp_path / "out"
    write_loaderx(ray.data.from_items([{"x": np.float32(i)} for i in range(10)]), out)
    old_parts = set(os.listdir(out / "_parts" / "x"))
    (out / "_parts" / "x" / "notes.txt").write_text("mine")
    (out / "_parts" / "x" / "my_assembly").mkdir()
    (out / "_parts" / "x" / "my_assembly" / "part.step").write_text("mine")
    write_loaderx(ray.data.from_items([{"x": np.float32(i)} for i in range(10)]), out)
    now = set(os.listdir(out / "_parts" / "x"))
    assert {"notes.txt", "my_assembly"} <= now and not (old_parts & now), now
    assert (out / "_parts" / "x" / "my_assembly" / "part.step").read_text() == "mine"


def test_two_writes_into_one_output_at_once_are_refused_not_mixed(tmp_path):
    from loaderx.ray import LoaderxDatasink

    a, b = LoaderxDatasink(str(tmp_path)), LoaderxDatasink(str(tmp_path))
    a.on_write_start()
    with pytest.raises(RuntimeError, match="another write_loaderx"):
        b.on_write_start()
    a.on_write_failed(RuntimeError("done"))
    b.on_write_start()  # free once the first write ended
    b.on_write_failed(RuntimeError("done"))
