import numpy as np
import pytest

from loaderx.zsampler import Zsampler


def test_pure_in_seed_and_step():
    a, b = Zsampler(10_000, 256, mode="iid", seed=4), Zsampler(10_000, 256, mode="iid", seed=4)
    np.testing.assert_array_equal(a.batch(17), b.batch(17))
    assert not np.array_equal(a.batch(17), a.batch(18))
    assert a.batch(0).dtype == np.uint32 and (a.batch(3) < 10_000).all()


def test_sequential_wraps_and_cyclic_is_a_permutation():
    s = Zsampler(10, 4, mode="sequential")
    assert s.batch(2).tolist() == [8, 9, 0, 1]
    c = Zsampler(1000, 100, mode="cyclic", seed=9)
    assert sorted(np.concatenate([c.batch(i) for i in range(10)]).tolist()) == list(range(1000))


def test_batch_into_a_buffer_and_shards():
    s = Zsampler(5000, 64, mode=1, seed=2)
    out = np.empty(64, dtype=np.uint32)
    assert s.batch(5, out=out) is out
    np.testing.assert_array_equal(out, s.batch(5))
    halves = [Zsampler(5000, 64, mode=1, seed=2, rank=r, world=2).batch(5) for r in range(2)]
    np.testing.assert_array_equal(np.concatenate(halves), s.batch(5))
    with pytest.raises(ValueError):
        s.batch(0, out=np.empty(3, dtype=np.uint32))
    with pytest.raises(TypeError):
        s.batch(0, out=np.empty(64, dtype=np.int64))
    # Look 144, L144-2: every refusal names `out` and what it must be.
    for bad, kind, words in [
        ([0] * 64, TypeError, "numpy.ndarray"),
        (np.zeros(64, np.int32), TypeError, "uint32"),
        (np.zeros(65, np.uint32), ValueError, "(64,)"),
        (np.zeros(128, np.uint32)[::2], ValueError, "C-contiguous"),
        (np.frombuffer(bytearray(257), np.uint32, offset=1), ValueError, "aligned"),
    ]:
        with pytest.raises(kind, match="out") as e:
            s.batch(0, out=bad)
        assert words in str(e.value), e.value
    with pytest.raises(ValueError):
        Zsampler(10, 0)
