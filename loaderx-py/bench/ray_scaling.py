"""write_loaderx on one and two Ray workers, and the cost of a stitch by its number of parts.

The conversion: a materialised Ray dataset (an image-like uint8 tensor column, an int64 label,
ragged int32 tokens; compressible, so zstd is the work) written with write_loaderx under
`concurrency=1`, then `concurrency=2`, rounds interleaved, medians reported. Every Ray worker
runs the engine with RAYON_NUM_THREADS=1, so a write task uses the one CPU Ray gives it. The
stitch: `loaderx._native.stitch` of 4, 64 and 1,024 parts of 16 records each, and of 4 parts of
the conversion's images (about 1,000 times the bytes per part), to show that a stitch's cost
follows the parts, not the bytes (it reads each part's schema and head, never its records).

    python loaderx-py/bench/ray_scaling.py [--rows N] [--rounds R] [--dir D]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np
import ray
from ray.data.datasource import Datasink

import loaderx
from loaderx import _native
from loaderx.converter import from_numpy
from loaderx.ray import write_loaderx


def rows(batch):
    ids = batch["id"]
    rng = np.random.default_rng(int(ids[0]))
    # Noise over a gradient: zstd finds about half of it redundant, and works for it.
    base = (ids[:, None, None, None] + np.arange(32 * 32 * 3).reshape(32, 32, 3)) % 251
    image = (base + rng.integers(0, 16, base.shape)).astype(np.uint8)
    tokens = [rng.integers(0, 50_000, int(n) % 200 + 8, dtype=np.int32) for n in ids]
    return {"image": image, "label": ids % 1000, "tokens": tokens}


def timed(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


class Spin(Datasink):
    """Ray's own ceiling: a sink that only spends `per_block` seconds of CPU on each block (no
    loaderx, no I/O), so 1 against 2 tasks at once measures what Ray itself lets two workers
    gain on this machine for tasks of that size."""

    def __init__(self, per_block: float) -> None:
        self.per_block = per_block

    def write(self, blocks, ctx) -> int:
        n = 0
        for _ in blocks:
            end = time.process_time() + self.per_block
            while time.process_time() < end:
                pass
            n += 1
        return n


def cpu_seconds() -> float:
    """CPU time every process of the machine has used (user, nice, system, irq, softirq), from
    /proc/stat (Linux): the driver, Ray's own processes and the workers together."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    ticks = sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return ticks / os.sysconf("SC_CLK_TCK")


def disk_bytes(dirs: list[str]) -> int:
    """Bytes the files of `dirs` take on disk (a store's files are allocated in steps)."""
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d in dirs for f in os.listdir(d))


def stitch_time(parts: list[str], out: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        shutil.rmtree(out, ignore_errors=True)
        times.append(timed(lambda: _native.stitch(parts, out)))
    shutil.rmtree(out, ignore_errors=True)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="ray-scaling-", dir=args.dir)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"date: {time.strftime('%Y-%m-%d')}; commit {commit or '?'}; {os.cpu_count()} CPUs; "
          f"python {platform.python_version()}, ray {ray.__version__}, loaderx {loaderx.__version__}; "
          f"load average before the run {os.getloadavg()[0]:.2f}")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAYON_NUM_THREADS": "1"}})
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    ds = ray.data.range(args.rows, override_num_blocks=16).map_batches(rows, batch_size=4_096).materialize()
    in_bytes = ds.size_bytes()
    print(f"data: {args.rows:,} rows, {in_bytes / 2**20:.0f} MiB in Ray's object store, 16 blocks; codec zstd")

    times: dict[int, list[float]] = {1: [], 2: []}
    # Cores busy during each write (CPU seconds of the whole machine over the wall time): what a
    # "one worker" write already takes beside its task (the driver, Ray's processes).
    busy: dict[int, list[float]] = {1: [], 2: []}
    out = os.path.join(root, "train")
    for _ in range(args.rounds):
        for workers in (1, 2):
            # A fresh output each round: removing the last round's parts is not the work timed.
            shutil.rmtree(out, ignore_errors=True)
            cpu = cpu_seconds()
            t = timed(lambda: write_loaderx(ds, out, concurrency=workers))
            times[workers].append(t)
            busy[workers].append((cpu_seconds() - cpu) / t)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print("\n| Ray write tasks at once | write_loaderx (median) | MiB/s of input | speedup | cores busy |")
    print("|---|---|---|---|---|")
    for workers, t in ((1, one), (2, two)):
        print(f"| {workers} | {t:.2f} s | {in_bytes / 2**20 / t:.0f} | {one / t:.2f}x | {statistics.median(busy[workers]):.2f} |")
    print(f"(rounds: 1 worker {[round(t, 2) for t in times[1]]}, 2 workers {[round(t, 2) for t in times[2]]})")

    # The same 16 blocks through a sink that spends the CPU time of a loaderx write task's block
    # (one worker's median over the blocks) and nothing else: Ray's own scaling, the ceiling.
    per_block = one / 16
    spin: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(args.rounds):
        for workers in (1, 2):
            spin[workers].append(timed(lambda: ds.write_datasink(Spin(per_block), concurrency=workers)))
    s1, s2 = statistics.median(spin[1]), statistics.median(spin[2])
    print(f"\nRay's ceiling, a sink spinning {per_block * 1e3:.0f} ms of CPU per block (median): "
          f"1 task at once {s1:.2f} s, 2 at once {s2:.2f} s, {s1 / s2:.2f}x; "
          f"loaderx's speedup {one / two:.2f}x is {one / two / (s1 / s2):.2f} of it")
    print(f"(rounds: 1 {[round(t, 2) for t in spin[1]]}, 2 {[round(t, 2) for t in spin[2]]})")

    big_parts = sorted(
        os.path.join(out, "_parts", "image", p) for p in os.listdir(os.path.join(out, "_parts", "image"))
    )[:4]
    big_bytes = disk_bytes(big_parts)
    ray.shutdown()

    tiny = os.path.join(root, "tiny")
    os.makedirs(tiny)
    parts = []
    for k in range(1_024):
        p = os.path.join(tiny, f"part-{k:05d}")
        from_numpy(p, np.full((16, 32, 32, 3), k % 251, dtype=np.uint8))
        parts.append(p)
    tiny_bytes = disk_bytes(parts[:4])
    rounds = max(5, args.rounds)
    print("\n| stitch of | parts' bytes on disk | time (median) | per part |")
    print("|---|---|---|---|")
    for n in (4, 64, 1_024):
        t = stitch_time(parts[:n], os.path.join(root, f"set-{n}"), rounds)
        size = tiny_bytes * n / 4
        print(f"| {n:,} parts of 16 records | {size / 2**20:.2f} MiB | {t * 1e3:.2f} ms | {t / n * 1e6:.0f} us |")
    t = stitch_time(big_parts, os.path.join(root, "set-big"), rounds)
    per = args.rows // 16
    print(f"| 4 parts of {per:,} images | {big_bytes / 2**20:.1f} MiB | {t * 1e3:.2f} ms | {t / 4 * 1e6:.0f} us |")
    shutil.rmtree(root, ignore_errors=True)
    print(f"load average after the run {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
