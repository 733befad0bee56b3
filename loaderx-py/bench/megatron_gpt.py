"""Megatron's GPT samples: megatron-core's GPTDataset (its document, sample and shuffle index
build, written to a cache directory, then 64 samples) against loaderx's
``TokenDataset.sequences`` (the order computed in memory, then the same 64 sample positions), on
one Megatron dataset of TOKENS tokens in DOCS documents (the .idx written whole, the .bin sparse:
its tokens read as zeros, so neither contender waits on a disk). Rounds interleaved in this
process, each starting from a fresh open (and, for megatron-core, an empty cache directory).

    pip install megatron-core            # and loaderx, into the same venv
    python loaderx-py/bench/megatron_gpt.py [--tokens N] [--docs N] [--rounds N] [--dir D]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
import warnings

import numpy as np

from loaderx.tokens import TokenDataset


def write_corpus(prefix: str, tokens: int, docs: int) -> None:
    per = tokens // docs
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + np.uint64(1).tobytes() + np.uint8(8).tobytes())
        f.write(np.uint64(docs).tobytes() + np.uint64(docs + 1).tobytes())
        f.write(np.full(docs, per, dtype=np.int32).tobytes())
        f.write((np.arange(docs, dtype=np.int64) * per * 2).tobytes())
        f.write(np.arange(docs + 1, dtype=np.int64).tobytes())
    with open(prefix + ".bin", "wb") as f:
        f.truncate(per * docs * 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=1_000_000_000)
    p.add_argument("--docs", type=int, default=5_000_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split
    from megatron.core import __version__ as mcore_version

    class Tokenizer:  # what GPTDatasetConfig reads of a tokenizer
        eod, pad, vocab_size = 0, 1, 50257
        unique_identifiers = {"class": "Tokenizer"}

    work = tempfile.mkdtemp(dir=args.dir)
    try:
        prefix = os.path.join(work, "corpus")
        write_corpus(prefix, args.tokens, args.docs)

        def megatron(r: int) -> float:
            cache = os.path.join(work, f"cache{r}")
            t = time.perf_counter()
            config = GPTDatasetConfig(
                random_seed=1, sequence_length=1024, split="100,0,0", reset_position_ids=False,
                reset_attention_mask=False, eod_mask_loss=False, tokenizer=Tokenizer(), path_to_cache=cache,
            )
            ds = GPTDataset(IndexedDataset(prefix), prefix, np.arange(args.docs, dtype=np.int32), None, Split.train, config)
            batch = [ds[i]["tokens"] for i in range(64)]
            secs = time.perf_counter() - t
            assert len(batch) == 64
            shutil.rmtree(cache)
            return secs

        def loaderx(r: int) -> float:
            t = time.perf_counter()
            samples = TokenDataset(prefix).sequences(1025, seed=1)
            batch = samples[np.arange(64)]
            secs = time.perf_counter() - t
            assert batch.shape == (64, 1025)
            return secs

        times: dict[str, list[float]] = {"megatron-core GPTDataset": [], "loaderx sequences": []}
        fns = {"megatron-core GPTDataset": megatron, "loaderx sequences": loaderx}
        names = list(fns)
        for r in range(args.rounds):
            for name in names[r % 2 :] + names[: r % 2]:
                times[name].append(fns[name](r))
        print(f"megatron-core {mcore_version}; {args.tokens:,} tokens in {args.docs:,} documents; "
              f"median of {args.rounds} interleaved rounds, open to a batch of 64 samples of 1,025 tokens\n")
        print("| contender | open to first batch | index files written |\n|---|---:|---:|")
        for name, ts in times.items():
            files = "3 (document, sample, shuffle index)" if name.startswith("megatron") else "none"
            print(f"| {name} | {statistics.median(ts) * 1e3:.1f} ms | {files} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
