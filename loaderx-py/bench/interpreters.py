"""bench.py on a GIL build of CPython and on a free-threaded one (3.14t), in turn, as the loaderx
specification measures its free-threaded rows: every row of the GIL build's table beside the
same row on the free-threaded build, and the loader with a Python-bound transform
(``--transform augment``) on loaderx's threads against torch's worker processes.

Each interpreter runs bench.py in a process of its own (one process cannot hold two
interpreters); the runs alternate (GIL, free-threaded, then free-threaded, GIL, ...) so that
neither always runs first, and each row is the median over the alternations of each run's
median of ``--rounds`` rounds.

    python loaderx-py/bench/interpreters.py --gil VENV314/bin/python --ft VENV314t/bin/python \\
        [--torch VENV/bin/python] [--alternations 3] [--rounds 5] [--threads 2]

Each interpreter needs numpy and loaderx installed (the abi3 wheel on the GIL build, the cp314t
wheel on the free-threaded one). ``--torch`` names the interpreter whose torch runs the torch rows
when the GIL one has no torch (torch's row is a GIL build's worker processes either way).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(python: str, args: list[str]) -> dict[str, float]:
    """One bench.py run; its rows. Its own table goes to stderr as it prints."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        subprocess.run([python, os.path.join(HERE, "bench.py"), *args, "--json", out], check=True,
                       stdout=sys.stderr)
        with open(out) as f:
            return json.load(f)
    finally:
        os.unlink(out)


def version(python: str) -> str:
    code = ("import platform, sys, sysconfig; print(platform.python_version() + "
            "('t (free-threaded, GIL ' + ('on' if sys._is_gil_enabled() else 'off') + ' after import)' "
            "if sysconfig.get_config_var('Py_GIL_DISABLED') else ' (GIL)'))")
    return subprocess.run([python, "-c", "import loaderx, numpy; " + code], check=True, capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gil", required=True, help="a GIL build's python with loaderx and numpy")
    p.add_argument("--ft", required=True, help="a free-threaded build's python with loaderx and numpy")
    p.add_argument("--torch", default=None, help="a GIL build's python with torch, for the torch rows")
    p.add_argument("--alternations", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=2, help="loader threads, and torch's worker processes")
    p.add_argument("--sections", nargs="*", default=["sampler", "store", "loader"])
    p.add_argument("--transforms", nargs="*", default=["augment"], help="bench.py's --transform values to run")
    args = p.parse_args()

    common = ["--rounds", str(args.rounds), "--records", str(args.records), "--threads", str(args.threads)]
    runs: dict[str, list[dict[str, float]]] = {"gil": [], "ft": [], "torch": []}
    interpreters = {"gil": args.gil, "ft": args.ft}
    for a in range(args.alternations):
        order = ["gil", "ft"] if a % 2 == 0 else ["ft", "gil"]
        for which in order:
            rows: dict[str, float] = {}
            for section in args.sections:
                rows.update(run(interpreters[which], [section, *common]))
            for t in args.transforms:
                rows.update(run(interpreters[which], ["loader", "--transform", t, *common]))
            runs[which].append(rows)
        if args.torch:
            rows = {}
            for t in args.transforms:
                rows.update(run(args.torch, ["loader", "--transform", t, *common]))
            runs["torch"].append(rows)

    def medians(which: str) -> dict[str, float]:
        keys = set().union(*runs[which]) if runs[which] else set()
        return {k: statistics.median(r[k] for r in runs[which] if k in r) for k in keys}

    gil, ft, torch = medians("gil"), medians("ft"), medians("torch")
    print(f"GIL build: {version(args.gil)}; free-threaded build: {version(args.ft)}")
    print(f"{args.alternations} alternations, each row the median of their medians of {args.rounds} rounds, "
          f"{args.threads} loader threads\n")
    print("| row | GIL build | free-threaded | free-threaded / GIL |\n|---|---:|---:|---:|")
    for k in sorted(gil, key=lambda k: (k.split("/")[0] != "sampler", k.split("/")[0] != "store", k)):
        if k in ft:
            print(f"| {k} | {gil[k]:,.1f} | {ft[k]:,.1f} | {ft[k] / gil[k]:.2f}x |")
    for tr in args.transforms:
        t = torch.get(f"loader/torch, {tr} (batches/s)", gil.get(f"loader/torch, {tr} (batches/s)"))
        if not t:
            continue
        print(f"\nWith the Python transform {tr}, against torch's DataLoader ({args.threads} worker processes, "
              f"a GIL build: {t:,.1f} batches/s):\n")
        print("| loader | GIL build | free-threaded | free-threaded / torch |\n|---|---:|---:|---:|")
        for codec in ("zstd", "raw"):
            k = f"loader/loaderx-{codec}, {tr} (batches/s)"
            if k in gil and k in ft:
                print(f"| loaderx-{codec}, {tr} | {gil[k]:,.1f} | {ft[k]:,.1f} | {ft[k] / t:.2f}x |")


if __name__ == "__main__":
    main()
