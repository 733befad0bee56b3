#!/usr/bin/env bash
# The Python package's tests (loaderx-py): `pip install ./loaderx-py` into a fresh virtual
# environment (a release build through maturin, the PEP 517 backend), the pytest suite run there,
# then the one abi3 wheel `maturin build --release` gives installed and tested on every CPython
# 3.10-3.13 this machine has. The CLI round-trip tests use target/debug/loaderx (built by
# `cargo test-all`, or by `cargo build -p loaderx-cli`) and the remote tests loaderx-core's
# example s3_test_server; neither may skip here. With
# LOADERX_PY_TORCH=1 (CI sets it) torch from PyPI goes into the first environment and the torch
# tests must run there (measured 2026-12-02: 85 s to install, 5.6 GiB with its CUDA packages).
# Ray Data from PyPI always goes into the first environment, where the Ray tests
# (tests/test_ray.py, test_ray_arrow.py, the guide's Ray example) must run (LOADERX_REQUIRE_RAY; measured
# 2026-12-02: `pip install "ray[data]" pyarrow` 39 s into a fresh venv, 657 MiB with numpy and
# pytest; the Ray tests, the guide's included, about a minute on 2 cores); the wheel's
# environments skip them. jax[cpu] goes there too, where tests/test_jax.py must run
# (LOADERX_REQUIRE_JAX). With LOADERX_PY_FREE_THREADED=1 the suite also runs on a free-threaded
# CPython 3.14t with its own cp314t wheel (the last stage below).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOADERX_REQUIRE_CLI=1 LOADERX_REQUIRE_S3=1
[ -x target/debug/loaderx ] || cargo build -q -p loaderx-cli
# The S3 server the remote tests start (s3s-fs on loopback; test-all builds it too).
[ -x target/debug/examples/s3_test_server ] || cargo build -q -p loaderx-core --example s3_test_server
venvs=target/py-venvs
rm -rf "$venvs" && mkdir -p "$venvs"
pip_q() { "$1"/bin/pip install -q --disable-pip-version-check "${@:2}"; }

start=$(date +%s)
python3 -m venv "$venvs/install"
pip_q "$venvs/install" numpy pytest
if [ "${LOADERX_PY_TORCH:-0}" = 1 ]; then
    pip_q "$venvs/install" torch
    echo "torch installed: $(( $(date +%s) - start ))s"
fi
pip_q "$venvs/install" "ray[data]" pyarrow
echo "ray installed: $(( $(date +%s) - start ))s"
# JAX on CPU (tests/test_jax.py: a batch adopted without a copy; LOADERX_REQUIRE_JAX).
pip_q "$venvs/install" "jax[cpu]"
echo "jax installed: $(( $(date +%s) - start ))s"
pip_q "$venvs/install" ./loaderx-py
echo "pip install ./loaderx-py: $(( $(date +%s) - start ))s"
LOADERX_REQUIRE_TORCH=${LOADERX_PY_TORCH:-} LOADERX_REQUIRE_RAY=1 LOADERX_REQUIRE_JAX=1 "$venvs/install/bin/python" -m pytest -q loaderx-py/tests
# The hand-written stubs of the extension (python/loaderx/_native.pyi) against the module's
# runtime signatures (mypy's stubtest): a class, method, parameter or default that drifted fails.
pip_q "$venvs/install" "mypy>=2.4,<3"
"$venvs/install/bin/python" -m mypy.stubtest loaderx._native

# One abi3 wheel (the release build above is reused), tested on each interpreter.
pip_q "$venvs/install" "maturin>=1.16,<1.17"
rm -rf target/wheels
"$venvs/install/bin/maturin" build --release -q -m loaderx-py/Cargo.toml -o target/wheels
wheel=$(ls target/wheels/*.whl)
echo "wheel: $wheel ($(du -h "$wheel" | cut -f1))"
tested=0
for v in 3.10 3.11 3.12 3.13; do
    py=""
    for candidate in "$(command -v "python$v" || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import sys' 2>/dev/null; then
            py=$candidate
            break
        fi
    done
    if [ -z "$py" ]; then
        echo "python$v: not on this machine, not tested"
        continue
    fi
    "$py" -m venv "$venvs/py$v"
    pip_q "$venvs/py$v" numpy pytest "$wheel"
    echo "python$v:"
    "$venvs/py$v/bin/python" -m pytest -q -p no:cacheprovider loaderx-py/tests
    tested=$((tested + 1))
done
[ "$tested" -gt 0 ] || { echo "no CPython 3.10-3.13 found to test the wheel on" >&2; exit 1; }

# The free-threaded build (LOADERX_PY_FREE_THREADED=1; CI sets it): CPython 3.14t from
# scripts/free-threaded-python.sh (built once into its cache, or reused: about 4 minutes on 2
# cores; that script says why 3.14t), a cp314t wheel of its own (the abi3 wheel cannot load
# there), and the suite on it, tests/test_threads.py's threads then running at once.
if [ "${LOADERX_PY_FREE_THREADED:-0}" = 1 ]; then
    ft=$(scripts/free-threaded-python.sh)
    echo "free-threaded CPython: $ft ($(( $(date +%s) - start ))s)"
    rm -rf target/wheels-ft
    "$venvs/install/bin/maturin" build --release -q -i "$ft" -m loaderx-py/Cargo.toml -o target/wheels-ft
    ft_wheel=$(ls target/wheels-ft/*cp314t*.whl)
    echo "wheel: $ft_wheel ($(du -h "$ft_wheel" | cut -f1))"
    "$ft" -m venv "$venvs/py3.14t"
    pip_q "$venvs/py3.14t" numpy pytest "$ft_wheel"
    echo "python3.14t:"
    "$venvs/py3.14t/bin/python" -m pytest -q -p no:cacheprovider loaderx-py/tests
fi
echo "python: $(( $(date +%s) - start ))s"
