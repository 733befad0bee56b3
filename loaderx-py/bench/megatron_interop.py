"""Megatron-LM reads what loaderx writes, and the reverse: an interoperability check with
megatron-core from PyPI (not a benchmark: it times nothing).

1. loaderx's ``write_megatron`` writes DOCS random documents (``uint16`` and ``int32`` tokens);
   megatron-core's ``IndexedDataset`` opens the prefix and every document it returns must be the
   one written, token for token, with the dtype megatron-core reports.
2. megatron-core's ``IndexedDatasetBuilder`` writes the same documents; loaderx's
   ``TokenDataset`` opens them and reads each back (its ``documents`` count, ``read`` of each
   document's span, ``verify``).

    pip install megatron-core            # and loaderx, into the same venv
    python loaderx-py/bench/megatron_interop.py [--docs N] [--seed S]

Prints one line per direction and dtype, and exits non-zero at the first difference.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import warnings

import numpy as np

from loaderx.tokens import TokenDataset, write_megatron


def documents(rng: np.random.Generator, n: int, dtype: np.dtype) -> list[np.ndarray]:
    high = min(int(np.iinfo(dtype).max), 200_000)
    lengths = rng.integers(1, 600, n)
    return [rng.integers(0, high, k).astype(dtype) for k in lengths]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from megatron.core import __version__ as mcore_version
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as work:
        for dtype in (np.dtype(np.uint16), np.dtype(np.int32)):
            docs = documents(rng, args.docs, dtype)
            tokens = sum(len(d) for d in docs)

            # 1. loaderx writes, megatron-core reads.
            ours = os.path.join(work, f"ours-{dtype.name}")
            written = write_megatron(ours, docs, dtype=dtype)
            assert written == tokens, f"write_megatron wrote {written} tokens, not {tokens}"
            theirs = IndexedDataset(ours)
            if len(theirs) != len(docs):
                print(f"megatron-core sees {len(theirs)} documents in {ours}, not {len(docs)}")
                return 1
            for i, d in enumerate(docs):
                got = np.asarray(theirs[i])
                if got.dtype != dtype or not np.array_equal(got, d):
                    print(f"megatron-core reads document {i} of {ours} as {got.dtype} {got[:8]}..., not {d[:8]}...")
                    return 1
            print(f"megatron-core {mcore_version} reads loaderx's {dtype.name} dataset: {len(docs)} documents, {tokens} tokens, equal")

            # 2. megatron-core writes, loaderx reads.
            prefix = os.path.join(work, f"theirs-{dtype.name}")
            builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype.type)  # a NumPy scalar type, as Megatron takes it
            for d in docs:
                builder.add_document(d, [len(d)])
            builder.finalize(prefix + ".idx")
            ds = TokenDataset(prefix)
            if ds.documents != len(docs) or len(ds) != tokens:
                print(f"loaderx sees {ds.documents} documents and {len(ds)} tokens in {prefix}")
                return 1
            ds.verify()
            at = 0
            for i, d in enumerate(docs):
                got = ds.read(at, len(d))
                if not np.array_equal(got, d):
                    print(f"loaderx reads document {i} of {prefix} as {got[:8]}..., not {d[:8]}...")
                    return 1
                at += len(d)
            print(f"loaderx reads megatron-core's {dtype.name} dataset: {len(docs)} documents, {tokens} tokens, equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
