#!/usr/bin/env bash
# Builds loaderx for the platforms this machine can reach and runs what can run here (issue 46):
#   x86_64-pc-windows-gnu       mingw-w64's linker; run under Wine (wine64)
#   aarch64-unknown-linux-gnu   Debian's aarch64 gcc; run under qemu-user (qemu-aarch64-static)
#   x86_64-unknown-linux-musl   musl-tools' musl-gcc; run natively (a static binary)
# On each: the core's unit tests (`cargo test -p loaderx-core --lib`), the CLI's round trip
# (convert a .npy, info, verify, export, partition) with the target's own binary, the C ABI's
# self-tests (tests/c/store.c and chunker.c against the target's static library), and the
# fixtures alike: a store written on Linux x86-64 reads on the target and the reverse, the two
# stores byte for byte the same, the partition plans equal. Usage:
#   scripts/cross-test.sh [TARGET...]     (all three when none is named)
# Debian packages it needs: gcc-mingw-w64-x86-64 wine64 gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross qemu-user-static musl-tools (installed when missing, with apt-get).
# With --integration first, the core's integration suite too (crash loops, fault injection,
# cross-process readers: its children run under the same runner, LOADERX_TEST_RUNNER), less
# what the runner cannot show (below, per target). Not here: macOS and Windows arm64 (no runner
# on this machine).
set -euo pipefail
cd "$(dirname "$0")/.."
integration=
if [ "${1:-}" = --integration ]; then integration=1; shift; fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-gnu x86_64-pc-windows-gnu)

need() { # command package...
    command -v "$1" >/dev/null 2>&1 && return
    shift
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") >/dev/null 2>&1 \
        || sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

# A target directory of its own: host and target artifacts never share a fingerprint.
export CARGO_TARGET_DIR=target/cross CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
# This machine's own CLI (Linux x86-64), for the fixtures each target must read and write alike.
cargo build --quiet -p loaderx-cli
host_cli=target/cross/debug/loaderx
host() { "$host_cli" "$@"; }
for target in "${targets[@]}"; do
    unset child_runner
    rustup target list --installed | grep -qx "$target" || rustup target add "$target"
    case "$target" in
        x86_64-pc-windows-gnu)
            need x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
            need wine wine64
            export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
            # The prefix, with the stand-in Wine 8.0 lacks (scripts/lib/wine-prefix.sh).
            . scripts/lib/wine-prefix.sh
            wine_prefix "$PWD/target/cross/wine"
            # A Windows process starts the suite's children itself (Wine runs them): no runner.
            child_runner=
            ccmd=(x86_64-w64-mingw32-gcc -static)
            clibs=(-lpthread -lkernel32 -ladvapi32 -lntdll -luserenv -lws2_32 -lbcrypt -ldbghelp)
            # Limits on Windows (README's platform table; docs/guide/src/reliability.md): a
            # store's files are opened by path, there being no `openat` (a directory renamed
            # under a handle leads it to the files now at its old path); an index open and
            # mapped is not renamed over under Wine 8 ("Access denied"), so an in-place
            # migration fails, the store left as it was; Wine 8 keeps a file deleted while open
            # under its name until its last handle closes (Windows' deletes before POSIX
            # semantics), so a replaced or failed output's directory can be left beside it
            # (`OUT.old`, `OUT.partial`), its data whole.
            skip=(moved::a_reader_whose_directory_was_renamed_away_reads_its_own_records
                  moved::verify_of_a_moved_reader_checks_its_own_manifest
                  moved::an_operation_whose_directory_is_renamed_away_leaves_the_new_store_alone
                  compact::migration_goes_every_way_and_refuses_compressed_records
                  fixed_stride::migration_between_layouts_keeps_every_record_and_refuses_what_does_not_fit
                  parts::a_part_migrated_after_stitching_is_named_as_such_and_stitches_again
                  safety::migration_refuses_a_manifest_mismatch_and_keeps_the_manifest_it_had
                  convert::overwrite_is_refused_unless_asked_and_a_failed_overwrite_keeps_the_old
                  dataset::a_second_writer_of_the_same_output_is_refused_naming_the_first
                  safety::overwrite_replaces_only_a_loaderx_dataset
                  safety_locks::a_store_created_at_out_during_a_conversion_is_kept)
            exe=.exe ;;
        aarch64-unknown-linux-gnu)
            need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross
            need qemu-aarch64-static qemu-user-static
            export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
            export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
            export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
            export LOADERX_TEST_CC=aarch64-linux-gnu-gcc
            ccmd=(aarch64-linux-gnu-gcc) clibs=(-pthread -ldl -lm)
            # qemu-user 7.2 takes madvise as a no-op (the cold tests count the pages a batch
            # reads: readahead is never turned off) and maps no more than about 16 GiB at once
            # (a 32 GiB file mapping is ENOMEM under it, natively not; two tests map sparse
            # files of 32 and 512 GiB).
            skip=(cold::a_cold_batch_reads_its_pages_and_not_their_neighbours
                  cold::a_ragged_batch_of_a_cold_store_reads_its_pages
                  tokens_safety::empty_documents_size_nothing
                  v2::a_sparse_index_claiming_billions_of_records_is_refused_on_open)
            exe= ;;
        x86_64-unknown-linux-musl)
            need musl-gcc musl-tools
            export CC_x86_64_unknown_linux_musl=musl-gcc
            export LOADERX_TEST_CC=musl-gcc
            # Not the C self-tests: Rust's static library leaves the unwinder to the program,
            # and musl-gcc's is the host's glibc one (scripts/dist.sh links C with zig's).
            ccmd=() clibs=()
            # A static binary has no dynamic loader: the fault tests' shim, preloaded
            # (LD_PRELOAD) to fail msync, pwrite, fsync and ftruncate, cannot reach it.
            skip=(faults:: faults_sync::)
            exe= ;;
        *) echo "cross-test: no recipe for $target" >&2; exit 2 ;;
    esac
    start=$(date +%s)
    cargo test --quiet --target "$target" -p loaderx-core --lib
    if [ -n "$integration" ]; then
        runner_var="CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUNNER"
        skips=()
        for t in "${skip[@]}"; do skips+=(--skip "$t"); done
        # The cross-process reader's window, long enough for an emulated writer to append.
        LOADERX_TEST_RUNNER="${child_runner-${!runner_var:-}}" LOADERX_CONCURRENCY_MS=10000 \
            cargo test --quiet --target "$target" -p loaderx-core --test integration -- \
            --test-threads 2 "${skips[@]}"
    fi
    cargo build --quiet --target "$target" -p loaderx-cli
    runner_var="CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUNNER"
    runner=${!runner_var:-}
    cli="target/cross/$target/debug/loaderx$exe"
    work=$(mktemp -d)
    # A .npy of 1,000 records of 3x4 float32 (NumPy's format, written here byte for byte).
    python3 - "$work/x.npy" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 3, 4), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
