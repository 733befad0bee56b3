#!/usr/bin/env bash
# The gather benchmark with its NumPy rows: installs NumPy from PyPI into a venv under target/,
# builds the CLI in release and runs `loaderx bench gather` (784 B, 12 KiB and 128 KiB records;
# batches of 64, 256 and 1,024; one thread and the whole pool; the page-aligned memcpy ceiling;
# NumPy's np.take and fancy indexing on a memmap of the same .npy, interleaved and checked equal).
#
#   scripts/bench-gather.sh [extra `loaderx bench gather` flags, e.g. --quick or --json]
#
# Without network access to PyPI the NumPy rows are skipped, with a note in the output.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/bench-venv
python=
if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    python=$venv/bin/python
elif python3 -m venv "$venv" >/dev/null 2>&1 && "$venv/bin/pip" install -q numpy >/dev/null 2>&1; then
    python=$venv/bin/python
else
    echo "bench-gather: could not install NumPy into $venv; its rows are skipped" >&2
fi
cargo build --release -q -p loaderx-cli
exec target/release/loaderx bench gather ${python:+--python "$python"} "$@"
