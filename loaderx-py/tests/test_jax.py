"""Batches reaching JAX without a copy. JAX's CPU client adopts a NumPy buffer only when it
starts at a multiple of 64 bytes and copies any other; the loader starts every dense batch there.
The JAX test runs when JAX is installed (required where LOADERX_REQUIRE_JAX is set)."""

import os

import numpy as np
import pytest

from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.float16, np.uint16]


def loader(tmp_path):
    """A loader over one stream per dtype, row `i` of each starting with `i`; item sizes of 3 and
    5 elements, so that batches of 7 are not multiples of 64 bytes."""
    rng = np.random.default_rng(7)
    arrays = {}
    for k, dtype in enumerate(DTYPES):
        a = (rng.random((150, 3 + 2 * (k % 2))) * 100).astype(dtype)
        a[:, 0] = np.arange(150)
        from_numpy(tmp_path / f"s{k}", a)
        arrays[f"s{k}"] = a
    datasets = {name: DenseDataset(tmp_path / name) for name in arrays}
    return arrays, DataLoader(datasets, batch_size=7, num_workers=2, seed=3)


def test_every_dense_batch_starts_at_64_bytes(tmp_path):
    arrays, batches = loader(tmp_path)
    with batches:
        for _ in range(30):
            batch = next(batches)
            for name, a in arrays.items():
                x = batch[name]
                assert x.ctypes.data % 64 == 0, (name, x.ctypes.data % 64)
                assert x.shape == (7, a.shape[1]) and x.dtype == a.dtype
                np.testing.assert_array_equal(x, a[x[:, 0].astype(np.int64)])


def test_jax_adopts_a_batch_without_a_copy(tmp_path):
    if os.environ.get("LOADERX_REQUIRE_JAX"):
        import jax
    else:
        jax = pytest.importorskip("jax")
    import jax.dlpack

    arrays, batches = loader(tmp_path)
    with batches:
        for _ in range(10):
            batch = next(batches)
            for name in arrays:
                x = batch[name]
                if x.dtype.itemsize == 8 and not jax.config.jax_enable_x64:
                    continue  # JAX narrows 64-bit arrays to 32 bits (a conversion) unless x64 is on
                for j in (jax.dlpack.from_dlpack(x), jax.device_put(x)):
                    # The same memory: JAX aliases the loader's buffer.
                    assert j.unsafe_buffer_pointer() == x.ctypes.data, name
                    np.testing.assert_array_equal(np.asarray(j), x)
