"""NumPy's side of `loaderx bench gather`: gathers the same rows of the same file (the records
back to back: `gather_worker.py PATH ROWS ROW_BYTES`) through a memory map, timed here, driven
over stdin/stdout by the Rust harness so that its rounds interleave with loaderx's.

Commands, one per line; each answer is one line:
  load IDX_PATH B        index batches: raw little-endian u32, B per batch -> "ok COUNT"
  take N                 N gathers np.take(arr, idx, axis=0, out=buf, mode="clip"), batches in
                         turn -> "ns T" (mode="clip": NumPy buffers `out` under the default
                         mode="raise", documented as the slow case; these indices are in range)
  fancy N                N gathers arr[idx] (a fresh array each time) -> "ns T"
  dump K OUT_PATH        writes batch K gathered by np.take to OUT_PATH -> "ok"
  quit
"""
import sys
import time

import numpy as np


def main():
    # The memmap's plain ndarray view (no copy): np.memmap's subclass hooks cost per call.
    rows, row_bytes = int(sys.argv[2]), int(sys.argv[3])
    arr = np.asarray(np.memmap(sys.argv[1], dtype=np.uint8, mode="r", shape=(rows, row_bytes)))
    batches, buf, k = None, None, 0
    out = sys.stdout
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "load":
            b = int(cmd[2])
            raw = np.fromfile(cmd[1], dtype="<u4")
            batches = [np.ascontiguousarray(x, dtype=np.intp) for x in raw.reshape(-1, b)]
            buf = np.empty((b, arr.shape[1]), dtype=arr.dtype)
            k = 0
            out.write(f"ok {len(batches)}\n")
        elif cmd[0] in ("take", "fancy"):
            n = int(cmd[1])
            t = time.perf_counter_ns()
            if cmd[0] == "take":
                for _ in range(n):
                    np.take(arr, batches[k % len(batches)], axis=0, out=buf, mode="clip")
                    k += 1
            else:
                for _ in range(n):
                    x = arr[batches[k % len(batches)]]
                    k += 1
                del x
            out.write(f"ns {time.perf_counter_ns() - t}\n")
        elif cmd[0] == "dump":
            np.take(arr, batches[int(cmd[1])], axis=0, out=buf, mode="clip")
            buf.tofile(cmd[2])
            out.write("ok\n")
        elif cmd[0] == "quit":
            return
        else:
            out.write(f"error unknown command {cmd[0]}\n")
        out.flush()


if __name__ == "__main__":
    main()
