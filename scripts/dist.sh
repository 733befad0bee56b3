#!/usr/bin/env bash
# The release artifacts of every platform the seeds ship (issue 46), from one command, each
# checked after packing. Per target, under dist/ (each with a .sha256 sidecar):
#   loaderx-VERSION-TARGET.tar.gz      the `loaderx` CLI (features $DIST_CLI_FEATURES) and the
#                                      licenses (.zip on Windows)
#   loaderx-capi-VERSION-TARGET.tar.gz include/loaderx.h, include/mmap_chunker.h and lib/: the C
#                                      ABI's shared and static libraries, and the licenses
#                                      (mmap-chunker's archive layout; .zip on Windows)
#   loaderx_rs-VERSION-cp310-abi3-PLATFORM.whl  the Python package (one wheel for CPython 3.10+)
# Checked after packing: every binary in an archive or wheel is of its target's format and
# architecture (file(1)) and no other platform's library is there; a Linux glibc build needs no
# symbol newer than GLIBC_2.17 (the seed's manylinux_2_17 floor) and its shared library embeds no
# RPATH or RUNPATH; a wheel holds exactly one extension module, its platform's. Where this
# machine can run the target (natively, qemu-user for arm64 Linux, Wine for Windows), the CLI
# taken out of its archive converts and verifies a store, and tests/c/readme.c, compiled against
# the extracted C archive and linked statically (and dynamically where the target has a shared
# library), runs. macOS builds link with zig, without an SDK (the frameworks they use as text
# stubs, scripts/lib/apple-sdk-stub.sh), and cannot run here.
#
# Usage: scripts/dist.sh [TARGET...]   (every target below when none is named)
#   x86_64-unknown-linux-gnu  aarch64-unknown-linux-gnu   (glibc 2.17, with zig)
#   x86_64-unknown-linux-musl aarch64-unknown-linux-musl  (with zig; static CLI, no .so)
#   x86_64-pc-windows-gnu                                 (mingw-w64; MSVC cannot be built here)
#   aarch64-pc-windows-gnullvm                            (with zig; nothing here runs it)
#   x86_64-apple-darwin       aarch64-apple-darwin        (with zig)
# Needs: ziglang, cargo-zigbuild and maturin from PyPI (into $ZIG_VENV, default
# target/dist/venv), cmake and nasm (libjpeg-turbo), llvm (llvm-objdump reads Mach-O), and for
# Windows gcc-mingw-w64-x86-64 and wine64, for arm64 runs qemu-user-static and
# gcc-aarch64-linux-gnu (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu
    x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-pc-windows-gnu
    aarch64-pc-windows-gnullvm x86_64-apple-darwin aarch64-apple-darwin)
features=${DIST_CLI_FEATURES:-images,parquet,remote}
version=$(awk -F'"' '/^version = /{ print $2; exit }' Cargo.toml)
out=dist
venv=${ZIG_VENV:-target/dist/venv}
if [ ! -x "$venv/bin/cargo-zigbuild" ] || [ ! -x "$venv/bin/maturin" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check ziglang cargo-zigbuild 'maturin>=1.16,<1.17' numpy
fi
export PATH="$(cd "$venv" && pwd)/bin:$PATH" CARGO_TARGET_DIR=target/dist CARGO_INCREMENTAL=0
mkdir -p "$out"
fail() { echo "dist $target: $*" >&2; exit 1; }

# What file(1) says of every binary of the target (the pattern each must match).
kind_of() {
    case "$1" in
        x86_64-unknown-linux-*) echo 'ELF 64-bit.*x86-64' ;;
        aarch64-unknown-linux-*) echo 'ELF 64-bit.*ARM aarch64' ;;
        x86_64-pc-windows-*) echo 'PE32\+.*x86-64' ;;
        aarch64-pc-windows-*) echo 'PE32\+.*Aarch64' ;;
        x86_64-apple-darwin) echo 'Mach-O 64-bit.*x86_64' ;;
        aarch64-apple-darwin) echo 'Mach-O 64-bit.*arm64' ;;
    esac
}

