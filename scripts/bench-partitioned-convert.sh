#!/usr/bin/env bash
# Partitioned JSONL conversion against one conversion of the whole input: the CPU time (user +
# system) of `loaderx convert jsonl ... --part K --parts N` for K = 0..N-1, run one after
# another, against one `loaderx convert jsonl` of the same input, alternating, ROUNDS times.
#
#   scripts/bench-partitioned-convert.sh [SIZE_MIB (1024)] [PARTS (4)] [ROUNDS (3)]
#
# Needs target/release/loaderx (cargo build --release -p loaderx-cli) and python3 for the input.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib=${1:-1024}
parts=${2:-4}
rounds=${3:-3}
bin=target/release/loaderx
[ -x "$bin" ] || { echo "build it first: cargo build --release -p loaderx-cli" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/loaderx-partbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 - "$work/in.jsonl" "$size_mib" <<'PY'
import random, sys
path, mib = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
target = mib << 20
with open(path, "w") as f:
    written, i = 0, 0
    while written < target:
        line = '{"id":%d,"text":"%s"}\n' % (i, "x" * int(rng.lognormvariate(6.0, 0.8)))
        f.write(line)
        written += len(line)
        i += 1
PY
echo "input: $(du -h "$work/in.jsonl" | cut -f1), $(wc -l < "$work/in.jsonl") lines; $parts parts, $rounds rounds"
cpu() { # the user + system CPU seconds of a command (its rusage as a child)
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")' "$@"
}
for r in $(seq "$rounds"); do
    rm -rf "$work/whole"
    whole=$(cpu "$bin" convert jsonl "$work/in.jsonl" "$work/whole" --codec zstd)
    rm -rf "$work/whole"
    split=0
    for k in $(seq 0 $(( parts - 1 ))); do
        rm -rf "$work/part-$k"
        t=$(cpu "$bin" convert jsonl "$work/in.jsonl" "$work/part-$k" --codec zstd --part "$k" --parts "$parts")
        split=$(awk -v a="$split" -v b="$t" 'BEGIN { print a + b }')
        rm -rf "$work/part-$k"
    done
    awk -v w="$whole" -v s="$split" -v r="$r" -v n="$parts" \
        'BEGIN { printf "round %d: whole %.2f s CPU, %d parts %.2f s CPU, parts / whole %.3f\n", r, w, n, s, s / w }'
done
