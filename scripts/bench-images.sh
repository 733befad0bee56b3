#!/usr/bin/env bash
# The image benches of issue 43 on photographs: installs NumPy, Pillow, scikit-image (its wheel
# bundles the photographs), torch and torchvision into a venv under target/, builds the CLI with
# `images` and the Python package in release, writes 1,024 JPEGs of 500x375 at quality 90 cut from
# those photographs (loaderx-bench/python/photos.py), converts them with `convert images --encoded`,
# then runs
#   1. `loaderx bench images --image-dir FOLDER`: the loader's transforms against decoding each
#      whole file and nothing else, on the same threads (Rust, no Python);
#   2. loaderx-bench/python/images_bench.py: loaderx.vision against torchvision v2's DataLoader
#      (decode_jpeg, RandomResizedCrop(224, antialias=True), flip, ToDtype, Normalize) with as many
#      worker processes as loaderx has threads, through Python.
#
#   scripts/bench-images.sh [--rounds N] [--threads N]
#
# Figures go to docs/benchmarks/images.md by hand, headed by the machine block the first prints.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5 threads=2
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        *) echo "bench-images: unknown argument $1" >&2; exit 2 ;;
    esac
done
venv=target/bench-images-venv
if ! [[ -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import torchvision, skimage, PIL' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check numpy pillow scikit-image torch torchvision "maturin>=1.16,<1.17"
fi
cargo build --release -q -p loaderx-cli --features images
"$venv/bin/maturin" build --release -q -m loaderx-py/Cargo.toml -o target/bench-images-wheel
"$venv/bin/pip" install -q --force-reinstall --no-deps target/bench-images-wheel/loaderx_rs-*.whl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" loaderx-bench/python/photos.py "$work/photos" --count 1024
target/release/loaderx convert images "$work/photos" "$work/store" --encoded >/dev/null
echo "## loaderx bench images ($(git rev-parse --short HEAD), $(date -u +%F))"
target/release/loaderx bench images --image-dir "$work/photos" --rounds "$rounds" --threads "$threads"
echo
echo "## loaderx-bench/python/images_bench.py"
"$venv/bin/python" loaderx-bench/python/images_bench.py "$work/photos" "$work/store" --rounds "$rounds" --workers "$threads"
