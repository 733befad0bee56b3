#!/usr/bin/env bash
# Reliability campaign of issue 7: crash loops, fuzzing and concurrency, each for much longer than
# the test suite runs them. Not part of CI (CI only builds the fuzz targets: `--build-fuzz`).
#
#   scripts/reliability.sh [CRASH_ITERS [FUZZ_SECONDS [CONCURRENCY_MS]]]   (defaults 200 60 10000)
#   scripts/reliability.sh --build-fuzz                                    (CI: build the targets)
#   scripts/reliability.sh --big                            (the 4 GiB chunk boundary, real size;
#                                                            a v2 store of 2^24 + 1,000 records)
#
# Prints `crash MODE: N passed, M failed` per crash mode, executions and findings per fuzz target
# (crashing inputs are kept in fuzz/artifacts/TARGET/), and the concurrency counts. Exits non-zero
# when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
HOST=$(rustc -vV | sed -n 's/^host: //p')
FUZZ_BIN=$CARGO_TARGET_DIR/$HOST/release
TARGETS="meta dict schema journal journal_apply v2_header v2_stride v2_entries manifest storeset npy idx partition partition_files parquet tokens"

# Coverage-guided libFuzzer on stable Rust: the sanitizer-coverage instrumentation cargo-fuzz
# asks for is a set of stable codegen flags; no sanitizer (`-s none`), so no nightly. Building
# for an explicit --target keeps the flags off build scripts and out of the host build cache.
build_fuzz() {
    (cd fuzz && RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
        cargo build --release --target "$HOST" --locked)
}

if [[ ${1:-} == --build-fuzz ]]; then
    build_fuzz
    exit $?
fi

# The 4 GiB chunk boundary through the ordinary CLI, at real size: a raw .npy of 2^20 + 1024 rows
# of 4096 bytes (the frontier of chunk 0 lands exactly on byte 2^32), converted, verified and
# exported back byte for byte. Needs about 13 GiB of free disk under $TMPDIR.
if [[ ${1:-} == --big ]]; then
    cargo build --release -p loaderx-cli || exit 2
    BIG=$(mktemp -d)
    trap 'rm -rf "$BIG"' EXIT
    python3 - "$BIG/big.npy" <<'PY' || exit 2
import os, sys
rows, cols = (1 << 20) + 1024, 4096
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    block = 4096
    for first in range(0, rows, block):
        n = min(block, rows - first)
        # Row i starts with its own index: a record read from the wrong place shows.
        out = bytearray(os.urandom(n * cols))
        for k in range(n):
            out[k * cols:k * cols + 8] = (first + k).to_bytes(8, "little")
        f.write(out)
PY
    bin=$CARGO_TARGET_DIR/release/loaderx
    # v1: 4 GiB chunks, so chunk 0's frontier lands exactly on byte 2^32.
    "$bin" convert npy "$BIG/big.npy" "$BIG/store" --codec raw --format v1 || exit 1
    "$bin" stats "$BIG/store" | grep -E '^(length|chunks) '
    "$bin" verify "$BIG/store" || exit 1
    "$bin" export "$BIG/store" "$BIG/back.npy" || exit 1
    cmp "$BIG/big.npy" "$BIG/back.npy" || exit 1
    echo "big: 4 GiB boundary: every record intact, export byte for byte"
    # The same rows in a v2 store (1 GiB chunks), migrated to v1 and back.
    "$bin" migrate "$BIG/store" --to v2 || exit 1
    "$bin" verify "$BIG/store" || exit 1
    "$bin" export "$BIG/store" "$BIG/back2.npy" --force || exit 1
    cmp "$BIG/big.npy" "$BIG/back2.npy" || exit 1
    echo "big: the 4 GiB store migrated to v2: every record intact, export byte for byte"
    rm -rf "$BIG/store" "$BIG/back.npy" "$BIG/back2.npy"
    # A v2 store past v1's 2^24 records, in a release build.
    LOADERX_BIG_DIR=$BIG cargo test --release -p loaderx-core --test integration -- \
        --ignored --exact v2::a_v2_store_beyond_v1s_record_limit --nocapture || exit 1
    exit 0
fi

ITERS=${1:-200}
FUZZ_SECS=${2:-60}
CONC_MS=${3:-10000}
failed=0
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== build"
# A private copy of the test binary: a rebuild during the campaign must not replace it.
bin=$(cargo test -p loaderx-core --test integration --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
[[ -x $bin ]] || { echo "could not build the integration tests"; exit 2; }
cp "$bin" "$WORK/integration"
build_fuzz || { echo "could not build the fuzz targets"; exit 2; }

echo "== crash loops ($ITERS iterations per mode)"
for test in crash_during_append_leaves_every_committed_record_intact \
    a_killed_deferred_sync_writer_leaves_every_published_record_intact \
    crash_during_delete_and_compaction_leaves_every_committed_record_intact \
    crash_during_conversion_leaves_a_complete_dataset_or_none; do
    out=$(LOADERX_CRASH_ITERS=$ITERS "$WORK/integration" --exact "crash::$test" --nocapture \
        --test-threads=1 2>&1)
    rc=$?
    grep -oE 'crash (seed .*|[a-z.]+( v[12])?: (iteration .*|[0-9]+ passed.*))' <<<"$out"
    grep -qE 'crash [a-z.]+( v[12])?: [0-9]+ passed' <<<"$out" || echo "$test did not report: $(tail -5 <<<"$out")"
    [[ $rc == 0 ]] || failed=1
done

echo "== concurrency (${CONC_MS} ms each)"
for test in readers_in_this_process_verify_every_record_while_a_thread_appends \
    readers_in_another_process_verify_every_record_while_a_writer_appends; do
    out=$(LOADERX_CONCURRENCY_MS=$CONC_MS "$WORK/integration" --exact "crash::$test" --nocapture \
        --test-threads=1 2>&1)
    rc=$?
    grep -oE 'concurrency .*mismatches' <<<"$out" || echo "$test did not report: $(tail -5 <<<"$out")"
    [[ $rc == 0 ]] || { echo "$test FAILED"; failed=1; }
done

echo "== fuzzing (${FUZZ_SECS} s per target)"
printf '%-16s %12s %10s %8s %s\n' target executions corpus findings artifacts
for t in $TARGETS; do
    corpus=fuzz/corpus/$t
    artifacts=fuzz/artifacts/$t
    mkdir -p "$corpus" "$artifacts"
    before=$(find "$artifacts" -type f | wc -l)
    log=$WORK/$t.log
    "$FUZZ_BIN/$t" -max_total_time="$FUZZ_SECS" -print_final_stats=1 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    found=$(($(find "$artifacts" -type f | wc -l) - before))
    printf '%-16s %12s %10s %8s %s\n' "$t" "${execs:-?}" "$(find "$corpus" -type f | wc -l)" "$found" \
        "$([[ $found -gt 0 ]] && echo "$artifacts")"
    if [[ $rc != 0 || $found -gt 0 ]]; then
        failed=1
        grep -m3 -E 'panicked|ERROR|SUMMARY' "$log"
    fi
done

if [[ $failed == 0 ]]; then echo "== all passed"; else echo "== FAILURES (see above)"; fi
exit $failed
