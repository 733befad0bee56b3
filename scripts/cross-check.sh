#!/usr/bin/env bash
# Type-checks the crates that carry platform code for the targets this machine can reach
# without running them: Windows x86-64 (GNU ABI; zstd's C is compiled by Debian's mingw-w64).
# `cargo check` compiles every dependency's build script and C code for the target, so a
# platform-only API (memmap2's Unix advice, say) or a missing `cfg` fails here. Nothing runs:
# the test binaries are not executed (Wine is not installed by CI).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq gcc-mingw-w64-x86-64) >/dev/null 2>&1 \
        || sudo apt-get install -y -qq gcc-mingw-w64-x86-64
fi
# A target directory of its own: host and target artifacts never share a fingerprint.
CARGO_TARGET_DIR=target/cross cargo check --quiet --target "$target" -p loaderx-core -p loaderx-cli -p loaderx-capi --all-targets
echo "cross-check $target: ok"
