"""loaderx through its Python binding against NumPy (and torch, Grain, h5py, ArrayRecord when
installed), in the shape of the loaderx 0.9.11 specification's scripts/bench.py.

Every section interleaves its contenders round by round on the same data in this process (the
machine is shared and noisy: compare ratios, not absolute times), reports medians, and checks
every output against NumPy's. Contenders not installed are skipped with a note.

    python loaderx-py/bench/bench.py [sampler|store|loader|tokens|all] [--rounds N] [--records N] [--dir D]
        [--transform none|augment|flip] [--threads N] [--json FILE]

``--transform augment`` runs the loader section with a Python-bound per-sample transform
(``augment_one``; ``flip``: ``flip_one``, a fifth as heavy) on loaderx's threads and in torch's
worker processes; ``--json`` also writes
every row as a rate (higher is better) for loaderx-py/bench/interpreters.py, which runs this
script on a GIL build and a free-threaded one in turn.
"""

from __future__ import annotations

import argparse
import json
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


# Every row as a rate (higher is better), by "section/row": what --json writes.
ROWS: dict[str, float] = {}


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


def rounds_of(contenders: dict, rounds: int, reps: int, budget: float = 0.25) -> dict[str, float]:
    """Median seconds per call of each contender, rounds interleaved (each round starting one
    contender later); a contender slower than
    `budget / reps` a call makes fewer calls a round (at least one), so a round stays short."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    each = {name: max(1, min(reps, int(budget / max(timed(fn, 1), 1e-9)))) for name, fn in contenders.items()}
    names = list(contenders)
    for r in range(rounds):
        # Each round starts at the next contender: no row always runs first (after the others'
        # allocations and page faults) or last.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(timed(contenders[name], each[name]))
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
            ROWS[f"sampler/{name}, batch {b} (M indices/s)"] = b / t / 1e6


def structured(records: int, size: int, seed: int = 0) -> np.ndarray:
    """Mildly compressible records: each byte uniform over 0..255 with probability 0.6, else one
    of eight small values (an entropy zstd's literal coding gains a little on, about 1.1x)."""
    rng = np.random.default_rng(seed)
    out = np.empty((records, size), dtype=np.uint8)
    for s in range(0, records, 1024):
        e = min(records, s + 1024)
        wide = rng.integers(0, 256, (e - s, size), dtype=np.uint8)
        small = rng.integers(0, 8, (e - s, size), dtype=np.uint8)
        out[s:e] = np.where(rng.random((e - s, size)) < 0.6, wide, small)
    return out


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.stat(os.path.join(root, f)).st_blocks * 512
    return total if os.path.isdir(path) else os.stat(path).st_blocks * 512


def others(work: str, data: np.ndarray) -> dict:
    """The contenders that install from PyPI, written with one record per chunk (what a random
    batch reads), each a function gathering a batch as one array; skipped when not installed."""
    found, notes = {}, []
    records, size = data.shape
    try:
        import h5py

        for name, kw in (("hdf5", {}), ("hdf5-gzip", {"compression": "gzip"})):
            path = os.path.join(work, name + ".h5")
            with h5py.File(path, "w") as f:
                f.create_dataset("x", data=data, chunks=(1, size), **kw)
            dset = h5py.File(path, "r")["x"]
            found[name] = (lambda d: lambda idx: d[idx])(dset), path
    except ImportError:
        notes.append("h5py")
    try:
        import blosc2

        path = os.path.join(work, "x.b2nd")
        arr = blosc2.asarray(data, chunks=(1, size), blocks=(1, size), urlpath=path, mode="w")
        arr = blosc2.open(path)
        found["blosc2"] = (lambda idx: np.stack([arr[int(i)] for i in idx])), path
    except ImportError:
        notes.append("blosc2")
    try:
        import tensorstore as ts

        path = os.path.join(work, "x.zarr")
        spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": path},
                "metadata": {"shape": list(data.shape), "chunks": [1, size], "dtype": "|u1"}}
        t = ts.open(spec, create=True, delete_existing=True).result()
        t.write(data).result()
        t = ts.open(spec).result()
        found["tensorstore"] = (lambda idx: t[idx].read().result()), path
    except ImportError:
        notes.append("tensorstore")
    try:
        from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter

        path = os.path.join(work, "x.array_record")
        w = ArrayRecordWriter(path, "group_size:1")
        for row in data:
            w.write(row.tobytes())
        w.close()
        reader = ArrayRecordReader(path)
        found["arrayrecord"] = (lambda idx: np.stack([np.frombuffer(b, np.uint8) for b in reader.read(idx.tolist())])), path
    except ImportError:
        notes.append("array_record")
    return found, notes


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
            extra, missing = others(work, data) if args.others else ({}, ["(--others not given)"])
            rng = np.random.default_rng(5)
            # Sorted draws without repeats (the shuffle case; h5py needs increasing indices).
            rnd = [np.sort(rng.choice(records, batch, replace=False)) for _ in range(64)]
            seq = [np.arange(s, s + batch) for s in rng.integers(0, records - batch, 64)]
            out = np.empty((batch, size), dtype=np.uint8)
            for idx in rnd[:4] + seq[:4]:
                want = data[idx]
                for d in ds.values():
                    assert np.array_equal(d.gather(idx, out=out), want)
                for name, (fn, _) in extra.items():
                    assert np.array_equal(fn(idx), want), name
            del data
            mib = batch * size / 2**20
            print(f"\n2. Store: {records:,} records of {size // 1024} KiB, batches of {batch} ({mib:.0f} MiB), "
                  f"median of {args.rounds} interleaved rounds, warm page cache")
            print("store\twrite\tgather rnd\tgather seq\tper batch (rnd)\ton disk\tvs npy-mmap (rnd)")
            results, binding = {}, {}
            for kind, batches in (("rnd", rnd), ("seq", seq)):
                k = [0]

                def nxt():
                    k[0] = (k[0] + 1) % len(batches)
                    return batches[k[0]]

                u32 = [b.astype(np.uint32) for b in batches]
                j = [0]

                def eight():
                    j[0] = (j[0] + 8) % len(u32)
                    return u32[j[0] : j[0] + 8]

                flat = out.reshape(-1)
                reps = 3 if size > 64 * 1024 else 12
                # Every contender makes eight gathers a call (the Rust loop's eight in one call into
                # Rust), so that each call of each row moves the same bytes.
                def times8(f):
                    def call():
                        for _ in range(8):
                            f()

                    return call

                contenders = {
                    "loaderx-raw": times8(lambda: ds["raw"].gather(nxt(), out=out)),
                    "loaderx-raw, from Rust": lambda: ds["raw"]._native.gather_loop(eight(), flat, 1),
                    "loaderx-zstd": times8(lambda: ds["zstd"].gather(nxt(), out=out)),
                    "loaderx-zstd, from Rust": lambda: ds["zstd"]._native.gather_loop(eight(), flat, 1),
                    "npy-mmap fancy": times8(lambda: mm[nxt()]),
                    "npy-mmap take": times8(lambda: np.take(mm, nxt(), axis=0, out=out)),
                }
                for name, (fn, _) in extra.items():
                    contenders[name] = (lambda f: lambda: f(nxt()))(fn)
                med = rounds_of(contenders, args.rounds, reps)
                for name in med:
                    if name not in extra:
                        med[name] /= 8
                results[kind] = med
                # The binding's own cost, by itself: the same batches through one Python call each
                # and through the extension's loop, the two alone in their rounds.
                pair = rounds_of({
                    "python": times8(lambda: ds["raw"].gather(nxt(), out=out)),
                    "rust": lambda: ds["raw"]._native.gather_loop(eight(), flat, 1),
                }, args.rounds, reps)
                binding[kind] = pair["rust"] / pair["python"]
            disk = {"loaderx-raw": du(os.path.join(work, "raw")), "loaderx-zstd": du(os.path.join(work, "zstd"))}
            disk.update({name: du(path) for name, (_, path) in extra.items()})
            write = {"loaderx-raw": writes["raw"], "loaderx-zstd": writes["zstd"]}
            base = results["rnd"]["npy-mmap fancy"]
            total = records * size / 2**20
            npy = du(os.path.join(work, "x.npy"))
            for name in results["rnd"]:
                r, sq = results["rnd"][name], results["seq"][name]
                w = f"{total / write[name]:.0f} MiB/s" if name in write else "-"
                on_disk = disk.get(name.split(",")[0], npy)
                print(f"{name}\t{w}\t{mib / r:.0f} MiB/s\t{mib / sq:.0f} MiB/s\t{r * 1e3:.2f} ms\t"
                      f"{on_disk / 2**20:.0f} MiB\t{base / r:.2f}x")
                ROWS[f"store/{name}, {size // 1024} KiB, gather rnd (MiB/s)"] = mib / r
                ROWS[f"store/{name}, {size // 1024} KiB, gather seq (MiB/s)"] = mib / sq
            print(f"loaderx-raw through Python vs the same gathers from Rust, the two alone: "
                  f"{binding['rnd']:.2f}x (rnd), {binding['seq']:.2f}x (seq)")
            if missing:
                print("not installed, not run: " + ", ".join(missing))
        finally:
            shutil.rmtree(work, ignore_errors=True)


