#!/usr/bin/env bash
# Builds and lints loaderx-candle's `cuda` feature (pinned staging, candle's CUDA backend) on a
# machine without a GPU or a system CUDA toolkit. Not part of CI (it adds about 15 minutes: nvcc
# compiles candle's kernels).
#
#   scripts/check-cuda.sh [COMPUTE_CAP]      (default 90: H100/H200)
#
# The toolkit comes from PyPI (only package registries need to be reachable): NVIDIA's CUDA 13.0
# wheels of nvcc, nvvm, the runtime headers and CCCL, in a virtual environment under
# $CARGO_TARGET_DIR. It checks that the code compiles against candle's and cudarc's CUDA APIs
# (library, tests, examples); it runs nothing: running needs a GPU and its driver
# (`cargo test -p loaderx-candle --features cuda` there runs tests/integration/cuda.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-cuda}
VENV=$CARGO_TARGET_DIR/cuda-venv
if [[ ! -x $VENV/bin/nvcc-ready ]]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" \
        "nvidia-cuda-crt==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*"
    touch "$VENV/bin/nvcc-ready" && chmod +x "$VENV/bin/nvcc-ready"
fi
CUDA=$("$VENV/bin/python" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13"))')
export PATH=$CUDA/bin:$PATH CUDA_ROOT=$CUDA CUDA_PATH=$CUDA CUDA_HOME=$CUDA
export CUDA_COMPUTE_CAP=${1:-90}
nvcc --version | tail -1
cargo clippy -p loaderx-candle --features cuda,nn --all-targets -- -D warnings
echo "cuda feature: builds and lints clean (compute capability $CUDA_COMPUTE_CAP)"
