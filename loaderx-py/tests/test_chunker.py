import os

import pytest

from loaderx.chunker import DEFAULT_DELIMITER, Plan, PlanningError, Range, abi_version, capabilities, plan_file


@pytest.fixture
def jsonl(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * (i % 17)) for i in range(500)))
    return p


def test_ranges_cover_the_file_at_record_boundaries(jsonl):
    plan = plan_file(jsonl, parts=8)
    data = jsonl.read_bytes()
    assert isinstance(plan, Plan) and plan.file_size == len(data) and plan.requested_parts == 8
    assert plan.delimiter == DEFAULT_DELIMITER == 10 and plan.actual_partitions == len(plan.ranges) <= 8
    assert plan.ranges[0].start == 0 and plan.ranges[-1].end == len(data)
    for a, b in zip(plan.ranges, plan.ranges[1:]):
        assert a.end == b.start and data[a.end - 1] == 10
    assert plan.range_for_part(0) == plan.ranges[0] and plan.range_for_part(99) is None
    assert plan_file(jsonl, 8, delimiter=b"\n") == plan == plan_file(str(jsonl), 8, 10)
    assert abi_version() == 0x00010003 and capabilities() == 0x3F


def test_the_same_ranges_as_loaderx_partition(jsonl, cli):
    for parts in (1, 3, 8, 1000):
        out = cli("partition", jsonl, "--parts", parts).stdout
        rows = [tuple(map(int, line.split("\t"))) for line in out.splitlines()]
        plan = plan_file(jsonl, parts)
        assert [(r.index, r.start, r.end, r.length) for r in plan.ranges] == [r[:4] for r in rows], parts


def test_empty_and_sparse_files(tmp_path):
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    assert plan_file(empty, 4).ranges == ()
    one = tmp_path / "one"
    one.write_bytes(b"a single record without a newline")
    assert plan_file(one, 4).ranges == (Range(0, 0, 33, 33),)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc here")
def test_a_file_reporting_no_size_but_holding_content_is_refused():
    # Review 49: a /proc file (size 0, content) was planned as empty.
    with pytest.raises(PlanningError, match="reports a size of 0 bytes but has content"):
        plan_file("/proc/self/status", 2)


def test_validation_as_the_reference(tmp_path, jsonl):
    with pytest.raises(TypeError, match="parts must be an int, got str"):
        plan_file(jsonl, "2")
    with pytest.raises(TypeError, match="parts must be an int, got bool"):
        plan_file(jsonl, True)
    with pytest.raises(ValueError, match="parts must be >= 1, got 0"):
        plan_file(jsonl, 0)
    # Look 84, F84-5: past the planner's size_t, a bare OverflowError from the binding.
    with pytest.raises(ValueError, match=r"parts must be at most \d+ \(SIZE_MAX\), got 18446744073709551616"):
        plan_file(jsonl, 2**64)
    assert plan_file(jsonl, 2**64 - 1).actual_partitions >= 1
    with pytest.raises(ValueError, match="exactly one byte"):
        plan_file(jsonl, 2, delimiter=b"\r\n")
    with pytest.raises(ValueError, match="byte value 0..255, got 256"):
        plan_file(jsonl, 2, delimiter=256)
    with pytest.raises(TypeError, match="single-byte value"):
        plan_file(jsonl, 2, delimiter="\n")
    with pytest.raises(ValueError, match="embedded NUL"):
        plan_file("a\x00b", 2)
    with pytest.raises(FileNotFoundError, match="input file does not exist"):
        plan_file(tmp_path / "missing", 2)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        plan_file(tmp_path, 2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(PlanningError, match="not a regular file"):
        plan_file(fifo, 2)
    assert issubclass(PlanningError, RuntimeError)
    with pytest.raises(ValueError, match="length must equal"):
        Range(0, 0, 5, 4)
    with pytest.raises(Exception):
        plan_file(jsonl, 2).ranges[0].start = 3