body = b"".join(struct.pack("<f", float(i % 997) / 7) for i in range(12000))
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + body)
PY
    run() { $runner "$cli" "$@"; }
    run convert npy "$work/x.npy" "$work/ds" >/dev/null
    run info "$work/ds" | grep -q "1000"
    run verify "$work/ds" >/dev/null
    run export "$work/ds" "$work/back.npy" >/dev/null
    # The same 48,000 bytes of data (the header's spacing is the exporter's own).
    cmp <(tail -c 48000 "$work/x.npy") <(tail -c 48000 "$work/back.npy")
    seq 1 5000 > "$work/lines.txt"
    # Four contiguous record-aligned ranges ending at the file's end.
    [ "$(run partition "$work/lines.txt" --parts 4 | tr -d '\r' | awk -F'\t' '{ n++; end = $3 } END { print n, end }')" \
        = "4 $(stat -c %s "$work/lines.txt")" ]
    # Across platforms: a store written here reads there and the reverse, each the same bytes
    # back; the two stores are the same files byte for byte; the partition plans are equal.
    host convert npy "$work/x.npy" "$work/ds-host" >/dev/null
    run verify "$work/ds-host" >/dev/null
    run export "$work/ds-host" "$work/there.npy" >/dev/null
    cmp <(tail -c 48000 "$work/x.npy") <(tail -c 48000 "$work/there.npy")
    host verify "$work/ds" >/dev/null
    host export "$work/ds" "$work/here.npy" >/dev/null
    cmp <(tail -c 48000 "$work/x.npy") <(tail -c 48000 "$work/here.npy")
    for f in "$work/ds-host"/*; do
        [ -e "$work/ds/${f##*/}" ] || { echo "cross-test $target: its store lacks ${f##*/}" >&2; exit 1; }
        cmp "$f" "$work/ds/${f##*/}"
    done
    diff <(run partition "$work/lines.txt" --parts 4 | tr -d '\r' | cut -f2-) \
        <(host partition "$work/lines.txt" --parts 4 | cut -f2-)
    # The C ABI's self-tests (tests/c/store.c and chunker.c, which `cargo test -p loaderx-capi`
    # runs on Linux x86-64), built by the target's C compiler against its static library.
    [ ${#ccmd[@]} -gt 0 ] && cargo build --quiet --target "$target" -p loaderx-capi
    for prog in $([ ${#ccmd[@]} -gt 0 ] && echo store chunker); do
        "${ccmd[@]}" -Wall -Wextra -Werror -std=c11 -D_POSIX_C_SOURCE=200809L -I loaderx-capi/include \
            "loaderx-capi/tests/c/$prog.c" -o "$work/$prog$exe" "target/cross/$target/debug/libloaderx_capi.a" \
            "${clibs[@]}"
        mkdir "$work/c-$prog"
        said=$(cd "$work" && $runner "./$prog$exe" selftest "c-$prog" | tr -d '\r' | tail -1)
        case "$said" in
            *" 0 failed") ;;
            *) echo "cross-test $target: tests/c/$prog.c: $said" >&2; exit 1 ;;
        esac
    done
    rm -rf "$work"
    echo "cross-test $target: core unit tests, CLI round trip,$([ ${#ccmd[@]} -gt 0 ] && echo " C self-tests,") fixtures alike ok ($(( $(date +%s) - start )) s)"
done