def augment_one(row: np.ndarray, label: int) -> np.ndarray:
    """A Python-bound per-sample transform (``--transform augment``): a flip and a roll chosen
    by the label (so outputs can be checked), then a jitter written as a Python loop over the
    record's 32 rows, each a small NumPy call (wrapping uint8 adds)."""
    out = np.roll(row[::-1] if label % 2 else row, label % 16)
    for k, r in enumerate(out.reshape(32, -1)):
        np.add(r, (label + k) % 3, out=r, casting="unsafe")
    return out


def flip_one(row: np.ndarray, label: int) -> np.ndarray:
    """``--transform flip``: ``augment_one`` without its per-row loop (a flip and a roll per
    sample), a transform a fifth as heavy."""
    return np.roll(row[::-1] if label % 2 else row, label % 16)


TRANSFORMS = {"augment": augment_one, "flip": flip_one}


def batch_transform(one):
    """``one`` over a loaderx batch: the per-sample loop runs on the loader's thread."""

    def transform(batch: dict) -> dict:
        x, y = batch["x"], batch["y"]
        out = np.empty_like(x)
        for i in range(len(x)):
            out[i] = one(x[i], int(y[i]))
        return {"x": out, "y": y}

    return transform


def expected(data: np.ndarray, labels: np.ndarray, one) -> np.ndarray:
    if one is None:
        return data[labels]
    return np.stack([one(data[int(i)], int(i)) for i in labels])