# What file(1) says of the objects in the target's static libraries.
object_kind_of() {
    case "$1" in
        x86_64-pc-windows-*) echo 'x86-64 COFF|amd64 COFF' ;;
        aarch64-pc-windows-*) echo 'Aarch64 COFF|ARM64 COFF|COFF.*ARM64' ;;
        *) kind_of "$1" ;;
    esac
}

# Every file of `dir` that file(1) calls a binary must be the target's kind.
check_binaries() { # dir
    local f desc n=0
    while IFS= read -r -d '' f; do
        desc=$(file -b "$f")
        case "$desc" in
            *ELF*|*PE32*|*Mach-O*|*"ar archive"*) ;;
            *) continue ;;
        esac
        n=$((n + 1))
        case "$desc" in
            *"ar archive"*) # a static library: each member object of the target's kind
                local objs; objs=$(mktemp -d)
                local abs; abs=$(realpath "$f")
                (cd "$objs" && ar x "$abs" 2>/dev/null) || fail "$f: not a readable archive"
                # (No pipe into head: under pipefail a writer cut short fails the script.)
                local o; o=$(find "$objs" -type f \( -name '*.o' -o -name '*.obj' \) -print -quit)
                if [ -z "$o" ] && [[ $target == *windows* ]]; then
                    # An LLVM import library: short import members (no .o), whose header holds
                    # the machine (bytes 6-7, little endian: 8664 x86-64, aa64 arm64).
                    o=$(find "$objs" -type f -print -quit)
                    local machine; machine=$(od -A n -t x1 -j 6 -N 2 "$o" | tr -d ' \n')
                    case "$target:$machine" in
                        x86_64*:6486|aarch64*:64aa) ;;
                        *) fail "$f: import members for machine $machine, not $target's" ;;
                    esac
                else
                    [ -n "$o" ] && grep -Eq "$(object_kind_of "$target")" <<< "$(file -b "$o")" \
                        || fail "$f: members are $(file -b "$o"), not $(object_kind_of "$target")"
                fi
                rm -rf "$objs" ;;
            *) grep -Eq "$(kind_of "$target")" <<< "$desc" || fail "$f is $desc, not $(kind_of "$target")"
               if [[ $desc == *Mach-O* ]]; then
                   # Every library it loads is the system's (never a path of this machine's,
                   # such as the stub SDK's): libSystem and the frameworks, by install name;
                   # and its own name, for a shared library, is @rpath's (listed first).
                   local libs; libs=$(llvm-objdump --macho --dylibs-used "$f" | tail -n +2 | awk '{ print $1 }')
                   [ -n "$libs" ] || fail "$f: no libraries listed (llvm-objdump)"
                   local lib
                   for lib in $libs; do
                       case "$lib" in
                           /usr/lib/*|/System/Library/Frameworks/*|@rpath/*) ;;
                           *) fail "$f loads $lib, not a system library" ;;
                       esac
                   done
               fi ;;
        esac
    done < <(find "$1" -type f -print0)
    [ "$n" -gt 0 ] || fail "no binary in $1"
}

# Linux glibc: no symbol version past GLIBC_2.17, no RPATH or RUNPATH in a shared library.
check_glibc() { # file
    local newest
    newest=$(objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    [ -z "$newest" ] || [ "$(printf '%s\n%s\n' "$newest" GLIBC_2.17 | sort -V | tail -1)" = GLIBC_2.17 ] \
        || fail "$1 needs $newest, past GLIBC_2.17"
    [ "$(readelf -d "$1" | grep -Ec 'RPATH|RUNPATH' || true)" = 0 ] || fail "$1 embeds an RPATH or RUNPATH"
}

pack() { # name dir: dist/name.tar.gz (.zip on Windows) and its .sha256
    local name=$1 dir=$2 file
    case "$target" in
        *windows*) file="$name.zip"; rm -f "$out/$file"; (cd "$dir/.." && zip -qr "$OLDPWD/$out/$file" "$(basename "$dir")") ;;
        *) file="$name.tar.gz"; tar -C "$dir/.." -czf "$out/$file" "$(basename "$dir")" ;;
    esac
    (cd "$out" && sha256sum "$file" > "$file.sha256")
    echo "$out/$file"
}

unpack() { # archive dir
    mkdir -p "$2"
    case "$1" in
        *.zip) (cd "$2" && unzip -q "$OLDPWD/$1") ;;
        *) tar -C "$2" -xzf "$1" ;;
    esac
    (cd "$(dirname "$1")" && sha256sum -c --quiet "$(basename "$1").sha256")
}

for target in "${targets[@]}"; do
    start=$(date +%s)
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
    exe='' runner='' cargo_cmd=(cargo zigbuild) zig_target=$target wheel_args=(--zig) cli_features=$features build_wheel=1
    wheel_cargo= target_env=()
    case "$target" in
        *apple*)
            # `remote` (rustls-native-certs reads the keychain: Security) and arrow (chrono's
            # time zones: CoreFoundation; every wheel and `parquet`) link Apple frameworks,
            # which only the macOS SDK holds (zig carries libSystem alone; without them the link
            # fails with "unable to find system framework"): an SDK of the two frameworks' text
            # stubs stands in for it (scripts/lib/apple-sdk-stub.sh), unless SDKROOT names one.
            sdk=${SDKROOT:-}
            if [ -z "$sdk" ]; then
                . scripts/lib/apple-sdk-stub.sh
                sdk=$PWD/target/dist/apple-sdk-stub
                apple_sdk_stub "$sdk"
            fi
            target_env=(SDKROOT="$sdk") ;;
        *linux-gnu) zig_target="$target.2.17"; wheel_args+=(--compatibility manylinux2014) ;;
        *linux-musl) wheel_args+=(--compatibility musllinux_1_2) ;;
        aarch64-pc-windows-gnullvm)
            # maturin's own `--zig` exports `PyInit_loaderx._native` (the dotted module name,
            # not the symbol pyo3 defines) through a .def file of its making, and lld-link fails
            # (maturin 1.16, src/compile.rs, configure_platform_linker_args). So maturin runs
            # without it, and its `cargo rustc` goes through cargo-zigbuild (a `cargo` first in
            # PATH), which links with zig and leaves the exports to rustc.
            exe=.exe wheel_args=(--features pyo3/generate-import-lib) wheel_cargo=zigbuild ;;
        x86_64-pc-windows-gnu)
            cargo_cmd=(cargo build) exe=.exe
            # abi3 on Windows links python3.dll: pyo3 writes its import library itself.
            wheel_args=(--features pyo3/generate-import-lib)
            export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc
            if command -v wine >/dev/null; then
                # The prefix, with the stand-in Wine 8.0 lacks (scripts/lib/wine-prefix.sh).
                . scripts/lib/wine-prefix.sh
                wine_prefix "$PWD/target/dist/wine"
                runner=wine
            fi ;;
    esac
    case "$target" in
        aarch64-unknown-linux-gnu) command -v qemu-aarch64-static >/dev/null \
            && [ -d /usr/aarch64-linux-gnu ] && runner="qemu-aarch64-static -L /usr/aarch64-linux-gnu" ;;
        aarch64-unknown-linux-musl) command -v qemu-aarch64-static >/dev/null && runner=qemu-aarch64-static ;;
        x86_64-unknown-linux-*) runner=env ;;
    esac
    env "${target_env[@]}" "${cargo_cmd[@]}" --release --quiet --target "$zig_target" -p loaderx-cli --features "$cli_features"
    env "${target_env[@]}" "${cargo_cmd[@]}" --release --quiet --target "$zig_target" -p loaderx-capi
    built=target/dist/$target/release
    work=target/dist/stage/$target
    rm -rf "$work" && mkdir -p "$work"

    # The CLI.
    cli="$work/loaderx-$version-$target"
    mkdir -p "$cli" && cp "$built/loaderx$exe" LICENSE-MIT LICENSE-APACHE "$cli/"
    cli_archive=$(pack "loaderx-$version-$target" "$cli")

    # The C ABI: headers, the shared library where the target has one, the static library.
    capi="$work/loaderx-capi-$version-$target"
    mkdir -p "$capi/include" "$capi/lib"
    cp loaderx-capi/include/loaderx.h loaderx-capi/include/mmap_chunker.h "$capi/include/"
    cp LICENSE-MIT LICENSE-APACHE "$capi/"
    case "$target" in
        *windows*) cp "$built/loaderx_capi.dll" "$built/libloaderx_capi.dll.a" "$built/libloaderx_capi.a" "$capi/lib/" ;;
        *apple*) cp "$built/libloaderx_capi.dylib" "$built/libloaderx_capi.a" "$capi/lib/" ;;
        *musl) cp "$built/libloaderx_capi.a" "$capi/lib/" ;;
        *) cp "$built/libloaderx_capi.so" "$built/libloaderx_capi.a" "$capi/lib/" ;;
    esac
    capi_archive=$(pack "loaderx-capi-$version-$target" "$capi")

    # The wheel (maturin names it by its platform tag).
    rm -rf "$work/wheel"
    wheel=
    if [ -n "$build_wheel" ]; then
        # A target directory of its own: maturin's zig wrapper is another linker path than
        # cargo-zigbuild's, and one directory would rebuild every crate at each switch.
        wheel_path=$PATH
        if [ "$wheel_cargo" = zigbuild ]; then
            shim=$PWD/target/dist/cargo-zigbuild-shim
            mkdir -p "$shim"
            # cargo-zigbuild runs $CARGO (not this `cargo` again).
            printf '#!/bin/sh\nexport CARGO=%s\n[ "$1" = rustc ] && shift && exec cargo-zigbuild rustc "$@"\nexec "$CARGO" "$@"\n' \
                "$(command -v cargo)" > "$shim/cargo"
            chmod +x "$shim/cargo"
            wheel_path=$shim:$PATH
        fi
        env "${target_env[@]}" PATH="$wheel_path" CARGO_TARGET_DIR=target/dist/wheels maturin build --release --quiet --target "$target" \
            "${wheel_args[@]}" -m loaderx-py/Cargo.toml -o "$work/wheel"
        wheel=$(ls "$work/wheel"/*.whl)
        cp "$wheel" "$out/" && (cd "$out" && sha256sum "$(basename "$wheel")" > "$(basename "$wheel").sha256")
    fi

    # Checks, on what was packed: everything unpacked afresh.
    check="$work/check"
    rm -rf "$check"
    unpack "$cli_archive" "$check/cli"
    unpack "$capi_archive" "$check/capi"
    check_binaries "$check/cli"
    check_binaries "$check/capi"
    if [ -n "$wheel" ]; then
        mkdir -p "$check/wheel" && (cd "$check/wheel" && unzip -q "$OLDPWD/$wheel")
        check_binaries "$check/wheel"
        mods=$(find "$check/wheel" -type f \( -name '_native*.so' -o -name '_native*.pyd' -o -name '_native*.dylib' \))
        [ "$(echo "$mods" | wc -l)" = 1 ] || fail "the wheel holds $(echo "$mods" | wc -l) extension modules"
        case "$target" in
            *windows*) [[ $mods == *.pyd ]] || fail "the wheel's module $mods is not a .pyd" ;;
            *) [[ $mods == *.abi3.so ]] || fail "the wheel's module $mods is not an abi3 .so" ;;
        esac
    fi
    if [[ $target == *linux-gnu ]]; then
        check_glibc "$check/cli/loaderx-$version-$target/loaderx"
        check_glibc "$check/capi/loaderx-capi-$version-$target/lib/libloaderx_capi.so"
        check_glibc "$mods"
    fi
    ran="built, packed and checked"
    if [ -n "$runner" ]; then
        run_dir=$(mktemp -d)
        bin="$check/cli/loaderx-$version-$target/loaderx$exe"
        seq 1 3000 | sed 's/.*/{"n": &}/' > "$run_dir/lines.jsonl"
        $runner "$bin" partition "$run_dir/lines.jsonl" --parts 4 > "$run_dir/plan.txt"
        [ "$(wc -l < "$run_dir/plan.txt")" = 4 ] || fail "partition planned $(wc -l < "$run_dir/plan.txt") parts"
        # The README's C example against the extracted archive, linked statically, then
        # dynamically where there is a shared library; its store verified by the archive's CLI.
        inc="$check/capi/loaderx-capi-$version-$target/include"
        lib="$check/capi/loaderx-capi-$version-$target/lib"
        case "$target" in
            x86_64-unknown-linux-gnu)
                cc=(cc) static=("$lib/libloaderx_capi.a" -lpthread -ldl -lm) dynamic=(-L"$lib" -lloaderx_capi) ;;
            aarch64-unknown-linux-gnu)
                cc=(aarch64-linux-gnu-gcc) static=("$lib/libloaderx_capi.a" -lpthread -ldl -lm) dynamic=(-L"$lib" -lloaderx_capi) ;;
            *linux-musl)
                cc=("$venv/bin/python" -m ziglang cc -target "${target%%-*}-linux-musl")
                # Rust's musl static library leaves the unwinder to the program that links it
                # (the _Unwind_* symbols of its panic machinery): libunwind, which zig provides.
                static=("$lib/libloaderx_capi.a" -lunwind) dynamic=() ;;
            x86_64-pc-windows-gnu)
                cc=(x86_64-w64-mingw32-gcc) static=("$lib/libloaderx_capi.a" -lkernel32 -ladvapi32 -lntdll -luserenv -lws2_32 -lbcrypt -ldbghelp)
                dynamic=("$lib/libloaderx_capi.dll.a") ;;
        esac
        # The DLL beside the programs, as a Windows user installs it.
        [[ $target != *windows* ]] || cp "$lib/loaderx_capi.dll" "$run_dir/"
        for how in static dynamic; do
            if [ "$how" = static ]; then link=("${static[@]}"); else link=("${dynamic[@]}"); fi
            [ ${#link[@]} -gt 0 ] || continue
            "${cc[@]}" -std=c99 -Wall -Werror -I"$inc" -o "$run_dir/readme-$how$exe" loaderx-capi/tests/c/readme.c "${link[@]}"
            rm -rf "$run_dir/store"
            LD_LIBRARY_PATH="$(cd "$lib" && pwd)" $runner "$run_dir/readme-$how$exe" "$run_dir/lines.jsonl" "$run_dir/store" \
                > /dev/null || fail "tests/c/readme.c ($how) failed"
            $runner "$bin" verify "$run_dir/store" > /dev/null || fail "the C program's store does not verify"
        done
        ran="built, packed, checked, and run (${runner%% *}): the CLI and tests/c/readme.c"
        if [ "$target" = x86_64-unknown-linux-gnu ]; then
            # The wheel installed and imported by this machine's Python: the C program's store read.
            "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --target "$run_dir/py" "$wheel"
            PYTHONPATH="$run_dir/py" "$venv/bin/python" -c "import sys; from loaderx.zrecord import Zrecord
z = Zrecord(sys.argv[1], 'r'); assert len(z) == 4 and z.gather([0])[0].startswith(b'{\"n\": 1}'), z.gather([0])[0][:20]" \
                "$run_dir/store" || fail "the wheel does not read the C program's store"
            ran="$ran; the wheel imported and reading the C program's store"
        fi
        rm -rf "$run_dir"
    fi
    rm -rf "$work"
    echo "dist $target: $ran ($(( $(date +%s) - start )) s)"
    ls -l "$out" | grep -F -- "$target" | awk '{ print "  " $5 "\t" $9 }'
    if [ -n "$wheel" ]; then
        ls -l "$out" | grep -F -- "$(basename "$wheel")" | grep -v sha256 | awk '{ print "  " $5 "\t" $9 }'
    else
        echo "  no wheel for $target (see above)"
    fi
done
