"""NumPy's side of `loaderx bench cold`: batches gathered through a memory map of a .npy whose
pages the Rust harness has evicted from the page cache just before each command. Driven over
stdin/stdout so that its rounds interleave with loaderx's.

Commands, one per line; each answer is one line:
  first NPY IDX B K OUT  opens NPY (np.load, mmap_mode="r"), gathers batch K of the index file
                         IDX (raw little-endian u32, B per batch) with np.take -> "ns T", the
                         time of the open and the gather; then writes the batch to OUT
  stream NPY IDX B N     opens NPY and gathers batches 0..N of IDX one after the other -> "ns T"
  quit
"""
import sys
import time

import numpy as np


def batches(path, b):
    raw = np.fromfile(path, dtype="<u4")
    return [np.ascontiguousarray(x, dtype=np.intp) for x in raw.reshape(-1, b)]


def main():
    out = sys.stdout
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "first":
            npy, idx, b, k, dump = cmd[1], cmd[2], int(cmd[3]), int(cmd[4]), cmd[5]
            ix = batches(idx, b)[k]
            t = time.perf_counter_ns()
            arr = np.asarray(np.load(npy, mmap_mode="r"))
            got = np.take(arr, ix, axis=0)
            ns = time.perf_counter_ns() - t
            got.tofile(dump)
            del arr
            out.write(f"ns {ns}\n")
        elif cmd[0] == "stream":
            npy, idx, b, n = cmd[1], cmd[2], int(cmd[3]), int(cmd[4])
            ix = batches(idx, b)[:n]
            t = time.perf_counter_ns()
            arr = np.asarray(np.load(npy, mmap_mode="r"))
            buf = np.empty((b,) + arr.shape[1:], dtype=arr.dtype)
            for x in ix:
                np.take(arr, x, axis=0, out=buf, mode="clip")
            ns = time.perf_counter_ns() - t
            del arr
            out.write(f"ns {ns}\n")
        elif cmd[0] == "quit":
            return
        else:
            out.write(f"error unknown command {cmd[0]}\n")
        out.flush()


if __name__ == "__main__":
    main()