def loader(args) -> None:
    batch, size, records = 256, 12 * 1024, args.records
    one = TRANSFORMS.get(args.transform)
    threads = args.threads or os.cpu_count() or 2
    work = tempfile.mkdtemp(dir=args.dir)
    try:
        data = structured(records, size)
        labels = np.arange(records, dtype=np.int64)
        for codec in ("raw", "zstd"):
            from_numpy(os.path.join(work, "x-" + codec), data, codec=codec)
        from_numpy(os.path.join(work, "y"), labels)
        what = f"the Python transform {one.__name__} on each sample, " if one else ""
        print(f"\n3. Loader: batches of {batch} from {records:,} records of 12 KiB and their labels, "
              f"{what}{threads} threads (torch: {threads} worker processes), median of {args.rounds} rounds")
        print("loader\tbatches/s\tper batch\tsamples/s\tthroughput\tfirst batch")
        y = DenseDataset(os.path.join(work, "y"))
        steps = 60 if one else 200
        for codec in ("zstd", "raw"):
            rates, firsts = [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                with DataLoader({"x": DenseDataset(os.path.join(work, "x-" + codec)), "y": y}, batch_size=batch,
                                num_workers=threads, prefetch_size=4, seed=1,
                                transform=batch_transform(one) if one else None) as dl:
                    b = next(dl)
                    firsts.append(time.perf_counter() - t0)
                    assert np.array_equal(b["x"], expected(data, b["y"], one))
                    t = time.perf_counter()
                    for _ in range(steps):
                        b = next(dl)
                    rates.append(steps / (time.perf_counter() - t))
                    assert np.array_equal(b["x"], expected(data, b["y"], one))
            r = statistics.median(rates)
            print(f"loaderx-{codec}\t{r:.1f}\t{1e3 / r:.2f} ms\t{r * batch:,.0f}\t{r * batch * size / 2**20:.0f} MiB/s\t"
                  f"{statistics.median(firsts) * 1e3:.1f} ms")
            ROWS[f"loader/loaderx-{codec}{', ' + args.transform if one else ''} (batches/s)"] = r
        npy = os.path.join(work, "x.npy")
        np.save(npy, data)
        makers = (("torch", torch_loader),) + (() if one else (("grain", grain_loader),))
        for name, make in makers:
            try:
                rates, firsts = [], []
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    it = make(npy, labels, batch, threads, one)
                    x, y = next(it)
                    firsts.append(time.perf_counter() - t0)
                    assert np.array_equal(np.asarray(x), expected(data, np.asarray(y), one))
                    t = time.perf_counter()
                    for _ in range(steps):
                        x, y = next(it)
                    rates.append(steps / (time.perf_counter() - t))
                    assert np.array_equal(np.asarray(x), expected(data, np.asarray(y), one))
                    del it
                r = statistics.median(rates)
                print(f"{name}\t{r:.1f}\t{1e3 / r:.2f} ms\t{r * batch:,.0f}\t{r * batch * size / 2**20:.0f} MiB/s\t"
                      f"{statistics.median(firsts) * 1e3:.1f} ms")
                ROWS[f"loader/{name}{', ' + args.transform if one else ''} (batches/s)"] = r
            except ImportError:
                print(f"{name}: not installed, not run")
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _MemmapRows:
    """A map-style dataset over a .npy memmap (opened lazily, in each worker process)."""

    def __init__(self, path: str, labels: np.ndarray, one=None) -> None:
        self.path, self.labels, self.mm, self.one = path, labels, None, one

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        if self.mm is None:
            self.mm = np.load(self.path, mmap_mode="r")
        if self.one is not None:
            return self.one(np.array(self.mm[i]), int(self.labels[i])), self.labels[i]
        return np.array(self.mm[i]), self.labels[i]


def torch_loader(npy: str, labels: np.ndarray, batch: int, workers: int = 2, one=None):
    """torch's DataLoader, ``workers`` worker processes, shuffled epochs restarted endlessly."""
    import torch.utils.data

    dl = torch.utils.data.DataLoader(_MemmapRows(npy, labels, one), batch_size=batch, shuffle=True,
                                     drop_last=True, num_workers=workers, persistent_workers=True, prefetch_factor=4)
    while True:
        for x, y in dl:
            yield x.numpy(), y.numpy()


def grain_loader(npy: str, labels: np.ndarray, batch: int, workers: int = 2, one=None):
    """Grain's DataLoader, ``workers`` worker processes, endless shuffled epochs."""
    import grain.python as gp

    class Source(gp.RandomAccessDataSource):
        def __init__(self):
            self.rows = _MemmapRows(npy, labels, one)

        def __len__(self):
            return len(self.rows)

        def __getitem__(self, i):
            x, y = self.rows[i]
            return {"x": x, "y": y}

    sampler = gp.IndexSampler(num_records=len(labels), shard_options=gp.NoSharding(), shuffle=True, num_epochs=None, seed=0)
    loader = gp.DataLoader(data_source=Source(), sampler=sampler, operations=[gp.Batch(batch, drop_remainder=True)],
                           worker_count=workers)
    for b in loader:
        yield b["x"], b["y"]


def tokens(args) -> None:
    """Random windows of 1,025 tokens (64 a batch) from a uint16 token file: nanoGPT's
    ``get_batch`` (a fresh ``np.memmap`` each call, int64 inputs and targets stacked by torch)
    against loaderx's ``windows`` on the same windows, and against its DataLoader (its own
    sampler, prefetched on its threads)."""
    try:
        import torch
    except ImportError:
        print("\n4. Tokens: skipped (torch is not installed; nanoGPT's get_batch needs it)")
        return
    from loaderx.tokens import TokenDataset

    work = tempfile.mkdtemp(dir=args.dir)
    try:
        n, block, b = args.tokens, 1024, 64
        path = os.path.join(work, "train.bin")
        (np.arange(n, dtype=np.uint64) * 2654435761 % 50257).astype(np.uint16).tofile(path)
        rng = np.random.default_rng(0)
        batches = [rng.integers(0, n - block - 1, b) for _ in range(64)]
        at = {"nanogpt": 0, "gather": 0}

        def nanogpt():
            # nanoGPT's train.py get_batch, with the same windows as the others.
            ix = batches[at["nanogpt"] % len(batches)]
            at["nanogpt"] += 1
            data = np.memmap(path, dtype=np.uint16, mode="r")
            x = torch.stack([torch.from_numpy((data[i : i + block]).astype(np.int64)) for i in ix])
            y = torch.stack([torch.from_numpy((data[i + 1 : i + 1 + block]).astype(np.int64)) for i in ix])
            return x, y

        windows = TokenDataset(path, dtype=np.uint16).windows(block + 1)
        out = np.empty((b, block + 1), dtype=np.uint16)

        def gather():
            ix = batches[at["gather"] % len(batches)]
            at["gather"] += 1
            windows.gather(ix, out)
            t = torch.from_numpy(out.astype(np.int64))
            return t[:, :-1], t[:, 1:]

        loader = DataLoader({"tokens": windows}, batch_size=b, num_workers=2, seed=0)
        it = iter(loader)

        def from_loader():
            t = torch.from_numpy(next(it)["tokens"].astype(np.int64))
            return t[:, :-1], t[:, 1:]

        # The same windows give the same inputs and targets.
        at["nanogpt"] = at["gather"] = 0
        (x0, y0), (x1, y1) = nanogpt(), gather()
        assert torch.equal(x0, x1) and torch.equal(y0, y1), "loaderx's windows are nanoGPT's"
        res = rounds_of({"nanoGPT get_batch": nanogpt, "loaderx windows.gather": gather, "loaderx DataLoader": from_loader}, args.rounds, 20)
        loader.close()
        print(f"\n4. Tokens: {b} random windows of {block + 1} uint16 tokens from a file of {n:,} tokens, "
              f"int64 inputs and targets as torch tensors, median of {args.rounds} interleaved rounds\n")
        print("| contender | per batch | vs nanoGPT get_batch |\n|---|---:|---:|")
        base = res["nanoGPT get_batch"]
        for name, secs in res.items():
            print(f"| {name} | {secs * 1e6:.1f} µs | {base / secs:.1f}x |")
            ROWS[f"tokens/{name} (batches/s)"] = 1 / secs
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("section", nargs="?", default="all", choices=["sampler", "store", "loader", "tokens", "all"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--dir", default=None, help="where the bench's temporary data goes")
    p.add_argument("--others", action="store_true", help="also the other stores, where installed (slow to write)")
    p.add_argument("--tokens", type=int, default=64 << 20, help="tokens in the token file of the tokens section")
    p.add_argument("--transform", choices=["none", *TRANSFORMS], default="none",
                   help="the loader section's Python per-sample transform (augment_one, or flip_one, a fifth as heavy)")
    p.add_argument("--threads", type=int, default=0,
                   help="the loader section's threads (torch's worker processes); default: the CPUs")
    p.add_argument("--json", default=None, help="also write every row as a rate to this file")
    args = p.parse_args()
    machine()
    for name in ("sampler", "store", "loader", "tokens"):
        if args.section in (name, "all"):
            globals()[name](args)
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(ROWS, f, indent=1)


if __name__ == "__main__":
    main()
