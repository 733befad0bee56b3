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
# against candle's and cudarc's CUDA APIs (library, tests, examples) and that the test binaries
# link; it runs nothing: running needs a GPU and its driver (there, the test binaries run
# tests/integration/cuda.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-cuda}
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
cargo test -p loaderx-candle --features cuda,nn --no-run
echo "cuda feature: builds, lints clean and links (compute capability $CUDA_COMPUTE_CAP)"
echo "on a GPU machine: cargo test -p loaderx-candle --features cuda,nn (or run the test binaries"
echo "printed above with LD_LIBRARY_PATH=$CUDA/lib)"
