"""What the Ray tests share: one local Ray cluster per test module, and the test data written
through Ray (an 8x8 uint8 image, an int64 label and int32 tokens per row)."""

import os

import numpy as np
import pytest

if os.environ.get("LOADERX_REQUIRE_RAY"):
    import ray
else:
    ray = pytest.importorskip("ray")

from loaderx import _native
from loaderx.dataset import DenseDataset, RaggedDataset

N = 100_000
BLOCKS = 8


@pytest.fixture(scope="module", autouse=True)
def cluster():
    # The workers import this module to run its functions.
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def expected(ids):
    """The rows `ids` of the test data: an 8x8 uint8 image, an int64 label, int32 tokens."""
    image = ((ids[:, None, None] * 7 + np.arange(64).reshape(8, 8)) % 251).astype(np.uint8)
    label = (ids % 10).astype(np.int64)
    lengths = ids % 13 + 1
    tokens = [np.arange(n, dtype=np.int32) + np.int32(i % 1000) for i, n in zip(ids, lengths)]
    return image, label, tokens


def rows(batch):
    image, label, tokens = expected(batch["id"])
    return {"image": image, "label": label, "tokens": tokens}


def source(fn=rows):
    return ray.data.range(N, override_num_blocks=BLOCKS).map_batches(fn, batch_size=2_500)


def check_sets(out, n=N):
    """The three sets at `out` hold the test data record for record, as the loader reads them."""
    image, label, tokens = expected(np.arange(n))
    images, labels, toks = DenseDataset(out / "image"), DenseDataset(out / "label"), RaggedDataset(out / "tokens")
    assert (len(images), len(labels), len(toks)) == (n, n, n)
    assert images.item_shape == (8, 8) and images.dtype == np.uint8 and labels.dtype == np.int64
    assert toks.dtype == np.int32 and toks.row_shape == ()
    np.testing.assert_array_equal(images[:], image)
    np.testing.assert_array_equal(labels[:], label)
    np.testing.assert_array_equal(toks.lengths(np.arange(n)), [len(t) for t in tokens])
    np.testing.assert_array_equal(np.concatenate(toks[:]), np.concatenate(tokens))
    return images, labels, toks


def parts_on_disk(out, column):
    return sorted(os.listdir(out / "_parts" / column))


def set_part_names(out, column):
    return sorted(os.path.basename(p) for p, _ in _native.set_parts(str(out / column)))
