#!/usr/bin/env bash
# Builds and lints loaderx-candle's `cuda` feature (pinned staging, candle's CUDA backend) on a
# machine without a GPU or a system CUDA toolkit. Not part of CI (it adds about 15 minutes: nvcc
# compiles candle's kernels).
#
#   scripts/check-cuda.sh [COMPUTE_CAP]      (default 90: H100/H200)
#
# The toolkit comes from PyPI (only package registries need to be reachable): NVIDIA's CUDA 13.0
# wheels of nvcc, nvvm, the runtime headers and CCCL, in a virtual environment under
# $CARGO_TARGET_DIR, plus cuBLAS, cuRAND and NVRTC for linking. It checks that the code compiles
# against candle's and cudarc's CUDA APIs (library, tests, benches, examples) and lints clean,
# then packs the CUDA test binary and benches/cuda.rs into scripts/device-bundle with run.sh: the
# one command to run on a GPU machine (tests/integration/cuda.rs, then the throughput and overlap
# bench, results in $OUT/cuda-results.txt). It runs nothing here: running needs a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-cuda}
# The bundle for the GPU machine goes beside this script (scripts/device-bundle, git-ignored).
VENV=$CARGO_TARGET_DIR/cuda-venv
if [[ ! -x $VENV/bin/nvcc-ready ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" \
        "nvidia-cuda-crt==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*" \
        "nvidia-cublas==13.0.*" "nvidia-curand==10.4.0.*" "nvidia-cuda-nvrtc==13.0.*"
    touch "$VENV/bin/nvcc-ready" && chmod +x "$VENV/bin/nvcc-ready"
fi
CUDA=$(realpath "$("$VENV/bin/python" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13"))')")
export PATH=$CUDA/bin:$PATH CUDA_ROOT=$CUDA CUDA_PATH=$CUDA CUDA_HOME=$CUDA
export CUDA_COMPUTE_CAP=${1:-90}
nvcc --version | tail -1

# Linking needs the unversioned library names, and libcuda.so, which comes with the GPU driver,
# not with any wheel: a stub that defines every driver function cudarc's bindings name stands in
# at link time (it keeps the soname libcuda.so.1, so a GPU machine's driver library is the one
# loaded at run time).
(
    cd "$CUDA/lib"
    for lib in cudart.so.13 cublas.so.13 cublasLt.so.13 curand.so.10 nvrtc.so.13; do
        ln -sf "lib$lib" "lib${lib%.so.*}.so"
    done
    cargo fetch --manifest-path "$OLDPWD/Cargo.toml" --quiet
    sys=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*/cudarc-0.19*/src/driver/sys/mod.rs' | head -1)
    grep -oE '\bfn cu[A-Za-z0-9_]+\(' "$sys" | sort -u | sed -E 's/fn (.*)\(/int \1(void) { return 999; }/' > stub.c
    cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so stub.c
)

cargo clippy -p loaderx-candle --features cuda,nn --all-targets -- -D warnings
# mnist_candle --device cuda (the staged CudaLoader, normalised on the device).
cargo clippy -p loaderx --features candle-nn,candle-cuda --example mnist_candle -- -D warnings
# The device bundle: the CUDA test binary and the bench, without debug info (the carry limit is
# 64 MiB), gzipped, with the one command to run there.
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_BENCH_DEBUG=0
BUNDLE=$PWD/scripts/device-bundle
rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
bins=$(cargo test -p loaderx-candle --features cuda,nn --test integration --no-run --message-format=json \
    | python3 -c 'import json,sys; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("executable")]')
bench=$(cargo bench -p loaderx-candle --features cuda --bench cuda --no-run --message-format=json \
    | python3 -c 'import json,sys; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("executable")]')
cp "$(echo "$bins" | tail -1)" "$BUNDLE/cuda-tests"
cp "$(echo "$bench" | tail -1)" "$BUNDLE/cuda-bench"
strip "$BUNDLE/cuda-tests" "$BUNDLE/cuda-bench"
gzip -9 "$BUNDLE/cuda-tests" "$BUNDLE/cuda-bench"
cat > "$BUNDLE/run.sh" <<'RUN'
#!/usr/bin/env bash
# On the GPU machine, from the repository root: scripts/check-cuda.sh's bundle, run once.
# Writes $OUT/cuda-results.txt (tests, then the bench tables). The CUDA 13 libraries come from
# the machine's PyTorch environment (its nvidia wheels); libcuda from the driver.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here}/cuda-results.txt
libs=$(python3 -c 'import nvidia, os, glob; print(":".join(sorted({os.path.dirname(p) for p in glob.glob(os.path.join(nvidia.__path__[0], "**", "lib*.so*"), recursive=True)})))' 2>/dev/null)
export LD_LIBRARY_PATH=${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=$(mktemp -d)
gunzip -c "$here/cuda-tests.gz" > "$work/cuda-tests" && gunzip -c "$here/cuda-bench.gz" > "$work/cuda-bench"
chmod +x "$work/cuda-tests" "$work/cuda-bench"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "== tests (loaderx-candle tests/integration, cuda feature)"
    (cd "$here/../loaderx-candle" && timeout 240 "$work/cuda-tests" cuda:: --test-threads 1 --nocapture)
    echo "tests exit: $?"
    echo "== bench (loaderx-candle benches/cuda.rs)"
    timeout 240 "$work/cuda-bench"
    echo "bench exit: $?"
} > "$out" 2>&1
cat "$out"
RUN
chmod +x "$BUNDLE/run.sh"
du -sh "$BUNDLE"
echo "cuda feature: builds, lints clean and links (compute capability $CUDA_COMPUTE_CAP)"
echo "on the GPU machine (device tool, carrying scripts/device-bundle):"
echo "    bash scripts/device-bundle/run.sh      # writes \$OUT/cuda-results.txt"
