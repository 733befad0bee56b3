#!/usr/bin/env bash
# Builds and links, without running, what this machine has no runner for (issue 46): the CLI
# and the C ABI's library for macOS (x86-64 and arm64), Windows arm64 (the GNU ABI over LLVM's
# tools, aarch64-pc-windows-gnullvm: MSVC's SDK is not here) and Linux x86-64 against glibc 2.17
# (the seed's manylinux_2_17 floor), with cargo-zigbuild (zig as the C compiler and linker: no
# macOS SDK or llvm-mingw needed). Needs ziglang and cargo-zigbuild from PyPI, installed into ZIG_VENV
# (default target/cross/zig-venv) when missing. Usage: scripts/cross-build.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(aarch64-apple-darwin x86_64-apple-darwin aarch64-pc-windows-gnullvm x86_64-unknown-linux-gnu.2.17)
venv=${ZIG_VENV:-target/cross/zig-venv}
if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check ziglang cargo-zigbuild
fi
export PATH="$(cd "$venv" && pwd)/bin:$PATH" CARGO_TARGET_DIR=target/cross CARGO_INCREMENTAL=0
for target in "${targets[@]}"; do
    triple=${target%.2.17}
    rustup target list --installed | grep -qx "$triple" || rustup target add "$triple"
    start=$(date +%s)
    # Warnings fail the build: code for one architecture only must say so.
    RUSTFLAGS="-D warnings" cargo zigbuild --quiet --target "$target" -p loaderx-cli -p loaderx-capi
    case "$triple" in
        *apple*) exe="target/cross/$triple/debug/loaderx" lib="target/cross/$triple/debug/libloaderx_capi.dylib" ;;
        *windows*) exe="target/cross/$triple/debug/loaderx.exe" lib="target/cross/$triple/debug/loaderx_capi.dll" ;;
        *) exe="target/cross/$triple/debug/loaderx" lib="target/cross/$triple/debug/libloaderx_capi.so" ;;
    esac
    file "$exe" "$lib" | sed 's/, with debug_info.*//'
    echo "cross-build $target: CLI and C library built and linked ($(( $(date +%s) - start )) s)"
done
