"""loaderx through its Python binding against NumPy (and torch, Grain, h5py, ArrayRecord when
installed), in the shape of the loaderx 0.9.11 specification's scripts/bench.py.

Every section interleaves its contenders round by round on the same data in this process (the
machine is shared and noisy: compare ratios, not absolute times), reports medians, and checks
every output against NumPy's. Contenders not installed are skipped with a note.

    python loaderx-py/bench/bench.py [sampler|store|loader|all] [--rounds N] [--records N] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

import loaderx
from loaderx.converter import from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset
from loaderx.zsampler import Zsampler


def machine() -> None:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; python {platform.python_version()}, numpy {np.__version__}, "
          f"loaderx {loaderx.__version__}")


def timed(fn, reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def rounds_of(contenders: dict, rounds: int, reps: int) -> dict[str, float]:
    """Median seconds per call of each contender, rounds interleaved."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(timed(fn, reps))
    return {k: statistics.median(v) for k, v in times.items()}


def sampler(args) -> None:
    n = 1_000_000
    print(f"\n1. Sampler: IID (with replacement) over {n:,} indices, median of {args.rounds} interleaved rounds")
    print("sampler\tbatch\tper batch\tindices\tvs default_rng")
    for b in (256, 1024, 8192):
        z = Zsampler(n, b, mode="iid", seed=1)
        rng = np.random.default_rng(1)
        step = [0]

        def zs():
            step[0] += 1
            return z.batch(step[0])

        got = zs()
        assert got.shape == (b,) and int(got.max()) < n
        med = rounds_of({
            "numpy randint": lambda: np.random.randint(0, n, b),
            "numpy default_rng": lambda: rng.integers(0, n, b),
            "zsampler": zs,
        }, args.rounds, max(200, 400_000 // b))
        base = med["numpy default_rng"]
        for name, t in med.items():
            print(f"{name}\t{b}\t{t * 1e6:.2f} µs\t{b / t / 1e6:.0f} M/s\t{base / t:.2f}x")


def structured(records: int, size: int, seed: int = 0) -> np.ndarray:
    """Mildly compressible records: a ramp per record plus noise in the low bits."""
    rng = np.random.default_rng(seed)
    ramp = (np.arange(size, dtype=np.uint32) * 7 % 251).astype(np.uint8)
    out = np.empty((records, size), dtype=np.uint8)
    for s in range(0, records, 1024):
        e = min(records, s + 1024)
        out[s:e] = ramp + rng.integers(0, 16, (e - s, size), dtype=np.uint8) + (np.arange(s, e) % 13)[:, None].astype(np.uint8)
    return out


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total if os.path.isdir(path) else os.stat(path).st_blocks * 512


def store(args) -> None:
    batch = 256
    for size, records in ((12 * 1024, args.records), (128 * 1024, max(batch * 4, args.records // 10))):
        work = tempfile.mkdtemp(dir=args.dir)
        try:
            data = structured(records, size)
            np.save(os.path.join(work, "x.npy"), data)
            writes = {}
            for codec in ("raw", "zstd"):
                t = time.perf_counter()
                from_numpy(os.path.join(work, codec), data, codec=codec)
                writes[codec] = time.perf_counter() - t
            mm = np.load(os.path.join(work, "x.npy"), mmap_mode="r")
            ds = {c: DenseDataset(os.path.join(work, c)) for c in ("raw", "zstd")}
            rng = np.random.default_rng(5)
            rnd = [np.sort(rng.integers(0, records, batch)) for _ in range(64)]
            seq = [np.arange(s, s + batch) for s in rng.integers(0, records - batch, 64)]
            out = np.empty((batch, size), dtype=np.uint8)
            for idx in rnd[:4] + seq[:4]:
                for d in ds.values():
                    assert np.array_equal(d.gather(idx, out=out), data[idx])
            del data
            mib = batch * size / 2**20
            print(f"\n2. Store: {records:,} records of {size // 1024} KiB, batches of {batch} ({mib:.0f} MiB), "
                  f"median of {args.rounds} interleaved rounds, warm page cache")
            print("store\twrite\tgather rnd\tgather seq\tper batch (rnd)\ton disk\tvs npy-mmap (rnd)")
            results = {}
            for kind, batches in (("rnd", rnd), ("seq", seq)):
                k = [0]

                def nxt():
                    k[0] = (k[0] + 1) % len(batches)
                    return batches[k[0]]

                results[kind] = rounds_of({
                    "loaderx-raw": lambda: ds["raw"].gather(nxt(), out=out),
                    "loaderx-zstd": lambda: ds["zstd"].gather(nxt(), out=out),
                    "npy-mmap take": lambda: np.take(mm, nxt(), axis=0, out=out),
                    "npy-mmap fancy": lambda: mm[nxt()],
                }, args.rounds, 20 if size > 64 * 1024 else 100)
            disk = {"loaderx-raw": du(os.path.join(work, "raw")), "loaderx-zstd": du(os.path.join(work, "zstd")),
                    "npy-mmap take": du(os.path.join(work, "x.npy")), "npy-mmap fancy": du(os.path.join(work, "x.npy"))}
            write = {"loaderx-raw": writes["raw"], "loaderx-zstd": writes["zstd"]}
            base = results["rnd"]["npy-mmap fancy"]
            total = records * size / 2**20
            for name in results["rnd"]:
                r, s = results["rnd"][name], results["seq"][name]
                w = f"{total / write[name]:.0f} MiB/s" if name in write else "-"
                print(f"{name}\t{w}\t{mib / r:.0f} MiB/s\t{mib / s:.0f} MiB/s\t{r * 1e3:.2f} ms\t"
                      f"{disk[name] / 2**20:.0f} MiB\t{base / r:.2f}x")
            print("not run here (not installed or not measured): arrayrecord, h5py, blosc2, tensorstore; "
                  "the same gather from Rust (`loaderx bench`) is in docs/benchmarks/")
        finally:
            shutil.rmtree(work, ignore_errors=True)


def loader(args) -> None:
    batch, size, records = 256, 12 * 1024, args.records
    work = tempfile.mkdtemp(dir=args.dir)
    try:
        data = structured(records, size)
        labels = np.arange(records, dtype=np.int64)
        for codec in ("raw", "zstd"):
            from_numpy(os.path.join(work, "x-" + codec), data, codec=codec)
        from_numpy(os.path.join(work, "y"), labels)
        print(f"\n3. Loader: batches of {batch} from {records:,} records of 12 KiB and their labels, "
              f"{os.cpu_count()} threads, median of {args.rounds} rounds")
        print("loader\tbatches/s\tper batch\tsamples/s\tthroughput\tfirst batch")
        y = DenseDataset(os.path.join(work, "y"))
        steps = 200
        for codec in ("zstd", "raw"):
            rates, firsts = [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                with DataLoader({"x": DenseDataset(os.path.join(work, "x-" + codec)), "y": y}, batch_size=batch,
                                num_workers=os.cpu_count() or 2, prefetch_size=4, seed=1) as dl:
                    b = next(dl)
                    firsts.append(time.perf_counter() - t0)
                    assert np.array_equal(b["x"], data[b["y"]])
                    t = time.perf_counter()
                    for _ in range(steps):
                        b = next(dl)
                    rates.append(steps / (time.perf_counter() - t))
                    assert np.array_equal(b["x"], data[b["y"]])
            r = statistics.median(rates)
            print(f"loaderx-{codec}\t{r:.1f}\t{1e3 / r:.2f} ms\t{r * batch:,.0f}\t{r * batch * size / 2**20:.0f} MiB/s\t"
                  f"{statistics.median(firsts) * 1e3:.1f} ms")
        try:
            import torch  # noqa: F401
            print("torch: installed, but its row is not implemented in this bench yet")
        except ImportError:
            print("torch: not installed, not run")
        try:
            import grain  # noqa: F401
            print("grain: installed, but its row is not implemented in this bench yet")
        except ImportError:
            print("grain: not installed, not run")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", nargs="?", default="all", choices=["sampler", "store", "loader", "all"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--dir", default=None, help="where the bench's temporary data goes")
    args = p.parse_args()
    machine()
    for name in ("sampler", "store", "loader"):
        if args.section in (name, "all"):
            globals()[name](args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
